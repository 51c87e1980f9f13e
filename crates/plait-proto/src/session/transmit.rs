//! The sending half of a session: accepting inner packets and building datagrams.
//!
//! `poll_transmit` writes at most one datagram per call, in this priority order
//! (docs/protocol.md#transmit-order):
//! 1. CLOSE frames while closing (one per path);
//! 2. PROBE_ACKs, on the path the probe came in on (an immediate two-way liveness answer);
//! 3. probes due (pairs on probing or down paths, keepalives on idle ones);
//! 4. DATA: remaining copies of a duplicated packet, then the send queue's head (its
//!    FQ-CoDel choice, `flow_queue/`) on the path the scheduler picks, with pending ACK
//!    frames piggybacked when they fit;
//! 5. stream frames, on a path whose window and pacer allow (`stream_transmit.rs`);
//! 6. an ACK-only datagram when an ACK is due, on the path the scheduler's `select_control`
//!    picks (docs/protocol.md#ack-policy).

use super::types::{SendError, Transmit};
use super::{Lifecycle, PendingCopies, Session, push_event};
use crate::ids::{GlobalSeq, PathId, PathSeq};
use crate::policy::FlowAction;
use crate::reorder::ReorderBuffer;
use crate::sched::{PacketMeta, Scheduler, Selection};
use crate::session::types::Event;
use crate::time::Time;

/// How long a path may receive nothing, while another receives, before it stops
/// carrying the ACKs of every path ([`Session::avoid_receive_silent_paths`]).
const RECEIVE_SILENCE: std::time::Duration = std::time::Duration::from_millis(50);

/// Queued repairs beyond which they are paced ([`Session::pace_repair_burst`]); the
/// receiver's own requests come a few at a time.
const REPAIR_BURST: usize = 16;
use crate::wire::{
    AckRepr, CloseRepr, DATA_OVERHEAD, DataRepr, ExtensionRepr, Header, ProbeAckRepr, ProbeRepr,
    Writer,
};

/// What `transmit_data_on` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DataKind {
    /// An inner packet for the first time (or a redundant copy); `unordered`: marked
    /// UNORDERED (docs/protocol.md#unordered).
    Data { unordered: bool },
    /// A repair: names no predecessor on its path.
    Repair,
}

impl Session {
    /// Hands the session an inner packet (an IP packet from the TUN device) to carry.
    /// On error the packet is dropped (and counted); the session goes on.
    pub fn handle_inner_packet(&mut self, now: Time, packet: &[u8]) -> Result<(), SendError> {
        self.advance(now);
        if self.lifecycle != Lifecycle::Open {
            return Err(SendError::Closed);
        }
        let max = self.config.max_inner_packet();
        if packet.len() > max {
            self.stats.inner_too_large += 1;
            return Err(SendError::TooLarge {
                len: packet.len(),
                max,
            });
        }
        // docs/protocol.md#send-queue: a full queue drops from its fattest flow's head.
        let pushed = self.send_queue.push(self.now, packet);
        self.stats.inner_overflow_dropped += pushed.dropped;
        if !pushed.queued {
            self.stats.inner_queue_full += 1;
            return Err(SendError::QueueFull);
        }
        self.stats.inner_accepted += 1;
        Ok(())
    }

    /// Writes the next datagram to send into `buf` and says on which path. `buf` must hold
    /// `max_datagram_size` bytes (a shorter buffer gets nothing). Call until `None`.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        self.advance(now);
        let now = self.now;
        let size = self.config.max_datagram_size;
        let buf = buf.get_mut(..size)?;
        match self.lifecycle {
            Lifecycle::Closed => return None,
            Lifecycle::Closing { .. } => return self.transmit_close(now, buf),
            Lifecycle::Open => {}
        }
        self.transmit_probe_ack(now, buf)
            .or_else(|| self.transmit_repair_request(now, buf))
            .or_else(|| self.transmit_probe(now, buf))
            .or_else(|| self.transmit_data(now, buf))
            .or_else(|| self.transmit_stream(now, buf))
            .or_else(|| self.transmit_ack_only(now, buf))
    }

    pub(super) fn header(&self, path: PathId, seq: PathSeq, now: Time) -> Header {
        Header {
            path,
            path_seq: seq as u32,
            timestamp_us: now.wire_micros(),
        }
    }

    fn transmit_close(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        let Lifecycle::Closing {
            code,
            reason,
            next_path,
        } = &self.lifecycle
        else {
            return None;
        };
        let (code, reason, from) = (*code, reason.clone(), *next_path);
        let next = self
            .paths
            .iter()
            .skip(from)
            .flatten()
            .map(|s| s.tx.id())
            .next();
        let Some(path) = next else {
            self.lifecycle = Lifecycle::Closed;
            let reason = String::from_utf8_lossy(&reason).into_owned();
            push_event(
                &mut self.events,
                &mut self.stats,
                Event::Closed {
                    by_peer: false,
                    code,
                    reason,
                },
            );
            return None;
        };
        self.lifecycle = Lifecycle::Closing {
            code,
            reason: reason.clone(),
            next_path: path.index() + 1,
        };
        let seq = self.slot(path)?.tx.next_seq();
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        CloseRepr {
            error_code: code,
            reason: &reason,
        }
        .encode(&mut w)
        .ok()?;
        let len = w.len();
        self.sent_control(now, path, len, true, None)
    }

    fn transmit_probe_ack(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        let (path, probe_id, recv_ts_us) = self.probe_acks.pop_front()?;
        let seq = self.slot(path)?.tx.next_seq();
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        ProbeAckRepr {
            probe_id,
            path,
            recv_ts_us,
        }
        .encode(&mut w)
        .ok()?;
        let len = w.len();
        self.sent_control(now, path, len, false, None)
    }

    fn transmit_probe(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        let mut chosen = None;
        for slot in self.paths.iter_mut().flatten() {
            if slot.probes_to_send == 0 {
                let due = slot.tx.probes_due(now);
                if due > 0 {
                    slot.probes_to_send = due;
                    slot.tx.on_probes_sent(now);
                }
            }
            if slot.probes_to_send > 0 {
                slot.probes_to_send -= 1;
                chosen = Some((slot.tx.id(), slot.tx.next_seq()));
                break;
            }
        }
        let (path, seq) = chosen?;
        let probe_id = self.next_probe_id();
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        ProbeRepr { probe_id }.encode(&mut w).ok()?;
        let len = w.len();
        self.sent_control(now, path, len, true, Some(probe_id))
    }

    /// Books a control datagram (CLOSE, PROBE, PROBE_ACK, ACK-only) just written for `path`:
    /// the path's log, and the scheduler (so models of path queues count its bytes).
    fn sent_control(
        &mut self,
        now: Time,
        path: PathId,
        len: usize,
        ack_eliciting: bool,
        probe_id: Option<u32>,
    ) -> Option<Transmit> {
        let on_link = self.on_link(len);
        let meta = PacketMeta {
            global_seq: self.next_global,
            len: on_link,
            arrival: now,
            control: true,
        };
        self.note_sent(now, path, &meta);
        self.slot_mut(path)?
            .tx
            .on_sent(now, on_link, ack_eliciting, probe_id, None);
        Some(Transmit { path, len })
    }

    /// Bytes a datagram of `len` occupies on a link: it and what carries it
    /// (`Config::datagram_overhead`). Every path model (schedulers' queues, rate
    /// estimates, windows) counts these, so that small datagrams weigh what they cost.
    pub(super) fn on_link(&self, len: usize) -> usize {
        len.saturating_add(self.config.datagram_overhead)
    }

    /// Tells both schedulers a datagram left on `path` (their models of the path queues
    /// count every byte, whoever placed it).
    pub(super) fn note_sent(&mut self, now: Time, path: PathId, meta: &PacketMeta) {
        self.scheduler.on_sent(now, path, meta);
        self.stream_scheduler.on_sent(now, path, meta);
    }

    /// Rebuilds the schedulers' snapshot of every path, for placing stream datagrams
    /// (`streams`) or packet mode's.
    pub(super) fn refresh_views(&mut self, streams: bool) {
        let now = self.now;
        for slot in self.paths.iter_mut().flatten() {
            slot.tx.decay_loss(now);
        }
        let (floor, trusted) = (self.owd_floor(), self.trusted_delay_floor());
        self.views.clear();
        self.views.extend(
            self.paths
                .iter()
                .flatten()
                .map(|s| s.tx.view(floor, trusted)),
        );
        // A held path (its address not validated yet) stands by: it carries nothing.
        let held = self.held;
        let bit = |id: PathId| 1u16.checked_shl(u32::from(id.0)).unwrap_or(0);
        for v in self.views.iter_mut() {
            v.standby = held & bit(v.id) != 0;
        }
        // docs/protocol.md#path-states, "suspect": a path silent beyond one RTO may have
        // failed; it stands by while another usable path answers, so new data leaves it
        // at once rather than at the down bound, twice as late (SCTP's potentially-failed
        // state, RFC 7829). An answer ends it; silence to the down bound makes it Down.
        let silent: u16 = self
            .paths
            .iter()
            .flatten()
            .filter(|s| s.tx.is_silent(now))
            .fold(0, |m, s| m | bit(s.tx.id()));
        if silent != 0
            && self
                .views
                .iter()
                .any(|v| v.state.is_usable() && !v.standby && silent & bit(v.id) == 0)
        {
            for v in self.views.iter_mut() {
                v.standby |= silent & bit(v.id) != 0;
            }
        }
        // docs/protocol.md#handover: a path whose quality fell below the others' stands by
        // while they carry (before the ranks, so a backup takes over from it).
        self.apply_handover(streams);
        // docs/protocol.md#backup, #priority and #overflow: a path stands by while a usable
        // path ranks before it, backups after every primary and, within a class, overflow
        // paths after the others, then lower priority numbers first. Only the best usable
        // rank carries data, except that while it is not an overflow rank, the best usable
        // overflow paths of its class take the overflow role (`overflow_only`): they carry
        // only what a scheduler that spills gives them.
        let rank = |v: &crate::path::PathView| (v.backup, v.overflow, v.priority);
        let may = |v: &&crate::path::PathView| v.state.is_usable() && !v.standby;
        let Some(best) = self.views.iter().filter(may).map(rank).min() else {
            return;
        };
        let spill = if best.1 {
            None
        } else {
            let overflow = (best.0, true);
            self.views
                .iter()
                .filter(may)
                .map(rank)
                .filter(|r| (r.0, r.1) == overflow)
                .min()
        };
        for v in self.views.iter_mut() {
            if Some(rank(v)) == spill {
                v.overflow_only = true;
            } else {
                v.standby |= rank(v) > best;
            }
        }
    }

    fn transmit_data(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(t) = self.transmit_copy(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.transmit_repair(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.transmit_fec(now, buf) {
            return Some(t);
        }
        self.drop_stale(now);
        if self.sched_blocked || self.sched_wait_until.is_some_and(|t| t > now) {
            return None;
        }
        // The queue's choice (DRR over flows, CoDel applied); `pop` below takes this one.
        let front = self.send_queue.head(now)?;
        let unordered = front.sparse && self.config.unordered_below_bps > 0;
        // docs/protocol.md#flow-policy
        let action = crate::policy::action_for(&self.config.flow_policy, &front.bytes);
        let protect = self.fec_encoder.is_some()
            && match self.config.fec.policy {
                crate::fec::FecPolicy::Off => false,
                crate::fec::FecPolicy::Sparse => front.fec_sparse,
                crate::fec::FecPolicy::All => true,
            };
        let meta = PacketMeta {
            global_seq: self.next_global,
            len: (DATA_OVERHEAD + front.bytes.len()).saturating_add(self.config.datagram_overhead),
            arrival: front.arrival,
            control: false,
        };
        self.refresh_views(false);
        // docs/protocol.md#unordered: a sparse flow's packet is not held by packet pacing.
        // Held, it waited for whichever path's pacer released first and so often took the
        // slow path (on T1 the probe through the tunnel kept windows at the 100 ms path's
        // 61 ms while path 0's link showed 30); its flow is a few packets a round trip,
        // which no window or pacer needs to see coming (they still count both once sent).
        let pacer_release = if self.config.packet_pacing && !unordered {
            self.mark_window_room(now)
        } else {
            None
        };
        let soonest = || {
            let hold = crate::cc::AckHold::of(&self.config);
            crate::sched::soonest_by_measurement(&self.views, &meta, hold)
                .map_or(Selection::Wait(None), Selection::Send)
        };
        let selection = match action {
            FlowAction::Duplicate => Selection::Duplicate(
                self.views
                    .iter()
                    .filter(|v| v.is_usable())
                    .map(|v| v.id)
                    .collect(),
            ),
            FlowAction::LowestDelay => soonest(),
            FlowAction::Stripe if unordered => soonest(),
            FlowAction::Stripe => self.scheduler.select(now, &self.views, &meta),
        };
        // docs/protocol.md#overflow: a scheduler that spills may pick an overflow path.
        let usable = |views: &[crate::path::PathView], id: PathId| {
            views.iter().any(|v| v.id == id && v.is_selectable())
        };
        // The common case, one path, allocates nothing; copies go to `self.copies`.
        let (first, mut rest) = match selection {
            Selection::Send(p) => (p, Vec::new()),
            Selection::Duplicate(mut ps) => {
                ps.retain(|p| usable(&self.views, *p));
                ps.dedup();
                if ps.is_empty() {
                    self.sched_blocked = true;
                    return None;
                }
                let first = ps.remove(0);
                (first, ps)
            }
            Selection::Wait(Some(t)) if t > now => {
                self.sched_wait_until = Some(pacer_release.map_or(t, |p| p.min(t)));
                return None;
            }
            // Nothing usable now (a Wait in the past counts as that too): wait for a change
            // (with packet pacing: an ACK that opens a window, or the pacer's release).
            Selection::Wait(_) => {
                match pacer_release {
                    Some(t) => self.sched_wait_until = Some(t),
                    None => self.sched_blocked = true,
                }
                return None;
            }
        };
        if !usable(&self.views, first) {
            // A scheduler that broke its contract: never send on an unusable path.
            self.sched_blocked = true;
            return None;
        }
        // docs/protocol.md#packet-pacing: never a path far behind the best one while that
        // one is only held by its pacer or window (`paced_spill.rs`).
        let first = if self.config.packet_pacing && !unordered && rest.is_empty() {
            match self.spill_check(now, first) {
                None => first,
                Some(super::paced_spill::Spill::Send(p)) => {
                    self.stats.inner_spills_refused += 1;
                    p
                }
                Some(super::paced_spill::Spill::Until(t)) => {
                    self.stats.inner_spills_refused += 1;
                    self.sched_wait_until = Some(t);
                    return None;
                }
                Some(super::paced_spill::Spill::Ack) => {
                    self.stats.inner_spills_refused += 1;
                    self.sched_blocked = true;
                    return None;
                }
            }
        } else {
            first
        };
        self.sched_wait_until = None;
        let queued = self.send_queue.pop()?;
        let global = self.next_global;
        self.next_global += 1;
        self.stats.inner_sent += 1;
        if let Some(store) = &mut self.repair {
            store.push(now, global, &queued.bytes);
        }
        self.stats.inner_unordered += u64::from(unordered);
        let t = self.transmit_data_on(
            now,
            first,
            global,
            &queued.bytes,
            queued.arrival,
            buf,
            DataKind::Data { unordered },
        );
        // docs/protocol.md#fec: a protected packet joins the open block once it has left.
        if let (true, Some(_), Some(enc)) = (protect, t, self.fec_encoder.as_mut()) {
            enc.push(now, global, &queued.bytes, first, &self.views);
        }
        if rest.is_empty() {
            self.send_queue.recycle(queued.bytes);
        } else {
            rest.reverse(); // popped from the back, in the scheduler's order
            self.copies = Some(PendingCopies {
                global_seq: global,
                arrival: queued.arrival,
                bytes: queued.bytes,
                paths: rest,
            });
        }
        t
    }

    /// The next copy of a packet the scheduler duplicated (skipping paths no longer usable).
    fn transmit_copy(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        let mut copies = self.copies.take()?;
        let mut sent = None;
        while sent.is_none() {
            let Some(path) = copies.paths.pop() else {
                break;
            };
            if self.slot(path).is_some_and(|s| s.tx.state().is_usable()) {
                sent = self.transmit_data_on(
                    now,
                    path,
                    copies.global_seq,
                    &copies.bytes,
                    copies.arrival,
                    buf,
                    DataKind::Data { unordered: false },
                );
                self.stats.inner_copies += u64::from(sent.is_some());
            }
        }
        if copies.paths.is_empty() {
            self.send_queue.recycle(copies.bytes);
        } else {
            self.copies = Some(copies);
        }
        sent
    }

    /// Drops queue heads (as the send queue picks them) that waited longer than
    /// `max_queue_delay`.
    fn drop_stale(&mut self, now: Time) {
        while let Some(front) = self.send_queue.head(now) {
            if now.saturating_since(front.arrival) < self.config.max_queue_delay {
                break;
            }
            if let Some(q) = self.send_queue.pop() {
                self.send_queue.recycle(q.bytes);
            }
            self.stats.inner_stale += 1;
        }
    }

    /// Writes header, piggybacked ACKs and a DATA frame for `global` on `path`. A repair
    /// names no predecessor and does not become the path's latest DATA, so the
    /// predecessor chain of new packets on the path stays intact.
    #[allow(clippy::too_many_arguments)]
    fn transmit_data_on(
        &mut self,
        now: Time,
        path: PathId,
        global: GlobalSeq,
        payload: &[u8],
        arrival: Time,
        buf: &mut [u8],
        kind: DataKind,
    ) -> Option<Transmit> {
        let repair = kind == DataKind::Repair;
        let slot = self.slot(path)?;
        let seq = slot.tx.next_seq();
        let prev_delta = if repair {
            0
        } else {
            slot.tx.prev_delta(global)
        };
        let mut data = DataRepr {
            global_seq: global,
            prev_delta,
            payload,
            to_end: true,
        };
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        // docs/protocol.md#data-frame: a packet of the largest size has room for a 1-byte
        // `prev_delta` only; a wider one would not fit, so it names no predecessor.
        if data.encoded_len() > w.remaining() {
            data.prev_delta = 0;
        }
        let room = w.remaining().checked_sub(data.encoded_len())?;
        let unordered = ExtensionRepr {
            frame_type: crate::wire::frame_type::UNORDERED,
            body: &[],
        };
        // The mark only when it fits (a full-size packet of a sparse flow keeps the order).
        let mark = kind == (DataKind::Data { unordered: true }) && room >= unordered.encoded_len();
        let room = room - if mark { unordered.encoded_len() } else { 0 };
        self.write_acks(now, &mut w, room, false, path);
        if mark {
            unordered.encode(&mut w).ok()?;
        }
        data.encode(&mut w).ok()?;
        let len = w.len();
        let on_link = self.on_link(len);
        let meta = PacketMeta {
            global_seq: global,
            len: on_link,
            arrival,
            control: false,
        };
        self.note_sent(now, path, &meta);
        self.slot_mut(path)?
            .tx
            .on_sent(now, on_link, true, None, (!repair).then_some(global));
        Some(Transmit { path, len })
    }

    /// A repair the peer asked for (or that a path took down with it), on the path the
    /// scheduler picks (docs/protocol.md#repair). When the scheduler says wait, the repair
    /// waits at the head of its queue, as new data would: dropped, its hole would be
    /// declared lost after all, and a burst of repairs (a path gone down) would lose most
    /// of itself that way.
    fn transmit_repair(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        loop {
            let store = self.repair.as_mut()?;
            let &global = store.queue.front()?;
            // A pacing deadline that has passed is cleared: `poll_timeout` offers it while
            // repairs are queued, and a past one would wake the driver at once, again and
            // again, while the scheduler is blocked.
            self.repair_wait_until = self.repair_wait_until.filter(|t| *t > now);
            let paced = self.repair_wait_until.is_some();
            if paced || self.sched_blocked || self.sched_wait_until.is_some_and(|t| t > now) {
                return None;
            }
            let store = self.repair.as_mut()?;
            store.queue.pop_front();
            let Some(bytes) = store.take(global) else {
                continue;
            };
            let meta = PacketMeta {
                global_seq: global,
                len: self.on_link(DATA_OVERHEAD + bytes.len()),
                arrival: now,
                control: false,
            };
            self.refresh_views(false);
            let selection = self.scheduler.select(now, &self.views, &meta);
            let path = match &selection {
                Selection::Send(p) => Some(*p),
                Selection::Duplicate(ps) => ps.first().copied(),
                Selection::Wait(_) => None,
            }
            .filter(|p| self.views.iter().any(|v| v.id == *p && v.is_selectable()));
            let sent = path.and_then(|p| {
                self.transmit_data_on(now, p, global, &bytes, now, buf, DataKind::Repair)
            });
            let Some(store) = self.repair.as_mut() else {
                return sent;
            };
            store.put_back(global, bytes);
            let backlog = store.queue.len();
            if sent.is_some() {
                self.stats.repairs_sent += 1;
                self.pace_repair_burst(now, backlog, meta.len);
                return sent;
            }
            if path.is_none() {
                store.queue.push_front(global);
                match selection {
                    Selection::Wait(Some(t)) if t > now => self.sched_wait_until = Some(t),
                    _ => self.sched_blocked = true,
                }
                return None;
            }
        }
    }

    /// For the choice of the one path that carries every path's ACKs (packet mode): a
    /// path on which nothing has arrived for [`RECEIVE_SILENCE`] (or eight of its usual
    /// gaps between arrivals, if longer: `AckTracker::receive_silent`) while another path
    /// still receives stands by in the freshly built views. A path that failed both
    /// ways is found here one such interval after its last arrival; without this rule the
    /// ACKs of every path kept going into it, so the peer heard nothing on any path and
    /// could not tell the failed path from the others (docs/protocol.md#ack-policy).
    fn avoid_receive_silent_paths(&mut self, now: Time) {
        let mut fresh: u16 = 0;
        for s in self.paths.iter().flatten() {
            if !s.rx.receive_silent(now, RECEIVE_SILENCE) {
                fresh |= 1u16.checked_shl(u32::from(s.tx.id().0)).unwrap_or(0);
            }
        }
        let any_fresh_usable = self.views.iter().any(|v| {
            v.is_usable() && fresh & 1u16.checked_shl(u32::from(v.id.0)).unwrap_or(0) != 0
        });
        if !any_fresh_usable {
            return;
        }
        for v in self.views.iter_mut() {
            if fresh & 1u16.checked_shl(u32::from(v.id.0)).unwrap_or(0) == 0 {
                v.standby = true;
            }
        }
    }

    /// A burst of repairs (more than [`REPAIR_BURST`] still queued: a path went down with
    /// a window in flight) leaves at the usable paths' combined estimated rate, new data
    /// going between its repairs: sent at once it would overflow the queues of the paths
    /// that remain and lose what it repairs; new data held behind it would leave as a
    /// burst of its own once it ends. The rate counts only measured capacities
    /// ([`crate::path::PathView::measured_capacity`]): the path left after a removal may
    /// have carried only acknowledgements, and its delivery rate (a few hundred bytes a
    /// second) would space the repairs seconds apart, past the store's `max_hold`, so
    /// they were dropped unsent (seen in `removal_netns`: 1 of 21 sent). Without any
    /// measured capacity the burst goes unpaced.
    fn pace_repair_burst(&mut self, now: Time, backlog: usize, len: usize) {
        if backlog <= REPAIR_BURST {
            return;
        }
        let rate: f64 = self
            .views
            .iter()
            .filter(|v| v.is_usable())
            .filter_map(|v| v.measured_capacity())
            .sum();
        if rate > 0.0 {
            self.repair_wait_until = Some(now + crate::sched::transmission_time(len, rate));
        }
    }

    /// A datagram carrying REPAIR_REQUEST frames (and pending ACKs), on the path that
    /// delivers soonest, as soon as the reorder buffer has evidence of a loss.
    fn transmit_repair_request(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        while let Some(g) = self.reorder.poll_repair_request() {
            if !self.config.repair {
                // FEC without repair: the hole is held for FEC's symbols, nothing is asked.
                continue;
            }
            if self.repair_requests.len() >= super::MAX_REPAIR_REQUESTS {
                self.repair_requests.pop_front();
            }
            self.repair_requests.push_back(g as u32);
        }
        if self.repair_requests.is_empty() {
            return None;
        }
        let path = self.ack_path(now)?;
        let seq = self.slot(path)?.tx.next_seq();
        let n = self.repair_requests.len().min(crate::wire::MAX_REPAIR_SEQS);
        let mut seqs = [0u32; crate::wire::MAX_REPAIR_SEQS];
        for (dst, src) in seqs.iter_mut().zip(self.repair_requests.drain(..n)) {
            *dst = src;
        }
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        crate::wire::RepairRequestRepr { seqs: &seqs[..n] }
            .encode(&mut w)
            .ok()?;
        let room = w.remaining();
        self.write_acks(now, &mut w, room, false, path);
        self.stats.repair_requests_sent += n as u64;
        let len = w.len();
        self.sent_control(now, path, len, true, None)
    }

    /// Writes ACK frames for the paths with something to acknowledge, as many as fit in
    /// `room` bytes of a datagram going on `on`: once one ACK is due, all pending ones ride
    /// along (batching); in a session carrying streams only `on`'s own ACK rides, so each
    /// path's feedback returns over that path (docs/protocol.md#ack-policy). With
    /// `shrink` (an ACK-only datagram, where the ACK must go out), an ACK too large for the
    /// room is cut down (no timestamps, then fewer ranges) rather than left due; an ACK that
    /// still cannot be written is dropped, never left due (a due ACK that never leaves would
    /// keep `poll_timeout` in the past). Returns how many were written.
    pub(super) fn write_acks(
        &mut self,
        now: Time,
        w: &mut Writer<'_>,
        room: usize,
        shrink: bool,
        on: PathId,
    ) -> usize {
        let own_only = self.acks_return_on_their_path();
        let mut budget = room;
        let mut written = 0;
        for slot in self.paths.iter_mut().flatten() {
            if own_only && slot.tx.id() != on {
                continue;
            }
            let rx = &mut slot.rx;
            if !rx.has_unacked() {
                continue;
            }
            let Some((largest, largest_at)) = rx.largest() else {
                continue;
            };
            let full = AckRepr {
                path: slot.tx.id(),
                largest,
                ack_delay_us: u64::try_from(now.saturating_since(largest_at).as_micros())
                    .unwrap_or(u64::MAX),
                largest_recv_ts_us: largest_at.wire_micros(),
                ranges: rx.ranges(),
                timestamps: rx.timestamps(),
            };
            let ack = if full.encoded_len() <= budget {
                Some(full)
            } else if shrink {
                let bare = AckRepr {
                    timestamps: &[],
                    ..full
                };
                (1..=bare.ranges.len())
                    .rev()
                    .map(|k| AckRepr {
                        ranges: &bare.ranges[..k],
                        ..bare
                    })
                    .find(|a| a.encoded_len() <= budget)
            } else {
                None
            };
            match ack.map(|a| (a.encoded_len(), a.encode(w))) {
                Some((len, Ok(()))) => {
                    budget -= len;
                    written += 1;
                    rx.on_ack_sent();
                }
                Some((_, Err(_))) => rx.on_ack_sent(), // cannot be encoded: drop, never stay due
                None if shrink => rx.on_ack_sent(),    // not even one range fits: drop
                None => {}                             // waits for an ACK-only datagram
            }
        }
        written
    }

    /// Whether each path's ACKs go only on that path, piggybacked or alone: in a session
    /// that has carried a stream (docs/protocol.md#stream-scheduling). A path that dies both
    /// ways then takes only its own feedback with it. With every ACK on one path, a one-way
    /// stream transfer's receiver (which sends nothing ack-eliciting, so never learns a path
    /// died) kept sending every path's ACKs over the fastest path, alone or on its
    /// flow-control updates; when that path went dark, the other paths' senders heard
    /// nothing, judged them down too and restarted their windows (a 1.2 s stall on the test
    /// bed's T4). Packet mode keeps the one path the scheduler picks for control datagrams.
    pub(super) fn acks_return_on_their_path(&self) -> bool {
        self.streams.ever_used()
    }

    fn transmit_ack_only(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        let (ack_every, max_ack_delay) = (self.config.ack_every, self.config.max_ack_delay);
        let due = self.paths.iter().flatten().any(|s| {
            s.rx.ack_deadline(ack_every, max_ack_delay)
                .is_some_and(|t| t <= now)
        });
        if !due {
            return None;
        }
        let path = self.ack_path(now)?;
        let seq = self.slot(path)?.tx.next_seq();
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        let room = w.remaining();
        if self.write_acks(now, &mut w, room, true, path) == 0 {
            return None;
        }
        let len = w.len();
        self.sent_control(now, path, len, false, None)
    }

    /// Where an ACK-only datagram goes: where the scheduler puts a small control datagram
    /// (so it takes the path that delivers it soonest, counted in the scheduler's model of
    /// the path queues, instead of crowding a slow idle path); if no path is usable, the
    /// path that last received something (it reaches the peer's socket at least one way),
    /// else the first path.
    pub(super) fn ack_path(&mut self, now: Time) -> Option<PathId> {
        const ACK_DATAGRAM_ESTIMATE: usize = 64;
        if self.acks_return_on_their_path() {
            // The path whose ACK is due first; `write_acks` puts that path's ACK alone in it.
            let (every, delay) = (self.config.ack_every, self.config.max_ack_delay);
            let due_first = self
                .paths
                .iter()
                .flatten()
                .filter_map(|s| s.rx.ack_deadline(every, delay).map(|t| (t, s.tx.id())))
                .min();
            if let Some((_, path)) = due_first {
                return Some(path);
            }
        }
        self.refresh_views(false);
        self.avoid_receive_silent_paths(now);
        let meta = PacketMeta {
            global_seq: self.next_global,
            len: self.on_link(ACK_DATAGRAM_ESTIMATE),
            arrival: now,
            control: true,
        };
        let usable = |id: PathId| self.views.iter().any(|v| v.id == id && v.is_selectable());
        let placed = self
            .scheduler
            .select_control(now, &self.views, &meta)
            .filter(|p| usable(*p));
        let slots = || self.paths.iter().flatten();
        placed
            .or_else(|| {
                slots()
                    .filter(|s| s.rx.last_recv().is_some())
                    .max_by_key(|s| s.rx.last_recv())
                    .map(|s| s.tx.id())
            })
            .or_else(|| slots().next().map(|s| s.tx.id()))
    }
}
