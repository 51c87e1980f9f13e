//! Property tests of packet-mode FEC (issue 18): a block rebuilds every loss pattern within
//! its budget (any `k` of its `k + r` symbols, in any order), a packet is never delivered
//! twice through the duplicate filter, and arbitrary repair frames never panic the store
//! nor grow it past its bounds.

use proptest::prelude::*;

use super::{FecDecoder, MAX_BLOCK_BYTES, MAX_BLOCKS, MAX_SOURCE_BYTES, codec};
use crate::reorder::{DuplicateFilter, Freshness};
use crate::wire::{FecRepairRepr, parse_fec_repair, parse_fec_repair_part};

/// A block: `k` packets of random lengths at numbers `first + offsets`, `r` repairs.
fn block() -> impl Strategy<Value = (u64, Vec<u32>, Vec<Vec<u8>>, usize)> {
    (1usize..=16, 1usize..=6, 0u64..1_000_000).prop_flat_map(|(k, r, first)| {
        (
            Just(first),
            proptest::sample::subsequence((1u32..32).collect::<Vec<_>>(), k - 1),
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), k),
            Just(r),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_k_of_k_plus_r_rebuild_the_block_and_nothing_twice(
        (first, rest, packets, r) in block(),
        lost_seed in any::<u64>(),
        order_seed in any::<u64>(),
        lose in 0usize..=6,
        parts in 1usize..=3,
    ) {
        let k = packets.len();
        let offsets: Vec<u32> = std::iter::once(0).chain(rest).collect();
        let mask = offsets.iter().fold(0u32, |m, o| m | 1 << o);
        let refs: Vec<&[u8]> = packets.iter().map(Vec::as_slice).collect();
        let longest = packets.iter().map(Vec::len).max().unwrap_or(0);
        let parts = if codec::part_range(codec::shard_len(longest), parts, parts - 1).is_some() {
            parts
        } else {
            1
        };
        let pieces = codec::encode_block(&refs, r, parts).unwrap();
        // Symbols 0..k are sources, k..k+r repairs (all their pieces); lose `lose.min(r)`.
        let n = k + r;
        let mut ids: Vec<usize> = (0..n).collect();
        shuffle(&mut ids, lost_seed);
        let lost: Vec<usize> = ids[..lose.min(r)].to_vec();
        let mut arriving: Vec<usize> = ids[lose.min(r)..].to_vec();
        shuffle(&mut arriving, order_seed);
        let mut dec = FecDecoder::new(true);
        let mut dedup = DuplicateFilter::new(1 << 16);
        let mut delivered: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut deliver = |g: u64, p: Vec<u8>, out: &mut Vec<(u64, Vec<u8>)>| {
            if dedup.check_and_insert(g) == Freshness::Fresh {
                out.push((g, p));
            }
        };
        for id in arriving {
            let rebuilt = if id < k {
                let g = first + u64::from(offsets[id]);
                deliver(g, packets[id].clone(), &mut delivered);
                dec.on_source(g, &packets[id])
            } else {
                let mut rebuilt = Vec::new();
                for (part, piece) in pieces.iter().enumerate() {
                    let repr = FecRepairRepr {
                        first: first as u32,
                        mask,
                        repair_count: r as u8,
                        index: (id - k) as u8,
                        part: part as u8,
                        parts: parts as u8,
                        symbol: &piece[id - k],
                    };
                    rebuilt.extend(dec.on_repair(first, &repr).unwrap());
                }
                rebuilt
            };
            for (g, p) in rebuilt {
                deliver(g, p, &mut delivered);
            }
        }
        // Every source exactly once, with its bytes.
        delivered.sort();
        let mut want: Vec<(u64, Vec<u8>)> = offsets
            .iter()
            .zip(&packets)
            .map(|(o, p)| (first + u64::from(*o), p.clone()))
            .collect();
        want.sort();
        prop_assert_eq!(delivered, want);
        let lost_sources = lost.iter().filter(|i| **i < k).count() as u64;
        // Lost sources are rebuilt; so may be sources still on their way when the k-th
        // symbol arrived (their late copy is then the duplicate), never more than r.
        prop_assert!(dec.stats.recovered >= lost_sources);
        prop_assert!(dec.stats.recovered <= r as u64);
        // Sources arriving again (late copies) are not rebuilt again.
        for (o, p) in offsets.iter().zip(&packets) {
            prop_assert!(dec.on_source(first + u64::from(*o), p).is_empty());
        }
    }

    #[test]
    fn arbitrary_repair_frames_never_panic_and_stay_bounded(
        frames in proptest::collection::vec(
            (0u64..20_000, proptest::collection::vec(any::<u8>(), 0..300)),
            0..200,
        ),
        sources in proptest::collection::vec((0u64..20_000, 0usize..1400), 0..200),
    ) {
        let mut dec = FecDecoder::new(true);
        for ((first, body), (g, len)) in frames.iter().zip(sources.iter().chain(std::iter::repeat(&(0, 0)))) {
            if let Ok(repr) = parse_fec_repair(body) {
                let _ = dec.on_repair(*first, &repr);
            }
            if let Ok(repr) = parse_fec_repair_part(body) {
                let _ = dec.on_repair(*first, &repr);
            }
            let _ = dec.on_source(*g, &vec![0u8; *len]);
            let (bytes, blocks) = dec.held();
            prop_assert!(bytes <= MAX_SOURCE_BYTES + MAX_BLOCK_BYTES);
            prop_assert!(blocks <= MAX_BLOCKS);
        }
    }
}

/// Fisher-Yates with a small deterministic generator (splitmix64).
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        v.swap(i, (z % (i as u64 + 1)) as usize);
    }
}
