//! `mms`: the receiver's re-order module of seed MMS §II-D, as the seed describes it: "Each
//! incoming packet is checked for its sequence number. If it is not expected, it will be
//! queued in the buffer. If the number of out-of-sequence packets is larger than the
//! buffer's capacity, the oldest packet in the queue is removed and the new packet stacks
//! up." No loss evidence, no delay estimates, no pacing: a missing packet is waited for
//! until it arrives or until [`MMS_CAPACITY`] later ones have piled up behind it. It is
//! there to reproduce the seed's comparison (its WRRB and IKR rows, `scenarios/mms-fig8.toml`)
//! and to measure what `bmp`'s evidence and timers add; plait's default is `bmp`.
//!
//! Two choices the seed leaves open:
//! - "Removed": the oldest held packet leaves the buffer towards the end host (the holes
//!   below it are declared lost, [`LossEvidence::Overflow`](super::LossEvidence)), rather
//!   than being discarded, which would turn every overflow into a loss for the end host's
//!   TCP. It is the same "release oldest, never grow" rule as every plait buffer's bound.
//! - Capacity: the seed gives none; [`MMS_CAPACITY`] (or `max_packets`, if smaller).
//!
//! One addition, so that nothing is held for ever: a hole is also given up `max_hold` after
//! the oldest packet held above it arrived (1 s by default), like `bmp`'s cap.
//!
//! State: `next` is the lowest global sequence number neither released nor declared lost
//! (starts at 0); `held` maps the numbers above it that arrived to their slab slots;
//! `ready` lists slots that may leave now (in order, or late: inserted after their number
//! was declared lost).
//!
//! Invariants (unit- and property-tested below): every inserted packet is released exactly
//! once or counted in `discarded`; releases not flagged late have increasing numbers; at
//! most `capacity` packets and `max_bytes` bytes are held after every call, and the ready
//! queue stays within `max_packets` packets besides what one insert moves to it.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::slab::Slab;
use super::{Arrival, Released, ReorderBuffer, ReorderConfig, ReorderStats};
use crate::ids::{GlobalSeq, PathId};
use crate::time::{Time, duration_nanos};

/// Out-of-sequence packets held before the oldest is pushed out. The seed gives no size;
/// 64 holds the reordering of its Fig. 8 setup (the WLAN link's packets trail WiMax's by
/// about 85 ms, some 40 packets at 6 Mbit/s) while a lost packet stalls the flow for only
/// 64 arrivals.
pub const MMS_CAPACITY: usize = 64;

/// The seed MMS receiver buffer (see the module docs).
#[derive(Debug)]
pub struct MmsBuffer {
    capacity: usize,
    max_packets: usize,
    max_bytes: usize,
    max_hold: Duration,
    next: GlobalSeq,
    /// Held out-of-sequence packets, by global sequence number.
    held: BTreeMap<GlobalSeq, u32>,
    held_bytes: usize,
    /// Slots that may leave now, with their `late` flag.
    ready: VecDeque<(u32, bool)>,
    slab: Slab,
    stats: ReorderStats,
    discarded: u64,
}

impl MmsBuffer {
    /// A fresh buffer: capacity `min(MMS_CAPACITY, config.max_packets)`, bounded by
    /// `config.max_bytes`, holes given up after `config.max_hold`.
    pub fn new(config: ReorderConfig) -> Self {
        MmsBuffer {
            capacity: MMS_CAPACITY.min(config.max_packets),
            max_packets: config.max_packets,
            max_bytes: config.max_bytes,
            max_hold: config.max_hold,
            next: 0,
            held: BTreeMap::new(),
            held_bytes: 0,
            ready: VecDeque::new(),
            slab: Slab::default(),
            stats: ReorderStats::default(),
            discarded: 0,
        }
    }

    /// Inserted packets that will never be released (a duplicate of a held one, a ready
    /// queue the caller did not drain, a packet too large for the caller's buffer).
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Moves the held packets from `next` on that follow each other to the ready queue.
    fn release_in_order(&mut self) {
        while let Some(i) = self.held.remove(&self.next) {
            self.held_bytes -= self.slab.get(i).buf.len();
            self.ready.push_back((i, false));
            self.next += 1;
        }
    }

    /// Gives up the hole(s) below the oldest held packet: declares them lost and releases
    /// from there on.
    fn force_oldest(&mut self, now: Time) {
        let Some((&seq, &i)) = self.held.first_key_value() else {
            return;
        };
        let seen = self.slab.get(i).arrived;
        self.declare_lost_below(now, seq, seen);
        self.next = seq;
        self.release_in_order();
    }

    /// Counts the numbers from `next` up to `seq` (exclusive) as lost by overflow, the holes
    /// having been seen at `seen`.
    fn declare_lost_below(&mut self, now: Time, seq: GlobalSeq, seen: Time) {
        let lost = seq.saturating_sub(self.next);
        if lost == 0 {
            return;
        }
        self.stats.lost_overflow += lost;
        let waited = duration_nanos(now.saturating_since(seen));
        self.stats.loss_detect_nanos_sum = self
            .stats
            .loss_detect_nanos_sum
            .saturating_add(waited.saturating_mul(lost));
        self.stats.loss_detect_nanos_max = self.stats.loss_detect_nanos_max.max(waited);
    }

    /// Keeps the ready queue within `max_packets` (the session drains it after every insert,
    /// so this only bites a driver that does not): its oldest are dropped.
    fn cap_ready(&mut self) {
        while self.ready.len() > self.max_packets.max(1) + self.capacity {
            if let Some((i, _)) = self.ready.pop_front() {
                self.slab.free(i);
                self.discarded += 1;
            }
        }
    }

    /// When the oldest held packet's hole is given up by the `max_hold` cap.
    fn hold_deadline(&self) -> Option<Time> {
        self.held
            .values()
            .map(|&i| self.slab.get(i).arrived)
            .min()
            .map(|t| t + self.max_hold)
    }
}

impl ReorderBuffer for MmsBuffer {
    fn set_paths(&mut self, _now: Time, _paths: &[PathId]) {}

    fn on_datagram(&mut self, _now: Time, _path: PathId, _send_ts_us: u32) {}

    fn insert(&mut self, now: Time, arrival: &Arrival, packet: &[u8]) {
        self.stats.inserted += 1;
        let seq = arrival.global_seq;
        if seq >= self.next && (packet.len() > self.max_bytes || self.capacity == 0) {
            // Can never be held: everything below it is forced out first, then it leaves.
            while self.held.first_key_value().is_some_and(|(&s, _)| s < seq) {
                self.force_oldest(now);
            }
            if seq >= self.next {
                self.declare_lost_below(now, seq, now);
                let i = self.slab.alloc(seq, now, 0, packet);
                self.ready.push_back((i, false));
                self.next = seq + 1;
                self.release_in_order();
            }
            self.cap_ready();
            return;
        }
        if seq < self.next {
            // Its number was given up: it leaves at once, flagged late.
            let i = self.slab.alloc(seq, now, 0, packet);
            self.ready.push_back((i, true));
            self.cap_ready();
            return;
        }
        if self.held.contains_key(&seq) {
            self.discarded += 1; // a duplicate (the session filters those): keep the first
            return;
        }
        let i = self.slab.alloc(seq, now, 0, packet);
        self.held.insert(seq, i);
        self.held_bytes += packet.len();
        self.release_in_order();
        // "If the number of out-of-sequence packets is larger than the buffer's capacity,
        // the oldest packet in the queue is removed" (seed MMS §II-D).
        while self.held.len() > self.capacity || self.held_bytes > self.max_bytes {
            self.force_oldest(now);
        }
        self.stats.max_held_packets = self.stats.max_held_packets.max(self.held.len() as u64);
        self.stats.max_held_bytes = self.stats.max_held_bytes.max(self.held_bytes as u64);
        self.cap_ready();
    }

    fn poll_release(&mut self, now: Time, out: &mut [u8]) -> Option<Released> {
        loop {
            if self.ready.is_empty() {
                if self.hold_deadline().is_none_or(|t| t > now) {
                    return None;
                }
                // The `max_hold` cap: give up the oldest hole.
                self.force_oldest(now);
            }
            let (i, late) = self.ready.pop_front()?;
            let slot = self.slab.get(i);
            let (seq, arrived) = (slot.seq, slot.arrived);
            if let Some(len) = self.slab.take_into(i, out) {
                self.stats.released += 1;
                if late {
                    self.stats.late += 1;
                }
                return Some(Released {
                    global_seq: seq,
                    len,
                    held_for: now.saturating_since(arrived),
                    late,
                });
            }
            self.discarded += 1;
        }
    }

    fn next_deadline(&self) -> Option<Time> {
        if let Some(&(i, _)) = self.ready.front() {
            return Some(self.slab.get(i).arrived);
        }
        self.hold_deadline()
    }

    fn held_packets(&self) -> usize {
        self.held.len()
    }

    fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    fn stats(&self) -> ReorderStats {
        ReorderStats {
            discarded: self.discarded,
            ..self.stats
        }
    }
}

#[cfg(test)]
#[path = "mms_tests.rs"]
mod tests;
