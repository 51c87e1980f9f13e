//! Crash recovery over the in-memory network of [`super::tests`] (virtual time): a
//! restarted server (a new endpoint with the same keys) brings its clients back with an
//! unknown-index hint (docs/protocol.md#unknown-index); forged, replayed and off-path hints
//! cost at most one handshake per interval and never interrupt traffic; the server hints
//! only well-formed data messages, within its budgets, never with more bytes than it got;
//! without hints the client's unanswered-send timer brings it back, and does not fire on a
//! healthy tunnel.

use std::net::SocketAddr;
use std::time::Duration;

use plait_proto::Time;

use super::schedule::{HINT_MIN_INTERVAL, UNANSWERED_REHANDSHAKE};
use super::server::{HINT_RATE, HINT_SOURCE_RATE, HINTED_DATA_MIN_LEN};
use super::tests::{Capture, Keys, SERVER, World, addr, keys, packet, server_for, tags};
use super::{Now, ServerEndpoint};
use crate::control::HandshakeCauses;
use crate::crypto::hint::HintKey;
use crate::keys::Key;
use crate::message::{
    DATA_HEADER_LEN, DataId, INITIATION_HEADER_LEN, TYPE_DATA, UNKNOWN_INDEX_LEN, write_data_header,
};

/// The bound: a restarted server's clients handshake again within this.
const RECOVERY_BOUND: Duration = Duration::from_secs(2);

/// An established tunnel that has carried some traffic.
fn established(k: &Keys) -> World {
    let mut w = World::new(k);
    w.run_for(Duration::from_secs(2));
    w.traffic(20, 0);
    assert!(w.client.is_established(w.now));
    w
}

/// Whether the server has confirmed the client's keys (its first data message under them
/// arrived): traffic flows both ways again.
fn server_confirmed(w: &World) -> bool {
    w.server
        .status(w.now)
        .first()
        .is_some_and(|s| s.established)
}

/// Replaces the server by a fresh endpoint with the same keys (kill -9 and restart: every
/// key and session forgotten, datagrams in flight lost), then runs in 10 ms steps until the
/// server has confirmed new keys, at most `limit`. Returns how long that took on the
/// virtual clock. With `packets_every`, the client sends an inner packet at that interval
/// meanwhile; otherwise only the engine's keepalives go.
fn restart_server(
    w: &mut World,
    k: &Keys,
    limit: Duration,
    packets_every: Option<Duration>,
) -> Duration {
    w.server = server_for(k, k.client.public());
    w.wire.clear();
    let restarted = w.now;
    let mut next_packet = w.now;
    let mut tag = 50_000;
    while !server_confirmed(w) {
        assert!(
            w.now < restarted + limit,
            "no recovery within {limit:?}; client causes {:?}, server drops {:?}",
            w.client.status(w.now).handshake_causes,
            w.server.drops()
        );
        if let Some(every) = packets_every
            && w.now >= next_packet
        {
            w.client_sends(&packet([10, 77, 0, 2], [10, 0, 0, 1], tag));
            tag += 1;
            next_packet = w.now + every;
        }
        w.run_for(Duration::from_millis(10));
    }
    w.now - restarted
}

fn causes(w: &World) -> HandshakeCauses {
    w.client.status(w.now).handshake_causes
}

/// Traffic both ways arrives complete and in order.
fn assert_traffic_flows(w: &mut World, first_tag: u32) {
    // What was queued before, delivered late, is not this check's business.
    w.run_for(Duration::from_millis(500));
    w.server_tun.clear();
    w.client_tun.clear();
    w.traffic(50, first_tag);
    let want: Vec<u32> = (first_tag..first_tag + 50).collect();
    assert_eq!(tags(&w.server_tun), want);
    assert_eq!(tags(&w.client_tun), want);
}

#[test]
fn restarted_server_hint_brings_a_busy_client_back_at_once() {
    let k = keys();
    let mut w = established(&k);
    let took = restart_server(&mut w, &k, RECOVERY_BOUND, Some(Duration::from_millis(5)));
    let c = causes(&w);
    eprintln!("busy client: recovered {took:?} after the restart; causes {c:?}");
    assert_eq!((c.hint, c.unanswered, c.silence), (1, 0, 0), "{c:?}");
    assert!(w.server.drops().hinted >= 1);
    // The first data message after the restart got a hint; one round trip for the hint,
    // one for the handshake, half of one for the confirming data message.
    assert!(took <= Duration::from_millis(200), "{took:?}");
    assert_traffic_flows(&mut w, 1000);
}

#[test]
fn restarted_server_hint_brings_an_idle_client_back_within_2s() {
    let k = keys();
    let mut w = established(&k);
    let took = restart_server(&mut w, &k, RECOVERY_BOUND, None);
    let c = causes(&w);
    eprintln!("idle client: recovered {took:?} after the restart; causes {c:?}");
    // The engine's keepalive (one a second per idle path) meets the restarted server.
    assert_eq!((c.hint, c.unanswered, c.silence), (1, 0, 0), "{c:?}");
    assert!(took <= RECOVERY_BOUND, "{took:?}");
    assert_traffic_flows(&mut w, 1000);
}

#[test]
fn without_hints_the_unanswered_timer_brings_the_client_back() {
    let k = keys();
    let mut w = established(&k);
    w.drop_hints = true;
    // Keepalives start the unanswered clock within a second of the restart.
    let bound = UNANSWERED_REHANDSHAKE + Duration::from_millis(1500);
    let took = restart_server(&mut w, &k, bound, None);
    let c = causes(&w);
    eprintln!("hints lost: recovered {took:?} after the restart; causes {c:?}");
    assert!(!w.hints.is_empty(), "the server did hint");
    assert_eq!((c.hint, c.unanswered, c.silence), (0, 1, 0), "{c:?}");
    assert_traffic_flows(&mut w, 1000);
}

/// An on-path attacker who knows the server's public key and sees the client's data (its
/// receiver index and counters) sends a well-made hint every 10 ms for 10 s while traffic
/// flows both ways. The client acts on at most one per [`HINT_MIN_INTERVAL`]; each costs
/// one rekey, and not one packet is lost or reordered. No initiation reuses an ephemeral
/// key (each handshake's keys, and so its nonces, are new).
#[test]
fn forged_hints_cost_at_most_one_handshake_per_interval_and_never_interrupt_traffic() {
    let k = keys();
    let mut w = established(&k);
    let session = w.client.status(w.now).session_id;
    let forger = HintKey::new(&k.server.public());
    let before = causes(&w);
    let inits_before = w.inits.len();
    w.server_tun.clear();
    w.client_tun.clear();
    let attack = Duration::from_secs(10);
    let start = w.now;
    let mut sent = 0u32;
    while w.now < start + attack {
        w.client_sends(&packet([10, 77, 0, 2], [10, 0, 0, 1], sent));
        w.server_sends(&packet([10, 0, 0, 1], [10, 77, 0, 2], sent));
        sent += 1;
        if sent.is_multiple_of(10)
            && let Some((receiver, id)) = w.last_client_data
        {
            let mut hint = forger.hint(receiver, id);
            let mut cap = Capture::default();
            w.client
                .handle_udp(w.stamp(), 0, addr(SERVER), &mut hint, &mut cap);
            w.absorb(true, cap);
        }
        w.run_for(Duration::from_millis(1));
    }
    w.run_for(Duration::from_millis(500));
    let after = causes(&w);
    let acted = after.hint - before.hint;
    let max = (attack.as_millis() / HINT_MIN_INTERVAL.as_millis()) as u64 + 1;
    eprintln!(
        "1000 forged hints in {attack:?}: {acted} handshakes; causes {after:?}; ignored {}",
        w.client.drops().hint_ignored
    );
    assert!(
        acted >= 1,
        "the client acts on a hint it cannot tell from a real one"
    );
    assert!(acted <= max, "{acted} hint handshakes in {attack:?}");
    assert_eq!(after.first, before.first, "the keys were never dropped");
    assert_eq!(w.client.status(w.now).session_id, session);
    let want: Vec<u32> = (0..sent).collect();
    assert_eq!(
        tags(&w.server_tun),
        want,
        "client to server: every packet, in order"
    );
    assert_eq!(
        tags(&w.client_tun),
        want,
        "server to client: every packet, in order"
    );
    // Each initiation (one message, sent on both paths) had its own ephemeral key.
    let mut messages: Vec<&[u8]> = w.inits[inits_before..].iter().map(|m| &m[..]).collect();
    messages.sort();
    messages.dedup();
    let mut ephemerals: Vec<&[u8]> = messages
        .iter()
        .map(|m| &m[INITIATION_HEADER_LEN..INITIATION_HEADER_LEN + 32])
        .collect();
    ephemerals.sort();
    ephemerals.dedup();
    assert_eq!(
        ephemerals.len(),
        messages.len(),
        "an ephemeral key was reused"
    );
    assert!(messages.len() as u64 >= acted);
}

/// Hints the client must not act on: a wrong MAC (made without the server's public key),
/// an index that is not its current keys', a data message it never sealed, and a genuine hint
/// replayed after the handshake it caused. None starts a handshake; each is counted.
#[test]
fn off_path_and_replayed_hints_are_ignored() {
    let k = keys();
    let mut w = established(&k);
    restart_server(&mut w, &k, RECOVERY_BOUND, None);
    let genuine = w
        .hints
        .first()
        .expect("the restarted server hinted")
        .1
        .clone();
    let key = HintKey::new(&k.server.public());
    let (receiver, id) = w.last_client_data.expect("client data seen");
    let mut bad_mac = key.hint(receiver, id);
    bad_mac[UNKNOWN_INDEX_LEN - 1] ^= 1;
    let wrong_key = HintKey::new(&Key::generate().unwrap().public()).hint(receiver, id);
    // Path 15, which the client never had, and a number far ahead on the path it used.
    let never_path = DataId([id.0[0] | 0x0f, id.0[1], id.0[2], id.0[3], id.0[4]]);
    let ahead = id.seq().wrapping_add(1 << 30).to_be_bytes();
    let never_seq = DataId([id.0[0], ahead[0], ahead[1], ahead[2], ahead[3]]);
    let candidates = [
        bad_mac.to_vec(),
        wrong_key.to_vec(),
        key.hint(receiver ^ 1, id).to_vec(),
        key.hint(receiver, never_path).to_vec(),
        key.hint(receiver, never_seq).to_vec(),
        genuine,
    ];
    // Well past the interval, so only the checks can refuse them.
    w.run_for(HINT_MIN_INTERVAL * 2);
    let before = causes(&w);
    let ignored = w.client.drops().hint_ignored;
    for (i, c) in candidates.iter().enumerate() {
        let mut m = c.clone();
        let mut cap = Capture::default();
        w.client
            .handle_udp(w.stamp(), 0, addr(SERVER), &mut m, &mut cap);
        assert!(
            cap.udp.iter().all(|(_, _, d)| d[0] == TYPE_DATA),
            "hint {i} started a handshake"
        );
        w.absorb(true, cap);
    }
    assert_eq!(causes(&w), before);
    assert_eq!(
        w.client.drops().hint_ignored,
        ignored + candidates.len() as u64
    );
    assert_traffic_flows(&mut w, 1000);
}

/// A data message of `len` bytes (at least the header) with receiver index `receiver`,
/// the rest 0xa5.
fn data_message(receiver: u32, len: usize) -> Vec<u8> {
    let mut m = vec![0xa5; len];
    let mut h = [0u8; DATA_HEADER_LEN];
    write_data_header(&mut h, receiver);
    m[..DATA_HEADER_LEN].copy_from_slice(&h);
    m
}

fn at(ms: u64) -> Now {
    Now {
        mono: Time::from_millis(ms),
        wall_ns: 1_700_000_000_000_000_000 + ms * 1_000_000,
    }
}

/// A restarted server's answers to data messages with unknown indices: a hint only for one
/// long enough to hold an engine header, of 26 bytes (never more than the message), to
/// its source, with the MAC of the server's key; nothing at all for anything else.
#[test]
fn server_hints_only_well_formed_data_and_never_with_more_bytes() {
    let k = keys();
    let mut s: ServerEndpoint = server_for(&k, k.client.public());
    let key = HintKey::new(&k.server.public());
    let mut t = 1;
    // Every length, each from a source of its own (budgets are per source).
    for len in 0..300usize {
        t += 10;
        let from = SocketAddr::from(([10, (len >> 8) as u8, len as u8, 1], 4000));
        let mut m = if len >= DATA_HEADER_LEN {
            data_message(0x1234_5678, len)
        } else {
            let mut m = vec![0u8; len];
            if let Some(b) = m.first_mut() {
                *b = TYPE_DATA;
            }
            m
        };
        let mut cap = Capture::default();
        s.handle_udp(at(t), 0, from, &mut m, &mut cap);
        if len < HINTED_DATA_MIN_LEN {
            assert!(cap.udp.is_empty(), "a hint for a {len}-byte message");
            continue;
        }
        assert_eq!(cap.udp.len(), 1, "no hint for a {len}-byte message");
        let (socket, to, hint) = &cap.udp[0];
        assert_eq!((*socket, *to), (0, from));
        assert!(hint.len() <= len, "{} bytes answered {len}", hint.len());
        assert_eq!(hint.len(), UNKNOWN_INDEX_LEN);
        assert!(key.check(hint));
        assert_eq!(
            hint[1..10],
            m[1..10],
            "the index and clear prefix are echoed"
        );
    }
    // Junk: every other type byte (with and without reserved bytes), hints sent to the
    // server, and handshake-sized junk, from one more source: never any answer. (A data
    // message of any content with an unknown index is answered as above, by design.)
    let from: SocketAddr = "198.18.9.9:4000".parse().unwrap();
    let mut answered = 0;
    for kind in (0..=255u8).filter(|k| *k != TYPE_DATA) {
        for len in [1, 4, 26, 31, 32, 39, 46, 64, 81, 152, 200, 1400] {
            t += 1;
            let mut m = vec![kind; len];
            if len > 4 && kind % 2 == 0 {
                m[1..4].fill(0);
            }
            let mut cap = Capture::default();
            s.handle_udp(at(t), 0, from, &mut m, &mut cap);
            answered += cap.udp.len();
        }
    }
    let mut hint = key.hint(1, DataId([0x20, 0, 0, 0, 1]));
    let mut cap = Capture::default();
    s.handle_udp(at(t), 0, from, &mut hint, &mut cap);
    answered += cap.udp.len();
    assert_eq!(answered, 0, "junk was answered");
}

/// The server's hint budgets: per source address (burst then rate), and all sources
/// together.
#[test]
fn server_hints_within_per_source_and_global_budgets() {
    let k = keys();
    let mut s = server_for(&k, k.client.public());
    let hints = |s: &mut ServerEndpoint, ms: u64, from: SocketAddr, n: usize| {
        let mut cap = Capture::default();
        for i in 0..n {
            let mut m = data_message(i as u32, 100);
            s.handle_udp(at(ms), 0, from, &mut m, &mut cap);
        }
        cap.udp.len()
    };
    let one = addr("203.0.113.5:4000");
    let burst = HINT_SOURCE_RATE.1 as usize;
    assert_eq!(hints(&mut s, 1, one, 100), burst, "one source: its burst");
    assert_eq!(hints(&mut s, 2, one, 100), 0, "then nothing");
    let per_second = HINT_SOURCE_RATE.0 as usize;
    assert_eq!(hints(&mut s, 1002, one, 100), per_second, "then its rate");
    // Another port of the same address shares its budget; another address has its own.
    assert_eq!(hints(&mut s, 1003, addr("203.0.113.5:4001"), 10), 0);
    assert_eq!(hints(&mut s, 1003, addr("198.51.100.7:4000"), 10), burst);
    // Many sources at once (each in its own /24): the global burst, nothing more.
    let mut s = server_for(&k, k.client.public());
    let mut total = 0;
    for i in 0..1000u32 {
        let from = SocketAddr::from(([10, (i >> 8) as u8, i as u8, 1], 4000));
        total += hints(&mut s, 5, from, 1);
    }
    assert_eq!(total, HINT_RATE.1 as usize);
    assert_eq!(s.drops().hinted, total as u64);
}

/// No false alarms: a healthy tunnel, idle and busy, with one path cut for a while, runs
/// for two minutes with no handshake but the first and the rekey.
#[test]
fn the_unanswered_timer_stays_quiet_on_a_healthy_tunnel() {
    let k = keys();
    let mut w = established(&k);
    w.run_for(Duration::from_secs(30));
    w.traffic(2000, 0);
    w.cut = Some(0);
    w.run_for(Duration::from_secs(20));
    w.traffic(500, 10_000);
    w.cut = None;
    w.run_for(Duration::from_secs(70));
    let c = causes(&w);
    assert_eq!(
        (c.first, c.hint, c.unanswered, c.silence),
        (1, 0, 0, 0),
        "{c:?}"
    );
    assert!(c.rekey >= 1, "{c:?}");
    assert_eq!(w.client.drops().hint_ignored, 0);
}

/// Every path dead for 20 s (the server alive): the client starts one handshake 3 s after
/// its first unanswered send and repeats it every 5 s, keeping its keys; when the paths
/// come back the handshake completes as a rekey (same engine session) and traffic flows.
#[test]
fn a_total_outage_costs_one_handshake_and_its_retries() {
    let k = keys();
    let mut w = established(&k);
    let session = w.server.status(w.now)[0].session_id;
    let inits = w.inits.len();
    w.blackout = true;
    for i in 0..200 {
        w.client_sends(&packet([10, 77, 0, 2], [10, 0, 0, 1], 90_000 + i));
        w.run_for(Duration::from_millis(100));
    }
    let c = causes(&w);
    assert_eq!((c.unanswered, c.hint, c.silence), (1, 0, 0), "{c:?}");
    // First after 3 s, then a retry every 5 s: 1 + 3 in the 17 s left.
    assert!(c.retry <= 4, "{c:?}");
    assert!(w.client.is_established(w.now), "the keys were kept");
    w.blackout = false;
    w.run_for(Duration::from_secs(6));
    assert_eq!(w.server.status(w.now)[0].session_id, session);
    assert_eq!(causes(&w).first, 1);
    assert!(w.inits.len() > inits);
    assert_traffic_flows(&mut w, 1000);
}
