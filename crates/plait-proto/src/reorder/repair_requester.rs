//! Repair requests: the receiver's half of plait's loss repair (docs/protocol.md#repair).
//!
//! When the reorder buffer has evidence that an inner packet was lost on a path whose queue
//! was short (a later arrival named it as its predecessor on that FIFO path, and the path's
//! one-way delay is near its minimum: a random loss, not congestion), it asks the sender
//! once for that packet (a REPAIR_REQUEST frame) and keeps the
//! hole open for `wait` longer, about one round trip: the end hosts' TCP then sees a short
//! delay instead of a loss. If the repair does not come in time, the hole is declared lost
//! as before. (ETOM's hACK hides loss from the end hosts the same way, by recovering on the
//! path that lost it; seed ETOM §IV-B.)
//!
//! Invariants: each sequence number is requested at most once; the requested set holds only
//! numbers at or above the buffer's `next` and at most [`MAX_TRACKED`] of them (when full,
//! new evidence is not turned into requests: the hole then waits only for its evidence, as
//! without repair); the outbox is bounded the same way.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::ids::GlobalSeq;
use crate::time::Time;

/// Shortest wait: a hole's deadline must lie after the call that requested it.
const MIN_WAIT: Duration = Duration::from_millis(1);

/// Most outstanding requests tracked.
pub const MAX_TRACKED: usize = 4096;

/// Requested sequence numbers and when, plus those not yet handed to the session.
#[derive(Debug)]
pub(super) struct RepairRequests {
    wait: Duration,
    requested: BTreeMap<GlobalSeq, Time>,
    outbox: VecDeque<GlobalSeq>,
    pub(super) sent: u64,
}

impl RepairRequests {
    pub fn new(wait: Duration) -> RepairRequests {
        RepairRequests {
            wait: wait.max(MIN_WAIT),
            requested: BTreeMap::new(),
            outbox: VecDeque::new(),
            sent: 0,
        }
    }

    pub fn set_wait(&mut self, wait: Duration) {
        self.wait = wait.max(MIN_WAIT);
    }

    /// Asks for `seq` now unless it was asked for already (or the table is full).
    pub fn request(&mut self, seq: GlobalSeq, now: Time) {
        if self.requested.len() >= MAX_TRACKED || self.requested.contains_key(&seq) {
            return;
        }
        self.requested.insert(seq, now);
        self.outbox.push_back(seq);
        self.sent += 1;
    }

    /// When the hole `seq` may be given up: `None` if it was never requested.
    pub fn give_up_at(&self, seq: GlobalSeq) -> Option<Time> {
        self.requested.get(&seq).map(|t| *t + self.wait)
    }

    /// Forgets everything below `next`.
    pub fn forget_below(&mut self, next: GlobalSeq) {
        while let Some((&s, _)) = self.requested.first_key_value() {
            if s >= next {
                break;
            }
            self.requested.pop_first();
        }
    }

    /// The next request to send.
    pub fn poll(&mut self) -> Option<GlobalSeq> {
        self.outbox.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_once_and_gives_up_after_the_wait() {
        let mut r = RepairRequests::new(Duration::from_millis(50));
        r.request(7, Time::from_millis(10));
        r.request(7, Time::from_millis(20));
        assert_eq!(r.poll(), Some(7));
        assert_eq!(r.poll(), None);
        assert_eq!(r.give_up_at(7), Some(Time::from_millis(60)));
        assert_eq!(r.give_up_at(8), None);
        r.forget_below(8);
        assert_eq!(r.give_up_at(7), None);
    }

    #[test]
    fn bounded() {
        let mut r = RepairRequests::new(Duration::from_millis(50));
        for s in 0..(MAX_TRACKED as u64 + 10) {
            r.request(s, Time::ZERO);
        }
        assert_eq!(r.requested.len(), MAX_TRACKED);
        assert_eq!(r.give_up_at(MAX_TRACKED as u64 + 5), None);
        assert_eq!(r.outbox.len(), MAX_TRACKED);
    }
}
