//! Losses of one path that an ACK may still prove spurious, and the reordering allowance
//! such proofs teach the loss thresholds (RFC 8985 §6.2, RACK's reordering window).
//!
//! A datagram declared lost by the RFC 9002 thresholds (3 later datagrams acknowledged, or
//! 9/8 RTT) may only be late: links reorder (on the test bed, datagrams of one path sent
//! from and forwarded by different CPUs overtake each other by up to a few milliseconds),
//! and an ACK then names it after the sender gave it up. Such a loss says nothing about the
//! link. So a declared loss waits here for a confirmation time (one smoothed RTT and the
//! peer's ACK delay): an ACK naming it in that time proves it spurious; otherwise it is
//! confirmed, and only then does it count as a sample of the link's own loss
//! (`shallow_loss_rate`, the `adaptive` controller's evidence). The congestion response
//! does not wait (a real loss needs it at once); it is undone when every loss of its event
//! proves spurious (`cc::PathCongestion::on_ack`).
//!
//! Each spurious loss widens the threshold that declared it to what would have spared it:
//! the time threshold by how long after the declaration the ACK came (at most half a
//! smoothed RTT), the packet threshold to one more than the datagrams acknowledged past it
//! (at most [`MAX_PACKET_THRESHOLD`]). After [`RESET_AFTER_CONFIRMED`] confirmed losses without a
//! spurious one the allowance is dropped again (RACK resets its window after 16 recoveries).
//!
//! Invariants: at most [`LateLosses::CAPACITY`] entries, in declaration order (so in
//! sequence-number order: losses are declared oldest first and never twice); the packet
//! threshold stays within [`BASE_PACKET_THRESHOLD`]`..=`[`MAX_PACKET_THRESHOLD`]; no clock.

use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::ids::PathSeq;
use crate::time::Time;

/// RFC 9002's kPacketThreshold: the packet threshold with no reordering seen.
pub const BASE_PACKET_THRESHOLD: u64 = 3;
/// Most datagrams acknowledged past an unacknowledged one before it is declared lost.
pub const MAX_PACKET_THRESHOLD: u64 = 16;
/// Confirmed losses, none spurious in between, after which the allowance is dropped.
pub const RESET_AFTER_CONFIRMED: u32 = 16;

/// One declared loss awaiting confirmation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingLoss {
    /// Its path sequence number.
    pub seq: PathSeq,
    /// When it was declared lost.
    pub declared: Time,
    /// Datagrams acknowledged past it when it was declared (largest acknowledged − seq).
    pub overtaken_by: u64,
    /// The packet threshold declared it.
    pub by_packets: bool,
    /// The time threshold declared it.
    pub by_time: bool,
    /// Its fate samples the link's own loss (`SentPacket::link_sample`).
    pub link_sample: bool,
    /// It carried data, not only a probe (the controller's evidence counts only those).
    pub data: bool,
    /// Declared on an ACK's arrival, not by the loss timer (a path gone silent finds its
    /// flight lost by timer, and that is an outage, not the link's loss).
    pub on_ack: bool,
    /// The path's queue was short when it was declared (`cc::SHALLOW_QUEUE`).
    pub shallow: bool,
}

/// Declared losses not yet confirmed, and the reordering allowance (see the module docs).
#[derive(Clone, Debug)]
pub struct LateLosses {
    pending: VecDeque<PendingLoss>,
    extra_time: Duration,
    packet_threshold: u64,
    confirmed_since_spurious: u32,
}

impl Default for LateLosses {
    fn default() -> Self {
        LateLosses {
            pending: VecDeque::new(),
            extra_time: Duration::ZERO,
            packet_threshold: BASE_PACKET_THRESHOLD,
            confirmed_since_spurious: 0,
        }
    }
}

impl LateLosses {
    /// Most losses awaiting confirmation; beyond it the oldest is confirmed early.
    pub const CAPACITY: usize = 256;

    /// Time added to the RFC 9002 time threshold.
    pub fn extra_time(&self) -> Duration {
        self.extra_time
    }

    /// Datagrams acknowledged past an unacknowledged one that declare it lost.
    pub fn packet_threshold(&self) -> u64 {
        self.packet_threshold
    }

    /// Records a declared loss. Returns the oldest pending loss, confirmed early, when the
    /// bound forces it out.
    pub fn declare(&mut self, loss: PendingLoss) -> Option<PendingLoss> {
        let forced = if self.pending.len() >= Self::CAPACITY {
            self.pending.pop_front()
        } else {
            None
        };
        self.pending.push_back(loss);
        if forced.is_some() {
            self.note_confirmed();
        }
        forced
    }

    /// Takes the pending losses an ACK range names: they were late, not lost. Widens the
    /// allowance for each (`now` is the ACK's arrival; `srtt` caps the time allowance at
    /// half of it). Returns how many were taken, calling `each` on every one.
    pub fn take_acked(
        &mut self,
        range: &RangeInclusive<PathSeq>,
        now: Time,
        srtt: Duration,
        mut each: impl FnMut(&PendingLoss),
    ) -> u32 {
        // Pending losses are in sequence order: most ranges of most ACKs miss them all.
        let (Some(first), Some(last)) = (self.pending.front(), self.pending.back()) else {
            return 0;
        };
        if first.seq > *range.end() || last.seq < *range.start() {
            return 0;
        }
        let mut taken = 0;
        let cap = srtt / 2;
        let (mut extra, mut threshold) = (self.extra_time, self.packet_threshold);
        self.pending.retain(|p| {
            if !range.contains(&p.seq) {
                return true;
            }
            if p.by_time {
                extra = extra.max(now.saturating_since(p.declared).min(cap));
            }
            if p.by_packets {
                threshold = threshold.max(p.overtaken_by.saturating_add(1));
            }
            each(p);
            taken += 1;
            false
        });
        if taken > 0 {
            self.extra_time = extra;
            self.packet_threshold = threshold.clamp(BASE_PACKET_THRESHOLD, MAX_PACKET_THRESHOLD);
            self.confirmed_since_spurious = 0;
        }
        taken
    }

    /// Confirms, oldest first, every pending loss declared `wait` or longer before `now`,
    /// calling `each` on it.
    pub fn confirm_due(&mut self, now: Time, wait: Duration, mut each: impl FnMut(&PendingLoss)) {
        while let Some(p) = self
            .pending
            .front()
            .copied()
            .filter(|p| now.saturating_since(p.declared) >= wait)
        {
            self.pending.pop_front();
            self.note_confirmed();
            each(&p);
        }
    }

    /// Forgets every pending loss (the path went down: its losses were the outage's) and
    /// keeps the allowance.
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    /// Losses awaiting confirmation.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no loss awaits confirmation.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    fn note_confirmed(&mut self) {
        self.confirmed_since_spurious += 1;
        if self.confirmed_since_spurious >= RESET_AFTER_CONFIRMED {
            self.confirmed_since_spurious = 0;
            self.extra_time = Duration::ZERO;
            self.packet_threshold = BASE_PACKET_THRESHOLD;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Time {
        Time::ZERO + MS * u32::try_from(ms).unwrap()
    }

    fn loss(seq: PathSeq, declared_ms: u64, overtaken_by: u64, by_packets: bool) -> PendingLoss {
        PendingLoss {
            seq,
            declared: at(declared_ms),
            overtaken_by,
            by_packets,
            by_time: true,
            link_sample: true,
            data: true,
            on_ack: true,
            shallow: true,
        }
    }

    #[test]
    fn an_acked_loss_is_taken_and_widens_both_thresholds() {
        let mut late = LateLosses::default();
        late.declare(loss(10, 100, 6, true));
        late.declare(loss(11, 100, 5, true));
        late.declare(loss(20, 110, 3, false));
        let mut seen = Vec::new();
        let n = late.take_acked(&(9..=11), at(104), 30 * MS, |p| seen.push(p.seq));
        assert_eq!((n, seen), (2, vec![10, 11]));
        assert_eq!(late.packet_threshold(), 7);
        assert_eq!(late.extra_time(), 4 * MS);
        assert_eq!(late.len(), 1);
        // A range past every pending loss takes nothing.
        assert_eq!(late.take_acked(&(21..=30), at(120), 30 * MS, |_| {}), 0);
        assert_eq!(late.len(), 1);
    }

    #[test]
    fn the_allowance_is_bounded() {
        let mut late = LateLosses::default();
        late.declare(loss(1, 0, 1000, true));
        late.take_acked(&(1..=1), at(500), 20 * MS, |_| {});
        assert_eq!(late.packet_threshold(), MAX_PACKET_THRESHOLD);
        assert_eq!(late.extra_time(), 10 * MS, "half the smoothed RTT at most");
        // A loss the time threshold alone declared does not move the packet threshold.
        let mut late = LateLosses::default();
        late.declare(loss(1, 0, 9, false));
        late.take_acked(&(1..=1), at(2), 20 * MS, |_| {});
        assert_eq!(late.packet_threshold(), BASE_PACKET_THRESHOLD);
    }

    #[test]
    fn losses_are_confirmed_oldest_first_after_the_wait_and_reset_the_allowance() {
        let mut late = LateLosses::default();
        late.declare(loss(1, 0, 8, true));
        late.take_acked(&(1..=1), at(3), 40 * MS, |_| {});
        assert_eq!(late.packet_threshold(), 9);
        for s in 0..RESET_AFTER_CONFIRMED {
            late.declare(loss(PathSeq::from(s) + 10, 10, 9, true));
        }
        let mut confirmed = Vec::new();
        late.confirm_due(at(39), 30 * MS, |p| confirmed.push(p.seq));
        assert!(confirmed.is_empty(), "not yet due");
        late.confirm_due(at(40), 30 * MS, |p| confirmed.push(p.seq));
        assert_eq!(confirmed.len(), RESET_AFTER_CONFIRMED as usize);
        assert!(confirmed.windows(2).all(|w| w[0] < w[1]));
        assert!(late.is_empty());
        assert_eq!(late.packet_threshold(), BASE_PACKET_THRESHOLD);
        assert_eq!(late.extra_time(), Duration::ZERO);
    }

    #[test]
    fn the_bound_confirms_the_oldest_early() {
        let mut late = LateLosses::default();
        for s in 0..LateLosses::CAPACITY as PathSeq {
            assert_eq!(late.declare(loss(s, 0, 3, true)), None);
        }
        let forced = late.declare(loss(9999, 0, 3, true));
        assert_eq!(forced.map(|p| p.seq), Some(0));
        assert_eq!(late.len(), LateLosses::CAPACITY);
    }
}
