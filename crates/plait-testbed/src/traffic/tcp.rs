//! The TCP (or MPTCP) sender: [`tcp_send`], [`tcp_send_with`] and [`tcp_send_opts`] are one
//! sender with more or fewer options (protocol, congestion control, a byte or time limit,
//! digests on or off, cancellation).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ring::digest::{Context, SHA256};

use super::payload::{Digest, finish, payload_block};
use super::{BLOCK, POLL, is_wait, mbit};
use crate::netns::Namespace;
use crate::{Result, TestbedError};

/// Time bounds of a TCP transfer, and whether its ends check the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpOptions {
    /// Connecting (sender) or waiting for the connection (sink).
    pub connect_timeout: Duration,
    /// Longest time without any progress (a blocked write, or no data read).
    pub stall_timeout: Duration,
    /// Longest whole transfer.
    pub total_timeout: Duration,
    /// Hash what is sent and received (default). Off, the sender writes one block of the
    /// payload again and again and neither end hashes: the generators then cost as little
    /// CPU as possible (a benchmark of the CPU use of what carries the bytes), and the
    /// reports carry no digest.
    pub digest: bool,
}

impl Default for TcpOptions {
    fn default() -> TcpOptions {
        TcpOptions {
            connect_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(20),
            total_timeout: Duration::from_secs(120),
            digest: true,
        }
    }
}

/// What [`tcp_send`] sent.
#[derive(Clone, Debug, PartialEq)]
pub struct SendReport {
    /// Bytes written.
    pub bytes: u64,
    /// SHA-256 of the bytes written (`None` with [`TcpOptions::digest`] off).
    pub sha256: Option<Digest>,
    /// From connecting until the receiver closed after reading everything.
    pub duration: Duration,
}

impl SendReport {
    /// Goodput over the whole transfer, Mbit/s.
    pub fn goodput_mbit(&self) -> f64 {
        mbit(self.bytes, self.duration)
    }
}

/// Connects from `ns` to `dst`, sends `bytes` of `seed`'s payload, half-closes and waits
/// until the receiver closes (so the duration covers delivery). Default [`TcpOptions`].
pub fn tcp_send(ns: &Namespace, dst: SocketAddr, bytes: u64, seed: u64) -> Result<SendReport> {
    tcp_send_with(ns, dst, bytes, seed, TcpOptions::default())
}

/// The `IPPROTO_MPTCP` protocol number (Linux).
pub const IPPROTO_MPTCP: i32 = 262;

/// The protocol of a stream socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamProto {
    /// Plain TCP.
    #[default]
    Tcp,
    /// Kernel MPTCP (`socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)`); the path manager's
    /// configuration is the namespace's (see [`crate::Topology::setup_mptcp`]).
    Mptcp,
}

impl StreamProto {
    fn protocol(self) -> socket2::Protocol {
        match self {
            StreamProto::Tcp => socket2::Protocol::TCP,
            StreamProto::Mptcp => socket2::Protocol::from(IPPROTO_MPTCP),
        }
    }

    /// A new stream socket of this protocol for `addr`'s family.
    pub(super) fn socket(self, addr: &SocketAddr) -> std::io::Result<socket2::Socket> {
        socket2::Socket::new(
            socket2::Domain::for_address(*addr),
            socket2::Type::STREAM,
            Some(self.protocol()),
        )
        .map_err(|e| match (self, e.raw_os_error()) {
            (StreamProto::Mptcp, Some(code))
                if [
                    nix::libc::EPROTONOSUPPORT,
                    nix::libc::ENOPROTOOPT,
                    nix::libc::EINVAL,
                ]
                .contains(&code) =>
            {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "kernel MPTCP is not available ({e}): needs CONFIG_MPTCP and \
                         net.mptcp.enabled=1"
                    ),
                )
            }
            _ => e,
        })
    }
}

/// When a sender stops writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendLimit {
    /// After this many bytes.
    Bytes(u64),
    /// After this long (counted from the connect); the last block is written whole.
    For(Duration),
}

/// How [`tcp_send_opts`] sends.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    /// Time bounds.
    pub tcp: TcpOptions,
    /// TCP or MPTCP.
    pub proto: StreamProto,
    /// When to stop writing (default: nothing at all).
    pub limit: Option<SendLimit>,
    /// TCP congestion control of the socket (`TCP_CONGESTION`, e.g. `cubic`); `None`: the
    /// namespace's default. Root may pick any algorithm the kernel has, whatever
    /// `net.ipv4.tcp_allowed_congestion_control` says; an MPTCP socket passes it to its
    /// subflows.
    pub congestion: Option<String>,
    /// Set it to stop writing early: the transfer then ends normally (half-close, wait for
    /// the receiver) if it was set between blocks, or with an error if it is set while a
    /// write or the wait for the receiver is blocked (checked every 50 ms).
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Sends `seed`'s payload from `ns` to `dst` as `opts` say, half-closes and waits until the
/// receiver closes. The report's digest covers exactly the bytes written.
pub fn tcp_send_opts(
    ns: &Namespace,
    dst: SocketAddr,
    seed: u64,
    opts: SendOptions,
) -> Result<SendReport> {
    ns.run_in(move || send_stream(dst, seed, &opts))?
}

fn cancelled(opts: &SendOptions) -> bool {
    opts.cancel
        .as_ref()
        .is_some_and(|c| c.load(Ordering::Acquire))
}

fn send_stream(dst: SocketAddr, seed: u64, opts: &SendOptions) -> Result<SendReport> {
    let t = opts.tcp;
    let started = Instant::now();
    let deadline = started + t.total_timeout;
    let sock = opts
        .proto
        .socket(&dst)
        .map_err(|e| TestbedError::io(format!("{:?} socket towards {dst}", opts.proto), e))?;
    if let Some(cc) = &opts.congestion {
        sock.set_tcp_congestion(cc.as_bytes())
            .map_err(|e| TestbedError::io(format!("setting congestion control `{cc}`"), e))?;
    }
    sock.connect_timeout(&dst.into(), t.connect_timeout)
        .map_err(|e| TestbedError::io(format!("connecting to {dst}"), e))?;
    let mut s: TcpStream = sock.into();
    s.set_write_timeout(Some(POLL))
        .map_err(|e| TestbedError::io("setting a write timeout", e))?;
    let (max_bytes, until) = match opts.limit {
        None => (0, None),
        Some(SendLimit::Bytes(b)) => (b, None),
        Some(SendLimit::For(d)) => (u64::MAX, Some(started + d)),
    };
    let mut ctx = t.digest.then(|| Context::new(&SHA256));
    let mut buf = vec![0u8; BLOCK];
    if !t.digest {
        payload_block(seed, 0, &mut buf);
    }
    let mut sent = 0u64;
    let mut index = 0u64;
    while sent < max_bytes {
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) || cancelled(opts) {
            break;
        }
        if now > deadline {
            return Err(TestbedError::Timeout {
                what: format!("sending to {dst} (sent {sent} bytes)"),
                after: t.total_timeout,
            });
        }
        let n = usize::try_from((max_bytes - sent).min(BLOCK as u64)).unwrap_or(BLOCK);
        if t.digest {
            payload_block(seed, index, &mut buf[..n]);
        }
        // Own write loop with short timeouts, so a cancel or a stall is noticed promptly.
        let mut off = 0;
        let mut progress = Instant::now();
        while off < n {
            match s.write(&buf[off..n]) {
                Ok(k) => {
                    off += k;
                    progress = Instant::now();
                }
                Err(e) if is_wait(&e) => {
                    if cancelled(opts) {
                        return Err(TestbedError::Thread(format!(
                            "sending to {dst}: cancelled after {sent} bytes"
                        )));
                    }
                    if progress.elapsed() > t.stall_timeout {
                        return Err(TestbedError::Timeout {
                            what: format!("sending to {dst} (sent {sent} bytes)"),
                            after: t.stall_timeout,
                        });
                    }
                }
                Err(e) => {
                    return Err(TestbedError::io(
                        format!("sending to {dst} after {sent} bytes"),
                        e,
                    ));
                }
            }
        }
        if let Some(ctx) = ctx.as_mut() {
            ctx.update(&buf[..n]);
        }
        sent += n as u64;
        index += 1;
    }
    s.shutdown(Shutdown::Write)
        .map_err(|e| TestbedError::io(format!("half-closing the connection to {dst}"), e))?;
    s.set_read_timeout(Some(POLL))
        .map_err(|e| TestbedError::io("setting a read timeout", e))?;
    let closed = Instant::now();
    let mut scratch = [0u8; 1024];
    loop {
        match s.read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if is_wait(&e) => {
                if cancelled(opts) {
                    return Err(TestbedError::Thread(format!(
                        "waiting for {dst} to close: cancelled"
                    )));
                }
                if closed.elapsed() > t.stall_timeout || Instant::now() > deadline {
                    return Err(TestbedError::Timeout {
                        what: format!("{dst} to close after sending {sent} bytes"),
                        after: t.stall_timeout,
                    });
                }
            }
            Err(e) => {
                return Err(TestbedError::io(
                    format!("waiting for {dst} to close after sending {sent} bytes"),
                    e,
                ));
            }
        }
    }
    Ok(SendReport {
        bytes: sent,
        sha256: ctx.map(finish),
        duration: started.elapsed(),
    })
}

/// [`tcp_send`] with explicit time bounds: [`tcp_send_opts`] limited to `bytes` of TCP.
pub fn tcp_send_with(
    ns: &Namespace,
    dst: SocketAddr,
    bytes: u64,
    seed: u64,
    opts: TcpOptions,
) -> Result<SendReport> {
    let send = SendOptions {
        tcp: opts,
        limit: Some(SendLimit::Bytes(bytes)),
        ..SendOptions::default()
    };
    tcp_send_opts(ns, dst, seed, send)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_report_computes_goodput() {
        let r = SendReport {
            bytes: 50_000_000,
            sha256: Some([0; 32]),
            duration: Duration::from_secs(5),
        };
        assert!((r.goodput_mbit() - 80.0).abs() < 1e-9);
    }
}
