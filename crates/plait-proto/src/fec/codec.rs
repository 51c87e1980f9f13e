//! The block code: Reed-Solomon over `k` source shards and `r` repair shards, through the
//! `reed-solomon-simd` crate (Leopard-RS, GF(2^16); any `k` of the `k + r` shards rebuild
//! the block).
//!
//! Shard layout (docs/protocol.md#fec): the packet's length as a big-endian u16, the
//! packet, zeros up to the shard length, which is the block's longest packet plus 2,
//! rounded up to even (the crate works in 2-byte words). The length travels inside the
//! code, so a rebuilt packet is trimmed exactly and the frame carries no length table.
//!
//! Invariants: nothing here panics on any input; a rebuilt shard whose length field
//! exceeds the shard is refused ([`FecError::Inconsistent`]).

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

use super::FecError;

/// The shard length of a block whose longest packet has `max_len` bytes.
pub fn shard_len(max_len: usize) -> usize {
    (max_len + 2).next_multiple_of(2)
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

/// The `r` repair symbols of a block of `packets` (in global order).
pub fn encode_block(packets: &[&[u8]], r: usize) -> Result<Vec<Vec<u8>>, FecError> {
    let longest = packets
        .iter()
        .map(|p| p.len())
        .max()
        .ok_or(FecError::Code)?;
    let len = shard_len(longest);
    let mut enc = ReedSolomonEncoder::new(packets.len(), r, len).map_err(|_| FecError::Code)?;
    let mut shard = Vec::with_capacity(len);
    for p in packets {
        fill_shard(&mut shard, p, len)?;
        enc.add_original_shard(&shard).map_err(|_| FecError::Code)?;
    }
    let out = enc.encode().map_err(|_| FecError::Code)?;
    Ok(out.recovery_iter().map(<[u8]>::to_vec).collect())
}

/// Rebuilds the missing source packets of a block of `k` sources and `r` repairs whose
/// shards are `shard_len` bytes, from the `sources` (index in the block, packet) and
/// `repairs` (index, symbol) at hand. Returns (index, packet) of each source not given.
pub fn decode_block(
    k: usize,
    r: usize,
    shard_len: usize,
    sources: &[(usize, &[u8])],
    repairs: &[(usize, &[u8])],
) -> Result<Vec<(usize, Vec<u8>)>, FecError> {
    if sources.len() + repairs.len() < k {
        return Err(FecError::NotEnough);
    }
    let mut dec = ReedSolomonDecoder::new(k, r, shard_len).map_err(|_| FecError::Code)?;
    let mut shard = Vec::with_capacity(shard_len);
    let mut have = vec![false; k];
    for (i, p) in sources {
        fill_shard(&mut shard, p, shard_len)?;
        dec.add_original_shard(*i, &shard)
            .map_err(|_| FecError::Code)?;
        if let Some(h) = have.get_mut(*i) {
            *h = true;
        }
    }
    for (i, s) in repairs {
        if s.len() != shard_len {
            return Err(FecError::Inconsistent);
        }
        dec.add_recovery_shard(*i, s).map_err(|_| FecError::Code)?;
    }
    let result = dec.decode().map_err(|_| FecError::Code)?;
    let mut out = Vec::new();
    for (i, _) in have.iter().enumerate().filter(|(_, h)| !**h) {
        let shard = result.restored_original(i).ok_or(FecError::Code)?;
        out.push((i, unshard(shard)?.to_vec()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuilds_lost_packets_of_different_lengths() {
        let packets: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 + 7 * usize::from(i)]).collect();
        let refs: Vec<&[u8]> = packets.iter().map(Vec::as_slice).collect();
        let repairs = encode_block(&refs, 2).unwrap();
        let len = shard_len(38);
        assert!(repairs.iter().all(|s| s.len() == len));
        let sources = [(0, refs[0]), (2, refs[2]), (3, refs[3])];
        let reps = [(0, repairs[0].as_slice()), (1, repairs[1].as_slice())];
        let got = decode_block(5, 2, len, &sources, &reps).unwrap();
        assert_eq!(got, vec![(1, packets[1].clone()), (4, packets[4].clone())]);
        assert_eq!(
            decode_block(5, 2, len, &sources[..2], &reps),
            Err(FecError::NotEnough)
        );
    }

    #[test]
    fn refuses_bad_shapes_without_panicking() {
        let p = [1u8, 2, 3];
        assert!(encode_block(&[], 1).is_err());
        assert!(encode_block(&[&p], 0).is_err());
        let reps = encode_block(&[&p, &p], 1).unwrap();
        let r = [(0, reps[0].as_slice())];
        // Wrong shard length, index out of range, source too long for the shard.
        assert!(decode_block(2, 1, 8, &[(0, &p)], &r).is_err());
        assert!(decode_block(2, 1, reps[0].len(), &[(5, &p)], &r).is_err());
        assert!(decode_block(2, 1, reps[0].len(), &[(0, &[0u8; 40])], &r).is_err());
        assert!(decode_block(0, 1, 6, &[], &r).is_err());
        assert!(unshard(&[0, 9, 1]).is_err());
    }
}
