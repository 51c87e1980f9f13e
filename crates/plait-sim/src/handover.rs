//! Seed MMS §III-C (Fig. 4-6) as a measure: a mobile node whose links join and leave while
//! one TCP transfer runs; the end-to-end delay per phase (Fig. 4) and what the receiving
//! application sees around each join and leave (Fig. 5 and 6: "no packet loss during the
//! handover", but "packets are delivered in bundles").
//!
//! The timeline comes from the scenario's outages: a path whose outage starts after 0
//! leaves then, one whose outage ends before the run's end joins then (a path that joins
//! at 15 s is down over `[0, 15]`). The phases are the spans between consecutive joins and
//! leaves; a packet belongs to the phase in which its TCP first sent it.
//!
//! Measures, from the TCP endpoints' per-packet logs ([`crate::node::delivery_log`]):
//! - per phase, the end-to-end delay: first transmission by the sending TCP to in-order
//!   delivery to the receiving application (so recovery and reordering waits count), mean
//!   and nearest-rank p99; and the network delay: first transmission to the first copy
//!   reaching the receiving host's TCP (what a capture before the transport layer sees);
//! - per join or leave, in the window `±window_s` around it: the longest time the
//!   application went without in-order data (the window's edges count as deliveries, so
//!   a window with none reports its whole width), the bundles (instants at which two or
//!   more packets reached the application at once, as a hole filled) and the largest,
//!   the TCP sender's retransmissions and timeouts.
//!
//! The SYN (packet 0 of ns-2's TCP) is not a data packet and is left out.
//!
//! Invariant: a result is a function of the scenario and the logs only.

use serde::Serialize;

use plait_proto::Time;

pub use crate::handover_spec::{Change, HandoverSpec, Phase};
use crate::node::app_delay;
use crate::node::delivery_log::{ReceiveLog, SendLog};
use crate::scenario::Scenario;

/// The scenario's phases and changes, in time order (changes at the same instant are one
/// boundary; their labels stay separate).
pub fn timeline(s: &Scenario) -> (Vec<Phase>, Vec<Change>) {
    let outages: Vec<&[[f64; 2]]> = s.paths.iter().map(|p| p.outages.as_slice()).collect();
    crate::handover_spec::timeline(&outages, s.duration_s, s.handover.as_ref())
}

/// One phase of one run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PhaseDelay {
    /// Data packets first sent in the phase and delivered by the end.
    pub packets: u64,
    /// End-to-end delay, mean, ms (`None` without a packet).
    pub delay_mean_ms: Option<f64>,
    /// End-to-end delay, 99th percentile, ms.
    pub delay_p99_ms: Option<f64>,
    /// Network delay (to the first copy's arrival), mean, ms.
    pub network_mean_ms: Option<f64>,
}

/// The window around one join or leave, in one run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ChangeWindow {
    /// Packets delivered in order in the window.
    pub delivered: u64,
    /// Longest span without an in-order delivery, ms.
    pub max_gap_ms: f64,
    /// Instants at which two or more packets were delivered together.
    pub bundles: u64,
    /// The most packets delivered at one instant.
    pub largest_bundle: u64,
    /// Retransmissions the sending TCP sent in the window.
    pub retransmissions: u64,
    /// Retransmission timeouts in the window.
    pub timeouts: u64,
}

/// One run's handover measures, in [`timeline`] order.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HandoverResult {
    /// Per phase.
    pub phases: Vec<PhaseDelay>,
    /// Per join or leave.
    pub changes: Vec<ChangeWindow>,
}

fn at(secs: f64) -> Time {
    Time::from_nanos((secs.max(0.0) * 1e9) as u64)
}

/// Items of the time-ordered `times` in `[from, to)`, as an index range.
fn span(times: &[Time], from: Time, to: Time) -> std::ops::Range<usize> {
    times.partition_point(|t| *t < from)..times.partition_point(|t| *t < to)
}

/// The measures of one run of `s` (with a `[handover]` table) from its TCP logs; `syn`:
/// packet 0 is the SYN.
pub fn measure(s: &Scenario, send: &SendLog, recv: &ReceiveLog, syn: bool) -> HandoverResult {
    let first = usize::from(syn);
    let window = s
        .handover
        .as_ref()
        .map_or(crate::handover_spec::default_window(), |h| h.window_s);
    let (phases, changes) = timeline(s);
    let sent = send.first_sent.get(first..).unwrap_or(&[]);
    let delivered = recv.delivered.get(first..).unwrap_or(&[]);
    let arrived = recv.arrived.get(first..).unwrap_or(&[]);
    let ms = |v: Option<(f64, f64)>| v.map(|(m, p)| (m * 1e3, p * 1e3));
    let phases = phases
        .iter()
        .map(|p| {
            let r = span(sent, at(p.from_s), at(p.to_s));
            // Only packets the application got (every one below `delivered.len()` arrived).
            let r = r.start.min(delivered.len())..r.end.min(delivered.len());
            let e2e = ms(app_delay::summary(&sent[r.clone()], &delivered[r.clone()]));
            let net = ms(app_delay::summary(&sent[r.clone()], &arrived[r.clone()]));
            PhaseDelay {
                packets: r.len() as u64,
                delay_mean_ms: e2e.map(|d| d.0),
                delay_p99_ms: e2e.map(|d| d.1),
                network_mean_ms: net.map(|d| d.0),
            }
        })
        .collect();
    let changes = changes
        .iter()
        .map(|c| {
            let (lo, hi) = (at(c.at_s - window), at((c.at_s + window).min(s.duration_s)));
            let got = &delivered[span(delivered, lo, hi)];
            let mut edges = Vec::with_capacity(got.len() + 2);
            edges.push(lo);
            edges.extend_from_slice(got);
            edges.push(hi);
            let max_gap = edges
                .windows(2)
                .map(|w| w[1].saturating_since(w[0]))
                .max()
                .unwrap_or_default();
            let (mut bundles, mut largest) = (0, u64::from(!got.is_empty()));
            for same in got.chunk_by(|a, b| a == b) {
                let n = same.len() as u64;
                bundles += u64::from(n >= 2);
                largest = largest.max(n);
            }
            ChangeWindow {
                delivered: got.len() as u64,
                max_gap_ms: max_gap.as_secs_f64() * 1e3,
                bundles,
                largest_bundle: largest,
                retransmissions: span(&send.retransmits, lo, hi).len() as u64,
                timeouts: span(&send.timeouts, lo, hi).len() as u64,
            }
        })
        .collect();
    HandoverResult { phases, changes }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
name = "h"
duration_s = 10
[handover]
window_s = 1
path_names = ["A", "B"]
[[paths]]
rate_kbps = 1000
[[paths]]
rate_kbps = 1000
outages = [[0, 4], [8, 10]]
[[runs]]
name = "r"
mode = "plait"
"#;

    fn scenario() -> Scenario {
        Scenario::from_toml(TEXT).unwrap()
    }

    fn t(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    #[test]
    fn outages_make_joins_leaves_and_phases() {
        let (phases, changes) = timeline(&scenario());
        let spans: Vec<(f64, f64, &str)> = phases
            .iter()
            .map(|p| (p.from_s, p.to_s, p.links.as_str()))
            .collect();
        assert_eq!(
            spans,
            vec![(0.0, 4.0, "A"), (4.0, 8.0, "A + B"), (8.0, 10.0, "A")]
        );
        let labels: Vec<&str> = changes.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, vec!["B joins", "B leaves"]);
        // Three phases: two paper values are an error naming the field.
        let bad = TEXT.replace("window_s = 1", "window_s = 1\npaper_delay_ms = [1, 2]");
        let e = Scenario::from_toml(&bad).unwrap_err().to_string();
        assert!(e.starts_with("handover.paper_delay_ms"), "{e}");
        let ok = TEXT.replace("window_s = 1", "window_s = 1\npaper_delay_ms = [1, 2, 3]");
        assert!(Scenario::from_toml(&ok).is_ok());
    }

    #[test]
    fn delays_per_phase_and_gaps_around_changes() {
        let s = scenario();
        let mut send = SendLog::default();
        let mut recv = ReceiveLog::default();
        // SYN at 0; packet 1 at 3.5 s (phase 1), packets 2-4 at 4.5 s (phase 2).
        send.note_sent(0, false, t(0));
        recv.note_arrival(0, t(10));
        recv.note_in_order(1, t(10));
        send.note_sent(1, false, t(3500));
        send.note_sent(2, false, t(4500));
        send.note_sent(3, false, t(4500));
        send.note_sent(4, false, t(4500));
        send.note_sent(2, true, t(4700));
        // 3 and 4 arrive first; 2's retransmission fills the hole at 4.8 s.
        recv.note_arrival(1, t(3600));
        recv.note_in_order(2, t(3600));
        recv.note_arrival(3, t(4550));
        recv.note_arrival(4, t(4560));
        recv.note_arrival(2, t(4800));
        recv.note_in_order(5, t(4800));
        let r = measure(&s, &send, &recv, true);
        assert_eq!(r.phases[0].packets, 1);
        assert!((r.phases[0].delay_mean_ms.unwrap() - 100.0).abs() < 1e-6);
        assert_eq!(r.phases[1].packets, 3);
        assert!((r.phases[1].delay_mean_ms.unwrap() - 300.0).abs() < 1e-6);
        assert!((r.phases[1].delay_p99_ms.unwrap() - 300.0).abs() < 1e-6);
        // Network: 50, 60 and 300 ms.
        assert!((r.phases[1].network_mean_ms.unwrap() - 410.0 / 3.0).abs() < 1e-6);
        assert_eq!(r.phases[2].packets, 0);
        assert_eq!(r.phases[2].delay_mean_ms, None);
        // Around B joining at 4 s (3-5 s): deliveries at 3.6 and 4.8 (three at once).
        let w = &r.changes[0];
        assert_eq!((w.delivered, w.bundles, w.largest_bundle), (4, 1, 3));
        assert!((w.max_gap_ms - 1200.0).abs() < 1e-6, "{}", w.max_gap_ms);
        assert_eq!((w.retransmissions, w.timeouts), (1, 0));
        // Around B leaving at 8 s (7-9 s): nothing delivered, the whole window.
        let w = &r.changes[1];
        assert_eq!((w.delivered, w.largest_bundle), (0, 0));
        assert!((w.max_gap_ms - 2000.0).abs() < 1e-6);
    }
}
