//! LT peeling decoder: the message-passing algorithm of seed HMTP §III-B ("we used the
//! message passing algorithm in our decoder") and Luby 2002 (seed ref. [8]).
//!
//! A packet is first reduced by the source symbols already known. What remains is either
//! nothing (a redundant symbol: its payload must then be zero, else
//! [`SymbolError::Inconsistent`]), one unknown source symbol (recovered at once), or a
//! pending symbol with two or more unknown neighbours. Every recovered source symbol is
//! XORed out of the pending symbols that contain it (the ripple); a pending symbol left
//! with one unknown neighbour recovers it. Peeling is monotone: a set of packets that
//! decodes still decodes with more packets added, in any order.
//!
//! Memory bound (a hostile peer chooses ids, hence degrees, but nothing beyond):
//! - the k source symbols, k * symbol_size bytes, allocated up front;
//! - at most `max_pending` pending symbols of symbol_size bytes each, plus 24 bytes of
//!   bookkeeping and one id-map entry each;
//! - at most `max_edges` live edges (pending symbol, unknown source) of 8 bytes, held in
//!   per-source lists (k list headers of 24 bytes; amortised growth can double a list's
//!   capacity); the lists of recovered sources are freed;
//! - scratch: one payload, one neighbour list of at most k ids, a k-bit set.
//!
//! A packet that would exceed a limit is refused with [`SymbolError::Full`]; the decoder
//! stays usable. Duplicates are harmless: the duplicate of a pending symbol is dropped by
//! id; that of a consumed symbol reduces to nothing and is only checked.

use std::collections::BTreeMap;

use crate::codec::{FountainDecoder, ParamError, Progress, SymbolError};
use crate::lt::neighbours::NeighbourGen;
use crate::lt::{LtParams, parse_packet, xor_into};

/// The LT decoder's memory limits beyond the k source symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LtLimits {
    /// Pending (not yet resolved) symbols held at once.
    pub max_pending: usize,
    /// Live (pending symbol, unknown source symbol) edges held at once.
    pub max_edges: usize,
}

impl LtLimits {
    /// The default for k: `max_pending = 2 k + 256`, `max_edges = 48 k + 4096`. Honest
    /// chunks with k = 800 or 1000 peak below (measured by the `lt_fig4` example, see
    /// docs/fec.md: under 1.9 k pending and 26 k edges even at c = 0.01, where decoding
    /// needs up to 1.8 k symbols); small k needs relatively more symbols, hence the
    /// constants. The receiver's memory then stays under (3 k + 256) symbol_size bytes
    /// (k source, the rest pending) + (48 k + 4096) * 16 bytes of edges + O(k) bookkeeping.
    pub fn for_k(k: usize) -> Self {
        Self {
            max_pending: 2 * k + 256,
            max_edges: 48 * k + 4096,
        }
    }
}

#[derive(Debug, Clone)]
struct Slot {
    id: u32,
    /// Bumped when the slot is freed, so stale edges to it are skipped.
    generation: u32,
    live: bool,
    /// Unknown neighbours not yet XORed out.
    remaining: u32,
    /// XOR of the indices of those neighbours: the last one when `remaining == 1`.
    xor_idx: u32,
    payload: Vec<u8>,
}

/// Decodes one LT chunk.
#[derive(Debug, Clone)]
pub struct LtDecoder {
    params: LtParams,
    limits: LtLimits,
    gen_: NeighbourGen,
    source: Vec<u8>,
    known: Vec<bool>,
    n_known: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_id: BTreeMap<u32, u32>,
    adjacency: Vec<Vec<(u32, u32)>>,
    ripple: Vec<u32>,
    live_edges: usize,
    scratch_ids: Vec<u32>,
    scratch_payload: Vec<u8>,
    stats: LtStats,
}

/// Counters of what an [`LtDecoder`] has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LtStats {
    /// Packets accepted (not refused with an error).
    pub accepted: usize,
    /// Of those, duplicates of a pending symbol (dropped).
    pub duplicates: usize,
    /// Of those, packets whose neighbours were all known already.
    pub redundant: usize,
    /// Most pending symbols held at once.
    pub peak_pending: usize,
    /// Most live edges held at once.
    pub peak_edges: usize,
}

impl LtDecoder {
    /// A decoder with [`LtLimits::for_k`].
    pub fn new(params: LtParams) -> Result<Self, ParamError> {
        Self::with_limits(params, LtLimits::for_k(params.k))
    }

    /// A decoder with explicit limits (`max_pending >= 1`, `max_edges >= 2`).
    pub fn with_limits(params: LtParams, limits: LtLimits) -> Result<Self, ParamError> {
        let dist = params.distribution()?;
        if limits.max_pending < 1 {
            return Err(ParamError::Limit {
                what: "max_pending",
                value: limits.max_pending,
                min: 1,
            });
        }
        if limits.max_edges < 2 {
            return Err(ParamError::Limit {
                what: "max_edges",
                value: limits.max_edges,
                min: 2,
            });
        }
        let k = params.k;
        Ok(Self {
            gen_: NeighbourGen::new(dist, params.chunk_seed),
            source: vec![0; k * params.symbol_size],
            known: vec![false; k],
            n_known: 0,
            slots: Vec::new(),
            free: Vec::new(),
            by_id: BTreeMap::new(),
            adjacency: vec![Vec::new(); k],
            ripple: Vec::new(),
            live_edges: 0,
            scratch_ids: Vec::new(),
            scratch_payload: vec![0; params.symbol_size],
            stats: LtStats::default(),
            params,
            limits,
        })
    }

    /// Source symbols recovered so far.
    pub fn known(&self) -> usize {
        self.n_known
    }

    /// Pending symbols held now.
    pub fn pending(&self) -> usize {
        self.by_id.len()
    }

    /// Counters.
    pub fn stats(&self) -> LtStats {
        self.stats
    }

    /// Source symbol `i` if recovered.
    pub fn symbol(&self, i: usize) -> Option<&[u8]> {
        let t = self.params.symbol_size;
        (*self.known.get(i)?).then(|| &self.source[i * t..(i + 1) * t])
    }

    fn progress(&self) -> Progress {
        if self.n_known == self.params.k {
            Progress::Complete
        } else {
            Progress::NeedMore
        }
    }

    fn handle(&mut self, id: u32, payload: &[u8]) -> Result<Progress, SymbolError> {
        if self.n_known == self.params.k {
            self.stats.accepted += 1;
            self.stats.redundant += 1;
            return Ok(Progress::Complete);
        }
        if self.by_id.contains_key(&id) {
            self.stats.accepted += 1;
            self.stats.duplicates += 1;
            return Ok(self.progress());
        }
        let t = self.params.symbol_size;
        self.gen_.neighbours(id, &mut self.scratch_ids);
        self.scratch_payload.copy_from_slice(payload);
        let known = &self.known;
        let source = &self.source;
        let scratch = &mut self.scratch_payload;
        self.scratch_ids.retain(|&i| {
            let i = i as usize;
            if known[i] {
                xor_into(scratch, &source[i * t..(i + 1) * t]);
                false
            } else {
                true
            }
        });
        match self.scratch_ids.len() {
            0 => {
                if self.scratch_payload.iter().any(|&b| b != 0) {
                    return Err(SymbolError::Inconsistent { id });
                }
                self.stats.accepted += 1;
                self.stats.redundant += 1;
                Ok(self.progress())
            }
            1 => {
                self.stats.accepted += 1;
                let i = self.scratch_ids[0];
                self.recover(i, true);
                self.peel()
            }
            n => {
                if self.by_id.len() >= self.limits.max_pending {
                    return Err(SymbolError::Full {
                        what: "max_pending",
                        limit: self.limits.max_pending,
                    });
                }
                if self.live_edges + n > self.limits.max_edges {
                    return Err(SymbolError::Full {
                        what: "max_edges",
                        limit: self.limits.max_edges,
                    });
                }
                self.stats.accepted += 1;
                self.store(id, n);
                Ok(Progress::NeedMore)
            }
        }
    }

    /// Stores the reduced symbol in `scratch_payload` / `scratch_ids` as pending.
    fn store(&mut self, id: u32, n: usize) {
        let s = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    id: 0,
                    generation: 0,
                    live: false,
                    remaining: 0,
                    xor_idx: 0,
                    payload: Vec::new(),
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[s as usize];
        slot.id = id;
        slot.live = true;
        slot.remaining = n as u32;
        slot.xor_idx = self.scratch_ids.iter().fold(0, |a, &i| a ^ i);
        slot.payload.clear();
        slot.payload.extend_from_slice(&self.scratch_payload);
        for &i in &self.scratch_ids {
            self.adjacency[i as usize].push((s, slot.generation));
        }
        self.by_id.insert(id, s);
        self.live_edges += n;
        self.stats.peak_pending = self.stats.peak_pending.max(self.by_id.len());
        self.stats.peak_edges = self.stats.peak_edges.max(self.live_edges);
    }

    /// Marks source `i` known; its value is `scratch_payload` when `from_scratch`, else
    /// already written into `source`.
    fn recover(&mut self, i: u32, from_scratch: bool) {
        let t = self.params.symbol_size;
        let i = i as usize;
        if from_scratch {
            self.source[i * t..(i + 1) * t].copy_from_slice(&self.scratch_payload);
        }
        self.known[i] = true;
        self.n_known += 1;
        self.ripple.push(i as u32);
    }

    /// Runs the ripple until it is empty.
    fn peel(&mut self) -> Result<Progress, SymbolError> {
        let t = self.params.symbol_size;
        let mut inconsistent = None;
        while let Some(j) = self.ripple.pop() {
            let j = j as usize;
            let edges = std::mem::take(&mut self.adjacency[j]);
            for (s, generation) in edges {
                let slot = &mut self.slots[s as usize];
                if !slot.live || slot.generation != generation {
                    continue;
                }
                xor_into(&mut slot.payload, &self.source[j * t..(j + 1) * t]);
                slot.remaining -= 1;
                slot.xor_idx ^= j as u32;
                self.live_edges -= 1;
                if slot.remaining != 1 {
                    continue;
                }
                // One unknown neighbour left: this symbol is that source symbol.
                let last = slot.xor_idx as usize;
                slot.live = false;
                slot.generation = slot.generation.wrapping_add(1);
                self.live_edges -= 1;
                self.by_id.remove(&slot.id);
                self.free.push(s);
                if self.known[last] {
                    // Known but its ripple not yet run: the symbol is redundant.
                    if slot.payload != self.source[last * t..(last + 1) * t] {
                        inconsistent = Some(slot.id);
                    }
                } else {
                    self.source[last * t..(last + 1) * t].copy_from_slice(&slot.payload);
                    self.known[last] = true;
                    self.n_known += 1;
                    self.ripple.push(last as u32);
                }
            }
        }
        match inconsistent {
            Some(id) => Err(SymbolError::Inconsistent { id }),
            None => Ok(self.progress()),
        }
    }
}

impl FountainDecoder for LtDecoder {
    fn handle_packet(&mut self, packet: &[u8]) -> Result<Progress, SymbolError> {
        let (id, payload) = parse_packet(packet, self.params.symbol_size)?;
        self.handle(id, payload)
    }

    fn is_complete(&self) -> bool {
        self.n_known == self.params.k
    }

    fn source(&self) -> Option<&[u8]> {
        self.is_complete().then_some(&self.source[..])
    }
}
