//! `bmp`: PET-BMP's Buffer Management Policy (seed PET-BMP §V-B), improved: hold packets
//! that arrive out of order and release them in global sequence order, so the end hosts'
//! TCP sees no reordering (criterion 3), declare missing packets lost as soon as there is
//! evidence (criterion 4), and pace what a filled hole frees (criterion 5).
//!
//! Owns the held packets, the late and forced release queues, and the policy; loss evidence
//! and per-path state live in `loss_detect` (with the hole deadline's derivation), delay
//! estimates in `arrival_delay`, the pacer in `pacer`, packet storage in `slab`.
//!
//! State: `next` is the lowest global sequence number neither released nor declared lost
//! (starts at 0). Packets with `seq >= next` are held in `ring`, indexed by `seq - next`
//! (slot indices, [`NIL`] for a hole; its last entry is never a hole).
//!
//! `poll_release` releases, in this order:
//! 1. late packets (inserted with `seq < next`: their number was declared lost), unpaced,
//!    flagged `late`;
//! 2. forced packets (pushed out by the bound, below), unpaced;
//! 3. the packet at `next` if held, when the pacer has a token; `next += 1`;
//! 4. if `next` is a hole with something held above it, declares it lost (`next += 1`) when
//!    a later arrival named it as its predecessor on a FIFO path, when every path of the set
//!    delivered a higher number (comparison, seed PET-BMP §V-B), or when its deadline passed
//!    (the backup timer of §V-B, derived from measured path delay differences instead of a
//!    fixed 0.5 s: see `loss_detect`). Otherwise it stops and `next_deadline` reports when
//!    to come back.
//!
//! "First seen" of a hole (for detection delays and the `max_hold` cap) is approximated by
//! the arrival of the lowest packet held above it: a higher packet held above it may have
//! arrived earlier, so detection delays are under-reported, never over-reported, and a hole
//! may wait up to `max_hold` after that lowest packet arrived. (Packets above a hole are
//! never released before it is resolved, so no other packet could have revealed it.)
//!
//! Bound ("release oldest, never grow"): `held_packets`/`held_bytes` count the ring. An
//! insert that would exceed `max_packets` or `max_bytes` moves the lowest held packets (the
//! new one included, if it is the lowest) to the forced queue, declaring the holes below
//! them lost (`Overflow`), until the new one fits; a packet larger than `max_bytes` alone
//! is forced at once. An insert more than `max(4 × max_packets, 64)` (at most 2^22) numbers
//! above `next` (a hole run too long to index) forces out everything below that window the
//! same way. The late and forced queues are each capped at `max_packets` packets and
//! `max_bytes` bytes besides their newest packet (so what one insert forces out always
//! fits): beyond that their oldest are dropped — a forced one counts in `lost_overflow`, a
//! late one was already counted lost — so memory stays bounded even if a caller never
//! polls. [`Bmp::discarded`] counts every inserted packet never released.
//!
//! Pacing: only in-order releases from the ring take tokens (see `pacer`).
//!
//! Invariants (property-tested in `bmp_proptest`): every inserted packet is released
//! exactly once or counted in [`Bmp::discarded`]; non-late releases have increasing numbers;
//! `held_packets() <= max_packets` and `held_bytes() <= max_bytes` after every call; after
//! `poll_release(now)` returns `None`, `next_deadline()` is `None` or later than `now`, and
//! polling at a returned deadline makes progress. A packet that does not fit the caller's
//! `out` is dropped (counted in [`Bmp::discarded`] and `ReorderStats::discarded`) and the next one is tried.

use std::collections::VecDeque;

use super::loss_detect::LossDetector;
use super::pacer::{ArrivalRate, Pacer, RATE_WINDOW};
use super::repair_requester::RepairRequests;
use super::slab::{NIL, Slab, SlotQueue};
use super::{Arrival, LossEvidence, Released, ReorderBuffer, ReorderConfig, ReorderStats};
use crate::ids::{GlobalSeq, PathId};
use crate::time::{Time, duration_nanos};

/// A path whose latest one-way delay is this far above its recent minimum is queueing:
/// its losses are congestion and are not repaired (µs). The sender uses the same threshold
/// (on its own delay measure) to tell a link's own losses from a queue's
/// ([`crate::cc::SHALLOW_QUEUE`]).
const REPAIR_MAX_QUEUEING_US: i64 = crate::cc::SHALLOW_QUEUE.as_micros() as i64;

/// Longest hole run indexed, as a multiple of `max_packets` (at least [`MIN_SPAN`]).
const SPAN_FACTOR: usize = 4;
/// Smallest indexed span.
const MIN_SPAN: usize = 64;
/// Largest indexed span (bounds the ring's memory whatever `max_packets` says).
const MAX_SPAN: usize = 1 << 22;

/// PET-BMP's buffer management policy (see the module docs).
#[derive(Debug)]
pub struct Bmp {
    max_packets: usize,
    max_bytes: usize,
    /// Lowest global sequence number neither released nor declared lost.
    next: GlobalSeq,
    /// Held packets: `ring[k]` is the slot of `next + k`, or [`NIL`].
    ring: VecDeque<u32>,
    /// Largest `seq - next` the ring indexes.
    span_cap: u64,
    held_packets: usize,
    held_bytes: usize,
    late: SlotQueue,
    forced: SlotQueue,
    slab: Slab,
    /// Boxed to keep [`super::AnyReorder`] small (one pointer hop per insert).
    loss: Box<LossDetector>,
    rate: ArrivalRate,
    pacer: Option<Pacer>,
    /// Packets up to this number were held behind a hole when it was resolved: they leave
    /// paced. Packets that arrive in order leave at once (pacing them would only slow the
    /// flow to its own measured rate).
    paced_until: Option<GlobalSeq>,
    /// Loss repair (`None`: off).
    repair: Option<Box<RepairRequests>>,
    /// See [`ReorderConfig::hold_all_evidence`].
    hold_all_evidence: bool,
    /// Longest a hole stays open after it was first seen, repair included.
    max_hold: std::time::Duration,
    stats: ReorderStats,
    discarded: u64,
}

impl Bmp {
    /// A fresh buffer expecting global sequence number 0 first.
    pub fn new(config: ReorderConfig) -> Self {
        let span_cap = config
            .max_packets
            .saturating_mul(SPAN_FACTOR)
            .clamp(MIN_SPAN, MAX_SPAN) as u64;
        Bmp {
            max_packets: config.max_packets,
            max_bytes: config.max_bytes,
            next: 0,
            ring: VecDeque::new(),
            span_cap,
            held_packets: 0,
            held_bytes: 0,
            late: SlotQueue::default(),
            forced: SlotQueue::default(),
            slab: Slab::default(),
            loss: Box::new(LossDetector::new(&config)),
            rate: ArrivalRate::new(config.max_hold.max(RATE_WINDOW * 10)),
            pacer: Pacer::new(config.pacing, config.max_hold.max(RATE_WINDOW)),
            paced_until: None,
            repair: config.repair_wait.map(|w| Box::new(RepairRequests::new(w))),
            hold_all_evidence: config.hold_all_evidence,
            max_hold: config.max_hold,
            stats: ReorderStats::default(),
            discarded: 0,
        }
    }

    /// The lowest global sequence number neither released nor declared lost: an insert
    /// below it is late.
    pub fn next_seq(&self) -> GlobalSeq {
        self.next
    }

    /// Inserted packets that will never be released: dropped from a full late or forced
    /// queue, duplicates of a held packet, or too large for the caller's `out` buffer.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Packets waiting in the late and forced queues (released at the next poll, unpaced;
    /// not counted in `held_packets`).
    pub fn queued_packets(&self) -> usize {
        self.late.len() + self.forced.len()
    }

    fn is_held(&self, seq: GlobalSeq) -> bool {
        seq >= self.next
            && usize::try_from(seq - self.next)
                .ok()
                .and_then(|k| self.ring.get(k))
                .is_some_and(|&i| i != NIL)
    }

    /// Offset and slot of the lowest held packet.
    fn lowest_held(&self) -> Option<(usize, u32)> {
        self.ring
            .iter()
            .position(|&i| i != NIL)
            .map(|k| (k, self.ring[k]))
    }

    /// Counts `n` sequence numbers declared lost for `evidence`, first seen at `first_seen`.
    fn declare_lost(&mut self, now: Time, evidence: LossEvidence, n: u64, first_seen: Time) {
        let s = &mut self.stats;
        match evidence {
            LossEvidence::PathPredecessor => s.lost_predecessor += n,
            LossEvidence::Comparison => s.lost_comparison += n,
            LossEvidence::Timer => s.lost_timer += n,
            LossEvidence::Overflow => s.lost_overflow += n,
        }
        let d = duration_nanos(now.saturating_since(first_seen));
        s.loss_detect_nanos_sum = s.loss_detect_nanos_sum.saturating_add(d.saturating_mul(n));
        if n > 0 {
            s.loss_detect_nanos_max = s.loss_detect_nanos_max.max(d);
        }
    }

    fn push_forced(&mut self, now: Time, i: u32) {
        let dropped =
            self.forced
                .push_capped(&mut self.slab, i, now, self.max_packets, self.max_bytes);
        if dropped > 0 {
            self.declare_lost(now, LossEvidence::Overflow, dropped, now);
            self.discarded += dropped;
        }
    }

    /// Advances `next` to `target`, declaring the holes below it lost (`Overflow`) and moving
    /// the held packets below it to the forced queue, lowest first.
    fn force_below(&mut self, now: Time, target: GlobalSeq) {
        let mut holes = 0;
        while self.next < target {
            let Some(i) = self.ring.pop_front() else {
                // Nothing held up to here: the holes were first seen by the arrival forcing them.
                self.declare_lost(now, LossEvidence::Overflow, target - self.next, now);
                self.next = target;
                break;
            };
            self.next += 1;
            if i == NIL {
                holes += 1;
                continue;
            }
            let slot = self.slab.get(i);
            let (arrived, len) = (slot.arrived, slot.buf.len());
            if holes > 0 {
                self.declare_lost(now, LossEvidence::Overflow, holes, arrived);
                holes = 0;
            }
            self.held_packets -= 1;
            self.held_bytes -= len;
            self.push_forced(now, i);
        }
        if holes > 0 {
            // Stopped inside a hole run: the ring's back is held, so a packet above exists.
            let first_seen = self
                .lowest_held()
                .map_or(now, |(_, i)| self.slab.get(i).arrived);
            self.declare_lost(now, LossEvidence::Overflow, holes, first_seen);
        }
        self.forget_below_next();
    }

    /// Releases `seq` (not held, `>= next`, lower than every held packet) through the forced
    /// queue: the holes below it are declared lost.
    fn force_new(&mut self, now: Time, seq: GlobalSeq, send_us: i64, packet: &[u8]) {
        self.force_below(now, seq);
        if let Some(i) = self.ring.pop_front() {
            debug_assert_eq!(i, NIL, "force_new: {seq} was held");
        }
        self.next = seq.saturating_add(1);
        self.forget_below_next();
        let i = self.slab.alloc(seq, now, send_us, packet);
        self.push_forced(now, i);
    }

    /// Copies slot `i` out and frees it; `None` if it did not fit `out` (dropped).
    fn emit(&mut self, now: Time, i: u32, late: bool, out: &mut [u8]) -> Option<Released> {
        let slot = self.slab.get(i);
        let (global_seq, arrived) = (slot.seq, slot.arrived);
        let Some(len) = self.slab.take_into(i, out) else {
            self.discarded += 1;
            return None;
        };
        self.stats.released += 1;
        self.stats.late += u64::from(late);
        Some(Released {
            global_seq,
            len,
            held_for: now.saturating_since(arrived),
            late,
        })
    }

    /// `next` is a hole: declares the holes up to the lowest held packet lost while there is
    /// evidence. True if all were (a held packet is at the head now).
    fn resolve_holes(&mut self, now: Time) -> bool {
        let Some((k, i)) = self.lowest_held() else {
            return false;
        };
        let slot = self.slab.get(i);
        let (first_seen, send_us) = (slot.arrived, slot.send_us);
        for _ in 0..k {
            // seed PET-BMP §V-B: comparison-based detection, timer as backup (plus ETOM's
            // path predecessors), evidence in `loss_detect`.
            let Some(evidence) = self.loss.evidence(self.next, now, first_seen, send_us) else {
                return false;
            };
            // Loss repair: a hole that was asked for stays open for the repair's round trip,
            // never beyond `max_hold` after the hole was first seen. (Holes found by
            // comparison or timer are not asked for: which path lost them, and whether it
            // was congested, is unknown.)
            if let Some(give_up) = self.repair.as_ref().and_then(|r| r.give_up_at(self.next))
                && now < give_up.min(first_seen + self.max_hold)
            {
                return false;
            }
            self.declare_lost(now, evidence, 1, first_seen);
            self.ring.pop_front();
            self.next += 1;
            self.forget_below_next();
        }
        true
    }

    /// Everything held now leaves paced (criterion 5 of seed PET-BMP §IV).
    fn mark_burst(&mut self) {
        if let Some(last) = (self.ring.len() as u64).checked_sub(1) {
            let until = self.next + last;
            self.paced_until = Some(self.paced_until.map_or(until, |u| u.max(until)));
        }
    }

    fn forget_below_next(&mut self) {
        self.loss.forget_below(self.next);
        if let Some(r) = &mut self.repair {
            r.forget_below(self.next);
        }
    }
}

impl ReorderBuffer for Bmp {
    fn set_paths(&mut self, _now: Time, paths: &[PathId]) {
        self.loss.set_paths(paths);
    }

    fn on_datagram(&mut self, now: Time, path: PathId, send_ts_us: u32) {
        self.loss.on_datagram(now, path, send_ts_us);
    }

    fn insert(&mut self, now: Time, arrival: &Arrival, packet: &[u8]) {
        self.stats.inserted += 1;
        let send_us = self.loss.on_insert(now, arrival);
        if self.rate.on_arrival(now)
            && let Some(p) = &mut self.pacer
        {
            p.set_arrival_interval(self.rate.interval());
        }
        let seq = arrival.global_seq;
        if let Some(prev) = arrival.prev_on_path
            && prev >= self.next
            && prev < seq
            && !self.is_held(prev)
        {
            self.loss.note_predecessor(prev);
            // Repair only what a path lost while its queue was short: a loss at a full queue
            // is congestion, the end hosts' TCP must see it (docs/protocol.md#repair).
            let queueing = self.loss.queueing_us(arrival.path);
            if let Some(r) = &mut self.repair
                && (self.hold_all_evidence || queueing.is_some_and(|q| q < REPAIR_MAX_QUEUEING_US))
            {
                r.request(prev, now);
            }
        }
        if let Some(r) = &self.repair
            && seq >= self.next
            && r.give_up_at(seq).is_some()
            && !self.is_held(seq)
        {
            self.stats.repaired += 1;
        }
        if seq < self.next {
            let i = self.slab.alloc(seq, now, send_us, packet);
            self.discarded +=
                self.late
                    .push_capped(&mut self.slab, i, now, self.max_packets, self.max_bytes);
            return;
        }
        if seq - self.next >= self.span_cap {
            self.force_below(now, seq - self.span_cap + 1);
        }
        if self.is_held(seq) {
            self.discarded += 1; // a duplicate (the session filters those): keep the first
            return;
        }
        let len = packet.len();
        while self.held_packets >= self.max_packets || self.held_bytes + len > self.max_bytes {
            match self.lowest_held() {
                Some((k, _)) if self.next + (k as u64) < seq => {
                    self.force_below(now, self.next + k as u64 + 1);
                }
                _ => {
                    self.force_new(now, seq, send_us, packet);
                    return;
                }
            }
        }
        let i = self.slab.alloc(seq, now, send_us, packet);
        let k = (seq - self.next) as usize;
        if k == self.ring.len() {
            self.ring.push_back(i); // the common case: the next in order
        } else {
            if k > self.ring.len() {
                self.ring.resize(k + 1, NIL);
            }
            self.ring[k] = i;
            if k == 0 {
                // The head hole filled: what waited behind it leaves as a paced burst.
                self.mark_burst();
            }
        }
        self.held_packets += 1;
        self.held_bytes += len;
        self.stats.max_held_packets = self.stats.max_held_packets.max(self.held_packets as u64);
        self.stats.max_held_bytes = self.stats.max_held_bytes.max(self.held_bytes as u64);
    }

    fn poll_release(&mut self, now: Time, out: &mut [u8]) -> Option<Released> {
        loop {
            if let Some(i) = self.late.pop(&self.slab) {
                match self.emit(now, i, true, out) {
                    Some(r) => return Some(r),
                    None => continue,
                }
            }
            if let Some(i) = self.forced.pop(&self.slab) {
                match self.emit(now, i, false, out) {
                    Some(r) => return Some(r),
                    None => continue,
                }
            }
            let head = *self.ring.front()?;
            if head == NIL {
                if self.resolve_holes(now) {
                    // Holes given up: what waited behind them leaves as a paced burst.
                    self.mark_burst();
                    continue;
                }
                return None;
            }
            let burst = self.paced_until.is_some_and(|u| self.next <= u);
            if !burst {
                self.paced_until = None;
            }
            if let Some(p) = &mut self.pacer
                && burst
            {
                if !p.may_release(now) {
                    return None;
                }
                p.on_release(now);
            }
            self.ring.pop_front();
            self.next += 1;
            self.forget_below_next();
            self.held_packets -= 1;
            self.held_bytes -= self.slab.get(head).buf.len();
            if let Some(r) = self.emit(now, head, false, out) {
                return Some(r);
            }
        }
    }

    fn next_deadline(&self) -> Option<Time> {
        let queued = match (
            self.late.front_ready(&self.slab),
            self.forced.front_ready(&self.slab),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if queued.is_some() {
            return queued;
        }
        let head = *self.ring.front()?;
        if head != NIL {
            let arrived = self.slab.get(head).arrived;
            return Some(
                self.pacer
                    .as_ref()
                    .map_or(arrived, |p| p.ready_at().max(arrived)),
            );
        }
        let (_, i) = self.lowest_held()?;
        let slot = self.slab.get(i);
        let ready = self
            .loss
            .hole_ready_at(self.next, slot.arrived, slot.send_us);
        // A requested hole stays open until its repair's deadline; one not requested yet
        // is requested when its evidence holds (`ready`), then waits.
        let give_up = self
            .repair
            .as_ref()
            .and_then(|r| r.give_up_at(self.next))
            .map(|t| t.min(slot.arrived + self.max_hold));
        Some(give_up.map_or(ready, |t| ready.max(t)))
    }

    fn poll_repair_request(&mut self) -> Option<GlobalSeq> {
        self.repair.as_mut()?.poll()
    }

    fn set_repair_wait(&mut self, wait: std::time::Duration) {
        if let Some(r) = &mut self.repair {
            r.set_wait(wait);
        }
    }

    fn set_hold_all_evidence(&mut self, on: bool) {
        self.hold_all_evidence = on;
    }

    fn held_packets(&self) -> usize {
        self.held_packets
    }

    fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    fn stats(&self) -> ReorderStats {
        ReorderStats {
            discarded: self.discarded,
            repair_requests: self.repair.as_ref().map_or(0, |r| r.sent),
            ..self.stats
        }
    }
}
