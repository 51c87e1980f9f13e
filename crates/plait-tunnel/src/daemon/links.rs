//! The client's paths as its links come and go: fixed paths withdrawn and restored
//! (docs/protocol.md#binding), pattern paths opened and closed with their own sockets
//! (`crate::mobility`), and server names resolved again when the server stops answering.
//!
//! Invariants: a pattern path's socket exists exactly while the endpoint has the path
//! (opened before [`Driven::open_path`], closed after [`Driven::close_path`], so the
//! withdrawal goes out on the remaining paths first); a socket that cannot be opened gives
//! the id back and is tried again at the next change. At most one name lookup runs at a
//! time, on a thread of its own (getaddrinfo blocks; the loop never waits for it), at
//! most one every [`RESOLVE_EVERY`] and only while the server is not answering.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use tracing::{debug, info, warn};

use super::{Driven, RealOut};
use crate::config::{PathConfig, ServerAddr};
use crate::endpoint::{ClientPath, Now};
use crate::io::netwatch::NetWatch;
use crate::io::tun::Tun;
use crate::io::udp::{SendBatch, SocketOptions, UdpPath};
use crate::mobility::{Change, DevicePattern, PatternSpec, Planner};

/// Least time between two lookups of the server names.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(10);
/// How often the loop asks whether the server is answering, when it has names.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Resolves `name` to an address, of `family`'s family if given (IPv4 when `Some(true)`).
/// Blocks (getaddrinfo).
pub fn resolve(host: &str, port: u16, v4: Option<bool>) -> Result<SocketAddr, String> {
    let addrs = (host, port).to_socket_addrs().map_err(|e| e.to_string())?;
    let mut any = false;
    for a in addrs {
        any = true;
        if v4.is_none_or(|v4| a.is_ipv4() == v4) {
            return Ok(a);
        }
    }
    Err(if any {
        format!(
            "no {} address",
            if v4 == Some(true) { "IPv4" } else { "IPv6" }
        )
    } else {
        "no address".to_owned()
    })
}

/// Resolves every named server of `paths` (blocking; at start-up, before the sandbox).
/// Returns the addresses in path order.
pub fn resolve_at_start(paths: &[PathConfig]) -> Result<Vec<SocketAddr>, super::DaemonError> {
    paths
        .iter()
        .map(|p| match &p.server {
            ServerAddr::Ip(a) => Ok(*a),
            ServerAddr::Name { host, port } => {
                let a = resolve(host, *port, p.bind.map(|b| b.is_ipv4())).map_err(|why| {
                    super::DaemonError::Resolve {
                        path: p.name.clone(),
                        name: p.server.to_string(),
                        why,
                    }
                })?;
                info!(path = %p.name, name = %p.server, address = %a, "server name resolved");
                Ok(a)
            }
        })
        .collect()
}

/// One pattern `[[path]]`.
#[derive(Debug)]
struct PatternPath {
    name: String,
    server: SocketAddr,
    rate_hint: Option<f64>,
    backup: bool,
    /// Link type, cost class, priority (docs/protocol.md#registration).
    attributes: crate::registration::PathAttributes,
}

/// A named server and the paths that use it.
#[derive(Debug)]
struct Named {
    host: String,
    port: u16,
    /// The address now.
    addr: SocketAddr,
    /// Fixed path ids using it.
    fixed: Vec<usize>,
    /// Pattern indexes using it.
    patterns: Vec<usize>,
}

/// What the loop keeps for the client's links.
#[derive(Debug)]
pub(crate) struct ClientLinks {
    watch: Option<NetWatch>,
    planner: Planner,
    patterns: Vec<PatternPath>,
    named: Vec<Named>,
    fwmark: Option<u32>,
    lookup: Option<Receiver<Vec<Result<SocketAddr, String>>>>,
    last_lookup: Option<Instant>,
    last_check: Option<Instant>,
    /// The kernel's view could not be read once: said (later times at debug level).
    warned_unread: bool,
    /// Each fixed path's `device`, by path id.
    fixed_devices: Vec<Option<String>>,
}

impl ClientLinks {
    /// `paths` are the `[[path]]` tables with their servers' addresses (`servers`, in
    /// the same order); fixed paths take ids `0..` in order. `tun` and the fixed paths'
    /// devices are never matched by a pattern.
    pub(crate) fn new(
        paths: &[PathConfig],
        servers: &[SocketAddr],
        watch: Option<NetWatch>,
        fwmark: Option<u32>,
        tun: &str,
    ) -> ClientLinks {
        let mut fixed = 0;
        let mut specs = Vec::new();
        let mut patterns = Vec::new();
        let mut named: Vec<Named> = Vec::new();
        let mut excluded = vec![tun.to_owned()];
        let mut fixed_devices = Vec::new();
        for (p, &server) in paths.iter().zip(servers) {
            let (id_or_pattern, is_pattern) = match &p.devices {
                Some(pattern) => {
                    specs.push(PatternSpec {
                        pattern: pattern.clone(),
                        server: server.ip(),
                    });
                    patterns.push(PatternPath {
                        name: p.name.clone(),
                        server,
                        rate_hint: p.rate_mbit.map(|m| m * 1e6 / 8.0),
                        backup: p.backup,
                        attributes: p.attributes,
                    });
                    (patterns.len() - 1, true)
                }
                None => {
                    excluded.extend(p.device.clone());
                    fixed_devices.push(p.device.clone());
                    fixed += 1;
                    (fixed - 1, false)
                }
            };
            if let ServerAddr::Name { host, port } = &p.server {
                let i = match named
                    .iter()
                    .position(|n| n.host == *host && n.port == *port)
                {
                    Some(i) => i,
                    None => {
                        named.push(Named {
                            host: host.clone(),
                            port: *port,
                            addr: server,
                            fixed: Vec::new(),
                            patterns: Vec::new(),
                        });
                        named.len() - 1
                    }
                };
                if is_pattern {
                    named[i].patterns.push(id_or_pattern);
                } else {
                    named[i].fixed.push(id_or_pattern);
                }
            }
        }
        for s in &specs {
            let what = match &s.pattern {
                DevicePattern::Glob(g) => format!("interfaces matching `{g}`"),
                DevicePattern::DefaultRoute => "interfaces with a default route".to_owned(),
            };
            info!(server = %s.server, "watching {what} with a route to the server");
        }
        if !specs.is_empty() && watch.is_none() {
            warn!("pattern paths need netlink, which could not be opened: they will not open");
        }
        ClientLinks {
            watch,
            planner: Planner::new(fixed, specs, excluded),
            patterns,
            named,
            fwmark,
            lookup: None,
            last_lookup: None,
            last_check: None,
            warned_unread: false,
            fixed_devices,
        }
    }

    /// The paths bound to an interface, as (path id, interface): fixed paths with a
    /// `device`, and the open pattern paths.
    pub(crate) fn bound_interfaces(&self) -> Vec<(usize, String)> {
        let fixed = self
            .fixed_devices
            .iter()
            .enumerate()
            .filter_map(|(id, d)| Some((id, d.clone()?)));
        let patterns = self
            .planner
            .open_paths()
            .map(|(id, _, ifname)| (usize::from(id), ifname.to_owned()));
        fixed.chain(patterns).collect()
    }

    /// The netlink event socket, if any.
    pub(crate) fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        self.watch.as_ref().map(NetWatch::event_fd)
    }

    /// Reads the pending netlink events: whether to look again.
    pub(crate) fn drain(&mut self) -> bool {
        self.watch.as_mut().is_some_and(NetWatch::drain)
    }

    /// Whether the loop watches anything at all.
    pub(crate) fn watching(&self) -> bool {
        self.watch.is_some()
    }

    fn open_socket(&self, ifname: &str, server: SocketAddr) -> io::Result<UdpPath> {
        let bind: SocketAddr = match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        UdpPath::bind(
            bind,
            &SocketOptions {
                device: Some(ifname.to_owned()),
                fwmark: self.fwmark,
                reuse_port: false,
            },
        )
    }
}

/// The loop's sockets and what goes with each, for [`look`] to open and close.
pub(crate) struct Sockets<'a> {
    pub(crate) sockets: &'a mut [Option<UdpPath>],
    pub(crate) batches: &'a mut [SendBatch],
    pub(crate) ready: &'a mut [bool],
    pub(crate) registry: &'a Registry,
    pub(crate) first_token: usize,
    pub(crate) tun: &'a Tun,
    pub(crate) tun_write_errors: &'a mut u64,
}

impl Sockets<'_> {
    fn out(&mut self) -> RealOut<'_> {
        RealOut {
            sockets: self.sockets,
            batches: self.batches,
            tun: self.tun,
            tun_write_errors: self.tun_write_errors,
            // Path-set announcements: a few bytes, not counted in budgets.
            budgets: None,
        }
    }
}

/// Looks at the kernel's view again: fixed paths withdrawn or restored, pattern paths
/// closed and opened (sockets with them).
pub(crate) fn look(
    links: &mut ClientLinks,
    endpoint: &mut impl Driven,
    now: Now,
    s: &mut Sockets<'_>,
) {
    let Some(watch) = links.watch.as_mut() else {
        return;
    };
    let works = watch.evaluate();
    for (path, works) in works.into_iter().enumerate() {
        endpoint.set_path_available(now, path, works, &mut s.out());
    }
    if links.planner.is_empty() {
        return;
    }
    let servers: Vec<_> = links.planner.specs().iter().map(|s| s.server).collect();
    let Some(kernel) = watch.kernel(&servers) else {
        if links.warned_unread {
            debug!("the kernel's interfaces and routes could not be read: no path changes");
        } else {
            links.warned_unread = true;
            warn!(
                "the kernel's interfaces and routes could not be read (netlink timed out or the routing table is too large): pattern paths do not change until they can be"
            );
        }
        return;
    };
    for change in links.planner.plan(&kernel) {
        match change {
            Change::Close {
                id,
                pattern,
                ifname,
                why,
            } => {
                let id = usize::from(id);
                let why = format!("{}: {}", ifname, why.describe());
                endpoint.close_path(now, id, &why, &mut s.out());
                if let (Some(slot), Some(batch)) = (s.sockets.get_mut(id), s.batches.get_mut(id))
                    && let Some(mut socket) = slot.take()
                {
                    batch.flush(&mut socket);
                    let _ = s.registry.deregister(&mut SourceFd(&socket.as_raw_fd()));
                }
                debug!(pattern, id, "path socket closed");
            }
            Change::Open {
                id,
                pattern,
                ifname,
            } => {
                let Some(p) = links.patterns.get(pattern) else {
                    continue;
                };
                let name = format!("{}:{ifname}", p.name);
                let socket = links.open_socket(&ifname, p.server).and_then(|socket| {
                    s.registry.register(
                        &mut SourceFd(&socket.as_raw_fd()),
                        Token(s.first_token + usize::from(id)),
                        Interest::READABLE,
                    )?;
                    Ok(socket)
                });
                let socket = match socket {
                    Ok(socket) => socket,
                    Err(e) => {
                        warn!(path = %name, error = %e, "cannot open the path's socket: tried again at the next change");
                        links.planner.release(id);
                        continue;
                    }
                };
                let id = usize::from(id);
                info!(path = %name, local = %socket.local_addr(), server = %p.server, device = %ifname, "path socket");
                if let Some(b) = s.batches.get_mut(id) {
                    *b = SendBatch::new(socket.max_gso_segments());
                }
                if let Some(r) = s.ready.get_mut(id) {
                    *r = true;
                }
                if let Some(slot) = s.sockets.get_mut(id) {
                    *slot = Some(socket);
                }
                let path = ClientPath {
                    name,
                    server: p.server,
                    rate_hint: p.rate_hint,
                    backup: p.backup,
                    attributes: p.attributes,
                };
                let why = format!("{ifname} is up with a route to {}", p.server.ip());
                endpoint.open_path(now, id, path, &why, &mut s.out());
            }
            Change::Refused { pattern, ifname } => {
                let name = links
                    .patterns
                    .get(pattern)
                    .map_or(ifname.clone(), |p| format!("{}:{ifname}", p.name));
                let why = format!(
                    "every path id is in use (at most {} paths): {ifname} gets a path when one closes",
                    plait_proto::MAX_PATHS
                );
                warn!(path = %name, "no path for this interface: {why}");
                endpoint.note_refused(now, &name, &why);
            }
        }
    }
}

/// Server names: while the server is not answering (on some path), looks them up again (on a thread,
/// at most one every [`RESOLVE_EVERY`]); a name that now resolves to another address of
/// the same family moves its paths there. Returns whether anything moved (the links are
/// then looked at again: a pattern path may need another interface).
pub(crate) fn resolve_again(links: &mut ClientLinks, endpoint: &mut impl Driven, now: Now) -> bool {
    if links.named.is_empty() {
        return false;
    }
    if let Some(rx) = &links.lookup {
        let results = match rx.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Disconnected) => Vec::new(),
        };
        links.lookup = None;
        let mut moved = false;
        for (n, result) in links.named.iter_mut().zip(results) {
            match result {
                Ok(a) if a != n.addr => {
                    warn!(name = %format_args!("{}:{}", n.host, n.port), old = %n.addr, new = %a, "the server's name resolves to a new address: its paths follow");
                    n.addr = a;
                    moved = true;
                    for &id in &n.fixed {
                        endpoint.set_path_server(now, id, a);
                        if let Some(w) = links.watch.as_mut() {
                            w.set_server(id, a.ip());
                        }
                    }
                    for &pattern in &n.patterns {
                        if let Some(p) = links.patterns.get_mut(pattern) {
                            p.server = a;
                        }
                        links.planner.set_server(pattern, a.ip());
                        let open: Vec<u8> = links
                            .planner
                            .open_paths()
                            .filter(|(_, q, _)| *q == pattern)
                            .map(|(id, _, _)| id)
                            .collect();
                        for id in open {
                            endpoint.set_path_server(now, usize::from(id), a);
                        }
                    }
                }
                Ok(_) => debug!(name = %n.host, "the server's name resolves to the same address"),
                Err(why) => {
                    warn!(name = %format_args!("{}:{}", n.host, n.port), why, "cannot resolve the server's name again: keeping its address")
                }
            }
        }
        return moved;
    }
    // Asked a few times a second at most (the endpoint looks at every path's state).
    if links.last_check.is_some_and(|t| t.elapsed() < CHECK_EVERY)
        || links
            .last_lookup
            .is_some_and(|t| t.elapsed() < RESOLVE_EVERY)
    {
        return false;
    }
    links.last_check = Some(Instant::now());
    if !endpoint.server_unanswering() {
        return false;
    }
    links.last_lookup = Some(Instant::now());
    let jobs: Vec<(String, u16, bool)> = links
        .named
        .iter()
        .map(|n| (n.host.clone(), n.port, n.addr.is_ipv4()))
        .collect();
    info!(
        names = jobs.len(),
        "the server is not answering: resolving its name again"
    );
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("plait-resolve".into())
        .spawn(move || {
            let results = jobs
                .iter()
                .map(|(h, p, v4)| resolve(h, *p, Some(*v4)))
                .collect::<Vec<_>>();
            let _ = tx.send(results);
        });
    match spawned {
        Ok(_) => links.lookup = Some(rx),
        Err(e) => warn!(error = %e, "cannot start the name lookup"),
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client config with fresh keys, a TUN address and `paths` (`[[path]]` tables).
    fn client_with(paths: &str) -> crate::config::ClientConfig {
        crate::config::parse_client(
            &format!(
                "private_key = \"{}\"\nserver_public_key = \"{}\"\n[tun]\naddresses = [\"10.77.0.2/24\"]\n{paths}",
                crate::keys::Key::generate().unwrap().to_base64(),
                crate::keys::Key::generate().unwrap().public().to_base64(),
            ),
            std::path::Path::new("/nonexistent/client.toml"),
        )
        .expect("config")
    }

    #[test]
    fn localhost_resolves_to_the_asked_family() {
        let a = resolve("localhost", 7744, Some(true)).expect("localhost resolves");
        assert_eq!(a, "127.0.0.1:7744".parse().unwrap());
        assert!(resolve("localhost", 7744, None).is_ok());
    }

    /// The paths the link signal is read for (`daemon::link_signal`): fixed paths with a
    /// `device` by their id, and pattern paths once open (none here: no netlink).
    #[test]
    fn bound_interfaces_are_the_fixed_devices_and_open_pattern_paths() {
        let cfg = client_with(
            "[[path]]\nname = \"fibre\"\nserver = \"198.51.100.1\"\n\
             [[path]]\nname = \"wifi\"\nserver = \"198.51.100.1\"\ndevice = \"wlan0\"\n\
             [[path]]\nname = \"lte\"\nserver = \"198.51.100.1\"\ndevices = \"wwan*\"\n",
        );
        let servers = resolve_at_start(&cfg.paths).expect("addresses");
        let links = ClientLinks::new(&cfg.paths, &servers, None, None, "plait0");
        assert_eq!(links.bound_interfaces(), [(1, "wlan0".to_owned())]);
    }

    /// RFC 6761: `.invalid` never resolves.
    #[test]
    fn a_name_that_does_not_resolve_is_one_clear_error_at_start() {
        let cfg = client_with(
            "[[path]]\nname = \"fibre\"\nserver = \"198.51.100.1\"\n\
             [[path]]\nname = \"lte\"\nserver = \"plait-test.invalid:7000\"\n",
        );
        let e = resolve_at_start(&cfg.paths).expect_err("must not resolve");
        let m = e.to_string();
        assert!(
            m.starts_with("path lte: cannot resolve the server name `plait-test.invalid:7000`"),
            "{m}"
        );
    }
}
