//! The `hmtp` mode's sender: seed HMTP's fountain layer ([`FountainTx`]) over a transport
//! whose retransmissions never resend a symbol (seed HMTP §III-A step 4 and the paragraph
//! after it: "when 3 duplicate acknowledgements (ACKs) arrive ... the SN or TSN of the
//! lost packet is assigned to the newly generated fountain-encoded packet").
//!
//! Transports ([`HmtpTransport`]):
//! - `Tcp`: per path, ns-2's NewReno ([`NewRenoSender`]) with its own sequence space,
//!   cwnd, fast retransmit and timer, so each path runs at its own rate;
//! - `Sctp`: the `cmt-sctp` baseline's sender ([`CmtCore`]: one TSN space, per-path
//!   windows, SACKs, RTX-CWND, per-path timers) with a receive window that never blocks,
//!   because HMTP's receiver consumes every chunk at once ("the receiver buffer is always
//!   available"). The seed compares against CMT-SCTP in ns-2 and says HMTP is
//!   implemented "by disabling the retransmission" of the existing transport, so this is
//!   the transport closest to its simulation; everything else equals the baseline.
//!
//! Whenever the transport sends a sequence number again, the symbol it carried is
//! reported lost to the fountain layer and a fresh symbol goes in its place.
//!
//! Invariants: `seq_chunk` holds only sequence numbers at or above the transport's
//! cumulative point (per path for `Tcp`), so at most the windows' worth; a symbol is never
//! sent twice; `chunk_starts` holds one time per chunk opened (the application-layer
//! delay, [`super::app_delay`]). No clock, no randomness beyond the chunk seeds.

use std::collections::{BTreeMap, VecDeque};

use plait_proto::Time;

use super::hmtp_fountain::FountainTx;
use super::{CmtConfig, CmtCore, HmtpConfig, HmtpSenderStats, HmtpTransport};
use crate::packet::{HmtpAck, HmtpData, HmtpFeedback, TcpSegment};
use crate::tcp::{NewRenoSender, TcpConfig};

/// The transport under the fountain layer.
#[derive(Debug)]
enum Transport {
    Tcp(Vec<NewRenoSender>),
    Sctp(Box<CmtCore>),
}

/// The sans-IO sender (see the module docs).
#[derive(Debug)]
pub struct HmtpSenderCore {
    fountain: FountainTx,
    transport: Transport,
    /// Per path (`Tcp`) or one (`Sctp`): the chunk whose symbol each outstanding sequence
    /// number carries.
    seq_chunk: Vec<BTreeMap<u64, u32>>,
    out: VecDeque<HmtpData>,
    /// When each chunk's first symbol went out (chunk ids count from 0): the application
    /// data unit's start ([`super::app_delay`]).
    chunk_starts: Vec<Time>,
}

impl HmtpSenderCore {
    /// A sender over `cfg.paths` paths; the transport takes its windows, timers and
    /// initial window from `tcp` (an infinite source).
    pub fn new(cfg: HmtpConfig, tcp: &TcpConfig) -> HmtpSenderCore {
        let paths = cfg.paths.max(1);
        let (transport, maps) = match cfg.transport {
            HmtpTransport::Tcp => {
                let tcp = TcpConfig {
                    packet_size: cfg.packet_size,
                    total_packets: None,
                    ..tcp.clone()
                };
                let t = (0..paths)
                    .map(|_| NewRenoSender::new(tcp.clone()))
                    .collect();
                (Transport::Tcp(t), paths)
            }
            HmtpTransport::Sctp => {
                let c = CmtConfig {
                    paths,
                    packet_size: cfg.packet_size,
                    initial_cwnd: tcp.window_init,
                    rwnd: cfg.sctp_rwnd,
                    flight_cap: Some(cfg.sctp_flight_cap),
                    rfc_timer_restart: true,
                    ..CmtConfig::default()
                };
                (Transport::Sctp(Box::new(CmtCore::new(c))), 1)
            }
        };
        HmtpSenderCore {
            fountain: FountainTx::new(cfg),
            transport,
            seq_chunk: vec![BTreeMap::new(); maps],
            out: VecDeque::new(),
            chunk_starts: Vec::new(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &HmtpSenderStats {
        &self.fountain.stats
    }

    /// The transport's (dupACKs, timeouts): per-path TCP dupACKs, or SACKs that did not
    /// advance the cumulative point, and retransmission timeouts.
    pub fn transport_counters(&self) -> (u64, u64) {
        match &self.transport {
            Transport::Tcp(t) => t.iter().fold((0, 0), |(d, o), s| {
                (d + s.stats().dupacks, o + s.stats().timeouts)
            }),
            Transport::Sctp(c) => (c.stats().dup_sacks, c.stats().timeouts),
        }
    }

    /// Chunks open now.
    pub fn open_chunks(&self) -> usize {
        self.fountain.open_chunks()
    }

    /// When each chunk's first symbol was sent, chunk 0 first.
    pub fn chunk_starts(&self) -> &[Time] {
        &self.chunk_starts
    }

    /// Outstanding sequence numbers remembered (bounded by the windows).
    pub fn tracked_segments(&self) -> usize {
        self.seq_chunk.iter().map(BTreeMap::len).sum()
    }

    /// Starts the transport.
    pub fn start(&mut self, now: Time) {
        match &mut self.transport {
            Transport::Tcp(t) => t.iter_mut().for_each(|s| s.start(now)),
            Transport::Sctp(c) => c.start(now),
        }
        self.flush(now);
    }

    /// An ACK arrives: the report first (it may close a chunk), then the transport.
    pub fn on_ack(&mut self, now: Time, ack: &HmtpAck) {
        if let Some(r) = ack.report {
            self.fountain.on_report(&r);
        }
        match (&mut self.transport, &ack.feedback) {
            (Transport::Tcp(t), HmtpFeedback::Tcp(a)) => {
                let p = usize::from(ack.path);
                let Some(s) = t.get_mut(p) else {
                    return;
                };
                s.on_ack(now, a);
                // Everything below the cumulative ACK arrived: forget it.
                self.seq_chunk[p] = self.seq_chunk[p].split_off(&a.next_expected);
            }
            (Transport::Sctp(c), HmtpFeedback::Sack(s)) => {
                c.on_sack(now, s);
                self.seq_chunk[0] = self.seq_chunk[0].split_off(&c.cumulative());
            }
            // Feedback of the other transport: ignored.
            _ => return,
        }
        self.flush(now);
    }

    /// Transport timers due at `now` expire.
    pub fn on_timeout(&mut self, now: Time) {
        match &mut self.transport {
            Transport::Tcp(t) => {
                for s in t.iter_mut() {
                    if s.next_timeout().is_some_and(|x| x <= now) {
                        s.on_timeout(now);
                    }
                }
            }
            Transport::Sctp(c) => c.on_timeout(now),
        }
        self.flush(now);
    }

    /// The earliest transport timer.
    pub fn next_timeout(&self) -> Option<Time> {
        match &self.transport {
            Transport::Tcp(t) => t.iter().filter_map(NewRenoSender::next_timeout).min(),
            Transport::Sctp(c) => c.next_timeout(),
        }
    }

    /// The next packet to put on the wire (its path in `HmtpData::path`).
    pub fn poll_send(&mut self) -> Option<HmtpData> {
        self.out.pop_front()
    }

    /// Turns what the transport sends into packets.
    fn flush(&mut self, now: Time) {
        loop {
            let (path, seg) = match &mut self.transport {
                Transport::Tcp(t) => {
                    let Some((p, seg)) = t
                        .iter_mut()
                        .enumerate()
                        .find_map(|(p, s)| s.poll_send(now).map(|seg| (p, seg)))
                    else {
                        return;
                    };
                    (p, seg)
                }
                Transport::Sctp(c) => {
                    let Some(d) = c.poll_send() else {
                        return;
                    };
                    let seg = TcpSegment {
                        seq: d.tsn,
                        payload: d.payload,
                        retransmit: d.retransmit,
                    };
                    (usize::from(d.path), seg)
                }
            };
            let data = self.fill(path, seg);
            // Chunks open in id order, so a chunk's first symbol is the next start.
            if data.chunk == u32::try_from(self.chunk_starts.len()).ok() {
                self.chunk_starts.push(now);
            }
            self.out.push_back(data);
        }
    }

    /// Puts a symbol in segment `seg` on path `path` (none in the header-only SYN).
    fn fill(&mut self, path: usize, seg: TcpSegment) -> HmtpData {
        let map = match self.transport {
            Transport::Tcp(_) => path,
            Transport::Sctp(_) => 0,
        };
        let mut data = HmtpData {
            path: u8::try_from(path).unwrap_or(u8::MAX),
            seg,
            chunk: None,
            symbol: Vec::new(),
        };
        if seg.payload == 0 {
            return data;
        }
        if seg.retransmit
            && let Some(&lost) = self.seq_chunk[map].get(&seg.seq)
        {
            // Seed HMTP §III-A: the lost symbol is not sent again; its chunk is owed one.
            self.fountain.on_lost(lost);
        }
        match self.fountain.next_symbol() {
            Some((chunk, symbol)) => {
                self.seq_chunk[map].insert(seg.seq, chunk);
                data.chunk = Some(chunk);
                data.symbol = symbol;
            }
            None => {
                self.seq_chunk[map].remove(&seg.seq);
            }
        }
        data
    }
}
