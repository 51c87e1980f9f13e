//! Plain representations of the simple frames to encode: [`DataRepr`], [`ProbeRepr`],
//! [`ProbeAckRepr`], [`CloseRepr`], [`ExtensionRepr`] and [`encode_padding`] (the ACK's
//! lives in `ack_repr.rs`).
//!
//! Invariants: encoding never allocates and never panics; every `encode` either writes the
//! whole frame (exactly `encoded_len()` bytes) or returns an [`EncodeError`] and leaves the
//! writer's length unchanged; it never writes what the decoder would reject
//! (docs/protocol.md#frames).

use super::error::EncodeError;
use super::frame_type;
use super::varint::varint_len;
use super::writer::Writer;
use super::{MAX_CLOSE_REASON, MAX_PREV_DELTA};
use crate::ids::{GlobalSeq, MAX_PATHS, PathId};

/// A varint length field's value for a byte string.
fn len_u64(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}

/// Writes a PADDING frame that fills exactly `len` bytes (type 0x00 then `len - 1` zeros;
/// nothing for `len == 0`). It extends to the end of the datagram, so it must be the last
/// frame written (docs/protocol.md#padding-frame).
pub fn encode_padding(w: &mut Writer<'_>, len: usize) -> Result<(), EncodeError> {
    if len == 0 {
        return Ok(());
    }
    w.atomic(len, |w| {
        w.put_u8(frame_type::PADDING)?;
        w.put_zeros(len - 1)
    })
}

/// A DATA frame to write (docs/protocol.md#data-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRepr<'a> {
    /// Global sequence number of the inner packet; truncated to 32 bits when encoded.
    pub global_seq: GlobalSeq,
    /// `global_seq` minus that of the previous DATA sent on the same path; 0 if none.
    /// At most 2^31.
    pub prev_delta: u64,
    /// The inner packet.
    pub payload: &'a [u8],
    /// Type 0x01 (payload runs to the end of the datagram; must be the last frame) if
    /// true, else type 0x02 (explicit length).
    pub to_end: bool,
}

impl DataRepr<'_> {
    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        let length_field = if self.to_end {
            0
        } else {
            varint_len(len_u64(self.payload.len()))
        };
        1 + 4 + varint_len(self.prev_delta) + length_field + self.payload.len()
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if self.prev_delta > MAX_PREV_DELTA {
            return Err(EncodeError::ValueTooLarge {
                field: "DATA prev_delta",
                value: self.prev_delta,
                max: MAX_PREV_DELTA,
            });
        }
        w.atomic(self.encoded_len(), |w| {
            let ty = if self.to_end {
                frame_type::DATA_TO_END
            } else {
                frame_type::DATA_LEN
            };
            w.put_u8(ty)?;
            w.put_u32(self.global_seq as u32)?;
            w.put_varint("DATA prev_delta", self.prev_delta)?;
            if !self.to_end {
                w.put_varint("DATA length", len_u64(self.payload.len()))?;
            }
            w.put_bytes(self.payload)
        })
    }
}

/// A PROBE frame to write (docs/protocol.md#probe-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProbeRepr {
    /// Identifies the probe; echoed in the PROBE_ACK.
    pub probe_id: u32,
}

impl ProbeRepr {
    /// Bytes the frame takes.
    pub const fn encoded_len(&self) -> usize {
        1 + 4
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.atomic(self.encoded_len(), |w| {
            w.put_u8(frame_type::PROBE)?;
            w.put_u32(self.probe_id)
        })
    }
}

/// A PROBE_ACK frame to write (docs/protocol.md#probe-ack-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProbeAckRepr {
    /// The probe answered.
    pub probe_id: u32,
    /// The path the probe arrived on.
    pub path: PathId,
    /// Receiver clock (µs, wrapping) when the probe arrived.
    pub recv_ts_us: u32,
}

impl ProbeAckRepr {
    /// Bytes the frame takes.
    pub const fn encoded_len(&self) -> usize {
        1 + 4 + 1 + 4
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if usize::from(self.path.0) >= MAX_PATHS {
            return Err(EncodeError::BadPathId(self.path.0));
        }
        w.atomic(self.encoded_len(), |w| {
            w.put_u8(frame_type::PROBE_ACK)?;
            w.put_u32(self.probe_id)?;
            w.put_u8(self.path.0)?;
            w.put_u32(self.recv_ts_us)
        })
    }
}

/// A CLOSE frame to write (docs/protocol.md#close-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CloseRepr<'a> {
    /// Why the session closes (0: no error).
    pub error_code: u64,
    /// Human-readable reason, at most [`MAX_CLOSE_REASON`] bytes.
    pub reason: &'a [u8],
}

impl CloseRepr<'_> {
    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        1 + varint_len(self.error_code) + varint_len(len_u64(self.reason.len())) + self.reason.len()
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if self.reason.len() > MAX_CLOSE_REASON {
            return Err(EncodeError::ValueTooLarge {
                field: "CLOSE reason length",
                value: len_u64(self.reason.len()),
                max: MAX_CLOSE_REASON as u64,
            });
        }
        w.atomic(self.encoded_len(), |w| {
            w.put_u8(frame_type::CLOSE)?;
            w.put_varint("CLOSE error_code", self.error_code)?;
            w.put_varint("CLOSE reason length", len_u64(self.reason.len()))?;
            w.put_bytes(self.reason)
        })
    }
}

/// An extension frame to write (docs/protocol.md#extension-frames).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtensionRepr<'a> {
    /// In [`frame_type::EXTENSION_FIRST`]..=[`frame_type::EXTENSION_LAST`].
    pub frame_type: u8,
    /// The body, opaque to this codec.
    pub body: &'a [u8],
}

impl ExtensionRepr<'_> {
    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        1 + varint_len(len_u64(self.body.len())) + self.body.len()
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if !frame_type::is_extension(self.frame_type) {
            return Err(EncodeError::InvalidFrameType(self.frame_type));
        }
        w.atomic(self.encoded_len(), |w| {
            w.put_u8(self.frame_type)?;
            w.put_varint("extension body length", len_u64(self.body.len()))?;
            w.put_bytes(self.body)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_fills_exactly() {
        for len in [0usize, 1, 2, 100] {
            let mut buf = [0xffu8; 100];
            let mut w = Writer::new(&mut buf);
            encode_padding(&mut w, len).unwrap();
            assert_eq!(w.len(), len);
            assert!(w.written().iter().all(|&b| b == 0));
        }
        let mut buf = [0u8; 3];
        let mut w = Writer::new(&mut buf);
        let err = encode_padding(&mut w, 4);
        assert_eq!(
            err,
            Err(EncodeError::BufferTooSmall {
                needed: 4,
                available: 3
            })
        );
        assert!(w.is_empty());
    }

    #[test]
    fn invalid_reprs_are_refused_without_writing() {
        let mut buf = [0u8; 2048];
        let mut w = Writer::new(&mut buf);
        let data = DataRepr {
            global_seq: 0,
            prev_delta: MAX_PREV_DELTA + 1,
            payload: b"",
            to_end: true,
        };
        assert!(matches!(
            data.encode(&mut w),
            Err(EncodeError::ValueTooLarge { .. })
        ));
        let reason = [b'x'; MAX_CLOSE_REASON + 1];
        let close = CloseRepr {
            error_code: 1,
            reason: &reason,
        };
        assert!(matches!(
            close.encode(&mut w),
            Err(EncodeError::ValueTooLarge { .. })
        ));
        let close = CloseRepr {
            error_code: u64::MAX,
            reason: b"",
        };
        assert!(matches!(
            close.encode(&mut w),
            Err(EncodeError::ValueTooLarge { .. })
        ));
        for t in [0x00, 0x06, 0x0f, 0x40, 0xff] {
            let ext = ExtensionRepr {
                frame_type: t,
                body: b"",
            };
            assert_eq!(ext.encode(&mut w), Err(EncodeError::InvalidFrameType(t)));
        }
        let pa = ProbeAckRepr {
            probe_id: 0,
            path: PathId(16),
            recv_ts_us: 0,
        };
        assert_eq!(pa.encode(&mut w), Err(EncodeError::BadPathId(16)));
        let data = DataRepr {
            global_seq: 0,
            prev_delta: 0,
            payload: &[0; 100],
            to_end: false,
        };
        let mut small = [0u8; 100];
        let mut w2 = Writer::new(&mut small);
        let err = data.encode(&mut w2);
        assert_eq!(
            err,
            Err(EncodeError::BufferTooSmall {
                needed: 108,
                available: 100
            })
        );
        assert!(w.is_empty() && w2.is_empty());
    }

    #[test]
    fn data_overhead_matches_the_encoding() {
        let data = DataRepr {
            global_seq: 1 << 40,
            prev_delta: 63,
            payload: b"",
            to_end: true,
        };
        assert_eq!(
            crate::wire::HEADER_LEN + data.encoded_len(),
            crate::wire::DATA_OVERHEAD
        );
        assert_eq!(crate::wire::DATA_OVERHEAD, 15);
    }
}
