//! One direction of one link: loss at the input, a bounded queue, serialisation at the
//! link rate, then propagation — a sans-IO state machine the simulator drives with one timer.
//!
//! Owns: the queue, the packet in service, the propagation pipeline, the loss state and the
//! link's own `ChaCha8Rng`.
//!
//! Call order (driver contract): every `&mut` method taking `now` first brings the link
//! up to `now` (serialisations finishing at or before `now` start their propagation and the
//! next packet starts serialising at the instant its predecessor finished). A driver keeps
//! one timer at [`Link::next_event`] and, when it fires, drains [`Link::poll_delivery`].
//! `now` must never decrease between calls. At equal times, serialisation completions are
//! processed before an arrival, so an arrival at `t` never competes with packets already
//! waiting for the slot that frees at `t`.
//!
//! Conventions:
//! - Arrival (ns-2 attaches error models at the link input): a down link refuses with
//!   `DroppedDown`; then the loss model may drop (`DroppedLoss`); then the queue limit
//!   (`DroppedQueueFull`); else the packet waits, or starts serialising at once if the link
//!   is idle. A refused arrival is handed back inside the [`Enqueue`] variant.
//! - The queue limit counts the packet in service (ns-2 DropTail parity: limit 50 = 49
//!   waiting + 1 serialising); see [`super::QueueLimit`].
//! - Serialisation time = `size * 8 / rate` rounded to the nearest ns (see `config.rs`); a
//!   packet arrives at the far end at `start + serialisation + delay`; packets arrive in the
//!   order they were serialised.
//! - `set_rate(now, r)` applies to packets that start serialising at or after `now`; the
//!   packet in service keeps its finish time. A non-positive rate stalls the link.
//! - `set_up(now, false)` is a carrier loss: the packet in service and every waiting packet
//!   are dropped (counted as `dropped_down`, handed out by [`Link::poll_dropped`]); packets
//!   already propagating still arrive; arrivals while down are refused with `DroppedDown`.
//! - Packets dropped after having been accepted (the down flush, WFQ longest-queue-drop push
//!   out) come out of [`Link::poll_dropped`]; the driver should drain it after `enqueue`
//!   and `set_up` (it holds them until then).

use std::collections::VecDeque;
use std::time::Duration;

use plait_proto::Time;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

use super::config::{LinkConfig, TxRate, nanos};
use super::loss::LossState;
use super::queue::PacketQueue;
use crate::packet::Packet;

/// Why a link dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// The buffer was full (or, with longest-queue drop, the packet was pushed out).
    QueueFull,
    /// The loss model dropped it on arrival.
    Loss,
    /// The link was down, or went down while it waited or was being serialised.
    Down,
}

/// What became of an arriving packet; a refused packet is given back.
#[must_use = "a refused packet is handed back inside the variant"]
#[derive(Debug, PartialEq, Eq)]
pub enum Enqueue {
    /// Accepted: waiting, or already serialising.
    Queued,
    /// Refused: no room in the buffer.
    DroppedQueueFull(Packet),
    /// Refused: lost by the loss model.
    DroppedLoss(Packet),
    /// Refused: the link is down.
    DroppedDown(Packet),
}

impl Enqueue {
    /// Whether the packet was accepted.
    pub fn is_queued(&self) -> bool {
        matches!(self, Enqueue::Queued)
    }

    /// The refused packet and why, or `None` if it was accepted.
    pub fn into_dropped(self) -> Option<(Packet, DropCause)> {
        match self {
            Enqueue::Queued => None,
            Enqueue::DroppedQueueFull(p) => Some((p, DropCause::QueueFull)),
            Enqueue::DroppedLoss(p) => Some((p, DropCause::Loss)),
            Enqueue::DroppedDown(p) => Some((p, DropCause::Down)),
        }
    }
}

/// A packet the link dropped after accepting it (see [`Link::poll_dropped`]).
#[derive(Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The packet.
    pub packet: Packet,
    /// Why.
    pub cause: DropCause,
    /// When.
    pub at: Time,
}

/// Counters of one link; every packet offered is counted once as accepted or refused, and
/// every accepted one ends delivered, dropped, or still at the link.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered to `enqueue`.
    pub arrived: u64,
    /// Packets accepted (queued or sent straight into service).
    pub enqueued: u64,
    /// Bytes accepted.
    pub enqueued_bytes: u64,
    /// Packets handed out by `poll_delivery`.
    pub delivered: u64,
    /// Bytes handed out by `poll_delivery`.
    pub delivered_bytes: u64,
    /// Packets dropped because the buffer was full (refused or pushed out).
    pub dropped_queue_full: u64,
    /// Packets dropped by the loss model.
    pub dropped_loss: u64,
    /// Packets dropped because the link was or went down.
    pub dropped_down: u64,
    /// Bytes dropped, all causes.
    pub dropped_bytes: u64,
    /// Most packets ever waiting (excluding the one in service).
    pub max_queued_packets: usize,
    /// Most bytes ever waiting (excluding the one in service).
    pub max_queued_bytes: usize,
    /// Time spent serialising, counted when a serialisation completes (or is cut short by
    /// the link going down).
    pub busy: Duration,
}

#[derive(Debug)]
struct InService {
    pkt: Packet,
    start: Time,
    finish: Time,
}

/// One direction of one link (see the module docs for the call order and conventions).
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    rate: TxRate,
    delay_ns: u64,
    up: bool,
    queue: PacketQueue,
    serving: Option<InService>,
    /// Packets propagating, with their arrival times (non-decreasing).
    pipeline: VecDeque<(Time, Packet)>,
    dropped: VecDeque<Dropped>,
    loss: LossState,
    rng: ChaCha8Rng,
    stats: LinkStats,
}

impl Link {
    /// A link, up and idle, whose randomness comes from `seed` alone.
    pub fn new(config: LinkConfig, seed: u64) -> Link {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let loss = LossState::new(config.loss, &mut rng);
        Link {
            rate: TxRate::new(config.rate_bps),
            delay_ns: nanos(config.delay),
            up: true,
            queue: PacketQueue::new(config.discipline, config.queue.limit),
            serving: None,
            pipeline: VecDeque::new(),
            dropped: VecDeque::new(),
            loss,
            rng,
            stats: LinkStats::default(),
            config,
        }
    }

    /// A packet arrives at the link's input at `now`.
    pub fn enqueue(&mut self, now: Time, pkt: Packet) -> Enqueue {
        self.advance(now);
        self.stats.arrived += 1;
        if !self.up {
            self.count_drop(DropCause::Down, pkt.size);
            return Enqueue::DroppedDown(pkt);
        }
        if self.loss.drops(now, &mut self.rng) {
            self.count_drop(DropCause::Loss, pkt.size);
            return Enqueue::DroppedLoss(pkt);
        }
        let size = pkt.size;
        let in_service = self.serving.as_ref().map(|s| s.pkt.size);
        let (dropped, stats) = (&mut self.dropped, &mut self.stats);
        let admitted = self.queue.admit(pkt, in_service, |victim| {
            stats.dropped_queue_full += 1;
            stats.dropped_bytes += u64::from(victim.size);
            dropped.push_back(Dropped {
                packet: victim,
                cause: DropCause::QueueFull,
                at: now,
            });
        });
        if let Err(pkt) = admitted {
            self.count_drop(DropCause::QueueFull, pkt.size);
            return Enqueue::DroppedQueueFull(pkt);
        }
        self.stats.enqueued += 1;
        self.stats.enqueued_bytes += u64::from(size);
        if self.serving.is_none() {
            self.start_next(now);
        }
        self.stats.max_queued_packets = self.stats.max_queued_packets.max(self.queue.len());
        self.stats.max_queued_bytes = self.stats.max_queued_bytes.max(self.queue.bytes());
        Enqueue::Queued
    }

    /// The earliest time something happens at the link: a serialisation finishing or a
    /// packet reaching the far end. `None` when idle with nothing propagating (or stalled).
    pub fn next_event(&self) -> Option<Time> {
        let finish = self.serving.as_ref().map(|s| s.finish);
        let arrival = self.pipeline.front().map(|&(t, _)| t);
        match (finish, arrival) {
            (Some(f), Some(a)) => Some(f.min(a)),
            (f, a) => f.or(a),
        }
    }

    /// The earliest time a packet reaches the far end, as things stand now. A driver may
    /// wake only then (one event per packet instead of two) if it calls [`Link::advance`]
    /// before reading `queued_*` or `stats` at other times.
    pub fn next_delivery(&self) -> Option<Time> {
        match self.pipeline.front() {
            Some(&(t, _)) => Some(t),
            None => self.serving.as_ref().map(|s| self.arrival_of(s.finish)),
        }
    }

    /// Brings the link up to `now` (done by every `&mut` method; see the module docs).
    pub fn advance(&mut self, now: Time) {
        while let Some(s) = &self.serving {
            if s.finish > now {
                break;
            }
            self.complete(s.finish);
        }
    }

    /// Packets that reached the far end by `now`, in order (call until `None`).
    pub fn poll_delivery(&mut self, now: Time) -> Option<Packet> {
        self.poll_delivery_at(now).map(|(_, p)| p)
    }

    /// As [`Link::poll_delivery`], with the exact time the packet reached the far end (for
    /// drivers that poll later than [`Link::next_event`]).
    pub fn poll_delivery_at(&mut self, now: Time) -> Option<(Time, Packet)> {
        self.advance(now);
        if self.pipeline.front()?.0 > now {
            return None;
        }
        let (t, pkt) = self.pipeline.pop_front()?;
        self.stats.delivered += 1;
        self.stats.delivered_bytes += u64::from(pkt.size);
        Some((t, pkt))
    }

    /// Packets dropped after being accepted (down flush, longest-queue-drop push out), in
    /// the order they were dropped (call until `None`). Already counted in [`LinkStats`].
    pub fn poll_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    /// Sets the rate for packets that start serialising at or after `now`.
    pub fn set_rate(&mut self, now: Time, rate_bps: f64) {
        // Completions strictly before `now` start their successors at the old rate.
        while let Some(s) = &self.serving {
            if s.finish >= now {
                break;
            }
            self.complete(s.finish);
        }
        self.config.rate_bps = rate_bps;
        self.rate = TxRate::new(rate_bps);
        self.advance(now);
        if self.serving.is_none() {
            self.start_next(now); // leaving a stall
        }
    }

    /// Replaces the loss model from now on (a fresh chain, drawn from the link's own
    /// generator, so runs stay reproducible).
    pub fn set_loss(&mut self, model: plait_topology::LossModel) {
        self.config.loss = model;
        self.loss = LossState::new(model, &mut self.rng);
    }

    /// Brings the link up or down at `now` (see the module docs for what down does).
    pub fn set_up(&mut self, now: Time, up: bool) {
        self.advance(now);
        if up == self.up {
            return;
        }
        self.up = up;
        if up {
            return;
        }
        if let Some(s) = self.serving.take() {
            self.stats.busy += now - s.start;
            self.drop_accepted(s.pkt, DropCause::Down, now);
        }
        while let Some(pkt) = self.queue.pop() {
            self.drop_accepted(pkt, DropCause::Down, now);
        }
    }

    /// Counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Packets waiting (excluding the one in service).
    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }

    /// Bytes waiting (excluding the one in service).
    pub fn queued_bytes(&self) -> usize {
        self.queue.bytes()
    }

    /// Whether a packet is being serialised.
    pub fn is_busy(&self) -> bool {
        self.serving.is_some()
    }

    /// Whether the link is up.
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Packets serialised but not yet delivered.
    pub fn propagating_packets(&self) -> usize {
        self.pipeline.len()
    }

    /// The configuration, with the current rate.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    fn arrival_of(&self, finish: Time) -> Time {
        Time::from_nanos(finish.as_nanos().saturating_add(self.delay_ns))
    }

    /// The packet in service finished at `at`: propagate it, start the next.
    fn complete(&mut self, at: Time) {
        let Some(s) = self.serving.take() else {
            return;
        };
        self.stats.busy += at - s.start;
        self.pipeline.push_back((self.arrival_of(at), s.pkt));
        self.start_next(at);
    }

    /// Starts serialising the next waiting packet at `at`, if up and not stalled.
    fn start_next(&mut self, at: Time) {
        if !self.up || matches!(self.rate, TxRate::Stalled) {
            return;
        }
        let Some(pkt) = self.queue.pop() else {
            return;
        };
        // Only a stalled rate has no serialisation time, and that was ruled out above.
        let tx = self.rate.tx_nanos(pkt.size).unwrap_or(u64::MAX);
        let finish = Time::from_nanos(at.as_nanos().saturating_add(tx));
        self.serving = Some(InService {
            pkt,
            start: at,
            finish,
        });
    }

    fn count_drop(&mut self, cause: DropCause, size: u32) {
        match cause {
            DropCause::QueueFull => self.stats.dropped_queue_full += 1,
            DropCause::Loss => self.stats.dropped_loss += 1,
            DropCause::Down => self.stats.dropped_down += 1,
        }
        self.stats.dropped_bytes += u64::from(size);
    }

    fn drop_accepted(&mut self, packet: Packet, cause: DropCause, at: Time) {
        self.count_drop(cause, packet.size);
        self.dropped.push_back(Dropped { packet, cause, at });
    }
}
