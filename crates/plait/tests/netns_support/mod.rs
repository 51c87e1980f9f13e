//! What the root test files here share: one test at a time, a clean skip without root,
//! running the `plait` binary with a time bound, its daemons (`daemon.rs`), and a tunnel
//! of a server and its clients over a topology (`tunnel.rs`).

#![allow(dead_code)]

pub mod daemon;
pub mod tunnel;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use plait_tunnel::keys::Key;

use plait_testbed::{SKIP_NO_ROOT, cleanup_stale, have_root};

/// The binary under test.
pub const PLAIT: &str = env!("CARGO_BIN_EXE_plait");

/// The tests of one file each build a topology and run daemons and transfers; on two
/// cores they run one at a time so their throughput figures do not compete for the CPU.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether the test may run: as root, after removing namespaces a killed earlier run with
/// this `prefix` left; otherwise it says it is skipped.
pub fn root(prefix: &str) -> bool {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return false;
    }
    if let Err(e) = cleanup_stale(prefix) {
        eprintln!("cleaning up stale namespaces: {e}");
    }
    true
}

/// Runs `plait ARGS` with a time bound; returns (success, stdout, stderr).
pub fn plait(args: &[&str], bound: Duration) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_file = dir.path().join("stdout");
    let err_file = dir.path().join("stderr");
    let mut child = Command::new(PLAIT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_file).expect("stdout file"))
        .stderr(std::fs::File::create(&err_file).expect("stderr file"))
        .spawn()
        .expect("start plait");
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::fs::read_to_string(&out_file).unwrap_or_default();
    let err = std::fs::read_to_string(&err_file).unwrap_or_default();
    match status {
        Some(s) => (s.success(), out, err),
        None => panic!("plait {args:?} took over {bound:?}\nstdout:\n{out}\nstderr:\n{err}"),
    }
}

/// Nothing left behind by this file's runs: no namespace named with `prefix` whose owner
/// process is gone (other runs' namespaces are not ours to judge).
pub fn assert_nothing_left(prefix: &str) {
    let left: Vec<String> = plait_testbed::netns::list()
        .expect("ip netns list")
        .into_iter()
        .filter(|n| {
            plait_testbed::netns::owner_pid(n, prefix)
                .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        })
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

/// Writes `key` to `DIR/NAME.key` (base64 and a newline, as `plait genkey` does) and returns
/// `NAME.key`: the tests' configs live in `dir`, and the daemon resolves a relative key file
/// against its config file's directory.
pub fn write_key(dir: &Path, name: &str, key: &Key) -> String {
    let file = format!("{name}.key");
    std::fs::write(dir.join(&file), format!("{}\n", key.to_base64())).expect("key file");
    file
}
