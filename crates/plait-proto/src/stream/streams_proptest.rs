//! Property: between two stream tables joined by a fake network that loses, duplicates,
//! reorders and delays datagrams (and whose paths may die, losing all they carry), every
//! byte written is read exactly once, in order, per stream, and both tables end empty.
//! The network reports each datagram's fate to the sender, as the session's per-path loss
//! detection does (a duplicate of a lost datagram may still arrive: late copies must do no
//! harm).

use proptest::prelude::*;

use std::time::Duration;

use super::*;
use crate::wire::{Frame, frames};

/// One datagram in the network: which end sent it, its id, its bytes.
#[derive(Clone, Debug)]
struct InFlight {
    from: usize,
    path: u8,
    seq: PathSeq,
    bytes: Vec<u8>,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Application of end `0` writes `n` bytes on its stream `k`.
    Write(usize, usize, u16),
    /// Application of end `0` reads stream `k`.
    Read(usize, usize),
    /// The end builds a datagram on path `p`.
    Send(usize, u8),
    /// The datagram at index `i` (mod len) arrives; `dup`: a copy stays in the network.
    Arrive(usize, bool),
    /// The datagram at index `i` is lost.
    Lose(usize),
    /// Path `p` dies: everything on it is lost.
    PathDies(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..2usize, 0..3usize, 0..3000u16).prop_map(|(e, k, n)| Op::Write(e, k, n)),
        3 => (0..2usize, 0..3usize).prop_map(|(e, k)| Op::Read(e, k)),
        6 => (0..2usize, 0..3u8).prop_map(|(e, p)| Op::Send(e, p)),
        6 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(i, d)| Op::Arrive(i, d)),
        2 => any::<usize>().prop_map(Op::Lose),
        1 => (0..3u8).prop_map(Op::PathDies),
    ]
}

struct End {
    streams: Streams,
    /// Streams this end opened: (id, bytes written, finished).
    mine: Vec<(StreamId, u64, bool)>,
    /// Bytes read per peer stream: id → (count, fin).
    read: BTreeMap<StreamId, (u64, bool)>,
    next_seq: [PathSeq; 3],
}

fn byte(id: StreamId, offset: u64) -> u8 {
    (offset.wrapping_mul(131).wrapping_add(id.0 * 7)) as u8
}

fn limits() -> StreamLimits {
    StreamLimits {
        max_concurrent: 4,
        initial_stream_window: 4096,
        max_stream_window: 16384,
        initial_session_window: 8192,
        max_session_window: 32768,
        stream_send_buffer: 8192,
        session_send_buffer: 16384,
    }
}

fn end(side: Side) -> End {
    let mut streams = Streams::new(side, limits());
    let mine = (0..3)
        .map(|_| (streams.open(b"req").expect("open"), 0, false))
        .collect();
    End {
        streams,
        mine,
        read: BTreeMap::new(),
        next_seq: [0; 3],
    }
}

fn read_all(e: &mut End, id: StreamId) {
    let mut buf = [0u8; 700];
    loop {
        let Ok(r) = e.streams.read(
            Time::ZERO,
            id,
            &mut buf,
            PathRtts::uniform(Duration::from_millis(10)),
        ) else {
            return; // forgotten after its end was read
        };
        let entry = e.read.entry(id).or_insert((0, false));
        for (i, b) in buf[..r.len].iter().enumerate() {
            assert_eq!(
                *b,
                byte(id, entry.0 + i as u64),
                "{id} at {}",
                entry.0 + i as u64
            );
        }
        entry.0 += r.len as u64;
        entry.1 |= r.fin;
        if r.len == 0 {
            return;
        }
    }
}

fn arrive(ends: &mut [End; 2], d: &InFlight) {
    let to = &mut ends[1 - d.from];
    for f in frames(&d.bytes) {
        let r = match f.expect("valid") {
            Frame::Stream(f) => to.streams.on_stream_frame(Time::ZERO, &f),
            Frame::ResetStream(f) => to.streams.on_reset_frame(&f),
            Frame::MaxData(m) => {
                to.streams.on_max_data(m);
                Ok(())
            }
            Frame::MaxStreamData(f) => to.streams.on_max_stream_data(&f),
            Frame::MaxStreams(m) => {
                to.streams.on_max_streams(m);
                Ok(())
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(r, Ok(()), "a well-behaved peer never violates");
    }
    while let Some(e) = to.streams.poll_event() {
        if let StreamEvent::Opened { id, request } = e {
            assert_eq!(request, b"req");
            to.read.entry(id).or_insert((0, false));
        }
    }
}

fn send(ends: &mut [End; 2], from: usize, path: u8, net: &mut Vec<InFlight>) -> bool {
    let mut buf = [0u8; 600];
    let mut w = Writer::new(&mut buf);
    let mut sent = Vec::new();
    ends[from].streams.write_frames(&mut w, true, &mut sent);
    if sent.is_empty() {
        return false;
    }
    let len = w.len();
    let seq = ends[from].next_seq[usize::from(path)];
    ends[from].next_seq[usize::from(path)] += 1;
    ends[from].streams.on_datagram_sent(PathId(path), seq, sent);
    net.push(InFlight {
        from,
        path,
        seq,
        bytes: buf[..len].to_vec(),
    });
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_byte_once_in_order(ops in proptest::collection::vec(op(), 0..300)) {
        let mut ends = [end(Side::Client), end(Side::Server)];
        let mut net: Vec<InFlight> = Vec::new();
        for op in ops {
            match op {
                Op::Write(e, k, n) => {
                    let (id, written, fin) = ends[e].mine[k];
                    if fin { continue; }
                    let data: Vec<u8> = (written..written + u64::from(n)).map(|o| byte(id, o)).collect();
                    let took = ends[e].streams.write(id, &data).expect("write");
                    ends[e].mine[k].1 += took as u64;
                }
                Op::Read(e, k) => {
                    let ids: Vec<StreamId> = ends[e].read.keys().copied().collect();
                    if let Some(id) = ids.get(k) { read_all(&mut ends[e], *id); }
                }
                Op::Send(e, p) => { send(&mut ends, e, p, &mut net); }
                Op::Arrive(i, dup) if !net.is_empty() => {
                    let i = i % net.len();
                    let d = if dup { net[i].clone() } else { net.swap_remove(i) };
                    arrive(&mut ends, &d);
                    ends[d.from].streams.on_datagram_acked(PathId(d.path), d.seq);
                }
                Op::Lose(i) if !net.is_empty() => {
                    let d = net.swap_remove(i % net.len());
                    ends[d.from].streams.on_datagram_lost(PathId(d.path), d.seq);
                }
                Op::PathDies(p) => {
                    net.retain(|d| d.path != p);
                    for e in ends.iter_mut() { e.streams.on_path_removed(PathId(p)); }
                }
                _ => {}
            }
            for e in &ends { e.streams.check_invariants(); }
        }
        // Then: finish every stream, and let a perfect network run everything to the end.
        for e in ends.iter_mut() {
            for (id, _, fin) in e.mine.iter_mut() {
                e.streams.finish(*id).expect("finish");
                *fin = true;
            }

        }
        for _ in 0..100_000 {
            // Arrive in order, but from the back first: reordering stays.
            while let Some(d) = net.pop() {
                arrive(&mut ends, &d);
                ends[d.from].streams.on_datagram_acked(PathId(d.path), d.seq);
            }
            for end in ends.iter_mut() {
                let ids: Vec<StreamId> = end.read.keys().copied().collect();
                for id in ids {
                    read_all(end, id);
                    // This end says nothing on the peer's streams: end its direction too
                    // (a forgotten stream refuses, which is fine).
                    let _ = end.streams.finish(id);
                }
                // The peer says nothing on this end's streams: read their (empty) replies
                // to the end, as an application must before a stream is forgotten.
                let mine: Vec<StreamId> = end.mine.iter().map(|m| m.0).collect();
                let mut buf = [0u8; 8];
                for id in mine {
                    if let Ok(r) = end.streams.read(Time::ZERO, id, &mut buf, PathRtts::uniform(Duration::ZERO)) {
                        assert_eq!(r.len, 0, "the peer wrote nothing on {id}");
                    }
                }
            }
            let a = send(&mut ends, 0, 0, &mut net);
            let b = send(&mut ends, 1, 1, &mut net);
            for e in &ends { e.streams.check_invariants(); }
            if !a && !b && net.is_empty() { break; }
        }
        for e in 0..2 {
            for (id, written, _) in &ends[1 - e].mine {
                prop_assert_eq!(ends[e].read.get(id).copied(), Some((*written, true)), "{}", id);
            }
            prop_assert_eq!(ends[e].streams.stats().open, 0, "all streams forgotten");
            prop_assert_eq!(ends[e].streams.buffered(), (0, 0));
            prop_assert!(ends[e].streams.in_flight.is_empty());
        }
    }
}

/// The operations above plus this end finishing or resetting one of its streams midway.
#[derive(Clone, Copy, Debug)]
enum AbortOp {
    Net(Op),
    /// End `e` finishes its stream `k`.
    Finish(usize, usize),
    /// End `e` resets its stream `k`.
    Reset(usize, usize),
}

fn abort_op() -> impl Strategy<Value = AbortOp> {
    prop_oneof![
        20 => op().prop_map(AbortOp::Net),
        1 => (0..2usize, 0..3usize).prop_map(|(e, k)| AbortOp::Finish(e, k)),
        1 => (0..2usize, 0..3usize).prop_map(|(e, k)| AbortOp::Reset(e, k)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The sendable sets match the table (module docs) after every operation, resets and
    /// early FINs included, and a well-behaved peer never sees a violation.
    #[test]
    fn sendable_sets_match_the_table(ops in proptest::collection::vec(abort_op(), 0..300)) {
        let mut ends = [end(Side::Client), end(Side::Server)];
        let mut net: Vec<InFlight> = Vec::new();
        for op in ops {
            match op {
                AbortOp::Net(Op::Write(e, k, n)) => {
                    let (id, written, _) = ends[e].mine[k];
                    let data: Vec<u8> = (written..written + u64::from(n)).map(|o| byte(id, o)).collect();
                    if let Ok(took) = ends[e].streams.write(id, &data) {
                        ends[e].mine[k].1 += took as u64;
                    }
                }
                AbortOp::Net(Op::Read(e, k)) => {
                    let ids: Vec<StreamId> = ends[e].read.keys().copied().collect();
                    if let Some(id) = ids.get(k) { read_all(&mut ends[e], *id); }
                }
                AbortOp::Net(Op::Send(e, p)) => { send(&mut ends, e, p, &mut net); }
                AbortOp::Net(Op::Arrive(i, dup)) if !net.is_empty() => {
                    let i = i % net.len();
                    let d = if dup { net[i].clone() } else { net.swap_remove(i) };
                    arrive(&mut ends, &d);
                    ends[d.from].streams.on_datagram_acked(PathId(d.path), d.seq);
                }
                AbortOp::Net(Op::Lose(i)) if !net.is_empty() => {
                    let d = net.swap_remove(i % net.len());
                    ends[d.from].streams.on_datagram_lost(PathId(d.path), d.seq);
                }
                AbortOp::Net(Op::PathDies(p)) => {
                    net.retain(|d| d.path != p);
                    for e in ends.iter_mut() { e.streams.on_path_removed(PathId(p)); }
                }
                AbortOp::Finish(e, k) => { let _ = ends[e].streams.finish(ends[e].mine[k].0); }
                AbortOp::Reset(e, k) => { let _ = ends[e].streams.reset(ends[e].mine[k].0, 7); }
                _ => {}
            }
            for e in &ends { e.streams.check_invariants(); }
        }
        for _ in 0..10_000 {
            while let Some(d) = net.pop() {
                arrive(&mut ends, &d);
                ends[d.from].streams.on_datagram_acked(PathId(d.path), d.seq);
                for e in &ends { e.streams.check_invariants(); }
            }
            for end in ends.iter_mut() {
                let ids: Vec<StreamId> = end.read.keys().copied().collect();
                for id in ids { read_all(end, id); }
            }
            let a = send(&mut ends, 0, 0, &mut net);
            let b = send(&mut ends, 1, 1, &mut net);
            for e in &ends { e.streams.check_invariants(); }
            if !a && !b && net.is_empty() { break; }
        }
    }
}
