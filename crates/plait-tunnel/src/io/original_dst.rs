//! The destination a TCP connection had before nftables `redirect` rewrote it (client stream
//! mode, [`crate::netcfg::NetConfig::redirect_tcp`]).
//!
//! `redirect` is destination NAT: the accepted socket's local address is the redirected one
//! (127.0.0.1, ::1 or the incoming interface's address, port P); the original destination
//! lives in the connection's conntrack entry and is read with `getsockopt(SOL_IP,
//! SO_ORIGINAL_DST)` for IPv4 and `getsockopt(SOL_IPV6, IP6T_SO_ORIGINAL_DST)` for IPv6.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsFd;

use nix::sys::socket::getsockopt;
use nix::sys::socket::sockopt::{Ip6tOriginalDst, OriginalDst};

/// The original (pre-`redirect`) destination of the accepted TCP connection `fd`.
/// `family_v6` chooses the conntrack lookup: `false` for an IPv4 connection (also one
/// accepted on a dual-stack IPv6 socket, whose peer is an IPv4-mapped address), `true` for
/// an IPv6 one. Fails with `ENOENT` when the connection has no conntrack entry with NAT
/// (it was not redirected) or the family is the wrong one.
pub fn original_dst(fd: &impl AsFd, family_v6: bool) -> io::Result<SocketAddr> {
    if family_v6 {
        let sin6 = getsockopt(fd, Ip6tOriginalDst)?;
        Ok(SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(sin6.sin6_addr.s6_addr),
            u16::from_be(sin6.sin6_port),
            u32::from_be(sin6.sin6_flowinfo),
            sin6.sin6_scope_id,
        )))
    } else {
        let sin = getsockopt(fd, OriginalDst)?;
        Ok(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
            u16::from_be(sin.sin_port),
        )))
    }
}
