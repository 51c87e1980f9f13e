//! Unit tests of [`Blest`]: fast path first, waiting rather than blocking, slow path when
//! close.

use std::time::Duration;

use super::*;
use crate::ids::PathId;
use crate::path::PathState;

const MS: Duration = Duration::from_millis(1);
const NOW: Time = Time::from_millis(100);

/// An active path with a rate (bytes/s), smoothed RTT, bytes in flight and window room.
fn path(i: u8, rate: f64, srtt: Duration, in_flight: u64, room: Option<u64>) -> PathView {
    PathView {
        pair_rate: Some(rate),
        srtt: Some(srtt),
        bytes_in_flight: in_flight,
        cwnd_room: room,
        ..PathView::new(PathId(i), PathState::Active)
    }
}

fn select(paths: &[PathView]) -> Selection {
    let pkt = PacketMeta {
        global_seq: 0,
        len: 1000,
        arrival: NOW,
        control: false,
    };
    Blest::default().select(NOW, paths, &pkt)
}

#[test]
fn fast_path_with_room_is_used() {
    // Real window with room, and the packet-mode BDP stand-in (1e6 B/s × 10 ms = 10 kB).
    let slow = path(1, 1e6, 1000 * MS, 0, None);
    let fast = path(0, 1e6, 10 * MS, 50_000, Some(1000));
    assert_eq!(select(&[fast, slow.clone()]), Selection::Send(PathId(0)));
    let fast = path(0, 1e6, 10 * MS, 9_000, None);
    assert_eq!(select(&[fast, slow]), Selection::Send(PathId(0)));
}

#[test]
fn full_fast_path_waits_instead_of_a_blocking_slow_path() {
    // cwnd_f = 100 packets, ratio 100: X = 1000 · (100 + 49.5) · 100 = 14.95 MB > 8 MiB.
    let fast = path(0, 1e6, 10 * MS, 100_000, Some(0));
    let slow = path(1, 1e6, 1000 * MS, 0, None);
    assert_eq!(would_block(&fast, &slow, 1000), Some(true));
    // Wait one packet time of the fast path (1000 B at 1e6 B/s).
    assert_eq!(select(&[fast, slow]), Selection::Wait(Some(NOW + MS)));
}

#[test]
fn bdp_stand_in_waits_for_the_excess_to_drain() {
    // BDP_f = 10 kB, 10 kB in flight: no room. Ratio 200: X = 1000 · (10 + 99.5) · 200 =
    // 21.9 MB > 8 MiB: wait (11 kB − 10 kB) / 1e6 = 1 ms.
    let fast = path(0, 1e6, 10 * MS, 10_000, None);
    let slow = path(1, 1e6, 2000 * MS, 0, None);
    assert_eq!(
        select(&[fast.clone(), slow]),
        Selection::Wait(Some(NOW + MS))
    );
    // Ratio 100: X = 1000 · (10 + 49.5) · 100 = 5.95 MB fits: the slow path is used.
    let slow = path(1, 1e6, 1000 * MS, 0, None);
    assert_eq!(select(&[fast.clone(), slow]), Selection::Send(PathId(1)));
    // Alone, the fast path is used even beyond its stand-in window.
    assert_eq!(select(&[fast]), Selection::Send(PathId(0)));
}

#[test]
fn close_rtt_slow_path_is_used() {
    // Ratio 1.2: X = 1000 · (100 + 0.1) · 1.2 ≈ 120 kB, far below 8 MiB.
    let fast = path(0, 1e6, 10 * MS, 100_000, Some(0));
    let slow = path(1, 1e6, 12 * MS, 0, None);
    assert_eq!(
        select(&[fast.clone(), slow.clone()]),
        Selection::Send(PathId(1))
    );
    // The same slow path blocks once its own queue fills the window:
    // 120 kB + 8.3 MB + 1 kB > 8 MiB.
    let full = PathView {
        bytes_in_flight: 8_300_000,
        ..slow
    };
    assert!(matches!(select(&[fast, full]), Selection::Wait(Some(t)) if t > NOW));
}

#[test]
fn wait_none_only_without_usable_paths() {
    let mut fast = path(0, 1e6, 10 * MS, 100_000, Some(0));
    assert_eq!(select(std::slice::from_ref(&fast)), Selection::Wait(None));
    fast.cwnd_room = Some(10);
    fast.state = PathState::Probing;
    assert_eq!(select(&[fast]), Selection::Wait(None));
    assert_eq!(select(&[]), Selection::Wait(None));
}
