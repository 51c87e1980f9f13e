//! The daemon's control surface: what an operator or a scraper can ask a running daemon.
//!
//! - [`snapshot`]: the [`StatusSnapshot`] the event loop publishes (the data model; its
//!   JSON form is a stable interface).
//! - [`status`]: `plait status` over a Unix stream socket ([`status::StatusServer`] in the
//!   daemon, [`status::query`] in the CLI).
//! - [`render`]: the human-readable table `plait status` prints.
//! - [`metrics`]: a Prometheus/OpenMetrics text endpoint ([`metrics::MetricsServer`]).
//!
//! Invariants: the event loop is the only writer of the [`SharedSnapshot`]; the servers
//! here only lock it long enough to clone it, never block the loop on a client, and each
//! runs on its own background thread that stops (and cleans up) when the server is
//! dropped; every connection is served on a thread of its own, a bounded number at once
//! (`accept`), so an idle client delays nobody. A poisoned snapshot mutex is recovered, not propagated: a stale snapshot is
//! better than a dead control socket.

mod accept;
pub mod metrics;
pub mod render;
pub mod snapshot;
pub mod status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

pub use snapshot::{DropCounters, HandshakeCauses, PathStatus, SessionStatus, StatusSnapshot};

/// The event loop writes, readers clone.
pub type SharedSnapshot = Arc<Mutex<StatusSnapshot>>;

/// A copy of the current snapshot, recovering the value if a writer panicked while
/// holding the lock.
pub(crate) fn clone_snapshot(shared: &SharedSnapshot) -> StatusSnapshot {
    shared
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// What can go wrong starting a control server or talking to one.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The status socket is live: another daemon accepts on it.
    #[error("another plait daemon is already serving {}", .path.display())]
    AlreadyRunning {
        /// The status socket's path.
        path: PathBuf,
    },
    /// The status socket (or its directory) could not be created.
    #[error("cannot bind {}: {source}", .path.display())]
    Bind {
        /// The status socket's path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Nothing listens on the status socket (missing file or refused connection).
    #[error(
        "no plait daemon at {} (is it running? is this the right --socket?)",
        .path.display()
    )]
    NoDaemon {
        /// The status socket's path.
        path: PathBuf,
    },
    /// The caller may not connect to (or create) the status socket.
    #[error(
        "permission denied on {}: run as root or as the daemon's user",
        .path.display()
    )]
    PermissionDenied {
        /// The status socket's path.
        path: PathBuf,
    },
    /// Connected, but the exchange failed (timeout, reset).
    #[error("talking to the plait daemon at {}: {source}", .path.display())]
    Io {
        /// The status socket's path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The daemon's reply was not a status snapshot.
    #[error("bad reply from {}: {source}", .path.display())]
    BadReply {
        /// The status socket's path.
        path: PathBuf,
        /// Why the reply did not parse.
        source: serde_json::Error,
    },
    /// The daemon answered with an error object.
    #[error("the plait daemon at {} refused the request: {message}", .path.display())]
    Refused {
        /// The status socket's path.
        path: PathBuf,
        /// The daemon's message.
        message: String,
    },
    /// The metrics endpoint's TCP address could not be bound.
    #[error("cannot bind the metrics endpoint on {addr}: {source}")]
    MetricsBind {
        /// The address from the config.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The server's background thread could not be started.
    #[error("cannot start the {what} thread: {source}")]
    Spawn {
        /// Which server.
        what: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
}
