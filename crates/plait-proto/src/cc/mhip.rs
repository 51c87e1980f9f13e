//! The two-level congestion control of seed mHIP (Polishchuk and Gurtov, "Improving
//! TCP-friendliness and Fairness for mHIP"): per-path AIMD windows with a global TCP-like
//! window on top (§IV-B, Fig. 3). The global window is the plain sum of the per-path
//! windows, and so is its threshold (§IV-B: "the aggregated congestion window is a simple
//! sum of per-flow congestion windows. Same rule applies to the threshold values"), so
//! that the bundle behaves as one TCP when all paths share a bottleneck (§IV-B, §V-D).
//!
//! - Increase: the global window grows as one TCP flow's would. An ACK of `bytes` on path
//!   r lets one TCP with window `G = Σ w_k` add `bytes` in slow start and
//!   `bytes · mss / G` in congestion avoidance; path r takes that, never more than its own
//!   AIMD would (`bytes · mss / w_r`, which is never smaller since `w_r ≤ G`), so the sum
//!   grows by about one datagram per round trip, not one per path (§IV-B, "the increase of
//!   the global cwnd is dictated by the cumulative increase of the per-flow congestion
//!   windows"; §V-D, "limited the increase of the global TCP congestion window").
//! - Cap: the per-path windows never sum above one TCP's largest window, [`MAX_WINDOW`]
//!   (standing for the receiver window Rwin that bounds the paper's sender buffer,
//!   §IV-B.4): path r grows at most to `MAX_WINDOW − Σ_{k≠r} w_k`.
//! - Decrease: a congestion event on path r halves `w_r` and its threshold and nothing
//!   else (§IV-B.4: "the global cwnd is not divided by half, but only the window
//!   corresponding to the path from which the packet was lost is decreasing"); the global
//!   window, a sum, drops by `w_r / 2`.
//! - Undo (ADDR, §IV-D): if the datagrams whose loss caused the cut are acknowledged within
//!   the allowable delay due to reordering, ADDR, after the cut, the path's window and
//!   threshold return exactly to their values before it. ADDR is "less than the shortest
//!   RTT among the paths": here the shortest SRTT of the usable paths at the cut (and this
//!   path's last ACK's), the undo allowed strictly before it.
//! - Persistent congestion: the path is closed (§III-B.4) and collapses to the minimum
//!   window, as NewReno.
//!
//! Where the trait makes this differ from the paper:
//! - The paper keeps the global window in one place; here each path's controller sees the
//!   others only through the [`Coupling`] snapshot, so `G` is recomputed per ACK from this
//!   path's own window and the other usable paths' snapshot windows (a path without an RTT
//!   sample still counts: its window is in use; an unusable, closed path carries nothing).
//! - dupthresh (§IV-D, raising the duplicate-ACK threshold) is loss detection, not window
//!   control: the congestion events given to this controller are already past the path's
//!   loss thresholds, so it has no dupthresh of its own.
//! - The undo evidence (every datagram of the event acknowledged) comes from
//!   [`super::PathCongestion`]; this controller only checks that it came within ADDR. With
//!   no RTT known at the cut, ADDR is unknown and the cut is kept.
//! - The paper's marking (§III-B.4, Case 2), SACK/SMART and receive buffer (§IV-E) and
//!   sender-side buffer are outside a window controller.
//!
//! Invariants: the window stays within [`min_window`]`(mss)..=`[`MAX_WINDOW`]; an increase
//! never takes `w_r + Σ_{k≠r} w_k` above [`MAX_WINDOW`]; an undo happens only for the last
//! cut and only strictly within ADDR of it.
//!
//! [`min_window`]: super::min_window
//! [`MAX_WINDOW`]: super::MAX_WINDOW

use std::time::Duration;

use super::aimd::RenoWindow;
use super::{Acked, CongestionController, Coupling, MAX_WINDOW};
use crate::time::Time;

/// See the module docs.
#[derive(Clone, Debug)]
pub struct Mhip {
    w: RenoWindow,
    /// This path's SRTT from its last ACK.
    last_srtt: Option<Duration>,
    /// When the last cut happened and the ADDR it may be undone within (seed §IV-D).
    addr: Option<(Time, Duration)>,
}

impl Mhip {
    /// A controller in slow start with the initial window, for datagrams of `mss` bytes.
    pub fn new(mss: u64) -> Mhip {
        Mhip {
            w: RenoWindow::new(mss),
            last_srtt: None,
            addr: None,
        }
    }
}

/// The other usable paths' windows, summed (seed §IV-B: the global window is the sum).
fn others(coupling: &Coupling<'_>) -> f64 {
    coupling
        .paths
        .iter()
        .filter(|p| p.usable && p.id != coupling.this)
        .map(|p| p.window as f64)
        .sum()
}

impl CongestionController for Mhip {
    fn on_ack(&mut self, _now: Time, acked: &Acked, coupling: &Coupling<'_>) {
        self.last_srtt = Some(acked.srtt);
        if acked.app_limited {
            return;
        }
        let own = self.w.bytes();
        let others = others(coupling);
        let global = own + others;
        let bytes = acked.bytes as f64;
        // seed §IV-B: what one TCP with the global window would add for this ACK.
        let increase = if self.w.in_slow_start() {
            bytes
        } else {
            bytes * self.w.mss as f64 / global
        };
        // seed §IV-B.4: the sum stays within one TCP's largest window.
        let room = (MAX_WINDOW as f64 - global).max(0.0);
        self.w.grow(increase.min(room));
    }

    fn on_congestion_event(&mut self, now: Time, coupling: &Coupling<'_>) {
        // seed §IV-D: ADDR below the shortest RTT of the paths in use.
        let shortest = coupling
            .paths
            .iter()
            .filter(|p| p.usable)
            .filter_map(|p| p.srtt)
            .chain(self.last_srtt)
            .min();
        self.addr = shortest.map(|addr| (now, addr));
        // seed §IV-B.4: halve this path's cwnd and ssthresh only (from the flight when it
        // was below the window, as RFC 5681 eq. 4).
        let base = self.w.cut_base();
        self.w.cut_to(base / 2.0);
    }

    fn on_flight_at_loss(&mut self, flight: u64) {
        self.w.note_flight(flight);
    }

    fn on_spurious_congestion(&mut self, now: Time) {
        match self.addr.take() {
            // seed §IV-D: "cwnd and ssthresh of the path should be returned to the values
            // prior to the congestion notification".
            Some((cut, addr)) if now.saturating_since(cut) < addr => {
                self.w.restore();
            }
            _ => {}
        }
    }

    fn on_persistent_congestion(&mut self, _now: Time) {
        self.addr = None;
        self.w.collapse();
    }

    fn window(&self) -> u64 {
        self.w.window()
    }

    fn name(&self) -> &'static str {
        "mhip"
    }
}
