//! A real plait tunnel (`plait server` and `plait client` processes) over a `plait-testbed`
//! topology, for the benchmark: keys and configs generated into a temporary directory,
//! waiting until the session is established on every path, SIGTERM shutdown. It is the
//! approach of `crates/plait/tests/tunnel_netns.rs`, as library code that returns errors
//! instead of panicking.
//!
//! The tunnel joins client site 0's lan host and the remote host: the client routes the
//! remote network into the tunnel, the server's `allowed_ips` for the client are its
//! tunnel address and site 0's LAN. Tunnel addresses are `10.77.0.1/24` (server) and
//! `10.77.0.2/24` (client). Encryption cannot be turned off (there is no such setting).
//!
//! Invariants:
//! - Every process started here is owned by a [`ChildGuard`] (SIGKILL on drop) and every
//!   file lives in a [`TempDir`] removed on drop (or by a later run, if this one was
//!   killed: [`crate::temp_dir`]); [`Tunnel`] drops its daemons before its directory.
//!   The namespaces belong to the caller's [`Topology`], which the tunnel borrows, so it
//!   cannot outlive them; dropping the topology kills anything left there.
//! - Every wait is bounded ([`ESTABLISH_TIMEOUT`], [`EXIT_TIMEOUT`]).
//! - An error while starting carries the tail of both daemons' logs.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use plait_testbed::{ChildGuard, Family, Namespace, Topology};
use plait_tunnel::control::StatusSnapshot;
use plait_tunnel::keys::Key;
use tempfile::TempDir;

/// How long the tunnel may take to come up.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a daemon may take to exit after SIGTERM.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines of a daemon's log quoted in an error.
const LOG_TAIL: usize = 40;

/// What tunnel to start.
#[derive(Clone, Debug)]
pub struct TunnelOptions {
    /// The `plait` binary to run.
    pub program: PathBuf,
    /// How many of site 0's paths the client uses (its first ones).
    pub paths: usize,
    /// `[engine] scheduler` of both daemons.
    pub scheduler: String,
    /// TUN device name (in the client's and the server's namespace).
    pub tun: String,
    /// The server's UDP port.
    pub port: u16,
    /// Stream mode: an empty `[streams]` table in both files (all defaults: TCP into the
    /// tunnel is redirected to the client's relay and re-originated by the server;
    /// docs/tunnel.md#stream-mode).
    pub streams: bool,
    /// Extra lines of both daemons' `[engine]` table (`key = value`).
    pub engine: Vec<String>,
}

/// One running daemon, killed on drop.
#[derive(Debug)]
pub struct Daemon {
    label: String,
    child: ChildGuard,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn start(ns: &Namespace, program: &Path, role: &str, label: &str, dir: &Path) -> Result<Self> {
        let config = dir.join(format!("{label}.toml"));
        let log = dir.join(format!("{label}.log"));
        let file = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let err = file.try_clone().context("log file")?;
        let mut cmd = ns.command(program);
        cmd.arg(role)
            .arg("-c")
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdout(file)
            .stderr(err);
        let child = ns
            .spawn(&mut cmd)
            .with_context(|| format!("starting the {label}"))?;
        Ok(Daemon {
            label: label.to_owned(),
            child,
            socket: dir.join(format!("{label}.sock")),
            log,
        })
    }

    /// The daemon's process id (`ip netns exec` execs it, so this is plait itself).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its status snapshot, from the status socket.
    pub fn status(&self) -> Result<StatusSnapshot> {
        plait_tunnel::control::status::query(&self.socket)
            .with_context(|| format!("{} status", self.label))
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Polls the status until `ready` holds, for at most [`ESTABLISH_TIMEOUT`].
    fn wait_for(&mut self, what: &str, ready: impl Fn(&StatusSnapshot) -> bool) -> Result<()> {
        let deadline = Instant::now() + ESTABLISH_TIMEOUT;
        let mut last = String::from("never asked");
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait()? {
                bail!("the {} exited early ({s}) waiting for {what}", self.label);
            }
            match self.status() {
                Ok(s) if ready(&s) => return Ok(()),
                Ok(s) => last = format!("{:?}", s.sessions),
                Err(e) => last = format!("{e:#}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "the {}: no {what} within {ESTABLISH_TIMEOUT:?}; last status: {last}",
            self.label
        )
    }

    /// SIGTERM; an error unless it exits 0 within [`EXIT_TIMEOUT`].
    fn shutdown(mut self) -> Result<()> {
        let status = self
            .child
            .terminate(EXIT_TIMEOUT)
            .with_context(|| format!("stopping the {}", self.label))?;
        if !status.success() {
            bail!(
                "the {} exited with {status} after SIGTERM; log:\n{}",
                self.label,
                self.log_tail(LOG_TAIL)
            );
        }
        Ok(())
    }
}

/// A server and one client running over a topology's site 0. Fields drop in order: the
/// daemons (killed) before the directory holding their files.
#[derive(Debug)]
pub struct Tunnel<'t> {
    client: Daemon,
    server: Daemon,
    topo: &'t Topology,
    _dir: TempDir,
}

fn write_key(dir: &Path, name: &str, key: &Key) -> Result<String> {
    let file = format!("{name}.key");
    std::fs::write(dir.join(&file), format!("{}\n", key.to_base64())).context("key file")?;
    Ok(file)
}

/// The server's config: one client, `client_public`, owning its tunnel address and site 0's
/// LAN.
fn server_config(
    topo: &Topology,
    opts: &TunnelOptions,
    dir: &Path,
    key_file: &str,
    client_public: &str,
) -> String {
    let mut cfg = String::new();
    let _ = writeln!(
        cfg,
        "private_key_file = \"{key_file}\"\nlisten = [\"0.0.0.0:{port}\"]\n\n\
         [tun]\nname = \"{tun}\"\naddresses = [\"10.77.0.1/24\"]\n\n\
         [engine]\nscheduler = \"{sched}\"\n{engine}\n\
         [control]\nstatus_socket = \"{sock}\"\n\n\
         [[client]]\nname = \"site0\"\npublic_key = \"{client_public}\"\n\
         allowed_ips = [\"10.77.0.2/32\", \"{lan}\"]\n",
        port = opts.port,
        tun = opts.tun,
        sched = opts.scheduler,
        engine = engine_lines(opts),
        sock = dir.join("server.sock").display(),
        lan = topo.site0().lan_net(Family::V4),
    );
    if opts.streams {
        cfg.push_str("[streams]\n");
    }
    cfg
}

/// The extra `[engine]` lines, each ending in a newline.
fn engine_lines(opts: &TunnelOptions) -> String {
    opts.engine.iter().map(|l| format!("{l}\n")).collect()
}

/// The client's config: the first `opts.paths` paths of site 0, the remote network routed
/// into the tunnel.
fn client_config(
    topo: &Topology,
    opts: &TunnelOptions,
    dir: &Path,
    key_file: &str,
    server_public: &str,
) -> String {
    let mut cfg = String::new();
    let _ = writeln!(
        cfg,
        "private_key_file = \"{key_file}\"\nserver_public_key = \"{server_public}\"\n\
         route = [\"{remote}\"]\n\n\
         [tun]\nname = \"{tun}\"\naddresses = [\"10.77.0.2/24\"]\n\n\
         [engine]\nscheduler = \"{sched}\"\n{engine}\n\
         [control]\nstatus_socket = \"{sock}\"\n",
        remote = topo.remote_net(Family::V4),
        tun = opts.tun,
        sched = opts.scheduler,
        engine = engine_lines(opts),
        sock = dir.join("client.sock").display(),
    );
    if opts.streams {
        cfg.push_str("[streams]\n\n");
    }
    for path in &topo.site0().paths()[..opts.paths] {
        let _ = writeln!(
            cfg,
            "[[path]]\nname = \"p{}\"\nserver = \"{}\"\n",
            path.index(),
            SocketAddr::new(path.server_addr(), opts.port),
        );
    }
    cfg
}

impl<'t> Tunnel<'t> {
    /// Starts the server, then the client, and waits until the client's session is
    /// established with every path active and the server sees it.
    pub fn start(topo: &'t Topology, opts: &TunnelOptions) -> Result<Tunnel<'t>> {
        let available = topo.site0().paths().len();
        if opts.paths == 0 || opts.paths > available {
            bail!(
                "a tunnel over {} paths needs a topology with that many (it has {available})",
                opts.paths
            );
        }
        let dir = crate::temp_dir::owned_temp_dir("plait-bench-")?;
        let server_key = Key::generate().map_err(|e| anyhow!("generating a key: {e}"))?;
        let client_key = Key::generate().map_err(|e| anyhow!("generating a key: {e}"))?;

        let key_file = write_key(dir.path(), "server", &server_key)?;
        let public = client_key.public().to_base64();
        let cfg = server_config(topo, opts, dir.path(), &key_file, &public);
        std::fs::write(dir.path().join("server.toml"), cfg).context("server config")?;
        let key_file = write_key(dir.path(), "client", &client_key)?;
        let public = server_key.public().to_base64();
        let cfg = client_config(topo, opts, dir.path(), &key_file, &public);
        std::fs::write(dir.path().join("client.toml"), cfg).context("client config")?;

        let mut server =
            Daemon::start(topo.server(), &opts.program, "server", "server", dir.path())?;
        if let Err(e) = server.wait_for("status socket", |_| true) {
            return Err(e.context(format!("server log:\n{}", server.log_tail(LOG_TAIL))));
        }
        let mut client =
            Daemon::start(topo.client(), &opts.program, "client", "client", dir.path())?;
        let n = opts.paths;
        let up = client
            .wait_for("established session with every path active", |s| {
                s.sessions.len() == 1
                    && s.sessions[0].established
                    && s.sessions[0].paths.len() == n
                    && s.sessions[0].paths.iter().all(|p| p.state == "active")
            })
            .and_then(|()| {
                server.wait_for("the client's session", |s| {
                    s.sessions.len() == 1 && s.sessions[0].established
                })
            });
        if let Err(e) = up {
            return Err(e.context(format!(
                "client log:\n{}\nserver log:\n{}",
                client.log_tail(LOG_TAIL),
                server.log_tail(LOG_TAIL)
            )));
        }
        Ok(Tunnel {
            client,
            server,
            topo,
            _dir: dir,
        })
    }

    /// The client daemon.
    pub fn client(&self) -> &Daemon {
        &self.client
    }

    /// The server daemon.
    pub fn server(&self) -> &Daemon {
        &self.server
    }

    /// The topology the tunnel runs over.
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }

    /// Stops the client, then the server, with SIGTERM; an error if either does not exit
    /// cleanly (both are stopped either way).
    pub fn shutdown(self) -> Result<()> {
        let Tunnel {
            client,
            server,
            _dir,
            ..
        } = self;
        match (client.shutdown(), server.shutdown()) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Err(c), Err(s)) => Err(anyhow!("{c:#}; and {s:#}")),
        }
    }
}
