//! What every root test file here needs before it builds namespaces: one test at a time,
//! and a clean skip without root.

use plait_testbed::{SKIP_NO_ROOT, cleanup_stale, have_root};

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
