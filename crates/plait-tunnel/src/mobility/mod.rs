//! Pattern paths: a client `[[path]]` with `devices = "wlan*"` (or `"default-route"`)
//! stands for one path per matching interface, opened when the interface appears with a
//! route to the server and closed when it goes (docs/tunnel-config.md, docs/protocol.md#binding).
//!
//! This module decides, sans-IO, which paths to open and close from what the kernel says
//! ([`Kernel`]: interfaces and routes, read by `crate::io::netwatch`); the daemon opens
//! and closes the sockets and the endpoint announces the changes to the server.
//!
//! Invariants:
//! - At most `plait_proto::MAX_PATHS` paths exist at once, fixed and pattern together;
//!   fixed paths keep ids `0..fixed` for the daemon's life, a pattern path takes the
//!   lowest free id when it opens and gives it back when it closes.
//! - One path per interface: an interface matched by several patterns belongs to the
//!   first in file order; the TUN device, `lo` and the devices of fixed paths are never
//!   matched.
//! - An interface refused for want of a free id is reported once ([`Change::Refused`])
//!   until it stops qualifying or is opened; nothing else happens to it.
//! - Nothing here reads a clock or the kernel.

mod glob;
pub mod signal;
#[cfg(test)]
mod tests;

use std::net::IpAddr;

use ipnet::IpNet;
use plait_proto::MAX_PATHS;

pub use glob::glob_match;

/// The `devices` value meaning "every interface with a default route".
pub const DEFAULT_ROUTE: &str = "default-route";

/// Which interfaces a pattern path opens paths on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DevicePattern {
    /// Interfaces whose name matches this glob (`*` any run, `?` any one character) and
    /// that have a route covering the server's address.
    Glob(String),
    /// Interfaces with a default route of the server's family.
    DefaultRoute,
}

impl std::fmt::Display for DevicePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DevicePattern::Glob(g) => f.write_str(g),
            DevicePattern::DefaultRoute => f.write_str(DEFAULT_ROUTE),
        }
    }
}

/// One interface as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its index.
    pub index: u32,
    /// Its name.
    pub name: String,
    /// Up (`IFF_UP`) with a carrier (`IFF_LOWER_UP`).
    pub up: bool,
}

/// One unicast route as the kernel reports it: where it leads and through which interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The destination prefix (`0.0.0.0/0` or `::/0` for a default route).
    pub dst: IpNet,
    /// The interface the route leaves through.
    pub oif: u32,
}

/// The kernel's view: every interface, and the unicast routes (all tables but `local`)
/// that matter: default routes and those covering a pattern's server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kernel {
    /// The interfaces.
    pub interfaces: Vec<Interface>,
    /// The routes.
    pub routes: Vec<Route>,
}

/// One pattern `[[path]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternSpec {
    /// Its `devices`.
    pub pattern: DevicePattern,
    /// The server's address on its paths (resolved, if the config gave a name).
    pub server: IpAddr,
}

/// Why a pattern path closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The interface no longer exists (or was made anew under the same name).
    Gone,
    /// It is down or has no carrier.
    Down,
    /// It has no route to the server (or, for `default-route`, no default route).
    NoRoute,
}

impl CloseReason {
    /// Words for logs and `plait status`.
    pub fn describe(self) -> &'static str {
        match self {
            CloseReason::Gone => "interface gone",
            CloseReason::Down => "interface down or without carrier",
            CloseReason::NoRoute => "no route to the server through it",
        }
    }
}

/// What [`Planner::plan`] decided; the caller applies each in order (closes first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Close pattern path `id` (withdraw it, close its socket).
    Close {
        /// The path id, free again.
        id: u8,
        /// The pattern it belonged to.
        pattern: usize,
        /// The interface it was bound to.
        ifname: String,
        /// Why.
        why: CloseReason,
    },
    /// Open a path with id `id` for pattern `pattern` on interface `ifname`.
    Open {
        /// The path id (the lowest free one).
        id: u8,
        /// Index among the pattern specs.
        pattern: usize,
        /// The interface to bind to.
        ifname: String,
    },
    /// `ifname` qualifies for `pattern` but every path id is in use.
    Refused {
        /// Index among the pattern specs.
        pattern: usize,
        /// The interface.
        ifname: String,
    },
}

/// A pattern path that is open.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OpenPath {
    pattern: usize,
    ifname: String,
    ifindex: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Slot {
    Free,
    Fixed,
    Pattern(OpenPath),
}

/// Which pattern paths are open, on which ids, and which interfaces should have one.
#[derive(Clone, Debug)]
pub struct Planner {
    specs: Vec<PatternSpec>,
    excluded: Vec<String>,
    slots: Vec<Slot>,
    /// Interfaces (pattern, name) reported refused and still waiting.
    refused: Vec<(usize, String)>,
}

impl Planner {
    /// `fixed` fixed paths (ids `0..fixed`), the pattern paths' specs in file order, and
    /// interface names never matched (the TUN device, fixed paths' devices; `lo` always).
    pub fn new(fixed: usize, specs: Vec<PatternSpec>, excluded: Vec<String>) -> Planner {
        let slots = (0..MAX_PATHS)
            .map(|i| if i < fixed { Slot::Fixed } else { Slot::Free })
            .collect();
        Planner {
            specs,
            excluded,
            slots,
            refused: Vec::new(),
        }
    }

    /// Whether there is any pattern to watch.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The pattern specs.
    pub fn specs(&self) -> &[PatternSpec] {
        &self.specs
    }

    /// Pattern `pattern`'s server now resolves to `server`. Its open paths are judged
    /// against the new address at the next [`Planner::plan`]; the caller moves them.
    pub fn set_server(&mut self, pattern: usize, server: IpAddr) {
        if let Some(s) = self.specs.get_mut(pattern) {
            s.server = server;
        }
    }

    /// The open pattern paths: (id, pattern, interface).
    pub fn open_paths(&self) -> impl Iterator<Item = (u8, usize, &str)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Pattern(p) => Some((u8::try_from(i).ok()?, p.pattern, p.ifname.as_str())),
            _ => None,
        })
    }

    /// Why `iface` does not (or `None`: does) qualify for `pattern`'s paths.
    fn disqualified(&self, k: &Kernel, pattern: usize, iface: &Interface) -> Option<CloseReason> {
        let spec = self.specs.get(pattern)?;
        if !iface.up {
            return Some(CloseReason::Down);
        }
        let via = |r: &&Route| r.oif == iface.index;
        let routed = match spec.pattern {
            DevicePattern::Glob(_) => k
                .routes
                .iter()
                .filter(via)
                .any(|r| r.dst.contains(&spec.server)),
            DevicePattern::DefaultRoute => k.routes.iter().filter(via).any(|r| {
                r.dst.prefix_len() == 0 && r.dst.addr().is_ipv4() == spec.server.is_ipv4()
            }),
        };
        (!routed).then_some(CloseReason::NoRoute)
    }

    fn name_matches(&self, pattern: usize, name: &str) -> bool {
        if name == "lo" || self.excluded.iter().any(|e| e == name) {
            return false;
        }
        match self.specs.get(pattern).map(|s| &s.pattern) {
            Some(DevicePattern::Glob(g)) => glob_match(g, name),
            Some(DevicePattern::DefaultRoute) => true,
            None => false,
        }
    }

    /// Compares the open pattern paths with `k` and returns what to change: closes first
    /// (their ids are free for the opens that follow), then opens in pattern order and,
    /// within a pattern, in interface index order, each on the lowest free id.
    pub fn plan(&mut self, k: &Kernel) -> Vec<Change> {
        let mut changes = Vec::new();
        for i in 0..self.slots.len() {
            let Slot::Pattern(open) = &self.slots[i] else {
                continue;
            };
            let why = match k.interfaces.iter().find(|f| f.index == open.ifindex) {
                Some(f) if f.name == open.ifname => self.disqualified(k, open.pattern, f),
                _ => Some(CloseReason::Gone),
            };
            if let (Some(why), Ok(id)) = (why, u8::try_from(i)) {
                changes.push(Change::Close {
                    id,
                    pattern: open.pattern,
                    ifname: open.ifname.clone(),
                    why,
                });
                self.slots[i] = Slot::Free;
            }
        }
        let mut interfaces: Vec<&Interface> = k.interfaces.iter().collect();
        interfaces.sort_by_key(|f| f.index);
        let mut still_refused = Vec::new();
        for pattern in 0..self.specs.len() {
            for iface in &interfaces {
                if !self.name_matches(pattern, &iface.name)
                    || self.disqualified(k, pattern, iface).is_some()
                    || self.is_open(iface.index)
                {
                    continue;
                }
                let free = self.slots.iter().position(|s| *s == Slot::Free);
                match free.and_then(|i| u8::try_from(i).ok()) {
                    Some(id) => {
                        self.slots[usize::from(id)] = Slot::Pattern(OpenPath {
                            pattern,
                            ifname: iface.name.clone(),
                            ifindex: iface.index,
                        });
                        changes.push(Change::Open {
                            id,
                            pattern,
                            ifname: iface.name.clone(),
                        });
                    }
                    None => {
                        let key = (pattern, iface.name.clone());
                        if !self.refused.contains(&key) {
                            changes.push(Change::Refused {
                                pattern,
                                ifname: iface.name.clone(),
                            });
                        }
                        still_refused.push(key);
                    }
                }
            }
        }
        self.refused = still_refused;
        changes
    }

    /// Gives id `id` back (its socket could not be opened): the interface is tried again
    /// at the next [`Planner::plan`].
    pub fn release(&mut self, id: u8) {
        if let Some(slot) = self.slots.get_mut(usize::from(id))
            && matches!(slot, Slot::Pattern(_))
        {
            *slot = Slot::Free;
        }
    }

    fn is_open(&self, ifindex: u32) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s, Slot::Pattern(p) if p.ifindex == ifindex))
    }
}
