//! Packetised fair queuing with equal weights among flows: self-clocked fair queueing
//! (SCFQ, Golestani 1994), the WFQ of seed PET-BMP §III ("all flows through the base station
//! are given the same weight"), over one shared buffer.
//!
//! Owns: per-flow FIFOs of tagged packets and the order in which they are served.
//!
//! - Tags are in bytes (equal weights, so a packet of `L` bytes advances its flow by `L`):
//!   an arrival of flow `i` gets finish tag `F = max(F_last(i), v) + L`, where the virtual
//!   time `v` is the tag of the packet most recently taken into service (SCFQ). Once all
//!   queued packets are served every `F_last <= v`, so an idle period needs no reset.
//! - Service picks the smallest tag among flow heads; ties go to the lower flow id, then
//!   (within a flow) to the earlier arrival. Served tags are non-decreasing.
//! - The heads live in a binary heap (one live entry per backlogged flow). Pushing out a
//!   flow's only packet leaves its entry stale; entries are checked against the flow's head
//!   by arrival number when popped (lazy deletion).
//! - Flows are found through a `BTreeMap<FlowId, slot>`; a flow's slot and its `VecDeque`
//!   capacity are kept after it goes idle, so steady state allocates nothing per packet.
//!
//! Buffer accounting (the shared limit) is the caller's (`queue.rs`); this file only
//! answers "which packet next" and "which packet to push out".

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use crate::packet::{FlowId, Packet};

/// A flow's head in the service heap; ordering = service order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    tag: u64,
    flow: FlowId,
    seq: u64,
    slot: usize,
}

#[derive(Debug)]
struct Tagged {
    tag: u64,
    seq: u64,
    pkt: Packet,
}

#[derive(Debug)]
struct FlowQueue {
    flow: FlowId,
    /// Finish tag of the flow's last arrival.
    last_finish: u64,
    bytes: usize,
    pkts: VecDeque<Tagged>,
}

/// The fair-queuing scheduler.
#[derive(Debug, Default)]
pub(crate) struct Wfq {
    slots: BTreeMap<FlowId, usize>,
    flows: Vec<FlowQueue>,
    heads: BinaryHeap<Reverse<Head>>,
    /// SCFQ virtual time: the tag of the packet last taken into service.
    vtime: u64,
    next_seq: u64,
}

impl Wfq {
    /// Adds an arrival (the caller has checked the buffer limit).
    pub(crate) fn push(&mut self, pkt: Packet) {
        let slot = match self.slots.get(&pkt.flow) {
            Some(&slot) => slot,
            None => {
                self.flows.push(FlowQueue {
                    flow: pkt.flow,
                    last_finish: 0,
                    bytes: 0,
                    pkts: VecDeque::new(),
                });
                self.slots.insert(pkt.flow, self.flows.len() - 1);
                self.flows.len() - 1
            }
        };
        let fq = &mut self.flows[slot];
        let tag = fq.last_finish.max(self.vtime) + u64::from(pkt.size);
        let seq = self.next_seq;
        self.next_seq += 1;
        fq.last_finish = tag;
        fq.bytes += pkt.size as usize;
        if fq.pkts.is_empty() {
            self.heads.push(Reverse(Head {
                tag,
                flow: fq.flow,
                seq,
                slot,
            }));
        }
        fq.pkts.push_back(Tagged { tag, seq, pkt });
    }

    /// Takes the next packet into service (advancing the virtual time to its tag).
    pub(crate) fn pop(&mut self) -> Option<Packet> {
        while let Some(Reverse(head)) = self.heads.pop() {
            let fq = &mut self.flows[head.slot];
            if fq.pkts.front().is_none_or(|t| t.seq != head.seq) {
                continue; // stale: that packet was pushed out
            }
            let Some(t) = fq.pkts.pop_front() else {
                continue;
            };
            fq.bytes -= t.pkt.size as usize;
            if let Some(next) = fq.pkts.front() {
                self.heads.push(Reverse(Head {
                    tag: next.tag,
                    flow: fq.flow,
                    seq: next.seq,
                    slot: head.slot,
                }));
            }
            self.vtime = t.tag;
            return Some(t.pkt);
        }
        None
    }

    /// Makes room for an arrival of `flow` with `size` bytes: if another flow holds strictly
    /// more buffer than `flow` would with the arrival (in bytes when `by_bytes`, else in
    /// packets), removes and returns that flow's last packet (ties between other flows: the
    /// lower flow id). Returns `None` when `flow` is (one of) the longest: drop the arrival.
    pub(crate) fn push_out_longest(
        &mut self,
        flow: FlowId,
        size: u32,
        by_bytes: bool,
    ) -> Option<Packet> {
        let occupancy = |fq: &FlowQueue| {
            if by_bytes { fq.bytes } else { fq.pkts.len() }
        };
        let own = match self.slots.get(&flow) {
            Some(&slot) => occupancy(&self.flows[slot]),
            None => 0,
        } + if by_bytes { size as usize } else { 1 };
        let mut victim: Option<(usize, FlowId, usize)> = None; // (occupancy, flow, slot)
        for (slot, fq) in self.flows.iter().enumerate() {
            let occ = occupancy(fq);
            if fq.flow == flow || occ <= own {
                continue;
            }
            let better = match victim {
                None => true,
                Some((vo, vf, _)) => occ > vo || (occ == vo && fq.flow < vf),
            };
            if better {
                victim = Some((occ, fq.flow, slot));
            }
        }
        let (_, _, slot) = victim?;
        let fq = &mut self.flows[slot];
        let t = fq.pkts.pop_back()?;
        fq.bytes -= t.pkt.size as usize;
        // Undo the tag: `t.tag - L = max(F_last before, v then)`, and the next arrival takes
        // `max(that, v now) = max(F_last before, v now)`: as if `t` had never arrived.
        fq.last_finish = t.tag - u64::from(t.pkt.size);
        Some(t.pkt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Body;

    fn pkt(flow: FlowId, size: u32) -> Packet {
        Packet {
            flow,
            size,
            body: Body::Udp,
        }
    }

    fn order(w: &mut Wfq) -> Vec<(FlowId, u32)> {
        std::iter::from_fn(|| w.pop())
            .map(|p| (p.flow, p.size))
            .collect()
    }

    #[test]
    fn equal_sizes_alternate_lower_flow_first() {
        let mut w = Wfq::default();
        for _ in 0..3 {
            w.push(pkt(7, 100));
        }
        for _ in 0..3 {
            w.push(pkt(2, 100));
        }
        let flows: Vec<FlowId> = order(&mut w).into_iter().map(|(f, _)| f).collect();
        assert_eq!(flows, [2, 7, 2, 7, 2, 7]);
    }

    #[test]
    fn bytes_not_packets_are_shared() {
        // Flow 1 sends 1000 B packets, flow 2 sends 250 B: four of flow 2 per one of flow 1.
        let mut w = Wfq::default();
        for _ in 0..4 {
            w.push(pkt(1, 1000));
        }
        for _ in 0..16 {
            w.push(pkt(2, 250));
        }
        let served = order(&mut w);
        let first_half: u32 = served
            .iter()
            .take(10)
            .filter(|(f, _)| *f == 2)
            .map(|(_, s)| s)
            .sum();
        // Tags: flow 2 at 250, 500, ...; flow 1 at 1000, 2000, ... -> first 10 served are
        // 8 of flow 2 (2000 B) and 2 of flow 1.
        assert_eq!(first_half, 2000);
        assert_eq!(served.len(), 20);
    }

    #[test]
    fn late_flow_starts_at_virtual_time_not_zero() {
        let mut w = Wfq::default();
        for _ in 0..10 {
            w.push(pkt(1, 100));
        }
        for _ in 0..5 {
            assert_eq!(w.pop().map(|p| p.flow), Some(1));
        }
        // v = 500 now; flow 2 arrives with tag 600, flow 1's next head has tag 600 too:
        // tie -> lower flow id (1), then 2: no burst credit for the newcomer.
        w.push(pkt(2, 100));
        w.push(pkt(2, 100));
        let flows: Vec<FlowId> = order(&mut w).into_iter().map(|(f, _)| f).collect();
        assert_eq!(flows, [1, 2, 1, 2, 1, 1, 1]);
    }

    #[test]
    fn push_out_takes_from_the_longest_other_flow() {
        let mut w = Wfq::default();
        for _ in 0..3 {
            w.push(pkt(1, 100));
        }
        for _ in 0..3 {
            w.push(pkt(2, 100));
        }
        w.push(pkt(3, 100));
        // Flow 3 with the arrival holds 2 < 3: push out the lower of the tied flows (1).
        assert_eq!(w.push_out_longest(3, 100, false).map(|p| p.flow), Some(1));
        // Flow 2 (3 packets) with the arrival holds 4: it is the longest -> drop the arrival.
        assert_eq!(w.push_out_longest(2, 100, false), None);
        // By bytes: flow 3 arriving with 1000 B holds 1100 > 300 -> drop the arrival.
        assert_eq!(w.push_out_longest(3, 1000, true), None);
    }

    #[test]
    fn pushed_out_only_packet_leaves_no_trace() {
        let mut w = Wfq::default();
        w.push(pkt(5, 100));
        w.push(pkt(1, 100));
        w.push(pkt(1, 100));
        w.push(pkt(1, 100));
        // Flow 0 arrives; flow 1 (3) is longest -> its last packet goes.
        assert!(w.push_out_longest(0, 100, false).is_some());
        assert!(w.push_out_longest(0, 100, false).is_some());
        // Now flows 1 and 5 hold one each; flow 0 (with arrival) holds 1 -> drop arrival.
        assert_eq!(w.push_out_longest(0, 100, false), None);
        // Push out flow 5's only packet (its heap entry goes stale) via a bigger comparison.
        assert_eq!(w.push_out_longest(0, 50, true).map(|p| p.flow), Some(1));
        assert_eq!(w.push_out_longest(0, 50, true).map(|p| p.flow), Some(5));
        assert!(w.pop().is_none());
        w.push(pkt(5, 100));
        assert_eq!(order(&mut w), [(5, 100)]);
    }
}
