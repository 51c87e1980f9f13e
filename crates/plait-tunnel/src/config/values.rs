//! Values checked as serde reads them: each newtype's `TryFrom` is the one check of its
//! kind, and its error (with the value's position, from toml) names what is wrong.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;
use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use serde::Deserialize;

use super::{DEFAULT_PORT, MAX_HOLD_MS, MIN_IPV4_MTU, MIN_IPV6_MTU};
use crate::keys::Key;

/// Longest interface name Linux accepts (`IFNAMSIZ` - 1).
const MAX_IFNAME: usize = 15;

/// A Linux interface name: 1..=15 bytes, no `/`, `:` or whitespace, not `.` or `..`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct IfName(pub(super) String);

impl TryFrom<String> for IfName {
    type Error = String;

    fn try_from(name: String) -> Result<IfName, String> {
        if name.is_empty() {
            Err("must not be empty".to_owned())
        } else if name.len() > MAX_IFNAME {
            Err(format!(
                "`{name}` is {} bytes; interface names are at most {MAX_IFNAME}",
                name.len()
            ))
        } else if name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            Err(format!(
                "`{name}` is not a valid interface name (no `/`, `:` or whitespace)"
            ))
        } else if name == "." || name == ".." {
            Err(format!("`{name}` is not a valid interface name"))
        } else {
            Ok(IfName(name))
        }
    }
}

/// Longest path or client name.
pub(super) const MAX_NAME: usize = 32;

/// A path or client name: 1 to [`MAX_NAME`] of A-Z a-z 0-9 `_` `.` `-`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Label(pub(super) String);

impl TryFrom<String> for Label {
    type Error = String;

    fn try_from(name: String) -> Result<Label, String> {
        let ok_chars = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if name.is_empty() || name.len() > MAX_NAME || !ok_chars {
            return Err(format!(
                "`{name}` is not a valid name: 1 to {MAX_NAME} of A-Z a-z 0-9 _ . -"
            ));
        }
        Ok(Label(name))
    }
}

/// A key written inline: 44 characters of base64.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct KeyText(pub(super) Key);

impl TryFrom<String> for KeyText {
    type Error = String;

    fn try_from(text: String) -> Result<KeyText, String> {
        Key::from_base64(&text)
            .map(KeyText)
            .map_err(|e| format!("not a key (44 characters of base64): {e}"))
    }
}

/// An integer from `LO` to `HI`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct Int<const LO: i64, const HI: i64>(pub(super) i64);

impl<const LO: i64, const HI: i64> TryFrom<i64> for Int<LO, HI> {
    type Error = String;

    fn try_from(n: i64) -> Result<Self, String> {
        if (LO..=HI).contains(&n) {
            Ok(Int(n))
        } else {
            Err(format!("must be between {LO} and {HI}, got {n}"))
        }
    }
}

/// A path MTU (outer packets): at least the smallest IPv6 MTU (RFC 8200).
pub(super) type PathMtu = Int<MIN_IPV6_MTU, 65535>;
/// A TUN MTU: at least 576 (RFC 791's "every host must accept"); 1280 with IPv6, checked
/// where the addresses are known.
pub(super) type TunMtu = Int<MIN_IPV4_MTU, 65535>;
/// `engine.max_hold_ms`.
pub(super) type HoldMs = Int<1, MAX_HOLD_MS>;

/// Largest `rate_mbit` hint (100 Gbit/s).
const MAX_RATE_MBIT: f64 = 100_000.0;

/// A path's capacity hint, Mbit/s: above 0, at most [`MAX_RATE_MBIT`].
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "f64")]
pub(super) struct RateMbit(pub(super) f64);

impl TryFrom<f64> for RateMbit {
    type Error = String;

    fn try_from(rate: f64) -> Result<RateMbit, String> {
        if rate.is_finite() && rate > 0.0 && rate <= MAX_RATE_MBIT {
            Ok(RateMbit(rate))
        } else {
            Err(format!(
                "must be a number above 0 and at most {MAX_RATE_MBIT}, got {rate}"
            ))
        }
    }
}

/// How an address field treats a bare IP and port 0.
#[derive(Clone, Copy, Debug)]
enum PortRule {
    /// A bare IP means this port; port 0 is refused.
    Default(u16),
    /// A bare IP means port 0; port 0 (any) is allowed.
    AnyAllowed,
    /// The port must be written and nonzero.
    Required,
}

fn socket_addr(text: &str, rule: PortRule) -> Result<SocketAddr, String> {
    let parsed = text.parse::<SocketAddr>().ok().or_else(|| {
        let port = match rule {
            PortRule::Default(port) => port,
            PortRule::AnyAllowed => 0,
            PortRule::Required => return None,
        };
        // A bare address; an IPv6 one may be written in brackets.
        let ip = match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
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
        return Err(format!(
            "`{text}` is not an IP address with port, e.g. {example} \
             (host names are not resolved)"
        ));
    };
    if addr.port() == 0 && !matches!(rule, PortRule::AnyAllowed) {
        return Err(format!("`{text}`: the port must not be 0"));
    }
    Ok(addr)
}

/// A peer's address: a bare IP means the default port 7744; port 0 is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct PeerAddr(pub(super) SocketAddr);

impl TryFrom<String> for PeerAddr {
    type Error = String;

    fn try_from(text: String) -> Result<PeerAddr, String> {
        socket_addr(&text, PortRule::Default(DEFAULT_PORT)).map(PeerAddr)
    }
}

/// A local address to bind: a bare IP means any port, and port 0 is allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct BindAddr(pub(super) SocketAddr);

impl TryFrom<String> for BindAddr {
    type Error = String;

    fn try_from(text: String) -> Result<BindAddr, String> {
        socket_addr(&text, PortRule::AnyAllowed).map(BindAddr)
    }
}

/// A listening endpoint whose port must be written (the metrics endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct PortAddr(pub(super) SocketAddr);

impl TryFrom<String> for PortAddr {
    type Error = String;

    fn try_from(text: String) -> Result<PortAddr, String> {
        socket_addr(&text, PortRule::Required).map(PortAddr)
    }
}

/// A prefix; a bare address is a host prefix; host bits are cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct Prefix(pub(super) IpNet);

impl TryFrom<String> for Prefix {
    type Error = String;

    fn try_from(text: String) -> Result<Prefix, String> {
        text.parse::<IpNet>()
            .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
            .map(|net| Prefix(net.trunc()))
            .map_err(|_| {
                format!("`{text}` is not a prefix, e.g. \"192.168.1.0/24\" or \"2001:db8::/32\"")
            })
    }
}

/// An address of the tunnel itself, with its prefix length (host bits kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct TunAddress(pub(super) IpNet);

impl TryFrom<String> for TunAddress {
    type Error = String;

    fn try_from(text: String) -> Result<TunAddress, String> {
        match text.parse::<IpNet>() {
            Ok(net) => Ok(TunAddress(net)),
            Err(_) if text.parse::<IpAddr>().is_ok() => Err(format!(
                "`{text}` needs a prefix length, e.g. \"{text}/24\" or \"{text}/64\""
            )),
            Err(_) => Err(format!(
                "`{text}` is not an address with prefix length, \
                 e.g. \"10.77.0.2/24\" or \"fd77::2/64\""
            )),
        }
    }
}

/// A scheduler, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct SchedulerName(pub(super) SchedulerKind);

impl TryFrom<String> for SchedulerName {
    type Error = String;

    fn try_from(name: String) -> Result<SchedulerName, String> {
        SchedulerKind::from_name(&name)
            .map(SchedulerName)
            .ok_or_else(|| {
                let names: Vec<&str> = SchedulerKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown scheduler `{name}`; one of: {}", names.join(", "))
            })
    }
}

/// A reorder policy, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct ReorderName(pub(super) ReorderKind);

impl TryFrom<String> for ReorderName {
    type Error = String;

    fn try_from(name: String) -> Result<ReorderName, String> {
        ReorderKind::from_name(&name)
            .map(ReorderName)
            .ok_or_else(|| {
                let names: Vec<&str> = ReorderKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown reorder policy `{name}`; one of: {}",
                    names.join(", ")
                )
            })
    }
}
