//! The sending side of a transfer, sans-IO: given the time and the receiver's reports, says
//! which datagram to send next and when.
//!
//! Until the first report the sender sends only the header (every 250 ms). Then it keeps a
//! window of up to [`WINDOW`] undecoded chunks in flight and sends, paced at
//! [`RateControl`]'s rate, symbols (ESIs 0, 1, 2, ...: the k source symbols first, then
//! repair symbols) chosen from each chunk's *estimate*: the symbols the receiver held at
//! its latest report plus `(1 - p)` times the chunk's symbols in flight, `p` the paths'
//! random loss (the rate control's base loss). A chunk *needs* symbols while its estimate
//! is below its target, `k + 2 + sqrt(n p (1 - p))` (two symbols of margin, RaptorQ
//! decoding from k + 2 with probability about 1 - 1e-6, and one standard deviation of the
//! arrivals of its n symbols in flight). Each datagram is:
//! 1. a symbol of the oldest chunk that needs symbols;
//! 2. otherwise a symbol of a new chunk, if the receiver's window has room: the pipe is
//!    filled with the next chunks rather than with symbols a chunk probably does not need;
//! 3. otherwise (the last chunks of the file, or a full window) a symbol of the oldest
//!    chunk whose estimate is below its target plus 2 % of k and 2 symbols (spares the
//!    round trip of a top-up at the tail); past that the sender waits for a report.
//!
//! In flight: symbols sent after the latest report's highest sequence number. A symbol at
//! or below it has arrived (and is in the count) or was lost, since the tunnel delivers in
//! order; a symbol older than `1.5 srtt + 100 ms` is taken as lost as well (the last
//! symbols of a transfer have no later ones). A lost symbol thus leaves the estimate, and
//! the chunk needs symbols again one report later (a top-up). Chunks reported decoded
//! leave the window; nothing is ever retransmitted, every symbol is new.
//!
//! If no report arrives for `max(1 s, 4 * srtt)` the sender stops sending symbols and goes
//! back to sending the header, so a restarted receiver learns the transfer again and
//! reports which chunks it already has on disk (resume); what was in flight is then taken
//! as lost.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use super::rate::{RateControl, Sample};
use super::receiver::{MIN_REPORT_GAP, REPORT_INTERVAL};
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
    /// Symbols sent because a chunk's estimate said they were missing.
    pub needed: u64,
    /// Symbols sent beyond every estimate (tail of the file or a full window), within the
    /// tail allowance.
    pub extra: u64,
    /// Times a chunk whose estimate was met needed more again (its symbols were lost).
    pub top_ups: u64,
    /// Symbol datagrams the receiver says it received (latest report).
    pub received: u64,
}

#[derive(Debug)]
struct Chunk {
    index: u32,
    k: usize,
    encoder: RqEncoder,
    /// Symbols sent (the next ESI).
    sent: u32,
    /// Distinct symbols the receiver held at its latest report.
    received: u32,
    /// Sequence numbers of this chunk's symbols sent after the latest report's highest
    /// sequence number: in flight, or lost (the next report tells).
    in_flight: VecDeque<u32>,
    /// Whether the estimate has been met since the chunk last needed symbols.
    met: bool,
}

impl Chunk {
    /// Symbols the receiver is expected to hold once those in flight arrive, with
    /// `loss` the fraction of symbols lost on the way.
    fn expected(&self, loss: f64) -> f64 {
        self.received as f64 + self.in_flight.len() as f64 * (1.0 - loss)
    }

    /// What the chunk needs to decode with high probability, in expectation: k plus a
    /// margin of 2 symbols (RaptorQ fails at k + 2 with probability about 1e-6) and one
    /// standard deviation of the arrivals of the symbols in flight.
    fn target(&self, loss: f64) -> f64 {
        let n = self.in_flight.len() as f64;
        self.k as f64 + MARGIN + (n * loss * (1.0 - loss)).sqrt()
    }

    fn needs(&self, loss: f64) -> bool {
        self.expected(loss) < self.target(loss)
    }

    /// Tail of the file or a full window: one more symbol allowed while the expectation is
    /// below the target plus [`TAIL_EXTRA`] of k.
    fn tail_allows(&self, loss: f64) -> bool {
        self.expected(loss) < self.target(loss) + self.k as f64 * TAIL_EXTRA + MARGIN
    }
}

/// Symbols beyond k a chunk's estimate asks for (plus one standard deviation).
const MARGIN: f64 = 2.0;
/// Extra symbols (fraction of k) a chunk may get beyond its estimate when nothing else
/// can be sent (the last chunks of the file, or a full window): they spare the round trip
/// a top-up would cost when its estimate was short; past it the sender waits for a report.
const TAIL_EXTRA: f64 = 0.02;

/// `a` is at or before `b` in sequence-number order (wrapping).
fn seq_le(a: u32, b: u32) -> bool {
    b.wrapping_sub(a) < 1 << 31
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
        // Chunk state: what the receiver holds, and which symbols are still in flight.
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
        let covered = r.received_total > 0;
        // A symbol sent this long ago and not yet covered by the highest sequence number
        // received is taken as lost (the last symbols of a transfer have no later ones).
        let lost_after = self.rate.srtt() * 3 / 2 + REPORT_INTERVAL * 2;
        let send_times = &self.send_times;
        let seq_now = self.seq;
        let too_old = |q: u32| {
            seq_now.wrapping_sub(q) >= SEND_TIMES as u32
                || now.saturating_sub(send_times[q as usize % SEND_TIMES]) > lost_after
        };
        for ch in self.window.iter_mut() {
            if resumed {
                // A (possibly restarted) receiver: what it lacks is what it reports, and
                // what was in flight before the silence is taken as lost.
                if !r.chunks.iter().any(|c| c.chunk == ch.index) {
                    ch.received = 0;
                }
                ch.in_flight.clear();
            } else if covered {
                // Symbols at or below the highest sequence number received have arrived
                // (and are in `received`) or were lost: the tunnel delivers in order.
                while ch
                    .in_flight
                    .front()
                    .is_some_and(|&q| seq_le(q, r.highest_seq))
                {
                    ch.in_flight.pop_front();
                }
            }
            while ch.in_flight.front().is_some_and(|&q| too_old(q)) {
                ch.in_flight.pop_front();
            }
        }
        self.window.retain(|ch| !self.done[ch.index as usize]);
        let loss = self.chunk_loss();
        for ch in self.window.iter_mut() {
            if ch.met && ch.needs(loss) {
                ch.met = false;
                self.stats.top_ups += 1;
            }
        }
    }

    /// The fraction of symbols lost on the way, for the chunks' estimates: the paths'
    /// random loss. Congestion losses come in bursts that the rate control removes; a
    /// chunk short of them gets a top-up one report later, while the pipe carries the
    /// next chunks.
    fn chunk_loss(&self) -> f64 {
        self.rate.base_loss().clamp(0.0, 0.9)
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
        self.window.push_back(Chunk {
            index,
            k,
            encoder,
            sent: 0,
            received: 0,
            in_flight: VecDeque::new(),
            met: false,
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
        // 1. The oldest chunk its estimate says lacks symbols; 2. a new chunk; 3. within
        // the tail allowance, the oldest chunk still below it; otherwise wait for a report.
        let loss = self.chunk_loss();
        let pos = match self.window.iter().position(|c| c.needs(loss)) {
            Some(p) => {
                self.stats.needed += 1;
                p
            }
            None => match self.next_new_chunk() {
                Some(i) => {
                    self.open_chunk(i)?;
                    self.stats.needed += 1;
                    self.window.len() - 1
                }
                None => match self.window.iter().position(|c| c.tail_allows(loss)) {
                    Some(p) => {
                        self.stats.extra += 1;
                        p
                    }
                    None => return Ok(Transmit::Wait(now + MIN_REPORT_GAP)),
                },
            },
        };
        let seq = self.seq;
        let ch = &mut self.window[pos];
        let esi = ch.sent;
        ch.encoder.encode_into(esi, &mut self.buf);
        ch.sent += 1;
        ch.in_flight.push_back(seq);
        if !ch.needs(loss) {
            ch.met = true;
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
