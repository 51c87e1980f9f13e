//! Running one benchmark topology: the test bed, then each mode in turn on the same links.
//!
//! One run builds the topology of a [`TopologyFile`] (`plait-testbed`: tbf rate and queue,
//! NFQUEUE delay and loss per direction, one router namespace per path), starts a UDP echo
//! on the server's path-0 address, measures the idle RTT of path 0 for one second, then runs
//! the requested [`Mode`]s one after the other, always in the order single, MPTCP, plait,
//! plait-stream:
//!
//! - **single**: one plain TCP flow from the client namespace to the server's address on
//!   the best path ([`TopologyFile::best_path`]); routing keeps it on that path.
//! - **mptcp**: one kernel MPTCP flow between the same namespaces
//!   ([`plait_testbed::Topology::setup_mptcp`]: the server announces its other path
//!   addresses, the client opens one subflow to each).
//! - **plait**: `plait server` and `plait client` (this binary) over every path, and one
//!   plain TCP flow from the lan host to the remote host through the tunnel.
//! - **plait-stream**: the same daemons with `[streams]` in both configs and the same flow;
//!   the client's nftables rules redirect it to its relay, the server connects to the
//!   remote host. The run fails unless the client's relay counted the connection (so a
//!   stream-mode row never measures packet mode by mistake).
//! - **plait-cbr** (after the others): a constant-rate UDP flow through the same tunnel
//!   under several engine settings, one tunnel per row ([`super::cbr`]).
//!
//! Every sender uses the congestion control of [`RunOptions::cc`] (cubic by
//! default: the kernel default of most systems and the references' figures; this
//! machine's own default may differ). Each mode writes for the file's `duration_s` (then half-closes and waits for the
//! receiver), with the file's events applied on the same schedule (seconds after the
//! sender starts). Meanwhile it samples: the receiver's goodput every 100 ms, every router's
//! bytes forwarded towards the server every 100 ms (per-path use, for every mode alike), and
//! a UDP probe over path 0 every 10 ms (RTT under load).
//!
//! Invariants:
//! - Every resource is owned by a guard: the [`Topology`] (namespaces, emulators, rules),
//!   the tunnel ([`Tunnel`]: daemons, files), samplers and sinks (threads); an error or an
//!   interruption (the `cancel` flag, set by Ctrl-C) unwinds through them, so nothing is
//!   left behind; namespaces of a killed run are removed by the next one
//!   ([`cleanup_stale`]).
//! - An event is always lifted again, even when the transfer ends early.
//! - A failing mode is recorded in its [`ModeResult::error`] and the other modes still
//!   run; only an interruption or a test-bed failure aborts the whole run.
//! - The bytes are checked end to end (SHA-256 of what was written against what was read).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use plait_testbed::emulate::{LinkModel, LossModel};
use plait_testbed::traffic::TcpOptions;
use plait_testbed::{
    CounterSample, CounterSampler, Direction, Family, PathSpec, RttProbe, SendLimit, SendOptions,
    StreamProto, TcpSink, Topology, UdpEcho, cleanup_stale, tcp_send_opts,
};

use super::cbr;
use super::mode::{Mode, PROBE_INTERVAL, RunOptions, SAMPLE};
use super::report::{self, ModeResult, TopologyResult};
use super::spec::testbed_spec;
use super::tunnel::{Tunnel, TunnelOptions};
use plait_topology::{EventFile, EventKind, TopologyFile};

/// The UDP echo's port on the server.
const ECHO_PORT: u16 = 7007;
/// The remote host's echo for the probes through the tunnel.
const TUNNEL_ECHO_PORT: u16 = 7008;
/// First TCP port of the measured transfers (each mode takes the next).
const BASE_PORT: u16 = 5101;
/// The plait server's UDP port.
const TUNNEL_PORT: u16 = 7744;
/// TUN device name (inside the run's own namespaces).
const TUN: &str = "plaitb";
/// Idle RTT measurement before the first mode.
const IDLE_PROBE: Duration = Duration::from_secs(1);
/// Stream mode's stall timeout of sender and receiver (also its wait for the drain after
/// the sender's close); 30 s for the other modes.
const STREAM_STALL_TIMEOUT: Duration = Duration::from_secs(90);
/// Lines of each daemon's log quoted when a stream-mode transfer fails.
const LOG_LINES: usize = 30;
/// Pause between modes (queues drain, TIME_WAIT is on other ports anyway).
const SETTLE: Duration = Duration::from_millis(500);

/// Sleeps `d`, returning early (false) if `cancel` is set.
fn sleep_unless(cancel: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if cancel.load(Ordering::Acquire) {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

/// Runs `file` as `opts` say; see the module documentation.
pub fn run_topology(file: &TopologyFile, opts: &RunOptions) -> Result<TopologyResult> {
    let mut modes = opts.modes.clone();
    modes.sort();
    modes.dedup();
    if modes.is_empty() && opts.cbr.is_none() {
        bail!("no mode to run");
    }
    if let Err(e) = cleanup_stale(&opts.prefix) {
        opts.say(&format!("warning: cleaning up stale namespaces: {e}"));
    }
    let topo = Topology::build(&testbed_spec(file, &opts.prefix, opts.seed))
        .context("building the test bed (network namespaces; needs root)")?;
    let best = file.best_path();
    if modes.contains(&Mode::Mptcp) {
        topo.setup_mptcp(best).context("setting up kernel MPTCP")?;
    }
    let echo = UdpEcho::start(
        topo.server(),
        SocketAddr::new(topo.path_server_addr(0)?, ECHO_PORT),
    )?;
    let idle = RttProbe::start(topo.client(), echo.local_addr(), PROBE_INTERVAL)?;
    let slept = sleep_unless(&opts.cancel, IDLE_PROBE);
    let idle = idle.stop()?;
    if !slept {
        bail!("interrupted (everything it had set up is removed)");
    }
    let mut result = TopologyResult::new(file, opts, best);
    result.idle_rtt_ms = idle.quantile(0.5).map(|d| d.as_secs_f64() * 1000.0);
    for (k, mode) in modes.into_iter().enumerate() {
        if opts.cancelled() {
            bail!("interrupted (everything it had set up is removed)");
        }
        let port = BASE_PORT + u16::try_from(k).unwrap_or(0);
        let r = match run_mode(&topo, file, mode, port, echo.local_addr(), opts) {
            Ok(r) => r,
            Err(e) => {
                if opts.cancelled() {
                    bail!("interrupted (everything it had set up is removed)");
                }
                opts.say(&format!("  {}: failed: {e:#}", mode.name()));
                ModeResult::failed(mode, file, best, &opts.scheduler, format!("{e:#}"))
            }
        };
        result.modes.push(r);
        if !sleep_unless(&opts.cancel, SETTLE) {
            bail!("interrupted (everything it had set up is removed)");
        }
    }
    // The UDP flow's rows last (`plait-cbr`), after every transfer mode.
    if let Some(settings) = opts.cbr {
        let tunnel = tunnel_options(opts, file.paths.len(), false);
        let rows = cbr::run_rows(&topo, file, opts, settings, &tunnel)?;
        result.cbr = Some(cbr::report::CbrResult {
            settings,
            faster_rtt_ms: cbr::faster_rtt_ms(file),
            rows,
        });
    }
    drop(echo);
    drop(topo);
    Ok(result)
}

/// The tunnel of the tunnel modes (and of `plait-cbr`'s rows, which add their own
/// `[engine]` lines) over `paths` paths.
pub(crate) fn tunnel_options(opts: &RunOptions, paths: usize, streams: bool) -> TunnelOptions {
    TunnelOptions {
        program: opts.program.clone(),
        paths,
        scheduler: opts.scheduler.clone(),
        tun: TUN.into(),
        port: TUNNEL_PORT,
        streams,
        engine: opts.engine.clone(),
    }
}

/// Lifts an event it applied when dropped (so an early end never leaves a path dead, at
/// an event's rate or at an event's loss).
struct Applied<'t> {
    topo: &'t Topology,
    event: EventFile,
    /// The path as the test bed built it: its rate and queue, restored when a rate event
    /// ends, and its delay and loss, when a loss event ends.
    spec: PathSpec,
}

impl Applied<'_> {
    fn apply(topo: &Topology, event: &EventFile, spec: &PathSpec, on: bool) -> Result<()> {
        let path = event.path;
        match event.kind {
            EventKind::Blackhole => topo.blackhole(path, on)?,
            EventKind::LinkDown => topo.set_link(path, !on)?,
            EventKind::Rate => {
                let rate = if on { event.rate_mbit } else { spec.rate_mbit };
                topo.path(path)?.set_rate(rate, spec.queue_bytes)?;
            }
            EventKind::Loss => {
                for dir in [Direction::Up, Direction::Down] {
                    topo.set_path_model(path, dir, loss_event_model(spec, dir, event, on))?;
                }
            }
        }
        Ok(())
    }
}

/// What a `loss` event makes of direction `dir` of a path built as `spec`: the built
/// model with the event's random loss while it is in force (`on`), the built model after.
pub(crate) fn loss_event_model(
    spec: &PathSpec,
    dir: Direction,
    event: &EventFile,
    on: bool,
) -> LinkModel {
    let mut model = spec.link_model(dir);
    if on {
        model.loss = match event.loss {
            Some(p) if p > 0.0 => LossModel::Bernoulli { p },
            _ => LossModel::None,
        };
    }
    model
}

impl Drop for Applied<'_> {
    fn drop(&mut self) {
        if let Err(e) = Applied::apply(self.topo, &self.event, &self.spec, false) {
            eprintln!(
                "plait bench: lifting {:?} on path {}: {e}",
                self.event.kind, self.event.path
            );
        }
    }
}

/// Applies the file's events on schedule from `t0` until they are over or `stop` is set;
/// returns the actual (start, end) of each event, relative to `t0`. `observe(event, on)`
/// is called after an event took effect (`true`) and after it was lifted (`false`: the
/// path is back at the file's settings for what the event changed).
pub(crate) fn run_events(
    topo: &Topology,
    file: &TopologyFile,
    t0: Instant,
    stop: &AtomicBool,
    observe: &(dyn Fn(&EventFile, bool) + Sync),
) -> Result<Vec<(f64, f64)>> {
    let mut order: Vec<usize> = (0..file.events.len()).collect();
    order.sort_by(|a, b| file.events[*a].from_s.total_cmp(&file.events[*b].from_s));
    let mut times = vec![(f64::NAN, f64::NAN); file.events.len()];
    // Events on different paths may overlap: keep the applied ones until their end.
    let mut active: Vec<(usize, f64, Applied<'_>)> = Vec::new();
    let mut pending = order.into_iter().peekable();
    loop {
        let now = t0.elapsed().as_secs_f64();
        let mut k = 0;
        while k < active.len() {
            if now >= active[k].1 {
                let (idx, _, applied) = active.remove(k);
                drop(applied);
                times[idx].1 = t0.elapsed().as_secs_f64();
                observe(&file.events[idx], false);
            } else {
                k += 1;
            }
        }
        while let Some(&idx) = pending.peek() {
            let e = &file.events[idx];
            if now < e.from_s {
                break;
            }
            pending.next();
            // The guard first: if applying fails halfway (one of two `tc` calls), dropping
            // it restores what was changed.
            let guard = Applied {
                topo,
                event: *e,
                spec: topo.path(e.path)?.spec().clone(),
            };
            Applied::apply(topo, e, &guard.spec, true)?;
            times[idx].0 = t0.elapsed().as_secs_f64();
            observe(e, true);
            active.push((idx, e.to_s, guard));
        }
        if active.is_empty() && pending.peek().is_none() {
            return Ok(times);
        }
        if stop.load(Ordering::Acquire) {
            for (idx, _, applied) in active.drain(..) {
                drop(applied);
                times[idx].1 = t0.elapsed().as_secs_f64();
                observe(&file.events[idx], false);
            }
            return Ok(times);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn run_mode(
    topo: &Topology,
    file: &TopologyFile,
    mode: Mode,
    port: u16,
    echo: SocketAddr,
    opts: &RunOptions,
) -> Result<ModeResult> {
    let best = file.best_path();
    let n = file.paths.len();
    let tunnel = if mode.is_tunnel() {
        let streams = mode == Mode::PlaitStream;
        opts.say(&format!(
            "  {}: starting the plait tunnel (scheduler {}{})",
            file.name,
            opts.scheduler,
            if streams { ", stream mode" } else { "" }
        ));
        Some(Tunnel::start(topo, &tunnel_options(opts, n, streams))?)
    } else {
        None
    };
    let (from, to_ns, bind, dst, proto) = match mode {
        Mode::Single => {
            let a = SocketAddr::new(topo.path_server_addr(best)?, port);
            (topo.client(), topo.server(), a, a, StreamProto::Tcp)
        }
        Mode::Mptcp => {
            // Joins arrive at the server's other addresses: listen on all of them.
            let bind = SocketAddr::from(([0, 0, 0, 0], port));
            let dst = SocketAddr::new(topo.path_server_addr(best)?, port);
            (topo.client(), topo.server(), bind, dst, StreamProto::Mptcp)
        }
        // Stream mode: the same connection; the client's nftables rules redirect it to
        // the relay, and the server connects to the remote host.
        Mode::Plait | Mode::PlaitStream => {
            let a = SocketAddr::new(topo.remote_host_addr(Family::V4), port);
            (topo.lan_host(), topo.remote_host(), a, a, StreamProto::Tcp)
        }
    };
    let duration = file.duration();
    // Stream mode's client takes the sender's bytes into its relay and engine stream well
    // ahead of the paths (measured: about 20 MB after 5 s at 30 Mbit/s), so after the
    // sender's close the drain can take tens of seconds at low rates: allow it.
    let (stall, spare) = if mode == Mode::PlaitStream {
        (STREAM_STALL_TIMEOUT, Duration::from_secs(150))
    } else {
        (Duration::from_secs(30), Duration::from_secs(90))
    };
    let tcp = TcpOptions {
        connect_timeout: Duration::from_secs(10),
        stall_timeout: stall,
        total_timeout: duration + spare,
        digest: true,
    };
    opts.say(&format!(
        "  {}: {} for {:.0} s",
        file.name,
        report::mode_label(mode, best, &opts.scheduler),
        file.duration_s
    ));
    let sink = TcpSink::start_proto(to_ns, bind, tcp, proto)?;
    let counters = topo
        .site0()
        .paths()
        .iter()
        .map(|p| {
            CounterSampler::start(
                p.router(),
                plait_testbed::topology::ROUTER_SERVER_DEV,
                SAMPLE,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let probe = RttProbe::start(topo.client(), echo, PROBE_INTERVAL)?;
    // Tunnel modes: an application's probe beside the transfer, through the tunnel.
    let tunnel_probe = if mode.is_tunnel() {
        let addr = SocketAddr::new(topo.remote_host_addr(Family::V4), TUNNEL_ECHO_PORT);
        let echo = UdpEcho::start(topo.remote_host(), addr)?;
        let probe = RttProbe::start(topo.lan_host(), addr, PROBE_INTERVAL)?;
        Some((echo, probe))
    } else {
        None
    };
    let send_opts = SendOptions {
        tcp,
        proto,
        limit: Some(SendLimit::For(duration)),
        congestion: Some(opts.cc.clone()),
        cancel: Some(Arc::clone(&opts.cancel)),
    };
    let seed = opts.seed.wrapping_mul(31).wrapping_add(port.into());
    let done = AtomicBool::new(false);
    let t0 = Instant::now();
    let (sent, events) = std::thread::scope(|s| {
        let ev = s.spawn(|| run_events(topo, file, t0, &done, &|_, _| {}));
        let sent = tcp_send_opts(from, dst, seed, send_opts);
        done.store(true, Ordering::Release);
        let events = ev
            .join()
            .map_err(|_| anyhow!("the event thread panicked"))
            .and_then(|r| r);
        (sent, events)
    });
    let t_end = Instant::now();
    let probes = probe.stop()?;
    let tunnel_probes = match tunnel_probe {
        Some((_echo, probe)) => Some(probe.stop()?),
        None => None,
    };
    // The sender returns once the receiver closed; after a failed send, do not wait.
    let got = match &sent {
        Ok(_) => sink
            .wait(Duration::from_secs(30))
            .map_err(anyhow::Error::from),
        Err(_) => Err(anyhow!("the sender failed")),
    };
    let samples: Vec<Vec<CounterSample>> = counters
        .into_iter()
        .map(CounterSampler::stop)
        .collect::<Result<_, _>>()?;
    let status = tunnel.as_ref().and_then(|t| t.client().status().ok());
    let server_status = tunnel.as_ref().and_then(|t| t.server().status().ok());
    // What the engines did about loss (the transfer goes from the client to the server):
    // packet-mode FEC, the reorder buffer's loss verdicts and repairs, the send queue's
    // drops and CE marks, and each path's declared losses (of them, late: reordered, not
    // lost), per end.
    for (end, st) in [("client", &status), ("server", &server_status)] {
        if let Some(sess) = st.as_ref().and_then(|s| s.sessions.first()) {
            let paths: Vec<String> = sess
                .paths
                .iter()
                .map(|p| format!("{} {}/{}", p.id, p.lost_packets, p.late_packets))
                .collect();
            opts.say(&format!(
                "  {}: {end} engine: fec {:?}; losses {:?}; send queue {:?}; {:?}; \
                 paths' lost/late datagrams: {}",
                file.name,
                sess.fec,
                sess.lost,
                sess.send_queue_drops,
                sess.sparse,
                paths.join(", ")
            ));
        }
    }
    // Stream mode's failures are in the daemons' logs: keep their tails for the error.
    let logs = tunnel.as_ref().map(|t| {
        format!(
            "client log:\n{}\nserver log:\n{}",
            t.client().log_tail(LOG_LINES),
            t.server().log_tail(LOG_LINES)
        )
    });
    if let Some(t) = tunnel {
        t.shutdown().context("stopping the tunnel")?;
    }
    if mode == Mode::PlaitStream {
        let relay = (
            status.as_ref().and_then(|s| s.relay),
            server_status.as_ref().and_then(|s| s.relay),
        );
        opts.say(&format!(
            "  {}: relay counters (client, server): {relay:?}",
            file.name
        ));
        let relayed = relay.0.map_or(0, |r| r.relayed);
        let failed = sent.is_err() || got.is_err();
        if relayed == 0 || failed {
            let why = if relayed == 0 {
                "the client's relay carried no connection (stream mode not in use)"
            } else {
                "the stream-mode transfer failed"
            };
            let first = match (&sent, &got) {
                (Err(e), _) => format!(" (sending: {e:#})"),
                (_, Err(e)) => format!(" (receiving: {e:#})"),
                _ => String::new(),
            };
            bail!(
                "{why}{first}; relay counters (client, server): {relay:?}\n{}",
                logs.unwrap_or_default()
            );
        }
    }
    let events = events?;
    let sent = sent.context("sending")?;
    let got = got.context("receiving")?;
    if opts.cancelled() {
        bail!("interrupted (everything it had set up is removed)");
    }
    Ok(report::mode_result(&report::Measured {
        mode,
        file,
        best,
        scheduler: &opts.scheduler,
        t0,
        t_end,
        sent: &sent,
        got: &got,
        counters: &samples,
        probes: &probes,
        tunnel_probes: tunnel_probes.as_ref(),
        events: &events,
        tun_mtu: status.as_ref().map(|s| s.tun_mtu),
    }))
}
