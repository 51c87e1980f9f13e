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
//! Files: this one runs the measurements; `harness.rs` starts and stops the daemons,
//! `cpu.rs` samples CPU time and `counters.rs` the kernel counters (both through procfs),
//! `report.rs` turns the samples into the tables, the analysis and the Markdown document.
//! The traffic (TCP sender and sink, UDP blast and sink) is plait-testbed's.
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

mod counters;
mod cpu;
pub(crate) mod harness;
mod report;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use plait_testbed::traffic::TcpOptions;
use plait_testbed::{
    Family, Namespace, PathSpec, SendLimit, SendOptions, StreamProto, TcpSink, Topology,
    TopologySpec, UdpSink, cleanup_stale, have_root, tcp_send_opts, udp_blast,
};

use counters::{Net, tun_attr};
use cpu::{Cpu, CpuMark, clock_ticks};
use harness::{Tunnel, TunnelOptions};
use report::{Results, RunFacts, document, machine_note, utc_now};

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
            streams: false,
            engine: Vec::new(),
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
    let bin_dir = crate::temp_dir::owned_temp_dir("plait-bench-bin-")?;
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

    let facts = RunFacts {
        started,
        machine,
        max_paths,
    };
    let doc = document(&args, &facts, &results, &table, &analysis, &warnings);
    std::fs::write(&args.out, doc)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("wrote {}", args.out.display());
    Ok(())
}
