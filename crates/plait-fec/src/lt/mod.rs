//! The LT code of seed HMTP §III: parameters, the packet format, encoder and decoder.
//!
//! Packet format (all chunk parameters are agreed out of band, per chunk):
//! `symbol id: u32 big-endian` then exactly `symbol_size` payload bytes. The seed's
//! fountain header carries "the chunk ID and the seed for the pseudo-random number
//! generator" (§III-A step 3); plait derives each symbol's generator from the chunk seed
//! and the symbol id (see [`neighbours`]), so the id is the only per-packet field here and
//! the chunk id belongs to the framing layer above.

mod decoder;
mod encoder;
pub mod neighbours;

pub use decoder::{LtDecoder, LtLimits, LtStats};
pub use encoder::LtEncoder;

use crate::codec::{ParamError, SymbolError};
use crate::soliton::RobustSoliton;

/// Bytes before the payload in an LT packet: the symbol id.
pub const LT_HEADER_LEN: usize = 4;

/// What both ends of an LT chunk must agree on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LtParams {
    /// Source symbols per chunk (seed HMTP: k = 1000).
    pub k: usize,
    /// Bytes per symbol (the seed's L).
    pub symbol_size: usize,
    /// Robust soliton constant c (seed HMTP §III-B; §V-A uses 0.057).
    pub c: f64,
    /// Robust soliton target failure probability delta (seed HMTP: 0.03).
    pub delta: f64,
    /// Keys the per-symbol generator; fresh per chunk.
    pub chunk_seed: u64,
}

impl LtParams {
    /// The seed's parameters (§IV: k = 1000, delta = 0.03; §V-A: c = 0.057) for a symbol
    /// size and a chunk seed.
    pub fn hmtp(symbol_size: usize, chunk_seed: u64) -> Self {
        Self {
            k: 1000,
            symbol_size,
            c: 0.057,
            delta: 0.03,
            chunk_seed,
        }
    }

    /// Checks the parameters and builds the degree distribution.
    pub fn distribution(&self) -> Result<RobustSoliton, ParamError> {
        if self.symbol_size == 0 || self.symbol_size > 65535 {
            return Err(ParamError::SymbolSize(self.symbol_size));
        }
        RobustSoliton::new(self.k, self.c, self.delta)
    }

    /// Length of every packet of this chunk.
    pub fn packet_len(&self) -> usize {
        LT_HEADER_LEN + self.symbol_size
    }
}

/// Splits a packet into (id, payload), checking its length only.
pub fn parse_packet(packet: &[u8], symbol_size: usize) -> Result<(u32, &[u8]), SymbolError> {
    let expected = LT_HEADER_LEN + symbol_size;
    if packet.len() < expected {
        return Err(SymbolError::Truncated {
            len: packet.len(),
            expected,
        });
    }
    if packet.len() > expected {
        return Err(SymbolError::Oversized {
            len: packet.len(),
            expected,
        });
    }
    let (head, payload) = packet.split_at(LT_HEADER_LEN);
    let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    Ok((id, payload))
}

/// XORs `src` into `dst` (equal lengths).
pub(crate) fn xor_into(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (a, b) in (&mut d).zip(&mut s) {
        let x = u64::from_ne_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]])
            ^ u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        a.copy_from_slice(&x.to_ne_bytes());
    }
    for (a, b) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *a ^= *b;
    }
}
