//! `plait status` over a Unix stream socket: the daemon's [`StatusServer`] and the
//! CLI's [`query`].
//!
//! Protocol (one exchange per connection): the client connects and writes one request
//! line, `status\n`; the server replies with the current [`StatusSnapshot`] as one JSON
//! line and closes. Any other request gets a one-line `{"error": "..."}` object.
//!
//! Invariants:
//! - The server owns one background thread that accepts connections and serves each on a
//!   thread of its own, a bounded number at once (`control::accept`). Serving only clones
//!   the snapshot, and every connection has 1 s read and write timeouts and a 64-byte
//!   request bound, so a stuck or hostile client delays nobody else and can never block
//!   the event loop.
//! - The socket file is mode 0600 (status names peers and their addresses). Its parent
//!   directory is created with mode 0755 if missing.
//! - Starting over a stale socket file (nobody accepting) replaces it; starting over a
//!   live one fails with [`ControlError::AlreadyRunning`]; anything at the path that is
//!   not a socket is left alone and reported.
//! - Dropping the server stops the thread and removes the socket file, but only if the
//!   file is still the one this server bound (another daemon's socket is never removed).

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde::Deserialize;

use super::{ControlError, SharedSnapshot, StatusSnapshot, clone_snapshot};

/// The one request the server understands (without its newline).
pub const STATUS_REQUEST: &str = "status";
/// Longest request line the server reads, bytes (without the newline).
pub const MAX_REQUEST: usize = 64;
/// Per-connection read and write timeout on the server side.
const SERVER_IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Read and write timeout on the client side.
const CLIENT_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest reply the client accepts, bytes.
const MAX_REPLY: u64 = 16 << 20;

/// Serves `plait status` on a Unix socket from a background thread.
#[derive(Debug)]
pub struct StatusServer {
    path: PathBuf,
    /// `(device, inode)` of the socket file this server bound.
    identity: (u64, u64),
    stop: Arc<AtomicBool>,
    /// Bound, not yet served (between `bind` and `serve`).
    listener: Option<UnixListener>,
    thread: Option<JoinHandle<()>>,
}

impl StatusServer {
    /// Binds `path` (creating its parent directory with mode 0755 if missing), sets the
    /// socket file mode 0600 and starts serving `snapshot`.
    ///
    /// A stale socket file (nobody accepting) is removed first; a live one is an error
    /// (another daemon).
    pub fn start(path: &Path, snapshot: SharedSnapshot) -> Result<StatusServer, ControlError> {
        let mut server = StatusServer::bind(path)?;
        server.serve(snapshot)?;
        Ok(server)
    }

    /// The first half of [`StatusServer::start`]: binds and secures the socket but starts
    /// no thread (the daemon starts it with [`StatusServer::serve`] once it has dropped
    /// its privileges, so the thread is born without them). Dropped before `serve`, it
    /// removes the socket file.
    pub fn bind(path: &Path) -> Result<StatusServer, ControlError> {
        create_parent(path)?;
        remove_stale(path)?;
        let listener = UnixListener::bind(path).map_err(|e| match e.kind() {
            io::ErrorKind::AddrInUse => ControlError::AlreadyRunning {
                path: path.to_owned(),
            },
            _ => bind_error(path, e),
        })?;
        let identity = match secure_socket_file(path) {
            Ok(identity) => identity,
            Err(e) => {
                let _ = fs::remove_file(path);
                return Err(bind_error(path, e));
            }
        };
        tracing::debug!(path = %path.display(), "status socket bound");
        Ok(StatusServer {
            path: path.to_owned(),
            identity,
            stop: Arc::new(AtomicBool::new(false)),
            listener: Some(listener),
            thread: None,
        })
    }

    /// Starts serving `snapshot` on the socket [`StatusServer::bind`] bound, from a
    /// background thread. Does nothing if it is already serving.
    pub fn serve(&mut self, snapshot: SharedSnapshot) -> Result<(), ControlError> {
        let Some(listener) = self.listener.take() else {
            return Ok(());
        };
        let thread = thread::Builder::new()
            .name("plait-status".into())
            .spawn({
                let stop = Arc::clone(&self.stop);
                move || serve(&listener, &snapshot, &stop)
            })
            .map_err(|source| ControlError::Spawn {
                what: "status socket",
                source,
            })?;
        self.thread = Some(thread);
        tracing::debug!(path = %self.path.display(), "status socket listening");
        Ok(())
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file at our path is still the socket we bound.
    fn owns_socket_file(&self) -> bool {
        fs::symlink_metadata(&self.path)
            .map(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == self.identity)
            .unwrap_or(false)
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let ours = self.owns_socket_file();
        if let Some(thread) = self.thread.take() {
            // Wake the blocked `accept` with a connection of our own; the thread sees the
            // flag and exits. If the file is no longer ours we cannot reach our listener,
            // so the thread is left blocked (it holds nothing but the listener).
            if ours && UnixStream::connect(&self.path).is_ok() {
                if thread.join().is_err() {
                    tracing::warn!("status socket thread panicked");
                }
            } else {
                tracing::warn!(path = %self.path.display(), "status socket thread left running");
            }
        }
        if ours && let Err(e) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove status socket");
        }
    }
}

/// Client side: connect to the daemon at `path`, ask for its status, parse the reply.
pub fn query(path: &Path) -> Result<StatusSnapshot, ControlError> {
    let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound
        | io::ErrorKind::ConnectionRefused
        | io::ErrorKind::NotADirectory => ControlError::NoDaemon {
            path: path.to_owned(),
        },
        io::ErrorKind::PermissionDenied => ControlError::PermissionDenied {
            path: path.to_owned(),
        },
        _ => io_error(path, e),
    })?;
    let exchange = || -> io::Result<Vec<u8>> {
        stream.set_read_timeout(Some(CLIENT_IO_TIMEOUT))?;
        stream.set_write_timeout(Some(CLIENT_IO_TIMEOUT))?;
        (&stream).write_all(format!("{STATUS_REQUEST}\n").as_bytes())?;
        let mut reply = Vec::new();
        (&stream).take(MAX_REPLY).read_to_end(&mut reply)?;
        Ok(reply)
    };
    let reply = exchange().map_err(|e| io_error(path, e))?;
    parse_reply(path, &reply)
}

/// Parses a reply line: a snapshot, or the daemon's `{"error": ...}`.
pub fn parse_reply(path: &Path, reply: &[u8]) -> Result<StatusSnapshot, ControlError> {
    #[derive(Deserialize)]
    struct ErrorReply {
        error: String,
    }
    serde_json::from_slice::<StatusSnapshot>(reply).map_err(|source| {
        match serde_json::from_slice::<ErrorReply>(reply) {
            Ok(e) => ControlError::Refused {
                path: path.to_owned(),
                message: e.error,
            },
            Err(_) => ControlError::BadReply {
                path: path.to_owned(),
                source,
            },
        }
    })
}

fn bind_error(path: &Path, e: io::Error) -> ControlError {
    if e.kind() == io::ErrorKind::PermissionDenied {
        ControlError::PermissionDenied {
            path: path.to_owned(),
        }
    } else {
        ControlError::Bind {
            path: path.to_owned(),
            source: e,
        }
    }
}

fn io_error(path: &Path, e: io::Error) -> ControlError {
    ControlError::Io {
        path: path.to_owned(),
        source: e,
    }
}

/// Creates the socket's parent directory (mode 0755) if it does not exist.
fn create_parent(path: &Path) -> Result<(), ControlError> {
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    if parent.exists() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(parent)
        // The mode above is filtered by the umask; make the documented mode exact.
        .and_then(|()| fs::set_permissions(parent, fs::Permissions::from_mode(0o755)))
        .map_err(|e| bind_error(path, e))
}

/// Removes a stale socket file at `path`. Errors if a daemon accepts on it, or if the
/// path holds something other than a socket.
fn remove_stale(path: &Path) -> Result<(), ControlError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(bind_error(path, e)),
    };
    if !meta.file_type().is_socket() {
        return Err(bind_error(
            path,
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the path exists and is not a socket; refusing to replace it",
            ),
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(ControlError::AlreadyRunning {
            path: path.to_owned(),
        }),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(bind_error(path, e)),
            }
            tracing::info!(path = %path.display(), "removed stale status socket");
            Ok(())
        }
        Err(e) => Err(bind_error(path, e)),
    }
}

/// Sets the socket file's mode to 0600 and returns its `(device, inode)`.
fn secure_socket_file(path: &Path) -> io::Result<(u64, u64)> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    let meta = fs::symlink_metadata(path)?;
    Ok((meta.dev(), meta.ino()))
}

/// The accept loop: each connection on its own thread until `stop` is set.
fn serve(listener: &UnixListener, snapshot: &SharedSnapshot, stop: &AtomicBool) {
    let snapshot = Arc::clone(snapshot);
    super::accept::serve_concurrently(listener.incoming(), stop, "status", move |s| {
        handle(&s, &snapshot)
    });
}

/// Serves one connection: read the request line, write the reply line, close.
fn handle(stream: &UnixStream, snapshot: &SharedSnapshot) -> io::Result<()> {
    stream.set_read_timeout(Some(SERVER_IO_TIMEOUT))?;
    stream.set_write_timeout(Some(SERVER_IO_TIMEOUT))?;
    let mut request = Vec::with_capacity(MAX_REQUEST + 1);
    BufReader::new(stream.take(MAX_REQUEST as u64 + 1)).read_until(b'\n', &mut request)?;
    if request.is_empty() {
        // Closed without a request: a liveness probe (e.g. another daemon's start-up).
        return Ok(());
    }
    let reply = respond(&request, snapshot);
    let mut out = stream;
    out.write_all(reply.as_bytes())?;
    out.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// The reply line (with its newline) for one raw request line.
fn respond(request: &[u8], snapshot: &SharedSnapshot) -> String {
    let line = request.strip_suffix(b"\n");
    let error = match line {
        None if request.len() > MAX_REQUEST => {
            format!("request longer than {MAX_REQUEST} bytes")
        }
        _ => {
            let line = line.unwrap_or(request);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            match std::str::from_utf8(line) {
                Ok(STATUS_REQUEST) => {
                    return match serde_json::to_string(&clone_snapshot(snapshot)) {
                        Ok(json) => json + "\n",
                        Err(e) => error_line(&format!("cannot encode status: {e}")),
                    };
                }
                Ok(other) => format!("unknown request {other:?}; expected {STATUS_REQUEST:?}"),
                Err(_) => "request is not UTF-8".to_owned(),
            }
        }
    };
    error_line(&error)
}

fn error_line(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{PathStatus, SessionStatus};
    use std::sync::Mutex;
    use std::time::Instant;

    fn sample() -> StatusSnapshot {
        StatusSnapshot {
            role: "server".into(),
            version: "0.1.0".into(),
            uptime_s: 12.5,
            tun: "plait0".into(),
            tun_mtu: 1380,
            sessions: vec![SessionStatus {
                peer: "alice".into(),
                public_key: "AAAA".into(),
                established: true,
                session_id: 0xbeef,
                key_age_s: 3.0,
                handshakes: 1,
                scheduler: "minrtt".into(),
                paths: vec![PathStatus {
                    id: 0,
                    name: "path0".into(),
                    remote: Some("192.0.2.1:51820".into()),
                    state: "active".into(),
                    srtt_ms: Some(20.0),
                    ..PathStatus::default()
                }],
                ..SessionStatus::default()
            }],
            ..StatusSnapshot::default()
        }
    }

    fn shared(s: StatusSnapshot) -> SharedSnapshot {
        Arc::new(Mutex::new(s))
    }

    /// Sends `request` raw and returns the whole reply.
    fn raw(path: &Path, request: &[u8]) -> String {
        let mut stream = UnixStream::connect(path).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(request).unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        reply
    }

    #[test]
    fn query_returns_snapshot_and_sees_updates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let snap = shared(sample());
        let _server = StatusServer::start(&path, Arc::clone(&snap)).unwrap();
        assert_eq!(query(&path).unwrap(), sample());
        {
            let mut s = snap.lock().unwrap();
            s.uptime_s = 99.0;
            s.sessions[0].delivered = 7;
        }
        let got = query(&path).unwrap();
        assert_eq!(got.uptime_s, 99.0);
        assert_eq!(got.sessions[0].delivered, 7);
    }

    #[test]
    fn reply_is_one_json_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let _server = StatusServer::start(&path, shared(sample())).unwrap();
        let reply = raw(&path, b"status\r\n");
        assert!(reply.ends_with('\n'));
        assert_eq!(reply.lines().count(), 1);
        let parsed: StatusSnapshot = serde_json::from_str(&reply).unwrap();
        assert_eq!(parsed, sample());
    }

    #[test]
    fn unknown_request_gets_error_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let _server = StatusServer::start(&path, shared(sample())).unwrap();
        let reply = raw(&path, b"reboot\n");
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert!(v["error"].as_str().unwrap().contains("reboot"), "{reply}");
    }

    #[test]
    fn oversized_request_is_refused_and_server_survives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let _server = StatusServer::start(&path, shared(sample())).unwrap();
        let mut stream = UnixStream::connect(&path).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(&[b'x'; MAX_REQUEST + 1]).unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert!(v["error"].as_str().unwrap().contains("longer"), "{reply}");
        assert_eq!(query(&path).unwrap(), sample());
    }

    #[test]
    fn silent_client_does_not_block_the_server_for_long() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let _server = StatusServer::start(&path, shared(sample())).unwrap();
        // Connects and sends half a request, then sits there.
        let mut stuck = UnixStream::connect(&path).unwrap();
        stuck.write_all(b"sta").unwrap();
        thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        assert_eq!(query(&path).unwrap(), sample());
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
        drop(stuck);
    }

    #[test]
    fn idle_clients_do_not_block_a_query() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let _server = StatusServer::start(&path, shared(sample())).unwrap();
        // Served one at a time, 20 silent clients would hold a query for 20 s, past the
        // client's 5 s timeout; served concurrently, none of them delays it.
        let idle: Vec<UnixStream> = (0..20)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        assert_eq!(query(&path).unwrap(), sample());
        drop(idle);
    }

    #[test]
    fn stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        // A socket file nobody accepts on (std does not unlink on drop).
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        assert!(matches!(
            query(&path).unwrap_err(),
            ControlError::NoDaemon { .. }
        ));
        let _server = StatusServer::start(&path, shared(sample())).unwrap();
        assert_eq!(query(&path).unwrap(), sample());
    }

    #[test]
    fn second_server_on_live_path_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let _first = StatusServer::start(&path, shared(sample())).unwrap();
        let err = StatusServer::start(&path, shared(StatusSnapshot::default())).unwrap_err();
        assert!(
            matches!(err, ControlError::AlreadyRunning { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("another plait daemon is already serving "),
            "{err}"
        );
        // The first server is unharmed (its probe connection was ignored).
        assert_eq!(query(&path).unwrap(), sample());
    }

    #[test]
    fn non_socket_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        fs::write(&path, b"precious").unwrap();
        let err = StatusServer::start(&path, shared(sample())).unwrap_err();
        assert!(matches!(err, ControlError::Bind { .. }), "{err:?}");
        assert_eq!(fs::read(&path).unwrap(), b"precious");
    }

    #[test]
    fn drop_removes_socket_file_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let server = StatusServer::start(&path, shared(sample())).unwrap();
        assert!(path.exists());
        drop(server);
        assert!(!path.exists());
        assert!(matches!(
            query(&path).unwrap_err(),
            ControlError::NoDaemon { .. }
        ));
        // The path can be served again.
        let _again = StatusServer::start(&path, shared(sample())).unwrap();
        assert_eq!(query(&path).unwrap(), sample());
    }

    #[test]
    fn drop_leaves_a_replaced_socket_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let server = StatusServer::start(&path, shared(sample())).unwrap();
        fs::remove_file(&path).unwrap();
        let other = StatusServer::start(&path, shared(StatusSnapshot::default())).unwrap();
        drop(server);
        assert!(path.exists());
        assert_eq!(query(&path).unwrap(), StatusSnapshot::default());
        drop(other);
        assert!(!path.exists());
    }

    #[test]
    fn creates_parent_directory_and_sets_modes() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("run").join("plait");
        let path = parent.join("plait.sock");
        let _server = StatusServer::start(&path, shared(sample())).unwrap();
        let dir_mode = fs::metadata(&parent).unwrap().permissions().mode() & 0o7777;
        assert_eq!(dir_mode, 0o755);
        let sock = fs::symlink_metadata(&path).unwrap();
        assert!(sock.file_type().is_socket());
        assert_eq!(sock.permissions().mode() & 0o7777, 0o600);
    }

    #[test]
    fn query_on_missing_path_says_no_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nothing.sock");
        let err = query(&path).unwrap_err();
        assert!(matches!(err, ControlError::NoDaemon { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "no plait daemon at {} (is it running? is this the right --socket?)",
                path.display()
            )
        );
        // A missing parent directory is the same diagnosis.
        let err = query(&dir.path().join("a-file").join("x.sock"));
        assert!(matches!(err, Err(ControlError::NoDaemon { .. })));
    }

    #[test]
    fn poisoned_snapshot_is_still_served() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plait.sock");
        let snap = shared(sample());
        let _server = StatusServer::start(&path, Arc::clone(&snap)).unwrap();
        let poisoner = Arc::clone(&snap);
        let _ = thread::spawn(move || {
            let _guard = poisoner.lock().unwrap();
            panic!("poison the snapshot");
        })
        .join();
        assert!(snap.is_poisoned());
        assert_eq!(query(&path).unwrap(), sample());
    }

    #[test]
    fn error_reply_parses_as_refused() {
        let path = Path::new("/run/plait.sock");
        let err = parse_reply(path, b"{\"error\": \"nope\"}\n").unwrap_err();
        assert!(
            matches!(&err, ControlError::Refused { message, .. } if message == "nope"),
            "{err:?}"
        );
        let err = parse_reply(path, b"garbage\n").unwrap_err();
        assert!(matches!(err, ControlError::BadReply { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("bad reply from /run/plait.sock: ")
        );
    }
}
