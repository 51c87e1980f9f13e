//! Routes, policy rules, forwarding and NAT that the daemon sets up on request and undoes
//! on exit (docs/tunnel-routing.md).
//!
//! - Client (`--route PREFIX`), [`NetConfig::route_into_tunnel`], wg-quick's scheme: the
//!   prefixes go into a dedicated routing table; `ip rule add not fwmark FWMARK table TABLE`
//!   sends everything not marked there; the daemon marks its UDP path sockets with
//!   `SO_MARK = FWMARK`, so their own packets keep using the main table and the real links.
//!   When a family's prefixes include its default route, `ip rule add table main
//!   suppress_prefixlength 0` (evaluated first) keeps the main table's specific routes
//!   (LAN, link-local) working. Per family, only for families that have prefixes.
//! - Server (`--nat IFACE`), [`NetConfig::enable_nat`]: an nftables table of its own
//!   (`table inet plait_<tun>`, loaded atomically with `nft -f -`) masquerades the tunnel's
//!   networks leaving IFACE, then IP forwarding is switched on for the families in use.
//! - [`NetConfig::add_route`]: one `PREFIX dev TUN` route in the main table.
//! - Client stream mode, [`NetConfig::redirect_tcp`]: an nftables table of its own
//!   (`table inet plait_streams_<tun>`, loaded like the NAT table) redirects TCP that would
//!   enter the tunnel (locally generated: `output` hook; forwarded from a LAN: `prerouting`)
//!   to a local listener, which reads the original destination from conntrack
//!   ([`crate::io::original_dst`]).
//!
//! What to run is decided by pure functions ([`plan_route_into_tunnel`], [`plan_nat`],
//! [`plan_add_route`], [`plan_redirect_tcp`], [`nat_script`], [`redirect_script`]) that
//! return [`Step`]s; [`NetConfig`] only executes
//! them and records their undo.
//!
//! Invariants:
//! - Nothing runs before all inputs of a call have been validated (interface names: 1..=15
//!   bytes, no whitespace, `/`, `:`, quote or backslash; fwmark non-zero; table not one of
//!   the reserved 0, 253, 254, 255; prefixes non-empty and distinct; redirect port and
//!   destination ports non-zero, destination ports distinct). Prefixes are used in
//!   canonical form (host bits cleared).
//! - Every change that succeeded is recorded with its undo, in order. [`NetConfig::undo`]
//!   runs the undos newest first and removes each record as it goes, so a second `undo`
//!   (or the `Drop` after an explicit `undo`) does nothing.
//! - A call that fails midway undoes what that call had applied before returning the
//!   error; changes from earlier successful calls stay recorded.
//! - Undo is best effort: a failure is logged with `tracing::warn!` and the remaining undos
//!   still run. An object that is already gone (route removed with its device, table deleted
//!   by hand) counts as undone and is only logged at debug level.
//! - A sysctl is recorded only if plait changed its value; on undo the old value is written
//!   back only if the current value is still the one plait wrote.
//! - With [`NetConfig::in_netns`], every command runs as `ip netns exec NAME …` and sysctls
//!   go through `sysctl` inside the namespace; otherwise sysctls are read and written in
//!   `/proc/sys` directly and no `sysctl` binary is needed.
//! - A sysctl changed in `/proc/sys` keeps its file open (read and write) until it is
//!   restored, so the undo opens no file for writing (the daemon's seccomp filter allows
//!   only read-only opens after set-up, docs/tunnel.md#least-privilege).

use std::fmt;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ipnet::IpNet;

/// Firewall mark the daemon puts on its UDP path sockets (`SO_MARK`), "pl".
pub const DEFAULT_FWMARK: u32 = 0x706c;
/// Routing table that receives the `--route` prefixes.
pub const DEFAULT_TABLE: u32 = 0x706c;

/// Longest Linux interface name, bytes (`IFNAMSIZ` - 1).
const IFNAME_MAX: usize = 15;

/// Errors of network configuration.
#[derive(Debug, thiserror::Error)]
pub enum NetCfgError {
    /// An interface or namespace name that the kernel or our commands would reject.
    #[error("invalid {what} name {name:?}: {reason}")]
    InvalidName {
        /// "interface" or "network namespace".
        what: &'static str,
        /// The name as given.
        name: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// Other invalid input (fwmark, table, prefixes).
    #[error("invalid network configuration: {0}")]
    Invalid(String),
    /// A required binary is not installed.
    #[error(
        "`{tool}` not found in PATH, /usr/sbin or /sbin (install the Debian package `{package}`)"
    )]
    MissingTool {
        /// The binary.
        tool: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// A command could not be started or fed.
    #[error("could not run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A command exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error (or output, if stderr was empty), trimmed.
        stderr: String,
    },
    /// Reading or writing a sysctl under /proc/sys failed.
    #[error("sysctl {key}: {source}")]
    Sysctl {
        /// Dotted key, e.g. `net.ipv4.ip_forward`.
        key: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// An external program that plait runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `ip` (iproute2).
    Ip,
    /// `nft` (nftables).
    Nft,
    /// `sysctl` (procps); only used inside a network namespace.
    Sysctl,
}

impl Tool {
    /// The binary's name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Ip => "ip",
            Tool::Nft => "nft",
            Tool::Sysctl => "sysctl",
        }
    }

    /// The Debian package that provides it.
    pub fn package(self) -> &'static str {
        match self {
            Tool::Ip => "iproute2",
            Tool::Nft => "nftables",
            Tool::Sysctl => "procps",
        }
    }
}

/// One command: a tool, its arguments and optionally a script fed on standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    /// The program.
    pub tool: Tool,
    /// Its arguments.
    pub args: Vec<String>,
    /// Standard input (the nft script), if any.
    pub stdin: Option<String>,
}

impl Cmd {
    fn new(tool: Tool, args: &[&str]) -> Cmd {
        Cmd {
            tool,
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin: None,
        }
    }

    /// The command as one shell-like (bash) line; a script on stdin is shown as `<<< $'…'`.
    pub fn line(&self) -> String {
        let mut line = self.tool.name().to_string();
        for arg in &self.args {
            line.push(' ');
            line.push_str(&shell_quote(arg));
        }
        if let Some(input) = &self.stdin {
            line.push_str(" <<< $'");
            for c in input.chars() {
                match c {
                    '\n' => line.push_str("\\n"),
                    '\t' => line.push_str("\\t"),
                    '\'' => line.push_str("\\'"),
                    '\\' => line.push_str("\\\\"),
                    c => line.push(c),
                }
            }
            line.push('\'');
        }
        line
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line())
    }
}

/// One change to apply, with how to undo it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Run `apply`; undone by running `undo`.
    Run {
        /// The command that makes the change.
        apply: Cmd,
        /// The command that reverts it.
        undo: Cmd,
        /// Run `undo` until it fails before applying: the change is one the kernel keeps
        /// duplicates of (a policy rule), so what a killed predecessor left is replaced,
        /// never doubled.
        replace_leftovers: bool,
    },
    /// Set a sysctl (dotted key) to `value`. Skipped if it already has that value;
    /// otherwise undone by writing back the value read before.
    Sysctl {
        /// Dotted key, e.g. `net.ipv4.ip_forward`.
        key: String,
        /// The value to write.
        value: String,
    },
}

impl Step {
    fn run(apply: Cmd, undo: Cmd) -> Step {
        Step::Run {
            apply,
            undo,
            replace_leftovers: false,
        }
    }

    /// A change the kernel would duplicate: leftovers are removed first (see
    /// `replace_leftovers` of [`Step::Run`]).
    fn run_replacing(apply: Cmd, undo: Cmd) -> Step {
        Step::Run {
            apply,
            undo,
            replace_leftovers: true,
        }
    }

    fn sysctl(key: &str, value: &str) -> Step {
        Step::Sysctl {
            key: key.to_string(),
            value: value.to_string(),
        }
    }

    /// The change as one shell-like line (`sysctl -w KEY=VALUE` for a sysctl).
    pub fn line(&self) -> String {
        match self {
            Step::Run { apply, .. } => apply.line(),
            Step::Sysctl { key, value } => format!("sysctl -w {key}={value}"),
        }
    }
}

/// Checks an interface name the way the kernel does (`dev_valid_name`), and additionally
/// rejects what could not be embedded in an nft string or look like an option.
pub fn check_ifname(name: &str) -> Result<(), NetCfgError> {
    check_name("interface", name, IFNAME_MAX)
}

fn check_name(what: &'static str, name: &str, max: usize) -> Result<(), NetCfgError> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > max {
        Some(if max == IFNAME_MAX {
            "longer than 15 bytes"
        } else {
            "too long"
        })
    } else if name == "." || name == ".." {
        Some("reserved")
    } else if name.starts_with('-') {
        Some("starts with '-'")
    } else if name
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | ':' | '"' | '\\'))
    {
        Some("contains whitespace, a control character, '/', ':', '\"' or '\\'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(NetCfgError::InvalidName {
            what,
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The canonical prefixes (host bits cleared), rejecting an empty list and, if `distinct`,
/// duplicates (else duplicates are dropped).
fn canonical(prefixes: &[IpNet], what: &str, distinct: bool) -> Result<Vec<IpNet>, NetCfgError> {
    if prefixes.is_empty() {
        return Err(NetCfgError::Invalid(format!("no {what} given")));
    }
    let mut out: Vec<IpNet> = Vec::with_capacity(prefixes.len());
    for p in prefixes {
        let p = p.trunc();
        if out.contains(&p) {
            if distinct {
                return Err(NetCfgError::Invalid(format!("{what}: {p} given twice")));
            }
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

fn family_flag(p: &IpNet) -> &'static str {
    match p {
        IpNet::V4(_) => "-4",
        IpNet::V6(_) => "-6",
    }
}

/// The steps of [`NetConfig::route_into_tunnel`], in order. Per family that has prefixes:
/// `ip -F route replace P dev TUN table T` for each prefix (`replace`, not `add`: the table is
/// plait's own, and a route a killed run left there, its device kept, is taken over instead
/// of failing with `File exists`), `ip -F rule add not fwmark M table T`,
/// `ip -F rule add table main suppress_prefixlength 0` if the family's default route is
/// among them, and for IPv4 `net.ipv4.conf.all.src_valid_mark=1` (as wg-quick: reverse-path
/// filtering then takes the mark into account).
pub fn plan_route_into_tunnel(
    tun: &str,
    prefixes: &[IpNet],
    fwmark: u32,
    table: u32,
) -> Result<Vec<Step>, NetCfgError> {
    check_ifname(tun)?;
    if fwmark == 0 {
        return Err(NetCfgError::Invalid(
            "fwmark 0 cannot tell the path sockets apart (every packet has mark 0)".into(),
        ));
    }
    if matches!(table, 0 | 253..=255) {
        return Err(NetCfgError::Invalid(format!(
            "routing table {table} is reserved (0 unspec, 253 default, 254 main, 255 local)"
        )));
    }
    let prefixes = canonical(prefixes, "prefixes to route", true)?;
    let mark = format!("{fwmark:#x}");
    let table = table.to_string();
    let mut steps = Vec::new();
    for v4 in [true, false] {
        let family: Vec<&IpNet> = prefixes
            .iter()
            .filter(|p| matches!(p, IpNet::V4(_)) == v4)
            .collect();
        let Some(first) = family.first() else {
            continue;
        };
        let f = family_flag(first);
        for p in &family {
            let p = p.to_string();
            let route = |verb| {
                Cmd::new(
                    Tool::Ip,
                    &[f, "route", verb, &p, "dev", tun, "table", &table],
                )
            };
            steps.push(Step::run(route("replace"), route("del")));
        }
        let rule = |verb| {
            Cmd::new(
                Tool::Ip,
                &[f, "rule", verb, "not", "fwmark", &mark, "table", &table],
            )
        };
        steps.push(Step::run_replacing(rule("add"), rule("del")));
        if family.iter().any(|p| p.prefix_len() == 0) {
            let suppress = |verb| {
                Cmd::new(
                    Tool::Ip,
                    &[
                        f,
                        "rule",
                        verb,
                        "table",
                        "main",
                        "suppress_prefixlength",
                        "0",
                    ],
                )
            };
            steps.push(Step::run_replacing(suppress("add"), suppress("del")));
        }
        if v4 {
            steps.push(Step::sysctl("net.ipv4.conf.all.src_valid_mark", "1"));
        }
    }
    Ok(steps)
}

/// The nftables table that [`NetConfig::enable_nat`] creates for `tun`: `plait_<tun>`, with
/// characters other than ASCII letters, digits and `_` replaced by `_`.
pub fn nft_table_name(tun: &str) -> String {
    nft_name("plait_", tun)
}

/// `prefix` followed by `tun` with characters other than ASCII letters, digits and `_`
/// replaced by `_`.
fn nft_name(prefix: &str, tun: &str) -> String {
    let mut name = String::from(prefix);
    name.extend(tun.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    name
}

/// The nft script of [`NetConfig::enable_nat`]. Inputs must be valid (see [`plan_nat`]).
/// It first creates and deletes the table, so a table left over by a killed daemon is
/// replaced; `nft -f` applies the whole script as one transaction.
pub fn nat_script(tun: &str, out_iface: &str, tun_nets: &[IpNet]) -> String {
    let table = nft_table_name(tun);
    let mut s = format!(
        "# plait: masquerade tunnel {tun} leaving {out_iface}; removed by `nft delete table inet {table}`\n\
         table inet {table} {{}}\n\
         delete table inet {table}\n\
         table inet {table} {{\n\
         \tchain postrouting {{\n\
         \t\ttype nat hook postrouting priority srcnat; policy accept;\n"
    );
    for net in tun_nets {
        let family = match net {
            IpNet::V4(_) => "ip",
            IpNet::V6(_) => "ip6",
        };
        s.push_str(&format!(
            "\t\toifname \"{out_iface}\" {family} saddr {} masquerade\n",
            net.trunc()
        ));
    }
    s.push_str(&format!(
        "\t}}\n\
         \tchain forward {{\n\
         \t\ttype filter hook forward priority filter; policy accept;\n\
         \t\tiifname \"{tun}\" oifname \"{out_iface}\" accept\n\
         \t\tiifname \"{out_iface}\" oifname \"{tun}\" ct state established,related accept\n\
         \t}}\n\
         }}\n"
    ));
    s
}

/// The steps of [`NetConfig::enable_nat`]: load [`nat_script`] (undone by
/// `nft delete table inet plait_<tun>`), then `net.ipv4.ip_forward=1` if `tun_nets` has an
/// IPv4 network and `net.ipv6.conf.all.forwarding=1` if it has an IPv6 one. Masquerading is
/// in place before forwarding starts, so no tunnel address leaks unmasqueraded.
pub fn plan_nat(tun: &str, out_iface: &str, tun_nets: &[IpNet]) -> Result<Vec<Step>, NetCfgError> {
    check_ifname(tun)?;
    check_ifname(out_iface)?;
    if tun == out_iface {
        return Err(NetCfgError::Invalid(format!(
            "NAT interface {out_iface} is the tunnel itself"
        )));
    }
    let nets = canonical(tun_nets, "tunnel networks to masquerade", false)?;
    let table = nft_table_name(tun);
    let mut load = Cmd::new(Tool::Nft, &["-f", "-"]);
    load.stdin = Some(nat_script(tun, out_iface, &nets));
    let mut steps = vec![Step::run(
        load,
        Cmd::new(Tool::Nft, &["delete", "table", "inet", &table]),
    )];
    if nets.iter().any(|n| matches!(n, IpNet::V4(_))) {
        steps.push(Step::sysctl("net.ipv4.ip_forward", "1"));
    }
    if nets.iter().any(|n| matches!(n, IpNet::V6(_))) {
        steps.push(Step::sysctl("net.ipv6.conf.all.forwarding", "1"));
    }
    Ok(steps)
}

/// The nftables table of [`NetConfig::redirect_tcp`] for `tun`: `plait_streams_<tun>`, with
/// characters other than ASCII letters, digits and `_` replaced by `_` (as
/// [`nft_table_name`]).
pub fn redirect_table_name(tun: &str) -> String {
    nft_name("plait_streams_", tun)
}

/// The nft script of [`NetConfig::redirect_tcp`]. Inputs must be valid (see
/// [`plan_redirect_tcp`]). Like [`nat_script`], it first creates and deletes the table, so a
/// table left over by a killed daemon is replaced in the same transaction.
///
/// The destination prefixes are used canonical and merged (`IpNet::aggregate`: host bits
/// cleared, prefixes inside another dropped, adjacent ones joined, sorted), so the sets
/// never hold overlapping intervals, which older nft versions reject. Per address family
/// that has prefixes, one rule in each chain:
///
/// - `output` (`type nat hook output priority -100`; nft accepts the name `dstnat` only in
///   prerouting, -100 is its value): locally generated TCP routed out of `tun`
///   (`oifname`), destination in the prefixes, destination port in `ports` (any if empty),
///   `redirect to :PORT` (the kernel rewrites the destination to 127.0.0.1 or ::1).
/// - `prerouting` (`priority dstnat`): forwarded TCP from hosts behind this one: not
///   arriving on `tun`, not addressed to a local address (`fib daddr type != local`), and
///   routed into `tun` by this host's routing (`fib daddr oifname "TUN"`, a routing lookup
///   with the policy rules and mark 0, so it sees [`NetConfig::route_into_tunnel`]'s table
///   and `suppress_prefixlength 0` rule; checked in a network namespace by
///   `tests/redirect_netns.rs`), same prefixes and ports; `redirect to :PORT` (the kernel
///   rewrites the destination to the incoming interface's first address).
///
/// The listener reads the original destination with `SO_ORIGINAL_DST` /
/// `IP6T_SO_ORIGINAL_DST` ([`crate::io::original_dst`]).
pub fn redirect_script(tun: &str, port: u16, destinations: &[IpNet], ports: &[u16]) -> String {
    let table = redirect_table_name(tun);
    let destinations: Vec<IpNet> = destinations.iter().map(IpNet::trunc).collect();
    let destinations = IpNet::aggregate(&destinations);
    let proto = if ports.is_empty() {
        "meta l4proto tcp".to_string()
    } else {
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        format!("tcp dport {{ {} }}", list.join(", "))
    };
    // One `ip daddr { … }` / `ip6 daddr { … }` match per family that has prefixes.
    let mut matches = Vec::new();
    for (family, v4) in [("ip", true), ("ip6", false)] {
        let list: Vec<String> = destinations
            .iter()
            .filter(|p| matches!(p, IpNet::V4(_)) == v4)
            .map(IpNet::to_string)
            .collect();
        if !list.is_empty() {
            matches.push(format!("{family} daddr {{ {} }}", list.join(", ")));
        }
    }
    let mut s = format!(
        "# plait: redirect TCP into tunnel {tun} to local port {port} (stream mode); removed by `nft delete table inet {table}`\n\
         table inet {table} {{}}\n\
         delete table inet {table}\n\
         table inet {table} {{\n\
         \tchain output {{\n\
         \t\ttype nat hook output priority -100; policy accept;\n"
    );
    for m in &matches {
        s.push_str(&format!(
            "\t\toifname \"{tun}\" {m} {proto} redirect to :{port}\n"
        ));
    }
    s.push_str(
        "\t}\n\
         \tchain prerouting {\n\
         \t\ttype nat hook prerouting priority dstnat; policy accept;\n",
    );
    for m in &matches {
        s.push_str(&format!(
            "\t\tiifname != \"{tun}\" fib daddr type != local fib daddr oifname \"{tun}\" {m} {proto} redirect to :{port}\n"
        ));
    }
    s.push_str("\t}\n}\n");
    s
}

/// The step of [`NetConfig::redirect_tcp`]: load [`redirect_script`] with `nft -f -`, undone
/// by `nft delete table inet plait_streams_<tun>`. Checks first: `tun` a valid interface
/// name, `port` non-zero, `destinations` non-empty (duplicates are dropped), `ports`
/// non-zero and distinct (empty: every destination port).
pub fn plan_redirect_tcp(
    tun: &str,
    port: u16,
    destinations: &[IpNet],
    ports: &[u16],
) -> Result<Vec<Step>, NetCfgError> {
    check_ifname(tun)?;
    if port == 0 {
        return Err(NetCfgError::Invalid(
            "redirect to port 0: the stream listener needs a real port".into(),
        ));
    }
    let destinations = canonical(destinations, "destinations to redirect", false)?;
    for (i, p) in ports.iter().enumerate() {
        if *p == 0 {
            return Err(NetCfgError::Invalid(
                "destination port 0 given to redirect".into(),
            ));
        }
        if ports[..i].contains(p) {
            return Err(NetCfgError::Invalid(format!(
                "destination port {p} given twice"
            )));
        }
    }
    let mut load = Cmd::new(Tool::Nft, &["-f", "-"]);
    load.stdin = Some(redirect_script(tun, port, &destinations, ports));
    let table = redirect_table_name(tun);
    Ok(vec![Step::run(
        load,
        Cmd::new(Tool::Nft, &["delete", "table", "inet", &table]),
    )])
}

/// The step of [`NetConfig::add_route`]: `ip -F route add PREFIX dev TUN`.
pub fn plan_add_route(tun: &str, prefix: IpNet) -> Result<Vec<Step>, NetCfgError> {
    check_ifname(tun)?;
    let p = prefix.trunc();
    let f = family_flag(&p);
    let p = p.to_string();
    let route = |verb| Cmd::new(Tool::Ip, &[f, "route", verb, &p, "dev", tun]);
    Ok(vec![Step::run(route("add"), route("del"))])
}

/// A change that was made, with what reverts it.
#[derive(Debug)]
enum Done {
    Run {
        line: String,
        undo: Cmd,
    },
    Sysctl {
        key: String,
        old: String,
        new: String,
        /// The `/proc/sys` file, open for reading and writing (`None` in a namespace,
        /// where the `sysctl` command does the work).
        file: Option<File>,
    },
}

/// Network changes made for one daemon; undone in reverse order by `undo` or on drop.
#[derive(Debug, Default)]
pub struct NetConfig {
    /// Run everything inside this network namespace (`ip netns exec`).
    netns: Option<String>,
    /// Applied changes, oldest first.
    done: Vec<Done>,
}

impl NetConfig {
    /// A NetConfig acting on the current network namespace.
    pub fn new() -> NetConfig {
        NetConfig::default()
    }

    /// A NetConfig whose commands all run inside the named network namespace
    /// (`ip netns exec NAME …`), for tests and test beds. The name is checked on first use.
    pub fn in_netns(name: &str) -> NetConfig {
        NetConfig {
            netns: Some(name.to_string()),
            done: Vec::new(),
        }
    }

    /// Client: route `prefixes` into `tun` (policy routing as in [`plan_route_into_tunnel`]).
    /// The caller marks path sockets with `fwmark`. `tun` must exist and be up.
    pub fn route_into_tunnel(
        &mut self,
        tun: &str,
        prefixes: &[IpNet],
        fwmark: u32,
        table: u32,
    ) -> Result<(), NetCfgError> {
        let steps = plan_route_into_tunnel(tun, prefixes, fwmark, table)?;
        self.apply(steps)
    }

    /// Server: forwarding + masquerade of `tun_nets` leaving `out_iface` (see [`plan_nat`]).
    pub fn enable_nat(
        &mut self,
        tun: &str,
        out_iface: &str,
        tun_nets: &[IpNet],
    ) -> Result<(), NetCfgError> {
        let steps = plan_nat(tun, out_iface, tun_nets)?;
        self.apply(steps)
    }

    /// Client stream mode: redirects TCP that would enter `tun` (locally generated, and
    /// forwarded from hosts behind this one) to the local listener on `port`, for
    /// destinations in `destinations` and destination ports in `ports` (all if empty); see
    /// [`redirect_script`]. Undone by deleting the table.
    pub fn redirect_tcp(
        &mut self,
        tun: &str,
        port: u16,
        destinations: &[IpNet],
        ports: &[u16],
    ) -> Result<(), NetCfgError> {
        let steps = plan_redirect_tcp(tun, port, destinations, ports)?;
        self.apply(steps)
    }

    /// Adds a route `prefix dev tun` in the main table (server side: a client's allowed_ips
    /// that are not on the tun's own subnet), undone on exit.
    pub fn add_route(&mut self, tun: &str, prefix: IpNet) -> Result<(), NetCfgError> {
        let steps = plan_add_route(tun, prefix)?;
        self.apply(steps)
    }

    /// Undoes everything, newest first. Idempotent; failures are logged and skipped.
    pub fn undo(&mut self) {
        while let Some(done) = self.done.pop() {
            self.undo_one(done);
        }
    }

    /// The commands this NetConfig has applied (and not yet undone), oldest first, for logs
    /// and tests (each as one shell-like line).
    pub fn applied(&self) -> Vec<String> {
        self.done
            .iter()
            .map(|d| match d {
                Done::Run { line, .. } => line.clone(),
                Done::Sysctl { key, new, .. } => self.sysctl_line(key, new),
            })
            .collect()
    }

    /// Applies `steps` in order; on failure undoes those already applied, newest first.
    fn apply(&mut self, steps: Vec<Step>) -> Result<(), NetCfgError> {
        if let Some(ns) = &self.netns {
            check_name("network namespace", ns, 255)?;
        }
        let mut done = Vec::with_capacity(steps.len());
        for step in &steps {
            match self.apply_step(step) {
                Ok(Some(d)) => done.push(d),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!("netcfg: {e}; undoing this call's {} change(s)", done.len());
                    while let Some(d) = done.pop() {
                        self.undo_one(d);
                    }
                    return Err(e);
                }
            }
        }
        self.done.extend(done);
        Ok(())
    }

    fn apply_step(&self, step: &Step) -> Result<Option<Done>, NetCfgError> {
        match step {
            Step::Run {
                apply,
                undo,
                replace_leftovers,
            } => {
                if *replace_leftovers {
                    for _ in 0..MAX_LEFTOVERS {
                        if self.run(undo).is_err() {
                            break;
                        }
                        tracing::warn!(
                            "netcfg: removed a leftover of an earlier run: {}",
                            self.cmd_line(undo)
                        );
                    }
                }
                let line = self.cmd_line(apply);
                tracing::info!("netcfg: {line}");
                self.run(apply)?;
                Ok(Some(Done::Run {
                    line,
                    undo: undo.clone(),
                }))
            }
            Step::Sysctl { key, value } => {
                let mut file = self.open_sysctl(key)?;
                let old = self.read_sysctl(key, file.as_mut())?;
                if old == *value {
                    tracing::debug!("netcfg: {key} is already {value}");
                    return Ok(None);
                }
                tracing::info!("netcfg: {} (was {old})", self.sysctl_line(key, value));
                self.write_sysctl(key, value, file.as_mut())?;
                Ok(Some(Done::Sysctl {
                    key: key.clone(),
                    old,
                    new: value.clone(),
                    file,
                }))
            }
        }
    }

    fn undo_one(&self, done: Done) {
        match done {
            Done::Run { line, undo } => {
                let undo_line = self.cmd_line(&undo);
                match self.run(&undo) {
                    Ok(_) => tracing::info!("netcfg: {undo_line}"),
                    Err(NetCfgError::Failed { stderr, .. }) if already_gone(&stderr) => {
                        tracing::debug!("netcfg: {undo_line}: already gone ({stderr})");
                    }
                    Err(e) => tracing::warn!("netcfg: could not undo `{line}`: {e}"),
                }
            }
            Done::Sysctl {
                key,
                old,
                new,
                mut file,
            } => match self.read_sysctl(&key, file.as_mut()) {
                Ok(current) if current == new => match self.write_sysctl(&key, &old, file.as_mut())
                {
                    Ok(()) => tracing::info!("netcfg: {}", self.sysctl_line(&key, &old)),
                    Err(e) => tracing::warn!("netcfg: could not restore {key}={old}: {e}"),
                },
                Ok(current) => tracing::warn!(
                    "netcfg: {key} is {current}, not the {new} plait set; leaving it (was {old})"
                ),
                Err(e) => tracing::warn!("netcfg: could not restore {key}={old}: {e}"),
            },
        }
    }

    fn prefix(&self) -> String {
        match &self.netns {
            Some(ns) => format!("ip netns exec {} ", shell_quote(ns)),
            None => String::new(),
        }
    }

    fn cmd_line(&self, cmd: &Cmd) -> String {
        format!("{}{}", self.prefix(), cmd.line())
    }

    fn sysctl_line(&self, key: &str, value: &str) -> String {
        format!("{}sysctl -w {key}={value}", self.prefix())
    }

    /// Runs `cmd` (inside the namespace, if any); returns its standard output.
    fn run(&self, cmd: &Cmd) -> Result<String, NetCfgError> {
        let tool = resolve_tool(cmd.tool)?;
        let mut command = match &self.netns {
            Some(ns) => {
                let mut c = Command::new(resolve_tool(Tool::Ip)?);
                c.args(["netns", "exec", ns.as_str()]).arg(&tool);
                c
            }
            None => Command::new(&tool),
        };
        command
            .args(&cmd.args)
            .stdin(if cmd.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let line = self.cmd_line(cmd);
        let spawn_err = |source| NetCfgError::Spawn {
            command: line.clone(),
            source,
        };
        let mut child = command.spawn().map_err(spawn_err)?;
        if let (Some(input), Some(mut stdin)) = (&cmd.stdin, child.stdin.take()) {
            // A child that exits early closes the pipe; its exit status tells why.
            match stdin.write_all(input.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(spawn_err(e));
                }
                _ => {}
            }
        }
        let output = child.wait_with_output().map_err(spawn_err)?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if stderr.is_empty() {
            stderr = stdout.trim().to_string();
        }
        Err(NetCfgError::Failed {
            command: line,
            status: output.status.to_string(),
            stderr,
        })
    }

    /// The sysctl's `/proc/sys` file, open for reading and writing; `None` in a namespace.
    fn open_sysctl(&self, key: &str) -> Result<Option<File>, NetCfgError> {
        if self.netns.is_some() {
            return Ok(None);
        }
        File::options()
            .read(true)
            .write(true)
            .open(sysctl_path(key))
            .map(Some)
            .map_err(|source| NetCfgError::Sysctl {
                key: key.to_string(),
                source,
            })
    }

    /// Reads the sysctl: through `file`, or with the `sysctl` command in the namespace.
    fn read_sysctl(&self, key: &str, file: Option<&mut File>) -> Result<String, NetCfgError> {
        let failed = |source| NetCfgError::Sysctl {
            key: key.to_string(),
            source,
        };
        match file {
            Some(f) => {
                let mut text = String::new();
                f.seek(SeekFrom::Start(0)).map_err(failed)?;
                f.read_to_string(&mut text).map_err(failed)?;
                Ok(text.trim().to_string())
            }
            None => {
                let out = self.run(&Cmd::new(Tool::Sysctl, &["-n", key]))?;
                Ok(out.trim().to_string())
            }
        }
    }

    /// Writes the sysctl: through `file`, or with the `sysctl` command in the namespace.
    fn write_sysctl(
        &self,
        key: &str,
        value: &str,
        file: Option<&mut File>,
    ) -> Result<(), NetCfgError> {
        let failed = |source| NetCfgError::Sysctl {
            key: key.to_string(),
            source,
        };
        match file {
            Some(f) => {
                f.seek(SeekFrom::Start(0)).map_err(failed)?;
                f.write_all(format!("{value}\n").as_bytes()).map_err(failed)
            }
            None => {
                let kv = format!("{key}={value}");
                self.run(&Cmd::new(Tool::Sysctl, &["-q", "-w", &kv]))
                    .map(drop)
            }
        }
    }
}

/// Most leftovers of one rule removed before it is added again (a loop bound: a killed
/// daemon leaves one per run).
const MAX_LEFTOVERS: usize = 64;

impl Drop for NetConfig {
    fn drop(&mut self) {
        self.undo()
    }
}

fn sysctl_path(key: &str) -> PathBuf {
    Path::new("/proc/sys").join(key.replace('.', "/"))
}

/// Whether a failed undo's stderr says the object is already gone.
fn already_gone(stderr: &str) -> bool {
    [
        "No such process",
        "No such file or directory",
        "Cannot find device",
    ]
    .iter()
    .any(|m| stderr.contains(m))
}

/// Finds `tool` in PATH, then in the sbin directories that a non-root PATH may lack.
fn resolve_tool(tool: Tool) -> Result<PathBuf, NetCfgError> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let fallback = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from);
    std::env::split_paths(&path)
        .chain(fallback)
        .map(|dir| dir.join(tool.name()))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or(NetCfgError::MissingTool {
            tool: tool.name(),
            package: tool.package(),
        })
}

fn shell_quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if safe {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|p| p.parse().unwrap()).collect()
    }

    fn lines(steps: &[Step]) -> Vec<String> {
        steps.iter().map(Step::line).collect()
    }

    fn undo_lines(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Run { undo, .. } => Some(undo.line()),
                Step::Sysctl { .. } => None,
            })
            .collect()
    }

    #[test]
    fn route_all_v4_and_v6() {
        let steps = plan_route_into_tunnel(
            "plait0",
            &nets(&["0.0.0.0/0", "::/0"]),
            DEFAULT_FWMARK,
            DEFAULT_TABLE,
        )
        .unwrap();
        assert_eq!(
            lines(&steps),
            [
                "ip -4 route replace 0.0.0.0/0 dev plait0 table 28780",
                "ip -4 rule add not fwmark 0x706c table 28780",
                "ip -4 rule add table main suppress_prefixlength 0",
                "sysctl -w net.ipv4.conf.all.src_valid_mark=1",
                "ip -6 route replace ::/0 dev plait0 table 28780",
                "ip -6 rule add not fwmark 0x706c table 28780",
                "ip -6 rule add table main suppress_prefixlength 0",
            ]
        );
        assert_eq!(
            undo_lines(&steps),
            [
                "ip -4 route del 0.0.0.0/0 dev plait0 table 28780",
                "ip -4 rule del not fwmark 0x706c table 28780",
                "ip -4 rule del table main suppress_prefixlength 0",
                "ip -6 route del ::/0 dev plait0 table 28780",
                "ip -6 rule del not fwmark 0x706c table 28780",
                "ip -6 rule del table main suppress_prefixlength 0",
            ]
        );
    }

    #[test]
    fn route_single_prefix_has_no_suppress_rule_and_no_v6() {
        // Host bits are cleared: ip(8) would reject 10.1.2.3/8.
        let steps = plan_route_into_tunnel("wg-x.1", &nets(&["10.1.2.3/8"]), 0x1234, 100).unwrap();
        assert_eq!(
            lines(&steps),
            [
                "ip -4 route replace 10.0.0.0/8 dev wg-x.1 table 100",
                "ip -4 rule add not fwmark 0x1234 table 100",
                "sysctl -w net.ipv4.conf.all.src_valid_mark=1",
            ]
        );
    }

    #[test]
    fn route_v6_only_touches_no_v4_state() {
        let steps = plan_route_into_tunnel(
            "plait0",
            &nets(&["2001:db8::/32", "fd00::/8"]),
            DEFAULT_FWMARK,
            DEFAULT_TABLE,
        )
        .unwrap();
        assert_eq!(
            lines(&steps),
            [
                "ip -6 route replace 2001:db8::/32 dev plait0 table 28780",
                "ip -6 route replace fd00::/8 dev plait0 table 28780",
                "ip -6 rule add not fwmark 0x706c table 28780",
            ]
        );
    }

    #[test]
    fn route_rejects_bad_inputs_before_running_anything() {
        let all = nets(&["0.0.0.0/0"]);
        for bad in [
            "",
            "abcdefghijklmnop",
            "pl ait",
            "a/b",
            "a:1",
            "q\"",
            "..",
            "-x",
            "t\n",
        ] {
            let err = plan_route_into_tunnel(bad, &all, 1, 100).unwrap_err();
            assert!(
                matches!(err, NetCfgError::InvalidName { .. }),
                "{bad:?}: {err}"
            );
        }
        // 15 bytes is the longest valid name.
        plan_route_into_tunnel("abcdefghijklmno", &all, 1, 100).unwrap();
        assert!(plan_route_into_tunnel("plait0", &all, 0, 100).is_err());
        for table in [0, 253, 254, 255] {
            assert!(plan_route_into_tunnel("plait0", &all, 1, table).is_err());
        }
        assert!(plan_route_into_tunnel("plait0", &[], 1, 100).is_err());
        let dup = nets(&["10.0.0.0/8", "10.9.9.9/8"]);
        let err = plan_route_into_tunnel("plait0", &dup, 1, 100).unwrap_err();
        assert!(err.to_string().contains("10.0.0.0/8 given twice"), "{err}");
    }

    #[test]
    fn nat_script_content() {
        let tun_nets = nets(&["10.7.0.1/24", "fd07::1/64"]);
        let steps = plan_nat("plait0", "eth0", &tun_nets).unwrap();
        assert_eq!(steps.len(), 3);
        let Step::Run { apply, undo, .. } = &steps[0] else {
            panic!("first step is not the nft script: {steps:?}")
        };
        assert_eq!(apply.args, ["-f", "-"]);
        assert_eq!(undo.line(), "nft delete table inet plait_plait0");
        let script = apply.stdin.as_deref().unwrap();
        assert_eq!(script, nat_script("plait0", "eth0", &tun_nets));
        let expected = "table inet plait_plait0 {}\n\
             delete table inet plait_plait0\n\
             table inet plait_plait0 {\n\
             \tchain postrouting {\n\
             \t\ttype nat hook postrouting priority srcnat; policy accept;\n\
             \t\toifname \"eth0\" ip saddr 10.7.0.0/24 masquerade\n\
             \t\toifname \"eth0\" ip6 saddr fd07::/64 masquerade\n\
             \t}\n\
             \tchain forward {\n\
             \t\ttype filter hook forward priority filter; policy accept;\n\
             \t\tiifname \"plait0\" oifname \"eth0\" accept\n\
             \t\tiifname \"eth0\" oifname \"plait0\" ct state established,related accept\n\
             \t}\n\
             }\n";
        assert!(script.starts_with("# plait: masquerade tunnel plait0 leaving eth0"));
        assert!(script.ends_with(expected), "{script}");
        assert_eq!(
            lines(&steps[1..]),
            [
                "sysctl -w net.ipv4.ip_forward=1",
                "sysctl -w net.ipv6.conf.all.forwarding=1"
            ]
        );
        // The applied() line is a runnable bash one-liner.
        assert!(
            apply
                .line()
                .starts_with("nft -f - <<< $'# plait: masquerade")
        );
        assert!(
            apply
                .line()
                .contains("\\n\\t\\toifname \"eth0\" ip saddr 10.7.0.0/24 masquerade\\n")
        );
    }

    #[test]
    fn nat_v4_only_leaves_v6_forwarding_alone() {
        let steps = plan_nat("tun-1", "ens3", &nets(&["10.7.0.1/24", "10.7.0.0/24"])).unwrap();
        let Step::Run { apply, undo, .. } = &steps[0] else {
            panic!("{steps:?}")
        };
        let script = apply.stdin.as_deref().unwrap();
        assert!(script.contains("table inet plait_tun_1 {\n"));
        // Duplicates of the same network collapse into one rule.
        assert_eq!(script.matches("masquerade\n").count(), 1);
        assert!(!script.contains("ip6"));
        assert_eq!(undo.line(), "nft delete table inet plait_tun_1");
        assert_eq!(lines(&steps[1..]), ["sysctl -w net.ipv4.ip_forward=1"]);
    }

    #[test]
    fn nat_rejects_bad_inputs() {
        let n = nets(&["10.7.0.0/24"]);
        assert!(plan_nat("plait0", "plait0", &n).is_err());
        assert!(plan_nat("plait0", "eth 0", &n).is_err());
        assert!(plan_nat("plait0", "eth\"0", &n).is_err());
        assert!(plan_nat("plait0", "eth0", &[]).is_err());
    }

    #[test]
    fn redirect_script_content() {
        let dest = nets(&["0.0.0.0/0", "::/0"]);
        let steps = plan_redirect_tcp("plait0", 7443, &dest, &[]).unwrap();
        assert_eq!(steps.len(), 1);
        let Step::Run {
            apply,
            undo,
            replace_leftovers,
        } = &steps[0]
        else {
            panic!("the step is not the nft script: {steps:?}")
        };
        assert!(
            !replace_leftovers,
            "the script replaces a leftover table itself"
        );
        assert_eq!(apply.tool, Tool::Nft);
        assert_eq!(apply.args, ["-f", "-"]);
        assert_eq!(undo.line(), "nft delete table inet plait_streams_plait0");
        let script = apply.stdin.as_deref().unwrap();
        assert_eq!(script, redirect_script("plait0", 7443, &dest, &[]));
        let expected = "table inet plait_streams_plait0 {}\n\
             delete table inet plait_streams_plait0\n\
             table inet plait_streams_plait0 {\n\
             \tchain output {\n\
             \t\ttype nat hook output priority -100; policy accept;\n\
             \t\toifname \"plait0\" ip daddr { 0.0.0.0/0 } meta l4proto tcp redirect to :7443\n\
             \t\toifname \"plait0\" ip6 daddr { ::/0 } meta l4proto tcp redirect to :7443\n\
             \t}\n\
             \tchain prerouting {\n\
             \t\ttype nat hook prerouting priority dstnat; policy accept;\n\
             \t\tiifname != \"plait0\" fib daddr type != local fib daddr oifname \"plait0\" ip daddr { 0.0.0.0/0 } meta l4proto tcp redirect to :7443\n\
             \t\tiifname != \"plait0\" fib daddr type != local fib daddr oifname \"plait0\" ip6 daddr { ::/0 } meta l4proto tcp redirect to :7443\n\
             \t}\n\
             }\n";
        assert!(script.starts_with(
            "# plait: redirect TCP into tunnel plait0 to local port 7443 (stream mode); \
             removed by `nft delete table inet plait_streams_plait0`\n"
        ));
        assert!(script.ends_with(expected), "{script}");
        assert_eq!(script.lines().count(), 1 + expected.lines().count());
    }

    #[test]
    fn redirect_v4_prefixes_and_ports() {
        // Host bits cleared, duplicates dropped, a prefix inside another merged into it; no
        // IPv6 rules without IPv6 prefixes.
        let dest = nets(&["10.1.2.3/8", "192.0.2.0/24", "10.0.0.0/8", "10.9.0.0/16"]);
        let steps = plan_redirect_tcp("wg-x.1", 1080, &dest, &[443, 80]).unwrap();
        let Step::Run { apply, undo, .. } = &steps[0] else {
            panic!("{steps:?}")
        };
        assert_eq!(undo.line(), "nft delete table inet plait_streams_wg_x_1");
        let script = apply.stdin.as_deref().unwrap();
        assert!(
            script.contains("table inet plait_streams_wg_x_1 {\n"),
            "{script}"
        );
        assert!(
            script.contains(
                "\t\toifname \"wg-x.1\" ip daddr { 10.0.0.0/8, 192.0.2.0/24 } \
                 tcp dport { 443, 80 } redirect to :1080\n"
            ),
            "{script}"
        );
        assert!(
            script.contains(
                "\t\tiifname != \"wg-x.1\" fib daddr type != local fib daddr oifname \"wg-x.1\" \
                 ip daddr { 10.0.0.0/8, 192.0.2.0/24 } tcp dport { 443, 80 } redirect to :1080\n"
            ),
            "{script}"
        );
        assert_eq!(script.matches("redirect to").count(), 2, "{script}");
        assert!(!script.contains("ip6"), "{script}");
        assert!(!script.contains("l4proto"), "{script}");
    }

    #[test]
    fn redirect_v6_only() {
        let script = redirect_script("plait0", 9, &nets(&["2001:db8::1/32"]), &[22]);
        assert!(!script.contains(" ip daddr"), "{script}");
        assert_eq!(
            script
                .matches("ip6 daddr { 2001:db8::/32 } tcp dport { 22 } redirect to :9\n")
                .count(),
            2,
            "{script}"
        );
    }

    #[test]
    fn redirect_rejects_bad_inputs() {
        let all = nets(&["0.0.0.0/0"]);
        assert!(matches!(
            plan_redirect_tcp("bad name", 1080, &all, &[]),
            Err(NetCfgError::InvalidName { .. })
        ));
        assert!(plan_redirect_tcp("plait\"0", 1080, &all, &[]).is_err());
        assert!(plan_redirect_tcp("plait0", 0, &all, &[]).is_err());
        assert!(plan_redirect_tcp("plait0", 1080, &[], &[]).is_err());
        assert!(plan_redirect_tcp("plait0", 1080, &all, &[0]).is_err());
        let err = plan_redirect_tcp("plait0", 1080, &all, &[80, 443, 80]).unwrap_err();
        assert!(err.to_string().contains("port 80 given twice"), "{err}");
        // Duplicate destinations are not an error: they collapse.
        plan_redirect_tcp("plait0", 1080, &nets(&["0.0.0.0/0", "0.0.0.0/0"]), &[]).unwrap();
        let mut nc = NetConfig::new();
        assert!(nc.redirect_tcp("plait0", 0, &all, &[]).is_err());
        assert!(nc.applied().is_empty());
    }

    #[test]
    fn add_route_step() {
        let steps = plan_add_route("plait0", "10.8.1.7/24".parse().unwrap()).unwrap();
        assert_eq!(lines(&steps), ["ip -4 route add 10.8.1.0/24 dev plait0"]);
        assert_eq!(
            undo_lines(&steps),
            ["ip -4 route del 10.8.1.0/24 dev plait0"]
        );
        let steps = plan_add_route("plait0", "fd00:1::/48".parse().unwrap()).unwrap();
        assert_eq!(lines(&steps), ["ip -6 route add fd00:1::/48 dev plait0"]);
    }

    #[test]
    fn empty_netconfig_undo_is_a_noop() {
        let mut nc = NetConfig::new();
        assert!(nc.applied().is_empty());
        nc.undo();
        nc.undo();
        assert!(nc.applied().is_empty());
    }

    #[test]
    fn invalid_input_fails_before_running() {
        // An invalid name is rejected by the planner, so no command runs (this would need
        // root otherwise) and nothing is recorded.
        let mut nc = NetConfig::new();
        assert!(
            nc.route_into_tunnel("bad name", &nets(&["0.0.0.0/0"]), 1, 100)
                .is_err()
        );
        assert!(nc.enable_nat("plait0", "", &nets(&["10.0.0.0/8"])).is_err());
        assert!(nc.add_route("a/b", "10.0.0.0/8".parse().unwrap()).is_err());
        assert!(nc.applied().is_empty());
        let mut nc = NetConfig::in_netns("bad/ns");
        let err = nc
            .add_route("plait0", "10.0.0.0/8".parse().unwrap())
            .unwrap_err();
        assert!(matches!(
            err,
            NetCfgError::InvalidName {
                what: "network namespace",
                ..
            }
        ));
    }

    #[test]
    fn shell_lines_quote_odd_arguments() {
        assert_eq!(shell_quote("0.0.0.0/0"), "0.0.0.0/0");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        let mut c = Cmd::new(Tool::Nft, &["-f", "-"]);
        c.stdin = Some("a 'b'\\\n".into());
        assert_eq!(c.line(), "nft -f - <<< $'a \\'b\\'\\\\\\n'");
    }

    /// Root-only tests in a throwaway network namespace (`ip netns exec`).
    mod netns {
        use super::*;

        fn is_root() -> bool {
            nix::unistd::geteuid().is_root()
        }

        /// `ip args…` in this namespace through the module's own runner; its stdout, or the
        /// error's text.
        fn ip(args: &[&str]) -> Result<String, String> {
            NetConfig::new()
                .run(&Cmd::new(Tool::Ip, args))
                .map_err(|e| e.to_string())
        }

        /// A network namespace with a TUN device `plaittest0` (up, with a v4 and a v6
        /// address), deleted on drop even if the test panics.
        struct Netns {
            name: String,
        }

        const DEV: &str = "plaittest0";

        impl Netns {
            /// `None` (after printing why) when the test must be skipped.
            fn create(tag: &str) -> Option<Netns> {
                if !is_root() {
                    println!("skipped: needs root (netns)");
                    return None;
                }
                let name = format!("plait-netcfg-{}-{tag}", std::process::id());
                if let Err(e) = ip(&["netns", "add", &name]) {
                    println!("skipped: cannot create a network namespace: {e}");
                    return None;
                }
                let ns = Netns { name };
                ns.exec(&["ip", "link", "set", "lo", "up"]);
                ns.exec(&["ip", "tuntap", "add", DEV, "mode", "tun"]);
                ns.exec(&["ip", "addr", "add", "10.77.0.1/24", "dev", DEV]);
                ns.exec(&["ip", "-6", "addr", "add", "fd77::1/64", "dev", DEV, "nodad"]);
                ns.exec(&["ip", "link", "set", DEV, "up"]);
                Some(ns)
            }

            /// Runs `args` inside the namespace; panics on failure.
            fn exec(&self, args: &[&str]) -> String {
                let mut all = vec!["netns", "exec", &self.name];
                all.extend_from_slice(args);
                ip(&all).unwrap()
            }

            fn has(&self, tool: Tool) -> bool {
                resolve_tool(tool).is_ok()
            }
        }

        impl Drop for Netns {
            fn drop(&mut self) {
                for dev in [DEV, "uplink0"] {
                    let _ = ip(&["netns", "exec", &self.name, "ip", "link", "del", dev]);
                }
                if let Err(e) = ip(&["netns", "del", &self.name]) {
                    eprintln!("could not delete network namespace {}: {e}", self.name);
                }
            }
        }

        /// Copies of plait's rules and routes in the namespace: the fwmark and
        /// suppress_prefixlength rules and table 28780's routes, IPv4 then IPv6.
        fn copies(ns: &Netns) -> [usize; 6] {
            let count = |args: &[&str], needle: &str| {
                ns.exec(args).lines().filter(|l| l.contains(needle)).count()
            };
            [
                count(&["ip", "-4", "rule", "show"], "fwmark 0x706c lookup 28780"),
                count(&["ip", "-4", "rule", "show"], "suppress_prefixlength 0"),
                count(&["ip", "-4", "route", "show", "table", "28780"], DEV),
                count(&["ip", "-6", "rule", "show"], "fwmark 0x706c lookup 28780"),
                count(&["ip", "-6", "rule", "show"], "suppress_prefixlength 0"),
                count(&["ip", "-6", "route", "show", "table", "28780"], DEV),
            ]
        }

        /// kill -9 leaves everything as it is; a restart must find and replace it, never
        /// double it, whether the TUN device went away with the killed process (its routes
        /// with it: the usual case) or was kept (its routes too); a clean stop then removes
        /// every one.
        #[test]
        fn a_restart_replaces_the_rules_a_killed_run_left() {
            let Some(ns) = Netns::create("restart") else {
                return;
            };
            let route = |nc: &mut NetConfig| {
                nc.route_into_tunnel(
                    DEV,
                    &nets(&["0.0.0.0/0", "192.0.2.0/24", "::/0"]),
                    DEFAULT_FWMARK,
                    DEFAULT_TABLE,
                )
                .unwrap();
            };
            let once = [1, 1, 2, 1, 1, 1];
            let mut first = NetConfig::in_netns(&ns.name);
            route(&mut first);
            assert_eq!(copies(&ns), once);
            // kill -9: nothing is undone, and the TUN device (with its routes) goes away
            // with the process; the policy rules stay.
            std::mem::forget(first);
            ns.exec(&["ip", "link", "del", DEV]);
            assert_eq!(copies(&ns), [1, 1, 0, 1, 1, 0]);
            ns.exec(&["ip", "tuntap", "add", DEV, "mode", "tun"]);
            ns.exec(&["ip", "link", "set", DEV, "up"]);
            let mut second = NetConfig::in_netns(&ns.name);
            route(&mut second);
            assert_eq!(
                copies(&ns),
                once,
                "the leftover rules are replaced, not doubled"
            );
            // kill -9 again, the device kept this time (a persistent TUN): its routes in
            // table 28780 stay too, and are taken over.
            std::mem::forget(second);
            let mut third = NetConfig::in_netns(&ns.name);
            route(&mut third);
            assert_eq!(
                copies(&ns),
                once,
                "leftover routes are replaced, not refused"
            );
            third.undo();
            assert_eq!(copies(&ns), [0; 6], "a clean stop removes every one");
        }

        #[test]
        fn route_into_tunnel_in_netns() {
            let Some(ns) = Netns::create("route") else {
                return;
            };
            // The real link: main's default routes go through it.
            ns.exec(&["ip", "tuntap", "add", "uplink0", "mode", "tun"]);
            ns.exec(&["ip", "addr", "add", "203.0.113.2/24", "dev", "uplink0"]);
            ns.exec(&[
                "ip",
                "-6",
                "addr",
                "add",
                "2001:db8:1::2/64",
                "dev",
                "uplink0",
                "nodad",
            ]);
            ns.exec(&["ip", "link", "set", "uplink0", "up"]);
            ns.exec(&["ip", "-4", "route", "add", "default", "dev", "uplink0"]);
            ns.exec(&["ip", "-6", "route", "add", "default", "dev", "uplink0"]);
            let rules_before4 = ns.exec(&["ip", "-4", "rule", "show"]);
            let rules_before6 = ns.exec(&["ip", "-6", "rule", "show"]);
            let mut nc = NetConfig::in_netns(&ns.name);
            nc.route_into_tunnel(
                DEV,
                &nets(&["0.0.0.0/0", "192.0.2.0/24", "::/0"]),
                DEFAULT_FWMARK,
                DEFAULT_TABLE,
            )
            .unwrap();
            println!("applied:\n  {}", nc.applied().join("\n  "));
            assert_eq!(nc.applied().len(), 8, "{:?}", nc.applied());
            assert!(
                nc.applied()[0]
                    .starts_with(&format!("ip netns exec {} ip -4 route replace", ns.name))
            );

            let rules4 = ns.exec(&["ip", "-4", "rule", "show"]);
            println!("ip -4 rule show:\n{rules4}");
            assert!(
                rules4.contains("not from all fwmark 0x706c lookup 28780"),
                "{rules4}"
            );
            assert!(
                rules4.contains("from all lookup main suppress_prefixlength 0"),
                "{rules4}"
            );
            // suppress_prefixlength is evaluated before the fwmark rule.
            assert!(
                rules4.find("suppress_prefixlength").unwrap() < rules4.find("fwmark").unwrap(),
                "{rules4}"
            );
            let rules6 = ns.exec(&["ip", "-6", "rule", "show"]);
            assert!(
                rules6.contains("not from all fwmark 0x706c lookup 28780"),
                "{rules6}"
            );
            assert!(rules6.contains("suppress_prefixlength 0"), "{rules6}");
            let table4 = ns.exec(&["ip", "-4", "route", "show", "table", "28780"]);
            println!("ip -4 route show table 28780:\n{table4}");
            assert!(table4.contains(&format!("default dev {DEV}")), "{table4}");
            assert!(
                table4.contains(&format!("192.0.2.0/24 dev {DEV}")),
                "{table4}"
            );
            let table6 = ns.exec(&["ip", "-6", "route", "show", "table", "28780"]);
            assert!(table6.contains(&format!("default dev {DEV}")), "{table6}");
            let valid_mark = ns.exec(&["sysctl", "-n", "net.ipv4.conf.all.src_valid_mark"]);
            assert_eq!(valid_mark.trim(), "1");

            // An unmarked packet goes into the tunnel; a marked one (the path sockets) keeps
            // the main table's default route through the uplink.
            for family in ["-4", "-6"] {
                let dst = if family == "-4" {
                    "198.51.100.1"
                } else {
                    "2001:db8::1"
                };
                let get = ns.exec(&["ip", family, "route", "get", dst]);
                assert!(
                    get.contains(&format!("dev {DEV}")) && get.contains("table 28780"),
                    "{get}"
                );
                let get = ns.exec(&["ip", family, "route", "get", dst, "mark", "0x706c"]);
                assert!(
                    get.contains("dev uplink0") && !get.contains("table 28780"),
                    "{get}"
                );
            }
            // suppress_prefixlength 0: the tun's own subnet still comes from main.
            let get = ns.exec(&["ip", "-4", "route", "get", "10.77.0.9"]);
            assert!(!get.contains("table 28780"), "{get}");

            nc.undo();
            assert!(nc.applied().is_empty());
            nc.undo(); // idempotent
            assert_eq!(ns.exec(&["ip", "-4", "rule", "show"]), rules_before4);
            assert_eq!(ns.exec(&["ip", "-6", "rule", "show"]), rules_before6);
            assert_eq!(
                ns.exec(&["ip", "-4", "route", "show", "table", "28780"]),
                ""
            );
            assert_eq!(
                ns.exec(&["ip", "-6", "route", "show", "table", "28780"]),
                ""
            );
            let valid_mark = ns.exec(&["sysctl", "-n", "net.ipv4.conf.all.src_valid_mark"]);
            assert_eq!(valid_mark.trim(), "0");
        }

        #[test]
        fn failure_midway_undoes_that_call() {
            let Some(ns) = Netns::create("rollback") else {
                return;
            };
            let mut nc = NetConfig::in_netns(&ns.name);
            nc.add_route(DEV, "198.18.0.0/15".parse().unwrap()).unwrap();
            // Make the v6 step fail after the v4 ones succeeded: no IPv6 on the device.
            let key = format!("net.ipv6.conf.{DEV}.disable_ipv6=1");
            ns.exec(&["sysctl", "-qw", &key]);
            let rules_before = ns.exec(&["ip", "-4", "rule", "show"]);
            let err = nc
                .route_into_tunnel(
                    DEV,
                    &nets(&["0.0.0.0/0", "::/0"]),
                    DEFAULT_FWMARK,
                    DEFAULT_TABLE,
                )
                .unwrap_err();
            println!("expected error: {err}");
            assert!(
                matches!(&err, NetCfgError::Failed { command, stderr, .. }
                    if command.contains("ip -6 route replace ::/0") && stderr.contains("IPv6 is disabled")),
                "{err}"
            );
            assert_eq!(ns.exec(&["ip", "-4", "rule", "show"]), rules_before);
            assert_eq!(
                ns.exec(&["ip", "-4", "route", "show", "table", "28780"]),
                ""
            );
            // The earlier call's route is still recorded and in place.
            assert_eq!(
                nc.applied(),
                [format!(
                    "ip netns exec {} ip -4 route add 198.18.0.0/15 dev {DEV}",
                    ns.name
                )]
            );
            assert!(
                ns.exec(&["ip", "-4", "route", "show"])
                    .contains("198.18.0.0/15")
            );
            drop(nc); // Drop undoes.
            assert!(
                !ns.exec(&["ip", "-4", "route", "show"])
                    .contains("198.18.0.0/15")
            );
        }

        #[test]
        fn enable_nat_in_netns() {
            let Some(ns) = Netns::create("nat") else {
                return;
            };
            if !ns.has(Tool::Nft) {
                println!("skipped: `nft` not installed (Debian package nftables)");
                return;
            }
            // A second TUN stands in for the uplink (the dummy module may be missing).
            ns.exec(&["ip", "tuntap", "add", "uplink0", "mode", "tun"]);
            ns.exec(&["ip", "link", "set", "uplink0", "up"]);
            let fwd4 = ns.exec(&["sysctl", "-n", "net.ipv4.ip_forward"]);
            let fwd6 = ns.exec(&["sysctl", "-n", "net.ipv6.conf.all.forwarding"]);
            let mut nc = NetConfig::in_netns(&ns.name);
            let tun_nets = nets(&["10.77.0.1/24", "fd77::1/64"]);
            nc.enable_nat(DEV, "uplink0", &tun_nets).unwrap();
            nc.add_route(DEV, "10.99.0.0/16".parse().unwrap()).unwrap();
            println!("applied:\n  {}", nc.applied().join("\n  "));

            let tables = ns.exec(&["nft", "list", "tables"]);
            assert!(tables.contains("table inet plait_plaittest0"), "{tables}");
            let table = ns.exec(&["nft", "list", "table", "inet", "plait_plaittest0"]);
            println!("{table}");
            assert!(
                table.contains("oifname \"uplink0\" ip saddr 10.77.0.0/24 masquerade"),
                "{table}"
            );
            assert!(
                table.contains("oifname \"uplink0\" ip6 saddr fd77::/64 masquerade"),
                "{table}"
            );
            assert!(
                table.contains("iifname \"plaittest0\" oifname \"uplink0\" accept"),
                "{table}"
            );
            assert_eq!(
                ns.exec(&["sysctl", "-n", "net.ipv4.ip_forward"]).trim(),
                "1"
            );
            assert_eq!(
                ns.exec(&["sysctl", "-n", "net.ipv6.conf.all.forwarding"])
                    .trim(),
                "1"
            );
            assert!(
                ns.exec(&["ip", "route", "show"])
                    .contains("10.99.0.0/16 dev plaittest0")
            );

            // Loading again (a leftover table from a killed daemon) replaces it atomically.
            let mut again = NetConfig::in_netns(&ns.name);
            again.enable_nat(DEV, "uplink0", &tun_nets).unwrap();
            let table2 = ns.exec(&["nft", "list", "table", "inet", "plait_plaittest0"]);
            assert_eq!(table2.matches("masquerade").count(), 2, "{table2}");
            // It found forwarding already on, so it recorded only the nft table.
            assert_eq!(again.applied().len(), 1, "{:?}", again.applied());
            drop(again); // deletes the table; `nc`'s own undo then finds it gone.

            nc.undo();
            nc.undo();
            assert!(nc.applied().is_empty());
            let tables = ns.exec(&["nft", "list", "tables"]);
            assert!(!tables.contains("plait_"), "{tables}");
            assert_eq!(ns.exec(&["sysctl", "-n", "net.ipv4.ip_forward"]), fwd4);
            assert_eq!(
                ns.exec(&["sysctl", "-n", "net.ipv6.conf.all.forwarding"]),
                fwd6
            );
            assert!(!ns.exec(&["ip", "route", "show"]).contains("10.99.0.0/16"));
        }
    }
}
