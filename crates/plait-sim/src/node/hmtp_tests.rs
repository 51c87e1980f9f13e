//! Tests of the `hmtp` mode's sender and receiver cores, driven directly through a small
//! harness: per path a fixed one-way delay and a deterministic loss pattern, no links.

use std::collections::BTreeMap;
use std::time::Duration;

use plait_fec::{LtEncoder, LtParams};
use plait_proto::Time;

use super::HmtpTransport;
use super::{HmtpConfig, HmtpReceiverCore, HmtpSenderCore};
use crate::packet::{HmtpAck, HmtpData, HmtpFeedback, TcpSegment};
use crate::tcp::TcpConfig;

enum InFlight {
    Data(HmtpData),
    Ack(HmtpAck),
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs a transfer for `secs` simulated seconds; path p drops data packets with
/// probability `loss[p]` (a fixed pseudo-random pattern). Returns both ends.
fn transfer(cfg: &HmtpConfig, loss: &[f64], secs: u64) -> (HmtpSenderCore, HmtpReceiverCore) {
    let tcp = TcpConfig {
        window: 64,
        ..TcpConfig::default()
    };
    let mut tx = HmtpSenderCore::new(cfg.clone(), &tcp);
    let mut rx = HmtpReceiverCore::new(cfg.clone());
    // (deliver at ns, tie-break) -> packet; 20 ms each way; a path sends at most one packet
    // per ms (1000 packets/s), so windows matter.
    let mut flight: BTreeMap<(u64, u64), InFlight> = BTreeMap::new();
    let mut next_free = vec![0u64; cfg.paths];
    let mut n = 0u64;
    let delay = Duration::from_millis(20).as_nanos() as u64;
    let end = secs * 1_000_000_000;
    let mut now = Time::ZERO;
    tx.start(now);
    loop {
        while let Some(d) = tx.poll_send() {
            n += 1;
            let p = usize::from(d.path);
            let depart = next_free[p].max(now.as_nanos()) + 1_000_000;
            next_free[p] = depart;
            let lost = (mix(n ^ (p as u64) << 40) % 10_000) as f64 / 10_000.0 < loss[p];
            if !lost {
                flight.insert((depart + delay, n), InFlight::Data(d));
            }
        }
        let t_next = flight.keys().next().map(|k| k.0);
        let t_timer = tx.next_timeout().map(Time::as_nanos);
        let Some(t) = [t_next, t_timer].into_iter().flatten().min() else {
            break;
        };
        if t > end {
            break;
        }
        now = Time::from_nanos(t);
        if t_timer.is_some_and(|x| x <= t) {
            tx.on_timeout(now);
        }
        while let Some(entry) = flight.first_entry() {
            if entry.key().0 > t {
                break;
            }
            match entry.remove() {
                InFlight::Data(d) => {
                    rx.on_data(now, &d);
                    while let Some(a) = rx.poll_ack() {
                        n += 1;
                        flight.insert((t + delay, n), InFlight::Ack(a));
                    }
                }
                InFlight::Ack(a) => tx.on_ack(now, &a),
            }
        }
    }
    (tx, rx)
}

const TRANSPORTS: [HmtpTransport; 2] = [HmtpTransport::Tcp, HmtpTransport::Sctp];

#[test]
fn chunks_decode_over_lossless_paths() {
    for transport in TRANSPORTS {
        lossless(transport);
    }
}

fn lossless(transport: HmtpTransport) {
    let cfg = HmtpConfig {
        transport,
        ..HmtpConfig::default()
    };
    let (tx, rx) = transfer(&cfg, &[0.0, 0.0], 20);
    let st = rx.stats();
    // Two paths of 1000 packets/s for 20 s: about 40k symbols, about 35 chunks of 1137.
    assert!(st.decoded >= 25, "{st:?}");
    assert_eq!(st.corrupt, 0);
    assert_eq!(st.rejected, 0);
    assert_eq!(tx.stats().refills, 0);
    assert!(tx.stats().chunks_done >= st.decoded - 1, "{:?}", tx.stats());
    // Lossless paths: about k' symbols per chunk (those of a chunk still in flight when it
    // decodes are late), never more than max_open chunks.
    assert!(st.symbols as f64 / (st.decoded as f64) < 1.2 * f64::from(cfg.k_prime));
    assert!(tx.open_chunks() <= cfg.max_open);
}

#[test]
fn chunks_decode_over_lossy_paths_without_retransmission() {
    for transport in TRANSPORTS {
        lossy(transport);
    }
}

fn lossy(transport: HmtpTransport) {
    let cfg = HmtpConfig {
        transport,
        ..HmtpConfig::default()
    };
    let (tx, rx) = transfer(&cfg, &[0.01, 0.2], 30);
    let st = rx.stats();
    // NewReno at 1 % and 20 % loss over a 40 ms RTT: about 250 packets/s together.
    assert!(st.decoded >= 4, "{transport:?} {st:?} {:?}", tx.stats());
    assert_eq!(st.corrupt, 0);
    assert_eq!(st.rejected, 0);
    // Losses were refilled with fresh symbols, never resent: every symbol the decoders saw
    // was distinct (a repeated id would have been redundant, not counted as new).
    assert!(tx.stats().refills > 0, "{:?}", tx.stats());
    assert!(
        tx.tracked_segments() <= 2 * 64 + 64,
        "{}",
        tx.tracked_segments()
    );
    assert!(rx.active_chunks() <= cfg.rx_window as usize);
}

fn data(chunk: u32, seq: u64, symbol: Vec<u8>) -> HmtpData {
    HmtpData {
        path: 0,
        seg: TcpSegment {
            seq,
            payload: 1000,
            retransmit: false,
        },
        chunk: Some(chunk),
        symbol,
    }
}

#[test]
fn reports_count_per_chunk_and_carry_the_decoders_verdict() {
    let cfg = HmtpConfig {
        paths: 1,
        transport: HmtpTransport::Tcp,
        ..HmtpConfig::default()
    };
    let mut rx = HmtpReceiverCore::new(cfg.clone());
    let mut enc = LtEncoder::new(cfg.lt_params(0), &cfg.source(0)).expect("params");
    let mut other = LtEncoder::new(cfg.lt_params(1), &cfg.source(1)).expect("params");
    let mut buf = Vec::new();
    let mut seq = 0;
    let mut decoded_at = None;
    for id in 0..3000u32 {
        enc.encode_into(id, &mut buf);
        let done = rx.on_data(Time::ZERO, &data(0, seq, buf.clone()));
        seq += 1;
        let ack = rx.poll_ack().expect("one ACK per segment");
        assert!(rx.poll_ack().is_none());
        assert_eq!(
            ack.feedback,
            HmtpFeedback::Tcp(crate::packet::TcpAck {
                next_expected: seq,
                echo_seq: seq - 1
            })
        );
        let r = ack.report.expect("a report");
        assert_eq!(r.chunk, 0);
        if done == 1 {
            assert!(r.decoded);
            assert_eq!(r.received, id + 1);
            decoded_at = Some(id + 1);
            break;
        }
        assert!(!r.decoded);
        assert_eq!(r.received, id + 1);
        // Interleave a symbol of chunk 1: its own count.
        if id % 4 == 0 {
            other.encode_into(id, &mut buf);
            rx.on_data(Time::ZERO, &data(1, seq, buf.clone()));
            seq += 1;
            let r = rx.poll_ack().and_then(|a| a.report).expect("report");
            assert_eq!((r.chunk, r.received, r.decoded), (1, id / 4 + 1, false));
        }
    }
    let n = decoded_at.expect("chunk 0 decodes");
    assert!((1000..2000).contains(&n), "{n}");
    assert_eq!(rx.stats().decoded, 1);
    assert_eq!(rx.base(), 1);
    // A late symbol of chunk 0 is answered "decoded" without a decoder.
    enc.encode_into(5000, &mut buf);
    rx.on_data(Time::ZERO, &data(0, seq, buf.clone()));
    let r = rx.poll_ack().and_then(|a| a.report).expect("report");
    assert!(r.decoded);
    assert_eq!(rx.stats().late, 1);
    assert_eq!(rx.active_chunks(), 1);
}

#[test]
fn hostile_input_is_dropped_within_the_memory_bound() {
    for transport in TRANSPORTS {
        hostile(transport);
    }
}

fn hostile(transport: HmtpTransport) {
    let cfg = HmtpConfig {
        paths: 2,
        transport,
        sctp_rwnd: 256,
        ..HmtpConfig::default()
    };
    let mut rx = HmtpReceiverCore::new(cfg.clone());
    let mut seq = [0u64; 2];
    for i in 0..20_000u64 {
        let z = mix(i);
        let path = (z % 3) as u8; // path 2 does not exist
        let chunk = (z >> 8) as u32 % 64; // far beyond the window too
        let len = match z % 5 {
            0 => 0,
            1 => 3,
            2 => 4 + cfg.symbol_size + 7,
            _ => 4 + cfg.symbol_size,
        };
        let symbol: Vec<u8> = (0..len).map(|j| mix(z ^ j as u64) as u8).collect();
        let s = seq.get_mut(usize::from(path)).map_or(0, |s| {
            *s += 1 + (z >> 40) % 3;
            *s
        });
        let far = if z.is_multiple_of(97) { 1 << 40 } else { s };
        let d = HmtpData {
            path,
            seg: TcpSegment {
                seq: far,
                payload: 1000,
                retransmit: false,
            },
            chunk: Some(chunk),
            symbol,
        };
        rx.on_data(Time::ZERO, &d);
        while rx.poll_ack().is_some() {}
        assert!(rx.active_chunks() <= cfg.rx_window as usize);
    }
    let st = rx.stats();
    assert!(st.dropped_segments > 0, "{st:?}");
    assert!(st.out_of_window > 0, "{st:?}");
    assert!(st.rejected > 0, "{st:?}");
    assert_eq!(st.decoded + st.corrupt, 0, "{st:?}");
}

#[test]
fn the_sender_refills_losses_and_closes_decoded_chunks() {
    let cfg = HmtpConfig {
        paths: 1,
        transport: HmtpTransport::Tcp,
        max_open: 2,
        k: 100,
        k_prime: 130,
        ..HmtpConfig::default()
    };
    let tcp = TcpConfig {
        window: 64,
        syn: false,
        ..TcpConfig::default()
    };
    let mut tx = HmtpSenderCore::new(cfg.clone(), &tcp);
    tx.start(Time::ZERO);
    let mut sent = Vec::new();
    while let Some(d) = tx.poll_send() {
        sent.push(d);
    }
    assert_eq!(sent.len(), 2, "the initial window");
    assert!(sent.iter().all(|d| d.chunk == Some(0)));
    // The two symbols are distinct LT packets of chunk 0 (ids 0 and 1).
    assert_ne!(sent[0].symbol, sent[1].symbol);
    assert_eq!(sent[0].symbol.len(), LtParams::hmtp(16, 0).packet_len());
    // The receiver reports chunk 0 decoded: it closes.
    let ack = HmtpAck {
        path: 0,
        feedback: HmtpFeedback::Tcp(crate::packet::TcpAck {
            next_expected: 1,
            echo_seq: 0,
        }),
        report: Some(crate::packet::ChunkReport {
            chunk: 0,
            received: 1,
            decoded: true,
        }),
    };
    tx.on_ack(Time::from_millis(50), &ack);
    assert_eq!(tx.stats().chunks_done, 1);
    let next: Vec<HmtpData> = std::iter::from_fn(|| tx.poll_send()).collect();
    assert!(!next.is_empty());
    assert!(next.iter().all(|d| d.chunk == Some(1)), "the next chunk");
    // A report that the chunk holds its goal without decoding asks for alpha more.
    let ack = HmtpAck {
        report: Some(crate::packet::ChunkReport {
            chunk: 1,
            received: cfg.k_prime,
            decoded: false,
        }),
        ..ack.clone()
    };
    tx.on_ack(Time::from_millis(60), &ack);
    assert_eq!(tx.stats().alpha_rounds, 1);
    assert!(tx.open_chunks() <= cfg.max_open);
}

#[test]
fn the_sctp_receiver_sacks_every_packet_and_drops_beyond_its_window() {
    let cfg = HmtpConfig {
        paths: 2,
        transport: HmtpTransport::Sctp,
        sctp_rwnd: 8,
        ..HmtpConfig::default()
    };
    let mut rx = HmtpReceiverCore::new(cfg.clone());
    let mut enc = LtEncoder::new(cfg.lt_params(0), &cfg.source(0)).expect("params");
    let mut buf = Vec::new();
    // TSNs 0, 2, 3 arrive (1 is missing); then TSN 20, beyond cumulative point + 8.
    for (i, tsn) in [0u64, 2, 3, 20].into_iter().enumerate() {
        enc.encode_into(i as u32, &mut buf);
        let mut d = data(0, tsn, buf.clone());
        d.path = (tsn % 2) as u8;
        rx.on_data(Time::ZERO, &d);
        let ack = rx.poll_ack().expect("a SACK per packet");
        assert!(rx.poll_ack().is_none());
        assert_eq!(ack.path, d.path, "back on the path the data came on");
        let HmtpFeedback::Sack(sack) = &ack.feedback else {
            panic!("a SACK, not a TCP ACK");
        };
        assert_eq!(sack.next_expected, 1);
        if tsn == 20 {
            assert_eq!(ack.report, None, "dropped: no report");
        } else {
            let r = ack.report.expect("report");
            assert_eq!((r.chunk, r.received, r.decoded), (0, i as u32 + 1, false));
        }
    }
    assert_eq!(rx.stats().dropped_segments, 1);
    assert_eq!(rx.stats().symbols, 3);
}
