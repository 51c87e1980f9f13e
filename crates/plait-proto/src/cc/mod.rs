//! Per-path congestion control: one [`CongestionController`] per path, chosen by name
//! ([`CongestionKind`]), wrapped in a [`PathCongestion`] that owns what every controller
//! shares (recovery periods, the undo of a spurious cut, pacing).
//!
//! Seed ETOM §IV-B runs an independent TCP-like control per link of its split connection;
//! seed mHIP §IV-B gives each path its own window under a global one. The controllers see
//! only what the path's sender learns from ACKs (docs/protocol.md#ack-frame): bytes newly
//! acknowledged, RTT estimates, congestion events (a loss found by the path's RFC 9002
//! thresholds), persistent congestion (the path went down), and, for the coupled ones, a
//! [`Coupling`] snapshot of every path of the session.
//!
//! Controllers, one file each: [`NewReno`], [`Cubic`] (RFC 9438), the rate-based [`Bbr`]
//! (after BBR v1, Cardwell et al. 2016), and the coupled [`Lia`]
//! (RFC 6356), [`Balia`] (Peng et al. 2016) and [`Mhip`] (seed mHIP §IV-B), and
//! [`Adaptive`] (NewReno under a queue cap, or BBR while the path's own link loses
//! datagrams); `aimd` holds the window bounds and NewReno-style bookkeeping they share.
//! Adding one: a file here, a variant in [`CongestionKind`] (and `ALL`) and in
//! [`AnyController`].
//!
//! Invariants:
//! - a controller's window never drops below [`MIN_WINDOW`] nor exceeds [`MAX_WINDOW`];
//! - at most one congestion event per recovery period: losses of datagrams sent before the
//!   period began do not cut again (RFC 9002 §7.3.2), and ACKs of such datagrams do not
//!   grow the window (they do not reach a controller, unless it measures the delivery rate
//!   from every acknowledged byte: [`CongestionController::acks_in_recovery`]);
//! - controllers read no clock and hold no randomness; same inputs, same windows.

mod ack_hold;
mod adaptive;
mod aimd;
mod balia;
mod bbr;
mod cubic;
mod drain_check;
mod lia;
mod mhip;
mod new_reno;
mod pacer;

use std::fmt::Debug;
use std::time::Duration;

pub use ack_hold::{ACK_SOON_DELAY, ACK_SOON_EVERY, AckHold};
pub use adaptive::Adaptive;
pub use balia::Balia;
pub use bbr::{Bbr, BbrMode};
pub use cubic::Cubic;
pub use drain_check::{DRAIN_CHECK_INTERVAL, DRAIN_WINDOW_GAIN, DrainCheck, ModelView};
pub use lia::Lia;
pub use mhip::Mhip;
pub use new_reno::NewReno;
pub use pacer::Pacer;

use crate::ids::PathId;
use crate::time::Time;

/// Bytes of one full-sized datagram, for window arithmetic (the controllers count bytes,
/// as RFC 9002 does; `max_datagram_size` of the session's config).
pub type DatagramSize = u64;

/// Smallest window, in datagrams (RFC 9002 kMinimumWindow).
pub const MIN_WINDOW_DATAGRAMS: u64 = 2;
/// Initial window, in datagrams (RFC 9002 §7.2: 10 datagrams).
pub const INITIAL_WINDOW_DATAGRAMS: u64 = 10;
/// Smallest window in bytes for a 1400-byte datagram; see [`min_window`].
pub const MIN_WINDOW: u64 = MIN_WINDOW_DATAGRAMS * 1200;
/// Hard upper bound of any path's window: 64 MiB, far above any bandwidth-delay product
/// plait's links have (1 Gbit/s × 500 ms), so a runaway controller stays bounded.
pub const MAX_WINDOW: u64 = 64 << 20;

/// The smallest window for datagrams of `mss` bytes.
pub fn min_window(mss: DatagramSize) -> u64 {
    MIN_WINDOW_DATAGRAMS
        .saturating_mul(mss)
        .clamp(MIN_WINDOW, MAX_WINDOW)
}

/// Which controller runs on every path of a session (config name in parentheses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CongestionKind {
    /// NewReno (`newreno`): RFC 9002 §7 / RFC 6582, ETOM's per-link TCP.
    NewReno,
    /// CUBIC (`cubic`): RFC 9438.
    Cubic,
    /// Linked Increases (`lia`): RFC 6356, coupled over the session's paths.
    Lia,
    /// Balanced Linked Adaptation (`balia`): Peng et al., IEEE/ACM ToN 2016, coupled.
    Balia,
    /// Seed mHIP's two-level control (`mhip`): per-path AIMD under a global TCP window.
    Mhip,
    /// BBR-like (`bbr`): rate-based, after BBR v1 (Cardwell et al. 2016); random loss does
    /// not cut it.
    Bbr,
    /// NewReno under a queue cap, switching a path to BBR while its own link loses
    /// datagrams (`adaptive`, [`Adaptive`]); the default.
    #[default]
    Adaptive,
}

impl CongestionKind {
    /// Every kind, in the order of their names.
    pub const ALL: &'static [CongestionKind] = &[
        CongestionKind::NewReno,
        CongestionKind::Cubic,
        CongestionKind::Lia,
        CongestionKind::Balia,
        CongestionKind::Mhip,
        CongestionKind::Bbr,
        CongestionKind::Adaptive,
    ];

    /// The config name.
    pub const fn name(self) -> &'static str {
        match self {
            CongestionKind::NewReno => "newreno",
            CongestionKind::Cubic => "cubic",
            CongestionKind::Lia => "lia",
            CongestionKind::Balia => "balia",
            CongestionKind::Mhip => "mhip",
            CongestionKind::Bbr => "bbr",
            CongestionKind::Adaptive => "adaptive",
        }
    }

    /// The kind with this config name.
    pub fn from_name(name: &str) -> Option<CongestionKind> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
}

/// What one ACK frame newly acknowledged on a path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Acked {
    /// Bytes of ack-eliciting datagrams newly acknowledged (sent after the recovery
    /// period began, the path filters the others out, unless
    /// [`CongestionController::acks_in_recovery`]).
    pub bytes: u64,
    /// Smoothed RTT after this ACK.
    pub srtt: Duration,
    /// Minimum RTT after this ACK.
    pub min_rtt: Duration,
    /// Bytes in flight on the path after this ACK.
    pub bytes_in_flight: u64,
    /// The sender had less to send than the window allowed when these were sent: the
    /// window was not the limit, so it should not grow (RFC 7661, RFC 9002 §7.8).
    pub app_limited: bool,
    /// When the most recently sent of the datagrams counted in `bytes` was sent (`None`
    /// if none was counted). BBR bounds a delivery-rate sample by the rate these
    /// were sent at, so a burst of late ACKs (a stalled receiver or an aggregating radio
    /// link) does not read as a faster bottleneck (draft-cheng-iccrg-delivery-rate-estimation
    /// §3.3: `max(send_elapsed, ack_elapsed)`).
    pub newest_sent: Option<Time>,
    /// The path's one-way delay shows a standing queue: its smoothed delay is at least
    /// [`SHALLOW_QUEUE`] above its base (`false` before any delay sample). The
    /// [`Adaptive`] controller's queue-cap model ends its Startup on it (BBR sending judges
    /// by `queue_delay_seen` instead, `bbr.rs`).
    pub standing_queue: bool,
    /// The shortest queueing delay (one-way delay over the path's base) that a datagram
    /// this ACK acknowledges met; `None` when the ACK carries no delay sample (or the path
    /// has no base yet). Unlike `standing_queue` it is not smoothed, so it shows a queue
    /// that just emptied at once, and as the shortest of the ACK's samples it passes over
    /// jitter. [`Adaptive`]'s drain check judges by it, and BBR's Startup ends on it.
    pub queue_delay_seen: Option<Duration>,
}

/// A rate (bytes per second) that can be divided by: finite and positive. Rates come from
/// peer-driven measurements, so zero, NaN and infinity are filtered out wherever one is
/// used (here, in the paths' views and in the schedulers, which sit above this module).
pub(crate) fn is_rate(r: &f64) -> bool {
    r.is_finite() && *r > 0.0
}

/// A queueing delay under this is no standing queue. A loss found while the path's
/// measured queueing delay (smoothed one-way delay over the 5 min base) is below it counts
/// towards the shallow-queue loss rate (`path`): a drop-tail queue does not drop packets
/// that find it this short, so such a loss is the link's (radio, bad spell), not the
/// sender's overrun. The receiver's loss repair uses the same threshold
/// (docs/protocol.md#repair), on its own measure: the latest one-way delay over a 10 s
/// windowed minimum. [`Adaptive`]'s drain check adds a datagram's time at the path's
/// rate to it (`drain_check.rs`).
pub const SHALLOW_QUEUE: Duration = Duration::from_millis(10);

/// One path's figures as the coupled controllers see them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoupledPath {
    /// Which path.
    pub id: PathId,
    /// Its window, bytes.
    pub window: u64,
    /// Its smoothed RTT (`None` before any sample: such a path is left out of sums).
    pub srtt: Option<Duration>,
    /// Whether data may be scheduled on it.
    pub usable: bool,
    /// Its controller has a reason to check whether its standing queue is its own and had
    /// an ACK in this drain-check interval or the last
    /// ([`CongestionController::wants_drain_check`]): the session's other paths check with
    /// it at the next boundary, so that paths which share a bottleneck drain together.
    pub wants_drain_check: bool,
}

/// Every path of the session, for controllers whose windows are coupled (LIA, BALIA, the
/// seed mHIP two-level control); uncoupled controllers ignore it.
#[derive(Clone, Copy, Debug)]
pub struct Coupling<'a> {
    /// The path whose controller is called.
    pub this: PathId,
    /// All paths of the session (including `this`).
    pub paths: &'a [CoupledPath],
}

/// A congestion controller for one path (see the module docs). Windows count bytes of
/// whole datagrams (header and frames), as `Path::bytes_in_flight` does.
pub trait CongestionController: Debug {
    /// Bytes were newly acknowledged (once per ACK frame that acknowledged any).
    fn on_ack(&mut self, now: Time, acked: &Acked, coupling: &Coupling<'_>);
    /// Bytes that were in flight when the losses of a congestion event were found (lost
    /// ones included), called just before [`CongestionController::on_congestion_event`]:
    /// a controller that cuts from the flight size (RFC 5681 eq. 4) rather than from a
    /// window it was not using takes it here. Ignored by default.
    fn on_flight_at_loss(&mut self, _flight: u64) {}
    /// A congestion event: datagrams sent after the current recovery period began were
    /// declared lost. Called at most once per recovery period.
    fn on_congestion_event(&mut self, now: Time, coupling: &Coupling<'_>);
    /// The datagrams whose loss caused the last congestion event were acknowledged after
    /// all: the cut was spurious (seed mHIP's ADDR; Linux's undo). Restore the window as it
    /// was before that cut, if the controller keeps it.
    fn on_spurious_congestion(&mut self, now: Time);
    /// Persistent congestion (the path went down): collapse to the minimum window.
    fn on_persistent_congestion(&mut self, now: Time);
    /// Datagrams of the path were resolved: `resolved` acknowledged or declared lost (probes
    /// left out), `link_lost` of them lost while the path's queue was short (the link's own
    /// losses, `cc::SHALLOW_QUEUE`). Only [`Adaptive`] reads it; ignored by default.
    fn on_link_sample(&mut self, _now: Time, _resolved: u32, _link_lost: u32) {}
    /// The congestion window, bytes, within [`MIN_WINDOW`]..=[`MAX_WINDOW`].
    fn window(&self) -> u64;
    /// The sending rate in bytes per second, if the controller sets one (delay-based
    /// controllers); `None`: pace at 1.25 × window / SRTT.
    fn pacing_rate(&self) -> Option<f64> {
        None
    }
    /// Short name for logs and status output: the config name, followed by the controller
    /// it runs for one that runs another (`adaptive (bbr)`).
    fn name(&self) -> &'static str;
    /// Whether ACKs of datagrams sent before the current recovery period began still reach
    /// [`CongestionController::on_ack`]. `false` (the default) for the window-growing
    /// controllers, which must not grow on them (RFC 9002 §7.3.2); `true` for one that
    /// measures the delivery rate from every acknowledged byte ([`Bbr`]): withholding them
    /// would hide about a round of deliveries after every loss.
    fn acks_in_recovery(&self) -> bool {
        false
    }
    /// Whether the controller has a reason to check whether the path's standing queue is
    /// its own ([`Adaptive`]'s drain check: its model's rate fell, or its cap is lifted)
    /// and, as of `now`, had an ACK in this drain-check interval or the last (a path gone
    /// quiet stops asking). Read by the session's other paths at their first ACK after a
    /// boundary. `false` by default.
    fn wants_drain_check(&self, _now: Time) -> bool {
        false
    }
    /// Whether the controller holds the path's queue short, so the peer's ACK delay is
    /// queue it must allow for: the session then marks the stream datagrams it sends on the
    /// path ACK_SOON (docs/protocol.md#ack-soon). `false` by default.
    fn wants_prompt_acks(&self) -> bool {
        false
    }
    /// Whether the datagrams the session now sends on the path ask for prompt ACKs, so a
    /// model of the peer's ACK hold ([`AckHold`]) follows what the peer does. Nothing by
    /// default.
    fn set_prompt_acks(&mut self, _prompt: bool) {}
    /// Whether the controller's model counts the prompt hold now (the last
    /// [`CongestionController::set_prompt_acks`]); `false` for one without such a model.
    fn prompt_acks(&self) -> bool {
        false
    }
}

/// Any of the controllers, chosen by [`CongestionKind`] (a closed set: static dispatch and
/// `Clone`, as [`crate::sched::AnyScheduler`] does for schedulers).
#[derive(Clone, Debug)]
pub enum AnyController {
    /// NewReno.
    NewReno(NewReno),
    /// CUBIC.
    Cubic(Cubic),
    /// LIA.
    Lia(Lia),
    /// BALIA.
    Balia(Balia),
    /// mHIP two-level.
    Mhip(Mhip),
    /// BBR-like.
    Bbr(Bbr),
    /// NewReno or BBR by the path's link loss.
    Adaptive(Adaptive),
}

impl AnyController {
    /// A fresh controller of `kind` for datagrams of `mss` bytes.
    pub fn new(kind: CongestionKind, mss: DatagramSize) -> AnyController {
        match kind {
            CongestionKind::NewReno => AnyController::NewReno(NewReno::new(mss)),
            CongestionKind::Cubic => AnyController::Cubic(Cubic::new(mss)),
            CongestionKind::Lia => AnyController::Lia(Lia::new(mss)),
            CongestionKind::Balia => AnyController::Balia(Balia::new(mss)),
            CongestionKind::Mhip => AnyController::Mhip(Mhip::new(mss)),
            CongestionKind::Bbr => AnyController::Bbr(Bbr::new(mss)),
            CongestionKind::Adaptive => AnyController::Adaptive(Adaptive::new(mss)),
        }
    }

    fn inner(&self) -> &dyn CongestionController {
        match self {
            AnyController::NewReno(c) => c,
            AnyController::Cubic(c) => c,
            AnyController::Lia(c) => c,
            AnyController::Balia(c) => c,
            AnyController::Mhip(c) => c,
            AnyController::Bbr(c) => c,
            AnyController::Adaptive(c) => c,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn CongestionController {
        match self {
            AnyController::NewReno(c) => c,
            AnyController::Cubic(c) => c,
            AnyController::Lia(c) => c,
            AnyController::Balia(c) => c,
            AnyController::Mhip(c) => c,
            AnyController::Bbr(c) => c,
            AnyController::Adaptive(c) => c,
        }
    }
}

impl CongestionController for AnyController {
    fn on_ack(&mut self, now: Time, acked: &Acked, coupling: &Coupling<'_>) {
        self.inner_mut().on_ack(now, acked, coupling);
    }
    fn on_flight_at_loss(&mut self, flight: u64) {
        self.inner_mut().on_flight_at_loss(flight);
    }
    fn on_congestion_event(&mut self, now: Time, coupling: &Coupling<'_>) {
        self.inner_mut().on_congestion_event(now, coupling);
    }
    fn on_spurious_congestion(&mut self, now: Time) {
        self.inner_mut().on_spurious_congestion(now);
    }
    fn on_persistent_congestion(&mut self, now: Time) {
        self.inner_mut().on_persistent_congestion(now);
    }
    fn on_link_sample(&mut self, now: Time, resolved: u32, link_lost: u32) {
        self.inner_mut().on_link_sample(now, resolved, link_lost);
    }
    fn window(&self) -> u64 {
        self.inner().window().clamp(MIN_WINDOW, MAX_WINDOW)
    }
    fn pacing_rate(&self) -> Option<f64> {
        self.inner().pacing_rate()
    }
    fn name(&self) -> &'static str {
        self.inner().name()
    }
    fn acks_in_recovery(&self) -> bool {
        self.inner().acks_in_recovery()
    }
    fn wants_drain_check(&self, now: Time) -> bool {
        self.inner().wants_drain_check(now)
    }
    fn wants_prompt_acks(&self) -> bool {
        self.inner().wants_prompt_acks()
    }
    fn set_prompt_acks(&mut self, prompt: bool) {
        self.inner_mut().set_prompt_acks(prompt);
    }
    fn prompt_acks(&self) -> bool {
        self.inner().prompt_acks()
    }
}

/// One path's congestion state as a driver shows it (status, metrics).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CongestionView {
    /// The controller's name.
    pub controller: &'static str,
    /// Its window, bytes.
    pub window: u64,
    /// Bytes in flight on the path.
    pub bytes_in_flight: u64,
    /// The pacing rate, bytes per second (`None` before an RTT sample).
    pub pacing_rate: Option<f64>,
    /// Window cuts so far.
    pub congestion_events: u64,
    /// Cuts undone as spurious.
    pub undone: u64,
}

/// A path's congestion state: its controller, the recovery period, the undo record and
/// the pacer (see the module docs).
#[derive(Clone, Debug)]
pub struct PathCongestion {
    controller: AnyController,
    /// Datagrams sent before this time belong to the current (or a past) recovery period.
    recovery_start: Option<Time>,
    /// Send time of the youngest datagram whose loss caused the last cut, while that cut
    /// may still be undone: if every datagram lost in that event is acknowledged later, the
    /// cut was spurious.
    undoable: Option<UndoRecord>,
    pacer: Pacer,
    congestion_events: u64,
    undone: u64,
}

#[derive(Clone, Copy, Debug)]
struct UndoRecord {
    /// Datagrams declared lost in the event and not yet acknowledged.
    outstanding: u32,
}

impl PathCongestion {
    /// A path's congestion state with a fresh controller of `kind`.
    pub fn new(kind: CongestionKind, mss: DatagramSize) -> PathCongestion {
        PathCongestion {
            controller: AnyController::new(kind, mss),
            recovery_start: None,
            undoable: None,
            pacer: Pacer::new(mss),
            congestion_events: 0,
            undone: 0,
        }
    }

    /// The controller's window, bytes.
    pub fn window(&self) -> u64 {
        self.controller.window()
    }

    /// The controller's name.
    pub fn name(&self) -> &'static str {
        self.controller.name()
    }

    /// Whether the controller wants a drain check, as of `now`
    /// ([`CongestionController::wants_drain_check`]).
    pub fn wants_drain_check(&self, now: Time) -> bool {
        self.controller.wants_drain_check(now)
    }

    /// Whether the controller wants prompt ACKs
    /// ([`CongestionController::wants_prompt_acks`]).
    pub fn wants_prompt_acks(&self) -> bool {
        self.controller.wants_prompt_acks()
    }

    /// Whether the datagrams now sent ask for prompt ACKs
    /// ([`CongestionController::set_prompt_acks`]).
    pub fn set_prompt_acks(&mut self, prompt: bool) {
        self.controller.set_prompt_acks(prompt);
    }

    /// Whether the controller's model counts the prompt hold now
    /// ([`CongestionController::prompt_acks`]).
    pub fn prompt_acks(&self) -> bool {
        self.controller.prompt_acks()
    }

    /// Congestion events (window cuts) so far, and how many of them were undone.
    pub fn counters(&self) -> (u64, u64) {
        (self.congestion_events, self.undone)
    }

    /// Whether the ACK of a datagram sent at `sent` is withheld from the controller: the
    /// datagram belongs to a recovery period already reacted to, and the controller does
    /// not take such ACKs ([`CongestionController::acks_in_recovery`]).
    pub fn in_recovery(&self, sent: Time) -> bool {
        !self.controller.acks_in_recovery() && self.in_recovery_period(sent)
    }

    /// Whether a datagram sent at `sent` belongs to a recovery period already reacted to.
    fn in_recovery_period(&self, sent: Time) -> bool {
        self.recovery_start.is_some_and(|start| sent <= start)
    }

    /// Newly acknowledged datagrams: `acked.bytes` counts only those sent after the
    /// recovery period began (the caller uses [`PathCongestion::in_recovery`]).
    /// `spurious` is how many of the acknowledged datagrams had been declared lost.
    pub fn on_ack(&mut self, now: Time, acked: &Acked, spurious: u32, coupling: &Coupling<'_>) {
        if spurious > 0
            && let Some(undo) = &mut self.undoable
        {
            undo.outstanding = undo.outstanding.saturating_sub(spurious);
            if undo.outstanding == 0 {
                self.undoable = None;
                self.controller.on_spurious_congestion(now);
                self.undone += 1;
            }
        }
        if acked.bytes > 0 {
            self.controller.on_ack(now, acked, coupling);
        }
    }

    /// Datagrams were declared lost: `lost` of them, the youngest sent at `largest_sent`,
    /// with `flight` bytes in flight when they were found (theirs included). Cuts the
    /// window once per recovery period.
    pub fn on_lost(
        &mut self,
        now: Time,
        lost: u32,
        largest_sent: Time,
        flight: u64,
        coupling: &Coupling<'_>,
    ) {
        if lost == 0 {
            return;
        }
        if self.in_recovery_period(largest_sent) {
            if let Some(undo) = &mut self.undoable {
                undo.outstanding += lost;
            }
            return;
        }
        self.recovery_start = Some(now);
        self.undoable = Some(UndoRecord { outstanding: lost });
        self.congestion_events += 1;
        self.controller.on_flight_at_loss(flight);
        self.controller.on_congestion_event(now, coupling);
    }

    /// The path went down: persistent congestion (RFC 9002 §7.6), nothing to undo.
    pub fn on_path_down(&mut self, now: Time) {
        self.recovery_start = Some(now);
        self.undoable = None;
        self.controller.on_persistent_congestion(now);
        self.pacer.reset();
    }

    /// Datagrams resolved on the path (see [`CongestionController::on_link_sample`]).
    pub fn on_link_sample(&mut self, now: Time, resolved: u32, link_lost: u32) {
        if resolved > 0 {
            self.controller.on_link_sample(now, resolved, link_lost);
        }
    }

    /// When the pacer next lets a datagram of `bytes` go (`now` or later), given the path's
    /// smoothed RTT (`None`: not paced yet).
    pub fn pacing_release(&self, now: Time, srtt: Option<Duration>, bytes: u64) -> Time {
        let rate = self.pacing_rate(srtt);
        self.pacer.release_time(now, rate, self.window(), bytes)
    }

    /// Records a datagram of `bytes` sent at `now`, for the pacer.
    pub fn on_sent(&mut self, now: Time, srtt: Option<Duration>, bytes: u64) {
        let rate = self.pacing_rate(srtt);
        self.pacer.on_sent(now, rate, self.window(), bytes);
    }

    /// Bytes per second the pacer allows: the controller's own rate, else
    /// 1.25 × window / SRTT (RFC 9002 §7.7's N = 1.25); `None` before an RTT sample.
    pub fn pacing_rate(&self, srtt: Option<Duration>) -> Option<f64> {
        if let Some(rate) = self.controller.pacing_rate() {
            return Some(rate);
        }
        let srtt = srtt?.as_secs_f64().max(1e-4);
        Some(1.25 * self.window() as f64 / srtt)
    }
}

#[cfg(test)]
mod adaptive_tests;
#[cfg(test)]
mod bbr_tests;
#[cfg(test)]
mod controllers_proptest;
#[cfg(test)]
mod coupled_tests;
#[cfg(test)]
mod cubic_tests;
#[cfg(test)]
mod drain_check_tests;
#[cfg(test)]
mod tests;
