//! The receiving half of a session: datagrams in, in-order inner packets out.
//!
//! A datagram is checked whole (header, session, path, every frame) before any frame acts,
//! so a malformed one has no effect at all. Its header is decoded once: here for
//! [`Session::handle_datagram`], by the driver for [`Session::handle_decoded`]. Then, in
//! frame order: DATA goes through the duplicate filter into the reorder buffer; ACK and
//! PROBE_ACK feed the named path's estimators; PROBE queues a PROBE_ACK; CLOSE closes
//! (docs/protocol.md#frames).

use std::time::Duration;

use super::ack_tracker::Arrived;
use super::types::{Delivery, Event, RecvError};
use super::{Lifecycle, MAX_PROBE_ACKS, Session, push_event};
use crate::ids::{PathId, PathSeq, expand_seq};
use crate::reorder::{Arrival, Freshness, ReorderBuffer};
use crate::time::Time;
use crate::wire::{AckFrame, DataFrame, DecodeError, Frame, HEADER_LEN, Header, frames};

impl Session {
    /// Hands the session a datagram that arrived on `path` (the link / socket the driver
    /// read it from). On error the datagram is ignored whole (and counted).
    pub fn handle_datagram(
        &mut self,
        now: Time,
        path: PathId,
        datagram: &[u8],
    ) -> Result<(), RecvError> {
        self.advance(now);
        let result = self.open_for_input().and_then(|()| {
            let (header, payload) = Header::decode(datagram)?;
            self.process_datagram(self.now, path, &header, payload)
        });
        self.count_received(result)
    }

    /// [`Session::handle_datagram`] for a datagram the driver has already decoded with
    /// [`Header::decode`], because it needed the header first (the tunnel's server learns
    /// from it which path an authenticated datagram belongs to): `header` and `payload` are
    /// what that decode returned, so each datagram is decoded once. The session checks
    /// them exactly as it checks a whole datagram (a hand-made header or an empty payload
    /// is refused, never trusted).
    pub fn handle_decoded(
        &mut self,
        now: Time,
        path: PathId,
        header: &Header,
        payload: &[u8],
    ) -> Result<(), RecvError> {
        self.advance(now);
        let result = self
            .open_for_input()
            .and_then(|()| self.process_datagram(self.now, path, header, payload));
        self.count_received(result)
    }

    /// The next in-order inner packet, written into `buf` (which must hold the largest
    /// inner packet, [`crate::Config::max_inner_packet`]). Call until `None`.
    pub fn poll_delivery(&mut self, buf: &mut [u8]) -> Option<Delivery> {
        while let Some((global_seq, bytes)) = self.express.pop_front() {
            let Some(dst) = buf.get_mut(..bytes.len()) else {
                continue; // larger than any inner packet this session carries: dropped
            };
            dst.copy_from_slice(&bytes);
            self.stats.delivered += 1;
            self.stats.delivered_unordered += 1;
            return Some(Delivery {
                len: bytes.len(),
                global_seq,
                held_for: std::time::Duration::ZERO,
                late: false,
            });
        }
        let r = loop {
            let r = self.reorder.poll_release(self.now, buf)?;
            // The stand-in of a packet already delivered out of order: skip it.
            let stand_in = r.len == 0
                && self
                    .expressed
                    .iter()
                    .position(|g| *g == r.global_seq)
                    .and_then(|i| self.expressed.remove(i))
                    .is_some();
            if !stand_in {
                break r;
            }
        };
        self.stats.delivered += 1;
        Some(Delivery {
            len: r.len,
            global_seq: r.global_seq,
            held_for: r.held_for,
            late: r.late,
        })
    }

    /// A closed session takes no datagram (checked before any decode).
    fn open_for_input(&self) -> Result<(), RecvError> {
        if self.lifecycle == Lifecycle::Closed {
            return Err(RecvError::Closed);
        }
        Ok(())
    }

    fn count_received(&mut self, result: Result<(), RecvError>) -> Result<(), RecvError> {
        match result {
            Ok(()) => self.stats.datagrams_received += 1,
            Err(_) => self.stats.datagrams_rejected += 1,
        }
        result
    }

    /// Checks and acts on one decoded datagram: `header`, then the frames in `payload`.
    fn process_datagram(
        &mut self,
        now: Time,
        path: PathId,
        header: &Header,
        payload: &[u8],
    ) -> Result<(), RecvError> {
        if header.path != path {
            return Err(RecvError::PathMismatch {
                header: header.path,
                arrived: path,
            });
        }
        // One pass validates every frame (nothing acts before the whole datagram checks out)
        // and notes whether it elicits an ACK; the second pass acts.
        if payload.is_empty() {
            return Err(DecodeError::Empty.into());
        }
        let (mut ack_eliciting, mut ack_soon) = (false, false);
        for frame in frames(payload) {
            let frame = frame?;
            ack_eliciting |= frame.is_ack_eliciting();
            ack_soon |= matches!(
                frame,
                Frame::Extension {
                    frame_type: crate::wire::frame_type::ACK_SOON,
                    ..
                }
            );
        }
        let slot = self.slot_mut(path).ok_or(RecvError::UnknownPath(path))?;
        let seq = slot.rx.expand(header.path_seq);
        if slot.rx.on_received(now, seq, ack_eliciting, ack_soon) == Arrived::Duplicate {
            return Err(RecvError::Duplicate(path));
        }
        let stats = slot.tx.stats_mut();
        stats.recv_datagrams += 1;
        stats.recv_bytes += (HEADER_LEN + payload.len()) as u64;
        self.reorder.on_datagram(now, path, header.timestamp_us);
        let mut unordered = false;
        for frame in frames(payload).flatten() {
            match frame {
                Frame::Padding => {}
                Frame::Data(data) => {
                    let ts = header.timestamp_us;
                    self.on_data(now, path, seq, ts, &data, std::mem::take(&mut unordered));
                }
                Frame::Extension {
                    frame_type: crate::wire::frame_type::UNORDERED,
                    ..
                } => unordered = true,
                Frame::Ack(ack) => self.on_ack(now, path, &ack),
                Frame::Probe(probe) => {
                    if self.probe_acks.len() < MAX_PROBE_ACKS {
                        self.probe_acks
                            .push_back((path, probe.probe_id, now.wire_micros()));
                    }
                }
                Frame::ProbeAck(pa) => {
                    if let Some(slot) = self.paths.get_mut(pa.path.index()).and_then(Option::as_mut)
                    {
                        let out = slot.tx.on_probe_ack(now, pa.probe_id);
                        self.on_state_change(now, pa.path, out.state_change);
                    }
                }
                Frame::Close(close) => {
                    self.lifecycle = Lifecycle::Closed;
                    let reason = String::from_utf8_lossy(close.reason).into_owned();
                    let event = Event::Closed {
                        by_peer: true,
                        code: close.error_code,
                        reason,
                    };
                    push_event(&mut self.events, &mut self.stats, event);
                }
                Frame::Stream(f) => {
                    let r = self.streams.on_stream_frame(now, &f);
                    self.stream_result(now, r);
                }
                Frame::ResetStream(f) => {
                    let r = self.streams.on_reset_frame(&f);
                    self.stream_result(now, r);
                }
                Frame::MaxData(m) => self.streams.on_max_data(m),
                Frame::MaxStreamData(f) => {
                    let r = self.streams.on_max_stream_data(&f);
                    self.stream_result(now, r);
                }
                Frame::MaxStreams(m) => self.streams.on_max_streams(m),
                Frame::Extension {
                    frame_type: crate::wire::frame_type::REPAIR_REQUEST,
                    body,
                } => self.on_repair_request(now, body),
                Frame::Extension {
                    frame_type:
                        t @ (crate::wire::frame_type::FEC_REPAIR
                        | crate::wire::frame_type::FEC_REPAIR_PART),
                    body,
                } => {
                    let from = (path, seq, header.timestamp_us);
                    self.on_fec_repair(now, from, t, body);
                }
                // Read by the first pass, for the path's ACK tracker.
                Frame::Extension {
                    frame_type: crate::wire::frame_type::ACK_SOON,
                    ..
                } => {}
                Frame::Extension { .. } => self.stats.extensions_skipped += 1,
            }
        }
        Ok(())
    }

    fn stream_result(&mut self, now: Time, r: Result<(), crate::stream::StreamViolation>) {
        if let Err(v) = r
            && self.lifecycle == Lifecycle::Open
        {
            self.on_stream_violation(now, v);
        }
    }

    fn on_data(
        &mut self,
        now: Time,
        path: PathId,
        path_seq: PathSeq,
        send_ts_us: u32,
        data: &DataFrame<'_>,
        unordered: bool,
    ) {
        let global = expand_seq(self.recv_next_global, data.global_seq);
        let prev_on_path = (data.prev_delta > 0)
            .then(|| global.checked_sub(data.prev_delta))
            .flatten();
        match self.dedup.check_and_insert(global) {
            Freshness::Fresh => {
                self.recv_next_global = self.recv_next_global.max(global + 1);
                let arrival = Arrival {
                    global_seq: global,
                    path,
                    path_seq,
                    prev_on_path,
                    send_ts_us,
                };
                if unordered && self.express.len() < super::MAX_EXPRESS {
                    // Delivered at once; an empty stand-in keeps the reorder buffer's
                    // order and loss evidence (docs/protocol.md#unordered).
                    self.express.push_back((global, data.payload.to_vec()));
                    if self.expressed.len() >= super::MAX_EXPRESSED {
                        self.expressed.pop_front();
                    }
                    self.expressed.push_back(global);
                    self.reorder.insert(now, &arrival, &[]);
                } else {
                    self.reorder.insert(now, &arrival, data.payload);
                }
                let rebuilt = self.fec_decoder.on_source(global, data.payload);
                self.insert_rebuilt(now, (path, path_seq, send_ts_us), rebuilt);
                self.follow_peer_fec();
            }
            Freshness::Duplicate => self.stats.data_duplicates += 1,
            Freshness::TooOld => self.stats.data_too_old += 1,
        }
    }

    /// An FEC repair symbol, whole or a piece (docs/protocol.md#fec): a malformed or inconsistent one is
    /// refused and counted (the rest of the datagram still counts); packets it lets the
    /// store rebuild go to the reorder buffer.
    fn on_fec_repair(
        &mut self,
        now: Time,
        from: (PathId, PathSeq, u32),
        frame_type: u8,
        body: &[u8],
    ) {
        let parsed = if frame_type == crate::wire::frame_type::FEC_REPAIR_PART {
            crate::wire::parse_fec_repair_part(body)
        } else {
            crate::wire::parse_fec_repair(body)
        };
        let Ok(repr) = parsed else {
            self.stats.fec_symbols_refused += 1;
            return;
        };
        let first = expand_seq(self.recv_next_global, repr.first);
        if let Ok(rebuilt) = self.fec_decoder.on_repair(first, &repr) {
            self.insert_rebuilt(now, from, rebuilt);
        }
        self.follow_peer_fec();
    }

    /// While the peer sends repair symbols, every hole with loss evidence is held for
    /// repair, not only the link's own losses: a protected packet may be rebuilt whatever
    /// lost it, and a rebuild after its hole was given up reaches the end host as a late
    /// packet (docs/protocol.md#fec). Without symbols, queue overflow reaches the end host
    /// at once, as without FEC.
    fn follow_peer_fec(&mut self) {
        self.reorder
            .set_hold_all_evidence(self.fec_decoder.peer_protects());
    }

    /// Hands packets FEC rebuilt to the reorder buffer, through the duplicate filter (a
    /// packet whose copy arrived, or that was rebuilt before, is not delivered again). They
    /// count as arrived on the path of the datagram that completed their block, naming no
    /// predecessor.
    fn insert_rebuilt(
        &mut self,
        now: Time,
        (path, path_seq, send_ts_us): (PathId, PathSeq, u32),
        rebuilt: Vec<(crate::ids::GlobalSeq, Vec<u8>)>,
    ) {
        for (global, bytes) in rebuilt {
            if bytes.len() > self.config.max_inner_packet() {
                self.stats.fec_symbols_refused += 1;
                continue;
            }
            if self.dedup.check_and_insert(global) != Freshness::Fresh {
                continue;
            }
            self.recv_next_global = self.recv_next_global.max(global + 1);
            self.stats.fec_recovered += 1;
            let arrival = Arrival {
                global_seq: global,
                path,
                path_seq,
                prev_on_path: None,
                send_ts_us,
            };
            self.reorder.insert(now, &arrival, &bytes);
        }
    }

    /// The peer asks for packets again (docs/protocol.md#repair). Ignored when repair is
    /// off or the body is malformed (the rest of the datagram still counts).
    fn on_repair_request(&mut self, now: Time, body: &[u8]) {
        let Some(store) = self.repair.as_mut() else {
            self.stats.extensions_skipped += 1;
            return;
        };
        let Ok(seqs) = crate::wire::parse_repair_request(body) else {
            self.stats.extensions_skipped += 1;
            return;
        };
        let newest = self.next_global.saturating_sub(1);
        for truncated in seqs {
            let global = expand_seq(newest, truncated);
            if global < self.next_global && store.request(now, global) {
                self.stats.repairs_queued += 1;
            } else {
                self.stats.repairs_unavailable += 1;
            }
        }
        // Wake the data path: a repair may go out even if the scheduler was waiting.
        self.sched_blocked = false;
    }

    /// An ACK frame that arrived on `via` (its own path's, or another's: `rtt` module docs).
    fn on_ack(&mut self, now: Time, via: PathId, ack: &AckFrame<'_>) {
        let returned = if via == ack.path() {
            crate::path::Return::OwnPath
        } else {
            crate::path::Return::OtherPath
        };
        let feedback = if self.acks_return_on_their_path() {
            crate::path::Feedback::OwnPath
        } else {
            crate::path::Feedback::AnyPath
        };
        let (coupled, n) = self.coupling_snapshot(now);
        let coupling = crate::cc::Coupling {
            this: ack.path(),
            paths: &coupled[..n],
        };
        let Some(slot) = self
            .paths
            .get_mut(ack.path().index())
            .and_then(Option::as_mut)
        else {
            return;
        };
        let Some(largest) = slot.tx.expand_ack_largest(ack.largest()) else {
            return;
        };
        slot.tx.set_feedback(feedback);
        let out = slot.tx.on_ack(
            now,
            largest,
            Duration::from_micros(ack.ack_delay_us()),
            ack.ranges(largest),
            ack.timestamps(largest),
            &mut self.owd_ref,
            &coupling,
            returned,
        );
        for (seq, acked) in slot.tx.take_resolved() {
            super::resolve(&mut self.streams, ack.path(), seq, acked);
        }
        self.on_state_change(now, ack.path(), out.state_change);
        self.update_repair_wait();
        self.update_send_target();
    }

    fn on_state_change(
        &mut self,
        now: Time,
        path: PathId,
        change: Option<(crate::path::PathState, crate::path::PathState)>,
    ) {
        if let Some((from, to)) = change {
            push_event(
                &mut self.events,
                &mut self.stats,
                Event::PathState { path, from, to },
            );
            self.on_paths_changed(now);
        }
    }
}
