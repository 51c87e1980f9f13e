//! Backup paths (docs/protocol.md#backup): a path marked backup carries no data while
//! another path is usable, and takes over when none is. Priorities
//! (docs/protocol.md#priority) order paths within a class the same way.

mod support;

use plait_proto::reorder::ReorderKind;
use plait_proto::{Config, PathId, Time};
use support::{Pair, lossless as link, steady};

#[test]
fn a_backup_path_carries_nothing_while_the_primary_works_then_takes_over() {
    let config = Config {
        reorder: ReorderKind::Bmp,
        ..Config::default()
    };
    // Path 1 is the faster one: without the role, the scheduler would use it most.
    let mut pair = Pair::new(
        config.clone(),
        config,
        &[link(20.0, 20), link(40.0, 10)],
        &[None, None],
        5,
    );
    for s in [&mut pair.a, &mut pair.b] {
        s.set_path_backup(Time::ZERO, PathId(1), true).unwrap();
    }
    pair.run_until(Time::from_millis(3000), steady(Time::from_millis(10_000)));
    let before = pair.link_delivered_bytes(0);
    let delivered = pair.take_delivered(0).len();
    assert!(delivered > 2500, "{delivered}");
    // Probes and acknowledgements only: under 1 % of what the primary carried.
    assert!(
        before[1] * 100 < before[0],
        "the backup carried data while the primary worked: {before:?}"
    );

    // The primary fails silently; the backup takes over once it is declared down.
    pair.blackhole[0][0] = true;
    pair.blackhole[1][0] = true;
    pair.run_until(Time::from_millis(6000), steady(Time::from_millis(10_000)));
    let after = pair.link_delivered_bytes(0);
    let over_backup = after[1] - before[1];
    assert!(
        over_backup > 1_500_000,
        "the backup took over: {over_backup} bytes in 3 s"
    );

    // The primary is back: the backup stands by again.
    pair.blackhole[0][0] = false;
    pair.blackhole[1][0] = false;
    pair.run_until(Time::from_millis(8000), steady(Time::from_millis(10_000)));
    let mid = pair.link_delivered_bytes(0);
    pair.run_until(Time::from_millis(10_000), steady(Time::from_millis(10_000)));
    let end = pair.link_delivered_bytes(0);
    assert!(
        (end[1] - mid[1]) * 100 < end[0] - mid[0],
        "the backup stood by again: {mid:?} -> {end:?}"
    );
}

/// Three primaries: path 0 and 1 at priority 0, path 2 (the fastest) at priority 1. The
/// session runs on its preferred subset (0 and 1); path 2 takes over only when both are
/// gone, and a backup at priority 0 still ranks after it.
#[test]
fn the_session_runs_on_its_preferred_subset_and_falls_back_in_rank_order() {
    let config = Config {
        reorder: ReorderKind::Bmp,
        ..Config::default()
    };
    let mut pair = Pair::new(
        config.clone(),
        config,
        &[
            link(20.0, 20),
            link(20.0, 20),
            link(40.0, 10),
            link(40.0, 10),
        ],
        &[None, None, None, None],
        7,
    );
    for s in [&mut pair.a, &mut pair.b] {
        s.set_path_priority(Time::ZERO, PathId(2), 1).unwrap();
        s.set_path_backup(Time::ZERO, PathId(3), true).unwrap();
        // Clamped to the largest priority, not refused.
        s.set_path_priority(Time::ZERO, PathId(1), 200).unwrap();
        s.set_path_priority(Time::ZERO, PathId(1), 0).unwrap();
    }
    pair.run_until(Time::from_millis(3000), steady(Time::from_millis(12_000)));
    let first = pair.link_delivered_bytes(0);
    // The load fits on one path: the scheduler may leave the other preferred one idle.
    assert!(first[0] + first[1] > 2_000_000, "{first:?}");
    for standby in [2, 3] {
        assert!(
            first[standby] * 100 < first[0] + first[1],
            "path {standby} carried data while the preferred subset worked: {first:?}"
        );
    }

    // The preferred subset fails silently: the priority-1 primary takes over, the backup
    // still stands by.
    for p in [0, 1] {
        pair.blackhole[0][p] = true;
        pair.blackhole[1][p] = true;
    }
    pair.run_until(Time::from_millis(6000), steady(Time::from_millis(12_000)));
    let second = pair.link_delivered_bytes(0);
    let over = |i: usize| second[i] - first[i];
    assert!(over(2) > 1_500_000, "path 2 took over: {second:?}");
    assert!(
        over(3) * 100 < over(2),
        "the backup stood by while a primary worked: {first:?} -> {second:?}"
    );

    // Path 2 fails too: the backup carries.
    pair.blackhole[0][2] = true;
    pair.blackhole[1][2] = true;
    pair.run_until(Time::from_millis(9000), steady(Time::from_millis(12_000)));
    let third = pair.link_delivered_bytes(0);
    assert!(
        third[3] - second[3] > 1_500_000,
        "the backup took over: {second:?} -> {third:?}"
    );
}

#[test]
fn unknown_paths_are_refused() {
    let config = Config {
        ..Config::default()
    };
    let mut pair = Pair::new(config.clone(), config, &[link(10.0, 10)], &[None], 1);
    assert!(pair.a.set_path_backup(Time::ZERO, PathId(3), true).is_err());
    assert!(
        pair.a
            .set_path_backup(Time::ZERO, PathId(200), true)
            .is_err()
    );
    assert!(pair.a.set_path_priority(Time::ZERO, PathId(3), 1).is_err());
}
