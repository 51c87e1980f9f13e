//! Temporary directories that a later run can clean up: the benchmarks keep daemon
//! configs and private keys in them, and a run killed outright (SIGKILL, a second Ctrl-C)
//! cannot remove its own ([`TempDir`] removes on drop).
//!
//! Invariants: each directory made here holds an [`OWNER_FILE`] with the creating
//! process's id; a directory of the same prefix is removed only when that file names a
//! process that no longer exists (a live process, a reused id, an unreadable or missing
//! file: left alone); a failure to remove one is reported, never fatal.

use std::path::Path;

use anyhow::{Context, Result};
use tempfile::TempDir;

/// The file naming the process that made the directory.
pub const OWNER_FILE: &str = "owner.pid";

/// A new directory under the system's temporary directory whose name starts with
/// `prefix`, after removing those of the same prefix whose owner process is gone
/// ([`remove_orphans`]).
pub fn owned_temp_dir(prefix: &str) -> Result<TempDir> {
    let parent = std::env::temp_dir();
    for (path, e) in remove_orphans(&parent, prefix) {
        eprintln!(
            "plait: cannot remove {} left by an earlier run: {e}",
            path.display()
        );
    }
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&parent)
        .context("temporary directory")?;
    std::fs::write(dir.path().join(OWNER_FILE), std::process::id().to_string())
        .context("temporary directory's owner file")?;
    Ok(dir)
}

/// Removes the directories in `parent` whose names start with `prefix` and whose
/// [`OWNER_FILE`] names a process that no longer exists; returns those it could not
/// remove, with why.
pub fn remove_orphans(parent: &Path, prefix: &str) -> Vec<(std::path::PathBuf, std::io::Error)> {
    let mut failed = Vec::new();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return failed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        let owner = std::fs::read_to_string(path.join(OWNER_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        if owner.is_some_and(|pid| pid > 0 && !process_exists(pid))
            && let Err(e) = std::fs::remove_dir_all(&path)
        {
            failed.push((path, e));
        }
    }
    failed
}

/// Whether a process with id `pid` exists (signal 0: permission errors mean it does).
fn process_exists(pid: i32) -> bool {
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    !matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_owned_by(parent: &Path, name: &str, owner: Option<&str>) -> std::path::PathBuf {
        let path = parent.join(name);
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("client.key"), "secret").unwrap();
        if let Some(owner) = owner {
            std::fs::write(path.join(OWNER_FILE), owner).unwrap();
        }
        path
    }

    #[test]
    fn only_directories_of_a_gone_owner_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        // A process that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id().to_string();
        child.wait().unwrap();
        let me = std::process::id().to_string();
        let orphan = dir_owned_by(parent.path(), "plait-bench-a", Some(&gone));
        let live = dir_owned_by(parent.path(), "plait-bench-b", Some(&me));
        let unowned = dir_owned_by(parent.path(), "plait-bench-c", None);
        let garbled = dir_owned_by(parent.path(), "plait-bench-d", Some("not a pid"));
        let other = dir_owned_by(parent.path(), "other-e", Some(&gone));
        assert!(remove_orphans(parent.path(), "plait-bench-").is_empty());
        assert!(!orphan.exists(), "its owner is gone");
        for kept in [live, unowned, garbled, other] {
            assert!(kept.exists(), "{} kept", kept.display());
        }
    }

    #[test]
    fn a_made_directory_names_its_owner() {
        let dir = owned_temp_dir("plait-temp-dir-test-").unwrap();
        let owner = std::fs::read_to_string(dir.path().join(OWNER_FILE)).unwrap();
        assert_eq!(owner, std::process::id().to_string());
    }
}
