//! LT encoder: each packet is one symbol id and the XOR of that id's neighbour set
//! (seed HMTP §III-A step 2: "encoded ... by the modulo-2 addition of packets randomly
//! chosen from among the k original packets").
//!
//! Invariant: the encoder is stateless per symbol; `encode_into(id)` gives the same bytes
//! whenever it is called, and `next_packet` walks ids 0, 1, 2, ... (wrapping at 2^32).

use crate::codec::{FountainEncoder, ParamError};
use crate::lt::neighbours::NeighbourGen;
use crate::lt::{LT_HEADER_LEN, LtParams, xor_into};

/// Encodes one chunk of k source symbols.
#[derive(Debug, Clone)]
pub struct LtEncoder {
    params: LtParams,
    gen_: NeighbourGen,
    source: Vec<u8>,
    next_id: u32,
    scratch: Vec<u32>,
}

impl LtEncoder {
    /// An encoder over `source`, which must be exactly k * symbol_size bytes (pad the last
    /// symbol of a chunk before calling; the chunk length travels in the framing above).
    pub fn new(params: LtParams, source: &[u8]) -> Result<Self, ParamError> {
        let dist = params.distribution()?;
        let expected = params.k * params.symbol_size;
        if source.len() != expected {
            return Err(ParamError::SourceLength {
                len: source.len(),
                expected,
            });
        }
        Ok(Self {
            gen_: NeighbourGen::new(dist, params.chunk_seed),
            params,
            source: source.to_vec(),
            next_id: 0,
            scratch: Vec::new(),
        })
    }

    /// The chunk's parameters.
    pub fn params(&self) -> &LtParams {
        &self.params
    }

    /// Clears `out` and writes the packet for symbol `id`.
    pub fn encode_into(&mut self, id: u32, out: &mut Vec<u8>) {
        let t = self.params.symbol_size;
        out.clear();
        out.extend_from_slice(&id.to_be_bytes());
        out.resize(LT_HEADER_LEN + t, 0);
        self.gen_.neighbours(id, &mut self.scratch);
        let payload = &mut out[LT_HEADER_LEN..];
        for &i in &self.scratch {
            let i = i as usize;
            xor_into(payload, &self.source[i * t..(i + 1) * t]);
        }
    }
}

impl FountainEncoder for LtEncoder {
    fn packet_len(&self) -> usize {
        self.params.packet_len()
    }

    fn next_packet(&mut self, out: &mut Vec<u8>) {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.encode_into(id, out);
    }
}
