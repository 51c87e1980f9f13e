//! Address registration: the client's set of paths with each one's attributes and
//! traffic condition, held by the server per client and answered to a query
//! (docs/protocol.md#registration; seed MMS §II-B, registration, query and binding
//! updates, without SIP).
//!
//! A registration lists, for each path the client has, its link type, cost class and
//! priority (from the configuration), the address the client sends from (its care-of
//! address, when it knows it), whether its link works, and its measured quality (smoothed
//! RTT, loss, delivery rate, and the link-layer signal where the client reads one). The
//! server keeps the latest one per client, applies each path's priority to its engine
//! session (so the session runs on the preferred subset both ways), makes each metered
//! path an overflow path there (docs/protocol.md#overflow) and gives it each path's signal
//! for the handover (docs/protocol.md#handover), shows it in `plait status`, and answers a
//! QUERY with what it holds.
//!
//! Invariants:
//! - A [`Registration`] has at most [`MAX_PATHS`] entries, path ids below [`MAX_PATHS`],
//!   each id once, in ascending order; [`Registration::decode`] refuses anything else
//!   with a typed [`RegistrationError`] and never allocates more than that bound.
//! - Its encoding is at most [`REGISTRATION_MAX_LEN`] bytes, so the path-control message
//!   that carries it fits any path MTU plait accepts.

mod registrar;
mod wire;

use std::fmt;
use std::net::SocketAddr;

use plait_proto::path::{HANDBACK_SIGNAL_MARGIN, HandoverConfig, signal_under};

pub use registrar::{QUALITY_REFRESH, Registrar};
pub use wire::{
    ENTRY_LEN, REGISTRATION_HEADER_LEN, REGISTRATION_MAX_LEN, RegistrationError, decode, encode,
};

/// Most paths a registration names (the engine's path limit).
pub const MAX_PATHS: usize = plait_proto::MAX_PATHS;

/// Largest priority (eight levels, 0 preferred: docs/protocol.md#priority).
pub const MAX_PRIORITY: u8 = plait_proto::path::MAX_PRIORITY;

/// What kind of link a path runs over (configuration: `[[path]] link`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// Not said.
    #[default]
    Unspecified,
    /// Ethernet, fibre, DSL, cable.
    Wired,
    /// Wi-Fi.
    Wifi,
    /// LTE, 5G.
    Cellular,
    /// Satellite.
    Satellite,
}

impl LinkKind {
    /// Every kind, in wire order.
    pub const ALL: [LinkKind; 5] = [
        LinkKind::Unspecified,
        LinkKind::Wired,
        LinkKind::Wifi,
        LinkKind::Cellular,
        LinkKind::Satellite,
    ];

    /// The configuration and status name.
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Unspecified => "unspecified",
            LinkKind::Wired => "wired",
            LinkKind::Wifi => "wifi",
            LinkKind::Cellular => "cellular",
            LinkKind::Satellite => "satellite",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<LinkKind> {
        LinkKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What using a path costs (configuration: `[[path]] cost`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CostClass {
    /// Flat rate: use freely.
    #[default]
    Unmetered,
    /// Paid by the byte (a metered LTE or satellite plan): an overflow path at both ends
    /// (docs/protocol.md#overflow), with an optional byte budget at the client.
    Metered,
}

impl CostClass {
    /// Every class, in wire order.
    pub const ALL: [CostClass; 2] = [CostClass::Unmetered, CostClass::Metered];

    /// The configuration and status name.
    pub fn name(self) -> &'static str {
        match self {
            CostClass::Unmetered => "unmetered",
            CostClass::Metered => "metered",
        }
    }

    /// The class named `name`, if any.
    pub fn from_name(name: &str) -> Option<CostClass> {
        CostClass::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for CostClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the configuration says of a path, beside its addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathAttributes {
    /// Its link type.
    pub link: LinkKind,
    /// Its cost class.
    pub cost: CostClass,
    /// Its priority within its class, 0 (preferred) to [`MAX_PRIORITY`].
    pub priority: u8,
}

/// A path's traffic condition as its sender measures it (seed MMS §II-B: a binding
/// update carries "the traffic condition" of each address). `None`: not measured yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quality {
    /// Smoothed round-trip time, milliseconds (at most 65,534).
    pub srtt_ms: Option<u16>,
    /// Smoothed loss, in units of 0.01 % (0 to 10,000).
    pub loss_bp: Option<u16>,
    /// Estimated rate, kbit/s.
    pub rate_kbit: Option<u32>,
    /// Link-layer signal where the client reads one (docs/protocol.md#handover, "signal"),
    /// in steps of 0.5 % of the driver's scale, rounded down: 0 to [`SIGNAL_STEPS`].
    pub signal: Option<u8>,
}

/// A signal of 1 (the top of the driver's scale) in [`Quality::signal`]'s steps.
pub const SIGNAL_STEPS: u8 = 200;

/// A signal of 0 to 1 in [`Quality::signal`]'s steps, rounded down: a signal under the
/// engine's weak bound stays under it at the server. NaN is no signal.
pub fn signal_steps(signal: f64) -> Option<u8> {
    (!signal.is_nan()).then(|| (signal.clamp(0.0, 1.0) * f64::from(SIGNAL_STEPS)).floor() as u8)
}

/// [`Quality::signal`]'s steps as 0 to 1.
pub fn signal_fraction(steps: u8) -> f64 {
    f64::from(steps.min(SIGNAL_STEPS)) / f64::from(SIGNAL_STEPS)
}

impl Quality {
    /// Whether `self` differs enough from `earlier` to be worth a new registration: an
    /// RTT or rate that moved by half or more (of the larger), a loss that moved by a
    /// percentage point or more, a signal by a tenth of the scale or more, or a figure
    /// that appeared or vanished. Rate estimates swing by a quarter from one second to the
    /// next on a loaded path; a report of each swing would cost more than it tells.
    pub fn differs_materially(&self, earlier: &Quality) -> bool {
        fn ratio_moved(a: Option<u64>, b: Option<u64>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => 2 * a.abs_diff(b) >= a.max(b).max(1),
                (a, b) => a.is_some() != b.is_some(),
            }
        }
        let loss_moved = match (self.loss_bp, earlier.loss_bp) {
            (Some(a), Some(b)) => a.abs_diff(b) >= 100,
            (a, b) => a.is_some() != b.is_some(),
        };
        let signal_moved = match (self.signal, earlier.signal) {
            (Some(a), Some(b)) => a.abs_diff(b) >= SIGNAL_STEPS / 10,
            (a, b) => a.is_some() != b.is_some(),
        };
        ratio_moved(self.srtt_ms.map(u64::from), earlier.srtt_ms.map(u64::from))
            || ratio_moved(
                self.rate_kbit.map(u64::from),
                earlier.rate_kbit.map(u64::from),
            )
            || loss_moved
            || signal_moved
    }

    /// Whether the signal crossed a bound of the engine's handover since `earlier` (the
    /// weak bound, or the bound a handed-over path comes back above), or appeared or
    /// vanished: the server's judgement of the path may change with it, so it must hear
    /// at once (docs/protocol.md#registration).
    pub fn signal_crossed(&self, earlier: &Quality) -> bool {
        // The engine's figures, as both daemons run them (`[engine]` has no setting for
        // them); a configurable bound would have to reach the registrar.
        let weak = HandoverConfig::default().weak_signal;
        let sides = |s: Option<u8>| {
            s.map(|s| {
                let s = signal_fraction(s);
                (
                    signal_under(s, weak),
                    signal_under(s, weak + HANDBACK_SIGNAL_MARGIN),
                )
            })
        };
        sides(self.signal) != sides(earlier.signal)
    }
}

/// One path in a registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The path id.
    pub path: u8,
    /// Whether the client's link for it works (docs/protocol.md#binding).
    pub available: bool,
    /// A backup path (docs/protocol.md#backup).
    pub backup: bool,
    /// Link type, cost class, priority.
    pub attributes: PathAttributes,
    /// The address the client sends from on this path, if it knows it (a socket bound to
    /// the wildcard address does not).
    pub local: Option<SocketAddr>,
    /// The client's measurements of the path.
    pub quality: Quality,
}

/// A client's path set (docs/protocol.md#registration): numbered, so the server applies
/// only a newer one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registration {
    /// Grows with every change; at most [`crate::message::BINDING_SEQ_MAX`].
    pub seq: u64,
    /// The paths, ascending by id, each once.
    pub entries: Vec<Entry>,
}

impl Registration {
    /// The entry of `path`, if any.
    pub fn entry(&self, path: u8) -> Option<&Entry> {
        self.entries.iter().find(|e| e.path == path)
    }
}

#[cfg(test)]
mod tests;
