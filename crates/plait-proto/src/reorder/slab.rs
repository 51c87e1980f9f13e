//! Packet storage shared by the reorder buffers: a slab of slots whose payload buffers are
//! recycled through a free list, so a buffer in steady state copies each packet in and out
//! without allocating.
//!
//! Invariants:
//! - a slot index handed out by [`Slab::alloc`] stays valid until [`Slab::free`] (or
//!   [`Slab::take_into`]) returns it, and is never handed out twice meanwhile;
//! - the slab grows only when no freed slot is available, so its size is the largest number
//!   of packets ever stored at once (which the owning buffer bounds); a recycled buffer
//!   keeps the capacity of the largest packet it ever held.

use std::collections::VecDeque;

use crate::ids::GlobalSeq;
use crate::time::Time;

/// "No slot": marks a missing sequence number in a ring of slot indices.
pub(super) const NIL: u32 = u32::MAX;

/// One stored packet.
#[derive(Debug)]
pub(super) struct Slot {
    /// Its global sequence number.
    pub seq: GlobalSeq,
    /// When it was inserted.
    pub arrived: Time,
    /// When it became releasable without condition (moved to a late or forced queue).
    pub ready: Time,
    /// The sender's timestamp of the datagram that carried it, unwrapped (microseconds).
    pub send_us: i64,
    /// The payload (`len()` is the packet's length).
    pub buf: Vec<u8>,
}

/// Slots plus a free list of recycled ones.
#[derive(Debug, Default)]
pub(super) struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Slab {
    /// Stores a packet and returns its slot index.
    pub fn alloc(&mut self, seq: GlobalSeq, arrived: Time, send_us: i64, packet: &[u8]) -> u32 {
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.seq = seq;
            s.arrived = arrived;
            s.ready = arrived;
            s.send_us = send_us;
            s.buf.clear();
            s.buf.extend_from_slice(packet);
            i
        } else {
            let i = u32::try_from(self.slots.len()).expect("slab index overflow");
            assert!(i != NIL, "slab index overflow");
            self.slots.push(Slot {
                seq,
                arrived,
                ready: arrived,
                send_us,
                buf: packet.to_vec(),
            });
            i
        }
    }

    /// The slot at `i` (which must be allocated).
    pub fn get(&self, i: u32) -> &Slot {
        &self.slots[i as usize]
    }

    /// The slot at `i` (which must be allocated).
    pub fn get_mut(&mut self, i: u32) -> &mut Slot {
        &mut self.slots[i as usize]
    }

    /// Returns slot `i` to the free list.
    pub fn free(&mut self, i: u32) {
        debug_assert!(!self.free.contains(&i), "double free of slot {i}");
        self.free.push(i);
    }

    /// Copies slot `i`'s payload into `out` if it fits and frees the slot either way.
    /// Returns the length copied, or `None` if the packet did not fit (it is dropped).
    pub fn take_into(&mut self, i: u32, out: &mut [u8]) -> Option<usize> {
        let buf = &self.slots[i as usize].buf;
        let len = buf.len();
        let fits = len <= out.len();
        if fits {
            out[..len].copy_from_slice(buf);
        }
        self.free(i);
        fits.then_some(len)
    }

    /// Slots ever created (live plus free).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

/// A FIFO of slot indices with its byte count (the reorder buffers' late and forced
/// queues).
#[derive(Debug, Default)]
pub(super) struct SlotQueue {
    slots: VecDeque<u32>,
    bytes: usize,
}

impl SlotQueue {
    /// Takes the oldest slot index out (the slot stays allocated).
    pub fn pop(&mut self, slab: &Slab) -> Option<u32> {
        let i = self.slots.pop_front()?;
        self.bytes -= slab.get(i).buf.len();
        Some(i)
    }

    /// Appends `i` (ready at `now`), then drops the oldest beyond the caps, keeping `i`.
    /// Returns how many were dropped.
    pub fn push_capped(
        &mut self,
        slab: &mut Slab,
        i: u32,
        now: Time,
        max_packets: usize,
        max_bytes: usize,
    ) -> u64 {
        slab.get_mut(i).ready = now;
        self.slots.push_back(i);
        let newest = slab.get(i).buf.len();
        self.bytes += newest;
        let mut dropped = 0;
        // What one insert moves here (held packets, within the bound, plus the new one) always
        // fits, so a caller that polls after every insert never loses a packet to this cap.
        while self.slots.len() > 1
            && (self.slots.len() - 1 > max_packets.max(1) || self.bytes - newest > max_bytes)
        {
            if let Some(old) = self.pop(slab) {
                slab.free(old);
                dropped += 1;
            }
        }
        dropped
    }

    /// Slot indices queued.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// When the oldest slot became ready.
    pub fn front_ready(&self, slab: &Slab) -> Option<Time> {
        self.slots.front().map(|&i| slab.get(i).ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycles_slots() {
        let mut s = Slab::default();
        let a = s.alloc(1, Time::ZERO, 0, b"abc");
        let b = s.alloc(2, Time::ZERO, 0, b"de");
        assert_ne!(a, b);
        let mut out = [0u8; 8];
        assert_eq!(s.take_into(a, &mut out), Some(3));
        assert_eq!(&out[..3], b"abc");
        let c = s.alloc(3, Time::from_millis(1), 7, b"xyz!");
        assert_eq!(c, a, "freed slot reused");
        assert_eq!(s.get(c).seq, 3);
        assert_eq!(s.get(c).buf, b"xyz!");
        assert_eq!(s.capacity(), 2);
        let mut small = [0u8; 1];
        assert_eq!(s.take_into(b, &mut small), None);
        assert_eq!(s.alloc(4, Time::ZERO, 0, b""), b);
    }
}
