//! A plait tunnel endpoint as a simulated node: the tunnel's own sans-IO
//! `ClientEndpoint` (at the mobile host) or `ServerEndpoint` (at the proxy), handshake,
//! keys, encryption, path validation and all, so what the simulator measures is what the
//! daemon runs (the same code with a virtual clock instead of sockets and a TUN device).
//!
//! Inner packets from the LAN side go to the endpoint as IP packets ([`crate::inner`]);
//! the endpoint's datagrams leave on the path they name, as packets of that path's flow,
//! each [`PlaitGateway::new`]'s `outer_header` bytes (IP and UDP) longer on the wire;
//! datagrams from the paths go back into it, and the inner packets it delivers continue
//! along their flow's route from this node. The endpoint drives its engine after every
//! input, as in the daemon (docs/protocol.md#drive).
//!
//! A simulated tunnel is up before the traffic it carries, as on the test bed (where the
//! daemons start first): [`connect`] completes the handshake at time zero without
//! crossing the simulated links; everything else crosses them, the client's first data
//! message that confirms the handshake and starts the server's session included, and the
//! server's validation of each path's address. Until the server's session runs and every
//! path is validated (at most [`SETUP_HOLD_MAX`]), inner packets wait in the gateway, at
//! most [`SETUP_HOLD_PACKETS`] of them: the daemon would refuse them, and a simulated TCP
//! flow starting at time zero would then begin with a retransmission timeout the test
//! bed never shows. They cost the flow the set-up time instead (about one round trip).
//!
//! In mode `plait-stream` the gateway also runs a [`StreamApp`]: the split connection of
//! seed ETOM §IV-B, where the end hosts' TCP ends at the gateways and the bytes cross the
//! paths in an engine stream the client opens, as the tunnel's stream mode does.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use plait_proto::{PathId, Session, StreamEvent, StreamId, Time};
use plait_tunnel::control::DropCounters;
use plait_tunnel::endpoint::{
    ClientEndpoint, LinkStreamEvent, Now, Outputs, ServerEndpoint, StreamHost, StreamPeer,
};
use plait_tunnel::message::{TYPE_COOKIE_REPLY, TYPE_INITIATION, TYPE_RESPONSE};

use super::Outbox;
use crate::inner;
use crate::packet::{Body, FlowId, Packet};

/// What a gateway counted.
#[derive(Debug, Default, Clone)]
pub struct GatewayStats {
    /// Inner packets accepted from the LAN side.
    pub inner_in: u64,
    /// Inner packets delivered.
    pub delivered: u64,
    /// Datagrams sent per path.
    pub sent_per_path: Vec<u64>,
    /// Datagrams for an address no path has (the server's answer to a stale address).
    pub stray: u64,
    /// Reorder-buffer holding time of each delivered packet, microseconds.
    pub held_us: Vec<u32>,
}

/// Bytes a source keeps written ahead in the session's stream buffers: more than any
/// simulated path set's bandwidth-delay product, so the source never limits the transfer.
const SOURCE_AHEAD: u64 = 8 << 20;

/// Longest inner packets wait in a gateway for its tunnel to come up.
pub const SETUP_HOLD_MAX: Duration = Duration::from_secs(1);
/// Most inner packets a gateway holds while its tunnel comes up; beyond, the oldest go.
pub const SETUP_HOLD_PACKETS: usize = 1024;

/// The wall clock the endpoints see (handshake timestamps): a fixed epoch plus virtual
/// time, so runs repeat exactly.
const WALL_EPOCH_NS: u64 = 1_700_000_000_000_000_000;

fn stamp(now: Time) -> Now {
    Now {
        mono: now,
        wall_ns: WALL_EPOCH_NS + now.as_nanos(),
    }
}

/// Where the simulated tunnel's datagrams go: the server's address, and the client's
/// address on each path (index: path id) as the server sees it.
#[derive(Clone, Debug)]
pub struct TunnelAddresses {
    /// The server's listening address.
    pub server: SocketAddr,
    /// The client's address per path.
    pub client: Vec<SocketAddr>,
}

/// The tunnel endpoint a gateway runs.
#[derive(Debug)]
pub enum Endpoint {
    /// The mobile host's side (it starts the session).
    Client(Box<ClientEndpoint>),
    /// The proxy's side, serving one client.
    Server(Box<ServerEndpoint>),
}

/// An application on a gateway using streams (mode `plait-stream`).
#[derive(Debug)]
pub enum StreamApp {
    /// At the proxy: writes into the stream the mobile host opens and keeps it full, an
    /// FTP transfer that never ends, whose TCP leg to the server the split connection has
    /// already terminated.
    Source {
        /// The stream, once the peer opened it.
        stream: Option<(StreamPeer, StreamId)>,
    },
    /// At the mobile host: opens one stream at `start` and reads it, counting the bytes
    /// per time bin: the mobile host's application.
    Sink {
        /// When the transfer starts.
        start: Time,
        /// The stream, once opened.
        stream: Option<(StreamPeer, StreamId)>,
        /// Bytes read in order.
        bytes: u64,
        /// Bytes read per bin.
        bins: Vec<u64>,
        /// Bin width.
        bin: Duration,
    },
}

/// A plait tunnel endpoint node (see the module docs).
#[derive(Debug)]
pub struct PlaitGateway {
    endpoint: Endpoint,
    addresses: TunnelAddresses,
    /// Flow id of the datagrams this gateway sends on each path (index: path id).
    path_flows: Vec<FlowId>,
    inbox: VecDeque<Packet>,
    /// Datagrams [`connect`] left to send when the run starts: (path, bytes).
    pending: Vec<(usize, Vec<u8>)>,
    /// Inner packets waiting for the tunnel to come up (see the module docs).
    held: VecDeque<Packet>,
    /// The tunnel was up once: nothing is held any more.
    up: bool,
    scratch: Vec<u8>,
    stats: GatewayStats,
    outer_header: u32,
    app: Option<StreamApp>,
}

impl PlaitGateway {
    /// A gateway around `endpoint`, sending path `i`'s datagrams as flow `path_flows[i]`,
    /// each `outer_header` bytes longer on the wire than the tunnel's datagram.
    pub fn new(
        endpoint: Endpoint,
        addresses: TunnelAddresses,
        path_flows: Vec<FlowId>,
        outer_header: u32,
    ) -> PlaitGateway {
        PlaitGateway {
            endpoint,
            addresses,
            stats: GatewayStats {
                sent_per_path: vec![0; path_flows.len()],
                ..GatewayStats::default()
            },
            path_flows,
            inbox: VecDeque::new(),
            pending: Vec::new(),
            held: VecDeque::new(),
            up: false,
            scratch: Vec::new(),
            outer_header,
            app: None,
        }
    }

    /// The same gateway running `app` on streams (stream mode on at its endpoint).
    pub fn with_app(mut self, app: StreamApp) -> PlaitGateway {
        match &mut self.endpoint {
            Endpoint::Client(c) => c.enable_streams(),
            Endpoint::Server(s) => s.enable_streams(),
        }
        self.app = Some(app);
        self
    }

    /// The stream application, if any.
    pub fn app(&self) -> Option<&StreamApp> {
        self.app.as_ref()
    }

    /// The endpoint's engine session, once one runs (statistics, path views).
    pub fn session(&self) -> Option<&Session> {
        match &self.endpoint {
            Endpoint::Client(c) => c.session(),
            Endpoint::Server(s) => s.peer_session(0),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &GatewayStats {
        &self.stats
    }

    /// Whether the tunnel is up at this end: the client's keys are usable; the server runs
    /// its client's session and has validated every path's address.
    pub fn is_established(&self, now: Time) -> bool {
        match &self.endpoint {
            Endpoint::Client(c) => c.is_established(now),
            Endpoint::Server(s) => {
                s.peer_session(0).is_some()
                    && s.peer_counters(0)
                        .is_some_and(|c| c.paths_validated >= self.path_flows.len() as u64)
            }
        }
    }

    /// Whether inner packets go to the endpoint now (see the module docs).
    fn passes_inner(&mut self, now: Time) -> bool {
        if !self.up {
            self.up = now >= Time::ZERO + SETUP_HOLD_MAX || self.is_established(now);
        }
        self.up
    }

    /// Inner packets the endpoint refused: no session yet, too large, the send queue full,
    /// or (at the server) a source its client may not use.
    pub fn inner_refused(&self) -> u64 {
        match &self.endpoint {
            Endpoint::Client(c) => c.link_counters().refused,
            Endpoint::Server(s) => s.peer_counters(0).map_or(0, |c| c.refused + c.spoofed),
        }
    }

    /// Datagrams the endpoint dropped before any session, by reason.
    pub fn drops(&self) -> DropCounters {
        match &self.endpoint {
            Endpoint::Client(c) => c.drops(),
            Endpoint::Server(s) => s.drops(),
        }
    }

    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        self.inbox.push_back(pkt);
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        let now_stamp = stamp(now);
        let passes = self.passes_inner(now);
        if passes {
            // Held packets go first, in their order.
            let arrived = std::mem::take(&mut self.inbox);
            self.inbox = std::mem::take(&mut self.held);
            self.inbox.extend(arrived);
        }
        let is_client = matches!(self.endpoint, Endpoint::Client(_));
        let mut io = GatewayIo {
            out,
            path_flows: &self.path_flows,
            addresses: &self.addresses,
            stats: &mut self.stats,
            outer_header: self.outer_header,
            is_client,
        };
        for (path, bytes) in self.pending.drain(..) {
            io.send_on(path, &bytes);
        }
        while let Some(pkt) = self.inbox.pop_front() {
            match pkt.body {
                Body::Plait { path, mut bytes } => {
                    let path = usize::from(path.0);
                    match &mut self.endpoint {
                        Endpoint::Client(c) => {
                            let from = self.addresses.server;
                            c.handle_udp(now_stamp, path, from, &mut bytes, &mut io);
                        }
                        Endpoint::Server(s) => {
                            let Some(from) = self.addresses.client.get(path).copied() else {
                                continue;
                            };
                            s.handle_udp(now_stamp, 0, from, &mut bytes, &mut io);
                        }
                    }
                }
                _ if !passes => {
                    if self.held.len() >= SETUP_HOLD_PACKETS {
                        self.held.pop_front();
                    }
                    self.held.push_back(pkt);
                }
                _ => {
                    inner::encode(&pkt, is_client, &mut self.scratch);
                    io.stats.inner_in += 1;
                    match &mut self.endpoint {
                        Endpoint::Client(c) => c.handle_tun(now_stamp, &self.scratch, &mut io),
                        Endpoint::Server(s) => s.handle_tun(now_stamp, &self.scratch, &mut io),
                    }
                }
            }
        }
        let due = |t: Option<Time>| t.is_some_and(|t| t <= now);
        match &mut self.endpoint {
            Endpoint::Client(c) if due(c.poll_timeout()) => c.handle_timeout(now_stamp, &mut io),
            Endpoint::Server(s) if due(s.poll_timeout()) => s.handle_timeout(now_stamp, &mut io),
            _ => {}
        }
        if let Some(app) = self.app.as_mut().filter(|_| passes) {
            match &mut self.endpoint {
                Endpoint::Client(c) => {
                    pump_app(app, c.as_mut(), now, &mut self.scratch);
                    c.flush_streams(now_stamp, &mut io);
                }
                Endpoint::Server(s) => {
                    pump_app(app, s.as_mut(), now, &mut self.scratch);
                    s.flush_streams(now_stamp, &mut io);
                }
            }
        }
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        if !self.pending.is_empty() {
            return Some(Time::ZERO);
        }
        let next = match &self.endpoint {
            Endpoint::Client(c) => c.poll_timeout(),
            Endpoint::Server(s) => s.poll_timeout(),
        };
        let next = match &self.app {
            Some(StreamApp::Sink {
                start,
                stream: None,
                ..
            }) => Some(next.map_or(*start, |n| n.min(*start))),
            _ => next,
        };
        // Held packets go at the latest when holding ends.
        let release = (!self.held.is_empty()).then_some(Time::ZERO + SETUP_HOLD_MAX);
        next.into_iter().chain(release).min()
    }
}

/// Runs the stream application on `host` (stream calls only mark the link; the caller
/// flushes).
fn pump_app(app: &mut StreamApp, host: &mut impl StreamHost, now: Time, scratch: &mut Vec<u8>) {
    let mut opened = Vec::new();
    while let Some((peer, event)) = host.poll_stream_event() {
        if let LinkStreamEvent::Stream(StreamEvent::Opened { id, .. }) = event {
            opened.push((peer, id));
        }
    }
    scratch.resize(64 << 10, 0);
    match app {
        StreamApp::Source { stream } => {
            if stream.is_none() {
                // The mobile host's request: nothing comes on it, so this side's
                // direction carries everything.
                *stream = opened.first().copied();
            }
            let Some((peer, id)) = *stream else { return };
            let mut written = 0;
            while written < SOURCE_AHEAD {
                match host.stream_write(now, peer, id, scratch) {
                    Ok(n) if n > 0 => written += n as u64,
                    _ => break,
                }
            }
        }
        StreamApp::Sink {
            start,
            stream,
            bytes,
            bins,
            bin,
        } => {
            if now < *start {
                return;
            }
            if stream.is_none() {
                let Ok((peer, id)) = host.open_stream(now, b"ftp") else {
                    return;
                };
                // Nothing goes from the mobile host: end its direction at once.
                let _ = host.stream_finish(now, peer, id);
                *stream = Some((peer, id));
            }
            let Some((peer, id)) = *stream else { return };
            let index = (now.as_nanos() / bin.as_nanos().max(1) as u64) as usize;
            while let Ok(r) = host.stream_read(now, peer, id, scratch) {
                if r.len == 0 {
                    break;
                }
                *bytes += r.len as u64;
                if bins.len() <= index {
                    bins.resize(index + 1, 0);
                }
                bins[index] += r.len as u64;
            }
        }
    }
}

struct GatewayIo<'a> {
    out: &'a mut Outbox,
    path_flows: &'a [FlowId],
    addresses: &'a TunnelAddresses,
    stats: &'a mut GatewayStats,
    outer_header: u32,
    is_client: bool,
}

impl GatewayIo<'_> {
    fn send_on(&mut self, path: usize, datagram: &[u8]) {
        let (Some(flow), Ok(id)) = (self.path_flows.get(path), u8::try_from(path)) else {
            self.stats.stray += 1;
            return;
        };
        self.stats.sent_per_path[path] += 1;
        let size = u32::try_from(datagram.len())
            .unwrap_or(u32::MAX)
            .saturating_add(self.outer_header);
        self.out.send(Packet {
            flow: *flow,
            size,
            body: Body::Plait {
                path: PathId(id),
                bytes: datagram.to_vec(),
            },
        });
    }
}

impl Outputs for GatewayIo<'_> {
    fn send_udp(&mut self, socket: usize, to: SocketAddr, datagram: &[u8]) {
        // The client's socket is its path; the server names the client's address.
        let path = if self.is_client {
            Some(socket)
        } else {
            self.addresses.client.iter().position(|a| *a == to)
        };
        match path {
            Some(path) => self.send_on(path, datagram),
            None => self.stats.stray += 1,
        }
    }

    fn write_tun(&mut self, packet: &[u8]) {
        self.stats.delivered += 1;
        if let Some(pkt) = inner::decode(packet) {
            self.out.forward(pkt);
        }
    }

    fn note_reorder_hold(&mut self, held_for: Duration) {
        let us = held_for.min(Duration::from_secs(3600)).as_micros();
        self.stats
            .held_us
            .push(u32::try_from(us).unwrap_or(u32::MAX));
    }
}

/// Collects what an endpoint sends while [`connect`] runs.
#[derive(Default)]
struct Capture(Vec<(usize, SocketAddr, Vec<u8>)>);

impl Outputs for Capture {
    fn send_udp(&mut self, socket: usize, to: SocketAddr, datagram: &[u8]) {
        self.0.push((socket, to, datagram.to_vec()));
    }
    fn write_tun(&mut self, _packet: &[u8]) {}
}

fn is_handshake(datagram: &[u8]) -> bool {
    matches!(
        datagram.first(),
        Some(&(TYPE_INITIATION | TYPE_RESPONSE | TYPE_COOKIE_REPLY))
    )
}

/// Brings a simulated tunnel up before the run: the client's first initiation and the
/// server's answer are exchanged at `now` without crossing the links (see the module
/// docs). Whatever else the endpoints send meanwhile stays in the gateways, to go out on
/// their paths when the run starts. `client` and `server` must be the gateways of one
/// tunnel; the exchange is bounded, and a tunnel it could not bring up (a configuration
/// the server refuses) simply handshakes over the links as the daemon would.
pub fn connect(client: &mut PlaitGateway, server: &mut PlaitGateway, now: Time) {
    let (Endpoint::Client(c), Endpoint::Server(s)) = (&mut client.endpoint, &mut server.endpoint)
    else {
        return;
    };
    let at = stamp(now);
    // Handshake messages in flight: (towards the server, path, bytes).
    let mut wire: VecDeque<(bool, usize, Vec<u8>)> = VecDeque::new();
    let mut cap = Capture::default();
    c.handle_timeout(at, &mut cap);
    let mut from_client = Some(cap);
    // Each message answers with at most one; a handshake takes a few rounds.
    for _ in 0..16 {
        for (socket, _, d) in from_client.take().map(|c| c.0).unwrap_or_default() {
            if is_handshake(&d) {
                wire.push_back((true, socket, d));
            } else {
                client.pending.push((socket, d));
            }
        }
        let Some((towards_server, path, mut d)) = wire.pop_front() else {
            break;
        };
        let mut cap = Capture::default();
        if !towards_server {
            c.handle_udp(at, path, server.addresses.server, &mut d, &mut cap);
            from_client = Some(cap);
            continue;
        }
        let Some(from) = server.addresses.client.get(path).copied() else {
            continue;
        };
        s.handle_udp(at, 0, from, &mut d, &mut cap);
        for (_, to, d) in cap.0 {
            let Some(path) = server.addresses.client.iter().position(|a| *a == to) else {
                continue;
            };
            if is_handshake(&d) {
                wire.push_back((false, path, d));
            } else {
                server.pending.push((path, d));
            }
        }
    }
}
