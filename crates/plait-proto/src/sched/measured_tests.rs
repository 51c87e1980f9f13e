//! Tests of path choice by measurement: the key [`measured_delivery`] and
//! [`soonest_by_measurement`] over it.

use std::time::Duration;

use super::*;
use crate::path::PathState;
use crate::time::Time;

const MS: Duration = Duration::from_millis(1);

/// An active path `i` with a base relative one-way delay, a latest one (queue included),
/// and a minimum RTT of twice the base plus 20 ms.
fn path(i: u8, base_ms: u64, owd_ms: u64) -> PathView {
    PathView {
        base_owd: Some(Duration::from_millis(base_ms)),
        owd: Some(Duration::from_millis(owd_ms)),
        min_rtt: Some(Duration::from_millis(2 * base_ms + 20)),
        ..PathView::new(PathId(i), PathState::Active)
    }
}

/// A peer that acknowledges at once.
const NO_HOLD: AckHold = AckHold {
    bytes: 0,
    max_delay: Duration::ZERO,
    soon_bytes: 0,
    soon_delay: Duration::ZERO,
};

fn measured_delivery_now(path: &PathView, len: usize) -> (bool, Duration) {
    measured_delivery(path, len, NO_HOLD)
}

fn soonest(paths: &[PathView], pkt: &PacketMeta) -> Option<PathId> {
    soonest_by_measurement(paths, pkt, NO_HOLD)
}

/// Asserts two delays agree within a microsecond (they come from float arithmetic).
#[track_caller]
fn close(got: Duration, want: Duration) {
    assert!(
        got.abs_diff(want) < Duration::from_micros(1),
        "{got:?} != {want:?}"
    );
}

fn small() -> PacketMeta {
    PacketMeta {
        global_seq: 0,
        len: 124,
        arrival: Time::ZERO,
        control: false,
    }
}

#[test]
fn the_key_is_the_latest_delay_plus_the_serialisation_at_the_measured_capacity() {
    let mut p = path(0, 5, 12);
    assert_eq!(measured_delivery_now(&p, 1000), (false, 12 * MS));
    p.pair_rate = Some(1e6); // 1000 bytes take 1 ms
    assert_eq!(measured_delivery_now(&p, 1000), (false, 13 * MS));
    let unmeasured = PathView::new(PathId(1), PathState::Active);
    assert_eq!(
        measured_delivery_now(&unmeasured, 1000),
        (true, Duration::MAX),
        "no delay measure sorts last and saturates"
    );
}

#[test]
fn a_delivery_rate_alone_adds_no_serialisation_time() {
    // A path that carried only keepalives has delivered 1 kB/s: 124 bytes "take" 124 ms
    // at that rate, which is no measure of the path.
    let quiet = PathView {
        delivery_rate: Some(1000.0),
        ..path(0, 0, 0)
    };
    let far = path(1, 20, 20);
    assert_eq!(measured_delivery_now(&quiet, 124), (false, Duration::ZERO));
    assert_eq!(soonest(&[quiet, far], &small()), Some(PathId(0)));
}

#[test]
fn own_bytes_beyond_the_pipe_count_before_the_measure_shows_them() {
    // Path 0 measured empty a round trip ago, but 60 kB are in flight at 500 kB/s over a
    // 20 ms minimum RTT: 120 ms to cross, so about 100 ms of queue now.
    let busy = PathView {
        bytes_in_flight: 60_000,
        pair_rate: Some(500_000.0),
        ..path(0, 0, 0)
    };
    let far = path(1, 20, 25);
    close(measured_delivery_now(&busy, 0).1, 100 * MS);
    assert_eq!(
        soonest(&[busy.clone(), far.clone()], &small()),
        Some(PathId(1))
    );
    let drained = PathView {
        bytes_in_flight: 5_000,
        ..busy
    };
    assert_eq!(
        soonest(&[drained, far], &small()),
        Some(PathId(0)),
        "in flight under one pipe: no queue of its own"
    );
}

#[test]
fn the_measured_queue_and_the_own_queue_are_not_added() {
    // 30 ms measured, 10 ms of own queue by Little's law: the larger, once.
    let p = PathView {
        bytes_in_flight: 30_000,
        pair_rate: Some(1_000_000.0),
        ..path(0, 0, 30)
    };
    close(measured_delivery_now(&p, 0).1, 30 * MS);
    // 30 ms measured, 50 ms of own queue: 50.
    let q = PathView {
        bytes_in_flight: 70_000,
        ..p
    };
    close(measured_delivery_now(&q, 0).1, 50 * MS);
}

#[test]
fn a_delivery_rate_alone_makes_no_own_queue() {
    // A path that carried only keepalives has delivered 1 kB/s: one 1500-byte datagram in
    // flight would read as 1.5 s of queue at that rate, and send the next packet of a
    // sparse flow elsewhere, ahead of this one.
    let quiet = PathView {
        bytes_in_flight: 1_500,
        delivery_rate: Some(1_000.0),
        ..path(0, 0, 0)
    };
    assert_eq!(measured_delivery_now(&quiet, 0), (false, Duration::ZERO));
    let far = path(1, 20, 20);
    assert_eq!(soonest(&[quiet.clone(), far], &small()), Some(PathId(0)));
    // With its capacity measured, 1.5 kB is far under the pipe: still no queue.
    let measured = PathView {
        pair_rate: Some(1_000_000.0),
        ..quiet
    };
    assert_eq!(measured_delivery_now(&measured, 0), (false, Duration::ZERO));
}

#[test]
fn the_capacity_is_raised_to_what_the_path_delivered() {
    // The packet pairs said 100 kB/s (a stale probe), the path delivered 1 MB/s: 40 kB in
    // flight over a 20 ms minimum RTT are 20 ms of queue, not 380.
    let p = PathView {
        bytes_in_flight: 40_000,
        pair_rate: Some(100_000.0),
        delivery_rate: Some(1_000_000.0),
        ..path(0, 0, 0)
    };
    close(measured_delivery_now(&p, 0).1, 20 * MS);
}

#[test]
fn absurd_estimates_saturate_and_never_panic() {
    // No usable rate: no own queue and no serialisation, the plain latest delay.
    for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let p = PathView {
            bytes_in_flight: u64::MAX,
            delivery_rate: Some(rate),
            pair_rate: Some(rate),
            ..path(0, 0, 7)
        };
        assert_eq!(
            measured_delivery_now(&p, usize::MAX),
            (false, 7 * MS),
            "{rate}"
        );
    }
    // A vanishing rate: everything saturates at the longest delay.
    let p = PathView {
        bytes_in_flight: u64::MAX,
        delivery_rate: Some(f64::MIN_POSITIVE),
        pair_rate: Some(f64::MIN_POSITIVE),
        ..path(0, 0, 7)
    };
    assert_eq!(
        measured_delivery_now(&p, usize::MAX),
        (false, Duration::MAX)
    );
    let huge_hold = AckHold {
        bytes: u64::MAX,
        max_delay: Duration::MAX,
        soon_bytes: u64::MAX,
        soon_delay: Duration::MAX,
    };
    // A peer that may hold everything: nothing in flight is a queue.
    let held = PathView {
        bytes_in_flight: 60_000,
        pair_rate: Some(1_000_000.0),
        ..path(0, 0, 7)
    };
    assert_eq!(measured_delivery(&held, 0, huge_hold), (false, 7 * MS));
}

#[test]
fn without_a_minimum_rtt_or_a_base_there_is_no_own_queue_and_the_latest_delay_counts() {
    let busy = |v: PathView| PathView {
        bytes_in_flight: 60_000,
        pair_rate: Some(500_000.0),
        ..v
    };
    // No minimum RTT: the pipe is unknown, so no own queue.
    let no_rtt = busy(PathView {
        min_rtt: None,
        ..path(0, 0, 3)
    });
    assert_eq!(measured_delivery_now(&no_rtt, 0), (false, 3 * MS));
    // A latest delay but no base: it is the whole measure, and the own queue (100 ms)
    // beyond a measured queue of zero adds to it.
    let no_base = busy(PathView {
        base_owd: None,
        ..path(0, 0, 3)
    });
    close(measured_delivery_now(&no_base, 0).1, 103 * MS);
    // Only the minimum RTT: half of it, plus the own queue.
    let only_rtt = busy(PathView {
        base_owd: None,
        owd: None,
        ..path(0, 0, 0)
    });
    close(measured_delivery_now(&only_rtt, 0).1, 110 * MS);
}

#[test]
fn bytes_the_peer_may_hold_unacknowledged_are_no_queue() {
    // 45 kB in flight at 1 MB/s over 20 ms: 25 ms of queue if acknowledged at once; a peer
    // that holds its ACK up to 25 ms (16 datagrams of 1500 bytes are 24 ms at this rate)
    // holds 24 kB of it, which leaves 1 ms.
    let p = PathView {
        bytes_in_flight: 45_000,
        pair_rate: Some(1_000_000.0),
        ..path(0, 0, 0)
    };
    close(measured_delivery_now(&p, 0).1, 25 * MS);
    let peer = AckHold::counting(16, 1500, 25 * MS);
    close(measured_delivery(&p, 0, peer).1, MS);
    // At 100 kB/s the delay bounds the hold: 2.5 kB of 5.5 are held, 3 kB take 30 ms.
    let slow = PathView {
        bytes_in_flight: 5_500,
        pair_rate: Some(100_000.0),
        ..path(0, 0, 0)
    };
    close(measured_delivery(&slow, 0, peer).1, 10 * MS);
}
