//! Loss handling of [`NewRenoSender`](super::NewRenoSender), split from `sender.rs`: the
//! window cuts (ns-2 `slowdown`), fast retransmit (`dupack_action` with `bugFix_`), partial
//! ACKs (`partialnewack_helper` with `partial_window_deflation_ 1` and
//! `newreno_changes1_ 1`), limited transmit (`send_one`) and the timer reset after a loss
//! (`reset_rtx_timer`).
//!
//! Invariants: ssthresh never drops below 2 and cwnd never below 1; at most one fast
//! retransmit per window of data (the cumulative ACK must have passed `recover`); a partial
//! ACK keeps the sender in recovery and retransmits exactly the next hole.

use plait_proto::Time;

use super::{Action, NewRenoSender};

/// How `slowdown` cuts the window.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Cut {
    /// Fast retransmit: ssthresh and cwnd to half the window.
    Halve,
    /// Timeout with data outstanding: ssthresh to half the window, cwnd to 1.
    Restart,
    /// Timeout with nothing outstanding: cwnd to 1, ssthresh kept.
    Idle,
}

impl NewRenoSender {
    pub(super) fn slowdown(&mut self, cut: Cut) {
        let halfwin = self.windowd() / 2.0;
        match cut {
            Cut::Halve => {
                self.ssthresh = halfwin as i64;
                self.cwnd = halfwin;
            }
            Cut::Restart => {
                self.ssthresh = halfwin as i64;
                self.cwnd = 1.0;
            }
            Cut::Idle => self.cwnd = 1.0,
        }
        self.ssthresh = self.ssthresh.max(2);
    }

    /// ns-2 `partialnewack_helper` with `partial_window_deflation_ 1`.
    pub(super) fn partial_ack(&mut self, now: Time, seqno: i64) {
        self.stats.partial_acks += 1;
        if !self.first_partial {
            self.first_partial = true;
            self.newtimer(now, seqno);
        }
        let deflate = seqno - self.last_ack;
        if self.dupwnd > deflate {
            self.dupwnd -= deflate - 1;
        } else {
            self.cwnd -= (deflate - self.dupwnd) as f64;
            self.dupwnd = 1;
        }
        if self.cwnd < 1.0 {
            self.cwnd = 1.0;
        }
        self.set_acked(seqno);
        if self.rtt_active && seqno >= self.rtt_seq {
            self.rtt_active = false;
            self.rtt.reset_backoff();
        }
        self.output(now, self.last_ack + 1);
    }

    pub(super) fn dupack_action(&mut self, now: Time) {
        let recovered = self.highest_ack > self.recover;
        if !(recovered || self.highest_ack == 0) {
            return; // bugFix_: at most one fast retransmit per window
        }
        self.stats.fast_retransmits += 1;
        self.recover = self.maxseq;
        self.reset_rtx_timer(now, true, false);
        self.last_action = Action::Dupack;
        self.slowdown(Cut::Halve);
        self.output(now, self.last_ack + 1);
        self.dupwnd = i64::from(self.cfg.dupthresh.max(1));
    }

    /// Limited transmit (RFC 3042, ns-2 `send_one`).
    pub(super) fn send_one(&mut self, now: Time) {
        let ha = self.highest_ack;
        if self.t_seqno <= ha + i64::from(self.cfg.window)
            && self.t_seqno < self.curseq
            && (self.t_seqno as f64) <= ha as f64 + self.cwnd + f64::from(self.dupacks)
        {
            self.output(now, self.t_seqno);
            self.t_seqno += 1;
        }
    }

    pub(super) fn reset_rtx_timer(&mut self, now: Time, mild: bool, backoff: bool) {
        if backoff {
            self.rtt.back_off();
        }
        self.set_rtx_timer(now);
        if !mild {
            self.t_seqno = self.highest_ack + 1;
        }
        self.rtt_active = false;
    }
}
