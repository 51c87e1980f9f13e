//! Token buckets for handshakes and log lines.
//!
//! Anything that fails authentication is dropped silently, and an attacker must not be able
//! to flood the log or make us spend unbounded CPU on handshakes. This module owns the
//! limiters for that: [`TokenBucket`] (a classic token bucket), [`SourceLimiter`] (one
//! bucket per source address and one per source prefix, in fixed-size tables,
//! docs/protocol.md#dos) and [`LogLimiter`] (a bucket that also counts the lines it
//! suppressed, so the next written line can say how many).
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

    /// The tokens available at `now` (none spent).
    pub fn available(&mut self, now: Time) -> f64 {
        self.refill(now);
        self.tokens
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

/// Ways of each set of a [`SourceTable`]: a source lives in one of the `WAYS` slots of the
/// set its keyed hash names.
const WAYS: usize = 4;

/// One slot of a [`SourceTable`]: 32 bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// The source (see [`SourceLimiter`] for the keys); meaningful if `used`.
    key: [u64; 2],
    /// Latest time seen from this source; the least recent of a set is evicted first.
    last: Time,
    tokens: f32,
    used: bool,
}

/// Token buckets for up to `slots` sources in a fixed table (set-associative, `WAYS`
/// ways, the least recently seen source of a set evicted for a new one), so memory is
/// bounded whatever the number of sources: 32 bytes a slot.
///
/// An evicted source comes back with a full bucket, so eviction can only make the limit
/// laxer, never refuse a source that kept within it; the global cap behind it still holds.
/// Sets are chosen by a hash keyed with a secret, so an attacker cannot aim its sources at
/// one set to evict a chosen one.
#[derive(Clone, Debug)]
pub struct SourceTable {
    rate_per_nano: f64,
    burst: f64,
    slots: Vec<Slot>,
    hash_key: [u64; 2],
}

impl SourceTable {
    /// `slots` (rounded up to a power of two times `WAYS`) buckets of `rate` per second,
    /// `burst` saved up; sets chosen by a hash keyed with `hash_key`.
    pub fn new(slots: usize, rate: f64, burst: f64, hash_key: [u64; 2]) -> SourceTable {
        let sets = slots.div_ceil(WAYS).max(1).next_power_of_two();
        SourceTable {
            rate_per_nano: (non_negative(rate) / NANOS_PER_SEC).min(f64::MAX),
            burst: non_negative(burst),
            slots: vec![Slot::default(); sets * WAYS],
            hash_key,
        }
    }

    /// How many sources the table holds at most.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn set_of(&self, key: [u64; 2]) -> usize {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.hash_key, key).hash(&mut h);
        let sets = self.slots.len() / WAYS;
        // `sets` is a power of two.
        (h.finish() as usize & (sets - 1)) * WAYS
    }

    /// Takes a token from `key`'s bucket if it has one at `now` (a source not in the
    /// table starts with a full bucket).
    pub fn allow(&mut self, now: Time, key: [u64; 2]) -> bool {
        let start = self.set_of(key);
        let (rate, burst) = (self.rate_per_nano, self.burst);
        let Some(set) = self.slots.get_mut(start..start + WAYS) else {
            return false;
        };
        let slot = match set.iter().position(|s| s.used && s.key == key) {
            Some(i) => &mut set[i],
            None => {
                // An unused slot, else the least recently seen.
                let i = (0..WAYS)
                    .min_by_key(|&i| (set[i].used, set[i].last))
                    .unwrap_or(0);
                set[i] = Slot {
                    key,
                    last: now,
                    tokens: burst as f32,
                    used: true,
                };
                &mut set[i]
            }
        };
        let now = now.max(slot.last);
        let elapsed = (now.as_nanos() - slot.last.as_nanos()) as f64;
        let tokens = (f64::from(slot.tokens) + elapsed * rate).min(burst);
        slot.last = now;
        if tokens >= 1.0 {
            slot.tokens = (tokens - 1.0) as f32;
            true
        } else {
            slot.tokens = tokens as f32;
            false
        }
    }
}

/// Per-source limits on handshake work (docs/protocol.md#dos): one bucket per source
/// address (an IPv4 address, or an IPv6 /64: one host's usual share) and one per prefix
/// (an IPv4 /24, or an IPv6 /48). A source must have a token in both; its address is
/// checked first, so a source over its own limit does not drain its neighbours'.
#[derive(Clone, Debug)]
pub struct SourceLimiter {
    address: SourceTable,
    prefix: SourceTable,
}

/// Slots of a [`SourceLimiter`]'s address table.
pub const SOURCE_ADDRESS_SLOTS: usize = 4096;
/// Slots of a [`SourceLimiter`]'s prefix table.
pub const SOURCE_PREFIX_SLOTS: usize = 1024;

impl SourceLimiter {
    /// Limits of `address` and `prefix` (rate per second, burst) per source; the tables'
    /// hashes are keyed with `hash_key`.
    pub fn new(address: (f64, f64), prefix: (f64, f64), hash_key: [u64; 4]) -> SourceLimiter {
        let [a, b, c, d] = hash_key;
        SourceLimiter {
            address: SourceTable::new(SOURCE_ADDRESS_SLOTS, address.0, address.1, [a, b]),
            prefix: SourceTable::new(SOURCE_PREFIX_SLOTS, prefix.0, prefix.1, [c, d]),
        }
    }

    /// Bytes of memory the tables take, whatever the traffic.
    pub fn memory(&self) -> usize {
        (self.address.capacity() + self.prefix.capacity()) * std::mem::size_of::<Slot>()
    }

    /// The (address, prefix) keys of `ip`. IPv4 (and IPv4-mapped IPv6) addresses are
    /// keyed as IPv4-mapped, so the two families never share a key.
    pub fn keys(ip: std::net::IpAddr) -> ([u64; 2], [u64; 2]) {
        let (bits, addr_len, prefix_len) = match ip.to_canonical() {
            std::net::IpAddr::V4(v4) => (u128::from(v4.to_ipv6_mapped()), 128, 96 + 24),
            std::net::IpAddr::V6(v6) => (u128::from(v6), 64, 48),
        };
        let masked = |len: u32| {
            let m = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            let v = bits & m;
            [(v >> 64) as u64, v as u64]
        };
        (masked(addr_len), masked(prefix_len))
    }

    /// Takes a token for `ip` from its address's bucket, then its prefix's; false (and the
    /// prefix untouched) if the address has none.
    pub fn allow(&mut self, now: Time, ip: std::net::IpAddr) -> bool {
        let (address, prefix) = Self::keys(ip);
        self.address.allow(now, address) && self.prefix.allow(now, prefix)
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
    fn source_keys() {
        let k = |s: &str| SourceLimiter::keys(s.parse().unwrap());
        assert_eq!(k("192.0.2.7").0, k("::ffff:192.0.2.7").0);
        assert_ne!(k("192.0.2.7").0, k("192.0.2.8").0);
        assert_eq!(k("192.0.2.7").1, k("192.0.2.200").1);
        assert_ne!(k("192.0.2.7").1, k("192.0.3.7").1);
        // IPv6: the /64 is the address, the /48 the prefix.
        assert_eq!(k("2001:db8:1:2::1").0, k("2001:db8:1:2:ffff::9").0);
        assert_ne!(k("2001:db8:1:2::1").0, k("2001:db8:1:3::1").0);
        assert_eq!(k("2001:db8:1:2::1").1, k("2001:db8:1:ffff::1").1);
        assert_ne!(k("2001:db8:1::1").1, k("2001:db8:2::1").1);
        // The families never meet: 0.0.0.0 is not ::.
        assert_ne!(k("0.0.0.0").0, k("::").0);
    }

    #[test]
    fn sources_are_limited_separately_and_memory_is_bounded() {
        let mut l = SourceLimiter::new((10.0, 2.0), (100.0, 5.0), [1, 2, 3, 4]);
        assert_eq!(l.memory(), (4096 + 1024) * 32);
        let t = ms(1_000);
        let a = "192.0.2.1".parse().unwrap();
        assert!(l.allow(t, a));
        assert!(l.allow(t, a));
        assert!(!l.allow(t, a), "address burst spent");
        // Its refusals did not drain the prefix: three more neighbours get through.
        for i in 2..5 {
            assert!(l.allow(t, format!("192.0.2.{i}").parse().unwrap()));
        }
        assert!(
            !l.allow(t, "192.0.2.9".parse().unwrap()),
            "prefix burst spent"
        );
        assert!(
            l.allow(t, "198.51.100.1".parse().unwrap()),
            "another prefix"
        );
        // 10/s: a token again after 100 ms.
        assert!(l.allow(t + std::time::Duration::from_millis(100), a));

        // A flood of 100,000 distinct sources: the table stays the same size, and a source
        // that keeps within its limit is never refused (eviction only refills).
        let mut t = ms(10_000);
        let steady: std::net::IpAddr = "203.0.113.5".parse().unwrap();
        for i in 0..100_000u32 {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i * 7919).into();
            l.allow(t, ip);
            if i % 1000 == 0 {
                assert!(l.allow(t, steady), "steady source refused at {i}");
                t += std::time::Duration::from_millis(100);
            }
        }
        assert_eq!(l.memory(), (4096 + 1024) * 32);
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
