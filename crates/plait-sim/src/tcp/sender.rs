//! The NewReno sender: ns-2's one-way `Agent/TCP/Newreno` (tcp.cc, tcp-reno.cc,
//! tcp-newreno.cc of ns-2.35) as a sans-IO state machine.
//!
//! What it owns: the send sequence (`t_seqno`, `maxseq`), the cumulative ACK state, cwnd,
//! ssthresh, the fast-recovery inflation (`dupwnd`), the one segment timed per RTT, the
//! retransmission timer and the counters of [`TcpSenderStats`].
//!
//! Driving: each event ([`NewRenoSender::start`], [`NewRenoSender::on_ack`],
//! [`NewRenoSender::on_timeout`]) decides what ns-2 would send at that instant (its
//! `send_much`, `send_one` and retransmissions) and queues it; the driver then drains
//! [`NewRenoSender::poll_send`] until `None`, at the same `now`.
//!
//! Invariants: sequence numbers count packets; internally they follow ns-2's signed
//! conventions (`highest_ack = next_expected - 1`, -1 before any ACK); the effective window
//! is `min(floor(cwnd) + dupwnd, window_)` and no segment at or beyond
//! `highest_ack + 1 + window` leaves; at most `max_burst` new segments leave per ACK or
//! timeout (2 during fast recovery whatever `max_burst` is, as ns-2's NewReno hard-codes);
//! the one retransmission of a fast retransmit or partial ACK comes on top, as in ns-2.
//!
//! ns-2 behaviour modelled (defaults of ns-default.tcl): `syn_` (packet 0 is a 40-byte SYN,
//! cwnd 1 until it is acknowledged, then `windowInit_`: `delay_growth_`); slow start below
//! ssthresh, +1/cwnd above (`windowOption_ 1`), cwnd itself unbounded (only the window is
//! capped); ssthresh starts at `window_`; three duplicate ACKs: ssthresh = floor(W/2) (at
//! least 2) and cwnd = W/2 with W = min(cwnd, window_) (ns-2 halves the window, not the
//! flight size), retransmit, inflate by one per further dupACK; partial ACKs retransmit the
//! next hole with partial window deflation and stay in recovery, and only the first partial
//! ACK restarts the timer (`newreno_changes1_ 1`); a full ACK ends recovery without touching
//! cwnd (`exit_recovery_fix_ 0`); fast retransmit only once per window (`bugFix_`: the ACK
//! must pass `recover`); limited transmit on the first two dupACKs (`singledup_ 1`); a
//! timeout halves ssthresh the same way, sets cwnd = 1, backs the timer off and goes back to
//! the first unacknowledged packet; the timer restarts on every new ACK.
//!
//! Differences: ECN, Quick-Start, F-RTO and the `newreno_changes_` experiments are absent;
//! [`NewRenoSender::next_timeout`] is `None` once a finite transfer is done (ns-2 keeps a
//! timer running with nothing outstanding); the RTT clock has no random boot offset (see
//! [`RttEstimator`]).

use std::collections::VecDeque;

use plait_proto::Time;

use super::{RttEstimator, TcpConfig};
use crate::packet::{TcpAck, TcpSegment};
use recovery::Cut;

mod recovery;

/// ns-2's `TCP_MAXSEQ`: "infinite" data from an FTP source.
const INFINITE: i64 = 1 << 40;

/// Counters a run reports (PET-BMP Table I counts dupACKs, retransmissions, timeouts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpSenderStats {
    /// Segments sent, retransmissions and the SYN included (ns-2 `ndatapack_`).
    pub segments_sent: u64,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Segments sent again (ns-2 `nrexmitpack_`).
    pub retransmissions: u64,
    /// Retransmission timeouts with data outstanding (ns-2 `nrexmit_`).
    pub timeouts: u64,
    /// Fast retransmits (entries into fast recovery).
    pub fast_retransmits: u64,
    /// Partial ACKs during fast recovery (each retransmits one more hole).
    pub partial_acks: u64,
    /// ACKs received (ns-2 `nackpack_`).
    pub acks_received: u64,
    /// Duplicate ACKs received: the same cumulative ACK as the previous one.
    pub dupacks: u64,
    /// Data packets cumulatively acknowledged (the goodput in packets; the SYN excluded).
    pub acked_packets: u64,
}

/// ns-2's `last_cwnd_action_`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Action {
    None,
    Dupack,
    Timeout,
    Exited,
}

/// A NewReno bulk (or finite) transfer source with ns-2 `Agent/TCP/Newreno` behaviour.
#[derive(Clone, Debug)]
pub struct NewRenoSender {
    cfg: TcpConfig,
    started: bool,
    /// Next new packet to send.
    t_seqno: i64,
    /// One past the last packet the application has (grows by one for the SYN).
    curseq: i64,
    /// Highest packet sent so far (-1: none).
    maxseq: i64,
    last_ack: i64,
    highest_ack: i64,
    recover: i64,
    dupacks: u32,
    dupwnd: i64,
    cwnd: f64,
    ssthresh: i64,
    wnd_init: f64,
    last_action: Action,
    first_partial: bool,
    rtt_active: bool,
    rtt_seq: i64,
    rtt_ts: Time,
    rtt: RttEstimator,
    rtx_deadline: Option<Time>,
    closed: bool,
    /// A streaming application hands data over as it makes it ([`Self::produce`]).
    app_limited: bool,
    out: VecDeque<TcpSegment>,
    stats: TcpSenderStats,
}

impl NewRenoSender {
    /// A sender that has not started yet.
    pub fn new(config: TcpConfig) -> Self {
        let rtt = RttEstimator::new(
            config.initial_rto,
            config.min_rto,
            config.max_rto,
            config.tick,
        );
        let wnd_init = f64::from(config.window_init.max(1));
        NewRenoSender {
            cwnd: if config.syn { 1.0 } else { wnd_init },
            ssthresh: i64::from(config.window),
            wnd_init,
            started: false,
            t_seqno: 0,
            curseq: 0,
            maxseq: -1,
            last_ack: -1,
            highest_ack: -1,
            recover: 0,
            dupacks: 0,
            dupwnd: 0,
            last_action: Action::None,
            first_partial: false,
            rtt_active: false,
            rtt_seq: -1,
            rtt_ts: Time::ZERO,
            rtt,
            rtx_deadline: None,
            closed: false,
            app_limited: false,
            out: VecDeque::new(),
            stats: TcpSenderStats::default(),
            cfg: config,
        }
    }

    /// The application starts sending (ns-2 `$ftp start`, or `produce n` when finite).
    pub fn start(&mut self, now: Time) {
        if self.started {
            return;
        }
        self.started = true;
        self.curseq = match self.cfg.total_packets {
            Some(n) => i64::try_from(n).unwrap_or(INFINITE).min(INFINITE),
            None => INFINITE,
        };
        self.send_much(now, self.cfg.max_burst);
    }

    /// A streaming application starts: it has no data yet and hands packets over with
    /// [`Self::produce`] (ns-2 `advanceby`, as a CBR source over TCP does). Seed MMS
    /// §III-B runs "a streaming application using TCP connection".
    pub fn start_app_limited(&mut self, _now: Time) {
        if self.started {
            return;
        }
        self.started = true;
        self.app_limited = true;
    }

    /// The streaming application hands over `n` more packets (ns-2 `advanceby`): they go
    /// out as the window allows.
    pub fn produce(&mut self, now: Time, n: u64) {
        let n = i64::try_from(n).unwrap_or(INFINITE);
        self.curseq = self.curseq.saturating_add(n).min(INFINITE);
        self.send_much(now, self.cfg.max_burst);
    }

    /// An ACK arrives (ns-2 `NewRenoTcpAgent::recv`).
    pub fn on_ack(&mut self, now: Time, ack: &TcpAck) {
        let seqno = i64::try_from(ack.next_expected).unwrap_or(INFINITE) - 1;
        self.stats.acks_received += 1;
        if seqno > self.last_ack {
            if seqno >= self.recover || self.last_action != Action::Dupack {
                if self.dupwnd > 0 {
                    self.dupwnd = 0;
                    if self.last_action == Action::Dupack {
                        self.last_action = Action::Exited;
                    }
                }
                self.first_partial = false;
                self.newack(now, seqno);
                self.open_cwnd();
                // A streaming source that caught up waits for more; a finite one is done.
                if !self.app_limited && self.highest_ack >= self.curseq - 1 {
                    self.closed = true;
                }
                if self.last_ack == 0 {
                    self.cwnd = self.wnd_init; // delay_growth_
                }
            } else {
                self.partial_ack(now, seqno);
            }
        } else if seqno == self.last_ack {
            self.stats.dupacks += 1;
            self.dupacks += 1;
            let thresh = self.cfg.dupthresh.max(1);
            if self.dupacks == thresh {
                self.dupack_action(now);
            } else if self.dupacks > thresh && self.last_action == Action::Dupack {
                self.dupwnd += 1;
            } else if self.dupacks < thresh && self.cfg.limited_transmit {
                self.send_one(now);
            }
        }
        if self.dupacks == 0 {
            self.send_much(now, self.cfg.max_burst);
        } else if self.dupacks >= self.cfg.dupthresh.max(1) {
            self.send_much(now, 2);
        }
    }

    /// The next segment to put on the wire now, if any; call until `None` after each event.
    pub fn poll_send(&mut self, _now: Time) -> Option<TcpSegment> {
        self.out.pop_front()
    }

    /// When the retransmission timer fires, if it is armed.
    pub fn next_timeout(&self) -> Option<Time> {
        if self.is_done() {
            None
        } else {
            self.rtx_deadline
        }
    }

    /// The retransmission timer fired (ignored if called before [`Self::next_timeout`]).
    pub fn on_timeout(&mut self, now: Time) {
        match self.rtx_deadline {
            Some(deadline) if now >= deadline && !self.is_done() => {}
            _ => return,
        }
        self.rtx_deadline = None;
        // RenoTcpAgent::timeout, then TcpAgent::timeout.
        self.dupwnd = 0;
        self.dupacks = 0;
        self.recover = self.maxseq;
        if self.cwnd < 1.0 {
            self.cwnd = 1.0;
        }
        if self.highest_ack == -1 && self.wnd_init > 1.0 {
            self.wnd_init = 1.0; // the first packet was lost: no larger initial window
        }
        let idle = self.highest_ack == self.maxseq;
        if idle {
            self.slowdown(Cut::Idle);
        } else {
            self.stats.timeouts += 1;
            self.last_action = Action::Timeout;
            self.slowdown(Cut::Restart);
        }
        self.reset_rtx_timer(now, false, !idle);
        self.last_action = Action::Timeout;
        self.send_much(now, self.cfg.max_burst);
    }

    /// The counters so far.
    pub fn stats(&self) -> &TcpSenderStats {
        &self.stats
    }

    /// The congestion window in packets (fractional in congestion avoidance; without the
    /// fast-recovery inflation).
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The slow-start threshold in packets.
    pub fn ssthresh(&self) -> u32 {
        u32::try_from(self.ssthresh).unwrap_or(u32::MAX)
    }

    /// The effective window: `min(floor(cwnd) + inflation, window_)` packets.
    pub fn window(&self) -> u32 {
        u32::try_from(self.win().max(0)).unwrap_or(u32::MAX)
    }

    /// Packets sent and not yet cumulatively acknowledged.
    pub fn outstanding(&self) -> u64 {
        u64::try_from(self.maxseq - self.highest_ack).unwrap_or(0)
    }

    /// In fast recovery (between a fast retransmit and the ACK that covers `recover`).
    pub fn in_recovery(&self) -> bool {
        self.last_action == Action::Dupack
    }

    /// The RTT estimator (srtt, rttvar, backoff).
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// The retransmission timeout the timer would be armed with now.
    pub fn rto(&self) -> std::time::Duration {
        self.rtt.timeout()
    }

    /// A finite transfer has had every packet acknowledged (never, for a bulk transfer).
    pub fn is_done(&self) -> bool {
        self.started && (self.closed || self.cfg.total_packets == Some(0))
    }

    fn win(&self) -> i64 {
        ((self.cwnd as i64) + self.dupwnd).min(i64::from(self.cfg.window))
    }

    fn windowd(&self) -> f64 {
        (self.cwnd + self.dupwnd as f64).min(f64::from(self.cfg.window))
    }

    fn open_cwnd(&mut self) {
        if self.cwnd < self.ssthresh as f64 {
            self.cwnd += 1.0;
        } else {
            self.cwnd += 1.0 / self.cwnd;
        }
    }

    /// ns-2 `newack` (cumulative ACK of new data, outside recovery) and `newtimer`.
    fn newack(&mut self, now: Time, seqno: i64) {
        self.dupacks = 0;
        self.set_acked(seqno);
        if self.rtt_active && seqno >= self.rtt_seq {
            self.rtt.reset_backoff();
            self.rtt_active = false;
            self.rtt.sample(self.rtt_ts, now);
        }
        self.newtimer(now, seqno);
    }

    fn newtimer(&mut self, now: Time, seqno: i64) {
        if self.t_seqno > seqno || seqno < self.maxseq || self.cwnd < 1.0 {
            self.set_rtx_timer(now);
        } else {
            self.rtx_deadline = None;
        }
    }

    fn set_acked(&mut self, seqno: i64) {
        self.last_ack = seqno;
        self.highest_ack = seqno;
        self.t_seqno = self.t_seqno.max(seqno + 1);
        let first_data = i64::from(self.cfg.syn);
        self.stats.acked_packets = u64::try_from(seqno + 1 - first_data).unwrap_or(0);
    }

    fn send_much(&mut self, now: Time, max_burst: u32) {
        if !self.started {
            return;
        }
        let mut sent = 0;
        while self.t_seqno <= self.highest_ack + self.win() && self.t_seqno < self.curseq {
            self.output(now, self.t_seqno);
            self.t_seqno += 1;
            sent += 1;
            if max_burst > 0 && sent == max_burst {
                break;
            }
        }
    }

    fn set_rtx_timer(&mut self, now: Time) {
        self.rtx_deadline = Some(now + self.rtt.timeout());
    }

    /// Puts packet `seqno` on the wire (ns-2 `output`).
    fn output(&mut self, now: Time, seqno: i64) {
        let syn = self.cfg.syn && seqno == 0;
        if syn && self.maxseq == -1 {
            self.curseq += 1;
        }
        let payload = if syn { 0 } else { self.cfg.packet_size };
        let force_timer = self.highest_ack == self.maxseq;
        let retransmit = seqno <= self.maxseq;
        self.out.push_back(TcpSegment {
            seq: u64::try_from(seqno).unwrap_or(0),
            payload,
            retransmit,
        });
        self.stats.segments_sent += 1;
        self.stats.bytes_sent += u64::from(payload);
        if retransmit {
            self.stats.retransmissions += 1;
        } else {
            self.maxseq = seqno;
            if !self.rtt_active {
                self.rtt_active = true;
                if seqno > self.rtt_seq {
                    self.rtt_seq = seqno;
                    self.rtt_ts = now;
                }
            }
        }
        if self.rtx_deadline.is_none() || force_timer {
            self.set_rtx_timer(now);
        }
    }
}

#[cfg(test)]
#[path = "sender_tests.rs"]
mod tests;
