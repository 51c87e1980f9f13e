//! What the loss-based controllers (LIA, BALIA, mHIP) share with NewReno: a byte window
//! with NewReno's slow start (RFC 9002 §7.3.1), a slow-start threshold set by each cut, the
//! record of the last cut for an undo, persistent congestion (RFC 9002 §7.6.2), and the
//! sums over a [`Coupling`] that the coupled increases are computed from.
//!
//! Invariants: every window the controllers hold is finite and within
//! [`min_window`]`(mss)..=`[`MAX_WINDOW`] after every method (every write goes through
//! [`clamp_window`], which maps NaN and infinities to a bound); `mss` is taken within
//! `1..=`[`MAX_MSS`] ([`sane_mss`]), so `min_window(mss)` neither overflows nor exceeds
//! [`MAX_WINDOW`]; an RTT divided by is at least [`MIN_RTT_SECS`].

use std::time::Duration;

use super::{Coupling, INITIAL_WINDOW_DATAGRAMS, MAX_WINDOW, min_window};

/// Largest datagram size the controllers take at face value (the largest UDP payload);
/// a larger `mss` is a caller's bug, clamped rather than allowed to overflow the windows.
pub(super) const MAX_MSS: u64 = 65_535;

/// Smallest RTT, seconds, that coupled formulas divide by: a zero SRTT (a loopback path, or
/// a fabricated sample) must not make a rate infinite.
pub(super) const MIN_RTT_SECS: f64 = 1e-6;

/// `mss` clamped to `1..=MAX_MSS` (see the module invariants).
pub(super) fn sane_mss(mss: u64) -> u64 {
    mss.clamp(1, MAX_MSS)
}

/// `w` within [`min_window`]`(mss)..=`[`MAX_WINDOW`] for a [`sane_mss`] `mss`; NaN gives
/// the minimum.
pub(super) fn clamp_window(w: f64, mss: u64) -> f64 {
    let lo = min_window(sane_mss(mss)) as f64;
    if w.is_nan() {
        lo
    } else {
        w.clamp(lo, MAX_WINDOW as f64)
    }
}

/// An RTT in seconds, floored at [`MIN_RTT_SECS`].
pub(super) fn rtt_secs(rtt: Duration) -> f64 {
    rtt.as_secs_f64().max(MIN_RTT_SECS)
}

/// The other paths that count in coupled sums: usable, with an RTT sample, not `this`
/// (the caller adds its own path with its current window, fresher than the snapshot).
/// Yields `(window bytes, srtt seconds)`.
pub(super) fn peers<'a>(coupling: &'a Coupling<'_>) -> impl Iterator<Item = (f64, f64)> + 'a {
    coupling
        .paths
        .iter()
        .filter(move |p| p.usable && p.id != coupling.this)
        .filter_map(|p| Some((p.window as f64, rtt_secs(p.srtt?))))
}

/// See the module docs.
#[derive(Clone, Copy, Debug)]
pub(super) struct RenoWindow {
    pub(super) mss: u64,
    window: f64,
    ssthresh: f64,
    /// `(window, ssthresh)` before the last cut, for an undo.
    before_cut: Option<(f64, f64)>,
    /// Bytes in flight when the pending congestion event's losses were found.
    flight_at_loss: Option<f64>,
}

impl RenoWindow {
    /// The initial window (RFC 9002 §7.2) in slow start, for datagrams of `mss` bytes.
    pub(super) fn new(mss: u64) -> RenoWindow {
        let mss = sane_mss(mss);
        let mut w = RenoWindow {
            mss,
            window: 0.0,
            ssthresh: f64::INFINITY,
            before_cut: None,
            flight_at_loss: None,
        };
        w.window = w.clamp((INITIAL_WINDOW_DATAGRAMS * mss) as f64);
        w
    }

    /// `w` within the window bounds; NaN gives the minimum.
    pub(super) fn clamp(&self, w: f64) -> f64 {
        clamp_window(w, self.mss)
    }

    /// The window, bytes (fractions of a byte kept for the next increase).
    pub(super) fn bytes(&self) -> f64 {
        self.window
    }

    /// The window, whole bytes.
    pub(super) fn window(&self) -> u64 {
        self.window as u64
    }

    /// Below the threshold: slow start.
    pub(super) fn in_slow_start(&self) -> bool {
        self.window < self.ssthresh
    }

    /// Slow start: one byte of window per byte acknowledged, as NewReno.
    pub(super) fn slow_start(&mut self, bytes: u64) {
        self.window = self.clamp(self.window + bytes as f64);
    }

    /// Congestion avoidance: add `bytes` (ignored unless finite and positive).
    pub(super) fn grow(&mut self, bytes: f64) {
        if bytes.is_finite() && bytes > 0.0 {
            self.window = self.clamp(self.window + bytes);
        }
    }

    /// Bytes in flight when a congestion event's losses were found (see
    /// [`RenoWindow::cut_base`]).
    pub(super) fn note_flight(&mut self, flight: u64) {
        self.flight_at_loss = Some(flight as f64);
    }

    /// What a cut reduces: the smaller of the window and the flight noted for this event
    /// (RFC 5681 eq. 4's FlightSize), so a window grown past what was used is no cushion.
    pub(super) fn cut_base(&mut self) -> f64 {
        let flight = self.flight_at_loss.take().unwrap_or(f64::INFINITY);
        self.window.min(flight)
    }

    /// A congestion event: window and threshold become `new_window` (clamped); the state
    /// before is kept for [`RenoWindow::undo`].
    pub(super) fn cut_to(&mut self, new_window: f64) {
        self.before_cut = Some((self.window, self.ssthresh));
        self.ssthresh = self.clamp(new_window);
        self.window = self.ssthresh;
    }

    /// The last cut was spurious: back to the window (if larger than now) and threshold
    /// before it, as NewReno does. `false` if there was no cut to undo.
    pub(super) fn undo(&mut self) -> bool {
        match self.before_cut.take() {
            Some((window, ssthresh)) => {
                self.window = self.clamp(self.window.max(window));
                self.ssthresh = ssthresh;
                true
            }
            None => false,
        }
    }

    /// Restores exactly the window and threshold before the last cut (seed mHIP's ADDR).
    pub(super) fn restore(&mut self) -> bool {
        match self.before_cut.take() {
            Some((window, ssthresh)) => {
                self.window = self.clamp(window);
                self.ssthresh = ssthresh;
                true
            }
            None => false,
        }
    }

    /// Persistent congestion: the minimum window, half the old one as threshold (as
    /// NewReno), nothing left to undo.
    pub(super) fn collapse(&mut self) {
        self.before_cut = None;
        self.ssthresh = self.clamp(self.window / 2.0);
        self.window = min_window(self.mss) as f64;
    }
}
