//! The client endpoint: one server, one path per configured link.
//!
//! Path `i` is socket `i` and engine path id `i`. The client initiates every handshake:
//! at start, when keys reach [`REKEY_AFTER_TIME`] (or the message limit), and again every
//! [`REKEY_TIMEOUT`] until the server answers. Each initiation goes out on every path at
//! once (the same message: the server answers the first copy and refuses the others as
//! replays), so a dead first link cannot delay the tunnel.
//!
//! The engine session starts with the first handshake, with every path added; it lives
//! across rekeys and restarts only if the server says it makes a fresh session (it lost
//! ours, e.g. it restarted). The server keeps saying so for every handshake until one is
//! confirmed, so a lost response cannot leave the two engine sessions out of step.
//!
//! A response that fails (forged, damaged, or with an altered index) is dropped and the
//! handshake kept: the genuine response may still come, until the retry after
//! [`REKEY_TIMEOUT`] replaces it. A response's mac1 is checked before its Diffie-Hellman.
//!
//! A server under load answers an initiation without a valid mac2 with a cookie reply
//! (docs/protocol.md#dos). The cookie is for the source address the server saw, so the
//! client keeps one per path and puts mac2 on that path's copies of its initiations while
//! the cookie is fresh. A cookie reply to a copy that carried no mac2 brings the retry
//! forward to [`COOKIE_RETRY_DELAY`] from then (once per initiation), so a client that
//! meets a loaded server waits about a second, not [`REKEY_TIMEOUT`].
//!
//! A server that restarted has none of our keys: it answers our data messages with an
//! unknown-index hint (docs/protocol.md#unknown-index), and the client handshakes at once.
//! The hint cannot be authenticated, so it is only a reason to handshake early: the client
//! checks what it can (the MAC keyed with the server's public key, and that the hint
//! echoes the index and a counter of a data message it sent under its current keys), acts
//! on at most one per [`HINT_MIN_INTERVAL`] and none while a handshake a hint started is
//! under way, and keeps its keys sealing and opening until the new handshake completes. A
//! forged hint therefore costs at most one handshake (a rekey) per interval and never
//! interrupts traffic. Without a hint (lost, or over the server's budget), the client
//! handshakes when nothing authenticated came back for [`UNANSWERED_REHANDSHAKE`] after it
//! sent (keepalives go out every second), doubling that wait after each such handshake
//! until authenticated data arrives; [`REHANDSHAKE_AFTER_SILENCE`] stays the outer bound.
//! When each handshake is due, and why, is [`Schedule`]'s business.
//!
//! A handshake never reuses a nonce: each has fresh ephemeral keys and yields fresh
//! session keys whose counters start at zero, and the old keys keep their own counters.

use std::collections::VecDeque;
use std::net::SocketAddr;

use plait_proto::{MAX_PATHS, PathId, Session, Time};
use tracing::{debug, info, warn};

use super::binding::Bindings;
use super::link::{DataDrop, FreshSession, Link, LinkCounters};
use super::schedule::{Cause, Schedule};
#[cfg(doc)]
use super::schedule::{HINT_MIN_INTERVAL, REHANDSHAKE_AFTER_SILENCE, UNANSWERED_REHANDSHAKE};
use super::{EngineParams, Now, Outputs, Random};
use crate::control::snapshot::{MAX_PATH_CHANGES, PathChange};
use crate::control::{DropCounters, SessionStatus};
use crate::crypto::cookie::{self, COOKIE_SECRET_LATENCY, COOKIE_SECRET_MAX_AGE, Mac, Mac1Key};
use crate::crypto::handshake::{FLAG_FRESH_SESSION, Initiation, InitiationPayload};
use crate::crypto::hint::HintKey;
#[cfg(doc)]
use crate::crypto::keypair::REKEY_AFTER_TIME;
use crate::crypto::keypair::{KeyLifetime, Keypair, REKEY_TIMEOUT, SealedId};
use crate::keys::Key;
use crate::message::{
    ControlFrame, DataId, INITIATION_LEN, Message, REGISTER_ACK, RESPONSE_HEADER_LEN,
    RESPONSE_MAC1_OFFSET, parse,
};
use crate::ratelimit::LogLimiter;
use crate::registration::{PathAttributes, Quality, Registrar};

/// After a cookie reply to an initiation copy without mac2, the initiation is repeated
/// (with mac2) this long after, unless a response to another path's copy completes it
/// first. WireGuard waits for its usual retry (5 s).
pub const COOKIE_RETRY_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// How often the client hands its paths' measured quality to the registrar.
const QUALITY_SAMPLE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// An initiation in flight.
#[derive(Debug)]
struct InFlight {
    init: Initiation,
    /// When it is repeated if no response completes it.
    retry_at: Time,
    /// Per path: whether that path's copy carried a mac2.
    had_mac2: Vec<bool>,
    /// A cookie reply already brought the retry forward.
    hurried: bool,
    /// What started the handshake this initiation belongs to.
    cause: Cause,
}

/// One configured path.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientPath {
    /// Name for logs and status.
    pub name: String,
    /// The server's address on this path.
    pub server: SocketAddr,
    /// Capacity hint, bytes of datagram per second.
    pub rate_hint: Option<f64>,
    /// A backup path (docs/protocol.md#backup).
    pub backup: bool,
    /// Link type, cost class and priority, as registered (docs/protocol.md#registration).
    pub attributes: PathAttributes,
}

/// What a client endpoint needs.
#[derive(Clone, Debug)]
pub struct ClientParams {
    /// This client's private key.
    pub private_key: Key,
    /// The server's public key.
    pub server_public_key: Key,
    /// Optional pre-shared key.
    pub preshared_key: Option<Key>,
    /// The fixed paths, in id order (0..=16 of them; more pattern paths may open later,
    /// [`ClientEndpoint::open_path`]).
    pub paths: Vec<ClientPath>,
    /// Engine settings.
    pub engine: EngineParams,
}

/// The client side of a tunnel.
#[derive(Debug)]
pub struct ClientEndpoint {
    params: ClientParams,
    /// Path id → the path on it now: the fixed paths, and pattern paths while open.
    slots: Vec<Option<ClientPath>>,
    /// The latest changes of the path set, for `plait status`.
    changes: VecDeque<PathChange>,
    /// Pattern paths opened, closed and refused.
    pattern_events: (u64, u64, u64),
    link: Link,
    random: Random,
    handshake: Option<InFlight>,
    /// mac1 key of responses to us (from our public key).
    mac1_own: Mac1Key,
    /// Sealing key of the server's cookie replies.
    cookie_key: [u8; 32],
    /// Per path: the latest cookie and when it came.
    cookies: Vec<Option<(Mac, Time)>>,
    /// MAC key of the server's unknown-index hints.
    hint_key: HintKey,
    /// When handshakes are due, and why.
    schedule: Schedule,
    /// When the keys of each handshake are replaced and retired (shortened only by tests).
    key_lifetime: KeyLifetime,
    /// Which paths' links work, and the withdrawals and restorations the server has not
    /// acknowledged yet (docs/protocol.md#binding).
    bindings: Bindings,
    /// The path set as registered with the server (docs/protocol.md#registration).
    registrar: Registrar,
    /// When the paths' measured quality was last handed to the registrar.
    quality_sampled_at: Option<Time>,
    last_timestamp: u64,
    attempts: u32,
    drops: DropCounters,
    log_drop: LogLimiter,
}

impl ClientEndpoint {
    /// A client that will handshake on its first timeout.
    pub fn new(params: ClientParams) -> ClientEndpoint {
        let mut random = Random::from_seed(params.engine.seed);
        // Zero is avoided so that a session id in a capture is visibly chosen.
        let session_id = (random.next_u64() as u32).max(1);
        let link = Link::initiator(
            session_id,
            params.paths.iter().map(|p| (p.name.clone(), p.server)),
        );
        let mut slots: Vec<Option<ClientPath>> = params.paths.iter().cloned().map(Some).collect();
        slots.resize(MAX_PATHS.max(slots.len()), None);
        ClientEndpoint {
            slots,
            changes: VecDeque::new(),
            pattern_events: (0, 0, 0),
            mac1_own: Mac1Key::new(&params.private_key.public()),
            cookie_key: cookie::cookie_key(&params.server_public_key),
            cookies: vec![None; MAX_PATHS.max(params.paths.len())],
            bindings: Bindings::new(&params.paths.iter().map(|p| p.backup).collect::<Vec<_>>()),
            registrar: {
                let mut r = Registrar::new();
                for (i, p) in params.paths.iter().enumerate() {
                    r.set_path(Time::ZERO, i, Some((p.attributes, p.backup)));
                }
                r
            },
            quality_sampled_at: None,
            hint_key: HintKey::new(&params.server_public_key),
            params,
            link,
            random,
            handshake: None,
            schedule: Schedule::default(),
            key_lifetime: KeyLifetime::default(),
            last_timestamp: 0,
            attempts: 0,
            drops: DropCounters::default(),
            log_drop: LogLimiter::new(1.0),
        }
    }

    /// Stream mode: the relay serves streams through [`super::StreamHost`].
    pub fn enable_streams(&mut self) {
        self.link.enable_streams();
    }

    /// Keys of later handshakes are replaced and retired as `lifetime` says (the
    /// `[test_only] rekey_after_s` of root tests; the default is WireGuard's).
    pub fn set_key_lifetime(&mut self, lifetime: KeyLifetime) {
        self.key_lifetime = lifetime;
    }

    pub(super) fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }

    /// Whether a handshake has completed and the keys are usable.
    pub fn is_established(&self, now: Time) -> bool {
        self.link.current_keys().is_some_and(|k| k.is_usable(now))
    }

    /// A datagram arrived on path `path` from `from`.
    pub fn handle_udp(
        &mut self,
        now: Now,
        path: usize,
        from: SocketAddr,
        datagram: &mut [u8],
        out: &mut impl Outputs,
    ) {
        self.handle_message(now, path, from, datagram, out);
        self.schedule.sealed(now.mono, self.link.current_keys());
    }

    fn handle_message(
        &mut self,
        now: Now,
        path: usize,
        from: SocketAddr,
        datagram: &mut [u8],
        out: &mut impl Outputs,
    ) {
        let msg = match parse(datagram) {
            Ok(m) => m,
            Err(e) => {
                self.drops.malformed += 1;
                self.log_drop(now.mono, "malformed datagram", &e.to_string(), from);
                return;
            }
        };
        match msg {
            Message::Response { sender, receiver } => {
                if !cookie::check_response_mac1(datagram, &self.mac1_own) {
                    self.drops.bad_mac += 1;
                    self.log_drop(now.mono, "handshake response with a bad mac1", "", from);
                    return;
                }
                let noise = datagram
                    .get(RESPONSE_HEADER_LEN..RESPONSE_MAC1_OFFSET)
                    .unwrap_or_default();
                self.handle_response(now, sender, receiver, noise, from, out)
            }
            Message::CookieReply { receiver } => {
                self.handle_cookie_reply(now.mono, path, receiver, datagram, from)
            }
            Message::Data { receiver, id } => {
                match self
                    .link
                    .open(now.mono, receiver, SealedId::Data(id), datagram)
                {
                    Ok(opened) => {
                        self.schedule.authenticated(now.mono, true);
                        let Ok(id) = u8::try_from(path) else { return };
                        self.link.receive_on(now.mono, PathId(id), opened, out);
                    }
                    Err(e) => self.count_data_drop(now.mono, e, from),
                }
            }
            Message::PathControl { receiver, counter } => {
                // docs/protocol.md#path-validation: answer a challenge on its path.
                match self
                    .link
                    .open(now.mono, receiver, SealedId::Control(counter), datagram)
                {
                    Ok(opened) => {
                        self.schedule.authenticated(now.mono, true);
                        let Ok(id) = u8::try_from(path) else { return };
                        match self
                            .link
                            .client_path_control(now.mono, PathId(id), opened, out)
                        {
                            Some(ControlFrame::Path(ack)) if ack.kind == REGISTER_ACK => {
                                self.registrar.on_ack(now.mono, ack.seq());
                                // A query may be due now.
                                self.send_registration(now.mono, out);
                            }
                            Some(ControlFrame::Path(ack)) => {
                                self.bindings.on_ack(usize::from(ack.path), ack.seq());
                            }
                            Some(ControlFrame::Registration { registration, .. }) => {
                                self.registrar.on_answer(registration);
                            }
                            None => {}
                        }
                    }
                    Err(e) => self.count_data_drop(now.mono, e, from),
                }
            }
            Message::UnknownIndex { receiver, id } => {
                self.handle_unknown_index(now, receiver, id, datagram, from, out)
            }
            Message::Initiation { .. } => {
                // Servers never initiate; a client answers nothing it did not ask for.
                self.drops.malformed += 1;
            }
        }
    }

    /// An unknown-index hint (docs/protocol.md#unknown-index): the server says it has no
    /// keys for a data message we sent. Acted on (a handshake now, the keys kept until it
    /// completes) only if its MAC is right, it names the current keys' index and a data
    /// message they sealed, and no hint started a handshake that is still in flight, nor any
    /// initiation went out in the last [`HINT_MIN_INTERVAL`].
    fn handle_unknown_index(
        &mut self,
        now: Now,
        receiver: u32,
        id: DataId,
        msg: &[u8],
        from: SocketAddr,
        out: &mut impl Outputs,
    ) {
        if !self.hint_key.check(msg) {
            self.drops.hint_ignored += 1;
            self.log_drop(now.mono, "unknown-index hint with a bad MAC", "", from);
            return;
        }
        let ours = self
            .link
            .current_keys()
            .is_some_and(|k| k.remote_index == receiver && k.sealed_data(id));
        let busy = !self
            .schedule
            .hint_welcome(now.mono, self.handshake.as_ref().map(|h| h.cause));
        if !ours || busy {
            self.drops.hint_ignored += 1;
            debug!(%from, ours, busy, "unknown-index hint ignored");
            return;
        }
        warn!(%from, "the server does not know our keys (restarted?): handshaking now");
        self.send_initiation(now, Cause::Hint, out);
    }

    fn handle_response(
        &mut self,
        now: Now,
        sender: u32,
        receiver: u32,
        noise: &[u8],
        from: SocketAddr,
        out: &mut impl Outputs,
    ) {
        let Some(InFlight { init, .. }) = self
            .handshake
            .as_mut()
            .filter(|h| h.init.sender_index == receiver)
        else {
            // A late copy, or not ours: refused without a trace beyond the counter.
            self.drops.unknown_index += 1;
            return;
        };
        let local_index = init.sender_index;
        let (keys, flags) = match init.finish(sender, noise) {
            Ok(k) => k,
            Err(e) => {
                self.drops.auth_failed += 1;
                // The handshake is kept: a forgery must not cost us the genuine response.
                self.log_drop(now.mono, "handshake response refused", &e.to_string(), from);
                return;
            }
        };
        let cause = self.handshake.take().map(|h| h.cause);
        let keypair = Keypair::new(&keys, local_index, sender, now.mono, true)
            .with_lifetime(self.key_lifetime);
        let had_session = self.link.has_session();
        let server_made_fresh = flags & FLAG_FRESH_SESSION != 0;
        let fresh = self.link.complete_handshake(keypair, server_made_fresh);
        self.attempts = 0;
        self.schedule.authenticated(now.mono, false);
        if let Some(fresh) = fresh {
            if had_session {
                warn!("server lost our session (restarted?): starting a new engine session");
            }
            self.start_session(now.mono, fresh);
        }
        info!(
            server = %from,
            cause = ?cause,
            handshakes = self.link.handshakes(),
            session = format_args!("{:08x}", self.link.session_id()),
            "handshake complete"
        );
        self.link.drive(now.mono, out);
    }

    /// A cookie reply on `path`: the server is under load (or we are over our source's
    /// budget) and wants mac2 from that path's address.
    fn handle_cookie_reply(
        &mut self,
        now: Time,
        path: usize,
        receiver: u32,
        msg: &[u8],
        from: SocketAddr,
    ) {
        let Some(h) = self
            .handshake
            .as_mut()
            .filter(|h| h.init.sender_index == receiver)
        else {
            self.drops.unknown_index += 1;
            return;
        };
        let Some(c) = cookie::open_cookie_reply(&self.cookie_key, msg, &h.init.mac1) else {
            self.drops.auth_failed += 1;
            self.log_drop(now, "cookie reply refused", "", from);
            return;
        };
        let Some(slot) = self.cookies.get_mut(path) else {
            return;
        };
        *slot = Some((c, now));
        // A copy that had no mac2 learnt something: repeat soon, with mac2. One that had
        // one (a stale cookie) waits for the usual retry, so no loop can form.
        if !h.hurried && h.had_mac2.get(path) == Some(&false) {
            h.hurried = true;
            h.retry_at = h.retry_at.min(now + COOKIE_RETRY_DELAY);
        }
        debug!(%from, path, "cookie reply: the server is under load");
    }

    /// The cookie of `path` if it is still fresh at `now`.
    fn fresh_cookie(&self, path: usize, now: Time) -> Option<&Mac> {
        let (c, got) = self.cookies.get(path)?.as_ref()?;
        (now < *got + (COOKIE_SECRET_MAX_AGE - COOKIE_SECRET_LATENCY)).then_some(c)
    }

    fn start_session(&mut self, now: Time, fresh: FreshSession) {
        let config = self
            .params
            .engine
            .session_config(self.random.next_u64(), plait_proto::Side::Client);
        let mut session = match Session::new(config) {
            Ok(s) => s,
            Err(e) => {
                // The daemon validated the configuration; this is a bug, not an input.
                warn!(error = %e, "engine configuration refused");
                return;
            }
        };
        for (i, p) in self.slots.iter().enumerate() {
            let Ok(id) = u8::try_from(i) else { break };
            let Some(p) = p else { continue };
            if !self.bindings.available(i) {
                continue;
            }
            let hints = self.params.engine.path_hints(i, p);
            if let Err(e) = session.add_path(now, PathId(id), hints) {
                warn!(path = %p.name, error = %e, "path not added");
            }
        }
        self.link.start_session(fresh, session);
        // A fresh session at the server knows none of our withdrawals, nor our paths.
        self.bindings.on_fresh_session(now);
        self.registrar.on_fresh_session(now);
    }

    /// The kernel says `path`'s link works (`available`) or does not (its interface went
    /// down, lost its carrier, its address or its route): the engine stops or resumes
    /// using the path at once, and the server hears it on the paths that work
    /// (docs/protocol.md#binding; seed MMS §II-B).
    pub fn set_path_available(
        &mut self,
        now: Now,
        path: usize,
        available: bool,
        out: &mut impl Outputs,
    ) {
        let t = now.mono;
        if !self.bindings.set_available(t, path, available) {
            return;
        }
        let (Some(Some(p)), Ok(id)) = (self.slots.get(path), u8::try_from(path)) else {
            return;
        };
        let id = PathId(id);
        let (event, why) = if available {
            info!(path = %p.name, "link back: the path rejoins");
            ("link back", "its interface, carrier and route work again")
        } else {
            info!(path = %p.name, "link gone: the path leaves until it is back");
            ("link gone", "its interface, carrier or route went away")
        };
        let name = p.name.clone();
        let p = p.clone();
        self.record(t, Some(id.0), &name, event, why);
        self.registrar.set_available(t, path, available);
        let hints = self.params.engine.path_hints(path, &p);
        if let Some(session) = self.link.session_mut() {
            let done = if available {
                session.add_path(t, id, hints)
            } else {
                session.remove_path(t, id)
            };
            if let Err(e) = done {
                debug!(path = %p.name, error = %e, "engine path unchanged");
            }
        }
        self.send_bindings(t, out);
        self.link.drive(t, out);
    }

    /// A pattern path opens on the free id `id` (its socket is open): it joins the engine
    /// session (and starts probing) and is announced to the server as restored
    /// (docs/protocol.md#binding); the server validates its address as any new one. While
    /// no handshake has completed, the pending one is repeated at once, so that a first
    /// path that opens late does not wait for the retry. `why` is for `plait status`.
    pub fn open_path(
        &mut self,
        now: Now,
        id: usize,
        path: ClientPath,
        why: &str,
        out: &mut impl Outputs,
    ) {
        let t = now.mono;
        let (Some(None), Ok(pid)) = (self.slots.get(id), u8::try_from(id)) else {
            warn!(id, path = %path.name, "path id already in use: not opened");
            return;
        };
        if !self.bindings.open(t, id, path.backup) {
            warn!(id, path = %path.name, "path id already in use: not opened");
            return;
        }
        info!(path = %path.name, id, server = %path.server, why, "path opened");
        self.link
            .set_client_path(id, Some((path.name.clone(), path.server)));
        if let Some(c) = self.cookies.get_mut(id) {
            *c = None;
        }
        let hints = self.params.engine.path_hints(id, &path);
        self.registrar
            .set_path(t, id, Some((path.attributes, path.backup)));
        self.record(t, Some(pid), &path.name, "opened", why);
        self.slots[id] = Some(path);
        self.pattern_events.0 += 1;
        if let Some(session) = self.link.session_mut()
            && let Err(e) = session.add_path(t, PathId(pid), hints)
        {
            warn!(id, error = %e, "path not added to the engine session");
        }
        if !self.is_established(t)
            && let Some(h) = self.handshake.as_mut()
        {
            h.retry_at = h.retry_at.min(t);
        }
        self.send_bindings(t, out);
        self.link.drive(t, out);
    }

    /// The pattern path on `id` closes (its interface, carrier or route went; the daemon
    /// closes its socket after this): it leaves the engine session, the server hears a
    /// withdrawal on the paths that remain, and the id is free again.
    pub fn close_path(&mut self, now: Now, id: usize, why: &str, out: &mut impl Outputs) {
        let t = now.mono;
        let (Some(slot), Ok(pid)) = (self.slots.get_mut(id), u8::try_from(id)) else {
            return;
        };
        let Some(path) = slot.take() else { return };
        info!(path = %path.name, id, why, "path closed");
        self.bindings.close(t, id);
        self.registrar.set_path(t, id, None);
        self.link.set_client_path(id, None);
        if let Some(session) = self.link.session_mut() {
            // Unknown to the session (its link was already down): nothing to remove.
            let _ = session.remove_path(t, PathId(pid));
        }
        self.record(t, Some(pid), &path.name, "closed", why);
        self.pattern_events.1 += 1;
        self.send_bindings(t, out);
        self.link.drive(t, out);
    }

    /// An interface matched a pattern but got no path (why: no free id), for status.
    pub fn note_refused(&mut self, now: Now, name: &str, why: &str) {
        self.record(now.mono, None, name, "refused", why);
        self.pattern_events.2 += 1;
    }

    /// Path `id`'s server is now at `server` (its name resolved to a new address): what
    /// the path sends goes there from now on.
    pub fn set_path_server(&mut self, now: Now, id: usize, server: SocketAddr) {
        let Some(Some(p)) = self.slots.get_mut(id) else {
            return;
        };
        if p.server == server {
            return;
        }
        let why = format!(
            "the server's name now resolves to {server} (was {})",
            p.server
        );
        p.server = server;
        let name = p.name.clone();
        self.link.set_client_path(id, Some((name.clone(), server)));
        self.record(now.mono, u8::try_from(id).ok(), &name, "server moved", &why);
    }

    /// Makes the path on `id` a backup path or gives it back its configured role (the
    /// daemon does so when a metered path's byte budget is spent, or a new budget period
    /// begins: docs/protocol.md#overflow). The engine session applies it at once and the
    /// server hears it in a PATH_RESTORE (docs/protocol.md#backup); the role holds for
    /// later sessions too.
    pub fn set_path_backup(&mut self, now: Now, id: usize, backup: bool, out: &mut impl Outputs) {
        let t = now.mono;
        let Some(Some(p)) = self.slots.get_mut(id) else {
            return;
        };
        if p.backup == backup {
            return;
        }
        p.backup = backup;
        let name = p.name.clone();
        self.bindings.set_backup(t, id, backup);
        self.registrar.set_backup(t, id, backup);
        if let (Some(session), Ok(pid)) = (self.link.session_mut(), u8::try_from(id)) {
            // Unknown to the session (its link is down): it gets the role when it rejoins.
            let _ = session.set_path_backup(t, PathId(pid), backup);
        }
        let (event, why) = if backup {
            ("backup", "its byte budget is spent")
        } else {
            ("overflow", "a new budget period began")
        };
        self.record(t, u8::try_from(id).ok(), &name, event, why);
        self.send_bindings(t, out);
        self.link.drive(t, out);
    }

    /// The link layer's signal of path `id`'s interface, 0 to 1 (`None`: not reported), for
    /// the engine's handover (docs/protocol.md#handover). Kept by the session alone: the
    /// daemon sets it again every second, so a new session has it within one.
    pub fn set_link_signal(&mut self, id: usize, signal: Option<f64>) {
        if self.path(id).is_none() {
            return;
        }
        if let (Some(session), Ok(pid)) = (self.link.session_mut(), u8::try_from(id)) {
            // Unknown to the session (its link is down): set again at the next read.
            let _ = session.set_link_signal(PathId(pid), signal);
        }
    }

    /// The path on `id`, if any.
    pub fn path(&self, id: usize) -> Option<&ClientPath> {
        self.slots.get(id).and_then(Option::as_ref)
    }

    /// Whether the server is not answering on some path: a path of the engine session
    /// is down (silent beyond the liveness bound), or at least two handshake initiations
    /// in a row went unanswered (the first handshake after its retry, 5 s). The daemon
    /// then resolves the server's names again (at most every 10 s).
    pub fn server_unanswering(&self) -> bool {
        self.attempts >= 2 || self.link.any_path_down()
    }

    fn record(&mut self, now: Time, id: Option<u8>, path: &str, event: &str, why: &str) {
        if self.changes.len() >= MAX_PATH_CHANGES {
            self.changes.pop_front();
        }
        self.changes.push_back(PathChange {
            at_s: now.saturating_since(Time::ZERO).as_secs_f64(),
            id,
            path: path.to_owned(),
            event: event.to_owned(),
            why: why.to_owned(),
        });
    }

    /// When the next withdrawal or restoration is due, if one is unacknowledged (tests).
    #[cfg(test)]
    pub(crate) fn poll_timeout_bindings(&self) -> Option<Time> {
        self.bindings.poll_timeout()
    }

    /// Withdrawals and restorations due: each on every path whose link works; then the
    /// registration, if due.
    fn send_bindings(&mut self, now: Time, out: &mut impl Outputs) {
        for frame in self.bindings.due(now) {
            self.link
                .send_binding(now, &frame, self.bindings.available_paths(), out);
        }
        self.send_registration(now, out);
    }

    /// The registration and the query, if due (docs/protocol.md#registration): each on
    /// one path whose link works, the next one at each try.
    fn send_registration(&mut self, now: Time, out: &mut impl Outputs) {
        let (registration, query) = self.registrar.due(now);
        if let Some((r, tries)) = registration {
            self.link
                .send_registration(now, &r, tries, self.bindings.available_paths(), out);
        }
        if query {
            self.link
                .send_query(now, self.bindings.available_paths(), out);
        }
    }

    /// Hands each path's measured quality to the registrar, at most once a second (it
    /// decides whether that is worth a new registration).
    fn sample_quality(&mut self, now: Time) {
        if self
            .quality_sampled_at
            .is_some_and(|t| now < t + QUALITY_SAMPLE_INTERVAL)
        {
            return;
        }
        self.quality_sampled_at = Some(now);
        let Some(session) = self.link.session() else {
            return;
        };
        for view in session.path_views() {
            let quality = Quality {
                srtt_ms: view
                    .srtt
                    .map(|d| d.as_millis().min(u128::from(u16::MAX - 1)) as u16),
                loss_bp: Some((view.loss_rate.clamp(0.0, 1.0) * 10_000.0).round() as u16),
                rate_kbit: view
                    .rate_estimate()
                    .map(|r| (r * 8.0 / 1e3).clamp(0.0, f64::from(u32::MAX - 1)) as u32),
                signal: session
                    .path_link_signal(view.id)
                    .and_then(crate::registration::signal_steps),
            };
            self.registrar
                .note_quality(now, usize::from(view.id.0), quality);
        }
    }

    /// The address the daemon's socket for path `id` is bound to (registered when it is
    /// a specific one, not a wildcard: docs/protocol.md#registration).
    pub fn set_path_local(&mut self, now: Time, id: usize, local: SocketAddr) {
        self.registrar.set_local(now, id, Some(local));
    }

    /// An inner packet read from the TUN device.
    pub fn handle_tun(&mut self, now: Now, packet: &[u8], out: &mut impl Outputs) {
        self.link.send_inner(now.mono, packet, out);
        self.schedule.sealed(now.mono, self.link.current_keys());
    }

    /// Timers: handshake (re)tries, rekeys, key expiry, the engine's own timers.
    pub fn handle_timeout(&mut self, now: Now, out: &mut impl Outputs) {
        let t = now.mono;
        self.link.expire_keys(t);
        let retry_at = self.handshake.as_ref().map(|h| h.retry_at);
        if let Some(cause) = self.schedule.due(t, self.link.current_keys(), retry_at) {
            self.send_initiation(now, cause, out);
        }
        self.sample_quality(t);
        self.send_bindings(t, out);
        self.link.drive(t, out);
        self.schedule.sealed(t, self.link.current_keys());
    }

    fn send_initiation(&mut self, now: Now, cause: Cause, out: &mut impl Outputs) {
        // Counted as an attempt even if it cannot be started, so a failure backs off
        // instead of being retried in a loop.
        self.schedule.started(now.mono, cause);
        // A retry keeps the cause of the handshake it repeats.
        let cause = match (cause, &self.handshake) {
            (Cause::Retry, Some(h)) => h.cause,
            _ => cause,
        };
        // Timestamps must grow even if the wall clock steps back (docs/protocol.md#handshake);
        // at u64::MAX (year 2554) they cannot, and the server refuses them as replays.
        let timestamp = now.wall_ns.max(self.last_timestamp.saturating_add(1));
        self.last_timestamp = timestamp;
        let index = self.random.next_u64() as u32;
        let payload = InitiationPayload {
            session_id: self.link.session_id(),
            timestamp,
        };
        let mut msg = [0u8; INITIATION_LEN];
        let init = match Initiation::start(
            &self.params.private_key,
            &self.params.server_public_key,
            self.params.preshared_key.as_ref(),
            index,
            payload,
            &mut msg,
        ) {
            Ok(i) => i,
            Err(e) => {
                // An older handshake still in flight would make the retry due at once.
                self.handshake = None;
                warn!(error = %e, "cannot start a handshake");
                return;
            }
        };
        self.attempts += 1;
        if self.attempts > 1 && self.attempts.is_power_of_two() {
            warn!(
                attempts = self.attempts,
                "no handshake response from the server yet (unreachable, or it does not know our key)"
            );
        }
        debug!(
            attempt = self.attempts,
            "sending handshake initiation on every path"
        );
        let mut had_mac2 = vec![false; self.slots.len()];
        for (i, p) in self.slots.iter().enumerate() {
            let Some(p) = p else { continue };
            // mac2 differs per path: each path's cookie is for its own source address.
            let c = self.fresh_cookie(i, now.mono).copied();
            cookie::write_initiation_mac2(&mut msg, c.as_ref());
            had_mac2[i] = c.is_some();
            out.send_udp(i, p.server, &msg);
        }
        self.handshake = Some(InFlight {
            init,
            retry_at: now.mono + REKEY_TIMEOUT,
            had_mac2,
            hurried: false,
            cause,
        });
    }

    /// When [`ClientEndpoint::handle_timeout`] should be called next.
    pub fn poll_timeout(&self) -> Option<Time> {
        let handshake = self.schedule.next(
            self.link.current_keys(),
            self.handshake.as_ref().map(|h| h.retry_at),
        );
        let bindings = self.bindings.poll_timeout().unwrap_or(handshake);
        let registration = self.registrar.poll_timeout().unwrap_or(handshake);
        Some(
            self.link
                .poll_timeout()
                .map_or(handshake, |e| e.min(handshake))
                .min(bindings)
                .min(registration),
        )
    }

    fn count_data_drop(&mut self, now: Time, e: DataDrop, from: SocketAddr) {
        match e {
            DataDrop::UnknownIndex => self.drops.unknown_index += 1,
            DataDrop::Replayed => self.drops.replayed += 1,
            DataDrop::Auth => {
                self.drops.auth_failed += 1;
                self.log_drop(now, "datagram failed authentication", "", from);
            }
        }
    }

    fn log_drop(&mut self, now: Time, what: &str, detail: &str, from: SocketAddr) {
        if let Some(suppressed) = self.log_drop.check(now) {
            debug!(%from, detail, suppressed, "{what}: dropped");
        }
    }

    /// Datagrams dropped before the session.
    pub fn drops(&self) -> DropCounters {
        let mut d = self.drops;
        d.path_frames_ignored = self.link.counters().path_frames_ignored;
        d
    }

    /// `plait status`'s view.
    pub fn status(&self, now: Time) -> SessionStatus {
        let mut s = self.link.status(
            now,
            "server",
            &self.params.server_public_key.to_base64(),
            self.params.engine.settings.scheduler.name(),
        );
        s.handshake_causes = self.schedule.causes();
        for p in &mut s.paths {
            if p.remote.is_none() {
                p.remote = self.path(usize::from(p.id)).map(|c| c.server.to_string());
            }
        }
        (
            s.path_events.opened,
            s.path_events.closed,
            s.path_events.refused,
        ) = self.pattern_events;
        s.path_changes = self.changes.iter().cloned().collect();
        s.registration = Some(super::link::registration_status(
            &self.registrar.current(),
            self.registrar.acked(),
            self.registrar.server_view(),
        ));
        s
    }

    /// Inner packets refused, datagrams unsent, sources spoofed.
    pub fn link_counters(&self) -> LinkCounters {
        self.link.counters()
    }

    /// A path-control message holding `frame`, sealed with the current keys (tests).
    #[cfg(test)]
    pub(crate) fn seal_path_frame(
        &mut self,
        now: Time,
        frame: &crate::message::PathFrame,
    ) -> Option<Vec<u8>> {
        self.link.seal_path_frame(now, frame)
    }

    /// A path-control message holding the control frame `frame` (any bytes), sealed with
    /// the current keys (tests).
    #[cfg(test)]
    pub(crate) fn seal_control_frame(&mut self, now: Time, frame: &[u8]) -> Option<Vec<u8>> {
        self.link.seal_control_frame(now, frame)
    }

    /// The engine session, if one runs (read-only: statistics and path views, as the
    /// simulator reports them).
    pub fn session(&self) -> Option<&plait_proto::Session> {
        self.link.session()
    }

    /// The engine session, for tests that act as the tunnel's application.
    #[cfg(test)]
    pub(crate) fn session_mut(&mut self) -> Option<&mut plait_proto::Session> {
        self.link.session_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(usize);

    impl Outputs for Count {
        fn send_udp(&mut self, _: usize, _: SocketAddr, _: &[u8]) {
            self.0 += 1;
        }
        fn write_tun(&mut self, _: &[u8]) {}
    }

    /// Review finding 4: the strictly growing handshake timestamp must not overflow at
    /// u64::MAX (it stays there; the server refuses it as a replay).
    #[test]
    fn timestamp_saturates_instead_of_overflowing() {
        let mut c = ClientEndpoint::new(ClientParams {
            private_key: Key::generate().unwrap(),
            server_public_key: Key::generate().unwrap().public(),
            preshared_key: None,
            paths: vec![ClientPath {
                name: "only".into(),
                server: "192.0.2.1:7744".parse().unwrap(),
                rate_hint: None,
                backup: false,
                attributes: Default::default(),
            }],
            engine: EngineParams {
                settings: plait_proto::EngineSettings::default(),
                max_datagram_size: 1400,
                outer_header_len: 28,
                seed: Some(1),
                streams: EngineParams::tunnel_stream_limits(),
                tuning: Default::default(),
            },
        });
        c.last_timestamp = u64::MAX;
        let mut out = Count(0);
        let now = Now {
            mono: Time::from_millis(1),
            wall_ns: 5,
        };
        c.handle_timeout(now, &mut out);
        assert_eq!(out.0, 1, "the initiation went out");
        assert_eq!(c.last_timestamp, u64::MAX);
        assert_eq!(c.schedule.last_initiation(), Some(now.mono));
        assert!(c.handshake.is_some());
    }
}
