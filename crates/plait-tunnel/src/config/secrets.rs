//! Files that hold secrets and who else can read them: a private or pre-shared key in a
//! file (or written inline in the config) that the group or others may read is reported,
//! with the command that fixes it, as `wg` does.
//!
//! Invariant: only reports (the config checks log it as a warning when they read the key);
//! a file whose mode cannot be read is not reported (the read that follows reports what is
//! wrong with it).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The warning for `path`, holding `what`, if its mode lets the group or others read it.
pub fn readable_by_others(path: &Path, what: &str) -> Option<String> {
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o044 != 0).then(|| {
        format!(
            "{} holds {what} and can be read by other users (mode {:04o}): run `chmod 600 {}`",
            path.display(),
            mode & 0o7777,
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::readable_by_others;

    #[test]
    fn group_or_other_readable_key_files_are_reported_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("client.key");
        std::fs::write(&key, "x").unwrap();
        for (mode, reported) in [(0o600, false), (0o400, false), (0o640, true), (0o644, true)] {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
            let w = readable_by_others(&key, "`private_key`");
            assert_eq!(w.is_some(), reported, "mode {mode:o}: {w:?}");
            if let Some(w) = w {
                assert!(
                    w.contains("chmod 600") && w.contains(&format!("{mode:04o}")),
                    "{w}"
                );
            }
        }
        assert_eq!(readable_by_others(&dir.path().join("missing"), "x"), None);
    }
}
