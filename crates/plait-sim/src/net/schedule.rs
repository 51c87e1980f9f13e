//! Rate changes over time: a list of `(time, rate)` steps the simulator applies with
//! `Link::set_rate`, and the generator of seed ETOM §V-C's bandwidth fluctuation.
//!
//! Owns: [`RateSchedule`]. Invariants: steps are sorted by time (stable: of two steps at
//! the same time the later one listed wins); a generated schedule depends on its arguments
//! and seed only (its own `ChaCha8Rng`).

use std::time::Duration;

use plait_proto::Time;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

use super::config::nanos;
use super::loss::uniform01;

/// Seed ETOM §V-C / Fig. 6: lowest bandwidth ratio ("randomly selected between 0.2 and 1").
pub const ETOM_RATIO_LO: f64 = 0.2;
/// Seed ETOM §V-C / Fig. 6: highest bandwidth ratio.
pub const ETOM_RATIO_HI: f64 = 1.0;

/// Rate steps: from each step's time on, the link's rate is the step's rate (bit/s).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RateSchedule {
    steps: Vec<(Time, f64)>,
}

impl RateSchedule {
    /// A schedule of these steps (sorted by time, stably).
    pub fn new(mut steps: Vec<(Time, f64)>) -> RateSchedule {
        steps.sort_by_key(|&(t, _)| t);
        RateSchedule { steps }
    }

    /// Seed ETOM §V-C / Fig. 6: "we periodically change the ratio of bandwidth between two
    /// paths (randomly selected between 0.2 and 1)". Steps at `0, period, 2 period, ...`
    /// before `duration` (at least the one at zero), each setting the rate to `base_bps` times a ratio drawn uniformly
    /// from `[ratio_lo, ratio_hi)` (swapped if given reversed). A zero `period` gives one step
    /// at time zero. Pass [`ETOM_RATIO_LO`] and [`ETOM_RATIO_HI`] for the paper's range.
    pub fn etom_fluctuation(
        base_bps: f64,
        period: Duration,
        ratio_lo: f64,
        ratio_hi: f64,
        duration: Duration,
        seed: u64,
    ) -> RateSchedule {
        let (lo, hi) = if ratio_lo <= ratio_hi {
            (ratio_lo, ratio_hi)
        } else {
            (ratio_hi, ratio_lo)
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (period, end) = (nanos(period), nanos(duration));
        let mut steps = Vec::new();
        let mut t = 0u64;
        loop {
            let ratio = lo + (hi - lo) * uniform01(&mut rng);
            steps.push((Time::from_nanos(t), base_bps * ratio));
            t = match t.checked_add(period) {
                Some(next) if period > 0 && next < end => next,
                _ => break,
            };
        }
        RateSchedule { steps }
    }

    /// The steps, sorted by time.
    pub fn steps(&self) -> &[(Time, f64)] {
        &self.steps
    }

    /// The rate in force at `t` (the last step at or before `t`), if any step has begun.
    pub fn rate_at(&self, t: Time) -> Option<f64> {
        let n = self.steps.partition_point(|&(s, _)| s <= t);
        n.checked_sub(1).map(|i| self.steps[i].1)
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether there are no steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etom(seed: u64) -> RateSchedule {
        RateSchedule::etom_fluctuation(
            10e6,
            Duration::from_secs(5),
            ETOM_RATIO_LO,
            ETOM_RATIO_HI,
            Duration::from_secs(100),
            seed,
        )
    }

    #[test]
    fn etom_steps_every_period_within_range() {
        let s = etom(1);
        assert_eq!(s.len(), 20);
        for (i, &(t, r)) in s.steps().iter().enumerate() {
            assert_eq!(t, Time::from_millis(5_000 * i as u64));
            assert!((2e6..=10e6).contains(&r), "rate {r}");
        }
        // The ratios spread over the range (20 draws: not all in one half).
        let low = s.steps().iter().filter(|&&(_, r)| r < 6e6).count();
        assert!((3..=17).contains(&low), "{low} of 20 below the midpoint");
    }

    #[test]
    fn etom_is_deterministic_per_seed() {
        assert_eq!(etom(7), etom(7));
        assert_ne!(etom(7), etom(8));
    }

    #[test]
    fn etom_edge_cases() {
        let zero = RateSchedule::etom_fluctuation(
            1e6,
            Duration::ZERO,
            0.2,
            1.0,
            Duration::from_secs(9),
            1,
        );
        assert_eq!(zero.len(), 1);
        let fixed = RateSchedule::etom_fluctuation(
            1e6,
            Duration::from_secs(1),
            0.5,
            0.5,
            Duration::from_secs(3),
            1,
        );
        assert_eq!(
            fixed.steps(),
            [
                (Time::ZERO, 5e5),
                (Time::from_millis(1000), 5e5),
                (Time::from_millis(2000), 5e5)
            ]
        );
        let reversed = RateSchedule::etom_fluctuation(
            1e6,
            Duration::from_secs(1),
            1.0,
            0.2,
            Duration::from_secs(50),
            1,
        );
        assert!(
            reversed
                .steps()
                .iter()
                .all(|&(_, r)| (2e5..=1e6).contains(&r))
        );
    }

    #[test]
    fn rate_at_uses_the_last_step_begun() {
        let s = RateSchedule::new(vec![
            (Time::from_millis(20), 3.0),
            (Time::from_millis(10), 1.0),
            (Time::from_millis(10), 2.0),
        ]);
        assert_eq!(s.rate_at(Time::from_millis(5)), None);
        assert_eq!(s.rate_at(Time::from_millis(10)), Some(2.0));
        assert_eq!(s.rate_at(Time::from_millis(19)), Some(2.0));
        assert_eq!(s.rate_at(Time::MAX), Some(3.0));
    }
}
