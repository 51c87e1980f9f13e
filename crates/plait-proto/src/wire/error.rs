//! The wire codec's error types: [`DecodeError`] for bytes from the network, [`EncodeError`]
//! for representations the caller asked to write.
//!
//! Invariants: every malformed input maps to exactly one `DecodeError` (the decoder never
//! panics, see docs/protocol.md#errors); every `EncodeError` leaves the [`Writer`] untouched.
//! Both are `Copy` and carry no heap data, so returning them never allocates.
//!
//! [`Writer`]: super::Writer

use thiserror::Error;

/// Why a datagram was rejected (docs/protocol.md#errors). A datagram that fails to decode
/// anywhere is dropped whole: the session acts on none of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum DecodeError {
    /// A field or a frame body runs past the end of the datagram.
    #[error("datagram truncated: a field runs past its end")]
    Truncated,
    /// The header's version nibble is not [`VERSION`](super::VERSION).
    #[error("unsupported protocol version {0} (this build speaks version 1)")]
    UnsupportedVersion(u8),
    /// A path id (header, ACK or PROBE_ACK) is not below [`MAX_PATHS`](crate::ids::MAX_PATHS).
    #[error("path id {0} out of range (at most 16 paths)")]
    BadPathId(u8),
    /// The datagram has a header but no frame after it.
    #[error("datagram carries no frame")]
    Empty,
    /// A frame type byte that is neither defined nor in the extension range 0x10..=0x3F.
    #[error("unknown frame type {0:#04x}")]
    UnknownFrameType(u8),
    /// An ACK frame's ranges reach 2^31 or more below its largest acknowledged number.
    #[error("ACK ranges span 2^31 or more below the largest acknowledged")]
    BadAckRange,
    /// A field has a value the specification forbids; the text names which.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
}

/// Why a representation could not be written. On any error the writer is left unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum EncodeError {
    /// The buffer has fewer bytes left than the encoding needs.
    #[error("buffer too small: {needed} bytes needed, {available} available")]
    BufferTooSmall {
        /// Bytes the encoding needs.
        needed: usize,
        /// Bytes left in the buffer.
        available: usize,
    },
    /// The ACK ranges are empty, not highest first, overlapping or adjacent, the first does
    /// not end at `largest`, or they reach 2^31 or more below `largest`.
    #[error(
        "ACK ranges must be highest first, disjoint, non-adjacent, start at largest and span less than 2^31"
    )]
    InvalidAckRanges,
    /// An ACK timestamp names a sequence number above `largest` or 2^31 or more below it.
    #[error("ACK timestamps must name sequence numbers at most largest and within 2^31 below it")]
    InvalidAckTimestamps,
    /// A path id is not below [`MAX_PATHS`](crate::ids::MAX_PATHS).
    #[error("path id {0} out of range (at most 16 paths)")]
    BadPathId(u8),
    /// An extension frame type outside 0x10..=0x3F.
    #[error("frame type {0:#04x} is not an extension frame type (0x10..=0x3f)")]
    InvalidFrameType(u8),
    /// A field's value exceeds what the wire format allows.
    #[error("{field} is {value}, above its maximum {max}")]
    ValueTooLarge {
        /// Which field.
        field: &'static str,
        /// The value given.
        value: u64,
        /// The largest value allowed.
        max: u64,
    },
}
