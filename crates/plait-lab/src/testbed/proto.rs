//! The control protocol between `plait testbed set|down` and the holder: over the holder's
//! Unix socket (`DIR/control.sock`, mode 0600), one connection per request, one JSON line
//! in ([`Request`]) and one JSON line out ([`Reply`]). The holder also reports its start to
//! `plait testbed up` with one [`Reply`] line on its standard output.
//!
//! Invariants: a line is at most [`MAX_LINE`] bytes including its newline; reading stops
//! there, so a peer cannot make either side buffer more. Decoding never panics: bad UTF-8,
//! bad JSON, unknown operations or fields and overlong lines are [`ProtoError`]s, which the
//! holder answers with a [`Reply::Error`] instead of acting. Every socket operation has a
//! timeout ([`IO_TIMEOUT`]), and the holder reads a whole request within one
//! ([`Deadline`]), so a client trickling bytes cannot hold its single connection loop.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::settings::Change;

/// Longest line either side sends or accepts, newline included.
pub const MAX_LINE: usize = 16 * 1024;
/// Bound on every read and write of a control connection.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// What a client asks the holder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Are you there? (The reply names the holder.) A struct variant, not a unit one, so
    /// that serde refuses unknown fields here too.
    Ping {},
    /// Change one path.
    Set {
        /// The change.
        change: Change,
    },
    /// Take the test bed down and exit.
    Down {},
}

/// The holder's answer (and its start report to `up`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// Done.
    Ok {
        /// What was done.
        message: String,
    },
    /// Not done (or only partly, as the message says).
    Error {
        /// Why.
        error: String,
    },
}

/// A line that is not a valid message.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// Longer than [`MAX_LINE`].
    #[error("line longer than {MAX_LINE} bytes")]
    TooLong,
    /// The peer closed before a full line.
    #[error("connection closed before a complete line")]
    Incomplete,
    /// Reading or writing failed (including a timeout).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not UTF-8 or not the expected JSON.
    #[error("invalid message: {0}")]
    Invalid(String),
}

/// A stream read against one deadline for all its reads together: each read waits at most
/// until the deadline, and once it has passed reads fail with `TimedOut`.
#[derive(Debug)]
pub struct Deadline<'a> {
    stream: &'a UnixStream,
    until: Instant,
}

impl<'a> Deadline<'a> {
    /// Reads from `stream` for at most `within` from now.
    pub fn new(stream: &'a UnixStream, within: Duration) -> Deadline<'a> {
        Deadline {
            stream,
            until: Instant::now() + within,
        }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request took too long",
            ));
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut s = self.stream;
        s.read(buf)
    }
}

/// Reads one line (without its newline), at most [`MAX_LINE`] bytes with the newline.
pub fn read_line(r: impl Read) -> Result<Vec<u8>, ProtoError> {
    let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX);
    let mut reader = BufReader::new(r.take(limit));
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    match line.last() {
        Some(b'\n') => {
            line.pop();
            Ok(line)
        }
        _ if line.len() >= MAX_LINE => Err(ProtoError::TooLong),
        _ => Err(ProtoError::Incomplete),
    }
}

/// Decodes one line.
pub fn decode<T: for<'de> Deserialize<'de>>(line: &[u8]) -> Result<T, ProtoError> {
    let text = std::str::from_utf8(line).map_err(|e| ProtoError::Invalid(e.to_string()))?;
    serde_json::from_str(text).map_err(|e| ProtoError::Invalid(e.to_string()))
}

/// Encodes one message as a line (JSON has no raw newlines, so the line is the message).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtoError> {
    let mut v = serde_json::to_vec(msg).map_err(|e| ProtoError::Invalid(e.to_string()))?;
    v.push(b'\n');
    if v.len() > MAX_LINE {
        return Err(ProtoError::TooLong);
    }
    Ok(v)
}

/// Writes one message as a line.
pub fn write_msg<T: Serialize>(mut w: impl Write, msg: &T) -> Result<(), ProtoError> {
    w.write_all(&encode(msg)?)?;
    w.flush()?;
    Ok(())
}

/// Sends `req` to the holder listening on `socket` and returns its reply.
pub fn call(socket: &Path, req: &Request) -> Result<Reply, ProtoError> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    write_msg(&stream, req)?;
    decode(&read_line(&stream)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::settings::{LossModel, Rate};

    fn roundtrip(req: &Request) {
        let line = encode(req).unwrap();
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        let back: Request = decode(&read_line(&line[..]).unwrap()).unwrap();
        assert_eq!(&back, req);
    }

    #[test]
    fn requests_and_replies_round_trip() {
        roundtrip(&Request::Ping {});
        roundtrip(&Request::Down {});
        roundtrip(&Request::Set {
            change: Change {
                path: 1,
                rate: Some(Rate::Mbit(5.0)),
                loss: Some(LossModel::Bernoulli { p: 0.02 }),
                ..Change::default()
            },
        });
        assert_eq!(
            String::from_utf8(encode(&Request::Ping {}).unwrap()).unwrap(),
            "{\"op\":\"ping\"}\n"
        );
        let r = Reply::Error {
            error: "line 1\nline 2".into(),
        };
        let line = encode(&r).unwrap();
        let back: Reply = decode(&read_line(&line[..]).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_trickled_request_runs_into_the_deadline() {
        let (mut client, server) = UnixStream::pair().unwrap();
        // Half a request, then nothing: the reader gives up at the deadline, not later.
        client.write_all(b"{\"op\":").unwrap();
        let t = Instant::now();
        let err = read_line(Deadline::new(&server, Duration::from_millis(200))).unwrap_err();
        assert!(matches!(err, ProtoError::Io(_)), "{err}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // A whole line within the deadline is read as usual.
        let (mut c2, s2) = UnixStream::pair().unwrap();
        c2.write_all(b"{\"op\":\"ping\"}\n").unwrap();
        let line = read_line(Deadline::new(&s2, Duration::from_secs(5))).unwrap();
        assert_eq!(decode::<Request>(&line).unwrap(), Request::Ping {});
    }

    #[test]
    fn malformed_lines_are_errors() {
        for bad in [
            &b"{\"op\":\"explode\"}"[..],
            b"{\"op\":\"ping\",\"extra\":1}",
            b"{\"op\":\"set\"}",
            b"{\"op\":\"set\",\"change\":{\"path\":\"zero\"}}",
            b"{\"op\":\"set\",\"change\":{\"path\":0,\"delay_ms\":1e999}}",
            b"[1,2,3]",
            b"",
            b"null",
            b"\xff\xfe{}",
            b"{\"op\":",
        ] {
            let r: Result<Request, _> = decode(bad);
            assert!(
                matches!(r, Err(ProtoError::Invalid(_))),
                "{:?}: {r:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(matches!(
            read_line(&b"{\"op\":\"ping\"}"[..]),
            Err(ProtoError::Incomplete)
        ));
        assert!(matches!(read_line(&b""[..]), Err(ProtoError::Incomplete)));
    }

    #[test]
    fn overlong_lines_stop_at_the_bound() {
        let exact = [vec![b'x'; MAX_LINE - 1], vec![b'\n']].concat();
        assert_eq!(read_line(&exact[..]).unwrap().len(), MAX_LINE - 1);
        let long = vec![b'x'; MAX_LINE * 4];
        assert!(matches!(read_line(&long[..]), Err(ProtoError::TooLong)));
        let long_line = [vec![b'x'; MAX_LINE], vec![b'\n']].concat();
        assert!(matches!(
            read_line(&long_line[..]),
            Err(ProtoError::TooLong)
        ));
        let big = Reply::Ok {
            message: "y".repeat(MAX_LINE),
        };
        assert!(matches!(encode(&big), Err(ProtoError::TooLong)));
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = read_line(&bytes[..]).map(|l| decode::<Request>(&l));
            let _ = decode::<Reply>(&bytes);
        }

        #[test]
        fn arbitrary_set_requests_round_trip(path in 0usize..64, kbit in 1u32..10_000_000, p in 0u32..1000) {
            // Decimal values as a user types them (serde_json's float parsing is exact for
            // these; arbitrary 17-digit doubles may come back one ulp off).
            let req = Request::Set { change: Change {
                path,
                rate: Some(Rate::Mbit(f64::from(kbit) / 1000.0)),
                loss: Some(LossModel::Bernoulli { p: f64::from(p) / 1000.0 }),
                ..Change::default()
            }};
            let line = encode(&req).unwrap();
            let back: Request = decode(&read_line(&line[..]).unwrap()).unwrap();
            proptest::prop_assert_eq!(back, req);
        }
    }
}
