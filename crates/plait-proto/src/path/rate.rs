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

/// On real hosts a pair whose second datagram is smaller than this should give no sample
/// (`Config::min_pair_bytes`, on by default; the seeds' reproductions turn it off, as
/// seed PET-BMP counts every pair): its serialisation time at any real bottleneck is far below the receiver's timing
/// noise (interrupt coalescing, scheduling), so `L2 / dispersion` measures the noise.
/// Measured on the tunnel: 40-byte probe pairs through a 40 Mbit/s path read as 0.005 to
/// 0.1 Mbit/s, and the scheduler then starved the path. Packet trains always apply it.
pub const MIN_PAIR_BYTES: usize = 500;

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
    /// Pairs whose second datagram is smaller give no sample (0: every pair counts).
    min_len: usize,
}

/// Capacity from packet trains: runs of datagrams the sender put back to back (one GSO
/// batch, a burst) measured over the whole run at the receiver, `Σ L / (t_last − t_first)`,
/// and the median of the last [`MEDIAN_SAMPLES`] runs.
///
/// Why not pairs on real hosts: receive timestamps come in bursts (interrupt coalescing,
/// GRO, softirq batches), so one pair's gap is either near zero (same batch) or a whole
/// batch interval (a pair across two batches) and `L2 / gap` reads far too high or far too
/// low; on the tunnel, PET's EWMA of such pairs followed a 40 Mbit/s path down to 9 Mbit/s
/// and the scheduler then starved it. Over a run of [`MIN_TRAIN`] or more the batching
/// averages out, and the median ignores the odd bad run.
#[derive(Clone, Debug, Default)]
pub struct TrainRateEstimator {
    bytes: u64,
    time: Duration,
    packets: u32,
    runs: u64,
    recent: [f64; MEDIAN_SAMPLES],
    /// Median of `recent`, recomputed when a run ends (schedulers read it per packet).
    median: Option<f64>,
}

/// Runs the median is taken over.
pub const MEDIAN_SAMPLES: usize = 15;
/// Fewest datagrams after the first for a run to count.
pub const MIN_TRAIN: u32 = 8;
/// A send gap at most this small is back to back (same batch), whatever the receive gap.
const BACK_TO_BACK: Duration = Duration::from_micros(50);
/// Shortest run duration that counts.
const MIN_TRAIN_TIME: Duration = Duration::from_micros(200);

impl TrainRateEstimator {
    /// The next datagram of a run of consecutive ones: `send_gap` and `recv_gap` since the
    /// previous datagram on the path, `len` its size.
    pub fn on_step(&mut self, send_gap: Duration, recv_gap: Duration, len: usize) {
        let queued_behind = send_gap <= BACK_TO_BACK || send_gap.saturating_mul(2) <= recv_gap;
        if !queued_behind || len < MIN_PAIR_BYTES {
            self.end_run();
            return;
        }
        self.bytes += len as u64;
        self.time += recv_gap;
        self.packets += 1;
        if self.packets >= 4 * MIN_TRAIN {
            self.end_run();
        }
    }

    /// A gap in the sequence (a datagram without a timestamp): the run ends.
    pub fn end_run(&mut self) {
        if self.packets >= MIN_TRAIN && self.time >= MIN_TRAIN_TIME {
            let sample = self.bytes as f64 / self.time.as_secs_f64();
            self.recent[(self.runs % MEDIAN_SAMPLES as u64) as usize] = sample;
            self.runs += 1;
            let n = (self.runs as usize).min(MEDIAN_SAMPLES);
            let mut v = self.recent;
            let v = &mut v[..n];
            v.sort_by(f64::total_cmp);
            self.median = Some(v[n / 2]);
        }
        self.bytes = 0;
        self.time = Duration::ZERO;
        self.packets = 0;
    }

    /// Median of the recent runs, bytes per second; `None` before any run.
    pub fn rate(&self) -> Option<f64> {
        self.median
    }

    /// The path has delivered `rate` (bytes per second, measured over at least a round
    /// trip): runs that read less than that are stale (taken while the path was slower) or
    /// wrong, since nothing delivers faster than its capacity, and are raised to it. Without
    /// this the median keeps a past slow spell for 8 of its 15 runs, which an unloaded path
    /// may not produce for many seconds (seen in plait-sim, `plait sim topologies/T5.toml`: 4.9
    /// Mbit/s read on a 20 Mbit/s path 2 s after its dip ended).
    pub fn raise_to(&mut self, rate: f64) {
        let Some(median) = self.median else {
            return;
        };
        if !(rate.is_finite() && rate > median) {
            return;
        }
        let n = (self.runs as usize).min(MEDIAN_SAMPLES);
        for r in &mut self.recent[..n] {
            *r = r.max(rate);
        }
        self.median = Some(median.max(rate));
    }
}

impl PairRateEstimator {
    /// An estimator ignoring pairs whose second datagram is under `min_len` bytes.
    pub fn with_min_len(min_len: usize) -> PairRateEstimator {
        PairRateEstimator {
            min_len,
            ..PairRateEstimator::default()
        }
    }

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
        if dispersion < MIN_DISPERSION || !queued_behind || len2 < self.min_len {
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

    fn run(e: &mut TrainRateEstimator, gaps_us: &[u64], len: usize) {
        for g in gaps_us {
            e.on_step(Duration::ZERO, Duration::from_micros(*g), len);
        }
        e.end_run();
    }

    #[test]
    fn trains_average_out_batched_timestamps() {
        let mut e = TrainRateEstimator::default();
        // 1000-byte datagrams at 1 MB/s, read in batches of two: gaps 0, 2 ms, 0, 2 ms ...
        let gaps: Vec<u64> = (0..16)
            .map(|i| if i % 2 == 0 { 0 } else { 2_000 })
            .collect();
        run(&mut e, &gaps, 1000);
        let r = e.rate().unwrap();
        assert!((r - 1e6).abs() / 1e6 < 0.01, "{r}");
        // A pair estimator would read 0.5 MB/s or nothing from the same datagrams.
        let mut p = PairRateEstimator::default();
        for g in &gaps {
            p.on_pair(Duration::ZERO, Duration::from_micros(*g), 1000, 1000);
        }
        assert!(p.rate().unwrap() < 0.6e6);
    }

    #[test]
    fn median_ignores_an_odd_run_and_short_runs_do_not_count() {
        let mut e = TrainRateEstimator::default();
        for _ in 0..4 {
            run(&mut e, &[1_000; 10], 1000);
        }
        run(&mut e, &[10_000; 10], 1000); // one run ten times too slow
        assert_eq!(e.rate(), Some(1e6));
        let mut short = TrainRateEstimator::default();
        run(&mut short, &[1_000; 3], 1000);
        assert_eq!(short.rate(), None);
        let mut small = TrainRateEstimator::default();
        run(&mut small, &[1_000; 10], 40);
        assert_eq!(small.rate(), None, "probes are too small to time");
    }

    #[test]
    fn a_higher_delivery_rate_raises_stale_runs() {
        let mut e = TrainRateEstimator::default();
        e.raise_to(5e6);
        assert_eq!(e.rate(), None, "nothing to raise before any run");
        // Runs taken during a slow spell (0.25 MB/s)...
        for _ in 0..10 {
            run(&mut e, &[4_000; 10], 1000);
        }
        assert_eq!(e.rate(), Some(0.25e6));
        // ...then the path delivers 1 MB/s: the old runs cannot be right any more.
        e.raise_to(1e6);
        assert_eq!(e.rate(), Some(1e6));
        // A lower rate (or nonsense) lowers nothing.
        e.raise_to(0.5e6);
        e.raise_to(f64::NAN);
        assert_eq!(e.rate(), Some(1e6));
        // New runs still count: four faster ones do not move the median of 10 samples...
        for _ in 0..4 {
            run(&mut e, &[500; 10], 1000);
        }
        assert_eq!(e.rate(), Some(1e6));
        // ...eight of the last fifteen do.
        for _ in 0..4 {
            run(&mut e, &[500; 10], 1000);
        }
        assert_eq!(e.rate(), Some(2e6));
    }

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
    fn a_restart_ends_the_interval_and_keeps_the_estimate() {
        let mut e = DeliveryRateEstimator::default();
        let srtt = Some(Duration::from_millis(100));
        // About 1 MB/s: ACKs of 10 kB, 10 ms apart.
        for i in 0..=10 {
            e.on_ack(Time::ZERO + Duration::from_millis(10 * i), 10_000, srtt);
        }
        let rate = e.rate().expect("a sample");
        // Three more, then the path idles; an ACK 5 s later would close an interval of
        // four ACKs over 4.9 s (8 kB/s) without the restart.
        for i in 11..=13 {
            e.on_ack(Time::ZERO + Duration::from_millis(10 * i), 10_000, srtt);
        }
        e.restart();
        e.on_ack(Time::from_millis(5_000), 10_000, srtt);
        assert_eq!(e.rate(), Some(rate), "the idle gap is no sample");
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
