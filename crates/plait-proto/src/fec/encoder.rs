//! The sender's half of packet-mode FEC: blocks of protected inner packets and the repair
//! symbols they produce (docs/protocol.md#fec).
//!
//! Only packets sent on a path with measured random loss (at least
//! [`MIN_PROTECTED_LOSS`]) join blocks. A block opens with the first such packet after the previous block closed and
//! closes when it holds `max_block` packets, when the next protected packet lies
//! [`FEC_SPAN`] or more numbers after its first, or `max_block_delay` after it opened
//! (the session's timer; [`FecEncoder::deadline`]). On closing, `r` is sized from the
//! paths' measured random loss (`sizing.rs`); `r = 0` sends nothing. A block whose whole
//! symbols would be longer than one datagram carries has its shards cut into the fewest
//! pieces that fit (`codec::parts_for`), each with its own `r` symbols; sizing then counts
//! a symbol lost when any of its pieces is (conservative: the pieces are separate codes).
//!
//! Invariants: a block holds at most 32 packets (copies of their bytes) and one block is
//! open at a time; at most [`MAX_PENDING_SYMBOLS`] symbols wait to be sent (the oldest are
//! dropped first: a late symbol is worth least), in the order their blocks closed, and none
//! is given out older than the age the session passes; no clock, no randomness.

use std::collections::VecDeque;
use std::time::Duration;

use super::{FecConfig, codec, sizing};
use crate::ids::{GlobalSeq, MAX_PATHS, PathId};
use crate::path::PathView;
use crate::time::Time;
use crate::wire::{FEC_SPAN, MAX_FEC_PARTS, MAX_FEC_REPAIR};

/// Most repair symbols waiting to be sent.
pub const MAX_PENDING_SYMBOLS: usize = 64;
/// Gain of the encoder's own average of each path's random-loss estimate, per block
/// closed: the path's `shallow_loss_rate` moves by 1/32 per datagram and jumps with every
/// loss, and sizing from it directly over-provisions after a loss and under-provisions
/// after a clean run.
const LOSS_GAIN: f64 = 1.0 / 16.0;
/// A packet joins a block only if its path's random loss (the path's estimate now, or the
/// encoder's average) is at least this: a packet on a clean path is not going to need
/// rebuilding, and leaving it out keeps the symbols for the packets that will.
pub const MIN_PROTECTED_LOSS: f64 = 0.001;

/// A repair symbol waiting for a path.
#[derive(Debug)]
pub struct PendingSymbol {
    /// The block's first global sequence number.
    pub first: GlobalSeq,
    /// The block's source mask (docs/protocol.md#fec).
    pub mask: u32,
    /// Repair symbols in the block.
    pub repair_count: u8,
    /// This symbol's index.
    pub index: u8,
    /// Which piece of the block's shards the symbol codes (`< parts`).
    pub part: u8,
    /// Pieces the block's shards are cut into (1: whole symbols).
    pub parts: u8,
    /// The symbol.
    pub symbol: Vec<u8>,
    /// Bit `p`: a source packet of the block went on path `p` (repairs avoid those paths
    /// when another one loses less).
    pub source_paths: u16,
    /// When the block closed.
    pub closed: Time,
}

#[derive(Debug)]
struct OpenBlock {
    first: GlobalSeq,
    opened: Time,
    mask: u32,
    packets: Vec<Vec<u8>>,
    paths: Vec<PathId>,
    /// Packets of the policy sent while the block was open, protected or not (the
    /// residual target is a fraction of these).
    seen: usize,
}

/// Blocks being filled and the symbols they produced (see the module docs).
#[derive(Debug)]
pub struct FecEncoder {
    config: FecConfig,
    /// Longest symbol one datagram carries (blocks with longer shards are cut).
    max_symbol: usize,
    open: Option<OpenBlock>,
    pending: VecDeque<PendingSymbol>,
    /// Smoothed random-loss rate of each path (`None`: not seen yet).
    loss: [Option<f64>; MAX_PATHS],
    /// Blocks closed (with `r >= 1`) and symbols dropped unsent.
    pub blocks: u64,
    /// Symbols dropped because too many waited.
    pub dropped: u64,
    /// Symbols dropped because they waited too long ([`FecEncoder::poll_symbol`]).
    pub expired: u64,
}

impl FecEncoder {
    /// An encoder with `config` (its `max_block` clamped to 1..=[`FEC_SPAN`], `max_repair`
    /// to [`MAX_FEC_REPAIR`]) whose symbols are at most `max_symbol` bytes
    /// ([`crate::wire::max_fec_part_symbol`] of the datagram size).
    pub fn new(mut config: FecConfig, max_symbol: usize) -> FecEncoder {
        config.max_block = config.max_block.clamp(1, FEC_SPAN as usize);
        config.max_repair = config.max_repair.min(MAX_FEC_REPAIR);
        FecEncoder {
            config,
            max_symbol,
            open: None,
            pending: VecDeque::new(),
            loss: [None; MAX_PATHS],
            blocks: 0,
            dropped: 0,
            expired: 0,
        }
    }

    /// A protected packet `global` left on `path` at `now`; `views` are the paths' current
    /// snapshots (for sizing a block that closes now).
    pub fn push(
        &mut self,
        now: Time,
        global: GlobalSeq,
        packet: &[u8],
        path: PathId,
        views: &[PathView],
    ) {
        let now_loss = views
            .iter()
            .find(|v| v.id == path)
            .map_or(0.0, |v| v.shallow_loss_rate);
        let avg_loss = self
            .loss
            .get(path.index())
            .copied()
            .flatten()
            .unwrap_or(0.0);
        let loss = now_loss.max(avg_loss);
        if loss.is_nan() || loss < MIN_PROTECTED_LOSS {
            if let Some(b) = self.open.as_mut() {
                b.seen += 1;
            }
            return;
        }
        if self
            .open
            .as_ref()
            .is_some_and(|b| global < b.first || global - b.first >= FEC_SPAN)
        {
            self.close(now, views);
        }
        let block = self.open.get_or_insert_with(|| OpenBlock {
            first: global,
            opened: now,
            mask: 0,
            packets: Vec::new(),
            paths: Vec::new(),
            seen: 0,
        });
        let bit = 1u32 << (global - block.first);
        if block.mask & bit != 0 {
            return; // the same number twice (cannot happen: numbers are assigned once)
        }
        block.mask |= bit;
        block.packets.push(packet.to_vec());
        block.paths.push(path);
        block.seen += 1;
        if block.packets.len() >= self.config.max_block {
            self.close(now, views);
        }
    }

    /// When the open block must close (`None`: none open).
    pub fn deadline(&self) -> Option<Time> {
        self.open
            .as_ref()
            .map(|b| b.opened + self.config.max_block_delay)
    }

    /// Closes the open block if its time is up.
    pub fn close_due(&mut self, now: Time, views: &[PathView]) {
        if self.deadline().is_some_and(|t| t <= now) {
            self.close(now, views);
        }
    }

    /// The next symbol to send at `now`. Symbols whose block closed more than `max_age`
    /// before (`None`: no bound) are dropped first and counted in `expired`: they would
    /// arrive after the receiver stopped holding their block's holes, and a packet rebuilt
    /// then is delivered late, which the end hosts read as a loss anyway.
    pub fn poll_symbol(&mut self, now: Time, max_age: Option<Duration>) -> Option<PendingSymbol> {
        while let Some(s) = self.pending.pop_front() {
            if max_age.is_some_and(|age| now.saturating_since(s.closed) > age) {
                self.expired += 1;
                continue;
            }
            return Some(s);
        }
        None
    }

    /// Puts back a symbol [`FecEncoder::poll_symbol`] gave, to be the next one again (it
    /// could not go yet: packet pacing held its paths).
    pub fn unpoll_symbol(&mut self, symbol: PendingSymbol) {
        self.pending.push_front(symbol);
    }

    /// Symbols waiting.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn close(&mut self, now: Time, views: &[PathView]) {
        let Some(block) = self.open.take() else {
            return;
        };
        for v in views {
            if let Some(l) = self.loss.get_mut(v.id.index()) {
                let x = if v.shallow_loss_rate.is_finite() {
                    v.shallow_loss_rate
                } else {
                    0.0
                };
                *l = Some(l.map_or(x, |old| old + (x - old) * LOSS_GAIN));
            }
        }
        let smoothed = |id: PathId| self.loss.get(id.index()).copied().flatten().unwrap_or(0.0);
        let source_loss: Vec<f64> = block.paths.iter().map(|p| smoothed(*p)).collect();
        let repair_loss = views
            .iter()
            .filter(|v| v.is_usable())
            .map(|v| smoothed(v.id))
            .fold(f64::INFINITY, f64::min);
        let repair_loss = if repair_loss.is_finite() {
            repair_loss
        } else {
            0.0
        };
        let longest = block.packets.iter().map(Vec::len).max().unwrap_or(0);
        let Some(parts) = codec::parts_for(
            codec::shard_len(longest),
            self.max_symbol,
            usize::from(MAX_FEC_PARTS),
        ) else {
            return;
        };
        // A symbol whose pieces travel apart is lost when any piece is.
        let repair_loss = 1.0 - (1.0 - repair_loss.clamp(0.0, 1.0)).powi(parts as i32);
        let r = sizing::repair_count(
            &source_loss,
            repair_loss,
            self.config.min_repair,
            self.config.max_repair,
            // The target is a fraction of the flow, clean-path packets included.
            self.config.target_residual * block.seen as f64 / block.packets.len().max(1) as f64,
        );
        if r == 0 {
            return;
        }
        let refs: Vec<&[u8]> = block.packets.iter().map(Vec::as_slice).collect();
        let Ok(pieces) = codec::encode_block(&refs, usize::from(r), parts) else {
            return;
        };
        self.blocks += 1;
        let source_paths = block
            .paths
            .iter()
            .filter(|p| p.index() < MAX_PATHS)
            .fold(0u16, |m, p| m | 1 << p.index());
        // Symbol by symbol, its pieces together: a symbol is usable once all arrive.
        let mut pieces: Vec<std::vec::IntoIter<Vec<u8>>> =
            pieces.into_iter().map(Vec::into_iter).collect();
        for index in 0..r {
            for (part, piece) in (0u8..).zip(pieces.iter_mut()) {
                let Some(symbol) = piece.next() else {
                    continue;
                };
                if self.pending.len() >= MAX_PENDING_SYMBOLS {
                    self.pending.pop_front();
                    self.dropped += 1;
                }
                self.pending.push_back(PendingSymbol {
                    first: block.first,
                    mask: block.mask,
                    repair_count: r,
                    index,
                    part,
                    parts: parts as u8,
                    symbol,
                    source_paths,
                    closed: now,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathState;

    fn views(loss: [f64; 2]) -> Vec<PathView> {
        (0..2)
            .map(|i| {
                let mut v = PathView::new(PathId(i as u8), PathState::Active);
                v.shallow_loss_rate = loss[i];
                v
            })
            .collect()
    }

    fn config() -> FecConfig {
        FecConfig {
            policy: super::super::FecPolicy::All,
            max_block: 4,
            ..FecConfig::default()
        }
    }

    #[test]
    fn closes_on_count_span_and_time() {
        let v = views([0.0, 0.1]);
        let mut e = FecEncoder::new(config(), 1400);
        for g in 0..4 {
            e.push(Time::ZERO, g, &[g as u8; 10], PathId(1), &v);
        }
        assert!(e.deadline().is_none(), "full block closed");
        let r = e.pending();
        assert!(r >= 1);
        let s = e.poll_symbol(Time::ZERO, None).unwrap();
        assert_eq!(
            (s.first, s.mask, s.index, s.source_paths),
            (0, 0b1111, 0, 0b10)
        );
        // Span: 10 then 10 + 32 close the first block with one packet.
        e.push(Time::ZERO, 10, &[1; 5], PathId(1), &v);
        e.push(Time::ZERO, 42, &[1; 5], PathId(1), &v);
        assert_eq!(e.deadline(), Some(Time::ZERO + Duration::from_millis(20)));
        e.close_due(Time::from_millis(19), &v);
        assert!(e.deadline().is_some());
        e.close_due(Time::from_millis(20), &v);
        assert!(e.deadline().is_none());
    }

    #[test]
    fn no_loss_no_symbols_and_the_queue_is_bounded() {
        let mut e = FecEncoder::new(config(), 1400);
        for g in 0..8 {
            e.push(Time::ZERO, g, &[1; 10], PathId(0), &views([0.0, 0.0]));
        }
        assert_eq!(e.pending(), 0);
        let v = views([0.5, 0.5]);
        for g in 0..400 {
            e.push(Time::ZERO, 100 + g, &[1; 10], PathId(0), &v);
        }
        assert_eq!(e.pending(), MAX_PENDING_SYMBOLS);
        assert!(e.dropped > 0);
    }

    #[test]
    fn symbols_older_than_the_age_given_are_dropped_and_counted() {
        let v = views([0.0, 0.1]);
        let mut e = FecEncoder::new(config(), 1400);
        let closed = Time::from_millis(100);
        for g in 0..4 {
            e.push(closed, g, &[g as u8; 10], PathId(1), &v);
        }
        let r = e.pending() as u64;
        assert!(r >= 2, "{r} symbols");
        let age = Some(Duration::from_millis(50));
        // At the bound: still given out.
        let s = e.poll_symbol(Time::from_millis(150), age).unwrap();
        assert_eq!(s.closed, closed);
        assert_eq!(e.expired, 0);
        // Past it: every one left is dropped.
        assert!(e.poll_symbol(Time::from_millis(151), age).is_none());
        assert_eq!(e.expired, r - 1);
        assert_eq!(e.pending(), 0);
    }

    #[test]
    fn full_size_packets_get_symbols_in_pieces() {
        let v = views([0.0, 0.1]);
        let mut e = FecEncoder::new(config(), 1425);
        for g in 0..4 {
            e.push(Time::ZERO, g, &[g as u8; 1436], PathId(1), &v);
        }
        let symbols: Vec<PendingSymbol> =
            std::iter::from_fn(|| e.poll_symbol(Time::ZERO, None)).collect();
        assert!(symbols.len() >= 2 && symbols.len().is_multiple_of(2));
        for (i, s) in symbols.iter().enumerate() {
            assert_eq!(
                (s.index, s.part, s.parts),
                ((i / 2) as u8, (i % 2) as u8, 2)
            );
            assert_eq!(s.symbol.len(), if s.part == 0 { 720 } else { 718 });
        }
        // Short packets: whole symbols.
        for g in 10..14 {
            e.push(Time::ZERO, g, &[1; 600], PathId(1), &v);
        }
        let s = e.poll_symbol(Time::ZERO, None).unwrap();
        assert_eq!((s.part, s.parts, s.symbol.len()), (0, 1, 602));
    }
}
