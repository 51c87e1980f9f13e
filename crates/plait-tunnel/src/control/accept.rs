//! The accept loop both control servers share: every connection is served on a thread of
//! its own, so an idle or slow client delays nobody else.
//!
//! Invariants: at most [`MAX_CONNECTIONS`] connections are served at once; one more is
//! closed at once, unanswered (a flood of idle connections makes the endpoint refuse for as
//! long as the connections it holds stay within their I/O timeouts, never longer). A
//! connection thread ends within its handler's deadlines after the server stops; it holds
//! only its stream and a clone of the snapshot. A failed `accept` (e.g. out of file
//! descriptors) pauses the loop briefly instead of spinning.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

/// Connections served at once by one control endpoint.
pub const MAX_CONNECTIONS: usize = 64;
/// Pause after a failed `accept`.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves every connection of `incoming` with `handle` on its own thread until `stop` is
/// set (checked after each accept); `what` names the endpoint in logs and thread names.
pub(super) fn serve_concurrently<S, I, F>(incoming: I, stop: &AtomicBool, what: &str, handle: F)
where
    I: Iterator<Item = io::Result<S>>,
    S: Send + 'static,
    F: Fn(S) -> io::Result<()> + Clone + Send + 'static,
{
    let active = Arc::new(AtomicUsize::new(0));
    for conn in incoming {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let stream = match conn {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "{what} accept failed");
                thread::sleep(ACCEPT_BACKOFF);
                continue;
            }
        };
        if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            tracing::debug!("{what}: {MAX_CONNECTIONS} connections busy, one closed unanswered");
            continue;
        }
        active.fetch_add(1, Ordering::AcqRel);
        let (active2, handle2) = (Arc::clone(&active), handle.clone());
        let spawned = thread::Builder::new()
            .name(format!("{what}-conn"))
            .spawn(move || {
                if let Err(e) = handle2(stream) {
                    tracing::debug!(error = %e, "request failed");
                }
                active2.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            active.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!(error = %e, "{what}: cannot start a connection thread");
        }
    }
}
