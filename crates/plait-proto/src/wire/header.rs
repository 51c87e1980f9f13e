//! The 9-byte datagram header (docs/protocol.md#header).
//!
//! Invariants: [`Header::decode`] accepts only version [`VERSION`] and at least one byte of
//! frames after the header; a path id always fits (it is the first byte's low nibble, and
//! [`MAX_PATHS`] is 16). [`Header::encode`] writes exactly [`HEADER_LEN`] bytes, or nothing
//! at all. The first [`CLEAR_PREFIX_LEN`] bytes (version, path, path sequence number) are
//! the ones the tunnel leaves unencrypted and makes its nonce of
//! (docs/protocol.md#data-messages); the layout of those bytes is therefore part of the
//! tunnel's security argument and must not change without a new version.

use super::error::{DecodeError, EncodeError};
use super::reader::Reader;
use super::writer::Writer;
use crate::ids::{MAX_PATHS, PathId};

/// Bytes in the header.
pub const HEADER_LEN: usize = 9;

/// Bytes at the front of the header that name the datagram uniquely within a session:
/// the version and path byte, then the path sequence number.
pub const CLEAR_PREFIX_LEN: usize = 5;

/// Protocol version carried in the high nibble of the first byte.
pub const VERSION: u8 = 2;

// The path id is the first byte's low nibble.
const _: () = assert!(MAX_PATHS == 16);

/// The header that starts every datagram (docs/protocol.md#header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// The path this datagram was sent on.
    pub path: PathId,
    /// Per-path sequence number, truncated to 32 bits (docs/protocol.md#sequence-numbers).
    pub path_seq: u32,
    /// Sender's clock in microseconds, wrapping (docs/protocol.md#timestamps).
    pub timestamp_us: u32,
}

impl Header {
    /// Decodes the header at the front of `buf`; returns it and the frames payload after it,
    /// which is never empty.
    pub fn decode(buf: &[u8]) -> Result<(Header, &[u8]), DecodeError> {
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        let mut r = Reader::new(buf);
        let first = r.u8()?;
        let version = first >> 4;
        if version != VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let path = first & 0x0f;
        let path_seq = r.u32()?;
        let timestamp_us = r.u32()?;
        let payload = r.rest();
        if payload.is_empty() {
            return Err(DecodeError::Empty);
        }
        let header = Header {
            path: PathId(path),
            path_seq,
            timestamp_us,
        };
        Ok((header, payload))
    }

    /// Writes the header into the front of `out`; returns [`HEADER_LEN`].
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(out);
        self.write_to(&mut w)?;
        Ok(w.len())
    }

    /// Writes the header at the writer's position (the first thing in a datagram).
    pub fn write_to(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if usize::from(self.path.0) >= MAX_PATHS {
            return Err(EncodeError::BadPathId(self.path.0));
        }
        w.check_room(HEADER_LEN)?;
        w.put_u8(VERSION << 4 | self.path.0)?;
        w.put_u32(self.path_seq)?;
        w.put_u32(self.timestamp_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: [u8; HEADER_LEN] = [
        0x23, // version 2, path 3
        0x00, 0x01, 0x02, 0x03, // path seq
        0xff, 0xff, 0xff, 0xfe, // timestamp
    ];

    fn sample() -> Header {
        Header {
            path: PathId(3),
            path_seq: 0x0001_0203,
            timestamp_us: 0xffff_fffe,
        }
    }

    #[test]
    fn encodes_to_the_test_vector() {
        let mut buf = [0xaau8; 15];
        assert_eq!(sample().encode(&mut buf), Ok(HEADER_LEN));
        assert_eq!(buf[..HEADER_LEN], VECTOR);
        assert_eq!(buf[HEADER_LEN..], [0xaa; 6]);
    }

    #[test]
    fn decodes_the_test_vector() {
        let mut dgram = VECTOR.to_vec();
        dgram.push(0x04);
        let (h, payload) = Header::decode(&dgram).unwrap();
        assert_eq!(h, sample());
        assert_eq!(payload, &[0x04]);
    }

    #[test]
    fn every_path_id_fits_the_nibble() {
        for p in 0..MAX_PATHS as u8 {
            let h = Header {
                path: PathId(p),
                ..sample()
            };
            let mut dgram = [0u8; HEADER_LEN + 1];
            assert_eq!(h.encode(&mut dgram), Ok(HEADER_LEN));
            assert_eq!(dgram[0], 0x20 | p);
            assert_eq!(Header::decode(&dgram).unwrap().0, h);
        }
    }

    #[test]
    fn rejects_bad_headers() {
        let mut dgram = VECTOR.to_vec();
        assert_eq!(Header::decode(&dgram), Err(DecodeError::Empty));
        assert_eq!(
            Header::decode(&dgram[..HEADER_LEN - 1]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(Header::decode(&[]), Err(DecodeError::Truncated));
        dgram.push(0);
        dgram[0] = 0x13;
        assert_eq!(
            Header::decode(&dgram),
            Err(DecodeError::UnsupportedVersion(1))
        );
        dgram[0] = 0x03;
        assert_eq!(
            Header::decode(&dgram),
            Err(DecodeError::UnsupportedVersion(0))
        );
    }

    #[test]
    fn encode_refuses_small_buffers_and_bad_paths() {
        let mut buf = [0u8; HEADER_LEN - 1];
        assert_eq!(
            sample().encode(&mut buf),
            Err(EncodeError::BufferTooSmall {
                needed: HEADER_LEN,
                available: HEADER_LEN - 1
            })
        );
        assert_eq!(buf, [0; HEADER_LEN - 1]);
        let bad = Header {
            path: PathId(16),
            ..sample()
        };
        assert_eq!(
            bad.encode(&mut [0u8; HEADER_LEN]),
            Err(EncodeError::BadPathId(16))
        );
    }
}
