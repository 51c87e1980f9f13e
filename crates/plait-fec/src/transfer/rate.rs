//! The sender's rate control: paced sending at a rate adapted from the receiver's reports.
//!
//! Each report gives one sample over the interval since the previous one: datagrams sent
//! (from the highest sequence number seen), datagrams received, and an RTT (sequence echo
//! minus the receiver's hold time). Rules, applied once per report:
//! - the loss of a sample is `1 - received / sent`; the *base loss* is the smallest loss of
//!   the last 40 samples (about 2 s), the random loss of the paths that no rate change
//!   avoids; the *excess loss* is loss minus base loss;
//! - congestion is excess loss above 5 % or an RTT above `min_rtt + 150 ms` (queues
//!   filling well beyond the paths' delay differences); on congestion the rate becomes `max(0.7 * rate, 0.9 * received rate)`, at
//!   most once per smoothed RTT, and slow start ends;
//! - otherwise, in slow start the rate grows by 25 % per report (doubling in about
//!   three reports), after it by `rate / 32 + 64 kB/s` per report (additive increase);
//! - the rate stays within `[min_rate, max_rate]`.
//!
//! Time is passed in as a `Duration` since the transfer began: no clock is read here.

use std::collections::VecDeque;
use std::time::Duration;

/// RTT above the smallest one that counts as queues building. Generous on purpose: through
/// the tunnel the RTT also grows by the paths' delay difference (its reorder buffer) as soon
/// as a second path is used, which is not congestion.
pub const QUEUE_SLACK: Duration = Duration::from_millis(150);

/// One report's worth of measurements.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Symbol datagrams sent in the interval (by sequence number).
    pub sent: u64,
    /// Symbol datagrams the receiver accepted in the interval.
    pub received: u64,
    /// Bytes per datagram.
    pub datagram_bytes: usize,
    /// Length of the interval at the sender.
    pub interval: Duration,
    /// RTT measured with this report, if any.
    pub rtt: Option<Duration>,
}

/// Paced rate with AIMD from reports.
#[derive(Debug, Clone)]
pub struct RateControl {
    rate: f64,
    min_rate: f64,
    max_rate: f64,
    slow_start: bool,
    min_rtt: Option<Duration>,
    srtt: Option<Duration>,
    losses: VecDeque<f64>,
    loss_ewma: f64,
    last_decrease: Duration,
}

impl RateControl {
    /// Starts at `initial` bytes per second.
    pub fn new(initial: f64, min_rate: f64, max_rate: f64) -> Self {
        Self {
            rate: initial.clamp(min_rate, max_rate),
            min_rate,
            max_rate,
            slow_start: true,
            min_rtt: None,
            srtt: None,
            losses: VecDeque::new(),
            loss_ewma: 0.0,
            last_decrease: Duration::ZERO,
        }
    }

    /// Current rate, bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Smoothed RTT (200 ms before the first sample).
    pub fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(Duration::from_millis(200))
    }

    /// Smoothed loss fraction (for sizing how many symbols a chunk needs).
    pub fn loss(&self) -> f64 {
        self.loss_ewma
    }

    /// Whether the controller is still in slow start.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// Time to wait after sending `bytes` at the current rate.
    pub fn gap(&self, bytes: usize) -> Duration {
        Duration::from_secs_f64(bytes as f64 / self.rate)
    }

    /// Takes one report's sample.
    pub fn on_sample(&mut self, now: Duration, s: Sample) {
        if let Some(rtt) = s.rtt {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.srtt = Some(match self.srtt {
                None => rtt,
                Some(v) => (v * 7 + rtt) / 8,
            });
        }
        if s.sent < 8 {
            return;
        }
        let loss = 1.0 - (s.received as f64 / s.sent as f64).min(1.0);
        self.loss_ewma = 0.875 * self.loss_ewma + 0.125 * loss;
        self.losses.push_back(loss);
        if self.losses.len() > 40 {
            self.losses.pop_front();
        }
        let base = self.losses.iter().copied().fold(f64::INFINITY, f64::min);
        let excess = loss - base;
        let queueing = match (s.rtt, self.min_rtt) {
            (Some(rtt), Some(min)) => rtt > min + QUEUE_SLACK,
            _ => false,
        };
        if excess > 0.05 || queueing {
            if now.saturating_sub(self.last_decrease) >= self.srtt() {
                let secs = s.interval.as_secs_f64().max(1e-3);
                let received_rate = s.received as f64 * s.datagram_bytes as f64 / secs;
                self.rate = (0.7 * self.rate).max(0.9 * received_rate).min(self.rate);
                self.last_decrease = now;
                self.slow_start = false;
            }
        } else if self.slow_start {
            self.rate *= 1.25;
        } else {
            self.rate += self.rate / 32.0 + 64_000.0;
        }
        self.rate = self.rate.clamp(self.min_rate, self.max_rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent: u64, received: u64, rtt_ms: u64) -> Sample {
        Sample {
            sent,
            received,
            datagram_bytes: 1000,
            // A long interval: the received rate (100 kB/s) stays below the sending rate.
            interval: Duration::from_secs(1),
            rtt: Some(Duration::from_millis(rtt_ms)),
        }
    }

    #[test]
    fn grows_then_backs_off_on_queueing_and_excess_loss() {
        let mut r = RateControl::new(100_000.0, 10_000.0, 1e9);
        let mut t = Duration::ZERO;
        for _ in 0..10 {
            t += Duration::from_millis(50);
            r.on_sample(t, sample(100, 100, 40));
        }
        let grown = r.rate();
        assert!(grown > 800_000.0, "{grown}");
        t += Duration::from_millis(50);
        r.on_sample(t, sample(100, 100, 200));
        assert!(r.rate() < grown && !r.in_slow_start());
        let before = r.rate();
        t += Duration::from_secs(1);
        r.on_sample(t, sample(100, 80, 40));
        assert!(r.rate() < before);
    }

    #[test]
    fn steady_random_loss_is_not_congestion() {
        let mut r = RateControl::new(100_000.0, 10_000.0, 1e9);
        let mut t = Duration::ZERO;
        for _ in 0..40 {
            t += Duration::from_millis(50);
            r.on_sample(t, sample(100, 90, 40));
        }
        assert!(r.in_slow_start());
        assert!((r.loss() - 0.1).abs() < 0.02);
    }
}
