//! The session's send queue: inner packets accepted from the driver and not yet placed on
//! a path, kept the way FQ-CoDel keeps a router's queue (RFC 8290), so a sparse flow (a
//! call, DNS, TCP ACKs) is not stuck behind a bulk transfer and no flow keeps a standing
//! queue (docs/protocol.md#send-queue).
//!
//! - Classification (RFC 8290 §4.1): a packet's 5-tuple ([`crate::inner_ip::flow_key`]) is
//!   hashed with a keyed SipHash-2-4 (the `siphasher` crate; the key comes from the
//!   constructor, the session draws it from its seed, so a sender that does not know it
//!   cannot aim many flows at one queue: RFC 8290 §5.3) into one of `flows` queues;
//!   packets with no 5-tuple (not IP, truncated) all share one extra queue.
//! - Scheduling (RFC 8290 §4.2): deficit round robin with a byte `quantum`, the list of new
//!   flows served before the list of old ones; a new flow that empties joins the old list,
//!   an old flow that empties leaves the lists.
//! - AQM (RFC 8290 §4.2, RFC 8289): CoDel ([`codel`]) on each flow's head, by sojourn time
//!   (`now - arrival`); ECN-capable packets are marked CE instead of dropped (RFC 3168).
//! - Overflow (RFC 8290 §4.1): when a new packet takes the queue past `max_packets` or
//!   `max_bytes`, packets are dropped from the head of the flow with the largest byte
//!   backlog until it fits, so the new packet gets in unless its own flow was the one to
//!   shorten and it was that flow's only packet. A packet larger than `max_bytes` is
//!   refused outright.
//!
//! Differences from RFC 8290 and Linux's fq_codel: no clock (time is the session's `now`);
//! [`FlowQueue::head`] decides (DRR, CoDel) and shows the packet before [`FlowQueue::pop`]
//! takes it, because the session asks its scheduler about a packet before sending it, so
//! CoDel measures a packet's sojourn when it becomes the head the session considers; an
//! overflow drops one packet at a time (Linux drops up to half the fat flow at once); the
//! non-starvation test uses the whole queue's backlog and the session's largest inner
//! packet, as Linux does.
//!
//! Invariants:
//! - after every call, at most `max_packets` packets and `max_bytes` bytes are queued
//!   (one packet more, briefly, inside `push`);
//! - a flow holding packets is on exactly one of the two lists; a flow on no list is empty;
//! - the packet `head` returned is what `pop` returns, unchanged, until the next `push` or
//!   `pop`; a head CoDel let through (or marked) is not judged again;
//! - steady state allocates nothing per packet (slots, lists and buffers are reused);
//! - deterministic: no clock, no randomness; same key and inputs, same outputs.

mod codel;
#[cfg(test)]
mod codel_tests;
#[cfg(test)]
mod proptests;
mod sparse;
mod store;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::hash::Hasher;

use siphasher::sip::SipHasher24;

pub use codel::CodelParams;
use codel::{Codel, CodelQueue};
use sparse::SparseMeter;
use store::{Fifo, Store};

use crate::config::Config;
use crate::time::Time;

/// An inner packet waiting to be scheduled.
#[derive(Debug)]
pub struct Queued {
    /// When the driver handed it in (`a_i` of seed PET-BMP eq. 1).
    pub arrival: Time,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Set by [`FlowQueue::head`] and [`FlowQueue::pop`]: its flow is sparse (at most the
    /// configured rate) and not TCP ([`may_leave_the_order`]), so the peer may deliver it
    /// out of the global order (docs/protocol.md#unordered).
    pub sparse: bool,
    /// Set with `sparse`: its flow is at most [`FlowQueueConfig::fec_sparse_bytes`]
    /// (docs/protocol.md#fec, policy `sparse`).
    pub fec_sparse: bool,
}

/// The send queue's bounds and parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowQueueConfig {
    /// Most packets queued.
    pub max_packets: usize,
    /// Most bytes queued.
    pub max_bytes: usize,
    /// Flow queues the hash spreads classified packets over (RFC 8290 §5.2.5).
    pub flows: usize,
    /// DRR quantum in bytes (RFC 8290 §5.2.4).
    pub quantum: usize,
    /// CoDel's parameters.
    pub codel: CodelParams,
    /// Flows sending at most this many bytes per [`sparse::WINDOW`] are sparse (0: none).
    pub sparse_bytes: u64,
    /// Flows sending at most this many bytes per [`sparse::WINDOW`] get FEC under the
    /// `sparse` policy (0: none).
    pub fec_sparse_bytes: u64,
}

impl FlowQueueConfig {
    /// The send queue of a session with this configuration.
    pub fn of(c: &Config) -> FlowQueueConfig {
        FlowQueueConfig {
            max_packets: c.send_queue_packets,
            max_bytes: c.send_queue_bytes,
            flows: c.send_queue_flows,
            quantum: c.send_queue_quantum,
            codel: CodelParams {
                target: c.send_queue_target,
                interval: c.send_queue_interval,
                max_packet: c.max_inner_packet(),
                ecn: c.send_queue_ecn,
            },
            sparse_bytes: c.unordered_below_bps / 8 * sparse::WINDOW.as_millis() as u64 / 1000,
            fec_sparse_bytes: if c.fec.policy == crate::fec::FecPolicy::Sparse {
                c.fec.sparse_below_bps / 8 * sparse::WINDOW.as_millis() as u64 / 1000
            } else {
                0
            },
        }
    }
}

/// What became of a pushed packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pushed {
    /// The new packet is queued (`false`: larger than the byte bound, or dropped at once as
    /// the only packet of the flow that had to shorten).
    pub queued: bool,
    /// Packets already queued that were dropped to make room.
    pub dropped: u64,
}

/// The send queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowQueueStats {
    /// Packets CoDel dropped.
    pub codel_drops: u64,
    /// Packets CoDel marked CE instead of dropping.
    pub ce_marks: u64,
    /// Queued packets dropped to make room for a new one.
    pub overflow_drops: u64,
    /// New packets not queued (see [`Pushed::queued`]).
    pub refused: u64,
}

/// Which list a flow is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

/// Whether a sparse flow's packet may be delivered out of the global order
/// (docs/protocol.md#unordered): any classified packet but TCP's. A TCP flow's sparse
/// direction is usually its ACKs, whose rate follows the data's and so crosses any
/// threshold back and forth, and each crossing can reorder the flow against itself. With
/// TCP unordered, packet mode on the test bed's T1 ran at about 0.7 of the links in 6 of
/// 21 runs (0.89 in every run kept in order).
fn may_leave_the_order(packet: &[u8]) -> bool {
    crate::inner_ip::flow_key(packet).is_some_and(|k| !k.is_tcp())
}

#[derive(Debug)]
struct Flow {
    fifo: Fifo,
    deficit: i64,
    list: List,
    /// CoDel has judged the head (let it through or marked it).
    vetted: bool,
    codel: Codel,
    sparse: SparseMeter,
}

/// The flow-queued send queue (see the module docs).
#[derive(Debug)]
pub struct FlowQueue {
    store: Store,
    /// `flows` hashed queues, then the queue of unclassified packets.
    flows: Vec<Flow>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    /// The flow whose head the next `pop` returns, once `head` decided it.
    selected: Option<u32>,
    config: FlowQueueConfig,
    key: [u64; 2],
    /// The latest time seen (time only moves forward).
    now: Time,
    stats: FlowQueueStats,
}

impl FlowQueue {
    /// An empty queue; `key` keys the flow hash.
    pub fn new(config: FlowQueueConfig, key: [u64; 2]) -> FlowQueue {
        let n = config.flows.max(1) + 1;
        FlowQueue {
            store: Store::default(),
            flows: (0..n)
                .map(|_| Flow {
                    fifo: Fifo::default(),
                    deficit: 0,
                    list: List::None,
                    vetted: false,
                    codel: Codel::default(),
                    sparse: SparseMeter::default(),
                })
                .collect(),
            new_flows: VecDeque::with_capacity(n),
            old_flows: VecDeque::with_capacity(n),
            selected: None,
            config,
            key,
            now: Time::ZERO,
            stats: FlowQueueStats::default(),
        }
    }

    /// Queues a copy of `packet`, which arrived at `arrival`, dropping from the fattest
    /// flow's head if the bounds require (RFC 8290 §4.1).
    pub fn push(&mut self, arrival: Time, packet: &[u8]) -> Pushed {
        self.now = self.now.max(arrival);
        if packet.len() > self.config.max_bytes {
            self.stats.refused += 1;
            return Pushed::default();
        }
        self.selected = None;
        let f = self.classify(packet);
        let quantum = self.quantum();
        let flow = &mut self.flows[f];
        flow.sparse.add(arrival, packet.len());
        let slot = self.store.push_back(&mut flow.fifo, arrival, packet);
        if flow.list == List::None {
            flow.list = List::New;
            flow.deficit = quantum;
            self.new_flows.push_back(f as u32);
        }
        let mut out = Pushed {
            queued: true,
            dropped: 0,
        };
        while self.store.len > self.config.max_packets || self.store.bytes > self.config.max_bytes {
            let Some(fat) = self.fattest() else { break };
            let flow = &mut self.flows[fat];
            flow.vetted = false;
            if self.store.drop_front(&mut flow.fifo) == Some(slot) {
                out.queued = false;
                self.stats.refused += 1;
            } else {
                out.dropped += 1;
                self.stats.overflow_drops += 1;
            }
        }
        out
    }

    /// Decides which packet goes next, at `now`: the DRR choice of flow (RFC 8290 §4.2),
    /// after CoDel dropped or marked that flow's head as due. The packet shown is what
    /// [`FlowQueue::pop`] returns, until the next `push` or `pop`.
    pub fn head(&mut self, now: Time) -> Option<&Queued> {
        self.now = self.now.max(now);
        let f = self.select()?;
        let sparse = self.is_sparse(f, self.config.sparse_bytes);
        let fec_sparse = self.is_sparse(f, self.config.fec_sparse_bytes);
        let head = self.store.front_mut(&self.flows[f].fifo)?;
        head.sparse = sparse && may_leave_the_order(&head.bytes);
        head.fec_sparse = fec_sparse;
        Some(head)
    }

    /// Whether flow `f` is sparse now (never the queue of unclassified packets).
    /// For delivery out of the global order, [`may_leave_the_order`] must allow it too.
    fn is_sparse(&mut self, f: usize, limit: u64) -> bool {
        let classified = f + 1 < self.flows.len();
        let now = self.now;
        classified && limit > 0 && self.flows[f].sparse.is_sparse(now, limit)
    }

    /// Removes the packet [`FlowQueue::head`] shows (deciding it now if `head` was not
    /// asked since the last change); hand its buffer back with [`FlowQueue::recycle`].
    pub fn pop(&mut self) -> Option<Queued> {
        let f = self.select()?;
        self.selected = None;
        let sparse = self.is_sparse(f, self.config.sparse_bytes);
        let fec_sparse = self.is_sparse(f, self.config.fec_sparse_bytes);
        let flow = &mut self.flows[f];
        let (_, mut packet) = self.store.pop_front(&mut flow.fifo)?;
        packet.sparse = sparse && may_leave_the_order(&packet.bytes);
        packet.fec_sparse = fec_sparse;
        flow.vetted = false;
        flow.deficit -= packet.bytes.len() as i64;
        Some(packet)
    }

    /// Returns a buffer to the pool.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.store.recycle(buf);
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.store.len
    }

    /// Bytes queued.
    pub fn bytes(&self) -> usize {
        self.store.bytes
    }

    /// The counters.
    pub fn stats(&self) -> FlowQueueStats {
        self.stats
    }

    /// No later than the arrival of the packet `head` shows next: its arrival if `head`
    /// already decided, else the earliest arrival among the flows' oldest packets. `None`
    /// when empty. (For deadlines that need no `&mut`.)
    pub fn head_arrival_bound(&self) -> Option<Time> {
        if let Some(f) = self.selected {
            return self
                .store
                .front(&self.flows[f as usize].fifo)
                .map(|q| q.arrival);
        }
        self.active()
            .filter_map(|f| self.store.front(&self.flows[f].fifo))
            .map(|q| q.arrival)
            .min()
    }

    /// The flow queue `packet` belongs to.
    fn classify(&self, packet: &[u8]) -> usize {
        let hashed = self.flows.len() - 1;
        match crate::inner_ip::flow_key(packet) {
            Some(key) => {
                let mut hasher = SipHasher24::new_with_keys(self.key[0], self.key[1]);
                hasher.write(key.as_bytes());
                let h = hasher.finish();
                // Multiply-shift onto 0..hashed (Lemire), unbiased enough and no division.
                ((u128::from(h) * hashed as u128) >> 64) as usize
            }
            None => hashed,
        }
    }

    fn quantum(&self) -> i64 {
        self.config.quantum.max(1) as i64
    }

    /// Flows on the lists, new then old.
    fn active(&self) -> impl Iterator<Item = usize> + '_ {
        self.new_flows
            .iter()
            .chain(self.old_flows.iter())
            .map(|&f| f as usize)
    }

    /// The flow with the most bytes queued (then the most packets; the first such in list
    /// order); `None` if nothing is queued.
    fn fattest(&self) -> Option<usize> {
        let mut best: Option<(usize, (usize, usize))> = None;
        for f in self.active() {
            let fifo = &self.flows[f].fifo;
            let size = (fifo.bytes, fifo.len);
            if fifo.len > 0 && best.is_none_or(|(_, b)| size > b) {
                best = Some((f, size));
            }
        }
        best.map(|(f, _)| f)
    }

    /// RFC 8290 §4.2: the flow to serve next, with CoDel applied to its head.
    fn select(&mut self) -> Option<usize> {
        if let Some(f) = self.selected {
            return Some(f as usize);
        }
        loop {
            let (from_new, f) = match self.new_flows.front() {
                Some(&f) => (true, f),
                None => (false, *self.old_flows.front()?),
            };
            let quantum = self.quantum();
            let flow = &mut self.flows[f as usize];
            if flow.deficit <= 0 {
                // Out of credit: a new quantum, and to the back of the old list.
                flow.deficit += quantum;
                flow.list = List::Old;
                self.take_front(from_new);
                self.old_flows.push_back(f);
                continue;
            }
            if !flow.vetted {
                let mut head = Head {
                    store: &mut self.store,
                    fifo: &mut flow.fifo,
                };
                let verdict = flow.codel.decide(self.now, &self.config.codel, &mut head);
                self.stats.codel_drops += verdict.dropped;
                self.stats.ce_marks += u64::from(verdict.marked);
                flow.vetted = !flow.fifo.is_empty();
            }
            if flow.fifo.is_empty() {
                // A new flow that empties goes to the old list (so it cannot come back as
                // new at once and jump the queue); an old one leaves the lists.
                self.take_front(from_new);
                let flow = &mut self.flows[f as usize];
                if from_new {
                    flow.list = List::Old;
                    self.old_flows.push_back(f);
                } else {
                    flow.list = List::None;
                }
                continue;
            }
            self.selected = Some(f);
            return Some(f as usize);
        }
    }

    fn take_front(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }
}

/// One flow's FIFO as CoDel sees it.
struct Head<'a> {
    store: &'a mut Store,
    fifo: &'a mut Fifo,
}

impl CodelQueue for Head<'_> {
    fn head_arrival(&self) -> Option<Time> {
        self.store.front(self.fifo).map(|q| q.arrival)
    }

    fn backlog_behind_head(&self) -> usize {
        let head = self.store.front(self.fifo).map_or(0, |q| q.bytes.len());
        self.store.bytes - head
    }

    fn drop_head(&mut self) {
        self.store.drop_front(self.fifo);
    }

    fn mark_head(&mut self) -> bool {
        self.store
            .front_mut(self.fifo)
            .is_some_and(|q| crate::inner_ip::mark_ce(&mut q.bytes))
    }
}
