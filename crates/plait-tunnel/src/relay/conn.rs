//! One relayed TCP connection and its stream: the byte pumps in both directions.
//!
//! Up (TCP → stream): bytes read from the socket go straight into `stream_write`; what the
//! stream does not take waits in `up` (at most one read's worth, [`CHUNK`]) and the
//! socket is not read again until the stream's `Writable`. The socket's end of input
//! becomes the stream's FIN once `up` is empty.
//!
//! Down (stream → TCP): on `Readable` the stream is read into the socket; what the
//! socket does not take waits in `down` (at most [`CHUNK`]) and the stream is not read
//! again until the socket is writable. The stream's FIN becomes `shutdown(Write)` once
//! `down` is empty.
//!
//! So a slow reader at either end backs up into the engine's per-stream flow control and
//! never holds more than [`CHUNK`] bytes per direction here; an idle connection holds no
//! buffer at all (both are freed when emptied).

use std::io::{self, Read, Write};
use std::net::Shutdown;

use mio::net::TcpStream;
use plait_proto::{StreamError, StreamId, Time};

use crate::endpoint::{StreamHost, StreamPeer};

/// Bytes moved per read, and the most a connection buffers per direction.
pub const CHUNK: usize = 64 * 1024;
/// Reads per direction per round, so one busy connection cannot starve the others.
const READS_PER_ROUND: usize = 4;

/// Why a pump stopped the connection.
#[derive(Debug)]
pub enum PumpEnd {
    /// The socket failed (reset by its peer, or another error).
    Socket(io::Error),
    /// The stream is gone (reset, or its session ended).
    Stream(StreamError),
}

/// A connection's state.
#[derive(Debug)]
pub struct Conn {
    /// The socket.
    pub tcp: TcpStream,
    /// Its stream, once there is one.
    pub stream: Option<(StreamPeer, StreamId)>,
    /// The socket may have bytes (or its end) to read: readiness seen, no `WouldBlock` yet.
    pub tcp_readable: bool,
    /// The socket may take bytes.
    pub tcp_writable: bool,
    /// The stream may have bytes (or its end) to read.
    pub stream_readable: bool,
    /// The stream refused part of a write; wait for `Writable`.
    pub stream_blocked: bool,
    up: Vec<u8>,
    /// The socket's input ended.
    up_eof: bool,
    /// The stream's FIN was given.
    up_finished: bool,
    down: Vec<u8>,
    down_pos: usize,
    /// The stream's FIN was read.
    down_fin: bool,
    /// `shutdown(Write)` was done.
    down_shut: bool,
    /// Last time a byte moved either way (idle timeout).
    pub last_active: Time,
}

impl Conn {
    /// A connection with no stream yet.
    pub fn new(tcp: TcpStream, now: Time) -> Conn {
        Conn {
            tcp,
            stream: None,
            tcp_readable: true,
            tcp_writable: true,
            stream_readable: false,
            stream_blocked: false,
            up: Vec::new(),
            up_eof: false,
            up_finished: false,
            down: Vec::new(),
            down_pos: 0,
            down_fin: false,
            down_shut: false,
            last_active: now,
        }
    }

    /// Both directions ended cleanly: the socket can be closed and forgotten.
    pub fn is_done(&self) -> bool {
        self.up_finished && self.down_shut
    }

    /// Moves what it can both ways. `Ok(true)`: work was left for the next round (the
    /// per-round budget ran out).
    pub fn pump(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        scratch: &mut [u8],
    ) -> Result<bool, PumpEnd> {
        let Some((peer, id)) = self.stream else {
            return Ok(false);
        };
        let more_up = self.pump_up(host, now, peer, id, scratch)?;
        let more_down = self.pump_down(host, now, peer, id, scratch)?;
        Ok(more_up || more_down)
    }

    fn pump_up(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        peer: StreamPeer,
        id: StreamId,
        scratch: &mut [u8],
    ) -> Result<bool, PumpEnd> {
        if !self.up.is_empty() {
            let n = host
                .stream_write(now, peer, id, &self.up)
                .map_err(PumpEnd::Stream)?;
            self.up.drain(..n);
            if !self.up.is_empty() {
                self.stream_blocked = true;
                return Ok(false);
            }
            self.up = Vec::new();
        }
        self.stream_blocked = false;
        for _ in 0..READS_PER_ROUND {
            if self.up_eof || !self.tcp_readable {
                break;
            }
            let n = match self.tcp.read(scratch) {
                Ok(0) => {
                    self.up_eof = true;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.tcp_readable = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(PumpEnd::Socket(e)),
            };
            self.last_active = now;
            let taken = host
                .stream_write(now, peer, id, &scratch[..n])
                .map_err(PumpEnd::Stream)?;
            if taken < n {
                self.up.extend_from_slice(&scratch[taken..n]);
                self.stream_blocked = true;
                return Ok(false);
            }
        }
        if self.up_eof && !self.up_finished {
            host.stream_finish(now, peer, id).map_err(PumpEnd::Stream)?;
            self.up_finished = true;
        }
        Ok(self.tcp_readable && !self.up_eof)
    }

    fn pump_down(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        peer: StreamPeer,
        id: StreamId,
        scratch: &mut [u8],
    ) -> Result<bool, PumpEnd> {
        for _ in 0..READS_PER_ROUND {
            if !self.flush_down(now)? {
                return Ok(false);
            }
            if !self.stream_readable || self.down_fin {
                break;
            }
            let r = host
                .stream_read(now, peer, id, scratch)
                .map_err(PumpEnd::Stream)?;
            if r.len < scratch.len() {
                self.stream_readable = false;
            }
            if r.fin {
                self.down_fin = true;
            }
            self.write_down(now, &scratch[..r.len])?;
        }
        if self.down_fin && !self.down_shut && self.down_pos == self.down.len() {
            // The peer may already have closed its read side; that is its business.
            let _ = self.tcp.shutdown(Shutdown::Write);
            self.down_shut = true;
        }
        Ok(self.stream_readable && !self.down_fin && self.tcp_writable)
    }

    /// Writes what waits in `down`; `Ok(false)` if the socket is full.
    fn flush_down(&mut self, now: Time) -> Result<bool, PumpEnd> {
        while self.down_pos < self.down.len() {
            if !self.tcp_writable {
                return Ok(false);
            }
            match self.tcp.write(&self.down[self.down_pos..]) {
                Ok(n) => {
                    self.down_pos += n;
                    self.last_active = now;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.tcp_writable = false;
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(PumpEnd::Socket(e)),
            }
        }
        self.down = Vec::new();
        self.down_pos = 0;
        Ok(true)
    }

    /// Writes `data` to the socket, keeping what it does not take in `down`.
    fn write_down(&mut self, now: Time, data: &[u8]) -> Result<(), PumpEnd> {
        let mut done = 0;
        while done < data.len() && self.tcp_writable {
            match self.tcp.write(&data[done..]) {
                Ok(n) => {
                    done += n;
                    self.last_active = now;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.tcp_writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(PumpEnd::Socket(e)),
            }
        }
        if done < data.len() {
            self.down.extend_from_slice(&data[done..]);
        }
        Ok(())
    }

    /// Sends bytes that belong before the stream's (a SOCKS5 reply); they join `down`.
    pub fn queue_down(&mut self, now: Time, data: &[u8]) -> Result<(), PumpEnd> {
        if self.down_pos < self.down.len() {
            self.down.extend_from_slice(data);
            return Ok(());
        }
        self.write_down(now, data)
    }

    /// Bytes read from the socket before the stream existed (data pipelined after a
    /// SOCKS5 request); they go first.
    pub fn queue_up(&mut self, data: &[u8]) {
        self.up.extend_from_slice(data);
    }

    /// Closes the socket with a reset (RST) rather than a FIN: the stream was aborted, so
    /// the application must not take a truncated transfer for a complete one.
    pub fn abort(self) {
        let _ = socket2::SockRef::from(&self.tcp).set_linger(Some(std::time::Duration::ZERO));
    }
}
