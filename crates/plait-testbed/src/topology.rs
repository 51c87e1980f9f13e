//! The emulated deployment: `lan host – client – N paths – server – remote host`, with one
//! router namespace per path, optionally for several client sites sharing one server.
//!
//! ```text
//!  lan host c        client c                router c.i                server          remote host
//!  [lan{c}] eth0 --- lan [cli{c}] p{i} ----- rc [r{c}x{i}] rs ----- c{c}p{i} [srv] wan --- eth0 [rem]
//! ```
//!
//! Namespaces are named by [`crate::netns`] with the roles in brackets above. Interface
//! names are fixed and short (they only need to be unique inside their namespace).
//!
//! Addressing (client site `c` in 0..16, path `i` in 0..16, `k = 16·c + i`):
//!
//! | link | IPv4 | IPv6 | addresses |
//! | --- | --- | --- | --- |
//! | LAN of site c | `10.1.c.0/24` | `fd01:c::/64` | client `.1`/`::1`, lan host `.2`/`::2` |
//! | remote LAN | `10.2.0.0/24` | `fd02::/64` | server `.1`/`::1`, remote host `.2`/`::2` |
//! | path c.i, client side | `10.3.k.0/24` | `fd03:c:i::/64` | client `.1`/`::1`, router `.2`/`::2` |
//! | path c.i, server side | `10.4.k.0/24` | `fd04:c:i::/64` | router `.1`/`::1`, server `.2`/`::2` |
//! | host attached to path c.i ([`Topology::attach_host`]) | `10.5.k.0/24` | `fd05:c:i::/64` | router `.1`/`::1`, host `.2`/`::2` |
//!
//! The LAN links are dual-stack. A path carries only its [`Family`]'s addresses (an IPv6
//! path truly cannot carry IPv4 outer packets). The lan and remote hosts have default
//! routes (both families) via the client and the server; the client routes each path's
//! server-side network via that path's router, the server each client-side network back.
//! Nothing routes between the LANs: only a tunnel can connect the lan host and the remote
//! host. The tunnel's own addresses are the tests' business.
//!
//! A test may attach one more host to a path's router ([`Topology::attach_host`]: a third
//! party on the path's network, e.g. a flooder): its network is routed by the server back
//! through that router, so what it sends reaches the server the way the client's
//! datagrams on that path do, from another address and another prefix.
//!
//! Invariants:
//! - Routers, clients and the server forward IPv4 and IPv6. Every namespace keeps IPv6
//!   addresses when a link goes down (`keep_addr_on_down`), so [`PathLink::set_link`] is
//!   reversible, and does no duplicate address detection (`accept_dad=0`, set before any
//!   veth exists), so IPv6 works the moment a link is up.
//! - Every veth has TSO, GSO and GRO off (TESTBED.md: otherwise one 64 KB super-packet is
//!   dropped as a unit and loss figures are meaningless).
//! - A shaped path has a tbf qdisc on the router's egress in each direction (`rs` towards
//!   the server, `rc` towards the client), never on the endpoints' own veths.
//! - A blackhole is one nftables table `netdev plait_blackhole` in the router namespace
//!   with a drop-policy ingress chain on each of its two interfaces; removing it restores
//!   the path exactly.
//! - Dropping the [`Topology`] deletes every namespace it created (killing what runs
//!   there), which removes every veth, qdisc and nftables table with them.
//! - A path with a one-way delay or a loss model ([`PathSpec::delay`], [`PathSpec::rtt`],
//!   [`PathSpec::loss`]) has one NFQUEUE emulator ([`crate::emulate::Emulator`]) per
//!   direction in its router namespace, fed by an `iptables` (`ip6tables` on an IPv6 path)
//!   `FORWARD -i rc` rule (queue 0, client → server) or `FORWARD -i rs` rule (queue 1,
//!   server → client). Queue numbers are per namespace, so concurrent topologies never share
//!   one. The emulators start before their rules (so no packet bypasses them) and are
//!   stopped, rules removed first, before any namespace is deleted: the emulator guards are
//!   the first field of [`Topology`] and drop first. Order: a packet is delayed (and maybe
//!   dropped) as it enters the router, then shaped by tbf as it leaves, so the delay adds to
//!   the queueing delay, as on a real link whose propagation delay follows its bottleneck.
//! - [`Topology::set_path_model`] (client 0) and [`Topology::set_site_path_model`] change
//!   the delay and loss of one direction of a path while the topology runs: the running
//!   emulator of that direction adopts the new model ([`Emulator::set_model`]: later
//!   packets, order kept), or, if the direction had none, one is started with the new model
//!   (emulator first, then its rule, as at build time). A direction set back to no delay and
//!   no loss keeps its emulator, as a pass-through, until the topology is dropped: removing
//!   it would release the packets it holds early and let new ones overtake them. These
//!   methods take `&self` (the emulator list is behind a mutex), so a thread can change a
//!   path while another one applies timed events through the same shared reference.
//!   [`PathSpec`]s stay as built; [`Topology::path_model`] reports the current model.
//! - [`Topology::setup_mptcp`] prepares kernel MPTCP between client 0 and the server
//!   without client `subflow` endpoints (TESTBED.md: they open subflows towards the wrong
//!   address); the existing per-destination routes already send each subflow over its own
//!   path.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::emulate::{self, Emulator, LinkModel, LossModel, MAX_DELAY};
use crate::netns::Namespace;
use crate::{Result, TestbedError, cmd};

/// Most client sites a topology may have.
pub const MAX_CLIENTS: usize = 16;
/// Most paths a client site may have (plait's limit too).
pub const MAX_PATHS: usize = 16;
pub use plait_topology::file::MIN_QUEUE_BYTES;
/// Largest shaped rate accepted, Mbit/s.
pub const MAX_RATE_MBIT: f64 = 10_000.0;
/// Name of the nftables table that blackholes a path.
pub const BLACKHOLE_TABLE: &str = "plait_blackhole";

/// Router's client-facing interface.
pub const ROUTER_CLIENT_DEV: &str = "rc";
/// Router's server-facing interface.
pub const ROUTER_SERVER_DEV: &str = "rs";
/// Client's LAN-facing interface.
pub const CLIENT_LAN_DEV: &str = "lan";
/// Router's interface towards an attached host ([`Topology::attach_host`]).
pub const ROUTER_HOST_DEV: &str = "rh";
/// Server's interface towards the remote host.
pub const SERVER_WAN_DEV: &str = "wan";
/// The lan host's and the remote host's only interface.
pub const HOST_DEV: &str = "eth0";

/// An IP family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// `-4` or `-6`, for `ip`.
    pub fn ip_flag(self) -> &'static str {
        match self {
            Family::V4 => "-4",
            Family::V6 => "-6",
        }
    }

    /// Both families, IPv4 first.
    pub const BOTH: [Family; 2] = [Family::V4, Family::V6];
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// A direction of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client → server (router ingress `rc`, NFQUEUE queue 0).
    Up,
    /// Server → client (router ingress `rs`, NFQUEUE queue 1).
    Down,
}

impl Direction {
    /// Both directions, up first.
    pub const BOTH: [Direction; 2] = [Direction::Up, Direction::Down];

    /// The router interface packets of this direction enter by.
    pub fn ingress_dev(self) -> &'static str {
        match self {
            Direction::Up => ROUTER_CLIENT_DEV,
            Direction::Down => ROUTER_SERVER_DEV,
        }
    }

    /// The NFQUEUE queue number of this direction (inside the router namespace).
    pub fn queue(self) -> u16 {
        match self {
            Direction::Up => 0,
            Direction::Down => 1,
        }
    }
}

/// One path: outer address family, shaping, and the emulated delay and loss.
#[derive(Clone, Debug, PartialEq)]
pub struct PathSpec {
    /// Family of the path's (outer) addresses.
    pub family: Family,
    /// tbf rate in each direction, Mbit/s; `None` = unshaped.
    pub rate_mbit: Option<f64>,
    /// tbf queue limit, bytes (only used when shaped).
    pub queue_bytes: u32,
    /// One-way delay added client → server (zero: none).
    pub delay_up: Duration,
    /// One-way delay added server → client (zero: none).
    pub delay_down: Duration,
    /// Loss client → server.
    pub loss_up: LossModel,
    /// Loss server → client.
    pub loss_down: LossModel,
    /// Seed of the loss decisions (the down direction uses `seed + 1`).
    pub seed: u64,
}

impl PathSpec {
    /// Default tbf queue limit, bytes (TESTBED.md's example).
    pub const DEFAULT_QUEUE_BYTES: u32 = 150_000;

    /// An unshaped IPv4 path.
    pub fn v4() -> PathSpec {
        PathSpec {
            family: Family::V4,
            rate_mbit: None,
            queue_bytes: Self::DEFAULT_QUEUE_BYTES,
            delay_up: Duration::ZERO,
            delay_down: Duration::ZERO,
            loss_up: LossModel::None,
            loss_down: LossModel::None,
            seed: 0,
        }
    }

    /// An unshaped IPv6 path.
    pub fn v6() -> PathSpec {
        PathSpec {
            family: Family::V6,
            ..PathSpec::v4()
        }
    }

    /// This path shaped to `mbit` Mbit/s in each direction.
    pub fn rate(mut self, mbit: f64) -> PathSpec {
        self.rate_mbit = Some(mbit);
        self
    }

    /// This path with a tbf queue limit of `bytes`.
    pub fn queue(mut self, bytes: u32) -> PathSpec {
        self.queue_bytes = bytes;
        self
    }

    /// This path with `one_way` added delay in each direction.
    pub fn delay(mut self, one_way: Duration) -> PathSpec {
        self.delay_up = one_way;
        self.delay_down = one_way;
        self
    }

    /// This path with a one-way delay of `one_way` in direction `dir` only.
    pub fn delay_in(mut self, dir: Direction, one_way: Duration) -> PathSpec {
        match dir {
            Direction::Up => self.delay_up = one_way,
            Direction::Down => self.delay_down = one_way,
        }
        self
    }

    /// This path with a base round-trip time of `rtt` (half of it added each way).
    pub fn rtt(self, rtt: Duration) -> PathSpec {
        self.delay(rtt / 2)
    }

    /// This path losing packets by `model` in both directions.
    pub fn loss(mut self, model: LossModel) -> PathSpec {
        self.loss_up = model;
        self.loss_down = model;
        self
    }

    /// This path losing packets by `model` in one direction.
    pub fn loss_in(mut self, dir: Direction, model: LossModel) -> PathSpec {
        match dir {
            Direction::Up => self.loss_up = model,
            Direction::Down => self.loss_down = model,
        }
        self
    }

    /// This path with loss decisions seeded by `seed`.
    pub fn seed(mut self, seed: u64) -> PathSpec {
        self.seed = seed;
        self
    }

    /// What the emulator of direction `dir` does.
    pub fn link_model(&self, dir: Direction) -> LinkModel {
        match dir {
            Direction::Up => LinkModel {
                delay: self.delay_up,
                loss: self.loss_up,
                seed: self.seed,
            },
            Direction::Down => LinkModel {
                delay: self.delay_down,
                loss: self.loss_down,
                seed: self.seed.wrapping_add(1),
            },
        }
    }

    /// Whether direction `dir` needs an emulator (some delay or loss).
    pub fn emulated(&self, dir: Direction) -> bool {
        !self.link_model(dir).is_passthrough()
    }

    fn validate(&self, what: &str) -> Result<()> {
        if let Some(r) = self.rate_mbit
            && !(r.is_finite() && r > 0.0 && r <= MAX_RATE_MBIT)
        {
            return Err(TestbedError::Spec(format!(
                "{what}: rate {r} Mbit/s must be above 0 and at most {MAX_RATE_MBIT}"
            )));
        }
        if self.queue_bytes < MIN_QUEUE_BYTES {
            return Err(TestbedError::Spec(format!(
                "{what}: queue limit {} bytes is below {MIN_QUEUE_BYTES}",
                self.queue_bytes
            )));
        }
        for delay in [self.delay_up, self.delay_down] {
            if delay > MAX_DELAY {
                return Err(TestbedError::Spec(format!(
                    "{what}: one-way delay {delay:?} is above the maximum {MAX_DELAY:?}"
                )));
            }
        }
        for (dir, model) in [("loss_up", &self.loss_up), ("loss_down", &self.loss_down)] {
            model
                .validate()
                .map_err(|e| TestbedError::Spec(format!("{what}: {dir}: {e}")))?;
        }
        Ok(())
    }
}

/// One client site: a lan host, a client, and the client's paths to the server.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientSpec {
    /// The paths, path 0 first.
    pub paths: Vec<PathSpec>,
}

/// What to build.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologySpec {
    /// Namespace name prefix ([`crate::netns::validate_prefix`]).
    pub prefix: String,
    /// The client sites, site 0 first.
    pub clients: Vec<ClientSpec>,
}

impl TopologySpec {
    /// One client site with these paths.
    pub fn new(prefix: &str, paths: Vec<PathSpec>) -> TopologySpec {
        TopologySpec {
            prefix: prefix.to_owned(),
            clients: vec![ClientSpec { paths }],
        }
    }

    /// This spec with one more client site.
    pub fn add_client(mut self, paths: Vec<PathSpec>) -> TopologySpec {
        self.clients.push(ClientSpec { paths });
        self
    }

    /// Checks counts, rates and queue limits.
    pub fn validate(&self) -> Result<()> {
        crate::netns::validate_prefix(&self.prefix)?;
        if self.clients.is_empty() || self.clients.len() > MAX_CLIENTS {
            return Err(TestbedError::Spec(format!(
                "{} client sites; need 1 to {MAX_CLIENTS}",
                self.clients.len()
            )));
        }
        for (c, site) in self.clients.iter().enumerate() {
            if site.paths.is_empty() || site.paths.len() > MAX_PATHS {
                return Err(TestbedError::Spec(format!(
                    "client {c} has {} paths; need 1 to {MAX_PATHS}",
                    site.paths.len()
                )));
            }
            for (i, p) in site.paths.iter().enumerate() {
                p.validate(&format!("client {c} path {i}"))?;
            }
        }
        Ok(())
    }
}

/// The addressing plan of the module documentation, as pure functions.
pub mod addr {
    use super::*;

    fn v4(a: u8, b: u8) -> IpNet {
        // A /24 with a valid prefix length never fails.
        IpNet::V4(Ipv4Net::new(Ipv4Addr::new(10, a, b, 0), 24).unwrap_or_default())
    }

    fn v6(a: u16, b: u16, c: u16) -> IpNet {
        IpNet::V6(Ipv6Net::new(Ipv6Addr::new(a, b, c, 0, 0, 0, 0, 0), 64).unwrap_or_default())
    }

    /// Host `n` of a network (`.n` or `::n`).
    pub fn host(net: IpNet, n: u8) -> IpAddr {
        match net {
            IpNet::V4(n4) => {
                let o = n4.network().octets();
                IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], n))
            }
            IpNet::V6(n6) => {
                let mut s = n6.network().segments();
                s[7] = u16::from(n);
                IpAddr::V6(Ipv6Addr::from(s))
            }
        }
    }

    fn k(c: usize, i: usize) -> u8 {
        // c, i < 16 (validated), so k < 256.
        u8::try_from(16 * (c % MAX_CLIENTS) + (i % MAX_PATHS)).unwrap_or(u8::MAX)
    }

    fn small(x: usize) -> u16 {
        u16::try_from(x).unwrap_or(u16::MAX)
    }

    /// The LAN of client site `c`.
    pub fn lan_net(c: usize, f: Family) -> IpNet {
        match f {
            Family::V4 => v4(1, u8::try_from(c).unwrap_or(u8::MAX)),
            Family::V6 => v6(0xfd01, small(c), 0),
        }
    }

    /// The network between the server and the remote host.
    pub fn remote_net(f: Family) -> IpNet {
        match f {
            Family::V4 => v4(2, 0),
            Family::V6 => v6(0xfd02, 0, 0),
        }
    }

    /// The network between client `c` and the router of its path `i`.
    pub fn path_client_net(c: usize, i: usize, f: Family) -> IpNet {
        match f {
            Family::V4 => v4(3, k(c, i)),
            Family::V6 => v6(0xfd03, small(c), small(i)),
        }
    }

    /// The network between the router of path `c.i` and the server.
    pub fn path_server_net(c: usize, i: usize, f: Family) -> IpNet {
        match f {
            Family::V4 => v4(4, k(c, i)),
            Family::V6 => v6(0xfd04, small(c), small(i)),
        }
    }

    /// The network between the router of path `c.i` and a host attached to it
    /// ([`super::Topology::attach_host`]).
    pub fn path_host_net(c: usize, i: usize, f: Family) -> IpNet {
        match f {
            Family::V4 => v4(5, k(c, i)),
            Family::V6 => v6(0xfd05, small(c), small(i)),
        }
    }
}

/// tbf parameters for a rate and queue limit: `rate …kbit burst BYTES limit BYTES`. The
/// burst is at least 15 kB and at least 4 ms at the rate.
pub fn tbf_args(rate_mbit: f64, queue_bytes: u32) -> Vec<String> {
    let kbit = (rate_mbit * 1000.0).round().max(1.0);
    let burst = (rate_mbit * 1e6 / 8.0 * 0.004).round().max(15_000.0);
    vec![
        "rate".into(),
        format!("{kbit:.0}kbit"),
        "burst".into(),
        format!("{burst:.0}"),
        "limit".into(),
        queue_bytes.to_string(),
    ]
}

/// The `nft -f -` script that turns a router's blackhole on or off (idempotent either way:
/// it first creates and deletes the table, so a present or absent table are both fine).
pub fn blackhole_script(on: bool) -> String {
    let mut s =
        format!("table netdev {BLACKHOLE_TABLE} {{}}\ndelete table netdev {BLACKHOLE_TABLE}\n");
    if on {
        s.push_str(&format!("table netdev {BLACKHOLE_TABLE} {{\n"));
        for dev in [ROUTER_CLIENT_DEV, ROUTER_SERVER_DEV] {
            s.push_str(&format!(
                "\tchain in_{dev} {{ type filter hook ingress device \"{dev}\" priority -100; policy drop; }}\n"
            ));
        }
        s.push_str("}\n");
    }
    s
}

/// A built topology; see the module documentation. Dropping it removes everything.
#[derive(Debug)]
pub struct Topology {
    /// First field, so the emulators stop (and their rules go) before any namespace does.
    /// Behind a mutex so [`Topology::set_path_model`] can start one through `&self`.
    emulators: Mutex<Vec<PathEmulator>>,
    spec: TopologySpec,
    /// Never empty (the spec is validated).
    clients: Vec<ClientSite>,
    server: Namespace,
    remote: Namespace,
}

/// One client site of a [`Topology`].
#[derive(Debug)]
pub struct ClientSite {
    index: usize,
    lan_host: Namespace,
    client: Namespace,
    paths: Vec<PathLink>,
}

/// One path of a client site: its router namespace and its controls.
#[derive(Debug)]
pub struct PathLink {
    client: usize,
    index: usize,
    spec: PathSpec,
    router: Namespace,
}

impl Topology {
    /// Builds `spec`. On error everything created so far is removed again.
    pub fn build(spec: &TopologySpec) -> Result<Topology> {
        spec.validate()?;
        let p = spec.prefix.as_str();
        let server = Namespace::create(p, "srv")?;
        let remote = Namespace::create(p, "rem")?;
        let mut clients = Vec::with_capacity(spec.clients.len());
        for (c, site) in spec.clients.iter().enumerate() {
            let lan_host = Namespace::create(p, &format!("lan{c}"))?;
            let client = Namespace::create(p, &format!("cli{c}"))?;
            let mut paths = Vec::with_capacity(site.paths.len());
            for (i, ps) in site.paths.iter().enumerate() {
                paths.push(PathLink {
                    client: c,
                    index: i,
                    spec: ps.clone(),
                    router: Namespace::create(p, &format!("r{c}x{i}"))?,
                });
            }
            clients.push(ClientSite {
                index: c,
                lan_host,
                client,
                paths,
            });
        }
        let topo = Topology {
            emulators: Mutex::new(Vec::new()),
            spec: spec.clone(),
            clients,
            server,
            remote,
        };
        topo.configure()?;
        let mut emulators = Vec::new();
        for site in &topo.clients {
            for path in &site.paths {
                for dir in Direction::BOTH {
                    if path.spec.emulated(dir) {
                        // Pushed at once: an error later still stops the ones started.
                        emulators.push(PathEmulator::start(path, dir, path.spec.link_model(dir))?);
                    }
                }
            }
        }
        *topo.emulators_mut() = emulators;
        Ok(topo)
    }

    fn emulators_mut(&self) -> MutexGuard<'_, Vec<PathEmulator>> {
        // A panic while the list was locked leaves it usable: every entry is complete.
        self.emulators
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the one-way delay and loss of direction `dir` of client 0's path `path`
    /// while the topology runs; see [`Topology::set_site_path_model`].
    pub fn set_path_model(&self, path: usize, dir: Direction, model: LinkModel) -> Result<()> {
        self.set_site_path_model(0, path, dir, model)
    }

    /// Changes the one-way delay and loss of direction `dir` of path `path` of client site
    /// `site` (the module documentation's invariants say how): the model is validated first
    /// (an invalid one changes nothing), then the running emulator adopts it, or one is
    /// started with it if the direction had none and the model does something.
    pub fn set_site_path_model(
        &self,
        site: usize,
        path: usize,
        dir: Direction,
        model: LinkModel,
    ) -> Result<()> {
        model.validate().map_err(emulate::EmulateError::from)?;
        let link = self.site(site)?.path(path)?;
        let mut emulators = self.emulators_mut();
        if let Some(running) = emulators.iter().find(|e| e.is(site, path, dir)) {
            return running.set_model(model);
        }
        if model.is_passthrough() {
            return Ok(());
        }
        emulators.push(PathEmulator::start(link, dir, model)?);
        Ok(())
    }

    /// The delay and loss direction `dir` of path `path` of site `site` has now: its
    /// emulator's model, or the spec's when it has no emulator (then a pass-through).
    pub fn path_model(&self, site: usize, path: usize, dir: Direction) -> Result<LinkModel> {
        let link = self.site(site)?.path(path)?;
        let emulators = self.emulators_mut();
        Ok(match emulators.iter().find(|e| e.is(site, path, dir)) {
            Some(running) => running.model(),
            None => link.spec.link_model(dir),
        })
    }

    fn configure(&self) -> Result<()> {
        let mut forwarders = vec![&self.server];
        for site in &self.clients {
            forwarders.push(&site.client);
            forwarders.extend(site.paths.iter().map(|p| &p.router));
        }
        for ns in forwarders {
            enable_forwarding(ns)?;
        }
        for ns in self.namespaces() {
            // No duplicate address detection, on link-local addresses either: with it, the
            // first IPv6 connection over a fresh link waits about 2 s.
            for conf in ["all", "default"] {
                ns.sysctl(&format!("net.ipv6.conf.{conf}.accept_dad"), "0")?;
                ns.sysctl(&format!("net.ipv6.conf.{conf}.keep_addr_on_down"), "1")?;
            }
        }

        veth(&self.server, SERVER_WAN_DEV, &self.remote, HOST_DEV)?;
        for f in Family::BOTH {
            let net = addr::remote_net(f);
            add_addr(&self.server, SERVER_WAN_DEV, net, 1)?;
            add_addr(&self.remote, HOST_DEV, net, 2)?;
            default_route(&self.remote, f, addr::host(net, 1))?;
        }

        for site in &self.clients {
            let c = site.index;
            veth(&site.client, CLIENT_LAN_DEV, &site.lan_host, HOST_DEV)?;
            for f in Family::BOTH {
                let net = addr::lan_net(c, f);
                add_addr(&site.client, CLIENT_LAN_DEV, net, 1)?;
                add_addr(&site.lan_host, HOST_DEV, net, 2)?;
                default_route(&site.lan_host, f, addr::host(net, 1))?;
            }
            for path in &site.paths {
                self.configure_path(site, path)?;
            }
        }
        Ok(())
    }

    fn configure_path(&self, site: &ClientSite, path: &PathLink) -> Result<()> {
        let (c, i, f) = (path.client, path.index, path.spec.family);
        let client_dev = path.client_dev();
        let server_dev = path.server_dev();
        veth(&site.client, &client_dev, &path.router, ROUTER_CLIENT_DEV)?;
        veth(&path.router, ROUTER_SERVER_DEV, &self.server, &server_dev)?;
        let cnet = addr::path_client_net(c, i, f);
        let snet = addr::path_server_net(c, i, f);
        add_addr(&site.client, &client_dev, cnet, 1)?;
        add_addr(&path.router, ROUTER_CLIENT_DEV, cnet, 2)?;
        add_addr(&path.router, ROUTER_SERVER_DEV, snet, 1)?;
        add_addr(&self.server, &server_dev, snet, 2)?;
        site.client.ip([
            f.ip_flag(),
            "route",
            "add",
            &snet.to_string(),
            "via",
            &addr::host(cnet, 2).to_string(),
            "dev",
            &client_dev,
        ])?;
        self.server.ip([
            f.ip_flag(),
            "route",
            "add",
            &cnet.to_string(),
            "via",
            &addr::host(snet, 1).to_string(),
            "dev",
            &server_dev,
        ])?;
        path.set_rate(path.spec.rate_mbit, path.spec.queue_bytes)
    }

    /// The spec this was built from.
    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }

    /// Prepares kernel MPTCP between client 0 and the server, for a connection from the
    /// client to the server's address on path `primary`: MPTCP on in both namespaces,
    /// `ip mptcp limits set subflows 4 add_addr_accepted 4` on both (at least the number of
    /// other paths), and the server announcing (`signal` endpoints) its address on every
    /// other path of site 0. The client gets no `subflow` endpoint: it opens a subflow to
    /// each announced address, from the address routing picks, and the topology's routes
    /// (each path's server-side network via that path's router, and back) keep every subflow
    /// on its own path. The server's MPTCP listener must be bound to the unspecified address
    /// (`0.0.0.0:PORT`): joins arrive at its other path addresses, and a listener bound to
    /// one address answers them with a reset. An error names the command; a kernel without
    /// MPTCP fails at the first `sysctl`.
    pub fn setup_mptcp(&self, primary: usize) -> Result<()> {
        let site = self.site0();
        site.path(primary)?;
        let limit = site.paths.len().saturating_sub(1).clamp(4, 8).to_string();
        for ns in [&site.client, &self.server] {
            ns.sysctl("net.mptcp.enabled", "1").map_err(|e| {
                TestbedError::Spec(format!("kernel MPTCP is not available here: {e}"))
            })?;
            ns.ip([
                "mptcp",
                "limits",
                "set",
                "subflows",
                &limit,
                "add_addr_accepted",
                &limit,
            ])?;
        }
        for path in site.paths.iter().filter(|p| p.index != primary) {
            self.server.ip([
                "mptcp",
                "endpoint",
                "add",
                &path.server_addr().to_string(),
                "dev",
                &path.server_dev(),
                "signal",
            ])?;
        }
        Ok(())
    }

    /// The server's namespace.
    pub fn server(&self) -> &Namespace {
        &self.server
    }

    /// The remote host's namespace.
    pub fn remote_host(&self) -> &Namespace {
        &self.remote
    }

    /// Every client site (never empty).
    pub fn clients(&self) -> &[ClientSite] {
        &self.clients
    }

    /// Client site `c`.
    pub fn site(&self, c: usize) -> Result<&ClientSite> {
        self.clients.get(c).ok_or_else(|| {
            TestbedError::Spec(format!(
                "no client site {c} (the topology has {})",
                self.clients.len()
            ))
        })
    }

    /// Client site 0 (every topology has it).
    pub fn site0(&self) -> &ClientSite {
        &self.clients[0]
    }

    /// Client 0's namespace.
    pub fn client(&self) -> &Namespace {
        &self.site0().client
    }

    /// Lan host 0's namespace.
    pub fn lan_host(&self) -> &Namespace {
        &self.site0().lan_host
    }

    /// Path `i` of client 0.
    pub fn path(&self, i: usize) -> Result<&PathLink> {
        self.site0().path(i)
    }

    /// Where client 0's `[[path]] server` for path `i` points (without port).
    pub fn path_server_addr(&self, i: usize) -> Result<IpAddr> {
        Ok(self.path(i)?.server_addr())
    }

    /// Silently drops everything on client 0's path `i` (both directions), or stops doing so.
    pub fn blackhole(&self, i: usize, on: bool) -> Result<()> {
        self.path(i)?.blackhole(on)
    }

    /// Takes client 0's path `i` down (carrier loss at the client) or back up.
    pub fn set_link(&self, i: usize, up: bool) -> Result<()> {
        self.path(i)?.set_link(up)
    }

    /// Attaches a host of its own to the router of client 0's path `i` (at most one per
    /// path): a namespace with one interface on [`addr::path_host_net`], its default route
    /// via the router, and a server route to that network back through the router. What the
    /// host sends to the server's address on the path arrives as the client's datagrams on
    /// that path do (shaping, delay and loss of the router's server side included), from
    /// another address and prefix than the client's. Dropping the [`AttachedHost`] removes
    /// it and the server's route; dropping the topology first removes them too.
    pub fn attach_host(&self, i: usize) -> Result<AttachedHost> {
        let path = self.path(i)?;
        let f = path.family();
        let net = addr::path_host_net(path.client, path.index, f);
        let ns = Namespace::create(&self.spec.prefix, &format!("h{}x{}", path.client, i))?;
        // From here on, dropping `host` undoes whatever was done.
        let mut host = AttachedHost {
            ns,
            server: self.server.name().to_owned(),
            net,
            routed: false,
        };
        for conf in ["all", "default"] {
            host.ns
                .sysctl(&format!("net.ipv6.conf.{conf}.accept_dad"), "0")?;
        }
        veth(&path.router, ROUTER_HOST_DEV, &host.ns, HOST_DEV)?;
        add_addr(&path.router, ROUTER_HOST_DEV, net, 1)?;
        add_addr(&host.ns, HOST_DEV, net, 2)?;
        default_route(&host.ns, f, addr::host(net, 1))?;
        let snet = addr::path_server_net(path.client, path.index, f);
        self.server.ip([
            f.ip_flag(),
            "route",
            "add",
            &net.to_string(),
            "via",
            &addr::host(snet, 1).to_string(),
            "dev",
            &path.server_dev(),
        ])?;
        host.routed = true;
        Ok(host)
    }

    /// The network between the server and the remote host.
    pub fn remote_net(&self, f: Family) -> IpNet {
        addr::remote_net(f)
    }

    /// The remote host's address.
    pub fn remote_host_addr(&self, f: Family) -> IpAddr {
        addr::host(addr::remote_net(f), 2)
    }

    /// The server's address on the remote host's network.
    pub fn server_remote_addr(&self, f: Family) -> IpAddr {
        addr::host(addr::remote_net(f), 1)
    }

    /// Every namespace of the topology.
    pub fn namespaces(&self) -> Vec<&Namespace> {
        let mut v = vec![&self.server, &self.remote];
        for s in &self.clients {
            v.push(&s.lan_host);
            v.push(&s.client);
            v.extend(s.paths.iter().map(|p| &p.router));
        }
        v
    }

    /// Leaves everything in place (for `plait testbed up`); returns the namespace names.
    pub fn keep(self) -> Vec<String> {
        let Topology {
            clients,
            server,
            remote,
            ..
        } = self;
        let mut names = vec![server.keep(), remote.keep()];
        for s in clients {
            names.push(s.lan_host.keep());
            names.push(s.client.keep());
            names.extend(s.paths.into_iter().map(|p| p.router.keep()));
        }
        names
    }
}

/// A host attached to a path's router ([`Topology::attach_host`]). Dropping it deletes
/// its namespace (and with it the veth pair) and the server's route to its network.
#[derive(Debug)]
pub struct AttachedHost {
    ns: Namespace,
    /// The server namespace's name, for removing the route on drop.
    server: String,
    net: IpNet,
    /// Whether the server's route was added (so drop removes it).
    routed: bool,
}

impl AttachedHost {
    /// The host's namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    /// The host's address.
    pub fn addr(&self) -> IpAddr {
        addr::host(self.net, 2)
    }

    /// The host's network (the router's interface holds `.1`/`::1` of it).
    pub fn net(&self) -> IpNet {
        self.net
    }
}

impl Drop for AttachedHost {
    fn drop(&mut self) {
        // The server namespace may be gone already (the topology dropped first): then
        // the route went with it, and the error says nothing worth printing.
        if self.routed {
            let _ = cmd::run(
                "ip",
                [
                    "-n",
                    self.server.as_str(),
                    "route",
                    "del",
                    &self.net.to_string(),
                ],
            );
        }
    }
}

impl ClientSite {
    /// The site's index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The lan host's namespace.
    pub fn lan_host(&self) -> &Namespace {
        &self.lan_host
    }

    /// The client's namespace.
    pub fn client(&self) -> &Namespace {
        &self.client
    }

    /// The paths, path 0 first.
    pub fn paths(&self) -> &[PathLink] {
        &self.paths
    }

    /// Path `i`.
    pub fn path(&self, i: usize) -> Result<&PathLink> {
        self.paths.get(i).ok_or_else(|| {
            TestbedError::Spec(format!(
                "client {} has no path {i} (it has {})",
                self.index,
                self.paths.len()
            ))
        })
    }

    /// The site's LAN.
    pub fn lan_net(&self, f: Family) -> IpNet {
        addr::lan_net(self.index, f)
    }

    /// The lan host's address.
    pub fn lan_host_addr(&self, f: Family) -> IpAddr {
        addr::host(self.lan_net(f), 2)
    }

    /// The client's address on its LAN.
    pub fn client_lan_addr(&self, f: Family) -> IpAddr {
        addr::host(self.lan_net(f), 1)
    }
}

impl PathLink {
    /// The client site's index.
    pub fn client_index(&self) -> usize {
        self.client
    }

    /// The path's index within its site.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The spec it was built from (rate as built; see [`PathLink::set_rate`]).
    pub fn spec(&self) -> &PathSpec {
        &self.spec
    }

    /// The outer address family.
    pub fn family(&self) -> Family {
        self.spec.family
    }

    /// The router's namespace.
    pub fn router(&self) -> &Namespace {
        &self.router
    }

    /// The client's interface for this path (`p{i}`).
    pub fn client_dev(&self) -> String {
        format!("p{}", self.index)
    }

    /// The server's interface for this path (`c{c}p{i}`).
    pub fn server_dev(&self) -> String {
        format!("c{}p{}", self.client, self.index)
    }

    /// The server's address on this path: what the client's `[[path]] server` names.
    pub fn server_addr(&self) -> IpAddr {
        addr::host(
            addr::path_server_net(self.client, self.index, self.spec.family),
            2,
        )
    }

    /// The client's address on this path.
    pub fn client_addr(&self) -> IpAddr {
        addr::host(
            addr::path_client_net(self.client, self.index, self.spec.family),
            1,
        )
    }

    /// Silently drops every packet entering the router from either side (`on`), or removes
    /// that drop again.
    pub fn blackhole(&self, on: bool) -> Result<()> {
        self.router
            .exec_with_input(["nft", "-f", "-"], blackhole_script(on).as_bytes())
            .map(drop)
    }

    /// Sets the router's client-facing interface down (the client sees carrier loss) or up.
    pub fn set_link(&self, up: bool) -> Result<()> {
        self.router
            .ip([
                "link",
                "set",
                ROUTER_CLIENT_DEV,
                if up { "up" } else { "down" },
            ])
            .map(drop)
    }

    /// Shapes both directions to `rate_mbit` with a tbf queue of `queue_bytes`, or removes
    /// the shaping (`None`).
    pub fn set_rate(&self, rate_mbit: Option<f64>, queue_bytes: u32) -> Result<()> {
        PathSpec {
            rate_mbit,
            queue_bytes,
            ..self.spec.clone()
        }
        .validate("set_rate")?;
        let name = self.router.name();
        for dev in [ROUTER_SERVER_DEV, ROUTER_CLIENT_DEV] {
            match rate_mbit {
                Some(r) => {
                    let mut args: Vec<String> = ["-n", name, "qdisc", "replace", "dev", dev]
                        .into_iter()
                        .map(str::to_owned)
                        .collect();
                    args.extend(["root".to_owned(), "tbf".to_owned()]);
                    args.extend(tbf_args(r, queue_bytes));
                    cmd::run("tc", &args)?;
                }
                None => {
                    let shown = cmd::run("tc", ["-n", name, "qdisc", "show", "dev", dev, "root"])?;
                    if String::from_utf8_lossy(&shown.stdout).contains("tbf") {
                        cmd::run("tc", ["-n", name, "qdisc", "del", "dev", dev, "root"])?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// One direction of a path emulated in its router namespace: the NFQUEUE rule and the
/// emulator serving it. Dropping it removes the rule first (packets then pass untouched),
/// then stops the emulator (which accepts every packet it still holds).
#[derive(Debug)]
struct PathEmulator {
    router: String,
    family: Family,
    /// Client site and path index.
    site: usize,
    path: usize,
    dir: Direction,
    /// Whether the rule was added (so drop deletes it).
    installed: bool,
    emulator: Option<Emulator>,
}

impl PathEmulator {
    /// Starts the emulator of direction `dir` of `path` with `model`, then adds its rule.
    fn start(path: &PathLink, dir: Direction, model: LinkModel) -> Result<PathEmulator> {
        let router = path.router.name().to_owned();
        let emulator = Emulator::spawn(Some(&router), dir.queue(), model)?;
        let mut this = PathEmulator {
            router,
            family: path.spec.family,
            site: path.client,
            path: path.index,
            dir,
            installed: false,
            emulator: Some(emulator),
        };
        this.rule("-A")?;
        this.installed = true;
        Ok(this)
    }

    fn is(&self, site: usize, path: usize, dir: Direction) -> bool {
        (self.site, self.path, self.dir) == (site, path, dir)
    }

    fn set_model(&self, model: LinkModel) -> Result<()> {
        match &self.emulator {
            Some(e) => Ok(e.set_model(model)?),
            None => Err(TestbedError::Spec(format!(
                "the emulator of {} {:?} has stopped",
                self.router, self.dir
            ))),
        }
    }

    fn model(&self) -> LinkModel {
        self.emulator
            .as_ref()
            .map(Emulator::model)
            .unwrap_or_default()
    }

    /// Adds (`-A`) or deletes (`-D`) the rule feeding the emulator.
    fn rule(&self, action: &str) -> Result<()> {
        let (dev, queue) = (self.dir.ingress_dev(), self.dir.queue());
        match (self.family, action) {
            (Family::V4, "-A") => Ok(emulate::install_rule(&self.router, dev, queue)?),
            (Family::V4, _) => Ok(emulate::remove_rule(&self.router, dev, queue)?),
            (Family::V6, _) => {
                let queue = queue.to_string();
                cmd::run(
                    "ip",
                    [
                        "netns",
                        "exec",
                        &self.router,
                        "ip6tables",
                        "-w",
                        "5",
                        action,
                        "FORWARD",
                        "-i",
                        dev,
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        &queue,
                        "--queue-bypass",
                    ],
                )
                .map(drop)
            }
        }
    }
}

impl Drop for PathEmulator {
    fn drop(&mut self) {
        // The namespace may already be gone (then so is the rule): nothing to report.
        if self.installed
            && Path::new("/run/netns").join(&self.router).exists()
            && let Err(e) = self.rule("-D")
        {
            eprintln!(
                "plait-testbed: removing the NFQUEUE rule of {} {:?}: {e}",
                self.router, self.dir
            );
        }
        if let Some(e) = self.emulator.take()
            && let Err(e) = e.stop()
        {
            eprintln!(
                "plait-testbed: stopping the emulator of {} {:?}: {e}",
                self.router, self.dir
            );
        }
    }
}

/// Forwarding on for both families; IPv6 addresses survive a link going down.
fn enable_forwarding(ns: &Namespace) -> Result<()> {
    ns.sysctl("net.ipv4.ip_forward", "1")?;
    ns.sysctl("net.ipv6.conf.all.forwarding", "1")
}

/// A veth pair `a_dev` (in `a`) – `b_dev` (in `b`), both ends up with offloads off.
fn veth(a: &Namespace, a_dev: &str, b: &Namespace, b_dev: &str) -> Result<()> {
    cmd::run(
        "ip",
        [
            "link",
            "add",
            a_dev,
            "netns",
            a.name(),
            "type",
            "veth",
            "peer",
            "name",
            b_dev,
            "netns",
            b.name(),
        ],
    )?;
    for (ns, dev) in [(a, a_dev), (b, b_dev)] {
        ns.exec([
            "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
        ])?;
        ns.ip(["link", "set", dev, "up"])?;
    }
    Ok(())
}

/// Adds host `n` of `net` to `dev` (IPv6 without duplicate address detection, so it is
/// usable at once).
fn add_addr(ns: &Namespace, dev: &str, net: IpNet, n: u8) -> Result<()> {
    let a = format!("{}/{}", addr::host(net, n), net.prefix_len());
    match net {
        IpNet::V4(_) => ns.ip(["addr", "add", &a, "dev", dev]),
        IpNet::V6(_) => ns.ip(["addr", "add", &a, "dev", dev, "nodad"]),
    }
    .map(drop)
}

fn default_route(ns: &Namespace, f: Family, via: IpAddr) -> Result<()> {
    ns.ip([
        f.ip_flag(),
        "route",
        "add",
        "default",
        "via",
        &via.to_string(),
    ])
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn addressing_plan_matches_the_documentation() {
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(addr::lan_net(0, Family::V4).to_string(), "10.1.0.0/24");
        assert_eq!(addr::lan_net(3, Family::V6).to_string(), "fd01:3::/64");
        assert_eq!(addr::remote_net(Family::V4).to_string(), "10.2.0.0/24");
        assert_eq!(addr::remote_net(Family::V6).to_string(), "fd02::/64");
        assert_eq!(
            addr::path_client_net(1, 2, Family::V4).to_string(),
            "10.3.18.0/24"
        );
        assert_eq!(
            addr::path_server_net(1, 2, Family::V6).to_string(),
            "fd04:1:2::/64"
        );
        assert_eq!(
            addr::host(addr::path_server_net(0, 1, Family::V4), 2),
            a("10.4.1.2")
        );
        assert_eq!(
            addr::host(addr::path_server_net(0, 1, Family::V6), 2),
            a("fd04:0:1::2")
        );
        assert_eq!(
            addr::path_host_net(1, 2, Family::V4).to_string(),
            "10.5.18.0/24"
        );
        assert_eq!(
            addr::path_host_net(1, 2, Family::V6).to_string(),
            "fd05:1:2::/64"
        );
    }

    #[test]
    fn every_network_is_distinct_and_contains_its_hosts() {
        let mut seen = HashSet::new();
        for f in Family::BOTH {
            assert!(seen.insert(addr::remote_net(f)));
            for c in 0..MAX_CLIENTS {
                assert!(seen.insert(addr::lan_net(c, f)));
                for i in 0..MAX_PATHS {
                    for net in [
                        addr::path_client_net(c, i, f),
                        addr::path_server_net(c, i, f),
                        addr::path_host_net(c, i, f),
                    ] {
                        assert!(seen.insert(net), "{net} twice");
                        assert!(net.contains(&addr::host(net, 1)));
                        assert!(net.contains(&addr::host(net, 2)));
                    }
                }
            }
        }
        // Networks never overlap: all are /24 or /64 and distinct.
        let nets: Vec<_> = seen.iter().collect();
        for x in &nets {
            for y in &nets {
                if x != y {
                    assert!(!x.contains(&y.network()), "{x} overlaps {y}");
                }
            }
        }
    }

    #[test]
    fn interface_names_fit_ifnamsiz() {
        let names = [
            format!("p{}", MAX_PATHS - 1),
            format!("c{}p{}", MAX_CLIENTS - 1, MAX_PATHS - 1),
        ];
        for n in names.iter().map(String::as_str).chain([
            ROUTER_CLIENT_DEV,
            ROUTER_SERVER_DEV,
            CLIENT_LAN_DEV,
            SERVER_WAN_DEV,
            HOST_DEV,
        ]) {
            assert!(!n.is_empty() && n.len() <= 15, "{n}");
        }
        // Roles stay within netns' role rules for the largest indices.
        assert!(
            crate::netns::validate_role(&format!("r{}x{}", MAX_CLIENTS - 1, MAX_PATHS - 1)).is_ok()
        );
        assert!(crate::netns::validate_role(&format!("cli{}", MAX_CLIENTS - 1)).is_ok());
    }

    #[test]
    fn specs_are_validated() {
        let ok = TopologySpec::new("ptb", vec![PathSpec::v4().rate(40.0), PathSpec::v6()]);
        assert!(ok.validate().is_ok());
        let bad = [
            TopologySpec::new("ptb", vec![]),
            TopologySpec::new("ptb", vec![PathSpec::v4(); 17]),
            TopologySpec::new("ptb", vec![PathSpec::v4().rate(0.0)]),
            TopologySpec::new("ptb", vec![PathSpec::v4().rate(f64::NAN)]),
            TopologySpec::new("ptb", vec![PathSpec::v4().rate(40.0).queue(100)]),
            TopologySpec::new("P", vec![PathSpec::v4()]),
        ];
        for b in bad {
            assert!(b.validate().is_err(), "{b:?}");
        }
        let mut many = TopologySpec::new("ptb", vec![PathSpec::v4()]);
        for _ in 0..MAX_CLIENTS {
            many = many.add_client(vec![PathSpec::v4()]);
        }
        assert!(many.validate().is_err());
    }

    #[test]
    fn tbf_and_blackhole_commands() {
        assert_eq!(
            tbf_args(40.0, 150_000),
            ["rate", "40000kbit", "burst", "20000", "limit", "150000"]
        );
        assert_eq!(
            tbf_args(2.5, 30_000),
            ["rate", "2500kbit", "burst", "15000", "limit", "30000"]
        );
        let on = blackhole_script(true);
        assert!(
            on.starts_with(
                "table netdev plait_blackhole {}\ndelete table netdev plait_blackhole\n"
            )
        );
        assert!(
            on.contains("device \"rc\" priority -100; policy drop;"),
            "{on}"
        );
        assert!(
            on.contains("device \"rs\" priority -100; policy drop;"),
            "{on}"
        );
        let off = blackhole_script(false);
        assert!(!off.contains("chain"), "{off}");
    }
}
