//! Topology files (`topologies/*.toml`): paths with rate, base RTT (or a one-way delay
//! per direction), queue and loss, timed path events (blackhole, carrier loss, rate change), and the transfer's
//! duration. The format is documented in docs/benchmarks.md ("Topology files"); an example:
//!
//! ```toml
//! name = "T4"
//! description = "T1 with path 0 silently blackholed for 5 s mid-transfer"
//! duration_s = 20
//!
//! [[path]]
//! rate_mbit = 20
//! rtt_ms = 20
//! queue_ms = 100
//!
//! [[path]]
//! rate_mbit = 10
//! rtt_ms = 100
//! queue_ms = 100
//! loss = 0.0
//!
//! [[event]]
//! kind = "blackhole"
//! path = 0
//! from_s = 7.5
//! to_s = 12.5
//! ```
//!
//! Invariants: parsing never panics; unknown fields are refused (serde
//! `deny_unknown_fields`), and every error names the file position (TOML errors) or the
//! field (`path[1].rate_mbit: …`) it is about. A [`TopologyFile`] that passed
//! [`TopologyFile::parse`] is valid: 1 to [`MAX_PATHS`] paths, every rate in
//! (0, [`MAX_RATE_MBIT`]] and their sum at most [`MAX_TOTAL_MBIT`], RTTs in
//! [0, [`MAX_RTT_MS`]], queues of at least [`MIN_QUEUE_BYTES`], loss probabilities in
//! [0, 1), events inside the transfer on existing paths; the test bed builds it
//! (plait-lab's `bench::spec`) and the simulator runs it (plait-sim's `from_topology`).

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::loss::LossModel;

/// Most paths a benchmark topology may have.
pub const MAX_PATHS: usize = 8;
/// Highest rate of one path, Mbit/s.
pub const MAX_RATE_MBIT: f64 = 100.0;
/// Highest sum of the path rates, Mbit/s (2-core machines: TESTBED.md's bound).
pub const MAX_TOTAL_MBIT: f64 = 100.0;
/// Longest base RTT, ms.
pub const MAX_RTT_MS: f64 = 2000.0;
/// Shortest and longest transfer, seconds.
pub const DURATION_RANGE_S: (f64, f64) = (2.0, 600.0);
/// Queue length when a path gives neither `queue_ms` nor `queue_bytes`, ms at its rate.
pub const DEFAULT_QUEUE_MS: f64 = 100.0;
/// Smallest queue limit, bytes: two full-size packets (the test bed's tbf needs at least
/// one; the simulator's queue holds at least one).
pub const MIN_QUEUE_BYTES: u32 = 3000;

/// A topology file, as written.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    /// Short name (`T1`); used in tables and file names.
    pub name: String,
    /// One line saying what it models.
    #[serde(default)]
    pub description: String,
    /// How long the sender writes, seconds.
    pub duration_s: f64,
    /// The paths, path 0 first.
    #[serde(rename = "path")]
    pub paths: Vec<PathFile>,
    /// Timed events on paths.
    #[serde(default, rename = "event")]
    pub events: Vec<EventFile>,
}

/// One `[[path]]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PathFile {
    /// Rate in each direction, Mbit/s (tbf on the router).
    pub rate_mbit: f64,
    /// Base round-trip time, ms (half added each way by the router's emulators); or give
    /// `delay_up_ms` and `delay_down_ms` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// One-way delay client → server, ms (with `delay_down_ms`, instead of `rtt_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_up_ms: Option<f64>,
    /// One-way delay server → client, ms (with `delay_up_ms`, instead of `rtt_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_down_ms: Option<f64>,
    /// tbf queue limit as time at the path's rate, ms (default [`DEFAULT_QUEUE_MS`]).
    #[serde(default)]
    pub queue_ms: Option<f64>,
    /// tbf queue limit in bytes (instead of `queue_ms`).
    #[serde(default)]
    pub queue_bytes: Option<u32>,
    /// Random (Bernoulli) loss probability per packet, 0 to below 1.
    #[serde(default)]
    pub loss: f64,
    /// Bursty loss instead of `loss`: a two-state Gilbert-Elliott chain.
    #[serde(default)]
    pub burst_loss: Option<BurstLoss>,
    /// Which directions lose packets: `both` (default), `up` (client → server), `down`.
    #[serde(default)]
    pub loss_direction: LossDirection,
}

/// `burst_loss = { p_good_to_bad = …, p_bad_to_good = …, loss_in_good = …, loss_in_bad = … }`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BurstLoss {
    /// Per-packet probability of moving from the good to the bad state.
    pub p_good_to_bad: f64,
    /// Per-packet probability of moving from the bad to the good state.
    pub p_bad_to_good: f64,
    /// Loss probability in the good state (default 0).
    #[serde(default)]
    pub loss_in_good: f64,
    /// Loss probability in the bad state (default 1).
    #[serde(default = "one")]
    pub loss_in_bad: f64,
}

fn one() -> f64 {
    1.0
}

/// Which directions of a path lose packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LossDirection {
    /// Both.
    #[default]
    Both,
    /// Client → server only.
    Up,
    /// Server → client only.
    Down,
}

/// What happens to a path during an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Every packet silently dropped, both directions (nftables on the router).
    Blackhole,
    /// The router's client-side link down: the client sees carrier loss.
    LinkDown,
    /// The path's rate changed to the event's `rate_mbit` in both directions (tbf, same
    /// queue in bytes), and restored at its end: a bandwidth fluctuation (ETOM Fig. 6).
    Rate,
    /// The path loses the event's `loss` share of packets at random in both directions
    /// (the simulator: in the data direction, where it models loss), instead of its own
    /// loss, until the event ends: a link fading (seed MMS §II-E).
    Loss,
}

/// One `[[event]]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventFile {
    /// What happens.
    pub kind: EventKind,
    /// To which path.
    pub path: usize,
    /// Start, seconds after the transfer starts.
    pub from_s: f64,
    /// End, seconds after the transfer starts.
    pub to_s: f64,
    /// The rate during a `rate` event, Mbit/s (only with `kind = "rate"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
    /// The random loss during a `loss` event, 0 to below 1 (only with `kind = "loss"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
}

/// A topology file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read {file}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not TOML, a wrong type, a missing or unknown field (the message has the position).
    #[error("{file}: {message}")]
    Toml {
        /// The file.
        file: String,
        /// The parser's message, naming the field and position.
        message: String,
    },
    /// A value out of range or inconsistent with another.
    #[error("{file}: `{field}`: {message}")]
    Field {
        /// The file.
        file: String,
        /// The field, e.g. `path[1].rate_mbit`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl TopologyFile {
    /// Reads and validates a topology file.
    pub fn load(path: &Path) -> Result<TopologyFile, SpecError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            file: file.clone(),
            source,
        })?;
        TopologyFile::parse(&text, &file)
    }

    /// Parses and validates topology text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<TopologyFile, SpecError> {
        let t: TopologyFile = toml::from_str(text).map_err(|e| SpecError::Toml {
            file: file.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        t.validate(file)?;
        Ok(t)
    }

    fn validate(&self, file: &str) -> Result<(), SpecError> {
        let err = |field: String, message: String| SpecError::Field {
            file: file.to_owned(),
            field,
            message,
        };
        if self.name.is_empty()
            || self.name.len() > 32
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(err(
                "name".into(),
                format!(
                    "{:?} must be 1 to 32 characters of A-Z, a-z, 0-9, - and _",
                    self.name
                ),
            ));
        }
        let (lo, hi) = DURATION_RANGE_S;
        if !(self.duration_s.is_finite() && (lo..=hi).contains(&self.duration_s)) {
            return Err(err(
                "duration_s".into(),
                format!("{} must be between {lo} and {hi} seconds", self.duration_s),
            ));
        }
        if self.paths.is_empty() || self.paths.len() > MAX_PATHS {
            return Err(err(
                "path".into(),
                format!("{} paths; need 1 to {MAX_PATHS}", self.paths.len()),
            ));
        }
        for (i, p) in self.paths.iter().enumerate() {
            let f = |name: &str| format!("path[{i}].{name}");
            if !(p.rate_mbit.is_finite() && p.rate_mbit > 0.0 && p.rate_mbit <= MAX_RATE_MBIT) {
                return Err(err(
                    f("rate_mbit"),
                    format!(
                        "{} must be above 0 and at most {MAX_RATE_MBIT}",
                        p.rate_mbit
                    ),
                ));
            }
            match (p.rtt_ms, p.delay_up_ms, p.delay_down_ms) {
                (Some(rtt), None, None) => {
                    if !(rtt.is_finite() && (0.0..=MAX_RTT_MS).contains(&rtt)) {
                        return Err(err(
                            f("rtt_ms"),
                            format!("{rtt} must be between 0 and {MAX_RTT_MS}"),
                        ));
                    }
                }
                (None, Some(up), Some(down)) => {
                    for (name, v) in [("delay_up_ms", up), ("delay_down_ms", down)] {
                        if !(v.is_finite() && (0.0..=MAX_RTT_MS / 2.0).contains(&v)) {
                            return Err(err(
                                f(name),
                                format!("{v} must be between 0 and {}", MAX_RTT_MS / 2.0),
                            ));
                        }
                    }
                }
                (Some(_), _, _) => {
                    return Err(err(
                        f("rtt_ms"),
                        "give rtt_ms or delay_up_ms and delay_down_ms, not both".into(),
                    ));
                }
                (None, _, _) => {
                    return Err(err(
                        f("rtt_ms"),
                        "missing: give rtt_ms, or delay_up_ms and delay_down_ms".into(),
                    ));
                }
            }
            match (p.queue_ms, p.queue_bytes) {
                (Some(_), Some(_)) => {
                    return Err(err(
                        f("queue_bytes"),
                        "give queue_ms or queue_bytes, not both".into(),
                    ));
                }
                (Some(ms), None) if !(ms.is_finite() && ms > 0.0 && ms <= 10_000.0) => {
                    return Err(err(
                        f("queue_ms"),
                        format!("{ms} must be above 0 and at most 10000"),
                    ));
                }
                _ => {}
            }
            let q = p.queue_bytes();
            if q < MIN_QUEUE_BYTES {
                return Err(err(
                    f(if p.queue_bytes.is_some() {
                        "queue_bytes"
                    } else {
                        "queue_ms"
                    }),
                    format!(
                        "the queue is {q} bytes at this rate; the minimum is {MIN_QUEUE_BYTES}"
                    ),
                ));
            }
            if !(p.loss.is_finite() && (0.0..1.0).contains(&p.loss)) {
                return Err(err(
                    f("loss"),
                    format!("{} must be a probability from 0 to below 1", p.loss),
                ));
            }
            if let Some(b) = p.burst_loss {
                if p.loss != 0.0 {
                    return Err(err(
                        f("burst_loss"),
                        "give loss or burst_loss, not both".into(),
                    ));
                }
                for (name, v) in [
                    ("p_good_to_bad", b.p_good_to_bad),
                    ("p_bad_to_good", b.p_bad_to_good),
                    ("loss_in_good", b.loss_in_good),
                    ("loss_in_bad", b.loss_in_bad),
                ] {
                    if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                        return Err(err(
                            f(&format!("burst_loss.{name}")),
                            format!("{v} must be a probability from 0 to 1"),
                        ));
                    }
                }
                if p.loss_model().stationary_loss_rate() >= 1.0 {
                    return Err(err(
                        f("burst_loss"),
                        "this chain loses every packet in the long run".into(),
                    ));
                }
            }
        }
        let total: f64 = self.paths.iter().map(|p| p.rate_mbit).sum();
        if total > MAX_TOTAL_MBIT {
            return Err(err(
                "path".into(),
                format!("the rates add up to {total} Mbit/s; at most {MAX_TOTAL_MBIT} here"),
            ));
        }
        for (k, e) in self.events.iter().enumerate() {
            let f = |name: &str| format!("event[{k}].{name}");
            if e.path >= self.paths.len() {
                return Err(err(
                    f("path"),
                    format!(
                        "{} does not exist (paths are 0 to {})",
                        e.path,
                        self.paths.len() - 1
                    ),
                ));
            }
            if !(e.from_s.is_finite() && e.from_s >= 0.0 && e.from_s < self.duration_s) {
                return Err(err(
                    f("from_s"),
                    format!(
                        "{} must be from 0 to below duration_s ({})",
                        e.from_s, self.duration_s
                    ),
                ));
            }
            match (e.kind, e.rate_mbit) {
                (EventKind::Rate, None) => {
                    return Err(err(
                        f("rate_mbit"),
                        "a rate event needs rate_mbit, the rate during the event".into(),
                    ));
                }
                (EventKind::Rate, Some(r)) => {
                    let others = total - self.paths[e.path].rate_mbit;
                    if !(r.is_finite() && r > 0.0 && r <= MAX_RATE_MBIT) {
                        return Err(err(
                            f("rate_mbit"),
                            format!("{r} must be above 0 and at most {MAX_RATE_MBIT}"),
                        ));
                    }
                    if others + r > MAX_TOTAL_MBIT {
                        return Err(err(
                            f("rate_mbit"),
                            format!(
                                "with it the rates add up to {} Mbit/s; at most {MAX_TOTAL_MBIT} here",
                                others + r
                            ),
                        ));
                    }
                }
                (_, Some(_)) => {
                    return Err(err(
                        f("rate_mbit"),
                        "only a rate event has rate_mbit".into(),
                    ));
                }
                (_, None) => {}
            }
            match (e.kind, e.loss) {
                (EventKind::Loss, None) => {
                    return Err(err(
                        f("loss"),
                        "a loss event needs loss, the share lost during the event".into(),
                    ));
                }
                (EventKind::Loss, Some(p)) if !(p.is_finite() && (0.0..1.0).contains(&p)) => {
                    return Err(err(
                        f("loss"),
                        format!(
                            "{p} must be from 0 to below 1 (a path losing everything is a blackhole event)"
                        ),
                    ));
                }
                (EventKind::Loss, Some(_)) | (_, None) => {}
                (_, Some(_)) => {
                    return Err(err(f("loss"), "only a loss event has loss".into()));
                }
            }
            if !(e.to_s.is_finite() && e.to_s > e.from_s && e.to_s <= self.duration_s) {
                return Err(err(
                    f("to_s"),
                    format!(
                        "{} must be after from_s ({}) and at most duration_s ({})",
                        e.to_s, e.from_s, self.duration_s
                    ),
                ));
            }
        }
        // Rate events on different paths may overlap: the rates in force at any moment
        // must still fit the total (the sum only rises where a rate event starts).
        for (k, e) in self.events.iter().enumerate() {
            if e.kind != EventKind::Rate {
                continue;
            }
            let at = e.from_s;
            let sum: f64 = (0..self.paths.len())
                .map(|i| {
                    self.events
                        .iter()
                        .find(|x| {
                            x.path == i
                                && x.kind == EventKind::Rate
                                && x.from_s <= at
                                && at < x.to_s
                        })
                        .and_then(|x| x.rate_mbit)
                        .unwrap_or(self.paths[i].rate_mbit)
                })
                .sum();
            if sum > MAX_TOTAL_MBIT {
                return Err(err(
                    format!("event[{k}].rate_mbit"),
                    format!(
                        "from {at} s the rates in force add up to {sum} Mbit/s; at most \
                         {MAX_TOTAL_MBIT} here"
                    ),
                ));
            }
        }
        for (a, x) in self.events.iter().enumerate() {
            for y in &self.events[a + 1..] {
                if x.path == y.path && x.from_s < y.to_s && y.from_s < x.to_s {
                    return Err(err(
                        format!("event[{a}]"),
                        format!("overlaps another event on path {}", x.path),
                    ));
                }
            }
        }
        Ok(())
    }

    /// This file with another transfer length (validated again: events must still fit).
    pub fn with_duration(&self, seconds: f64, file: &str) -> Result<TopologyFile, SpecError> {
        let t = TopologyFile {
            duration_s: seconds,
            ..self.clone()
        };
        t.validate(file)?;
        Ok(t)
    }

    /// Sum of the path rates, Mbit/s, averaged over the transfer: rate events count for
    /// their share of it (without any, the plain sum of the configured rates).
    pub fn total_mbit(&self) -> f64 {
        (0..self.paths.len()).map(|i| self.path_mean_mbit(i)).sum()
    }

    /// Path `i`'s rate averaged over the transfer, Mbit/s (0 for a path that does not
    /// exist): its configured rate, replaced by each rate event's for that event's span.
    pub fn path_mean_mbit(&self, i: usize) -> f64 {
        let Some(p) = self.paths.get(i) else {
            return 0.0;
        };
        let changed: f64 = self
            .events
            .iter()
            .filter(|e| e.path == i && e.kind == EventKind::Rate)
            .filter_map(|e| e.rate_mbit.map(|r| (r - p.rate_mbit) * (e.to_s - e.from_s)))
            .sum();
        p.rate_mbit + changed / self.duration_s
    }

    /// The transfer's duration.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s)
    }

    /// The path a single-path transfer uses: the highest rate, then the lowest RTT, then
    /// the lowest index.
    pub fn best_path(&self) -> usize {
        let mut best = 0;
        for (i, p) in self.paths.iter().enumerate().skip(1) {
            let b = &self.paths[best];
            if p.rate_mbit > b.rate_mbit || (p.rate_mbit == b.rate_mbit && p.rtt_ms() < b.rtt_ms())
            {
                best = i;
            }
        }
        best
    }

    /// A one-line summary: `20 Mbit/s @ 20 ms + 10 Mbit/s @ 100 ms (10 % loss)`.
    pub fn summary(&self) -> String {
        self.paths
            .iter()
            .map(PathFile::summary)
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

impl PathFile {
    /// The base round-trip time, ms: `rtt_ms`, or the two one-way delays added.
    pub fn rtt_ms(&self) -> f64 {
        self.rtt_ms
            .unwrap_or_else(|| self.delay_up_ms.unwrap_or(0.0) + self.delay_down_ms.unwrap_or(0.0))
    }

    /// The one-way delay client → server, ms (half the RTT unless given).
    pub fn delay_up_ms(&self) -> f64 {
        self.delay_up_ms.unwrap_or_else(|| self.rtt_ms() / 2.0)
    }

    /// The one-way delay server → client, ms (half the RTT unless given).
    pub fn delay_down_ms(&self) -> f64 {
        self.delay_down_ms.unwrap_or_else(|| self.rtt_ms() / 2.0)
    }

    /// The tbf queue limit in bytes.
    pub fn queue_bytes(&self) -> u32 {
        match (self.queue_bytes, self.queue_ms) {
            (Some(b), _) => b,
            (None, ms) => {
                let ms = ms.unwrap_or(DEFAULT_QUEUE_MS);
                let b = self.rate_mbit * 1e6 / 8.0 * ms / 1000.0;
                if b.is_finite() {
                    b.round().clamp(0.0, f64::from(u32::MAX)) as u32
                } else {
                    0
                }
            }
        }
    }

    /// The loss model of the lossy directions.
    pub fn loss_model(&self) -> LossModel {
        match self.burst_loss {
            Some(b) => LossModel::GilbertElliott {
                p_good_to_bad: b.p_good_to_bad,
                p_bad_to_good: b.p_bad_to_good,
                loss_in_good: b.loss_in_good,
                loss_in_bad: b.loss_in_bad,
            },
            None if self.loss > 0.0 => LossModel::Bernoulli { p: self.loss },
            None => LossModel::None,
        }
    }

    /// `20 Mbit/s @ 20 ms` plus its loss, if any.
    pub fn summary(&self) -> String {
        let mut s = format!("{} Mbit/s @ {} ms", self.rate_mbit, self.rtt_ms());
        let rate = self.loss_model().stationary_loss_rate();
        if rate > 0.0 {
            let dir = match self.loss_direction {
                LossDirection::Both => "",
                LossDirection::Up => " up",
                LossDirection::Down => " down",
            };
            let kind = if self.burst_loss.is_some() {
                "bursty "
            } else {
                ""
            };
            s.push_str(&format!(" ({:.3} % {kind}loss{dir})", rate * 100.0));
            s = s.replace(".000 %", " %");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: &str = r#"
name = "T1"
description = "two paths"
duration_s = 20

[[path]]
rate_mbit = 20
rtt_ms = 20
queue_ms = 100

[[path]]
rate_mbit = 10
rtt_ms = 100
queue_bytes = 125000
loss = 0.1

[[event]]
kind = "blackhole"
path = 0
from_s = 5
to_s = 10
"#;

    #[test]
    fn a_valid_file_parses() {
        let t = TopologyFile::parse(T1, "T1.toml").unwrap();
        assert_eq!(t.paths.len(), 2);
        assert_eq!(t.paths[0].queue_bytes(), 250_000);
        assert_eq!(t.paths[1].queue_bytes(), 125_000);
        assert_eq!(t.best_path(), 0);
        assert_eq!(t.total_mbit(), 30.0);
        assert_eq!(t.events[0].kind, EventKind::Blackhole);
        assert_eq!(t.paths[1].loss_model(), LossModel::Bernoulli { p: 0.1 });
        assert_eq!(
            t.summary(),
            "20 Mbit/s @ 20 ms + 10 Mbit/s @ 100 ms (10 % loss)"
        );
    }

    #[test]
    fn every_shipped_topology_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                TopologyFile::load(&p).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n >= 4, "{n} topology files");
    }

    #[test]
    fn overlapping_rate_events_must_fit_the_total() {
        let two = |r0: f64, r1: f64| {
            format!(
                "name = \"x\"\nduration_s = 20\n\
                 [[path]]\nrate_mbit = 50\nrtt_ms = 10\n\
                 [[path]]\nrate_mbit = 45\nrtt_ms = 10\n\
                 [[event]]\nkind = \"rate\"\npath = 0\nfrom_s = 5\nto_s = 10\nrate_mbit = {r0}\n\
                 [[event]]\nkind = \"rate\"\npath = 1\nfrom_s = 6\nto_s = 12\nrate_mbit = {r1}\n"
            )
        };
        // Each alone fits (54 + 45, 50 + 49); together, from 6 s, 103 does not.
        let e = err(&two(54.0, 49.0));
        assert!(e.contains("event[1].rate_mbit") && e.contains("103"), "{e}");
        TopologyFile::parse(&two(54.0, 40.0), "x").unwrap();
    }

    #[test]
    fn one_way_delays_may_differ() {
        let text = T1.replacen("rtt_ms = 20", "delay_up_ms = 5\ndelay_down_ms = 25", 1);
        let t = TopologyFile::parse(&text, "x.toml").unwrap();
        let p = &t.paths[0];
        assert_eq!(
            (p.delay_up_ms(), p.delay_down_ms(), p.rtt_ms()),
            (5.0, 25.0, 30.0)
        );
        let q = &t.paths[1];
        assert_eq!((q.delay_up_ms(), q.delay_down_ms()), (50.0, 50.0));
    }

    #[test]
    fn rate_events_change_the_mean_capacity() {
        let text = T1.replace("kind = \"blackhole\"", "kind = \"rate\"\nrate_mbit = 5");
        let t = TopologyFile::parse(&text, "x.toml").unwrap();
        assert_eq!(t.events[0].kind, EventKind::Rate);
        assert_eq!(t.events[0].rate_mbit, Some(5.0));
        // Path 0 runs at 5 instead of 20 Mbit/s for 5 of 20 s: 16.25 on average.
        assert!((t.path_mean_mbit(0) - 16.25).abs() < 1e-9);
        assert_eq!(t.path_mean_mbit(1), 10.0);
        assert_eq!(t.path_mean_mbit(7), 0.0);
        assert!((t.total_mbit() - 26.25).abs() < 1e-9);
        // Blackholes do not count as a rate change.
        assert_eq!(TopologyFile::parse(T1, "x").unwrap().total_mbit(), 30.0);
    }

    fn err(text: &str) -> String {
        TopologyFile::parse(text, "x.toml").unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_field() {
        let cases: &[(&str, &str, &str)] = &[
            ("rate_mbit = 20", "rate_mbit = 0", "path[0].rate_mbit"),
            ("rate_mbit = 20", "rate_mbit = 200", "path[0].rate_mbit"),
            ("rate_mbit = 20", "rate_mbit = \"fast\"", "rate_mbit"),
            ("rate_mbit = 20", "rate = 20", "unknown field `rate`"),
            ("rtt_ms = 20", "rtt_ms = -1", "path[0].rtt_ms"),
            ("rtt_ms = 20", "", "`path[0].rtt_ms`: missing"),
            ("rtt_ms = 20", "rtt_ms = 20\ndelay_up_ms = 5", "not both"),
            (
                "rtt_ms = 20",
                "delay_up_ms = 5\ndelay_down_ms = 1500",
                "path[0].delay_down_ms",
            ),
            (
                "queue_ms = 100",
                "queue_ms = 100\nqueue_bytes = 9000",
                "path[0].queue_bytes",
            ),
            ("queue_ms = 100", "queue_ms = 0.1", "path[0].queue_ms"),
            ("loss = 0.1", "loss = 1.0", "path[1].loss"),
            ("loss = 0.1", "loss = nan", "path[1].loss"),
            (
                "loss = 0.1",
                "burst_loss = { p_good_to_bad = 0.1, p_bad_to_good = 2 }",
                "path[1].burst_loss.p_bad_to_good",
            ),
            (
                "loss = 0.1",
                "loss = 0.1\nburst_loss = { p_good_to_bad = 0.1, p_bad_to_good = 0.5 }",
                "path[1].burst_loss",
            ),
            ("loss = 0.1", "loss_direction = \"sideways\"", "sideways"),
            ("path = 0", "path = 2", "event[0].path"),
            ("to_s = 10", "to_s = 4", "event[0].to_s"),
            ("to_s = 10", "to_s = 30", "event[0].to_s"),
            ("from_s = 5", "from_s = -5", "event[0].from_s"),
            ("kind = \"blackhole\"", "kind = \"meteor\"", "meteor"),
            (
                "kind = \"blackhole\"",
                "kind = \"rate\"",
                "event[0].rate_mbit",
            ),
            (
                "kind = \"blackhole\"",
                "kind = \"blackhole\"\nrate_mbit = 5",
                "event[0].rate_mbit",
            ),
            ("kind = \"blackhole\"", "kind = \"loss\"", "event[0].loss"),
            (
                "kind = \"blackhole\"",
                "kind = \"loss\"\nloss = 1.0",
                "event[0].loss",
            ),
            (
                "kind = \"blackhole\"",
                "kind = \"loss\"\nloss = nan",
                "event[0].loss",
            ),
            (
                "kind = \"blackhole\"",
                "kind = \"rate\"\nrate_mbit = 5\nloss = 0.1",
                "only a loss event has loss",
            ),
            (
                "kind = \"blackhole\"",
                "kind = \"rate\"\nrate_mbit = 0",
                "event[0].rate_mbit",
            ),
            (
                "kind = \"blackhole\"",
                "kind = \"rate\"\nrate_mbit = 95",
                "add up to",
            ),
            ("duration_s = 20", "duration_s = 0.5", "duration_s"),
            ("name = \"T1\"", "name = \"T 1/\"", "name"),
            ("name = \"T1\"", "", "missing field `name`"),
        ];
        for (from, to, want) in cases {
            assert!(T1.contains(from), "{from}");
            let e = err(&T1.replacen(from, to, 1));
            assert!(e.contains(want), "{from} -> {to}: {e}");
        }
        assert!(err("not toml [").contains("x.toml"));
        let no_paths = "name = \"x\"\nduration_s = 5\npath = []\n";
        assert!(err(no_paths).contains("`path`"));
        let mut many = T1.to_owned();
        for _ in 0..8 {
            many.push_str("\n[[path]]\nrate_mbit = 5\nrtt_ms = 10\n");
        }
        assert!(err(&many).contains("`path`"));
        let mut heavy = T1.to_owned();
        heavy.push_str("\n[[path]]\nrate_mbit = 90\nrtt_ms = 10\n");
        assert!(err(&heavy).contains("add up to"));
        let mut overlap = T1.to_owned();
        overlap.push_str("\n[[event]]\nkind = \"link_down\"\npath = 0\nfrom_s = 8\nto_s = 12\n");
        assert!(err(&overlap).contains("overlaps"));
    }
}
