//! Quality-driven make-before-break handover (docs/protocol.md#handover, seed MMS §II-E):
//! a path whose link starts losing far more than the other's stops carrying data while it
//! still works, is probed meanwhile, and carries again once its loss has cleared; never
//! the last path.

mod support;

use std::time::Duration;

use plait_proto::path::{HandoverConfig, HandoverReason};
use plait_proto::sched::SchedulerKind;
use plait_proto::{Config, Event, PathId, Time};
use support::{Pair, lossless, steady};

const FADE_AT: Time = Time::from_millis(2000);
const CLEAR_AT: Time = Time::from_millis(6000);
const END: Time = Time::from_millis(12_000);

/// Round robin: a scheduler that does not price loss, so without handover the lossy path
/// keeps half the packets (the `plait` scheduler's loss pricing alone already moves a
/// light flow off it; handover works under any scheduler and also stops the probing
/// data a loss-pricing scheduler still sends there).
fn config(handover: bool) -> Config {
    Config {
        scheduler: SchedulerKind::RoundRobin,
        handover: HandoverConfig {
            enabled: handover,
            ..HandoverConfig::default()
        },
        ..Config::default()
    }
}

/// What side a did with path 0 in a run where it loses 20 % from `FADE_AT` to `CLEAR_AT`.
struct Outcome {
    /// (when, reason) of each handover event of a's path 0.
    events: Vec<(Time, Option<HandoverReason>)>,
    /// Inner packets a sent on path 0 in the second after the first handover (or after
    /// `FADE_AT + 1 s` when there was none) until `CLEAR_AT`.
    data_while_lossy: u64,
    /// Probes a sent on path 0 over the same span.
    probes_while_lossy: u64,
    /// Inner packets a sent on path 0 after the loss cleared.
    data_at_end: u64,
    /// Inner packets b delivered, of those a sent.
    delivered: usize,
    sent: u64,
}

fn run(handover: bool, cut_other: bool) -> Outcome {
    let mut pair = Pair::new(
        config(handover),
        config(handover),
        &[lossless(20.0, 20), lossless(20.0, 20)],
        &[None, None],
        5,
    );
    let mut source = steady(END);
    let mut events = Vec::new();
    let collect = |pair: &mut Pair, events: &mut Vec<(Time, Option<HandoverReason>)>| {
        for e in pair.take_events(0) {
            if let Event::Handover {
                path: PathId(0),
                reason,
            } = e
            {
                events.push((pair.now, reason));
            }
        }
    };
    if cut_other {
        // Early enough for path 1 to be down before the fade: until it is known down it
        // counts as another path, and path 0 would be handed over to it.
        pair.run_until(Time::from_millis(1000), &mut source);
        pair.cut_path(1);
    }
    pair.run_until(FADE_AT, &mut source);
    for dir in 0..2 {
        pair.set_link(dir, 0, |l| l.loss = 0.2);
    }
    let mut t = FADE_AT;
    let stats = |pair: &Pair| pair.a.path_stats(PathId(0)).expect("path 0");
    let mut from: Option<plait_proto::path::PathStats> = None;
    let mut until = None;
    while t < END {
        t += Duration::from_millis(10);
        pair.run_until(t, &mut source);
        collect(&mut pair, &mut events);
        let start = events
            .first()
            .map_or(FADE_AT + Duration::from_secs(1), |e| e.0);
        if from.is_none() && t >= start + Duration::from_secs(1) {
            from = Some(stats(&pair));
        }
        if t == CLEAR_AT {
            until = Some(stats(&pair));
            for dir in 0..2 {
                pair.set_link(dir, 0, |l| l.loss = 0.0);
            }
        }
    }
    let (from, until) = (from.expect("measured"), until.expect("measured"));
    let last = stats(&pair);
    Outcome {
        events,
        data_while_lossy: until.sent_data - from.sent_data,
        probes_while_lossy: until.probes_sent - from.probes_sent,
        data_at_end: last.sent_data - until.sent_data,
        delivered: pair.take_delivered(0).len(),
        sent: pair.a.stats().inner_sent,
    }
}

#[test]
fn a_path_losing_a_fifth_is_handed_over_and_back_once_clear() {
    let with = run(true, false);
    let without = run(false, false);
    println!(
        "handover: events {:?}; data on the lossy path {} (probes {}), after it cleared {}; \
         without: data on the lossy path {}",
        with.events,
        with.data_while_lossy,
        with.probes_while_lossy,
        with.data_at_end,
        without.data_while_lossy
    );
    let (at, reason) = with.events[0];
    assert_eq!(reason, Some(HandoverReason::Loss));
    assert!(
        at < FADE_AT + Duration::from_secs(2),
        "handed over {:?} after the fade",
        at.saturating_since(FADE_AT)
    );
    assert_eq!(
        with.data_while_lossy, 0,
        "no new data on a handed-over path"
    );
    assert!(
        with.probes_while_lossy > 10,
        "probed meanwhile: {}",
        with.probes_while_lossy
    );
    assert!(
        without.data_while_lossy > 100,
        "without handover the lossy path carries: {}",
        without.data_while_lossy
    );
    let back = with
        .events
        .iter()
        .find(|(t, r)| *t > CLEAR_AT && r.is_none())
        .expect("handed back after the loss cleared");
    assert!(back.0 < Time::from_millis(10_000), "back at {:?}", back.0);
    assert!(with.data_at_end > 0, "carries again");
    assert!(without.events.is_empty());
    assert!(with.delivered as u64 <= with.sent);
}

#[test]
fn the_last_path_is_never_handed_over() {
    let alone = run(true, true);
    assert!(
        alone.events.iter().all(|(_, r)| r.is_none()),
        "{:?}",
        alone.events
    );
    assert!(alone.data_while_lossy > 100, "{}", alone.data_while_lossy);
}

#[test]
fn a_weak_link_layer_signal_hands_a_path_over_until_it_recovers() {
    let mut pair = Pair::new(
        config(true),
        config(true),
        &[lossless(20.0, 20), lossless(20.0, 20)],
        &[None, None],
        6,
    );
    let mut source = steady(Time::from_millis(6000));
    pair.run_until(Time::from_millis(1000), &mut source);
    pair.a.set_link_signal(PathId(0), Some(0.1)).unwrap();
    assert!(pair.a.set_link_signal(PathId(7), Some(0.1)).is_err());
    pair.run_until(Time::from_millis(1100), &mut source);
    assert_eq!(
        pair.a.path_handover(PathId(0)),
        Some(HandoverReason::WeakSignal)
    );
    let before = pair.a.path_stats(PathId(0)).unwrap().sent_data;
    pair.run_until(Time::from_millis(2000), &mut source);
    // Packets already chosen (a round-robin position) may leave; nothing new.
    let during = pair.a.path_stats(PathId(0)).unwrap().sent_data - before;
    assert!(during <= 1, "{during} inner packets on a handed-over path");
    // Just above the bound is not enough: handed back a tenth of the scale above it.
    pair.a.set_link_signal(PathId(0), Some(0.25)).unwrap();
    pair.run_until(Time::from_millis(3500), &mut source);
    assert!(pair.a.path_handover(PathId(0)).is_some());
    pair.a.set_link_signal(PathId(0), Some(0.6)).unwrap();
    pair.run_until(Time::from_millis(4000), &mut source);
    assert!(pair.a.path_handover(PathId(0)).is_some(), "held for 1 s");
    pair.run_until(Time::from_millis(4700), &mut source);
    assert_eq!(pair.a.path_handover(PathId(0)), None);
    let after = pair.a.path_stats(PathId(0)).unwrap().sent_data;
    pair.run_until(Time::from_millis(5000), &mut source);
    assert!(pair.a.path_stats(PathId(0)).unwrap().sent_data > after + 100);
    assert_eq!(pair.a.stats().handovers, 1);
}

#[test]
fn two_paths_never_stand_by_together_and_an_idle_session_hands_back() {
    let mut pair = Pair::new(
        config(true),
        config(true),
        &[lossless(20.0, 20), lossless(20.0, 20)],
        &[None, None],
        8,
    );
    let mut source = steady(Time::from_millis(3000));
    pair.run_until(Time::from_millis(1000), &mut source);
    pair.a.set_link_signal(PathId(0), Some(0.1)).unwrap();
    pair.run_until(Time::from_millis(1100), &mut source);
    assert!(pair.a.path_handover(PathId(0)).is_some());
    // Path 0 clear but in its hold, path 1 weak now: never both standing by; path 0,
    // clear, is forced back at once and path 1 handed over (a swap, made before break).
    pair.a.set_link_signal(PathId(0), Some(0.6)).unwrap();
    pair.a.set_link_signal(PathId(1), Some(0.1)).unwrap();
    let mut t = Time::from_millis(1100);
    while t < Time::from_millis(2600) {
        t += Duration::from_millis(5);
        pair.run_until(t, &mut source);
        let both =
            pair.a.path_handover(PathId(0)).is_some() && pair.a.path_handover(PathId(1)).is_some();
        assert!(!both, "both paths standing by at {t:?}");
    }
    assert_eq!(pair.a.path_handover(PathId(0)), None);
    assert!(pair.a.path_handover(PathId(1)).is_some());
    // Traffic stops; path 1's signal recovers: handed back without a packet to send.
    pair.run_until(Time::from_millis(3200), &mut source);
    pair.a.set_link_signal(PathId(1), Some(0.6)).unwrap();
    let probes = pair.a.path_stats(PathId(1)).unwrap().probes_sent;
    pair.run_until(Time::from_millis(6000), &mut source);
    assert_eq!(
        pair.a.path_handover(PathId(1)),
        None,
        "handed back while idle"
    );
    let more = pair.a.path_stats(PathId(1)).unwrap().probes_sent - probes;
    assert!(
        more < 40,
        "{more} probes in 2.8 s: the 50 ms cadence stopped"
    );
}

/// A path poor for its past blackouts alone still carries for one failing now: path 1
/// goes down twice for longer than the hold (handed over for blackouts, its loss judged
/// afresh), then path 0 starts losing a fifth. Path 1
/// is swapped back and path 0 handed over for loss, and it stays so (no back and forth)
/// until its loss clears, though path 1 is still poor for its blackouts; and one handed
/// over for a weak signal waits out its hold next to it. (On the test bed
/// a clean path that stalled twice on a starved machine kept the lossy one carrying.)
#[test]
fn a_path_failing_now_is_handed_over_to_one_that_failed_before() {
    let mut pair = Pair::new(
        config(true),
        config(true),
        &[lossless(20.0, 20), lossless(20.0, 20)],
        &[None, None],
        9,
    );
    let mut source = steady(Time::from_millis(17_000));
    let set_loss = |pair: &mut Pair, path: usize, loss: f64| {
        for dir in 0..2 {
            pair.set_link(dir, path, |l| l.loss = loss);
        }
    };
    for start in [1000, 3000] {
        pair.run_until(Time::from_millis(start), &mut source);
        set_loss(&mut pair, 1, 1.0);
        pair.run_until(Time::from_millis(start + 1200), &mut source);
        set_loss(&mut pair, 1, 0.0);
    }
    pair.run_until(Time::from_millis(4600), &mut source);
    assert_eq!(
        pair.a.path_handover(PathId(1)),
        Some(HandoverReason::Blackouts)
    );
    let _ = pair.take_events(0);
    set_loss(&mut pair, 0, 0.2);
    let mut t = Time::from_millis(4600);
    let mut swapped_at = None;
    while t < Time::from_millis(8600) {
        t += Duration::from_millis(5);
        pair.run_until(t, &mut source);
        let (p0, p1) = (
            pair.a.path_handover(PathId(0)),
            pair.a.path_handover(PathId(1)),
        );
        assert!(p0.is_none() || p1.is_none(), "both standing by at {t:?}");
        if p0 == Some(HandoverReason::Loss) {
            swapped_at.get_or_insert(t);
        } else if let Some(at) = swapped_at {
            panic!("path 0 handed over at {at:?}, back at {t:?} while losing");
        }
    }
    let at = swapped_at.expect("path 0 handed over for loss");
    assert!(at < Time::from_millis(7000), "handed over at {at:?}");
    assert_eq!(pair.a.path_handover(PathId(1)), None, "path 1 carries");
    set_loss(&mut pair, 0, 0.0);
    pair.run_until(Time::from_millis(13_000), &mut source);
    assert_eq!(
        pair.a.path_handover(PathId(0)),
        None,
        "path 0 handed back once clear"
    );

    // Handed over for a weak signal next to path 1 (still poor for its blackouts), path 0
    // waits out its hold once the signal is back: not forced back at once.
    pair.a.set_link_signal(PathId(0), Some(0.1)).unwrap();
    pair.run_until(Time::from_millis(14_500), &mut source);
    assert_eq!(
        pair.a.path_handover(PathId(0)),
        Some(HandoverReason::WeakSignal)
    );
    pair.a.set_link_signal(PathId(0), Some(0.6)).unwrap();
    pair.run_until(Time::from_millis(15_400), &mut source);
    assert_eq!(
        pair.a.path_handover(PathId(0)),
        Some(HandoverReason::WeakSignal),
        "clear, but within its hold"
    );
    pair.run_until(Time::from_millis(17_000), &mut source);
    assert_eq!(
        pair.a.path_handover(PathId(0)),
        None,
        "handed back after it"
    );
}
