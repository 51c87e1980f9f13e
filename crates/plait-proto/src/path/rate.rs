//! Path rate estimators: packet-pair dispersion (seed PET-BMP §V-A) and delivery rate
//! (Westwood+, as seed ETOM §IV-C uses for its bandwidth estimate).
//!
//! Rates are in bytes of plait datagram per second (the unit schedulers use for `L/B`).

use std::time::Duration;

use crate::time::Time;

/// PET-BMP's weight on the new sample ("a large weight (0.8) for the current estimate").
pub const PAIR_EWMA_NEW: f64 = 0.8;

/// Receive gaps below this are taken as timestamp noise (both datagrams read in one batch),
/// not as a rate sample.
const MIN_DISPERSION: Duration = Duration::from_micros(20);

/// Bandwidth from the dispersion of two datagrams that left back to back and queued back to
/// back at the bottleneck: `B = L2 / (recv2 − recv1)`.
///
/// A pair is valid only if the second datagram was sent before the first could have cleared
/// the bottleneck, i.e. the sender's gap is at most half the receiver's gap: otherwise the
/// receiver's gap measures the sender's spacing, not the bottleneck (seed PET-BMP §V-A:
/// "packets … will be buffered at BS … and still give a valid estimate"). That test is
/// sound only if the first datagram is not much smaller than the second: behind a tiny
/// first datagram (a probe, an ACK) the bottleneck idles, the receive gap becomes the send
/// gap plus the second's serialisation, and the test passes with a rate far too low. So the
/// first must be at least half the second's size.
#[derive(Clone, Debug, Default)]
pub struct PairRateEstimator {
    rate: Option<f64>,
    samples: u64,
}

impl PairRateEstimator {
    /// Offers a pair: send gap, receive gap (dispersion) and both datagrams' sizes.
    /// Returns the sample if the pair was valid.
    pub fn on_pair(
        &mut self,
        send_gap: Duration,
        dispersion: Duration,
        len1: usize,
        len2: usize,
    ) -> Option<f64> {
        let queued_behind =
            send_gap.saturating_mul(2) <= dispersion && len1.saturating_mul(2) >= len2;
        if dispersion < MIN_DISPERSION || !queued_behind {
            return None;
        }
        let sample = len2 as f64 / dispersion.as_secs_f64();
        self.rate = Some(match self.rate {
            None => sample,
            Some(old) => PAIR_EWMA_NEW * sample + (1.0 - PAIR_EWMA_NEW) * old,
        });
        self.samples += 1;
        Some(sample)
    }

    /// Current estimate, bytes per second.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Valid pairs seen.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

/// Westwood+ delivery rate: bytes acknowledged over each interval of at least one smoothed
/// RTT, low-pass filtered with gain 1/8 (Westwood+ takes one sample per RTT to be robust to
/// ACK compression). An interval with fewer than [`MIN_PACKETS`] acknowledged datagrams is
/// application-limited (keepalives on an idle path) and gives no sample: it would measure
/// the traffic offered, not the path.
#[derive(Clone, Debug, Default)]
pub struct DeliveryRateEstimator {
    rate: Option<f64>,
    interval_start: Option<Time>,
    acked_in_interval: u64,
    packets_in_interval: u32,
}

/// Fewest acknowledged datagrams in an interval for it to count as a sample.
pub const MIN_PACKETS: u32 = 4;

/// Shortest sampling interval, so a tiny RTT does not give noisy samples.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

impl DeliveryRateEstimator {
    /// Records `bytes` newly acknowledged at `now`; `srtt` sets the sampling interval.
    pub fn on_ack(&mut self, now: Time, bytes: u64, srtt: Option<Duration>) {
        let start = *self.interval_start.get_or_insert(now);
        self.acked_in_interval += bytes;
        self.packets_in_interval += 1;
        let elapsed = now.saturating_since(start);
        let interval = srtt.unwrap_or(MIN_INTERVAL).max(MIN_INTERVAL);
        if elapsed >= interval {
            if self.packets_in_interval >= MIN_PACKETS {
                let sample = self.acked_in_interval as f64 / elapsed.as_secs_f64();
                self.rate = Some(match self.rate {
                    None => sample,
                    Some(old) => old + (sample - old) / 8.0,
                });
            }
            self.interval_start = Some(now);
            self.acked_in_interval = 0;
            self.packets_in_interval = 0;
        }
    }

    /// Ends the current interval without a sample (the path went idle or down: an idle gap
    /// is not a rate).
    pub fn restart(&mut self) {
        self.interval_start = None;
        self.acked_in_interval = 0;
        self.packets_in_interval = 0;
    }

    /// Current estimate, bytes per second.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn pair_sample_and_ewma() {
        let mut e = PairRateEstimator::default();
        // 1000 B in 1 ms = 1e6 B/s.
        assert_eq!(e.on_pair(10 * US, 1000 * US, 1000, 1000), Some(1e6));
        assert_eq!(e.rate(), Some(1e6));
        e.on_pair(10 * US, 500 * US, 1000, 1000);
        assert!((e.rate().unwrap() - (0.8 * 2e6 + 0.2 * 1e6)).abs() < 1e-6);
    }

    #[test]
    fn pair_rejects_spread_sends_and_noise() {
        let mut e = PairRateEstimator::default();
        assert_eq!(
            e.on_pair(900 * US, 1000 * US, 1000, 1000),
            None,
            "sender spacing, not queueing"
        );
        assert_eq!(
            e.on_pair(Duration::ZERO, 5 * US, 1000, 1000),
            None,
            "batch noise"
        );
        // A 20-byte probe, then 1500 bytes 3 ms later over an idle 5 Mbit/s link: the
        // receive gap is 3 + 2.4 ms, which passes the gap test and would read 277 kB/s.
        assert_eq!(
            e.on_pair(3000 * US, 5400 * US, 20, 1500),
            None,
            "tiny first datagram"
        );
        assert_eq!(e.rate(), None);
    }

    #[test]
    fn delivery_rate_ignores_app_limited_intervals() {
        let mut e = DeliveryRateEstimator::default();
        // One 30-byte keepalive every 250 ms: no sample.
        for i in 0..40u64 {
            e.on_ack(
                Time::from_millis(i * 250),
                30,
                Some(Duration::from_millis(20)),
            );
        }
        assert_eq!(e.rate(), None);
    }

    #[test]
    fn delivery_rate_converges() {
        let mut e = DeliveryRateEstimator::default();
        // 1250 B every ms = 1.25e6 B/s (10 Mbit/s).
        for ms in 0..2000u64 {
            e.on_ack(Time::from_millis(ms), 1250, Some(Duration::from_millis(40)));
        }
        let r = e.rate().unwrap();
        assert!((r - 1.25e6).abs() / 1.25e6 < 0.05, "{r}");
    }
}
