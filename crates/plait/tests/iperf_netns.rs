//! iperf3, the tool a user reaches for to measure a link, through the real tunnel, as
//! root: from a LAN host behind the client to the remote host behind the server over two
//! 40 Mbit/s paths, a TCP upload, a TCP download (`--reverse`) and a 5 Mbit/s UDP flow, in
//! packet mode and in stream mode (where iperf3's control and data connections are
//! streams and its UDP goes as packets beside them). It checks behaviour, never speed:
//! every run completes and carries data (TCP: more than 1 MB, never more than was
//! written), and the UDP flow, far below the links' rate on lossless links, loses under
//! 1 %. Each run's figures are printed. Without root or iperf3 it prints the skip message
//! and passes.
//!
//! Invariant: its own namespace prefix (`pip`) and tunnel letter (`p`); the iperf3 server
//! is a child guard, the tunnel's resources are the harness's; nothing is left behind.

mod netns_support;

use std::net::SocketAddr;
use std::time::Duration;

use plait_testbed::{Family, PathSpec, TopologySpec};

use netns_support::tunnel::{Tunnel, TunnelSpec};

const PREFIX: &str = "pip";
const IPERF_PORT: u16 = 5201;

/// One iperf3 client run from the LAN host (`args` after the server's address), retried
/// while the server is not listening yet; its JSON report.
fn iperf3(t: &Tunnel, server: SocketAddr, args: &[&str]) -> serde_json::Value {
    let host = server.ip().to_string();
    let port = server.port().to_string();
    let mut last = String::new();
    for _ in 0..50 {
        let mut argv = vec![
            "iperf3",
            "--client",
            &host,
            "--port",
            &port,
            "--json",
            "--connect-timeout",
            "3000",
        ];
        argv.extend_from_slice(args);
        let out = t.topo.lan_host().exec_output(&argv).expect("iperf3 client");
        let report: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        if out.status.success() && report["error"].is_null() {
            return report;
        }
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("iperf3 {args:?} never completed: {last}");
}

fn number(v: &serde_json::Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or_else(|| panic!("{} missing in the iperf3 report", path.join(".")))
}

/// A TCP run: more than 1 MB arrived, and no more than the sender wrote (iperf3 stops
/// the clock with the last writes still in socket buffers and in flight, a few per cent of
/// a run, so the two need not be equal).
fn check_tcp(what: &str, report: &serde_json::Value) {
    let sent = number(report, &["end", "sum_sent", "bytes"]);
    let received = number(report, &["end", "sum_received", "bytes"]);
    let mbit = number(report, &["end", "sum_received", "bits_per_second"]) / 1e6;
    eprintln!("{what}: received {received:.0} of the {sent:.0} bytes written, {mbit:.1} Mbit/s");
    assert!(received > 1e6, "{what}: {received} bytes");
    assert!(received <= sent, "{what}: {received} of {sent} bytes");
}

/// The UDP run: packets arrived, under 1 % lost.
fn check_udp(what: &str, report: &serde_json::Value) {
    let packets = number(report, &["end", "sum", "packets"]);
    let lost = number(report, &["end", "sum", "lost_percent"]);
    let jitter = number(report, &["end", "sum", "jitter_ms"]);
    eprintln!("{what}: {packets:.0} packets, {lost:.2} % lost, jitter {jitter:.2} ms");
    assert!(packets > 1000.0, "{what}: {packets} packets");
    assert!(lost < 1.0, "{what}: {lost} % lost");
}

fn runs_through(streams: bool) {
    let topo = TopologySpec::new(
        PREFIX,
        vec![PathSpec::v4().rate(40.0), PathSpec::v4().rate(40.0)],
    );
    let t = Tunnel::start(TunnelSpec {
        streams,
        ..TunnelSpec::new('p', topo)
    });
    let server = SocketAddr::new(t.topo.remote_host_addr(Family::V4), IPERF_PORT);
    let mut cmd = t.topo.remote_host().command("iperf3");
    cmd.args(["--server", "--bind"])
        .arg(server.ip().to_string())
        .args(["--port", &IPERF_PORT.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _server = t.topo.remote_host().spawn(&mut cmd).expect("iperf3 server");
    let mode = if streams {
        "stream mode"
    } else {
        "packet mode"
    };
    check_tcp(
        &format!("{mode}: TCP upload"),
        &iperf3(&t, server, &["--time", "3"]),
    );
    check_tcp(
        &format!("{mode}: TCP download"),
        &iperf3(&t, server, &["--time", "3", "--reverse"]),
    );
    check_udp(
        &format!("{mode}: UDP at 5 Mbit/s"),
        &iperf3(&t, server, &["--time", "3", "--udp", "--bitrate", "5M"]),
    );
    t.shutdown();
}

#[test]
fn iperf3_measures_through_the_tunnel_in_packet_and_stream_mode() {
    let _one = netns_support::serial();
    if !netns_support::root(PREFIX) {
        return;
    }
    if std::process::Command::new("iperf3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: iperf3 is not installed (scripts/setup.sh installs it as root)");
        return;
    }
    runs_through(false);
    runs_through(true);
    netns_support::assert_nothing_left(PREFIX);
}
