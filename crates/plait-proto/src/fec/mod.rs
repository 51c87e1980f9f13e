//! Forward error correction for packet mode (docs/protocol.md#fec; issue 18, item 4).
//!
//! The sender groups inner packets, in global-sequence order, into small blocks (at most
//! [`FecConfig::max_block`] packets within [`crate::wire::FEC_SPAN`] consecutive numbers,
//! closed after [`FecConfig::max_block_delay`] at the latest) and sends `r` Reed-Solomon
//! repair symbols per block in FEC_REPAIR frames, on the path losing least. `r` follows
//! the measured random loss of the paths the block's packets took (`sizing.rs`). The
//! receiver rebuilds missing packets once it holds any `k` of a block's `k + r` symbols
//! and hands them to the reorder buffer through the duplicate filter, so nothing is
//! delivered twice. The code is systematic: the source packets travel unchanged as DATA.
//!
//! Files: `codec.rs` (shard layout and the Reed-Solomon code of the `reed-solomon-simd`
//! crate), `sizing.rs` (how many repair symbols), `encoder.rs` (sender blocks),
//! `decoder.rs` (receiver store, hard memory bounds). Everything is deterministic: no
//! clock, no randomness (seed HMTP §III codes over symbols; plait's blocks are small
//! and systematic because packet mode cannot wait for a chunk of a thousand packets).

mod codec;
mod decoder;
mod encoder;
mod sizing;

#[cfg(test)]
mod proptests;

use std::time::Duration;

use thiserror::Error;

pub use codec::{decode_block, encode_block, part_range, parts_for, shard_len};
pub use decoder::{FecDecoder, MAX_BLOCK_BYTES, MAX_BLOCKS, MAX_SOURCE_BYTES, MAX_SOURCES};
pub use encoder::{FecEncoder, MAX_PENDING_SYMBOLS, PendingSymbol};
pub use sizing::repair_count;

/// Which inner packets a sender protects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FecPolicy {
    /// None.
    Off,
    /// Packets of sparse IP flows: flows the send queue meters at or below
    /// [`FecConfig::sparse_below_bps`] (a call, a game, a video stream; not bulk TCP,
    /// which recovers by itself or uses stream mode). Non-IP packets are never sparse.
    Sparse,
    /// Every inner packet (the default). Only packets sent on a path with measured random
    /// loss (confirmed losses while its queue was short, docs/protocol.md#loss-detection)
    /// join blocks, so while every path is clean nothing is sent.
    #[default]
    All,
}

impl FecPolicy {
    /// Parses a configuration name: `off`, `sparse` or `all`.
    pub fn from_name(name: &str) -> Option<FecPolicy> {
        match name {
            "off" => Some(FecPolicy::Off),
            "sparse" => Some(FecPolicy::Sparse),
            "all" => Some(FecPolicy::All),
            _ => None,
        }
    }

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            FecPolicy::Off => "off",
            FecPolicy::Sparse => "sparse",
            FecPolicy::All => "all",
        }
    }
}

/// FEC tunables (docs/protocol.md#fec).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FecConfig {
    /// Which packets are protected.
    pub policy: FecPolicy,
    /// Most source packets per block (`k`), 1..=32.
    pub max_block: usize,
    /// A block closes this long after its first packet at the latest.
    pub max_block_delay: Duration,
    /// Fewest repair symbols per block (0: none while no path shows random loss).
    pub min_repair: u8,
    /// Most repair symbols per block, 1..=15.
    pub max_repair: u8,
    /// `r` is the smallest that brings the expected fraction of a block's packets left
    /// unrecovered to at most this (from the paths' measured random loss).
    pub target_residual: f64,
    /// Flows at or below this rate are sparse for [`FecPolicy::Sparse`], bit/s.
    pub sparse_below_bps: u64,
}

impl Default for FecConfig {
    fn default() -> Self {
        FecConfig {
            policy: FecPolicy::default(),
            max_block: 16,
            max_block_delay: Duration::from_millis(20),
            min_repair: 0,
            max_repair: 6,
            target_residual: 5e-4,
            sparse_below_bps: 8_000_000,
        }
    }
}

/// Why an FEC block or symbol was refused.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum FecError {
    /// A symbol disagrees with what the block already has (mask, repair count or length),
    /// or a source packet is longer than the block's symbols allow.
    #[error("FEC symbol inconsistent with its block")]
    Inconsistent,
    /// A symbol for a block too far from the newest (outside the store's window).
    #[error("FEC symbol for a block outside the window")]
    OutOfWindow,
    /// The erasure code refused the shards (wrong counts or sizes).
    #[error("erasure code refused the block")]
    Code,
    /// Fewer than `k` symbols: nothing can be rebuilt yet.
    #[error("not enough symbols to decode")]
    NotEnough,
}
