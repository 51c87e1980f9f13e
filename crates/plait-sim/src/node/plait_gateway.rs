//! A plait engine as a simulated node: it takes inner packets from its LAN side, hands them
//! to a real `plait_proto::Session`, and sends the datagrams the session produces on its
//! paths; datagrams from its paths go into the session, and the inner packets it delivers
//! continue along their flow's route from this node. The session is driven only through
//! `plait_proto::drive`, as the tunnel daemon drives it.

use std::collections::VecDeque;
use std::time::Duration;

use plait_proto::{Delivery, Io, PathId, Session, Time, drive};

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
        }
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
    }

    fn drive(&mut self, now: Time, out: &mut Outbox) {
        let mut io = GatewayIo {
            out,
            path_flows: &self.path_flows,
            stats: &mut self.stats,
            outer_header: self.outer_header,
        };
        self.next = drive(&mut self.session, now, &mut io, &mut self.buf);
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        self.next
    }
}

struct GatewayIo<'a> {
    out: &'a mut Outbox,
    path_flows: &'a [FlowId],
    stats: &'a mut GatewayStats,
    outer_header: u32,
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
}
