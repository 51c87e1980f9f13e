//! The TCP receiver: ns-2's `Agent/TCPSink` (one cumulative ACK per packet) and
//! `Agent/TCPSink/DelAck` (tcp-sink.cc), as a sans-IO state machine.
//!
//! What it owns: the receive state of ns-2's `Acker` (the next expected packet and the
//! packets held above a hole), the delayed-ACK timer and the counters of [`TcpSinkStats`].
//!
//! Behaviour: every arriving segment updates the cumulative point; the ACK carries the next
//! expected packet (ns-2 sends `next - 1`, the highest in-order packet; the sender converts)
//! and echoes the triggering segment. Without delayed ACKs every segment, duplicates
//! included, is acknowledged at once. With delayed ACKs (ns-2 `DelAck`, `interval_` 100 ms,
//! `RFC2581_immediate_ack_ true`, `SYN_immediate_ack_ true`): an in-order segment that
//! arrives while no ACK is being held is held, with the timer armed; the next segment, any
//! out-of-order or gap-filling segment, and packet 0 (the SYN) are acknowledged at once
//! (cancelling the timer); when the timer fires the held ACK goes out. So every second
//! in-order segment is acknowledged, and a lone segment after at most the interval.
//!
//! Invariants: `held` only contains packets above `next`; ACK numbers never decrease;
//! ACKs come out of [`TcpSink::poll_ack`] in the order they were generated.
//!
//! Goodput: [`TcpSinkStats::delivered_packets`] and `delivered_bytes` count data only (the
//! SYN has no payload); ns-2's `bytes_` also counts headers.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use plait_proto::Time;

use crate::packet::{TcpAck, TcpSegment};

/// ns-2's `Agent/TCPSink/DelAck set interval_ 100ms`.
pub const DEFAULT_DELACK_INTERVAL: Duration = Duration::from_millis(100);

/// What the receiver saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpSinkStats {
    /// Segments that arrived, duplicates included.
    pub received: u64,
    /// Data segments delivered in order to the application (goodput in packets).
    pub delivered_packets: u64,
    /// Payload bytes delivered in order.
    pub delivered_bytes: u64,
    /// Segments that had already arrived.
    pub duplicates: u64,
    /// New segments that arrived above a hole.
    pub out_of_order: u64,
    /// ACKs generated.
    pub acks_sent: u64,
}

/// An ns-2 `TCPSink` (or `TCPSink/DelAck` when built with an interval).
#[derive(Clone, Debug)]
pub struct TcpSink {
    delack: Option<Duration>,
    /// Next expected packet: every packet below it has arrived.
    next: u64,
    /// Highest packet seen.
    maxseen: Option<u64>,
    /// Packets above `next` that arrived, with their payload.
    held: BTreeMap<u64, u32>,
    /// The delayed-ACK timer.
    delack_deadline: Option<Time>,
    /// The segment whose ACK is being delayed.
    saved_echo: Option<u64>,
    out: VecDeque<TcpAck>,
    stats: TcpSinkStats,
}

impl TcpSink {
    /// A sink that ACKs every segment (`None`) or delays ACKs by up to the given interval
    /// (ns-2 uses [`DEFAULT_DELACK_INTERVAL`]).
    pub fn new(delayed_ack: Option<Duration>) -> Self {
        TcpSink {
            delack: delayed_ack,
            next: 0,
            maxseen: None,
            held: BTreeMap::new(),
            delack_deadline: None,
            saved_echo: None,
            out: VecDeque::new(),
            stats: TcpSinkStats::default(),
        }
    }

    /// A data segment arrives.
    pub fn on_segment(&mut self, now: Time, seg: &TcpSegment) {
        self.stats.received += 1;
        let seq = seg.seq;
        self.maxseen = Some(self.maxseen.map_or(seq, |m| m.max(seq)));
        if seq < self.next || self.held.contains_key(&seq) {
            self.stats.duplicates += 1;
        } else {
            if seq > self.next {
                self.stats.out_of_order += 1;
            }
            self.held.insert(seq, seg.payload);
            while let Some(payload) = self.held.remove(&self.next) {
                if payload > 0 {
                    self.stats.delivered_packets += 1;
                    self.stats.delivered_bytes += u64::from(payload);
                }
                self.next += 1;
            }
        }
        let Some(interval) = self.delack else {
            self.ack(seq);
            return;
        };
        let in_order = seq + 1 == self.next;
        if self.delack_deadline.is_none() && in_order {
            let fills_gap = self.maxseen.is_some_and(|m| seq < m);
            if !fills_gap && seq != 0 {
                self.saved_echo = Some(seq);
                self.delack_deadline = Some(now + interval);
                return;
            }
        }
        self.delack_deadline = None;
        self.saved_echo = None;
        self.ack(seq);
    }

    /// The next ACK to send now, if any; call until `None` after each event.
    pub fn poll_ack(&mut self, _now: Time) -> Option<TcpAck> {
        self.out.pop_front()
    }

    /// When the delayed-ACK timer fires, if it is armed.
    pub fn next_timeout(&self) -> Option<Time> {
        self.delack_deadline
    }

    /// The delayed-ACK timer fired: the held ACK goes out (ignored if early).
    pub fn on_timeout(&mut self, now: Time) {
        match self.delack_deadline {
            Some(deadline) if now >= deadline => {}
            _ => return,
        }
        self.delack_deadline = None;
        if let Some(echo) = self.saved_echo.take() {
            self.ack(echo);
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> &TcpSinkStats {
        &self.stats
    }

    /// The next packet expected (the cumulative ACK point).
    pub fn next_expected(&self) -> u64 {
        self.next
    }

    fn ack(&mut self, echo_seq: u64) {
        self.stats.acks_sent += 1;
        self.out.push_back(TcpAck {
            next_expected: self.next,
            echo_seq,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(seq: u64) -> TcpSegment {
        TcpSegment {
            seq,
            payload: 1000,
            retransmit: false,
        }
    }

    fn acks(sink: &mut TcpSink, now: Time) -> Vec<u64> {
        std::iter::from_fn(|| sink.poll_ack(now))
            .map(|a| a.next_expected)
            .collect()
    }

    #[test]
    fn cumulative_ack_per_packet() {
        let mut s = TcpSink::new(None);
        let t = Time::ZERO;
        for seq in 0..5 {
            s.on_segment(t, &seg(seq));
            let a = s.poll_ack(t).expect("one ack per packet");
            assert_eq!((a.next_expected, a.echo_seq), (seq + 1, seq));
            assert_eq!(s.poll_ack(t), None);
        }
        assert_eq!(s.stats().delivered_packets, 5);
        assert_eq!(s.stats().delivered_bytes, 5000);
        assert_eq!(s.next_timeout(), None);
    }

    #[test]
    fn hole_gives_duplicate_acks_then_jumps() {
        let mut s = TcpSink::new(None);
        let t = Time::ZERO;
        s.on_segment(t, &seg(0));
        for seq in [2, 3, 4] {
            s.on_segment(t, &seg(seq));
        }
        s.on_segment(t, &seg(1));
        s.on_segment(t, &seg(3)); // a duplicate is acknowledged too
        assert_eq!(acks(&mut s, t), [1, 1, 1, 1, 5, 5]);
        let st = s.stats();
        assert_eq!(
            (st.out_of_order, st.duplicates, st.delivered_packets),
            (3, 1, 5)
        );
        assert_eq!(st.received, 6);
    }

    #[test]
    fn syn_is_not_goodput() {
        let mut s = TcpSink::new(None);
        let syn = TcpSegment {
            seq: 0,
            payload: 0,
            retransmit: false,
        };
        s.on_segment(Time::ZERO, &syn);
        s.on_segment(Time::ZERO, &seg(1));
        assert_eq!(acks(&mut s, Time::ZERO), [1, 2]);
        assert_eq!(s.stats().delivered_packets, 1);
    }

    #[test]
    fn delayed_ack_every_second_packet() {
        let mut s = TcpSink::new(Some(DEFAULT_DELACK_INTERVAL));
        let t = Time::from_millis(1);
        s.on_segment(t, &seg(0)); // packet 0 (the SYN) is acknowledged at once
        assert_eq!(acks(&mut s, t), [1]);
        s.on_segment(t, &seg(1));
        assert_eq!(acks(&mut s, t), Vec::<u64>::new());
        assert_eq!(s.next_timeout(), Some(t + DEFAULT_DELACK_INTERVAL));
        s.on_segment(t, &seg(2));
        assert_eq!(acks(&mut s, t), [3]);
        assert_eq!(s.next_timeout(), None);
        s.on_segment(t, &seg(3));
        s.on_segment(t, &seg(4));
        assert_eq!(acks(&mut s, t), [5]);
    }

    #[test]
    fn delayed_ack_timer_fires_after_interval() {
        let mut s = TcpSink::new(Some(DEFAULT_DELACK_INTERVAL));
        s.on_segment(Time::ZERO, &seg(0));
        let _ = acks(&mut s, Time::ZERO);
        let t = Time::from_millis(10);
        s.on_segment(t, &seg(1));
        s.on_timeout(Time::from_millis(109)); // early: ignored
        assert_eq!(acks(&mut s, t), Vec::<u64>::new());
        let fire = s.next_timeout().expect("armed");
        assert_eq!(fire, Time::from_millis(110));
        s.on_timeout(fire);
        let a = s.poll_ack(fire).expect("held ack");
        assert_eq!((a.next_expected, a.echo_seq), (2, 1));
        assert_eq!(s.next_timeout(), None);
    }

    #[test]
    fn delayed_ack_immediate_when_out_of_order_or_filling() {
        let mut s = TcpSink::new(Some(DEFAULT_DELACK_INTERVAL));
        let t = Time::ZERO;
        s.on_segment(t, &seg(0));
        s.on_segment(t, &seg(1)); // held
        s.on_segment(t, &seg(3)); // out of order: at once, and the held ACK is subsumed
        assert_eq!(acks(&mut s, t), [1, 2]);
        assert_eq!(s.next_timeout(), None);
        s.on_segment(t, &seg(2)); // fills the hole: at once
        assert_eq!(acks(&mut s, t), [4]);
        s.on_segment(t, &seg(4)); // in order again: held
        assert_eq!(acks(&mut s, t), Vec::<u64>::new());
    }
}
