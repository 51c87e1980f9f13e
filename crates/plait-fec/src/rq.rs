//! RaptorQ (RFC 6330) through the `raptorq` crate, behind [`FountainEncoder`] and
//! [`FountainDecoder`]: one source block (SBN 0) of k symbols, no sub-blocks, alignment 1.
//!
//! Packet format: RFC 6330 §3.2's FEC Payload ID (SBN: u8, ESI: u24 big-endian) then
//! exactly `symbol_size` bytes. ESIs 0..k are the source symbols (systematic), k and up
//! repair symbols.
//!
//! The `raptorq` crate asserts on malformed input (a packet for another block, a payload
//! of the wrong size): every packet is checked here first, so only well-formed packets for
//! this block reach it. Memory bound: at most `max_packets` distinct packets are held
//! (`max_packets * symbol_size` bytes plus the crate's decoding matrices, which grow with
//! k); duplicates are dropped by ESI before the crate sees them.

use std::collections::BTreeSet;

use raptorq::{
    EncodingPacket, ObjectTransmissionInformation, PayloadId, SourceBlockDecoder,
    SourceBlockEncoder,
};

use crate::codec::{FountainDecoder, FountainEncoder, ParamError, Progress, SymbolError};

/// Bytes before the payload in a RaptorQ packet: RFC 6330's FEC Payload ID.
pub const RQ_HEADER_LEN: usize = 4;
/// RFC 6330 §5.1.2: K'_max, the most source symbols in one block.
pub const RQ_MAX_K: usize = 56403;
/// RFC 6330 §3.2: ESIs are 24 bits.
pub const RQ_MAX_ESI: u32 = (1 << 24) - 1;
/// The one source block number this wrapper uses.
const SBN: u8 = 0;

/// What both ends of a RaptorQ block agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RqParams {
    /// Source symbols in the block, 1..=56403.
    pub k: usize,
    /// Bytes per symbol, 1..=65535.
    pub symbol_size: usize,
    /// Most distinct packets the decoder holds; further ones get [`SymbolError::Full`].
    pub max_packets: usize,
    /// Largest ESI the decoder accepts (at most [`RQ_MAX_ESI`]).
    pub max_esi: u32,
}

impl RqParams {
    /// k symbols of `symbol_size` bytes; the decoder holds at most 2k + 16 packets and
    /// accepts every 24-bit ESI.
    pub fn new(k: usize, symbol_size: usize) -> Self {
        Self {
            k,
            symbol_size,
            max_packets: 2 * k + 16,
            max_esi: RQ_MAX_ESI,
        }
    }

    fn check(&self) -> Result<ObjectTransmissionInformation, ParamError> {
        if self.k == 0 || self.k > RQ_MAX_K {
            return Err(ParamError::K {
                k: self.k,
                max: RQ_MAX_K,
            });
        }
        if self.symbol_size == 0 || self.symbol_size > 65535 {
            return Err(ParamError::SymbolSize(self.symbol_size));
        }
        if self.max_packets < self.k {
            return Err(ParamError::Limit {
                what: "max_packets",
                value: self.max_packets,
                min: self.k,
            });
        }
        let transfer = (self.k * self.symbol_size) as u64;
        Ok(ObjectTransmissionInformation::new(
            transfer,
            self.symbol_size as u16,
            1,
            1,
            1,
        ))
    }

    /// Length of every packet of this block.
    pub fn packet_len(&self) -> usize {
        RQ_HEADER_LEN + self.symbol_size
    }
}

/// Encodes one RaptorQ source block.
pub struct RqEncoder {
    params: RqParams,
    inner: SourceBlockEncoder,
    source: Vec<u8>,
    next_esi: u32,
}

impl std::fmt::Debug for RqEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RqEncoder")
            .field("params", &self.params)
            .field("next_esi", &self.next_esi)
            .finish()
    }
}

impl RqEncoder {
    /// An encoder over `source`, exactly k * symbol_size bytes.
    pub fn new(params: RqParams, source: &[u8]) -> Result<Self, ParamError> {
        let oti = params.check()?;
        let expected = params.k * params.symbol_size;
        if source.len() != expected {
            return Err(ParamError::SourceLength {
                len: source.len(),
                expected,
            });
        }
        Ok(Self {
            inner: SourceBlockEncoder::new(SBN, &oti, source),
            source: source.to_vec(),
            params,
            next_esi: 0,
        })
    }

    /// Clears `out` and writes the packet for `esi` (masked to 24 bits).
    pub fn encode_into(&self, esi: u32, out: &mut Vec<u8>) {
        let esi = esi & RQ_MAX_ESI;
        let t = self.params.symbol_size;
        out.clear();
        out.extend_from_slice(&PayloadId::new(SBN, esi).serialize());
        let k = self.params.k as u32;
        if esi < k {
            let i = esi as usize;
            out.extend_from_slice(&self.source[i * t..(i + 1) * t]);
        } else {
            let packet = self.inner.repair_packets(esi - k, 1);
            if let Some(p) = packet.first() {
                out.extend_from_slice(p.data());
            }
        }
    }
}

impl FountainEncoder for RqEncoder {
    fn packet_len(&self) -> usize {
        self.params.packet_len()
    }

    /// ESIs 0, 1, 2, ...; after the last 24-bit ESI, repair ESIs start again at k.
    fn next_packet(&mut self, out: &mut Vec<u8>) {
        let esi = self.next_esi;
        self.next_esi = if esi >= RQ_MAX_ESI {
            self.params.k as u32
        } else {
            esi + 1
        };
        self.encode_into(esi, out);
    }
}

/// Decodes one RaptorQ source block.
pub struct RqDecoder {
    params: RqParams,
    inner: SourceBlockDecoder,
    seen: BTreeSet<u32>,
    result: Option<Vec<u8>>,
}

impl std::fmt::Debug for RqDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RqDecoder")
            .field("params", &self.params)
            .field("received", &self.seen.len())
            .field("complete", &self.result.is_some())
            .finish()
    }
}

impl RqDecoder {
    /// A decoder for one block.
    pub fn new(params: RqParams) -> Result<Self, ParamError> {
        let oti = params.check()?;
        let length = (params.k * params.symbol_size) as u64;
        Ok(Self {
            inner: SourceBlockDecoder::new(SBN, &oti, length),
            params,
            seen: BTreeSet::new(),
            result: None,
        })
    }

    /// Distinct packets held.
    pub fn received(&self) -> usize {
        self.seen.len()
    }

    /// Checks a packet's length, block and ESI; returns the ESI.
    fn validate(&self, packet: &[u8]) -> Result<u32, SymbolError> {
        let expected = self.params.packet_len();
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
        if packet[0] != SBN {
            return Err(SymbolError::WrongBlock {
                got: packet[0],
                expected: SBN,
            });
        }
        let esi = u32::from_be_bytes([0, packet[1], packet[2], packet[3]]);
        let max = self.params.max_esi.min(RQ_MAX_ESI);
        if esi > max {
            return Err(SymbolError::IdOutOfRange { id: esi, max });
        }
        Ok(esi)
    }
}

impl FountainDecoder for RqDecoder {
    fn handle_packet(&mut self, packet: &[u8]) -> Result<Progress, SymbolError> {
        let esi = self.validate(packet)?;
        if self.result.is_some() || self.seen.contains(&esi) {
            return Ok(if self.result.is_some() {
                Progress::Complete
            } else {
                Progress::NeedMore
            });
        }
        if self.seen.len() >= self.params.max_packets {
            return Err(SymbolError::Full {
                what: "max_packets",
                limit: self.params.max_packets,
            });
        }
        self.seen.insert(esi);
        let packet =
            EncodingPacket::new(PayloadId::new(SBN, esi), packet[RQ_HEADER_LEN..].to_vec());
        self.result = self.inner.decode(std::iter::once(packet));
        Ok(if self.result.is_some() {
            Progress::Complete
        } else {
            Progress::NeedMore
        })
    }

    fn is_complete(&self) -> bool {
        self.result.is_some()
    }

    fn source(&self) -> Option<&[u8]> {
        self.result.as_deref()
    }
}
