//! Issue 18's constant-rate UDP flow through the real tunnel, briefly: `plait bench
//! --modes plait-cbr --duration 3` on topologies/udp/fec-cbr.toml (two 10 Mbit/s paths,
//! path 0 losing 5 % from server to client), as root. It checks behaviour, never speed:
//! every row runs, the receiver's counts add up (each datagram received once or lost, none
//! foreign, none delivered twice), no datagram is faster than the lossy path's emulated
//! one-way delay (sender and receiver share CLOCK_MONOTONIC), the rows without FEC send
//! no FEC symbols and the rows with it do. It does not compare the rows' losses: which path
//! the scheduler gives the flow varies between runs of the same settings (docs/fec.md, "On
//! the test bed"), so over 3 s a row without repair may lose fewer packets than one with
//! FEC, and the test would fail by chance. It takes about 30 s. Without root it prints the
//! skip message and passes.
//!
//! Invariant: its own namespace prefix (`pcb`) and a temporary output directory; nothing is
//! left behind.

mod netns_support;

use std::path::Path;
use std::time::{Duration, Instant};

use netns_support::plait;

const PREFIX: &str = "pcb";

fn u(row: &serde_json::Value, key: &str) -> u64 {
    row[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {row}"))
}

fn f(row: &serde_json::Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing: {row}"))
}

#[test]
fn a_cbr_flow_crosses_the_tunnel_under_every_rows_settings() {
    let _one = netns_support::serial();
    if !netns_support::root(PREFIX) {
        return;
    }
    let topology = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/udp/fec-cbr.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let started = Instant::now();
    let (ok, stdout, stderr) = plait(
        &[
            "bench",
            topology.to_str().expect("utf-8"),
            "--modes",
            "plait-cbr",
            "--duration",
            "3",
            "--prefix",
            PREFIX,
            "--out",
            out.to_str().expect("utf-8"),
        ],
        Duration::from_secs(180),
    );
    eprintln!("{stdout}\n{stderr}\n(took {:?})", started.elapsed());
    assert!(ok, "plait bench failed");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("fec-cbr.json")).expect("fec-cbr.json written"),
    )
    .expect("valid JSON");
    assert_eq!(json["modes"].as_array().map(Vec::len), Some(0));
    let rows = json["cbr"]["rows"].as_array().expect("cbr rows");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "no repair",
            "loss repair, no FEC",
            "FEC sparse, no loss repair",
            "FEC sparse + loss repair"
        ]
    );
    for r in rows {
        let name = r["name"].as_str().unwrap_or("?");
        assert!(r["error"].is_null(), "{name} failed: {}", r["error"]);
        // 3 s at one 1200-byte packet every 2.4 ms: numbers 0 to 1249.
        assert_eq!(u(r, "sent"), 1250, "{name}");
        assert_eq!(u(r, "received") + u(r, "lost"), 1250, "{name}");
        assert!(u(r, "received") >= 1000, "{name}: {r}");
        assert_eq!(u(r, "duplicates"), 0, "{name}: delivered twice");
        assert_eq!(u(r, "foreign"), 0, "{name}");
        let (min, p50, p99, max) = (
            f(r, "delay_min_ms"),
            f(r, "delay_p50_ms"),
            f(r, "delay_p99_ms"),
            f(r, "delay_max_ms"),
        );
        // The faster path delays by 10 ms one way: nothing arrives sooner.
        assert!(min >= 10.0, "{name}: {min} ms one way");
        assert!(min <= p50 && p50 <= p99 && p99 <= max, "{name}: {r}");
        assert!(f(r, "outer_ratio") > 1.0, "{name}: framing is not free");
    }
    let fec = |i: usize| u(&rows[i], "fec_symbols");
    assert_eq!((fec(0), fec(1)), (0, 0), "FEC symbols with fec = \"off\"");
    assert_eq!(
        u(&rows[0], "repairs_sent"),
        0,
        "repairs with repair = false"
    );
    assert_eq!(
        u(&rows[2], "repairs_sent"),
        0,
        "repairs with repair = false"
    );
    assert!(
        fec(2) > 0 && fec(3) > 0,
        "no FEC symbols with fec = \"sparse\""
    );
    netns_support::assert_nothing_left(PREFIX);
}
