//! The `hmtp` mode's sender and receiver as nodes: the sender sits at the proxy with an
//! infinite FTP source, the receiver at the mobile host, as the `cmt-sctp` baseline's ends
//! do, with one data flow and one ACK flow per path.
//!
//! On the wire: a data packet is `packet_size` payload bytes plus the 40-byte TCP/IP
//! header (the 8-byte fountain header, chunk id and symbol id, is counted inside the
//! payload); an ACK is 40 bytes, plus 4 per SACK gap block, plus a 12-byte chunk report.
//!
//! Invariant: ACKs are processed one at a time, each followed by what it allows, as the
//! TCP and CMT-SCTP-like senders do.

use std::collections::VecDeque;
use std::time::Duration;

use plait_proto::Time;

use super::{HmtpConfig, HmtpReceiverCore, HmtpSenderCore, Outbox};
use crate::packet::{Body, FlowId, HmtpAck, HmtpData, HmtpFeedback, Packet, TCP_HEADER};
use crate::tcp::TcpConfig;

/// Bytes of a chunk report on top of an ACK's 40.
pub const REPORT_BYTES: u32 = 12;

/// An ACK's size on the wire: 40 bytes, 4 per SACK gap block (as the baseline's SACKs),
/// and the report.
fn ack_size(ack: &HmtpAck) -> u32 {
    let gaps = match &ack.feedback {
        HmtpFeedback::Tcp(_) => 0,
        HmtpFeedback::Sack(s) => 4 * s.gaps.len() as u32,
    };
    TCP_HEADER
        + gaps
        + if ack.report.is_some() {
            REPORT_BYTES
        } else {
            0
        }
}

/// The HMTP sender as a node.
#[derive(Debug)]
pub struct HmtpSender {
    core: HmtpSenderCore,
    flows: Vec<FlowId>,
    start: Time,
    started: bool,
    acks: VecDeque<HmtpAck>,
}

impl HmtpSender {
    /// A sender putting path `i`'s packets on `flows[i]` from `start`.
    pub fn new(cfg: HmtpConfig, tcp: &TcpConfig, flows: Vec<FlowId>, start: Time) -> HmtpSender {
        HmtpSender {
            core: HmtpSenderCore::new(cfg, tcp),
            flows,
            start,
            started: false,
            acks: VecDeque::new(),
        }
    }

    /// The state machine (statistics).
    pub fn core(&self) -> &HmtpSenderCore {
        &self.core
    }

    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        if let Body::HmtpAck(ack) = pkt.body {
            self.acks.push_back(ack);
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
        self.flush(out);
        while let Some(ack) = self.acks.pop_front() {
            self.core.on_ack(now, &ack);
            self.flush(out);
        }
    }

    fn flush(&mut self, out: &mut Outbox) {
        while let Some(data) = self.core.poll_send() {
            let Some(&flow) = self.flows.get(usize::from(data.path)) else {
                continue;
            };
            out.send(Packet {
                flow,
                size: data.seg.payload + TCP_HEADER,
                body: Body::HmtpData(data),
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

/// The HMTP receiver as a node: ACKs path `i`'s data on `ack_flows[i]`; counts decoded
/// payload (k x `packet_size` bytes per chunk) per time bin.
#[derive(Debug)]
pub struct HmtpReceiver {
    core: HmtpReceiverCore,
    ack_flows: Vec<FlowId>,
    chunk_bytes: u64,
    inbox: VecDeque<HmtpData>,
    bin: Duration,
    /// Payload bytes of decoded chunks per bin (goodput over time).
    pub bins: Vec<u64>,
}

impl HmtpReceiver {
    /// A receiver answering on `ack_flows`, binning goodput every `bin`.
    pub fn new(cfg: HmtpConfig, ack_flows: Vec<FlowId>, bin: Duration) -> HmtpReceiver {
        HmtpReceiver {
            chunk_bytes: cfg.k as u64 * u64::from(cfg.packet_size),
            core: HmtpReceiverCore::new(cfg),
            ack_flows,
            inbox: VecDeque::new(),
            bin,
            bins: Vec::new(),
        }
    }

    /// The state machine (statistics).
    pub fn core(&self) -> &HmtpReceiverCore {
        &self.core
    }

    /// Payload bytes of one decoded chunk.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }

    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        if let Body::HmtpData(d) = pkt.body {
            self.inbox.push_back(d);
        }
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        while let Some(d) = self.inbox.pop_front() {
            let decoded = self.core.on_data(now, &d);
            if decoded > 0 {
                let i = (now.as_nanos() / self.bin.as_nanos().max(1) as u64) as usize;
                if self.bins.len() <= i {
                    self.bins.resize(i + 1, 0);
                }
                self.bins[i] += decoded * self.chunk_bytes;
            }
            while let Some(ack) = self.core.poll_ack() {
                let Some(&flow) = self.ack_flows.get(usize::from(ack.path)) else {
                    continue;
                };
                out.send(Packet {
                    flow,
                    size: ack_size(&ack),
                    body: Body::HmtpAck(ack),
                });
            }
        }
    }
}
