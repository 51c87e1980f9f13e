//! The application's side of the streams: open, write, finish, read, reset
//! (docs/protocol.md#streams). Each call moves bytes in or out of the stream table; what
//! goes on the wire is built by `poll_transmit` (`stream_transmit.rs`), so the driver
//! calls `drive` after these as after any input.

use std::time::Duration;

use super::{Lifecycle, Session};
use crate::stream::{FlowControlView, PathRtts, StreamError, StreamId, StreamRead, StreamStats};
use crate::time::Time;

/// RTT assumed for window auto-tuning before any path has one.
const DEFAULT_TUNING_RTT: Duration = Duration::from_millis(100);

impl Session {
    fn open_for_streams(&self) -> Result<(), StreamError> {
        match self.lifecycle {
            Lifecycle::Open => Ok(()),
            _ => Err(StreamError::Closed),
        }
    }

    /// Opens a stream to the peer; `request` (at most 1024 bytes, opaque to the engine,
    /// e.g. a TCP connection's original destination) reaches the peer in its
    /// [`crate::StreamEvent::Opened`] before any of the stream's bytes.
    pub fn open_stream(&mut self, now: Time, request: &[u8]) -> Result<StreamId, StreamError> {
        self.advance(now);
        self.open_for_streams()?;
        self.streams.open(request)
    }

    /// Writes to a stream as much of `data` as its buffers take; returns how much.
    /// Fewer bytes than given (even 0) means the buffers are full (the hard bounds, or the
    /// send-buffer target [`Session::stream_send_target`]): a
    /// [`crate::StreamEvent::Writable`] follows when acknowledgements free room or the
    /// paths' windows grow.
    pub fn stream_write(
        &mut self,
        now: Time,
        id: StreamId,
        data: &[u8],
    ) -> Result<usize, StreamError> {
        self.advance(now);
        self.open_for_streams()?;
        self.streams.write(id, data)
    }

    /// Ends this end's direction of a stream after what was written (the peer reads to
    /// the end, then `fin`).
    pub fn stream_finish(&mut self, now: Time, id: StreamId) -> Result<(), StreamError> {
        self.advance(now);
        self.open_for_streams()?;
        self.streams.finish(id)
    }

    /// Aborts a stream in both directions with an application error `code`.
    pub fn stream_reset(&mut self, now: Time, id: StreamId, code: u64) -> Result<(), StreamError> {
        self.advance(now);
        self.open_for_streams()?;
        self.streams.reset(id, code)
    }

    /// Reads a stream's next in-order bytes into `buf`. `len == 0` without `fin`: nothing
    /// to read now (a [`crate::StreamEvent::Readable`] follows when there is).
    pub fn stream_read(
        &mut self,
        now: Time,
        id: StreamId,
        buf: &mut [u8],
    ) -> Result<StreamRead, StreamError> {
        self.advance(now);
        let srtts = || {
            self.paths
                .iter()
                .flatten()
                .filter(|s| s.tx.state().is_usable())
                .filter_map(|s| s.tx.rtt().srtt())
        };
        let rtts = PathRtts {
            shortest: srtts().min().unwrap_or(DEFAULT_TUNING_RTT),
            longest: srtts().max().unwrap_or(DEFAULT_TUNING_RTT),
        };
        self.streams.read(self.now, id, buf, rtts)
    }

    /// The stream layer's counters.
    pub fn stream_stats(&self) -> StreamStats {
        self.streams.stats()
    }

    /// The streams' flow-control state now (docs/protocol.md#stream-flow-control).
    pub fn stream_flow_control(&self) -> FlowControlView {
        self.streams.flow_control()
    }

    /// Bytes the streams hold: (written and unacknowledged, arrived and unread).
    pub fn stream_buffered(&self) -> (u64, u64) {
        self.streams.buffered()
    }

    /// The streams' send-buffer target now: written, unacknowledged bytes beyond which
    /// [`Session::stream_write`] takes no more (eight times the usable paths' windows, at least
    /// [`super::MIN_SEND_TARGET`]; the hard bounds of [`crate::StreamLimits`] apply on top;
    /// docs/protocol.md#stream-flow-control).
    pub fn stream_send_target(&self) -> u64 {
        self.streams.send_target()
    }
}
