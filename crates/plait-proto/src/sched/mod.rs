//! The scheduler seam: for each inner packet, choose the path(s) it leaves on.
//!
//! A scheduler sees only read-only [`PathView`] snapshots and the packet's [`PacketMeta`];
//! it may keep its own per-path bookkeeping (indexed by [`PathId`], never a `HashMap`).
//!
//! Invariants every scheduler keeps (property-tested in `tests`):
//! - it never returns a path that is not [`PathView::is_usable`], except that `plait` may
//!   return a path in its overflow role ([`PathView::may_overflow`]) when every usable path
//!   is backed up (docs/protocol.md#overflow); every other scheduler leaves such paths
//!   alone, so for them an overflow path carries data only when it is all that is left;
//! - if no path is usable (nor, for `plait`, in its overflow role) it returns
//!   [`Selection::Wait`];
//! - it is deterministic: the same calls give the same answers.
//!
//! Adding a scheduler: one file here, one variant in [`SchedulerKind`] and [`AnyScheduler`].

use std::time::Duration;

use crate::ids::{GlobalSeq, PathId};
use crate::path::PathView;
use crate::time::Time;

mod blest;
mod edpf;
mod ikr;
mod measured;
mod mhip;
mod min_rtt;
mod mptcp_default;
mod pet;
mod plait;
mod redundant;
mod round_robin;
mod swtc;
mod weighted_round_robin;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

pub use blest::Blest;
pub use edpf::Edpf;
pub use ikr::Ikr;
pub use measured::{earliest_by_measurement, measured_delivery, soonest_by_measurement};
pub use mhip::Mhip;
pub use min_rtt::MinRtt;
pub use mptcp_default::MptcpDefault;
pub use pet::Pet;
pub use plait::Plait;
pub use redundant::Redundant;
pub use round_robin::RoundRobin;
pub use swtc::Swtc;
pub use weighted_round_robin::WeightedRoundRobin;

/// What a scheduler knows about the packet it places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// The packet's global sequence number.
    pub global_seq: GlobalSeq,
    /// Bytes the packet occupies on a path (datagram size including plait's overhead).
    pub len: usize,
    /// When the packet entered the session's send queue (`a_i` in seed PET-BMP eq. 1).
    pub arrival: Time,
    /// A control datagram (ACK-only, probe, PROBE_ACK) rather than an inner packet. They go
    /// through the scheduler too (`select` places ACK-only datagrams, `on_sent` reports all)
    /// so that schedulers modelling path queues count every byte put on a path.
    pub control: bool,
}

/// A scheduler's decision for one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Send on this path.
    Send(PathId),
    /// Send a copy on each of these paths (at least one); the receiver drops duplicates.
    Duplicate(Vec<PathId>),
    /// Send nothing now. `Some(t)`: ask again at `t`; `None`: ask again when paths change.
    Wait(Option<Time>),
}

/// A path scheduler (see the module docs for its invariants).
pub trait Scheduler {
    /// Chooses the path(s) for `pkt` given the current `paths` (every path of the session,
    /// usable or not, in `PathId` order).
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection;

    /// Chooses the path for a control datagram the session must send somewhere (an ACK-only
    /// datagram), without disturbing data placement (no rotation advances). Default: the
    /// usable path that delivers a small datagram soonest by measurement, see
    /// [`earliest_by_measurement`]. `None` when no path is usable.
    fn select_control(
        &mut self,
        _now: Time,
        paths: &[PathView],
        pkt: &PacketMeta,
    ) -> Option<PathId> {
        earliest_by_measurement(paths, pkt)
    }

    /// Tells the scheduler that `pkt` was really sent on `path` (after a `Send`, for each
    /// copy of a `Duplicate`, and for every control datagram, placed by `select` or not),
    /// so it can update what it tracks (e.g. EDPF's `A_l`).
    fn on_sent(&mut self, _now: Time, _path: PathId, _pkt: &PacketMeta) {}
}

/// Scheduler names accepted in config and scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchedulerKind {
    /// `round-robin`: each usable path in turn.
    RoundRobin,
    /// `wrr`: weighted round robin by capacity (the seeds' WRR baseline).
    WeightedRoundRobin,
    /// `edpf`: earliest delivery path first (seed PET-BMP eq. 1).
    Edpf,
    /// `min-rtt`: the usable path with the smallest smoothed RTT.
    MinRtt,
    /// `redundant`: a copy on every usable path.
    Redundant,
    /// `pet`: packet-pair based earliest delivery path first (seed PET-BMP §V-A).
    Pet,
    /// `mptcp`: Linux MPTCP's current default (least queued bytes over pacing rate, with a
    /// BLEST-like head-of-line check).
    MptcpDefault,
    /// `blest`: blocking estimation (Ferlin et al., 2016).
    Blest,
    /// `swtc`: ETOM's scheduled window-based transmission control (seed ETOM §IV-C).
    Swtc,
    /// `mhip`: minimum estimated arrival time within per-path windows (seed mHIP §IV-B).
    Mhip,
    /// `ikr`: capacity-ratio groups ordered so the slower link carries later packets
    /// (seed MMS §II-D).
    Ikr,
    /// `plait`: plait's own scheduler (docs/schedulers.md).
    Plait,
}

impl SchedulerKind {
    /// Every scheduler, in the order tables list them.
    pub const ALL: [SchedulerKind; 12] = [
        SchedulerKind::RoundRobin,
        SchedulerKind::WeightedRoundRobin,
        SchedulerKind::Edpf,
        SchedulerKind::MinRtt,
        SchedulerKind::Redundant,
        SchedulerKind::Pet,
        SchedulerKind::MptcpDefault,
        SchedulerKind::Blest,
        SchedulerKind::Swtc,
        SchedulerKind::Mhip,
        SchedulerKind::Ikr,
        SchedulerKind::Plait,
    ];

    /// The name used in config files.
    pub const fn name(self) -> &'static str {
        match self {
            SchedulerKind::RoundRobin => "round-robin",
            SchedulerKind::WeightedRoundRobin => "wrr",
            SchedulerKind::Edpf => "edpf",
            SchedulerKind::MinRtt => "min-rtt",
            SchedulerKind::Redundant => "redundant",
            SchedulerKind::Pet => "pet",
            SchedulerKind::MptcpDefault => "mptcp",
            SchedulerKind::Blest => "blest",
            SchedulerKind::Swtc => "swtc",
            SchedulerKind::Mhip => "mhip",
            SchedulerKind::Ikr => "ikr",
            SchedulerKind::Plait => "plait",
        }
    }

    /// Looks a scheduler up by its config name.
    pub fn from_name(name: &str) -> Option<SchedulerKind> {
        SchedulerKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Enum dispatch over every scheduler (no deep generics; chosen by name from config).
#[derive(Debug, Clone)]
pub enum AnyScheduler {
    /// See [`RoundRobin`].
    RoundRobin(RoundRobin),
    /// See [`WeightedRoundRobin`].
    WeightedRoundRobin(WeightedRoundRobin),
    /// See [`Edpf`].
    Edpf(Edpf),
    /// See [`MinRtt`].
    MinRtt(MinRtt),
    /// See [`Redundant`].
    Redundant(Redundant),
    /// See [`Pet`].
    Pet(Pet),
    /// See [`MptcpDefault`].
    MptcpDefault(MptcpDefault),
    /// See [`Blest`].
    Blest(Blest),
    /// See [`Swtc`].
    Swtc(Swtc),
    /// See [`Mhip`].
    Mhip(Mhip),
    /// See [`Ikr`].
    Ikr(Ikr),
    /// See [`Plait`].
    Plait(Plait),
}

impl AnyScheduler {
    /// A fresh scheduler of the given kind.
    pub fn new(kind: SchedulerKind) -> AnyScheduler {
        match kind {
            SchedulerKind::RoundRobin => AnyScheduler::RoundRobin(RoundRobin::default()),
            SchedulerKind::WeightedRoundRobin => {
                AnyScheduler::WeightedRoundRobin(WeightedRoundRobin::default())
            }
            SchedulerKind::Edpf => AnyScheduler::Edpf(Edpf::default()),
            SchedulerKind::MinRtt => AnyScheduler::MinRtt(MinRtt::default()),
            SchedulerKind::Redundant => AnyScheduler::Redundant(Redundant::default()),
            SchedulerKind::Pet => AnyScheduler::Pet(Pet::default()),
            SchedulerKind::MptcpDefault => AnyScheduler::MptcpDefault(MptcpDefault::default()),
            SchedulerKind::Blest => AnyScheduler::Blest(Blest::default()),
            SchedulerKind::Swtc => AnyScheduler::Swtc(Swtc::default()),
            SchedulerKind::Mhip => AnyScheduler::Mhip(Mhip::default()),
            SchedulerKind::Ikr => AnyScheduler::Ikr(Ikr::default()),
            SchedulerKind::Plait => AnyScheduler::Plait(Plait::default()),
        }
    }

    fn inner(&mut self) -> &mut dyn Scheduler {
        match self {
            AnyScheduler::RoundRobin(s) => s,
            AnyScheduler::WeightedRoundRobin(s) => s,
            AnyScheduler::Edpf(s) => s,
            AnyScheduler::MinRtt(s) => s,
            AnyScheduler::Redundant(s) => s,
            AnyScheduler::Pet(s) => s,
            AnyScheduler::MptcpDefault(s) => s,
            AnyScheduler::Blest(s) => s,
            AnyScheduler::Swtc(s) => s,
            AnyScheduler::Mhip(s) => s,
            AnyScheduler::Ikr(s) => s,
            AnyScheduler::Plait(s) => s,
        }
    }
}

impl Scheduler for AnyScheduler {
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        self.inner().select(now, paths, pkt)
    }

    fn select_control(
        &mut self,
        now: Time,
        paths: &[PathView],
        pkt: &PacketMeta,
    ) -> Option<PathId> {
        self.inner().select_control(now, paths, pkt)
    }

    fn on_sent(&mut self, now: Time, path: PathId, pkt: &PacketMeta) {
        self.inner().on_sent(now, path, pkt)
    }
}

/// Serialization time of `len` bytes at `rate` bytes per second (`L/B` in seed PET-BMP eq. 1).
pub fn transmission_time(len: usize, rate: f64) -> Duration {
    if crate::cc::is_rate(&rate) {
        // A tiny rate gives more seconds than a Duration holds: saturate, never panic.
        crate::time::secs_f64_saturating(len as f64 / rate)
    } else {
        Duration::MAX
    }
}

/// Per-path scheduler state: a `Vec` indexed by `PathId`, grown to the largest id seen
/// (never a `HashMap`: iteration order must be deterministic).
#[derive(Debug, Clone, Default)]
pub(crate) struct PerPath<T> {
    slots: Vec<T>,
}

impl<T: Clone + Default> PerPath<T> {
    /// The state of `id` (the default if never touched).
    pub(crate) fn get(&self, id: PathId) -> T {
        self.slots.get(id.index()).cloned().unwrap_or_default()
    }

    /// The state of `id`, created with the default on first use.
    pub(crate) fn get_mut(&mut self, id: PathId) -> &mut T {
        if self.slots.len() <= id.index() {
            self.slots.resize(id.index() + 1, T::default());
        }
        &mut self.slots[id.index()]
    }
}

/// Seed PET-BMP eq. 1, the estimate EDPF, mHIP and plait share: a packet handed over at
/// `a` (never before `now`) starts across a path's bottleneck at `max(a + D, free_at)` and
/// has crossed it `L / B` later. Returns (start, delivery); delivery is `None` without `B`.
pub(crate) fn bottleneck_delivery(
    now: Time,
    pkt: &PacketMeta,
    delay: Duration,
    free_at: Time,
    rate: Option<f64>,
) -> (Time, Option<Time>) {
    let start = (pkt.arrival.max(now) + delay).max(free_at);
    (start, rate.map(|b| start + transmission_time(pkt.len, b)))
}

/// The usable path with the smallest key, ties broken by the lower `PathId`.
pub(crate) fn usable_min_by_key<K: PartialOrd>(
    paths: &[PathView],
    mut key: impl FnMut(&PathView) -> K,
) -> Option<PathId> {
    let mut best: Option<(K, PathId)> = None;
    for p in paths.iter().filter(|p| p.is_usable()) {
        let k = key(p);
        let better = match &best {
            None => true,
            // Ties keep the lower id even if `paths` were not in PathId order.
            Some((bk, bid)) => k < *bk || (k == *bk && p.id < *bid),
        };
        if better {
            best = Some((k, p.id));
        }
    }
    best.map(|(_, id)| id)
}
