//! Tests of the inner-packet reader: 5-tuples of IPv4 and IPv6 packets (with extension
//! headers and fragments), packets that have none, ECN marking with a checksum recomputed
//! from scratch, and any bytes at all never panicking.

use proptest::prelude::*;

use super::*;

/// An IPv4 header (no options) with a correct checksum, then `payload`.
pub(crate) fn ipv4(protocol: u8, tos: u8, frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut p = vec![0x45, tos];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0x12, 0x34]); // identification
    p.extend_from_slice(&frag.to_be_bytes());
    p.extend_from_slice(&[64, protocol, 0, 0]);
    p.extend_from_slice(&[10, 0, 0, 1, 192, 0, 2, 7]);
    let c = checksum_from_scratch(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// An IPv6 fixed header with `traffic_class` and `next`, then `rest`.
pub(crate) fn ipv6(next: u8, traffic_class: u8, rest: &[u8]) -> Vec<u8> {
    let mut p = vec![
        0x60 | (traffic_class >> 4),
        (traffic_class << 4) | 0x0a,
        0xbc,
        0xde,
    ];
    p.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    p.extend_from_slice(&[next, 64]);
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    p.extend_from_slice(rest);
    p
}

/// A transport header starting with `sport`, `dport`, then four more bytes.
pub(crate) fn ports(sport: u16, dport: u16) -> Vec<u8> {
    let mut t = sport.to_be_bytes().to_vec();
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 8, 0, 0]);
    t
}

/// The IPv4 header checksum computed from nothing but the header (checksum field as zero),
/// independently of the code under test.
pub(crate) fn checksum_from_scratch(header: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, pair) in header.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        sum += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[test]
fn ipv4_udp_and_tcp_have_five_tuples() {
    let k = flow_key(&ipv4(17, 0, 0, &ports(5353, 53))).unwrap();
    assert_eq!(k.protocol(), 17);
    assert_eq!(k.ports(), Some((5353, 53)));
    assert_eq!(
        k.as_bytes(),
        &[4, 17, 10, 0, 0, 1, 192, 0, 2, 7, 0x14, 0xe9, 0, 53]
    );
    let tcp = flow_key(&ipv4(6, 0, 0, &ports(40000, 443))).unwrap();
    assert_eq!(tcp.ports(), Some((40000, 443)));
    for protocol in [132, 136, 33] {
        let k = flow_key(&ipv4(protocol, 0, 0, &ports(1, 2))).unwrap();
        assert_eq!(k.ports(), Some((1, 2)), "protocol {protocol}");
    }
}

#[test]
fn ipv4_without_ports_keys_on_addresses_and_protocol() {
    // ICMP echo: no ports; GRE: unknown to the reader.
    for protocol in [1, 47] {
        let k = flow_key(&ipv4(protocol, 0, 0, &[8, 0, 0, 0, 1, 2, 3, 4])).unwrap();
        assert_eq!(k.protocol(), protocol);
        assert_eq!(k.ports(), None);
    }
    // A non-first fragment (offset 185 × 8) of a UDP datagram: its bytes are not a header.
    let later = flow_key(&ipv4(17, 0, 185, &ports(5353, 53))).unwrap();
    assert_eq!(later.ports(), None);
    // The first fragment (offset 0, more fragments) still has its ports.
    let first = flow_key(&ipv4(17, 0, 0x2000, &ports(5353, 53))).unwrap();
    assert_eq!(first.ports(), Some((5353, 53)));
    assert_ne!(later, first);
}

#[test]
fn ipv4_with_options_reads_ports_after_them() {
    let mut p = ipv4(17, 0, 0, &[]);
    p[0] = 0x46; // IHL 6: one option word
    p.extend_from_slice(&[1, 1, 1, 0]);
    p.extend_from_slice(&ports(7, 9));
    assert_eq!(flow_key(&p).unwrap().ports(), Some((7, 9)));
}

#[test]
fn ipv6_walks_extension_headers_to_the_ports() {
    // hop-by-hop (8 bytes) -> destination options (16 bytes) -> TCP
    let mut rest = vec![60, 0, 0, 0, 0, 0, 0, 0];
    rest.extend_from_slice(&[6, 1]);
    rest.extend_from_slice(&[0; 14]);
    rest.extend_from_slice(&ports(1234, 80));
    let k = flow_key(&ipv6(0, 0, &rest)).unwrap();
    assert_eq!(k.protocol(), 6);
    assert_eq!(k.ports(), Some((1234, 80)));
    assert_eq!(k.as_bytes().len(), 38);
    // AH (payload length 1: (1 + 2) × 4 = 12 bytes) -> UDP
    let mut ah = vec![17, 1];
    ah.extend_from_slice(&[0; 10]);
    ah.extend_from_slice(&ports(4500, 4500));
    assert_eq!(
        flow_key(&ipv6(51, 0, &ah)).unwrap().ports(),
        Some((4500, 4500))
    );
}

#[test]
fn ipv6_fragments() {
    let fragment = |offset_units: u16| {
        let mut rest = vec![17, 0];
        rest.extend_from_slice(&((offset_units << 3) | 1).to_be_bytes());
        rest.extend_from_slice(&[0, 0, 0, 9]);
        rest.extend_from_slice(&ports(53, 5353));
        ipv6(44, 0, &rest)
    };
    let first = flow_key(&fragment(0)).unwrap();
    assert_eq!((first.protocol(), first.ports()), (17, Some((53, 5353))));
    let later = flow_key(&fragment(100)).unwrap();
    assert_eq!((later.protocol(), later.ports()), (17, None));
}

#[test]
fn ipv6_extension_chain_past_the_bound_has_no_ports() {
    let mut rest = Vec::new();
    for _ in 0..MAX_EXTENSION_HEADERS + 2 {
        rest.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
    }
    let k = flow_key(&ipv6(60, 0, &rest)).unwrap();
    assert_eq!((k.protocol(), k.ports()), (60, None));
    // ESP: the rest is encrypted.
    let esp = flow_key(&ipv6(50, 0, &[1, 2, 3, 4, 5, 6, 7, 8])).unwrap();
    assert_eq!((esp.protocol(), esp.ports()), (50, None));
}

#[test]
fn unclassifiable_packets_have_no_key() {
    let udp = ipv4(17, 0, 0, &ports(1, 2));
    let v6 = ipv6(6, 0, &ports(1, 2));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("one byte", vec![0x45]),
        ("not IP", vec![0x15; 60]),
        ("IHL below 5", {
            let mut p = udp.clone();
            p[0] = 0x44;
            p
        }),
        ("IPv4 header cut", udp[..19].to_vec()),
        ("IPv4 options cut", {
            let mut p = udp.clone();
            p[0] = 0x4f;
            p
        }),
        ("UDP ports cut", udp[..22].to_vec()),
        ("IPv6 header cut", v6[..39].to_vec()),
        ("TCP ports cut", v6[..41].to_vec()),
        ("extension header cut", ipv6(0, 0, &[6])),
        ("fragment header cut", ipv6(44, 0, &[17, 0, 0])),
    ];
    for (name, p) in cases {
        assert_eq!(flow_key(&p), None, "{name}");
    }
}

#[test]
fn ecn_codepoints_are_read() {
    for (bits, e) in [
        (0, Ecn::NotEct),
        (1, Ecn::Ect1),
        (2, Ecn::Ect0),
        (3, Ecn::Ce),
    ] {
        assert_eq!(ecn(&ipv4(6, 0xb8 | bits, 0, &[])), Some(e));
        assert_eq!(ecn(&ipv6(6, 0xb8 | bits, &[])), Some(e));
    }
    assert_eq!(ecn(&[0x45, 2]), None, "IPv4 header cut");
    assert_eq!(ecn(&[0x60, 0x20, 0, 0]), None, "IPv6 header cut");
    assert_eq!(ecn(&[0x20; 40]), None, "not IP");
}

#[test]
fn ce_marking_ipv4_keeps_a_correct_checksum() {
    for tos in [0x01, 0x02, 0xb9, 0xfe, 0x4a] {
        let mut p = ipv4(17, tos, 0x4000, &ports(1000, 2000));
        let before = p.clone();
        assert!(mark_ce(&mut p));
        assert_eq!(ecn(&p), Some(Ecn::Ce));
        assert_eq!(p[1], tos | 0b11, "DSCP kept");
        assert_eq!(
            u16::from_be_bytes([p[10], p[11]]),
            checksum_from_scratch(&p[..20]),
            "tos {tos:#x}"
        );
        let changed: Vec<usize> = (0..p.len()).filter(|&i| p[i] != before[i]).collect();
        assert!(
            changed.iter().all(|i| [1, 10, 11].contains(i)),
            "{changed:?}"
        );
    }
}

#[test]
fn ce_marking_ipv6_sets_the_traffic_class() {
    for tc in [0x01u8, 0x02, 0xb9, 0xfe] {
        let mut p = ipv6(17, tc, &ports(1, 2));
        let before = p.clone();
        assert!(mark_ce(&mut p));
        let new_tc = ((p[0] & 0x0f) << 4) | (p[1] >> 4);
        assert_eq!(new_tc, tc | 0b11);
        assert_eq!(p[1] & 0x0f, before[1] & 0x0f, "flow label kept");
        assert_eq!(p[2..], before[2..]);
    }
}

#[test]
fn not_ect_and_non_ip_are_not_marked() {
    let mut v4 = ipv4(6, 0xb8, 0, &[]);
    let mut v6 = ipv6(6, 0xb8, &[]);
    let mut junk = vec![0x15; 50];
    let (a, b, c) = (v4.clone(), v6.clone(), junk.clone());
    assert!(!mark_ce(&mut v4) && !mark_ce(&mut v6) && !mark_ce(&mut junk));
    assert_eq!((v4, v6, junk), (a, b, c), "untouched");
    let mut ce = ipv4(6, 0xbb, 0, &[]);
    let before = ce.clone();
    assert!(mark_ce(&mut ce), "CE already: counts as marked");
    assert_eq!(ce, before);
}

proptest! {
    #[test]
    fn any_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let _ = flow_key(&bytes);
        let _ = ecn(&bytes);
        let len = bytes.len();
        let _ = mark_ce(&mut bytes);
        prop_assert_eq!(bytes.len(), len);
    }

    #[test]
    fn any_ip_looking_bytes_never_panic(
        version in prop_oneof![Just(0x40u8), Just(0x60u8)],
        mut bytes in proptest::collection::vec(any::<u8>(), 1..200),
    ) {
        bytes[0] = version | (bytes[0] & 0x0f);
        let _ = flow_key(&bytes);
        let _ = mark_ce(&mut bytes);
    }

    /// Marking any valid IPv4 header (any TOS, options, fields) leaves a checksum equal to
    /// one computed from scratch.
    #[test]
    fn ipv4_marking_checksum_matches_recomputation(
        ihl in 5u8..=15,
        ect in 1u8..=2,
        mut header in proptest::collection::vec(any::<u8>(), 60),
    ) {
        let len = usize::from(ihl) * 4;
        header.truncate(len);
        header[0] = 0x40 | ihl;
        header[1] = (header[1] & !0b11) | ect;
        let c = checksum_from_scratch(&header);
        header[10..12].copy_from_slice(&c.to_be_bytes());
        prop_assert!(mark_ce(&mut header));
        let now = u16::from_be_bytes([header[10], header[11]]);
        prop_assert_eq!(now, checksum_from_scratch(&header));
    }
}
