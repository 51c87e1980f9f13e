//! The receiver's accounting of the constant-rate UDP flow: which numbers arrived, how
//! often, in what order, and each one's one-way delay. Pure (datagrams and clock readings
//! in, counts out), so it is tested without sockets.
//!
//! Definitions (docs/fec.md, "On the test bed", repeats them):
//! - **received**: distinct numbers below the sender's count that arrived;
//! - **lost** (residual loss): numbers the sender sent that never arrived by the time the
//!   report is asked for (after a drain);
//! - **duplicates**: arrivals of a number already seen (the tunnel's duplicate filter
//!   should make this 0);
//! - **reordered**: distinct arrivals whose number is below one that arrived before them;
//! - **delay**: receive time − send time of each distinct arrival (its first copy), from the
//!   same `CLOCK_MONOTONIC`; quantiles by nearest rank ([`crate::traffic::quantile_sorted`]).
//!
//! Each distinct arrival is also kept as a [`CbrArrival`] (number, send and receive time),
//! so a test can look at a stretch of the flow, e.g. the delivery gaps around a link's
//! removal.
//!
//! Invariants: a number counts once however often it arrives; memory is one bit per number
//! up to the highest seen plus 24 bytes per distinct arrival, and numbers at or above the limit given at creation (more than the
//! sender can send) are counted as `out_of_range` and otherwise ignored, so a forged
//! number cannot make the bitmap large; a datagram that does not decode is counted as
//! `malformed`, never a panic.

use fixedbitset::FixedBitSet;

use super::wire::CbrHeader;
use crate::traffic::quantile_sorted;

/// The flow's receiver state (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct CbrAccount {
    /// Bit `seq`: number `seq` arrived (grown to the highest number seen).
    seen: FixedBitSet,
    /// Numbers at or above this are not tracked.
    limit: u64,
    /// The highest number seen so far.
    highest: Option<u64>,
    /// Distinct numbers that arrived (any number below `limit`).
    pub distinct: u64,
    /// Arrivals of a number already seen.
    pub duplicates: u64,
    /// Distinct arrivals below a number that arrived earlier.
    pub reordered: u64,
    /// Datagrams that are not the flow's (too short, wrong magic).
    pub malformed: u64,
    /// Numbers at or above the limit.
    pub out_of_range: u64,
    /// Each distinct arrival, in arrival order.
    arrivals: Vec<CbrArrival>,
}

/// One distinct arrival of the flow (its first copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CbrArrival {
    /// Its number.
    pub seq: u64,
    /// When it was sent, `CLOCK_MONOTONIC` nanoseconds (the sender's stamp).
    pub sent_ns: u64,
    /// When it was received, the same clock.
    pub recv_ns: u64,
}

/// What the receiver counted, against what the sender sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CbrReport {
    /// Datagrams the sender sent (numbers `0..sent`).
    pub sent: u64,
    /// Of those, the distinct ones that arrived.
    pub received: u64,
    /// `sent − received`: never arrived.
    pub lost: u64,
    /// `lost / sent` (0 when nothing was sent).
    pub residual_loss: f64,
    /// Arrivals of a number already seen.
    pub duplicates: u64,
    /// Distinct arrivals below a number that arrived earlier.
    pub reordered: u64,
    /// Datagrams that were not the flow's.
    pub malformed: u64,
    /// Numbers the sender cannot have sent (at or above `sent`, or the limit).
    pub unexpected: u64,
    /// One-way delay, smallest, ms (`None`: nothing arrived).
    pub delay_min_ms: Option<f64>,
    /// Median, ms.
    pub delay_p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub delay_p99_ms: Option<f64>,
    /// Largest, ms.
    pub delay_max_ms: Option<f64>,
}

impl CbrAccount {
    /// A receiver that tracks numbers below `limit`.
    pub fn new(limit: u64) -> CbrAccount {
        CbrAccount {
            limit,
            ..CbrAccount::default()
        }
    }

    /// One datagram as it came off the socket, received at `recv_ns` (`CLOCK_MONOTONIC`).
    pub fn on_datagram(&mut self, bytes: &[u8], recv_ns: u64) {
        match CbrHeader::decode(bytes) {
            Ok(h) => self.on_header(h, recv_ns),
            Err(_) => self.malformed += 1,
        }
    }

    /// One decoded datagram received at `recv_ns`.
    pub fn on_header(&mut self, h: CbrHeader, recv_ns: u64) {
        if h.seq >= self.limit {
            self.out_of_range += 1;
            return;
        }
        let Ok(index) = usize::try_from(h.seq) else {
            self.out_of_range += 1;
            return;
        };
        self.seen.grow(index + 1);
        if self.seen.put(index) {
            self.duplicates += 1;
            return;
        }
        self.distinct += 1;
        match self.highest {
            Some(top) if h.seq < top => self.reordered += 1,
            _ => self.highest = Some(h.seq),
        }
        self.arrivals.push(CbrArrival {
            seq: h.seq,
            sent_ns: h.sent_ns,
            recv_ns,
        });
    }

    /// Every distinct arrival so far, in arrival order.
    pub fn arrivals(&self) -> &[CbrArrival] {
        &self.arrivals
    }

    /// Distinct numbers below `n` that arrived.
    pub fn arrived_below(&self, n: u64) -> u64 {
        let end = usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(self.seen.len());
        self.seen.count_ones(..end) as u64
    }

    /// The report against a sender that sent numbers `0..sent`.
    pub fn report(&self, sent: u64) -> CbrReport {
        let received = self.arrived_below(sent);
        let lost = sent - received.min(sent);
        // Same clock at both ends: a negative difference cannot happen; saturate anyway.
        let mut delays: Vec<u64> = self
            .arrivals
            .iter()
            .map(|a| a.recv_ns.saturating_sub(a.sent_ns))
            .collect();
        delays.sort_unstable();
        let ms = |q: f64| quantile_sorted(&delays, q).map(|ns| ns as f64 / 1e6);
        CbrReport {
            sent,
            received,
            lost,
            residual_loss: if sent == 0 {
                0.0
            } else {
                lost as f64 / sent as f64
            },
            duplicates: self.duplicates,
            reordered: self.reordered,
            malformed: self.malformed,
            unexpected: self.out_of_range + (self.distinct - received),
            delay_min_ms: ms(0.0),
            delay_p50_ms: ms(0.5),
            delay_p99_ms: ms(0.99),
            delay_max_ms: ms(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(seq: u64, sent_ms: u64) -> CbrHeader {
        CbrHeader {
            seq,
            sent_ns: sent_ms * 1_000_000,
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn loss_is_what_never_arrived_and_duplicates_count_once() {
        let mut a = CbrAccount::new(1000);
        // 0..10 sent; 3 and 7 lost; 5 arrives twice.
        for seq in [0, 1, 2, 4, 5, 5, 6, 8, 9] {
            a.on_header(h(seq, seq), (seq + 20) * MS);
        }
        let r = a.report(10);
        assert_eq!((r.sent, r.received, r.lost), (10, 8, 2));
        assert!((r.residual_loss - 0.2).abs() < 1e-12);
        assert_eq!((r.duplicates, r.reordered, r.unexpected), (1, 0, 0));
        assert_eq!(r.delay_min_ms, Some(20.0));
        assert_eq!(r.delay_max_ms, Some(20.0));
    }

    #[test]
    fn reordering_counts_late_numbers_and_their_delay_is_their_own() {
        let mut a = CbrAccount::new(1000);
        // 2 overtakes 1 (1 took the slower path): 1 is reordered, delivered 30 ms late.
        a.on_header(h(0, 0), 10 * MS);
        a.on_header(h(2, 2), 12 * MS);
        a.on_header(h(1, 1), 41 * MS);
        a.on_header(h(3, 3), 13 * MS);
        let r = a.report(4);
        assert_eq!((r.received, r.lost, r.reordered), (4, 0, 1));
        assert_eq!(r.delay_max_ms, Some(40.0));
        assert_eq!(r.delay_p50_ms, Some(10.0));
    }

    #[test]
    fn delay_quantiles_are_nearest_rank() {
        let mut a = CbrAccount::new(1000);
        // Delays 1..=100 ms: p50 is the 50th value, p99 the 99th.
        for seq in 0..100u64 {
            a.on_header(h(seq, 0), (seq + 1) * MS);
        }
        let r = a.report(100);
        assert_eq!(r.delay_p50_ms, Some(50.0));
        assert_eq!(r.delay_p99_ms, Some(99.0));
        assert_eq!(r.delay_min_ms, Some(1.0));
        assert_eq!(r.delay_max_ms, Some(100.0));
    }

    #[test]
    fn nothing_sent_or_nothing_received() {
        let a = CbrAccount::new(10);
        let r = a.report(0);
        assert_eq!((r.lost, r.residual_loss, r.delay_p50_ms), (0, 0.0, None));
        let r = a.report(5);
        assert_eq!((r.received, r.lost, r.residual_loss), (0, 5, 1.0));
    }

    #[test]
    fn foreign_and_impossible_numbers_are_counted_not_tracked() {
        let mut a = CbrAccount::new(100);
        a.on_datagram(b"short", 0);
        a.on_datagram(&[0xffu8; 40], 0);
        a.on_header(h(u64::MAX, 0), 0);
        a.on_header(h(100, 0), 0);
        // Below the limit but above what the sender says it sent.
        a.on_header(h(50, 0), MS);
        a.on_header(h(3, 0), MS);
        let r = a.report(10);
        assert_eq!(
            (r.malformed, r.unexpected, r.received, r.lost),
            (2, 3, 1, 9)
        );
        // The bitmap grew to number 50 only.
        assert!(a.seen.len() <= 51);
    }

    #[test]
    fn a_clock_step_backwards_saturates_to_zero_delay() {
        let mut a = CbrAccount::new(10);
        a.on_header(h(0, 100), 5 * MS);
        assert_eq!(a.report(1).delay_min_ms, Some(0.0));
    }

    #[test]
    fn arrived_below_counts_across_words() {
        let mut a = CbrAccount::new(1000);
        for seq in [0, 63, 64, 127, 128, 500] {
            a.on_header(h(seq, 0), 0);
        }
        assert_eq!(a.arrived_below(0), 0);
        assert_eq!(a.arrived_below(64), 2);
        assert_eq!(a.arrived_below(65), 3);
        assert_eq!(a.arrived_below(129), 5);
        assert_eq!(a.arrived_below(10_000), 6);
    }
}
