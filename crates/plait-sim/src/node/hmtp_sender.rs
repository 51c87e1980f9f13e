//! The `hmtp` mode's sender: seed HMTP (§III) over one TCP-like transport per path.
//!
//! What it models:
//! - the fountain layer (seed HMTP §III-A steps 1 to 3, 5 and 6): an infinite FTP source cut
//!   into chunks of k source symbols; every packet is a fresh LT symbol (plait-fec's
//!   encoder, the seed's robust soliton, [`HmtpConfig`]) of one chunk, tagged with the chunk
//!   id; a chunk's goal is k' symbols at the receiver; chunks are pipelined: a new chunk
//!   opens as soon as the open ones have their goal in flight, up to `max_open` chunks, so
//!   no path waits for feedback (§III-A: "HMTP immediately starts a new transmission for
//!   the next chunk");
//! - the transport (seed HMTP §III-A step 4 and the paragraph after it): per path, ns-2's
//!   NewReno ([`NewRenoSender`]) with its own sequence space, cwnd, fast retransmit and
//!   timer, so each path runs at its own rate; "when 3 duplicate acknowledgements arrive
//!   ... the SN ... of the lost packet is assigned to the newly generated fountain-encoded
//!   packet": every segment the transport retransmits carries a fresh symbol, never the
//!   lost one; the lost symbol's chunk is owed one more symbol;
//! - feedback (§III-A steps 5 to 8): every ACK carries the receiver's report on the chunk
//!   of the symbol that triggered it (symbols received, decoded); a decoded chunk is
//!   closed; a chunk whose receiver holds its goal without having decoded gets alpha more
//!   (step 6, and step 9's "waits for additional packets").
//!
//! Where it differs from the seed: the seed replaces a lost symbol with a symbol of the
//! chunk being sent and tops a chunk up by alpha when feedback shows it short of k'; here
//! the refill goes to the oldest chunk still short of its goal, which is the lost symbol's
//! chunk unless an older one is also short. When every open chunk has its goal in flight
//! and `max_open` chunks are open, the extra symbol goes to the oldest chunk (the path
//! never idles); the seed does not say what it does then.
//!
//! Invariants: a symbol id is never sent twice for a chunk; `seq_chunk[p]` only holds
//! sequence numbers at or above path p's cumulative ACK (at most its window); at most
//! `max_open` chunks are open. No clock, no randomness beyond the chunk seeds: the same
//! inputs give the same packets.

use std::collections::{BTreeMap, VecDeque};

use plait_fec::LtEncoder;
use plait_proto::Time;

use super::HmtpConfig;
use crate::packet::{ChunkReport, HmtpAck, HmtpData, TcpSegment};
use crate::tcp::{NewRenoSender, TcpConfig};

/// Counters of the sender.
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

/// The sans-IO sender (see the module docs).
#[derive(Debug)]
pub struct HmtpSenderCore {
    cfg: HmtpConfig,
    tcps: Vec<NewRenoSender>,
    /// Per path: the chunk whose symbol each outstanding sequence number carries.
    seq_chunk: Vec<BTreeMap<u64, u32>>,
    open: VecDeque<ChunkTx>,
    next_chunk: u32,
    scratch: Vec<u8>,
    out: VecDeque<HmtpData>,
    stats: HmtpSenderStats,
}

impl HmtpSenderCore {
    /// A sender with `cfg.paths` transports, each configured as `tcp` (an infinite source).
    pub fn new(cfg: HmtpConfig, tcp: &TcpConfig) -> HmtpSenderCore {
        let paths = cfg.paths.max(1);
        let tcp = TcpConfig {
            packet_size: cfg.packet_size,
            total_packets: None,
            ..tcp.clone()
        };
        HmtpSenderCore {
            tcps: (0..paths)
                .map(|_| NewRenoSender::new(tcp.clone()))
                .collect(),
            seq_chunk: vec![BTreeMap::new(); paths],
            open: VecDeque::new(),
            next_chunk: 0,
            scratch: Vec::new(),
            out: VecDeque::new(),
            stats: HmtpSenderStats::default(),
            cfg,
        }
    }

    /// Counters.
    pub fn stats(&self) -> &HmtpSenderStats {
        &self.stats
    }

    /// Path `p`'s transport (`None` for no such path).
    pub fn transport(&self, p: usize) -> Option<&NewRenoSender> {
        self.tcps.get(p)
    }

    /// Chunks open now.
    pub fn open_chunks(&self) -> usize {
        self.open.len()
    }

    /// Outstanding sequence numbers remembered, over all paths (bounded by the windows).
    pub fn tracked_segments(&self) -> usize {
        self.seq_chunk.iter().map(BTreeMap::len).sum()
    }

    /// Starts every path's transport.
    pub fn start(&mut self, now: Time) {
        for p in 0..self.tcps.len() {
            self.tcps[p].start(now);
            self.flush(p, now);
        }
    }

    /// An ACK arrives: the report first (it may close a chunk), then the path's transport.
    pub fn on_ack(&mut self, now: Time, ack: &HmtpAck) {
        if let Some(r) = ack.report {
            self.on_report(&r);
        }
        let p = usize::from(ack.path);
        let Some(tcp) = self.tcps.get_mut(p) else {
            return;
        };
        tcp.on_ack(now, &ack.ack);
        // Everything below the cumulative ACK arrived: forget it.
        let keep = self.seq_chunk[p].split_off(&ack.ack.next_expected);
        self.seq_chunk[p] = keep;
        self.flush(p, now);
    }

    /// Transport timers due at `now` expire.
    pub fn on_timeout(&mut self, now: Time) {
        for p in 0..self.tcps.len() {
            if self.tcps[p].next_timeout().is_some_and(|t| t <= now) {
                self.tcps[p].on_timeout(now);
                self.flush(p, now);
            }
        }
    }

    /// The earliest transport timer.
    pub fn next_timeout(&self) -> Option<Time> {
        self.tcps
            .iter()
            .filter_map(NewRenoSender::next_timeout)
            .min()
    }

    /// The next packet to put on the wire (its path in `HmtpData::path`).
    pub fn poll_send(&mut self) -> Option<HmtpData> {
        self.out.pop_front()
    }

    /// Seed HMTP §III-A steps 6 to 8: the receiver's count and verdict on one chunk.
    fn on_report(&mut self, r: &ChunkReport) {
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
            match LtEncoder::new(self.cfg.lt_params(id), &source) {
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
                    return Some(self.open.len() - 1);
                }
                Err(_) => {
                    self.stats.encoder_errors += 1;
                    return None;
                }
            }
        }
        self.stats.extra_symbols += 1;
        (!self.open.is_empty()).then_some(0)
    }

    /// Turns what path `p`'s transport sends into packets.
    fn flush(&mut self, p: usize, now: Time) {
        while let Some(seg) = self.tcps[p].poll_send(now) {
            let data = self.fill(p, seg);
            self.out.push_back(data);
        }
    }

    /// Puts a symbol in segment `seg` of path `p` (none in the header-only SYN).
    fn fill(&mut self, p: usize, seg: TcpSegment) -> HmtpData {
        let path = u8::try_from(p).unwrap_or(u8::MAX);
        if seg.payload == 0 {
            return HmtpData {
                path,
                seg,
                chunk: None,
                symbol: Vec::new(),
            };
        }
        if seg.retransmit {
            // Seed HMTP §III-A: the lost symbol is not sent again; its chunk is owed one.
            self.stats.refills += 1;
            if let Some(&lost) = self.seq_chunk[p].get(&seg.seq)
                && let Some(c) = self.open.iter_mut().find(|c| c.id == lost)
            {
                c.lost += 1;
            }
        }
        let Some(i) = self.pick_chunk() else {
            self.seq_chunk[p].remove(&seg.seq);
            return HmtpData {
                path,
                seg,
                chunk: None,
                symbol: Vec::new(),
            };
        };
        let c = &mut self.open[i];
        c.enc.encode_into(c.next_symbol, &mut self.scratch);
        c.next_symbol = c.next_symbol.wrapping_add(1);
        c.sent += 1;
        self.stats.symbols_sent += 1;
        self.seq_chunk[p].insert(seg.seq, c.id);
        HmtpData {
            path,
            seg,
            chunk: Some(c.id),
            symbol: self.scratch.clone(),
        }
    }
}
