//! BBR-like delay-based control after BBR v1 (Cardwell, Cheng, Gunn, Hassas Yeganeh,
//! Jacobson, "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016; the IETF
//! description draft-cardwell-iccrg-bbr-congestion-control-00, cited "draft §x"; Linux
//! `net/ipv4/tcp_bbr.c` where the draft leaves a detail open). Instead of reading loss as
//! congestion, the controller models the path: the bottleneck bandwidth `BtlBw` (a windowed
//! maximum of delivery-rate samples) and the round-trip propagation time `RTprop` (the
//! path's minimum RTT). It paces at `pacing_gain × BtlBw` and bounds the data in flight by
//! `cwnd_gain × BDP` with `BDP = BtlBw × RTprop`. A random loss on a lossy radio link does
//! not change the model, so it does not cut the rate; and the standing queue stays near
//! one BDP (cwnd_gain 2) instead of filling the bottleneck's drop-tail buffer.
//!
//! States (draft §4.3): **Startup** paces at 2/ln 2 ≈ 2.885 × BtlBw (the smallest gain
//! that doubles the delivery rate each round, draft §4.3.2.1) until the estimate grew less
//! than 25 % in three rounds (the pipe is full, draft §4.3.2.2) or a standing queue shows
//! it full (below, **Startup's end**); **Drain** paces at
//! ln 2 / 2 (the inverse) until the bytes in flight fall to one BDP (draft §4.3.3);
//! **ProbeBW** cycles the pacing gain through 1.25, 0.75 and six phases of 1, each one
//! `RTprop` long (draft §4.3.4): the 1.25 phase probes for more bandwidth, the 0.75 phase
//! drains the queue the probe made.
//!
//! Where and why this differs from BBR v1:
//! - **Delivery-rate samples.** BBR stamps every packet with the connection's delivered
//!   count and time and takes `delivered / max(send interval, ack interval)` per ACK
//!   (draft §4.1.1.3, draft-cheng-iccrg-delivery-rate-estimation). The trait passes no
//!   per-packet state, only the bytes each ACK frame acknowledged, so the controller counts
//!   acknowledged bytes itself and keeps snapshots of that count at past ACKs (at most
//!   [`SNAPSHOTS`], one per span/16 at most). Each ACK samples `bytes / max(ack interval,
//!   send interval)` since the newest snapshot at least one span old, the span being
//!   `max(RTprop, 1 ms)` plus one ACK interval (below): a window sliding with the ACKs, so one of them lines up with the 1.25 phase's datagrams
//!   (disjoint intervals straddle it and read about 1.0, so the probe finds no capacity
//!   that came back). The send interval is between the send times of the newest datagrams
//!   acknowledged by then (a running maximum of [`Acked::newest_sent`]). The ACK interval alone
//!   overestimates under ACK compression: a receiver or radio that stalls, then sends its
//!   ACKs in a burst, makes the bytes of the stall arrive in one window, and the max filter
//!   would keep that rate for ten rounds with a window as many times too large; the send
//!   interval bounds the sample by the rate the data left at. A window spans at least one
//!   RTprop plus one ACK interval at the current estimate ([`AckHold::interval_at`]:
//!   16 datagrams at BtlBw, at most the allowance's 25 ms, less where the datagrams ask
//!   for prompt ACKs, docs/protocol.md#ack-soon; the whole 25 ms before a sample): where
//!   16 datagrams take longer than RTprop (8 Mbit/s at 20 ms: an ACK every 24 ms) a
//!   window of one RTprop held a single ACK interval, its samples carried that interval's
//!   jitter and the max filter kept their high end
//!   (docs/protocol.md#delivery-rate); on fast paths the interval is short (1.9 ms at
//!   100 Mbit/s), so ProbeBW's one-RTprop probe is still seen nearly whole. In Startup a
//!   sample averages a rate that is still doubling over the whole span: the estimate lags,
//!   the more so the shorter RTprop is against the ACK interval.
//! - **Startup's end.** Besides the growth test (three rounds without 25 % growth), Startup
//!   ends as soon as an ACK shows a queue while at least [`OWN_QUEUE_FLIGHT`] (2) BDPs are
//!   in flight, as a delay rise ends slow start in HyStart++ (RFC 9406). Why: the growth
//!   test skips application-limited rounds, and in packet mode a path is often fed less
//!   than its window (the scheduler spreads one inner flow over the paths), so Startup went
//!   on for seconds while its 2/ln 2 window grew to 2.9 BDPs: on T1's 100 ms path, whose
//!   drop-tail queue holds one BDP, that overflowed the link 2.7 s into the transfer (1-16
//!   datagrams lost in a burst in 10 of 11 runs, which the end hosts' TCP then read as
//!   congestion; 3 runs in 28 since, as Startup's pacing fills the queue within a round;
//!   docs/protocol.md#startup-queue).
//!   - *A queue*: every datagram the ACK acknowledges met at least
//!     [`super::SHALLOW_QUEUE`] (10 ms) over the path's base one-way delay
//!     ([`Acked::queue_delay_seen`], the shortest of the ACK's raw samples, so jitter of a
//!     few datagrams does not count). Not the smoothed delay ([`Acked::standing_queue`]):
//!     after an outage BBR restarts from the minimum window with a tiny first BDP, and an
//!     average still holding the queue from before the outage would end the new Startup
//!     at once.
//!   - *Two BDPs*: one estimated BDP beyond the estimated pipe, of which the peer's ACK
//!     hold (up to 16 datagrams, 1.25 BDPs on a 20 ms path) may be part, so on short paths
//!     less of the queue is surely the sender's. In Startup the estimate lags the rate (it
//!     doubles each round) and a window of 2.9 times the lagging BDP is normal: with the
//!     bound at one BDP a 4 Mbit/s path left Startup at 2.8 Mbit/s on the 10 ms queue its
//!     own doubling made in one round (the FEC test `with_packet_pacing_repair_symbols_...`
//!     then lost 40 packets with FEC, 3 before; now 6).
//!
//!   A queue of other flows met with that much in flight still ends Startup early:
//!   ProbeBW's 1.25 phases then find the rest of the rate, a quarter more per eight rounds
//!   at most.
//! - **A fallen rate, for the queue cap only.** [`Bbr::on_queue_over_cap`] moves the rate
//!   [`Bbr::queue_cap`] builds on to the latest sample when a queue longer than the cap can
//!   make shows the link slowed, until the samples reach BtlBw again. BBR v1 has no such
//!   rule, and BBR sending does not call it: its window and pacing keep BtlBw.
//! - **Application-limited samples.** BBR marks a sample app-limited when its packet was
//!   sent in an app-limited period; here a sample is app-limited if any ACK in its window was
//!   ([`Acked::app_limited`]: the path's "less than half the window was in flight" mark).
//!   As in BBR (Linux `bbr_update_bw`), an app-limited sample enters the filter only if it
//!   is at least the current estimate, so it can raise it but never lower it.
//! - **ACKs during recovery.** The wrapper withholds ACKs of datagrams sent before a
//!   recovery period began from the window-growing controllers; BBR takes them
//!   ([`CongestionController::acks_in_recovery`]), since BBR v1 counts every delivered
//!   packet in its rate samples whatever the recovery state, and at 1 % random loss a
//!   recovery period begins about every round: withholding them would hide much of the
//!   deliveries and make the estimate fall as the loss rate rises.
//! - **Rounds.** BBR ends a round when a packet sent after the round began is acknowledged
//!   (draft §4.1.1.2). Without per-packet state, a round here ends when the bytes
//!   acknowledged since it began reach the bytes in flight when it began
//!   ([`Acked::bytes_in_flight`]): all data outstanding then has been delivered, so what is
//!   acknowledged next was sent after. Lost bytes are never acknowledged, so a round with
//!   losses ends a few datagrams late.
//! - **ProbeRTT omitted.** BBR v1 drains the pipe to 4 packets for 200 ms when `RTprop` was
//!   not refreshed for 10 s (draft §4.3.5), because its own min-RTT filter expires and needs
//!   a queue-free sample. Here `RTprop` is [`Acked::min_rtt`], the path's own RTT
//!   estimator's minimum over a 5-minute window (`path::rtt::MIN_RTT_WINDOW`) that the
//!   controller cannot expire or refresh, so a ProbeRTT would cost throughput every 10 s
//!   for nothing. Consequence: a route change that raises the propagation delay is followed
//!   only when that window lets the old minimum go (up to 5 minutes), meanwhile BDP is
//!   underestimated and the window (2 × the old BDP) limits throughput; and several BBR
//!   flows sharing a bottleneck are not synchronized into a common queue-free dip.
//! - **Window.** BBR v1 grows cwnd by the bytes acknowledged toward its target
//!   (Linux `bbr_set_cwnd`). Here, before any bandwidth sample, the window is the initial
//!   window (10 datagrams, RFC 9002 §7.2) and there is no pacing rate (the wrapper paces at
//!   1.25 × window / SRTT); in Startup it grows by the bytes acknowledged up to the target
//!   and never shrinks (as Linux before the pipe is full: early samples undershoot); in
//!   Drain and ProbeBW it is the target itself. The target is `cwnd_gain × BDP` plus an
//!   ACK-aggregation allowance, cwnd_gain 2/ln 2 in Startup and Drain and 2 in ProbeBW
//!   (draft §4.3.2.1, §4.3.3, §4.3.4.2), and at least `ack_every` + 1 datagrams where the
//!   draft's floor is 4 (§4.2.3.1 `BBRMinPipeCwnd`): the peer acknowledges at once only
//!   after `ack_every` datagrams, so a smaller window waits out its ACK delay on every
//!   round, the delivery rate measured is then the ACK timer's, and a target built on that
//!   rate never grows past it (on the test bed a 40 Mbit/s path with a 0.5 ms RTT was held
//!   at 4 datagrams, about 2 Mbit/s). The larger floor costs little queue on a slow
//!   path: the pacing rate, not the window, bounds what is sent (outside Startup's 2.9×
//!   pacing).
//! - **Loss.** BBR v1 does not reduce its model on loss; during the first round of a
//!   recovery it applies packet conservation (cwnd = in flight + acknowledged, draft
//!   §4.2.3.4) and restores the prior cwnd when recovery ends. Omitted: the trait tells the
//!   controller neither the bytes in flight at the loss (only those of the last ACK, which
//!   still count the lost datagrams) nor when the recovery ends; and on the lossy links
//!   plait targets a recovery period starts about every round (1 % loss is one loss per
//!   100 datagrams; a BDP at 20 Mbit/s and 50 ms is 104 datagrams of 1200 B), so conservation would pin the
//!   window to the flight nearly all the time and stop the 1.25 probe. A congestion event
//!   does nothing; a spurious one has nothing to undo.
//! - **Persistent congestion** (the path went down; BBR v1 has no such signal, Linux keeps
//!   its model across an RTO): back to Startup with the minimum window and the bandwidth
//!   filter cleared, since the path that comes back may not be the one that left.
//! - **ProbeBW phases.** BBR randomizes the first phase after Drain (draft §4.3.4.3) to
//!   desynchronize flows; with no RNG here (same inputs, same windows) it starts at the
//!   1.25 phase. A phase lasts one `RTprop` (the paper's rule); the draft's refinements (the
//!   1.25 phase lasts until the flight reached 1.25 BDP or a loss, the 0.75 phase ends
//!   early once the flight is down to one BDP, draft §4.3.4.4) are not implemented.
//! - **Pacing.** `pacing_gain × BtlBw`, without Linux's 1 % margin and without its rule
//!   that Startup's rate never falls (the max filter already rarely falls); the wrapper's
//!   pacer turns it into release times.
//!
//! Invariants: the window is within [`min_window`]`(mss)..=`[`MAX_WINDOW`] after every
//! method (every write goes through [`clamp_window`]); the bandwidth estimate and the
//! pacing rate are finite and non-negative, and the pacing rate is `None` unless the
//! estimate is positive; [`Bbr::cap_rate`] is finite, non-negative and at most the
//! estimate; an elapsed time divided by is at least 1 ms; at most [`SNAPSHOTS`] snapshots
//! are kept; time comes only from `now` (elapsed times saturate at zero when it goes
//! backwards).

use std::collections::VecDeque;
use std::time::Duration;

use super::aimd::{clamp_window, sane_mss};
use super::{AckHold, Acked, CongestionController, Coupling, INITIAL_WINDOW_DATAGRAMS, min_window};
use crate::time::Time;

/// Startup's pacing and cwnd gain, 2/ln 2 (draft §4.3.2.1 `BBRHighGain`).
pub const HIGH_GAIN: f64 = 2.0 / std::f64::consts::LN_2;
/// Drain's pacing gain, ln 2 / 2 (draft §4.3.3).
pub const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// ProbeBW's cwnd gain (draft §4.3.4.2).
pub const CWND_GAIN: f64 = 2.0;
/// Startup ends on a queue once this many BDPs are in flight: one estimated BDP beyond the
/// estimated pipe (module docs, **Startup's end**).
pub const OWN_QUEUE_FLIGHT: f64 = 2.0;
/// Window room for ACK aggregation: the peer holds an ACK up to its `max_ack_delay`
/// (25 ms by default, docs/protocol.md#ack-policy) and RTT samples leave that delay out, so
/// on a path whose RTT is shorter than it, `2 × BDP` cannot cover the bytes sent while an
/// ACK waits: the window then limits the delivery rate, which lowers the next window (seen
/// in the simulator: a 16 Mbit/s, 10 ms path stuck near 0.5 Mbit/s). BBR v2 measures this
/// as `extra_acked`; a fixed allowance of the ACK delay is the simple form.
pub const ACK_AGGREGATION: Duration = Duration::from_millis(25);
/// The peer acknowledges after at most this many ack-eliciting datagrams, whatever its
/// delay (`ack_every`, 16 by default, docs/protocol.md#ack-policy): on a path fast enough to
/// carry them in less than [`ACK_AGGREGATION`], the allowance is these datagrams, not the
/// delay. More is standing queue at the bottleneck (on T1's 20 Mbit/s, 20 ms path the 25 ms
/// allowance is 62 KB, 16 datagrams 23 KB).
pub const ACK_EVERY_DATAGRAMS: u64 = 16;
/// ProbeBW's pacing gains, one phase each (draft §4.3.4.2).
pub const PROBE_BW_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Rounds the bandwidth filter remembers (draft §4.1.1.4 `BtlBwFilterLen`; Linux
/// `bbr_bw_rtts` = cycle length + 2).
pub const BW_FILTER_ROUNDS: u64 = 10;
/// Startup exits after this many rounds without this much growth (draft §4.3.2.2).
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u32 = 3;
/// Smallest window from the model, datagrams: what makes the peer acknowledge at once
/// (module docs, **Window**; the draft's `BBRMinPipeCwnd` §4.2.3.1 is 4).
const MIN_PIPE_DATAGRAMS: u64 = ACK_EVERY_DATAGRAMS + 1;
/// Shortest delivery-rate interval (so a zero min RTT cannot make one empty).
const MIN_INTERVAL: Duration = Duration::from_millis(1);
/// Most snapshots of the delivery count kept: taken at most one per span/16 (span: RTprop
/// plus the ACK delay, module docs), so those of the last span and the one before fit.
pub const SNAPSHOTS: usize = 32;

/// Which state the controller is in (draft §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrMode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Draining the queue Startup built.
    Drain,
    /// Steady state, cycling the pacing gain; `phase` indexes [`PROBE_BW_GAINS`].
    ProbeBw {
        /// The current phase.
        phase: usize,
    },
}

/// A windowed maximum over [`BW_FILTER_ROUNDS`] rounds: the largest sample of each of the
/// last rounds (slot `round % BW_FILTER_ROUNDS`), the estimate the largest of them. Aged
/// only when a sample is inserted (as Linux `minmax_running_max`), so a spell without
/// usable samples keeps it.
#[derive(Clone, Copy, Debug, Default)]
struct MaxFilter {
    slots: [f64; BW_FILTER_ROUNDS as usize],
    /// Round of the last insertion; the slots of later rounds are stale.
    last_round: u64,
    best: f64,
}

impl MaxFilter {
    fn get(&self) -> f64 {
        self.best
    }

    /// The largest sample of rounds `round - 1` and `round` (`round`: the current one),
    /// `None` if neither had one: the rate now, where [`MaxFilter::get`] may still hold
    /// one of ten rounds ago. Two rounds, not one, so that the first sample after a
    /// recovery period (whose ACKs a NewReno the model follows withholds, so it spans a
    /// round with few deliveries counted) does not stand alone.
    fn recent(&self, round: u64) -> Option<f64> {
        let previous = round.saturating_sub(1);
        if self.last_round < previous || self.last_round > round {
            return None;
        }
        let rounds = previous..=self.last_round;
        let best = rounds
            .map(|r| self.slots[(r % BW_FILTER_ROUNDS) as usize])
            .fold(0.0, f64::max);
        (best > 0.0).then_some(best)
    }

    fn insert(&mut self, round: u64, bw: f64) {
        if !bw.is_finite() || bw < 0.0 {
            return;
        }
        // Rounds since the last insertion had no sample: their slots start empty.
        let fresh = round.saturating_sub(self.last_round).min(BW_FILTER_ROUNDS);
        for k in 0..fresh {
            self.slots[(round.wrapping_sub(k) % BW_FILTER_ROUNDS) as usize] = 0.0;
        }
        self.last_round = self.last_round.max(round);
        let slot = &mut self.slots[(self.last_round % BW_FILTER_ROUNDS) as usize];
        *slot = slot.max(bw);
        self.best = self.slots.iter().copied().fold(0.0, f64::max);
    }
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct Bbr {
    /// The peer's ACK hold this controller allows for (`ack_every` datagrams of `mss`, at
    /// most the aggregation allowance's delay; prompter once the datagrams sent ask for it,
    /// [`CongestionController::set_prompt_acks`]).
    ack_hold: AckHold,
    mss: u64,
    mode: BbrMode,
    window: f64,
    bw: MaxFilter,
    /// The latest delivery-rate sample the filter took, bytes/s (0 before one).
    latest_sample: f64,
    /// The rate the path fell to, bytes/s: set by [`Bbr::on_queue_over_cap`] below BtlBw,
    /// raised by every later sample (application-limited ones too: each is a rate the
    /// path carried), cleared once it reaches BtlBw. The queue cap builds on the lesser of
    /// it and BtlBw ([`Bbr::cap_rate`]).
    fallen_rate: Option<f64>,
    /// RTprop: the last [`Acked::min_rtt`].
    min_rtt: Duration,
    /// Bytes acknowledged so far (saturating).
    delivered: u64,
    /// Rounds so far.
    round: u64,
    /// `delivered` at which the current round ends; `None`: the next ACK ends it.
    round_end: Option<u64>,
    /// Snapshots at past ACKs, oldest first (see [`Snapshot`]; at most [`SNAPSHOTS`]).
    snapshots: VecDeque<Snapshot>,
    /// ACKs so far that were app-limited (wrapping: only compared for equality).
    app_limited_acks: u64,
    /// The latest send time of a datagram acknowledged so far (an ACK that only fills an
    /// old hole names an older one).
    newest_sent: Option<Time>,
    /// Startup's plateau detector (draft §4.3.2.2 `BBR.full_bw`, `full_bw_count`).
    full_bw: f64,
    full_bw_count: u32,
    /// Start of the current ProbeBW phase.
    phase_start: Time,
}

/// The delivery count at one ACK: when it came, the bytes delivered then, the send time of
/// the newest datagram it acknowledged, and the app-limited ACKs until then (itself
/// included).
#[derive(Clone, Copy, Debug)]
struct Snapshot {
    acked_at: Time,
    delivered: u64,
    newest_sent: Option<Time>,
    app_limited_acks: u64,
}

impl Bbr {
    /// A controller in Startup with the initial window and no pacing rate, for datagrams of
    /// `mss` bytes.
    pub fn new(mss: u64) -> Bbr {
        Bbr::with_ack_aggregation(mss, ACK_AGGREGATION)
    }

    /// A controller whose window leaves `allowance` of ACK aggregation at the bottleneck
    /// rate (see [`ACK_AGGREGATION`]; zero gives BBR v1's plain `cwnd_gain × BDP`).
    pub fn with_ack_aggregation(mss: u64, allowance: Duration) -> Bbr {
        let mss = sane_mss(mss);
        Bbr {
            ack_hold: AckHold::counting(ACK_EVERY_DATAGRAMS, mss, allowance),
            mss,
            mode: BbrMode::Startup,
            window: clamp_window((INITIAL_WINDOW_DATAGRAMS * mss) as f64, mss),
            bw: MaxFilter::default(),
            latest_sample: 0.0,
            fallen_rate: None,
            min_rtt: Duration::ZERO,
            delivered: 0,
            round: 0,
            round_end: None,
            snapshots: VecDeque::with_capacity(SNAPSHOTS),
            app_limited_acks: 0,
            newest_sent: None,
            full_bw: 0.0,
            full_bw_count: 0,
            phase_start: Time::ZERO,
        }
    }

    /// The state.
    pub fn mode(&self) -> BbrMode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes per second (0 before any sample).
    pub fn bandwidth(&self) -> f64 {
        self.bw.get()
    }

    /// Rounds counted so far.
    pub fn rounds(&self) -> u64 {
        self.round
    }

    /// The pacing gain of the current state (phase).
    pub fn pacing_gain(&self) -> f64 {
        match self.mode {
            BbrMode::Startup => HIGH_GAIN,
            BbrMode::Drain => DRAIN_GAIN,
            BbrMode::ProbeBw { phase } => PROBE_BW_GAINS[phase % PROBE_BW_GAINS.len()],
        }
    }

    fn cwnd_gain(&self) -> f64 {
        match self.mode {
            BbrMode::Startup | BbrMode::Drain => HIGH_GAIN,
            BbrMode::ProbeBw { .. } => CWND_GAIN,
        }
    }

    /// `BtlBw × RTprop`, bytes.
    pub fn bdp(&self) -> f64 {
        self.bw.get() * self.min_rtt.as_secs_f64()
    }

    /// Counts the ACK's bytes; `true` if it ended a round (draft §4.1.1.2, approximated as
    /// the module docs say).
    fn update_round(&mut self, acked: &Acked) -> bool {
        self.delivered = self.delivered.saturating_add(acked.bytes);
        if self.round_end.is_some_and(|end| self.delivered < end) {
            return false;
        }
        self.round = self.round.saturating_add(1);
        self.round_end = Some(self.delivered.saturating_add(acked.bytes_in_flight));
        true
    }

    /// Samples the delivery rate since the newest snapshot at least one span (RTprop plus
    /// the ACK delay) old, if any, and feeds it to the filter (an app-limited one only if it
    /// does not lower it); then takes a snapshot of this ACK if the last is at least
    /// span/16 old.
    fn update_bw(&mut self, now: Time, acked: &Acked) {
        if acked.app_limited {
            self.app_limited_acks = self.app_limited_acks.wrapping_add(1);
        }
        self.newest_sent = self.newest_sent.max(acked.newest_sent);
        // Module docs, **Delivery-rate samples**: one ACK interval besides RTprop.
        let span = self
            .min_rtt
            .max(MIN_INTERVAL)
            .saturating_add(self.ack_hold.interval_at(self.bw.get()));
        let reference = self
            .snapshots
            .iter()
            .rev()
            .find(|s| now.saturating_since(s.acked_at) >= span)
            .copied();
        if let Some(from) = reference {
            // Delivered over the longer of the ACK and the send interval: ACKs bunched by a
            // stall cannot make the rate exceed the one the data was sent at (module docs).
            let send_elapsed = match (from.newest_sent, self.newest_sent) {
                (Some(first), Some(last)) => last.saturating_since(first),
                _ => Duration::ZERO,
            };
            let elapsed = now.saturating_since(from.acked_at).max(send_elapsed);
            let bytes = self.delivered.saturating_sub(from.delivered);
            let sample = bytes as f64 / elapsed.as_secs_f64();
            let app_limited = self.app_limited_acks != from.app_limited_acks;
            if !app_limited || sample >= self.bw.get() {
                self.bw.insert(self.round, sample);
                if super::is_rate(&sample) {
                    self.latest_sample = sample;
                }
            }
            // Any sample, an application-limited one too, is a rate the path carried.
            self.raise_fallen_rate(sample);
        }
        let due = self
            .snapshots
            .back()
            .is_none_or(|last| now.saturating_since(last.acked_at) >= span / 16);
        if due {
            if self.snapshots.len() >= SNAPSHOTS {
                self.snapshots.pop_front();
            }
            self.snapshots.push_back(Snapshot {
                acked_at: now,
                delivered: self.delivered,
                newest_sent: self.newest_sent,
                app_limited_acks: self.app_limited_acks,
            });
        }
    }

    /// Raises the fallen rate to `sample` if higher, and ends it once it reaches BtlBw
    /// (see `fallen_rate`).
    fn raise_fallen_rate(&mut self, sample: f64) {
        if !super::is_rate(&sample) {
            return;
        }
        let best = self.bw.get();
        self.fallen_rate = self
            .fallen_rate
            .map(|fallen| fallen.max(sample))
            .filter(|&fallen| fallen < best);
    }

    /// Startup's exit test, once per round on a non-app-limited ACK (draft §4.3.2.2).
    fn check_full_pipe(&mut self, round_start: bool, app_limited: bool) {
        let bw = self.bw.get();
        if self.mode != BbrMode::Startup || !round_start || app_limited || bw <= 0.0 {
            return;
        }
        if bw >= self.full_bw * FULL_BW_GROWTH {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        if self.full_bw_count >= FULL_BW_ROUNDS {
            self.mode = BbrMode::Drain;
        }
    }

    /// ProbeBW's next phase once the current one lasted more than one RTprop (the paper's
    /// rule; draft §4.3.4.4 uses `>` too).
    fn advance_phase(&mut self, now: Time) {
        if let BbrMode::ProbeBw { phase } = self.mode
            && now.saturating_since(self.phase_start) > self.min_rtt
        {
            self.mode = BbrMode::ProbeBw {
                phase: (phase + 1) % PROBE_BW_GAINS.len(),
            };
            self.phase_start = now;
        }
    }

    /// `gain × BDP` plus the ACK-aggregation allowance, at least [`MIN_PIPE_DATAGRAMS`],
    /// within the window bounds (call only with a bandwidth estimate).
    fn target(&self, gain: f64) -> f64 {
        self.target_at(gain, self.bw.get())
    }

    /// [`Bbr::target`] at `rate` (bytes/s) instead of BtlBw.
    fn target_at(&self, gain: f64, rate: f64) -> f64 {
        let floor = (MIN_PIPE_DATAGRAMS * self.mss) as f64;
        let bdp = rate * self.min_rtt.as_secs_f64();
        clamp_window(
            (gain * bdp + self.ack_hold.bytes_at(rate)).max(floor),
            self.mss,
        )
    }

    /// The ACK-aggregation allowance: what the peer may hold at BtlBw
    /// ([`AckHold::bytes_at`]: `min(BtlBw × ack delay, ack_every datagrams)`, less if
    /// asked for prompt ACKs).
    fn aggregation(&self) -> f64 {
        self.ack_hold.bytes_at(self.bw.get())
    }

    /// The rate a drain check builds on, bytes/s: the best of the last two rounds where
    /// that is under the filter's best of ten (just after the link slowed, the best is the
    /// old rate, and a window built on it would not drain the queue); with no sample in
    /// the last two rounds (an application-limited spell), the filter's best. 0 before a
    /// sample.
    pub fn drain_rate(&self) -> f64 {
        let best = self.bw.get();
        self.bw
            .recent(self.round)
            .map_or(best, |recent| recent.min(best))
    }

    /// `gain` BDPs at [`Bbr::drain_rate`] plus half the ACK-aggregation allowance (within
    /// the window bounds, not held at `ack_every` + 1 datagrams): the peer holds between
    /// none and all of the allowance for its next ACK, half on average, and those bytes
    /// are not in the queue, so with a `gain` under 1 the path's own queue empties.
    /// [`super::Adaptive`]'s drain check holds NewReno at it. `None` before a bandwidth
    /// sample.
    pub fn drained_window(&self, gain: f64) -> Option<u64> {
        (self.bw.get() > 0.0).then(|| {
            let bdp = self.drain_rate() * self.min_rtt.as_secs_f64();
            clamp_window(gain * bdp + self.aggregation() / 2.0, self.mss) as u64
        })
    }

    /// The most a sender fed by this model's ACKs should keep in flight so that the path's
    /// standing queue stays near `(gain - 1)` BDPs plus the ACK-aggregation allowance: the
    /// window target with Startup's gain while the model is still finding the bandwidth (so
    /// a doubling window is not held back by an estimate that lags it by half a round),
    /// `gain` after; like the window, never under `ack_every` + 1 datagrams (module docs,
    /// **Window**); `None` before a bandwidth sample. The rate is [`Bbr::cap_rate`]: BtlBw
    /// unless the rate fell ([`Bbr::on_queue_over_cap`]). The [`super::Adaptive`]
    /// controller caps NewReno by it.
    pub fn queue_cap(&self, gain: f64) -> Option<u64> {
        if self.bw.get() <= 0.0 {
            return None;
        }
        let gain = match self.mode {
            BbrMode::Startup => HIGH_GAIN,
            BbrMode::Drain | BbrMode::ProbeBw { .. } => gain,
        };
        Some(self.target_at(gain, self.cap_rate()) as u64)
    }

    /// The rate [`Bbr::queue_cap`] builds on, bytes/s: the rate the path fell to while
    /// [`Bbr::on_queue_over_cap`] has one, else BtlBw (0 before a sample).
    pub fn cap_rate(&self) -> f64 {
        let best = self.bw.get();
        self.fallen_rate.map_or(best, |fallen| fallen.min(best))
    }

    /// The path's rate fell: a datagram met `queue` (an ACK's shortest sample,
    /// [`Acked::queue_delay_seen`]) longer than a sender held at [`Bbr::queue_cap`]`(gain)`
    /// can make at [`Bbr::cap_rate`] (the cap's bytes beyond the pipe, in time at that
    /// rate), by more than [`super::SHALLOW_QUEUE`]; then the cap builds on the latest
    /// sample, if lower, until the samples reach BtlBw again (outside Startup, whose
    /// estimate only lags). BtlBw itself, and so the window, the drain rate and the floor
    /// a cut keeps, forget a higher rate only after `BW_FILTER_ROUNDS` (10) rounds, which
    /// lengthen as the queue grows: about 1.5 s on the test bed's T5, whose 20 ms path falls
    /// from 20 to 5 Mbit/s with 1.5 BDPs in flight, 155 ms of queue at the new rate. A
    /// queue means the link is busy, so a sample taken behind it is the link's rate, or
    /// this sender's share where other flows keep the queue ([`super::Adaptive`]'s drain
    /// check lifts the cap there). BBR v1 has no such rule; [`super::Adaptive`]'s queue-cap
    /// model calls it (docs/protocol.md#rate-drop).
    pub fn on_queue_over_cap(&mut self, queue: Duration, gain: f64) {
        let rate = self.cap_rate();
        let latest = self.latest_sample;
        if self.mode == BbrMode::Startup
            || !super::is_rate(&rate)
            || !super::is_rate(&latest)
            || latest >= rate
        {
            return;
        }
        let Some(cap) = self.queue_cap(gain) else {
            return;
        };
        let beyond_pipe = (cap as f64 / rate - self.min_rtt.as_secs_f64()).max(0.0);
        let allowed = Duration::try_from_secs_f64(beyond_pipe).unwrap_or(Duration::MAX);
        if queue > allowed.saturating_add(super::SHALLOW_QUEUE) {
            self.fallen_rate = Some(latest);
        }
    }

    /// The path shows a queue: a Startup with a bandwidth sample ends (to Drain), as the
    /// pipe is full. BBR sending calls it itself when an ACK's datagrams all met a queue
    /// and at least [`OWN_QUEUE_FLIGHT`] BDPs are in flight (module docs, **Startup's
    /// end**); [`super::Adaptive`]'s queue-cap model calls it on any standing queue
    /// (`Acked::standing_queue`, the smoothed delay), whatever is in flight: the
    /// model only bounds NewReno's window, and Startup's gain of 2/ln 2 lets that bound
    /// reach 2.9 BDPs before three rounds without growth end it, a queue of nearly two BDPs
    /// (a probe at 50-70 ms, idle 20, on the test bed's 20 ms paths in their first half
    /// second), while a model that left Startup early lowers only the bound, not the rate
    /// NewReno finds beneath it.
    pub fn on_standing_queue(&mut self) {
        if self.mode == BbrMode::Startup && self.bw.get() > 0.0 {
            self.mode = BbrMode::Drain;
        }
    }

    fn set_window(&mut self, acked: &Acked) {
        if self.bw.get() <= 0.0 {
            return;
        }
        let target = self.target(self.cwnd_gain());
        self.window = match self.mode {
            BbrMode::Startup if self.window < target => {
                clamp_window((self.window + acked.bytes as f64).min(target), self.mss)
            }
            BbrMode::Startup => self.window,
            BbrMode::Drain | BbrMode::ProbeBw { .. } => target,
        };
    }
}

impl CongestionController for Bbr {
    fn on_ack(&mut self, now: Time, acked: &Acked, _coupling: &Coupling<'_>) {
        self.min_rtt = acked.min_rtt;
        let round_start = self.update_round(acked);
        self.update_bw(now, acked);
        self.advance_phase(now);
        self.check_full_pipe(round_start, acked.app_limited);
        if self.mode == BbrMode::Drain && (acked.bytes_in_flight as f64) <= self.bdp() {
            // Draft §4.3.3 (first phase: see the module docs).
            self.mode = BbrMode::ProbeBw { phase: 0 };
            self.phase_start = now;
        }
        self.set_window(acked);
        // After the window, so that the ACK that shows the queue is judged as before it
        // (Drain's pacing gain applies at once; its window gain is Startup's). Module
        // docs, **Startup's end**.
        let queue_now = acked
            .queue_delay_seen
            .is_some_and(|q| q >= super::SHALLOW_QUEUE);
        if queue_now && acked.bytes_in_flight as f64 >= OWN_QUEUE_FLIGHT * self.bdp() {
            self.on_standing_queue();
        }
    }

    fn on_congestion_event(&mut self, _now: Time, _coupling: &Coupling<'_>) {
        // BBR v1 keeps its model on loss (module docs).
    }

    fn on_spurious_congestion(&mut self, _now: Time) {
        // Nothing was cut.
    }

    fn on_persistent_congestion(&mut self, _now: Time) {
        *self = Bbr {
            window: min_window(self.mss) as f64,
            min_rtt: self.min_rtt,
            ack_hold: self.ack_hold,
            ..Bbr::with_ack_aggregation(self.mss, self.ack_hold.max_delay)
        };
    }

    fn window(&self) -> u64 {
        self.window as u64
    }

    fn pacing_rate(&self) -> Option<f64> {
        let bw = self.bw.get();
        (bw > 0.0).then(|| self.pacing_gain() * bw)
    }

    fn name(&self) -> &'static str {
        "bbr"
    }

    fn acks_in_recovery(&self) -> bool {
        // Every delivered byte is a delivery-rate measurement (module docs).
        true
    }

    fn set_prompt_acks(&mut self, prompt: bool) {
        let (mss, delay) = (self.mss, self.ack_hold.max_delay);
        self.ack_hold = if prompt {
            AckHold::prompt(ACK_EVERY_DATAGRAMS, mss, delay)
        } else {
            AckHold::counting(ACK_EVERY_DATAGRAMS, mss, delay)
        };
    }
}
