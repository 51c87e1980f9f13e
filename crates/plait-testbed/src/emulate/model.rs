//! What one direction of an emulated path does to packets besides rate limiting: a constant
//! one-way delay and a loss model, with the seeded per-packet loss decision ([`LossState`]).
//!
//! Owns: [`LinkModel`] (delay, loss, seed), its validation ([`ModelError`] names the
//! offending field) and the per-packet decision. The loss model itself is plait-topology's
//! [`LossModel`], shared with the simulator; the emulator runs every kind but the timed
//! chain, which needs each packet's time ([`check_emulable`]).
//!
//! Invariants: a validated model has every probability finite and in `[0, 1]` and a delay of
//! at most [`MAX_DELAY`]; a [`LossState`] draws only from its own ChaCha8 generator seeded
//! from [`LinkModel::seed`], so the sequence of decisions is a pure function of the model,
//! the seed and the number of packets decided (no clock, no global RNG). The
//! Gilbert-Elliott chain starts in the good state; [`LossModel::None`] never draws.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use plait_topology::LossError;
pub use plait_topology::LossModel;

/// The longest one-way delay a [`LinkModel`] accepts (packets are held in the kernel for
/// that long; the kernel queue holds at most 65536 of them).
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// A model invalid for emulation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// A field of the loss model is out of range.
    #[error(transparent)]
    Loss(#[from] LossError),
    /// The loss model needs time (ns-2's timed chain); the emulator decides per packet.
    #[error(
        "the test bed's emulator decides loss per packet and cannot run `gilbert_elliott_timed`; \
         give `gilbert_elliott` with per-packet probabilities (mean burst 1 / p_bad_to_good packets)"
    )]
    Timed,
    /// The delay is longer than [`MAX_DELAY`].
    #[error("delay {delay:?} is longer than the maximum {MAX_DELAY:?}")]
    DelayTooLong {
        /// The delay given.
        delay: Duration,
    },
}

/// Checks that `model` is valid and that the emulator can run it (not the timed chain).
pub fn check_emulable(model: &LossModel) -> Result<(), ModelError> {
    model.validate()?;
    if matches!(model, LossModel::GilbertElliottTimed { .. }) {
        return Err(ModelError::Timed);
    }
    Ok(())
}

/// One direction of a path: constant one-way delay, loss, and the seed of the loss
/// decisions.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkModel {
    /// Added one-way delay (packets are held this long; order is kept).
    pub delay: Duration,
    /// How packets are lost.
    pub loss: LossModel,
    /// Seed of the loss decisions (the same seed gives the same decision sequence).
    pub seed: u64,
}

impl LinkModel {
    /// A model that neither delays nor loses.
    pub fn passthrough() -> Self {
        Self::default()
    }

    /// Checks the loss model and the delay bound.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.delay > MAX_DELAY {
            return Err(ModelError::DelayTooLong { delay: self.delay });
        }
        check_emulable(&self.loss)
    }

    /// Whether packets go through untouched (no delay, no loss).
    pub fn is_passthrough(&self) -> bool {
        self.delay.is_zero() && self.loss.is_lossless()
    }
}

/// The per-packet loss decision: a validated [`LossModel`], its chain state and a seeded
/// generator.
#[derive(Debug, Clone)]
pub struct LossState {
    model: LossModel,
    rng: ChaCha8Rng,
    bad: bool,
}

impl LossState {
    /// Validates `model` and seeds the generator with `seed`.
    pub fn new(model: &LossModel, seed: u64) -> Result<Self, ModelError> {
        check_emulable(model)?;
        Ok(Self {
            model: *model,
            rng: ChaCha8Rng::seed_from_u64(seed),
            bad: false,
        })
    }

    /// A uniform draw in `[0, 1)` with 53 bits of precision.
    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Whether the Gilbert-Elliott chain is in its bad state (always false for the other
    /// models).
    pub fn in_bad_state(&self) -> bool {
        self.bad
    }

    /// Decides the next packet: `true` means it is lost.
    pub fn lose(&mut self) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => self.uniform() < p,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => {
                let loss_p = if self.bad { loss_in_bad } else { loss_in_good };
                let lost = self.uniform() < loss_p;
                let move_p = if self.bad {
                    p_bad_to_good
                } else {
                    p_good_to_bad
                };
                if self.uniform() < move_p {
                    self.bad = !self.bad;
                }
                lost
            }
            // Refused by `new`.
            LossModel::GilbertElliottTimed { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAWS: usize = 1_000_000;

    fn ge(gb: f64, bg: f64, lg: f64, lb: f64) -> LossModel {
        LossModel::GilbertElliott {
            p_good_to_bad: gb,
            p_bad_to_good: bg,
            loss_in_good: lg,
            loss_in_bad: lb,
        }
    }

    /// Loss fraction and mean loss-burst length over `n` decisions.
    fn run(model: &LossModel, seed: u64, n: usize) -> (f64, f64) {
        let mut state = LossState::new(model, seed).expect("valid model");
        let (mut lost, mut bursts, mut prev) = (0usize, 0usize, false);
        for _ in 0..n {
            let l = state.lose();
            if l {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = l;
        }
        let mean_burst = if bursts == 0 {
            0.0
        } else {
            lost as f64 / bursts as f64
        };
        (lost as f64 / n as f64, mean_burst)
    }

    #[test]
    fn validation_names_the_field() {
        assert_eq!(
            LossModel::Bernoulli { p: 1.5 }.validate(),
            Err(LossError::Probability {
                field: "p",
                value: 1.5
            })
        );
        let err = ge(0.1, f64::NAN, 0.0, 1.0).validate().unwrap_err();
        assert!(
            matches!(
                err,
                LossError::Probability {
                    field: "p_bad_to_good",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("p_bad_to_good"));
        for (m, field) in [
            (ge(-0.1, 0.5, 0.0, 1.0), "p_good_to_bad"),
            (ge(0.1, 0.5, f64::INFINITY, 1.0), "loss_in_good"),
            (ge(0.1, 0.5, 0.0, 1.0000001), "loss_in_bad"),
        ] {
            match m.validate() {
                Err(LossError::Probability { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{m:?}: {other:?}"),
            }
        }
        assert!(LossState::new(&LossModel::Bernoulli { p: -0.0001 }, 1).is_err());
        let timed = LossModel::GilbertElliottTimed {
            mean_good_s: 1.0,
            mean_bad_s: 0.2,
        };
        assert_eq!(LossState::new(&timed, 1).unwrap_err(), ModelError::Timed);
        assert_eq!(LossModel::None.validate(), Ok(()));
        assert_eq!(ge(0.0, 1.0, 0.0, 1.0).validate(), Ok(()));
        let too_long = LinkModel {
            delay: MAX_DELAY + Duration::from_millis(1),
            ..LinkModel::default()
        };
        assert!(matches!(
            too_long.validate(),
            Err(ModelError::DelayTooLong { .. })
        ));
    }

    #[test]
    fn passthrough_and_lossless() {
        assert!(LinkModel::passthrough().is_passthrough());
        assert!(LossModel::Bernoulli { p: 0.0 }.is_lossless());
        assert!(!LossModel::Bernoulli { p: 0.01 }.is_lossless());
        assert!(ge(0.0, 0.5, 0.0, 1.0).is_lossless());
        assert!(!ge(0.01, 0.5, 0.0, 1.0).is_lossless());
        let delayed = LinkModel {
            delay: Duration::from_millis(1),
            ..LinkModel::default()
        };
        assert!(!delayed.is_passthrough());
    }

    #[test]
    fn none_never_loses() {
        let mut s = LossState::new(&LossModel::None, 3).unwrap();
        assert!((0..10_000).all(|_| !s.lose()));
    }

    #[test]
    fn bernoulli_rate_within_tolerance() {
        for p in [0.01, 0.1, 0.5] {
            let (rate, _) = run(&LossModel::Bernoulli { p }, 42, DRAWS);
            // 5 standard deviations of a binomial proportion over 1e6 draws.
            let tol = 5.0 * (p * (1.0 - p) / DRAWS as f64).sqrt();
            assert!((rate - p).abs() < tol, "p={p} measured {rate} tol {tol}");
        }
        assert_eq!(run(&LossModel::Bernoulli { p: 0.0 }, 1, 10_000).0, 0.0);
        assert_eq!(run(&LossModel::Bernoulli { p: 1.0 }, 1, 10_000).0, 1.0);
    }

    #[test]
    fn gilbert_elliott_stationary_rate_matches_formula() {
        for (m, expected) in [
            // pi_bad = 0.02 / 0.27; loss = pi_bad.
            (ge(0.02, 0.25, 0.0, 1.0), 0.02 / 0.27),
            // pi_bad = 0.1 / 0.4 = 0.25; loss = 0.25 * 0.5 + 0.75 * 0.01.
            (ge(0.1, 0.3, 0.01, 0.5), 0.25 * 0.5 + 0.75 * 0.01),
            (ge(0.0, 0.0, 0.03, 1.0), 0.03),
        ] {
            assert!((m.stationary_loss_rate() - expected).abs() < 1e-12);
            let (rate, _) = run(&m, 7, DRAWS);
            assert!(
                (rate - expected).abs() < 0.1 * expected,
                "{m:?}: measured {rate}, stationary {expected}"
            );
        }
    }

    #[test]
    fn gilbert_mean_burst_is_inverse_of_p_bad_to_good() {
        for p_bg in [0.25, 0.5] {
            let (_, mean_burst) = run(&ge(0.02, p_bg, 0.0, 1.0), 11, DRAWS);
            let expected = 1.0 / p_bg;
            assert!(
                (mean_burst - expected).abs() < 0.05 * expected,
                "p_bad_to_good={p_bg}: mean burst {mean_burst}, expected {expected}"
            );
        }
    }

    #[test]
    fn decisions_are_deterministic_per_seed() {
        let m = ge(0.05, 0.3, 0.01, 0.9);
        let seq = |seed| {
            let mut s = LossState::new(&m, seed).unwrap();
            (0..5000).map(|_| s.lose()).collect::<Vec<_>>()
        };
        assert_eq!(seq(5), seq(5));
        assert_ne!(seq(5), seq(6));
        let b = LossModel::Bernoulli { p: 0.2 };
        let mut x = LossState::new(&b, 9).unwrap();
        let mut y = LossState::new(&b, 9).unwrap();
        assert!((0..5000).all(|_| x.lose() == y.lose()));
    }
}
