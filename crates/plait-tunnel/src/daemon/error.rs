//! Why the daemon could not start or had to stop.

use std::net::SocketAddr;

use thiserror::Error;

use crate::control::ControlError;
use crate::io::tun::TunError;
use crate::netcfg::NetCfgError;

/// Why the daemon could not start or had to stop.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// The TUN device.
    #[error(transparent)]
    Tun(#[from] TunError),
    /// A UDP socket could not be opened.
    #[error("cannot open the UDP socket for {what} ({addr}): {source}")]
    Socket {
        /// Which path or listen address.
        what: String,
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The MTU does not leave room for plait's overhead.
    #[error("{0}")]
    Mtu(String),
    /// Routes or NAT.
    #[error(transparent)]
    NetCfg(#[from] NetCfgError),
    /// Status socket or metrics endpoint.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A stream-mode listener (transparent or SOCKS5) could not be opened.
    #[error("cannot listen for {what} on {addr}: {source}")]
    Listen {
        /// Which listener.
        what: String,
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The SOCKS5 credential (the config checks it; this is a bug if it happens).
    #[error(transparent)]
    Credential(#[from] crate::socks5::CredentialError),
    /// Capabilities, no_new_privs or the seccomp filter could not be applied.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// A path's server name did not resolve at start.
    #[error(
        "path {path}: cannot resolve the server name `{name}`: {why} (check the name and \
         the resolver; at boot, start plait after the network is online, or let the service \
         manager restart it)"
    )]
    Resolve {
        /// The path's name.
        path: String,
        /// The name, with its port.
        name: String,
        /// The resolver's answer.
        why: String,
    },
    /// The event loop failed.
    #[error("event loop: {0}")]
    Loop(std::io::Error),
}
