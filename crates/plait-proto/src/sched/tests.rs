//! Scheduler tests: unit tests per scheduler, the module invariants as a property over every
//! [`SchedulerKind`], and EDPF's zero-reordering property (seed PET-BMP §III-B).

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::path::PathState;

const MS: Duration = Duration::from_millis(1);

fn pid(i: u8) -> PathId {
    PathId(i)
}

fn active(i: u8) -> PathView {
    PathView::new(pid(i), PathState::Active)
}

fn with_rate(i: u8, rate: f64) -> PathView {
    PathView {
        pair_rate: Some(rate),
        ..active(i)
    }
}

/// An active path with an exact rate (bytes/s) and base one-way delay.
fn exact(i: u8, rate: f64, delay: Duration) -> PathView {
    PathView {
        base_owd: Some(delay),
        ..with_rate(i, rate)
    }
}

fn pkt(seq: u64, len: usize, arrival: Time) -> PacketMeta {
    PacketMeta {
        global_seq: seq,
        len,
        arrival,
        control: false,
    }
}

/// Selects at `now` for a packet arriving now, reports the send, returns the single path.
fn pick(s: &mut impl Scheduler, now: Time, paths: &[PathView], seq: u64, len: usize) -> PathId {
    let p = pkt(seq, len, now);
    match s.select(now, paths, &p) {
        Selection::Send(id) => {
            s.on_sent(now, id, &p);
            id
        }
        other => panic!("expected Send, got {other:?}"),
    }
}

fn picks(s: &mut impl Scheduler, paths: &[PathView], n: u64) -> Vec<u8> {
    (0..n)
        .map(|i| pick(s, Time::ZERO, paths, i, 1000).0)
        .collect()
}

// ---- helpers -------------------------------------------------------------------------------

#[test]
fn transmission_time_saturates() {
    assert_eq!(transmission_time(1000, 1e6), MS);
    assert_eq!(transmission_time(1000, 0.0), Duration::MAX);
    assert_eq!(transmission_time(1000, f64::NAN), Duration::MAX);
    assert_eq!(transmission_time(1500, 1e-300), Duration::MAX);
}

// ---- round robin ---------------------------------------------------------------------------

#[test]
fn rr_cycles_in_id_order() {
    let paths = [active(0), active(1), active(2)];
    assert_eq!(
        picks(&mut RoundRobin::default(), &paths, 7),
        [0, 1, 2, 0, 1, 2, 0]
    );
}

#[test]
fn rr_skips_unusable_and_rejoins() {
    let mut rr = RoundRobin::default();
    let mut paths = [active(0), active(1), active(2)];
    assert_eq!(picks(&mut rr, &paths, 2), [0, 1]);
    paths[2].state = PathState::Down;
    assert_eq!(picks(&mut rr, &paths, 3), [0, 1, 0]);
    paths[2].state = PathState::Degraded;
    paths[0].cwnd_room = Some(0);
    assert_eq!(picks(&mut rr, &paths, 3), [1, 2, 1]);
    paths[0].cwnd_room = None;
    assert_eq!(picks(&mut rr, &paths, 3), [2, 0, 1]);
}

#[test]
fn rr_sparse_ids_and_wait() {
    let mut rr = RoundRobin::default();
    let paths = [
        active(3),
        PathView::new(pid(5), PathState::Probing),
        active(9),
    ];
    assert_eq!(picks(&mut rr, &paths, 3), [3, 9, 3]);
    let none = [PathView::new(pid(0), PathState::Down)];
    let p = pkt(0, 100, Time::ZERO);
    assert_eq!(rr.select(Time::ZERO, &none, &p), Selection::Wait(None));
    assert_eq!(rr.select(Time::ZERO, &[], &p), Selection::Wait(None));
}

// ---- weighted round robin ------------------------------------------------------------------

#[test]
fn wrr_two_to_one_is_exact_and_smooth() {
    let paths = [with_rate(0, 2e6), with_rate(1, 1e6)];
    let seq = picks(&mut WeightedRoundRobin::default(), &paths, 300);
    assert_eq!(seq.iter().filter(|&&i| i == 0).count(), 200);
    assert_eq!(seq.iter().filter(|&&i| i == 1).count(), 100);
    let longest_run = seq
        .chunk_by(|a, b| a == b)
        .filter(|run| run[0] == 0)
        .map(<[u8]>::len)
        .max();
    assert_eq!(longest_run, Some(2));
    assert_eq!(&seq[..6], [0, 1, 0, 0, 1, 0]);
}

#[test]
fn wrr_missing_estimate_gets_mean_weight() {
    // Weights 1, 1/3 and, for the path without an estimate, their mean 2/3: shares 3:1:2.
    let paths = [with_rate(0, 3e6), with_rate(1, 1e6), active(2)];
    let seq = picks(&mut WeightedRoundRobin::default(), &paths, 600);
    let count = |i: u8| seq.iter().filter(|&&x| x == i).count() as i64;
    assert!((count(0) - 300).abs() <= 1, "{}", count(0));
    assert!((count(1) - 100).abs() <= 1, "{}", count(1));
    assert!((count(2) - 200).abs() <= 1, "{}", count(2));
}

#[test]
fn wrr_without_estimates_is_round_robin() {
    let paths = [active(0), active(1), active(2)];
    assert_eq!(
        picks(&mut WeightedRoundRobin::default(), &paths, 6),
        [0, 1, 2, 0, 1, 2]
    );
}

#[test]
fn wrr_follows_rate_changes_and_skips_unusable() {
    let mut wrr = WeightedRoundRobin::default();
    let mut paths = [with_rate(0, 1e6), with_rate(1, 1e6), with_rate(2, 1e6)];
    picks(&mut wrr, &paths, 5);
    paths[1].state = PathState::Down;
    paths[2].pair_rate = Some(3e6);
    let seq = picks(&mut wrr, &paths, 400);
    assert!(!seq.contains(&1));
    // Shares 1:3, within one pick (the credits left from before the change).
    let heavy = seq.iter().filter(|&&i| i == 2).count();
    assert!(heavy.abs_diff(300) <= 1, "{heavy}");
    let p = pkt(0, 100, Time::ZERO);
    let none = [PathView::new(pid(0), PathState::Probing)];
    assert_eq!(wrr.select(Time::ZERO, &none, &p), Selection::Wait(None));
}

// ---- EDPF ----------------------------------------------------------------------------------

#[test]
fn edpf_idle_paths_pick_earliest_delivery() {
    // d0 = 50 ms + 1 ms = 51 ms; d1 = 10 ms + 10 ms = 20 ms.
    let paths = [exact(0, 1e6, 50 * MS), exact(1, 1e5, 10 * MS)];
    let mut edpf = Edpf::default();
    let p = pkt(0, 1000, Time::ZERO);
    assert_eq!(
        edpf.expected_delivery(Time::ZERO, &paths[0], &p),
        Some(Time::from_millis(51))
    );
    assert_eq!(
        edpf.expected_delivery(Time::ZERO, &paths[1], &p),
        Some(Time::from_millis(20))
    );
    assert_eq!(edpf.select(Time::ZERO, &paths, &p), Selection::Send(pid(1)));
}

#[test]
fn edpf_fills_fast_path_until_slow_is_earlier() {
    // Path 0 delivers at 1, 2, ... 11 ms; path 1's first delivery is at 11.5 ms.
    let paths = [
        exact(0, 1e6, Duration::ZERO),
        exact(1, 1e6, Duration::from_micros(10_500)),
    ];
    let seq = picks(&mut Edpf::default(), &paths, 14);
    assert_eq!(seq, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1]);
}

#[test]
fn edpf_past_availability_is_idle() {
    let paths = [exact(0, 1e6, 5 * MS)];
    let mut edpf = Edpf::default();
    pick(&mut edpf, Time::ZERO, &paths, 0, 1000);
    let p = pkt(1, 1000, Time::ZERO);
    assert_eq!(
        edpf.expected_delivery(Time::ZERO, &paths[0], &p),
        Some(Time::from_millis(7))
    );
    let later = Time::from_millis(100);
    let p = pkt(2, 1000, later);
    assert_eq!(
        edpf.expected_delivery(later, &paths[0], &p),
        Some(Time::from_millis(106))
    );
    // A packet that waited in the queue leaves now, not at its arrival.
    let p = pkt(3, 1000, Time::ZERO);
    assert_eq!(
        edpf.expected_delivery(later, &paths[0], &p),
        Some(Time::from_millis(106))
    );
}

#[test]
fn edpf_prefers_paths_with_a_rate() {
    let mut edpf = Edpf::default();
    let p = pkt(0, 1000, Time::ZERO);
    // The rated path is chosen even though it is slower.
    let mixed = [
        PathView {
            base_owd: Some(MS),
            ..active(0)
        },
        exact(1, 1e3, 100 * MS),
    ];
    assert_eq!(edpf.select(Time::ZERO, &mixed, &p), Selection::Send(pid(1)));
    assert_eq!(edpf.expected_delivery(Time::ZERO, &mixed[0], &p), None);
    // No rate anywhere: smallest D (base_owd, else min_rtt/2, else srtt/2, else 0), then id.
    let unrated = [
        PathView {
            srtt: Some(10 * MS),
            ..active(0)
        },
        PathView {
            min_rtt: Some(8 * MS),
            srtt: Some(2 * MS),
            ..active(1)
        },
        PathView {
            base_owd: Some(6 * MS),
            ..active(2)
        },
    ];
    assert_eq!(
        edpf.select(Time::ZERO, &unrated, &p),
        Selection::Send(pid(1))
    );
    let tie = [active(4), active(2)];
    assert_eq!(edpf.select(Time::ZERO, &tie, &p), Selection::Send(pid(2)));
}

#[test]
fn edpf_duplicate_copies_update_each_path() {
    let paths = [exact(0, 1e6, Duration::ZERO), exact(1, 1e6, 2 * MS)];
    let mut edpf = Edpf::default();
    let p = pkt(0, 1000, Time::ZERO);
    assert_eq!(edpf.select(Time::ZERO, &paths, &p), Selection::Send(pid(0)));
    edpf.on_sent(Time::ZERO, pid(0), &p);
    edpf.on_sent(Time::ZERO, pid(1), &p);
    let q = pkt(1, 1000, Time::ZERO);
    assert_eq!(
        edpf.expected_delivery(Time::ZERO, &paths[0], &q),
        Some(Time::from_millis(2))
    );
    assert_eq!(
        edpf.expected_delivery(Time::ZERO, &paths[1], &q),
        Some(Time::from_millis(4))
    );
}

#[test]
fn edpf_tiny_rate_saturates_and_waits_when_nothing_usable() {
    let paths = [with_rate(0, 1e-300), with_rate(1, 1e-300)];
    let mut edpf = Edpf::default();
    assert_eq!(picks(&mut edpf, &paths, 3), [0, 0, 0]);
    let p = pkt(0, 1000, Time::ZERO);
    assert_eq!(
        edpf.expected_delivery(Time::ZERO, &paths[0], &p),
        Some(Time::MAX)
    );
    let down = [PathView::new(pid(0), PathState::Down)];
    assert_eq!(edpf.select(Time::ZERO, &down, &p), Selection::Wait(None));
}

// ---- min RTT -------------------------------------------------------------------------------

#[test]
fn min_rtt_picks_smallest_srtt() {
    let rtt = |i: u8, ms: Option<u64>| PathView {
        srtt: ms.map(Duration::from_millis),
        ..active(i)
    };
    let p = pkt(0, 100, Time::ZERO);
    let mut s = MinRtt::default();
    let paths = [
        rtt(0, None),
        rtt(1, Some(30)),
        rtt(2, Some(20)),
        rtt(3, Some(20)),
    ];
    assert_eq!(s.select(Time::ZERO, &paths, &p), Selection::Send(pid(2)));
    let mut down = paths.clone();
    down[2].state = PathState::Down;
    assert_eq!(s.select(Time::ZERO, &down, &p), Selection::Send(pid(3)));
    let unsampled = [rtt(0, None), rtt(1, None)];
    assert_eq!(
        s.select(Time::ZERO, &unsampled, &p),
        Selection::Send(pid(0))
    );
    let probing = [PathView::new(pid(0), PathState::Probing)];
    assert_eq!(s.select(Time::ZERO, &probing, &p), Selection::Wait(None));
}

// ---- redundant -----------------------------------------------------------------------------

#[test]
fn redundant_copies_on_every_usable_path() {
    let p = pkt(0, 100, Time::ZERO);
    let mut s = Redundant::default();
    let mut paths = [active(0), PathView::new(pid(1), PathState::Down), active(2)];
    assert_eq!(
        s.select(Time::ZERO, &paths, &p),
        Selection::Duplicate(vec![pid(0), pid(2)])
    );
    paths[2].cwnd_room = Some(0);
    assert_eq!(s.select(Time::ZERO, &paths, &p), Selection::Send(pid(0)));
    paths[0].state = PathState::Probing;
    assert_eq!(s.select(Time::ZERO, &paths, &p), Selection::Wait(None));
}

// ---- the module invariants, for every scheduler --------------------------------------------

fn arb_duration() -> impl Strategy<Value = Option<Duration>> {
    prop::option::of(prop_oneof![
        8 => (0u64..10_000_000_000).prop_map(Duration::from_nanos),
        1 => Just(Duration::MAX),
    ])
}

fn arb_rate() -> impl Strategy<Value = Option<f64>> {
    prop::option::of(prop_oneof![
        8 => 1.0..1e9_f64,
        1 => Just(0.0),
        1 => Just(1e-300),
        1 => Just(1e300),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NAN),
    ])
}

fn arb_view(id: u8) -> impl Strategy<Value = PathView> {
    let state = prop_oneof![
        Just(PathState::Probing),
        Just(PathState::Active),
        Just(PathState::Degraded),
        Just(PathState::Down),
    ];
    let room = prop::option::of(prop_oneof![Just(0u64), 0u64..100_000]);
    // One path in four in its overflow role (docs/protocol.md#overflow).
    let overflow = prop::bool::weighted(0.25);
    (
        state,
        (arb_duration(), arb_duration(), arb_duration()),
        (arb_rate(), arb_rate(), arb_rate()),
        (room, overflow),
    )
        .prop_map(
            move |(state, (srtt, min_rtt, base_owd), (pr, dr, cr), (room, overflow))| PathView {
                srtt,
                min_rtt,
                base_owd,
                owd: base_owd,
                pair_rate: pr,
                delivery_rate: dr,
                configured_rate: cr,
                cwnd_room: room,
                overflow,
                overflow_only: overflow,
                ..PathView::new(pid(id), state)
            },
        )
}

/// 1..=8 paths with distinct ids from 0..16, in id order (the trait's contract).
fn arb_views() -> impl Strategy<Value = Vec<PathView>> {
    prop::sample::subsequence((0..16u8).collect::<Vec<_>>(), 1..=8)
        .prop_flat_map(|ids| ids.into_iter().map(arb_view).collect::<Vec<_>>())
}

/// One call: the views, the packet length, how far time advances, how long the packet waited.
fn arb_step() -> impl Strategy<Value = (Vec<PathView>, usize, u64, u64)> {
    (
        arb_views(),
        1usize..=1500,
        0u64..20_000_000,
        0u64..5_000_000,
    )
}

/// `spills`: the scheduler may pick paths in their overflow role (`plait` only).
fn check(
    sel: &Selection,
    now: Time,
    views: &[PathView],
    spills: bool,
) -> Result<(), TestCaseError> {
    let ok = |v: &PathView| {
        if spills {
            v.is_selectable()
        } else {
            v.is_usable()
        }
    };
    let usable = |id: &PathId| views.iter().any(|v| v.id == *id && ok(v));
    let any_usable = views.iter().any(ok);
    match sel {
        Selection::Send(id) => prop_assert!(usable(id), "{sel:?} names an unusable path"),
        Selection::Duplicate(ids) => {
            prop_assert!(!ids.is_empty());
            prop_assert!(ids.iter().all(usable), "{sel:?} names an unusable path");
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), ids.len(), "{:?} repeats a path", sel);
        }
        Selection::Wait(None) => prop_assert!(!any_usable, "Wait(None) with a usable path"),
        Selection::Wait(Some(t)) => prop_assert!(any_usable && *t > now, "{sel:?} at {now:?}"),
    }
    if !any_usable {
        prop_assert_eq!(sel, &Selection::Wait(None));
    }
    Ok(())
}

proptest! {
    #[test]
    fn every_scheduler_keeps_the_invariants(steps in prop::collection::vec(arb_step(), 1..40)) {
        for kind in SchedulerKind::ALL {
            let mut s = AnyScheduler::new(kind);
            let mut twin = AnyScheduler::new(kind);
            let mut now = Time::ZERO;
            for (seq, (views, len, dt, waited)) in steps.iter().enumerate() {
                now += Duration::from_nanos(*dt);
                let p = pkt(seq as u64, *len, now.saturating_sub(Duration::from_nanos(*waited)));
                let sel = s.select(now, views, &p);
                check(&sel, now, views, kind == SchedulerKind::Plait)?;
                prop_assert_eq!(&twin.select(now, views, &p), &sel, "{} not deterministic", kind.name());
                let sent = match &sel {
                    Selection::Send(id) => vec![*id],
                    Selection::Duplicate(ids) => ids.clone(),
                    Selection::Wait(_) => vec![],
                };
                for id in sent {
                    s.on_sent(now, id, &p);
                    twin.on_sent(now, id, &p);
                }
            }
        }
    }
}

// ---- zero reordering (seed PET-BMP §III-B: "when packets are of the same size, it
// eliminates reordering fully") ---------------------------------------------------------------

/// The seed's path model: delay `D` to a FIFO bottleneck of rate `B` (Fig. 3).
struct Bottleneck {
    rate: f64,
    delay: Duration,
    free: Time,
}

impl Bottleneck {
    /// Receiver arrival of a packet of `len` bytes sent at `sent`.
    fn deliver(&mut self, sent: Time, len: usize) -> Time {
        self.free = (sent + self.delay).max(self.free) + transmission_time(len, self.rate);
        self.free
    }
}

/// Sends every packet (of `len` bytes, arriving at `arrivals`) where `s` says, on the model
/// paths `links`; returns the receiver arrival times in sequence order.
fn run_model(
    s: &mut impl Scheduler,
    links: &mut [Bottleneck],
    len: usize,
    arrivals: &[Time],
) -> Vec<Time> {
    let views: Vec<PathView> = (0u8..)
        .zip(links.iter())
        .map(|(i, l)| exact(i, l.rate, l.delay))
        .collect();
    (0u64..)
        .zip(arrivals)
        .map(|(seq, &a)| links[pick(s, a, &views, seq, len).index()].deliver(a, len))
        .collect()
}

fn reordered(arrivals: &[Time]) -> bool {
    arrivals.windows(2).any(|w| w[1] < w[0])
}

#[test]
fn wrr_reorders_on_unequal_delays() {
    let links = || {
        [(1e6, Duration::ZERO), (1e6, 50 * MS)].map(|(rate, delay)| Bottleneck {
            rate,
            delay,
            free: Time::ZERO,
        })
    };
    let arrivals: Vec<Time> = (0..20).map(Time::from_millis).collect();
    let wrr = run_model(
        &mut WeightedRoundRobin::default(),
        &mut links(),
        1000,
        &arrivals,
    );
    assert!(reordered(&wrr), "{wrr:?}");
    let edpf = run_model(&mut Edpf::default(), &mut links(), 1000, &arrivals);
    assert!(!reordered(&edpf), "{edpf:?}");
}

proptest! {
    #[test]
    fn edpf_with_exact_estimates_never_reorders(
        paths in prop::collection::vec((1e4..1e8_f64, 0u64..200_000_000), 1..=5),
        len in 40usize..=1500,
        gaps in prop::collection::vec(prop_oneof![Just(0u64), 0u64..2_000_000], 1..300),
    ) {
        let mut links: Vec<Bottleneck> = paths
            .iter()
            .map(|&(rate, d)| Bottleneck { rate, delay: Duration::from_nanos(d), free: Time::ZERO })
            .collect();
        let arrivals: Vec<Time> = gaps
            .iter()
            .scan(Time::ZERO, |t, &g| {
                *t += Duration::from_nanos(g);
                Some(*t)
            })
            .collect();
        let views: Vec<PathView> = (0u8..)
            .zip(&links)
            .map(|(i, l)| exact(i, l.rate, l.delay))
            .collect();
        let mut edpf = Edpf::default();
        let mut delivered = Vec::new();
        for (seq, &a) in (0u64..).zip(&arrivals) {
            let p = pkt(seq, len, a);
            let Selection::Send(id) = edpf.select(a, &views, &p) else {
                return Err(TestCaseError::fail("EDPF did not send"));
            };
            let predicted = edpf.expected_delivery(a, &views[id.index()], &p);
            edpf.on_sent(a, id, &p);
            let arrival = links[id.index()].deliver(a, len);
            // With exact B and D, EDPF's d is the model's true arrival.
            prop_assert_eq!(predicted, Some(arrival));
            delivered.push(arrival);
        }
        prop_assert!(!reordered(&delivered), "{:?}", delivered);
    }
}
