//! The receiver's half of packet-mode FEC: recent source packets and the repair symbols of
//! recent blocks, and the rebuilding of lost packets (docs/protocol.md#fec).
//!
//! While the store is active (the peer protects packets: a repair symbol arrived within
//! the last [`WINDOW`] numbers; or always, if made so), it keeps a copy of each fresh DATA
//! payload; otherwise it keeps nothing, so a peer that sends no symbols costs no copies.
//! A block is decoded when every piece of it (`codec::part_range`) has symbols and held
//! sources reaching `k` while a source is missing; then it is done and its symbols are
//! freed. Rebuilt packets are returned to the session, which passes them through the
//! duplicate filter (so a packet is never delivered twice, whichever copy comes first).
//!
//! Bounds (hard, whatever the peer sends): at most [`MAX_SOURCES`] source packets and
//! [`MAX_SOURCE_BYTES`] of their payload; at most [`MAX_BLOCKS`] blocks and
//! [`MAX_BLOCK_BYTES`] of symbols. Beyond, the oldest (lowest numbered) go first. Sources
//! and blocks more than [`WINDOW`] numbers below the newest are forgotten. A block whose
//! source is still missing when it is forgotten counts as unrecovered.

use std::collections::BTreeMap;

use super::{FecError, codec};
use crate::ids::GlobalSeq;
use crate::wire::{FEC_SPAN, FecRepairRepr};

/// Most source packets kept.
pub const MAX_SOURCES: usize = 4096;
/// Most payload bytes of source packets kept.
pub const MAX_SOURCE_BYTES: usize = 4 << 20;
/// Most blocks tracked.
pub const MAX_BLOCKS: usize = 512;
/// Most bytes of repair symbols kept.
pub const MAX_BLOCK_BYTES: usize = 4 << 20;
/// Sources and blocks this far below the newest number seen are forgotten.
pub const WINDOW: u64 = 4096;

#[derive(Debug)]
struct Block {
    mask: u32,
    repair_count: u8,
    /// Each piece's symbol length, once a symbol of it has arrived (one entry per piece).
    part_lens: Vec<Option<usize>>,
    /// Symbol `index` of piece `part` at `part * repair_count + index`.
    symbols: Vec<Option<Vec<u8>>>,
    done: bool,
}

impl Block {
    fn bytes(&self) -> usize {
        self.symbols.iter().flatten().map(Vec::len).sum()
    }
}

/// Counters of the decoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Repair symbols accepted.
    pub symbols: u64,
    /// Repair symbols refused (inconsistent with their block, out of window, duplicates).
    pub refused: u64,
    /// Source packets rebuilt.
    pub recovered: u64,
    /// Blocks forgotten with a source missing and too few symbols.
    pub unrecovered: u64,
}

/// The receiver's FEC store (see the module docs).
#[derive(Debug, Default)]
pub struct FecDecoder {
    always: bool,
    sources: BTreeMap<GlobalSeq, Vec<u8>>,
    source_bytes: usize,
    blocks: BTreeMap<GlobalSeq, Block>,
    block_bytes: usize,
    newest: GlobalSeq,
    /// Sources below this number arrived while nothing was kept: a block reaching below
    /// it cannot tell lost from not kept, so it is not counted unrecovered.
    kept_from: GlobalSeq,
    /// Counters.
    pub stats: DecoderStats,
}

impl FecDecoder {
    /// A store; `always`: keep sources even before any symbol has arrived (tests).
    pub fn new(always: bool) -> FecDecoder {
        FecDecoder {
            always,
            ..FecDecoder::default()
        }
    }

    /// Whether the peer protects packets: a repair symbol arrived within the last
    /// [`WINDOW`] numbers (the store remembers its block until then).
    pub fn peer_protects(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// Payload bytes held (sources and symbols) and blocks tracked.
    pub fn held(&self) -> (usize, usize) {
        (self.source_bytes + self.block_bytes, self.blocks.len())
    }

    /// A fresh DATA packet `global` arrived: keep it, and rebuild what it completes.
    pub fn on_source(&mut self, global: GlobalSeq, payload: &[u8]) -> Vec<(GlobalSeq, Vec<u8>)> {
        if !self.always && !self.peer_protects() {
            if !self.sources.is_empty() {
                self.sources.clear();
                self.source_bytes = 0;
            }
            self.kept_from = self.kept_from.max(global + 1);
            return Vec::new();
        }
        self.advance(global);
        if global + WINDOW <= self.newest || self.sources.contains_key(&global) {
            return Vec::new();
        }
        self.source_bytes += payload.len();
        self.sources.insert(global, payload.to_vec());
        self.trim_sources();
        let mut out = Vec::new();
        let from = global.saturating_sub(FEC_SPAN - 1);
        let firsts: Vec<GlobalSeq> = self
            .blocks
            .range(from..=global)
            .filter(|(f, b)| !b.done && b.mask & (1u32 << (global - **f)) != 0)
            .map(|(f, _)| *f)
            .collect();
        for first in firsts {
            out.extend(self.try_decode(first));
        }
        out
    }

    /// A repair symbol for the block starting at `first` (expanded by the session).
    /// Returns the packets it lets the store rebuild.
    pub fn on_repair(
        &mut self,
        first: GlobalSeq,
        repr: &FecRepairRepr<'_>,
    ) -> Result<Vec<(GlobalSeq, Vec<u8>)>, FecError> {
        if first + WINDOW <= self.newest {
            self.stats.refused += 1;
            return Err(FecError::OutOfWindow);
        }
        let symbol_len = repr.symbol.len();
        let r = usize::from(repr.repair_count);
        let parts = usize::from(repr.parts);
        let block = self.blocks.entry(first).or_insert_with(|| Block {
            mask: repr.mask,
            repair_count: repr.repair_count,
            part_lens: vec![None; parts],
            symbols: vec![None; r * parts],
            done: false,
        });
        let part = usize::from(repr.part);
        let len_known = block.part_lens.get(part).copied().flatten();
        if block.mask != repr.mask
            || block.repair_count != repr.repair_count
            || block.part_lens.len() != parts
            || len_known.is_some_and(|l| l != symbol_len)
        {
            self.stats.refused += 1;
            return Err(FecError::Inconsistent);
        }
        if block.done {
            return Ok(Vec::new());
        }
        let Some(slot) = block.symbols.get_mut(part * r + usize::from(repr.index)) else {
            self.stats.refused += 1;
            return Err(FecError::Inconsistent);
        };
        if slot.is_some() {
            self.stats.refused += 1;
            return Ok(Vec::new());
        }
        *slot = Some(repr.symbol.to_vec());
        if let Some(l) = block.part_lens.get_mut(part) {
            *l = Some(symbol_len);
        }
        self.block_bytes += symbol_len;
        self.stats.symbols += 1;
        self.advance(first);
        self.trim_blocks();
        Ok(self.try_decode(first))
    }

    fn advance(&mut self, global: GlobalSeq) {
        if global <= self.newest {
            return;
        }
        self.newest = global;
        let floor = global.saturating_sub(WINDOW);
        while let Some((&s, _)) = self.sources.first_key_value() {
            if s >= floor {
                break;
            }
            self.pop_source();
        }
        while let Some((&f, _)) = self.blocks.first_key_value() {
            if f >= floor {
                break;
            }
            self.pop_block();
        }
    }

    fn trim_sources(&mut self) {
        while self.sources.len() > MAX_SOURCES || self.source_bytes > MAX_SOURCE_BYTES {
            self.pop_source();
        }
    }

    fn trim_blocks(&mut self) {
        while self.blocks.len() > MAX_BLOCKS || self.block_bytes > MAX_BLOCK_BYTES {
            self.pop_block();
        }
    }

    fn pop_source(&mut self) {
        if let Some((_, p)) = self.sources.pop_first() {
            self.source_bytes -= p.len();
        }
    }

    fn pop_block(&mut self) {
        if let Some((first, b)) = self.blocks.pop_first() {
            self.block_bytes -= b.bytes();
            if !b.done && first >= self.kept_from && self.missing(first, b.mask) > 0 {
                self.stats.unrecovered += 1;
            }
        }
    }

    fn missing(&self, first: GlobalSeq, mask: u32) -> usize {
        bits(mask)
            .filter(|i| !self.sources.contains_key(&(first + *i as u64)))
            .count()
    }

    /// Decodes block `first` if it can and needs to; marks it done when it no longer needs
    /// symbols (nothing missing, rebuilt, or found inconsistent).
    fn try_decode(&mut self, first: GlobalSeq) -> Vec<(GlobalSeq, Vec<u8>)> {
        let Some(block) = self.blocks.get(&first) else {
            return Vec::new();
        };
        if block.done {
            return Vec::new();
        }
        let k = block.mask.count_ones() as usize;
        let mut sources: Vec<(usize, &[u8])> = Vec::with_capacity(k);
        for (index, offset) in bits(block.mask).enumerate() {
            if let Some(p) = self.sources.get(&(first + offset as u64)) {
                sources.push((index, p.as_slice()));
            }
        }
        let r = usize::from(block.repair_count).max(1);
        let repairs: Vec<Vec<(usize, &[u8])>> = block
            .symbols
            .chunks(r)
            .map(|piece| {
                piece
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.as_deref().map(|s| (i, s)))
                    .collect()
            })
            .collect();
        let result = if sources.len() == k {
            Ok(Vec::new())
        } else if repairs.iter().any(|rep| sources.len() + rep.len() < k) {
            return Vec::new();
        } else {
            // Every piece has a symbol here (k > sources), so every length is known.
            let lens: Option<Vec<usize>> = block.part_lens.iter().copied().collect();
            match lens {
                Some(lens) => codec::decode_block(
                    k,
                    usize::from(block.repair_count),
                    &lens,
                    &sources,
                    &repairs,
                ),
                None => Err(FecError::Inconsistent),
            }
        };
        let offsets: Vec<u32> = bits(block.mask).collect();
        let recovered = match result {
            Ok(r) => r,
            Err(_) => {
                self.stats.refused += 1;
                Vec::new()
            }
        };
        if let Some(b) = self.blocks.get_mut(&first) {
            self.block_bytes -= b.bytes();
            b.symbols.iter_mut().for_each(|s| *s = None);
            b.done = true;
        }
        let mut out = Vec::with_capacity(recovered.len());
        for (index, packet) in recovered {
            if let Some(off) = offsets.get(index) {
                self.stats.recovered += 1;
                out.push((first + u64::from(*off), packet));
            }
        }
        out
    }
}

/// Offsets of the set bits of `mask`, lowest first.
fn bits(mask: u32) -> impl Iterator<Item = u32> {
    (0..32u32).filter(move |i| mask & (1 << i) != 0)
}
