//! A link's part in registration (docs/protocol.md#registration; seed MMS §II-B): the
//! server keeps the client's latest registration, applies each path's priority to the
//! engine session and answers queries; the client sends its registrations and queries.
//!
//! Invariants:
//! - The server applies a registration only if its number is above the one it holds, and
//!   acknowledges it either way (REGISTER_ACK, 39 bytes, never more than the 38 or more
//!   it answers), to the address it came from.
//! - A QUERY is answered (with up to 566 bytes) only to a validated address of one of
//!   the client's paths, so the answer cannot be aimed at anyone else.
//! - A registration whose client address on a path is not of the family the server sees
//!   the path at is refused whole and counted; nothing of it is applied.

use plait_proto::path::PathHints;
use plait_proto::{PathId, Time};
use tracing::{debug, info};

use super::super::Outputs;
use super::super::validation::{PathAddress, PathEndpoint};
use super::Link;
use crate::control::snapshot::{RegisteredPath, RegistrationStatus};
use crate::message::{PATH_TOKEN_LEN, PathFrame, QUERY, REGISTER, REGISTER_ACK, REGISTRATION};
use crate::registration::{CostClass, Registration, RegistrationError, encode, signal_fraction};

/// What the engine session is told of `path` (docs/protocol.md#registration): the
/// experiment's hints for it (`hints`, empty in the daemon) with the priority and cost class
/// of the client's registration over them (a metered path is an overflow path,
/// docs/protocol.md#overflow); and the link-layer signal, a fraction of full, if the client
/// sent one (docs/protocol.md#handover: the server judges it too, so it hands a weak path
/// over for what it sends as well).
pub(super) fn registered(
    registration: Option<&Registration>,
    hints: &[PathHints],
    path: PathId,
) -> (PathHints, Option<f64>) {
    let known = hints.get(usize::from(path.0)).copied().unwrap_or_default();
    let entry = registration.and_then(|r| r.entry(path.0));
    let hints = PathHints {
        priority: entry.map_or(known.priority, |e| e.attributes.priority),
        overflow: entry.map_or(known.overflow, |e| e.attributes.cost == CostClass::Metered),
        ..known
    };
    (
        hints,
        entry.and_then(|e| e.quality.signal).map(signal_fraction),
    )
}

impl Link {
    /// Server side: a REGISTER from `from` (docs/protocol.md#registration).
    pub(super) fn receive_registration(
        &mut self,
        now: Time,
        from: PathEndpoint,
        registration: Registration,
        out: &mut impl Outputs,
    ) {
        if let Err(e) = self.check_families(&registration) {
            self.counters.registrations_refused += 1;
            debug!(remote = %from.remote, error = %e, "registration refused");
            return;
        }
        let newer = self
            .registration
            .as_ref()
            .is_none_or(|r| registration.seq > r.seq);
        if newer {
            self.apply_registration(now, registration);
        }
        let ack = PathFrame::binding(
            REGISTER_ACK,
            0,
            self.registration.as_ref().map_or(0, |r| r.seq),
            0,
        );
        self.send_path_frame(now, from, &ack, out);
        self.drive(now, out);
    }

    /// Every client address in `registration` is of the family the server sees its path
    /// at (when it sees it at all).
    fn check_families(&self, registration: &Registration) -> Result<(), RegistrationError> {
        for e in &registration.entries {
            let seen = self
                .addresses
                .get(usize::from(e.path))
                .and_then(PathAddress::validated);
            if let (Some(local), Some(seen)) = (e.local, seen)
                && local.ip().to_canonical().is_ipv4() != seen.remote.ip().to_canonical().is_ipv4()
            {
                return Err(RegistrationError::WrongFamily {
                    path: e.path,
                    local,
                    seen: seen.remote,
                });
            }
        }
        Ok(())
    }

    fn apply_registration(&mut self, now: Time, registration: Registration) {
        self.counters.registrations += 1;
        let attributes_changed = self.registration.as_ref().is_none_or(|old| {
            let shape = |r: &Registration| {
                r.entries
                    .iter()
                    .map(|e| (e.path, e.available, e.backup, e.attributes, e.local))
                    .collect::<Vec<_>>()
            };
            shape(old) != shape(&registration)
        });
        if let Some(session) = self.session.as_mut() {
            let ids: Vec<PathId> = session.path_ids().collect();
            for id in ids {
                let (hints, signal) = registered(Some(&registration), &self.path_hints, id);
                // The path is in the session (listed just now): nothing to refuse.
                let _ = session.set_path_priority(now, id, hints.priority);
                let _ = session.set_path_overflow(now, id, hints.overflow);
                let _ = session.set_link_signal(id, signal);
            }
        }
        if attributes_changed {
            let summary: Vec<String> = registration
                .entries
                .iter()
                .map(|e| {
                    let a = e.attributes;
                    format!("{}:{}/{}/p{}", e.path, a.link, a.cost, a.priority)
                })
                .collect();
            info!(seq = registration.seq, paths = %summary.join(" "), "the client registered its paths");
        } else {
            debug!(
                seq = registration.seq,
                "the client updated its paths' quality"
            );
        }
        self.registration = Some(registration);
    }

    /// Server side: a QUERY from `from`, answered with the registration held (empty if
    /// none) if `from` is a validated address of one of the client's paths.
    pub(super) fn answer_query(&mut self, now: Time, from: PathEndpoint, out: &mut impl Outputs) {
        let validated = self.addresses.iter().any(|a| a.validated() == Some(from));
        if !validated {
            self.counters.path_frames_ignored += 1;
            return;
        }
        let held = self.registration.clone().unwrap_or_default();
        self.send_control(now, from, &encode(REGISTRATION, &held), out);
    }

    /// Client side: sends `registration` on one of `paths` that has a server address:
    /// the first for the first try, the next for the next, round the list.
    pub fn send_registration(
        &mut self,
        now: Time,
        registration: &Registration,
        tries: u32,
        paths: impl Iterator<Item = usize>,
        out: &mut impl Outputs,
    ) {
        let usable: Vec<PathEndpoint> = paths
            .filter_map(|p| self.addresses.get(p).and_then(PathAddress::validated))
            .collect();
        let Some(&to) = usable.get(tries as usize % usable.len().max(1)) else {
            return;
        };
        self.send_control(now, to, &encode(REGISTER, registration), out);
    }

    /// Client side: sends a QUERY on the first of `paths` with a server address.
    pub fn send_query(
        &mut self,
        now: Time,
        mut paths: impl Iterator<Item = usize>,
        out: &mut impl Outputs,
    ) {
        let first = paths.find_map(|p| {
            let to = self.addresses.get(p).and_then(PathAddress::validated)?;
            Some((u8::try_from(p).ok()?, to))
        });
        if let Some((path, to)) = first {
            let query = PathFrame {
                kind: QUERY,
                path,
                token: [0; PATH_TOKEN_LEN],
            };
            self.send_path_frame(now, to, &query, out);
        }
    }

    /// Server side: the registration held, for `plait status`.
    pub fn registration_status(&self) -> Option<RegistrationStatus> {
        self.registration
            .as_ref()
            .map(|r| registration_status(r, r.seq, None))
    }
}

/// `registration` as `plait status` shows it; `acked` and `server` as
/// [`RegistrationStatus`] says.
pub fn registration_status(
    registration: &Registration,
    acked: u64,
    server: Option<&Registration>,
) -> RegistrationStatus {
    RegistrationStatus {
        seq: registration.seq,
        acked,
        server_seq: server.map(|s| s.seq),
        server_agrees: server.map(|s| {
            s.seq == registration.seq
                && s.entries.len() == registration.entries.len()
                && s.entries.iter().zip(&registration.entries).all(|(a, b)| {
                    (a.path, a.available, a.backup, a.attributes, a.local)
                        == (b.path, b.available, b.backup, b.attributes, b.local)
                })
        }),
        paths: registration
            .entries
            .iter()
            .map(|e| RegisteredPath {
                id: e.path,
                available: e.available,
                backup: e.backup,
                link: e.attributes.link.name().to_owned(),
                cost: e.attributes.cost.name().to_owned(),
                priority: e.attributes.priority,
                local: e.local.map(|a| a.to_string()),
                srtt_ms: e.quality.srtt_ms,
                loss_pct: e.quality.loss_bp.map(|l| f64::from(l) / 100.0),
                rate_mbit: e.quality.rate_kbit.map(|r| f64::from(r) / 1000.0),
            })
            .collect(),
    }
}
