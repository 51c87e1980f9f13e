//! One peer's tunnel: its engine session, its keys ([`KeyRing`]) and its path endpoints.
//!
//! Keys rotate as WireGuard's do (see [`super::keyring`]). A handshake that asks the
//! server for a fresh engine session changes nothing but the pending `next` keys until
//! the client's first data message under them confirms them; only then does [`Link::open`]
//! hand out the [`FreshSession`] that [`Link::start_session`] needs, so a replayed or
//! unanswered initiation cannot replace the engine session or move the path endpoints.
//!
//! A path's endpoint is fixed on the client ([`Link::initiator`]) and learned on the server
//! from authenticated datagrams only: [`Link::receive_and_learn`] takes the [`Opened`]
//! message that [`Link::open`] returned, which nothing else can make. A new address is
//! only a candidate until it answers a path challenge ([`super::validation`],
//! docs/protocol.md#path-validation); the path keeps its validated address meanwhile.
//!
//! Invariants: a data message is opened only with keys whose index it names, and recorded
//! in that keypair's replay window only after it authenticated; an opened engine
//! datagram's header is decoded once (by the link on the server, where it names the path,
//! by the engine on the client).

use std::collections::VecDeque;
use std::net::SocketAddr;

use ipnet::IpNet;
use plait_proto::path::{PathHints, PathView};
use plait_proto::session::{Delivery, Event, PathError, SendError};
use plait_proto::wire::{DecodeError, Header};
use plait_proto::{MAX_PATHS, PathId, Session, Time};
use tracing::{debug, info, warn};

use super::binding::ServerBinding;

mod registration;
pub use super::keyring::DataDrop;
use super::keyring::KeyRing;
pub use super::validation::PathEndpoint;
use super::validation::{Challenge, PathAddress, Unsendable};
use super::{Outputs, Random};
use crate::control::{PathStatus, SessionStatus};
use crate::crypto::keypair::{Keypair, SealedId};
use crate::message::{
    BINDING_ACK, CONTROL_HEADER_LEN, ControlFrame, ControlFrameError, DATA_HEADER_LEN,
    DATA_OVERHEAD, PATH_CHALLENGE, PATH_RESPONSE, PATH_RESTORE, PATH_TOKEN_LEN, PATH_WITHDRAW,
    PathFrame, QUERY, REGISTER, REGISTER_ACK, REGISTRATION,
};
use crate::ratelimit::LogLimiter;
use crate::registration::Registration;
pub use registration::registration_status;

/// Scratch space: the largest engine datagram or inner packet plus plait's overhead.
const SCRATCH: usize = 65_536 + DATA_OVERHEAD;

/// Counters a link keeps beyond the engine's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Engine datagrams that could not be sent: no usable keys or no endpoint yet.
    pub unsent: u64,
    /// Inner packets delivered whose source the peer may not use.
    pub spoofed: u64,
    /// Inner packets refused by the engine (queue full, too large, no session).
    pub refused: u64,
    /// Streams the peer opened, reset at once: stream mode is off at this end.
    pub streams_refused: u64,
    /// Engine datagrams not sent because the path's only address is unvalidated and they
    /// would exceed its anti-amplification budget (docs/protocol.md#path-validation).
    pub amplification_limited: u64,
    /// PATH_CHALLENGEs (server) or PATH_RESPONSEs (client) sent.
    pub path_frames_sent: u64,
    /// Addresses validated (a path's first, or a move).
    pub paths_validated: u64,
    /// Candidate addresses given up: no answer to any challenge.
    pub validations_abandoned: u64,
    /// Path frames that validated nothing: a wrong or stale token, the wrong address, a
    /// challenge to a server, a malformed frame.
    pub path_frames_ignored: u64,
    /// Server: paths the client withdrew (its link went away), and restored
    /// (docs/protocol.md#binding).
    pub paths_withdrawn: u64,
    /// Server: paths the client restored.
    pub paths_restored: u64,
    /// Server: datagrams that arrived on a withdrawn path, ignored.
    pub withdrawn_ignored: u64,
    /// Server: registrations applied (a newer number); client: acknowledged
    /// (docs/protocol.md#registration).
    pub registrations: u64,
    /// Server: registrations refused (malformed, or an address of the wrong family).
    pub registrations_refused: u64,
}

/// RESET_STREAM code for a stream the peer opened where stream mode is off
/// (docs/tunnel.md#stream-reset-codes).
pub const STREAM_REFUSED: u64 = 1;

/// What a link's streams tell the relay that serves them (stream mode only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkStreamEvent {
    /// Something happened to one stream.
    Stream(plait_proto::StreamEvent),
    /// The engine session ended (replaced by a fresh one, or closed): every stream of the
    /// generation the event is tagged with is gone.
    SessionEnded,
}

/// Stream events a link holds for its relay at most; beyond it the session's streams are
/// abandoned (the relay is not draining: a bug, not an input, but memory stays bounded).
const MAX_PENDING_STREAM_EVENTS: usize = 1 << 20;

/// One peer's state. Every field is private: the key rotation, the pending fresh session
/// and the path endpoints change only through the methods below, which keep the
/// invariants of the module docs.
#[derive(Debug)]
pub struct Link {
    session: Option<Session>,
    /// The engine session id this link runs, or will run: the client's choice; on the
    /// server, the one the last confirmed handshake named.
    session_id: u32,
    keys: KeyRing,
    /// Each path's validated address and candidates.
    addresses: [PathAddress; MAX_PATHS],
    /// Server: each path's withdrawals and restorations (docs/protocol.md#binding).
    bindings: [ServerBinding; MAX_PATHS],
    /// Server: the client's latest registration (docs/protocol.md#registration).
    registration: Option<Registration>,
    counters: LinkCounters,
    /// Inner source prefixes the peer may use (server side); `None` = any (client side).
    allowed_sources: Option<Vec<IpNet>>,
    path_names: Vec<String>,
    /// Sealing buffer: a data header, the datagram, the tag.
    scratch: Vec<u8>,
    /// The engine's own buffer for `poll_transmit` / `poll_delivery`.
    engine_buf: Vec<u8>,
    log_refused: LogLimiter,
    log_roam: LogLimiter,
    /// Stream mode: the peer's streams are served (events queue here for the relay)
    /// instead of refused.
    stream_mode: bool,
    /// Stream events not yet taken by the relay, each with the session generation it
    /// belongs to.
    stream_events: VecDeque<(u64, LinkStreamEvent)>,
    /// Counts engine sessions: stream ids restart with each, so the relay names a stream
    /// by (generation, id).
    generation: u64,
    /// A stream call changed what the engine may send: drive before the round ends.
    needs_drive: bool,
    /// Server: what a session is told of each path id when a datagram first brings it
    /// (`EngineParams::path_hints`; experiments only, the daemon knows nothing).
    path_hints: Vec<PathHints>,
}

/// Leave to start an engine session: made only by [`Link::complete_handshake`] (the
/// client's first, or the server said it made a fresh one) and by [`Link::open`] when a
/// confirmed handshake had asked the server for a fresh session.
#[must_use = "the engine session it stands for must be started or abandoned"]
#[derive(Debug, PartialEq, Eq)]
pub struct FreshSession {
    session_id: u32,
    /// Server side: the client's old endpoints belong to the session it left.
    relearn_endpoints: bool,
}

impl FreshSession {
    /// The engine session id to start.
    pub fn session_id(&self) -> u32 {
        self.session_id
    }
}

/// A data message that opened: proof that its engine datagram authenticated (under the
/// keys of the link that opened it). Made only by [`Link::open`].
#[derive(Debug)]
pub struct Opened<'m> {
    /// The engine datagram (or path frame) inside.
    datagram: &'m [u8],
    /// The whole message's length, as it came off the wire.
    wire_len: usize,
    dropped: [Option<u32>; 2],
    fresh: Option<FreshSession>,
}

impl Opened<'_> {
    /// Indices of the keys dropped when the message confirmed `next` (the oldest, and the
    /// old session's when a fresh session comes with it): the caller forgets them.
    pub fn dropped_indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.dropped.iter().flatten().copied()
    }

    /// The fresh engine session a handshake this message confirmed asked for. Taken
    /// before the message is received, or the receive abandons it.
    pub fn take_fresh_session(&mut self) -> Option<FreshSession> {
        self.fresh.take()
    }
}

/// Why an opened datagram reached no engine session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiveDrop {
    /// The engine header does not decode.
    Malformed(DecodeError),
    /// The path it names cannot be added to the session.
    PathRefused(PathError),
}

impl Link {
    /// The client's link: path `i` is socket `i`, sending to the server at `paths[i]`'s
    /// address, fixed for the link's life. `session_id` names the engine session it will
    /// run (its own choice).
    pub fn initiator(
        session_id: u32,
        paths: impl IntoIterator<Item = (String, SocketAddr)>,
    ) -> Link {
        let mut link = Link::new(None, session_id);
        for (i, (name, remote)) in paths.into_iter().enumerate() {
            link.path_names.push(name);
            if let Some(slot) = link.addresses.get_mut(i) {
                *slot = PathAddress::fixed(PathEndpoint { socket: i, remote });
            }
        }
        link
    }

    /// Client side: path `id` is now `path` (a name and the server's address, sent to
    /// from socket `id`), or no path (`None`: a pattern path closed). The engine session
    /// is the caller's business.
    pub fn set_client_path(&mut self, id: usize, path: Option<(String, SocketAddr)>) {
        let Some(slot) = self.addresses.get_mut(id) else {
            return;
        };
        if self.path_names.len() <= id {
            self.path_names.resize_with(id + 1, String::new);
        }
        match path {
            Some((name, remote)) => {
                *slot = PathAddress::fixed(PathEndpoint { socket: id, remote });
                self.path_names[id] = name;
            }
            None => *slot = PathAddress::default(),
        }
    }

    /// A server's link to one client, which may use `allowed_sources` as inner source
    /// addresses. It has no keys, no session and no endpoints until a handshake is
    /// confirmed and authenticated data arrives.
    pub fn responder(allowed_sources: Vec<IpNet>) -> Link {
        Link::new(Some(allowed_sources), 0)
    }

    fn new(allowed_sources: Option<Vec<IpNet>>, session_id: u32) -> Link {
        Link {
            session: None,
            session_id,
            keys: KeyRing::default(),
            addresses: std::array::from_fn(|_| PathAddress::default()),
            bindings: [ServerBinding::default(); MAX_PATHS],
            registration: None,
            counters: LinkCounters::default(),
            allowed_sources,
            path_names: Vec::new(),
            scratch: vec![0; SCRATCH],
            engine_buf: vec![0; SCRATCH],
            log_refused: LogLimiter::new(1.0),
            log_roam: LogLimiter::new(1.0),
            stream_mode: false,
            stream_events: VecDeque::new(),
            generation: 0,
            needs_drive: false,
            path_hints: Vec::new(),
        }
    }

    /// Server: the hints a session gets for each path id it adds (index: path id).
    pub fn set_path_hints(&mut self, hints: Vec<PathHints>) {
        self.path_hints = hints;
    }

    /// Serves the peer's streams from now on (stream mode): their events queue for
    /// [`Link::poll_stream_event`] instead of the streams being refused.
    pub fn enable_streams(&mut self) {
        self.stream_mode = true;
    }

    /// The engine session id this link runs (or will run).
    pub fn session_id(&self) -> u32 {
        self.session_id
    }

    /// Whether an engine session runs.
    pub fn has_session(&self) -> bool {
        self.session.is_some()
    }

    /// The keys that seal, if any.
    pub fn current_keys(&self) -> Option<&Keypair> {
        self.keys.current()
    }

    /// When each keypair held reaches the reject limit (timers).
    pub fn key_expiries(&self) -> impl Iterator<Item = Time> + '_ {
        self.keys.expiries()
    }

    /// Completed handshakes.
    pub fn handshakes(&self) -> u64 {
        self.keys.installed()
    }

    /// Keypairs held and stream events waiting for the relay (soak tests watch both).
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.keys.held(), self.stream_events.len())
    }

    /// The engine session, for tests that act as a peer's application.
    /// Each path's validated peer address (tests).
    #[cfg(test)]
    pub(crate) fn validated_addresses(&self) -> Vec<Option<PathEndpoint>> {
        self.addresses.iter().map(PathAddress::validated).collect()
    }

    /// Server: the addresses at which this client's initiations are served first
    /// (docs/protocol.md#known-first): its paths' validated addresses while its engine
    /// session runs. (Its keys' expiry is checked at each lookup, [`Link::is_known_at`].)
    pub fn known_addresses(&self) -> Vec<PathEndpoint> {
        if self.session.is_none() {
            return Vec::new();
        }
        self.addresses
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.is_withdrawn(*i))
            .filter_map(|(_, a)| a.validated())
            .collect()
    }

    /// Server: whether `at` is one of [`Link::known_addresses`] and the current keys have
    /// not expired: the client is established there now (docs/protocol.md#known-first).
    /// A withdrawn path's address is not: the client said its link went away, so what
    /// comes from there now is someone else's until the path is restored.
    pub fn is_known_at(&self, at: PathEndpoint) -> bool {
        self.session.is_some()
            && self.keys.current().is_some()
            && self
                .addresses
                .iter()
                .enumerate()
                .any(|(i, a)| !self.is_withdrawn(i) && a.validated() == Some(at))
    }

    /// Server: whether the client withdrew path `i` (docs/protocol.md#binding).
    fn is_withdrawn(&self, i: usize) -> bool {
        self.bindings.get(i).is_some_and(|b| b.withdrawn)
    }

    /// Whether some path of the engine session is down (silent beyond the liveness
    /// bound, docs/protocol.md#path-states).
    pub(crate) fn any_path_down(&self) -> bool {
        self.session.as_ref().is_some_and(|s| {
            s.path_views()
                .iter()
                .any(|v| v.state == plait_proto::path::PathState::Down)
        })
    }

    /// The engine session (the client adds and removes paths as its links come and go).
    /// The engine session, if one runs (read-only: statistics, path views).
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    pub(crate) fn session_mut(&mut self) -> Option<&mut Session> {
        self.session.as_mut()
    }

    /// Counters beyond the engine's.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Server side: whether a handshake naming engine session `session_id` asks for a
    /// fresh one (the server runs none, or another). It stays so until a handshake naming
    /// it is confirmed, whichever response reaches the client.
    pub fn wants_fresh_session(&self, session_id: u32) -> bool {
        !self.has_session() || self.session_id != session_id
    }

    /// Server side: an answered handshake naming engine session `session_id`. Its keys
    /// wait as `next` until the client's first data message under them confirms them; so
    /// does the fresh session, if [`Link::wants_fresh_session`]. Nothing else changes.
    /// Returns the index of the unconfirmed keys they replace.
    pub fn stage_handshake(&mut self, keys: Keypair, session_id: u32) -> Option<u32> {
        debug_assert!(
            !keys.initiator,
            "the responder's keys wait for confirmation"
        );
        let fresh = self.wants_fresh_session(session_id).then_some(session_id);
        self.keys.stage_next(keys, fresh)
    }

    /// Client side: a handshake completed (the server's response proved it holds the
    /// keys), so its keys seal from now on. Returns leave to start the engine session if
    /// there is none yet or `server_made_fresh` (the server lost ours).
    pub fn complete_handshake(
        &mut self,
        keys: Keypair,
        server_made_fresh: bool,
    ) -> Option<FreshSession> {
        debug_assert!(
            keys.initiator,
            "only the initiator's keys are confirmed by the response"
        );
        self.keys.install_confirmed(keys);
        let fresh = !self.has_session() || server_made_fresh;
        if fresh {
            // The old session's keys must not open anything for the new one.
            self.keys.forget_previous();
        }
        fresh.then_some(FreshSession {
            session_id: self.session_id,
            relearn_endpoints: false,
        })
    }

    /// Runs `session` (the engine session [`FreshSession::session_id`] names) from now on,
    /// replacing any other; a server forgets the client's path endpoints, to learn them
    /// anew. Returns whether a session was replaced.
    pub fn start_session(&mut self, fresh: FreshSession, session: Session) -> bool {
        self.leave_session(&fresh);
        self.end_generation();
        self.session.replace(session).is_some()
    }

    /// The fresh session could not be made. The old one is dropped all the same (the peer
    /// has left it), so the next handshake asks for a fresh one again.
    pub fn abandon_session(&mut self, fresh: FreshSession) {
        self.leave_session(&fresh);
        if self.session.take().is_some() {
            self.end_generation();
        }
    }

    /// The streams of the current session are gone: the relay hears so, and the next
    /// session's streams belong to a new generation.
    fn end_generation(&mut self) {
        if self.stream_mode && self.session.is_some() {
            self.stream_events
                .push_back((self.generation, LinkStreamEvent::SessionEnded));
        }
        self.generation += 1;
    }

    fn leave_session(&mut self, fresh: &FreshSession) {
        self.session_id = fresh.session_id;
        if fresh.relearn_endpoints {
            self.addresses.iter_mut().for_each(PathAddress::clear);
            self.bindings = [ServerBinding::default(); MAX_PATHS];
            self.registration = None;
        }
    }

    /// Opens a data message in place with the keys it names. A message under the
    /// pending `next` keys confirms them: they become current, and the fresh engine
    /// session their handshake asked for, if any, comes with the result.
    pub fn open<'m>(
        &mut self,
        now: Time,
        receiver: u32,
        id: SealedId,
        msg: &'m mut [u8],
    ) -> Result<Opened<'m>, DataDrop> {
        let wire_len = msg.len();
        let opened = self.keys.open(now, receiver, id, msg)?;
        let msg: &'m [u8] = msg;
        let start = id.payload_offset();
        let datagram = msg.get(start..start + opened.len).ok_or(DataDrop::Auth)?;
        Ok(Opened {
            datagram,
            wire_len,
            dropped: opened.dropped,
            fresh: opened.fresh_session.map(|session_id| FreshSession {
                session_id,
                relearn_endpoints: true,
            }),
        })
    }

    /// Forgets keys older than the reject limit; returns their indices.
    pub fn expire_keys(&mut self, now: Time) -> Vec<u32> {
        self.keys.expire(now)
    }

    /// Client side: hands an opened datagram that arrived on `path` to the engine (which
    /// decodes it, and refuses it if its header names another path) and drives it.
    pub fn receive_on(
        &mut self,
        now: Time,
        path: PathId,
        mut opened: Opened<'_>,
        out: &mut impl Outputs,
    ) {
        self.settle(&mut opened);
        if let Some(session) = self.session.as_mut()
            && let Err(e) = session.handle_datagram(now, path, opened.datagram)
        {
            debug!(%path, error = %e, "engine ignored a datagram");
        }
        self.drive(now, out);
    }

    /// Server side: an opened datagram arrived on `socket` from `remote`. Its engine
    /// header, decoded here once, names the path: the path joins the session if it is new,
    /// `remote` is heard on it (a new address becomes a candidate and is challenged, with
    /// a token from `random`: docs/protocol.md#path-validation), and the engine gets the
    /// decoded datagram. Returns the path if it was new.
    pub fn receive_and_learn(
        &mut self,
        now: Time,
        mut opened: Opened<'_>,
        socket: usize,
        remote: SocketAddr,
        random: &mut Random,
        out: &mut impl Outputs,
    ) -> Result<Option<PathId>, ReceiveDrop> {
        self.settle(&mut opened);
        let (header, payload) = Header::decode(opened.datagram).map_err(ReceiveDrop::Malformed)?;
        let path = header.path;
        if self
            .bindings
            .get(usize::from(path.0))
            .is_some_and(|b| b.withdrawn)
        {
            // In flight before the withdrawal, or a stray copy: the path stays out until
            // the client restores it.
            self.counters.withdrawn_ignored += 1;
            return Ok(None);
        }
        let added = self
            .ensure_path(now, path)
            .map_err(ReceiveDrop::PathRefused)?;
        let from = PathEndpoint { socket, remote };
        self.hear_address(now, path, from, opened.wire_len, random, out);
        if let Some(session) = self.session.as_mut()
            && let Err(e) = session.handle_decoded(now, path, &header, payload)
        {
            debug!(%path, error = %e, "engine ignored a datagram");
        }
        self.drive(now, out);
        Ok(added.then_some(path))
    }

    /// A fresh session the caller left in `opened` is abandoned: the peer has left the
    /// old one, so keeping it would leave the two sides on different sessions, and without
    /// one the next handshake asks for a fresh session again.
    fn settle(&mut self, opened: &mut Opened<'_>) {
        if let Some(fresh) = opened.fresh.take() {
            self.abandon_session(fresh);
        }
    }

    /// Adds `path` to the engine session if it is new; `Ok(true)` if it was added.
    fn ensure_path(&mut self, now: Time, path: PathId) -> Result<bool, PathError> {
        let Some(session) = self.session.as_mut() else {
            return Ok(false);
        };
        if session.path_ids().any(|id| id == path) {
            return Ok(false);
        }
        let backup = self
            .bindings
            .get(usize::from(path.0))
            .is_some_and(|b| b.backup);
        let (hints, signal) =
            registration::registered(self.registration.as_ref(), &self.path_hints, path);
        session.add_path(now, path, PathHints { backup, ..hints })?;
        // The path was added just now: nothing to refuse.
        let _ = session.set_link_signal(path, signal);
        Ok(true)
    }

    /// Records that an authenticated datagram of `len` bytes for `path` came from `from`:
    /// a new address becomes a candidate and gets a challenge; the path's datagrams keep
    /// going to its validated address (docs/protocol.md#path-validation).
    fn hear_address(
        &mut self,
        now: Time,
        path: PathId,
        from: PathEndpoint,
        len: usize,
        random: &mut Random,
        out: &mut impl Outputs,
    ) {
        let Some(addr) = self.addresses.get(usize::from(path.0)) else {
            return;
        };
        // The RTT sets a new candidate's retry delay; known addresses need none (and
        // `path_views` allocates: not for every datagram).
        let known = addr.validated() == Some(from) || addr.is_candidate(from);
        let srtt = if known {
            None
        } else {
            self.session.as_ref().and_then(|s| {
                s.path_views()
                    .into_iter()
                    .find(|v| v.id == path)
                    .and_then(|v| v.srtt)
            })
        };
        let Some(addr) = self.addresses.get_mut(usize::from(path.0)) else {
            return;
        };
        let old = addr.validated();
        let token = || {
            let mut t = [0u8; PATH_TOKEN_LEN];
            random.fill(&mut t);
            t
        };
        let Some(challenge) = addr.on_authenticated(now, from, len, srtt, token) else {
            return;
        };
        match old {
            Some(old) if old != challenge.to => {
                if let Some(suppressed) = self.log_roam.check(now) {
                    info!(%path, validated = %old.remote, new = %from.remote, suppressed, "authenticated datagram from a new address: validating it, the path stays on its address meanwhile");
                }
            }
            _ => debug!(%path, remote = %from.remote, "path address heard: validating it"),
        }
        self.send_challenge(now, path, challenge, out);
    }

    fn send_challenge(
        &mut self,
        now: Time,
        path: PathId,
        challenge: Challenge,
        out: &mut impl Outputs,
    ) {
        let frame = PathFrame {
            kind: PATH_CHALLENGE,
            path: path.0,
            token: challenge.token,
        };
        self.send_path_frame(now, challenge.to, &frame, out);
    }

    /// Seals `frame` in a path-control message with the current keys and sends it to `to`.
    fn send_path_frame(
        &mut self,
        now: Time,
        to: PathEndpoint,
        frame: &PathFrame,
        out: &mut impl Outputs,
    ) {
        self.send_control(now, to, &frame.encode(), out);
    }

    /// Seals the control frame `frame` (a path frame or a registration) in a
    /// path-control message with the current keys and sends it to `to`.
    fn send_control(&mut self, now: Time, to: PathEndpoint, frame: &[u8], out: &mut impl Outputs) {
        let Some(keys) = self.keys.current_mut() else {
            self.counters.unsent += 1;
            return;
        };
        let Some(body) = self
            .scratch
            .get_mut(CONTROL_HEADER_LEN..CONTROL_HEADER_LEN + frame.len())
        else {
            return;
        };
        body.copy_from_slice(frame);
        match keys.seal_control(now, &mut self.scratch, frame.len()) {
            Ok(n) => {
                self.counters.path_frames_sent += 1;
                out.send_udp(to.socket, to.remote, &self.scratch[..n]);
                self.note_sent_outside(now, to, n);
            }
            Err(_) => self.counters.unsent += 1,
        }
    }

    /// Tells the engine session that a control message of `len` bytes went to `to`, if
    /// that is a path's validated address: schedulers that model path queues count it
    /// (`Session::note_sent_outside`).
    fn note_sent_outside(&mut self, now: Time, to: PathEndpoint, len: usize) {
        let Some(path) = self
            .addresses
            .iter()
            .position(|a| a.validated() == Some(to))
            .and_then(|i| u8::try_from(i).ok())
        else {
            return;
        };
        if let Some(session) = self.session.as_mut() {
            // The message and its outer headers: the engine's per-datagram overhead less
            // the data message's own framing.
            let outer = session
                .config()
                .datagram_overhead
                .saturating_sub(DATA_OVERHEAD);
            session.note_sent_outside(now, PathId(path), len + outer);
        }
    }

    /// A path-control message holding `frame`, sealed with the current keys (tests that
    /// forge what a client could send).
    #[cfg(test)]
    pub(crate) fn seal_path_frame(&mut self, now: Time, frame: &PathFrame) -> Option<Vec<u8>> {
        self.seal_control_frame(now, &frame.encode())
    }

    /// A path-control message holding the control frame `frame` (any bytes), sealed with
    /// the current keys (tests).
    #[cfg(test)]
    pub(crate) fn seal_control_frame(&mut self, now: Time, frame: &[u8]) -> Option<Vec<u8>> {
        let keys = self.keys.current_mut()?;
        let mut buf = vec![0u8; CONTROL_HEADER_LEN + frame.len() + crate::crypto::aead::TAG_LEN];
        buf[CONTROL_HEADER_LEN..CONTROL_HEADER_LEN + frame.len()].copy_from_slice(frame);
        let n = keys.seal_control(now, &mut buf, frame.len()).ok()?;
        buf.truncate(n);
        Some(buf)
    }

    /// Server side: an opened path-control message arrived on `socket` from `remote`. A
    /// PATH_RESPONSE that echoes the token of a challenge sent to exactly that address
    /// moves its path there; a PATH_WITHDRAW or PATH_RESTORE with a newer number takes the
    /// path out of the session or lets it back (docs/protocol.md#binding), and is
    /// acknowledged either way; a REGISTER or QUERY is handled as
    /// docs/protocol.md#registration says; anything else is counted and ignored. Returns
    /// whether a path's validated address changed (the server's index of
    /// [`Link::known_addresses`] follows it).
    pub fn receive_path_control(
        &mut self,
        now: Time,
        mut opened: Opened<'_>,
        socket: usize,
        remote: SocketAddr,
        out: &mut impl Outputs,
    ) -> bool {
        self.settle(&mut opened);
        let from = PathEndpoint { socket, remote };
        let frame = match ControlFrame::decode(opened.datagram) {
            Ok(ControlFrame::Path(frame)) => frame,
            Ok(ControlFrame::Registration {
                kind: REGISTER,
                registration,
            }) => {
                self.receive_registration(now, from, registration, out);
                return false;
            }
            Err(ControlFrameError::Registration(e)) => {
                self.counters.registrations_refused += 1;
                debug!(%remote, error = %e, "registration refused");
                return false;
            }
            Ok(ControlFrame::Registration { .. }) | Err(_) => {
                self.counters.path_frames_ignored += 1;
                return false;
            }
        };
        match frame.kind {
            PATH_RESPONSE => return self.receive_path_response(now, from, frame, out),
            PATH_WITHDRAW | PATH_RESTORE => self.receive_binding(now, from, frame, out),
            QUERY => self.answer_query(now, from, out),
            _ => self.counters.path_frames_ignored += 1,
        }
        false
    }

    /// Returns whether the path's validated address changed.
    fn receive_path_response(
        &mut self,
        now: Time,
        from: PathEndpoint,
        frame: PathFrame,
        out: &mut impl Outputs,
    ) -> bool {
        let remote = from.remote;
        let Some(addr) = self.addresses.get_mut(usize::from(frame.path)) else {
            self.counters.path_frames_ignored += 1;
            return false;
        };
        let old = addr.validated();
        if !addr.on_response(from, &frame.token) {
            self.counters.path_frames_ignored += 1;
            debug!(path = frame.path, %remote, "path response ignored: no challenge sent there with that token");
            return false;
        }
        self.counters.paths_validated += 1;
        let path = PathId(frame.path);
        match old {
            Some(old) => {
                if let Some(suppressed) = self.log_roam.check(now) {
                    info!(%path, from = %old.remote, to = %remote, suppressed, "path moved to a new address (validated)");
                }
            }
            None => debug!(%path, %remote, "path address validated"),
        }
        self.drive(now, out);
        true
    }

    /// A withdrawal or restoration from the client (docs/protocol.md#binding): applied if
    /// newer, acknowledged to where it came from in any case (the client repeats it until
    /// then; the acknowledgement is no larger than what it answers).
    fn receive_binding(
        &mut self,
        now: Time,
        from: PathEndpoint,
        frame: PathFrame,
        out: &mut impl Outputs,
    ) {
        let Some(binding) = self.bindings.get_mut(usize::from(frame.path)) else {
            self.counters.path_frames_ignored += 1;
            return;
        };
        let path = PathId(frame.path);
        let was_withdrawn = binding.withdrawn;
        if binding.apply(&frame) {
            let ServerBinding {
                withdrawn, backup, ..
            } = *binding;
            if withdrawn {
                self.counters.paths_withdrawn += 1;
                info!(%path, "the client withdrew the path (its link went away): nothing more is sent on it");
                if let Some(session) = self.session.as_mut() {
                    // Unknown to the session already: nothing to remove.
                    let _ = session.remove_path(now, path);
                }
            } else {
                if was_withdrawn {
                    self.counters.paths_restored += 1;
                    info!(%path, backup, "the client restored the path (its link is back)");
                } else {
                    info!(%path, backup, "the client set the path's role");
                }
                // docs/protocol.md#backup. A path the session does not have yet gets its
                // role when it joins (`ensure_path`).
                if let Some(session) = self.session.as_mut() {
                    let _ = session.set_path_backup(now, path, backup);
                }
            }
        }
        let ack = PathFrame::binding(BINDING_ACK, frame.path, frame.seq(), 0);
        self.send_path_frame(now, from, &ack, out);
        self.drive(now, out);
    }

    /// Client side: sends `frame` (a withdrawal or restoration) on each of `paths`, to
    /// that path's server address (docs/protocol.md#binding).
    pub fn send_binding(
        &mut self,
        now: Time,
        frame: &PathFrame,
        paths: impl Iterator<Item = usize>,
        out: &mut impl Outputs,
    ) {
        for p in paths {
            if let Some(to) = self.addresses.get(p).and_then(PathAddress::validated) {
                self.send_path_frame(now, to, frame, out);
            }
        }
    }

    /// Client side: an opened path-control message arrived on `path`. A PATH_CHALLENGE for
    /// that path is answered at once, on the same path (its socket, to the server's
    /// address), echoing the token; a BINDING_ACK or REGISTER_ACK (path frames) or a
    /// REGISTRATION is returned for the caller's [`super::binding::Bindings`] and
    /// [`crate::registration::Registrar`]; anything else is counted and ignored.
    pub fn client_path_control(
        &mut self,
        now: Time,
        path: PathId,
        mut opened: Opened<'_>,
        out: &mut impl Outputs,
    ) -> Option<ControlFrame> {
        self.settle(&mut opened);
        let frame = match ControlFrame::decode(opened.datagram) {
            Ok(ControlFrame::Path(f)) => Some(f),
            Ok(
                answer @ ControlFrame::Registration {
                    kind: REGISTRATION, ..
                },
            ) => return Some(answer),
            Ok(ControlFrame::Registration { .. }) | Err(_) => None,
        };
        match frame {
            Some(f) if matches!(f.kind, BINDING_ACK | REGISTER_ACK) => {
                return Some(ControlFrame::Path(f));
            }
            Some(f) if f.kind == PATH_CHALLENGE && f.path == path.0 => {
                let to = self
                    .addresses
                    .get(usize::from(path.0))
                    .and_then(PathAddress::validated);
                if let Some(to) = to {
                    let response = PathFrame {
                        kind: PATH_RESPONSE,
                        ..f
                    };
                    self.send_path_frame(now, to, &response, out);
                    return None;
                }
            }
            _ => {}
        }
        self.counters.path_frames_ignored += 1;
        None
    }

    /// Path-validation retries and give-ups due at `now`, then the engine's timers if due.
    pub fn handle_timeout(&mut self, now: Time, out: &mut impl Outputs) {
        let mut challenges = Vec::new();
        for (i, addr) in self.addresses.iter_mut().enumerate() {
            if addr.poll_timeout().is_none_or(|t| t > now) {
                continue;
            }
            let mut due = Vec::new();
            let outcome = addr.handle_timeout(now, &mut due);
            if outcome.abandoned > 0 {
                self.counters.validations_abandoned += outcome.abandoned;
                debug!(
                    path = i,
                    abandoned = outcome.abandoned,
                    "path validation given up: the path keeps its address"
                );
            }
            let Ok(id) = u8::try_from(i) else { continue };
            challenges.extend(due.into_iter().map(|c| (PathId(id), c)));
        }
        for (path, c) in challenges {
            self.send_challenge(now, path, c, out);
        }
        if self
            .session
            .as_ref()
            .and_then(Session::poll_timeout)
            .is_some_and(|t| t <= now)
        {
            self.drive(now, out);
        }
    }

    /// Hands an inner packet to the engine and drives it.
    pub fn send_inner(&mut self, now: Time, packet: &[u8], out: &mut impl Outputs) {
        let Some(session) = self.session.as_mut() else {
            self.counters.refused += 1;
            return;
        };
        if let Err(e) = session.handle_inner_packet(now, packet) {
            self.counters.refused += 1;
            if matches!(e, SendError::TooLarge { .. })
                && let Some(suppressed) = self.log_refused.check(now)
            {
                warn!(error = %e, suppressed, "inner packet refused");
            }
        }
        self.drive(now, out);
    }

    /// Runs the engine's drain loop, sealing every transmit with the current keys.
    /// Returns the engine's next deadline.
    pub fn drive(&mut self, now: Time, out: &mut impl Outputs) -> Option<Time> {
        self.needs_drive = false;
        self.hold_unvalidated(now);
        let mut events = Vec::new();
        let next = self.drive_once(now, out, &mut events);
        if events.is_empty() {
            return next;
        }
        if self.stream_mode {
            self.queue_stream_events(events);
            return next;
        }
        // Stream mode is off: a stream the peer opens is reset at once, so it holds none
        // of the session's stream memory; the RESET_STREAMs go out now.
        let mut refused = false;
        if let Some(session) = self.session.as_mut() {
            for event in events.drain(..) {
                if let LinkStreamEvent::Stream(plait_proto::StreamEvent::Opened { id, .. }) = event
                {
                    let _ = session.stream_reset(now, id, STREAM_REFUSED);
                    self.counters.streams_refused += 1;
                    refused = true;
                }
            }
        }
        if !refused {
            return next;
        }
        self.drive_once(now, out, &mut events)
    }

    /// Server: the engine sends nothing on a path whose address is not validated yet
    /// (docs/protocol.md#path-validation): the anti-amplification limit would drop most of
    /// it, losses the engine would not hear of. A path that moves keeps its validated
    /// address meanwhile, so only a path's first address holds it.
    fn hold_unvalidated(&mut self, now: Time) {
        if self.allowed_sources.is_none() {
            return;
        }
        let Some(session) = self.session.as_mut() else {
            return;
        };
        for (i, addr) in self.addresses.iter().enumerate() {
            let Ok(id) = u8::try_from(i) else { break };
            session.set_path_held(now, PathId(id), addr.validated().is_none());
        }
    }

    fn queue_stream_events(&mut self, events: Vec<LinkStreamEvent>) {
        let generation = self.generation;
        for e in events {
            if self.stream_events.len() >= MAX_PENDING_STREAM_EVENTS {
                warn!("stream events are not being taken: the session's streams are abandoned");
                self.stream_events.clear();
                self.stream_events
                    .push_back((generation, LinkStreamEvent::SessionEnded));
                break;
            }
            self.stream_events.push_back((generation, e));
        }
    }

    /// Drives the engine if a stream call since the last drive asked for it.
    pub fn drive_if_needed(&mut self, now: Time, out: &mut impl Outputs) {
        if self.needs_drive {
            self.drive(now, out);
        }
    }

    /// The next stream event with the session generation it belongs to (stream mode).
    pub fn poll_stream_event(&mut self) -> Option<(u64, LinkStreamEvent)> {
        self.stream_events.pop_front()
    }

    /// The current session generation (see [`LinkStreamEvent::SessionEnded`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The engine session of `generation`, for a stream call; the caller's call marks the
    /// link for a drive. `Err(Closed)` if that session is gone.
    pub fn stream_session(
        &mut self,
        generation: u64,
    ) -> Result<&mut Session, plait_proto::StreamError> {
        if generation != self.generation || !self.stream_mode {
            return Err(plait_proto::StreamError::Closed);
        }
        self.needs_drive = true;
        self.session
            .as_mut()
            .ok_or(plait_proto::StreamError::Closed)
    }

    fn drive_once(
        &mut self,
        now: Time,
        out: &mut impl Outputs,
        events: &mut Vec<LinkStreamEvent>,
    ) -> Option<Time> {
        let session = self.session.as_mut()?;
        let mut io = SealIo {
            keys: self.keys.current_mut(),
            addresses: &mut self.addresses,
            out,
            tx: &mut self.scratch,
            allowed: self.allowed_sources.as_deref(),
            counters: &mut self.counters,
            names: &self.path_names,
            events,
        };
        plait_proto::drive(session, now, &mut io, &mut self.engine_buf)
    }

    /// The next deadline: the engine's, if there is a session, or a path validation's.
    pub fn poll_timeout(&self) -> Option<Time> {
        let validation = self.addresses.iter().filter_map(PathAddress::poll_timeout);
        self.session
            .as_ref()
            .and_then(Session::poll_timeout)
            .into_iter()
            .chain(validation)
            .min()
    }

    /// `plait status`'s view of this link.
    pub fn status(
        &self,
        now: Time,
        peer: &str,
        public_key: &str,
        scheduler: &str,
    ) -> SessionStatus {
        let mut s = SessionStatus {
            peer: peer.to_string(),
            public_key: public_key.to_string(),
            established: self.keys.current().is_some_and(|k| k.is_usable(now)),
            session_id: self.session_id,
            key_age_s: self
                .keys
                .current()
                .map_or(0.0, |k| k.age(now).as_secs_f64()),
            handshakes: self.keys.installed(),
            scheduler: scheduler.to_string(),
            ..SessionStatus::default()
        };
        let c = &self.counters;
        s.path_events = crate::control::snapshot::PathEvents {
            validated: c.paths_validated,
            validations_abandoned: c.validations_abandoned,
            withdrawn: c.paths_withdrawn,
            restored: c.paths_restored,
            withdrawn_ignored: c.withdrawn_ignored,
            registrations: c.registrations,
            registrations_refused: c.registrations_refused,
            ..Default::default()
        };
        s.registration = self.registration_status();
        let Some(session) = &self.session else {
            return s;
        };
        let stats = session.stats();
        s.send_queue_drops = crate::control::snapshot::QueueDrops {
            codel_dropped: stats.inner_codel_dropped,
            ce_marked: stats.inner_ce_marked,
            overflow_dropped: stats.inner_overflow_dropped,
        };
        s.fec = crate::control::snapshot::FecCounters {
            blocks: stats.fec_blocks,
            symbols_sent: stats.fec_symbols_sent,
            symbols_dropped: stats.fec_symbols_dropped,
            symbols_received: stats.fec_symbols_received,
            symbols_refused: stats.fec_symbols_refused,
            recovered: stats.fec_recovered,
            unrecovered: stats.fec_unrecovered,
        };
        s.sparse = crate::control::snapshot::SparseCounters {
            unordered_sent: stats.inner_unordered,
            delivered_unordered: stats.delivered_unordered,
            spills_refused: stats.inner_spills_refused,
        };
        s.reorder_depth = session.reorder_depth();
        s.send_queue = session.send_queue_len();
        s.delivered = stats.delivered;
        s.queue_full = stats.inner_queue_full;
        let r = session.reorder_stats();
        s.late = r.late;
        let st = session.stream_stats();
        s.streams = crate::control::snapshot::StreamStatus {
            open: st.open,
            opened: st.opened_local + st.opened_remote,
            bytes_sent: st.bytes_sent,
            bytes_retransmitted: st.bytes_retransmitted,
            bytes_read: st.bytes_read,
            resets: st.resets,
        };
        s.lost = crate::control::snapshot::LossCounters {
            predecessor: r.lost_predecessor,
            comparison: r.lost_comparison,
            timer: r.lost_timer,
            overflow: r.lost_overflow,
            repair_requests: r.repair_requests,
            repaired: r.repaired,
            repairs_sent: stats.repairs_sent,
            repairs_on_removal: stats.repairs_on_removal,
        };
        for view in session.path_views() {
            let i = usize::from(view.id.0);
            let st = session.path_stats(view.id).unwrap_or_default();
            let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1e3);
            let cc = session.path_congestion(view.id);
            s.paths.push(PathStatus {
                id: view.id.0,
                name: self
                    .path_names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("path{i}")),
                local: None,
                remote: self
                    .addresses
                    .get(i)
                    .and_then(PathAddress::shown)
                    .map(|e| e.remote.to_string()),
                state: format!("{:?}", view.state).to_lowercase(),
                handover: session
                    .path_handover(view.id)
                    .map(|r| r.as_str().to_owned()),
                signal: session.path_link_signal(view.id),
                srtt_ms: ms(view.srtt),
                min_rtt_ms: ms(view.min_rtt),
                owd_ms: ms(view.base_owd),
                rate_mbit: shown_capacity(&view).map(|r| r * 8.0 / 1e6),
                loss: view.loss_rate,
                tx_bytes: st.sent_bytes,
                tx_packets: st.sent_datagrams,
                rx_bytes: st.recv_bytes,
                rx_packets: st.recv_datagrams,
                lost_packets: st.lost + st.lost_on_down,
                late_packets: st.spurious_losses,
                cwnd_bytes: cc.as_ref().map_or(0, |c| c.window),
                in_flight_bytes: cc.as_ref().map_or(0, |c| c.bytes_in_flight),
                controller: cc.as_ref().map(|c| c.controller.to_owned()),
                pacing_mbit: cc.and_then(|c| c.pacing_rate).map(|r| r * 8.0 / 1e6),
            });
        }
        s
    }
}

struct SealIo<'a, O: Outputs> {
    keys: Option<&'a mut Keypair>,
    addresses: &'a mut [PathAddress; MAX_PATHS],
    out: &'a mut O,
    tx: &'a mut [u8],
    allowed: Option<&'a [IpNet]>,
    counters: &'a mut LinkCounters,
    names: &'a [String],
    /// Stream events (and a session close) of this drive.
    events: &'a mut Vec<LinkStreamEvent>,
}

impl<O: Outputs> plait_proto::Io for SealIo<'_, O> {
    fn transmit(&mut self, now: Time, path: PathId, datagram: &[u8]) {
        let len = datagram.len();
        let (Some(keys), Some(addr)) = (
            self.keys.as_deref_mut(),
            self.addresses.get_mut(usize::from(path.0)),
        ) else {
            self.counters.unsent += 1;
            return;
        };
        // docs/protocol.md#path-validation: an unvalidated address gets at most 3x.
        let ep = match addr.destination(len + DATA_OVERHEAD) {
            Ok(ep) => ep,
            Err(Unsendable::NoAddress) => {
                self.counters.unsent += 1;
                return;
            }
            Err(Unsendable::AmplificationLimit) => {
                self.counters.amplification_limited += 1;
                return;
            }
        };
        let Some(body) = self.tx.get_mut(DATA_HEADER_LEN..DATA_HEADER_LEN + len) else {
            self.counters.unsent += 1;
            return;
        };
        body.copy_from_slice(datagram);
        match keys.seal(now, self.tx, len) {
            Ok(n) => self.out.send_udp(ep.socket, ep.remote, &self.tx[..n]),
            Err(e) => {
                // NotAhead would be an engine bug (path sequence numbers never repeat
                // within a session); the datagram is dropped rather than risk a nonce.
                debug_assert_ne!(e, crate::crypto::aead::AeadError::NotAhead);
                self.counters.unsent += 1;
            }
        }
    }

    fn deliver(&mut self, _now: Time, packet: &[u8], info: &Delivery) {
        if let Some(allowed) = self.allowed {
            let ok = super::inner::addresses(packet)
                .is_some_and(|(src, _)| allowed.iter().any(|net| net.contains(&src)));
            if !ok {
                self.counters.spoofed += 1;
                return;
            }
        }
        self.out.note_reorder_hold(info.held_for);
        self.out.write_tun(packet);
    }

    fn event(&mut self, _now: Time, event: Event) {
        match event {
            Event::PathState { path, from, to } => {
                let name = self
                    .names
                    .get(usize::from(path.0))
                    .map_or("", String::as_str);
                info!(%path, name, ?from, ?to, "path state");
            }
            Event::Closed {
                by_peer,
                code,
                reason,
            } => {
                info!(by_peer, code, reason, "engine session closed");
                self.events.push(LinkStreamEvent::SessionEnded);
            }
            Event::Stream(e) => self.events.push(LinkStreamEvent::Stream(e)),
            Event::Handover { path, reason } => {
                let name = self
                    .names
                    .get(usize::from(path.0))
                    .map_or("", String::as_str);
                match reason {
                    Some(r) => info!(%path, name, reason = r.as_str(), "path handed over"),
                    None => info!(%path, name, "path handed back"),
                }
            }
        }
    }
}

/// A path's capacity as `plait status` shows it, bytes per second: the packet-train rate,
/// else [`PathView::measured_capacity`]. Not what the path happened to carry: a path known
/// only by its delivery rate (one that carried acknowledgements alone shows a few kbit/s)
/// has no capacity shown yet.
pub(crate) fn shown_capacity(view: &PathView) -> Option<f64> {
    view.train_rate.or_else(|| view.measured_capacity())
}
