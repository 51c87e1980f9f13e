//! Loss evidence for the BMP reorder buffer (seed PET-BMP §V-B "comparison-based" and
//! "timer-based" loss detection, plus ETOM's path sequence numbers).
//!
//! Owns the per-path receive state (current path set, highest global sequence number each
//! path delivered, one-way delay estimate), the shared sender-timestamp unwrapper, and the
//! bounded set of sequence numbers a later packet named as its predecessor on a path.
//!
//! For a hole `h` (the lowest sequence number neither released nor declared lost, with a
//! higher one held), the evidence, strongest first:
//! - `PathPredecessor`: an arrival's `prev_on_path` named `h`; paths are FIFO, so `h` is lost;
//! - `Comparison`: every path of the current set delivered a global sequence number above
//!   `h` (a path that delivered nothing yet could still carry it);
//! - `Timer`: `now >= deadline(h)`, derived as follows. The sender sends in global sequence
//!   order, so `h` left no later than `S`, the send timestamp of the lowest held packet above
//!   it. On a candidate path `q` (in the set, highest delivered below `h` or none) it arrives
//!   by `S + offset_hi(q)` on the receiver's clock (offsets include the clock difference,
//!   the same on every path — see `arrival_delay`). So
//!   `deadline = S + max_q offset_hi(q) + hold_margin`, capped at `first_seen + max_hold`
//!   (`first_seen`: when the hole was first seen — approximated by the arrival of that lowest
//!   held packet above it). A candidate without an estimate, or an unknown path set, makes
//!   it `first_seen + max_hold` (PET-BMP's fixed backup timer).
//!
//! Invariants:
//! - evidence and deadlines are pure functions of this state: a deadline `t` returned by
//!   [`LossDetector::hole_ready_at`] makes [`LossDetector::evidence`] at `t` non-`None`;
//! - deadlines never decrease with `h` for one `S`/`first_seen` (higher holes have more
//!   candidates);
//! - the predecessor set holds only numbers at or above the buffer's `next` and is bounded
//!   (when full, the highest is forgotten: the timer remains as backup);
//! - an empty path set (or none given yet) means "unknown": no comparison evidence.

use std::collections::BTreeSet;
use std::time::Duration;

use super::arrival_delay::{PathDelay, TsUnwrapper};
use super::{Arrival, LossEvidence, ReorderConfig};
use crate::ids::{GlobalSeq, PathId};
use crate::time::Time;

/// What the receiver knows about one path.
#[derive(Clone, Copy, Debug, Default)]
struct PathState {
    /// In the current path set.
    in_set: bool,
    /// Highest global sequence number delivered on this path.
    max_delivered: Option<GlobalSeq>,
    /// One-way delay (offset) estimate.
    delay: PathDelay,
    /// The last `(now, send_ts)` fed to `delay`, so an insert does not feed the datagram
    /// that `on_datagram` already reported a second time.
    last_fed: Option<(Time, u32)>,
    /// Smallest offsets in the current and the previous window (queue-free base).
    base: BaseOffset,
}

/// Windowed minimum of a path's offset samples: two windows of [`BASE_WINDOW_US`], so the
/// base follows slow clock drift and route changes.
#[derive(Clone, Copy, Debug, Default)]
struct BaseOffset {
    current: Option<i64>,
    previous: Option<i64>,
    window_start_us: i64,
    latest: i64,
}

/// Length of one base window, µs.
const BASE_WINDOW_US: i64 = 10_000_000;

impl BaseOffset {
    fn on_sample(&mut self, now_us: i64, offset: i64) {
        if now_us.saturating_sub(self.window_start_us) >= BASE_WINDOW_US {
            self.previous = self.current;
            self.current = None;
            self.window_start_us = now_us;
        }
        self.current = Some(self.current.map_or(offset, |c| c.min(offset)));
        self.latest = offset;
    }

    /// Latest sample above the base: this path's current queueing delay, µs.
    fn queueing_us(&self) -> Option<i64> {
        let base = match (self.current, self.previous) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(self.latest.saturating_sub(base))
    }
}

/// Per-path state and hole evidence (see the module docs).
#[derive(Debug)]
pub(super) struct LossDetector {
    /// Indexed by `PathId`, grown on demand.
    paths: Vec<PathState>,
    /// Paths in the current set.
    in_set: usize,
    unwrapper: TsUnwrapper,
    predecessors: BTreeSet<GlobalSeq>,
    predecessor_cap: usize,
    max_hold: Duration,
    hold_margin: Duration,
}

/// Receiver time in microseconds (the unit of offsets).
fn receiver_us(now: Time) -> i64 {
    (now.as_nanos() / 1_000) as i64
}

impl LossDetector {
    /// Fresh state for `config`.
    pub fn new(config: &ReorderConfig) -> Self {
        LossDetector {
            paths: Vec::new(),
            in_set: 0,
            unwrapper: TsUnwrapper::default(),
            predecessors: BTreeSet::new(),
            predecessor_cap: config.max_packets.max(16),
            max_hold: config.max_hold,
            hold_margin: config.hold_margin,
        }
    }

    fn path_mut(&mut self, path: PathId) -> &mut PathState {
        let i = path.index();
        if i >= self.paths.len() {
            self.paths.resize(i + 1, PathState::default());
        }
        &mut self.paths[i]
    }

    /// Replaces the path set.
    pub fn set_paths(&mut self, paths: &[PathId]) {
        for p in &mut self.paths {
            p.in_set = false;
        }
        for &p in paths {
            self.path_mut(p).in_set = true;
        }
        self.in_set = self.paths.iter().filter(|p| p.in_set).count();
    }

    /// A datagram arrived on `path`: unwraps its timestamp and feeds the delay estimate.
    /// Returns the unwrapped send timestamp.
    pub fn on_datagram(&mut self, now: Time, path: PathId, send_ts_us: u32) -> i64 {
        let send = self.unwrapper.unwrap(send_ts_us);
        let p = self.path_mut(path);
        let offset = receiver_us(now).saturating_sub(send);
        p.delay.on_sample(offset);
        p.base.on_sample(receiver_us(now), offset);
        p.last_fed = Some((now, send_ts_us));
        send
    }

    /// `path`'s current queueing delay (latest one-way delay above its recent minimum), µs;
    /// `None` before any sample.
    pub fn queueing_us(&self, path: PathId) -> Option<i64> {
        self.paths.get(path.index())?.base.queueing_us()
    }

    /// An inner packet arrived: feeds the delay estimate (unless `on_datagram` just did for
    /// the same datagram) and the path's highest delivered number. Returns the unwrapped
    /// send timestamp.
    pub fn on_insert(&mut self, now: Time, a: &Arrival) -> i64 {
        let send = if self.paths.get(a.path.index()).and_then(|p| p.last_fed)
            == Some((now, a.send_ts_us))
        {
            self.unwrapper.unwrap(a.send_ts_us)
        } else {
            self.on_datagram(now, a.path, a.send_ts_us)
        };
        let p = self.path_mut(a.path);
        p.max_delivered = Some(
            p.max_delivered
                .map_or(a.global_seq, |m| m.max(a.global_seq)),
        );
        self.predecessors.remove(&a.global_seq);
        send
    }

    /// Records that `seq` (not held, at or above the buffer's next) was named as a
    /// predecessor on a FIFO path by a later arrival: it is lost.
    pub fn note_predecessor(&mut self, seq: GlobalSeq) {
        if self.predecessors.len() >= self.predecessor_cap {
            match self.predecessors.last() {
                Some(&top) if top > seq => {
                    self.predecessors.pop_last();
                }
                _ => return,
            }
        }
        self.predecessors.insert(seq);
    }

    /// Forgets predecessor records below `next` (released or declared lost).
    pub fn forget_below(&mut self, next: GlobalSeq) {
        while self.predecessors.first().is_some_and(|&s| s < next) {
            self.predecessors.pop_first();
        }
    }

    /// Every path of the (known, non-empty) set delivered a number above `hole`.
    // seed PET-BMP §V-B: "Suppose we receive sequence numbers greater than N on all of the
    // interfaces, we can conclude that N is lost."
    fn all_paths_passed(&self, hole: GlobalSeq) -> bool {
        self.in_set > 0
            && self
                .paths
                .iter()
                .filter(|p| p.in_set)
                .all(|p| p.max_delivered.is_some_and(|m| m > hole))
    }

    /// Evidence available without waiting (predecessor or comparison).
    fn immediate_evidence(&self, hole: GlobalSeq) -> Option<LossEvidence> {
        if self.predecessors.contains(&hole) {
            Some(LossEvidence::PathPredecessor)
        } else if self.all_paths_passed(hole) {
            Some(LossEvidence::Comparison)
        } else {
            None
        }
    }

    // seed PET-BMP §V-B: the backup timer, its value derived from the measured delay
    // differences between paths (seed PET-BMP §V-A) instead of a fixed 0.5 s.
    /// The timer deadline of `hole` whose lowest held successor arrived at `first_seen`
    /// with unwrapped send timestamp `send_us` (see the module docs).
    pub fn deadline(&self, hole: GlobalSeq, first_seen: Time, send_us: i64) -> Time {
        let cap = first_seen.saturating_add(self.max_hold);
        if self.in_set == 0 {
            return cap;
        }
        let mut worst: Option<i64> = None;
        for p in self.paths.iter().filter(|p| p.in_set) {
            if p.max_delivered.is_some_and(|m| m > hole) {
                continue; // FIFO path already past the hole: cannot carry it any more
            }
            match p.delay.offset_hi() {
                None => return cap,
                Some(o) => worst = Some(worst.map_or(o, |w| w.max(o))),
            }
        }
        let Some(worst) = worst else {
            return first_seen; // no candidate: comparison evidence holds
        };
        let arrive_us = send_us.saturating_add(worst);
        let arrive = Time::from_micros(u64::try_from(arrive_us).unwrap_or(0));
        arrive.saturating_add(self.hold_margin).min(cap)
    }

    /// Why `hole` may be declared lost at `now`, if it may.
    pub fn evidence(
        &self,
        hole: GlobalSeq,
        now: Time,
        first_seen: Time,
        send_us: i64,
    ) -> Option<LossEvidence> {
        self.immediate_evidence(hole).or_else(|| {
            (now >= self.deadline(hole, first_seen, send_us)).then_some(LossEvidence::Timer)
        })
    }

    /// The earliest time [`LossDetector::evidence`] holds for `hole` without new input.
    pub fn hole_ready_at(&self, hole: GlobalSeq, first_seen: Time, send_us: i64) -> Time {
        match self.immediate_evidence(hole) {
            Some(_) => first_seen,
            None => self.deadline(hole, first_seen, send_us),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(seq: u64, path: u8, send_ts_us: u32) -> Arrival {
        Arrival {
            global_seq: seq,
            path: PathId(path),
            path_seq: 0,
            prev_on_path: None,
            send_ts_us,
        }
    }

    fn detector() -> LossDetector {
        LossDetector::new(&ReorderConfig {
            max_hold: Duration::from_millis(500),
            hold_margin: Duration::from_millis(2),
            ..ReorderConfig::default()
        })
    }

    #[test]
    fn deadline_from_the_slowest_candidate() {
        let mut d = detector();
        d.set_paths(&[PathId(0), PathId(1)]);
        // Same clocks: offset = one-way delay. Path 0: 10 ms, path 1: 60 ms.
        for k in 0..10u64 {
            d.on_datagram(Time::from_millis(k + 10), PathId(0), (k * 1000) as u32);
            d.on_datagram(Time::from_millis(k + 60), PathId(1), (k * 1000) as u32);
        }
        // Packet 5 sent at 100 ms on path 0 arrives at 110 ms: hole 4.
        let first_seen = Time::from_millis(110);
        let send = d.on_insert(first_seen, &arrival(5, 0, 100_000));
        assert_eq!(send, 100_000);
        // Path 0 passed the hole; path 1 (60 ms) is the only candidate.
        assert_eq!(d.deadline(4, first_seen, send), Time::from_millis(162));
        assert_eq!(
            d.evidence(4, Time::from_millis(161), first_seen, send),
            None
        );
        assert_eq!(
            d.evidence(4, Time::from_millis(162), first_seen, send),
            Some(LossEvidence::Timer)
        );
        // Path 1 delivers something above the hole: comparison.
        d.on_insert(Time::from_millis(120), &arrival(6, 1, 60_000));
        assert_eq!(
            d.evidence(4, Time::from_millis(120), first_seen, send),
            Some(LossEvidence::Comparison)
        );
        assert_eq!(d.hole_ready_at(4, first_seen, send), first_seen);
    }

    #[test]
    fn unknown_estimate_or_set_waits_max_hold() {
        let mut d = detector();
        let t = Time::from_millis(5);
        assert_eq!(d.deadline(0, t, 0), t + Duration::from_millis(500));
        d.set_paths(&[PathId(0), PathId(3)]);
        d.on_datagram(t, PathId(0), 0);
        assert_eq!(
            d.deadline(0, t, 0),
            t + Duration::from_millis(500),
            "path 3 has no estimate"
        );
        d.set_paths(&[PathId(0)]);
        assert_eq!(d.deadline(0, t, 0), t + Duration::from_millis(2));
        d.set_paths(&[]);
        assert_eq!(d.evidence(0, Time::MAX, t, 0), Some(LossEvidence::Timer));
        assert_eq!(d.hole_ready_at(0, t, 0), t + Duration::from_millis(500));
    }

    #[test]
    fn predecessors_are_bounded_and_forgotten() {
        let mut d = LossDetector::new(&ReorderConfig {
            max_packets: 4,
            ..ReorderConfig::default()
        });
        for s in (0..100).rev() {
            d.note_predecessor(s);
        }
        assert_eq!(d.predecessors.len(), 16);
        assert_eq!(d.predecessors.last(), Some(&15), "the lowest are kept");
        d.note_predecessor(1_000);
        assert!(
            !d.predecessors.contains(&1_000),
            "full: the highest is dropped"
        );
        assert_eq!(d.immediate_evidence(3), Some(LossEvidence::PathPredecessor));
        d.forget_below(10);
        assert_eq!(d.predecessors.first(), Some(&10));
        d.on_insert(Time::ZERO, &arrival(10, 0, 0));
        assert!(!d.predecessors.contains(&10), "arrived after all");
    }

    #[test]
    fn insert_does_not_feed_the_same_datagram_twice() {
        let mut d = detector();
        let now = Time::from_millis(50);
        d.on_datagram(now, PathId(0), 10_000);
        d.on_insert(now, &arrival(0, 0, 10_000));
        assert_eq!(d.paths[0].delay.offset_hi(), Some(40_000));
        d.on_insert(Time::from_millis(80), &arrival(1, 0, 10_000));
        assert_eq!(d.paths[0].delay.offset_hi(), Some(43_750 + 30_000));
    }
}
