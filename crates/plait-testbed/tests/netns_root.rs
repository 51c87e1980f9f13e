//! Root-only tests of the test bed itself, without plait: namespaces come and go with their
//! processes, the topology routes and shapes each path, blackholes and link loss cut a path
//! and are reversible, and the traffic helpers move intact bytes. Each test prints
//! "skipped: needs root (network namespaces)" and passes when not run as root.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use plait_testbed::traffic::{TcpOptions, payload_sha256, tcp_send_with};
use plait_testbed::{
    Family, Namespace, PathSpec, SKIP_NO_ROOT, TcpSink, Topology, TopologySpec, UdpSink,
    cleanup_stale, have_root, netns, tcp_send, udp_blast,
};

const PREFIX: &str = "ptb";

fn root() -> bool {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return false;
    }
    true
}

fn quick() -> TcpOptions {
    TcpOptions {
        connect_timeout: Duration::from_secs(1),
        stall_timeout: Duration::from_secs(2),
        total_timeout: Duration::from_secs(5),
        ..TcpOptions::default()
    }
}

/// Sends `bytes` from `from` to a fresh sink at `to` and checks the digests.
fn transfer(from: &Namespace, to_ns: &Namespace, to: SocketAddr, bytes: u64) -> f64 {
    let sink = TcpSink::start(to_ns, to).expect("sink");
    let sent = tcp_send(from, to, bytes, 42).expect("send");
    let got = sink.wait(Duration::from_secs(10)).expect("sink report");
    assert_eq!(got.bytes, bytes);
    assert_eq!(sent.sha256, got.sha256);
    assert_eq!(sent.sha256, Some(payload_sha256(bytes, 42)));
    sent.goodput_mbit()
}

/// Whether a short connection attempt from `from` to `to` succeeds.
fn reachable(from: &Namespace, to_ns: &Namespace, to: SocketAddr) -> bool {
    let sink = TcpSink::start_with(to_ns, to, quick()).expect("sink");
    let ok = tcp_send_with(from, to, 1000, 1, quick()).is_ok();
    drop(sink);
    ok
}

#[test]
fn namespace_owns_its_processes_and_cleanup_finds_stale_ones() {
    if !root() {
        return;
    }
    let ns = Namespace::create(PREFIX, "life").expect("create");
    let name = ns.name().to_owned();
    assert!(netns::list().unwrap().contains(&name));

    // A socket bound inside is not reachable from outside.
    let port = ns
        .run_in(|| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        })
        .unwrap();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());

    // A spawned process is listed, and the namespace's drop kills it.
    let mut child = ns
        .spawn(ns.command("sleep").arg("30"))
        .expect("spawn sleep");
    let deadline = Instant::now() + Duration::from_secs(3);
    while !ns
        .pids()
        .unwrap()
        .contains(&i32::try_from(child.id()).unwrap())
    {
        assert!(Instant::now() < deadline, "sleep never showed up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let orphan = ns
        .spawn(ns.command("sleep").arg("30"))
        .expect("spawn sleep");
    drop(ns);
    assert!(!netns::list().unwrap().contains(&name));
    assert!(
        child
            .wait_timeout(Duration::from_secs(3))
            .unwrap()
            .is_some()
    );
    drop(orphan);

    // A namespace whose owner pid cannot exist is stale; ours are not.
    let mine = Namespace::create(PREFIX, "keep").unwrap();
    let stale = netns::make_name(PREFIX, 4_294_967, 0, "x");
    plait_testbed::cmd::run("ip", ["netns", "add", stale.as_str()]).unwrap();
    let deleted = cleanup_stale(PREFIX).unwrap();
    assert!(deleted.contains(&stale), "{deleted:?}");
    assert!(!deleted.iter().any(|d| d == mine.name()), "{deleted:?}");
    let names = netns::list().unwrap();
    assert!(!names.contains(&stale));
    assert!(names.iter().any(|n| n == mine.name()));
}

#[test]
fn two_path_topology_routes_shapes_and_cuts_paths() {
    if !root() {
        return;
    }
    let spec = TopologySpec::new(
        PREFIX,
        vec![PathSpec::v4().rate(20.0), PathSpec::v6().rate(20.0)],
    );
    let started = Instant::now();
    let topo = Topology::build(&spec).expect("build");
    eprintln!("built in {:?}", started.elapsed());
    let names: Vec<String> = topo
        .namespaces()
        .iter()
        .map(|n| n.name().to_owned())
        .collect();
    assert_eq!(names.len(), 6);

    // Each path reaches the server's address on it, shaped to about 20 Mbit/s.
    for i in 0..2 {
        let dst = SocketAddr::new(topo.path_server_addr(i).unwrap(), 5001);
        let mbit = transfer(topo.client(), topo.server(), dst, 1_000_000);
        eprintln!("path {i} ({dst}): {mbit:.1} Mbit/s");
        assert!(mbit < 22.0, "path {i} not shaped: {mbit:.1} Mbit/s");
        assert!(mbit > 5.0, "path {i} too slow: {mbit:.1} Mbit/s");
    }
    assert_eq!(topo.path(0).unwrap().family(), Family::V4);
    assert!(topo.path_server_addr(1).unwrap().is_ipv6());

    // Both LANs are dual-stack.
    let site = topo.site0();
    for f in Family::BOTH {
        let to = SocketAddr::new(site.client_lan_addr(f), 5101);
        transfer(topo.lan_host(), topo.client(), to, 100_000);
        let to = SocketAddr::new(topo.server_remote_addr(f), 5102);
        transfer(topo.remote_host(), topo.server(), to, 100_000);
    }
    // But nothing routes between them without a tunnel.
    let far = SocketAddr::new(topo.remote_host_addr(Family::V4), 5103);
    assert!(!reachable(topo.lan_host(), topo.remote_host(), far));

    // A blackhole silently cuts path 0 only, and is reversible.
    let p0 = SocketAddr::new(topo.path_server_addr(0).unwrap(), 5002);
    let p1 = SocketAddr::new(topo.path_server_addr(1).unwrap(), 5003);
    topo.blackhole(0, true).unwrap();
    topo.blackhole(0, true).unwrap(); // idempotent
    assert!(!reachable(topo.client(), topo.server(), p0));
    assert!(reachable(topo.client(), topo.server(), p1));
    topo.blackhole(0, false).unwrap();
    topo.blackhole(0, false).unwrap();
    assert!(reachable(topo.client(), topo.server(), p0));

    // Link loss is visible at the client and reversible (IPv6 path: addresses survive).
    topo.set_link(1, false).unwrap();
    let shown = topo.client().ip(["link", "show", "p1"]).unwrap();
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("NO-CARRIER"),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    assert!(!reachable(topo.client(), topo.server(), p1));
    topo.set_link(1, true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !reachable(topo.client(), topo.server(), p1) {
        assert!(Instant::now() < deadline, "path 1 did not come back");
    }

    // Unshaping and reshaping at run time.
    let path0 = topo.path(0).unwrap();
    path0.set_rate(None, 150_000).unwrap();
    path0.set_rate(None, 150_000).unwrap();
    let dst = SocketAddr::new(topo.path_server_addr(0).unwrap(), 5004);
    let fast = transfer(topo.client(), topo.server(), dst, 2_000_000);
    eprintln!("path 0 unshaped: {fast:.1} Mbit/s");
    assert!(fast > 30.0, "{fast:.1} Mbit/s");
    path0.set_rate(Some(20.0), 150_000).unwrap();

    drop(topo);
    let left = netns::list().unwrap();
    for n in &names {
        assert!(!left.contains(n), "{n} left behind");
    }
}

#[test]
fn udp_blast_reaches_a_udp_sink() {
    if !root() {
        return;
    }
    let topo = Topology::build(&TopologySpec::new(PREFIX, vec![PathSpec::v4()])).unwrap();
    let dst = SocketAddr::new(topo.path_server_addr(0).unwrap(), 6001);
    let sink = UdpSink::start(topo.server(), dst).unwrap();
    assert_eq!(sink.local_addr(), dst);
    let sent = udp_blast(topo.client(), dst, 1400, Duration::from_millis(300)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let got = sink.stop().unwrap();
    eprintln!(
        "UDP: offered {:.0} Mbit/s ({} datagrams, {} errors), received {} datagrams, {:.0} Mbit/s",
        sent.offered_mbit(),
        sent.datagrams,
        sent.errors,
        got.datagrams,
        got.goodput_mbit()
    );
    assert!(got.datagrams > 0);
    assert!(got.datagrams <= sent.datagrams);
    assert_eq!(got.bytes, got.datagrams * 1400);
    assert!(udp_blast(topo.client(), dst, 4, Duration::from_millis(1)).is_err());
}
