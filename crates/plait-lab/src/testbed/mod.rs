//! `plait testbed up|down|set|status|exec`: an emulated deployment (plait-testbed's
//! [`Topology`](plait_testbed::Topology) of a benchmark topology file) that stays up between
//! shell commands, can be changed while it runs and is taken down on request.
//!
//! - [`options`]: what each subcommand is asked to do (the binary's argument parser fills
//!   them; `set`'s options become a [`settings::Change`] there).
//! - [`settings`]: per-path settings and changes (pure data, checked on both sides);
//!   [`loss`]: the loss models they carry; [`error`]: why a change is refused.
//! - [`proto`]: the control protocol (one JSON line each way over a Unix socket).
//! - [`state`]: `ROOT/NAME/state.json`, the holder's liveness.
//! - [`holder`]: the long-running process that owns the topology.
//! - [`up`], [`down`], [`set`], [`status`], [`exec`]: the user-facing subcommands.
//!
//! Design. The topology's NFQUEUE emulators are threads, so the topology lives in one
//! long-running process, the holder (`plait testbed hold`, hidden), which `up` starts from
//! this same binary (stdin null, stderr to `holder.log`, stdout a pipe on which it reports
//! ready or the error once); the holder makes itself a session leader (`setsid`), so the
//! terminal's signals no longer reach it. The holder owns the [`Topology`] on its main
//! thread and lends `&Topology` to two users at once, inside one `std::thread::scope`: a
//! scoped thread running the file's `[[event]]` schedule (`bench::run::run_events`), and
//! the main thread serving control requests one connection at a time. Every change the
//! holder makes goes through `&self` methods of the topology (tbf via `PathLink::set_rate`,
//! nftables blackhole, link state, and `Topology::set_path_model`, whose emulator list is
//! behind a mutex), so no `&mut` and no channel is needed, and a `set` never waits for the
//! event schedule to end. The holder stops on a `down` request, SIGTERM or SIGINT (flags
//! checked every 25 ms; SIGHUP is ignored so closing the terminal does not kill it), ends
//! the event schedule (lifting an active event), drops the topology (which deletes every
//! namespace, emulator and rule) and removes its state directory.
//!
//! Invariants:
//! - At most one holder per NAME and state root: `up` claims the name by creating
//!   `ROOT/NAME` (exclusively) after refusing a live one and cleaning up a stale one, all
//!   under the name's lock (`state::lock_name`), which `down` takes too.
//! - The namespaces of test bed NAME are named with prefix NAME and the holder's pid
//!   (`plait_testbed::netns`), so `down` can always find them, also after the holder was
//!   SIGKILLed; it deletes those of the recorded holder and of dead owners, never those of
//!   another live process.
//! - Every wait is bounded: `up` waits [`up::READY_TIMEOUT`] for the report, `down` waits
//!   for the holder then signals it (SIGTERM, then SIGKILL), control connections time out.
//! - Nothing here panics on input from users, files, sockets or processes.

pub mod down;
pub mod error;
pub mod exec;
pub mod holder;
pub mod loss;
pub mod options;
pub mod proto;
pub mod set;
pub mod settings;
pub mod state;
pub mod status;
pub mod up;

use anyhow::{Context, Result, bail};

use options::{DownOptions, ExecOptions, HoldOptions, SetOptions, StatusOptions, UpOptions};

/// One `plait testbed` subcommand.
#[derive(Debug, Clone)]
pub enum Command {
    /// Build a topology and keep it up.
    Up(UpOptions),
    /// Take test beds down.
    Down(DownOptions),
    /// Change one path of a running test bed.
    Set(SetOptions),
    /// Show running test beds.
    Status(StatusOptions),
    /// Run a command in one of a test bed's namespaces.
    Exec(ExecOptions),
    /// The holder process itself (started by `up`).
    Hold(HoldOptions),
}

/// Runs `plait testbed …` with test beds' state under `state_dir`.
pub fn run(state_dir: &std::path::Path, command: &Command) -> Result<()> {
    // Absolute: the holder runs from `/`, and hints printed to the user must work anywhere.
    let root = std::path::absolute(state_dir)
        .with_context(|| format!("cannot resolve --state-dir {}", state_dir.display()))?;
    match command {
        Command::Up(a) => up::up(&root, a),
        Command::Down(a) => down::down(&root, a),
        Command::Set(a) => set::set(&root, a),
        Command::Status(a) => status::status(&root, a),
        Command::Exec(a) => exec::exec(&root, a),
        Command::Hold(a) => holder::hold(&root, a),
    }
}

/// Refuses to go on without root, naming the subcommand.
pub fn need_root(sub: &str) -> Result<()> {
    if !plait_testbed::have_root() {
        bail!(
            "`plait testbed {sub}` works on network namespaces and emulated links: run it as \
             root (e.g. `sudo plait testbed {sub} …`)"
        );
    }
    Ok(())
}

/// Checks a test bed name (it is the namespace prefix).
pub fn check_name(name: &str) -> Result<()> {
    if plait_testbed::netns::validate_prefix(name).is_err() {
        bail!(
            "test bed name {name:?} must be 1 to 8 characters of a-z and _ (it is the prefix \
             of its namespace names)"
        );
    }
    Ok(())
}

/// `plait testbed`, with `--state-dir DIR` when it is not the default: the start of the
/// commands printed as hints.
pub fn testbed_cli(root: &std::path::Path) -> String {
    if root == std::path::Path::new(state::DEFAULT_ROOT) {
        "plait testbed".to_owned()
    } else {
        format!("plait testbed --state-dir {}", root.display())
    }
}
