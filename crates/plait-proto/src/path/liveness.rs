//! The path state machine: probing, active, degraded, down (docs/protocol.md#path-states).
//!
//! ```text
//!   add ──► Probing ──(probes_to_activate answers)──► Active ◄──► Degraded
//!              ▲                                        │            │
//!              └──(a probe answered)── Down ◄──(silence > down bound)┘
//! ```
//! - "Silence" is how long the oldest datagram sent since the last answer has waited for an
//!   acknowledgement. Beyond the down bound the path is down: seed PET-BMP §VII-C detects
//!   blackouts when "no SIG-ACKS arrive from MH in response to packets sent on it in a long
//!   while"; the bound here is 2·(SRTT + 4·RTTVAR) + max ack delay, clamped to
//!   [`LivenessConfig::down_min`, `LivenessConfig::down_max`].
//! - Degraded: silence beyond SRTT + 4·RTTVAR + max ack delay, or a smoothed loss rate above
//!   [`LivenessConfig::degraded_loss`]. Back to active when both clear (loss below half).
//! - While probing or down, probes go out in pairs every [`LivenessConfig::probe_interval`]
//!   (doubling after every [`PROBES_PER_BACKOFF`] unanswered, up to `probe_max_interval`);
//!   an active or degraded path idle for [`LivenessConfig::keepalive`] gets a single probe.

use std::time::Duration;

use crate::path::PathState;

/// Tunables of the path state machine.
#[derive(Clone, Debug, PartialEq)]
pub struct LivenessConfig {
    /// Smallest silence that can mark a path down.
    pub down_min: Duration,
    /// Largest silence before a path is marked down, whatever its RTT.
    pub down_max: Duration,
    /// Loss rate above which an active path is degraded.
    pub degraded_loss: f64,
    /// Answered probes that bring a probing path to active.
    pub probes_to_activate: u32,
    /// Interval between probe pairs on a probing or down path.
    pub probe_interval: Duration,
    /// Largest interval between probe pairs after backing off.
    pub probe_max_interval: Duration,
    /// An active path with nothing sent for this long gets a keepalive probe.
    pub keepalive: Duration,
    /// Fast failover (docs/protocol.md#path-states, "suspect"; off by default): a path
    /// silent beyond its degraded bound stands by while another answers and gets a probe
    /// each such bound, and with repair on, what a path had in flight when it went down
    /// is resent on the others at once. It cut the simulator's T4 stall from 1.6 s to
    /// 0.5 s, but cost stream mode under heavy random and bursty loss (ETOM Fig. 3 and 7)
    /// (a path silent for an RTO there is often only in a bad spell); see docs/protocol.md.
    pub fast_failover: bool,
}

impl Default for LivenessConfig {
    fn default() -> Self {
        LivenessConfig {
            down_min: Duration::from_millis(100),
            down_max: Duration::from_secs(2),
            degraded_loss: 0.1,
            probes_to_activate: 2,
            probe_interval: Duration::from_millis(100),
            probe_max_interval: Duration::from_secs(1),
            keepalive: Duration::from_secs(1),
            fast_failover: false,
        }
    }
}

/// Unanswered probes before the probe interval doubles: 50 pairs, 5 s at the default
/// 100 ms. Outages of a few seconds (a tunnel, a handover, a blackhole like T4's 5 s) are
/// the common case and end within one interval of the first probe after them; a path dead
/// for minutes is probed once a second.
pub const PROBES_PER_BACKOFF: u32 = 100;

impl LivenessConfig {
    /// Silence that marks a path down, given its RTT estimates.
    pub fn down_after(&self, rto: Option<Duration>, max_ack_delay: Duration) -> Duration {
        match rto {
            Some(rto) => (2 * rto + max_ack_delay).clamp(self.down_min, self.down_max),
            None => self.down_max,
        }
    }

    /// Silence that marks a path degraded, given its RTT estimates.
    pub fn degraded_after(&self, rto: Option<Duration>, max_ack_delay: Duration) -> Duration {
        match rto {
            Some(rto) => (rto + max_ack_delay).min(self.down_after(Some(rto), max_ack_delay)),
            None => self.down_max,
        }
    }

    /// Interval before the next probe pair after `unanswered` unanswered probes.
    pub fn probe_interval_after(&self, unanswered: u32) -> Duration {
        let doublings = (unanswered / PROBES_PER_BACKOFF).min(16);
        self.probe_interval
            .saturating_mul(2u32.pow(doublings))
            .min(self.probe_max_interval)
    }

    /// The state an active or degraded path should be in, given its silence and loss rate.
    pub fn judge_usable(
        &self,
        current: PathState,
        silence: Duration,
        loss_rate: f64,
        rto: Option<Duration>,
        max_ack_delay: Duration,
    ) -> PathState {
        if silence > self.down_after(rto, max_ack_delay) {
            PathState::Down
        } else if silence > self.degraded_after(rto, max_ack_delay)
            || loss_rate > self.degraded_loss
            || (current == PathState::Degraded && loss_rate > self.degraded_loss / 2.0)
        {
            PathState::Degraded
        } else {
            PathState::Active
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn bounds_clamp() {
        let c = LivenessConfig::default();
        assert_eq!(c.down_after(Some(10 * MS), 5 * MS), 100 * MS, "floor");
        assert_eq!(c.down_after(Some(300 * MS), 5 * MS), 605 * MS);
        assert_eq!(c.down_after(Some(5000 * MS), 5 * MS), 2000 * MS, "cap");
        assert_eq!(c.down_after(None, 5 * MS), 2000 * MS);
    }

    #[test]
    fn judge_transitions_with_hysteresis() {
        let c = LivenessConfig::default();
        let rto = Some(100 * MS);
        let j = |cur, silence, loss| c.judge_usable(cur, silence, loss, rto, 5 * MS);
        assert_eq!(j(PathState::Active, 10 * MS, 0.0), PathState::Active);
        assert_eq!(j(PathState::Active, 150 * MS, 0.0), PathState::Degraded);
        assert_eq!(j(PathState::Active, 300 * MS, 0.0), PathState::Down);
        assert_eq!(
            j(PathState::Active, Duration::ZERO, 0.2),
            PathState::Degraded
        );
        assert_eq!(
            j(PathState::Degraded, Duration::ZERO, 0.07),
            PathState::Degraded,
            "hysteresis"
        );
        assert_eq!(
            j(PathState::Degraded, Duration::ZERO, 0.04),
            PathState::Active
        );
    }

    #[test]
    fn probe_backoff() {
        let c = LivenessConfig::default();
        assert_eq!(c.probe_interval_after(0), 100 * MS);
        assert_eq!(c.probe_interval_after(98), 100 * MS, "5 s at 100 ms");
        assert_eq!(c.probe_interval_after(100), 200 * MS);
        assert_eq!(c.probe_interval_after(1000), 1000 * MS);
    }
}
