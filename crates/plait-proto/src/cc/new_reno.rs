//! NewReno (RFC 9002 §7.3 and Appendix B, after RFC 6582 / RFC 5681): slow start doubles
//! the window each round trip until the first loss, congestion avoidance adds one datagram
//! per window acknowledged, a congestion event halves it. This is the per-link TCP of
//! seed ETOM's split connection (§IV-B), run per path.
//!
//! The cut halves the smaller of the window and the bytes in flight when the losses were
//! found (RFC 5681 eq. 4's FlightSize), so a window slow start grew past what was used is
//! no cushion.
//!
//! Invariant: the own window stays within [`min_window`]`(mss)..=`[`MAX_WINDOW`]; under a
//! cap ([`NewReno::limit`]) it grows to at most twice the cap, and [`NewReno::unlimit`]
//! brings it within twice the last cap; the window used is the smaller of the own window
//! and the cap, never under the minimum window.

use super::{
    Acked, CongestionController, Coupling, INITIAL_WINDOW_DATAGRAMS, MAX_WINDOW, min_window,
};
use crate::time::Time;

/// RFC 9002 kLossReductionFactor.
const LOSS_REDUCTION: f64 = 0.5;

/// See the module docs.
#[derive(Clone, Debug)]
pub struct NewReno {
    mss: u64,
    window: u64,
    ssthresh: u64,
    /// Bytes acknowledged in congestion avoidance not yet turned into window growth.
    avoidance_credit: u64,
    /// `(window, ssthresh)` before the last cut, for an undo.
    before_cut: Option<(u64, u64)>,
    /// Bytes in flight when the pending congestion event's losses were found.
    flight_at_loss: Option<u64>,
    /// The bound [`super::Adaptive`]'s queue cap puts on the window used (`None`: none).
    cap: Option<u64>,
}

impl NewReno {
    /// A controller in slow start with the initial window, for datagrams of `mss` bytes.
    pub fn new(mss: u64) -> NewReno {
        let mss = mss.clamp(1, 65_535);
        NewReno {
            mss,
            window: (INITIAL_WINDOW_DATAGRAMS * mss).clamp(min_window(mss), MAX_WINDOW),
            ssthresh: u64::MAX,
            avoidance_credit: 0,
            before_cut: None,
            flight_at_loss: None,
            cap: None,
        }
    }

    /// A controller in congestion avoidance at `window` bytes (within the bounds), as
    /// [`super::Adaptive`] hands a path back from BBR: the window BBR measured is the
    /// path's, so slow start would only overshoot it.
    pub fn in_avoidance(mss: u64, window: u64) -> NewReno {
        let mut c = NewReno::new(mss);
        c.window = window.clamp(min_window(c.mss), MAX_WINDOW);
        c.ssthresh = c.window;
        c
    }

    /// Bounds the window used to `cap` bytes (never below the minimum window). NewReno's
    /// own window, threshold and slow start are kept, so the window grows again as soon as
    /// the cap does, and a cut halves the flight at the loss (RFC 5681's FlightSize), not
    /// a window the cap lowered after those datagrams left. Under the cap the own window
    /// grows to at most twice it, what slow start reaches in a round; a lower cap does not
    /// shrink it: the cap follows a model's rate, which falls with the link's and comes
    /// back with it (docs/protocol.md#rate-drop), while the own window is what losses
    /// taught, and halving it on a cap's fall would leave it to regrow a datagram a round.
    pub fn limit(&mut self, cap: u64) {
        self.cap = Some(cap.max(min_window(self.mss)));
    }

    /// Lifts the bound [`NewReno::limit`] set: the own window, within twice the last cap
    /// (what slow start would reach in a round from it), is the window used again.
    pub fn unlimit(&mut self) {
        if let Some(cap) = self.cap.take() {
            self.window = self.window.min(cap.saturating_mul(2));
        }
    }

    /// After a cut: the own window and threshold are at least `floor` bytes (within the
    /// window bounds); [`super::Adaptive`] keeps its model's BDP this way.
    pub fn keep_at_least(&mut self, floor: u64) {
        let floor = floor.clamp(min_window(self.mss), MAX_WINDOW);
        self.window = self.window.max(floor);
        self.ssthresh = self.ssthresh.max(floor);
    }

    /// The own window, bytes: the window used but for the cap ([`NewReno::limit`]).
    pub fn own_window(&self) -> u64 {
        self.window
    }

    /// The slow-start threshold (`u64::MAX` until the first congestion event).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
}

impl CongestionController for NewReno {
    fn on_ack(&mut self, _now: Time, acked: &Acked, _coupling: &Coupling<'_>) {
        if acked.app_limited {
            return;
        }
        let before = self.window;
        if self.window < self.ssthresh {
            self.window = self.window.saturating_add(acked.bytes);
        } else {
            self.avoidance_credit = self.avoidance_credit.saturating_add(acked.bytes);
            if self.avoidance_credit >= self.window {
                self.avoidance_credit -= self.window;
                self.window = self.window.saturating_add(self.mss);
            }
        }
        // Under a cap, growth stops at twice it; a window already above stays (`limit`).
        let bound = self
            .cap
            .map_or(MAX_WINDOW, |cap| cap.saturating_mul(2).max(before));
        self.window = self.window.min(bound).min(MAX_WINDOW);
    }

    fn on_flight_at_loss(&mut self, flight: u64) {
        self.flight_at_loss = Some(flight);
    }

    fn on_congestion_event(&mut self, _now: Time, _coupling: &Coupling<'_>) {
        self.before_cut = Some((self.window, self.ssthresh));
        // RFC 5681 eq. 4: halve what was in flight, not a window slow start grew beyond
        // what the sender used (in the simulator, a window of 300 datagrams with 130-180 in
        // flight was "halved" to 153, no back-off at all, and starved a competing TCP).
        let used = CongestionController::window(self);
        let base = self
            .flight_at_loss
            .take()
            .map_or(used, |f| f.min(self.window));
        let cut = (base as f64 * LOSS_REDUCTION) as u64;
        self.ssthresh = cut.max(min_window(self.mss));
        self.window = self.ssthresh;
        self.avoidance_credit = 0;
    }

    fn on_spurious_congestion(&mut self, _now: Time) {
        if let Some((window, ssthresh)) = self.before_cut.take() {
            self.window = self.window.max(window);
            self.ssthresh = ssthresh;
        }
    }

    fn on_persistent_congestion(&mut self, _now: Time) {
        self.before_cut = None;
        // Half the window used (the own one may be far above a cap that fell); the path
        // that comes back gets no cap until its owner sets a new one.
        self.ssthresh = (CongestionController::window(self) / 2).max(min_window(self.mss));
        self.cap = None;
        self.window = min_window(self.mss);
        self.avoidance_credit = 0;
    }

    fn window(&self) -> u64 {
        self.cap.map_or(self.window, |cap| self.window.min(cap))
    }

    fn name(&self) -> &'static str {
        "newreno"
    }
}
