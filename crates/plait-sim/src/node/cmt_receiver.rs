//! The `cmt-sctp` baseline's receiver (see [`super::CmtSender`] for the model): one
//! association-wide TSN space, a buffer of `rwnd` packets for chunks that arrive out of
//! order, and one SACK per data packet (no delayed SACKs, so no CMT DAC), sent back on the
//! path the data came on (CMT lets the receiver pick; the arriving path is the simplest
//! choice that never uses a path the sender is not using).
//!
//! The application reads in-order data at once, so only chunks above a hole occupy the
//! buffer; a chunk that would not fit (`tsn >= next_expected + rwnd`) is dropped, as a full
//! SCTP receive buffer drops, and the SACK still goes out. Duplicates are counted and
//! SACKed (RFC 4960 §6.2: a duplicate is reported at once).
//!
//! A SACK carries the cumulative point and gap blocks (RFC 4960 §3.3.4), lowest first, as
//! many as fit in a data packet's size (4 bytes each); on the wire it is 40 bytes like a TCP
//! ACK plus its gap blocks (a real SACK is 48 plus 4 per block).
//!
//! Invariants: every TSN in `held` is in `next_expected + 1 .. next_expected + rwnd`;
//! delivered chunks are exactly `0..next_expected`.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use plait_proto::Time;

use super::Outbox;
use crate::packet::{Body, CmtData, CmtSack, FlowId, Packet, TCP_HEADER};

/// Counters of the receiver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmtReceiverStats {
    /// Data packets that arrived (duplicates and drops included).
    pub received: u64,
    /// Chunks handed to the application in order.
    pub delivered: u64,
    /// Arrivals of a chunk already received (spurious or repeated retransmissions).
    pub duplicates: u64,
    /// Chunks dropped for lack of buffer.
    pub dropped_full: u64,
}

/// The sans-IO receiver state machine.
#[derive(Clone, Debug)]
pub struct CmtReceiverCore {
    rwnd: u64,
    max_gaps: usize,
    next_expected: u64,
    held: BTreeSet<u64>,
    stats: CmtReceiverStats,
}

impl CmtReceiverCore {
    /// A receiver buffering `rwnd` packets; SACKs carry at most `max_gaps` gap blocks.
    pub fn new(rwnd: u32, max_gaps: usize) -> CmtReceiverCore {
        CmtReceiverCore {
            rwnd: u64::from(rwnd.max(1)),
            max_gaps,
            next_expected: 0,
            held: BTreeSet::new(),
            stats: CmtReceiverStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &CmtReceiverStats {
        &self.stats
    }

    /// Chunk `tsn` arrives: returns how many chunks it delivered in order and the SACK.
    pub fn on_data(&mut self, tsn: u64) -> (u64, CmtSack) {
        self.stats.received += 1;
        let before = self.next_expected;
        if tsn < self.next_expected || self.held.contains(&tsn) {
            self.stats.duplicates += 1;
        } else if tsn >= self.next_expected + self.rwnd {
            self.stats.dropped_full += 1;
        } else if tsn == self.next_expected {
            self.next_expected += 1;
            while self.held.remove(&self.next_expected) {
                self.next_expected += 1;
            }
        } else {
            self.held.insert(tsn);
        }
        let delivered = self.next_expected - before;
        self.stats.delivered += delivered;
        (delivered, self.sack())
    }

    /// The current SACK: cumulative point and the held TSNs as ranges.
    pub fn sack(&self) -> CmtSack {
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        for &t in &self.held {
            if let Some((_, end)) = gaps.last_mut()
                && *end + 1 == t
            {
                *end = t;
            } else if gaps.len() == self.max_gaps {
                break;
            } else {
                gaps.push((t, t));
            }
        }
        CmtSack {
            next_expected: self.next_expected,
            gaps,
        }
    }
}

/// The receiver as a node: SACKs path `i`'s data on `sack_flows[i]`; counts delivered
/// payload per time bin.
#[derive(Debug)]
pub struct CmtReceiver {
    core: CmtReceiverCore,
    sack_flows: Vec<FlowId>,
    payload: u32,
    inbox: VecDeque<CmtData>,
    bin: Duration,
    /// Payload bytes delivered in order per bin (goodput over time).
    pub bins: Vec<u64>,
    /// When the application held each unit of
    /// [`super::app_delay::DELAY_UNIT_PACKETS`] packets in order.
    pub units_done: Vec<Time>,
}

impl CmtReceiver {
    /// A receiver of `payload`-byte chunks with a buffer of `rwnd` packets.
    pub fn new(rwnd: u32, payload: u32, sack_flows: Vec<FlowId>, bin: Duration) -> CmtReceiver {
        CmtReceiver {
            // Gap blocks fit in a data packet's size.
            core: CmtReceiverCore::new(rwnd, ((payload + TCP_HEADER) / 4) as usize),
            sack_flows,
            payload,
            inbox: VecDeque::new(),
            bin,
            bins: Vec::new(),
            units_done: Vec::new(),
        }
    }

    /// The state machine (statistics).
    pub fn core(&self) -> &CmtReceiverCore {
        &self.core
    }

    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        if let Body::CmtData(d) = pkt.body {
            self.inbox.push_back(d);
        }
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        while let Some(d) = self.inbox.pop_front() {
            let (delivered, sack) = self.core.on_data(d.tsn);
            if delivered > 0 {
                let i = (now.as_nanos() / self.bin.as_nanos().max(1) as u64) as usize;
                if self.bins.len() <= i {
                    self.bins.resize(i + 1, 0);
                }
                self.bins[i] += delivered * u64::from(self.payload);
                super::app_delay::note_in_order(
                    &mut self.units_done,
                    self.core.stats().delivered,
                    super::app_delay::DELAY_UNIT_PACKETS,
                    now,
                );
            }
            let Some(&flow) = self.sack_flows.get(usize::from(d.path)) else {
                continue;
            };
            out.send(Packet {
                flow,
                size: TCP_HEADER + 4 * sack.gaps.len() as u32,
                body: Body::CmtSack(sack),
            });
        }
    }
}
