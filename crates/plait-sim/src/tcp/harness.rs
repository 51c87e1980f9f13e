//! Test-only: a tiny network for the TCP scenario tests, independent of the simulator's
//! other modules. One flow: sender -> a drop-tail queue served at `rate` -> a fixed
//! propagation delay -> sink; ACKs return after a fixed delay without queueing.
//!
//! Invariants: events are processed in time order, and simultaneous events in a fixed order
//! (link departure, arrival at the sink, sink timer, arrival of an ACK, sender timer), so a
//! run is deterministic. The queue limit counts waiting packets, not the one being sent
//! (ns-2 DropTail). A `drop` filter removes chosen segments before they reach the queue.

use std::collections::VecDeque;
use std::time::Duration;

use plait_proto::Time;

use super::{NewRenoSender, TcpConfig, TcpSink};
use crate::packet::{TCP_HEADER, TcpAck, TcpSegment};

/// What the sender knew when one ACK arrived.
#[derive(Clone, Debug)]
pub struct AckRecord {
    pub at: Time,
    pub next_expected: u64,
    /// The effective window just before the ACK was processed.
    pub window_before: u32,
    pub cwnd_after: f64,
    pub in_recovery_after: bool,
    pub fast_retransmits_after: u64,
}

/// What happened during a run.
#[derive(Clone, Debug, Default)]
pub struct Log {
    /// Every segment the sender emitted, when.
    pub sends: Vec<(Time, TcpSegment)>,
    pub acks: Vec<AckRecord>,
    /// When the sender's retransmission timer fired.
    pub timeouts: Vec<Time>,
    /// Most segments emitted in response to one event.
    pub max_burst: usize,
    /// Most new (not retransmitted) segments emitted in response to one event.
    pub max_new_burst: usize,
    /// Most packets outstanding after any event.
    pub max_outstanding: u64,
    pub queue_drops: u64,
    pub forced_drops: u64,
}

/// A chosen-loss filter: `true` drops the segment.
pub type DropFn = Box<dyn FnMut(Time, &TcpSegment) -> bool>;

/// The network and the two endpoints.
pub struct Net {
    pub now: Time,
    pub sender: NewRenoSender,
    pub sink: TcpSink,
    pub log: Log,
    pub drop: DropFn,
    rate_bps: u64,
    delay: Duration,
    ack_delay: Duration,
    limit: usize,
    queue: VecDeque<TcpSegment>,
    in_service: Option<(Time, TcpSegment)>,
    wire: VecDeque<(Time, TcpSegment)>,
    returning: VecDeque<(Time, TcpAck)>,
}

impl Net {
    /// `rate_bps` bottleneck, one-way `delay` each way, `limit` packets of queue.
    pub fn new(
        cfg: TcpConfig,
        delack: Option<Duration>,
        rate_bps: u64,
        delay: Duration,
        limit: usize,
    ) -> Net {
        Net {
            now: Time::ZERO,
            sender: NewRenoSender::new(cfg),
            sink: TcpSink::new(delack),
            log: Log::default(),
            drop: Box::new(|_, _| false),
            rate_bps,
            delay,
            ack_delay: delay,
            limit,
            queue: VecDeque::new(),
            in_service: None,
            wire: VecDeque::new(),
            returning: VecDeque::new(),
        }
    }

    /// Starts the transfer now.
    pub fn start(&mut self) {
        self.sender.start(self.now);
        self.drain_sender();
    }

    /// Runs every event up to and including `until`.
    pub fn run_until(&mut self, until: Time) {
        while let Some(t) = self.next_event() {
            if t > until {
                break;
            }
            self.step(t);
        }
        self.now = self.now.max(until);
    }

    /// Runs until the sender reports done (or `limit` passes); returns whether it finished.
    pub fn run_until_done(&mut self, limit: Time) -> bool {
        while !self.sender.is_done() {
            match self.next_event() {
                Some(t) if t <= limit => self.step(t),
                _ => break,
            }
        }
        self.sender.is_done()
    }

    fn next_event(&self) -> Option<Time> {
        [
            self.in_service.map(|(t, _)| t),
            self.wire.front().map(|&(t, _)| t),
            self.sink.next_timeout(),
            self.returning.front().map(|&(t, _)| t),
            self.sender.next_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn step(&mut self, t: Time) {
        self.now = t;
        if let Some((done, seg)) = self.in_service.filter(|&(d, _)| d == t) {
            self.in_service = None;
            self.wire.push_back((done + self.delay, seg));
            if let Some(next) = self.queue.pop_front() {
                self.serve(next);
            }
        } else if self.wire.front().is_some_and(|&(a, _)| a == t) {
            let (_, seg) = self.wire.pop_front().expect("checked");
            self.sink.on_segment(t, &seg);
            self.drain_sink();
        } else if self.sink.next_timeout() == Some(t) {
            self.sink.on_timeout(t);
            self.drain_sink();
        } else if self.returning.front().is_some_and(|&(a, _)| a == t) {
            let (_, ack) = self.returning.pop_front().expect("checked");
            let window_before = self.sender.window();
            self.sender.on_ack(t, &ack);
            self.log.acks.push(AckRecord {
                at: t,
                next_expected: ack.next_expected,
                window_before,
                cwnd_after: self.sender.cwnd(),
                in_recovery_after: self.sender.in_recovery(),
                fast_retransmits_after: self.sender.stats().fast_retransmits,
            });
            self.drain_sender();
        } else if self.sender.next_timeout() == Some(t) {
            self.log.timeouts.push(t);
            self.sender.on_timeout(t);
            self.drain_sender();
        }
    }

    fn drain_sink(&mut self) {
        while let Some(ack) = self.sink.poll_ack(self.now) {
            self.returning.push_back((self.now + self.ack_delay, ack));
        }
    }

    fn drain_sender(&mut self) {
        let (mut burst, mut new) = (0, 0);
        while let Some(seg) = self.sender.poll_send(self.now) {
            burst += 1;
            new += usize::from(!seg.retransmit);
            self.log.sends.push((self.now, seg));
            self.enqueue(seg);
        }
        self.log.max_burst = self.log.max_burst.max(burst);
        self.log.max_new_burst = self.log.max_new_burst.max(new);
        self.log.max_outstanding = self.log.max_outstanding.max(self.sender.outstanding());
    }

    fn enqueue(&mut self, seg: TcpSegment) {
        if (self.drop)(self.now, &seg) {
            self.log.forced_drops += 1;
        } else if self.in_service.is_none() {
            self.serve(seg);
        } else if self.queue.len() >= self.limit {
            self.log.queue_drops += 1;
        } else {
            self.queue.push_back(seg);
        }
    }

    fn serve(&mut self, seg: TcpSegment) {
        let bits = u64::from(seg.payload + TCP_HEADER) * 8;
        let nanos = bits * 1_000_000_000 / self.rate_bps;
        self.in_service = Some((self.now + Duration::from_nanos(nanos), seg));
    }
}

/// Data packets of `packet_size` payload (plus headers) that fit in `secs` at `rate_bps`.
pub fn link_capacity_packets(rate_bps: u64, secs: f64, packet_size: u32) -> f64 {
    rate_bps as f64 * secs / (f64::from(packet_size + TCP_HEADER) * 8.0)
}
