//! Frame decoding: [`frames`] iterates a datagram's payload, [`validate`] checks all of
//! it (docs/protocol.md#frames).
//!
//! Invariants: decoding never panics, never allocates and never copies payload bytes (views
//! borrow the datagram); every frame is fully checked when yielded (an [`AckFrame`] too), so
//! a yielded frame is safe to act on; after the first error the iterator yields nothing
//! more, and [`validate`] finds that same error before the session acts on any frame.

use std::iter::FusedIterator;

use super::ack::AckFrame;
use super::error::DecodeError;
use super::frame::{CloseFrame, DataFrame, Frame, ProbeAckFrame, ProbeFrame};
use super::frame_type;
use super::reader::Reader;
use super::{MAX_CLOSE_REASON, MAX_PREV_DELTA};
use crate::ids::{MAX_PATHS, PathId};

/// Reads a path id byte and checks it.
fn path_id(r: &mut Reader<'_>) -> Result<PathId, DecodeError> {
    let path = r.u8()?;
    if usize::from(path) >= MAX_PATHS {
        return Err(DecodeError::BadPathId(path));
    }
    Ok(PathId(path))
}

/// Decodes the frame at the reader's position.
fn decode_frame<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, DecodeError> {
    let ty = r.u8()?;
    let frame = match ty {
        frame_type::PADDING => {
            r.rest();
            Frame::Padding
        }
        frame_type::DATA_TO_END | frame_type::DATA_LEN => {
            let global_seq = r.u32()?;
            let prev_delta = r.varint()?;
            if prev_delta > MAX_PREV_DELTA {
                return Err(DecodeError::Malformed("DATA prev_delta above 2^31"));
            }
            let payload = if ty == frame_type::DATA_TO_END {
                r.rest()
            } else {
                let len = r.varint()?;
                r.bytes(len)?
            };
            Frame::Data(DataFrame {
                global_seq,
                prev_delta,
                payload,
            })
        }
        frame_type::ACK => Frame::Ack(AckFrame::decode(r)?),
        frame_type::PROBE => Frame::Probe(ProbeFrame { probe_id: r.u32()? }),
        frame_type::PROBE_ACK => {
            let probe_id = r.u32()?;
            let path = path_id(r)?;
            let recv_ts_us = r.u32()?;
            Frame::ProbeAck(ProbeAckFrame {
                probe_id,
                path,
                recv_ts_us,
            })
        }
        frame_type::CLOSE => {
            let error_code = r.varint()?;
            let len = r.varint()?;
            if len > MAX_CLOSE_REASON as u64 {
                return Err(DecodeError::Malformed(
                    "CLOSE reason longer than 1024 bytes",
                ));
            }
            Frame::Close(CloseFrame {
                error_code,
                reason: r.bytes(len)?,
            })
        }
        frame_type::STREAM => Frame::Stream(super::stream::decode_stream(r)?),
        frame_type::RESET_STREAM => Frame::ResetStream(super::stream::decode_reset_stream(r)?),
        frame_type::MAX_DATA => Frame::MaxData(r.varint()?),
        frame_type::MAX_STREAM_DATA => {
            Frame::MaxStreamData(super::stream::decode_max_stream_data(r)?)
        }
        frame_type::MAX_STREAMS => Frame::MaxStreams(r.varint()?),
        t if frame_type::is_extension(t) => {
            let len = r.varint()?;
            Frame::Extension {
                frame_type: t,
                body: r.bytes(len)?,
            }
        }
        t => return Err(DecodeError::UnknownFrameType(t)),
    };
    Ok(frame)
}

/// Iterates the frames of a datagram's payload (after the header), in order. Yields `Err`
/// once and then stops on malformed input.
pub fn frames(payload: &[u8]) -> Frames<'_> {
    Frames {
        r: Reader::new(payload),
        failed: false,
    }
}

/// Checks a whole payload: `Ok(number of frames)` or the first error ([`DecodeError::Empty`]
/// if it holds no frame). The session calls this before acting on any frame, so a malformed
/// datagram has no effect at all.
pub fn validate(payload: &[u8]) -> Result<usize, DecodeError> {
    if payload.is_empty() {
        return Err(DecodeError::Empty);
    }
    frames(payload).try_fold(0, |n, frame| frame.map(|_| n + 1))
}

/// Iterator over the frames of a payload, see [`frames`].
#[derive(Clone, Debug)]
pub struct Frames<'a> {
    r: Reader<'a>,
    failed: bool,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let frame = decode_frame(&mut self.r);
        self.failed = frame.is_err();
        Some(frame)
    }
}

impl FusedIterator for Frames<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        CloseRepr, DataRepr, EncodeError, ExtensionRepr, Header, ProbeAckRepr, ProbeRepr, Writer,
        encode_padding,
    };

    /// Encodes with `f` into a fresh buffer and returns the bytes written.
    fn encoded(f: impl FnOnce(&mut Writer<'_>) -> Result<(), EncodeError>) -> Vec<u8> {
        let mut buf = [0u8; 2048];
        let mut w = Writer::new(&mut buf);
        f(&mut w).unwrap();
        w.written().to_vec()
    }

    /// The only frame of `payload`.
    fn only_frame(payload: &[u8]) -> Frame<'_> {
        assert_eq!(validate(payload), Ok(1));
        frames(payload).next().unwrap().unwrap()
    }

    #[test]
    fn data_datagram_test_vector() {
        let header = Header {
            path: PathId(1),
            path_seq: 5,
            timestamp_us: 6,
        };
        let data = DataRepr {
            global_seq: 0x1_0000_0007,
            prev_delta: 3,
            payload: b"hi",
            to_end: true,
        };
        let bytes = encoded(|w| {
            header.write_to(w)?;
            data.encode(w)
        });
        #[rustfmt::skip]
        let vector = [
            0x21, 0, 0, 0, 5, 0, 0, 0, 6,                               // header
            0x01, 0x00, 0x00, 0x00, 0x07, 0x03, b'h', b'i',             // DATA to end
        ];
        assert_eq!(bytes, vector);
        assert_eq!(bytes.len(), crate::wire::DATA_OVERHEAD + 2);
        let (h, payload) = Header::decode(&vector).unwrap();
        assert_eq!(h, header);
        let want = DataFrame {
            global_seq: 7,
            prev_delta: 3,
            payload: b"hi",
        };
        assert_eq!(only_frame(payload), Frame::Data(want));
    }

    #[test]
    fn data_with_length_test_vector() {
        let data = DataRepr {
            global_seq: 0xaabb_ccdd,
            prev_delta: 300,
            payload: b"xyz",
            to_end: false,
        };
        let bytes = encoded(|w| data.encode(w));
        assert_eq!(
            bytes,
            [
                0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x41, 0x2c, 0x03, b'x', b'y', b'z'
            ]
        );
        assert_eq!(bytes.len(), data.encoded_len());
        let want = DataFrame {
            global_seq: 0xaabb_ccdd,
            prev_delta: 300,
            payload: b"xyz",
        };
        assert_eq!(only_frame(&bytes), Frame::Data(want));
        // An empty payload is allowed in both forms.
        for to_end in [false, true] {
            let empty = DataRepr {
                global_seq: 1,
                prev_delta: 0,
                payload: b"",
                to_end,
            };
            let bytes = encoded(|w| empty.encode(w));
            let want = DataFrame {
                global_seq: 1,
                prev_delta: 0,
                payload: b"",
            };
            assert_eq!(only_frame(&bytes), Frame::Data(want));
        }
    }

    #[test]
    fn prev_delta_is_bounded() {
        let at_max = encoded(|w| {
            DataRepr {
                global_seq: 0,
                prev_delta: 1 << 31,
                payload: b"",
                to_end: true,
            }
            .encode(w)
        });
        assert!(matches!(only_frame(&at_max), Frame::Data(d) if d.prev_delta == 1 << 31));
        let over = [0x01, 0, 0, 0, 0, 0xc0, 0, 0, 0, 0x80, 0, 0, 1];
        assert_eq!(
            validate(&over),
            Err(DecodeError::Malformed("DATA prev_delta above 2^31"))
        );
    }

    #[test]
    fn probe_probe_ack_close_extension_padding_round_trip() {
        let probe = encoded(|w| {
            ProbeRepr {
                probe_id: 0xfeed_f00d,
            }
            .encode(w)
        });
        assert_eq!(probe, [0x04, 0xfe, 0xed, 0xf0, 0x0d]);
        assert_eq!(
            only_frame(&probe),
            Frame::Probe(ProbeFrame {
                probe_id: 0xfeed_f00d
            })
        );

        let pa = ProbeAckRepr {
            probe_id: 9,
            path: PathId(15),
            recv_ts_us: 0x8000_0001,
        };
        let bytes = encoded(|w| pa.encode(w));
        assert_eq!(bytes, [0x05, 0, 0, 0, 9, 15, 0x80, 0, 0, 1]);
        let want = ProbeAckFrame {
            probe_id: 9,
            path: PathId(15),
            recv_ts_us: 0x8000_0001,
        };
        assert_eq!(only_frame(&bytes), Frame::ProbeAck(want));

        let close = CloseRepr {
            error_code: 70_000,
            reason: b"bye",
        };
        let bytes = encoded(|w| close.encode(w));
        assert_eq!(bytes.len(), close.encoded_len());
        assert_eq!(
            only_frame(&bytes),
            Frame::Close(CloseFrame {
                error_code: 70_000,
                reason: b"bye"
            })
        );

        let ext = ExtensionRepr {
            frame_type: 0x11,
            body: &[1, 2, 3],
        };
        let bytes = encoded(|w| ext.encode(w));
        assert_eq!(bytes, [0x11, 3, 1, 2, 3]);
        assert_eq!(
            only_frame(&bytes),
            Frame::Extension {
                frame_type: 0x11,
                body: &[1, 2, 3]
            }
        );

        let pad = encoded(|w| encode_padding(w, 5));
        assert_eq!(pad, [0; 5]);
        assert_eq!(only_frame(&pad), Frame::Padding);
        // Padding content is not checked.
        assert_eq!(only_frame(&[0, 1, 2, 3]), Frame::Padding);
    }

    #[test]
    fn several_frames_in_order() {
        let bytes = encoded(|w| {
            ProbeRepr { probe_id: 1 }.encode(w)?;
            DataRepr {
                global_seq: 2,
                prev_delta: 1,
                payload: b"ab",
                to_end: false,
            }
            .encode(w)?;
            ExtensionRepr {
                frame_type: 0x3f,
                body: b"",
            }
            .encode(w)?;
            DataRepr {
                global_seq: 3,
                prev_delta: 1,
                payload: b"cd",
                to_end: true,
            }
            .encode(w)
        });
        assert_eq!(validate(&bytes), Ok(4));
        let got: Vec<_> = frames(&bytes).map(Result::unwrap).collect();
        assert_eq!(got[0], Frame::Probe(ProbeFrame { probe_id: 1 }));
        assert_eq!(
            got[1],
            Frame::Data(DataFrame {
                global_seq: 2,
                prev_delta: 1,
                payload: b"ab"
            })
        );
        assert_eq!(
            got[2],
            Frame::Extension {
                frame_type: 0x3f,
                body: b""
            }
        );
        assert_eq!(
            got[3],
            Frame::Data(DataFrame {
                global_seq: 3,
                prev_delta: 1,
                payload: b"cd"
            })
        );
    }

    #[test]
    fn malformed_frames_are_typed_errors() {
        for t in [0x0cu8, 0x0f, 0x40, 0xff] {
            assert_eq!(validate(&[t]), Err(DecodeError::UnknownFrameType(t)));
        }
        assert_eq!(validate(&[]), Err(DecodeError::Empty));
        assert_eq!(validate(&[0x04, 0, 0, 0]), Err(DecodeError::Truncated));
        assert_eq!(
            validate(&[0x02, 0, 0, 0, 0, 0, 5, 1, 2]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            validate(&[0x05, 0, 0, 0, 0, 16, 0, 0, 0, 0]),
            Err(DecodeError::BadPathId(16))
        );
        assert_eq!(validate(&[0x10, 2, 0]), Err(DecodeError::Truncated));
        let mut long_close = vec![0x06, 0x00, 0x44, 0x01];
        long_close.extend([b'x'; 1025]);
        assert_eq!(
            validate(&long_close),
            Err(DecodeError::Malformed(
                "CLOSE reason longer than 1024 bytes"
            ))
        );
    }

    #[test]
    fn iteration_stops_after_the_first_error() {
        let bytes = [0x04, 0, 0, 0, 1, 0x0c, 0x04, 0, 0, 0, 2];
        let mut it = frames(&bytes);
        assert_eq!(
            it.next(),
            Some(Ok(Frame::Probe(ProbeFrame { probe_id: 1 })))
        );
        assert_eq!(it.next(), Some(Err(DecodeError::UnknownFrameType(0x0c))));
        assert_eq!(it.next(), None);
        assert_eq!(it.next(), None);
        assert_eq!(validate(&bytes), Err(DecodeError::UnknownFrameType(0x0c)));
    }
}
