//! Stream mode's TCP side (docs/tunnel.md#stream-mode): the client terminates TCP
//! connections (redirected by nftables, or through SOCKS5) and opens one engine stream per
//! connection, its open request the original destination ([`crate::socks5::Target`]); the
//! server connects to that destination and relays both ways.
//!
//! The relay lives in the daemon's event loop: its listeners and sockets are registered in
//! the loop's `mio::Poll` under tokens from [`TOKENS`]; each round the loop hands it the
//! readiness it saw ([`Relay::on_ready`]), then [`Relay::process`] takes the endpoint's
//! stream events, accepts, connects and pumps ([`conn`]), and the loop drives the engine
//! once for all of it (`StreamHost::flush_streams`).
//!
//! Invariants:
//! - One connection, one stream; the map from stream to connection holds exactly the
//!   connections that have a stream.
//! - What a connection ends with reaches the other end: the socket's end of input becomes
//!   the stream's FIN and the stream's FIN a `shutdown(Write)` (half-close both ways); a
//!   socket error or reset becomes a RESET_STREAM ([`codes`]) and a RESET_STREAM becomes a
//!   TCP RST, never a clean close, so a cut transfer never looks complete.
//! - Memory is bounded: at most `max_connections` (client) or `max_streams_per_client`
//!   per client (server) connections, each holding at most [`conn::CHUNK`] bytes per
//!   direction (none when idle); the engine bounds the rest (per-stream and session
//!   windows and send buffers).
//! - Bad input (SOCKS5 garbage, an undecodable open request, a denied destination) costs
//!   one connection or one stream, with a line in the log; nothing panics.

mod client;
pub mod codes;
mod conn;
pub mod policy;
mod resolve;
mod server;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use plait_proto::{StreamEvent, StreamId, Time};
use slab::Slab;
use tracing::{debug, info, warn};

use crate::endpoint::{LinkStreamEvent, StreamHost, StreamPeer};
use crate::ratelimit::LogLimiter;
use crate::socks5::{AuthPolicy, Handshake, Target, TargetHost};

use conn::{CHUNK, Conn, PumpEnd};
pub use policy::DestinationPolicy;
use resolve::Resolver;

/// The mio tokens the relay uses: `TOKENS.start` and up. Listeners first, then the
/// resolver's waker, then connections.
pub const TOKENS: std::ops::RangeFrom<usize> = 1 << 20..;
const LISTENER_TOKENS: usize = 1 << 20;
const MAX_LISTENERS: usize = 16;
const WAKER_TOKEN: usize = LISTENER_TOKENS + MAX_LISTENERS;
const CONN_TOKENS: usize = 1 << 21;
/// How often idle and connect timeouts are checked.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Connections accepted per listener per round.
const ACCEPTS_PER_ROUND: usize = 64;

/// What the client side of the relay serves.
#[derive(Debug)]
pub struct ClientRelayParams {
    /// The transparent listeners (one per family) nftables redirects to.
    pub transparent: Vec<std::net::TcpListener>,
    /// The SOCKS5 listener and its authentication.
    pub socks5: Option<(std::net::TcpListener, AuthPolicy)>,
    /// Connections open at once at most.
    pub max_connections: usize,
    /// Close a connection idle this long.
    pub idle_timeout: Duration,
}

/// What the server side of the relay needs.
#[derive(Clone, Debug)]
pub struct ServerRelayParams {
    /// Which destinations it connects to.
    pub policy: DestinationPolicy,
    /// How long a connect may take.
    pub connect_timeout: Duration,
    /// Close a connection idle this long.
    pub idle_timeout: Duration,
    /// Streams one client may have open at once.
    pub max_streams_per_client: usize,
}

#[derive(Debug)]
enum Role {
    Client {
        max_connections: usize,
    },
    Server {
        params: ServerRelayParams,
        resolver: Resolver,
        /// Open connections per client index.
        per_client: HashMap<usize, usize>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListenerKind {
    Transparent,
    Socks5,
}

#[derive(Debug)]
struct Listener {
    socket: TcpListener,
    kind: ListenerKind,
    local: SocketAddr,
    ready: bool,
}

#[derive(Debug)]
enum Phase {
    /// Client: a SOCKS5 handshake is under way; no stream yet.
    Socks(Box<Handshake>),
    /// Server: the connect to the destination is in flight.
    Connecting { deadline: Time, to: SocketAddr },
    /// Bytes flow.
    Relaying,
}

#[derive(Debug)]
struct Entry {
    conn: Conn,
    phase: Phase,
    /// In the work list.
    queued: bool,
    /// For logs: where the connection goes.
    dest: String,
}

/// Counters for status and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Connections open now.
    pub open: u64,
    /// Connections relayed in all (accepted by the client, connected by the server).
    pub relayed: u64,
    /// Connections or streams refused (limits, policy, failed connects, SOCKS5 errors).
    pub refused: u64,
    /// Connections aborted by a reset from either side.
    pub reset: u64,
}

/// The relay (see the module docs).
#[derive(Debug)]
pub struct Relay {
    role: Role,
    listeners: Vec<Listener>,
    socks_policy: Option<AuthPolicy>,
    conns: Slab<Entry>,
    by_stream: HashMap<(StreamPeer, StreamId), usize>,
    work: Vec<usize>,
    scratch: Vec<u8>,
    idle_timeout: Duration,
    next_sweep: Time,
    stats: RelayStats,
    log_refused: LogLimiter,
}

impl Relay {
    /// The client's relay; its listeners are registered in `registry`.
    pub fn client(params: ClientRelayParams, registry: &Registry) -> std::io::Result<Relay> {
        let mut listeners = Vec::new();
        for l in params.transparent {
            listeners.push((l, ListenerKind::Transparent));
        }
        let mut socks_policy = None;
        if let Some((l, policy)) = params.socks5 {
            listeners.push((l, ListenerKind::Socks5));
            socks_policy = Some(policy);
        }
        let mut relay = Relay::new(
            Role::Client {
                max_connections: params.max_connections,
            },
            params.idle_timeout,
        );
        relay.socks_policy = socks_policy;
        for (i, (l, kind)) in listeners.into_iter().take(MAX_LISTENERS).enumerate() {
            l.set_nonblocking(true)?;
            let local = l.local_addr()?;
            let mut socket = TcpListener::from_std(l);
            registry.register(&mut socket, Token(LISTENER_TOKENS + i), Interest::READABLE)?;
            relay.listeners.push(Listener {
                socket,
                kind,
                local,
                ready: true,
            });
        }
        Ok(relay)
    }

    /// The server's relay; its resolver wakes the loop through `registry`.
    pub fn server(params: ServerRelayParams, registry: &Registry) -> std::io::Result<Relay> {
        let resolver = Resolver::start(registry, Token(WAKER_TOKEN))?;
        let idle = params.idle_timeout;
        Ok(Relay::new(
            Role::Server {
                params,
                resolver,
                per_client: HashMap::new(),
            },
            idle,
        ))
    }

    fn new(role: Role, idle_timeout: Duration) -> Relay {
        Relay {
            role,
            listeners: Vec::new(),
            socks_policy: None,
            conns: Slab::new(),
            by_stream: HashMap::new(),
            work: Vec::new(),
            scratch: vec![0; CHUNK],
            idle_timeout,
            next_sweep: Time::ZERO,
            stats: RelayStats::default(),
            log_refused: LogLimiter::new(1.0),
        }
    }

    /// Counters.
    pub fn stats(&self) -> RelayStats {
        RelayStats {
            open: self.conns.len() as u64,
            ..self.stats
        }
    }

    /// Whether work is left for the next round without any new readiness.
    pub fn busy(&self) -> bool {
        !self.work.is_empty() || self.listeners.iter().any(|l| l.ready)
    }

    /// Readiness the loop saw for one of the relay's tokens.
    pub fn on_ready(&mut self, token: Token, readable: bool, writable: bool) {
        let t = token.0;
        if t >= CONN_TOKENS {
            let key = t - CONN_TOKENS;
            if let Some(e) = self.conns.get_mut(key) {
                e.conn.tcp_readable |= readable;
                e.conn.tcp_writable |= writable;
                if !e.queued {
                    e.queued = true;
                    self.work.push(key);
                }
            }
        } else if t >= LISTENER_TOKENS
            && let Some(l) = self.listeners.get_mut(t - LISTENER_TOKENS)
        {
            l.ready = true;
        }
        // The waker's token needs nothing: `process` polls the resolver every round.
    }

    /// One round: stream events, accepts, resolved names, pumps, timeouts.
    pub fn process(&mut self, host: &mut impl StreamHost, now: Time, registry: &Registry) {
        while let Some((peer, event)) = host.poll_stream_event() {
            self.on_stream_event(host, now, registry, peer, event);
        }
        self.accept_all(host, now, registry);
        self.take_resolved(host, now, registry);
        let work = std::mem::take(&mut self.work);
        for key in work {
            self.service(host, now, key);
        }
        if now >= self.next_sweep {
            self.sweep(host, now);
            self.next_sweep = now + SWEEP_EVERY;
        }
    }

    fn queue(&mut self, key: usize) {
        if let Some(e) = self.conns.get_mut(key)
            && !e.queued
        {
            e.queued = true;
            self.work.push(key);
        }
    }

    fn on_stream_event(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        registry: &Registry,
        peer: StreamPeer,
        event: LinkStreamEvent,
    ) {
        let e = match event {
            LinkStreamEvent::SessionEnded => {
                let gone: Vec<usize> = self
                    .by_stream
                    .iter()
                    .filter(|((p, _), _)| *p == peer)
                    .map(|(_, k)| *k)
                    .collect();
                if !gone.is_empty() {
                    info!(
                        peer = host.peer_name(peer.index),
                        connections = gone.len(),
                        "engine session ended: its connections are reset"
                    );
                }
                for key in gone {
                    self.close(key, true);
                }
                return;
            }
            LinkStreamEvent::Stream(e) => e,
        };
        match e {
            StreamEvent::Opened { id, request } => {
                self.on_opened(host, now, registry, peer, id, &request)
            }
            StreamEvent::Readable(id) => {
                if let Some(&key) = self.by_stream.get(&(peer, id)) {
                    self.conns[key].conn.stream_readable = true;
                    self.queue(key);
                }
            }
            StreamEvent::Writable(id) => {
                if let Some(&key) = self.by_stream.get(&(peer, id)) {
                    self.conns[key].conn.stream_blocked = false;
                    self.queue(key);
                }
            }
            // The FIN itself comes through a read.
            StreamEvent::Finished(_) => {}
            StreamEvent::Reset { id, code } => {
                if let Some(&key) = self.by_stream.get(&(peer, id)) {
                    let e = &self.conns[key];
                    let level_info = code != codes::TCP_RESET && code != codes::IDLE_TIMEOUT;
                    if level_info {
                        info!(
                            dest = e.dest,
                            code,
                            reason = codes::describe(code),
                            "connection reset by the other end"
                        );
                    } else {
                        debug!(
                            dest = e.dest,
                            code,
                            reason = codes::describe(code),
                            "connection reset by the other end"
                        );
                    }
                    self.stats.reset += 1;
                    self.close(key, true);
                }
            }
        }
    }

    /// Forgets a connection: with an RST if `abort`, else a clean close.
    fn close(&mut self, key: usize, abort: bool) {
        let Some(e) = self.conns.try_remove(key) else {
            return;
        };
        if let Some(s) = e.conn.stream {
            self.by_stream.remove(&s);
            if let Role::Server { per_client, .. } = &mut self.role
                && let Some(n) = per_client.get_mut(&s.0.index)
            {
                *n = n.saturating_sub(1);
            }
        }
        if abort {
            e.conn.abort();
        }
    }

    /// Pumps one connection.
    fn service(&mut self, host: &mut impl StreamHost, now: Time, key: usize) {
        let Some(e) = self.conns.get_mut(key) else {
            return;
        };
        e.queued = false;
        match &mut e.phase {
            Phase::Socks(_) => {
                self.socks_step(host, now, key);
                return;
            }
            Phase::Connecting { to, .. } => {
                let to = *to;
                match connect_outcome(&e.conn.tcp) {
                    None => return,
                    Some(Ok(())) => {
                        e.phase = Phase::Relaying;
                        set_relay_options(&e.conn.tcp);
                        self.stats.relayed += 1;
                        debug!(%to, "connected");
                    }
                    Some(Err(err)) => {
                        let code = codes::for_connect_error(&err);
                        self.refuse_stream(
                            host,
                            now,
                            key,
                            code,
                            &format!("connect to {to}: {err}"),
                        );
                        return;
                    }
                }
            }
            Phase::Relaying => {}
        }
        let e = &mut self.conns[key];
        match e.conn.pump(host, now, &mut self.scratch) {
            Ok(more) => {
                if e.conn.is_done() {
                    debug!(dest = e.dest, "connection closed");
                    self.close(key, false);
                } else if more {
                    self.queue(key);
                }
            }
            Err(PumpEnd::Socket(err)) => {
                debug!(dest = e.dest, error = %err, "connection failed: resetting its stream");
                if let Some((peer, id)) = e.conn.stream {
                    let _ = host.stream_reset(now, peer, id, codes::TCP_RESET);
                }
                self.stats.reset += 1;
                self.close(key, true);
            }
            Err(PumpEnd::Stream(err)) => {
                debug!(dest = e.dest, error = %err, "stream gone: resetting the connection");
                self.close(key, true);
            }
        }
    }

    /// A connection's stream is refused (`code`): the stream is reset, the socket
    /// aborted, the reason logged.
    fn refuse_stream(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        key: usize,
        code: u64,
        why: &str,
    ) {
        if let Some((peer, id)) = self.conns.get(key).and_then(|e| e.conn.stream) {
            let _ = host.stream_reset(now, peer, id, code);
            self.log_refusal(now, host.peer_name(peer.index), why);
        }
        self.stats.refused += 1;
        self.close(key, true);
    }

    fn log_refusal(&mut self, now: Time, peer: &str, why: &str) {
        if let Some(suppressed) = self.log_refused.check(now) {
            info!(peer, suppressed, "connection refused: {why}");
        }
    }

    /// Registers a new connection and queues it for its first service.
    fn insert(&mut self, registry: &Registry, conn: Conn, phase: Phase, dest: String) {
        let stream = conn.stream;
        let key = self.conns.insert(Entry {
            conn,
            phase,
            queued: false,
            dest,
        });
        let e = &mut self.conns[key];
        if let Err(err) = registry.register(
            &mut e.conn.tcp,
            Token(CONN_TOKENS + key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            warn!(error = %err, "cannot watch a connection");
            self.close(key, true);
            return;
        }
        if let Some(s) = stream {
            self.by_stream.insert(s, key);
        }
        self.queue(key);
    }

    /// Idle connections and connects that took too long; listeners whose accept failed
    /// try again.
    fn sweep(&mut self, host: &mut impl StreamHost, now: Time) {
        for l in &mut self.listeners {
            l.ready = true;
        }
        let idle = self.idle_timeout;
        let mut expired = Vec::new();
        for (key, e) in &self.conns {
            match e.phase {
                Phase::Connecting { deadline, to } if now >= deadline => {
                    expired.push((
                        key,
                        codes::CONNECT_TIMEOUT,
                        format!("connect to {to} timed out"),
                    ));
                }
                _ if now.saturating_since(e.conn.last_active) >= idle => {
                    expired.push((
                        key,
                        codes::IDLE_TIMEOUT,
                        format!("{} idle for {idle:?}", e.dest),
                    ));
                }
                _ => {}
            }
        }
        for (key, code, why) in expired {
            if code == codes::IDLE_TIMEOUT {
                debug!("{why}: closed");
                if let Some((peer, id)) = self.conns[key].conn.stream {
                    let _ = host.stream_reset(now, peer, id, code);
                }
                self.close(key, true);
            } else {
                self.refuse_stream(host, now, key, code, &why);
            }
        }
    }
}

/// Whether a non-blocking connect finished: `None` while in flight.
fn connect_outcome(tcp: &TcpStream) -> Option<std::io::Result<()>> {
    if let Ok(Some(e)) | Err(e) = tcp.take_error() {
        return Some(Err(e));
    }
    match tcp.peer_addr() {
        Ok(_) => Some(Ok(())),
        Err(e) if e.kind() == std::io::ErrorKind::NotConnected => None,
        Err(e) => Some(Err(e)),
    }
}

/// TCP_NODELAY (the application's own Nagle already ran; the relay must not add a second
/// delay) and keepalive (a peer that vanished is noticed).
fn set_relay_options(tcp: &TcpStream) {
    let _ = tcp.set_nodelay(true);
    let _ = socket2::SockRef::from(tcp).set_keepalive(true);
}

fn unspecified() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

fn describe_target(t: &Target) -> String {
    match &t.host {
        TargetHost::Ip(ip) => SocketAddr::new(*ip, t.port).to_string(),
        TargetHost::Domain(d) => format!("{}:{}", d.as_str(), t.port),
    }
}
