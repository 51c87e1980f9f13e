//! Packet storage of the send queue: one slab of slots shared by every flow, each flow a
//! FIFO linked through its slots, and a pool of byte buffers.
//!
//! Invariants:
//! - `len` and `bytes` are the number and total length of the packets in all FIFOs; a
//!   [`Fifo`]'s `len` and `bytes` are its own share;
//! - a slot is either free (listed in `free_slots`) or holds exactly one packet of exactly
//!   one FIFO; the slab only grows when no slot is free, so it never holds more slots than
//!   the most packets ever queued at once;
//! - buffers are recycled through the pool, so steady state allocates nothing per packet.

use super::Queued;
use crate::time::Time;

/// End of a FIFO's chain.
const NIL: u32 = u32::MAX;
/// Buffers kept for reuse at most.
const MAX_FREE_BUFFERS: usize = 256;

/// One flow's packets, oldest first.
#[derive(Debug, Clone)]
pub struct Fifo {
    head: u32,
    tail: u32,
    /// Packets in it.
    pub len: usize,
    /// Their total length.
    pub bytes: usize,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo {
            head: NIL,
            tail: NIL,
            len: 0,
            bytes: 0,
        }
    }
}

impl Fifo {
    /// Holds no packet.
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }
}

#[derive(Debug)]
struct Slot {
    packet: Queued,
    next: u32,
}

/// The slab, the buffer pool and the totals.
#[derive(Debug, Default)]
pub struct Store {
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    buffers: Vec<Vec<u8>>,
    /// Packets stored.
    pub len: usize,
    /// Their total length.
    pub bytes: usize,
}

impl Store {
    /// Appends a copy of `packet` to `fifo`; returns the slot it took (an identity that
    /// holds while the packet is stored).
    pub fn push_back(&mut self, fifo: &mut Fifo, arrival: Time, packet: &[u8]) -> u32 {
        let mut bytes = self.buffers.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(packet);
        let slot = Slot {
            packet: Queued {
                arrival,
                bytes,
                sparse: false,
                fec_sparse: false,
            },
            next: NIL,
        };
        let id = match self.free_slots.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        if fifo.is_empty() {
            fifo.head = id;
        } else {
            self.slots[fifo.tail as usize].next = id;
        }
        fifo.tail = id;
        fifo.len += 1;
        fifo.bytes += packet.len();
        self.len += 1;
        self.bytes += packet.len();
        id
    }

    /// The oldest packet of `fifo`.
    pub fn front<'a>(&'a self, fifo: &Fifo) -> Option<&'a Queued> {
        (!fifo.is_empty()).then(|| &self.slots[fifo.head as usize].packet)
    }

    /// The oldest packet of `fifo`, to change in place.
    pub fn front_mut<'a>(&'a mut self, fifo: &Fifo) -> Option<&'a mut Queued> {
        (!fifo.is_empty()).then(|| &mut self.slots[fifo.head as usize].packet)
    }

    /// Removes the oldest packet of `fifo` and returns it with the slot it had.
    pub fn pop_front(&mut self, fifo: &mut Fifo) -> Option<(u32, Queued)> {
        if fifo.is_empty() {
            return None;
        }
        let id = fifo.head;
        let slot = &mut self.slots[id as usize];
        let packet = Queued {
            arrival: slot.packet.arrival,
            bytes: std::mem::take(&mut slot.packet.bytes),
            sparse: false,
            fec_sparse: false,
        };
        fifo.head = slot.next;
        if fifo.head == NIL {
            fifo.tail = NIL;
        }
        slot.next = NIL;
        self.free_slots.push(id);
        let n = packet.bytes.len();
        fifo.len -= 1;
        fifo.bytes -= n;
        self.len -= 1;
        self.bytes -= n;
        Some((id, packet))
    }

    /// Removes and discards the oldest packet of `fifo` (its buffer goes to the pool);
    /// returns the slot it had.
    pub fn drop_front(&mut self, fifo: &mut Fifo) -> Option<u32> {
        let (id, packet) = self.pop_front(fifo)?;
        self.recycle(packet.bytes);
        Some(id)
    }

    /// The packets of `fifo`, oldest first.
    #[cfg(test)]
    pub fn iter<'a>(&'a self, fifo: &Fifo) -> impl Iterator<Item = &'a Queued> + 'a {
        let mut at = fifo.head;
        std::iter::from_fn(move || {
            let slot = self.slots.get(at as usize)?;
            at = slot.next;
            Some(&slot.packet)
        })
    }

    /// Returns a buffer to the pool.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.buffers.len() < MAX_FREE_BUFFERS {
            self.buffers.push(buf);
        }
    }
}
