//! One UDP socket with batched receive (recvmmsg + GRO) and segmented send (GSO), through
//! quinn-udp.
//!
//! A [`SendBatch`] collects datagrams for one socket; consecutive datagrams to the same
//! address of the same size (the last may be shorter) leave in one `sendmsg` with GSO,
//! which is how bulk traffic looks. A full socket buffer drops the datagram (UDP
//! semantics: the engine sees a loss and its estimators react) and counts it.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use socket2::{Domain, Protocol, Socket, Type};

/// Datagrams received per `recv` call (quinn-udp's batch).
pub const RECV_BATCH: usize = quinn_udp::BATCH_SIZE;
/// Bytes per receive buffer: room for one GRO super-datagram.
pub const RECV_BUF: usize = 65_536;
/// Socket buffer sizes asked for (the kernel may cap them at net.core.*mem_max).
pub const SOCKET_BUFFER: usize = 4 << 20;

/// How to open one socket.
#[derive(Clone, Debug, Default)]
pub struct SocketOptions {
    /// Bind to this interface (SO_BINDTODEVICE).
    pub device: Option<String>,
    /// Firewall mark (SO_MARK), so policy routing keeps path traffic off the tunnel.
    pub fwmark: Option<u32>,
    /// Join the address's SO_REUSEPORT group (the server's steered listen sockets,
    /// [`crate::io::steer`]).
    pub reuse_port: bool,
}

/// A bound, non-blocking UDP socket.
#[derive(Debug)]
pub struct UdpPath {
    socket: UdpSocket,
    state: UdpSocketState,
    local: SocketAddr,
    /// Datagrams dropped because the socket buffer was full or the send failed.
    pub send_errors: u64,
}

impl UdpPath {
    /// Opens a socket bound to `bind` with `options`.
    pub fn bind(bind: SocketAddr, options: &SocketOptions) -> io::Result<UdpPath> {
        let socket = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))?;
        if bind.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        if let Some(dev) = &options.device {
            socket.bind_device(Some(dev.as_bytes())).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot bind to device {dev}: {e}"))
            })?;
        }
        if let Some(mark) = options.fwmark {
            socket.set_mark(mark)?;
        }
        if options.reuse_port {
            socket.set_reuse_port(true)?;
        }
        // Best effort: the kernel caps these at its maximums, which is fine.
        let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
        let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
        socket.bind(&bind.into())?;
        let socket: UdpSocket = socket.into();
        let state = UdpSocketState::new(UdpSockRef::from(&socket))?;
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        Ok(UdpPath {
            socket,
            state,
            local,
            send_errors: 0,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Largest number of segments one GSO send may carry.
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Receives a batch. Returns how many `meta` entries are filled; `WouldBlock` when
    /// nothing is waiting. A meta with `stride < len` holds several datagrams (GRO).
    pub fn recv(&self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        let mut iovs: [IoSliceMut<'_>; RECV_BATCH] = {
            let mut it = bufs.data.chunks_mut(RECV_BUF);
            std::array::from_fn(|_| IoSliceMut::new(it.next().unwrap_or(&mut [])))
        };
        self.state
            .recv(UdpSockRef::from(&self.socket), &mut iovs, &mut bufs.meta)
    }

    /// Sends `contents` to `to`; with `segment_size`, as GSO segments of that size.
    pub fn send(&mut self, to: SocketAddr, contents: &[u8], segment_size: Option<usize>) {
        let t = Transmit {
            destination: to,
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        };
        if self
            .state
            .try_send(UdpSockRef::from(&self.socket), &t)
            .is_err()
        {
            self.send_errors += 1;
        }
    }
}

impl AsRawFd for UdpPath {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl AsFd for UdpPath {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// Receive buffers for one socket, allocated once.
#[derive(Debug)]
pub struct RecvBuffers {
    data: Vec<u8>,
    meta: [RecvMeta; RECV_BATCH],
}

impl Default for RecvBuffers {
    fn default() -> Self {
        RecvBuffers {
            data: vec![0; RECV_BATCH * RECV_BUF],
            meta: [RecvMeta::default(); RECV_BATCH],
        }
    }
}

impl RecvBuffers {
    /// The datagrams of batch entry `i` (split by GRO stride) with their source and the
    /// kernel's receive time (wall clock, SO_TIMESTAMPNS, if the kernel gave one), mutable
    /// so they can be decrypted in place.
    pub fn datagrams(
        &mut self,
        i: usize,
    ) -> (
        SocketAddr,
        Option<std::time::Duration>,
        impl Iterator<Item = &mut [u8]>,
    ) {
        let meta = self.meta[i];
        let start = i * RECV_BUF;
        let len = meta.len.min(RECV_BUF);
        let stride = meta.stride.max(1);
        (
            meta.addr,
            meta.timestamp,
            self.data[start..start + len].chunks_mut(stride),
        )
    }
}

/// Datagrams waiting to leave one socket, coalesced for GSO.
#[derive(Debug)]
pub struct SendBatch {
    buf: Vec<u8>,
    dest: Option<SocketAddr>,
    segment: usize,
    segments: usize,
    closed: bool,
    max_segments: usize,
}

impl SendBatch {
    /// An empty batch allowing `max_segments` per send (1 disables GSO).
    pub fn new(max_segments: usize) -> SendBatch {
        SendBatch {
            buf: Vec::with_capacity(65_536),
            dest: None,
            segment: 0,
            segments: 0,
            closed: false,
            max_segments: max_segments.max(1),
        }
    }

    /// Adds a datagram, flushing first through `socket` if it cannot join the batch.
    pub fn push(&mut self, socket: &mut UdpPath, to: SocketAddr, datagram: &[u8]) {
        let fits = self.dest == Some(to)
            && !self.closed
            && datagram.len() <= self.segment
            && self.segments < self.max_segments
            && self.buf.len() + datagram.len() <= 65_000;
        if !fits {
            self.flush(socket);
            self.dest = Some(to);
            self.segment = datagram.len();
        }
        // A shorter datagram must be the batch's last (GSO's rule).
        if datagram.len() < self.segment {
            self.closed = true;
        }
        self.buf.extend_from_slice(datagram);
        self.segments += 1;
    }

    /// Sends what is batched.
    pub fn flush(&mut self, socket: &mut UdpPath) {
        if let Some(dest) = self.dest.take()
            && !self.buf.is_empty()
        {
            let seg = (self.segments > 1).then_some(self.segment);
            socket.send(dest, &self.buf, seg);
        }
        self.buf.clear();
        self.segments = 0;
        self.closed = false;
        self.segment = 0;
    }
}
