//! Scheduled Window-based Transmission Control (`swtc`): send each packet on the "fastest"
//! path, the usable path with the minimum expected delay `E(D)` (seed ETOM §IV-C).
//!
//! "The basic idea is to schedule each packet sent out through the “fastest” path when the MR
//! has a packet to send. [...] The fastest path is defined as the path with the minimum
//! expected delay. The delay D consists of two parts: the waiting time w from now until the
//! packet can be injected into a particular link, and the round-trip network delay r."
//! (seed ETOM §IV-C)
//!
//! # Expected delay, eqs. 1–3
//!
//! The seed's equations 1–3 are figures that did not survive in the seed's text; they are
//! rebuilt here from the prose around them, which pins them down:
//! - eq. 1: "Suppose random variable D can take delay value d_loss_j with loss probability
//!   p_j, and d_no_loss with additional probability", so
//!   `E(D) = Σ_j p_j · d_loss_j + (1 − Σ_j p_j) · d_no_loss`, where "loss j [is] the case
//!   when the same packet is continuously lost j times" and "d_no_loss = d_loss_0".
//! - "The difference between d_loss_j and d_loss_j-1 is mainly one extra network round-trip
//!   delay", "when the packet is continuously lost j times, d_loss_j will take j
//!   retransmissions and need extra round trip delays (r_loss_1 + ... + r_loss_j)", and
//!   "we simplify our equation by assuming r_loss_j = r_no_loss", so with `W = w_no_loss`
//!   and `r = r_no_loss`: `d_loss_j = W + (j + 1) · r`. Loss detection is in `r`: "we
//!   assume the time for loss detection (e.g. through timeout or observing gap in the
//!   sequence number) is included in r". A loss thus costs one extra `r`, not an RTO.
//! - eq. 2: "we assume that the loss probability always remains the same and denote it as
//!   p", so the packet is lost exactly `j` times in a row with probability `p^j (1 − p)`:
//!   `E(D) = Σ_{j≥0} p^j (1 − p) (W + (j + 1) r)`.
//! - eq. 3, the closed form ("Equation 2 can be further reduced into to a closed form as
//!   shown in equation 3, which can be used to estimate the expected delay when a packet is
//!   scheduled to be transmitted on path i"): since `Σ_{j≥0} (j + 1) p^j (1 − p) = 1/(1 − p)`,
//!   **`E(D_i) = w_i + r_i / (1 − p_i)`**.
//!
//! `p_i` is [`PathView::loss_rate`] (a NaN counts as 0, values are clamped to `0..=1`); at
//! `p_i = 1` the packet is never delivered and `E(D_i)` is infinite (the path is still chosen
//! if every usable path is in that state: never an unusable path, never a `Wait` while a
//! path is usable).
//!
//! # Waiting time, eq. 4: `w_i = m_i + n_i`
//!
//! "Estimating w needs to consider two things: the time (m) to wait for all previous
//! scheduled packets to be injected into the link and the time (n) to wait until the
//! congestion window is open (i.e. when cwnd is larger than the amount of outstanding data)"
//! (seed ETOM §IV-C, eq. 4).
//!
//! - `m_i = Q_i / B_i`: "m_i can be computed by estimating the transmission delay of all
//!   previous scheduled packets. The transmission delay can be obtained by dividing the
//!   available bandwidth (B) by the packet size (d)" (sic: it is `d / B`); with the seed's
//!   "assume all packets have the same size", the sum over the queued packets is the queued
//!   bytes over `B`.
//!   - `Q_i` is [`PathView::bytes_in_flight`]. Approximation: the seed's MR holds a local
//!     per-path queue of packets scheduled but not yet injected; plait puts every packet on
//!     its path at once, so the path's queue is its bottleneck queue, which the sender cannot
//!     see. Bytes in flight over-count it by the bytes still propagating (and those already
//!     delivered whose acknowledgement is on its way), about `B × RTT`. The over-count is
//!     largely taken back by `r = srtt − m` (below): `m + r` stays close to the current
//!     `srtt`.
//!   - `B_i` is [`PathView::delivery_rate`] when it is a finite positive number, else
//!     [`PathView::rate_estimate`] (packet-pair rate, then configured capacity). The delivery
//!     rate comes first because it is what the seed uses ("We adopt the bandwidth estimation
//!     function in TCP Westwood [27] to calculate B"; plait's delivery rate is Westwood-like)
//!     and because `m` is the time for the path to *drain* what is queued, which is the rate
//!     the path actually delivers, not its nominal capacity. When `Q_i = 0`, `m_i = 0`
//!     whatever `B_i`.
//! - `n_i = 0` for every path this scheduler may choose. `n_i` "aims to estimate the duration
//!   for enough ACKs to come back so that cwnd can be advanced to a level that is larger than
//!   the amount of outstanding data". In packet mode a path has no congestion window
//!   ([`PathView::cwnd_room`] is `None`: congestion control is the end hosts' TCP), so it
//!   never waits for one. A path with `cwnd_room == Some(0)` is not
//!   [`PathView::is_usable`] and is never chosen (the session waits instead of queueing a
//!   packet behind a closed window, as the seed's MR would); `Some(k > 0)` means cwnd is
//!   larger than the outstanding data, the seed's condition for an open window.
//!
//! # Round-trip delay `r`
//!
//! "we estimate the round-trip delay r̂ for data segment k on path i as: r̂_i^k = rtt_M^k −
//! m_i^k. We further compute r̄ by averaging samples r̂ to avoid large fluctuations of r_i
//! between different data segments. Here we set α to 0.875 as in most implementations of
//! smoothed rtt." (seed ETOM §IV-C; the formula is a figure, rebuilt from the prose "Given
//! that m_i is already estimated when we calculate w_i [...]"). So
//! `r̄_i ← α · r̄_i + (1 − α) · r̂_i` with [`ALPHA`] `= 0.875`, the first sample taken as is.
//!
//! - Sample. The scheduler sees no per-segment RTT, so `rtt_M` is [`PathView::srtt`] (already
//!   smoothed by RFC 6298 with the same 7/8: an approximation that smooths twice) and `m` is
//!   the path's `m_i` when the packet is scheduled: `r̂_i = max(0, srtt_i − m_i)`.
//! - Update. `select` records `r̂` for every path in the view; `on_sent` for a data packet
//!   (not `control`: the seed samples data segments) on path `i` folds that recorded sample
//!   into `r̄_i` once (a second `on_sent` without a new `select` adds nothing). So `r̄_i`
//!   advances by one sample per data packet sent on path `i`, as in the seed, and asking
//!   twice without sending gives the same answer.
//! - Use. `E(D_i)` uses `r̄_i`, or the fresh sample `r̂_i` on a path that has not carried a
//!   data packet yet. Limitation: `r̄_i` of a path the scheduler avoids does not follow its
//!   `srtt` until it carries a packet again (as in the seed, whose samples come from data
//!   segments); under load `m` grows on the paths in use until the avoided path wins again.
//!
//! # Missing estimates and ties
//!
//! A usable path without an `srtt`, or with bytes in flight but no rate, has no complete
//! `E(D)`; such paths are chosen only when no usable path has one, by the partial `E(D)`
//! with the unknown terms counted as zero. Ties go to the lowest `PathId`.
//!
//! Control datagrams: `select` places them by `E(D)` like data; `select_control` keeps the
//! default ([`super::earliest_by_measurement`]). Invariants: never an unusable path;
//! `Wait(None)` if and only if no path is usable (never another `Wait`); deterministic (no
//! clock, no randomness, no hashing); per-path state in a `Vec` indexed by `PathId`, grown
//! to the largest id seen.

use std::time::Duration;

use super::{PacketMeta, PerPath, Scheduler, Selection, usable_min_by_key};
use crate::cc::is_rate;
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::{Time, secs_f64_saturating};

#[cfg(test)]
#[path = "swtc_tests.rs"]
mod tests;

/// The weight of the old value when smoothing `r` (seed ETOM §IV-C: "we set α to 0.875").
pub const ALPHA: f64 = 0.875;

/// [`ALPHA`] in eighths (7), so the smoothing is exact integer arithmetic.
const ALPHA_EIGHTHS: u128 = (ALPHA * 8.0) as u128;

/// What SWTC tracks for one path.
#[derive(Debug, Clone, Copy, Default)]
struct PathSlot {
    /// `r̄_i`: the smoothed round-trip delay without `m` (`None`: no data packet sent yet).
    r_smoothed: Option<Duration>,
    /// `r̂_i` recorded at the last `select`, waiting for `on_sent` (`None`: none, or used).
    sample: Option<Duration>,
}

/// ETOM's scheduled window-based transmission control (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Swtc {
    /// Per-path state, indexed by `PathId::index()`.
    slots: PerPath<PathSlot>,
}

/// `B_i`: the delivery rate (Westwood, as the seed), else [`PathView::rate_estimate`].
fn bandwidth(view: &PathView) -> Option<f64> {
    view.delivery_rate
        .filter(is_rate)
        .or_else(|| view.rate_estimate())
}

/// `m_i = Q_i / B_i` with `Q_i` the path's bytes in flight; zero when nothing is in flight,
/// `None` when something is but the rate is unknown.
pub fn drain_time(view: &PathView) -> Option<Duration> {
    if view.bytes_in_flight == 0 {
        return Some(Duration::ZERO);
    }
    bandwidth(view).map(|b| secs_f64_saturating(view.bytes_in_flight as f64 / b))
}

/// `n_i`: zero for every path SWTC may choose (no window, or an open one; see the module
/// docs). A closed window (`Some(0)`) makes the path unusable, so it never gets here.
fn window_wait(_view: &PathView) -> Duration {
    Duration::ZERO
}

/// `r̂_i = max(0, srtt_i − m_i)`; `None` without an `srtt`.
fn r_sample(view: &PathView, m: Duration) -> Option<Duration> {
    view.srtt.map(|s| s.saturating_sub(m))
}

/// `r̄ ← α r̄ + (1 − α) r̂` with α = [`ALPHA`] = 7/8, in integer nanoseconds (exact to the
/// nanosecond, rounded down; saturating at `Duration::MAX`).
pub fn smooth(r_smoothed: Duration, sample: Duration) -> Duration {
    let ns = (ALPHA_EIGHTHS * r_smoothed.as_nanos() + (8 - ALPHA_EIGHTHS) * sample.as_nanos()) / 8;
    u64::try_from(ns).map_or(Duration::MAX, Duration::from_nanos)
}

/// `p_i` clamped to `0..=1` (NaN: 0).
fn loss_probability(view: &PathView) -> f64 {
    if view.loss_rate.is_nan() {
        0.0
    } else {
        view.loss_rate.clamp(0.0, 1.0)
    }
}

/// Eq. 3: `E(D) = w + r / (1 − p)` in seconds; infinite when `p = 1` and `r > 0`.
pub fn expected_delay(w: Duration, r: Duration, p: f64) -> f64 {
    let r = r.as_secs_f64();
    let retrans = if r == 0.0 {
        0.0
    } else if p >= 1.0 {
        f64::INFINITY
    } else {
        r / (1.0 - p)
    };
    w.as_secs_f64() + retrans
}

impl Swtc {
    fn slot(&self, id: PathId) -> PathSlot {
        self.slots.get(id)
    }

    fn slot_mut(&mut self, id: PathId) -> &mut PathSlot {
        self.slots.get_mut(id)
    }

    /// `r̄_i`, the smoothed `r` of the path (`None` before its first data packet).
    pub fn smoothed_r(&self, id: PathId) -> Option<Duration> {
        self.slot(id).r_smoothed
    }

    /// `(complete, E(D_i))` for the path of `view`: `complete` is false when `srtt` or (with
    /// bytes in flight) the rate is unknown, and the unknown terms then count as zero.
    pub fn expected(&self, view: &PathView) -> (bool, f64) {
        let m = drain_time(view);
        let w = m.unwrap_or(Duration::ZERO) + window_wait(view);
        let r = self
            .slot(view.id)
            .r_smoothed
            .or_else(|| r_sample(view, m.unwrap_or(Duration::ZERO)));
        let complete = m.is_some() && view.srtt.is_some();
        (
            complete,
            expected_delay(w, r.unwrap_or(Duration::ZERO), loss_probability(view)),
        )
    }
}

impl Scheduler for Swtc {
    fn select(&mut self, _now: Time, paths: &[PathView], _pkt: &PacketMeta) -> Selection {
        for p in paths {
            let sample = drain_time(p).and_then(|m| r_sample(p, m));
            self.slot_mut(p.id).sample = sample;
        }
        // Complete estimates first, then by E(D); ties: lowest id.
        usable_min_by_key(paths, |p| {
            let (complete, e) = self.expected(p);
            (!complete, e)
        })
        .map_or(Selection::Wait(None), Selection::Send)
    }

    fn on_sent(&mut self, _now: Time, path: PathId, pkt: &PacketMeta) {
        if pkt.control {
            return;
        }
        let slot = self.slot_mut(path);
        if let Some(sample) = slot.sample.take() {
            slot.r_smoothed = Some(slot.r_smoothed.map_or(sample, |r| smooth(r, sample)));
        }
    }
}
