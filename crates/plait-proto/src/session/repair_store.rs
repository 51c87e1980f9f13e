//! The sender's half of loss repair (docs/protocol.md#repair): recent inner packets kept
//! for a second send when the receiver asks for them (REPAIR_REQUEST), and the queue of
//! packets to send again.
//!
//! Invariants: the store holds only packets sent within `max_age` and at most `max_bytes`
//! of payload (the oldest leave first); each packet is sent again at most once; buffers
//! are reused, so steady state allocates nothing; the repair queue is bounded by
//! [`MAX_QUEUED`].

use std::collections::VecDeque;
use std::time::Duration;

use crate::ids::GlobalSeq;
use crate::time::Time;

/// Most repairs waiting to be sent.
pub const MAX_QUEUED: usize = 1024;

#[derive(Debug)]
struct Entry {
    bytes: Vec<u8>,
    sent: Time,
    repaired: bool,
}

/// Recently sent inner packets by global sequence number.
#[derive(Debug)]
pub(super) struct RepairStore {
    /// Global sequence number of `entries[0]`.
    base: GlobalSeq,
    entries: VecDeque<Entry>,
    bytes: usize,
    max_bytes: usize,
    max_age: Duration,
    spare: Vec<Vec<u8>>,
    /// Packets to send again, oldest request first.
    pub queue: VecDeque<GlobalSeq>,
}

impl RepairStore {
    pub fn new(max_bytes: usize, max_age: Duration) -> RepairStore {
        RepairStore {
            base: 0,
            entries: VecDeque::new(),
            bytes: 0,
            max_bytes,
            max_age,
            spare: Vec::new(),
            queue: VecDeque::new(),
        }
    }

    /// (packets kept, their payload bytes, repairs queued).
    pub fn held(&self) -> (usize, usize, usize) {
        (self.entries.len(), self.bytes, self.queue.len())
    }

    /// Keeps a copy of the packet just sent as `global` (numbers come in order, each once).
    pub fn push(&mut self, now: Time, global: GlobalSeq, payload: &[u8]) {
        if self.entries.is_empty() || global != self.base + self.entries.len() as u64 {
            // A gap (never expected: numbers are assigned in order) restarts the window.
            self.clear();
            self.base = global;
        }
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(payload);
        self.bytes += bytes.len();
        self.entries.push_back(Entry {
            bytes,
            sent: now,
            repaired: false,
        });
        self.expire(now);
    }

    fn clear(&mut self) {
        while self.pop_front() {}
    }

    fn pop_front(&mut self) -> bool {
        let Some(e) = self.entries.pop_front() else {
            return false;
        };
        self.bytes -= e.bytes.len();
        self.base += 1;
        if self.spare.len() < 64 {
            self.spare.push(e.bytes);
        }
        true
    }

    /// Forgets packets older than `max_age` or beyond `max_bytes`.
    pub fn expire(&mut self, now: Time) {
        while let Some(front) = self.entries.front() {
            let old = now.saturating_since(front.sent) > self.max_age;
            if !(old || self.bytes > self.max_bytes) {
                break;
            }
            self.pop_front();
        }
    }

    /// The receiver asked for `global`: queues it if it is kept and was not sent again yet.
    /// Returns whether it was queued.
    pub fn request(&mut self, now: Time, global: GlobalSeq) -> bool {
        self.expire(now);
        let Some(i) = global.checked_sub(self.base) else {
            return false;
        };
        let Some(e) = self.entries.get_mut(i as usize) else {
            return false;
        };
        if e.repaired || self.queue.len() >= MAX_QUEUED {
            return false;
        }
        e.repaired = true;
        self.queue.push_back(global);
        true
    }

    /// Takes the payload of a queued repair out (to send it); give it back with
    /// [`RepairStore::put_back`]. `None` if it expired meanwhile.
    pub fn take(&mut self, global: GlobalSeq) -> Option<Vec<u8>> {
        let i = global.checked_sub(self.base)?;
        let e = self.entries.get_mut(i as usize)?;
        Some(std::mem::take(&mut e.bytes))
    }

    /// Returns a payload taken with [`RepairStore::take`].
    pub fn put_back(&mut self, global: GlobalSeq, bytes: Vec<u8>) {
        let slot = global
            .checked_sub(self.base)
            .and_then(|i| self.entries.get_mut(i as usize));
        match slot {
            Some(e) => e.bytes = bytes,
            None => {
                // Expired while out (never in practice: take and put_back are one call apart).
                self.bytes = self.bytes.saturating_sub(bytes.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_recent_packets_and_repairs_each_once() {
        let mut s = RepairStore::new(1 << 20, Duration::from_secs(1));
        for g in 0..10u64 {
            s.push(Time::from_millis(g), g, &[g as u8; 100]);
        }
        assert!(s.request(Time::from_millis(20), 3));
        assert!(!s.request(Time::from_millis(20), 3), "at most once");
        assert!(!s.request(Time::from_millis(20), 10), "never sent");
        assert_eq!(s.queue.pop_front(), Some(3));
        let b = s.take(3).unwrap();
        assert_eq!(b, vec![3u8; 100]);
        s.put_back(3, b);
    }

    #[test]
    fn bounded_by_age_and_bytes() {
        let mut s = RepairStore::new(1000, Duration::from_millis(100));
        for g in 0..50u64 {
            s.push(Time::from_millis(g), g, &[0; 100]);
        }
        assert!(s.bytes <= 1000);
        assert!(
            !s.request(Time::from_millis(50), 30),
            "beyond the byte bound"
        );
        assert!(s.request(Time::from_millis(50), 45));
        assert!(!s.request(Time::from_millis(500), 49), "too old");
    }
}
