//! Issue 16's least-privilege check, end to end: the real `plait server` and `plait client`
//! in network namespaces, with the default `[security]` (capabilities cut to CAP_NET_ADMIN,
//! no_new_privs, the seccomp allow-list with `kill`), doing everything a daemon does after
//! set-up: packet mode (UDP through the tunnel), stream mode through the client's
//! transparent listener and through SOCKS5 with names the server resolves (from its hosts
//! file and from a DNS server), and at SIGTERM the undo of the client's policy rules,
//! routes and nftables table and of the server's NAT table and IP forwarding sysctl. Any
//! system call missing from the list kills a daemon with SIGSYS, which this test reports.
//!
//! The server's name service is the test's own: `ip netns exec` bind-mounts
//! `/etc/netns/NAME/{hosts,resolv.conf}` over `/etc`, and a small DNS responder in the
//! remote host's namespace answers one name.
//!
//! Invariants: every resource the test makes is owned by a guard (daemons, namespaces, the
//! `/etc/netns/NAME` directory, temporary files), so a failure leaves nothing behind.
//! Needs root; otherwise prints "skipped: needs root (network namespaces)" and passes.

mod netns_support;

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use netns_support::daemon::{Daemon, assert_clean};
use netns_support::write_key;
use plait_testbed::{
    Family, Namespace, PathSpec, RttProbe, SKIP_NO_ROOT, TcpSink, Topology, TopologySpec, UdpEcho,
    cleanup_stale, have_root, tcp_send,
};
use plait_tunnel::keys::Key;

const PREFIX: &str = "plp";
const PORT: u16 = 7744;
const SOCKS5: &str = "127.0.0.1:1080";
/// Resolved by the server from its hosts file.
const HOSTS_NAME: &str = "remote-by-hosts.plait.test";
/// Resolved by the server from the test's DNS responder.
const DNS_NAME: &str = "remote-by-dns.plait.test";
/// Resolved by nobody.
const NO_NAME: &str = "nowhere.plait.test";
/// The server's metrics endpoint (inside its namespace).
const METRICS: &str = "127.0.0.1:9477";
/// The capability sets every daemon thread must have after set-up: CAP_NET_ADMIN (bit 12)
/// alone, in all five sets.
const NET_ADMIN_ONLY: &str = "0000000000001000";

/// Every thread of the daemon has no_new_privs, the seccomp filter (both of plait's)
/// and exactly CAP_NET_ADMIN in every capability set.
fn assert_locked_down(daemon: &Daemon) {
    let pid = daemon.child.id();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks");
    let mut n = 0;
    for task in tasks {
        let task = task.expect("task").path();
        // A thread that ended between the listing and this read (a short-lived worker,
        // such as a control connection's) holds nothing any more: skipped.
        let status = match std::fs::read_to_string(task.join("status")) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {}: {e}", daemon.label, task.display()),
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(str::trim)
                .unwrap_or_else(|| panic!("{}: no {name} in {}", daemon.label, task.display()))
                .to_owned()
        };
        let thread = format!("{} thread {}", daemon.label, field("Name"));
        assert_eq!(field("NoNewPrivs"), "1", "{thread}: NoNewPrivs");
        assert_eq!(field("Seccomp"), "2", "{thread}: Seccomp (2 = filter)");
        assert_eq!(field("Seccomp_filters"), "2", "{thread}: Seccomp_filters");
        for set in ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"] {
            assert_eq!(field(set), NET_ADMIN_ONLY, "{thread}: {set}");
        }
        n += 1;
    }
    eprintln!(
        "{}: {n} threads, each NoNewPrivs 1, Seccomp 2, capabilities {NET_ADMIN_ONLY}",
        daemon.label
    );
    assert!(n > 0, "{}: no thread was checked", daemon.label);
}

/// `/etc/netns/NAME/` (hosts and resolv.conf for `ip netns exec NAME`), removed on drop,
/// with `/etc/netns` if this made it.
struct NetnsEtc {
    dir: PathBuf,
    made_parent: bool,
}

impl NetnsEtc {
    fn create(ns: &Namespace, hosts: &str, resolv: &str) -> NetnsEtc {
        let parent = Path::new("/etc/netns");
        let made_parent = !parent.exists();
        let dir = parent.join(ns.name());
        std::fs::create_dir_all(&dir).expect("/etc/netns/NAME");
        let guard = NetnsEtc { dir, made_parent };
        std::fs::write(guard.dir.join("hosts"), hosts).expect("hosts");
        std::fs::write(guard.dir.join("resolv.conf"), resolv).expect("resolv.conf");
        guard
    }
}

impl Drop for NetnsEtc {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if self.made_parent {
            // Only if empty: another test may have made its own directory there since.
            let _ = std::fs::remove_dir("/etc/netns");
        }
    }
}

/// A DNS responder on UDP port 53: `DNS_NAME` A → `answer`, other A/AAAA questions about
/// it → no data, anything else → NXDOMAIN. Stops when dropped.
struct Dns {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dns {
    fn start(ns: &Namespace, bind: SocketAddr, answer: Ipv4Addr) -> Dns {
        let socket = ns
            .run_in(move || UdpSocket::bind(bind))
            .expect("enter namespace")
            .expect("bind DNS");
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !stop2.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                if let Some(reply) = dns_reply(&buf[..n], answer) {
                    let _ = socket.send_to(&reply, from);
                }
            }
        });
        Dns {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reply to one query (RFC 1035 §4.1), or `None` for something that is not one.
fn dns_reply(query: &[u8], answer: Ipv4Addr) -> Option<Vec<u8>> {
    let header = query.get(..12)?;
    if header[2] & 0x80 != 0 || header[4..6] != [0, 1] {
        return None;
    }
    // The question: labels, then type and class.
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question_end = at + 4;
    let question = query.get(12..question_end)?;
    let ours = labels.join(".") == DNS_NAME;
    let mut reply = Vec::with_capacity(question_end + 16);
    reply.extend_from_slice(&header[..2]);
    // QR, opcode 0, RD copied; RA; RCODE 0 or 3 (NXDOMAIN).
    reply.push(0x80 | (header[2] & 0x01));
    reply.push(if ours { 0x80 } else { 0x83 });
    let answers: u16 = if ours && qtype == 1 { 1 } else { 0 };
    for count in [1u16, answers, 0, 0] {
        reply.extend_from_slice(&count.to_be_bytes());
    }
    reply.extend_from_slice(question);
    if answers == 1 {
        // Name: pointer to the question's; type A, class IN, TTL 60, 4 bytes.
        reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        reply.extend_from_slice(&answer.octets());
    }
    Some(reply)
}

/// A TCP echo server on the remote host, for the SOCKS5 connections; stops when dropped.
struct Echo {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start(ns: &Namespace, addr: SocketAddr) -> Echo {
        let listener = ns
            .run_in(move || TcpListener::bind(addr))
            .expect("enter namespace")
            .expect("bind echo");
        listener.set_nonblocking(true).expect("non-blocking");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                std::thread::spawn(move || {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 || conn.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Echo {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// From the client host: SOCKS5 (no authentication) CONNECT to `name:port` through the
/// client's listener, then one message: whether it came back from the echo server. (The
/// client answers the request at once; a name the server cannot resolve resets the
/// connection afterwards, docs/tunnel.md#stream-mode.)
fn socks5_echo_by_name(client: &Namespace, name: &'static str, port: u16) -> bool {
    client
        .run_in(move || {
            let mut s = TcpStream::connect(SOCKS5).expect("connect to SOCKS5");
            s.set_read_timeout(Some(Duration::from_secs(15)))
                .expect("timeout");
            s.write_all(&[5, 1, 0]).expect("greeting");
            let mut choice = [0u8; 2];
            s.read_exact(&mut choice).expect("method choice");
            assert_eq!(choice, [5, 0], "SOCKS5 method");
            let mut req = vec![5, 1, 0, 3, u8::try_from(name.len()).expect("short name")];
            req.extend_from_slice(name.as_bytes());
            req.extend_from_slice(&port.to_be_bytes());
            s.write_all(&req).expect("request");
            let mut head = [0u8; 4];
            s.read_exact(&mut head).expect("reply");
            let rest = match head[3] {
                1 => 4 + 2,
                4 => 16 + 2,
                _ => panic!("{name}: reply address type {}", head[3]),
            };
            let mut bound = vec![0u8; rest];
            s.read_exact(&mut bound).expect("bound address");
            assert_eq!(head[1], 0, "{name}: SOCKS5 reply code");
            let msg = format!("hello {name} through SOCKS5 under seccomp");
            // A name the server cannot resolve may reset the connection before this
            // write (the lookup can fail fast): that too means "did not come back".
            if let Err(e) = s.write_all(msg.as_bytes()) {
                eprintln!("{name}: sending through SOCKS5: {e}");
                return false;
            }
            let mut back = vec![0u8; msg.len()];
            s.read_exact(&mut back)
                .is_ok_and(|()| back == msg.as_bytes())
        })
        .expect("enter client namespace")
}

fn sysctl(ns: &Namespace, key: &str) -> String {
    let out = ns.exec(["sysctl", "-n", key]).expect("sysctl");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn daemons_run_locked_down_and_still_undo_their_configuration() {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return;
    }
    if let Err(e) = cleanup_stale(PREFIX) {
        eprintln!("cleaning up stale namespaces: {e}");
    }
    let topo = Topology::build(&TopologySpec::new(
        PREFIX,
        vec![PathSpec::v4().rate(40.0), PathSpec::v4().rate(40.0)],
    ))
    .expect("topology");
    let dir = tempfile::tempdir().expect("tempdir");
    let tun = format!("plp{}", std::process::id() % 1_000_000);
    let remote = match topo.remote_host_addr(Family::V4) {
        IpAddr::V4(a) => a,
        IpAddr::V6(_) => panic!("the remote host's IPv4 address"),
    };
    let _dns = Dns::start(topo.remote_host(), SocketAddr::from((remote, 53)), remote);
    let _etc = NetnsEtc::create(
        topo.server(),
        &format!("127.0.0.1 localhost\n{remote} {HOSTS_NAME}\n"),
        &format!("nameserver {remote}\noptions timeout:2 attempts:2\n"),
    );
    // The server turns IPv4 forwarding on for NAT and must turn it back off at stop.
    topo.server()
        .sysctl("net.ipv4.ip_forward", "0")
        .expect("forwarding off");

    let server_key = Key::generate().expect("key");
    let client_key = Key::generate().expect("key");
    let mut cfg = String::new();
    let _ = writeln!(
        cfg,
        "private_key_file = \"{}\"\nlisten = [\"0.0.0.0:{PORT}\"]\nnat = \"wan\"\n\n\
         [tun]\nname = \"{tun}\"\naddresses = [\"10.77.0.1/24\"]\n\n\
         [control]\nstatus_socket = \"{}\"\nmetrics = \"{METRICS}\"\n\n[streams]\n\n\
         [[client]]\nname = \"site0\"\npublic_key = \"{}\"\nallowed_ips = [\"10.77.0.2/32\", \"{}\"]\n",
        write_key(dir.path(), "server", &server_key),
        dir.path().join("server.sock").display(),
        client_key.public().to_base64(),
        topo.site0().lan_net(Family::V4),
    );
    let server_cfg = dir.path().join("server.toml");
    std::fs::write(&server_cfg, cfg).expect("server config");
    let mut server = Daemon::start(topo.server(), "server", "server", &server_cfg, &tun);
    server.wait_for("status socket", |_| true);

    let mut cfg = String::new();
    let _ = writeln!(
        cfg,
        "private_key_file = \"{}\"\nserver_public_key = \"{}\"\nroute = [\"{}\"]\n\n\
         [tun]\nname = \"{tun}\"\naddresses = [\"10.77.0.2/24\"]\n\n\
         [control]\nstatus_socket = \"{}\"\n\n[streams]\nsocks5 = \"{SOCKS5}\"\n",
        write_key(dir.path(), "client0", &client_key),
        server_key.public().to_base64(),
        topo.remote_net(Family::V4),
        dir.path().join("client0.sock").display(),
    );
    for path in topo.site0().paths() {
        let _ = writeln!(
            cfg,
            "[[path]]\nname = \"p{}\"\nserver = \"{}\"\n",
            path.index(),
            SocketAddr::new(path.server_addr(), PORT)
        );
    }
    let client_cfg = dir.path().join("client0.toml");
    std::fs::write(&client_cfg, cfg).expect("client config");
    let mut client = Daemon::start(topo.client(), "client", "client0", &client_cfg, &tun);
    client.wait_for("an established session on both paths", |s| {
        s.sessions.len() == 1
            && s.sessions[0].established
            && s.sessions[0].paths.iter().all(|p| p.state == "active")
    });
    assert_eq!(sysctl(topo.server(), "net.ipv4.ip_forward"), "1");

    // Packet mode: UDP from the LAN host to the remote host and back.
    let echo_at = SocketAddr::from((remote, 6001));
    let _udp_echo = UdpEcho::start(topo.remote_host(), echo_at).expect("UDP echo");
    let probe =
        RttProbe::start(topo.lan_host(), echo_at, Duration::from_millis(20)).expect("probe");
    std::thread::sleep(Duration::from_secs(1));
    let report = probe.stop().expect("probe report");
    assert!(
        report.samples.len() >= 10,
        "packet mode: {} UDP echoes answered in 1 s",
        report.samples.len()
    );

    // Stream mode, transparent: TCP from the LAN host, redirected to the client's relay.
    let dst = SocketAddr::from((remote, 5001));
    let sink = TcpSink::start(topo.remote_host(), dst).expect("sink");
    let sent = tcp_send(topo.lan_host(), dst, 3_000_000, 7).expect("transparent TCP");
    let got = sink.wait(Duration::from_secs(30)).expect("sink");
    assert_eq!(
        (got.bytes, got.sha256),
        (sent.bytes, sent.sha256),
        "3 MB intact"
    );

    // Stream mode through SOCKS5, by name: the server resolves (getaddrinfo on its resolver
    // threads) from its hosts file, from DNS, and fails for an unknown name.
    let _echo = Echo::start(topo.remote_host(), SocketAddr::from((remote, 5002)));
    assert!(
        socks5_echo_by_name(topo.client(), HOSTS_NAME, 5002),
        "{HOSTS_NAME}"
    );
    assert!(
        socks5_echo_by_name(topo.client(), DNS_NAME, 5002),
        "{DNS_NAME}"
    );
    assert!(
        !socks5_echo_by_name(topo.client(), NO_NAME, 5002),
        "{NO_NAME}"
    );
    eprintln!("SOCKS5 by name: from the hosts file and from DNS echoed, an unknown name reset");

    // The metrics endpoint answers (a thread of its own, started after the drop).
    let metrics = topo
        .server()
        .run_in(|| -> std::io::Result<String> {
            let mut s = TcpStream::connect(METRICS)?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            let mut text = String::new();
            s.read_to_string(&mut text)?;
            Ok(text)
        })
        .expect("enter server namespace")
        .expect("scrape metrics");
    assert!(metrics.contains("plait_"), "metrics: {metrics}");

    assert_locked_down(&server);
    assert_locked_down(&client);
    client.wait_for("the relay to count its connections", |s| {
        s.relay.is_some_and(|r| r.relayed >= 3)
    });

    // Stop: the undo runs under the filter, with only CAP_NET_ADMIN.
    let log = client.stop();
    assert!(log.contains("least privilege"), "client log: {log}");
    assert!(!log.contains("could not undo"), "client log: {log}");
    assert_clean(topo.client(), &tun, "client");
    let log = server.stop();
    assert!(!log.contains("could not"), "server log: {log}");
    assert_clean(topo.server(), &tun, "server");
    assert_eq!(
        sysctl(topo.server(), "net.ipv4.ip_forward"),
        "0",
        "the server restores IPv4 forwarding"
    );
}
