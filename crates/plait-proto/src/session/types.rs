//! What a session hands its driver: transmits, deliveries, events, errors and counters.

use std::time::Duration;

use thiserror::Error;

use crate::ids::{GlobalSeq, PathId};
use crate::path::PathState;
use crate::stream::StreamEvent;
use crate::wire::DecodeError;

/// A datagram written into the caller's buffer by `poll_transmit`, to send on `path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The path (link / UDP socket) to send it on.
    pub path: PathId,
    /// Its length in the caller's buffer.
    pub len: usize,
}

/// An inner packet written into the caller's buffer by `poll_delivery`, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Its length in the caller's buffer.
    pub len: usize,
    /// Its global sequence number.
    pub global_seq: GlobalSeq,
    /// How long the reorder buffer held it.
    pub held_for: Duration,
    /// It came after its sequence number had been given up as lost (out of order).
    pub late: bool,
}

/// Something a driver may want to log or act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A path changed state (docs/protocol.md#path-states).
    PathState {
        /// Which path.
        path: PathId,
        /// Its previous state.
        from: PathState,
        /// Its new state.
        to: PathState,
    },
    /// The session closed: by this side's [`crate::Session::close`] or the peer's CLOSE.
    Closed {
        /// Whether the peer closed it.
        by_peer: bool,
        /// The application error code.
        code: u64,
        /// The reason, lossily decoded as UTF-8.
        reason: String,
    },
    /// Something happened to a stream (docs/protocol.md#streams).
    Stream(StreamEvent),
    /// A path was handed over (`reason`: why) or handed back (`None`)
    /// (docs/protocol.md#handover).
    Handover {
        /// Which path.
        path: PathId,
        /// Why it stands by now; `None`: it carries again.
        reason: Option<crate::path::HandoverReason>,
    },
}

/// Why an inner packet was not accepted. The packet is dropped; the session goes on.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// Larger than the configured datagram size allows.
    #[error("inner packet of {len} bytes exceeds the {max}-byte limit of this session")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The largest inner packet the session carries.
        max: usize,
    },
    /// The send queue is full (no path can take more right now) and this packet's own flow
    /// was the one to shorten (docs/protocol.md#send-queue).
    #[error("send queue full: inner packet dropped")]
    QueueFull,
    /// The session is closed.
    #[error("session closed")]
    Closed,
}

/// Why a datagram was ignored. It had no effect at all on the session.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum RecvError {
    /// It did not decode.
    #[error("malformed datagram: {0}")]
    Decode(#[from] DecodeError),
    /// Its header's path id differs from the path the driver received it on.
    #[error("datagram says {header} but arrived on {arrived}")]
    PathMismatch {
        /// Path id in the header.
        header: PathId,
        /// Path the driver named.
        arrived: PathId,
    },
    /// The path is not part of this session.
    #[error("{0} is not a path of this session")]
    UnknownPath(PathId),
    /// Its path sequence number was already received.
    #[error("duplicate datagram on {0}")]
    Duplicate(PathId),
    /// The session is closed.
    #[error("session closed")]
    Closed,
}

/// Why a path command failed.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// Path ids run from 0 to `MAX_PATHS - 1`.
    #[error("{0} is out of range: path ids are 0..{max}", max = crate::ids::MAX_PATHS)]
    OutOfRange(PathId),
    /// Already added.
    #[error("{0} already exists")]
    Exists(PathId),
    /// Not a path of this session.
    #[error("{0} is not a path of this session")]
    Unknown(PathId),
}

/// How much the session's bounded structures hold now (entries, not capacity): what a
/// long run watches to see memory stay flat. Each has a hard bound of its own; this only
/// reports. Per-path figures are the largest over the paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Inner packets in the send queue.
    pub send_queue_packets: usize,
    /// Their bytes.
    pub send_queue_bytes: usize,
    /// Packets held by the reorder buffer.
    pub reorder_packets: usize,
    /// Their bytes.
    pub reorder_bytes: usize,
    /// Unresolved datagrams in a path's sent log (largest over the paths).
    pub sent_log: usize,
    /// Datagrams in a path's send history (largest over the paths).
    pub send_history: usize,
    /// Fates of reliable datagrams not yet collected (largest over the paths).
    pub resolved: usize,
    /// Received ranges a path's ACK tracker holds (largest over the paths).
    pub ack_ranges: usize,
    /// Receive timestamps waiting for a path's next ACK (largest over the paths).
    pub ack_timestamps: usize,
    /// Inner packets kept for repair, their bytes, and repairs queued.
    pub repair_store: (usize, usize, usize),
    /// Repair requests waiting to go to the peer.
    pub repair_requests: usize,
    /// PROBE_ACKs waiting to go.
    pub probe_acks: usize,
    /// Events not yet polled.
    pub events: usize,
    /// UNORDERED packets waiting for delivery, and their stand-ins in the reorder buffer.
    pub express: (usize, usize),
    /// Open streams.
    pub streams_open: u64,
    /// Stream bytes held: written and unacknowledged, arrived and unread.
    pub stream_bytes: (u64, u64),
    /// FEC: repair symbols waiting to be sent; the receiver's payload bytes (sources and
    /// symbols) and blocks tracked (docs/protocol.md#fec).
    pub fec: (usize, usize, usize),
}

/// Session-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Inner packets accepted into the send queue. Each is later sent, or dropped and
    /// counted in exactly one of `inner_stale`, `inner_codel_dropped` and
    /// `inner_overflow_dropped`, or still queued.
    pub inner_accepted: u64,
    /// Inner packets refused: too large.
    pub inner_too_large: u64,
    /// Inner packets refused: the send queue was full and the packet's own flow was the one
    /// to shorten (docs/protocol.md#send-queue).
    pub inner_queue_full: u64,
    /// Queued inner packets dropped from the head of the flow with the largest backlog to
    /// make room for a new one (RFC 8290 §4.1).
    pub inner_overflow_dropped: u64,
    /// Queued inner packets CoDel dropped (RFC 8289).
    pub inner_codel_dropped: u64,
    /// Queued inner packets CoDel marked Congestion Experienced instead (RFC 3168).
    pub inner_ce_marked: u64,
    /// Inner packets dropped after waiting longer than `max_queue_delay`.
    pub inner_stale: u64,
    /// Inner packets sent (first copy).
    pub inner_sent: u64,
    /// Extra copies sent by a `Duplicate` selection.
    pub inner_copies: u64,
    /// Datagrams received and processed.
    pub datagrams_received: u64,
    /// Datagrams ignored (any [`RecvError`]).
    pub datagrams_rejected: u64,
    /// DATA frames received that were duplicates (redundant copies, replays).
    pub data_duplicates: u64,
    /// DATA frames too old for the duplicate filter to judge, dropped.
    pub data_too_old: u64,
    /// Inner packets delivered.
    pub delivered: u64,
    /// Of `delivered`, those delivered at once, out of the global order (UNORDERED,
    /// docs/protocol.md#unordered).
    pub delivered_unordered: u64,
    /// Inner packets sent marked UNORDERED (their flow was sparse).
    pub inner_unordered: u64,
    /// Times the send queue's head did not go on the path the scheduler chose, because that
    /// path's base delay is more than `send_queue_interval` behind the best path's: it went
    /// on a nearer path or waited for the best one (docs/protocol.md#packet-pacing).
    pub inner_spills_refused: u64,
    /// Extension frames skipped.
    pub extensions_skipped: u64,
    /// Events dropped because the driver did not drain them.
    pub events_dropped: u64,
    /// Repair requests sent to the peer (docs/protocol.md#repair).
    pub repair_requests_sent: u64,
    /// Repairs the peer asked for that were still kept and queued.
    pub repairs_queued: u64,
    /// Repairs the peer asked for that were no longer kept, or already sent once.
    pub repairs_unavailable: u64,
    /// Inner packets sent a second time as repairs.
    pub repairs_sent: u64,
    /// Inner packets queued for repair because the path that carried them went down
    /// (docs/protocol.md#repair), without a request.
    pub repairs_on_down: u64,
    /// Inner packets queued for repair because the path that carried them was removed
    /// while they were in flight (docs/protocol.md#repair, "a path removed").
    pub repairs_on_removal: u64,
    /// Times the peer broke the stream rules (each closes the session).
    pub stream_violations: u64,
    /// FEC blocks closed with at least one repair symbol (docs/protocol.md#fec).
    pub fec_blocks: u64,
    /// FEC repair symbols sent.
    pub fec_symbols_sent: u64,
    /// FEC repair symbols dropped unsent (too many waiting, no usable path, or too old).
    pub fec_symbols_dropped: u64,
    /// Of those, symbols too old to be of use (docs/protocol.md#fec, "When and where
    /// symbols go").
    pub fec_symbols_expired: u64,
    /// FEC repair symbols received and kept.
    pub fec_symbols_received: u64,
    /// FEC repair frames refused: malformed, inconsistent with their block, out of the
    /// window, or repeated.
    pub fec_symbols_refused: u64,
    /// Inner packets rebuilt from FEC repair symbols and handed to the reorder buffer
    /// (fresh: not a duplicate of a copy that had arrived).
    pub fec_recovered: u64,
    /// FEC blocks forgotten with a packet missing that their symbols could not rebuild.
    pub fec_unrecovered: u64,
    /// Times a path was handed over for its quality (docs/protocol.md#handover).
    pub handovers: u64,
}
