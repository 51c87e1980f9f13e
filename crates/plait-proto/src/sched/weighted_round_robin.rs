//! Weighted round robin (`wrr`): packets per path proportional to its capacity, ignoring
//! delay: the seeds' WRR baseline (seed PET-BMP §IV criterion 2, Table I; seed MMS's WRR).
//!
//! Smooth weighted round robin (nginx): at each pick every usable path adds its weight to
//! its current value, the path with the largest current value is chosen (ties: lowest id)
//! and the total weight of the usable paths is subtracted from the chosen one. Over a cycle
//! each path gets exactly its share, and picks of a heavy path are spread out, not bunched.
//!
//! Weights are recomputed from the views at every call (rates change):
//! - weight = [`PathView::rate_estimate`] divided by the largest estimate among the usable
//!   paths, so weights lie in (0, 1] and sums cannot overflow whatever the rates;
//! - a usable path with no estimate gets the mean weight of the usable paths that have one,
//!   or weight 1 when none has one (plain round robin).
//!
//! Invariants: only usable paths take part; a path that is not usable has its current value
//! reset to zero, so it rejoins without a stale credit or debt. Per-path current values
//! live in a `Vec` indexed by `PathId`, grown to the largest id seen.

use super::{PacketMeta, Scheduler, Selection};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

/// Smooth weighted round-robin scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct WeightedRoundRobin {
    /// Current value of each path, indexed by `PathId::index()`.
    current: Vec<f64>,
}

impl WeightedRoundRobin {
    fn current_mut(&mut self, id: PathId) -> &mut f64 {
        if self.current.len() <= id.index() {
            self.current.resize(id.index() + 1, 0.0);
        }
        &mut self.current[id.index()]
    }
}

impl Scheduler for WeightedRoundRobin {
    fn select(&mut self, _now: Time, paths: &[PathView], _pkt: &PacketMeta) -> Selection {
        let rates = || {
            paths
                .iter()
                .filter(|p| p.is_usable())
                .filter_map(|p| p.rate_estimate())
        };
        let max_rate = rates().fold(0.0_f64, f64::max);
        let (sum, count) = rates().fold((0.0, 0u32), |(s, n), r| (s + r / max_rate, n + 1));
        let default_weight = if count == 0 {
            1.0
        } else {
            sum / f64::from(count)
        };

        let mut total = 0.0;
        let mut best: Option<(f64, PathId)> = None;
        for p in paths {
            if !p.is_usable() {
                *self.current_mut(p.id) = 0.0;
                continue;
            }
            let weight = p.rate_estimate().map_or(default_weight, |r| r / max_rate);
            total += weight;
            let cur = self.current_mut(p.id);
            *cur += weight;
            let value = *cur;
            let better = match best {
                None => true,
                Some((bv, bid)) => value > bv || (value == bv && p.id < bid),
            };
            if better {
                best = Some((value, p.id));
            }
        }
        match best {
            Some((_, id)) => {
                *self.current_mut(id) -= total;
                Selection::Send(id)
            }
            None => Selection::Wait(None),
        }
    }
}
