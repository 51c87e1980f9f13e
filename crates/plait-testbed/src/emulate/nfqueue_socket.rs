//! A minimal nfnetlink_queue client in safe Rust on a plain netlink socket: bind a queue
//! with metadata-only copies, read packet notifications, and send verdicts — several per
//! datagram, with `NFQNL_MSG_VERDICT_BATCH` to accept every packet up to an id at once.
//!
//! Why not the `nfq` crate: its `Queue` exposes no file descriptor (so it cannot be polled
//! together with a timeout, only spun or blocked on) and has no batch verdict; this module
//! gives both, needs no `unsafe` (the socket calls are nix's), and the wire format is the
//! stable one of `linux/netfilter/nfnetlink_queue.h`.
//!
//! Owns: the netlink socket of one queue (closed on drop, which makes the kernel drop every
//! packet still queued to it: callers give verdicts first) and the encoding and parsing of
//! its messages.
//!
//! Invariants: the socket lives in the network namespace of the thread that opened it;
//! configuration requests are acknowledged before [`QueueSocket::bind_queue`] returns, and
//! packet notifications read while waiting for an acknowledgement are kept and returned by
//! the next [`QueueSocket::recv_packets`] in order; the parser never panics on malformed
//! input (it returns [`EmulateError::Protocol`]).

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::socket::{
    self, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, sockopt,
};
use nix::sys::time::TimeSpec;

use super::EmulateError;

const NLMSG_HDRLEN: usize = 16;
const NFGEN_HDRLEN: usize = 4;
const NLA_HDRLEN: usize = 4;
/// `~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)`.
const NLA_TYPE_MASK: u16 = 0x3fff;

const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFNETLINK_V0: u8 = 0;

const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQNL_MSG_VERDICT_BATCH: u16 = 3;

const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_TIMESTAMP: u16 = 4;

const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;

const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_CFG_CMD_UNBIND: u8 = 2;
const NFQNL_COPY_META: u8 = 1;

const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;

/// Receive buffer: a metadata-only notification is about 100 bytes, one datagram holds one.
const RX_BUF: usize = 64 * 1024;
/// Largest verdict datagram sent at once.
const TX_CHUNK: usize = 32 * 1024;
/// Kernel socket receive buffer asked for (root may exceed `rmem_max`).
const SOCKET_RCVBUF: usize = 8 * 1024 * 1024;
/// How long a configuration request may wait for its acknowledgement.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);

/// What the kernel told about one queued packet (metadata only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PacketMeta {
    /// The queue's packet id (increasing per queue, wrapping).
    pub id: u32,
    /// The packet's receive timestamp (wall clock since the Unix epoch), when the kernel had
    /// one.
    pub timestamp: Option<Duration>,
}

/// One parsed netlink message that matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Packet(PacketMeta),
    /// `NLMSG_ERROR`: `errno` 0 is an acknowledgement.
    Ack {
        seq: u32,
        errno: i32,
    },
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn be32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn be64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn protocol(what: &str) -> EmulateError {
    EmulateError::Protocol(what.to_owned())
}

/// Parses every netlink message of one datagram, calling `f` for packets and errors/acks.
fn parse(buf: &[u8], mut f: impl FnMut(Event)) -> Result<(), EmulateError> {
    let mut off = 0;
    while buf.len() - off >= NLMSG_HDRLEN {
        let len = u32_at(buf, off).ok_or_else(|| protocol("short header"))? as usize;
        if len < NLMSG_HDRLEN || len > buf.len() - off {
            return Err(protocol("netlink message length out of bounds"));
        }
        let ty = u16_at(buf, off + 4).ok_or_else(|| protocol("short header"))?;
        let seq = u32_at(buf, off + 8).ok_or_else(|| protocol("short header"))?;
        let body = &buf[off + NLMSG_HDRLEN..off + len];
        if ty == NLMSG_ERROR {
            let err = u32_at(body, 0).ok_or_else(|| protocol("short NLMSG_ERROR"))? as i32;
            f(Event::Ack {
                seq,
                errno: err.saturating_neg(),
            });
        } else if ty == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
            f(Event::Packet(parse_packet(body)?));
        }
        // Anything else (NOOP, DONE, other subsystems) carries nothing for us.
        off += align4(len).min(buf.len() - off);
    }
    Ok(())
}

fn parse_packet(body: &[u8]) -> Result<PacketMeta, EmulateError> {
    let mut attrs = body
        .get(NFGEN_HDRLEN..)
        .ok_or_else(|| protocol("packet message without nfgenmsg"))?;
    let (mut id, mut timestamp) = (None, None);
    while attrs.len() >= NLA_HDRLEN {
        let len = u16_at(attrs, 0).ok_or_else(|| protocol("short attribute"))? as usize;
        let ty = u16_at(attrs, 2).ok_or_else(|| protocol("short attribute"))? & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > attrs.len() {
            return Err(protocol("attribute length out of bounds"));
        }
        let payload = &attrs[NLA_HDRLEN..len];
        match ty {
            NFQA_PACKET_HDR => id = be32_at(payload, 0),
            NFQA_TIMESTAMP => {
                if let (Some(sec), Some(usec)) = (be64_at(payload, 0), be64_at(payload, 8)) {
                    timestamp =
                        Some(Duration::from_secs(sec) + Duration::from_micros(usec.min(999_999)));
                }
            }
            _ => {}
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    let id = id.ok_or_else(|| protocol("packet message without NFQA_PACKET_HDR"))?;
    Ok(PacketMeta { id, timestamp })
}

/// Appends one nfnetlink_queue message with `attrs` to `buf`.
fn put_msg(
    buf: &mut Vec<u8>,
    msg_type: u16,
    flags: u16,
    seq: u32,
    queue: u16,
    attrs: &[(u16, &[u8])],
) {
    let start = buf.len();
    buf.extend_from_slice(&[0; 4]); // length, set below
    buf.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | msg_type).to_ne_bytes());
    buf.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    // nfgenmsg: family AF_UNSPEC, version, queue number (big endian).
    buf.extend_from_slice(&[0, NFNETLINK_V0]);
    buf.extend_from_slice(&queue.to_be_bytes());
    for (ty, payload) in attrs {
        let len = NLA_HDRLEN + payload.len();
        buf.extend_from_slice(&(len as u16).to_ne_bytes());
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(payload);
        buf.resize(buf.len() + (align4(len) - len), 0);
    }
    let len = (buf.len() - start) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

fn verdict_hdr(verdict: u32, id: u32) -> [u8; 8] {
    let mut v = [0; 8];
    v[..4].copy_from_slice(&verdict.to_be_bytes());
    v[4..].copy_from_slice(&id.to_be_bytes());
    v
}

/// Whether the calling thread has `CAP_NET_ADMIN` (bit 12 of `CapEff` in its
/// `/proc/thread-self/status`, parsed by procfs).
fn has_net_admin() -> bool {
    use procfs_core::FromRead as _;
    const CAP_NET_ADMIN: u32 = 12;
    procfs_core::process::Status::from_file("/proc/thread-self/status")
        .is_ok_and(|status| status.capeff & (1 << CAP_NET_ADMIN) != 0)
}

/// Waits until `fd` is readable or `timeout` passes (sub-millisecond precision).
pub(crate) fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> Result<bool, EmulateError> {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
        Ok(n) => Ok(n > 0),
        Err(Errno::EINTR) => Ok(false),
        Err(errno) => Err(EmulateError::Netlink { op: "poll", errno }),
    }
}

/// One bound netfilter queue.
#[derive(Debug)]
pub(crate) struct QueueSocket {
    fd: OwnedFd,
    queue: Option<u16>,
    seq: u32,
    rx: Vec<u8>,
    tx: Vec<u8>,
    backlog: VecDeque<PacketMeta>,
    /// `ENOBUFS` seen on receive: the socket buffer overflowed and packets were lost.
    pub overruns: u64,
    /// Error messages the kernel sent for verdicts (an unknown packet id, for one).
    pub verdict_errors: u64,
}

impl QueueSocket {
    /// Opens a netfilter netlink socket in the calling thread's network namespace.
    pub(crate) fn open() -> Result<Self, EmulateError> {
        let nl = |op| move |errno| EmulateError::Netlink { op, errno };
        let fd = socket::socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkNetFilter,
        )
        .map_err(nl("socket"))?;
        socket::bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).map_err(nl("bind"))?;
        // Best effort: without CAP_NET_ADMIN the default buffer (~200 KiB) remains.
        if socket::setsockopt(&fd, sockopt::RcvBufForce, &SOCKET_RCVBUF).is_err() {
            let _ = socket::setsockopt(&fd, sockopt::RcvBuf, &SOCKET_RCVBUF);
        }
        Ok(Self {
            fd,
            queue: None,
            seq: 0,
            rx: vec![0; RX_BUF],
            tx: Vec::with_capacity(TX_CHUNK + 256),
            backlog: VecDeque::new(),
            overruns: 0,
            verdict_errors: 0,
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Binds `queue`, asks for metadata-only copies and sets the kernel queue's length.
    pub(crate) fn bind_queue(&mut self, queue: u16, max_len: u32) -> Result<(), EmulateError> {
        let cmd = [NFQNL_CFG_CMD_BIND, 0, 0, 0];
        self.request(queue, NFQA_CFG_CMD, &cmd)
            .map_err(|errno| match errno {
                // The kernel answers EPERM both to a process without CAP_NET_ADMIN and to a
                // bind of a queue another socket holds.
                Errno::EPERM | Errno::EBUSY if has_net_admin() => EmulateError::QueueBusy { queue },
                Errno::EPERM => EmulateError::Netlink {
                    op: "bind queue (needs CAP_NET_ADMIN)",
                    errno: Errno::EPERM,
                },
                errno => EmulateError::Netlink {
                    op: "bind queue",
                    errno,
                },
            })?;
        self.queue = Some(queue);
        // nfqnl_msg_config_params: be32 copy_range, u8 copy_mode (packed).
        let mut params = [0u8; 5];
        params[4] = NFQNL_COPY_META;
        self.request(queue, NFQA_CFG_PARAMS, &params)
            .map_err(|errno| EmulateError::Netlink {
                op: "set copy mode",
                errno,
            })?;
        self.request(queue, NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes())
            .map_err(|errno| EmulateError::Netlink {
                op: "set queue length",
                errno,
            })
    }

    /// Unbinds the queue (the kernel drops packets still queued to it).
    pub(crate) fn unbind(&mut self) -> Result<(), EmulateError> {
        let Some(queue) = self.queue.take() else {
            return Ok(());
        };
        let cmd = [NFQNL_CFG_CMD_UNBIND, 0, 0, 0];
        self.request(queue, NFQA_CFG_CMD, &cmd)
            .map_err(|errno| EmulateError::Netlink {
                op: "unbind queue",
                errno,
            })
    }

    /// Sends one acknowledged configuration message and waits for its acknowledgement.
    fn request(&mut self, queue: u16, attr: u16, payload: &[u8]) -> Result<(), Errno> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut msg = Vec::with_capacity(64);
        put_msg(
            &mut msg,
            NFQNL_MSG_CONFIG,
            NLM_F_ACK,
            seq,
            queue,
            &[(attr, payload)],
        );
        self.send(&msg)?;
        let deadline = Instant::now() + ACK_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Errno::ETIMEDOUT);
            }
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match ppoll(&mut fds, Some(TimeSpec::from_duration(left)), None) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
            let n = match self.recv_raw() {
                Ok(Some(n)) => n,
                Ok(None) => continue,
                Err(e) => return Err(e),
            };
            let mut answer = None;
            let (backlog, errors) = (&mut self.backlog, &mut self.verdict_errors);
            parse(&self.rx[..n], |ev| match ev {
                Event::Packet(p) => backlog.push_back(p),
                Event::Ack { seq: s, errno } if s == seq => answer = Some(errno),
                Event::Ack { errno, .. } => {
                    if errno != 0 {
                        *errors += 1;
                    }
                }
            })
            .map_err(|_| Errno::EPROTO)?;
            if let Some(errno) = answer {
                return if errno == 0 {
                    Ok(())
                } else {
                    Err(Errno::from_raw(errno))
                };
            }
        }
    }

    /// One non-blocking receive: `Ok(None)` when nothing is waiting.
    fn recv_raw(&mut self) -> Result<Option<usize>, Errno> {
        loop {
            match socket::recv(
                self.fd.as_raw_fd(),
                &mut self.rx,
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC,
            ) {
                Ok(n) if n > self.rx.len() => return Err(Errno::EMSGSIZE),
                Ok(n) => return Ok(Some(n)),
                Err(Errno::EAGAIN) => return Ok(None),
                Err(Errno::EINTR) => continue,
                Err(Errno::ENOBUFS) => {
                    self.overruns += 1;
                    tracing::warn!("netfilter queue socket overran: packets were lost");
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Appends to `out` every packet notification available now, without blocking, up to
    /// `max` of them (oldest first).
    pub(crate) fn recv_packets(
        &mut self,
        out: &mut Vec<PacketMeta>,
        max: usize,
    ) -> Result<(), EmulateError> {
        while out.len() < max {
            if let Some(p) = self.backlog.pop_front() {
                out.push(p);
                continue;
            }
            let n = match self.recv_raw() {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(errno) => return Err(EmulateError::Netlink { op: "recv", errno }),
            };
            let errors = &mut self.verdict_errors;
            parse(&self.rx[..n], |ev| match ev {
                Event::Packet(p) => out.push(p),
                Event::Ack { errno, .. } => {
                    if errno != 0 {
                        *errors += 1;
                        tracing::warn!(errno, "the kernel refused a verdict");
                    }
                }
            })?;
        }
        Ok(())
    }

    /// Drops every packet of `drops` (one verdict each), then accepts every packet still
    /// queued with an id up to `accept_upto` (one batch verdict), in as few datagrams as
    /// possible. The drops go first so the batch never covers them.
    pub(crate) fn send_verdicts(
        &mut self,
        drops: &[u32],
        accept_upto: Option<u32>,
    ) -> Result<(), EmulateError> {
        let Some(queue) = self.queue else {
            return Err(protocol("verdict on an unbound queue"));
        };
        let mut tx = std::mem::take(&mut self.tx);
        tx.clear();
        let mut result = Ok(());
        for &id in drops {
            put_msg(
                &mut tx,
                NFQNL_MSG_VERDICT,
                0,
                0,
                queue,
                &[(NFQA_VERDICT_HDR, &verdict_hdr(NF_DROP, id))],
            );
            if tx.len() >= TX_CHUNK {
                result = self.send(&tx);
                tx.clear();
                if result.is_err() {
                    break;
                }
            }
        }
        if result.is_ok() {
            if let Some(id) = accept_upto {
                put_msg(
                    &mut tx,
                    NFQNL_MSG_VERDICT_BATCH,
                    0,
                    0,
                    queue,
                    &[(NFQA_VERDICT_HDR, &verdict_hdr(NF_ACCEPT, id))],
                );
            }
            if !tx.is_empty() {
                result = self.send(&tx);
            }
        }
        self.tx = tx;
        result.map_err(|errno| EmulateError::Netlink {
            op: "send verdicts",
            errno,
        })
    }

    fn send(&self, buf: &[u8]) -> Result<(), Errno> {
        loop {
            match socket::sendto(
                self.fd.as_raw_fd(),
                buf,
                &NetlinkAddr::new(0, 0),
                MsgFlags::empty(),
            ) {
                Ok(_) => return Ok(()),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel-style packet notification.
    fn packet_msg(id: u32, ts: Option<(u64, u64)>) -> Vec<u8> {
        let mut hdr = Vec::from(id.to_be_bytes());
        hdr.extend_from_slice(&0x0800u16.to_be_bytes());
        hdr.push(2); // hook: FORWARD
        let mut attrs: Vec<(u16, Vec<u8>)> = vec![(NFQA_PACKET_HDR, hdr), (5, vec![0, 0, 0, 3])];
        if let Some((s, us)) = ts {
            let mut t = Vec::from(s.to_be_bytes());
            t.extend_from_slice(&us.to_be_bytes());
            attrs.push((NFQA_TIMESTAMP, t));
        }
        let refs: Vec<(u16, &[u8])> = attrs.iter().map(|(t, p)| (*t, p.as_slice())).collect();
        let mut buf = Vec::new();
        put_msg(&mut buf, NFQNL_MSG_PACKET, 0, 0, 0, &refs);
        buf
    }

    fn events(buf: &[u8]) -> Result<Vec<Event>, EmulateError> {
        let mut v = Vec::new();
        parse(buf, |e| v.push(e))?;
        Ok(v)
    }

    #[test]
    fn parses_packets_and_acks() {
        let mut buf = packet_msg(7, Some((1_700_000_000, 250_000)));
        buf.extend(packet_msg(8, None));
        // NLMSG_ERROR with -EBUSY for seq 42, followed by the echoed header.
        let mut err = Vec::new();
        err.extend_from_slice(&36u32.to_ne_bytes());
        err.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err.extend_from_slice(&0u16.to_ne_bytes());
        err.extend_from_slice(&42u32.to_ne_bytes());
        err.extend_from_slice(&0u32.to_ne_bytes());
        err.extend_from_slice(&(-16i32).to_ne_bytes());
        err.extend_from_slice(&[0; 16]);
        buf.extend(err);
        assert_eq!(
            events(&buf).unwrap(),
            vec![
                Event::Packet(PacketMeta {
                    id: 7,
                    timestamp: Some(Duration::new(1_700_000_000, 250_000_000)),
                }),
                Event::Packet(PacketMeta {
                    id: 8,
                    timestamp: None
                }),
                Event::Ack { seq: 42, errno: 16 },
            ]
        );
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        let good = packet_msg(1, None);
        for cut in 0..good.len() {
            // A cut message is either ignored (shorter than a header) or rejected.
            let _ = events(&good[..cut]);
        }
        let mut bad_len = good.clone();
        bad_len[..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(events(&bad_len).is_err());
        let mut bad_attr = good.clone();
        bad_attr[NLMSG_HDRLEN + NFGEN_HDRLEN..NLMSG_HDRLEN + NFGEN_HDRLEN + 2]
            .copy_from_slice(&2u16.to_ne_bytes());
        assert!(events(&bad_attr).is_err());
        // A packet without its header attribute.
        let mut no_hdr = Vec::new();
        put_msg(
            &mut no_hdr,
            NFQNL_MSG_PACKET,
            0,
            0,
            0,
            &[(5, &[0, 0, 0, 1])],
        );
        assert!(events(&no_hdr).is_err());
    }

    #[test]
    fn verdict_encoding() {
        let mut buf = Vec::new();
        put_msg(
            &mut buf,
            NFQNL_MSG_VERDICT_BATCH,
            0,
            0,
            513,
            &[(NFQA_VERDICT_HDR, &verdict_hdr(NF_ACCEPT, 99))],
        );
        assert_eq!(buf.len(), NLMSG_HDRLEN + NFGEN_HDRLEN + NLA_HDRLEN + 8);
        assert_eq!(u32_at(&buf, 0), Some(buf.len() as u32));
        assert_eq!(u16_at(&buf, 4), Some((3 << 8) | 3));
        assert_eq!(u16_at(&buf, 6), Some(NLM_F_REQUEST));
        assert_eq!(&buf[18..20], &513u16.to_be_bytes());
        assert_eq!(u16_at(&buf, 20), Some(12));
        assert_eq!(u16_at(&buf, 22), Some(NFQA_VERDICT_HDR));
        assert_eq!(be32_at(&buf, 24), Some(NF_ACCEPT));
        assert_eq!(be32_at(&buf, 28), Some(99));
        // Odd-sized payloads are padded so messages can be concatenated.
        let mut cfg = Vec::new();
        put_msg(
            &mut cfg,
            NFQNL_MSG_CONFIG,
            NLM_F_ACK,
            1,
            0,
            &[(NFQA_CFG_PARAMS, &[0; 5])],
        );
        assert_eq!(cfg.len() % 4, 0);
        assert_eq!(u16_at(&cfg, 20), Some(9));
    }
}
