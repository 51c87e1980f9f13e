//! Runs one row of a scenario for one seed and measures it.
//!
//! What is measured, for the main flow (summed over its per-path flows under MTCP):
//! - goodput: payload the TCP receivers delivered in order, per second;
//! - throughput: payload that reached the receivers (duplicates included), per second;
//! - dupACKs received, retransmissions and retransmission timeouts at the senders;
//! - per-path throughput: the main flow's bytes the links delivered on each path;
//! - reorder delay: how long the mobile host's reorder buffer held each packet (p50, p99);
//! - application-layer delay (`hmtp`, `hmtp-tcp`, `cmt-sctp`): per unit of k packets, from
//!   its first packet sent to the receiving application holding it in order (mean, p99;
//!   seed HMTP Fig. 8(b), [`crate::node::app_delay`]);
//! - for a constant-rate UDP flow (`plait-cbr`): residual loss (datagrams sent up to
//!   [`LOSS_GRACE_S`] before the end that never arrived), repair overhead (the sending
//!   engine's FEC symbols and loss-repair copies over the flow's bytes), one-way delay
//!   p50 and p99 and the p99's excess over the smallest delay of the run;
//! - with a `[handover]` table, for one TCP flow (modes `plait`, `asi`): the end-to-end
//!   delay per phase between the paths' joins and leaves and the delivery around each
//!   (seed MMS Fig. 4-6, [`crate::handover`]);
//! - goodput and per-path throughput per time bin, for plots.
//!
//! Invariant: a result is a pure function of (scenario, run, seed): no wall-clock value is
//! stored in it, so its JSON is byte-identical across runs.

use serde::Serialize;

use plait_proto::Time;

use crate::node::{CbrSource, DatagramSink, Node};
use crate::scenario::{RunSpec, Scenario};
use crate::topology::{Handles, build};
use crate::world::World;

/// The measurements of one run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunResult {
    /// Row name.
    pub run: String,
    /// Seed.
    pub seed: u64,
    /// Main-flow goodput, kbit/s (payload delivered in order).
    pub goodput_kbps: f64,
    /// Main-flow throughput at the receiver, kbit/s (payload, duplicates included).
    pub throughput_kbps: f64,
    /// Duplicate ACKs the senders received.
    pub dupacks: u64,
    /// Segments retransmitted.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Main-flow bytes delivered on each path, kbit/s (datagrams with their headers).
    pub per_path_kbps: Vec<f64>,
    /// Reorder-buffer holding time, mean, ms (plait runs; seed ETOM Fig. 5's measure).
    pub reorder_mean_ms: Option<f64>,
    /// Reorder-buffer holding time, median, ms (plait runs).
    pub reorder_p50_ms: Option<f64>,
    /// Reorder-buffer holding time, 99th percentile, ms (plait runs).
    pub reorder_p99_ms: Option<f64>,
    /// Application-layer delay per unit of k packets, mean, s (`hmtp`, `hmtp-tcp` and
    /// `cmt-sctp` runs in which a unit completed; [`crate::node::app_delay`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_delay_mean_s: Option<f64>,
    /// The same, 99th percentile (nearest rank: the largest with under 100 units), s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_delay_p99_s: Option<f64>,
    /// Units the application held in order by the end (those the delay counts); `None`
    /// for runs without the measure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_delay_units: Option<u64>,
    /// Constant-rate UDP flow (`plait-cbr`): see [`UdpResult`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpResult>,
    /// Goodput of the long-lived cross-traffic TCP flows, kbit/s (when a path has any):
    /// the competitor of seed mHIP's friendliness factor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_tcp_kbps: Option<f64>,
    /// Their retransmissions and retransmission timeouts, summed (how much of the
    /// bottleneck's drops they took).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_tcp_retransmissions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_tcp_timeouts: Option<u64>,
    /// Seed mHIP's friendliness factor: the main flow's kbit/s on the competitor's path
    /// over the competitor's (with several competitors, their mean per flow), both counted
    /// on the wire (datagrams with their headers, segments with theirs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub friendliness: Option<f64>,
    /// Seed MMS Fig. 4-6's measures (scenarios with `[handover]`, one TCP flow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handover: Option<crate::handover::HandoverResult>,
    /// The two plait gateways' FEC and repair counters, summed (plait runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engines: Option<EngineCounters>,
    /// Simulator events processed.
    pub events: u64,
    /// Width of one time bin of the series, s.
    pub bin_s: f64,
    /// Goodput per time bin, kbit/s (received payload).
    pub goodput_series_kbps: Vec<f64>,
    /// Per path, main-flow kbit/s per time bin.
    pub path_series_kbps: Vec<Vec<f64>>,
}

/// What the two plait gateways' engines did to protect packets, summed over both
/// (docs/protocol.md#fec, #repair): each side encodes what it sends, so a TCP flow's data
/// and its ACKs both count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct EngineCounters {
    /// FEC blocks closed with at least one repair symbol.
    pub fec_blocks: u64,
    /// FEC repair symbols sent.
    pub fec_symbols: u64,
    /// Packets rebuilt from FEC symbols.
    pub fec_rebuilt: u64,
    /// Loss-repair copies sent.
    pub repairs: u64,
    /// Times a path was handed over for its quality (docs/protocol.md#handover).
    #[serde(default)]
    pub handovers: u64,
    /// Congestion events of the paths' controllers (window cuts), and how many of them
    /// were undone as spurious, over both gateways' paths.
    #[serde(default)]
    pub congestion_events: u64,
    #[serde(default)]
    pub congestion_undone: u64,
}

impl EngineCounters {
    fn of(a: &plait_proto::Session, b: &plait_proto::Session) -> EngineCounters {
        let (sa, sb) = (a.stats(), b.stats());
        let cc = |s: &plait_proto::Session| {
            s.path_ids()
                .filter_map(|id| s.path_congestion(id))
                .fold((0, 0), |(e, u), c| (e + c.congestion_events, u + c.undone))
        };
        let ((ea, ua), (eb, ub)) = (cc(a), cc(b));
        EngineCounters {
            fec_blocks: sa.fec_blocks + sb.fec_blocks,
            fec_symbols: sa.fec_symbols_sent + sb.fec_symbols_sent,
            fec_rebuilt: sa.fec_recovered + sb.fec_recovered,
            repairs: sa.repairs_sent + sb.repairs_sent,
            handovers: sa.handovers + sb.handovers,
            congestion_events: ea + eb,
            congestion_undone: ua + ub,
        }
    }
}

/// Datagrams sent this close to the end are not counted as lost: they may still be in
/// flight (every simulated path's delay is far shorter).
pub const LOSS_GRACE_S: f64 = 1.0;

/// What a constant-rate UDP flow's receiver and the sending engine measured (the goals of
/// issue 18: residual loss, repair overhead, delay).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UdpResult {
    /// Datagrams sent up to [`LOSS_GRACE_S`] before the end.
    pub counted: u64,
    /// Of those, the fraction that never arrived.
    pub residual_loss: f64,
    /// The sending engine's repair bytes over the flow's bytes: each FEC symbol as its
    /// shard (the packet and a 2-byte length) and its 12-byte frame body, each
    /// loss-repair copy as the packet (docs/protocol.md#fec, #repair); datagram headers
    /// are not counted (symbols share datagrams with ACKs when they fit).
    pub repair_overhead: f64,
    /// FEC repair symbols the sending engine sent.
    pub fec_symbols: u64,
    /// Packets the receiving engine rebuilt from them.
    pub fec_rebuilt: u64,
    /// Loss-repair copies the sending engine sent.
    pub repairs: u64,
    /// One-way delay, source to the receiving application, median, ms.
    pub delay_p50_ms: f64,
    /// The same, 99th percentile, ms.
    pub delay_p99_ms: f64,
    /// The 99th percentile over the smallest delay any datagram had (the fastest path's
    /// propagation and serialisation), ms.
    pub p99_over_min_ms: f64,
}

/// The UDP flow's measurements from its source, its sink and the engines' counters
/// (sending, receiving); `None` without a delivered datagram.
fn udp_result(
    scenario: &Scenario,
    src: &CbrSource,
    sink: &DatagramSink,
    engines: Option<(plait_proto::SessionStats, plait_proto::SessionStats)>,
) -> Option<UdpResult> {
    let end = scenario.duration_s - LOSS_GRACE_S;
    let counted = src.sent_by(Time::from_nanos((end.max(0.0) * 1e9) as u64));
    let arrived = sink.arrived_below(counted);
    let size = f64::from(scenario.cbr.as_ref()?.packet_size);
    let (tx, rx) = engines.unwrap_or_default();
    let repair_bytes =
        tx.fec_symbols_sent as f64 * (size + 2.0 + 12.0) + tx.repairs_sent as f64 * size;
    let flow_bytes = src.sent() as f64 * size;
    let (p50, p99) = percentiles(&sink.delays_us);
    let min = f64::from(*sink.delays_us.iter().min()?) / 1000.0;
    Some(UdpResult {
        counted,
        residual_loss: if counted == 0 {
            0.0
        } else {
            1.0 - arrived as f64 / counted as f64
        },
        repair_overhead: if flow_bytes > 0.0 {
            repair_bytes / flow_bytes
        } else {
            0.0
        },
        fec_symbols: tx.fec_symbols_sent,
        fec_rebuilt: rx.fec_recovered,
        repairs: tx.repairs_sent,
        delay_p50_ms: p50?,
        delay_p99_ms: p99?,
        p99_over_min_ms: p99? - min,
    })
}

/// Runs `run` of `scenario` with `seed` to the scenario's end.
pub fn run_one(scenario: &Scenario, run: &RunSpec, seed: u64) -> RunResult {
    let (mut world, handles) = build(scenario, run, seed);
    world.run_until(Time::from_nanos((scenario.duration_s * 1e9) as u64));
    measure(scenario, run, seed, &world, &handles)
}

fn measure(scenario: &Scenario, run: &RunSpec, seed: u64, world: &World, h: &Handles) -> RunResult {
    // Rates over the main flow's own lifetime (it may start late: `tcp.start_jitter_s`).
    let secs = scenario.duration_s - h.main_start.as_nanos() as f64 / 1e9;
    let kbps = |bytes: u64| bytes as f64 * 8.0 / 1000.0 / secs;
    let per_bin = |bytes: u64| bytes as f64 * 8.0 / 1000.0 / scenario.bin_s;
    let payload = u64::from(scenario.tcp.packet_size);

    let (mut dupacks, mut retransmissions, mut timeouts) = (0, 0, 0);
    let mut unit_starts: &[Time] = &[];
    let mut cbr: Option<&CbrSource> = None;
    for s in &h.senders {
        match world.node(*s) {
            Node::TcpSender(n) => {
                let st = n.tcp().stats();
                dupacks += st.dupacks;
                retransmissions += st.retransmissions;
                timeouts += st.timeouts;
            }
            Node::CmtSender(n) => {
                // SACKs that did not advance the cumulative ack stand for dupACKs.
                let st = n.core().stats();
                dupacks += st.dup_sacks;
                retransmissions += st.retransmissions;
                timeouts += st.timeouts;
                unit_starts = n.unit_starts();
            }
            Node::HmtpSender(n) => {
                // The transport's retransmissions carry fresh symbols (refills).
                let (d, o) = n.core().transport_counters();
                dupacks += d;
                timeouts += o;
                retransmissions += n.core().stats().refills;
                unit_starts = n.core().chunk_starts();
            }
            Node::Cbr(n) => cbr = Some(n),
            _ => {}
        }
    }
    let (mut in_order, mut received) = (0u64, 0u64);
    let mut series: Vec<u64> = Vec::new();
    let mut units_done: &[Time] = &[];
    let mut datagrams: Option<&DatagramSink> = None;
    if let Some(Node::Plait(g)) = h.stream_sink.map(|n| world.node(n))
        && let Some(crate::node::StreamApp::Sink { bytes, bins, .. }) = g.app()
    {
        // The split connection: what the mobile host's application read in order.
        in_order = *bytes;
        received = *bytes;
        series.clone_from(bins);
        // The peer's retransmissions, in the main flow's segments.
        if let Some((gp, _)) = h.gateways
            && let Node::Plait(p) = world.node(gp)
        {
            retransmissions = p
                .session()
                .map_or(0, |s| s.stream_stats().bytes_retransmitted)
                / payload.max(1);
        }
    }
    for r in &h.receivers {
        let bins = match world.node(*r) {
            Node::TcpReceiver(n) => {
                let st = n.sink().stats();
                in_order += st.delivered_packets * payload;
                received += st.received * payload;
                &n.bins
            }
            Node::CmtReceiver(n) => {
                // The baseline's series is in-order delivery, as the split connection's.
                let st = n.core().stats();
                in_order += st.delivered * payload;
                received += st.received * payload;
                units_done = &n.units_done;
                &n.bins
            }
            Node::HmtpReceiver(n) => {
                // Goodput: chunks the decoder recovered (and that matched the source).
                let st = n.core().stats();
                in_order += st.decoded * n.chunk_bytes();
                received += st.symbols * payload;
                units_done = n.core().in_order_at();
                &n.bins
            }
            Node::DatagramSink(n) => {
                let size = scenario
                    .cbr
                    .as_ref()
                    .map_or(0, |c| u64::from(c.packet_size));
                in_order += n.distinct * size;
                received += (n.distinct + n.duplicates) * size;
                datagrams = Some(n);
                &n.bins
            }
            _ => continue,
        };
        if series.len() < bins.len() {
            series.resize(bins.len(), 0);
        }
        for (acc, b) in series.iter_mut().zip(bins) {
            *acc += b;
        }
    }
    let per_path_kbps = h
        .path_flows
        .iter()
        .map(|f| kbps(world.recorder.total(*f)))
        .collect();
    let path_series_kbps = h
        .path_flows
        .iter()
        .map(|f| {
            world
                .recorder
                .series(*f)
                .iter()
                .map(|b| per_bin(*b))
                .collect()
        })
        .collect();
    let held: &[u32] = match h.gateways.map(|(_, mh)| world.node(mh)) {
        Some(Node::Plait(g)) => &g.stats().held_us,
        _ => &[],
    };
    let (reorder_p50_ms, reorder_p99_ms) = percentiles(held);
    // The competitors' delivered bytes, retransmissions and timeouts, summed.
    let (mut cross_bytes, mut cross_retx, mut cross_timeouts) = (0, 0, 0);
    for &(snd, rcv) in &h.cross_tcp {
        if let Node::TcpReceiver(n) = world.node(rcv) {
            cross_bytes += n.sink().stats().delivered_packets * payload;
        }
        if let Node::TcpSender(n) = world.node(snd) {
            cross_retx += n.tcp().stats().retransmissions;
            cross_timeouts += n.tcp().stats().timeouts;
        }
    }
    let competing = !h.cross_tcp.is_empty();
    // Over the whole run: the competitors start at 0.
    let cross_tcp_kbps = competing.then(|| cross_bytes as f64 * 8.0 / 1000.0 / scenario.duration_s);
    let cross_tcp_retransmissions = competing.then_some(cross_retx);
    let cross_tcp_timeouts = competing.then_some(cross_timeouts);
    // Against one competitor: their mean when a path has several (the scenarios put every
    // per-path competitor on one path).
    let competitors = h.cross_tcp.len().max(1) as f64;
    let friendliness = cross_tcp_kbps
        .zip(h.cross_tcp_path)
        .and_then(|(tcp, path)| {
            let wire = tcp / competitors
                * f64::from(scenario.tcp.packet_size + crate::packet::TCP_HEADER)
                / f64::from(scenario.tcp.packet_size.max(1));
            let mine = h
                .path_flows
                .get(path)
                .map(|f| world.recorder.total(*f) as f64 * 8.0 / 1000.0 / secs)?;
            (wire > 0.0).then(|| mine / wire)
        });
    // At a shared bottleneck: the whole main flow against one competitor.
    let friendliness = friendliness.or_else(|| {
        let tcp = cross_tcp_kbps.filter(|_| h.shared_competitors)?;
        let wire = tcp / competitors
            * f64::from(scenario.tcp.packet_size + crate::packet::TCP_HEADER)
            / f64::from(scenario.tcp.packet_size.max(1));
        let mine: f64 = h
            .path_flows
            .iter()
            .map(|f| world.recorder.total(*f) as f64 * 8.0 / 1000.0 / secs)
            .sum();
        (wire > 0.0).then(|| mine / wire)
    });
    let app_delay = crate::node::app_delay::summary(unit_starts, units_done);
    let sessions = h
        .gateways
        .and_then(|(gp, gm)| match (world.node(gp), world.node(gm)) {
            (Node::Plait(p), Node::Plait(m)) => Some((p.session()?, m.session()?)),
            _ => None,
        });
    let counters = sessions.map(|(a, b)| EngineCounters::of(a, b));
    let engines = sessions.map(|(a, b)| (a.stats(), b.stats()));
    let udp = cbr
        .zip(datagrams)
        .and_then(|(src, sink)| udp_result(scenario, src, sink, engines));
    let handover = handover(scenario, world, h);
    let reorder_mean_ms = (!held.is_empty())
        .then(|| held.iter().map(|us| f64::from(*us)).sum::<f64>() / held.len() as f64 / 1000.0);
    RunResult {
        run: run.name.clone(),
        seed,
        goodput_kbps: kbps(in_order),
        throughput_kbps: kbps(received),
        dupacks,
        retransmissions,
        timeouts,
        per_path_kbps,
        reorder_mean_ms,
        reorder_p50_ms,
        reorder_p99_ms,
        app_delay_mean_s: app_delay.map(|d| d.0),
        app_delay_p99_s: app_delay.map(|d| d.1),
        app_delay_units: (!unit_starts.is_empty())
            .then(|| unit_starts.len().min(units_done.len()) as u64),
        udp,
        cross_tcp_kbps,
        cross_tcp_retransmissions,
        cross_tcp_timeouts,
        friendliness,
        handover,
        engines: counters,
        events: world.events(),
        bin_s: scenario.bin_s,
        goodput_series_kbps: series.iter().map(|b| per_bin(*b)).collect(),
        path_series_kbps,
    }
}

/// Seed MMS Fig. 4-6's measures when the scenario asks for them and the main flow is one
/// TCP connection (not MTCP's one per path, nor the modes without a TCP sender).
fn handover(
    scenario: &Scenario,
    world: &World,
    h: &Handles,
) -> Option<crate::handover::HandoverResult> {
    scenario.handover.as_ref()?;
    let ([s], [r]) = (h.senders.as_slice(), h.receivers.as_slice()) else {
        return None;
    };
    let (Node::TcpSender(s), Node::TcpReceiver(r)) = (world.node(*s), world.node(*r)) else {
        return None;
    };
    let syn = crate::topology::tcp_config(scenario).syn;
    Some(crate::handover::measure(scenario, &s.log, &r.log, syn))
}

/// Median and 99th percentile of microsecond samples, in ms (nearest rank).
fn percentiles(us: &[u32]) -> (Option<f64>, Option<f64>) {
    if us.is_empty() {
        return (None, None);
    }
    let mut v = us.to_vec();
    v.sort_unstable();
    let rank = |q: f64| {
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        f64::from(v[i]) / 1000.0
    };
    (Some(rank(0.50)), Some(rank(0.99)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u32> = (1..=100).map(|x| x * 1000).collect();
        assert_eq!(percentiles(&v), (Some(50.0), Some(99.0)));
        assert_eq!(percentiles(&[]), (None, None));
    }
}
