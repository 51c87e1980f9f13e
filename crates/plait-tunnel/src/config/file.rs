//! The file's shape as serde reads it: which fields exist (any other is refused), which are
//! required, their defaults, and each value's type ([`super::values`]), which checks it as
//! it is read. What is spanned is what a later check must point at.
//!
//! Invariant: a missing required field is serde's "missing field" error, worded by
//! [`required`]; an optional field without a default here is an `Option` whose default is
//! applied where the public type is built.

use serde::Deserialize;
use toml::Spanned as S;

use super::values::{
    BindAddr, BufferMib, ByteSize, CongestionName, ConnectSecs, CostName, DevicesValue, Dscp,
    FecName, FileName, FlowActionName, FlowProtocol, HoldMs, IdleSecs, IfName, KeyText, Label,
    LinkName, MAX_NAME, PathMtu, Port, PortAddr, Priority, RateMbit, RekeySecs, ReorderName,
    ResetDay, SchedulerName, SeccompName, ServerAddr, Socks5Password, Socks5Username, StreamCount,
    TunMtu, UnorderedKbps,
};
use super::{DEFAULT_PATH_MTU, DEFAULT_TUN_NAME};

/// A list whose elements are checked one by one after reading, so that an element's error
/// is placed at the element (toml would place it at the array).
pub(super) type List = S<Vec<S<String>>>;
/// The same, of integers.
pub(super) type IntList = S<Vec<S<i64>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClientFile {
    pub(super) private_key: Option<S<KeyText>>,
    pub(super) private_key_file: Option<S<FileName>>,
    pub(super) server_public_key: S<KeyText>,
    pub(super) preshared_key: Option<S<KeyText>>,
    pub(super) preshared_key_file: Option<S<FileName>>,
    pub(super) route: Option<List>,
    /// Default `DEFAULT_STATE_DIR`.
    pub(super) state_dir: Option<S<FileName>>,
    /// Default `DEFAULT_LINK_SIGNAL_FILE`.
    pub(super) link_signal_file: Option<S<FileName>>,
    pub(super) tun: TunFile,
    #[serde(default)]
    pub(super) engine: EngineFile,
    #[serde(default)]
    pub(super) control: ControlFile,
    #[serde(default)]
    pub(super) security: SecurityFile,
    pub(super) path: S<Vec<S<PathFile>>>,
    /// `None`: no `[streams]` table, packet mode only.
    pub(super) streams: Option<ClientStreamsFile>,
    #[serde(default)]
    pub(super) policy: Vec<S<PolicyFile>>,
    /// `[test_only]`: knobs for root tests, never for a deployment.
    #[serde(default)]
    pub(super) test_only: TestOnlyFile,
}

/// `[test_only]` of a client: each `None` is the daemon's normal behaviour.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TestOnlyFile {
    pub(super) rekey_after_s: Option<RekeySecs>,
}

/// One `[[policy]]` rule (docs/protocol.md#flow-policy); each `None` matches anything.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyFile {
    pub(super) protocol: Option<FlowProtocol>,
    pub(super) ports: Option<Vec<Port>>,
    pub(super) prefixes: Option<List>,
    pub(super) dscp: Option<Vec<Dscp>>,
    pub(super) action: FlowActionName,
}

/// Each `None` is the default of [`super::ClientStreams`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClientStreamsFile {
    pub(super) transparent: Option<bool>,
    pub(super) transparent_port: Option<Port>,
    pub(super) socks5: Option<S<PortAddr>>,
    pub(super) socks5_username: Option<S<Socks5Username>>,
    pub(super) socks5_password: Option<S<Socks5Password>>,
    pub(super) socks5_password_file: Option<S<FileName>>,
    pub(super) destinations: Option<List>,
    pub(super) ports: Option<IntList>,
    pub(super) idle_timeout_s: Option<IdleSecs>,
    pub(super) max_connections: Option<StreamCount>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PathFile {
    pub(super) name: S<Label>,
    pub(super) server: S<ServerAddr>,
    pub(super) bind: Option<S<BindAddr>>,
    pub(super) device: Option<S<IfName>>,
    pub(super) devices: Option<S<DevicesValue>>,
    #[serde(default = "default_path_mtu")]
    pub(super) mtu: PathMtu,
    pub(super) rate_mbit: Option<RateMbit>,
    pub(super) backup: Option<bool>,
    pub(super) link: Option<LinkName>,
    pub(super) cost: Option<S<CostName>>,
    pub(super) priority: Option<Priority>,
    pub(super) budget: Option<S<ByteSize>>,
    pub(super) budget_reset_day: Option<S<ResetDay>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerFile {
    pub(super) private_key: Option<S<KeyText>>,
    pub(super) private_key_file: Option<S<FileName>>,
    /// Default `DEFAULT_LISTEN`.
    pub(super) listen: Option<List>,
    #[serde(default = "default_path_mtu")]
    pub(super) path_mtu: PathMtu,
    pub(super) nat: Option<IfName>,
    pub(super) tun: TunFile,
    #[serde(default)]
    pub(super) engine: EngineFile,
    #[serde(default)]
    pub(super) control: ControlFile,
    #[serde(default)]
    pub(super) security: SecurityFile,
    pub(super) client: S<Vec<ClientEntryFile>>,
    /// `None`: no `[streams]` table, packet mode only.
    pub(super) streams: Option<ServerStreamsFile>,
    #[serde(default)]
    pub(super) policy: Vec<S<PolicyFile>>,
}

/// Each `None` is the default of [`super::ServerStreams`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerStreamsFile {
    pub(super) allow: Option<List>,
    pub(super) deny: Option<List>,
    pub(super) connect_timeout_s: Option<ConnectSecs>,
    pub(super) idle_timeout_s: Option<IdleSecs>,
    pub(super) max_streams_per_client: Option<StreamCount>,
    pub(super) max_buffered_mib_per_client: Option<BufferMib>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClientEntryFile {
    pub(super) name: S<Label>,
    pub(super) public_key: S<KeyText>,
    pub(super) preshared_key: Option<S<KeyText>>,
    pub(super) preshared_key_file: Option<S<FileName>>,
    pub(super) allowed_ips: List,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TunFile {
    #[serde(default = "default_tun_name")]
    pub(super) name: IfName,
    pub(super) addresses: List,
    pub(super) mtu: Option<S<TunMtu>>,
}

/// Each `None` is the engine's own default (`EngineSettings::default()`).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EngineFile {
    pub(super) scheduler: Option<SchedulerName>,
    pub(super) reorder: Option<ReorderName>,
    pub(super) max_hold_ms: Option<HoldMs>,
    pub(super) repair: Option<bool>,
    pub(super) congestion: Option<CongestionName>,
    pub(super) stream_scheduler: Option<SchedulerName>,
    pub(super) packet_pacing: Option<bool>,
    pub(super) unordered_below_kbps: Option<UnorderedKbps>,
    pub(super) fec: Option<FecName>,
    pub(super) handover: Option<bool>,
}

/// `status_socket`'s default depends on the role.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ControlFile {
    pub(super) status_socket: Option<S<FileName>>,
    pub(super) metrics: Option<PortAddr>,
}

/// Each `None` is the default of [`super::SecurityConfig`].
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SecurityFile {
    pub(super) seccomp: Option<SeccompName>,
    pub(super) drop_capabilities: Option<bool>,
}

fn default_path_mtu() -> PathMtu {
    super::values::Mtu(DEFAULT_PATH_MTU)
}

fn default_tun_name() -> IfName {
    IfName(DEFAULT_TUN_NAME.to_owned())
}

/// What a required field holds, for the message saying it is missing (serde's own names
/// only the field).
pub(super) fn required(field: &str) -> String {
    match field {
        "server_public_key" => {
            "the server's public key (base64, `plait pubkey` of its private key)".to_owned()
        }
        "tun" => "a [tun] table with at least `addresses` is required".to_owned(),
        "addresses" => {
            "the tunnel's own addresses with prefix length, e.g. [\"10.77.0.2/24\"]".to_owned()
        }
        "path" => "at least one [[path]] table is required".to_owned(),
        "client" => "at least one [[client]] table is required".to_owned(),
        "name" => format!("a name (1 to {MAX_NAME} of A-Z a-z 0-9 _ . -)"),
        "server" => "the server's address for this path, e.g. \"198.51.100.1:7744\"".to_owned(),
        "public_key" => "the client's public key (base64)".to_owned(),
        "allowed_ips" => "the client's tunnel addresses and the prefixes behind it, \
                          e.g. [\"10.77.0.2/32\"]"
            .to_owned(),
        _ => format!("`{field}` is required"),
    }
}
