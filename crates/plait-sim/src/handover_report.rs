//! Seed MMS Fig. 4-6's measures ([`crate::handover`]) over the seeds of a row, and their
//! tables for `plait sim` and docs/reproduction.md: one line per (row, phase) for the
//! delay, one per (row, join or leave) for the delivery around it.
//!
//! Invariant: the tables are a function of the scenario and the summaries only.

use std::fmt::Write as _;

use serde::Serialize;

use crate::handover::timeline;
use crate::run::RunResult;
use crate::scenario::Scenario;
use crate::sweep::{RowSummary, Stat};

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

fn stat(s: &Stat, digits: usize) -> String {
    format!("{:.*} ± {:.*}", digits, s.mean, digits, s.ci95)
}

fn opt(s: Option<&Stat>, digits: usize) -> String {
    s.map_or("-".into(), |s| stat(s, digits))
}

/// The two Markdown tables of `scenario`'s rows that have the measures (empty if none).
pub fn tables(scenario: &Scenario, rows: &[RowSummary]) -> String {
    if rows.iter().all(|r| r.handover.is_none()) {
        return String::new();
    }
    let (phases, changes) = timeline(scenario);
    let paper = scenario
        .handover
        .as_ref()
        .map_or(&[][..], |h| h.paper_delay_ms.as_slice());
    let window = scenario.handover.as_ref().map_or(0.0, |h| h.window_s);
    let label = |r: &RowSummary| {
        if r.variant.is_empty() {
            r.run.clone()
        } else {
            format!("{} ({})", r.run, r.variant)
        }
    };
    let mut out = String::from(
        "\nEnd-to-end delay per phase (seed MMS Fig. 4): packets by the phase in which the \
         sending TCP first sent them; end-to-end is from that first transmission to in-order \
         delivery to the receiving application (recovery and reordering waits included), \
         network to the first copy reaching the receiving host's TCP; ms, mean ± 95 % CI \
         over the seeds of each run's mean or 99th percentile; packets per run.\n\n\
         | row | phase s | links | paper ms | network mean ms | end-to-end mean ms | end-to-end p99 ms | packets |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let Some(h) = &r.handover else { continue };
        for (i, (p, s)) in phases.iter().zip(&h.phases).enumerate() {
            let _ = writeln!(
                out,
                "| {} | {:.0}-{:.0} | {} | {} | {} | {} | {} | {:.0} |",
                label(r),
                p.from_s,
                p.to_s,
                p.links,
                paper.get(i).map_or("-".into(), |v| format!("{v:.0}")),
                opt(s.network_mean_ms.as_ref(), 1),
                opt(s.delay_mean_ms.as_ref(), 1),
                opt(s.delay_p99_ms.as_ref(), 1),
                s.packets.mean
            );
        }
    }
    let _ = write!(
        out,
        "\nDelivery around each join and leave (seed MMS Fig. 5 and 6), ±{window} s: packets \
         delivered in order to the application, the longest span without one (the window's \
         edges count; mean ± 95 % CI and the worst seed), bundles (instants at which two or \
         more packets reached the application at once) and the largest, the sending TCP's \
         retransmissions and timeouts; means over the seeds.\n\n\
         | row | change | at s | delivered | longest gap ms | worst ms | bundles | largest | retx | RTOs |\n\
         |---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        let Some(h) = &r.handover else { continue };
        for (c, s) in changes.iter().zip(&h.changes) {
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {:.0} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
                label(r),
                c.label,
                c.at_s,
                s.delivered.mean,
                stat(&s.max_gap_ms, 0),
                s.max_gap_worst_ms,
                s.bundles.mean,
                s.largest_bundle.mean,
                s.retransmissions.mean,
                s.timeouts.mean
            );
        }
    }
    out
}
