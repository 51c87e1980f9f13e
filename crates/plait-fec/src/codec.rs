//! The small seam every fountain code in this crate implements, and its typed errors.
//!
//! An encoder produces packets (a code-specific header with the symbol id, then exactly
//! `symbol_size` payload bytes); a decoder takes packets in any order, with losses and
//! duplicates, until it holds the k source symbols. Both sides agree on the parameters
//! (k, symbol size, code parameters, chunk seed) out of band: a packet carries only its id.
//!
//! Invariants: `handle_packet` never panics on any byte string; a rejected packet leaves
//! the decoder as it was (except [`SymbolError::Inconsistent`], see there).

use thiserror::Error;

/// The sending half of a fountain code.
pub trait FountainEncoder {
    /// Length of every packet this encoder writes (header plus one symbol).
    fn packet_len(&self) -> usize;
    /// Clears `out` and writes the next encoded packet into it.
    fn next_packet(&mut self, out: &mut Vec<u8>);
}

/// The receiving half of a fountain code.
pub trait FountainDecoder {
    /// Takes one received packet. Packets may come in any order, repeated or not at all.
    fn handle_packet(&mut self, packet: &[u8]) -> Result<Progress, SymbolError>;
    /// Whether all k source symbols are known.
    fn is_complete(&self) -> bool;
    /// The k source symbols, concatenated, once complete.
    fn source(&self) -> Option<&[u8]>;
}

/// What a decoder knows after a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Some source symbols are still unknown.
    NeedMore,
    /// All k source symbols are known: [`FountainDecoder::source`] returns them.
    Complete,
}

/// Why a packet was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SymbolError {
    /// Shorter than a header plus one symbol.
    #[error("truncated packet: {len} bytes, expected {expected}")]
    Truncated { len: usize, expected: usize },
    /// Longer than a header plus one symbol.
    #[error("oversized packet: {len} bytes, expected {expected}")]
    Oversized { len: usize, expected: usize },
    /// The id lies outside what this decoder accepts.
    #[error("symbol id {id} out of range (max {max})")]
    IdOutOfRange { id: u32, max: u32 },
    /// RaptorQ: the packet belongs to another source block.
    #[error("packet for source block {got}, this decoder decodes block {expected}")]
    WrongBlock { got: u8, expected: u8 },
    /// The packet contradicts symbols already decoded (all its source symbols were known and
    /// their XOR differs from its payload): corruption or a packet of another chunk. LT has
    /// no integrity check of its own: packets must be authenticated before they get here.
    /// When this is found while peeling, the symbols derived in the same call may be wrong.
    #[error("symbol {id} is inconsistent with the symbols already decoded")]
    Inconsistent { id: u32 },
    /// Accepting the packet would exceed the decoder's stated memory bound.
    #[error("decoder full: {what} limit {limit} reached")]
    Full { what: &'static str, limit: usize },
}

/// Why a code could not be set up.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ParamError {
    #[error("k = {k} out of range 1..={max}")]
    K { k: usize, max: usize },
    #[error("symbol size {0} out of range 1..=65535")]
    SymbolSize(usize),
    #[error("c = {0} must be finite and > 0")]
    C(f64),
    #[error("delta = {0} must lie in (0, 1)")]
    Delta(f64),
    #[error("source is {len} bytes, expected k * symbol_size = {expected}")]
    SourceLength { len: usize, expected: usize },
    #[error("limit {what} = {value} must be at least {min}")]
    Limit {
        what: &'static str,
        value: usize,
        min: usize,
    },
}
