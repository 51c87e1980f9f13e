//! Sending FEC repair symbols (docs/protocol.md#fec): when a block closes, its symbols go
//! out before new data, each in its own datagram (with pending ACKs when they fit), on a
//! path that is not losing packets. The pieces of a cut symbol go one per datagram too.
//!
//! Path choice: among the paths that may carry data (their windows aside), those whose
//! measured random loss (`shallow_loss_rate`) is within [`LOSS_SLACK`] of the lowest; of
//! those, the ones that carried none of the block's packets when there are any (a symbol is
//! worth most where its block's losses did not happen); of those, the one that delivers
//! soonest by measurement (`sched::measured_delivery`). The packet scheduler is
//! not asked (its state is built for the data it places) but hears of every symbol sent, as
//! of every datagram. A symbol with no such path is dropped.
//!
//! With packet pacing (docs/protocol.md#packet-pacing) a symbol obeys the paths' windows
//! and pacers as data does: the soonest delivery counts how long each path holds a full
//! datagram (until its pacer's release; the peer's ACK delay when its window is full), and
//! when the chosen path is held the symbol waits at the head of the encoder's queue, for
//! that release or for an ACK. So a held clean path is never replaced by a lossy one, and a
//! symbol waits a moment for a near path rather than going at once on one far behind it.
//! Sent past windows and pacers, a block's symbols left in a burst and doubled the link
//! queue the pacers keep short (`tests/fec.rs`).
//!
//! A symbol whose block closed more than twice the receiver's repair wait ago is dropped
//! unsent (`fec_symbols_expired`): the receiver has stopped holding its block's holes.
//!
//! Invariants: a symbol is sent, dropped (counted) or put back first in line, never two of
//! these; a wait is only ever until a pacer release after `now`, or for an ACK.

use std::time::Duration;

use super::Session;
use super::types::Transmit;
use crate::fec::PendingSymbol;
use crate::ids::PathId;
use crate::path::{PathView, SendHold};
use crate::sched::PacketMeta;
use crate::time::Time;
use crate::wire::{FecRepairRepr, Writer};

/// Paths whose random loss is within this of the lowest are equally good for symbols.
const LOSS_SLACK: f64 = 0.005;

/// Where the next symbol goes.
enum Choice {
    Send(PathId),
    /// Packet pacing holds the chosen path: wait until its pacer's release (`None`: for an
    /// ACK that opens its window).
    Wait(Option<Time>),
    /// No path may carry it: the symbol is dropped.
    Drop,
}

impl Session {
    /// The next FEC repair symbol, if a block has closed (or its time is up).
    pub(super) fn transmit_fec(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        let due = self
            .fec_encoder
            .as_ref()?
            .deadline()
            .is_some_and(|t| t <= now);
        if due {
            self.refresh_views(false);
            if let Some(enc) = self.fec_encoder.as_mut() {
                enc.close_due(now, &self.views);
            }
        }
        self.fec_wait_until = None;
        // Called for every datagram sent: the paths' RTTs are walked only when a symbol
        // waits.
        if self.fec_encoder.as_ref()?.pending() == 0 {
            return None;
        }
        // The receiver holds a hole for its repair wait after the evidence for it, which
        // for the block's last packet comes about one path delay after the block closed:
        // twice the wait covers both. A symbol older than that would rebuild a packet the
        // receiver has given up (delivered late, which the end hosts read as a loss), and
        // waiting at the head of the queue it would hold back the next blocks' symbols.
        let max_age = self.repair_wait().map(|w| w * 2);
        loop {
            let symbol = self.fec_encoder.as_mut()?.poll_symbol(now, max_age)?;
            self.refresh_views(false);
            let path = match self.fec_path(now, &symbol) {
                Choice::Send(path) => path,
                Choice::Wait(release) => {
                    self.fec_wait_until = release;
                    if let Some(enc) = self.fec_encoder.as_mut() {
                        enc.unpoll_symbol(symbol);
                    }
                    return None;
                }
                Choice::Drop => {
                    self.stats.fec_symbols_dropped += 1;
                    continue;
                }
            };
            if let Some(t) = self.write_fec(now, path, &symbol, buf) {
                self.stats.fec_symbols_sent += 1;
                return Some(t);
            }
            self.stats.fec_symbols_dropped += 1;
        }
    }

    fn fec_path(&self, now: Time, symbol: &PendingSymbol) -> Choice {
        // Paths that may carry data, their windows aside (`is_usable` would leave out the
        // paths packet pacing holds, which are still where a symbol is worth most).
        let carriers: Vec<&PathView> = self.views.iter().filter(|v| v.may_carry()).collect();
        let best = carriers
            .iter()
            .map(|v| v.shallow_loss_rate)
            .fold(f64::INFINITY, f64::min);
        let good = |v: &&&PathView| v.shallow_loss_rate <= best + LOSS_SLACK;
        let elsewhere = |v: &&&PathView| symbol.source_paths & (1 << v.id.index()) == 0;
        let mut candidates: Vec<&PathView> = carriers
            .iter()
            .filter(good)
            .filter(elsewhere)
            .copied()
            .collect();
        if candidates.is_empty() {
            candidates = carriers.iter().filter(good).copied().collect();
        }
        let len = self.on_link(crate::wire::HEADER_LEN + symbol.symbol.len() + 12);
        // Soonest delivery by measurement (`sched::measured_delivery`), plus how long the
        // path's window and pacer hold a datagram: a symbol waits for a near path's pacer
        // rather than going at once on a path far behind it. Paths with no delay measure
        // come last; ties go to the lower id. Not the packet scheduler: its state (queue
        // models, anchors) is built for the data it places; it hears of symbols in
        // `note_sent`.
        let ack_hold = crate::cc::AckHold::of(&self.config);
        let mut chosen: Option<((bool, Duration), PathId, SendHold)> = None;
        for v in candidates {
            let (unmeasured, delay) = crate::sched::measured_delivery(v, len, ack_hold);
            let hold = self.hold(now, v.id);
            // A full window waits for an ACK: the peer's ACK delay at most.
            let wait = match hold {
                SendHold::Open { .. } => Duration::ZERO,
                SendHold::Pacer(t) => t.saturating_since(now),
                SendHold::Window => self.config.max_ack_delay,
            };
            let key = (unmeasured, delay.saturating_add(wait));
            if chosen
                .as_ref()
                .is_none_or(|(k, id, _)| key < *k || (key == *k && v.id < *id))
            {
                chosen = Some((key, v.id, hold));
            }
        }
        match chosen {
            None => Choice::Drop,
            Some((_, id, SendHold::Open { .. })) => Choice::Send(id),
            Some((_, _, SendHold::Pacer(t))) => Choice::Wait(Some(t)),
            Some((_, _, SendHold::Window)) => Choice::Wait(None),
        }
    }

    /// What holds a full datagram on `path` now: packet pacing's window and pacer, or
    /// nothing without it.
    fn hold(&self, now: Time, path: PathId) -> SendHold {
        let open = SendHold::Open { room: u64::MAX };
        if !self.config.packet_pacing {
            return open;
        }
        let size = self.on_link(self.config.max_datagram_size) as u64;
        self.slot(path).map_or(open, |s| s.tx.send_hold(now, size))
    }

    fn write_fec(
        &mut self,
        now: Time,
        path: PathId,
        symbol: &PendingSymbol,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let seq = self.slot(path)?.tx.next_seq();
        let repr = FecRepairRepr {
            first: symbol.first as u32,
            mask: symbol.mask,
            repair_count: symbol.repair_count,
            index: symbol.index,
            part: symbol.part,
            parts: symbol.parts,
            symbol: &symbol.symbol,
        };
        let mut w = Writer::new(buf);
        self.header(path, seq, now).write_to(&mut w).ok()?;
        let room = w.remaining().checked_sub(repr.encoded_len())?;
        self.write_acks(now, &mut w, room, false, path);
        repr.encode(&mut w).ok()?;
        let len = w.len();
        let on_link = self.on_link(len);
        let meta = PacketMeta {
            global_seq: symbol.first,
            len: on_link,
            arrival: now,
            control: false,
        };
        self.note_sent(now, path, &meta);
        self.slot_mut(path)?
            .tx
            .on_sent(now, on_link, true, None, None);
        Some(Transmit { path, len })
    }
}
