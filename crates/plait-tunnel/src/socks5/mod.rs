//! The server side of SOCKS5 (RFC 1928) with username/password authentication
//! (RFC 1929), sans-IO: bytes in, bytes out, no sockets, no clocks, no DNS.
//!
//! A connection accepted on the SOCKS5 listener goes through:
//! 1. Greeting and method selection (RFC 1928 §3): `VER=5 NMETHODS METHODS...`, answered
//!    `VER=5 METHOD` with 0x00 (no authentication), 0x02 (username/password) or 0xFF (no
//!    acceptable methods, then close). See [`auth`].
//! 2. For 0x02, the sub-negotiation (RFC 1929 §2): `VER=1 ULEN UNAME PLEN PASSWD`,
//!    answered `VER=1 STATUS`, 0x00 for success; on failure the server closes.
//! 3. The request (RFC 1928 §4): `VER=5 CMD RSV ATYP DST.ADDR DST.PORT`. Only CONNECT
//!    (0x01) is supported; BIND (0x02) and UDP ASSOCIATE (0x03) are answered with reply
//!    0x07. Addresses (RFC 1928 §5) are IPv4, a domain name (not resolved here) or IPv6:
//!    see [`target`]. RSV is not checked: it carries no meaning.
//! 4. The reply (RFC 1928 §6), once the caller has tried to connect: [`reply`] with a
//!    [`ReplyCode`] and the bound address. On any code but 0x00 the server closes the
//!    connection (RFC 1928 §6).
//!
//! [`Handshake`] runs steps 1–3 and hands over a [`Target`]; the caller connects (here:
//! opens an engine stream whose open request is [`Target::encode`]) and sends the reply.
//!
//! Invariants:
//! - [`Handshake::feed`] never panics and never blocks, whatever the bytes and however
//!   they are split: fed one byte at a time or all at once it consumes the same bytes and
//!   produces the same output, target or error.
//! - It buffers at most one message, never more than [`MAX_BUFFERED`] bytes (the largest
//!   message, an RFC 1929 request, is 513), in a fixed array; pending output never exceeds
//!   [`MAX_OUTPUT`] bytes.
//! - It never consumes a byte past the end of the request: a client's data pipelined
//!   after CONNECT stays in the caller's input, to be forwarded.
//! - Every malformed message is a [`Socks5Error`] naming what was wrong; when the protocol
//!   has an answer for it (0xFF method, authentication failure, a reply code), that answer
//!   is already in the output when `feed` returns the error.

mod auth;
mod handshake;
mod target;

#[cfg(test)]
mod tests;

use std::io;
use std::net::{IpAddr, SocketAddr};

use thiserror::Error;

pub use auth::{
    AUTH_FAILURE, AUTH_SUCCESS, AUTH_VERSION, AuthPolicy, Credential, CredentialError,
    MAX_CREDENTIAL_LEN, METHOD_NO_AUTH, METHOD_NONE_ACCEPTABLE, METHOD_USERNAME_PASSWORD,
};
pub use handshake::{Handshake, Progress, Status};
pub use target::{
    ATYP_DOMAIN, ATYP_IPV4, ATYP_IPV6, Domain, MAX_DOMAIN_LEN, MAX_ENCODED_LEN, MAX_LABEL_LEN,
    OPEN_REQUEST_LIMIT, Target, TargetError, TargetHost,
};

/// SOCKS protocol version (RFC 1928 §3, §4, §6).
pub const VERSION: u8 = 0x05;
/// CMD CONNECT (RFC 1928 §4).
pub const CMD_CONNECT: u8 = 0x01;
/// CMD BIND (RFC 1928 §4): not supported.
pub const CMD_BIND: u8 = 0x02;
/// CMD UDP ASSOCIATE (RFC 1928 §4): not supported.
pub const CMD_UDP_ASSOCIATE: u8 = 0x03;

/// Largest greeting: VER, NMETHODS, 255 methods.
pub const MAX_GREETING_LEN: usize = 2 + 255;
/// Largest RFC 1929 request: VER, ULEN, 255-byte UNAME, PLEN, 255-byte PASSWD.
pub const MAX_AUTH_LEN: usize = 1 + 1 + MAX_CREDENTIAL_LEN + 1 + MAX_CREDENTIAL_LEN;
/// Largest request: VER, CMD, RSV, then the largest address field.
pub const MAX_REQUEST_LEN: usize = 3 + MAX_ENCODED_LEN;
/// The most a [`Handshake`] ever buffers.
pub const MAX_BUFFERED: usize = 515;
/// Longest reply: IPv6 bound address.
pub const MAX_REPLY_LEN: usize = 4 + 16 + 2;
/// The most output a [`Handshake`] holds: a method selection, an authentication status and
/// a failure reply (which carries the unspecified IPv4 address, 10 bytes).
pub const MAX_OUTPUT: usize = 2 + 2 + 10;

const _: () = assert!(MAX_AUTH_LEN == 513);
const _: () = assert!(MAX_GREETING_LEN <= MAX_BUFFERED);
const _: () = assert!(MAX_AUTH_LEN <= MAX_BUFFERED);
const _: () = assert!(MAX_REQUEST_LEN <= MAX_BUFFERED);

/// REP, the outcome in a reply (RFC 1928 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReplyCode {
    /// 0x00 succeeded.
    Succeeded = 0x00,
    /// 0x01 general SOCKS server failure.
    GeneralFailure = 0x01,
    /// 0x02 connection not allowed by ruleset.
    NotAllowed = 0x02,
    /// 0x03 network unreachable.
    NetworkUnreachable = 0x03,
    /// 0x04 host unreachable.
    HostUnreachable = 0x04,
    /// 0x05 connection refused.
    ConnectionRefused = 0x05,
    /// 0x06 TTL expired.
    TtlExpired = 0x06,
    /// 0x07 command not supported.
    CommandNotSupported = 0x07,
    /// 0x08 address type not supported.
    AddressTypeNotSupported = 0x08,
}

impl ReplyCode {
    /// The REP byte.
    pub fn byte(self) -> u8 {
        self as u8
    }

    /// The code for a failed connect: refused, unreachable network or host (a timeout
    /// counts as an unreachable host), anything else a general failure.
    pub fn for_connect_error(err: &io::Error) -> ReplyCode {
        match err.kind() {
            io::ErrorKind::ConnectionRefused => ReplyCode::ConnectionRefused,
            io::ErrorKind::NetworkUnreachable => ReplyCode::NetworkUnreachable,
            io::ErrorKind::HostUnreachable | io::ErrorKind::TimedOut => ReplyCode::HostUnreachable,
            _ => ReplyCode::GeneralFailure,
        }
    }
}

/// Appends a reply (RFC 1928 §6): `VER=5 REP RSV=0 ATYP BND.ADDR BND.PORT`, the bound
/// address as IPv4 (10 bytes) or IPv6 (22 bytes). For a failure, `bound` is usually
/// `0.0.0.0:0`.
pub fn encode_reply(code: ReplyCode, bound: SocketAddr, out: &mut Vec<u8>) {
    out.extend_from_slice(&[VERSION, code.byte(), 0x00]);
    match bound.ip() {
        IpAddr::V4(a) => {
            out.push(ATYP_IPV4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(ATYP_IPV6);
            out.extend_from_slice(&a.octets());
        }
    }
    out.extend_from_slice(&bound.port().to_be_bytes());
}

/// A reply (RFC 1928 §6), as [`encode_reply`] writes it.
pub fn reply(code: ReplyCode, bound: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_REPLY_LEN);
    encode_reply(code, bound, &mut out);
    out
}

/// Why a SOCKS5 handshake failed. The connection is to be closed after the output the
/// handshake holds (if any) is written.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Socks5Error {
    /// The greeting's VER is not 5 (RFC 1928 §3). No answer: the client does not speak
    /// SOCKS5.
    #[error("greeting: version {0:#04x}, expected 0x05")]
    GreetingVersion(u8),
    /// NMETHODS is zero (RFC 1928 §3 gives it 1 to 255).
    #[error("greeting: zero authentication methods offered")]
    NoMethods,
    /// The greeting does not offer the method the policy requires; answered with 0xFF.
    #[error("greeting: method {wanted:#04x} not offered (offered {offered:02x?})")]
    NoAcceptableMethod {
        /// The method the policy requires.
        wanted: u8,
        /// The methods the client offered.
        offered: Vec<u8>,
    },
    /// The sub-negotiation's VER is not 1 (RFC 1929 §2). No answer.
    #[error("username/password: version {0:#04x}, expected 0x01")]
    AuthVersion(u8),
    /// Wrong username or password (deliberately not saying which); answered with STATUS
    /// 0x01.
    #[error("username/password authentication failed")]
    AuthFailed,
    /// The request's VER is not 5 (RFC 1928 §4). No answer.
    #[error("request: version {0:#04x}, expected 0x05")]
    RequestVersion(u8),
    /// BIND, UDP ASSOCIATE or an unknown command; answered with reply 0x07.
    #[error("request: command {0:#04x} not supported (only CONNECT, 0x01)")]
    CommandNotSupported(u8),
    /// A bad address field; answered with 0x08 for an unknown ATYP, else 0x01.
    #[error("request: {0}")]
    Address(#[from] TargetError),
}

impl Socks5Error {
    /// The reply code (RFC 1928 §6) the server sends for this error, for errors in the
    /// request; `None` for errors in the greeting and sub-negotiation, which have their own
    /// answers or none.
    pub fn reply_code(&self) -> Option<ReplyCode> {
        match self {
            Socks5Error::CommandNotSupported(_) => Some(ReplyCode::CommandNotSupported),
            Socks5Error::Address(TargetError::AddressType(_)) => {
                Some(ReplyCode::AddressTypeNotSupported)
            }
            Socks5Error::Address(_) => Some(ReplyCode::GeneralFailure),
            Socks5Error::GreetingVersion(_)
            | Socks5Error::NoMethods
            | Socks5Error::NoAcceptableMethod { .. }
            | Socks5Error::AuthVersion(_)
            | Socks5Error::AuthFailed
            | Socks5Error::RequestVersion(_) => None,
        }
    }
}
