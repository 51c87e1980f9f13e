//! Benchmark results: what one mode measured ([`ModeResult`]), one topology run
//! ([`TopologyResult`], the JSON file), the derived metrics, and the terminal table.
//!
//! Definitions (docs/benchmarks.md repeats them):
//! - **goodput**: bytes received ÷ time from the accept to the sender's close (includes
//!   slow start and the final drain); **of sum**: goodput ÷ the sum of the path rates;
//!   **of ceiling**: goodput ÷ what the mode could carry at most: the rates times the TCP
//!   payload per 1514-byte Ethernet frame (1448 B for plain TCP and MPTCP, MTU − 52 B for
//!   the TCP inside plait's tunnel, and for stream mode the engine's stream payload per
//!   datagram ([`STREAM_PAYLOAD`]), since its end hosts' TCP runs over local sockets only) over the paths
//!   the mode may use.
//! - **share**: each router's bytes forwarded towards the server ÷ all routers' (headers,
//!   retransmissions and tunnel overhead included; the same counters for every mode).
//! - **RTT p50/p99**: UDP probes every 10 ms from the client to the server's path-0 address
//!   while the sender writes; unanswered probes count as lost.
//! - **tunnel RTT p50/p99** (tunnel modes): the same probes from the sending host to the
//!   receiving host, through the tunnel, as an application's ping or call beside the
//!   transfer would go.
//! - For each event: **stall**: the longest run of 100 ms windows, from the event's start
//!   to 5 s after its end, whose goodput is below 10 % of the mean of the 3 s before the
//!   event; **path back**: from the event's end to the end of the first 100 ms window in
//!   which the path forwards at least 25 % of its rate; **recovered**: from the event's end
//!   until a 500 ms window's mean goodput is back at 90 % of the pre-event mean.
//!
//! Invariants: the functions here are pure (results in, numbers out), so they are tested
//! without namespaces; a missing measurement is `None`, never a made-up number.

use std::fmt::Write as _;
use std::time::Instant;

use plait_testbed::{CounterSample, ProbeReport, SendReport, SinkReport};
use serde::{Deserialize, Serialize};

use super::mode::{Mode, PROBE_INTERVAL, RunOptions, SAMPLE};
use super::text::shares_text;
use plait_topology::{EventFile, EventKind, PathFile, TopologyFile};

/// TCP payload per full-size frame of plain TCP (MSS 1460 − 12 B timestamps).
pub const TCP_PAYLOAD: f64 = 1448.0;
/// An Ethernet frame carrying a 1500-byte IP packet, as tbf counts it.
pub const FRAME: f64 = 1514.0;
/// IP (20) + TCP (20) + timestamps (12) inside the tunnel.
pub const INNER_HEADERS: f64 = 52.0;
/// Engine framing of one inner packet of the largest size in packet mode (the engine
/// header and a DATA frame, docs/protocol.md#overhead): engine datagram − TUN MTU.
const PACKET_FRAMING: usize = plait_proto::wire::DATA_OVERHEAD;
/// The tunnel's default MTU on 1500-byte IPv4 paths (docs/tunnel.md#mtu): 1500 − 20 outer
/// IPv4 − 8 UDP − plait's data header and AEAD tag, less [`PACKET_FRAMING`] (1436 B).
pub const DEFAULT_TUN_MTU: usize =
    1500 - 28 - plait_tunnel::message::DATA_OVERHEAD - PACKET_FRAMING;
/// Engine framing of one full stream datagram in stream mode: the engine header, then one
/// STREAM frame: type (1), stream id (1: the benchmark's only stream has a small id),
/// offset (a 4-byte varint from 16 KiB to 1 GiB, which every benchmark transfer stays
/// within), flags (1) and length (a 2-byte varint). On 1500-byte paths that leaves
/// [`STREAM_PAYLOAD`] bytes per 1514-byte frame (ACK frames piggybacked on a data datagram
/// take a little more).
const STREAM_FRAMING: usize = plait_proto::wire::HEADER_LEN + 1 + 1 + 4 + 1 + 2;
/// Stream payload per 1514-byte frame on 1500-byte paths (see [`STREAM_FRAMING`]).
pub const STREAM_PAYLOAD: f64 = (DEFAULT_TUN_MTU + PACKET_FRAMING - STREAM_FRAMING) as f64;
/// Window of the pre-event mean.
const BEFORE_S: f64 = 3.0;
/// How long after an event's end a stall still counts.
const AFTER_S: f64 = 5.0;
/// Below this fraction of the pre-event mean a window is stalled.
const STALL_FRACTION: f64 = 0.10;
/// A path is back when a window carries this fraction of its rate.
const BACK_FRACTION: f64 = 0.25;
/// Goodput is recovered at this fraction of the pre-event mean …
const RECOVERED_FRACTION: f64 = 0.90;
/// … over a window this long.
const RECOVERED_WINDOW_S: f64 = 0.5;

/// What happened around one event, for one mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventMetrics {
    /// What happened.
    pub kind: EventKind,
    /// To which path.
    pub path: usize,
    /// Actual start and end, seconds after the sender started.
    pub from_s: f64,
    /// See `from_s`.
    pub to_s: f64,
    /// Mean goodput in the 3 s before, Mbit/s.
    pub before_mbit: f64,
    /// Mean goodput during the event, Mbit/s.
    pub during_mbit: f64,
    /// Longest stall from the start to 5 s after the end, seconds.
    pub stall_s: f64,
    /// From the end until the path carries traffic again, seconds (`None`: never did).
    pub back_s: Option<f64>,
    /// From the end until goodput is back at 90 % of before, seconds (`None`: never was).
    pub recovered_s: Option<f64>,
}

/// One mode's measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeResult {
    /// `single`, `mptcp`, `plait` or `plait-stream`.
    pub mode: String,
    /// Human label: `single path 0 (TCP)`, `MPTCP (kernel)`, `plait`, `plait streams`.
    pub label: String,
    /// Why the mode failed, if it did (then the numbers are zero).
    pub error: Option<String>,
    /// Bytes written by the sender.
    pub bytes_sent: u64,
    /// Bytes read by the receiver.
    pub bytes_received: u64,
    /// Same count and same SHA-256 at both ends.
    pub intact: bool,
    /// From the accept until the sender closed, seconds.
    pub elapsed_s: f64,
    /// Goodput over `elapsed_s`, Mbit/s.
    pub goodput_mbit: f64,
    /// Goodput ÷ sum of the path rates.
    pub of_sum: f64,
    /// The most this mode could carry (see the module documentation), Mbit/s.
    pub ceiling_mbit: f64,
    /// Goodput ÷ ceiling.
    pub of_ceiling: f64,
    /// Each path's share of the bytes forwarded towards the server.
    pub shares: Vec<f64>,
    /// Each path's forwarded rate over the transfer, Mbit/s.
    pub path_mbit: Vec<f64>,
    /// Idle-free RTT under load on path 0, median, ms.
    pub rtt_p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub rtt_p99_ms: Option<f64>,
    /// Tunnel modes: RTT under load through the tunnel (sending host to receiving host),
    /// median, ms.
    #[serde(default)]
    pub tunnel_rtt_p50_ms: Option<f64>,
    /// 99th percentile, ms.
    #[serde(default)]
    pub tunnel_rtt_p99_ms: Option<f64>,
    /// Fraction of probes unanswered.
    pub probe_loss: f64,
    /// Longest run of empty 100 ms windows after the first byte, seconds.
    pub longest_gap_s: f64,
    /// Per event of the topology.
    pub events: Vec<EventMetrics>,
    /// Goodput per 100 ms window from the sender's start, Mbit/s.
    pub goodput_series: Vec<f64>,
    /// Per path, forwarded Mbit/s per 100 ms window.
    pub path_series: Vec<Vec<f64>>,
    /// The tunnel's MTU (plait and plait-stream only).
    pub tun_mtu: Option<usize>,
    /// The largest RTT of the path-0 probes sent in each 100 ms window from the sender's
    /// start, ms (`None`: no probe of that window was answered): when the delay happens.
    #[serde(default)]
    pub rtt_series: Vec<Option<f64>>,
    /// The same for the probes through the tunnel (tunnel modes).
    #[serde(default)]
    pub tunnel_rtt_series: Vec<Option<f64>>,
}

/// One run of one topology: the JSON file `plait bench` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopologyResult {
    /// The topology's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its paths in one line.
    pub summary: String,
    /// Transfer length, seconds.
    pub duration_s: f64,
    /// Sum of the path rates averaged over the transfer (rate events included), Mbit/s.
    pub total_mbit: f64,
    /// The single-path mode's path.
    pub best_path: usize,
    /// plait's scheduler.
    pub scheduler: String,
    /// Seed of loss and payload.
    pub seed: u64,
    /// TCP congestion control of the endpoints.
    #[serde(default)]
    pub cc: String,
    /// Path 0's RTT before any transfer, median, ms.
    pub idle_rtt_ms: Option<f64>,
    /// The paths as given.
    pub paths: Vec<PathFile>,
    /// The events as given.
    pub events: Vec<EventFile>,
    /// One entry per mode run.
    pub modes: Vec<ModeResult>,
    /// `plait-cbr`'s constant-rate UDP flow, if it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbr: Option<super::cbr::report::CbrResult>,
}

impl TopologyResult {
    /// An empty result for `file`.
    pub fn new(file: &TopologyFile, opts: &RunOptions, best: usize) -> TopologyResult {
        TopologyResult {
            name: file.name.clone(),
            description: file.description.clone(),
            summary: file.summary(),
            duration_s: file.duration_s,
            total_mbit: file.total_mbit(),
            best_path: best,
            scheduler: opts.scheduler.clone(),
            seed: opts.seed,
            cc: opts.cc.clone(),
            idle_rtt_ms: None,
            paths: file.paths.clone(),
            events: file.events.clone(),
            modes: Vec::new(),
            cbr: None,
        }
    }

    /// The result of mode `name`, if it ran.
    pub fn mode(&self, name: &str) -> Option<&ModeResult> {
        self.modes.iter().find(|m| m.mode == name)
    }
}

/// The label of a mode in tables.
pub fn mode_label(mode: Mode, best: usize, scheduler: &str) -> String {
    match mode {
        Mode::Single => format!("single path {best} (TCP)"),
        Mode::Mptcp => "MPTCP (kernel)".into(),
        Mode::Plait if scheduler == "plait" => "plait".into(),
        Mode::Plait => format!("plait ({scheduler})"),
        Mode::PlaitStream if scheduler == "plait" => "plait streams".into(),
        Mode::PlaitStream => format!("plait streams ({scheduler})"),
    }
}

/// The most `mode` can carry over `file`'s paths, Mbit/s.
pub fn ceiling_mbit(mode: Mode, file: &TopologyFile, best: usize, tun_mtu: Option<usize>) -> f64 {
    match mode {
        Mode::Single => file.path_mean_mbit(best) * TCP_PAYLOAD / FRAME,
        Mode::Mptcp => file.total_mbit() * TCP_PAYLOAD / FRAME,
        Mode::Plait => {
            // The daemons' default for 1500-byte IPv4 paths (docs/tunnel.md) if unknown.
            let mtu = tun_mtu.unwrap_or(DEFAULT_TUN_MTU) as f64;
            file.total_mbit() * (mtu - INNER_HEADERS).max(0.0) / FRAME
        }
        // The end hosts' TCP connections end at the client's relay and start at the server,
        // both local (no emulated link): the bottleneck is the paths carrying plait's own
        // datagrams, so the ceiling is the stream payload per frame, not TCP's. The TUN
        // MTU tells the engine datagram size (TUN MTU + packet framing).
        Mode::PlaitStream => {
            let mtu = tun_mtu.unwrap_or(DEFAULT_TUN_MTU) as f64;
            file.total_mbit() * (mtu + PACKET_FRAMING as f64 - STREAM_FRAMING as f64).max(0.0)
                / FRAME
        }
    }
}

/// Steady-state goodput leaves out the windows before this, seconds after the sender's
/// start (slow start on the slowest test-bed path, 100 ms RTT, is over by then)…
const STEADY_FROM_S: f64 = 2.0;
/// …and this much before the last window (the final drain).
const STEADY_BEFORE_END_S: f64 = 1.0;

impl ModeResult {
    /// Mean goodput from [`STEADY_FROM_S`] after the sender's start to
    /// [`STEADY_BEFORE_END_S`] before the series ends, Mbit/s: the run without its slow
    /// start and final drain (`None`: a series shorter than that).
    pub fn steady_mbit(&self) -> Option<f64> {
        let from = window(STEADY_FROM_S);
        let to = self
            .goodput_series
            .len()
            .checked_sub(window(STEADY_BEFORE_END_S))?;
        (to > from).then(|| mean(&self.goodput_series[from..to]))
    }

    /// Mean goodput over the first second after the sender's start, Mbit/s (`None`: a
    /// series shorter than that).
    pub fn first_second_mbit(&self) -> Option<f64> {
        let n = window(1.0);
        (self.goodput_series.len() >= n && n > 0).then(|| mean(&self.goodput_series[..n]))
    }

    /// The result of a mode that failed.
    pub fn failed(
        mode: Mode,
        file: &TopologyFile,
        best: usize,
        scheduler: &str,
        error: String,
    ) -> ModeResult {
        ModeResult {
            mode: mode.name().into(),
            label: mode_label(mode, best, scheduler),
            error: Some(error),
            bytes_sent: 0,
            bytes_received: 0,
            intact: false,
            elapsed_s: 0.0,
            goodput_mbit: 0.0,
            of_sum: 0.0,
            ceiling_mbit: ceiling_mbit(mode, file, best, None),
            of_ceiling: 0.0,
            shares: vec![0.0; file.paths.len()],
            path_mbit: vec![0.0; file.paths.len()],
            rtt_p50_ms: None,
            rtt_p99_ms: None,
            tunnel_rtt_p50_ms: None,
            tunnel_rtt_p99_ms: None,
            probe_loss: 1.0,
            longest_gap_s: 0.0,
            events: Vec::new(),
            goodput_series: Vec::new(),
            path_series: Vec::new(),
            rtt_series: Vec::new(),
            tunnel_rtt_series: Vec::new(),
            tun_mtu: None,
        }
    }
}

/// Everything one mode measured, raw.
#[derive(Debug)]
pub struct Measured<'a> {
    /// The mode.
    pub mode: Mode,
    /// The topology.
    pub file: &'a TopologyFile,
    /// The single-path mode's path.
    pub best: usize,
    /// plait's scheduler.
    pub scheduler: &'a str,
    /// When the sender started.
    pub t0: Instant,
    /// When the sender returned.
    pub t_end: Instant,
    /// The sender's report.
    pub sent: &'a SendReport,
    /// The receiver's report.
    pub got: &'a SinkReport,
    /// Per path, the router's counters.
    pub counters: &'a [Vec<CounterSample>],
    /// The RTT probes.
    pub probes: &'a ProbeReport,
    /// The probes through the tunnel (tunnel modes).
    pub tunnel_probes: Option<&'a ProbeReport>,
    /// Actual (start, end) of each event, seconds after `t0`.
    pub events: &'a [(f64, f64)],
    /// The tunnel's MTU.
    pub tun_mtu: Option<usize>,
}

fn secs(d: std::time::Duration) -> f64 {
    d.as_secs_f64()
}

/// Goodput per window from `t0`, Mbit/s: sample `i` of the sink (window ending at
/// `offset + (i+1)·SAMPLE` after `t0`) goes to window `round(end / SAMPLE) − 1`.
pub fn goodput_series(got: &SinkReport, t0: Instant) -> Vec<f64> {
    let offset = secs(got.accepted.saturating_duration_since(t0));
    let w = secs(SAMPLE);
    let mut out: Vec<f64> = Vec::new();
    for s in &got.samples {
        let end = offset + secs(s.at);
        let idx = ((end / w).round() as usize).saturating_sub(1);
        if out.len() <= idx {
            out.resize(idx + 1, 0.0);
        }
        out[idx] += s.mbit();
    }
    out
}

/// Forwarded Mbit/s per window from `t0`: the bytes between two readings go to the
/// window holding their midpoint.
pub fn counter_series(samples: &[CounterSample], t0: Instant, windows: usize) -> Vec<f64> {
    let w = secs(SAMPLE);
    let mut out = vec![0.0; windows];
    for pair in samples.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.at <= t0 {
            continue;
        }
        let mid = (secs(a.at.saturating_duration_since(t0))
            + secs(b.at.saturating_duration_since(t0)))
            / 2.0;
        let idx = (mid / w) as usize;
        if let Some(slot) = out.get_mut(idx) {
            *slot += b.tx_bytes.saturating_sub(a.tx_bytes) as f64 * 8.0 / w / 1e6;
        }
    }
    out
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn window(t: f64) -> usize {
    let w = secs(SAMPLE);
    if t <= 0.0 {
        0
    } else {
        (t / w).round() as usize
    }
}

/// The metrics of one event from the goodput and the event path's series.
pub fn event_metrics(
    e: &EventFile,
    actual: (f64, f64),
    goodput: &[f64],
    path: &[f64],
    path_rate_mbit: f64,
) -> EventMetrics {
    let (from, to) = if actual.0.is_finite() && actual.1.is_finite() {
        actual
    } else {
        (e.from_s, e.to_s)
    };
    let w = secs(SAMPLE);
    let (a, b) = (window(from), window(to).max(window(from)));
    let before_from = window((from - BEFORE_S).max(1.0).min(from));
    let slice = |x: usize, y: usize| &goodput[x.min(goodput.len())..y.min(goodput.len())];
    let before = mean(slice(before_from, a));
    let during = mean(slice(a, b));
    let mut stall = 0usize;
    let mut run = 0usize;
    for g in slice(a, window(to + AFTER_S)) {
        if *g < STALL_FRACTION * before {
            run += 1;
            stall = stall.max(run);
        } else {
            run = 0;
        }
    }
    let back = (b..path.len())
        .find(|&k| path[k] >= BACK_FRACTION * path_rate_mbit)
        .map(|k| ((k + 1) as f64 * w - to).max(0.0));
    let span = window(RECOVERED_WINDOW_S).max(1);
    let recovered = (b..goodput.len().saturating_sub(span - 1))
        .find(|&k| mean(&goodput[k..k + span]) >= RECOVERED_FRACTION * before && before > 0.0)
        .map(|k| (k as f64 * w - to).max(0.0));
    EventMetrics {
        kind: e.kind,
        path: e.path,
        from_s: from,
        to_s: to,
        before_mbit: before,
        during_mbit: during,
        stall_s: stall as f64 * w,
        back_s: back,
        recovered_s: recovered,
    }
}

/// The [`ModeResult`] of raw measurements.
pub fn mode_result(m: &Measured<'_>) -> ModeResult {
    let file = m.file;
    let goodput_mbit = m.got.goodput_mbit();
    let total = file.total_mbit();
    let ceiling = ceiling_mbit(m.mode, file, m.best, m.tun_mtu);
    let goodput = goodput_series(m.got, m.t0);
    let windows = goodput.len().max(window(secs(m.t_end - m.t0)));
    let path_series: Vec<Vec<f64>> = m
        .counters
        .iter()
        .map(|c| counter_series(c, m.t0, windows))
        .collect();
    let path_bytes: Vec<f64> = m
        .counters
        .iter()
        .map(|c| {
            // Bytes from the sender's start to its return.
            let at = |t: Instant| {
                c.iter()
                    .min_by_key(|s| if s.at > t { s.at - t } else { t - s.at })
                    .map_or(0, |s| s.tx_bytes)
            };
            at(m.t_end).saturating_sub(at(m.t0)) as f64
        })
        .collect();
    let all: f64 = path_bytes.iter().sum();
    let shares = path_bytes
        .iter()
        .map(|b| if all > 0.0 { b / all } else { 0.0 })
        .collect();
    let span = secs(m.t_end - m.t0).max(1e-9);
    let path_mbit = path_bytes.iter().map(|b| b * 8.0 / span / 1e6).collect();
    let load = m.probes.between(m.t0, m.t_end);
    let tunnel_load = m.tunnel_probes.map(|p| p.between(m.t0, m.t_end));
    let sent_in_load = (secs(m.t_end - m.t0) / secs(PROBE_INTERVAL)).max(1.0);
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    let events = file
        .events
        .iter()
        .zip(m.events)
        .map(|(e, actual)| {
            let empty = Vec::new();
            let path = path_series.get(e.path).unwrap_or(&empty);
            let rate = file.paths.get(e.path).map_or(0.0, |p| p.rate_mbit);
            event_metrics(e, *actual, &goodput, path, rate)
        })
        .collect();
    ModeResult {
        mode: m.mode.name().into(),
        label: mode_label(m.mode, m.best, m.scheduler),
        error: None,
        bytes_sent: m.sent.bytes,
        bytes_received: m.got.bytes,
        intact: m.sent.bytes == m.got.bytes
            && m.sent.sha256.is_some()
            && m.sent.sha256 == m.got.sha256,
        elapsed_s: secs(m.got.elapsed),
        goodput_mbit,
        of_sum: if total > 0.0 {
            goodput_mbit / total
        } else {
            0.0
        },
        ceiling_mbit: ceiling,
        of_ceiling: if ceiling > 0.0 {
            goodput_mbit / ceiling
        } else {
            0.0
        },
        shares,
        path_mbit,
        rtt_p50_ms: ms(load.quantile(0.5)),
        rtt_p99_ms: ms(load.quantile(0.99)),
        tunnel_rtt_p50_ms: tunnel_load.as_ref().and_then(|l| ms(l.quantile(0.5))),
        tunnel_rtt_p99_ms: tunnel_load.as_ref().and_then(|l| ms(l.quantile(0.99))),
        probe_loss: (1.0 - load.samples.len() as f64 / sent_in_load).clamp(0.0, 1.0),
        longest_gap_s: secs(m.got.longest_empty_run()),
        events,
        rtt_series: rtt_series(&load, m.t0, windows),
        tunnel_rtt_series: tunnel_load
            .as_ref()
            .map_or_else(Vec::new, |l| rtt_series(l, m.t0, windows)),
        goodput_series: goodput,
        path_series,
        tun_mtu: m.tun_mtu,
    }
}

/// The largest RTT of the probes sent in each of `windows` [`SAMPLE`] windows from `t0`,
/// ms.
fn rtt_series(probes: &ProbeReport, t0: Instant, windows: usize) -> Vec<Option<f64>> {
    let mut out: Vec<Option<f64>> = vec![None; windows];
    for s in &probes.samples {
        let i = (secs(s.sent.saturating_duration_since(t0)) / secs(SAMPLE)) as usize;
        if let Some(slot) = out.get_mut(i) {
            let ms = s.rtt.as_secs_f64() * 1000.0;
            *slot = Some(slot.map_or(ms, |m: f64| m.max(ms)));
        }
    }
    out
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// A rate in Mbit/s with at most two decimals and no trailing zeros (`24.25`, `30`).
pub fn mbit_text(x: f64) -> String {
    let t = format!("{x:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `30 Mbit/s`, or `24.25 Mbit/s averaged over the transfer` when rate events change it.
pub fn sum_text(file: &TopologyFile) -> String {
    let averaged = file.events.iter().any(|e| e.kind == EventKind::Rate);
    format!(
        "{} Mbit/s{}",
        mbit_text(file.total_mbit()),
        if averaged {
            " averaged over the transfer (rate events)"
        } else {
            ""
        }
    )
}

/// The terminal table of one run.
pub fn table(r: &TopologyResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} — sum {} Mbit/s, {} s, {}{}",
        r.name,
        r.summary,
        mbit_text(r.total_mbit),
        r.duration_s,
        r.cc,
        r.idle_rtt_ms
            .map_or(String::new(), |x| format!(", idle RTT path 0 {x:.1} ms"))
    );
    let has_events = !r.events.is_empty();
    let _ = write!(
        out,
        "{:<24} {:>9} {:>7} {:>8} {:>12} {:>15} {:>16} {:>7}",
        "mode",
        "Mbit/s",
        "of sum",
        "of ceil",
        "shares %",
        "RTT p50/p99 ms",
        "tunnel RTT ms",
        "intact"
    );
    if has_events {
        let _ = write!(
            out,
            " {:>8} {:>9} {:>10}",
            "stall s", "path back", "recovered"
        );
    }
    out.push('\n');
    for m in &r.modes {
        if let Some(e) = &m.error {
            let _ = writeln!(out, "{:<24} failed: {e}", m.label);
            continue;
        }
        let _ = write!(
            out,
            "{:<24} {:>9.2} {:>7.3} {:>8.3} {:>12} {:>15} {:>16} {:>7}",
            m.label,
            m.goodput_mbit,
            m.of_sum,
            m.of_ceiling,
            shares_text(&m.shares),
            format!("{}/{}", opt(m.rtt_p50_ms, 0), opt(m.rtt_p99_ms, 0)),
            if m.tunnel_rtt_p50_ms.is_some() {
                format!(
                    "{}/{}",
                    opt(m.tunnel_rtt_p50_ms, 0),
                    opt(m.tunnel_rtt_p99_ms, 0)
                )
            } else {
                "-".into()
            },
            if m.intact { "yes" } else { "NO" }
        );
        if has_events {
            for e in &m.events {
                let _ = write!(
                    out,
                    " {:>8.1} {:>9} {:>10}",
                    e.stall_s,
                    opt(e.back_s, 1),
                    opt(e.recovered_s, 1)
                );
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn event() -> EventFile {
        EventFile {
            kind: EventKind::Blackhole,
            path: 0,
            from_s: 5.0,
            to_s: 10.0,
            rate_mbit: None,
            loss: None,
        }
    }

    #[test]
    fn event_metrics_find_stall_back_and_recovery() {
        // 10 Mbit/s for 5 s, nothing for 1.5 s, 5 Mbit/s until 10 s, then 10 again from
        // 11 s; the path carries nothing during the event and is back at 10.3 s.
        let mut g = vec![10.0; 50];
        g.extend(vec![0.0; 15]);
        g.extend(vec![5.0; 35]);
        g.extend(vec![2.0; 10]);
        g.extend(vec![10.0; 40]);
        let mut p = vec![8.0; 50];
        p.extend(vec![0.0; 53]);
        p.extend(vec![8.0; 47]);
        let m = event_metrics(&event(), (5.0, 10.0), &g, &p, 20.0);
        assert!((m.before_mbit - 10.0).abs() < 1e-9);
        assert!((m.stall_s - 1.5).abs() < 1e-9, "{m:?}");
        assert!((m.back_s.unwrap() - 0.4).abs() < 1e-9, "{m:?}");
        assert!((m.recovered_s.unwrap() - 1.0).abs() < 1e-9, "{m:?}");
        // Never back, never recovered.
        let m = event_metrics(&event(), (f64::NAN, 10.0), &g[..100], &p[..100], 20.0);
        assert_eq!(m.back_s, None);
        assert_eq!(m.recovered_s, None);
        // Empty series do not panic.
        let m = event_metrics(&event(), (5.0, 10.0), &[], &[], 20.0);
        assert_eq!(m.stall_s, 0.0);
    }

    #[test]
    fn steady_goodput_leaves_out_the_start_and_the_drain() {
        let t = TopologyFile::parse(
            "name = \"x\"\nduration_s = 10\n[[path]]\nrate_mbit = 20\nrtt_ms = 20\n",
            "x.toml",
        )
        .unwrap();
        let mut m = ModeResult::failed(Mode::Plait, &t, 0, "plait", String::new());
        assert_eq!(m.steady_mbit(), None);
        assert_eq!(m.first_second_mbit(), None);
        // 1 s at 10 Mbit/s, 1 s at 20, 5 s at 30, 1 s of drain at 5 (100 ms windows).
        for (mbit, n) in [(10.0, 10), (20.0, 10), (30.0, 50), (5.0, 10)] {
            m.goodput_series.extend(std::iter::repeat_n(mbit, n));
        }
        assert!(
            (m.steady_mbit().unwrap() - 30.0).abs() < 1e-9,
            "{:?}",
            m.steady_mbit()
        );
        assert!((m.first_second_mbit().unwrap() - 10.0).abs() < 1e-9);
        // Too short for a steady part: 2.5 s.
        m.goodput_series.truncate(25);
        assert_eq!(m.steady_mbit(), None);
    }

    #[test]
    fn labels_and_ceilings_per_mode() {
        let t = TopologyFile::parse(
            "name = \"x\"\nduration_s = 10\n\
             [[path]]\nrate_mbit = 20\nrtt_ms = 20\n[[path]]\nrate_mbit = 10\nrtt_ms = 100\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(mode_label(Mode::PlaitStream, 0, "plait"), "plait streams");
        assert_eq!(
            mode_label(Mode::PlaitStream, 0, "min-rtt"),
            "plait streams (min-rtt)"
        );
        assert_eq!(mode_label(Mode::Plait, 0, "plait"), "plait");
        // Unchanged baselines of the other modes.
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(
            ceiling_mbit(Mode::Single, &t, 0, None),
            20.0 * 1448.0 / 1514.0
        ));
        assert!(near(
            ceiling_mbit(Mode::Mptcp, &t, 0, None),
            30.0 * 1448.0 / 1514.0
        ));
        // Wire version 2 on 1500-byte paths: a 1436-byte TUN MTU, 1384 B of TCP payload.
        assert_eq!(DEFAULT_TUN_MTU, 1436);
        assert!(near(
            ceiling_mbit(Mode::Plait, &t, 0, None),
            30.0 * 1384.0 / 1514.0
        ));
        // Stream mode: 1451-byte engine datagrams less 18 B of framing, over every path.
        assert_eq!(STREAM_PAYLOAD, 1433.0);
        let s = ceiling_mbit(Mode::PlaitStream, &t, 0, None);
        assert!(near(s, 30.0 * 1433.0 / 1514.0), "{s}");
        assert!(near(s, ceiling_mbit(Mode::PlaitStream, &t, 0, Some(1436))));
        // A smaller TUN MTU (smaller paths) lowers it by as much.
        assert!(near(
            ceiling_mbit(Mode::PlaitStream, &t, 0, Some(1336)),
            30.0 * 1333.0 / 1514.0
        ));
        let f = ModeResult::failed(Mode::PlaitStream, &t, 0, "plait", "x".into());
        assert_eq!(
            (f.mode.as_str(), f.label.as_str()),
            ("plait-stream", "plait streams")
        );
    }

    #[test]
    fn series_are_aligned_to_the_sender_start() {
        let t0 = Instant::now();
        let got = SinkReport {
            accepted: t0 + Duration::from_millis(20),
            bytes: 0,
            sha256: Some([0; 32]),
            elapsed: Duration::from_millis(300),
            samples: (1..=3)
                .map(|i| plait_testbed::GoodputSample {
                    at: Duration::from_millis(100 * i),
                    bytes: 125_000 * i,
                })
                .collect(),
            longest_gap: Duration::ZERO,
        };
        let s = goodput_series(&got, t0);
        assert_eq!(s.len(), 3);
        assert!((s[0] - 10.0).abs() < 1e-9 && (s[2] - 30.0).abs() < 1e-9);
        let c: Vec<CounterSample> = (0..4)
            .map(|i| CounterSample {
                at: t0 + Duration::from_millis(100 * i),
                rx_bytes: 0,
                tx_bytes: 250_000 * i,
            })
            .collect();
        let s = counter_series(&c, t0, 3);
        assert_eq!(s, vec![20.0, 20.0, 20.0]);
    }
}
