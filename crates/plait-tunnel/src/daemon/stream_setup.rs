//! Stream mode's part of start-up (docs/tunnel.md#stream-mode): the client's listeners
//! and nftables redirect, the server's destination policy.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;
use socket2::{Domain, Protocol, Socket, Type};
use tracing::{info, warn};

use super::error::DaemonError;
use crate::config::{ClientStreams, ServerStreams};
use crate::netcfg::NetConfig;
use crate::relay::{ClientRelayParams, DestinationPolicy, ServerRelayParams};
use crate::socks5::{AuthPolicy, Credential};

/// Pending connections a listener holds before `accept`.
const BACKLOG: i32 = 1024;

/// A listening TCP socket with SO_REUSEADDR (a restart must not wait for TIME_WAIT) and,
/// for IPv6, IPV6_V6ONLY (IPv4 has its own listener, whose connections need the IPv4
/// original-destination lookup).
fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

fn listen_error(what: &str, addr: SocketAddr) -> impl FnOnce(std::io::Error) -> DaemonError {
    let what = what.to_owned();
    move |source| DaemonError::Listen { what, addr, source }
}

/// The client's listeners and, with `transparent`, the nftables rules that send the
/// chosen TCP connections to them (recorded in `net`, undone with it).
pub(super) fn client_relay(
    cfg: &ClientStreams,
    tun: &str,
    net: &mut NetConfig,
) -> Result<ClientRelayParams, DaemonError> {
    let mut transparent = Vec::new();
    let mut destinations: Vec<IpNet> = Vec::new();
    if cfg.transparent {
        let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, cfg.transparent_port));
        transparent.push(listen(v4).map_err(listen_error("transparent listener", v4))?);
        destinations.extend(
            cfg.destinations
                .iter()
                .filter(|n| matches!(n, IpNet::V4(_))),
        );
        let want_v6 = cfg.destinations.iter().any(|n| matches!(n, IpNet::V6(_)));
        if want_v6 {
            let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, cfg.transparent_port));
            match listen(v6) {
                Ok(l) => {
                    transparent.push(l);
                    destinations.extend(
                        cfg.destinations
                            .iter()
                            .filter(|n| matches!(n, IpNet::V6(_))),
                    );
                }
                Err(e) => warn!(
                    addr = %v6,
                    error = %e,
                    "no IPv6 transparent listener: IPv6 TCP keeps using packet mode"
                ),
            }
        }
        if !destinations.is_empty() {
            net.redirect_tcp(tun, cfg.transparent_port, &destinations, &cfg.ports)?;
            info!(
                port = cfg.transparent_port,
                destinations = ?destinations.iter().map(ToString::to_string).collect::<Vec<_>>(),
                ports = ?cfg.ports,
                "stream mode: TCP through the tunnel is redirected to the relay"
            );
        }
    }
    let socks5 = match cfg.socks5 {
        Some(addr) => {
            let l = listen(addr).map_err(listen_error("SOCKS5 listener", addr))?;
            let policy = match &cfg.socks5_auth {
                Some((user, password)) => AuthPolicy::UsernamePassword(
                    Credential::new(user.as_bytes(), password.as_bytes())
                        .map_err(DaemonError::Credential)?,
                ),
                None => AuthPolicy::NoAuth,
            };
            info!(%addr, auth = cfg.socks5_auth.is_some(), "stream mode: SOCKS5 listener");
            Some((l, policy))
        }
        None => None,
    };
    raise_fd_limit(cfg.max_connections as u64);
    Ok(ClientRelayParams {
        transparent,
        socks5,
        max_connections: cfg.max_connections,
        idle_timeout: cfg.idle_timeout,
    })
}

/// Descriptors the daemon keeps for itself beyond the relayed connections (sockets, TUN,
/// control, epoll, resolver).
const SPARE_DESCRIPTORS: u64 = 256;

/// Raises the soft limit on open files so `connections` relayed sockets fit (the usual
/// default of 1024 would refuse the 1025th with EMFILE); warns if the hard limit is lower.
pub(super) fn raise_fd_limit(connections: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let needed = connections.saturating_add(SPARE_DESCRIPTORS);
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft >= needed {
        return;
    }
    // Root (CAP_SYS_RESOURCE) may raise the hard limit too; otherwise up to it.
    let want = if setrlimit(Resource::RLIMIT_NOFILE, needed, hard.max(needed)).is_ok() {
        needed
    } else {
        let want = needed.min(hard);
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, want, hard) {
            warn!(error = %e, soft, "cannot raise the open-file limit");
        }
        want
    };
    if want < needed {
        warn!(
            hard,
            needed,
            "the open-file hard limit (ulimit -Hn) caps stream mode below its connection limit"
        );
    } else {
        info!(
            from = soft,
            to = want,
            "open-file limit raised for stream mode"
        );
    }
}

/// The server's relay settings for `clients` configured clients.
pub(super) fn server_relay(cfg: &ServerStreams, clients: usize) -> ServerRelayParams {
    raise_fd_limit((cfg.max_streams_per_client as u64).saturating_mul(clients as u64));
    info!(
        allow = ?cfg.allow.iter().map(ToString::to_string).collect::<Vec<_>>(),
        deny = ?cfg.deny.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "stream mode: connecting to destinations for clients"
    );
    ServerRelayParams {
        policy: DestinationPolicy {
            allow: cfg.allow.clone(),
            deny: cfg.deny.clone(),
        },
        connect_timeout: cfg.connect_timeout,
        idle_timeout: cfg.idle_timeout,
        max_streams_per_client: cfg.max_streams_per_client,
    }
}
