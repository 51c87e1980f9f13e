//! QUIC variable-length integers (RFC 9000 §16) and the zigzag mapping of signed values
//! (docs/protocol.md#varint).
//!
//! Invariants: decoding reads exactly the length the 2-bit prefix announces, accepts
//! non-minimal encodings and never panics; encoding is always minimal and refuses values
//! above [`VARINT_MAX`] (the writer side lives in [`Writer::put_varint`]).
//!
//! [`Writer::put_varint`]: super::Writer::put_varint

use super::error::DecodeError;

/// Largest value a varint carries: 2^62 - 1.
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// Bytes the minimal encoding of `v` takes: 1, 2, 4 or 8 (8 also for values above
/// [`VARINT_MAX`], which cannot be encoded at all).
pub const fn varint_len(v: u64) -> usize {
    if v < (1 << 6) {
        1
    } else if v < (1 << 14) {
        2
    } else if v < (1 << 30) {
        4
    } else {
        8
    }
}

/// Decodes one varint from the front of `buf`: the value and the bytes it took.
pub(crate) fn decode(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
    let (&first, _) = buf.split_first().ok_or(DecodeError::Truncated)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(..len).ok_or(DecodeError::Truncated)?;
    let mut value = u64::from(first & 0x3f);
    for &b in bytes.iter().skip(1) {
        value = (value << 8) | u64::from(b);
    }
    Ok((value, len))
}

/// Writes the minimal encoding of `v` into the front of `out`, which the caller has checked
/// holds [`varint_len`]`(v)` bytes and `v <= VARINT_MAX`. Returns the bytes written, or 0
/// (writing nothing) if either check was not met.
pub(crate) fn write(v: u64, out: &mut [u8]) -> usize {
    let len = varint_len(v);
    let Some(dst) = out.get_mut(..len) else {
        return 0;
    };
    if v > VARINT_MAX {
        return 0;
    }
    let prefix: u8 = match len {
        1 => 0x00,
        2 => 0x40,
        4 => 0x80,
        _ => 0xc0,
    };
    let be = v.to_be_bytes();
    dst.copy_from_slice(&be[8 - len..]);
    if let Some(first) = dst.first_mut() {
        *first |= prefix;
    }
    len
}

/// Maps a signed value to an unsigned one so that small magnitudes stay small:
/// 0, -1, 1, -2, 2, … become 0, 1, 2, 3, 4, ….
pub const fn zigzag_encode(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag_encode`].
pub const fn zigzag_decode(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EncodeError, Writer};

    fn encode(v: u64) -> Result<Vec<u8>, EncodeError> {
        let mut buf = [0u8; 8];
        let mut w = Writer::new(&mut buf);
        w.put_varint("test", v)?;
        let n = w.len();
        Ok(buf[..n].to_vec())
    }

    #[test]
    fn edge_values_round_trip_minimally() {
        let cases: [(u64, &[u8]); 8] = [
            (0, &[0x00]),
            (63, &[0x3f]),
            (64, &[0x40, 0x40]),
            (16383, &[0x7f, 0xff]),
            (16384, &[0x80, 0x00, 0x40, 0x00]),
            ((1 << 30) - 1, &[0xbf, 0xff, 0xff, 0xff]),
            (1 << 30, &[0xc0, 0, 0, 0, 0x40, 0, 0, 0]),
            (VARINT_MAX, &[0xff; 8]),
        ];
        for (v, bytes) in cases {
            assert_eq!(encode(v).unwrap(), bytes, "encoding {v}");
            assert_eq!(varint_len(v), bytes.len());
            assert_eq!(decode(bytes), Ok((v, bytes.len())), "decoding {v}");
        }
    }

    #[test]
    fn rfc9000_examples() {
        // RFC 9000 §A.1 sample decodings.
        let c8 = [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c];
        assert_eq!(decode(&c8), Ok((151_288_809_941_952_652, 8)));
        assert_eq!(decode(&[0x9d, 0x7f, 0x3e, 0x7d]), Ok((494_878_333, 4)));
        assert_eq!(decode(&[0x7b, 0xbd]), Ok((15_293, 2)));
        assert_eq!(decode(&[0x25]), Ok((37, 1)));
        // Non-minimal encodings are accepted.
        assert_eq!(decode(&[0x40, 0x25]), Ok((37, 2)));
        assert_eq!(decode(&[0xc0, 0, 0, 0, 0, 0, 0, 0x25]), Ok((37, 8)));
    }

    #[test]
    fn too_large_is_an_error() {
        assert_eq!(
            encode(VARINT_MAX + 1),
            Err(EncodeError::ValueTooLarge {
                field: "test",
                value: 1 << 62,
                max: VARINT_MAX
            })
        );
        assert!(encode(u64::MAX).is_err());
        assert_eq!(write(u64::MAX, &mut [0u8; 8]), 0);
    }

    #[test]
    fn truncated_is_an_error() {
        assert_eq!(decode(&[]), Err(DecodeError::Truncated));
        assert_eq!(decode(&[0x40]), Err(DecodeError::Truncated));
        assert_eq!(decode(&[0x80, 0, 0]), Err(DecodeError::Truncated));
        assert_eq!(
            decode(&[0xc0, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(write(64, &mut [0u8; 1]), 0);
    }

    #[test]
    fn zigzag_maps_small_magnitudes_to_small_values() {
        for (s, u) in [(0i64, 0u64), (-1, 1), (1, 2), (-2, 3), (2, 4)] {
            assert_eq!(zigzag_encode(s), u);
            assert_eq!(zigzag_decode(u), s);
        }
        for s in [i64::MIN, i64::MAX, i64::from(i32::MIN), i64::from(i32::MAX)] {
            assert_eq!(zigzag_decode(zigzag_encode(s)), s);
        }
    }

    proptest::proptest! {
        #[test]
        fn any_value_round_trips(v in 0..=VARINT_MAX) {
            let bytes = encode(v).unwrap();
            proptest::prop_assert_eq!(bytes.len(), varint_len(v));
            proptest::prop_assert_eq!(decode(&bytes), Ok((v, bytes.len())));
        }
    }
}
