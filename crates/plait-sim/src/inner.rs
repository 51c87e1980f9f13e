//! Inner packets: how a simulated TCP packet becomes the opaque bytes a plait engine
//! carries, and back.
//!
//! The bytes are as long as the packet's `size` (so the engine pays for the real packet),
//! a 26-byte header followed by zeros:
//! `kind u8 | flow u32 | a u64 | b u64 | flags u8 | payload u32`.
//! Invariant: `decode(encode(p)) == p` for every TCP data or ACK packet.

use crate::packet::{Body, FlowId, Packet, TcpAck, TcpSegment};

const HEADER: usize = 26;
const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_UDP: u8 = 3;

/// Writes `pkt` as inner bytes into `out` (cleared first). UDP, plait, the CMT
/// baseline's and HMTP's packets are carried too (as opaque UDP bytes of their size); a plait
/// datagram is not nested.
pub fn encode(pkt: &Packet, out: &mut Vec<u8>) {
    out.clear();
    let (kind, a, b, flags, payload) = match &pkt.body {
        Body::Tcp(s) => (KIND_DATA, s.seq, 0, u8::from(s.retransmit), s.payload),
        Body::TcpAck(ack) => (KIND_ACK, ack.next_expected, ack.echo_seq, 0, 0),
        Body::Udp
        | Body::Plait { .. }
        | Body::CmtData(_)
        | Body::CmtSack(_)
        | Body::HmtpData(_)
        | Body::HmtpAck(_) => (KIND_UDP, 0, 0, 0, 0),
    };
    out.push(kind);
    out.extend_from_slice(&pkt.flow.to_be_bytes());
    out.extend_from_slice(&a.to_be_bytes());
    out.extend_from_slice(&b.to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&payload.to_be_bytes());
    let size = (pkt.size as usize).max(HEADER);
    out.resize(size, 0);
}

/// Reads inner bytes back into a packet; `None` if they are not an encoded packet.
pub fn decode(bytes: &[u8]) -> Option<Packet> {
    let h = bytes.get(..HEADER)?;
    let u64_at = |i: usize| u64::from_be_bytes(h[i..i + 8].try_into().unwrap_or([0; 8]));
    let flow = FlowId::from_be_bytes(h[1..5].try_into().ok()?);
    let (a, b) = (u64_at(5), u64_at(13));
    let payload = u32::from_be_bytes(h[22..26].try_into().ok()?);
    let body = match h[0] {
        KIND_DATA => Body::Tcp(TcpSegment {
            seq: a,
            payload,
            retransmit: h[21] != 0,
        }),
        KIND_ACK => Body::TcpAck(TcpAck {
            next_expected: a,
            echo_seq: b,
        }),
        KIND_UDP => Body::Udp,
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
        for pkt in [
            Packet {
                flow: 7,
                size: 1540,
                body: Body::Tcp(TcpSegment {
                    seq: 99,
                    payload: 1500,
                    retransmit: true,
                }),
            },
            Packet {
                flow: 8,
                size: 40,
                body: Body::TcpAck(TcpAck {
                    next_expected: 100,
                    echo_seq: 99,
                }),
            },
            Packet {
                flow: 9,
                size: 200,
                body: Body::Udp,
            },
        ] {
            encode(&pkt, &mut buf);
            assert_eq!(buf.len(), pkt.size as usize);
            assert_eq!(decode(&buf), Some(pkt));
        }
        assert_eq!(decode(&[0; 5]), None);
        assert_eq!(decode(&[9; 40]), None);
    }
}
