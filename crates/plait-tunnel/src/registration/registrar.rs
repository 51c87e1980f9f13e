//! The client's side of registration (docs/protocol.md#registration): what its path set
//! is, when the server must hear it again, and what the server said it holds.
//!
//! Invariants:
//! - Every change of the path set (a path opened or closed, its link gone or back, its
//!   address learnt) makes a new registration with a higher number at once, and so does a
//!   link-layer signal that crossed a bound of the handover ([`Quality::signal_crossed`]:
//!   the server judges the path by it); a change of measured quality only when it is
//!   material ([`Quality::differs_materially`]) and [`QUALITY_REFRESH`] has passed since
//!   the last registration, so a steady path costs nothing and a fluttering one at most
//!   one registration per interval (a signal fluttering across a bound, at most one per
//!   quality sample: the client samples once a second).
//! - The latest registration goes on one path at a time, the next working path at each
//!   repetition ([`Registrar::due`] says which try it is), every [`REGISTRATION_RETRY`]
//!   until the server acknowledges its number; nothing is sent before the first session.
//!   One copy per change keeps the control plane off the data's way (each copy is a
//!   datagram the engine's schedule does not know about).
//! - Once the server acknowledged the registration of a fresh session, the client queries
//!   it once (repeated until answered) and keeps the answer for `plait status`.
//! - Memory is one record per path id; nothing here reads a clock.

use std::net::SocketAddr;
use std::time::Duration;

use plait_proto::Time;

use super::{Entry, MAX_PATHS, PathAttributes, Quality, Registration};
use crate::message::BINDING_SEQ_MAX;

/// How long the client waits for an acknowledgement (or a query's answer) before
/// sending again: the binding updates' interval (docs/protocol.md#binding).
pub const REGISTRATION_RETRY: Duration = crate::endpoint::binding::BINDING_RETRY;

/// The shortest interval between registrations made only because a path's measured
/// quality moved.
pub const QUALITY_REFRESH: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
struct PathRecord {
    attributes: PathAttributes,
    backup: bool,
    available: bool,
    local: Option<SocketAddr>,
    quality: Quality,
}

/// The client's registration state.
#[derive(Clone, Debug)]
pub struct Registrar {
    paths: [Option<PathRecord>; MAX_PATHS],
    /// The latest registration's number (0: none yet).
    seq: u64,
    /// The highest number the server acknowledged.
    acked: u64,
    /// Whether a session has started: nothing is sent before.
    active: bool,
    /// When the unacknowledged registration goes out again.
    resend_at: Option<Time>,
    /// How often the current registration has been sent.
    tries: u32,
    /// When the latest registration was made, and the quality it carried.
    made_at: Option<Time>,
    sent_quality: [Quality; MAX_PATHS],
    /// A query is wanted once the current registration is acknowledged.
    query_wanted: bool,
    /// When the unanswered query goes out again.
    query_at: Option<Time>,
    /// What the server answered to the latest query.
    server_view: Option<Registration>,
}

impl Default for Registrar {
    fn default() -> Self {
        Registrar::new()
    }
}

impl Registrar {
    /// No paths, nothing registered.
    pub fn new() -> Registrar {
        Registrar {
            paths: [None; MAX_PATHS],
            seq: 0,
            acked: 0,
            active: false,
            resend_at: None,
            tries: 0,
            made_at: None,
            sent_quality: [Quality::default(); MAX_PATHS],
            query_wanted: false,
            query_at: None,
            server_view: None,
        }
    }

    fn changed(&mut self, now: Time) {
        self.seq = (self.seq + 1).min(BINDING_SEQ_MAX);
        self.made_at = Some(now);
        for (sent, p) in self.sent_quality.iter_mut().zip(&self.paths) {
            *sent = p.map(|p| p.quality).unwrap_or_default();
        }
        if self.active {
            self.resend_at = Some(now);
            self.tries = 0;
        }
    }

    /// A path is on `id` now (`Some`) or no more (`None`). Out-of-range ids are ignored.
    pub fn set_path(
        &mut self,
        now: Time,
        id: usize,
        path: Option<(PathAttributes, bool /* backup */)>,
    ) {
        let Some(slot) = self.paths.get_mut(id) else {
            return;
        };
        let new = path.map(|(attributes, backup)| PathRecord {
            attributes,
            backup,
            available: true,
            local: None,
            quality: Quality::default(),
        });
        if slot.is_none() && new.is_none() {
            return;
        }
        *slot = new;
        self.changed(now);
    }

    /// Path `id` became a backup path or a primary one (a spent byte budget,
    /// docs/protocol.md#overflow): a new registration reports it.
    pub fn set_backup(&mut self, now: Time, id: usize, backup: bool) {
        let Some(Some(p)) = self.paths.get_mut(id) else {
            return;
        };
        if p.backup != backup {
            p.backup = backup;
            self.changed(now);
        }
    }

    /// The link of path `id` works (`available`) or not. A link that went forgets its
    /// signal: the reading was the old link's, and registered when the path comes back it
    /// could hand the path over at the server until the next reading.
    pub fn set_available(&mut self, now: Time, id: usize, available: bool) {
        let Some(Some(p)) = self.paths.get_mut(id) else {
            return;
        };
        if p.available != available {
            p.available = available;
            if !available {
                p.quality.signal = None;
            }
            self.changed(now);
        }
    }

    /// The client sends from `local` on path `id` (or does not know).
    pub fn set_local(&mut self, now: Time, id: usize, local: Option<SocketAddr>) {
        let Some(Some(p)) = self.paths.get_mut(id) else {
            return;
        };
        let local = local.filter(|a| !a.ip().is_unspecified());
        if p.local != local {
            p.local = local;
            self.changed(now);
        }
    }

    /// The client measured `quality` on path `id`. A signal that crossed a handover bound
    /// goes out at once; another material change once [`QUALITY_REFRESH`] has passed
    /// since the latest registration.
    pub fn note_quality(&mut self, now: Time, id: usize, quality: Quality) {
        if let Some(Some(p)) = self.paths.get_mut(id) {
            p.quality = quality;
        }
        let reported = || self.paths.iter().zip(&self.sent_quality);
        let crossed = reported().any(|(p, sent)| p.is_some_and(|p| p.quality.signal_crossed(sent)));
        let moved =
            reported().any(|(p, sent)| p.is_some_and(|p| p.quality.differs_materially(sent)));
        let quiet = self.made_at.is_none_or(|t| now >= t + QUALITY_REFRESH);
        if (crossed || moved && quiet) && self.active {
            self.changed(now);
        }
    }

    /// A fresh engine session: the server holds nothing of ours, so it hears the path set
    /// again (a new number) and is queried once it acknowledged it.
    pub fn on_fresh_session(&mut self, now: Time) {
        self.active = true;
        self.query_wanted = true;
        self.query_at = None;
        self.changed(now);
    }

    /// The server acknowledged registration `seq`.
    pub fn on_ack(&mut self, now: Time, seq: u64) {
        if seq > self.seq || seq <= self.acked {
            return;
        }
        self.acked = seq;
        if self.acked == self.seq {
            self.resend_at = None;
            if self.query_wanted {
                self.query_wanted = false;
                self.query_at = Some(now);
            }
        }
    }

    /// The server's answer to a query: what it holds of us.
    pub fn on_answer(&mut self, answer: Registration) {
        self.query_at = None;
        self.server_view = Some(answer);
    }

    /// The next time something is due.
    pub fn poll_timeout(&self) -> Option<Time> {
        match (self.resend_at, self.query_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What is due at `now`: the registration to send (repeated every
    /// [`REGISTRATION_RETRY`] until acknowledged) with how many times it went before (the
    /// caller sends each try on another path), and whether to send a query.
    pub fn due(&mut self, now: Time) -> (Option<(Registration, u32)>, bool) {
        let register = match self.resend_at {
            Some(at) if at <= now => {
                self.resend_at = Some(now + REGISTRATION_RETRY);
                self.tries = self.tries.saturating_add(1);
                Some((self.current(), self.tries - 1))
            }
            _ => None,
        };
        let query = match self.query_at {
            Some(at) if at <= now => {
                self.query_at = Some(now + REGISTRATION_RETRY);
                true
            }
            _ => false,
        };
        (register, query)
    }

    /// The path set as it is now, under the latest number.
    pub fn current(&self) -> Registration {
        let entries = self
            .paths
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = p.as_ref()?;
                Some(Entry {
                    path: u8::try_from(i).ok()?,
                    available: p.available,
                    backup: p.backup,
                    attributes: p.attributes,
                    local: p.local,
                    quality: p.quality,
                })
            })
            .collect();
        Registration {
            seq: self.seq,
            entries,
        }
    }

    /// The highest number the server acknowledged.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// What the server said it holds, at the latest query.
    pub fn server_view(&self) -> Option<&Registration> {
        self.server_view.as_ref()
    }
}
