//! Building datagrams of stream frames (docs/protocol.md#stream-scheduling).
//!
//! Stream data goes only where a path's congestion window has room for a full datagram
//! and its pacer lets it go (seed mHIP §III-B: a path is eligible while its window is not
//! full); among those, the stream scheduler (`Config::stream_scheduler`, default `min-rtt`:
//! the smallest smoothed RTT, MPTCP's default rule) picks, seeing each path's window room in
//! its view, so SWTC's window wait, mHIP's full-path rule and BLEST's blocking estimate act
//! on real windows. Lost bytes go first, on
//! whichever path is chosen now (seed ETOM §IV-B: the tunnel retransmits, not the path
//! that lost them). Control frames (flow-control updates, resets) ride along, or go alone
//! where ACKs go when no window has room.
//!
//! A datagram of stream data carries ACK_SOON while its path's controller holds the queue
//! short (docs/protocol.md#ack-soon), and the controller is told whether it did.
//!
//! Invariant: a datagram carrying stream frames is marked reliable on its path, and the
//! stream table records what it carried under its path sequence number, so its fate
//! reaches the streams exactly once.

use super::{Session, Transmit};
use crate::ids::PathId;
use crate::path::SendHold;
use crate::sched::{PacketMeta, Scheduler, Selection};
use crate::time::Time;
use crate::wire::{ExtensionRepr, Writer};

/// Room kept for piggybacked ACK frames in a stream datagram.
const ACK_ROOM: usize = 128;
/// ACK_SOON (extension 0x16, empty body: 2 bytes).
const ACK_SOON_MARK: ExtensionRepr<'static> = ExtensionRepr {
    frame_type: crate::wire::frame_type::ACK_SOON,
    body: &[],
};

impl Session {
    /// Sets every view's `cwnd_room`: the room left in the path's window, or 0 when a full
    /// datagram does not fit or the pacer holds it. Returns when the pacer next lets a
    /// datagram go on a usable path whose window has room (if it holds one now).
    pub(super) fn mark_window_room(&mut self, now: Time) -> Option<Time> {
        let size = self.on_link(self.config.max_datagram_size) as u64;
        let mut earliest: Option<Time> = None;
        for view in &mut self.views {
            let Some(slot) = self.paths.get(view.id.index()).and_then(Option::as_ref) else {
                continue;
            };
            view.cwnd_room = Some(match slot.tx.send_hold(now, size) {
                SendHold::Open { room } => room,
                SendHold::Pacer(release) => {
                    if view.may_carry() {
                        earliest = Some(earliest.map_or(release, |e| e.min(release)));
                    }
                    0
                }
                SendHold::Window => 0,
            });
        }
        earliest
    }

    /// The path for the next stream datagram, chosen by the stream scheduler among the
    /// paths whose window and pacer have room for a full datagram now (their views show
    /// `cwnd_room`: the room left, or 0 when a full datagram does not fit or the pacer holds
    /// it); otherwise notes when the pacer next lets one go.
    fn stream_path(&mut self, now: Time) -> Option<PathId> {
        self.refresh_views(true);
        let mut earliest = self.mark_window_room(now);
        let meta = PacketMeta {
            global_seq: self.next_global,
            len: self.on_link(self.config.max_datagram_size),
            arrival: now,
            control: false,
        };
        let choice = match self.stream_scheduler.select(now, &self.views, &meta) {
            Selection::Send(p) => Some(p),
            Selection::Duplicate(ps) => ps.first().copied(),
            Selection::Wait(Some(t)) if t > now => {
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
                None
            }
            Selection::Wait(_) => None,
        }
        .filter(|p| self.views.iter().any(|v| v.id == *p && v.is_selectable()));
        if choice.is_none() {
            self.stream_pace_until = earliest;
        }
        choice
    }

    /// A datagram of stream frames, if the streams have something the paths can take.
    pub(super) fn transmit_stream(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        self.stream_pace_until = None;
        if !self.streams.wants_to_send() {
            return None;
        }
        let (path, data) = match self.stream_path(now) {
            Some(p) => (p, true),
            // Control frames with no window room go where ACKs go, but only on a usable
            // path: one sent on a path that is down would never be resolved (acknowledged or
            // declared lost) and so never sent again.
            None if self.streams.has_control_due() => {
                let path = self.ack_path(now)?;
                if !self.slot(path)?.tx.state().is_usable() {
                    return None;
                }
                (path, false)
            }
            None => return None,
        };
        let seq = self.slot(path)?.tx.next_seq();
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        // docs/protocol.md#ack-soon: prompt ACKs while the path's controller holds its queue
        // short; the controller's model of the peer's hold follows the mark.
        let mut marked = false;
        if data {
            let slot = self.slot_mut(path)?;
            marked =
                slot.tx.congestion().wants_prompt_acks() && ACK_SOON_MARK.encode(&mut w).is_ok();
            slot.tx.on_ack_soon(now, marked);
        }
        let before_frames = w.len();
        let room = w.remaining().min(ACK_ROOM);
        self.write_acks(now, &mut w, room, false, path);
        let mut sent = Vec::new();
        self.streams.write_frames(&mut w, data, &mut sent);
        if sent.is_empty() {
            // Nothing fitted (cannot happen with a datagram of at least 576 bytes); the
            // ACKs written are still worth sending, a header and mark alone are not.
            if w.len() == before_frames {
                return None;
            }
        }
        let len = w.len();
        let on_link = self.on_link(len);
        let meta = PacketMeta {
            global_seq: self.next_global,
            len: on_link,
            arrival: now,
            control: true,
        };
        self.note_sent(now, path, &meta);
        let slot = self.slot_mut(path)?;
        // The mark alone makes a datagram ack-eliciting at the receiver (extension frames do).
        let seq = slot
            .tx
            .on_sent(now, on_link, !sent.is_empty() || marked, None, None);
        slot.tx.mark_reliable(seq);
        self.streams.on_datagram_sent(path, seq, sent);
        Some(Transmit { path, len })
    }
}
