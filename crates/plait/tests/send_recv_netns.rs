//! `plait send` / `plait recv` end to end (issue 18, item 3): the real `plait server` and
//! `plait client` daemons over two emulated namespace paths (one with random loss), and
//! `plait recv` on the server's tunnel address fed by `plait send` on the client's side.
//!
//! - `send_recv_two_paths_with_loss`: a 24 MB file, SHA-256 equal;
//! - `send_recv_resume_after_receiver_killed`: the receiver is killed (SIGKILL) mid-transfer
//!   and restarted; the sender carries on, the file completes and is hash-equal, and the
//!   restarted receiver reports the chunks it already had;
//! - `measure_send_vs_tcp` (ignored, by hand): the same number of bytes with `plait send`
//!   through the tunnel, with kernel MPTCP over both paths and with one TCP flow on the
//!   best single path, on topologies/T1.toml and T3.toml (docs/fec.md).
//!
//! The tunnel setup is a small copy of tunnel_netns.rs's (one client, IPv4 only). Every
//! resource is owned by a guard (daemons → `ChildGuard`, namespaces → `Topology`, files →
//! `TempDir`). Needs root; otherwise each test prints the skip message and passes.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use plait_lab::bench::spec::testbed_spec;
use plait_testbed::emulate::LossModel;
use plait_testbed::traffic::TcpOptions;
use plait_testbed::{
    ChildGuard, Namespace, PathSpec, SendLimit, SendOptions, StreamProto, TcpSink, Topology,
    TopologySpec, tcp_send_opts,
};
use plait_topology::TopologyFile;
use plait_tunnel::keys::Key;
use tempfile::TempDir;

mod netns_support;

const PLAIT: &str = env!("CARGO_BIN_EXE_plait");
const PREFIX: &str = "psr";
const PORT: u16 = 7745;
const RECV_PORT: u16 = 7800;
const SERVER_TUN: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    netns_support::serial()
}

fn root() -> bool {
    netns_support::root(PREFIX)
}

/// A running process with its log file; killed on drop, log printed if the test fails.
struct Proc {
    label: String,
    child: ChildGuard,
    log: PathBuf,
}

impl Proc {
    fn start(ns: &Namespace, label: &str, dir: &Path, args: &[&str]) -> Proc {
        let log = dir.join(format!("{label}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let err = file.try_clone().expect("log file");
        let mut cmd: Command = ns.command(PLAIT);
        cmd.args(args)
            .env("RUST_LOG", "info")
            .stdout(file)
            .stderr(err);
        let child = ns.spawn(&mut cmd).expect("start plait");
        Proc {
            label: label.to_owned(),
            child,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        match self.child.wait_timeout(timeout) {
            Ok(Some(s)) => s,
            other => panic!(
                "{} did not exit within {timeout:?} ({other:?}); log:\n{}",
                self.label,
                self.log()
            ),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.child.kill();
        if std::thread::panicking() {
            let text = self.log();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "----- {} log, last {} lines -----\n{}\n-----",
                self.label,
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// Server and one client daemon over `paths`. Drops daemons, then namespaces, then files.
struct Tunnel {
    client: Option<Proc>,
    server: Option<Proc>,
    topo: Topology,
    dir: TempDir,
}

impl Tunnel {
    fn start(paths: Vec<PathSpec>) -> Tunnel {
        Tunnel::start_spec(&TopologySpec::new(PREFIX, paths), |_| {})
    }

    /// Builds `spec`, calls `prepare` on the bare topology (e.g. MPTCP endpoints), then
    /// starts the daemons.
    fn start_spec(spec: &TopologySpec, prepare: impl FnOnce(&Topology)) -> Tunnel {
        let topo = Topology::build(spec).expect("build topology");
        prepare(&topo);
        let dir = tempfile::tempdir().expect("tempdir");
        let tun = format!("psr{}", std::process::id() % 1_000_000);
        let server_key = Key::generate().expect("key");
        let client_key = Key::generate().expect("key");
        std::fs::write(
            dir.path().join("server.key"),
            format!("{}\n", server_key.to_base64()),
        )
        .expect("key");
        std::fs::write(
            dir.path().join("client.key"),
            format!("{}\n", client_key.to_base64()),
        )
        .expect("key");
        let server_cfg = dir.path().join("server.toml");
        std::fs::write(
            &server_cfg,
            format!(
                "private_key_file = \"server.key\"\nlisten = [\"0.0.0.0:{PORT}\"]\n\n[tun]\nname = \"{tun}\"\naddresses = [\"10.77.0.1/24\"]\n\n[control]\nstatus_socket = \"{}\"\n\n[[client]]\nname = \"site0\"\npublic_key = \"{}\"\nallowed_ips = [\"10.77.0.2/32\"]\n",
                dir.path().join("server.sock").display(),
                client_key.public().to_base64()
            ),
        )
        .expect("server config");
        let server = Proc::start(
            topo.server(),
            "server",
            dir.path(),
            &["server", "-c", server_cfg.to_str().expect("utf-8")],
        );
        let site = &topo.clients()[0];
        let mut cfg = format!(
            "private_key_file = \"client.key\"\nserver_public_key = \"{}\"\nroute = [\"{}\"]\n\n[tun]\nname = \"{tun}\"\naddresses = [\"10.77.0.2/24\"]\n\n[control]\nstatus_socket = \"{}\"\n",
            server_key.public().to_base64(),
            topo.remote_net(plait_testbed::Family::V4),
            dir.path().join("client.sock").display(),
        );
        for path in site.paths() {
            let _ = writeln!(
                cfg,
                "\n[[path]]\nname = \"p{}\"\nserver = \"{}\"",
                path.index(),
                SocketAddr::new(path.server_addr(), PORT)
            );
        }
        let client_cfg = dir.path().join("client.toml");
        std::fs::write(&client_cfg, cfg).expect("client config");
        // Key files are relative to the config's directory or the working directory:
        // give absolute paths to be safe.
        for f in [&server_cfg, &client_cfg] {
            let text = std::fs::read_to_string(f).expect("config");
            let text = text.replace(
                "private_key_file = \"",
                &format!("private_key_file = \"{}/", dir.path().display()),
            );
            std::fs::write(f, text).expect("config");
        }
        let client = Proc::start(
            site.client(),
            "client",
            dir.path(),
            &["client", "-c", client_cfg.to_str().expect("utf-8")],
        );
        let mut t = Tunnel {
            client: Some(client),
            server: Some(server),
            topo,
            dir,
        };
        t.wait_established(site_paths(&t));
        t
    }

    fn wait_established(&mut self, n: usize) {
        let sock = self.dir.path().join("client.sock");
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(c) = self.client.as_mut()
                && let Ok(Some(s)) = c.child.try_wait()
            {
                panic!("client exited early ({s}):\n{}", c.log());
            }
            match plait_tunnel::control::status::query(&sock) {
                Ok(s)
                    if s.sessions.len() == 1
                        && s.sessions[0].established
                        && s.sessions[0].paths.len() == n
                        && s.sessions[0].paths.iter().all(|p| p.state == "active") =>
                {
                    return;
                }
                Ok(s) => last = format!("{s:?}"),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("tunnel not up within 15 s; last status: {last}");
    }

    /// Per-path datagram counts from the client's status.
    fn path_counts(&self) -> String {
        let sock = self.dir.path().join("client.sock");
        match plait_tunnel::control::status::query(&sock) {
            Ok(s) => s.sessions[0]
                .paths
                .iter()
                .map(|p| format!("{}: tx {} datagrams", p.name, p.tx_packets))
                .collect::<Vec<_>>()
                .join(", "),
            Err(e) => e.to_string(),
        }
    }

    /// Where datagrams went missing: the client's send queue and paths, the server's
    /// losses and deliveries, and the server namespace's UDP receive errors (a full socket
    /// buffer at `plait recv`).
    fn diagnostics(&self) -> String {
        let mut out = String::new();
        for side in ["client", "server"] {
            let sock = self.dir.path().join(format!("{side}.sock"));
            match plait_tunnel::control::status::query(&sock) {
                Ok(st) => {
                    let s = &st.sessions[0];
                    let _ = write!(
                        out,
                        "{side}: delivered {}, late {}, queue_full {}, send queue drops {:?}, lost {:?}; paths:",
                        s.delivered, s.late, s.queue_full, s.send_queue_drops, s.lost
                    );
                    for p in &s.paths {
                        let _ = write!(
                            out,
                            " {} tx {} rx {} lost {} loss {:.3};",
                            p.name, p.tx_packets, p.rx_packets, p.lost_packets, p.loss
                        );
                    }
                    out.push('\n');
                }
                Err(e) => {
                    let _ = writeln!(out, "{side}: {e}");
                }
            }
        }
        let snmp = self
            .topo
            .server()
            .command("cat")
            .arg("/proc/net/snmp")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let udp: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Udp:")).collect();
        if let [names, values] = udp[..] {
            let pairs: Vec<String> = names
                .split_whitespace()
                .zip(values.split_whitespace())
                .skip(1)
                .filter(|(n, _)| ["InDatagrams", "InErrors", "RcvbufErrors"].contains(n))
                .map(|(n, v)| format!("{n} {v}"))
                .collect();
            let _ = writeln!(out, "server namespace UDP: {}", pairs.join(", "));
        }
        out
    }

    fn shutdown(mut self) {
        for p in [self.client.take(), self.server.take()]
            .into_iter()
            .flatten()
        {
            let mut p = p;
            let s = p
                .child
                .terminate(Duration::from_secs(5))
                .expect("terminate");
            assert!(s.success(), "{} exited with {s}", p.label);
        }
    }
}

fn site_paths(t: &Tunnel) -> usize {
    t.topo.clients()[0].paths().len()
}

/// A file of `len` pseudo-random bytes.
fn make_file(path: &Path, len: usize, seed: u64) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(len);
    std::fs::write(path, data).expect("write file");
}

fn sha256(path: &Path) -> String {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let d = ring_sha256(&data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn ring_sha256(data: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .to_vec()
}

fn recv_args(out: &Path) -> Vec<String> {
    vec![
        "recv".into(),
        "--listen".into(),
        format!("{SERVER_TUN}:{RECV_PORT}"),
        "--out".into(),
        out.display().to_string(),
        "--timeout".into(),
        "30".into(),
    ]
}

fn send_args(file: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "send".into(),
        file.display().to_string(),
        "--to".into(),
        format!("{SERVER_TUN}:{RECV_PORT}"),
        "--timeout".into(),
        "30".into(),
    ];
    // By hand: a rate cap (Mbit/s) for experiments with the rate control.
    if let Ok(cap) = std::env::var("PLAIT_SEND_MAX_RATE") {
        v.extend(["--max-rate".into(), cap]);
    }
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Two paths: 20 Mbit/s 20 ms RTT, and 10 Mbit/s 60 ms RTT with 3 % random loss.
fn lossy_paths() -> Vec<PathSpec> {
    vec![
        PathSpec::v4().rate(20.0).delay(Duration::from_millis(10)),
        PathSpec::v4()
            .rate(10.0)
            .delay(Duration::from_millis(30))
            .loss(LossModel::Bernoulli { p: 0.03 }),
    ]
}

/// Runs `plait send` to completion; returns its wall time.
fn run_transfer(t: &Tunnel, file: &Path, out: &Path, label: &str) -> Duration {
    let mut recv = Proc::start(
        t.topo.server(),
        &format!("{label}-recv"),
        t.dir.path(),
        &strs(&recv_args(out)),
    );
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let mut send = Proc::start(
        t.topo.clients()[0].client(),
        &format!("{label}-send"),
        t.dir.path(),
        &strs(&send_args(file)),
    );
    let s = send.wait(Duration::from_secs(180));
    let took = started.elapsed();
    assert!(s.success(), "plait send failed ({s}):\n{}", send.log());
    let r = recv.wait(Duration::from_secs(10));
    assert!(r.success(), "plait recv failed ({r}):\n{}", recv.log());
    let log = send.log();
    let lines: Vec<&str> = log.lines().collect();
    for l in &lines[lines.len().saturating_sub(3)..] {
        eprintln!("{l}");
    }
    eprintln!("{}", recv.log().lines().last().unwrap_or_default());
    took
}

#[test]
fn send_recv_two_paths_with_loss() {
    let _g = serial();
    if !root() {
        return;
    }
    let t = Tunnel::start(lossy_paths());
    let file = t.dir.path().join("big.bin");
    make_file(&file, 24_000_000, 1);
    let out = t.dir.path().join("out");
    std::fs::create_dir(&out).expect("out dir");
    let took = run_transfer(&t, &file, &out, "a");
    assert_eq!(
        sha256(&file),
        sha256(&out.join("big.bin")),
        "SHA-256 differs"
    );
    eprintln!(
        "24 MB in {:.2} s ({:.1} Mbit/s); {}",
        took.as_secs_f64(),
        24e6 * 8.0 / took.as_secs_f64() / 1e6,
        t.path_counts()
    );
    assert!(!out.join("big.bin.part").exists() && !out.join("big.bin.plait-state").exists());
    t.shutdown();
}

#[test]
fn send_recv_resume_after_receiver_killed() {
    let _g = serial();
    if !root() {
        return;
    }
    let t = Tunnel::start(lossy_paths());
    let file = t.dir.path().join("resume.bin");
    make_file(&file, 24_000_000, 2);
    let out = t.dir.path().join("out");
    std::fs::create_dir(&out).expect("out dir");
    let state = out.join("resume.bin.plait-state");
    let mut recv = Proc::start(
        t.topo.server(),
        "recv1",
        t.dir.path(),
        &strs(&recv_args(&out)),
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut send = Proc::start(
        t.topo.clients()[0].client(),
        "send",
        t.dir.path(),
        &strs(&send_args(&file)),
    );
    // Wait until a few chunks are on disk, then kill the receiver without warning.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no progress:\n{}", recv.log());
        let done = std::fs::read_to_string(&state)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("done ").map(|d| d.matches('1').count()))
            .unwrap_or(0);
        if done >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    recv.child.kill();
    let first = recv.log();
    drop(recv);
    std::thread::sleep(Duration::from_secs(2));
    let mut recv2 = Proc::start(
        t.topo.server(),
        "recv2",
        t.dir.path(),
        &strs(&recv_args(&out)),
    );
    let s = send.wait(Duration::from_secs(180));
    assert!(s.success(), "plait send failed ({s}):\n{}", send.log());
    let r = recv2.wait(Duration::from_secs(10));
    assert!(
        r.success(),
        "restarted plait recv failed ({r}):\n{}",
        recv2.log()
    );
    let log2 = recv2.log();
    assert!(
        log2.contains("resuming with"),
        "restarted receiver did not resume:\nfirst run:\n{first}\nsecond run:\n{log2}"
    );
    eprintln!(
        "{}",
        log2.lines()
            .find(|l| l.contains("resuming"))
            .unwrap_or_default()
    );
    eprintln!("{}", send.log().lines().last().unwrap_or_default());
    assert_eq!(
        sha256(&file),
        sha256(&out.join("resume.bin")),
        "SHA-256 differs"
    );
    drop(send);
    drop(recv2);
    t.shutdown();
}

/// One TCP or MPTCP flow of `bytes` from the client to the server's address on path
/// `best` (cubic, as `plait bench`); returns its duration from connect to the receiver's
/// close.
fn stream_transfer(t: &Tunnel, best: usize, proto: StreamProto, port: u16, bytes: usize) -> f64 {
    let addr = t.topo.path_server_addr(best).expect("path");
    // An MPTCP listener takes joins on every server address: bind the unspecified one.
    let bind = match proto {
        StreamProto::Mptcp => SocketAddr::from(([0, 0, 0, 0], port)),
        StreamProto::Tcp => SocketAddr::new(addr, port),
    };
    let tcp = TcpOptions {
        connect_timeout: Duration::from_secs(10),
        stall_timeout: Duration::from_secs(30),
        total_timeout: Duration::from_secs(600),
        ..TcpOptions::default()
    };
    let sink = TcpSink::start_proto(t.topo.server(), bind, tcp, proto).expect("sink");
    let sent = tcp_send_opts(
        t.topo.clients()[0].client(),
        SocketAddr::new(addr, port),
        9,
        SendOptions {
            tcp,
            proto,
            limit: Some(SendLimit::Bytes(bytes as u64)),
            congestion: Some("cubic".into()),
            ..SendOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{proto:?} transfer: {e}"));
    let got = sink.wait(Duration::from_secs(30)).expect("sink");
    assert_eq!(got.bytes, bytes as u64, "{proto:?} bytes");
    assert_eq!(got.sha256, sent.sha256, "{proto:?} SHA-256");
    sent.duration.as_secs_f64()
}

/// By hand (as root):
/// `PLAIT_SEND_BYTES=200000000 cargo test -p plait --test send_recv_netns measure -- --ignored --nocapture`.
/// On the test bed of topologies/T1.toml and topologies/T3.toml (as `plait bench` builds
/// them), one after the other on the same links: one TCP flow on the best path, one kernel
/// MPTCP flow over both paths (set up as `plait bench` does,
/// `Topology::setup_mptcp`), then `plait send` of a file of the same size through the tunnel.
/// Prints durations, the ratios and the symbol counters for docs/fec.md; asserts only that
/// every transfer arrived whole.
#[test]
#[ignore = "a throughput measurement: run by hand (see the doc comment)"]
fn measure_send_vs_tcp() {
    let _g = serial();
    if !root() {
        return;
    }
    let bytes: usize = std::env::var("PLAIT_SEND_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000_000);
    let only = std::env::var("PLAIT_SEND_TOPOLOGIES").unwrap_or_else(|_| "T1,T3".into());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
    for name in only.split(',') {
        let file = TopologyFile::load(&dir.join(format!("{name}.toml"))).expect("topology");
        let best = file.best_path();
        let spec = testbed_spec(&file, PREFIX, 1);
        let t = Tunnel::start_spec(&spec, |topo| {
            topo.setup_mptcp(best).expect("kernel MPTCP");
        });
        // PLAIT_SEND_ONLY=1: plait send alone (while working on it; the ratios then are NaN).
        let (tcp_s, mptcp_s) = if std::env::var_os("PLAIT_SEND_ONLY").is_some() {
            (f64::NAN, f64::NAN)
        } else {
            (
                stream_transfer(&t, best, StreamProto::Tcp, 5301, bytes),
                stream_transfer(&t, best, StreamProto::Mptcp, 5302, bytes),
            )
        };
        let data = t.dir.path().join("m.bin");
        make_file(&data, bytes, 3);
        let out = t.dir.path().join("out");
        std::fs::create_dir(&out).expect("out dir");
        let took = run_transfer(&t, &data, &out, name).as_secs_f64();
        assert_eq!(sha256(&data), sha256(&out.join("m.bin")));
        let mbit = |s: f64| bytes as f64 * 8.0 / s / 1e6;
        eprintln!(
            "MEASURE {name}: {bytes} bytes: plait send {took:.2} s ({:.1} Mbit/s), kernel MPTCP {mptcp_s:.2} s ({:.1} Mbit/s), one TCP flow on path {best} {tcp_s:.2} s ({:.1} Mbit/s); plait send / MPTCP {:.2}, plait send / TCP {:.2}, MPTCP / TCP {:.2}; sum of paths {:.0} Mbit/s: plait send {:.2}, MPTCP {:.2}, TCP {:.2} of it; {}",
            mbit(took),
            mbit(mptcp_s),
            mbit(tcp_s),
            mptcp_s / took,
            tcp_s / took,
            tcp_s / mptcp_s,
            file.total_mbit(),
            mbit(took) / file.total_mbit(),
            mbit(mptcp_s) / file.total_mbit(),
            mbit(tcp_s) / file.total_mbit(),
            t.path_counts()
        );
        eprint!("{}", t.diagnostics());
        t.shutdown();
    }
}
