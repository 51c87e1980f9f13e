//! Builds the seeds' topology (seed PET-BMP Fig. 1 and 3) for one run of a scenario:
//!
//! ```text
//!  server ──10 Mb/s, 15 ms── proxy ──wired 10 Mb/s, 50 ms── BS_i ──wireless B_i── MH
//! ```
//! Each link is duplex (one [`Link`] per direction). The main flow is an FTP transfer from
//! the server to the mobile host (MH), carried per the run's mode:
//! - `mtcp`: one TCP flow per path (application-level striping), throughputs summed;
//! - `asi`: one TCP flow over one path whose wireless rate is the sum of all;
//! - `plait`: one TCP flow entering the plait engine at the proxy and leaving it at the MH;
//!   the MH's ACKs go back through the engines too (both directions are symmetric);
//! - `plait-stream`: the split connection, one engine stream from the proxy to the MH;
//! - `plait-cbr`: the scenario's constant-rate UDP flow (`[cbr]`) from the server through
//!   the engines to a [`DatagramSink`] at the MH, which measures loss and delay;
//! - `cmt-sctp`: a CMT-SCTP-like sender at the proxy and receiver at the MH (seed ETOM's
//!   baseline, `node/cmt_sender.rs`), one data and one SACK flow per path.
//!
//! Cross traffic enters at each base station and competes for its wireless link.
//!
//! Invariant: every random component gets its own seed derived from the run's seed and a
//! fixed component number, so adding a component does not shift the others' randomness.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;
use plait_proto::Time;
use plait_proto::path::PathHints;
use plait_tunnel::endpoint::{
    ClientEndpoint, ClientParams, ClientPath, EngineParams, ServerEndpoint, ServerParams,
    ServerPeer, SessionTuning,
};
use plait_tunnel::keys::Key;
use plait_tunnel::registration::PathAttributes;

use crate::inner;
use crate::net::{Discipline, LinkConfig, LossModel, QueueConfig, RateSchedule};
use crate::node::{
    CbrSource, CmtConfig, CmtReceiver, CmtSender, CountingSink, DatagramSink, Endpoint, HmtpConfig,
    HmtpReceiver, HmtpSender, HmtpTransport, Node, OnOffSource, PlaitGateway, StreamApp,
    TcpReceiver, TcpSender, TunnelAddresses,
};
use crate::packet::{FlowId, TCP_HEADER};
use crate::route::{Hop, LinkId, NodeId};
use crate::scenario::{Mode, PathSpec, RunSpec, Scenario};
use crate::tcp::TcpConfig;
use crate::world::{Change, World};

/// The `cmt-sctp` baseline's receive buffer when the run names none, packets.
pub const DEFAULT_RWND: u32 = 64;

/// What a run needs to find in the built world to report on it.
#[derive(Clone, Debug, Default)]
pub struct Handles {
    /// Main-flow senders (one, or one per path for MTCP).
    pub senders: Vec<NodeId>,
    /// Main-flow receivers, same order.
    pub receivers: Vec<NodeId>,
    /// Flow ids of the main flow's data: per path for MTCP (one each), else one.
    pub main_flows: Vec<FlowId>,
    /// The plait gateways (proxy, MH) in mode `plait`.
    pub gateways: Option<(NodeId, NodeId)>,
    /// Per path: the flow whose bytes count as that path's main-flow traffic (the plait
    /// datagrams towards the MH, or the MTCP flow on it).
    pub path_flows: Vec<FlowId>,
    /// Per path: the wireless downlink.
    pub wireless_down: Vec<LinkId>,
    /// When the main flow starts (the per-seed start jitter).
    pub main_start: Time,
    /// Mode `plait-stream`: the gateway whose application reads the transfer.
    pub stream_sink: Option<NodeId>,
    /// (sender, receiver) of each long-lived cross-traffic TCP flow (`cross.tcp`, and a
    /// shared bottleneck's competitors).
    pub cross_tcp: Vec<(NodeId, NodeId)>,
    /// The first path with such a competitor (the friendliness factor's path).
    pub cross_tcp_path: Option<usize>,
    /// The competitors cross the shared bottleneck: the friendliness factor compares the
    /// whole main flow with them.
    pub shared_competitors: bool,
}

/// Derives a component seed from the run seed (SplitMix64 of both).
pub fn component_seed(run_seed: u64, component: u64) -> u64 {
    let mut z = run_seed ^ component.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1000.0)
}

fn secs(v: f64) -> Time {
    Time::from_nanos((v * 1e9) as u64)
}

fn link(
    rate_bps: f64,
    delay: Duration,
    queue_packets: usize,
    wfq: bool,
    loss: LossModel,
) -> LinkConfig {
    LinkConfig {
        rate_bps,
        delay,
        queue: QueueConfig::packets(queue_packets),
        discipline: if wfq {
            Discipline::Wfq
        } else {
            Discipline::DropTail
        },
        loss,
    }
}

/// Allocates flow ids.
#[derive(Default)]
struct Flows(FlowId);

impl Flows {
    fn next(&mut self) -> FlowId {
        self.0 += 1;
        self.0
    }
}

struct PathLinks {
    /// The proxy's wired hop towards the base station, then the shared bottleneck if the
    /// scenario has one: what every route towards the mobile host crosses first.
    to_bs: LinkId,
    shared_down: Option<LinkId>,
    shared_up: Option<LinkId>,
    from_bs: LinkId,
    down: LinkId,
    up: LinkId,
}

impl PathLinks {
    /// The links from the proxy to the mobile host over this path.
    fn towards_mh(&self) -> Vec<Hop> {
        let mut hops = vec![Hop::Link(self.to_bs)];
        hops.extend(self.shared_down.map(Hop::Link));
        hops.push(Hop::Link(self.down));
        hops
    }

    /// The links back from the mobile host to the proxy.
    fn towards_proxy(&self) -> Vec<Hop> {
        let mut hops = vec![Hop::Link(self.up)];
        hops.extend(self.shared_up.map(Hop::Link));
        hops.push(Hop::Link(self.from_bs));
        hops
    }
}

/// The two plait gateways of a run (proxy, mobile host), running `apps` (proxy's,
/// mobile host's) if given, and each path's datagram flows between them. Returns the
/// gateways and the flows towards the mobile host (the paths' main-flow traffic).
fn plait_gateways(
    world: &mut World,
    flows: &mut Flows,
    links: &[PathLinks],
    scenario: &Scenario,
    run: &RunSpec,
    seed: u64,
    apps: Option<(StreamApp, StreamApp)>,
) -> (NodeId, NodeId, Vec<FlowId>) {
    let down_flows: Vec<FlowId> = links.iter().map(|_| flows.next()).collect();
    let up_flows: Vec<FlowId> = links.iter().map(|_| flows.next()).collect();
    let (proxy_endpoint, mh_endpoint, addresses) = endpoints(scenario, run, seed);
    let outer = scenario.outer_header_bytes;
    let mut proxy = PlaitGateway::new(proxy_endpoint, addresses.clone(), down_flows.clone(), outer);
    let mut mobile = PlaitGateway::new(mh_endpoint, addresses, up_flows.clone(), outer);
    if let Some((a, b)) = apps {
        proxy = proxy.with_app(a);
        mobile = mobile.with_app(b);
    }
    crate::node::connect(&mut mobile, &mut proxy, Time::ZERO);
    let gp = world.add_node(Node::Plait(Box::new(proxy)));
    let gm = world.add_node(Node::Plait(Box::new(mobile)));
    for (i, l) in links.iter().enumerate() {
        world.set_route(
            down_flows[i],
            [l.towards_mh(), vec![Hop::Node(gm)]].concat(),
        );
        world.set_route(
            up_flows[i],
            [l.towards_proxy(), vec![Hop::Node(gp)]].concat(),
        );
    }
    (gp, gm, down_flows)
}

/// A TCP flow from `start` to the end over `there` (data) and `back` (ACKs); returns its
/// receiver, whose goodput is the competitor's.
fn long_lived_tcp(
    world: &mut World,
    flows: &mut Flows,
    tcp: &TcpConfig,
    start: Time,
    there: Vec<Hop>,
    back: Vec<Hop>,
) -> (NodeId, NodeId) {
    let data = flows.next();
    let ack = flows.next();
    let snd = world.add_node(Node::TcpSender(TcpSender::new(tcp.clone(), data, start)));
    let rcv = world.add_node(Node::TcpReceiver(TcpReceiver::new(
        ack,
        None,
        Duration::from_secs(1),
    )));
    world.set_route(data, [there, vec![Hop::Node(rcv)]].concat());
    world.set_route(ack, [back, vec![Hop::Node(snd)]].concat());
    (snd, rcv)
}

/// A start uniformly in `[0, tcp.start_jitter_s)` from `component_seed`: competitors start
/// at random like the main flow, so the seeds sample different slow-start races (with
/// fixed starts every seed replayed one trajectory).
fn jittered_start(scenario: &Scenario, component_seed: u64) -> Time {
    let jitter = crate::time_nanos(Duration::from_secs_f64(scenario.tcp.start_jitter_s));
    Time::from_nanos(component_seed % jitter.max(1))
}

/// Builds the world for `run` of `scenario` with `seed`.
pub fn build(scenario: &Scenario, run: &RunSpec, seed: u64) -> (World, Handles) {
    let mut world = World::new(Duration::from_secs_f64(scenario.bin_s));
    let mut flows = Flows::default();
    let mut h = Handles::default();
    let tcp = tcp_config(scenario);
    let duration = secs(scenario.duration_s);
    let sp = &scenario.server_proxy;
    let jitter = Duration::from_secs_f64(scenario.tcp.start_jitter_s);
    let main_start = secs(scenario.tcp.start_s)
        + Duration::from_nanos(component_seed(seed, 7) % crate::time_nanos(jitter).max(1));
    h.main_start = main_start;
    let mut seq = 0u64;
    let mut next_seed = || {
        seq += 1;
        component_seed(seed, seq)
    };

    // The duplex server – proxy link: one `Link` per direction.
    let server_link = link(
        sp.rate_mbps * 1e6,
        ms(sp.delay_ms),
        sp.queue_packets,
        false,
        LossModel::None,
    );
    let to_proxy = world.add_link(server_link.clone(), next_seed());
    let to_server = world.add_link(server_link, next_seed());

    // ASI replaces the paths with one of the summed capacity (and summed queue).
    let asi_path;
    let paths: &[PathSpec] = if run.mode == Mode::Asi {
        let first = &scenario.paths[0];
        asi_path = PathSpec {
            rate_kbps: scenario.paths.iter().map(|p| p.rate_kbps).sum(),
            wired_delay_ms: scenario
                .paths
                .iter()
                .map(|p| p.wired_delay_ms)
                .fold(f64::MAX, f64::min),
            queue_packets: scenario.paths.iter().map(|p| p.queue_packets).sum(),
            cross: Default::default(),
            fluctuation: None,
            outages: Vec::new(),
            rate_dips: Vec::new(),
            loss_spells: Vec::new(),
            ..first.clone()
        };
        std::slice::from_ref(&asi_path)
    } else {
        &scenario.paths
    };

    let shared = scenario.shared_bottleneck.as_ref().map(|b| {
        let config = link(
            b.rate_kbps * 1e3,
            ms(b.delay_ms),
            b.queue_packets,
            false,
            LossModel::None,
        );
        let down = world.add_link(config.clone(), next_seed());
        let up = world.add_link(config, next_seed());
        (down, up)
    });
    let mut links = Vec::new();
    for p in paths {
        let wired = |delay_ms: f64, s: &mut dyn FnMut() -> u64, w: &mut World| {
            w.add_link(
                link(
                    p.wired_rate_mbps * 1e6,
                    ms(delay_ms),
                    1000,
                    false,
                    LossModel::None,
                ),
                s(),
            )
        };
        let back_ms = p.wired_delay_back_ms.unwrap_or(p.wired_delay_ms);
        let to_bs = wired(p.wired_delay_ms, &mut next_seed, &mut world);
        let from_bs = wired(back_ms, &mut next_seed, &mut world);
        let wireless = |loss: LossModel| {
            link(
                p.rate_kbps * 1e3,
                ms(p.wireless_delay_ms),
                p.queue_packets,
                p.wfq,
                loss,
            )
        };
        let down = world.add_link(wireless(p.loss), next_seed());
        let up = world.add_link(wireless(LossModel::None), next_seed());
        h.wireless_down.push(down);
        links.push(PathLinks {
            to_bs,
            shared_down: shared.map(|(d, _)| d),
            shared_up: shared.map(|(_, u)| u),
            from_bs,
            down,
            up,
        });
    }

    match run.mode {
        Mode::Mtcp | Mode::Asi => {
            for l in &links {
                let data = flows.next();
                let ack = flows.next();
                let (s, r) = main_flow_ends(&mut world, &tcp, data, ack, main_start, scenario);
                world.set_route(
                    data,
                    [
                        vec![Hop::Link(to_proxy)],
                        l.towards_mh(),
                        vec![Hop::Node(r)],
                    ]
                    .concat(),
                );
                world.set_route(
                    ack,
                    [l.towards_proxy(), vec![Hop::Link(to_server), Hop::Node(s)]].concat(),
                );
                h.senders.push(s);
                h.receivers.push(r);
                h.main_flows.push(data);
                h.path_flows.push(data);
            }
        }
        Mode::Plait => {
            let data = flows.next();
            let ack = flows.next();
            let (gp, gm, down_flows) =
                plait_gateways(&mut world, &mut flows, &links, scenario, run, seed, None);
            let (s, r) = main_flow_ends(&mut world, &tcp, data, ack, main_start, scenario);
            world.set_route(
                data,
                vec![
                    Hop::Link(to_proxy),
                    Hop::Node(gp),
                    Hop::Node(gm),
                    Hop::Node(r),
                ],
            );
            world.set_route(
                ack,
                vec![
                    Hop::Node(gm),
                    Hop::Node(gp),
                    Hop::Link(to_server),
                    Hop::Node(s),
                ],
            );
            h.senders.push(s);
            h.receivers.push(r);
            h.main_flows.push(data);
            h.path_flows = down_flows;
            h.gateways = Some((gp, gm));
        }
        Mode::PlaitCbr => {
            let data = flows.next();
            let (gp, gm, down_flows) =
                plait_gateways(&mut world, &mut flows, &links, scenario, run, seed, None);
            // Validated: the mode needs `[cbr]`; without it the run carries nothing.
            if let Some(cbr) = &scenario.cbr {
                let src = world.add_node(Node::Cbr(CbrSource::numbered(
                    data,
                    cbr.packet_size,
                    cbr.rate_kbps * 1e3,
                    main_start,
                    duration,
                )));
                let sink = world.add_node(Node::DatagramSink(DatagramSink::new(
                    Duration::from_secs_f64(scenario.bin_s),
                )));
                world.set_route(
                    data,
                    vec![
                        Hop::Link(to_proxy),
                        Hop::Node(gp),
                        Hop::Node(gm),
                        Hop::Node(sink),
                    ],
                );
                h.senders.push(src);
                h.receivers.push(sink);
                h.main_flows.push(data);
            }
            h.path_flows = down_flows;
            h.gateways = Some((gp, gm));
        }
        Mode::PlaitStream => {
            let source = StreamApp::Source { stream: None };
            let sink = StreamApp::Sink {
                start: main_start,
                stream: None,
                bytes: 0,
                bins: Vec::new(),
                bin: Duration::from_secs_f64(scenario.bin_s),
            };
            let apps = Some((source, sink));
            let (gp, gm, down_flows) =
                plait_gateways(&mut world, &mut flows, &links, scenario, run, seed, apps);
            h.path_flows = down_flows;
            h.gateways = Some((gp, gm));
            h.stream_sink = Some(gm);
        }
        Mode::CmtSctp => {
            // Seed ETOM §V: the source sits with the proxy (MR), the destination with the
            // mobile host (HA), as the split connection's ends do in `plait-stream`.
            let down_flows: Vec<FlowId> = links.iter().map(|_| flows.next()).collect();
            let up_flows: Vec<FlowId> = links.iter().map(|_| flows.next()).collect();
            let rwnd = run.rwnd_packets.unwrap_or(DEFAULT_RWND);
            let config = CmtConfig {
                paths: links.len(),
                packet_size: scenario.tcp.packet_size,
                initial_cwnd: scenario.tcp.window_init,
                rwnd,
                ..CmtConfig::default()
            };
            let s = world.add_node(Node::CmtSender(CmtSender::new(
                config,
                down_flows.clone(),
                main_start,
            )));
            let r = world.add_node(Node::CmtReceiver(CmtReceiver::new(
                rwnd,
                scenario.tcp.packet_size,
                up_flows.clone(),
                Duration::from_secs_f64(scenario.bin_s),
            )));
            for (i, l) in links.iter().enumerate() {
                world.set_route(down_flows[i], [l.towards_mh(), vec![Hop::Node(r)]].concat());
                world.set_route(
                    up_flows[i],
                    [l.towards_proxy(), vec![Hop::Node(s)]].concat(),
                );
            }
            h.senders.push(s);
            h.receivers.push(r);
            h.main_flows.extend(&down_flows);
            h.path_flows = down_flows;
        }
        Mode::Hmtp | Mode::HmtpTcp => {
            // Seed HMTP §IV: the multi-homed sender and receiver; placed as the `cmt-sctp`
            // baseline's ends (proxy, mobile host) so the two cross the same links.
            let down_flows: Vec<FlowId> = links.iter().map(|_| flows.next()).collect();
            let up_flows: Vec<FlowId> = links.iter().map(|_| flows.next()).collect();
            let config = HmtpConfig {
                paths: links.len(),
                transport: if run.mode == Mode::Hmtp {
                    HmtpTransport::Sctp
                } else {
                    HmtpTransport::Tcp
                },
                packet_size: scenario.tcp.packet_size,
                sctp_flight_cap: run.rwnd_packets.unwrap_or(DEFAULT_RWND),
                seed: component_seed(seed, 41_000),
                ..HmtpConfig::default()
            };
            let s = world.add_node(Node::HmtpSender(HmtpSender::new(
                config.clone(),
                &tcp,
                down_flows.clone(),
                main_start,
            )));
            let r = world.add_node(Node::HmtpReceiver(HmtpReceiver::new(
                config,
                up_flows.clone(),
                Duration::from_secs_f64(scenario.bin_s),
            )));
            for (i, l) in links.iter().enumerate() {
                world.set_route(down_flows[i], [l.towards_mh(), vec![Hop::Node(r)]].concat());
                world.set_route(
                    up_flows[i],
                    [l.towards_proxy(), vec![Hop::Node(s)]].concat(),
                );
            }
            h.senders.push(s);
            h.receivers.push(r);
            h.main_flows.extend(&down_flows);
            h.path_flows = down_flows;
        }
    }

    for (i, (p, l)) in paths.iter().zip(&links).enumerate() {
        let competitors = add_cross_traffic(
            &mut world,
            &mut flows,
            p,
            l,
            i,
            duration,
            &tcp,
            scenario.tcp.start_jitter_s,
            seed,
        );
        if !competitors.is_empty() {
            h.cross_tcp_path.get_or_insert(i);
        }
        h.cross_tcp.extend(competitors);
        add_changes(&mut world, p, l, duration, seed, i);
    }
    if let (Some(b), Some(first)) = (&scenario.shared_bottleneck, links.first())
        && let (Some(down), Some(up)) = (first.shared_down, first.shared_up)
    {
        for k in 0..b.tcp {
            let start = jittered_start(scenario, component_seed(seed, 31_000 + u64::from(k)));
            let (snd, rcv) = long_lived_tcp(
                &mut world,
                &mut flows,
                &tcp,
                start,
                vec![Hop::Link(first.to_bs), Hop::Link(down)],
                vec![Hop::Link(up), Hop::Link(first.from_bs)],
            );
            h.cross_tcp.push((snd, rcv));
            h.shared_competitors = true;
        }
    }
    (world, h)
}

/// The main flow's sender (sending `data` from `start`) and receiver (acknowledging on `ack`).
fn main_flow_ends(
    world: &mut World,
    tcp: &TcpConfig,
    data: FlowId,
    ack: FlowId,
    start: Time,
    scenario: &Scenario,
) -> (NodeId, NodeId) {
    let bin = Duration::from_secs_f64(scenario.bin_s);
    let mut sender = TcpSender::new(tcp.clone(), data, start);
    if let Some(kbps) = scenario.tcp.app_rate_kbps {
        // One packet's payload at the application's rate.
        let bits = f64::from(scenario.tcp.packet_size) * 8.0;
        sender = sender.streaming(crate::secs_at_least_1ns(bits / (kbps * 1e3)));
    }
    let s = world.add_node(Node::TcpSender(sender));
    let r = world.add_node(Node::TcpReceiver(TcpReceiver::new(
        ack,
        delack(scenario),
        bin,
    )));
    (s, r)
}

fn delack(scenario: &Scenario) -> Option<Duration> {
    scenario
        .tcp
        .delayed_ack
        .then_some(Duration::from_millis(100))
}

/// The main flow's TCP from the scenario (ns-2 defaults for the rest).
pub fn tcp_config(scenario: &Scenario) -> TcpConfig {
    let t = &scenario.tcp;
    TcpConfig {
        window: t.window,
        window_init: t.window_init,
        max_burst: t.max_burst,
        packet_size: t.packet_size,
        ..TcpConfig::default()
    }
}

/// The inner port the simulated tunnel's server listens on (as the daemon's default).
const SERVER_PORT: u16 = 7744;

/// A key from the run's seed: the simulated tunnel's keys repeat with the run.
fn seeded_key(seed: u64) -> Key {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&component_seed(seed, i as u64).to_le_bytes());
    }
    Key::from_bytes(bytes)
}

/// The two tunnel endpoints of a plait run, configured as the daemons are
/// (`EngineParams` with the run's `[engine]` settings) plus the run's experiment knobs:
/// the proxy's server and the mobile host's client (it starts the session), and the
/// addresses they use on the simulated paths.
pub(crate) fn endpoints(
    scenario: &Scenario,
    run: &RunSpec,
    seed: u64,
) -> (Endpoint, Endpoint, TunnelAddresses) {
    let settings = run.engine_settings();
    let inner_max = (scenario.tcp.packet_size + TCP_HEADER)
        .max(scenario.cbr.as_ref().map_or(0, |c| c.packet_size));
    // Hints: the wireless rate (bytes on the link per second, as the engine counts them
    // with `datagram_overhead`) and the one-way path delay, at both ends (the daemon's
    // server knows neither).
    let path_hints = scenario
        .paths
        .iter()
        .map(|p| PathHints {
            rate: Some(p.rate_kbps * 1e3 / 8.0),
            one_way_delay: Some(ms(p.wired_delay_ms + p.wireless_delay_ms)),
            backup: false,
            priority: 0,
            overflow: false,
        })
        .collect();
    let engine = |component: u64| EngineParams {
        settings: settings.clone(),
        max_datagram_size: (inner_max as usize + 64).max(plait_proto::config::MIN_DATAGRAM_SIZE),
        outer_header_len: scenario.outer_header_bytes as usize,
        seed: Some(component_seed(seed, 1000 + component)),
        streams: EngineParams::tunnel_stream_limits(),
        tuning: SessionTuning {
            trust_hints: run.perfect_knowledge,
            ack_every: run.ack_every,
            min_pair_bytes: run.min_pair_bytes,
            path_hints: Vec::clone(&path_hints),
        },
    };
    let server_key = seeded_key(component_seed(seed, 1010));
    let client_key = seeded_key(component_seed(seed, 1011));
    let addresses = TunnelAddresses {
        server: SocketAddr::from(([192, 0, 2, 1], SERVER_PORT)),
        client: (0..scenario.paths.len())
            .map(|i| SocketAddr::from(([198, 51, 100, i as u8 + 1], 40_000)))
            .collect(),
    };
    let server = ServerEndpoint::new(ServerParams {
        private_key: server_key.clone(),
        peers: vec![ServerPeer {
            name: "mobile-host".into(),
            public_key: client_key.public(),
            preshared_key: None,
            allowed_ips: vec![IpNet::from(IpAddr::from(inner::MOBILE_SIDE))],
        }],
        engine: engine(1),
    });
    let client = ClientEndpoint::new(ClientParams {
        private_key: client_key,
        server_public_key: server_key.public(),
        preshared_key: None,
        // The cost class as the daemon's `[[path]] cost`: the client makes a metered path
        // an overflow path and registers it, so the server learns it as the daemon's does
        // (docs/protocol.md#overflow).
        paths: (scenario.paths.iter().enumerate())
            .map(|(i, p)| ClientPath {
                name: format!("path{i}"),
                server: addresses.server,
                rate_hint: None,
                backup: false,
                attributes: PathAttributes {
                    cost: p.cost_class(),
                    ..PathAttributes::default()
                },
            })
            .collect(),
        engine: engine(2),
    });
    (
        Endpoint::Server(Box::new(server)),
        Endpoint::Client(Box::new(client)),
        addresses,
    )
}

/// Adds path `path`'s cross traffic; returns its long-lived TCP competitors as (sender,
/// receiver).
#[allow(clippy::too_many_arguments)]
fn add_cross_traffic(
    world: &mut World,
    flows: &mut Flows,
    p: &PathSpec,
    l: &PathLinks,
    path: usize,
    duration: Time,
    tcp: &TcpConfig,
    tcp_start_jitter_s: f64,
    seed: u64,
) -> Vec<(NodeId, NodeId)> {
    let base = 10_000 + 1000 * path as u64;
    let jitter_nanos = crate::time_nanos(Duration::from_secs_f64(tcp_start_jitter_s));
    // Long-lived TCP competitors, from a random start to the end, through the wired hop too:
    // their round trip is the main flow's, as in seed mHIP's Fig. 1 (both 120 ms), so
    // neither gets the larger share by RTT.
    let competitors = (0..p.cross.tcp)
        .map(|k| {
            let component = 30_000 + 100 * path as u64 + u64::from(k);
            let start = Time::from_nanos(component_seed(seed, component) % jitter_nanos.max(1));
            long_lived_tcp(world, flows, tcp, start, l.towards_mh(), l.towards_proxy())
        })
        .collect();
    let sink = world.add_node(Node::Sink(CountingSink::default()));
    // FTP: 200 – 2000 kB, start uniform in the run (PET-BMP §III-A).
    for k in 0..u64::from(p.cross.ftp) {
        let s = component_seed(seed, base + k);
        let size_kb = 200.0 + (s >> 11) as f64 / (1u64 << 53) as f64 * 1800.0;
        let start = Time::from_nanos((component_seed(s, 1) >> 11) % duration.as_nanos().max(1));
        let packets = (size_kb * 1000.0 / f64::from(tcp.packet_size)).ceil() as u64;
        let data = flows.next();
        let ack = flows.next();
        let config = TcpConfig {
            total_packets: Some(packets),
            ..tcp.clone()
        };
        let snd = world.add_node(Node::TcpSender(TcpSender::new(config, data, start)));
        let rcv = world.add_node(Node::TcpReceiver(TcpReceiver::new(
            ack,
            None,
            Duration::from_secs(1),
        )));
        world.set_route(data, vec![Hop::Link(l.down), Hop::Node(rcv)]);
        world.set_route(ack, vec![Hop::Link(l.up), Hop::Node(snd)]);
    }
    // Web-like: exponential on/off (see `CrossSpec::web_on_s` for the model's source).
    for k in 0..u64::from(p.cross.web) {
        let flow = flows.next();
        let src = OnOffSource::new(
            flow,
            1000,
            p.cross.web_rate_kbps * 1e3,
            Duration::from_secs_f64(p.cross.web_on_s),
            Duration::from_secs_f64(p.cross.web_off_s),
            Time::ZERO,
            duration,
            component_seed(seed, base + 500 + k),
        );
        world.add_node(Node::OnOff(src));
        world.set_route(flow, vec![Hop::Link(l.down), Hop::Node(sink)]);
    }
    if p.cross.udp_kbps > 0.0 {
        let flow = flows.next();
        let to = p.cross.udp_to_s.map_or(duration, secs);
        world.add_node(Node::Cbr(CbrSource::new(
            flow,
            1000,
            p.cross.udp_kbps * 1e3,
            secs(p.cross.udp_from_s),
            to,
        )));
        world.set_route(flow, vec![Hop::Link(l.down), Hop::Node(sink)]);
    }
    competitors
}

fn add_changes(
    world: &mut World,
    p: &PathSpec,
    l: &PathLinks,
    duration: Time,
    seed: u64,
    path: usize,
) {
    if let Some(f) = &p.fluctuation {
        let schedule = RateSchedule::etom_fluctuation(
            p.rate_kbps * 1e3,
            Duration::from_secs_f64(f.period_s),
            f.lo,
            f.hi,
            duration.saturating_since(Time::ZERO),
            component_seed(seed, 20_000 + path as u64),
        );
        for (at, rate) in schedule.steps() {
            world.schedule(*at, Change::Rate(l.down, *rate));
            world.schedule(*at, Change::Rate(l.up, *rate));
        }
    }
    for dip in &p.rate_dips {
        for link in [l.down, l.up] {
            world.schedule(secs(dip.from_s), Change::Rate(link, dip.rate_kbps * 1e3));
            world.schedule(secs(dip.to_s), Change::Rate(link, p.rate_kbps * 1e3));
        }
    }
    for spell in &p.loss_spells {
        let during = if spell.loss > 0.0 {
            LossModel::Bernoulli { p: spell.loss }
        } else {
            LossModel::None
        };
        world.schedule(secs(spell.from_s), Change::Loss(l.down, during));
        world.schedule(secs(spell.to_s), Change::Loss(l.down, p.loss));
    }
    for [from, to] in &p.outages {
        for link in [l.down, l.up] {
            world.schedule(secs(*from), Change::Up(link, false));
            world.schedule(secs(*to), Change::Up(link, true));
        }
    }
}
