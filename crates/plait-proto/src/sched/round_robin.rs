//! Round robin (`round-robin`): the usable paths in `PathId` order, one packet each in turn.
//!
//! The baseline PET falls back to before it has rate estimates
//! (seed PET-BMP §V-A: "sends packet-pairs on the various paths in a round-robin fashion").
//!
//! Decision: the first usable path whose id is above the last id chosen, else (wrapping)
//! the lowest usable id; `Wait(None)` when no path is usable.
//!
//! Invariants and edge cases:
//! - a path that is not usable is skipped (it loses its turn); when it is usable again it
//!   rejoins at its place in id order;
//! - the turn advances in `select`, not `on_sent`: asking twice without sending moves on;
//! - the only state is the last id chosen, so there is no per-path `Vec`.

use super::{PacketMeta, Scheduler, Selection};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

/// Round-robin scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    /// The id chosen last; `None` before the first pick.
    last: Option<PathId>,
}

impl Scheduler for RoundRobin {
    fn select(&mut self, _now: Time, paths: &[PathView], _pkt: &PacketMeta) -> Selection {
        let usable = || paths.iter().filter(|p| p.is_usable()).map(|p| p.id);
        // Lowest usable id above `last`, else the lowest usable id (wrap around).
        let after = |last: PathId| usable().filter(|&id| id > last).min();
        let next = self.last.and_then(after).or_else(|| usable().min());
        match next {
            Some(id) => {
                self.last = Some(id);
                Selection::Send(id)
            }
            None => Selection::Wait(None),
        }
    }
}
