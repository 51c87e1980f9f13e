//! The stream frames (docs/protocol.md#stream-frames): STREAM, RESET_STREAM, MAX_DATA,
//! MAX_STREAM_DATA and MAX_STREAMS, their decoded views and the representations to encode.
//!
//! Invariants: as for every frame (see `wire/mod.rs`): decoding never panics, allocates or
//! copies; encoding writes the whole frame or nothing and never writes what the decoder
//! rejects. A decoded STREAM frame's `offset + data.len()` is at most [`MAX_STREAM_OFFSET`].

use super::error::{DecodeError, EncodeError};
use super::frame_type;
use super::reader::Reader;
use super::varint::{VARINT_MAX, varint_len};
use super::writer::Writer;

/// Largest stream offset (end of data) and flow-control limit: 2^62 − 1, the varint range.
pub const MAX_STREAM_OFFSET: u64 = VARINT_MAX;

/// STREAM flag: the frame's data ends the stream (its end is the final size).
pub const STREAM_FIN: u8 = 0x01;
/// STREAM flag: a `length` varint precedes the data (else it runs to the datagram's end).
pub const STREAM_LEN: u8 = 0x02;

/// A STREAM frame (docs/protocol.md#stream-frame), borrowing the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamFrame<'a> {
    /// The stream.
    pub stream_id: u64,
    /// Offset of `data`'s first byte in the stream.
    pub offset: u64,
    /// The stream ends with this frame's data.
    pub fin: bool,
    /// The bytes (may be empty, e.g. a bare FIN).
    pub data: &'a [u8],
}

/// A RESET_STREAM frame (docs/protocol.md#reset-stream-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResetStreamFrame {
    /// The stream, aborted in both directions.
    pub stream_id: u64,
    /// The application's reason (opaque to the engine).
    pub error_code: u64,
    /// How many bytes the sender had sent on it: its final size.
    pub final_size: u64,
}

/// A MAX_STREAM_DATA frame (docs/protocol.md#max-stream-data-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaxStreamDataFrame {
    /// The stream.
    pub stream_id: u64,
    /// The peer may send this stream's bytes up to (not including) this offset.
    pub maximum: u64,
}

pub(super) fn decode_stream<'a>(r: &mut Reader<'a>) -> Result<StreamFrame<'a>, DecodeError> {
    let stream_id = r.varint()?;
    let offset = r.varint()?;
    let flags = r.u8()?;
    if flags & !(STREAM_FIN | STREAM_LEN) != 0 {
        return Err(DecodeError::Malformed("STREAM flags has reserved bits set"));
    }
    let data = if flags & STREAM_LEN != 0 {
        let len = r.varint()?;
        r.bytes(len)?
    } else {
        r.rest()
    };
    if offset.saturating_add(data.len() as u64) > MAX_STREAM_OFFSET {
        return Err(DecodeError::Malformed("STREAM data ends beyond 2^62 - 1"));
    }
    Ok(StreamFrame {
        stream_id,
        offset,
        fin: flags & STREAM_FIN != 0,
        data,
    })
}

pub(super) fn decode_reset_stream(r: &mut Reader<'_>) -> Result<ResetStreamFrame, DecodeError> {
    Ok(ResetStreamFrame {
        stream_id: r.varint()?,
        error_code: r.varint()?,
        final_size: r.varint()?,
    })
}

pub(super) fn decode_max_stream_data(
    r: &mut Reader<'_>,
) -> Result<MaxStreamDataFrame, DecodeError> {
    Ok(MaxStreamDataFrame {
        stream_id: r.varint()?,
        maximum: r.varint()?,
    })
}

/// A STREAM frame to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRepr<'a> {
    /// The stream.
    pub stream_id: u64,
    /// Offset of `data`'s first byte.
    pub offset: u64,
    /// The stream ends with this data.
    pub fin: bool,
    /// The bytes.
    pub data: &'a [u8],
    /// The data runs to the end of the datagram (no length field; must be the last frame).
    pub to_end: bool,
}

impl StreamRepr<'_> {
    /// Bytes the frame takes with `data_len` bytes of data: what a sender sizes a chunk by.
    pub fn overhead(stream_id: u64, offset: u64, data_len: usize, to_end: bool) -> usize {
        let length = if to_end {
            0
        } else {
            varint_len(data_len as u64)
        };
        1 + varint_len(stream_id) + varint_len(offset) + 1 + length
    }

    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        Self::overhead(self.stream_id, self.offset, self.data.len(), self.to_end) + self.data.len()
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let end = self.offset.saturating_add(self.data.len() as u64);
        if end > MAX_STREAM_OFFSET {
            return Err(EncodeError::ValueTooLarge {
                field: "STREAM offset + length",
                value: end,
                max: MAX_STREAM_OFFSET,
            });
        }
        w.atomic(self.encoded_len(), |w| {
            w.put_u8(frame_type::STREAM)?;
            w.put_varint("STREAM stream_id", self.stream_id)?;
            w.put_varint("STREAM offset", self.offset)?;
            let mut flags = if self.fin { STREAM_FIN } else { 0 };
            if !self.to_end {
                flags |= STREAM_LEN;
            }
            w.put_u8(flags)?;
            if !self.to_end {
                w.put_varint("STREAM length", self.data.len() as u64)?;
            }
            w.put_bytes(self.data)
        })
    }
}

/// The small stream control frames to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamControlRepr {
    /// RESET_STREAM.
    ResetStream(ResetStreamFrame),
    /// MAX_DATA: the session-wide limit on stream bytes the peer may send.
    MaxData(u64),
    /// MAX_STREAM_DATA.
    MaxStreamData(MaxStreamDataFrame),
    /// MAX_STREAMS: how many streams the peer may open in all (cumulative).
    MaxStreams(u64),
}

impl StreamControlRepr {
    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        1 + match self {
            StreamControlRepr::ResetStream(f) => {
                varint_len(f.stream_id) + varint_len(f.error_code) + varint_len(f.final_size)
            }
            StreamControlRepr::MaxData(m) | StreamControlRepr::MaxStreams(m) => varint_len(*m),
            StreamControlRepr::MaxStreamData(f) => varint_len(f.stream_id) + varint_len(f.maximum),
        }
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.atomic(self.encoded_len(), |w| match self {
            StreamControlRepr::ResetStream(f) => {
                w.put_u8(frame_type::RESET_STREAM)?;
                w.put_varint("RESET_STREAM stream_id", f.stream_id)?;
                w.put_varint("RESET_STREAM error_code", f.error_code)?;
                w.put_varint("RESET_STREAM final_size", f.final_size)
            }
            StreamControlRepr::MaxData(m) => {
                w.put_u8(frame_type::MAX_DATA)?;
                w.put_varint("MAX_DATA maximum", *m)
            }
            StreamControlRepr::MaxStreamData(f) => {
                w.put_u8(frame_type::MAX_STREAM_DATA)?;
                w.put_varint("MAX_STREAM_DATA stream_id", f.stream_id)?;
                w.put_varint("MAX_STREAM_DATA maximum", f.maximum)
            }
            StreamControlRepr::MaxStreams(m) => {
                w.put_u8(frame_type::MAX_STREAMS)?;
                w.put_varint("MAX_STREAMS maximum", *m)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Frame, frames, validate};

    fn encoded(f: impl FnOnce(&mut Writer<'_>) -> Result<(), EncodeError>) -> Vec<u8> {
        let mut buf = [0u8; 256];
        let mut w = Writer::new(&mut buf);
        f(&mut w).unwrap();
        w.written().to_vec()
    }

    #[test]
    fn stream_test_vectors() {
        let with_len = StreamRepr {
            stream_id: 4,
            offset: 300,
            fin: true,
            data: b"ab",
            to_end: false,
        };
        let bytes = encoded(|w| with_len.encode(w));
        assert_eq!(bytes, [0x07, 0x04, 0x41, 0x2c, 0x03, 0x02, b'a', b'b']);
        assert_eq!(bytes.len(), with_len.encoded_len());
        let want = StreamFrame {
            stream_id: 4,
            offset: 300,
            fin: true,
            data: b"ab",
        };
        assert_eq!(frames(&bytes).next(), Some(Ok(Frame::Stream(want))));

        let to_end = StreamRepr {
            fin: false,
            to_end: true,
            ..with_len
        };
        let bytes = encoded(|w| to_end.encode(w));
        assert_eq!(bytes, [0x07, 0x04, 0x41, 0x2c, 0x00, b'a', b'b']);
        assert_eq!(
            frames(&bytes).next(),
            Some(Ok(Frame::Stream(StreamFrame { fin: false, ..want })))
        );
    }

    #[test]
    fn control_test_vectors() {
        let cases: [(StreamControlRepr, &[u8], Frame<'_>); 4] = [
            (
                StreamControlRepr::ResetStream(ResetStreamFrame {
                    stream_id: 1,
                    error_code: 2,
                    final_size: 300,
                }),
                &[0x08, 1, 2, 0x41, 0x2c],
                Frame::ResetStream(ResetStreamFrame {
                    stream_id: 1,
                    error_code: 2,
                    final_size: 300,
                }),
            ),
            (
                StreamControlRepr::MaxData(70_000),
                &[0x09, 0x80, 0x01, 0x11, 0x70],
                Frame::MaxData(70_000),
            ),
            (
                StreamControlRepr::MaxStreamData(MaxStreamDataFrame {
                    stream_id: 6,
                    maximum: 63,
                }),
                &[0x0a, 6, 63],
                Frame::MaxStreamData(MaxStreamDataFrame {
                    stream_id: 6,
                    maximum: 63,
                }),
            ),
            (
                StreamControlRepr::MaxStreams(100),
                &[0x0b, 0x40, 100],
                Frame::MaxStreams(100),
            ),
        ];
        for (repr, vector, frame) in cases {
            let bytes = encoded(|w| repr.encode(w));
            assert_eq!(bytes, vector, "{repr:?}");
            assert_eq!(bytes.len(), repr.encoded_len());
            assert_eq!(frames(&bytes).next(), Some(Ok(frame)));
        }
    }

    #[test]
    fn malformed_stream_frames() {
        assert_eq!(
            validate(&[0x07, 0, 0, 0x04]),
            Err(DecodeError::Malformed("STREAM flags has reserved bits set"))
        );
        assert_eq!(
            validate(&[0x07, 0, 0, 0x02, 5, 1]),
            Err(DecodeError::Truncated)
        );
        // Offset 2^62 - 1 with one byte of data ends beyond the limit.
        let over = [
            0x07, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, b'x',
        ];
        assert_eq!(
            validate(&over),
            Err(DecodeError::Malformed("STREAM data ends beyond 2^62 - 1"))
        );
        let too_far = StreamRepr {
            stream_id: 0,
            offset: MAX_STREAM_OFFSET,
            fin: false,
            data: b"x",
            to_end: true,
        };
        let mut buf = [0u8; 32];
        let mut w = Writer::new(&mut buf);
        assert!(matches!(
            too_far.encode(&mut w),
            Err(EncodeError::ValueTooLarge { .. })
        ));
        assert_eq!(w.len(), 0);
        assert_eq!(validate(&[0x08, 1, 2]), Err(DecodeError::Truncated));
    }
}
