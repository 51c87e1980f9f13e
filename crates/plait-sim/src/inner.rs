//! Inner packets: how a simulated packet becomes the IP packet a plait endpoint reads from
//! its TUN device, and back.
//!
//! The bytes are as long as the packet's `size` (so the engine pays for the real packet,
//! whose 40-byte TCP/IP header [`crate::packet::TCP_HEADER`] they fill), at least
//! [`HEADER`]: an IPv4 header without options (protocol TCP or UDP, the addresses of
//! the mobile host's and the server's side, [`MOBILE_SIDE`] and [`SERVER_SIDE`]), then
//! where a transport header starts
//! `flow u32 | kind u8 | flags u8 | payload u16 | a u48 | b u48`, then zeros (a numbered
//! datagram, [`Body::Datagram`], is UDP with its number in `a` and its send time in
//! nanoseconds in `b`). The flow
//! id sits where the ports are, so the send queue's 5-tuple hash
//! (docs/protocol.md#send-queue) tells the simulated flows apart as it would real ones.
//!
//! Invariants: `decode(encode(p, side)) == p` for every packet of at least [`HEADER`]
//! bytes whose sequence numbers and send times fit 48 bits (78 hours of nanoseconds:
//! scenarios last at most a day) and payload 16 bits (smaller packets come back
//! [`HEADER`] bytes long); `decode` never panics.

use std::net::Ipv4Addr;

use crate::packet::{Body, FlowId, Packet, TcpAck, TcpSegment};

/// Bytes of the encoded header: an IPv4 header and 20 bytes of the simulator's own.
pub const HEADER: usize = 40;
const IPV4_HEADER: usize = 20;
const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_UDP: u8 = 3;
const KIND_DATAGRAM: u8 = 4;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const U48_MAX: u64 = (1 << 48) - 1;

/// Inner address of the hosts behind the mobile host's gateway (the tunnel's client).
pub const MOBILE_SIDE: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// Inner address of the hosts behind the proxy's gateway (the tunnel's server).
pub const SERVER_SIDE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// Writes `pkt` as an inner IP packet into `out` (cleared first), sent from the mobile
/// host's side if `from_mobile`, else from the server's. UDP, plait, the CMT baseline's
/// and HMTP's packets are carried as opaque UDP of their size; a plait datagram is not
/// nested.
pub fn encode(pkt: &Packet, from_mobile: bool, out: &mut Vec<u8>) {
    out.clear();
    let (kind, a, b, flags, payload) = match &pkt.body {
        Body::Tcp(s) => (KIND_DATA, s.seq, 0, u8::from(s.retransmit), s.payload),
        Body::TcpAck(ack) => (KIND_ACK, ack.next_expected, ack.echo_seq, 0, 0),
        Body::Datagram { seq, sent_ns } => (KIND_DATAGRAM, *seq, *sent_ns, 0, 0),
        Body::Udp
        | Body::Plait { .. }
        | Body::CmtData(_)
        | Body::CmtSack(_)
        | Body::HmtpData(_)
        | Body::HmtpAck(_) => (KIND_UDP, 0, 0, 0, 0),
    };
    let size = (pkt.size as usize).max(HEADER);
    let (src, dst) = if from_mobile {
        (MOBILE_SIDE, SERVER_SIDE)
    } else {
        (SERVER_SIDE, MOBILE_SIDE)
    };
    let protocol = if matches!(kind, KIND_UDP | KIND_DATAGRAM) {
        PROTO_UDP
    } else {
        PROTO_TCP
    };
    // IPv4: version 4, IHL 5, not ECN-capable (the simulated TCP has no ECN), the total
    // length (saturated: inner packets are far below 64 KiB), TTL 64. The checksum is
    // left zero: nothing on the simulated path verifies it.
    out.extend_from_slice(&[0x45, 0]);
    out.extend_from_slice(&u16::try_from(size).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 64, protocol, 0, 0]);
    out.extend_from_slice(&src.octets());
    out.extend_from_slice(&dst.octets());
    out.extend_from_slice(&pkt.flow.to_be_bytes());
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&u16::try_from(payload).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(&a.min(U48_MAX).to_be_bytes()[2..]);
    out.extend_from_slice(&b.min(U48_MAX).to_be_bytes()[2..]);
    out.resize(size, 0);
}

/// Reads an inner IP packet back into a packet; `None` if it is not one `encode` wrote.
pub fn decode(bytes: &[u8]) -> Option<Packet> {
    let h = bytes.get(..HEADER)?;
    if h[0] != 0x45 {
        return None;
    }
    let t = &h[IPV4_HEADER..];
    let u48_at = |i: usize| {
        let mut v = [0u8; 8];
        v[2..].copy_from_slice(&t[i..i + 6]);
        u64::from_be_bytes(v)
    };
    let flow = FlowId::from_be_bytes(t[0..4].try_into().ok()?);
    let payload = u32::from(u16::from_be_bytes(t[6..8].try_into().ok()?));
    let (a, b) = (u48_at(8), u48_at(14));
    let body = match t[4] {
        KIND_DATA => Body::Tcp(TcpSegment {
            seq: a,
            payload,
            retransmit: t[5] != 0,
        }),
        KIND_ACK => Body::TcpAck(TcpAck {
            next_expected: a,
            echo_seq: b,
        }),
        KIND_UDP => Body::Udp,
        KIND_DATAGRAM => Body::Datagram { seq: a, sent_ns: b },
        _ => return None,
    };
    Some(Packet {
        flow,
        size: u32::try_from(bytes.len()).ok()?,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        for (pkt, from_mobile) in [
            (
                Packet {
                    flow: 7,
                    size: 1540,
                    body: Body::Tcp(TcpSegment {
                        seq: 99,
                        payload: 1500,
                        retransmit: true,
                    }),
                },
                false,
            ),
            (
                Packet {
                    flow: 8,
                    size: 40,
                    body: Body::TcpAck(TcpAck {
                        next_expected: U48_MAX,
                        echo_seq: 99,
                    }),
                },
                true,
            ),
            (
                Packet {
                    flow: 9,
                    size: 200,
                    body: Body::Udp,
                },
                true,
            ),
            (
                Packet {
                    flow: 10,
                    size: 1200,
                    body: Body::Datagram {
                        seq: 12_345,
                        sent_ns: 86_400_000_000_000,
                    },
                },
                false,
            ),
        ] {
            encode(&pkt, from_mobile, &mut buf);
            assert_eq!(buf.len(), pkt.size as usize);
            assert_eq!(decode(&buf), Some(pkt));
        }
        assert_eq!(decode(&[0; 5]), None);
        assert_eq!(decode(&[9; 60]), None);
        assert_eq!(decode(&[0x45; 39]), None);
    }

    #[test]
    fn is_an_ip_packet_of_its_side_with_the_flow_where_the_ports_are() {
        let mut buf = Vec::new();
        let pkt = Packet {
            flow: 0x0102_0304,
            size: 1040,
            body: Body::Tcp(TcpSegment {
                seq: 1,
                payload: 1000,
                retransmit: false,
            }),
        };
        encode(&pkt, true, &mut buf);
        assert_eq!(buf[0] >> 4, 4);
        assert_eq!(u16::from_be_bytes([buf[2], buf[3]]), 1040);
        assert_eq!(buf[9], PROTO_TCP);
        assert_eq!(buf[12..16], MOBILE_SIDE.octets());
        assert_eq!(buf[16..20], SERVER_SIDE.octets());
        assert_eq!(buf[20..24], [1, 2, 3, 4]);
        encode(&pkt, false, &mut buf);
        assert_eq!(buf[12..16], SERVER_SIDE.octets());
    }

    #[test]
    fn small_packets_grow_to_the_header() {
        let mut buf = Vec::new();
        let pkt = Packet {
            flow: 3,
            size: 20,
            body: Body::Udp,
        };
        encode(&pkt, false, &mut buf);
        assert_eq!(buf.len(), HEADER);
        assert_eq!(decode(&buf).map(|p| p.size), Some(HEADER as u32));
    }
}
