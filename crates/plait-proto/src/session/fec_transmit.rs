//! Sending FEC repair symbols (docs/protocol.md#fec): when a block closes, its symbols go
//! out before new data, each in its own datagram (with pending ACKs when they fit), on a
//! path that is not losing packets. The pieces of a cut symbol go one per datagram too.
//!
//! Path choice: among the usable paths, those whose measured random loss
//! (`shallow_loss_rate`) is within [`LOSS_SLACK`] of the lowest; of those, the ones that
//! carried none of the block's packets when there are any (a symbol is worth most where
//! its block's losses did not happen); of those, the one that delivers soonest by
//! measurement (`sched::soonest_by_measurement`), else the smallest smoothed RTT. The
//! packet scheduler is not asked (its state is built for the data it places) but hears of
//! every symbol sent, as of every datagram. A symbol with no usable path is dropped.
//!
//! With packet pacing (docs/protocol.md#packet-pacing) a symbol obeys the paths' windows
//! and pacers as data does: only paths with room for a full datagram now are candidates
//! (after the loss and "elsewhere" filters, so a lossy path with room never stands in for
//! a clean one without), and when none has room the symbol waits at the head of the
//! encoder's queue, for the earliest of those paths' pacer releases or for an ACK. Sent
//! past them, a block's symbols left in a burst and doubled the link queue the pacers keep
//! short (`tests/fec.rs`).

use super::Session;
use super::types::Transmit;
use crate::fec::PendingSymbol;
use crate::ids::PathId;
use crate::path::PathView;
use crate::sched::PacketMeta;
use crate::time::Time;
use crate::wire::{FecRepairRepr, Writer};

/// Paths whose random loss is within this of the lowest are equally good for symbols.
const LOSS_SLACK: f64 = 0.005;

/// Where the next symbol goes.
enum Choice {
    Send(PathId),
    /// Packet pacing holds every candidate: wait until this pacer release (`None`: for an
    /// ACK that opens a window).
    Wait(Option<Time>),
    /// No usable path: the symbol is dropped.
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
            self.refresh_views();
            if let Some(enc) = self.fec_encoder.as_mut() {
                enc.close_due(now, &self.views);
            }
        }
        self.fec_wait_until = None;
        loop {
            let symbol = self.fec_encoder.as_mut()?.poll_symbol()?;
            self.refresh_views();
            if self.config.packet_pacing {
                self.mark_window_room(now);
            }
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
        let usable: Vec<&PathView> = self.views.iter().filter(|v| v.is_usable()).collect();
        let best = usable
            .iter()
            .map(|v| v.shallow_loss_rate)
            .fold(f64::INFINITY, f64::min);
        let good = |v: &&&PathView| v.shallow_loss_rate <= best + LOSS_SLACK;
        let elsewhere = |v: &&&PathView| symbol.source_paths & (1 << v.id.index()) == 0;
        let mut candidates: Vec<PathView> = usable
            .iter()
            .filter(good)
            .filter(elsewhere)
            .map(|v| (*v).clone())
            .collect();
        if candidates.is_empty() {
            candidates = usable.iter().filter(good).map(|v| (*v).clone()).collect();
        }
        if candidates.is_empty() {
            return Choice::Drop;
        }
        if self.config.packet_pacing {
            // `mark_window_room` set `cwnd_room`: 0 when a full datagram does not fit or
            // the pacer holds the path.
            let (open, held): (Vec<PathView>, Vec<PathView>) = candidates
                .into_iter()
                .partition(|v| v.cwnd_room.is_none_or(|room| room > 0));
            if open.is_empty() {
                return Choice::Wait(self.earliest_release(now, &held));
            }
            candidates = open;
        }
        let meta = PacketMeta {
            global_seq: symbol.first,
            len: self.on_link(crate::wire::HEADER_LEN + symbol.symbol.len() + 12),
            arrival: now,
            control: false,
        };
        // Not the packet scheduler: its state (queue models, anchors) is built for the
        // data it places and is not asked about symbols; it hears of them in `note_sent`.
        crate::sched::soonest_by_measurement(&candidates, &meta)
            .or_else(|| {
                candidates
                    .iter()
                    .min_by_key(|v| v.srtt.unwrap_or(std::time::Duration::MAX))
                    .map(|v| v.id)
            })
            .map_or(Choice::Drop, Choice::Send)
    }

    /// The earliest time one of `held`'s pacers lets a full datagram go on a path whose
    /// window has room for it (`None`: every one waits for an ACK).
    fn earliest_release(&self, now: Time, held: &[PathView]) -> Option<Time> {
        let size = self.on_link(self.config.max_datagram_size) as u64;
        held.iter()
            .filter_map(|v| self.slot(v.id))
            .map(|slot| &slot.tx)
            .filter(|tx| {
                tx.congestion()
                    .window()
                    .saturating_sub(tx.bytes_in_flight())
                    >= size
            })
            .map(|tx| tx.pacing_release(now, size))
            .filter(|t| *t > now)
            .min()
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
