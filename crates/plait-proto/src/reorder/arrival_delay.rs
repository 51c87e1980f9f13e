//! Per-path one-way delay estimates for hole deadlines, without clock synchronisation
//! (seed PET-BMP §V-A: "clock synchronization is not required since only the relative delay
//! between the different paths matters").
//!
//! Owns [`TsUnwrapper`] (the sender's 32-bit wrapping microsecond timestamps made into one
//! i64 timeline) and [`PathDelay`] (one path's smoothed offset and deviation).
//!
//! An *offset* sample is `receiver arrival µs - sender timestamp µs`: the path's one-way
//! delay plus the (unknown) difference between the two clocks. The clock difference is the
//! same for every path, so `send_ts + offset(q)` is the receiver time at which a packet sent
//! at `send_ts` on path `q` arrives, exactly, without knowing it.
//!
//! Invariants:
//! - one unwrapper per sender clock, shared by all paths: each timestamp is unwrapped to the
//!   value nearest the last one (correct while consecutive datagrams are within ±35 min);
//! - samples are clamped to ±2^50 µs so no arithmetic overflows on hostile input;
//! - smoothing follows RFC 6298 (gains 1/8 and 1/4), in fixed point, integers only.

/// Unwraps the sender's wrapping 32-bit microsecond timestamps into an i64 timeline.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TsUnwrapper {
    last: Option<i64>,
}

impl TsUnwrapper {
    /// `ts` as the i64 nearest to the last unwrapped value (the first is taken as is).
    pub fn unwrap(&mut self, ts: u32) -> i64 {
        let v = match self.last {
            None => i64::from(ts),
            Some(last) => last.wrapping_add(i64::from(ts.wrapping_sub(last as u32) as i32)),
        };
        self.last = Some(v);
        v
    }
}

/// Largest offset magnitude accepted, in microseconds (~35 years).
const MAX_OFFSET_US: i64 = 1 << 50;

/// One path's offset estimate (see the module docs), microseconds.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PathDelay {
    /// Samples seen.
    samples: u64,
    /// Latest sample.
    latest: i64,
    /// Smoothed offset × 8.
    smoothed8: i64,
    /// Mean deviation × 4.
    dev4: i64,
}

impl PathDelay {
    /// Feeds one offset sample (receiver µs minus unwrapped sender µs).
    pub fn on_sample(&mut self, offset_us: i64) {
        let m = offset_us.clamp(-MAX_OFFSET_US, MAX_OFFSET_US);
        if self.samples == 0 {
            self.smoothed8 = m * 8;
            self.dev4 = 0;
        } else {
            let err = m - (self.smoothed8 >> 3);
            self.smoothed8 += err; // smoothed += err / 8
            self.dev4 += err.abs() - (self.dev4 >> 2); // dev += (|err| - dev) / 4
        }
        self.latest = m;
        self.samples += 1;
    }

    /// The latest a packet can be expected after its send timestamp on this path:
    /// `max(latest sample, smoothed + 4 × deviation)`, or `None` before any sample.
    pub fn offset_hi(&self) -> Option<i64> {
        (self.samples > 0).then(|| self.latest.max((self.smoothed8 >> 3) + self.dev4))
    }

    /// The smoothed offset, or `None` before any sample.
    #[cfg(test)]
    pub fn smoothed(&self) -> Option<i64> {
        (self.samples > 0).then_some(self.smoothed8 >> 3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_across_the_wrap() {
        let mut u = TsUnwrapper::default();
        assert_eq!(u.unwrap(u32::MAX - 10), i64::from(u32::MAX) - 10);
        assert_eq!(u.unwrap(5), i64::from(u32::MAX) + 6);
        // A slightly older timestamp from another path goes back across the wrap.
        assert_eq!(u.unwrap(u32::MAX - 2), i64::from(u32::MAX) - 2);
        assert_eq!(u.unwrap(100), i64::from(u32::MAX) + 101);
    }

    #[test]
    fn unwraps_backwards_below_zero() {
        let mut u = TsUnwrapper::default();
        assert_eq!(u.unwrap(10), 10);
        assert_eq!(u.unwrap(u32::MAX), -1);
        assert_eq!(u.unwrap(3), 3);
    }

    #[test]
    fn constant_samples_have_no_deviation() {
        let mut d = PathDelay::default();
        assert_eq!(d.offset_hi(), None);
        for _ in 0..10 {
            d.on_sample(60_000);
        }
        assert_eq!(d.smoothed(), Some(60_000));
        assert_eq!(d.offset_hi(), Some(60_000));
    }

    #[test]
    fn jitter_widens_the_upper_bound() {
        let mut d = PathDelay::default();
        for k in 0..100 {
            d.on_sample(if k % 2 == 0 { 10_000 } else { 14_000 });
        }
        let hi = d.offset_hi().expect("estimate");
        let s = d.smoothed().expect("estimate");
        assert!((11_000..13_000).contains(&s), "smoothed {s}");
        assert!(hi > 14_000 + 2_000, "upper bound {hi} covers the jitter");
    }

    #[test]
    fn latest_sample_dominates_a_sudden_increase() {
        let mut d = PathDelay::default();
        for _ in 0..20 {
            d.on_sample(1_000);
        }
        d.on_sample(50_000);
        // smoothed 1000 + 49000/8, deviation ×4 = 49000: above the latest sample.
        assert_eq!(d.offset_hi(), Some(1_000 + 49_000 / 8 + 49_000));
    }

    #[test]
    fn hostile_samples_do_not_overflow() {
        let mut d = PathDelay::default();
        for k in 0..1000 {
            d.on_sample(if k % 2 == 0 { i64::MAX } else { i64::MIN });
        }
        assert!(d.offset_hi().is_some());
    }
}
