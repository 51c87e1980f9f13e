//! Issue 6's end-to-end test of `plait bench`: the real binary runs a short T1-like
//! topology at low rates (4 + 2 Mbit/s, 20 and 60 ms RTT, 6 s per mode) with the single,
//! MPTCP and plait (packet mode) modes, and the test checks behaviour only, never speed:
//! every mode completes, the bytes arrive intact, plait puts traffic on both paths, the JSON
//! and SVG files are written and no namespace is left behind. It takes about 40 s. A second
//! run checks stream mode (`plait-stream`) alone the same way, on faster links (16 + 8
//! Mbit/s, 3 s): its client buffers tens of MB ahead of the paths, whose drain after the
//! sender's close would take over half a minute at 6 Mbit/s; it takes about 15 s. Without
//! root both print the skip message and pass. Bad topology files are refused with the field
//! named (no root needed).
//!
//! Invariant: the run uses its own namespace prefix (`pbe`) and a temporary directory, and a
//! run that takes too long is killed (its namespaces are then removed by its own drop guards
//! or by the next run's clean-up).

mod netns_support;

use std::path::Path;
use std::time::{Duration, Instant};

use netns_support::plait;
use plait_testbed::{SKIP_NO_ROOT, have_root};

const PREFIX: &str = "pbe";

const TOPOLOGY: &str = r#"
name = "ci"
description = "T1 at low rates"
duration_s = 6

[[path]]
rate_mbit = 4
rtt_ms = 20
queue_ms = 100

[[path]]
rate_mbit = 2
rtt_ms = 60
queue_ms = 100
"#;

#[test]
fn bad_topology_files_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (bad, field) in [
        (
            TOPOLOGY.replace("rate_mbit = 2", "rate_mbit = -2"),
            "path[1].rate_mbit",
        ),
        (
            TOPOLOGY.replace("rtt_ms = 60", "rtt = 60"),
            "unknown field `rtt`",
        ),
        (
            format!(
                "{TOPOLOGY}\n[[event]]\nkind = \"blackhole\"\npath = 3\nfrom_s = 1\nto_s = 2\n"
            ),
            "event[0].path",
        ),
    ] {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, bad).expect("write");
        let (ok, _, err) = plait(
            &["bench", file.to_str().expect("utf-8")],
            Duration::from_secs(10),
        );
        assert!(!ok, "accepted a bad file");
        assert!(err.contains(field), "{field} not named: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn bench_runs_single_mptcp_and_plait_at_low_rates() {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ci.toml");
    std::fs::write(&file, TOPOLOGY).expect("write topology");
    let out = dir.path().join("out");
    let started = Instant::now();
    let (ok, stdout, stderr) = plait(
        &[
            "bench",
            file.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--prefix",
            PREFIX,
            "--modes",
            "single,mptcp,plait",
        ],
        Duration::from_secs(150),
    );
    eprintln!("{stdout}\n{stderr}\n(took {:?})", started.elapsed());
    assert!(ok, "plait bench failed");

    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("ci.json")).expect("ci.json written"),
    )
    .expect("valid JSON");
    assert!(Path::new(&out.join("ci.svg")).exists(), "no SVG");
    let modes = json["modes"].as_array().expect("modes");
    let names: Vec<&str> = modes.iter().filter_map(|m| m["mode"].as_str()).collect();
    assert_eq!(names, ["single", "mptcp", "plait"]);
    for m in modes {
        let name = m["mode"].as_str().unwrap_or("?");
        assert!(m["error"].is_null(), "{name} failed: {}", m["error"]);
        assert_eq!(m["intact"], true, "{name}: bytes not intact");
        let got = m["bytes_received"].as_u64().unwrap_or(0);
        assert!(got > 100_000, "{name}: only {got} bytes");
        assert_eq!(m["bytes_sent"].as_u64(), Some(got), "{name}");
        assert!(
            m["goodput_series"]
                .as_array()
                .is_some_and(|s| s.len() >= 50),
            "{name}: no goodput samples"
        );
    }
    let shares: Vec<f64> = modes[2]["shares"]
        .as_array()
        .expect("plait shares")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    assert_eq!(shares.len(), 2);
    assert!(
        shares.iter().all(|s| *s >= 0.05),
        "plait did not use both paths: {shares:?}"
    );
    // Single path means a single path.
    let single: Vec<f64> = modes[0]["shares"]
        .as_array()
        .expect("single shares")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    assert!(single[0] > 0.99, "{single:?}");

    netns_support::assert_nothing_left(PREFIX);
}

const STREAM_TOPOLOGY: &str = r#"
name = "cistream"
description = "T1 at 0.8 of its rates, 3 s"
duration_s = 3

[[path]]
rate_mbit = 16
rtt_ms = 20
queue_ms = 100

[[path]]
rate_mbit = 8
rtt_ms = 60
queue_ms = 100
"#;

#[test]
fn bench_runs_plait_stream() {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cistream.toml");
    std::fs::write(&file, STREAM_TOPOLOGY).expect("write topology");
    let out = dir.path().join("out");
    let started = Instant::now();
    let (ok, stdout, stderr) = plait(
        &[
            "bench",
            file.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--prefix",
            PREFIX,
            "--modes",
            "plait-stream",
        ],
        Duration::from_secs(150),
    );
    eprintln!("{stdout}\n{stderr}\n(took {:?})", started.elapsed());
    assert!(ok, "plait bench failed");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("cistream.json")).expect("cistream.json written"),
    )
    .expect("valid JSON");
    let modes = json["modes"].as_array().expect("modes");
    assert_eq!(modes.len(), 1);
    let m = &modes[0];
    assert_eq!(m["mode"], "plait-stream");
    assert_eq!(m["label"], "plait streams");
    // The run fails unless the client's relay carried the connection.
    assert!(m["error"].is_null(), "plait-stream failed: {}", m["error"]);
    assert_eq!(m["intact"], true, "bytes not intact");
    let got = m["bytes_received"].as_u64().unwrap_or(0);
    assert!(got > 1_000_000, "only {got} bytes");
    let shares: Vec<f64> = m["shares"]
        .as_array()
        .expect("shares")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    assert!(
        shares.len() == 2 && shares.iter().all(|s| *s >= 0.05),
        "stream mode did not use both paths: {shares:?}"
    );
    netns_support::assert_nothing_left(PREFIX);
}
