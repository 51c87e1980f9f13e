//! LIA, the "Linked Increases" algorithm of RFC 6356 (MPTCP): each path keeps a NewReno
//! window (slow start, halving on a congestion event; RFC 6356 §3 changes only the
//! increase), but in congestion avoidance an ACK of `bytes` on path i adds
//!
//! ```text
//! min(alpha · bytes · mss / total, bytes · mss / w_i)
//! alpha = total · max_k(w_k / rtt_k²) / (Σ_k w_k / rtt_k)²
//! ```
//!
//! (RFC 6356 §3, windows in bytes), so the paths together take no more than one TCP flow
//! would on the best of them, and none more than a TCP flow on its own path.
//!
//! The sums run over this path (its own, current window and the ACK's SRTT) and the other
//! paths of the [`Coupling`] that are usable and have an SRTT; an unusable path sends
//! nothing, and one without an RTT sample cannot be weighed. With this path alone
//! `alpha` = 1 and the increase is NewReno's.
//!
//! Invariants: the window stays within [`min_window`]`(mss)..=`[`MAX_WINDOW`]; `alpha` is
//! finite and positive whenever it is used (every RTT is at least 1 µs, every sum includes
//! this path's window, which is at least the minimum); a non-finite increase is dropped.
//!
//! [`min_window`]: super::min_window
//! [`MAX_WINDOW`]: super::MAX_WINDOW

use super::aimd::{RenoWindow, peers, rtt_secs};
use super::{Acked, CongestionController, Coupling};
use crate::time::Time;

/// See the module docs.
#[derive(Clone, Debug)]
pub struct Lia {
    w: RenoWindow,
}

impl Lia {
    /// A controller in slow start with the initial window, for datagrams of `mss` bytes.
    pub fn new(mss: u64) -> Lia {
        Lia {
            w: RenoWindow::new(mss),
        }
    }

    /// RFC 6356 §3 `alpha` for this path with window `own` and RTT `rtt` (seconds).
    fn alpha(own: f64, rtt: f64, coupling: &Coupling<'_>) -> (f64, f64) {
        let mut total = own;
        let mut best = own / (rtt * rtt);
        let mut rate_sum = own / rtt;
        for (w, r) in peers(coupling) {
            total += w;
            best = best.max(w / (r * r));
            rate_sum += w / r;
        }
        (total * best / (rate_sum * rate_sum), total)
    }
}

impl CongestionController for Lia {
    fn on_ack(&mut self, _now: Time, acked: &Acked, coupling: &Coupling<'_>) {
        if acked.app_limited {
            return;
        }
        if self.w.in_slow_start() {
            self.w.slow_start(acked.bytes);
            return;
        }
        let own = self.w.bytes();
        let (alpha, total) = Lia::alpha(own, rtt_secs(acked.srtt), coupling);
        let scaled = acked.bytes as f64 * self.w.mss as f64;
        // RFC 6356 §3: the coupled increase, capped by what NewReno would add here.
        self.w.grow((alpha * scaled / total).min(scaled / own));
    }

    fn on_congestion_event(&mut self, _now: Time, _coupling: &Coupling<'_>) {
        // RFC 6356 §3: the decrease is TCP's, w_i / 2.
        let base = self.w.cut_base();
        self.w.cut_to(base / 2.0);
    }

    fn on_flight_at_loss(&mut self, flight: u64) {
        self.w.note_flight(flight);
    }

    fn on_spurious_congestion(&mut self, _now: Time) {
        self.w.undo();
    }

    fn on_persistent_congestion(&mut self, _now: Time) {
        self.w.collapse();
    }

    fn window(&self) -> u64 {
        self.w.window()
    }

    fn name(&self) -> &'static str {
        "lia"
    }
}
