//! TCP endpoints as nodes: an FTP sender over [`NewRenoSender`] and a receiver over
//! [`TcpSink`]. ACKs are processed one at a time, each followed by whatever the window then
//! allows, as ns-2 does (so `max_burst` limits packets per ACK).

use std::collections::VecDeque;
use std::time::Duration;

use plait_proto::Time;

use super::Outbox;
use super::delivery_log::{ReceiveLog, SendLog};
use crate::packet::{Body, FlowId, Packet, TCP_HEADER, TcpAck, TcpSegment};
use crate::tcp::{NewRenoSender, TcpConfig, TcpSink};

/// An FTP application over NewReno, sending on `flow` from `start`.
#[derive(Debug)]
pub struct TcpSender {
    tcp: NewRenoSender,
    flow: FlowId,
    start: Time,
    started: bool,
    acks: VecDeque<TcpAck>,
    /// A streaming application's packet interval (`None`: FTP, always data to send).
    app_interval: Option<Duration>,
    /// When the streaming application hands over its next packet.
    next_produce: Time,
    /// Per-packet send times (seed MMS Fig. 4-6's delay and gaps, [`crate::handover`]).
    pub log: SendLog,
}

impl TcpSender {
    /// A sender for `flow` that starts at `start`.
    pub fn new(config: TcpConfig, flow: FlowId, start: Time) -> TcpSender {
        TcpSender {
            tcp: NewRenoSender::new(config),
            flow,
            start,
            started: false,
            acks: VecDeque::new(),
            app_interval: None,
            next_produce: start,
            log: SendLog::default(),
        }
    }

    /// The application streams one packet every `interval` from the start instead of
    /// always having data (seed MMS §III-B's "streaming application using TCP").
    pub fn streaming(mut self, interval: Duration) -> TcpSender {
        self.app_interval = Some(interval.max(Duration::from_nanos(1)));
        self
    }

    /// The TCP state machine (statistics).
    pub fn tcp(&self) -> &NewRenoSender {
        &self.tcp
    }

    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        if let Body::TcpAck(ack) = pkt.body {
            self.acks.push_back(ack);
        }
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        if !self.started {
            if now < self.start {
                return;
            }
            match self.app_interval {
                Some(_) => self.tcp.start_app_limited(now),
                None => self.tcp.start(now),
            }
            self.started = true;
        }
        if let Some(interval) = self.app_interval {
            while self.next_produce <= now {
                self.tcp.produce(now, 1);
                self.next_produce += interval;
            }
        }
        if self.tcp.next_timeout().is_some_and(|t| t <= now) {
            let before = self.tcp.stats().timeouts;
            self.tcp.on_timeout(now);
            if self.tcp.stats().timeouts > before {
                self.log.timeouts.push(now);
            }
        }
        self.send(now, out);
        while let Some(ack) = self.acks.pop_front() {
            self.tcp.on_ack(now, &ack);
            self.send(now, out);
        }
    }

    fn send(&mut self, now: Time, out: &mut Outbox) {
        while let Some(seg) = self.tcp.poll_send(now) {
            self.log.note_sent(seg.seq, seg.retransmit, now);
            out.send(data_packet(self.flow, seg));
        }
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        if !self.started {
            return Some(self.start);
        }
        let produce = self.app_interval.map(|_| self.next_produce);
        match (self.tcp.next_timeout(), produce) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

fn data_packet(flow: FlowId, seg: TcpSegment) -> Packet {
    Packet {
        flow,
        size: seg.payload + TCP_HEADER,
        body: Body::Tcp(seg),
    }
}

/// A TCP sink answering on `ack_flow`; counts received bytes per time bin.
#[derive(Debug)]
pub struct TcpReceiver {
    sink: TcpSink,
    ack_flow: FlowId,
    segments: VecDeque<TcpSegment>,
    bin: Duration,
    /// Payload bytes received per bin (throughput at the receiver over time).
    pub bins: Vec<u64>,
    /// Per-packet arrival and in-order delivery times ([`crate::handover`]).
    pub log: ReceiveLog,
}

impl TcpReceiver {
    /// A sink acknowledging on `ack_flow`; `delayed_ack` as ns-2's DelAck; `bin` for the
    /// throughput series.
    pub fn new(ack_flow: FlowId, delayed_ack: Option<Duration>, bin: Duration) -> TcpReceiver {
        TcpReceiver {
            sink: TcpSink::new(delayed_ack),
            ack_flow,
            segments: VecDeque::new(),
            bin,
            bins: Vec::new(),
            log: ReceiveLog::default(),
        }
    }

    /// The sink (statistics).
    pub fn sink(&self) -> &TcpSink {
        &self.sink
    }

    pub(crate) fn on_receive(&mut self, now: Time, pkt: Packet) {
        if let Body::Tcp(seg) = pkt.body {
            let i = (now.as_nanos() / self.bin.as_nanos().max(1) as u64) as usize;
            if self.bins.len() <= i {
                self.bins.resize(i + 1, 0);
            }
            self.bins[i] += u64::from(seg.payload);
            self.segments.push_back(seg);
        }
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        if self.sink.next_timeout().is_some_and(|t| t <= now) {
            self.sink.on_timeout(now);
        }
        while let Some(seg) = self.segments.pop_front() {
            self.log.note_arrival(seg.seq, now);
            self.sink.on_segment(now, &seg);
            self.log.note_in_order(self.sink.next_expected(), now);
            self.send_acks(now, out);
        }
        self.send_acks(now, out);
    }

    fn send_acks(&mut self, now: Time, out: &mut Outbox) {
        while let Some(ack) = self.sink.poll_ack(now) {
            out.send(Packet {
                flow: self.ack_flow,
                size: TCP_HEADER,
                body: Body::TcpAck(ack),
            });
        }
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        self.sink.next_timeout()
    }
}
