//! The server endpoint: many clients, each its own engine session, on any number of
//! listening sockets.
//!
//! A client is known by its static public key (config `[[client]]`). Its paths are learned
//! from authenticated data: the engine header inside names the path id, and the socket
//! and source address it arrived on are heard for that path. A new address (a path's
//! first, NAT rebinding, roaming) is used only once it answers a path challenge
//! (docs/protocol.md#path-validation); a path that has a validated address keeps it
//! until then. Inner packets from the TUN
//! device go to the client whose `allowed_ips` contain their destination (longest prefix);
//! inner packets from a client are written to the TUN device only if their source is in
//! that client's `allowed_ips`.
//!
//! Refused without reply and counted: anything that does not parse, initiations with a
//! wrong mac1, that do not decrypt, come from unknown keys, replay an old timestamp or
//! exceed the handshake rate limits, and data messages with replayed counters or bad tags.
//!
//! A data message with an unknown receiver index (after a restart, every client's) is
//! refused too, but may be answered with an unknown-index hint (docs/protocol.md#unknown-index)
//! so its client handshakes again at once instead of after its silence timer: only a
//! message long enough to carry an engine header, within per-source and global budgets,
//! and the hint (32 bytes) is smaller than the message it answers.
//!
//! Handshake floods (docs/protocol.md#dos): mac1 is checked before anything else (one
//! BLAKE2s). An initiation without a valid mac2 is processed only if the server is not
//! under load and its source is within its per-source budget; otherwise it gets a cookie
//! reply and nothing else. One with a valid mac2 (its source proved it receives at its
//! address) has per-source budgets of its own and is processed under load too; the global
//! budget stays the last line for all. Before those rules, an initiation from a client's
//! validated path address, while that client's session runs, is processed at once on
//! budgets of its own ([`super::known`], docs/protocol.md#known-first).
//!
//! An answered initiation only sets the client's `next` keys. If it names an engine
//! session the server does not have, it is answered with `FLAG_FRESH_SESSION` (and so is
//! every further initiation until one is confirmed), and the fresh engine session starts,
//! with the path endpoints forgotten, only when the client's first data message under the
//! new keys confirms them. A replayed initiation (possible after a server restart, which
//! forgets the timestamps) therefore changes nothing the client relies on, and a lost
//! response cannot leave the client on its old engine session while the server has a new
//! one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;
use plait_proto::{Session, Time};
use tracing::{debug, info, warn};

use super::known::{Known, KnownAddresses};
use super::link::{DataDrop, FreshSession, Link, Opened, PathEndpoint, ReceiveDrop};
use super::{EngineParams, Now, Outputs, Random};
use crate::control::{DropCounters, SessionStatus};
use crate::crypto::cookie::CookieChecker;
use crate::crypto::handshake::{FLAG_FRESH_SESSION, ReceivedInitiation};
use crate::crypto::hint::HintKey;
use crate::crypto::keypair::Keypair;
use crate::crypto::keypair::SealedId;
use crate::keys::Key;
use crate::message::{
    DATA_MIN_HONEST_LEN, DataId, INITIATION_MAC2_OFFSET, Message, RESPONSE_LEN, parse,
};
use crate::ratelimit::{LogLimiter, SourceLimiter, TokenBucket};

/// Handshake initiations processed per second, all clients together (each costs several
/// X25519 operations), and the burst allowed: the last line, behind the per-source limits.
pub const HANDSHAKE_RATE: f64 = 200.0;
/// See [`HANDSHAKE_RATE`].
pub const HANDSHAKE_BURST: f64 = 50.0;
/// The server is under load while its demand bucket (the global bucket's twin, charged for
/// every initiation with a valid mac1, processed or not: the demand, as WireGuard's queue
/// length is) holds fewer tokens than this, and for [`UNDER_LOAD_HOLD`] after:
/// initiations without a valid mac2 then get a cookie reply instead of being processed.
/// Under a sustained flood the server therefore stays under load, and the flood's
/// initiations reach Diffie-Hellman only until the demand first crosses the threshold.
pub const LOAD_THRESHOLD: f64 = HANDSHAKE_BURST / 2.0;
/// How long the server stays under load after the bucket was last seen below
/// [`LOAD_THRESHOLD`] (WireGuard: 1 s).
pub const UNDER_LOAD_HOLD: Duration = Duration::from_secs(1);
/// Per source address (IPv4 address, IPv6 /64), initiations without a valid mac2 processed
/// per second and their burst (WireGuard's per-source limit: 20/s, burst 5); over it, a
/// cookie reply.
pub const SOURCE_RATE: (f64, f64) = (20.0, 5.0);
/// Per source prefix (IPv4 /24, IPv6 /48), the same.
pub const PREFIX_RATE: (f64, f64) = (50.0, 20.0);
/// Per source address, initiations with a valid mac2 processed per second and their burst;
/// over it, dropped.
pub const PROVEN_SOURCE_RATE: (f64, f64) = (20.0, 5.0);
/// Per source prefix, the same.
pub const PROVEN_PREFIX_RATE: (f64, f64) = (100.0, 40.0);
/// One client's initiations closer together than this are ignored (WireGuard: 20 ms).
pub const MIN_INITIATION_INTERVAL: Duration = Duration::from_millis(20);
/// Per source address (IPv4 address, IPv6 /64), unknown-index hints sent per second and
/// their burst (docs/protocol.md#unknown-index): a client needs one; each path's address
/// has its own budget.
pub const HINT_SOURCE_RATE: (f64, f64) = (2.0, 4.0);
/// Per source prefix (IPv4 /24, IPv6 /48), the same.
pub const HINT_PREFIX_RATE: (f64, f64) = (20.0, 20.0);
/// Unknown-index hints per second, all sources together, and their burst: the last line
/// (one BLAKE2s and a 26-byte datagram each).
pub const HINT_RATE: (f64, f64) = (500.0, 100.0);
/// The shortest data message that may earn a hint: one that can hold an engine header.
pub const HINTED_DATA_MIN_LEN: usize = DATA_MIN_HONEST_LEN;
/// Random key indices tried before a handshake is given up (a collision among 2^32 is
/// rare; only a broken random source makes every try collide).
const INDEX_TRIES: usize = 8;

/// One configured client.
#[derive(Clone, Debug)]
pub struct ServerPeer {
    /// Name for logs and status.
    pub name: String,
    /// Its static public key.
    pub public_key: Key,
    /// Optional pre-shared key.
    pub preshared_key: Option<Key>,
    /// Inner addresses it may use as source, and that route to it.
    pub allowed_ips: Vec<IpNet>,
}

/// What a server endpoint needs.
#[derive(Clone, Debug)]
pub struct ServerParams {
    /// The server's private key.
    pub private_key: Key,
    /// Known clients.
    pub peers: Vec<ServerPeer>,
    /// Engine settings for every session.
    pub engine: EngineParams,
}

#[derive(Debug)]
struct Peer {
    config: ServerPeer,
    public_b64: String,
    last_timestamp: Option<u64>,
    last_initiation: Option<Time>,
    link: Link,
    log_answered: LogLimiter,
}

/// The server side of a tunnel.
#[derive(Debug)]
pub struct ServerEndpoint {
    private_key: Key,
    engine: EngineParams,
    random: Random,
    peers: Vec<Peer>,
    /// Local key index -> peer.
    indices: BTreeMap<u32, usize>,
    /// (prefix, peer), longest prefix first.
    routes: Vec<(IpNet, usize)>,
    handshakes: TokenBucket,
    /// The demand for handshakes ([`LOAD_THRESHOLD`]).
    demand: TokenBucket,
    /// The last time the server was seen under load ([`LOAD_THRESHOLD`]).
    last_under_load: Option<Time>,
    cookies: CookieChecker,
    /// Per-source budgets of initiations without, and with, a valid mac2.
    unproven: SourceLimiter,
    proven: SourceLimiter,
    /// Clients' validated path addresses, served first (docs/protocol.md#known-first).
    known: KnownAddresses,
    /// Unknown-index hints: their MAC key, per-source and global budgets.
    hint_key: HintKey,
    hint_sources: SourceLimiter,
    hints: TokenBucket,
    drops: DropCounters,
    log_unknown: LogLimiter,
    log_drop: LogLimiter,
}

impl ServerEndpoint {
    /// A server with no sessions yet.
    pub fn new(params: ServerParams) -> ServerEndpoint {
        let mut routes = Vec::new();
        let peers: Vec<Peer> = params
            .peers
            .into_iter()
            .enumerate()
            .map(|(i, config)| {
                routes.extend(config.allowed_ips.iter().map(|n| (n.trunc(), i)));
                let mut link = Link::responder(config.allowed_ips.clone());
                link.set_path_hints(params.engine.tuning.path_hints.clone());
                Peer {
                    public_b64: config.public_key.to_base64(),
                    last_timestamp: None,
                    last_initiation: None,
                    link,
                    log_answered: LogLimiter::new(1.0),
                    config,
                }
            })
            .collect();
        routes.sort_by_key(|(n, _)| std::cmp::Reverse(n.prefix_len()));
        let mut random = Random::from_seed(params.engine.seed);
        let mut hash_key = || std::array::from_fn(|_| random.next_u64());
        let unproven = SourceLimiter::new(SOURCE_RATE, PREFIX_RATE, hash_key());
        let proven = SourceLimiter::new(PROVEN_SOURCE_RATE, PROVEN_PREFIX_RATE, hash_key());
        let hint_sources = SourceLimiter::new(HINT_SOURCE_RATE, HINT_PREFIX_RATE, hash_key());
        ServerEndpoint {
            cookies: CookieChecker::new(&params.private_key.public()),
            hint_key: HintKey::new(&params.private_key.public()),
            private_key: params.private_key,
            random,
            engine: params.engine,
            peers,
            indices: BTreeMap::new(),
            routes,
            handshakes: TokenBucket::new(HANDSHAKE_RATE, HANDSHAKE_BURST),
            demand: TokenBucket::new(HANDSHAKE_RATE, HANDSHAKE_BURST),
            last_under_load: None,
            unproven,
            proven,
            known: KnownAddresses::default(),
            hint_sources,
            hints: TokenBucket::new(HINT_RATE.0, HINT_RATE.1),
            drops: DropCounters::default(),
            log_unknown: LogLimiter::new(1.0),
            log_drop: LogLimiter::new(1.0),
        }
    }

    /// Stream mode: every client's streams are served by the relay through
    /// [`super::StreamHost`] instead of refused.
    pub fn enable_streams(&mut self) {
        for p in &mut self.peers {
            p.link.enable_streams();
        }
    }

    pub(super) fn links_mut(&mut self) -> impl Iterator<Item = &mut Link> {
        self.peers.iter_mut().map(|p| &mut p.link)
    }

    /// The engine session of the `index`-th configured client, if one runs (read-only:
    /// statistics and path views, as the simulator reports them).
    pub fn peer_session(&self, index: usize) -> Option<&plait_proto::Session> {
        self.peers.get(index)?.link.session()
    }

    /// The `index`-th configured client's name.
    pub fn client_name(&self, index: usize) -> Option<&str> {
        self.peers.get(index).map(|p| p.config.name.as_str())
    }

    /// A datagram arrived on listening socket `socket` from `from`.
    pub fn handle_udp(
        &mut self,
        now: Now,
        socket: usize,
        from: SocketAddr,
        datagram: &mut [u8],
        out: &mut impl Outputs,
    ) {
        match parse(datagram) {
            Ok(Message::Initiation { sender }) => {
                self.handle_initiation(now, socket, from, sender, datagram, out)
            }
            Ok(Message::Data { receiver, id }) => {
                self.handle_data(now.mono, socket, from, receiver, id, datagram, out)
            }
            Ok(Message::PathControl { receiver, counter }) => {
                let id = SealedId::Control(counter);
                self.handle_path_control(now.mono, socket, from, receiver, id, datagram, out)
            }
            Ok(
                Message::Response { .. }
                | Message::CookieReply { .. }
                | Message::UnknownIndex { .. },
            )
            | Err(_) => {
                self.drops.malformed += 1;
                if let Some(suppressed) = self.log_drop.check(now.mono) {
                    debug!(%from, suppressed, "malformed datagram dropped");
                }
            }
        }
    }

    /// Whether the server is under load at `now` ([`LOAD_THRESHOLD`], [`UNDER_LOAD_HOLD`]).
    fn under_load(&mut self, now: Time) -> bool {
        if self.demand.available(now) < LOAD_THRESHOLD {
            self.last_under_load = Some(now);
            return true;
        }
        self.last_under_load
            .is_some_and(|last| now < last + UNDER_LOAD_HOLD)
    }

    /// Whether an initiation's mac2 is valid for `from` (all zeros: no cookie, not checked).
    fn has_valid_mac2(&mut self, now: Time, from: SocketAddr, msg: &[u8]) -> bool {
        if msg
            .get(INITIATION_MAC2_OFFSET..)
            .is_none_or(|m| m.iter().all(|b| *b == 0))
        {
            return false;
        }
        let random = &mut self.random;
        self.cookies
            .check_mac2(now, from, msg, &mut |b: &mut [u8]| random.fill(b))
    }

    /// The DoS rules of docs/protocol.md#dos, before any Diffie-Hellman: true if the
    /// initiation may be processed. Otherwise it was counted, and answered with a cookie
    /// reply if it deserves one.
    fn admit_initiation(
        &mut self,
        t: Time,
        socket: usize,
        from: SocketAddr,
        sender: u32,
        msg: &[u8],
        out: &mut impl Outputs,
    ) -> bool {
        // mac1 first: one BLAKE2s stops whatever was made without the server's public key.
        if !self.cookies.check_mac1(msg) {
            self.drops.bad_mac += 1;
            return false;
        }
        // Counted in the demand whatever becomes of it (an empty bucket just stays empty).
        let _ = self.demand.allow(t);
        // docs/protocol.md#known-first: a client established at this very address is
        // served at once, on budgets no other initiation spends; over them (a spoofer of
        // the address spent them), the rules below, as for anyone.
        let at = PathEndpoint {
            socket,
            remote: from,
        };
        let peers = &self.peers;
        let still_known = |p: usize| peers.get(p).is_some_and(|p| p.link.is_known_at(at));
        match self.known.admit(t, at, still_known) {
            Known::Admitted => {
                self.drops.known_admitted += 1;
                return true;
            }
            Known::OverBudget => self.drops.known_over_budget += 1,
            Known::Stranger => {}
        }
        if self.has_valid_mac2(t, from, msg) {
            // The source receives at its address: its own budgets, and the whole global one.
            if !self.proven.allow(t, from.ip()) || !self.handshakes.allow(t) {
                self.drops.rate_limited += 1;
                return false;
            }
            return true;
        }
        if !self.under_load(t) && self.unproven.allow(t, from.ip()) && self.handshakes.allow(t) {
            return true;
        }
        // Under load, or the source is over its budget: prove the address first.
        self.drops.cookie_replied += 1;
        let random = &mut self.random;
        if let Some(reply) = self
            .cookies
            .reply(t, from, sender, msg, &mut |b: &mut [u8]| random.fill(b))
        {
            out.send_udp(socket, from, &reply);
        }
        false
    }

    fn handle_initiation(
        &mut self,
        now: Now,
        socket: usize,
        from: SocketAddr,
        sender: u32,
        msg: &[u8],
        out: &mut impl Outputs,
    ) {
        let t = now.mono;
        if !self.admit_initiation(t, socket, from, sender, msg, out) {
            return;
        }
        let init = match ReceivedInitiation::read(&self.private_key, msg) {
            Ok(i) => i,
            Err(_) => {
                self.drops.auth_failed += 1;
                return;
            }
        };
        let Some(p) = self
            .peers
            .iter()
            .position(|p| p.config.public_key == init.client)
        else {
            self.drops.unknown_key += 1;
            if let Some(suppressed) = self.log_unknown.check(t) {
                warn!(%from, key = %init.client.to_base64(), suppressed, "handshake from an unknown public key refused");
            }
            return;
        };
        let peer = &mut self.peers[p];
        if peer
            .last_timestamp
            .is_some_and(|last| init.payload.timestamp <= last)
        {
            // A replayed (or duplicate, sent on another path) initiation.
            self.drops.replayed += 1;
            return;
        }
        if peer
            .last_initiation
            .is_some_and(|last| t < last + MIN_INITIATION_INTERVAL)
        {
            self.drops.rate_limited += 1;
            return;
        }
        let Some(local_index) = (0..INDEX_TRIES)
            .map(|_| self.random.next_u64() as u32)
            .find(|i| !self.indices.contains_key(i))
        else {
            if let Some(suppressed) = self.log_drop.check(t) {
                warn!(
                    suppressed,
                    "no free key index (random source broken?): handshake dropped"
                );
            }
            return;
        };
        let sender = init.sender_index;
        let session_id = init.payload.session_id;
        let timestamp = init.payload.timestamp;
        let fresh = peer.link.wants_fresh_session(session_id);
        let mut msg = [0u8; RESPONSE_LEN];
        let psk = peer.config.preshared_key.clone();
        let flags = if fresh { FLAG_FRESH_SESSION } else { 0 };
        let keys = match init.respond(psk.as_ref(), local_index, flags, &mut msg) {
            Ok(k) => k,
            Err(e) => {
                warn!(error = %e, "cannot answer a handshake");
                return;
            }
        };
        peer.last_timestamp = Some(timestamp);
        peer.last_initiation = Some(t);
        // The new keys wait until the client's first data message confirms them (it
        // proves the client holds them: no key-compromise impersonation, and no effect
        // from a replayed initiation). So does the fresh engine session, if any.
        let staged = Keypair::new(&keys, local_index, sender, t, false);
        if let Some(old) = peer.link.stage_handshake(staged, session_id) {
            self.indices.remove(&old);
        }
        self.indices.insert(local_index, p);
        if let Some(suppressed) = peer.log_answered.check(t) {
            info!(peer = %peer.config.name, %from, session = format_args!("{session_id:08x}"), fresh, suppressed, "handshake answered");
        }
        out.send_udp(socket, from, &msg);
    }

    /// The client's first data message under new keys confirmed a handshake that asked
    /// for a fresh engine session: it replaces the old one (if any), and the path
    /// endpoints are learned anew.
    fn start_fresh_session(
        engine: &EngineParams,
        random: &mut Random,
        peer: &mut Peer,
        fresh: FreshSession,
    ) {
        let session_id = fresh.session_id();
        let config = engine.session_config(random.next_u64(), plait_proto::Side::Server);
        match Session::new(config) {
            Ok(s) => {
                if peer.link.start_session(fresh, s) {
                    info!(peer = %peer.config.name, session = format_args!("{session_id:08x}"), "client started a new session");
                }
            }
            Err(e) => {
                // The daemon validated the configuration; this is a bug, not an input.
                warn!(error = %e, "engine configuration refused");
                peer.link.abandon_session(fresh);
            }
        }
    }

    /// Opens a data or path-control message for peer `p` (counting why not, if it cannot
    /// be opened), forgets the key index it retired, and starts the fresh engine session
    /// it asked for.
    fn open_for<'m>(
        &mut self,
        now: Time,
        p: usize,
        receiver: u32,
        id: SealedId,
        msg: &'m mut [u8],
    ) -> Option<Opened<'m>> {
        let peer = &mut self.peers[p];
        let mut opened = match peer.link.open(now, receiver, id, msg) {
            Ok(opened) => opened,
            Err(e) => {
                match e {
                    DataDrop::UnknownIndex => self.drops.unknown_index += 1,
                    DataDrop::Replayed => self.drops.replayed += 1,
                    DataDrop::Auth => self.drops.auth_failed += 1,
                }
                return None;
            }
        };
        for old in opened.dropped_indices() {
            self.indices.remove(&old);
        }
        if let Some(fresh) = opened.take_fresh_session() {
            Self::start_fresh_session(&self.engine, &mut self.random, peer, fresh);
            // The old session's addresses are forgotten.
            self.reindex_known(p);
        }
        Some(opened)
    }

    /// Client `p`'s validated addresses or session changed: the index of known addresses
    /// follows (docs/protocol.md#known-first).
    fn reindex_known(&mut self, p: usize) {
        if let Some(peer) = self.peers.get(p) {
            self.known.set_peer(p, &peer.link.known_addresses());
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handle_data(
        &mut self,
        now: Time,
        socket: usize,
        from: SocketAddr,
        receiver: u32,
        id: DataId,
        msg: &mut [u8],
        out: &mut impl Outputs,
    ) {
        let Some(&p) = self.indices.get(&receiver) else {
            self.drops.unknown_index += 1;
            self.hint_unknown_index(now, socket, from, receiver, id, msg.len(), out);
            return;
        };
        let Some(opened) = self.open_for(now, p, receiver, SealedId::Data(id), msg) else {
            return;
        };
        let peer = &mut self.peers[p];
        // Authenticated: the engine header names the path; its address is heard (and
        // validated if new: docs/protocol.md#path-validation).
        match peer
            .link
            .receive_and_learn(now, opened, socket, from, &mut self.random, out)
        {
            Ok(Some(path)) => info!(peer = %peer.config.name, %path, %from, "new path"),
            Ok(None) => {}
            Err(ReceiveDrop::Malformed(_)) => self.drops.malformed += 1,
            Err(ReceiveDrop::PathRefused(e)) => debug!(error = %e, "path refused"),
        }
    }

    /// A path-control message (docs/protocol.md#path-validation): opened like data (same
    /// keys; its own counters and replay window); a PATH_RESPONSE may validate the address
    /// it came from. No hint for an unknown index: only data messages earn one.
    #[allow(clippy::too_many_arguments)]
    fn handle_path_control(
        &mut self,
        now: Time,
        socket: usize,
        from: SocketAddr,
        receiver: u32,
        id: SealedId,
        msg: &mut [u8],
        out: &mut impl Outputs,
    ) {
        let Some(&p) = self.indices.get(&receiver) else {
            self.drops.unknown_index += 1;
            return;
        };
        let Some(opened) = self.open_for(now, p, receiver, id, msg) else {
            return;
        };
        let peer = &mut self.peers[p];
        if peer
            .link
            .receive_path_control(now, opened, socket, from, out)
        {
            self.reindex_known(p);
        }
    }

    /// A data message of `len` bytes named `receiver`, an index no client's keys have
    /// (docs/protocol.md#unknown-index): answered with a hint if it could be genuine (long
    /// enough to hold an engine header) and the budgets of its source and of all sources
    /// allow. The hint is never larger than the message.
    #[allow(clippy::too_many_arguments)]
    fn hint_unknown_index(
        &mut self,
        now: Time,
        socket: usize,
        from: SocketAddr,
        receiver: u32,
        id: DataId,
        len: usize,
        out: &mut impl Outputs,
    ) {
        if len < HINTED_DATA_MIN_LEN
            || !self.hint_sources.allow(now, from.ip())
            || !self.hints.allow(now)
        {
            return;
        }
        let hint = self.hint_key.hint(receiver, id);
        debug_assert!(hint.len() <= len, "no amplification");
        self.drops.hinted += 1;
        if let Some(suppressed) = self.log_drop.check(now) {
            debug!(%from, receiver = format_args!("{receiver:08x}"), suppressed, "data for unknown keys: unknown-index hint sent");
        }
        out.send_udp(socket, from, &hint);
    }

    /// An inner packet read from the TUN device: routed to the client whose
    /// `allowed_ips` hold its destination.
    pub fn handle_tun(&mut self, now: Now, packet: &[u8], out: &mut impl Outputs) {
        let Some((_, dst)) = super::inner::addresses(packet) else {
            self.drops.malformed += 1;
            return;
        };
        let Some(&(_, p)) = self.routes.iter().find(|(net, _)| net.contains(&dst)) else {
            self.drops.no_route += 1;
            return;
        };
        self.peers[p].link.send_inner(now.mono, packet, out);
    }

    /// The counters of the `i`-th configured client's link.
    pub fn peer_counters(&self, i: usize) -> Option<super::link::LinkCounters> {
        self.peers.get(i).map(|p| p.link.counters())
    }

    /// The index of known addresses and their clients (docs/protocol.md#known-first).
    #[cfg(test)]
    pub(crate) fn known_addresses(&self) -> Vec<(PathEndpoint, usize)> {
        self.known.addresses()
    }

    /// Key indices the server maps to peers (soak tests: at most three per peer).
    #[cfg(test)]
    pub(crate) fn key_indices(&self) -> usize {
        self.indices.len()
    }

    /// Timers of every session; retires expired keys.
    pub fn handle_timeout(&mut self, now: Now, out: &mut impl Outputs) {
        for peer in &mut self.peers {
            for gone in peer.link.expire_keys(now.mono) {
                self.indices.remove(&gone);
            }
            if peer
                .link
                .poll_timeout()
                .is_some_and(|deadline| deadline <= now.mono)
            {
                peer.link.handle_timeout(now.mono, out);
            }
        }
    }

    /// When [`ServerEndpoint::handle_timeout`] should be called next.
    pub fn poll_timeout(&self) -> Option<Time> {
        let keys = self.peers.iter().flat_map(|p| p.link.key_expiries());
        self.peers
            .iter()
            .filter_map(|p| p.link.poll_timeout())
            .chain(keys)
            .min()
    }

    /// Datagrams dropped before any session, and inner packets refused.
    pub fn drops(&self) -> DropCounters {
        let mut d = self.drops;
        d.spoofed_source = self.peers.iter().map(|p| p.link.counters().spoofed).sum();
        d.amplification_limited = self
            .peers
            .iter()
            .map(|p| p.link.counters().amplification_limited)
            .sum();
        d.path_frames_ignored = self
            .peers
            .iter()
            .map(|p| p.link.counters().path_frames_ignored)
            .sum();
        d
    }

    /// `plait status`'s view: one entry per client that has a session.
    pub fn status(&self, now: Time) -> Vec<SessionStatus> {
        self.peers
            .iter()
            .filter(|p| p.link.has_session())
            .map(|p| {
                p.link.status(
                    now,
                    &p.config.name,
                    &p.public_b64,
                    self.engine.settings.scheduler.name(),
                )
            })
            .collect()
    }
}
