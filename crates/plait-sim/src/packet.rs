//! The packets that move through the simulated network.
//!
//! A packet is plain data: who it belongs to (`flow`), how many bytes it occupies on a link
//! (`size`, headers included), and what it carries (`body`). Links look only at `flow` and
//! `size`; endpoints look at `body`.

use plait_proto::PathId;

/// Identifies a flow: the unit WFQ shares a link among, and how results are attributed.
pub type FlowId = u32;

/// A TCP data segment (ns-2 style: sequence numbers count packets, not bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSegment {
    /// Packet sequence number, from 0.
    pub seq: u64,
    /// Payload bytes (the packet's `size` adds the 40-byte TCP/IP header).
    pub payload: u32,
    /// A retransmission (counted by the sender; never used for RTT samples, Karn).
    pub retransmit: bool,
}

/// A cumulative TCP acknowledgement (ns-2 `TCPSink`: the next expected packet number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpAck {
    /// Every packet below this has arrived.
    pub next_expected: u64,
    /// The sequence number of the segment that triggered this ACK (ns-2 echoes it).
    pub echo_seq: u64,
}

/// A CMT-SCTP-like data packet: one chunk of `payload` bytes (the `cmt-sctp` baseline,
/// [`crate::node::CmtSender`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmtData {
    /// Transmission sequence number, one space shared by all paths, from 0.
    pub tsn: u64,
    /// The path (destination) it was sent on; the SACK goes back on it.
    pub path: u8,
    /// Payload bytes (the packet's `size` adds [`TCP_HEADER`]).
    pub payload: u32,
    /// A retransmission (never an RTT sample, Karn).
    pub retransmit: bool,
}

/// A CMT-SCTP-like selective acknowledgement (RFC 4960 §3.3.4, in packets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmtSack {
    /// Every TSN below this has arrived (the next expected TSN: SCTP's cumulative TSN ack
    /// plus one).
    pub next_expected: u64,
    /// Gap ack blocks: inclusive absolute TSN ranges above `next_expected` that arrived,
    /// ascending and disjoint.
    pub gaps: Vec<(u64, u64)>,
}

/// What a packet carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// TCP data.
    Tcp(TcpSegment),
    /// A TCP acknowledgement.
    TcpAck(TcpAck),
    /// CMT-SCTP-like data (the `cmt-sctp` baseline).
    CmtData(CmtData),
    /// CMT-SCTP-like selective acknowledgement.
    CmtSack(CmtSack),
    /// An unreliable datagram (constant-rate UDP cross traffic): only its size matters.
    Udp,
    /// A plait datagram on one of the engine's paths (outer IP/UDP headers in `size`).
    Plait {
        /// The engine path it travels on.
        path: PathId,
        /// The engine datagram.
        bytes: Vec<u8>,
    },
}

/// One packet in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Its flow.
    pub flow: FlowId,
    /// Bytes it occupies on a link (what serialisation time and queue limits count).
    pub size: u32,
    /// Its contents.
    pub body: Body,
}

/// TCP/IP header bytes on top of a segment's payload (ns-2's 40).
pub const TCP_HEADER: u32 = 40;
/// Outer IPv4 + UDP header bytes on top of a plait engine datagram.
pub const OUTER_UDP_HEADER: u32 = 28;
