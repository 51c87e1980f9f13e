//! Reliable, flow-controlled byte streams carried over all paths (docs/protocol.md#streams;
//! seed ETOM §IV-B, the multi-homed split connection).
//!
//! [`Streams`] is the session's stream table: it opens streams (with an opaque open
//! request the driver defines, e.g. the original destination of a TCP connection), takes
//! what the application writes, writes STREAM and control frames into datagrams the
//! session builds, and learns from the session which datagrams each path acknowledged or
//! lost. Acknowledgement is per path and per datagram, in any order (ETOM's hACK): acked
//! bytes leave the send buffer at once; lost bytes are sent again on whichever path the
//! session picks then, not necessarily the one that lost them.
//!
//! Invariants:
//! - memory is bounded and stated: per stream, received bytes ≤ its window
//!   ([`StreamLimits::max_stream_window`]) and unacknowledged written bytes ≤
//!   [`StreamLimits::stream_send_buffer`]; per session, received bytes ≤
//!   [`StreamLimits::max_session_window`], written bytes ≤
//!   [`StreamLimits::session_send_buffer`], streams ≤ 2 × [`StreamLimits::max_concurrent`]
//!   (each end's), and the in-flight record holds one entry per unresolved datagram;
//! - receive windows auto-tune inside those hard bounds and never shrink: a window doubles
//!   when it was used up within two loop times, the loop time counting the measured
//!   resequencing delay (`autotune.rs`, docs/protocol.md#window-auto-tuning);
//! - the send buffer is adaptive inside those hard bounds: [`Streams::write`] gives room
//!   only while the stream holds less than `min(stream_send_buffer, target)` and all
//!   streams less than `min(session_send_buffer, target)` written, unacknowledged bytes,
//!   where the session sets `target` ([`Streams::set_send_target`]) to eight times the sum of
//!   its usable paths' congestion windows, at least [`crate::session::MIN_SEND_TARGET`]
//!   (docs/protocol.md#stream-flow-control); a writer refused room is in
//!   `waiting_writers` and hears one `Writable` once both limits leave it room,
//!   whether acknowledgements freed bytes or the target rose;
//! - every byte written is delivered exactly once, in order, per stream; one stream's hole
//!   never holds another;
//! - a peer that breaks the rules gets a [`StreamViolation`] (the session closes), never a
//!   panic; frames for streams already closed are ignored (they are late retransmissions);
//! - a stream is in `sendable_always` iff it is open, not reset by this end, and has lost
//!   bytes, a lost FIN or an unsent FIN to send ([`SendHalf::wants_to_send_without_credit`]);
//!   it is in `sendable_new` iff it is open, not reset by this end, and has written, never
//!   sent bytes within its peer's limit ([`SendHalf::has_new_in_limit`]). So a stream has
//!   something the windows let go (`wants_to_send(credit)`) iff it is in the first set, or
//!   in the second while the session-wide credit is not 0: choosing the next stream to send
//!   from and answering [`Streams::has_data`] cost O(log streams), whatever the number of
//!   idle streams. Every change of a stream's send state goes through
//!   `Streams::refresh_sendable` (or `remove`); `Streams::check_invariants` checks the
//!   sets against the table in the tests.

mod autotune;
mod error;
mod range_set;
mod recv;
mod send;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

pub use autotune::{
    GROWTH_LOOPS, PathRtts, ResequencingDelay, ResequencingProbe, loop_time, tuned_window,
};
pub use error::{StreamError, StreamViolation};
pub use range_set::RangeSet;
pub use recv::{RecvHalf, RecvViolation};
pub use send::{Chunk, SendHalf};

use crate::ids::{PathId, PathSeq};
use crate::time::Time;
use crate::wire::{
    MaxStreamDataFrame, ResetStreamFrame, StreamControlRepr, StreamFrame, StreamRepr, Writer,
};

/// Longest open request, bytes.
pub const MAX_OPEN_REQUEST: usize = 1024;
/// Out-of-order pieces a stream may hold: one per this many bytes of its window, and at
/// least [`MIN_SEGMENTS`]. A sender filling datagrams sends pieces of about 1.3 kB, so it
/// stays far below; a peer sending 1-byte frames with gaps is refused before the
/// bookkeeping (about 100 bytes per piece) outgrows the window.
const BYTES_PER_SEGMENT: u64 = 64;
const MIN_SEGMENTS: usize = 1024;
/// A datagram with less room than this left takes no more STREAM frames.
const MIN_CHUNK_ROOM: usize = 32;

/// A stream's id: bit 0 is the side that opened it (0 client, 1 server), the rest counts
/// that side's streams from 0 (docs/protocol.md#stream-ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {}", self.0)
    }
}

/// Which end of the session this is; it decides the parity of the stream ids it opens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Side {
    /// The end that started the session (the tunnel client): even stream ids.
    #[default]
    Client,
    /// The other end (the tunnel server): odd stream ids.
    Server,
}

impl Side {
    const fn bit(self) -> u64 {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }
}

/// Bounds and initial windows of the streams (both ends run the same values, as they run
/// the same ACK policy; docs/protocol.md#stream-flow-control).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// Streams the peer may have open at once; raised by one as each closes.
    pub max_concurrent: u64,
    /// A stream's receive window at first (its MAX_STREAM_DATA before any update).
    pub initial_stream_window: u64,
    /// Largest receive window a stream's auto-tuning reaches.
    pub max_stream_window: u64,
    /// The session's receive window at first (MAX_DATA before any update).
    pub initial_session_window: u64,
    /// Largest session receive window.
    pub max_session_window: u64,
    /// Written, unacknowledged bytes one stream holds at most.
    pub stream_send_buffer: u64,
    /// Written, unacknowledged bytes all streams hold at most.
    pub session_send_buffer: u64,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_concurrent: 256,
            initial_stream_window: 256 << 10,
            max_stream_window: 16 << 20,
            initial_session_window: 1 << 20,
            max_session_window: 64 << 20,
            stream_send_buffer: 16 << 20,
            session_send_buffer: 64 << 20,
        }
    }
}

/// What a read returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRead {
    /// Bytes written into the caller's buffer.
    pub len: usize,
    /// The peer's end of the stream was reached: nothing more will come.
    pub fin: bool,
}

/// Something happened to a stream (drained through `Session::poll_event`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// The peer opened a stream; `request` is its open request.
    Opened {
        /// The stream.
        id: StreamId,
        /// The opaque open request.
        request: Vec<u8>,
    },
    /// Bytes (or the end) can be read.
    Readable(StreamId),
    /// Room freed in a stream's send buffer after a write was refused or cut short.
    Writable(StreamId),
    /// Every byte of the peer's direction, up to its FIN, has arrived.
    Finished(StreamId),
    /// The peer reset the stream: both directions are aborted and its state is freed.
    Reset {
        /// The stream.
        id: StreamId,
        /// The peer's error code.
        code: u64,
    },
}

/// What a datagram carried that must be acknowledged or sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Bytes of a stream (and its FIN).
    Stream {
        /// The stream.
        id: u64,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
        /// It carried the FIN.
        fin: bool,
    },
    /// A RESET_STREAM.
    Reset(u64),
    /// A MAX_DATA.
    MaxData,
    /// A MAX_STREAM_DATA.
    MaxStreamData(u64),
    /// A MAX_STREAMS.
    MaxStreams,
}

/// Counters of the stream layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Streams this end opened.
    pub opened_local: u64,
    /// Streams the peer opened.
    pub opened_remote: u64,
    /// Streams open now.
    pub open: u64,
    /// Stream bytes sent for the first time.
    pub bytes_sent: u64,
    /// Stream bytes sent again after a loss.
    pub bytes_retransmitted: u64,
    /// Stream bytes the application read.
    pub bytes_read: u64,
    /// Streams reset (by either end).
    pub resets: u64,
    /// Stream frames found on datagrams declared lost.
    pub frames_lost: u64,
    /// Times a stream's receive window doubled (docs/protocol.md#window-auto-tuning).
    pub stream_window_raises: u64,
    /// Times the session's receive window doubled by auto-tuning.
    pub session_window_raises: u64,
    /// Resequencing-delay samples taken (bytes that waited beyond a hole).
    pub resequencing_samples: u64,
    /// The smoothed resequencing delay, µs (0 before any sample).
    pub resequencing_us: u64,
}

/// A snapshot of one end's flow-control state (docs/protocol.md#stream-flow-control), for
/// counters and diagnostics: what limits a transfer shows here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowControlView {
    /// Sending: the peer's session limit (MAX_DATA).
    pub send_max_data: u64,
    /// Sending: new stream bytes sent, summed over streams (what MAX_DATA counts).
    pub sent_new: u64,
    /// Receiving: the session limit this end advertised.
    pub recv_max_data: u64,
    /// Receiving: bytes the application consumed, summed over streams.
    pub recv_consumed: u64,
    /// Receiving: the session window auto-tuning has reached.
    pub recv_window: u64,
    /// Receiving: the largest stream window auto-tuning has reached among open streams.
    pub largest_stream_window: u64,
}

/// This end's RESET_STREAM for a stream (docs/protocol.md#stream-reset): each end sends
/// one, naming the final size of what it sent, so both agree on the session-wide credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LocalReset {
    /// It must go out (again).
    Due { code: u64, final_size: u64 },
    /// Sent, waiting for its acknowledgement.
    Sent { code: u64, final_size: u64 },
    /// Acknowledged.
    Acked,
}

#[derive(Clone, Debug)]
struct Stream {
    send: SendHalf,
    recv: RecvHalf,
    /// The receive window auto-tuning has reached.
    window: u64,
    last_window_update: Option<Time>,
    /// Measures how long bytes wait beyond a hole (docs/protocol.md#window-auto-tuning).
    resequencing: ResequencingProbe,
    max_stream_data_due: bool,
    /// The application knows the stream (it opened it, or got `Opened`).
    announced: bool,
    readable_signalled: bool,
    finished_signalled: bool,
    local_reset: Option<LocalReset>,
    /// The peer's RESET_STREAM arrived.
    peer_reset: bool,
    /// This end's direction was finished and entirely acknowledged when it reset: the peer
    /// may have forgotten the stream already and will not answer the reset.
    sent_all_before_reset: bool,
}

/// The session's streams (see the module docs).
#[derive(Debug)]
pub struct Streams {
    side: Side,
    limits: StreamLimits,
    map: BTreeMap<u64, Stream>,
    /// Streams this end opened in all; the peer's MAX_STREAMS for us.
    opened_local: u64,
    local_allowed: u64,
    /// Streams the peer opened in all (the highest index seen + 1); our MAX_STREAMS for it.
    opened_remote: u64,
    remote_allowed: u64,
    max_streams_due: bool,
    /// Session flow control, sending: the peer's MAX_DATA and new bytes sent.
    send_max_data: u64,
    sent_new: u64,
    send_buffered: u64,
    /// Session flow control, receiving.
    recv_max_data: u64,
    recv_highest: u64,
    recv_consumed: u64,
    recv_window: u64,
    last_max_data_update: Option<Time>,
    /// The streams' smoothed resequencing delay, part of the auto-tuning loop time.
    resequencing: ResequencingDelay,
    max_data_due: bool,
    /// Streams with a control frame due (RESET_STREAM, MAX_STREAM_DATA).
    control_due: BTreeSet<u64>,
    /// Streams whose write was refused or cut short: told `Writable` when room frees.
    waiting_writers: BTreeSet<u64>,
    /// The adaptive send-buffer target the session sets from its paths' windows
    /// ([`Streams::set_send_target`]; `u64::MAX` until set: only the hard bounds apply).
    send_target: u64,
    /// Streams with lost bytes, a lost FIN or an unsent FIN (see the module docs).
    sendable_always: BTreeSet<u64>,
    /// Streams with new bytes within their own limit (see the module docs).
    sendable_new: BTreeSet<u64>,
    /// Where the round-robin over streams with data resumes.
    cursor: u64,
    /// What each unresolved datagram carried, by (path, path sequence number).
    in_flight: BTreeMap<(u8, PathSeq), Vec<Sent>>,
    events: VecDeque<StreamEvent>,
    scratch: Vec<u8>,
    stats: StreamStats,
}

impl Streams {
    /// An empty table for this `side`.
    pub fn new(side: Side, limits: StreamLimits) -> Streams {
        Streams {
            side,
            opened_local: 0,
            local_allowed: limits.max_concurrent,
            opened_remote: 0,
            remote_allowed: limits.max_concurrent,
            max_streams_due: false,
            send_max_data: limits.initial_session_window,
            sent_new: 0,
            send_buffered: 0,
            recv_max_data: limits.initial_session_window,
            recv_highest: 0,
            recv_consumed: 0,
            recv_window: limits.initial_session_window,
            last_max_data_update: None,
            resequencing: ResequencingDelay::default(),
            max_data_due: false,
            control_due: BTreeSet::new(),
            waiting_writers: BTreeSet::new(),
            send_target: u64::MAX,
            sendable_always: BTreeSet::new(),
            sendable_new: BTreeSet::new(),
            cursor: 0,
            in_flight: BTreeMap::new(),
            events: VecDeque::new(),
            scratch: Vec::new(),
            stats: StreamStats::default(),
            map: BTreeMap::new(),
            limits,
        }
    }

    /// Counters.
    pub fn stats(&self) -> StreamStats {
        StreamStats {
            open: self.map.len() as u64,
            resequencing_samples: self.resequencing.samples(),
            resequencing_us: self
                .resequencing
                .get()
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            ..self.stats
        }
    }

    /// The flow-control state now (see [`FlowControlView`]).
    pub fn flow_control(&self) -> FlowControlView {
        FlowControlView {
            send_max_data: self.send_max_data,
            sent_new: self.sent_new,
            recv_max_data: self.recv_max_data,
            recv_consumed: self.recv_consumed,
            recv_window: self.recv_window,
            largest_stream_window: self.map.values().map(|s| s.window).max().unwrap_or(0),
        }
    }

    /// Whether any stream was ever opened on this session (by either end).
    pub fn ever_used(&self) -> bool {
        self.opened_local + self.opened_remote > 0
    }

    /// Bytes held by all streams: written and unacknowledged, arrived and unread.
    pub fn buffered(&self) -> (u64, u64) {
        let recv = self.map.values().map(|s| s.recv.buffered()).sum();
        (self.send_buffered, recv)
    }

    fn new_stream(&self, announced: bool) -> Stream {
        Stream {
            send: SendHalf::new(self.limits.initial_stream_window),
            recv: RecvHalf::new(self.limits.initial_stream_window),
            window: self.limits.initial_stream_window,
            last_window_update: None,
            resequencing: ResequencingProbe::default(),
            max_stream_data_due: false,
            announced,
            readable_signalled: false,
            finished_signalled: false,
            local_reset: None,
            peer_reset: false,
            sent_all_before_reset: false,
        }
    }

    fn is_local(&self, id: u64) -> bool {
        id & 1 == self.side.bit()
    }

    /// Opens a stream; `request` (at most [`MAX_OPEN_REQUEST`] bytes) reaches the peer
    /// first, in its `Opened` event (docs/protocol.md#stream-open).
    pub fn open(&mut self, request: &[u8]) -> Result<StreamId, StreamError> {
        if request.len() > MAX_OPEN_REQUEST {
            return Err(StreamError::RequestTooLarge(request.len()));
        }
        if self.opened_local >= self.local_allowed {
            return Err(StreamError::TooManyStreams {
                open: self.opened_local,
                allowed: self.local_allowed,
            });
        }
        let id = self.opened_local << 1 | self.side.bit();
        self.opened_local += 1;
        self.stats.opened_local += 1;
        let mut stream = self.new_stream(true);
        let mut prefix = [0u8; 8];
        let mut w = Writer::new(&mut prefix);
        // A request of at most 1024 bytes always fits a 2-byte varint.
        let _ = w.put_varint("open request length", request.len() as u64);
        stream.send.write(w.written());
        stream.send.write(request);
        self.send_buffered += stream.send.buffered();
        self.map.insert(id, stream);
        self.refresh_sendable(id);
        Ok(StreamId(id))
    }

    /// The send-buffer target: written, unacknowledged bytes the streams may hold beyond
    /// which [`Streams::write`] gives no room, per stream and for all streams together
    /// (each still capped by its hard bound, [`StreamLimits::stream_send_buffer`] and
    /// [`StreamLimits::session_send_buffer`]). The session derives it from its paths'
    /// congestion windows (docs/protocol.md#stream-flow-control). Bytes already written
    /// stay when it falls; when it rises, every refused writer that has room now is told
    /// `Writable`.
    pub fn set_send_target(&mut self, target: u64) {
        let rose = target > self.send_target;
        self.send_target = target;
        if rose {
            self.wake_writers();
        }
    }

    /// The current send-buffer target (see [`Streams::set_send_target`]).
    pub fn send_target(&self) -> u64 {
        self.send_target
    }

    /// Written, unacknowledged bytes one stream may hold now: its hard bound, or the
    /// target if lower.
    fn stream_send_limit(&self) -> u64 {
        self.limits.stream_send_buffer.min(self.send_target)
    }

    /// Written, unacknowledged bytes all streams may hold now.
    fn session_send_limit(&self) -> u64 {
        self.limits.session_send_buffer.min(self.send_target)
    }

    /// Appends to a stream's send buffer as much of `data` as the buffers allow; returns
    /// how much (0: full now, a `Writable` event follows when room frees or the send-buffer
    /// target rises).
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, StreamError> {
        let session_room = self.session_send_limit().saturating_sub(self.send_buffered);
        let stream_room_limit = self.stream_send_limit();
        let s = self.map.get_mut(&id.0).ok_or(StreamError::Unknown(id))?;
        if s.local_reset.is_some() {
            return Err(StreamError::Reset(id));
        }
        if s.send.is_finished() {
            return Err(StreamError::Finished(id));
        }
        let room = stream_room_limit
            .saturating_sub(s.send.buffered())
            .min(session_room);
        let n = usize::try_from(room).unwrap_or(usize::MAX).min(data.len());
        s.send.write(&data[..n]);
        if n < data.len() {
            self.waiting_writers.insert(id.0);
        }
        self.send_buffered += n as u64;
        self.refresh_sendable(id.0);
        Ok(n)
    }

    /// Ends a stream's sending direction after what was written (FIN).
    pub fn finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        let s = self.map.get_mut(&id.0).ok_or(StreamError::Unknown(id))?;
        if s.local_reset.is_some() {
            return Err(StreamError::Reset(id));
        }
        s.send.finish();
        self.refresh_sendable(id.0);
        Ok(())
    }

    /// Aborts a stream in both directions: what is buffered is dropped, a RESET_STREAM
    /// with `code` goes to the peer (which answers with its own), and the stream is
    /// forgotten once both are through.
    pub fn reset(&mut self, id: StreamId, code: u64) -> Result<(), StreamError> {
        let s = self.map.get_mut(&id.0).ok_or(StreamError::Unknown(id))?;
        if s.local_reset.is_some() {
            return Ok(());
        }
        self.stats.resets += 1;
        self.abort(id.0, code);
        Ok(())
    }

    /// Ends both directions of a stream: drops its buffers, frees its session credit, and
    /// queues this end's RESET_STREAM.
    fn abort(&mut self, id: u64, code: u64) {
        let Some(s) = self.map.get_mut(&id) else {
            return;
        };
        // The final size is what was sent: bytes written but never sent are dropped.
        let final_size = s.send.sent_end();
        s.local_reset = Some(LocalReset::Due { code, final_size });
        s.sent_all_before_reset = s.send.is_done();
        self.send_buffered -= s.send.buffered();
        s.send = SendHalf::new(0);
        self.recv_consumed += s.recv.abandon(None);
        s.max_stream_data_due = false;
        self.control_due.insert(id);
        self.refresh_sendable(id);
        self.credit_session();
        self.wake_writers();
    }

    /// Advertises more session credit once half the session window is used: called
    /// wherever consumed credit grows (reads, resets, open requests), so credit freed
    /// without a read is never left unadvertised.
    fn credit_session(&mut self) {
        if self.recv_max_data.saturating_sub(self.recv_consumed) < self.recv_window / 2 {
            self.recv_max_data = self.recv_consumed + self.recv_window;
            self.max_data_due = true;
        }
    }

    /// Room freed in the session's send buffer, or the target rose: every stream whose
    /// write was refused and that has room now is told so.
    fn wake_writers(&mut self) {
        if self.waiting_writers.is_empty() || self.send_buffered >= self.session_send_limit() {
            return;
        }
        let per_stream = self.stream_send_limit();
        let map = &self.map;
        let events = &mut self.events;
        self.waiting_writers.retain(|id| match map.get(id) {
            Some(s) if s.send.buffered() < per_stream => {
                events.push_back(StreamEvent::Writable(StreamId(*id)));
                false
            }
            Some(_) => true,
            None => false,
        });
    }

    /// Reads in-order bytes of a stream into `buf`. `rtts` are the session's shortest and
    /// longest smoothed RTTs, for window auto-tuning (docs/protocol.md#window-auto-tuning).
    pub fn read(
        &mut self,
        now: Time,
        id: StreamId,
        buf: &mut [u8],
        rtts: PathRtts,
    ) -> Result<StreamRead, StreamError> {
        let s = self.map.get_mut(&id.0).ok_or(StreamError::Unknown(id))?;
        if s.local_reset.is_some() {
            return Err(StreamError::Reset(id));
        }
        let len = s.recv.peek(buf);
        s.recv.consume(len as u64);
        s.readable_signalled = false;
        let fin = s.recv.at_end();
        if fin {
            s.recv.mark_fin_read();
        }
        self.recv_consumed += len as u64;
        self.stats.bytes_read += len as u64;
        // Stream window: advertise more once half of it is used; auto-tuned: if the last
        // update was less than two loop times (SRTT plus resequencing delay) ago, the window
        // limits the rate: double it (docs/protocol.md#window-auto-tuning).
        let loop_time = loop_time(rtts, &self.resequencing);
        if !fin {
            let read = s.recv.read_offset();
            if s.recv.max_data() - read < s.window / 2 {
                let grown = tuned_window(
                    s.window,
                    self.limits.max_stream_window,
                    s.last_window_update,
                    now,
                    loop_time,
                );
                if grown > s.window {
                    s.window = grown;
                    self.stats.stream_window_raises += 1;
                    // The session window stays at least twice the largest stream window,
                    // so one stream whose reader stalls holds at most half the session's
                    // credit and the other streams keep flowing.
                    let floor = (s.window * 2).min(self.limits.max_session_window);
                    self.recv_window = self.recv_window.max(floor);
                }
                s.last_window_update = Some(now);
                s.recv.raise_max_data(read + s.window);
                s.max_stream_data_due = true;
                self.control_due.insert(id.0);
            }
        }
        if self.recv_max_data.saturating_sub(self.recv_consumed) < self.recv_window / 2 {
            let grown = tuned_window(
                self.recv_window,
                self.limits.max_session_window,
                self.last_max_data_update,
                now,
                loop_time,
            );
            if grown > self.recv_window {
                self.recv_window = grown;
                self.stats.session_window_raises += 1;
            }
            self.last_max_data_update = Some(now);
            self.credit_session();
        }
        self.maybe_free(id.0);
        Ok(StreamRead { len, fin })
    }

    /// The next stream event.
    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    /// Creates the peer's streams up to `id` (lower ids open implicitly, as their frames
    /// may come later over slower paths). `Ok(false)`: the stream is closed (ignore).
    fn remote_stream(&mut self, id: u64) -> Result<bool, StreamViolation> {
        if self.map.contains_key(&id) {
            return Ok(true);
        }
        if self.is_local(id) {
            return if (id >> 1) < self.opened_local {
                Ok(false)
            } else {
                Err(StreamViolation::NotOpened(StreamId(id)))
            };
        }
        let index = id >> 1;
        if index < self.opened_remote {
            return Ok(false);
        }
        if index >= self.remote_allowed {
            return Err(StreamViolation::StreamLimit(StreamId(id)));
        }
        for i in self.opened_remote..=index {
            let stream = self.new_stream(false);
            self.map.insert(i << 1 | (self.side.bit() ^ 1), stream);
            self.stats.opened_remote += 1;
        }
        self.opened_remote = index + 1;
        Ok(true)
    }

    /// A STREAM frame arrived at `now`.
    pub fn on_stream_frame(
        &mut self,
        now: Time,
        frame: &StreamFrame<'_>,
    ) -> Result<(), StreamViolation> {
        let id = frame.stream_id;
        if !self.remote_stream(id)? {
            return Ok(());
        }
        let Some(s) = self.map.get_mut(&id) else {
            return Ok(());
        };
        let end = frame.offset + frame.data.len() as u64;
        if s.local_reset.is_some() || s.peer_reset {
            // Reset: nothing is kept, but the bytes count as received and consumed at once,
            // so both ends keep the same session-wide credit; the limits still hold.
            let raised = s.recv.skip_to(end).map_err(|v| violation(v, id))?;
            self.recv_highest += raised;
            if self.recv_highest > self.recv_max_data {
                return Err(StreamViolation::FlowControl(StreamId(id)));
            }
            self.recv_consumed += raised;
            self.credit_session();
            return Ok(());
        }
        let raised = s
            .recv
            .on_data(frame.offset, frame.data, frame.fin)
            .map_err(|v| violation(v, id))?;
        let cap = usize::try_from(s.window / BYTES_PER_SEGMENT)
            .unwrap_or(usize::MAX)
            .max(MIN_SEGMENTS);
        if s.recv.segment_count() > cap {
            return Err(StreamViolation::TooFragmented(StreamId(id)));
        }
        self.recv_highest += raised;
        if self.recv_highest > self.recv_max_data {
            return Err(StreamViolation::FlowControl(StreamId(id)));
        }
        // docs/protocol.md#window-auto-tuning: how long bytes beyond a hole wait.
        let in_order_end = s.recv.read_offset() + s.recv.readable();
        if let Some(wait) = s.resequencing.on_arrival(now, end, in_order_end) {
            self.resequencing.on_sample(wait);
        }
        self.after_data(id)
    }

    /// After data arrived: the open request, then the readable and finished events.
    fn after_data(&mut self, id: u64) -> Result<(), StreamViolation> {
        let Some(s) = self.map.get_mut(&id) else {
            return Ok(());
        };
        if !s.announced {
            let mut head = [0u8; 2];
            let got = s.recv.peek(&mut head);
            let (len, prefix) = match parse_request_len(&head[..got]) {
                Some(Ok(x)) => x,
                Some(Err(())) => return Err(StreamViolation::BadOpenRequest(StreamId(id))),
                // The stream ended inside the request's length field.
                None if s.recv.is_complete() => {
                    return Err(StreamViolation::BadOpenRequest(StreamId(id)));
                }
                None => return Ok(()),
            };
            if len > MAX_OPEN_REQUEST {
                return Err(StreamViolation::BadOpenRequest(StreamId(id)));
            }
            if s.recv.readable() < (prefix + len) as u64 {
                if s.recv.is_complete() {
                    return Err(StreamViolation::BadOpenRequest(StreamId(id)));
                }
                return Ok(());
            }
            let mut request = vec![0u8; prefix + len];
            s.recv.peek(&mut request);
            s.recv.consume((prefix + len) as u64);
            self.recv_consumed += (prefix + len) as u64;
            request.drain(..prefix);
            s.announced = true;
            self.events.push_back(StreamEvent::Opened {
                id: StreamId(id),
                request,
            });
            self.credit_session();
        }
        let Some(s) = self.map.get_mut(&id) else {
            return Ok(());
        };
        if (s.recv.readable() > 0 || s.recv.is_complete()) && !s.readable_signalled {
            s.readable_signalled = true;
            self.events.push_back(StreamEvent::Readable(StreamId(id)));
        }
        if s.recv.is_complete() && !s.finished_signalled {
            s.finished_signalled = true;
            self.events.push_back(StreamEvent::Finished(StreamId(id)));
        }
        self.maybe_free(id);
        Ok(())
    }

    /// A RESET_STREAM arrived: both directions end; this end answers with its own
    /// RESET_STREAM unless it sent one already, and forgets the stream once that one is
    /// acknowledged.
    pub fn on_reset_frame(&mut self, frame: &ResetStreamFrame) -> Result<(), StreamViolation> {
        let id = frame.stream_id;
        if !self.remote_stream(id)? {
            return Ok(());
        }
        let Some(s) = self.map.get_mut(&id) else {
            return Ok(());
        };
        if s.peer_reset {
            return Ok(());
        }
        let raised = s
            .recv
            .check_reset_size(frame.final_size)
            .map_err(|v| violation(v, id))?;
        self.recv_highest += raised;
        if self.recv_highest > self.recv_max_data {
            return Err(StreamViolation::FlowControl(StreamId(id)));
        }
        s.peer_reset = true;
        self.recv_consumed += s.recv.abandon(Some(frame.final_size));
        let (answer, announced) = (s.local_reset.is_none(), s.announced);
        self.credit_session();
        if answer {
            if announced {
                self.events.push_back(StreamEvent::Reset {
                    id: StreamId(id),
                    code: frame.error_code,
                });
            }
            self.stats.resets += 1;
            self.abort(id, frame.error_code);
        }
        self.maybe_free(id);
        Ok(())
    }

    /// A MAX_DATA arrived.
    pub fn on_max_data(&mut self, max: u64) {
        self.send_max_data = self.send_max_data.max(max);
    }

    /// A MAX_STREAM_DATA arrived.
    pub fn on_max_stream_data(&mut self, f: &MaxStreamDataFrame) -> Result<(), StreamViolation> {
        if !self.remote_stream(f.stream_id)? {
            return Ok(());
        }
        if let Some(s) = self.map.get_mut(&f.stream_id) {
            s.send.max_data = s.send.max_data.max(f.maximum);
            self.refresh_sendable(f.stream_id);
        }
        Ok(())
    }

    /// A MAX_STREAMS arrived.
    pub fn on_max_streams(&mut self, max: u64) {
        self.local_allowed = self.local_allowed.max(max);
    }

    fn remove(&mut self, id: u64) {
        if self.map.remove(&id).is_some() {
            self.control_due.remove(&id);
            self.waiting_writers.remove(&id);
            self.sendable_always.remove(&id);
            self.sendable_new.remove(&id);
            if !self.is_local(id) {
                self.remote_allowed += 1;
                self.max_streams_due = true;
            }
        }
    }

    /// Frees a stream whose both directions are done.
    fn maybe_free(&mut self, id: u64) {
        let done = self.map.get(&id).is_some_and(|s| match s.local_reset {
            None => s.send.is_done() && s.recv.is_done(),
            // The peer answers a reset with its own, unless it forgot the stream: it does
            // so only once it read this end's FIN, and its own final size is known here, so
            // the credit both ends counted is already equal.
            Some(LocalReset::Acked) => {
                s.peer_reset || (s.sent_all_before_reset && s.recv.final_size().is_some())
            }
            Some(_) => false,
        });
        if done {
            self.remove(id);
        }
    }

    /// Whether a datagram is worth building for frames of this layer: control frames due,
    /// or a stream with bytes the windows let go.
    pub fn wants_to_send(&self) -> bool {
        self.has_control_due() || self.has_data()
    }

    /// Whether control frames (flow-control updates, resets) wait.
    pub fn has_control_due(&self) -> bool {
        self.max_data_due || self.max_streams_due || !self.control_due.is_empty()
    }

    /// Whether a stream has bytes (or a FIN) the flow-control limits let go.
    pub fn has_data(&self) -> bool {
        !self.sendable_always.is_empty() || (self.credit() > 0 && !self.sendable_new.is_empty())
    }

    /// New bytes the session-wide limit (the peer's MAX_DATA) still lets go.
    fn credit(&self) -> u64 {
        self.send_max_data - self.sent_new.min(self.send_max_data)
    }

    /// Puts stream `id` into the sendable sets it belongs to, and out of the others (see
    /// the module docs); called after every change of its send state.
    fn refresh_sendable(&mut self, id: u64) {
        let (always, new) = match self.map.get(&id) {
            Some(s) if s.local_reset.is_none() => (
                s.send.wants_to_send_without_credit(),
                s.send.has_new_in_limit(),
            ),
            _ => (false, false),
        };
        for (set, want) in [
            (&mut self.sendable_always, always),
            (&mut self.sendable_new, new),
        ] {
            if want {
                set.insert(id);
            } else {
                set.remove(&id);
            }
        }
    }

    /// The stream the round-robin serves next: the first at or after the cursor, wrapping
    /// around, that has something the windows let go with session-wide `credit` (the same
    /// choice as scanning the whole table from the cursor, in O(log streams)).
    fn next_sendable(&self, credit: u64) -> Option<u64> {
        let new = (credit > 0).then_some(&self.sendable_new);
        let first_from = |from: u64| {
            let a = self.sendable_always.range(from..).next();
            let b = new.and_then(|n| n.range(from..).next());
            match (a, b) {
                (Some(a), Some(b)) => Some(*a.min(b)),
                (a, b) => a.or(b).copied(),
            }
        };
        first_from(self.cursor).or_else(|| first_from(0))
    }

    /// Checks the sendable sets against the table (the module docs' invariant).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        for (id, s) in &self.map {
            let open = s.local_reset.is_none();
            assert_eq!(
                self.sendable_always.contains(id),
                open && s.send.wants_to_send_without_credit(),
                "stream {id} in sendable_always"
            );
            assert_eq!(
                self.sendable_new.contains(id),
                open && s.send.has_new_in_limit(),
                "stream {id} in sendable_new"
            );
        }
        for id in self.sendable_always.iter().chain(&self.sendable_new) {
            assert!(
                self.map.contains_key(id),
                "forgotten stream {id} is sendable"
            );
        }
        let credit = self.credit();
        assert_eq!(
            self.has_data(),
            self.map
                .values()
                .any(|s| s.local_reset.is_none() && s.send.wants_to_send(credit))
        );
    }

    /// Writes due control frames, then (with `data`) STREAM frames round-robin over the
    /// streams until the datagram is full; appends what it wrote to `sent`.
    pub fn write_frames(&mut self, w: &mut Writer<'_>, data: bool, sent: &mut Vec<Sent>) {
        self.write_control(w, sent);
        if !data {
            return;
        }
        while w.remaining() >= MIN_CHUNK_ROOM {
            let credit = self.credit();
            let Some(id) = self.next_sendable(credit) else {
                break;
            };
            debug_assert!(
                self.map
                    .get(&id)
                    .is_some_and(|s| s.local_reset.is_none() && s.send.wants_to_send(credit)),
                "stream {id} is in a sendable set but has nothing to send"
            );
            self.cursor = id + 1;
            if !self.write_chunk(w, id, credit, sent) {
                break;
            }
        }
    }

    fn write_chunk(
        &mut self,
        w: &mut Writer<'_>,
        id: u64,
        credit: u64,
        sent: &mut Vec<Sent>,
    ) -> bool {
        let Some(s) = self.map.get_mut(&id) else {
            return false;
        };
        let room = w.remaining();
        let offset_guess = s.send.sent_end();
        let overhead =
            StreamRepr::overhead(id, offset_guess.max(s.send.write_offset()), room, false);
        let Some(max_len) = room.checked_sub(overhead) else {
            return false;
        };
        let Some(chunk) = s.send.next_chunk(max_len as u64, credit) else {
            return false;
        };
        let len = usize::try_from(chunk.len).unwrap_or(0);
        self.scratch.resize(len, 0);
        s.send.copy_out(&chunk, &mut self.scratch);
        let repr = StreamRepr {
            stream_id: id,
            offset: chunk.offset,
            fin: chunk.fin,
            data: &self.scratch,
            to_end: false,
        };
        if repr.encode(w).is_err() {
            return false;
        }
        s.send.on_sent(&chunk);
        self.refresh_sendable(id);
        if chunk.new {
            self.sent_new += chunk.len;
            self.stats.bytes_sent += chunk.len;
        } else {
            self.stats.bytes_retransmitted += chunk.len;
        }
        sent.push(Sent::Stream {
            id,
            offset: chunk.offset,
            len: chunk.len,
            fin: chunk.fin,
        });
        true
    }

    fn write_control(&mut self, w: &mut Writer<'_>, sent: &mut Vec<Sent>) {
        if self.max_data_due
            && StreamControlRepr::MaxData(self.recv_max_data)
                .encode(w)
                .is_ok()
        {
            self.max_data_due = false;
            sent.push(Sent::MaxData);
        }
        if self.max_streams_due
            && StreamControlRepr::MaxStreams(self.remote_allowed)
                .encode(w)
                .is_ok()
        {
            self.max_streams_due = false;
            sent.push(Sent::MaxStreams);
        }
        // In id order, each removed once written: what does not fit stays due, and a full
        // datagram costs no walk over the rest.
        while let Some(&id) = self.control_due.first() {
            let Some(s) = self.map.get_mut(&id) else {
                self.control_due.remove(&id);
                continue;
            };
            if let Some(LocalReset::Due { code, final_size }) = s.local_reset {
                let f = ResetStreamFrame {
                    stream_id: id,
                    error_code: code,
                    final_size,
                };
                if StreamControlRepr::ResetStream(f).encode(w).is_err() {
                    return;
                }
                s.local_reset = Some(LocalReset::Sent { code, final_size });
                sent.push(Sent::Reset(id));
            }
            if s.max_stream_data_due && s.local_reset.is_none() {
                let f = MaxStreamDataFrame {
                    stream_id: id,
                    maximum: s.recv.max_data(),
                };
                if StreamControlRepr::MaxStreamData(f).encode(w).is_err() {
                    return;
                }
                s.max_stream_data_due = false;
                sent.push(Sent::MaxStreamData(id));
            }
            self.control_due.remove(&id);
        }
    }

    /// Remembers what the datagram `seq` on `path` carried.
    pub fn on_datagram_sent(&mut self, path: PathId, seq: PathSeq, sent: Vec<Sent>) {
        if !sent.is_empty() {
            self.in_flight.insert((path.0, seq), sent);
        }
    }

    /// The datagram `seq` on `path` was acknowledged: its bytes leave the send buffers.
    pub fn on_datagram_acked(&mut self, path: PathId, seq: PathSeq) {
        let Some(sent) = self.in_flight.remove(&(path.0, seq)) else {
            return;
        };
        for item in sent {
            match item {
                Sent::Stream {
                    id,
                    offset,
                    len,
                    fin,
                } => {
                    let Some(s) = self.map.get_mut(&id) else {
                        continue;
                    };
                    if s.local_reset.is_some() {
                        continue;
                    }
                    let freed = s.send.on_acked(offset..offset + len, fin);
                    self.send_buffered -= freed;
                    self.refresh_sendable(id);
                    self.maybe_free(id);
                }
                Sent::Reset(id) => {
                    if let Some(s) = self.map.get_mut(&id) {
                        s.local_reset = Some(LocalReset::Acked);
                    }
                    self.maybe_free(id);
                }
                Sent::MaxData | Sent::MaxStreamData(_) | Sent::MaxStreams => {}
            }
        }
        self.wake_writers();
    }

    /// The datagram `seq` on `path` was declared lost (or its path went down): what it
    /// carried is sent again, on whichever path is chosen then.
    pub fn on_datagram_lost(&mut self, path: PathId, seq: PathSeq) {
        let Some(sent) = self.in_flight.remove(&(path.0, seq)) else {
            return;
        };
        for item in sent {
            match item {
                Sent::Stream {
                    id,
                    offset,
                    len,
                    fin,
                } => {
                    self.stats.frames_lost += 1;
                    if let Some(s) = self.map.get_mut(&id)
                        && s.local_reset.is_none()
                    {
                        s.send.on_lost(offset..offset + len, fin);
                        self.refresh_sendable(id);
                    }
                }
                Sent::Reset(id) => {
                    if let Some(s) = self.map.get_mut(&id)
                        && let Some(LocalReset::Sent { code, final_size }) = s.local_reset
                    {
                        s.local_reset = Some(LocalReset::Due { code, final_size });
                        self.control_due.insert(id);
                    }
                }
                Sent::MaxData => self.max_data_due = true,
                Sent::MaxStreams => self.max_streams_due = true,
                Sent::MaxStreamData(id) => {
                    if let Some(s) = self.map.get_mut(&id)
                        && s.local_reset.is_none()
                        && !s.recv.is_complete()
                    {
                        s.max_stream_data_due = true;
                        self.control_due.insert(id);
                    }
                }
            }
        }
    }

    /// A path was removed: whatever its unresolved datagrams carried is lost.
    pub fn on_path_removed(&mut self, path: PathId) {
        let seqs: Vec<PathSeq> = self
            .in_flight
            .range((path.0, 0)..=(path.0, PathSeq::MAX))
            .map(|((_, s), _)| *s)
            .collect();
        for seq in seqs {
            self.on_datagram_lost(path, seq);
        }
    }
}

fn violation(v: RecvViolation, id: u64) -> StreamViolation {
    match v {
        RecvViolation::FlowControl => StreamViolation::FlowControl(StreamId(id)),
        RecvViolation::FinalSize => StreamViolation::FinalSize(StreamId(id)),
    }
}

/// The open request's length varint at the start of a stream: `None` if more bytes are
/// needed, `Some(Err)` if it is not a 1- or 2-byte varint (a request is at most 1024
/// bytes), else `(length, prefix bytes)`.
fn parse_request_len(head: &[u8]) -> Option<Result<(usize, usize), ()>> {
    let first = *head.first()?;
    match first >> 6 {
        0 => Some(Ok((usize::from(first), 1))),
        1 => {
            let second = *head.get(1)?;
            Some(Ok((
                usize::from(first & 0x3f) << 8 | usize::from(second),
                2,
            )))
        }
        _ => Some(Err(())),
    }
}

#[cfg(test)]
mod autotune_tests;
#[cfg(test)]
mod regression_tests;
#[cfg(test)]
mod streams_proptest;
#[cfg(test)]
mod tests;
