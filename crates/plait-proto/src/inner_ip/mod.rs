//! Inner packets as far as the send queue reads them: which flow a packet belongs to (its
//! 5-tuple, [`flow_key`]) and its ECN field ([`ecn`], [`mark_ce`]), from the IPv4 or IPv6
//! bytes a TUN device hands the tunnel.
//!
//! Invariants:
//! - every function takes any bytes (not IP, truncated, lying length fields) and never
//!   panics; it reads and writes only inside the slice. The slice is the packet: the IPv4
//!   total length and IPv6 payload length fields are not consulted;
//! - a packet that is neither IPv4 nor IPv6, or whose IP header (IPv6: with its extension
//!   headers) or, for a protocol with ports, whose first four transport bytes are cut
//!   short, has no [`FlowKey`]: the send queue puts all such packets in one dedicated flow;
//! - ports are read only for TCP, UDP, UDP-Lite, SCTP and DCCP (whose first four bytes are
//!   the source and destination ports) and never from a non-first fragment, so every
//!   fragment of a datagram past the first is classified by addresses and protocol alone
//!   (RFC 8290 §4.1.1 leaves the classifier open; this is the usual 5-tuple);
//! - IPv6 extension headers (hop-by-hop, routing, fragment, destination options, AH,
//!   mobility, HIP, shim6) are walked at most [`MAX_EXTENSION_HEADERS`] deep; past that
//!   bound, and for ESP or an unknown next header, the packet is classified by addresses
//!   and that next header, without ports.

mod ecn;
#[cfg(test)]
pub(crate) mod tests;

pub use ecn::{Ecn, ecn, mark_ce};

/// IP protocol numbers (IANA "Assigned Internet Protocol Numbers") this module knows.
mod proto {
    pub const HOP_BY_HOP: u8 = 0;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const DCCP: u8 = 33;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AH: u8 = 51;
    pub const DEST_OPTS: u8 = 60;
    pub const SCTP: u8 = 132;
    pub const UDP_LITE: u8 = 136;
    pub const MOBILITY: u8 = 135;
    pub const HIP: u8 = 139;
    pub const SHIM6: u8 = 140;
}

/// Most IPv6 extension headers walked before the classifier gives up looking for ports.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// Longest key: version, protocol, two IPv6 addresses, two ports.
const KEY_LEN: usize = 1 + 1 + 16 + 16 + 4;

/// The fields that name a flow, packed for hashing: IP version, protocol, source and
/// destination address, source and destination port (zero when the protocol has none or
/// the packet is a non-first fragment).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FlowKey {
    bytes: [u8; KEY_LEN],
    len: u8,
    has_ports: bool,
}

impl FlowKey {
    fn new(version: u8, protocol: u8, src: &[u8], dst: &[u8], ports: Option<[u8; 4]>) -> FlowKey {
        let mut bytes = [0; KEY_LEN];
        bytes[0] = version;
        bytes[1] = protocol;
        let mut at = 2;
        for part in [src, dst, &ports.unwrap_or_default()[..]] {
            bytes[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        FlowKey {
            bytes,
            len: at as u8,
            has_ports: ports.is_some(),
        }
    }

    /// The packed fields (14 bytes for IPv4, 38 for IPv6).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The IP protocol (IPv6: the last next-header value the walk reached).
    pub fn protocol(&self) -> u8 {
        self.bytes[1]
    }

    /// Whether the packet is TCP.
    pub fn is_tcp(&self) -> bool {
        self.protocol() == proto::TCP
    }

    /// Source and destination port, if the key has them.
    pub fn ports(&self) -> Option<(u16, u16)> {
        let at = usize::from(self.len) - 4;
        let p = &self.bytes[at..at + 4];
        self.has_ports.then(|| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        })
    }
}

/// Whether the protocol's first four transport bytes are its ports.
fn has_ports(protocol: u8) -> bool {
    matches!(
        protocol,
        proto::TCP | proto::UDP | proto::UDP_LITE | proto::SCTP | proto::DCCP
    )
}

/// The ports of a transport header starting at `at`: `Ok(None)` for a protocol without
/// ports or a non-first fragment, `Err(())` when they should be there but are cut short.
fn ports(
    packet: &[u8],
    at: usize,
    protocol: u8,
    later_fragment: bool,
) -> Result<Option<[u8; 4]>, ()> {
    if later_fragment || !has_ports(protocol) {
        return Ok(None);
    }
    let p = packet.get(at..at.saturating_add(4)).ok_or(())?;
    Ok(Some([p[0], p[1], p[2], p[3]]))
}

/// The flow `packet` belongs to; `None` if it is not IPv4 or IPv6, or is cut short (see the
/// module docs).
pub fn flow_key(packet: &[u8]) -> Option<FlowKey> {
    match packet.first()? >> 4 {
        4 => ipv4_key(packet),
        6 => ipv6_key(packet),
        _ => None,
    }
}

fn ipv4_key(p: &[u8]) -> Option<FlowKey> {
    let ihl = usize::from(p.first()? & 0x0f) * 4;
    if ihl < 20 || p.len() < ihl {
        return None;
    }
    let protocol = p[9];
    let later_fragment = u16::from_be_bytes([p[6], p[7]]) & 0x1fff != 0;
    let ports = ports(p, ihl, protocol, later_fragment).ok()?;
    Some(FlowKey::new(4, protocol, &p[12..16], &p[16..20], ports))
}

fn ipv6_key(p: &[u8]) -> Option<FlowKey> {
    if p.len() < 40 {
        return None;
    }
    let mut next = p[6];
    let mut at = 40usize;
    let mut later_fragment = false;
    for _ in 0..MAX_EXTENSION_HEADERS {
        let len = match next {
            proto::HOP_BY_HOP
            | proto::ROUTING
            | proto::DEST_OPTS
            | proto::MOBILITY
            | proto::HIP
            | proto::SHIM6 => (usize::from(*p.get(at + 1)?) + 1) * 8,
            // RFC 4302 §2.2: AH's length is in 4-byte units, minus 2.
            proto::AH => (usize::from(*p.get(at + 1)?) + 2) * 4,
            proto::FRAGMENT => {
                let h = p.get(at..at + 8)?;
                later_fragment = u16::from_be_bytes([h[2], h[3]]) & 0xfff8 != 0;
                8
            }
            _ => break,
        };
        next = *p.get(at)?;
        at += len;
        if later_fragment {
            break; // what follows is the middle of a datagram, not a header
        }
    }
    let ports = ports(p, at, next, later_fragment).ok()?;
    Some(FlowKey::new(6, next, &p[8..24], &p[24..40], ports))
}
