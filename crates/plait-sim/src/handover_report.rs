//! Seed MMS Fig. 4-6's measures ([`crate::handover`]) over the seeds of a row; their
//! tables are in [`crate::handover_tables`].

use serde::Serialize;

use crate::run::RunResult;
use crate::stat::Stat;

/// One phase over the seeds (see [`crate::handover::PhaseDelay`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PhaseSummary {
    /// Packets counted per run.
    pub packets: Stat,
    /// End-to-end delay, mean, ms (over the runs with a packet in the phase).
    pub delay_mean_ms: Option<Stat>,
    /// End-to-end delay, p99, ms.
    pub delay_p99_ms: Option<Stat>,
    /// Network delay, mean, ms.
    pub network_mean_ms: Option<Stat>,
}

/// One join or leave over the seeds (see [`crate::handover::ChangeWindow`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ChangeSummary {
    /// Packets delivered in the window.
    pub delivered: Stat,
    /// Longest span without an in-order delivery, ms.
    pub max_gap_ms: Stat,
    /// The same, the largest over the seeds, ms.
    pub max_gap_worst_ms: f64,
    /// Bundles.
    pub bundles: Stat,
    /// Largest bundle, packets.
    pub largest_bundle: Stat,
    /// Retransmissions.
    pub retransmissions: Stat,
    /// Timeouts.
    pub timeouts: Stat,
}

/// A row's handover measures over its seeds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HandoverSummary {
    /// Per phase, in time order.
    pub phases: Vec<PhaseSummary>,
    /// Per join or leave, in time order.
    pub changes: Vec<ChangeSummary>,
}

impl HandoverSummary {
    /// Over the runs that measured it; `None` if none did.
    pub fn of(group: &[RunResult]) -> Option<HandoverSummary> {
        let h: Vec<&crate::handover::HandoverResult> =
            group.iter().filter_map(|r| r.handover.as_ref()).collect();
        let first = h.first()?;
        let opt = |f: &dyn Fn(&crate::handover::HandoverResult) -> Option<f64>| {
            let v: Vec<f64> = h.iter().filter_map(|r| f(r)).collect();
            (!v.is_empty()).then(|| Stat::of(&v))
        };
        let all = |f: &dyn Fn(&crate::handover::HandoverResult) -> f64| {
            Stat::of(&h.iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        let phases = (0..first.phases.len())
            .map(|i| PhaseSummary {
                packets: all(&|r| r.phases[i].packets as f64),
                delay_mean_ms: opt(&|r| r.phases[i].delay_mean_ms),
                delay_p99_ms: opt(&|r| r.phases[i].delay_p99_ms),
                network_mean_ms: opt(&|r| r.phases[i].network_mean_ms),
            })
            .collect();
        let changes = (0..first.changes.len())
            .map(|i| ChangeSummary {
                delivered: all(&|r| r.changes[i].delivered as f64),
                max_gap_ms: all(&|r| r.changes[i].max_gap_ms),
                max_gap_worst_ms: h
                    .iter()
                    .map(|r| r.changes[i].max_gap_ms)
                    .fold(0.0, f64::max),
                bundles: all(&|r| r.changes[i].bundles as f64),
                largest_bundle: all(&|r| r.changes[i].largest_bundle as f64),
                retransmissions: all(&|r| r.changes[i].retransmissions as f64),
                timeouts: all(&|r| r.changes[i].timeouts as f64),
            })
            .collect();
        Some(HandoverSummary { phases, changes })
    }
}
