//! A path removed while packets are in flight on it (docs/protocol.md#repair, "a path
//! removed"; docs/protocol.md#binding): the tunnel's client removes a path whose link went
//! away at once, and the server removes it when the withdrawal reaches it, one way later.
//! Whatever either side still had in flight on the path is sent again on the other, so
//! with repair on every inner packet of both directions is delivered exactly once; without
//! repair the removal loses what was on the path. Two cases: both paths carry data (round
//! robin), and only the removed one does (min-RTT on a faster path 0), so the path left has
//! carried nothing but acknowledgements and knows no rate of its own (the tunnel's case:
//! the repairs must not be paced at what that path delivered, docs/protocol.md#repair).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use plait_proto::sched::SchedulerKind;
use plait_proto::{Config, PathId, Time};
use support::{Pair, lossless, paced};

/// When the link under path 0 goes (side a removes the path then).
const CUT_AT: Time = Time::from_millis(1500);
/// Side b hears of it one way later (the withdrawal travels on path 1).
const ONE_WAY: Duration = Duration::from_millis(30);
/// Both sides send one packet per millisecond from 200 ms until then.
const SEND_UNTIL: Time = Time::from_millis(2500);
/// Run on until every repair has had time to arrive.
const END: Time = Time::from_millis(4000);

struct Outcome {
    /// Per direction (0: a to b, 1: b to a): source index -> deliveries.
    delivered: [BTreeMap<u64, usize>; 2],
    /// Per direction: the packets the cut took with it.
    lost_on_link: [usize; 2],
    /// Per side: the session's `repairs_on_removal`.
    repaired: [u64; 2],
    /// Per direction: the longest time between two deliveries after the cut.
    longest_gap: [Duration; 2],
}

fn run(repair: bool, scheduler: SchedulerKind) -> Outcome {
    let config = Config {
        scheduler,
        repair,
        ..Config::default()
    };
    // 20 Mbit/s, 30 ms each way on path 0: at 8 Mbit/s per direction, 15 to 30 packets
    // are in flight on it each way when it goes. Path 1 is slower (40 ms), so min-RTT
    // leaves it to acknowledgements; round robin gives it half the packets anyway.
    let mut pair = Pair::new(
        config.clone(),
        config,
        &[lossless(20.0, 30), lossless(20.0, 40)],
        &[None, None],
        23,
    );
    let mut source = paced(&[0, 1], 1, SEND_UNTIL);
    pair.run_until(CUT_AT, &mut source);
    pair.cut_path(0);
    pair.a
        .remove_path(pair.now, PathId(0))
        .expect("a has path 0");
    pair.drive_now();
    pair.run_until(CUT_AT + ONE_WAY, &mut source);
    pair.b
        .remove_path(pair.now, PathId(0))
        .expect("b has path 0");
    pair.drive_now();
    pair.run_until(END, &mut source);
    let mut delivered = [BTreeMap::new(), BTreeMap::new()];
    let mut longest_gap = [Duration::ZERO; 2];
    for (dir, map) in delivered.iter_mut().enumerate() {
        let mut last: Option<Time> = None;
        for (t, p, _) in pair.take_delivered(dir) {
            *map.entry(u64::from_be_bytes(p[..8].try_into().unwrap()))
                .or_insert(0) += 1;
            if t >= CUT_AT && t <= SEND_UNTIL {
                if let Some(l) = last {
                    longest_gap[dir] = longest_gap[dir].max(t.saturating_since(l));
                }
                last = Some(t);
            } else if t < CUT_AT {
                last = Some(t);
            }
        }
    }
    Outcome {
        delivered,
        lost_on_link: [pair.lost_sources[0].len(), pair.lost_sources[1].len()],
        repaired: [
            pair.a.stats().repairs_on_removal,
            pair.b.stats().repairs_on_removal,
        ],
        longest_gap,
    }
}

fn check(scheduler: SchedulerKind) {
    let sent = (SEND_UNTIL.as_nanos() / 1_000_000 - 200) as usize;
    let with = run(true, scheduler);
    let without = run(false, scheduler);
    for dir in 0..2 {
        let missing: Vec<u64> = (0..sent as u64)
            .filter(|i| !with.delivered[dir].contains_key(i))
            .collect();
        let twice = with.delivered[dir].values().filter(|n| **n > 1).count();
        eprintln!(
            "{scheduler:?}, direction {dir}: {} on the link when it went; with repair {} of {sent} delivered \
             ({twice} twice), longest gap {:?}; without repair {} delivered",
            with.lost_on_link[dir],
            with.delivered[dir].len(),
            with.longest_gap[dir],
            without.delivered[dir].len(),
        );
        assert!(
            with.lost_on_link[dir] > 0,
            "direction {dir}: nothing was in flight on the removed path"
        );
        assert!(
            without.delivered[dir].len() < sent,
            "direction {dir}: without repair the removal lost nothing"
        );
        assert!(missing.is_empty(), "direction {dir}: missing {missing:?}");
        assert_eq!(twice, 0, "direction {dir}: delivered twice");
        // Generous: the repairs leave within a round trip of the removal (60 ms here).
        assert!(
            with.longest_gap[dir] < Duration::from_millis(200),
            "direction {dir}: a gap of {:?}",
            with.longest_gap[dir]
        );
    }
    assert!(
        with.repaired[0] > 0 && with.repaired[1] > 0,
        "{:?}",
        with.repaired
    );
    assert_eq!(without.repaired, [0, 0]);
}

#[test]
fn a_path_removed_with_packets_in_flight_loses_none_of_them() {
    check(SchedulerKind::RoundRobin);
}

#[test]
fn a_removed_path_s_packets_reach_a_path_that_carried_only_acknowledgements() {
    check(SchedulerKind::MinRtt);
}
