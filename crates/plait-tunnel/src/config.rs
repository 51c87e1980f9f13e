//! TOML configuration of `plait client` and `plait server`: the file format, its defaults
//! and every check on it (reference: docs/tunnel-config.md; examples: docs/examples/).
//!
//! Invariant: a [`ClientConfig`] or [`ServerConfig`] returned by `load_*`/`parse_*` has
//! passed every check here: keys decode, addresses parse, every number is in range, names
//! are unique, client prefixes do not overlap. The daemon does not re-check. Every
//! [`ConfigError::Invalid`] names the file, the field by its TOML path (`path[1].server`,
//! `client[0].allowed_ips[2]`) and, when the value is in the file, its line and column.
//!
//! Parsing is two-step: serde fills private `Raw*` structs whose leaves are
//! [`toml::Spanned`] (so every value keeps its position) and which deny unknown fields;
//! then plain code checks them and builds the public types. Relative file names (key files,
//! the status socket) are taken relative to the config file's directory.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use plait_proto::EngineSettings;
use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use toml::Spanned;

use crate::keys::Key;

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
const MIN_IPV6_MTU: i64 = 1280;
/// Smallest TUN MTU for IPv4-only tunnels (RFC 791's "every host must accept").
const MIN_IPV4_MTU: i64 = 576;
/// Longest interface name Linux accepts (`IFNAMSIZ` - 1).
const MAX_IFNAME: usize = 15;
/// Longest path or client name.
const MAX_NAME: usize = 32;
/// Longest `engine.max_hold_ms`.
const MAX_HOLD_MS: i64 = 10_000;
/// Largest `rate_mbit` hint (100 Gbit/s).
const MAX_RATE_MBIT: f64 = 100_000.0;
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

/// Why a config file was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The config file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but is not a valid config. Displayed as
    /// `{file}:{line}:{column}: {field}: {message}`, or `{file}: {field}: {message}` when the
    /// problem has no position (a required field is missing at the top level).
    #[error("{}{}: {field}: {message}", .file.display(), position(.line, .column))]
    Invalid {
        /// The config file (as given to `load_*`/`parse_*`).
        file: PathBuf,
        /// 1-based line of the offending value, key or table header.
        line: Option<usize>,
        /// 1-based column (in characters) of the same.
        column: Option<usize>,
        /// The field's TOML path, e.g. `path[1].server`; `(syntax)` for a TOML syntax error.
        field: String,
        /// What is wrong, and what would be right.
        message: String,
    },
}

impl ConfigError {
    /// The offending field's TOML path (`None` for [`ConfigError::Io`]).
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Invalid { field, .. } => Some(field),
        }
    }

    /// The 1-based line of the offending value, if it has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Invalid { line, .. } => *line,
        }
    }
}

fn position(line: &Option<usize>, column: &Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(":{line}:{column}"),
        (Some(line), None) => format!(":{line}"),
        _ => String::new(),
    }
}

/// Reads and checks a client config file.
pub fn load_client(path: &Path) -> Result<ClientConfig, ConfigError> {
    parse_client(&read(path)?, path)
}

/// Checks a client config; `origin` is the file it came from (for messages and for
/// resolving relative key file names).
pub fn parse_client(text: &str, origin: &Path) -> Result<ClientConfig, ConfigError> {
    let cx = Ctx::new(text, origin);
    let raw: RawClient = cx.deserialize()?;
    cx.client(raw)
}

/// Reads and checks a server config file.
pub fn load_server(path: &Path) -> Result<ServerConfig, ConfigError> {
    parse_server(&read(path)?, path)
}

/// Checks a server config; `origin` is the file it came from (for messages and for
/// resolving relative key file names).
pub fn parse_server(text: &str, origin: &Path) -> Result<ServerConfig, ConfigError> {
    let cx = Ctx::new(text, origin);
    let raw: RawServer = cx.deserialize()?;
    cx.server(raw)
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}

// ---------------------------------------------------------------------------------------
// Raw serde structs: the file's shape, every leaf spanned, nothing checked yet. Every field
// is optional here so that a missing one gets our own message (with the table's position).

type S<T> = Spanned<T>;
type List<T> = Option<S<Vec<S<T>>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    private_key: Option<S<String>>,
    private_key_file: Option<S<String>>,
    server_public_key: Option<S<String>>,
    preshared_key: Option<S<String>>,
    preshared_key_file: Option<S<String>>,
    route: List<String>,
    tun: Option<S<RawTun>>,
    engine: Option<S<RawEngine>>,
    control: Option<S<RawControl>>,
    path: List<RawPath>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    name: Option<S<String>>,
    server: Option<S<String>>,
    bind: Option<S<String>>,
    device: Option<S<String>>,
    mtu: Option<S<i64>>,
    rate_mbit: Option<S<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    private_key: Option<S<String>>,
    private_key_file: Option<S<String>>,
    listen: List<String>,
    path_mtu: Option<S<i64>>,
    nat: Option<S<String>>,
    tun: Option<S<RawTun>>,
    engine: Option<S<RawEngine>>,
    control: Option<S<RawControl>>,
    client: List<RawClientEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClientEntry {
    name: Option<S<String>>,
    public_key: Option<S<String>>,
    preshared_key: Option<S<String>>,
    preshared_key_file: Option<S<String>>,
    allowed_ips: List<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTun {
    name: Option<S<String>>,
    addresses: List<String>,
    mtu: Option<S<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEngine {
    scheduler: Option<S<String>>,
    reorder: Option<S<String>>,
    max_hold_ms: Option<S<i64>>,
    repair: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawControl {
    status_socket: Option<S<String>>,
    metrics: Option<S<String>>,
}

// ---------------------------------------------------------------------------------------
// Checking.

/// The text being checked and where it came from.
struct Ctx<'a> {
    text: &'a str,
    file: &'a Path,
    /// Directory relative file names are resolved against.
    dir: &'a Path,
}

/// How a socket address field treats a bare IP and port 0.
#[derive(Clone, Copy)]
enum PortRule {
    /// A bare IP means this port; port 0 is refused.
    Default(u16),
    /// A bare IP means port 0; port 0 (any) is allowed.
    AnyAllowed,
    /// The port must be written and nonzero.
    Required,
}

impl<'a> Ctx<'a> {
    fn new(text: &'a str, origin: &'a Path) -> Ctx<'a> {
        Ctx {
            text,
            file: origin,
            dir: origin.parent().unwrap_or(Path::new("")),
        }
    }

    fn invalid(
        &self,
        field: impl Into<String>,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = match span {
            Some(span) => {
                let (line, column) = line_column(self.text, span.start);
                (Some(line), Some(column))
            }
            None => (None, None),
        };
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// An error about a value that is in the file.
    fn at<T>(&self, field: &str, value: &S<T>, message: impl Into<String>) -> ConfigError {
        self.invalid(field, Some(value.span()), message)
    }

    fn deserialize<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        toml::from_str(self.text).map_err(|e| self.toml_error(&e))
    }

    /// Turns toml's error into ours: position from its span, field from the document tree.
    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let mut message = tidy(e.message());
        let span = e.span();
        let named = backticked_field(e.message());
        // toml's "duplicate key" does not say which; its span is the second occurrence.
        if let Some(key) = span
            .as_ref()
            .filter(|_| message == "duplicate key")
            .and_then(|span| self.text.get(span.clone()))
            .filter(|key| !key.is_empty())
        {
            message = format!("duplicate key `{key}`");
        }
        let field = match (toml::de::DeTable::parse(self.text), &span) {
            // The document does not parse: a syntax error.
            (Err(_), _) => "(syntax)".to_owned(),
            (Ok(doc), Some(span)) => {
                let at = field_at(doc.get_ref(), span.start).unwrap_or_default();
                match named {
                    // The span is the table that lacks the field.
                    Some(name) if e.message().starts_with("missing field") => join(&at, name),
                    _ if at.is_empty() => named.unwrap_or("(document)").to_owned(),
                    _ => at,
                }
            }
            (Ok(_), None) => named.unwrap_or("(document)").to_owned(),
        };
        self.invalid(field, span, message)
    }

    // --- client -------------------------------------------------------------------------

    fn client(&self, raw: RawClient) -> Result<ClientConfig, ConfigError> {
        let private_key = self.private_key(raw.private_key, raw.private_key_file)?;
        let Some(spk) = &raw.server_public_key else {
            return Err(self.invalid(
                "server_public_key",
                None,
                "missing: the server's public key (base64, `plait pubkey` of its private key)",
            ));
        };
        let server_public_key = self.key("server_public_key", spk)?;
        if server_public_key == private_key.public() {
            return Err(self.at(
                "server_public_key",
                spk,
                "is this client's own public key; give the server's",
            ));
        }
        let preshared_key = self.key_source(
            "",
            "preshared_key",
            raw.preshared_key,
            raw.preshared_key_file,
        )?;
        let route = match &raw.route {
            Some(list) => self.prefixes("route", list)?,
            None => Vec::new(),
        };
        Ok(ClientConfig {
            private_key,
            server_public_key,
            preshared_key,
            tun: self.tun(raw.tun)?,
            engine: self.engine(raw.engine)?,
            control: self.control(raw.control, DEFAULT_CLIENT_STATUS_SOCKET)?,
            route,
            paths: self.paths(raw.path)?,
        })
    }

    fn paths(&self, raw: List<RawPath>) -> Result<Vec<PathConfig>, ConfigError> {
        let Some(list) = raw else {
            return Err(self.invalid(
                "path",
                None,
                "missing: at least one [[path]] table is required",
            ));
        };
        if list.get_ref().is_empty() {
            return Err(self.at("path", &list, "at least one [[path]] table is required"));
        }
        let mut paths: Vec<PathConfig> = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        for (i, raw) in list.into_inner().into_iter().enumerate() {
            let prefix = format!("path[{i}]");
            if i >= plait_proto::MAX_PATHS {
                return Err(self.at(
                    &prefix,
                    &raw,
                    format!(
                        "too many paths: at most {} [[path]] tables",
                        plait_proto::MAX_PATHS
                    ),
                ));
            }
            let name_span = raw.get_ref().name.as_ref().map(|v| v.span());
            let path = self.path(&prefix, raw)?;
            if let Some(j) = names.insert(path.name.clone(), i) {
                return Err(self.invalid(
                    format!("{prefix}.name"),
                    name_span,
                    format!("`{}` is already the name of path[{j}]", path.name),
                ));
            }
            paths.push(path);
        }
        Ok(paths)
    }

    fn path(&self, prefix: &str, raw: S<RawPath>) -> Result<PathConfig, ConfigError> {
        let table = raw.span();
        let raw = raw.into_inner();
        let field = |name: &str| format!("{prefix}.{name}");
        let name = self.required_label(&field("name"), raw.name.as_ref(), &table)?;
        let Some(server_raw) = &raw.server else {
            return Err(self.invalid(
                field("server"),
                Some(table),
                "missing: the server's address for this path, e.g. \"198.51.100.1:7744\"",
            ));
        };
        let server = self.socket_addr(
            &field("server"),
            server_raw,
            PortRule::Default(DEFAULT_PORT),
        )?;
        if server.ip().is_unspecified() {
            return Err(self.at(
                &field("server"),
                server_raw,
                "must be the server's address, not the unspecified address",
            ));
        }
        let bind = match &raw.bind {
            Some(v) => {
                let bind = self.socket_addr(&field("bind"), v, PortRule::AnyAllowed)?;
                if bind.is_ipv4() != server.is_ipv4() {
                    return Err(self.at(
                        &field("bind"),
                        v,
                        format!(
                            "is an {} address but `server` ({server}) is {}; \
                             both must be the same family",
                            family(bind.ip()),
                            family(server.ip())
                        ),
                    ));
                }
                Some(bind)
            }
            None => None,
        };
        let device = match &raw.device {
            Some(v) => Some(self.iface_name(&field("device"), v)?),
            None => None,
        };
        let mtu = match &raw.mtu {
            Some(v) => self.int_in(&field("mtu"), v, MIN_IPV6_MTU, 65535)? as u16,
            None => DEFAULT_PATH_MTU,
        };
        let rate_mbit = match &raw.rate_mbit {
            Some(v) => {
                let rate = *v.get_ref();
                if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE_MBIT) {
                    return Err(self.at(
                        &field("rate_mbit"),
                        v,
                        format!("must be a number above 0 and at most {MAX_RATE_MBIT}, got {rate}"),
                    ));
                }
                Some(rate)
            }
            None => None,
        };
        Ok(PathConfig {
            name,
            server,
            bind,
            device,
            mtu,
            rate_mbit,
        })
    }

    // --- server -------------------------------------------------------------------------

    fn server(&self, raw: RawServer) -> Result<ServerConfig, ConfigError> {
        let private_key = self.private_key(raw.private_key, raw.private_key_file)?;
        let listen = match &raw.listen {
            Some(list) => {
                if list.get_ref().is_empty() {
                    return Err(self.at("listen", list, "at least one address is required"));
                }
                let mut out: Vec<SocketAddr> = Vec::new();
                for (i, v) in list.get_ref().iter().enumerate() {
                    let field = format!("listen[{i}]");
                    let addr = self.socket_addr(&field, v, PortRule::Default(DEFAULT_PORT))?;
                    if let Some(j) = out.iter().position(|a| *a == addr) {
                        return Err(self.at(
                            &field,
                            v,
                            format!("{addr} is listed twice (listen[{j}])"),
                        ));
                    }
                    out.push(addr);
                }
                out
            }
            None => vec![DEFAULT_LISTEN.parse().expect("valid default")],
        };
        let path_mtu = match &raw.path_mtu {
            Some(v) => self.int_in("path_mtu", v, MIN_IPV6_MTU, 65535)? as u16,
            None => DEFAULT_PATH_MTU,
        };
        let nat = match &raw.nat {
            Some(v) => Some(self.iface_name("nat", v)?),
            None => None,
        };
        let tun = self.tun(raw.tun)?;
        let engine = self.engine(raw.engine)?;
        let control = self.control(raw.control, DEFAULT_SERVER_STATUS_SOCKET)?;
        let clients = self.clients(raw.client, &private_key.public())?;
        Ok(ServerConfig {
            private_key,
            listen,
            path_mtu,
            tun,
            engine,
            control,
            nat,
            clients,
        })
    }

    fn clients(
        &self,
        raw: List<RawClientEntry>,
        server_public: &Key,
    ) -> Result<Vec<ClientEntry>, ConfigError> {
        let Some(list) = raw else {
            return Err(self.invalid(
                "client",
                None,
                "missing: at least one [[client]] table is required",
            ));
        };
        if list.get_ref().is_empty() {
            return Err(self.at("client", &list, "at least one [[client]] table is required"));
        }
        let mut clients: Vec<ClientEntry> = Vec::new();
        for (i, raw) in list.into_inner().into_iter().enumerate() {
            let prefix = format!("client[{i}]");
            let field = |name: &str| format!("{prefix}.{name}");
            let table = raw.span();
            let raw = raw.into_inner();

            let name = self.required_label(&field("name"), raw.name.as_ref(), &table)?;
            if let Some(j) = clients.iter().position(|c| c.name == name) {
                let v = raw.name.as_ref().expect("checked by required_label");
                return Err(self.at(
                    &field("name"),
                    v,
                    format!("`{name}` is already the name of client[{j}]"),
                ));
            }

            let Some(pk) = &raw.public_key else {
                return Err(self.invalid(
                    field("public_key"),
                    Some(table),
                    "missing: the client's public key (base64)",
                ));
            };
            let public_key = self.key(&field("public_key"), pk)?;
            if public_key == *server_public {
                return Err(self.at(
                    &field("public_key"),
                    pk,
                    "is the server's own public key; give the client's",
                ));
            }
            if let Some(j) = clients.iter().position(|c| c.public_key == public_key) {
                return Err(self.at(
                    &field("public_key"),
                    pk,
                    format!(
                        "is already the key of client[{j}] (`{}`); each client needs its own key",
                        clients[j].name
                    ),
                ));
            }

            let preshared_key = self.key_source(
                &format!("{prefix}."),
                "preshared_key",
                raw.preshared_key,
                raw.preshared_key_file,
            )?;

            let Some(ips) = &raw.allowed_ips else {
                return Err(self.invalid(
                    field("allowed_ips"),
                    Some(table),
                    "missing: the client's tunnel addresses and the prefixes behind it, \
                     e.g. [\"10.77.0.2/32\"]",
                ));
            };
            if ips.get_ref().is_empty() {
                return Err(self.at(
                    &field("allowed_ips"),
                    ips,
                    "at least one prefix is required",
                ));
            }
            let allowed_ips = self.prefixes(&field("allowed_ips"), ips)?;
            for (k, net) in allowed_ips.iter().enumerate() {
                for (j, other) in clients.iter().enumerate() {
                    if let Some((l, theirs)) = other
                        .allowed_ips
                        .iter()
                        .enumerate()
                        .find(|(_, o)| overlap(net, o))
                    {
                        return Err(self.at(
                            &format!("{prefix}.allowed_ips[{k}]"),
                            &ips.get_ref()[k],
                            format!(
                                "{net} overlaps {theirs} (client[{j}].allowed_ips[{l}]): \
                                 clients `{}` and `{name}` would both own those addresses",
                                other.name
                            ),
                        ));
                    }
                }
            }

            clients.push(ClientEntry {
                name,
                public_key,
                preshared_key,
                allowed_ips,
            });
        }
        Ok(clients)
    }

    // --- tables shared by both roles ----------------------------------------------------

    fn tun(&self, raw: Option<S<RawTun>>) -> Result<TunConfig, ConfigError> {
        let Some(raw) = raw else {
            return Err(self.invalid(
                "tun",
                None,
                "missing: a [tun] table with at least `addresses` is required",
            ));
        };
        let table = raw.span();
        let raw = raw.into_inner();
        let name = match &raw.name {
            Some(v) => self.iface_name("tun.name", v)?,
            None => DEFAULT_TUN_NAME.to_owned(),
        };
        let Some(list) = &raw.addresses else {
            return Err(self.invalid(
                "tun.addresses",
                Some(table),
                "missing: the tunnel's own addresses with prefix length, e.g. [\"10.77.0.2/24\"]",
            ));
        };
        if list.get_ref().is_empty() {
            return Err(self.at("tun.addresses", list, "at least one address is required"));
        }
        let mut addresses: Vec<IpNet> = Vec::new();
        for (i, v) in list.get_ref().iter().enumerate() {
            let field = format!("tun.addresses[{i}]");
            if i >= 2 {
                return Err(self.at(&field, v, "at most two addresses: one IPv4 and one IPv6"));
            }
            let text = v.get_ref().as_str();
            let net: IpNet = match text.parse() {
                Ok(net) => net,
                Err(_) if text.parse::<IpAddr>().is_ok() => {
                    return Err(self.at(
                        &field,
                        v,
                        format!(
                            "`{text}` needs a prefix length, e.g. \"{text}/24\" or \"{text}/64\""
                        ),
                    ));
                }
                Err(_) => {
                    return Err(self.at(
                        &field,
                        v,
                        format!(
                            "`{text}` is not an address with prefix length, \
                             e.g. \"10.77.0.2/24\" or \"fd77::2/64\""
                        ),
                    ));
                }
            };
            if addresses
                .iter()
                .any(|a| a.addr().is_ipv4() == net.addr().is_ipv4())
            {
                return Err(self.at(
                    &field,
                    v,
                    format!(
                        "a second {} address; at most one IPv4 and one IPv6",
                        family(net.addr())
                    ),
                ));
            }
            addresses.push(net);
        }
        let has_v6 = addresses.iter().any(|a| a.addr().is_ipv6());
        let mtu = match &raw.mtu {
            Some(v) => {
                let mtu = self.int_in("tun.mtu", v, MIN_IPV4_MTU, 65535)?;
                if has_v6 && mtu < MIN_IPV6_MTU {
                    return Err(self.at(
                        "tun.mtu",
                        v,
                        format!(
                            "must be at least {MIN_IPV6_MTU} when the tunnel has an IPv6 \
                             address, got {mtu}"
                        ),
                    ));
                }
                Some(mtu as u16)
            }
            None => None,
        };
        Ok(TunConfig {
            name,
            addresses,
            mtu,
        })
    }

    fn engine(&self, raw: Option<S<RawEngine>>) -> Result<EngineSettings, ConfigError> {
        let mut engine = EngineSettings::default();
        let Some(raw) = raw else {
            return Ok(engine);
        };
        let raw = raw.into_inner();
        if let Some(v) = &raw.scheduler {
            engine.scheduler = SchedulerKind::from_name(v.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = SchedulerKind::ALL.iter().map(|k| k.name()).collect();
                self.at(
                    "engine.scheduler",
                    v,
                    format!(
                        "unknown scheduler `{}`; one of: {}",
                        v.get_ref(),
                        names.join(", ")
                    ),
                )
            })?;
        }
        if let Some(v) = &raw.reorder {
            engine.reorder = ReorderKind::from_name(v.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = ReorderKind::ALL.iter().map(|k| k.name()).collect();
                self.at(
                    "engine.reorder",
                    v,
                    format!(
                        "unknown reorder policy `{}`; one of: {}",
                        v.get_ref(),
                        names.join(", ")
                    ),
                )
            })?;
        }
        if let Some(v) = &raw.max_hold_ms {
            engine.max_hold =
                Duration::from_millis(self.int_in("engine.max_hold_ms", v, 1, MAX_HOLD_MS)? as u64);
        }
        if let Some(v) = raw.repair {
            engine.repair = v;
        }
        Ok(engine)
    }

    fn control(
        &self,
        raw: Option<S<RawControl>>,
        default_socket: &str,
    ) -> Result<ControlConfig, ConfigError> {
        let mut control = ControlConfig {
            status_socket: PathBuf::from(default_socket),
            metrics: None,
        };
        let Some(raw) = raw else {
            return Ok(control);
        };
        let raw = raw.into_inner();
        if let Some(v) = &raw.status_socket {
            if v.get_ref().is_empty() {
                return Err(self.at("control.status_socket", v, "must not be empty"));
            }
            let path = self.dir.join(v.get_ref());
            if path.as_os_str().len() > MAX_SOCKET_PATH {
                return Err(self.at(
                    "control.status_socket",
                    v,
                    format!(
                        "{} is too long for a Unix socket (at most {MAX_SOCKET_PATH} bytes)",
                        path.display()
                    ),
                ));
            }
            control.status_socket = path;
        }
        if let Some(v) = &raw.metrics {
            control.metrics = Some(self.socket_addr("control.metrics", v, PortRule::Required)?);
        }
        Ok(control)
    }

    // --- leaves -------------------------------------------------------------------------

    /// `private_key` / `private_key_file`: exactly one.
    fn private_key(
        &self,
        inline: Option<S<String>>,
        file: Option<S<String>>,
    ) -> Result<Key, ConfigError> {
        self.key_source("", "private_key", inline, file)?
            .ok_or_else(|| {
                self.invalid(
                    "private_key",
                    None,
                    "missing: give `private_key` (base64) or `private_key_file` \
                     (see `plait genkey`)",
                )
            })
    }

    /// `{prefix}{name}` inline or `{prefix}{name}_file`: at most one; `None` if neither.
    fn key_source(
        &self,
        prefix: &str,
        name: &str,
        inline: Option<S<String>>,
        file: Option<S<String>>,
    ) -> Result<Option<Key>, ConfigError> {
        let inline_field = format!("{prefix}{name}");
        let file_field = format!("{prefix}{name}_file");
        match (inline, file) {
            (Some(_), Some(f)) => Err(self.at(
                &file_field,
                &f,
                format!("give either `{name}` or `{name}_file`, not both"),
            )),
            (Some(v), None) => Ok(Some(self.key(&inline_field, &v)?)),
            (None, Some(f)) => {
                if f.get_ref().is_empty() {
                    return Err(self.at(&file_field, &f, "must not be empty"));
                }
                let path = self.dir.join(f.get_ref());
                Key::read_file(&path)
                    .map(Some)
                    .map_err(|e| self.at(&file_field, &f, e.to_string()))
            }
            (None, None) => Ok(None),
        }
    }

    fn key(&self, field: &str, v: &S<String>) -> Result<Key, ConfigError> {
        Key::from_base64(v.get_ref()).map_err(|e| {
            self.at(
                field,
                v,
                format!("not a key (44 characters of base64): {e}"),
            )
        })
    }

    fn required_label(
        &self,
        field: &str,
        v: Option<&S<String>>,
        table: &Range<usize>,
    ) -> Result<String, ConfigError> {
        let Some(v) = v else {
            return Err(self.invalid(
                field,
                Some(table.clone()),
                format!("missing: a name (1 to {MAX_NAME} of A-Z a-z 0-9 _ . -)"),
            ));
        };
        let name = v.get_ref();
        let ok_chars = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if name.is_empty() || name.len() > MAX_NAME || !ok_chars {
            return Err(self.at(
                field,
                v,
                format!("`{name}` is not a valid name: 1 to {MAX_NAME} of A-Z a-z 0-9 _ . -"),
            ));
        }
        Ok(name.clone())
    }

    /// A Linux interface name: 1..=15 bytes, no `/`, `:` or whitespace, not `.` or `..`.
    fn iface_name(&self, field: &str, v: &S<String>) -> Result<String, ConfigError> {
        let name = v.get_ref();
        let problem = if name.is_empty() {
            Some("must not be empty".to_owned())
        } else if name.len() > MAX_IFNAME {
            Some(format!(
                "`{name}` is {} bytes; interface names are at most {MAX_IFNAME}",
                name.len()
            ))
        } else if name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            Some(format!(
                "`{name}` is not a valid interface name (no `/`, `:` or whitespace)"
            ))
        } else if name == "." || name == ".." {
            Some(format!("`{name}` is not a valid interface name"))
        } else {
            None
        };
        match problem {
            Some(message) => Err(self.at(field, v, message)),
            None => Ok(name.clone()),
        }
    }

    fn int_in(&self, field: &str, v: &S<i64>, lo: i64, hi: i64) -> Result<i64, ConfigError> {
        let n = *v.get_ref();
        if (lo..=hi).contains(&n) {
            Ok(n)
        } else {
            Err(self.at(field, v, format!("must be between {lo} and {hi}, got {n}")))
        }
    }

    fn socket_addr(
        &self,
        field: &str,
        v: &S<String>,
        rule: PortRule,
    ) -> Result<SocketAddr, ConfigError> {
        let text = v.get_ref().as_str();
        let parsed = text.parse::<SocketAddr>().ok().or_else(|| {
            let port = match rule {
                PortRule::Default(port) => port,
                PortRule::AnyAllowed => 0,
                PortRule::Required => return None,
            };
            // A bare address; an IPv6 one may be written in brackets.
            let ip = match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6),
                None => text.parse::<IpAddr>().ok(),
            };
            ip.map(|ip| SocketAddr::new(ip, port))
        });
        let Some(addr) = parsed else {
            let example = match rule {
                PortRule::Required => "\"127.0.0.1:9477\" or \"[::1]:9477\"",
                PortRule::Default(_) => {
                    "\"198.51.100.1:7744\", \"[2001:db8::1]:7744\" or \"198.51.100.1\""
                }
                PortRule::AnyAllowed => "\"192.0.2.10:0\", \"[2001:db8::10]:0\" or \"192.0.2.10\"",
            };
            return Err(self.at(
                field,
                v,
                format!(
                    "`{text}` is not an IP address with port, e.g. {example} \
                     (host names are not resolved)"
                ),
            ));
        };
        if addr.port() == 0 && !matches!(rule, PortRule::AnyAllowed) {
            return Err(self.at(field, v, format!("`{text}`: the port must not be 0")));
        }
        Ok(addr)
    }

    /// A list of prefixes; a bare address is a host prefix; host bits are cleared.
    fn prefixes(&self, field: &str, list: &S<Vec<S<String>>>) -> Result<Vec<IpNet>, ConfigError> {
        list.get_ref()
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let text = v.get_ref().as_str();
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| {
                        self.at(
                            &format!("{field}[{i}]"),
                            v,
                            format!(
                                "`{text}` is not a prefix, \
                                 e.g. \"192.168.1.0/24\" or \"2001:db8::/32\""
                            ),
                        )
                    })
            })
            .collect()
    }
}

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Two prefixes overlap iff one contains the other's network address.
fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The first `` `name` `` of a serde message ("unknown field `x`", "missing field `x`").
fn backticked_field(message: &str) -> Option<&str> {
    if !(message.starts_with("missing field `") || message.starts_with("unknown field `")) {
        return None;
    }
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// serde's wording, in TOML's terms.
fn tidy(message: &str) -> String {
    let mut m = message
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected a sequence", "expected an array")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("invalid type: map", "invalid type: table");
    while let Some(at) = m.find("expected struct ") {
        let rest = &m[at + "expected struct ".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        m = format!("{}expected a table{}", &m[..at], &rest[end..]);
    }
    m
}

/// The TOML path of the smallest key or value whose span holds `pos`.
fn field_at(doc: &toml::de::DeTable<'_>, pos: usize) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    walk_table(doc, "", &mut |span, path| {
        let holds = span.start <= pos && (pos < span.end || (span.is_empty() && pos == span.start));
        // `<=`: on a tie (an array of tables and its first table share the first header's
        // span) the deeper node, visited later, wins.
        if holds && best.as_ref().is_none_or(|(len, _)| span.len() <= *len) {
            best = Some((span.len(), path.to_owned()));
        }
    });
    best.map(|(_, path)| path)
}

/// Calls `visit(span, path)` for every key and every value under `table`.
fn walk_table(
    table: &toml::de::DeTable<'_>,
    prefix: &str,
    visit: &mut dyn FnMut(Range<usize>, &str),
) {
    for (key, value) in table.iter() {
        let path = join(prefix, key.get_ref());
        visit(key.span(), &path);
        walk_value(value, &path, visit);
    }
}

fn walk_value(
    value: &Spanned<toml::de::DeValue<'_>>,
    path: &str,
    visit: &mut dyn FnMut(Range<usize>, &str),
) {
    visit(value.span(), path);
    match value.get_ref() {
        toml::de::DeValue::Table(table) => walk_table(table, path, visit),
        toml::de::DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_value(item, &format!("{path}[{i}]"), visit);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT_EXAMPLE: &str = include_str!("../../../docs/examples/client.toml");
    const SERVER_EXAMPLE: &str = include_str!("../../../docs/examples/server.toml");

    // Key pairs for the tests (not the examples' keys).
    const SK: &str = "WKJKq/lEM1eBNi0Mt8UFDwXVJu6FR42nbNRdUSkmkVU=";
    const CK: &str = "sLfU7wjG0ZTBrCAFEKLEXMUJKwxexfkXJhbgQIhuNmc=";

    fn public(private: &str) -> String {
        Key::from_base64(private).unwrap().public().to_base64()
    }

    fn min_client() -> String {
        format!(
            r#"private_key = "{CK}"
server_public_key = "{sp}"

[tun]
addresses = ["10.77.0.2/24"]

[[path]]
name = "a"
server = "198.51.100.1:7744"
"#,
            sp = public(SK)
        )
    }

    fn min_server() -> String {
        format!(
            r#"private_key = "{SK}"

[tun]
addresses = ["10.77.0.1/24"]

[[client]]
name = "a"
public_key = "{cp}"
allowed_ips = ["10.77.0.2/32"]
"#,
            cp = public(CK)
        )
    }

    fn origin() -> &'static Path {
        Path::new("/etc/plait/test.toml")
    }

    /// 1-based line of the first occurrence of `needle`.
    fn line_of(text: &str, needle: &str) -> usize {
        let at = text
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` not in\n{text}"));
        text[..at].matches('\n').count() + 1
    }

    fn replaced(text: &str, from: &str, to: &str) -> String {
        assert!(text.contains(from), "`{from}` not in\n{text}");
        text.replacen(from, to, 1)
    }

    #[track_caller]
    fn client_err(text: &str) -> (String, Option<usize>, String) {
        match parse_client(text, origin()) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => {
                let shown = e.to_string();
                match e {
                    ConfigError::Invalid {
                        field,
                        line,
                        message,
                        ..
                    } => (field, line, format!("{message} [{shown}]")),
                    ConfigError::Io { .. } => panic!("io error {shown}"),
                }
            }
        }
    }

    #[track_caller]
    fn server_err(text: &str) -> (String, Option<usize>, String) {
        match parse_server(text, origin()) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => {
                let shown = e.to_string();
                match e {
                    ConfigError::Invalid {
                        field,
                        line,
                        message,
                        ..
                    } => (field, line, format!("{message} [{shown}]")),
                    ConfigError::Io { .. } => panic!("io error {shown}"),
                }
            }
        }
    }

    /// Asserts the client config `text` fails on `field` at the line holding `needle`.
    #[track_caller]
    fn client_fails(text: &str, field: &str, needle: &str) -> String {
        let (f, line, message) = client_err(text);
        assert_eq!(f, field, "{message}");
        assert_eq!(line, Some(line_of(text, needle)), "{message}");
        message
    }

    #[track_caller]
    fn server_fails(text: &str, field: &str, needle: &str) -> String {
        let (f, line, message) = server_err(text);
        assert_eq!(f, field, "{message}");
        assert_eq!(line, Some(line_of(text, needle)), "{message}");
        message
    }

    /// Replaces `from` by `to` in the minimal client and asserts it fails on `field` at
    /// the line of `to`'s first line.
    #[track_caller]
    fn client_edit_fails(from: &str, to: &str, field: &str) -> String {
        let text = replaced(&min_client(), from, to);
        client_fails(&text, field, first_value_line(to))
    }

    /// The first line of `to` that is not a table header.
    fn first_value_line(to: &str) -> &str {
        to.lines().find(|l| !l.starts_with('[')).unwrap()
    }

    #[track_caller]
    fn server_edit_fails(from: &str, to: &str, field: &str) -> String {
        let text = replaced(&min_server(), from, to);
        server_fails(&text, field, first_value_line(to))
    }

    #[track_caller]
    fn client_ok(text: &str) -> ClientConfig {
        parse_client(text, origin()).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[track_caller]
    fn server_ok(text: &str) -> ServerConfig {
        parse_server(text, origin()).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    // --- examples ---------------------------------------------------------------------

    #[test]
    fn client_example_parses() {
        let c = client_ok(CLIENT_EXAMPLE);
        assert_eq!(c.paths.len(), 2);
        assert_eq!(c.paths[0].name, "fibre");
        assert_eq!(c.paths[0].device.as_deref(), Some("eth0"));
        assert_eq!(c.paths[1].server, "198.51.100.1:7744".parse().unwrap());
        assert_eq!(c.paths[1].bind, Some("0.0.0.0:0".parse().unwrap()));
        assert_eq!(c.tun.addresses.len(), 2);
        assert_eq!(c.engine, EngineSettings::default());
        assert_eq!(c.control, ControlConfig::client_default());
        assert!(c.route.is_empty());
        assert!(c.preshared_key.is_some());
    }

    #[test]
    fn server_example_parses() {
        let s = server_ok(SERVER_EXAMPLE);
        assert_eq!(s.clients.len(), 2);
        assert_eq!(s.listen, vec!["0.0.0.0:7744".parse().unwrap()]);
        assert_eq!(s.path_mtu, DEFAULT_PATH_MTU);
        assert_eq!(s.engine, EngineSettings::default());
        assert_eq!(s.control, ControlConfig::server_default());
        assert_eq!(s.nat, None);
    }

    /// The integration tests run the two examples against each other.
    #[test]
    fn examples_keys_correspond() {
        let c = client_ok(CLIENT_EXAMPLE);
        let s = server_ok(SERVER_EXAMPLE);
        assert_eq!(c.server_public_key, s.private_key.public());
        let entry = s
            .clients
            .iter()
            .find(|e| e.public_key == c.private_key.public())
            .expect("the server example lists the client example's key");
        assert_eq!(entry.preshared_key, c.preshared_key);
        for addr in &c.tun.addresses {
            assert!(
                entry
                    .allowed_ips
                    .iter()
                    .any(|net| net.contains(&addr.addr())),
                "{addr} not in the server's allowed_ips for the client"
            );
        }
        for addr in &s.tun.addresses {
            assert!(
                c.tun.addresses.iter().any(|net| net.contains(&addr.addr())),
                "server tunnel address {addr} is not on the client's tunnel subnet"
            );
        }
    }

    // --- defaults ---------------------------------------------------------------------

    #[test]
    fn minimal_client_gets_defaults() {
        let c = client_ok(&min_client());
        assert_eq!(c.private_key, Key::from_base64(CK).unwrap());
        assert_eq!(c.preshared_key, None);
        assert_eq!(c.route, Vec::<IpNet>::new());
        assert_eq!(c.tun.name, "plait0");
        assert_eq!(c.tun.mtu, None);
        assert_eq!(
            c.tun.addresses,
            vec!["10.77.0.2/24".parse::<IpNet>().unwrap()]
        );
        assert_eq!(c.engine.scheduler, SchedulerKind::Plait);
        assert_eq!(c.engine.reorder, ReorderKind::Bmp);
        assert_eq!(c.engine.max_hold, Duration::from_millis(1000));
        assert_eq!(
            c.control.status_socket,
            PathBuf::from("/run/plait/client.sock")
        );
        assert_eq!(c.control.metrics, None);
        assert_eq!(
            c.paths,
            vec![PathConfig {
                name: "a".into(),
                server: "198.51.100.1:7744".parse().unwrap(),
                bind: None,
                device: None,
                mtu: 1500,
                rate_mbit: None,
            }]
        );
    }

    #[test]
    fn minimal_server_gets_defaults() {
        let s = server_ok(&min_server());
        assert_eq!(s.listen, vec!["0.0.0.0:7744".parse().unwrap()]);
        assert_eq!(s.path_mtu, 1500);
        assert_eq!(s.nat, None);
        assert_eq!(s.tun.name, "plait0");
        assert_eq!(s.engine, EngineSettings::default());
        assert_eq!(
            s.control.status_socket,
            PathBuf::from("/run/plait/server.sock")
        );
        assert_eq!(s.clients.len(), 1);
        assert_eq!(s.clients[0].preshared_key, None);
    }

    #[test]
    fn default_impls() {
        let tun = TunConfig::default();
        assert_eq!(tun.name, "plait0");
        assert!(tun.addresses.is_empty());
        assert_eq!(tun.mtu, None);
        let engine = EngineSettings::default();
        assert_eq!(engine.scheduler.name(), "plait");
        assert_eq!(engine.reorder.name(), "bmp");
        assert_eq!(engine.max_hold, Duration::from_millis(1000));
    }

    #[test]
    fn full_client_values_are_read() {
        let text = format!(
            r#"{}route = ["0.0.0.0/0", "::/0", "192.168.7.9/24", "10.1.2.3"]
[tun]
name = "pt1"
addresses = ["fd77::2/64", "10.77.0.2/24"]
mtu = 1400
[engine]
scheduler = "min-rtt"
reorder = "none"
max_hold_ms = 250
[control]
status_socket = "run/c.sock"
metrics = "[::1]:9477"
[[path]]
name = "x_1.y-2"
server = "[2001:db8::1]"
bind = "2001:db8::10"
device = "wlan0"
mtu = 9000
rate_mbit = 5
"#,
            &min_client()[..min_client().find("[tun]").unwrap()]
        );
        let c = client_ok(&text);
        assert_eq!(
            c.route,
            ["0.0.0.0/0", "::/0", "192.168.7.0/24", "10.1.2.3/32"]
                .map(|s| s.parse::<IpNet>().unwrap())
                .to_vec()
        );
        assert_eq!(c.tun.name, "pt1");
        assert_eq!(c.tun.mtu, Some(1400));
        assert_eq!(c.engine.scheduler, SchedulerKind::MinRtt);
        assert_eq!(c.engine.reorder, ReorderKind::None);
        assert_eq!(c.engine.max_hold, Duration::from_millis(250));
        assert_eq!(
            c.control.status_socket,
            PathBuf::from("/etc/plait/run/c.sock")
        );
        assert_eq!(c.control.metrics, Some("[::1]:9477".parse().unwrap()));
        let p = &c.paths[0];
        assert_eq!(p.name, "x_1.y-2");
        assert_eq!(p.server, "[2001:db8::1]:7744".parse().unwrap());
        assert_eq!(p.bind, Some("[2001:db8::10]:0".parse().unwrap()));
        assert_eq!(p.device.as_deref(), Some("wlan0"));
        assert_eq!(p.mtu, 9000);
        assert_eq!(p.rate_mbit, Some(5.0));
    }

    #[test]
    fn every_scheduler_and_reorder_name_is_accepted() {
        for kind in SchedulerKind::ALL {
            let text = format!(
                "{}[engine]\nscheduler = \"{}\"\n",
                min_client(),
                kind.name()
            );
            assert_eq!(client_ok(&text).engine.scheduler, kind);
        }
        for kind in ReorderKind::ALL {
            let text = format!("{}[engine]\nreorder = \"{}\"\n", min_client(), kind.name());
            assert_eq!(client_ok(&text).engine.reorder, kind);
        }
    }

    // --- keys -------------------------------------------------------------------------

    #[test]
    fn private_key_and_file_are_exclusive() {
        let text = format!("private_key_file = \"c.key\"\n{}", min_client());
        let m = client_fails(&text, "private_key_file", "private_key_file");
        assert!(m.contains("not both"), "{m}");
    }

    #[test]
    fn private_key_is_required() {
        let text = replaced(&min_client(), &format!("private_key = \"{CK}\"\n"), "");
        let (field, line, m) = client_err(&text);
        assert_eq!((field.as_str(), line), ("private_key", None), "{m}");
        assert!(m.contains("private_key_file"), "{m}");
        assert!(m.starts_with("missing"), "{m}");
        // No position: "{file}: {field}: {message}".
        assert!(
            m.contains("[/etc/plait/test.toml: private_key: missing"),
            "{m}"
        );
    }

    #[test]
    fn bad_private_key_names_the_field() {
        let m = client_edit_fails(
            &format!("private_key = \"{CK}\""),
            "private_key = \"AAAA\"",
            "private_key",
        );
        assert!(m.contains("got 3 bytes, need 32"), "{m}");
        let m = client_edit_fails(
            &format!("private_key = \"{CK}\""),
            "private_key = \"$$$\"",
            "private_key",
        );
        assert!(m.contains("base64"), "{m}");
    }

    #[test]
    fn server_public_key_is_checked() {
        let m = client_edit_fails(
            "server_public_key = ",
            "server_public_key = \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"\n#",
            "server_public_key",
        );
        assert!(m.contains("all-zero"), "{m}");
        let own = format!("server_public_key = \"{}\"\n", public(CK));
        let text = replaced(
            &min_client(),
            &format!("server_public_key = \"{}\"\n", public(SK)),
            &own,
        );
        client_fails(&text, "server_public_key", "server_public_key");
        let text = replaced(
            &min_client(),
            &format!("server_public_key = \"{}\"\n", public(SK)),
            "",
        );
        let (field, line, _) = client_err(&text);
        assert_eq!((field.as_str(), line), ("server_public_key", None));
    }

    #[test]
    fn preshared_key_is_checked() {
        let text = format!("preshared_key = \"short\"\n{}", min_client());
        client_fails(&text, "preshared_key", "preshared_key");
        let psk = Key::generate().unwrap().to_base64();
        let text = format!(
            "preshared_key = \"{psk}\"\npreshared_key_file = \"p.key\"\n{}",
            min_client()
        );
        client_fails(&text, "preshared_key_file", "preshared_key_file");
        let text = format!("preshared_key = \"{psk}\"\n{}", min_client());
        assert_eq!(
            client_ok(&text).preshared_key,
            Some(Key::from_base64(&psk).unwrap())
        );
    }

    #[test]
    fn key_files_are_relative_to_the_config_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("keys")).unwrap();
        let psk = Key::generate().unwrap();
        std::fs::write(dir.path().join("keys/client.key"), format!("{CK}\n")).unwrap();
        std::fs::write(dir.path().join("keys/psk"), psk.to_base64()).unwrap();
        let text = replaced(
            &min_client(),
            &format!("private_key = \"{CK}\""),
            "private_key_file = \"keys/client.key\"\npreshared_key_file = \"keys/psk\"",
        );
        let path = dir.path().join("client.toml");
        std::fs::write(&path, &text).unwrap();
        let c = load_client(&path).unwrap();
        assert_eq!(c.private_key, Key::from_base64(CK).unwrap());
        assert_eq!(c.preshared_key, Some(psk.clone()));

        // An absolute name is used as is.
        let abs = dir.path().join("keys/client.key");
        let text2 = replaced(
            &text,
            "\"keys/client.key\"",
            &format!("\"{}\"", abs.display()),
        );
        let c = parse_client(&text2, Path::new("/nonexistent/client.toml")).unwrap_err();
        // The psk is still relative (to /nonexistent), so it fails, naming its field.
        assert_eq!(c.field(), Some("preshared_key_file"));

        // Server: the same for private_key_file and a client's preshared_key_file.
        std::fs::write(dir.path().join("keys/server.key"), SK).unwrap();
        let text = replaced(
            &min_server(),
            &format!("private_key = \"{SK}\""),
            "private_key_file = \"keys/server.key\"",
        );
        let text = replaced(
            &text,
            "allowed_ips",
            "preshared_key_file = \"keys/psk\"\nallowed_ips",
        );
        let path = dir.path().join("server.toml");
        std::fs::write(&path, &text).unwrap();
        let s = load_server(&path).unwrap();
        assert_eq!(s.private_key, Key::from_base64(SK).unwrap());
        assert_eq!(s.clients[0].preshared_key, Some(psk));

        // A missing key file: the field, its line, and the file's full name.
        let text = replaced(&text, "keys/server.key", "keys/nope.key");
        let e = parse_server(&text, &path).unwrap_err();
        assert_eq!(e.field(), Some("private_key_file"));
        assert_eq!(e.line(), Some(1));
        let shown = e.to_string();
        assert!(
            shown.contains(&dir.path().join("keys/nope.key").display().to_string()),
            "{shown}"
        );
        // A key file holding garbage.
        std::fs::write(dir.path().join("keys/bad.key"), "hello\n").unwrap();
        let text = replaced(&text, "keys/nope.key", "keys/bad.key");
        let e = parse_server(&text, &path).unwrap_err();
        assert_eq!(e.field(), Some("private_key_file"));
        assert!(e.to_string().contains("bad.key"), "{e}");
    }

    // --- paths ------------------------------------------------------------------------

    fn path_table(i: usize) -> String {
        format!(
            "[[path]]\nname = \"p{i}\"\nserver = \"198.51.100.1:{}\"\n",
            7000 + i
        )
    }

    #[test]
    fn paths_are_required() {
        let text = &min_client()[..min_client().find("[[path]]").unwrap()];
        let (field, line, _) = client_err(text);
        assert_eq!((field.as_str(), line), ("path", None));
        let text = format!("path = []\n{text}");
        client_fails(&text, "path", "path = []");
    }

    #[test]
    fn at_most_sixteen_paths() {
        let mut text = min_client();
        for i in 1..16 {
            text.push_str(&path_table(i));
        }
        assert_eq!(client_ok(&text).paths.len(), 16);
        text.push_str("# the 17th\n");
        text.push_str(&path_table(16));
        let (field, line, m) = client_err(&text);
        assert_eq!(field, "path[16]");
        assert_eq!(line, Some(line_of(&text, "# the 17th") + 1), "{m}");
        assert!(m.contains("at most 16"), "{m}");
    }

    #[test]
    fn path_names_are_unique() {
        let text = format!(
            "{}[[path]]\nname = \"a\"\nserver = \"198.51.100.2\"\n",
            min_client()
        );
        let (field, line, m) = client_err(&text);
        assert_eq!(field, "path[1].name");
        assert_eq!(line, Some(text.lines().count() - 1), "{m}");
        assert!(m.contains("path[0]"), "{m}");
    }

    #[test]
    fn path_names_are_checked() {
        for bad in ["", "has space", "é", &"x".repeat(33)] {
            client_edit_fails("name = \"a\"", &format!("name = \"{bad}\""), "path[0].name");
        }
        let text = format!(
            "{}name = \"{}\"\n",
            &min_client()[..min_client().find("name").unwrap()],
            "x".repeat(32)
        );
        let text = format!("{text}server = \"198.51.100.1\"\n");
        client_ok(&text);
        // Missing: reported at the [[path]] header.
        let text = replaced(&min_client(), "name = \"a\"\n", "");
        client_fails(&text, "path[0].name", "[[path]]");
    }

    #[test]
    fn path_server_is_checked() {
        let c = client_ok(&replaced(
            &min_client(),
            "198.51.100.1:7744",
            "198.51.100.1",
        ));
        assert_eq!(c.paths[0].server.port(), DEFAULT_PORT);
        let c = client_ok(&replaced(&min_client(), "198.51.100.1:7744", "2001:db8::1"));
        assert_eq!(c.paths[0].server, "[2001:db8::1]:7744".parse().unwrap());
        for bad in [
            "198.51.100.1:0",
            "vpn.example.com:7744",
            "198.51.100.1:99999",
            "0.0.0.0:7744",
            "",
        ] {
            let m = client_edit_fails(
                "server = \"198.51.100.1:7744\"",
                &format!("server = \"{bad}\""),
                "path[0].server",
            );
            assert!(!m.is_empty());
        }
        let text = replaced(&min_client(), "server = \"198.51.100.1:7744\"\n", "");
        client_fails(&text, "path[0].server", "[[path]]");
    }

    #[test]
    fn path_bind_family_must_match() {
        let text = format!("{}bind = \"192.0.2.10\"\n", min_client());
        assert_eq!(
            client_ok(&text).paths[0].bind,
            Some("192.0.2.10:0".parse().unwrap())
        );
        let text = format!("{}bind = \"[2001:db8::10]:5000\"\n", min_client());
        let m = client_fails(&text, "path[0].bind", "bind");
        assert!(m.contains("same family"), "{m}");
        let text = format!("{}bind = \"eth0\"\n", min_client());
        client_fails(&text, "path[0].bind", "bind");
    }

    #[test]
    fn path_device_is_checked() {
        for bad in ["", "a-very-long-ifname", "eth/0", "eth 0"] {
            let text = format!("{}device = \"{bad}\"\n", min_client());
            client_fails(&text, "path[0].device", "device");
        }
        let text = format!("{}device = \"{}\"\n", min_client(), "e".repeat(15));
        client_ok(&text);
    }

    #[test]
    fn path_mtu_range() {
        for bad in ["1279", "65536", "0", "-1"] {
            let text = format!("{}mtu = {bad}\n", min_client());
            let m = client_fails(&text, "path[0].mtu", "mtu");
            assert!(m.contains("between 1280 and 65535"), "{m}");
        }
        for good in [1280, 65535] {
            let text = format!("{}mtu = {good}\n", min_client());
            assert_eq!(client_ok(&text).paths[0].mtu, good);
        }
    }

    #[test]
    fn path_rate_range() {
        for bad in ["0", "0.0", "-5.0", "100000.5", "nan", "inf"] {
            let text = format!("{}rate_mbit = {bad}\n", min_client());
            client_fails(&text, "path[0].rate_mbit", "rate_mbit");
        }
        let text = format!("{}rate_mbit = 100000\n", min_client());
        assert_eq!(client_ok(&text).paths[0].rate_mbit, Some(100_000.0));
    }

    // --- tun --------------------------------------------------------------------------

    #[test]
    fn tun_is_required() {
        let text = replaced(&min_client(), "[tun]\naddresses = [\"10.77.0.2/24\"]\n", "");
        let (field, line, _) = client_err(&text);
        assert_eq!((field.as_str(), line), ("tun", None));
    }

    #[test]
    fn tun_name_is_checked() {
        for bad in ["", "sixteen-bytes-xx", "a/b", "a b", "a\tb", "a:b", ".."] {
            client_edit_fails("[tun]\n", &format!("[tun]\nname = \"{bad}\"\n"), "tun.name");
        }
    }

    #[test]
    fn tun_addresses_are_checked() {
        let line = "addresses = [\"10.77.0.2/24\"]";
        // Missing: at the [tun] header.
        let text = replaced(&min_client(), &format!("{line}\n"), "");
        client_fails(&text, "tun.addresses", "[tun]");
        client_edit_fails(line, "addresses = []", "tun.addresses");
        client_edit_fails(
            line,
            "addresses = [\"10.77.0.2/24\", \"fd77::2/64\", \"10.9.0.1/24\"]",
            "tun.addresses[2]",
        );
        let m = client_edit_fails(
            line,
            "addresses = [\"10.77.0.2/24\", \"10.9.0.1/24\"]",
            "tun.addresses[1]",
        );
        assert!(m.contains("IPv4"), "{m}");
        client_edit_fails(
            line,
            "addresses = [\"fd77::2/64\", \"fd78::2/64\"]",
            "tun.addresses[1]",
        );
        let m = client_edit_fails(line, "addresses = [\"10.77.0.2\"]", "tun.addresses[0]");
        assert!(m.contains("prefix length"), "{m}");
        client_edit_fails(line, "addresses = [\"10.77.0.2/33\"]", "tun.addresses[0]");
        client_edit_fails(line, "addresses = [\"bogus\"]", "tun.addresses[0]");
        // Host bits are kept: this is the device's own address.
        let c = client_ok(&replaced(
            &min_client(),
            line,
            "addresses = [\"fd77::2/64\"]",
        ));
        assert_eq!(c.tun.addresses[0].to_string(), "fd77::2/64");
    }

    #[test]
    fn tun_mtu_range() {
        for bad in ["575", "65536"] {
            client_edit_fails("[tun]\n", &format!("[tun]\nmtu = {bad}\n"), "tun.mtu");
        }
        // 1279 is fine for IPv4 only, not with an IPv6 address.
        let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtu = 576\n");
        assert_eq!(client_ok(&text).tun.mtu, Some(576));
        let text = replaced(
            &min_client(),
            "[tun]\naddresses = [\"10.77.0.2/24\"]",
            "[tun]\nmtu = 1279\naddresses = [\"10.77.0.2/24\", \"fd77::2/64\"]",
        );
        let m = client_fails(&text, "tun.mtu", "mtu = 1279");
        assert!(m.contains("1280"), "{m}");
    }

    // --- engine, control, route -------------------------------------------------------

    #[test]
    fn engine_names_are_checked() {
        let m = client_edit_fails(
            "[tun]",
            "[engine]\nscheduler = \"fastest\"\n[tun]",
            "engine.scheduler",
        );
        for kind in SchedulerKind::ALL {
            assert!(m.contains(kind.name()), "{m}");
        }
        let m = client_edit_fails(
            "[tun]",
            "[engine]\nreorder = \"sort\"\n[tun]",
            "engine.reorder",
        );
        assert!(m.contains("none, bmp"), "{m}");
    }

    #[test]
    fn engine_max_hold_range() {
        for bad in ["0", "10001", "-3"] {
            let text = format!("{}[engine]\nmax_hold_ms = {bad}\n", min_client());
            client_fails(&text, "engine.max_hold_ms", "max_hold_ms");
        }
        for good in [1u64, 10_000] {
            let text = format!("{}[engine]\nmax_hold_ms = {good}\n", min_client());
            assert_eq!(
                client_ok(&text).engine.max_hold,
                Duration::from_millis(good)
            );
        }
    }

    #[test]
    fn control_is_checked() {
        for bad in ["127.0.0.1", "127.0.0.1:0", "localhost:9477"] {
            let text = format!("{}[control]\nmetrics = \"{bad}\"\n", min_client());
            client_fails(&text, "control.metrics", "metrics");
        }
        let text = format!("{}[control]\nstatus_socket = \"\"\n", min_client());
        client_fails(&text, "control.status_socket", "status_socket");
        let text = format!(
            "{}[control]\nstatus_socket = \"/{}\"\n",
            min_client(),
            "s".repeat(107)
        );
        client_fails(&text, "control.status_socket", "status_socket");
    }

    #[test]
    fn route_prefixes_are_checked() {
        let text = format!(
            "route = [\"10.0.0.0/8\", \"10.0.0.0/99\"]\n{}",
            min_client()
        );
        let m = client_fails(&text, "route[1]", "route");
        assert!(m.contains("10.0.0.0/99"), "{m}");
        let text = format!("route = [\"example.com\"]\n{}", min_client());
        client_fails(&text, "route[0]", "route");
    }

    // --- server -----------------------------------------------------------------------

    #[test]
    fn server_listen_is_checked() {
        let text = format!("listen = []\n{}", min_server());
        server_fails(&text, "listen", "listen");
        let text = format!("listen = [\"0.0.0.0:7744\", \"0.0.0.0\"]\n{}", min_server());
        let m = server_fails(&text, "listen[1]", "listen");
        assert!(m.contains("twice"), "{m}");
        let text = format!("listen = [\"0.0.0.0:0\"]\n{}", min_server());
        server_fails(&text, "listen[0]", "listen");
        let text = format!("listen = [\"*:7744\"]\n{}", min_server());
        server_fails(&text, "listen[0]", "listen");
        let text = format!("listen = [\"192.0.2.1\", \"[::]:7745\"]\n{}", min_server());
        assert_eq!(
            server_ok(&text).listen,
            vec![
                "192.0.2.1:7744".parse().unwrap(),
                "[::]:7745".parse().unwrap()
            ]
        );
    }

    #[test]
    fn server_path_mtu_range() {
        for bad in ["1279", "65536"] {
            let text = format!("path_mtu = {bad}\n{}", min_server());
            server_fails(&text, "path_mtu", "path_mtu");
        }
        let text = format!("path_mtu = 9000\n{}", min_server());
        assert_eq!(server_ok(&text).path_mtu, 9000);
    }

    #[test]
    fn server_nat_is_checked() {
        let text = format!("nat = \"eth 0\"\n{}", min_server());
        server_fails(&text, "nat", "nat");
        let text = format!("nat = \"eth0\"\n{}", min_server());
        assert_eq!(server_ok(&text).nat.as_deref(), Some("eth0"));
    }

    #[test]
    fn server_private_key_rules() {
        let text = replaced(&min_server(), &format!("private_key = \"{SK}\"\n"), "");
        let (field, line, _) = server_err(&text);
        assert_eq!((field.as_str(), line), ("private_key", None));
        let text = format!("private_key_file = \"s.key\"\n{}", min_server());
        server_fails(&text, "private_key_file", "private_key_file");
    }

    fn client_table(name: &str, key: &str, ips: &str) -> String {
        format!("[[client]]\nname = \"{name}\"\npublic_key = \"{key}\"\nallowed_ips = [{ips}]\n")
    }

    #[test]
    fn server_needs_a_client() {
        let text = &min_server()[..min_server().find("[[client]]").unwrap()];
        let (field, line, _) = server_err(text);
        assert_eq!((field.as_str(), line), ("client", None));
        let text = format!("client = []\n{text}");
        server_fails(&text, "client", "client = []");
    }

    #[test]
    fn client_names_are_unique_and_valid() {
        let other = Key::generate().unwrap().public().to_base64();
        let text = format!(
            "{}{}",
            min_server(),
            client_table("a", &other, "\"10.77.0.3/32\"")
        );
        let (field, line, m) = server_err(&text);
        assert_eq!(field, "client[1].name");
        assert_eq!(line, Some(text.lines().count() - 2), "{m}");
        server_edit_fails("name = \"a\"", "name = \"a b\"", "client[0].name");
        let text = replaced(&min_server(), "name = \"a\"\n", "");
        server_fails(&text, "client[0].name", "[[client]]");
    }

    #[test]
    fn client_keys_are_unique_and_not_the_servers() {
        let text = format!(
            "{}{}",
            min_server(),
            client_table("b", &public(CK), "\"10.77.0.3/32\"")
        );
        let (field, line, m) = server_err(&text);
        assert_eq!(field, "client[1].public_key");
        assert_eq!(line, Some(text.lines().count() - 1), "{m}");
        assert!(m.contains("client[0]"), "{m}");

        let m = server_edit_fails(
            &format!("public_key = \"{}\"", public(CK)),
            &format!("public_key = \"{}\"", public(SK)),
            "client[0].public_key",
        );
        assert!(m.contains("server's own"), "{m}");
        server_edit_fails(
            &format!("public_key = \"{}\"", public(CK)),
            "public_key = \"nope\"",
            "client[0].public_key",
        );
        let text = replaced(
            &min_server(),
            &format!("public_key = \"{}\"\n", public(CK)),
            "",
        );
        server_fails(&text, "client[0].public_key", "[[client]]");
    }

    #[test]
    fn client_psk_rules() {
        let psk = Key::generate().unwrap().to_base64();
        let text = replaced(
            &min_server(),
            "allowed_ips",
            &format!("preshared_key = \"{psk}\"\npreshared_key_file = \"x\"\nallowed_ips"),
        );
        server_fails(&text, "client[0].preshared_key_file", "preshared_key_file");
        let text = replaced(
            &min_server(),
            "allowed_ips",
            "preshared_key = \"zz\"\nallowed_ips",
        );
        server_fails(&text, "client[0].preshared_key", "preshared_key");
    }

    #[test]
    fn allowed_ips_are_checked() {
        let line = "allowed_ips = [\"10.77.0.2/32\"]";
        let text = replaced(&min_server(), &format!("{line}\n"), "");
        server_fails(&text, "client[0].allowed_ips", "[[client]]");
        server_edit_fails(line, "allowed_ips = []", "client[0].allowed_ips");
        server_edit_fails(
            line,
            "allowed_ips = [\"10.77.0.2/32\", \"192.168.1.0/24\", \"192.168.1.0/33\"]",
            "client[0].allowed_ips[2]",
        );
        // Bare address = host; host bits cleared.
        let s = server_ok(&replaced(
            &min_server(),
            line,
            "allowed_ips = [\"10.77.0.2\", \"192.168.1.77/24\"]",
        ));
        assert_eq!(
            s.clients[0].allowed_ips,
            ["10.77.0.2/32", "192.168.1.0/24"]
                .map(|s| s.parse::<IpNet>().unwrap())
                .to_vec()
        );
    }

    #[test]
    fn allowed_ips_must_not_overlap_between_clients() {
        let k1 = Key::generate().unwrap().public().to_base64();
        let k2 = Key::generate().unwrap().public().to_base64();
        // Same-client overlap is allowed; different families never overlap.
        let text = format!(
            "{}{}{}",
            min_server(),
            client_table(
                "b",
                &k1,
                "\"10.77.0.3/32\", \"10.77.0.3/32\", \"fd77::/64\""
            ),
            client_table("c", &k2, "\"fd78::/64\", \"10.77.0.4/32\""),
        );
        server_ok(&text);
        // c's 10.77.0.0/24 overlaps a's 10.77.0.2/32 (and b's), reported against a.
        let text = format!(
            "{}{}{}",
            min_server(),
            client_table("b", &k1, "\"10.77.0.3/32\""),
            client_table("c", &k2, "\"fd78::/64\", \"10.77.0.0/24\""),
        );
        let (field, line, m) = server_err(&text);
        assert_eq!(field, "client[2].allowed_ips[1]");
        assert_eq!(line, Some(text.lines().count()), "{m}");
        assert!(m.contains("`a` and `c`"), "{m}");
        assert!(m.contains("client[0].allowed_ips[0]"), "{m}");
    }

    // --- toml's own errors ------------------------------------------------------------

    #[test]
    fn syntax_error_reports_a_line() {
        let text = replaced(&min_client(), "[tun]", "[tun");
        let (field, line, _) = client_err(&text);
        assert_eq!(field, "(syntax)");
        assert_eq!(line, Some(line_of(&text, "[tun")));
        let text = format!("{}name = \n", min_client());
        let (field, line, _) = client_err(&text);
        assert_eq!(
            (field.as_str(), line),
            ("(syntax)", Some(text.lines().count()))
        );
        // A duplicate key is a syntax error too.
        let text = format!("{}name = \"b\"\n", min_client());
        let (field, line, m) = client_err(&text);
        assert_eq!(
            (field.as_str(), line),
            ("(syntax)", Some(text.lines().count()))
        );
        assert!(m.contains("duplicate key `name`"), "{m}");
    }

    #[test]
    fn unknown_fields_report_field_and_line() {
        let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtus = 1400\n");
        let m = client_fails(&text, "tun.mtus", "mtus");
        assert!(m.contains("unknown field"), "{m}");
        let text = format!("servers = []\n{}", min_client());
        client_fails(&text, "servers", "servers");
        let text = format!("{}colour = \"red\"\n", min_client());
        client_fails(&text, "path[0].colour", "colour");
        let text = format!(
            "{}[[path]]\nname = \"b\"\nserver = \"198.51.100.2\"\nspeed = 3\n",
            min_client()
        );
        client_fails(&text, "path[1].speed", "speed");
        let text = format!("{}allowed_ip = []\n", min_server());
        server_fails(&text, "client[0].allowed_ip", "allowed_ip =");
        // The client file's keys are not accepted in a server file.
        let text = format!("route = []\n{}", min_server());
        server_fails(&text, "route", "route");
    }

    #[test]
    fn type_errors_name_the_field() {
        let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtu = \"big\"\n");
        let m = client_fails(&text, "tun.mtu", "mtu");
        assert!(m.contains("expected an integer"), "{m}");
        let text = format!(
            "{}[[path]]\nname = \"b\"\nserver = \"198.51.100.2\"\nmtu = \"big\"\n",
            min_client()
        );
        client_fails(&text, "path[1].mtu", "mtu = \"big\"");
        let text = format!("route = \"0.0.0.0/0\"\n{}", min_client());
        let m = client_fails(&text, "route", "route");
        assert!(m.contains("expected an array"), "{m}");
        let text = format!("route = [\"0.0.0.0/0\", 5]\n{}", min_client());
        client_fails(&text, "route[1]", "route");
        let text = format!(
            "tun = 5\n{}",
            &min_client()[..min_client().find("[tun]").unwrap()]
        );
        let m = client_fails(&text, "tun", "tun = 5");
        assert!(m.contains("expected a table"), "{m}");
        let text = format!("{}rate_mbit = \"fast\"\n", min_client());
        client_fails(&text, "path[0].rate_mbit", "rate_mbit");
        let text = format!("path_mtu = 1500.0\n{}", min_server());
        server_fails(&text, "path_mtu", "path_mtu");
        let text = replaced(&min_server(), "name = \"a\"", "name = 1");
        server_fails(&text, "client[0].name", "name = 1");
    }

    // --- errors and files -------------------------------------------------------------

    #[test]
    fn error_display_has_file_line_column_field() {
        let text = replaced(&min_client(), "[tun]\n", "[tun]\nmtu =   575\n");
        let e = parse_client(&text, Path::new("/etc/plait/client.toml")).unwrap_err();
        let line = line_of(&text, "mtu =");
        assert_eq!(
            e.to_string(),
            format!(
                "/etc/plait/client.toml:{line}:9: tun.mtu: must be between 576 and 65535, got 575"
            )
        );
        let e = ConfigError::Invalid {
            file: "c.toml".into(),
            line: None,
            column: None,
            field: "path".into(),
            message: "missing".into(),
        };
        assert_eq!(e.to_string(), "c.toml: path: missing");
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 3), (2, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é = 1", 5), (1, 5));
        assert_eq!(line_column("ab", 99), (1, 3));
    }

    #[test]
    fn load_reports_unreadable_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let e = load_client(&missing).unwrap_err();
        assert!(matches!(e, ConfigError::Io { .. }), "{e:?}");
        assert!(e.to_string().starts_with("cannot read "), "{e}");
        assert!(e.to_string().contains("nope.toml"), "{e}");
        assert!(matches!(load_server(&missing), Err(ConfigError::Io { .. })));
        let path = dir.path().join("server.toml");
        std::fs::write(&path, min_server()).unwrap();
        assert_eq!(load_server(&path).unwrap(), server_ok(&min_server()));
    }

    #[test]
    fn errors_name_the_origin_file() {
        let text = replaced(&min_server(), "[tun]\n", "[tun]\nname = \"\"\n");
        let e = parse_server(&text, Path::new("/srv/x/server.toml")).unwrap_err();
        assert!(e.to_string().starts_with("/srv/x/server.toml:"), "{e}");
    }
}
