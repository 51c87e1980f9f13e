//! CoDel (RFC 8289) on one flow queue of the send queue: decides, when the queue's head
//! is about to be served, whether to drop it (or, for an ECN-capable packet, mark it CE,
//! RFC 3168 §5 / RFC 8290 §5.2.6) from how long it waited (its sojourn time).
//!
//! This is the RFC 8289 §5 pseudocode (`dequeue`, `dodequeue`, `control_law`) with two
//! changes of form: the queue is reached through [`CodelQueue`] and its head is inspected in
//! place (the flow queue removes the head only when the session sends it), and time comes
//! in as an argument. Like Linux, a mark ends a drop round: the marked packet is served.
//!
//! Invariants:
//! - no drop or mark while the sojourn time stays below `target`, or while at most one
//!   maximum-size packet is queued behind the head (the non-starvation rule);
//! - the first drop comes only after the sojourn time has stayed at or above `target` for a
//!   whole `interval`; in the drop state the n-th next drop is due `interval / sqrt(count)`
//!   after the previous one (the control law, RFC 8289 §3.3);
//! - re-entering the drop state soon (within 16 intervals) after leaving it resumes the
//!   drop rate that controlled the queue last time (count restoration, RFC 8289 §5.5);
//! - deterministic: integer nanoseconds and one correctly rounded `f64` square root.

use std::time::Duration;

use crate::time::{Time, duration_nanos};

/// CoDel's parameters (RFC 8290 §5.2.1, §5.2.2, §5.2.6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodelParams {
    /// Acceptable standing queue delay (RFC 8289 §4.3; default 5 ms).
    pub target: Duration,
    /// Window in which the delay must fall below `target` once (RFC 8289 §4.2; 100 ms).
    pub interval: Duration,
    /// Largest packet: no drop while at most this many bytes wait behind the head.
    pub max_packet: usize,
    /// Mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
}

/// The queue CoDel acts on, seen from its head.
pub trait CodelQueue {
    /// When the head packet arrived; `None` if the queue is empty.
    fn head_arrival(&self) -> Option<Time>;
    /// Bytes queued behind the head (the whole send queue's backlog, as Linux's fq_codel
    /// uses, less the head itself).
    fn backlog_behind_head(&self) -> usize;
    /// Drops the head packet.
    fn drop_head(&mut self);
    /// Marks the head packet CE if it is ECN-capable; whether it now carries CE.
    fn mark_head(&mut self) -> bool;
}

/// What one decision did to the queue's head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Packets dropped from the head.
    pub dropped: u64,
    /// Whether the packet now at the head was marked CE.
    pub marked: bool,
}

/// One queue's CoDel state (RFC 8289 §5.2).
#[derive(Clone, Debug, Default)]
pub struct Codel {
    /// When the sojourn time will have been above target for an interval (`None`: below).
    first_above_time: Option<Time>,
    /// When the next drop is due in the drop state.
    drop_next: Time,
    /// Drops (and marks) since entering the drop state.
    count: u32,
    /// `count` when the drop state was last entered.
    lastcount: u32,
    /// In the drop state.
    dropping: bool,
}

impl Codel {
    /// Runs CoDel's dequeue decision on the queue's head at `now`: drops (or marks) what the
    /// control law says, and leaves at the head the packet to serve (if any).
    pub fn decide(&mut self, now: Time, p: &CodelParams, q: &mut impl CodelQueue) -> Verdict {
        let mut verdict = Verdict::default();
        let ok_to_drop = self.ok_to_drop(now, p, q);
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false; // sojourn time below target: leave the drop state
            }
            while self.dropping && now >= self.drop_next {
                self.count = self.count.saturating_add(1);
                if p.ecn && q.mark_head() {
                    verdict.marked = true;
                    self.drop_next = control_law(self.drop_next, p.interval, self.count);
                    break;
                }
                q.drop_head();
                verdict.dropped += 1;
                if self.ok_to_drop(now, p, q) {
                    self.drop_next = control_law(self.drop_next, p.interval, self.count);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok_to_drop {
            if p.ecn && q.mark_head() {
                verdict.marked = true;
            } else {
                q.drop_head();
                verdict.dropped += 1;
                self.ok_to_drop(now, p, q); // keeps first_above_time for the new head
            }
            self.dropping = true;
            // Count restoration: if the queue went back above target soon after the last
            // drop state, start from the drop rate that controlled it then.
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = if delta > 1 && now.saturating_since(self.drop_next) < 16 * p.interval {
                delta
            } else {
                1
            };
            self.lastcount = self.count;
            self.drop_next = control_law(now, p.interval, self.count);
        }
        verdict
    }

    /// RFC 8289 `dodequeue`'s test on the current head: has its sojourn time been at or
    /// above target for at least an interval?
    fn ok_to_drop(&mut self, now: Time, p: &CodelParams, q: &impl CodelQueue) -> bool {
        let Some(arrival) = q.head_arrival() else {
            self.first_above_time = None; // empty: cannot be above target
            return false;
        };
        if now.saturating_since(arrival) < p.target || q.backlog_behind_head() <= p.max_packet {
            self.first_above_time = None; // went below: stay below for at least an interval
            return false;
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + p.interval);
                false
            }
            Some(t) => now >= t,
        }
    }

    /// Drops (and marks) since the drop state was entered.
    #[cfg(test)]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether CoDel is in its drop state.
    #[cfg(test)]
    pub fn dropping(&self) -> bool {
        self.dropping
    }
}

/// RFC 8289 §5.6 `control_law`: `t + interval / sqrt(count)`.
fn control_law(t: Time, interval: Duration, count: u32) -> Time {
    let nanos = duration_nanos(interval) as f64 / f64::from(count.max(1)).sqrt();
    t + Duration::from_nanos(nanos as u64)
}
