//! The file's shape as serde reads it: every leaf spanned, nothing checked yet. Every field
//! is optional here so that a missing one gets our own message (with the table's position).

use serde::Deserialize;
use toml::Spanned;

pub(super) type S<T> = Spanned<T>;
pub(super) type List<T> = Option<S<Vec<S<T>>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    pub(super) private_key: Option<S<String>>,
    pub(super) private_key_file: Option<S<String>>,
    pub(super) server_public_key: Option<S<String>>,
    pub(super) preshared_key: Option<S<String>>,
    pub(super) preshared_key_file: Option<S<String>>,
    pub(super) route: List<String>,
    pub(super) tun: Option<S<RawTun>>,
    pub(super) engine: Option<S<RawEngine>>,
    pub(super) control: Option<S<RawControl>>,
    pub(super) path: List<RawPath>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPath {
    pub(super) name: Option<S<String>>,
    pub(super) server: Option<S<String>>,
    pub(super) bind: Option<S<String>>,
    pub(super) device: Option<S<String>>,
    pub(super) mtu: Option<S<i64>>,
    pub(super) rate_mbit: Option<S<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) private_key: Option<S<String>>,
    pub(super) private_key_file: Option<S<String>>,
    pub(super) listen: List<String>,
    pub(super) path_mtu: Option<S<i64>>,
    pub(super) nat: Option<S<String>>,
    pub(super) tun: Option<S<RawTun>>,
    pub(super) engine: Option<S<RawEngine>>,
    pub(super) control: Option<S<RawControl>>,
    pub(super) client: List<RawClientEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClientEntry {
    pub(super) name: Option<S<String>>,
    pub(super) public_key: Option<S<String>>,
    pub(super) preshared_key: Option<S<String>>,
    pub(super) preshared_key_file: Option<S<String>>,
    pub(super) allowed_ips: List<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTun {
    pub(super) name: Option<S<String>>,
    pub(super) addresses: List<String>,
    pub(super) mtu: Option<S<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEngine {
    pub(super) scheduler: Option<S<String>>,
    pub(super) reorder: Option<S<String>>,
    pub(super) max_hold_ms: Option<S<i64>>,
    pub(super) repair: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub(super) status_socket: Option<S<String>>,
    pub(super) metrics: Option<S<String>>,
}
