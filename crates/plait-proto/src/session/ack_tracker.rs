//! Receive side of one path: which datagrams arrived, when, and when to acknowledge them
//! (docs/protocol.md#ack-policy).
//!
//! Invariants: `ranges` are disjoint, non-adjacent and sorted highest first, at most
//! [`MAX_RANGES`] of them (the lowest is forgotten beyond that); at most
//! [`MAX_TIMESTAMPS`] receive timestamps wait for the next ACK (a full list makes the ACK
//! due at once, so no timestamp is dropped while the peer keeps sending).

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::cc::{ACK_SOON_DELAY, ACK_SOON_EVERY};
use crate::ids::{PathSeq, expand_seq};
use crate::time::Time;

/// Most ranges remembered and sent in one ACK frame.
pub const MAX_RANGES: usize = 32;
/// Most receive timestamps carried by one ACK frame.
pub const MAX_TIMESTAMPS: usize = 32;
/// Ranges and timestamps reach at most this far below the largest received sequence
/// number: the wire carries 32-bit offsets (docs/protocol.md#ack-frame), so anything older
/// is forgotten rather than left unencodable.
const MAX_SPAN: u64 = (1 << 31) - 1;
/// Smoothed arrival gaps without an arrival after which a path is receive-silent
/// ([`AckTracker::receive_silent`]).
const SILENT_GAPS: u32 = 8;

/// Whether a datagram's path sequence number was new.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrived {
    /// First time seen.
    New,
    /// Already received.
    Duplicate,
    /// Below everything remembered: cannot tell; its frames are processed but not recorded.
    Old,
}

/// Receive-side state of one path.
#[derive(Clone, Debug, Default)]
pub struct AckTracker {
    ranges: Vec<RangeInclusive<PathSeq>>,
    largest_recv_time: Time,
    timestamps: Vec<(PathSeq, u32)>,
    eliciting_unacked: u32,
    first_unacked_at: Option<Time>,
    /// A datagram since the last ACK carried ACK_SOON (docs/protocol.md#ack-soon).
    soon_asked: bool,
    last_recv: Option<Time>,
    /// Smoothed gap between arrivals (gain 1/8), for [`AckTracker::receive_silent`].
    gap: Option<Duration>,
    /// Where expansion centres while nothing was received ([`AckTracker::resumed`]).
    resume_at: PathSeq,
}

impl AckTracker {
    /// Expands a header's truncated path sequence number.
    pub fn expand(&self, truncated: u32) -> PathSeq {
        expand_seq(self.expected(), truncated)
    }

    /// The path sequence number expected next: one above the largest received.
    fn expected(&self) -> PathSeq {
        self.ranges.first().map_or(self.resume_at, |r| r.end() + 1)
    }

    /// A tracker for the same path id re-added: nothing received yet, but truncated
    /// numbers expand near where this one left off, because the peer continues its
    /// numbering (docs/protocol.md#sequence-numbers).
    pub fn resumed(&self) -> AckTracker {
        AckTracker {
            resume_at: self.expected(),
            ..AckTracker::default()
        }
    }

    /// Records a datagram with path sequence number `seq` that arrived at `now`;
    /// `ack_soon`: it carried ACK_SOON.
    pub fn on_received(
        &mut self,
        now: Time,
        seq: PathSeq,
        ack_eliciting: bool,
        ack_soon: bool,
    ) -> Arrived {
        let arrived = self.insert(seq);
        if arrived != Arrived::New {
            return arrived;
        }
        self.forget_beyond_span();
        if let Some(last) = self.last_recv {
            let sample = now.saturating_since(last);
            self.gap = Some(self.gap.map_or(sample, |g| (g * 7 + sample) / 8));
        }
        self.last_recv = Some(now);
        if self.ranges.first().is_some_and(|r| *r.end() == seq) {
            self.largest_recv_time = now;
        }
        if self.timestamps.len() < MAX_TIMESTAMPS {
            self.timestamps.push((seq, now.wire_micros()));
        }
        if ack_eliciting {
            self.eliciting_unacked += 1;
            self.first_unacked_at.get_or_insert(now);
        }
        self.soon_asked |= ack_soon;
        Arrived::New
    }

    fn insert(&mut self, seq: PathSeq) -> Arrived {
        // Common case: the next in order extends the highest range.
        if let Some(first) = self.ranges.first_mut() {
            if seq == first.end() + 1 {
                *first = *first.start()..=seq;
                return Arrived::New;
            }
            if first.contains(&seq) {
                return Arrived::Duplicate;
            }
        }
        // Highest first: find the first range whose start is <= seq.
        let idx = self.ranges.iter().position(|r| *r.start() <= seq);
        match idx {
            Some(i) if self.ranges[i].contains(&seq) => return Arrived::Duplicate,
            None if self.ranges.len() >= MAX_RANGES => return Arrived::Old,
            _ => {}
        }
        let i = idx.unwrap_or(self.ranges.len());
        // seq lies above ranges[i] (if any) and below ranges[i-1] (if any).
        let joins_lower = i < self.ranges.len() && *self.ranges[i].end() + 1 == seq;
        let joins_upper = i > 0 && *self.ranges[i - 1].start() == seq + 1;
        match (joins_lower, joins_upper) {
            (true, true) => {
                let upper_end = *self.ranges[i - 1].end();
                self.ranges[i] = *self.ranges[i].start()..=upper_end;
                self.ranges.remove(i - 1);
            }
            (true, false) => self.ranges[i] = *self.ranges[i].start()..=seq,
            (false, true) => self.ranges[i - 1] = seq..=*self.ranges[i - 1].end(),
            (false, false) => {
                self.ranges.insert(i, seq..=seq);
                self.ranges.truncate(MAX_RANGES);
            }
        }
        Arrived::New
    }

    /// Forgets ranges and timestamps too far below the largest to be encoded.
    fn forget_beyond_span(&mut self) {
        let Some(largest) = self.ranges.first().map(|r| *r.end()) else {
            return;
        };
        let floor = largest.saturating_sub(MAX_SPAN);
        self.ranges.retain(|r| *r.end() >= floor);
        if let Some(last) = self.ranges.last_mut()
            && *last.start() < floor
        {
            *last = floor..=*last.end();
        }
        self.timestamps.retain(|(s, _)| *s >= floor);
    }

    /// When an ACK for this path is due (`None`: nothing to acknowledge): at once after
    /// `ack_every` ack-eliciting datagrams; if one of them carried ACK_SOON,
    /// [`ACK_SOON_DELAY`] after the first once [`ACK_SOON_EVERY`] came; else
    /// `max_ack_delay` after the first (docs/protocol.md#ack-policy; the sender models this
    /// as [`crate::cc::AckHold`]).
    pub fn ack_deadline(&self, ack_every: u32, max_ack_delay: Duration) -> Option<Time> {
        if self.timestamps.len() >= MAX_TIMESTAMPS {
            // A full list is due at once, eliciting or not, so no timestamp is dropped.
            return Some(self.first_unacked_at.unwrap_or(self.largest_recv_time));
        }
        let first = self.first_unacked_at?;
        if self.eliciting_unacked >= ack_every {
            Some(first)
        } else if self.soon_asked && self.eliciting_unacked >= ACK_SOON_EVERY {
            Some(first + ACK_SOON_DELAY.min(max_ack_delay))
        } else {
            Some(first + max_ack_delay)
        }
    }

    /// Whether anything arrived since the last ACK (worth piggybacking).
    pub fn has_unacked(&self) -> bool {
        self.eliciting_unacked > 0 || !self.timestamps.is_empty()
    }

    /// The ranges to acknowledge, highest first.
    pub fn ranges(&self) -> &[RangeInclusive<PathSeq>] {
        &self.ranges
    }

    /// Pending receive timestamps (seq, µs on this endpoint's clock).
    pub fn timestamps(&self) -> &[(PathSeq, u32)] {
        &self.timestamps
    }

    /// Largest sequence number received and when it arrived.
    pub fn largest(&self) -> Option<(PathSeq, Time)> {
        self.ranges
            .first()
            .map(|r| (*r.end(), self.largest_recv_time))
    }

    /// When the last new datagram arrived on this path.
    pub fn last_recv(&self) -> Option<Time> {
        self.last_recv
    }

    /// Whether nothing has arrived for longer than this path's arrivals are usually apart
    /// allows: `floor`, or [`SILENT_GAPS`] smoothed gaps if that is longer (a slow or
    /// lightly used path is not silent just because its datagrams are far apart). A path
    /// that never received is silent.
    pub fn receive_silent(&self, now: Time, floor: Duration) -> bool {
        let Some(last) = self.last_recv else {
            return true;
        };
        let allowed = self.gap.map_or(floor, |g| floor.max(g * SILENT_GAPS));
        now.saturating_since(last) > allowed
    }

    /// An ACK frame carrying the current state was sent.
    pub fn on_ack_sent(&mut self) {
        self.timestamps.clear();
        self.eliciting_unacked = 0;
        self.first_unacked_at = None;
        self.soon_asked = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(seqs: &[u64]) -> AckTracker {
        let mut t = AckTracker::default();
        for &s in seqs {
            t.on_received(Time::ZERO, s, true, false);
        }
        t
    }

    #[test]
    fn ranges_merge() {
        let t = tracker(&[0, 1, 2, 5, 6, 9, 4, 3]);
        assert_eq!(t.ranges(), &[9..=9, 0..=6]);
        let t = tracker(&[10, 8, 9]);
        assert_eq!(t.ranges(), &[8..=10]);
    }

    #[test]
    fn duplicates_detected() {
        let mut t = tracker(&[0, 1, 5]);
        assert_eq!(
            t.on_received(Time::ZERO, 1, true, false),
            Arrived::Duplicate
        );
        assert_eq!(
            t.on_received(Time::ZERO, 5, true, false),
            Arrived::Duplicate
        );
        assert_eq!(t.on_received(Time::ZERO, 3, true, false), Arrived::New);
    }

    #[test]
    fn bounded_ranges_forget_lowest() {
        let seqs: Vec<u64> = (0..100).map(|i| i * 2).collect();
        let mut t = tracker(&seqs);
        assert_eq!(t.ranges().len(), MAX_RANGES);
        assert_eq!(t.ranges()[0], 198..=198);
        assert_eq!(t.on_received(Time::ZERO, 1, true, false), Arrived::Old);
    }

    #[test]
    fn ack_deadline_policy() {
        let mut t = AckTracker::default();
        let d = Duration::from_millis(5);
        assert_eq!(t.ack_deadline(2, d), None);
        t.on_received(Time::from_millis(10), 0, true, false);
        assert_eq!(t.ack_deadline(2, d), Some(Time::from_millis(15)));
        t.on_received(Time::from_millis(11), 1, true, false);
        assert_eq!(t.ack_deadline(2, d), Some(Time::from_millis(10)));
        t.on_ack_sent();
        assert_eq!(t.ack_deadline(2, d), None);
        t.on_received(Time::from_millis(12), 2, false, false);
        assert_eq!(
            t.ack_deadline(2, d),
            None,
            "non-eliciting alone does not make an ACK due"
        );
        assert!(t.has_unacked());
    }

    #[test]
    fn asked_for_soon_acks_after_the_soon_count_an_ack_waits_the_soon_delay_at_most() {
        let (every, delay) = (16, Duration::from_millis(25));
        for asked in [false, true] {
            let mut t = AckTracker::default();
            for seq in 0..u64::from(ACK_SOON_EVERY) - 1 {
                // Only the second datagram asks: one is enough until the next ACK.
                t.on_received(Time::from_millis(100 + seq), seq, true, asked && seq == 1);
            }
            assert_eq!(t.ack_deadline(every, delay), Some(Time::from_millis(125)));
            t.on_received(Time::from_millis(110), 3, true, false);
            let soon = Time::from_millis(100) + ACK_SOON_DELAY;
            let expected = if asked { soon } else { Time::from_millis(125) };
            assert_eq!(
                t.ack_deadline(every, delay),
                Some(expected),
                "asked {asked}"
            );
            if asked {
                // Never later than the configured delay.
                let short = Duration::from_millis(2);
                assert_eq!(t.ack_deadline(every, short), Some(Time::from_millis(102)));
            }
            // The count rule still makes it due at once.
            for seq in 4..16 {
                t.on_received(Time::from_millis(111), seq, true, false);
            }
            assert_eq!(t.ack_deadline(every, delay), Some(Time::from_millis(100)));
            // An ACK ends the request: the next datagrams must ask again.
            t.on_ack_sent();
            for seq in 16..20 {
                t.on_received(Time::from_millis(200), seq, true, false);
            }
            assert_eq!(t.ack_deadline(every, delay), Some(Time::from_millis(225)));
        }
    }

    #[test]
    fn ranges_never_span_more_than_the_wire_allows() {
        let mut t = tracker(&[0, 1, 5]);
        // A jump of 2^32: the old ranges are forgotten, nothing unencodable remains.
        t.on_received(Time::ZERO, 1 << 32, true, false);
        let largest = *t.ranges()[0].end();
        assert!(t.ranges().iter().all(|r| largest - r.start() <= MAX_SPAN));
        assert!(t.timestamps().iter().all(|(s, _)| largest - s <= MAX_SPAN));
    }

    #[test]
    fn full_timestamp_list_is_due_without_eliciting_datagrams() {
        let mut t = AckTracker::default();
        for s in 0..MAX_TIMESTAMPS as u64 {
            t.on_received(Time::from_millis(s), s, false, false);
        }
        assert!(t.ack_deadline(16, Duration::from_millis(25)).is_some());
    }

    proptest::proptest! {
        #[test]
        fn ranges_match_model(seqs in proptest::collection::vec(0u64..200, 0..300)) {
            let mut t = AckTracker::default();
            let mut model = std::collections::BTreeSet::new();
            for s in seqs {
                let arrived = t.on_received(Time::ZERO, s, true, false);
                if arrived == Arrived::New { model.insert(s); }
                if arrived == Arrived::Duplicate { proptest::prop_assert!(model.contains(&s)); }
                // Invariant: sorted highest first, disjoint, non-adjacent, bounded.
                let r = t.ranges();
                proptest::prop_assert!(r.len() <= MAX_RANGES);
                for w in r.windows(2) {
                    proptest::prop_assert!(*w[1].end() + 1 < *w[0].start());
                }
                for range in r {
                    for s in range.clone() { proptest::prop_assert!(model.contains(&s)); }
                }
            }
        }
    }
}
