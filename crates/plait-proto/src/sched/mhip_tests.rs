//! mHIP unit tests (seed mHIP §III-B, §IV-B); the module invariants are property-tested
//! over every scheduler in `sched::tests`.

use crate::sched::test_support::{control, data, picks, send};
use std::time::Duration;

use super::*;
use crate::path::PathState;

const MS: Duration = Duration::from_millis(1);

fn pid(i: u8) -> PathId {
    PathId(i)
}

fn active(i: u8) -> PathView {
    PathView::new(pid(i), PathState::Active)
}

/// An active path with a packet-pair rate (bytes/s) and base one-way delay, idle (the
/// measured delay is the base one).
fn exact(i: u8, rate: f64, delay: Duration) -> PathView {
    PathView {
        pair_rate: Some(rate),
        base_owd: Some(delay),
        owd: Some(delay),
        ..active(i)
    }
}

/// `view` with a measured one-way delay and a smoothed RTT.
fn measured(view: PathView, owd: Duration, srtt: Duration) -> PathView {
    PathView {
        owd: Some(owd),
        srtt: Some(srtt),
        ..view
    }
}

fn with_room(view: PathView, room: u64) -> PathView {
    PathView {
        cwnd_room: Some(room),
        ..view
    }
}

#[test]
fn minimum_estimated_arrival_wins() {
    let now = Time::ZERO;
    let pkt = data(0, now);
    // Lower delay loses to a faster path: 0 + 1000 B at 10 kB/s = 100 ms vs 20 ms + 1 ms.
    let paths = [exact(0, 1e4, Duration::ZERO), exact(1, 1e6, 20 * MS)];
    let s = Mhip::default();
    assert_eq!(
        s.estimated_arrival(now, &paths[0], &pkt),
        Some(Time::from_millis(100))
    );
    assert_eq!(
        s.estimated_arrival(now, &paths[1], &pkt),
        Some(Time::from_millis(21))
    );
    assert_eq!(
        Mhip::default().select(now, &paths, &pkt),
        Selection::Send(pid(1))
    );
    // Equal rates: the shorter delay wins; ties go to the lowest id.
    let paths = [exact(0, 1e6, 30 * MS), exact(1, 1e6, 10 * MS)];
    assert_eq!(
        Mhip::default().select(now, &paths, &pkt),
        Selection::Send(pid(1))
    );
    let paths = [exact(0, 1e6, 10 * MS), exact(1, 1e6, 10 * MS)];
    assert_eq!(
        Mhip::default().select(now, &paths, &pkt),
        Selection::Send(pid(0))
    );
}

#[test]
fn back_to_back_packets_spread_as_estimates_advance() {
    // Equal paths alternate.
    let paths = [exact(0, 1e6, Duration::ZERO), exact(1, 1e6, Duration::ZERO)];
    assert_eq!(
        picks(&mut Mhip::default(), Time::ZERO, &paths, 6),
        [0, 1, 0, 1, 0, 1]
    );
    // Twice the rate, twice the packets: 0.5 ms vs 1 ms per packet (ties: lowest id).
    let paths = [exact(0, 2e6, Duration::ZERO), exact(1, 1e6, Duration::ZERO)];
    assert_eq!(
        picks(&mut Mhip::default(), Time::ZERO, &paths, 6),
        [0, 0, 1, 0, 0, 1]
    );
    // A longer path only gets packets once the short one's estimate has passed its delay:
    // path 0 arrivals 1, 2, 3, 4, 5 ms; path 1's first packet arrives at 4 ms.
    let paths = [exact(0, 1e6, Duration::ZERO), exact(1, 1e6, 3 * MS)];
    assert_eq!(
        picks(&mut Mhip::default(), Time::ZERO, &paths, 6),
        [0, 0, 0, 0, 1, 0]
    );
}

#[test]
fn time_drains_the_estimate() {
    let mut s = Mhip::default();
    let paths = [exact(0, 1e6, Duration::ZERO), exact(1, 1e6, 2 * MS)];
    assert_eq!(picks(&mut s, Time::ZERO, &paths, 3), [0, 0, 0]);
    // By 10 ms path 0's last packet (3 ms) has arrived: it is the best again.
    let now = Time::from_millis(10);
    assert_eq!(send(&mut s, now, &paths, &data(3, now)), pid(0));
}

#[test]
fn control_datagrams_advance_the_estimate() {
    let mut s = Mhip::default();
    let paths = [exact(0, 1e6, Duration::ZERO), exact(1, 1e6, Duration::ZERO)];
    let now = Time::ZERO;
    // `select_control` uses the same estimate and leaves no trace until `on_sent`.
    assert_eq!(
        s.select_control(now, &paths, &control(now, 1000)),
        Some(pid(0))
    );
    assert_eq!(
        s.select_control(now, &paths, &control(now, 1000)),
        Some(pid(0))
    );
    // Once sent, the ACK-only datagram occupies path 0 like a data packet would.
    s.on_sent(now, pid(0), &control(now, 1000));
    assert_eq!(send(&mut s, now, &paths, &data(0, now)), pid(1));
    // A control datagram the session placed elsewhere (e.g. a probe) counts as well.
    s.on_sent(now, pid(1), &control(now, 1000));
    assert_eq!(s.slot(pid(1)).last_arrival, Time::from_millis(2));
}

#[test]
fn full_window_is_skipped_for_the_next_minimum() {
    let now = Time::ZERO;
    let pkt = data(0, now);
    // Estimates: path 0 1 ms, path 1 11 ms, path 2 21 ms.
    let best = exact(0, 1e6, Duration::ZERO);
    let next = exact(1, 1e6, 10 * MS);
    let last = exact(2, 1e6, 20 * MS);
    let mut s = Mhip::default();
    let paths = [with_room(best.clone(), 0), next.clone(), last.clone()];
    assert_eq!(s.select(now, &paths, &pkt), Selection::Send(pid(1)));
    let paths = [
        with_room(best.clone(), 0),
        with_room(next.clone(), 0),
        with_room(last.clone(), 1),
    ];
    assert_eq!(s.select(now, &paths, &pkt), Selection::Send(pid(2)));
    // Any room takes the packet (TCP sends while fewer packets than cwnd are in flight).
    let paths = [with_room(best.clone(), 1), next.clone(), last.clone()];
    assert_eq!(s.select(now, &paths, &pkt), Selection::Send(pid(0)));
    // No room anywhere: the packet stays in the sender-side buffer until paths change.
    let paths = [
        with_room(best.clone(), 0),
        with_room(next.clone(), 0),
        with_room(last, 0),
    ];
    assert_eq!(s.select(now, &paths, &pkt), Selection::Wait(None));
    assert_eq!(s.select_control(now, &paths, &pkt), None);
    // Unusable states are never chosen either, whatever their estimate.
    let paths = [
        PathView {
            state: PathState::Probing,
            ..best
        },
        PathView {
            state: PathState::Down,
            ..next
        },
    ];
    assert_eq!(s.select(now, &paths, &pkt), Selection::Wait(None));
    assert_eq!(s.select(now, &[], &pkt), Selection::Wait(None));
}

#[test]
fn rateless_paths_come_last_and_go_by_start() {
    let now = Time::ZERO;
    let pkt = data(0, now);
    let bare = |i, d| PathView {
        base_owd: Some(d),
        ..active(i)
    };
    let paths = [bare(0, Duration::ZERO), exact(1, 1e3, 50 * MS)];
    assert_eq!(
        Mhip::default().select(now, &paths, &pkt),
        Selection::Send(pid(1))
    );
    let paths = [bare(0, 5 * MS), bare(1, 2 * MS)];
    assert_eq!(
        Mhip::default().select(now, &paths, &pkt),
        Selection::Send(pid(1))
    );
}

#[test]
fn mark_pulls_a_runaway_estimate_back_when_the_path_is_idle() {
    let mut s = Mhip::default();
    let srtt = 10 * MS;
    // A stale, far too low rate estimate: 1000 B at 1 kB/s puts path 0's estimate at 1 s.
    let slow = measured(exact(0, 1e3, Duration::ZERO), Duration::ZERO, srtt);
    let t0 = Time::ZERO;
    assert_eq!(send(&mut s, t0, &[slow], &data(0, t0)), pid(0));
    assert_eq!(s.slot(pid(0)).last_arrival, Time::from_millis(1000));
    assert_eq!(
        s.slot(pid(0)).mark,
        Some(Mark {
            sent: t0,
            expected: Time::from_millis(1000)
        })
    );
    // The rate estimate is right again; the measured one-way delay says path 0 is idle.
    let fixed = measured(exact(0, 1e6, Duration::ZERO), Duration::ZERO, srtt);
    let other = exact(1, 1e6, 5 * MS);
    // Before one RTT the mark is not due: the 1 s estimate stands, path 1 is chosen.
    let early = Time::from_millis(5);
    let paths = [fixed.clone(), other.clone()];
    assert_eq!(
        s.select(early, &paths, &data(1, early)),
        Selection::Send(pid(1))
    );
    assert!(s.slot(pid(0)).mark.is_some());
    // After one RTT the marked packet's actual arrival (0 + 0 ms) re-anchors the estimate.
    let now = Time::from_millis(20);
    assert_eq!(
        s.select(now, &paths, &data(1, now)),
        Selection::Send(pid(0))
    );
    assert_eq!(s.slot(pid(0)).last_arrival, Time::ZERO);
    assert_eq!(s.slot(pid(0)).mark, None);
    // Asking again applies nothing twice.
    assert_eq!(
        s.select(now, &paths, &data(1, now)),
        Selection::Send(pid(0))
    );
    assert_eq!(s.slot(pid(0)).last_arrival, Time::ZERO);
    // The next packet sent is the next mark (one per round-trip time).
    s.on_sent(now, pid(0), &data(1, now));
    assert_eq!(
        s.slot(pid(0)).mark,
        Some(Mark {
            sent: now,
            expected: Time::from_millis(21)
        })
    );
}

#[test]
fn mark_pushes_the_estimate_forward_when_the_path_is_slower_than_modelled() {
    let mut s = Mhip::default();
    let srtt = 40 * MS;
    let t0 = Time::ZERO;
    // 100 packets modelled on path 0 alone: arrivals 1..=100 ms, the first is the mark.
    let alone = measured(exact(0, 1e6, Duration::ZERO), Duration::ZERO, srtt);
    assert_eq!(picks(&mut s, t0, &[alone], 100), [0; 100]);
    assert_eq!(s.slot(pid(0)).last_arrival, Time::from_millis(100));
    let other = exact(1, 1e6, 60 * MS);
    // Model only at 50 ms: path 0 (101 ms) beats path 1 (50 + 60 + 1 = 111 ms).
    let now = Time::from_millis(50);
    assert_eq!(
        s.estimated_arrival(now, &alone_at(30 * MS, srtt), &data(100, now)),
        Some(Time::from_millis(101))
    );
    // The marked packet really took 30 ms (cross traffic queue), not 1 ms: +29 ms puts
    // path 0 at 130 ms, behind path 1.
    let paths = [alone_at(30 * MS, srtt), other];
    assert_eq!(
        s.select(now, &paths, &data(100, now)),
        Selection::Send(pid(1))
    );
    assert_eq!(s.slot(pid(0)).last_arrival, Time::from_millis(129));
}

/// Path 0 at 1 MB/s, base delay zero, with a measured one-way delay `owd`.
fn alone_at(owd: Duration, srtt: Duration) -> PathView {
    measured(exact(0, 1e6, Duration::ZERO), owd, srtt)
}

#[test]
fn marks_without_a_measurement_or_rtt() {
    let t0 = Time::ZERO;
    // No RTT: the mark waits.
    let mut s = Mhip::default();
    let bare = exact(0, 1e3, Duration::ZERO);
    send(&mut s, t0, std::slice::from_ref(&bare), &data(0, t0));
    let later = Time::from_millis(5000);
    let _ = s.select(later, std::slice::from_ref(&bare), &data(1, later));
    assert!(s.slot(pid(0)).mark.is_some());
    // An RTT but no one-way delay at all (`base_owd` missing, RTT frame): srtt / 2 is the
    // measurement, so 0 + 5 ms is the marked packet's arrival.
    let mut s = Mhip::default();
    let rtt_only = PathView {
        pair_rate: Some(1e3),
        srtt: Some(10 * MS),
        ..active(0)
    };
    send(&mut s, t0, std::slice::from_ref(&rtt_only), &data(0, t0));
    assert_eq!(s.slot(pid(0)).last_arrival, Time::from_millis(1005));
    let now = Time::from_millis(10);
    let _ = s.select(now, std::slice::from_ref(&rtt_only), &data(1, now));
    assert_eq!(s.slot(pid(0)).mark, None);
    assert_eq!(s.slot(pid(0)).last_arrival, Time::from_millis(5));
    // `base_owd` but no smoothed `owd`: the due mark is dropped uncorrected.
    let mut s = Mhip::default();
    let no_owd = PathView {
        owd: None,
        srtt: Some(10 * MS),
        ..exact(0, 1e3, Duration::ZERO)
    };
    send(&mut s, t0, std::slice::from_ref(&no_owd), &data(0, t0));
    let _ = s.select(now, std::slice::from_ref(&no_owd), &data(1, now));
    assert_eq!(s.slot(pid(0)).mark, None);
    assert_eq!(s.slot(pid(0)).last_arrival, Time::from_millis(1000));
}

#[test]
fn saturated_estimates_are_pulled_back_too() {
    let mut s = Mhip::default();
    let t0 = Time::ZERO;
    let tiny = measured(exact(0, 1e-300, Duration::ZERO), Duration::ZERO, MS);
    send(&mut s, t0, std::slice::from_ref(&tiny), &data(0, t0));
    assert_eq!(s.slot(pid(0)).last_arrival, Time::MAX);
    let now = Time::from_millis(2);
    let paths = [
        measured(exact(0, 1e6, Duration::ZERO), Duration::ZERO, MS),
        exact(1, 1e6, 5 * MS),
    ];
    assert_eq!(
        s.select(now, &paths, &data(1, now)),
        Selection::Send(pid(0))
    );
}
