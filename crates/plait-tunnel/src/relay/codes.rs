//! RESET_STREAM codes of stream mode (docs/tunnel.md#stream-reset-codes): why a relayed
//! connection was aborted, so the other end can say so in its log.

use crate::endpoint::STREAM_REFUSED;

/// The destination is not allowed by the server's `[streams]` allow/deny lists.
pub const DENIED: u64 = 2;
/// The destination refused the connection (TCP RST to the SYN).
pub const CONNECT_REFUSED: u64 = 3;
/// No route to the destination's network or host.
pub const UNREACHABLE: u64 = 4;
/// The destination did not answer within `connect_timeout_s`.
pub const CONNECT_TIMEOUT: u64 = 5;
/// The destination's name did not resolve.
pub const RESOLVE_FAILED: u64 = 6;
/// The TCP connection at the other end was reset or failed.
pub const TCP_RESET: u64 = 7;
/// Nothing moved either way for `idle_timeout_s`.
pub const IDLE_TIMEOUT: u64 = 8;
/// The peer's limit on connections (or the server's per-client one) was reached.
pub const LIMIT: u64 = 9;
/// The open request did not decode as a destination.
pub const BAD_REQUEST: u64 = 10;

/// A reset code in words, for logs.
pub fn describe(code: u64) -> &'static str {
    match code {
        STREAM_REFUSED => "stream mode is off at the other end",
        DENIED => "destination not allowed by the server's policy",
        CONNECT_REFUSED => "connection refused by the destination",
        UNREACHABLE => "destination unreachable",
        CONNECT_TIMEOUT => "destination did not answer in time",
        RESOLVE_FAILED => "destination name did not resolve",
        TCP_RESET => "connection reset at the other end",
        IDLE_TIMEOUT => "idle timeout",
        LIMIT => "too many connections",
        BAD_REQUEST => "malformed open request",
        _ => "unknown reason",
    }
}

/// The code for a failed connect.
pub fn for_connect_error(e: &std::io::Error) -> u64 {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => CONNECT_REFUSED,
        std::io::ErrorKind::NetworkUnreachable | std::io::ErrorKind::HostUnreachable => UNREACHABLE,
        std::io::ErrorKind::TimedOut => CONNECT_TIMEOUT,
        _ => TCP_RESET,
    }
}
