//! "A known client at its current address is served first" (docs/protocol.md#known-first),
//! over the in-memory network of [`super::tests`] (virtual time): under a flood of junk
//! initiations with a valid mac1 from random sources (which keeps the server under load)
//! and of junk with a valid mac2 from attackers that proved their own addresses (which
//! keeps the global handshake bucket empty), an established client's rekey is answered on
//! arrival, with no cookie reply; the same initiation from another address or port gets a
//! cookie reply; a flood spoofed from a known address spends that address's budget only,
//! and the client still gets in through a cookie and mac2.

use std::net::SocketAddr;
use std::time::Duration;

use plait_proto::Time;

use super::Random;
use super::known::{KNOWN_ADDRESS_RATE, KNOWN_HANDSHAKE_RATE};
use super::link::PathEndpoint;
use super::tests::{Capture, Keys, World, addr, keys};
use crate::crypto::cookie::{
    Mac1Key, cookie_key, initiation_mac1, open_cookie_reply, write_initiation_mac1,
    write_initiation_mac2,
};
use crate::crypto::keypair::KeyLifetime;
use crate::message::{
    INITIATION_HEADER_LEN, INITIATION_LEN, INITIATION_MAC2_OFFSET, TYPE_COOKIE_REPLY,
    TYPE_INITIATION, TYPE_RESPONSE, write_initiation_header,
};

/// The client's keys are replaced after this (the shortest allowed), so a rekey comes
/// soon after the flood starts.
const REKEY_AFTER: Duration = Duration::from_secs(10);
/// The flood is sent in steps this long: shorter than path 0's one-way delay (10 ms), so
/// a copy of an initiation can reach the server before the original does.
const STEP: Duration = Duration::from_millis(5);

/// An established tunnel whose client rekeys every [`REKEY_AFTER`].
fn established(k: &Keys) -> World {
    let mut w = World::new(k);
    w.client
        .set_key_lifetime(KeyLifetime::shortened(REKEY_AFTER).unwrap());
    w.run_for(Duration::from_secs(2));
    w.traffic(5, 0);
    assert!(w.client.is_established(w.now));
    w
}

/// A known address as the server keys it: socket 0 (the only one the world uses).
fn at(remote: SocketAddr) -> PathEndpoint {
    PathEndpoint { socket: 0, remote }
}

/// A junk initiation (random content, so it fails at Diffie-Hellman) with a valid mac1.
fn junk(rng: &mut Random, mac1: &Mac1Key) -> Vec<u8> {
    let mut m = vec![0u8; INITIATION_LEN];
    rng.fill(&mut m);
    let sender = rng.next_u64() as u32;
    write_initiation_header(
        m.first_chunk_mut::<INITIATION_HEADER_LEN>().unwrap(),
        sender,
    );
    write_initiation_mac2(&mut m, None);
    write_initiation_mac1(&mut m, mac1);
    m
}

/// A flood of junk initiations, all with a valid mac1, every [`STEP`]: `per_step` from
/// random sources; `per_step` from each proven attacker (with a valid mac2 for its own
/// address); `per_step` from each spoofed address (no valid mac2: a spoofer never sees
/// the cookie).
struct Flood {
    rng: Random,
    mac1: Mac1Key,
    per_step: usize,
    proven: Vec<(SocketAddr, Vec<u8>)>,
    spoofed: Vec<SocketAddr>,
}

impl Flood {
    fn new(k: &Keys, per_step: usize) -> Flood {
        Flood {
            rng: Random::from_seed(Some(7)),
            mac1: Mac1Key::new(&k.server.public()),
            per_step,
            proven: Vec::new(),
            spoofed: Vec::new(),
        }
    }

    /// `n` attackers, each in a /24 of its own (so no prefix budget limits them together),
    /// send junk until the server answers with a cookie reply, and keep the cookie: from
    /// then on their junk carries a valid mac2 for their address.
    fn prove(&mut self, w: &mut World, k: &Keys, n: u8) {
        for i in 0..n {
            let from = SocketAddr::from(([100, 64, i, 1], 5000));
            let cookie = (0..20)
                .find_map(|_| {
                    let mut m = junk(&mut self.rng, &self.mac1);
                    let mut out = Capture::default();
                    w.server
                        .handle_udp(w.stamp(), 0, from, &mut m.clone(), &mut out);
                    let reply = out
                        .udp
                        .iter()
                        .find(|(_, to, b)| *to == from && b.first() == Some(&TYPE_COOKIE_REPLY))?;
                    open_cookie_reply(
                        &cookie_key(&k.server.public()),
                        &reply.2,
                        &initiation_mac1(&m).unwrap(),
                    )
                    .map(|c| {
                        write_initiation_mac2(&mut m, Some(&c));
                        m
                    })
                })
                .expect("a cookie reply after the source's unproven burst");
            self.proven.push((from, cookie));
        }
    }

    fn send(&mut self, w: &mut World) {
        let mut out = Capture::default();
        let stamp = w.stamp();
        for _ in 0..self.per_step {
            let r = self.rng.next_u64();
            let from = SocketAddr::new(std::net::Ipv4Addr::from((r >> 32) as u32).into(), r as u16);
            let mut m = junk(&mut self.rng, &self.mac1);
            w.server.handle_udp(stamp, 0, from, &mut m, &mut out);
            for (from, m) in &self.proven {
                w.server
                    .handle_udp(stamp, 0, *from, &mut m.clone(), &mut out);
            }
            for from in &self.spoofed {
                let mut m = junk(&mut self.rng, &self.mac1);
                w.server.handle_udp(stamp, 0, *from, &mut m, &mut out);
            }
        }
        // What the server answers goes where the world sends it: to the client for the
        // spoofed addresses (the client ignores cookie replies to initiations it did not
        // send), nowhere for the others.
        w.absorb(false, out);
    }

    /// Runs the world for `d` with the flood on, [`STEP`] at a time, until `stop` holds.
    fn run_until(&mut self, w: &mut World, d: Duration, mut stop: impl FnMut(&World) -> bool) {
        let end = w.now + d;
        while w.now < end && !stop(w) {
            self.send(w);
            w.run_for(STEP);
        }
    }
}

/// Initiations the client put on the wire since `since`: (when, path).
fn client_initiations(w: &World, since: Time) -> Vec<(Time, usize)> {
    w.client_log
        .iter()
        .filter(|(t, _, kind, _)| *t >= since && *kind == TYPE_INITIATION)
        .map(|(t, path, _, _)| (*t, *path))
        .collect()
}

/// Messages of `kind` the server sent to the client's addresses since `since`: (when, to).
fn server_sent_to_client(w: &World, since: Time, kind: u8) -> Vec<(Time, SocketAddr)> {
    w.server_log
        .iter()
        .filter(|(t, to, k, _)| *t >= since && *k == kind && w.client_addrs.contains(to))
        .map(|(t, to, _, _)| (*t, *to))
        .collect()
}

/// The server's count of confirmed handshakes with the client.
fn handshakes(w: &World) -> u64 {
    w.server.status(w.now)[0].handshakes
}

#[test]
fn the_index_holds_the_validated_addresses_of_a_running_session() {
    let k = keys();
    let mut w = established(&k);
    let mut known = w.server.known_addresses();
    known.sort();
    let mut expect = vec![(at(w.client_addrs[0]), 0), (at(w.client_addrs[1]), 0)];
    expect.sort();
    assert_eq!(known, expect);

    // Path 0 rebinds: its new address is known once it answered its challenge, the old
    // one no longer.
    let moved = addr("198.51.100.10:41000");
    w.client_addrs[0] = moved;
    w.traffic(5, 100);
    let known = w.server.known_addresses();
    assert!(known.contains(&(at(moved), 0)), "{known:?}");
    assert!(
        !known
            .iter()
            .any(|(a, _)| a.remote == addr("198.51.100.10:40000"))
    );
    assert_eq!(known.len(), 2);

    // The client restarts with other ports: the fresh session forgets the old addresses
    // and knows the new ones once validated.
    w.client = World::new(&k).client;
    w.client_addrs = vec![addr("198.51.100.10:42000"), addr("203.0.113.20:42001")];
    w.wire.clear();
    w.run_for(Duration::from_secs(2));
    w.traffic(5, 200);
    let mut known = w.server.known_addresses();
    known.sort();
    let mut expect = vec![(at(w.client_addrs[0]), 0), (at(w.client_addrs[1]), 0)];
    expect.sort();
    assert_eq!(known, expect);
}

/// The clause: under a flood that keeps the server under load (mac1-valid junk
/// from random sources) and the global handshake bucket empty (mac2-valid junk from 16
/// attackers in 16 prefixes, 20/s each), the client's rekey initiation is answered the
/// moment it arrives, with no cookie reply; a copy of it from another address, or from
/// another port of the client's address, gets a cookie reply.
#[test]
fn a_known_client_rekeys_at_once_under_a_flood_and_a_copy_from_elsewhere_gets_a_cookie() {
    let k = keys();
    let mut w = established(&k);
    let mut flood = Flood::new(&k, 2);
    flood.prove(&mut w, &k, 16);
    let start = w.now;
    let before = w.server.drops();
    let confirmed = handshakes(&w);

    // Flood until the client sends its rekey initiation (the step ends before its copy
    // on path 0 arrives: 10 ms).
    let sent = |w: &World| !client_initiations(w, start).is_empty();
    flood.run_until(&mut w, REKEY_AFTER + Duration::from_secs(2), sent);
    let inits = client_initiations(&w, start);
    assert_eq!(inits.len(), 2, "one copy per path: {inits:?}");
    let sent_at = inits[0].0;
    let d = w.server.drops();
    assert!(
        d.cookie_replied - before.cookie_replied > 1_000,
        "under load: {d:?}"
    );
    assert!(
        d.rate_limited - before.rate_limited > 1_000,
        "proven junk over the global bucket: {d:?}"
    );
    assert_eq!(d.known_admitted, before.known_admitted);

    // Copies from elsewhere, ahead of the original: a cookie reply each, not processed.
    let copy = w.inits.last().unwrap().clone();
    let elsewhere = [addr("192.0.2.200:40000"), addr("198.51.100.10:40002")];
    for from in elsewhere {
        w.deliver_to_server(from, copy.clone());
    }
    let replies: Vec<_> = w
        .stray
        .iter()
        .filter(|(t, to, b)| {
            *t == w.now && elsewhere.contains(to) && b.first() == Some(&TYPE_COOKIE_REPLY)
        })
        .map(|(_, to, _)| *to)
        .collect();
    assert_eq!(replies, elsewhere);
    let after_copies = w.server.drops();
    assert_eq!(after_copies.known_admitted, before.known_admitted);
    assert_eq!(after_copies.auth_failed, d.auth_failed, "no Diffie-Hellman");

    // The original arrives on path 0 10 ms after it was sent and is answered at once; the
    // flood goes on.
    flood.run_until(&mut w, Duration::from_secs(1), |w| {
        handshakes(w) > confirmed
    });
    assert!(
        handshakes(&w) > confirmed,
        "rekey confirmed under the flood"
    );
    let responses = server_sent_to_client(&w, start, TYPE_RESPONSE);
    assert_eq!(
        responses.first(),
        Some(&(sent_at + w.delay[0], w.client_addrs[0])),
        "answered on arrival"
    );
    assert!(server_sent_to_client(&w, start, TYPE_COOKIE_REPLY).is_empty());
    assert_eq!(client_initiations(&w, start).len(), 2, "no retry needed");
    let d = w.server.drops();
    // Both copies were admitted as known (the second reached Diffie-Hellman and was
    // refused as the first's replay).
    assert_eq!(d.known_admitted - before.known_admitted, 2, "{d:?}");
    assert_eq!(d.known_over_budget, before.known_over_budget);
    assert_eq!(d.replayed - before.replayed, 1, "{d:?}");
    w.traffic(5, 100);
    assert!(w.client.is_established(w.now));
}

/// A spoofer floods from path 0's address (it knows the client's address and port): it
/// gets that address's burst and rate of Diffie-Hellman and no more; the client's copy on
/// path 0 is over budget (a cookie reply), its copy on path 1 is served at once.
#[test]
fn a_flood_spoofed_from_one_known_address_spends_only_that_addresss_budget() {
    let k = keys();
    let mut w = established(&k);
    let mut flood = Flood::new(&k, 2);
    flood.spoofed = vec![w.client_addrs[0]];
    let start = w.now;
    let before = w.server.drops();
    let confirmed = handshakes(&w);

    flood.run_until(&mut w, REKEY_AFTER + Duration::from_secs(2), |w| {
        handshakes(w) > confirmed
    });
    assert!(
        handshakes(&w) > confirmed,
        "rekey confirmed under the flood"
    );
    let flooded = (w.now - start).as_secs_f64();
    let inits = client_initiations(&w, start);
    assert_eq!(inits.len(), 2, "no retry needed: {inits:?}");
    let responses = server_sent_to_client(&w, start, TYPE_RESPONSE);
    assert_eq!(
        responses.first(),
        Some(&(inits[0].0 + w.delay[1], w.client_addrs[1])),
        "path 1's copy answered on arrival"
    );
    let d = w.server.drops();
    let admitted = d.known_admitted - before.known_admitted;
    eprintln!(
        "one address spoofed for {flooded:.2} s: {admitted} known initiations admitted, {} over budget",
        d.known_over_budget - before.known_over_budget
    );
    // The spoofer's share: the burst, then a token a second; plus the client's path-1 copy.
    let bound = (KNOWN_ADDRESS_RATE.1 + KNOWN_ADDRESS_RATE.0 * flooded).floor() as u64 + 1;
    assert!(admitted <= bound, "{admitted} > {bound}; {d:?}");
    assert!(admitted >= KNOWN_ADDRESS_RATE.1 as u64, "{d:?}");
    // 2 spoofed initiations every 5 ms for about 7 s: nearly all over the budget.
    assert!(
        d.known_over_budget - before.known_over_budget > 2_000,
        "{d:?}"
    );
    // The shared budget of all known addresses is far from spent by one address.
    assert!((admitted as f64) < KNOWN_HANDSHAKE_RATE.1, "{d:?}");
    w.traffic(5, 100);
    assert!(w.client.is_established(w.now));
}

/// Both of the client's addresses are spoofed, so both its copies are over budget: it gets
/// in as any client does under load, through a cookie reply and its retry with mac2 about
/// a second later.
#[test]
fn a_known_client_whose_addresses_are_all_spoofed_gets_in_through_a_cookie() {
    let k = keys();
    let mut w = established(&k);
    let mut flood = Flood::new(&k, 2);
    flood.spoofed = w.client_addrs.clone();
    let start = w.now;
    let before = w.server.drops();
    let confirmed = handshakes(&w);

    flood.run_until(&mut w, REKEY_AFTER + Duration::from_secs(4), |w| {
        handshakes(w) > confirmed
    });
    assert!(
        handshakes(&w) > confirmed,
        "rekey confirmed under the flood"
    );
    // The client's initiations: the first pair without mac2, then (after the cookie reply
    // to its own) a retry carrying mac2, which the server answered.
    let mac2 = |m: &Vec<u8>| m[INITIATION_MAC2_OFFSET..].iter().any(|b| *b != 0);
    let mine: Vec<_> = w.inits.iter().rev().take(4).rev().collect();
    let inits = client_initiations(&w, start);
    assert_eq!(inits.len(), 4, "{inits:?}");
    assert!(!mac2(mine[0]) && !mac2(mine[1]));
    assert!(mac2(mine[2]) && mac2(mine[3]));
    let retry_after = inits[2].0 - inits[0].0;
    assert!(
        retry_after >= Duration::from_secs(1) && retry_after < Duration::from_millis(1_100),
        "{retry_after:?}"
    );
    let responses = server_sent_to_client(&w, start, TYPE_RESPONSE);
    assert!(responses.first().is_some_and(|(t, _)| *t > inits[2].0));
    let d = w.server.drops();
    assert!(
        d.known_over_budget - before.known_over_budget > 4_000,
        "{d:?}"
    );
    // What the spoofer got: two addresses' bursts and rates, no more.
    let flooded = (w.now - start).as_secs_f64();
    let bound = 2 * ((KNOWN_ADDRESS_RATE.1 + KNOWN_ADDRESS_RATE.0 * flooded).floor() as u64 + 1);
    let admitted = d.known_admitted - before.known_admitted;
    eprintln!(
        "both addresses spoofed for {flooded:.2} s: retry {retry_after:?} after the first initiation; {admitted} known initiations admitted, {} over budget",
        d.known_over_budget - before.known_over_budget
    );
    assert!(admitted <= bound, "{admitted} > {bound}; {d:?}");
    w.traffic(5, 100);
    assert!(w.client.is_established(w.now));
}

/// A path the client withdrew (its link went away) leaves the known addresses: an
/// initiation from there is a stranger's until the client restores the path.
#[test]
fn a_withdrawn_paths_address_is_a_stranger_until_restored() {
    let k = keys();
    let mut w = established(&k);
    let (kept, gone) = (at(w.client_addrs[0]), at(w.client_addrs[1]));
    let known_at = |w: &mut World, a| w.server.links_mut().next().unwrap().is_known_at(a);
    assert!(known_at(&mut w, kept) && known_at(&mut w, gone));

    w.cut = Some(1);
    let mut cap = Capture::default();
    w.client.set_path_available(w.stamp(), 1, false, &mut cap);
    w.absorb(true, cap);
    w.run_for(Duration::from_secs(1));
    assert_eq!(
        w.server
            .links_mut()
            .next()
            .unwrap()
            .counters()
            .paths_withdrawn,
        1
    );
    assert!(known_at(&mut w, kept), "path 0 is still known");
    assert!(
        !known_at(&mut w, gone),
        "the withdrawn path's address is not"
    );
    let index = w.server.links_mut().next().unwrap().known_addresses();
    assert_eq!(index, vec![kept]);

    w.cut = None;
    let mut cap = Capture::default();
    w.client.set_path_available(w.stamp(), 1, true, &mut cap);
    w.absorb(true, cap);
    w.run_for(Duration::from_secs(1));
    w.traffic(5, 5);
    assert!(known_at(&mut w, gone), "known again once restored");
}

/// Once the server's keys for a client have expired (it was away for longer than the
/// keys' lifetime), its addresses are strangers again: under load its initiation gets a
/// cookie reply.
#[test]
fn a_client_whose_keys_expired_at_the_server_is_a_stranger_again() {
    let k = keys();
    let mut w = established(&k);
    // Away for 4 minutes: the server's keys (3 minutes) expire; its session and validated
    // addresses stay.
    w.blackout = true;
    w.run_for(Duration::from_secs(240));
    w.blackout = false;
    assert!(!w.server.known_addresses().is_empty());
    let start = w.now;
    let before = w.server.drops();
    let mut flood = Flood::new(&k, 2);
    flood.run_until(&mut w, Duration::from_secs(10), |w| {
        !server_sent_to_client(w, start, TYPE_COOKIE_REPLY).is_empty()
    });
    assert!(!server_sent_to_client(&w, start, TYPE_COOKIE_REPLY).is_empty());
    assert_eq!(w.server.drops().known_admitted, before.known_admitted);
}

/// A client that restarts on the same ports (a configured local port, say) while the
/// server still has its session is known there too: under the flood its new session's
/// first initiation is answered on arrival, with no cookie reply.
#[test]
fn a_client_restarted_at_its_known_addresses_connects_at_once_under_a_flood() {
    let k = keys();
    let mut w = established(&k);
    let mut flood = Flood::new(&k, 2);
    flood.prove(&mut w, &k, 16);
    flood.run_until(&mut w, Duration::from_secs(1), |_| false);
    let before = w.server.drops();
    assert!(before.cookie_replied > 100, "under load: {before:?}");

    w.client = World::new(&k).client;
    w.wire.clear();
    let restarted = w.now;
    flood.run_until(&mut w, Duration::from_secs(2), |w| {
        w.client.is_established(w.now)
    });
    assert!(w.client.is_established(w.now));
    let inits = client_initiations(&w, restarted);
    assert_eq!(inits.len(), 2, "{inits:?}");
    let responses = server_sent_to_client(&w, restarted, TYPE_RESPONSE);
    assert_eq!(
        responses.first(),
        Some(&(inits[0].0 + w.delay[0], w.client_addrs[0])),
        "answered on arrival"
    );
    assert!(server_sent_to_client(&w, restarted, TYPE_COOKIE_REPLY).is_empty());
    assert!(w.server.drops().known_admitted > before.known_admitted);
    w.traffic(5, 100);
    assert_eq!(
        w.server.status(w.now)[0].handshakes,
        2,
        "a fresh session, confirmed"
    );
}
