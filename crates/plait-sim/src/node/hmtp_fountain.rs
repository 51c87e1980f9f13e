//! The sending half of seed HMTP's fountain layer (§III-A steps 1 to 3, 5 and 6), apart
//! from any transport: which chunk the next symbol belongs to, the symbol itself, and what
//! the receiver's reports change.
//!
//! - The source is infinite (an FTP application) and cut into chunks of k source symbols;
//!   every symbol is a fresh LT symbol (plait-fec's encoder, the seed's robust soliton) of
//!   one chunk, tagged with the chunk id.
//! - A chunk's goal is k' symbols at the receiver. A symbol the transport reports lost
//!   owes its chunk one more (the seed: "the SN ... of the lost packet is assigned to the
//!   newly generated fountain-encoded packet"); a chunk whose receiver holds its goal
//!   without having decoded gets alpha more (step 6, and step 9's "waits for additional
//!   packets"); a decoded chunk closes.
//! - Pipelining (§III-A: "HMTP immediately starts a new transmission for the next chunk"):
//!   the next symbol goes to the oldest open chunk short of its goal; when none is short a
//!   new chunk opens, up to `max_open`; beyond that the oldest chunk gets an extra symbol,
//!   so no path ever waits for feedback.
//!
//! Where it differs from the seed: the seed gives the replacement symbol to the chunk
//! being sent and tops a chunk up by alpha once feedback shows it short of k'; here the
//! loss is owed to its own chunk and paid by the next symbol sent (the oldest short chunk
//! goes first), which reaches the same counts without waiting for feedback. What the
//! seed does when `max_open` chunks are open is not said.
//!
//! Invariants: a symbol id is never used twice in a chunk; at most `max_open` chunks are
//! open; the open chunks are in the order they opened.

use std::collections::VecDeque;

use plait_fec::LtEncoder;

use super::HmtpConfig;
use crate::packet::ChunkReport;

/// Counters of the sending fountain layer (and of the transport's refills).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HmtpSenderStats {
    /// Encoded symbols sent.
    pub symbols_sent: u64,
    /// Lost sequence numbers refilled with a fresh symbol (the transport's retransmissions).
    pub refills: u64,
    /// Symbols sent beyond every open chunk's goal (all `max_open` chunks in flight).
    pub extra_symbols: u64,
    /// Chunks opened.
    pub chunks_opened: u64,
    /// Chunks the receiver reported decoded.
    pub chunks_done: u64,
    /// Alpha top-ups (a chunk held its goal without decoding).
    pub alpha_rounds: u64,
    /// Chunk reports received.
    pub reports: u64,
    /// Chunks whose encoder could not be built (bad parameters; none with the defaults).
    pub encoder_errors: u64,
}

/// One open chunk.
#[derive(Debug)]
struct ChunkTx {
    id: u32,
    enc: LtEncoder,
    next_symbol: u32,
    sent: u32,
    lost: u32,
    /// Symbols the receiver should hold (k', raised by alpha on a failed decode).
    goal: u32,
    /// The most the receiver reported holding.
    received: u32,
}

impl ChunkTx {
    fn short(&self) -> bool {
        self.sent.saturating_sub(self.lost) < self.goal
    }
}

/// The sending fountain layer (see the module docs).
#[derive(Debug)]
pub struct FountainTx {
    cfg: HmtpConfig,
    open: VecDeque<ChunkTx>,
    next_chunk: u32,
    scratch: Vec<u8>,
    pub(super) stats: HmtpSenderStats,
}

impl FountainTx {
    /// Nothing sent yet.
    pub fn new(cfg: HmtpConfig) -> FountainTx {
        FountainTx {
            cfg,
            open: VecDeque::new(),
            next_chunk: 0,
            scratch: Vec::new(),
            stats: HmtpSenderStats::default(),
        }
    }

    /// Chunks open now.
    pub fn open_chunks(&self) -> usize {
        self.open.len()
    }

    /// The symbol of chunk `chunk` was lost (the transport is about to refill its slot).
    pub fn on_lost(&mut self, chunk: u32) {
        self.stats.refills += 1;
        if let Some(c) = self.open.iter_mut().find(|c| c.id == chunk) {
            c.lost += 1;
        }
    }

    /// The next symbol: its chunk and the LT packet (symbol id, symbol); `None` only if no
    /// chunk could be opened.
    pub fn next_symbol(&mut self) -> Option<(u32, Vec<u8>)> {
        let i = self.pick_chunk()?;
        let c = &mut self.open[i];
        c.enc.encode_into(c.next_symbol, &mut self.scratch);
        c.next_symbol = c.next_symbol.wrapping_add(1);
        c.sent += 1;
        self.stats.symbols_sent += 1;
        Some((c.id, self.scratch.clone()))
    }

    /// Seed HMTP §III-A steps 6 to 8: the receiver's count and verdict on one chunk.
    pub fn on_report(&mut self, r: &ChunkReport) {
        self.stats.reports += 1;
        let Some(i) = self.open.iter().position(|c| c.id == r.chunk) else {
            return;
        };
        if r.decoded {
            self.open.remove(i);
            self.stats.chunks_done += 1;
            return;
        }
        let alpha = self.cfg.alpha.max(1);
        let c = &mut self.open[i];
        c.received = c.received.max(r.received);
        if c.received >= c.goal {
            c.goal = c.received.saturating_add(alpha);
            self.stats.alpha_rounds += 1;
        }
    }

    /// Index of the open chunk the next symbol belongs to, opening one if needed.
    fn pick_chunk(&mut self) -> Option<usize> {
        if let Some(i) = self.open.iter().position(ChunkTx::short) {
            return Some(i);
        }
        if self.open.len() < self.cfg.max_open.max(1) {
            let id = self.next_chunk;
            self.next_chunk = self.next_chunk.wrapping_add(1);
            self.stats.chunks_opened += 1;
            let source = self.cfg.source(id);
            return match LtEncoder::new(self.cfg.lt_params(id), &source) {
                Ok(enc) => {
                    self.open.push_back(ChunkTx {
                        id,
                        enc,
                        next_symbol: 0,
                        sent: 0,
                        lost: 0,
                        goal: self.cfg.k_prime,
                        received: 0,
                    });
                    Some(self.open.len() - 1)
                }
                Err(_) => {
                    self.stats.encoder_errors += 1;
                    None
                }
            };
        }
        self.stats.extra_symbols += 1;
        (!self.open.is_empty()).then_some(0)
    }
}
