//! The retransmission-timeout estimator of ns-2's `Agent/TCP` (tcp.cc `rtt_update`,
//! `rtt_timeout`, `rtt_backoff`), in integer clock ticks.
//!
//! What it owns: the smoothed RTT and its mean deviation, kept as ns-2 keeps them (BSD
//! fixed point: `srtt8` is 8 x srtt and `rttvar4` is 4 x rttvar, both in `tcpTick_` units),
//! the current RTO before backoff and the backoff multiplier.
//!
//! Behaviour (RFC 6298 / RFC 2988 on a coarse clock, as ns-2 with `rfc2988_ true`,
//! `timestamps_ false`, `T_SRTT_BITS 3`, `T_RTTVAR_BITS 2`, `rttvar_exp_ 2`):
//! - a sample counts the clock ticks crossed between send and ACK, at least 1 (BSD's
//!   `t_rtt`): `floor(ack / tick) - floor(send / tick)`;
//! - the first sample sets srtt = rtt and rttvar = rtt / 2; later ones use gains 1/8 and 1/4;
//! - RTO = (srtt + 4 rttvar) ticks, truncated to whole ticks; before any sample it is the
//!   configured initial RTO;
//! - the timer value is `max(RTO, min_rto) x backoff`, capped at `max_rto`, and never under
//!   two ticks;
//! - a backoff doubles the multiplier (while it is under 64 or the timer under `max_rto`);
//!   past 8 it folds srtt into rttvar and forgets srtt, so the next sample starts afresh.
//!
//! Deliberate difference: ns-2 offsets its tick clock by a random `boot_time_` in
//! [0, tcpTick_); here the tick boundaries sit on multiples of the tick from time zero, so
//! runs are deterministic. Karn's rule is the caller's job (the sender only times new data).

use std::time::Duration;

use plait_proto::Time;
use plait_proto::time::duration_nanos;

/// ns-2's tick-granular RTT estimator and RTO timer value.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    tick_ns: u64,
    min_rto: Duration,
    max_rto: Duration,
    /// 8 x smoothed RTT in ticks (0: no estimate).
    srtt8: i64,
    /// 4 x RTT mean deviation in ticks.
    rttvar4: i64,
    /// The unbacked-off RTO (ns-2's `t_rtxcur_`).
    rtxcur: Duration,
    /// The backoff multiplier (ns-2's `t_backoff_`), at least 1.
    backoff: u32,
    /// The last sample, in ticks.
    last_sample: i64,
}

impl RttEstimator {
    /// A fresh estimator: RTO = `initial_rto` until the first sample.
    pub fn new(
        initial_rto: Duration,
        min_rto: Duration,
        max_rto: Duration,
        tick: Duration,
    ) -> Self {
        RttEstimator {
            tick_ns: duration_nanos(tick).max(1),
            min_rto,
            max_rto,
            srtt8: 0,
            rttvar4: 0,
            rtxcur: initial_rto,
            backoff: 1,
            last_sample: 0,
        }
    }

    /// Feeds one RTT sample: a packet sent at `sent` was acknowledged at `now`.
    pub fn sample(&mut self, sent: Time, now: Time) {
        let ticks = (now.as_nanos() / self.tick_ns).saturating_sub(sent.as_nanos() / self.tick_ns);
        let rtt = i64::try_from(ticks).unwrap_or(i64::MAX / 64).max(1);
        self.last_sample = rtt;
        if self.srtt8 != 0 {
            let mut delta = rtt - (self.srtt8 >> 3);
            self.srtt8 += delta;
            if self.srtt8 <= 0 {
                self.srtt8 = 1;
            }
            delta = delta.abs() - (self.rttvar4 >> 2);
            self.rttvar4 += delta;
            if self.rttvar4 <= 0 {
                self.rttvar4 = 1;
            }
        } else {
            self.srtt8 = rtt << 3;
            self.rttvar4 = rtt << 1;
        }
        let rto_ticks = ((self.rttvar4 << 3) + self.srtt8) >> 3;
        self.rtxcur = self.ticks(rto_ticks);
    }

    /// The retransmission timer to arm now (ns-2 `rtt_timeout`, RFC 2988 variant).
    pub fn timeout(&self) -> Duration {
        let base = self.rtxcur.max(self.min_rto);
        let timeout = base.saturating_mul(self.backoff).min(self.max_rto);
        timeout.max(self.ticks(2))
    }

    /// Doubles the backoff after a retransmission timeout (ns-2 `rtt_backoff`).
    pub fn back_off(&mut self) {
        if self.backoff < 64 || self.timeout() < self.max_rto {
            self.backoff = self.backoff.saturating_mul(2);
        }
        if self.backoff > 8 {
            self.rttvar4 += self.srtt8 >> 3;
            self.srtt8 = 0;
        }
    }

    /// Ends the backoff (an ACK covered a packet sent since the last timeout).
    pub fn reset_backoff(&mut self) {
        self.backoff = 1;
    }

    /// The backoff multiplier (1 when not backed off).
    pub fn backoff(&self) -> u32 {
        self.backoff
    }

    /// The smoothed RTT, truncated to whole ticks as ns-2 reports it; `None` before any
    /// sample (or after a long backoff forgot it).
    pub fn srtt(&self) -> Option<Duration> {
        (self.srtt8 != 0).then(|| self.ticks(self.srtt8 >> 3))
    }

    /// The RTT mean deviation (quarter-tick resolution).
    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.tick_ns.saturating_mul(self.rttvar4.max(0) as u64) / 4)
    }

    /// The last RTT sample, in whole ticks (0 before any sample).
    pub fn last_sample(&self) -> Duration {
        self.ticks(self.last_sample)
    }

    /// The RTO before the minimum, the backoff and the cap (ns-2's `t_rtxcur_`).
    pub fn base_rto(&self) -> Duration {
        self.rtxcur
    }

    fn ticks(&self, n: i64) -> Duration {
        Duration::from_nanos(self.tick_ns.saturating_mul(n.max(0) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(10);

    fn est(min_rto_ms: u64) -> RttEstimator {
        RttEstimator::new(
            Duration::from_secs(6),
            Duration::from_millis(min_rto_ms),
            Duration::from_secs(64),
            TICK,
        )
    }

    #[test]
    fn initial_rto_until_first_sample() {
        let e = est(1000);
        assert_eq!(e.timeout(), Duration::from_secs(6));
        assert_eq!(e.srtt(), None);
    }

    #[test]
    fn samples_count_tick_boundaries() {
        let mut e = est(0);
        // 92 ms that cross ten tick boundaries count 10 ticks.
        e.sample(Time::from_millis(9), Time::from_millis(101));
        assert_eq!(e.last_sample(), Duration::from_millis(100));
        // First sample: srtt = rtt, rttvar = rtt / 2, RTO = srtt + 4 rttvar = 3 rtt.
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(e.rttvar(), Duration::from_millis(50));
        assert_eq!(e.timeout(), Duration::from_millis(300));
        // 5 ms inside one tick still counts one tick.
        let mut f = est(0);
        f.sample(Time::from_millis(1), Time::from_millis(6));
        assert_eq!(f.last_sample(), TICK);
    }

    #[test]
    fn smoothing_uses_rfc6298_gains_on_ticks() {
        let mut e = est(0);
        e.sample(Time::ZERO, Time::from_millis(100)); // 10 ticks
        e.sample(Time::ZERO, Time::from_millis(180)); // 18 ticks
        // srtt8 = 80 + 8 = 88 (11 ticks), rttvar4 = 20 + (8 - 5) = 23 (5.75 ticks).
        assert_eq!(e.srtt(), Some(Duration::from_millis(110)));
        assert_eq!(e.rttvar(), Duration::from_micros(57_500));
        // RTO = (23 * 8 + 88) >> 3 = 34 ticks.
        assert_eq!(e.base_rto(), Duration::from_millis(340));
    }

    #[test]
    fn min_rto_backoff_and_cap() {
        let mut e = est(1000);
        e.sample(Time::ZERO, Time::from_millis(20));
        assert_eq!(e.base_rto(), Duration::from_millis(60));
        assert_eq!(e.timeout(), Duration::from_secs(1));
        let mut seen = vec![e.timeout()];
        for _ in 0..8 {
            e.back_off();
            seen.push(e.timeout());
        }
        let secs: Vec<u64> = seen.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 64, 64]);
        // Past a backoff of 8 the estimate is forgotten; the next sample restarts it.
        assert_eq!(e.srtt(), None);
        e.reset_backoff();
        e.sample(Time::ZERO, Time::from_millis(50));
        assert_eq!(e.srtt(), Some(Duration::from_millis(50)));
    }

    #[test]
    fn never_below_two_ticks() {
        let mut e = est(0);
        e.sample(Time::ZERO, Time::from_micros(1));
        // One tick sample: RTO = 1 + 4 * 0.5 = 3 ticks; the floor is 2 ticks.
        assert_eq!(e.timeout(), Duration::from_millis(30));
        let tiny = RttEstimator::new(Duration::ZERO, Duration::ZERO, Duration::from_secs(1), TICK);
        assert_eq!(tiny.timeout(), Duration::from_millis(20));
    }
}
