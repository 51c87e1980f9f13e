//! The wire codec: the datagram header and frames, as specified in docs/protocol.md.
//!
//! Decoding gives checked views that borrow the datagram ([`Header::decode`], [`frames`],
//! [`validate`], [`Frame`], [`AckFrame`]); encoding writes plain representations
//! ([`DataRepr`], [`AckRepr`], …) through a bounded [`Writer`] over the caller's buffer.
//!
//! Invariants of the whole module:
//! - nothing from the network panics it: every malformed input is a [`DecodeError`];
//! - neither direction allocates: views borrow the datagram, the writer the caller's buffer;
//! - the encoder never writes what the decoder rejects, and a failed encode leaves the
//!   writer's length unchanged;
//! - a frame is yielded only once fully checked, so the session may act on it; the session
//!   runs [`validate`] first, so a malformed datagram has no effect at all.
//!
//! Building a datagram: [`Header::write_to`], then frames; a frame that runs to the end
//! (PADDING, DATA with `to_end`) must be the last one.
//!
//! ```
//! use plait_proto::ids::PathId;
//! use plait_proto::wire::{self, DataRepr, Frame, Header, Writer};
//!
//! let mut buf = [0u8; 1500];
//! let mut w = Writer::new(&mut buf);
//! let header = Header { path: PathId(1), path_seq: 42, timestamp_us: 1_000 };
//! header.write_to(&mut w).unwrap();
//! DataRepr { global_seq: 9, prev_delta: 2, payload: b"ip packet", to_end: true }
//!     .encode(&mut w)
//!     .unwrap();
//! assert_eq!(w.len(), wire::DATA_OVERHEAD + 9);
//!
//! let (h, payload) = Header::decode(w.written()).unwrap();
//! assert_eq!(h, header);
//! assert_eq!(wire::validate(payload), Ok(1));
//! for frame in wire::frames(payload) {
//!     let Frame::Data(data) = frame.unwrap() else { unreachable!() };
//!     assert_eq!((data.global_seq, data.prev_delta, data.payload), (9, 2, &b"ip packet"[..]));
//! }
//! ```

mod ack;
mod ack_repr;
mod decode;
mod error;
mod fec_repair;
mod frame;
mod header;
mod reader;
mod repair_request;
mod repr;
mod stream;
mod varint;
mod writer;

#[cfg(test)]
mod tests;

pub use ack::{AckFrame, AckRanges, AckTimestamps};
pub use ack_repr::AckRepr;
pub use decode::{Frames, frames, validate};
pub use error::{DecodeError, EncodeError};
pub use fec_repair::{
    FEC_FIELDS_LEN, FEC_SPAN, FecRepairRepr, MAX_FEC_PARTS, MAX_FEC_REPAIR, MAX_FEC_SYMBOL,
    max_fec_part_symbol, parse_fec_repair, parse_fec_repair_part,
};
pub use frame::{CloseFrame, DataFrame, Frame, ProbeAckFrame, ProbeFrame};
pub use header::{CLEAR_PREFIX_LEN, HEADER_LEN, Header, VERSION};
pub use repair_request::{MAX_REPAIR_SEQS, RepairRequestRepr, parse_repair_request};
pub use repr::{CloseRepr, DataRepr, ExtensionRepr, ProbeAckRepr, ProbeRepr, encode_padding};
pub use stream::{
    MAX_STREAM_OFFSET, MaxStreamDataFrame, ResetStreamFrame, STREAM_FIN, STREAM_LEN,
    StreamControlRepr, StreamFrame, StreamRepr,
};
pub use varint::{VARINT_MAX, varint_len, zigzag_decode, zigzag_encode};
pub use writer::Writer;

/// Per-packet overhead of plait's engine datagram in the common case: the header plus a
/// DATA frame running to the end with a 1-byte `prev_delta` (9 + 1 + 4 + 1 bytes;
/// docs/protocol.md#overhead). The tunnel's encryption envelope and IP/UDP come on top.
pub const DATA_OVERHEAD: usize = HEADER_LEN + 1 + 4 + 1;

/// Largest DATA `prev_delta` (2^31).
pub const MAX_PREV_DELTA: u64 = 1 << 31;

/// ACK offsets (ranges and timestamps) must stay strictly below this many sequence numbers
/// under `largest` (2^31), so 32-bit truncated numbers stay unambiguous.
pub const MAX_SEQ_SPAN: u64 = 1 << 31;

/// Most gap/length pairs an ACK carries after its first range (its `range_count`), so an
/// ACK holds at most 257 ranges.
pub const MAX_ACK_RANGES: usize = 256;

/// Most receive timestamps an ACK carries (its `ts_count`).
pub const MAX_ACK_TIMESTAMPS: usize = 256;

/// Longest CLOSE reason, bytes.
pub const MAX_CLOSE_REASON: usize = 1024;

/// Frame type bytes (docs/protocol.md#frames).
pub mod frame_type {
    /// PADDING: the rest of the datagram.
    pub const PADDING: u8 = 0x00;
    /// DATA whose payload runs to the end of the datagram.
    pub const DATA_TO_END: u8 = 0x01;
    /// DATA with an explicit payload length.
    pub const DATA_LEN: u8 = 0x02;
    /// ACK.
    pub const ACK: u8 = 0x03;
    /// PROBE.
    pub const PROBE: u8 = 0x04;
    /// PROBE_ACK.
    pub const PROBE_ACK: u8 = 0x05;
    /// CLOSE.
    pub const CLOSE: u8 = 0x06;
    /// STREAM: bytes of a reliable stream (docs/protocol.md#stream-frame).
    pub const STREAM: u8 = 0x07;
    /// RESET_STREAM: a stream aborted.
    pub const RESET_STREAM: u8 = 0x08;
    /// MAX_DATA: session-wide stream flow-control limit.
    pub const MAX_DATA: u8 = 0x09;
    /// MAX_STREAM_DATA: one stream's flow-control limit.
    pub const MAX_STREAM_DATA: u8 = 0x0a;
    /// MAX_STREAMS: how many streams the peer may open.
    pub const MAX_STREAMS: u8 = 0x0b;
    /// First extension frame type.
    pub const EXTENSION_FIRST: u8 = 0x10;
    /// Last extension frame type.
    pub const EXTENSION_LAST: u8 = 0x3f;
    /// Reserved extension: register an address (a later issue).
    pub const ADDR_REGISTER: u8 = 0x10;
    /// Reserved extension: a path's address binding changed (a later issue).
    pub const BINDING_UPDATE: u8 = 0x11;
    /// REPAIR_REQUEST: global sequence numbers the receiver asks to be sent again
    /// (docs/protocol.md#repair).
    pub const REPAIR_REQUEST: u8 = 0x12;
    /// UNORDERED (empty body): the DATA frame after it in the datagram may be delivered
    /// out of the global order (docs/protocol.md#unordered).
    pub const UNORDERED: u8 = 0x13;
    /// FEC_REPAIR: a repair symbol of a block of inner packets (docs/protocol.md#fec).
    pub const FEC_REPAIR: u8 = 0x14;
    /// FEC_REPAIR_PART: a repair symbol of one piece of a block whose whole symbols would
    /// not fit a datagram (docs/protocol.md#fec).
    pub const FEC_REPAIR_PART: u8 = 0x15;
    /// ACK_SOON (empty body): the sender of this datagram asks its receiver to acknowledge
    /// the path's datagrams promptly (docs/protocol.md#ack-soon).
    pub const ACK_SOON: u8 = 0x16;

    /// Whether `t` is in the extension range (length-prefixed, skippable).
    pub const fn is_extension(t: u8) -> bool {
        t >= EXTENSION_FIRST && t <= EXTENSION_LAST
    }
}
