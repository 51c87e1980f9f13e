//! Just enough of the inner IP header to route and filter: version, source, destination.
//!
//! Invariant: never panics; a packet too short for its version's header yields `None`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Source and destination of an IPv4 or IPv6 packet.
pub fn addresses(packet: &[u8]) -> Option<(IpAddr, IpAddr)> {
    match packet.first()? >> 4 {
        4 if packet.len() >= 20 => {
            let s: [u8; 4] = packet[12..16].try_into().ok()?;
            let d: [u8; 4] = packet[16..20].try_into().ok()?;
            Some((Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into()))
        }
        6 if packet.len() >= 40 => {
            let s: [u8; 16] = packet[8..24].try_into().ok()?;
            let d: [u8; 16] = packet[24..40].try_into().ok()?;
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
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(
            addresses(&v4),
            Some(("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()))
        );
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[23] = 1;
        v6[39] = 2;
        assert_eq!(
            addresses(&v6),
            Some(("::1".parse().unwrap(), "::2".parse().unwrap()))
        );
        assert_eq!(addresses(&v4[..19]), None);
        assert_eq!(addresses(&[]), None);
        assert_eq!(addresses(&[0x70; 60]), None);
    }
}
