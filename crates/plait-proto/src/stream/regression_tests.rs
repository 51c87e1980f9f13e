//! Regressions a hostile review found: each states a promise of the module docs or of
//! docs/protocol.md#streams that an earlier version broke (credit left unadvertised after
//! resets, a reset stream's bytes escaping flow control, a reset never answered by a peer
//! that forgot the stream, a lost `Writable`, a stream ending inside its open request).

use std::time::Duration;

use super::*;
use crate::wire::{Frame, frames};

fn limits() -> StreamLimits {
    StreamLimits {
        max_concurrent: 4,
        initial_stream_window: 2048,
        max_stream_window: 4096,
        initial_session_window: 4096,
        max_session_window: 8192,
        stream_send_buffer: 4096,
        session_send_buffer: 8192,
    }
}

fn frame(id: u64, offset: u64, data: &[u8], fin: bool) -> StreamFrame<'_> {
    StreamFrame {
        stream_id: id,
        offset,
        fin,
        data,
    }
}

/// Moves everything `from` wants to send into `to`, every datagram arriving and being
/// acknowledged at once. Returns how many datagrams went.
fn deliver_and_ack(from: &mut Streams, to: &mut Streams) -> Result<usize, StreamViolation> {
    let mut buf = [0u8; 1400];
    let mut n = 0;
    loop {
        let mut w = Writer::new(&mut buf);
        let mut sent = Vec::new();
        from.write_frames(&mut w, true, &mut sent);
        if sent.is_empty() {
            return Ok(n);
        }
        n += 1;
        let len = w.len();
        let seq = 1_000_000 + n as u64;
        from.on_datagram_sent(PathId(0), seq, sent);
        for f in frames(&buf[..len]) {
            match f.expect("valid frames") {
                Frame::Stream(f) => to.on_stream_frame(Time::ZERO, &f)?,
                Frame::ResetStream(f) => to.on_reset_frame(&f)?,
                Frame::MaxData(m) => to.on_max_data(m),
                Frame::MaxStreamData(f) => to.on_max_stream_data(&f)?,
                Frame::MaxStreams(m) => to.on_max_streams(m),
                other => panic!("unexpected {other:?}"),
            }
        }
        from.on_datagram_acked(PathId(0), seq);
    }
}

/// Runs both directions until neither end has anything to send.
fn settle(a: &mut Streams, b: &mut Streams) {
    for _ in 0..100 {
        let x = deliver_and_ack(a, b).unwrap();
        let y = deliver_and_ack(b, a).unwrap();
        if x + y == 0 {
            return;
        }
    }
    panic!("did not settle");
}

fn events(s: &mut Streams) -> Vec<StreamEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// Session credit consumed by resets (or by open requests) is never re-advertised: MAX_DATA
/// is only considered in `read`, and nothing is left to read on a reset stream. Once the
/// reset streams have used the initial session window, a new stream's bytes (even its open
/// request) can never be sent and neither end has anything to send: the session's streams
/// stall forever.
#[test]
fn reset_streams_leak_session_credit_and_stall() {
    let mut a = Streams::new(Side::Client, limits());
    let mut b = Streams::new(Side::Server, limits());
    // Two streams use the whole 4096-byte session window (1 prefix byte + 2047 each).
    let s0 = a.open(b"").unwrap();
    let s1 = a.open(b"").unwrap();
    assert_eq!(a.write(s0, &[1u8; 2047]).unwrap(), 2047);
    assert_eq!(a.write(s1, &[2u8; 2047]).unwrap(), 2047);
    settle(&mut a, &mut b);
    events(&mut b);
    // The receiving application rejects both streams without reading (e.g. the open
    // request names a destination it refuses).
    b.reset(s0, 7).unwrap();
    b.reset(s1, 7).unwrap();
    settle(&mut a, &mut b);
    events(&mut a);
    assert_eq!(a.stats().open, 0, "a forgot both streams");
    assert_eq!(b.stats().open, 0, "b forgot both streams");
    // A new stream.
    let s2 = a.open(b"dst").unwrap();
    assert_eq!(a.write(s2, b"hello").unwrap(), 5);
    a.finish(s2).unwrap();
    settle(&mut a, &mut b);
    let got = events(&mut b);
    assert!(
        got.iter()
            .any(|e| matches!(e, StreamEvent::Opened { id, .. } if *id == s2)),
        "the new stream never reaches b (a's session credit {} of {} used, b has \
         MAX_DATA due: {}): {got:?}",
        a.sent_new,
        a.send_max_data,
        b.max_data_due
    );
}

/// Data on a stream this end reset is not checked against any flow-control limit
/// (`on_stream_frame`'s reset branch calls `skip_to` with no limit): a peer can push the
/// session counters by ~2^62 per frame, and four such frames overflow `recv_highest`
/// (a panic in debug builds, a wrapped flow-control state in release builds).
#[test]
fn data_on_locally_reset_stream_skips_flow_control_and_overflows() {
    let mut a = Streams::new(Side::Client, limits());
    let mut ids = Vec::new();
    for _ in 0..4 {
        let id = a.open(b"").unwrap();
        a.reset(id, 1).unwrap();
        ids.push(id);
    }
    let far = crate::wire::MAX_STREAM_OFFSET - 1;
    // The spec: data beyond an advertised limit is FlowControl. The first frame is already
    // 2^62 bytes beyond the 4096-byte session window.
    let first = a.on_stream_frame(Time::ZERO, &frame(ids[0].0, far, b"x", false));
    assert_eq!(
        first,
        Err(StreamViolation::FlowControl(ids[0])),
        "2^62 bytes beyond the session window accepted on a reset stream"
    );
}

/// Same setup: five frames, one per locally reset stream, each ending at 2^62 - 1. The
/// table must answer with a violation, not panic; it panics with "attempt to add with
/// overflow" on `self.recv_highest += raised` (stream/mod.rs, reset branch of
/// `on_stream_frame`).
#[test]
fn data_on_locally_reset_streams_panics_on_overflow() {
    let mut a = Streams::new(
        Side::Client,
        StreamLimits {
            max_concurrent: 8,
            ..limits()
        },
    );
    let mut ids = Vec::new();
    for _ in 0..5 {
        let id = a.open(b"").unwrap();
        a.reset(id, 1).unwrap();
        ids.push(id);
    }
    let far = crate::wire::MAX_STREAM_OFFSET - 1;
    for id in &ids {
        let _ = a.on_stream_frame(Time::ZERO, &frame(id.0, far, b"x", false));
    }
}

/// A RESET_STREAM for a stream the peer already forgot is ignored by the peer, so the
/// peer never answers with its own RESET_STREAM and this end keeps the stream for ever
/// (`maybe_free` waits for `peer_reset`). For a peer-opened stream that also means
/// MAX_STREAMS never rises again: after `max_concurrent` such streams the peer can open
/// no more streams for the rest of the session. Honest ends trigger it: b's application
/// resets a stream instead of reading the last bytes, after a already finished both
/// directions.
#[test]
fn reset_after_peer_forgot_stream_leaks_it_and_its_stream_credit() {
    let mut a = Streams::new(Side::Client, limits());
    let mut b = Streams::new(Side::Server, limits());
    let mut buf = [0u8; 64];
    for round in 0..4 {
        let id = a.open(b"").unwrap();
        a.write(id, b"request").unwrap();
        a.finish(id).unwrap();
        settle(&mut a, &mut b);
        // b answers with nothing and ends its direction; a reads b's end.
        b.finish(id).unwrap();
        settle(&mut a, &mut b);
        let r = a
            .read(Time::ZERO, id, &mut buf, PathRtts::uniform(Duration::ZERO))
            .unwrap();
        assert!(r.fin);
        settle(&mut a, &mut b);
        assert_eq!(
            a.stats().open,
            0,
            "round {round}: a is done with the stream"
        );
        // b's application gives up on the stream without reading it.
        b.reset(id, 9).unwrap();
        settle(&mut a, &mut b);
        events(&mut a);
        events(&mut b);
    }
    assert_eq!(
        b.stats().open,
        0,
        "b keeps streams whose RESET_STREAM the peer ignored"
    );
    assert!(
        a.open(b"").is_ok(),
        "a can open no more streams: b never raised MAX_STREAMS"
    );
}

/// A stream whose write the *session* send buffer refused hears `Writable` once room
/// frees, though it was another stream's bytes that were acknowledged (an earlier version
/// woke only streams whose own bytes were acknowledged: a lost wakeup).
#[test]
fn writable_lost_when_session_buffer_was_the_limit() {
    let lim = StreamLimits {
        initial_stream_window: 8192,
        max_stream_window: 8192,
        initial_session_window: 8192,
        stream_send_buffer: 4096,
        session_send_buffer: 4096,
        ..limits()
    };
    let mut a = Streams::new(Side::Client, lim.clone());
    let mut b = Streams::new(Side::Server, lim);
    let s0 = a.open(b"").unwrap();
    let s1 = a.open(b"").unwrap();
    settle(&mut a, &mut b);
    events(&mut a);
    // The session buffer holds 4096, all free: s0 takes exactly that.
    assert_eq!(a.write(s0, &[0u8; 4096]).unwrap(), 4096);
    assert_eq!(a.write(s1, b"y").unwrap(), 0, "session buffer full");
    settle(&mut a, &mut b);
    assert_eq!(
        a.buffered().0,
        0,
        "everything acknowledged: room for s1 now"
    );
    let got = events(&mut a);
    assert!(
        got.contains(&StreamEvent::Writable(s1)),
        "no Writable for the refused stream: {got:?}"
    );
}

/// docs/protocol.md#stream-open: "a stream that ends inside its request is
/// BadOpenRequest". A FIN at offset 0 (or after the first byte of a 2-byte length) is
/// accepted; the stream stays unannounced, so no application can ever read or finish it
/// and it is never freed: it holds one of the peer's MAX_STREAMS slots for good.
#[test]
fn empty_stream_is_not_bad_open_request() {
    let mut b = Streams::new(Side::Server, limits());
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(0, 0, b"", true)),
        Err(StreamViolation::BadOpenRequest(StreamId(0)))
    );
}

#[test]
fn fin_inside_two_byte_length_is_not_bad_open_request() {
    let mut b = Streams::new(Side::Server, limits());
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(0, 0, &[0x40], true)),
        Err(StreamViolation::BadOpenRequest(StreamId(0)))
    );
}

/// A peer sending 1-byte frames with 1-byte gaps is refused once the pieces outnumber the
/// window's allowance (the bytes stay within the window, but each piece costs bookkeeping).
#[test]
fn tiny_frames_with_gaps_are_refused_before_the_bookkeeping_grows() {
    let limits = StreamLimits::default();
    // The default initial window allows one piece per `BYTES_PER_SEGMENT` bytes of it, and
    // never fewer than `MIN_SEGMENTS`.
    let allowance =
        (limits.initial_stream_window / super::BYTES_PER_SEGMENT).max(super::MIN_SEGMENTS as u64);
    let mut b = Streams::new(Side::Server, limits);
    let mut refused = None;
    for k in 0..4 * allowance {
        if let Err(v) = b.on_stream_frame(Time::ZERO, &frame(0, 10 + 2 * k, b"x", false)) {
            refused = Some((k, v));
            break;
        }
    }
    assert_eq!(
        refused,
        Some((allowance, StreamViolation::TooFragmented(StreamId(0))))
    );
}
