//! Root tests of the topology's delay and loss emulation and of the MPTCP helpers: round-trip
//! times measured by the UDP prober match the configured RTTs, per-path counters see the
//! traffic, a kernel MPTCP transfer uses both paths, and dropping the topology leaves no
//! namespace behind.
//!
//! Invariant: each test owns its topology (`pte…` namespaces), so tests run in parallel;
//! without root each prints the skip message and passes.

use std::net::SocketAddr;
use std::time::Duration;

use plait_testbed::emulate::{LinkModel, LossModel};
use plait_testbed::{
    CounterSampler, Direction, PathSpec, RttProbe, SKIP_NO_ROOT, SendLimit, SendOptions,
    StreamProto, TcpSink, Topology, TopologySpec, UdpEcho, cleanup_stale, have_root, tcp_send_opts,
};

const PREFIX: &str = "pte";

fn root() -> bool {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return false;
    }
    let _ = cleanup_stale(PREFIX);
    true
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

#[test]
fn delay_matches_the_configured_rtt_and_loss_drops() {
    if !root() {
        return;
    }
    let spec = TopologySpec::new(
        PREFIX,
        vec![
            PathSpec::v4().rate(10.0).rtt(ms(20)),
            PathSpec::v4()
                .rate(10.0)
                .rtt(ms(100))
                .loss(LossModel::Bernoulli { p: 0.2 }),
        ],
    );
    let topo = Topology::build(&spec).expect("build");
    let names: Vec<String> = topo
        .namespaces()
        .iter()
        .map(|n| n.name().to_owned())
        .collect();
    for (i, want, loss) in [(0usize, 20.0, 0.0), (1, 100.0, 0.2)] {
        let addr = SocketAddr::new(topo.path_server_addr(i).expect("path"), 7000);
        let echo = UdpEcho::start(topo.server(), addr).expect("echo");
        let probe = RttProbe::start(topo.client(), echo.local_addr(), ms(10)).expect("probe");
        std::thread::sleep(ms(1500));
        let report = probe.stop().expect("probe report");
        let p50 = report.quantile(0.5).expect("answers").as_secs_f64() * 1000.0;
        let answered = report.samples.len() as f64 / report.sent.max(1) as f64;
        eprintln!(
            "path {i}: p50 RTT {p50:.1} ms, {:.0} % answered",
            answered * 100.0
        );
        assert!(
            p50 >= want && p50 < want + 5.0,
            "path {i}: p50 {p50} ms for {want} ms"
        );
        // Loss both ways: answered ≈ (1 - p)².
        let expect = (1.0 - loss) * (1.0 - loss);
        assert!(
            (answered - expect).abs() < 0.12,
            "path {i}: answered {answered}"
        );
    }
    drop(topo);
    let left = plait_testbed::netns::list().expect("list");
    for n in names {
        assert!(!left.contains(&n), "{n} left behind");
    }
}

#[test]
fn mptcp_uses_both_paths() {
    if !root() {
        return;
    }
    let spec = TopologySpec::new(
        PREFIX,
        vec![
            PathSpec::v4().rate(8.0).rtt(ms(20)),
            PathSpec::v4().rate(4.0).rtt(ms(40)),
        ],
    );
    let topo = Topology::build(&spec).expect("build");
    topo.setup_mptcp(0).expect("mptcp");
    let dst = SocketAddr::new(topo.path_server_addr(0).expect("path"), 5001);
    // The listener takes every address: joins arrive at the server's other path addresses.
    let sink = TcpSink::start_proto(
        topo.server(),
        SocketAddr::from(([0, 0, 0, 0], 5001)),
        Default::default(),
        StreamProto::Mptcp,
    )
    .expect("sink");
    let counters: Vec<CounterSampler> = topo
        .site0()
        .paths()
        .iter()
        .map(|p| CounterSampler::start(p.router(), "rs", ms(100)).expect("counters"))
        .collect();
    let sent = tcp_send_opts(
        topo.client(),
        dst,
        3,
        SendOptions {
            proto: StreamProto::Mptcp,
            limit: Some(SendLimit::For(Duration::from_secs(4))),
            ..Default::default()
        },
    )
    .expect("send");
    let got = sink.wait(Duration::from_secs(10)).expect("sink");
    assert_eq!(got.bytes, sent.bytes);
    assert_eq!(got.sha256, sent.sha256);
    let bytes: Vec<u64> = counters
        .into_iter()
        .map(|c| {
            let s = c.stop().expect("samples");
            s.last().expect("last").tx_bytes - s[0].tx_bytes
        })
        .collect();
    eprintln!(
        "MPTCP: {:.1} Mbit/s, per path bytes {bytes:?}",
        got.goodput_mbit()
    );
    let total: u64 = bytes.iter().sum();
    assert!(
        bytes[1] as f64 > 0.1 * total as f64,
        "path 1 carried {bytes:?}"
    );
    assert!(got.goodput_mbit() > 8.0, "{}", got.goodput_mbit());
}

#[test]
fn path_models_change_while_the_topology_runs() {
    if !root() {
        return;
    }
    // Path 0 starts without any emulator; path 1 with 10 ms each way.
    let spec = TopologySpec::new(PREFIX, vec![PathSpec::v4(), PathSpec::v4().rtt(ms(20))]);
    let topo = Topology::build(&spec).expect("build");
    let p50 = |i: usize| -> f64 {
        let addr = SocketAddr::new(topo.path_server_addr(i).expect("path"), 7100 + i as u16);
        let echo = UdpEcho::start(topo.server(), addr).expect("echo");
        let probe = RttProbe::start(topo.client(), echo.local_addr(), ms(10)).expect("probe");
        std::thread::sleep(ms(700));
        let report = probe.stop().expect("probe report");
        report.quantile(0.5).expect("answers").as_secs_f64() * 1000.0
    };
    let model = |delay_ms: u64| LinkModel {
        delay: ms(delay_ms),
        loss: LossModel::None,
        seed: 0,
    };
    let base0 = p50(0);
    assert!(base0 < 3.0, "path 0 unemulated: {base0} ms");
    // No emulator yet on path 0: one is started per direction.
    topo.set_path_model(0, Direction::Up, model(15))
        .expect("up");
    topo.set_path_model(0, Direction::Down, model(15))
        .expect("down");
    assert_eq!(
        topo.path_model(0, 0, Direction::Up).expect("model").delay,
        ms(15)
    );
    let started = p50(0);
    // Running emulators on path 1 adopt a new model.
    topo.set_path_model(1, Direction::Up, model(40))
        .expect("path 1");
    let changed = p50(1);
    // Back to a pass-through: the emulator stays but adds nothing.
    topo.set_path_model(0, Direction::Up, LinkModel::passthrough())
        .expect("pass-through");
    topo.set_path_model(0, Direction::Down, LinkModel::passthrough())
        .expect("pass-through");
    let back = p50(0);
    eprintln!(
        "path 0: {base0:.1} ms, with 15+15 ms {started:.1} ms, back {back:.1} ms; \
         path 1 with 40+10 ms {changed:.1} ms"
    );
    assert!((30.0..35.0).contains(&started), "{started}");
    assert!((50.0..55.0).contains(&changed), "{changed}");
    assert!(back < 3.0, "{back}");
    // Invalid input changes nothing and says why.
    let bad = LinkModel {
        loss: LossModel::Bernoulli { p: 2.0 },
        ..model(1)
    };
    let err = topo.set_path_model(1, Direction::Up, bad).unwrap_err();
    assert!(err.to_string().contains("p"), "{err}");
    assert!(topo.set_path_model(5, Direction::Up, model(1)).is_err());
    assert!(
        topo.set_site_path_model(3, 0, Direction::Up, model(1))
            .is_err()
    );
    assert_eq!(
        topo.path_model(0, 1, Direction::Up).expect("model").delay,
        ms(40)
    );
}
