//! Which source symbols an LT symbol XORs, derived from the chunk seed and the symbol id
//! alone, so the receiver regenerates the set without it travelling (seed HMTP §III-A
//! step 3: "the seed for the pseudo-random number generator ... will be used by the decoder
//! at the receiver end to generate the same random sequence").
//!
//! The generator is ChaCha8 (`rand_chacha::ChaCha8Rng`, RFC 7539 block function with 8
//! rounds) with key = chunk seed (8 bytes little-endian) followed by the 24 bytes
//! `DOMAIN`, and stream = the symbol id. From that stream, in this order:
//! 1. one `next_u64`: the degree d, by its top 53 bits against the robust soliton table;
//! 2. d distinct indices in 0..k by Floyd's algorithm (for j in k-d..k: t = uniform(0..=j);
//!    take t, or j if t is already taken), each uniform draw by Lemire's multiply-shift
//!    with rejection over `next_u64`.
//!
//! Invariant: this derivation is the wire contract of an LT chunk; it uses no `rand`
//! helper whose algorithm could change between versions, only ChaCha's raw output.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::soliton::RobustSoliton;

/// The last 24 bytes of every symbol generator's key (domain separation).
pub const DOMAIN: [u8; 24] = *b"plait-fec LT neighbours1";

/// Up to this degree, membership is a scan of the list; above, a bitset of k bits.
const SCAN_MAX: usize = 32;

/// Regenerates neighbour sets; holds scratch space so that doing so does not allocate.
#[derive(Debug, Clone)]
pub struct NeighbourGen {
    dist: RobustSoliton,
    key: [u8; 32],
    bits: Vec<u64>,
}

impl NeighbourGen {
    /// A generator for one chunk.
    pub fn new(dist: RobustSoliton, chunk_seed: u64) -> Self {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&chunk_seed.to_le_bytes());
        key[8..].copy_from_slice(&DOMAIN);
        let words = dist.k().div_ceil(64);
        Self {
            dist,
            key,
            bits: vec![0; words],
        }
    }

    /// The degree distribution.
    pub fn distribution(&self) -> &RobustSoliton {
        &self.dist
    }

    /// Writes symbol `id`'s source indices into `out` (cleared first), in draw order.
    pub fn neighbours(&mut self, id: u32, out: &mut Vec<u32>) {
        out.clear();
        let mut rng = ChaCha8Rng::from_seed(self.key);
        rng.set_stream(u64::from(id));
        let k = self.dist.k() as u64;
        let d = self.dist.degree_for(rng.next_u64()) as u64;
        let use_bits = d as usize > SCAN_MAX;
        for j in (k - d)..k {
            let t = uniform_at_most(&mut rng, j);
            let taken = if use_bits {
                self.bits[(t / 64) as usize] >> (t % 64) & 1 == 1
            } else {
                out.contains(&(t as u32))
            };
            let pick = if taken { j } else { t };
            if use_bits {
                self.bits[(pick / 64) as usize] |= 1 << (pick % 64);
            }
            out.push(pick as u32);
        }
        if use_bits {
            for &i in out.iter() {
                self.bits[(i / 64) as usize] = 0;
            }
        }
    }
}

/// Uniform in 0..=max (max < 2^32) by Lemire's multiply-shift with rejection.
fn uniform_at_most(rng: &mut ChaCha8Rng, max: u64) -> u64 {
    let n = max + 1;
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = u128::from(rng.next_u64()) * u128::from(n);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generator(k: usize, seed: u64) -> NeighbourGen {
        NeighbourGen::new(RobustSoliton::new(k, 0.05, 0.05).unwrap(), seed)
    }

    #[test]
    fn sets_are_distinct_in_range_and_reproducible() {
        let mut a = generator(1000, 7);
        let mut b = generator(1000, 7);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for id in 0..2000u32 {
            a.neighbours(id, &mut x);
            b.neighbours(id, &mut y);
            assert_eq!(x, y);
            let mut s = x.clone();
            s.sort_unstable();
            s.dedup();
            assert_eq!(s.len(), x.len(), "duplicates for id {id}");
            assert!(x.iter().all(|&i| i < 1000));
            assert!(!x.is_empty());
        }
    }

    #[test]
    fn chunk_seed_changes_sets() {
        let mut a = generator(1000, 1);
        let mut b = generator(1000, 2);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        let differ = (0..100u32)
            .filter(|&id| {
                a.neighbours(id, &mut x);
                b.neighbours(id, &mut y);
                x != y
            })
            .count();
        assert!(differ > 90);
    }

    #[test]
    fn degree_frequencies_follow_mu() {
        let mut g = generator(1000, 3);
        let mut out = Vec::new();
        let n = 20_000u32;
        let mut ones = 0;
        let mut twos = 0;
        for id in 0..n {
            g.neighbours(id, &mut out);
            match out.len() {
                1 => ones += 1,
                2 => twos += 1,
                _ => {}
            }
        }
        let mu = g.distribution();
        let e1 = mu.mu(1) * f64::from(n);
        let e2 = mu.mu(2) * f64::from(n);
        // within 5 standard deviations of a binomial count
        assert!(
            (f64::from(ones) - e1).abs() < 5.0 * e1.sqrt(),
            "{ones} vs {e1}"
        );
        assert!(
            (f64::from(twos) - e2).abs() < 5.0 * e2.sqrt(),
            "{twos} vs {e2}"
        );
    }

    #[test]
    fn full_degree_takes_every_index() {
        // k = 1: every symbol is the one source symbol.
        let mut g = generator(1, 9);
        let mut out = Vec::new();
        g.neighbours(5, &mut out);
        assert_eq!(out, vec![0]);
    }
}
