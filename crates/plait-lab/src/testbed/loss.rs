//! A loss model as `plait testbed set` takes it and `state.json` records it: plait-topology's
//! [`LossModel`], with the stricter check a running test bed applies and its human-readable
//! form.
//!
//! Invariant: [`validate`] accepts exactly what the test bed's emulator accepts, less the
//! models that lose everything (`--loss 1`, a chain that never leaves a fully lossy bad
//! state), and names the offending option and value.

use std::fmt;

use plait_topology::{LossError, LossModel};

use super::error::SetError;

/// Checks a model for a running test bed; `flag` names the option in the message.
pub fn validate(model: &LossModel, flag: &str) -> Result<(), SetError> {
    let bad = |message: String| SetError::Value {
        flag: flag.to_owned(),
        message,
    };
    if let LossModel::Bernoulli { p } = *model {
        // Stricter than the model's own check: a path that loses everything is a blackhole.
        if !(p.is_finite() && (0.0..1.0).contains(&p)) {
            return Err(bad(format!("{p} must be a probability from 0 to below 1")));
        }
    }
    model.validate().map_err(|e| match e {
        LossError::Probability { field, value } => bad(format!(
            "{} = {value} must be a probability from 0 to 1",
            option_name(field)
        )),
        other => bad(other.to_string()),
    })?;
    match model {
        LossModel::GilbertElliottTimed { .. } => Err(bad(
            "the emulator decides loss per packet; give per-packet probabilities".into(),
        )),
        _ if model.stationary_loss_rate() >= 1.0 => {
            Err(bad("this chain loses every packet in the long run".into()))
        }
        _ => Ok(()),
    }
}

/// The name `--burst-loss P_GB,P_BG,LOSS_GOOD,LOSS_BAD` gives a model field.
fn option_name(field: &str) -> &str {
    match field {
        "p_good_to_bad" => "P_GB",
        "p_bad_to_good" => "P_BG",
        "loss_in_good" => "LOSS_GOOD",
        "loss_in_bad" => "LOSS_BAD",
        other => other,
    }
}

/// A model in words: `no loss`, `2 % loss`, `bursty loss 3.846 % (g→b …)`.
#[derive(Debug, Clone, Copy)]
pub struct Described<'a>(pub &'a LossModel);

impl fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.0 {
            LossModel::None => f.write_str("no loss"),
            LossModel::Bernoulli { p } => write!(f, "{} % loss", p * 100.0),
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => write!(
                f,
                "bursty loss {:.3} % (g→b {p_good_to_bad}, b→g {p_bad_to_good}, \
                 good {loss_in_good}, bad {loss_in_bad})",
                self.0.stationary_loss_rate() * 100.0
            ),
            LossModel::GilbertElliottTimed {
                mean_good_s,
                mean_bad_s,
            } => write!(
                f,
                "bursty loss {:.3} % (good {mean_good_s} s, bad {mean_bad_s} s)",
                self.0.stationary_loss_rate() * 100.0
            ),
        }
    }
}
