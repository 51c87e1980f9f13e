//! The flow-queued send queue inside a session (docs/protocol.md#send-queue): a sparse flow
//! is not stuck behind a bulk backlog, CoDel drops or marks and the session counts it,
//! every accepted packet is accounted for, and heads that waited too long still go stale.

mod support;

use std::time::Duration;

use plait_proto::path::PathHints;
use plait_proto::sched::SchedulerKind;
use plait_proto::{Config, Delivery, Io, PathId, Session, Time, drive};
use support::{LinkSpec, Pair};

const MS: Duration = Duration::from_millis(1);
const BULK_PORT: u16 = 4000;
const SPARSE_PORT: u16 = 53;

/// An IPv4 UDP packet of `len` bytes with TOS `tos` (correct header checksum) carrying
/// `serial` and the time it was handed in.
fn udp(sport: u16, len: usize, tos: u8, serial: u32, sent: Time) -> Vec<u8> {
    let mut p = vec![0x45, tos];
    p.extend_from_slice(&(len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    let c = checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0, 0, 0, 0]);
    p.extend_from_slice(&serial.to_be_bytes());
    p.extend_from_slice(&sent.as_nanos().to_be_bytes());
    p.resize(len, 0);
    p
}

/// The IPv4 header checksum from scratch (the checksum field counted as zero).
fn checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header[..20]
        .chunks(2)
        .enumerate()
        .filter(|(i, _)| *i != 5)
        .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn sport(p: &[u8]) -> u16 {
    u16::from_be_bytes([p[20], p[21]])
}

fn sent_at(p: &[u8]) -> Time {
    Time::from_nanos(u64::from_be_bytes(p[32..40].try_into().unwrap()))
}

/// One 1 Mbit/s, 20 ms path; `ikr` paces at the hinted rate, 80 % of the link's, so the
/// excess of a faster source waits in the send queue rather than in the link.
fn pair(codel: bool) -> Pair {
    let mut config = Config {
        scheduler: SchedulerKind::Ikr,
        trust_hints: true,
        repair: false,
        ..Config::default()
    };
    if !codel {
        // A target no queue reaches before `max_queue_delay` drops it.
        config.send_queue_target = Duration::from_secs(60);
        config.send_queue_interval = Duration::from_secs(60);
    }
    let link = LinkSpec {
        rate: 125_000.0,
        delay: 20 * MS,
        loss: 0.0,
        queue_bytes: 50_000,
    };
    Pair::new(config.clone(), config, &[link], &[Some(100_000.0)], 3)
}

struct Run {
    pair: Pair,
    /// (source port, one-way delay, packet) of everything delivered at b.
    delivered: Vec<(u16, Duration, Vec<u8>)>,
}

/// Bulk (1000-byte packets every `gap`) with TOS `bulk_tos`, and a 100-byte sparse packet
/// every 12 bulk packets, from 0.3 s to 3.3 s.
fn bulk_and_sparse(bulk_tos: u8, gap: Duration, codel: bool) -> Run {
    let mut pair = pair(codel);
    let (start, end) = (Time::from_millis(300), Time::from_millis(3300));
    let mut next = start;
    let mut serial = 0u32;
    pair.run_until(Time::from_millis(4000), |pair| {
        if next >= end {
            return None;
        }
        if pair.now >= next {
            let bulk = udp(BULK_PORT, 1000, bulk_tos, serial, pair.now);
            pair.send_inner(0, &bulk);
            if serial.is_multiple_of(12) {
                pair.send_inner(0, &udp(SPARSE_PORT, 100, 0, serial, pair.now));
            }
            serial += 1;
            next += gap;
        }
        Some(next)
    });
    let delivered = pair
        .take_delivered(0)
        .into_iter()
        .map(|(t, p, _)| (sport(&p), t - sent_at(&p), p))
        .collect();
    Run { pair, delivered }
}

fn delays(run: &Run, port: u16) -> Vec<Duration> {
    let mut d: Vec<Duration> = run
        .delivered
        .iter()
        .filter(|(p, _, _)| *p == port)
        .map(|(_, d, _)| *d)
        .collect();
    d.sort();
    d
}

fn accounted(s: &Session) {
    let st = s.stats();
    assert_eq!(
        st.inner_accepted,
        st.inner_sent
            + st.inner_stale
            + st.inner_codel_dropped
            + st.inner_overflow_dropped
            + s.send_queue_len() as u64,
        "{st:?}"
    );
}

#[test]
fn a_sparse_flow_is_not_stuck_behind_a_bulk_backlog() {
    // ECN-capable bulk at 2.5 times what the scheduler sends, ignoring its marks: its
    // backlog grows to the stale limit.
    let run = bulk_and_sparse(0b10, 4 * MS, true);
    let st = run.pair.a.stats();
    let (sparse, bulk) = (delays(&run, SPARSE_PORT), delays(&run, BULK_PORT));
    assert!(
        sparse.len() >= 55,
        "{} sparse packets arrived",
        sparse.len()
    );
    let worst_sparse = *sparse.last().unwrap();
    let bulk_p90 = bulk[bulk.len() * 9 / 10];
    println!("sparse worst {worst_sparse:?}, bulk p90 {bulk_p90:?}, {st:?}");
    assert!(bulk_p90 > 200 * MS, "the bulk flow queued: {bulk_p90:?}");
    // Path delay 20 ms, a 1000-byte packet takes 8 ms to serialise: a sparse packet waits
    // for at most the bulk packet in service and one paced slot.
    assert!(worst_sparse < 60 * MS, "sparse waited {worst_sparse:?}");
    assert!(
        st.inner_ce_marked > 0 && st.inner_codel_dropped == 0,
        "{st:?}"
    );
    for (_, _, p) in run.delivered.iter().filter(|(_, _, p)| p[1] & 0b11 == 0b11) {
        assert_eq!(
            u16::from_be_bytes([p[10], p[11]]),
            checksum(p),
            "CE-marked, valid"
        );
    }
    accounted(&run.pair.a);
}

#[test]
fn codel_drops_keep_the_bulk_queue_short() {
    // Bulk about a third above what the scheduler sends, not ECN-capable.
    let p90 = |run: &Run| {
        let bulk = delays(run, BULK_PORT);
        bulk[bulk.len() * 9 / 10]
    };
    let run = bulk_and_sparse(0, 7 * MS, true);
    let st = run.pair.a.stats();
    let without = bulk_and_sparse(0, 7 * MS, false);
    let (with_p90, without_p90) = (p90(&run), p90(&without));
    println!("bulk p90 {with_p90:?} (without CoDel {without_p90:?}), {st:?}");
    assert!(
        st.inner_codel_dropped > 20 && st.inner_ce_marked == 0,
        "{st:?}"
    );
    assert_eq!(st.inner_stale, 0, "{st:?}");
    // Without CoDel the excess piles up towards the 500 ms stale limit; with it the
    // standing queue stays a small multiple of the target.
    assert!(with_p90 < 120 * MS, "{with_p90:?}");
    assert!(without_p90 > 400 * MS, "{without_p90:?}");
    assert_eq!(without.pair.a.stats().inner_codel_dropped, 0);
    accounted(&run.pair.a);
}

#[derive(Default)]
struct Sink;

impl Io for Sink {
    fn transmit(&mut self, _: Time, _: PathId, _: &[u8]) {}
    fn deliver(&mut self, _: Time, _: &[u8], _: &Delivery) {}
}

#[test]
fn heads_that_waited_too_long_still_go_stale() {
    // One path that never answers its probes: nothing is usable, everything waits.
    let mut s = Session::new(Config::default()).unwrap();
    s.add_path(Time::ZERO, PathId(0), PathHints::default())
        .unwrap();
    let mut buf = vec![0; 65_536];
    for i in 0..10u32 {
        let now = Time::from_millis(u64::from(i));
        let port = if i % 2 == 0 { BULK_PORT } else { SPARSE_PORT };
        s.handle_inner_packet(now, &udp(port, 500, 0, i, now))
            .unwrap();
        drive(&mut s, now, &mut Sink, &mut buf);
    }
    assert_eq!(s.send_queue_len(), 10);
    assert_eq!(s.send_queue_bytes(), 5000);
    let deadline = s.poll_timeout().unwrap();
    assert!(deadline <= Time::from_millis(500), "{deadline:?}");
    drive(&mut s, Time::from_millis(600), &mut Sink, &mut buf);
    let st = s.stats();
    assert_eq!((st.inner_stale, s.send_queue_len()), (10, 0), "{st:?}");
    accounted(&s);
}
