//! The event queue: which component wakes next.
//!
//! Every component (link, node, schedule) has at most one live entry: its next wake-up.
//! Components are identified by a [`Target`]; the queue orders entries by time, then by
//! insertion order (deterministic tie-breaking), and skips entries made stale by a later
//! reschedule (lazy deletion: the component's `scheduled` time no longer matches).
//!
//! Invariant: popping returns entries in non-decreasing time order; among entries with the
//! same time, in the order they were pushed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use plait_proto::Time;

/// A component the simulator can wake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A link (index into the world's links).
    Link(u32),
    /// A node (index into the world's nodes).
    Node(u32),
    /// The scenario's schedule of link changes.
    Schedule,
}

/// Time-ordered wake-ups with deterministic ties and lazy invalidation.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<(Time, u64, Target)>>,
    seq: u64,
    popped: u64,
}

impl EventQueue {
    /// Adds a wake-up for `target` at `at`.
    pub fn push(&mut self, at: Time, target: Target) {
        self.heap.push(Reverse((at, self.seq, target)));
        self.seq += 1;
    }

    /// The earliest wake-up, if any (may be stale: the caller checks).
    pub fn pop(&mut self) -> Option<(Time, Target)> {
        let Reverse((at, _, target)) = self.heap.pop()?;
        self.popped += 1;
        Some((at, target))
    }

    /// Time of the earliest entry.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Entries popped so far (the simulator's event count).
    pub fn popped(&self) -> u64 {
        self.popped
    }
}

/// A component's live wake-up: pushes a queue entry only when it moves earlier, so a
/// component that keeps postponing its wake-up costs nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wakeup {
    scheduled: Option<Time>,
}

impl Wakeup {
    /// Sets the wake-up to `next`; pushes a queue entry if it is earlier than the live one.
    pub fn set(&mut self, queue: &mut EventQueue, target: Target, next: Option<Time>) {
        match (next, self.scheduled) {
            (Some(n), Some(s)) if n >= s => {}
            (Some(n), _) => {
                queue.push(n, target);
                self.scheduled = Some(n);
            }
            (None, _) => {}
        }
    }

    /// Whether an entry popped at `at` is this component's live one (else it is stale).
    /// Consumes the live wake-up when it is.
    pub fn take_if_live(&mut self, at: Time) -> bool {
        if self.scheduled == Some(at) {
            self.scheduled = None;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_then_insertion_order() {
        let mut q = EventQueue::default();
        q.push(Time::from_millis(2), Target::Node(1));
        q.push(Time::from_millis(1), Target::Node(2));
        q.push(Time::from_millis(2), Target::Link(0));
        q.push(Time::from_millis(1), Target::Node(0));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (Time::from_millis(1), Target::Node(2)),
                (Time::from_millis(1), Target::Node(0)),
                (Time::from_millis(2), Target::Node(1)),
                (Time::from_millis(2), Target::Link(0)),
            ]
        );
    }

    #[test]
    fn wakeup_lazy_invalidation() {
        let mut q = EventQueue::default();
        let mut w = Wakeup::default();
        let t = Target::Link(3);
        w.set(&mut q, t, Some(Time::from_millis(5)));
        w.set(&mut q, t, Some(Time::from_millis(7))); // later: no new entry
        w.set(&mut q, t, Some(Time::from_millis(2))); // earlier: new entry, old one stale
        let (at, _) = q.pop().unwrap();
        assert_eq!(at, Time::from_millis(2));
        assert!(w.take_if_live(at));
        let (at, _) = q.pop().unwrap();
        assert!(!w.take_if_live(at), "the 5 ms entry is stale");
        assert!(q.pop().is_none());
    }
}
