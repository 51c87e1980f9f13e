//! The link layer's signal for the client's paths (docs/protocol.md#handover, "signal";
//! docs/tunnel-config.md, `link_signal_file`): with `[engine] handover = true`, once every
//! [`READ_EVERY`] the daemon reads the signal file (`/proc/net/wireless` unless configured;
//! `crate::mobility::signal` parses it) and gives each path bound to an interface (a fixed
//! path's `device`, a pattern path's interface) that interface's signal.
//!
//! A row whose level the driver did not update since the last read keeps the last updated
//! value for [`KEEP_STALE`] (an older wireless-extensions driver measures less often than
//! once a second, and another reader of the file clears the flag); after that, or with no
//! row, the signal is "not reported".
//!
//! Invariants: at most one read per [`READ_EVERY`], of at most [`MAX_READ`] bytes, only of
//! a regular file, opened without blocking (a FIFO configured by mistake cannot stall the
//! loop), and only while some path is bound to an interface; every bound path's signal is
//! set at each read (not only on change), so a session that replaced the last one (a new
//! handshake) has it within one period. A file that cannot be read is said once at warn
//! level (at debug level when it is the default file and missing: the kernel has no
//! wireless extensions), then at debug level; its paths' signals become "not reported".
//! The read runs on the loop's thread: procfs asks each wireless driver for its station's
//! statistics, which is quick for the drivers tried (none on this project's machines has a
//! radio; docs/protocol.md#handover).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use plait_proto::Time;
use tracing::{debug, info, warn};

use crate::config::DEFAULT_LINK_SIGNAL_FILE;
use crate::mobility::signal::{SignalTable, parse_wireless};

/// How often the file is read: a Wi-Fi driver updates its level about once a second (per
/// beacon average), and the engine's handover holds a path for at least one.
pub const READ_EVERY: Duration = Duration::from_secs(1);
/// How long a level the driver stopped updating still counts.
pub const KEEP_STALE: Duration = Duration::from_secs(3);
/// Most bytes read from the file (the kernel's is about 200 bytes a wireless interface).
pub const MAX_READ: u64 = 64 * 1024;

/// What the reader keeps of one bound path.
#[derive(Clone, Copy, Debug)]
struct PathSignal {
    path: usize,
    /// The signal as its driver last updated it, and when that was read.
    held: Option<(f64, Time)>,
    /// The signal as last logged (a log line when it moves by a tenth).
    logged: Option<f64>,
}

/// The reader (see the module docs).
#[derive(Debug)]
pub(crate) struct LinkSignals {
    file: PathBuf,
    next_read: Time,
    /// The bound paths seen so far (those no longer bound are forgotten at each read).
    paths: Vec<PathSignal>,
    warned_unread: bool,
    warned_malformed: bool,
}

impl LinkSignals {
    pub(crate) fn new(file: PathBuf) -> LinkSignals {
        LinkSignals {
            file,
            next_read: Time::ZERO,
            paths: Vec::new(),
            warned_unread: false,
            warned_malformed: false,
        }
    }

    /// When the next read is due.
    pub(crate) fn next_read(&self) -> Time {
        self.next_read
    }

    /// Reads the file when due at `now` and gives every path of `bound` (id, interface)
    /// its signal through `set`.
    pub(crate) fn tick(
        &mut self,
        now: Time,
        bound: &[(usize, String)],
        mut set: impl FnMut(usize, Option<f64>),
    ) {
        if now < self.next_read {
            return;
        }
        self.next_read = now + READ_EVERY;
        if bound.is_empty() {
            return;
        }
        let table = match self.read() {
            Ok(t) => t,
            Err(e) => {
                // No `/proc/net/wireless`: the kernel has no wireless extensions (or no
                // wireless at all); nothing to say.
                let quiet = e.kind() == std::io::ErrorKind::NotFound
                    && self.file.as_os_str() == DEFAULT_LINK_SIGNAL_FILE;
                if self.warned_unread || quiet {
                    debug!(file = %self.file.display(), error = %e, "link signal file unreadable");
                } else {
                    self.warned_unread = true;
                    warn!(
                        file = %self.file.display(),
                        error = %e,
                        "cannot read the link signal file: paths get no signal from it (said once)"
                    );
                }
                SignalTable::default()
            }
        };
        if table.malformed + table.beyond_bound > 0 && !self.warned_malformed {
            self.warned_malformed = true;
            warn!(
                file = %self.file.display(),
                unreadable = table.malformed,
                beyond_bound = table.beyond_bound,
                "link signal file has rows that are ignored (said once)"
            );
        }
        self.paths
            .retain(|p| bound.iter().any(|(b, _)| *b == p.path));
        for (path, interface) in bound {
            let known = self.paths.iter().position(|p| p.path == *path);
            let i = known.unwrap_or_else(|| {
                self.paths.push(PathSignal {
                    path: *path,
                    held: None,
                    logged: None,
                });
                self.paths.len() - 1
            });
            let p = &mut self.paths[i];
            let signal = match table.row(interface) {
                Some(r) if r.updated => {
                    p.held = Some((r.signal, now));
                    Some(r.signal)
                }
                Some(_) => p
                    .held
                    .filter(|(_, at)| now.saturating_since(*at) <= KEEP_STALE)
                    .map(|(s, _)| s),
                None => None,
            };
            // A log line for a path's first signal and for each move of a tenth of the
            // scale, or to or from none.
            let moved = match (p.logged, signal) {
                (Some(a), Some(b)) => (a - b).abs() >= 0.1,
                (a, b) => a.is_some() != b.is_some(),
            };
            if known.is_none() {
                info!(path, interface, signal = ?signal, "link signal");
                p.logged = signal;
            } else if moved {
                info!(path, interface, signal = ?signal, "link signal changed");
                p.logged = signal;
            }
            set(*path, signal);
        }
    }

    fn read(&self) -> std::io::Result<SignalTable> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.file)?;
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let mut bytes = Vec::new();
        file.take(MAX_READ).read_to_end(&mut bytes)?;
        Ok(parse_wireless(&String::from_utf8_lossy(&bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Time {
        Time::ZERO + Duration::from_secs(s)
    }

    fn row(dev: &str, level: &str) -> String {
        format!("{dev}: 0000   50.  {level}  -256  0 0 0 0 0 0\n")
    }

    /// Runs one tick and returns what was set.
    fn tick(
        r: &mut LinkSignals,
        now: Time,
        bound: &[(usize, String)],
    ) -> Vec<(usize, Option<f64>)> {
        let mut got = Vec::new();
        r.tick(now, bound, |p, s| got.push((p, s)));
        got
    }

    #[test]
    fn reads_once_a_second_and_holds_a_stale_level_for_a_while() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("wireless");
        let mut r = LinkSignals::new(file.clone());
        let bound = vec![(0, "wlan0".to_owned()), (3, "wlan1".to_owned())];
        std::fs::write(&file, row("wlan0", "-70.")).unwrap();
        assert_eq!(tick(&mut r, at(0), &bound), [(0, Some(0.5)), (3, None)]);
        // Not due again within the second.
        assert!(tick(&mut r, at(0) + Duration::from_millis(999), &bound).is_empty());
        // Not updated: the held level, for KEEP_STALE, then none.
        std::fs::write(&file, row("wlan0", "-40")).unwrap();
        assert_eq!(tick(&mut r, at(3), &bound), [(0, Some(0.5)), (3, None)]);
        assert_eq!(tick(&mut r, at(4), &bound), [(0, None), (3, None)]);
        // Gone from the file: none at once.
        std::fs::write(&file, row("wlan0", "-40.")).unwrap();
        assert_eq!(tick(&mut r, at(5), &bound)[0], (0, Some(1.0)));
        std::fs::write(&file, "").unwrap();
        assert_eq!(tick(&mut r, at(6), &bound)[0], (0, None));
        // No bound path: nothing read, nothing set.
        assert!(tick(&mut r, at(7), &[]).is_empty());
    }

    #[test]
    fn a_missing_or_odd_file_gives_no_signal_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let bound = vec![(1, "wlan0".to_owned())];
        let mut r = LinkSignals::new(dir.path().join("absent"));
        assert_eq!(tick(&mut r, at(0), &bound), [(1, None)]);
        // A directory, and a FIFO with no writer (opening it blocking would never return).
        let mut r = LinkSignals::new(dir.path().to_owned());
        assert_eq!(tick(&mut r, at(0), &bound), [(1, None)]);
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let mut r = LinkSignals::new(fifo);
        assert_eq!(tick(&mut r, at(0), &bound), [(1, None)]);
    }
}
