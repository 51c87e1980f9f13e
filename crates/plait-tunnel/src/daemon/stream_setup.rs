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
    Ok(ClientRelayParams {
        transparent,
        socks5,
        max_connections: cfg.max_connections,
        idle_timeout: cfg.idle_timeout,
    })
}

/// The server's relay settings.
pub(super) fn server_relay(cfg: &ServerStreams) -> ServerRelayParams {
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
