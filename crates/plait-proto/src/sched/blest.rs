//! BLEST, blocking estimation (`blest`): S. Ferlin, Ö. Alay, O. Mehani, R. Boreli, "BLEST:
//! Blocking Estimation-based MPTCP Scheduler for Heterogeneous Networks", IFIP Networking
//! 2016 (§III, Algorithm 1); reference implementation `mptcp_blest.c` in the out-of-tree
//! multipath-tcp.org kernel.
//!
//! Idea: sending on a slow path is only worth it if, by the time that packet arrives, the
//! fast path has not sent so much that the receiver's window is exhausted behind the slow
//! packet (head-of-line blocking). Otherwise it is better to wait for the fast path.
//!
//! Decision, for a packet of `L = pkt.len` bytes:
//!
//! 1. `f`, the fast path: among the paths whose *state* is usable (`Active`/`Degraded`, its
//!    window may be full), the one with the smallest `srtt` (paths without `srtt` after,
//!    ties: lowest id). If no path at all is [`PathView::is_usable`]: `Wait(None)`.
//! 2. If `f` has window room (below), send on `f`.
//! 3. Else `s`, the slow candidate: the usable ([`PathView::is_usable`]) path other than `f`
//!    with the smallest `srtt` (same ordering). If there is none, `f` itself is usable (its
//!    window is only the packet-mode stand-in below, not a real limit) and the packet goes
//!    on `f`: with no other path there is no head-of-line blocking to avoid.
//! 4. If `f` or `s` has no `srtt`, nothing can be estimated: send on `s`.
//! 5. Otherwise, with `ratio = max(srtt_s / srtt_f, 1)`, `MSS_f = L` and `cwnd_f` in
//!    packets of `L` bytes, the bytes `f` can send during one `srtt_s` (paper eq. 1, the
//!    window growing by one packet per RTT):
//!    `X = MSS_f · (cwnd_f + (ratio − 1) / 2) · ratio`.
//!    If `λ · X + bytes_in_flight_s + L > W` (the paper's `λ·X > |M| − MSS_s·(inflight_s + 1)`),
//!    `s` would block the fast path: `Wait(Some(t))` for `f`'s room (below). Else send on
//!    `s`.
//!
//! Packet-mode stand-ins (plait forwards the end hosts' packets and, in packet mode, keeps no
//! per-path congestion window and no connection-level receive window):
//!
//! - **Window of `f`.** When `cwnd_room` is `Some`, the real window: room iff
//!   `cwnd_room > 0` (as [`PathView::is_usable`]), `cwnd_f = (bytes_in_flight + cwnd_room) /
//!   L`. When `None`, the path's bandwidth-delay product `BDP = rate_estimate · srtt` bytes:
//!   `cwnd_f = max(BDP, L) / L` and room iff `bytes_in_flight + L ≤ max(BDP, L)` (an idle
//!   path always has room). Without a rate or an `srtt` the window is unlimited (always room:
//!   BLEST then behaves as min-RTT).
//! - **`W`, the receive window** (`|M|`): [`RECEIVE_WINDOW`] = 8 MiB, the default bound of
//!   plait's reorder buffer (`reorder.max_bytes`), which is what the receiver can hold behind a
//!   missing packet. It is a constant: the configured bound is not visible to schedulers.
//! - **`λ`** is fixed at [`LAMBDA`] = 1. The paper adapts `λ` on head-of-line blocking
//!   events and `mptcp_blest.c` moves it within 1.0..=1.3 (+0.04 when the slow subflow had
//!   retransmissions during its last RTT, −0.01 otherwise); `on_sent` only reports which path
//!   a packet took, which shows neither retransmissions nor receiver blocking, so `λ` is not
//!   adapted.
//! - **The wait.** With the BDP stand-in and a rate: the time for `f` to drain the excess,
//!   `(bytes_in_flight_f + L − max(BDP, L)) / rate_f`; with a real window and a rate: one
//!   packet time `L / rate_f` (about when an acknowledgement frees a packet's worth); with
//!   no rate: [`WAIT_INTERVAL`]. Clamped to `[MIN_WAIT, max(srtt_f, MIN_WAIT)]`, so `t > now`.
//!   The session asks again at `t` (or when paths change).
//!
//! `select_control` uses the trait default (control datagrams never wait).
//!
//! Invariants: stateless (everything comes from the [`PathView`]s, which already count the
//! bytes `on_sent` would report; `λ` is constant), so deterministic; no per-path `Vec` is
//! needed. Never names an unusable path; `Wait(None)` iff no path is usable; a `Wait(Some(t))`
//! has `t > now` (if `now + wait` saturates, the packet goes on `s` instead). Floating-point
//! overflow gives infinities (which wait), never a panic.

use std::time::Duration;

use super::{PacketMeta, Scheduler, Selection};
use crate::path::PathView;
use crate::time::{Time, secs_f64_saturating};

/// Stand-in for the connection's receive window `|M|`, bytes: the default reorder-buffer
/// bound (`reorder.max_bytes`, 8 MiB).
pub(crate) const RECEIVE_WINDOW: u64 = 8 << 20;

/// BLEST's scaling factor `λ` for the fast path's estimated sending (fixed, see module docs).
pub(crate) const LAMBDA: f64 = 1.0;

/// Shortest wait for the fast path's room.
pub(crate) const MIN_WAIT: Duration = Duration::from_micros(50);

/// Wait for the fast path's room when its rate is unknown.
pub(crate) const WAIT_INTERVAL: Duration = Duration::from_millis(1);

/// BLEST scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Blest {}

/// The fast path's window as BLEST sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Window {
    /// No estimate: unlimited.
    Unlimited,
    /// A real congestion window (`cwnd_room` is `Some`): `(cwnd bytes, room > 0)`.
    Cwnd(f64, bool),
    /// Packet-mode stand-in: `max(BDP, L)` bytes.
    Bdp(f64),
}

fn window(view: &PathView, len: usize) -> Window {
    let in_flight = view.bytes_in_flight as f64;
    match view.cwnd_room {
        Some(room) => Window::Cwnd(in_flight + room as f64, room > 0),
        None => match (view.rate_estimate(), view.srtt) {
            (Some(rate), Some(srtt)) => Window::Bdp((rate * srtt.as_secs_f64()).max(len as f64)),
            _ => Window::Unlimited,
        },
    }
}

fn has_room(view: &PathView, len: usize) -> bool {
    match window(view, len) {
        Window::Unlimited => true,
        Window::Cwnd(_, room) => room,
        Window::Bdp(bdp) => view.bytes_in_flight as f64 + len as f64 <= bdp,
    }
}

/// How long until the fast path `f` is expected to have room again (module docs).
fn wait_for_room(f: &PathView, len: usize) -> Duration {
    let rate = f.rate_estimate();
    let estimate = match (window(f, len), rate) {
        (Window::Bdp(bdp), Some(r)) => {
            secs_f64_saturating((f.bytes_in_flight as f64 + len as f64 - bdp) / r)
        }
        (Window::Cwnd(..), Some(r)) => secs_f64_saturating(len as f64 / r),
        _ => WAIT_INTERVAL,
    };
    let max = f.srtt.unwrap_or(WAIT_INTERVAL).max(MIN_WAIT);
    estimate.clamp(MIN_WAIT, max)
}

/// Whether sending `len` bytes on the slow path `s` now would block the fast path `f`:
/// `λ · X + bytes_in_flight_s + len > W`; `None` when either has no `srtt`.
pub(crate) fn would_block(f: &PathView, s: &PathView, len: usize) -> Option<bool> {
    let (rtt_f, rtt_s) = (f.srtt?.as_secs_f64(), s.srtt?.as_secs_f64());
    // srtt_f == 0 gives an infinite ratio (wait) unless srtt_s is zero too (NaN: max → 1).
    let ratio = (rtt_s / rtt_f).max(1.0);
    let mss = len as f64;
    let cwnd_bytes = match window(f, len) {
        Window::Cwnd(c, _) => c,
        Window::Bdp(bdp) => bdp,
        Window::Unlimited => f.bytes_in_flight as f64,
    };
    let cwnd_packets = cwnd_bytes / mss;
    let x = mss * (cwnd_packets + (ratio - 1.0) / 2.0) * ratio;
    let slow = s.bytes_in_flight as f64 + mss;
    Some(LAMBDA * x + slow > RECEIVE_WINDOW as f64)
}

/// Min-RTT order: paths with an `srtt` first, ties to the lowest id.
fn min_srtt(paths: &[PathView], keep: impl Fn(&PathView) -> bool) -> Option<&PathView> {
    paths
        .iter()
        .filter(|p| keep(p))
        .min_by_key(|p| (p.srtt.is_none(), p.srtt, p.id))
}

impl Scheduler for Blest {
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        if !paths.iter().any(PathView::is_usable) {
            return Selection::Wait(None);
        }
        let len = pkt.len;
        let Some(f) = min_srtt(paths, |p| p.may_carry()) else {
            return Selection::Wait(None);
        };
        if f.is_usable() && has_room(f, len) {
            return Selection::Send(f.id);
        }
        let Some(s) = min_srtt(paths, |p| p.is_usable() && p.id != f.id) else {
            // `f` is the only usable path (see the module docs, step 3): a path other than `f`
            // is usable whenever `f` is not, since some path is.
            return Selection::Send(f.id);
        };
        let s_id = s.id;
        match would_block(f, s, len) {
            Some(true) => {
                let t = now + wait_for_room(f, len);
                if t > now {
                    Selection::Wait(Some(t))
                } else {
                    Selection::Send(s_id)
                }
            }
            _ => Selection::Send(s_id),
        }
    }
}

#[cfg(test)]
#[path = "blest_tests.rs"]
mod tests;
