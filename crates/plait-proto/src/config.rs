//! Session configuration: every tunable of the engine, with sane defaults and validation.
//!
//! This is the one place the engine's defaults are written: [`Config::default`] is what
//! the tunnel runs, and [`EngineSettings`] are the knobs a user may turn (the tunnel's
//! `[engine]` section, a simulator run). The tunnel and the simulator both build their
//! sessions with [`Config::for_session`], so the simulator measures what ships.
//!
//! Invariant: a [`Config`] that passed [`Config::validate`] cannot make the engine panic or
//! grow without bound; every bound here is a hard one.

use std::time::Duration;

use thiserror::Error;

use crate::cc::{CongestionKind, MAX_WINDOW};
use crate::fec::{FecConfig, FecPolicy};
use crate::path::{HandoverConfig, LivenessConfig, MIN_PAIR_BYTES};
use crate::policy::FlowRule;
use crate::reorder::{DEFAULT_MAX_HOLD, ReorderConfig, ReorderKind};
use crate::sched::SchedulerKind;
use crate::stream::{MAX_OPEN_REQUEST, Side, StreamLimits};

/// Smallest datagram the engine will build: room for a header, an ACK and a small DATA.
pub const MIN_DATAGRAM_SIZE: usize = 576;
/// Largest datagram (the largest UDP payload over IPv4).
pub const MAX_DATAGRAM_SIZE: usize = 65_507;

/// Default [`Config::unordered_below_bps`]: 256 kbit/s, above a voice call (about
/// 100 kbit/s with headers) and a 10 ms ping, below a bulk flow past its first round trips
/// (measured in docs/protocol.md#unordered).
pub const DEFAULT_UNORDERED_BELOW_BPS: u64 = 256_000;

/// The engine knobs a user may turn; everything else is [`Config::default`]'s.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineSettings {
    /// Which scheduler places outgoing packets (default `plait`).
    pub scheduler: SchedulerKind,
    /// Which reorder policy restores incoming order (default `bmp`).
    pub reorder: ReorderKind,
    /// Longest a packet waits in the reorder buffer (default [`DEFAULT_MAX_HOLD`]).
    pub max_hold: Duration,
    /// Loss repair (docs/protocol.md#repair), default on.
    pub repair: bool,
    /// Which congestion controller runs on each path for streams (default `adaptive`:
    /// NewReno under a queue cap, or BBR on a path whose link loses datagrams;
    /// docs/protocol.md#adaptive-congestion).
    pub congestion: CongestionKind,
    /// Which scheduler places stream datagrams (default `min-rtt`).
    pub stream_scheduler: SchedulerKind,
    /// Packet mode sends on a path only while its congestion window has room and its
    /// pacer lets the datagram go, so inner packets beyond what the paths carry wait in
    /// the send queue (its AQM) rather than in the links; never on a path more than
    /// `send_queue_interval` behind the best one while that one is only held, and never
    /// holding packets of sparse flows other than TCP's (docs/protocol.md#packet-pacing).
    /// Default off.
    pub packet_pacing: bool,
    /// See [`Config::unordered_below_bps`] (default [`DEFAULT_UNORDERED_BELOW_BPS`]).
    pub unordered_below_bps: u64,
    /// See [`Config::flow_policy`] (default none).
    pub flow_policy: Vec<FlowRule>,
    /// Which inner packets get forward error correction (docs/protocol.md#fec); default
    /// [`FecPolicy::All`]. The other FEC tunables are [`FecConfig::default`]'s.
    pub fec: FecPolicy,
    /// Quality-driven handover (docs/protocol.md#handover, seed MMS §II-E): a path whose
    /// link loss, delay, blackouts or signal fall below the other paths' by a margin
    /// stands by while they carry. Default off.
    pub handover: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            scheduler: SchedulerKind::Plait,
            reorder: ReorderKind::Bmp,
            max_hold: DEFAULT_MAX_HOLD,
            repair: true,
            congestion: CongestionKind::default(),
            stream_scheduler: SchedulerKind::MinRtt,
            packet_pacing: false,
            unordered_below_bps: DEFAULT_UNORDERED_BELOW_BPS,
            flow_policy: Vec::new(),
            fec: FecPolicy::default(),
            handover: false,
        }
    }
}

/// Largest [`Config::datagram_overhead`]: far above any real framing (IPv6, UDP and
/// plait's come to 69 bytes), small enough that it cannot dwarf a datagram.
pub const MAX_DATAGRAM_OVERHEAD: usize = 256;

/// Everything a [`crate::Session`] needs to know before it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Seed of the session's random generator (probe ids). Same seed, same outputs.
    pub seed: u64,
    /// Which scheduler places outgoing packets.
    pub scheduler: SchedulerKind,
    /// Which reorder policy restores incoming order.
    pub reorder: ReorderKind,
    /// Reorder buffer bounds and timers.
    pub reorder_config: ReorderConfig,
    /// Largest datagram the engine sends (the path MTU less outer headers and encryption).
    pub max_datagram_size: usize,
    /// Bytes each datagram costs a link beyond its own length: the tunnel's framing and
    /// tag and the outer IP and UDP headers (docs/protocol.md#overhead). The engine's path
    /// models (schedulers' queues, rate estimates and hints, congestion windows) count a
    /// datagram as its length plus this, so that small datagrams (ACKs, probes) weigh what
    /// they cost the link. Default 0: datagrams are the link's bytes.
    pub datagram_overhead: usize,
    /// Send queue bound, packets. A new inner packet that would exceed it (or
    /// `send_queue_bytes`) gets in by dropping from the head of the flow with the largest
    /// backlog (RFC 8290 §4.1; docs/protocol.md#send-queue).
    pub send_queue_packets: usize,
    /// Send queue bound, bytes.
    pub send_queue_bytes: usize,
    /// Flow queues the send queue hashes inner packets' 5-tuples into (RFC 8290 §5.2.5);
    /// packets that are not IP share one more.
    pub send_queue_flows: usize,
    /// The send queue's deficit round robin quantum, bytes (RFC 8290 §5.2.4).
    pub send_queue_quantum: usize,
    /// CoDel target: the standing delay a flow may keep in the send queue before CoDel
    /// drops or marks (RFC 8289 §4.3, RFC 8290 §5.2.2).
    pub send_queue_target: Duration,
    /// CoDel interval: how long the delay may stay above target before the first drop,
    /// about a worst-case round trip of the end hosts (RFC 8289 §4.2, RFC 8290 §5.2.1).
    pub send_queue_interval: Duration,
    /// CoDel marks ECN-capable inner packets CE instead of dropping them (RFC 3168,
    /// RFC 8290 §5.2.6).
    pub send_queue_ecn: bool,
    /// Inner packets of flows sending at most this many bits per second (over 100 ms
    /// windows), TCP's excepted, are marked for delivery out of the global order, so a
    /// call or a ping does not wait in the peer's reorder buffer behind bulk packets on
    /// slower paths (docs/protocol.md#unordered). 0: every packet keeps the global order.
    /// Default [`DEFAULT_UNORDERED_BELOW_BPS`].
    pub unordered_below_bps: u64,
    /// Inner packets waiting longer than this in the send queue (no usable path) are dropped:
    /// stale packets only hurt the end hosts' TCP.
    pub max_queue_delay: Duration,
    /// Send an ACK after this many ack-eliciting datagrams (docs/protocol.md#ack-policy).
    pub ack_every: u32,
    /// … or this long after the first unacknowledged one arrived.
    pub max_ack_delay: Duration,
    /// Path state machine tunables.
    pub liveness: LivenessConfig,
    /// Quality-driven handover tunables (docs/protocol.md#handover).
    pub handover: HandoverConfig,
    /// Global sequence numbers remembered for duplicate suppression.
    pub dedup_window: u64,
    /// Schedulers see the configured [`crate::path::PathHints`] instead of measured rates
    /// and delays (for links whose figures are known exactly; the simulator's "perfect
    /// knowledge" baselines). Liveness and RTTs stay measured.
    pub trust_hints: bool,
    /// Loss repair (docs/protocol.md#repair): the receiver asks for inner packets it has
    /// evidence were lost and holds their holes about one round trip longer; the sender
    /// keeps recent packets to send them once more. Both ends should agree.
    pub repair: bool,
    /// Payload bytes of recent inner packets kept for repair (they are also kept at most
    /// `reorder_config.max_hold`).
    pub repair_store_bytes: usize,
    /// Packet pairs whose second datagram is smaller give no rate sample (default
    /// [`MIN_PAIR_BYTES`], which real hosts need; 0 counts all, as in seed PET-BMP).
    pub min_pair_bytes: usize,
    /// Which end this is: the parity of the stream ids it opens (docs/protocol.md#stream-ids).
    pub side: Side,
    /// The congestion controller of every path (docs/protocol.md#congestion-control).
    pub congestion: CongestionKind,
    /// Which scheduler places stream datagrams, among the paths whose window and pacer
    /// have room (docs/protocol.md#stream-scheduling).
    pub stream_scheduler: SchedulerKind,
    /// Stream bounds and initial windows (docs/protocol.md#stream-flow-control).
    pub streams: StreamLimits,
    /// See [`EngineSettings::packet_pacing`].
    pub packet_pacing: bool,
    /// Per-flow policy (docs/protocol.md#flow-policy): rules that duplicate matching inner
    /// packets on every path or send them on the lowest-delay one; first match wins; at
    /// most [`crate::policy::MAX_RULES`] rules.
    pub flow_policy: Vec<FlowRule>,
    /// Forward error correction of packet mode (docs/protocol.md#fec): which packets, block
    /// sizes, repair sizing. The receiving half runs whenever repair symbols arrive; with
    /// a policy other than off it also keeps sources from the start and holds holes with
    /// random-loss evidence for a repair (as `repair` does). Both ends should agree.
    pub fec: FecConfig,
}

impl Default for Config {
    /// What the tunnel runs: [`EngineSettings::default`] and the bounds and timers below.
    fn default() -> Self {
        let settings = EngineSettings::default();
        Config {
            seed: 0,
            scheduler: settings.scheduler,
            reorder: settings.reorder,
            reorder_config: ReorderConfig::default(),
            max_datagram_size: 1400,
            send_queue_packets: 1024,
            send_queue_bytes: 2 << 20,
            send_queue_flows: 1024,
            send_queue_quantum: 1514,
            send_queue_target: Duration::from_millis(5),
            send_queue_interval: Duration::from_millis(100),
            send_queue_ecn: true,
            unordered_below_bps: settings.unordered_below_bps,
            max_queue_delay: Duration::from_millis(500),
            ack_every: 16,
            max_ack_delay: Duration::from_millis(25),
            liveness: LivenessConfig::default(),
            handover: HandoverConfig {
                enabled: settings.handover,
                ..HandoverConfig::default()
            },
            dedup_window: 1 << 16,
            trust_hints: false,
            repair: settings.repair,
            repair_store_bytes: 4 << 20,
            min_pair_bytes: MIN_PAIR_BYTES,
            datagram_overhead: 0,
            side: Side::Client,
            congestion: settings.congestion,
            stream_scheduler: settings.stream_scheduler,
            streams: StreamLimits::default(),
            packet_pacing: settings.packet_pacing,
            flow_policy: settings.flow_policy,
            fec: FecConfig {
                policy: settings.fec,
                ..FecConfig::default()
            },
        }
    }
}

/// A configuration value the engine cannot work with.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A value is outside its allowed range.
    #[error("{field} = {value} is out of range: {allowed}")]
    OutOfRange {
        /// The field's name as in config files.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
}

fn check(
    ok: bool,
    field: &'static str,
    value: impl ToString,
    allowed: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            field,
            value: value.to_string(),
            allowed,
        })
    }
}

impl Config {
    /// The configuration of one session: `settings` on top of [`Config::default`], with the
    /// session's random seed and the largest datagram the paths carry.
    pub fn for_session(seed: u64, max_datagram_size: usize, settings: &EngineSettings) -> Config {
        let mut c = Config {
            seed,
            scheduler: settings.scheduler,
            reorder: settings.reorder,
            max_datagram_size,
            repair: settings.repair,
            congestion: settings.congestion,
            stream_scheduler: settings.stream_scheduler,
            packet_pacing: settings.packet_pacing,
            unordered_below_bps: settings.unordered_below_bps,
            flow_policy: settings.flow_policy.clone(),
            ..Config::default()
        };
        c.reorder_config.max_hold = settings.max_hold;
        c.fec.policy = settings.fec;
        c.handover.enabled = settings.handover;
        c
    }

    /// Largest inner packet this configuration carries: the datagram less
    /// [`crate::wire::DATA_OVERHEAD`] (a full-size packet whose `prev_delta` would need
    /// more than one byte names no predecessor instead, docs/protocol.md#data-frame).
    /// Packet-mode FEC does not shrink it: a block of full-size packets has its repair
    /// symbols cut into pieces that fit (docs/protocol.md#fec).
    pub fn max_inner_packet(&self) -> usize {
        self.max_datagram_size
            .saturating_sub(crate::wire::DATA_OVERHEAD)
    }

    /// Checks the FEC tunables (docs/protocol.md#fec).
    fn validate_fec(&self) -> Result<(), ConfigError> {
        let f = &self.fec;
        check(
            (1..=crate::wire::FEC_SPAN as usize).contains(&f.max_block),
            "fec.max_block",
            f.max_block,
            "1..=32",
        )?;
        check(
            f.max_repair >= 1 && f.max_repair <= crate::wire::MAX_FEC_REPAIR,
            "fec.max_repair",
            f.max_repair,
            "1..=15",
        )?;
        check(
            f.min_repair <= f.max_repair,
            "fec.min_repair",
            f.min_repair,
            "<= fec.max_repair",
        )?;
        check(
            f.max_block_delay >= Duration::from_millis(1)
                && f.max_block_delay <= Duration::from_secs(1),
            "fec.max_block_delay",
            format!("{:?}", f.max_block_delay),
            "1 ms ..= 1 s",
        )?;
        check(
            f.target_residual > 0.0 && f.target_residual < 1.0,
            "fec.target_residual",
            f.target_residual,
            "0 < x < 1",
        )
    }

    /// Checks every bound; the engine is only built from a validated configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let d = self.max_datagram_size;
        check(
            (MIN_DATAGRAM_SIZE..=MAX_DATAGRAM_SIZE).contains(&d),
            "max_datagram_size",
            d,
            "576..=65507 bytes",
        )?;
        check(
            self.send_queue_packets >= 1,
            "send_queue_packets",
            self.send_queue_packets,
            ">= 1",
        )?;
        check(
            self.send_queue_bytes >= d,
            "send_queue_bytes",
            self.send_queue_bytes,
            ">= max_datagram_size",
        )?;
        check(
            self.datagram_overhead <= MAX_DATAGRAM_OVERHEAD,
            "datagram_overhead",
            self.datagram_overhead,
            "<= 256 bytes",
        )?;
        self.validate_send_queue()?;
        self.validate_fec()?;
        check(self.ack_every >= 1, "ack_every", self.ack_every, ">= 1")?;
        check(
            self.max_ack_delay <= Duration::from_secs(1),
            "max_ack_delay",
            format!("{:?}", self.max_ack_delay),
            "<= 1 s",
        )?;
        check(
            self.dedup_window >= 64,
            "dedup_window",
            self.dedup_window,
            ">= 64",
        )?;
        check(
            self.dedup_window <= 1 << 24,
            "dedup_window",
            self.dedup_window,
            "<= 16777216",
        )?;
        let r = &self.reorder_config;
        check(
            r.max_packets >= 1,
            "reorder.max_packets",
            r.max_packets,
            ">= 1",
        )?;
        check(
            r.max_bytes >= d,
            "reorder.max_bytes",
            r.max_bytes,
            ">= max_datagram_size",
        )?;
        check(
            r.max_hold >= Duration::from_millis(1) && r.max_hold <= Duration::from_secs(10),
            "reorder.max_hold",
            format!("{:?}", r.max_hold),
            "1 ms ..= 10 s",
        )?;
        if let Some(p) = r.pacing {
            check(p.burst >= 1, "reorder.pacing.burst", p.burst, ">= 1")?;
            check(
                p.gain.is_finite() && p.gain > 1.0,
                "reorder.pacing.gain",
                p.gain,
                "> 1.0",
            )?;
        }
        let l = &self.liveness;
        check(
            l.down_min <= l.down_max,
            "liveness.down_min",
            format!("{:?}", l.down_min),
            "<= down_max",
        )?;
        check(!l.down_min.is_zero(), "liveness.down_min", "0", "> 0")?;
        check(
            (0.0..=1.0).contains(&l.degraded_loss),
            "liveness.degraded_loss",
            l.degraded_loss,
            "0.0..=1.0",
        )?;
        check(
            l.probes_to_activate >= 1,
            "liveness.probes_to_activate",
            l.probes_to_activate,
            ">= 1",
        )?;
        check(
            !l.probe_interval.is_zero(),
            "liveness.probe_interval",
            "0",
            "> 0",
        )?;
        check(
            l.probe_interval <= l.probe_max_interval,
            "liveness.probe_interval",
            format!("{:?}", l.probe_interval),
            "<= probe_max_interval",
        )?;
        check(!l.keepalive.is_zero(), "liveness.keepalive", "0", "> 0")?;
        let hour = Duration::from_secs(3600);
        for (field, d) in [
            ("liveness.down_max", l.down_max),
            ("liveness.probe_max_interval", l.probe_max_interval),
            ("liveness.keepalive", l.keepalive),
            ("max_queue_delay", self.max_queue_delay),
            ("send_queue_interval", self.send_queue_interval),
        ] {
            check(d <= hour, field, format!("{d:?}"), "<= 1 hour")?;
        }
        if let Some(problem) = self.handover.problem() {
            return Err(ConfigError::OutOfRange {
                field: "handover",
                value: format!("{:?}", self.handover),
                allowed: problem,
            });
        }
        self.validate_flow_policy()?;
        self.validate_streams()
    }

    fn validate_flow_policy(&self) -> Result<(), ConfigError> {
        use crate::policy::{MAX_MATCH_ITEMS, MAX_RULES};
        let rules = &self.flow_policy;
        check(
            rules.len() <= MAX_RULES,
            "flow_policy",
            rules.len(),
            "at most 64 rules",
        )?;
        for r in rules {
            let longest = r.ports.len().max(r.prefixes.len()).max(r.dscp.len());
            check(
                longest <= MAX_MATCH_ITEMS,
                "flow_policy",
                longest,
                "at most 64 ports, prefixes or DSCP values per rule",
            )?;
            for p in &r.prefixes {
                let max = if p.addr.is_ipv4() { 32 } else { 128 };
                check(
                    p.len <= max,
                    "flow_policy prefix",
                    p.len,
                    "<= 32 (IPv4), <= 128 (IPv6)",
                )?;
            }
            for d in &r.dscp {
                check(*d < 64, "flow_policy dscp", d, "0..=63")?;
            }
        }
        Ok(())
    }

    fn validate_send_queue(&self) -> Result<(), ConfigError> {
        check(
            (1..=1 << 16).contains(&self.send_queue_flows),
            "send_queue_flows",
            self.send_queue_flows,
            "1..=65536",
        )?;
        check(
            (256..=1 << 16).contains(&self.send_queue_quantum),
            "send_queue_quantum",
            self.send_queue_quantum,
            "256..=65536 bytes",
        )?;
        check(
            !self.send_queue_interval.is_zero(),
            "send_queue_interval",
            "0",
            "> 0",
        )?;
        check(
            !self.send_queue_target.is_zero() && self.send_queue_target <= self.send_queue_interval,
            "send_queue_target",
            format!("{:?}", self.send_queue_target),
            "> 0 and <= send_queue_interval",
        )
    }

    fn validate_streams(&self) -> Result<(), ConfigError> {
        let s = &self.streams;
        check(
            (1..=1 << 20).contains(&s.max_concurrent),
            "streams.max_concurrent",
            s.max_concurrent,
            "1..=1048576",
        )?;
        let min_window = (MAX_OPEN_REQUEST + 2) as u64;
        check(
            s.initial_stream_window >= min_window,
            "streams.initial_stream_window",
            s.initial_stream_window,
            ">= 1026 bytes (an open request fits)",
        )?;
        check(
            s.initial_stream_window <= s.max_stream_window,
            "streams.initial_stream_window",
            s.initial_stream_window,
            "<= max_stream_window",
        )?;
        check(
            s.max_stream_window <= MAX_WINDOW * 4,
            "streams.max_stream_window",
            s.max_stream_window,
            "<= 256 MiB",
        )?;
        check(
            s.initial_session_window >= s.initial_stream_window
                && s.initial_session_window <= s.max_session_window,
            "streams.initial_session_window",
            s.initial_session_window,
            "initial_stream_window ..= max_session_window",
        )?;
        check(
            s.max_session_window <= 1 << 32,
            "streams.max_session_window",
            s.max_session_window,
            "<= 4 GiB",
        )?;
        check(
            s.stream_send_buffer >= min_window && s.stream_send_buffer <= s.session_send_buffer,
            "streams.stream_send_buffer",
            s.stream_send_buffer,
            "1026 ..= session_send_buffer",
        )?;
        check(
            s.session_send_buffer <= 1 << 32,
            "streams.session_send_buffer",
            s.session_send_buffer,
            "<= 4 GiB",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn each_bad_value_is_named() {
        type Mutation = Box<dyn Fn(&mut Config)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("max_datagram_size", Box::new(|c| c.max_datagram_size = 100)),
            (
                "max_datagram_size",
                Box::new(|c| c.max_datagram_size = 70_000),
            ),
            ("send_queue_packets", Box::new(|c| c.send_queue_packets = 0)),
            ("send_queue_flows", Box::new(|c| c.send_queue_flows = 0)),
            (
                "send_queue_flows",
                Box::new(|c| c.send_queue_flows = 1 << 20),
            ),
            (
                "send_queue_quantum",
                Box::new(|c| c.send_queue_quantum = 100),
            ),
            (
                "send_queue_interval",
                Box::new(|c| c.send_queue_interval = Duration::ZERO),
            ),
            (
                "send_queue_interval",
                Box::new(|c| c.send_queue_interval = Duration::from_secs(7200)),
            ),
            (
                "send_queue_target",
                Box::new(|c| c.send_queue_target = Duration::ZERO),
            ),
            (
                "send_queue_target",
                Box::new(|c| c.send_queue_target = Duration::from_secs(1)),
            ),
            ("ack_every", Box::new(|c| c.ack_every = 0)),
            ("dedup_window", Box::new(|c| c.dedup_window = 3)),
            (
                "reorder.max_packets",
                Box::new(|c| c.reorder_config.max_packets = 0),
            ),
            (
                "reorder.max_hold",
                Box::new(|c| c.reorder_config.max_hold = Duration::ZERO),
            ),
            (
                "liveness.down_min",
                Box::new(|c| c.liveness.down_min = Duration::from_secs(9)),
            ),
            (
                "liveness.degraded_loss",
                Box::new(|c| c.liveness.degraded_loss = 1.5),
            ),
            (
                "streams.max_concurrent",
                Box::new(|c| c.streams.max_concurrent = 0),
            ),
            (
                "streams.initial_stream_window",
                Box::new(|c| c.streams.initial_stream_window = 100),
            ),
            (
                "streams.initial_session_window",
                Box::new(|c| c.streams.initial_session_window = 1 << 40),
            ),
            (
                "streams.stream_send_buffer",
                Box::new(|c| c.streams.stream_send_buffer = 0),
            ),
        ];
        for (field, mutate) in cases {
            let mut c = Config::default();
            mutate(&mut c);
            match c.validate() {
                Err(ConfigError::OutOfRange { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
