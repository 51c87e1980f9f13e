//! The block code: Reed-Solomon over `k` source shards and `r` repair shards, through the
//! `reed-solomon-simd` crate (Leopard-RS, GF(2^16); any `k` of the `k + r` shards rebuild
//! the block).
//!
//! Shard layout (docs/protocol.md#fec): the packet's length as a big-endian u16, the
//! packet, zeros up to the shard length, which is the block's longest packet plus 2,
//! rounded up to even (the crate works in 2-byte words). The length travels inside the
//! code, so a rebuilt packet is trimmed exactly and the frame carries no length table.
//! A block whose whole symbols would not fit a datagram has its shards cut into pieces
//! ([`part_range`]), each coded on its own: Reed-Solomon works position by position, so
//! the pieces are independent codes over the same sources, and a piece's symbol fits.
//!
//! Invariants: nothing here panics on any input; a rebuilt shard whose length field
//! exceeds the shard is refused ([`FecError::Inconsistent`]).

use std::ops::Range;

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

use super::FecError;

/// The shard length of a block whose longest packet has `max_len` bytes.
pub fn shard_len(max_len: usize) -> usize {
    (max_len + 2).next_multiple_of(2)
}

/// The bytes of piece `part` of a shard of `shard_len` bytes cut into `parts` pieces: each
/// piece but the last is `shard_len / parts` rounded up to even, the last takes the rest.
/// `None` when that leaves `part` empty (too many pieces for the shard).
pub fn part_range(shard_len: usize, parts: usize, part: usize) -> Option<Range<usize>> {
    let each = shard_len.div_ceil(parts.max(1)).next_multiple_of(2);
    let start = each.checked_mul(part)?;
    if part >= parts || start >= shard_len {
        return None;
    }
    Some(start..(start + each).min(shard_len))
}

/// The fewest pieces (up to `max_parts`) whose symbols are at most `max_symbol` bytes
/// each, for shards of `shard_len` bytes; `None` if even `max_parts` do not bring them
/// down that far, or leave a piece empty.
pub fn parts_for(shard_len: usize, max_symbol: usize, max_parts: usize) -> Option<usize> {
    (1..=max_parts).find(|&n| {
        (0..n).all(|j| part_range(shard_len, n, j).is_some_and(|r| r.len() <= max_symbol))
    })
}

/// Writes `packet` as a shard of `len` bytes into `dst` (cleared first).
fn fill_shard(dst: &mut Vec<u8>, packet: &[u8], len: usize) -> Result<(), FecError> {
    let n = u16::try_from(packet.len()).map_err(|_| FecError::Inconsistent)?;
    if packet.len() + 2 > len {
        return Err(FecError::Inconsistent);
    }
    dst.clear();
    dst.extend_from_slice(&n.to_be_bytes());
    dst.extend_from_slice(packet);
    dst.resize(len, 0);
    Ok(())
}

/// The packet inside a rebuilt shard.
fn unshard(shard: &[u8]) -> Result<&[u8], FecError> {
    let [a, b, rest @ ..] = shard else {
        return Err(FecError::Inconsistent);
    };
    rest.get(..usize::from(u16::from_be_bytes([*a, *b])))
        .ok_or(FecError::Inconsistent)
}

/// The `r` repair symbols of each of `parts` pieces of a block of `packets` (in global
/// order): `out[part][index]`. One piece is the whole shard.
pub fn encode_block(
    packets: &[&[u8]],
    r: usize,
    parts: usize,
) -> Result<Vec<Vec<Vec<u8>>>, FecError> {
    let longest = packets
        .iter()
        .map(|p| p.len())
        .max()
        .ok_or(FecError::Code)?;
    let len = shard_len(longest);
    let mut shards = Vec::with_capacity(packets.len());
    for p in packets {
        let mut shard = Vec::with_capacity(len);
        fill_shard(&mut shard, p, len)?;
        shards.push(shard);
    }
    (0..parts.max(1))
        .map(|j| {
            let range = part_range(len, parts, j).ok_or(FecError::Code)?;
            let mut enc = ReedSolomonEncoder::new(packets.len(), r, range.len())
                .map_err(|_| FecError::Code)?;
            for shard in &shards {
                let piece = shard.get(range.clone()).ok_or(FecError::Code)?;
                enc.add_original_shard(piece).map_err(|_| FecError::Code)?;
            }
            let out = enc.encode().map_err(|_| FecError::Code)?;
            Ok(out.recovery_iter().map(<[u8]>::to_vec).collect())
        })
        .collect()
}

/// Rebuilds the missing source packets of a block of `k` sources and `r` repairs whose
/// shards are cut into `part_lens.len()` pieces of those lengths, from the `sources`
/// (index in the block, packet) and, per piece, the `repairs` (index, symbol) at hand.
/// Returns (index, packet) of each source not given. The piece lengths must be those
/// [`part_range`] gives for their sum.
pub fn decode_block(
    k: usize,
    r: usize,
    part_lens: &[usize],
    sources: &[(usize, &[u8])],
    repairs: &[Vec<(usize, &[u8])>],
) -> Result<Vec<(usize, Vec<u8>)>, FecError> {
    let parts = part_lens.len();
    if repairs.len() != parts || parts == 0 {
        return Err(FecError::Inconsistent);
    }
    if repairs.iter().any(|rep| sources.len() + rep.len() < k) {
        return Err(FecError::NotEnough);
    }
    let len: usize = part_lens.iter().sum();
    let ranges: Vec<Range<usize>> = (0..parts)
        .map(|j| part_range(len, parts, j).filter(|r| r.len() == part_lens[j]))
        .collect::<Option<_>>()
        .ok_or(FecError::Inconsistent)?;
    let mut have = vec![false; k];
    let mut shards: Vec<(usize, Vec<u8>)> = Vec::with_capacity(sources.len());
    for (i, p) in sources {
        let mut shard = Vec::with_capacity(len);
        fill_shard(&mut shard, p, len)?;
        *have.get_mut(*i).ok_or(FecError::Inconsistent)? = true;
        shards.push((*i, shard));
    }
    let mut rebuilt: Vec<(usize, Vec<u8>)> = have
        .iter()
        .enumerate()
        .filter(|(_, h)| !**h)
        .map(|(i, _)| (i, Vec::with_capacity(len)))
        .collect();
    for (range, rep) in ranges.iter().zip(repairs) {
        let mut dec = ReedSolomonDecoder::new(k, r, range.len()).map_err(|_| FecError::Code)?;
        for (i, shard) in &shards {
            let piece = shard.get(range.clone()).ok_or(FecError::Code)?;
            dec.add_original_shard(*i, piece)
                .map_err(|_| FecError::Code)?;
        }
        for (i, s) in rep {
            if s.len() != range.len() {
                return Err(FecError::Inconsistent);
            }
            dec.add_recovery_shard(*i, s).map_err(|_| FecError::Code)?;
        }
        let result = dec.decode().map_err(|_| FecError::Code)?;
        for (i, shard) in &mut rebuilt {
            shard.extend_from_slice(result.restored_original(*i).ok_or(FecError::Code)?);
        }
    }
    rebuilt
        .into_iter()
        .map(|(i, shard)| Ok((i, unshard(&shard)?.to_vec())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuilds_lost_packets_of_different_lengths() {
        let packets: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 + 7 * usize::from(i)]).collect();
        let refs: Vec<&[u8]> = packets.iter().map(Vec::as_slice).collect();
        let len = shard_len(38);
        for parts in [1, 2, 3] {
            let repairs = encode_block(&refs, 2, parts).unwrap();
            let lens: Vec<usize> = (0..parts)
                .map(|j| part_range(len, parts, j).unwrap().len())
                .collect();
            assert_eq!(lens.iter().sum::<usize>(), len);
            for (piece, l) in repairs.iter().zip(&lens) {
                assert!(piece.len() == 2 && piece.iter().all(|s| s.len() == *l));
            }
            let sources = [(0, refs[0]), (2, refs[2]), (3, refs[3])];
            let reps: Vec<Vec<(usize, &[u8])>> = repairs
                .iter()
                .map(|p| vec![(0, p[0].as_slice()), (1, p[1].as_slice())])
                .collect();
            let got = decode_block(5, 2, &lens, &sources, &reps).unwrap();
            assert_eq!(got, vec![(1, packets[1].clone()), (4, packets[4].clone())]);
            assert_eq!(
                decode_block(5, 2, &lens, &sources[..2], &reps),
                Err(FecError::NotEnough)
            );
        }
    }

    #[test]
    fn pieces_cover_the_shard_and_fit() {
        // A full-size shard (1438 bytes) in pieces of at most 1425: two of 720 and 718.
        assert_eq!(parts_for(1438, 1425, 15), Some(2));
        assert_eq!(part_range(1438, 2, 0), Some(0..720));
        assert_eq!(part_range(1438, 2, 1), Some(720..1438));
        assert_eq!(parts_for(1438, 1438, 15), Some(1));
        assert_eq!(parts_for(100, 2, 15), None);
        // Six bytes in four pieces of two leave the last empty.
        assert_eq!(part_range(6, 4, 3), None);
        assert_eq!(part_range(6, 4, 9), None);
    }

    #[test]
    fn refuses_bad_shapes_without_panicking() {
        let p = [1u8, 2, 3];
        assert!(encode_block(&[], 1, 1).is_err());
        assert!(encode_block(&[&p], 0, 1).is_err());
        assert!(encode_block(&[&p], 1, 4).is_err(), "an empty piece");
        let reps = encode_block(&[&p, &p], 1, 1).unwrap();
        let len = reps[0][0].len();
        let r = [vec![(0, reps[0][0].as_slice())]];
        // Wrong shard length, index out of range, source too long for the shard, pieces
        // that do not match their sum, no pieces.
        assert!(decode_block(2, 1, &[8], &[(0, &p)], &r).is_err());
        assert!(decode_block(2, 1, &[len], &[(5, &p)], &r).is_err());
        assert!(decode_block(2, 1, &[len], &[(0, &[0u8; 40])], &r).is_err());
        assert!(decode_block(0, 1, &[6], &[], &r).is_err());
        assert!(decode_block(2, 1, &[2, 4], &[(0, &p)], &[r[0].clone(), r[0].clone()]).is_err());
        assert!(decode_block(2, 1, &[], &[(0, &p)], &[]).is_err());
        assert!(unshard(&[0, 9, 1]).is_err());
    }
}
