//! `plait bench --modes plait-cbr`: issue 18's constant-rate UDP flow through the real
//! tunnel, under several engine settings side by side, on the test bed of one topology
//! file: the test-bed half of plait-sim's `plait-cbr` mode (scenarios/fec-cbr.toml).
//!
//! Each row ([`VARIANTS`]) starts the tunnel of `plait bench`'s `plait` mode
//! ([`super::tunnel::Tunnel`]: real `plait server` and `plait client` processes, TUN
//! devices, UDP sockets per path) with the row's `[engine]` lines added to `--engine`'s,
//! then sends the flow ([`plait_testbed::cbr_send`]: numbered, timestamped datagrams at an
//! even pace, sleeping between them) from the remote host to a [`plait_testbed::CbrSink`]
//! on the lan host, so it crosses the server, the paths and the client as plait-sim's flow
//! goes from the server's side to the mobile host. After the sender's last datagram it
//! waits [`DRAIN`] (several times the slowest path's delay and the reorder buffer's and FEC's
//! hold), reads both daemons' counters and stops the tunnel. What a row reports is in
//! [`report`].
//!
//! The rows differ only in `repair` and `fec` (docs/tunnel-config.md; docs/protocol.md#fec,
//! docs/protocol.md#loss-repair), so `--engine` may not set those two.
//!
//! Invariants: a failing row is recorded with its error and the next row still runs; the
//! tunnel of a row is always stopped (its guard) before the next starts; the counters are
//! deltas over the row's flow (status read before the first datagram and after the drain).

pub mod report;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use plait_testbed::{CbrOptions, CbrSink, Family, Topology, cbr_send};
use plait_topology::TopologyFile;

use self::report::{CbrRow, CbrSettings, Counters, cbr_row, session};
use super::mode::RunOptions;
use super::tunnel::{Tunnel, TunnelOptions};

/// One engine setting the flow runs under.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// The row's name.
    pub name: &'static str,
    /// Its `[engine]` lines.
    pub engine: &'static [&'static str],
}

/// The rows, as plait-sim's scenarios/fec-cbr.toml lists them (its `fec = "all"` rows
/// are left out: identical to `sparse` for a 4 Mbit/s flow). The first row, with no
/// repair at all, is the reference of the added delay.
pub const VARIANTS: [Variant; 4] = [
    Variant {
        name: "no repair",
        engine: &["repair = false", "fec = \"off\""],
    },
    Variant {
        name: "loss repair, no FEC",
        engine: &["repair = true", "fec = \"off\""],
    },
    Variant {
        name: "FEC sparse, no loss repair",
        engine: &["repair = false", "fec = \"sparse\""],
    },
    Variant {
        name: "FEC sparse + loss repair",
        engine: &["repair = true", "fec = \"sparse\""],
    },
];

/// The `[engine]` keys the rows set.
const ROW_KEYS: [&str; 2] = ["repair", "fec"];
/// How long after the sender's last datagram the receiver keeps listening.
pub const DRAIN: Duration = Duration::from_secs(2);
/// The receiving application's UDP port on the lan host.
const CBR_PORT: u16 = 5301;

/// Refuses `--engine` lines that set what the rows set.
pub fn check_engine(lines: &[String]) -> Result<()> {
    for l in lines {
        let key = l.split('=').next().unwrap_or("").trim();
        if ROW_KEYS.contains(&key) {
            bail!(
                "--engine {key}=…: mode plait-cbr sets `{key}` itself in each row ({})",
                VARIANTS.map(|v| v.name).join("; ")
            );
        }
    }
    Ok(())
}

/// The faster path's configured RTT, ms (the goal's bound on the added delay).
pub fn faster_rtt_ms(file: &TopologyFile) -> f64 {
    file.paths
        .iter()
        .map(|p| p.delay_up_ms() + p.delay_down_ms())
        .fold(f64::INFINITY, f64::min)
}

/// Runs every row on `topo` (built from `file`) for the file's duration.
pub fn run_rows(
    topo: &Topology,
    file: &TopologyFile,
    opts: &RunOptions,
    settings: CbrSettings,
    tunnel: &TunnelOptions,
) -> Result<Vec<CbrRow>> {
    let mut rows = Vec::new();
    for v in VARIANTS {
        if opts.cancelled() {
            bail!("interrupted (everything it had set up is removed)");
        }
        let engine: Vec<String> = v.engine.iter().map(|l| (*l).to_owned()).collect();
        opts.say(&format!(
            "  {}: plait-cbr, {}: {} kbit/s of {}-byte packets for {:.0} s",
            file.name, v.name, settings.rate_kbps, settings.packet_size, file.duration_s
        ));
        let row = match run_row(topo, file, opts, settings, tunnel, v.name, &engine) {
            Ok(r) => r,
            Err(e) => {
                if opts.cancelled() {
                    bail!("interrupted (everything it had set up is removed)");
                }
                opts.say(&format!("  plait-cbr, {}: failed: {e:#}", v.name));
                CbrRow::failed(v.name, &engine, format!("{e:#}"))
            }
        };
        rows.push(row);
    }
    Ok(rows)
}

fn run_row(
    topo: &Topology,
    file: &TopologyFile,
    opts: &RunOptions,
    settings: CbrSettings,
    tunnel: &TunnelOptions,
    name: &str,
    engine: &[String],
) -> Result<CbrRow> {
    let mut t_opts = tunnel.clone();
    t_opts.engine.extend(engine.iter().cloned());
    let t = Tunnel::start(topo, &t_opts)?;
    let send = CbrOptions {
        packet_size: settings.packet_size,
        rate_bps: settings.rate_kbps * 1e3,
        duration: file.duration(),
        cancel: Some(std::sync::Arc::clone(&opts.cancel)),
    };
    let dst = SocketAddr::new(topo.site0().lan_host_addr(Family::V4), CBR_PORT);
    // Twice what the run can send: anything numbered beyond is not the flow's.
    let sink = CbrSink::start(topo.lan_host(), dst, send.packets().saturating_mul(2))?;
    let server_before = t.server().status()?;
    let client_before = t.client().status()?;
    let started = Instant::now();
    let sent = cbr_send(topo.remote_host(), dst, &send).context("sending the flow")?;
    std::thread::sleep(DRAIN);
    let account = sink.stop().context("receiving the flow")?;
    let server_after = t.server().status()?;
    let client_after = t.client().status()?;
    opts.say(&format!(
        "  plait-cbr, {name}: sent {} in {:.1} s ({} send errors), pacing late by at most {:.1} ms",
        sent.sent,
        started.elapsed().as_secs_f64() - DRAIN.as_secs_f64(),
        sent.errors,
        sent.max_late.as_secs_f64() * 1000.0
    ));
    t.shutdown().context("stopping the tunnel")?;
    if opts.cancelled() {
        bail!("interrupted (everything it had set up is removed)");
    }
    let one = |s| session(s).ok_or_else(|| anyhow!("a daemon reports no session"));
    let row = cbr_row(
        name,
        engine,
        settings,
        &sent,
        &account.report(sent.sent),
        Counters {
            before: one(&server_before)?,
            after: one(&server_after)?,
        },
        Counters {
            before: one(&client_before)?,
            after: one(&client_after)?,
        },
    );
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_lines_that_the_rows_set_are_refused() {
        assert!(check_engine(&["packet_pacing = true".into()]).is_ok());
        for bad in ["fec = \"all\"", "repair = true", " repair=false"] {
            let e = check_engine(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains("plait-cbr"), "{e}");
        }
    }

    #[test]
    fn the_rows_start_without_any_repair_and_differ_only_in_repair_and_fec() {
        assert_eq!(VARIANTS[0].engine, ["repair = false", "fec = \"off\""]);
        for v in VARIANTS {
            for l in v.engine {
                let key = l.split('=').next().unwrap().trim();
                assert!(ROW_KEYS.contains(&key), "{l}");
                assert!(
                    super::super::engine_line(&l.replace(' ', "")).is_ok(),
                    "{l}"
                );
            }
        }
    }

    #[test]
    fn the_shipped_topology_has_the_simulator_scenarios_paths() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../topologies/udp/fec-cbr.toml");
        let f = TopologyFile::load(&p).unwrap_or_else(|e| panic!("{e}"));
        super::super::spec::testbed_spec(&f, "pbn", 0)
            .validate()
            .unwrap();
        // scenarios/fec-cbr.toml: 10 Mbit/s each, 10 and 25 ms one way, 100-packet queues,
        // 5 % Bernoulli loss on path 0's downlink (server to client), 30 s.
        assert_eq!(f.paths.len(), 2);
        assert_eq!((f.paths[0].rate_mbit, f.paths[1].rate_mbit), (10.0, 10.0));
        assert_eq!(
            (f.paths[0].delay_down_ms(), f.paths[1].delay_down_ms()),
            (10.0, 25.0)
        );
        assert_eq!(f.paths[0].queue_bytes(), 150_000);
        assert_eq!(
            f.paths[0].loss_direction,
            plait_topology::LossDirection::Down
        );
        assert!(f.paths[1].loss_model().is_lossless());
        assert_eq!(f.duration_s, 30.0);
        assert_eq!(faster_rtt_ms(&f), 20.0);
    }

    #[test]
    fn the_faster_paths_rtt_bounds_the_added_delay() {
        let text = "name = \"x\"\nduration_s = 20\n\
                    [[path]]\nrate_mbit = 10\nrtt_ms = 50\n\
                    [[path]]\nrate_mbit = 10\ndelay_up_ms = 5\ndelay_down_ms = 15\n";
        let f = TopologyFile::parse(text, "x.toml").unwrap();
        assert_eq!(faster_rtt_ms(&f), 20.0);
    }
}
