//! Packet-pair based Earliest-Delivery-Path-First (`pet`): EDPF with estimated `B` and `D`,
//! fed by sending every data packet as one of a back-to-back pair (seed PET-BMP §V-A).
//!
//! Rules, each from the seed:
//! - Pairs. Every data packet is part of a pair: "PET treats every incoming packet as part
//!   of a pair" (seed PET-BMP §V-A). The first packet of a pair opens it on a path chosen
//!   by the rules below; the second goes on the same path ("The second packet of a pair is
//!   always sent on the same path as the first packet", seed PET-BMP §V-A), so the two
//!   leave back to back and the engine's sender-side packet-pair estimator (two consecutive
//!   datagrams on a path) gets a dispersion sample, [`PathView::pair_rate`]. If the path of
//!   an open pair is no longer usable, the second packet opens a new pair elsewhere.
//! - Start phase. While some usable path has no `pair_rate`, pairs go round robin over the
//!   usable paths in `PathId` order ("an initial phase where it sends packet-pairs on the
//!   various paths in a round-robin fashion, until it gets a bandwidth estimate", seed
//!   PET-BMP §V-A).
//! - EDPF. Afterwards the first packet of a pair goes where [`Edpf`] (eq. 1) delivers it
//!   first, with `B` from [`PathView::rate_estimate`] (which prefers the packet-pair rate)
//!   and `D` from the relative one-way delay ("it uses these bandwidth estimates to perform
//!   EDPF based scheduling to determine the path (interface) on which to send the first
//!   packet of a pair", seed PET-BMP §V-A).
//! - Refresh. A usable path that has not carried a pair for [`refresh_interval`] gets the
//!   next pair even if EDPF prefers another path ("it is important to send TCP packet-pairs
//!   on an interface periodically (even if PET chooses another interface)", seed PET-BMP
//!   §V-A); a path PET never paired on counts as due. Among several due paths, the one
//!   paired least recently (never first), ties by lowest id. The interval is
//!   `max(`[`REFRESH_MIN`]`, `[`REFRESH_RTTS`]` × srtt)` (1 s when `srtt` is unknown): the
//!   seed's estimator weighs the current sample 0.8 (seed PET-BMP §V-A footnote 3), so one
//!   fresh pair nearly renews an estimate and one pair per interval suffices; a 1 s floor
//!   bounds the cost (two packets a second on a path EDPF avoids, each a possible
//!   reordering) at any data rate, and ten RTTs leave time for the previous pair's feedback
//!   to come back on long-delay paths before another is forced onto them.
//! - Control datagrams (`pkt.control`) are never part of a pair and never change pair
//!   state: `select` and `select_control` place them by EDPF's model. `on_sent` books every
//!   datagram, control or data, in the inner EDPF's `A_l`, so it counts all bytes put on a
//!   path. A control datagram sent between the two packets of a pair leaves the pair open.
//!
//! Known limitation: the seed does not pair retransmitted TCP packets ("Retransmitted
//! packets are not part of any pair as the bandwidth estimate can be ambiguous", seed
//! PET-BMP §V-A). The engine carries opaque inner packets and cannot tell a TCP
//! retransmission, so here they are paired like any other packet. A later change may parse
//! inner TCP headers to exclude them.
//!
//! State changes only in `on_sent` (the datagram really left): the first data datagram on
//! a path without an open pair there opens a pair (and records the pair's time, and moves
//! the round-robin turn past that path); the next data datagram on that path closes it. A
//! data datagram on another path (e.g. a copy the engine sent elsewhere) opens a new pair
//! there, abandoning the open one. `select` only refreshes the inner EDPF's `B` and `D`,
//! so asking twice without sending gives the same answer. An open pair does not expire:
//! the seed pairs packets that do not arrive back to back too (in congestion avoidance
//! "these packets can still form a pair ... since the TCP pipe is not empty").
//!
//! Invariants: never an unusable path; `Wait(None)` if and only if no path is usable
//! (never another `Wait`); deterministic (no clock, no randomness, no hashing); per-path
//! state in a `Vec` indexed by `PathId`, grown to the largest id seen.

use std::time::Duration;

use super::{Edpf, PacketMeta, Scheduler, Selection};
use crate::cc::is_rate;
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

#[cfg(test)]
#[path = "pet_tests.rs"]
mod tests;

/// The shortest refresh interval (see [`refresh_interval`]).
pub const REFRESH_MIN: Duration = Duration::from_secs(1);

/// The refresh interval in smoothed RTTs, when that is longer than [`REFRESH_MIN`].
pub const REFRESH_RTTS: u32 = 10;

/// How long a usable path may go without carrying a pair before PET forces the next pair
/// onto it: `max(REFRESH_MIN, REFRESH_RTTS × srtt)`, `REFRESH_MIN` without an `srtt`
/// (see the module docs for why).
pub fn refresh_interval(view: &PathView) -> Duration {
    view.srtt
        .map_or(REFRESH_MIN, |s| s.saturating_mul(REFRESH_RTTS))
        .max(REFRESH_MIN)
}

/// Whether the path has a usable packet-pair rate (the start phase waits for one).
fn has_pair_rate(view: &PathView) -> bool {
    view.pair_rate.as_ref().is_some_and(is_rate)
}

/// Packet-pair EDPF scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Pet {
    /// EDPF's model (`A_l` of every path), fed every datagram sent.
    edpf: Edpf,
    /// When each path last opened a pair (`None`: never), indexed by `PathId::index()`.
    last_pair: Vec<Option<Time>>,
    /// The path whose pair has had its first packet but not its second.
    open: Option<PathId>,
    /// The path that opened the last pair; the start phase's round robin goes on after it.
    last_opened: Option<PathId>,
}

impl Pet {
    fn last_pair(&self, id: PathId) -> Option<Time> {
        self.last_pair.get(id.index()).copied().flatten()
    }

    /// Whether `view`'s path is due a refresh pair at `now`.
    fn refresh_due(&self, now: Time, view: &PathView) -> bool {
        self.last_pair(view.id)
            .is_none_or(|t| now.saturating_since(t) >= refresh_interval(view))
    }

    /// The path for the first packet of a new pair, given EDPF's choice for it.
    fn open_pair(&self, now: Time, paths: &[PathView], edpf: Option<PathId>) -> Option<PathId> {
        let usable = || paths.iter().filter(|p| p.is_usable());
        // Start phase: round robin in id order after the last pair's path, wrapping.
        if usable().any(|p| !has_pair_rate(p)) {
            let ids = || usable().map(|p| p.id);
            let after = |last: PathId| ids().filter(|&id| id > last).min();
            return self.last_opened.and_then(after).or_else(|| ids().min());
        }
        // Refresh: the due path paired least recently (never first), ties by lowest id.
        let due = usable()
            .filter(|p| self.refresh_due(now, p))
            .min_by_key(|p| (self.last_pair(p.id), p.id))
            .map(|p| p.id);
        due.or(edpf)
    }
}

impl Scheduler for Pet {
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        // Always ask EDPF: it refreshes its `B` and `D` for `on_sent`, whoever chooses.
        let edpf = match self.edpf.select(now, paths, pkt) {
            Selection::Send(id) => Some(id),
            _ => None,
        };
        if pkt.control {
            return edpf.map_or(Selection::Wait(None), Selection::Send);
        }
        let usable = |id: PathId| paths.iter().any(|p| p.id == id && p.is_usable());
        let chosen = match self.open {
            Some(id) if usable(id) => Some(id),
            _ => self.open_pair(now, paths, edpf),
        };
        chosen.map_or(Selection::Wait(None), Selection::Send)
    }

    /// Control datagrams go where EDPF's model delivers them first; pair state is untouched.
    fn select_control(
        &mut self,
        now: Time,
        paths: &[PathView],
        pkt: &PacketMeta,
    ) -> Option<PathId> {
        self.edpf.select_control(now, paths, pkt)
    }

    fn on_sent(&mut self, now: Time, path: PathId, pkt: &PacketMeta) {
        self.edpf.on_sent(now, path, pkt);
        if pkt.control {
            return;
        }
        if self.open == Some(path) {
            self.open = None;
            return;
        }
        self.open = Some(path);
        self.last_opened = Some(path);
        if self.last_pair.len() <= path.index() {
            self.last_pair.resize(path.index() + 1, None);
        }
        self.last_pair[path.index()] = Some(now);
    }
}
