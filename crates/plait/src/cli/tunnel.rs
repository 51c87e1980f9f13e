//! `plait server`, `plait client`, `plait status`, `plait genkey`, `plait pubkey`.
//!
//! Flags override the config file: a flag given replaces the file's value (`--route`
//! replaces the whole list). Everything is validated by plait-tunnel's config module
//! before the daemon starts.

use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use clap::Args;
use ipnet::IpNet;
use plait_proto::EngineSettings;
use plait_proto::sched::SchedulerKind;
use plait_tunnel::config;
use plait_tunnel::control::{render, status};
use plait_tunnel::keys::Key;
use tracing_subscriber::EnvFilter;

/// Options both daemons take.
#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// The configuration file (TOML; docs/tunnel-config.md).
    #[arg(long, short)]
    pub config: PathBuf,
    /// TUN device name (overrides `[tun] name`).
    #[arg(long)]
    pub tun: Option<String>,
    /// Scheduler (overrides `[engine] scheduler`): plait, edpf, min-rtt, wrr, ...
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Unix socket for `plait status` (overrides `[control] status_socket`).
    #[arg(long)]
    pub status_socket: Option<PathBuf>,
    /// Serve Prometheus metrics on this address (overrides `[control] metrics`).
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// Log level: error, warn, info, debug or trace (RUST_LOG, if set, takes precedence).
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

/// `plait client`.
#[derive(Args, Debug)]
pub struct ClientArgs {
    #[command(flatten)]
    pub daemon: DaemonArgs,
    /// Route this prefix into the tunnel (repeatable; replaces the file's `route`), e.g.
    /// `--route 0.0.0.0/0 --route ::/0`. Path traffic keeps to its links (policy routing;
    /// docs/tunnel-routing.md). Undone on exit.
    #[arg(long)]
    pub route: Vec<IpNet>,
}

/// `plait server`.
#[derive(Args, Debug)]
pub struct ServerArgs {
    #[command(flatten)]
    pub daemon: DaemonArgs,
    /// Forward and masquerade tunnel traffic out of this interface (overrides `nat`).
    /// Undone on exit.
    #[arg(long)]
    pub nat: Option<String>,
}

/// `plait status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The daemon's status socket (default: the client's, else the server's).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Print the snapshot as JSON (a stable interface for scripts).
    #[arg(long)]
    pub json: bool,
}

fn init_logging(level: &str) -> Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => EnvFilter::try_new(v).context("RUST_LOG")?,
        _ => {
            if !["error", "warn", "info", "debug", "trace"].contains(&level) {
                bail!("--log-level {level:?}: use error, warn, info, debug or trace");
            }
            EnvFilter::new(format!(
                "plait={level},plait_tunnel={level},plait_proto={level}"
            ))
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    Ok(())
}

fn apply_engine(e: &mut EngineSettings, scheduler: &Option<String>) -> Result<()> {
    if let Some(name) = scheduler {
        e.scheduler = SchedulerKind::from_name(name).with_context(|| {
            let names: Vec<_> = SchedulerKind::ALL.iter().map(|k| k.name()).collect();
            format!("--scheduler {name:?}: unknown; one of {}", names.join(", "))
        })?;
    }
    Ok(())
}

fn apply_common(
    d: &DaemonArgs,
    tun: &mut config::TunConfig,
    engine: &mut EngineSettings,
    control: &mut config::ControlConfig,
) -> Result<()> {
    if let Some(name) = &d.tun {
        plait_tunnel::netcfg::check_ifname(name).with_context(|| format!("--tun {name:?}"))?;
        tun.name = name.clone();
    }
    apply_engine(engine, &d.scheduler)?;
    if let Some(s) = &d.status_socket {
        control.status_socket = s.clone();
    }
    if let Some(m) = d.metrics {
        control.metrics = Some(m);
    }
    Ok(())
}

/// `plait client`.
pub fn client(args: ClientArgs) -> Result<()> {
    init_logging(&args.daemon.log_level)?;
    let mut cfg = config::load_client(&args.daemon.config)?;
    apply_common(
        &args.daemon,
        &mut cfg.tun,
        &mut cfg.engine,
        &mut cfg.control,
    )?;
    if !args.route.is_empty() {
        cfg.route = args.route;
    }
    let stop = Arc::new(AtomicBool::new(false));
    plait_tunnel::daemon::run_client(cfg, stop)?;
    Ok(())
}

/// `plait server`.
pub fn server(args: ServerArgs) -> Result<()> {
    init_logging(&args.daemon.log_level)?;
    let mut cfg = config::load_server(&args.daemon.config)?;
    apply_common(
        &args.daemon,
        &mut cfg.tun,
        &mut cfg.engine,
        &mut cfg.control,
    )?;
    if let Some(nat) = args.nat {
        cfg.nat = Some(nat);
    }
    let stop = Arc::new(AtomicBool::new(false));
    plait_tunnel::daemon::run_server(cfg, stop)?;
    Ok(())
}

/// `plait status`.
pub fn status(args: StatusArgs) -> Result<()> {
    let socket = match args.socket {
        Some(s) => s,
        None => {
            let client = config::ControlConfig::client_default().status_socket;
            if client.exists() {
                client
            } else {
                config::ControlConfig::server_default().status_socket
            }
        }
    };
    let snap = status::query(&socket)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&snap)?);
    } else {
        print!("{}", render::render_table(&snap));
    }
    Ok(())
}

/// `plait genkey`: a new private key on stdout.
pub fn genkey() -> Result<()> {
    println!("{}", Key::generate()?.to_base64());
    Ok(())
}

/// `plait pubkey`: the public key of the private key on stdin.
pub fn pubkey() -> Result<()> {
    let mut text = String::new();
    std::io::stdin()
        .take(1024)
        .read_to_string(&mut text)
        .context("reading the private key from stdin")?;
    let key = Key::from_base64(&text).context("the private key on stdin")?;
    println!("{}", key.public().to_base64());
    Ok(())
}
