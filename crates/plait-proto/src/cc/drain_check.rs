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
//! 0.30 where one TCP flow in the same place gets 0.78). Delivery rate, round
//! trip and window cannot tell the two apart (Little's law holds in both), but draining
//! can: with this path's window under one BDP its own queue empties within a round, while
//! another flow's does not.
//!
//! So at every multiple of [`DRAIN_CHECK_INTERVAL`] of the session's clock (the same
//! instants for every path of a session, so paths that share a bottleneck drain together
//! and do not read each other's queue as a stranger's) the path holds its window at
//! [`DRAIN_WINDOW_GAIN`] of the model's BDP plus the model's ACK allowance (the datagrams
//! the peer holds for its next ACK are not in the queue; without the allowance the test
//! bed's stream mode lost 1-2 %). If the ACKs
//! then show a short queue (`Acked::standing_queue` false: the smoothed one-way delay
//! under `path::SHALLOW_QUEUE` over its base) without a break for half a smoothed round
//! trip, the queue was the path's own: the check ends there. If they do not within two
//! smoothed round trips and one ACK delay, the queue belongs to flows the path does not
//! control: the cap cannot shorten it and only starves the path, so NewReno runs uncapped,
//! as a TCP flow there would. One such check lifts the cap; it comes back after
//! [`DRAINED_CHECKS_TO_CAP`] checks in a row find the queue the path's own (a competitor's
//! queue can empty for a moment after its own cut, and a cap brought back by that moment
//! would starve the path for a whole interval).
//!
//! Cost, alone: the window is lowered for about a round trip per interval, to a level
//! that still fills the pipe if the model's rate and minimum RTT are right.

//! Invariants: no clock or randomness (`now` comes from the caller); a check starts only
//! when the caller says the model is ready and the ACK's interval differs from the last
//! check's (once an interval while the clock runs forward), and it ends at the first ACK
//! at or after its deadline.

use std::time::Duration;

use crate::time::Time;

/// How often a path checks whether its standing queue is its own (module docs).
pub const DRAIN_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// The window during a check, as a fraction of the model's BDP: under one, so the path's
/// own queue empties, and close to one, so the link stays nearly busy meanwhile.
pub const DRAIN_WINDOW_GAIN: f64 = 0.9;

/// Checks in a row that must find the queue the path's own before the cap comes back.
pub const DRAINED_CHECKS_TO_CAP: u8 = 2;

/// Added to a check's two round trips: the peer may hold an ACK this long
/// (`ack_delay`, 25 ms by default).
const ACK_DELAY_ALLOWANCE: Duration = Duration::from_millis(25);

/// A drain check under way.
#[derive(Clone, Copy, Debug)]
struct Probe {
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
    /// The interval of the last check started (`now / DRAIN_CHECK_INTERVAL`), if any.
    interval: Option<u64>,
    /// The check under way.
    probe: Option<Probe>,
    /// The standing queue is taken as not the path's own.
    shared: bool,
    /// Checks in a row, up to this one, that found the queue the path's own.
    drained_in_a_row: u8,
}

impl DrainCheck {
    /// No check yet: the queue is taken as the path's own.
    pub fn new() -> DrainCheck {
        DrainCheck::default()
    }

    /// One ACK while the cap runs. `ready`: the model has found the path's bandwidth (a
    /// check drains to a fraction of its BDP). `standing_queue` is the ACK's
    /// [`super::Acked::standing_queue`].
    pub fn on_ack(&mut self, now: Time, srtt: Duration, standing_queue: bool, ready: bool) {
        if let Some(probe) = &mut self.probe {
            probe.short_since = match (standing_queue, probe.short_since) {
                (true, _) => None,
                (false, None) => Some(now),
                (false, since) => since,
            };
            let drained = probe
                .short_since
                .is_some_and(|since| now.saturating_since(since) >= probe.settle);
            if drained || now >= probe.deadline {
                self.drained_in_a_row = if drained {
                    self.drained_in_a_row.saturating_add(1)
                } else {
                    0
                };
                // One check that finds a stranger's queue lifts the cap; it comes back after
                // two in a row find the queue the path's own (module docs).
                if !drained {
                    self.shared = true;
                } else if self.drained_in_a_row >= DRAINED_CHECKS_TO_CAP {
                    self.shared = false;
                }
                self.probe = None;
            }
            return;
        }
        let interval = now.as_nanos() / DRAIN_CHECK_INTERVAL.as_nanos() as u64;
        if ready && self.interval != Some(interval) {
            self.interval = Some(interval);
            let length = srtt.saturating_mul(2).saturating_add(ACK_DELAY_ALLOWANCE);
            self.probe = Some(Probe {
                deadline: now.saturating_add(length),
                settle: srtt / 2,
                short_since: (!standing_queue).then_some(now),
            });
        }
    }

    /// Whether a check is under way (the window is held under the model's BDP).
    pub fn draining(&self) -> bool {
        self.probe.is_some()
    }

    /// Whether the last check found the standing queue was not the path's own.
    pub fn shared(&self) -> bool {
        self.shared
    }
}
