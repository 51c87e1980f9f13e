//! A loss model as `plait testbed set` takes it and `state.json` records it ([`Loss`]),
//! with its checks and its human-readable form.
//!
//! Invariant: [`Loss::validate`] accepts exactly what the test bed's emulator accepts, less
//! the models that lose everything (`--loss 1`, a chain that never leaves a fully lossy
//! bad state), and names the offending option and value.

use std::fmt;

use plait_testbed::emulate::LossModel;
use serde::{Deserialize, Serialize};

use super::error::SetError;

/// A loss model as JSON (`{"kind": "bernoulli", "p": 0.01}`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Loss {
    /// Nothing lost.
    None,
    /// Each packet lost with probability `p`.
    Bernoulli {
        /// Loss probability per packet.
        p: f64,
    },
    /// Two-state Gilbert-Elliott chain (bursts).
    GilbertElliott {
        /// Per-packet probability of moving from the good to the bad state.
        p_good_to_bad: f64,
        /// Per-packet probability of moving from the bad to the good state.
        p_bad_to_good: f64,
        /// Loss probability in the good state.
        loss_in_good: f64,
        /// Loss probability in the bad state.
        loss_in_bad: f64,
    },
}

impl Loss {
    /// The test bed's model.
    pub fn model(&self) -> LossModel {
        match *self {
            Loss::None => LossModel::None,
            Loss::Bernoulli { p } => LossModel::Bernoulli { p },
            Loss::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            },
        }
    }

    /// From the test bed's model.
    pub fn from_model(m: &LossModel) -> Loss {
        match *m {
            LossModel::None => Loss::None,
            LossModel::Bernoulli { p } => Loss::Bernoulli { p },
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => Loss::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            },
        }
    }

    /// Checks the probabilities; `flag` names the option in the message.
    pub fn validate(&self, flag: &str) -> Result<(), SetError> {
        let bad = |message: String| SetError::Value {
            flag: flag.to_owned(),
            message,
        };
        match *self {
            Loss::None => Ok(()),
            Loss::Bernoulli { p } => {
                if p.is_finite() && (0.0..1.0).contains(&p) {
                    Ok(())
                } else {
                    Err(bad(format!("{p} must be a probability from 0 to below 1")))
                }
            }
            Loss::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => {
                for (name, v) in [
                    ("P_GB", p_good_to_bad),
                    ("P_BG", p_bad_to_good),
                    ("LOSS_GOOD", loss_in_good),
                    ("LOSS_BAD", loss_in_bad),
                ] {
                    if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                        return Err(bad(format!(
                            "{name} = {v} must be a probability from 0 to 1"
                        )));
                    }
                }
                if self.model().stationary_loss_rate() >= 1.0 {
                    return Err(bad("this chain loses every packet in the long run".into()));
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Loss::None => f.write_str("no loss"),
            Loss::Bernoulli { p } => write!(f, "{} % loss", p * 100.0),
            Loss::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => write!(
                f,
                "bursty loss {:.3} % (g→b {p_good_to_bad}, b→g {p_bad_to_good}, \
                 good {loss_in_good}, bad {loss_in_bad})",
                self.model().stationary_loss_rate() * 100.0
            ),
        }
    }
}
