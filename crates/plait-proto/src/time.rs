//! Engine time: a point on the driver's monotonic clock, in nanoseconds since an
//! arbitrary epoch the driver chooses (the daemon: its start; the simulator: zero).
//!
//! Invariant: the engine never reads a clock. Every `Time` it sees came in as an argument,
//! so the same inputs give the same outputs, byte for byte.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time on the driver's monotonic clock (nanoseconds since the driver's epoch).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    /// The driver's epoch.
    pub const ZERO: Time = Time(0);
    /// A time later than any the engine will see; used as "never".
    pub const MAX: Time = Time(u64::MAX);

    /// `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Time {
        Time(nanos)
    }

    /// `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Time {
        Time(micros.saturating_mul(1_000))
    }

    /// `millis` milliseconds after the epoch.
    pub const fn from_millis(millis: u64) -> Time {
        Time(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Microseconds since the epoch, truncated to 32 bits as carried on the wire
    /// (docs/protocol.md#timestamps): wraps every ~71.6 minutes; only differences are used.
    pub const fn wire_micros(self) -> u32 {
        (self.0 / 1_000) as u32
    }

    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Time::MAX`].
    pub fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(duration_nanos(d)))
    }

    /// `self - d`, saturating at [`Time::ZERO`].
    pub fn saturating_sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(duration_nanos(d)))
    }
}

/// A duration in nanoseconds, saturating at `u64::MAX` (584 years).
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `secs` seconds as a `Duration`, saturating: negative or NaN gives zero, too large gives
/// `Duration::MAX`. Cheaper than `Duration::try_from_secs_f64` on the per-packet path.
pub fn secs_f64_saturating(secs: f64) -> Duration {
    let nanos = secs * 1e9;
    if nanos >= u64::MAX as f64 {
        Duration::MAX
    } else if nanos > 0.0 {
        Duration::from_nanos(nanos as u64)
    } else {
        Duration::ZERO
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Saturating: a later `rhs` gives zero.
    fn sub(self, rhs: Time) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}s",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_millis(5);
        assert_eq!(t + Duration::from_millis(1), Time::from_micros(6_000));
        assert_eq!(Time::ZERO - t, Duration::ZERO);
        assert_eq!(t - Time::ZERO, Duration::from_millis(5));
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(
            Time::ZERO.saturating_sub(Duration::from_secs(1)),
            Time::ZERO
        );
    }

    #[test]
    fn secs_f64_saturates() {
        assert_eq!(secs_f64_saturating(1.5), Duration::from_millis(1500));
        assert_eq!(secs_f64_saturating(-1.0), Duration::ZERO);
        assert_eq!(secs_f64_saturating(f64::NAN), Duration::ZERO);
        assert_eq!(secs_f64_saturating(1e300), Duration::MAX);
        assert_eq!(secs_f64_saturating(f64::INFINITY), Duration::MAX);
    }

    #[test]
    fn wire_micros_wraps() {
        let t = Time::from_micros(u64::from(u32::MAX) + 5);
        assert_eq!(t.wire_micros(), 4);
    }
}
