//! Packet pacing (docs/protocol.md#packet-pacing): with it, a source faster than the path
//! queues in the session's send queue (where CoDel drops its excess) instead of in the
//! link's drop-tail buffer, so the link's queue and the delay of everything crossing it
//! stay short; without it the link's buffer fills and drops.

mod support;

use std::time::Duration;

use plait_proto::cc::CongestionKind;
use plait_proto::{Config, Time};
use support::{LinkSpec, Pair};

const MS: Duration = Duration::from_millis(1);
const BULK_PORT: u16 = 4000;
const SPARSE_PORT: u16 = 53;

/// An IPv4 UDP packet of `len` bytes from `sport` carrying the time it was handed in.
fn udp(sport: u16, len: usize, sent: Time) -> Vec<u8> {
    let mut p = support::ipv4_udp(sport, len);
    p[28..36]
        .copy_from_slice(&(sent.saturating_since(Time::ZERO).as_micros() as u64).to_be_bytes());
    p
}

fn sent_at(p: &[u8]) -> Time {
    Time::from_micros(u64::from_be_bytes(p[28..36].try_into().unwrap()))
}

struct Outcome {
    /// One-way delays of the sparse flow's packets, sorted.
    sparse: Vec<Duration>,
    /// Datagrams the link's drop-tail buffer dropped.
    link_drops: u64,
    /// Inner packets CoDel dropped in the sender's send queue.
    codel_drops: u64,
    /// Bulk bytes delivered.
    bulk_bytes: usize,
}

/// 2 Mbit/s of bulk plus a 100-byte packet every 50 ms through one 1 Mbit/s, 20 ms path
/// with a 1.6 s drop-tail buffer, for 6 s.
fn run(packet_pacing: bool) -> Outcome {
    let config = Config {
        repair: false,
        congestion: CongestionKind::Bbr,
        packet_pacing,
        ..Config::default()
    };
    let link = LinkSpec {
        rate: 125_000.0,
        delay: 20 * MS,
        loss: 0.0,
        queue_bytes: 200_000,
    };
    let mut pair = Pair::new(config.clone(), config, &[link], &[None], 5);
    let (end, gap) = (Time::from_millis(6000), 4 * MS);
    let mut next = Time::from_millis(100);
    let mut n = 0u32;
    pair.run_until(Time::from_millis(8000), |pair| {
        if next >= end {
            return None;
        }
        if pair.now >= next {
            pair.send_inner(0, &udp(BULK_PORT, 1000, pair.now));
            if n.is_multiple_of(12) {
                pair.send_inner(0, &udp(SPARSE_PORT, 100, pair.now));
            }
            n += 1;
            next += gap;
        }
        Some(next)
    });
    let delivered = pair.take_delivered(0);
    let mut sparse: Vec<Duration> = delivered
        .iter()
        .filter(|(_, p, _)| p[20..22] == SPARSE_PORT.to_be_bytes())
        .map(|(t, p, _)| *t - sent_at(p))
        .collect();
    sparse.sort();
    Outcome {
        sparse,
        link_drops: pair.link_dropped(0).iter().sum(),
        codel_drops: pair.a.stats().inner_codel_dropped,
        bulk_bytes: delivered
            .iter()
            .filter(|(_, p, _)| p[20..22] == BULK_PORT.to_be_bytes())
            .map(|(_, p, _)| p.len())
            .sum(),
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

#[test]
fn a_paced_session_keeps_the_link_queue_short_and_the_sparse_flow_fast() {
    let free = run(false);
    let paced = run(true);
    // Without pacing the link's 1.6 s buffer fills: the sparse flow waits behind it and
    // the link drops the excess.
    assert!(free.link_drops > 100, "{}", free.link_drops);
    assert!(quantile(&free.sparse, 0.9) > 800 * MS, "{:?}", free.sparse);
    // With pacing the excess is dropped by CoDel in the sender, the link barely queues,
    // and the sparse flow crosses in about its path delay.
    assert!(
        paced.link_drops < free.link_drops / 10,
        "{}",
        paced.link_drops
    );
    assert!(paced.codel_drops > 100, "{}", paced.codel_drops);
    assert!(
        quantile(&paced.sparse, 0.9) < 150 * MS,
        "paced p90 {:?}, free p90 {:?}",
        quantile(&paced.sparse, 0.9),
        quantile(&free.sparse, 0.9)
    );
    // And the path stays busy: at least 80 % of what the free-running session delivered
    // (which ran the link flat out).
    assert!(
        paced.bulk_bytes * 5 >= free.bulk_bytes * 4,
        "paced {} free {}",
        paced.bulk_bytes,
        free.bulk_bytes
    );
}

/// What two paths carried for a paced session with a bulk flow beyond the fast path and a
/// sparse flow beside it.
/// From when the sparse flow's packets are judged in [`run_two_paths`]: 1 s after the
/// start, once the send queue's meter has called the flow sparse (two 100 ms windows) and
/// BBR's start-up, which fills the fast link's queue, is over.
const SETTLED: Time = Time::from_millis(1200);

struct TwoPaths {
    /// One-way delays of the sparse flow's packets sent from [`SETTLED`] on, sorted.
    sparse: Vec<Duration>,
    /// Bytes each link delivered towards the receiver.
    link_bytes: Vec<u64>,
    /// Times the head did not take a far path the scheduler chose (`inner_spills_refused`).
    spills_refused: u64,
    /// Sparse packets sent UNORDERED.
    unordered: u64,
}

/// 1000-byte bulk packets at 32 Mbit/s and a 100-byte packet every 12 ms for 4 s, over a
/// 16 Mbit/s path with 10 ms one way and an 8 Mbit/s path with `slow_delay`, paced with
/// BBR, sparse flows unordered.
fn run_two_paths(slow_delay: Duration) -> TwoPaths {
    let config = Config {
        repair: false,
        congestion: CongestionKind::Bbr,
        packet_pacing: true,
        unordered_below_bps: 256_000,
        ..Config::default()
    };
    let fast = LinkSpec {
        rate: 2_000_000.0,
        delay: 10 * MS,
        loss: 0.0,
        queue_bytes: 400_000,
    };
    let slow = LinkSpec {
        rate: 1_000_000.0,
        delay: slow_delay,
        ..fast.clone()
    };
    let mut pair = Pair::new(config.clone(), config, &[fast, slow], &[None, None], 7);
    let (end, gap) = (Time::from_millis(4200), Duration::from_micros(250));
    let mut next = Time::from_millis(200);
    let mut n = 0u32;
    pair.run_until(Time::from_millis(6000), |pair| {
        if next >= end {
            return None;
        }
        if pair.now >= next {
            pair.send_inner(0, &udp(BULK_PORT, 1000, pair.now));
            if n.is_multiple_of(48) {
                pair.send_inner(0, &udp(SPARSE_PORT, 100, pair.now));
            }
            n += 1;
            next += gap;
        }
        Some(next)
    });
    let mut sparse: Vec<Duration> = pair
        .take_delivered(0)
        .iter()
        .filter(|(_, p, _)| p[20..22] == SPARSE_PORT.to_be_bytes())
        .filter(|(_, p, _)| sent_at(p) >= SETTLED)
        .map(|(t, p, _)| *t - sent_at(p))
        .collect();
    sparse.sort();
    TwoPaths {
        sparse,
        link_bytes: pair.link_delivered_bytes(0),
        spills_refused: pair.a.stats().inner_spills_refused,
        unordered: pair.a.stats().inner_unordered,
    }
}

#[test]
fn a_sparse_packet_is_not_held_by_the_pacer_and_takes_the_fast_path() {
    let r = run_two_paths(50 * MS);
    assert!(r.unordered >= 300, "{}", r.unordered);
    assert!(r.sparse.len() >= 250, "{}", r.sparse.len());
    // Not held by the pacers, a sparse packet takes the path that delivers it first: the
    // fast path's 10 ms and the queue paced BBR keeps there, never the slow path's 50 ms.
    // (Held like bulk, it went on whichever path's pacer released first: on the test bed
    // the probe through the tunnel then often crossed T1's 100 ms path. On this virtual
    // link the held version passes too, its slow path rarely having room first; the test
    // pins the property, docs/protocol.md#unordered has the test-bed figures.)
    let worst = r.sparse.last().copied().unwrap_or_default();
    assert!(
        worst < 50 * MS,
        "sparse p50 {:?} max {worst:?}",
        quantile(&r.sparse, 0.5)
    );
}

#[test]
fn the_head_waits_for_a_held_path_rather_than_spill_onto_a_far_slower_one() {
    // 40 ms behind: within the spill budget (the send queue's CoDel interval, 100 ms), so
    // the slow path carries its part of the excess.
    let near = run_two_paths(50 * MS);
    // 190 ms behind: beyond it, so the head waits for the fast path's pacer or window.
    let far = run_two_paths(200 * MS);
    let share = |r: &TwoPaths| r.link_bytes[1] as f64 / r.link_bytes.iter().sum::<u64>() as f64;
    assert!(share(&near) > 0.2, "near {:?}", near.link_bytes);
    assert!(far.spills_refused > 100, "{}", far.spills_refused);
    assert!(
        share(&far) < 0.05,
        "far {:?} waits {}",
        far.link_bytes,
        far.spills_refused
    );
}
