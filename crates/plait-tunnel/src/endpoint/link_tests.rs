//! The link's invariants through its own methods: an answered handshake changes nothing
//! until confirmed, a fresh session comes only with the confirming message (and is
//! abandoned if the caller leaves it there), endpoints move only on opened messages, and
//! its status shows a path's capacity, not what the path happened to carry.

use std::net::SocketAddr;

use plait_proto::wire::{DataRepr, DecodeError, Header, Writer};
use plait_proto::{Config, PathId, Session, Time};

use super::link::{Link, ReceiveDrop};
use super::{Outputs, Random};
use crate::crypto::handshake::SessionKeys;
use crate::crypto::keypair::{Keypair, SealedId};
use crate::message::{DATA_HEADER_LEN, DATA_OVERHEAD, Message, parse};

struct Discard;

impl Outputs for Discard {
    fn send_udp(&mut self, _: usize, _: SocketAddr, _: &[u8]) {}
    fn write_tun(&mut self, _: &[u8]) {}
}

/// The client's and the server's halves of one handshake's keys.
fn pair(client_index: u32, server_index: u32, seed: u8) -> (Keypair, Keypair) {
    let c = SessionKeys {
        send: [seed; 32],
        recv: [!seed; 32],
    };
    let s = SessionKeys {
        send: c.recv,
        recv: c.send,
    };
    (
        Keypair::new(&c, client_index, server_index, Time::ZERO, true),
        Keypair::new(&s, server_index, client_index, Time::ZERO, false),
    )
}

/// An engine datagram on path 0; `frames` false leaves it header-only.
fn engine_datagram(path_seq: u32, frames: bool) -> Vec<u8> {
    let mut buf = vec![0u8; 256];
    let mut w = Writer::new(&mut buf);
    Header {
        path: PathId(0),
        path_seq,
        timestamp_us: 0,
    }
    .write_to(&mut w)
    .unwrap();
    if frames {
        DataRepr {
            global_seq: u64::from(path_seq),
            prev_delta: 0,
            payload: b"inner",
            to_end: true,
        }
        .encode(&mut w)
        .unwrap();
    }
    let n = w.len();
    buf.truncate(n);
    buf
}

/// `datagram` sealed by `keys` into a data message, with the index and identity it names.
fn sealed(keys: &mut Keypair, datagram: &[u8]) -> (Vec<u8>, u32, SealedId) {
    let mut buf = vec![0u8; DATA_OVERHEAD + datagram.len()];
    buf[DATA_HEADER_LEN..DATA_HEADER_LEN + datagram.len()].copy_from_slice(datagram);
    let n = keys.seal(Time::ZERO, &mut buf, datagram.len()).unwrap();
    buf.truncate(n);
    let Ok(Message::Data { receiver, id }) = parse(&buf) else {
        panic!("not a data message");
    };
    (buf, receiver, SealedId::Data(id))
}

fn session() -> Session {
    Session::new(Config::default()).unwrap()
}

const FROM: &str = "198.51.100.7:4000";

#[test]
fn a_fresh_session_starts_only_with_the_confirming_message() {
    let from: SocketAddr = FROM.parse().unwrap();
    let now = Time::ZERO;
    let mut link = Link::responder(Vec::new());
    let (mut c1, s1) = pair(1, 11, 1);
    assert!(link.wants_fresh_session(7));
    assert_eq!(link.stage_handshake(s1, 7), None);
    assert!(!link.has_session(), "answered, not yet confirmed");
    assert!(link.current_keys().is_none());

    let (mut msg, receiver, id) = sealed(&mut c1, &engine_datagram(0, true));
    let mut opened = link.open(now, receiver, id, &mut msg).unwrap();
    let fresh = opened
        .take_fresh_session()
        .expect("the handshake asked for one");
    assert_eq!(fresh.session_id(), 7);
    assert!(
        !link.start_session(fresh, session()),
        "no session to replace"
    );
    assert_eq!(
        link.receive_and_learn(
            now,
            opened,
            0,
            from,
            &mut Random::from_seed(Some(1)),
            &mut Discard
        ),
        Ok(Some(PathId(0)))
    );
    assert!(link.has_session() && !link.wants_fresh_session(7));
    assert_eq!(link.handshakes(), 1);

    // A rekey naming the same session asks for nothing fresh.
    let (mut c2, s2) = pair(2, 12, 2);
    link.stage_handshake(s2, 7);
    let (mut msg, receiver, id) = sealed(&mut c2, &engine_datagram(1, true));
    let mut opened = link.open(now, receiver, id, &mut msg).unwrap();
    assert_eq!(opened.take_fresh_session(), None);
    assert_eq!(
        link.receive_and_learn(
            now,
            opened,
            0,
            from,
            &mut Random::from_seed(Some(1)),
            &mut Discard
        ),
        Ok(None)
    );
    assert_eq!(link.current_keys().map(|k| k.local_index), Some(12));
}

#[test]
fn a_fresh_session_left_in_the_message_is_abandoned() {
    let from: SocketAddr = FROM.parse().unwrap();
    let now = Time::ZERO;
    let mut link = Link::responder(Vec::new());
    let (mut c1, s1) = pair(1, 11, 1);
    link.stage_handshake(s1, 7);
    let (mut msg, receiver, id) = sealed(&mut c1, &engine_datagram(0, true));
    let mut opened = link.open(now, receiver, id, &mut msg).unwrap();
    let fresh = opened.take_fresh_session().unwrap();
    link.start_session(fresh, session());
    link.receive_and_learn(
        now,
        opened,
        0,
        from,
        &mut Random::from_seed(Some(1)),
        &mut Discard,
    )
    .unwrap();

    // The client moves to session 8; the server does not take the fresh session out.
    let (mut c2, s2) = pair(2, 12, 2);
    link.stage_handshake(s2, 8);
    assert_eq!(link.session_id(), 7, "nothing changes before confirmation");
    let (mut msg, receiver, id) = sealed(&mut c2, &engine_datagram(0, true));
    let opened = link.open(now, receiver, id, &mut msg).unwrap();
    assert!(link.has_session(), "opening alone changes no session");
    let _ = link.receive_and_learn(
        now,
        opened,
        0,
        from,
        &mut Random::from_seed(Some(1)),
        &mut Discard,
    );
    assert!(!link.has_session(), "the session the client left is gone");
    assert!(link.wants_fresh_session(8), "the next handshake asks again");
}

#[test]
fn a_header_only_datagram_is_malformed_and_learns_nothing() {
    let from: SocketAddr = FROM.parse().unwrap();
    let now = Time::ZERO;
    let mut link = Link::responder(Vec::new());
    let (mut c1, s1) = pair(1, 11, 1);
    link.stage_handshake(s1, 7);
    let (mut msg, receiver, id) = sealed(&mut c1, &engine_datagram(0, false));
    let mut opened = link.open(now, receiver, id, &mut msg).unwrap();
    let fresh = opened.take_fresh_session().unwrap();
    link.start_session(fresh, session());
    assert_eq!(
        link.receive_and_learn(
            now,
            opened,
            0,
            from,
            &mut Random::from_seed(Some(1)),
            &mut Discard
        ),
        Err(ReceiveDrop::Malformed(DecodeError::Empty))
    );
    let status = link.status(now, "peer", "key", "plait");
    assert!(status.paths.is_empty(), "no path was added");
}

/// The engine header names no session, so the keys must: a datagram of the old session,
/// held back by an on-path attacker (or late on a slow path) and released after the
/// client started a fresh session, finds no keys, rather than reaching the new session
/// (where its far global sequence number would make everything after it look old).
#[test]
fn a_held_back_datagram_of_the_old_session_does_not_reach_a_fresh_one() {
    let from: SocketAddr = FROM.parse().unwrap();
    let now = Time::ZERO;
    let mut link = Link::responder(Vec::new());
    let (mut c1, s1) = pair(1, 11, 1);
    link.stage_handshake(s1, 7);
    let (mut msg, receiver, id) = sealed(&mut c1, &engine_datagram(0, true));
    let mut opened = link.open(now, receiver, id, &mut msg).unwrap();
    let fresh = opened.take_fresh_session().unwrap();
    link.start_session(fresh, session());
    // Sealed by the old session, far ahead in its numbering, and held back.
    let (mut held, held_receiver, held_id) = sealed(&mut c1, &engine_datagram(1 << 20, true));

    // The client restarts: a handshake naming session 8, confirmed by its first datagram.
    let (mut c2, s2) = pair(2, 12, 2);
    link.stage_handshake(s2, 8);
    let (mut msg, receiver, id) = sealed(&mut c2, &engine_datagram(0, true));
    let mut opened = link.open(now, receiver, id, &mut msg).unwrap();
    assert_eq!(opened.dropped_indices().collect::<Vec<_>>(), vec![11]);
    let fresh = opened.take_fresh_session().unwrap();
    link.start_session(fresh, session());
    link.receive_and_learn(
        now,
        opened,
        0,
        from,
        &mut Random::from_seed(Some(1)),
        &mut Discard,
    )
    .unwrap();
    assert_eq!(
        link.open(now, held_receiver, held_id, &mut held).err(),
        Some(super::keyring::DataDrop::UnknownIndex)
    );
}

/// `plait status` shows a capacity, never what an idle path happened to deliver.
#[test]
fn status_shows_a_capacity_not_a_delivery_rate() {
    use plait_proto::path::{PathState, PathView};
    let mut v = PathView::new(PathId(1), PathState::Active);
    v.delivery_rate = Some(300.0);
    assert_eq!(
        super::link::shown_capacity(&v),
        None,
        "acknowledgements only"
    );
    v.pair_rate = Some(5e6);
    assert_eq!(super::link::shown_capacity(&v), Some(5e6));
    v.train_rate = Some(4e6);
    assert_eq!(super::link::shown_capacity(&v), Some(4e6), "trains first");
}
