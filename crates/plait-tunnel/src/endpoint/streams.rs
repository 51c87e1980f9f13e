//! The endpoints' stream side (stream mode, docs/tunnel.md#stream-mode): what the relay
//! that terminates TCP connections calls to move their bytes through the engine.
//!
//! A stream is named by its [`StreamPeer`] (which client, on the server; which engine
//! session) and its engine `StreamId`. Stream ids restart with every engine session, so a
//! call naming a session that has ended fails with `StreamError::Closed`, and the relay
//! hears of the end first through [`LinkStreamEvent::SessionEnded`].
//!
//! Invariants: stream calls never drive the engine themselves (a relay moving many
//! connections' bytes in one round would seal a datagram per call); they mark the link,
//! and [`StreamHost::flush_streams`] drives every marked link once. Events come out in the
//! order the engine produced them, per peer.

use plait_proto::{StreamError, StreamId, StreamRead, Time};

use super::link::{Link, LinkStreamEvent};
use super::{ClientEndpoint, Now, Outputs, ServerEndpoint};

/// Which engine session a stream belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamPeer {
    /// The peer: 0 on the client (its server); the `[[client]]` index on the server.
    pub index: usize,
    /// The peer's engine session generation (see [`Link::generation`]).
    pub generation: u64,
}

/// Stream calls into an endpoint (see the module docs).
pub trait StreamHost {
    /// Opens a stream to the server with `request` (the client's relay; a server opens
    /// none and gets `Closed`).
    fn open_stream(
        &mut self,
        now: Time,
        request: &[u8],
    ) -> Result<(StreamPeer, StreamId), StreamError>;
    /// See `plait_proto::Session::stream_write`.
    fn stream_write(
        &mut self,
        now: Time,
        peer: StreamPeer,
        id: StreamId,
        data: &[u8],
    ) -> Result<usize, StreamError>;
    /// See `plait_proto::Session::stream_read`.
    fn stream_read(
        &mut self,
        now: Time,
        peer: StreamPeer,
        id: StreamId,
        buf: &mut [u8],
    ) -> Result<StreamRead, StreamError>;
    /// See `plait_proto::Session::stream_finish`.
    fn stream_finish(
        &mut self,
        now: Time,
        peer: StreamPeer,
        id: StreamId,
    ) -> Result<(), StreamError>;
    /// See `plait_proto::Session::stream_reset`.
    fn stream_reset(
        &mut self,
        now: Time,
        peer: StreamPeer,
        id: StreamId,
        code: u64,
    ) -> Result<(), StreamError>;
    /// The next stream event of any peer.
    fn poll_stream_event(&mut self) -> Option<(StreamPeer, LinkStreamEvent)>;
    /// Drives every link a stream call marked.
    fn flush_streams(&mut self, now: Now, out: &mut impl Outputs);
    /// The peer's name for logs.
    fn peer_name(&self, index: usize) -> &str;
}

/// The stream calls common to both endpoints, on one link.
fn on_link<T>(
    link: Option<&mut Link>,
    peer: StreamPeer,
    call: impl FnOnce(&mut plait_proto::Session) -> Result<T, StreamError>,
) -> Result<T, StreamError> {
    let link = link.ok_or(StreamError::Closed)?;
    call(link.stream_session(peer.generation)?)
}

fn poll_link(index: usize, link: &mut Link) -> Option<(StreamPeer, LinkStreamEvent)> {
    link.poll_stream_event()
        .map(|(generation, e)| (StreamPeer { index, generation }, e))
}

/// Implements the calls that only differ in how the endpoint finds the link.
macro_rules! stream_calls {
    () => {
        fn stream_write(
            &mut self,
            now: Time,
            peer: StreamPeer,
            id: StreamId,
            data: &[u8],
        ) -> Result<usize, StreamError> {
            on_link(self.link_of(peer.index), peer, |s| {
                s.stream_write(now, id, data)
            })
        }

        fn stream_read(
            &mut self,
            now: Time,
            peer: StreamPeer,
            id: StreamId,
            buf: &mut [u8],
        ) -> Result<StreamRead, StreamError> {
            on_link(self.link_of(peer.index), peer, |s| {
                s.stream_read(now, id, buf)
            })
        }

        fn stream_finish(
            &mut self,
            now: Time,
            peer: StreamPeer,
            id: StreamId,
        ) -> Result<(), StreamError> {
            on_link(self.link_of(peer.index), peer, |s| s.stream_finish(now, id))
        }

        fn stream_reset(
            &mut self,
            now: Time,
            peer: StreamPeer,
            id: StreamId,
            code: u64,
        ) -> Result<(), StreamError> {
            on_link(self.link_of(peer.index), peer, |s| {
                s.stream_reset(now, id, code)
            })
        }
    };
}

impl StreamHost for ClientEndpoint {
    fn open_stream(
        &mut self,
        now: Time,
        request: &[u8],
    ) -> Result<(StreamPeer, StreamId), StreamError> {
        let link = self.link_mut();
        let peer = StreamPeer {
            index: 0,
            generation: link.generation(),
        };
        let id = link
            .stream_session(peer.generation)?
            .open_stream(now, request)?;
        Ok((peer, id))
    }

    stream_calls!();

    fn poll_stream_event(&mut self) -> Option<(StreamPeer, LinkStreamEvent)> {
        poll_link(0, self.link_mut())
    }

    fn flush_streams(&mut self, now: Now, out: &mut impl Outputs) {
        self.link_mut().drive_if_needed(now.mono, out);
    }

    fn peer_name(&self, _index: usize) -> &str {
        "server"
    }
}

impl StreamHost for ServerEndpoint {
    fn open_stream(&mut self, _: Time, _: &[u8]) -> Result<(StreamPeer, StreamId), StreamError> {
        // The server only accepts streams: its relay re-originates what clients open.
        Err(StreamError::Closed)
    }

    stream_calls!();

    fn poll_stream_event(&mut self) -> Option<(StreamPeer, LinkStreamEvent)> {
        self.links_mut()
            .enumerate()
            .find_map(|(i, link)| poll_link(i, link))
    }

    fn flush_streams(&mut self, now: Now, out: &mut impl Outputs) {
        for link in self.links_mut() {
            link.drive_if_needed(now.mono, out);
        }
    }

    fn peer_name(&self, index: usize) -> &str {
        self.client_name(index).unwrap_or("?")
    }
}

impl ClientEndpoint {
    fn link_of(&mut self, index: usize) -> Option<&mut Link> {
        (index == 0).then(|| self.link_mut())
    }
}

impl ServerEndpoint {
    fn link_of(&mut self, index: usize) -> Option<&mut Link> {
        self.links_mut().nth(index)
    }
}
