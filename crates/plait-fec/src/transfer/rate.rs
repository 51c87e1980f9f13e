//! The sender's rate control: paced sending at a rate adapted from the receiver's reports.
//!
//! Each report gives the datagrams sent (from the highest sequence number seen) and
//! received since the previous one, and an RTT (sequence echo minus the receiver's hold
//! time). Reports are summed into *rounds* of at least one smoothed RTT, 100 ms and 64
//! datagrams (16 in slow start), and the rules apply once per round:
//! - the loss of a round is `1 - received / sent`; the *base loss* is the median of the
//!   last 32 rounds' losses (a few seconds), the random loss of the paths that no rate
//!   change avoids; the *excess loss* is the round's loss minus the base loss;
//! - congestion is an excess loss above `1.5 % + 3 sd`, with `sd` the binomial standard
//!   deviation of the base loss over the round's datagrams (so random loss does not look
//!   like congestion), or a round whose smallest RTT is above `min_rtt + 150 ms` (queues
//!   filling well beyond the paths' delay differences);
//! - slow start: the rate grows by half per round, but never beyond 1.5 times the highest
//!   received rate so far; it ends when the received rate has not grown by a quarter in
//!   two rounds, or after two congested rounds in a row, at the highest received rate;
//! - after it, on congestion the rate becomes `max(0.8 rate, 0.9 received rate)` (never
//!   more than before) and the received rate is remembered; otherwise the rate grows by a
//!   quarter of the gap to that remembered rate per round (back fast, as BIC), and by at
//!   least `rate / 64 + 8 kB/s` (probing beyond it gently);
//! - the rate stays within `[min_rate, max_rate]`.
//!
//! A first version applied its rules to every report (every 50 ms), with a 5 % excess-loss
//! threshold, an unbounded slow start and `rate / 32 + 64 kB/s` per report: on the test
//! bed's T1 it kept overshooting the paths' queues, and 8.5 % of the symbols sent died in
//! them (docs/fec.md).
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
    base_loss: f64,
    round: Round,
    /// Highest received rate of a round so far (bytes/s), and rounds in slow start since
    /// it last grew by a quarter.
    max_received_rate: f64,
    flat_rounds: u32,
    congested_rounds: u32,
    /// Received rate when congestion was last seen: the increase goes back to it fast.
    recover_to: f64,
    counters: RateCounters,
}

/// Why the rate changed, for finding out what limits a transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateCounters {
    /// Rounds judged.
    pub rounds: u64,
    /// Decreases for an excess loss.
    pub loss_decreases: u64,
    /// Decreases for queueing (RTT above `min_rtt + QUEUE_SLACK`).
    pub queue_decreases: u64,
}

/// Reports summed until they span a round.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    sent: u64,
    received: u64,
    interval: Duration,
    /// Smallest RTT of the round's reports: queues hold every report back, a loss that
    /// the tunnel repairs or a reorder wait only some.
    low_rtt: Option<Duration>,
}

/// Rounds whose losses give the base loss.
const LOSS_ROUNDS: usize = 32;
/// Shortest round.
const MIN_ROUND: Duration = Duration::from_millis(100);
/// Fewest datagrams in a round after slow start (fewer make its loss too noisy to judge).
const MIN_ROUND_DATAGRAMS: u64 = 64;

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
            base_loss: 0.0,
            round: Round::default(),
            max_received_rate: 0.0,
            flat_rounds: 0,
            congested_rounds: 0,
            recover_to: 0.0,
            counters: RateCounters::default(),
        }
    }

    /// Current rate, bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Smallest RTT measured.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Smoothed RTT (200 ms before the first sample).
    pub fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(Duration::from_millis(200))
    }

    /// Smoothed loss fraction (for sizing how many symbols a chunk needs).
    pub fn loss(&self) -> f64 {
        self.loss_ewma
    }

    /// The paths' random loss: the lower quartile of the last rounds' losses (what no
    /// rate change avoids; for sizing how many symbols a chunk needs without counting
    /// congestion losses that the rate control is already removing).
    pub fn base_loss(&self) -> f64 {
        self.base_loss
    }

    /// Why the rate changed so far.
    pub fn counters(&self) -> RateCounters {
        self.counters
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
    pub fn on_sample(&mut self, _now: Duration, s: Sample) {
        if let Some(rtt) = s.rtt {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.srtt = Some(match self.srtt {
                None => rtt,
                Some(v) => (v * 7 + rtt) / 8,
            });
        }
        let min_round = self.srtt().max(MIN_ROUND);
        let r = &mut self.round;
        r.sent += s.sent;
        r.received += s.received.min(s.sent);
        r.interval += s.interval;
        r.low_rtt = match (r.low_rtt, s.rtt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Slow start takes short rounds (it needs two congested ones in a row to stop).
        let min_datagrams = if self.slow_start {
            MIN_ROUND_DATAGRAMS / 4
        } else {
            MIN_ROUND_DATAGRAMS
        };
        if r.sent < min_datagrams || r.interval < min_round {
            return;
        }
        let round = std::mem::take(&mut self.round);
        let loss = 1.0 - round.received as f64 / round.sent as f64;
        self.loss_ewma = 0.75 * self.loss_ewma + 0.25 * loss;
        self.losses.push_back(loss);
        if self.losses.len() > LOSS_ROUNDS {
            self.losses.pop_front();
        }
        let mut sorted: Vec<f64> = self.losses.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let base = sorted[(sorted.len() - 1) / 2];
        self.base_loss = base;
        // Random loss alone exceeds the base by more than 3 standard deviations of a
        // binomial count in very few rounds.
        let n = round.sent as f64;
        let q = base.max(1.0 / n);
        let threshold = 0.015 + 3.0 * (q * (1.0 - q) / n).sqrt();
        let queueing = match (round.low_rtt, self.min_rtt) {
            (Some(rtt), Some(min)) => rtt > min + QUEUE_SLACK,
            _ => false,
        };
        let congested = loss - base > threshold || queueing;
        self.counters.rounds += 1;
        if congested {
            if queueing {
                self.counters.queue_decreases += 1;
            } else {
                self.counters.loss_decreases += 1;
            }
        }
        let secs = round.interval.as_secs_f64().max(1e-3);
        let received_rate = round.received as f64 * s.datagram_bytes as f64 / secs;
        if self.slow_start {
            // The bottleneck is full once the received rate stops growing (by a quarter
            // in two rounds, as BBR's start-up), or after two congested rounds in a row
            // (one can be random loss): go on from the most that got through.
            if received_rate > 1.25 * self.max_received_rate {
                self.flat_rounds = 0;
            } else {
                self.flat_rounds += 1;
            }
            self.max_received_rate = self.max_received_rate.max(received_rate);
            self.congested_rounds = if congested {
                self.congested_rounds + 1
            } else {
                0
            };
            if self.flat_rounds >= 2 || self.congested_rounds >= 2 {
                self.slow_start = false;
                self.rate = self.rate.min(self.max_received_rate);
            } else if !congested {
                // Never far ahead of what gets through: past the bottleneck the excess
                // only fills its queue.
                self.rate = (self.rate * 1.5).min(1.5 * self.max_received_rate);
            }
        } else if congested {
            self.recover_to = received_rate.min(self.rate);
            self.rate = (0.8 * self.rate).max(0.9 * received_rate).min(self.rate);
        } else {
            // Back quickly to what got through before the last decrease (a quarter of the
            // gap per round, as BIC), then probe beyond it gently.
            let probe = self.rate / 64.0 + 8_000.0;
            self.rate += ((self.recover_to - self.rate) / 4.0).max(probe);
        }
        self.rate = self.rate.clamp(self.min_rate, self.max_rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One 100 ms round through a bottleneck of `capacity` bytes/s with `loss` random
    /// loss (deterministic: the expected counts), 1000-byte datagrams.
    fn round(r: &mut RateControl, t: &mut Duration, capacity: f64, loss: f64, rtt_ms: u64) {
        *t += Duration::from_millis(100);
        let sent = (r.rate() * 0.1 / 1000.0).round() as u64;
        let through = (sent as f64).min(capacity * 0.1 / 1000.0);
        let received = (through * (1.0 - loss)).round() as u64;
        r.on_sample(
            *t,
            Sample {
                sent,
                received,
                datagram_bytes: 1000,
                interval: Duration::from_millis(100),
                rtt: Some(Duration::from_millis(rtt_ms)),
            },
        );
    }

    #[test]
    fn slow_start_grows_then_stops_near_the_bottleneck() {
        let mut r = RateControl::new(200_000.0, 10_000.0, 1e9);
        let mut t = Duration::ZERO;
        for _ in 0..5 {
            round(&mut r, &mut t, 1e9, 0.0, 40);
        }
        // 1.5 times per round.
        assert!(r.in_slow_start() && r.rate() > 1.5e6, "{}", r.rate());
        for _ in 0..10 {
            round(&mut r, &mut t, 4e6, 0.0, 40);
        }
        assert!(!r.in_slow_start());
        // Never more than 1.5 times what got through, and no collapse either.
        assert!(
            r.rate() > 3.2e6 && r.rate() < 6.1e6,
            "rate {} after slow start",
            r.rate()
        );
    }

    #[test]
    fn backs_off_on_queueing_and_on_excess_loss() {
        let mut r = RateControl::new(100_000.0, 10_000.0, 1e9);
        let mut t = Duration::ZERO;
        for _ in 0..20 {
            round(&mut r, &mut t, 1e6, 0.0, 40);
        }
        assert!(!r.in_slow_start());
        let before = r.rate();
        round(&mut r, &mut t, 1e9, 0.0, 40 + 200);
        assert!(r.rate() < before, "queueing: {} -> {}", before, r.rate());
        let before = r.rate();
        round(&mut r, &mut t, 1e9, 0.0, 40);
        assert!(r.rate() > before, "additive increase");
        let before = r.rate();
        round(&mut r, &mut t, 1e9, 0.2, 40);
        assert!(r.rate() < before, "excess loss: {} -> {}", before, r.rate());
    }

    #[test]
    fn steady_random_loss_is_not_congestion() {
        let mut r = RateControl::new(100_000.0, 10_000.0, 1e9);
        let mut t = Duration::ZERO;
        for _ in 0..12 {
            round(&mut r, &mut t, 1e9, 0.1, 40);
        }
        assert!(r.in_slow_start(), "rate {}", r.rate());
        assert!(r.rate() > 1e6, "{}", r.rate());
        assert!((r.base_loss() - 0.1).abs() < 0.02);
    }
}
