//! The [`Session`]: one endpoint of a plait session, in packet mode.
//!
//! Both endpoints run the same `Session`: each schedules what it sends and reorders what it
//! receives, so the two directions are symmetric (docs/protocol.md). Inputs come in through
//! `handle_*` methods and path commands; outputs leave through `poll_*` methods. Drivers call
//! them through [`crate::drive`], which fixes the drain order.
//!
//! Invariants:
//! - no input from the network can make it panic or grow without bound: a datagram is
//!   validated whole before any frame acts, and every queue has a hard bound;
//! - global sequence numbers are assigned when a packet leaves the send queue
//!   (`flow_queue/`, FQ-CoDel), in order, so packets dropped while queued leave no hole
//!   for the receiver to wait for;
//! - per-path state lives in `paths`, a `Vec` indexed by [`PathId`].

mod ack_tracker;
mod fec_transmit;
mod flow_queue;
mod handover;
mod paced_spill;
mod receive;
mod repair_store;
mod stream_api;
mod stream_transmit;
mod transmit;
mod types;

use std::collections::VecDeque;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

pub use ack_tracker::{AckTracker, Arrived, MAX_RANGES, MAX_TIMESTAMPS};
pub use types::{
    Delivery, Event, Footprint, PathError, RecvError, SendError, SessionStats, Transmit,
};

use crate::cc::CoupledPath;
use crate::config::{Config, ConfigError};
use crate::ids::{GlobalSeq, MAX_PATHS, PathId, PathSeq};
use crate::path::{OwdReference, Path, PathHints, PathStats, PathView};
use crate::reorder::{AnyReorder, DuplicateFilter, ReorderBuffer, ReorderStats};
use crate::sched::{AnyScheduler, PacketMeta};
use crate::stream::{StreamViolation, Streams};
use crate::time::Time;
use flow_queue::{FlowQueue, FlowQueueConfig};

/// Most events kept for the driver; older ones are dropped (and counted) beyond this.
const MAX_EVENTS: usize = 1024;
/// Most PROBE_ACKs waiting to be sent; further probes go unanswered until they drain.
const MAX_PROBE_ACKS: usize = 64;
/// Most repair requests waiting to be sent; beyond, the oldest are dropped (their holes
/// then wait only for their evidence).
const MAX_REPAIR_REQUESTS: usize = 1024;
/// UNORDERED packets waiting for `poll_delivery` at most; beyond, they keep the order.
const MAX_EXPRESS: usize = 64;
/// Stand-ins of UNORDERED packets remembered at most (the oldest is forgotten first; a
/// forgotten stand-in is delivered as an empty packet, never as a duplicate of data).
const MAX_EXPRESSED: usize = 1024;
/// Repair wait before any round trip is measured.
const INITIAL_REPAIR_WAIT: Duration = Duration::from_millis(200);
/// The stream send-buffer target is this many times the sum of the usable paths'
/// congestion windows (docs/protocol.md#adaptive-send-buffer). Linux TCP keeps about 2;
/// across paths the unacknowledged bytes also hold a slow path's flight after its window
/// was cut and lost bytes waiting to go again, and in the simulator 2 cost up to 19 % of
/// throughput (ETOM Fig. 4 at 1:8), 3 up to 7 %, 4 up to 1.7 % but 22 % for BBR on
/// four-paths-8to1; 8 leaves every simulated result within 0.3 % of the unbounded buffer.
const SEND_TARGET_WINDOWS: u64 = 8;
/// The ChaCha stream of the session's seed that keys the send queue's flow hash (the
/// session's own generator, stream 0, is left as it was: probe ids do not move).
const FLOW_HASH_STREAM: u64 = 1;
/// The stream send-buffer target never falls below this, so a new session (no path usable
/// yet, initial windows) can fill its first flights and the peer's initial stream window.
pub const MIN_SEND_TARGET: u64 = 256 << 10;

/// One path's state at this endpoint: what we send on it and what we receive on it.
#[derive(Debug)]
struct PathSlot {
    tx: Path,
    rx: AckTracker,
    /// Probes of the current pair still to send.
    probes_to_send: u32,
    /// Whether the path is handed over, and its record (docs/protocol.md#handover).
    handover: crate::path::HandoverTracker,
}

/// Whether the session is open.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lifecycle {
    Open,
    /// `close` was called: a CLOSE goes out on each path, then `Closed`.
    Closing {
        code: u64,
        reason: Vec<u8>,
        next_path: usize,
    },
    Closed,
}

/// A redundant selection's remaining copies of the packet just sent.
#[derive(Debug)]
struct PendingCopies {
    global_seq: GlobalSeq,
    arrival: Time,
    bytes: Vec<u8>,
    paths: Vec<PathId>,
}

/// One endpoint of a plait session (see the module docs).
#[derive(Debug)]
pub struct Session {
    config: Config,
    rng: ChaCha8Rng,
    now: Time,
    paths: Vec<Option<PathSlot>>,
    /// Per path id removed earlier: its next send sequence number and its receive
    /// tracker, so a re-added path continues its numbering in both directions (path
    /// sequence numbers never repeat within a session: the tunnel's nonces rely on it,
    /// docs/protocol.md#data-messages).
    retired: Vec<Option<(PathSeq, AckTracker)>>,
    /// Paths the driver cannot send data on yet (bit per path id,
    /// [`Session::set_path_held`]).
    held: u16,
    owd_ref: OwdReference,
    scheduler: AnyScheduler,
    /// The scheduler said wait: until this time (`Some`), or until paths change (`None`
    /// inside `Some(..)` is not used; see `sched_blocked`).
    sched_wait_until: Option<Time>,
    /// With packet pacing: when a pacer may let the next FEC repair symbol go
    /// (`fec_transmit.rs`; `None`: it waits for an ACK, or none waits).
    fec_wait_until: Option<Time>,
    /// While a path is handed over: when to judge the paths again without new traffic
    /// (docs/protocol.md#handover), so a path whose loss cleared is handed back, and its
    /// 50 ms probes stop, on an idle session too.
    handover_wake: Option<Time>,
    /// When the paths were last judged for handover (`session/handover.rs`).
    handover_judged_at: Option<Time>,
    /// When the next repair of a burst may go (`transmit::pace_repair_burst`); new data
    /// does not wait for it.
    repair_wait_until: Option<Time>,
    sched_blocked: bool,
    views: Vec<PathView>,
    send_queue: FlowQueue,
    copies: Option<PendingCopies>,
    next_global: GlobalSeq,
    reorder: AnyReorder,
    dedup: DuplicateFilter,
    recv_next_global: GlobalSeq,
    probe_acks: VecDeque<(PathId, u32, u32)>,
    events: VecDeque<Event>,
    lifecycle: Lifecycle,
    stats: SessionStats,
    /// Loss repair, sender side (`None`: off).
    repair: Option<repair_store::RepairStore>,
    /// Repair requests (global sequence numbers, truncated) for the peer.
    repair_requests: VecDeque<u32>,
    /// Inner packets that arrived marked UNORDERED, waiting for `poll_delivery`.
    express: VecDeque<(GlobalSeq, Vec<u8>)>,
    /// Global sequence numbers delivered from `express` whose empty stand-ins the reorder
    /// buffer still holds (they keep its order and loss evidence intact; released, they
    /// are skipped).
    expressed: VecDeque<GlobalSeq>,
    /// The reliable streams (docs/protocol.md#streams).
    streams: Streams,
    /// Stream data waits for a path's pacer until then (`None`: not paced).
    stream_pace_until: Option<Time>,
    /// Places stream datagrams (its own instance: packet mode's scheduler state, e.g. a
    /// round-robin position or queue model, is not disturbed by stream decisions; both see
    /// every datagram sent).
    stream_scheduler: AnyScheduler,
    /// FEC, sender side (`None`: policy off; docs/protocol.md#fec).
    fec_encoder: Option<crate::fec::FecEncoder>,
    /// FEC, receiver side (always there; it keeps sources while the peer sends symbols).
    fec_decoder: crate::fec::FecDecoder,
}

impl Session {
    /// A session with no paths yet; add them with [`Session::add_path`].
    pub fn new(config: Config) -> Result<Session, ConfigError> {
        config.validate()?;
        let mut reorder_config = config.reorder_config.clone();
        let fec_on = config.fec.policy != crate::fec::FecPolicy::Off;
        if config.repair || fec_on {
            reorder_config.repair_wait = Some(INITIAL_REPAIR_WAIT.min(reorder_config.max_hold));
        }
        let mut streams = Streams::new(config.side, config.streams.clone());
        streams.set_send_target(MIN_SEND_TARGET);
        let mut key_rng = ChaCha8Rng::seed_from_u64(config.seed);
        key_rng.set_stream(FLOW_HASH_STREAM);
        let flow_key = [key_rng.next_u64(), key_rng.next_u64()];
        Ok(Session {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            now: Time::ZERO,
            paths: (0..MAX_PATHS).map(|_| None).collect(),
            retired: (0..MAX_PATHS).map(|_| None).collect(),
            held: 0,
            owd_ref: OwdReference::default(),
            scheduler: AnyScheduler::new(config.scheduler),
            sched_wait_until: None,
            fec_wait_until: None,
            handover_wake: None,
            handover_judged_at: None,
            repair_wait_until: None,
            sched_blocked: false,
            views: Vec::with_capacity(MAX_PATHS),
            send_queue: FlowQueue::new(FlowQueueConfig::of(&config), flow_key),
            copies: None,
            next_global: 0,
            reorder: AnyReorder::new(config.reorder, reorder_config),
            dedup: DuplicateFilter::new(config.dedup_window),
            recv_next_global: 0,
            probe_acks: VecDeque::new(),
            events: VecDeque::new(),
            lifecycle: Lifecycle::Open,
            stats: SessionStats::default(),
            repair: config.repair.then(|| {
                repair_store::RepairStore::new(
                    config.repair_store_bytes,
                    config.reorder_config.max_hold,
                )
            }),
            repair_requests: VecDeque::new(),
            express: VecDeque::new(),
            expressed: VecDeque::new(),
            streams,
            stream_pace_until: None,
            stream_scheduler: AnyScheduler::new(config.stream_scheduler),
            fec_encoder: fec_on.then(|| {
                crate::fec::FecEncoder::new(
                    config.fec,
                    crate::wire::max_fec_part_symbol(config.max_datagram_size),
                )
            }),
            fec_decoder: crate::fec::FecDecoder::new(false),
            config,
        })
    }

    /// The configuration this session runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Adds a path; it starts in [`crate::path::PathState::Probing`] and probes at once.
    /// `hints` are what the user knows of it (a capacity for schedulers without estimates
    /// yet; with `Config::trust_hints`, the figures schedulers use).
    pub fn add_path(&mut self, now: Time, id: PathId, hints: PathHints) -> Result<(), PathError> {
        self.advance(now);
        let slot = self
            .paths
            .get_mut(id.index())
            .ok_or(PathError::OutOfRange(id))?;
        if slot.is_some() {
            return Err(PathError::Exists(id));
        }
        let hints = PathHints {
            priority: hints.priority.min(crate::path::MAX_PRIORITY),
            ..hints
        };
        let mut tx = Path::new(
            id,
            now,
            hints,
            self.config.liveness.clone(),
            self.config.max_ack_delay,
            self.config.min_pair_bytes,
            (
                self.config.congestion,
                (self.config.max_datagram_size + self.config.datagram_overhead) as u64,
            ),
        );
        let rx = match self.retired.get_mut(id.index()).and_then(Option::take) {
            Some((next_seq, rx)) => {
                tx.resume_numbering(next_seq);
                rx.resumed()
            }
            None => AckTracker::default(),
        };
        *slot = Some(PathSlot {
            tx,
            rx,
            probes_to_send: 0,
            handover: crate::path::HandoverTracker::default(),
        });
        self.on_paths_changed(now);
        Ok(())
    }

    /// Makes a path a backup (it carries data only while no other path is usable) or a
    /// primary one (docs/protocol.md#backup).
    pub fn set_path_backup(
        &mut self,
        now: Time,
        id: PathId,
        backup: bool,
    ) -> Result<(), PathError> {
        self.change_path_role(now, id, |tx| tx.set_backup(backup))
    }

    /// Makes a path an overflow path (it carries only the load the other usable paths of
    /// its class cannot, and everything when none of them is usable) or not
    /// (docs/protocol.md#overflow).
    pub fn set_path_overflow(
        &mut self,
        now: Time,
        id: PathId,
        overflow: bool,
    ) -> Result<(), PathError> {
        self.change_path_role(now, id, |tx| tx.set_overflow(overflow))
    }

    /// Applies `change` to path `id`'s role (backup, overflow, priority) and rebuilds what depends
    /// on the path set.
    fn change_path_role(
        &mut self,
        now: Time,
        id: PathId,
        change: impl FnOnce(&mut Path),
    ) -> Result<(), PathError> {
        self.advance(now);
        let slot = self
            .paths
            .get_mut(id.index())
            .ok_or(PathError::OutOfRange(id))?
            .as_mut()
            .ok_or(PathError::Unknown(id))?;
        change(&mut slot.tx);
        self.on_paths_changed(now);
        Ok(())
    }

    /// A datagram of `link_len` bytes (everything it occupies on the link, headers
    /// included) left on `path` outside the session: the driver's own control messages
    /// (the tunnel's path control and registrations). Schedulers that model path queues
    /// (EDPF's `A_l`, seed PET-BMP eq. 1) count its bytes as they count the session's, so
    /// the data behind it is not expected earlier than it can arrive. Nothing else
    /// (windows, rate estimates, loss detection) sees it. Unknown paths are ignored.
    pub fn note_sent_outside(&mut self, now: Time, path: PathId, link_len: usize) {
        if self.slot(path).is_none() {
            return;
        }
        self.advance(now);
        let meta = PacketMeta {
            global_seq: self.next_global,
            len: link_len,
            arrival: now,
            control: true,
        };
        self.note_sent(now, path, &meta);
    }

    /// Sets a path's priority within its class (docs/protocol.md#priority): it carries
    /// data only while no usable path of its class has a lower number. Values above
    /// [`crate::path::MAX_PRIORITY`] are clamped.
    pub fn set_path_priority(
        &mut self,
        now: Time,
        id: PathId,
        priority: u8,
    ) -> Result<(), PathError> {
        self.change_path_role(now, id, |tx| tx.set_priority(priority))
    }

    /// Holds a path (`held`) or lets it go: a held path still takes what arrives on it and
    /// is probed, but schedulers see it as not usable, so it carries no data and no ACKs.
    /// The tunnel holds a server's path until its address is validated
    /// (docs/protocol.md#path-validation): what it sent there before would mostly be
    /// dropped by the anti-amplification limit, losses the engine would not know of.
    /// Ignores ids out of range; costs nothing when nothing changes.
    pub fn set_path_held(&mut self, now: Time, id: PathId, held: bool) {
        let Some(bit) = 1u16.checked_shl(u32::from(id.0)) else {
            return;
        };
        let was = self.held & bit != 0;
        if was == held {
            return;
        }
        self.advance(now);
        self.held = if held {
            self.held | bit
        } else {
            self.held & !bit
        };
        self.on_paths_changed(now);
    }

    /// Whether [`Session::set_path_held`] holds path `id`.
    pub fn is_path_held(&self, id: PathId) -> bool {
        1u16.checked_shl(u32::from(id.0))
            .is_some_and(|bit| self.held & bit != 0)
    }

    /// Removes a path: nothing more is sent on it; what arrives on it is ignored. The inner
    /// packets still in flight on it are sent again on the paths that remain, if the
    /// repair store has them (docs/protocol.md#repair, "a path removed").
    pub fn remove_path(&mut self, now: Time, id: PathId) -> Result<(), PathError> {
        self.advance(now);
        let slot = self
            .paths
            .get_mut(id.index())
            .ok_or(PathError::OutOfRange(id))?;
        let Some(removed) = slot.take() else {
            return Err(PathError::Unknown(id));
        };
        self.repair_removed(now, &removed.tx);
        if let Some(r) = self.retired.get_mut(id.index()) {
            *r = Some((removed.tx.next_seq(), removed.rx));
        }
        self.held &= !1u16.checked_shl(u32::from(id.0)).unwrap_or(0);
        if let Some(c) = &mut self.copies {
            c.paths.retain(|p| *p != id);
        }
        self.probe_acks.retain(|(p, _, _)| *p != id);
        self.streams.on_path_removed(id);
        self.on_paths_changed(now);
        Ok(())
    }

    /// Closes the session: a CLOSE frame goes out on every path, then nothing more is sent
    /// or accepted. `reason` is truncated to 1024 bytes.
    pub fn close(&mut self, now: Time, code: u64, reason: &str) {
        self.advance(now);
        if self.lifecycle == Lifecycle::Open {
            let reason = reason.as_bytes()[..reason.len().min(1024)].to_vec();
            self.lifecycle = Lifecycle::Closing {
                code,
                reason,
                next_path: 0,
            };
        }
    }

    /// Whether the session has closed (nothing more will be sent or delivered).
    pub fn is_closed(&self) -> bool {
        self.lifecycle == Lifecycle::Closed
    }

    /// Timer work due at `now`: path loss timers and liveness. Safe to call at any time.
    pub fn handle_timeout(&mut self, now: Time) {
        self.advance(now);
        let mut changed = false;
        let (coupled, n) = self.coupling_snapshot(now);
        for slot in self.paths.iter_mut().flatten() {
            if slot.tx.next_timeout().is_none_or(|t| t > now) {
                continue;
            }
            let coupling = crate::cc::Coupling {
                this: slot.tx.id(),
                paths: &coupled[..n],
            };
            let out = slot.tx.on_timeout(now, &coupling);
            let id = slot.tx.id();
            for (seq, acked) in slot.tx.take_resolved() {
                resolve(&mut self.streams, id, seq, acked);
            }
            if let Some((from, to)) = out.state_change {
                push_event(
                    &mut self.events,
                    &mut self.stats,
                    Event::PathState {
                        path: slot.tx.id(),
                        from,
                        to,
                    },
                );
                changed = true;
            }
        }
        if self.handover_wake.is_some_and(|t| t <= now) {
            self.handover_wake = None;
            self.refresh_views(false);
        }
        if changed {
            self.repair_abandoned(now);
            self.on_paths_changed(now);
        } else {
            self.update_send_target();
        }
    }

    /// Inner packets that were in flight on a path that went down are sent again on the
    /// others, if the repair store still has them (docs/protocol.md#repair): the receiver
    /// gets them a round trip sooner than by asking, and the end hosts see no loss.
    fn repair_abandoned(&mut self, now: Time) {
        let Some(store) = self.repair.as_mut() else {
            for slot in self.paths.iter_mut().flatten() {
                slot.tx.take_abandoned();
            }
            return;
        };
        let mut queued = false;
        for slot in self.paths.iter_mut().flatten() {
            for global in slot.tx.take_abandoned() {
                if self.config.liveness.fast_failover && store.request(now, global) {
                    self.stats.repairs_on_down += 1;
                    queued = true;
                }
            }
        }
        if queued {
            // Wake the data path: the repairs may go out even if the scheduler waited.
            self.sched_blocked = false;
        }
    }

    /// Inner packets in flight on a path being removed are queued for repair at once
    /// (docs/protocol.md#repair, "a path removed"): the path will never answer for them,
    /// and the removal is certain, unlike a silence that may end (so, unlike
    /// [`Session::repair_abandoned`], this needs no fast failover). Some may have arrived
    /// with their acknowledgements still on the way; the peer's duplicate filter drops
    /// those copies.
    fn repair_removed(&mut self, now: Time, removed: &Path) {
        let Some(store) = self.repair.as_mut() else {
            return;
        };
        let mut queued = false;
        for global in removed.outstanding_data() {
            if store.request(now, global) {
                self.stats.repairs_on_removal += 1;
                queued = true;
            }
        }
        if queued {
            // Wake the data path: the repairs may go out even if the scheduler waited.
            self.sched_blocked = false;
        }
    }

    /// The next time [`Session::handle_timeout`] (or a `poll_*`) has work without new input.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.lifecycle == Lifecycle::Closed {
            // Nothing is sent any more, but what the reorder buffer holds still leaves
            // (in order, or when its holes are given up) for `poll_delivery`.
            return self.reorder.next_deadline();
        }
        let mut next: Option<Time> = None;
        let mut consider = |t: Option<Time>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Time| n.min(t)));
            }
        };
        for slot in self.paths.iter().flatten() {
            consider(slot.tx.next_timeout());
            consider(
                slot.rx
                    .ack_deadline(self.config.ack_every, self.config.max_ack_delay),
            );
        }
        consider(self.reorder.next_deadline());
        consider(self.stream_pace_until);
        consider(self.handover_wake);
        consider(self.fec_encoder.as_ref().and_then(|e| e.deadline()));
        // Symbols go out only while the session is open (`transmit_fec`).
        if self.lifecycle == Lifecycle::Open
            && self.fec_encoder.as_ref().is_some_and(|e| e.pending() > 0)
        {
            consider(self.fec_wait_until);
        }
        if let Some(arrival) = self.send_queue.head_arrival_bound() {
            // `drop_stale` works on the head the queue picks; this is no later than that
            // head's deadline, and once the queue has picked it, exactly that deadline.
            consider(Some(arrival + self.config.max_queue_delay));
            if !self.sched_blocked {
                consider(self.sched_wait_until);
            }
        }
        if self.repair.as_ref().is_some_and(|r| !r.queue.is_empty()) {
            consider(self.repair_wait_until);
        }
        next
    }

    /// The next event for the driver: session events first, then stream events (those
    /// are never dropped: each stream has at most one of each kind pending).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events
            .pop_front()
            .or_else(|| self.streams.poll_event().map(Event::Stream))
    }

    /// Session-wide counters.
    pub fn stats(&self) -> SessionStats {
        let q = self.send_queue.stats();
        let fec = self.fec_decoder.stats;
        let enc = self.fec_encoder.as_ref();
        SessionStats {
            inner_codel_dropped: q.codel_drops,
            inner_ce_marked: q.ce_marks,
            fec_blocks: enc.map_or(0, |e| e.blocks),
            fec_symbols_dropped: self.stats.fec_symbols_dropped
                + enc.map_or(0, |e| e.dropped + e.expired),
            fec_symbols_expired: enc.map_or(0, |e| e.expired),
            fec_symbols_received: fec.symbols,
            fec_symbols_refused: self.stats.fec_symbols_refused + fec.refused,
            fec_unrecovered: fec.unrecovered,
            ..self.stats
        }
    }

    /// The reorder buffer's counters.
    pub fn reorder_stats(&self) -> ReorderStats {
        self.reorder.stats()
    }

    /// Packets held in the reorder buffer now.
    pub fn reorder_depth(&self) -> usize {
        self.reorder.held_packets()
    }

    /// Inner packets waiting in the send queue.
    pub fn send_queue_len(&self) -> usize {
        self.send_queue.len()
    }

    /// Bytes of the inner packets waiting in the send queue.
    pub fn send_queue_bytes(&self) -> usize {
        self.send_queue.bytes()
    }

    /// What the session's bounded structures hold now ([`Footprint`]).
    pub fn footprint(&self) -> Footprint {
        let mut f = Footprint {
            send_queue_packets: self.send_queue.len(),
            send_queue_bytes: self.send_queue.bytes(),
            reorder_packets: self.reorder.held_packets(),
            reorder_bytes: self.reorder.held_bytes(),
            repair_store: self.repair.as_ref().map_or((0, 0, 0), |r| r.held()),
            repair_requests: self.repair_requests.len(),
            probe_acks: self.probe_acks.len(),
            events: self.events.len(),
            express: (self.express.len(), self.expressed.len()),
            streams_open: self.streams.stats().open,
            stream_bytes: self.streams.buffered(),
            fec: {
                let (bytes, blocks) = self.fec_decoder.held();
                let pending = self.fec_encoder.as_ref().map_or(0, |e| e.pending());
                (pending, bytes, blocks)
            },
            ..Footprint::default()
        };
        for slot in self.paths.iter().flatten() {
            let (log, history, resolved) = slot.tx.held();
            f.sent_log = f.sent_log.max(log);
            f.send_history = f.send_history.max(history);
            f.resolved = f.resolved.max(resolved);
            f.ack_ranges = f.ack_ranges.max(slot.rx.ranges().len());
            f.ack_timestamps = f.ack_timestamps.max(slot.rx.timestamps().len());
        }
        f
    }

    /// Counters of one path.
    pub fn path_stats(&self, id: PathId) -> Option<PathStats> {
        self.slot(id).map(|s| *s.tx.stats())
    }

    /// One path's congestion window, bytes in flight and pacing rate.
    pub fn path_congestion(&self, id: PathId) -> Option<crate::cc::CongestionView> {
        let tx = &self.slot(id)?.tx;
        let cc = tx.congestion();
        let (congestion_events, undone) = cc.counters();
        Some(crate::cc::CongestionView {
            controller: cc.name(),
            window: cc.window(),
            bytes_in_flight: tx.bytes_in_flight(),
            pacing_rate: cc.pacing_rate(tx.rtt().srtt()),
            congestion_events,
            undone,
        })
    }

    /// The snapshot of every path, as schedulers see it, in `PathId` order.
    pub fn path_views(&self) -> Vec<PathView> {
        let (floor, trusted) = (self.owd_floor(), self.trusted_delay_floor());
        self.paths
            .iter()
            .flatten()
            .map(|s| s.tx.view(floor, trusted))
            .collect()
    }

    /// Ids of the session's paths, in order.
    pub fn path_ids(&self) -> impl Iterator<Item = PathId> + '_ {
        self.paths.iter().flatten().map(|s| s.tx.id())
    }

    fn slot(&self, id: PathId) -> Option<&PathSlot> {
        self.paths.get(id.index()).and_then(Option::as_ref)
    }

    fn slot_mut(&mut self, id: PathId) -> Option<&mut PathSlot> {
        self.paths.get_mut(id.index()).and_then(Option::as_mut)
    }

    /// With `trust_hints`, the smallest hinted one-way delay (the reference hinted delays
    /// are relative to); `None` otherwise.
    fn trusted_delay_floor(&self) -> Option<Duration> {
        if !self.config.trust_hints {
            return None;
        }
        let hinted = self
            .paths
            .iter()
            .flatten()
            .filter_map(|s| s.tx.hints().one_way_delay);
        Some(hinted.min().unwrap_or(Duration::ZERO))
    }

    /// Smallest base one-way delay among the paths: the reference relative delays use.
    fn owd_floor(&self) -> Option<i64> {
        self.paths
            .iter()
            .flatten()
            .filter_map(|s| s.tx.owd().base_us())
            .min()
    }

    /// Time only moves forward inside the engine, whatever a driver passes.
    fn advance(&mut self, now: Time) {
        self.now = self.now.max(now);
    }

    /// Hands the streams their send-buffer target: `SEND_TARGET_WINDOWS` (8) × the sum of the
    /// usable paths' congestion windows, at least [`MIN_SEND_TARGET`] (the hard bounds
    /// apply on top, in the streams). Called wherever a window or a path's usability may
    /// change (ACK and loss processing, timeouts, paths added, removed or changing state),
    /// so a writer refused for want of room hears `Writable` as soon as the paths can
    /// carry more, not only when bytes are acknowledged.
    fn update_send_target(&mut self) {
        // With packet pacing a full window blocks packet mode too (docs/protocol.md#packet-pacing):
        // whatever may have opened one wakes it.
        if self.config.packet_pacing {
            self.sched_blocked = false;
        }
        let windows: u64 = self
            .paths
            .iter()
            .flatten()
            .filter(|s| s.tx.state().is_usable())
            .map(|s| s.tx.congestion().window())
            .sum();
        let target = windows
            .saturating_mul(SEND_TARGET_WINDOWS)
            .max(MIN_SEND_TARGET);
        self.streams.set_send_target(target);
    }

    /// Paths were added, removed or changed state: wake a blocked scheduler and tell the
    /// reorder buffer which paths a missing packet may still travel on.
    fn on_paths_changed(&mut self, now: Time) {
        self.sched_blocked = false;
        self.sched_wait_until = None;
        let mut ids = [PathId(0); MAX_PATHS];
        let mut n = 0;
        for id in self.paths.iter().flatten().map(|s| s.tx.id()) {
            ids[n] = id;
            n += 1;
        }
        self.reorder.set_paths(now, &ids[..n]);
        self.update_send_target();
    }

    /// Keeps the repair wait near one round trip on the fastest usable path (the request
    /// and the repair both take the path that delivers soonest): twice `srtt + 4 rttvar`
    /// (the repair may queue behind data, or go to another path when the fastest is full),
    /// plus a margin. A hole that was asked for and not repaired waits this long in vain,
    /// which is rare: congestion losses are not asked for.
    fn update_repair_wait(&mut self) {
        if !self.config.repair && self.fec_encoder.is_none() {
            return;
        }
        if let Some(wait) = self.repair_wait() {
            self.reorder.set_repair_wait(wait);
        }
    }

    /// How long a receiver holds a hole it has evidence for (docs/protocol.md#repair): the
    /// fastest usable path's RTO (SRTT + 4 RTTVAR) plus a margin; `None` before any RTT is
    /// measured. Both ends measure the same paths, so the sender's figure stands for its
    /// peer's.
    pub(super) fn repair_wait(&self) -> Option<Duration> {
        self.paths
            .iter()
            .flatten()
            .filter(|s| s.tx.state().is_usable())
            .filter_map(|s| {
                let rtt = s.tx.rtt();
                Some(rtt.srtt()? + 4 * rtt.rttvar()?)
            })
            .min()
            .map(|rtt| rtt + Duration::from_millis(5))
    }

    /// Every path's window, RTT, usability and wish for a drain check (as of `now`), for
    /// the congestion controllers that read the session's other paths.
    fn coupling_snapshot(&self, now: Time) -> ([CoupledPath; MAX_PATHS], usize) {
        let mut out = [CoupledPath {
            id: PathId(0),
            window: 0,
            srtt: None,
            usable: false,
            wants_drain_check: false,
        }; MAX_PATHS];
        let mut n = 0;
        for s in self.paths.iter().flatten() {
            out[n] = CoupledPath {
                id: s.tx.id(),
                window: s.tx.congestion().window(),
                srtt: s.tx.rtt().srtt(),
                usable: s.tx.state().is_usable(),
                wants_drain_check: s.tx.congestion().wants_drain_check(now),
            };
            n += 1;
        }
        (out, n)
    }

    /// The peer broke the stream rules: close the session with the violation's code.
    fn on_stream_violation(&mut self, now: Time, v: StreamViolation) {
        self.stats.stream_violations += 1;
        self.close(now, v.code(), &v.to_string());
    }

    fn next_probe_id(&mut self) -> u32 {
        self.rng.next_u32()
    }
}

/// Hands the fate of a reliable datagram to the stream layer.
fn resolve(streams: &mut Streams, path: PathId, seq: crate::ids::PathSeq, acked: bool) {
    if acked {
        streams.on_datagram_acked(path, seq);
    } else {
        streams.on_datagram_lost(path, seq);
    }
}

fn push_event(events: &mut VecDeque<Event>, stats: &mut SessionStats, event: Event) {
    if events.len() >= MAX_EVENTS {
        events.pop_front();
        stats.events_dropped += 1;
    }
    events.push_back(event);
}
