//! A token-bucket pacer: spreads a path's window over its round trip instead of sending
//! it in one burst that would fill the link's queue (RFC 9002 §7.7).
//!
//! Invariants: tokens never exceed the bucket's capacity (a short burst of 2 to 16
//! datagrams, about 2 ms at the pacing rate) nor go below zero; without a rate (no RTT
//! sample yet) nothing is held back.

use std::time::Duration;

use crate::time::{Time, secs_f64_saturating};

/// The burst the bucket allows, as time at the pacing rate.
const BURST_INTERVAL: Duration = Duration::from_millis(2);
/// Smallest and largest burst, in datagrams.
const MIN_BURST_DATAGRAMS: u64 = 2;
const MAX_BURST_DATAGRAMS: u64 = 16;

/// See the module docs.
#[derive(Clone, Debug)]
pub struct Pacer {
    mss: u64,
    tokens: f64,
    last: Option<Time>,
}

impl Pacer {
    /// A full bucket for datagrams of `mss` bytes.
    pub fn new(mss: u64) -> Pacer {
        Pacer {
            mss,
            tokens: (MAX_BURST_DATAGRAMS * mss) as f64,
            last: None,
        }
    }

    /// Forgets the past: a full bucket (after a path comes back).
    pub fn reset(&mut self) {
        self.tokens = self.capacity(None, 0);
        self.last = None;
    }

    fn capacity(&self, rate: Option<f64>, window: u64) -> f64 {
        let lo = (MIN_BURST_DATAGRAMS * self.mss) as f64;
        let hi = (MAX_BURST_DATAGRAMS * self.mss) as f64;
        match rate {
            Some(r) => (r * BURST_INTERVAL.as_secs_f64())
                .clamp(lo, hi)
                .min(window.max(self.mss) as f64),
            None => hi,
        }
    }

    fn tokens_at(&self, now: Time, rate: Option<f64>, window: u64) -> f64 {
        let cap = self.capacity(rate, window);
        let (Some(rate), Some(last)) = (rate, self.last) else {
            return cap;
        };
        (self.tokens + rate * now.saturating_since(last).as_secs_f64()).min(cap)
    }

    /// When a datagram of `bytes` may go: `now` if the bucket holds enough, else when it
    /// will.
    pub fn release_time(&self, now: Time, rate: Option<f64>, window: u64, bytes: u64) -> Time {
        let Some(r) = rate.filter(|r| *r > 0.0) else {
            return now;
        };
        let tokens = self.tokens_at(now, rate, window);
        let need = bytes as f64 - tokens;
        if need <= 0.0 {
            now
        } else {
            now.saturating_add(secs_f64_saturating(need / r))
        }
    }

    /// A datagram of `bytes` left at `now`.
    pub fn on_sent(&mut self, now: Time, rate: Option<f64>, window: u64, bytes: u64) {
        self.tokens = (self.tokens_at(now, rate, window) - bytes as f64).max(0.0);
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_then_paces_at_the_rate() {
        let mut p = Pacer::new(1000);
        let rate = Some(1_000_000.0); // 1 MB/s: one 1000-byte datagram per ms
        let t0 = Time::from_millis(10);
        // The burst (2 ms at the rate = 2 datagrams) goes at once.
        p.on_sent(t0, rate, 100_000, 1000);
        p.on_sent(t0, rate, 100_000, 1000);
        assert_eq!(
            p.release_time(t0, rate, 100_000, 1000),
            t0 + Duration::from_millis(1)
        );
        let t1 = t0 + Duration::from_millis(1);
        assert_eq!(p.release_time(t1, rate, 100_000, 1000), t1);
        p.on_sent(t1, rate, 100_000, 1000);
        // An idle spell refills only the burst, never more.
        let later = t1 + Duration::from_secs(1);
        p.on_sent(later, rate, 100_000, 1000);
        p.on_sent(later, rate, 100_000, 1000);
        assert!(p.release_time(later, rate, 100_000, 1000) > later);
    }

    #[test]
    fn no_rate_no_pacing() {
        let mut p = Pacer::new(1200);
        for _ in 0..100 {
            p.on_sent(Time::ZERO, None, 12_000, 1200);
        }
        assert_eq!(p.release_time(Time::ZERO, None, 12_000, 1200), Time::ZERO);
    }
}
