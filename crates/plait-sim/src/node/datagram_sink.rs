//! The receiving application of a measured constant-rate UDP flow (mode `plait-cbr`):
//! which numbered datagrams ([`Body::Datagram`]) arrived, and each one's one-way delay
//! from its source to here; bytes per time bin for the plots.
//!
//! Invariants: a number counts once however often it arrives (`duplicates` counts the
//! rest); memory is one bit per number up to the highest seen and one delay sample per
//! distinct arrival, as the gateways' `held_us` keeps one per packet.

use std::time::Duration;

use fixedbitset::FixedBitSet;
use plait_proto::Time;

use crate::packet::{Body, Packet};

/// What the sink counted (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct DatagramSink {
    /// Bit `seq` set: datagram `seq` arrived (grown to the highest number seen).
    seen: FixedBitSet,
    /// Distinct datagrams that arrived.
    pub distinct: u64,
    /// Arrivals of a datagram already seen.
    pub duplicates: u64,
    /// Packets that were not numbered datagrams.
    pub other: u64,
    /// One-way delay of each distinct arrival, microseconds (saturated).
    pub delays_us: Vec<u32>,
    /// Bytes of distinct arrivals per bin of `bin`.
    pub bins: Vec<u64>,
    bin: Duration,
}

/// Highest datagram number the sink tracks: 2^32 (512 MiB of bits would be the most).
const MAX_SEQ: u64 = 1 << 32;

impl DatagramSink {
    /// A sink binning what arrives every `bin`.
    pub fn new(bin: Duration) -> DatagramSink {
        DatagramSink {
            bin,
            ..DatagramSink::default()
        }
    }

    pub(crate) fn on_receive(&mut self, now: Time, pkt: Packet) {
        let Body::Datagram { seq, sent_ns } = pkt.body else {
            self.other += 1;
            return;
        };
        if seq >= MAX_SEQ {
            self.other += 1;
            return;
        }
        // Below MAX_SEQ (2^32), so it fits a usize on the 64-bit hosts the simulator runs on.
        let index = usize::try_from(seq).unwrap_or(usize::MAX);
        self.seen.grow(index.saturating_add(1));
        if self.seen.put(index) {
            self.duplicates += 1;
            return;
        }
        self.distinct += 1;
        let us = now.as_nanos().saturating_sub(sent_ns) / 1000;
        self.delays_us.push(u32::try_from(us).unwrap_or(u32::MAX));
        let i = usize::try_from(now.as_nanos() / crate::time_nanos(self.bin).max(1))
            .unwrap_or(usize::MAX);
        // At most a million bins (the scenario's limit); later arrivals share the last.
        let i = i.min(1_000_000);
        if self.bins.len() <= i {
            self.bins.resize(i + 1, 0);
        }
        self.bins[i] += u64::from(pkt.size);
    }

    /// Distinct datagrams numbered below `n` that arrived.
    pub fn arrived_below(&self, n: u64) -> u64 {
        let end = usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(self.seen.len());
        self.seen.count_ones(..end) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(seq: u64, sent_ns: u64) -> Packet {
        Packet {
            flow: 1,
            size: 1200,
            body: Body::Datagram { seq, sent_ns },
        }
    }

    #[test]
    fn counts_each_number_once_and_its_delay() {
        let mut s = DatagramSink::new(Duration::from_millis(50));
        for (seq, at) in [(0, 10_000), (2, 30_000), (2, 31_000), (70, 90_000)] {
            s.on_receive(Time::from_nanos(at * 1000), datagram(seq, seq * 1_000_000));
        }
        s.on_receive(
            Time::ZERO,
            Packet {
                flow: 1,
                size: 10,
                body: Body::Udp,
            },
        );
        assert_eq!((s.distinct, s.duplicates, s.other), (3, 1, 1));
        assert_eq!(s.delays_us, vec![10_000, 28_000, 20_000]);
        assert_eq!(s.bins, vec![2400, 1200]);
        assert_eq!(s.arrived_below(0), 0);
        assert_eq!(s.arrived_below(1), 1);
        assert_eq!(s.arrived_below(3), 2);
        assert_eq!(s.arrived_below(70), 2);
        assert_eq!(s.arrived_below(71), 3);
        assert_eq!(s.arrived_below(1000), 3);
    }
}
