//! Streams end to end between two sessions over fake paths (tests/support): every byte
//! written is read exactly once, in order, per stream, under loss, unequal paths, a path
//! that dies, many streams and resets; per-path goodput against capacity is reported.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use plait_proto::cc::CongestionKind;
use plait_proto::stream::StreamLimits;
use plait_proto::{Config, Event, Side, StreamEvent, StreamId, Time};
use support::{LinkSpec, Pair};

const MS: Duration = Duration::from_millis(1);

fn link(mbit: f64, one_way_ms: u64, loss: f64) -> LinkSpec {
    let rate = mbit * 1e6 / 8.0;
    LinkSpec {
        rate,
        delay: MS * one_way_ms as u32,
        loss,
        // A queue of 100 ms at the link's rate, as the test bed's.
        queue_bytes: (rate * 0.1) as usize,
    }
}

fn configs() -> (Config, Config) {
    let a = Config {
        side: Side::Client,
        ..Config::default()
    };
    let b = Config {
        side: Side::Server,
        ..Config::default()
    };
    (a, b)
}

/// The byte at `offset` of stream number `n`'s content.
fn pattern(n: u64, offset: u64) -> u8 {
    (offset.wrapping_mul(2_654_435_761).wrapping_add(n * 97) >> 7) as u8
}

/// One side's application: writes `total` bytes on each stream it opened, reads and checks
/// every stream the peer opened.
#[derive(Default)]
struct App {
    /// Streams this side writes: id → (bytes written, total to write, stream number).
    writing: BTreeMap<StreamId, (u64, u64, u64)>,
    /// Streams this side reads: id → (bytes read, finished, stream number from request).
    reading: BTreeMap<StreamId, (u64, bool, u64)>,
    resets: Vec<(StreamId, u64)>,
    buf: Vec<u8>,
}

impl App {
    fn pump(&mut self, side: usize, pair: &mut Pair) {
        let now = pair.now;
        let session = if side == 0 { &mut pair.a } else { &mut pair.b };
        for (id, (written, total, n)) in self.writing.iter_mut() {
            while written < total {
                let chunk: Vec<u8> = (*written..(*written + 16_384).min(*total))
                    .map(|o| pattern(*n, o))
                    .collect();
                let k = session.stream_write(now, *id, &chunk).expect("write");
                *written += k as u64;
                if k < chunk.len() {
                    break;
                }
                if written == total {
                    session.stream_finish(now, *id).expect("finish");
                }
            }
        }
        for event in pair.take_events(side) {
            match event {
                Event::Stream(StreamEvent::Opened { id, request }) => {
                    let n = u64::from_be_bytes(request[..8].try_into().unwrap());
                    self.reading.insert(id, (0, false, n));
                    // Nothing to say back: end this side's direction at once.
                    let session = if side == 0 { &mut pair.a } else { &mut pair.b };
                    session
                        .stream_finish(now, id)
                        .expect("finish the reply direction");
                }
                Event::Stream(StreamEvent::Reset { id, code }) => {
                    self.resets.push((id, code));
                    self.reading.remove(&id);
                }
                _ => {}
            }
        }
        let session = if side == 0 { &mut pair.a } else { &mut pair.b };
        self.buf.resize(64 << 10, 0);
        // The peer says nothing back on our streams: read their empty replies to the end,
        // as an application must before a stream is forgotten.
        for id in self.writing.keys() {
            if let Ok(r) = session.stream_read(now, *id, &mut self.buf) {
                assert_eq!(r.len, 0, "no reply bytes on {id}");
            }
        }
        for (id, (read, fin, n)) in self.reading.iter_mut() {
            while !*fin {
                let r = session.stream_read(now, *id, &mut self.buf).expect("read");
                for (i, b) in self.buf[..r.len].iter().enumerate() {
                    assert_eq!(
                        *b,
                        pattern(*n, *read + i as u64),
                        "{id} byte {}",
                        *read + i as u64
                    );
                }
                *read += r.len as u64;
                *fin = r.fin;
                if r.len == 0 {
                    break;
                }
            }
        }
    }

    fn open(&mut self, side: usize, pair: &mut Pair, n: u64, total: u64) -> StreamId {
        let now = pair.now;
        let session = if side == 0 { &mut pair.a } else { &mut pair.b };
        let id = session.open_stream(now, &n.to_be_bytes()).expect("open");
        self.writing.insert(id, (0, total, n));
        id
    }
}

/// Runs both applications until `until` or until every stream is read to its end;
/// returns when the last byte was read.
fn run(pair: &mut Pair, apps: &mut [App; 2], until: Time) -> Time {
    let step = MS;
    let mut t = pair.now;
    while t < until {
        t += step;
        pair.run_until(t, |_| None);
        for (side, app) in apps.iter_mut().enumerate() {
            app.pump(side, pair);
        }
        pair.drive_now();
        let done = apps
            .iter()
            .all(|a| a.reading.values().all(|(_, fin, _)| *fin))
            && apps[0].writing.len() + apps[1].writing.len()
                == apps[0].reading.len() + apps[1].reading.len();
        if done {
            // Let the last acknowledgements and flow-control updates through.
            let finished = pair.now;
            pair.run_until(pair.now + Duration::from_secs(2), |_| None);
            return finished;
        }
    }
    pair.now
}

#[test]
fn one_stream_over_three_unequal_paths_one_lossy() {
    // Rates 8:1 apart, RTTs 20 to 100 ms, 2 % random loss on the middle path.
    let paths = [link(16.0, 10, 0.0), link(4.0, 30, 0.02), link(2.0, 50, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 1);
    let mut apps = [App::default(), App::default()];
    let total = 8 << 20;
    apps[0].open(0, &mut pair, 1, total);
    let finished = run(&mut pair, &mut apps, Time::from_millis(60_000));
    let (read, fin, _) = apps[1].reading.values().next().copied().expect("opened");
    assert_eq!((read, fin), (total, true));
    let secs = finished.as_nanos() as f64 / 1e9;
    let goodput = total as f64 * 8.0 / secs / 1e6;
    let per_path: Vec<f64> = pair
        .link_delivered_bytes(0)
        .iter()
        .map(|b| *b as f64 * 8.0 / secs / 1e6)
        .collect();
    eprintln!(
        "8 MiB in {secs:.2} s: goodput {goodput:.2} Mbit/s of 22 ({:.2}); per path {per_path:.2?} Mbit/s; {:?}",
        goodput / 22.0,
        pair.a.stream_stats()
    );
    // Every path carried stream data, the lossy one too.
    assert!(per_path.iter().all(|r| *r > 0.1), "{per_path:?}");
    assert!(
        pair.a.stream_stats().bytes_retransmitted > 0,
        "the lossy path lost some"
    );
    // Flow control and buffers are freed when done.
    assert_eq!(pair.a.stream_buffered(), (0, 0));
    assert_eq!(pair.b.stream_buffered(), (0, 0));
    assert_eq!(pair.a.stream_stats().open, 0);
    assert_eq!(pair.b.stream_stats().open, 0);
}

#[test]
fn many_streams_both_ways_survive_a_dead_path() {
    let paths = [link(8.0, 10, 0.01), link(8.0, 40, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 2);
    let mut apps = [App::default(), App::default()];
    for n in 0..20 {
        apps[0].open(0, &mut pair, n, 50_000 + n * 7_919);
        apps[1].open(1, &mut pair, 100 + n, 30_000 + n * 3_001);
    }
    run(&mut pair, &mut apps, Time::from_millis(300));
    // Path 0 dies both ways mid-transfer; everything must still arrive over path 1.
    pair.blackhole[0][0] = true;
    pair.blackhole[1][0] = true;
    run(&mut pair, &mut apps, Time::from_millis(60_000));
    for (side, app) in apps.iter().enumerate() {
        assert_eq!(app.reading.len(), 20, "side {side}");
        let peer = &apps[1 - side];
        for (read, fin, n) in app.reading.values() {
            let total = peer.writing.values().find(|w| w.2 == *n).unwrap().1;
            assert_eq!((*read, *fin), (total, true), "side {side} stream {n}");
        }
    }
    assert_eq!(pair.a.stream_stats().open + pair.b.stream_stats().open, 0);
}

#[test]
fn a_reset_frees_both_ends_and_the_other_streams_go_on() {
    let paths = [link(4.0, 20, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 3);
    let mut apps = [App::default(), App::default()];
    let doomed = apps[0].open(0, &mut pair, 7, 10 << 20);
    apps[0].open(0, &mut pair, 8, 200_000);
    run(&mut pair, &mut apps, Time::from_millis(400));
    let now = pair.now;
    pair.a.stream_reset(now, doomed, 42).unwrap();
    apps[0].writing.remove(&doomed);
    pair.drive_now();
    run(&mut pair, &mut apps, Time::from_millis(30_000));
    assert_eq!(apps[1].resets, vec![(doomed, 42)]);
    let (read, fin, _) = apps[1]
        .reading
        .values()
        .find(|r| r.2 == 8)
        .copied()
        .unwrap();
    assert_eq!((read, fin), (200_000, true));
    // Both ends forgot the reset stream; nothing is held.
    assert_eq!(pair.a.stream_stats().open, 0);
    assert_eq!(pair.b.stream_stats().open, 0);
    assert_eq!(pair.a.stream_buffered(), (0, 0));
    assert_eq!(pair.b.stream_buffered(), (0, 0));
    assert!(pair.a.stream_write(now, doomed, b"x").is_err());
}

#[test]
fn a_slow_reader_is_held_by_flow_control_and_memory_stays_bounded() {
    let paths = [link(20.0, 5, 0.0)];
    let (mut a, mut b) = configs();
    let limits = StreamLimits {
        initial_stream_window: 64 << 10,
        max_stream_window: 64 << 10,
        ..StreamLimits::default()
    };
    a.streams = limits.clone();
    b.streams = limits;
    let mut pair = Pair::new(a, b, &paths, &[], 4);
    let now = pair.now;
    let id = pair.a.open_stream(now, b"slow").unwrap();
    let big = vec![5u8; 1 << 20];
    // No path measured yet: the send buffer takes up to the target's floor (less the 5-byte
    // open request), still four times b's window.
    let floor = plait_proto::session::MIN_SEND_TARGET;
    assert_eq!(
        pair.a.stream_write(now, id, &big).unwrap() as u64,
        floor - 5
    );
    pair.drive_now();
    // Nobody reads at b: b holds at most its window.
    pair.run_until(Time::from_millis(2_000), |_| None);
    let (_, held) = pair.b.stream_buffered();
    assert!(held <= 64 << 10, "b holds {held} bytes");
    assert!(held > 32 << 10, "b holds {held} bytes: the window was used");
    let sent = pair.a.stream_stats().bytes_sent;
    assert!(
        sent <= (64 << 10) + 8,
        "a sent {sent} bytes beyond the window"
    );
}

#[test]
fn same_seed_same_bytes_on_the_wire() {
    let trace = || {
        let paths = [link(8.0, 10, 0.02), link(2.0, 40, 0.0)];
        let (a, b) = configs();
        let mut pair = Pair::new(a, b, &paths, &[], 9);
        let mut apps = [App::default(), App::default()];
        apps[0].open(0, &mut pair, 1, 300_000);
        apps[1].open(1, &mut pair, 2, 100_000);
        run(&mut pair, &mut apps, Time::from_millis(20_000));
        pair.trace_hash
    };
    assert_eq!(trace(), trace());
}

#[test]
fn every_congestion_controller_delivers_over_unequal_paths() {
    // The first test's paths, under each controller: correctness asserted, goodput reported
    // (`cargo test -p plait-proto --release --test streams every_congestion -- --nocapture`).
    for kind in plait_proto::cc::CongestionKind::ALL {
        let paths = [link(16.0, 10, 0.0), link(4.0, 30, 0.02), link(2.0, 50, 0.0)];
        let (mut a, mut b) = configs();
        a.congestion = *kind;
        b.congestion = *kind;
        let mut pair = Pair::new(a, b, &paths, &[], 5);
        let mut apps = [App::default(), App::default()];
        let total = 4 << 20;
        apps[0].open(0, &mut pair, 1, total);
        let finished = run(&mut pair, &mut apps, Time::from_millis(60_000));
        let (read, fin, _) = apps[1].reading.values().next().copied().expect("opened");
        assert_eq!((read, fin), (total, true), "{}", kind.name());
        let secs = finished.as_nanos() as f64 / 1e9;
        let goodput = total as f64 * 8.0 / secs / 1e6;
        eprintln!(
            "{:8} 4 MiB in {secs:.2} s: {goodput:.2} Mbit/s ({:.2} of 22), retransmitted {} B",
            kind.name(),
            goodput / 22.0,
            pair.a.stream_stats().bytes_retransmitted
        );
    }
}

#[test]
fn adaptive_control_moves_only_the_lossy_path_to_bbr() {
    // A clean path and one whose link drops 5 % (T3's situation, docs/protocol.md
    // #congestion-control): `adaptive` runs BBR on the lossy path only and fills it, where
    // NewReno holds a window of a few datagrams there.
    let transfer = |kind: CongestionKind, seed: u64| {
        let paths = [link(8.0, 10, 0.0), link(8.0, 30, 0.05)];
        let (mut a, mut b) = configs();
        a.congestion = kind;
        b.congestion = kind;
        let mut pair = Pair::new(a, b, &paths, &[], seed);
        let mut apps = [App::default(), App::default()];
        let total = 8 << 20;
        apps[0].open(0, &mut pair, 1, total);
        let finished = run(&mut pair, &mut apps, Time::from_millis(60_000));
        let (read, fin, _) = apps[1].reading.values().next().copied().expect("opened");
        assert_eq!((read, fin), (total, true), "{}", kind.name());
        let names: Vec<&str> = (0..2)
            .map(|i| {
                pair.a
                    .path_congestion(plait_proto::PathId(i))
                    .unwrap()
                    .controller
            })
            .collect();
        (finished, names)
    };
    // Three seeds, medians compared: in one seed in ten or so the lossy path loses a whole
    // window's tail, goes down for a moment and the two controllers finish close together.
    let (mut newreno, mut adaptive) = (Vec::new(), Vec::new());
    for seed in [11, 12, 13] {
        newreno.push(transfer(CongestionKind::NewReno, seed).0);
        let (finished, names) = transfer(CongestionKind::Adaptive, seed);
        assert_eq!(
            names,
            ["adaptive (newreno)", "adaptive (bbr)"],
            "seed {seed}"
        );
        adaptive.push(finished);
    }
    newreno.sort();
    adaptive.sort();
    eprintln!("8 MiB: newreno {newreno:?}, adaptive {adaptive:?}");
    // Simulated time, deterministic: the lossy path has half the capacity.
    assert!(
        adaptive[1].as_nanos() * 4 < newreno[1].as_nanos() * 3,
        "{adaptive:?} against {newreno:?}"
    );
}

#[test]
fn a_path_that_dies_both_ways_and_returns_is_used_again() {
    let paths = [link(20.0, 10, 0.0), link(10.0, 50, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 6);
    let mut apps = [App::default(), App::default()];
    apps[0].open(0, &mut pair, 1, 1 << 40);
    let mut delivered = Vec::new();
    for step in 1..=90u64 {
        if step == 30 {
            pair.blackhole[0][0] = true;
            pair.blackhole[1][0] = true;
        }
        if step == 50 {
            pair.blackhole[0][0] = false;
            pair.blackhole[1][0] = false;
        }
        run(&mut pair, &mut apps, Time::from_millis(step * 100));
        let read: u64 = apps[1].reading.values().map(|r| r.0).sum();
        let cc = pair.a.path_congestion(plait_proto::PathId(0)).unwrap();
        let view = &pair.a.path_views()[0];
        eprintln!(
            "{:.1} s read {read} window {} in flight {} state {:?} srtt {:?}",
            step as f64 / 10.0,
            cc.window,
            cc.bytes_in_flight,
            view.state,
            view.srtt
        );
        delivered.push(read);
    }
    let rate = |from: usize, to: usize| {
        (delivered[to] - delivered[from]) as f64 * 8.0 / ((to - from) as f64 / 10.0) / 1e6
    };
    // Before: after the start's slow-start overshoot has drained (the reader catches up on
    // what the reorder held, briefly above the links' sum).
    let (before, during, after) = (rate(20, 29), rate(35, 49), rate(70, 89));
    eprintln!("Mbit/s before {before:.1}, blackhole {during:.1}, after {after:.1}");
    assert!(
        during > 0.8 * 10.0 * 0.9,
        "the live path carries on: {during:.1}"
    );
    assert!(
        after > before * 0.9,
        "the returned path is used again: {after:.1} vs {before:.1}"
    );
}

/// One gigabyte over three paths 8:1 apart, one lossy, under NewReno and under BBR: every
/// byte in order, per-path goodput against capacity reported. About 10 s of wall time per
/// controller in release:
/// `cargo test -p plait-proto --release --test streams one_gigabyte -- --ignored --nocapture`.
#[test]
#[ignore = "1 GB: run in release with --ignored"]
fn one_gigabyte_over_three_paths() {
    for kind in [CongestionKind::NewReno, CongestionKind::Bbr] {
        let paths = [
            link(80.0, 10, 0.0),
            link(20.0, 30, 0.01),
            link(10.0, 50, 0.0),
        ];
        let (mut a, mut b) = configs();
        a.congestion = kind;
        b.congestion = kind;
        let mut pair = Pair::new(a, b, &paths, &[], 10);
        let mut apps = [App::default(), App::default()];
        let total = 1 << 30;
        apps[0].open(0, &mut pair, 1, total);
        let finished = run(&mut pair, &mut apps, Time::from_millis(600_000));
        let (read, fin, _) = apps[1].reading.values().next().copied().expect("opened");
        assert_eq!((read, fin), (total, true), "{}", kind.name());
        let secs = finished.as_nanos() as f64 / 1e9;
        let capacity = [80.0, 20.0, 10.0];
        let per_path: Vec<String> = pair
            .link_delivered_bytes(0)
            .iter()
            .zip(capacity)
            .map(|(b, c)| format!("{:.1}/{c}", *b as f64 * 8.0 / secs / 1e6))
            .collect();
        let goodput = total as f64 * 8.0 / secs / 1e6;
        eprintln!(
            "{}: 1 GiB in {secs:.1} s: {goodput:.1} Mbit/s of 110 ({:.3}); per path (Mbit/s of capacity, datagrams with headers) {per_path:?}; retransmitted {} B",
            kind.name(),
            goodput / 110.0,
            pair.a.stream_stats().bytes_retransmitted
        );
    }
}

#[test]
fn every_stream_scheduler_delivers_within_the_windows() {
    // Each scheduler places stream datagrams only where a window has room: whatever it
    // prefers, every byte arrives in order and no path's window is overrun.
    for kind in plait_proto::sched::SchedulerKind::ALL {
        let paths = [link(16.0, 10, 0.0), link(4.0, 30, 0.02), link(2.0, 50, 0.0)];
        let (mut a, mut b) = configs();
        a.stream_scheduler = kind;
        b.stream_scheduler = kind;
        let mut pair = Pair::new(a, b, &paths, &[], 11);
        let mut apps = [App::default(), App::default()];
        let total = 1 << 20;
        apps[0].open(0, &mut pair, 1, total);
        run(&mut pair, &mut apps, Time::from_millis(60_000));
        let (read, fin, _) = apps[1].reading.values().next().copied().expect("opened");
        assert_eq!((read, fin), (total, true), "{}", kind.name());
        for id in pair.a.path_ids().collect::<Vec<_>>() {
            let cc = pair.a.path_congestion(id).unwrap();
            assert!(
                cc.bytes_in_flight <= cc.window + 1400,
                "{} {id}",
                kind.name()
            );
        }
    }
}

#[test]
fn packet_mode_and_streams_share_a_session() {
    // Inner packets (packet mode) and a stream cross the same paths at once: every inner
    // packet that was not lost on a link arrives, the stream arrives whole and in order.
    let paths = [link(8.0, 10, 0.0), link(4.0, 40, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 12);
    let mut apps = [App::default(), App::default()];
    apps[0].open(0, &mut pair, 1, 2 << 20);
    let mut sent = 0u64;
    let mut next_packet = Time::ZERO;
    for step in 1..=5_000u64 {
        let t = Time::from_millis(step);
        pair.run_until(t, |_| None);
        // 1 Mbit/s of 1000-byte inner packets beside the stream.
        while next_packet <= pair.now {
            assert!(pair.send_inner(0, &support::payload(sent, 1000)));
            sent += 1;
            next_packet += Duration::from_millis(8);
        }
        for (side, app) in apps.iter_mut().enumerate() {
            app.pump(side, &mut pair);
        }
        pair.drive_now();
    }
    pair.run_until(pair.now + Duration::from_secs(2), |_| None);
    let (read, fin, _) = apps[1].reading.values().next().copied().expect("opened");
    assert_eq!((read, fin), (2 << 20, true));
    let delivered = pair.take_delivered(0).len() as u64;
    assert!(
        delivered >= sent * 98 / 100,
        "{delivered} of {sent} inner packets"
    );
}

/// docs/protocol.md#min-rtt-by-return: in packet mode a path's ACKs may come back over a
/// faster path, and its minimum RTT is the shortcut's; once the session carries a stream,
/// each path's ACKs come back over it and its minimum RTT is its own round trip (BBR's
/// RTprop and the queue cap are sized by it), whatever the shortcut measured before.
#[test]
fn a_stream_session_s_minimum_rtt_is_each_path_s_own() {
    // Round trips of 20 and 80 ms; path 1's shortcut (out on it, back on path 0) is 50.
    let paths = [link(8.0, 10, 0.0), link(4.0, 40, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 5);
    let min_rtt = |pair: &Pair, path: usize| pair.a.path_views()[path].min_rtt;
    // Packet mode both ways (replies carry the ACKs), enough to use both paths.
    for step in 1..=2_000u64 {
        pair.run_until(Time::from_millis(step), |_| None);
        for side in [0, 1] {
            assert!(pair.send_inner(side, &support::payload(step, 1000)));
        }
        pair.drive_now();
    }
    let before = min_rtt(&pair, 1).expect("path 1 measured");
    assert!(
        before < 70 * MS,
        "path 1's minimum RTT in packet mode {before:?}: the shortcut's (50 ms and the \
         datagrams' transmission) expected, well under its own 80"
    );
    let mut apps = [App::default(), App::default()];
    apps[0].open(0, &mut pair, 1, 1 << 20);
    let until = pair.now + Duration::from_secs(10);
    let end = run(&mut pair, &mut apps, until);
    let arrived: Vec<_> = apps[1].reading.values().map(|r| (r.0, r.1)).collect();
    assert_eq!(arrived, [(1 << 20, true)], "the stream, whole, by {end:?}");
    let after = min_rtt(&pair, 1).expect("path 1 measured");
    assert!(
        (79 * MS..90 * MS).contains(&after),
        "path 1's minimum RTT after a stream {after:?}: its own 80 ms expected"
    );
    assert!(min_rtt(&pair, 0).is_some_and(|r| r < 25 * MS));
}

/// docs/protocol.md#adaptive-send-buffer: a writer gets room up to the send-buffer target
/// (eight times the usable paths' windows, at least `MIN_SEND_TARGET`), not the 16 MiB hard bound;
/// as the windows grow, the target follows and the blocked writer, which writes only when
/// told `Writable`, is woken each time (a lost wakeup would stall the transfer).
#[test]
fn the_send_buffer_follows_the_paths_windows() {
    use plait_proto::session::MIN_SEND_TARGET;
    let paths = [link(40.0, 10, 0.0), link(10.0, 30, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 13);
    let mut reader = [App::default(), App::default()];
    let now = pair.now;
    let id = pair.a.open_stream(now, &1u64.to_be_bytes()).expect("open");
    let total: u64 = 64 << 20;
    let chunk = |from: u64| -> Vec<u8> {
        (from..(from + (1 << 20)).min(total))
            .map(|o| pattern(1, o))
            .collect()
    };
    // Nothing measured yet: room is the floor (less the 9-byte open request), not 16 MiB.
    let mut written = pair.a.stream_write(now, id, &chunk(0)).unwrap() as u64;
    assert_eq!(written, MIN_SEND_TARGET - 9);
    let (mut refused, mut woken, mut max_target) = (1u32, 0u32, 0u64);
    for ms in 1..=4_000u64 {
        pair.run_until(Time::from_millis(ms), |_| None);
        let mut writable = false;
        for e in pair.take_events(0) {
            if e == Event::Stream(StreamEvent::Writable(id)) {
                writable = true;
                woken += 1;
            }
        }
        let now = pair.now;
        // The target is the rule applied to the paths as they are now.
        let windows: u64 = pair
            .a
            .path_views()
            .iter()
            .filter(|v| v.state.is_usable())
            .map(|v| pair.a.path_congestion(v.id).unwrap().window)
            .sum();
        let target = pair.a.stream_send_target();
        assert_eq!(target, (8 * windows).max(MIN_SEND_TARGET), "at {ms} ms");
        max_target = max_target.max(target);
        if writable {
            while written < total {
                let n = pair.a.stream_write(now, id, &chunk(written)).unwrap() as u64;
                written += n;
                // Room is given only up to the target (bytes written under a higher target
                // stay when it falls: then the write takes nothing).
                assert!(n == 0 || pair.a.stream_buffered().0 <= target, "at {ms} ms");
                if n < (1 << 20).min(total - written + n) {
                    refused += 1;
                    break;
                }
            }
        }
        reader[1].pump(1, &mut pair);
        pair.drive_now();
    }
    let (read, _, _) = reader[1].reading.values().next().copied().expect("opened");
    eprintln!(
        "written {written}, read {read}, refused {refused}, woken {woken}, target up to {max_target}"
    );
    // The windows grew well past the floor, and the target with them (50 Mbit/s at 20 to
    // 60 ms RTT with 100 ms queues: windows of several hundred kB).
    assert!(max_target > 2 * MIN_SEND_TARGET, "{max_target}");
    // Each refusal was followed by a wakeup (the last may still be pending), and the
    // writer, which writes only when woken, kept the paths busy: about 50 Mbit/s for 4 s.
    assert!(woken + 1 >= refused, "refused {refused}, woken {woken}");
    assert!(read > 18_000_000, "read {read}");
    // What the writer was told was sent is never more than the target ahead of the reader.
    assert!(
        written - read <= max_target + (256 << 10),
        "{written} - {read}"
    );
}

/// Each path's acknowledgements return over that path (docs/protocol.md#ack-policy), so a
/// path that dies both ways takes only its own feedback with it: with T4's paths, while
/// path 0 is blackholed the writer's path 1 keeps hearing its ACKs, is never judged down
/// and keeps its window. (When the reader's flow-control updates carried every path's
/// ACKs over the fastest path, the test bed's T4 saw both paths judged down at once, path
/// 1's window reset to its minimum and a 1.2 s stall.)
#[test]
fn a_dead_path_takes_only_its_own_acknowledgements_with_it() {
    let paths = [link(20.0, 10, 0.0), link(10.0, 50, 0.0)];
    let (a, b) = configs();
    let mut pair = Pair::new(a, b, &paths, &[], 11);
    let mut apps = [App::default(), App::default()];
    apps[0].open(0, &mut pair, 1, 1 << 40);
    let p1 = plait_proto::PathId(1);
    run(&mut pair, &mut apps, Time::from_millis(3000));
    let data_before = pair.a.path_stats(p1).unwrap().sent_datagrams;
    let acks_before = pair.b.path_stats(p1).unwrap().sent_datagrams;
    run(&mut pair, &mut apps, Time::from_millis(4000));
    let data = pair.a.path_stats(p1).unwrap().sent_datagrams - data_before;
    let acks = pair.b.path_stats(p1).unwrap().sent_datagrams - acks_before;
    eprintln!("in one second path 1 carried {data} datagrams one way and {acks} back");
    assert!(
        acks * 20 >= data,
        "path 1's ACKs return over path 1: {acks} for {data}"
    );

    let window_before = pair.a.path_congestion(p1).unwrap().window;
    pair.blackhole[0][0] = true;
    pair.blackhole[1][0] = true;
    let mut smallest = window_before;
    for step in 41..=60u64 {
        run(&mut pair, &mut apps, Time::from_millis(step * 100));
        smallest = smallest.min(pair.a.path_congestion(p1).unwrap().window);
    }
    let stats = pair.a.path_stats(p1).unwrap();
    eprintln!(
        "path 1: window {window_before} before, smallest {smallest} during; down {} times",
        stats.down_events
    );
    assert_eq!(stats.down_events, 0, "path 1 is never judged down");
    assert!(
        smallest * 2 >= window_before,
        "path 1 keeps its window: {smallest} against {window_before}"
    );
}

/// Path 0's window at 4.9 s and its smallest from then to 5.2 s, in a session of two
/// 10 Mbit/s paths at 20 ms under the default controller carrying one stream; with
/// `slow_path_1`, path 1's link slows to 5 Mbit/s at 3 s.
fn path_0_window_around_the_5_s_boundary(slow_path_1: bool) -> (u64, u64) {
    let paths = [link(10.0, 10, 0.0), link(10.0, 10, 0.0)];
    let (a, b) = configs();
    assert_eq!(a.congestion, CongestionKind::Adaptive);
    let mut pair = Pair::new(a, b, &paths, &[], 7);
    let mut apps = [App::default(), App::default()];
    apps[0].open(0, &mut pair, 1, 1 << 40);
    run(&mut pair, &mut apps, Time::from_millis(3_000));
    if slow_path_1 {
        pair.set_link(0, 1, |l| l.rate /= 2.0);
    }
    run(&mut pair, &mut apps, Time::from_millis(4_900));
    let p0 = plait_proto::PathId(0);
    let before = pair.a.path_congestion(p0).unwrap().window;
    let mut smallest = before;
    for t in 4_901..=5_200 {
        run(&mut pair, &mut apps, Time::from_millis(t));
        smallest = smallest.min(pair.a.path_congestion(p0).unwrap().window);
    }
    (before, smallest)
}

#[test]
fn a_path_drains_with_a_sibling_whose_rate_fell() {
    // Path 1's model finds its rate fallen and wants a drain check; at the session's 5 s
    // boundary path 0, whose rate held, checks with it (docs/protocol.md#drain-check):
    // its window drops from the queue cap (1.5 BDPs and the ACK allowance) to the drain
    // window (0.95 BDP and half the allowance) for about two round trips.
    let (before, smallest) = path_0_window_around_the_5_s_boundary(true);
    eprintln!("with path 1 slowed: path 0's window {before} at 4.9 s, smallest {smallest}");
    assert!(
        smallest * 4 < before * 3,
        "path 0 drains with its sibling: {smallest} against {before}"
    );
    // Without the slowdown nobody wants a check.
    let (before, smallest) = path_0_window_around_the_5_s_boundary(false);
    eprintln!("alone at a steady rate: path 0's window {before} at 4.9 s, smallest {smallest}");
    assert!(
        smallest * 4 >= before * 3,
        "no check at a steady rate: {smallest} against {before}"
    );
}

#[test]
fn a_capped_path_asks_for_prompt_acks_and_keeps_a_shorter_queue() {
    // One 5 Mbit/s path, 20 ms RTT (T5's slow spell): BDP 12 500 B. The default `adaptive`
    // caps NewReno at 1.5 BDPs plus the peer's ACK hold. Unasked, the peer holds an ACK
    // 25 ms (16 datagrams take 36 ms here); marked ACK_SOON, it acknowledges four
    // datagrams (about 5 600 B, 9 ms) at once after 5 ms, and the cap's allowance shrinks
    // to that (docs/protocol.md#ack-soon).
    let paths = [link(5.0, 10, 0.0)];
    let (a, b) = configs();
    assert_eq!(a.congestion, CongestionKind::Adaptive);
    let mut pair = Pair::new(a, b, &paths, &[], 3);
    let mut apps = [App::default(), App::default()];
    apps[0].open(0, &mut pair, 1, 1 << 40);
    run(&mut pair, &mut apps, Time::from_millis(3_000));
    pair.reset_link_peak_queues();
    let (sent_before, marked_before) = pair.link_datagrams(0)[0];
    let (back_before, _) = pair.link_datagrams(1)[0];
    run(&mut pair, &mut apps, Time::from_millis(8_000));
    let (sent, marked) = pair.link_datagrams(0)[0];
    let (sent, marked) = (sent - sent_before, marked - marked_before);
    let back = pair.link_datagrams(1)[0].0 - back_before;
    let peak = pair.link_peak_queue_bytes(0)[0];
    eprintln!(
        "from 3 s to 8 s: {sent} datagrams, {marked} marked, {back} back; peak queue {peak} B"
    );
    // Every datagram through the path's window asks.
    assert!(marked * 100 >= sent * 99, "{marked} of {sent} marked");
    // The peer acknowledges about every four datagrams, not every 11 (25 ms).
    assert!(back * 6 >= sent, "{back} datagrams back for {sent}");
    // With the marks left out (a throwaway build) this run's 2 232 datagrams drew 188
    // back (581 with them) and the link's queue peaked at 12 291 B, 20 ms (8 845 B with
    // them).
    assert!(peak < 10_500.0, "peak queue {peak} B");
}

#[test]
fn a_starved_lossy_path_moves_to_bbr_though_it_goes_silent_at_times() {
    // T3's paths: 10 % loss both ways on the slower one. Under NewReno its window is a
    // datagram or two, so it goes silent past its down bound every few seconds; the
    // evidence gathered before each such outage counts (docs/protocol.md
    // #adaptive-congestion). Clearing it, these seeds moved at 3.9, 8.7 and 4.6 s.
    for seed in [2, 3, 5] {
        let paths = [link(20.0, 10, 0.0), link(10.0, 50, 0.10)];
        let (a, b) = configs();
        let mut pair = Pair::new(a, b, &paths, &[], seed);
        let mut apps = [App::default(), App::default()];
        apps[0].open(0, &mut pair, 1, 1 << 40);
        run(&mut pair, &mut apps, Time::from_millis(4_000));
        let cc = pair.a.path_congestion(plait_proto::PathId(1)).unwrap();
        assert_eq!(cc.controller, "adaptive (bbr)", "seed {seed}");
    }
}
