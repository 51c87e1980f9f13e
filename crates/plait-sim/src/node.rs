//! Nodes: the endpoints and gateways that create, consume and tunnel packets.
//!
//! Every node is a small state machine the world drives: `on_receive` takes a packet (and
//! only stores or processes it), `on_wakeup` does the work due at `now` and puts outgoing
//! packets in the [`Outbox`], `next_event` says when to wake it again.

use std::collections::VecDeque;

use plait_proto::Time;

use crate::packet::Packet;
use crate::route::{Hop, Routing};

pub mod app_delay;
mod cbr;
mod cmt_receiver;
mod cmt_sender;
#[cfg(test)]
mod cmt_tests;
mod datagram_sink;
pub mod delivery_log;
mod hmtp_config;
mod hmtp_fountain;
mod hmtp_nodes;
mod hmtp_receiver;
mod hmtp_sender;
#[cfg(test)]
mod hmtp_tests;
mod plait_gateway;
#[cfg(test)]
mod plait_gateway_tests;
mod sink;
mod tcp_nodes;

pub use cbr::{CbrSource, OnOffSource};
pub use cmt_receiver::{CmtReceiver, CmtReceiverCore, CmtReceiverStats};
pub use cmt_sender::{CmtConfig, CmtCore, CmtSender, CmtSenderStats};
pub use datagram_sink::DatagramSink;
pub use hmtp_config::{HmtpConfig, HmtpTransport};
pub use hmtp_fountain::HmtpSenderStats;
pub use hmtp_nodes::{HmtpReceiver, HmtpSender, REPORT_BYTES};
pub use hmtp_receiver::{HmtpReceiverCore, HmtpReceiverStats};
pub use hmtp_sender::HmtpSenderCore;
pub use plait_gateway::{
    Endpoint, GatewayStats, PlaitGateway, StreamApp, TunnelAddresses, connect,
};
pub use sink::CountingSink;
pub use tcp_nodes::{TcpReceiver, TcpSender};

/// Packets a node sends or forwards during one call; the world routes them afterwards.
#[derive(Debug)]
pub struct Outbox {
    items: VecDeque<(Routing, Packet)>,
    /// The node being run (set by the world).
    pub(crate) me: Hop,
}

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            items: VecDeque::new(),
            me: Hop::Node(0),
        }
    }
}

impl Outbox {
    /// Originates `pkt`: it takes the first hop of its flow's route.
    pub fn send(&mut self, pkt: Packet) {
        self.items.push_back((Routing::Start, pkt));
    }

    /// Forwards `pkt`: it takes the hop after this node in its flow's route.
    pub fn forward(&mut self, pkt: Packet) {
        let me = self.me;
        self.items.push_back((Routing::After(me), pkt));
    }

    pub(crate) fn push(&mut self, routing: Routing, pkt: Packet) {
        self.items.push_back((routing, pkt));
    }

    pub(crate) fn pop(&mut self) -> Option<(Routing, Packet)> {
        self.items.pop_front()
    }
}

/// Every kind of node (enum dispatch).
#[derive(Debug)]
pub enum Node {
    /// A TCP sender (FTP application).
    TcpSender(TcpSender),
    /// A TCP sink.
    TcpReceiver(TcpReceiver),
    /// A plait engine between a LAN side and its paths.
    Plait(Box<PlaitGateway>),
    /// Constant-rate UDP.
    Cbr(CbrSource),
    /// Exponential on/off UDP (web-like cross traffic).
    OnOff(OnOffSource),
    /// Counts what arrives.
    Sink(CountingSink),
    /// Counts numbered datagrams and their delays (mode `plait-cbr`).
    DatagramSink(DatagramSink),
    /// The `cmt-sctp` baseline's sender.
    CmtSender(CmtSender),
    /// The `cmt-sctp` baseline's receiver.
    CmtReceiver(CmtReceiver),
    /// The `hmtp` mode's sender (seed HMTP).
    HmtpSender(HmtpSender),
    /// The `hmtp` mode's receiver.
    HmtpReceiver(HmtpReceiver),
}

impl Node {
    /// A packet arrives.
    pub fn on_receive(&mut self, now: Time, pkt: Packet) {
        match self {
            Node::TcpSender(n) => n.on_receive(now, pkt),
            Node::TcpReceiver(n) => n.on_receive(now, pkt),
            Node::Plait(n) => n.on_receive(now, pkt),
            Node::Cbr(_) | Node::OnOff(_) => {}
            Node::Sink(n) => n.on_receive(now, pkt),
            Node::DatagramSink(n) => n.on_receive(now, pkt),
            Node::CmtSender(n) => n.on_receive(now, pkt),
            Node::CmtReceiver(n) => n.on_receive(now, pkt),
            Node::HmtpSender(n) => n.on_receive(now, pkt),
            Node::HmtpReceiver(n) => n.on_receive(now, pkt),
        }
    }

    /// Work due at `now`.
    pub fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        match self {
            Node::TcpSender(n) => n.on_wakeup(now, out),
            Node::TcpReceiver(n) => n.on_wakeup(now, out),
            Node::Plait(n) => n.on_wakeup(now, out),
            Node::Cbr(n) => n.on_wakeup(now, out),
            Node::OnOff(n) => n.on_wakeup(now, out),
            Node::Sink(_) | Node::DatagramSink(_) => {}
            Node::CmtSender(n) => n.on_wakeup(now, out),
            Node::CmtReceiver(n) => n.on_wakeup(now, out),
            Node::HmtpSender(n) => n.on_wakeup(now, out),
            Node::HmtpReceiver(n) => n.on_wakeup(now, out),
        }
    }

    /// When to wake next.
    pub fn next_event(&self) -> Option<Time> {
        match self {
            Node::TcpSender(n) => n.next_event(),
            Node::TcpReceiver(n) => n.next_event(),
            Node::Plait(n) => n.next_event(),
            Node::Cbr(n) => n.next_event(),
            Node::OnOff(n) => n.next_event(),
            Node::Sink(_)
            | Node::DatagramSink(_)
            | Node::CmtReceiver(_)
            | Node::HmtpReceiver(_) => None,
            Node::CmtSender(n) => n.next_event(),
            Node::HmtpSender(n) => n.next_event(),
        }
    }
}
