//! CUBIC (RFC 9438): after a congestion event the window follows
//! `W_cubic(t) = C·(t − K)³ + W_max` (§4.2) in the time `t` since the congestion-avoidance
//! stage began, concave up to the window `W_max` where the loss happened, then convex; never
//! slower than the Reno estimate `W_est` (§4.3). A cut multiplies the window by
//! `beta_cubic` = 0.7 (§4.6) and, if the window had not regained the last `W_max`, lowers
//! `W_max` further to make room for new flows (fast convergence, §4.7). Before the first
//! event the window grows as NewReno's slow start (RFC 9438 §4.10 allows HyStart++, not
//! used here).
//!
//! Units: the RFC counts segments; here windows are bytes and the formulas divide by `mss`
//! where a segment count is needed (`W_cubic`, `K`). Time comes only from `now`; the RTT of
//! `W_cubic(t + RTT)` is the smoothed RTT of the ACK (§4.2). Application-limited ACKs do
//! not grow the window (§5.8).
//!
//! Invariants: `cwnd` and `w_est` are finite and within [`min_window`]`(mss)..=`
//! [`MAX_WINDOW`]; `K` is finite; an undo restores every variable to its value before the
//! cut (§4.9).

use super::aimd::{clamp_window, sane_mss};
use super::{Acked, CongestionController, Coupling, INITIAL_WINDOW_DATAGRAMS, min_window};
use crate::time::Time;

/// RFC 9438 §5: C = 0.4 (segments per second³).
const C: f64 = 0.4;
/// RFC 9438 §4.6: multiplicative decrease factor.
const BETA: f64 = 0.7;
/// RFC 9438 §4.3: Reno-friendly additive increase, 3·(1 − β)/(1 + β) segments per RTT.
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// Every variable an undo restores (RFC 9438 §4.9).
#[derive(Clone, Copy, Debug)]
struct State {
    cwnd: f64,
    ssthresh: f64,
    /// Window just before the last cut, bytes (0 before the first: no fast convergence).
    w_max: f64,
    /// Seconds from the epoch until `W_cubic` reaches `w_max`.
    k: f64,
    /// Start of the current congestion-avoidance stage; `None`: starts at the next ACK.
    epoch: Option<Time>,
    /// Reno-friendly estimate, bytes (§4.3).
    w_est: f64,
    /// `cwnd` when `ssthresh` was last set: `W_est` grows with `ALPHA` below it, 1 above.
    cwnd_prior: f64,
    /// After persistent congestion the next stage starts with `K` = 0 and `W_max` =
    /// the window then (§4.8).
    after_timeout: bool,
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct Cubic {
    mss: u64,
    s: State,
    before_cut: Option<State>,
    /// Bytes in flight when the pending congestion event's losses were found.
    flight_at_loss: Option<f64>,
}

impl Cubic {
    /// A controller in slow start with the initial window, for datagrams of `mss` bytes.
    pub fn new(mss: u64) -> Cubic {
        let mss = sane_mss(mss);
        let cwnd = clamp_window((INITIAL_WINDOW_DATAGRAMS * mss) as f64, mss);
        Cubic {
            mss,
            s: State {
                cwnd,
                ssthresh: f64::INFINITY,
                w_max: 0.0,
                k: 0.0,
                epoch: None,
                w_est: cwnd,
                cwnd_prior: cwnd,
                after_timeout: false,
            },
            before_cut: None,
            flight_at_loss: None,
        }
    }

    fn mss(&self) -> f64 {
        self.mss as f64
    }

    fn clamp(&self, w: f64) -> f64 {
        clamp_window(w, self.mss)
    }

    /// `W_cubic(t)` in bytes (§4.2, Figure 1; `C` is in segments, hence the `mss`).
    fn w_cubic(&self, t: f64) -> f64 {
        let d = t - self.s.k;
        C * d * d * d * self.mss() + self.s.w_max
    }

    /// Starts a congestion-avoidance stage at `now` (§4.2: `K` from `W_max` and the window
    /// at the start of the stage; §4.8 after a timeout).
    fn start_epoch(&mut self, now: Time) {
        let s = &mut self.s;
        s.epoch = Some(now);
        s.w_est = s.cwnd;
        if s.after_timeout || s.w_max <= 0.0 {
            s.after_timeout = false;
            s.w_max = s.cwnd;
            s.k = 0.0;
        } else {
            // Negative when the stage starts above W_max: convex from the start.
            s.k = ((s.w_max - s.cwnd) / self.mss as f64 / C).cbrt();
        }
        if !s.k.is_finite() {
            s.k = 0.0;
        }
    }
}

impl CongestionController for Cubic {
    fn on_ack(&mut self, now: Time, acked: &Acked, _coupling: &Coupling<'_>) {
        if acked.app_limited || acked.bytes == 0 {
            return;
        }
        let bytes = acked.bytes as f64;
        if self.s.cwnd < self.s.ssthresh {
            self.s.cwnd = self.clamp(self.s.cwnd + bytes);
            return;
        }
        if self.s.epoch.is_none() {
            self.start_epoch(now);
        }
        let epoch = self.s.epoch.unwrap_or(now);
        let t = now.saturating_since(epoch).as_secs_f64();
        let rtt = acked.srtt.as_secs_f64();
        let cwnd = self.s.cwnd;
        // §4.3: W_est gains alpha segments per window of segments acknowledged; alpha
        // becomes 1 once W_est has regained the window before the last cut.
        let alpha = if self.s.w_est >= self.s.cwnd_prior {
            1.0
        } else {
            ALPHA
        };
        self.s.w_est = self.clamp(self.s.w_est + alpha * bytes * self.mss() / cwnd);
        let next = if self.w_cubic(t) < self.s.w_est {
            // §4.3: Reno-friendly region.
            self.s.w_est
        } else {
            // §4.4/§4.5: move toward W_cubic one RTT ahead, by (target − cwnd)/cwnd per
            // segment acknowledged, the target kept within [cwnd, 1.5·cwnd].
            let target = self.w_cubic(t + rtt).clamp(cwnd, 1.5 * cwnd);
            cwnd + (target - cwnd) / cwnd * bytes
        };
        self.s.cwnd = self.clamp(next);
    }

    fn on_flight_at_loss(&mut self, flight: u64) {
        self.flight_at_loss = Some(flight as f64);
    }

    fn on_congestion_event(&mut self, _now: Time, _coupling: &Coupling<'_>) {
        self.before_cut = Some(self.s);
        let flight = self.flight_at_loss.take().unwrap_or(f64::INFINITY);
        let s = &mut self.s;
        // RFC 9438 §4.6 reduces from the flight size when it is below the window (a window
        // grown past what was sent is no cushion).
        s.cwnd = s.cwnd.min(flight.max(clamp_window(0.0, self.mss)));
        // §4.7 fast convergence: a cut before regaining W_max lowers it further.
        s.w_max = if s.cwnd < s.w_max {
            s.cwnd * (1.0 + BETA) / 2.0
        } else {
            s.cwnd
        };
        s.cwnd_prior = s.cwnd;
        // §4.6 (cwnd rather than flight size: the trait does not pass the latter).
        s.ssthresh = clamp_window(s.cwnd * BETA, self.mss);
        s.cwnd = s.ssthresh;
        s.epoch = None;
        s.after_timeout = false;
    }

    fn on_spurious_congestion(&mut self, _now: Time) {
        // §4.9: every variable back to its value before the cut.
        if let Some(s) = self.before_cut.take() {
            self.s = s;
        }
    }

    fn on_persistent_congestion(&mut self, _now: Time) {
        // §4.8: ssthresh by beta_cubic, the window to the minimum (RFC 9002 §7.6.2), and
        // the next stage starts afresh with K = 0.
        self.before_cut = None;
        let s = &mut self.s;
        s.cwnd_prior = s.cwnd;
        s.ssthresh = clamp_window(s.cwnd * BETA, self.mss);
        s.cwnd = min_window(self.mss) as f64;
        s.epoch = None;
        s.after_timeout = true;
    }

    fn window(&self) -> u64 {
        self.s.cwnd as u64
    }

    fn name(&self) -> &'static str {
        "cubic"
    }
}
