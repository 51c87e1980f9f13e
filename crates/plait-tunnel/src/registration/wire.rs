//! A registration's bytes inside a path-control message (docs/protocol.md#registration).
//!
//! ```text
//! kind (1: REGISTER or REGISTRATION) | count (1) | seq (7, big-endian) | count × entry (33)
//! entry: path (1) | flags (1: bit 0 available, bit 1 backup) | link (1) | cost (1) |
//!        priority (1) | family (1: 0 none, 4, 6) | address (16) | port (2) |
//!        srtt ms (2) | loss in 0.01 % (2) | rate kbit/s (4) |
//!        signal in 0.5 % (1, 0 to 200)                         (unknown: all ones)
//! ```
//!
//! All integers big-endian. An IPv4 address fills the first 4 of the 16 address bytes and
//! the rest are zero; with family 0 all 18 address and port bytes are zero.
//!
//! Invariant: [`decode`] reads at most [`REGISTRATION_MAX_LEN`] bytes, allocates at most
//! [`MAX_PATHS`] entries, and returns a typed error for anything [`encode`] would not
//! write.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

use super::{
    CostClass, Entry, LinkKind, MAX_PATHS, MAX_PRIORITY, PathAttributes, Quality, Registration,
    SIGNAL_STEPS,
};
use crate::message::{BINDING_SEQ_MAX, REGISTER, REGISTRATION};

/// Kind, count and sequence number.
pub const REGISTRATION_HEADER_LEN: usize = 9;
/// One path's entry.
pub const ENTRY_LEN: usize = 33;
/// The longest registration: every path named.
pub const REGISTRATION_MAX_LEN: usize = REGISTRATION_HEADER_LEN + MAX_PATHS * ENTRY_LEN;

const FLAG_AVAILABLE: u8 = 1;
const FLAG_BACKUP: u8 = 2;
const UNKNOWN_U8: u8 = u8::MAX;
const UNKNOWN_U16: u16 = u16::MAX;
const UNKNOWN_U32: u32 = u32::MAX;
/// 100 % in units of 0.01 %.
const LOSS_BP_MAX: u16 = 10_000;

/// Why a registration was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RegistrationError {
    /// Shorter than its header, or than its count of entries says.
    #[error("registration of {len} bytes: {count} entries need {need}")]
    WrongLength {
        /// Bytes received.
        len: usize,
        /// Entries the header announces.
        count: usize,
        /// Bytes those need.
        need: usize,
    },
    /// Not a REGISTER or REGISTRATION frame.
    #[error("frame kind {0} is not a registration")]
    NotARegistration(u8),
    /// More entries than there can be paths.
    #[error("registration names {count} paths; at most {MAX_PATHS}")]
    TooManyPaths {
        /// Entries the header announces.
        count: usize,
    },
    /// A path id beyond the path limit.
    #[error("path id {0} is out of range (0 to {max})", max = MAX_PATHS - 1)]
    PathOutOfRange(u8),
    /// A path named twice, or out of ascending order.
    #[error("path {0} is named twice or out of order")]
    PathOrder(u8),
    /// Flag bits that mean nothing yet.
    #[error("path {path}: unknown flags {flags:#04x}")]
    UnknownFlags {
        /// The path.
        path: u8,
        /// Its flags byte.
        flags: u8,
    },
    /// A link type this version does not know.
    #[error("path {path}: unknown link type {value}")]
    UnknownLinkKind {
        /// The path.
        path: u8,
        /// The byte.
        value: u8,
    },
    /// A cost class this version does not know.
    #[error("path {path}: unknown cost class {value}")]
    UnknownCostClass {
        /// The path.
        path: u8,
        /// The byte.
        value: u8,
    },
    /// A priority above [`MAX_PRIORITY`].
    #[error("path {path}: priority {value} is above {MAX_PRIORITY}")]
    PriorityOutOfRange {
        /// The path.
        path: u8,
        /// The byte.
        value: u8,
    },
    /// An address family byte other than 0, 4 or 6, or an IPv4 address with bytes in
    /// the IPv6 part, or bytes after family 0.
    #[error("path {path}: malformed address (family byte {family})")]
    BadAddress {
        /// The path.
        path: u8,
        /// The family byte.
        family: u8,
    },
    /// A loss above 100 %.
    #[error("path {path}: loss {value} is above 10000 (100 %)")]
    LossOutOfRange {
        /// The path.
        path: u8,
        /// The value, in 0.01 %.
        value: u16,
    },
    /// A signal above 200 (100 %) that is not 255 (unknown).
    #[error("path {path}: signal {value} is above 200 (100 %)")]
    SignalOutOfRange {
        /// The path.
        path: u8,
        /// The value, in 0.5 %.
        value: u8,
    },
    /// The client's address on a path is not of the family of the address the server
    /// sees the path at (checked by the server, `Link::receive_registration`).
    #[error("path {path}: the client's address {local} is not of the family of {seen}")]
    WrongFamily {
        /// The path.
        path: u8,
        /// What the registration says.
        local: SocketAddr,
        /// Where the server sees the path.
        seen: SocketAddr,
    },
}

/// The bytes of `registration` as a `kind` frame ([`REGISTER`] or [`REGISTRATION`]).
/// Entries beyond [`MAX_PATHS`] are not written (a [`Registration`] built by this crate
/// never has them).
pub fn encode(kind: u8, registration: &Registration) -> Vec<u8> {
    let entries = &registration.entries[..registration.entries.len().min(MAX_PATHS)];
    let mut b = Vec::with_capacity(REGISTRATION_HEADER_LEN + entries.len() * ENTRY_LEN);
    b.push(kind);
    b.push(entries.len() as u8);
    b.extend_from_slice(&(registration.seq & BINDING_SEQ_MAX).to_be_bytes()[1..]);
    for e in entries {
        let flags =
            if e.available { FLAG_AVAILABLE } else { 0 } | if e.backup { FLAG_BACKUP } else { 0 };
        let a = e.attributes;
        b.extend_from_slice(&[
            e.path,
            flags,
            link_byte(a.link),
            cost_byte(a.cost),
            a.priority.min(MAX_PRIORITY),
        ]);
        let mut address = [0u8; 16];
        let (family, port) = match e.local {
            Some(SocketAddr::V4(v4)) => {
                address[..4].copy_from_slice(&v4.ip().octets());
                (4, v4.port())
            }
            Some(SocketAddr::V6(v6)) => {
                address = v6.ip().octets();
                (6, v6.port())
            }
            None => (0, 0),
        };
        b.push(family);
        b.extend_from_slice(&address);
        b.extend_from_slice(&port.to_be_bytes());
        let q = e.quality;
        b.extend_from_slice(&q.srtt_ms.unwrap_or(UNKNOWN_U16).to_be_bytes());
        let loss = q.loss_bp.map_or(UNKNOWN_U16, |l| l.min(LOSS_BP_MAX));
        b.extend_from_slice(&loss.to_be_bytes());
        b.extend_from_slice(&q.rate_kbit.unwrap_or(UNKNOWN_U32).to_be_bytes());
        b.push(q.signal.map_or(UNKNOWN_U8, |s| s.min(SIGNAL_STEPS)));
    }
    b
}

/// Decodes a REGISTER or REGISTRATION frame: its kind and the registration.
pub fn decode(buf: &[u8]) -> Result<(u8, Registration), RegistrationError> {
    let short = |count: usize| RegistrationError::WrongLength {
        len: buf.len(),
        count,
        need: REGISTRATION_HEADER_LEN + count * ENTRY_LEN,
    };
    let Some(header) = buf.first_chunk::<REGISTRATION_HEADER_LEN>() else {
        return Err(short(0));
    };
    let [kind, count, seq @ ..] = *header;
    if kind != REGISTER && kind != REGISTRATION {
        return Err(RegistrationError::NotARegistration(kind));
    }
    let count = usize::from(count);
    if count > MAX_PATHS {
        return Err(RegistrationError::TooManyPaths { count });
    }
    if buf.len() != REGISTRATION_HEADER_LEN + count * ENTRY_LEN {
        return Err(short(count));
    }
    let seq = u64::from_be_bytes([0, seq[0], seq[1], seq[2], seq[3], seq[4], seq[5], seq[6]]);
    let mut entries: Vec<Entry> = Vec::with_capacity(count);
    for chunk in buf[REGISTRATION_HEADER_LEN..].chunks_exact(ENTRY_LEN) {
        let e = entry(chunk)?;
        if entries.last().is_some_and(|last| last.path >= e.path) {
            return Err(RegistrationError::PathOrder(e.path));
        }
        entries.push(e);
    }
    Ok((kind, Registration { seq, entries }))
}

fn entry(b: &[u8]) -> Result<Entry, RegistrationError> {
    let Ok(b) = <&[u8; ENTRY_LEN]>::try_from(b) else {
        // `chunks_exact` gives whole entries only.
        return Err(RegistrationError::WrongLength {
            len: b.len(),
            count: 1,
            need: ENTRY_LEN,
        });
    };
    let path = b[0];
    if usize::from(path) >= MAX_PATHS {
        return Err(RegistrationError::PathOutOfRange(path));
    }
    let flags = b[1];
    if flags & !(FLAG_AVAILABLE | FLAG_BACKUP) != 0 {
        return Err(RegistrationError::UnknownFlags { path, flags });
    }
    let link = *LinkKind::ALL
        .get(usize::from(b[2]))
        .ok_or(RegistrationError::UnknownLinkKind { path, value: b[2] })?;
    let cost = *CostClass::ALL
        .get(usize::from(b[3]))
        .ok_or(RegistrationError::UnknownCostClass { path, value: b[3] })?;
    let priority = b[4];
    if priority > MAX_PRIORITY {
        return Err(RegistrationError::PriorityOutOfRange {
            path,
            value: priority,
        });
    }
    let family = b[5];
    let address: [u8; 16] = b[6..22].try_into().unwrap_or_default();
    let port = u16::from_be_bytes([b[22], b[23]]);
    let bad_address = RegistrationError::BadAddress { path, family };
    let local = match family {
        0 if address == [0; 16] && port == 0 => None,
        4 if address[4..] == [0; 12] => {
            let v4: [u8; 4] = address[..4].try_into().unwrap_or_default();
            Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(v4)), port))
        }
        6 => Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(address)), port)),
        _ => return Err(bad_address),
    };
    let u16_at = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let known16 = |v: u16| (v != UNKNOWN_U16).then_some(v);
    let loss_bp = known16(u16_at(26));
    if let Some(value) = loss_bp.filter(|&l| l > LOSS_BP_MAX) {
        return Err(RegistrationError::LossOutOfRange { path, value });
    }
    let rate = u32::from_be_bytes([b[28], b[29], b[30], b[31]]);
    let signal = (b[32] != UNKNOWN_U8).then_some(b[32]);
    if let Some(value) = signal.filter(|&s| s > SIGNAL_STEPS) {
        return Err(RegistrationError::SignalOutOfRange { path, value });
    }
    Ok(Entry {
        path,
        available: flags & FLAG_AVAILABLE != 0,
        backup: flags & FLAG_BACKUP != 0,
        attributes: PathAttributes {
            link,
            cost,
            priority,
        },
        local,
        quality: Quality {
            srtt_ms: known16(u16_at(24)),
            loss_bp,
            rate_kbit: (rate != UNKNOWN_U32).then_some(rate),
            signal,
        },
    })
}

fn link_byte(kind: LinkKind) -> u8 {
    LinkKind::ALL.iter().position(|&k| k == kind).unwrap_or(0) as u8
}

fn cost_byte(class: CostClass) -> u8 {
    CostClass::ALL.iter().position(|&c| c == class).unwrap_or(0) as u8
}
