//! A path that fails silently (docs/protocol.md#path-states, "suspect"; #repair, "a path
//! gone down"): new data leaves it one RTO after its last answer, well before it is
//! declared down, and with repair on, the inner packets it took down with it are sent again
//! on the other path, so the receiver delivers every packet exactly once.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use plait_proto::path::{LivenessConfig, PathState};
use plait_proto::sched::SchedulerKind;
use plait_proto::{Config, Event, PathId, Time};
use support::{Pair, lossless, steady};

const BLACKHOLE_AT: Time = Time::from_millis(2000);
const SEND_UNTIL: Time = Time::from_millis(3000);

struct Outcome {
    /// When path 0's last DATA left a (the steady source sends packet `i` at 200 + i ms).
    last_data_on_path0: Time,
    /// When a declared path 0 down.
    down_at: Time,
    /// Source indices b delivered, and how many deliveries there were.
    delivered: BTreeSet<u64>,
    deliveries: usize,
    repairs_on_down: u64,
}

fn run(repair: bool) -> Outcome {
    let config = Config {
        scheduler: SchedulerKind::RoundRobin,
        repair,
        liveness: LivenessConfig {
            fast_failover: true,
            ..LivenessConfig::default()
        },
        ..Config::default()
    };
    // 50 ms each way: a 100 ms round trip, so one RTO (about 130 ms) and the down bound
    // (about 260 ms) are far apart.
    let mut pair = Pair::new(
        config.clone(),
        config,
        &[lossless(20.0, 50), lossless(20.0, 50)],
        &[None, None],
        11,
    );
    let mut source = steady(SEND_UNTIL);
    pair.run_until(BLACKHOLE_AT, &mut source);
    pair.take_events(0);
    pair.blackhole[0][0] = true;
    pair.blackhole[1][0] = true;
    let mut down_at = None;
    let mut t = BLACKHOLE_AT;
    while t < Time::from_millis(5000) {
        t += Duration::from_millis(5);
        pair.run_until(t, &mut source);
        let down = pair.take_events(0).into_iter().any(|e| {
            matches!(
                e,
                Event::PathState {
                    path: PathId(0),
                    to: PathState::Down,
                    ..
                }
            )
        });
        if down && down_at.is_none() {
            down_at = Some(t);
        }
    }
    let last = *pair.lost_sources[0]
        .last()
        .expect("data was lost on path 0");
    let delivered = pair.take_delivered(0);
    Outcome {
        last_data_on_path0: Time::from_millis(200 + last),
        down_at: down_at.expect("path 0 went down"),
        deliveries: delivered.len(),
        delivered: delivered
            .iter()
            .map(|(_, p, _)| u64::from_be_bytes(p[..8].try_into().unwrap()))
            .collect(),
        repairs_on_down: pair.a.stats().repairs_on_down,
    }
}

#[test]
fn new_data_leaves_a_silent_path_one_rto_after_its_last_answer_before_it_is_down() {
    let o = run(false);
    let moved = o.last_data_on_path0.saturating_since(BLACKHOLE_AT);
    let down = o.down_at.saturating_since(BLACKHOLE_AT);
    eprintln!("data left path 0 {moved:?} after the blackhole; down after {down:?}");
    // The last answer came about one round trip before the blackhole took effect for the
    // acknowledgements; one RTO later the path is suspect.
    assert!(
        moved < Duration::from_millis(180),
        "new data stayed on the silent path for {moved:?}"
    );
    assert!(
        down > moved + Duration::from_millis(80),
        "the path was declared down ({down:?}) not long after data left it ({moved:?})"
    );
}

#[test]
fn what_a_path_took_down_with_it_is_repaired_on_the_other() {
    let sent = SEND_UNTIL.as_nanos() / 1_000_000 - 200;
    let without = run(false);
    let with = run(true);
    eprintln!(
        "delivered without repair {} of {sent}, with {} ({} deliveries, {} repaired on down)",
        without.delivered.len(),
        with.delivered.len(),
        with.deliveries,
        with.repairs_on_down
    );
    assert!(
        without.delivered.len() < sent as usize,
        "the blackhole lost packets"
    );
    assert_eq!(without.repairs_on_down, 0);
    assert!(with.repairs_on_down > 0);
    let missing: Vec<u64> = (0..sent).filter(|i| !with.delivered.contains(i)).collect();
    assert!(missing.is_empty(), "missing {missing:?}");
    assert_eq!(with.deliveries, sent as usize, "each exactly once");
}
