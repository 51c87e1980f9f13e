//! The simulated world: links, nodes, per-flow routes and the event loop that runs them.
//!
//! - A packet belongs to a flow; each flow has a route, a list of hops (links and nodes).
//!   A node originating a packet puts it on the first hop of its flow's route; a node
//!   forwarding one puts it on the hop after itself; a link delivering one hands it to the
//!   hop after itself. Plait gateways do not forward: they tunnel (the far gateway forwards
//!   what it delivers, from its own place in the route).
//! - Every link and node has one wake-up in the [`EventQueue`]; after any input a component
//!   is rescheduled at its next event. A node that received packets wakes at the same
//!   instant, after everything else due then, so packets arriving together are handled in
//!   one wake-up, as the daemon reads a batch of datagrams (a plait gateway still drives its
//!   engine after each of them, as the daemon's endpoints do).
//!
//! Invariants: time never goes backwards; ties are broken by insertion order; nothing here
//! reads a clock or a global RNG, so a run is a pure function of its inputs.

use std::time::Duration;

use plait_proto::Time;

use crate::event::{EventQueue, Target, Wakeup};
use crate::net::{Link, LinkConfig};
use crate::node::{Node, Outbox};
use crate::packet::FlowId;
use crate::route::{Hop, LinkId, NodeId, Routing};

/// A change applied at a scheduled time.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A link's rate becomes this (bits per second).
    Rate(LinkId, f64),
    /// A link goes up (`true`) or down.
    Up(LinkId, bool),
    /// A link's loss model becomes this one.
    Loss(LinkId, plait_topology::LossModel),
}

/// Bytes of each flow that links delivered to a node, in total and per time bin (for
/// per-path throughput and plots).
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// Bin width.
    pub bin: Duration,
    /// `bins[flow][i]`: bytes of `flow` delivered to a node during bin `i`.
    pub bins: Vec<Vec<u64>>,
    /// `total[flow]`: bytes of `flow` delivered to a node.
    pub total: Vec<u64>,
}

impl Recorder {
    fn record(&mut self, flow: FlowId, now: Time, bytes: u32) {
        let f = flow as usize;
        if self.bins.len() <= f {
            self.bins.resize(f + 1, Vec::new());
            self.total.resize(f + 1, 0);
        }
        let i = (now.as_nanos() / self.bin.as_nanos().max(1) as u64) as usize;
        let bins = &mut self.bins[f];
        if bins.len() <= i {
            bins.resize(i + 1, 0);
        }
        bins[i] += u64::from(bytes);
        self.total[f] += u64::from(bytes);
    }

    /// Bytes of `flow` delivered to a node.
    pub fn total(&self, flow: FlowId) -> u64 {
        self.total.get(flow as usize).copied().unwrap_or(0)
    }

    /// Per-bin bytes of `flow`.
    pub fn series(&self, flow: FlowId) -> &[u64] {
        self.bins.get(flow as usize).map_or(&[], Vec::as_slice)
    }
}

#[derive(Debug)]
struct LinkSlot {
    link: Link,
    wake: Wakeup,
}

#[derive(Debug)]
struct NodeSlot {
    node: Node,
    wake: Wakeup,
}

/// Links, nodes, routes and the clock (see the module docs).
#[derive(Debug)]
pub struct World {
    now: Time,
    queue: EventQueue,
    links: Vec<LinkSlot>,
    nodes: Vec<NodeSlot>,
    routes: Vec<Vec<Hop>>,
    schedule: Vec<(Time, Change)>,
    next_change: usize,
    schedule_wake: Wakeup,
    outbox: Outbox,
    /// Per-link delivered bytes over time.
    pub recorder: Recorder,
    /// Packets whose flow has no next hop (a routing mistake in a topology), dropped.
    pub unroutable: u64,
    /// Packets links dropped after accepting them (down flush, WFQ push-out); links count
    /// every drop in their own stats too.
    pub dropped_after_accept: u64,
}

impl World {
    /// An empty world; throughput is recorded in bins of `bin`.
    pub fn new(bin: Duration) -> World {
        World {
            now: Time::ZERO,
            queue: EventQueue::default(),
            links: Vec::new(),
            nodes: Vec::new(),
            routes: Vec::new(),
            schedule: Vec::new(),
            next_change: 0,
            schedule_wake: Wakeup::default(),
            outbox: Outbox::default(),
            recorder: Recorder {
                bin,
                ..Recorder::default()
            },
            unroutable: 0,
            dropped_after_accept: 0,
        }
    }

    /// Current simulated time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.queue.popped()
    }

    /// Adds a link with its own random seed.
    pub fn add_link(&mut self, config: LinkConfig, seed: u64) -> LinkId {
        self.links.push(LinkSlot {
            link: Link::new(config, seed),
            wake: Wakeup::default(),
        });
        (self.links.len() - 1) as LinkId
    }

    /// Adds a node; it is woken at time zero.
    pub fn add_node(&mut self, node: Node) -> NodeId {
        let id = self.nodes.len() as NodeId;
        let mut wake = Wakeup::default();
        wake.set(&mut self.queue, Target::Node(id), Some(Time::ZERO));
        self.nodes.push(NodeSlot { node, wake });
        id
    }

    /// Sets the route of `flow`.
    pub fn set_route(&mut self, flow: FlowId, hops: Vec<Hop>) {
        let i = flow as usize;
        if self.routes.len() <= i {
            self.routes.resize(i + 1, Vec::new());
        }
        self.routes[i] = hops;
    }

    /// Schedules a change.
    pub fn schedule(&mut self, at: Time, change: Change) {
        self.schedule.push((at, change));
        self.schedule.sort_by_key(|(t, _)| *t); // stable: same-time changes keep their order
        let next = self.schedule.get(self.next_change).map(|(t, _)| *t);
        self.schedule_wake
            .set(&mut self.queue, Target::Schedule, next);
    }

    /// A link (for statistics).
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id as usize].link
    }

    /// A node (for statistics).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize].node
    }

    /// Runs every event up to and including `end`; time is `end` afterwards.
    pub fn run_until(&mut self, end: Time) {
        while let Some(at) = self.queue.peek_time() {
            if at > end {
                break;
            }
            let Some((at, target)) = self.queue.pop() else {
                break;
            };
            self.now = self.now.max(at);
            match target {
                Target::Link(i) => self.wake_link(at, i),
                Target::Node(i) => self.wake_node(at, i),
                Target::Schedule => self.apply_changes(at),
            }
        }
        self.now = self.now.max(end);
    }

    fn wake_link(&mut self, at: Time, i: LinkId) {
        let slot = &mut self.links[i as usize];
        if !slot.wake.take_if_live(at) {
            return;
        }
        let now = self.now;
        while let Some(pkt) = slot.link.poll_delivery(now) {
            match next_hop(&self.routes, pkt.flow, Some(Hop::Link(i))) {
                Some(hop) => {
                    if let Hop::Node(_) = hop {
                        self.recorder.record(pkt.flow, now, pkt.size);
                    }
                    self.outbox.push(Routing::To(hop), pkt);
                }
                None => self.unroutable += 1,
            }
        }
        self.reschedule_link(i);
        self.flush();
    }

    fn wake_node(&mut self, at: Time, i: NodeId) {
        let slot = &mut self.nodes[i as usize];
        if !slot.wake.take_if_live(at) {
            return;
        }
        self.outbox.me = Hop::Node(i);
        slot.node.on_wakeup(self.now, &mut self.outbox);
        self.reschedule_node(i);
        self.flush();
    }

    fn apply_changes(&mut self, at: Time) {
        if !self.schedule_wake.take_if_live(at) {
            return;
        }
        while let Some((t, change)) = self.schedule.get(self.next_change).cloned() {
            if t > self.now {
                break;
            }
            self.next_change += 1;
            let l = match change {
                Change::Rate(l, rate) => {
                    self.links[l as usize].link.set_rate(self.now, rate);
                    l
                }
                Change::Up(l, up) => {
                    self.links[l as usize].link.set_up(self.now, up);
                    l
                }
                Change::Loss(l, model) => {
                    self.links[l as usize].link.set_loss(model);
                    l
                }
            };
            self.reschedule_link(l);
        }
        let next = self.schedule.get(self.next_change).map(|(t, _)| *t);
        self.schedule_wake
            .set(&mut self.queue, Target::Schedule, next);
    }

    /// Routes everything in the outbox: onto links (enqueue) or into nodes (receive).
    fn flush(&mut self) {
        while let Some((from, pkt)) = self.outbox.pop() {
            let hop = match from {
                Routing::Start => next_hop(&self.routes, pkt.flow, None),
                Routing::After(h) => next_hop(&self.routes, pkt.flow, Some(h)),
                Routing::To(h) => Some(h),
            };
            match hop {
                None => self.unroutable += 1,
                Some(Hop::Link(l)) => {
                    // Drops are counted inside the link.
                    let _ = self.links[l as usize].link.enqueue(self.now, pkt);
                    self.reschedule_link(l);
                }
                Some(Hop::Node(n)) => {
                    let slot = &mut self.nodes[n as usize];
                    slot.node.on_receive(self.now, pkt);
                    // Handle it in a batch with anything else arriving now.
                    slot.wake
                        .set(&mut self.queue, Target::Node(n), Some(self.now));
                }
            }
        }
    }

    fn reschedule_link(&mut self, l: LinkId) {
        let slot = &mut self.links[l as usize];
        // Drain what the link dropped after accepting it, so its buffer stays bounded.
        while slot.link.poll_dropped().is_some() {
            self.dropped_after_accept += 1;
        }
        let next = slot.link.next_event();
        slot.wake.set(&mut self.queue, Target::Link(l), next);
    }

    fn reschedule_node(&mut self, n: NodeId) {
        let slot = &mut self.nodes[n as usize];
        let next = slot.node.next_event();
        slot.wake.set(&mut self.queue, Target::Node(n), next);
    }
}

fn next_hop(routes: &[Vec<Hop>], flow: FlowId, from: Option<Hop>) -> Option<Hop> {
    let route = routes.get(flow as usize)?;
    match from {
        None => route.first().copied(),
        Some(h) => {
            let i = route.iter().position(|x| *x == h)?;
            route.get(i + 1).copied()
        }
    }
}
