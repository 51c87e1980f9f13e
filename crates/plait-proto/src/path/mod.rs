//! Per-path sender state: what this endpoint sent on one path and what it learnt of the
//! path from the peer's feedback.
//!
//! [`Path`] owns, for one path: the next path sequence number; the log of unresolved sent
//! datagrams; loss detection (RFC 9002 §6.1 thresholds: 3 packets or 9/8 RTT, per path, so a
//! loss on one path says nothing about another, widened by the reordering its spurious
//! losses show, `late.rs`); RTT (RFC 6298), relative one-way delay,
//! packet-pair and delivery-rate estimators; the loss rate; and the liveness state machine.
//!
//! Invariants: `bytes_in_flight` is the sum of `len` over log entries with `in_flight`;
//! only ack-eliciting datagrams are in flight; an ACK naming a sequence number this path
//! never sent is ignored whole.

mod handover;
mod late;
mod liveness;
mod minmax;
mod owd;
mod rate;
pub mod rtt;
mod sent;
#[cfg(test)]
mod tests;
mod view;

use std::ops::RangeInclusive;
use std::time::Duration;

pub use handover::{HANDBACK_SIGNAL_MARGIN, HandoverConfig, HandoverReason, signal_under};
pub(crate) use handover::{HandoverChange, HandoverTracker, QualitySample, judge};
use late::{LateLosses, PendingLoss};
pub use liveness::LivenessConfig;
pub use minmax::WindowedMin;
pub use owd::{OwdEstimator, OwdReference, micros_to_duration};
pub use rate::{
    DeliveryRateEstimator, MIN_PAIR_BYTES, PAIR_EWMA_NEW, PairRateEstimator, TrainRateEstimator,
};
pub use rtt::{Feedback, Return, RttEstimator};
pub use sent::{SendHistory, SentLog, SentPacket};
pub use view::{MAX_PRIORITY, PathHints, PathState, PathView};

use crate::cc::{Acked, CongestionKind, Coupling, PathCongestion, SHALLOW_QUEUE, is_rate};
use crate::ids::{GlobalSeq, PathId, PathSeq, expand_seq};
use crate::time::Time;

/// Gain of the smoothed loss rate per resolved datagram.
const LOSS_RATE_GAIN: f64 = 1.0 / 32.0;
/// Without new samples the loss rate halves every this long: a path the scheduler avoids
/// because of its losses gets no samples, and a frozen estimate would keep it avoided for
/// good (seen on the tunnel: a 0.3 loss rate left over from a blackhole).
const LOSS_HALF_LIFE: Duration = Duration::from_secs(2);

/// Unanswered probes (5 pairs) before the probe interval also keeps to [`PROBE_SHARE`].
const PROBES_AT_FULL_RATE: u32 = 10;

/// Most of a path's rate its probe pairs may take while it is probing or down.
const PROBE_SHARE: f64 = 0.05;

/// Bytes a probe occupies on a link, headers of every layer included (a PROBE datagram
/// of about 30 bytes and the tunnel's and UDP/IP's).
const PROBE_LINK_BYTES: f64 = 90.0;

/// Most inner packets a path going down names for repair on the others: the repair
/// store's own queue bound (`session::repair_store`).
const MAX_ABANDONED: usize = 1024;

/// Counters of one path (sender and receiver side together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Datagrams sent.
    pub sent_datagrams: u64,
    /// Bytes of datagrams sent.
    pub sent_bytes: u64,
    /// Inner packets sent (DATA frames, copies included).
    pub sent_data: u64,
    /// Datagrams received.
    pub recv_datagrams: u64,
    /// Bytes of datagrams received.
    pub recv_bytes: u64,
    /// Ack-eliciting datagrams acknowledged.
    pub acked: u64,
    /// Ack-eliciting datagrams declared lost by the loss thresholds.
    pub lost: u64,
    /// Of those, datagrams an ACK named afterwards: late, not lost (`late.rs`).
    pub spurious_losses: u64,
    /// Ack-eliciting datagrams given up when the path went down.
    pub lost_on_down: u64,
    /// Probes sent.
    pub probes_sent: u64,
    /// Times the path went down.
    pub down_events: u64,
}

/// What one ACK (or PROBE_ACK) did, for the session's bookkeeping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// Datagrams newly acknowledged.
    pub newly_acked: u64,
    /// Datagrams newly declared lost.
    pub newly_lost: u64,
    /// The state changed from `.0` to `.1`.
    pub state_change: Option<(PathState, PathState)>,
}

/// Sender-side state of one path (see the module docs).
#[derive(Clone, Debug)]
pub struct Path {
    id: PathId,
    state: PathState,
    next_seq: PathSeq,
    log: SentLog,
    history: SendHistory,
    bytes_in_flight: u64,
    largest_acked: Option<PathSeq>,
    loss_deadline: Option<Time>,
    rtt: RttEstimator,
    owd: OwdEstimator,
    pair: PairRateEstimator,
    train: TrainRateEstimator,
    delivery: DeliveryRateEstimator,
    loss_rate: f64,
    /// The same over datagrams resolved while the queue was shorter than
    /// [`SHALLOW_QUEUE`], probes sent before the path's first answer left out
    /// (`SentPacket::link_sample`): in the simulator a clean path's first probe pair is
    /// declared lost (about 6 % from one pair, decaying over seconds while the queue stays
    /// long), and that, read as random loss, made packet-mode FEC send symbols on clean
    /// paths (docs/protocol.md#fec). Later probes count, those of a path gone down too: on
    /// a lossy path that carries little data they are most of the evidence, and leaving
    /// out a down path's probes cost the `plait` scheduler 13 % on bursty loss.
    shallow_loss_rate: f64,
    /// Declared losses awaiting confirmation, and the reordering allowance.
    late: LateLosses,
    /// When `loss_rate` was last updated or decayed.
    loss_updated: Time,
    hints: PathHints,
    /// Send time of the oldest ack-eliciting datagram sent since the last answer.
    awaiting_since: Option<Time>,
    /// When the peer last answered anything newly (ACK or PROBE_ACK).
    last_answer: Option<Time>,
    last_eliciting_sent: Option<Time>,
    /// Last (seq, receive time µs, send time, len) seen in a timestamp list: the first half of
    /// a potential packet pair.
    last_ts: Option<(PathSeq, u32, Time, u32)>,
    probes_answered: u32,
    probes_unanswered: u32,
    next_probe_at: Option<Time>,
    last_data_global: Option<GlobalSeq>,
    stats: PathStats,
    liveness: LivenessConfig,
    max_ack_delay: Duration,
    /// When the last datagram asking for prompt ACKs (ACK_SOON) was sent; `None` once the
    /// controller was told the datagrams no longer ask ([`Path::on_ack_soon`]).
    ack_soon_at: Option<Time>,
    /// Cached [`Path::compute_timer`], refreshed after every change of the state it reads.
    timer: Option<Time>,
    /// The path's congestion controller, recovery period and pacer.
    cc: PathCongestion,
    /// While the path is handed over (docs/protocol.md#handover): a probe this often,
    /// so its loss and delay stay measured without data.
    handover_probe: Option<Duration>,
    /// Fates of reliable datagrams (seq, acknowledged?) for the session to collect.
    resolved: Vec<(PathSeq, bool)>,
    /// Inner packets (global sequence numbers) that were in flight when the path went
    /// down, for the session to collect and repair on other paths
    /// (docs/protocol.md#repair).
    abandoned: Vec<GlobalSeq>,
}

impl Path {
    /// A new path in state [`PathState::Probing`], with a probe pair due at `now`.
    /// `max_ack_delay` is the peer's (the same config runs at both ends).
    pub fn new(
        id: PathId,
        now: Time,
        hints: PathHints,
        liveness: LivenessConfig,
        max_ack_delay: Duration,
        min_pair_bytes: usize,
        congestion: (CongestionKind, u64),
    ) -> Path {
        let mut path = Path {
            id,
            state: PathState::Probing,
            next_seq: 0,
            log: SentLog::default(),
            history: SendHistory::default(),
            bytes_in_flight: 0,
            largest_acked: None,
            loss_deadline: None,
            rtt: RttEstimator::default(),
            owd: OwdEstimator::default(),
            pair: PairRateEstimator::with_min_len(min_pair_bytes),
            train: TrainRateEstimator::default(),
            delivery: DeliveryRateEstimator::default(),
            loss_rate: 0.0,
            shallow_loss_rate: 0.0,
            late: LateLosses::default(),
            loss_updated: now,
            hints,
            awaiting_since: None,
            last_answer: None,
            last_eliciting_sent: None,
            last_ts: None,
            probes_answered: 0,
            probes_unanswered: 0,
            next_probe_at: Some(now),
            last_data_global: None,
            stats: PathStats::default(),
            liveness,
            max_ack_delay,
            ack_soon_at: None,
            timer: None,
            cc: PathCongestion::new(congestion.0, congestion.1),
            handover_probe: None,
            resolved: Vec::new(),
            abandoned: Vec::new(),
        };
        path.timer = path.compute_timer();
        path
    }

    /// This path's id.
    pub fn id(&self) -> PathId {
        self.id
    }

    /// Current liveness state.
    pub fn state(&self) -> PathState {
        self.state
    }

    /// The sequence number the next datagram will take.
    pub fn next_seq(&self) -> PathSeq {
        self.next_seq
    }

    /// Continues the numbering of an earlier path with this id: the next datagram takes
    /// `next_seq`. Only before anything was sent (a re-added path, docs/protocol.md#sequence-numbers).
    pub fn resume_numbering(&mut self, next_seq: PathSeq) {
        debug_assert!(self.log.base().is_none() && self.next_seq == 0);
        self.next_seq = next_seq;
    }

    /// Entries held now: the log of unresolved datagrams, the send history, fates not yet
    /// collected (each bounded; for [`crate::session::Footprint`]).
    pub fn held(&self) -> (usize, usize, usize) {
        (self.log.len(), self.history.len(), self.resolved.len())
    }

    /// Counters.
    pub fn stats(&self) -> &PathStats {
        &self.stats
    }

    /// Mutable counters (the session counts received datagrams here).
    pub fn stats_mut(&mut self) -> &mut PathStats {
        &mut self.stats
    }

    /// How the peer returns this path's ACKs (see [`Feedback`]; the session says so once
    /// it has carried a stream, docs/protocol.md#min-rtt-by-return).
    pub fn set_feedback(&mut self, feedback: Feedback) {
        self.rtt.set_feedback(feedback);
    }

    /// RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// One-way delay estimator.
    pub fn owd(&self) -> &OwdEstimator {
        &self.owd
    }

    /// Bytes in flight.
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    /// The path's congestion state (window, pacing).
    pub fn congestion(&self) -> &PathCongestion {
        &self.cc
    }

    /// Whether this path's window and pacer let a datagram of `len` bytes go now (the one
    /// test of packet pacing and stream sending, docs/protocol.md#packet-pacing).
    pub fn send_hold(&self, now: Time, len: u64) -> SendHold {
        let room = self.cc.window().saturating_sub(self.bytes_in_flight);
        if room < len {
            return SendHold::Window;
        }
        let release = self.pacing_release(now, len);
        if release > now {
            SendHold::Pacer(release)
        } else {
            SendHold::Open { room }
        }
    }

    /// When the pacer lets a datagram of `len` bytes go (`now` if at once).
    pub fn pacing_release(&self, now: Time, len: u64) -> Time {
        self.cc.pacing_release(now, self.rtt.srtt(), len)
    }

    /// Marks the datagram just sent as `seq` reliable (it carried stream frames).
    pub fn mark_reliable(&mut self, seq: PathSeq) {
        if let Some(p) = self.log.get_mut(seq) {
            p.reliable = true;
        }
    }

    /// Takes the fates of reliable datagrams resolved since the last call.
    pub fn take_resolved(&mut self) -> std::vec::Drain<'_, (PathSeq, bool)> {
        self.resolved.drain(..)
    }

    /// The inner packets that were in flight when the path last went down (oldest
    /// first), for the session to collect.
    pub fn take_abandoned(&mut self) -> std::vec::Drain<'_, GlobalSeq> {
        self.abandoned.drain(..)
    }

    /// The inner packets still in flight on this path (sent, neither acknowledged nor
    /// declared lost; oldest first, at most [`MAX_ABANDONED`]), for a session that removes
    /// the path to send again on the others (docs/protocol.md#repair, "a path removed").
    pub fn outstanding_data(&self) -> impl Iterator<Item = GlobalSeq> + '_ {
        self.log
            .iter()
            .filter(|p| p.is_outstanding())
            .filter_map(|p| p.data)
            .take(MAX_ABANDONED)
    }

    /// `prev_delta` for a DATA frame carrying `global` on this path
    /// (docs/protocol.md#data-frame): distance to the previous DATA sent here, 0 if none.
    pub fn prev_delta(&self, global: GlobalSeq) -> u64 {
        self.last_data_global
            .and_then(|prev| global.checked_sub(prev))
            .filter(|d| *d > 0 && *d < (1 << 31))
            .unwrap_or(0)
    }

    /// A datagram about to be sent on this path asks for prompt ACKs (ACK_SOON,
    /// docs/protocol.md#ack-soon) or, `marked` false, one that could ask does not: the
    /// controller's model of the peer's ACK hold follows at once. An unmarked
    /// ack-eliciting datagram of another kind (packet-mode DATA in a session that also
    /// carries streams) ends the prompt model only once no marked one went out for
    /// `max_ack_delay` ([`Path::on_sent`]): until then the peer's ACKs stay prompt, as
    /// one marked datagram since its last ACK makes the next one prompt.
    pub fn on_ack_soon(&mut self, now: Time, marked: bool) {
        self.ack_soon_at = marked.then_some(now);
        self.cc.set_prompt_acks(marked);
    }

    /// Records a datagram sent now; returns its path sequence number.
    pub fn on_sent(
        &mut self,
        now: Time,
        len: usize,
        ack_eliciting: bool,
        probe_id: Option<u32>,
        data: Option<GlobalSeq>,
    ) -> PathSeq {
        let seq = self.next_seq;
        self.next_seq += 1;
        if ack_eliciting
            && self
                .ack_soon_at
                .is_some_and(|t| now.saturating_since(t) > self.max_ack_delay)
        {
            self.on_ack_soon(now, false);
        }
        let len32 = u32::try_from(len).unwrap_or(u32::MAX);
        self.history.push(seq, now, len32);
        let cwnd_limited = (self.bytes_in_flight + u64::from(len32)) * 2 >= self.cc.window();
        // A probe of a path that is down or not yet active asks whether the path works: it
        // takes no room in the window. Counted, the probes sent into an outage (about 6 KB
        // over T4's 5 s blackhole) outlive it unanswered, fill the two-datagram window the
        // controller restarts with, and keep data off the path until a later ACK declares
        // them lost (about a second in the simulator's T4). They still sample the link's
        // loss (`shallow_loss_rate`).
        let probing = probe_id.is_some() && !self.state.is_usable();
        let in_flight = ack_eliciting && !probing;
        let forced = self.log.push(SentPacket {
            seq,
            sent: now,
            len: len32,
            ack_eliciting,
            in_flight,
            acked: false,
            lost: false,
            probe_id,
            link_sample: probe_id.is_none() || self.last_answer.is_some(),
            reliable: false,
            cwnd_limited,
            data,
        });
        if let Some(old) = forced {
            // The log is full of unanswered datagrams: count the oldest lost.
            if old.in_flight {
                self.bytes_in_flight -= u64::from(old.len);
            }
            self.stats.lost += 1;
            if old.reliable {
                self.resolved.push((old.seq, false));
            }
        }
        if in_flight {
            self.bytes_in_flight += u64::from(len32);
        }
        if ack_eliciting {
            self.cc.on_sent(now, self.rtt.srtt(), u64::from(len32));
            self.awaiting_since.get_or_insert(now);
            self.last_eliciting_sent = Some(now);
        }
        if let Some(g) = data {
            self.last_data_global = Some(g);
            self.stats.sent_data += 1;
        }
        if probe_id.is_some() {
            self.stats.probes_sent += 1;
        }
        self.stats.sent_datagrams += 1;
        self.stats.sent_bytes += u64::from(len32);
        self.timer = self.compute_timer();
        seq
    }

    /// Expands an ACK frame's truncated largest sequence number; `None` if it names a
    /// datagram this path never sent (the ACK is then ignored).
    pub fn expand_ack_largest(&self, truncated: u32) -> Option<PathSeq> {
        let largest = expand_seq(self.next_seq.saturating_sub(1), truncated);
        (largest < self.next_seq).then_some(largest)
    }

    /// Processes one ACK frame for this path (docs/protocol.md#ack-frame).
    ///
    /// `largest` comes from [`Path::expand_ack_largest`]; `ranges` are the acknowledged
    /// ranges (highest first); `timestamps` are (seq, receive µs on the peer's clock);
    /// `returned` says whether the frame came over this path or another (its RTT sample
    /// counts toward that way's minimum, `rtt` module docs).
    #[allow(clippy::too_many_arguments)]
    pub fn on_ack(
        &mut self,
        now: Time,
        largest: PathSeq,
        ack_delay: Duration,
        ranges: impl Iterator<Item = RangeInclusive<PathSeq>>,
        timestamps: impl Iterator<Item = (PathSeq, u32)>,
        owd_ref: &mut OwdReference,
        coupling: &Coupling<'_>,
        returned: Return,
    ) -> AckOutcome {
        let mut out = AckOutcome::default();
        let (mut cc_bytes, mut cc_limited, mut spurious) = (0u64, false, 0u32);
        let mut cc_newest_sent: Option<Time> = None;
        // Timestamps are usable even when every datagram they name is already resolved.
        let base = self.log.base().unwrap_or(self.next_seq);
        let mut largest_newly_acked: Option<SentPacket> = None;
        let mut probes_acked = 0;
        // Datagrams resolved by this ACK for the link-loss samples (probes and datagrams
        // already counted lost left out).
        let mut delivered = 0u32;
        let srtt = self.rtt.srtt().unwrap_or_default();
        for range in ranges {
            // Declared losses this range names were late: undo their loss-rate samples;
            // those already gone from the log count for the controller's undo here
            // (those still in it count below, as `was_lost`).
            let mut popped_late = 0u32;
            let taken = self.late.take_acked(&range, now, srtt, |p| {
                popped_late += u32::from(p.seq < base);
            });
            if taken > 0 {
                self.stats.spurious_losses += u64::from(taken);
                spurious += popped_late;
                // Approximate: removes the loss sample as if it had been the latest one.
                self.loss_rate = (self.loss_rate - LOSS_RATE_GAIN * f64::from(taken)).max(0.0);
            }
            let lo = (*range.start()).max(base);
            let hi = (*range.end()).min(self.next_seq.saturating_sub(1));
            for seq in (lo..=hi).rev() {
                if let Some(p) = self.log.get_mut(seq) {
                    if p.acked {
                        continue;
                    }
                    let was_lost = p.lost;
                    p.acked = true;
                    let pkt = *p;
                    self.on_newly_acked(now, &pkt, was_lost);
                    out.newly_acked += 1;
                    if pkt.ack_eliciting && pkt.probe_id.is_none() && !self.cc.in_recovery(pkt.sent)
                    {
                        cc_bytes += u64::from(pkt.len);
                        cc_limited |= pkt.cwnd_limited;
                        cc_newest_sent = cc_newest_sent.max(Some(pkt.sent));
                    }
                    spurious += u32::from(was_lost);
                    delivered +=
                        u32::from(pkt.ack_eliciting && pkt.probe_id.is_none() && !was_lost);
                    if pkt.reliable {
                        self.resolved.push((seq, true));
                    }
                    probes_acked += u32::from(pkt.probe_id.is_some());
                    if largest_newly_acked.is_none_or(|l| l.seq < seq) {
                        largest_newly_acked = Some(pkt);
                    }
                }
            }
        }
        let shortest_owd = self.take_timestamps(now, timestamps, owd_ref);
        if let Some(p) = largest_newly_acked {
            self.largest_acked = Some(self.largest_acked.map_or(largest, |l| l.max(largest)));
            if p.seq == largest && p.ack_eliciting {
                self.rtt
                    .on_sample(now, now.saturating_since(p.sent), ack_delay, returned);
            }
            self.on_answer(now, p.seq, probes_acked, &mut out);
        }
        // Judged once, with this ACK's own delay samples: the controller's start-up and the
        // link-loss samples below read the same queue.
        let shallow = self.queue_is_shallow();
        if (cc_bytes > 0 || spurious > 0)
            && let (Some(srtt), Some(min_rtt)) = (self.rtt.srtt(), self.rtt.min_rtt())
        {
            let acked = Acked {
                bytes: cc_bytes,
                srtt,
                min_rtt,
                bytes_in_flight: self.bytes_in_flight,
                app_limited: !cc_limited,
                newest_sent: cc_newest_sent,
                standing_queue: !shallow,
                queue_delay_seen: shortest_owd.zip(self.owd.base_us()).map(|(owd, base)| {
                    Duration::from_micros(owd.saturating_sub(base).max(0).unsigned_abs())
                }),
            };
            self.cc.on_ack(now, &acked, spurious, coupling);
        }
        // None while the queue is long (judged with this ACK's own delay samples, as the
        // losses it reveals are below), as losses then are no samples either
        // (`LinkLossTally::add`).
        if shallow {
            self.cc.on_link_sample(now, delivered, 0);
        }
        out.newly_lost = self.detect_losses(now, coupling, true);
        self.log.pop_resolved();
        out.state_change = out.state_change.or(self.rejudge(now));
        self.timer = self.compute_timer();
        out
    }

    /// Processes a PROBE_ACK for a probe sent on this path: an immediate two-way answer.
    pub fn on_probe_ack(&mut self, now: Time, probe_id: u32) -> AckOutcome {
        let mut out = AckOutcome::default();
        let Some(pkt) = self.log.iter_mut().find(|p| p.probe_id == Some(probe_id)) else {
            return out;
        };
        if !pkt.acked {
            let was_lost = pkt.lost;
            pkt.acked = true;
            let pkt = *pkt;
            self.on_newly_acked(now, &pkt, was_lost);
            self.rtt
                .on_probe_sample(now, now.saturating_since(pkt.sent));
            out.newly_acked = 1;
            self.on_answer(now, pkt.seq, 1, &mut out);
        }
        self.log.pop_resolved();
        out.state_change = out.state_change.or(self.rejudge(now));
        self.timer = self.compute_timer();
        out
    }

    fn on_newly_acked(&mut self, now: Time, pkt: &SentPacket, was_lost: bool) {
        if pkt.in_flight {
            self.bytes_in_flight -= u64::from(pkt.len);
        }
        if pkt.ack_eliciting {
            self.stats.acked += 1;
            if !was_lost {
                self.decay_loss(now);
                self.loss_rate += (0.0 - self.loss_rate) * LOSS_RATE_GAIN;
                if pkt.link_sample && self.queue_is_shallow() {
                    self.shallow_loss_rate += (0.0 - self.shallow_loss_rate) * LOSS_RATE_GAIN;
                }
            }
            self.delivery
                .on_ack(now, u64::from(pkt.len), self.rtt.srtt());
            // A delivery rate well above the train median proves the runs stale.
            if let Some(d) = self.delivery.rate()
                && self
                    .train
                    .rate()
                    .is_some_and(|m| d > m * view::STALE_PAIR_MARGIN)
            {
                self.train.raise_to(d);
            }
        }
    }

    /// The peer answered up to datagram `seq`, `probes_acked` of them probes: liveness
    /// bookkeeping and probing → active.
    fn on_answer(&mut self, now: Time, seq: PathSeq, probes_acked: u32, out: &mut AckOutcome) {
        // Silence now counts from the oldest datagram sent after the answered one.
        self.last_answer = Some(now);
        self.awaiting_since = self
            .log
            .iter()
            .find(|p| p.seq > seq && p.is_outstanding())
            .map(|p| p.sent);
        if matches!(self.state, PathState::Probing | PathState::Down) {
            if self.state == PathState::Down {
                self.set_state(PathState::Probing, out);
            }
            if probes_acked > 0 {
                self.probes_answered += probes_acked;
                self.probes_unanswered = 0;
                // Keep probing promptly until activation.
                self.next_probe_at = Some(now);
            }
            if self.probes_answered >= self.liveness.probes_to_activate {
                self.set_state(PathState::Active, out);
                self.next_probe_at = None;
            }
        }
    }

    fn set_state(&mut self, to: PathState, out: &mut AckOutcome) {
        if self.state != to {
            let from = out.state_change.map_or(self.state, |(f, _)| f);
            out.state_change = Some((from, to));
            self.state = to;
        }
    }

    /// Receive timestamps: one-way delay samples, and packet pairs from consecutive seqs.
    /// Returns the shortest relative one-way delay among them (`None` without a sample).
    fn take_timestamps(
        &mut self,
        now: Time,
        timestamps: impl Iterator<Item = (PathSeq, u32)>,
        owd_ref: &mut OwdReference,
    ) -> Option<i64> {
        let mut shortest: Option<i64> = None;
        // A small sorted batch: timestamps may come in any order.
        let mut batch: [(PathSeq, u32); 64] = [(0, 0); 64];
        let mut n = 0;
        for ts in timestamps.take(64) {
            batch[n] = ts;
            n += 1;
        }
        let batch = &mut batch[..n];
        batch.sort_unstable_by_key(|(seq, _)| *seq);
        for &(seq, recv_us) in batch.iter() {
            let Some((sent, len)) = self.history.get(seq) else {
                continue;
            };
            let rel = owd_ref.relative_us(sent.wire_micros(), recv_us);
            self.owd.on_sample(now, rel);
            shortest = Some(shortest.map_or(rel, |s| s.min(rel)));
            if let Some((pseq, precv, psent, plen)) = self.last_ts
                && pseq + 1 == seq
            {
                let dispersion = recv_us.wrapping_sub(precv) as i32;
                self.train.on_step(
                    sent.saturating_since(psent),
                    Duration::from_micros(dispersion.max(0) as u64),
                    len as usize,
                );
                if dispersion > 0 {
                    let dispersion = Duration::from_micros(dispersion as u64);
                    self.pair.on_pair(
                        sent.saturating_since(psent),
                        dispersion,
                        plen as usize,
                        len as usize,
                    );
                }
            } else {
                self.train.end_run();
            }
            self.last_ts = Some((seq, recv_us, sent, len));
        }
        shortest
    }

    /// RFC 9002 §6.1 loss detection below the largest acknowledged, its thresholds widened
    /// by the reordering seen (`late.rs`); returns newly lost. Scans from the oldest and
    /// stops at the first datagram not yet lost (younger ones are closer to the largest and
    /// sent later, so they cannot be lost either).
    /// `on_ack`: called for an ACK that just arrived, not by the loss timer; only then are
    /// the losses evidence of the link's own loss for the controller (a path gone silent
    /// finds its flight lost by timer, and that is an outage, `cc::Adaptive`). Link-loss
    /// samples wait for the losses' confirmation ([`Path::confirm_losses`]).
    fn detect_losses(&mut self, now: Time, coupling: &Coupling<'_>, on_ack: bool) -> u64 {
        self.loss_deadline = None;
        let Some(largest) = self.largest_acked else {
            self.confirm_losses(now);
            return 0;
        };
        let rtt = self
            .rtt
            .srtt()
            .unwrap_or_default()
            .max(self.rtt.latest().unwrap_or_default());
        let threshold = (rtt * 9 / 8).max(Duration::from_millis(1)) + self.late.extra_time();
        let packet_threshold = self.late.packet_threshold();
        // Judged when a loss is declared: the datagrams sent after it show the queue it met.
        let shallow = self.queue_is_shallow();
        let mut lost = 0;
        let mut lost_to_outage = 0;
        let mut lost_bytes = 0;
        let mut youngest_lost = None;
        // Losses the pending list's bound confirms early.
        let mut forced = LinkLossTally::default();
        for p in self.log.iter_mut() {
            if p.seq >= largest {
                break;
            }
            if !p.is_outstanding() {
                continue;
            }
            let lost_by_time = now.saturating_since(p.sent) >= threshold;
            let lost_by_packets = largest >= p.seq + packet_threshold;
            if lost_by_time || lost_by_packets {
                p.lost = true;
                if p.in_flight {
                    p.in_flight = false;
                    lost_bytes += u64::from(p.len);
                    lost += 1;
                } else {
                    // A probe sent while the path was down or probing: lost to the outage,
                    // which liveness judged; not a sample of the loss rate once it is back.
                    lost_to_outage += 1;
                }
                // A lost probe says the path is silent (liveness judges that), not that
                // the sender overran it: probes are not congestion signals.
                if p.probe_id.is_none() {
                    youngest_lost = Some(p.sent);
                }
                if p.reliable {
                    self.resolved.push((p.seq, false));
                }
                if let Some(old) = self.late.declare(PendingLoss {
                    seq: p.seq,
                    declared: now,
                    overtaken_by: largest - p.seq,
                    by_packets: lost_by_packets,
                    by_time: lost_by_time,
                    link_sample: p.link_sample,
                    data: p.probe_id.is_none(),
                    on_ack,
                    shallow,
                }) {
                    forced.add(&old);
                }
            } else {
                self.loss_deadline = Some(p.sent + threshold);
                break;
            }
        }
        self.bytes_in_flight -= lost_bytes;
        self.stats.lost += lost + lost_to_outage;
        if let Some(sent) = youngest_lost {
            let n = u32::try_from(lost).unwrap_or(u32::MAX);
            // (`n` counts lost probes sent while the path was usable too; only the undo
            // bookkeeping uses it.)
            let flight = self.bytes_in_flight + lost_bytes;
            self.cc.on_lost(now, n, sent, flight, coupling);
        }
        if lost > 0 {
            self.decay_loss(now);
        }
        for _ in 0..lost {
            self.loss_rate += (1.0 - self.loss_rate) * LOSS_RATE_GAIN;
        }
        self.on_confirmed_losses(now, forced);
        self.confirm_losses(now);
        lost + lost_to_outage
    }

    /// Confirms the declared losses no ACK named within one smoothed RTT and the peer's
    /// ACK delay (a late datagram's ACK comes by then): only now are they samples of the
    /// link's loss. Runs whenever losses are looked for (each ACK, the loss timer), so on a
    /// path that stops answering they stay pending, and are dropped if it goes down.
    fn confirm_losses(&mut self, now: Time) {
        if self.late.is_empty() {
            return;
        }
        let wait = self.rtt.srtt().unwrap_or_default() + self.max_ack_delay;
        let mut confirmed = LinkLossTally::default();
        self.late.confirm_due(now, wait, |p| confirmed.add(p));
        self.on_confirmed_losses(now, confirmed);
    }

    /// Losses no ACK proved spurious, confirmed together: samples of the link's own loss
    /// where the queue was short as they were declared. The controller weighs them as one
    /// batch (as it weighs one ACK's losses).
    fn on_confirmed_losses(&mut self, now: Time, t: LinkLossTally) {
        if t.evidence > 0 {
            self.cc.on_link_sample(now, t.evidence, t.evidence_link);
        }
        if t.samples > 0 {
            self.decay_loss(now);
            for _ in 0..t.samples {
                self.shallow_loss_rate += (1.0 - self.shallow_loss_rate) * LOSS_RATE_GAIN;
            }
        }
    }

    /// The path's measured queueing delay (smoothed minus base one-way delay) is under
    /// [`SHALLOW_QUEUE`], or unknown (no one-way delay sample yet: nothing shows a queue, so
    /// a loss then counts as the link's).
    fn queue_is_shallow(&self) -> bool {
        match (self.owd.smoothed_us(), self.owd.base_us()) {
            (Some(s), Some(b)) => s - (b as f64) < SHALLOW_QUEUE.as_secs_f64() * 1e6,
            _ => true,
        }
    }

    /// Lets both loss rates decay for the time since their last update ([`LOSS_HALF_LIFE`]).
    /// Called before every scheduling decision, so it only does the arithmetic once the
    /// decay is worth a percent (a 64th of the half-life), not once per packet.
    pub fn decay_loss(&mut self, now: Time) {
        let elapsed = now.saturating_since(self.loss_updated);
        if elapsed >= LOSS_HALF_LIFE / 64 {
            let halvings = elapsed.as_secs_f64() / LOSS_HALF_LIFE.as_secs_f64();
            let factor = 0.5f64.powf(halvings);
            self.loss_rate *= factor;
            self.shallow_loss_rate *= factor;
            self.loss_updated = now;
        }
    }

    /// Re-evaluates liveness (active/degraded/down) from silence and loss.
    fn rejudge(&mut self, now: Time) -> Option<(PathState, PathState)> {
        if !self.state.is_usable() {
            return None;
        }
        let silence = self
            .silence_since()
            .map_or(Duration::ZERO, |t| now.saturating_since(t));
        let rto = self.rtt.rto();
        let to = self.liveness.judge_usable(
            self.state,
            silence,
            self.loss_rate,
            rto,
            self.max_ack_delay,
        );
        if to == self.state {
            return None;
        }
        let from = self.state;
        self.state = to;
        if to == PathState::Down {
            self.go_down(now);
        }
        Some((from, to))
    }

    /// Whether the path is usable but has been silent beyond its degraded bound (one RTO
    /// and the peer's ACK delay): it may have failed, and is not yet declared down
    /// (docs/protocol.md#path-states, "suspect").
    pub fn is_silent(&self, now: Time) -> bool {
        self.liveness.fast_failover
            && self.state.is_usable()
            && self.silence_since().is_some_and(|t| {
                now.saturating_since(t)
                    > self
                        .liveness
                        .degraded_after(self.rtt.rto(), self.max_ack_delay)
            })
    }

    /// Where silence counts from: something has waited for an answer since
    /// `awaiting_since`, and nothing was answered since `last_answer`. A path whose queue
    /// is long but still drains keeps answering, so it is slow, not silent.
    fn silence_since(&self) -> Option<Time> {
        let waiting = self.awaiting_since?;
        Some(self.last_answer.map_or(waiting, |a| a.max(waiting)))
    }

    /// Gives up everything in flight and starts probing.
    fn go_down(&mut self, now: Time) {
        for p in self.log.iter_mut().filter(|p| p.is_outstanding()) {
            p.lost = true;
            p.in_flight = false;
            self.stats.lost_on_down += 1;
            if p.reliable {
                self.resolved.push((p.seq, false));
            }
            if let Some(g) = p.data
                && self.abandoned.len() < MAX_ABANDONED
            {
                self.abandoned.push(g);
            }
        }
        self.cc.on_path_down(now);
        self.late.clear();
        self.log.pop_resolved();
        self.bytes_in_flight = 0;
        self.awaiting_since = None;
        self.loss_deadline = None;
        self.last_ts = None;
        self.delivery.restart();
        self.probes_answered = 0;
        self.probes_unanswered = 0;
        self.next_probe_at = Some(now);
        self.stats.down_events += 1;
    }

    /// Timer work at `now`: time-threshold losses and liveness. Returns a state change.
    pub fn on_timeout(&mut self, now: Time, coupling: &Coupling<'_>) -> AckOutcome {
        let mut out = AckOutcome::default();
        if self.loss_deadline.is_some_and(|d| d <= now) {
            out.newly_lost = self.detect_losses(now, coupling, false);
            self.log.pop_resolved();
        }
        out.state_change = self.rejudge(now);
        self.timer = self.compute_timer();
        out
    }

    /// How many probes to send now (0, 1 for a keepalive, 2 for a pair while probing or
    /// down); the caller sends them and calls [`Path::on_probes_sent`].
    pub fn probes_due(&self, now: Time) -> u32 {
        match self.state {
            PathState::Probing | PathState::Down => {
                if self.next_probe_at.is_some_and(|t| t <= now) {
                    2
                } else {
                    0
                }
            }
            PathState::Active | PathState::Degraded => {
                let idle = now.saturating_since(self.last_eliciting_sent.unwrap_or(Time::ZERO));
                // A suspect path gets no new data (docs/protocol.md#path-states): a probe
                // each RTO asks whether it still answers, so one that only lost its tail
                // comes back at once instead of going down.
                let suspect = self.is_silent(now)
                    && idle
                        >= self
                            .liveness
                            .degraded_after(self.rtt.rto(), self.max_ack_delay);
                let handed_over = self.handover_probe.is_some_and(|every| idle >= every);
                u32::from(idle >= self.liveness.keepalive || suspect || handed_over)
            }
        }
    }

    /// Records that the due probes went out.
    pub fn on_probes_sent(&mut self, now: Time) {
        if matches!(self.state, PathState::Probing | PathState::Down) {
            self.probes_unanswered += 2;
            let backoff = self.liveness.probe_interval_after(self.probes_unanswered);
            // The first pairs go at the configured interval whatever the rate: most
            // outages are short, and a path back is found soonest that way.
            let interval = if self.probes_unanswered > PROBES_AT_FULL_RATE {
                backoff.max(self.probe_cost_floor())
            } else {
                backoff
            };
            self.next_probe_at = Some(now + interval);
            self.timer = self.compute_timer();
        }
    }

    /// The shortest interval between probe pairs that keeps them under [`PROBE_SHARE`] of
    /// the path's known rate (the pair rate, else the configured one): on a 50 kbit/s
    /// link a pair every 100 ms would take a sixth of it, and in the simulator's PET-BMP
    /// Table I the probes of a slow path that was down for a while raised EDPF's duplicate
    /// ACKs from 4 to 87 a run.
    fn probe_cost_floor(&self) -> Duration {
        let rate = self.pair.rate().or(self.hints.rate).filter(is_rate);
        rate.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(2.0 * PROBE_LINK_BYTES / (PROBE_SHARE * r))
        })
    }

    /// The next time [`Path::on_timeout`] or a probe has work, if any (cached).
    pub fn next_timeout(&self) -> Option<Time> {
        self.timer
    }

    fn compute_timer(&self) -> Option<Time> {
        let (liveness, max_ack_delay) = (&self.liveness, self.max_ack_delay);
        let mut next = self.loss_deadline;
        let mut consider = |t: Option<Time>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Time| n.min(t)));
            }
        };
        match self.state {
            PathState::Probing | PathState::Down => consider(self.next_probe_at),
            PathState::Active | PathState::Degraded => {
                let rto = self.rtt.rto();
                if let Some(since) = self.silence_since() {
                    let bound = if self.state == PathState::Active {
                        liveness.degraded_after(rto, max_ack_delay)
                    } else {
                        liveness.down_after(rto, max_ack_delay)
                    };
                    // Just past the bound, so the judgement sees silence > bound.
                    consider(Some(since + bound + Duration::from_nanos(1)));
                    if self.state == PathState::Degraded && liveness.fast_failover {
                        // A suspect path's probe (`probes_due`): due once the path is
                        // suspect, then once per degraded bound. The same threshold as
                        // `is_silent`, or the timer would fire with nothing to do.
                        let every = liveness.degraded_after(rto, max_ack_delay);
                        let suspect = since + every + Duration::from_nanos(1);
                        let last = self.last_eliciting_sent.unwrap_or(Time::ZERO);
                        consider(Some((last + every).max(suspect)));
                    }
                }
                let every = self
                    .handover_probe
                    .map_or(liveness.keepalive, |h| h.min(liveness.keepalive));
                consider(Some(self.last_eliciting_sent.unwrap_or(Time::ZERO) + every));
            }
        }
        next
    }

    /// Probes a handed-over path every `every` (`None`: handed back; keepalives only).
    pub fn set_handover_probe(&mut self, every: Option<Duration>) {
        if self.handover_probe != every {
            self.handover_probe = every;
            self.timer = self.compute_timer();
        }
    }

    /// What was configured about this path.
    pub fn hints(&self) -> PathHints {
        self.hints
    }

    /// The read-only snapshot schedulers see. `owd_floor_us` is the smallest base one-way
    /// delay over the session's paths (the reference the relative delays are taken from).
    /// With `trusted_delay_floor` (`Config::trust_hints`), rates and delays come from the
    /// hints alone (perfect knowledge when the hints are exact): the measured rates are
    /// hidden and delays are the hinted ones relative to the smallest hinted delay.
    pub fn view(
        &self,
        owd_floor_us: Option<i64>,
        trusted_delay_floor: Option<Duration>,
    ) -> PathView {
        let rel = |us: f64| owd_floor_us.map(|f| micros_to_duration(us - f as f64));
        if let Some(floor) = trusted_delay_floor {
            let delay = self.hints.one_way_delay.map(|d| d.saturating_sub(floor));
            return PathView {
                base_owd: delay,
                owd: delay,
                pair_rate: None,
                train_rate: None,
                delivery_rate: None,
                ..self.view(owd_floor_us, None)
            };
        }
        PathView {
            id: self.id,
            state: self.state,
            srtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            min_rtt: self.rtt.min_rtt(),
            base_owd: self.owd.base_us().and_then(|b| rel(b as f64)),
            owd: self.owd.smoothed_us().and_then(rel),
            pair_rate: self.pair.rate(),
            train_rate: self.train.rate(),
            delivery_rate: self.delivery.rate(),
            configured_rate: self.hints.rate,
            bytes_in_flight: self.bytes_in_flight,
            cwnd_room: None,
            loss_rate: self.loss_rate,
            shallow_loss_rate: self.shallow_loss_rate,
            backup: self.hints.backup,
            priority: self.hints.priority,
            overflow: self.hints.overflow,
            overflow_only: false,
            standby: false,
        }
    }

    /// Makes the path a backup path or a primary one (`PathHints::backup`).
    pub fn set_backup(&mut self, backup: bool) {
        self.hints.backup = backup;
    }

    /// Makes the path an overflow path or not (`PathHints::overflow`).
    pub fn set_overflow(&mut self, overflow: bool) {
        self.hints.overflow = overflow;
    }

    /// Sets the path's priority within its class (`PathHints::priority`, at most
    /// [`crate::path::MAX_PRIORITY`]: larger values are clamped).
    pub fn set_priority(&mut self, priority: u8) {
        self.hints.priority = priority.min(MAX_PRIORITY);
    }
}

/// What holds a datagram on a path ([`Path::send_hold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendHold {
    /// It may go now; this much room is left in the window.
    Open {
        /// Window minus bytes in flight.
        room: u64,
    },
    /// The window has room; the pacer lets it go at this time.
    Pacer(Time),
    /// The window is full: an ACK must open it.
    Window,
}

/// Confirmed losses counted for [`Path::on_confirmed_losses`].
#[derive(Clone, Copy, Debug, Default)]
struct LinkLossTally {
    /// Data datagrams declared on an ACK's arrival while the queue was short: the
    /// controller's evidence.
    evidence: u32,
    /// Of those, the link's own losses (`SentPacket::link_sample`; every data datagram
    /// samples the link, so today all of them).
    evidence_link: u32,
    /// All the link's own losses, probes included: samples of `shallow_loss_rate`.
    samples: u32,
}

impl LinkLossTally {
    fn add(&mut self, p: &PendingLoss) {
        let link = p.shallow && p.link_sample;
        // Only a datagram resolved while the queue was short is evidence either way: where
        // the queue is long a loss may be its overflow, and counting the deliveries there
        // as clean while the losses beside them could not count as the link's read a lossy
        // link as clean (each time a BBR start-up filled a deep buffer, a 10 %-loss path
        // went back to NewReno about 1.5 s later).
        if p.on_ack && p.data && p.shallow {
            self.evidence += 1;
            self.evidence_link += u32::from(link);
        }
        self.samples += u32::from(link);
    }
}
