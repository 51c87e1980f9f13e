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
//! Relative file names (key files, the status socket, the SOCKS5 password file) are taken
//! relative to the config file's directory.
//!
//! Stream mode is on when a file has a `[streams]` table ([`ClientStreams`],
//! [`ServerStreams`]; an empty table is all defaults) and off, packet mode only, when it
//! has none. Secrets (keys, the SOCKS5 password) never appear in `Debug` output.

mod check;
mod error;
mod file;
mod secrets;
#[cfg(test)]
mod tests;
mod values;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use plait_proto::EngineSettings;
use zeroize::Zeroizing;

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
/// Default `state_dir` of `plait client`: where metered paths' budget counts are kept.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/plait";
/// Default `link_signal_file` of `plait client`: the kernel's Wi-Fi signal table.
pub const DEFAULT_LINK_SIGNAL_FILE: &str = "/proc/net/wireless";
/// Default `budget_reset_day` of a metered path: budgets begin on the first of the month.
pub const DEFAULT_BUDGET_RESET_DAY: u8 = 1;
/// Default status socket of `plait server`.
pub const DEFAULT_SERVER_STATUS_SOCKET: &str = "/run/plait/server.sock";
/// Default `listen` of `plait server`.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7744";

/// Default `streams.transparent_port` of a client: the transparent listener's port.
pub const DEFAULT_TRANSPARENT_PORT: u16 = 7745;
/// Default `streams.idle_timeout_s` (client and server): one hour.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default `streams.connect_timeout_s` of a server.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default and largest `streams.max_connections` (client) and
/// `streams.max_streams_per_client` (server).
pub const MAX_STREAMS: usize = 16_384;
/// Default `streams.max_buffered_mib_per_client` of a server, MiB.
pub const DEFAULT_MAX_BUFFERED_MIB: u64 = 64;
/// Default `streams.destinations` (client) and `streams.allow` (server): everything.
pub const DEFAULT_STREAM_DESTINATIONS: [&str; 2] = ["0.0.0.0/0", "::/0"];
/// Default `streams.deny` of a server: its loopback, unspecified, link-local and multicast
/// addresses.
pub const DEFAULT_STREAM_DENY: [&str; 8] = [
    "127.0.0.0/8",
    "::1/128",
    "0.0.0.0/8",
    "::/128",
    "169.254.0.0/16",
    "fe80::/10",
    "224.0.0.0/4",
    "ff00::/8",
];

/// Smallest path MTU (outer packets) and smallest IPv6 MTU (RFC 8200).
const MIN_IPV6_MTU: u16 = 1280;
/// Smallest TUN MTU for IPv4-only tunnels (RFC 791's "every host must accept").
const MIN_IPV4_MTU: u16 = 576;
/// Longest `engine.max_hold_ms`.
const MAX_HOLD_MS: u64 = 10_000;
/// Longest Unix socket path (`sun_path` is 108 bytes with the terminating NUL).
const MAX_SOCKET_PATH: usize = 107;
/// Longest `streams.idle_timeout_s`: a week.
const MAX_IDLE_TIMEOUT_S: u64 = 604_800;
/// Longest `streams.connect_timeout_s`.
const MAX_CONNECT_TIMEOUT_S: u64 = 300;
/// Largest `streams.max_buffered_mib_per_client`.
const MAX_BUFFERED_MIB: u64 = 1024;

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
    /// What the daemon gives up after set-up (`[security]`).
    pub security: SecurityConfig,
    /// Prefixes to route into the tunnel (`--route`); empty = none.
    pub route: Vec<IpNet>,
    /// Directory of the daemon's state across restarts (`state_dir`): the budget counts
    /// of metered paths (docs/tunnel-config.md#budget).
    pub state_dir: PathBuf,
    /// Where the link layer's signal of the paths' interfaces is read, in the format of
    /// `/proc/net/wireless` (`link_signal_file`; docs/protocol.md#handover).
    pub link_signal_file: PathBuf,
    /// The `[[path]]` tables, in file order (1..=16). Fixed paths (no `devices`) take
    /// path ids 0, 1, … in this order; pattern paths take free ids as they open.
    pub paths: Vec<PathConfig>,
    /// Stream mode (`[streams]`); `None` = packet mode only.
    pub streams: Option<ClientStreams>,
    /// `[test_only] rekey_after_s`: keys replaced sooner than WireGuard's 120 s, so root
    /// tests see rekeys in seconds; `None` (the default and what a deployment uses) =
    /// WireGuard's timers.
    pub test_key_lifetime: Option<crate::crypto::keypair::KeyLifetime>,
}

/// One `[[path]]` of a client.
#[derive(Clone, Debug, PartialEq)]
pub struct PathConfig {
    /// A name for logs and `plait status` (unique). A pattern path's paths are named
    /// `NAME:INTERFACE`.
    pub name: String,
    /// The server's address for this path, or a name resolved by the daemon.
    pub server: ServerAddr,
    /// Local address to bind (port 0 = any); `None` = the wildcard of the server's family.
    /// Never set with `devices`.
    pub bind: Option<SocketAddr>,
    /// Interface to bind to (SO_BINDTODEVICE). Never set with `devices`.
    pub device: Option<String>,
    /// A pattern path: one path for each interface this matches while it has a route to
    /// the server, opened and closed as interfaces come and go (`crate::mobility`).
    pub devices: Option<crate::mobility::DevicePattern>,
    /// Path MTU for outer packets, bytes (default 1500).
    pub mtu: u16,
    /// Optional capacity hint, Mbit/s (the engine measures; a hint only seeds it).
    pub rate_mbit: Option<f64>,
    /// A backup path: carries nothing while another path is usable
    /// (docs/protocol.md#backup).
    pub backup: bool,
    /// Link type, cost class and priority (`link`, `cost`, `priority`), registered with
    /// the server (docs/protocol.md#registration); the priority orders paths within
    /// their class (docs/protocol.md#priority); a metered path is an overflow path
    /// (docs/protocol.md#overflow).
    pub attributes: crate::registration::PathAttributes,
    /// A metered path's byte budget per period (`budget`, `budget_reset_day`): once
    /// spent, the path is a backup until the next period (docs/tunnel-config.md#budget).
    pub budget: Option<crate::budget::BudgetConfig>,
}

/// A path's `server`: an address, or a DNS name the daemon resolves at start and again
/// when the path's server stops answering (docs/tunnel-config.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerAddr {
    /// An IP address and port.
    Ip(SocketAddr),
    /// A DNS name (without a trailing dot) and port.
    Name {
        /// The name, e.g. `vpn.example.net`.
        host: String,
        /// The port (7744 unless written).
        port: u16,
    },
}

impl ServerAddr {
    /// The port.
    pub fn port(&self) -> u16 {
        match self {
            ServerAddr::Ip(a) => a.port(),
            ServerAddr::Name { port, .. } => *port,
        }
    }

    /// The address, if it is one (not a name).
    pub fn ip(&self) -> Option<SocketAddr> {
        match self {
            ServerAddr::Ip(a) => Some(*a),
            ServerAddr::Name { .. } => None,
        }
    }
}

impl std::fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerAddr::Ip(a) => a.fmt(f),
            ServerAddr::Name { host, port } => write!(f, "{host}:{port}"),
        }
    }
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
    /// What the daemon gives up after set-up (`[security]`).
    pub security: SecurityConfig,
    /// Masquerade traffic from the tunnel out of this interface (`--nat IFACE`).
    pub nat: Option<String>,
    /// Known clients (at least one).
    pub clients: Vec<ClientEntry>,
    /// Stream mode (`[streams]`); `None` = packet mode only.
    pub streams: Option<ServerStreams>,
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

/// `[security]` (docs/tunnel.md#least-privilege): what the daemon gives up once its
/// set-up is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecurityConfig {
    /// The seccomp allow-list and what a system call not on it does (default
    /// [`SeccompMode::Kill`]).
    pub seccomp: SeccompMode,
    /// Keep only CAP_NET_ADMIN (default true).
    pub drop_capabilities: bool,
}

impl Default for SecurityConfig {
    /// What a file without `[security]` means: everything on.
    fn default() -> SecurityConfig {
        SecurityConfig {
            seccomp: SeccompMode::Kill,
            drop_capabilities: true,
        }
    }
}

/// `security.seccomp`: what the kernel does with a system call that is not on the daemon's
/// allow-list ([`crate::sandbox`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeccompMode {
    /// Kill the daemon (SIGSYS; the kernel logs the call's number).
    Kill,
    /// Allow it, and log it in the kernel log (for finding what the list lacks).
    Log,
    /// No filter.
    Off,
}

impl SeccompMode {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [SeccompMode; 3] = [SeccompMode::Kill, SeccompMode::Log, SeccompMode::Off];

    /// The name in the config file.
    pub fn name(self) -> &'static str {
        match self {
            SeccompMode::Kill => "kill",
            SeccompMode::Log => "log",
            SeccompMode::Off => "off",
        }
    }

    /// The mode named `name`, if any.
    pub fn from_name(name: &str) -> Option<SeccompMode> {
        SeccompMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// `[streams]` of a client (docs/tunnel.md#stream-mode): which TCP connections are
/// terminated here and carried as streams, and the listeners that take them.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientStreams {
    /// Redirect matching TCP connections to the transparent listener with nftables
    /// (default true).
    pub transparent: bool,
    /// Port of the transparent listener (default [`DEFAULT_TRANSPARENT_PORT`]), bound on the
    /// wildcard addresses; not 0.
    pub transparent_port: u16,
    /// SOCKS5 listener address (default `None` = no SOCKS5), e.g. `127.0.0.1:1080`; port not
    /// 0, not the transparent listener's port while `transparent` is on.
    pub socks5: Option<SocketAddr>,
    /// RFC 1929 username and password for SOCKS5 (`None` = no authentication), each 1..=255
    /// bytes; only with `socks5`. The password is wiped on drop, and `Zeroizing`'s `Debug`
    /// does not print it.
    pub socks5_auth: Option<(String, Zeroizing<String>)>,
    /// Destination prefixes whose TCP connections use stream mode (default `0.0.0.0/0`,
    /// `::/0`); non-empty, no duplicates, host bits cleared.
    pub destinations: Vec<IpNet>,
    /// Destination ports that use stream mode (default empty = every port); each
    /// 1..=65535, no duplicates.
    pub ports: Vec<u16>,
    /// A connection with no bytes either way for this long is closed (default
    /// [`DEFAULT_STREAM_IDLE_TIMEOUT`]; 1 s to a week).
    pub idle_timeout: Duration,
    /// Connections open at once at most (default and largest [`MAX_STREAMS`]); beyond it
    /// new ones are refused with a log line.
    pub max_connections: usize,
}

/// `[streams]` of a server (docs/tunnel.md#stream-mode): where it connects for its
/// clients and how much each client may hold.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStreams {
    /// Destinations the server connects to for its clients (default `0.0.0.0/0`, `::/0`);
    /// non-empty, no duplicates, host bits cleared.
    pub allow: Vec<IpNet>,
    /// Destinations refused even if allowed; deny wins over allow (default
    /// [`DEFAULT_STREAM_DENY`]; a file's list replaces it, `[]` denies nothing); no
    /// duplicates, host bits cleared.
    pub deny: Vec<IpNet>,
    /// Time a connect to a destination may take (default [`DEFAULT_CONNECT_TIMEOUT`];
    /// 1 to 300 s).
    pub connect_timeout: Duration,
    /// A stream with no bytes either way for this long is closed (default
    /// [`DEFAULT_STREAM_IDLE_TIMEOUT`]; 1 s to a week).
    pub idle_timeout: Duration,
    /// Streams one client may have open at once (default and largest [`MAX_STREAMS`]).
    pub max_streams_per_client: usize,
    /// Bytes the server buffers for one client's streams at most (default
    /// [`DEFAULT_MAX_BUFFERED_MIB`] MiB; 1 to 1024 MiB).
    pub max_buffered_per_client: u64,
}

impl Default for ClientStreams {
    /// What an empty `[streams]` table means.
    fn default() -> ClientStreams {
        ClientStreams {
            transparent: true,
            transparent_port: DEFAULT_TRANSPARENT_PORT,
            socks5: None,
            socks5_auth: None,
            destinations: prefixes(&DEFAULT_STREAM_DESTINATIONS),
            ports: Vec::new(),
            idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
            max_connections: MAX_STREAMS,
        }
    }
}

impl Default for ServerStreams {
    /// What an empty `[streams]` table means.
    fn default() -> ServerStreams {
        ServerStreams {
            allow: prefixes(&DEFAULT_STREAM_DESTINATIONS),
            deny: prefixes(&DEFAULT_STREAM_DENY),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
            max_streams_per_client: MAX_STREAMS,
            max_buffered_per_client: DEFAULT_MAX_BUFFERED_MIB << 20,
        }
    }
}

/// The default lists, which are valid prefixes.
fn prefixes(list: &[&str]) -> Vec<IpNet> {
    list.iter()
        .filter_map(|net| net.parse::<IpNet>().ok())
        .collect()
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
