//! Receive-window auto-tuning (docs/protocol.md#window-auto-tuning).
//!
//! A receive window caps a transfer at about `window / loop time`, where the loop time is
//! how long credit takes to come back as readable bytes: the update's trip to the sender,
//! the data's trip back over whichever path carries it, and the wait of bytes that arrived
//! beyond a hole until the hole fills (resequencing). Over one path the receiver's SRTT
//! covers it (Chromium QUIC's and Linux TCP DRS's rule: grow when a window is used up within
//! a couple of RTTs). Over paths of unequal delay it does not: the receiver of a one-way
//! transfer sends few ack-eliciting datagrams, and their acknowledgements ride on the
//! sender's data on the fastest path, so the receiver's SRTT of every path stays near the
//! fastest path's round trip (seen in `scenarios/etom-fig4.toml` at 1:8: 31 ms at the
//! receiver for a path whose sender-side SRTT was 200-400 ms), and windows the slow path's
//! holes were holding up never grew. So the loop time here also counts the resequencing
//! delay the receiver measures directly ([`ResequencingDelay`]): the fastest path's round
//! trip plus that delay is the update's trip back over the fastest path plus the data's
//! trip over the slowest; the loop time is that or the longest SRTT, whichever is longer
//! ([`loop_time`]).
//!
//! Invariants:
//! - [`tuned_window`] never returns less than the window it was given (windows never
//!   shrink) nor more than the hard bound it was given (unless the window already was);
//! - a window doubles only at an update less than [`GROWTH_LOOPS`] loop times after the
//!   previous update of the same window (it was used up that fast); a reader slower than
//!   `window / (2 × GROWTH_LOOPS × loop time)` never makes it grow;
//! - a [`ResequencingProbe`] holds one `(time, offset)` pair: O(1) memory per stream; the
//!   session keeps one [`ResequencingDelay`];
//! - no clock is read: time comes in as arguments.

use std::time::Duration;

use crate::time::Time;

/// A window grows when it is updated again less than this many loop times after its last
/// update (Chromium QUIC's `QuicFlowController` uses two RTTs).
pub const GROWTH_LOOPS: u32 = 2;

/// Gain of the resequencing delay's moving average (RFC 6298's SRTT gain).
const GAIN_SHIFT: u32 = 3;

/// The window after an update at `now` of a window of `window` bytes whose previous update
/// was at `last_update`: doubled (capped at `max`) if that was less than
/// [`GROWTH_LOOPS`] × `loop_time` ago, else unchanged (docs/protocol.md#window-auto-tuning).
pub fn tuned_window(
    window: u64,
    max: u64,
    last_update: Option<Time>,
    now: Time,
    loop_time: Duration,
) -> u64 {
    let quick = last_update.is_some_and(|t| now.saturating_since(t) < loop_time * GROWTH_LOOPS);
    if quick {
        window.saturating_mul(2).min(max).max(window)
    } else {
        window
    }
}

/// The receiver's smoothed RTTs over its usable paths, as auto-tuning takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathRtts {
    /// The shortest SRTT.
    pub shortest: Duration,
    /// The longest SRTT.
    pub longest: Duration,
}

impl PathRtts {
    /// One RTT for every path.
    pub const fn uniform(rtt: Duration) -> PathRtts {
        PathRtts {
            shortest: rtt,
            longest: rtt,
        }
    }
}

/// The loop time auto-tuning compares update intervals with: the longest SRTT, or the
/// shortest SRTT plus the smoothed resequencing delay (zero before any sample) if that is
/// longer. Adding the delay to the longest SRTT instead would count a slow path's queue
/// twice once the receiver's SRTT of that path sees it.
pub fn loop_time(rtts: PathRtts, resequencing: &ResequencingDelay) -> Duration {
    let reordered = rtts
        .shortest
        .saturating_add(resequencing.get().unwrap_or(Duration::ZERO));
    rtts.longest.max(reordered)
}

/// Measures, on one stream, how long bytes that arrived beyond a hole wait until every
/// byte before them has arrived: at an arrival that ends beyond the in-order data, it
/// notes `(now, end)`; at the arrival after which all bytes below `end` are in, the wait
/// is a sample. One measurement at a time, so samples come at most once per resequencing
/// delay and cost O(1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResequencingProbe {
    armed: Option<(Time, u64)>,
}

impl ResequencingProbe {
    /// Stream bytes up to `end` arrived at `now`; afterwards every byte below `in_order_end`
    /// has arrived. Returns a sample when the measured wait ended.
    pub fn on_arrival(&mut self, now: Time, end: u64, in_order_end: u64) -> Option<Duration> {
        if let Some((since, target)) = self.armed {
            if in_order_end >= target {
                self.armed = None;
                return Some(now.saturating_since(since));
            }
            return None;
        }
        if end > in_order_end {
            self.armed = Some((now, end));
        }
        None
    }
}

/// The smoothed resequencing delay of a session's streams (moving average, gain 1/8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResequencingDelay {
    smoothed: Option<Duration>,
    samples: u64,
}

impl ResequencingDelay {
    /// Takes one sample.
    pub fn on_sample(&mut self, sample: Duration) {
        self.samples += 1;
        self.smoothed = Some(match self.smoothed {
            None => sample,
            // s ← s + (sample − s) / 8, in nanoseconds without overflow.
            Some(s) => {
                let (s_ns, x_ns) = (s.as_nanos(), sample.as_nanos());
                let next = if x_ns >= s_ns {
                    s_ns + ((x_ns - s_ns) >> GAIN_SHIFT)
                } else {
                    s_ns - ((s_ns - x_ns) >> GAIN_SHIFT)
                };
                Duration::from_nanos(u64::try_from(next).unwrap_or(u64::MAX))
            }
        });
    }

    /// The smoothed delay, once sampled.
    pub fn get(&self) -> Option<Duration> {
        self.smoothed
    }

    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    #[test]
    fn grows_when_used_up_within_two_loops_only() {
        let loop_ms = 100 * MS;
        assert_eq!(tuned_window(1000, 8000, None, at(5), loop_ms), 1000);
        assert_eq!(
            tuned_window(1000, 8000, Some(at(0)), at(199), loop_ms),
            2000
        );
        assert_eq!(
            tuned_window(1000, 8000, Some(at(0)), at(200), loop_ms),
            1000
        );
        assert_eq!(tuned_window(6000, 8000, Some(at(0)), at(10), loop_ms), 8000);
        assert_eq!(tuned_window(8000, 8000, Some(at(0)), at(10), loop_ms), 8000);
    }

    #[test]
    fn the_loop_time_adds_the_resequencing_delay() {
        let mut d = ResequencingDelay::default();
        let rtts = |shortest: u32, longest: u32| PathRtts {
            shortest: shortest * MS,
            longest: longest * MS,
        };
        assert_eq!(loop_time(rtts(30, 40), &d), 40 * MS);
        d.on_sample(370 * MS);
        assert_eq!(loop_time(rtts(30, 40), &d), 400 * MS);
        // The slow path's SRTT already holds its queue: not counted twice.
        assert_eq!(loop_time(rtts(30, 420), &d), 420 * MS);
        // The multipath case of the module docs: the receiver's SRTT (31 ms) alone never lets
        // a window updated every 150 ms grow; with the slow path's holes counted it does.
        let update_every = at(150);
        assert_eq!(
            tuned_window(256, 1024, Some(at(0)), update_every, 31 * MS),
            256
        );
        assert_eq!(
            tuned_window(
                256,
                1024,
                Some(at(0)),
                update_every,
                loop_time(rtts(31, 31), &d)
            ),
            512
        );
    }

    #[test]
    fn a_probe_measures_the_wait_of_bytes_beyond_a_hole() {
        let mut p = ResequencingProbe::default();
        // In order: nothing to measure.
        assert_eq!(p.on_arrival(at(0), 100, 100), None);
        // 200..300 arrives beyond the hole 100..200.
        assert_eq!(p.on_arrival(at(10), 300, 100), None);
        // More beyond the hole does not restart the measurement.
        assert_eq!(p.on_arrival(at(20), 400, 100), None);
        // Part of the hole: 300 is not yet in order.
        assert_eq!(p.on_arrival(at(30), 150, 150), None);
        // The rest: everything below 300 (and 400) is in.
        assert_eq!(p.on_arrival(at(250), 200, 400), Some(240 * MS));
        // Next arrival beyond a new hole arms again.
        assert_eq!(p.on_arrival(at(260), 600, 400), None);
        assert_eq!(p.on_arrival(at(300), 500, 600), Some(40 * MS));
    }

    #[test]
    fn the_delay_is_a_moving_average() {
        let mut d = ResequencingDelay::default();
        assert_eq!(d.get(), None);
        d.on_sample(80 * MS);
        assert_eq!(d.get(), Some(80 * MS));
        d.on_sample(160 * MS);
        assert_eq!(d.get(), Some(90 * MS));
        d.on_sample(10 * MS);
        assert_eq!(d.get(), Some(80 * MS));
        assert_eq!(d.samples(), 3);
    }

    proptest! {
        /// Whatever the update times: the window never shrinks, never passes its bound, and
        /// grows exactly when the update came within two loop times.
        #[test]
        fn never_beyond_the_bound_never_shrinks(
            start in 1u64..1 << 20,
            max_shift in 0u32..8,
            gaps_ms in proptest::collection::vec(0u64..2_000, 1..64),
            loop_ms in 0u64..1_000,
        ) {
            let max = start << max_shift;
            let loop_time = MS * loop_ms as u32;
            let (mut window, mut last, mut now) = (start, None, at(0));
            for gap in gaps_ms {
                now = now.saturating_add(MS * gap as u32);
                let next = tuned_window(window, max, last, now, loop_time);
                prop_assert!(next >= window && next <= max);
                let quick = last.is_some_and(|t: Time| now.saturating_since(t) < loop_time * 2);
                prop_assert_eq!(next > window, quick && window < max);
                window = next;
                last = Some(now);
            }
        }

        /// A reader consuming half a window per update at a fixed rate: the window grows while
        /// half of it takes less than two loop times to read, and stops at the first size
        /// that does not (or at the bound): a slow reader keeps a small window.
        #[test]
        fn settles_where_the_reader_is_slower_than_the_loop(
            rate_kb_s in 1u64..100_000,
            loop_ms in 1u64..1_000,
        ) {
            let (start, max) = (64u64 << 10, 64u64 << 20);
            let loop_time = MS * loop_ms as u32;
            let rate = rate_kb_s * 1000;
            let (mut window, mut last, mut now_ns) = (start, None, 0u64);
            for _ in 0..64 {
                now_ns += window / 2 * 1_000_000_000 / rate;
                let now = Time::from_nanos(now_ns);
                window = tuned_window(window, max, last, now, loop_time);
                last = Some(now);
            }
            // Half the final window takes at least two loop times to read, unless the bound
            // was reached; half the window before the last doubling took less.
            let half_window_time = |w: u64| Duration::from_nanos(w / 2 * 1_000_000_000 / rate);
            prop_assert!(window == max || half_window_time(window) >= loop_time * 2);
            if window > start {
                prop_assert!(half_window_time(window / 2) < loop_time * 2);
            }
        }

        /// Bytes arriving in any order: every sample is the time from an arrival beyond the
        /// in-order data to the arrival that completed everything below it, so samples are
        /// never longer than the whole run and none is taken while bytes arrive in order.
        #[test]
        fn probes_sample_only_holes(order in Just((0u64..32).collect::<Vec<_>>()).prop_shuffle()) {
            let mut p = ResequencingProbe::default();
            let mut got = [false; 32];
            let mut samples = 0;
            for (i, piece) in order.iter().enumerate() {
                got[*piece as usize] = true;
                let in_order = got.iter().take_while(|g| **g).count() as u64;
                if let Some(s) = p.on_arrival(at(i as u64), piece + 1, in_order) {
                    samples += 1;
                    prop_assert!(s <= 31 * MS);
                }
            }
            let sorted = order.windows(2).all(|w| w[0] < w[1]);
            if sorted {
                prop_assert_eq!(samples, 0);
            }
        }
    }
}
