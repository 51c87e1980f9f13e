//! The `plait` command: the tunnel (`server`, `client`, `status`, `genkey`, `pubkey`) and
//! the simulator (`sim`, `reproduce`, `schedulers`). `testbed`, `bench` and `demo` follow.

mod bench;
mod testbed_cmd;
mod tunnel_bench;
mod tunnel_cmd;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use plait_sim::{report, reproduce, suite, sweep};

#[derive(Parser)]
#[command(name = "plait", version, about = "plait: multipath link aggregation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the plait server: accept clients' paths, carry their traffic through a TUN
    /// device (as root, or with CAP_NET_ADMIN).
    Server(tunnel_cmd::ServerArgs),
    /// Run the plait client: one UDP path per configured link to the server, traffic
    /// through a TUN device (as root, or with CAP_NET_ADMIN).
    Client(tunnel_cmd::ClientArgs),
    /// Show a running daemon's paths: state, RTT, one-way delay, rate, loss, traffic.
    Status(tunnel_cmd::StatusArgs),
    /// Benchmark the tunnel (as root): one TCP flow through it over unshaped veth paths
    /// against raw UDP and plain TCP on the same veths, with CPU use; writes
    /// docs/tunnel-bench.md.
    TunnelBench(tunnel_bench::Args),
    /// Compare plait with the best single path and kernel MPTCP on one emulated topology
    /// (as root): goodput, per-path shares, RTT under load, recovery after path events;
    /// prints a table, writes JSON and an SVG plot.
    Bench(bench::BenchArgs),
    /// Run every topology of topologies/ several times (as root) and write
    /// docs/benchmarks.md with medians, ranges and the goals checked.
    BenchDoc(bench::doc::BenchDocArgs),
    /// Show plait at work in under a minute (as root): two emulated links built inside this
    /// machine, one download over the best link alone and one through plait over both,
    /// compared; everything is removed afterwards.
    Demo(bench::demo::DemoArgs),
    /// Keep an emulated test bed up between commands (as root): `up` a topology file,
    /// `set` a path's rate, delay, loss, blackhole or link while it runs, `exec` commands in
    /// its namespaces, `status`, `down` (docs/testbed.md).
    Testbed(testbed_cmd::TestbedArgs),
    /// Print a new private key (base64), as `wg genkey` does.
    Genkey,
    /// Read a private key on stdin and print its public key, as `wg pubkey` does.
    Pubkey,
    /// Run a simulation scenario (TOML, see scenarios/): print its results table and write
    /// JSON, CSV and an SVG plot of throughput over time.
    Sim {
        /// The scenario file.
        scenario: PathBuf,
        /// Directory for the JSON, CSV and SVG files.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Run these seeds instead of the scenario's.
        #[arg(long, value_delimiter = ',')]
        seeds: Option<Vec<u64>>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Re-run the seeds' published experiments (scenarios with `paper_kbps` values) and
    /// write the comparison to a Markdown file.
    Reproduce {
        /// Scenario files to include.
        #[arg(long, num_args = 1.., default_values = ["scenarios/petbmp-table1.toml", "scenarios/petbmp-cross-traffic.toml", "scenarios/mms-fig8.toml"])]
        scenarios: Vec<PathBuf>,
        /// The Markdown file to write.
        #[arg(long, default_value = "docs/reproduction.md")]
        out: PathBuf,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Run every scheduler on every scenario of a directory (issue 4's suite) and write
    /// the comparison to a Markdown file.
    Schedulers {
        /// Directory of scenario files.
        #[arg(long, default_value = "scenarios/suite")]
        dir: PathBuf,
        /// The Markdown file to write.
        #[arg(long, default_value = "docs/schedulers.md")]
        out: PathBuf,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plait: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &PathBuf, seeds: Option<&Vec<u64>>) -> Result<Vec<sweep::Variant>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut variants =
        sweep::load_variants(&text).with_context(|| format!("in {}", path.display()))?;
    if let Some(seeds) = seeds {
        if seeds.is_empty() {
            bail!("--seeds needs at least one seed");
        }
        for v in &mut variants {
            v.scenario.seeds = seeds.clone();
        }
    }
    Ok(variants)
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Server(args) => tunnel_cmd::server(args),
        Command::Client(args) => tunnel_cmd::client(args),
        Command::Status(args) => tunnel_cmd::status(args),
        Command::TunnelBench(args) => tunnel_bench::run(args),
        Command::Bench(args) => bench::bench(args),
        Command::BenchDoc(args) => bench::doc::bench_doc(args),
        Command::Demo(args) => bench::demo::demo(args),
        Command::Testbed(args) => testbed_cmd::run(args),
        Command::Genkey => tunnel_cmd::genkey(),
        Command::Pubkey => tunnel_cmd::pubkey(),
        Command::Sim {
            scenario,
            out,
            seeds,
            quiet,
        } => {
            let variants = load(&scenario, seeds.as_ref())?;
            let started = Instant::now();
            let result = sweep::run_variants(&variants, !quiet);
            let wall = started.elapsed();
            println!(
                "{}: {}\n",
                variants[0].scenario.name,
                variants[0].scenario.description.trim()
            );
            print!("{}", report::table(&result));
            let stem = scenario
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("scenario");
            let files = report::write_files(&result, &out, stem)
                .with_context(|| format!("writing into {}", out.display()))?;
            let events: u64 = result.runs.iter().map(|(_, r)| r.events).sum();
            println!(
                "\n{} runs, {} events in {:.2} s wall ({:.1} M events/s over all cores)",
                result.runs.len(),
                events,
                wall.as_secs_f64(),
                events as f64 / wall.as_secs_f64().max(1e-9) / 1e6
            );
            for f in files {
                println!("wrote {}", f.display());
            }
            Ok(())
        }
        Command::Schedulers { dir, out, quiet } => {
            let entries = std::fs::read_dir(&dir)
                .with_context(|| format!("cannot read {}", dir.display()))?;
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            paths.sort();
            if paths.is_empty() {
                bail!("no .toml scenarios in {}", dir.display());
            }
            let mut files = Vec::new();
            for p in paths {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                files.push((p, text));
            }
            let kinds = plait_proto::sched::SchedulerKind::ALL;
            let variants = suite::variants(&files, &kinds).context("in the suite scenarios")?;
            let result = suite::run(&variants, !quiet);
            std::fs::write(&out, suite::markdown(&variants, &result))
                .with_context(|| format!("cannot write {}", out.display()))?;
            println!("wrote {}", out.display());
            Ok(())
        }
        Command::Reproduce {
            scenarios,
            out,
            quiet,
        } => {
            let mut sections = Vec::new();
            for path in &scenarios {
                let variants = load(path, None)?;
                let result = sweep::run_variants(&variants, !quiet);
                sections.push((path.clone(), variants, result));
            }
            let doc = reproduce::markdown(&sections);
            std::fs::write(&out, doc).with_context(|| format!("cannot write {}", out.display()))?;
            println!("wrote {}", out.display());
            Ok(())
        }
    }
}
