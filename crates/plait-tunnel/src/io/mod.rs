//! Real I/O for the daemon: the TUN device, batched UDP sockets, and the original
//! destination of a redirected TCP connection.
//!
//! Invariants: every descriptor here is non-blocking (the event loop waits in one place,
//! `mio::Poll`); buffers are allocated once at start, none per packet.

pub mod netwatch;
pub mod original_dst;
pub mod steer;
pub mod tun;
pub mod udp;
