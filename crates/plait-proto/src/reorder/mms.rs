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
//! `ready` lists slots that may leave now in order, `late` those inserted after their
//! number was declared lost (released first, flagged late).
//!
//! Invariants (unit- and property-tested in `mms_tests.rs`): every inserted packet is
//! released exactly once or counted in `discarded`; releases not flagged late have
//! increasing numbers; at most `capacity` packets and `max_bytes` bytes are held after every
//! call; the `ready` and `late` queues stay within `max_packets` packets and `max_bytes`
//! bytes besides what one insert moves there (their oldest are dropped beyond that, as in
//! `bmp`, so memory stays bounded even if a caller never polls).

use std::collections::BTreeMap;
use std::time::Duration;

use super::slab::{Slab, SlotQueue};
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
    /// Slots that may leave now, in order.
    ready: SlotQueue,
    /// Slots inserted after their number was declared lost.
    late: SlotQueue,
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
            ready: SlotQueue::default(),
            late: SlotQueue::default(),
            slab: Slab::default(),
            stats: ReorderStats::default(),
            discarded: 0,
        }
    }

    /// Inserted packets that will never be released (a duplicate of a held one, queues the
    /// caller did not drain, a packet too large for the caller's buffer).
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Moves the held packets from `next` on that follow each other to the ready queue.
    fn release_in_order(&mut self, now: Time) {
        while let Some(i) = self.held.remove(&self.next) {
            self.held_bytes -= self.slab.get(i).buf.len();
            self.next = self.next.saturating_add(1);
            self.push_ready(now, i);
        }
    }

    /// Queues slot `i` for release in order; beyond the queue's bound its oldest are dropped
    /// (their numbers lost, as `bmp`'s forced queue does).
    fn push_ready(&mut self, now: Time, i: u32) {
        let dropped =
            self.ready
                .push_capped(&mut self.slab, i, now, self.max_packets, self.max_bytes);
        self.stats.lost_overflow += dropped;
        self.discarded += dropped;
    }

    /// Queues slot `i`, whose number was already declared lost, for release at once.
    fn push_late(&mut self, now: Time, i: u32) {
        self.discarded +=
            self.late
                .push_capped(&mut self.slab, i, now, self.max_packets, self.max_bytes);
    }

    /// Gives up the hole(s) below the oldest held packet: declares them lost and releases
    /// from there on. The holes count as first seen when that packet arrived (a higher one
    /// may have arrived earlier, so detection times are under-reported, as in `bmp`).
    fn force_oldest(&mut self, now: Time) {
        let Some((&seq, &i)) = self.held.first_key_value() else {
            return;
        };
        let seen = self.slab.get(i).arrived;
        self.declare_lost_below(now, seq, seen);
        self.next = seq;
        self.release_in_order(now);
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
        if seq < self.next {
            // Its number was given up: it leaves at once, flagged late.
            let i = self.slab.alloc(seq, now, 0, packet);
            self.push_late(now, i);
            return;
        }
        if self.held.contains_key(&seq) {
            self.discarded += 1; // a duplicate (the session filters those): keep the first
            return;
        }
        if packet.len() > self.max_bytes || self.capacity == 0 {
            // Can never be held: everything below it is forced out first, then it leaves.
            while self.held.first_key_value().is_some_and(|(&s, _)| s < seq) {
                self.force_oldest(now);
            }
            self.declare_lost_below(now, seq, now);
            let i = self.slab.alloc(seq, now, 0, packet);
            self.next = seq.saturating_add(1);
            self.push_ready(now, i);
            self.release_in_order(now);
            return;
        }
        let i = self.slab.alloc(seq, now, 0, packet);
        self.held.insert(seq, i);
        self.held_bytes += packet.len();
        self.release_in_order(now);
        // "If the number of out-of-sequence packets is larger than the buffer's capacity,
        // the oldest packet in the queue is removed" (seed MMS §II-D).
        while self.held.len() > self.capacity || self.held_bytes > self.max_bytes {
            self.force_oldest(now);
        }
        self.stats.max_held_packets = self.stats.max_held_packets.max(self.held.len() as u64);
        self.stats.max_held_bytes = self.stats.max_held_bytes.max(self.held_bytes as u64);
    }

    fn poll_release(&mut self, now: Time, out: &mut [u8]) -> Option<Released> {
        loop {
            if self.late.is_empty() && self.ready.is_empty() {
                if self.hold_deadline().is_none_or(|t| t > now) {
                    return None;
                }
                // The `max_hold` cap: give up the oldest hole.
                self.force_oldest(now);
            }
            let (i, late) = match self.late.pop(&self.slab) {
                Some(i) => (i, true),
                None => (self.ready.pop(&self.slab)?, false),
            };
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
        let queued = [
            self.late.front_ready(&self.slab),
            self.ready.front_ready(&self.slab),
        ];
        queued
            .into_iter()
            .flatten()
            .min()
            .or_else(|| self.hold_deadline())
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
