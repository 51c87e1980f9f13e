//! The link layer's signal for the client's paths (docs/protocol.md#handover, "signal";
//! docs/tunnel-config.md, `link_signal_file`): once every [`READ_EVERY`] the daemon reads
//! the signal file (`/proc/net/wireless` unless configured; `crate::mobility::signal`
//! parses it) and gives each path bound to an interface (a fixed path's `device`, a
//! pattern path's interface) that interface's signal, or "not reported" when the file has
//! no updated level for it.
//!
//! Invariants: at most one read per [`READ_EVERY`], of at most [`MAX_READ`] bytes, and only
//! while some path is bound to an interface; every bound path's signal is set at each read
//! (not only on change), so a session that replaced the last one (a new handshake) has it
//! within one period. A file that cannot be read is said once at warn level (at debug level
//! when it is the default file and missing: no wireless driver is loaded), then at debug
//! level; its paths' signals become "not reported".

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use plait_proto::Time;
use tracing::{debug, info, warn};

use super::Driven;
use crate::config::DEFAULT_LINK_SIGNAL_FILE;
use crate::endpoint::Now;
use crate::mobility::signal::{SignalTable, parse_wireless};

/// How often the file is read: a Wi-Fi driver updates its level about once a second (per
/// beacon average), and the engine's handover holds a path for at least one.
pub const READ_EVERY: Duration = Duration::from_secs(1);
/// Most bytes read from the file (the kernel's is about 200 bytes a wireless interface).
pub const MAX_READ: u64 = 64 * 1024;

/// The reader (see the module docs).
#[derive(Debug)]
pub(crate) struct LinkSignals {
    file: PathBuf,
    next_read: Time,
    /// Each bound path's signal as last set, for the log lines on change.
    last: Vec<(usize, Option<f64>)>,
    warned_unread: bool,
    warned_malformed: bool,
}

impl LinkSignals {
    pub(crate) fn new(file: PathBuf) -> LinkSignals {
        LinkSignals {
            file,
            next_read: Time::ZERO,
            last: Vec::new(),
            warned_unread: false,
            warned_malformed: false,
        }
    }

    /// When the next read is due.
    pub(crate) fn next_read(&self) -> Time {
        self.next_read
    }

    /// Reads the file when due and sets the signal of every path of `bound` (id,
    /// interface) on `endpoint`.
    pub(crate) fn tick(&mut self, now: Now, bound: &[(usize, String)], endpoint: &mut impl Driven) {
        if now.mono < self.next_read {
            return;
        }
        self.next_read = now.mono + READ_EVERY;
        if bound.is_empty() {
            return;
        }
        let table = match self.read() {
            Ok(t) => t,
            Err(e) => {
                // No `/proc/net/wireless`: no wireless driver is loaded, nothing to say.
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
        if table.malformed > 0 && !self.warned_malformed {
            self.warned_malformed = true;
            warn!(
                file = %self.file.display(),
                rows = table.malformed,
                "link signal file has rows that cannot be read: they are ignored (said once)"
            );
        }
        self.last
            .retain(|(id, _)| bound.iter().any(|(b, _)| b == id));
        for (id, interface) in bound {
            let signal = table.signal(interface);
            endpoint.set_link_signal(*id, signal);
            let before = self.last.iter_mut().find(|(b, _)| b == id);
            let changed_much = |old: Option<f64>| match (old, signal) {
                (Some(a), Some(b)) => (a - b).abs() >= 0.1,
                (a, b) => a.is_some() != b.is_some(),
            };
            match before {
                Some((_, old)) if !changed_much(*old) => {}
                Some((_, old)) => {
                    info!(path = id, interface, signal = ?signal, "link signal changed");
                    *old = signal;
                }
                None => {
                    info!(path = id, interface, signal = ?signal, "link signal");
                    self.last.push((*id, signal));
                }
            }
        }
    }

    fn read(&self) -> std::io::Result<SignalTable> {
        let mut bytes = Vec::new();
        std::fs::File::open(&self.file)?
            .take(MAX_READ)
            .read_to_end(&mut bytes)?;
        Ok(parse_wireless(&String::from_utf8_lossy(&bytes)))
    }
}
