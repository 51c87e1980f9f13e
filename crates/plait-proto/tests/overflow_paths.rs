//! Overflow paths (docs/protocol.md#overflow): a path marked overflow (a metered link)
//! carries only the load the other usable paths cannot, and everything when none of them
//! is usable. With `plait` (the default scheduler) the excess spills onto it; every other
//! scheduler leaves it as a backup.

mod support;

use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use plait_proto::{Config, PathId, Time};
use support::{Pair, lossless as link, paced};

/// Inner packets side a sent on each path so far.
fn data_sent(pair: &Pair, paths: usize) -> Vec<u64> {
    (0..paths)
        .map(|i| {
            pair.a
                .path_stats(PathId(i as u8))
                .map_or(0, |s| s.sent_data)
        })
        .collect()
}

/// Path 0 a primary of `primary_mbit`, path 1 an overflow path of 40 Mbit/s and a shorter
/// delay (without the role, the scheduler would prefer it).
fn pair(scheduler: SchedulerKind, primary_mbit: f64, seed: u64) -> Pair {
    let config = Config {
        reorder: ReorderKind::Bmp,
        scheduler,
        ..Config::default()
    };
    let mut pair = Pair::new(
        config.clone(),
        config,
        &[link(primary_mbit, 20), link(40.0, 10)],
        &[None, None],
        seed,
    );
    for s in [&mut pair.a, &mut pair.b] {
        s.set_path_overflow(Time::ZERO, PathId(1), true).unwrap();
    }
    pair
}

#[test]
fn under_light_load_the_overflow_path_carries_no_data() {
    // 8 Mbit/s of inner packets on a 20 Mbit/s primary.
    let mut pair = pair(SchedulerKind::Plait, 20.0, 3);
    pair.run_until(
        Time::from_millis(4000),
        paced(&[0], 1, Time::from_millis(4000)),
    );
    let sent = data_sent(&pair, 2);
    assert!(sent[0] > 3500, "{sent:?}");
    assert_eq!(sent[1], 0, "the overflow path carried data: {sent:?}");
    // Probes and ACKs only on the overflow link.
    let bytes = pair.link_delivered_bytes(0);
    assert!(bytes[1] * 100 < bytes[0], "{bytes:?}");
}

#[test]
fn above_the_primary_rate_the_overflow_path_carries_the_excess() {
    // 16 Mbit/s of inner packets on a 10 Mbit/s primary: about 6 Mbit/s must spill.
    let mut pair = pair(SchedulerKind::Plait, 10.0, 5);
    let until = Time::from_millis(5000);
    pair.run_until(until, paced(&[0], 2, until));
    pair.run_until(Time::from_millis(6000), |_| None);
    let sent = data_sent(&pair, 2);
    let offered = 2 * 4800;
    let delivered = pair.take_delivered(0).len() as u64;
    assert!(
        delivered * 100 >= offered * 99,
        "delivered {delivered} of {offered}: {sent:?}"
    );
    // The primary stays nearly full (10 Mbit/s is about 1.2 of these packets a ms with
    // plait's and UDP's overheads: at most about 5,800 in 4.8 s), the overflow path takes
    // the rest.
    let primary_mbit = sent[0] as f64 * 8000.0 / 4.8 / 1e6;
    assert!(
        primary_mbit > 8.5,
        "primary carried {primary_mbit:.1} Mbit/s of inner data: {sent:?}"
    );
    assert!(
        sent[1] > offered / 4 && sent[1] < offered / 2,
        "the overflow path carried {} of {offered}: {sent:?}",
        sent[1]
    );
}

#[test]
fn when_the_primary_fails_the_overflow_path_carries_everything() {
    let mut pair = pair(SchedulerKind::Plait, 20.0, 7);
    pair.run_until(
        Time::from_millis(2000),
        paced(&[0], 1, Time::from_millis(8000)),
    );
    let before = data_sent(&pair, 2);
    assert_eq!(before[1], 0, "{before:?}");
    pair.blackhole[0][0] = true;
    pair.blackhole[1][0] = true;
    pair.run_until(
        Time::from_millis(5000),
        paced(&[0], 1, Time::from_millis(8000)),
    );
    let after = data_sent(&pair, 2);
    // Down within a second or so; then about a packet a ms on the overflow path.
    assert!(
        after[1] - before[1] > 1800,
        "the overflow path took over: {before:?} -> {after:?}"
    );
}

#[test]
fn other_schedulers_leave_an_overflow_path_as_a_backup() {
    for kind in [SchedulerKind::Edpf, SchedulerKind::MinRtt] {
        let mut pair = pair(kind, 10.0, 9);
        pair.run_until(
            Time::from_millis(3000),
            paced(&[0], 2, Time::from_millis(3000)),
        );
        let sent = data_sent(&pair, 2);
        assert!(sent[0] > 0, "{}: {sent:?}", kind.name());
        assert_eq!(sent[1], 0, "{}: {sent:?}", kind.name());
    }
}

#[test]
fn an_overflow_backup_ranks_after_primaries_and_unknown_paths_are_refused() {
    let mut pair = pair(SchedulerKind::Plait, 10.0, 11);
    for s in [&mut pair.a, &mut pair.b] {
        // A backup role wins: the path now spills nothing while the primary is usable.
        s.set_path_backup(Time::ZERO, PathId(1), true).unwrap();
    }
    pair.run_until(
        Time::from_millis(3000),
        paced(&[0], 2, Time::from_millis(3000)),
    );
    let sent = data_sent(&pair, 2);
    assert_eq!(sent[1], 0, "{sent:?}");
    assert!(
        pair.a
            .set_path_overflow(Time::ZERO, PathId(5), true)
            .is_err()
    );
    assert!(
        pair.a
            .set_path_overflow(Time::ZERO, PathId(200), true)
            .is_err()
    );
}
