//! The stream table on its own: frames in by hand, every peer violation named, every bad
//! application call refused without effect.

use std::time::Duration;

use super::*;
use crate::wire::{Frame, frames};

fn limits() -> StreamLimits {
    StreamLimits {
        max_concurrent: 2,
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

/// An open request prefix for a stream's first bytes.
fn opening(request: &[u8]) -> Vec<u8> {
    let mut v = vec![request.len() as u8];
    v.extend_from_slice(request);
    v
}

/// Moves everything `from` wants to send into `to`, as if every datagram arrived.
fn deliver(from: &mut Streams, to: &mut Streams) -> Result<(), StreamViolation> {
    let mut buf = [0u8; 1400];
    loop {
        let mut w = Writer::new(&mut buf);
        let mut sent = Vec::new();
        from.write_frames(&mut w, true, &mut sent);
        if sent.is_empty() {
            return Ok(());
        }
        let len = w.len();
        let seq = from.in_flight.keys().last().map_or(0, |k| k.1 + 1);
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
    }
}

#[test]
fn open_write_read_through_frames() {
    let mut a = Streams::new(Side::Client, limits());
    let mut b = Streams::new(Side::Server, limits());
    let id = a.open(b"dst").unwrap();
    assert_eq!(id, StreamId(0));
    assert_eq!(a.write(id, b"hello").unwrap(), 5);
    a.finish(id).unwrap();
    deliver(&mut a, &mut b).unwrap();
    let events: Vec<_> = std::iter::from_fn(|| b.poll_event()).collect();
    assert_eq!(
        events,
        vec![
            StreamEvent::Opened {
                id,
                request: b"dst".to_vec()
            },
            StreamEvent::Readable(id),
            StreamEvent::Finished(id),
        ]
    );
    let mut buf = [0u8; 16];
    let r = b
        .read(
            Time::ZERO,
            id,
            &mut buf,
            PathRtts::uniform(Duration::from_millis(10)),
        )
        .unwrap();
    assert_eq!((&buf[..r.len], r.fin), (&b"hello"[..], true));
    // The server opens odd ids.
    assert_eq!(b.open(b"").unwrap(), StreamId(1));
}

#[test]
fn peer_violations_are_named() {
    let mut b = Streams::new(Side::Server, limits());
    // Beyond the stream window (2048).
    let big = vec![0u8; 100];
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(0, 2000, &big, false)),
        Err(StreamViolation::FlowControl(StreamId(0)))
    );
    // A server-side id (odd) the server never opened.
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(3, 0, b"x", false)),
        Err(StreamViolation::NotOpened(StreamId(3)))
    );
    // Beyond MAX_STREAMS (2): index 2 is the third stream.
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(4, 0, b"x", false)),
        Err(StreamViolation::StreamLimit(StreamId(4)))
    );
    // A final size that moves.
    let mut b = Streams::new(Side::Server, limits());
    b.on_stream_frame(Time::ZERO, &frame(0, 0, &opening(b"r"), true))
        .unwrap();
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(0, 2, b"more", false)),
        Err(StreamViolation::FinalSize(StreamId(0)))
    );
    // An open request that claims more than 1024 bytes (2-byte varint 0x4401 = 1025).
    let mut b = Streams::new(Side::Server, limits());
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(0, 0, &[0x44, 0x01], false)),
        Err(StreamViolation::BadOpenRequest(StreamId(0)))
    );
    // A stream that ends inside its open request.
    let mut b = Streams::new(Side::Server, limits());
    assert_eq!(
        b.on_stream_frame(Time::ZERO, &frame(0, 0, &[5, b'a'], true)),
        Err(StreamViolation::BadOpenRequest(StreamId(0)))
    );
    // A reset whose final size is below data already received.
    let mut b = Streams::new(Side::Server, limits());
    b.on_stream_frame(Time::ZERO, &frame(0, 0, &opening(b"abc"), false))
        .unwrap();
    let reset = ResetStreamFrame {
        stream_id: 0,
        error_code: 1,
        final_size: 2,
    };
    assert_eq!(
        b.on_reset_frame(&reset),
        Err(StreamViolation::FinalSize(StreamId(0)))
    );
    // Session-wide limit (4096) over two streams of 2048 + 1 byte each... the second
    // stream's last byte crosses it.
    let mut b = Streams::new(Side::Server, limits());
    b.on_stream_frame(Time::ZERO, &frame(0, 0, &vec![0; 2048], false))
        .unwrap();
    b.on_stream_frame(Time::ZERO, &frame(2, 0, &vec![0; 2048], false))
        .unwrap();
    let mut more = Streams::new(
        Side::Server,
        StreamLimits {
            initial_session_window: 2048,
            ..limits()
        },
    );
    assert_eq!(
        more.on_stream_frame(Time::ZERO, &frame(0, 0, &vec![0; 2048], false)),
        Ok(())
    );
    assert_eq!(
        more.on_stream_frame(Time::ZERO, &frame(2, 0, &[0], false)),
        Err(StreamViolation::FlowControl(StreamId(2)))
    );
}

#[test]
fn late_frames_for_closed_streams_are_ignored() {
    let mut a = Streams::new(Side::Client, limits());
    let mut b = Streams::new(Side::Server, limits());
    let id = a.open(b"").unwrap();
    a.finish(id).unwrap();
    deliver(&mut a, &mut b).unwrap();
    b.finish(id).unwrap();
    let mut buf = [0u8; 8];
    b.read(Time::ZERO, id, &mut buf, PathRtts::uniform(Duration::ZERO))
        .unwrap();
    deliver(&mut b, &mut a).unwrap();
    let r = a
        .read(Time::ZERO, id, &mut buf, PathRtts::uniform(Duration::ZERO))
        .unwrap();
    assert_eq!((r.len, r.fin), (0, true));
    // Nothing acknowledged b's FIN, so b keeps the stream; a read b's end and forgets it
    // once its own FIN is acknowledged: simulate by acking everything a sent.
    let keys: Vec<_> = a.in_flight.keys().copied().collect();
    for (p, s) in keys {
        a.on_datagram_acked(PathId(p), s);
    }
    assert_eq!(a.stats().open, 0, "a forgot the stream");
    // A late copy of b's FIN arrives at a, whose stream is closed: ignored.
    assert_eq!(
        a.on_stream_frame(Time::ZERO, &frame(0, 0, b"", true)),
        Ok(())
    );
    assert_eq!(a.stats().open, 0);
}

#[test]
fn bad_application_calls_change_nothing() {
    let mut a = Streams::new(Side::Client, limits());
    let nobody = StreamId(40);
    assert_eq!(a.write(nobody, b"x"), Err(StreamError::Unknown(nobody)));
    assert_eq!(a.finish(nobody), Err(StreamError::Unknown(nobody)));
    assert_eq!(a.reset(nobody, 1), Err(StreamError::Unknown(nobody)));
    let mut buf = [0u8; 4];
    assert_eq!(
        a.read(
            Time::ZERO,
            nobody,
            &mut buf,
            PathRtts::uniform(Duration::ZERO)
        ),
        Err(StreamError::Unknown(nobody))
    );
    assert_eq!(
        a.open(&[0u8; 1025]),
        Err(StreamError::RequestTooLarge(1025))
    );
    let s0 = a.open(b"").unwrap();
    a.open(b"").unwrap();
    assert_eq!(
        a.open(b""),
        Err(StreamError::TooManyStreams {
            open: 2,
            allowed: 2
        })
    );
    a.finish(s0).unwrap();
    assert_eq!(a.write(s0, b"x"), Err(StreamError::Finished(s0)));
    // A full send buffer takes what fits and says so.
    let s1 = StreamId(2);
    assert_eq!(a.write(s1, &vec![0; 5000]).unwrap(), 4096 - 1);
    assert_eq!(a.write(s1, b"x").unwrap(), 0);
    a.reset(s1, 9).unwrap();
    assert_eq!(a.write(s1, b"x"), Err(StreamError::Reset(s1)));
    assert_eq!(a.buffered().0, 1, "s0's open prefix only");
}

/// Memory of an open idle stream: its struct in the table (printed with `--nocapture`;
/// the bound keeps it from growing unnoticed). Heap beyond it: the send ring keeps the
/// capacity it reached (at most the stream's send buffer), the receive segments and the
/// range sets hold nothing once everything is acknowledged and read.
#[test]
fn idle_stream_size() {
    use std::mem::size_of;
    let stream = size_of::<Stream>();
    // A B-tree leaf holds up to 11 entries and is at least half full after splits (the
    // ids arrive in order, so leaves stay nearly full): about one key and value plus a
    // share of the node header per stream.
    let entry = size_of::<u64>() + stream;
    println!(
        "size_of: Stream {stream} B (SendHalf {}, RecvHalf {}, RangeSet {}), \
         BTreeMap entry {entry} B + node share, ≤ {} B per stream in half-full leaves",
        size_of::<SendHalf>(),
        size_of::<RecvHalf>(),
        size_of::<RangeSet>(),
        entry * 2 + 16,
    );
    assert!(stream <= 320, "Stream grew to {stream} bytes");
}

/// docs/protocol.md#adaptive-send-buffer: the send-buffer target caps the room `write`
/// gives, per stream and for all streams together, inside the hard bounds; a writer refused
/// for want of room hears `Writable` when the target rises, with no byte acknowledged; a
/// target that falls drops nothing and wakes nobody.
#[test]
fn send_target_bounds_room_and_a_rising_target_wakes_the_writer() {
    let lim = StreamLimits {
        max_concurrent: 4,
        stream_send_buffer: 16 << 20,
        session_send_buffer: 64 << 20,
        ..StreamLimits::default()
    };
    let mut a = Streams::new(Side::Client, lim);
    let big = vec![7u8; 1 << 20];
    let s0 = a.open(b"").unwrap();
    let s1 = a.open(b"").unwrap();
    let request = a.buffered().0; // the two open-request prefixes
    // Small windows: target 100 kB. Each write gets the room left under it, not 16 MiB.
    a.set_send_target(100_000);
    assert_eq!(a.write(s0, &big).unwrap() as u64, 100_000 - request);
    assert_eq!(a.buffered().0, 100_000);
    assert_eq!(
        a.write(s1, &big).unwrap(),
        0,
        "the session is at the target"
    );
    assert_eq!(a.poll_event(), None);
    // The target falls (a window was cut): nothing is dropped, nobody is woken.
    a.set_send_target(50_000);
    assert_eq!(a.buffered().0, 100_000);
    assert_eq!(a.poll_event(), None);
    // Windows grow: both refused writers hear `Writable` with nothing acknowledged.
    a.set_send_target(300_000);
    let mut got = Vec::new();
    while let Some(e) = a.poll_event() {
        got.push(e);
    }
    assert_eq!(
        got,
        vec![StreamEvent::Writable(s0), StreamEvent::Writable(s1)]
    );
    // Per stream too: s1 gets only the target minus its own bytes, bounded by the session.
    let n1 = a.write(s1, &big).unwrap() as u64;
    assert_eq!(
        a.buffered().0,
        300_000,
        "s1 filled the session up to the target"
    );
    assert!(n1 > 0);
    // The hard bound stays hard: a huge target leaves the 16 MiB per-stream cap.
    a.set_send_target(u64::MAX);
    let mut total = 0u64;
    loop {
        let n = a.write(s0, &big).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let s0_held = 100_000 - request / 2 + total;
    assert_eq!(s0_held, 16 << 20, "per-stream hard bound");
}
