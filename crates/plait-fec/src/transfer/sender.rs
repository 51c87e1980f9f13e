//! The sending side of a transfer, sans-IO: given the time and the receiver's reports, says
//! which datagram to send next and when.
//!
//! Until the first report the sender sends only the header (every 250 ms). Then it keeps a
//! window of up to [`WINDOW`] undecoded chunks in flight and sends, paced at
//! [`RateControl`]'s rate:
//! 1. for the oldest chunk whose budget is not spent, its next symbol (ESIs 0, 1, 2, ...:
//!    the k source symbols first, then repair symbols). A chunk's first budget is
//!    `(k + 2 + k/100) / (1 - loss)`, `loss` the smoothed loss of the reports;
//! 2. otherwise a symbol of a new chunk, if the receiver's window has room;
//! 3. otherwise (the tail of the file, or a full window) one more symbol for the oldest
//!    undecoded chunk, round robin: HMTP's "keep sending until decoded".
//!
//! When a chunk has spent its budget and a report comes at least one smoothed RTT plus two
//! report intervals later without "decoded", its budget grows by what the report says it
//! lacks (`k + 2 - received`, at least 1), scaled by `1 / (1 - loss)`. Chunks reported
//! decoded leave the window; nothing is ever retransmitted, every symbol is new.
//!
//! If no report arrives for `max(1 s, 4 * srtt)` the sender stops sending symbols and goes
//! back to sending the header, so a restarted receiver learns the transfer again and
//! reports which chunks it already has on disk (resume).

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use super::rate::{RateControl, Sample};
use super::receiver::REPORT_INTERVAL;
use super::wire::{
    self, Datagram, FLAG_COMPLETE, FLAG_HASH_MISMATCH, FLAG_REJECTED, Header, Report, WINDOW,
    WireError,
};
use crate::rq::{RqEncoder, RqParams};

/// Header repeat interval before the receiver answers.
pub const HEADER_INTERVAL: Duration = Duration::from_millis(250);

/// Where the sender reads chunks from (a file, or memory in tests).
pub trait ChunkSource {
    /// Fills `buf` (already sized to the chunk's length) with the bytes at `offset`.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl ChunkSource for &[u8] {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = offset as usize;
        let src = self
            .get(start..start + buf.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "short source"))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Rate settings, bytes per second.
#[derive(Debug, Clone, Copy)]
pub struct RateLimits {
    pub initial: f64,
    pub min: f64,
    pub max: f64,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            initial: 250_000.0,
            min: 25_000.0,
            max: 250_000_000.0,
        }
    }
}

/// What to do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Send the datagram written into `out`.
    Send,
    /// Nothing to send before this time.
    Wait(Duration),
    /// The receiver has every chunk and the hash matched.
    Done,
}

/// Why a transfer stopped.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("reading the file: {0}")]
    Io(#[from] io::Error),
    #[error("the receiver reports that the file's SHA-256 does not match")]
    HashMismatch,
    #[error("the receiver refused the transfer (see its log)")]
    Rejected,
    #[error("chunk parameters: {0}")]
    Params(#[from] crate::codec::ParamError),
}

/// Why the sender dropped a datagram.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("report for transfer {got:016x}, expected {expected:016x}")]
    WrongTransfer { got: u64, expected: u64 },
    #[error("a sender takes only reports")]
    NotAReport,
    #[error("report names chunk {chunk}, the file has {chunks}")]
    ChunkOutOfRange { chunk: u32, chunks: u32 },
}

/// Where the sender's symbols went, for finding waste (`plait send` prints them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Symbols sent within a chunk's budget.
    pub budget: u64,
    /// Symbols sent beyond every budget, round robin (tail of the file, full window).
    pub extra: u64,
    /// Budget increases after a chunk stayed undecoded.
    pub top_ups: u64,
    /// Symbol datagrams the receiver says it received (latest report).
    pub received: u64,
}

#[derive(Debug)]
struct Chunk {
    index: u32,
    k: usize,
    encoder: RqEncoder,
    sent: u32,
    budget: u32,
    received: u32,
    spent_at: Option<Duration>,
}

/// Sending state of one transfer.
pub struct Sender<S> {
    header: Header,
    source: S,
    rate: RateControl,
    chunks: u32,
    done: Vec<bool>,
    done_count: u32,
    done_below: u32,
    window: VecDeque<Chunk>,
    rr: usize,
    seq: u32,
    send_times: Vec<Duration>,
    next_send: Duration,
    next_header: Duration,
    heard: Option<Duration>,
    last_report: Option<(Duration, u32, u64)>,
    finished: Option<u8>,
    buf: Vec<u8>,
    chunk_buf: Vec<u8>,
    symbols_sent: u64,
    stats: SendStats,
}

const SEND_TIMES: usize = 1 << 14;

impl<S> std::fmt::Debug for Sender<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("header", &self.header)
            .field("done", &self.done_count)
            .field("window", &self.window)
            .field("rate", &self.rate)
            .finish()
    }
}

impl<S: ChunkSource> Sender<S> {
    pub fn new(header: Header, source: S, limits: RateLimits) -> Self {
        let chunks = header.chunks();
        Self {
            rate: RateControl::new(limits.initial, limits.min, limits.max),
            chunks,
            done: vec![false; chunks as usize],
            done_count: 0,
            done_below: 0,
            window: VecDeque::new(),
            rr: 0,
            seq: 0,
            send_times: vec![Duration::ZERO; SEND_TIMES],
            next_send: Duration::ZERO,
            next_header: Duration::ZERO,
            heard: None,
            last_report: None,
            finished: None,
            buf: Vec::new(),
            chunk_buf: Vec::new(),
            symbols_sent: 0,
            stats: SendStats::default(),
            header,
            source,
        }
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Chunks the receiver reports on disk, out of the total.
    pub fn progress(&self) -> (u32, u32) {
        (self.done_count, self.chunks)
    }

    /// Symbol datagrams sent so far.
    pub fn symbols_sent(&self) -> u64 {
        self.symbols_sent
    }

    /// Where the symbols went.
    pub fn stats(&self) -> SendStats {
        self.stats
    }

    /// When the receiver was last heard from.
    pub fn last_heard(&self) -> Option<Duration> {
        self.heard
    }

    pub fn rate(&self) -> &RateControl {
        &self.rate
    }

    fn silent(&self, now: Duration) -> bool {
        match self.heard {
            None => true,
            Some(h) => now.saturating_sub(h) > Duration::from_secs(1).max(self.rate.srtt() * 4),
        }
    }

    /// Takes one datagram from the receiver. Errors are typed; the datagram is dropped.
    pub fn handle(&mut self, now: Duration, datagram: &[u8]) -> Result<(), ReportError> {
        let r = match wire::parse(datagram)? {
            Datagram::Report(r) => r,
            _ => return Err(ReportError::NotAReport),
        };
        if r.transfer_id != self.header.transfer_id {
            return Err(ReportError::WrongTransfer {
                got: r.transfer_id,
                expected: self.header.transfer_id,
            });
        }
        if r.done_below > self.chunks {
            return Err(ReportError::ChunkOutOfRange {
                chunk: r.done_below,
                chunks: self.chunks,
            });
        }
        if let Some(c) = r.chunks.iter().find(|c| c.chunk >= self.chunks) {
            return Err(ReportError::ChunkOutOfRange {
                chunk: c.chunk,
                chunks: self.chunks,
            });
        }
        self.on_report(now, &r);
        Ok(())
    }

    fn on_report(&mut self, now: Duration, r: &Report) {
        let resumed = self.silent(now);
        self.heard = Some(now);
        if r.flags & (FLAG_COMPLETE | FLAG_HASH_MISMATCH | FLAG_REJECTED) != 0 {
            self.finished = Some(r.flags);
            return;
        }
        // Rate and RTT sample.
        let rtt =
            if r.received_total > 0 && self.seq.wrapping_sub(r.highest_seq) < SEND_TIMES as u32 {
                let sent_at = self.send_times[r.highest_seq as usize % SEND_TIMES];
                now.saturating_sub(sent_at)
                    .checked_sub(Duration::from_micros(r.hold_us as u64))
            } else {
                None
            };
        match self.last_report {
            Some((t, seq, total))
                if !resumed && r.highest_seq >= seq && r.received_total >= total =>
            {
                self.rate.on_sample(
                    now,
                    Sample {
                        sent: (r.highest_seq - seq) as u64,
                        received: r.received_total - total,
                        datagram_bytes: self.datagram_len(),
                        interval: now.saturating_sub(t),
                        rtt,
                    },
                );
            }
            _ => {}
        }
        self.last_report = Some((now, r.highest_seq, r.received_total));
        self.stats.received = self.stats.received.max(r.received_total);
        // Chunk state.
        for i in 0..r.done_below {
            self.mark_done(i);
        }
        self.done_below = self.done_below.max(r.done_below);
        for c in &r.chunks {
            if c.decoded {
                self.mark_done(c.chunk);
            } else if let Some(ch) = self.window.iter_mut().find(|ch| ch.index == c.chunk) {
                ch.received = c.received as u32;
            }
        }
        if resumed {
            // A (possibly restarted) receiver: what it lacks is what it reports.
            for ch in self.window.iter_mut() {
                if !r.chunks.iter().any(|c| c.chunk == ch.index) {
                    ch.received = 0;
                }
                ch.spent_at = Some(Duration::ZERO);
            }
        }
        self.window.retain(|ch| !self.done[ch.index as usize]);
        // Budgets of chunks that should have decoded by now.
        let loss = self.rate.loss().min(0.9);
        let wait = self.rate.srtt() + REPORT_INTERVAL * 2;
        for ch in self.window.iter_mut() {
            if let Some(spent) = ch.spent_at
                && now.saturating_sub(spent) >= wait
            {
                let lacking = (ch.k as u32 + 2).saturating_sub(ch.received).max(1);
                ch.budget = ch.sent + (lacking as f64 / (1.0 - loss)).ceil() as u32;
                ch.spent_at = None;
                self.stats.top_ups += 1;
            }
        }
    }

    fn mark_done(&mut self, i: u32) {
        if let Some(d) = self.done.get_mut(i as usize)
            && !*d
        {
            *d = true;
            self.done_count += 1;
        }
    }

    fn datagram_len(&self) -> usize {
        wire::SYMBOL_HEADER_LEN + crate::rq::RQ_HEADER_LEN + self.header.symbol_size as usize
    }

    fn open_chunk(&mut self, index: u32) -> Result<(), SendError> {
        let (offset, len) = self.header.chunk_range(index);
        let k = self.header.chunk_k(index);
        let t = self.header.symbol_size as usize;
        self.chunk_buf.clear();
        self.chunk_buf.resize(k * t, 0);
        self.source.read_at(offset, &mut self.chunk_buf[..len])?;
        let encoder = RqEncoder::new(RqParams::new(k, t), &self.chunk_buf)?;
        let loss = self.rate.loss().min(0.9);
        let budget = ((k + 2 + k / 100) as f64 / (1.0 - loss)).ceil() as u32;
        self.window.push_back(Chunk {
            index,
            k,
            encoder,
            sent: 0,
            budget,
            received: 0,
            spent_at: None,
        });
        Ok(())
    }

    /// The next chunk not on disk and not in the window, within the receiver's window.
    fn next_new_chunk(&self) -> Option<u32> {
        if self.window.len() >= WINDOW as usize {
            return None;
        }
        let high = self.done_below.saturating_add(WINDOW).min(self.chunks);
        (self.done_below..high)
            .find(|&i| !self.done[i as usize] && !self.window.iter().any(|c| c.index == i))
    }

    /// Says what to send at `now`; for [`Transmit::Send`] the datagram is in `out`.
    pub fn poll_transmit(
        &mut self,
        now: Duration,
        out: &mut Vec<u8>,
    ) -> Result<Transmit, SendError> {
        match self.finished {
            Some(f) if f & FLAG_COMPLETE != 0 => return Ok(Transmit::Done),
            Some(f) if f & FLAG_HASH_MISMATCH != 0 => return Err(SendError::HashMismatch),
            Some(_) => return Err(SendError::Rejected),
            None => {}
        }
        if self.silent(now) {
            if now >= self.next_header {
                self.header.encode(out);
                self.next_header = now + HEADER_INTERVAL;
                return Ok(Transmit::Send);
            }
            return Ok(Transmit::Wait(self.next_header));
        }
        if self.done_count == self.chunks {
            // Waiting for the receiver's hash check.
            return Ok(Transmit::Wait(now + REPORT_INTERVAL));
        }
        if now < self.next_send {
            return Ok(Transmit::Wait(self.next_send));
        }
        // 1. Oldest chunk with budget left; 2. a new chunk; 3. round robin extra symbols.
        let pos = match self.window.iter().position(|c| c.sent < c.budget) {
            Some(p) => {
                self.stats.budget += 1;
                p
            }
            None => match self.next_new_chunk() {
                Some(i) => {
                    self.open_chunk(i)?;
                    self.stats.budget += 1;
                    self.window.len() - 1
                }
                None => {
                    if self.window.is_empty() {
                        return Ok(Transmit::Wait(now + REPORT_INTERVAL));
                    }
                    self.rr = (self.rr + 1) % self.window.len();
                    self.stats.extra += 1;
                    self.rr
                }
            },
        };
        let seq = self.seq;
        let ch = &mut self.window[pos];
        let esi = ch.sent;
        ch.encoder.encode_into(esi, &mut self.buf);
        ch.sent += 1;
        if ch.sent >= ch.budget && ch.spent_at.is_none() {
            ch.spent_at = Some(now);
        }
        wire::encode_symbol_header(out, self.header.transfer_id, seq, ch.index);
        out.extend_from_slice(&self.buf);
        self.send_times[seq as usize % SEND_TIMES] = now;
        self.seq = self.seq.wrapping_add(1);
        self.symbols_sent += 1;
        // Pacing, with at most 2 ms of credit after an idle spell.
        let base = self
            .next_send
            .max(now.saturating_sub(Duration::from_millis(2)));
        self.next_send = base + self.rate.gap(out.len());
        Ok(Transmit::Send)
    }
}
