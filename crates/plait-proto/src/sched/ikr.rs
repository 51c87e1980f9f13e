//! In-Kernel Re-Order packet distribution (`ikr`): packets per path in proportion to
//! capacity, handled in small groups ordered so the slower link carries the later sequence
//! numbers of each group, released with spacing (seed MMS §II-D).
//!
//! Rules, each from the seed:
//! - Ratio. Each usable path gets the fraction `f_i = b_i / (b_1 + ... + b_N)` of the
//!   packets (seed MMS eq. 1: "we must distribute traffic across the different links based
//!   on the ratio"), with `b_i` = [`PathView::rate_estimate`]. A usable path without an
//!   estimate gets the mean of the usable paths that have one, or every path the same when
//!   none has one (then groups are plain round robin in `PathId` order). Every usable path
//!   takes part ("links are utilized when they are up", seed MMS §II-D), except a path whose
//!   share would not fill half a packet of the largest group (below), see Groups.
//! - Groups. "If the bandwidth ratio is 4:1 ... we need to send 4 packets to the faster link
//!   and 1 packet to the other" and "a group of 5 packets are buffered" (seed MMS §II-D). At
//!   the start of a group the participating paths and their counts are fixed by this rule:
//!   the group size `n` is the smallest `n` from the number of participants `m` up to
//!   `cap = max(`[`MAX_GROUP`]`, m)` whose counts, apportioned from `n · f_i` (each floored,
//!   at least 1, remainders to the largest fractional parts, excess taken from the most
//!   over-served), are each within [`TOLERANCE`] packets of `n · f_i`; if no `n` qualifies,
//!   the `n` with the smallest largest share error `|c_i / n − f_i|` (ties: smallest `n`).
//!   So 4:1 gives 5 (4 + 1), 2:1 gives 3, 3:2 gives 5, 1:1:1 gives 3. Participants are the
//!   usable paths with `f_i · cap ≥ 1/2` (shares then renormalised): a path with less than
//!   1/64 of the capacity would get at least twice its share in any group giving it one
//!   packet, and leaving it out costs under 1/64 of the aggregate. The fastest path always
//!   takes part (`f_max ≥ 1/m`).
//! - Order. "If we send packet 1 to the lower link and packets 2, 3, 4, 5 to the faster
//!   link, the reception of packet 4 would trigger the fast-retransmission mechanism" and
//!   instead "packet 5 is sent through the slower link while all 4 other packets are sent
//!   through the faster link" (seed MMS §II-D). Within a group the slots are ordered fastest
//!   first (rate descending, ties lowest id), each path's slots consecutive: the sequence of
//!   paths of a group is non-increasing in rate, so a lower sequence number never rides a
//!   slower link than a higher one of its group ("It selects the packets in an order such
//!   that it would not cause fast-retransmission while satisfying the given distribution
//!   ratio").
//! - No buffering delay. The seed buffers a group and then releases it; the session hands
//!   packets over one at a time in sequence order, so a per-group plan gives the same
//!   assignment without holding packets: each `select` returns the next slot of the plan
//!   (the seed's evaluation: "there is no additional delay incurred during the queuing
//!   time"). Rates and usable paths are read at the start of a group; a path that comes up
//!   mid-group joins the next one. If the path of the next slot is no longer usable, the
//!   rest of the group is dropped and a new group is planned over the usable paths.
//! - Spacing. "In order to reduce burstiness, we create a delay between every outgoing
//!   packet when the buffer is released" (seed MMS §II-D). Data packets are paced at the
//!   aggregate rate `R = PACING_GAIN · Σ b_i` of the participants (missing estimates at the
//!   mean, as for the ratio): a data packet of `len` bytes sent at `t` lets the next one
//!   leave at `t + len / R`. Before that `select` returns `Wait(Some(t'))` with `t' > now`.
//!   `R` is read from the current views at each `select` (a corrected estimate takes effect
//!   at once); there is no credit for idle time (the next packet is spaced from the actual
//!   send time), so no burst follows a pause. [`PACING_GAIN`] is slightly above 1 because
//!   `rate_estimate` may be a delivery rate, which only measures what the path carried:
//!   pacing at exactly that rate could never let it grow. No estimate at all: no pacing.
//! - Receiver side. "If the number of out-of-sequence packets is larger than the buffer's
//!   capacity, the oldest packet in the queue is removed and the new packet stacks up"
//!   (seed MMS §II-D) is the reorder buffer's business, not a scheduler's: the `mms` reorder
//!   policy (`reorder/mms.rs`) is that buffer, and `bmp` keeps the same rule as its bound.
//!   This module is IKR's sender side only.
//! - Control datagrams (`pkt.control`) are neither planned nor paced: `select` places them
//!   like the default [`Scheduler::select_control`] ([`earliest_by_measurement`]) and
//!   `on_sent` ignores them.
//!
//! State changes: `select` only (re)plans a group when the current one is used up or its
//! next slot's path is unusable, so asking twice without sending gives the same answer.
//! `on_sent` of a data packet records the send for pacing and consumes the next slot when
//! the packet left on that slot's path (a packet the session sent elsewhere leaves the plan
//! where it was).
//!
//! Invariants: never an unusable path; `Wait(None)` if and only if no path is usable;
//! any other wait is `Wait(Some(t))` with `t > now`; deterministic (no clock, no randomness,
//! no hashing). The only per-path state is the plan, a `Vec` of `PathId` slots.

use std::cmp::Ordering;
use std::time::Duration;

use super::{PacketMeta, Scheduler, Selection, earliest_by_measurement};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::{Time, secs_f64_saturating};

#[cfg(test)]
#[path = "ikr_tests.rs"]
mod tests;

/// Largest group when there are at most this many usable paths (else one slot per path).
pub const MAX_GROUP: usize = 32;

/// How far, in packets, a path's count in a group may be from its ideal `n · f_i` for `n`
/// to be the group size (see the module docs): a path with one slot carries its capacity
/// share within 10 %. (A quarter packet would take 3:1 groups for 4:1 rates.)
pub const TOLERANCE: f64 = 0.1;

/// Pacing rate over the aggregate estimated rate (see the module docs).
pub const PACING_GAIN: f64 = 1.25;

/// IKR scheduler (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Ikr {
    /// The current group's slots, fastest path first.
    plan: Vec<PathId>,
    /// Index in `plan` of the next slot.
    next: usize,
    /// Send time and length of the last data packet (pacing).
    last_sent: Option<(Time, usize)>,
}

/// The participants of a group and the rate to pace at.
#[derive(Debug, Clone, PartialEq)]
struct Shares {
    /// Participating paths with their share `f_i` (summing to 1), fastest first.
    paths: Vec<(PathId, f64)>,
    /// Aggregate estimated rate of the participants, bytes per second; `None` when no
    /// usable path has an estimate.
    rate: Option<f64>,
}

/// Ratio, participants and aggregate rate over the usable `paths` (see the module docs);
/// `None` when no path is usable.
fn shares(paths: &[PathView]) -> Option<Shares> {
    let usable: Vec<(PathId, Option<f64>)> = paths
        .iter()
        .filter(|p| p.is_usable())
        .map(|p| (p.id, p.rate_estimate()))
        .collect();
    if usable.is_empty() {
        return None;
    }
    // Weights relative to the largest estimate: in (0, 1], so sums cannot overflow.
    let max_rate = usable
        .iter()
        .filter_map(|&(_, r)| r)
        .fold(0.0_f64, f64::max);
    let known: Vec<f64> = usable
        .iter()
        .filter_map(|&(_, r)| r.map(|r| r / max_rate))
        .collect();
    let default_weight = if known.is_empty() {
        1.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    let mut weighted: Vec<(PathId, f64)> = usable
        .iter()
        .map(|&(id, r)| (id, r.map_or(default_weight, |r| r / max_rate)))
        .collect();
    // Fastest first, ties by lowest id.
    weighted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let cap = MAX_GROUP.max(weighted.len());
    let total: f64 = weighted.iter().map(|w| w.1).sum();
    // The fastest path always stays: its share is at least 1/m, so f·cap >= 1.
    let first = weighted[0];
    weighted.retain(|&(id, w)| id == first.0 || w / total * cap as f64 >= 0.5);
    let total: f64 = weighted.iter().map(|w| w.1).sum();
    let rate = (max_rate > 0.0).then_some(PACING_GAIN * total * max_rate);
    Some(Shares {
        paths: weighted
            .into_iter()
            .map(|(id, w)| (id, w / total))
            .collect(),
        rate,
    })
}

/// Whole counts summing to `n` (at least 1 each; `n >= shares.len()`) close to `n · f_i`.
fn apportion(n: usize, shares: &[f64]) -> Vec<usize> {
    let ideal: Vec<f64> = shares.iter().map(|f| n as f64 * f).collect();
    let mut counts: Vec<usize> = ideal.iter().map(|x| (x.floor() as usize).max(1)).collect();
    let mut sum: usize = counts.iter().sum();
    // The index with the largest key, ties to the first (the faster path).
    let argmax = |keys: &mut dyn Iterator<Item = (usize, f64)>| {
        keys.fold(None, |best: Option<(usize, f64)>, (i, k)| match best {
            Some((_, bk)) if bk >= k => best,
            _ => Some((i, k)),
        })
        .map(|(i, _)| i)
    };
    while sum < n {
        let Some(i) = argmax(&mut (0..counts.len()).map(|i| (i, ideal[i] - counts[i] as f64)))
        else {
            break;
        };
        counts[i] += 1;
        sum += 1;
    }
    while sum > n {
        let Some(i) = argmax(
            &mut (0..counts.len())
                .filter(|&i| counts[i] > 1)
                .map(|i| (i, counts[i] as f64 - ideal[i])),
        ) else {
            break;
        };
        counts[i] -= 1;
        sum -= 1;
    }
    counts
}

/// The slots of a new group over `shares` (fastest first; see the module docs).
fn plan_group(shares: &[(PathId, f64)]) -> Vec<PathId> {
    let f: Vec<f64> = shares.iter().map(|s| s.1).collect();
    let m = f.len();
    let cap = MAX_GROUP.max(m);
    let mut best: Option<(f64, Vec<usize>)> = None;
    for n in m..=cap {
        let counts = apportion(n, &f);
        let err = counts
            .iter()
            .zip(&f)
            .map(|(&c, &fi)| (c as f64 - n as f64 * fi).abs())
            .fold(0.0_f64, f64::max);
        if err <= TOLERANCE {
            best = Some((0.0, counts));
            break;
        }
        let share_err = err / n as f64;
        if best
            .as_ref()
            .is_none_or(|(e, _)| share_err.total_cmp(e) == Ordering::Less)
        {
            best = Some((share_err, counts));
        }
    }
    let counts = best.map(|b| b.1).unwrap_or_default();
    shares
        .iter()
        .zip(counts)
        .flat_map(|(&(id, _), c)| std::iter::repeat_n(id, c))
        .collect()
}

/// Time to space after a packet of `len` bytes at `rate` bytes per second.
fn gap(len: usize, rate: f64) -> Duration {
    if rate > 0.0 {
        // An infinite rate gives zero; a tiny one saturates.
        secs_f64_saturating(len as f64 / rate)
    } else {
        Duration::ZERO
    }
}

impl Ikr {
    /// The path of the next slot, planning a new group if the current one is used up or
    /// the next slot's path is no longer usable.
    fn next_slot(&mut self, paths: &[PathView], shares: &Shares) -> PathId {
        let usable = |id: PathId| paths.iter().any(|p| p.id == id && p.is_usable());
        match self.plan.get(self.next) {
            Some(&id) if usable(id) => id,
            _ => {
                self.plan = plan_group(&shares.paths);
                self.next = 0;
                self.plan[0]
            }
        }
    }
}

impl Scheduler for Ikr {
    fn select(&mut self, now: Time, paths: &[PathView], pkt: &PacketMeta) -> Selection {
        if pkt.control {
            return earliest_by_measurement(paths, pkt)
                .map_or(Selection::Wait(None), Selection::Send);
        }
        let Some(shares) = shares(paths) else {
            return Selection::Wait(None);
        };
        let id = self.next_slot(paths, &shares);
        if let (Some((sent, len)), Some(rate)) = (self.last_sent, shares.rate) {
            let release = sent.saturating_add(gap(len, rate));
            if release > now {
                return Selection::Wait(Some(release));
            }
        }
        Selection::Send(id)
    }

    fn on_sent(&mut self, now: Time, path: PathId, pkt: &PacketMeta) {
        if pkt.control {
            return;
        }
        self.last_sent = Some((now, pkt.len));
        if self.plan.get(self.next) == Some(&path) {
            self.next += 1;
        }
    }
}
