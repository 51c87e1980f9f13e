//! Loss at a link's input: Bernoulli, the per-packet Gilbert-Elliott chain (the test bed's)
//! and the continuous-time two-state Markov model (ns-2's), drawing from the link's own
//! generator. The model is plait-topology's [`LossModel`], shared with the test bed.
//!
//! Owns: [`LossState`], the running state of a [`LossModel`], and the uniform / exponential
//! draws shared with the rest of the module.
//!
//! The per-packet chain decides as the test bed's emulator does: the packet is lost with the
//! current state's probability (one draw), then the chain moves (one draw), starting good.
//!
//! The timed chain follows ns-2's two-state Markov error model as used by seed ETOM §V-C:
//! the good state loses nothing, the bad state drops every packet, sojourns are exponential
//! with the configured means, and the chain starts good at `Time::ZERO`. The state evolves
//! in continuous time, lazily: on each query the chain is advanced to `now` by drawing the
//! successive sojourns (inverse CDF `-mean * ln(u)`, `u` uniform in (0, 1], rounded to the
//! nearest ns and at least 1 ns so a chain always advances). A packet arriving exactly at a
//! switching instant sees the new state.
//!
//! Invariants: the generator is consumed only by `drops` (one draw per Bernoulli query, two
//! per packet of the per-packet chain, one per state switch of the timed chain), so the same seed and the same arrival times give the
//! same losses. Queries must come with non-decreasing `now` (earlier times see the current
//! state).

use std::time::Duration;

use plait_proto::Time;
use rand_chacha::ChaCha8Rng;
use rand_core::Rng;

use plait_topology::LossModel;

use super::config::nanos;

/// 2^-53: turns 53 random bits into a uniform in [0, 1).
const F53: f64 = 1.0 / (1u64 << 53) as f64;

/// A uniform draw in [0, 1).
pub(crate) fn uniform01(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * F53
}

/// A uniform draw in (0, 1] (safe for `ln`).
fn uniform_open0(rng: &mut ChaCha8Rng) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 * F53
}

/// An exponential sojourn with mean `mean_ns`, in whole ns, at least 1.
fn exp_nanos(rng: &mut ChaCha8Rng, mean_ns: u64) -> u64 {
    let x = -(uniform_open0(rng).ln()) * mean_ns as f64;
    // `as` saturates; `round` keeps the mean unbiased to within 0.5 ns.
    (x.round() as u64).max(1)
}

/// The running state of a link's loss model.
#[derive(Clone, Debug)]
pub(crate) enum LossState {
    /// Never loses.
    Never,
    /// Always loses (a Gilbert-Elliott chain with a zero good sojourn).
    Always,
    /// Independent loss with probability `p` in [0, 1].
    Bernoulli { p: f64 },
    /// Two-state chain stepped per packet.
    PerPacket {
        p_good_to_bad: f64,
        p_bad_to_good: f64,
        loss_in_good: f64,
        loss_in_bad: f64,
        bad: bool,
    },
    /// Two-state Markov chain in continuous time.
    Markov {
        mean_good_ns: u64,
        mean_bad_ns: u64,
        bad: bool,
        /// When the current sojourn ends.
        next_switch: Time,
    },
}

impl LossState {
    /// The initial state of `model` (draws the first good sojourn for Gilbert-Elliott).
    pub(crate) fn new(model: LossModel, rng: &mut ChaCha8Rng) -> LossState {
        match model {
            LossModel::None => LossState::Never,
            LossModel::Bernoulli { p } => {
                if p.is_nan() || p <= 0.0 {
                    LossState::Never
                } else {
                    LossState::Bernoulli { p: p.min(1.0) }
                }
            }
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => LossState::PerPacket {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
                bad: false,
            },
            LossModel::GilbertElliottTimed {
                mean_good_s,
                mean_bad_s,
            } => {
                let secs = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO);
                let (g, b) = (nanos(secs(mean_good_s)), nanos(secs(mean_bad_s)));
                if b == 0 {
                    LossState::Never
                } else if g == 0 {
                    LossState::Always
                } else {
                    LossState::Markov {
                        mean_good_ns: g,
                        mean_bad_ns: b,
                        bad: false,
                        next_switch: Time::from_nanos(exp_nanos(rng, g)),
                    }
                }
            }
        }
    }

    /// Whether a packet arriving at `now` is lost.
    pub(crate) fn drops(&mut self, now: Time, rng: &mut ChaCha8Rng) -> bool {
        match self {
            LossState::Never => false,
            LossState::Always => true,
            LossState::Bernoulli { p } => uniform01(rng) < *p,
            LossState::PerPacket {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
                bad,
            } => {
                let loss_p = if *bad { *loss_in_bad } else { *loss_in_good };
                let lost = uniform01(rng) < loss_p;
                let move_p = if *bad { *p_bad_to_good } else { *p_good_to_bad };
                if uniform01(rng) < move_p {
                    *bad = !*bad;
                }
                lost
            }
            LossState::Markov {
                mean_good_ns,
                mean_bad_ns,
                bad,
                next_switch,
            } => {
                while *next_switch <= now {
                    *bad = !*bad;
                    let mean = if *bad { *mean_bad_ns } else { *mean_good_ns };
                    let next = next_switch.as_nanos().saturating_add(exp_nanos(rng, mean));
                    *next_switch = Time::from_nanos(next);
                    if next == u64::MAX {
                        break;
                    }
                }
                *bad
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand_core::SeedableRng;

    use super::*;

    fn fraction_lost(model: LossModel, seed: u64, n: u64, spacing: Duration) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut s = LossState::new(model, &mut rng);
        let step = nanos(spacing);
        let lost = (0..n)
            .filter(|i| s.drops(Time::from_nanos(i * step), &mut rng))
            .count();
        lost as f64 / n as f64
    }

    fn ge(good_ms: u64, bad_ms: u64) -> LossModel {
        LossModel::GilbertElliottTimed {
            mean_good_s: good_ms as f64 / 1000.0,
            mean_bad_s: bad_ms as f64 / 1000.0,
        }
    }

    #[test]
    fn bernoulli_long_run_fraction() {
        let f = fraction_lost(
            LossModel::Bernoulli { p: 0.1 },
            7,
            1_000_000,
            Duration::ZERO,
        );
        assert!((f - 0.1).abs() / 0.1 < 0.02, "fraction {f}");
    }

    #[test]
    fn per_packet_chain_loses_its_stationary_fraction_in_bursts() {
        // pi_bad = 0.01 / (0.01 + 0.09) = 0.1; bursts of mean 1 / 0.09 ≈ 11 packets.
        let model = LossModel::GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.09,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        };
        let f = fraction_lost(model, 11, 1_000_000, Duration::from_millis(1));
        assert!(
            (f - model.stationary_loss_rate()).abs() < 0.005,
            "fraction {f}"
        );
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut s = LossState::new(model, &mut rng);
        let (mut runs, mut lost, mut prev) = (0u32, 0u32, false);
        for i in 0..100_000u64 {
            let l = s.drops(Time::from_millis(i), &mut rng);
            lost += u32::from(l);
            runs += u32::from(l && !prev);
            prev = l;
        }
        let mean_burst = f64::from(lost) / f64::from(runs);
        assert!(
            (mean_burst - 1.0 / 0.09).abs() < 1.5,
            "mean burst {mean_burst}"
        );
    }

    #[test]
    fn gilbert_elliott_long_run_fraction_etom_parameters() {
        // Seed ETOM §V-C: mean good 1 s, mean bad 0.25 s -> 20 % lost. The estimate's noise
        // comes from the number of good/bad cycles (relative sd ~ 1.13 / sqrt(cycles)), so
        // sample 64 000 s of chain (51 200 cycles, relative sd ~0.5 %) every 64 ms.
        let f = fraction_lost(ge(1000, 250), 42, 1_000_000, Duration::from_millis(64));
        assert!((f - 0.2).abs() / 0.2 < 0.02, "fraction {f}");
    }

    #[test]
    fn gilbert_elliott_starts_good_and_loses_in_bursts() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut s = LossState::new(ge(1000, 250), &mut rng);
        let LossState::Markov { next_switch, .. } = s.clone() else {
            panic!("expected a Markov chain");
        };
        // Good until the first switch, bad from the switch instant on.
        assert!(!s.drops(Time::ZERO, &mut rng));
        assert!(!s.drops(
            next_switch.saturating_sub(Duration::from_nanos(1)),
            &mut rng
        ));
        assert!(s.drops(next_switch, &mut rng));
        // Losses come in runs: at 1 ms spacing a bad sojourn (mean 250 ms) spans many packets.
        let mut runs = 0u32;
        let mut lost = 0u32;
        let mut prev = false;
        for i in 0..200_000u64 {
            let d = s.drops(Time::from_millis(i), &mut rng);
            lost += u32::from(d);
            runs += u32::from(d && !prev);
            prev = d;
        }
        assert!(
            f64::from(lost) / f64::from(runs) > 100.0,
            "{lost} lost in {runs} runs"
        );
    }

    #[test]
    fn gilbert_elliott_degenerate_means() {
        assert_eq!(
            fraction_lost(ge(1000, 0), 1, 1000, Duration::from_millis(1)),
            0.0
        );
        assert_eq!(
            fraction_lost(ge(0, 10), 1, 1000, Duration::from_millis(1)),
            1.0
        );
        assert_eq!(
            fraction_lost(ge(0, 0), 1, 1000, Duration::from_millis(1)),
            0.0
        );
    }

    #[test]
    fn bernoulli_edges_and_determinism() {
        let one = LossModel::Bernoulli { p: 1.5 };
        assert_eq!(fraction_lost(one, 1, 1000, Duration::ZERO), 1.0);
        let none = LossModel::Bernoulli { p: f64::NAN };
        assert_eq!(fraction_lost(none, 1, 1000, Duration::ZERO), 0.0);
        let a = fraction_lost(ge(10, 5), 9, 100_000, Duration::from_micros(100));
        let b = fraction_lost(ge(10, 5), 9, 100_000, Duration::from_micros(100));
        assert_eq!(a, b);
    }
}
