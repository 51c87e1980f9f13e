//! Per-packet times of a TCP transfer, for the end-to-end delay and the delivery gaps of
//! seed MMS §III-C (Fig. 4-6): when each packet first left the sending application's TCP,
//! when it was retransmitted or a timer expired, when its first copy reached the receiving
//! host's TCP and when the receiving application got it in order.
//!
//! The sender's and the receiver's logs are kept apart (each node owns its own) and joined
//! by sequence number afterwards ([`crate::handover`]). Units of one packet through
//! [`super::app_delay`]'s bookkeeping: a packet is a unit of one.
//!
//! Invariants: `first_sent[s]` and `delivered[s]` belong to packet `s` (ns-2 numbers
//! packets from 0); `first_sent`, `delivered`, `retransmits` and `timeouts` only grow, in
//! time order; `arrived[s]` is [`Time::MAX`] until packet `s` arrives, then its first
//! arrival. Eight bytes per packet and list: a 100 Mbit/s run of 10 s holds under 3 MB.

use plait_proto::Time;

use super::app_delay::{note_first_send, note_in_order};

/// What the sending TCP did, and when.
#[derive(Clone, Debug, Default)]
pub struct SendLog {
    /// When each packet was first sent.
    pub first_sent: Vec<Time>,
    /// When each retransmission went out.
    pub retransmits: Vec<Time>,
    /// When each retransmission timeout expired.
    pub timeouts: Vec<Time>,
}

impl SendLog {
    /// Packet `seq` left at `now` (a retransmission if `retransmit`).
    pub fn note_sent(&mut self, seq: u64, retransmit: bool, now: Time) {
        if retransmit {
            self.retransmits.push(now);
        }
        note_first_send(&mut self.first_sent, seq, 1, now);
    }
}

/// What reached the receiving TCP and its application, and when.
#[derive(Clone, Debug, Default)]
pub struct ReceiveLog {
    /// Per packet, its first arrival ([`Time::MAX`]: not yet).
    pub arrived: Vec<Time>,
    /// Per packet, when the application got it in order.
    pub delivered: Vec<Time>,
}

impl ReceiveLog {
    /// Packet `seq` reached the receiving TCP at `now`.
    pub fn note_arrival(&mut self, seq: u64, now: Time) {
        let Ok(i) = usize::try_from(seq) else {
            return;
        };
        if self.arrived.len() <= i {
            self.arrived.resize(i + 1, Time::MAX);
        }
        if self.arrived[i] == Time::MAX {
            self.arrived[i] = now;
        }
    }

    /// The application holds the first `in_order` packets at `now`.
    pub fn note_in_order(&mut self, in_order: u64, now: Time) {
        note_in_order(&mut self.delivered, in_order, 1, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    #[test]
    fn logs_keep_first_times_per_packet() {
        let mut s = SendLog::default();
        s.note_sent(0, false, t(0));
        s.note_sent(1, false, t(1));
        s.note_sent(1, true, t(5));
        assert_eq!(s.first_sent, vec![t(0), t(1)]);
        assert_eq!(s.retransmits, vec![t(5)]);

        let mut r = ReceiveLog::default();
        r.note_arrival(1, t(10));
        r.note_in_order(0, t(10));
        assert_eq!(r.arrived, vec![Time::MAX, t(10)]);
        r.note_arrival(0, t(12));
        r.note_arrival(1, t(13));
        r.note_in_order(2, t(12));
        assert_eq!(r.arrived, vec![t(12), t(10)]);
        assert_eq!(r.delivered, vec![t(12), t(12)]);
    }
}
