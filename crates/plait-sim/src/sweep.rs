//! Sweeps: every (variant, run, seed) of a scenario on all cores (rayon) with a progress
//! bar, aggregated per run as mean and 95 % confidence interval over the seeds.
//!
//! A scenario file may carry `[[sweep]]` tables, each naming a field and its values:
//! ```toml
//! [[sweep]]
//! field = "paths[2].wired_delay_ms"
//! values = [50, 1000]
//! ```
//! Each combination of values is a variant of the scenario, run in full.
//!
//! A table may instead move several fields together (one axis, not their product): each
//! of its `values` is then a list with one value per field, and `name` and `labels`
//! (optional, one per value) make the variant's label, e.g. `loss=5 %`:
//! ```toml
//! [[sweep]]
//! fields = ["paths[0].loss.p", "paths[1].loss.p"]
//! values = [[0.0, 0.0], [0.05, 0.05]]
//! name = "loss"
//! labels = ["0 %", "5 %"]
//! ```
//!
//! Invariant: results come back in (variant, run, seed) order whatever the thread timing,
//! so the output is deterministic.

use indicatif::{ProgressBar, ProgressStyle};
use plait_topology::{SpecError, TopologyFile};
use rayon::prelude::*;
use serde::Serialize;

use crate::from_topology;
use crate::run::{RunResult, run_one};
use crate::scenario::{Scenario, ScenarioError};
pub use crate::stat::Stat;

/// A scenario file's sweep tables and the scenario itself.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Label of the variant (`""` for a scenario without sweeps), e.g. `wired_delay_ms=1000`.
    pub label: String,
    /// The scenario with the swept values applied.
    pub scenario: Scenario,
}

/// Parses a scenario file, expanding its `[[sweep]]` tables into variants; a topology file
/// (`[[path]]`, see [`from_topology`]) is one variant.
pub fn load_variants(text: &str) -> Result<Vec<Variant>, ScenarioError> {
    let mut doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ScenarioError::Parse(e.to_string()))?;
    if from_topology::is_topology_file(&doc) {
        let file = TopologyFile::parse(text, "").map_err(|e| match e {
            SpecError::Field { field, message, .. } => ScenarioError::Invalid {
                field,
                problem: message,
            },
            SpecError::Toml { message, .. } => ScenarioError::Parse(message),
            other => ScenarioError::Parse(other.to_string()),
        })?;
        return Ok(vec![Variant {
            label: String::new(),
            scenario: from_topology::scenario_from_topology(&file)?,
        }]);
    }
    let sweeps = match doc.remove("sweep") {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a,
        Some(_) => {
            return Err(ScenarioError::Parse(
                "sweep: must be an array of tables ([[sweep]])".into(),
            ));
        }
    };
    let axes = sweeps
        .iter()
        .enumerate()
        .map(|(i, s)| axis(i, s))
        .collect::<Result<Vec<Axis>, _>>()?;
    let mut variants = Vec::new();
    let combos: usize = axes.iter().map(|a| a.values.len()).product();
    for n in 0..combos {
        let mut table = doc.clone();
        let mut labels = Vec::new();
        let mut rest = n;
        for a in &axes {
            let k = rest % a.values.len();
            rest /= a.values.len();
            for (field, v) in a.fields.iter().zip(&a.values[k]) {
                set_field(&mut table, field, v.clone())?;
            }
            labels.push(a.labels[k].clone());
        }
        let text = toml::to_string(&table).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        let scenario = Scenario::from_toml(&text)?;
        variants.push(Variant {
            label: labels.join(","),
            scenario,
        });
    }
    Ok(variants)
}

/// One `[[sweep]]` table: the fields it sets, per step the value of each, per step a label.
struct Axis {
    fields: Vec<String>,
    values: Vec<Vec<toml::Value>>,
    labels: Vec<String>,
}

/// Reads `[[sweep]]` table `i` (see the module docs); errors name `sweep[i]`.
fn axis(i: usize, s: &toml::Value) -> Result<Axis, ScenarioError> {
    let err = |what: &str| Err(ScenarioError::Parse(format!("sweep[{i}]: {what}")));
    let values = match s.get("values").and_then(toml::Value::as_array) {
        Some(v) if !v.is_empty() => v,
        _ => return err("needs non-empty values = [...]"),
    };
    if let Some(field) = s.get("field").and_then(toml::Value::as_str) {
        return Ok(Axis {
            fields: vec![field.to_string()],
            labels: values.iter().map(|v| format!("{field}={v}")).collect(),
            values: values.iter().map(|v| vec![v.clone()]).collect(),
        });
    }
    let Some(fields) = s.get("fields").and_then(toml::Value::as_array) else {
        return err("needs field = \"...\" or fields = [\"...\", ...]");
    };
    let fields: Vec<String> = fields
        .iter()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    if fields.is_empty() {
        return err("fields must be a non-empty list of strings");
    }
    let mut steps = Vec::new();
    for v in values {
        match v.as_array() {
            Some(a) if a.len() == fields.len() => steps.push(a.clone()),
            _ => return err("with fields, each value is a list with one value per field"),
        }
    }
    let name = s
        .get("name")
        .and_then(toml::Value::as_str)
        .map_or_else(|| fields.join(","), str::to_string);
    let labels = match s.get("labels").and_then(toml::Value::as_array) {
        None => steps
            .iter()
            .map(|a| {
                let vs: Vec<String> = a.iter().map(ToString::to_string).collect();
                format!("{name}={}", vs.join("/"))
            })
            .collect(),
        Some(l) if l.len() == steps.len() && l.iter().all(toml::Value::is_str) => l
            .iter()
            .map(|x| format!("{name}={}", x.as_str().unwrap_or_default()))
            .collect(),
        Some(_) => return err("labels must be strings, one per value"),
    };
    Ok(Axis {
        fields,
        values: steps,
        labels,
    })
}

/// Sets a dotted field like `paths[2].wired_delay_ms`, `tcp.window` or `duration_s`.
/// Missing intermediate tables are created and the last key may be new (then the scenario's
/// own validation decides whether it is a known field); array elements must exist.
fn set_field(
    table: &mut toml::Table,
    field: &str,
    value: toml::Value,
) -> Result<(), ScenarioError> {
    let bad = || ScenarioError::Invalid {
        field: field.to_string(),
        problem: "no such field to sweep".into(),
    };
    let parts: Vec<(&str, Option<usize>)> = field.split('.').map(parse_key).collect();
    let Some(((last_key, last_index), init)) = parts.split_last() else {
        return Err(bad());
    };
    let mut t: &mut toml::Table = table;
    for (key, index) in init {
        let v = match index {
            // A missing table (one left to its defaults) is created; array elements must exist.
            None => t
                .entry(key.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new())),
            Some(i) => t
                .get_mut(*key)
                .and_then(|v| v.as_array_mut())
                .and_then(|a| a.get_mut(*i))
                .ok_or_else(bad)?,
        };
        t = v.as_table_mut().ok_or_else(bad)?;
    }
    match last_index {
        None => {
            t.insert((*last_key).to_string(), value);
        }
        Some(i) => {
            let slot = t
                .get_mut(*last_key)
                .and_then(|v| v.as_array_mut())
                .and_then(|a| a.get_mut(*i));
            *slot.ok_or_else(bad)? = value;
        }
    }
    Ok(())
}

fn parse_key(part: &str) -> (&str, Option<usize>) {
    match part.split_once('[') {
        Some((k, rest)) => (k, rest.trim_end_matches(']').parse().ok()),
        None => (part, None),
    }
}

/// One run (row) aggregated over seeds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RowSummary {
    /// Variant label.
    pub variant: String,
    /// Row name.
    pub run: String,
    /// Seeds aggregated.
    pub seeds: usize,
    /// Goodput, kbit/s.
    pub goodput_kbps: Stat,
    /// Throughput, kbit/s.
    pub throughput_kbps: Stat,
    /// DupACKs.
    pub dupacks: Stat,
    /// Retransmissions.
    pub retransmissions: Stat,
    /// Timeouts.
    pub timeouts: Stat,
    /// Per-path kbit/s.
    pub per_path_kbps: Vec<Stat>,
    /// Reorder p50, ms.
    pub reorder_p50_ms: Option<Stat>,
    /// Reorder p99, ms.
    pub reorder_p99_ms: Option<Stat>,
    /// Application-layer delay per unit, mean, s (see `RunResult::app_delay_mean_s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_delay_mean_s: Option<Stat>,
    /// Application-layer delay per unit, p99, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_delay_p99_s: Option<Stat>,
    /// Units the delay counts per run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_delay_units: Option<Stat>,
    /// The constant-rate UDP flow's measurements (`plait-cbr`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpSummary>,
    /// Seed MMS Fig. 4-6's measures (scenarios with `[handover]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handover: Option<crate::handover_report::HandoverSummary>,
    /// The paper's value, if the scenario gives it.
    pub paper_kbps: Option<f64>,
    /// The paper's per-path values, path 1 first (may be fewer than the paths).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paper_path_kbps: Vec<f64>,
    /// Goodput of the long-lived competing TCP flows, kbit/s (scenarios with `cross.tcp`).
    pub cross_tcp_kbps: Option<Stat>,
    /// Seed mHIP's friendliness factor (see `RunResult::friendliness`).
    pub friendliness: Option<Stat>,
    /// FEC blocks both gateways closed, per run (plait runs; `RunResult::engines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec_blocks: Option<Stat>,
    /// Packets rebuilt from FEC symbols, per run (plait runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec_rebuilt: Option<Stat>,
}

/// A constant-rate UDP flow's measurements over the seeds (see `run::UdpResult`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UdpSummary {
    /// Residual loss, %.
    pub residual_loss_pct: Stat,
    /// Repair overhead, % of the flow's bytes.
    pub repair_overhead_pct: Stat,
    /// One-way delay p50, ms.
    pub delay_p50_ms: Stat,
    /// One-way delay p99, ms.
    pub delay_p99_ms: Stat,
    /// p99 over the smallest delay, ms.
    pub p99_over_min_ms: Stat,
    /// FEC symbols sent.
    pub fec_symbols: Stat,
    /// Packets rebuilt from FEC symbols.
    pub fec_rebuilt: Stat,
    /// Loss-repair copies sent.
    pub repairs: Stat,
}

impl UdpSummary {
    /// Over the runs that measured a UDP flow; `None` if none did.
    fn of(group: &[RunResult]) -> Option<UdpSummary> {
        let u: Vec<&crate::run::UdpResult> = group.iter().filter_map(|r| r.udp.as_ref()).collect();
        if u.is_empty() {
            return None;
        }
        let stat = |f: &dyn Fn(&crate::run::UdpResult) -> f64| {
            Stat::of(&u.iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        Some(UdpSummary {
            residual_loss_pct: stat(&|r| r.residual_loss * 100.0),
            repair_overhead_pct: stat(&|r| r.repair_overhead * 100.0),
            delay_p50_ms: stat(&|r| r.delay_p50_ms),
            delay_p99_ms: stat(&|r| r.delay_p99_ms),
            p99_over_min_ms: stat(&|r| r.p99_over_min_ms),
            fec_symbols: stat(&|r| r.fec_symbols as f64),
            fec_rebuilt: stat(&|r| r.fec_rebuilt as f64),
            repairs: stat(&|r| r.repairs as f64),
        })
    }
}

/// Everything a sweep produced.
#[derive(Clone, Debug, Serialize)]
pub struct SweepResult {
    /// Scenario name.
    pub scenario: String,
    /// Per (variant, run): the aggregate.
    pub rows: Vec<RowSummary>,
    /// Every single run, in (variant, run, seed) order.
    pub runs: Vec<(String, RunResult)>,
}

/// Runs every variant × run × seed in parallel; `progress` shows a bar on stderr.
pub fn run_variants(variants: &[Variant], progress: bool) -> SweepResult {
    let jobs: Vec<(usize, usize, u64)> = variants
        .iter()
        .enumerate()
        .flat_map(|(v, var)| {
            (0..var.scenario.runs.len())
                .flat_map(move |r| var.scenario.seeds.iter().map(move |s| (v, r, *s)))
        })
        .collect();
    let bar = if progress {
        ProgressBar::new(jobs.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let results: Vec<RunResult> = jobs
        .par_iter()
        .map(|&(v, r, seed)| {
            let scn = &variants[v].scenario;
            let res = run_one(scn, &scn.runs[r], seed);
            bar.inc(1);
            res
        })
        .collect();
    bar.finish_and_clear();
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    let mut it = jobs.iter().zip(results);
    for var in variants {
        for spec in &var.scenario.runs {
            let group: Vec<RunResult> = it
                .by_ref()
                .take(var.scenario.seeds.len())
                .map(|(_, r)| r)
                .collect();
            let mut row = summarise(&var.label, spec.paper_kbps, &group);
            row.paper_path_kbps.clone_from(&spec.paper_path_kbps);
            rows.push(row);
            runs.extend(group.into_iter().map(|r| (var.label.clone(), r)));
        }
    }
    SweepResult {
        scenario: variants
            .first()
            .map_or(String::new(), |v| v.scenario.name.clone()),
        rows,
        runs,
    }
}

fn summarise(variant: &str, paper_kbps: Option<f64>, group: &[RunResult]) -> RowSummary {
    let stat = |f: &dyn Fn(&RunResult) -> f64| Stat::of(&group.iter().map(f).collect::<Vec<_>>());
    let paths = group.first().map_or(0, |r| r.per_path_kbps.len());
    let opt = |f: &dyn Fn(&RunResult) -> Option<f64>| {
        let v: Vec<f64> = group.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| Stat::of(&v))
    };
    RowSummary {
        variant: variant.to_string(),
        run: group.first().map_or(String::new(), |r| r.run.clone()),
        seeds: group.len(),
        goodput_kbps: stat(&|r| r.goodput_kbps),
        throughput_kbps: stat(&|r| r.throughput_kbps),
        dupacks: stat(&|r| r.dupacks as f64),
        retransmissions: stat(&|r| r.retransmissions as f64),
        timeouts: stat(&|r| r.timeouts as f64),
        per_path_kbps: (0..paths).map(|i| stat(&|r| r.per_path_kbps[i])).collect(),
        reorder_p50_ms: opt(&|r| r.reorder_p50_ms),
        reorder_p99_ms: opt(&|r| r.reorder_p99_ms),
        app_delay_mean_s: opt(&|r| r.app_delay_mean_s),
        app_delay_p99_s: opt(&|r| r.app_delay_p99_s),
        app_delay_units: opt(&|r| r.app_delay_units.map(|u| u as f64)),
        udp: UdpSummary::of(group),
        handover: crate::handover_report::HandoverSummary::of(group),
        paper_kbps,
        paper_path_kbps: Vec::new(),
        cross_tcp_kbps: opt(&|r| r.cross_tcp_kbps),
        friendliness: opt(&|r| r.friendliness),
        fec_blocks: opt(&|r| r.engines.map(|e| e.fec_blocks as f64)),
        fec_rebuilt: opt(&|r| r.engines.map(|e| e.fec_rebuilt as f64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_samples() {
        let s = Stat::of(&[1.0, 2.0, 3.0]);
        assert_eq!(s.mean, 2.0);
        // sd = 1, n = 3: 4.303 / sqrt(3)
        assert!((s.ci95 - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(Stat::of(&[5.0]).ci95, 0.0);
    }

    #[test]
    fn sweeps_expand_fields() {
        let text = r#"
name = "s"
[[paths]]
rate_kbps = 100
[[paths]]
rate_kbps = 50
[[runs]]
name = "a"
mode = "mtcp"
[[sweep]]
field = "paths[1].wired_delay_ms"
values = [50, 1000]
[[sweep]]
field = "tcp.window"
values = [20, 50]
"#;
        let v = load_variants(text).unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(v[1].scenario.paths[1].wired_delay_ms, 1000.0);
        assert_eq!(v[2].scenario.tcp.window, 50);
        assert!(v[3].label.contains("tcp.window=50"));
        let bad = text.replace("paths[1].wired_delay_ms", "paths[7].nope");
        assert!(load_variants(&bad).is_err());
    }

    #[test]
    fn a_sweep_can_move_several_fields_together() {
        let text = r#"
name = "s"
[[paths]]
rate_kbps = 100
[[paths]]
rate_kbps = 100
[[runs]]
name = "a"
mode = "mtcp"
[[sweep]]
fields = ["paths[0].rate_kbps", "paths[1].rate_kbps"]
values = [[100, 100], [40, 160]]
name = "ratio"
labels = ["1:1", "1:4"]
"#;
        let v = load_variants(text).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].scenario.paths[0].rate_kbps, 40.0);
        assert_eq!(v[1].scenario.paths[1].rate_kbps, 160.0);
        assert_eq!(v[1].label, "ratio=1:4");
        for bad in [
            text.replace("[40, 160]", "[40]"),
            text.replace("labels = [\"1:1\", \"1:4\"]", "labels = [\"1:1\"]"),
            text.replace(
                "fields = [\"paths[0].rate_kbps\", \"paths[1].rate_kbps\"]",
                "fields = []",
            ),
        ] {
            let e = load_variants(&bad).unwrap_err();
            assert!(e.to_string().starts_with("sweep[0]"), "{e}");
        }
    }

    #[test]
    fn a_topology_file_is_one_variant_and_its_errors_name_the_field() {
        let text = "name = \"t\"\nduration_s = 10\n[[path]]\nrate_mbit = 5\nrtt_ms = 20\n";
        let v = load_variants(text).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].scenario.paths[0].rate_kbps, 5000.0);
        let e = load_variants(&text.replace("rate_mbit = 5", "rate_mbit = 0")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "path[0].rate_mbit: 0 must be above 0 and at most 100"
        );
    }
}
