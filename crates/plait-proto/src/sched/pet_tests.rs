//! PET unit tests (seed PET-BMP §V-A); the module invariants are property-tested over every
//! scheduler in `sched::tests`.

use crate::sched::test_support::{control, data, picks, send};
use std::time::Duration;

use super::*;
use crate::path::PathState;

const MS: Duration = Duration::from_millis(1);

fn pid(i: u8) -> PathId {
    PathId(i)
}

fn active(i: u8) -> PathView {
    PathView::new(pid(i), PathState::Active)
}

/// An active path with a packet-pair rate (bytes/s) and base one-way delay.
fn exact(i: u8, rate: f64, delay: Duration) -> PathView {
    PathView {
        pair_rate: Some(rate),
        base_owd: Some(delay),
        ..active(i)
    }
}

/// Runs the start phase on `n` rate-less paths (one pair each) at time zero.
fn after_start_phase(n: u8) -> Pet {
    let mut pet = Pet::default();
    let bare: Vec<PathView> = (0..n).map(active).collect();
    let want: Vec<u8> = (0..n).flat_map(|i| [i, i]).collect();
    assert_eq!(picks(&mut pet, Time::ZERO, &bare, u64::from(n) * 2), want);
    pet
}

#[test]
fn start_phase_pairs_round_robin_until_every_path_has_a_pair_rate() {
    let mut pet = Pet::default();
    let mut paths = [active(0), active(1), active(2)];
    assert_eq!(
        picks(&mut pet, Time::ZERO, &paths, 8),
        [0, 0, 1, 1, 2, 2, 0, 0]
    );
    // Path 1 has an estimate now, the others not yet: still round robin over all usable.
    paths[1].pair_rate = Some(1e6);
    paths[0].pair_rate = Some(1e6);
    assert_eq!(picks(&mut pet, Time::ZERO, &paths, 6), [1, 1, 2, 2, 0, 0]);
    // A rate that is no estimate (NaN, zero) does not end the start phase.
    paths[2].pair_rate = Some(f64::NAN);
    assert_eq!(picks(&mut pet, Time::ZERO, &paths, 4), [1, 1, 2, 2]);
    // An unusable path without a rate neither blocks the end of the phase nor gets pairs.
    paths[2].state = PathState::Probing;
    paths[0].base_owd = Some(50 * MS);
    paths[1].base_owd = Some(Duration::ZERO);
    assert_eq!(picks(&mut pet, Time::ZERO, &paths, 4), [1, 1, 1, 1]);
}

#[test]
fn start_phase_skips_unusable_and_sparse_ids() {
    let mut pet = Pet::default();
    let paths = [
        active(3),
        PathView::new(pid(5), PathState::Down),
        PathView {
            cwnd_room: Some(0),
            ..active(7)
        },
        active(9),
    ];
    assert_eq!(picks(&mut pet, Time::ZERO, &paths, 6), [3, 3, 9, 9, 3, 3]);
}

#[test]
fn pairs_follow_edpf_and_both_packets_share_the_path() {
    let mut pet = after_start_phase(2);
    // Path 0 delivers every 1 ms from 0; path 1's first delivery is at 11.5 ms.
    let paths = [
        exact(0, 1e6, Duration::ZERO),
        exact(1, 1e6, Duration::from_micros(10_500)),
    ];
    // A reference EDPF fed the same sends (including the start phase's, at D = 0, no B).
    let mut reference = Edpf::default();
    let bare = [active(0), active(1)];
    for (seq, id) in [0u8, 0, 1, 1].into_iter().enumerate() {
        let p = data(seq as u64, Time::ZERO);
        let _ = reference.select(Time::ZERO, &bare, &p);
        reference.on_sent(Time::ZERO, pid(id), &p);
    }
    let mut seq = Vec::new();
    for i in 0..20u64 {
        let p = data(i, Time::ZERO);
        let edpf_choice = reference.select(Time::ZERO, &paths, &p);
        let id = send(&mut pet, Time::ZERO, &paths, &p);
        reference.on_sent(Time::ZERO, id, &p);
        if i % 2 == 0 {
            assert_eq!(edpf_choice, Selection::Send(id), "first packet of pair {i}");
        } else {
            assert_eq!(id.0, seq[seq.len() - 1], "second packet of pair {i}");
        }
        seq.push(id.0);
    }
    assert_eq!(
        seq,
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0]
    );
}

#[test]
fn select_does_not_change_pair_state() {
    let mut pet = Pet::default();
    let paths = [active(0), active(1)];
    let p = data(0, Time::ZERO);
    for _ in 0..3 {
        assert_eq!(pet.select(Time::ZERO, &paths, &p), Selection::Send(pid(0)));
    }
    pet.on_sent(Time::ZERO, pid(0), &p);
    assert_eq!(pet.select(Time::ZERO, &paths, &p), Selection::Send(pid(0)));
    pet.on_sent(Time::ZERO, pid(0), &p);
    assert_eq!(pet.select(Time::ZERO, &paths, &p), Selection::Send(pid(1)));
}

#[test]
fn refresh_interval_is_one_second_or_ten_rtts() {
    let rtt = |ms: Option<u64>| PathView {
        srtt: ms.map(Duration::from_millis),
        ..active(0)
    };
    assert_eq!(refresh_interval(&rtt(None)), Duration::from_secs(1));
    assert_eq!(refresh_interval(&rtt(Some(30))), Duration::from_secs(1));
    assert_eq!(refresh_interval(&rtt(Some(100))), Duration::from_secs(1));
    assert_eq!(
        refresh_interval(&rtt(Some(250))),
        Duration::from_millis(2500)
    );
    let huge = PathView {
        srtt: Some(Duration::MAX),
        ..active(0)
    };
    assert_eq!(refresh_interval(&huge), Duration::MAX);
}

#[test]
fn a_path_without_a_pair_for_the_refresh_interval_gets_the_next_pair() {
    let mut pet = after_start_phase(2);
    // EDPF always prefers the fast path 0: 1000 B take 1 ms there, 100 ms + 50 ms on 1.
    let paths = [exact(0, 1e6, Duration::ZERO), exact(1, 1e4, 50 * MS)];
    let mut now = Time::ZERO;
    let mut seq = Vec::new();
    // One pair every 100 ms for 2.05 s.
    for _ in 0..21 {
        seq.extend(picks(&mut pet, now, &paths, 2));
        now += 100 * MS;
    }
    // Path 1 carried its start-phase pair at 0, then a pair at 1 s and at 2 s.
    let on_1: Vec<usize> = (0..seq.len()).filter(|&i| seq[i] == 1).collect();
    assert_eq!(on_1, [20, 21, 40, 41], "{seq:?}");
    // A longer srtt stretches the interval to ten RTTs: 3 s after the last pair, not 1 s.
    let slow_rtt = [
        paths[0].clone(),
        PathView {
            srtt: Some(300 * MS),
            ..paths[1].clone()
        },
    ];
    let start = now;
    let mut seq = Vec::new();
    while now < start + Duration::from_millis(2950) {
        seq.extend(picks(&mut pet, now, &slow_rtt, 2));
        now += 100 * MS;
    }
    // Last pair on 1 at 2.0 s; due again at 5.0 s; `start` is 2.1 s: pair 29 (at 5.0 s).
    let on_1: Vec<usize> = (0..seq.len()).filter(|&i| seq[i] == 1).collect();
    assert_eq!(on_1, [58, 59], "{seq:?}");
}

#[test]
fn a_path_never_paired_is_due_and_the_stalest_goes_first() {
    let mut pet = after_start_phase(1);
    let mut paths = vec![exact(0, 1e6, Duration::ZERO)];
    assert_eq!(picks(&mut pet, Time::ZERO, &paths, 4), [0, 0, 0, 0]);
    // Two paths appear with estimates already (e.g. from earlier traffic): never paired by
    // PET, so due at once, lowest id first; then EDPF's choice again.
    paths.push(exact(2, 1e4, 50 * MS));
    paths.push(exact(1, 1e4, 50 * MS));
    let now = Time::from_millis(10);
    assert_eq!(picks(&mut pet, now, &paths, 8), [1, 1, 2, 2, 0, 0, 0, 0]);
}

#[test]
fn control_datagrams_do_not_disturb_pairs() {
    let mut pet = Pet::default();
    // No pair rates: start phase; EDPF (by D) prefers path 1, round robin starts at 0.
    let paths = [
        PathView {
            base_owd: Some(10 * MS),
            ..active(0)
        },
        PathView {
            base_owd: Some(Duration::ZERO),
            ..active(1)
        },
    ];
    let now = Time::ZERO;
    assert_eq!(send(&mut pet, now, &paths, &data(0, now)), pid(0));
    // Control placed by `select` and by `select_control`: EDPF's choice, pair left open.
    let c = control(now, 64);
    assert_eq!(send(&mut pet, now, &paths, &c), pid(1));
    assert_eq!(pet.select_control(now, &paths, &c), Some(pid(1)));
    pet.on_sent(now, pid(1), &c);
    // A control datagram on the pair's own path neither closes nor reopens the pair.
    pet.on_sent(now, pid(0), &c);
    assert_eq!(send(&mut pet, now, &paths, &data(1, now)), pid(0));
    assert_eq!(picks(&mut pet, now, &paths, 4), [1, 1, 0, 0]);
    // No usable path: control waits too.
    let down = [PathView::new(pid(0), PathState::Down)];
    assert_eq!(pet.select(now, &down, &c), Selection::Wait(None));
    assert_eq!(pet.select_control(now, &down, &c), None);
}

#[test]
fn on_sent_books_every_datagram_in_edpf() {
    let paths = [exact(0, 1e6, Duration::ZERO)];
    let mut pet = Pet::default();
    let p = data(0, Time::ZERO);
    let before = pet.edpf.expected_delivery(Time::ZERO, &paths[0], &p);
    assert_eq!(before, Some(Time::from_millis(1)));
    let _ = pet.select(Time::ZERO, &paths, &control(Time::ZERO, 64));
    pet.on_sent(Time::ZERO, pid(0), &control(Time::ZERO, 64));
    // 64 control bytes at 1e6 B/s: 64 µs ahead of the data packet's 1 ms.
    assert_eq!(
        pet.edpf.expected_delivery(Time::ZERO, &paths[0], &p),
        Some(Time::from_micros(1064))
    );
    send(&mut pet, Time::ZERO, &paths, &p);
    assert_eq!(
        pet.edpf.expected_delivery(Time::ZERO, &paths[0], &p),
        Some(Time::from_micros(2064))
    );
}

#[test]
fn unusable_pair_path_starts_a_new_pair_elsewhere() {
    let mut pet = Pet::default();
    let mut paths = [active(0), active(1), active(2)];
    let now = Time::ZERO;
    assert_eq!(send(&mut pet, now, &paths, &data(0, now)), pid(0));
    paths[0].state = PathState::Down;
    // The second packet opens a new pair on the next path, which its successor closes.
    assert_eq!(picks(&mut pet, now, &paths, 4), [1, 1, 2, 2]);
    // A full congestion window counts as unusable too.
    assert_eq!(send(&mut pet, now, &paths, &data(0, now)), pid(1));
    paths[1].cwnd_room = Some(0);
    assert_eq!(picks(&mut pet, now, &paths, 2), [2, 2]);
    // With estimates everywhere (EDPF prefers 0), the same holds after the start phase.
    let mut pet = after_start_phase(2);
    let mut paths = [exact(0, 1e6, Duration::ZERO), exact(1, 1e6, 20 * MS)];
    assert_eq!(send(&mut pet, now, &paths, &data(0, now)), pid(0));
    paths[0].state = PathState::Degraded;
    assert_eq!(send(&mut pet, now, &paths, &data(1, now)), pid(0));
    assert_eq!(send(&mut pet, now, &paths, &data(2, now)), pid(0));
    paths[0].state = PathState::Probing;
    assert_eq!(picks(&mut pet, now, &paths, 2), [1, 1]);
    // Nothing usable, even with a pair open: wait for a change.
    assert_eq!(send(&mut pet, now, &paths, &data(3, now)), pid(1));
    paths[1].state = PathState::Down;
    assert_eq!(
        pet.select(now, &paths, &data(4, now)),
        Selection::Wait(None)
    );
    assert_eq!(pet.select(now, &[], &data(4, now)), Selection::Wait(None));
}
