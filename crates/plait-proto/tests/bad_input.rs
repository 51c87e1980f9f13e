//! Datagrams from the network that the engine must refuse whole, each with its typed error,
//! without delivering anything, changing state or panicking; and ones it accepts that a
//! hostile peer could use to push it around.

use plait_proto::path::PathHints;
use plait_proto::wire::{DataRepr, DecodeError, Frame, Header, Writer, frames};
use plait_proto::{Config, PathId, RecvError, Session, Time};

fn session() -> Session {
    let mut s = Session::new(Config::default()).unwrap();
    s.add_path(Time::ZERO, PathId(0), PathHints::default())
        .unwrap();
    s
}

/// Header on `path`, then `frames` as raw bytes.
fn datagram(path: u8, path_seq: u32, frames: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 64 + frames.len()];
    let mut w = Writer::new(&mut buf);
    Header {
        path: PathId(path),
        path_seq,
        timestamp_us: 1,
    }
    .write_to(&mut w)
    .unwrap();
    let n = w.len();
    buf.truncate(n);
    buf.extend_from_slice(frames);
    buf
}

fn data_frame(global: u64, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 64 + payload.len()];
    let mut w = Writer::new(&mut buf);
    DataRepr {
        global_seq: global,
        prev_delta: 0,
        payload,
        to_end: false,
    }
    .encode(&mut w)
    .unwrap();
    let n = w.len();
    buf.truncate(n);
    buf
}

fn delivered(s: &mut Session) -> usize {
    let mut buf = vec![0u8; 2048];
    std::iter::from_fn(|| s.poll_delivery(&mut buf)).count()
}

#[test]
fn a_bad_frame_after_good_ones_voids_the_whole_datagram() {
    let mut s = session();
    let mut frames = data_frame(0, b"hello");
    frames.push(0x0c); // not a frame type
    let err = s.handle_datagram(Time::ZERO, PathId(0), &datagram(0, 0, &frames));
    assert_eq!(
        err,
        Err(RecvError::Decode(DecodeError::UnknownFrameType(0x0c)))
    );
    assert_eq!(delivered(&mut s), 0, "the valid DATA before it did not act");
    // The same path sequence number is still fresh: the datagram left no trace.
    let ok = s.handle_datagram(
        Time::ZERO,
        PathId(0),
        &datagram(0, 0, &data_frame(0, b"hello")),
    );
    assert_eq!(ok, Ok(()));
    assert_eq!(delivered(&mut s), 1);
    assert_eq!(s.stats().datagrams_rejected, 1);
}

#[test]
fn each_kind_of_bad_datagram_has_its_error() {
    let mut s = session();
    let good = data_frame(0, b"x");
    let cases: Vec<(Vec<u8>, PathId, RecvError)> = vec![
        (vec![], PathId(0), RecvError::Decode(DecodeError::Truncated)),
        (
            datagram(0, 0, &[]),
            PathId(0),
            RecvError::Decode(DecodeError::Empty),
        ),
        (
            {
                let mut d = datagram(0, 0, &good);
                d[0] = 0x10; // version 1, the 14-byte header of old
                d
            },
            PathId(0),
            RecvError::Decode(DecodeError::UnsupportedVersion(1)),
        ),
        (
            datagram(1, 0, &good),
            PathId(0),
            RecvError::PathMismatch {
                header: PathId(1),
                arrived: PathId(0),
            },
        ),
        (
            datagram(3, 0, &good),
            PathId(3),
            RecvError::UnknownPath(PathId(3)),
        ),
    ];
    for (bytes, path, want) in cases {
        assert_eq!(s.handle_datagram(Time::ZERO, path, &bytes), Err(want));
    }
    assert_eq!(delivered(&mut s), 0);
    let d = datagram(0, 5, &good);
    assert_eq!(s.handle_datagram(Time::ZERO, PathId(0), &d), Ok(()));
    assert_eq!(
        s.handle_datagram(Time::ZERO, PathId(0), &d),
        Err(RecvError::Duplicate(PathId(0)))
    );
    assert_eq!(
        delivered(&mut s),
        1,
        "a replayed datagram delivers nothing twice"
    );
}

/// A datagram the driver decoded itself (`handle_decoded`) is checked and counted as the
/// whole datagram is by `handle_datagram`, and a hand-made empty payload is refused.
#[test]
fn a_decoded_datagram_is_checked_as_the_whole_one_is() {
    let mut whole = session();
    let mut decoded = session();
    let good = data_frame(0, b"x");
    let inputs = [
        datagram(0, 0, &good),
        datagram(0, 0, &good),
        datagram(0, 1, &[0x0c, 0x0c]),
        datagram(1, 2, &good),
        datagram(0, 3, &[0x0c]),
    ];
    for bytes in &inputs {
        let (header, payload) = Header::decode(bytes).unwrap();
        assert_eq!(
            decoded.handle_decoded(Time::ZERO, PathId(0), &header, payload),
            whole.handle_datagram(Time::ZERO, PathId(0), bytes),
        );
    }
    assert_eq!(delivered(&mut decoded), 1);
    assert_eq!(delivered(&mut whole), 1);
    assert_eq!(decoded.stats().datagrams_received, 1);
    assert_eq!(decoded.stats().datagrams_rejected, 4);
    assert_eq!(
        decoded.path_stats(PathId(0)).unwrap().recv_bytes,
        whole.path_stats(PathId(0)).unwrap().recv_bytes,
    );
    let (header, _) = Header::decode(&inputs[0]).unwrap();
    assert_eq!(
        decoded.handle_decoded(Time::ZERO, PathId(0), &header, &[]),
        Err(RecvError::Decode(DecodeError::Empty))
    );
}

/// A jump of 2^31 in a path's sequence numbers (crafted, or an honest peer after 2^31
/// datagrams with an early gap) must not leave an unencodable ACK due forever: after
/// draining every transmit, the next deadline is in the future.
#[test]
fn a_huge_sequence_jump_never_makes_a_busy_loop() {
    let mut s = session();
    let now = Time::from_millis(10);
    s.handle_datagram(now, PathId(0), &datagram(0, 0, &data_frame(0, b"a")))
        .unwrap();
    s.handle_datagram(
        now,
        PathId(0),
        &datagram(0, 0x8000_0005, &data_frame(1, b"b")),
    )
    .unwrap();
    struct Discard;
    impl plait_proto::Io for Discard {
        fn transmit(&mut self, _: Time, _: PathId, _: &[u8]) {}
        fn deliver(&mut self, _: Time, _: &[u8], _: &plait_proto::Delivery) {}
    }
    let mut buf = vec![0u8; 2048];
    let later = Time::from_millis(100);
    let next = plait_proto::drive(&mut s, later, &mut Discard, &mut buf);
    assert!(
        next.is_none_or(|t| t > later),
        "deadline {next:?} not after {later:?}"
    );
}

/// After the peer's CLOSE nothing is sent, but a packet the reorder buffer holds behind a
/// hole still leaves once the hole is given up.
#[test]
fn peer_close_still_releases_held_packets() {
    use plait_proto::wire::CloseRepr;
    let mut s = session();
    let now = Time::from_millis(10);
    // Global 1 arrives, 0 never does: 1 waits behind the hole.
    s.handle_datagram(now, PathId(0), &datagram(0, 0, &data_frame(1, b"late")))
        .unwrap();
    let mut close = vec![0u8; 64];
    let mut w = Writer::new(&mut close);
    CloseRepr {
        error_code: 0,
        reason: b"bye",
    }
    .encode(&mut w)
    .unwrap();
    let n = w.len();
    close.truncate(n);
    s.handle_datagram(now, PathId(0), &datagram(0, 1, &close))
        .unwrap();
    assert!(s.is_closed());
    let deadline = s.poll_timeout().expect("the held packet has a deadline");
    s.handle_timeout(deadline);
    let mut buf = vec![0u8; 2048];
    let got = std::iter::from_fn(|| s.poll_delivery(&mut buf)).count();
    assert_eq!(got, 1);
    let mut out = vec![0u8; 2048];
    assert!(
        s.poll_transmit(deadline, &mut out).is_none(),
        "closed: nothing is sent"
    );
}

proptest::proptest! {
    /// Arbitrary bytes on any path, then every output and a timer, never panic the session.
    #[test]
    fn arbitrary_datagrams_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300), path in 0u8..20) {
        let mut s = session();
        let _ = s.handle_datagram(Time::ZERO, PathId(path), &bytes);
        let mut buf = vec![0u8; 2048];
        while s.poll_transmit(Time::from_millis(1), &mut buf).is_some() {}
        let _ = delivered(&mut s);
        s.handle_timeout(Time::from_millis(2_000));
    }
}

/// A peer that marks every datagram ACK_SOON, with a body the receiver ignores, draws at
/// most one ACK per four datagrams (docs/protocol.md#ack-soon), and the marks are not
/// counted as unknown extensions.
#[test]
fn a_peer_marking_every_datagram_draws_at_most_one_ack_per_four() {
    let mut s = session();
    let mut buf = vec![0u8; 2048];
    let mut acks = 0;
    for i in 0..64u32 {
        let now = Time::from_millis(u64::from(i));
        let mut body = vec![0x16, 3, 1, 2, 3]; // ACK_SOON with a 3-byte body
        body.extend(data_frame(u64::from(i), b"x"));
        let d = datagram(0, i, &body);
        assert_eq!(s.handle_datagram(now, PathId(0), &d), Ok(()));
        while let Some(t) = s.poll_transmit(now, &mut buf) {
            let (_, payload) = Header::decode(&buf[..t.len]).unwrap();
            if frames(payload)
                .flatten()
                .any(|f| matches!(f, Frame::Ack(_)))
            {
                acks += 1;
            }
        }
    }
    assert_eq!(delivered(&mut s), 64);
    assert_eq!(s.stats().extensions_skipped, 0);
    // Unmarked, 64 datagrams a millisecond apart draw 4 ACKs (one per 16); marked, one
    // 5 ms after the first of each group of at least four.
    assert!((5..=16).contains(&acks), "{acks} ACKs for 64 datagrams");
}
