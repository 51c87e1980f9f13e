//! The `cmt-sctp` baseline's sender: a CMT-SCTP-like transfer (Iyengar, Amer, Stewart,
//! "Concurrent Multipath Transfer Using SCTP Multihoming Over Independent End-to-End
//! Paths", IEEE/ACM ToN 2006; RFC 4960) that seed ETOM §V compares against. As in the
//! seed's set-up ("we combine the source node with the MR, and the HA with the
//! destination") it sits at the proxy and its receiver ([`super::CmtReceiver`]) at the
//! mobile host.
//!
//! What it models:
//! - one transmission sequence number (TSN) space for all paths; each packet carries one
//!   chunk of `packet_size` payload bytes plus a 40-byte header on the wire, as the TCP
//!   rows count (a real SCTP data packet has 48: IP 20, common header 12, chunk header 16);
//! - per path (CMT's per-destination state): cwnd and ssthresh in packets, slow start
//!   (+1 per newly acknowledged chunk below ssthresh), congestion avoidance (+1/cwnd per
//!   newly acknowledged chunk, about +1 packet per window), halving on loss; growth counts
//!   chunks acknowledged by gap blocks too, which is CMT's CUC (cwnd update for CMT), and
//!   stops while the path is in fast recovery (RFC 4960 §7.2.1);
//! - scheduling: new data goes to the next path, round-robin, whose outstanding chunks are
//!   below its cwnd (CMT's sender fills every destination's window; here per packet, so
//!   equal paths alternate); retransmissions go first, lowest TSN first, each to the path
//!   with room and the largest cwnd (RTX-CWND, one of the retransmission policies Iyengar
//!   et al. evaluate; it keeps retransmissions off a path whose window a loss or timeout
//!   has just cut);
//! - loss detection by missing reports (RFC 4960 §7.2.4): each SACK increments the report
//!   count of every chunk still missing below the highest TSN it newly acknowledges (HTNA);
//!   at three reports (the seed: "a lost chunk can not be retransmitted until three
//!   duplicate ACKs are received") the chunk is marked lost. CMT's split fast retransmit
//!   (SFR, which counts a report only against chunks sent to the same destination before a
//!   newly acknowledged one) is deliberately absent, so reordering across paths of unequal
//!   delay triggers spurious fast retransmits and cwnd cuts: the behaviour ETOM was
//!   compared against. A chunk is fast-retransmitted at most once; lost again, only the
//!   timer recovers it;
//! - on marking: the paths the lost chunks were last sent on, unless already in fast
//!   recovery, set ssthresh = max(cwnd / 2, 4) and cwnd = ssthresh (RFC 4960 §7.2.3, its
//!   4-MTU floor) and enter fast recovery until the cumulative ack passes the highest TSN
//!   sent so far (per destination, as CMT; RFC 4960 has one per association); the lowest
//!   marked chunk leaves at once even without window room (RFC 4960 §7.2.4 rule 4), on the
//!   path with the largest cwnd;
//! - one retransmission timer per path (RFC 4960 §6.3): RTO from ns-2's tick estimator
//!   ([`RttEstimator`], one timed chunk per path at a time, Karn's rule), min 1 s, initial
//!   3 s, max 60 s; restarted whenever a chunk last sent on the path is newly acknowledged
//!   (RFC 4960 §6.3.2 R3 restarts only for the earliest outstanding one), stopped when none
//!   is outstanding; on expiry ssthresh = max(cwnd / 2, 4), cwnd = 1, the timer backs off
//!   and every chunk outstanding on the path is marked for retransmission (§6.3.3);
//! - the receive window: a new TSN leaves only if it is below the cumulative ack plus
//!   `rwnd` packets. That is the a_rwnd of a receiver whose application reads in-order data
//!   at once and which buffers `rwnd` packets out of order: a hole at the cumulative point
//!   blocks the sender once it is `rwnd` chunks ahead.
//!
//! Not modelled: CMT's DAC (the receiver SACKs every packet), RFC 4960's
//! partial_bytes_acked (replaced by +1/cwnd per chunk), bundling (one chunk per packet),
//! heartbeats and path failure detection, the handshake.
//!
//! Invariants: for every path, `outstanding` counts the chunks last sent on it that are
//! neither acknowledged (cumulatively or by a gap block) nor marked for retransmission;
//! `chunks[i]` is TSN `cum + i` for every TSN in `cum..next_tsn`; `next_tsn < cum + rwnd`
//! whenever a new chunk is sent. No clock, no randomness: the same inputs give the same
//! outputs.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use plait_proto::Time;

use super::Outbox;
use crate::packet::{Body, CmtData, CmtSack, FlowId, Packet, TCP_HEADER};
use crate::tcp::RttEstimator;

/// The baseline's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmtConfig {
    /// Paths (destinations), at least 1.
    pub paths: usize,
    /// Payload bytes per chunk (one chunk per packet).
    pub packet_size: u32,
    /// Each path's initial cwnd, packets.
    pub initial_cwnd: u32,
    /// The receiver's buffer, packets (see the module docs).
    pub rwnd: u32,
    /// Most chunks outstanding over all paths (SCTP's peer rwnd: the advertised window
    /// minus the data in flight), for a receiver whose buffer never holds anything (HMTP's,
    /// see `hmtp_sender.rs`); `None`: only `rwnd` limits (the baseline). Also the initial
    /// ssthresh when set.
    pub flight_cap: Option<u32>,
    /// RFC 4960 §6.3.2 R3: a path's timer restarts only when the SACK acknowledges the
    /// earliest chunk outstanding on it. `false` (the baseline): it restarts whenever a
    /// chunk last sent on the path is newly acknowledged, which is only safe while the
    /// receive window stops new data behind a lost retransmission; HMTP's never-filling
    /// buffer needs R3, or a lost retransmission is never timed out.
    pub rfc_timer_restart: bool,
    /// Missing reports that mark a chunk lost (3: RFC 4960, the seed).
    pub dupthresh: u32,
    /// RTO.Min (RFC 4960: 1 s, as ns-2's TCP).
    pub min_rto: Duration,
    /// RTO.Initial (RFC 4960: 3 s).
    pub initial_rto: Duration,
    /// RTO.Max (RFC 4960: 60 s).
    pub max_rto: Duration,
    /// Granularity of RTT samples (ns-2's `tcpTick_`, 10 ms).
    pub tick: Duration,
}

impl Default for CmtConfig {
    fn default() -> Self {
        CmtConfig {
            paths: 2,
            packet_size: 1000,
            initial_cwnd: 2,
            rwnd: 64,
            flight_cap: None,
            rfc_timer_restart: false,
            dupthresh: 3,
            min_rto: Duration::from_secs(1),
            initial_rto: Duration::from_secs(3),
            max_rto: Duration::from_secs(60),
            tick: Duration::from_millis(10),
        }
    }
}

/// Counters a run reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmtSenderStats {
    /// Chunks sent, retransmissions included.
    pub chunks_sent: u64,
    /// Chunks sent again.
    pub retransmissions: u64,
    /// Chunks marked lost by three missing reports.
    pub fast_retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// SACKs received.
    pub sacks: u64,
    /// SACKs that did not advance the cumulative ack (the TCP rows' dupACKs).
    pub dup_sacks: u64,
    /// Send opportunities (a path with room) lost to the receive window.
    pub rwnd_blocked: u64,
}

#[derive(Clone, Debug)]
struct Chunk {
    /// The path it was last sent on.
    path: usize,
    acked: bool,
    marked: bool,
    missing: u32,
    fast_retransmitted: bool,
    retransmitted: bool,
}

#[derive(Clone, Debug)]
struct PathState {
    cwnd: f64,
    ssthresh: f64,
    outstanding: u32,
    rtt: RttEstimator,
    timer: Option<Time>,
    /// The chunk being timed and when it left.
    timed: Option<(u64, Time)>,
    /// In fast recovery until the cumulative ack passes this TSN.
    recover: Option<u64>,
}

/// The sans-IO sender state machine (see the module docs).
#[derive(Clone, Debug)]
pub struct CmtCore {
    config: CmtConfig,
    paths: Vec<PathState>,
    cum: u64,
    next_tsn: u64,
    chunks: VecDeque<Chunk>,
    marked: BTreeSet<u64>,
    rr: usize,
    out: VecDeque<CmtData>,
    stats: CmtSenderStats,
}

/// ssthresh after a loss (RFC 4960 §7.2.3: max(cwnd / 2, 4 MTU)).
fn halved(cwnd: f64) -> f64 {
    (cwnd / 2.0).max(4.0)
}

impl CmtCore {
    /// A sender with nothing sent.
    pub fn new(config: CmtConfig) -> CmtCore {
        let path = PathState {
            cwnd: f64::from(config.initial_cwnd.max(1)),
            // As ns-2's TCP starts ssthresh at its window cap: here the receive window.
            ssthresh: f64::from(config.flight_cap.unwrap_or(config.rwnd).max(1)),
            outstanding: 0,
            rtt: RttEstimator::new(
                config.initial_rto,
                config.min_rto,
                config.max_rto,
                config.tick,
            ),
            timer: None,
            timed: None,
            recover: None,
        };
        CmtCore {
            paths: vec![path; config.paths.max(1)],
            config,
            cum: 0,
            next_tsn: 0,
            chunks: VecDeque::new(),
            marked: BTreeSet::new(),
            rr: 0,
            out: VecDeque::new(),
            stats: CmtSenderStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &CmtSenderStats {
        &self.stats
    }

    /// Path `p`'s cwnd, packets (`None` for no such path).
    pub fn cwnd(&self, p: usize) -> Option<f64> {
        self.paths.get(p).map(|s| s.cwnd)
    }

    /// Every TSN below this is acknowledged.
    pub fn cumulative(&self) -> u64 {
        self.cum
    }

    /// The next new TSN.
    pub fn next_tsn(&self) -> u64 {
        self.next_tsn
    }

    /// The earliest retransmission timer.
    pub fn next_timeout(&self) -> Option<Time> {
        self.paths.iter().filter_map(|p| p.timer).min()
    }

    /// The next chunk to put on the wire, with its path in `CmtData::path`.
    pub fn poll_send(&mut self) -> Option<CmtData> {
        self.out.pop_front()
    }

    /// Starts the transfer: sends what the windows allow.
    pub fn start(&mut self, now: Time) {
        self.send_much(now);
    }

    /// A SACK arrives (on any path: SACKs are association-wide).
    pub fn on_sack(&mut self, now: Time, sack: &CmtSack) {
        self.stats.sacks += 1;
        // A SACK can only acknowledge what was sent; anything beyond is ignored.
        let new_cum = sack.next_expected.clamp(self.cum, self.next_tsn);
        if new_cum == self.cum {
            self.stats.dup_sacks += 1;
        }
        // R3: each path's earliest outstanding chunk before this SACK.
        let earliest: Vec<Option<u64>> = if self.config.rfc_timer_restart {
            (0..self.paths.len())
                .map(|p| {
                    self.chunks
                        .iter()
                        .position(|c| c.path == p && !c.acked && !c.marked)
                        .map(|i| self.cum + i as u64)
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut touched = vec![false; self.paths.len()];
        let mut highest_new: Option<u64> = None;
        let mut ack = |core: &mut CmtCore, tsn: u64| {
            if let Some(p) = core.ack_chunk(now, tsn) {
                touched[p] = true;
                highest_new = Some(highest_new.map_or(tsn, |h| h.max(tsn)));
            }
        };
        for tsn in self.cum..new_cum {
            ack(self, tsn);
        }
        // Gap blocks, clamped to what is outstanding above the new cumulative point.
        for &(a, b) in &sack.gaps {
            let a = a.max(new_cum);
            if a >= self.next_tsn {
                continue;
            }
            for tsn in a..=b.min(self.next_tsn - 1) {
                ack(self, tsn);
            }
        }
        while self.cum < new_cum {
            self.chunks.pop_front();
            self.cum += 1;
        }
        for p in &mut self.paths {
            if p.recover.is_some_and(|r| self.cum > r) {
                p.recover = None;
            }
        }
        let first_lost = highest_new.and_then(|h| self.count_missing(h));
        for (p, t) in touched.iter().enumerate() {
            let restart = match earliest.get(p) {
                None => *t,
                Some(Some(e)) => {
                    *e < self.cum
                        || self
                            .chunks
                            .get((*e - self.cum) as usize)
                            .is_some_and(|c| c.acked)
                }
                Some(None) => *t,
            };
            if restart {
                let rto = self.paths[p].rtt.timeout();
                let s = &mut self.paths[p];
                s.rtt.reset_backoff();
                s.timer = (s.outstanding > 0).then(|| now + rto);
            }
        }
        if let Some(tsn) = first_lost {
            // RFC 4960 §7.2.4 rule 4: the first fast retransmission ignores cwnd; RTX-CWND
            // picks its path.
            let p = self.rtx_path(false).unwrap_or(0);
            self.marked.remove(&tsn);
            self.send_chunk(now, p, tsn, true);
        }
        self.send_much(now);
    }

    /// Retransmission timers due at `now` expire.
    pub fn on_timeout(&mut self, now: Time) {
        for p in 0..self.paths.len() {
            if self.paths[p].timer.is_none_or(|t| t > now) {
                continue;
            }
            let s = &mut self.paths[p];
            s.timer = None;
            if s.outstanding == 0 {
                continue;
            }
            self.stats.timeouts += 1;
            s.rtt.back_off();
            s.ssthresh = halved(s.cwnd);
            s.cwnd = 1.0;
            s.recover = None;
            s.timed = None;
            for (i, c) in self.chunks.iter_mut().enumerate() {
                if c.path == p && !c.acked && !c.marked {
                    c.marked = true;
                    self.marked.insert(self.cum + i as u64);
                }
            }
            self.paths[p].outstanding = 0;
        }
        self.send_much(now);
    }

    fn chunk_mut(&mut self, tsn: u64) -> &mut Chunk {
        &mut self.chunks[(tsn - self.cum) as usize]
    }

    /// Acknowledges `tsn` (in `cum..next_tsn`); the path it was last sent on if it was not
    /// acknowledged before.
    fn ack_chunk(&mut self, now: Time, tsn: u64) -> Option<usize> {
        let c = self.chunk_mut(tsn);
        if c.acked {
            return None;
        }
        c.acked = true;
        let (p, was_marked, retransmitted) = (c.path, c.marked, c.retransmitted);
        c.marked = false;
        if was_marked {
            self.marked.remove(&tsn);
        }
        let s = &mut self.paths[p];
        if !was_marked {
            s.outstanding = s.outstanding.saturating_sub(1);
        }
        if let Some((t, sent)) = s.timed
            && t == tsn
        {
            if !retransmitted {
                s.rtt.sample(sent, now);
            }
            s.timed = None;
        }
        if s.recover.is_none() {
            s.cwnd += if s.cwnd < s.ssthresh {
                1.0
            } else {
                1.0 / s.cwnd
            };
        }
        Some(p)
    }

    /// HTNA: one more missing report for every chunk still missing below `highest`; marks
    /// those reaching the threshold, cuts their paths' windows, returns the lowest marked.
    fn count_missing(&mut self, highest: u64) -> Option<u64> {
        let mut first = None;
        let mut lost_on = vec![false; self.paths.len()];
        let threshold = self.config.dupthresh.max(1);
        for i in 0..(highest.saturating_sub(self.cum) as usize).min(self.chunks.len()) {
            let c = &mut self.chunks[i];
            if c.acked || c.marked || c.fast_retransmitted {
                continue;
            }
            c.missing += 1;
            if c.missing >= threshold {
                c.marked = true;
                c.fast_retransmitted = true;
                lost_on[c.path] = true;
                let s = &mut self.paths[c.path];
                s.outstanding = s.outstanding.saturating_sub(1);
                if s.timed.is_some_and(|(t, _)| t == self.cum + i as u64) {
                    s.timed = None;
                }
                self.stats.fast_retransmits += 1;
                let tsn = self.cum + i as u64;
                self.marked.insert(tsn);
                first.get_or_insert(tsn);
            }
        }
        for (p, lost) in lost_on.into_iter().enumerate() {
            let s = &mut self.paths[p];
            if lost && s.recover.is_none() {
                s.ssthresh = halved(s.cwnd);
                s.cwnd = s.ssthresh;
                s.recover = Some(self.next_tsn.saturating_sub(1));
            }
            if s.outstanding == 0 {
                s.timer = None;
            }
        }
        first
    }

    /// Whether path `p` may send one more chunk.
    fn has_room(&self, p: usize) -> bool {
        if let Some(cap) = self.config.flight_cap {
            let total: u32 = self.paths.iter().map(|s| s.outstanding).sum();
            if total >= cap.max(1) {
                return false;
            }
        }
        f64::from(self.paths[p].outstanding) < self.paths[p].cwnd.floor()
    }

    /// CMT's RTX-CWND: the path with the largest cwnd (among those with room if
    /// `need_room`); ties go to the first in round-robin order.
    fn rtx_path(&self, need_room: bool) -> Option<usize> {
        let n = self.paths.len();
        let mut best: Option<usize> = None;
        for p in (0..n).map(|k| (self.rr + k) % n) {
            if need_room && !self.has_room(p) {
                continue;
            }
            if best.is_none_or(|b| self.paths[p].cwnd > self.paths[b].cwnd) {
                best = Some(p);
            }
        }
        best
    }

    /// Fills every path's window: retransmissions first (lowest TSN first, RTX-CWND), then
    /// new data round-robin over the paths with room.
    fn send_much(&mut self, now: Time) {
        let n = self.paths.len();
        loop {
            if let Some(&tsn) = self.marked.first() {
                let Some(p) = self.rtx_path(true) else {
                    return;
                };
                self.marked.remove(&tsn);
                self.send_chunk(now, p, tsn, true);
                continue;
            }
            let Some(p) = (0..n)
                .map(|k| (self.rr + k) % n)
                .find(|&p| self.has_room(p))
            else {
                return;
            };
            if self.next_tsn >= self.cum + u64::from(self.config.rwnd.max(1)) {
                self.stats.rwnd_blocked += 1;
                return;
            }
            let tsn = self.next_tsn;
            self.next_tsn += 1;
            self.chunks.push_back(Chunk {
                path: p,
                acked: false,
                marked: false,
                missing: 0,
                fast_retransmitted: false,
                retransmitted: false,
            });
            self.send_chunk(now, p, tsn, false);
            self.rr = (p + 1) % n;
        }
    }

    /// Puts `tsn` on path `p` (its chunk exists and is not acknowledged).
    fn send_chunk(&mut self, now: Time, p: usize, tsn: u64, retransmit: bool) {
        let c = self.chunk_mut(tsn);
        c.path = p;
        c.marked = false;
        c.missing = 0;
        c.retransmitted |= retransmit;
        let rto = self.paths[p].rtt.timeout();
        let s = &mut self.paths[p];
        s.outstanding += 1;
        if s.timer.is_none() {
            s.timer = Some(now + rto);
        }
        if !retransmit && s.timed.is_none() {
            s.timed = Some((tsn, now));
        }
        self.stats.chunks_sent += 1;
        if retransmit {
            self.stats.retransmissions += 1;
        }
        self.out.push_back(CmtData {
            tsn,
            path: p as u8,
            payload: self.config.packet_size,
            retransmit,
        });
    }
}

/// The sender as a node: an infinite FTP source from `start`, one data flow per path.
#[derive(Debug)]
pub struct CmtSender {
    core: CmtCore,
    /// Per path: the flow its data packets take.
    flows: Vec<FlowId>,
    start: Time,
    started: bool,
    sacks: VecDeque<CmtSack>,
    /// When each application data unit's first packet first went out
    /// ([`super::app_delay`]).
    unit_starts: Vec<Time>,
}

impl CmtSender {
    /// A sender putting path `i`'s packets on `flows[i]` from `start`.
    pub fn new(config: CmtConfig, flows: Vec<FlowId>, start: Time) -> CmtSender {
        CmtSender {
            core: CmtCore::new(config),
            flows,
            start,
            started: false,
            sacks: VecDeque::new(),
            unit_starts: Vec::new(),
        }
    }

    /// The state machine (statistics).
    pub fn core(&self) -> &CmtCore {
        &self.core
    }

    /// When each unit of [`super::app_delay::DELAY_UNIT_PACKETS`] packets started.
    pub fn unit_starts(&self) -> &[Time] {
        &self.unit_starts
    }

    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        if let Body::CmtSack(sack) = pkt.body {
            self.sacks.push_back(sack);
        }
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        if !self.started {
            if now < self.start {
                return;
            }
            self.core.start(now);
            self.started = true;
        }
        if self.core.next_timeout().is_some_and(|t| t <= now) {
            self.core.on_timeout(now);
        }
        // One SACK at a time, each followed by what it allows (as the TCP sender does).
        while let Some(sack) = self.sacks.pop_front() {
            self.core.on_sack(now, &sack);
            self.flush(now, out);
        }
        self.flush(now, out);
    }

    fn flush(&mut self, now: Time, out: &mut Outbox) {
        while let Some(data) = self.core.poll_send() {
            if !data.retransmit {
                super::app_delay::note_first_send(
                    &mut self.unit_starts,
                    data.tsn,
                    super::app_delay::DELAY_UNIT_PACKETS,
                    now,
                );
            }
            let Some(&flow) = self.flows.get(usize::from(data.path)) else {
                continue;
            };
            out.send(Packet {
                flow,
                size: data.payload + TCP_HEADER,
                body: Body::CmtData(data),
            });
        }
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        if self.started {
            self.core.next_timeout()
        } else {
            Some(self.start)
        }
    }
}
