//! Whole-simulator tests: the PET-BMP Table I reproduction pinned as a snapshot, byte-identical
//! results for the same scenario and seed, and one NewReno flow through the real event loop
//! and link model filling its bottleneck.

use std::time::Duration;

use plait_proto::Time;
use plait_sim::net::{LinkConfig, QueueConfig};
use plait_sim::node::{Node, TcpReceiver, TcpSender};
use plait_sim::report;
use plait_sim::route::Hop;
use plait_sim::sweep::{load_variants, run_variants};
use plait_sim::tcp::TcpConfig;
use plait_sim::world::World;

fn scenario(name: &str) -> String {
    let path = format!("{}/../../scenarios/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A change in any model (TCP, links, engine) that moves PET-BMP Table I shows up here.
#[test]
fn petbmp_table1_snapshot() {
    let variants = load_variants(&scenario("petbmp-table1.toml")).unwrap();
    let result = run_variants(&variants, false);
    insta::assert_snapshot!(report::table(&result));
}

#[test]
fn same_scenario_and_seed_give_identical_json() {
    let text = scenario("petbmp-cross-traffic.toml");
    let mut variants = load_variants(&text).unwrap();
    variants[0].scenario.seeds = vec![7];
    variants[0].scenario.duration_s = 20.0;
    let a = serde_json::to_string(&run_variants(&variants, false)).unwrap();
    let b = serde_json::to_string(&run_variants(&variants, false)).unwrap();
    assert_eq!(a, b);
    variants[0].scenario.seeds = vec![8];
    let c = serde_json::to_string(&run_variants(&variants, false)).unwrap();
    assert_ne!(a, c, "the seed matters (cross traffic is random)");
}

/// One NewReno flow fills a 10 Mbit/s bottleneck to at least 95 % with a queue of one
/// bandwidth-delay product (the model test), through World, Link and the TCP nodes.
#[test]
fn newreno_fills_a_10_mbit_link() {
    let rtt = Duration::from_millis(20);
    let rate = 10e6;
    let packet = 1000u32;
    let bdp_packets = (rate * rtt.as_secs_f64() / 8.0 / f64::from(packet + 40)).ceil() as usize;
    let mut w = World::new(Duration::from_secs(1));
    let fwd = LinkConfig {
        queue: QueueConfig::packets(bdp_packets + 1),
        ..LinkConfig::new(rate, rtt / 2)
    };
    let back = LinkConfig {
        queue: QueueConfig::packets(1000),
        ..LinkConfig::new(rate, rtt / 2)
    };
    let l1 = w.add_link(fwd, 1);
    let l2 = w.add_link(back, 2);
    let tcp = TcpConfig {
        window: 10_000,
        packet_size: packet,
        ..TcpConfig::default()
    };
    let s = w.add_node(Node::TcpSender(TcpSender::new(tcp, 1, Time::ZERO)));
    let r = w.add_node(Node::TcpReceiver(TcpReceiver::new(
        2,
        None,
        Duration::from_secs(1),
    )));
    w.set_route(1, vec![Hop::Link(l1), Hop::Node(r)]);
    w.set_route(2, vec![Hop::Link(l2), Hop::Node(s)]);
    let secs = 60.0;
    w.run_until(Time::from_millis(60_000));
    let Node::TcpReceiver(rcv) = w.node(r) else {
        unreachable!()
    };
    let goodput = rcv.sink().stats().delivered_packets as f64 * f64::from(packet + 40) * 8.0 / secs;
    assert!(
        goodput >= 0.95 * rate,
        "goodput {:.3} of the link",
        goodput / rate
    );
    let Node::TcpSender(snd) = w.node(s) else {
        unreachable!()
    };
    assert!(
        snd.tcp().stats().retransmissions > 0,
        "the queue overflowed: TCP probed for the limit"
    );
}

/// The HMTP rows (real LT encoding and decoding under random loss) give byte-identical
/// results for the same seed, and decode something.
#[test]
fn hmtp_runs_are_deterministic() {
    let mut variants = load_variants(&scenario("hmtp-fig6.toml")).unwrap();
    variants.truncate(1);
    variants[0].scenario.seeds = vec![3];
    variants[0].scenario.duration_s = 30.0;
    variants[0]
        .scenario
        .runs
        .retain(|r| r.mode != plait_sim::scenario::Mode::CmtSctp);
    let a = run_variants(&variants, false);
    let b = run_variants(&variants, false);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    for row in &a.rows {
        assert!(
            row.goodput_kbps.mean > 500.0,
            "{}: {:?}",
            row.run,
            row.goodput_kbps
        );
    }
}
