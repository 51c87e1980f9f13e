//! `plait tunnel-bench`: one TCP flow through the plait tunnel over unshaped
//! veth paths, against raw UDP and plain TCP on the same veths, in one run; prints a table
//! and writes it with the CPU use to a Markdown file (docs/tunnel-bench.md).
//!
//! One topology (`plait-testbed`: lan host – client – N unshaped paths – server – remote
//! host, offloads off on every veth) serves the whole run. Each repetition runs, in order:
//! 1. raw UDP: 1400-byte datagrams as fast as the kernel takes them, client namespace →
//!    server namespace over path 0, counted at the receiver;
//! 2. plain TCP: one kernel TCP flow on the same route (congestion control `--cc`, cubic
//!    by default, set on the sender's socket: a namespace may not switch its default to an
//!    algorithm outside `tcp_allowed_congestion_control`);
//! 3. for each requested path count: a fresh tunnel (`plait server` and `plait client`,
//!    scheduler `plait`, encryption always on), a 1 s warm-up flow, then one TCP flow lan
//!    host → remote host through it (same congestion control); then SIGTERM to both
//!    daemons.
//!
//! During every measured transfer it samples CPU time: each plait daemon's
//! (`/proc/PID/stat`, % of one core), this process's (the traffic generators and sinks,
//! `/proc/self/stat`) and the whole machine's (`/proc/stat`, busy and stolen, % of all
//! cores). Around it, it reads the kernel counters that tell where packets were lost: TCP
//! retransmissions of the sender's namespace and UDP buffer drops (`/proc/net/snmp`), and
//! the TUN devices' `tx_dropped`. The "what limits it" paragraph is generated from these
//! numbers, not written by hand.
//!
//! Invariants:
//! - A benchmark reports numbers; it never fails on speed. It fails only when something
//!   does not work (no root, a daemon that does not come up, a transfer that stalls).
//! - Ratios are taken within a repetition (tunnel ÷ raw UDP of the same repetition), then
//!   summarised as median and range: numbers on this VM move 10-25 % between runs.
//! - Every measurement uses its own TCP or UDP port, so nothing left of one (TIME_WAIT, a
//!   late datagram) is counted in another.
//! - Everything it creates is owned by a guard: namespaces by the [`Topology`], daemons by
//!   [`harness::Tunnel`], traffic threads by bounded waits; an error anywhere leaves
//!   nothing behind, and a killed run's namespaces are removed by the next run
//!   ([`cleanup_stale`]).

pub(crate) mod harness;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use plait_testbed::traffic::TcpOptions;
use plait_testbed::{
    Family, Namespace, PathSpec, SendLimit, SendOptions, StreamProto, TcpSink, Topology,
    TopologySpec, UdpSink, cleanup_stale, have_root, tcp_send_opts, udp_blast,
};

use harness::{Tunnel, TunnelOptions};

/// Namespace prefix of the benchmark's topology.
const PREFIX: &str = "ptb";
/// Raw UDP datagram size, bytes.
const DATAGRAM: usize = 1400;
/// Warm-up flow through a fresh tunnel before the measured one.
const WARMUP: Duration = Duration::from_secs(1);
/// First port for measurement traffic; each measurement takes the next.
const BASE_PORT: u16 = 5201;
/// The plait server's UDP port.
const TUNNEL_PORT: u16 = 7744;
/// TUN device name (inside the benchmark's own namespaces).
const TUN: &str = "plaitb0";
/// Longest wait for a connection, or for the receiver to be listening.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest time a TCP flow may make no progress.
const STALL_TIMEOUT: Duration = Duration::from_secs(20);
/// Most paths `--paths` accepts.
pub const MAX_PATHS: u8 = 4;
/// Longest measured transfer, seconds.
pub const MAX_SECONDS: u64 = 300;
/// Most repetitions.
pub const MAX_REPEAT: u64 = 50;

/// `plait tunnel-bench`.
#[derive(Debug, Clone)]
pub struct TunnelBenchOptions {
    /// Seconds each measured transfer runs.
    pub seconds: u64,
    /// Repetitions; each runs every measurement once, in the same order.
    pub repeat: u64,
    /// Path counts to run the tunnel over, comma-separated (each 1 to 4).
    pub paths: Vec<u8>,
    /// TCP congestion control of every flow's sender (set per socket).
    pub cc: String,
    /// The Markdown file to write.
    pub out: PathBuf,
}

/// One kind of measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    RawUdp,
    PlainTcp,
    /// Through the tunnel over this many paths.
    Tunnel(u8),
}

impl Kind {
    fn label(self) -> String {
        match self {
            Kind::RawUdp => "raw UDP, path 0".to_owned(),
            Kind::PlainTcp => "plain TCP, path 0".to_owned(),
            Kind::Tunnel(1) => "tunnel, 1 path".to_owned(),
            Kind::Tunnel(n) => format!("tunnel, {n} paths"),
        }
    }
}

/// CPU use over one transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Cpu {
    /// The plait client, % of one core.
    client: Option<f64>,
    /// The plait server, % of one core.
    server: Option<f64>,
    /// This process (traffic generators and sinks), % of one core.
    bench: f64,
    /// The machine, busy (user, system, interrupts), % of all cores.
    machine: f64,
    /// The machine, stolen by the hypervisor, % of all cores.
    steal: f64,
    /// The machine, in interrupts and softirqs (part of `machine`), % of all cores.
    irq: f64,
}

/// One measurement's result.
#[derive(Clone, Debug)]
struct Sample {
    /// Goodput at the receiver, Mbit/s.
    mbit: f64,
    cpu: Cpu,
    /// Kernel counters over the transfer.
    net: Net,
    /// Through the tunnel: each path's share of the client's datagrams, % (since the
    /// tunnel started).
    shares: Vec<f64>,
    /// Details worth reading (UDP loss, the tunnel's path shares and counters).
    note: String,
}

/// Busy, stolen and total ticks of the whole machine (the `cpu` line of /proc/stat).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MachineTicks {
    busy: u64,
    steal: u64,
    /// Interrupts and softirqs (part of `busy`).
    irq: u64,
    total: u64,
}

impl MachineTicks {
    /// The machine's counters now (`/proc/stat`'s `cpu` line, through procfs).
    fn now() -> Result<MachineTicks> {
        use procfs::CurrentSI;
        let t = procfs::KernelStats::current()
            .context("cannot read /proc/stat")?
            .total;
        Ok(MachineTicks::from_cpu_time(&t))
    }

    /// Busy is everything but idle, iowait and steal; guest time is already in user.
    fn from_cpu_time(t: &procfs::CpuTime) -> MachineTicks {
        let (iowait, irq, softirq, steal) = (
            t.iowait.unwrap_or(0),
            t.irq.unwrap_or(0),
            t.softirq.unwrap_or(0),
            t.steal.unwrap_or(0),
        );
        let total = t.user + t.nice + t.system + t.idle + iowait + irq + softirq + steal;
        MachineTicks {
            busy: total - t.idle - iowait - steal,
            steal,
            irq: irq + softirq,
            total,
        }
    }
}

/// utime + stime of a process (`None`: this one), in clock ticks.
fn process_ticks(pid: Option<u32>) -> Result<u64> {
    let process = match pid {
        None => procfs::process::Process::myself(),
        Some(p) => procfs::process::Process::new(i32::try_from(p).unwrap_or(i32::MAX)),
    };
    let stat = process
        .and_then(|p| p.stat())
        .with_context(|| format!("cannot read the CPU time of process {pid:?}"))?;
    Ok(stat.utime + stat.stime)
}

/// CPU counters at one instant.
#[derive(Clone, Debug)]
struct CpuMark {
    at: Instant,
    machine: MachineTicks,
    bench: u64,
    daemons: Vec<u64>,
}

impl CpuMark {
    /// Reads the counters of the machine, this process and `daemons` (pids).
    fn take(daemons: &[u32]) -> Result<CpuMark> {
        let machine = MachineTicks::now()?;
        let daemons = daemons
            .iter()
            .map(|&p| process_ticks(Some(p)))
            .collect::<Result<_>>()?;
        Ok(CpuMark {
            at: Instant::now(),
            machine,
            bench: process_ticks(None)?,
            daemons,
        })
    }

    /// CPU use from `self` to `later`: per-process shares of one core (`hz` ticks per
    /// second), machine shares of all cores.
    fn until(&self, later: &CpuMark, hz: f64) -> (Vec<f64>, Cpu) {
        let wall = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let core = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz / wall * 100.0;
        let daemons = self
            .daemons
            .iter()
            .zip(&later.daemons)
            .map(|(&a, &b)| core(a, b))
            .collect();
        let total = later
            .machine
            .total
            .saturating_sub(self.machine.total)
            .max(1) as f64;
        let share = |a: u64, b: u64| b.saturating_sub(a) as f64 / total * 100.0;
        let cpu = Cpu {
            client: None,
            server: None,
            bench: core(self.bench, later.bench),
            machine: share(self.machine.busy, later.machine.busy),
            steal: share(self.machine.steal, later.machine.steal),
            irq: share(self.machine.irq, later.machine.irq),
        };
        (daemons, cpu)
    }
}

/// Clock ticks per second of /proc's CPU times.
fn clock_ticks() -> Result<f64> {
    match procfs::ticks_per_second() {
        0 => bail!("cannot read CLK_TCK"),
        hz => Ok(hz as f64),
    }
}

/// What a timed TCP flow delivered, at the receiver.
#[derive(Clone, Copy, Debug)]
struct Flow {
    bytes: u64,
    /// From the accept until the sender's end of stream.
    elapsed: Duration,
}

impl Flow {
    fn mbit(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }
}

/// Parses /proc/net/snmp (pairs of `Proto: names…` / `Proto: values…` lines) into
/// `Proto.Name → value`.
fn parse_snmp(text: &str) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((proto, names)), Some((proto2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if proto != proto2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse() {
                out.insert(format!("{proto}.{n}"), v);
            }
        }
    }
    out
}

/// A number from the benchmark TUN device's /sys/class/net directory in `ns`.
fn tun_attr(ns: &Namespace, attr: &str) -> Result<i64> {
    let file = format!("/sys/class/net/{TUN}/{attr}");
    let out = ns.exec(["cat", file.as_str()])?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .with_context(|| format!("{file} in {}: {text:?}", ns.name()))
}

/// Kernel counters of the namespaces a transfer crosses, at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Net {
    /// TCP segments sent by the sender's namespace.
    tcp_out: i64,
    /// Of which retransmitted.
    tcp_retrans: i64,
    /// UDP datagrams dropped for a full receive buffer (`RcvbufErrors`), summed over the
    /// namespaces that receive UDP.
    udp_rcvbuf: i64,
    /// UDP sends refused for a full send buffer (`SndbufErrors`), same namespaces.
    udp_sndbuf: i64,
    /// Packets the client's and the server's TUN device dropped because their queue was
    /// full (`tx_dropped`: the kernel had a packet for the daemon, and the daemon had not
    /// read the queue in time).
    tun_drops: [i64; 2],
}

impl Net {
    /// Reads the counters: TCP of `sender`, UDP of `udp`, and the TUN devices of `tun`
    /// (the client's and the server's namespace) if given.
    fn take(sender: &Namespace, udp: &[&Namespace], tun: Option<[&Namespace; 2]>) -> Result<Net> {
        let snmp = |ns: &Namespace| -> Result<HashMap<String, i64>> {
            let out = ns.exec(["cat", "/proc/net/snmp"])?;
            Ok(parse_snmp(&String::from_utf8_lossy(&out.stdout)))
        };
        let get = |m: &HashMap<String, i64>, k: &str| m.get(k).copied().unwrap_or(0);
        let tcp = snmp(sender)?;
        let mut n = Net {
            tcp_out: get(&tcp, "Tcp.OutSegs"),
            tcp_retrans: get(&tcp, "Tcp.RetransSegs"),
            ..Net::default()
        };
        for ns in udp {
            let m = snmp(ns)?;
            n.udp_rcvbuf += get(&m, "Udp.RcvbufErrors");
            n.udp_sndbuf += get(&m, "Udp.SndbufErrors");
        }
        for (i, ns) in tun.iter().flatten().enumerate() {
            n.tun_drops[i] = tun_attr(ns, "statistics/tx_dropped")?;
        }
        Ok(n)
    }

    /// `later − self`, counter by counter.
    fn until(&self, later: &Net) -> Net {
        Net {
            tcp_out: later.tcp_out - self.tcp_out,
            tcp_retrans: later.tcp_retrans - self.tcp_retrans,
            udp_rcvbuf: later.udp_rcvbuf - self.udp_rcvbuf,
            udp_sndbuf: later.udp_sndbuf - self.udp_sndbuf,
            tun_drops: [
                later.tun_drops[0] - self.tun_drops[0],
                later.tun_drops[1] - self.tun_drops[1],
            ],
        }
    }

    /// Retransmitted share of the TCP segments sent, %.
    fn retrans_pct(&self) -> f64 {
        self.tcp_retrans as f64 * 100.0 / self.tcp_out.max(1) as f64
    }

    /// The counters as a note.
    fn describe(&self, tcp: &str) -> String {
        let mut s = format!(
            "{tcp} retransmitted {} of {} segments ({:.2} %)",
            self.tcp_retrans,
            self.tcp_out,
            self.retrans_pct()
        );
        if self.udp_rcvbuf > 0 || self.udp_sndbuf > 0 {
            let _ = write!(
                s,
                "; UDP buffers dropped {} received and refused {} sent datagrams",
                self.udp_rcvbuf, self.udp_sndbuf
            );
        }
        if self.tun_drops.iter().any(|&d| d > 0) {
            let _ = write!(
                s,
                "; TUN queues dropped {} (client) and {} (server) packets",
                self.tun_drops[0], self.tun_drops[1]
            );
        }
        s
    }
}

/// One TCP flow from `from` to a receiver on `dst` in `to`, with the test bed's own
/// generator and sink: the sender writes for `run` (congestion control `cc`), half-closes
/// and waits for the receiver to close. No digests: both ends only count, so the
/// generators cost as little CPU as possible.
fn tcp_flow(
    from: &Namespace,
    to: &Namespace,
    dst: SocketAddr,
    run: Duration,
    cc: &str,
) -> Result<Flow> {
    let tcp = TcpOptions {
        connect_timeout: CONNECT_TIMEOUT,
        stall_timeout: STALL_TIMEOUT,
        total_timeout: run + CONNECT_TIMEOUT + STALL_TIMEOUT,
        digest: false,
    };
    let sink = TcpSink::start_with(to, dst, tcp).with_context(|| format!("receiver on {dst}"))?;
    let send = SendOptions {
        tcp,
        proto: StreamProto::Tcp,
        limit: Some(SendLimit::For(run)),
        congestion: Some(cc.to_owned()),
        cancel: None,
    };
    let sent = tcp_send_opts(from, dst, u64::from(dst.port()), send)
        .with_context(|| format!("sending to {dst}"))?;
    let got = sink
        .wait(STALL_TIMEOUT)
        .with_context(|| format!("receiver on {dst}"))?;
    if got.bytes != sent.bytes {
        bail!(
            "TCP to {dst}: sent {} bytes, received {}",
            sent.bytes,
            got.bytes
        );
    }
    Ok(Flow {
        bytes: got.bytes,
        elapsed: got.elapsed,
    })
}

/// Hands out a fresh port per measurement.
#[derive(Debug)]
struct Ports(u16);

impl Ports {
    fn next(&mut self) -> u16 {
        self.0 = self.0.wrapping_add(1).max(BASE_PORT);
        self.0
    }
}

/// Everything a measurement needs.
#[derive(Debug)]
struct Bench<'t> {
    topo: &'t Topology,
    run: Duration,
    hz: f64,
    ports: Ports,
    program: PathBuf,
    /// TCP congestion control of the senders.
    cc: String,
    /// Non-fatal trouble (a daemon that did not exit cleanly), reported at the end.
    warnings: Vec<String>,
}

impl Bench<'_> {
    fn raw_udp(&mut self) -> Result<Sample> {
        let server = self.topo.path_server_addr(0)?;
        let dst = SocketAddr::new(server, self.ports.next());
        let sink = UdpSink::start(self.topo.server(), dst)?;
        let (client, server) = (self.topo.client(), self.topo.server());
        let net0 = Net::take(client, &[client, server], None)?;
        let before = CpuMark::take(&[])?;
        let sent = udp_blast(client, dst, DATAGRAM, self.run)?;
        let after = CpuMark::take(&[])?;
        // Let the last datagrams arrive.
        std::thread::sleep(Duration::from_millis(200));
        let got = sink.stop()?;
        let net = net0.until(&Net::take(client, &[client, server], None)?);
        let (_, cpu) = before.until(&after, self.hz);
        let lost = 1.0 - got.datagrams as f64 / sent.datagrams.max(1) as f64;
        Ok(Sample {
            mbit: got.goodput_mbit(),
            cpu,
            net,
            shares: Vec::new(),
            note: format!(
                "sent {:.0} Mbit/s, {:.1} % not received, {} send errors; receive buffer \
                 dropped {}",
                sent.offered_mbit(),
                lost * 100.0,
                sent.errors,
                net.udp_rcvbuf
            ),
        })
    }

    fn plain_tcp(&mut self) -> Result<Sample> {
        let server = self.topo.path_server_addr(0)?;
        let dst = SocketAddr::new(server, self.ports.next());
        let client = self.topo.client();
        let net0 = Net::take(client, &[], None)?;
        let before = CpuMark::take(&[])?;
        let flow =
            tcp_flow(client, self.topo.server(), dst, self.run, &self.cc).context("plain TCP")?;
        let after = CpuMark::take(&[])?;
        let net = net0.until(&Net::take(client, &[], None)?);
        let (_, cpu) = before.until(&after, self.hz);
        Ok(Sample {
            mbit: flow.mbit(),
            cpu,
            net,
            shares: Vec::new(),
            note: format!(
                "{} MB in {:.2} s; {}",
                flow.bytes / 1_000_000,
                flow.elapsed.as_secs_f64(),
                net.describe("TCP")
            ),
        })
    }

    fn tunnel(&mut self, paths: u8) -> Result<Sample> {
        let opts = TunnelOptions {
            program: self.program.clone(),
            paths: usize::from(paths),
            scheduler: "plait".to_owned(),
            tun: TUN.to_owned(),
            port: TUNNEL_PORT,
        };
        let t = Tunnel::start(self.topo, &opts)
            .with_context(|| format!("starting a tunnel over {paths} path(s)"))?;
        let topo = t.topology();
        let remote = topo.remote_host_addr(Family::V4);
        let logs = |t: &Tunnel| {
            format!(
                "client log:\n{}\nserver log:\n{}",
                t.client().log_tail(30),
                t.server().log_tail(30)
            )
        };
        let warm = SocketAddr::new(remote, self.ports.next());
        tcp_flow(topo.lan_host(), topo.remote_host(), warm, WARMUP, &self.cc)
            .with_context(|| format!("warm-up flow through the tunnel\n{}", logs(&t)))?;
        let dst = SocketAddr::new(remote, self.ports.next());
        let pids = [t.client().pid(), t.server().pid()];
        let ends = [topo.client(), topo.server()];
        let net0 = Net::take(topo.lan_host(), &ends, Some(ends))?;
        let before = CpuMark::take(&pids)?;
        let flow = tcp_flow(topo.lan_host(), topo.remote_host(), dst, self.run, &self.cc)
            .with_context(|| format!("TCP through the tunnel\n{}", logs(&t)))?;
        let after = CpuMark::take(&pids)?;
        let net = net0.until(&Net::take(topo.lan_host(), &ends, Some(ends))?);
        let (daemons, mut cpu) = before.until(&after, self.hz);
        cpu.client = daemons.first().copied();
        cpu.server = daemons.get(1).copied();
        let qlen = tun_attr(topo.client(), "tx_queue_len")?;
        let shares = path_shares(&t);
        let note = format!(
            "{}; {}; TUN queue length {qlen}",
            net.describe("inner TCP"),
            tunnel_note(&t)
        );
        if let Err(e) = t.shutdown() {
            self.warnings
                .push(format!("tunnel over {paths} path(s): {e:#}"));
        }
        Ok(Sample {
            mbit: flow.mbit(),
            cpu,
            net,
            shares,
            note,
        })
    }
}

/// Each path's share of the client's datagrams, % (empty if the status is unavailable).
fn path_shares(t: &Tunnel) -> Vec<f64> {
    let Ok(s) = t.client().status() else {
        return Vec::new();
    };
    let Some(sess) = s.sessions.first() else {
        return Vec::new();
    };
    let total: u64 = sess.paths.iter().map(|p| p.tx_packets).sum();
    sess.paths
        .iter()
        .map(|p| p.tx_packets as f64 * 100.0 / total.max(1) as f64)
        .collect()
}

/// The tunnel's own counters after a transfer (since it started, warm-up included).
fn tunnel_note(t: &Tunnel) -> String {
    let mut parts = Vec::new();
    if let Ok(s) = t.client().status()
        && let Some(sess) = s.sessions.first()
    {
        let total: u64 = sess.paths.iter().map(|p| p.tx_packets).sum();
        if sess.paths.len() > 1 {
            let shares: Vec<String> = sess
                .paths
                .iter()
                .map(|p| format!("{:.0}", p.tx_packets as f64 * 100.0 / total.max(1) as f64))
                .collect();
            parts.push(format!(
                "client's datagrams per path {} %",
                shares.join("/")
            ));
        }
        parts.push(format!("{total} datagrams sent"));
        let rates: Vec<String> = sess
            .paths
            .iter()
            .map(|p| p.rate_mbit.map_or("–".to_owned(), |r| format!("{r:.0}")))
            .collect();
        parts.push(format!("rate estimates {} Mbit/s", rates.join("/")));
        if sess.queue_full > 0 {
            parts.push(format!("{} refused by a full send queue", sess.queue_full));
        }
    }
    if let Ok(s) = t.server().status()
        && let Some(sess) = s.sessions.first()
    {
        let l = sess.lost;
        let lost = l.predecessor + l.comparison + l.timer + l.overflow;
        parts.push(format!(
            "server: {lost} holes declared lost, {} late, {} repaired",
            sess.late, l.repaired
        ));
    }
    parts.join("; ")
}

/// Median, minimum and maximum of the finite values (`bench-doc`'s [`Spread`]).
///
/// [`Spread`]: crate::bench::doc::Spread
fn summary(xs: &[f64]) -> Option<(f64, f64, f64)> {
    crate::bench::doc::Spread::of(xs.iter().copied()).map(|s| (s.median, s.min, s.max))
}

/// `median (min–max)` with `decimals` decimals; just the value if there is one sample.
fn cell(xs: &[f64], decimals: usize) -> String {
    match summary(xs) {
        None => "–".to_owned(),
        Some((m, lo, hi)) if xs.len() == 1 || lo == hi => format!("{m:.decimals$}"),
        Some((m, lo, hi)) => format!("{m:.decimals$} ({lo:.decimals$}–{hi:.decimals$})"),
    }
}

/// All results of a run: per kind, one sample per repetition.
#[derive(Debug)]
struct Results {
    rows: Vec<(Kind, Vec<Sample>)>,
    /// The machine's cores.
    cores: f64,
}

impl Results {
    fn samples(&self, kind: Kind) -> &[Sample] {
        self.rows
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[], |(_, s)| s.as_slice())
    }

    /// `kind ÷ base`, repetition by repetition.
    fn ratios(&self, kind: Kind, base: Kind) -> Vec<f64> {
        self.samples(kind)
            .iter()
            .zip(self.samples(base))
            .map(|(a, b)| a.mbit / b.mbit)
            .collect()
    }

    fn cpu(&self, kind: Kind, f: impl Fn(&Cpu) -> Option<f64>) -> Vec<f64> {
        self.samples(kind)
            .iter()
            .filter_map(|s| f(&s.cpu))
            .collect()
    }

    fn median_cpu(&self, kind: Kind, f: impl Fn(&Cpu) -> Option<f64>) -> f64 {
        summary(&self.cpu(kind, f)).map_or(f64::NAN, |s| s.0)
    }

    /// The summary table (Markdown).
    fn table(&self) -> String {
        let n = self.cores;
        let mut t = format!(
            "| measurement | goodput, Mbit/s | ÷ raw UDP | ÷ plain TCP | plait client, % of a core \
             | plait server, % of a core | generators (this process), % of a core \
             | machine busy, % of {n} cores | stolen, % of {n} cores \
             | machine cores busy per Gbit/s |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for (kind, samples) in &self.rows {
            let mbit: Vec<f64> = samples.iter().map(|s| s.mbit).collect();
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                kind.label(),
                cell(&mbit, 0),
                cell(&self.ratios(*kind, Kind::RawUdp), 2),
                cell(&self.ratios(*kind, Kind::PlainTcp), 2),
                cell(&self.cpu(*kind, |c| c.client), 0),
                cell(&self.cpu(*kind, |c| c.server), 0),
                cell(&self.cpu(*kind, |c| Some(c.bench)), 0),
                cell(&self.cpu(*kind, |c| Some(c.machine)), 0),
                cell(&self.cpu(*kind, |c| Some(c.steal)), 0),
                cell(&self.cost(*kind), 2),
            );
        }
        t
    }

    /// Every repetition's goodput and notes (Markdown).
    fn details(&self) -> String {
        let reps = self.rows.first().map_or(0, |(_, s)| s.len());
        let mut t = String::from("| measurement |");
        for r in 1..=reps {
            let _ = write!(t, " run {r}, Mbit/s |");
        }
        t.push_str("\n| --- |");
        for _ in 0..reps {
            t.push_str(" ---: |");
        }
        t.push('\n');
        for (kind, samples) in &self.rows {
            let _ = write!(t, "| {} |", kind.label());
            for s in samples {
                let _ = write!(t, " {:.0} |", s.mbit);
            }
            t.push('\n');
        }
        t.push('\n');
        for (kind, samples) in &self.rows {
            for (r, s) in samples.iter().enumerate() {
                let _ = writeln!(t, "- {}, run {}: {}", kind.label(), r + 1, s.note);
            }
        }
        t
    }

    /// Machine cores busy per Gbit/s of goodput, per run.
    fn cost(&self, kind: Kind) -> Vec<f64> {
        self.samples(kind)
            .iter()
            .map(|s| s.cpu.machine / 100.0 * self.cores / (s.mbit / 1000.0))
            .collect()
    }

    /// Median over the runs of a value of `kind`'s samples.
    fn median(&self, kind: Kind, f: impl Fn(&Sample) -> f64) -> f64 {
        let v: Vec<f64> = self.samples(kind).iter().map(f).collect();
        summary(&v).map_or(f64::NAN, |s| s.0)
    }

    /// The target line and the "what limits it" paragraph, from the measured numbers.
    fn analysis(&self, tunnels: &[u8]) -> String {
        let mut t = String::new();
        let ratio = |n: u8| summary(&self.ratios(Kind::Tunnel(n), Kind::RawUdp));
        let verdicts: Vec<String> = tunnels
            .iter()
            .filter_map(|&n| {
                ratio(n).map(|(m, lo, hi)| {
                    let met = if m >= 0.5 { "met" } else { "not met" };
                    format!(
                        "{} {m:.2} (runs {lo:.2}–{hi:.2}): {met}",
                        Kind::Tunnel(n).label()
                    )
                })
            })
            .collect();
        let _ = writeln!(
            t,
            "The target is tunnel goodput of at least 50 % of raw UDP throughput, with \
             encryption on. Median tunnel ÷ raw UDP in this run: {}. (Reported, not enforced: \
             the command never fails on speed.)\n",
            verdicts.join("; ")
        );

        let Some(&first) = tunnels.first() else {
            return t;
        };
        let k = Kind::Tunnel(first);
        let c = self.median_cpu(k, |c| c.client);
        let s = self.median_cpu(k, |c| c.server);
        let b = self.median_cpu(k, |c| Some(c.bench));
        let m = self.median_cpu(k, |c| Some(c.machine));
        let st = self.median_cpu(k, |c| Some(c.steal));
        let _ = write!(
            t,
            "### What limits it\n\n\
             During the {} transfers (medians over the runs) the plait client used {c:.0} % \
             of a core and the server {s:.0} %; each daemon runs one event-loop thread, so \
             100 % is its ceiling. This process, which runs the TCP sender and receiver, used \
             {b:.0} % of a core, and the machine as a whole was {m:.0} % busy (of its 2 \
             cores, kernel forwarding through the namespaces included) with {st:.0} % stolen \
             by the hypervisor. ",
            k.label()
        );
        let r = self.median(k, |s| s.net.retrans_pct());
        let r0 = self.median(Kind::PlainTcp, |s| s.net.retrans_pct());
        let tc = self.median(k, |s| s.net.tun_drops[0] as f64);
        let ts = self.median(k, |s| s.net.tun_drops[1] as f64);
        let ub = self.median(k, |s| (s.net.udp_rcvbuf + s.net.udp_sndbuf) as f64);
        let _ = write!(
            t,
            "The inner TCP retransmitted {r:.2} % of its segments (plain TCP on the bare \
             path: {r0:.2} %). Per transfer the client's TUN queue dropped {tc:.0} packets, \
             the server's {ts:.0}, and the daemons' UDP socket buffers {ub:.0} datagrams. "
        );
        let (busier, top) = if c >= s { ("client", c) } else { ("server", s) };
        if top >= 90.0 {
            let _ = write!(
                t,
                "The {busier} is at its thread's ceiling: the tunnel is limited by per-packet \
                 CPU work in that one thread (TUN reads and writes, sealing or opening every \
                 packet with ChaCha20-Poly1305, the engine's bookkeeping, the UDP system \
                 calls). More speed needs less work per packet or a second thread (the \
                 sharding sketched in crates/plait-tunnel/src/daemon/mod.rs). "
            );
        } else if m + st >= 90.0 {
            let n = self.cores;
            let irq = self.median_cpu(k, |c| Some(c.irq)) * n;
            let rest = (m * n - c - s - b - irq).max(0.0);
            let cost = self.median(k, |x| x.cpu.machine / 100.0 * n / (x.mbit / 1000.0));
            let tcp = self.median(Kind::PlainTcp, |x| {
                x.cpu.machine / 100.0 * n / (x.mbit / 1000.0)
            });
            let _ = write!(
                t,
                "Neither daemon fills its thread, but the machine's cores were busy or stolen \
                 {:.0} % of the time: the two daemons ({:.0} % of a core together), the sender \
                 and receiver ({b:.0} %), interrupt and softirq work ({irq:.0} % of a core: \
                 packet forwarding through the namespaces, veth, TUN and UDP receive) and the \
                 rest (about {rest:.0} % of a core: kernel work of other threads and anything \
                 else running on the machine) share {n} cores, so the machine as a whole is \
                 the limit. Per Gbit/s of goodput the tunnel keeps {cost:.2} cores busy, plain TCP \
                 {tcp:.2}: every inner packet makes two extra trips through the kernel (into \
                 the client's TUN device and out of the server's), is copied to and from a \
                 daemon at each end, and is encrypted and decrypted. ",
                m + st,
                c + s
            );
            if r >= 0.5 {
                let _ = write!(
                    t,
                    "When a daemon waits for a core its TUN queue overflows, and each drop \
                     costs the inner TCP a retransmission and a smaller window. "
                );
            }
        } else if tc + ts > 0.0 && r >= 0.1 {
            let _ = write!(
                t,
                "So neither daemon nor the machine is short of CPU on average, yet packets \
                 are lost at a TUN queue: the inner TCP's bursts arrive faster than the daemon \
                 drains the queue whenever it is not running, and each drop costs the inner \
                 TCP a retransmission and a smaller window. The limit is how soon and how \
                 often the daemon gets to read its TUN device, not the work per packet. "
            );
        } else {
            let _ = write!(
                t,
                "Neither daemon fills its thread and the inner TCP lost too little to be held \
                 back by loss, which points to time the daemons spend waiting to run again \
                 after each wait (wake-up latency), as REFERENCES.md found for boringtun and \
                 glorytun on these machines. "
            );
        }
        if top < 90.0 && m + st < 90.0 {
            let _ = write!(
                t,
                "The machine had idle time ({:.0} % neither busy nor stolen), so the daemons \
                 did not lack cores on average. ",
                100.0 - m - st
            );
        }
        let cost = self.median(k, |x| {
            x.cpu.machine / 100.0 * self.cores / (x.mbit / 1000.0)
        });
        let target = self.median(Kind::RawUdp, |x| x.mbit) * 0.5;
        let need = cost * target / 1000.0;
        if need.is_finite() {
            let n = self.cores;
            let verdict = if need > n {
                format!(
                    "more than the machine's {n}: reaching the target needs less CPU per \
                     packet (in the daemons and in the kernel paths they use), whatever else \
                     limits the flow"
                )
            } else {
                format!("within the machine's {n}, so the CPU is there in principle")
            };
            let _ = write!(
                t,
                "At the measured cost of {cost:.2} busy cores per Gbit/s, half of raw UDP \
                 ({target:.0} Mbit/s) would keep {need:.1} cores busy: {verdict}. "
            );
        }
        if st >= 10.0 {
            let _ = write!(
                t,
                "The hypervisor stole {st:.0} % of the cores during these transfers: other \
                 load on the host made this run slower than a quiet one. "
            );
        }
        if let (Some(one), Some(&more)) = (
            summary(&self.mbit(Kind::Tunnel(1))),
            tunnels.iter().find(|&&n| n > 1),
        ) {
            let kk = Kind::Tunnel(more);
            if let Some(two) = summary(&self.mbit(kk)) {
                let share = self.median(kk, |s| s.shares.first().copied().unwrap_or(f64::NAN));
                let paired = cell(&self.ratios(kk, Kind::Tunnel(1)), 2);
                let _ = write!(
                    t,
                    "Over {more} paths the tunnel carried {:.0} Mbit/s against {:.0} over one \
                     ({more} paths ÷ 1 path within each run: {paired}), with {share:.0} % of \
                     the client's datagrams on path 0. The unshaped paths offer far more \
                     capacity than the tunnel fills, so a difference between the two comes \
                     from CPU and scheduling, not from link capacity. ",
                    two.0, one.0
                );
            }
        }
        let _ = writeln!(
            t,
            "\n\nFor orientation only (stored numbers from other runs, REFERENCES.md, not \
             comparable side by side): on one unshaped veth path of these machines boringtun \
             (userspace WireGuard) carried about 300 Mbit/s and glorytun 280–480 Mbit/s, \
             against raw UDP of about 1500–1660 Mbit/s."
        );
        t
    }

    fn mbit(&self, kind: Kind) -> Vec<f64> {
        self.samples(kind).iter().map(|s| s.mbit).collect()
    }
}

/// `YYYY-MM-DD HH:MM UTC` of now.
fn utc_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M UTC")
        .to_string()
}

/// A one-line description of the machine: CPU model, cores, kernel, load at the start.
fn machine_note() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!("{model}, {cores} cores, Linux {kernel}; load average at the start {load}")
}

fn command_line(args: &TunnelBenchOptions) -> String {
    let paths: Vec<String> = args.paths.iter().map(u8::to_string).collect();
    format!(
        "plait tunnel-bench --seconds {} --repeat {} --paths {} --cc {} --out {}",
        args.seconds,
        args.repeat,
        paths.join(","),
        args.cc,
        args.out.display()
    )
}

/// Runs the benchmark; see the module documentation.
pub fn run(args: TunnelBenchOptions) -> Result<()> {
    if !(1..=MAX_SECONDS).contains(&args.seconds) {
        bail!(
            "--seconds must be from 1 to {MAX_SECONDS} (got {})",
            args.seconds
        );
    }
    if !(1..=MAX_REPEAT).contains(&args.repeat) {
        bail!(
            "--repeat must be from 1 to {MAX_REPEAT} (got {})",
            args.repeat
        );
    }
    if args.paths.is_empty() || args.paths.iter().any(|&n| !(1..=MAX_PATHS).contains(&n)) {
        bail!(
            "--paths takes path counts from 1 to {MAX_PATHS} (got {:?})",
            args.paths
        );
    }
    if !have_root() {
        bail!(
            "tunnel-bench needs root: it builds network namespaces and TUN devices \
             (run it as root, e.g. with sudo)"
        );
    }
    let mut tunnels: Vec<u8> = Vec::new();
    for &n in &args.paths {
        if !tunnels.contains(&n) {
            tunnels.push(n);
        }
    }
    let max_paths = tunnels.iter().copied().max().unwrap_or(1);
    // A private copy of this binary for the daemons: a rebuild during the run cannot
    // change what runs.
    let exe = std::env::current_exe().context("cannot find the plait binary")?;
    let bin_dir = tempfile::Builder::new()
        .prefix("plait-bench-bin-")
        .tempdir()
        .context("temporary directory")?;
    let program = bin_dir.path().join("plait");
    std::fs::copy(&exe, &program)
        .with_context(|| format!("cannot copy {} to {}", exe.display(), program.display()))?;
    let hz = clock_ticks()?;
    if let Err(e) = cleanup_stale(PREFIX) {
        eprintln!("plait: cleaning up namespaces of an earlier run: {e}");
    }
    let machine = machine_note();
    let started = utc_now();
    let spec = TopologySpec::new(PREFIX, (0..max_paths).map(|_| PathSpec::v4()).collect());
    let topo = Topology::build(&spec).context("building the test bed topology")?;

    let mut kinds = vec![Kind::RawUdp, Kind::PlainTcp];
    kinds.extend(tunnels.iter().map(|&n| Kind::Tunnel(n)));
    let mut results = Results {
        rows: kinds.iter().map(|&k| (k, Vec::new())).collect(),
        cores: std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64),
    };
    let mut bench = Bench {
        topo: &topo,
        run: Duration::from_secs(args.seconds),
        hz,
        ports: Ports(BASE_PORT - 1),
        program,
        cc: args.cc.clone(),
        warnings: Vec::new(),
    };
    for rep in 1..=args.repeat {
        for (kind, samples) in &mut results.rows {
            eprint!("run {rep}/{}: {} … ", args.repeat, kind.label());
            let sample = match *kind {
                Kind::RawUdp => bench.raw_udp(),
                Kind::PlainTcp => bench.plain_tcp(),
                Kind::Tunnel(n) => bench.tunnel(n),
            }
            .with_context(|| format!("run {rep}: {}", kind.label()))?;
            eprintln!("{:.0} Mbit/s", sample.mbit);
            samples.push(sample);
        }
    }
    let warnings = std::mem::take(&mut bench.warnings);
    drop(bench);
    drop(topo);

    let table = results.table();
    let analysis = results.analysis(&tunnels);
    println!("\n{table}\n{analysis}");
    for w in &warnings {
        eprintln!("plait: warning: {w}");
    }

    let mut doc = String::new();
    let _ = write!(
        doc,
        "# Tunnel benchmark\n\n\
         Generated by `{cmd}` (as root) on {started}; do not edit, re-run the command.\n\n\
         Machine: {machine}. Numbers on a shared VM move 10-25 % between runs: compare within a \
         run.\n\n\
         ## Setup\n\n\
         One `plait-testbed` topology with {max_paths} unshaped path(s) (veths through one \
         router namespace per path, TSO/GSO/GRO off on every veth, no tbf). Each of {reps} \
         runs measures, in order, for {secs} s each:\n\n\
         - **raw UDP**: {DATAGRAM}-byte datagrams sent as fast as the kernel takes them from \
           the client namespace to the server namespace over path 0; goodput is the \
           receiver's rate between its first and last datagram.\n\
         - **plain TCP**: one kernel TCP flow ({cc}, set on the sender's socket) on the same route.\n\
         - **tunnel**: `plait server` and `plait client` started afresh (scheduler `plait`, \
           reordering `bmp`, ChaCha20-Poly1305 encryption, which cannot be turned off), a 1 s \
           warm-up flow, then one TCP flow ({cc}) from the lan host behind the client to \
           the remote host behind the server, through the tunnel over the first N paths.\n\n\
         TCP goodput is bytes received over the time from the accept to the sender's end of \
         stream. CPU is sampled over each measured transfer: the daemons from \
         `/proc/PID/stat` and this process (sender, receiver and UDP generator threads) from \
         `/proc/self/stat`, as % of one core; the machine from `/proc/stat`, as % of all \
         cores. Around each transfer it reads the kernel counters that show where packets \
         were lost: TCP retransmissions of the sender's namespace and UDP buffer drops \
         (`/proc/net/snmp`), and the TUN devices' `tx_dropped`. Ratios are taken within \
         each run, then summarised. Cells are median (min–max) over the runs.\n\n\
         ## Results\n\n\
         {table}\n\
         {analysis}\n\
         ## Each run\n\n\
         {details}",
        cmd = command_line(&args),
        cc = args.cc,
        reps = args.repeat,
        secs = args.seconds,
        details = results.details(),
    );
    if !warnings.is_empty() {
        doc.push_str("\n## Warnings\n\n");
        for w in &warnings {
            let _ = writeln!(doc, "- {}", w.replace('\n', " "));
        }
    }
    std::fs::write(&args.out, doc)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("wrote {}", args.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_and_process_ticks_read() {
        let m = MachineTicks::now().unwrap();
        assert!(
            m.total > 0 && m.busy + m.steal <= m.total && m.irq <= m.busy,
            "{m:?}"
        );
        let me = process_ticks(None).unwrap();
        let by_pid = process_ticks(Some(std::process::id())).unwrap();
        assert!(by_pid >= me, "{me} then {by_pid}");
        assert!(clock_ticks().unwrap() > 0.0);
    }

    #[test]
    fn summary_is_median_min_max() {
        assert_eq!(summary(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(summary(&[]), None);
        assert_eq!(cell(&[1.234], 1), "1.2");
        assert_eq!(cell(&[1.0, 3.0, 2.0], 0), "2 (1–3)");
    }

    #[test]
    fn snmp_parses_pairs() {
        let text = "Tcp: RtoAlgorithm MaxConn OutSegs RetransSegs\nTcp: 1 -1 500 7\n\
                    Udp: InDatagrams RcvbufErrors\nUdp: 9 2\n";
        let m = parse_snmp(text);
        assert_eq!(m["Tcp.MaxConn"], -1);
        assert_eq!(m["Tcp.OutSegs"], 500);
        assert_eq!(m["Tcp.RetransSegs"], 7);
        assert_eq!(m["Udp.RcvbufErrors"], 2);
        let a = Net::default();
        let b = Net {
            tcp_out: 200,
            tcp_retrans: 3,
            ..Net::default()
        };
        assert!((a.until(&b).retrans_pct() - 1.5).abs() < 1e-9);
    }

    #[test]
    fn the_date_reads_as_utc() {
        let s = utc_now();
        assert_eq!(s.len(), "2026-11-24 07:50 UTC".len(), "{s}");
        assert!(s.ends_with(" UTC") && s.as_bytes()[4] == b'-', "{s}");
    }

    #[test]
    fn cpu_shares() {
        let at = Instant::now();
        let a = CpuMark {
            at,
            machine: MachineTicks {
                busy: 0,
                steal: 0,
                irq: 0,
                total: 0,
            },
            bench: 0,
            daemons: vec![0, 10],
        };
        let b = CpuMark {
            at: at + Duration::from_secs(2),
            machine: MachineTicks {
                busy: 300,
                steal: 40,
                irq: 100,
                total: 400,
            },
            bench: 50,
            daemons: vec![200, 110],
        };
        let (d, cpu) = a.until(&b, 100.0);
        assert_eq!(d, vec![100.0, 50.0]);
        assert_eq!(cpu.bench, 25.0);
        assert_eq!(cpu.machine, 75.0);
        assert_eq!(cpu.steal, 10.0);
        assert_eq!(cpu.irq, 25.0);
    }
}
