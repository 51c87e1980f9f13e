//! `plait testbed hold` (hidden): the process that owns a running test bed (see the parent
//! module for the design).
//!
//! Life: write `state.json` (phase starting) → build the topology → write `state.json`
//! (ready: namespaces, addresses, settings) → bind `control.sock` (0600) → report ready on
//! standard output (one [`Reply`] line; standard output is then pointed at /dev/null, as
//! nobody reads it any more) → apply the file's events on a scoped thread while serving
//! control requests on this one → on `down`, SIGTERM or SIGINT: end the events (lifting an
//! active one), drop the topology, remove the state directory, exit 0. An error before
//! ready is reported instead, with everything built so far removed.
//!
//! Invariants: requests are served one at a time, each bounded by the protocol's timeouts;
//! a request is checked again here ([`Change::apply`]) whatever the client checked; a
//! failing change reports which parts were applied before the error, and `state.json`
//! records what is in force (a timed event's start and end are recorded within one accept
//! poll, [`ACCEPT_POLL`]); the holder's diagnostics go to standard error
//! (`holder.log`).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use plait_testbed::topology::addr;
use plait_testbed::{Direction, Family, Topology, cleanup_stale};

use super::options::HoldOptions;
use super::proto::{self, IO_TIMEOUT, Reply, Request};
use super::settings::{Change, DirSettings, PathSettings};
use super::state::{
    self, Addresses, EventInfo, NamespaceRole, PathAddresses, Paths, Phase, STATE_VERSION, State,
};
use crate::bench::run::{loss_event_model, run_events};
use crate::bench::spec::testbed_spec;
use plait_topology::{EventFile, EventKind, TopologyFile};

/// How often the idle holder looks for a connection or a stop signal.
const ACCEPT_POLL: Duration = Duration::from_millis(25);
/// Seed of the loss emulation (as `plait bench`'s default).
pub const SEED: u64 = 1;

/// Diagnostics on standard error (the holder's log), stamped with the time since start.
#[derive(Debug)]
struct Log(Instant);

impl Log {
    fn say(&self, msg: &str) {
        eprintln!("[{:9.3} s] {msg}", self.0.elapsed().as_secs_f64());
    }
}

/// Runs the holder; see the module documentation.
pub fn hold(root: &Path, args: &HoldOptions) -> Result<()> {
    // A session of its own: the terminal's Ctrl-C and hang-up no longer reach it. It fails
    // only if this process already leads a group, which `up` never makes it.
    let _ = nix::unistd::setsid();
    // Do not keep `up`'s working directory busy.
    let _ = std::env::set_current_dir("/");
    let log = Log(Instant::now());
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    // Caught and ignored (a flag nobody reads): the default would end the holder.
    signal_hook::flag::register(
        signal_hook::consts::SIGHUP,
        Arc::new(AtomicBool::new(false)),
    )
    .context("installing signal handlers")?;
    let paths = Paths::new(root, &args.name);
    let (file, topo, mut st, listener) = match prepare(&paths, args, &stop, &log) {
        Ok(p) => p,
        Err(e) => {
            log.say(&format!("failed: {e:#}"));
            report(&Reply::Error {
                error: format!("{e:#}"),
            });
            return Err(e);
        }
    };
    report(&Reply::Ok {
        message: format!("test bed {} is up", args.name),
    });
    log.say("ready");
    let t0 = Instant::now();
    let events_done = AtomicBool::new(false);
    // Event transitions, for `state.json` (the serving loop owns the state).
    let (event_tx, event_rx) = mpsc::channel::<(EventFile, bool)>();
    std::thread::scope(|s| {
        let events = (!args.no_events && !file.events.is_empty()).then(|| {
            let observe = move |e: &EventFile, on: bool| {
                let _ = event_tx.send((*e, on));
            };
            let (topo, file, events_done, log) = (&topo, &file, &events_done, &log);
            s.spawn(move || {
                // Logged when the schedule ends, not at shutdown, so the log shows it.
                match run_events(topo, file, t0, events_done, &observe) {
                    Ok(times) => log.say(&format!("events done; (start, end) s: {times:?}")),
                    Err(e) => log.say(&format!("applying the events failed: {e:#}")),
                }
            })
        });
        serve(&topo, &listener, &paths, &mut st, &stop, &event_rx, &log);
        events_done.store(true, Ordering::Release);
        if let Some(Err(_)) = events.map(|t| t.join()) {
            log.say("the event thread panicked");
        }
    });
    log.say("removing the topology");
    drop(listener);
    drop(topo);
    remove_dir(&paths, &log);
    log.say("done");
    Ok(())
}

/// Everything up to ready; on error what was built is dropped (and so removed).
fn prepare(
    paths: &Paths,
    args: &HoldOptions,
    stop: &AtomicBool,
    log: &Log,
) -> Result<(TopologyFile, Topology, State, UnixListener)> {
    let file = TopologyFile::load(&args.topology)?;
    let mut st = State {
        version: STATE_VERSION,
        name: args.name.clone(),
        pid: std::process::id(),
        pid_start: state::process_start(std::process::id()),
        phase: Phase::Starting,
        started_unix_ms: state::now_unix_ms(),
        topology_path: args.topology.display().to_string(),
        topology: serde_json::to_value(&file).context("encoding the topology")?,
        events_applied: !args.no_events,
        events: file
            .events
            .iter()
            .map(|e| EventInfo {
                // The file's own spelling, whatever kinds it grows.
                kind: serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{:?}", e.kind)),
                path: e.path,
                from_s: e.from_s,
                to_s: e.to_s,
                rate_mbit: e.rate_mbit,
            })
            .collect(),
        namespaces: Vec::new(),
        addresses: None,
        paths: Vec::new(),
    };
    state::write(paths, &st)?;
    match cleanup_stale(&args.name) {
        Ok(gone) if !gone.is_empty() => log.say(&format!("removed stale namespaces {gone:?}")),
        Ok(_) => {}
        Err(e) => log.say(&format!("warning: looking for stale namespaces: {e}")),
    }
    log.say(&format!("building {} ({})", file.name, file.summary()));
    let topo = Topology::build(&testbed_spec(&file, &args.name, SEED))
        .context("building the test bed (network namespaces)")?;
    if stop.load(Ordering::Acquire) {
        bail!("interrupted while building (everything built is removed again)");
    }
    st.namespaces = namespaces(&topo);
    st.addresses = Some(addresses(&topo));
    st.paths = topo
        .site0()
        .paths()
        .iter()
        .map(|p| PathSettings::from_spec(p.spec()))
        .collect();
    st.phase = Phase::Ready;
    st.started_unix_ms = state::now_unix_ms();
    state::write(paths, &st)?;
    let sock = paths.control();
    match std::fs::remove_file(&sock) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", sock.display())),
    }
    let listener =
        UnixListener::bind(&sock).with_context(|| format!("cannot bind {}", sock.display()))?;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict {}", sock.display()))?;
    listener
        .set_nonblocking(true)
        .context("making the control socket non-blocking")?;
    Ok((file, topo, st, listener))
}

/// The report to `up`: one line on standard output, which then goes to /dev/null (`up`
/// stops reading after this line; a later write would fail with EPIPE).
fn report(reply: &Reply) {
    if let Err(e) = proto::write_msg(std::io::stdout().lock(), reply) {
        eprintln!("reporting to `plait testbed up` failed (it may have been interrupted): {e}");
    }
    match std::fs::File::options().write(true).open("/dev/null") {
        Ok(null) => {
            if let Err(e) = nix::unistd::dup2_stdout(&null) {
                eprintln!("redirecting standard output: {e}");
            }
        }
        Err(e) => eprintln!("opening /dev/null: {e}"),
    }
}

/// Namespaces by role, in the order of the topology's picture.
fn namespaces(topo: &Topology) -> Vec<NamespaceRole> {
    let mut v = Vec::new();
    let mut push = |role: String, ns: &plait_testbed::Namespace, what: String| {
        v.push(NamespaceRole {
            role,
            name: ns.name().to_owned(),
            what,
        });
    };
    for site in topo.clients() {
        let c = site.index();
        push(
            format!("lan{c}"),
            site.lan_host(),
            format!("lan host of client {c}"),
        );
        push(format!("cli{c}"), site.client(), format!("client {c}"));
        for p in site.paths() {
            let i = p.index();
            push(
                format!("r{c}x{i}"),
                p.router(),
                format!("router of path {i} (rate, delay, loss)"),
            );
        }
    }
    push("srv".into(), topo.server(), "server".into());
    push("rem".into(), topo.remote_host(), "remote host".into());
    v
}

/// The key addresses of client site 0.
fn addresses(topo: &Topology) -> Addresses {
    let both = |f: &dyn Fn(Family) -> std::net::IpAddr| -> Vec<String> {
        Family::BOTH.iter().map(|&x| f(x).to_string()).collect()
    };
    let site = topo.site0();
    Addresses {
        lan_host: both(&|f| site.lan_host_addr(f)),
        client_lan: both(&|f| site.client_lan_addr(f)),
        server_remote: both(&|f| topo.server_remote_addr(f)),
        remote_host: both(&|f| topo.remote_host_addr(f)),
        paths: site
            .paths()
            .iter()
            .map(|p| {
                let (c, i, f) = (p.client_index(), p.index(), p.family());
                PathAddresses {
                    client: p.client_addr().to_string(),
                    router_client: addr::host(addr::path_client_net(c, i, f), 2).to_string(),
                    router_server: addr::host(addr::path_server_net(c, i, f), 1).to_string(),
                    server: p.server_addr().to_string(),
                }
            })
            .collect(),
    }
}

/// Serves control connections until a `down` request or a stop signal.
fn serve(
    topo: &Topology,
    listener: &UnixListener,
    paths: &Paths,
    st: &mut State,
    stop: &AtomicBool,
    events: &mpsc::Receiver<(EventFile, bool)>,
    log: &Log,
) {
    while !stop.load(Ordering::Acquire) {
        let mut changed = false;
        while let Ok((event, on)) = events.try_recv() {
            record_event(topo, st, &event, on);
            log.say(&format!(
                "event {:?} on path {} {}",
                event.kind,
                event.path,
                if on { "in force" } else { "lifted" }
            ));
            changed = true;
        }
        if changed && let Err(e) = state::write(paths, st) {
            log.say(&format!("updating state.json: {e:#}"));
        }
        match listener.accept() {
            Ok((stream, _)) => {
                if handle(topo, stream, paths, st, log) {
                    log.say("down requested");
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(ACCEPT_POLL);
            }
            Err(e) => {
                log.say(&format!("accepting a control connection: {e}"));
                std::thread::sleep(ACCEPT_POLL);
            }
        }
    }
    log.say("stop signal received");
}

/// Answers one connection; returns whether the holder should stop.
fn handle(topo: &Topology, stream: UnixStream, paths: &Paths, st: &mut State, log: &Log) -> bool {
    let setup = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(IO_TIMEOUT)))
        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)));
    if let Err(e) = setup {
        log.say(&format!("control connection: {e}"));
        return false;
    }
    let request = proto::read_line(proto::Deadline::new(&stream, IO_TIMEOUT))
        .and_then(|line| proto::decode::<Request>(&line));
    let (reply, stop) = match request {
        Err(e) => (
            Reply::Error {
                error: format!("bad request: {e}"),
            },
            false,
        ),
        Ok(Request::Ping {}) => (
            Reply::Ok {
                message: format!(
                    "holder of test bed {} (pid {}), up {:.0} s",
                    st.name,
                    st.pid,
                    st.uptime_s()
                ),
            },
            false,
        ),
        Ok(Request::Down {}) => (
            Reply::Ok {
                message: format!("taking test bed {} down", st.name),
            },
            true,
        ),
        Ok(Request::Set { change }) => {
            let reply = match set(topo, st, &change) {
                Ok(m) => Reply::Ok { message: m },
                Err(e) => Reply::Error { error: e },
            };
            if let Err(e) = state::write(paths, st) {
                log.say(&format!("updating state.json: {e:#}"));
            }
            (reply, false)
        }
    };
    match &reply {
        Reply::Ok { message } => log.say(message),
        Reply::Error { error } => log.say(&format!("refused: {error}")),
    }
    if let Err(e) = proto::write_msg(&stream, &reply) {
        log.say(&format!("answering a control connection: {e}"));
    }
    stop
}

/// Records in `st` what a timed event did to its path: in force (`on`), or lifted, which
/// puts back the file's settings for what the event changes (`run_events` restores those,
/// whatever `set` did before or during the event).
fn record_event(topo: &Topology, st: &mut State, e: &EventFile, on: bool) {
    let Some(cur) = st.paths.get_mut(e.path) else {
        return;
    };
    match e.kind {
        EventKind::Blackhole => cur.blackhole = on,
        EventKind::LinkDown => cur.link_up = !on,
        EventKind::Rate => {
            if let Ok(link) = topo.path(e.path) {
                let spec = link.spec();
                cur.rate_mbit = if on { e.rate_mbit } else { spec.rate_mbit };
                cur.queue_bytes = spec.queue_bytes;
            }
        }
        EventKind::Loss => {
            if let Ok(link) = topo.path(e.path) {
                let spec = link.spec();
                for dir in [Direction::Up, Direction::Down] {
                    let model = loss_event_model(spec, dir, e, on);
                    *cur.dir_mut(dir) = DirSettings::from_model(&model);
                }
            }
        }
    }
}

/// Applies `change`, recording in `st` every part that took effect.
fn set(topo: &Topology, st: &mut State, change: &Change) -> Result<String, String> {
    let n = st.paths.len();
    change.validate(n).map_err(|e| e.to_string())?;
    let current = st
        .paths
        .get_mut(change.path)
        .ok_or_else(|| format!("path {} has no settings", change.path))?;
    let next = change.apply(current, n).map_err(|e| e.to_string())?;
    let mut done = Vec::new();
    match apply_parts(topo, change, &next, current, &mut done) {
        Ok(()) => Ok(format!("path {}: {}", change.path, current.summary())),
        Err(e) if done.is_empty() => {
            Err(format!("path {}: {e:#}; nothing was changed", change.path))
        }
        Err(e) => Err(format!(
            "path {}: {e:#}; applied before the error: {}",
            change.path,
            done.join(", ")
        )),
    }
}

/// The library calls of a change, in a fixed order; `current` follows each success.
fn apply_parts(
    topo: &Topology,
    change: &Change,
    next: &PathSettings,
    current: &mut PathSettings,
    done: &mut Vec<&'static str>,
) -> Result<()> {
    let i = change.path;
    let link = topo.path(i)?;
    if change.changes_rate() {
        link.set_rate(next.rate_mbit, next.queue_bytes)
            .context("setting the rate")?;
        current.rate_mbit = next.rate_mbit;
        current.queue_bytes = next.queue_bytes;
        done.push("rate and queue");
    }
    if change.changes_model() {
        for &d in change.dirs.list() {
            let want = *next.dir(d);
            topo.set_path_model(i, d, want.link_model())
                .with_context(|| format!("setting delay and loss ({d:?})"))?;
            *current.dir_mut(d) = want;
            done.push(match d {
                plait_testbed::Direction::Up => "delay and loss up",
                plait_testbed::Direction::Down => "delay and loss down",
            });
        }
    }
    if let Some(on) = change.blackhole {
        link.blackhole(on).context("setting the blackhole")?;
        current.blackhole = on;
        done.push("blackhole");
    }
    if let Some(up) = change.link_up {
        link.set_link(up).context("setting the link")?;
        current.link_up = up;
        done.push("link");
    }
    if done.is_empty() {
        return Err(anyhow!("nothing to do"));
    }
    Ok(())
}

/// Removes the state directory (socket, state, log), if it is still this holder's: after
/// a forced `down` and a new `up`, the directory may belong to the next holder.
fn remove_dir(paths: &Paths, log: &Log) {
    if state::read_pid(paths).map(|(pid, _)| pid) != Some(std::process::id()) {
        log.say(&format!(
            "{} is no longer this holder's; leaving it",
            paths.dir.display()
        ));
        return;
    }
    match std::fs::remove_dir_all(&paths.dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log.say(&format!("removing {}: {e}", paths.dir.display())),
    }
}
