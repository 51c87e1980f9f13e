//! Backup paths (docs/protocol.md#backup): a path marked backup carries no data while
//! another path is usable, and takes over when none is.

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
}
