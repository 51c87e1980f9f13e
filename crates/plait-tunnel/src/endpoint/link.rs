//! One peer's tunnel: its engine session, its keys and its path endpoints.
//!
//! Keys rotate as WireGuard's do: `current` seals; `previous` still opens what was in
//! flight during a rekey; `next` (responder only) waits for its first authenticated
//! message from the initiator, which confirms it and makes it `current`.
//!
//! A handshake that asks the server for a fresh engine session changes nothing but `next`
//! (and `next_session`) until that confirmation: a replayed or unanswered initiation
//! cannot replace the engine session or move the path endpoints.
//!
//! Invariant: a data message is opened only with keys whose index it names, and recorded
//! in that keypair's replay window only after it authenticated.

use std::net::SocketAddr;

use ipnet::IpNet;
use plait_proto::path::PathHints;
use plait_proto::session::{Delivery, Event, PathError, SendError};
use plait_proto::{MAX_PATHS, PathId, Session, Time};
use tracing::{debug, info, warn};

use super::Outputs;
use crate::control::{PathStatus, SessionStatus};
use crate::crypto::keypair::{Keypair, OpenError};
use crate::message::{DATA_HEADER_LEN, DATA_OVERHEAD};
use crate::ratelimit::LogLimiter;

/// Scratch space: the largest engine datagram or inner packet plus plait's overhead.
const SCRATCH: usize = 65_536 + DATA_OVERHEAD;

/// Where a path's datagrams go: which local socket, which peer address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEndpoint {
    /// Local socket index.
    pub socket: usize,
    /// The peer's address.
    pub remote: SocketAddr,
}

/// Counters a link keeps beyond the engine's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Engine datagrams that could not be sent: no usable keys or no endpoint yet.
    pub unsent: u64,
    /// Inner packets delivered whose source the peer may not use.
    pub spoofed: u64,
    /// Inner packets refused by the engine (queue full, too large, no session).
    pub refused: u64,
}

/// One peer's state. Every field is private: the key rotation, the pending fresh session
/// and the path endpoints change only through the methods below, which keep the
/// invariants of the module docs.
#[derive(Debug)]
pub struct Link {
    session: Option<Session>,
    session_id: u32,
    current: Option<Keypair>,
    previous: Option<Keypair>,
    next: Option<Keypair>,
    /// Server side: the engine session id to start afresh when `next` is confirmed, if
    /// the handshake that made `next` named a session the server does not have (it was
    /// answered with `FLAG_FRESH_SESSION`). Set and cleared with `next`.
    next_session: Option<u32>,
    endpoints: [Option<PathEndpoint>; MAX_PATHS],
    handshakes: u64,
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
}

/// A data message that opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The engine datagram's length (at `msg[DATA_HEADER_LEN..]`).
    pub len: usize,
    /// Index of the keys that fell off the end when `next` became current.
    pub dropped: Option<u32>,
    /// The message was the first under `next`: it confirmed the handshake.
    pub confirmed: bool,
    /// With `confirmed`: the fresh engine session the handshake asked for (the
    /// `next_session` that was pending with `next`).
    pub fresh_session: Option<u32>,
}

/// Why a data message was dropped (for the drop counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataDrop {
    /// No keys with that index.
    UnknownIndex,
    /// Replayed, too old, or keys expired.
    Replayed,
    /// Failed authentication.
    Auth,
}

impl Link {
    /// A link with no keys and no engine session yet; `session_id` names the engine
    /// session it will run (the client's choice; the server learns it from a handshake).
    pub fn new(
        allowed_sources: Option<Vec<IpNet>>,
        path_names: Vec<String>,
        session_id: u32,
    ) -> Link {
        Link {
            session: None,
            session_id,
            current: None,
            previous: None,
            next: None,
            next_session: None,
            endpoints: [None; MAX_PATHS],
            handshakes: 0,
            counters: LinkCounters::default(),
            allowed_sources,
            path_names,
            scratch: vec![0; SCRATCH],
            engine_buf: vec![0; SCRATCH],
            log_refused: LogLimiter::new(1.0),
            log_roam: LogLimiter::new(1.0),
        }
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
        self.current.as_ref()
    }

    /// When each keypair held reaches the reject limit (timers).
    pub fn key_expiries(&self) -> impl Iterator<Item = Time> + '_ {
        [&self.current, &self.previous, &self.next]
            .into_iter()
            .flatten()
            .map(|k| k.created + crate::crypto::keypair::REJECT_AFTER_TIME)
    }

    /// Completed handshakes.
    pub fn handshakes(&self) -> u64 {
        self.handshakes
    }

    /// Counters beyond the engine's.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Fixes path `i`'s endpoint (the client knows its paths from its configuration).
    pub fn fix_endpoint(&mut self, i: usize, endpoint: PathEndpoint) {
        if let Some(slot) = self.endpoints.get_mut(i) {
            *slot = Some(endpoint);
        }
    }

    /// Server side: keys from an answered handshake wait in `next` until the peer's first
    /// data message under them confirms them; so does the fresh engine session the
    /// handshake asked for, if any. Returns the index of the `next` keys they replace.
    pub fn stage_next(&mut self, keys: Keypair, fresh_session: Option<u32>) -> Option<u32> {
        let replaced = self.next.take().map(|k| k.local_index);
        self.next = Some(keys);
        self.next_session = fresh_session;
        replaced
    }

    /// Runs `session` (with id `session_id`) from now on, replacing any other; the path
    /// endpoints of a server-side link are learned anew (`forget_endpoints`). Returns
    /// whether a session was replaced.
    pub fn start_session(&mut self, session: Session, session_id: u32) -> bool {
        let replaced = self.session.replace(session).is_some();
        self.session_id = session_id;
        replaced
    }

    /// Drops the engine session (its peer has left it).
    pub fn drop_session(&mut self) {
        self.session = None;
    }

    /// Forgets every path endpoint (a fresh session learns them again).
    pub fn forget_endpoints(&mut self) {
        self.endpoints = [None; MAX_PATHS];
    }

    /// Adds `path` to the engine session if it is new; `Ok(true)` if it was added.
    pub fn ensure_path(&mut self, now: Time, path: PathId) -> Result<bool, PathError> {
        let Some(session) = self.session.as_mut() else {
            return Ok(false);
        };
        if session.path_ids().any(|id| id == path) {
            return Ok(false);
        }
        session.add_path(now, path, PathHints::default())?;
        Ok(true)
    }

    /// Installs confirmed keys as current (the old current becomes previous).
    /// Returns the index of the keypair that fell off the end, if any.
    pub fn install_current(&mut self, keys: Keypair) -> Option<u32> {
        let dropped = self.previous.take().map(|k| k.local_index);
        self.previous = self.current.take();
        self.current = Some(keys);
        self.handshakes += 1;
        dropped
    }

    /// Opens a data message in place with the keys it names. A message under `next`
    /// confirms it: `next` becomes current, and the caller starts the fresh engine
    /// session it may have been waiting for.
    pub fn open(
        &mut self,
        now: Time,
        receiver: u32,
        counter: u64,
        msg: &mut [u8],
    ) -> Result<Opened, DataDrop> {
        let slot = [&mut self.current, &mut self.previous, &mut self.next]
            .into_iter()
            .position(|k| k.as_ref().is_some_and(|k| k.local_index == receiver))
            .ok_or(DataDrop::UnknownIndex)?;
        let keys = match slot {
            0 => self.current.as_mut(),
            1 => self.previous.as_mut(),
            _ => self.next.as_mut(),
        }
        .ok_or(DataDrop::UnknownIndex)?;
        let n = keys.open(now, counter, msg).map_err(|e| match e {
            OpenError::Auth => DataDrop::Auth,
            OpenError::Expired | OpenError::Replayed => DataDrop::Replayed,
        })?;
        let mut opened = Opened {
            len: n,
            dropped: None,
            confirmed: false,
            fresh_session: None,
        };
        if slot == 2
            && let Some(confirmed) = self.next.take()
        {
            opened.dropped = self.install_current(confirmed);
            opened.confirmed = true;
            opened.fresh_session = self.next_session.take();
        }
        Ok(opened)
    }

    /// Forgets keys older than the reject limit; returns their indices.
    pub fn expire_keys(&mut self, now: Time) -> Vec<u32> {
        let mut gone = Vec::new();
        for slot in [&mut self.current, &mut self.previous, &mut self.next] {
            if slot.as_ref().is_some_and(|k| !k.is_usable(now))
                && let Some(k) = slot.take()
            {
                gone.push(k.local_index);
            }
        }
        if self.next.is_none() {
            self.next_session = None;
        }
        gone
    }

    /// Records that an authenticated datagram for `path` came from `remote` on `socket`.
    pub fn learn_endpoint(&mut self, now: Time, path: PathId, socket: usize, remote: SocketAddr) {
        let Some(slot) = self.endpoints.get_mut(usize::from(path.0)) else {
            return;
        };
        let new = PathEndpoint { socket, remote };
        if *slot != Some(new) {
            if let Some(old) = *slot {
                if let Some(suppressed) = self.log_roam.check(now) {
                    info!(%path, from = %old.remote, to = %remote, suppressed, "path moved to a new address (authenticated)");
                }
            } else {
                debug!(%path, %remote, "path endpoint learned");
            }
            *slot = Some(new);
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

    /// Hands an opened engine datagram (in `msg[DATA_HEADER_LEN..DATA_HEADER_LEN + len]`)
    /// to the session and drives it.
    pub fn receive(
        &mut self,
        now: Time,
        path: PathId,
        msg: &[u8],
        len: usize,
        out: &mut impl Outputs,
    ) {
        if let Some(session) = self.session.as_mut() {
            let datagram = &msg[DATA_HEADER_LEN..DATA_HEADER_LEN + len];
            if let Err(e) = session.handle_datagram(now, path, datagram) {
                debug!(%path, error = %e, "engine ignored a datagram");
            }
        }
        self.drive(now, out);
    }

    /// Runs the engine's drain loop, sealing every transmit with the current keys.
    /// Returns the engine's next deadline.
    pub fn drive(&mut self, now: Time, out: &mut impl Outputs) -> Option<Time> {
        let session = self.session.as_mut()?;
        let mut io = SealIo {
            keys: self.current.as_mut(),
            endpoints: &self.endpoints,
            out,
            tx: &mut self.scratch,
            allowed: self.allowed_sources.as_deref(),
            counters: &mut self.counters,
            names: &self.path_names,
        };
        plait_proto::drive(session, now, &mut io, &mut self.engine_buf)
    }

    /// The engine's next deadline, if there is a session.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.session.as_ref().and_then(Session::poll_timeout)
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
            established: self.current.as_ref().is_some_and(|k| k.is_usable(now)),
            session_id: self.session_id,
            key_age_s: self
                .current
                .as_ref()
                .map_or(0.0, |k| k.age(now).as_secs_f64()),
            handshakes: self.handshakes,
            scheduler: scheduler.to_string(),
            ..SessionStatus::default()
        };
        let Some(session) = &self.session else {
            return s;
        };
        let stats = session.stats();
        s.reorder_depth = session.reorder_depth();
        s.send_queue = session.send_queue_len();
        s.delivered = stats.delivered;
        s.queue_full = stats.inner_queue_full;
        let r = session.reorder_stats();
        s.late = r.late;
        s.lost = crate::control::snapshot::LossCounters {
            predecessor: r.lost_predecessor,
            comparison: r.lost_comparison,
            timer: r.lost_timer,
            overflow: r.lost_overflow,
            repair_requests: r.repair_requests,
            repaired: r.repaired,
            repairs_sent: stats.repairs_sent,
        };
        for view in session.path_views() {
            let i = usize::from(view.id.0);
            let st = session.path_stats(view.id).unwrap_or_default();
            let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1e3);
            s.paths.push(PathStatus {
                id: view.id.0,
                name: self
                    .path_names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("path{i}")),
                local: None,
                remote: self.endpoints[i].map(|e| e.remote.to_string()),
                state: format!("{:?}", view.state).to_lowercase(),
                srtt_ms: ms(view.srtt),
                min_rtt_ms: ms(view.min_rtt),
                owd_ms: ms(view.base_owd),
                rate_mbit: view
                    .train_rate
                    .or_else(|| view.rate_estimate())
                    .map(|r| r * 8.0 / 1e6),
                loss: view.loss_rate,
                tx_bytes: st.sent_bytes,
                tx_packets: st.sent_datagrams,
                rx_bytes: st.recv_bytes,
                rx_packets: st.recv_datagrams,
            });
        }
        s
    }
}

struct SealIo<'a, O: Outputs> {
    keys: Option<&'a mut Keypair>,
    endpoints: &'a [Option<PathEndpoint>; MAX_PATHS],
    out: &'a mut O,
    tx: &'a mut [u8],
    allowed: Option<&'a [IpNet]>,
    counters: &'a mut LinkCounters,
    names: &'a [String],
}

impl<O: Outputs> plait_proto::Io for SealIo<'_, O> {
    fn transmit(&mut self, now: Time, path: PathId, datagram: &[u8]) {
        let (Some(keys), Some(ep)) = (
            self.keys.as_deref_mut(),
            self.endpoints.get(usize::from(path.0)).copied().flatten(),
        ) else {
            self.counters.unsent += 1;
            return;
        };
        let len = datagram.len();
        let Some(body) = self.tx.get_mut(DATA_HEADER_LEN..DATA_HEADER_LEN + len) else {
            self.counters.unsent += 1;
            return;
        };
        body.copy_from_slice(datagram);
        match keys.seal(now, self.tx, len) {
            Ok(n) => self.out.send_udp(ep.socket, ep.remote, &self.tx[..n]),
            Err(_) => self.counters.unsent += 1,
        }
    }

    fn deliver(&mut self, _now: Time, packet: &[u8], _info: &Delivery) {
        if let Some(allowed) = self.allowed {
            let ok = super::inner::addresses(packet)
                .is_some_and(|(src, _)| allowed.iter().any(|net| net.contains(&src)));
            if !ok {
                self.counters.spoofed += 1;
                return;
            }
        }
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
            }
        }
    }
}
