//! CoDel's schedule on scripted sojourn times (RFC 8289 §5): nothing below target, the
//! first drop one interval after the sojourn time went above it, then drops
//! `interval / sqrt(count)` apart; count restoration on a quick return; marks instead of
//! drops for ECN-capable packets; no drop with at most one packet behind the head.

use std::time::Duration;

use super::codel::{Codel, CodelParams, CodelQueue};
use crate::time::Time;

const MS: Duration = Duration::from_millis(1);
const TICK: Duration = Duration::from_micros(100);

fn params() -> CodelParams {
    CodelParams {
        target: 5 * MS,
        interval: 100 * MS,
        max_packet: 1500,
        ecn: true,
    }
}

/// A queue whose head always waited `sojourn` and that always has more behind it.
struct Script {
    now: Time,
    sojourn: Duration,
    backlog: usize,
    ecn_capable: bool,
    dropped: Vec<Time>,
    marked: Vec<Time>,
}

impl Script {
    fn new(ecn_capable: bool) -> Script {
        Script {
            now: Time::ZERO,
            sojourn: Duration::ZERO,
            backlog: 100_000,
            ecn_capable,
            dropped: Vec::new(),
            marked: Vec::new(),
        }
    }
}

impl CodelQueue for Script {
    fn head_arrival(&self) -> Option<Time> {
        Some(self.now.saturating_sub(self.sojourn))
    }
    fn backlog_behind_head(&self) -> usize {
        self.backlog
    }
    fn drop_head(&mut self) {
        self.dropped.push(self.now);
    }
    fn mark_head(&mut self) -> bool {
        if self.ecn_capable {
            self.marked.push(self.now);
        }
        self.ecn_capable
    }
}

/// Serves the head every tick from `from` to `to` (exclusive) with the sojourn time
/// `sojourn(t)`.
fn run(
    codel: &mut Codel,
    q: &mut Script,
    from: Duration,
    to: Duration,
    sojourn: impl Fn(Duration) -> Duration,
) {
    let mut t = from;
    while t < to {
        q.now = Time::ZERO + t;
        q.sojourn = sojourn(t);
        codel.decide(q.now, &params(), q);
        t += TICK;
    }
}

/// The drop times the control law gives from a first drop at `first`: the k-th next drop is
/// due `interval / sqrt(k)` after the previous due time, and happens at the first tick at or
/// after it.
fn schedule(first: Duration, until: Duration) -> Vec<Time> {
    let mut out = vec![Time::ZERO + first];
    let mut due = first;
    for count in 1.. {
        due += Duration::from_nanos((100e6 / f64::from(count).sqrt()) as u64);
        let tick = due.as_nanos().div_ceil(TICK.as_nanos()) as u32 * TICK;
        if tick >= until {
            break;
        }
        out.push(Time::ZERO + tick);
    }
    out
}

#[test]
fn no_drop_below_target() {
    let (mut c, mut q) = (Codel::default(), Script::new(false));
    run(&mut c, &mut q, Duration::ZERO, 10_000 * MS, |_| {
        Duration::from_micros(4_999)
    });
    assert!(q.dropped.is_empty() && !c.dropping());
}

#[test]
fn first_drop_after_an_interval_above_target_then_interval_over_sqrt_count() {
    let (mut c, mut q) = (Codel::default(), Script::new(false));
    // Above target from 50 ms on: the first drop is due at 150 ms.
    run(&mut c, &mut q, Duration::ZERO, 1000 * MS, |t| {
        if t < 50 * MS { MS } else { 10 * MS }
    });
    assert_eq!(q.dropped[0], Time::from_millis(150));
    assert_eq!(q.dropped[1], Time::from_millis(250), "interval / sqrt(1)");
    assert_eq!(q.dropped, schedule(150 * MS, 1000 * MS));
    assert!(q.dropped.len() > 8, "{:?}", q.dropped);
    assert_eq!(c.count() as usize, q.dropped.len());
}

#[test]
fn going_below_target_leaves_the_drop_state() {
    let (mut c, mut q) = (Codel::default(), Script::new(false));
    run(&mut c, &mut q, Duration::ZERO, 500 * MS, |_| 10 * MS);
    assert!(c.dropping());
    let drops = q.dropped.len();
    run(&mut c, &mut q, 500 * MS, 1000 * MS, |_| MS);
    assert!(!c.dropping());
    assert_eq!(q.dropped.len(), drops, "no drop below target");
}

#[test]
fn returning_soon_restores_the_drop_rate() {
    let (mut c, mut q) = (Codel::default(), Script::new(false));
    run(&mut c, &mut q, Duration::ZERO, 1000 * MS, |_| 10 * MS);
    let n = c.count();
    assert!(n > 5);
    // Below target for 50 ms, then above again: re-entry at 1150 ms with count n - 1
    // (the drops of the last cycle less the one it started with).
    run(&mut c, &mut q, 1000 * MS, 1050 * MS, |_| MS);
    let before = q.dropped.len();
    run(&mut c, &mut q, 1050 * MS, 1300 * MS, |_| 10 * MS);
    let again = &q.dropped[before..];
    assert_eq!(again[0], Time::from_millis(1150));
    assert_eq!(c.count() as usize, n as usize - 1 + again.len() - 1);
    let gap = Duration::from_nanos((100e6 / f64::from(n - 1).sqrt()) as u64);
    let expected = (Time::from_millis(1150) + gap)
        .as_nanos()
        .div_ceil(TICK.as_nanos() as u64)
        * TICK.as_nanos() as u64;
    assert_eq!(again[1].as_nanos(), expected);
}

#[test]
fn returning_late_starts_over() {
    let (mut c, mut q) = (Codel::default(), Script::new(false));
    run(&mut c, &mut q, Duration::ZERO, 1000 * MS, |_| 10 * MS);
    assert!(c.count() > 5);
    // Below target for 2 s (more than 16 intervals after the last due drop).
    run(&mut c, &mut q, 1000 * MS, 3000 * MS, |_| MS);
    let before = q.dropped.len();
    run(&mut c, &mut q, 3000 * MS, 3300 * MS, |_| 10 * MS);
    let again = &q.dropped[before..];
    assert_eq!(again[0], Time::from_millis(3100));
    assert_eq!(again[1], Time::from_millis(3200), "count 1 again");
}

#[test]
fn ecn_capable_heads_are_marked_on_the_same_schedule() {
    let (mut c, mut q) = (Codel::default(), Script::new(true));
    run(&mut c, &mut q, Duration::ZERO, 1000 * MS, |t| {
        if t < 50 * MS { MS } else { 10 * MS }
    });
    assert!(q.dropped.is_empty());
    assert_eq!(q.marked, schedule(150 * MS, 1000 * MS));
}

#[test]
fn no_drop_with_at_most_one_packet_behind_the_head() {
    let (mut c, mut q) = (Codel::default(), Script::new(false));
    q.backlog = 1500;
    run(&mut c, &mut q, Duration::ZERO, 1000 * MS, |_| 50 * MS);
    assert!(q.dropped.is_empty());
    q.backlog = 1501;
    run(&mut c, &mut q, 1000 * MS, 1200 * MS, |_| 50 * MS);
    assert_eq!(q.dropped[0], Time::from_millis(1100));
}
