//! `plait testbed down [NAME | --all]`: stops the holder and removes everything of a test
//! bed, whatever state it is in.
//!
//! Order for one test bed ([`clean`]): if the recorded holder is alive, ask it over the
//! control socket to go down and wait [`REQUEST_WAIT`]; if it does not answer or does not
//! exit, SIGTERM it and wait [`TERM_WAIT`], then SIGKILL it and wait [`KILL_WAIT`]. Then
//! delete the namespaces with the test bed's prefix that belong to that holder or to a dead
//! process (what a SIGKILLed holder leaves), and remove the state directory.
//!
//! Invariants: idempotent (a second run finds nothing and says so); a signal is only sent
//! to a process that is the recorded holder (same pid, same start time, `testbed hold` on
//! its command line), never to a reused pid; namespaces of another live process are left
//! alone and named in the output.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::Signal;
use plait_testbed::Namespace;
use plait_testbed::netns::{self, owner_pid};

use super::options::{DEFAULT_NAME, DownOptions};
use super::proto::{self, Reply, Request};
use super::state::{self, Paths, holder_alive};
use super::{check_name, need_root};

/// How long a holder that accepted a `down` request gets to remove everything.
pub const REQUEST_WAIT: Duration = Duration::from_secs(30);
/// How long a holder gets after SIGTERM.
pub const TERM_WAIT: Duration = Duration::from_secs(15);
/// How long a holder gets to disappear after SIGKILL.
pub const KILL_WAIT: Duration = Duration::from_secs(5);

/// Runs `plait testbed down`.
pub fn down(root: &Path, args: &DownOptions) -> Result<()> {
    need_root("down")?;
    let names = if args.all {
        state::list(root)?
    } else {
        let name = args.name.as_deref().unwrap_or(DEFAULT_NAME);
        check_name(name)?;
        vec![name.to_owned()]
    };
    if names.is_empty() {
        println!("nothing to remove (no test beds under {})", root.display());
        return Ok(());
    }
    let mut failed = 0;
    for name in &names {
        let cleaned =
            state::lock_name(root, name).and_then(|_lock| clean(&Paths::new(root, name), name));
        match cleaned {
            Ok(done) if done.is_empty() => println!("test bed {name}: nothing to remove"),
            Ok(done) => println!("test bed {name}: {}", done.join("; ")),
            Err(e) => {
                eprintln!("test bed {name}: {e:#}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} test bed(s) could not be removed completely (see above)");
    }
    Ok(())
}

/// The pid of the live holder of this test bed, if any.
pub fn live_holder(paths: &Paths) -> Option<u32> {
    let (pid, start) = state::read_pid(paths)?;
    holder_alive(pid, start).then_some(pid)
}

/// Namespaces named with `prefix`, with their owner pids.
fn prefixed(prefix: &str) -> Result<Vec<(String, u32)>> {
    Ok(netns::list()
        .context("listing network namespaces")?
        .into_iter()
        .filter_map(|n| owner_pid(&n, prefix).map(|p| (n, p)))
        .collect())
}

/// Removes everything of test bed `name`; returns what was done, for people (empty:
/// nothing was there).
pub fn clean(paths: &Paths, name: &str) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let recorded = state::read_pid(paths);
    let had_dir = paths.dir.exists();
    let before = prefixed(name)?;
    if let Some((pid, start)) = recorded
        && holder_alive(pid, start)
    {
        done.push(stop_holder(paths, pid, start)?);
    }
    let mut others = Vec::new();
    for (ns, owner) in prefixed(name)? {
        let ours = recorded.is_some_and(|(pid, _)| pid == owner);
        if ours || state::process_start(owner).is_none() {
            Namespace::adopt(&ns)
                .delete()
                .with_context(|| format!("deleting namespace {ns}"))?;
        } else {
            others.push(format!("{ns} (process {owner})"));
        }
    }
    let after: Vec<String> = prefixed(name)?.into_iter().map(|(n, _)| n).collect();
    let gone: Vec<&str> = before
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !after.iter().any(|a| a == n))
        .collect();
    if !gone.is_empty() {
        done.push(format!(
            "removed {} namespace(s): {}",
            gone.len(),
            gone.join(" ")
        ));
    }
    if paths.dir.exists() {
        std::fs::remove_dir_all(&paths.dir)
            .with_context(|| format!("cannot remove {}", paths.dir.display()))?;
    }
    if had_dir {
        done.push(format!("removed {}", paths.dir.display()));
    }
    if !others.is_empty() {
        done.push(format!(
            "left alone (they belong to other running processes): {}",
            others.join(", ")
        ));
    }
    Ok(done)
}

/// Waits until the holder is gone; true if it went within `bound`.
fn wait_gone(pid: u32, start: Option<u64>, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if !holder_alive(pid, start) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` to the holder if it still is the holder.
fn signal(pid: u32, start: Option<u64>, sig: Signal) -> Result<()> {
    if !holder_alive(pid, start) {
        return Ok(());
    }
    let raw = i32::try_from(pid).with_context(|| format!("pid {pid} out of range"))?;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("sending {sig} to holder pid {pid}")),
    }
}

/// Stops a live holder: request, then SIGTERM, then SIGKILL.
fn stop_holder(paths: &Paths, pid: u32, start: Option<u64>) -> Result<String> {
    let asked = matches!(
        proto::call(&paths.control(), &Request::Down {}),
        Ok(Reply::Ok { .. })
    );
    if asked && wait_gone(pid, start, REQUEST_WAIT) {
        return Ok(format!("stopped holder pid {pid}"));
    }
    signal(pid, start, Signal::SIGTERM)?;
    if wait_gone(pid, start, TERM_WAIT) {
        return Ok(format!("stopped holder pid {pid} (SIGTERM)"));
    }
    signal(pid, start, Signal::SIGKILL)?;
    if wait_gone(pid, start, KILL_WAIT) {
        return Ok(format!("killed holder pid {pid} (SIGKILL)"));
    }
    bail!("holder pid {pid} does not exit, even after SIGKILL")
}
