//! The drain check of `adaptive`'s queue cap: is a path's standing queue its own?
//!
//! The cap (`adaptive.rs`) holds NewReno's window near 1.5 of the path model's
//! bandwidth-delay products, the BDP being the best delivery rate of ten rounds times the
//! path's minimum RTT. Alone on its bottleneck that leaves a standing queue of about half a
//! BDP, and the round trip is what the path's own window explains. A loss-based flow that
//! shares the bottleneck keeps its own queue there, so the round trip is longer than the
//! cap allows for: the window the cap leaves delivers less than the model's rate, the next
//! ten rounds' best rate is that lower one, and the cap falls again, round after round,
//! to its floor (`scenarios/shared-bottleneck-one-path.toml`: a friendliness factor of
//! 0.30 where one TCP flow in the same place gets 0.78). Delivery rate, round trip and
//! window cannot tell the two apart (Little's law holds in both), but draining can: with a
//! window just under what fills its pipe the path's own queue empties within a round,
//! while another flow's does not.
//!
//! So at the first ACK within [`DRAIN_CHECK_SLACK`] after each multiple of
//! [`DRAIN_CHECK_INTERVAL`] of the session's clock (none in the first interval a path
//! sees), a path whose model has found the rate checks if it has a reason to (it "wants" a
//! check: the model's best rate of ten rounds has fallen under [`RATE_FALL`] of the
//! highest it had since the queue was last found the path's own, as a competitor takes
//! rate from the path and the cap's spiral more; or its cap is lifted) or if another path
//! of the session wants one (`CoupledPath::wants_drain_check`: a usable path that had an
//! ACK in this interval or the last). The instants are the same for all of a session's
//! paths, so paths that share a bottleneck drain together and do not read each other's
//! queue as a stranger's. A check holds the window the caller gives when it begins
//! ([`ModelView::drain_window`]: [`DRAIN_WINDOW_GAIN`] of the model's BDP at its rate now,
//! plus half its ACK allowance, as the peer holds up to the allowance, half on average,
//! for its next ACK, and those bytes are not in the queue) for two smoothed round trips
//! and one ACK delay, at most [`DRAIN_CHECK_MAX`]; held fixed, as the model's rates move
//! during the check and a window that rose with them would refill the queue being
//! watched. It judges by the ACKs' delay samples (`Acked::queue_delay_seen`: the shortest
//! queueing delay a datagram an ACK acknowledges met; the raw samples, as the smoothed
//! delay lags a queue that just emptied by 16 datagrams, 90 ms at 2 Mbit/s; an ACK
//! without one is no evidence either way), a delay under [`SHALLOW_QUEUE`] plus one
//! datagram's time at the model's rate now being a short queue (the datagram in service
//! when one arrives: at 1 Mbit/s it takes 11 ms, and checks judged by 10 ms alone read a
//! lone 1 Mbit/s path's own drained queue as another flow's; under a competitor the rate
//! is the path's share, not the link's, so the bound is looser than the datagram in
//! service needs: 15 ms at a 2.2 Mbit/s share of 10 Mbit/s, where a competitor's queue
//! shorter than that reads as the path's own), at the first ACK with a sample at or after
//! the deadline:
//! - every sample of the last half round trip (the settle time, at most a quarter of
//!   [`DRAIN_CHECK_MAX`]) showed a short queue: the queue was the path's own;
//! - every sample of the last half round trip showed a longer queue: the queue belongs to
//!   flows the path does not control; the cap cannot shorten it and only starves the path,
//!   so NewReno runs without it;
//! - neither (the queue had only just emptied or just built up, the samples stopped for
//!   longer than the settle time and one ACK delay, or none came until that long after
//!   the deadline): no verdict.
//!
//! One check that finds a stranger's queue lifts the cap; it comes back after
//! [`DRAINED_CHECKS_TO_CAP`] checks in a row find the queue the path's own (a competitor's
//! queue can empty for a moment after its own cut, and a cap brought back by that moment
//! would starve the path for a whole interval). An outage or a change of controller forgets
//! the verdicts.
//!
//! Cost: for about two round trips an interval, the window is lowered to a level that
//! still nearly fills the pipe if the model's rate and minimum RTT are right: after a fall
//! of the path's rate (a link that slows) until a check finds the queue its own, and on
//! every path of the session while one of them wants a check, however steady its own rate
//! (a path sharing its bottleneck with a TCP flow keeps its siblings checking as long as
//! the flow lasts). On the test bed's T1 and T4, a check every interval on every path cost
//! stream mode 0.4-0.8 % of its goodput. The sync is best-effort: a path that wants a
//! check but has no ACK within the slack leaves its siblings to check without it.
//!
//! Limit: a check sees its own effect from about a round trip after it begins, and a
//! verdict needs the settle time after that, within the check's length; on a path whose
//! SRTT is so long that this does not fit (over 937.5 ms, where the length is capped at
//! [`DRAIN_CHECK_MAX`] and the settle time at a quarter of it) no check runs and the path
//! wants none: its cap stays as the last verdict left it, lifted or not (lifted, the path
//! runs as plain NewReno; in place, it may spiral against a competitor).
//!
//! Invariants: no clock or randomness (`now` comes from the caller); a check starts only
//! when the caller gives the model's view, the model's best rate has fallen, the cap is
//! lifted or a sibling path wants a check, the SRTT leaves room for a verdict, at an ACK
//! within the slack after a boundary,
//! in an interval other than the last ACK's (once an interval while the clock runs
//! forward); its deadline is at most [`DRAIN_CHECK_MAX`] after its start, and it ends at
//! the first ACK with a delay sample at or after the deadline, or at the first ACK more
//! than a settle time and an ACK delay after it, or at an ACK stamped before its start (a
//! clock gone back), those last two with no verdict; a verdict needs samples that agree
//! for a settle time, with no gap longer than a settle time and an ACK delay between them.

use std::time::Duration;

use super::SHALLOW_QUEUE;
use crate::time::Time;

/// How often a path checks whether its standing queue is its own (module docs).
pub const DRAIN_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// The window during a check, in the model's BDPs (plus half its ACK allowance): under
/// one, so the path's own queue empties, and close to one, so the link stays nearly busy.
pub const DRAIN_WINDOW_GAIN: f64 = 0.95;

/// Checks in a row that must find the queue the path's own before the cap comes back.
pub const DRAINED_CHECKS_TO_CAP: u8 = 2;

/// Added to a check's two round trips: the peer may hold an ACK this long
/// (`ack_delay`, 25 ms by default; prompt ACKs, docs/protocol.md#ack-soon, come sooner, and
/// the longer allowance only lengthens a check).
const ACK_DELAY_ALLOWANCE: Duration = Duration::from_millis(25);

/// A check starts only at the first ACK this soon after an interval begins, so a
/// session's paths check together (a path that had no ACK then waits for the next one).
pub const DRAIN_CHECK_SLACK: Duration = Duration::from_millis(100);

/// A check runs only once the model's rate has fallen under this fraction of the highest
/// it had since the queue was last found the path's own (or while the cap is lifted): a
/// competitor's arrival takes rate from the path and the cap's spiral takes more, while a
/// path alone at a steady rate has nothing to check.
pub const RATE_FALL: f64 = 0.9;

/// The longest a check lasts, whatever the round trip (a competitor's queue of seconds
/// would otherwise hold the window low for most of every interval).
pub const DRAIN_CHECK_MAX: Duration = Duration::from_millis(1_250);

/// What a check needs of the queue-cap model, once it has found the path's rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelView {
    /// The best rate of ten rounds, bytes/s (`Bbr::bandwidth`, the cap's): its fall under
    /// `RATE_FALL` of its highest is a reason to check.
    pub best_rate: f64,
    /// The rate now, bytes/s (`Bbr::drain_rate`): a datagram's time at it is part of the
    /// short-queue bound.
    pub rate_now: f64,
    /// The window a check holds if one begins at this ACK, bytes (`Bbr::drained_window`).
    pub drain_window: u64,
}

/// A drain check under way.
#[derive(Clone, Copy, Debug)]
struct Probe {
    /// The ACK that started it: an earlier one (a clock gone back) ends it with no verdict.
    started: Time,
    /// The window held while it runs, bytes.
    window: u64,
    /// The first ACK with a delay sample at or after this ends the check.
    deadline: Time,
    /// How long the last samples must all have agreed when the check ends (half a round
    /// trip, at most a quarter of [`DRAIN_CHECK_MAX`]).
    settle: Duration,
    /// A queueing delay under this is a short queue: [`SHALLOW_QUEUE`] and one datagram's
    /// time at the model's rate now when the check began.
    short_below: Duration,
    /// The longest gap between two samples of one run, and the latest after the deadline
    /// a sample may still judge: the settle time plus the peer's ACK delay (an ACK every
    /// 16 datagrams or 25 ms at the latest: a gap of up to that is the ACK cadence, not an
    /// unseen queue).
    max_gap: Duration,
    /// The current run of samples that agree: whether they showed a short queue, since
    /// when, and the latest of them.
    run: Option<Run>,
}

/// Delay samples in a row that all showed a short queue, or all a standing one.
#[derive(Clone, Copy, Debug)]
struct Run {
    short: bool,
    since: Time,
    latest: Time,
}

impl Probe {
    /// Adds one ACK's sample (`None`: the ACK carried none). A gap of more than `max_gap`
    /// since the last sample starts a new run: the queue was not watched in between.
    fn add(&mut self, now: Time, queue_delay: Option<Duration>) {
        let Some(delay) = queue_delay else { return };
        let short = delay < self.short_below;
        self.run = Some(match self.run {
            Some(run) if run.short == short && now.saturating_since(run.latest) <= self.max_gap => {
                Run { latest: now, ..run }
            }
            _ => Run {
                short,
                since: now,
                latest: now,
            },
        });
    }

    /// What an ACK at `now` (`sampled`: it carried a delay sample) makes of the check.
    fn outcome(&self, now: Time, sampled: bool) -> Outcome {
        if now < self.deadline {
            return Outcome::Wait;
        }
        if now.saturating_since(self.deadline) > self.max_gap {
            // Too late: whatever the queue did since the last sample went unseen.
            return Outcome::Inconclusive;
        }
        match self.run {
            _ if !sampled => Outcome::Wait,
            Some(run) if now.saturating_since(run.since) >= self.settle => {
                Outcome::Found(if run.short {
                    Verdict::Own
                } else {
                    Verdict::Shared
                })
            }
            _ => Outcome::Inconclusive,
        }
    }
}

/// Where a check stands after an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// It goes on (before its deadline, or at an ACK without a sample after it).
    Wait,
    /// It ends with no verdict.
    Inconclusive,
    /// It ends with this verdict.
    Found(Verdict),
}

/// What a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// The queue drained: the path's own.
    Own,
    /// The queue stood through the check's last half round trip: other flows'.
    Shared,
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct DrainCheck {
    /// The path's datagram size, bytes (for the short-queue bound).
    mss: u64,
    /// The last interval (`now / DRAIN_CHECK_INTERVAL`) an ACK was seen in, if any.
    interval: Option<u64>,
    /// The check under way.
    probe: Option<Probe>,
    /// The standing queue is taken as not the path's own.
    shared: bool,
    /// Checks in a row, up to the last conclusive one, that found the queue the path's own.
    drained_in_a_row: u8,
    /// The highest model rate (bytes/s) since the queue was last found the path's own.
    reference_rate: f64,
    /// At the last ACK outside a check the path had a reason to check: its model's rate
    /// had fallen, or its cap was lifted (cleared by a verdict of "own" that leaves the
    /// cap in place).
    wants: bool,
}

impl DrainCheck {
    /// No check yet, for a path of datagrams of `mss` bytes: the queue is taken as the
    /// path's own.
    pub fn new(mss: u64) -> DrainCheck {
        DrainCheck {
            mss,
            interval: None,
            probe: None,
            shared: false,
            drained_in_a_row: 0,
            reference_rate: 0.0,
            wants: false,
        }
    }

    /// Forgets the verdicts and any check under way (an outage, a change of controller:
    /// the path and its model are not the ones that were judged), but not the interval,
    /// so the next check still starts on the session's grid.
    pub fn reset(&mut self) {
        *self = DrainCheck {
            interval: self.interval,
            ..DrainCheck::new(self.mss)
        };
    }

    /// One ACK while NewReno runs. `model`: the queue-cap model's view, if it has found the
    /// rate (left Startup). `queue_delay`
    /// is the ACK's [`super::Acked::queue_delay_seen`] (`None`: no delay sample).
    /// `sibling_wants`: another path of the session wants a check
    /// ([`DrainCheck::wants_check`]), so this one checks with it.
    pub fn on_ack(
        &mut self,
        now: Time,
        srtt: Duration,
        queue_delay: Option<Duration>,
        model: Option<ModelView>,
        sibling_wants: bool,
    ) {
        if let Some(probe) = &mut self.probe {
            if now < probe.started {
                // A clock gone back: the check's deadline means nothing now.
                self.probe = None;
                return;
            }
            probe.add(now, queue_delay);
            match probe.outcome(now, queue_delay.is_some()) {
                Outcome::Wait => {}
                Outcome::Inconclusive => self.probe = None,
                Outcome::Found(verdict) => {
                    self.probe = None;
                    self.conclude(verdict, model);
                }
            }
            return;
        }
        let interval = interval_of(now);
        let first_in_interval = self.interval.is_some_and(|last| last != interval);
        self.interval = Some(interval);
        // A model without a rate has no drain window to hold: no check.
        let Some(model) = model.filter(|m| m.best_rate > 0.0) else {
            self.wants = false;
            return;
        };
        let fallen = model.best_rate < RATE_FALL * self.reference_rate;
        self.reference_rate = self.reference_rate.max(model.best_rate);
        let length = srtt
            .saturating_mul(2)
            .saturating_add(ACK_DELAY_ALLOWANCE)
            .min(DRAIN_CHECK_MAX);
        let settle = (srtt / 2).min(DRAIN_CHECK_MAX / 4);
        // The check sees its own effect from about a round trip in (module docs).
        let room_for_a_verdict = srtt.saturating_add(settle) <= length;
        self.wants = room_for_a_verdict && (fallen || self.shared);
        let since_boundary =
            Duration::from_nanos(now.as_nanos() % DRAIN_CHECK_INTERVAL.as_nanos() as u64);
        if (self.wants || (sibling_wants && room_for_a_verdict))
            && first_in_interval
            && since_boundary <= DRAIN_CHECK_SLACK
        {
            let mut probe = Probe {
                started: now,
                window: model.drain_window,
                deadline: now.saturating_add(length),
                settle,
                // (A rate so low that a datagram's time overflows: any queue is short.)
                short_below: SHALLOW_QUEUE.saturating_add(
                    Duration::try_from_secs_f64(self.mss as f64 / model.rate_now)
                        .unwrap_or(Duration::MAX),
                ),
                max_gap: settle.saturating_add(ACK_DELAY_ALLOWANCE),
                run: None,
            };
            probe.add(now, queue_delay);
            self.probe = Some(probe);
        }
    }

    /// Counts a check's verdict: one that finds other flows' queue lifts the cap, two in a
    /// row that find the path's own bring it back (module docs). "Own" also takes the
    /// model's best rate now as the reference for the next fall, which leaves no reason
    /// to check but a lifted cap.
    fn conclude(&mut self, verdict: Verdict, model: Option<ModelView>) {
        match verdict {
            Verdict::Own => {
                self.drained_in_a_row = self.drained_in_a_row.saturating_add(1);
                if self.drained_in_a_row >= DRAINED_CHECKS_TO_CAP {
                    self.shared = false;
                }
                if let Some(model) = model {
                    self.reference_rate = model.best_rate;
                }
                self.wants = self.shared;
            }
            Verdict::Shared => {
                self.drained_in_a_row = 0;
                self.shared = true;
            }
        }
    }

    /// Whether the path had a reason to check at its last ACK outside a check (its model's
    /// rate had fallen, or its cap was lifted), if that ACK came in the interval of `now`
    /// or the one before (a path gone quiet, idle or kept as a backup, does not keep the
    /// session's other paths checking): they check with it.
    pub fn wants_check(&self, now: Time) -> bool {
        self.wants
            && self
                .interval
                .is_some_and(|last| last.saturating_add(1) >= interval_of(now))
    }

    /// The window a check under way holds, bytes (`None`: no check runs).
    pub fn window(&self) -> Option<u64> {
        self.probe.map(|p| p.window)
    }

    /// Whether a check is under way (the window is held at the drain window).
    pub fn draining(&self) -> bool {
        self.probe.is_some()
    }

    /// Whether the standing queue is taken as other flows'.
    pub fn shared(&self) -> bool {
        self.shared
    }
}

/// The drain-check interval `now` falls in.
fn interval_of(now: Time) -> u64 {
    now.as_nanos() / DRAIN_CHECK_INTERVAL.as_nanos() as u64
}
