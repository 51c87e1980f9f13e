//! SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012): the keyed
//! hash that spreads flows over the send queue's flow queues. With a key the sender of the
//! inner packets does not know, it cannot aim many flows at one queue (RFC 8290 §5.3 on
//! hash collisions; Linux perturbs its flow hash with a random key the same way).
//!
//! Invariant: a pure function of key and message (no state, no randomness of its own), so
//! the session stays deterministic for a given seed.

/// SipHash-2-4 of `msg` under the 128-bit key `(k0, k1)` (little-endian halves, as in the
/// reference implementation).
pub fn siphash24(k0: u64, k1: u64, msg: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut chunks = msg.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        compress(&mut v, u64::from_le_bytes(word), 2);
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = msg.len() as u8;
    compress(&mut v, u64::from_le_bytes(last), 2);
    v[2] ^= 0xff;
    for _ in 0..4 {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

fn compress(v: &mut [u64; 4], m: u64, rounds: usize) {
    v[3] ^= m;
    for _ in 0..rounds {
        sip_round(v);
    }
    v[0] ^= m;
}

fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The test vector of the SipHash paper (Appendix A): key 00..0f, message 00..0e.
    #[test]
    fn paper_test_vector() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(k0, k1, &msg), 0xa129_ca61_49be_45e5);
    }

    proptest! {
        /// Agrees with the standard library's (deprecated) SipHash-2-4 on any input.
        #[test]
        fn matches_std_siphasher(
            k0 in any::<u64>(),
            k1 in any::<u64>(),
            msg in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            #[allow(deprecated)]
            let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
            std::hash::Hasher::write(&mut h, &msg);
            prop_assert_eq!(siphash24(k0, k1, &msg), std::hash::Hasher::finish(&h));
        }
    }
}
