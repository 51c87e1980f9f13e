//! Round-trip time estimation per RFC 6298 (SRTT/RTTVAR with gains 1/8 and 1/4), plus a
//! windowed minimum (the queue-free RTT).
//!
//! Samples come from ACK frames: the time since the largest newly acknowledged datagram was
//! sent, less the peer's reported ack delay when that leaves at least the minimum RTT
//! (as QUIC does, RFC 9002 §5.3) (docs/protocol.md#ack-frame); and from PROBE_ACKs.
//!
//! Invariant: the minimum is kept per [`Return`], the way the answer came back, and
//! [`RttEstimator::min_rtt`] is that of the way the latest ACK frame came (the other's
//! only while that one has none). A path's ACKs come back over the fastest path in packet
//! mode and over the path itself once the session carries a stream
//! (docs/protocol.md#ack-policy): one minimum over both would keep the shortcut's shorter
//! round trip (a 100 ms path read 60 on the test bed, the ACKs of its first probes having
//! come back over a 20 ms path) for the whole window after the switch, and every queue
//! measured against it would include the difference.

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

/// RFC 6298 estimator; `None` fields until the first sample.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Option<Duration>,
    /// Windowed minima, by [`Return::index`].
    min: [WindowedMin<Duration>; 2],
    /// The way the latest ACK frame came back.
    acks_return: Return,
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
            acks_return: Return::OwnPath,
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
        self.acks_return = returned;
        self.add(now, rtt, ack_delay, returned);
    }

    /// Feeds one sample from a PROBE_ACK (an immediate answer over the probed path): it
    /// counts for the smoothed RTT and the own path's minimum, and does not change which
    /// minimum [`Self::min_rtt`] reports.
    pub fn on_probe_sample(&mut self, now: Time, rtt: Duration) {
        self.add(now, rtt, Duration::ZERO, Return::OwnPath);
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

    /// Smallest sample in the recent window of those that came back the way the latest
    /// ACK frame did (of the others while there is none).
    pub fn min_rtt(&self) -> Option<Duration> {
        let (this, other) = match self.acks_return {
            Return::OwnPath => (Return::OwnPath, Return::OtherPath),
            Return::OtherPath => (Return::OtherPath, Return::OwnPath),
        };
        self.min[this.index()]
            .get()
            .or_else(|| self.min[other.index()].get())
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
    fn the_minimum_is_that_of_the_way_the_acks_come_back() {
        let mut r = RttEstimator::default();
        // Packet mode: a 100 ms path's ACKs come back over a 20 ms one (60 ms); its probes'
        // answers over itself.
        r.on_sample(Time::ZERO, 60 * MS, Duration::ZERO, Return::OtherPath);
        r.on_probe_sample(Time::from_millis(10), 100 * MS);
        assert_eq!(
            r.min_rtt(),
            Some(60 * MS),
            "a probe does not switch the minimum"
        );
        // A stream: its ACKs come back over itself.
        r.on_sample(
            Time::from_millis(20),
            104 * MS,
            Duration::ZERO,
            Return::OwnPath,
        );
        assert_eq!(r.min_rtt(), Some(100 * MS));
        r.on_sample(
            Time::from_millis(30),
            61 * MS,
            Duration::ZERO,
            Return::OtherPath,
        );
        assert_eq!(r.min_rtt(), Some(60 * MS));
        // Only own-path samples so far: the other way has none, so the own one is reported.
        let mut r = RttEstimator::default();
        r.on_probe_sample(Time::ZERO, 100 * MS);
        r.on_sample(Time::ZERO, 70 * MS, Duration::ZERO, Return::OtherPath);
        assert_eq!(r.min_rtt(), Some(70 * MS));
        let mut r = RttEstimator::default();
        r.on_probe_sample(Time::ZERO, 100 * MS);
        assert_eq!(r.min_rtt(), Some(100 * MS));
    }
}
