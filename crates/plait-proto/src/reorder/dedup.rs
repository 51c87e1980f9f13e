//! Placeholder, replaced by the duplicate filter.
use crate::ids::GlobalSeq;

/// Whether a global sequence number is new.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Never seen.
    Fresh,
    /// Seen before.
    Duplicate,
    /// Too far below the highest seen to tell.
    TooOld,
}

/// Placeholder.
#[derive(Debug, Default)]
pub struct DuplicateFilter { seen: std::collections::BTreeSet<GlobalSeq> }

impl DuplicateFilter {
    /// A filter remembering `window` sequence numbers below the highest.
    pub fn new(_window: u64) -> Self { Self::default() }
    /// Checks `seq` and remembers it.
    pub fn check_and_insert(&mut self, seq: GlobalSeq) -> Freshness {
        if self.seen.insert(seq) { Freshness::Fresh } else { Freshness::Duplicate }
    }
}
