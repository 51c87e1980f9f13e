//! Token buckets for handshakes and log lines.
//!
//! Anything that fails authentication is dropped silently, and an attacker must not be able
//! to flood the log or make us spend unbounded CPU on handshakes. This module owns the two
//! limiters for that: [`TokenBucket`] (a classic token bucket) and [`LogLimiter`] (a bucket
//! that also counts the lines it suppressed, so the next written line can say how many).
//!
//! Invariants:
//! - No clock reads: every method takes the current [`Time`] as an argument, like the rest
//!   of the sans-IO engine, so tests and the simulator are deterministic.
//! - Time never runs backwards: a `now` earlier than one already seen is treated as the
//!   latest seen, so a clock step back neither refills nor drains the bucket.
//! - Tokens stay within `0..=burst`, whatever the gap between calls (no overflow: a gap of
//!   centuries just fills the bucket) and whatever the parameters (negative or NaN rates
//!   and bursts are treated as zero).

use plait_proto::Time;

const NANOS_PER_SEC: f64 = 1e9;

/// A token bucket: `rate` tokens per second accrue, at most `burst` are saved up, and each
/// allowed event spends one.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Tokens added per nanosecond (the constructor's per-second rate / 1e9).
    rate_per_nano: f64,
    /// Maximum tokens saved up.
    burst: f64,
    /// Tokens available at `last`, in `0.0..=burst`.
    tokens: f64,
    /// Latest time seen; tokens are accounted up to here.
    last: Time,
}

/// `x` if it is a positive number (possibly infinite), else zero: NaN and negative
/// parameters mean "nothing", never a poisoned computation.
fn non_negative(x: f64) -> f64 {
    if x > 0.0 { x } else { 0.0 }
}

impl TokenBucket {
    /// `rate` tokens per second, at most `burst` saved up; starts full.
    pub fn new(rate: f64, burst: f64) -> TokenBucket {
        let burst = non_negative(burst);
        // Capped to a finite value so that `elapsed * rate_per_nano` is never 0 * inf = NaN
        // when no time has passed; an effectively infinite rate still fills the bucket in
        // one nanosecond.
        let rate_per_nano = (non_negative(rate) / NANOS_PER_SEC).min(f64::MAX);
        TokenBucket {
            rate_per_nano,
            burst,
            tokens: burst,
            last: Time::ZERO,
        }
    }

    /// Takes one token if there is one at `now` (time never runs backwards: an earlier `now` than seen before is treated as the latest seen).
    pub fn allow(&mut self, now: Time) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Adds the tokens accrued between the latest time seen and `now`.
    fn refill(&mut self, now: Time) {
        // Clamp: a `now` before `last` counts as `last`, so the gap is zero, not negative.
        let now = now.max(self.last);
        // Cannot underflow: now >= last. At most u64::MAX (~1.8e19) nanoseconds, exactly
        // representable to within f64 rounding; times a finite rate it may be +inf, which
        // `min` then caps at `burst`.
        let elapsed = (now.as_nanos() - self.last.as_nanos()) as f64;
        self.tokens = (self.tokens + elapsed * self.rate_per_nano).min(self.burst);
        self.last = now;
    }
}

/// Rate-limits one kind of log line: at most `per_second` lines, counting what it suppressed.
#[derive(Clone, Debug)]
pub struct LogLimiter {
    bucket: TokenBucket,
    /// Lines suppressed since the last one written.
    suppressed: u64,
}

impl LogLimiter {
    /// At most `per_second` lines per second, with a burst of `max(1, per_second)` so at
    /// least one line always gets through after a quiet period.
    pub fn new(per_second: f64) -> LogLimiter {
        // f64::max ignores NaN, so a NaN rate still gives a burst of 1.
        LogLimiter {
            bucket: TokenBucket::new(per_second, per_second.max(1.0)),
            suppressed: 0,
        }
    }

    /// Some(n) if a line may be written now, n = lines suppressed since the last one written (so the caller can append "(n similar suppressed)"); None if this one is suppressed.
    pub fn check(&mut self, now: Time) -> Option<u64> {
        if self.bucket.allow(now) {
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed = self.suppressed.saturating_add(1);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ms(n: u64) -> Time {
        Time::from_millis(n)
    }

    #[test]
    fn burst_then_refill() {
        let mut b = TokenBucket::new(10.0, 3.0);
        let t0 = ms(1_000);
        assert!(b.allow(t0));
        assert!(b.allow(t0));
        assert!(b.allow(t0));
        assert!(!b.allow(t0), "burst spent");
        // 10/s: one token every 100 ms.
        assert!(!b.allow(t0 + Duration::from_millis(99)));
        assert!(b.allow(t0 + Duration::from_millis(100)));
        assert!(!b.allow(t0 + Duration::from_millis(100)));
        // A long pause refills to the burst, not beyond.
        let t1 = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(b.allow(t1));
        }
        assert!(!b.allow(t1));
    }

    #[test]
    fn sustained_rate_is_respected() {
        let mut b = TokenBucket::new(5.0, 1.0);
        let allowed = (0..10_000u64)
            .filter(|i| b.allow(Time::from_millis(*i)))
            .count();
        // 10 s at 5/s, plus the initial token.
        assert!((50..=51).contains(&allowed), "{allowed}");
    }

    #[test]
    fn backwards_time_is_treated_as_latest_seen() {
        let mut b = TokenBucket::new(1.0, 1.0);
        assert!(b.allow(ms(10_000)));
        assert!(!b.allow(ms(10_000)));
        // Going back does not refill, even if the earlier time is far from 10 s.
        assert!(!b.allow(ms(0)));
        assert!(!b.allow(ms(5_000)));
        // And does not reset the accounting: the token is due 1 s after the latest seen.
        assert!(!b.allow(ms(10_999)));
        assert!(b.allow(ms(11_000)));
    }

    #[test]
    fn huge_gaps_do_not_overflow() {
        let mut b = TokenBucket::new(1e6, 2.0);
        assert!(b.allow(Time::ZERO));
        assert!(b.allow(Time::ZERO));
        assert!(!b.allow(Time::ZERO));
        assert!(b.allow(Time::MAX));
        assert!(b.allow(Time::MAX));
        assert!(!b.allow(Time::MAX));

        let mut fast = TokenBucket::new(f64::INFINITY, 1.0);
        assert!(fast.allow(Time::ZERO));
        assert!(!fast.allow(Time::ZERO), "no time passed: no tokens, no NaN");
        assert!(fast.allow(Time::from_nanos(1)));
        assert!(fast.allow(Time::MAX));
    }

    #[test]
    fn degenerate_parameters() {
        let mut none = TokenBucket::new(f64::NAN, f64::NAN);
        assert!(!none.allow(Time::ZERO));
        assert!(!none.allow(Time::MAX));

        let mut neg = TokenBucket::new(-5.0, -1.0);
        assert!(!neg.allow(ms(1)));
        assert!(!neg.allow(Time::MAX));

        // No refill: the burst is all there ever is.
        let mut once = TokenBucket::new(0.0, 1.0);
        assert!(once.allow(Time::ZERO));
        assert!(!once.allow(Time::MAX));

        // A burst below one token never allows anything.
        let mut tiny = TokenBucket::new(100.0, 0.5);
        assert!(!tiny.allow(Time::ZERO));
        assert!(!tiny.allow(Time::MAX));
    }

    #[test]
    fn log_limiter_counts_suppressed_lines() {
        let mut l = LogLimiter::new(2.0);
        let t0 = ms(500);
        assert_eq!(l.check(t0), Some(0));
        assert_eq!(l.check(t0), Some(0));
        for _ in 0..7 {
            assert_eq!(l.check(t0), None);
        }
        // 2/s: a token every 500 ms; the line written reports the 7 it replaced.
        assert_eq!(l.check(ms(999)), None);
        assert_eq!(l.check(ms(1_000)), Some(8));
        assert_eq!(l.check(ms(1_000)), None);
        assert_eq!(l.check(ms(1_500)), Some(1));
        assert_eq!(l.check(ms(2_000)), Some(0));
    }

    #[test]
    fn log_limiter_burst_is_at_least_one() {
        // 0.1/s: a burst of 1, then one line every 10 s.
        let mut l = LogLimiter::new(0.1);
        assert_eq!(l.check(Time::ZERO), Some(0));
        assert_eq!(l.check(ms(1)), None);
        assert_eq!(l.check(ms(9_999)), None);
        assert_eq!(l.check(ms(10_000)), Some(2));

        // Even a nonsense rate lets the first line through, then nothing.
        let mut nan = LogLimiter::new(f64::NAN);
        assert_eq!(nan.check(Time::ZERO), Some(0));
        assert_eq!(nan.check(Time::MAX), None);
        assert_eq!(nan.check(ms(5)), None);
    }

    #[test]
    fn log_limiter_suppressed_count_saturates() {
        let mut l = LogLimiter::new(0.0);
        l.suppressed = u64::MAX - 1;
        assert_eq!(l.check(Time::ZERO), Some(u64::MAX - 1));
        assert_eq!(l.check(Time::ZERO), None);
        l.suppressed = u64::MAX;
        assert_eq!(l.check(Time::ZERO), None);
        assert_eq!(l.suppressed, u64::MAX);
    }
}
