//! The Markdown tables of seed MMS Fig. 4-6's measures ([`crate::handover_report`]) for
//! `plait sim` and docs/reproduction.md: one line per (row, phase) for the delay, one per
//! (row, join or leave) for the delivery around it.
//!
//! Invariant: the tables are a function of the scenario and the summaries only.

use std::fmt::Write as _;

use crate::handover::timeline;
use crate::scenario::Scenario;
use crate::stat::Stat;
use crate::sweep::RowSummary;

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
