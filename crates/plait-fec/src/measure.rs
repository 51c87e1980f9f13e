//! Clock-free measurement helpers: how many packets a decoder needs.
//!
//! Used by the `lt_fig4` and `codes_table` examples, the `codes` bench and the tests.
//! Losses are drawn from ChaCha8 keyed by a caller's seed, so every count is reproducible.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::codec::{FountainDecoder, FountainEncoder, Progress};

/// Packets of one transfer: sent by the encoder, received (not erased) by the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    pub sent: usize,
    pub received: usize,
}

/// Feeds `decoder` the packets of `encoder`, each erased with probability `loss` (drawn
/// from ChaCha8 seeded with `loss_seed`), until it completes or `max_received` packets
/// have arrived. Returns the counts when it completed. Packets the decoder refuses count
/// as received.
pub fn transfer<E: FountainEncoder, D: FountainDecoder>(
    encoder: &mut E,
    decoder: &mut D,
    loss: f64,
    loss_seed: u64,
    max_received: usize,
) -> Option<Transfer> {
    let mut rng = ChaCha8Rng::seed_from_u64(loss_seed);
    let mut packet = Vec::with_capacity(encoder.packet_len());
    let (mut sent, mut received) = (0, 0);
    while received < max_received {
        encoder.next_packet(&mut packet);
        sent += 1;
        let draw = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if draw < loss {
            continue;
        }
        received += 1;
        if let Ok(Progress::Complete) = decoder.handle_packet(&packet) {
            return Some(Transfer { sent, received });
        }
    }
    None
}

/// [`transfer`]'s count of received packets.
pub fn packets_to_decode<E: FountainEncoder, D: FountainDecoder>(
    encoder: &mut E,
    decoder: &mut D,
    loss: f64,
    loss_seed: u64,
    max_received: usize,
) -> Option<usize> {
    transfer(encoder, decoder, loss, loss_seed, max_received).map(|t| t.received)
}

/// The packets a decoder receives when `encoder` sends `sent` packets through the same
/// erasure draw as [`transfer`] (for benchmarks: encode once, decode many times).
pub fn received_packets<E: FountainEncoder>(
    encoder: &mut E,
    sent: usize,
    loss: f64,
    loss_seed: u64,
) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(loss_seed);
    let mut out = Vec::new();
    for _ in 0..sent {
        let mut packet = Vec::with_capacity(encoder.packet_len());
        encoder.next_packet(&mut packet);
        let draw = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if draw >= loss {
            out.push(packet);
        }
    }
    out
}

/// The `q`-quantile (0..=1, nearest rank) of sorted `values`.
pub fn quantile(sorted: &[usize], q: f64) -> Option<usize> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Deterministic source bytes for tests and measurements.
pub fn source_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = vec![0u8; len];
    for chunk in out.chunks_mut(8) {
        let w = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
    out
}
