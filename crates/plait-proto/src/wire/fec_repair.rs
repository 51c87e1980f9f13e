//! FEC_REPAIR and FEC_REPAIR_PART (extension frames 0x14 and 0x15, docs/protocol.md#fec):
//! one Reed-Solomon repair symbol (or one part of it) of a small block of packet-mode
//! inner packets, so the receiver can rebuild packets a path lost without asking for them
//! (seed HMTP §III: coded symbols instead of retransmission; here as systematic FEC beside
//! the DATA frames).
//!
//! FEC_REPAIR body: `first` u32 (the block's first global sequence number, truncated),
//! `mask` u32 (bit `i` set: global sequence number `first + i` is one of the block's source
//! packets; bit 0 always set), one byte `r << 4 | index` (`r` repair symbols in the block,
//! 1..=15; this is symbol `index` < `r`), then the symbol to the end of the body (an even
//! number of bytes, 2..=[`MAX_FEC_SYMBOL`]).
//!
//! FEC_REPAIR_PART body: the same fields, one more byte `part << 4 | parts` (the block's
//! shards are cut into `parts` pieces, 2..=15, each coded on its own; this symbol is of
//! piece `part` < `parts`), then the symbol. A block is cut when a whole symbol would not
//! fit a datagram, so the inner MTU need not shrink for FEC (docs/protocol.md#fec).
//!
//! Invariant: the parsers accept only a body of exactly that shape and never panic;
//! [`FecRepairRepr::encode`] never writes what it would reject.

use super::error::{DecodeError, EncodeError};
use super::frame_type;
use super::varint::varint_len;
use super::writer::Writer;

/// Most repair symbols in one block (4 bits on the wire).
pub const MAX_FEC_REPAIR: u8 = 15;
/// Widest block: its source packets lie within this many consecutive global sequence
/// numbers (the mask's bits).
pub const FEC_SPAN: u64 = 32;
/// Longest symbol (the largest datagram's payload).
pub const MAX_FEC_SYMBOL: usize = 65_536;
/// Bytes of fields in an FEC_REPAIR body beside the symbol (FEC_REPAIR_PART: one more).
pub const FEC_FIELDS_LEN: usize = 9;
/// Most pieces a block's shards are cut into (4 bits on the wire).
pub const MAX_FEC_PARTS: u8 = 15;

/// The longest symbol an FEC_REPAIR_PART frame carries in a datagram of `datagram` bytes
/// (header included), even: the datagram less the header, the frame's type, a body
/// length of up to 4 bytes and its 10 bytes of fields.
pub const fn max_fec_part_symbol(datagram: usize) -> usize {
    let framing = super::HEADER_LEN + 1 + 4 + FEC_FIELDS_LEN + 1;
    datagram.saturating_sub(framing) & !1
}

/// An FEC_REPAIR frame, to write or as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecRepairRepr<'a> {
    /// The block's first global sequence number, truncated to 32 bits.
    pub first: u32,
    /// Bit `i`: `first + i` is a source packet of the block. Bit 0 is set.
    pub mask: u32,
    /// Repair symbols the block has, 1..=[`MAX_FEC_REPAIR`].
    pub repair_count: u8,
    /// Which of them this is, `< repair_count`.
    pub index: u8,
    /// Which piece of the block's shards the symbol codes, `< parts`.
    pub part: u8,
    /// Pieces the block's shards are cut into, 1..=[`MAX_FEC_PARTS`] (1: FEC_REPAIR,
    /// else FEC_REPAIR_PART).
    pub parts: u8,
    /// The symbol: even length, 2..=[`MAX_FEC_SYMBOL`].
    pub symbol: &'a [u8],
}

impl FecRepairRepr<'_> {
    fn fields_len(&self) -> usize {
        FEC_FIELDS_LEN + usize::from(self.parts > 1)
    }

    fn body_len(&self) -> usize {
        self.fields_len() + self.symbol.len()
    }

    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        1 + varint_len(self.body_len() as u64) + self.body_len()
    }

    /// Why this frame is not well formed, if it is not.
    fn check(&self) -> Result<(), &'static str> {
        if self.mask & 1 == 0 {
            return Err("FEC mask without its first packet");
        }
        if self.repair_count == 0 || self.repair_count > MAX_FEC_REPAIR {
            return Err("FEC repair count out of range");
        }
        if self.index >= self.repair_count {
            return Err("FEC symbol index beyond repair count");
        }
        if self.parts == 0 || self.parts > MAX_FEC_PARTS || self.part >= self.parts {
            return Err("FEC part out of range");
        }
        let n = self.symbol.len();
        if !(2..=MAX_FEC_SYMBOL).contains(&n) || !n.is_multiple_of(2) {
            return Err("FEC symbol length odd or out of range");
        }
        Ok(())
    }

    /// Appends the frame (nothing, and an error, if it is not well formed or does not fit).
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if let Err(field) = self.check() {
            return Err(EncodeError::ValueTooLarge {
                field,
                value: self.symbol.len() as u64,
                max: MAX_FEC_SYMBOL as u64,
            });
        }
        w.atomic(self.encoded_len(), |w| {
            let split = self.parts > 1;
            w.put_u8(if split {
                frame_type::FEC_REPAIR_PART
            } else {
                frame_type::FEC_REPAIR
            })?;
            w.put_varint("FEC body length", self.body_len() as u64)?;
            w.put_u32(self.first)?;
            w.put_u32(self.mask)?;
            w.put_u8(self.repair_count << 4 | self.index)?;
            if split {
                w.put_u8(self.part << 4 | self.parts)?;
            }
            w.put_bytes(self.symbol)
        })
    }

    /// The number of source packets (`k`).
    pub fn source_count(&self) -> usize {
        self.mask.count_ones() as usize
    }
}

/// Reads an FEC_REPAIR body (what follows the type and body length).
pub fn parse_fec_repair(body: &[u8]) -> Result<FecRepairRepr<'_>, DecodeError> {
    parse(body, false)
}

/// Reads an FEC_REPAIR_PART body (what follows the type and body length). A body naming
/// fewer than 2 parts is malformed (a whole symbol travels as FEC_REPAIR).
pub fn parse_fec_repair_part(body: &[u8]) -> Result<FecRepairRepr<'_>, DecodeError> {
    let repr = parse(body, true)?;
    if repr.parts < 2 {
        return Err(DecodeError::Malformed("FEC part frame with one part"));
    }
    Ok(repr)
}

fn parse(body: &[u8], split: bool) -> Result<FecRepairRepr<'_>, DecodeError> {
    let (fields, symbol) = body
        .split_at_checked(FEC_FIELDS_LEN + usize::from(split))
        .ok_or(DecodeError::Truncated)?;
    let (&[f0, f1, f2, f3, m0, m1, m2, m3, ri], rest) = fields
        .split_first_chunk::<FEC_FIELDS_LEN>()
        .ok_or(DecodeError::Truncated)?;
    let (part, parts) = match rest {
        [pp] => (pp >> 4, pp & 0x0f),
        _ => (0, 1),
    };
    let repr = FecRepairRepr {
        first: u32::from_be_bytes([f0, f1, f2, f3]),
        mask: u32::from_be_bytes([m0, m1, m2, m3]),
        repair_count: ri >> 4,
        index: ri & 0x0f,
        part,
        parts,
        symbol,
    };
    repr.check().map_err(DecodeError::Malformed)?;
    Ok(repr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Frame, frames};
    use proptest::prelude::*;

    fn encode(repr: &FecRepairRepr<'_>) -> Vec<u8> {
        let mut buf = vec![0u8; repr.encoded_len() + 8];
        let mut w = Writer::new(&mut buf);
        repr.encode(&mut w).unwrap();
        assert_eq!(w.len(), repr.encoded_len());
        let len = w.len();
        buf.truncate(len);
        buf
    }

    #[test]
    fn round_trip() {
        let symbol = [7u8; 10];
        let repr = FecRepairRepr {
            first: u32::MAX,
            mask: 0b1011,
            repair_count: 3,
            index: 2,
            part: 0,
            parts: 1,
            symbol: &symbol,
        };
        let bytes = encode(&repr);
        let Frame::Extension { frame_type, body } = frames(&bytes).next().unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(frame_type, frame_type::FEC_REPAIR);
        assert_eq!(parse_fec_repair(body).unwrap(), repr);
        assert_eq!(repr.source_count(), 3);
        // A piece: its own frame type and one more byte.
        let piece = FecRepairRepr {
            part: 1,
            parts: 2,
            ..repr
        };
        let bytes = encode(&piece);
        assert_eq!(bytes.len(), encode(&repr).len() + 1);
        let Frame::Extension { frame_type, body } = frames(&bytes).next().unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(frame_type, frame_type::FEC_REPAIR_PART);
        assert_eq!(parse_fec_repair_part(body).unwrap(), piece);
    }

    #[test]
    fn a_piece_of_a_full_size_symbol_fits_a_datagram() {
        for size in [128, 1280, 1400, 1451, 9000, 65_535] {
            let mut config = crate::Config {
                max_datagram_size: size,
                ..crate::Config::default()
            };
            config.fec.policy = crate::fec::FecPolicy::All;
            // The largest inner packet plus its 2-byte length, rounded up to even, cut
            // into the fewest pieces that fit.
            let shard = crate::fec::shard_len(config.max_inner_packet());
            let max_symbol = max_fec_part_symbol(size);
            let parts = crate::fec::parts_for(shard, max_symbol, 15).unwrap();
            assert!(parts <= 2, "{size}: {parts}");
            for part in 0..parts {
                let range = crate::fec::part_range(shard, parts, part).unwrap();
                let symbol = vec![0u8; range.len()];
                let repr = FecRepairRepr {
                    first: 0,
                    mask: 1,
                    repair_count: 1,
                    index: 0,
                    part: part as u8,
                    parts: parts as u8,
                    symbol: &symbol,
                };
                assert!(
                    crate::wire::HEADER_LEN + repr.encoded_len() <= size,
                    "{size}"
                );
            }
        }
    }

    #[test]
    fn refuses_bad_bodies_with_typed_errors() {
        assert_eq!(parse_fec_repair(&[]), Err(DecodeError::Truncated));
        assert_eq!(parse_fec_repair(&[0; 8]), Err(DecodeError::Truncated));
        let good = [0, 0, 0, 1, 0, 0, 0, 1, 0x10, 1, 2];
        assert!(parse_fec_repair(&good).is_ok());
        let mut no_first = good;
        no_first[7] = 2;
        let mut no_repair = good;
        no_repair[8] = 0x00;
        let mut index_high = good;
        index_high[8] = 0x11;
        for bad in [no_first, no_repair, index_high] {
            assert!(matches!(
                parse_fec_repair(&bad),
                Err(DecodeError::Malformed(_))
            ));
        }
        // Odd symbol, empty symbol.
        assert!(matches!(
            parse_fec_repair(&good[..10]),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            parse_fec_repair(&good[..9]),
            Err(DecodeError::Malformed(_))
        ));
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        let bad = FecRepairRepr {
            first: 0,
            mask: 0,
            repair_count: 1,
            index: 0,
            part: 0,
            parts: 1,
            symbol: &[0, 0],
        };
        assert!(bad.encode(&mut w).is_err());
        let bad_part = FecRepairRepr {
            mask: 1,
            part: 2,
            parts: 2,
            ..bad
        };
        assert!(bad_part.encode(&mut w).is_err());
        assert!(w.is_empty());
        // Piece bodies: one part, part beyond parts, no part byte.
        let piece = [0, 0, 0, 1, 0, 0, 0, 1, 0x10, 0x12, 1, 2];
        assert!(parse_fec_repair_part(&piece).is_ok());
        let mut one = piece;
        one[9] = 0x01;
        let mut beyond = piece;
        beyond[9] = 0x22;
        for bad in [one, beyond] {
            assert!(matches!(
                parse_fec_repair_part(&bad),
                Err(DecodeError::Malformed(_))
            ));
        }
        assert_eq!(
            parse_fec_repair_part(&piece[..9]),
            Err(DecodeError::Truncated)
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(r) = parse_fec_repair(&body) {
                prop_assert!(r.symbol.len() % 2 == 0 && r.index < r.repair_count);
                prop_assert_eq!((r.part, r.parts), (0, 1));
            }
            if let Ok(r) = parse_fec_repair_part(&body) {
                prop_assert!(r.symbol.len() % 2 == 0 && r.part < r.parts && r.parts >= 2);
            }
        }
    }
}
