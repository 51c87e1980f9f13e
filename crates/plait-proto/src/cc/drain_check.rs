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
//! [`DRAIN_CHECK_INTERVAL`] of the session's clock (the same instants for every path of a
//! session, so paths that share a bottleneck and check in the same interval drain
//! together and do not read each other's queue as a stranger's; but each path decides by
//! its own rate whether to check, so one that checks alone can; none in the first
//! interval a path sees) a path whose model has
//! found the rate, if that rate has fallen under [`RATE_FALL`] of the highest it had since
//! its queue was last found its own (a competitor takes rate from the path, and the
//! cap's spiral more) or while its cap is lifted, holds its window at
//! [`DRAIN_WINDOW_GAIN`] of the model's BDP plus half
//! the model's ACK allowance (the peer holds up to the allowance, half on average, for its
//! next ACK, and those bytes are not in the queue) for two smoothed round trips and one ACK
//! delay, at most [`DRAIN_CHECK_MAX`]. At the first ACK after that it judges:
//! - every ACK of the last half round trip has shown a short queue
//!   (`Acked::short_queue_seen`: a datagram it acknowledges met a one-way delay under
//!   `path::SHALLOW_QUEUE` over the base; the raw samples, as the smoothed delay lags a
//!   queue that just emptied by 16 datagrams, 90 ms at 2 Mbit/s): the queue was the path's
//!   own;
//! - this ACK's datagrams all met a longer queue: the queue belongs to flows the path does not control; the cap
//!   cannot shorten it and only starves the path, so NewReno runs without it;
//! - neither (the ACKs stopped for a while, or the queue was only just short): no verdict.
//!
//! One check that finds a stranger's queue lifts the cap; it comes back after
//! [`DRAINED_CHECKS_TO_CAP`] checks in a row find the queue the path's own (a competitor's
//! queue can empty for a moment after its own cut, and a cap brought back by that moment
//! would starve the path for a whole interval). An outage or a change of controller forgets
//! the verdicts.
//!
//! Cost, alone: none at a steady rate; after a fall of the rate (a link that slows), for
//! about two round trips an interval until a check finds the queue its own, the window
//! is lowered to a level that still nearly fills the pipe if the model's rate and minimum
//! RTT are right (on the test bed's T1 and T4, with a check every interval whatever the
//! rate, stream mode lost 0.4-0.8 % of its goodput).
//!
//! Invariants: no clock or randomness (`now` comes from the caller); a check starts only
//! when the caller gives the model's rate, that rate has fallen or the cap is lifted, at
//! an ACK within the slack after a boundary,
//! in an interval other than the last ACK's (once an interval while the clock runs
//! forward); its deadline is at most [`DRAIN_CHECK_MAX`] after its start and it ends at
//! the first ACK at or after that deadline (however late); ACKs stamped before its start
//! are ignored.

use std::time::Duration;

use crate::time::Time;

/// How often a path checks whether its standing queue is its own (module docs).
pub const DRAIN_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// The window during a check, in the model's BDPs (plus half its ACK allowance): under
/// one, so the path's own queue empties, and close to one, so the link stays nearly busy.
pub const DRAIN_WINDOW_GAIN: f64 = 0.95;

/// Checks in a row that must find the queue the path's own before the cap comes back.
pub const DRAINED_CHECKS_TO_CAP: u8 = 2;

/// Added to a check's two round trips: the peer may hold an ACK this long
/// (`ack_delay`, 25 ms by default).
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

/// A drain check under way.
#[derive(Clone, Copy, Debug)]
struct Probe {
    /// The ACK that started it: earlier ones (a clock gone back) are ignored.
    started: Time,
    /// The first ACK at or after this ends the check.
    deadline: Time,
    /// How long the queue must have stayed short when the check ends (half a round trip).
    settle: Duration,
    /// Since when every ACK has shown a short queue (`None`: the last one showed a
    /// standing queue).
    short_since: Option<Time>,
}

/// See the module docs.
#[derive(Clone, Debug, Default)]
pub struct DrainCheck {
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
}

impl DrainCheck {
    /// No check yet: the queue is taken as the path's own.
    pub fn new() -> DrainCheck {
        DrainCheck::default()
    }

    /// Forgets the verdicts and any check under way (an outage, a change of controller:
    /// the path and its model are not the ones that were judged), but not the interval,
    /// so the next check still starts on the session's grid.
    pub fn reset(&mut self) {
        *self = DrainCheck {
            interval: self.interval,
            ..DrainCheck::default()
        };
    }

    /// One ACK while NewReno runs. `rate`: the model's bandwidth, bytes/s, if it has found
    /// it (left Startup; a check holds the window at a fraction of its BDP). `short_queue`
    /// is the ACK's [`super::Acked::short_queue_seen`].
    pub fn on_ack(&mut self, now: Time, srtt: Duration, short_queue: bool, rate: Option<f64>) {
        let standing_queue = !short_queue;
        if let Some(probe) = &mut self.probe {
            if now < probe.started {
                return;
            }
            probe.short_since = match (standing_queue, probe.short_since) {
                (true, _) => None,
                (false, None) => Some(now),
                (false, since) => since,
            };
            if now >= probe.deadline {
                let drained = probe
                    .short_since
                    .is_some_and(|since| now.saturating_since(since) >= probe.settle);
                self.conclude(drained, standing_queue);
                if drained && let Some(rate) = rate {
                    self.reference_rate = rate;
                }
                self.probe = None;
            }
            return;
        }
        let interval = now.as_nanos() / DRAIN_CHECK_INTERVAL.as_nanos() as u64;
        let first_in_interval = self.interval.is_some_and(|last| last != interval);
        self.interval = Some(interval);
        // A model without a rate has no drain window to hold: no check.
        let Some(rate) = rate.filter(|r| *r > 0.0) else {
            return;
        };
        let fallen = rate < RATE_FALL * self.reference_rate;
        self.reference_rate = self.reference_rate.max(rate);
        let since_boundary =
            Duration::from_nanos(now.as_nanos() % DRAIN_CHECK_INTERVAL.as_nanos() as u64);
        if (fallen || self.shared) && first_in_interval && since_boundary <= DRAIN_CHECK_SLACK {
            let length = srtt
                .saturating_mul(2)
                .saturating_add(ACK_DELAY_ALLOWANCE)
                .min(DRAIN_CHECK_MAX);
            self.probe = Some(Probe {
                started: now,
                deadline: now.saturating_add(length),
                settle: length.saturating_sub(ACK_DELAY_ALLOWANCE) / 4,
                short_since: (!standing_queue).then_some(now),
            });
        }
    }

    /// A check's verdict: the queue drained (the path's own), stood to the end (other
    /// flows'), or neither (the ACKs stopped, or the queue was only just short at the
    /// deadline): then nothing changes.
    fn conclude(&mut self, drained: bool, standing_at_end: bool) {
        if drained {
            self.drained_in_a_row = self.drained_in_a_row.saturating_add(1);
            // The cap comes back after two in a row find the queue the path's own.
            if self.drained_in_a_row >= DRAINED_CHECKS_TO_CAP {
                self.shared = false;
            }
        } else if standing_at_end {
            // One check that finds a stranger's queue lifts the cap (module docs).
            self.drained_in_a_row = 0;
            self.shared = true;
        }
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
