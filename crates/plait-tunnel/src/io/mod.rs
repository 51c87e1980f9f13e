//! Real I/O for the daemon: the TUN device and batched UDP sockets.
//!
//! Invariants: every descriptor here is non-blocking (the event loop waits in one place,
//! `mio::Poll`); buffers are allocated once at start, none per packet.

pub mod tun;
pub mod udp;
