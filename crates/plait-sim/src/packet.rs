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

/// Seed HMTP's fountain feedback (§III-A steps 7 and 8): how many encoded symbols of one
/// chunk the receiver has, and whether its decoder has recovered the chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkReport {
    /// The chunk.
    pub chunk: u32,
    /// Distinct encoded symbols of it received so far (all paths).
    pub received: u32,
    /// The decoder's verdict: all k source symbols recovered.
    pub decoded: bool,
}

/// An HMTP data packet (the `hmtp` mode, [`crate::node::HmtpSender`]): one LT-encoded
/// symbol of one chunk in a per-path TCP-like segment (seed HMTP §III-A step 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HmtpData {
    /// The path it was sent on (its segment's sequence space and its ACK's path).
    pub path: u8,
    /// The transport segment: sequence number (the path's SN, or the association's TSN),
    /// payload bytes on the wire, whether its sequence number was sent before.
    pub seg: TcpSegment,
    /// The fountain header's chunk id (seed HMTP §III-A step 3); the symbol id is in
    /// `symbol`. `None` for the transport's SYN.
    pub chunk: Option<u32>,
    /// The LT packet: symbol id then the encoded symbol (plait-fec's format).
    pub symbol: Vec<u8>,
}

/// The transport's part of an HMTP acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HmtpFeedback {
    /// The path's cumulative ACK (per-path TCP transport).
    Tcp(TcpAck),
    /// The association's SACK (CMT-SCTP-like transport).
    Sack(CmtSack),
}

/// An HMTP acknowledgement: the transport's feedback and the fountain layer's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HmtpAck {
    /// The path the acknowledged packet came on (and this ACK goes back on).
    pub path: u8,
    /// The transport's feedback.
    pub feedback: HmtpFeedback,
    /// The report on the chunk of the symbol that triggered this ACK.
    pub report: Option<ChunkReport>,
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
    /// HMTP data (the `hmtp` mode).
    HmtpData(HmtpData),
    /// HMTP acknowledgement and chunk report.
    HmtpAck(HmtpAck),
    /// An unreliable datagram (constant-rate UDP cross traffic): only its size matters.
    Udp,
    /// A numbered datagram of a measured constant-rate UDP flow (mode `plait-cbr`): its
    /// number and when its source sent it, as an RTP header would carry them.
    Datagram {
        /// Sequence number, from 0.
        seq: u64,
        /// When the source sent it, nanoseconds of simulated time.
        sent_ns: u64,
    },
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
