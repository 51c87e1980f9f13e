//! Paced release for the reorder buffer (criterion 5 of seed PET-BMP §IV, "avoid burstiness";
//! §V-B paces the TCP receiver's ACKs, plait paces the release into the TUN device instead,
//! the other option the seed names).
//!
//! Owns [`ArrivalRate`] (the measured arrival rate of inserted packets) and [`Pacer`] (a
//! token bucket in packets, written as GCRA: a theoretical arrival time instead of a token
//! count, so every quantity is an integer number of nanoseconds and exact).
//!
//! Rate measurement: arrivals are grouped into windows of at least [`RATE_WINDOW`] (so a
//! driver that stamps a whole receive batch with one time does not read as infinite rate);
//! each window gives one inter-arrival sample `elapsed / arrivals`. A sample shorter than the
//! estimate replaces it at once (speed-ups are followed immediately); a longer one is
//! smoothed by an EWMA with gain 1/8 and clamped to 4× the current estimate (one idle pause
//! only slows the estimate by 3/8, a real slowdown is still followed within a few windows).
//! A gap longer
//! than the idle threshold (`bmp` uses `max(max_hold, 10 ms)`) restarts the window without a
//! sample.
//!
//! Invariants:
//! - unknown rate (fewer than one complete window), `burst` 0 treated as 1, and a gain that
//!   is not a positive finite number all mean no pacing: every release may go at once;
//! - [`Pacer::may_release`]`(t)` is true exactly when `t >= `[`Pacer::ready_at`]`()`, so a
//!   caller that waits until `ready_at` always makes progress (no busy loop);
//! - with arrivals at a steady interval `I` and releases right after them, the token interval
//!   `I / gain` (gain > 1) is shorter than `I`: pacing never delays such a flow.

use std::time::Duration;

use super::ReleasePacing;
use crate::time::{Time, duration_nanos};

/// Shortest window an inter-arrival sample is measured over.
pub(super) const RATE_WINDOW: Duration = Duration::from_millis(1);
const RATE_WINDOW_NS: u64 = 1_000_000;

/// Measured inter-arrival time of inserted packets.
#[derive(Clone, Copy, Debug)]
pub(super) struct ArrivalRate {
    /// Start of the current window (the arrival that closed the previous one).
    window_start: Option<Time>,
    /// Arrivals since `window_start`.
    count: u64,
    /// Smoothed inter-arrival time, nanoseconds (0: unknown).
    interval_ns: u64,
    /// Gaps longer than this are idle periods, not samples.
    idle_ns: u64,
}

impl ArrivalRate {
    /// A fresh estimator treating gaps longer than `idle` as idle periods.
    pub fn new(idle: Duration) -> Self {
        ArrivalRate {
            window_start: None,
            count: 0,
            interval_ns: 0,
            idle_ns: duration_nanos(idle).max(RATE_WINDOW_NS),
        }
    }

    /// Records one arrival. Returns whether the estimate changed (at most once per window).
    pub fn on_arrival(&mut self, now: Time) -> bool {
        let Some(start) = self.window_start else {
            self.window_start = Some(now);
            return false;
        };
        self.count += 1;
        let elapsed = now.as_nanos().saturating_sub(start.as_nanos());
        if elapsed < RATE_WINDOW_NS {
            return false;
        }
        if elapsed > self.idle_ns {
            self.window_start = Some(now);
            self.count = 0;
            return false;
        }
        let sample = elapsed / self.count;
        if self.interval_ns == 0 || sample < self.interval_ns {
            // A speed-up is followed at once: releasing too fast only forgoes some
            // smoothing, releasing too slowly stalls the end hosts' TCP (measured on the
            // tunnel: a transfer after an idle spell crawled for a second while the
            // estimate caught up, since the slow release held back the ACKs that would
            // have sped the arrivals up).
            self.interval_ns = sample.max(1);
        } else {
            let sample = sample.min(self.interval_ns.saturating_mul(4)) as i128;
            let est = self.interval_ns as i128;
            self.interval_ns = (est + (sample - est) / 8).max(1) as u64;
        }
        self.window_start = Some(now);
        self.count = 0;
        true
    }

    /// The smoothed inter-arrival time, if measured.
    pub fn interval(&self) -> Option<Duration> {
        (self.interval_ns > 0).then(|| Duration::from_nanos(self.interval_ns))
    }
}

/// Token bucket in packets (GCRA form): `burst` may leave back to back, then one per token
/// interval (`arrival interval / gain`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Pacer {
    burst: u64,
    gain: f64,
    /// Longest token interval (nanoseconds).
    max_interval_ns: u64,
    /// Nanoseconds per token (0: no pacing).
    interval_ns: u64,
    /// Theoretical arrival time: a release conforms at `t` iff `t >= tat - (burst - 1) × T`.
    tat: Time,
}

impl Pacer {
    /// A pacer for `pacing`, or `None` if it disables pacing. Token intervals are capped at
    /// `max_interval` (the buffer's `max_hold`, so one token never takes longer).
    pub fn new(pacing: Option<ReleasePacing>, max_interval: Duration) -> Option<Pacer> {
        let p = pacing?;
        (p.gain.is_finite() && p.gain > 0.0).then(|| Pacer {
            burst: u64::from(p.burst.max(1)),
            gain: p.gain,
            max_interval_ns: duration_nanos(max_interval).max(1),
            interval_ns: 0,
            tat: Time::ZERO,
        })
    }

    /// Sets the refill rate from the measured arrival interval (`None`: no pacing).
    pub fn set_arrival_interval(&mut self, arrival: Option<Duration>) {
        self.interval_ns = arrival.map_or(0, |i| {
            let t = (duration_nanos(i) as f64 / self.gain) as u64;
            t.min(self.max_interval_ns)
        });
    }

    /// The token interval in use (`None`: not pacing).
    #[cfg(test)]
    pub fn token_interval(&self) -> Option<Duration> {
        (self.interval_ns > 0).then(|| Duration::from_nanos(self.interval_ns))
    }

    /// The earliest time a token is available.
    pub fn ready_at(&self) -> Time {
        if self.interval_ns == 0 {
            return Time::ZERO;
        }
        let tau = (self.burst - 1).saturating_mul(self.interval_ns);
        Time::from_nanos(self.tat.as_nanos().saturating_sub(tau))
    }

    /// Whether a paced release may happen at `now`.
    pub fn may_release(&self, now: Time) -> bool {
        now >= self.ready_at()
    }

    /// Takes one token for a release at `now` (which [`Pacer::may_release`] allowed).
    pub fn on_release(&mut self, now: Time) {
        if self.interval_ns > 0 {
            self.tat = Time::from_nanos(
                self.tat
                    .max(now)
                    .as_nanos()
                    .saturating_add(self.interval_ns),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACING: ReleasePacing = ReleasePacing {
        burst: 4,
        gain: 2.0,
    };

    #[test]
    fn steady_arrivals_measure_their_interval() {
        let mut r = ArrivalRate::new(Duration::from_millis(500));
        assert_eq!(r.interval(), None);
        for k in 0..50 {
            r.on_arrival(Time::from_millis(k));
        }
        assert_eq!(r.interval(), Some(Duration::from_millis(1)));
    }

    #[test]
    fn batched_arrivals_average_over_the_window() {
        let mut r = ArrivalRate::new(Duration::from_millis(500));
        // Batches of 10 stamped with one time, every 2 ms: 0.2 ms per packet.
        for b in 0..40 {
            for _ in 0..10 {
                r.on_arrival(Time::from_millis(2 * b));
            }
        }
        let i = r.interval().expect("measured");
        assert!(
            i >= Duration::from_micros(190) && i <= Duration::from_micros(210),
            "{i:?}"
        );
    }

    #[test]
    fn idle_gap_is_not_a_sample_and_a_pause_is_damped() {
        let mut r = ArrivalRate::new(Duration::from_millis(500));
        for k in 0..50 {
            r.on_arrival(Time::from_millis(k));
        }
        r.on_arrival(Time::from_millis(49 + 600)); // idle: restarts the window
        assert_eq!(r.interval(), Some(Duration::from_millis(1)));
        r.on_arrival(Time::from_millis(649 + 300)); // a pause: clamped to 4 ms
        assert_eq!(r.interval(), Some(Duration::from_micros(1_375)));
    }

    #[test]
    fn bucket_allows_burst_then_paces() {
        let mut p = Pacer::new(Some(PACING), Duration::from_millis(500)).expect("pacing");
        let t0 = Time::from_millis(100);
        assert!(p.may_release(t0), "unknown rate: no pacing");
        p.set_arrival_interval(Some(Duration::from_millis(1)));
        assert_eq!(p.token_interval(), Some(Duration::from_micros(500)));
        for _ in 0..4 {
            assert!(p.may_release(t0));
            p.on_release(t0);
        }
        assert!(!p.may_release(t0));
        let t1 = t0 + Duration::from_micros(500);
        assert_eq!(p.ready_at(), t1);
        assert!(p.may_release(t1));
        p.on_release(t1);
        assert_eq!(p.ready_at(), t1 + Duration::from_micros(500));
    }

    #[test]
    fn steady_flow_is_never_delayed() {
        let mut p = Pacer::new(
            Some(ReleasePacing {
                burst: 1,
                gain: 2.0,
            }),
            Duration::from_secs(1),
        )
        .expect("pacing");
        p.set_arrival_interval(Some(Duration::from_millis(1)));
        for k in 0..100 {
            let now = Time::from_millis(k);
            assert!(p.may_release(now));
            p.on_release(now);
        }
    }

    #[test]
    fn disabled_settings() {
        assert!(Pacer::new(None, Duration::from_secs(1)).is_none());
        let bad = ReleasePacing {
            burst: 4,
            gain: f64::NAN,
        };
        assert!(Pacer::new(Some(bad), Duration::from_secs(1)).is_none());
        let zero = ReleasePacing {
            burst: 4,
            gain: 0.0,
        };
        assert!(Pacer::new(Some(zero), Duration::from_secs(1)).is_none());
    }

    #[test]
    fn token_interval_is_capped() {
        let slow = ReleasePacing {
            burst: 1,
            gain: 0.001,
        };
        let mut p = Pacer::new(Some(slow), Duration::from_millis(50)).expect("pacing");
        p.set_arrival_interval(Some(Duration::from_millis(10)));
        assert_eq!(p.token_interval(), Some(Duration::from_millis(50)));
    }
}
