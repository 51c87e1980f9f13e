//! Unit tests of [`MptcpDefault`]: linger-time choice and the head-of-line check.

use std::time::Duration;

use super::*;
use crate::path::PathState;

const MS: Duration = Duration::from_millis(1);

/// An active path with a rate (bytes/s), smoothed RTT and bytes in flight.
fn path(i: u8, rate: Option<f64>, srtt: Option<Duration>, in_flight: u64) -> PathView {
    PathView {
        pair_rate: rate,
        srtt,
        bytes_in_flight: in_flight,
        ..PathView::new(PathId(i), PathState::Active)
    }
}

fn select(paths: &[PathView]) -> Selection {
    let pkt = PacketMeta {
        global_seq: 0,
        len: 1000,
        arrival: Time::ZERO,
        control: false,
    };
    MptcpDefault::default().select(Time::ZERO, paths, &pkt)
}

#[test]
fn equal_queues_pick_the_faster_rate() {
    // Linger: (10_000 + 1000) / 1e6 = 11 ms vs / 2e6 = 5.5 ms.
    let paths = [
        path(0, Some(1e6), Some(20 * MS), 10_000),
        path(1, Some(2e6), Some(20 * MS), 10_000),
    ];
    assert_eq!(select(&paths), Selection::Send(PathId(1)));
    assert_eq!(
        linger_time(&paths[1], 1000),
        Some(Duration::from_micros(5500))
    );
}

#[test]
fn deep_queue_on_the_fast_rate_path_picks_the_other() {
    // Linger: 101_000 / 2e6 = 50.5 ms vs 1000 / 1e6 = 1 ms; equal RTTs, so the HoL check
    // (fast = path 0 by id) sees 10 + 50.5 ms against 10 + 1 ms and keeps path 1.
    let paths = [
        path(0, Some(2e6), Some(20 * MS), 100_000),
        path(1, Some(1e6), Some(20 * MS), 0),
    ];
    assert_eq!(select(&paths), Selection::Send(PathId(1)));
}

#[test]
fn hol_check_switches_to_the_low_rtt_path() {
    // Linger picks path 1 (0.1 ms vs 6 ms), but path 0 delivers at 5 + 6 = 11 ms and path 1
    // at 100 + 0.1 ms: the packet goes on path 0.
    let mut paths = [
        path(0, Some(1e6), Some(10 * MS), 5_000),
        path(1, Some(10e6), Some(200 * MS), 0),
    ];
    assert_eq!(MptcpDefault::least_linger(&paths, 1000), Some(PathId(1)));
    assert_eq!(select(&paths), Selection::Send(PathId(0)));
    // With 200 kB queued on path 0 it delivers at 5 + 201 ms: path 1 is sooner after all.
    paths[0].bytes_in_flight = 200_000;
    assert_eq!(select(&paths), Selection::Send(PathId(1)));
    // Without an srtt on the chosen path the check cannot run: the linger choice stands.
    paths[0].bytes_in_flight = 5_000;
    paths[1].srtt = None;
    assert_eq!(select(&paths), Selection::Send(PathId(1)));
}

#[test]
fn paths_without_rate_come_after_by_srtt() {
    let paths = [
        path(0, None, Some(5 * MS), 0),
        path(1, Some(1e3), Some(50 * MS), 50_000),
        path(2, None, Some(1 * MS), 0),
    ];
    // Path 1 is the only one with a linger time; the HoL check needs a rate on path 2.
    assert_eq!(select(&paths), Selection::Send(PathId(1)));
    let no_rates = [paths[0].clone(), paths[2].clone()];
    assert_eq!(select(&no_rates), Selection::Send(PathId(2)));
}

#[test]
fn skips_unusable_and_waits_when_none() {
    let mut paths = [
        path(0, Some(2e6), Some(10 * MS), 0),
        path(1, Some(1e6), Some(10 * MS), 0),
    ];
    paths[0].cwnd_room = Some(0);
    assert_eq!(select(&paths), Selection::Send(PathId(1)));
    paths[1].state = PathState::Down;
    assert_eq!(select(&paths), Selection::Wait(None));
    assert_eq!(select(&[]), Selection::Wait(None));
}
