//! The receiving side of a transfer, sans-IO: takes datagrams and the time, returns decoded
//! chunks to write and reports to send.
//!
//! Memory bound: at most [`WINDOW`] chunks decode at once, only chunks in
//! `[done_below, done_below + WINDOW)` are accepted, and each chunk's decoder holds at most
//! `k + k/32 + 32` distinct symbols (the RaptorQ wrapper's `max_packets`), so the symbols
//! held never exceed `WINDOW * (k + k/32 + 32) * symbol_size` bytes (about 22 MB for
//! k = 1024 and 1280-byte symbols) plus the `raptorq` crate's per-block matrices. A
//! decoder that reaches its bound without decoding (RaptorQ fails with well under 1e-6
//! probability at k + 32 symbols) is dropped and restarted, so the bound also holds
//! against a peer that sends symbols that never decode.

use std::time::Duration;

use thiserror::Error;

use super::wire::{
    self, ChunkReport, Datagram, FLAG_COMPLETE, FLAG_HASH_MISMATCH, FLAG_REJECTED, Header, Report,
    WINDOW, WireError,
};
use crate::codec::{FountainDecoder, Progress, SymbolError};
use crate::rq::{RqDecoder, RqParams};

/// Report interval while a transfer runs.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(50);
/// Shortest gap between two reports (the extra ones sent when a chunk decodes).
pub const MIN_REPORT_GAP: Duration = Duration::from_millis(10);

/// Why the receiver dropped a datagram.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecvError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("datagram for transfer {got:016x}, expected {expected:016x}")]
    WrongTransfer { got: u64, expected: u64 },
    #[error("symbol before any header")]
    NoTransfer,
    #[error("a receiver does not take reports")]
    UnexpectedReport,
    #[error("chunk {chunk} out of range (file has {chunks})")]
    ChunkOutOfRange { chunk: u32, chunks: u32 },
    #[error("chunk {chunk} outside the receive window [{low}, {high})")]
    OutsideWindow { chunk: u32, low: u32, high: u32 },
    #[error("chunk {chunk}: {source}")]
    Symbol { chunk: u32, source: SymbolError },
}

/// Counters of what came in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvStats {
    pub accepted: u64,
    pub duplicate_or_done: u64,
    pub dropped: u64,
    pub decoder_restarts: u64,
}

/// What a datagram did.
#[derive(Debug, PartialEq, Eq)]
pub enum RecvEvent {
    /// A header for a new transfer: open the file and call [`Receiver::begin`].
    Offer(Header),
    /// Nothing to do.
    None,
    /// A chunk decoded: write `data` at `offset` (then save the resume state).
    Decoded {
        chunk: u32,
        offset: u64,
        data: Vec<u8>,
    },
}

#[derive(Debug)]
struct Active {
    chunk: u32,
    decoder: RqDecoder,
}

/// Decoding state of one transfer.
#[derive(Debug)]
pub struct Receiver {
    header: Option<Header>,
    done: Vec<bool>,
    done_below: u32,
    done_count: u32,
    active: Vec<Active>,
    highest_seq: u32,
    highest_seq_at: Duration,
    received_total: u64,
    flags: u8,
    next_report: Duration,
    last_report: Option<Duration>,
    stats: RecvStats,
}

impl Default for Receiver {
    fn default() -> Self {
        Self::new()
    }
}

impl Receiver {
    pub fn new() -> Self {
        Self {
            header: None,
            done: Vec::new(),
            done_below: 0,
            done_count: 0,
            active: Vec::new(),
            highest_seq: 0,
            highest_seq_at: Duration::ZERO,
            received_total: 0,
            flags: 0,
            next_report: Duration::ZERO,
            last_report: None,
            stats: RecvStats::default(),
        }
    }

    /// The transfer being received, once begun.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    pub fn stats(&self) -> RecvStats {
        self.stats
    }

    /// Chunks on disk, out of the total.
    pub fn progress(&self) -> (u32, u32) {
        (self.done_count, self.done.len() as u32)
    }

    /// Which chunks are on disk (the resume state to save).
    pub fn done(&self) -> &[bool] {
        &self.done
    }

    /// Whether every chunk is on disk.
    pub fn all_decoded(&self) -> bool {
        self.header.is_some() && self.done_count as usize == self.done.len()
    }

    /// Distinct symbols held by all decoders (for checking the memory bound).
    pub fn symbols_held(&self) -> usize {
        self.active.iter().map(|a| a.decoder.received()).sum()
    }

    /// Chunks decoding now.
    pub fn decoding(&self) -> usize {
        self.active.len()
    }

    /// Starts receiving `header`; `on_disk` (from a resume state, or empty) lists chunks
    /// already written.
    pub fn begin(&mut self, header: Header, on_disk: &[bool], now: Duration) {
        let n = header.chunks() as usize;
        self.done = vec![false; n];
        for (i, d) in on_disk.iter().take(n).enumerate() {
            self.done[i] = *d;
        }
        self.done_count = self.done.iter().filter(|d| **d).count() as u32;
        self.header = Some(header);
        self.active.clear();
        self.advance_done_below();
        self.next_report = now;
    }

    /// Refuses the offered transfer: reports carry [`FLAG_REJECTED`].
    pub fn reject(&mut self, header: Header, now: Duration) {
        self.header = Some(header);
        self.flags |= FLAG_REJECTED;
        self.next_report = now;
    }

    /// Records the whole-file hash check once every chunk is on disk.
    pub fn finish(&mut self, hash_ok: bool, now: Duration) {
        self.flags |= if hash_ok {
            FLAG_COMPLETE
        } else {
            FLAG_HASH_MISMATCH
        };
        self.next_report = now;
    }

    fn advance_done_below(&mut self) {
        while (self.done_below as usize) < self.done.len() && self.done[self.done_below as usize] {
            self.done_below += 1;
        }
    }

    /// Takes one datagram. Errors are counted and the datagram dropped.
    pub fn handle(&mut self, now: Duration, datagram: &[u8]) -> Result<RecvEvent, RecvError> {
        let r = self.handle_inner(now, datagram);
        if r.is_err() {
            self.stats.dropped += 1;
        }
        r
    }

    fn handle_inner(&mut self, now: Duration, datagram: &[u8]) -> Result<RecvEvent, RecvError> {
        match wire::parse(datagram)? {
            Datagram::Report(_) => Err(RecvError::UnexpectedReport),
            Datagram::Header(h) => match &self.header {
                None => Ok(RecvEvent::Offer(h)),
                Some(cur) if cur.transfer_id == h.transfer_id && *cur == h => {
                    // The sender has not heard us yet: answer soon.
                    self.next_report = self.next_report.min(now + MIN_REPORT_GAP);
                    Ok(RecvEvent::None)
                }
                Some(cur) => Err(RecvError::WrongTransfer {
                    got: h.transfer_id,
                    expected: cur.transfer_id,
                }),
            },
            Datagram::Symbol(s) => {
                let Some(h) = &self.header else {
                    return Err(RecvError::NoTransfer);
                };
                if s.transfer_id != h.transfer_id {
                    return Err(RecvError::WrongTransfer {
                        got: s.transfer_id,
                        expected: h.transfer_id,
                    });
                }
                if self.flags & FLAG_REJECTED != 0 {
                    return Ok(RecvEvent::None);
                }
                let chunks = self.done.len() as u32;
                if s.chunk >= chunks {
                    return Err(RecvError::ChunkOutOfRange {
                        chunk: s.chunk,
                        chunks,
                    });
                }
                let high = self.done_below.saturating_add(WINDOW).min(chunks);
                if s.chunk < self.done_below || s.chunk >= high {
                    if s.chunk < self.done_below {
                        self.stats.duplicate_or_done += 1;
                        self.count_seq(now, s.seq);
                        return Ok(RecvEvent::None);
                    }
                    return Err(RecvError::OutsideWindow {
                        chunk: s.chunk,
                        low: self.done_below,
                        high,
                    });
                }
                if self.done[s.chunk as usize] {
                    self.stats.duplicate_or_done += 1;
                    self.count_seq(now, s.seq);
                    return Ok(RecvEvent::None);
                }
                let k = h.chunk_k(s.chunk);
                let (offset, len) = h.chunk_range(s.chunk);
                let t = h.symbol_size as usize;
                let pos = match self.active.iter().position(|a| a.chunk == s.chunk) {
                    Some(p) => p,
                    None => {
                        let params = Self::params(k, t);
                        // Validate before creating a decoder, so junk allocates nothing.
                        Self::precheck(&params, s.chunk, s.packet)?;
                        let decoder = RqDecoder::new(params).map_err(|_| RecvError::Symbol {
                            chunk: s.chunk,
                            source: SymbolError::Full {
                                what: "parameters",
                                limit: 0,
                            },
                        })?;
                        self.active.push(Active {
                            chunk: s.chunk,
                            decoder,
                        });
                        self.active.len() - 1
                    }
                };
                let chunk = s.chunk;
                let result = self.active[pos].decoder.handle_packet(s.packet);
                match result {
                    Ok(Progress::NeedMore) => {
                        self.count_seq(now, s.seq);
                        self.stats.accepted += 1;
                        Ok(RecvEvent::None)
                    }
                    Ok(Progress::Complete) => {
                        self.count_seq(now, s.seq);
                        self.stats.accepted += 1;
                        let a = self.active.swap_remove(pos);
                        let mut data = a.decoder.source().map(<[u8]>::to_vec).unwrap_or_default();
                        data.truncate(len);
                        self.done[chunk as usize] = true;
                        self.done_count += 1;
                        self.advance_done_below();
                        self.next_report = self
                            .next_report
                            .min(self.last_report.map_or(now, |l| l + MIN_REPORT_GAP));
                        Ok(RecvEvent::Decoded {
                            chunk,
                            offset,
                            data,
                        })
                    }
                    Err(SymbolError::Full { what, limit }) => {
                        // Never decodes within the bound: start this chunk again.
                        let params = Self::params(k, t);
                        if let Ok(d) = RqDecoder::new(params) {
                            self.active[pos].decoder = d;
                        }
                        self.stats.decoder_restarts += 1;
                        Err(RecvError::Symbol {
                            chunk,
                            source: SymbolError::Full { what, limit },
                        })
                    }
                    Err(source) => Err(RecvError::Symbol { chunk, source }),
                }
            }
        }
    }

    fn params(k: usize, t: usize) -> RqParams {
        RqParams {
            k,
            symbol_size: t,
            max_packets: k + k / 32 + 32,
            max_esi: (16 * k as u32).saturating_add(1024),
        }
    }

    fn precheck(params: &RqParams, chunk: u32, packet: &[u8]) -> Result<(), RecvError> {
        let expected = params.packet_len();
        let source = if packet.len() < expected {
            SymbolError::Truncated {
                len: packet.len(),
                expected,
            }
        } else if packet.len() > expected {
            SymbolError::Oversized {
                len: packet.len(),
                expected,
            }
        } else if packet[0] != 0 {
            SymbolError::WrongBlock {
                got: packet[0],
                expected: 0,
            }
        } else {
            let esi = u32::from_be_bytes([0, packet[1], packet[2], packet[3]]);
            if esi <= params.max_esi {
                return Ok(());
            }
            SymbolError::IdOutOfRange {
                id: esi,
                max: params.max_esi,
            }
        };
        Err(RecvError::Symbol { chunk, source })
    }

    fn count_seq(&mut self, now: Duration, seq: u32) {
        self.received_total += 1;
        if self.received_total == 1 || seq > self.highest_seq {
            self.highest_seq = seq;
            self.highest_seq_at = now;
        }
    }

    /// When the next report is due (None before a transfer begins).
    pub fn next_report_at(&self) -> Option<Duration> {
        self.header.as_ref().map(|_| self.next_report)
    }

    /// Writes a report into `out` if one is due at `now`.
    pub fn poll_report(&mut self, now: Duration, out: &mut Vec<u8>) -> bool {
        let Some(h) = &self.header else {
            return false;
        };
        if now < self.next_report {
            return false;
        }
        let mut chunks: Vec<ChunkReport> = Vec::new();
        let high = self
            .done_below
            .saturating_add(WINDOW)
            .min(self.done.len() as u32);
        for c in self.done_below..high {
            let received = self
                .active
                .iter()
                .find(|a| a.chunk == c)
                .map_or(0, |a| a.decoder.received());
            let decoded = self.done[c as usize];
            if decoded || received > 0 {
                chunks.push(ChunkReport {
                    chunk: c,
                    received: received.min(u16::MAX as usize) as u16,
                    decoded,
                });
            }
        }
        let hold = now.saturating_sub(self.highest_seq_at).as_micros();
        Report {
            transfer_id: h.transfer_id,
            highest_seq: self.highest_seq,
            hold_us: hold.min(u32::MAX as u128) as u32,
            received_total: self.received_total,
            done_below: self.done_below,
            flags: self.flags,
            chunks,
        }
        .encode(out);
        self.last_report = Some(now);
        self.next_report = now + REPORT_INTERVAL;
        true
    }
}
