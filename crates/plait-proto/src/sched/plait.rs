//! plait's own scheduler (`plait`, the default): earliest delivery, with the queue model
//! kept honest by measurement. The design and its evaluation are in docs/schedulers.md.
//!
//! EDPF (seed PET-BMP eq. 1, `edpf.rs`) picks the path that delivers a packet first,
//! `d = max(a + D, A) + L/B`, tracking each bottleneck's backlog `A` from what it sends.
//! With perfect `B` and `D` it never reorders; with estimates its model `A` drifts from the
//! real queue and nothing pulls it back (a rate estimated too low makes `A` run ahead, too
//! high makes the real queue grow unseen). plait keeps EDPF's rule and adds what the
//! engine measures:
//!
//! 1. **Re-anchored backlog.** Before each decision, each path's modelled backlog
//!    `A − now` is clamped between two measured bounds: at least the queueing delay the
//!    path's one-way delay shows now (`owd − base_owd`), at most the time to drain
//!    everything still in flight at the estimated rate (`bytes_in_flight / B`: more cannot
//!    be queued than is unacknowledged); both taken from `now + D`, as `A` is a time at the
//!    far end. The upper bound wins when they disagree (bytes in
//!    flight are counted exactly; the delay sample is one path-delay old).
//! 2. **Loss-aware delivery time.** A packet lost on a path with loss rate `p` is given up
//!    by the receiver and resent by the end host about one retransmission timeout later, so
//!    the expected delivery time is `d + p / (1 − p) · (SRTT + 4·RTTVAR)`. Losses the link
//!    causes by itself (rate `q`, counted while the path's queue was short) also halve the
//!    end host's window, and are charged [`LINK_LOSS_EXTRA_TIMEOUTS`] more timeouts:
//!    `d + (p / (1 − p) + 9 · q / (1 − q)) · (SRTT + 4·RTTVAR)`.
//! 3. **No starved paths.** A usable path with no capacity estimate (no packet-pair
//!    sample, no configured rate: a delivery rate alone only measures what the path was
//!    given) is treated as having the smallest capacity any usable path has (or its own
//!    delivery rate, if higher; if no path has one, paths are ranked by delay alone), so it
//!    receives traffic and hence packet-pair samples; EDPF would never use it.
//! 4. **Bounded queues.** Among paths whose modelled backlog is under a target
//!    (`QUEUE_TARGET`, at least `QUEUE_TARGET_PACKETS` packet times) and that deliver
//!    within `REORDER_BUDGET` of the earliest path, the earliest delivery wins. When none
//!    qualifies (a sender outrunning the paths, e.g. TCP's slow start), the path least over
//!    its target wins (backlog over target), among paths that deliver within
//!    `REORDER_BUDGET` of the earliest and whose propagation delay is within
//!    `REORDER_BUDGET` of the shortest (failing that, the earliest): the excess is spread
//!    so every queue fills at the same pace, instead of the fastest one filling to its
//!    drop point (plain earliest delivery, which lost 88 packets in slow start on the
//!    suite's RTT 1:20 scenario, docs/scheduler-design.md), while the receiver never has
//!    to hold longer than the budget for it. Filling a fast path's queue until a slow path
//!    becomes earlier (EDPF) keeps arrivals in order but builds long drop-tail queues;
//!    bounding them moves that wait into the receiver's reorder buffer, which holds
//!    instead of dropping.
//! 5. Control datagrams are placed the same way (their bytes are booked like data).
//! 6. **Overflow paths** (docs/protocol.md#overflow). A path in its overflow role
//!    ([`PathView::may_overflow`]: a metered link) is a candidate only when every other
//!    usable path is backed up: its modelled backlog (rule 1) is over
//!    [`OVERFLOW_BACKLOG`] (and over its rule-4 target), or no other path has window room.
//!    Then it competes by rules 1 to 4 like any path, so it takes the excess and the
//!    others stay about `OVERFLOW_BACKLOG` full. A path without a rate is never backed up.
//!
//! 7. **Far paths only when needed** (docs/scheduler-design.md, rule 7). Rule 4 lets
//!    a path under its target take the packet whenever it delivers within
//!    `REORDER_BUDGET`; for a path far behind the others in delay that spill makes the
//!    receiver hold the whole flow behind it, so one end-to-end TCP window must cover the
//!    far path's round trip, and a window-limited flow loses more than the path adds (T6:
//!    a 2 Mbit/s path at 250 ms beside 16 Mbit/s at 10 ms). A path is far when its
//!    propagation delay is more than [`FAR_PATH_DELAY`] behind the shortest usable path's
//!    and its capacity is under 1/[`FAR_PATH_SHARE_DIVISOR`] of the usable paths' sum;
//!    in both branches of rule 4 it is a candidate only when it delivers within
//!    [`FAR_PATH_BUDGET`] of the earliest path, that is when the flow's rate has already
//!    queued the nearer paths nearly as long as the far path's extra delay (EDPF's rule,
//!    seed PET-BMP eq. 1, with a margin). A path with a large share is never far: a flow
//!    that needs half its capacity from a slow path gains from spilling early (the suite's
//!    RTT 1:20). With packet pacing the session's own spill rule (`session/paced_spill.rs`)
//!    draws a similar line, by delay alone, for the paths the pacers and windows leave open;
//!    this rule is the default, unpaced mode's.
//!
//! Invariants: never a path that is neither usable nor in its overflow role; an overflow
//! path only while every usable non-overflow path is backed up; `Wait(None)` iff no path
//! is selectable; deterministic; per-path state in a `Vec` indexed by `PathId`. Without
//! overflow paths and far paths the decisions are exactly rules 1 to 5.

use std::time::Duration;

use super::{PacketMeta, PerPath, Scheduler, Selection, bottleneck_delivery, transmission_time};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

/// Backlog target per path: beyond it, a packet goes to the earliest path still under its
/// target even if it arrives later (the reorder buffer holds it instead of a bottleneck
/// queue that drops). Short, so a sender that keeps queues short (BBR) still sees the
/// other paths' capacity when it probes; not shorter, or the suite loses throughput. The
/// measurements behind the value are in docs/scheduler-design.md (rule 4).
pub const QUEUE_TARGET: Duration = Duration::from_millis(20);
/// The target is at least this many packet times on the path (a slow link serialises one
/// packet for longer than any fixed target).
pub const QUEUE_TARGET_PACKETS: u32 = 4;
/// A path under its target is still passed over when it would deliver more than this after
/// the earliest path: the receiver would have to hold everything behind it that long (half
/// the reorder buffer's default 1 s cap, docs/protocol.md#reorder-buffer).
pub const REORDER_BUDGET: Duration = Duration::from_millis(500);

/// A path is far (rule 7) when its propagation delay is more than this behind the shortest
/// usable path's: using it makes the receiver hold everything sent after it about that long.
pub const FAR_PATH_DELAY: Duration = Duration::from_millis(100);
/// …and its capacity is under the usable paths' summed capacity divided by this: what it
/// could add is small against what the hold costs a window-limited flow.
pub const FAR_PATH_SHARE_DIVISOR: f64 = 4.0;
/// A far path takes a packet only when it delivers within this of the earliest path, i.e.
/// once the nearer paths' queues are almost as long as its extra delay (EDPF's rule).
pub const FAR_PATH_BUDGET: Duration = Duration::from_millis(50);

/// A non-overflow path is backed up when its modelled backlog exceeds this (and its rule-4
/// target); only when every usable one is does an overflow path take packets
/// (docs/protocol.md#overflow). Above `QUEUE_TARGET`, so that among the other paths plait
/// first spreads as it always does; a few tens of ms, so that a burst the primaries drain
/// at once (a TCP initial window: 15 KB is 12 ms at 10 Mbit/s) stays off the metered link,
/// while a sustained excess moves there within a round trip.
pub const OVERFLOW_BACKLOG: Duration = Duration::from_millis(30);

/// What a loss the link causes by itself (found while the path's queue was short,
/// [`PathView::shallow_loss_rate`]) costs on top of its retransmission timeout, in timeouts.
/// The end host's TCP reads any loss as congestion and halves its window for the whole flow,
/// so a path that drops packets it was not overrunning costs every path's throughput, far
/// more than the one late packet; drops of an overrun queue are not charged this (the
/// sender's own excess, which rule 4 spreads). The value is the smallest that takes nearly
/// all of the gain on the suite's random- and bursty-loss scenarios without moving the
/// others; the sweep behind it is in docs/scheduler-design.md (rule 2).
pub const LINK_LOSS_EXTRA_TIMEOUTS: f64 = 9.0;

/// What plait tracks for one path.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// When the path's bottleneck is free again (model, re-anchored each decision).
    avail: Time,
    /// `D` and `B` used at the last decision (for `on_sent`).
    delay: Duration,
    rate: Option<f64>,
}

/// plait's scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Plait {
    slots: PerPath<Slot>,
}

impl Plait {
    fn slot_mut(&mut self, id: PathId) -> &mut Slot {
        self.slots.get_mut(id)
    }

    /// A path's capacity as measured by packet pairs (raised by a higher delivery rate) or
    /// configured. A delivery rate alone is not a capacity: on a path the scheduler leaves
    /// idle it measures only the probes, and trusting it would keep the path idle for good
    /// (seen on the tunnel: 0.005 Mbit/s read on an idle 40 Mbit/s path).
    fn capacity(view: &PathView) -> Option<f64> {
        if view.pair_rate.is_none() {
            return view
                .rate_estimate()
                .filter(|_| view.configured_rate.is_some());
        }
        // Packet trains rather than PET's pairs where there are any (robust to real hosts'
        // bursty receive timestamps), raised by a delivery rate well above, as
        // `PathView::rate_estimate` does.
        let robust = PathView {
            pair_rate: view.train_rate.or(view.pair_rate),
            ..view.clone()
        };
        robust.rate_estimate()
    }

    /// The smallest capacity any usable path has (for paths with none yet).
    fn floor_rate(paths: &[PathView]) -> Option<f64> {
        paths
            .iter()
            .filter(|p| p.is_usable())
            .filter_map(Self::capacity)
            .reduce(f64::min)
    }

    /// Expected delivery time of `pkt` on `view`, after re-anchoring the path's backlog.
    fn expected(
        &mut self,
        now: Time,
        view: &PathView,
        pkt: &PacketMeta,
        floor: Option<f64>,
    ) -> Option<Time> {
        let delay = view
            .base_owd
            .or(view.min_rtt.map(|r| r / 2))
            .unwrap_or(Duration::ZERO);
        let rate = Self::capacity(view).or_else(|| {
            floor.map(|f| f.max(view.delivery_rate.filter(|r| r.is_finite()).unwrap_or(0.0)))
        });
        let slot = self.slot_mut(view.id);
        slot.delay = delay;
        slot.rate = rate;
        let rate = rate?;
        // 1. Re-anchor the modelled backlog between the measured bounds.
        let measured_queue = match (view.owd, view.base_owd) {
            (Some(o), Some(b)) => o.saturating_sub(b),
            _ => Duration::ZERO,
        };
        let drain_in_flight = transmission_time(
            usize::try_from(view.bytes_in_flight).unwrap_or(usize::MAX),
            rate,
        );
        // `avail` is in the frame of `d` (arrival at the far end), so the bounds add `D`.
        let lo = now + delay + measured_queue.min(drain_in_flight);
        let hi = now + delay + drain_in_flight;
        slot.avail = slot.avail.clamp(lo, hi);
        let (_, d) = bottleneck_delivery(now, pkt, delay, slot.avail, Some(rate));
        let d = d?;
        // 2. Loss: a lost packet costs about one retransmission timeout of the path, and a
        //    loss the link causes by itself (shallow queue) a window halving on top.
        let sane = |rate: f64| {
            if rate.is_finite() {
                rate.clamp(0.0, 0.95)
            } else {
                0.0
            }
        };
        let p = sane(view.loss_rate);
        let rto = view.srtt.unwrap_or(Duration::ZERO) + 4 * view.rttvar.unwrap_or(Duration::ZERO);
        let q = sane(view.shallow_loss_rate);
        let timeouts = p / (1.0 - p) + LINK_LOSS_EXTRA_TIMEOUTS * q / (1.0 - q);
        Some(d + crate::time::secs_f64_saturating(timeouts * rto.as_secs_f64()))
    }

    fn choose(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Option<PathId> {
        let floor = Self::floor_rate(paths);
        // Per usable path, in id order; `load: None` = no rate at all.
        let mut candidates = [Candidate::default(); crate::ids::MAX_PATHS];
        let mut n = 0;
        for view in paths
            .iter()
            .filter(|p| p.is_selectable())
            .take(crate::ids::MAX_PATHS)
        {
            let load = self.expected(now, view, pkt, floor).map(|d| {
                let slot = self.slots.get(view.id);
                let backlog = slot.avail.saturating_since(now + slot.delay);
                let per_packet = slot
                    .rate
                    .map_or(Duration::ZERO, |r| transmission_time(pkt.len, r));
                let target = QUEUE_TARGET.max(per_packet.saturating_mul(QUEUE_TARGET_PACKETS));
                Load {
                    delivery: d,
                    over: backlog > target,
                    ratio: backlog.as_secs_f64() / target.as_secs_f64(),
                    backed_up: backlog > target.max(OVERFLOW_BACKLOG),
                }
            });
            candidates[n] = Candidate {
                id: view.id,
                delay: self.slots.get(view.id).delay,
                load,
                overflow: !view.is_usable(),
                far: false,
            };
            n += 1;
        }
        // 6. Overflow paths only when every other usable path is backed up; then they
        //    compete like the others. Without overflow paths this changes nothing.
        let spill = candidates[..n]
            .iter()
            .filter(|c| !c.overflow)
            .all(|c| c.load.is_some_and(|l| l.backed_up));
        if !spill {
            let mut kept = 0;
            for i in 0..n {
                if !candidates[i].overflow {
                    candidates[kept] = candidates[i];
                    kept += 1;
                }
            }
            n = kept;
        }
        // 7. Far paths: far behind in delay and a small share of the capacity.
        let shortest = candidates[..n]
            .iter()
            .filter(|c| c.load.is_some())
            .map(|c| c.delay)
            .min()
            .unwrap_or(Duration::ZERO);
        let total: f64 = candidates[..n]
            .iter()
            .filter_map(|c| self.slots.get(c.id).rate)
            .sum();
        for c in &mut candidates[..n] {
            c.far = c.delay > shortest.saturating_add(FAR_PATH_DELAY)
                && self
                    .slots
                    .get(c.id)
                    .rate
                    .is_some_and(|r| r * FAR_PATH_SHARE_DIVISOR < total);
        }
        let candidates = &candidates[..n];
        let Some(earliest) = candidates
            .iter()
            .filter_map(|c| c.load.map(|l| l.delivery))
            .min()
        else {
            // 3. No rate anywhere: the path with the smallest delay.
            return candidates.iter().min_by_key(|c| c.delay).map(|c| c.id);
        };
        // 4. Earliest among paths under target and within the reorder budget of the
        //    earliest (7: a far path's own, shorter budget); else the least over its target.
        //    Ties: lowest id.
        let in_budget = |c: &Candidate, l: &Load| {
            let budget = if c.far {
                FAR_PATH_BUDGET
            } else {
                REORDER_BUDGET
            };
            l.delivery <= earliest + budget
        };
        let pick = |ok: &dyn Fn(&Candidate, &Load) -> bool| {
            candidates
                .iter()
                .filter_map(|c| c.load.filter(|l| ok(c, l)).map(|l| (l.delivery, c.id)))
                .min_by_key(|&(d, id)| (d, id))
                .map(|(_, id)| id)
        };
        pick(&|c, l| !l.over && in_budget(c, l)).or_else(|| {
            // Every path over its target: the one least over it (backlog / target), among
            // paths delivering within their budget of the earliest and whose propagation
            // delay is within the reorder budget of the shortest; failing that, the earliest.
            candidates
                .iter()
                .filter(|c| c.delay <= shortest.saturating_add(REORDER_BUDGET))
                .filter_map(|c| c.load.filter(|l| in_budget(c, l)).map(|l| (l.ratio, c.id)))
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
                .map(|(_, id)| id)
                .or_else(|| pick(&|_, _| true))
        })
    }
}

/// One usable path at a decision.
#[derive(Debug, Clone, Copy, Default)]
struct Candidate {
    id: PathId,
    /// Its delay `D` (propagation, no queue).
    delay: Duration,
    /// `None`: no rate, so no delivery time.
    load: Option<Load>,
    /// In its overflow role (rule 6).
    overflow: bool,
    /// Far behind in delay with a small share of the capacity (rule 7).
    far: bool,
}

/// Where a packet would stand on a path with a rate.
#[derive(Debug, Clone, Copy)]
struct Load {
    /// Expected delivery time (rules 1 and 2).
    delivery: Time,
    /// The modelled backlog is over its target.
    over: bool,
    /// Backlog divided by target (the target is at least `QUEUE_TARGET`, never zero).
    ratio: f64,
    /// The backlog is over `OVERFLOW_BACKLOG` and the target (rule 6).
    backed_up: bool,
}

impl Scheduler for Plait {
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        self.choose(now, paths, pkt)
            .map_or(Selection::Wait(None), Selection::Send)
    }

    fn select_control(
        &mut self,
        now: Time,
        paths: &[PathView],
        pkt: &PacketMeta,
    ) -> Option<PathId> {
        self.choose(now, paths, pkt)
    }

    fn on_sent(&mut self, now: Time, path: PathId, pkt: &PacketMeta) {
        let slot = self.slot_mut(path);
        let (start, d) = bottleneck_delivery(now, pkt, slot.delay, slot.avail, slot.rate);
        slot.avail = d.unwrap_or(start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathState;

    const MS: Duration = Duration::from_millis(1);

    fn view(id: u8, rate: Option<f64>, owd: u32) -> PathView {
        PathView {
            pair_rate: rate,
            base_owd: Some(owd * MS),
            owd: Some(owd * MS),
            srtt: Some(2 * owd * MS + 10 * MS),
            rttvar: Some(MS),
            ..PathView::new(PathId(id), PathState::Active)
        }
    }

    fn pkt(now: Time, len: usize) -> PacketMeta {
        PacketMeta {
            global_seq: 0,
            len,
            arrival: now,
            control: false,
        }
    }

    #[test]
    fn earliest_delivery_like_edpf_on_exact_estimates() {
        let mut s = Plait::default();
        let now = Time::from_millis(100);
        // 1 MB/s at 10 ms vs 0.25 MB/s at 10 ms: the fast path until its backlog makes the
        // slow one earlier.
        let mut paths = vec![view(0, Some(1e6), 10), view(1, Some(2.5e5), 10)];
        let mut chosen = Vec::new();
        for _ in 0..10 {
            let Selection::Send(p) = s.select(now, &paths, &pkt(now, 1000)) else {
                panic!()
            };
            s.on_sent(now, p, &pkt(now, 1000));
            paths[p.index()].bytes_in_flight += 1000;
            chosen.push(p.0);
        }
        assert_eq!(chosen.iter().filter(|p| **p == 0).count(), 8, "{chosen:?}");
    }

    #[test]
    fn backlog_is_clamped_by_bytes_in_flight() {
        let mut s = Plait::default();
        let now = Time::from_millis(100);
        // The model believes path 0 is 10 s behind (a rate once estimated far too low)…
        s.slot_mut(PathId(0)).avail = now + Duration::from_secs(10);
        // …but nothing is in flight on it: it is idle, and gets the packet.
        let paths = vec![view(0, Some(1e6), 10), view(1, Some(1e6), 12)];
        assert_eq!(
            s.select(now, &paths, &pkt(now, 1000)),
            Selection::Send(PathId(0))
        );
    }

    #[test]
    fn backlog_is_at_least_the_measured_queue() {
        let mut s = Plait::default();
        let now = Time::from_millis(100);
        // Path 0 is faster on paper but its one-way delay shows 50 ms of queue.
        let mut p0 = view(0, Some(1e6), 10);
        p0.owd = Some(60 * MS);
        p0.bytes_in_flight = 100_000; // 100 ms to drain: the measured 50 ms is plausible
        let p1 = view(1, Some(5e5), 12);
        assert_eq!(
            s.select(now, &[p0, p1], &pkt(now, 1000)),
            Selection::Send(PathId(1))
        );
    }

    #[test]
    fn when_every_path_is_over_target_the_least_over_wins() {
        let mut s = Plait::default();
        let now = Time::from_millis(1000);
        // Both at 1 MB/s: path 0 (10 ms one way) has 300 ms queued, path 1 (200 ms) 150 ms.
        let mut p0 = view(0, Some(1e6), 10);
        let mut p1 = view(1, Some(1e6), 200);
        p0.bytes_in_flight = 1_000_000;
        p1.bytes_in_flight = 1_000_000;
        s.slot_mut(PathId(0)).avail = now + Duration::from_millis(10 + 300);
        s.slot_mut(PathId(1)).avail = now + Duration::from_millis(200 + 150);
        // Delivery: path 0 at +311 ms, path 1 at +351 ms; both over their target.
        assert_eq!(
            s.select(now, &[p0.clone(), p1.clone()], &pkt(now, 1000)),
            Selection::Send(PathId(1)),
            "the path less over its target, not the earliest"
        );
        // A path whose propagation delay is beyond the reorder budget is not a candidate.
        let mut s = Plait::default();
        let mut far = view(1, Some(1e6), 700);
        far.bytes_in_flight = 1_000_000;
        s.slot_mut(PathId(0)).avail = now + Duration::from_millis(10 + 300);
        s.slot_mut(PathId(1)).avail = now + Duration::from_millis(700 + 150);
        assert_eq!(
            s.select(now, &[p0, far], &pkt(now, 1000)),
            Selection::Send(PathId(0))
        );
    }

    #[test]
    fn a_lossy_path_is_avoided_when_delays_are_close() {
        let mut s = Plait::default();
        let now = Time::ZERO;
        let mut p0 = view(0, Some(1e6), 10);
        p0.loss_rate = 0.10;
        let p1 = view(1, Some(1e6), 12);
        assert_eq!(
            s.select(now, &[p0, p1], &pkt(now, 1000)),
            Selection::Send(PathId(1))
        );
    }

    #[test]
    fn a_link_losing_packets_on_its_own_is_avoided_more_than_an_overrun_queue() {
        let now = Time::ZERO;
        // Path 0 is 5 ms earlier but loses 2 % of its packets (a timeout late each).
        let choose = |shallow: f64| {
            let mut s = Plait::default();
            let mut p0 = view(0, Some(1e6), 10);
            p0.srtt = Some(100 * MS);
            p0.loss_rate = 0.02;
            p0.shallow_loss_rate = shallow;
            let p1 = view(1, Some(1e6), 15);
            s.select(now, &[p0, p1], &pkt(now, 1000))
        };
        // Overflow drops (deep queue): 2 % of ~104 ms = 2 ms, less than 5 ms.
        assert_eq!(choose(0.0), Selection::Send(PathId(0)));
        // The link's own: 10 × 2 ms = 20 ms, more than 5 ms.
        assert_eq!(choose(0.02), Selection::Send(PathId(1)));
    }

    #[test]
    fn an_overflow_path_takes_packets_only_while_every_other_path_is_backed_up() {
        let mut s = Plait::default();
        let now = Time::from_millis(100);
        let p0 = view(0, Some(1e6), 20);
        // The overflow path is faster and earlier: without its role it would win.
        let p1 = PathView {
            overflow: true,
            overflow_only: true,
            ..view(1, Some(4e6), 10)
        };
        let mut paths = [p0, p1];
        let mut used = [0u32; 2];
        // 100 packets of 1000 bytes at once: 100 ms of the primary's queue.
        for _ in 0..100 {
            let Selection::Send(p) = s.select(now, &paths, &pkt(now, 1000)) else {
                panic!()
            };
            s.on_sent(now, p, &pkt(now, 1000));
            paths[p.index()].bytes_in_flight += 1000;
            used[p.index()] += 1;
        }
        // The primary fills to OVERFLOW_BACKLOG (30 packet times at 1 MB/s, and one more),
        // the rest spills.
        assert_eq!(used[0], 31, "{used:?}");
        // Later, its backlog drained: the primary again.
        let later = now + Duration::from_secs(1);
        for v in &mut paths {
            v.bytes_in_flight = 0;
        }
        assert_eq!(
            s.select(later, &paths, &pkt(later, 1000)),
            Selection::Send(PathId(0))
        );
        // A primary with a full window: the overflow path may take it.
        paths[0].cwnd_room = Some(0);
        assert_eq!(
            s.select(later, &paths, &pkt(later, 1000)),
            Selection::Send(PathId(1))
        );
        // A primary without a rate is never backed up: nothing spills.
        paths[0].cwnd_room = None;
        paths[0].pair_rate = None;
        paths[1].overflow_only = true;
        let mut s = Plait::default();
        assert_eq!(
            s.select(later, &paths, &pkt(later, 1000)),
            Selection::Send(PathId(0))
        );
    }

    #[test]
    fn a_path_without_rate_is_not_starved() {
        let mut s = Plait::default();
        let now = Time::ZERO;
        let mut paths = vec![view(0, Some(1e6), 10), view(1, None, 10)];
        paths[1].pair_rate = None;
        let mut used = [0; 2];
        for _ in 0..20 {
            let Selection::Send(p) = s.select(now, &paths, &pkt(now, 1000)) else {
                panic!()
            };
            s.on_sent(now, p, &pkt(now, 1000));
            paths[p.index()].bytes_in_flight += 1000;
            used[p.index()] += 1;
        }
        assert!(used[1] > 0, "{used:?}");
    }

    /// Sends `count` 1000-byte packets at one instant and returns how many went on path 0
    /// before the first one on any other path (all of them if none did).
    fn packets_before_first_spill(paths: &mut [PathView], count: usize) -> usize {
        let mut s = Plait::default();
        let now = Time::from_millis(100);
        for i in 0..count {
            let Selection::Send(p) = s.select(now, paths, &pkt(now, 1000)) else {
                panic!("no path chosen")
            };
            if p != PathId(0) {
                return i;
            }
            s.on_sent(now, p, &pkt(now, 1000));
            paths[p.index()].bytes_in_flight += 1000;
        }
        count
    }

    #[test]
    fn a_far_path_with_a_small_share_waits_until_the_near_queue_matches_its_delay() {
        // 2 MB/s at 5 ms beside 0.25 MB/s at 125 ms (T6's slowest path against its
        // fastest): the far path is 120 ms behind and carries 11 % of the capacity.
        let mut paths = vec![view(0, Some(2e6), 5), view(1, Some(2.5e5), 125)];
        let n = packets_before_first_spill(&mut paths, 400);
        // Rule 4 alone would spill after the 20 ms target (40 packets); rule 7 waits until
        // the near path delivers within 50 ms of the far one: 125 + 4 − 5 − 50 = 74 ms of
        // backlog at 2 kB/ms, about 148 packets.
        assert!((140..=156).contains(&n), "{n}");
    }

    #[test]
    fn a_far_path_with_a_large_share_takes_the_spill_at_the_target() {
        // The same delays with 1 MB/s on the slow path (a third of the capacity): not far,
        // so rule 4 spills to it once path 0 is 20 ms (40 packets) over.
        let mut paths = vec![view(0, Some(2e6), 5), view(1, Some(1e6), 125)];
        let n = packets_before_first_spill(&mut paths, 400);
        assert!((38..=42).contains(&n), "{n}");
    }

    #[test]
    fn a_slow_path_near_in_delay_is_not_far() {
        // 0.25 MB/s only 90 ms behind: under `FAR_PATH_DELAY`, rule 4 as before.
        let mut paths = vec![view(0, Some(2e6), 5), view(1, Some(2.5e5), 95)];
        let n = packets_before_first_spill(&mut paths, 400);
        assert!((38..=42).contains(&n), "{n}");
    }
}
