//! Earliest Delivery Path First (`edpf`): send each packet on the path that delivers it
//! first (seed PET-BMP §III-B eq. 1; with estimated `B` and `D` this is PET, §V-A):
//!
//! `d_l = max(a_i + D_l, A_l) + L_i / B_l`, choose the path with the smallest `d_l`
//! (ties: lowest id), then set `A_l = d_l` for the path really used.
//!
//! - `a_i`: `max(pkt.arrival, now)`: the packet's arrival, or now if it waited in the send
//!   queue (it cannot leave before now); the two agree when packets are placed on arrival.
//! - `L_i`: `pkt.len`; `B_l`: [`PathView::rate_estimate`], bytes per second.
//! - `D_l`: forward one-way delay, `base_owd` (relative to the fastest path: only
//!   differences matter, the common clock offset cancels), else `min_rtt / 2`, else
//!   `srtt / 2`, else zero.
//! - `A_l`: when path `l`'s bottleneck is free again, kept as a [`Time`] in the same frame
//!   as `d`. A path whose `A_l` has passed behaves as idle (`max` picks `a_i + D_l`).
//!
//! Edge cases: a usable path with no rate estimate has no `d` and is not chosen while some
//! usable path has one; when none has one, the usable path with the smallest `D` (then
//! lowest id) is chosen and `on_sent` sets its `A_l` to the start time `max(a_i + D, A_l)`
//! (transmission time unknown, counted as zero). A tiny rate saturates `d` at `Time::MAX`.
//!
//! Invariants: `on_sent` recomputes `d` for the path it names with the `D` and `B` that
//! path had at the last `select`, so `A_l` is right for every copy of a `Duplicate`; with
//! exact `B` and `D` and equal-size packets, deliveries are in sequence order (zero
//! reordering, §III-B). Per-path state lives in a `Vec` indexed by `PathId`, grown to the
//! largest id seen.

use std::time::Duration;

use super::{PacketMeta, PerPath, Scheduler, Selection, bottleneck_delivery, usable_min_by_key};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::{Time, duration_nanos};

/// What EDPF tracks for one path.
#[derive(Debug, Clone, Copy, Default)]
struct PathSlot {
    /// `A_l`: when the path's bottleneck is free again (`Time::ZERO`: idle).
    avail: Time,
    /// `D_l` at the last `select`.
    delay: Duration,
    /// `B_l` at the last `select`.
    rate: Option<f64>,
}

/// Earliest-delivery-path-first scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Edpf {
    /// Per-path state, indexed by `PathId::index()`.
    slots: PerPath<PathSlot>,
}

/// `D_l`: `base_owd`, else `min_rtt / 2`, else `srtt / 2`, else zero.
fn one_way_delay(view: &PathView) -> Duration {
    view.base_owd
        .or(view.min_rtt.map(|r| r / 2))
        .or(view.srtt.map(|r| r / 2))
        .unwrap_or(Duration::ZERO)
}

/// `d = max(a + D, A) + L / B`, or the start time `max(a + D, A)` when `B` is unknown.
fn delivery(now: Time, slot: &PathSlot, pkt: &PacketMeta) -> (Time, Option<Time>) {
    bottleneck_delivery(now, pkt, slot.delay, slot.avail, slot.rate)
}

impl Edpf {
    fn slot(&self, id: PathId) -> PathSlot {
        self.slots.get(id)
    }

    fn slot_mut(&mut self, id: PathId) -> &mut PathSlot {
        self.slots.get_mut(id)
    }

    /// `d_l` of eq. 1 for `pkt` on the path of `view` (usable or not), from the view's `D`
    /// and `B` and this scheduler's `A_l`; `None` when the view has no rate estimate.
    pub fn expected_delivery(&self, now: Time, view: &PathView, pkt: &PacketMeta) -> Option<Time> {
        let slot = PathSlot {
            delay: one_way_delay(view),
            rate: view.rate_estimate(),
            ..self.slot(view.id)
        };
        delivery(now, &slot, pkt).1
    }
}

impl Scheduler for Edpf {
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        for p in paths {
            let slot = self.slot_mut(p.id);
            slot.delay = one_way_delay(p);
            slot.rate = p.rate_estimate();
        }
        // Paths with a `d` first, by `d`; then those without, by `D`.
        let best = usable_min_by_key(paths, |p| match self.expected_delivery(now, p, pkt) {
            Some(d) => (false, d.as_nanos()),
            None => (true, duration_nanos(one_way_delay(p))),
        });
        best.map_or(Selection::Wait(None), Selection::Send)
    }

    /// Control datagrams go where EDPF's own model delivers them first (and `on_sent` then
    /// books their bytes in `A_l`).
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
        let (start, d) = delivery(now, slot, pkt);
        slot.avail = d.unwrap_or(start);
    }
}
