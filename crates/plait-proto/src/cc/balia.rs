//! BALIA, the Balanced Linked Adaptation of Peng, Walid, Hwang and Low ("Multipath TCP:
//! Analysis, Design and Implementation", IEEE/ACM ToN, 2016; Linux
//! `mptcp_balia.c`). With `x_k = w_k / rtt_k` the rate of path k and
//! `alpha_r = max_k x_k / x_r`, path r in congestion avoidance grows per ACK of `bytes` by
//!
//! ```text
//! x_r / (rtt_r · (Σ_k x_k)²) · (1 + alpha_r)/2 · (4 + alpha_r)/5 · bytes · mss
//! ```
//!
//! and a congestion event removes `(w_r / 2) · min(alpha_r, 1.5)`. Slow start, undo and
//! persistent congestion are NewReno's (as in Linux, where slow start is `tcp_slow_start`).
//!
//! Units: the paper counts packets: per packet acknowledged, `w_r` (packets) gains
//! `x_r/(rtt_r (Σx)²)·…` with `x` in packets per second. Here `x` is in bytes per second,
//! which divides that factor by `mss`; an ACK of `bytes` is `bytes/mss` packets and the
//! window gain is in packets, so in bytes it is the factor (bytes) × `bytes/mss` × `mss`²
//! = factor × `bytes` × `mss`, the formula above. With one path, `alpha` = 1 and the
//! increase is `bytes·mss/w`, NewReno's.
//!
//! The sums run over this path (its own, current window; the ACK's SRTT, or on a loss the
//! last SRTT seen) and the other usable paths of the [`Coupling`] with an SRTT, as Linux
//! counts only subflows that can send and have an RTT sample. Linux truncates `alpha` to an
//! integer for the decrease; the paper's real `alpha` is used here.
//!
//! Invariants: the window stays within [`min_window`]`(mss)..=`[`MAX_WINDOW`]; every rate
//! is finite and this path's is positive (window at least the minimum, RTT at least 1 µs),
//! so `alpha_r` is finite and at least 1; a non-finite increase is dropped.
//!
//! [`min_window`]: super::min_window
//! [`MAX_WINDOW`]: super::MAX_WINDOW

use super::aimd::{RenoWindow, peers, rtt_secs};
use super::{Acked, CongestionController, Coupling};
use crate::time::Time;

/// Most of `alpha_r` a decrease uses: at most `0.75 · w_r` is removed.
const MAX_DECREASE_ALPHA: f64 = 1.5;

/// See the module docs.
#[derive(Clone, Debug)]
pub struct Balia {
    w: RenoWindow,
    /// This path's SRTT from its last ACK, seconds.
    last_rtt: Option<f64>,
}

/// This path's rate, `alpha_r`, and `Σ x_k` (bytes per second).
struct Rates {
    own: f64,
    alpha: f64,
    sum: f64,
}

impl Balia {
    /// A controller in slow start with the initial window, for datagrams of `mss` bytes.
    pub fn new(mss: u64) -> Balia {
        Balia {
            w: RenoWindow::new(mss),
            last_rtt: None,
        }
    }

    fn rates(&self, rtt: f64, coupling: &Coupling<'_>) -> Rates {
        let own = self.w.bytes() / rtt;
        let mut max = own;
        let mut sum = own;
        for (w, r) in peers(coupling) {
            max = max.max(w / r);
            sum += w / r;
        }
        Rates {
            own,
            alpha: max / own,
            sum,
        }
    }
}

impl CongestionController for Balia {
    fn on_ack(&mut self, _now: Time, acked: &Acked, coupling: &Coupling<'_>) {
        let rtt = rtt_secs(acked.srtt);
        self.last_rtt = Some(rtt);
        if acked.app_limited {
            return;
        }
        if self.w.in_slow_start() {
            self.w.slow_start(acked.bytes);
            return;
        }
        let Rates { own, alpha, sum } = self.rates(rtt, coupling);
        let gain = own / (rtt * sum * sum) * (1.0 + alpha) / 2.0 * (4.0 + alpha) / 5.0;
        self.w.grow(gain * acked.bytes as f64 * self.w.mss as f64);
    }

    fn on_congestion_event(&mut self, _now: Time, coupling: &Coupling<'_>) {
        let rtt = self.last_rtt.or_else(|| {
            let me = coupling.paths.iter().find(|p| p.id == coupling.this)?;
            Some(rtt_secs(me.srtt?))
        });
        // Without an RTT this path's rate is unknown: alpha = 1, TCP's halving.
        let alpha = rtt.map_or(1.0, |rtt| self.rates(rtt, coupling).alpha);
        let alpha = if alpha.is_finite() { alpha } else { 1.0 };
        let w = self.w.cut_base();
        self.w
            .cut_to(w - w / 2.0 * alpha.clamp(1.0, MAX_DECREASE_ALPHA));
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
        "balia"
    }
}
