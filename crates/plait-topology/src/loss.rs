//! How a link loses packets: one type for the simulator's links, the test bed's emulators,
//! `plait testbed set`, its state files and the topology files.
//!
//! Serialized with a `kind` tag: `{ kind = "bernoulli", p = 0.01 }`,
//! `{ kind = "gilbert_elliott", p_good_to_bad = 0.01, p_bad_to_good = 0.25 }`,
//! `{ kind = "gilbert_elliott_timed", mean_good_s = 1.0, mean_bad_s = 0.2 }`.
//!
//! Invariant: [`LossModel::validate`] accepts a model only if every probability is finite
//! and in `[0, 1]` and every mean time finite and non-negative; the error names the field.

use serde::{Deserialize, Serialize};

/// How packets are lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossModel {
    /// No packet is lost.
    #[default]
    None,
    /// Every packet is lost with probability `p`, independently.
    Bernoulli {
        /// Loss probability per packet.
        p: f64,
    },
    /// Two-state Gilbert-Elliott chain stepped per packet. The packet is lost with the loss
    /// probability of the current state, then the chain moves (good to bad with
    /// `p_good_to_bad`, bad to good with `p_bad_to_good`). The chain starts good. With
    /// `loss_in_good = 0` and `loss_in_bad = 1` (the Gilbert model, the defaults) losses
    /// come in bursts of mean length `1 / p_bad_to_good`.
    GilbertElliott {
        /// Probability per packet of moving from the good state to the bad one.
        p_good_to_bad: f64,
        /// Probability per packet of moving from the bad state to the good one.
        p_bad_to_good: f64,
        /// Loss probability of a packet in the good state.
        #[serde(default)]
        loss_in_good: f64,
        /// Loss probability of a packet in the bad state.
        #[serde(default = "one")]
        loss_in_bad: f64,
    },
    /// ns-2's two-state Markov error model (seed ETOM §V-C): the good state loses nothing,
    /// the bad state everything, sojourns are exponential with these means in time, and
    /// the link starts good at time zero. Only the simulator, which has the time of each
    /// packet, runs it; the test bed's emulator draws per packet and refuses it.
    GilbertElliottTimed {
        /// Mean time in the good (loss-free) state, s.
        mean_good_s: f64,
        /// Mean time in the bad (all-lost) state, s.
        mean_bad_s: f64,
    },
}

fn one() -> f64 {
    1.0
}

/// A loss model with an impossible value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LossError {
    /// A probability is NaN, infinite or outside `[0, 1]`.
    #[error("loss model field `{field}` is {value}: it must be a finite probability in [0, 1]")]
    Probability {
        /// The field's name, e.g. `p_good_to_bad`.
        field: &'static str,
        /// The value given.
        value: f64,
    },
    /// A mean time is NaN, infinite or negative.
    #[error(
        "loss model field `{field}` is {value}: it must be a finite time in seconds, 0 or more"
    )]
    Time {
        /// The field's name, e.g. `mean_good_s`.
        field: &'static str,
        /// The value given.
        value: f64,
    },
}

fn probability(field: &'static str, value: f64) -> Result<(), LossError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(LossError::Probability { field, value })
    }
}

fn time(field: &'static str, value: f64) -> Result<(), LossError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(LossError::Time { field, value })
    }
}

impl LossModel {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), LossError> {
        match *self {
            LossModel::None => Ok(()),
            LossModel::Bernoulli { p } => probability("p", p),
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => {
                probability("p_good_to_bad", p_good_to_bad)?;
                probability("p_bad_to_good", p_bad_to_good)?;
                probability("loss_in_good", loss_in_good)?;
                probability("loss_in_bad", loss_in_bad)
            }
            LossModel::GilbertElliottTimed {
                mean_good_s,
                mean_bad_s,
            } => {
                time("mean_good_s", mean_good_s)?;
                time("mean_bad_s", mean_bad_s)
            }
        }
    }

    /// The long-run fraction of packets (or, for the timed chain, of time) lost. For the
    /// per-packet chain `pi_bad * loss_in_bad + (1 - pi_bad) * loss_in_good` with
    /// `pi_bad = p_good_to_bad / (p_good_to_bad + p_bad_to_good)`; a chain that never moves
    /// stays in its starting good state.
    pub fn stationary_loss_rate(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => {
                let moves = p_good_to_bad + p_bad_to_good;
                let pi_bad = if moves > 0.0 {
                    p_good_to_bad / moves
                } else {
                    0.0
                };
                pi_bad * loss_in_bad + (1.0 - pi_bad) * loss_in_good
            }
            LossModel::GilbertElliottTimed {
                mean_good_s,
                mean_bad_s,
            } => {
                let total = mean_good_s + mean_bad_s;
                if total > 0.0 { mean_bad_s / total } else { 0.0 }
            }
        }
    }

    /// Whether this model never loses a packet.
    pub fn is_lossless(&self) -> bool {
        match *self {
            LossModel::None => true,
            LossModel::Bernoulli { p } => p == 0.0,
            // Starts good: lossless when the good state loses nothing and the chain never
            // reaches a lossy bad state.
            LossModel::GilbertElliott {
                p_good_to_bad,
                loss_in_good,
                loss_in_bad,
                ..
            } => loss_in_good == 0.0 && (p_good_to_bad == 0.0 || loss_in_bad == 0.0),
            LossModel::GilbertElliottTimed { mean_bad_s, .. } => mean_bad_s == 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_from_toml_with_its_defaults() {
        #[derive(Deserialize)]
        struct W {
            loss: LossModel,
        }
        let read = |t: &str| toml::from_str::<W>(t).map(|w| w.loss);
        assert_eq!(read("loss = { kind = \"none\" }").unwrap(), LossModel::None);
        assert_eq!(
            read("loss = { kind = \"bernoulli\", p = 0.02 }").unwrap(),
            LossModel::Bernoulli { p: 0.02 }
        );
        assert_eq!(
            read(
                "loss = { kind = \"gilbert_elliott\", p_good_to_bad = 0.01, p_bad_to_good = 0.25 }"
            )
            .unwrap(),
            LossModel::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.25,
                loss_in_good: 0.0,
                loss_in_bad: 1.0
            }
        );
        assert_eq!(
            read("loss = { kind = \"gilbert_elliott_timed\", mean_good_s = 1, mean_bad_s = 0.2 }")
                .unwrap(),
            LossModel::GilbertElliottTimed {
                mean_good_s: 1.0,
                mean_bad_s: 0.2
            }
        );
        assert!(read("loss = { kind = \"bernoulli\", p = 0.1, q = 1 }").is_err());
        assert!(read("loss = { kind = \"sometimes\" }").is_err());
    }

    #[test]
    fn validation_names_the_field() {
        let e = LossModel::Bernoulli { p: 1.5 }.validate().unwrap_err();
        assert!(e.to_string().contains("`p` is 1.5"), "{e}");
        let e = LossModel::GilbertElliottTimed {
            mean_good_s: f64::NAN,
            mean_bad_s: 1.0,
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("mean_good_s"), "{e}");
    }

    #[test]
    fn stationary_rates() {
        let ge = LossModel::GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.09,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        };
        assert!((ge.stationary_loss_rate() - 0.1).abs() < 1e-12);
        let timed = LossModel::GilbertElliottTimed {
            mean_good_s: 1.0,
            mean_bad_s: 0.25,
        };
        assert!((timed.stationary_loss_rate() - 0.2).abs() < 1e-12);
        assert!(LossModel::None.is_lossless());
        assert!(!timed.is_lossless());
    }
}
