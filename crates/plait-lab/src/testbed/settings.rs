//! What a running test bed's paths are set to, and a change to one path ([`Change`]): the
//! part of `plait testbed set` that is pure data, shared by the command line (which checks
//! a change before sending it), the control protocol (which carries it as JSON) and the
//! holder (which checks it again, computes the new settings and applies them).
//!
//! Invariants: [`Change::validate`] accepts only values the test bed library accepts
//! (rates in (0, [`MAX_RATE_MBIT`]], delays in [0, [`MAX_DELAY`]], loss probabilities in
//! [0, 1) and bursty chains that do not lose everything), so an error from the holder is
//! about the system, not the input; [`Change::apply`] is a pure function of the current
//! settings and the change, and refuses a resulting queue below [`MIN_QUEUE_BYTES`]. A
//! [`PathSettings`] describes both directions; rate, queue, blackhole and link state are
//! always the same in both (tbf on both router interfaces, one nftables table, one link).

use std::time::Duration;

use plait_testbed::emulate::{LinkModel, MAX_DELAY};
use plait_testbed::topology::{MAX_RATE_MBIT, MIN_QUEUE_BYTES};
use plait_testbed::{Direction, PathSpec};
use serde::{Deserialize, Serialize};

pub use super::error::SetError;
pub use plait_topology::LossModel;

use super::loss;

/// Longest `--queue-ms` accepted (as the topology files' `queue_ms`).
pub const MAX_QUEUE_MS: f64 = 10_000.0;

/// One direction of a path: one-way delay and loss.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirSettings {
    /// Added one-way delay, ms.
    pub delay_ms: f64,
    /// How packets are lost.
    pub loss: LossModel,
    /// Seed of the loss decisions (kept across changes, so a change is reproducible).
    pub seed: u64,
}

impl DirSettings {
    /// From the test bed's model.
    pub fn from_model(m: &LinkModel) -> DirSettings {
        DirSettings {
            delay_ms: m.delay.as_secs_f64() * 1000.0,
            loss: m.loss,
            seed: m.seed,
        }
    }

    /// The test bed's model (a delay out of range becomes one the library refuses, so it
    /// is reported rather than silently clamped).
    pub fn link_model(&self) -> LinkModel {
        let delay = Duration::try_from_secs_f64(self.delay_ms / 1000.0).unwrap_or(Duration::MAX);
        LinkModel {
            delay,
            loss: self.loss,
            seed: self.seed,
        }
    }
}

/// Everything `plait testbed set` can change on one path, as it is now.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathSettings {
    /// tbf rate in each direction, Mbit/s; `None`: unshaped.
    pub rate_mbit: Option<f64>,
    /// tbf queue limit, bytes (kept while unshaped, used when shaped again).
    pub queue_bytes: u32,
    /// Client → server.
    pub up: DirSettings,
    /// Server → client.
    pub down: DirSettings,
    /// Whether a blackhole is in force (`set --blackhole on`, or a timed event).
    pub blackhole: bool,
    /// Whether the router's client-side link is up (`set --link`, or a timed event).
    pub link_up: bool,
}

impl PathSettings {
    /// The settings a path is built with.
    pub fn from_spec(spec: &PathSpec) -> PathSettings {
        PathSettings {
            rate_mbit: spec.rate_mbit,
            queue_bytes: spec.queue_bytes,
            up: DirSettings::from_model(&spec.link_model(Direction::Up)),
            down: DirSettings::from_model(&spec.link_model(Direction::Down)),
            blackhole: false,
            link_up: true,
        }
    }

    /// One direction.
    pub fn dir(&self, d: Direction) -> &DirSettings {
        match d {
            Direction::Up => &self.up,
            Direction::Down => &self.down,
        }
    }

    /// One direction, to change.
    pub fn dir_mut(&mut self, d: Direction) -> &mut DirSettings {
        match d {
            Direction::Up => &mut self.up,
            Direction::Down => &mut self.down,
        }
    }

    /// `20 Mbit/s, queue 250000 B; up 10 ms, no loss; down 10 ms, 1 % loss`.
    pub fn summary(&self) -> String {
        let rate = match self.rate_mbit {
            Some(r) => format!("{r} Mbit/s, queue {} B", self.queue_bytes),
            None => "unshaped".to_owned(),
        };
        let dir = |d: &DirSettings| format!("{} ms, {}", d.delay_ms, loss::Described(&d.loss));
        let mut s = if self.up.delay_ms == self.down.delay_ms && self.up.loss == self.down.loss {
            format!("{rate}; {} each way", dir(&self.up))
        } else {
            format!("{rate}; up {}; down {}", dir(&self.up), dir(&self.down))
        };
        if self.blackhole {
            s.push_str("; BLACKHOLED");
        }
        if !self.link_up {
            s.push_str("; LINK DOWN");
        }
        s
    }
}

/// Which directions a delay or loss change applies to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dirs {
    /// Client → server and server → client.
    #[default]
    Both,
    /// Client → server.
    Up,
    /// Server → client.
    Down,
}

impl Dirs {
    /// The directions.
    pub fn list(self) -> &'static [Direction] {
        match self {
            Dirs::Both => &Direction::BOTH,
            Dirs::Up => &[Direction::Up],
            Dirs::Down => &[Direction::Down],
        }
    }
}

/// A new rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Rate {
    /// Remove the shaping.
    Unshaped,
    /// Shape to this many Mbit/s.
    Mbit(f64),
}

/// A new tbf queue limit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Queue {
    /// As time at the path's (new) rate, ms.
    Ms(f64),
    /// In bytes.
    Bytes(u32),
}

/// A change to one path: what `plait testbed set` sends. Absent fields stay as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// The path (of client 0).
    pub path: usize,
    /// New rate, or unshaped.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// New queue limit.
    #[serde(default)]
    pub queue: Option<Queue>,
    /// New one-way delay, ms, for the directions of `dirs`.
    #[serde(default)]
    pub delay_ms: Option<f64>,
    /// New loss, for the directions of `dirs`.
    #[serde(default)]
    pub loss: Option<LossModel>,
    /// The directions a delay or loss change applies to.
    #[serde(default)]
    pub dirs: Dirs,
    /// Blackhole on or off.
    #[serde(default)]
    pub blackhole: Option<bool>,
    /// Link up or down.
    #[serde(default)]
    pub link_up: Option<bool>,
}

fn value(flag: &str, message: String) -> SetError {
    SetError::Value {
        flag: flag.to_owned(),
        message,
    }
}

impl Change {
    /// Whether it changes the delay or loss of some direction.
    pub fn changes_model(&self) -> bool {
        self.delay_ms.is_some() || self.loss.is_some()
    }

    /// Whether it changes the rate or queue.
    pub fn changes_rate(&self) -> bool {
        self.rate.is_some() || self.queue.is_some()
    }

    /// Checks the change for a test bed with `paths` paths.
    pub fn validate(&self, paths: usize) -> Result<(), SetError> {
        if self.path >= paths {
            return Err(SetError::NoPath {
                path: self.path,
                last: paths.saturating_sub(1),
            });
        }
        if !self.changes_rate()
            && !self.changes_model()
            && self.blackhole.is_none()
            && self.link_up.is_none()
        {
            return Err(SetError::Nothing);
        }
        if self.dirs != Dirs::Both && !self.changes_model() {
            return Err(SetError::DirWithoutModel);
        }
        match self.rate {
            Some(Rate::Mbit(r)) if !(r.is_finite() && r > 0.0 && r <= MAX_RATE_MBIT) => {
                return Err(value(
                    "--rate",
                    format!("{r} Mbit/s must be above 0 and at most {MAX_RATE_MBIT}"),
                ));
            }
            Some(Rate::Unshaped) if self.queue.is_some() => {
                return Err(value(
                    "--unshaped",
                    "an unshaped path has no queue limit: drop --queue-ms/--queue-bytes".into(),
                ));
            }
            _ => {}
        }
        match self.queue {
            Some(Queue::Ms(ms)) if !(ms.is_finite() && ms > 0.0 && ms <= MAX_QUEUE_MS) => {
                return Err(value(
                    "--queue-ms",
                    format!("{ms} must be above 0 and at most {MAX_QUEUE_MS}"),
                ));
            }
            Some(Queue::Bytes(b)) if b < MIN_QUEUE_BYTES => {
                return Err(value(
                    "--queue-bytes",
                    format!("{b} is below the minimum of {MIN_QUEUE_BYTES}"),
                ));
            }
            _ => {}
        }
        if let Some(d) = self.delay_ms {
            let max = MAX_DELAY.as_secs_f64() * 1000.0;
            if !(d.is_finite() && (0.0..=max).contains(&d)) {
                return Err(value("--delay", format!("{d} ms must be from 0 to {max}")));
            }
        }
        if let Some(l) = self.loss {
            let flag = match l {
                LossModel::GilbertElliott { .. } => "--burst-loss",
                _ => "--loss",
            };
            loss::validate(&l, flag)?;
        }
        Ok(())
    }

    /// The settings after this change (validated first; `paths` as for
    /// [`Change::validate`]).
    pub fn apply(&self, current: &PathSettings, paths: usize) -> Result<PathSettings, SetError> {
        self.validate(paths)?;
        let mut next = *current;
        match self.rate {
            Some(Rate::Unshaped) => next.rate_mbit = None,
            Some(Rate::Mbit(r)) => next.rate_mbit = Some(r),
            None => {}
        }
        match (self.queue, next.rate_mbit) {
            (Some(Queue::Bytes(b)), _) => next.queue_bytes = b,
            (Some(Queue::Ms(ms)), Some(rate)) => {
                let b = (rate * 1e6 / 8.0 * ms / 1000.0).round();
                if b < f64::from(MIN_QUEUE_BYTES) {
                    return Err(value(
                        "--queue-ms",
                        format!(
                            "{ms} ms at {rate} Mbit/s is {b} bytes, below the minimum of \
                             {MIN_QUEUE_BYTES}"
                        ),
                    ));
                }
                // At most 10 s at 10 Gbit/s: 12.5 GB does not fit; clamp to what tbf takes.
                next.queue_bytes = b.min(f64::from(u32::MAX)) as u32;
            }
            (Some(Queue::Ms(_)), None) => {
                return Err(value(
                    "--queue-ms",
                    format!(
                        "path {} is unshaped, so there is no rate to convert to bytes: give \
                         --rate too, or --queue-bytes",
                        self.path
                    ),
                ));
            }
            (None, _) => {}
        }
        for &d in self.dirs.list() {
            let dir = next.dir_mut(d);
            if let Some(ms) = self.delay_ms {
                dir.delay_ms = ms;
            }
            if let Some(l) = self.loss {
                dir.loss = l;
            }
        }
        if let Some(b) = self.blackhole {
            next.blackhole = b;
        }
        if let Some(l) = self.link_up {
            next.link_up = l;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> PathSettings {
        PathSettings::from_spec(
            &PathSpec::v4()
                .rate(20.0)
                .queue(250_000)
                .rtt(Duration::from_millis(20))
                .seed(3),
        )
    }

    fn change(f: impl FnOnce(&mut Change)) -> Change {
        let mut c = Change::default();
        f(&mut c);
        c
    }

    #[test]
    fn settings_come_from_the_spec() {
        let s = current();
        assert_eq!(s.rate_mbit, Some(20.0));
        assert_eq!(s.up.delay_ms, 10.0);
        assert_eq!(s.down.seed, 4);
        assert_eq!(s.up.link_model().delay, Duration::from_millis(10));
        assert_eq!(
            s.summary(),
            "20 Mbit/s, queue 250000 B; 10 ms, no loss each way"
        );
    }

    #[test]
    fn every_bad_value_is_named() {
        let cases: Vec<(Change, &str)> = vec![
            (change(|c| c.path = 2), "path 2 does not exist"),
            (change(|_| {}), "nothing to set"),
            (
                change(|c| {
                    c.dirs = Dirs::Up;
                    c.blackhole = Some(true);
                }),
                "--dir only applies",
            ),
            (change(|c| c.rate = Some(Rate::Mbit(-1.0))), "--rate"),
            (change(|c| c.rate = Some(Rate::Mbit(f64::NAN))), "--rate"),
            (change(|c| c.rate = Some(Rate::Mbit(0.0))), "--rate"),
            (
                change(|c| {
                    c.rate = Some(Rate::Unshaped);
                    c.queue = Some(Queue::Bytes(9000));
                }),
                "--unshaped",
            ),
            (change(|c| c.queue = Some(Queue::Ms(0.0))), "--queue-ms"),
            (
                change(|c| c.queue = Some(Queue::Bytes(100))),
                "--queue-bytes",
            ),
            (change(|c| c.delay_ms = Some(-5.0)), "--delay"),
            (change(|c| c.delay_ms = Some(1e9)), "--delay"),
            (change(|c| c.delay_ms = Some(f64::INFINITY)), "--delay"),
            (
                change(|c| c.loss = Some(LossModel::Bernoulli { p: 1.0 })),
                "--loss: 1 must be",
            ),
            (
                change(|c| c.loss = Some(LossModel::Bernoulli { p: -0.1 })),
                "--loss",
            ),
            (
                change(|c| {
                    c.loss = Some(LossModel::GilbertElliott {
                        p_good_to_bad: 0.1,
                        p_bad_to_good: 2.0,
                        loss_in_good: 0.0,
                        loss_in_bad: 1.0,
                    })
                }),
                "--burst-loss: P_BG = 2",
            ),
            (
                change(|c| {
                    c.loss = Some(LossModel::GilbertElliott {
                        p_good_to_bad: 0.1,
                        p_bad_to_good: 0.0,
                        loss_in_good: 0.0,
                        loss_in_bad: 1.0,
                    })
                }),
                "loses every packet",
            ),
        ];
        for (c, want) in cases {
            let e = c.validate(2).unwrap_err().to_string();
            assert!(e.contains(want), "{c:?}: {e}");
        }
    }

    #[test]
    fn changes_apply_to_the_right_fields() {
        let cur = current();
        let n = change(|c| c.rate = Some(Rate::Mbit(5.0)))
            .apply(&cur, 1)
            .unwrap();
        assert_eq!((n.rate_mbit, n.queue_bytes), (Some(5.0), 250_000));
        let n = change(|c| {
            c.rate = Some(Rate::Mbit(8.0));
            c.queue = Some(Queue::Ms(50.0));
        })
        .apply(&cur, 1)
        .unwrap();
        assert_eq!(n.queue_bytes, 50_000);
        let n = change(|c| c.queue = Some(Queue::Ms(100.0)))
            .apply(&cur, 1)
            .unwrap();
        assert_eq!(n.queue_bytes, 250_000);
        let n = change(|c| c.rate = Some(Rate::Unshaped))
            .apply(&cur, 1)
            .unwrap();
        assert_eq!(n.rate_mbit, None);
        let e = change(|c| c.queue = Some(Queue::Ms(10.0)))
            .apply(&n, 1)
            .unwrap_err();
        assert!(e.to_string().contains("unshaped"), "{e}");
        let e = change(|c| c.queue = Some(Queue::Ms(0.5)))
            .apply(&cur, 1)
            .unwrap_err();
        assert!(e.to_string().contains("below the minimum"), "{e}");

        let n = change(|c| {
            c.delay_ms = Some(40.0);
            c.dirs = Dirs::Down;
            c.loss = Some(LossModel::Bernoulli { p: 0.01 });
        })
        .apply(&cur, 1)
        .unwrap();
        assert_eq!((n.up.delay_ms, n.down.delay_ms), (10.0, 40.0));
        assert_eq!(n.up.loss, LossModel::None);
        assert_eq!(n.down.loss, LossModel::Bernoulli { p: 0.01 });
        assert_eq!(n.down.seed, cur.down.seed, "seeds are kept");
        assert!(
            n.summary()
                .contains("up 10 ms, no loss; down 40 ms, 1 % loss")
        );

        let n = change(|c| {
            c.blackhole = Some(true);
            c.link_up = Some(false);
        })
        .apply(&cur, 1)
        .unwrap();
        assert!(n.blackhole && !n.link_up);
        assert!(n.summary().ends_with("BLACKHOLED; LINK DOWN"));
    }

    #[test]
    fn changes_round_trip_as_json() {
        let c = change(|c| {
            c.path = 1;
            c.rate = Some(Rate::Mbit(7.5));
            c.queue = Some(Queue::Bytes(30_000));
            c.delay_ms = Some(25.0);
            c.dirs = Dirs::Up;
            c.loss = Some(LossModel::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.3,
                loss_in_good: 0.0,
                loss_in_bad: 1.0,
            });
            c.blackhole = Some(false);
        });
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Change>(&text).unwrap(), c);
        let minimal: Change = serde_json::from_str(r#"{"path": 0, "rate": "unshaped"}"#).unwrap();
        assert_eq!(minimal.rate, Some(Rate::Unshaped));
        assert_eq!(minimal.dirs, Dirs::Both);
        for bad in [
            r#"{"path": 0, "speed": 5}"#,
            r#"{"path": -1}"#,
            r#"{"path": 0, "loss": {"kind": "meteor"}}"#,
            r#"{"path": 0, "loss": {"kind": "bernoulli", "p": 0.1, "q": 1}}"#,
            r#"{"path": 0, "delay_ms": null, "rate": {"mbit": "fast"}}"#,
        ] {
            assert!(serde_json::from_str::<Change>(bad).is_err(), "{bad}");
        }
    }
}
