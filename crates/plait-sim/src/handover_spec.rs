//! The scenario's `[handover]` table (seed MMS Fig. 4-6) and the timeline its paths'
//! outages make: a leaf module, read by the scenario's validation and by the measures
//! ([`crate::handover`]).

use serde::{Deserialize, Serialize};

/// The scenario's `[handover]` table: measure the main TCP flow as seed MMS Fig. 4-6.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HandoverSpec {
    /// Half-width of the window around each join and leave, s.
    #[serde(default = "default_window")]
    pub window_s: f64,
    /// A name per path for the tables (e.g. "WiMax"); absent: "path 1", "path 2", ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path_names: Vec<String>,
    /// The paper's mean end-to-end delay per phase, ms, for `plait reproduce` (as many as
    /// there are phases, or none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paper_delay_ms: Vec<f64>,
}

/// The default `window_s`: 2 s either side of a join or leave.
pub(crate) fn default_window() -> f64 {
    2.0
}

/// A span between joins and leaves.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Phase {
    /// Start, s.
    pub from_s: f64,
    /// End, s.
    pub to_s: f64,
    /// The paths up meanwhile, by name, joined with " + ".
    pub links: String,
}

/// A path joining or leaving.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Change {
    /// When, s.
    pub at_s: f64,
    /// E.g. "WLAN joins".
    pub label: String,
}

/// The phases and changes that the paths' `outages` make over a run of `duration_s`, in
/// time order (changes at the same instant are one
/// boundary; their labels stay separate).
pub fn timeline(
    outages: &[&[[f64; 2]]],
    duration_s: f64,
    spec: Option<&HandoverSpec>,
) -> (Vec<Phase>, Vec<Change>) {
    let name = |i: usize| {
        spec.and_then(|h| h.path_names.get(i).cloned())
            .unwrap_or_else(|| format!("path {}", i + 1))
    };
    let mut changes = Vec::new();
    for (i, path) in outages.iter().enumerate() {
        for &[from, to] in path.iter() {
            if from > 0.0 && from < duration_s {
                changes.push(Change {
                    at_s: from,
                    label: format!("{} leaves", name(i)),
                });
            }
            if to > 0.0 && to < duration_s {
                changes.push(Change {
                    at_s: to,
                    label: format!("{} joins", name(i)),
                });
            }
        }
    }
    changes.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let mut bounds = vec![0.0];
    bounds.extend(changes.iter().map(|c| c.at_s));
    bounds.push(duration_s);
    bounds.dedup();
    let phases = bounds
        .windows(2)
        .map(|w| {
            let mid = (w[0] + w[1]) / 2.0;
            let up: Vec<String> = (0..outages.len())
                .filter(|&i| !outages[i].iter().any(|&[a, b]| a <= mid && mid < b))
                .map(name)
                .collect();
            Phase {
                from_s: w[0],
                to_s: w[1],
                links: if up.is_empty() {
                    "none".into()
                } else {
                    up.join(" + ")
                },
            }
        })
        .collect();
    (phases, changes)
}

/// Checks a `[handover]` table against the paths' `outages` and the run's length: the
/// field at fault (within `handover`) and what is wrong with it.
pub fn check(
    h: &HandoverSpec,
    outages: &[&[[f64; 2]]],
    duration_s: f64,
) -> Result<(), (&'static str, String)> {
    let bad = |field: &'static str, problem: String| (field, problem);
    if !(h.window_s.is_finite() && h.window_s > 0.0 && h.window_s <= duration_s) {
        return Err(bad(
            "window_s",
            "must be above 0 and at most the run".into(),
        ));
    }
    if h.path_names.len() > outages.len() {
        return Err(bad(
            "path_names",
            format!("at most one name per path ({})", outages.len()),
        ));
    }
    let phases = timeline(outages, duration_s, Some(h)).0.len();
    if !h.paper_delay_ms.is_empty() && h.paper_delay_ms.len() != phases {
        return Err(bad(
            "paper_delay_ms",
            format!("one value per phase: the outages make {phases}"),
        ));
    }
    if h.paper_delay_ms
        .iter()
        .any(|d| !(d.is_finite() && *d >= 0.0))
    {
        return Err(bad("paper_delay_ms", "finite values >= 0".into()));
    }
    Ok(())
}
