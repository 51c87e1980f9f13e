//! Path validation between the two endpoints, over the in-memory network of
//! [`super::tests`] with virtual time (docs/protocol.md#path-validation): a raced copy from
//! a foreign address moves nothing and earns at most three times its bytes; genuine NAT
//! rebinding moves the path one round trip after the first datagram from the new address;
//! wrong, stale or misdirected responses are ignored; retries are bounded; the old address
//! carries the path's traffic meanwhile.

use std::net::SocketAddr;
use std::time::Duration;

use plait_proto::Time;

use super::tests::{Capture, World, addr, keys, packet, tags};
use super::validation::MAX_CHALLENGES;
use crate::message::{
    Message, PATH_CHALLENGE, PATH_CONTROL_LEN, PATH_RESPONSE, PathFrame, TYPE_DATA,
    TYPE_PATH_CONTROL, parse,
};

const ATTACKER: &str = "192.0.2.99:5555";

/// A world whose session is up and has carried traffic both ways.
fn established() -> World {
    let k = keys();
    let mut w = World::new(&k);
    w.run_for(Duration::from_secs(2));
    w.traffic(20, 0);
    w
}

/// The client sends `p`; an on-path attacker forwards a copy of each data message from
/// `attacker`, arriving at once (ahead of the original, which the link delays). Returns
/// the bytes the attacker delivered.
fn client_sends_raced(w: &mut World, p: &[u8], attacker: SocketAddr) -> u64 {
    let mut cap = Capture::default();
    w.client.handle_tun(w.stamp(), p, &mut cap);
    let copies: Vec<Vec<u8>> = cap
        .udp
        .iter()
        .filter(|(_, _, d)| d.first() == Some(&TYPE_DATA))
        .map(|(_, _, d)| d.clone())
        .collect();
    w.absorb(true, cap);
    let mut bytes = 0;
    for c in copies {
        bytes += c.len() as u64;
        w.deliver_to_server(attacker, c);
    }
    bytes
}

/// What the server sent to `to` so far: (datagrams, bytes, of which path challenges).
fn sent_to(w: &World, to: SocketAddr) -> (usize, u64, usize) {
    let mine = w.stray.iter().filter(|(_, a, _)| *a == to);
    let challenges = mine
        .clone()
        .filter(|(_, _, d)| d.first() == Some(&TYPE_PATH_CONTROL))
        .count();
    let bytes = mine.clone().map(|(_, _, d)| d.len() as u64).sum();
    (mine.count(), bytes, challenges)
}

fn remotes(w: &World) -> Vec<Option<String>> {
    w.server.status(w.now)[0]
        .paths
        .iter()
        .map(|p| p.remote.clone())
        .collect()
}

#[test]
fn a_raced_datagram_from_a_foreign_address_moves_nothing_and_earns_at_most_three_times() {
    let mut w = established();
    let genuine = remotes(&w);
    let attacker = addr(ATTACKER);
    let before = w.server.peer_counters(0).unwrap();
    let mut received = 0;
    for i in 0..100 {
        received += client_sends_raced(
            &mut w,
            &packet([10, 77, 0, 2], [10, 0, 0, 1], 500 + i),
            attacker,
        );
        w.server_sends(&packet([10, 0, 0, 1], [10, 77, 0, 2], 500 + i));
        w.run_for(Duration::from_millis(1));
        assert_eq!(remotes(&w), genuine, "the path stays where it was");
    }
    w.run_for(Duration::from_secs(5));
    let (n, bytes, challenges) = sent_to(&w, attacker);
    assert!(
        received > 0 && n > 0,
        "the attacker was heard and challenged"
    );
    assert!(
        bytes <= 3 * received,
        "{bytes} bytes sent to the attacker for {received} received"
    );
    assert_eq!(n, challenges, "nothing but challenges went there");
    let c = w.server.peer_counters(0).unwrap();
    assert_eq!(
        c.paths_validated, before.paths_validated,
        "nothing validated"
    );
    assert!(c.validations_abandoned > before.validations_abandoned);
    // Every packet went through once (the attacker's copies are what arrived first, the
    // originals were replays), and the server's traffic reached the genuine client.
    assert_eq!(
        &tags(&w.server_tun)[20..],
        &(500..600).collect::<Vec<_>>()[..]
    );
    assert_eq!(
        &tags(&w.client_tun)[20..],
        &(500..600).collect::<Vec<_>>()[..]
    );
    assert_eq!(remotes(&w), genuine);
}

#[test]
fn challenges_to_a_silent_candidate_are_bounded_then_given_up() {
    let mut w = established();
    let attacker = addr(ATTACKER);
    // One copy, then nothing more from that address.
    let received = client_sends_raced(&mut w, &packet([10, 77, 0, 2], [10, 0, 0, 1], 1), attacker);
    let timeline = |w: &World| -> Vec<Time> {
        w.stray
            .iter()
            .filter(|(_, a, _)| *a == attacker)
            .map(|(t, _, _)| *t)
            .collect()
    };
    let start = w.now;
    w.run_for(Duration::from_secs(10));
    let (n, bytes, challenges) = sent_to(&w, attacker);
    assert_eq!(challenges as u32, MAX_CHALLENGES, "{:?}", timeline(&w));
    assert_eq!(n, challenges);
    assert_eq!(bytes, MAX_CHALLENGES as u64 * PATH_CONTROL_LEN as u64);
    assert!(bytes <= 3 * received);
    // At 0, 200 and 600 ms (the retry delay doubles), then given up at 1.4 s.
    let offsets: Vec<u64> = timeline(&w)
        .iter()
        .map(|t| t.saturating_since(start).as_millis() as u64)
        .collect();
    assert_eq!(offsets, vec![0, 200, 600]);
    assert_eq!(w.server.peer_counters(0).unwrap().validations_abandoned, 1);
}

#[test]
fn genuine_rebinding_moves_the_path_one_round_trip_after_the_new_address_is_heard() {
    let mut w = established();
    let old = w.client_addrs[0];
    let new = addr("198.51.100.10:50000");
    let before = w.server.peer_counters(0).unwrap();
    // NAT rebinding on path 0 (10 ms each way): the old mapping is gone.
    w.client_addrs[0] = new;
    let (mut heard, mut moved) = (None, None);
    for i in 0..100 {
        w.client_sends(&packet([10, 77, 0, 2], [10, 0, 0, 1], 1000 + i));
        w.server_sends(&packet([10, 0, 0, 1], [10, 77, 0, 2], 1000 + i));
        w.run_for(Duration::from_millis(1));
        if heard.is_none() {
            // The first challenge to the new address: the server has heard it.
            heard = w
                .server_log
                .iter()
                .find(|(_, to, kind, _)| *to == new && *kind == TYPE_PATH_CONTROL)
                .map(|(t, ..)| *t);
        }
        if moved.is_none() && remotes(&w)[0] == Some(new.to_string()) {
            moved = Some(w.now);
        }
        if moved.is_none() {
            assert_eq!(remotes(&w)[0], Some(old.to_string()));
        }
    }
    let (heard, moved) = (heard.unwrap(), moved.unwrap());
    // One round trip on path 0 (20 ms), observed at the end of a 1 ms step.
    let took = moved.saturating_since(heard);
    assert!(
        took >= Duration::from_millis(20) && took <= Duration::from_millis(21),
        "{took:?}"
    );
    let validated_at = heard + Duration::from_millis(20);
    // Meanwhile the old address carried the path's data; after, nothing went there.
    assert!(w.server_log.iter().any(|(t, to, kind, _)| *to == old
        && *kind == TYPE_DATA
        && *t >= heard
        && *t < validated_at));
    assert!(
        !w.server_log
            .iter()
            .any(|(t, to, ..)| *to == old && *t > validated_at)
    );
    let c = w.server.peer_counters(0).unwrap();
    assert_eq!(c.paths_validated, before.paths_validated + 1);
    assert_eq!(c.validations_abandoned, before.validations_abandoned);
    w.traffic(50, 2000);
    assert!(tags(&w.client_tun).ends_with(&(2000..2050).collect::<Vec<_>>()));
    // Everything the client sent arrived, once (the server's packets to the old mapping
    // during that round trip are what rebinding costs).
    let got = tags(&w.server_tun);
    assert!(got.ends_with(&(1000..1100).chain(2000..2050).collect::<Vec<_>>()));
    assert_eq!(w.client.drops().path_frames_ignored, 0);
}

#[test]
fn wrong_stale_or_misdirected_responses_are_ignored() {
    let mut w = established();
    let old = w.client_addrs[0];
    let new = addr("198.51.100.10:50000");
    w.hold_path_responses = true;
    w.client_addrs[0] = new;
    w.client_sends(&packet([10, 77, 0, 2], [10, 0, 0, 1], 1));
    w.run_for(Duration::from_millis(25));
    let held: Vec<(usize, SocketAddr, Vec<u8>)> = std::mem::take(&mut w.held);
    assert_eq!(held.len(), 1, "the client answered the challenge");
    let (_, from, genuine) = held[0].clone();
    assert_eq!(from, new);
    let ignored = |w: &World| w.server.drops().path_frames_ignored;

    // A response with a wrong token, from the right address, sealed by the client.
    let wrong = PathFrame {
        kind: PATH_RESPONSE,
        path: 0,
        token: [0xee; 8],
    };
    let now = w.now;
    let forged = w.client.seal_path_frame(now, &wrong).unwrap();
    w.deliver_to_server(new, forged);
    assert_eq!(ignored(&w), 1);
    // The genuine answer, raced from a foreign address (the attacker's), or for another path.
    w.deliver_to_server(addr(ATTACKER), genuine.clone());
    assert_eq!(ignored(&w), 2);
    // A challenge sent to the server is not something it answers.
    let challenge = PathFrame {
        kind: PATH_CHALLENGE,
        path: 0,
        token: [1; 8],
    };
    let c = w.client.seal_path_frame(now, &challenge).unwrap();
    w.deliver_to_server(new, c);
    assert_eq!(ignored(&w), 3);
    assert_eq!(remotes(&w)[0].as_deref(), Some(old.to_string().as_str()));
    // The genuine answer was spent by its first delivery (replay window), so it cannot
    // validate later either.
    w.deliver_to_server(new, genuine);
    assert_eq!(remotes(&w)[0].as_deref(), Some(old.to_string().as_str()));
    assert!(w.server.drops().replayed >= 1);

    // Stale: hold the answer to a retry until the server has given that candidate up
    // (the client's next datagram makes a new candidate, with a new token).
    let held_before = w.held.len();
    w.run_for(Duration::from_millis(300));
    let stale = w
        .held
        .get(held_before)
        .cloned()
        .expect("a retry was answered");
    w.run_for(Duration::from_secs(3));
    assert!(w.server.peer_counters(0).unwrap().validations_abandoned >= 1);
    let before = ignored(&w);
    w.deliver_to_server(new, stale.2);
    assert_eq!(ignored(&w), before + 1, "a stale token validates nothing");
    assert_eq!(remotes(&w)[0].as_deref(), Some(old.to_string().as_str()));

    // Released, the next genuine answer moves the path.
    w.hold_path_responses = false;
    w.run_for(Duration::from_secs(2));
    w.traffic(20, 100);
    assert_eq!(remotes(&w)[0].as_deref(), Some(new.to_string().as_str()));
}

#[test]
fn a_path_first_address_gets_at_most_three_times_until_it_answers() {
    let k = keys();
    let mut w = World::new(&k);
    // The client's answers never arrive: no address is ever validated.
    w.hold_path_responses = true;
    w.run_for(Duration::from_secs(2));
    for i in 0..200 {
        w.server_sends(&packet([10, 0, 0, 1], [10, 77, 0, 2], i));
        w.run_for(Duration::from_millis(1));
    }
    w.run_for(Duration::from_secs(1));
    let c = w.server.peer_counters(0).unwrap();
    assert_eq!(c.paths_validated, 0);
    assert!(c.amplification_limited > 0, "{c:?}");
    assert!(w.server.drops().amplification_limited > 0);
    assert!(
        w.client_tun.len() < 200,
        "the server could not send it all unvalidated"
    );
    // Per path: what the server sealed to the client (data and challenges) against the
    // sealed messages that reached it from there; the handshake has its own rule.
    for (path, client_addr) in w.client_addrs.clone().into_iter().enumerate() {
        let sealed = |kind: u8| kind == TYPE_DATA || kind == TYPE_PATH_CONTROL;
        let sent: u64 = w
            .server_log
            .iter()
            .filter(|(_, to, kind, _)| *to == client_addr && sealed(*kind))
            .map(|(.., len)| *len as u64)
            .sum();
        let received: u64 = w
            .client_log
            .iter()
            .filter(|(_, p, kind, _)| *p == path && sealed(*kind))
            .map(|(.., len)| *len as u64)
            .sum();
        assert!(
            sent > 0 && sent <= 3 * received,
            "path {path}: {sent} sent, {received} received"
        );
    }
    // Now the client answers: everything flows.
    w.hold_path_responses = false;
    w.run_for(Duration::from_secs(2));
    w.traffic(20, 1000);
    let c = w.server.peer_counters(0).unwrap();
    assert!(c.paths_validated >= 2, "{c:?}");
    assert!(tags(&w.client_tun).ends_with(&(1000..1020).collect::<Vec<_>>()));
}

#[test]
fn path_control_messages_parse_as_such() {
    let mut w = established();
    let frame = PathFrame {
        kind: PATH_RESPONSE,
        path: 1,
        token: [2; 8],
    };
    let now = w.now;
    let m = w.client.seal_path_frame(now, &frame).unwrap();
    assert_eq!(m.len(), PATH_CONTROL_LEN);
    assert!(matches!(parse(&m), Ok(Message::PathControl { .. })));
}
