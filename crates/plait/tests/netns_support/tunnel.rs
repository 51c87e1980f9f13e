//! The tunnel harness of the root tests: a topology built by `plait-testbed` with a real
//! `plait server` and its `plait client`s running in it, configured from a [`TunnelSpec`]
//! (keys, configs, logs and status sockets in a temporary directory, never /run/plait).
//! [`Tunnel::start`] writes the configs (`engine_table` adds the `PLAIT_TEST_SCHEDULER` /
//! `PLAIT_TEST_REORDER` comparison settings), starts the daemons and returns once every
//! client has an established session with every path active (without clients, once the
//! server answers); [`Tunnel::shutdown`] stops them and checks each left nothing behind.
//! [`NetnsHosts`] is a namespace's own hosts file.
//!
//! Invariants: every resource a tunnel creates is owned by a guard (daemons → [`Daemon`]
//! and its `ChildGuard`, namespaces → `Topology`, files → `TempDir` and [`NetnsHosts`]),
//! so a failing test leaves nothing behind, and it prints the daemons' logs. [`Tunnel`]'s
//! fields drop in that order: the daemons first (killed), then the namespaces, then the
//! files (the temporary directory, then the hosts files).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use plait_testbed::{Family, Namespace, Topology, TopologySpec};
use plait_tunnel::keys::Key;
use tempfile::TempDir;

use super::daemon::Daemon;
use super::write_key;

/// The UDP port the server listens on (in its own namespace).
pub const PORT: u16 = 7744;

/// What a test's tunnel looks like.
pub struct TunnelSpec {
    /// Test letter, for the TUN name.
    pub tag: char,
    pub topo: TopologySpec,
    /// Whether the tunnel carries IPv6 too (TUN addresses, routes, allowed_ips).
    pub inner_v6: bool,
    /// Whether to start the clients (test c runs a server alone).
    pub clients: bool,
    /// Stream mode on both ends (`[streams]`; the client's SOCKS5 on [`SOCKS5`]).
    pub streams: bool,
    /// Client paths configured `backup = true` (docs/protocol.md#backup).
    pub backup_paths: &'static [usize],
    /// Client paths configured as pattern paths, `devices = "p?"` (each topology path's
    /// client interface is `p{i}`, and only `p{i}` routes to path i's server), instead of
    /// fixed ones (docs/tunnel-config.md, `devices`).
    pub pattern_paths: &'static [usize],
    /// Client paths name their server `plait-p{i}.test` (resolved through the client
    /// namespace's own hosts file, [`NetnsHosts`]) instead of giving its address.
    pub named_servers: bool,
    /// `[[policy]]` tables for both ends (docs/tunnel-config.md#policy).
    pub policy: &'static str,
    /// Extra `[engine]` lines for both ends (`key = value`, one per line).
    pub engine: &'static str,
}

impl TunnelSpec {
    /// Test `tag`'s tunnel over `topo`: IPv4 only, every client started, packet mode, no
    /// backup, pattern or named paths, no policy, the engine's defaults. A test names what
    /// it changes: `TunnelSpec { streams: true, ..TunnelSpec::new('s', topo) }`.
    pub fn new(tag: char, topo: TopologySpec) -> TunnelSpec {
        TunnelSpec {
            tag,
            topo,
            inner_v6: false,
            clients: true,
            streams: false,
            backup_paths: &[],
            pattern_paths: &[],
            named_servers: false,
            policy: "",
            engine: "",
        }
    }
}

/// The clients' `link_signal_file`, in the tunnel's directory: a test that gives its paths a
/// Wi-Fi signal writes rows there in the kernel's `/proc/net/wireless` format.
pub const WIRELESS: &str = "wireless";

/// The client's SOCKS5 listener in the stream-mode tests, and its credential.
pub const SOCKS5: &str = "127.0.0.1:1080";
pub const SOCKS5_USER: &str = "plait";
pub const SOCKS5_PASSWORD: &str = "not-a-secret";

/// A topology with a server and its clients running. Fields drop in order: daemons first
/// (killed, logs printed on failure), then the namespaces, then the files.
pub struct Tunnel {
    pub clients: Vec<Daemon>,
    pub server: Option<Daemon>,
    pub topo: Topology,
    pub server_key: Key,
    pub dir: TempDir,
    pub hosts: Vec<NetnsHosts>,
}

/// `/etc/netns/NAME/hosts`: `ip netns exec NAME` mounts it over `/etc/hosts` for what it
/// runs, so a daemon in that namespace resolves names from it. Removed on drop.
pub struct NetnsHosts {
    dir: PathBuf,
}

impl NetnsHosts {
    pub fn write(ns: &Namespace, lines: &str) -> NetnsHosts {
        let dir = Path::new("/etc/netns").join(ns.name());
        std::fs::create_dir_all(&dir).expect("/etc/netns/NAME");
        let h = NetnsHosts { dir };
        h.set(lines);
        h
    }

    /// New contents, in place (the daemon's bind mount sees the same file).
    pub fn set(&self, lines: &str) {
        std::fs::write(self.dir.join("hosts"), lines).expect("hosts file");
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        // Only if empty: another user's files there stay.
        let _ = std::fs::remove_dir("/etc/netns");
    }
}

/// `[engine]` table for both daemons: the test's own lines (`extra`), then, for comparing
/// engine settings against the defaults, `PLAIT_TEST_SCHEDULER=NAME` picks the scheduler
/// and `PLAIT_TEST_REORDER=none|bmp` the receiver's reordering; unset means the configs'
/// defaults.
fn engine_table(extra: &str) -> String {
    let mut t = extra.to_owned();
    for (var, key) in [
        ("PLAIT_TEST_SCHEDULER", "scheduler"),
        ("PLAIT_TEST_REORDER", "reorder"),
    ] {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            let _ = writeln!(t, "{key} = \"{v}\"");
        }
    }
    if t.is_empty() {
        t
    } else {
        format!("[engine]\n{t}\n")
    }
}

pub fn tun_name(tag: char) -> String {
    format!("pt{tag}{}", std::process::id() % 1_000_000)
}

fn quote_all<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| format!("\"{}\"", i.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Tunnel {
    pub fn start(spec: TunnelSpec) -> Tunnel {
        let started = Instant::now();
        let topo = Topology::build(&spec.topo).expect("build topology");
        let dir = tempfile::tempdir().expect("tempdir");
        let tun = tun_name(spec.tag);
        let server_key = Key::generate().expect("key");
        let client_keys: Vec<Key> = topo
            .clients()
            .iter()
            .map(|_| Key::generate().expect("key"))
            .collect();
        let any_v6_path = topo
            .clients()
            .iter()
            .flat_map(|s| s.paths())
            .any(|p| p.family() == Family::V6);

        // Server.
        let mut listen = vec![format!("0.0.0.0:{PORT}")];
        if any_v6_path {
            listen.push(format!("[::]:{PORT}"));
        }
        let mut tun_addrs = vec!["10.77.0.1/24".to_owned()];
        if spec.inner_v6 {
            tun_addrs.push("fd77::1/64".to_owned());
        }
        let mut cfg = String::new();
        let _ = writeln!(
            cfg,
            "private_key_file = \"{}\"\nlisten = [{}]\n\n[tun]\nname = \"{tun}\"\naddresses = [{}]\n\n{}[control]\nstatus_socket = \"{}\"\n",
            write_key(dir.path(), "server", &server_key),
            quote_all(&listen),
            quote_all(&tun_addrs),
            engine_table(spec.engine),
            dir.path().join("server.sock").display(),
        );
        if spec.streams {
            cfg.push_str("[streams]\n\n");
        }
        cfg.push_str(spec.policy);
        for (c, site) in topo.clients().iter().enumerate() {
            let mut allowed = vec![
                format!("10.77.0.{}/32", c + 2),
                site.lan_net(Family::V4).to_string(),
            ];
            if spec.inner_v6 {
                allowed.push(format!("fd77::{}/128", c + 2));
                allowed.push(site.lan_net(Family::V6).to_string());
            }
            let _ = writeln!(
                cfg,
                "[[client]]\nname = \"site{c}\"\npublic_key = \"{}\"\nallowed_ips = [{}]\n",
                client_keys[c].public().to_base64(),
                quote_all(&allowed),
            );
        }
        let server_cfg = dir.path().join("server.toml");
        std::fs::write(&server_cfg, cfg).expect("server config");
        let mut server = Daemon::start(topo.server(), "server", "server", &server_cfg, &tun);
        server.wait_for("status socket", |_| true);

        let mut tunnel = Tunnel {
            clients: Vec::new(),
            server: Some(server),
            topo,
            server_key,
            dir,
            hosts: Vec::new(),
        };
        if !spec.clients {
            return tunnel;
        }

        // Clients.
        for (c, key) in client_keys.iter().enumerate() {
            let site = &tunnel.topo.clients()[c];
            let mut routes = vec![tunnel.topo.remote_net(Family::V4).to_string()];
            let mut addrs = vec![format!("10.77.0.{}/24", c + 2)];
            if spec.inner_v6 {
                routes.push(tunnel.topo.remote_net(Family::V6).to_string());
                addrs.push(format!("fd77::{}/64", c + 2));
            }
            let label = format!("client{c}");
            let mut cfg = String::new();
            let _ = writeln!(
                cfg,
                "private_key_file = \"{}\"\nserver_public_key = \"{}\"\nroute = [{}]\nlink_signal_file = \"{}\"\n\n[tun]\nname = \"{tun}\"\naddresses = [{}]\n\n{}[control]\nstatus_socket = \"{}\"\n",
                write_key(tunnel.dir.path(), &label, key),
                tunnel.server_key.public().to_base64(),
                quote_all(&routes),
                tunnel.dir.path().join(WIRELESS).display(),
                quote_all(&addrs),
                engine_table(spec.engine),
                tunnel.dir.path().join(format!("{label}.sock")).display(),
            );
            cfg.push_str(spec.policy);
            if spec.streams {
                let _ = writeln!(
                    cfg,
                    "[streams]\nsocks5 = \"{SOCKS5}\"\nsocks5_username = \"{SOCKS5_USER}\"\nsocks5_password = \"{SOCKS5_PASSWORD}\"\n"
                );
            }
            let mut hosts = String::new();
            for path in site.paths() {
                let server = if spec.named_servers {
                    let name = format!("plait-p{}.test", path.index());
                    let _ = writeln!(hosts, "{} {name}", path.server_addr());
                    name
                } else {
                    SocketAddr::new(path.server_addr(), PORT).to_string()
                };
                let _ = writeln!(
                    cfg,
                    "[[path]]\nname = \"p{}\"\nserver = \"{}\"\nbackup = {}\n{}",
                    path.index(),
                    server,
                    spec.backup_paths.contains(&path.index()),
                    if spec.pattern_paths.contains(&path.index()) {
                        "devices = \"p?\"\n"
                    } else {
                        ""
                    }
                );
            }
            if spec.named_servers {
                tunnel.hosts.push(NetnsHosts::write(site.client(), &hosts));
            }
            let file = tunnel.dir.path().join(format!("{label}.toml"));
            std::fs::write(&file, cfg).expect("client config");
            let daemon = Daemon::start(site.client(), "client", &label, &file, &tun);
            tunnel.clients.push(daemon);
        }
        for (c, site) in tunnel.topo.clients().iter().enumerate() {
            let n = site.paths().len();
            tunnel.clients[c].wait_for("established session with every path active", |s| {
                s.sessions.len() == 1
                    && s.sessions[0].established
                    && s.sessions[0].paths.len() == n
                    && s.sessions[0].paths.iter().all(|p| p.state == "active")
            });
        }
        let want = tunnel.topo.clients().len();
        if let Some(server) = tunnel.server.as_mut() {
            server.wait_for("every client's session", |s| {
                s.sessions.len() == want && s.sessions.iter().all(|x| x.established)
            });
        }
        eprintln!("tunnel up in {:?}", started.elapsed());
        tunnel
    }

    pub fn server(&self) -> &Daemon {
        self.server.as_ref().expect("server running")
    }

    /// Stops clients, then the server, checking each shuts down cleanly.
    pub fn shutdown(mut self) {
        let clients = std::mem::take(&mut self.clients);
        for (c, d) in clients.into_iter().enumerate() {
            d.shutdown(self.topo.clients()[c].client());
        }
        if let Some(server) = self.server.take() {
            server.shutdown(self.topo.server());
        }
    }
}
