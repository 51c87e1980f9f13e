//! Relative one-way (forward) delay of a path, from the receive timestamps in ACK frames.
//!
//! A sample is `receiver clock at arrival − sender clock at send`. The two clocks differ by
//! an unknown offset, but that offset is the same for every path between the same two
//! endpoints, so differences between paths are exact without clock synchronisation
//! (seed PET-BMP §V-A: "clock synchronization is not required since only the relative delay
//! between the different paths matters").
//!
//! Wire timestamps are 32-bit microseconds that wrap (docs/protocol.md#timestamps). The
//! session keeps one [`OwdReference`]: the first raw sample of any path; every later raw
//! sample is taken relative to it as a signed 32-bit difference, which is exact while the
//! paths' delays differ by less than ~35 minutes.

use std::time::Duration;

use crate::path::minmax::WindowedMin;
use crate::time::Time;

/// Window of the base (queue-free) delay; see [`crate::path::rtt::MIN_RTT_WINDOW`].
pub const BASE_WINDOW: Duration = Duration::from_secs(300);

/// The session-wide reference that raw one-way samples are taken relative to.
#[derive(Clone, Copy, Debug, Default)]
pub struct OwdReference {
    raw0: Option<u32>,
}

impl OwdReference {
    /// Converts a (send timestamp, receive timestamp) pair, both wire microseconds on their
    /// own clocks, into microseconds relative to the reference (may be negative).
    pub fn relative_us(&mut self, send_us: u32, recv_us: u32) -> i64 {
        let raw = recv_us.wrapping_sub(send_us);
        let raw0 = *self.raw0.get_or_insert(raw);
        i64::from(raw.wrapping_sub(raw0) as i32)
    }
}

/// Per-path relative one-way delay: base (windowed minimum) and smoothed (EWMA 1/8).
#[derive(Clone, Debug)]
pub struct OwdEstimator {
    base: WindowedMin<i64>,
    smoothed: Option<f64>,
    samples: u64,
}

impl Default for OwdEstimator {
    fn default() -> Self {
        OwdEstimator {
            base: WindowedMin::new(BASE_WINDOW),
            smoothed: None,
            samples: 0,
        }
    }
}

impl OwdEstimator {
    /// Feeds one relative sample (µs, from [`OwdReference::relative_us`]) taken at `now`.
    pub fn on_sample(&mut self, now: Time, rel_us: i64) {
        self.base.update(now, rel_us);
        let s = rel_us as f64;
        self.smoothed = Some(match self.smoothed {
            None => s,
            Some(old) => old + (s - old) / 8.0,
        });
        self.samples += 1;
    }

    /// Queue-free relative delay, µs relative to the session reference.
    pub fn base_us(&self) -> Option<i64> {
        self.base.get()
    }

    /// Smoothed relative delay, µs relative to the session reference.
    pub fn smoothed_us(&self) -> Option<f64> {
        self.smoothed
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

/// Converts a non-negative microsecond difference to a `Duration` (negative gives zero).
pub fn micros_to_duration(us: f64) -> Duration {
    crate::time::secs_f64_saturating(us / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_cancels_between_paths() {
        // Receiver clock is ahead by an arbitrary offset that also wraps.
        let offset: u32 = 4_000_000_000;
        let mut reference = OwdReference::default();
        let send = 1_000u32;
        let a = reference.relative_us(send, send.wrapping_add(offset).wrapping_add(10_000));
        let b = reference.relative_us(
            send + 5,
            (send + 5).wrapping_add(offset).wrapping_add(60_000),
        );
        assert_eq!(b - a, 50_000);
    }

    #[test]
    fn sender_clock_wrap_is_harmless() {
        let mut reference = OwdReference::default();
        let a = reference.relative_us(u32::MAX - 10, 100);
        let b = reference.relative_us(20, 131 + 1_000);
        assert_eq!(b - a, 1_000);
    }

    #[test]
    fn base_is_windowed_min_and_smoothed_follows() {
        let mut e = OwdEstimator::default();
        e.on_sample(Time::ZERO, 500);
        e.on_sample(Time::from_millis(1), 300);
        e.on_sample(Time::from_millis(2), 900);
        assert_eq!(e.base_us(), Some(300));
        for i in 0..200 {
            e.on_sample(Time::from_millis(3 + i), 700);
        }
        assert!((e.smoothed_us().unwrap() - 700.0).abs() < 1.0);
        e.on_sample(Time::ZERO + BASE_WINDOW + Duration::from_secs(1), 700);
        assert_eq!(e.base_us(), Some(700), "old minimum expired");
    }
}
