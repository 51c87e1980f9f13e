//! The command lines of `plait bench`, `plait bench-doc`, `plait demo` and
//! `plait tunnel-bench`: clap types with their defaults, turned into plait-lab's options.

use std::path::PathBuf;

use plait_lab::bench::demo::DemoOptions;
use plait_lab::bench::doc::BenchDocOptions;
use plait_lab::bench::{BenchOptions, PREFIX};
use plait_lab::tunnel_bench::{MAX_PATHS, MAX_REPEAT, MAX_SECONDS, TunnelBenchOptions};

/// `plait bench TOPOLOGY`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The topology file (see topologies/ and docs/benchmarks.md for the format).
    pub topology: PathBuf,
    /// plait's scheduler (`[engine] scheduler` of both daemons).
    #[arg(long, default_value = "plait")]
    pub scheduler: String,
    /// Modes to run, comma-separated: single, mptcp, plait (packet mode), plait-stream
    /// (stream mode); and plait-cbr (not by default): a constant-rate UDP flow through the
    /// tunnel without repair, with loss repair, with FEC and with both (docs/fec.md).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "single,mptcp,plait,plait-stream"
    )]
    pub modes: Vec<String>,
    /// Directory for NAME.json and NAME.svg.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Seed of the loss emulation and the payload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Transfer length in seconds instead of the file's `duration_s`.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Namespace name prefix (1 to 8 of a-z and _).
    #[arg(long, default_value = PREFIX)]
    pub prefix: String,
    /// TCP congestion control of the endpoints (cubic, bbr, reno).
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// An `[engine]` setting of both daemons, `KEY=VALUE` with VALUE in TOML (repeatable),
    /// e.g. `--engine packet_pacing=true --engine congestion='"bbr"'`.
    #[arg(long, value_name = "KEY=VALUE")]
    pub engine: Vec<String>,
    /// plait-cbr: the flow's rate of IP packets, kbit/s.
    #[arg(long, default_value_t = 4000.0)]
    pub cbr_rate_kbps: f64,
    /// plait-cbr: the flow's IP packet size (IPv4 and UDP headers included), bytes.
    #[arg(long, default_value_t = 1200)]
    pub cbr_packet_size: usize,
    /// No progress lines.
    #[arg(long)]
    pub quiet: bool,
}

impl From<BenchArgs> for BenchOptions {
    fn from(a: BenchArgs) -> BenchOptions {
        BenchOptions {
            topology: a.topology,
            scheduler: a.scheduler,
            modes: a.modes,
            cbr: plait_lab::bench::cbr::report::CbrSettings {
                rate_kbps: a.cbr_rate_kbps,
                packet_size: a.cbr_packet_size,
            },
            out: a.out,
            seed: a.seed,
            duration: a.duration,
            prefix: a.prefix,
            cc: a.cc,
            engine: a.engine,
            quiet: a.quiet,
        }
    }
}

/// `plait bench-doc`.
#[derive(Debug, clap::Args)]
pub struct BenchDocArgs {
    /// Directory of topology files (every `*.toml`, by name).
    #[arg(long, default_value = "topologies")]
    pub dir: PathBuf,
    /// Repetitions of every topology.
    #[arg(long, default_value_t = 3)]
    pub repetitions: usize,
    /// The Markdown file to write (its SVGs and JSON go to a directory of the same stem).
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub out: PathBuf,
    /// plait's scheduler.
    #[arg(long, default_value = "plait")]
    pub scheduler: String,
    /// TCP congestion control of the endpoints (cubic, bbr, reno).
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// No progress lines.
    #[arg(long)]
    pub quiet: bool,
    /// Do not run anything: write the document again from the `results.json` of an earlier
    /// run (next to the document).
    #[arg(long)]
    pub render_only: bool,
}

impl From<BenchDocArgs> for BenchDocOptions {
    fn from(a: BenchDocArgs) -> BenchDocOptions {
        BenchDocOptions {
            dir: a.dir,
            repetitions: a.repetitions,
            out: a.out,
            scheduler: a.scheduler,
            cc: a.cc,
            quiet: a.quiet,
            render_only: a.render_only,
        }
    }
}

/// `plait demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Length of each of the two downloads, seconds (3 to 30).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// plait's scheduler.
    #[arg(long, default_value = "plait")]
    pub scheduler: String,
}

impl From<DemoArgs> for DemoOptions {
    fn from(a: DemoArgs) -> DemoOptions {
        DemoOptions {
            seconds: a.seconds,
            scheduler: a.scheduler,
        }
    }
}

/// `plait tunnel-bench`.
#[derive(Debug, clap::Args)]
pub struct TunnelBenchArgs {
    /// Seconds each measured transfer runs.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=MAX_SECONDS))]
    pub seconds: u64,
    /// Repetitions; each runs every measurement once, in the same order.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=MAX_REPEAT))]
    pub repeat: u64,
    /// Path counts to run the tunnel over, comma-separated (each 1 to 4).
    #[arg(long, value_delimiter = ',', default_values_t = [1u8, 2],
          value_parser = clap::value_parser!(u8).range(1..=i64::from(MAX_PATHS)))]
    pub paths: Vec<u8>,
    /// TCP congestion control of every flow's sender (set per socket).
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// The Markdown file to write.
    #[arg(long, default_value = "docs/tunnel-bench.md")]
    pub out: PathBuf,
}

impl From<TunnelBenchArgs> for TunnelBenchOptions {
    fn from(a: TunnelBenchArgs) -> TunnelBenchOptions {
        TunnelBenchOptions {
            seconds: a.seconds,
            repeat: a.repeat,
            paths: a.paths,
            cc: a.cc,
            out: a.out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    #[test]
    fn bench_runs_every_mode_by_default() {
        let a = Cli::try_parse_from(["plait", "topologies/T1.toml"]).unwrap();
        assert_eq!(a.bench.modes, ["single", "mptcp", "plait", "plait-stream"]);
        let all: Vec<&str> = plait_lab::bench::mode::Mode::ALL
            .iter()
            .map(|m| m.name())
            .collect();
        assert_eq!(a.bench.modes, all);
    }
}
