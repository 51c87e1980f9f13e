//! What one benchmark run is asked to do ([`Mode`]s, [`RunOptions`]) and how often it
//! samples: shared by the runner ([`super::run`]) and the metrics ([`super::report`]),
//! which depend on it and not on each other's internals.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Sampling interval of goodput and path counters.
pub const SAMPLE: Duration = Duration::from_millis(100);
/// Interval of the RTT probes on path 0.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// What carries the transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Plain TCP over the best single path.
    Single,
    /// Kernel MPTCP over every path.
    Mptcp,
    /// TCP through the plait tunnel over every path, carried as inner packets (packet mode).
    Plait,
    /// TCP through the plait tunnel in stream mode (`[streams]` in both config files): the
    /// client's relay terminates the connection, the bytes cross as one engine stream with
    /// a congestion controller per path, and the server opens a new connection to the
    /// destination (docs/tunnel.md#stream-mode).
    PlaitStream,
}

impl Mode {
    /// Every mode, in running order.
    pub const ALL: [Mode; 4] = [Mode::Single, Mode::Mptcp, Mode::Plait, Mode::PlaitStream];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Mptcp => "mptcp",
            Mode::Plait => "plait",
            Mode::PlaitStream => "plait-stream",
        }
    }

    /// Looks a mode up by name.
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Every mode's name, comma-separated, in running order (for help and errors).
    pub fn names() -> String {
        Mode::ALL.map(Mode::name).join(", ")
    }

    /// Whether the mode runs through the plait tunnel (lan host to remote host).
    pub fn is_tunnel(self) -> bool {
        matches!(self, Mode::Plait | Mode::PlaitStream)
    }
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The modes (run in [`Mode::ALL`] order whatever the order here).
    pub modes: Vec<Mode>,
    /// plait's `[engine] scheduler`.
    pub scheduler: String,
    /// Namespace prefix.
    pub prefix: String,
    /// Seed of the loss emulation and the payload.
    pub seed: u64,
    /// The `plait` binary for the tunnel daemons.
    pub program: PathBuf,
    /// Set by Ctrl-C: stop as soon as possible, cleaning up.
    pub cancel: Arc<AtomicBool>,
    /// Progress lines on standard error.
    pub progress: bool,
    /// TCP congestion control of every sender (`cubic`, `bbr`, `reno`), set on its socket
    /// (`TCP_CONGESTION`; an MPTCP socket passes it to its subflows).
    pub cc: String,
    /// Extra lines of both daemons' `[engine]` table (`key = value`).
    pub engine: Vec<String>,
    /// `plait-cbr`: the constant-rate UDP flow's rows, after the modes (`None`: not run).
    pub cbr: Option<super::cbr::report::CbrSettings>,
}

impl RunOptions {
    pub(crate) fn say(&self, msg: &str) {
        if self.progress {
            eprintln!("{msg}");
        }
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_have_names_and_run_in_order() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(Mode::from_name("plait-stream"), Some(Mode::PlaitStream));
        assert_eq!(Mode::from_name("streams"), None);
        assert_eq!(Mode::names(), "single, mptcp, plait, plait-stream");
        // Running order is the enum's order: stream mode right after packet mode.
        let mut v = vec![Mode::PlaitStream, Mode::Single, Mode::Plait, Mode::Mptcp];
        v.sort();
        assert_eq!(v, Mode::ALL);
        assert!(Mode::Plait.is_tunnel() && Mode::PlaitStream.is_tunnel());
        assert!(!Mode::Single.is_tunnel() && !Mode::Mptcp.is_tunnel());
    }
}
