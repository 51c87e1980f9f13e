//! Path sequence numbers never repeat within a session, even when a path is removed and
//! added again (docs/protocol.md#sequence-numbers): the tunnel makes its AEAD nonces of
//! them, so a repeat under one key would be a nonce reuse.

use std::collections::BTreeSet;

use plait_proto::path::PathHints;
use plait_proto::wire::Header;
use plait_proto::{Config, PathId, Session, Time};

const P: PathId = PathId(0);

fn session() -> Session {
    let mut s = Session::new(Config::default()).unwrap();
    s.add_path(Time::ZERO, P, PathHints::default()).unwrap();
    s
}

/// Everything `from` sends at `now`, handed to `to`; returns the path sequence numbers.
fn exchange(now: Time, from: &mut Session, to: &mut Session) -> Vec<u32> {
    let mut buf = vec![0u8; 2048];
    let mut seqs = Vec::new();
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let (header, _) = Header::decode(&buf[..t.len]).unwrap();
        seqs.push(header.path_seq);
        to.handle_datagram(now, t.path, &buf[..t.len])
            .expect("the peer accepts every datagram");
    }
    seqs
}

#[test]
fn a_re_added_path_continues_its_numbering_in_both_directions() {
    let (mut a, mut b) = (session(), session());
    let mut sent_by_a = BTreeSet::new();
    let mut now;
    for round in 0..3u64 {
        for step in 0..20u64 {
            now = Time::from_millis(round * 1_000 + step * 10);
            a.handle_inner_packet(now, &[0x45; 100]).unwrap();
            for seq in exchange(now, &mut a, &mut b) {
                assert!(sent_by_a.insert(seq), "path sequence number {seq} repeated");
            }
            exchange(now, &mut b, &mut a);
        }
        // Both ends withdraw the path and bring it back, as the tunnel does when a link
        // goes and comes back.
        now = Time::from_millis(round * 1_000 + 500);
        for s in [&mut a, &mut b] {
            s.remove_path(now, P).unwrap();
            s.add_path(now, P, PathHints::default()).unwrap();
        }
    }
    assert!(sent_by_a.len() >= 60, "{}", sent_by_a.len());
    // The receiver's ACKs kept naming what a sent: a's log drained, nothing left unacked
    // beyond the last round trip.
    assert_eq!(a.path_stats(P).unwrap().lost, 0);
}
