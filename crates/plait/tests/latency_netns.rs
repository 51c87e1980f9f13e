//! Issue 15's latency-under-load test (root; skips without it): a bulk TCP transfer
//! through the tunnel in packet mode and a UDP probe through the tunnel beside it, over two
//! emulated paths at small rates whose drop-tail queues hold 300 ms. The real binary runs it
//! (`plait bench --modes plait`, which starts both daemons, the transfer and a probe every
//! 10 ms from the sending host to the receiving host through the tunnel).
//!
//! It runs the configuration that keeps the links' queues short, and says so: packet
//! pacing with BBR (docs/protocol.md#packet-pacing) and unordered delivery of sparse flows
//! (docs/protocol.md#unordered, on by default). Without pacing the end host's
//! TCP fills the 300 ms queues and the probe's p99 is about the idle RTT plus 300 ms.
//!
//! What it asserts leaves room for a shared machine's noise: the bytes arrive intact,
//! and the probe's p99 through the tunnel stays below the idle RTT plus half of one queue's
//! full delay (150 ms). The queue this configuration leaves on the fast link is BBR's: at
//! most its window (two BDPs plus an ACK allowance of at most 25 ms, more during its
//! start-up) less the path's pipe, whatever the drop-tail limit (p99 67-135 ms through the
//! tunnel in five runs; a probe that rides path 1 meets that path's own BBR queue and its
//! 60 ms RTT, about 145 ms together; 338 ms for the same topology without pacing), so the
//! long drop-tail queues leave a margin between the two. One CI run failed at 175 ms
//! (path 0's link 138 ms), likely a BBR model reading bunched ACKs as a faster bottleneck:
//! stopping the receiving daemon for 40 ms every 300 ms did that, until the rate samples
//! were bounded by the send rate (docs/protocol.md#delivery-rate). Another failed at 197 ms:
//! in the start-up the probe took path 1, whose queue had been empty by the latest
//! measure a round trip before (205 ms in one 100 ms window, 114 on path 0's link); the
//! probe's path choice now counts the queue of the sender's own bytes in flight
//! (docs/protocol.md#unordered, "Where a sparse packet goes"), and BBR's delivery-rate
//! window spans one ACK interval besides RTprop, which ended a Startup estimate up to twice
//! the link's (docs/protocol.md#delivery-rate). With both, beside two busy loops: p99
//! 60-79 ms in nine runs, the largest 100 ms window at most 109 ms (nine alternating runs
//! of the build before them: 66-120 and 221). No throughput figure, no wall-clock bound
//! beyond the harness's kill switch.
//!
//! Invariant: its own namespace prefix (`plat`) and a temporary directory; a run that takes
//! too long is killed (its namespaces are then removed by its drop guards or the next run's
//! clean-up), and the test checks that no namespace of a finished run of ours is left.

mod netns_support;

use std::time::Duration;

use netns_support::plait;

const PREFIX: &str = "plat";
/// Each path's drop-tail queue, as delay at its rate.
const QUEUE_MS: f64 = 300.0;

/// 8 + 4 Mbit/s at 20 and 60 ms RTT, 300 ms drop-tail queues (also what
/// `scripts/ack-stall.sh` runs).
const TOPOLOGY: &str = include_str!("data/latency.toml");

/// The engine settings of both daemons (see the module documentation).
const ENGINE: [&str; 2] = ["packet_pacing=true", "congestion=\"bbr\""];

#[test]
fn probe_through_the_tunnel_stays_below_the_links_queues_under_load() {
    let _serial = netns_support::serial();
    if !netns_support::root(PREFIX) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("latency.toml");
    std::fs::write(&file, TOPOLOGY).expect("write topology");
    let out = dir.path().join("out");
    let mut args = vec![
        "bench",
        file.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
        "--prefix",
        PREFIX,
        "--modes",
        "plait",
    ];
    for e in ENGINE {
        args.extend(["--engine", e]);
    }
    let (ok, stdout, stderr) = plait(&args, Duration::from_secs(150));
    eprintln!("{stdout}\n{stderr}");
    assert!(ok, "plait bench failed");

    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("latency.json")).expect("latency.json written"),
    )
    .expect("valid JSON");
    let m = &json["modes"][0];
    assert_eq!(m["mode"], "plait");
    assert!(m["error"].is_null(), "plait failed: {}", m["error"]);
    assert_eq!(m["intact"], true, "bytes not intact");
    let got = m["bytes_received"].as_u64().unwrap_or(0);
    assert!(
        got > 1_000_000,
        "only {got} bytes: no load to measure under"
    );
    let idle = json["idle_rtt_ms"].as_f64().expect("idle RTT measured");
    let p99 = m["tunnel_rtt_p99_ms"]
        .as_f64()
        .expect("probes through the tunnel answered");
    let bound = idle + QUEUE_MS / 2.0;
    eprintln!(
        "idle RTT {idle:.1} ms; through the tunnel under load p50/p99 {:.1}/{p99:.1} ms \
         (bound {bound:.1}); path 0's link p50/p99 {:.1}/{:.1} ms",
        m["tunnel_rtt_p50_ms"].as_f64().unwrap_or(f64::NAN),
        m["rtt_p50_ms"].as_f64().unwrap_or(f64::NAN),
        m["rtt_p99_ms"].as_f64().unwrap_or(f64::NAN),
    );
    // On failure, when the queue rose says why (start-up, a steady overestimate, a stall).
    let series = |key: &str| -> String {
        m[key].as_array().map_or_else(String::new, |v| {
            v.iter()
                .map(|x| x.as_f64().map_or("-".into(), |x| format!("{x:.0}")))
                .collect::<Vec<_>>()
                .join(" ")
        })
    };
    assert!(
        p99 < bound,
        "the probe through the tunnel waited in full queues: p99 {p99:.1} ms, idle {idle:.1} ms\n\
         per 100 ms, the probe's largest RTT through the tunnel: {}\n\
         and on path 0's link: {}",
        series("tunnel_rtt_series"),
        series("rtt_series"),
    );
    netns_support::assert_nothing_left(PREFIX);
}
