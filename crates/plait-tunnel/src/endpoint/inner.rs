//! Just enough of the inner IP header to route and filter: version, source, destination;
//! its offsets and the header sizes are named here (the outer headers have the same).
//!
//! Invariant: never panics; a packet too short for its version's header yields `None`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

/// An IPv4 header without options (the shortest there is).
pub const IPV4_HEADER_LEN: usize = 20;
/// Where an IPv4 header holds the source address.
pub const IPV4_SRC: Range<usize> = 12..16;
/// Where an IPv4 header holds the destination address.
pub const IPV4_DST: Range<usize> = 16..20;
/// The fixed IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;
/// Where an IPv6 header holds the source address.
pub const IPV6_SRC: Range<usize> = 8..24;
/// Where an IPv6 header holds the destination address.
pub const IPV6_DST: Range<usize> = 24..40;

/// The bytes at `range`, as an address of `N` bytes.
fn address<const N: usize>(packet: &[u8], range: Range<usize>) -> Option<[u8; N]> {
    packet.get(range)?.try_into().ok()
}

/// Source and destination of an IPv4 or IPv6 packet.
pub fn addresses(packet: &[u8]) -> Option<(IpAddr, IpAddr)> {
    match packet.first()? >> 4 {
        4 => {
            let s: [u8; 4] = address(packet, IPV4_SRC)?;
            let d: [u8; 4] = address(packet, IPV4_DST)?;
            Some((Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into()))
        }
        6 => {
            let s: [u8; 16] = address(packet, IPV6_SRC)?;
            let d: [u8; 16] = address(packet, IPV6_DST)?;
            Some((Ipv6Addr::from(s).into(), Ipv6Addr::from(d).into()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_v4_and_v6() {
        let mut v4 = [0u8; IPV4_HEADER_LEN];
        v4[0] = 0x45;
        v4[IPV4_SRC].copy_from_slice(&[10, 0, 0, 1]);
        v4[IPV4_DST].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(
            addresses(&v4),
            Some(("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()))
        );
        let mut v6 = [0u8; IPV6_HEADER_LEN];
        v6[0] = 0x60;
        v6[IPV6_SRC.end - 1] = 1;
        v6[IPV6_DST.end - 1] = 2;
        assert_eq!(
            addresses(&v6),
            Some(("::1".parse().unwrap(), "::2".parse().unwrap()))
        );
        assert_eq!(addresses(&v4[..19]), None);
        assert_eq!(addresses(&[]), None);
        assert_eq!(addresses(&[0x70; 60]), None);
    }
}
