//! Turning a configuration into a running daemon: keys, MTU, TUN device, sockets,
//! routes and NAT, the status socket and metrics; and undoing it all on exit.
//!
//! Invariants: every resource made here is owned by a value whose `Drop` undoes it (TUN
//! device, route and NAT changes, status socket file), so an error at any step, a signal
//! or a normal exit leaves the host as it was. Everything that needs a privilege happens
//! before [`lock_down`], and no thread is started before it (capabilities are per thread):
//! the control endpoints are bound first and served after it.

use plait_proto::EngineSettings;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tracing::{info, warn};

use super::error::DaemonError;
use super::links::{ClientLinks, resolve_at_start};
use super::stream_setup::{client_relay, server_relay};
use super::{RelaySetup, Watched, run_loop};
use crate::config::{
    ClientConfig, ControlConfig, PathConfig, SecurityConfig, ServerConfig, TunConfig,
};
use crate::control::metrics::MetricsServer;
use crate::control::status::StatusServer;
use crate::control::{SharedSnapshot, StatusSnapshot};
use crate::endpoint::{
    ClientEndpoint, ClientParams, ClientPath, EngineParams, ServerEndpoint, ServerParams,
    ServerPeer, max_datagram_for, outer_ip_udp_overhead,
};
use crate::io::netwatch::{NetWatch, PathRoute};
use crate::io::steer::bind_steered;
use crate::io::tun::Tun;
use crate::io::udp::{SocketOptions, UdpPath};
use crate::netcfg::{DEFAULT_FWMARK, DEFAULT_TABLE, NetConfig};
use crate::sandbox;

fn engine_params(
    e: &EngineSettings,
    max_datagram_size: usize,
    outer_header_len: usize,
) -> EngineParams {
    EngineParams {
        settings: e.clone(),
        max_datagram_size,
        outer_header_len,
        seed: None,
        streams: EngineParams::tunnel_stream_limits(),
        tuning: Default::default(),
    }
}

fn tun_mtu(tun: &TunConfig, engine: &EngineParams, why: &str) -> Result<u16, DaemonError> {
    let fits = engine.tun_mtu();
    let mtu = tun.mtu.map_or(fits, usize::from);
    if mtu > fits || fits < 576 {
        return Err(DaemonError::Mtu(format!(
            "TUN MTU {mtu} does not fit: {why} leaves {fits} bytes for inner packets (plait adds {} bytes of data header and tag and {} bytes of engine framing)",
            crate::message::DATA_OVERHEAD,
            engine.max_datagram_size.saturating_sub(fits)
        )));
    }
    u16::try_from(mtu).map_err(|_| DaemonError::Mtu(format!("TUN MTU {mtu} is too large")))
}

/// The control endpoints, bound; [`lock_down`] starts serving them.
struct Control {
    snapshot: SharedSnapshot,
    status: StatusServer,
    metrics: Option<MetricsServer>,
}

fn control(c: &ControlConfig, role: &str) -> Result<Control, DaemonError> {
    let snapshot: SharedSnapshot = Arc::new(Mutex::new(StatusSnapshot {
        role: role.to_string(),
        ..StatusSnapshot::default()
    }));
    let status = StatusServer::bind(&c.status_socket)?;
    let metrics = match c.metrics {
        Some(addr) => {
            let m = MetricsServer::bind(addr)?;
            info!(addr = %m.local_addr(), "Prometheus metrics at /metrics");
            if !addr.ip().is_loopback() {
                warn!(
                    %addr,
                    "the metrics endpoint is not on a loopback address: anyone who can reach \
                     it can read the tunnel's peers, paths and traffic; bind 127.0.0.1 or ::1 \
                     unless that is intended"
                );
            }
            Some(m)
        }
        None => None,
    };
    Ok(Control {
        snapshot,
        status,
        metrics,
    })
}

/// Set-up is done: drops the privileges `security` says (docs/tunnel.md#least-privilege),
/// then starts the control endpoints' threads, which are born without them.
fn lock_down(security: &SecurityConfig, control: &mut Control) -> Result<(), DaemonError> {
    sandbox::lock_down(security)?;
    control.status.serve(Arc::clone(&control.snapshot))?;
    if let Some(m) = control.metrics.as_mut() {
        m.serve(Arc::clone(&control.snapshot))?;
    }
    Ok(())
}

/// Runs `plait client` until SIGINT/SIGTERM or `stop`.
pub fn run_client(cfg: ClientConfig, stop: Arc<AtomicBool>) -> Result<(), DaemonError> {
    // Server names are resolved now, before the sandbox, and again by the loop when the
    // server stops answering (`links`).
    let servers = resolve_at_start(&cfg.paths)?;
    let max_datagram = cfg
        .paths
        .iter()
        .zip(&servers)
        .map(|(p, s)| max_datagram_for(p.mtu, s))
        .min()
        .unwrap_or(0);
    let outer = servers.iter().map(outer_ip_udp_overhead).max().unwrap_or(0);
    let engine = engine_params(&cfg.engine, max_datagram, outer);
    let mtu = tun_mtu(&cfg.tun, &engine, "the smallest path MTU")?;
    let fwmark = (!cfg.route.is_empty()).then_some(DEFAULT_FWMARK);
    // Fixed paths: ids 0.. in file order, each with its socket now. Pattern paths open
    // theirs on the free ids as interfaces come (`crate::mobility`).
    let fixed: Vec<(&PathConfig, SocketAddr)> = cfg
        .paths
        .iter()
        .zip(servers.iter().copied())
        .filter(|(p, _)| p.devices.is_none())
        .collect();
    let mut sockets: Vec<Option<UdpPath>> = Vec::new();
    for (p, server) in &fixed {
        let bind = p.bind.unwrap_or(match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        });
        let opts = SocketOptions {
            device: p.device.clone(),
            fwmark,
            reuse_port: false,
        };
        let s = UdpPath::bind(bind, &opts).map_err(|source| DaemonError::Socket {
            what: format!("path {}", p.name),
            addr: bind,
            source,
        })?;
        info!(path = %p.name, local = %s.local_addr(), server = %server, device = p.device.as_deref().unwrap_or("-"), "path socket");
        sockets.push(Some(s));
    }
    sockets.resize_with(plait_proto::MAX_PATHS, || None);
    if fixed.is_empty() {
        info!(
            "no fixed path: the tunnel comes up when an interface matching a pattern path appears"
        );
    }
    // Links that come and go (docs/protocol.md#binding): without netlink the paths are
    // taken as working, and only the engine's liveness check finds a dead one.
    let netwatch = match NetWatch::new(
        fixed
            .iter()
            .map(|(p, server)| PathRoute {
                server: server.ip(),
                device: p.device.clone(),
                fwmark,
            })
            .collect(),
    ) {
        Ok(w) => Some(w),
        Err(e) => {
            warn!(error = %e, "cannot watch the links through netlink: a path whose link goes away is found only when it falls silent");
            None
        }
    };
    let tun = Tun::create(&cfg.tun.name, &cfg.tun.addresses, mtu)?;
    info!(tun = %tun.name(), mtu, max_datagram, scheduler = engine.settings.scheduler.name(), reorder = engine.settings.reorder.name(), "tunnel device up");
    let mut net = NetConfig::new();
    if !cfg.route.is_empty() {
        net.route_into_tunnel(tun.name(), &cfg.route, DEFAULT_FWMARK, DEFAULT_TABLE)?;
        info!(routes = ?cfg.route.iter().map(ToString::to_string).collect::<Vec<_>>(), "routing into the tunnel");
    }
    let relay = match &cfg.streams {
        Some(s) => RelaySetup::Client(client_relay(s, tun.name(), &mut net)?),
        None => RelaySetup::Off,
    };
    let mut control = control(&cfg.control, "client")?;
    let params = ClientParams {
        private_key: cfg.private_key.clone(),
        server_public_key: cfg.server_public_key.clone(),
        preshared_key: cfg.preshared_key.clone(),
        paths: fixed
            .iter()
            .map(|(p, server)| ClientPath {
                name: p.name.clone(),
                server: *server,
                rate_hint: p.rate_mbit.map(|m| m * 1e6 / 8.0),
                backup: p.backup,
                attributes: p.attributes,
            })
            .collect(),
        engine,
    };
    let mut endpoint = ClientEndpoint::new(params);
    for (id, socket) in sockets.iter().enumerate() {
        if let Some(socket) = socket {
            // Before the loop's clock starts: its zero.
            endpoint.set_path_local(plait_proto::Time::ZERO, id, socket.local_addr());
        }
    }
    if let Some(lifetime) = cfg.test_key_lifetime {
        // Loud on purpose: a test knob in a deployment's config should not go unnoticed.
        warn!(
            rekey_after_s = lifetime.rekey_after().as_secs(),
            reject_after_s = lifetime.reject_after().as_secs(),
            "[test_only] rekey_after_s is set: keys are replaced sooner than the protocol's 120 s (for tests)"
        );
        endpoint.set_key_lifetime(lifetime);
    }
    if cfg.streams.is_some() {
        endpoint.enable_streams();
    }
    let links = ClientLinks::new(&cfg.paths, &servers, netwatch, fwmark, tun.name());
    // docs/tunnel-config.md#budget: the state files are opened before the lock-down, which
    // leaves no way to create one.
    let wall_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let budgets = super::budgets::Budgets::open(&cfg.paths, &cfg.state_dir, wall_ns);
    lock_down(&cfg.security, &mut control)?;
    let result = run_loop(
        &mut endpoint,
        &tun,
        &mut sockets,
        Watched {
            handshake: Vec::new(),
            links: Some(links),
            // Read only for the handover, the signal's one use (docs/protocol.md#handover).
            link_signals: cfg
                .engine
                .handover
                .then(|| super::link_signal::LinkSignals::new(cfg.link_signal_file.clone())),
            budgets,
        },
        relay,
        &control.snapshot,
        &stop,
    );
    net.undo();
    result.map_err(DaemonError::Loop)
}

/// Runs `plait server` until SIGINT/SIGTERM or `stop`.
pub fn run_server(cfg: ServerConfig, stop: Arc<AtomicBool>) -> Result<(), DaemonError> {
    let max_datagram = cfg
        .listen
        .iter()
        .map(|a| max_datagram_for(cfg.path_mtu, a))
        .min()
        .unwrap_or(0);
    let outer = cfg
        .listen
        .iter()
        .map(outer_ip_udp_overhead)
        .max()
        .unwrap_or(0);
    let mut engine = engine_params(&cfg.engine, max_datagram, outer);
    if let Some(s) = &cfg.streams {
        // What one client's streams may hold unacknowledged (the receive side is bounded
        // by the windows both ends agree on).
        engine.streams.session_send_buffer = s.max_buffered_per_client;
        engine.streams.stream_send_buffer = engine
            .streams
            .stream_send_buffer
            .min(s.max_buffered_per_client);
    }
    let mtu = tun_mtu(&cfg.tun, &engine, "the path MTU")?;
    let mut sockets = Vec::new();
    let mut handshake_sockets = Vec::new();
    for addr in &cfg.listen {
        let (listen, steering_failed) =
            bind_steered(*addr).map_err(|source| DaemonError::Socket {
                what: "listen".into(),
                addr: *addr,
                source,
            })?;
        match steering_failed {
            None => {
                info!(listen = %listen.data.local_addr(), "listening (initiations on a socket of their own)")
            }
            Some(e) => {
                warn!(listen = %listen.data.local_addr(), error = %e, "listening, but initiations could not be given a socket of their own: a handshake flood can crowd out data")
            }
        }
        if let Some(h) = listen.handshake {
            handshake_sockets.push((sockets.len(), h));
        }
        sockets.push(Some(listen.data));
    }
    let tun = Tun::create(&cfg.tun.name, &cfg.tun.addresses, mtu)?;
    info!(tun = %tun.name(), mtu, max_datagram, clients = cfg.clients.len(), scheduler = engine.settings.scheduler.name(), "tunnel device up");
    let mut net = NetConfig::new();
    for c in &cfg.clients {
        for net_prefix in &c.allowed_ips {
            // Prefixes inside the TUN's own subnets are already routed to it.
            let on_link = cfg
                .tun
                .addresses
                .iter()
                .any(|a| a.trunc().contains(net_prefix));
            if !on_link {
                net.add_route(tun.name(), *net_prefix)?;
            }
        }
    }
    if let Some(out) = &cfg.nat {
        let nets: Vec<_> = cfg.tun.addresses.iter().map(|a| a.trunc()).collect();
        net.enable_nat(tun.name(), out, &nets)?;
        info!(out = %out, "NAT on");
    }
    let mut control = control(&cfg.control, "server")?;
    let params = ServerParams {
        private_key: cfg.private_key.clone(),
        peers: cfg
            .clients
            .iter()
            .map(|c| ServerPeer {
                name: c.name.clone(),
                public_key: c.public_key.clone(),
                preshared_key: c.preshared_key.clone(),
                allowed_ips: c.allowed_ips.clone(),
            })
            .collect(),
        engine,
    };
    let mut endpoint = ServerEndpoint::new(params);
    let relay = match &cfg.streams {
        Some(s) => {
            endpoint.enable_streams();
            RelaySetup::Server(server_relay(s, cfg.clients.len()))
        }
        None => RelaySetup::Off,
    };
    lock_down(&cfg.security, &mut control)?;
    let result = run_loop(
        &mut endpoint,
        &tun,
        &mut sockets,
        Watched {
            handshake: handshake_sockets,
            links: None,
            link_signals: None,
            budgets: None,
        },
        relay,
        &control.snapshot,
        &stop,
    );
    net.undo();
    result.map_err(DaemonError::Loop)
}
