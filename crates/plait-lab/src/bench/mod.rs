//! `plait bench`, `plait bench-doc` and `plait demo`: plait against the best
//! single path and kernel MPTCP on the same emulated links, in one run.
//!
//! - [`spec`]: a topology file (plait-topology's format, `topologies/`) as the test bed builds it.
//! - [`mode`]: the modes and a run's options, shared by the runner and the metrics.
//! - [`run`]: builds the test bed of a file and runs each mode on it (single path, MPTCP,
//!   plait's packet mode, plait's stream mode), sampling goodput, per-path use and RTT
//!   under load.
//! - [`report`]: metrics (fractions, shares, percentiles, stall and recovery around
//!   events), the JSON result and the terminal table.
//! - [`plot`]: the SVG of goodput and per-path rates over time.
//! - [`doc`]: docs/benchmarks.md from several repetitions of every topology.
//! - [`demo`]: the one-command demonstration for newcomers.
//! - [`tunnel`]: starting and stopping a real plait tunnel over a topology.
//! - [`cbr`]: `plait-cbr`, a constant-rate UDP flow through the tunnel under several
//!   engine settings (issue 18's FEC goal on the test bed).
//!
//! Invariants: all three commands need root and say so otherwise; Ctrl-C (or SIGTERM) sets
//! a flag that every phase checks, so the command unwinds through its guards and removes
//! every namespace, emulator, firewall rule and daemon it made (a second Ctrl-C exits at
//! once; the next run then removes what is left); a benchmark reports numbers and never
//! fails on speed, only when something does not work.

pub mod cbr;
pub mod demo;
pub mod doc;
pub mod mode;
pub mod plot;
pub mod report;
pub mod run;
pub mod spec;
pub mod text;
pub mod tunnel;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use plait_proto::sched::SchedulerKind;

use mode::{Mode, RunOptions};
use plait_topology::TopologyFile;

/// Namespace prefix of `plait bench` and `plait bench-doc`.
pub const PREFIX: &str = "pbn";

/// `plait bench TOPOLOGY`.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The topology file (see topologies/ and docs/benchmarks.md for the format).
    pub topology: PathBuf,
    /// plait's scheduler (`[engine] scheduler` of both daemons).
    pub scheduler: String,
    /// Modes to run, comma-separated: single, mptcp, plait, plait-stream, plait-cbr.
    pub modes: Vec<String>,
    /// `plait-cbr`'s flow.
    pub cbr: cbr::report::CbrSettings,
    /// Directory for NAME.json and NAME.svg.
    pub out: PathBuf,
    /// Seed of the loss emulation and the payload.
    pub seed: u64,
    /// Transfer length in seconds instead of the file's `duration_s`.
    pub duration: Option<f64>,
    /// Namespace name prefix (1 to 8 of a-z and _).
    pub prefix: String,
    /// TCP congestion control of the endpoints (cubic, bbr, reno).
    pub cc: String,
    /// Extra `[engine]` settings of both daemons, `KEY=VALUE` (VALUE in TOML).
    pub engine: Vec<String>,
    /// No progress lines.
    pub quiet: bool,
}

/// `KEY=VALUE` as a TOML line of the daemons' `[engine]` table; the daemons' own parser
/// judges the key and the value (a bad one stops the run with their error).
pub fn engine_line(kv: &str) -> Result<String> {
    let Some((key, value)) = kv.split_once('=') else {
        bail!("--engine {kv:?}: expected KEY=VALUE, e.g. packet_pacing=true");
    };
    let key = key.trim();
    let simple_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !simple_key || key == "scheduler" {
        bail!(
            "--engine {kv:?}: KEY must be an `[engine]` field other than scheduler              (which is --scheduler), e.g. packet_pacing"
        );
    }
    let value = value.trim();
    if value.is_empty() || value.contains('\n') {
        bail!("--engine {kv:?}: VALUE must be one TOML value, e.g. true or '\"bbr\"'");
    }
    Ok(format!("{key} = {value}"))
}

/// Refuses to start without root, with the reason.
pub fn need_root(what: &str) -> Result<()> {
    if !plait_testbed::have_root() {
        bail!(
            "{what} builds network namespaces and emulated links: run it as root (e.g. `sudo plait {what}`)"
        );
    }
    Ok(())
}

/// A flag set by SIGINT or SIGTERM; a second signal exits at once (status 130).
pub fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))
            .context("installing a signal handler")?;
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .context("installing a signal handler")?;
    }
    Ok(flag)
}

/// Checks a scheduler name against plait's.
pub fn check_scheduler(name: &str) -> Result<()> {
    if SchedulerKind::from_name(name).is_none() {
        let names: Vec<&str> = SchedulerKind::ALL.iter().map(|k| k.name()).collect();
        bail!("unknown scheduler `{name}`; one of: {}", names.join(", "));
    }
    Ok(())
}

/// `plait bench`: runs one topology file, prints the table, writes JSON and SVG.
pub fn bench(args: BenchOptions) -> Result<()> {
    let mut file = TopologyFile::load(&args.topology)?;
    if let Some(d) = args.duration {
        file = file.with_duration(d, &args.topology.display().to_string())?;
    }
    check_scheduler(&args.scheduler)?;
    let engine = args
        .engine
        .iter()
        .map(|kv| engine_line(kv))
        .collect::<Result<Vec<_>>>()?;
    let mut modes = Vec::new();
    let mut with_cbr = false;
    for m in &args.modes {
        // `plait-cbr` is not a transfer (no TCP flow, no goodput): its rows are kept
        // apart from the `Mode`s, which bench-doc runs on every topology.
        if m.trim() == CBR_MODE {
            with_cbr = true;
            continue;
        }
        modes.push(Mode::from_name(m.trim()).with_context(|| {
            format!(
                "unknown mode `{m}`; modes are {}, {CBR_MODE}",
                Mode::names()
            )
        })?);
    }
    let cbr = if with_cbr {
        cbr::check_engine(&engine)?;
        check_cbr(args.cbr)?;
        Some(args.cbr)
    } else {
        None
    };
    plait_testbed::netns::validate_prefix(&args.prefix)?;
    need_root("bench")?;
    let cancel = interrupt_flag()?;
    let opts = RunOptions {
        modes,
        scheduler: args.scheduler.clone(),
        prefix: args.prefix.clone(),
        seed: args.seed,
        program: std::env::current_exe().context("finding the plait binary")?,
        cancel,
        progress: !args.quiet,
        cc: args.cc.clone(),
        engine,
        cbr,
    };
    let r = run::run_topology(&file, &opts)?;
    if !r.modes.is_empty() {
        print!("{}", report::table(&r));
    }
    if let Some(c) = &r.cbr {
        print!(
            "{}",
            cbr::report::table(c.settings, &c.rows, c.faster_rtt_ms)
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let json = args.out.join(format!("{}.json", r.name));
    std::fs::write(&json, serde_json::to_string_pretty(&r)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    println!("wrote {}", json.display());
    // The plot shows the transfers' goodput over time; the UDP flow has none.
    if !r.modes.is_empty() {
        let svg = args.out.join(format!("{}.svg", r.name));
        plot::write_svg(&r, &svg)?;
        println!("wrote {}", svg.display());
    }
    Ok(())
}

/// The mode name of the constant-rate UDP flow's rows ([`cbr`]).
pub const CBR_MODE: &str = "plait-cbr";

/// Checks `plait-cbr`'s flow: a rate the paths can carry and a packet the tunnel's
/// default MTU takes whole (docs/tunnel.md#mtu).
fn check_cbr(c: cbr::report::CbrSettings) -> Result<()> {
    if !(c.rate_kbps.is_finite() && c.rate_kbps > 0.0 && c.rate_kbps <= 100_000.0) {
        bail!(
            "--cbr-rate-kbps {}: must be above 0 and at most 100000",
            c.rate_kbps
        );
    }
    let max = report::DEFAULT_TUN_MTU;
    if !(48..=max).contains(&c.packet_size) {
        bail!(
            "--cbr-packet-size {}: must be 48 (IPv4, UDP and the flow's 20-byte header) to {max} (the tunnel's MTU)",
            c.packet_size
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbr_flows_the_tunnel_cannot_carry_whole_are_refused() {
        let ok = cbr::report::CbrSettings::default();
        assert!(check_cbr(ok).is_ok());
        for bad in [
            cbr::report::CbrSettings {
                rate_kbps: 0.0,
                ..ok
            },
            cbr::report::CbrSettings {
                rate_kbps: f64::NAN,
                ..ok
            },
            cbr::report::CbrSettings {
                packet_size: 47,
                ..ok
            },
            cbr::report::CbrSettings {
                packet_size: 1500,
                ..ok
            },
        ] {
            assert!(check_cbr(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn engine_settings_become_toml_lines_and_bad_ones_are_named() {
        assert_eq!(
            engine_line("packet_pacing=true").unwrap(),
            "packet_pacing = true"
        );
        assert_eq!(
            engine_line(" congestion = \"bbr\" ").unwrap(),
            "congestion = \"bbr\""
        );
        for bad in [
            "packet_pacing",
            "=true",
            "scheduler=\"edpf\"",
            "a.b=1",
            "x=",
            "x=1\ny=2",
        ] {
            let e = engine_line(bad).unwrap_err().to_string();
            assert!(e.contains("--engine"), "{bad}: {e}");
        }
    }
}
