//! Scripted ACK and loss sequences through [`PathCongestion`]: recovery periods, undo,
//! persistent congestion, and each controller's window after them.

use std::time::Duration;

use super::*;

const MSS: u64 = 1200;

fn acked(bytes: u64) -> Acked {
    Acked {
        bytes,
        srtt: Duration::from_millis(50),
        min_rtt: Duration::from_millis(40),
        bytes_in_flight: 0,
        app_limited: false,
        newest_sent: None,
        standing_queue: false,
        queue_delay_seen: Some(Duration::ZERO),
    }
}

fn alone(paths: &mut Vec<CoupledPath>, window: u64) -> Coupling<'_> {
    paths.clear();
    paths.push(CoupledPath {
        id: PathId(0),
        window,
        srtt: Some(Duration::from_millis(50)),
        usable: true,
        wants_drain_check: false,
    });
    Coupling {
        this: PathId(0),
        paths,
    }
}

fn ms(t: u64) -> Time {
    Time::from_millis(t)
}

#[test]
fn newreno_slow_start_then_halving_once_per_recovery_period() {
    let mut buf = Vec::new();
    let mut cc = PathCongestion::new(CongestionKind::NewReno, MSS);
    assert_eq!(cc.window(), 10 * MSS);
    // Slow start: the window grows by the bytes acknowledged.
    cc.on_ack(ms(50), &acked(10 * MSS), 0, &alone(&mut buf, 12_000));
    assert_eq!(cc.window(), 20 * MSS);
    // A loss of a datagram sent at 60 ms, found at 100 ms: halve.
    cc.on_lost(ms(100), 1, ms(60), u64::MAX, &alone(&mut buf, 24_000));
    assert_eq!(cc.window(), 10 * MSS);
    // More losses of datagrams sent before the period began: no second cut.
    cc.on_lost(ms(110), 3, ms(90), u64::MAX, &alone(&mut buf, 12_000));
    assert_eq!(cc.window(), 10 * MSS);
    assert_eq!(cc.counters(), (1, 0));
    // A datagram sent after 100 ms is lost: a new period, a new cut.
    cc.on_lost(ms(200), 1, ms(150), u64::MAX, &alone(&mut buf, 12_000));
    assert_eq!(cc.window(), 5 * MSS);
    assert_eq!(cc.counters(), (2, 0));
}

#[test]
fn a_capped_newreno_halves_the_flight_at_the_loss_not_the_window_the_cap_lowered() {
    // Slow start to 100 datagrams, 90 of them in flight when the cap (as `adaptive`'s
    // queue cap after its model's start-up) falls to 50.
    let mut cc = NewReno::new(MSS);
    let none = Coupling {
        this: PathId(0),
        paths: &[],
    };
    cc.on_ack(ms(10), &acked(90 * MSS), &none);
    assert_eq!(cc.window(), 100 * MSS);
    cc.limit(50 * MSS);
    assert_eq!(cc.window(), 50 * MSS, "the cap bounds the window used");
    // The losses of that flight: half of its 90 datagrams, not of the cap's 50.
    cc.on_flight_at_loss(90 * MSS);
    cc.on_congestion_event(ms(20), &none);
    assert_eq!(cc.ssthresh(), 45 * MSS);
    assert_eq!(cc.window(), 45 * MSS);
    // A lower cap bounds the window used but does not shrink the own window (`adaptive`
    // sets one at every ACK), and under it the own window does not grow: it is already
    // past twice the cap. In avoidance a window of ACKs would have added a datagram.
    cc.limit(10 * MSS);
    assert_eq!((cc.window(), cc.own_window()), (10 * MSS, 45 * MSS));
    cc.on_ack(ms(30), &acked(100 * MSS), &none);
    assert_eq!(cc.own_window(), 45 * MSS);
    // The cap comes back: the own window is the window used, and grows again.
    cc.limit(100 * MSS);
    assert_eq!(cc.window(), 45 * MSS);
    cc.on_ack(ms(40), &acked(45 * MSS), &none);
    assert_eq!(cc.window(), 46 * MSS);
    // Lifting a cap leaves the own window within twice the last one.
    cc.limit(10 * MSS);
    cc.unlimit();
    assert_eq!((cc.window(), cc.own_window()), (20 * MSS, 20 * MSS));
}

#[test]
fn under_a_cap_slow_start_grows_the_own_window_to_twice_the_cap() {
    let mut cc = NewReno::new(MSS);
    let none = Coupling {
        this: PathId(0),
        paths: &[],
    };
    cc.limit(15 * MSS);
    assert_eq!(cc.window(), 10 * MSS, "the initial window, under the cap");
    // Slow start: 10 + 30 datagrams, held at twice the cap.
    cc.on_ack(ms(10), &acked(30 * MSS), &none);
    assert_eq!((cc.window(), cc.own_window()), (15 * MSS, 30 * MSS));
    cc.on_ack(ms(20), &acked(30 * MSS), &none);
    assert_eq!(cc.own_window(), 30 * MSS);
    // Uncapped, the own window is the window used and slow start goes on.
    cc.unlimit();
    assert_eq!(cc.window(), 30 * MSS);
    cc.on_ack(ms(30), &acked(30 * MSS), &none);
    assert_eq!(cc.window(), 60 * MSS);
}

#[test]
fn newreno_congestion_avoidance_adds_one_datagram_per_window() {
    let mut buf = Vec::new();
    let mut cc = PathCongestion::new(CongestionKind::NewReno, MSS);
    cc.on_lost(ms(10), 1, ms(5), u64::MAX, &alone(&mut buf, 12_000));
    let w = cc.window();
    assert_eq!(w, 5 * MSS);
    cc.on_ack(ms(20), &acked(w - 1), 0, &alone(&mut buf, w));
    assert_eq!(cc.window(), w, "not a whole window yet");
    cc.on_ack(ms(21), &acked(1), 0, &alone(&mut buf, w));
    assert_eq!(cc.window(), w + MSS);
    // Absurd counts saturate the avoidance credit (found by the controllers' proptest
    // through `adaptive`): one datagram more per ACK, no overflow.
    cc.on_ack(ms(22), &acked(u64::MAX), 0, &alone(&mut buf, w));
    cc.on_ack(ms(23), &acked(u64::MAX), 0, &alone(&mut buf, w));
    assert_eq!(cc.window(), w + 3 * MSS);
}

#[test]
fn app_limited_acks_do_not_grow_the_window() {
    let mut buf = Vec::new();
    let mut cc = PathCongestion::new(CongestionKind::NewReno, MSS);
    let a = Acked {
        app_limited: true,
        newest_sent: None,
        standing_queue: false,
        queue_delay_seen: Some(Duration::ZERO),
        ..acked(10 * MSS)
    };
    cc.on_ack(ms(50), &a, 0, &alone(&mut buf, 12_000));
    assert_eq!(cc.window(), 10 * MSS);
}

#[test]
fn spurious_loss_undoes_the_cut() {
    let mut buf = Vec::new();
    let mut cc = PathCongestion::new(CongestionKind::NewReno, MSS);
    cc.on_ack(ms(50), &acked(10 * MSS), 0, &alone(&mut buf, 12_000));
    cc.on_lost(ms(100), 2, ms(60), u64::MAX, &alone(&mut buf, 24_000));
    assert_eq!(cc.window(), 10 * MSS);
    // One of the two "lost" datagrams arrives: not yet proof.
    cc.on_ack(ms(105), &acked(0), 1, &alone(&mut buf, 12_000));
    assert_eq!(cc.window(), 10 * MSS);
    // The other too: the cut was spurious (ADDR undo).
    cc.on_ack(ms(106), &acked(0), 1, &alone(&mut buf, 12_000));
    assert_eq!(cc.window(), 20 * MSS);
    assert_eq!(cc.counters(), (1, 1));
}

#[test]
fn persistent_congestion_collapses_to_the_minimum() {
    let mut cc = PathCongestion::new(CongestionKind::NewReno, MSS);
    cc.on_path_down(ms(1000));
    assert_eq!(cc.window(), min_window(MSS));
    // Losses of what was sent before going down do not cut below it.
    let mut buf = Vec::new();
    cc.on_lost(ms(1001), 5, ms(900), u64::MAX, &alone(&mut buf, 2400));
    assert_eq!(cc.window(), min_window(MSS));
}

#[test]
fn pacing_rate_is_a_quarter_above_window_per_rtt() {
    let cc = PathCongestion::new(CongestionKind::NewReno, MSS);
    assert_eq!(cc.pacing_rate(None), None);
    let r = cc.pacing_rate(Some(Duration::from_millis(100))).unwrap();
    assert!((r - 1.25 * 12_000.0 / 0.1).abs() < 1e-6, "{r}");
}

#[test]
fn every_kind_has_a_name() {
    for k in CongestionKind::ALL {
        assert_eq!(CongestionKind::from_name(k.name()), Some(*k));
        // `adaptive` adds the controller it runs: "adaptive (newreno)".
        assert!(AnyController::new(*k, MSS).name().starts_with(k.name()));
    }
    assert_eq!(CongestionKind::from_name("vegas"), None);
}

#[test]
fn newreno_halves_the_flight_not_a_window_it_did_not_use() {
    // RFC 5681 eq. 4: with 300 datagrams of window but 150 in flight when the loss is
    // found, the window becomes 75 datagrams, not 150.
    let mut buf = Vec::new();
    let mut cc = PathCongestion::new(CongestionKind::NewReno, MSS);
    for k in 0..29 {
        cc.on_ack(ms(10 + k), &acked(10 * MSS), 0, &alone(&mut buf, 12_000));
    }
    assert_eq!(cc.window(), 300 * MSS);
    cc.on_lost(ms(100), 1, ms(90), 150 * MSS, &alone(&mut buf, 300 * MSS));
    assert_eq!(cc.window(), 75 * MSS);
    // An undo restores the window as it was, unused part included.
    cc.on_ack(ms(101), &acked(0), 1, &alone(&mut buf, 75 * MSS));
    assert_eq!(cc.window(), 300 * MSS);
}

#[test]
fn a_path_passes_on_its_controllers_wish_for_a_drain_check() {
    // The default controller at 10 Mbit/s, then 8 from 3 s: its model's rate fell.
    let mut buf = Vec::new();
    let mut cc = PathCongestion::new(CongestionKind::Adaptive, MSS);
    for t in 1..5_000 {
        let bytes = if t < 3_000 { 1_250 } else { 1_000 };
        let ack = Acked {
            srtt: Duration::from_millis(20),
            min_rtt: Duration::from_millis(20),
            bytes_in_flight: cc.window(),
            ..acked(bytes)
        };
        let window = cc.window();
        cc.on_ack(ms(t), &ack, 0, &alone(&mut buf, window));
    }
    assert!(cc.wants_drain_check(ms(4_999)));
    assert!(!PathCongestion::new(CongestionKind::Adaptive, MSS).wants_drain_check(ms(1)));
}
