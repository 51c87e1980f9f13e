//! Registration between both endpoints over the in-memory network of [`super::tests`]
//! (docs/protocol.md#registration): the server holds the client's path set with its
//! attributes, runs its session on the preferred subset, answers the client's query;
//! forged, malformed and misdirected registrations and queries change nothing.

use std::time::Duration;

use super::tests::{SERVER, World, addr, engine, keys, tags};
use super::{ClientEndpoint, ClientParams, ClientPath};
use crate::control::snapshot::RegistrationStatus;
use crate::message::{PATH_TOKEN_LEN, PathFrame, QUERY, REGISTER};
use crate::registration::{
    CostClass, Entry, LinkKind, PathAttributes, Quality, Registration, encode,
};

const ATTACKER: &str = "203.0.113.66:5555";

/// Path 0 (10 ms, the faster) is a wired link at priority 1; path 1 (30 ms) a cellular
/// link at priority 0: the preferred subset is path 1 alone, so both ends put data there
/// although path 0 is faster.
fn world() -> World {
    world_with(CostClass::Unmetered)
}

/// [`world`] with path 1 of cost class `cost`.
fn world_with(cost: CostClass) -> World {
    let k = keys();
    let mut w = World::new(&k);
    let path = |name: &str, link, cost, priority| ClientPath {
        name: name.into(),
        server: addr(SERVER),
        rate_hint: None,
        backup: false,
        attributes: PathAttributes {
            link,
            cost,
            priority,
        },
    };
    w.client = ClientEndpoint::new(ClientParams {
        private_key: k.client.clone(),
        server_public_key: k.server.public(),
        preshared_key: None,
        paths: vec![
            path("fibre", LinkKind::Wired, CostClass::Unmetered, 1),
            path("lte", LinkKind::Cellular, cost, 0),
        ],
        engine: engine(),
    });
    w.run_for(Duration::from_secs(2));
    w
}

fn held(w: &World) -> RegistrationStatus {
    w.server.status(w.now)[0]
        .registration
        .clone()
        .expect("the server holds a registration")
}

#[test]
fn the_server_holds_the_registration_runs_on_the_preferred_subset_and_answers_a_query() {
    let mut w = world();
    let server = held(&w);
    let shape: Vec<_> = server
        .paths
        .iter()
        .map(|p| (p.id, p.link.as_str(), p.cost.as_str(), p.priority))
        .collect();
    assert_eq!(
        shape,
        vec![
            (0, "wired", "unmetered", 1),
            (1, "cellular", "unmetered", 0)
        ]
    );
    let client = w
        .client
        .status(w.now)
        .registration
        .expect("the client shows its registration");
    assert_eq!(client.acked, client.seq, "acknowledged");
    assert_eq!(client.server_seq, Some(server.seq), "queried");
    assert_eq!(client.server_agrees, Some(true));
    let events = w.server.status(w.now)[0].path_events;
    assert_eq!((events.registrations, events.registrations_refused), (1, 0));

    // Data keeps to the preferred path both ways; path 0 carries probes and ACKs only.
    let (s0, c0) = (w.server_sent[0], w.client_sent[0]);
    w.traffic(200, 0);
    assert_eq!(tags(&w.server_tun), (0..200).collect::<Vec<_>>());
    assert_eq!(tags(&w.client_tun), (0..200).collect::<Vec<_>>());
    assert!(
        w.server_sent[0] - s0 < 40 && w.client_sent[0] - c0 < 40,
        "the priority-1 path carried data: server {:?}, client {:?}",
        w.server_sent,
        w.client_sent
    );

    // The preferred path goes silent: path 0 takes over at both ends.
    w.cut = Some(1);
    w.run_for(Duration::from_secs(2));
    let (s0, c0) = (w.server_sent[0], w.client_sent[0]);
    w.traffic(200, 200);
    assert_eq!(tags(&w.server_tun), (0..400).collect::<Vec<_>>());
    assert_eq!(tags(&w.client_tun), (0..400).collect::<Vec<_>>());
    assert!(
        w.server_sent[0] - s0 >= 200 && w.client_sent[0] - c0 >= 200,
        "path 0 took over: server {:?}, client {:?}",
        w.server_sent,
        w.client_sent
    );
}

/// docs/protocol.md#overflow: a metered path is an overflow path at both ends (the server
/// learns it from the registration), so it ranks after the unmetered one whatever its
/// priority; light traffic leaves it alone, and it takes over when the other is cut.
#[test]
fn a_metered_path_carries_only_what_the_other_cannot_at_both_ends() {
    let mut w = world_with(CostClass::Metered);
    assert_eq!(held(&w).paths[1].cost, "metered");
    let (s1, c1) = (w.server_sent[1], w.client_sent[1]);
    w.traffic(200, 0);
    assert_eq!(tags(&w.server_tun), (0..200).collect::<Vec<_>>());
    assert_eq!(tags(&w.client_tun), (0..200).collect::<Vec<_>>());
    assert!(
        w.server_sent[1] - s1 < 40 && w.client_sent[1] - c1 < 40,
        "the metered path carried data: server {:?}, client {:?}",
        w.server_sent,
        w.client_sent
    );
    w.cut = Some(0);
    w.run_for(Duration::from_secs(2));
    let (s1, c1) = (w.server_sent[1], w.client_sent[1]);
    w.traffic(200, 200);
    assert_eq!(tags(&w.server_tun), (0..400).collect::<Vec<_>>());
    assert!(
        w.server_sent[1] - s1 >= 200 && w.client_sent[1] - c1 >= 200,
        "the metered path took over: server {:?}, client {:?}",
        w.server_sent,
        w.client_sent
    );
}

/// A spent budget (the daemon's call) makes a path a backup at both ends, and a new
/// period gives it back its role.
#[test]
fn a_path_made_a_backup_stands_by_at_both_ends() {
    let mut w = world();
    let mut cap = super::tests::Capture::default();
    let now = w.stamp();
    // Path 1 is the preferred one; as a backup it must stand by for path 0.
    w.client.set_path_backup(now, 1, true, &mut cap);
    w.absorb(true, cap);
    w.run_for(Duration::from_millis(500));
    let (s1, c1) = (w.server_sent[1], w.client_sent[1]);
    w.traffic(200, 0);
    assert_eq!(tags(&w.client_tun), (0..200).collect::<Vec<_>>());
    assert!(
        w.server_sent[1] - s1 < 40 && w.client_sent[1] - c1 < 40,
        "the backup carried data: server {:?}, client {:?}",
        w.server_sent,
        w.client_sent
    );
    assert!(held(&w).paths[1].backup, "registered as a backup");
    let mut cap = super::tests::Capture::default();
    let now = w.stamp();
    w.client.set_path_backup(now, 1, false, &mut cap);
    w.absorb(true, cap);
    w.run_for(Duration::from_millis(500));
    let (s1, c1) = (w.server_sent[1], w.client_sent[1]);
    w.traffic(200, 200);
    assert!(
        w.server_sent[1] - s1 >= 200 && w.client_sent[1] - c1 >= 200,
        "the path is preferred again: server {:?}, client {:?}",
        w.server_sent,
        w.client_sent
    );
}

#[test]
fn a_binding_update_follows_a_link_that_goes_and_a_changed_address() {
    let mut w = world();
    let before = held(&w).seq;
    let mut cap = super::tests::Capture::default();
    let now = w.stamp();
    w.client.set_path_available(now, 0, false, &mut cap);
    w.absorb(true, cap);
    w.run_for(Duration::from_millis(200));
    let after = held(&w);
    assert!(after.seq > before);
    assert!(!after.paths[0].available && after.paths[1].available);
    let local = addr("198.51.100.10:40000");
    w.client.set_path_local(w.now, 1, local);
    w.run_for(Duration::from_millis(300));
    let last = held(&w);
    assert!(last.seq > after.seq);
    assert_eq!(last.paths[1].local.as_deref(), Some("198.51.100.10:40000"));
}

/// A registration sealed by the client (the keys are right) but saying what the server
/// must refuse, and queries from where no path is.
#[test]
fn wrong_family_malformed_stale_and_misdirected_control_frames_change_nothing() {
    let mut w = world();
    let good = held(&w);
    let refused = |w: &World| w.server.status(w.now)[0].path_events.registrations_refused;
    let from = w.client_addrs[0];
    let forge = |w: &mut World, frame: &[u8]| {
        let now = w.now;
        w.client.seal_control_frame(now, frame).expect("keys")
    };
    let entry = |path, local: &str| Entry {
        path,
        available: true,
        backup: false,
        attributes: PathAttributes::default(),
        local: Some(addr(local)),
        quality: Quality::default(),
    };

    // The server sees path 0 at an IPv4 address: an IPv6 care-of address is the wrong
    // family.
    let wrong = Registration {
        seq: good.seq + 100,
        entries: vec![entry(0, "[2001:db8::1]:40000")],
    };
    let m = forge(&mut w, &encode(REGISTER, &wrong));
    w.deliver_to_server(from, m);
    assert_eq!(refused(&w), 1);
    assert_eq!(held(&w), good, "nothing applied");

    // 200 entries announced: refused by the decoder.
    let mut bytes = encode(REGISTER, &Registration::default());
    bytes[1] = 200;
    let m = forge(&mut w, &bytes);
    w.deliver_to_server(from, m);
    assert_eq!(refused(&w), 2);

    // An older number: acknowledged, not applied.
    let stale = Registration {
        seq: 1,
        entries: vec![entry(0, "198.51.100.10:40000")],
    };
    let stale_seq_below = good.seq > 1;
    let m = forge(&mut w, &encode(REGISTER, &stale));
    w.deliver_to_server(from, m);
    if stale_seq_below {
        assert_eq!(held(&w), good);
    }

    // A query from an address no path validated (an attacker racing a genuine one):
    // no answer goes there.
    let query = PathFrame {
        kind: QUERY,
        path: 0,
        token: [0; PATH_TOKEN_LEN],
    };
    let m = w.client.seal_path_frame(w.now, &query).expect("keys");
    let sent_before = w.stray.len();
    w.deliver_to_server(addr(ATTACKER), m);
    assert_eq!(w.stray.len(), sent_before, "nothing sent to the attacker");
    assert_eq!(refused(&w), 2, "a query is not a registration");
}

/// docs/protocol.md#handover, "signal": the client registers its link-layer signal of
/// each path, and the server's session judges the path by it, so what the server sends
/// leaves a weak path too (the server reads no interface of its own). Path 0 (10 ms, the
/// one both ends prefer) reports a weak signal: the server hands it over and sends its
/// data on path 1; the signal strong again, the server hands it back.
#[test]
fn the_server_hands_a_path_over_for_the_signal_the_client_registers() {
    let mut engine = engine();
    engine.settings.handover = true;
    let mut w = World::with_engine(&keys(), engine);
    w.run_for(Duration::from_secs(2));
    let server_path = |w: &World, id: u8| {
        w.server.status(w.now)[0]
            .paths
            .iter()
            .find(|p| p.id == id)
            .cloned()
            .expect("the server's path")
    };
    assert_eq!(server_path(&w, 0).signal, None, "nothing reported yet");

    w.client.set_link_signal(0, Some(0.1));
    w.run_for(Duration::from_secs(3));
    let weak = server_path(&w, 0);
    assert_eq!(weak.signal, Some(0.1), "0.1 is 20 steps of 0.5 %");
    assert_eq!(weak.handover.as_deref(), Some("weak signal"));
    let sent = w.server_sent;
    w.traffic(200, 0);
    assert_eq!(tags(&w.client_tun), (0..200).collect::<Vec<_>>());
    assert!(
        w.server_sent[0] - sent[0] < 40 && w.server_sent[1] - sent[1] >= 200,
        "the server's data left the weak path: {sent:?} then {:?}",
        w.server_sent
    );

    w.client.set_link_signal(0, Some(0.6));
    w.run_for(Duration::from_secs(3));
    assert_eq!(server_path(&w, 0).handover, None, "handed back");
    assert_eq!(server_path(&w, 0).signal, Some(0.6));

    // No signal any more (no row for the interface): the server forgets it too.
    w.client.set_link_signal(0, None);
    w.run_for(Duration::from_secs(3));
    assert_eq!(server_path(&w, 0).signal, None);
}
