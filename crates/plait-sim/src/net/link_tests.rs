//! Tests of [`Link`] timing, queue limits, rate changes, up/down and accounting.

use std::time::Duration;

use plait_proto::Time;

use super::testkit::*;
use super::*;
use crate::packet::Packet;

#[test]
fn serialisation_and_propagation_are_exact() {
    let mut l = Link::new(cfg(10e6, 5), 1);
    let t0 = Time::from_millis(1000);
    assert!(l.enqueue(t0, pkt(0, 1500)).is_queued());
    assert!(l.enqueue(t0, pkt(0, 1500)).is_queued());
    // First event: the first serialisation ends at t0 + 1.2 ms exactly.
    assert_eq!(l.next_event(), Some(Time::from_nanos(1001 * MS + 200_000)));
    assert_eq!(
        l.next_delivery(),
        Some(Time::from_nanos(1006 * MS + 200_000))
    );
    let mut got = Vec::new();
    run(&mut l, [], Time::MAX, |t, _| got.push(t), |_| ());
    assert_eq!(
        got,
        [
            Time::from_nanos(1006 * MS + 200_000),
            Time::from_nanos(1007 * MS + 400_000)
        ]
    );
    assert_eq!(l.stats().busy, Duration::from_micros(2400));
    assert_eq!(l.next_event(), None);
}

#[test]
fn arrival_during_service_starts_when_predecessor_finishes() {
    let mut l = Link::new(cfg(10e6, 0), 1);
    let _ = l.enqueue(Time::ZERO, pkt(0, 1500));
    let _ = l.enqueue(Time::from_micros(700), pkt(0, 1500));
    assert_eq!(l.queued_packets(), 1);
    // Zero delay: delivery at the serialisation end; polling late keeps exact times.
    assert_eq!(
        l.poll_delivery_at(Time::from_millis(10)).map(|(t, _)| t),
        Some(Time::from_micros(1200))
    );
    assert_eq!(
        l.poll_delivery_at(Time::from_millis(10)).map(|(t, _)| t),
        Some(Time::from_micros(2400))
    );
    assert_eq!(l.poll_delivery(Time::from_millis(10)), None);
}

#[test]
fn nothing_is_delivered_early() {
    let mut l = Link::new(cfg(10e6, 5), 1);
    let _ = l.enqueue(Time::ZERO, pkt(0, 1500));
    assert_eq!(l.poll_delivery(Time::from_nanos(6_199_999)), None);
    assert_eq!(l.propagating_packets(), 1);
    assert!(l.poll_delivery(Time::from_nanos(6_200_000)).is_some());
}

#[test]
fn drop_tail_packet_limit_counts_the_packet_in_service() {
    // One packet in service, then a burst of N + 3: N - 1 wait, 4 are dropped.
    const N: usize = 10;
    let mut c = cfg(10e6, 1);
    c.queue = QueueConfig::packets(N);
    let mut l = Link::new(c, 1);
    let _ = l.enqueue(Time::ZERO, pkt(0, 1000));
    let t = Time::from_micros(100);
    let results: Vec<Enqueue> = (0..N + 3).map(|_| l.enqueue(t, pkt(0, 1000))).collect();
    assert_eq!(results.iter().filter(|r| r.is_queued()).count(), N - 1);
    // Drop-tail: the last arrivals are the ones refused.
    assert!(
        results[N - 1..]
            .iter()
            .all(|r| matches!(r, Enqueue::DroppedQueueFull(_)))
    );
    assert_eq!(l.queued_packets(), N - 1);
    assert_eq!(l.stats().dropped_queue_full, 4);
    assert_eq!(l.stats().max_queued_packets, N - 1);
}

#[test]
fn drop_tail_ns2_default_holds_fifty_with_the_one_in_service() {
    let mut l = Link::new(cfg(10e6, 1), 1);
    let accepted = (0..60)
        .filter(|_| l.enqueue(Time::ZERO, pkt(0, 1040)).is_queued())
        .count();
    assert_eq!(accepted, 50);
    assert!(l.is_busy());
    assert_eq!((l.queued_packets(), l.queued_bytes()), (49, 49 * 1040));
    // One slot frees when the first serialisation ends (832 us), not before.
    assert!(
        !l.enqueue(Time::from_nanos(831_999), pkt(0, 1040))
            .is_queued()
    );
    assert!(
        l.enqueue(Time::from_nanos(832_000), pkt(0, 1040))
            .is_queued()
    );
    assert!(
        !l.enqueue(Time::from_nanos(832_000), pkt(0, 1040))
            .is_queued()
    );
}

#[test]
fn drop_tail_byte_limit_counts_the_packet_in_service() {
    let mut c = cfg(10e6, 1);
    c.queue = QueueConfig::bytes(15_000);
    let mut l = Link::new(c, 1);
    let _ = l.enqueue(Time::ZERO, pkt(0, 1500));
    let t = Time::from_micros(100);
    let accepted = (0..13)
        .filter(|_| l.enqueue(t, pkt(0, 1500)).is_queued())
        .count();
    assert_eq!(accepted, 9); // 1500 in service + 9 * 1500 = 15 000
    assert_eq!(l.stats().dropped_queue_full, 4);
    assert_eq!(l.queued_bytes(), 13_500);
    // A big arrival is refused while a small one still fits.
    let _ = l.enqueue(Time::from_micros(1200), pkt(0, 1500)); // service moved on: 1500 free
    assert!(!l.enqueue(Time::from_micros(1200), pkt(0, 100)).is_queued());
    let mut l2 = Link::new(
        LinkConfig {
            queue: QueueConfig::bytes(2000),
            ..cfg(10e6, 1)
        },
        1,
    );
    let _ = l2.enqueue(Time::ZERO, pkt(0, 1500));
    assert!(!l2.enqueue(Time::ZERO, pkt(0, 1000)).is_queued());
    assert!(l2.enqueue(Time::ZERO, pkt(0, 500)).is_queued());
}

#[test]
fn set_rate_applies_to_packets_starting_at_or_after_now() {
    let mut l = Link::new(cfg(10e6, 0), 1);
    for _ in 0..3 {
        let _ = l.enqueue(Time::ZERO, pkt(0, 1500));
    }
    // Mid-service change: the packet in service keeps 1.2 ms; the next takes 0.6 ms.
    l.set_rate(Time::from_micros(500), 20e6);
    assert_eq!(l.next_event(), Some(Time::from_micros(1200)));
    let _ = l.poll_delivery(Time::from_micros(1200));
    assert_eq!(l.next_event(), Some(Time::from_micros(1800)));
    // A change exactly when a packet starts applies to that packet.
    l.set_rate(Time::from_micros(1800), 5e6);
    let _ = l.poll_delivery(Time::from_micros(1800));
    assert_eq!(l.next_event(), Some(Time::from_micros(4200)));
    assert_eq!(l.config().rate_bps, 5e6);
}

#[test]
fn zero_rate_stalls_until_a_rate_is_set() {
    let mut l = Link::new(cfg(0.0, 1), 1);
    let _ = l.enqueue(Time::ZERO, pkt(0, 1500));
    let _ = l.enqueue(Time::ZERO, pkt(0, 1500));
    assert_eq!(
        (l.next_event(), l.queued_packets(), l.is_busy()),
        (None, 2, false)
    );
    l.set_rate(Time::from_millis(10), 10e6);
    assert_eq!(l.next_event(), Some(Time::from_micros(11_200)));
    l.set_rate(Time::from_millis(11), 0.0);
    let mut got = Vec::new();
    run(&mut l, [], Time::MAX, |t, _| got.push(t), |_| ());
    assert_eq!(got, [Time::from_micros(12_200)]);
    assert_eq!(l.queued_packets(), 1);
}

#[test]
fn down_flushes_queue_and_service_but_not_propagation() {
    let mut l = Link::new(cfg(10e6, 10), 1);
    for _ in 0..4 {
        let _ = l.enqueue(Time::ZERO, pkt(0, 1500));
    }
    // At 2 ms: #1 propagating, #2 in service (since 1.2 ms), #3 and #4 waiting.
    l.set_up(Time::from_millis(2), false);
    assert!(!l.is_up() && !l.is_busy());
    let flushed: Vec<Dropped> = std::iter::from_fn(|| l.poll_dropped()).collect();
    assert_eq!(flushed.len(), 3);
    assert!(
        flushed
            .iter()
            .all(|d| d.cause == DropCause::Down && d.at == Time::from_millis(2))
    );
    assert!(matches!(
        l.enqueue(Time::from_millis(3), pkt(0, 1500)),
        Enqueue::DroppedDown(_)
    ));
    assert_eq!(
        l.poll_delivery(Time::from_millis(20)).map(|p| p.size),
        Some(1500)
    );
    assert_eq!(l.stats().dropped_down, 4);
    assert_eq!(l.stats().busy, Duration::from_millis(2));
    // Back up: a fresh start.
    l.set_up(Time::from_millis(30), true);
    assert!(l.enqueue(Time::from_millis(30), pkt(0, 1500)).is_queued());
    assert_eq!(l.next_delivery(), Some(Time::from_micros(41_200)));
}

#[test]
fn every_packet_is_accounted_for() {
    let c = LinkConfig {
        loss: LossModel::Bernoulli { p: 0.1 },
        queue: QueueConfig::packets(20),
        discipline: Discipline::WfqLongestQueueDrop,
        ..cfg(5e6, 3)
    };
    let mut l = Link::new(c, 2);
    let until = 2_000 * MS;
    let load = merge(vec![
        cbr(0, 1000, 6e6, until),
        cbr(1, 500, 3e6, until),
        cbr(2, 1500, 1e6, until),
    ]);
    let n = load.len() as u64;
    let (down, up) = (Time::from_millis(700), Time::from_millis(900));
    let mut segments: [Vec<(Time, Packet)>; 3] = Default::default();
    for (t, p) in load {
        segments[usize::from(t >= down) + usize::from(t >= up)].push((t, p));
    }
    let [before, during, after] = segments;
    let (mut delivered, mut dropped) = (0u64, 0u64);
    run(
        &mut l,
        before,
        down,
        |_, _| delivered += 1,
        |_| dropped += 1,
    );
    l.set_up(down, false);
    dropped += std::iter::from_fn(|| l.poll_dropped()).count() as u64;
    run(&mut l, during, up, |_, _| delivered += 1, |_| dropped += 1);
    l.set_up(up, true);
    run(
        &mut l,
        after,
        Time::MAX,
        |_, _| delivered += 1,
        |_| dropped += 1,
    );
    let s = l.stats();
    assert_eq!(s.arrived, n);
    assert_eq!(s.delivered, delivered);
    let drops = s.dropped_queue_full + s.dropped_loss + s.dropped_down;
    assert_eq!(drops, dropped);
    assert_eq!(s.arrived, s.delivered + drops);
    assert!(s.dropped_queue_full > 0 && s.dropped_loss > 0 && s.dropped_down > 0);
    assert_eq!(l.next_event(), None);
}

#[test]
fn lazy_driver_on_next_delivery_sees_the_same_deliveries() {
    let until = 1_000 * MS;
    let load = || merge(vec![cbr(0, 1000, 6e6, until), cbr(1, 700, 6e6, until)]);
    let c = LinkConfig {
        discipline: Discipline::Wfq,
        ..cfg(10e6, 7)
    };
    let mut eager = Vec::new();
    run(
        &mut Link::new(c.clone(), 1),
        load(),
        Time::MAX,
        |t, p| eager.push((t, p.flow)),
        |_| (),
    );
    // Lazy: wake only at deliveries (arrivals still go in at their times).
    let mut l = Link::new(c, 1);
    let mut lazy = Vec::new();
    let mut arrivals = load().into_iter().peekable();
    loop {
        let ta = arrivals.peek().map(|(t, _)| *t);
        match (ta, l.next_delivery()) {
            (None, None) => break,
            (Some(a), d) if d.is_none_or(|d| a < d) => {
                let (t, p) = arrivals.next().expect("peeked");
                let _ = l.enqueue(t, p);
            }
            (_, d) => {
                let d = d.expect("an arrival not before it");
                while let Some((t, p)) = l.poll_delivery_at(d) {
                    lazy.push((t, p.flow));
                }
            }
        }
    }
    assert!(eager.len() > 1000);
    assert_eq!(eager, lazy);
}
