//! Which flows are sparse enough to be delivered out of order (docs/protocol.md#unordered).
//!
//! A flow is sparse when it sent at most `limit` bytes in each of the last two windows of
//! [`WINDOW`] (the current one and the one before): a call, a ping, DNS, a game's updates,
//! the ACKs of a slow transfer; not a bulk transfer, whose packets must stay in the
//! session's global order or its TCP sees reordering. The queue keeps TCP's packets in the
//! order however sparse (`may_leave_the_order` in the parent module). Counting in whole
//! windows keeps the meter integer-only (deterministic) and O(1) per packet.
//!
//! Invariant: a flow is judged on bytes it pushed at times up to now; a flow that was
//! never pushed is sparse (it sent nothing).

use std::time::Duration;

use crate::time::Time;

/// Length of one counting window.
pub const WINDOW: Duration = Duration::from_millis(100);

/// Bytes a flow pushed in its current and previous window.
#[derive(Clone, Copy, Debug, Default)]
pub struct SparseMeter {
    /// Index of the current window (`time / WINDOW`).
    window: u64,
    current: u64,
    previous: u64,
}

fn window_of(t: Time) -> u64 {
    let micros = u64::try_from(t.saturating_since(Time::ZERO).as_micros()).unwrap_or(u64::MAX);
    micros / WINDOW.as_micros() as u64
}

impl SparseMeter {
    fn roll(&mut self, now: Time) {
        let w = window_of(now);
        if w == self.window {
            return;
        }
        self.previous = if w == self.window + 1 {
            self.current
        } else {
            0
        };
        self.current = 0;
        self.window = w;
    }

    /// Counts `len` bytes pushed at `now`.
    pub fn add(&mut self, now: Time, len: usize) {
        self.roll(now);
        self.current = self.current.saturating_add(len as u64);
    }

    /// Whether the flow stayed at or under `limit` bytes in both windows, at `now`.
    pub fn is_sparse(&mut self, now: Time, limit: u64) -> bool {
        self.roll(now);
        self.current <= limit && self.previous <= limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_is_sparse_until_it_sends_more_than_the_limit_in_a_window() {
        let mut m = SparseMeter::default();
        let t = Time::from_millis(1_000);
        assert!(m.is_sparse(t, 1000));
        m.add(t, 600);
        assert!(m.is_sparse(t, 1000));
        m.add(t + Duration::from_millis(50), 600);
        assert!(!m.is_sparse(t + Duration::from_millis(50), 1000));
        // The next window still remembers the busy one…
        assert!(!m.is_sparse(t + Duration::from_millis(150), 1000));
        // …and two quiet windows later the flow is sparse again.
        assert!(m.is_sparse(t + Duration::from_millis(250), 1000));
        // A long gap forgets everything at once.
        m.add(t + Duration::from_millis(260), 5000);
        assert!(!m.is_sparse(t + Duration::from_millis(260), 1000));
        assert!(m.is_sparse(t + Duration::from_secs(10), 1000));
    }
}
