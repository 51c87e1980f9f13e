//! A link's buffer: the waiting packets (FIFO or fair-queued), their count and bytes, and
//! the admission rule of the shared limit.
//!
//! Owns: the packets waiting to be serialised (not the one in service, which the link
//! holds) and the decision "does this arrival fit".
//!
//! Invariants: `len` and `bytes` always equal the count and total size of the waiting
//! packets. The limit counts the packet in service too (ns-2 DropTail parity, see
//! [`QueueLimit`]); the link passes its size in. A drop-tail or plain WFQ queue refuses the
//! arrival when it does not fit; a longest-queue-drop WFQ queue pushes out packets of the
//! longest other flow first (handed to the caller) and refuses the arrival only when its
//! own flow is the longest or the arrival could never fit.

use std::collections::VecDeque;

use super::config::{Discipline, QueueLimit};
use super::wfq::Wfq;
use crate::packet::Packet;

#[derive(Debug)]
enum Order {
    Fifo(VecDeque<Packet>),
    Fair { wfq: Wfq, push_out: bool },
}

/// The waiting packets of one link.
#[derive(Debug)]
pub(crate) struct PacketQueue {
    order: Order,
    limit: QueueLimit,
    len: usize,
    bytes: usize,
}

impl PacketQueue {
    pub(crate) fn new(discipline: Discipline, limit: QueueLimit) -> PacketQueue {
        let order = match discipline {
            Discipline::DropTail => Order::Fifo(VecDeque::new()),
            Discipline::Wfq => Order::Fair {
                wfq: Wfq::default(),
                push_out: false,
            },
            Discipline::WfqLongestQueueDrop => Order::Fair {
                wfq: Wfq::default(),
                push_out: true,
            },
        };
        PacketQueue {
            order,
            limit,
            len: 0,
            bytes: 0,
        }
    }

    /// Waiting packets.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Waiting bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether an arrival of `size` bytes fits beside what waits and `in_service` (the size
    /// of the packet being serialised, if any).
    fn fits(&self, size: u32, in_service: Option<u32>) -> bool {
        match self.limit {
            QueueLimit::Packets(n) => self.len + usize::from(in_service.is_some()) < n,
            QueueLimit::Bytes(n) => {
                self.bytes + in_service.map_or(0, |s| s as usize) + size as usize <= n
            }
        }
    }

    /// Admits `pkt` or gives it back. Packets pushed out to make room (longest-queue drop
    /// only) go to `pushed_out`, in the order they were removed.
    pub(crate) fn admit(
        &mut self,
        pkt: Packet,
        in_service: Option<u32>,
        mut pushed_out: impl FnMut(Packet),
    ) -> Result<(), Packet> {
        while !self.fits(pkt.size, in_service) {
            let Order::Fair {
                wfq,
                push_out: true,
            } = &mut self.order
            else {
                return Err(pkt);
            };
            // Would not fit even in an otherwise empty buffer: refuse without pushing out.
            let alone_fits = match self.limit {
                QueueLimit::Packets(n) => usize::from(in_service.is_some()) < n,
                QueueLimit::Bytes(n) => {
                    in_service.map_or(0, |s| s as usize) + pkt.size as usize <= n
                }
            };
            if !alone_fits {
                return Err(pkt);
            }
            let by_bytes = matches!(self.limit, QueueLimit::Bytes(_));
            match wfq.push_out_longest(pkt.flow, pkt.size, by_bytes) {
                Some(victim) => {
                    self.len -= 1;
                    self.bytes -= victim.size as usize;
                    pushed_out(victim);
                }
                None => return Err(pkt),
            }
        }
        self.len += 1;
        self.bytes += pkt.size as usize;
        match &mut self.order {
            Order::Fifo(q) => q.push_back(pkt),
            Order::Fair { wfq, .. } => wfq.push(pkt),
        }
        Ok(())
    }

    /// The next packet to serialise.
    pub(crate) fn pop(&mut self) -> Option<Packet> {
        let pkt = match &mut self.order {
            Order::Fifo(q) => q.pop_front(),
            Order::Fair { wfq, .. } => wfq.pop(),
        }?;
        self.len -= 1;
        self.bytes -= pkt.size as usize;
        Some(pkt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Body, FlowId};

    fn pkt(flow: FlowId, size: u32) -> Packet {
        Packet {
            flow,
            size,
            body: Body::Udp,
        }
    }

    #[test]
    fn packet_limit_counts_the_packet_in_service() {
        let mut q = PacketQueue::new(Discipline::DropTail, QueueLimit::Packets(3));
        // Idle link: up to 3 may wait (one of them will go straight into service).
        for _ in 0..3 {
            assert!(q.admit(pkt(0, 100), None, |_| ()).is_ok());
        }
        assert!(q.admit(pkt(0, 100), None, |_| ()).is_err());
        let _ = q.pop();
        // Busy link: 2 waiting + 1 in service = 3 -> full.
        assert!(q.admit(pkt(0, 100), Some(100), |_| ()).is_err());
        assert_eq!((q.len(), q.bytes()), (2, 200));
    }

    #[test]
    fn byte_limit_counts_the_packet_in_service() {
        let mut q = PacketQueue::new(Discipline::DropTail, QueueLimit::Bytes(3000));
        assert!(q.admit(pkt(0, 1500), Some(1000), |_| ()).is_ok());
        assert!(q.admit(pkt(0, 501), Some(1000), |_| ()).is_err());
        assert!(q.admit(pkt(0, 500), Some(1000), |_| ()).is_ok());
        assert_eq!((q.len(), q.bytes()), (2, 2000));
        // Bigger than the whole buffer: refused even when idle and empty.
        let mut e = PacketQueue::new(Discipline::DropTail, QueueLimit::Bytes(3000));
        assert!(e.admit(pkt(0, 3001), None, |_| ()).is_err());
    }

    #[test]
    fn longest_queue_drop_pushes_out_the_hog() {
        let mut q = PacketQueue::new(Discipline::WfqLongestQueueDrop, QueueLimit::Packets(5));
        for _ in 0..4 {
            assert!(q.admit(pkt(1, 100), Some(100), |_| ()).is_ok());
        }
        let mut out = Vec::new();
        assert!(q.admit(pkt(2, 100), Some(100), |p| out.push(p)).is_ok());
        assert_eq!(out.iter().map(|p| p.flow).collect::<Vec<_>>(), [1]);
        assert!(q.admit(pkt(1, 100), Some(100), |p| out.push(p)).is_err());
        assert_eq!((q.len(), q.bytes()), (4, 400));
        // Plain WFQ refuses the arrival instead.
        let mut w = PacketQueue::new(Discipline::Wfq, QueueLimit::Packets(5));
        for _ in 0..4 {
            assert!(w.admit(pkt(1, 100), Some(100), |_| ()).is_ok());
        }
        assert!(w.admit(pkt(2, 100), Some(100), |_| unreachable!()).is_err());
    }

    #[test]
    fn longest_queue_drop_by_bytes_may_push_out_several() {
        let mut q = PacketQueue::new(Discipline::WfqLongestQueueDrop, QueueLimit::Bytes(1000));
        for _ in 0..10 {
            assert!(q.admit(pkt(1, 100), None, |_| ()).is_ok());
        }
        let mut out = Vec::new();
        assert!(q.admit(pkt(2, 300), None, |p| out.push(p)).is_ok());
        assert_eq!(out.len(), 3);
        assert_eq!((q.len(), q.bytes()), (8, 1000));
        // An arrival larger than the buffer pushes nothing out.
        assert!(q.admit(pkt(3, 1001), None, |_| unreachable!()).is_err());
    }
}
