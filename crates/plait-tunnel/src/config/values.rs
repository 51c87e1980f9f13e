//! Values checked as serde reads them: each newtype's `TryFrom` is the one check of its
//! kind, and its error (placed by toml at the value) says what is wrong and what is right.
//!
//! Invariant: a value of one of these types passed its check; nothing here looks at another
//! field or at the file system. List elements are read as text and checked by the same
//! `TryFrom` afterwards, because toml places an element's error at the whole array.

use std::fmt::Display;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use plait_proto::cc::CongestionKind;
use plait_proto::policy::FlowAction;
use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use serde::de::{Deserialize, Deserializer, Error};
use zeroize::Zeroizing;

use super::{DEFAULT_PORT, MAX_HOLD_MS, MIN_IPV4_MTU, MIN_IPV6_MTU, SeccompMode};
use super::{MAX_BUFFERED_MIB, MAX_CONNECT_TIMEOUT_S, MAX_IDLE_TIMEOUT_S, MAX_STREAMS};
use crate::crypto::keypair::{KeyLifetime, MIN_REKEY_AFTER_TIME, REKEY_AFTER_TIME};
use crate::keys::Key;
use crate::socks5::MAX_CREDENTIAL_LEN;

/// `value! { /// doc  Name(Inner) from Raw = |raw| check }` declares `Name(Inner)`, which
/// serde reads as a `Raw` and keeps only if `check` returns `Ok(inner)`; `Err(message)`
/// becomes toml's error at the value. This is serde's `try_from`, spelled once.
macro_rules! value {
    ($(#[doc = $doc:literal])* $name:ident($inner:ty) from $raw:ty = $check:expr) => {
        $(#[doc = $doc])*
        #[derive(Debug)]
        pub(super) struct $name(pub(super) $inner);

        impl TryFrom<$raw> for $name {
            type Error = String;

            fn try_from(raw: $raw) -> Result<$name, String> {
                let check: fn($raw) -> Result<$inner, String> = $check;
                check(raw).map($name)
            }
        }

        impl From<$name> for $inner {
            fn from(value: $name) -> $inner {
                value.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                $name::try_from(<$raw>::deserialize(d)?).map_err(D::Error::custom)
            }
        }
    };
}

/// Longest interface name Linux accepts (`IFNAMSIZ` - 1).
const MAX_IFNAME: usize = 15;
/// Longest path or client name.
pub(super) const MAX_NAME: usize = 32;
/// Largest `rate_mbit` hint (100 Gbit/s).
const MAX_RATE_MBIT: f64 = 100_000.0;

value! {
    /// A Linux interface name: 1 to 15 bytes, no `/`, `:` or whitespace, not `.` or `..`.
    IfName(String) from String = |name| {
        let bad_char = |c: char| c == '/' || c == ':' || c.is_whitespace() || c.is_control();
        if name.is_empty() {
            Err("must not be empty".to_owned())
        } else if name.len() > MAX_IFNAME {
            let len = name.len();
            Err(format!("`{name}` is {len} bytes; interface names are at most {MAX_IFNAME}"))
        } else if name.chars().any(bad_char) {
            Err(format!("`{name}` is not a valid interface name (no `/`, `:` or whitespace)"))
        } else if name == "." || name == ".." {
            Err(format!("`{name}` is not a valid interface name"))
        } else {
            Ok(name)
        }
    }
}

value! {
    /// A path or client name: 1 to [`MAX_NAME`] of A-Z a-z 0-9 `_` `.` `-`.
    Label(String) from String = |name| {
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
        if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(ok) {
            let rule = format!("1 to {MAX_NAME} of A-Z a-z 0-9 _ . -");
            return Err(format!("`{name}` is not a valid name: {rule}"));
        }
        Ok(name)
    }
}

value! {
    /// A key written inline: 44 characters of base64.
    KeyText(Key) from String = |text| {
        Key::from_base64(&text).map_err(|e| format!("not a key (44 characters of base64): {e}"))
    }
}

value! {
    /// A file name (key files, the status socket): not empty. A relative name is resolved
    /// against the config file's directory where it is used.
    FileName(PathBuf) from String = |name| {
        if name.is_empty() {
            return Err("must not be empty".to_owned());
        }
        Ok(PathBuf::from(name))
    }
}

fn out_of_range(lo: impl Display, hi: impl Display, n: i64) -> String {
    format!("must be between {lo} and {hi}, got {n}")
}

/// An MTU, bytes: `MIN` to 65535 (generic, so not a `value!`).
#[derive(Debug, serde::Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct Mtu<const MIN: u16>(pub(super) u16);

impl<const MIN: u16> TryFrom<i64> for Mtu<MIN> {
    type Error = String;

    fn try_from(n: i64) -> Result<Self, String> {
        let mtu = u16::try_from(n).ok().filter(|mtu| *mtu >= MIN);
        mtu.map(Mtu).ok_or_else(|| out_of_range(MIN, u16::MAX, n))
    }
}

/// A path MTU (outer packets): at least the smallest IPv6 MTU (RFC 8200).
pub(super) type PathMtu = Mtu<MIN_IPV6_MTU>;
/// A TUN MTU: at least 576 (RFC 791's "every host must accept"); 1280 with IPv6, checked
/// where the addresses are known.
pub(super) type TunMtu = Mtu<MIN_IPV4_MTU>;

value! {
    /// `engine.max_hold_ms`: 1 to [`MAX_HOLD_MS`] milliseconds.
    HoldMs(Duration) from i64 = |n| {
        let ms = u64::try_from(n).ok().filter(|ms| (1..=MAX_HOLD_MS).contains(ms));
        ms.map(Duration::from_millis).ok_or_else(|| out_of_range(1, MAX_HOLD_MS, n))
    }
}

value! {
    /// `engine.unordered_below_kbps`: 0 (off) to 1,000,000 kbit/s.
    UnorderedKbps(u32) from i64 = |n| {
        u32::try_from(n).ok().filter(|k| *k <= 1_000_000).ok_or_else(|| out_of_range(0, 1_000_000, n))
    }
}

/// A number of seconds, 1 to `MAX` (generic, so not a `value!`).
#[derive(Debug, serde::Deserialize)]
#[serde(try_from = "i64")]
pub(super) struct Seconds<const MAX: u64>(pub(super) Duration);

impl<const MAX: u64> TryFrom<i64> for Seconds<MAX> {
    type Error = String;

    fn try_from(n: i64) -> Result<Self, String> {
        let s = u64::try_from(n).ok().filter(|s| (1..=MAX).contains(s));
        s.map(|s| Seconds(Duration::from_secs(s)))
            .ok_or_else(|| out_of_range(1, MAX, n))
    }
}

/// `streams.idle_timeout_s`: 1 s to a week.
pub(super) type IdleSecs = Seconds<MAX_IDLE_TIMEOUT_S>;
/// `streams.connect_timeout_s` of a server: 1 to 300 s.
pub(super) type ConnectSecs = Seconds<MAX_CONNECT_TIMEOUT_S>;

value! {
    /// `test_only.rekey_after_s` of a client: a rekey time [`KeyLifetime::shortened`]
    /// accepts (10 to 120 s: keys may be replaced sooner than WireGuard's 120 s, never
    /// later).
    RekeySecs(KeyLifetime) from i64 = |n| {
        let lifetime = u64::try_from(n)
            .ok()
            .and_then(|s| KeyLifetime::shortened(Duration::from_secs(s)).ok());
        let (lo, hi) = (MIN_REKEY_AFTER_TIME.as_secs(), REKEY_AFTER_TIME.as_secs());
        lifetime.ok_or_else(|| out_of_range(lo, hi, n))
    }
}

value! {
    /// A TCP port: 1 to 65535.
    Port(u16) from i64 = |n| {
        u16::try_from(n).ok().filter(|port| *port != 0).ok_or_else(|| out_of_range(1, u16::MAX, n))
    }
}

value! {
    /// A number of connections or streams: 1 to [`MAX_STREAMS`].
    StreamCount(usize) from i64 = |n| {
        let count = usize::try_from(n).ok().filter(|c| (1..=MAX_STREAMS).contains(c));
        count.ok_or_else(|| out_of_range(1, MAX_STREAMS, n))
    }
}

value! {
    /// `streams.max_buffered_mib_per_client`: 1 to [`MAX_BUFFERED_MIB`] MiB, kept in bytes.
    BufferMib(u64) from i64 = |n| {
        let mib = u64::try_from(n).ok().filter(|mib| (1..=MAX_BUFFERED_MIB).contains(mib));
        mib.map(|mib| mib << 20).ok_or_else(|| out_of_range(1, MAX_BUFFERED_MIB, n))
    }
}

/// An RFC 1929 username or password: 1 to 255 bytes (its length goes in one byte). The
/// message gives the length only, never the text.
pub(super) fn credential_len(what: &str, len: usize) -> Result<(), String> {
    if (1..=MAX_CREDENTIAL_LEN).contains(&len) {
        return Ok(());
    }
    Err(format!(
        "the SOCKS5 {what} is {len} bytes; it must be 1 to {MAX_CREDENTIAL_LEN} (RFC 1929)"
    ))
}

value! {
    /// `streams.socks5_username`: 1 to 255 bytes.
    Socks5Username(String) from String = |name| credential_len("username", name.len()).map(|()| name)
}

value! {
    /// `streams.socks5_password`, written inline: 1 to 255 bytes; wiped on drop, and its
    /// `Debug` (`Zeroizing`'s) does not print it.
    Socks5Password(Zeroizing<String>) from String = |password| {
        let password = Zeroizing::new(password);
        credential_len("password", password.len()).map(|()| password)
    }
}

value! {
    /// A path's capacity hint, Mbit/s: above 0, at most [`MAX_RATE_MBIT`].
    RateMbit(f64) from f64 = |rate| {
        if rate.is_finite() && rate > 0.0 && rate <= MAX_RATE_MBIT {
            return Ok(rate);
        }
        Err(format!("must be a number above 0 and at most {MAX_RATE_MBIT}, got {rate}"))
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

value! {
    /// A peer's address: a bare IP means the default port 7744; port 0 is refused.
    PeerAddr(SocketAddr) from String = |text| socket_addr(&text, PortRule::Default(DEFAULT_PORT))
}

value! {
    /// A path's server: an IP address (as a [`PeerAddr`], not the unspecified address) or
    /// a DNS name, each with an optional port (7744 when left out).
    ServerAddr(super::ServerAddr) from String = |text| {
        if let Ok(PeerAddr(addr)) = PeerAddr::try_from(text.clone()) {
            if addr.ip().is_unspecified() {
                return Err("must be the server's address, not the unspecified address".to_owned());
            }
            return Ok(super::ServerAddr::Ip(addr));
        }
        server_name(&text)
    }
}

/// `host` or `host:port` where `host` is a DNS name (RFC 1123 labels).
fn server_name(text: &str) -> Result<super::ServerAddr, String> {
    let example = "an IP address or a DNS name, with or without a port: \"198.51.100.1:7744\", \
                   \"[2001:db8::1]:7744\", \"vpn.example.net:7744\" or \"vpn.example.net\"";
    let (host, port) = match text.rsplit_once(':') {
        // More than one colon and no brackets: a mistyped IPv6 address, not a name.
        Some((h, _)) if h.contains(':') || h.contains('[') => {
            return Err(format!("`{text}` is not {example}"));
        }
        Some((h, p)) => match p.parse::<u16>() {
            Ok(0) => return Err(format!("`{text}`: the port must not be 0")),
            Ok(port) => (h, port),
            Err(_) => return Err(format!("`{text}`: `{p}` is not a port (1 to 65535)")),
        },
        None => (text, DEFAULT_PORT),
    };
    check_host_name(host).map_err(|why| format!("`{text}` is not {example}: {why}"))?;
    Ok(super::ServerAddr::Name {
        host: host.trim_end_matches('.').to_owned(),
        port,
    })
}

/// Longest DNS name (RFC 1035, without the trailing dot).
const MAX_HOST_NAME: usize = 253;

/// A DNS host name: labels of 1 to 63 of A-Z a-z 0-9 `-` (not first or last), separated
/// by dots, at most 253 bytes, an optional final dot; the last label not all digits (so
/// that a mistyped IPv4 address is not looked up as a name).
fn check_host_name(host: &str) -> Result<(), String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() {
        return Err("the name is empty".to_owned());
    }
    if name.len() > MAX_HOST_NAME {
        return Err(format!(
            "the name is {} bytes; at most {MAX_HOST_NAME}",
            name.len()
        ));
    }
    for label in name.split('.') {
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '-';
        if label.is_empty() || label.len() > 63 {
            return Err(format!(
                "`{label}`: each dot-separated label is 1 to 63 bytes"
            ));
        }
        if !label.chars().all(ok) || label.starts_with('-') || label.ends_with('-') {
            return Err(format!(
                "`{label}`: a label has only A-Z a-z 0-9 and `-`, not first or last"
            ));
        }
    }
    if name
        .rsplit('.')
        .next()
        .is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()))
    {
        return Err("the last label is all digits: a mistyped IP address?".to_owned());
    }
    Ok(())
}

/// Longest `devices` pattern.
pub(super) const MAX_DEVICE_PATTERN: usize = 31;

value! {
    /// `path[].devices`: `"default-route"`, or a glob over interface names (`*`, `?`), 1
    /// to [`MAX_DEVICE_PATTERN`] bytes, no `/`, `:` or whitespace.
    DevicesValue(crate::mobility::DevicePattern) from String = |text| {
        if text == crate::mobility::DEFAULT_ROUTE {
            return Ok(crate::mobility::DevicePattern::DefaultRoute);
        }
        let bad_char = |c: char| c == '/' || c == ':' || c.is_whitespace() || c.is_control();
        if text.is_empty() || text.len() > MAX_DEVICE_PATTERN {
            return Err(format!(
                "must be \"default-route\" or an interface name pattern of 1 to \
                 {MAX_DEVICE_PATTERN} bytes, e.g. \"wlan*\" or \"wwan?\", got `{text}`"
            ));
        }
        if text.chars().any(bad_char) {
            return Err(format!(
                "`{text}` is not an interface name pattern (no `/`, `:` or whitespace; \
                 `*` matches any run of characters, `?` one)"
            ));
        }
        Ok(crate::mobility::DevicePattern::Glob(text))
    }
}

value! {
    /// A local address to bind: a bare IP means any port, and port 0 is allowed.
    BindAddr(SocketAddr) from String = |text| socket_addr(&text, PortRule::AnyAllowed)
}

value! {
    /// A listening endpoint whose port must be written (the metrics endpoint).
    PortAddr(SocketAddr) from String = |text| socket_addr(&text, PortRule::Required)
}

value! {
    /// A prefix; a bare address is a host prefix; host bits are cleared.
    Prefix(IpNet) from String = |text| {
        let net = text.parse::<IpNet>().or_else(|_| text.parse::<IpAddr>().map(IpNet::from));
        net.map(|net| net.trunc()).map_err(|_| {
            format!("`{text}` is not a prefix, e.g. \"192.168.1.0/24\" or \"2001:db8::/32\"")
        })
    }
}

value! {
    /// An address of the tunnel itself, with its prefix length (host bits kept).
    TunAddress(IpNet) from String = |text| match text.parse::<IpNet>() {
        Ok(net) => Ok(net),
        Err(_) if text.parse::<IpAddr>().is_ok() => Err(format!(
            "`{text}` needs a prefix length, e.g. \"{text}/24\" or \"{text}/64\""
        )),
        Err(_) => Err(format!(
            "`{text}` is not an address with prefix length, \
             e.g. \"10.77.0.2/24\" or \"fd77::2/64\""
        )),
    }
}

value! {
    /// An IP protocol a flow policy rule matches, by name.
    FlowProtocol(u8) from String = |name| match name.as_str() {
        "tcp" => Ok(6),
        "udp" => Ok(17),
        "icmp" => Ok(1),
        "icmpv6" => Ok(58),
        "sctp" => Ok(132),
        _ => Err(format!("unknown protocol `{name}`; one of: tcp, udp, icmp, icmpv6, sctp")),
    }
}

value! {
    /// A DSCP value: 0 to 63 (46 is EF, the usual class of voice).
    Dscp(u8) from i64 = |n| {
        u8::try_from(n).ok().filter(|d| *d < 64).ok_or_else(|| out_of_range(0, 63, n))
    }
}

value! {
    /// A flow policy action, by name.
    FlowActionName(FlowAction) from String = |name| {
        FlowAction::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = FlowAction::ALL.iter().map(|a| a.name()).collect();
            format!("unknown action `{name}`; one of: {}", names.join(", "))
        })
    }
}

value! {
    /// A scheduler, by name.
    SchedulerName(SchedulerKind) from String = |name| {
        SchedulerKind::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = SchedulerKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown scheduler `{name}`; one of: {}", names.join(", "))
        })
    }
}

value! {
    /// A congestion controller, by name.
    CongestionName(CongestionKind) from String = |name| {
        CongestionKind::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = CongestionKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown congestion controller `{name}`; one of: {}", names.join(", "))
        })
    }
}

value! {
    /// Which inner packets get forward error correction (docs/protocol.md#fec), by name.
    FecName(plait_proto::fec::FecPolicy) from String = |name| {
        plait_proto::fec::FecPolicy::from_name(&name).ok_or_else(|| {
            format!("unknown FEC policy `{name}`; one of: off, sparse, all")
        })
    }
}

value! {
    /// A reorder policy, by name.
    ReorderName(ReorderKind) from String = |name| {
        ReorderKind::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = ReorderKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown reorder policy `{name}`; one of: {}", names.join(", "))
        })
    }
}

value! {
    /// What the seccomp filter does with a system call not on its list, by name.
    SeccompName(SeccompMode) from String = |name| {
        SeccompMode::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = SeccompMode::ALL.iter().map(|m| m.name()).collect();
            format!("unknown seccomp mode `{name}`; one of: {}", names.join(", "))
        })
    }
}

value! {
    /// A path's link type (docs/protocol.md#registration), by name.
    LinkName(crate::registration::LinkKind) from String = |name| {
        use crate::registration::LinkKind;
        LinkKind::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = LinkKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown link type `{name}`; one of: {}", names.join(", "))
        })
    }
}

value! {
    /// A path's cost class (docs/protocol.md#registration), by name.
    CostName(crate::registration::CostClass) from String = |name| {
        use crate::registration::CostClass;
        CostClass::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = CostClass::ALL.iter().map(|c| c.name()).collect();
            format!("unknown cost class `{name}`; one of: {}", names.join(", "))
        })
    }
}

value! {
    /// A path's priority: 0 (preferred) to 7 (docs/protocol.md#priority).
    Priority(u8) from i64 = |n| {
        let max = crate::registration::MAX_PRIORITY;
        u8::try_from(n).ok().filter(|p| *p <= max).ok_or_else(|| out_of_range(0, max, n))
    }
}

value! {
    /// A metered path's byte budget per period (docs/tunnel-config.md#budget): a number
    /// and a unit, `"20 GB"`, `"500 MiB"`, `"1.5 TB"` (SI units are powers of 1000, `KiB`
    /// `MiB` `GiB` `TiB` powers of 1024; `B` or no unit: bytes). Above 0.
    ByteSize(u64) from String = |text| parse_byte_size(&text)
}

value! {
    /// The day of the month (UTC) a budget period begins: 1 to 28, so every month has it.
    ResetDay(u8) from i64 = |n| {
        let max = crate::budget::MAX_RESET_DAY;
        u8::try_from(n).ok().filter(|d| (1..=max).contains(d)).ok_or_else(|| {
            format!("{}; 29 to 31 are not in every month", out_of_range(1, max, n))
        })
    }
}

/// Reads a [`ByteSize`]: see there.
pub(super) fn parse_byte_size(text: &str) -> Result<u64, String> {
    const UNITS: [(&str, f64); 9] = [
        ("B", 1.0),
        ("kB", 1e3),
        ("MB", 1e6),
        ("GB", 1e9),
        ("TB", 1e12),
        ("KiB", 1024.0),
        ("MiB", 1_048_576.0),
        ("GiB", 1_073_741_824.0),
        ("TiB", 1_099_511_627_776.0),
    ];
    let hint = "write a number and a unit, e.g. \"20 GB\" or \"500 MiB\" (units: B, kB, MB, \
                GB, TB, KiB, MiB, GiB, TiB)";
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let unit = unit.trim_start();
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size; {hint}"))?;
    let wanted = if unit.is_empty() { "B" } else { unit };
    let Some(&(_, scale)) = UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(wanted))
    else {
        return Err(format!("`{text}`: unknown unit `{unit}`; {hint}"));
    };
    let bytes = (value * scale).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    if bytes < 1.0 {
        return Err(format!("`{text}`: a budget must be above 0 bytes"));
    }
    Ok(bytes as u64)
}
