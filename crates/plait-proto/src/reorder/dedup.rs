//! Duplicate filter: tells whether a global sequence number was seen before, so the
//! session hands every inner packet to the reorder buffer at most once (redundant
//! scheduling and retransmitted datagrams produce copies).
//!
//! Owns a sliding bitmap in the style of RFC 6479: `Vec<u64>` words used as a ring, one bit
//! per sequence number, covering the `window` sequence numbers ending at the highest seen.
//!
//! Invariants:
//! - for `highest - window < seq <= highest` the bit of `seq` is set iff `seq` was inserted;
//!   older numbers are answered [`Freshness::TooOld`] (the filter cannot tell);
//! - `window` is rounded up to a multiple of 64, at least 64 (and at most 2^30);
//! - O(1) per call (at most one pass over the ring when the highest jumps far ahead), no
//!   allocation after [`DuplicateFilter::new`].

use crate::ids::GlobalSeq;

/// Whether a global sequence number is new.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Never seen: it is now remembered.
    Fresh,
    /// Seen before.
    Duplicate,
    /// Too far below the highest seen to tell (`seq + window <= highest`).
    TooOld,
}

/// Largest window accepted (bits); larger requests are clamped.
const MAX_WINDOW: u64 = 1 << 30;

/// Remembers which of the last `window` global sequence numbers were seen (RFC 6479 style).
#[derive(Clone, Debug)]
pub struct DuplicateFilter {
    /// Ring of bitmap words; word `w` (covering seqs `64w..64w+63`) lives at `w % len`.
    /// One word more than `window / 64` so the window never shares a ring slot with itself
    /// whatever its alignment.
    words: Vec<u64>,
    /// Sequence numbers remembered below and including the highest (multiple of 64).
    window: u64,
    /// Highest sequence number seen, if any.
    highest: Option<GlobalSeq>,
}

impl DuplicateFilter {
    /// A filter remembering `window` sequence numbers up to the highest seen (rounded up to a
    /// multiple of 64, at least 64, at most 2^30). The session uses 65536.
    pub fn new(window: u64) -> Self {
        let window = window.clamp(64, MAX_WINDOW).div_ceil(64) * 64;
        let n_words = (window / 64 + 1) as usize;
        DuplicateFilter {
            words: vec![0; n_words],
            window,
            highest: None,
        }
    }

    /// The window actually used (after rounding).
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The highest sequence number seen, if any.
    pub fn highest(&self) -> Option<GlobalSeq> {
        self.highest
    }

    /// Checks `seq` and remembers it if it is fresh.
    pub fn check_and_insert(&mut self, seq: GlobalSeq) -> Freshness {
        match self.highest {
            None => {
                self.highest = Some(seq);
                self.set(seq);
                Freshness::Fresh
            }
            Some(high) if seq > high => {
                self.clear_words_after(high, seq);
                self.highest = Some(seq);
                self.set(seq);
                Freshness::Fresh
            }
            Some(high) if high - seq >= self.window => Freshness::TooOld,
            Some(_) => {
                let (word, bit) = self.position(seq);
                if self.words[word] & bit != 0 {
                    Freshness::Duplicate
                } else {
                    self.words[word] |= bit;
                    Freshness::Fresh
                }
            }
        }
    }

    /// Ring index and bit mask of `seq`.
    fn position(&self, seq: GlobalSeq) -> (usize, u64) {
        let word = ((seq >> 6) % self.words.len() as u64) as usize;
        (word, 1u64 << (seq & 63))
    }

    fn set(&mut self, seq: GlobalSeq) {
        let (word, bit) = self.position(seq);
        self.words[word] |= bit;
    }

    /// Zeroes the words the highest moves into when it goes from `old` to `new` (`new > old`):
    /// words `(old >> 6) + 1 ..= new >> 6`, at most one pass over the ring.
    fn clear_words_after(&mut self, old: GlobalSeq, new: GlobalSeq) {
        let first = (old >> 6) + 1;
        let last = new >> 6;
        if last < first {
            return;
        }
        let len = self.words.len() as u64;
        let count = (last - first + 1).min(len);
        let start = first % len;
        for i in 0..count {
            self.words[((start + i) % len) as usize] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn window_is_rounded() {
        assert_eq!(DuplicateFilter::new(0).window(), 64);
        assert_eq!(DuplicateFilter::new(65).window(), 128);
        assert_eq!(DuplicateFilter::new(65536).window(), 65536);
        assert_eq!(DuplicateFilter::new(u64::MAX).window(), MAX_WINDOW);
    }

    #[test]
    fn fresh_then_duplicate() {
        let mut f = DuplicateFilter::new(64);
        assert_eq!(f.check_and_insert(5), Freshness::Fresh);
        assert_eq!(f.check_and_insert(5), Freshness::Duplicate);
        assert_eq!(f.check_and_insert(3), Freshness::Fresh);
        assert_eq!(f.check_and_insert(3), Freshness::Duplicate);
        assert_eq!(f.check_and_insert(100), Freshness::Fresh);
        assert_eq!(f.check_and_insert(5), Freshness::TooOld);
        // 100 - 64 = 36 is the edge: too old; 37 is remembered (and was never seen).
        assert_eq!(f.check_and_insert(36), Freshness::TooOld);
        assert_eq!(f.check_and_insert(37), Freshness::Fresh);
        assert_eq!(f.check_and_insert(37), Freshness::Duplicate);
        assert_eq!(f.highest(), Some(100));
    }

    #[test]
    fn far_jump_clears_everything() {
        let mut f = DuplicateFilter::new(128);
        for s in 0..200 {
            assert_eq!(f.check_and_insert(s), Freshness::Fresh);
        }
        assert_eq!(f.check_and_insert(1_000_000), Freshness::Fresh);
        for s in 1_000_000 - 127..1_000_000 {
            assert_eq!(f.check_and_insert(s), Freshness::Fresh, "{s}");
        }
        assert_eq!(f.check_and_insert(1_000_000 - 128), Freshness::TooOld);
    }

    #[test]
    fn near_u64_max() {
        let mut f = DuplicateFilter::new(64);
        assert_eq!(f.check_and_insert(u64::MAX - 1), Freshness::Fresh);
        assert_eq!(f.check_and_insert(u64::MAX), Freshness::Fresh);
        assert_eq!(f.check_and_insert(u64::MAX - 1), Freshness::Duplicate);
        assert_eq!(f.check_and_insert(u64::MAX - 63), Freshness::Fresh);
        assert_eq!(f.check_and_insert(u64::MAX - 64), Freshness::TooOld);
    }

    /// Reference model: remembers everything, answers TooOld by the same rule.
    struct Model {
        seen: BTreeSet<u64>,
        highest: Option<u64>,
        window: u64,
    }

    impl Model {
        fn check(&mut self, seq: u64) -> Freshness {
            if let Some(h) = self.highest
                && seq < h
                && h - seq >= self.window
            {
                return Freshness::TooOld;
            }
            self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
            if self.seen.insert(seq) {
                Freshness::Fresh
            } else {
                Freshness::Duplicate
            }
        }
    }

    proptest! {
        #[test]
        fn matches_model(
            window in 1u64..300,
            start in 0u64..(1 << 40),
            steps in prop::collection::vec((0u8..10, 0u64..400), 1..400),
        ) {
            let mut f = DuplicateFilter::new(window);
            let mut m = Model { seen: BTreeSet::new(), highest: None, window: f.window() };
            let mut cur = start;
            for (kind, amount) in steps {
                cur = match kind {
                    0..=3 => cur + amount % 8,          // small step forward
                    4..=6 => cur.saturating_sub(amount), // back (often a duplicate)
                    7 => cur,                            // exact repeat
                    8 => cur + amount * 97,              // big jump
                    _ => cur + (amount % 3) * 64,        // word-aligned jumps
                };
                prop_assert_eq!(f.check_and_insert(cur), m.check(cur), "seq {}", cur);
            }
        }
    }
}
