//! `none`: deliver on arrival. Owns a FIFO of arrived packets that `poll_release` hands out
//! at once, in arrival order, unpaced and never flagged late (no order is restored, so no
//! sequence number is ever declared lost by evidence).
//!
//! Invariants:
//! - packets leave in arrival order, each at most once; `held_for` is the time queued;
//! - the queue never holds more than `max_packets` packets or `max_bytes` bytes: an insert
//!   that finds it full drops the oldest queued packets (counted in `lost_overflow`) until
//!   the new one fits; a packet larger than `max_bytes` alone is dropped the same way. The
//!   session drains after every insert, so this only happens when a driver does not;
//! - a packet too large for the caller's `out` buffer is dropped in `poll_release`: nothing
//!   is added to [`ReorderStats`] for it (it is neither released nor lost by evidence);
//!   [`Passthrough::discarded`] counts it with the overflow drops;
//! - payload buffers are recycled ([`Slab`]), so steady state does not allocate.

use std::collections::VecDeque;

use super::slab::Slab;
use super::{Arrival, Released, ReorderBuffer, ReorderConfig, ReorderStats};
use crate::ids::PathId;
use crate::time::Time;

/// Delivers every packet on arrival (see the module docs).
#[derive(Debug)]
pub struct Passthrough {
    max_packets: usize,
    max_bytes: usize,
    /// Slot indices in arrival order.
    queue: VecDeque<u32>,
    bytes: usize,
    slab: Slab,
    stats: ReorderStats,
    discarded: u64,
}

impl Passthrough {
    /// A fresh buffer bounded by `config.max_packets` and `config.max_bytes` (the other
    /// settings do not apply).
    pub fn new(config: ReorderConfig) -> Self {
        Passthrough {
            max_packets: config.max_packets,
            max_bytes: config.max_bytes,
            queue: VecDeque::new(),
            bytes: 0,
            slab: Slab::default(),
            stats: ReorderStats::default(),
            discarded: 0,
        }
    }

    /// Inserted packets that will never be released: dropped because the queue was full or
    /// because they did not fit the caller's buffer.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    fn drop_oldest(&mut self) {
        if let Some(i) = self.queue.pop_front() {
            self.bytes -= self.slab.get(i).buf.len();
            self.slab.free(i);
            self.stats.lost_overflow += 1;
            self.discarded += 1;
        }
    }
}

impl ReorderBuffer for Passthrough {
    fn set_paths(&mut self, _now: Time, _paths: &[PathId]) {}

    fn on_datagram(&mut self, _now: Time, _path: PathId, _send_ts_us: u32) {}

    fn insert(&mut self, now: Time, arrival: &Arrival, packet: &[u8]) {
        self.stats.inserted += 1;
        let len = packet.len();
        if len > self.max_bytes || self.max_packets == 0 {
            // Can never fit: dropped like an overflow, the queue is left alone.
            self.stats.lost_overflow += 1;
            self.discarded += 1;
            return;
        }
        while self.queue.len() + 1 > self.max_packets || self.bytes + len > self.max_bytes {
            self.drop_oldest();
        }
        let i = self.slab.alloc(arrival.global_seq, now, 0, packet);
        self.queue.push_back(i);
        self.bytes += len;
        self.stats.max_held_packets = self.stats.max_held_packets.max(self.queue.len() as u64);
        self.stats.max_held_bytes = self.stats.max_held_bytes.max(self.bytes as u64);
    }

    fn poll_release(&mut self, now: Time, out: &mut [u8]) -> Option<Released> {
        while let Some(i) = self.queue.pop_front() {
            let slot = self.slab.get(i);
            let (seq, arrived) = (slot.seq, slot.arrived);
            self.bytes -= slot.buf.len();
            match self.slab.take_into(i, out) {
                Some(len) => {
                    self.stats.released += 1;
                    let held_for = now.saturating_since(arrived);
                    return Some(Released {
                        global_seq: seq,
                        len,
                        held_for,
                        late: false,
                    });
                }
                None => self.discarded += 1,
            }
        }
        None
    }

    fn next_deadline(&self) -> Option<Time> {
        // Queued packets are releasable since they arrived.
        self.queue.front().map(|&i| self.slab.get(i).arrived)
    }

    fn held_packets(&self) -> usize {
        self.queue.len()
    }

    fn held_bytes(&self) -> usize {
        self.bytes
    }

    fn stats(&self) -> ReorderStats {
        ReorderStats {
            discarded: self.discarded,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn arrival(seq: u64) -> Arrival {
        Arrival {
            global_seq: seq,
            path: PathId(0),
            path_seq: seq,
            prev_on_path: None,
            send_ts_us: 0,
        }
    }

    fn config(max_packets: usize, max_bytes: usize) -> ReorderConfig {
        ReorderConfig {
            max_packets,
            max_bytes,
            ..ReorderConfig::default()
        }
    }

    #[test]
    fn releases_in_arrival_order() {
        let mut b = Passthrough::new(ReorderConfig::default());
        let mut out = [0u8; 64];
        for (k, seq) in [3u64, 1, 2, 0].into_iter().enumerate() {
            b.insert(Time::from_millis(k as u64), &arrival(seq), &[seq as u8; 10]);
        }
        assert_eq!(b.held_packets(), 4);
        assert_eq!(b.held_bytes(), 40);
        assert_eq!(b.next_deadline(), Some(Time::ZERO));
        let now = Time::from_millis(5);
        let got: Vec<_> = std::iter::from_fn(|| b.poll_release(now, &mut out)).collect();
        assert_eq!(
            got.iter().map(|r| r.global_seq).collect::<Vec<_>>(),
            [3, 1, 2, 0]
        );
        assert_eq!(got[0].held_for, Duration::from_millis(5));
        assert_eq!(got[3].held_for, Duration::from_millis(2));
        assert!(got.iter().all(|r| !r.late && r.len == 10));
        assert_eq!(b.next_deadline(), None);
        assert_eq!((b.held_packets(), b.held_bytes()), (0, 0));
        let s = b.stats();
        assert_eq!((s.inserted, s.released, s.lost_total()), (4, 4, 0));
        assert_eq!((s.max_held_packets, s.max_held_bytes), (4, 40));
    }

    #[test]
    fn full_queue_drops_oldest() {
        let mut b = Passthrough::new(config(2, 1000));
        for seq in 0..5 {
            b.insert(Time::ZERO, &arrival(seq), &[0; 10]);
            assert!(b.held_packets() <= 2);
        }
        let mut out = [0u8; 64];
        let got: Vec<_> = std::iter::from_fn(|| b.poll_release(Time::ZERO, &mut out))
            .map(|r| r.global_seq)
            .collect();
        assert_eq!(got, [3, 4]);
        assert_eq!(b.stats().lost_overflow, 3);
        assert_eq!(b.discarded(), 3);
    }

    #[test]
    fn byte_bound_and_oversized() {
        let mut b = Passthrough::new(config(100, 25));
        b.insert(Time::ZERO, &arrival(0), &[0; 10]);
        b.insert(Time::ZERO, &arrival(1), &[0; 10]);
        b.insert(Time::ZERO, &arrival(2), &[0; 10]);
        assert_eq!(b.held_bytes(), 20);
        b.insert(Time::ZERO, &arrival(3), &[0; 26]);
        assert_eq!((b.held_packets(), b.held_bytes()), (2, 20));
        assert_eq!(b.stats().lost_overflow, 2);
        assert!(b.stats().max_held_bytes <= 25);
    }

    #[test]
    fn too_large_for_out_is_skipped() {
        let mut b = Passthrough::new(ReorderConfig::default());
        b.insert(Time::ZERO, &arrival(0), &[1; 100]);
        b.insert(Time::ZERO, &arrival(1), &[2; 10]);
        let mut out = [0u8; 50];
        let r = b.poll_release(Time::ZERO, &mut out).expect("second packet");
        assert_eq!((r.global_seq, r.len), (1, 10));
        assert_eq!(&out[..10], &[2; 10]);
        assert_eq!(b.poll_release(Time::ZERO, &mut out), None);
        assert_eq!(b.stats().released, 1);
        assert_eq!(b.discarded(), 1);
        assert_eq!(b.held_packets(), 0);
    }
}
