//! Where a SOCKS5 client wants to connect: [`Target`], and its byte encoding.
//!
//! The encoding is SOCKS5's own address field (RFC 1928 §4 DST.ADDR/DST.PORT, §5
//! Addressing), so the request parser and the engine stream's open request share one
//! decoder:
//!
//! | ATYP | name   | layout                                 | size     |
//! |------|--------|----------------------------------------|----------|
//! | 0x01 | IPv4   | 0x01, 4 address bytes, port            | 7        |
//! | 0x03 | domain | 0x03, length n (1..=255), n bytes, port | 4 + n    |
//! | 0x04 | IPv6   | 0x04, 16 address bytes, port           | 19       |
//!
//! The port is a big-endian u16 ("network octet order", RFC 1928 §4). An encoded target is
//! at most [`MAX_ENCODED_LEN`] (259) bytes, well under the open request's 1024-byte limit
//! ([`OPEN_REQUEST_LIMIT`]). Other ATYP values are reserved for future kinds of target.
//!
//! Invariants:
//! - A [`Domain`] is 1..=255 bytes of hostname characters (ASCII letters, digits, `-`,
//!   `_`, `.`) in non-empty labels of at most 63 bytes (one trailing dot, as in
//!   `example.com.`, is allowed). It is never resolved here. `_` is outside RFC 1123 but
//!   occurs in real names; `:`, `/`, `@`, spaces, controls and non-ASCII never pass, so a
//!   domain cannot smuggle a port, a path or a second host into a later resolver call.
//! - [`Target::decode`] never panics, accepts exactly the layouts above (no trailing
//!   bytes) and is the inverse of [`Target::encode`]: `decode(encode(t)) == t`, and every
//!   accepted input re-encodes to itself.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

/// ATYP of an IPv4 address (RFC 1928 §5).
pub const ATYP_IPV4: u8 = 0x01;
/// ATYP of a domain name (RFC 1928 §5).
pub const ATYP_DOMAIN: u8 = 0x03;
/// ATYP of an IPv6 address (RFC 1928 §5).
pub const ATYP_IPV6: u8 = 0x04;

/// Longest domain name: its length is one byte on the wire.
pub const MAX_DOMAIN_LEN: usize = 255;
/// Longest label of a domain name (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;
/// Longest encoded [`Target`]: ATYP, length byte, 255-byte domain, port.
pub const MAX_ENCODED_LEN: usize = 1 + 1 + MAX_DOMAIN_LEN + 2;
/// Upper bound on an engine stream's open request, which carries one encoded [`Target`].
pub const OPEN_REQUEST_LIMIT: usize = 1024;

const _: () = assert!(MAX_ENCODED_LEN == 259);
const _: () = assert!(MAX_ENCODED_LEN <= OPEN_REQUEST_LIMIT);

/// An address field that is not a valid target.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// ATYP is not IPv4, domain or IPv6.
    #[error("address type {0:#04x} not supported (IPv4 is 0x01, domain name 0x03, IPv6 0x04)")]
    AddressType(u8),
    /// A domain name of length zero.
    #[error("empty domain name")]
    EmptyDomain,
    /// A domain name longer than 255 bytes (only when building one; the wire cannot say so).
    #[error("domain name of {0} bytes is longer than 255")]
    DomainTooLong(usize),
    /// A byte that is not a hostname character.
    #[error("domain name byte {byte:#04x} at offset {at} is not a hostname character")]
    DomainByte {
        /// The offending byte.
        byte: u8,
        /// Its offset in the name.
        at: usize,
    },
    /// Two dots in a row, or a leading dot, or a name that is only a dot.
    #[error("domain name has an empty label")]
    EmptyLabel,
    /// A label longer than 63 bytes.
    #[error("domain name has a label of {0} bytes, longer than 63")]
    LabelTooLong(usize),
    /// The input ends before the address and port do.
    #[error("address field truncated: {len} bytes, need {need}")]
    Truncated {
        /// Bytes given.
        len: usize,
        /// Bytes the address type (and domain length) call for.
        need: usize,
    },
    /// Bytes after the port.
    #[error("{0} trailing bytes after the port")]
    TrailingBytes(usize),
}

/// A validated domain name (see the module invariants); never resolved here.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Domain(String);

impl Domain {
    /// Validates `name` as a domain name for a target.
    pub fn new(name: impl Into<String>) -> Result<Domain, TargetError> {
        let name = name.into();
        check_domain(name.as_bytes())?;
        Ok(Domain(name))
    }

    /// Validates wire bytes (ASCII only, so valid UTF-8 once checked).
    fn from_bytes(bytes: &[u8]) -> Result<Domain, TargetError> {
        check_domain(bytes)?;
        // Cannot fail: `check_domain` admits only ASCII.
        let name = std::str::from_utf8(bytes)
            .map_err(|_| TargetError::DomainByte { byte: 0x80, at: 0 })?;
        Ok(Domain(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks the domain invariants: length, characters, labels.
fn check_domain(name: &[u8]) -> Result<(), TargetError> {
    if name.is_empty() {
        return Err(TargetError::EmptyDomain);
    }
    if name.len() > MAX_DOMAIN_LEN {
        return Err(TargetError::DomainTooLong(name.len()));
    }
    if let Some((at, &byte)) = name
        .iter()
        .enumerate()
        .find(|&(_, &b)| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
    {
        return Err(TargetError::DomainByte { byte, at });
    }
    // One trailing dot (a fully qualified name) is allowed; it ends the last label.
    let body = name.strip_suffix(b".").unwrap_or(name);
    for label in body.split(|&b| b == b'.') {
        if label.is_empty() {
            return Err(TargetError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(TargetError::LabelTooLong(label.len()));
        }
    }
    Ok(())
}

/// The host part of a target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TargetHost {
    /// An IPv4 or IPv6 address.
    Ip(IpAddr),
    /// A domain name, for the connecting side to resolve.
    Domain(Domain),
}

/// A host and port to connect to: what a SOCKS5 CONNECT asks for, and what an engine
/// stream's open request carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Where.
    pub host: TargetHost,
    /// Which port.
    pub port: u16,
}

impl Target {
    /// Bytes [`Target::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        1 + match &self.host {
            TargetHost::Ip(IpAddr::V4(_)) => 4,
            TargetHost::Ip(IpAddr::V6(_)) => 16,
            TargetHost::Domain(d) => 1 + d.0.len(),
        } + 2
    }

    /// Appends the encoding (module table): at most [`MAX_ENCODED_LEN`] bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match &self.host {
            TargetHost::Ip(IpAddr::V4(a)) => {
                out.push(ATYP_IPV4);
                out.extend_from_slice(&a.octets());
            }
            TargetHost::Ip(IpAddr::V6(a)) => {
                out.push(ATYP_IPV6);
                out.extend_from_slice(&a.octets());
            }
            TargetHost::Domain(d) => {
                out.push(ATYP_DOMAIN);
                // A `Domain` is at most 255 bytes (its invariant), so this is exact.
                out.push(u8::try_from(d.0.len()).unwrap_or(u8::MAX));
                out.extend_from_slice(d.0.as_bytes());
            }
        }
        out.extend_from_slice(&self.port.to_be_bytes());
    }

    /// Decodes exactly one encoded target, nothing before or after it.
    pub fn decode(buf: &[u8]) -> Result<Target, TargetError> {
        let need = encoded_len_prefix(buf)?;
        if buf.len() < need {
            return Err(TargetError::Truncated {
                len: buf.len(),
                need,
            });
        }
        if buf.len() > need {
            return Err(TargetError::TrailingBytes(buf.len() - need));
        }
        let (addr, port) = buf[1..].split_at(need - 3);
        let port = u16::from_be_bytes([port[0], port[1]]);
        let host = match buf[0] {
            ATYP_IPV4 => TargetHost::Ip(IpAddr::V4(Ipv4Addr::from(
                <[u8; 4]>::try_from(addr).map_err(|_| TargetError::Truncated {
                    len: buf.len(),
                    need,
                })?,
            ))),
            ATYP_IPV6 => TargetHost::Ip(IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(addr).map_err(|_| TargetError::Truncated {
                    len: buf.len(),
                    need,
                })?,
            ))),
            // `encoded_len_prefix` admitted only the three types.
            _ => TargetHost::Domain(Domain::from_bytes(&addr[1..])?),
        };
        Ok(Target { host, port })
    }
}

/// The encoded length a target starting with `buf` has, as far as `buf` tells: the ATYP
/// and, for a domain, the length byte. `Truncated` if `buf` is too short to tell.
///
/// The handshake reads a request with it, so both check the address type and an empty
/// domain the moment their byte arrives.
pub(crate) fn encoded_len_prefix(buf: &[u8]) -> Result<usize, TargetError> {
    let truncated = |need| TargetError::Truncated {
        len: buf.len(),
        need,
    };
    match *buf.first().ok_or(truncated(1))? {
        ATYP_IPV4 => Ok(1 + 4 + 2),
        ATYP_IPV6 => Ok(1 + 16 + 2),
        ATYP_DOMAIN => match *buf.get(1).ok_or(truncated(2))? {
            0 => Err(TargetError::EmptyDomain),
            n => Ok(1 + 1 + usize::from(n) + 2),
        },
        other => Err(TargetError::AddressType(other)),
    }
}

impl fmt::Display for Target {
    /// `host:port`, with an IPv6 address in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            TargetHost::Ip(IpAddr::V6(a)) => write!(f, "[{a}]:{}", self.port),
            TargetHost::Ip(IpAddr::V4(a)) => write!(f, "{a}:{}", self.port),
            TargetHost::Domain(d) => write!(f, "{d}:{}", self.port),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn domain(name: &str, port: u16) -> Target {
        Target {
            host: TargetHost::Domain(Domain::new(name).unwrap()),
            port,
        }
    }

    fn encoded(t: &Target) -> Vec<u8> {
        let mut out = Vec::new();
        t.encode(&mut out);
        assert_eq!(out.len(), t.encoded_len());
        out
    }

    #[test]
    fn vectors() {
        // 192.0.2.1:80
        let v4 = Target {
            host: TargetHost::Ip(Ipv4Addr::new(192, 0, 2, 1).into()),
            port: 80,
        };
        let v4_bytes = [0x01, 0xc0, 0x00, 0x02, 0x01, 0x00, 0x50];
        // [2001:db8::1]:443
        let v6 = Target {
            host: TargetHost::Ip("2001:db8::1".parse().unwrap()),
            port: 443,
        };
        let v6_bytes = [
            0x04, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x01, 0xbb,
        ];
        // example.com:8080
        let dn = domain("example.com", 8080);
        let dn_bytes = [
            0x03, 0x0b, b'e', b'x', b'a', b'm', b'p', b'l', b'e', b'.', b'c', b'o', b'm', 0x1f,
            0x90,
        ];
        for (t, bytes) in [
            (v4, &v4_bytes[..]),
            (v6, &v6_bytes[..]),
            (dn, &dn_bytes[..]),
        ] {
            assert_eq!(encoded(&t), bytes, "{t}");
            assert_eq!(Target::decode(bytes), Ok(t));
        }
    }

    #[test]
    fn longest_domain_fits_the_bound() {
        let name = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(63),
        ]
        .join(".");
        assert_eq!(name.len(), 255);
        let t = domain(&name, 1);
        let bytes = encoded(&t);
        assert_eq!(bytes.len(), MAX_ENCODED_LEN);
        assert_eq!(Target::decode(&bytes), Ok(t));
        assert_eq!(
            Domain::new(format!("{name}x")),
            Err(TargetError::DomainTooLong(256))
        );
        assert_eq!(
            Domain::new(format!("{}.com", "a".repeat(64))),
            Err(TargetError::LabelTooLong(64))
        );
        // A trailing dot counts toward the 255 bytes.
        assert_eq!(
            Domain::new(format!("{name}.")),
            Err(TargetError::DomainTooLong(256))
        );
    }

    #[test]
    fn domain_rules() {
        for ok in [
            "a",
            "localhost",
            "example.com.",
            "x-y_z.example",
            "127.0.0.1",
            "A1",
        ] {
            assert!(Domain::new(ok).is_ok(), "{ok}");
        }
        assert_eq!(Domain::new(""), Err(TargetError::EmptyDomain));
        assert_eq!(Domain::new("."), Err(TargetError::EmptyLabel));
        assert_eq!(Domain::new(".a"), Err(TargetError::EmptyLabel));
        assert_eq!(Domain::new("a..b"), Err(TargetError::EmptyLabel));
        assert_eq!(Domain::new("a.b.."), Err(TargetError::EmptyLabel));
        for (bad, byte, at) in [
            ("host:80", b':', 4),
            ("a b", b' ', 1),
            ("a/b", b'/', 1),
            ("u@h", b'@', 1),
            ("::1", b':', 0),
            ("a\0", 0, 1),
            ("\r\n", b'\r', 0),
        ] {
            assert_eq!(
                Domain::new(bad),
                Err(TargetError::DomainByte { byte, at }),
                "{bad:?}"
            );
        }
        assert_eq!(
            Domain::new("é"),
            Err(TargetError::DomainByte { byte: 0xc3, at: 0 })
        );
    }

    #[test]
    fn malformed() {
        let cases: &[(&[u8], TargetError)] = &[
            (&[], TargetError::Truncated { len: 0, need: 1 }),
            (&[0x02, 1, 2, 3], TargetError::AddressType(0x02)),
            (&[0x00], TargetError::AddressType(0x00)),
            (&[0x05], TargetError::AddressType(0x05)),
            (
                &[0x01, 1, 2, 3, 4, 0],
                TargetError::Truncated { len: 6, need: 7 },
            ),
            (&[0x01, 1, 2, 3, 4, 0, 80, 9], TargetError::TrailingBytes(1)),
            (&[0x04, 0], TargetError::Truncated { len: 2, need: 19 }),
            (&[0x03], TargetError::Truncated { len: 1, need: 2 }),
            (&[0x03, 0, 0, 80], TargetError::EmptyDomain),
            (&[0x03, 2, b'a'], TargetError::Truncated { len: 3, need: 6 }),
            (
                &[0x03, 2, b'a', b'%', 0, 80],
                TargetError::DomainByte { byte: b'%', at: 1 },
            ),
        ];
        for (bytes, err) in cases {
            assert_eq!(Target::decode(bytes).as_ref(), Err(err), "{bytes:?}");
            // Every error names what was wrong.
            assert!(!err.to_string().is_empty());
        }
    }

    #[test]
    fn display() {
        assert_eq!(domain("example.com", 80).to_string(), "example.com:80");
        let v6 = Target {
            host: TargetHost::Ip("::1".parse().unwrap()),
            port: 22,
        };
        assert_eq!(v6.to_string(), "[::1]:22");
    }

    fn arb_target() -> impl Strategy<Value = Target> {
        let host = prop_oneof![
            any::<[u8; 4]>().prop_map(|a| TargetHost::Ip(Ipv4Addr::from(a).into())),
            any::<[u8; 16]>().prop_map(|a| TargetHost::Ip(Ipv6Addr::from(a).into())),
            proptest::collection::vec("[a-zA-Z0-9_-]{1,63}", 1..5)
                .prop_filter_map("at most 255 bytes", |labels| Domain::new(labels.join("."))
                    .ok()
                    .map(TargetHost::Domain)),
        ];
        (host, any::<u16>()).prop_map(|(host, port)| Target { host, port })
    }

    proptest! {
        #[test]
        fn round_trips(t in arb_target()) {
            let bytes = encoded(&t);
            prop_assert!(bytes.len() <= MAX_ENCODED_LEN);
            prop_assert_eq!(Target::decode(&bytes), Ok(t));
        }

        #[test]
        fn decode_never_panics_and_is_canonical(
            bytes in proptest::collection::vec(any::<u8>(), 0..300)
        ) {
            if let Ok(t) = Target::decode(&bytes) {
                prop_assert_eq!(encoded(&t), bytes);
            }
        }

        #[test]
        fn decode_of_plausible_domains_is_canonical(
            len in 1u8..=20,
            body in proptest::collection::vec(
                prop_oneof![Just(b'.'), Just(b'a'), Just(b'-'), Just(b':'), any::<u8>()], 0..22),
            port in any::<u16>()
        ) {
            let mut bytes = vec![ATYP_DOMAIN, len];
            bytes.extend_from_slice(&body);
            bytes.extend_from_slice(&port.to_be_bytes());
            if let Ok(t) = Target::decode(&bytes) {
                prop_assert_eq!(encoded(&t), bytes);
            }
        }
    }
}
