//! TOML configuration of `plait client` and `plait server`: the file format, its defaults
//! and every check on it (reference: docs/tunnel-config.md; examples: docs/examples/).
//!
//! Invariant: a [`ClientConfig`] or [`ServerConfig`] returned by `load_*`/`parse_*` has
//! passed every check here: keys decode, addresses parse, every number is in range, names
//! are unique, client prefixes do not overlap. The daemon does not re-check. Every
//! [`ConfigError::Invalid`] names the file, the field by its TOML path (`path[1].server`,
//! `client[0].allowed_ips[2]`) and, when the value is in the file, its line and column.
//!
//! Reading is two steps. serde reads the text into the private `file` structs, which
//! say which fields exist, which are required and their defaults; each value's type
//! (`values`) checks it as it is read, and toml places any error. Then `check` does
//! what involves several values or the file system and builds the public types. `error`
//! turns either step's error into a [`ConfigError`] with its position and field path.
//! Relative file names (key files, the status socket) are taken relative to the config
//! file's directory.

mod check;
mod error;
mod file;
mod secrets;
#[cfg(test)]
mod tests;
mod values;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use plait_proto::EngineSettings;

use crate::keys::Key;

use error::Doc;

pub use error::ConfigError;
pub use secrets::readable_by_others;

/// Default UDP port of a plait server.
pub const DEFAULT_PORT: u16 = 7744;
/// Default path MTU (outer packets), bytes.
pub const DEFAULT_PATH_MTU: u16 = 1500;
/// Default TUN device name.
pub const DEFAULT_TUN_NAME: &str = "plait0";
/// Default `engine.max_hold_ms` (the engine's own default).
pub const DEFAULT_MAX_HOLD_MS: u64 = plait_proto::reorder::DEFAULT_MAX_HOLD.as_millis() as u64;
/// Default status socket of `plait client`.
pub const DEFAULT_CLIENT_STATUS_SOCKET: &str = "/run/plait/client.sock";
/// Default status socket of `plait server`.
pub const DEFAULT_SERVER_STATUS_SOCKET: &str = "/run/plait/server.sock";
/// Default `listen` of `plait server`.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7744";

/// Smallest path MTU (outer packets) and smallest IPv6 MTU (RFC 8200).
const MIN_IPV6_MTU: u16 = 1280;
/// Smallest TUN MTU for IPv4-only tunnels (RFC 791's "every host must accept").
const MIN_IPV4_MTU: u16 = 576;
/// Longest `engine.max_hold_ms`.
const MAX_HOLD_MS: u64 = 10_000;
/// Longest Unix socket path (`sun_path` is 108 bytes with the terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// `plait client --config FILE`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientConfig {
    /// This client's private key.
    pub private_key: Key,
    /// The server's public key.
    pub server_public_key: Key,
    /// Optional pre-shared key (Noise psk2).
    pub preshared_key: Option<Key>,
    /// Tunnel device settings.
    pub tun: TunConfig,
    /// Engine settings.
    pub engine: EngineSettings,
    /// Status socket and metrics.
    pub control: ControlConfig,
    /// Prefixes to route into the tunnel (`--route`); empty = none.
    pub route: Vec<IpNet>,
    /// The paths, in path-id order (path id = index). 1..=16.
    pub paths: Vec<PathConfig>,
}

/// One `[[path]]` of a client.
#[derive(Clone, Debug, PartialEq)]
pub struct PathConfig {
    /// A name for logs and `plait status` (unique).
    pub name: String,
    /// The server's address for this path.
    pub server: SocketAddr,
    /// Local address to bind (port 0 = any); `None` = the wildcard of the server's family.
    pub bind: Option<SocketAddr>,
    /// Interface to bind to (SO_BINDTODEVICE).
    pub device: Option<String>,
    /// Path MTU for outer packets, bytes (default 1500).
    pub mtu: u16,
    /// Optional capacity hint, Mbit/s (the engine measures; a hint only seeds it).
    pub rate_mbit: Option<f64>,
}

/// `plait server --config FILE`.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// The server's private key.
    pub private_key: Key,
    /// UDP addresses to listen on (at least one).
    pub listen: Vec<SocketAddr>,
    /// Path MTU assumed for every client path, bytes (default 1500).
    pub path_mtu: u16,
    /// Tunnel device settings.
    pub tun: TunConfig,
    /// Engine settings (every client's session).
    pub engine: EngineSettings,
    /// Status socket and metrics.
    pub control: ControlConfig,
    /// Masquerade traffic from the tunnel out of this interface (`--nat IFACE`).
    pub nat: Option<String>,
    /// Known clients (at least one).
    pub clients: Vec<ClientEntry>,
}

/// One `[[client]]` of a server.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientEntry {
    /// A name for logs and `plait status` (unique).
    pub name: String,
    /// Its public key (unique).
    pub public_key: Key,
    /// Optional pre-shared key.
    pub preshared_key: Option<Key>,
    /// Inner source addresses this client may use, and destinations routed to it.
    /// Non-empty; prefixes must not overlap another client's.
    pub allowed_ips: Vec<IpNet>,
}

/// `[tun]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TunConfig {
    /// Device name (default `plait0`), at most 15 bytes.
    pub name: String,
    /// Inner addresses with prefix length, e.g. `10.77.0.1/24`, `fd77::1/64` (at most one of
    /// each family; at least one).
    pub addresses: Vec<IpNet>,
    /// MTU override; `None` = derived from the path MTU less plait's overhead.
    pub mtu: Option<u16>,
}

/// `[control]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ControlConfig {
    /// Unix socket for `plait status` (default `/run/plait/<role>.sock`).
    pub status_socket: PathBuf,
    /// Prometheus text endpoint (`None` = off), e.g. `127.0.0.1:9477`.
    pub metrics: Option<SocketAddr>,
}

impl Default for TunConfig {
    /// `plait0`, no addresses (a config file must give at least one), MTU derived.
    fn default() -> TunConfig {
        TunConfig {
            name: DEFAULT_TUN_NAME.to_owned(),
            addresses: Vec::new(),
            mtu: None,
        }
    }
}

impl ControlConfig {
    /// A client's defaults: status socket [`DEFAULT_CLIENT_STATUS_SOCKET`], no metrics.
    pub fn client_default() -> ControlConfig {
        ControlConfig {
            status_socket: PathBuf::from(DEFAULT_CLIENT_STATUS_SOCKET),
            metrics: None,
        }
    }

    /// A server's defaults: status socket [`DEFAULT_SERVER_STATUS_SOCKET`], no metrics.
    pub fn server_default() -> ControlConfig {
        ControlConfig {
            status_socket: PathBuf::from(DEFAULT_SERVER_STATUS_SOCKET),
            metrics: None,
        }
    }
}

/// Reads and checks a client config file.
pub fn load_client(path: &Path) -> Result<ClientConfig, ConfigError> {
    parse_client(&read(path)?, path)
}

/// Checks a client config; `origin` is the file it came from (for messages and for
/// resolving relative key file names).
pub fn parse_client(text: &str, origin: &Path) -> Result<ClientConfig, ConfigError> {
    let doc = Doc::new(text, origin);
    doc.client(doc.read()?)
}

/// Reads and checks a server config file.
pub fn load_server(path: &Path) -> Result<ServerConfig, ConfigError> {
    parse_server(&read(path)?, path)
}

/// Checks a server config; `origin` is the file it came from (for messages and for
/// resolving relative key file names).
pub fn parse_server(text: &str, origin: &Path) -> Result<ServerConfig, ConfigError> {
    let doc = Doc::new(text, origin);
    doc.server(doc.read()?)
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}
