//! Unit tests of the flow queue: DRR fairness, sparse flows first, overflow from the
//! fattest flow, CE marking through the queue, odd packets, a stable head.

use std::time::Duration;

use super::*;
use crate::inner_ip::tests::{checksum_from_scratch, ipv4, ipv6, ports};
use crate::inner_ip::{Ecn, ecn};

pub(super) const KEY: [u64; 2] = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210];
pub(super) const QUANTUM: usize = 1514;
const MS: Duration = Duration::from_millis(1);

pub(super) fn config(max_packets: usize, max_bytes: usize) -> FlowQueueConfig {
    FlowQueueConfig {
        max_packets,
        max_bytes,
        flows: 1024,
        quantum: QUANTUM,
        codel: CodelParams {
            target: 5 * MS,
            interval: 100 * MS,
            max_packet: 1500,
            ecn: true,
        },
        sparse_bytes: 3200,
        fec_sparse_bytes: 0,
    }
}

/// An IPv4 UDP packet of `len` bytes (at least 28) from source port `sport`, TOS `tos`,
/// carrying `serial` after the UDP header.
pub(super) fn udp(sport: u16, len: usize, tos: u8, serial: u32) -> Vec<u8> {
    let mut payload = ports(sport, 53);
    payload.extend_from_slice(&serial.to_be_bytes());
    payload.resize(len.max(32) - 20, 0);
    ipv4(17, tos, 0, &payload)
}

/// The serial `udp` put into a packet.
fn serial(p: &[u8]) -> u32 {
    u32::from_be_bytes([p[28], p[29], p[30], p[31]])
}

/// A source port (from `from` on) whose flow is not `other`'s.
fn port_apart(q: &FlowQueue, other: &[u8], from: u16) -> u16 {
    let taken = q.classify(other);
    (from..)
        .find(|&p| q.classify(&udp(p, 100, 0, 0)) != taken)
        .unwrap()
}

#[test]
fn two_backlogged_flows_share_bytes_within_a_quantum() {
    let mut q = FlowQueue::new(config(100_000, 100 << 20), KEY);
    let a_port = 1000;
    let b_port = port_apart(&q, &udp(a_port, 100, 0, 0), 2000);
    // A sends 1400-byte packets, B 200-byte ones; both stay backlogged throughout.
    for i in 0..400 {
        q.push(Time::ZERO, &udp(a_port, 1400, 0, i));
        for j in 0..7 {
            q.push(Time::ZERO, &udp(b_port, 200, 0, i * 7 + j));
        }
    }
    let (mut a, mut b) = (0i64, 0i64);
    let mut last_was_b = false;
    let mut checked_rounds = 0;
    for _ in 0..1500 {
        let p = q.pop().unwrap();
        let from_a = p.bytes.len() == 1400;
        if from_a && last_was_b {
            // B's turn just ended, so both have had the same number of turns.
            assert!((a - b).abs() <= QUANTUM as i64, "a {a} b {b}");
            checked_rounds += 1;
        }
        if from_a {
            a += 1400;
        } else {
            b += 200;
        }
        last_was_b = !from_a;
        // Within a turn one flow leads by at most a quantum plus a packet.
        assert!((a - b).abs() <= (QUANTUM + 1400) as i64, "a {a} b {b}");
        q.recycle(p.bytes);
    }
    assert!(checked_rounds > 100, "{checked_rounds} rounds");
    assert!(q.flows[q.classify(&udp(a_port, 100, 0, 0))].fifo.len > 0);
    assert!(q.flows[q.classify(&udp(b_port, 100, 0, 0))].fifo.len > 0);
}

#[test]
fn a_sparse_flow_goes_before_the_bulk_backlog() {
    let mut q = FlowQueue::new(config(10_000, 10 << 20), KEY);
    let bulk = 4000;
    for i in 0..500 {
        q.push(Time::ZERO, &udp(bulk, 1400, 0, i));
    }
    let dns = port_apart(&q, &udp(bulk, 100, 0, 0), 5000);
    for k in 0..20u32 {
        for _ in 0..5 {
            let p = q.pop().unwrap();
            assert_eq!(p.bytes.len(), 1400, "bulk between the sparse packets");
        }
        let now = Time::from_millis(u64::from(k));
        q.push(now, &udp(dns, 80, 0, 10_000 + k));
        let head = q.head(now).unwrap();
        assert_eq!(
            serial(&head.bytes),
            10_000 + k,
            "the query jumps 400+ bulk packets"
        );
        assert_eq!(serial(&q.pop().unwrap().bytes), 10_000 + k);
    }
}

/// docs/protocol.md#unordered: a sparse flow may leave the global order unless it is TCP
/// (whose sparse direction, its ACKs, crosses the threshold back and forth with the data);
/// the FEC policy's metering is not the order's and counts TCP like any flow.
#[test]
fn a_sparse_tcp_flow_keeps_the_order_and_a_sparse_udp_flow_may_leave_it() {
    let mut c = config(100, 1 << 20);
    c.fec_sparse_bytes = 3200;
    let mut q = FlowQueue::new(c, KEY);
    let tcp_ack = ipv4(6, 0, 0, &[ports(5201, 40000), vec![0; 16]].concat());
    // IPv6 TCP behind a hop-by-hop header (8 bytes: next header TCP, length 0, PadN).
    let hop_by_hop = [6, 0, 1, 4, 0, 0, 0, 0];
    let tcp_v6 = ipv6(
        0,
        0,
        &[&hop_by_hop[..], &ports(5202, 40001), &[0; 16]].concat(),
    );
    // A later fragment of a TCP packet (offset 16 × 8 bytes): no ports, still TCP.
    let tcp_fragment = ipv4(6, 0, 16, &[0; 64]);
    let ping = udp(7000, 100, 0, 1);
    for (packet, may_leave) in [
        (&tcp_ack, false),
        (&tcp_v6, false),
        (&tcp_fragment, false),
        (&ping, true),
    ] {
        q.push(Time::ZERO, packet);
        let classified = crate::inner_ip::flow_key(packet).is_some();
        let head = q.head(Time::ZERO).unwrap();
        assert_eq!(head.sparse, may_leave, "head of {packet:?}");
        assert_eq!(head.fec_sparse, classified);
        let popped = q.pop().unwrap();
        assert_eq!((popped.sparse, popped.fec_sparse), (may_leave, classified));
    }
}

#[test]
fn overflow_drops_the_oldest_packet_of_the_fattest_flow() {
    let mut q = FlowQueue::new(config(10, 1 << 20), KEY);
    let a = 100;
    let b = port_apart(&q, &udp(a, 100, 0, 0), 200);
    let c = (300..)
        .find(|&p| {
            let f = q.classify(&udp(p, 100, 0, 0));
            f != q.classify(&udp(a, 100, 0, 0)) && f != q.classify(&udp(b, 100, 0, 0))
        })
        .unwrap();
    for i in 0..8 {
        assert!(q.push(Time::ZERO, &udp(a, 500, 0, i)).queued);
    }
    for i in 0..2 {
        assert!(q.push(Time::ZERO, &udp(b, 900, 0, 100 + i)).queued);
    }
    let pushed = q.push(Time::ZERO, &udp(c, 100, 0, 200));
    assert_eq!(
        pushed,
        Pushed {
            queued: true,
            dropped: 1
        }
    );
    assert_eq!((q.len(), q.stats().overflow_drops), (10, 1));
    let mut out = Vec::new();
    while let Some(p) = q.pop() {
        out.push(serial(&p.bytes));
    }
    out.sort_unstable();
    assert_eq!(
        out,
        [1, 2, 3, 4, 5, 6, 7, 100, 101, 200],
        "A's first packet went"
    );
}

#[test]
fn the_byte_bound_holds_and_may_refuse_the_new_packet() {
    let mut q = FlowQueue::new(config(100, 3000), KEY);
    let a = 100;
    let b = port_apart(&q, &udp(a, 100, 0, 0), 200);
    q.push(Time::ZERO, &udp(a, 1400, 0, 1));
    q.push(Time::ZERO, &udp(a, 1400, 0, 2));
    // 3300 bytes: A (2800) is the fattest; its head goes.
    let pushed = q.push(Time::ZERO, &udp(b, 500, 0, 3));
    assert!(pushed.queued);
    assert_eq!(pushed.dropped, 1);
    assert_eq!(q.bytes(), 1900);
    // Larger than the whole bound: refused outright, nothing else dropped.
    let huge = q.push(Time::ZERO, &[0u8; 3001]);
    assert_eq!(huge, Pushed::default());
    assert_eq!((q.bytes(), q.stats().refused), (1900, 1));
    // A new flow whose single packet makes it the fattest loses that packet.
    let c = (300..)
        .find(|&p| {
            let f = q.classify(&udp(p, 100, 0, 0));
            f != q.classify(&udp(a, 100, 0, 0)) && f != q.classify(&udp(b, 100, 0, 0))
        })
        .unwrap();
    let own = q.push(Time::ZERO, &udp(c, 1450, 0, 4));
    assert_eq!(own, Pushed::default(), "its own flow was the fattest");
    assert_eq!((q.len(), q.bytes(), q.stats().refused), (2, 1900, 2));
}

/// One flow, arrivals every millisecond, served every millisecond from `lag` on: a
/// standing queue of `lag`. Returns what came out and the stats.
fn standing_queue(
    cfg: FlowQueueConfig,
    packet: &[u8],
    lag_ms: u64,
) -> (Vec<Vec<u8>>, FlowQueueStats) {
    let mut q = FlowQueue::new(cfg, KEY);
    let mut out = Vec::new();
    for t in 0..2000u64 {
        let now = Time::from_millis(t);
        q.push(now, packet);
        if t >= lag_ms {
            if let Some(p) = q.head(now) {
                out.push(p.bytes.clone());
            }
            if let Some(p) = q.pop() {
                assert_eq!(Some(&p.bytes), out.last(), "pop returns the head shown");
                q.recycle(p.bytes);
            }
        }
    }
    (out, q.stats())
}

#[test]
fn codel_marks_ect_ipv4_with_a_correct_checksum() {
    let packet = udp(7, 1000, 0xb8 | 0b10, 0); // DSCP EF, ECT(0)
    let (out, stats) = standing_queue(config(10_000, 10 << 20), &packet, 20);
    assert!(stats.ce_marks >= 10, "{stats:?}");
    assert_eq!(stats.codel_drops, 0, "ECN-capable: marked, never dropped");
    let marked: Vec<&Vec<u8>> = out.iter().filter(|p| ecn(p) == Some(Ecn::Ce)).collect();
    assert_eq!(marked.len() as u64, stats.ce_marks);
    for p in marked {
        assert_eq!(p[1], 0xbb);
        assert_eq!(
            u16::from_be_bytes([p[10], p[11]]),
            checksum_from_scratch(&p[..20])
        );
    }
}

#[test]
fn codel_marks_ect_ipv6_in_the_traffic_class() {
    let mut rest = ports(7, 9);
    rest.resize(960, 0);
    let packet = ipv6(17, 0x01, &rest); // ECT(1)
    let (out, stats) = standing_queue(config(10_000, 10 << 20), &packet, 20);
    assert!(stats.ce_marks >= 10 && stats.codel_drops == 0, "{stats:?}");
    for p in out.iter().filter(|p| ecn(p) == Some(Ecn::Ce)) {
        assert_eq!(((p[0] & 0x0f) << 4) | (p[1] >> 4), 0x03);
        assert_eq!(p[2..], packet[2..]);
    }
}

#[test]
fn codel_drops_what_it_cannot_mark() {
    let not_ect = udp(7, 1000, 0xb8, 0);
    let (_, stats) = standing_queue(config(10_000, 10 << 20), &not_ect, 20);
    assert!(stats.codel_drops >= 10 && stats.ce_marks == 0, "{stats:?}");
    let mut no_ecn = config(10_000, 10 << 20);
    no_ecn.codel.ecn = false;
    let ect = udp(7, 1000, 0b10, 0);
    let (_, stats) = standing_queue(no_ecn, &ect, 20);
    assert!(stats.codel_drops >= 10 && stats.ce_marks == 0, "{stats:?}");
    // Below target nothing happens.
    let (out, stats) = standing_queue(config(10_000, 10 << 20), &not_ect, 4);
    assert_eq!((stats.codel_drops, stats.ce_marks), (0, 0));
    assert_eq!(out.len(), 2000 - 4);
}

#[test]
fn odd_packets_are_queued_and_forwarded_intact() {
    let v4 = udp(1, 100, 0, 0);
    let mut v6_chain = Vec::new();
    for _ in 0..12 {
        v6_chain.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
    }
    let odd: Vec<Vec<u8>> = vec![
        vec![],
        vec![0x45],
        vec![0x15; 70],
        {
            let mut p = v4.clone();
            p[0] = 0x43;
            p
        },
        v4[..20].to_vec(),
        v4[..22].to_vec(),
        ipv4(17, 0, 100, &[1, 2]),
        ipv4(47, 0, 0, &[0; 30]),
        ipv4(1, 0, 0, &[8, 0, 0, 0]),
        ipv6(60, 0, &v6_chain),
        ipv6(6, 0, &[1]),
        vec![0x60; 39],
    ];
    let mut q = FlowQueue::new(config(100, 1 << 20), KEY);
    for p in &odd {
        assert!(q.push(Time::ZERO, p).queued);
    }
    let unclassified = q.flows.len() - 1;
    assert_eq!(
        q.flows[unclassified].fifo.len, 8,
        "the truncated and non-IP ones"
    );
    let mut out = Vec::new();
    while let Some(p) = q.head(Time::from_millis(1000)).map(|p| p.bytes.clone()) {
        assert_eq!(q.pop().unwrap().bytes, p);
        out.push(p);
    }
    let mut expected = odd.clone();
    expected.sort();
    out.sort();
    assert_eq!(out, expected);
}

#[test]
fn the_head_is_stable_until_pop_or_push() {
    let mut q = FlowQueue::new(config(100, 1 << 20), KEY);
    let a = 1;
    let b = port_apart(&q, &udp(a, 100, 0, 0), 2);
    for i in 0..50 {
        q.push(Time::ZERO, &udp(a, 1000, 0, i));
    }
    let first = serial(&q.head(Time::from_millis(1)).unwrap().bytes);
    // Much later, when CoDel would act on a fresh decision, the same packet is shown.
    for t in [2, 200, 400] {
        assert_eq!(serial(&q.head(Time::from_millis(t)).unwrap().bytes), first);
    }
    assert_eq!(serial(&q.pop().unwrap().bytes), first);
    // A push may change the choice: a new flow goes before A, once A used its quantum.
    assert_eq!(serial(&q.pop().unwrap().bytes), first + 1);
    assert_eq!(
        serial(&q.head(Time::from_millis(400)).unwrap().bytes),
        first + 2
    );
    q.push(Time::from_millis(400), &udp(b, 100, 0, 999));
    assert_eq!(serial(&q.head(Time::from_millis(400)).unwrap().bytes), 999);
}
