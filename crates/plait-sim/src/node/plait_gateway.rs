//! A plait engine as a simulated node: it takes inner packets from its LAN side, hands them
//! to a real `plait_proto::Session`, and sends the datagrams the session produces on its
//! paths; datagrams from its paths go into the session, and the inner packets it delivers
//! continue along their flow's route from this node. The session is driven only through
//! `plait_proto::drive`, as the tunnel daemon drives it.
//!
//! In mode `plait-stream` the gateway also runs a [`StreamApp`]: the split connection of
//! seed ETOM §IV-B, where the end hosts' TCP ends at the gateways and the bytes cross the
//! paths in an engine stream.

use std::collections::VecDeque;
use std::time::Duration;

use plait_proto::{Delivery, Event, Io, PathId, Session, StreamEvent, StreamId, Time, drive};

use super::Outbox;
use crate::inner;
use crate::packet::{Body, FlowId, Packet};

/// What a gateway counted.
#[derive(Debug, Default, Clone)]
pub struct GatewayStats {
    /// Inner packets accepted from the LAN side.
    pub inner_in: u64,
    /// Inner packets refused by the session (too large, queue full).
    pub inner_refused: u64,
    /// Datagrams the session rejected.
    pub datagrams_rejected: u64,
    /// Inner packets delivered.
    pub delivered: u64,
    /// Datagrams sent per path.
    pub sent_per_path: Vec<u64>,
    /// Reorder-buffer holding time of each delivered packet, microseconds.
    pub held_us: Vec<u32>,
}

/// Bytes a source keeps written ahead in the session's stream buffers: more than any
/// simulated path set's bandwidth-delay product, so the source never limits the transfer.
const SOURCE_AHEAD: u64 = 8 << 20;

/// An application on a gateway using streams (mode `plait-stream`).
#[derive(Debug)]
pub enum StreamApp {
    /// Opens one stream at `start` and keeps it full: an FTP transfer that never ends,
    /// whose TCP leg to the server the split connection has already terminated.
    Source {
        /// When the transfer starts.
        start: Time,
        /// The stream, once opened.
        stream: Option<StreamId>,
    },
    /// Reads every stream the peer opens, counting the bytes per time bin: the mobile
    /// host's application.
    Sink {
        /// Bytes read in order.
        bytes: u64,
        /// Bytes read per bin.
        bins: Vec<u64>,
        /// Bin width.
        bin: Duration,
        /// Streams the peer opened.
        open: Vec<StreamId>,
    },
}

/// A plait engine node (see the module docs).
#[derive(Debug)]
pub struct PlaitGateway {
    session: Session,
    /// Flow id of the datagrams this gateway sends on each path (index: `PathId`).
    path_flows: Vec<FlowId>,
    inbox: VecDeque<Packet>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    next: Option<Time>,
    stats: GatewayStats,
    outer_header: u32,
    app: Option<StreamApp>,
    events: Vec<Event>,
}

impl PlaitGateway {
    /// A gateway around `session`, sending path `i`'s datagrams as flow `path_flows[i]`,
    /// each `outer_header` bytes longer on the wire than the engine datagram.
    pub fn new(session: Session, path_flows: Vec<FlowId>, outer_header: u32) -> PlaitGateway {
        let size = session.config().max_datagram_size.max(65_536);
        PlaitGateway {
            session,
            stats: GatewayStats {
                sent_per_path: vec![0; path_flows.len()],
                ..GatewayStats::default()
            },
            path_flows,
            inbox: VecDeque::new(),
            buf: vec![0; size],
            scratch: Vec::new(),
            next: Some(Time::ZERO),
            outer_header,
            app: None,
            events: Vec::new(),
        }
    }

    /// The same gateway running `app` on streams.
    pub fn with_app(mut self, app: StreamApp) -> PlaitGateway {
        self.app = Some(app);
        self
    }

    /// The stream application, if any.
    pub fn app(&self) -> Option<&StreamApp> {
        self.app.as_ref()
    }

    /// The engine (statistics, path views).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Counters.
    pub fn stats(&self) -> &GatewayStats {
        &self.stats
    }

    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        self.inbox.push_back(pkt);
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        // Drive after every input, as the tunnel's endpoints do after every datagram and
        // every inner packet (docs/protocol.md#drive): the same cadence as what ships.
        let mut drove = false;
        while let Some(pkt) = self.inbox.pop_front() {
            match &pkt.body {
                Body::Plait { path, bytes } => {
                    if self.session.handle_datagram(now, *path, bytes).is_err() {
                        self.stats.datagrams_rejected += 1;
                    }
                }
                _ => {
                    inner::encode(&pkt, &mut self.scratch);
                    self.stats.inner_in += 1;
                    if self
                        .session
                        .handle_inner_packet(now, &self.scratch)
                        .is_err()
                    {
                        self.stats.inner_refused += 1;
                    }
                }
            }
            self.drive(now, out);
            drove = true;
        }
        if !drove {
            self.drive(now, out);
        }
        if self.pump_app(now) {
            self.drive(now, out);
        }
    }

    /// Runs the stream application; whether it gave the session anything to send.
    fn pump_app(&mut self, now: Time) -> bool {
        let Some(app) = &mut self.app else {
            return false;
        };
        let events = std::mem::take(&mut self.events);
        match app {
            StreamApp::Source { start, stream } => {
                if now < *start {
                    return false;
                }
                let id = match stream {
                    Some(id) => *id,
                    None => match self.session.open_stream(now, b"ftp") {
                        Ok(id) => *stream.insert(id),
                        Err(_) => return false,
                    },
                };
                self.scratch.resize(64 << 10, 0);
                let mut wrote = false;
                while self.session.stream_buffered().0 < SOURCE_AHEAD {
                    match self.session.stream_write(now, id, &self.scratch) {
                        Ok(n) if n > 0 => wrote = true,
                        _ => break,
                    }
                }
                wrote
            }
            StreamApp::Sink {
                bytes,
                bins,
                bin,
                open,
            } => {
                let mut replied = false;
                for e in events {
                    if let Event::Stream(StreamEvent::Opened { id, .. }) = e {
                        open.push(id);
                        // Nothing goes back: end this side's direction at once.
                        replied |= self.session.stream_finish(now, id).is_ok();
                    }
                }
                self.scratch.resize(64 << 10, 0);
                let index = (now.as_nanos() / bin.as_nanos().max(1) as u64) as usize;
                for id in open.iter() {
                    while let Ok(r) = self.session.stream_read(now, *id, &mut self.scratch) {
                        if r.len == 0 {
                            break;
                        }
                        *bytes += r.len as u64;
                        if bins.len() <= index {
                            bins.resize(index + 1, 0);
                        }
                        bins[index] += r.len as u64;
                        replied = true;
                    }
                }
                replied
            }
        }
    }

    fn drive(&mut self, now: Time, out: &mut Outbox) {
        let mut io = GatewayIo {
            out,
            path_flows: &self.path_flows,
            stats: &mut self.stats,
            outer_header: self.outer_header,
            events: &mut self.events,
        };
        self.next = drive(&mut self.session, now, &mut io, &mut self.buf);
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        match &self.app {
            Some(StreamApp::Source {
                start,
                stream: None,
            }) => Some(self.next.map_or(*start, |n| n.min(*start))),
            _ => self.next,
        }
    }
}

struct GatewayIo<'a> {
    out: &'a mut Outbox,
    path_flows: &'a [FlowId],
    stats: &'a mut GatewayStats,
    outer_header: u32,
    events: &'a mut Vec<Event>,
}

impl Io for GatewayIo<'_> {
    fn transmit(&mut self, _now: Time, path: PathId, datagram: &[u8]) {
        let Some(flow) = self.path_flows.get(path.index()) else {
            return;
        };
        self.stats.sent_per_path[path.index()] += 1;
        let size = u32::try_from(datagram.len())
            .unwrap_or(u32::MAX)
            .saturating_add(self.outer_header);
        self.out.send(Packet {
            flow: *flow,
            size,
            body: Body::Plait {
                path,
                bytes: datagram.to_vec(),
            },
        });
    }

    fn deliver(&mut self, _now: Time, packet: &[u8], info: &Delivery) {
        self.stats.delivered += 1;
        let us = info.held_for.min(Duration::from_secs(3600)).as_micros();
        self.stats
            .held_us
            .push(u32::try_from(us).unwrap_or(u32::MAX));
        if let Some(pkt) = inner::decode(packet) {
            self.out.forward(pkt);
        }
    }

    fn event(&mut self, _now: Time, event: Event) {
        if matches!(event, Event::Stream(_)) {
            self.events.push(event);
        }
    }
}
