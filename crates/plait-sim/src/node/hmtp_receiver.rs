//! The `hmtp` mode's receiver (seed HMTP §III-A steps 7 to 9): the transport's receiving
//! end (per path ns-2's TCP sink, [`TcpSink`], one cumulative ACK per segment; or the
//! `cmt-sctp` baseline's receiver, [`CmtReceiverCore`], one SACK per packet, whose buffer
//! only tracks sequence numbers since nothing waits in it); above it, the fountain
//! layer, which takes every symbol as it arrives, whatever its order ("received
//! fountain-encoded packets are delivered immediately to the upper layer irrespective of
//! their arrival order"), into that chunk's peeling decoder (plait-fec's [`LtDecoder`]),
//! and answers each symbol with a report on its chunk: symbols received, and the
//! decoder's verdict. A decoded chunk is compared with the source the sender encoded.
//!
//! Where it differs from the seed: the seed starts decoding once k' symbols are in (step
//! 8) and waits for more if that fails (step 9); here each symbol is fed to the decoder as
//! it arrives, so a chunk is reported decoded at the first symbol that completes it
//! (peeling is monotone: the same chunks decode, some earlier).
//!
//! Memory bound (hostile or odd input): decoders exist only for chunks in
//! `base .. base + rx_window`, where `base` is the lowest undecoded chunk; symbols of
//! chunks beyond are dropped (`out_of_window`), symbols of decoded chunks are answered
//! "decoded" without allocating; each decoder has plait-fec's [`LtLimits::for_k`] bound;
//! a path's sink holds segments only up to `seg_window` above its cumulative point (the
//! SCTP transport's up to `sctp_rwnd`); a segment on a path that does not exist is
//! dropped. So the receiver holds at most `rx_window` decoders and `paths * seg_window`
//! (or `sctp_rwnd`) sequence numbers, plus one timestamp per chunk decoded in order (the
//! application-layer delay, [`super::app_delay`]).
//!
//! Invariants: `done` holds only chunks in `base + 1 .. base + rx_window`; `active` only
//! chunks in `base .. base + rx_window` not in `done`.
//!
//! [`LtLimits::for_k`]: plait_fec::LtLimits::for_k

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use plait_fec::{FountainDecoder, LtDecoder};
use plait_proto::Time;

use super::{CmtReceiverCore, HmtpConfig, HmtpTransport};
use crate::packet::{ChunkReport, HmtpAck, HmtpData, HmtpFeedback, TCP_HEADER};
use crate::tcp::TcpSink;

/// The transport's receiving end.
#[derive(Debug)]
enum RxTransport {
    Tcp(Vec<TcpSink>),
    Sctp(Box<CmtReceiverCore>),
}

/// Counters of the receiver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HmtpReceiverStats {
    /// Data packets that arrived.
    pub received: u64,
    /// Symbols given to a decoder.
    pub symbols: u64,
    /// Chunks the decoder recovered and whose source matched what was sent.
    pub decoded: u64,
    /// Chunks the decoder recovered whose source did not match (must stay 0).
    pub corrupt: u64,
    /// Symbols for chunks already decoded.
    pub late: u64,
    /// Symbols for chunks beyond the decoding window (dropped).
    pub out_of_window: u64,
    /// Symbols the decoder rejected (malformed, inconsistent, or over its memory bound).
    pub rejected: u64,
    /// Segments dropped: beyond the sink's window or on an unknown path.
    pub dropped_segments: u64,
}

/// One chunk being decoded.
#[derive(Debug)]
struct ChunkRx {
    dec: LtDecoder,
    received: u32,
}

/// The sans-IO receiver (see the module docs).
#[derive(Debug)]
pub struct HmtpReceiverCore {
    cfg: HmtpConfig,
    transport: RxTransport,
    base: u32,
    active: BTreeMap<u32, ChunkRx>,
    done: BTreeSet<u32>,
    acks: VecDeque<HmtpAck>,
    stats: HmtpReceiverStats,
    /// When each chunk, and every one before it, had decoded: the application holds it in
    /// order ([`super::app_delay`]).
    in_order_at: Vec<Time>,
}

impl HmtpReceiverCore {
    /// A receiver for `cfg.paths` paths; ACKs every segment (no delayed ACKs).
    pub fn new(cfg: HmtpConfig) -> HmtpReceiverCore {
        HmtpReceiverCore {
            transport: match cfg.transport {
                HmtpTransport::Tcp => {
                    RxTransport::Tcp((0..cfg.paths.max(1)).map(|_| TcpSink::new(None)).collect())
                }
                // SACKs carry as many gap blocks as fit in a data packet, as the baseline's.
                HmtpTransport::Sctp => RxTransport::Sctp(Box::new(CmtReceiverCore::new(
                    cfg.sctp_rwnd,
                    ((cfg.packet_size + TCP_HEADER) / 4) as usize,
                ))),
            },
            base: 0,
            active: BTreeMap::new(),
            done: BTreeSet::new(),
            acks: VecDeque::new(),
            stats: HmtpReceiverStats::default(),
            in_order_at: Vec::new(),
            cfg,
        }
    }

    /// Counters.
    pub fn stats(&self) -> &HmtpReceiverStats {
        &self.stats
    }

    /// Chunks being decoded now (at most `rx_window`).
    pub fn active_chunks(&self) -> usize {
        self.active.len()
    }

    /// Every chunk below this is decoded.
    pub fn base(&self) -> u32 {
        self.base
    }

    /// When each chunk was decoded with every earlier one, chunk 0 first.
    pub fn in_order_at(&self) -> &[Time] {
        &self.in_order_at
    }

    /// The next ACK to send, if any.
    pub fn poll_ack(&mut self) -> Option<HmtpAck> {
        self.acks.pop_front()
    }

    /// A data packet arrives; returns how many chunks it completed (0 or 1).
    pub fn on_data(&mut self, now: Time, d: &HmtpData) -> u64 {
        self.stats.received += 1;
        let Some(feedback) = self.transport_receive(now, d) else {
            self.stats.dropped_segments += 1;
            return 0;
        };
        let before = self.stats.decoded;
        let report = d.chunk.and_then(|c| self.on_symbol(c, &d.symbol));
        super::app_delay::note_in_order(&mut self.in_order_at, u64::from(self.base), 1, now);
        for f in feedback {
            self.acks.push_back(HmtpAck {
                path: d.path,
                feedback: f,
                report,
            });
        }
        self.stats.decoded - before
    }

    /// The transport takes segment `d`: its feedback, or `None` if it dropped it (beyond
    /// its window, or on a path that does not exist).
    fn transport_receive(&mut self, now: Time, d: &HmtpData) -> Option<Vec<HmtpFeedback>> {
        match &mut self.transport {
            RxTransport::Tcp(sinks) => {
                let sink = sinks.get_mut(usize::from(d.path))?;
                let window = self.cfg.seg_window.max(1);
                if d.seg.seq >= sink.next_expected().saturating_add(window) {
                    return None;
                }
                sink.on_segment(now, &d.seg);
                Some(
                    std::iter::from_fn(|| sink.poll_ack(now))
                        .map(HmtpFeedback::Tcp)
                        .collect(),
                )
            }
            RxTransport::Sctp(core) => {
                if usize::from(d.path) >= self.cfg.paths.max(1) {
                    return None;
                }
                let full = core.stats().dropped_full;
                let (_, sack) = core.on_data(d.seg.seq);
                // Beyond the window: the SACK still goes out, the symbol is dropped.
                let f = vec![HmtpFeedback::Sack(sack)];
                if core.stats().dropped_full > full {
                    self.acks.push_back(HmtpAck {
                        path: d.path,
                        feedback: f.into_iter().next()?,
                        report: None,
                    });
                    return None;
                }
                Some(f)
            }
        }
    }

    /// Seed HMTP §III-A steps 7 to 9 for one symbol of `chunk`: decode, report.
    fn on_symbol(&mut self, chunk: u32, packet: &[u8]) -> Option<ChunkReport> {
        if chunk < self.base || self.done.contains(&chunk) {
            self.stats.late += 1;
            // The count is no longer kept: the sender ignores it once decoded.
            return Some(ChunkReport {
                chunk,
                received: 0,
                decoded: true,
            });
        }
        if chunk - self.base >= self.cfg.rx_window.max(1) {
            self.stats.out_of_window += 1;
            return None;
        }
        let rx = match self.active.entry(chunk) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let Ok(dec) = LtDecoder::new(self.cfg.lt_params(chunk)) else {
                    self.stats.rejected += 1;
                    return None;
                };
                e.insert(ChunkRx { dec, received: 0 })
            }
        };
        rx.received = rx.received.saturating_add(1);
        self.stats.symbols += 1;
        if rx.dec.handle_packet(packet).is_err() {
            self.stats.rejected += 1;
        }
        let received = rx.received;
        if !rx.dec.is_complete() {
            return Some(ChunkReport {
                chunk,
                received,
                decoded: false,
            });
        }
        // The decoder's verdict: complete. Check it against what was sent.
        let matches = rx.dec.source() == Some(self.cfg.source(chunk).as_slice());
        self.active.remove(&chunk);
        if matches {
            self.stats.decoded += 1;
        } else {
            self.stats.corrupt += 1;
        }
        self.done.insert(chunk);
        while self.done.remove(&self.base) {
            self.base = self.base.wrapping_add(1);
        }
        Some(ChunkReport {
            chunk,
            received,
            decoded: true,
        })
    }
}
