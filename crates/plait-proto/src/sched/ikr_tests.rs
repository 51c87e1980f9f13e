//! IKR unit tests: group sizes, fastest-first order within a group (a property over random
//! rates), pacing at the aggregate rate, re-planning when a path goes down, control packets.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::path::PathState;

fn pid(i: u8) -> PathId {
    PathId(i)
}

fn with_rate(i: u8, rate: f64) -> PathView {
    PathView {
        pair_rate: Some(rate),
        ..PathView::new(pid(i), PathState::Active)
    }
}

fn data(seq: u64, len: usize, now: Time) -> PacketMeta {
    PacketMeta {
        global_seq: seq,
        len,
        arrival: now,
        control: false,
    }
}

/// Sends `n` packets of `len` bytes starting at `*now`, waiting whenever IKR asks to, and
/// returns the paths with the groups they belonged to (group number per packet).
fn run(
    s: &mut Ikr,
    now: &mut Time,
    paths: &[PathView],
    n: u64,
    len: usize,
) -> Vec<(PathId, usize, Time)> {
    let mut out = Vec::new();
    let mut group = 0;
    let mut seq = 0;
    while seq < n {
        let p = data(seq, len, *now);
        match s.select(*now, paths, &p) {
            Selection::Send(id) => {
                if s.next == 0 && seq > 0 {
                    group += 1;
                }
                s.on_sent(*now, id, &p);
                out.push((id, group, *now));
                seq += 1;
            }
            Selection::Wait(Some(t)) => {
                assert!(t > *now, "Wait({t:?}) at {now:?}");
                *now = t;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    out
}

fn plan_of(rates: &[f64]) -> Vec<u8> {
    let paths: Vec<PathView> = (0u8..).zip(rates).map(|(i, &r)| with_rate(i, r)).collect();
    plan_group(&shares(&paths).unwrap().paths)
        .into_iter()
        .map(|p| p.0)
        .collect()
}

#[test]
fn group_sizes_follow_the_ratio() {
    assert_eq!(plan_of(&[4e6, 1e6]), [0, 0, 0, 0, 1]);
    // The slower link gets the last slot whatever the ids.
    assert_eq!(plan_of(&[1e6, 4e6]), [1, 1, 1, 1, 0]);
    assert_eq!(plan_of(&[2e6, 1e6]), [0, 0, 1]);
    assert_eq!(plan_of(&[3e6, 2e6]), [0, 0, 0, 1, 1]);
    assert_eq!(plan_of(&[1e6, 1e6, 1e6]), [0, 1, 2]);
    assert_eq!(plan_of(&[1e6, 2e6, 4e6]), [2, 2, 2, 2, 1, 1, 0]);
    assert_eq!(plan_of(&[5e6]), [0]);
    // Within a tenth of a packet: 2.1:1 is a group of 3, but 2.5:1 needs 7.
    assert_eq!(plan_of(&[2.1e6, 1e6]), [0, 0, 1]);
    assert_eq!(plan_of(&[2.5e6, 1e6]), [0, 0, 0, 0, 0, 1, 1]);
    // A path under 1/64 of the capacity is left out; just above, it gets 1 of a large group.
    assert_eq!(plan_of(&[1000e6, 1e6]), [0]);
    let p = plan_of(&[40e6, 1e6]);
    assert_eq!(p.iter().filter(|&&i| i == 1).count(), 1);
    assert!(p.len() <= MAX_GROUP && p.len() >= 30, "{p:?}");
    assert_eq!(p.last(), Some(&1));
}

#[test]
fn paths_without_estimates() {
    // None: round robin in id order.
    let paths = [
        PathView::new(pid(3), PathState::Active),
        PathView::new(pid(1), PathState::Degraded),
    ];
    assert_eq!(plan_group(&shares(&paths).unwrap().paths), [pid(1), pid(3)]);
    assert_eq!(shares(&paths).unwrap().rate, None);
    // Missing estimate gets the mean weight (3 + 1) / 2 = 2: shares 3:2:1.
    let paths = [
        with_rate(0, 3e6),
        PathView::new(pid(1), PathState::Active),
        with_rate(2, 1e6),
    ];
    assert_eq!(
        plan_group(&shares(&paths).unwrap().paths),
        [0, 0, 0, 1, 1, 2].map(pid)
    );
    let rate = shares(&paths).unwrap().rate.unwrap();
    assert!((rate - PACING_GAIN * 6e6).abs() < 1.0, "{rate}");
}

#[test]
fn four_to_one_sends_four_fast_then_one_slow() {
    let paths = [with_rate(0, 1e6), with_rate(1, 4e6)];
    let mut s = Ikr::default();
    let mut now = Time::ZERO;
    let sent = run(&mut s, &mut now, &paths, 50, 1000);
    let seq: Vec<u8> = sent.iter().map(|x| x.0.0).collect();
    assert_eq!(seq, [1, 1, 1, 1, 0].repeat(10));
    for (k, x) in sent.iter().enumerate() {
        assert_eq!(x.1, k / 5, "packet {k} in group {}", x.1);
    }
}

#[test]
fn pacing_spaces_at_the_aggregate_rate() {
    // Aggregate 5 MB/s × gain: 1000 bytes every 160 µs.
    let paths = [with_rate(0, 4e6), with_rate(1, 1e6)];
    let spacing = Duration::from_secs_f64(1000.0 / (PACING_GAIN * 5e6));
    assert_eq!(spacing, Duration::from_micros(160));
    let mut s = Ikr::default();
    let t0 = Time::from_millis(10);
    let p = data(0, 1000, t0);
    assert_eq!(s.select(t0, &paths, &p), Selection::Send(pid(0)));
    s.on_sent(t0, pid(0), &p);
    // Too early: asked to come back exactly one spacing later, with the same answer then.
    let early = t0 + Duration::from_micros(50);
    let q = data(1, 1000, early);
    assert_eq!(
        s.select(early, &paths, &q),
        Selection::Wait(Some(t0 + spacing))
    );
    assert_eq!(
        s.select(early, &paths, &q),
        Selection::Wait(Some(t0 + spacing))
    );
    assert_eq!(s.select(t0 + spacing, &paths, &q), Selection::Send(pid(0)));
    // Over a run, consecutive sends are exactly one spacing apart.
    let mut now = t0 + spacing;
    s.on_sent(now, pid(0), &q);
    let sent = run(&mut s, &mut now, &paths, 20, 1000);
    let mut prev = t0 + spacing;
    for x in &sent {
        assert_eq!(x.2 - prev, spacing);
        prev = x.2;
    }
    // Packet length matters; no credit after idling: a pause does not allow a burst.
    let later = prev + Duration::from_secs(1);
    let big = data(100, 1500, later);
    assert_eq!(
        s.select(later, &paths, &big),
        Selection::Send(s.plan[s.next])
    );
    s.on_sent(later, s.plan[s.next], &big);
    let q = data(101, 1000, later);
    assert_eq!(
        s.select(later, &paths, &q),
        Selection::Wait(Some(later + Duration::from_micros(240)))
    );
    // A corrected (higher) estimate takes effect at once.
    let faster = [with_rate(0, 40e6), with_rate(1, 10e6)];
    assert_eq!(
        s.select(later, &faster, &q),
        Selection::Wait(Some(later + Duration::from_micros(24)))
    );
}

#[test]
fn control_datagrams_are_neither_planned_nor_paced() {
    let paths = [with_rate(0, 4e6), with_rate(1, 1e6)];
    let mut s = Ikr::default();
    let p = data(0, 1000, Time::ZERO);
    assert_eq!(s.select(Time::ZERO, &paths, &p), Selection::Send(pid(0)));
    s.on_sent(Time::ZERO, pid(0), &p);
    let ctl = PacketMeta {
        control: true,
        ..data(1, 60, Time::ZERO)
    };
    assert!(matches!(
        s.select(Time::ZERO, &paths, &ctl),
        Selection::Send(_)
    ));
    s.on_sent(Time::ZERO, pid(1), &ctl);
    s.on_sent(Time::ZERO, pid(0), &ctl);
    assert_eq!(s.next, 1);
    assert_eq!(s.last_sent, Some((Time::ZERO, 1000)));
    let none = [PathView::new(pid(0), PathState::Down)];
    assert_eq!(s.select(Time::ZERO, &none, &ctl), Selection::Wait(None));
}

#[test]
fn replans_when_a_planned_path_goes_down() {
    let mut paths = [with_rate(0, 4e6), with_rate(1, 1e6), with_rate(2, 2e6)];
    // 4:1:2 → group of 7: 0 ×4, 2 ×2, 1 ×1.
    let mut s = Ikr::default();
    let mut now = Time::ZERO;
    let first = run(&mut s, &mut now, &paths, 4, 1000);
    assert!(first.iter().all(|x| x.0 == pid(0)));
    assert_eq!(s.plan, [0, 0, 0, 0, 2, 2, 1].map(pid));
    // Path 2, next in the plan, goes down: a new group over 0 and 1 (4:1).
    paths[2].state = PathState::Down;
    let rest = run(&mut s, &mut now, &paths, 10, 1000);
    let seq: Vec<u8> = rest.iter().map(|x| x.0.0).collect();
    assert_eq!(seq, [0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
    assert!(rest.iter().all(|x| x.1 < 2), "{rest:?}");
    // A full window (cwnd_room 0) makes a path unusable too; the fast path alone then.
    paths[1].cwnd_room = Some(0);
    let fast = run(&mut s, &mut now, &paths, 3, 1000);
    assert!(fast.iter().all(|x| x.0 == pid(0)));
    // A path that comes up joins at the next group, not mid-group.
    paths[1].cwnd_room = None;
    paths[2].state = PathState::Active;
    let mut s = Ikr::default();
    let two = [with_rate(0, 4e6), with_rate(1, 1e6)];
    run(&mut s, &mut now, &two, 2, 1000);
    let more = run(&mut s, &mut now, &paths, 10, 1000);
    let seq: Vec<u8> = more.iter().map(|x| x.0.0).collect();
    assert_eq!(seq, [0, 0, 1, 0, 0, 0, 0, 2, 2, 1]);
    // Nothing usable: Wait(None), even with pacing pending.
    for p in &mut paths {
        p.state = PathState::Probing;
    }
    let p = data(0, 1000, now);
    assert_eq!(s.select(now, &paths, &p), Selection::Wait(None));
}

proptest! {
    #[test]
    fn groups_are_fastest_first_and_follow_the_ratio(
        rates in prop::collection::vec(prop_oneof![1e3..1e9_f64, Just(1e6)], 1..=8),
        len in 40usize..=1500,
    ) {
        let paths: Vec<PathView> =
            (0u8..).zip(&rates).map(|(i, &r)| with_rate(i, r)).collect();
        let rate_of = |id: PathId| rates[id.index()];
        let mut s = Ikr::default();
        let mut now = Time::ZERO;
        let sent = run(&mut s, &mut now, &paths, 200, len);
        let plan = s.plan.clone();
        prop_assert!(!plan.is_empty() && plan.len() <= MAX_GROUP);
        let groups = sent.chunk_by(|a, b| a.1 == b.1);
        for g in groups {
            // Non-increasing rate along the group: a slower link never carries a lower
            // sequence number than a faster one of the same group.
            for w in g.windows(2) {
                prop_assert!(rate_of(w[0].0) >= rate_of(w[1].0), "{:?}", g);
            }
            // Every complete group is the plan (rates do not change here).
            if g.len() == plan.len() {
                let ids: Vec<PathId> = g.iter().map(|x| x.0).collect();
                prop_assert_eq!(&ids, &plan);
            }
        }
        // Each participant gets at least one slot, and its share within a packet per
        // participant (the fastest absorbs the slots forced onto slow ones).
        let sh = shares(&paths).unwrap();
        let n = plan.len() as f64;
        let m = sh.paths.len() as f64;
        for &(id, f) in &sh.paths {
            let c = plan.iter().filter(|&&p| p == id).count();
            prop_assert!(c >= 1);
            prop_assert!((c as f64 - n * f).abs() < m, "{:?} {:?}", plan, sh);
        }
        // Only paths under half a packet of the largest group are left out.
        let total: f64 = rates.iter().sum();
        for (i, r) in rates.iter().enumerate() {
            let packets = r / total * MAX_GROUP as f64;
            let used = plan.contains(&pid(i as u8));
            prop_assert!(used || packets < 0.5 + 1e-9, "{:?} {:?}", plan, rates);
            prop_assert!(!used || packets >= 0.5 - 1e-9, "{:?} {:?}", plan, rates);
        }
        // Consecutive sends are spaced by at least len / R.
        let rate = sh.rate.unwrap();
        for w in sent.windows(2) {
            prop_assert!(w[1].2 - w[0].2 >= gap(len, rate));
        }
    }
}
