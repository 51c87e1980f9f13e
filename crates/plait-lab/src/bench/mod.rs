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
//!
//! Invariants: all three commands need root and say so otherwise; Ctrl-C (or SIGTERM) sets
//! a flag that every phase checks, so the command unwinds through its guards and removes
//! every namespace, emulator, firewall rule and daemon it made (a second Ctrl-C exits at
//! once; the next run then removes what is left); a benchmark reports numbers and never
//! fails on speed, only when something does not work.

pub mod demo;
pub mod doc;
pub mod mode;
pub mod plot;
pub mod report;
pub mod run;
pub mod spec;
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
    /// Modes to run, comma-separated: single, mptcp, plait, plait-stream.
    pub modes: Vec<String>,
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
    for m in &args.modes {
        modes.push(
            Mode::from_name(m.trim())
                .with_context(|| format!("unknown mode `{m}`; modes are {}", Mode::names()))?,
        );
    }
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
    };
    let r = run::run_topology(&file, &opts)?;
    print!("{}", report::table(&r));
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let json = args.out.join(format!("{}.json", r.name));
    std::fs::write(&json, serde_json::to_string_pretty(&r)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let svg = args.out.join(format!("{}.svg", r.name));
    plot::write_svg(&r, &svg)?;
    println!("wrote {}\nwrote {}", json.display(), svg.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
