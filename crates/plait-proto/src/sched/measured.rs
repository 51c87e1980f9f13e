//! Path choice by measurement alone, for datagrams outside the bulk schedulers' spreading
//! rules: control datagrams ([`earliest_by_measurement`], the default
//! [`super::Scheduler::select_control`]), packets of sparse flows and of flows pinned to the
//! lowest delay ([`soonest_by_measurement`], docs/protocol.md#unordered) and FEC repair
//! symbols ([`measured_delivery`], docs/protocol.md#fec).
//!
//! Invariants: only usable paths are returned, ties go to the lowest id, paths with no delay
//! measure come after those with one, and no estimate (a zero or non-finite rate, a huge
//! backlog) makes a key panic or overflow: durations saturate.

use std::time::Duration;

use super::{PacketMeta, transmission_time, usable_min_by_key};
use crate::cc::AckHold;
use crate::ids::PathId;
use crate::path::PathView;

/// The usable path that delivers `pkt` soonest on an empty queue: base (queue-free)
/// relative one-way delay plus its serialisation time, paths without a delay sample after
/// those with one (ties: lowest id). The queue is left out on purpose: a slow path looks
/// empty because schedulers give it little, and piling control datagrams onto it overloads
/// it; serialisation time (at the measured capacity, as in [`measured_delivery`]) instead
/// favours the paths where a small datagram costs least.
pub fn earliest_by_measurement(paths: &[PathView], pkt: &PacketMeta) -> Option<PathId> {
    usable_min_by_key(paths, |p| {
        let delay = p.base_owd.or(p.min_rtt.map(|s| s / 2));
        let tx = p
            .measured_capacity()
            .map_or(Duration::ZERO, |r| transmission_time(pkt.len, r));
        (
            delay.is_none(),
            delay.unwrap_or(Duration::MAX).saturating_add(tx),
        )
    })
}

/// The usable path that delivers `pkt` soonest now by measurement
/// ([`measured_delivery`]; ties: lowest id). For a packet that need not keep the global
/// order (docs/protocol.md#unordered), where the bulk schedulers' spreading rules do not
/// apply: it should simply arrive first.
pub fn soonest_by_measurement(
    paths: &[PathView],
    pkt: &PacketMeta,
    ack_hold: AckHold,
) -> Option<PathId> {
    usable_min_by_key(paths, |p| measured_delivery(p, pkt.len, ack_hold))
}

/// How soon a `len`-byte datagram handed to `path` now arrives by measurement, as a sort
/// key: (no delay measure, delay). The delay is the latest relative one-way delay (its
/// queue included; the base delay, or half the minimum RTT, without a sample), plus what
/// the path's queue has grown since, plus the serialisation time at the
/// path's [measured capacity](PathView::measured_capacity) (none without one: a delivery
/// rate alone measures what the path was given, and a path that carried only
/// acknowledgements would look seconds away). Paths with no delay measure sort last.
///
/// The queue counted is the larger of two estimates (docs/protocol.md#unordered): the
/// measured one (`owd - base_owd`, whoever filled it), a round trip old, and the queue of
/// this sender's own bytes now, by Little's law: what is in flight, less what the peer may
/// hold unacknowledged (`ack_hold`), takes `bytes / capacity` to cross, of which the
/// minimum RTT is the path itself (`own_queue`). A path whose sending just rose (a
/// start-up) shows its queue at once that way, where the measured one would lag it by a
/// round trip; in a steady state both agree.
pub fn measured_delivery(path: &PathView, len: usize, ack_hold: AckHold) -> (bool, Duration) {
    // The latest measure, its queue included.
    let latest = path.owd.or(path.base_owd).or(path.min_rtt.map(|s| s / 2));
    let measured_queue = match (path.owd, path.base_owd) {
        (Some(owd), Some(base)) => owd.saturating_sub(base),
        _ => Duration::ZERO,
    };
    // Our own queue beyond what the measure shows.
    let unseen_queue = own_queue(path, ack_hold).saturating_sub(measured_queue);
    let tx = path
        .measured_capacity()
        .map_or(Duration::ZERO, |r| transmission_time(len, r));
    (
        latest.is_none(),
        latest
            .unwrap_or(Duration::MAX)
            .saturating_add(unseen_queue)
            .saturating_add(tx),
    )
}

/// The queueing delay this sender's bytes in flight on `path` make by Little's law:
/// `(bytes_in_flight - held) / capacity - min_rtt`, where `held` is what the peer may hold
/// unacknowledged at that rate and the capacity is the path's
/// [measured capacity](PathView::measured_capacity); zero without one or without a
/// minimum RTT. Not the delivery rate: on a path that carried only keepalives and
/// acknowledgements it is a few kbit/s, and one datagram in flight would read as a
/// queue of a second, sending a sparse flow's next packet elsewhere and reordering it.
fn own_queue(path: &PathView, ack_hold: AckHold) -> Duration {
    match (path.measured_capacity(), path.min_rtt) {
        (Some(rate), Some(min_rtt)) => {
            let in_path = (path.bytes_in_flight as f64 - ack_hold.bytes_at(rate)).max(0.0);
            crate::time::secs_f64_saturating(in_path / rate).saturating_sub(min_rtt)
        }
        _ => Duration::ZERO,
    }
}

#[cfg(test)]
#[path = "measured_tests.rs"]
mod tests;
