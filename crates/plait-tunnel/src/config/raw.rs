//! The file's shape as serde reads it: every leaf spanned, each value already checked on
//! its own by its type ([`super::values`]). Every field is optional here so that a missing
//! one gets our own message (with the table's position); what depends on several fields
//! is checked afterwards. List elements stay text here and are checked by the same types
//! one by one ([`super::Ctx::element`]): toml places an element's error at its array, and
//! the error must name the element.

use serde::Deserialize;
use toml::Spanned;

use super::values::{
    BindAddr, HoldMs, IfName, KeyText, Label, PathMtu, PeerAddr, PortAddr, RateMbit, ReorderName,
    SchedulerName, TunMtu,
};

pub(super) type S<T> = Spanned<T>;
pub(super) type List<T> = Option<S<Vec<S<T>>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    pub(super) private_key: Option<S<KeyText>>,
    pub(super) private_key_file: Option<S<String>>,
    pub(super) server_public_key: Option<S<KeyText>>,
    pub(super) preshared_key: Option<S<KeyText>>,
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
    pub(super) name: Option<S<Label>>,
    pub(super) server: Option<S<PeerAddr>>,
    pub(super) bind: Option<S<BindAddr>>,
    pub(super) device: Option<S<IfName>>,
    pub(super) mtu: Option<S<PathMtu>>,
    pub(super) rate_mbit: Option<S<RateMbit>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) private_key: Option<S<KeyText>>,
    pub(super) private_key_file: Option<S<String>>,
    pub(super) listen: List<String>,
    pub(super) path_mtu: Option<S<PathMtu>>,
    pub(super) nat: Option<S<IfName>>,
    pub(super) tun: Option<S<RawTun>>,
    pub(super) engine: Option<S<RawEngine>>,
    pub(super) control: Option<S<RawControl>>,
    pub(super) client: List<RawClientEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClientEntry {
    pub(super) name: Option<S<Label>>,
    pub(super) public_key: Option<S<KeyText>>,
    pub(super) preshared_key: Option<S<KeyText>>,
    pub(super) preshared_key_file: Option<S<String>>,
    pub(super) allowed_ips: List<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTun {
    pub(super) name: Option<S<IfName>>,
    pub(super) addresses: List<String>,
    pub(super) mtu: Option<S<TunMtu>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEngine {
    pub(super) scheduler: Option<S<SchedulerName>>,
    pub(super) reorder: Option<S<ReorderName>>,
    pub(super) max_hold_ms: Option<S<HoldMs>>,
    pub(super) repair: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub(super) status_socket: Option<S<String>>,
    pub(super) metrics: Option<S<PortAddr>>,
}
