//! The session's send queue: inner packets accepted from the driver and not yet placed on a
//! path.
//!
//! Invariants: never more than `max_packets` packets or `max_bytes` payload bytes (a full
//! queue refuses the new packet: tail drop, as a router would); buffers are recycled through
//! a free list, so steady state allocates nothing per packet.

use std::collections::VecDeque;

use crate::time::Time;

/// An inner packet waiting to be scheduled.
#[derive(Debug)]
pub struct Queued {
    /// When the driver handed it in (`a_i` of seed PET-BMP eq. 1).
    pub arrival: Time,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Bounded FIFO of inner packets with a buffer pool.
#[derive(Debug)]
pub struct SendQueue {
    queue: VecDeque<Queued>,
    free: Vec<Vec<u8>>,
    bytes: usize,
    max_packets: usize,
    max_bytes: usize,
}

/// Buffers kept for reuse at most.
const MAX_FREE: usize = 256;

impl SendQueue {
    /// An empty queue with the given bounds.
    pub fn new(max_packets: usize, max_bytes: usize) -> SendQueue {
        SendQueue {
            queue: VecDeque::new(),
            free: Vec::new(),
            bytes: 0,
            max_packets,
            max_bytes,
        }
    }

    /// Appends a copy of `packet`; `false` (nothing queued) if the queue is full.
    pub fn push(&mut self, arrival: Time, packet: &[u8]) -> bool {
        if self.queue.len() >= self.max_packets || self.bytes + packet.len() > self.max_bytes {
            return false;
        }
        let mut bytes = self.free.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(packet);
        self.bytes += packet.len();
        self.queue.push_back(Queued { arrival, bytes });
        true
    }

    /// The oldest packet.
    pub fn front(&self) -> Option<&Queued> {
        self.queue.front()
    }

    /// Removes the oldest packet; hand its buffer back with [`SendQueue::recycle`].
    pub fn pop(&mut self) -> Option<Queued> {
        let q = self.queue.pop_front()?;
        self.bytes -= q.bytes.len();
        Some(q)
    }

    /// Returns a buffer to the pool.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.free.len() < MAX_FREE {
            self.free.push(buf);
        }
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_packets_and_bytes() {
        let mut q = SendQueue::new(2, 100);
        assert!(q.push(Time::ZERO, &[1; 40]));
        assert!(q.push(Time::ZERO, &[2; 40]));
        assert!(!q.push(Time::ZERO, &[3; 1]), "packet bound");
        let p = q.pop().unwrap();
        assert_eq!(p.bytes, vec![1; 40]);
        q.recycle(p.bytes);
        assert!(!q.push(Time::ZERO, &[4; 61]), "byte bound");
        assert!(q.push(Time::ZERO, &[4; 60]));
        assert_eq!(q.len(), 2);
    }
}
