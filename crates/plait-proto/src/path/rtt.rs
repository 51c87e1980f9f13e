//! Round-trip time estimation per RFC 6298 (SRTT/RTTVAR with gains 1/8 and 1/4), plus a
//! windowed minimum (the queue-free RTT).
//!
//! Samples come from ACK frames: the time since the largest newly acknowledged datagram was
//! sent, less the peer's reported ack delay when that leaves at least the minimum RTT
//! (as QUIC does, RFC 9002 §5.3) (docs/protocol.md#ack-frame); and from PROBE_ACKs.
//!
//! Invariant: the minimum is kept per [`Return`], the way the answer came back, and
//! [`RttEstimator::min_rtt`] follows the session's [`Feedback`]: the smaller of the two
//! while the peer may return a path's ACKs over any path (packet mode: batched onto whatever
//! datagram goes next, the fastest path's shortcut included), the own path's once it
//! returns each path's ACKs over that path (a session that carried a stream,
//! docs/protocol.md#ack-policy), the other's only while the own path has none. One minimum
//! over both would keep the shortcut's shorter round trip after the switch (a 100 ms path
//! read 60 on the test bed all session long, the ACKs of its first probes having come back
//! over a 20 ms path), and every window sized by it would be that much too small.

use std::time::Duration;

use crate::path::minmax::WindowedMin;
use crate::time::Time;

/// Window of the minimum RTT: path delays vary over tens of minutes (seed PET-BMP §V-A), so
/// a long window; the windowed-min filter still follows a route change within it.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(300);

/// Which way the answer that gave an RTT sample came back (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Return {
    /// Over the sampled path itself (every PROBE_ACK; every ACK in stream mode).
    OwnPath,
    /// Over another path of the session (packet mode's ACKs, docs/protocol.md#ack-policy).
    OtherPath,
}

impl Return {
    fn index(self) -> usize {
        match self {
            Return::OwnPath => 0,
            Return::OtherPath => 1,
        }
    }
}

/// How the peer returns this path's ACKs (docs/protocol.md#ack-policy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Feedback {
    /// Over any path (packet mode).
    #[default]
    AnyPath,
    /// Over the path itself (a session that carried a stream).
    OwnPath,
}

/// RFC 6298 estimator; `None` fields until the first sample.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Option<Duration>,
    /// Windowed minima, by [`Return::index`].
    min: [WindowedMin<Duration>; 2],
    feedback: Feedback,
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            latest: None,
            min: [
                WindowedMin::new(MIN_RTT_WINDOW),
                WindowedMin::new(MIN_RTT_WINDOW),
            ],
            feedback: Feedback::AnyPath,
        }
    }
}

impl RttEstimator {
    /// Feeds one sample taken at `now`: `rtt` measured, `ack_delay` reported by the peer
    /// (how long it held the ACK for the sampled datagram). The peer is authenticated and
    /// the delay refers to exactly the sampled datagram, so the network RTT is
    /// `rtt - ack_delay`; a reported delay longer than the sample is ignored as implausible.
    /// (RFC 9002 keeps min RTT unadjusted to guard against peers that misreport; plait's
    /// ACK delay reaches 25 ms, which would hide a path's queue-free RTT.) The ACK frame
    /// came back the way `returned` says.
    pub fn on_sample(&mut self, now: Time, rtt: Duration, ack_delay: Duration, returned: Return) {
        self.add(now, rtt, ack_delay, returned);
    }

    /// Feeds one sample from a PROBE_ACK (an immediate answer over the probed path).
    pub fn on_probe_sample(&mut self, now: Time, rtt: Duration) {
        self.add(now, rtt, Duration::ZERO, Return::OwnPath);
    }

    /// How the peer returns this path's ACKs from now on (chooses what
    /// [`Self::min_rtt`] reports; the samples kept are the same).
    pub fn set_feedback(&mut self, feedback: Feedback) {
        self.feedback = feedback;
    }

    fn add(&mut self, now: Time, rtt: Duration, ack_delay: Duration, returned: Return) {
        let adjusted = if ack_delay < rtt {
            rtt - ack_delay
        } else {
            rtt
        };
        self.min[returned.index()].update(now, adjusted);
        self.latest = Some(adjusted);
        match self.srtt {
            None => {
                // RFC 6298 §2.2
                self.srtt = Some(adjusted);
                self.rttvar = adjusted / 2;
            }
            Some(srtt) => {
                // RFC 6298 §2.3: RTTVAR first, with the old SRTT.
                let err = srtt.abs_diff(adjusted);
                self.rttvar = self.rttvar * 3 / 4 + err / 4;
                self.srtt = Some(srtt * 7 / 8 + adjusted / 8);
            }
        }
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation (`None` before the first sample).
    pub fn rttvar(&self) -> Option<Duration> {
        self.srtt.map(|_| self.rttvar)
    }

    /// Latest adjusted sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// Smallest sample in the recent window: of all of them under [`Feedback::AnyPath`],
    /// of those that came back over the path itself under [`Feedback::OwnPath`] (of the
    /// others while there is none).
    pub fn min_rtt(&self) -> Option<Duration> {
        let own = self.min[Return::OwnPath.index()].get();
        let other = self.min[Return::OtherPath.index()].get();
        match self.feedback {
            Feedback::AnyPath => own.into_iter().chain(other).min(),
            Feedback::OwnPath => own.or(other),
        }
    }

    /// `srtt + 4·rttvar` (RFC 6298's RTO without its 1 s floor; callers clamp).
    pub fn rto(&self) -> Option<Duration> {
        self.srtt.map(|s| s + 4 * self.rttvar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn first_sample_then_smoothing() {
        let mut r = RttEstimator::default();
        r.on_sample(Time::ZERO, 100 * MS, Duration::ZERO, Return::OwnPath);
        assert_eq!(r.srtt(), Some(100 * MS));
        assert_eq!(r.rttvar(), Some(50 * MS));
        r.on_sample(Time::ZERO, 60 * MS, Duration::ZERO, Return::OwnPath);
        // rttvar = 3/4·50 + 1/4·40 = 47.5; srtt = 7/8·100 + 1/8·60 = 95
        assert_eq!(r.rttvar(), Some(Duration::from_micros(47_500)));
        assert_eq!(r.srtt(), Some(95 * MS));
        assert_eq!(r.min_rtt(), Some(60 * MS));
    }

    #[test]
    fn converges_to_constant() {
        let mut r = RttEstimator::default();
        for _ in 0..200 {
            r.on_sample(Time::ZERO, 40 * MS, Duration::ZERO, Return::OwnPath);
        }
        assert!(r.srtt().unwrap().abs_diff(40 * MS) < Duration::from_micros(10));
        assert!(r.rttvar().unwrap() < Duration::from_micros(10));
    }

    #[test]
    fn ack_delay_subtracted_from_samples_and_min() {
        let mut r = RttEstimator::default();
        r.on_sample(Time::ZERO, 50 * MS, Duration::ZERO, Return::OwnPath);
        r.on_sample(Time::ZERO, 60 * MS, 5 * MS, Return::OwnPath);
        assert_eq!(r.latest(), Some(55 * MS));
        r.on_sample(Time::ZERO, 65 * MS, 25 * MS, Return::OwnPath);
        assert_eq!(r.latest(), Some(40 * MS));
        assert_eq!(
            r.min_rtt(),
            Some(40 * MS),
            "the held ACK does not hide the path's RTT"
        );
        r.on_sample(Time::ZERO, 10 * MS, 30 * MS, Return::OwnPath);
        assert_eq!(r.latest(), Some(10 * MS), "an implausible delay is ignored");
    }

    #[test]
    fn min_expires_after_window() {
        let mut r = RttEstimator::default();
        r.on_sample(Time::ZERO, 10 * MS, Duration::ZERO, Return::OwnPath);
        r.on_sample(
            Time::from_millis(1000),
            30 * MS,
            Duration::ZERO,
            Return::OwnPath,
        );
        assert_eq!(r.min_rtt(), Some(10 * MS));
        r.on_sample(
            Time::ZERO + MIN_RTT_WINDOW + 5 * MS,
            30 * MS,
            Duration::ZERO,
            Return::OwnPath,
        );
        assert_eq!(r.min_rtt(), Some(30 * MS));
    }

    #[test]
    fn the_minimum_follows_how_the_peer_returns_acks() {
        let mut r = RttEstimator::default();
        // Packet mode: a 100 ms path's ACKs come back over a 20 ms path (60 ms) or over
        // itself, batched onto whatever goes next; its probes' answers over itself.
        r.on_sample(Time::ZERO, 60 * MS, Duration::ZERO, Return::OtherPath);
        r.on_probe_sample(Time::from_millis(10), 100 * MS);
        r.on_sample(
            Time::from_millis(20),
            102 * MS,
            Duration::ZERO,
            Return::OwnPath,
        );
        assert_eq!(r.min_rtt(), Some(60 * MS), "the smaller of the two ways");
        // The session carried a stream: its ACKs now come back over the path itself.
        r.set_feedback(Feedback::OwnPath);
        assert_eq!(r.min_rtt(), Some(100 * MS));
        // A late shortcut sample changes nothing.
        r.on_sample(
            Time::from_millis(30),
            61 * MS,
            Duration::ZERO,
            Return::OtherPath,
        );
        assert_eq!(r.min_rtt(), Some(100 * MS));
        // No own-path sample yet: the other way's minimum stands in.
        let mut r = RttEstimator::default();
        r.set_feedback(Feedback::OwnPath);
        assert_eq!(r.min_rtt(), None);
        r.on_sample(Time::ZERO, 70 * MS, Duration::ZERO, Return::OtherPath);
        assert_eq!(r.min_rtt(), Some(70 * MS));
        r.on_probe_sample(Time::ZERO, 100 * MS);
        assert_eq!(r.min_rtt(), Some(100 * MS));
    }
}
