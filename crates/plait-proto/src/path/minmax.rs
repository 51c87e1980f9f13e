//! A windowed minimum: the smallest sample seen in the last `window`, kept with three
//! samples (Kathleen Nichols' algorithm, as in Linux `lib/minmax.c` and BBR).
//!
//! Why not "reset to the next sample when the minimum expires": under sustained load every
//! new sample carries queueing delay, so the reset value would be queueing, not the path.
//! The three samples hold the best, second-best and third-best of successive sub-windows, so
//! when the best expires the estimate falls back to the best recent one.
//!
//! Invariant: `s[0] <= s[1] <= s[2]` in value and `s[0].at <= s[1].at <= s[2].at` in time.

use std::time::Duration;

use crate::time::Time;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample<T> {
    value: T,
    at: Time,
}

/// Windowed running minimum of `T`.
#[derive(Clone, Debug)]
pub struct WindowedMin<T> {
    window: Duration,
    s: Option<[Sample<T>; 3]>,
}

impl<T: Copy + PartialOrd> WindowedMin<T> {
    /// An empty filter over `window`.
    pub const fn new(window: Duration) -> Self {
        WindowedMin { window, s: None }
    }

    /// The current minimum.
    pub fn get(&self) -> Option<T> {
        self.s.map(|s| s[0].value)
    }

    /// Feeds a sample taken at `now` (times must not go backwards).
    pub fn update(&mut self, now: Time, value: T) {
        let new = Sample { value, at: now };
        let Some(s) = &mut self.s else {
            self.s = Some([new; 3]);
            return;
        };
        if value <= s[0].value || now.saturating_since(s[2].at) > self.window {
            // A new overall minimum, or nothing in the window: restart.
            *s = [new; 3];
            return;
        }
        if value <= s[1].value {
            s[1] = new;
            s[2] = new;
        } else if value <= s[2].value {
            s[2] = new;
        }
        self.expire(now, new);
    }

    /// Ages the three samples (lib/minmax.c `minmax_subwin_update`).
    fn expire(&mut self, now: Time, new: Sample<T>) {
        let Some(s) = &mut self.s else { return };
        let dt = now.saturating_since(s[0].at);
        if dt > self.window {
            // The best expired: promote the others.
            s[0] = s[1];
            s[1] = s[2];
            s[2] = new;
            if now.saturating_since(s[0].at) > self.window {
                s[0] = s[1];
                s[1] = s[2];
                s[2] = new;
            }
        } else if s[1].at == s[0].at && dt > self.window / 4 {
            // A quarter of the window passed without a second choice: take one.
            s[1] = new;
            s[2] = new;
        } else if s[2].at == s[1].at && dt > self.window / 2 {
            // Half the window passed without a third choice: take one.
            s[2] = new;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(10);

    fn t(s: u64) -> Time {
        Time::from_millis(s * 1000)
    }

    #[test]
    fn keeps_minimum_within_window() {
        let mut m = WindowedMin::new(W);
        m.update(t(0), 50);
        m.update(t(1), 10);
        m.update(t(2), 30);
        assert_eq!(m.get(), Some(10));
    }

    #[test]
    fn falls_back_to_best_recent_not_latest() {
        let mut m = WindowedMin::new(W);
        m.update(t(0), 10);
        // Sustained load: samples between 20 and 40, the best (20) seen mid-window.
        for (i, v) in [35, 30, 20, 38, 33, 36, 39, 34, 37, 40, 36, 38]
            .iter()
            .enumerate()
        {
            m.update(t(1 + i as u64), *v);
        }
        // The 10 expired at 10 s; the estimate is a recent good sample, not the latest 38.
        let got = m.get().unwrap();
        assert!(got <= 34, "{got}");
        assert!(got > 10);
    }

    #[test]
    fn restarts_after_silence() {
        let mut m = WindowedMin::new(W);
        m.update(t(0), 10);
        m.update(t(30), 25);
        assert_eq!(m.get(), Some(25));
    }
}
