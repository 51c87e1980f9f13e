//! The gateways run the tunnel's own endpoints: a simulated tunnel is up at time zero, it
//! carries inner packets both ways intact, encrypted and framed as the daemon frames them,
//! and a run repeats exactly.

use std::time::Duration;

use plait_proto::Time;

use super::{Outbox, PlaitGateway, connect};
use crate::inner;
use crate::packet::{Body, Packet, TcpAck, TcpSegment};
use crate::route::Routing;
use crate::scenario::Scenario;

const TWO_PATHS: &str = r#"
name = "t"
[[paths]]
rate_kbps = 1000
[[paths]]
rate_kbps = 500
[[runs]]
name = "a"
mode = "plait"
"#;

/// Outer IP and UDP headers the gateways add to every datagram.
const OUTER: u32 = 28;
/// One-way delay of the test's wire.
const DELAY: Duration = Duration::from_millis(5);

/// Two gateways of one tunnel joined by a wire with a fixed delay and no capacity limit.
struct Pair {
    now: Time,
    client: PlaitGateway,
    server: PlaitGateway,
    /// (arrival, towards the server, datagram)
    wire: Vec<(Time, bool, Packet)>,
    /// Inner packets each gateway delivered: (at the server, at the client).
    up: Vec<Packet>,
    down: Vec<Packet>,
    /// Every datagram: (when, towards the server, path, size on the wire).
    log: Vec<(Time, bool, u8, u32)>,
    /// The wire's datagrams, for looking inside.
    datagrams: Vec<Vec<u8>>,
}

impl Pair {
    fn new(seed: u64) -> Pair {
        let scenario = Scenario::from_toml(TWO_PATHS).expect("the test scenario parses");
        let (server, client, addresses) =
            crate::topology::endpoints(&scenario, &scenario.runs[0], seed);
        let mut server = PlaitGateway::new(server, addresses.clone(), vec![10, 11], OUTER);
        let mut client = PlaitGateway::new(client, addresses, vec![20, 21], OUTER);
        connect(&mut client, &mut server, Time::ZERO);
        Pair {
            now: Time::ZERO,
            client,
            server,
            wire: Vec::new(),
            up: Vec::new(),
            down: Vec::new(),
            log: Vec::new(),
            datagrams: Vec::new(),
        }
    }

    fn wake(&mut self, at_server: bool) {
        let mut out = Outbox::default();
        let g = if at_server {
            &mut self.server
        } else {
            &mut self.client
        };
        g.on_wakeup(self.now, &mut out);
        while let Some((routing, pkt)) = out.pop() {
            match (routing, &pkt.body) {
                (Routing::Start, Body::Plait { path, bytes }) => {
                    self.log.push((self.now, !at_server, path.0, pkt.size));
                    self.datagrams.push(bytes.clone());
                    self.wire.push((self.now + DELAY, !at_server, pkt));
                }
                (Routing::After(_), _) if at_server => self.up.push(pkt),
                (Routing::After(_), _) => self.down.push(pkt),
                (routing, body) => panic!("unexpected gateway output {routing:?} {body:?}"),
            }
        }
    }

    fn run_until(&mut self, until: Time) {
        loop {
            let next = self
                .wire
                .iter()
                .map(|w| w.0)
                .chain(self.client.next_event())
                .chain(self.server.next_event())
                .filter(|t| *t <= until)
                .min();
            let Some(t) = next else { break };
            self.now = self.now.max(t);
            let (arrived, rest): (Vec<_>, Vec<_>) =
                self.wire.drain(..).partition(|w| w.0 <= self.now);
            self.wire = rest;
            for (_, to_server, pkt) in arrived {
                if to_server {
                    self.server.on_receive(self.now, pkt);
                } else {
                    self.client.on_receive(self.now, pkt);
                }
            }
            self.wake(false);
            self.wake(true);
        }
        self.now = until;
    }

    fn inner_from_client(&mut self, pkt: Packet) {
        self.client.on_receive(self.now, pkt);
        self.wake(false);
    }

    fn inner_from_server(&mut self, pkt: Packet) {
        self.server.on_receive(self.now, pkt);
        self.wake(true);
    }
}

fn segment(flow: u32, seq: u64) -> Packet {
    Packet {
        flow,
        size: 1040,
        body: Body::Tcp(TcpSegment {
            seq,
            payload: 1000,
            retransmit: false,
        }),
    }
}

fn ack(flow: u32, next_expected: u64) -> Packet {
    Packet {
        flow,
        size: 40,
        body: Body::TcpAck(TcpAck {
            next_expected,
            echo_seq: next_expected.saturating_sub(1),
        }),
    }
}

#[test]
fn a_simulated_tunnel_is_up_at_time_zero_and_carries_inner_packets_both_ways() {
    let mut p = Pair::new(1);
    assert!(
        p.client.is_established(Time::ZERO),
        "the handshake completed before the run"
    );
    // The server's session starts with the client's first data message, which crosses
    // the wire as in the daemon.
    assert!(!p.server.is_established(Time::ZERO));
    p.run_until(Time::from_millis(100));
    assert!(p.server.is_established(p.now));

    let sent: Vec<Packet> = (0..50).map(|i| segment(7, i)).collect();
    let acks: Vec<Packet> = (0..50).map(|i| ack(8, i + 1)).collect();
    for (s, a) in sent.iter().zip(&acks) {
        p.inner_from_server(s.clone());
        p.inner_from_client(a.clone());
        p.run_until(p.now + Duration::from_millis(2));
    }
    p.run_until(p.now + Duration::from_secs(1));
    assert_eq!(
        p.down, sent,
        "server to client: every packet, in order, intact"
    );
    assert_eq!(
        p.up, acks,
        "client to server: every packet, in order, intact"
    );
    assert_eq!(p.client.inner_refused() + p.server.inner_refused(), 0);
    // Nothing failed to open; the server counts the initiation's copy on the second path
    // as a replay, as the daemon does.
    for d in [p.client.drops(), p.server.drops()] {
        assert_eq!(
            (d.malformed, d.unknown_index, d.auth_failed),
            (0, 0, 0),
            "{d:?}"
        );
        assert!(d.replayed <= 1, "{d:?}");
    }
    // Both paths carried data.
    assert!(p.server.stats().sent_per_path.iter().all(|n| *n > 0));
    assert_eq!(p.client.stats().delivered, 50);
    assert_eq!(p.client.stats().held_us.len(), 50);
}

#[test]
fn datagrams_are_encrypted_and_framed_as_the_daemon_frames_them() {
    let mut p = Pair::new(2);
    p.run_until(Time::from_millis(100));
    let first = p.log.len();
    for i in 0..20 {
        p.inner_from_server(segment(7, i));
    }
    p.run_until(p.now + Duration::from_millis(50));
    // The inner packets' addresses (server side to mobile side) never appear in clear.
    let mut clear = inner::SERVER_SIDE.octets().to_vec();
    clear.extend_from_slice(&inner::MOBILE_SIDE.octets());
    assert!(
        p.datagrams
            .iter()
            .all(|d| !d.windows(clear.len()).any(|w| w == clear.as_slice())),
        "an inner header crossed the wire in clear"
    );
    // Each 1040-byte inner packet costs at least the tunnel's 64 bytes of overhead
    // (docs/protocol.md#overhead): outer headers, the data message and its tag, the
    // engine header and DATA frame.
    let data: Vec<u32> = p.log[first..]
        .iter()
        .filter(|(_, to_server, _, _)| !to_server)
        .map(|(.., size)| *size)
        .filter(|size| *size >= 1040)
        .collect();
    assert_eq!(data.len(), 20, "one datagram per inner packet: {data:?}");
    assert!(data.iter().all(|size| *size >= 1040 + 64), "{data:?}");
    assert_eq!(data.iter().min(), Some(&(1040 + 64)));
}

#[test]
fn a_run_repeats_exactly_with_its_seed() {
    let run = |seed: u64| {
        let mut p = Pair::new(seed);
        for i in 0..200 {
            p.inner_from_server(segment(7, i));
            if i % 2 == 0 {
                p.inner_from_client(ack(8, i));
            }
            p.run_until(p.now + Duration::from_micros(700));
        }
        p.run_until(p.now + Duration::from_secs(3));
        (p.log, p.down.len(), p.up.len())
    };
    let a = run(3);
    assert_eq!(a.1, 200);
    assert_eq!(
        a,
        run(3),
        "same seed, same datagrams at the same times on the same paths"
    );
}
