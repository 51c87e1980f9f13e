//! Issue 5's end-to-end tests: the real `plait server` and `plait client` binaries in
//! network namespaces built by `plait-testbed`, carrying TCP between a host behind the
//! client and a host behind the server.
//!
//! Each test builds its own topology (`ptn…` namespaces), writes keys and configs into a
//! temporary directory (status sockets there too, never /run/plait) and uses its own TUN
//! name, so tests can run in parallel with each other and with a real daemon. The daemons
//! are stopped with SIGTERM at the end and must exit 0 within 5 s, leaving no TUN device,
//! route or policy rule behind (the clean-shutdown check). The tunnel harness (what a test's
//! tunnel looks like, `TunnelSpec`, and starting it, `Tunnel`) is in
//! `netns_support/tunnel.rs`.
//!
//! Invariants: every resource a test creates is owned by a guard (daemon → `ChildGuard`,
//! namespaces → `Topology`, files → `TempDir`), so a failing test leaves nothing behind; a
//! failing test prints the daemons' logs. Needs root; otherwise each test prints
//! "skipped: needs root (network namespaces)" and passes.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use plait_testbed::traffic::{SinkReport, hex, payload_block, payload_sha256};
use plait_testbed::{
    Family, Namespace, PathSpec, RttProbe, SendLimit, SendOptions, SendReport, TcpSink,
    TopologySpec, UdpEcho, tcp_send, tcp_send_opts,
};
use plait_tunnel::control::{PathStatus, StatusSnapshot};
use plait_tunnel::crypto::handshake::{Initiation, InitiationPayload};
use plait_tunnel::keys::Key;
use plait_tunnel::message::INITIATION_LEN;

mod netns_support;

use netns_support::daemon::{Daemon, FWMARK, TABLE};
use netns_support::tunnel::{
    PORT, SOCKS5, SOCKS5_PASSWORD, SOCKS5_USER, Tunnel, TunnelSpec, WIRELESS, tun_name,
};

const PREFIX: &str = "ptn";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    netns_support::serial()
}

fn root() -> bool {
    netns_support::root(PREFIX)
}

/// Checks a transfer arrived intact and prints its numbers.
fn check_transfer(what: &str, sent: &SendReport, got: &SinkReport, seed: u64) {
    assert_eq!(got.bytes, sent.bytes, "{what}: byte count");
    let (Some(got_sha), Some(sent_sha)) = (got.sha256, sent.sha256) else {
        panic!("{what}: digests were not taken");
    };
    assert_eq!(hex(&got_sha), hex(&sent_sha), "{what}: SHA-256 differs");
    assert_eq!(sent_sha, payload_sha256(sent.bytes, seed), "{what}");
    let peak = got.samples.iter().map(|s| s.mbit()).fold(0.0, f64::max);
    eprintln!(
        "{what}: {} bytes intact (sha256 {}…) in {:.2} s: goodput {:.1} Mbit/s \
         (receiver {:.1}, peak 100 ms sample {:.1}); longest gap between reads {:?}, \
         longest run of empty 100 ms samples {:?}",
        got.bytes,
        &hex(&got_sha)[..16],
        sent.duration.as_secs_f64(),
        sent.goodput_mbit(),
        got.goodput_mbit(),
        peak,
        got.longest_gap,
        got.longest_empty_run()
    );
    let samples: Vec<String> = got
        .samples
        .iter()
        .map(|s| format!("{:.0}", s.mbit()))
        .collect();
    eprintln!("  goodput per 100 ms (Mbit/s): {}", samples.join(" "));
}

/// One TCP transfer from `from` to a sink on `to` in `to_ns`.
fn transfer(
    from: &Namespace,
    to_ns: &Namespace,
    to: SocketAddr,
    bytes: u64,
    seed: u64,
    what: &str,
) -> SinkReport {
    let sink = TcpSink::start(to_ns, to).expect("sink");
    let sent = tcp_send(from, to, bytes, seed).unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = sink
        .wait(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    check_transfer(what, &sent, &got, seed);
    got
}

/// Each path's share of the client's transmitted datagrams; asserts each is at least `min`.
fn assert_path_shares(status: &StatusSnapshot, min: f64) {
    eprintln!(
        "  client receive side: lost {:?}, late {}",
        status.sessions[0].lost, status.sessions[0].late
    );
    let paths = &status.sessions[0].paths;
    let total: u64 = paths.iter().map(|p| p.tx_packets).sum();
    for p in paths {
        let share = p.tx_packets as f64 / total.max(1) as f64;
        eprintln!(
            "  path {} ({}): state {}, tx {} datagrams ({:.1} %), rx {}, srtt {:?} ms, rate {:?} Mbit/s, loss {:.3}",
            p.id,
            p.name,
            p.state,
            p.tx_packets,
            share * 100.0,
            p.rx_packets,
            p.srtt_ms,
            p.rate_mbit,
            p.loss
        );
    }
    for p in paths {
        let share = p.tx_packets as f64 / total.max(1) as f64;
        assert!(
            share >= min,
            "path {} carried only {:.1} % of {total} datagrams",
            p.id,
            share * 100.0
        );
    }
}

fn two_paths_at_40() -> TopologySpec {
    TopologySpec::new(
        PREFIX,
        vec![PathSpec::v4().rate(40.0), PathSpec::v4().rate(40.0)],
    )
}

/// (a) Two paths shaped to 40 Mbit/s each (one alone cannot carry the transfer at full
/// speed); 50 MB of TCP from the lan host to the remote host arrive byte-identical, and each
/// path carried at least 10 % of the client's datagrams.
#[test]
fn tcp_50mb_arrives_intact_and_uses_both_paths() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec::new('a', two_paths_at_40()));
    let dst = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5001);
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        dst,
        50_000_000,
        1,
        "50 MB over 2 × 40 Mbit/s",
    );
    let status = t.clients[0].status().expect("client status");
    if let Ok(server) = t.server().status() {
        for s in &server.sessions {
            eprintln!("  server receive side: lost {:?}, late {}", s.lost, s.late);
        }
    }
    assert_path_shares(&status, 0.10);
    t.shutdown();
}

/// (b) As (a), but a path is silently blackholed (nftables drop on its router, both
/// directions) 1.5 s into the transfer; the transfer still completes byte-identical. Prints
/// goodput before and after, and the longest gap between reads.
#[test]
fn transfer_survives_a_path_blackholed_midway() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec::new('b', two_paths_at_40()));
    // A short transfer first, so the blackhole below hits traffic in full flow rather than
    // the reorder buffer's start-up stall (see `tcp_50mb_arrives_intact_and_uses_both_paths`).
    let warm = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5000);
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        warm,
        1_000_000,
        20,
        "warm-up, 1 MB",
    );

    let dst = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5001);
    let sink = TcpSink::start(t.topo.remote_host(), dst).expect("sink");
    let seed = 2;
    let blackhole_at = Duration::from_millis(1500);
    let (sent, before) = std::thread::scope(|s| {
        let sender = s.spawn(|| tcp_send(t.topo.lan_host(), dst, 50_000_000, seed));
        std::thread::sleep(blackhole_at);
        let before = t.clients[0].status().expect("client status");
        // Path 0, unless the scheduler has left it (nearly) idle: then the busier path, so
        // the blackhole always hits traffic.
        let tx: Vec<u64> = before.sessions[0]
            .paths
            .iter()
            .map(|p| p.tx_packets)
            .collect();
        let victim = if tx[0] * 4 >= tx[1] { 0 } else { 1 };
        t.topo.blackhole(victim, true).expect("blackhole");
        (sender.join().expect("sender thread"), (before, victim))
    });
    let (before, victim) = before;
    eprintln!("blackholed path {victim} at 1.5 s");
    let sent = sent.expect("transfer with path 0 blackholed");
    let got = sink.wait(Duration::from_secs(30)).expect("sink");
    check_transfer("50 MB, a path blackholed at 1.5 s", &sent, &got, seed);
    eprintln!("client's paths just before the blackhole:");
    assert_path_shares(&before, 0.0);
    // Samples are counted from the accept, within a millisecond of the sender's start.
    let bh = usize::try_from(blackhole_at.as_millis() / 100).unwrap_or(usize::MAX);
    let mean = |xs: &[plait_testbed::GoodputSample]| {
        xs.iter().map(|x| x.mbit()).sum::<f64>() / xs.len().max(1) as f64
    };
    let pre = &got.samples[..bh.min(got.samples.len())];
    let post = &got.samples[bh.min(got.samples.len())..];
    let window = &post[..post.len().min(20)];
    let lowest = window
        .iter()
        .map(|x| x.mbit())
        .fold(f64::INFINITY, f64::min);
    eprintln!(
        "goodput before the blackhole {:.1} Mbit/s, after {:.1} Mbit/s; lowest 100 ms sample \
         in the 2 s after it {lowest:.1} Mbit/s; longest gap between reads {:?}",
        mean(pre),
        mean(post),
        got.longest_gap
    );
    let status = t.clients[0].status().expect("client status");
    eprintln!("client's paths at the end:");
    assert_path_shares(&status, 0.0);
    assert_ne!(
        status.sessions[0].paths[victim].state, "active",
        "path {victim} is blackholed but still active"
    );
    t.shutdown();
}

/// (c) A well-formed handshake initiation made with a key the server does not know, and 100
/// datagrams of garbage, get no reply; the server counts the initiation in
/// `dropped.unknown_key`.
#[test]
fn unknown_client_key_gets_no_reply() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec {
        clients: false,
        ..TunnelSpec::new('c', TopologySpec::new(PREFIX, vec![PathSpec::v4()]))
    });
    let server_addr = SocketAddr::new(t.topo.path_server_addr(0).expect("path 0"), PORT);
    let server_public = t.server_key.public();
    let replies = t
        .topo
        .client()
        .run_in(move || {
            let sock = UdpSocket::bind("0.0.0.0:0").expect("bind");
            sock.connect(server_addr).expect("connect");
            sock.set_read_timeout(Some(Duration::from_secs(1)))
                .expect("timeout");
            let mut replies = Vec::new();
            let mut recv = |what: &str| {
                let mut buf = [0u8; 2048];
                if let Ok(n) = sock.recv(&mut buf) {
                    replies.push(format!("{what}: {n} bytes back"));
                }
            };

            // A well-formed initiation from a key the server does not know.
            let unknown = Key::generate().expect("key");
            let now_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock")
                .as_nanos() as u64;
            let mut buf = [0u8; INITIATION_LEN];
            Initiation::start(
                &unknown,
                &server_public,
                None,
                1,
                InitiationPayload {
                    session_id: 1,
                    timestamp: now_ns,
                },
                &mut buf[..INITIATION_LEN],
            )
            .expect("initiation");
            sock.send(&buf[..INITIATION_LEN]).expect("send initiation");
            recv("initiation from an unknown key");

            // 100 datagrams of garbage, 1 to 1400 bytes.
            let mut garbage = vec![0u8; 1400];
            for i in 0..100u64 {
                payload_block(0xbad, i, &mut garbage);
                let len = 1 + (garbage[0] as usize * 256 + garbage[1] as usize) % 1400;
                // Some with a valid type byte and the initiation's size.
                if i % 10 == 0 {
                    garbage[0] = 1;
                    sock.send(&garbage[..INITIATION_LEN]).expect("send");
                } else {
                    sock.send(&garbage[..len]).expect("send");
                }
            }
            recv("100 garbage datagrams");
            replies
        })
        .expect("run in client namespace");
    assert!(replies.is_empty(), "the server answered: {replies:?}");

    let server = t.server();
    let deadline = Instant::now() + Duration::from_secs(3);
    let status = loop {
        let s = server.status().expect("server status");
        if s.dropped.unknown_key >= 1 || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("server drop counters: {:?}", status.dropped);
    assert!(status.dropped.unknown_key >= 1, "{:?}", status.dropped);
    assert!(status.sessions.is_empty(), "{:?}", status.sessions);
    t.shutdown();
}

/// Sends `messages` in turn from `ns` to `server` at `rate` a second for `duration`, from
/// 64 sockets (64 source ports), paced 10 ms at a time; a full socket buffer drops a
/// message, as a real flood's would be. Returns how many were sent.
fn flood_initiations(
    ns: &Namespace,
    server: SocketAddr,
    rate: u64,
    duration: Duration,
    messages: &[&[u8]],
) -> u64 {
    flood_initiations_until(
        ns,
        server,
        rate,
        duration,
        &std::sync::atomic::AtomicBool::new(false),
        messages,
    )
}

/// [`flood_initiations`], which also ends early once `stop` is set. At most `rate ×
/// duration` messages, and it ends within a few milliseconds of `duration` or `stop` even
/// when the sender cannot keep up with `rate` (it then sends as fast as it can).
fn flood_initiations_until(
    ns: &Namespace,
    server: SocketAddr,
    rate: u64,
    duration: Duration,
    stop: &std::sync::atomic::AtomicBool,
    messages: &[&[u8]],
) -> u64 {
    use std::sync::atomic::Ordering;
    // How many are due after `t` (u128: no overflow at any rate), capped at the total.
    let due_after = |t: Duration| {
        let due = u128::from(rate) * t.as_micros() / 1_000_000;
        u64::try_from(due).unwrap_or(u64::MAX)
    };
    let total = due_after(duration);
    ns.run_in(move || {
        let socks: Vec<UdpSocket> = (0..64)
            .map(|_| {
                let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
                s.connect(server).expect("connect");
                s.set_nonblocking(true).expect("nonblocking");
                s
            })
            .collect();
        let start = Instant::now();
        let over = || start.elapsed() >= duration || stop.load(Ordering::Relaxed);
        let mut sent = 0u64;
        'flood: while !over() {
            let due = due_after(start.elapsed()).min(total);
            while sent < due {
                let i = sent as usize;
                let _ = socks[i % socks.len()].send(messages[i % messages.len()]);
                sent += 1;
                // A sender behind its rate never catches up: it looks at the clock and
                // the stop flag now and then instead.
                if sent.is_multiple_of(1024) && over() {
                    break 'flood;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        sent
    })
    .expect("run in the flooding namespace")
}

/// (k) A bounded flood of junk handshake initiations (docs/protocol.md#dos): 20,000 a
/// second (5,000 with a debug build of the daemon) for 5 s from the client's namespace
/// (half with a valid mac1 made with the server's public key, half with a wrong one; from
/// one address, random ports), while the real client restarts: it connects within 10 s
/// (through a cookie reply and mac2), and the server counts the junk as `bad_mac` and
/// `cookie_replied`.
#[test]
fn client_connects_during_a_handshake_flood() {
    use plait_tunnel::crypto::cookie::{Mac1Key, write_initiation_mac1};
    use plait_tunnel::message::{INITIATION_HEADER_LEN, write_initiation_header};

    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec::new(
        'k',
        TopologySpec::new(PREFIX, vec![PathSpec::v4()]),
    ));
    let client_ns = t.topo.clients()[0].client();
    let config = t.dir.path().join("client0.toml");
    let tun = tun_name('k');
    let old = t.clients.pop().expect("client 0");
    old.shutdown(client_ns);

    let server_addr = SocketAddr::new(t.topo.path_server_addr(0).expect("path 0"), PORT);
    let mac1 = Mac1Key::new(&t.server_key.public());
    let mut valid = [[0u8; INITIATION_LEN]; 16];
    let mut invalid = valid;
    for (i, (v, bad)) in valid.iter_mut().zip(&mut invalid).enumerate() {
        payload_block(0xf100d, i as u64, v);
        write_initiation_header(
            v.first_chunk_mut::<INITIATION_HEADER_LEN>()
                .expect("header"),
            i as u32,
        );
        *bad = *v;
        write_initiation_mac1(v, &mac1);
    }
    // A debug build of the daemon (what `cargo test` runs) reads fewer datagrams a second
    // than a release build: the flood is sized so it still saturates the handshake path
    // (cookie replies) without starving the socket reads the test is not about.
    const RATE: u64 = if cfg!(debug_assertions) {
        5_000
    } else {
        20_000
    };
    const FLOOD: Duration = Duration::from_secs(5);
    let (sent, connected_after) = std::thread::scope(|scope| {
        let flood = scope.spawn(|| {
            let junk: Vec<&[u8]> = valid
                .iter()
                .zip(&invalid)
                .flat_map(|(v, bad)| [&v[..], &bad[..]])
                .collect();
            flood_initiations(client_ns, server_addr, RATE, FLOOD, &junk)
        });
        // The flood is on; the client starts.
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let mut client = Daemon::start(client_ns, "client", "client0", &config, &tun);
        client.wait_for("established session during the flood", |s| {
            s.sessions.len() == 1 && s.sessions[0].established
        });
        let connected_after = started.elapsed();
        t.clients.push(client);
        (flood.join().expect("flood thread"), connected_after)
    });
    let status = t.server().status().expect("server status");
    eprintln!(
        "flood: {sent} junk initiations in {FLOOD:?}; the client connected {connected_after:?} \
         after it started; server drops: {:?}",
        status.dropped
    );
    assert!(sent >= RATE * 4, "the flood ran: {sent}");
    assert!(status.dropped.bad_mac > 0, "{:?}", status.dropped);
    assert!(status.dropped.cookie_replied > 0, "{:?}", status.dropped);
    // The server has the session too.
    t.server()
        .status()
        .map(|s| assert!(s.sessions.iter().any(|x| x.established), "{s:?}"))
        .expect("server status");
    t.shutdown();
}

/// Junk initiations as a flooder who knows the server's public key makes them: 16 with a
/// valid mac1 (under load, each earns a cookie reply) and the same 16 with a wrong mac1
/// (dropped after one BLAKE2s), interleaved. None decrypts: their Noise part is random.
fn junk_initiations(server: &Key) -> Vec<[u8; INITIATION_LEN]> {
    use plait_tunnel::crypto::cookie::{Mac1Key, write_initiation_mac1};
    use plait_tunnel::message::{INITIATION_HEADER_LEN, write_initiation_header};

    let mac1 = Mac1Key::new(&server.public());
    let mut junk = Vec::with_capacity(32);
    for i in 0..16u64 {
        let mut m = [0u8; INITIATION_LEN];
        payload_block(0xf100d, i, &mut m);
        write_initiation_header(
            m.first_chunk_mut::<INITIATION_HEADER_LEN>()
                .expect("header"),
            i as u32,
        );
        let bad = m;
        write_initiation_mac1(&mut m, &mac1);
        junk.push(m);
        junk.push(bad);
    }
    junk
}

/// Stops client 0, appends `extra` to its config file and starts it again; returns once it
/// has an established session (bounded by `netns_support::daemon::ESTABLISH_TIMEOUT`).
fn restart_client0_with(t: &mut Tunnel, tag: char, extra: &str) {
    let client_ns = t.topo.clients()[0].client();
    let config = t.dir.path().join("client0.toml");
    let old = t.clients.remove(0);
    old.shutdown(client_ns);
    let mut text = std::fs::read_to_string(&config).expect("client config");
    text.push_str(extra);
    std::fs::write(&config, text).expect("client config");
    let mut client = Daemon::start(client_ns, "client", "client0", &config, &tun_name(tag));
    client.wait_for("established session", |s| {
        s.sessions.len() == 1 && s.sessions[0].established
    });
    t.clients.insert(0, client);
}

/// The namespaces of this process still present (names carry the owner's pid,
/// `plait_testbed::netns`).
fn own_namespaces() -> Vec<String> {
    let mine = format!("{PREFIX}{}-", std::process::id());
    plait_testbed::netns::list()
        .expect("ip netns list")
        .into_iter()
        .filter(|n| n.starts_with(&mine))
        .collect()
}

/// The longest time between two consecutive answered probes (or from the first probe sent
/// to the first answer), i.e. the longest stretch in which nothing made the round trip.
fn longest_probe_gap(report: &plait_testbed::ProbeReport, started: Instant) -> Duration {
    let mut last = started;
    let mut gap = Duration::ZERO;
    for s in &report.samples {
        gap = gap.max(s.sent.saturating_duration_since(last));
        last = s.sent;
    }
    gap
}

/// (r) Issue 16: an established session keeps its traffic across rekeys while a third
/// host floods the server with junk initiations (docs/protocol.md#dos,
/// docs/protocol.md#rekeying). The client's keys are replaced every 10 s
/// (`[test_only] rekey_after_s`, docs/tunnel-config.md#test_only); a flooder attached to
/// path 0's router (its own address and /24, not the client's) sends 5,000 junk
/// initiations a second (20,000 with a release build), half with a valid mac1, so the
/// server stays under load and answers them with cookie replies. For 32 s a TCP transfer
/// runs from the lan host to the remote host through the tunnel and a UDP probe goes round
/// the tunnel every 10 ms. Asserts: at least two rekeys completed (client and server
/// status), the engine session is the one it was (no fresh session), the transfer arrived
/// intact, at least 95 % of the probes came back and none of the stretches without an
/// answer (nor of the transfer's) lasted over [`REKEY_FLOOD_GAP_BOUND`], the rekeys were
/// admitted as known (docs/protocol.md#known-first: `known_admitted`), and the server
/// stayed under load (no junk reached Diffie-Hellman). Then, the flood still running, the
/// client restarts: it connects within 10 s. Everything the test made is gone at the end.
#[test]
fn session_keeps_its_traffic_across_rekeys_under_a_remote_flood() {
    if !root() {
        return;
    }
    let _serial = serial();
    const REKEY: Duration = Duration::from_secs(10);
    // Three rekeys fall due in the window; two must complete.
    const WINDOW: Duration = Duration::from_secs(36);
    // A debug build of the server reads about 3,500 junk initiations a second when idle
    // and far fewer beside the transfer; beyond what it reads, the flood only overflows
    // the handshake socket (what the release-build measurement
    // `new_client_connect_time_by_flood_rate` is about). 2,000 a second, 1,000 of them
    // with a valid mac1, still keeps the server under load (its handshake budget is
    // 200 a second) and every initiation without mac2 answered by a cookie reply.
    const RATE: u64 = if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    };
    // The flood's hard bound: 1 s before the window, the window, the transfer's end, the
    // restart (10 s at most) and slack; it is stopped as soon as the restarted client is
    // up.
    const FLOOD_MAX: Duration = Duration::from_secs(55);
    let mut t = Tunnel::start(TunnelSpec::new(
        'r',
        TopologySpec::new(PREFIX, vec![PathSpec::v4()]),
    ));
    restart_client0_with(
        &mut t,
        'r',
        &format!("\n[test_only]\nrekey_after_s = {}\n", REKEY.as_secs()),
    );
    let flooder = t.topo.attach_host(0).expect("flooder on path 0's router");
    let flooder_ns_name = flooder.namespace().name().to_owned();
    let path0 = t.topo.path(0).expect("path 0");
    assert_ne!(flooder.addr(), path0.client_addr());
    let server_addr = SocketAddr::new(path0.server_addr(), PORT);
    let junk = junk_initiations(&t.server_key);
    let junk: Vec<&[u8]> = junk.iter().map(|m| &m[..]).collect();

    let echo_at = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5001);
    let sink_at = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5000);
    let _echo = UdpEcho::start(t.topo.remote_host(), echo_at).expect("UDP echo");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (sent, probes, probing_from, tcp_sent, tcp_got, before, after, connected_after) =
        std::thread::scope(|scope| {
            let flood = scope.spawn(|| {
                flood_initiations_until(
                    flooder.namespace(),
                    server_addr,
                    RATE,
                    FLOOD_MAX,
                    &stop,
                    &junk,
                )
            });
            std::thread::sleep(Duration::from_secs(1));
            let before = (
                t.clients[0].status().expect("client status"),
                t.server().status().expect("server status"),
            );
            let sink = TcpSink::start(t.topo.remote_host(), sink_at).expect("sink");
            let probing_from = Instant::now();
            let probe = RttProbe::start(t.topo.lan_host(), echo_at, Duration::from_millis(10))
                .expect("probe");
            let tcp_sent = tcp_send_opts(
                t.topo.lan_host(),
                sink_at,
                71,
                SendOptions {
                    limit: Some(SendLimit::For(WINDOW)),
                    ..SendOptions::default()
                },
            )
            .expect("TCP transfer through the tunnel");
            let tcp_got = sink.wait(Duration::from_secs(30)).expect("TCP sink");
            let probes = probe.stop().expect("probe");
            let after = (
                t.clients[0].status().expect("client status"),
                t.server().status().expect("server status"),
            );
            // The flood goes on: a client that restarts now connects within 10 s.
            let client_ns = t.topo.clients()[0].client();
            let config = t.dir.path().join("client0.toml");
            let old = t.clients.remove(0);
            old.shutdown(client_ns);
            let restarted = Instant::now();
            let mut client = Daemon::start(client_ns, "client", "client0", &config, &tun_name('r'));
            client.wait_for("established session during the flood", |s| {
                s.sessions.len() == 1 && s.sessions[0].established
            });
            let connected_after = restarted.elapsed();
            t.clients.insert(0, client);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let sent = flood.join().expect("flood thread");
            (
                sent,
                probes,
                probing_from,
                tcp_sent,
                tcp_got,
                before,
                after,
                connected_after,
            )
        });

    check_transfer("TCP across the rekeys", &tcp_sent, &tcp_got, 71);
    let (c0, s0) = (&before.0.sessions[0], &before.1.sessions[0]);
    let (c1, s1) = (&after.0.sessions[0], &after.1.sessions[0]);
    let rekeys = c1.handshakes - c0.handshakes;
    let answered = probes.samples.len() as u64;
    let gap = longest_probe_gap(&probes, probing_from);
    let mut rtts: Vec<Duration> = probes.samples.iter().map(|s| s.rtt).collect();
    rtts.sort_unstable();
    eprintln!(
        "flood: {sent} junk initiations from {} ({RATE}/s target); server drops before {:?}\n  after {:?}",
        flooder.addr(),
        before.1.dropped,
        after.1.dropped
    );
    eprintln!(
        "rekeys in {WINDOW:?}: client handshakes {} -> {} (started by rekey {} -> {}, retry {} -> {}, other causes {:?}), server handshakes {} -> {}; key age now {:.1} s",
        c0.handshakes,
        c1.handshakes,
        c0.handshake_causes.rekey,
        c1.handshake_causes.rekey,
        c0.handshake_causes.retry,
        c1.handshake_causes.retry,
        c1.handshake_causes,
        s0.handshakes,
        s1.handshakes,
        c1.key_age_s
    );
    eprintln!(
        "probes every 10 ms: {answered} of {} answered; longest stretch without an answer {gap:?}; RTT median {:?}, max {:?}; send-queue drops client {:?}, server {:?}",
        probes.sent,
        rtts.get(rtts.len() / 2),
        rtts.last(),
        c1.send_queue_drops,
        s1.send_queue_drops
    );
    eprintln!("restarted client connected {connected_after:?} after it started, during the flood");
    assert!(sent >= RATE * WINDOW.as_secs(), "the flood ran: {sent}");
    assert!(rekeys >= 2, "at least two rekeys: {rekeys}");
    assert!(
        c1.handshake_causes.rekey - c0.handshake_causes.rekey >= 2,
        "{:?}",
        c1.handshake_causes
    );
    assert!(
        s1.handshakes - s0.handshakes >= 2,
        "server: {s0:?} -> {s1:?}"
    );
    assert_eq!(c1.session_id, c0.session_id, "no fresh engine session");
    assert_eq!(s1.session_id, c1.session_id, "both ends in one session");
    assert!(
        after.1.dropped.cookie_replied > before.1.dropped.cookie_replied
            && after.1.dropped.bad_mac > before.1.dropped.bad_mac,
        "the flood reached the server: {:?}",
        after.1.dropped
    );
    // docs/protocol.md#known-first: the rekeys came from the client's validated path
    // addresses and were served there at once, on budgets the flood cannot drain.
    let known = after.1.dropped.known_admitted - before.1.dropped.known_admitted;
    assert!(
        known >= rekeys,
        "{known} initiations admitted as known for {rekeys} rekeys: {:?}",
        after.1.dropped
    );
    // The server stayed under load: no junk reached Diffie-Hellman beyond, at most, one
    // more unproven burst of the flooder's address (5) should the server have stopped
    // reading for a second. (Before the handshake socket's datagrams were timed at
    // their reading, 43 and 53 did in release runs.)
    let dh = after.1.dropped.auth_failed - before.1.dropped.auth_failed;
    assert!(dh <= 5, "{dh} junk initiations reached Diffie-Hellman");
    // The probes share the tunnel with a TCP flow that fills it, whose queue drops a few
    // of them (about 2 % in the first runs); a stall would take many in a row.
    assert!(
        answered * 100 >= probes.sent * 95,
        "{answered} of {} probes answered",
        probes.sent
    );
    assert!(gap <= REKEY_FLOOD_GAP_BOUND, "{gap:?} without an answer");
    assert!(
        tcp_got.longest_gap <= REKEY_FLOOD_GAP_BOUND,
        "the transfer stalled for {:?}",
        tcp_got.longest_gap
    );
    drop(flooder);
    t.shutdown();
    let left: Vec<String> = own_namespaces();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    assert!(!left.contains(&flooder_ns_name));
}

/// The longest the probes of test (r) may go unanswered. A rekey must cost no traffic
/// (docs/protocol.md#rekeying: the old keys seal and open until the response arrives), so
/// any gap is scheduling on the shared 2-core machine; a rekey that stalled traffic until a
/// retry (5 s) or until the keys expired would be far beyond it.
const REKEY_FLOOD_GAP_BOUND: Duration = Duration::from_secs(1);

/// Issue 16's figure: the flood rate at which a new client still connects within 10 s, a
/// measurement run by hand on a release build (wall-clock figures have no place in a
/// pass/fail test):
///
/// ```sh
/// cargo test --release -p plait --test tunnel_netns new_client_connect_time_by_flood_rate -- --ignored --nocapture
/// ```
///
/// One server and one client over one path; a flooder attached to path 0's router (another
/// address and /24 than the client's) sends junk initiations (half with a valid mac1) at
/// 10,000, 20,000 and 50,000 a second from one thread, then 100,000 and 200,000 from two
/// (on this 2-core machine two threads are as fast as a flooder gets; the rate reached is
/// printed). At each rate the client is restarted [`CONNECT_TRIALS`] times during one
/// flood (the first 1 s after it began), and each time the time until it has a session is
/// printed, or that it had none after 12 s; with the server's CPU over the flood and what
/// overflowed its sockets. Asserts only that the flood reached the server.
#[test]
#[ignore = "a measurement: run by hand with --release (see the doc comment)"]
fn new_client_connect_time_by_flood_rate() {
    use std::sync::atomic::{AtomicBool, Ordering};

    if !root() {
        return;
    }
    let _serial = serial();
    const WAIT: Duration = Duration::from_secs(12);
    // Bounds each flood: 1 s, then each trial's wait and its client's stop and start.
    const FLOOD_MAX: Duration = Duration::from_secs(1 + CONNECT_TRIALS as u64 * 15);
    let mut t = Tunnel::start(TunnelSpec::new(
        'w',
        TopologySpec::new(PREFIX, vec![PathSpec::v4()]),
    ));
    let flooder = t.topo.attach_host(0).expect("flooder on path 0's router");
    let server_addr = SocketAddr::new(t.topo.path_server_addr(0).expect("path 0"), PORT);
    let server_pid = t.server().child.id();
    let client_ns = t.topo.clients()[0].client();
    let config = t.dir.path().join("client0.toml");
    let junk = junk_initiations(&t.server_key);
    let junk: Vec<&[u8]> = junk.iter().map(|m| &m[..]).collect();
    let mut rows = Vec::new();
    for (rate, threads) in [
        (10_000u64, 1u64),
        (20_000, 1),
        (50_000, 1),
        (100_000, 2),
        (200_000, 2),
    ] {
        let before = t.server().status().expect("server status").dropped;
        let cpu_before = cpu_seconds(server_pid);
        let overflows_before = udp_rcvbuf_errors(t.topo.server());
        let stop = AtomicBool::new(false);
        let flood_started = Instant::now();
        let (sent, flood_time, cpu, times) = std::thread::scope(|scope| {
            let floods: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        flood_initiations_until(
                            flooder.namespace(),
                            server_addr,
                            rate / threads,
                            FLOOD_MAX,
                            &stop,
                            &junk,
                        )
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs(1));
            let mut times = Vec::new();
            for _ in 0..CONNECT_TRIALS {
                let old = t.clients.pop().expect("client 0");
                old.shutdown(client_ns);
                let started = Instant::now();
                let client = Daemon::start(client_ns, "client", "client0", &config, &tun_name('w'));
                let mut connected = None;
                while started.elapsed() < WAIT {
                    if let Ok(s) = client.status()
                        && s.sessions.len() == 1
                        && s.sessions[0].established
                    {
                        connected = Some(started.elapsed());
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                t.clients.push(client);
                times.push(connected);
            }
            stop.store(true, Ordering::Relaxed);
            let sent: u64 = floods
                .into_iter()
                .map(|f| f.join().expect("flood thread"))
                .sum();
            let flood_time = flood_started.elapsed();
            (
                sent,
                flood_time,
                cpu_seconds(server_pid) - cpu_before,
                times,
            )
        });
        let overflows = udp_rcvbuf_errors(t.topo.server()) - overflows_before;
        let after = t.server().status().expect("server status").dropped;
        assert!(after.bad_mac > before.bad_mac, "{after:?}");
        let reached = sent as f64 / flood_time.as_secs_f64();
        let cpu = cpu / flood_time.as_secs_f64();
        eprintln!(
            "target {rate}/s ({threads} thread(s)): sent {sent} in {flood_time:.2?} ({reached:.0}/s); connect times {times:.2?}; server CPU {:.1} % of a core; {overflows} datagrams overflowed the server's sockets ({:.1} % of those sent); server drops: bad_mac +{}, cookie_replied +{}, rate_limited +{}, auth_failed +{}",
            100.0 * cpu,
            100.0 * overflows as f64 / sent.max(1) as f64,
            after.bad_mac - before.bad_mac,
            after.cookie_replied - before.cookie_replied,
            after.rate_limited - before.rate_limited,
            after.auth_failed - before.auth_failed,
        );
        rows.push((rate, reached, times, cpu));
        // Let the server's load state settle before the next rate.
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!(
        "new client's connect time by flood rate (flood from {}, half of it with a valid mac1):",
        flooder.addr()
    );
    for (rate, reached, times, cpu) in &rows {
        let within = times
            .iter()
            .filter(|c| c.is_some_and(|d| d <= Duration::from_secs(10)))
            .count();
        let shown: Vec<String> = times
            .iter()
            .map(|c| c.map_or_else(|| format!("none in {WAIT:?}"), |d| format!("{d:.2?}")))
            .collect();
        eprintln!(
            "  target {rate:>6}/s, reached {reached:>6.0}/s: connected in {} ({within} of {} within 10 s); server CPU {:.1} % of a core",
            shown.join(", "),
            times.len(),
            cpu * 100.0
        );
    }
    drop(flooder);
    t.shutdown();
}

/// Client restarts per flood rate in [`new_client_connect_time_by_flood_rate`].
const CONNECT_TRIALS: usize = 3;

/// (d) One IPv4 and one IPv6 path, tunnel addresses of both families: inner IPv6 over both
/// paths, then inner IPv6 and IPv4 over the IPv6 path alone, then inner IPv6 over the IPv4
/// path alone (the other path blackholed and seen down), all byte-identical.
#[test]
fn ipv6_inner_over_ipv6_path() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec {
        inner_v6: true,
        ..TunnelSpec::new(
            'd',
            TopologySpec::new(
                PREFIX,
                vec![PathSpec::v4().rate(20.0), PathSpec::v6().rate(20.0)],
            ),
        )
    });
    let status = t.clients[0].status().expect("client status");
    let remote = status.sessions[0].paths[1]
        .remote
        .clone()
        .unwrap_or_default();
    assert!(remote.starts_with('['), "path 1 is not IPv6: {remote}");
    let mut port = 5000;
    let mut send = |t: &Tunnel, f: Family, bytes: u64, how: &str| {
        port += 1;
        let dst = SocketAddr::new(t.topo.remote_host_addr(f), port);
        let src: IpAddr = t.topo.site0().lan_host_addr(f);
        transfer(
            t.topo.lan_host(),
            t.topo.remote_host(),
            dst,
            bytes,
            u64::from(port),
            &format!("inner {f} {src} → {dst} {how}"),
        );
    };

    // Both paths up: whatever the scheduler does with them.
    send(&t, Family::V6, 4_000_000, "over an IPv4 and an IPv6 path");
    let status = t.clients[0].status().expect("client status");
    assert_path_shares(&status, 0.0);

    // Only the IPv6 path left: inner IPv6 and IPv4 must both cross it.
    set_only_path(&mut t, 1);
    send(&t, Family::V6, 1_000_000, "over the IPv6 path alone");
    send(&t, Family::V4, 1_000_000, "over the IPv6 path alone");

    // Only the IPv4 path left: inner IPv6 over IPv4 outer.
    set_only_path(&mut t, 0);
    send(&t, Family::V6, 1_000_000, "over the IPv4 path alone");
    t.shutdown();
}

/// Blackholes every path of client 0 but `keep` (and lifts the blackhole from `keep`), then
/// waits until the client sees `keep` usable (active or degraded) and the others down.
fn set_only_path(t: &mut Tunnel, keep: usize) {
    let n = t.topo.site0().paths().len();
    t.topo.blackhole(keep, false).expect("lift blackhole");
    for i in (0..n).filter(|&i| i != keep) {
        t.topo.blackhole(i, true).expect("blackhole");
    }
    let since = Instant::now();
    let s = t.clients[0].wait_for(&format!("path {keep} alone up"), |s| {
        s.sessions.first().is_some_and(|x| {
            x.paths.iter().all(|p| {
                if usize::from(p.id) == keep {
                    p.state == "active" || p.state == "degraded"
                } else {
                    p.state == "down"
                }
            })
        })
    });
    let state = &s.sessions[0].paths[keep].state;
    eprintln!("path {keep} alone up ({state}) after {:?}", since.elapsed());
}

/// (e) Two client sites, each with its own key, allowed_ips and two paths, connect to one
/// server and carry a TCP transfer each at the same time, both byte-identical.
#[test]
fn two_clients_share_one_server() {
    if !root() {
        return;
    }
    let _serial = serial();
    let paths = || vec![PathSpec::v4().rate(20.0), PathSpec::v4().rate(20.0)];
    let t = Tunnel::start(TunnelSpec::new(
        'e',
        TopologySpec::new(PREFIX, paths()).add_client(paths()),
    ));
    let bytes = 3_000_000;
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = t
            .topo
            .clients()
            .iter()
            .enumerate()
            .map(|(c, site)| {
                let dst = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5001 + c as u16);
                let sink = TcpSink::start(t.topo.remote_host(), dst).expect("sink");
                let seed = 10 + c as u64;
                s.spawn(move || {
                    let sent = tcp_send(site.lan_host(), dst, bytes, seed);
                    let got = sink.wait(Duration::from_secs(30));
                    (c, seed, sent, got)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("sender thread"))
            .collect::<Vec<_>>()
    });
    for (c, seed, sent, got) in results {
        let what = format!("client {c}: 3 MB at the same time as the other");
        let sent = sent.unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
        check_transfer(&what, &sent, &got, seed);
    }
    let server = t.server().status().expect("server status");
    for s in &server.sessions {
        let rx: u64 = s.paths.iter().map(|p| p.rx_packets).sum();
        eprintln!(
            "server session {}: established {}, {} paths, rx {} datagrams, delivered {}",
            s.peer,
            s.established,
            s.paths.len(),
            rx,
            s.delivered
        );
        assert!(
            s.delivered > 1000,
            "{} delivered only {}",
            s.peer,
            s.delivered
        );
    }
    t.shutdown();
}

/// Stream mode's share of a session: how many bytes its streams carried and how many
/// connections the relay took, printed.
fn stream_counters(d: &Daemon, who: &str) -> (u64, u64) {
    let s = d.status().expect("status");
    let relay = s.relay.expect("stream mode reports its relay");
    let streams = s.sessions.first().map(|x| x.streams).unwrap_or_default();
    eprintln!(
        "  {who}: relay {relay:?}; streams {streams:?}; paths: {}",
        s.sessions
            .first()
            .map(|x| x
                .paths
                .iter()
                .map(|p| format!(
                    "{} cwnd {} B, lost {}, pacing {:.1?} Mbit/s",
                    p.name, p.cwnd_bytes, p.lost_packets, p.pacing_mbit
                ))
                .collect::<Vec<_>>()
                .join("; "))
            .unwrap_or_default()
    );
    (relay.relayed, streams.bytes_sent + streams.bytes_read)
}

/// (f) Stream mode, two paths at 40 Mbit/s: TCP from a LAN host behind the client
/// (nftables prerouting redirect) and from a program on the client host itself (output
/// redirect) arrives byte-identical, carried as streams (the relays count the connections
/// and the streams the bytes); a download through SOCKS5 with curl is byte-identical; a
/// destination where nothing listens resets the application's connection; half-close
/// works both ways; after SIGTERM no nftables table is left.
#[test]
fn stream_mode_carries_tcp_transparently_and_through_socks5() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec {
        streams: true,
        ..TunnelSpec::new('f', two_paths_at_40())
    });
    let remote = t.topo.remote_host_addr(Family::V4);
    let (relayed0, _) = stream_counters(&t.clients[0], "client before");

    // A LAN host behind the client, and a program on the client host.
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        SocketAddr::new(remote, 5001),
        20_000_000,
        31,
        "stream mode: 20 MB from the LAN host",
    );
    transfer(
        t.topo.client(),
        t.topo.remote_host(),
        SocketAddr::new(remote, 5002),
        5_000_000,
        32,
        "stream mode: 5 MB from the client host",
    );
    // The status snapshot is refreshed a few times a second: wait for it to catch up.
    t.clients[0].wait_for("the relay and the streams to count both transfers", |s| {
        let sent = s.sessions.first().map_or(0, |x| x.streams.bytes_sent);
        s.relay.is_some_and(|r| r.relayed >= relayed0 + 2) && sent >= 25_000_000
    });
    stream_counters(&t.clients[0], "client after two transfers");

    // SOCKS5 with curl: a 3 MB file served by python's http.server on the remote host.
    let dir = t.dir.path().join("www");
    std::fs::create_dir_all(&dir).expect("www dir");
    let mut file = vec![0u8; 3_000_000];
    payload_block(77, 0, &mut file);
    std::fs::write(dir.join("blob"), &file).expect("blob");
    let mut http = t.topo.remote_host().command("python3");
    http.args(["-m", "http.server", "8080", "--bind"])
        .arg(remote.to_string())
        .arg("--directory")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _http = t.topo.remote_host().spawn(&mut http).expect("http.server");
    let out = t.dir.path().join("blob.out");
    let url = format!("http://{remote}:8080/blob");
    let curl = |proxy: &str| {
        t.topo
            .client()
            .exec_output([
                "curl",
                "-sS",
                "--max-time",
                "30",
                "-x",
                proxy,
                "-o",
                out.to_str().expect("path"),
                &url,
            ])
            .expect("curl")
    };
    let good = format!("socks5://{SOCKS5_USER}:{SOCKS5_PASSWORD}@{SOCKS5}");
    let mut ok = false;
    for _ in 0..50 {
        if curl(&good).status.success() {
            ok = true;
            break;
        }
        // http.server may not be listening yet: the reset says so.
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ok, "curl through SOCKS5 never succeeded");
    let got = std::fs::read(&out).expect("downloaded");
    assert!(got == file, "curl through SOCKS5: the download differs");
    eprintln!("curl through SOCKS5 with username and password: 3 MB byte-identical");
    // A wrong password and no credential at all are refused by the relay (curl: 97,
    // "proxy handshake error").
    for proxy in [
        format!("socks5://{SOCKS5_USER}:wrong@{SOCKS5}"),
        format!("socks5://{SOCKS5}"),
    ] {
        let r = curl(&proxy);
        assert_eq!(
            r.status.code(),
            Some(97),
            "{proxy}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }

    // Nothing listens on port 9: the server's connect is refused, the app sees a reset.
    let closed = SocketAddr::new(remote, 9);
    let read = t
        .topo
        .lan_host()
        .run_in(move || {
            use std::io::Read;
            let mut s = std::net::TcpStream::connect(closed)?;
            s.set_read_timeout(Some(Duration::from_secs(20)))?;
            let mut b = [0u8; 8];
            s.read(&mut b)
        })
        .expect("run in lan namespace");
    let kind = read.map_err(|e| e.kind());
    assert_eq!(
        kind,
        Err(std::io::ErrorKind::ConnectionReset),
        "a refused destination resets the application's connection"
    );

    // Half-close both ways: the LAN host sends 1 MB and shuts its write side; the remote
    // host reads to the end, then answers 2 MB and closes.
    let hc = SocketAddr::new(remote, 5003);
    let listener = t
        .topo
        .remote_host()
        .run_in(move || std::net::TcpListener::bind(hc))
        .expect("run in remote namespace")
        .expect("bind");
    let up = {
        let mut b = vec![0u8; 1_000_000];
        payload_block(5, 0, &mut b);
        b
    };
    let down = {
        let mut b = vec![0u8; 2_000_000];
        payload_block(6, 0, &mut b);
        b
    };
    let (up2, down2) = (up.clone(), down.clone());
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().expect("accept");
        let mut got = Vec::new();
        s.read_to_end(&mut got).expect("read to FIN");
        s.write_all(&down2).expect("answer after FIN");
        got == up2
    });
    let got = t
        .topo
        .lan_host()
        .run_in(move || {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(hc).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            s.write_all(&up).expect("send");
            s.shutdown(std::net::Shutdown::Write).expect("half-close");
            let mut got = Vec::new();
            s.read_to_end(&mut got).expect("read to FIN");
            got
        })
        .expect("run in lan namespace");
    assert!(
        server.join().expect("server thread"),
        "upload after half-close differs"
    );
    assert!(
        got == down,
        "download after the client's half-close differs"
    );
    eprintln!("half-close: 1 MB up then FIN, 2 MB down then FIN, both byte-identical");

    stream_counters(&t.clients[0], "client at the end");
    stream_counters(t.server(), "server at the end");
    t.shutdown();
}

/// (g) Stream mode: a path is blackholed 1 s into a 30 MB transfer; the transfer completes
/// byte-identical on the other path.
#[test]
fn stream_transfer_survives_a_path_blackholed_midway() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec {
        streams: true,
        ..TunnelSpec::new('g', two_paths_at_40())
    });
    let dst = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5001);
    let sink = TcpSink::start(t.topo.remote_host(), dst).expect("sink");
    let seed = 41;
    let sent = std::thread::scope(|s| {
        let sender = s.spawn(|| tcp_send(t.topo.lan_host(), dst, 30_000_000, seed));
        std::thread::sleep(Duration::from_secs(1));
        t.topo.blackhole(0, true).expect("blackhole");
        sender.join().expect("sender thread")
    });
    let sent = sent.expect("transfer with path 0 blackholed");
    let got = sink.wait(Duration::from_secs(60)).expect("sink");
    check_transfer(
        "stream mode: 30 MB, path 0 blackholed at 1 s",
        &sent,
        &got,
        seed,
    );
    stream_counters(&t.clients[0], "client");
    t.shutdown();
}

/// (h) Stream mode: after SIGKILL the client leaves its nftables table behind; a restart
/// replaces it, carries traffic, and a SIGTERM then removes it.
#[test]
fn stream_mode_rules_survive_kill_and_restart() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec {
        streams: true,
        ..TunnelSpec::new(
            'h',
            TopologySpec::new(PREFIX, vec![PathSpec::v4().rate(20.0)]),
        )
    });
    let tun = tun_name('h');
    let table = plait_tunnel::netcfg::redirect_table_name(&tun);
    let ruleset = || {
        let out = t
            .topo
            .client()
            .exec_output(["nft", "list", "table", "inet", &table])
            .expect("nft");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first_ruleset = ruleset();
    let mut old = t.clients.remove(0);
    old.child.kill();
    let tables = t
        .topo
        .client()
        .exec_output(["nft", "list", "tables"])
        .expect("nft");
    eprintln!(
        "after SIGKILL: {}",
        String::from_utf8_lossy(&tables.stdout).trim()
    );
    // The killed daemon's TUN device is gone with its process; its rules are not.
    let config = t.dir.path().join("client0.toml");
    let _ = std::fs::remove_file(t.dir.path().join("client0.sock"));
    drop(old);
    let mut again = Daemon::start(t.topo.client(), "client", "client0", &config, &tun);
    again.wait_for("established session after restart", |s| {
        s.sessions.len() == 1 && s.sessions[0].established
    });
    // The leftover table was replaced, not doubled: one table, with the rules the first
    // daemon had, once.
    let tables = t
        .topo
        .client()
        .exec_output(["nft", "list", "tables"])
        .expect("nft");
    let tables = String::from_utf8_lossy(&tables.stdout).into_owned();
    assert_eq!(
        tables
            .lines()
            .filter(|l| l.contains("plait_streams_"))
            .count(),
        1,
        "{tables}"
    );
    assert_eq!(ruleset(), first_ruleset);
    t.clients.push(again);
    let remote = t.topo.remote_host_addr(Family::V4);
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        SocketAddr::new(remote, 5001),
        3_000_000,
        51,
        "stream mode after kill and restart: 3 MB",
    );
    let (relayed, _) = stream_counters(&t.clients[0], "restarted client");
    assert!(relayed >= 1, "the restarted client relayed the connection");
    t.shutdown();
}

/// (i) Stream mode: 200 connections at once from the LAN host, mixed sizes (1 KB to
/// 200 KB each way), to an echo server behind the plait server: every one comes back
/// byte-identical. Then an IPv6 transfer through stream mode.
#[test]
fn stream_mode_200_concurrent_connections_and_ipv6() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec {
        inner_v6: true,
        streams: true,
        ..TunnelSpec::new('i', two_paths_at_40())
    });
    const N: usize = 200;
    let echo = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5007);
    let listener = t
        .topo
        .remote_host()
        .run_in(move || std::net::TcpListener::bind(echo))
        .expect("run in remote namespace")
        .expect("bind");
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut handles = Vec::new();
        for _ in 0..N {
            let (mut s, _) = listener.accept().expect("accept");
            handles.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 16 << 10];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = s.shutdown(std::net::Shutdown::Write);
            }));
        }
        for h in handles {
            let _ = h.join();
        }
    });
    let intact = t
        .topo
        .lan_host()
        .run_in(move || {
            let handles: Vec<_> = (0..N)
                .map(|i| {
                    std::thread::spawn(move || {
                        use std::io::{Read, Write};
                        let len = 1000 + (i * 7919) % 200_000;
                        let mut data = vec![0u8; len];
                        payload_block(1000 + i as u64, 0, &mut data);
                        let mut s = std::net::TcpStream::connect(echo).expect("connect");
                        s.set_read_timeout(Some(Duration::from_secs(60)))
                            .expect("timeout");
                        let mut w = s.try_clone().expect("clone");
                        let d2 = data.clone();
                        let writer = std::thread::spawn(move || {
                            w.write_all(&d2).expect("send");
                            w.shutdown(std::net::Shutdown::Write).expect("half-close");
                        });
                        let mut got = Vec::new();
                        s.read_to_end(&mut got).expect("read");
                        writer.join().expect("writer");
                        got == data
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("connection thread"))
                .filter(|ok| *ok)
                .count()
        })
        .expect("run in lan namespace");
    server.join().expect("echo server");
    assert_eq!(intact, N, "every connection's bytes came back intact");
    eprintln!("{N} concurrent connections through stream mode, all byte-identical");

    let dst = SocketAddr::new(t.topo.remote_host_addr(Family::V6), 5008);
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        dst,
        5_000_000,
        61,
        "stream mode over IPv6: 5 MB",
    );
    let mut t = t;
    t.clients[0].wait_for("the relay to count every connection", |s| {
        s.relay.is_some_and(|r| r.relayed > N as u64)
    });
    stream_counters(&t.clients[0], "client");
    t.shutdown();
}

/// Resident memory of a process, bytes (`VmRSS` in /proc/PID/status).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// Most resident memory one idle relayed connection may cost the client daemon (the
/// relay's entry and maps, the engine's stream): docs/tunnel.md#stream-mode states it.
const IDLE_CONNECTION_BOUND: u64 = 16 * 1024;

/// (j) Stream mode: 10,000 idle connections through one client. Each costs the client
/// daemon at most [`IDLE_CONNECTION_BOUND`] of resident memory (measured as the RSS growth
/// over the 10,000, printed); the server holds them too; all are closed at the end.
#[test]
fn stream_mode_10000_idle_connections_memory() {
    if !root() {
        return;
    }
    let _serial = serial();
    // Two sockets per connection live in this process (the application's end and the
    // destination's end).
    // The application's ends live here (10,000 sockets); the destination's in a python
    // process of its own, so neither process needs more than the usual hard limit.
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .expect("getrlimit");
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard)
        .expect("setrlimit");
    const N: usize = 10_000;
    let mut t = Tunnel::start(TunnelSpec {
        streams: true,
        ..TunnelSpec::new(
            'j',
            TopologySpec::new(PREFIX, vec![PathSpec::v4().rate(40.0)]),
        )
    });
    let client_pid = t.clients[0].child.id();
    let server_pid = t.server().child.id();
    let (client_before, server_before) = (rss_bytes(client_pid), rss_bytes(server_pid));
    let dst = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5009);
    // Accepts and holds every connection until killed.
    let holder = format!(
        "import resource, socket\n\
         soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n\
         resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n\
         l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(('{}', {})); l.listen(4096)\n\
         held = []\n\
         while True: held.append(l.accept()[0])\n",
        dst.ip(),
        dst.port()
    );
    let mut cmd = t.topo.remote_host().command("python3");
    cmd.args(["-c", &holder]);
    let holder = t.topo.remote_host().spawn(&mut cmd).expect("python holder");
    let listening = t
        .topo
        .remote_host()
        .run_in(move || {
            (0..100).any(|_| {
                std::thread::sleep(Duration::from_millis(50));
                std::net::TcpStream::connect(dst).is_ok()
            })
        })
        .expect("run in remote namespace");
    assert!(listening, "the python holder never listened");
    let apps = t
        .topo
        .lan_host()
        .run_in(move || {
            let mut held = Vec::with_capacity(N);
            for _ in 0..N {
                held.push(std::net::TcpStream::connect(dst).expect("connect"));
            }
            held
        })
        .expect("run in lan namespace");
    t.server
        .as_mut()
        .expect("server")
        .wait_for("10,000 connections held by the server's relay", |s| {
            s.relay.is_some_and(|r| r.open >= N as u64)
        });
    t.clients[0].wait_for("10,000 connections held by the client's relay", |s| {
        s.relay.is_some_and(|r| r.open >= N as u64)
    });
    let (client_after, server_after) = (rss_bytes(client_pid), rss_bytes(server_pid));
    let per = |before: u64, after: u64| after.saturating_sub(before) / N as u64;
    eprintln!(
        "{N} idle connections: client RSS {:.1} -> {:.1} MiB ({} B per connection), \
         server RSS {:.1} -> {:.1} MiB ({} B per connection)",
        client_before as f64 / 1048576.0,
        client_after as f64 / 1048576.0,
        per(client_before, client_after),
        server_before as f64 / 1048576.0,
        server_after as f64 / 1048576.0,
        per(server_before, server_after),
    );
    assert!(
        per(client_before, client_after) <= IDLE_CONNECTION_BOUND,
        "client: more than {IDLE_CONNECTION_BOUND} B per idle connection"
    );
    assert!(
        per(server_before, server_after) <= IDLE_CONNECTION_BOUND,
        "server: more than {IDLE_CONNECTION_BOUND} B per idle connection"
    );
    // Both ends close (a half-closed connection stays open until its other direction
    // ends too).
    drop(apps);
    drop(holder);
    t.clients[0].wait_for("every connection closed", |s| {
        s.relay.is_some_and(|r| r.open == 0)
    });
    stream_counters(&t.clients[0], "client");
    t.shutdown();
}

/// Copies of the client's routing state in `ns`: the fwmark rule, the
/// `suppress_prefixlength 0` rule and table 28780's routes, IPv4 only.
fn client_routing_copies(ns: &Namespace) -> [usize; 3] {
    let count = |args: &[&str], needle: &str| {
        let out = ns.ip(args.iter().copied()).expect("ip");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    };
    [
        count(
            &["-4", "rule", "show"],
            &format!("fwmark {FWMARK} lookup {TABLE}"),
        ),
        count(&["-4", "rule", "show"], "suppress_prefixlength 0"),
        count(&["-4", "route", "show", "table", TABLE], "dev"),
    ]
}

/// (l) kill -9 of the server, restarted at once with the same config: the client hears an
/// unknown-index hint (docs/protocol.md#unknown-index) on its next datagram (a keepalive
/// at the latest) and handshakes again at once, not after its 15 s silence timer; traffic
/// flows again; the server's routes to the client's LAN exist once; a clean stop then
/// leaves nothing. Asserts on the client's handshake causes and the server's counters;
/// the recovery time is printed, not asserted.
#[test]
fn server_kill_and_restart_client_recovers_by_hint() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec::new(
        'l',
        TopologySpec::new(PREFIX, vec![PathSpec::v4(), PathSpec::v4()]),
    ));
    let before = t.clients[0].status().expect("client status").sessions[0].clone();
    let tun = tun_name('l');
    let config = t.dir.path().join("server.toml");
    let mut old = t.server.take().expect("server");
    old.child.kill();
    let killed = Instant::now();
    drop(old);
    // The killed server's log, kept apart from the new one's.
    let _ = std::fs::rename(
        t.dir.path().join("server.log"),
        t.dir.path().join("server-killed.log"),
    );
    let server = Daemon::start(t.topo.server(), "server", "server", &config, &tun);
    let restarted = Instant::now();
    t.server = Some(server);
    let after = t.clients[0].wait_for("a handshake with the restarted server", |s| {
        s.sessions.first().is_some_and(|x| {
            x.established && x.handshakes > before.handshakes && x.handshake_causes.hint > 0
        })
    });
    let recovered = restarted.elapsed();
    let status = t
        .server
        .as_mut()
        .expect("server")
        .wait_for("the client's session", |s| {
            s.sessions.iter().any(|x| x.established)
        });
    let c = after.sessions[0].handshake_causes;
    eprintln!(
        "server restart: started {:?} after the kill; the client's status showed a completed \
         handshake {recovered:?} after that start (polled every 100 ms), the server the \
         client's session {:?} after it; client handshake causes before {:?}, after {c:?}; \
         server drops {:?}",
        restarted - killed,
        restarted.elapsed(),
        before.handshake_causes,
        status.dropped
    );
    assert_eq!(c.hint, before.handshake_causes.hint + 1, "{c:?}");
    assert_eq!(c.silence, before.handshake_causes.silence, "{c:?}");
    assert!(status.dropped.hinted >= 1, "{:?}", status.dropped);
    let log = std::fs::read_to_string(&t.clients[0].log).expect("client log");
    assert!(
        log.contains("the server does not know our keys"),
        "the client log does not show the hint"
    );
    // The client's own account, with its timestamps: the hint, then the handshake.
    for line in log.lines().filter(|l| {
        l.contains("does not know our keys")
            || l.contains("server lost our session")
            || (l.contains("handshake complete") && l.contains("Hint"))
    }) {
        eprintln!("  client: {line}");
    }
    // The restarted server added its route to the client's LAN once.
    let lan = t.topo.clients()[0].lan_net(Family::V4).to_string();
    let routes = t
        .topo
        .server()
        .ip(["-4", "route", "show"])
        .expect("ip route");
    let routes = String::from_utf8_lossy(&routes.stdout);
    assert_eq!(
        routes.lines().filter(|l| l.starts_with(&lan)).count(),
        1,
        "{routes}"
    );
    let remote = t.topo.remote_host_addr(Family::V4);
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        SocketAddr::new(remote, 5001),
        2_000_000,
        61,
        "after the server's kill -9 and restart: 2 MB",
    );
    t.shutdown();
}

/// (m) kill -9 of a client that routes everything into the tunnel (`route = 0.0.0.0/0`:
/// the fwmark rule, the `suppress_prefixlength 0` rule and a route in table 28780), then a
/// restart with the same config: the restarted client finds the rules the killed one left
/// and replaces them, so exactly one copy of each exists; traffic flows; a clean stop
/// removes every one (the clean-shutdown check).
#[test]
fn client_kill_and_restart_leaves_one_copy_of_each_rule() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec::new(
        'm',
        TopologySpec::new(PREFIX, vec![PathSpec::v4()]),
    ));
    let client_ns = t.topo.clients()[0].client();
    let tun = tun_name('m');
    let config = t.dir.path().join("client0.toml");
    t.clients.pop().expect("client 0").shutdown(client_ns);
    // Everything into the tunnel.
    let text = std::fs::read_to_string(&config).expect("client config");
    let text: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("route = ") {
                "route = [\"0.0.0.0/0\"]".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect();
    std::fs::write(&config, text.join("\n") + "\n").expect("client config");
    let established = |s: &StatusSnapshot| {
        s.sessions.len() == 1
            && s.sessions[0].established
            && s.sessions[0].paths.iter().all(|p| p.state == "active")
    };
    let mut first = Daemon::start(client_ns, "client", "client0", &config, &tun);
    first.wait_for("established session", established);
    assert_eq!(client_routing_copies(client_ns), [1, 1, 1]);

    first.child.kill();
    drop(first);
    // The TUN device went with the process, and its route; the rules stayed.
    assert_eq!(client_routing_copies(client_ns), [1, 1, 0]);
    let _ = std::fs::rename(
        t.dir.path().join("client0.log"),
        t.dir.path().join("client0-killed.log"),
    );
    let started = Instant::now();
    let mut again = Daemon::start(client_ns, "client", "client0", &config, &tun);
    again.wait_for("established session after the restart", established);
    eprintln!(
        "client restart: established {:?} after it started",
        started.elapsed()
    );
    assert_eq!(
        client_routing_copies(client_ns),
        [1, 1, 1],
        "one copy of each rule and route"
    );
    let log = std::fs::read_to_string(&again.log).expect("client log");
    assert_eq!(
        log.matches("removed a leftover of an earlier run").count(),
        2,
        "the fwmark and suppress rules were found and replaced:\n{log}"
    );
    t.clients.push(again);
    let remote = t.topo.remote_host_addr(Family::V4);
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        SocketAddr::new(remote, 5001),
        2_000_000,
        62,
        "after the client's kill -9 and restart: 2 MB",
    );
    // A clean stop removes every rule and route (Daemon::shutdown's assert_clean).
    t.shutdown();
}

/// What the on-path attacker of [`raced_datagrams_from_a_foreign_address_move_no_path`] did.
#[derive(Debug, Default)]
struct RaceReport {
    /// Copies of the client's data messages it forwarded from its own address.
    copies: u64,
    /// Their bytes (UDP payload).
    bytes_sent: u64,
    /// Datagrams the server sent to its address, and their bytes (UDP payload).
    replies: u64,
    bytes_received: u64,
    /// Sizes of those datagrams.
    reply_sizes: std::collections::BTreeSet<usize>,
}

/// The datagrams of a captured UDP payload that may be a GSO super-datagram of plait data
/// messages: equal segments, each starting with a data header naming the first's receiver
/// index (the last may be shorter).
fn split_gso(payload: &[u8]) -> Vec<&[u8]> {
    let Some(head) = payload.get(..8) else {
        return vec![payload];
    };
    let segment = (32..payload.len())
        .find(|&s| payload.get(s..s + 8) == Some(head))
        .unwrap_or(payload.len());
    payload.chunks(segment).collect()
}

/// Runs in path 0's router (on the path): sniffs the client's datagrams to the server as
/// they enter the router (ahead of the path's delay emulator), and forwards a copy of each
/// new data message (type 4; each sighting of one (receiver, counter) once) to the server
/// from `own` (the router's server-side address), where the server hears it before the
/// original. Counts what the server sends to `own`. Stops when `stop` is set.
fn race_client_datagrams(
    client: IpAddr,
    server: SocketAddr,
    own: IpAddr,
    stop: &std::sync::atomic::AtomicBool,
) -> RaceReport {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::io::Read;
    use std::sync::atomic::Ordering;

    const ETH_P_IP: u16 = 0x0800;
    let sniff = Socket::new(
        Domain::PACKET,
        Type::DGRAM,
        Some(Protocol::from(i32::from(ETH_P_IP.to_be()))),
    )
    .expect("AF_PACKET socket");
    sniff
        .set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    let relay = UdpSocket::bind(SocketAddr::new(own, 0)).expect("bind attacker socket");
    relay.set_nonblocking(true).expect("nonblocking");
    let (IpAddr::V4(client), IpAddr::V4(server_ip)) = (client, server.ip()) else {
        panic!("IPv4 path expected");
    };
    let mut seen = std::collections::HashSet::new();
    let mut report = RaceReport::default();
    let mut pkt = vec![0u8; 65_536];
    let mut reply = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        if let Ok(n) = (&sniff).read(&mut pkt) {
            let ip = &pkt[..n];
            let ihl = usize::from(ip.first().copied().unwrap_or(0) & 0x0f) * 4;
            let is_ours = n > ihl + 8
                && ip[0] >> 4 == 4
                && ip[9] == 17
                && ip[12..16] == client.octets()
                && ip[16..20] == server_ip.octets()
                && u16::from_be_bytes([ip[ihl + 2], ip[ihl + 3]]) == server.port();
            if is_ours {
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(n);
                // The client sends with UDP GSO and the veth passes the super-packet whole:
                // split it into its datagrams.
                for d in split_gso(&ip[ihl + 8..total]) {
                    // Data messages only; the first sighting of each.
                    if d.len() >= 16
                        && d[0] == 4
                        && seen.insert(d[4..16].to_vec())
                        && relay.send_to(d, server).is_ok()
                    {
                        report.copies += 1;
                        report.bytes_sent += d.len() as u64;
                    }
                }
            }
        }
        while let Ok((n, from)) = relay.recv_from(&mut reply) {
            if from == server {
                report.replies += 1;
                report.bytes_received += n as u64;
                report.reply_sizes.insert(n);
            }
        }
    }
    report
}

/// (n) Path validation (docs/protocol.md#path-validation): an on-path attacker (in path
/// 0's router) forwards a copy of every client data message from its own address, ahead of
/// the original (the path delays the original by 20 ms), during a transfer from the remote
/// host to the lan host. The server's path stays on the client's address (the copies only
/// earn path challenges, which the attacker cannot answer), the server sends the attacker
/// at most 3x the bytes it received from it, and the transfer arrives intact at the genuine
/// client.
#[test]
fn raced_datagrams_from_a_foreign_address_move_no_path() {
    use std::sync::atomic::{AtomicBool, Ordering};

    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec::new(
        'n',
        TopologySpec::new(
            PREFIX,
            vec![PathSpec::v4().rate(40.0).delay(Duration::from_millis(20))],
        ),
    ));
    let path = t.topo.path(0).expect("path 0");
    let client_addr = path.client_addr();
    let server = SocketAddr::new(path.server_addr(), PORT);
    let IpAddr::V4(s) = path.server_addr() else {
        panic!("IPv4 path");
    };
    let [a, b, c, _] = s.octets();
    // The router's own address on the server's side of the path.
    let attacker_ip = IpAddr::from([a, b, c, 1]);
    let genuine_remote = |st: &StatusSnapshot| -> Option<String> {
        st.sessions.first()?.paths.first()?.remote.clone()
    };
    let before = t.server().status().expect("server status");
    let genuine = genuine_remote(&before).expect("the server knows path 0's address");
    assert!(
        genuine.starts_with(&client_addr.to_string()),
        "{genuine} is not the client's {client_addr}"
    );

    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let attacker = {
        let stop = stop.clone();
        path.router()
            .spawn_thread("race", move || {
                race_client_datagrams(client_addr, server, attacker_ip, &stop)
            })
            .expect("attacker thread")
    };
    // Let the sniffer start before the traffic it races.
    std::thread::sleep(Duration::from_millis(200));
    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let got = transfer(
        t.topo.remote_host(),
        t.topo.lan_host(),
        dst,
        5_000_000,
        31,
        "5 MB to the client while an attacker races its datagrams",
    );
    let during = t.server().status().expect("server status");
    stop.store(true, Ordering::Relaxed);
    let report = attacker
        .join()
        .expect("attacker thread")
        .expect("attacker entered the router namespace");
    let after = t.server().status().expect("server status");
    eprintln!("attacker: {report:?}");
    eprintln!(
        "server drops before: {:?}\nserver drops after: {:?}",
        before.dropped, after.dropped
    );
    assert!(got.bytes == 5_000_000);
    assert!(report.copies > 0, "the attacker forwarded nothing");
    assert!(
        after.dropped.replayed > before.dropped.replayed,
        "the copies won the race: the originals were replays"
    );
    assert!(
        report.replies > 0,
        "the server heard the attacker and challenged it"
    );
    assert!(
        report.bytes_received <= 3 * report.bytes_sent,
        "{} bytes sent to the attacker for {} received from it",
        report.bytes_received,
        report.bytes_sent
    );
    assert_eq!(
        report.reply_sizes.iter().copied().collect::<Vec<_>>(),
        vec![plait_tunnel::message::PATH_CONTROL_LEN],
        "only path challenges went to the attacker"
    );
    assert_eq!(genuine_remote(&during).as_deref(), Some(genuine.as_str()));
    assert_eq!(genuine_remote(&after).as_deref(), Some(genuine.as_str()));
    t.shutdown();
}

/// NAT rebinding (docs/protocol.md#path-validation): mid-transfer, path 0's router starts
/// rewriting the client's source port, as a NAT does when its mapping changes, and drops
/// what still goes to the old port (that mapping is gone). The server hears the client
/// from the new address, challenges it, moves the path there on the answer, and the
/// transfer arrives intact over the one path.
#[test]
fn nat_rebinding_moves_the_path_after_validation() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec::new(
        'b',
        TopologySpec::new(
            PREFIX,
            vec![PathSpec::v4().rate(40.0).delay(Duration::from_millis(20))],
        ),
    ));
    let path = t.topo.path(0).expect("path 0");
    let client_ip = path.client_addr();
    let remote = |st: &StatusSnapshot| -> Option<String> {
        st.sessions.first()?.paths.first()?.remote.clone()
    };
    let before = t.server().status().expect("server status");
    let old = remote(&before).expect("the server knows path 0's address");
    let old_port: u16 = old
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {old}"));
    let new_port = if old_port < 60_000 {
        old_port + 1000
    } else {
        old_port - 1000
    };
    // Stateless rewrite before conntrack (raw priority), both ways.
    let rules = format!(
        "table ip plait_rebind {{
  chain pre {{
    type filter hook prerouting priority raw; policy accept;
    ip saddr {client_ip} udp sport {old_port} udp sport set {new_port} notrack
    ip daddr {client_ip} udp dport {old_port} drop
    ip daddr {client_ip} udp dport {new_port} udp dport set {old_port} notrack
  }}
}}
"
    );
    let router = path.router();
    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let (got, rebound) = std::thread::scope(|scope| {
        let rebind = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            router
                .exec_with_input(["nft", "-f", "-"], rules.as_bytes())
                .map(|o| o.status.success())
        });
        let got = transfer(
            t.topo.remote_host(),
            t.topo.lan_host(),
            dst,
            20_000_000,
            41,
            "20 MB to the client while its NAT mapping changes",
        );
        (got, rebind.join().expect("rebind thread"))
    });
    assert!(rebound.expect("nft ran"), "nft refused the rewrite rules");
    let after = t.server().status().expect("server status");
    let moved = remote(&after).expect("the server knows path 0's address");
    eprintln!("path 0 at the server: {old} before, {moved} after the rebinding");
    assert_eq!(got.bytes, 20_000_000);
    assert_eq!(moved, format!("{client_ip}:{new_port}"));
    t.shutdown();
}

/// The client's address on a path changes mid-download (a new address on the interface,
/// the old one removed, as after a DHCP renumbering): the path's socket is not bound to an
/// address, so its datagrams leave from the new one; the server validates it and moves the
/// path there (docs/protocol.md#path-validation), and the transfer arrives intact.
#[test]
fn client_readdressed_path_follows_after_validation() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec::new(
        'a',
        TopologySpec::new(
            PREFIX,
            vec![PathSpec::v4().rate(40.0).delay(Duration::from_millis(20))],
        ),
    ));
    let path = t.topo.path(0).expect("path 0");
    let client_ns = t.topo.clients()[0].client();
    let dev = path.client_dev();
    let IpAddr::V4(old) = path.client_addr() else {
        panic!("IPv4 path");
    };
    let shown = client_ns
        .exec_output(["ip", "-o", "-4", "addr", "show", "dev", &dev])
        .expect("ip addr");
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    let prefix_len: u8 = shown
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix(&format!("{old}/"))
                .and_then(|l| l.parse().ok())
        })
        .unwrap_or_else(|| panic!("no {old}/N on {dev}: {shown}"));
    let [a, b, c, _] = old.octets();
    let new = std::net::Ipv4Addr::new(a, b, c, 77);
    // The new address stays primary when the old one goes, so the routes through the
    // interface stay.
    client_ns
        .sysctl(&format!("net.ipv4.conf.{dev}.promote_secondaries"), "1")
        .expect("sysctl");
    let remote = |st: &StatusSnapshot| -> Option<String> {
        st.sessions.first()?.paths.first()?.remote.clone()
    };
    let before = remote(&t.server().status().expect("server status")).expect("path 0 known");
    assert!(before.starts_with(&format!("{old}:")), "{before}");

    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let (got, readdressed) = std::thread::scope(|scope| {
        let readdress = scope.spawn(|| -> plait_testbed::Result<()> {
            std::thread::sleep(Duration::from_millis(1500));
            client_ns.ip(["addr", "add", &format!("{new}/{prefix_len}"), "dev", &dev])?;
            client_ns.ip(["addr", "del", &format!("{old}/{prefix_len}"), "dev", &dev])?;
            Ok(())
        });
        let got = transfer(
            t.topo.remote_host(),
            t.topo.lan_host(),
            dst,
            20_000_000,
            43,
            "20 MB to the client while its address changes",
        );
        (got, readdress.join().expect("readdress thread"))
    });
    readdressed.expect("re-addressing the client's interface");
    let after = remote(&t.server().status().expect("server status")).expect("path 0 known");
    eprintln!("path 0 at the server: {before} before, {after} after the re-addressing");
    assert_eq!(got.bytes, 20_000_000);
    assert!(after.starts_with(&format!("{new}:")), "{after}");
    t.shutdown();
}

/// The UDP receive-buffer overflows counted in `ns` (`RcvbufErrors` of /proc/net/snmp).
fn udp_rcvbuf_errors(ns: &Namespace) -> u64 {
    let out = ns
        .exec_output(["cat", "/proc/net/snmp"])
        .expect("/proc/net/snmp");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        panic!("no Udp lines in /proc/net/snmp");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .expect("RcvbufErrors")
}

/// CPU seconds (user and system) the process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .expect("/proc/PID/stat");
    (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64
}

/// The server's CPU under a handshake flood of 50,000 initiations a second, a measurement
/// run by hand on a release build (wall-clock figures have no place in a pass/fail test):
///
/// ```sh
/// cargo test --release -p plait --test tunnel_netns handshake_flood_cpu -- --ignored --nocapture
/// ```
///
/// Three 10 s phases against one server with one established client: idle (keepalives),
/// junk whose mac1 is wrong (dropped after one BLAKE2s), and initiations with a valid mac1
/// but no mac2 (answered with cookie replies, docs/protocol.md#dos). In the last phase a
/// 20 MB download runs through the tunnel, beside one run without a flood. Asserts only
/// what must hold whatever the speed: the server dropped and answered what it should, and
/// the downloads arrived intact.
#[test]
#[ignore = "a CPU measurement: run by hand with --release (see the doc comment)"]
fn handshake_flood_cpu_at_50k_per_second() {
    use plait_tunnel::crypto::cookie::{Mac1Key, write_initiation_mac1};
    use plait_tunnel::message::{INITIATION_HEADER_LEN, write_initiation_header};

    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec::new(
        'f',
        TopologySpec::new(PREFIX, vec![PathSpec::v4()]),
    ));
    const RATE: u64 = 50_000;
    const PHASE: Duration = Duration::from_secs(10);
    // The flood comes from the remote host's side of the server, so it competes with
    // nothing on the client's path.
    let flooder = t.topo.remote_host();
    let server_addr = SocketAddr::new(t.topo.path_server_addr(0).expect("path 0"), PORT);
    let server_pid = t.server().child.id();
    let mac1 = Mac1Key::new(&t.server_key.public());
    let mut bad_mac = [[0u8; INITIATION_LEN]; 16];
    let mut good_mac = bad_mac;
    for (i, (bad, good)) in bad_mac.iter_mut().zip(&mut good_mac).enumerate() {
        payload_block(0xf100d, i as u64, bad);
        write_initiation_header(
            bad.first_chunk_mut::<INITIATION_HEADER_LEN>()
                .expect("header"),
            i as u32,
        );
        *good = *bad;
        write_initiation_mac1(good, &mac1);
    }
    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let download = |what: &str| {
        let started = Instant::now();
        let got = transfer(
            t.topo.remote_host(),
            t.topo.lan_host(),
            dst,
            20_000_000,
            53,
            what,
        );
        got.bytes as f64 * 8.0 / started.elapsed().as_secs_f64() / 1e6
    };
    let quiet_mbit = download("20 MB without a flood");

    let mut report = Vec::new();
    let idle_start = cpu_seconds(server_pid);
    std::thread::sleep(PHASE);
    report.push(("idle".to_owned(), 0, cpu_seconds(server_pid) - idle_start));
    let mut flooded_mbit = 0.0;
    for (name, messages) in [("bad mac1", &bad_mac), ("valid mac1, no mac2", &good_mac)] {
        let messages: Vec<&[u8]> = messages.iter().map(|m| &m[..]).collect();
        let before = t.server().status().expect("server status").dropped;
        let cpu_before = cpu_seconds(server_pid);
        let overflows_before = udp_rcvbuf_errors(t.topo.server());
        let sent = std::thread::scope(|scope| {
            let flood =
                scope.spawn(|| flood_initiations(flooder, server_addr, RATE, PHASE, &messages));
            if name.starts_with("valid") {
                std::thread::sleep(Duration::from_secs(1));
                flooded_mbit = download("20 MB during the flood");
            }
            flood.join().expect("flood thread")
        });
        let cpu = cpu_seconds(server_pid) - cpu_before;
        let overflows = udp_rcvbuf_errors(t.topo.server()) - overflows_before;
        eprintln!("{name}: {overflows} datagrams dropped by the server's full socket buffers");
        let after = t.server().status().expect("server status").dropped;
        eprintln!("{name}: server drops before {before:?}\n  after {after:?}");
        if name == "bad mac1" {
            assert!(after.bad_mac > before.bad_mac, "{after:?}");
        } else {
            assert!(after.cookie_replied > before.cookie_replied, "{after:?}");
        }
        report.push((name.to_owned(), sent, cpu));
    }
    eprintln!("server CPU under a handshake flood ({PHASE:?} each, target {RATE}/s):");
    for (name, sent, cpu) in &report {
        eprintln!(
            "  {name}: {sent} sent ({:.0}/s), server CPU {cpu:.2} s = {:.1} % of a core",
            *sent as f64 / PHASE.as_secs_f64(),
            100.0 * cpu / PHASE.as_secs_f64()
        );
    }
    eprintln!(
        "download: {quiet_mbit:.1} Mbit/s without a flood, {flooded_mbit:.1} Mbit/s during the valid-mac1 flood"
    );
    t.shutdown();
}

/// Links that come and go (docs/protocol.md#binding): mid-download the client's path-1
/// interface goes down. The client sees it through netlink, stops using the path and
/// withdraws it at the server over path 0, so the server stops sending there at once
/// instead of waiting for the path to fall silent. The interface comes back (with its
/// route, as a network manager would restore it): the client restores the path and a
/// second download uses both paths again. Both downloads arrive intact.
#[test]
fn a_link_that_goes_down_and_comes_back_is_withdrawn_and_restored() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec::new('l', two_paths_at_40()));
    let client_ns = t.topo.clients()[0].client();
    let dev = t.topo.path(1).expect("path 1").client_dev();
    let routes = client_ns
        .exec_output(["ip", "-4", "route", "show", "dev", &dev])
        .expect("ip route");
    let routes: Vec<String> = String::from_utf8_lossy(&routes.stdout)
        .lines()
        .filter(|l| !l.contains("proto kernel"))
        .map(str::to_owned)
        .collect();
    assert!(!routes.is_empty(), "no route through {dev}");
    let server_path_1_sent = |t: &Tunnel| -> Option<u64> {
        let st = t.server().status().expect("server status");
        st.sessions
            .first()?
            .paths
            .iter()
            .find(|p| p.id == 1)
            .map(|p| p.tx_packets)
    };
    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let got = std::thread::scope(|scope| {
        let down = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            client_ns.ip(["link", "set", &dev, "down"])
        });
        let got = transfer(
            t.topo.remote_host(),
            t.topo.lan_host(),
            dst,
            30_000_000,
            47,
            "30 MB to the client while its path-1 link goes down",
        );
        down.join().expect("link thread").expect("ip link set down");
        got
    });
    assert_eq!(got.bytes, 30_000_000);
    assert_eq!(
        server_path_1_sent(&t),
        None,
        "the server's session no longer has path 1"
    );
    let server = t.server().status().expect("server status");
    eprintln!("server drops with path 1 withdrawn: {:?}", server.dropped);

    // The link is back, and its route with it.
    client_ns.ip(["link", "set", &dev, "up"]).expect("link up");
    for r in &routes {
        let mut args = vec!["route", "replace"];
        args.extend(r.split_whitespace());
        client_ns.ip(args).expect("route back");
    }
    let back = Instant::now();
    let deadline = back + Duration::from_secs(10);
    loop {
        let st = t.clients[0].status().expect("client status");
        if st.sessions[0]
            .paths
            .iter()
            .any(|p| p.id == 1 && p.state == "active")
        {
            break;
        }
        assert!(Instant::now() < deadline, "path 1 never came back: {st:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "path 1 active again {:?} after its link and route came back",
        back.elapsed()
    );
    let before = server_path_1_sent(&t).unwrap_or(0);
    transfer(
        t.topo.remote_host(),
        t.topo.lan_host(),
        dst,
        20_000_000,
        48,
        "20 MB after the link came back",
    );
    let after = server_path_1_sent(&t).expect("path 1 at the server");
    assert!(
        after > before + 100,
        "the server sends on the restored path: {before} -> {after}"
    );
    t.shutdown();
}

/// Backup paths (docs/protocol.md#backup): path 1 is configured `backup = true`. During a
/// download it carries almost nothing (probes and acknowledgements); when path 0's link
/// goes down mid-download, path 1 takes over at once and the download completes.
#[test]
fn a_backup_path_stands_by_then_takes_over_when_the_primary_link_goes() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec {
        backup_paths: &[1],
        ..TunnelSpec::new('u', two_paths_at_40())
    });
    let sent_per_path = |t: &Tunnel| -> Vec<u64> {
        let st = t.server().status().expect("server status");
        let mut v = vec![0; 2];
        for p in &st.sessions[0].paths {
            if let Some(slot) = v.get_mut(usize::from(p.id)) {
                *slot = p.tx_packets;
            }
        }
        v
    };
    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let before = sent_per_path(&t);
    transfer(
        t.topo.remote_host(),
        t.topo.lan_host(),
        dst,
        20_000_000,
        61,
        "20 MB with path 1 as a backup",
    );
    let during = sent_per_path(&t);
    let (primary, backup) = (during[0] - before[0], during[1] - before[1]);
    eprintln!("server datagrams during the download: path 0 {primary}, backup path 1 {backup}");
    assert!(
        backup * 100 < primary,
        "the backup carried {backup} datagrams against {primary}"
    );
    // docs/protocol.md#registration: the server holds both paths, path 1 as a backup, and
    // what the client's query got back is what it registered.
    let registered = |t: &Tunnel| {
        let st = t.server().status().expect("server status");
        let r = st.sessions[0].registration.clone().expect("a registration");
        r.paths
            .iter()
            .map(|p| (p.id, p.backup, p.available))
            .collect::<Vec<_>>()
    };
    assert_eq!(registered(&t), vec![(0, false, true), (1, true, true)]);
    let client = t.clients[0].status().expect("client status");
    let client = client.sessions[0].registration.clone().expect("registered");
    assert_eq!(
        (client.acked, client.server_agrees),
        (client.seq, Some(true))
    );

    let client_ns = t.topo.clients()[0].client();
    let dev = t.topo.path(0).expect("path 0").client_dev();
    std::thread::scope(|scope| {
        let down = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            client_ns.ip(["link", "set", &dev, "down"])
        });
        transfer(
            t.topo.remote_host(),
            t.topo.lan_host(),
            dst,
            20_000_000,
            62,
            "20 MB while the primary link goes down",
        );
        down.join().expect("link thread").expect("ip link set down");
    });
    let after = sent_per_path(&t);
    eprintln!(
        "server datagrams on the backup during the second download: {}",
        after[1] - during[1]
    );
    assert!(
        after[1] - during[1] > 5_000,
        "the backup took over: {} datagrams",
        after[1] - during[1]
    );
    // A binding update followed the link: the server's registration says path 0's link
    // is gone.
    assert_eq!(registered(&t), vec![(0, false, false), (1, true, true)]);
    t.shutdown();
}

/// Per-flow policy (docs/protocol.md#flow-policy): a UDP flow matched by a `duplicate`
/// rule on both ends (a call: 100 packets a second) crosses two paths, one of which is
/// blackholed silently halfway. Every packet arrives, once.
#[test]
fn a_duplicated_udp_flow_loses_nothing_when_a_path_fails() {
    use std::collections::BTreeMap;

    if !root() {
        return;
    }
    let _serial = serial();
    const PORT_CALL: u16 = 5004;
    const PACKETS: u32 = 600;
    let t = Tunnel::start(TunnelSpec {
        policy: "[[policy]]\nprotocol = \"udp\"\nports = [5004]\naction = \"duplicate\"\n\n",
        ..TunnelSpec::new('d', two_paths_at_40())
    });
    let to = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), PORT_CALL);
    let receiver = t
        .topo
        .lan_host()
        .spawn_thread("call-rx", move || {
            let sock = UdpSocket::bind(("0.0.0.0", PORT_CALL)).expect("bind");
            sock.set_read_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            let mut seen: BTreeMap<u32, u32> = BTreeMap::new();
            let mut buf = [0u8; 2048];
            while let Ok(n) = sock.recv(&mut buf) {
                if let Some(b) = buf.get(..4).filter(|_| n >= 4) {
                    let seq = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                    *seen.entry(seq).or_insert(0) += 1;
                }
            }
            seen
        })
        .expect("receiver thread");
    std::thread::sleep(Duration::from_millis(200));
    let path0 = t.topo.path(0).expect("path 0");
    let sender = t
        .topo
        .remote_host()
        .spawn_thread("call-tx", move || {
            let sock = UdpSocket::bind("0.0.0.0:0").expect("bind");
            let start = Instant::now();
            for seq in 0..PACKETS {
                let due = start + Duration::from_millis(10) * seq;
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                let mut p = [0u8; 200];
                p[..4].copy_from_slice(&seq.to_be_bytes());
                sock.send_to(&p, to).expect("send");
            }
        })
        .expect("sender thread");
    std::thread::sleep(Duration::from_secs(3));
    path0.blackhole(true).expect("blackhole path 0");
    sender.join().expect("sender").expect("sender namespace");
    let seen = receiver
        .join()
        .expect("receiver")
        .expect("receiver namespace");
    path0.blackhole(false).expect("unblackhole");
    let missing: Vec<u32> = (0..PACKETS).filter(|s| !seen.contains_key(s)).collect();
    let twice = seen.values().filter(|n| **n > 1).count();
    eprintln!(
        "duplicated call over two paths, path 0 blackholed at 3 s: {} of {PACKETS} arrived, missing {missing:?}, {twice} twice",
        seen.len()
    );
    assert!(missing.is_empty(), "lost {missing:?}");
    assert_eq!(twice, 0, "delivered twice");
    t.shutdown();
}

/// Bytes received on interface `dev` of `ns` so far (`ip -s -j link`).
fn rx_bytes(ns: &Namespace, dev: &str) -> u64 {
    let out = ns
        .ip(["-s", "-j", "link", "show", "dev", dev])
        .expect("ip -s link");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ip -j output");
    v[0]["stats64"]["rx"]["bytes"].as_u64().unwrap_or(0)
}

/// Pattern paths (docs/tunnel-config.md, `devices`; docs/protocol.md#binding): the
/// client has a fixed path 0 and a pattern path `devices = "p?"` whose server only `p1`
/// routes to. At start the pattern opens path 1 on `p1`; `p1` is taken down (the path
/// closes, its socket with it) and a 60 MB download starts over path 0; 1.5 s in, `p1`
/// comes up with its route again: a path opens on it, is validated and carries data
/// (the time from the interface's route to the first data arriving on it is measured);
/// 3 s later `p1` goes down again and the path closes; the download arrives intact.
#[test]
fn a_matching_interface_that_appears_mid_download_joins_and_leaves() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec {
        pattern_paths: &[1],
        ..TunnelSpec::new('m', two_paths_at_40())
    });
    let client_ns = t.topo.clients()[0].client();
    let dev = t.topo.path(1).expect("path 1").client_dev();
    let st = t.clients[0].status().expect("client status");
    let s = &st.sessions[0];
    eprintln!("at start: path events {:?}", s.path_events);
    for c in &s.path_changes {
        eprintln!(
            "  change at {:.3} s: {} {:?} {}: {}",
            c.at_s, c.path, c.id, c.event, c.why
        );
    }
    assert_eq!(
        s.path_events.opened, 1,
        "the pattern opened path 1 on {dev}"
    );
    assert!(
        s.paths
            .iter()
            .any(|p| p.id == 1 && p.name == format!("p1:{dev}")),
        "{:?}",
        s.paths
    );
    let routes = client_ns
        .exec_output(["ip", "-4", "route", "show", "dev", &dev])
        .expect("ip route");
    let routes: Vec<String> = String::from_utf8_lossy(&routes.stdout)
        .lines()
        .filter(|l| !l.contains("proto kernel"))
        .map(str::to_owned)
        .collect();
    assert!(!routes.is_empty(), "no route through {dev}");

    // The interface goes before the download: the path closes.
    client_ns
        .ip(["link", "set", &dev, "down"])
        .expect("link down");
    t.clients[0].wait_for("path 1 closed", |s| {
        s.sessions[0].path_events.closed == 1 && s.sessions[0].paths.iter().all(|p| p.id != 1)
    });

    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let (got, joined, server_tx_1) = std::thread::scope(|scope| {
        let events = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            let base = rx_bytes(client_ns, &dev);
            let link_up = Instant::now();
            client_ns.ip(["link", "set", &dev, "up"]).expect("link up");
            for r in &routes {
                let mut args = vec!["route", "replace"];
                args.extend(r.split_whitespace());
                client_ns.ip(args).expect("route back");
            }
            let up = Instant::now();
            eprintln!("{dev} up and its route back in {:?}", up - link_up);
            // First data on the new path: more than 10 kB (seven full datagrams; probes,
            // ARP and challenges are far smaller) received on the interface.
            let mut first_data = None;
            while up.elapsed() < Duration::from_secs(5) {
                if rx_bytes(client_ns, &dev) > base + 10_000 {
                    first_data = Some(up.elapsed());
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            // What the server sent on path 1 while it was there.
            std::thread::sleep(Duration::from_millis(3000));
            let server_tx_1 = t
                .server()
                .status()
                .ok()
                .and_then(|st| {
                    st.sessions
                        .first()?
                        .paths
                        .iter()
                        .find(|p| p.id == 1)
                        .map(|p| p.tx_packets)
                })
                .unwrap_or(0);
            client_ns
                .ip(["link", "set", &dev, "down"])
                .expect("link down again");
            (first_data, server_tx_1)
        });
        let got = transfer(
            t.topo.remote_host(),
            t.topo.lan_host(),
            dst,
            60_000_000,
            49,
            "60 MB to the client while a matching interface comes and goes",
        );
        let (joined, tx) = events.join().expect("link thread");
        (got, joined, tx)
    });
    assert_eq!(got.bytes, 60_000_000);
    let joined = joined.expect("no data on the new path within 5 s of its interface coming up");
    eprintln!(
        "interface {dev} up with its route -> first data on the new path after {joined:?} \
         (measured from the route's return; the time to bring the link up and restore the \
         route is printed above); the server sent {server_tx_1} datagrams on it in the 3 s after"
    );
    assert!(
        server_tx_1 > 100,
        "the server striped the download onto the new path: {server_tx_1}"
    );
    let st = t.clients[0].wait_for("path 1 closed again", |s| {
        s.sessions[0].path_events.closed == 2
    });
    let s = &st.sessions[0];
    for c in &s.path_changes {
        eprintln!(
            "  change at {:.3} s: {} {:?} {}: {}",
            c.at_s, c.path, c.id, c.event, c.why
        );
    }
    assert_eq!(s.path_events.opened, 2);
    assert!(s.paths.iter().all(|p| p.id != 1));
    let server = t.server().status().expect("server status");
    eprintln!("server path events {:?}", server.sessions[0].path_events);
    assert!(server.sessions[0].path_events.withdrawn >= 2);
    t.shutdown();
}

/// Server names (docs/tunnel-config.md, `server`): each client path names its server
/// (`plait-p{i}.test`, from the client namespace's hosts file), resolved at start. Then,
/// mid-download, path 1's router blackholes everything and its name now resolves to the
/// server's address on path 0's network: path 1 goes down, the client resolves the names
/// again, moves path 1 to the new address (validated by the server as any new address)
/// and the path is active again; the download arrives intact.
#[test]
fn a_server_name_is_resolved_at_start_and_again_when_its_path_fails() {
    if !root() {
        return;
    }
    let _serial = serial();
    let t = Tunnel::start(TunnelSpec {
        named_servers: true,
        ..TunnelSpec::new('n', two_paths_at_40())
    });
    let p0 = t.topo.path(0).expect("path 0").server_addr();
    let p1 = t.topo.path(1).expect("path 1").server_addr();
    let st = t.clients[0].status().expect("client status");
    let remotes: Vec<Option<String>> = st.sessions[0]
        .paths
        .iter()
        .map(|p| p.remote.clone())
        .collect();
    eprintln!("remotes at start: {remotes:?}");
    assert_eq!(
        remotes,
        vec![
            Some(SocketAddr::new(p0, PORT).to_string()),
            Some(SocketAddr::new(p1, PORT).to_string())
        ]
    );
    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    let path1 = t.topo.path(1).expect("path 1");
    let hosts = &t.hosts[0];
    let moved = std::thread::scope(|scope| {
        let events = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            hosts.set(&format!("{p0} plait-p0.test\n{p0} plait-p1.test\n"));
            path1.blackhole(true).expect("blackhole on");
            let at = Instant::now();
            let want = SocketAddr::new(p0, PORT).to_string();
            while at.elapsed() < Duration::from_secs(25) {
                if let Ok(st) = t.clients[0].status()
                    && st.sessions[0].paths.iter().any(|p| {
                        p.id == 1 && p.state == "active" && p.remote.as_deref() == Some(&want)
                    })
                {
                    return Some(at.elapsed());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        });
        transfer(
            t.topo.remote_host(),
            t.topo.lan_host(),
            dst,
            60_000_000,
            50,
            "60 MB to the client while path 1's server moves",
        );
        events.join().expect("event thread")
    });
    let st = t.clients[0].status().expect("client status");
    for c in &st.sessions[0].path_changes {
        eprintln!(
            "  change at {:.3} s: {} {:?} {}: {}",
            c.at_s, c.path, c.id, c.event, c.why
        );
    }
    let moved = moved.expect("path 1 never became active at its new address");
    eprintln!("blackhole and new name -> path 1 active at the new address after {moved:?}");
    assert!(
        st.sessions[0]
            .path_changes
            .iter()
            .any(|c| c.id == Some(1) && c.event == "server moved"),
        "{:?}",
        st.sessions[0].path_changes
    );
    path1.blackhole(false).expect("blackhole off");
    t.shutdown();
}

/// The bound on paths (docs/tunnel-config.md#pattern-paths): path 0 fixed, path 1 the
/// pattern `devices = "p?"`. Sixteen interfaces `pa` … `pp` (veths) appear, each with a
/// route to the pattern's server (in a table of its own, so that nothing is routed
/// through them): the first 14 get paths 2 to 15, the last two are refused (one log line
/// each) and the daemon runs on. One dummy with a path goes: its path closes and the first
/// refused interface takes the id. The tunnel still carries a transfer intact. (Their
/// paths lead nowhere: they stay probing, which costs the tunnel nothing but probes.)
#[test]
fn interfaces_beyond_sixteen_paths_are_refused_and_nothing_breaks() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec {
        pattern_paths: &[1],
        ..TunnelSpec::new('q', two_paths_at_40())
    });
    let client_ns = t.topo.clients()[0].client();
    let server = t.topo.path(1).expect("path 1").server_addr().to_string();
    let names: Vec<String> = (b'a'..=b'p').map(|c| format!("p{}", c as char)).collect();
    for (i, n) in names.iter().enumerate() {
        // A veth pair inside the namespace (the dummy driver may be missing): `pX`
        // matches the pattern, its peer `xX` does not; both up, so `pX` has a carrier.
        let peer = n.replacen('p', "x", 1);
        client_ns
            .ip([
                "link",
                "add",
                n.as_str(),
                "type",
                "veth",
                "peer",
                "name",
                peer.as_str(),
            ])
            .expect("veth");
        client_ns
            .ip(["link", "set", peer.as_str(), "up"])
            .expect("up");
        client_ns.ip(["link", "set", n.as_str(), "up"]).expect("up");
        let table = (200 + i).to_string();
        client_ns
            .ip([
                "route",
                "add",
                &format!("{server}/32"),
                "dev",
                n.as_str(),
                "table",
                &table,
            ])
            .expect("route");
    }
    let st = t.clients[0].wait_for("14 more paths and 2 refused", |s| {
        let e = &s.sessions[0].path_events;
        e.opened == 15 && e.refused == 2
    });
    let s = &st.sessions[0];
    assert_eq!(s.paths.len(), 16, "{:?}", s.paths);
    let refused: Vec<&str> = s
        .path_changes
        .iter()
        .filter(|c| c.event == "refused")
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(refused, vec!["p1:po", "p1:pp"]);
    for c in s.path_changes.iter().filter(|c| c.event == "refused") {
        eprintln!("  {} {}: {}", c.path, c.event, c.why);
    }
    let log = std::fs::read_to_string(&t.clients[0].log).unwrap_or_default();
    assert_eq!(
        log.matches("no path for this interface").count(),
        2,
        "one log line per refused interface"
    );
    // `pa` (path 2) goes (with its peer): `po` takes id 2.
    client_ns.ip(["link", "del", "pa"]).expect("del pa");
    let st = t.clients[0].wait_for("po on path 2", |s| {
        s.sessions[0]
            .paths
            .iter()
            .any(|p| p.id == 2 && p.name == "p1:po")
    });
    assert_eq!(st.sessions[0].path_events.closed, 1);
    assert_eq!(st.sessions[0].path_events.opened, 16);
    assert_eq!(st.sessions[0].paths.len(), 16);
    let dst = SocketAddr::new(t.topo.site0().lan_host_addr(Family::V4), 5000);
    transfer(
        t.topo.remote_host(),
        t.topo.lan_host(),
        dst,
        10_000_000,
        51,
        "10 MB with 16 paths, 14 of them leading nowhere",
    );
    for n in &names[1..] {
        client_ns
            .ip(["link", "del", n.as_str()])
            .expect("del dummy");
    }
    t.clients[0].wait_for("only the two real paths", |s| {
        s.sessions[0].paths.len() == 2
    });
    t.shutdown();
}

/// What [`upload_through_a_handover`] saw of the watched path.
struct HandoverRun {
    /// From the change to the path's handover, as the client's status showed it.
    after: Duration,
    /// Why it was handed over, and its status then.
    why: String,
    at: PathStatus,
    /// Datagrams it sent in the second after.
    during: u64,
    /// Datagrams it sent during the upload after the cause cleared.
    carried_after: u64,
    /// Its handover at the end (`None`: handed back).
    handover_at_end: Option<String>,
    /// The server's handover of the same path id: when its status first showed one after
    /// the change (within 4 s of the client's), and why; and at the end of the second
    /// upload.
    server: Option<(Duration, String)>,
    server_at_end: Option<String>,
}

impl HandoverRun {
    /// What both handover tests ask after the handover: probes only meanwhile (at most 60
    /// datagrams a second), handed back, and carrying the second upload.
    fn check_handed_back_and_carrying(&self) {
        assert!(
            self.during <= 60,
            "{} datagrams a second on a handed-over path",
            self.during
        );
        assert_eq!(self.handover_at_end, None, "handed back");
        assert!(
            self.carried_after > 1000,
            "the path carries again: {} datagrams",
            self.carried_after
        );
    }
}

/// The shape of both handover tests between real daemons (docs/protocol.md#handover): a
/// 20 MB upload from the lan host; `after` into it `degrade` runs, and the client's status
/// is watched (every 50 ms, up to 4 s) for the watched path (`path` picks it out of a
/// snapshot) to be handed over; a second later its datagrams are counted. Meanwhile (and up
/// to 4 s after the client's handover) the server's status is watched for its handover of
/// the same path id. The upload must arrive intact. Then `restore` runs, the path is given
/// up to 10 s to be handed back, and a second 20 MB upload counts what it carries.
fn upload_through_a_handover(
    t: &Tunnel,
    path: &dyn Fn(&StatusSnapshot) -> PathStatus,
    after: Duration,
    degrade: &dyn Fn(),
    restore: &dyn Fn(),
    what: &str,
) -> HandoverRun {
    let status = || t.clients[0].status().expect("client status");
    let dst = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5001);
    let sink = TcpSink::start(t.topo.remote_host(), dst).expect("sink");
    let seed = 31;
    let (sent, (handed_over, during, server)) = std::thread::scope(|s| {
        let sender = s.spawn(|| tcp_send(t.topo.lan_host(), dst, 20_000_000, seed));
        std::thread::sleep(after);
        degrade();
        let changed_at = Instant::now();
        let mut handed_over = None;
        while changed_at.elapsed() < Duration::from_secs(4) {
            std::thread::sleep(Duration::from_millis(50));
            let p = path(&status());
            if let Some(why) = p.handover.clone() {
                handed_over = Some((changed_at.elapsed(), why, p));
                break;
            }
        }
        // Over the next second, only probes (and answers to the server's) on the path.
        let sent_then = handed_over.as_ref().map(|(_, _, p)| p.tx_packets);
        let id = handed_over.as_ref().map(|(_, _, p)| p.id);
        let mut server = None;
        let mut during = None;
        let watch_from = Instant::now();
        while let Some(id) = id {
            // Every 50 ms, and once at the second's mark for `during`.
            let to_mark = Duration::from_secs(1).saturating_sub(watch_from.elapsed());
            let tick = if during.is_none() && !to_mark.is_zero() {
                to_mark.min(Duration::from_millis(50))
            } else {
                Duration::from_millis(50)
            };
            std::thread::sleep(tick);
            if during.is_none() && watch_from.elapsed() >= Duration::from_secs(1) {
                during = sent_then.map(|n| path(&status()).tx_packets.saturating_sub(n));
            }
            if server.is_none()
                && let Some(why) = server_handover(t, id)
            {
                server = Some((changed_at.elapsed(), why));
            }
            if during.is_some()
                && (server.is_some() || watch_from.elapsed() > Duration::from_secs(4))
            {
                break;
            }
        }
        (
            sender.join().expect("sender thread"),
            (handed_over, during, server),
        )
    });
    let sent = sent.unwrap_or_else(|e| panic!("upload, {what}: {e}"));
    let got = sink.wait(Duration::from_secs(30)).expect("sink");
    check_transfer(&format!("20 MB, {what}"), &sent, &got, seed);
    let (after, why, at) =
        handed_over.unwrap_or_else(|| panic!("{what}: not handed over within 4 s"));
    let during = during.expect("measured");
    eprintln!(
        "{what}: handed over {:.2} s after the change ({why}, signal {:?}); it sent {during} \
         datagrams in the next second",
        after.as_secs_f64(),
        at.signal
    );

    // The cause gone: handed back after its hold, and carrying the next upload.
    restore();
    let back_by = Instant::now() + Duration::from_secs(10);
    while path(&status()).handover.is_some() && Instant::now() < back_by {
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = path(&status()).tx_packets;
    let dst2 = SocketAddr::new(t.topo.remote_host_addr(Family::V4), 5002);
    transfer(
        t.topo.lan_host(),
        t.topo.remote_host(),
        dst2,
        20_000_000,
        32,
        &format!("20 MB after the cause cleared ({what})"),
    );
    let end = path(&status());
    let carried_after = end.tx_packets.saturating_sub(before);
    eprintln!(
        "{what}: the path sent {carried_after} datagrams during the second upload; the \
         server handed it over {server:?}"
    );
    HandoverRun {
        after,
        why,
        at,
        during,
        carried_after,
        handover_at_end: end.handover,
        server,
        server_at_end: server_handover(t, end.id),
    }
}

/// Why the server's session of the first client has path `id` handed over, if it has.
fn server_handover(t: &Tunnel, id: u8) -> Option<String> {
    let status = t.server().status().expect("server status");
    let session = status.sessions.first()?;
    session.paths.iter().find(|p| p.id == id)?.handover.clone()
}

/// Quality-driven handover (docs/protocol.md#handover) between real daemons: two 20 Mbit/s
/// paths with `handover = true` at both ends; 1.5 s into a 20 MB upload path 0 starts
/// losing 30 % of packets both ways (the test bed's emulator). The client, the sender's
/// gateway, hands path 0 over within 3.5 s (its status says why) and sends nothing but probes
/// there meanwhile; the upload arrives intact. With the loss gone, a second upload sees path
/// 0 handed back and carrying again. (At 40 Mbit/s a path each, the debug-build daemons,
/// the emulator and the test's own sender and sink filled this machine's two cores: both
/// paths went down at the same instant now and then, and the clean one was handed over for
/// blackouts.)
#[test]
fn a_path_that_starts_losing_is_handed_over_and_back() {
    use plait_testbed::Direction;
    use plait_testbed::emulate::{LinkModel, LossModel};
    if !root() {
        return;
    }
    let _serial = serial();
    let delay = Duration::from_millis(5);
    let path = || {
        PathSpec::v4()
            .rate(20.0)
            .delay_in(Direction::Up, delay)
            .delay_in(Direction::Down, delay)
    };
    let t = Tunnel::start(TunnelSpec {
        engine: "handover = true\n",
        ..TunnelSpec::new('q', TopologySpec::new(PREFIX, vec![path(), path()]))
    });
    let set_loss = |loss: f64| {
        let model = LinkModel {
            delay,
            loss: if loss > 0.0 {
                LossModel::Bernoulli { p: loss }
            } else {
                LossModel::None
            },
            seed: 7,
        };
        for dir in [Direction::Up, Direction::Down] {
            t.topo.set_path_model(0, dir, model).expect("loss");
        }
    };
    let run = upload_through_a_handover(
        &t,
        &|s| s.sessions[0].paths[0].clone(),
        Duration::from_millis(1500),
        &|| set_loss(0.3),
        &|| set_loss(0.0),
        "path 0 losing 30 %",
    );
    // Loss, or the downs a link losing 30 % both ways has (the reason turns to loss as its
    // average grows; docs/protocol.md#handover, "blackouts").
    assert!(run.why == "loss" || run.why == "blackouts", "{}", run.why);
    // Measured 0.51-2.30 s over eleven runs (2.30 s once, in a full test run on a loaded
    // machine), 0.53-2.22 s over twelve with two or four busy loops competing: a second's
    // loss average, plus a hold when the path goes down meanwhile.
    assert!(
        run.after < Duration::from_millis(3500),
        "handed over after {:?}",
        run.after
    );
    run.check_handed_back_and_carrying();
    t.shutdown();
}

/// Handover on the link layer's signal (docs/protocol.md#handover, "signal";
/// docs/tunnel-config.md, `link_signal_file`): path 0 is a pattern path on its interface,
/// path 1 a fixed path with no interface of its own (no signal: a wired link). The client
/// reads its paths' signal from a file in `/proc/net/wireless`'s format, which the test
/// writes: a strong level (-50 dBm), then a weak one (-95 dBm, 0.08 of the scale) during
/// an upload. Path 0 is handed over for its weak signal and carries only probes; the
/// level back at -50 dBm, it is handed back and carries the next upload. The server hears
/// the signal in the client's registration and hands the path over too, then back.
#[test]
fn a_weak_wifi_signal_hands_the_path_over_and_a_strong_one_back() {
    if !root() {
        return;
    }
    let _serial = serial();
    let mut t = Tunnel::start(TunnelSpec {
        pattern_paths: &[0],
        engine: "handover = true\n",
        ..TunnelSpec::new(
            'y',
            TopologySpec::new(PREFIX, vec![PathSpec::v4().rate(20.0); 2]),
        )
    });
    let dev = t.topo.path(0).expect("path 0").client_dev();
    let name = format!("p0:{dev}");
    let wireless = t.dir.path().join(WIRELESS);
    let set_level = |dbm: i32| {
        let text = format!(
            "Inter-| sta-|   Quality        |   Discarded packets               | Missed | WE\n \
             face | tus | link level noise |  nwid  crypt   frag  retry   misc | beacon | 22\n\
             {dev:>6}: 0000   {:>3}.  {dbm:>3}.  -256        0      0      0      0      0        0\n",
            (dbm + 110).clamp(0, 70)
        );
        // Whole or not at all: the daemon may read it at any moment.
        let tmp = t.dir.path().join("wireless.tmp");
        std::fs::write(&tmp, text).expect("write the signal file");
        std::fs::rename(&tmp, &wireless).expect("rename the signal file");
    };
    let wifi = |s: &StatusSnapshot| {
        s.sessions[0]
            .paths
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("no path {name}: {:?}", s.sessions[0].paths))
    };
    set_level(-50);
    t.clients[0].wait_for("path 0's signal read", |s| {
        s.sessions[0]
            .paths
            .iter()
            .any(|p| p.name == name && p.signal.is_some_and(|x| x > 0.8))
    });
    let run = upload_through_a_handover(
        &t,
        &wifi,
        Duration::from_secs(1),
        &|| set_level(-95),
        &|| set_level(-50),
        "path 0's level at -95 dBm",
    );
    assert_eq!(run.why, "weak signal");
    assert!(
        run.at.signal.is_some_and(|x| x < 0.2),
        "{:?}",
        run.at.signal
    );
    // One read a second, then at most one judging period.
    assert!(
        run.after < Duration::from_secs(3),
        "handed over after {:?}",
        run.after
    );
    run.check_handed_back_and_carrying();
    // The server heard the signal in the client's registration (docs/protocol.md#registration)
    // and handed the path over too, then back.
    let (server_after, server_why) = run.server.clone().expect("the server handed the path over");
    assert_eq!(server_why, "weak signal");
    // The client's read (once a second), its sample for the registration (once a second),
    // the registration's trip and one judging period.
    assert!(
        server_after < Duration::from_secs(4),
        "the server handed over after {server_after:?}"
    );
    assert_eq!(run.server_at_end, None, "the server handed it back");
    t.shutdown();
}
