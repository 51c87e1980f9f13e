//! Identifiers shared by every module: paths and sequence numbers.
//!
//! A [`PathId`] names one link (one UDP path) and is the same at both endpoints: the client
//! numbers its links 0..N and the server learns the number from each datagram's header
//! (docs/protocol.md#header). Per-path state lives in `Vec`s indexed by `PathId`.

use std::fmt;

/// Largest number of paths one session carries (path ids 0..MAX_PATHS).
pub const MAX_PATHS: usize = 16;

/// One path (link) of a session, the same number at both endpoints.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PathId(pub u8);

impl PathId {
    /// The index of this path in per-path `Vec`s.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "path{}", self.0)
    }
}

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Global sequence number of an inner packet: the sender numbers inner packets 0, 1, 2, …
/// in the order it accepts them; the receiver releases them in this order.
/// 64 bits in memory, 32 on the wire (docs/protocol.md#sequence-numbers).
pub type GlobalSeq = u64;

/// Per-path sequence number of a datagram (ETOM's path sequence number): every datagram sent
/// on a path takes the next one, so the receiver knows exactly what that path lost.
/// 64 bits in memory, 32 on the wire (docs/protocol.md#sequence-numbers).
pub type PathSeq = u64;

/// Expands a sequence number truncated to 32 bits on the wire to the 64-bit value nearest to
/// `expected` (the next value the receiver expects), as QUIC does for packet numbers
/// (RFC 9000 §A.3). Correct while the true value is within 2^31 of `expected`.
pub fn expand_seq(expected: u64, truncated: u32) -> u64 {
    const WIN: u64 = 1 << 32;
    const HWIN: u64 = WIN / 2;
    let candidate = (expected & !(WIN - 1)) | u64::from(truncated);
    if candidate.saturating_add(HWIN) <= expected && candidate < u64::MAX - WIN {
        candidate + WIN
    } else if candidate > expected.saturating_add(HWIN) && candidate >= WIN {
        candidate - WIN
    } else {
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_near_expected() {
        assert_eq!(expand_seq(0, 0), 0);
        assert_eq!(expand_seq(10, 7), 7);
        assert_eq!(expand_seq(10, 12), 12);
        let e = (1u64 << 32) + 5;
        assert_eq!(expand_seq(e, 3), (1 << 32) + 3);
        assert_eq!(expand_seq(e, u32::MAX), u64::from(u32::MAX));
        assert_eq!(expand_seq(u64::from(u32::MAX) - 2, 4), (1 << 32) + 4);
    }

    proptest::proptest! {
        #[test]
        fn expand_roundtrips_within_half_window(expected in 0u64..(1 << 48), off in -(1i64 << 30)..(1i64 << 30)) {
            let actual = expected.saturating_add_signed(off);
            proptest::prop_assert_eq!(expand_seq(expected, actual as u32), actual);
        }
    }
}
