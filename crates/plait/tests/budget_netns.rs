//! A metered path's byte budget spent by real daemons (docs/tunnel-config.md#budget), as
//! root in network namespaces: the `plait server` and `plait client` binaries over two
//! emulated paths, path 0 a 10 Mbit/s primary and path 1 a 40 Mbit/s metered path with a
//! 2 MB budget, its count kept in a temporary `state_dir`.
//!
//! A bulk download through the tunnel offers more than the primary carries, so the excess
//! spills onto the metered path (docs/protocol.md#overflow) until its budget is spent; the
//! test checks that the count passes the budget (status and `plait status`), that the
//! client logs it once, that the metered path then carries (almost) nothing during a second
//! download while the primary carries it intact, and that a restarted client goes on from
//! the saved count and keeps the path held back. It checks behaviour, never speed.
//!
//! Invariants: its own namespace prefix (`pbu`), status sockets, keys, configs and state in
//! a temporary directory; every daemon is owned by a guard that kills it on drop (and
//! prints its log if the test fails), the namespaces by the topology; nothing is left
//! behind. Without root it prints the skip message and passes.

mod netns_support;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use netns_support::daemon::Daemon;
use netns_support::write_key;
use plait_testbed::tcp_send;
use plait_testbed::traffic::{hex, payload_sha256};
use plait_testbed::{Family, PathSpec, TcpSink, Topology, TopologySpec};
use plait_tunnel::keys::Key;

const PREFIX: &str = "pbu";
const PORT: u16 = 7744;
/// The metered path's budget, bytes ("2 MB").
const BUDGET: u64 = 2_000_000;
/// Each download, bytes: four times the budget, so most of the first one comes after it
/// is spent.
const DOWNLOAD: u64 = 8_000_000;
/// The warning the client logs when the budget is spent (docs/tunnel-config.md#budget).
const SPENT_LOG: &str = "the path's byte budget is spent: it is a backup until the next period";

/// The configs: the server's, and the client's with path 1 metered and its budget.
fn write_configs(topo: &Topology, dir: &Path, tun: &str) -> (PathBuf, PathBuf) {
    let (server_key, client_key) = (Key::generate().expect("key"), Key::generate().expect("key"));
    let site = topo.site0();
    let server = format!(
        "private_key_file = \"{}\"\nlisten = [\"0.0.0.0:{PORT}\"]\n\n[tun]\nname = \"{tun}\"\n\
         addresses = [\"10.77.0.1/24\"]\n\n[control]\nstatus_socket = \"{}\"\n\n[[client]]\n\
         name = \"site0\"\npublic_key = \"{}\"\nallowed_ips = [\"10.77.0.2/32\", \"{}\"]\n",
        write_key(dir, "server", &server_key),
        dir.join("server.sock").display(),
        client_key.public().to_base64(),
        site.lan_net(Family::V4),
    );
    let mut client = format!(
        "private_key_file = \"{}\"\nserver_public_key = \"{}\"\nroute = [\"{}\"]\n\
         state_dir = \"{}\"\n\n[tun]\nname = \"{tun}\"\naddresses = [\"10.77.0.2/24\"]\n\n\
         [control]\nstatus_socket = \"{}\"\n\n",
        write_key(dir, "client", &client_key),
        server_key.public().to_base64(),
        topo.remote_net(Family::V4),
        dir.join("state").display(),
        dir.join("client.sock").display(),
    );
    for path in site.paths() {
        let server = SocketAddr::new(path.server_addr(), PORT);
        let _ = writeln!(
            client,
            "[[path]]\nname = \"p{}\"\nserver = \"{server}\"",
            path.index()
        );
        if path.index() == 1 {
            let _ = writeln!(client, "cost = \"metered\"\nbudget = \"2 MB\"");
        }
        client.push('\n');
    }
    let (s, c) = (dir.join("server.toml"), dir.join("client.toml"));
    std::fs::write(&s, server).expect("server config");
    std::fs::write(&c, client).expect("client config");
    (s, c)
}

/// Starts the client and waits for its session with both paths, and for the server's.
fn start_client(
    topo: &Topology,
    config: &Path,
    label: &str,
    tun: &str,
    server: &mut Daemon,
) -> Daemon {
    let socket = config.with_file_name("client.sock");
    let mut client =
        Daemon::start(topo.site0().client(), "client", label, config, tun).with_socket(socket);
    client.wait_within(
        "an established session on both paths",
        Duration::from_secs(10),
        |s| {
            s.sessions.len() == 1
                && s.sessions[0].established
                && s.sessions[0].paths.len() == 2
                && s.sessions[0].paths[0].state == "active"
        },
    );
    server.wait_within("the client's session", Duration::from_secs(10), |s| {
        s.sessions.len() == 1 && s.sessions[0].established
    });
    client
}

/// What the server has sent on each path, bytes of datagrams.
fn server_tx(server: &Daemon) -> [u64; 2] {
    let mut tx = [0; 2];
    for p in &server.status().expect("server status").sessions[0].paths {
        if let Some(slot) = tx.get_mut(usize::from(p.id)) {
            *slot = p.tx_bytes;
        }
    }
    tx
}

/// The client's count of the metered path's budget: (used bytes, spent).
fn budget(client: &Daemon) -> (u64, bool) {
    let s = client.status().expect("client status");
    let b = s.budgets.first().expect("a budget in the status");
    assert_eq!((b.path.as_str(), b.budget, b.saved), ("p1", BUDGET, true));
    (b.used, b.spent)
}

/// One download from the remote host to the LAN host behind the client, checked intact.
fn download(topo: &Topology, seed: u64, what: &str) {
    let dst = SocketAddr::new(topo.site0().lan_host_addr(Family::V4), 5000);
    let sink = TcpSink::start(topo.lan_host(), dst).expect("sink");
    let sent =
        tcp_send(topo.remote_host(), dst, DOWNLOAD, seed).unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = sink
        .wait(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got.bytes, DOWNLOAD, "{what}: bytes");
    let digest = got.sha256.map(|d| hex(&d));
    assert_eq!(
        digest,
        Some(hex(&payload_sha256(DOWNLOAD, seed))),
        "{what}: SHA-256"
    );
    eprintln!(
        "{what}: {DOWNLOAD} bytes intact in {:.2} s ({:.1} Mbit/s)",
        sent.duration.as_secs_f64(),
        sent.goodput_mbit()
    );
}

/// Bytes the server sent on each path, and the budget's count, during `f`.
fn during(server: &Daemon, client: &Daemon, f: impl FnOnce()) -> ([u64; 2], u64) {
    let (tx0, (used0, _)) = (server_tx(server), budget(client));
    f();
    let (tx1, (used1, _)) = (server_tx(server), budget(client));
    ([tx1[0] - tx0[0], tx1[1] - tx0[1]], used1 - used0)
}

#[test]
fn a_metered_paths_budget_is_spent_then_it_stands_by_across_a_restart() {
    let _serial = netns_support::serial();
    if !netns_support::root(PREFIX) {
        return;
    }
    let spec = TopologySpec::new(
        PREFIX,
        vec![
            PathSpec::v4().rate(10.0).rtt(Duration::from_millis(20)),
            PathSpec::v4().rate(40.0).rtt(Duration::from_millis(20)),
        ],
    );
    let topo = Topology::build(&spec).expect("build topology");
    let dir = tempfile::tempdir().expect("tempdir");
    let tun = format!("pbu{}", std::process::id() % 1_000_000);
    let (server_cfg, client_cfg) = write_configs(&topo, dir.path(), &tun);
    let mut server = Daemon::start(topo.server(), "server", "server", &server_cfg, &tun);
    server.wait_for("its status socket", |_| true);
    let mut client = start_client(&topo, &client_cfg, "client", &tun, &mut server);

    // 1. A bulk download spills onto the metered path until the budget is spent. How much
    // one download spills depends on the machine (1.5 to 2.1 MB of the 8 MB seen: a busy
    // machine slows the flow and the primary carries more of it), so more downloads follow
    // until the budget is spent, at most three.
    let (sent, counted) = during(&server, &client, || download(&topo, 71, "download 1"));
    eprintln!(
        "download 1: the server sent {} bytes on the primary, {} on the metered path; \
         the budget counted {counted}",
        sent[0], sent[1]
    );
    assert!(
        sent[1] >= BUDGET / 2,
        "the metered path took little of the excess: {sent:?}"
    );
    for seed in 74..77 {
        let (used, spent) = budget(&client);
        if spent || used >= BUDGET {
            break;
        }
        let what = format!("download 1, again (seed {seed})");
        let (more, counted) = during(&server, &client, || download(&topo, seed, &what));
        eprintln!(
            "{what}: the server sent {} bytes on the primary, {} on the metered path; \
             the budget counted {counted}",
            more[0], more[1]
        );
    }
    // The count reaches the budget within a tick (250 ms) of the bytes.
    let st = client.wait_within("the budget spent", Duration::from_secs(2), |s| {
        s.budgets.first().is_some_and(|b| b.spent)
    });
    let used = st.budgets[0].used;
    assert!(used >= BUDGET, "spent at {used} bytes of {BUDGET}");
    // The client told the server (a binding update), which holds the path back too.
    server.wait_within(
        "path 1 registered metered and a backup",
        Duration::from_secs(2),
        |s| {
            let paths = s.sessions.first().and_then(|x| x.registration.as_ref());
            paths.is_some_and(|r| {
                r.paths
                    .iter()
                    .any(|p| p.id == 1 && p.backup && p.cost == "metered")
            })
        },
    );
    let (ok, out, err) = netns_support::plait(
        &["status", "--socket", client.socket.to_str().expect("utf-8")],
        Duration::from_secs(10),
    );
    assert!(ok, "plait status failed: {err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("budget p1:"))
        .unwrap_or_default();
    eprintln!("plait status: {line}");
    assert!(line.ends_with("spent: a backup until then"), "{out}");

    // 2. Spent: the primary carries the next download, the metered path (almost) nothing.
    let (sent2, counted2) = during(&server, &client, || download(&topo, 72, "download 2"));
    eprintln!(
        "download 2: the server sent {} bytes on the primary, {} on the metered path; \
         the budget counted {counted2}",
        sent2[0], sent2[1]
    );
    assert!(
        sent2[0] >= DOWNLOAD,
        "the primary carried the download: {sent2:?}"
    );
    assert!(
        sent2[1] * 100 < sent2[0] && counted2 * 100 < sent2[0],
        "the spent path still carried data: sent {sent2:?}, counted {counted2}"
    );
    let spent_logs = client.log_text().matches(SPENT_LOG).count();
    assert_eq!(spent_logs, 1, "the client logs the spent budget once");

    // 3. A clean restart keeps the count (the state file) and the path held back.
    let (before, _) = budget(&client);
    client.stop();
    let state = dir.path().join("state").join("budget-p1");
    assert!(
        std::fs::metadata(&state).is_ok_and(|m| m.len() > 0),
        "no state file at {}",
        state.display()
    );
    let client = start_client(&topo, &client_cfg, "client-restarted", &tun, &mut server);
    let (after, spent) = budget(&client);
    eprintln!("count at stop (last status) {before} bytes, after the restart {after}");
    assert!(
        spent && after >= before,
        "after the restart: used {after}, spent {spent}"
    );
    assert!(
        client.log_text().contains("going on from the saved count"),
        "the restarted client did not resume its count"
    );
    let (sent3, counted3) = during(&server, &client, || download(&topo, 73, "download 3"));
    eprintln!(
        "download 3 (restarted client): the server sent {} bytes on the primary, {} on the \
         metered path; the budget counted {counted3}",
        sent3[0], sent3[1]
    );
    assert!(
        sent3[1] * 100 < sent3[0] && counted3 * 100 < sent3[0],
        "after the restart the spent path carried data: sent {sent3:?}, counted {counted3}"
    );
    assert_eq!(client.log_text().matches(SPENT_LOG).count(), 0);

    client.stop();
    server.stop();
    drop(topo);
    netns_support::assert_nothing_left(PREFIX);
}
