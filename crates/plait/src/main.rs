//! The `plait` command: the tunnel (`server`, `client`, `status`, `genkey`, `pubkey`), the
//! simulator (`sim`, `reproduce`, `schedulers`), the test bed and benchmarks (`testbed`,
//! `bench`, `bench-doc`, `demo`, `tunnel-bench`). Argument parsing only: see [`cli`].

mod cli;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use cli::{bench, sim, testbed, transfer, tunnel};

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
    Server(tunnel::ServerArgs),
    /// Run the plait client: one UDP path per configured link to the server, traffic
    /// through a TUN device (as root, or with CAP_NET_ADMIN).
    Client(tunnel::ClientArgs),
    /// Show a running daemon's paths: state, RTT, one-way delay, rate, loss, traffic.
    Status(tunnel::StatusArgs),
    /// Benchmark the tunnel (as root): one TCP flow through it over unshaped veth paths
    /// against raw UDP and plain TCP on the same veths, with CPU use; writes
    /// docs/tunnel-bench.md.
    TunnelBench(bench::TunnelBenchArgs),
    /// Compare plait with the best single path and kernel MPTCP on one emulated topology
    /// (as root): goodput, per-path shares, RTT under load, recovery after path events;
    /// prints a table, writes JSON and an SVG plot.
    Bench(bench::BenchArgs),
    /// Run every topology of topologies/ several times (as root) and write
    /// docs/benchmarks.md with medians, ranges and the goals checked.
    BenchDoc(bench::BenchDocArgs),
    /// Show plait at work in under a minute (as root): two emulated links built inside this
    /// machine, one download over the best link alone and one through plait over both,
    /// compared; everything is removed afterwards.
    Demo(bench::DemoArgs),
    /// Keep an emulated test bed up between commands (as root): `up` a topology file,
    /// `set` a path's rate, delay, loss, blackhole or link while it runs, `exec` commands in
    /// its namespaces, `status`, `down` (docs/testbed.md).
    Testbed(testbed::TestbedArgs),
    /// Print a new private key (base64), as `wg genkey` does.
    Genkey,
    /// Read a private key on stdin and print its public key, as `wg pubkey` does.
    Pubkey,
    /// Run a simulation scenario (TOML, see scenarios/): print its results table and write
    /// JSON, CSV and an SVG plot of throughput over time.
    Sim(sim::SimArgs),
    /// Re-run the seeds' published experiments (scenarios with `paper_kbps` values) and
    /// write the comparison to a Markdown file.
    Reproduce(sim::ReproduceArgs),
    /// Run every scheduler on every scenario of a directory (the scheduler suite) and write
    /// the comparison to a Markdown file.
    Schedulers(sim::SchedulersArgs),
    /// Send a file to `plait recv` through the tunnel with fountain codes (RaptorQ chunks,
    /// seed HMTP): resumable, verified by SHA-256 (docs/fec.md).
    Send(transfer::SendArgs),
    /// Receive one file from `plait send` into a directory, then exit; a restart resumes
    /// an interrupted transfer.
    Recv(transfer::RecvArgs),
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

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Server(args) => tunnel::server(args),
        Command::Client(args) => tunnel::client(args),
        Command::Status(args) => tunnel::status(args),
        Command::TunnelBench(args) => plait_lab::tunnel_bench::run(args.into()),
        Command::Bench(args) => plait_lab::bench::bench(args.into()),
        Command::BenchDoc(args) => plait_lab::bench::doc::bench_doc(args.into()),
        Command::Demo(args) => plait_lab::bench::demo::demo(args.into()),
        Command::Testbed(args) => {
            let (state_dir, command) = args.into_command()?;
            plait_lab::testbed::run(&state_dir, &command)
        }
        Command::Genkey => tunnel::genkey(),
        Command::Pubkey => tunnel::pubkey(),
        Command::Sim(args) => sim::sim(args),
        Command::Reproduce(args) => sim::reproduce(args),
        Command::Schedulers(args) => sim::schedulers(args),
        Command::Send(args) => transfer::send(args),
        Command::Recv(args) => transfer::recv(args),
    }
}
