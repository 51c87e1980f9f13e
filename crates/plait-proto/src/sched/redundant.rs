//! Redundant (`redundant`): a copy of every packet on every usable path; the receiver keeps
//! the first copy and drops the others. A baseline not taken from the seeds: it trades
//! capacity for the delay and loss of the best path at each instant (the opposite of
//! aggregation, seed PET-BMP §I).
//!
//! Decision: `Duplicate(all usable ids, in PathId order)` when two or more paths are usable,
//! `Send(id)` when exactly one is, `Wait(None)` when none is.
//!
//! Invariants: the `Duplicate` list has at least two ids and no repeats (ids in the views
//! are distinct); stateless, so no per-path `Vec` is needed.

use super::{PacketMeta, Scheduler, Selection};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

/// Every-usable-path scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Redundant {}

impl Scheduler for Redundant {
    fn select(&mut self, _now: Time, paths: &[PathView], _pkt: &PacketMeta) -> Selection {
        let mut ids: Vec<PathId> = paths
            .iter()
            .filter(|p| p.is_usable())
            .map(|p| p.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        match ids.as_slice() {
            [] => Selection::Wait(None),
            [one] => Selection::Send(*one),
            _ => Selection::Duplicate(ids),
        }
    }
}
