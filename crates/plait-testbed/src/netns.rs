//! One Linux network namespace, owned: created by [`Namespace::create`], deleted on drop.
//!
//! A namespace is named `{prefix}{pid}-{counter}-{role}`, e.g. `ptn4711-3-cli0`: the
//! caller's prefix, this process's id, a per-process counter and a short role. Names are
//! therefore unique per run, and [`cleanup_stale`] can tell a namespace left behind by a
//! crashed run (its pid is no longer alive) from one a concurrent run is using. Interface
//! names are never derived from namespace names: interfaces live inside their namespace, so
//! short fixed names (`p0`, `rc`, …, see [`crate::topology`]) cannot collide across runs.
//!
//! Work inside a namespace:
//! - [`Namespace::ip`] runs `ip -n NAME …`; [`Namespace::exec`] runs `ip netns exec NAME …`
//!   (both checked: non-zero exit is an error naming the command and its stderr);
//! - [`Namespace::command`] + [`Namespace::spawn`] start a long-running process there, owned
//!   by a [`ChildGuard`] that kills it when dropped;
//! - [`Namespace::run_in`] runs a closure on a fresh thread that has `setns`'d into the
//!   namespace (nix's safe `setns`, only that thread moves); sockets opened there stay in the
//!   namespace for their whole life, wherever they are used later.
//!
//! Invariants:
//! - Dropping a [`Namespace`] (unless [`Namespace::keep`] was called) first kills every
//!   process still running in it (`ip netns pids`, SIGKILL; never this process itself), then
//!   deletes it; the veths in it go with it. Failures there are printed, not raised.
//! - Prefixes are 1 to 8 characters of `a-z`, `_`; roles 1 to 8 of `a-z`, `0-9`; so a name
//!   parses back unambiguously to its prefix and owner pid.

use std::ffi::OsStr;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sched::CloneFlags;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::{Result, TestbedError, cmd};

/// Per-process counter that makes namespace names unique within a run.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Where `ip netns` keeps its namespace handles.
const NETNS_DIR: &str = "/run/netns";

/// How long [`Namespace::kill_all`] waits for killed processes to disappear.
const KILL_WAIT: Duration = Duration::from_secs(3);

/// An owned network namespace; see the module documentation.
#[derive(Debug)]
pub struct Namespace {
    name: String,
    /// False after [`Namespace::keep`]: drop leaves the namespace in place.
    owned: bool,
}

/// Checks a caller's prefix: 1 to 8 of `a-z`, `_`.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty()
        || prefix.len() > 8
        || !prefix.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    {
        return Err(TestbedError::Spec(format!(
            "namespace prefix {prefix:?} must be 1 to 8 characters of a-z and _"
        )));
    }
    Ok(())
}

/// Checks a role: 1 to 8 of `a-z`, `0-9`.
pub fn validate_role(role: &str) -> Result<()> {
    if role.is_empty()
        || role.len() > 8
        || !role
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(TestbedError::Spec(format!(
            "namespace role {role:?} must be 1 to 8 characters of a-z and 0-9"
        )));
    }
    Ok(())
}

/// The namespace name for these parts (no validation).
pub fn make_name(prefix: &str, pid: u32, counter: u32, role: &str) -> String {
    format!("{prefix}{pid}-{counter}-{role}")
}

/// The owner pid of a namespace named by [`make_name`] with this prefix, if it is one.
pub fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    let (pid, rest) = rest.split_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (counter, role) = rest.split_once('-')?;
    if counter.is_empty() || !counter.bytes().all(|b| b.is_ascii_digit()) || role.is_empty() {
        return None;
    }
    pid.parse().ok()
}

/// Namespace names from `ip netns list` output (`NAME` or `NAME (id: N)` per line).
pub fn parse_netns_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Process ids from `ip netns pids` output (one per line), skipping anything else.
pub fn parse_pids(text: &str) -> Vec<i32> {
    text.lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .filter(|&p| p > 0)
        .collect()
}

/// Every network namespace `ip netns` knows of.
pub fn list() -> Result<Vec<String>> {
    let out = cmd::run("ip", ["netns", "list"])?;
    Ok(parse_netns_list(&String::from_utf8_lossy(&out.stdout)))
}

/// Deletes the namespaces of `prefix` whose owner process is gone (left by crashed runs),
/// killing whatever still runs in them. Namespaces of live processes, and names that do not
/// parse as this prefix's, are left alone. Returns the names deleted.
pub fn cleanup_stale(prefix: &str) -> Result<Vec<String>> {
    validate_prefix(prefix)?;
    let me = std::process::id();
    let mut deleted = Vec::new();
    for name in list()? {
        let Some(pid) = owner_pid(&name, prefix) else {
            continue;
        };
        if pid == me || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        Namespace::adopt(&name).delete()?;
        deleted.push(name);
    }
    Ok(deleted)
}

impl Namespace {
    /// Creates `{prefix}{pid}-{counter}-{role}` and brings its loopback up.
    pub fn create(prefix: &str, role: &str) -> Result<Namespace> {
        validate_prefix(prefix)?;
        validate_role(role)?;
        let pid = std::process::id();
        let mut last_err = None;
        // A leftover of an earlier process with our pid could hold a name: skip past it.
        for _ in 0..4 {
            let name = make_name(prefix, pid, COUNTER.fetch_add(1, Ordering::Relaxed), role);
            match cmd::run("ip", ["netns", "add", name.as_str()]) {
                Ok(_) => {
                    let ns = Namespace { name, owned: true };
                    ns.ip(["link", "set", "lo", "up"])?;
                    return Ok(ns);
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| TestbedError::Spec("no namespace name tried".into())))
    }

    /// Takes ownership of an existing namespace by name (e.g. to tear down one that a
    /// previous `testbed up` kept): dropping the value deletes it.
    pub fn adopt(name: &str) -> Namespace {
        Namespace {
            name: name.to_owned(),
            owned: true,
        }
    }

    /// The namespace's name (as `ip netns` knows it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives up ownership: the namespace stays after this value is gone. Returns its name.
    pub fn keep(mut self) -> String {
        self.owned = false;
        std::mem::take(&mut self.name)
    }

    /// `ip -n NAME args…`, checked.
    pub fn ip<I, S>(&self, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        cmd::run("ip", self.ip_args(args))
    }

    /// `ip -n NAME args…`, whatever its exit status.
    pub fn ip_output<I, S>(&self, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        cmd::output("ip", self.ip_args(args))
    }

    fn ip_args<I, S>(&self, args: I) -> Vec<std::ffi::OsString>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut v: Vec<std::ffi::OsString> = vec!["-n".into(), self.name.clone().into()];
        v.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        v
    }

    fn exec_args<I, S>(&self, args: I) -> Vec<std::ffi::OsString>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut v: Vec<std::ffi::OsString> =
            vec!["netns".into(), "exec".into(), self.name.clone().into()];
        v.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        v
    }

    /// `ip netns exec NAME args…` (the first arg is the program), checked.
    pub fn exec<I, S>(&self, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        cmd::run("ip", self.exec_args(args))
    }

    /// `ip netns exec NAME args…`, whatever its exit status.
    pub fn exec_output<I, S>(&self, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        cmd::output("ip", self.exec_args(args))
    }

    /// `ip netns exec NAME args…` with `input` on its standard input, checked.
    pub fn exec_with_input<I, S>(&self, args: I, input: &[u8]) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        cmd::run_with_input("ip", self.exec_args(args), input)
    }

    /// Sets a sysctl inside the namespace (`sysctl -qw KEY=VALUE`).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        self.exec(["sysctl", "-qw", &format!("{key}={value}")])
            .map(drop)
    }

    /// A command that runs `program` inside the namespace (`ip netns exec NAME program`,
    /// which execs the program, so the child's pid is the program's). Add arguments and
    /// standard I/O, then start it with [`Namespace::spawn`]. Standard input is closed.
    pub fn command<S: AsRef<OsStr>>(&self, program: S) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name.as_str()])
            .arg(program)
            .stdin(Stdio::null());
        c
    }

    /// Starts a command made by [`Namespace::command`]; the guard kills it when dropped.
    pub fn spawn(&self, cmd: &mut Command) -> Result<ChildGuard> {
        let line = cmd::display(cmd.get_program(), cmd.get_args());
        let child = cmd.spawn().map_err(|source| TestbedError::Spawn {
            command: line.clone(),
            source,
        })?;
        Ok(ChildGuard {
            child,
            command: line,
            status: None,
        })
    }

    fn open(&self) -> Result<File> {
        let path = Path::new(NETNS_DIR).join(&self.name);
        File::open(&path).map_err(|source| TestbedError::Enter {
            name: self.name.clone(),
            source,
        })
    }

    /// Runs `f` on a new thread inside the namespace and returns its value. A panic in `f`
    /// is propagated to the caller.
    pub fn run_in<T, F>(&self, f: F) -> Result<T>
    where
        T: Send,
        F: FnOnce() -> T + Send,
    {
        let fd = self.open()?;
        let name = self.name.clone();
        std::thread::scope(|s| {
            let handle = s.spawn(move || -> Result<T> {
                enter(&fd, &name)?;
                drop(fd);
                Ok(f())
            });
            match handle.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Starts `f` on a new named thread inside the namespace and returns its handle (the
    /// thread's value is `Err` if it could not enter the namespace).
    pub fn spawn_thread<T, F>(&self, thread_name: &str, f: F) -> Result<JoinHandle<Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let fd = self.open()?;
        let name = self.name.clone();
        std::thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || -> Result<T> {
                enter(&fd, &name)?;
                drop(fd);
                Ok(f())
            })
            .map_err(|e| TestbedError::io(format!("spawning thread {thread_name}"), e))
    }

    /// Process ids running in the namespace (`ip netns pids`), excluding this process.
    pub fn pids(&self) -> Result<Vec<i32>> {
        let out = cmd::run("ip", ["netns", "pids", self.name.as_str()])?;
        let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        Ok(parse_pids(&String::from_utf8_lossy(&out.stdout))
            .into_iter()
            .filter(|&p| p != me)
            .collect())
    }

    /// Kills (SIGKILL) every process in the namespace and waits, bounded, until none is left.
    pub fn kill_all(&self) -> Result<()> {
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            for p in &pids {
                // Already gone is fine.
                let _ = nix::sys::signal::kill(Pid::from_raw(*p), Signal::SIGKILL);
            }
            if Instant::now() >= deadline {
                return Err(TestbedError::Timeout {
                    what: format!("processes {pids:?} in namespace {} to exit", self.name),
                    after: KILL_WAIT,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills every process in the namespace and deletes it now (what drop does, with errors).
    pub fn delete(mut self) -> Result<()> {
        self.owned = false;
        self.destroy()
    }

    fn destroy(&self) -> Result<()> {
        let killed = self.kill_all();
        cmd::run("ip", ["netns", "del", self.name.as_str()])?;
        killed
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if self.owned
            && let Err(e) = self.destroy()
        {
            eprintln!("plait-testbed: removing namespace {}: {e}", self.name);
        }
    }
}

/// Moves the calling thread into the namespace open at `fd`.
fn enter(fd: &File, name: &str) -> Result<()> {
    nix::sched::setns(fd, CloneFlags::CLONE_NEWNET).map_err(|e| TestbedError::Enter {
        name: name.to_owned(),
        source: std::io::Error::from(e),
    })
}

/// A child process that is killed (SIGKILL) and reaped when the guard is dropped, unless it
/// has already exited.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    command: String,
    status: Option<ExitStatus>,
}

impl ChildGuard {
    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The command line it was started with.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Sends `signal` to the child (nothing if it has already been reaped).
    pub fn signal(&self, signal: Signal) -> Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        let pid = i32::try_from(self.child.id())
            .map_err(|_| TestbedError::Spec(format!("pid {} out of range", self.child.id())))?;
        nix::sys::signal::kill(Pid::from_raw(pid), signal).map_err(|e| {
            TestbedError::io(
                format!("sending {signal} to `{}`", self.command),
                std::io::Error::from(e),
            )
        })
    }

    /// Its exit status if it has exited (reaping it), else `None`.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .map_err(|e| TestbedError::io(format!("waiting for `{}`", self.command), e))?;
        }
        Ok(self.status)
    }

    /// Waits up to `timeout` for the child to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(Some(s));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit status; if the child is still
    /// running then, kills it and returns [`TestbedError::Timeout`].
    pub fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus> {
        self.signal(Signal::SIGTERM)?;
        if let Some(s) = self.wait_timeout(timeout)? {
            return Ok(s);
        }
        self.kill();
        Err(TestbedError::Timeout {
            what: format!("`{}` to exit after SIGTERM", self.command),
            after: timeout,
        })
    }

    /// Kills the child (SIGKILL) and reaps it; nothing if it has already exited.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_their_owner() {
        let name = make_name("ptn", 4711, 3, "cli0");
        assert_eq!(name, "ptn4711-3-cli0");
        assert_eq!(owner_pid(&name, "ptn"), Some(4711));
        // Another prefix that happens to start the same does not match.
        assert_eq!(owner_pid(&name, "pt"), None);
        assert_eq!(owner_pid("ptnx-3-cli0", "ptn"), None);
        assert_eq!(owner_pid("ptn12-x-cli0", "ptn"), None);
        assert_eq!(owner_pid("ptn12-3-", "ptn"), None);
        assert_eq!(owner_pid("ptn12-3", "ptn"), None);
        assert_eq!(owner_pid("plt-hostA", "plt"), None);
    }

    #[test]
    fn prefixes_and_roles_are_checked() {
        assert!(validate_prefix("ptn").is_ok());
        assert!(validate_prefix("a_b").is_ok());
        for bad in ["", "p1", "PT", "toolongprefix", "a-b", "a b"] {
            assert!(validate_prefix(bad).is_err(), "{bad:?}");
        }
        assert!(validate_role("r0x1").is_ok());
        for bad in ["", "R0", "a-b", "ninechars"] {
            assert!(validate_role(bad).is_err(), "{bad:?}");
        }
        let err = Namespace::create("BAD", "x").unwrap_err();
        assert!(err.to_string().contains("BAD"), "{err}");
    }

    #[test]
    fn netns_list_and_pids_parse() {
        let text = "ptn1-0-srv (id: 3)\nplt-hostA\n\n";
        assert_eq!(parse_netns_list(text), ["ptn1-0-srv", "plt-hostA"]);
        assert_eq!(parse_pids("12\n 34 \nx\n0\n"), [12, 34]);
    }
}
