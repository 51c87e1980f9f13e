//! Scenarios: the seeds' experiments (and more) as TOML files under `scenarios/`.
//!
//! A scenario describes the topology (server – proxy – N paths – mobile host, seed PET-BMP
//! Fig. 1/3), the main TCP flow, cross traffic, loss, scheduled link changes, and the runs
//! to compare on it (MTCP, ASI, or plait with a scheduler and reorder policy). Every field
//! has the ns-2 default of ../shared/REFERENCES.md unless the file says otherwise.
//!
//! Invariant: [`Scenario::validate`] rejects every value the simulator cannot run, naming
//! the field; unknown fields are errors (`deny_unknown_fields`), so a typo never silently
//! falls back to a default.

use plait_proto::EngineSettings;
use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use plait_topology::LossModel;
use plait_tunnel::registration::CostClass;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A whole scenario file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (tables, file names).
    pub name: String,
    /// What it reproduces or tests.
    #[serde(default)]
    pub description: String,
    /// What its results mean, printed under the scenario's table in generated documents
    /// (`plait schedulers`); empty for none.
    #[serde(default)]
    pub note: String,
    /// Simulated seconds.
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    /// Random seeds; results aggregate over them (mean, 95 % CI).
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// The main flow's TCP.
    #[serde(default)]
    pub tcp: TcpSpec,
    /// The constant-rate UDP flow of mode `plait-cbr` (required by it, unused otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbr: Option<CbrSpec>,
    /// Server – proxy link.
    #[serde(default)]
    pub server_proxy: WiredSpec,
    /// The paths between proxy and mobile host.
    pub paths: Vec<PathSpec>,
    /// A link every path's data crosses (after its wired hop, before its wireless one),
    /// shared with long-lived TCP competitors: the shared-bottleneck fairness test.
    #[serde(default)]
    pub shared_bottleneck: Option<SharedBottleneckSpec>,
    /// Bytes of outer headers on each plait datagram (28: IPv4 + UDP). Reproductions of
    /// the seeds set 0 so plait's 20-byte engine header matches their 20-byte IP-in-IP.
    #[serde(default = "default_outer")]
    pub outer_header_bytes: u32,
    /// What to compare.
    pub runs: Vec<RunSpec>,
    /// Throughput time-series bin, seconds.
    #[serde(default = "default_bin")]
    pub bin_s: f64,
    /// `plait reproduce` adds a table of each row's per-path throughput (seed HMTP's
    /// figures are per path).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_path_table: bool,
    /// `plait reproduce` adds a table of each row's application-layer delay (seed HMTP
    /// Fig. 8(b); rows of modes `hmtp`, `hmtp-tcp` and `cmt-sctp`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub app_delay_table: bool,
    /// Measure the main TCP flow as seed MMS Fig. 4-6: end-to-end delay per phase between
    /// the paths' joins and leaves (their outages), delivery around each
    /// ([`crate::handover`]); `plait sim` and `plait reproduce` print the tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<crate::handover_spec::HandoverSpec>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn default_duration() -> f64 {
    60.0
}
fn default_seeds() -> Vec<u64> {
    vec![1]
}
fn default_outer() -> u32 {
    28
}
fn default_bin() -> f64 {
    1.0
}

/// The main flow's TCP (ns-2 `Agent/TCP/Newreno` parameters).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TcpSpec {
    /// `window_`: cap on the window, packets.
    pub window: u32,
    /// `windowInit_`.
    pub window_init: u32,
    /// `maxburst_` (0: unlimited).
    pub max_burst: u32,
    /// `packetSize_`: payload bytes (+40 header on the wire).
    pub packet_size: u32,
    /// Delayed ACKs at the sink (ns-2 DelAck, 100 ms); the seeds disable them.
    pub delayed_ack: bool,
    /// The main flow starts at a time drawn per seed, uniformly in `[0, start_jitter_s)`
    /// (ns-2 likewise randomises each TCP agent's timer phase, `boot_time_`): without it a
    /// loss-free scenario is one deterministic trajectory whatever the seed.
    pub start_jitter_s: f64,
    /// The main flow starts this late (then the jitter), s: time for the tunnel to settle
    /// first, e.g. to find the paths that are absent from the start down (seed MMS Fig. 4's
    /// links that join later), as a tunnel is up before its users' traffic.
    #[serde(skip_serializing_if = "is_zero")]
    pub start_s: f64,
    /// The main flow's application streams payload at this rate, kbit/s, one packet at a
    /// time (ns-2 `advanceby`; seed MMS §III-B's "streaming application using TCP");
    /// absent: FTP, always data to send. Under `mtcp` each per-path flow streams at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_rate_kbps: Option<f64>,
}

impl Default for TcpSpec {
    fn default() -> Self {
        TcpSpec {
            window: 20,
            window_init: 2,
            max_burst: 0,
            packet_size: 1000,
            delayed_ack: false,
            start_jitter_s: 0.0,
            start_s: 0.0,
            app_rate_kbps: None,
        }
    }
}

/// A constant-rate UDP flow from the server's side to the mobile host's (mode
/// `plait-cbr`): numbered IPv4/UDP packets whose loss and one-way delay the mobile host's
/// application measures.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CbrSpec {
    /// Rate, kbit/s, counting whole inner packets.
    pub rate_kbps: f64,
    /// Inner packet size, bytes (IPv4 header included).
    #[serde(default = "default_cbr_packet")]
    pub packet_size: u32,
}

fn default_cbr_packet() -> u32 {
    1200
}

/// A wired link.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WiredSpec {
    /// Rate, Mbit/s.
    pub rate_mbps: f64,
    /// One-way delay, ms.
    pub delay_ms: f64,
    /// Drop-tail limit, packets.
    pub queue_packets: usize,
}

impl Default for WiredSpec {
    fn default() -> Self {
        WiredSpec {
            rate_mbps: 10.0,
            delay_ms: 15.0,
            queue_packets: 1000,
        }
    }
}

/// One path: a wired hop (proxy – base station) then the wireless bottleneck.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    /// Wireless rate, kbit/s.
    pub rate_kbps: f64,
    /// Proxy – base station one-way delay, ms (PET-BMP: 50).
    #[serde(default = "default_wired_delay")]
    pub wired_delay_ms: f64,
    /// Base station – proxy one-way delay (the ACK direction), ms, when it differs from
    /// `wired_delay_ms` (a topology file's asymmetric delays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wired_delay_back_ms: Option<f64>,
    /// Proxy – base station rate, Mbit/s (PET-BMP: 10).
    #[serde(default = "default_wired_rate")]
    pub wired_rate_mbps: f64,
    /// Wireless one-way delay, ms.
    #[serde(default)]
    pub wireless_delay_ms: f64,
    /// Base-station queue, packets (ns-2 DropTail default 50).
    #[serde(default = "default_queue")]
    pub queue_packets: usize,
    /// Weighted fair queuing among flows at the base station (PET-BMP §III).
    #[serde(default)]
    pub wfq: bool,
    /// Loss on the wireless downlink.
    #[serde(default)]
    pub loss: LossModel,
    /// Cross traffic at the base station.
    #[serde(default)]
    pub cross: CrossSpec,
    /// Every `period_s`, the wireless rate becomes `rate × U(lo, hi)` (seed ETOM Fig. 6).
    #[serde(default)]
    pub fluctuation: Option<FluctuationSpec>,
    /// Intervals `[from_s, to_s]` during which the path is down (silent blackhole).
    #[serde(default)]
    pub outages: Vec<[f64; 2]>,
    /// Intervals during which the wireless rate is another one (the test bed's `rate`
    /// events, topologies/T5.toml); the queue keeps its size in packets.
    #[serde(default)]
    pub rate_dips: Vec<RateDip>,
    /// Intervals during which the wireless link loses packets at random at another rate
    /// (the test bed's `loss` events: a link fading); the path's own loss model comes back
    /// at each end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loss_spells: Vec<LossSpell>,
    /// The path's cost class as the tunnel client's `[[path]] cost` names it: `unmetered`
    /// or `metered` (docs/tunnel-config.md#budget). In the plait modes the mobile host's
    /// client registers it and a metered path is an overflow path at both ends
    /// (docs/protocol.md#overflow); the other modes have no cost classes and ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
}

impl PathSpec {
    /// The path's cost class (`unmetered` when absent; names were checked by
    /// [`Scenario::validate`], an unknown one reads as `unmetered`).
    pub fn cost_class(&self) -> CostClass {
        self.cost
            .as_deref()
            .and_then(CostClass::from_name)
            .unwrap_or_default()
    }
}

/// A span of time at another wireless rate (see [`PathSpec::rate_dips`]).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateDip {
    /// Start, s.
    pub from_s: f64,
    /// End (the configured rate comes back), s.
    pub to_s: f64,
    /// Rate meanwhile, kbit/s.
    pub rate_kbps: f64,
}

/// A span of time at another random loss rate (see [`PathSpec::loss_spells`]).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LossSpell {
    /// Start, s.
    pub from_s: f64,
    /// End (the path's own loss comes back), s.
    pub to_s: f64,
    /// Share of packets lost meanwhile, 0 to below 1.
    pub loss: f64,
}

fn default_wired_delay() -> f64 {
    50.0
}
fn default_wired_rate() -> f64 {
    10.0
}
fn default_queue() -> usize {
    50
}

/// Cross traffic at one base station (PET-BMP §III, §VI-A).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CrossSpec {
    /// FTP flows of 200 – 2000 kB starting uniformly in the run.
    pub ftp: u32,
    /// Web-like on/off flows running the whole time.
    pub web: u32,
    /// Long-lived TCP flows (the main flow's TCP settings) running the whole time over
    /// this path's wired and wireless links (the main flow's round trip), competing for
    /// the wireless one: the competitors of seed mHIP's friendliness tests.
    /// Their goodput is reported (`cross_tcp_kbps`).
    pub tcp: u32,
    /// Constant-rate UDP, kbit/s (0: none).
    pub udp_kbps: f64,
    /// When the UDP starts, s.
    pub udp_from_s: f64,
    /// When the UDP stops, s (absent: at the end of the run).
    pub udp_to_s: Option<f64>,
    /// Web flows: mean "on" time (a page transfer), s. PET-BMP takes its web model from a
    /// reference whose distributions it does not give; these defaults are a classic
    /// page/think-time model: an ~8 kB page then ~5 s of thinking, ~12 kbit/s on average.
    pub web_on_s: f64,
    /// Web flows: mean "off" (think) time, s.
    pub web_off_s: f64,
    /// Web flows: rate while on, kbit/s.
    pub web_rate_kbps: f64,
}

impl Default for CrossSpec {
    fn default() -> Self {
        CrossSpec {
            ftp: 0,
            web: 0,
            tcp: 0,
            udp_kbps: 0.0,
            udp_from_s: 0.0,
            udp_to_s: None,
            web_on_s: 0.5,
            web_off_s: 5.0,
            web_rate_kbps: 128.0,
        }
    }
}

/// A bottleneck all paths share (see [`Scenario::shared_bottleneck`]).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SharedBottleneckSpec {
    /// Rate, kbit/s.
    pub rate_kbps: f64,
    /// One-way delay, ms.
    pub delay_ms: f64,
    /// Drop-tail queue, packets.
    pub queue_packets: usize,
    /// Long-lived TCP flows (the main flow's TCP settings) through it, entering over the
    /// first path's wired hop so their round trip is the paths'.
    pub tcp: u32,
}

/// Periodic random rate changes.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FluctuationSpec {
    /// Seconds between changes.
    pub period_s: f64,
    /// Lowest ratio of the configured rate.
    #[serde(default = "default_lo")]
    pub lo: f64,
    /// Highest ratio.
    #[serde(default = "default_hi")]
    pub hi: f64,
}

fn default_lo() -> f64 {
    0.2
}
fn default_hi() -> f64 {
    1.0
}

/// One row of the comparison.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Row name (e.g. "WRR-BUFF").
    pub name: String,
    /// How the main transfer crosses the paths.
    pub mode: Mode,
    /// plait scheduler name (mode `plait`).
    #[serde(default)]
    pub scheduler: Option<String>,
    /// plait reorder policy name (mode `plait`).
    #[serde(default)]
    pub reorder: Option<String>,
    /// Schedulers see the exact configured rates and delays (EDPF "with perfect knowledge").
    #[serde(default)]
    pub perfect_knowledge: bool,
    /// plait's loss repair (docs/protocol.md#repair) on both engines (mode `plait`);
    /// absent: the engine's default (on, as the tunnel runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<bool>,
    /// Smallest second datagram of a packet pair that gives a rate sample (mode `plait`);
    /// absent: the engine's default. The seeds' reproductions set 0 (seed PET-BMP counts
    /// every pair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pair_bytes: Option<usize>,
    /// Both engines acknowledge after this many datagrams (modes `plait` and
    /// `plait-stream`); absent: the engine's default (16, or 25 ms after the first). 1 is
    /// the per-packet ACK of ns-2's TCP sink, as the seeds' per-link TCPs run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_every: Option<u32>,
    /// Per-path congestion controller of the streams (mode `plait-stream`); absent: the
    /// engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// The scheduler of stream datagrams (mode `plait-stream`); absent: the engine's
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_scheduler: Option<String>,
    /// Packet mode paced by each path's congestion controller; absent: the engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_pacing: Option<bool>,
    /// Quality-driven handover on both engines (docs/protocol.md#handover); absent: the
    /// engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<bool>,
    /// Packet-mode FEC policy on both engines (modes `plait` and `plait-cbr`): `off`,
    /// `sparse` or `all` (docs/protocol.md#fec); absent: the engine's default (`all`). The
    /// simulator's inner packets are IPv4 with the flow id in the ports, so the send
    /// queue meters each flow and `sparse` protects the flows at or below its rate (a
    /// `plait-cbr` flow; not a bulk TCP transfer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fec: Option<String>,
    /// The receiver's buffer of the `cmt-sctp` baseline, packets (chunks held above a hole
    /// count against it); absent: 64 (about ns-2 SCTP's `initialRwnd_` of 65536 bytes in
    /// 1000-byte chunks). For `hmtp`, whose buffer never holds anything, the cap on data
    /// in flight (the same default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_packets: Option<u32>,
    /// The paper's value for this row (kbit/s), for the reproduction table.
    #[serde(default)]
    pub paper_kbps: Option<f64>,
    /// The paper's per-path throughput for this row (kbit/s), path 1 first; may name
    /// fewer paths than there are (the per-path table, `per_path_table`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paper_path_kbps: Vec<f64>,
    /// Why this row differs from the paper, printed under the reproduction table.
    #[serde(default)]
    pub note: Option<String>,
}

impl RunSpec {
    /// The engine settings of this run: what it names, the engine's defaults (what the
    /// tunnel runs) for the rest. Names were checked by [`Scenario::validate`].
    pub fn engine_settings(&self) -> EngineSettings {
        let d = EngineSettings::default();
        EngineSettings {
            scheduler: self
                .scheduler
                .as_deref()
                .and_then(SchedulerKind::from_name)
                .unwrap_or(d.scheduler),
            reorder: self
                .reorder
                .as_deref()
                .and_then(ReorderKind::from_name)
                .unwrap_or(d.reorder),
            repair: self.repair.unwrap_or(d.repair),
            max_hold: d.max_hold,
            congestion: self
                .congestion
                .as_deref()
                .and_then(plait_proto::cc::CongestionKind::from_name)
                .unwrap_or(d.congestion),
            stream_scheduler: self
                .stream_scheduler
                .as_deref()
                .and_then(SchedulerKind::from_name)
                .unwrap_or(d.stream_scheduler),
            packet_pacing: self.packet_pacing.unwrap_or(d.packet_pacing),
            unordered_below_bps: d.unordered_below_bps,
            flow_policy: d.flow_policy,
            fec: self
                .fec
                .as_deref()
                .and_then(plait_proto::fec::FecPolicy::from_name)
                .unwrap_or(d.fec),
            handover: self.handover.unwrap_or(d.handover),
        }
    }
}

/// How the main transfer uses the paths.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// One TCP flow per path, throughputs summed (application-level striping).
    Mtcp,
    /// One TCP flow over a single link of the summed capacity.
    Asi,
    /// One TCP flow through two plait engines (proxy and mobile host).
    Plait,
    /// The scenario's constant-rate UDP flow (`[cbr]`) through two plait engines, from
    /// the server's side to the mobile host's application, which measures its residual
    /// loss and one-way delay.
    PlaitCbr,
    /// The split connection (seed ETOM §IV-B): the transfer's TCP ends at the proxy's
    /// engine, whose application writes it into one engine stream that the mobile host's
    /// engine reads; each path under its own congestion controller.
    PlaitStream,
    /// A CMT-SCTP-like baseline (seed ETOM §V's comparison): one sender at the proxy, one
    /// receiver at the mobile host, one TSN space over all paths, per-path windows, SACKs
    /// (see `node/cmt_sender.rs`).
    CmtSctp,
    /// Seed HMTP: fountain-coded chunks (LT, the seed's robust soliton) over the
    /// `cmt-sctp` baseline's transport with retransmission disabled (every retransmitted
    /// TSN carries a fresh symbol) and a receive buffer that never fills; the receiver
    /// reports per-chunk counts and the decoder's verdict (see `node/hmtp_sender.rs`).
    Hmtp,
    /// Seed HMTP as `hmtp`, over one ns-2 NewReno per path instead (the seed's other
    /// transport: "SNs ... if the underlying transport protocol is TCP").
    HmtpTcp,
}

impl Mode {
    /// Whether the run goes through plait engines.
    pub fn uses_plait(self) -> bool {
        matches!(self, Mode::Plait | Mode::PlaitStream | Mode::PlaitCbr)
    }
}

/// A scenario the simulator cannot run; names the field.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ScenarioError {
    /// A value out of range.
    #[error("{field}: {problem}")]
    Invalid {
        /// Dotted path of the field, e.g. `paths[2].rate_kbps`.
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// The TOML does not parse or has unknown fields.
    #[error("{0}")]
    Parse(String),
}

/// One day in seconds: the longest a scenario's times may be.
const DAY: f64 = 86_400.0;

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

impl Scenario {
    /// Parses and validates a scenario; errors name the line and field (TOML) or the field.
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Checks every value (see the module docs): every number finite and within a range the
    /// simulator handles (so no value can make it panic, hang or exhaust memory).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        range("duration_s", self.duration_s, 1e-3, DAY)?;
        range("bin_s", self.bin_s, 1e-3, self.duration_s)?;
        if self.duration_s / self.bin_s > 1e6 {
            return Err(invalid("bin_s", "at most a million bins per run"));
        }
        if self.seeds.is_empty() {
            return Err(invalid("seeds", "give at least one seed"));
        }
        if self.paths.is_empty() || self.paths.len() > plait_proto::MAX_PATHS {
            return Err(invalid(
                "paths",
                format!("1 to {} paths", plait_proto::MAX_PATHS),
            ));
        }
        let t = &self.tcp;
        if !(1..=1_000_000).contains(&t.window) || !(1..=t.window).contains(&t.window_init) {
            return Err(invalid(
                "tcp.window",
                "window 1..=1000000, window_init 1..=window",
            ));
        }
        if !(1..=9000).contains(&t.packet_size) {
            return Err(invalid("tcp.packet_size", "1..=9000 bytes"));
        }
        if !(t.start_jitter_s.is_finite()
            && t.start_jitter_s >= 0.0
            && t.start_jitter_s < self.duration_s)
        {
            return Err(invalid(
                "tcp.start_jitter_s",
                "must be >= 0 and shorter than the run",
            ));
        }
        if !(t.start_s.is_finite()
            && t.start_s >= 0.0
            && t.start_s + t.start_jitter_s < self.duration_s)
        {
            return Err(invalid(
                "tcp.start_s",
                "must be >= 0 and, with tcp.start_jitter_s, shorter than the run",
            ));
        }
        if let Some(r) = t.app_rate_kbps {
            range("tcp.app_rate_kbps", r, 1e-3, 1e8)?;
        }
        if let Some(c) = &self.cbr {
            range("cbr.rate_kbps", c.rate_kbps, 1e-3, 1e8)?;
            if !(crate::inner::HEADER as u32..=9000).contains(&c.packet_size) {
                return Err(invalid(
                    "cbr.packet_size",
                    format!("{} ..= 9000 bytes", crate::inner::HEADER),
                ));
            }
        }
        let sp = &self.server_proxy;
        range("server_proxy.rate_mbps", sp.rate_mbps, 1e-3, 1e5)?;
        range("server_proxy.delay_ms", sp.delay_ms, 0.0, 1e5)?;
        queue("server_proxy.queue_packets", sp.queue_packets)?;
        for (i, p) in self.paths.iter().enumerate() {
            let f = |name: &str| format!("paths[{i}].{name}");
            range(&f("rate_kbps"), p.rate_kbps, 1e-3, 1e8)?;
            range(&f("wired_rate_mbps"), p.wired_rate_mbps, 1e-3, 1e5)?;
            range(&f("wired_delay_ms"), p.wired_delay_ms, 0.0, 1e5)?;
            if let Some(back) = p.wired_delay_back_ms {
                range(&f("wired_delay_back_ms"), back, 0.0, 1e5)?;
            }
            range(&f("wireless_delay_ms"), p.wireless_delay_ms, 0.0, 1e5)?;
            queue(&f("queue_packets"), p.queue_packets)?;
            match p.loss {
                LossModel::None => {}
                LossModel::Bernoulli { p: pr } => range(&f("loss.p"), pr, 0.0, 1.0)?,
                LossModel::GilbertElliott { .. } => p
                    .loss
                    .validate()
                    .map_err(|e| invalid(f("loss"), e.to_string()))?,
                LossModel::GilbertElliottTimed {
                    mean_good_s,
                    mean_bad_s,
                } => {
                    range(&f("loss.mean_good_s"), mean_good_s, 1e-3, DAY)?;
                    range(&f("loss.mean_bad_s"), mean_bad_s, 1e-3, DAY)?;
                }
            }
            let c = &p.cross;
            if c.ftp > 10_000 || c.web > 10_000 {
                return Err(invalid(f("cross"), "at most 10000 FTP and 10000 web flows"));
            }
            range(&f("cross.udp_kbps"), c.udp_kbps, 0.0, 1e8)?;
            range(&f("cross.web_on_s"), c.web_on_s, 1e-3, DAY)?;
            range(&f("cross.web_off_s"), c.web_off_s, 1e-3, DAY)?;
            range(&f("cross.web_rate_kbps"), c.web_rate_kbps, 1e-3, 1e8)?;
            if let Some(fl) = &p.fluctuation {
                range(
                    &f("fluctuation.period_s"),
                    fl.period_s,
                    1e-3,
                    self.duration_s,
                )?;
                range(&f("fluctuation.lo"), fl.lo, 1e-3, 10.0)?;
                range(&f("fluctuation.hi"), fl.hi, fl.lo, 10.0)?;
            }
            if let Some(cost) = p.cost.as_deref()
                && CostClass::from_name(cost).is_none()
            {
                let names: Vec<&str> = CostClass::ALL.iter().map(|c| c.name()).collect();
                return Err(invalid(
                    f("cost"),
                    format!("unknown cost class {cost:?}; one of: {}", names.join(", ")),
                ));
            }
            sorted_spans(
                &format!("paths[{i}].outages"),
                p.outages.iter().map(|&[a, b]| (a, b)),
            )?;
            sorted_spans(
                &format!("paths[{i}].rate_dips"),
                p.rate_dips.iter().map(|d| (d.from_s, d.to_s)),
            )?;
            for (j, d) in p.rate_dips.iter().enumerate() {
                range(
                    &format!("paths[{i}].rate_dips[{j}].rate_kbps"),
                    d.rate_kbps,
                    1e-3,
                    1e8,
                )?;
            }
            sorted_spans(
                &format!("paths[{i}].loss_spells"),
                p.loss_spells.iter().map(|d| (d.from_s, d.to_s)),
            )?;
            for (j, d) in p.loss_spells.iter().enumerate() {
                if !(d.loss.is_finite() && (0.0..1.0).contains(&d.loss)) {
                    return Err(invalid(
                        format!("paths[{i}].loss_spells[{j}].loss"),
                        format!("{} must be from 0 to below 1", d.loss),
                    ));
                }
            }
        }
        if self.runs.is_empty() {
            return Err(invalid("runs", "give at least one run"));
        }
        if let Some(h) = &self.handover {
            let outages: Vec<&[[f64; 2]]> =
                self.paths.iter().map(|p| p.outages.as_slice()).collect();
            crate::handover_spec::check(h, &outages, self.duration_s).map_err(
                |(field, problem)| ScenarioError::Invalid {
                    field: format!("handover.{field}"),
                    problem,
                },
            )?;
        }
        for (i, r) in self.runs.iter().enumerate() {
            if r.mode == Mode::PlaitCbr && self.cbr.is_none() {
                return Err(invalid(
                    format!("runs[{i}].mode"),
                    "mode = \"plait-cbr\" needs a [cbr] table (rate_kbps, packet_size)",
                ));
            }
            if let Some(fec) = r.fec.as_deref() {
                if !matches!(r.mode, Mode::Plait | Mode::PlaitCbr) {
                    return Err(invalid(
                        format!("runs[{i}].fec"),
                        "fec applies only to modes \"plait\" and \"plait-cbr\"",
                    ));
                }
                if plait_proto::fec::FecPolicy::from_name(fec).is_none() {
                    return Err(invalid(
                        format!("runs[{i}].fec"),
                        format!("unknown FEC policy {fec:?}; one of: off, sparse, all"),
                    ));
                }
            }
            if let Some(sched) = r.stream_scheduler.as_deref() {
                if r.mode != Mode::PlaitStream {
                    return Err(invalid(
                        format!("runs[{i}].stream_scheduler"),
                        "stream_scheduler applies only to mode = \"plait-stream\"",
                    ));
                }
                if SchedulerKind::from_name(sched).is_none() {
                    return Err(invalid(
                        format!("runs[{i}].stream_scheduler"),
                        format!("unknown scheduler {sched:?}"),
                    ));
                }
            }
            if let Some(rwnd) = r.rwnd_packets {
                if !matches!(r.mode, Mode::CmtSctp | Mode::Hmtp) {
                    return Err(invalid(
                        format!("runs[{i}].rwnd_packets"),
                        "rwnd_packets applies only to mode = \"cmt-sctp\" or \"hmtp\"",
                    ));
                }
                if !(1..=100_000).contains(&rwnd) {
                    return Err(invalid(
                        format!("runs[{i}].rwnd_packets"),
                        "1 ..= 100000 packets",
                    ));
                }
            }
            if let Some(cc) = r.congestion.as_deref() {
                if r.mode != Mode::PlaitStream {
                    return Err(invalid(
                        format!("runs[{i}].congestion"),
                        "congestion applies only to mode = \"plait-stream\"",
                    ));
                }
                if plait_proto::cc::CongestionKind::from_name(cc).is_none() {
                    return Err(invalid(
                        format!("runs[{i}].congestion"),
                        format!("unknown congestion controller {cc:?}"),
                    ));
                }
            }
            if r.mode.uses_plait() {
                if let Some(sched) = r.scheduler.as_deref()
                    && plait_proto::sched::SchedulerKind::from_name(sched).is_none()
                {
                    return Err(invalid(
                        format!("runs[{i}].scheduler"),
                        format!("unknown scheduler {sched:?}"),
                    ));
                }
                if let Some(reorder) = r.reorder.as_deref()
                    && plait_proto::reorder::ReorderKind::from_name(reorder).is_none()
                {
                    return Err(invalid(
                        format!("runs[{i}].reorder"),
                        format!("unknown reorder policy {reorder:?}"),
                    ));
                }
            } else if r.scheduler.is_some()
                || r.reorder.is_some()
                || r.repair.is_some()
                || r.min_pair_bytes.is_some()
                || r.ack_every.is_some()
            {
                return Err(invalid(
                    format!("runs[{i}]"),
                    "scheduler, reorder, repair, min_pair_bytes and ack_every apply only to modes \"plait\" and \"plait-stream\"",
                ));
            }
            if r.ack_every.is_some_and(|n| !(1..=1000).contains(&n)) {
                return Err(invalid(
                    format!("runs[{i}].ack_every"),
                    "1 ..= 1000 datagrams",
                ));
            }
        }
        Ok(())
    }
}

/// `v` finite and within `lo..=hi`.
/// Time spans `(from, to)` in seconds, each within one day, in order and not overlapping;
/// the first bad one is named `field[j]`.
fn sorted_spans(field: &str, spans: impl Iterator<Item = (f64, f64)>) -> Result<(), ScenarioError> {
    let mut last_end = 0.0;
    for (j, (a, b)) in spans.enumerate() {
        if !(a.is_finite() && b.is_finite() && last_end <= a && a < b && b <= DAY) {
            return Err(invalid(
                format!("{field}[{j}]"),
                "need previous end <= start < end <= one day: sorted, not overlapping",
            ));
        }
        last_end = b;
    }
    Ok(())
}

fn range(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("must be within {lo} ..= {hi}, got {v}"),
        ))
    }
}

fn queue(field: &str, packets: usize) -> Result<(), ScenarioError> {
    if (1..=1_000_000).contains(&packets) {
        Ok(())
    } else {
        Err(invalid(field, "1 ..= 1000000 packets"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"
name = "t"
[[paths]]
rate_kbps = 100
[[runs]]
name = "a"
mode = "plait"
scheduler = "edpf"
"#;

    #[test]
    fn minimal_parses_with_defaults() {
        let s = Scenario::from_toml(MIN).unwrap();
        assert_eq!(s.duration_s, 60.0);
        assert_eq!(s.paths[0].queue_packets, 50);
        assert_eq!(s.tcp.window, 20);
    }

    #[test]
    fn a_path_names_its_cost_class() {
        let s = Scenario::from_toml(MIN).unwrap();
        assert_eq!(s.paths[0].cost_class(), CostClass::Unmetered);
        let text = MIN.replace("rate_kbps = 100", "rate_kbps = 100\ncost = \"metered\"");
        let s = Scenario::from_toml(&text).unwrap();
        assert_eq!(s.paths[0].cost_class(), CostClass::Metered);
        let err = Scenario::from_toml(&text.replace("\"metered\"", "\"Metered\"")).unwrap_err();
        assert!(
            err.to_string().contains("one of: unmetered, metered"),
            "{err}"
        );
    }

    #[test]
    fn a_cbr_flow_parses_with_its_defaults() {
        let text = MIN
            .replace("name = \"t\"", "name = \"t\"\ncbr = { rate_kbps = 4000 }")
            .replace("mode = \"plait\"", "mode = \"plait-cbr\"\nfec = \"sparse\"");
        let s = Scenario::from_toml(&text).unwrap();
        assert_eq!(s.runs[0].mode, Mode::PlaitCbr);
        assert_eq!(
            s.cbr,
            Some(CbrSpec {
                rate_kbps: 4000.0,
                packet_size: 1200
            })
        );
    }

    #[test]
    fn hmtp_modes_parse_and_take_a_buffer() {
        let text = MIN.replace(
            "mode = \"plait\"\nscheduler = \"edpf\"",
            "mode = \"hmtp\"\nrwnd_packets = 16\npaper_path_kbps = [1000]",
        );
        let s = Scenario::from_toml(&text).unwrap();
        assert_eq!(s.runs[0].mode, Mode::Hmtp);
        assert_eq!(s.runs[0].rwnd_packets, Some(16));
        assert_eq!(s.runs[0].paper_path_kbps, vec![1000.0]);
        let text = MIN.replace(
            "mode = \"plait\"\nscheduler = \"edpf\"",
            "mode = \"hmtp-tcp\"",
        );
        assert_eq!(
            Scenario::from_toml(&text).unwrap().runs[0].mode,
            Mode::HmtpTcp
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases = [
            (
                MIN.replace("rate_kbps = 100", "rate_kbps = -1"),
                "paths[0].rate_kbps",
            ),
            (MIN.replace("\"edpf\"", "\"fastest\""), "runs[0].scheduler"),
            (
                MIN.replace("scheduler = \"edpf\"", "ack_every = 0"),
                "runs[0].ack_every",
            ),
            (
                MIN.replace("scheduler = \"edpf\"", "rwnd_packets = 64"),
                "runs[0].rwnd_packets",
            ),
            (
                MIN.replace(
                    "mode = \"plait\"\nscheduler = \"edpf\"",
                    "mode = \"cmt-sctp\"\nrwnd_packets = 0",
                ),
                "runs[0].rwnd_packets",
            ),
            (
                MIN.replace(
                    "mode = \"plait\"\nscheduler = \"edpf\"",
                    "mode = \"hmtp-tcp\"\nrwnd_packets = 64",
                ),
                "runs[0].rwnd_packets",
            ),
            (
                MIN.replace("name = \"t\"", "name = \"t\"\nduration_s = 0"),
                "duration_s",
            ),
            (
                MIN.replace("mode = \"plait\"", "mode = \"plait-cbr\""),
                "runs[0].mode",
            ),
            (
                MIN.replace(
                    "name = \"t\"",
                    "name = \"t\"\ncbr = { rate_kbps = 4000, packet_size = 20 }",
                ),
                "cbr.packet_size",
            ),
            (
                MIN.replace("name = \"t\"", "name = \"t\"\ncbr = { rate_kbps = -4 }"),
                "cbr.rate_kbps",
            ),
            (
                MIN.replace("scheduler = \"edpf\"", "fec = \"some\""),
                "runs[0].fec",
            ),
            (
                MIN.replace("rate_kbps = 100", "rate_kbps = 100\ncost = \"paid\""),
                "paths[0].cost",
            ),
            (
                MIN.replace(
                    "rate_kbps = 100",
                    "rate_kbps = 100\nloss = { kind = \"bernoulli\", p = 2.0 }",
                ),
                "paths[0].loss.p",
            ),
            (
                MIN.replace(
                    "rate_kbps = 100",
                    "rate_kbps = 100\nrate_dips = [{ from_s = 5.0, to_s = 2.0, rate_kbps = 50 }]",
                ),
                "paths[0].rate_dips[0]",
            ),
            (
                MIN.replace(
                    "rate_kbps = 100",
                    "rate_kbps = 100\nrate_dips = [{ from_s = 1.0, to_s = 2.0, rate_kbps = 50 }, \
                     { from_s = 1.5, to_s = 3.0, rate_kbps = 50 }]",
                ),
                "paths[0].rate_dips[1]",
            ),
            (
                MIN.replace(
                    "rate_kbps = 100",
                    "rate_kbps = 100\nrate_dips = [{ from_s = 1.0, to_s = 2.0, rate_kbps = 0 }]",
                ),
                "paths[0].rate_dips[0].rate_kbps",
            ),
        ];
        for (text, field) in cases {
            match Scenario::from_toml(&text) {
                Err(ScenarioError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn unknown_field_is_an_error_with_a_line() {
        let err =
            Scenario::from_toml(&MIN.replace("rate_kbps = 100", "rate_kbs = 100")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("rate_kbs") && msg.contains("line"), "{msg}");
    }
}
