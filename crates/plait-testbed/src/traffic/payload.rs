//! The deterministic TCP payload and its digests: block `n` of a seed's stream depends only
//! on the seed and `n` (splitmix64 per [`BLOCK`]), so a receiver, or a test, can tell what
//! a transfer of a given seed and length must hash to ([`payload_sha256`]).

use ring::digest::{Context, SHA256};

use super::BLOCK;

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn finish(ctx: Context) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// Fills `out` (at most [`BLOCK`] bytes) with block `index` of `seed`'s payload stream.
pub fn payload_block(seed: u64, index: u64, out: &mut [u8]) {
    let mut x = seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for chunk in out.chunks_mut(8) {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

/// Calls `f` with the payload of `seed`, `bytes` long, block by block.
fn for_each_block(
    seed: u64,
    bytes: u64,
    mut f: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; BLOCK];
    let mut done = 0u64;
    let mut index = 0u64;
    while done < bytes {
        let n = usize::try_from((bytes - done).min(BLOCK as u64)).unwrap_or(BLOCK);
        payload_block(seed, index, &mut buf[..n]);
        f(&buf[..n])?;
        done += n as u64;
        index += 1;
    }
    Ok(())
}

/// SHA-256 of the first `bytes` bytes of `seed`'s payload stream.
pub fn payload_sha256(bytes: u64, seed: u64) -> Digest {
    let mut ctx = Context::new(&SHA256);
    let _ = for_each_block(seed, bytes, |b| {
        ctx.update(b);
        Ok(())
    });
    finish(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_deterministic_and_seeded() {
        let mut a = vec![0u8; 1000];
        let mut b = vec![0u8; 1000];
        payload_block(7, 3, &mut a);
        payload_block(7, 3, &mut b);
        assert_eq!(a, b);
        payload_block(8, 3, &mut b);
        assert_ne!(a, b);
        payload_block(7, 4, &mut b);
        assert_ne!(a, b);
        // A shorter fill is a prefix of a longer one.
        let mut c = vec![0u8; 13];
        payload_block(7, 3, &mut c);
        assert_eq!(&a[..13], &c[..]);
        assert_eq!(payload_sha256(1 << 20, 1), payload_sha256(1 << 20, 1));
        assert_ne!(payload_sha256(1 << 20, 1), payload_sha256(1 << 20, 2));
    }
    #[test]
    fn payload_digest_matches_the_stream() {
        let bytes = 3 * BLOCK as u64 + 17;
        let mut all = Vec::new();
        for_each_block(5, bytes, |b| {
            all.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(all.len() as u64, bytes);
        let direct = ring::digest::digest(&SHA256, &all);
        assert_eq!(payload_sha256(bytes, 5).as_slice(), direct.as_ref());
        // The empty transfer hashes to SHA-256 of nothing.
        assert_eq!(
            hex(&payload_sha256(0, 5)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
