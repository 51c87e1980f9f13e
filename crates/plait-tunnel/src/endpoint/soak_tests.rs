//! Soak on the virtual clock (issue 16, item 7; docs/tunnel.md#soak): one client and one
//! server endpoint, three paths, 24 simulated hours.
//!
//! The paths are FIFO links with a rate, a one-way delay and a 200 ms drop-tail queue, each
//! way. Faults come from a seeded generator: 2 % random loss and occasional loss bursts;
//! about one path flap every 20 minutes (blackholed for 2 s to 5 min, both ways or one way);
//! one total outage longer than [`REJECT_AFTER_TIME`] (every key expires at both ends); one
//! server restart (a new endpoint with the same keys: every key and session forgotten).
//! Traffic: a small inner packet about every 2 s each way, and a burst of hundreds of
//! full-size packets in one or both directions every 5 to 25 minutes. Time jumps from event
//! to event (wire arrivals, the endpoints' `poll_timeout`, the script), so a day costs
//! seconds of CPU.
//!
//! Checked along the way: no (key, nonce) pair is sealed twice (every outgoing data
//! message's receiver index and counter, per sending keypair); no counter of the engine,
//! the links, the drop counters or the handshake causes ever decreases; inner packets
//! arrive at most once and in order; every bounded structure stays under its bound. At the
//! end: the session is established and carries traffic after the last fault; the counters
//! add up (see [`soak_24_hours_of_rekeys_flaps_loss_and_a_restart`]); the maxima sampled in
//! the second 12 hours are within 1.5 times those of the first 12 (for the reorder buffer:
//! or within its transient peak, below); the rekeys number what
//! 24 h / [`REKEY_AFTER_TIME`] predicts, within 10 %.
//!
//! Why halves and not the first and last hour: a burst that meets a loss on the 300 ms path
//! fills the reorder buffer to about 380 KB for a few hundred milliseconds (the buffer
//! waits for the hole, docs/protocol.md#reorder-buffer). Whether one hour holds such a
//! moment is luck (with the same seed, one run's first hour peaked at 24 KB and its last at
//! 277 KB, while the whole run peaked at 377 KB with nothing growing), so hour-to-hour
//! maxima flake; twelve hours usually hold such a moment each, but not always (one run's
//! first half peaked at 124 KB and its second at 376 KB), so the reorder buffer may always
//! reach [`REORDER_TRANSIENT_BYTES`]; a leak still shows as a second half above both.
//!
//! Inner packets may arrive out of order only when the reorder buffer releases one late
//! (after declaring it lost, docs/protocol.md#reorder-buffer): each such packet must be
//! counted `late` by the call that delivers it. A late packet may still arrive in order,
//! when the packets above its given-up number still wait in the paced burst that follows.

use std::cmp::Ordering;

use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;
use plait_proto::reorder::ReorderStats;
use plait_proto::{EngineSettings, Footprint, Session, SessionStats, Time};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use super::*;
use crate::crypto::keypair::{REJECT_AFTER_TIME, REKEY_AFTER_TIME};
use crate::keys::Key;
use crate::message::{Message, parse};

/// The inner packets the soak sends, bytes.
const INNER_PACKET_LEN: usize = 1200;

/// What the reorder buffer holds at most while one hole on the soak's 300 ms path is
/// awaited (measured peaks 375-383 KB), with room to spare.
const REORDER_TRANSIENT_BYTES: usize = 400_000;

const SEED: u64 = 0x5eed_50a4;
const DAY: Duration = Duration::from_secs(24 * 3600);
const HOUR: Duration = Duration::from_secs(3600);
const SERVER: &str = "192.0.2.1:7744";
/// (name, one-way delay, rate in bytes per second), as in the architecture's picture.
const PATHS: [(&str, u64, f64); 3] = [
    ("fibre", 10, 2.5e6),
    ("lte", 50, 1.25e6),
    ("sat", 300, 0.625e6),
];
const CLIENT_ADDRS: [&str; 3] = [
    "198.51.100.10:40000",
    "203.0.113.20:40001",
    "100.64.0.30:40002",
];
/// Random loss per datagram, each path, each way.
const LOSS: f64 = 0.02;
/// Per datagram, the chance that a loss burst (50 ms to 1 s) starts.
const BURST_LOSS_START: f64 = 0.0005;
/// A link drops what would wait longer than this in its queue.
const QUEUE_LIMIT: Duration = Duration::from_millis(200);
/// The total outage (every path, both ways) and the server restart.
const OUTAGE_AT: Duration = Duration::from_secs(8 * 3600);
const OUTAGE: Duration = Duration::from_secs(240);
const RESTART_AT: Duration = Duration::from_secs(16 * 3600);
/// Between samples of sizes and counters.
const SAMPLE_EVERY: Duration = Duration::from_secs(10);

fn at(d: Duration) -> Time {
    Time::ZERO + d
}

fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * unit(rng)
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Client to server (0) and server to client (1).
const C2S: usize = 0;
const S2C: usize = 1;

/// A datagram on the wire, ordered by arrival (then by send order).
struct Flight {
    at: Time,
    seq: u64,
    dir: usize,
    path: usize,
    bytes: Vec<u8>,
}

impl PartialEq for Flight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Flight {}
impl PartialOrd for Flight {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Flight {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest arrival comes first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// One way of one path.
#[derive(Default)]
struct Lane {
    free_at: Time,
    burst_until: Time,
    /// Blackholed intervals, merged and sorted; `cursor` skips the past ones.
    down: Vec<(Time, Time)>,
    cursor: usize,
}

impl Lane {
    fn is_down(&mut self, now: Time) -> bool {
        while self.down.get(self.cursor).is_some_and(|d| d.1 <= now) {
            self.cursor += 1;
        }
        self.down.get(self.cursor).is_some_and(|d| d.0 <= now)
    }
}

#[derive(Default, Clone, Copy, Debug)]
struct WireCounts {
    datagrams: u64,
    bytes: u64,
    lost_random: u64,
    lost_burst: u64,
    lost_flap: u64,
    lost_queue: u64,
    lost_restart: u64,
    data_messages: u64,
}

#[derive(Default)]
struct Outs {
    udp: Vec<(usize, SocketAddr, Vec<u8>)>,
    tun: Vec<Vec<u8>>,
}

impl Outputs for Outs {
    fn send_udp(&mut self, socket: usize, to: SocketAddr, datagram: &[u8]) {
        self.udp.push((socket, to, datagram.to_vec()));
    }
    fn write_tun(&mut self, packet: &[u8]) {
        self.tun.push(packet.to_vec());
    }
}

/// One engine session's last observed counters and sizes.
#[derive(Clone, Debug)]
struct Gen {
    /// (server restarts so far, link generation).
    id: (u32, u64),
    stats: SessionStats,
    reorder: ReorderStats,
    /// Inner packets in the send queue and in the reorder buffer.
    held: (usize, usize),
    counters: Counters,
}

/// Named counters, in a fixed order.
type Counters = Vec<(String, u64)>;

/// Every `name: number` of a `Debug` rendering, in order: the counters of a stats struct,
/// so a new field is watched without listing it here.
fn numbers(debug: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for part in debug.split([',', '{', '}']) {
        if let Some((name, value)) = part.split_once(':')
            && let Ok(v) = value.trim().parse::<u64>()
        {
            out.push((name.trim().to_string(), v));
        }
    }
    out
}

fn assert_no_decrease(what: &str, before: &[(String, u64)], after: &[(String, u64)]) {
    for ((name, b), (name2, a)) in before.iter().zip(after) {
        assert_eq!(name, name2);
        assert!(a >= b, "{what}: counter {name} decreased from {b} to {a}");
    }
}

/// Sizes of one side's bounded structures, by name.
fn sizes(fp: &Footprint, keys: usize, stream_events: usize) -> Vec<(&'static str, usize)> {
    vec![
        ("send_queue_packets", fp.send_queue_packets),
        ("send_queue_bytes", fp.send_queue_bytes),
        ("reorder_packets", fp.reorder_packets),
        ("reorder_bytes", fp.reorder_bytes),
        ("sent_log", fp.sent_log),
        ("send_history", fp.send_history),
        ("resolved", fp.resolved),
        ("ack_ranges", fp.ack_ranges),
        ("ack_timestamps", fp.ack_timestamps),
        ("repair_store_packets", fp.repair_store.0),
        ("repair_store_bytes", fp.repair_store.1),
        ("repair_queue", fp.repair_store.2),
        ("repair_requests", fp.repair_requests),
        ("probe_acks", fp.probe_acks),
        ("events", fp.events),
        ("express", fp.express.0 + fp.express.1),
        ("streams_open", fp.streams_open as usize),
        (
            "stream_bytes",
            (fp.stream_bytes.0 + fp.stream_bytes.1) as usize,
        ),
        ("keypairs", keys),
        ("stream_events", stream_events),
    ]
}

/// The hard bound each size must stay under (the engine's defaults, the key ring's three
/// slots; nothing for streams in packet mode).
fn bound(name: &str) -> usize {
    match name {
        "send_queue_packets" => 1024,
        "send_queue_bytes" => 2 << 20,
        "reorder_packets" => 8192,
        "reorder_bytes" => 8 << 20,
        "sent_log" => plait_proto::path::SentLog::CAPACITY,
        "send_history" => plait_proto::path::SendHistory::CAPACITY,
        "resolved" => 0,
        "ack_ranges" => plait_proto::session::MAX_RANGES,
        "ack_timestamps" => plait_proto::session::MAX_TIMESTAMPS,
        "repair_store_bytes" => 4 << 20,
        // 4 MiB of packets of at least 20 bytes.
        "repair_store_packets" => (4 << 20) / 20,
        "repair_queue" => 1024,
        "repair_requests" => 1024,
        "probe_acks" => 64,
        // The driver drains the events on every call.
        "events" => 0,
        "express" => 0,
        "streams_open" | "stream_bytes" | "stream_events" => 0,
        "keypairs" => 3,
        "server_key_indices" => 3,
        "wire" => 20_000,
        other => panic!("no bound for {other}"),
    }
}

/// Largest size per name over one window of the run.
type Maxima = BTreeMap<(&'static str, &'static str), usize>;

fn raise(m: &mut Maxima, name: (&'static str, &'static str), v: usize) {
    let e = m.entry(name).or_default();
    *e = (*e).max(v);
}

struct Soak {
    now: Time,
    net_rng: ChaCha8Rng,
    client: ClientEndpoint,
    server: ServerEndpoint,
    keys: (Key, Key),
    restarts: u32,
    wire: BinaryHeap<Flight>,
    flight_seq: u64,
    lanes: [[Lane; 2]; 3],
    /// Loss off (the final drain).
    clean: bool,
    counts: [WireCounts; 2],
    /// Per sending keypair (side, restarts, created, local, remote): the last counter.
    nonces: BTreeMap<(usize, u32, Time, u32, u32, usize), u32>,
    /// Per direction: inner packets offered, delivered, and the last tag delivered.
    offered: [u64; 2],
    delivered: [u64; 2],
    last_tag: [Option<u64>; 2],
    /// Per direction, per tag: delivered yet.
    seen: [Vec<bool>; 2],
    /// Per direction: packets delivered after a later one (released late).
    out_of_order: [u64; 2],
    /// Per direction: `out_of_order` and the receiving side's `late` count when last
    /// compared.
    out_of_order_checked: [u64; 2],
    late_checked: [u64; 2],
    next_tag: [u64; 2],
    /// Per side (client 0, server 1): the current engine session's record, and the ended ones.
    gens: [Option<Gen>; 2],
    ended: [Vec<Gen>; 2],
    /// Link, drop and handshake counters per side, with the restarts they belong to.
    side_counters: [Option<(u32, Counters)>; 2],
    /// Inner packets the server's link refused before it restarted.
    server_refused_before_restart: u64,
    samples: u64,
    /// Samples during the total outage that found the client without usable keys.
    unestablished_in_outage: u64,
    /// Maxima of the first and of the second 12 hours.
    first_half: Maxima,
    second_half: Maxima,
    whole_run: Maxima,
}

/// The default engine but for unordered delivery, which is off: the order check above is
/// the reorder buffer's, and a sparse flow let out of the global order is delivered as it
/// arrives, a repaired loss after later packets (docs/protocol.md#unordered; tested in
/// plait-proto's tests/unordered.rs).
fn engine(seed: u64) -> EngineParams {
    EngineParams {
        settings: EngineSettings {
            unordered_below_bps: 0,
            ..EngineSettings::default()
        },
        max_datagram_size: 1400,
        outer_header_len: 28,
        seed: Some(seed),
        streams: EngineParams::tunnel_stream_limits(),
        tuning: Default::default(),
    }
}

fn server(k: &(Key, Key), seed: u64) -> ServerEndpoint {
    ServerEndpoint::new(ServerParams {
        private_key: k.1.clone(),
        peers: vec![ServerPeer {
            name: "router".into(),
            public_key: k.0.public(),
            preshared_key: None,
            allowed_ips: vec!["10.77.0.2/32".parse::<IpNet>().unwrap()],
        }],
        engine: engine(seed),
    })
}

/// Where a packet carries its tag: after its IPv4 and UDP headers.
const TAG_AT: usize = 28;

/// A UDP-in-IPv4 packet of `len` bytes carrying `tag`. One flow per direction (fixed
/// addresses and ports): the send queue keeps each flow's order, not the order across flows.
fn packet(dir: usize, tag: u64, len: usize) -> Vec<u8> {
    use super::inner::{IPV4_DST, IPV4_HEADER_LEN, IPV4_SRC};
    let (src, dst) = if dir == C2S {
        ([10, 77, 0, 2], [10, 0, 0, 1])
    } else {
        ([10, 0, 0, 1], [10, 77, 0, 2])
    };
    let mut p = vec![0u8; len.max(TAG_AT + 8)];
    p[0] = 0x45;
    p[9] = 17;
    p[IPV4_SRC].copy_from_slice(&src);
    p[IPV4_DST].copy_from_slice(&dst);
    p[IPV4_HEADER_LEN..IPV4_HEADER_LEN + 4].copy_from_slice(&[0x13, 0x88, 0x17, 0x70]);
    p[TAG_AT..TAG_AT + 8].copy_from_slice(&tag.to_le_bytes());
    p
}

fn tag_of(p: &[u8]) -> u64 {
    u64::from_le_bytes(p[TAG_AT..TAG_AT + 8].try_into().unwrap())
}

impl Soak {
    fn new() -> Soak {
        let keys = (Key::generate().unwrap(), Key::generate().unwrap());
        let client = ClientEndpoint::new(ClientParams {
            private_key: keys.0.clone(),
            server_public_key: keys.1.public(),
            preshared_key: None,
            paths: PATHS
                .iter()
                .map(|(name, _, rate)| ClientPath {
                    name: (*name).into(),
                    server: SERVER.parse().unwrap(),
                    rate_hint: Some(*rate),
                    backup: false,
                    attributes: Default::default(),
                })
                .collect(),
            engine: engine(SEED),
        });
        Soak {
            now: Time::from_millis(1),
            net_rng: ChaCha8Rng::seed_from_u64(SEED ^ 0x6e65_7477),
            client,
            server: server(&keys, SEED + 1),
            keys,
            restarts: 0,
            wire: BinaryHeap::new(),
            flight_seq: 0,
            lanes: Default::default(),
            clean: false,
            counts: Default::default(),
            nonces: BTreeMap::new(),
            offered: [0; 2],
            delivered: [0; 2],
            last_tag: [None; 2],
            seen: [Vec::new(), Vec::new()],
            out_of_order: [0; 2],
            out_of_order_checked: [0; 2],
            late_checked: [0; 2],
            next_tag: [0; 2],
            gens: [None, None],
            ended: [Vec::new(), Vec::new()],
            side_counters: [None, None],
            server_refused_before_restart: 0,
            samples: 0,
            unestablished_in_outage: 0,
            first_half: Maxima::new(),
            second_half: Maxima::new(),
            whole_run: Maxima::new(),
        }
    }

    fn stamp(&self) -> Now {
        Now {
            mono: self.now,
            wall_ns: 1_700_000_000_000_000_000 + self.now.as_nanos(),
        }
    }

    /// Blackholes `path` in the directions `dirs` over `[from, to)`.
    fn flap(&mut self, path: usize, dirs: &[usize], from: Time, to: Time) {
        for &d in dirs {
            self.lanes[path][d].down.push((from, to));
        }
    }

    /// Sorts and merges every lane's blackholed intervals.
    fn settle_flaps(&mut self) {
        for lane in self.lanes.iter_mut().flatten() {
            lane.down.sort();
            let mut merged: Vec<(Time, Time)> = Vec::new();
            for (a, b) in lane.down.drain(..) {
                match merged.last_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            lane.down = merged;
        }
    }

    /// The sending side's current keys seal every data message of the call that just ran
    /// (keys change before anything is sealed: a response or a confirming message installs
    /// them, then the engine is driven). Checks each message's nonce, its path and path
    /// sequence number, against the last one that keypair sealed on that path: strictly
    /// ahead, so never repeated (docs/protocol.md#data-messages).
    fn check_nonce(&mut self, side: usize, bytes: &[u8]) {
        let Ok(Message::Data { receiver, id: data }) = parse(bytes) else {
            return;
        };
        let (path, seq) = (data.path(), data.seq());
        self.counts[side].data_messages += 1;
        let keys = if side == C2S {
            self.client.link_mut().current_keys()
        } else {
            self.server
                .links_mut()
                .next()
                .and_then(|l| l.current_keys())
        };
        let k = keys.unwrap_or_else(|| panic!("side {side} sealed a data message without keys"));
        assert_eq!(
            k.remote_index, receiver,
            "side {side}: a data message names receiver {receiver:08x}, not the current keys'"
        );
        let restarts = if side == S2C { self.restarts } else { 0 };
        let id = (
            side,
            restarts,
            k.created,
            k.local_index,
            k.remote_index,
            path,
        );
        if let Some(last) = self.nonces.insert(id, seq) {
            let step = seq.wrapping_sub(last);
            assert!(
                step > 0 && step < 1 << 31,
                "nonce reuse or regression: side {side}, keys and path {id:?}, path sequence number {seq} after {last}"
            );
        }
    }

    /// Takes an endpoint's outputs: datagrams onto the wire (after the nonce check), inner
    /// packets checked for order and duplicates.
    fn absorb(&mut self, side: usize, outs: Outs) {
        for (socket, to, bytes) in outs.udp {
            self.check_nonce(side, &bytes);
            let path = if side == C2S {
                assert_eq!(to, SERVER.parse().unwrap());
                socket
            } else {
                match CLIENT_ADDRS
                    .iter()
                    .position(|a| a.parse::<SocketAddr>() == Ok(to))
                {
                    Some(p) => p,
                    None => continue,
                }
            };
            self.transmit(side, path, bytes);
        }
        // Inner packets come out at the other end of the direction `side` receives. In
        // order, except a packet that arrives after its number was declared lost: it is
        // delivered at once, counted `late` (docs/protocol.md#reorder-buffer).
        let dir = 1 - side;
        for p in outs.tun {
            let tag = tag_of(&p);
            let seen = self
                .seen
                .get_mut(dir)
                .and_then(|v| v.get_mut(tag as usize))
                .expect("delivered a packet never sent");
            assert!(!*seen, "direction {dir}: tag {tag} delivered twice");
            *seen = true;
            if let Some(last) = self.last_tag[dir]
                && tag < last
            {
                self.out_of_order[dir] += 1;
            } else {
                self.last_tag[dir] = Some(tag);
            }
            self.delivered[dir] += 1;
        }
        self.observe(side);
        let late: u64 = self.ended[side]
            .iter()
            .chain(&self.gens[side])
            .map(|g| g.reorder.late)
            .sum();
        // Every packet out of order was released late in this same call. Not the converse:
        // a late packet whose successors still wait in the paced burst that follows given-up
        // holes (docs/protocol.md#reorder-buffer) goes first, so it arrives in order.
        let out_of_order = self.out_of_order[dir] - self.out_of_order_checked[dir];
        let released_late = late.saturating_sub(self.late_checked[dir]);
        assert!(
            out_of_order <= released_late,
            "direction {dir}: {out_of_order} packets out of order, {released_late} released late, at {:?}",
            self.now
        );
        self.out_of_order_checked[dir] = self.out_of_order[dir];
        self.late_checked[dir] = late;
    }

    fn transmit(&mut self, dir: usize, path: usize, bytes: Vec<u8>) {
        let now = self.now;
        let c = &mut self.counts[dir];
        c.datagrams += 1;
        c.bytes += bytes.len() as u64;
        let lane = &mut self.lanes[path][dir];
        if lane.is_down(now) {
            c.lost_flap += 1;
            return;
        }
        if !self.clean {
            if now < lane.burst_until {
                c.lost_burst += 1;
                return;
            }
            let r = unit(&mut self.net_rng);
            if r < BURST_LOSS_START {
                lane.burst_until = now + secs(uniform(&mut self.net_rng, 0.05, 1.0));
                c.lost_burst += 1;
                return;
            }
            if r < BURST_LOSS_START + LOSS {
                c.lost_random += 1;
                return;
            }
        }
        let (_, delay_ms, rate) = PATHS[path];
        let start = lane.free_at.max(now);
        if start.saturating_since(now) > QUEUE_LIMIT {
            c.lost_queue += 1;
            return;
        }
        lane.free_at = start + secs(bytes.len() as f64 / rate);
        let arrival = lane.free_at + Duration::from_millis(delay_ms);
        self.flight_seq += 1;
        self.wire.push(Flight {
            at: arrival,
            seq: self.flight_seq,
            dir,
            path,
            bytes,
        });
    }

    /// Records the engine session's counters and sizes of `side` after a call: a new
    /// session generation ends the record of the old one, whose last observation is its
    /// final state (a replacement happens before the new session is driven).
    fn observe(&mut self, side: usize) {
        let restarts = if side == S2C { self.restarts } else { 0 };
        let link = if side == C2S {
            self.client.link_mut()
        } else {
            self.server.links_mut().next().unwrap()
        };
        let generation = link.generation();
        let Some(session) = link.session_mut() else {
            return;
        };
        let (stats, reorder) = (session.stats(), session.reorder_stats());
        let held = (session.send_queue_len(), session.reorder_depth());
        let id = (restarts, generation);
        let counters = match self.gens[side].take() {
            Some(g) if g.id == id => g.counters,
            Some(g) => {
                self.ended[side].push(g);
                Vec::new()
            }
            None => Vec::new(),
        };
        self.gens[side] = Some(Gen {
            id,
            stats,
            reorder,
            held,
            counters,
        });
    }

    /// Checks that no counter of `side` decreased since the last check: its engine
    /// session's (session, reorder and path counters), its link's, its drop counters and
    /// (client) its handshake causes. A new session or a restarted server starts afresh.
    fn check_counters(&mut self, side: usize) {
        let restarts = if side == S2C { self.restarts } else { 0 };
        let (link_counters, drops, causes) = if side == C2S {
            (
                self.client.link_counters(),
                self.client.drops(),
                Some(self.client.status(self.now).handshake_causes),
            )
        } else {
            (
                self.server.peer_counters(0).unwrap(),
                self.server.drops(),
                None,
            )
        };
        let mut side_counters = numbers(&format!("{link_counters:?}"));
        side_counters.extend(numbers(&format!("{drops:?}")));
        side_counters.extend(numbers(&format!("{causes:?}")));
        if let Some((r, before)) = &self.side_counters[side]
            && *r == restarts
        {
            assert_no_decrease(
                &format!("side {side} link/drops/causes"),
                before,
                &side_counters,
            );
        }
        self.side_counters[side] = Some((restarts, side_counters));
        let link = if side == C2S {
            self.client.link_mut()
        } else {
            self.server.links_mut().next().unwrap()
        };
        let Some(session) = link.session_mut() else {
            return;
        };
        let counters = engine_counters(session);
        if let Some(g) = self.gens[side].as_mut() {
            assert_no_decrease(
                &format!("side {side} engine {:?}", g.id),
                &g.counters,
                &counters,
            );
            g.counters = counters;
        }
    }

    /// Samples every bounded size of both sides and of the wire.
    fn sample(&mut self) {
        self.samples += 1;
        let mut all: Vec<((&'static str, &'static str), usize)> = Vec::new();
        for side in [C2S, S2C] {
            let (held, fp) = if side == C2S {
                let link = self.client.link_mut();
                (link.held(), link.session_mut().map(|s| s.footprint()))
            } else {
                let link = self.server.links_mut().next().unwrap();
                (link.held(), link.session_mut().map(|s| s.footprint()))
            };
            let fp = fp.unwrap_or_default();
            for (name, v) in sizes(&fp, held.0, held.1) {
                all.push(((["client", "server"][side], name), v));
            }
        }
        all.push((("server", "server_key_indices"), self.server.key_indices()));
        all.push((("net", "wire"), self.wire.len()));
        let t = self.now.saturating_since(Time::ZERO);
        if t >= OUTAGE_AT && t < OUTAGE_AT + OUTAGE && !self.client.is_established(self.now) {
            self.unestablished_in_outage += 1;
        }
        for (name, v) in all {
            assert!(
                v <= bound(name.1),
                "{name:?} = {v} over its bound {} at {t:?}",
                bound(name.1)
            );
            raise(&mut self.whole_run, name, v);
            if t < DAY / 2 {
                raise(&mut self.first_half, name, v);
            } else if t <= DAY {
                raise(&mut self.second_half, name, v);
            }
        }
    }

    fn send_inner(&mut self, dir: usize, len: usize) {
        let tag = self.next_tag[dir];
        self.next_tag[dir] += 1;
        self.offered[dir] += 1;
        self.seen[dir].push(false);
        let p = packet(dir, tag, len);
        let stamp = self.stamp();
        let mut outs = Outs::default();
        if dir == C2S {
            self.client.handle_tun(stamp, &p, &mut outs);
        } else {
            self.server.handle_tun(stamp, &p, &mut outs);
        }
        self.absorb(dir, outs);
    }

    /// Delivers what arrived by `self.now` and runs the endpoints' timers that were due
    /// (`timers`: their `poll_timeout`s before the deliveries; a deadline the deliveries
    /// brought forward to now is met on the next round, at the same time).
    fn step(&mut self, timers: [Option<Time>; 2]) {
        let stamp = self.stamp();
        while self.wire.peek().is_some_and(|f| f.at <= self.now) {
            let mut f = self.wire.pop().unwrap();
            let mut outs = Outs::default();
            if f.dir == C2S {
                let from: SocketAddr = CLIENT_ADDRS[f.path].parse().unwrap();
                self.server
                    .handle_udp(stamp, 0, from, &mut f.bytes, &mut outs);
                self.absorb(S2C, outs);
            } else {
                let from: SocketAddr = SERVER.parse().unwrap();
                self.client
                    .handle_udp(stamp, f.path, from, &mut f.bytes, &mut outs);
                self.absorb(C2S, outs);
            }
        }
        if timers[C2S].is_some_and(|t| t <= self.now) {
            let mut outs = Outs::default();
            self.client.handle_timeout(stamp, &mut outs);
            self.absorb(C2S, outs);
        }
        if timers[S2C].is_some_and(|t| t <= self.now) {
            let mut outs = Outs::default();
            self.server.handle_timeout(stamp, &mut outs);
            self.absorb(S2C, outs);
        }
    }

    /// Kill -9 and restart of the server: a new endpoint with the same keys; what was on
    /// its way to it is lost. Its engine session's last record ends here.
    fn restart_server(&mut self) {
        self.check_counters(S2C);
        self.server_refused_before_restart += self.server.peer_counters(0).unwrap().refused;
        if let Some(g) = self.gens[S2C].take() {
            self.ended[S2C].push(g);
        }
        self.restarts += 1;
        self.server = server(&self.keys, SEED + 1 + u64::from(self.restarts));
        let before = self.wire.len();
        self.wire.retain(|f| f.dir != C2S);
        self.counts[C2S].lost_restart += (before - self.wire.len()) as u64;
    }
}

/// Every counter of an engine session: session, reorder buffer, each path.
fn engine_counters(s: &Session) -> Vec<(String, u64)> {
    let mut counters = numbers(&format!("{:?}", s.stats()));
    counters.extend(numbers(&format!("{:?}", s.reorder_stats())));
    for id in s.path_ids() {
        counters.extend(numbers(&format!("{:?}", s.path_stats(id))));
    }
    counters
}

/// What a burst sends: directions, packets left, next send.
struct Burst {
    dirs: Vec<usize>,
    left: u32,
    next: Time,
}

#[test]
fn soak_24_hours_of_rekeys_flaps_loss_and_a_restart() {
    let wall = std::time::Instant::now();
    assert!(
        OUTAGE > REJECT_AFTER_TIME,
        "the outage must expire every key"
    );
    let mut s = Soak::new();
    let mut script = ChaCha8Rng::seed_from_u64(SEED ^ 0x7363_7269);

    // Faults. The same burst and flap at 0:30/0:40 and 23:30/23:40, so both halves of the
    // day hold them; random flaps between.
    let mut flaps = 0;
    for base in [Duration::ZERO, DAY - HOUR] {
        let from = at(base + Duration::from_secs(40 * 60));
        s.flap(0, &[C2S, S2C], from, from + Duration::from_secs(60));
    }
    let mut t = 5.0 * 60.0;
    loop {
        t += uniform(&mut script, 4.0, 40.0) * 60.0;
        if t > (DAY - Duration::from_secs(20 * 60)).as_secs_f64() {
            break;
        }
        let path = (script.next_u64() % 3) as usize;
        let dirs: &[usize] = match script.next_u64() % 4 {
            0 | 1 => &[C2S, S2C],
            2 => &[C2S],
            _ => &[S2C],
        };
        // Log-uniform between 2 s and 5 min.
        let len = (uniform(&mut script, 2f64.ln(), 300f64.ln())).exp();
        s.flap(path, dirs, at(secs(t)), at(secs(t + len)));
        flaps += 1;
    }
    for path in 0..3 {
        s.flap(path, &[C2S, S2C], at(OUTAGE_AT), at(OUTAGE_AT + OUTAGE));
    }
    s.settle_flaps();
    let last_fault_end = s
        .lanes
        .iter()
        .flatten()
        .filter_map(|l| l.down.last().map(|d| d.1))
        .max()
        .unwrap();

    // Traffic.
    let mut next_steady = [at(secs(2.0)), at(secs(2.5))];
    let mut bursts: Vec<(Time, Vec<usize>, u32)> = Vec::new();
    for base in [Duration::ZERO, DAY - HOUR] {
        bursts.push((at(base + Duration::from_secs(30 * 60)), vec![C2S, S2C], 400));
    }
    let mut t = 10.0 * 60.0;
    loop {
        t += uniform(&mut script, 5.0, 25.0) * 60.0;
        if t > (DAY - HOUR).as_secs_f64() {
            break;
        }
        let dirs = match script.next_u64() % 3 {
            0 => vec![C2S],
            1 => vec![S2C],
            _ => vec![C2S, S2C],
        };
        let n = 100 + (script.next_u64() % 500) as u32;
        bursts.push((at(secs(t)), dirs, n));
    }
    bursts.sort_by_key(|b| b.0);
    let burst_count = bursts.len();
    let mut bursts = bursts.into_iter().peekable();
    let mut burst: Option<Burst> = None;
    let mut next_sample = at(SAMPLE_EVERY);
    let mut restarted = false;
    let end = at(DAY);
    let drain_end = end + Duration::from_secs(60);
    const DRAIN_QUIET: Duration = Duration::from_secs(5);
    let mut tags_at_end = [0u64; 2];
    let mut clean_from_end = false;

    loop {
        let timers = [s.client.poll_timeout(), s.server.poll_timeout()];
        let mut next = [
            s.wire.peek().map(|f| f.at),
            timers[C2S],
            timers[S2C],
            Some(next_steady[0]),
            Some(next_steady[1]),
            Some(next_sample),
            burst.as_ref().map(|b| b.next),
            bursts.peek().filter(|_| burst.is_none()).map(|b| b.0),
            (!restarted).then(|| at(RESTART_AT)),
            (!clean_from_end).then_some(end),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        if next > drain_end {
            next = drain_end;
        }
        s.now = s.now.max(next);
        if s.now >= drain_end {
            break;
        }
        if !clean_from_end && s.now >= end {
            // The day is over: no more loss; a minute of steady traffic drains the rest.
            clean_from_end = true;
            s.clean = true;
            tags_at_end = s.next_tag;
        }
        let restarted_now = !restarted && s.now >= at(RESTART_AT);
        if restarted_now {
            restarted = true;
            s.restart_server();
        }
        s.step(if restarted_now {
            [timers[C2S], None]
        } else {
            timers
        });
        for dir in [C2S, S2C] {
            // The last seconds send nothing, so every packet of the final sessions has
            // arrived (or been declared lost) when the books are checked.
            if s.now >= next_steady[dir] && s.now + DRAIN_QUIET >= drain_end {
                next_steady[dir] = drain_end;
            }
            if s.now >= next_steady[dir] {
                s.send_inner(dir, 100);
                // The drain sends faster, so what it checks is not a handful of packets.
                let gap = if s.clean {
                    0.1
                } else {
                    uniform(&mut s.net_rng, 0.5, 3.5)
                };
                next_steady[dir] = s.now + secs(gap);
            }
        }
        if bursts.peek().is_some_and(|b| b.0 <= s.now) && burst.is_none() {
            let (_, dirs, left) = bursts.next().unwrap();
            burst = Some(Burst {
                dirs,
                left,
                next: s.now,
            });
        }
        if let Some(b) = burst.as_mut()
            && s.now >= b.next
        {
            b.left -= 1;
            let left = b.left;
            b.next = s.now + Duration::from_millis(1);
            let dirs = b.dirs.clone();
            if b.left == 0 {
                burst = None;
            }
            for dir in dirs {
                s.send_inner(dir, INNER_PACKET_LEN);
            }
            // Bursts are when buffers fill: sample them closely.
            if left.is_multiple_of(20) {
                s.sample();
            }
        }
        if s.now >= next_sample {
            s.sample();
            if s.samples.is_multiple_of(6) {
                s.check_counters(C2S);
                s.check_counters(S2C);
            }
            next_sample = s.now + SAMPLE_EVERY;
        }
    }
    let elapsed = wall.elapsed();

    // The end: established both ways, and the drain's traffic all arrived in order.
    let now = s.now;
    assert!(
        s.client.is_established(now),
        "client not established at the end"
    );
    let server_status = s.server.status(now);
    assert!(server_status.first().is_some_and(|st| st.established));
    for dir in [C2S, S2C] {
        let sent_in_drain = s.next_tag[dir] - tags_at_end[dir];
        assert!(sent_in_drain >= 500, "{sent_in_drain}");
        // Nothing is sent in the drain's last seconds: everything arrived.
        let last = s.last_tag[dir].expect("something delivered");
        assert!(
            last + 1 == s.next_tag[dir],
            "direction {dir}: last delivered {last}, sent {}",
            s.next_tag[dir]
        );
    }

    // Counters add up.
    let mut gens: [Vec<Gen>; 2] = [s.ended[0].clone(), s.ended[1].clone()];
    for side in [C2S, S2C] {
        gens[side].extend(s.gens[side].clone());
    }
    let links = [
        s.client.link_mut().counters(),
        s.server.links_mut().next().unwrap().counters(),
    ];
    for dir in [C2S, S2C] {
        let (sender, receiver) = (&gens[dir], &gens[1 - dir]);
        let accepted: u64 = sender.iter().map(|g| g.stats.inner_accepted).sum();
        let sent: u64 = sender.iter().map(|g| g.stats.inner_sent).sum();
        let delivered: u64 = receiver.iter().map(|g| g.stats.delivered).sum();
        // Inner packets the harness offered: accepted by an engine session, or refused
        // by the link (no session, queue full).
        let refused = links[dir].refused
            + if dir == S2C {
                s.server_refused_before_restart
            } else {
                0
            };
        assert_eq!(s.offered[dir], accepted + refused, "direction {dir}");
        // Each accepted packet is sent, dropped (stale, CoDel, overflow) or still queued.
        for g in sender {
            let st = &g.stats;
            assert_eq!(
                st.inner_accepted,
                st.inner_sent
                    + st.inner_stale
                    + st.inner_codel_dropped
                    + st.inner_overflow_dropped
                    + g.held.0 as u64,
                "direction {dir}, session {:?}: {st:?}",
                g.id
            );
        }
        assert_eq!(s.delivered[dir], delivered, "direction {dir}: TUN writes");
        assert!(delivered <= sent, "direction {dir}: {delivered} > {sent}");
        // Per session pair: what the receiver did not deliver it declared lost (less those
        // released late), or still holds; the old pair also lost what was in flight when
        // the server restarted, hence at most.
        let (last_s, last_r) = (sender.last().unwrap(), receiver.last().unwrap());
        let r = &last_r.reorder;
        let accounted = last_r.stats.delivered + r.lost_total() - r.late + last_r.held.1 as u64;
        eprintln!(
            "direction {dir}: final sessions sent {} delivered {} lost {} late {} held {}",
            last_s.stats.inner_sent,
            last_r.stats.delivered,
            r.lost_total(),
            r.late,
            last_r.held.1
        );
        assert_eq!(
            last_s.stats.inner_sent, accounted,
            "direction {dir}: final session pair"
        );
        for (gs, gr) in sender.iter().zip(receiver.iter()) {
            let r = &gr.reorder;
            assert!(
                gr.stats.delivered + r.lost_total() - r.late <= gs.stats.inner_sent,
                "direction {dir}: sessions {:?}/{:?}",
                gs.id,
                gr.id
            );
        }
        eprintln!(
            "direction {dir}: offered {} accepted {accepted} sent {sent} delivered {delivered} refused {refused}; wire {:?}",
            s.offered[dir], s.counts[dir]
        );
    }
    assert_eq!(
        gens[C2S].len(),
        2,
        "one engine session before the restart, one after"
    );
    assert_eq!(gens[S2C].len(), 2);

    // Rekeys: one per REKEY_AFTER_TIME, less what the other causes and outages took.
    // Path validation (docs/protocol.md#path-validation): the restarted server learned
    // every path's address anew and validated it.
    let server = s.server.links_mut().next().unwrap();
    let v = server.counters();
    eprintln!(
        "path validation at the server: validated {}, challenges {}, abandoned {}, amplification-limited {}, ignored {}",
        v.paths_validated,
        v.path_frames_sent,
        v.validations_abandoned,
        v.amplification_limited,
        v.path_frames_ignored
    );
    let validated = server.validated_addresses();
    for (path, addr) in CLIENT_ADDRS.iter().enumerate() {
        let want: SocketAddr = addr.parse().unwrap();
        assert_eq!(
            validated[path].map(|e| e.remote),
            Some(want),
            "path {path} validated at the client's address"
        );
    }
    // Ignored frames are possible here: the answer to a retried challenge arriving after
    // the first answer validated the address.
    assert!(v.paths_validated >= 3, "{}", v.paths_validated);

    let causes = s.client.status(now).handshake_causes;
    let completed = s.client.link_mut().handshakes();
    let ideal = DAY.as_secs() / REKEY_AFTER_TIME.as_secs();
    eprintln!(
        "handshakes: completed {completed}, causes {causes:?}, ideal rekeys {ideal}; keypairs × paths {}",
        s.nonces.len()
    );
    assert!(causes.rekey <= ideal, "{causes:?}");
    assert!(causes.rekey >= ideal * 9 / 10, "{causes:?}");
    assert!(
        s.unestablished_in_outage > 0,
        "the outage expired the client's keys"
    );
    assert!(
        causes.hint + causes.unanswered + causes.silence >= 1,
        "the restart made a re-handshake: {causes:?}"
    );
    assert!(
        completed >= ideal * 9 / 10 && completed <= ideal + 60,
        "{completed}"
    );

    // Memory flat: the second half's maxima within the first half's, with room for the
    // randomness in between (see the module docs for why halves).
    for (name, first) in &s.first_half {
        let second = s.second_half.get(name).copied().unwrap_or(0);
        let whole = s.whole_run[name];
        eprintln!("{name:?}: first 12 h {first}, second 12 h {second}, whole run {whole}");
        // The reorder buffer's peak is a moment, not a level: a burst that meets a loss on
        // the 300 ms path holds about 380 KB while it waits for the hole (module docs).
        // Whether a half holds such a moment depends on the run's randomness (one run's
        // first half peaked at 124 KB, its second at 376 KB), so that peak is the least
        // either half may reach; a leak still shows, growing past it over 24 h.
        let transient = match name.1 {
            "reorder_bytes" => REORDER_TRANSIENT_BYTES,
            "reorder_packets" => REORDER_TRANSIENT_BYTES / INNER_PACKET_LEN,
            _ => 0,
        };
        assert!(
            second <= (first + first / 2 + 16).max(transient),
            "{name:?} grew: first 12 h {first}, second 12 h {second}"
        );
    }
    eprintln!(
        "soak: {flaps} random flaps (last fault ends {last_fault_end:?}), {burst_count} bursts; wall {elapsed:?}"
    );
}
