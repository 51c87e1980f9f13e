//! The decoded frame views: the [`Frame`] enum and the simple frames' structs
//! (docs/protocol.md#frames). Decoding them is `decode.rs`'s job; the ACK's view is `ack.rs`.
//!
//! Invariants: every view borrows the datagram (no copy, no allocation) and is only ever
//! built from fully checked bytes, so its fields are within the limits of the specification.

use std::fmt;

use super::ack::AckFrame;
use super::stream::{MaxStreamDataFrame, ResetStreamFrame, StreamFrame};
use crate::ids::PathId;

/// One decoded frame, borrowing the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Frame<'a> {
    /// PADDING (0x00): the rest of the datagram is padding.
    Padding,
    /// DATA (0x01 to the end, or 0x02 with a length): one inner packet.
    Data(DataFrame<'a>),
    /// ACK (0x03): received ranges and receive timestamps of one path.
    Ack(AckFrame<'a>),
    /// PROBE (0x04): liveness or packet-pair probe.
    Probe(ProbeFrame),
    /// PROBE_ACK (0x05): the answer to a PROBE.
    ProbeAck(ProbeAckFrame),
    /// CLOSE (0x06): the peer closes the session.
    Close(CloseFrame<'a>),
    /// STREAM (0x07): bytes of a reliable stream.
    Stream(StreamFrame<'a>),
    /// RESET_STREAM (0x08): a stream aborted in both directions.
    ResetStream(ResetStreamFrame),
    /// MAX_DATA (0x09): the session-wide stream flow-control limit.
    MaxData(u64),
    /// MAX_STREAM_DATA (0x0a): one stream's flow-control limit.
    MaxStreamData(MaxStreamDataFrame),
    /// MAX_STREAMS (0x0b): how many streams the peer may open in all.
    MaxStreams(u64),
    /// An extension frame (0x10..=0x3F) this build may not understand; sessions skip
    /// the types they do not know.
    Extension {
        /// The type byte.
        frame_type: u8,
        /// The body (after the length).
        body: &'a [u8],
    },
}

impl Frame<'_> {
    /// Whether receiving this frame obliges the receiver to acknowledge the datagram
    /// (all but PADDING, ACK and PROBE_ACK).
    pub fn is_ack_eliciting(&self) -> bool {
        match self {
            Frame::Data(_)
            | Frame::Probe(_)
            | Frame::Close(_)
            | Frame::Stream(_)
            | Frame::ResetStream(_)
            | Frame::MaxData(_)
            | Frame::MaxStreamData(_)
            | Frame::MaxStreams(_)
            | Frame::Extension { .. } => true,
            Frame::Padding | Frame::Ack(_) | Frame::ProbeAck(_) => false,
        }
    }
}

/// A DATA frame (docs/protocol.md#data-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataFrame<'a> {
    /// Global sequence number of the inner packet, truncated to 32 bits.
    pub global_seq: u32,
    /// `global_seq` minus that of the previous DATA the sender put on the same path;
    /// 0: none (or unknown). At most 2^31.
    pub prev_delta: u64,
    /// The inner packet (may be empty).
    pub payload: &'a [u8],
}

/// A PROBE frame (docs/protocol.md#probe-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProbeFrame {
    /// Identifies the probe; echoed in the PROBE_ACK.
    pub probe_id: u32,
}

/// A PROBE_ACK frame (docs/protocol.md#probe-ack-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProbeAckFrame {
    /// The probe answered.
    pub probe_id: u32,
    /// The path the probe arrived on.
    pub path: PathId,
    /// Receiver clock (µs, wrapping) when the probe arrived.
    pub recv_ts_us: u32,
}

/// A CLOSE frame (docs/protocol.md#close-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CloseFrame<'a> {
    /// Why the session closes (0: no error).
    pub error_code: u64,
    /// Reason, opaque bytes (at most 1024); `Display` shows it lossily as UTF-8.
    pub reason: &'a [u8],
}

impl fmt::Display for CloseFrame<'_> {
    /// `code N: reason`, invalid UTF-8 shown as U+FFFD, without allocating.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "code {}: ", self.error_code)?;
        for chunk in self.reason.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{fffd}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frames;

    #[test]
    fn ack_eliciting_frames() {
        let data = Frame::Data(DataFrame {
            global_seq: 0,
            prev_delta: 0,
            payload: b"",
        });
        let close = Frame::Close(CloseFrame {
            error_code: 0,
            reason: b"",
        });
        let ext = Frame::Extension {
            frame_type: 0x10,
            body: b"",
        };
        for f in [data, Frame::Probe(ProbeFrame { probe_id: 0 }), close, ext] {
            assert!(f.is_ack_eliciting(), "{f:?}");
        }
        let pa = ProbeAckFrame {
            probe_id: 0,
            path: PathId(0),
            recv_ts_us: 0,
        };
        for f in [Frame::Padding, Frame::ProbeAck(pa)] {
            assert!(!f.is_ack_eliciting(), "{f:?}");
        }
        let ack = [0x03, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(!frames(&ack).next().unwrap().unwrap().is_ack_eliciting());
    }

    #[test]
    fn close_reason_displays_lossily() {
        let close = CloseFrame {
            error_code: 3,
            reason: b"idle \xff timeout",
        };
        assert_eq!(close.to_string(), "code 3: idle \u{fffd} timeout");
    }
}
