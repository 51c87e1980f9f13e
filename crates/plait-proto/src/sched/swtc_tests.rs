//! SWTC unit tests (seed ETOM §IV-C); the module invariants are property-tested over every
//! scheduler in `sched::tests`.

use std::time::Duration;

use super::*;
use crate::path::PathState;

const MS: Duration = Duration::from_millis(1);

fn pid(i: u8) -> PathId {
    PathId(i)
}

/// An active path with an srtt and a delivery rate (bytes/s).
fn path(i: u8, srtt: Duration, rate: f64) -> PathView {
    PathView {
        srtt: Some(srtt),
        delivery_rate: Some(rate),
        ..PathView::new(pid(i), PathState::Active)
    }
}

fn data(seq: u64) -> PacketMeta {
    PacketMeta {
        global_seq: seq,
        len: 1000,
        arrival: Time::ZERO,
        control: false,
    }
}

fn control() -> PacketMeta {
    PacketMeta {
        control: true,
        ..data(0)
    }
}

/// Selects `pkt`, reports the send, returns the path.
fn send(s: &mut Swtc, paths: &[PathView], pkt: &PacketMeta) -> PathId {
    match s.select(Time::ZERO, paths, pkt) {
        Selection::Send(id) => {
            s.on_sent(Time::ZERO, id, pkt);
            id
        }
        other => panic!("expected Send, got {other:?}"),
    }
}

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

// ---- formulas ------------------------------------------------------------------------------

#[test]
fn expected_delay_is_eq3() {
    // E(D) = w + r / (1 - p).
    assert!(approx(expected_delay(10 * MS, 40 * MS, 0.0), 0.050));
    assert!(approx(expected_delay(10 * MS, 40 * MS, 0.5), 0.090));
    assert!(approx(expected_delay(Duration::ZERO, 30 * MS, 0.25), 0.040));
    assert_eq!(expected_delay(MS, 40 * MS, 1.0), f64::INFINITY);
    assert!(approx(expected_delay(MS, Duration::ZERO, 1.0), 0.001));
}

#[test]
fn expected_delay_matches_the_series_of_eq2() {
    // Σ_j p^j (1-p) (w + (j+1) r), truncated far out.
    let (w, r, p) = (0.012, 0.030, 0.3_f64);
    let series: f64 = (0..200)
        .map(|j| p.powi(j) * (1.0 - p) * (w + f64::from(j + 1) * r))
        .sum();
    let closed = expected_delay(Duration::from_secs_f64(w), Duration::from_secs_f64(r), p);
    assert!(approx(series, closed), "{series} vs {closed}");
}

#[test]
fn drain_time_is_bytes_in_flight_over_delivery_rate() {
    let mut v = PathView {
        bytes_in_flight: 50_000,
        pair_rate: Some(5e6),
        ..path(0, 20 * MS, 1e6)
    };
    // Delivery rate (Westwood) first: 50 kB at 1 MB/s.
    assert_eq!(drain_time(&v), Some(50 * MS));
    // Without it, rate_estimate (here the packet-pair rate).
    v.delivery_rate = None;
    assert_eq!(drain_time(&v), Some(10 * MS));
    v.delivery_rate = Some(f64::NAN);
    assert_eq!(drain_time(&v), Some(10 * MS));
    // No rate at all: unknown, unless nothing is queued.
    v.pair_rate = None;
    v.delivery_rate = None;
    assert_eq!(drain_time(&v), None);
    v.bytes_in_flight = 0;
    assert_eq!(drain_time(&v), Some(Duration::ZERO));
}

// ---- choices -------------------------------------------------------------------------------

#[test]
fn higher_loss_is_avoided_when_delays_are_equal() {
    let mut s = Swtc::default();
    let paths = [
        PathView {
            loss_rate: 0.2,
            ..path(0, 30 * MS, 1e6)
        },
        PathView {
            loss_rate: 0.01,
            ..path(1, 30 * MS, 1e6)
        },
    ];
    assert_eq!(send(&mut s, &paths, &data(0)), pid(1));
    // E(D): 30 / 0.8 = 37.5 ms against 30 / 0.99 ms.
    assert!(approx(s.expected(&paths[0]).1, 0.0375));
    assert!(approx(s.expected(&paths[1]).1, 0.030 / 0.99));
}

#[test]
fn loss_trades_against_delay() {
    // 20 ms at 50 % loss costs 40 ms: a clean 35 ms path wins, a clean 45 ms path loses.
    let lossy = PathView {
        loss_rate: 0.5,
        ..path(0, 20 * MS, 1e6)
    };
    let paths = [lossy.clone(), path(1, 35 * MS, 1e6)];
    assert_eq!(send(&mut Swtc::default(), &paths, &data(0)), pid(1));
    let paths = [lossy, path(1, 45 * MS, 1e6)];
    assert_eq!(send(&mut Swtc::default(), &paths, &data(0)), pid(0));
}

#[test]
fn a_deep_queue_on_the_faster_path_sends_to_the_other() {
    // Path 0: srtt 20 ms, 1 MB/s. Empty, it wins over path 1 (srtt 50 ms, 10 MB/s).
    let fast_empty = path(0, 20 * MS, 1e6);
    let slow = path(1, 50 * MS, 10e6);
    assert_eq!(
        send(
            &mut Swtc::default(),
            &[fast_empty.clone(), slow.clone()],
            &data(0)
        ),
        pid(0)
    );
    // With 100 kB in flight, m_0 = 100 ms: E(D_0) = 100 + max(0, 20 - 100) = 100 ms, more
    // than E(D_1) = 50 ms.
    let fast_deep = PathView {
        bytes_in_flight: 100_000,
        ..fast_empty
    };
    let s = Swtc::default();
    assert!(approx(s.expected(&fast_deep).1, 0.100));
    assert!(approx(s.expected(&slow).1, 0.050));
    assert_eq!(
        send(&mut Swtc::default(), &[fast_deep, slow], &data(0)),
        pid(1)
    );
}

#[test]
fn queue_on_the_other_path_keeps_the_faster_one() {
    // A shallow queue on the fast path (10 kB at 1 MB/s: 10 ms) still beats the slow path.
    let fast = PathView {
        bytes_in_flight: 10_000,
        ..path(0, 20 * MS, 1e6)
    };
    let slow = PathView {
        bytes_in_flight: 10_000,
        ..path(1, 50 * MS, 10e6)
    };
    assert_eq!(send(&mut Swtc::default(), &[fast, slow], &data(0)), pid(0));
}

// ---- r smoothing ---------------------------------------------------------------------------

#[test]
fn r_is_smoothed_with_alpha_0_875() {
    assert_eq!(ALPHA, 0.875);
    assert_eq!(smooth(80 * MS, 160 * MS), 90 * MS);
    assert_eq!(smooth(80 * MS, 80 * MS), 80 * MS);
    assert_eq!(smooth(Duration::MAX, Duration::MAX), Duration::MAX);

    let mut s = Swtc::default();
    let mut v = path(0, 80 * MS, 1e6);
    let paths = |v: &PathView| [v.clone()];
    assert_eq!(s.smoothed_r(pid(0)), None);
    // First sample taken as is: r̂ = srtt - m = 80 - 0.
    send(&mut s, &paths(&v), &data(0));
    assert_eq!(s.smoothed_r(pid(0)), Some(80 * MS));
    // srtt 160 ms, 40 kB in flight at 1 MB/s (m = 40 ms): r̂ = 120 ms,
    // r̄ = 0.875 * 80 + 0.125 * 120 = 85 ms.
    v.srtt = Some(160 * MS);
    v.bytes_in_flight = 40_000;
    send(&mut s, &paths(&v), &data(1));
    assert_eq!(s.smoothed_r(pid(0)), Some(85 * MS));
    // E(D) = m + r̄ = 40 + 85 ms, from the smoothed r, not the fresh sample (120 ms).
    assert!(approx(s.expected(&v).1, 0.125));
    // Again: r̄ = 0.875 * 85 + 0.125 * 120 = 89.375 ms.
    send(&mut s, &paths(&v), &data(2));
    assert_eq!(s.smoothed_r(pid(0)), Some(Duration::from_micros(89_375)));
    // A sample below zero (m > srtt) counts as zero: r̄ = 0.875 * 89.375 = 78.203125 ms.
    v.bytes_in_flight = 1_000_000;
    send(&mut s, &paths(&v), &data(3));
    assert_eq!(s.smoothed_r(pid(0)), Some(Duration::from_nanos(78_203_125)));
}

#[test]
fn r_advances_once_per_data_packet_sent() {
    let mut s = Swtc::default();
    let v = path(0, 80 * MS, 1e6);
    send(&mut s, std::slice::from_ref(&v), &data(0));
    let w = PathView {
        srtt: Some(160 * MS),
        ..v
    };
    // select alone changes nothing.
    assert_eq!(
        s.select(Time::ZERO, std::slice::from_ref(&w), &data(1)),
        Selection::Send(pid(0))
    );
    assert_eq!(s.smoothed_r(pid(0)), Some(80 * MS));
    // A control datagram is no sample.
    s.on_sent(Time::ZERO, pid(0), &control());
    assert_eq!(s.smoothed_r(pid(0)), Some(80 * MS));
    // The data packet is; a second on_sent without a select adds nothing.
    s.on_sent(Time::ZERO, pid(0), &data(1));
    assert_eq!(s.smoothed_r(pid(0)), Some(90 * MS));
    s.on_sent(Time::ZERO, pid(0), &data(2));
    assert_eq!(s.smoothed_r(pid(0)), Some(90 * MS));
}

#[test]
fn smoothed_r_lags_a_jump_in_srtt() {
    // Path 0 carried data at srtt 20 ms; its srtt jumps to 60 ms. Its r̄ is 20 ms still, so
    // it keeps winning over a 40 ms path for a few packets, then the samples pull r̄ over.
    let mut s = Swtc::default();
    let p1 = path(1, 40 * MS, 1e6);
    assert_eq!(
        send(&mut s, &[path(0, 20 * MS, 1e6), p1.clone()], &data(0)),
        pid(0)
    );
    let paths = [path(0, 60 * MS, 1e6), p1];
    let picks: Vec<u8> = (1..10).map(|i| send(&mut s, &paths, &data(i)).0).collect();
    // r̄_0 before each pick: 20, 25, 29.375, 33.2, 36.6, 39.5 (< 40), then 42.0 ms (> 40).
    assert_eq!(picks, [0, 0, 0, 0, 0, 0, 1, 1, 1]);
}

// ---- ties, usability, missing estimates ----------------------------------------------------

#[test]
fn ties_go_to_the_lowest_id() {
    let mut s = Swtc::default();
    let paths = [
        path(2, 30 * MS, 1e6),
        path(3, 30 * MS, 1e6),
        path(5, 30 * MS, 2e6),
    ];
    assert_eq!(send(&mut s, &paths, &data(0)), pid(2));
    // Ids out of order in the slice: still the lowest.
    let paths = [path(4, 30 * MS, 1e6), path(1, 30 * MS, 1e6)];
    assert_eq!(send(&mut Swtc::default(), &paths, &data(0)), pid(1));
}

#[test]
fn unusable_paths_are_never_chosen() {
    let mut s = Swtc::default();
    let paths = [
        PathView {
            state: PathState::Probing,
            ..path(0, MS, 1e6)
        },
        PathView {
            cwnd_room: Some(0),
            ..path(1, MS, 1e6)
        },
        PathView {
            cwnd_room: Some(1),
            ..path(2, 100 * MS, 1e6)
        },
    ];
    assert_eq!(send(&mut s, &paths, &data(0)), pid(2));
    let none = [paths[0].clone(), paths[1].clone()];
    assert_eq!(s.select(Time::ZERO, &none, &data(1)), Selection::Wait(None));
    assert_eq!(s.select(Time::ZERO, &[], &data(1)), Selection::Wait(None));
}

#[test]
fn complete_estimates_come_first() {
    // Path 0: no srtt. Path 1: bytes in flight and no rate. Path 2: a slow but known path.
    let no_srtt = PathView {
        srtt: None,
        ..path(0, MS, 1e6)
    };
    let no_rate = PathView {
        delivery_rate: None,
        bytes_in_flight: 1000,
        ..path(1, MS, 1e6)
    };
    let known = path(2, 500 * MS, 1e6);
    let mut s = Swtc::default();
    assert_eq!(
        send(&mut s, &[no_srtt.clone(), no_rate.clone(), known], &data(0)),
        pid(2)
    );
    // Without a complete one: partial E(D), unknown terms as zero (0 < 1 ms).
    assert_eq!(send(&mut s, &[no_srtt, no_rate], &data(1)), pid(0));
}

#[test]
fn certain_loss_is_chosen_only_when_nothing_else_is_usable() {
    let dead = PathView {
        loss_rate: 1.0,
        ..path(0, MS, 1e6)
    };
    let paths = [dead.clone(), path(1, 900 * MS, 1e6)];
    assert_eq!(send(&mut Swtc::default(), &paths, &data(0)), pid(1));
    assert_eq!(send(&mut Swtc::default(), &[dead], &data(0)), pid(0));
    let nan = PathView {
        loss_rate: f64::NAN,
        ..path(0, 10 * MS, 1e6)
    };
    assert!(approx(Swtc::default().expected(&nan).1, 0.010));
}
