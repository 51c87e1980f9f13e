//! Lowest RTT first (`min-rtt`): every packet on the usable path with the smallest smoothed
//! RTT. A baseline not taken from the seeds (it is MPTCP's default scheduler); it weighs
//! delay but not capacity or queue, unlike EDPF (seed PET-BMP §III-B eq. 1).
//!
//! Decision: the usable path with the smallest `srtt`; usable paths with no `srtt` sample
//! sort after every path with one; ties (including "no sample" among themselves) go to the
//! lowest id; `Wait(None)` when no path is usable.
//!
//! Invariants: stateless, so trivially deterministic; no per-path `Vec` is needed.

use super::{PacketMeta, Scheduler, Selection, usable_min_by_key};
use crate::path::PathView;
use crate::time::Time;

/// Lowest-smoothed-RTT scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct MinRtt {}

impl Scheduler for MinRtt {
    fn select(&mut self, _now: Time, paths: &[PathView], _pkt: &PacketMeta) -> Selection {
        // `(false, rtt)` < `(true, _)`: paths with a sample first.
        usable_min_by_key(paths, |p| (p.srtt.is_none(), p.srtt))
            .map_or(Selection::Wait(None), Selection::Send)
    }
}
