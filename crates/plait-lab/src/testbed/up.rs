//! `plait testbed up TOPOLOGY [--name NAME] [--no-events]`: starts the holder and reports.
//!
//! Order: check the name and the file (no root needed for that), then root; refuse a live
//! test bed of the same name, clean up a stale one; claim `ROOT/NAME` by creating it; start
//! `plait testbed hold` (this binary) with stdin null, stdout a pipe, stderr `holder.log`;
//! wait up to [`READY_TIMEOUT`] for its one-line report. On success print what a newcomer
//! needs (namespaces, addresses, commands); on failure, or Ctrl-C while waiting, stop the
//! holder, remove everything ([`super::down::clean`]) and show the end of its log.
//!
//! Invariant: `up` returns only when the test bed is ready, or when nothing of it is left.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use super::options::UpOptions;
use super::proto::{self, Reply};
use super::state::{self, Paths, Phase, State};
use super::{check_name, down, need_root, testbed_cli};
use plait_topology::TopologyFile;

/// How long `up` waits for the holder to report.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a holder that failed or was interrupted gets to remove what it built.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Lines of `holder.log` shown when the start fails.
const LOG_TAIL_LINES: usize = 15;

/// Runs `plait testbed up`.
pub fn up(root: &Path, args: &UpOptions) -> Result<()> {
    let name = args.name.as_str();
    check_name(name)?;
    let file = TopologyFile::load(&args.topology)?;
    need_root("up")?;
    let topology = std::fs::canonicalize(&args.topology)
        .with_context(|| format!("cannot resolve {}", args.topology.display()))?;
    let paths = Paths::new(root, name);
    let tb = testbed_cli(root);
    // Held until this function returns: the holder is ready or gone by then.
    let _lock = state::lock_name(root, name)?;
    if let Some(pid) = down::live_holder(&paths) {
        bail!(
            "test bed {name} is already up (holder pid {pid}); take it down first with \
             `{tb} down {name}`, or pick another --name"
        );
    }
    let stale = down::clean(&paths, name).context("cleaning up a stale test bed")?;
    if !stale.is_empty() {
        eprintln!(
            "cleaned up what a stale test bed {name} left: {}",
            stale.join("; ")
        );
    }
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    // Mode 0700: the control socket inside is bound before it can be chmod'ed, and nobody
    // but root may reach it in between.
    match std::fs::DirBuilder::new().mode(0o700).create(&paths.dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "another `plait testbed up --name {name}` started at the same moment; \
             see `{tb} status {name}`"
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot create {}", paths.dir.display()));
        }
    }
    let cancel = crate::bench::interrupt_flag()?;
    let result =
        start_holder(root, &paths, &topology, args).and_then(|mut child| {
            match wait_ready(&mut child, &cancel) {
                Ok(()) => Ok(()),
                Err(e) => {
                    stop(&mut child);
                    Err(e)
                }
            }
        });
    match result {
        Ok(()) => {
            let st = state::read(&paths)?
                .ok_or_else(|| anyhow!("the holder reported ready but wrote no state"))?;
            print!("{}", summary(&st, &file, root));
            Ok(())
        }
        Err(e) => {
            let tail = log_tail(&paths.log());
            if let Err(c) = down::clean(&paths, name) {
                eprintln!("cleaning up after the failed start: {c:#}");
            }
            if let Some(t) = tail {
                eprintln!("the holder's log ended with:\n{t}");
            }
            Err(e)
        }
    }
}

fn start_holder(root: &Path, paths: &Paths, topology: &Path, args: &UpOptions) -> Result<Child> {
    let log = File::create(paths.log())
        .with_context(|| format!("cannot create {}", paths.log().display()))?;
    let exe = std::env::current_exe().context("finding the plait binary")?;
    let mut cmd = Command::new(exe);
    cmd.arg("testbed")
        .arg("--state-dir")
        .arg(root)
        .arg("hold")
        .arg(topology)
        .arg("--name")
        .arg(&args.name);
    if args.no_events {
        cmd.arg("--no-events");
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .context("starting the holder process")
}

/// Waits for the holder's report line.
fn wait_ready(child: &mut Child, cancel: &AtomicBool) -> Result<()> {
    let out = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("the holder has no standard output pipe"))?;
    let (tx, rx) = mpsc::channel();
    // Blocking read on its own thread so the wait stays bounded; it ends when the pipe
    // closes (the holder exits or is killed).
    std::thread::spawn(move || {
        let _ = tx.send(proto::read_line(out).and_then(|l| proto::decode::<Reply>(&l)));
    });
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Ok(Reply::Ok { .. })) => return Ok(()),
            Ok(Ok(Reply::Error { error })) => bail!("the test bed could not be built: {error}"),
            Ok(Err(e)) => bail!("the holder ended without reporting ready ({e})"),
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the holder's report was lost"),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if cancel.load(Ordering::Acquire) {
            bail!("interrupted; removing what was built");
        }
        if Instant::now() >= deadline {
            bail!("the holder did not report ready within {READY_TIMEOUT:?}");
        }
    }
}

/// Stops a holder that failed or is being abandoned: SIGTERM, then SIGKILL, and reaps it.
fn stop(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The last lines of the holder's log, if it has any.
fn log_tail(path: &Path) -> Option<String> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
    (!tail.is_empty()).then_some(tail)
}

/// What `up` prints: namespaces, addresses, per-path settings and the commands to use.
pub fn summary(st: &State, file: &TopologyFile, root: &Path) -> String {
    let name = &st.name;
    let tb = testbed_cli(root);
    let mut s = format!(
        "test bed {name} is up: {} ({}), holder pid {}{}\n",
        file.name,
        file.summary(),
        st.pid,
        if st.phase == Phase::Ready {
            ""
        } else {
            " (still starting)"
        }
    );
    if !st.events.is_empty() {
        let what = if st.events_applied {
            "applied from now on"
        } else {
            "not applied (--no-events)"
        };
        s.push_str(&format!(
            "events: {} in the file, {what}\n",
            st.events.len()
        ));
    }
    s.push_str("\nnamespaces (role, name, what):\n");
    for ns in &st.namespaces {
        s.push_str(&format!("  {:<6} {:<20} {}\n", ns.role, ns.name, ns.what));
    }
    if let Some(a) = &st.addresses {
        s.push_str("\naddresses:\n");
        s.push_str(&format!(
            "  lan host {}  --  client {} (LAN)\n",
            a.lan_host.join(", "),
            a.client_lan.join(", ")
        ));
        for (i, p) in a.paths.iter().enumerate() {
            let settings = st.paths.get(i).map(|x| x.summary()).unwrap_or_default();
            s.push_str(&format!(
                "  path {i}: client {} -- {} router r0x{i} {} -- {} server   {settings}\n",
                p.client, p.router_client, p.router_server, p.server
            ));
        }
        s.push_str(&format!(
            "  server {}  --  remote host {}\n",
            a.server_remote.join(", "),
            a.remote_host.join(", ")
        ));
        s.push_str(
            "  Nothing routes between the lan host and the remote host: only a tunnel \
             connects them.\n",
        );
    }
    let client = st.namespace("cli0").unwrap_or("NAMESPACE");
    let server = st
        .addresses
        .as_ref()
        .and_then(|a| a.paths.first())
        .map(|p| p.server.as_str())
        .unwrap_or("10.4.0.2");
    s.push_str(&format!(
        "\nrun a command inside a namespace:\n  \
         {tb} exec {name} cli0 -- ping -c 3 {server}\n  \
         ip netns exec {client} ping -c 3 {server}\n\
         change a path:  {tb} set {name} 0 --delay 50 --loss 0.01\n\
         see it:         {tb} status {name}\n\
         take it down:   {tb} down {name}\n"
    ));
    s
}
