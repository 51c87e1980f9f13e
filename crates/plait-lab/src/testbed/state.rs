//! Where running test beds are recorded and how to tell whether one is alive.
//!
//! Each test bed NAME has a directory `ROOT/NAME/` (ROOT is `--state-dir`, default
//! [`DEFAULT_ROOT`]) with `state.json` ([`State`]), the holder's control socket
//! `control.sock` and its log `holder.log`. `up` creates the directory (the claim on the
//! name, under the name's lock [`lock_name`]); the holder writes a first `state.json`
//! (phase `starting`, its pid) as it starts, rewrites it when ready and after every change.
//!
//! Invariants: `state.json` is replaced atomically (written beside, then renamed), so a
//! reader sees the old or the new file, never half of one; a reader that cannot parse it
//! still gets the pid from [`read_pid`], so a damaged file never keeps `down` from
//! cleaning up. A holder is alive only if its pid exists, is not a zombie, started at the
//! recorded time (so a reused pid is not mistaken for it) and runs `plait testbed hold`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::settings::PathSettings;

/// Default `--state-dir`.
pub const DEFAULT_ROOT: &str = "/run/plait/testbed";
/// Version of the `state.json` layout.
pub const STATE_VERSION: u32 = 1;

/// The files of one test bed.
#[derive(Clone, Debug)]
pub struct Paths {
    /// `ROOT/NAME`.
    pub dir: PathBuf,
}

impl Paths {
    /// The directory of test bed `name` under `root`.
    pub fn new(root: &Path, name: &str) -> Paths {
        Paths {
            dir: root.join(name),
        }
    }

    /// `state.json`.
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// The control socket.
    pub fn control(&self) -> PathBuf {
        self.dir.join("control.sock")
    }

    /// The holder's standard error.
    pub fn log(&self) -> PathBuf {
        self.dir.join("holder.log")
    }
}

/// How far the holder has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Started, building the topology.
    Starting,
    /// Built and serving requests.
    Ready,
}

/// One namespace and its role (`lan0`, `cli0`, `r0x1`, `srv`, `rem`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRole {
    /// The role.
    pub role: String,
    /// The namespace's name for `ip netns`.
    pub name: String,
    /// What it is, for people.
    pub what: String,
}

/// The addresses of one path (IPv4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathAddresses {
    /// The client's address on the path.
    pub client: String,
    /// The router's client-side address.
    pub router_client: String,
    /// The router's server-side address.
    pub router_server: String,
    /// The server's address on the path (what a tunnel client's `[[path]] server` names).
    pub server: String,
}

/// The key addresses (IPv4 first, then IPv6 where the link has both).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Addresses {
    /// The lan host.
    pub lan_host: Vec<String>,
    /// The client on its LAN.
    pub client_lan: Vec<String>,
    /// The server on the remote LAN.
    pub server_remote: Vec<String>,
    /// The remote host.
    pub remote_host: Vec<String>,
    /// Per path, path 0 first.
    pub paths: Vec<PathAddresses>,
}

/// One timed event of the topology file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventInfo {
    /// `blackhole` or `link_down`.
    pub kind: String,
    /// The path.
    pub path: usize,
    /// Start, seconds after `up`.
    pub from_s: f64,
    /// End, seconds after `up`.
    pub to_s: f64,
    /// The rate during a `rate` event, Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
}

/// `state.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The test bed's name (also its namespace prefix).
    pub name: String,
    /// The holder's pid.
    pub pid: u32,
    /// The holder's start time (`/proc/PID/stat` field 22), to detect a reused pid.
    pub pid_start: Option<u64>,
    /// How far the holder has got.
    pub phase: Phase,
    /// When `up` ran, ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// The topology file, as given (absolute).
    pub topology_path: String,
    /// Its parsed contents (kept as JSON so this file stays readable whatever the topology
    /// format becomes).
    pub topology: serde_json::Value,
    /// Whether the file's events are applied.
    pub events_applied: bool,
    /// The file's events.
    pub events: Vec<EventInfo>,
    /// Namespaces by role (empty while starting).
    pub namespaces: Vec<NamespaceRole>,
    /// Key addresses (absent while starting).
    pub addresses: Option<Addresses>,
    /// Current settings, per path (from the file until `set` changes them).
    pub paths: Vec<PathSettings>,
}

impl State {
    /// The namespace of `role`.
    pub fn namespace(&self, role: &str) -> Option<&str> {
        self.namespaces
            .iter()
            .find(|n| n.role == role)
            .map(|n| n.name.as_str())
    }

    /// The valid roles, comma-separated.
    pub fn roles(&self) -> String {
        let v: Vec<&str> = self.namespaces.iter().map(|n| n.role.as_str()).collect();
        v.join(", ")
    }

    /// Seconds since `up`.
    pub fn uptime_s(&self) -> f64 {
        let now = now_unix_ms();
        now.saturating_sub(self.started_unix_ms) as f64 / 1000.0
    }

    /// The events in force `t` seconds after `up`.
    pub fn active_events(&self, t: f64) -> Vec<&EventInfo> {
        if !self.events_applied {
            return Vec::new();
        }
        self.events
            .iter()
            .filter(|e| e.from_s <= t && t < e.to_s)
            .collect()
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Parses `state.json` text.
pub fn parse(text: &str) -> Result<State, serde_json::Error> {
    serde_json::from_str(text)
}

/// Reads `state.json`; `Ok(None)` if there is none.
pub fn read(paths: &Paths) -> Result<Option<State>> {
    let file = paths.state();
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    parse(&text)
        .map(Some)
        .with_context(|| format!("{} is damaged", file.display()))
}

/// The pid in `state.json` even if the rest does not parse (for clean-up).
pub fn read_pid(paths: &Paths) -> Option<(u32, Option<u64>)> {
    let text = std::fs::read_to_string(paths.state()).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = u32::try_from(v.get("pid")?.as_u64()?).ok()?;
    Some((pid, v.get("pid_start").and_then(serde_json::Value::as_u64)))
}

/// Writes `state.json` atomically.
pub fn write(paths: &Paths, state: &State) -> Result<()> {
    let file = paths.state();
    let tmp = paths.dir.join("state.json.tmp");
    let text = serde_json::to_string_pretty(state).context("encoding the state")?;
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &file).with_context(|| format!("cannot write {}", file.display()))
}

/// Takes `ROOT/.NAME.lock`, the lock of test bed NAME: `up` holds it from its first check
/// until the holder is ready (or gone), `down` while it cleans, so two commands on one name
/// never interleave. The kernel releases it when the process ends, so a command that
/// crashed never leaves it held. Returns the open file, which holds the lock until dropped.
pub fn lock_name(root: &Path, name: &str) -> Result<Flock<std::fs::File>> {
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    let path = root.join(format!(".{name}.lock"));
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(lock),
        Err((_, Errno::EWOULDBLOCK)) => bail!(
            "another `plait testbed up` or `down` of test bed {name} is running; wait for it \
             to finish"
        ),
        Err((_, e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

/// The test bed names that have a directory under `root` (sorted).
pub fn list(root: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", root.display())),
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| plait_testbed::netns::validate_prefix(n).is_ok())
        .collect();
    names.sort();
    Ok(names)
}

/// Whether a NUL-separated command line is `PROGRAM testbed [OPTIONS] hold …` (a holder;
/// `up` puts `--state-dir DIR` between the two words).
pub fn is_holder_cmdline(cmdline: &[u8]) -> bool {
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    args.get(1) == Some(&b"testbed".as_slice())
        && args
            .get(2..)
            .is_some_and(|rest| rest.contains(&b"hold".as_slice()))
}

/// The start time of process `pid` if it is running (not a zombie), from its
/// `/proc/PID/stat` (through procfs).
pub fn process_start(pid: u32) -> Option<u64> {
    let pid = i32::try_from(pid).ok().filter(|&p| p > 0)?;
    let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
    match stat.state {
        'Z' | 'X' | 'x' => None,
        _ => Some(stat.starttime),
    }
}

/// Whether `pid` is a running test bed holder (started at `start`, if known).
pub fn holder_alive(pid: u32, start: Option<u64>) -> bool {
    let Some(actual) = process_start(pid) else {
        return false;
    };
    if start.is_some_and(|s| s != actual) {
        return false;
    }
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| is_holder_cmdline(&c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::settings::PathSettings;
    use plait_testbed::PathSpec;

    fn sample() -> State {
        State {
            version: STATE_VERSION,
            name: "tb".into(),
            pid: 4711,
            pid_start: Some(12345),
            phase: Phase::Ready,
            started_unix_ms: 1_700_000_000_000,
            topology_path: "/x/T4.toml".into(),
            topology: serde_json::json!({"name": "T4"}),
            events_applied: true,
            events: vec![EventInfo {
                kind: "blackhole".into(),
                path: 0,
                from_s: 7.5,
                to_s: 12.5,
                rate_mbit: None,
            }],
            namespaces: vec![
                NamespaceRole {
                    role: "cli0".into(),
                    name: "tb4711-1-cli0".into(),
                    what: "client".into(),
                },
                NamespaceRole {
                    role: "srv".into(),
                    name: "tb4711-0-srv".into(),
                    what: "server".into(),
                },
            ],
            addresses: None,
            paths: vec![PathSettings::from_spec(&PathSpec::v4().rate(10.0))],
        }
    }

    #[test]
    fn state_round_trips_and_answers_questions() {
        let s = sample();
        let text = serde_json::to_string_pretty(&s).unwrap();
        assert_eq!(parse(&text).unwrap(), s);
        assert_eq!(s.namespace("srv"), Some("tb4711-0-srv"));
        assert_eq!(s.namespace("r0x9"), None);
        assert_eq!(s.roles(), "cli0, srv");
        assert_eq!(s.active_events(8.0).len(), 1);
        assert!(s.active_events(12.5).is_empty());
        assert!(s.active_events(1.0).is_empty());
        let off = State {
            events_applied: false,
            ..s.clone()
        };
        assert!(off.active_events(8.0).is_empty());
    }

    #[test]
    fn damaged_state_still_gives_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path(), "tb");
        std::fs::create_dir_all(&paths.dir).unwrap();
        assert!(read(&paths).unwrap().is_none());
        assert_eq!(read_pid(&paths), None);
        write(&paths, &sample()).unwrap();
        assert_eq!(read(&paths).unwrap(), Some(sample()));
        assert_eq!(read_pid(&paths), Some((4711, Some(12345))));
        std::fs::write(paths.state(), r#"{"pid": 99, "name": 5}"#).unwrap();
        let e = read(&paths).unwrap_err();
        assert!(format!("{e:#}").contains("damaged"), "{e:#}");
        assert_eq!(read_pid(&paths), Some((99, None)));
        for bad in ["", "{", "[]", r#"{"pid": -1}"#, r#"{"pid": 1e30}"#] {
            std::fs::write(paths.state(), bad).unwrap();
            assert!(read(&paths).is_err(), "{bad}");
            assert_eq!(read_pid(&paths), None, "{bad}");
        }
        std::fs::create_dir_all(dir.path().join("Bad-Name")).unwrap();
        std::fs::create_dir_all(dir.path().join("ok_two")).unwrap();
        std::fs::write(dir.path().join("afile"), "").unwrap();
        assert_eq!(list(dir.path()).unwrap(), ["ok_two", "tb"]);
        assert!(list(&dir.path().join("missing")).unwrap().is_empty());
    }

    #[test]
    fn process_start_and_cmdline() {
        let me = process_start(std::process::id()).expect("this process runs");
        assert_eq!(process_start(std::process::id()), Some(me), "stable");
        assert_eq!(process_start(0), None);
        assert_eq!(process_start(u32::MAX), None);
        assert!(is_holder_cmdline(
            b"/usr/bin/plait\0testbed\0hold\0T1.toml\0--name\0tb\0"
        ));
        assert!(is_holder_cmdline(
            b"plait\0testbed\0--state-dir\0/run/x\0hold\0/T1.toml\0--name\0tb\0"
        ));
        assert!(!is_holder_cmdline(b"plait\0status\0testbed\0hold\0"));
        assert!(!is_holder_cmdline(b"plait\0testbed\0"));
        assert!(!is_holder_cmdline(
            b"/usr/bin/plait\0testbed\0up\0T1.toml\0"
        ));
        assert!(!is_holder_cmdline(b"vim\0testbed-hold.txt\0"));
        assert!(!is_holder_cmdline(b""));
        // This test process runs, is not a holder; pid 0 and absurd pids are never alive.
        let me = std::process::id();
        assert!(process_start(me).is_some());
        assert!(!holder_alive(me, None));
        assert!(!holder_alive(0, None));
        assert!(!holder_alive(u32::MAX, None));
    }
}
