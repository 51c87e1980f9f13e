//! Packet pacing's spill rule (docs/protocol.md#packet-pacing): with packet pacing a path
//! whose window is full, or whose pacer holds the next datagram, is not usable, so the
//! scheduler places the send queue's head among the paths that have room. A packet placed on
//! a much slower path costs the inner flow a reorder hold at the receiver (everything sent
//! after it waits for it). The rule: the head never goes on a path whose base one-way delay
//! is more than the send queue's CoDel interval (`send_queue_interval`, 100 ms: the round
//! trip the send queue's AQM is tuned for) behind the best path that may carry data; it goes
//! on a path within that budget that has room, else waits for the best path's pacer or for
//! an ACK that opens its window. A spill beyond the budget would stretch the inner flow's
//! round trip beyond what that queue manages (T2's 300 ms path is 140 ms behind its 20 ms
//! one); within it is what multipath aggregation costs anyway (T1's 100 ms path is 40 ms
//! behind).
//!
//! Only base delays count (docs/scheduler-design.md, "Short link queues", has what else was
//! tried): the current queues are the congestion controllers' to keep, and counting them
//! kept T1's slow path underfed whenever its BBR queue (up to one BDP, 100 ms there) was
//! long; the `plait` scheduler's loss price fired on T1's slow path after its start-up
//! losses; a serialisation term from a path's rate estimate kept a path whose estimate
//! started low from ever getting the traffic that would correct it.
//!
//! Invariant: a send only turns into a wait for a path that may carry data (Active or
//! Degraded, not a backup in standby) and will take the head once its pacer or window lets
//! it; a path that goes down stops being the best (its state is no longer usable), so the
//! head never waits for a path that cannot come back. A path whose base delay is not
//! measured yet is neither judged nor a reference.

use std::time::Duration;

use super::Session;
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

/// What becomes of the scheduler's choice.
pub(super) enum Spill {
    /// Go on this path instead: it has room and is within the budget of the best.
    Send(PathId),
    /// Wait for the best path's pacer, until this time.
    Until(Time),
    /// Wait for an ACK that opens the best path's window.
    Ack,
}

/// The path's base one-way delay relative to the session's fastest path; `None` before it
/// is measured.
fn base_delay(view: &PathView) -> Option<Duration> {
    view.base_owd
}

impl Session {
    /// With packet pacing and the head about to go on `chosen` (which has room): `None` if
    /// it may, else where it goes or how long it waits instead (see the module
    /// documentation). Needs the views marked by `mark_window_room`.
    pub(super) fn spill_check(&self, now: Time, chosen: PathId) -> Option<Spill> {
        let on_chosen = self
            .views
            .iter()
            .find(|v| v.id == chosen)
            .and_then(base_delay)?;
        let measured = |v: &PathView| base_delay(v).map(|d| (v.id, d));
        // The best path that may carry data, whether or not its window and pacer hold it.
        let (best, on_best) = self
            .views
            .iter()
            .filter(|v| v.may_carry())
            .filter_map(measured)
            .min_by_key(|(id, d)| (*d, *id))?;
        let limit = on_best.saturating_add(self.config.send_queue_interval);
        if on_chosen <= limit {
            return None;
        }
        // A path with room within the budget of the best takes it (the nearest first).
        let near = self
            .views
            .iter()
            .filter(|v| v.is_usable())
            .filter_map(measured)
            .filter(|(_, d)| *d <= limit)
            .min_by_key(|(id, d)| (*d, *id));
        if let Some((id, _)) = near {
            return Some(Spill::Send(id));
        }
        let p = &self.slot(best)?.tx;
        let size = self.config.max_datagram_size as u64;
        let room = p.congestion().window().saturating_sub(p.bytes_in_flight());
        Some(if room >= size {
            Spill::Until(p.pacing_release(now, size))
        } else {
            Spill::Ack
        })
    }
}
