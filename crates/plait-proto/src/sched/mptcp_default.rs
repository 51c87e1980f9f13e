//! Linux MPTCP's default scheduler (`mptcp`): what users of upstream Linux MPTCP get without
//! choosing a scheduler (`mptcp_subflow_get_send()` in `net/mptcp/protocol.c`, since
//! v5.19 / v6.x), adapted to plait's packet-by-packet placement.
//!
//! Upstream, in short: among the active (non-backup) subflows, each subflow's "linger time"
//! is `sk_wmem_queued << 32 / avg_pacing_rate`, i.e. how long the bytes already queued on it
//! take to leave at its pacing rate; the subflow with the smallest linger time is picked, and
//! it is used if it has send space (upstream: `sk_stream_memory_free`, then TCP's own
//! congestion window). A comment there ("According to the blest algorithm, to avoid HoL
//! blocking for the faster flow ...") says the BLEST head-of-line check is meant to be
//! covered by picking the shortest time to flush the queue, "we just need to check that
//! subflow has a non empty cwin". Linger time alone ignores the paths' delays, though, so
//! here that check is made explicit (second step below).
//!
//! Decision, for a packet of `L = pkt.len` bytes:
//!
//! 1. **Linger time.** Candidates: the usable paths ([`PathView::is_usable`]), which in
//!    plait already means "window room": `cwnd_room != Some(0)`. *Packet-mode
//!    approximation:* plait has no per-path congestion window in packet mode
//!    (`cwnd_room == None`), so the window is then unlimited, as if every subflow always had
//!    a non-empty cwnd. For a path with a rate `r` ([`PathView::rate_estimate`], standing in
//!    for upstream's `avg_pacing_rate`), `linger = (bytes_in_flight + L) / r`
//!    (`bytes_in_flight` stands in for `sk_wmem_queued`: plait has no per-path send buffer,
//!    what it has put on a path and not yet seen acknowledged is that path's queue). Paths
//!    with a rate come first, by linger time; then paths without a rate, by `srtt` (those
//!    without `srtt` last); ties go to the lowest id, as upstream's strict `<` scan in
//!    subflow order keeps the first. (Upstream skips a subflow whose pacing rate is zero;
//!    here it is kept, after the others, so that a path without estimates can still carry
//!    data.) Backup subflows have no equivalent in plait and are not modelled.
//! 2. **Head-of-line check.** Let `c` be the path chosen by step 1 and `f` the usable path
//!    with the smallest `srtt` (ties: lowest id). If `c != f`, both have an `srtt` and a
//!    rate, and `f` would deliver this packet strictly sooner, i.e.
//!    `srtt_f / 2 + (bytes_in_flight_f + L) / r_f  <  srtt_c / 2 + (bytes_in_flight_c + L) / r_c`
//!    (one-way delay estimated as half the smoothed RTT, plus the time to drain the queue
//!    ahead of the packet and the packet itself), the packet goes on `f` instead: the slow
//!    path would make it arrive after data sent later on the fast path (head-of-line
//!    blocking at the receiver). Otherwise it goes on `c`. Without the numbers for either
//!    path, `c` is kept.
//!
//! `Wait(None)` when no path is usable; this scheduler never waits otherwise.
//! `select_control` uses the trait default.
//!
//! Invariants: stateless (everything comes from the [`PathView`]s, rebuilt before each
//! decision, which already count the bytes `on_sent` would report), so deterministic; no
//! per-path `Vec` is needed. Arithmetic saturates ([`transmission_time`]), never panics.

use std::time::Duration;

use super::{PacketMeta, Scheduler, Selection, transmission_time, usable_min_by_key};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

/// Linux MPTCP's default scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct MptcpDefault {}

/// `(bytes_in_flight + len) / rate`, or `None` without a rate estimate.
fn linger_time(view: &PathView, len: usize) -> Option<Duration> {
    let rate = view.rate_estimate()?;
    let queued = usize::try_from(view.bytes_in_flight).unwrap_or(usize::MAX);
    Some(transmission_time(queued.saturating_add(len), rate))
}

/// `srtt / 2 + linger`: when `len` bytes sent now on this path are expected at the receiver;
/// `None` without an `srtt` or a rate.
fn expected_delivery(view: &PathView, len: usize) -> Option<Duration> {
    Some((view.srtt? / 2).saturating_add(linger_time(view, len)?))
}

impl MptcpDefault {
    /// Step 1 of the module docs: the usable path with the smallest linger time.
    fn least_linger(paths: &[PathView], len: usize) -> Option<PathId> {
        // Key: (class, duration): class 0 by linger time, 1 by srtt, 2 neither.
        usable_min_by_key(paths, |p| match (linger_time(p, len), p.srtt) {
            (Some(l), _) => (0u8, l),
            (None, Some(s)) => (1, s),
            (None, None) => (2, Duration::ZERO),
        })
    }
}

impl Scheduler for MptcpDefault {
    fn select(&mut self, _now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        let Some(chosen) = Self::least_linger(paths, pkt.len) else {
            return Selection::Wait(None);
        };
        let fast = usable_min_by_key(paths, |p| (p.srtt.is_none(), p.srtt));
        let view = |id: PathId| paths.iter().find(|p| p.id == id);
        if let Some(fast) = fast.filter(|&f| f != chosen)
            && let (Some(fv), Some(cv)) = (view(fast), view(chosen))
            && let (Some(df), Some(dc)) = (
                expected_delivery(fv, pkt.len),
                expected_delivery(cv, pkt.len),
            )
            && df < dc
        {
            return Selection::Send(fast);
        }
        Selection::Send(chosen)
    }
}

#[cfg(test)]
#[path = "mptcp_default_tests.rs"]
mod tests;
