//! Multipath HIP (`mhip`): each packet goes on the path with the minimum estimated arrival
//! time among the paths whose per-path window has room (seed mHIP §III-B, §IV-B).
//!
//! Rules, each from the seed:
//! - Estimated arrival time. The scheduler keeps, per path `l`, `E_l`: the estimated
//!   arrival time at the receiver of the last packet sent on `l` (mHIP "stores
//!   packet-to-path assignments at the sender", and the "expected delivery time of the
//!   marked packet is stored at the sender", seed mHIP §III-B). The seed gives no formula:
//!   it defers the estimate to its reference [8] ("The details of scheduling algorithm are
//!   provided in [8]", §III-B), naming only its inputs, the paths' "available bandwidth and
//!   propagation delay" (§III-B, 1), refreshed by probing (§III-B, 2). With those inputs a
//!   packet of `L_i` bytes handed over at `a_i` arrives on `l` at
//!   `T_l = max(a_i + D_l, E_l) + L_i / B_l`: it reaches the path's bottleneck after the
//!   propagation delay, waits for the previous packet sent there, then takes its own
//!   serialisation time. `on_sent` sets `E_l = T_l` for the path really used.
//! - Choice. "If cwnd capacity of the best path is exceeded, the path with the next
//!   minimum estimated arrival time is chosen. If there is no available capacity in any of
//!   the paths, the packet is placed to the sender-side buffer until new ACK arrives"
//!   (§IV-B, 3; also "If cwnd capacity of the quickest path is exceeded, the path with the
//!   next minimum estimated arrival time is chosen", §IV-B). Walking the paths by `T_l`
//!   and taking the first with room is the same as taking the minimum `T_l` over the paths
//!   with room, which is what `select` does (ties: lowest id). A window has room unless
//!   [`PathView::cwnd_room`] is `Some(0)` (a window with any room takes one more packet, as
//!   TCP sends while the packets in flight are fewer than `cwnd`); `None` (packet mode: no
//!   per-path window yet, the end hosts' TCP does congestion control) is unlimited. A full
//!   window already makes a path not [`PathView::is_usable`], so a path with room is a
//!   usable path.
//! - Sender-side buffer. With no usable path `select` answers `Wait(None)`: the packet
//!   stays in the session's bounded send queue, which plays the seed's sender-side buffer
//!   ("Maximum capacity of the buffer is set to TCP receiver window size Rwin", §IV-B, 4),
//!   and is asked for again when paths change (an ACK opens a window).
//! - Marked packets correct the estimate. "One packet per round-trip time is marked on the
//!   departure to each path. The expected delivery time of the marked packet is stored at
//!   the sender and then compared to its actual arrival time value on the receipt of the
//!   corresponding ACK" (§III-B, 4). Here the first datagram sent on a path with no mark
//!   outstanding is marked: its departure time `s_m` and expected arrival `T_m` are kept.
//!   The mark is resolved at the first `select` (or `select_control`) at or after
//!   `s_m + srtt` (the ACK has had time to come back), where the view's measured one-way
//!   delay `M_l` gives its actual arrival `s_m + M_l`. The estimate of the path is then
//!   shifted by the error: `E_l += (s_m + M_l) - T_m` (back when the estimate ran ahead,
//!   forward when the path is slower than modelled). The shift keeps what was modelled
//!   after the marked packet and applies the error measured up to it; with one mark
//!   outstanding per path at a time, no error is applied twice. §IV-B removes marking as a
//!   congestion indicator ("Marking is now removed from the congestion control scheme");
//!   closing congested paths is the engine's path-state machine's job, so marks here serve
//!   only to keep the arrival estimate on the measurements.
//!
//! Paper quantities and the [`PathView`] fields standing in for them (the seed's receiver
//! reports become the engine's measurements):
//! - `a_i`: `max(pkt.arrival, now)`: the packet cannot leave before now.
//! - `L_i`: `pkt.len` (plait datagram bytes, control datagrams included).
//! - `B_l` ("available bandwidth"): [`PathView::rate_estimate`] (packet-pair rate, else the
//!   configured hint, else the delivery rate), bytes per second.
//! - `D_l` ("propagation delay"): `base_owd` (queue-free forward delay relative to the
//!   session's fastest path: only differences between paths matter), else `min_rtt / 2`,
//!   else `srtt / 2`, else zero.
//! - `M_l` (the marked packet's "actual arrival time", minus its departure): `owd` (latest
//!   smoothed forward delay, same reference as `base_owd`, queueing included) when `D_l`
//!   came from `base_owd`; else `srtt / 2` (the RTT frame `D_l` came from); none without
//!   either, and a due mark is then dropped uncorrected.
//! - "round-trip time" of the marking period and of the ACK's return: `srtt`, else
//!   `min_rtt`; a mark waits while the path has neither.
//! - "cwnd capacity": [`PathView::cwnd_room`].
//!
//! Edge cases: a usable path without `B_l` has no `T_l` and is chosen only when no usable
//! path has one; among those, the earliest start `max(a_i + D_l, E_l)` wins and `on_sent`
//! sets `E_l` to that start (transmission time unknown, counted as zero). A tiny rate
//! saturates `T_l` at `Time::MAX`; a mark then pulls it back like any other.
//!
//! Known limitation: with `Config::trust_hints` the views carry `owd == base_owd` (no
//! queue is visible), so a mark reports an idle path and the correction removes the
//! modelled backlog up to the mark; mHIP is meant to run on measurements.
//!
//! Invariants: never an unusable path; `Wait(None)` if and only if no path is usable
//! (never another `Wait`); deterministic (no clock, no randomness, no hashing). `select`
//! refreshes the cached `D_l`, `B_l` (for `on_sent`) and resolves due marks, both
//! idempotent, so asking twice without sending gives the same answer. `on_sent` books every
//! datagram, data or control, so control bytes count in `E_l`. Per-path state lives in a
//! `Vec` indexed by `PathId`, grown to the largest id seen.

use std::time::Duration;

use super::{PacketMeta, PerPath, Scheduler, Selection, bottleneck_delivery, usable_min_by_key};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

#[cfg(test)]
#[path = "mhip_tests.rs"]
mod tests;

/// A marked packet whose actual arrival is not known yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    /// `s_m`: when it left.
    sent: Time,
    /// `T_m`: its estimated arrival time when it left.
    expected: Time,
}

/// What mHIP tracks for one path.
#[derive(Debug, Clone, Copy, Default)]
struct PathSlot {
    /// `E_l`: estimated arrival time of the last packet sent on the path (`Time::ZERO`:
    /// nothing sent, the path is idle).
    last_arrival: Time,
    /// The outstanding marked packet, if any.
    mark: Option<Mark>,
    /// `D_l` at the last `select`.
    delay: Duration,
    /// `B_l` at the last `select`.
    rate: Option<f64>,
}

/// mHIP scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Mhip {
    /// Per-path state, indexed by `PathId::index()`.
    slots: PerPath<PathSlot>,
}

/// `D_l` and `M_l` of a view, in the same frame (see the module docs).
fn delays(view: &PathView) -> (Duration, Option<Duration>) {
    match (view.base_owd, view.min_rtt, view.srtt) {
        (Some(base), _, _) => (base, view.owd),
        (None, Some(min), srtt) => (min / 2, srtt.map(|s| s / 2)),
        (None, None, Some(s)) => (s / 2, Some(s / 2)),
        (None, None, None) => (Duration::ZERO, None),
    }
}

/// The start `max(a + D, E)` and the arrival `T = start + L / B` (`None` without `B`).
fn arrival(now: Time, slot: &PathSlot, pkt: &PacketMeta) -> (Time, Option<Time>) {
    bottleneck_delivery(now, pkt, slot.delay, slot.last_arrival, slot.rate)
}

impl Mhip {
    fn slot(&self, id: PathId) -> PathSlot {
        self.slots.get(id)
    }

    fn slot_mut(&mut self, id: PathId) -> &mut PathSlot {
        self.slots.get_mut(id)
    }

    /// `T_l` for `pkt` on the path of `view` (usable or not), from the view's `D` and `B`
    /// and this scheduler's `E_l` as it stands (a due mark not yet applied); `None` when
    /// the view has no rate estimate.
    pub fn estimated_arrival(&self, now: Time, view: &PathView, pkt: &PacketMeta) -> Option<Time> {
        let slot = PathSlot {
            delay: delays(view).0,
            rate: view.rate_estimate(),
            ..self.slot(view.id)
        };
        arrival(now, &slot, pkt).1
    }

    /// Refreshes the cached `D`, `B` of every path and resolves the marks that are due.
    fn refresh(&mut self, now: Time, paths: &[PathView]) {
        for p in paths {
            let (delay, measured) = delays(p);
            let rtt = p.srtt.or(p.min_rtt);
            let slot = self.slot_mut(p.id);
            slot.delay = delay;
            slot.rate = p.rate_estimate();
            let Some(mark) = slot.mark else { continue };
            let Some(rtt) = rtt else { continue };
            if now < mark.sent + rtt {
                continue;
            }
            slot.mark = None;
            if let Some(m) = measured {
                let actual = mark.sent + m;
                slot.last_arrival = if actual >= mark.expected {
                    slot.last_arrival.saturating_add(actual - mark.expected)
                } else {
                    slot.last_arrival.saturating_sub(mark.expected - actual)
                };
            }
        }
    }
}

impl Scheduler for Mhip {
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        self.refresh(now, paths);
        // Paths with a `T` first, by `T`; then those without, by their start.
        let best = usable_min_by_key(paths, |p| {
            let (start, t) = arrival(now, &self.slot(p.id), pkt);
            match t {
                Some(t) => (false, t),
                None => (true, start),
            }
        });
        best.map_or(Selection::Wait(None), Selection::Send)
    }

    /// Control datagrams go where the same estimate delivers them first (and `on_sent`
    /// then books their bytes in `E_l`).
    fn select_control(
        &mut self,
        now: Time,
        paths: &[PathView],
        pkt: &PacketMeta,
    ) -> Option<PathId> {
        match self.select(now, paths, pkt) {
            Selection::Send(p) => Some(p),
            _ => None,
        }
    }

    fn on_sent(&mut self, now: Time, path: PathId, pkt: &PacketMeta) {
        let slot = self.slot_mut(path);
        let (start, t) = arrival(now, slot, pkt);
        slot.last_arrival = t.unwrap_or(start);
        if slot.mark.is_none() {
            slot.mark = Some(Mark {
                sent: now,
                expected: slot.last_arrival,
            });
        }
    }
}
