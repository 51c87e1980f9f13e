//! Unit tests of the `bmp` reorder policy: release order, each kind of loss evidence, the
//! derived hole deadline, late arrivals, the bound, and paced release.

use std::time::Duration;

use super::{Arrival, Bmp, ReleasePacing, Released, ReorderBuffer, ReorderConfig};
use crate::ids::PathId;
use crate::time::Time;

const A: PathId = PathId(0);
const B: PathId = PathId(1);

fn ms(m: u64) -> Time {
    Time::from_millis(m)
}

fn us(u: u64) -> Time {
    Time::from_micros(u)
}

fn arrival(seq: u64, path: PathId, prev: Option<u64>, send_us: u32) -> Arrival {
    Arrival {
        global_seq: seq,
        path,
        path_seq: seq,
        prev_on_path: prev,
        send_ts_us: send_us,
    }
}

fn payload(seq: u64) -> Vec<u8> {
    vec![seq as u8; 20]
}

/// No release pacing, and a 2 ms hold margin so the deadline arithmetic below is exact.
fn no_pacing() -> ReorderConfig {
    ReorderConfig {
        pacing: None,
        hold_margin: Duration::from_millis(2),
        ..ReorderConfig::default()
    }
}

/// Inserts `seq` on path A at `now` (send timestamp = `now` in µs, no predecessor).
fn put(b: &mut Bmp, now: Time, seq: u64) {
    b.insert(
        now,
        &arrival(seq, A, None, now.wire_micros()),
        &payload(seq),
    );
}

/// Polls until `None`, checking payloads.
fn drain(b: &mut Bmp, now: Time) -> Vec<Released> {
    let mut out = [0u8; 2048];
    let mut got = Vec::new();
    while let Some(r) = b.poll_release(now, &mut out) {
        assert_eq!(&out[..r.len], &payload(r.global_seq)[..r.len]);
        got.push(r);
    }
    got
}

fn seqs(rs: &[Released]) -> Vec<u64> {
    rs.iter().map(|r| r.global_seq).collect()
}

#[test]
fn in_order_packets_leave_at_once() {
    let mut b = Bmp::new(ReorderConfig::default());
    for s in 0..100 {
        put(&mut b, ms(s), s);
        let got = drain(&mut b, ms(s));
        assert_eq!(seqs(&got), [s]);
        assert!(!got[0].late);
        assert_eq!(got[0].held_for, Duration::ZERO);
        assert_eq!(b.next_deadline(), None);
    }
    let st = b.stats();
    assert_eq!((st.inserted, st.released, st.lost_total()), (100, 100, 0));
    assert_eq!(st.max_held_packets, 1);
}

#[test]
fn hole_filled_late_releases_in_order() {
    let mut b = Bmp::new(no_pacing());
    put(&mut b, ms(1), 1);
    put(&mut b, ms(2), 2);
    assert!(drain(&mut b, ms(2)).is_empty());
    assert_eq!((b.held_packets(), b.held_bytes()), (2, 40));
    put(&mut b, ms(5), 0);
    let got = drain(&mut b, ms(5));
    assert_eq!(seqs(&got), [0, 1, 2]);
    assert_eq!(got[1].held_for, Duration::from_millis(4));
    assert!(got.iter().all(|r| !r.late));
    assert_eq!(b.stats().lost_total(), 0);
    assert_eq!(b.held_packets(), 0);
}

#[test]
fn path_predecessor_declares_loss_at_the_successors_arrival() {
    let mut b = Bmp::new(no_pacing());
    b.set_paths(ms(0), &[A, B]);
    // 0 and 2 go on A, 1 on B. 0 is lost; 1 arrives, then 2 naming 0 as its predecessor.
    b.insert(ms(10), &arrival(1, B, None, 0), &payload(1));
    assert!(drain(&mut b, ms(10)).is_empty());
    b.insert(ms(12), &arrival(2, A, Some(0), 0), &payload(2));
    let got = drain(&mut b, ms(12));
    assert_eq!(seqs(&got), [1, 2]);
    let st = b.stats();
    assert_eq!(st.lost_predecessor, 1);
    assert_eq!(st.lost_total(), 1);
    assert_eq!(
        st.loss_detect_nanos_max, 2_000_000,
        "first seen when 1 arrived"
    );
}

#[test]
fn comparison_declares_loss_once_every_path_passed() {
    let mut b = Bmp::new(no_pacing());
    b.set_paths(ms(0), &[A, B]);
    b.insert(ms(1), &arrival(2, A, None, 0), &payload(2));
    assert!(drain(&mut b, ms(1)).is_empty(), "B may still carry 0 and 1");
    b.insert(ms(3), &arrival(3, B, None, 0), &payload(3));
    assert_eq!(b.next_deadline(), Some(ms(1)), "immediately releasable");
    assert_eq!(seqs(&drain(&mut b, ms(3))), [2, 3]);
    assert_eq!(b.stats().lost_comparison, 2);
    assert_eq!(b.stats().loss_detect_nanos_sum, 2 * 2_000_000);
}

#[test]
fn removing_a_path_lets_comparison_conclude() {
    let mut b = Bmp::new(no_pacing());
    b.set_paths(ms(0), &[A, B]);
    b.insert(ms(1), &arrival(1, A, None, 0), &payload(1));
    assert!(drain(&mut b, ms(2)).is_empty());
    b.set_paths(ms(2), &[A]);
    assert_eq!(seqs(&drain(&mut b, ms(2))), [1]);
    assert_eq!(b.stats().lost_comparison, 1);
}

/// Feeds `n` datagrams per path with constant offsets: A 10 ms, B 60 ms. The sender's clock
/// is `skew_us` ahead of the receiver's (wrapping), which must not matter.
fn learn_offsets(b: &mut Bmp, skew_us: u32) {
    for k in 0..8u64 {
        let send = (k * 1_000) as u32;
        b.on_datagram(ms(k + 10), A, send.wrapping_add(skew_us));
        b.on_datagram(ms(k + 60), B, send.wrapping_add(skew_us));
    }
}

#[test]
fn timer_fires_at_the_deadline_derived_from_path_offsets() {
    for skew in [0u32, 3_000_000_000, u32::MAX - 50_000] {
        let mut b = Bmp::new(no_pacing());
        b.set_paths(ms(0), &[A, B]);
        learn_offsets(&mut b, skew);
        // 1 is sent at S = 100 ms on A and arrives at 110 ms; 0 is missing. Only B (60 ms)
        // can still carry 0: it arrives by S + 60 ms; the margin is 2 ms.
        let send = 100_000u32.wrapping_add(skew);
        b.insert(ms(110), &arrival(1, A, None, send), &payload(1));
        assert!(drain(&mut b, ms(110)).is_empty());
        assert_eq!(b.next_deadline(), Some(ms(162)), "skew {skew}");
        assert!(drain(&mut b, us(161_999)).is_empty());
        assert_eq!(seqs(&drain(&mut b, ms(162))), [1]);
        let st = b.stats();
        assert_eq!(st.lost_timer, 1);
        assert_eq!(st.loss_detect_nanos_max, 52_000_000);
    }
}

#[test]
fn a_faster_candidate_path_gives_an_earlier_deadline() {
    let mut b = Bmp::new(no_pacing());
    b.set_paths(ms(0), &[A, B]);
    learn_offsets(&mut b, 0);
    // 1 arrives on B (60 ms, sent at 100 ms); 0 could only be on A (10 ms): due by 110 ms,
    // already past when 1 arrives at 160 ms.
    b.insert(ms(160), &arrival(1, B, None, 100_000), &payload(1));
    assert_eq!(b.next_deadline(), Some(ms(112)));
    assert_eq!(seqs(&drain(&mut b, ms(160))), [1]);
    assert_eq!(b.stats().lost_timer, 1);
}

#[test]
fn timer_waits_max_hold_without_estimates_then_late_arrival_is_flagged() {
    let mut b = Bmp::new(ReorderConfig {
        max_hold: Duration::from_millis(500),
        ..ReorderConfig::default()
    });
    put(&mut b, ms(10), 1);
    assert_eq!(b.next_deadline(), Some(ms(510)));
    assert!(drain(&mut b, us(509_999)).is_empty());
    assert_eq!(seqs(&drain(&mut b, ms(510))), [1]);
    assert_eq!(b.stats().lost_timer, 1);
    assert_eq!(b.next_seq(), 2);
    put(&mut b, ms(600), 0);
    assert_eq!(b.next_deadline(), Some(ms(600)));
    let got = drain(&mut b, ms(600));
    assert_eq!(seqs(&got), [0]);
    assert!(got[0].late);
    assert_eq!(b.stats().late, 1);
    assert_eq!(b.next_seq(), 2);
}

#[test]
fn overflow_forces_out_the_oldest() {
    let mut b = Bmp::new(ReorderConfig {
        max_packets: 4,
        ..no_pacing()
    });
    for s in 1..=4 {
        put(&mut b, ms(s), s);
    }
    assert_eq!(b.held_packets(), 4);
    put(&mut b, ms(5), 5);
    assert_eq!(b.held_packets(), 4);
    assert_eq!(b.stats().lost_overflow, 1, "hole 0");
    assert_eq!(b.queued_packets(), 1);
    let got = drain(&mut b, ms(5));
    assert_eq!(seqs(&got), [1, 2, 3, 4, 5]);
    assert!(got.iter().all(|r| !r.late));
    assert_eq!(b.stats().max_held_packets, 4);
    assert_eq!(
        b.stats().loss_detect_nanos_max,
        4_000_000,
        "0 first seen when 1 arrived"
    );
}

#[test]
fn overflow_by_bytes() {
    let mut b = Bmp::new(ReorderConfig {
        max_bytes: 50,
        ..no_pacing()
    });
    put(&mut b, ms(1), 2);
    put(&mut b, ms(2), 3);
    assert_eq!(b.held_bytes(), 40);
    put(&mut b, ms(3), 5);
    assert_eq!(b.held_bytes(), 40, "2 forced out");
    assert_eq!(b.stats().lost_overflow, 2, "holes 0 and 1");
    assert_eq!(seqs(&drain(&mut b, ms(3))), [2, 3]);
    assert!(b.stats().max_held_bytes <= 50);
    assert_eq!(b.held_packets(), 1, "5 waits for 4");
}

#[test]
fn new_packet_below_every_held_one_is_the_one_forced() {
    let mut b = Bmp::new(ReorderConfig {
        max_packets: 2,
        ..no_pacing()
    });
    put(&mut b, ms(1), 5);
    put(&mut b, ms(2), 6);
    put(&mut b, ms(3), 2);
    assert_eq!(b.held_packets(), 2);
    assert_eq!(b.stats().lost_overflow, 2, "holes 0 and 1");
    assert_eq!(seqs(&drain(&mut b, ms(3))), [2]);
    assert_eq!(b.next_seq(), 3);
    put(&mut b, ms(4), 3);
    put(&mut b, ms(4), 4);
    assert_eq!(seqs(&drain(&mut b, ms(4))), [3, 4, 5, 6]);
}

#[test]
fn oversized_packet_is_released_at_once() {
    let mut b = Bmp::new(ReorderConfig {
        max_bytes: 10,
        ..no_pacing()
    });
    put(&mut b, ms(1), 3);
    assert_eq!(b.held_packets(), 0);
    assert_eq!(b.stats().lost_overflow, 3);
    assert_eq!(seqs(&drain(&mut b, ms(1))), [3]);
    assert_eq!(b.stats().max_held_bytes, 0);
}

#[test]
fn far_jump_is_bounded_by_the_span() {
    let mut b = Bmp::new(ReorderConfig {
        max_packets: 4,
        ..no_pacing()
    });
    put(&mut b, ms(1), 2);
    put(&mut b, ms(2), 1_000_000);
    // The window is 64 numbers: everything below 1_000_000 - 63 is given up.
    assert_eq!(b.next_seq(), 1_000_000 - 63);
    assert_eq!(b.stats().lost_overflow, 1_000_000 - 63 - 1);
    assert_eq!(seqs(&drain(&mut b, ms(2))), [2]);
    assert_eq!(b.held_packets(), 1);
}

#[test]
fn packet_too_large_for_out_is_skipped() {
    let mut b = Bmp::new(no_pacing());
    put(&mut b, ms(1), 0);
    b.insert(ms(1), &arrival(1, A, None, 0), &[1u8; 5]);
    let mut out = [0u8; 10];
    let r = b.poll_release(ms(1), &mut out).expect("1 fits");
    assert_eq!((r.global_seq, r.len), (1, 5));
    assert_eq!(b.poll_release(ms(1), &mut out), None);
    assert_eq!(b.discarded(), 1);
    assert_eq!(b.stats().released, 1);
}

#[test]
fn backlog_freed_by_a_hole_is_paced() {
    let cfg = ReorderConfig {
        pacing: Some(ReleasePacing {
            burst: 4,
            gain: 2.0,
        }),
        ..ReorderConfig::default()
    };
    let mut b = Bmp::new(cfg);
    for s in 1..=50 {
        put(&mut b, ms(s), s);
        assert!(drain(&mut b, ms(s)).is_empty());
    }
    assert_eq!(b.held_packets(), 50);
    put(&mut b, ms(51), 0);
    // Arrivals every 1 ms, gain 2: one token per 500 µs after a burst of 4.
    let mut now = ms(51);
    assert_eq!(seqs(&drain(&mut b, now)), [0, 1, 2, 3]);
    let mut next = 4;
    while b.held_packets() > 0 {
        let t = b.next_deadline().expect("paced packets wait");
        assert_eq!(t, now + Duration::from_micros(500));
        assert!(drain(&mut b, t.saturating_sub(Duration::from_nanos(1))).is_empty());
        now = t;
        let got = drain(&mut b, now);
        assert_eq!(seqs(&got), [next]);
        next += 1;
    }
    assert_eq!(next, 51);
    assert_eq!(b.next_deadline(), None);
}

#[test]
fn steady_flow_is_never_delayed_by_pacing() {
    let mut b = Bmp::new(ReorderConfig::default());
    // Pairs every 2 ms (a packet-pair sender), plus single packets every 1 ms.
    let mut s = 0;
    for k in 0..200u64 {
        let now = us(k * 1_000 + (k % 3) * 100);
        let n = if k % 2 == 0 { 2 } else { 1 };
        for _ in 0..n {
            put(&mut b, now, s);
            s += 1;
        }
        let got = drain(&mut b, now);
        assert_eq!(got.len(), n, "at {now}");
        assert!(got.iter().all(|r| r.held_for == Duration::ZERO));
    }
    assert_eq!(b.held_packets(), 0);
}

#[test]
fn duplicates_and_bogus_predecessors_are_harmless() {
    let mut b = Bmp::new(no_pacing());
    put(&mut b, ms(1), 2);
    put(&mut b, ms(1), 2);
    assert_eq!(b.held_packets(), 1);
    assert_eq!(b.discarded(), 1);
    // A predecessor above the packet itself, or already held, is ignored.
    b.insert(ms(2), &arrival(3, A, Some(7), 0), &payload(3));
    b.insert(ms(2), &arrival(4, A, Some(2), 0), &payload(4));
    assert!(drain(&mut b, ms(2)).is_empty());
    b.insert(ms(3), &arrival(5, A, Some(0), 0), &payload(5));
    assert_eq!(
        seqs(&drain(&mut b, ms(3))),
        [],
        "only 0 named; 1 still awaited"
    );
    assert_eq!(b.stats().lost_predecessor, 1);
    put(&mut b, ms(4), 1);
    assert_eq!(seqs(&drain(&mut b, ms(4))), [1, 2, 3, 4, 5]);
}

#[test]
fn oversized_packet_above_held_ones_loses_none_of_them() {
    let mut b = Bmp::new(ReorderConfig {
        max_packets: 3,
        max_bytes: 60,
        ..no_pacing()
    });
    for s in 1..=3 {
        put(&mut b, ms(s), s);
    }
    b.insert(ms(4), &arrival(4, A, None, 0), &[4u8; 61]);
    assert_eq!(b.held_packets(), 0);
    assert_eq!(b.queued_packets(), 4);
    let mut out = [0u8; 128];
    let got: Vec<_> = std::iter::from_fn(|| b.poll_release(ms(4), &mut out)).collect();
    assert_eq!(seqs(&got), [1, 2, 3, 4]);
    assert_eq!(b.discarded(), 0);
    assert_eq!(b.stats().lost_overflow, 1, "only hole 0");
}

#[test]
fn forced_queue_is_capped_when_nobody_polls() {
    let mut b = Bmp::new(ReorderConfig {
        max_packets: 2,
        ..no_pacing()
    });
    // A permanent hole at 0 and a caller that never polls: held stays at 2, forced at most
    // 2 besides the newest.
    for s in 1..=20 {
        put(&mut b, ms(s), s);
        assert!(b.held_packets() <= 2);
        assert!(b.queued_packets() <= 3);
    }
    let got = drain(&mut b, ms(20));
    assert_eq!(seqs(&got), [16, 17, 18, 19, 20]);
    assert_eq!(b.discarded(), 15);
    assert_eq!(b.stats().lost_overflow, 1 + 15);
}
