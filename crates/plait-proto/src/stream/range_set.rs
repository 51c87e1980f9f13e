//! A set of byte offsets kept as sorted, disjoint, non-adjacent half-open ranges: which
//! bytes of a stream were received, acknowledged, or must be sent again.
//!
//! Invariants: ranges are non-empty, sorted, and neither overlap nor touch (touching
//! ranges are merged), so the set has one representation; the number of ranges is at most
//! one more than the number of holes, which the stream bounds by its window.

use std::collections::BTreeMap;
use std::ops::Range;

/// See the module docs. Keyed by range start; the value is the range end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// Adds `r` (merging with neighbours). Empty ranges are ignored.
    pub fn insert(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        let (mut start, mut end) = (r.start, r.end);
        // A range starting at or before `start` that reaches it: merge.
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back()
            && e >= start
        {
            start = s;
            end = end.max(e);
            self.ranges.remove(&s);
        }
        // Ranges starting inside [start, end]: swallow.
        while let Some((&s, &e)) = self.ranges.range(start..=end).next() {
            end = end.max(e);
            self.ranges.remove(&s);
        }
        self.ranges.insert(start, end);
    }

    /// Removes `r` from the set.
    pub fn remove(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        let overlapping: Vec<(u64, u64)> = self
            .ranges
            .range(..r.end)
            .rev()
            .take_while(|(_, e)| **e > r.start)
            .map(|(s, e)| (*s, *e))
            .collect();
        for (s, e) in overlapping {
            self.ranges.remove(&s);
            if s < r.start {
                self.ranges.insert(s, r.start);
            }
            if e > r.end {
                self.ranges.insert(r.end, e);
            }
        }
    }

    /// Whether every offset of `r` is in the set (true for an empty `r`).
    pub fn contains(&self, r: Range<u64>) -> bool {
        if r.start >= r.end {
            return true;
        }
        self.ranges
            .range(..=r.start)
            .next_back()
            .is_some_and(|(_, e)| *e >= r.end)
    }

    /// End of the range that starts at or covers `from`, if `from` is in the set: how far
    /// the set is contiguous from `from`.
    pub fn contiguous_end(&self, from: u64) -> Option<u64> {
        self.ranges
            .range(..=from)
            .next_back()
            .filter(|(_, e)| **e > from)
            .map(|(_, e)| *e)
    }

    /// The lowest range.
    pub fn first(&self) -> Option<Range<u64>> {
        self.ranges.iter().next().map(|(s, e)| *s..*e)
    }

    /// The parts of `r` not in the set, lowest first.
    pub fn gaps(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        if r.start >= r.end {
            return out;
        }
        let mut at = r.start;
        let lead = self
            .ranges
            .range(..=r.start)
            .next_back()
            .map(|(s, e)| (*s, *e));
        let rest = self
            .ranges
            .range(r.start.saturating_add(1)..r.end)
            .map(|(s, e)| (*s, *e));
        for (s, e) in lead.into_iter().chain(rest) {
            if e <= at {
                continue;
            }
            if s > at {
                out.push(at..s.min(r.end));
            }
            at = at.max(e);
            if at >= r.end {
                break;
            }
        }
        if at < r.end {
            out.push(at..r.end);
        }
        out
    }

    /// Drops everything below `offset`.
    pub fn remove_below(&mut self, offset: u64) {
        self.remove(0..offset);
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn insert_merges_and_remove_splits() {
        let mut s = RangeSet::default();
        s.insert(10..20);
        s.insert(30..40);
        s.insert(20..30);
        assert_eq!(s.len(), 1);
        assert!(s.contains(10..40));
        s.remove(15..35);
        assert_eq!(s.first(), Some(10..15));
        assert_eq!(s.gaps(0..50), vec![0..10, 15..35, 40..50]);
        assert_eq!(s.contiguous_end(12), Some(15));
        assert_eq!(s.contiguous_end(15), None);
        s.remove_below(38);
        assert_eq!(s.first(), Some(38..40));
    }

    proptest! {
        /// The set agrees with a plain bitmap under any inserts and removes.
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((any::<bool>(), 0u64..64, 0u64..16), 0..40)) {
            let mut set = RangeSet::default();
            let mut bits = [false; 80];
            for (add, start, len) in ops {
                let r = start..start + len;
                if add { set.insert(r.clone()) } else { set.remove(r.clone()) }
                for b in &mut bits[start as usize..(start + len) as usize] { *b = add; }
            }
            for i in 0..80u64 {
                prop_assert_eq!(set.contains(i..i + 1), bits[i as usize], "offset {}", i);
            }
            let gaps: u64 = set.gaps(0..80).iter().map(|g| g.end - g.start).sum();
            prop_assert_eq!(gaps, bits.iter().filter(|b| !**b).count() as u64);
            // Canonical: no two ranges touch.
            let v: Vec<_> = set.ranges.iter().collect();
            for w in v.windows(2) { prop_assert!(w[0].1 < w[1].0); }
        }
    }
}
