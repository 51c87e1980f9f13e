//! Seed HMTP Fig. 8(b)'s application-layer delay, per application data unit.
//!
//! The seed's measure "includes the encoding and decoding computing time, application
//! layer waiting time, and network transmission delay" and is larger for HMTP at equal
//! losses "because of ... the transmission of (k' - k) more packets" (seed HMTP §IV-B), so
//! it spans a whole chunk: the unit here is one chunk of k packets for HMTP and the same
//! k packets of the byte stream for the CMT-SCTP-like baseline (TSNs `u*k .. (u+1)*k`).
//!
//! A unit's delay runs from the instant the sender starts sending it (HMTP: the first
//! symbol of the chunk, when the encoder takes the chunk's k packets; the baseline: the
//! first transmission of the unit's first TSN) to the instant the receiving application
//! holds all of it in order (HMTP: the chunk and every earlier one decoded; the baseline:
//! the cumulative in-order point past the unit's last TSN). Both sources are infinite
//! (FTP), so the application never waits to hand data over: starting to send is taking it.
//! Encoding and decoding take no virtual time: the simulator's clock does not advance while
//! a node computes, and plait-fec's LT code takes about 1.4 ms to encode and 1.4 to 2.6 ms
//! to decode a chunk of k = 1000 (../shared/REFERENCES.md, 1280-byte symbols), under
//! 0.1 % of a unit's delay at the seed's 1 Mbit/s paths (seconds).
//!
//! Units still incomplete when the run ends are not counted.
//!
//! Invariants: `started[u]` and `completed[u]` are unit `u`'s times; both lists only grow,
//! in time order.

use plait_proto::Time;

/// Packets per unit for the baseline: seed HMTP §IV's k (its chunk), so the two protocols
/// are measured on the same data.
pub const DELAY_UNIT_PACKETS: u64 = 1000;

/// Records that sequence number `seq` (counted in packets from 0) went out for the first
/// time at `now`: a unit starts at its first packet.
pub fn note_first_send(started: &mut Vec<Time>, seq: u64, unit: u64, now: Time) {
    let unit = unit.max(1);
    if seq.is_multiple_of(unit) && seq / unit == started.len() as u64 {
        started.push(now);
    }
}

/// Records that the application holds the first `in_order` packets at `now`: every unit
/// they complete is completed now.
pub fn note_in_order(completed: &mut Vec<Time>, in_order: u64, unit: u64, now: Time) {
    let unit = unit.max(1);
    while (completed.len() as u64 + 1).saturating_mul(unit) <= in_order {
        completed.push(now);
    }
}

/// Mean and 99th percentile (nearest rank) of the completed units' delays, seconds;
/// `None` if no unit completed.
pub fn summary(started: &[Time], completed: &[Time]) -> Option<(f64, f64)> {
    let mut d: Vec<f64> = started
        .iter()
        .zip(completed)
        .map(|(s, c)| c.saturating_since(*s).as_secs_f64())
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_by(f64::total_cmp);
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let i = ((0.99 * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1;
    Some((mean, d[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Time {
        Time::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn units_start_at_their_first_packet_and_end_when_held_in_order() {
        let (mut s, mut c) = (Vec::new(), Vec::new());
        note_first_send(&mut s, 0, 10, t(0));
        note_first_send(&mut s, 5, 10, t(1));
        note_first_send(&mut s, 10, 10, t(2));
        // A retransmission of TSN 0 is not a start.
        note_first_send(&mut s, 0, 10, t(3));
        assert_eq!(s, vec![t(0), t(2)]);
        note_in_order(&mut c, 9, 10, t(50));
        assert!(c.is_empty());
        // One arrival fills a hole and completes both units at once.
        note_in_order(&mut c, 25, 10, t(100));
        assert_eq!(c, vec![t(100), t(100)]);
        let (mean, p99) = summary(&s, &c).unwrap();
        assert!((mean - 0.099).abs() < 1e-9, "{mean}");
        assert!((p99 - 0.1).abs() < 1e-9, "{p99}");
        assert_eq!(summary(&s, &[]), None);
    }
}
