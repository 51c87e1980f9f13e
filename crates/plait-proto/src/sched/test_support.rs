//! Helpers shared by the schedulers' unit tests.

use super::{PacketMeta, Scheduler, Selection};
use crate::ids::PathId;
use crate::path::PathView;
use crate::time::Time;

/// A 1000-byte data packet with global sequence number `seq`, handed over at `now`.
pub fn data(seq: u64, now: Time) -> PacketMeta {
    PacketMeta {
        global_seq: seq,
        len: 1000,
        arrival: now,
        control: false,
    }
}

/// A control datagram of `len` bytes at `now`.
pub fn control(now: Time, len: usize) -> PacketMeta {
    PacketMeta {
        global_seq: 0,
        len,
        arrival: now,
        control: true,
    }
}

/// Selects `pkt` at `now`, reports the send, returns the path (panics on anything but Send).
pub fn send<S: Scheduler>(s: &mut S, now: Time, paths: &[PathView], pkt: &PacketMeta) -> PathId {
    match s.select(now, paths, pkt) {
        Selection::Send(id) => {
            s.on_sent(now, id, pkt);
            id
        }
        other => panic!("expected Send, got {other:?}"),
    }
}

/// `n` data packets at `now`; the path ids they went to.
pub fn picks<S: Scheduler>(s: &mut S, now: Time, paths: &[PathView], n: u64) -> Vec<u8> {
    (0..n)
        .map(|i| send(s, now, paths, &data(i, now)).0)
        .collect()
}
