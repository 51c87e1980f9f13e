//! [`AckRepr`]: the ACK frame to write (docs/protocol.md#ack-frame).
//!
//! Invariants: [`AckRepr::encode`] checks the whole representation before writing a byte
//! and refuses (with an [`EncodeError`], never a panic) anything the decoder would reject:
//! ranges that are empty, not highest first, overlapping, adjacent, inverted, not starting
//! at `largest`, more than `MAX_ACK_RANGES + 1`, or reaching 2^31 or more below `largest`;
//! timestamps naming a sequence number above `largest` or 2^31 or more below it, or more
//! than `MAX_ACK_TIMESTAMPS`. `encoded_len` never panics, even on an invalid repr.

use std::ops::RangeInclusive;

use super::error::EncodeError;
use super::frame_type;
use super::varint::{VARINT_MAX, varint_len, zigzag_encode};
use super::writer::Writer;
use super::{MAX_ACK_RANGES, MAX_ACK_TIMESTAMPS, MAX_SEQ_SPAN};
use crate::ids::{MAX_PATHS, PathId, PathSeq};

/// An ACK frame to write: the received ranges of one path plus receive timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AckRepr<'a> {
    /// The path whose datagrams are acknowledged.
    pub path: PathId,
    /// Largest path sequence number received on it (truncated to 32 bits on the wire).
    pub largest: PathSeq,
    /// Microseconds between `largest` arriving and this ACK being sent.
    pub ack_delay_us: u64,
    /// Receiver clock (µs, wrapping) when `largest` arrived.
    pub largest_recv_ts_us: u32,
    /// Received ranges: highest first, disjoint, non-adjacent, `ranges[0].end() == largest`.
    pub ranges: &'a [RangeInclusive<PathSeq>],
    /// `(path seq, receiver clock µs)` of some received datagrams, each at most `largest`
    /// and less than 2^31 below it.
    pub timestamps: &'a [(PathSeq, u32)],
}

/// Length of the varint encoding of a count (counts are small).
fn count_len(n: usize) -> usize {
    varint_len(u64::try_from(n).unwrap_or(u64::MAX))
}

impl AckRepr<'_> {
    /// Checks every rule the decoder enforces.
    fn check(&self) -> Result<(), EncodeError> {
        if usize::from(self.path.0) >= MAX_PATHS {
            return Err(EncodeError::BadPathId(self.path.0));
        }
        if self.ack_delay_us > VARINT_MAX {
            return Err(EncodeError::ValueTooLarge {
                field: "ACK ack_delay",
                value: self.ack_delay_us,
                max: VARINT_MAX,
            });
        }
        let extra = self.ranges.len().saturating_sub(1);
        if extra > MAX_ACK_RANGES {
            return Err(EncodeError::ValueTooLarge {
                field: "ACK range_count",
                value: extra as u64,
                max: MAX_ACK_RANGES as u64,
            });
        }
        if self.timestamps.len() > MAX_ACK_TIMESTAMPS {
            return Err(EncodeError::ValueTooLarge {
                field: "ACK ts_count",
                value: self.timestamps.len() as u64,
                max: MAX_ACK_TIMESTAMPS as u64,
            });
        }
        let (Some(first), Some(last)) = (self.ranges.first(), self.ranges.last()) else {
            return Err(EncodeError::InvalidAckRanges);
        };
        let shaped = *first.end() == self.largest
            && self.ranges.iter().all(|r| r.start() <= r.end())
            && self.ranges.windows(2).all(|w| match w {
                [higher, lower] => lower.end().saturating_add(2) <= *higher.start(),
                _ => false,
            })
            && self
                .largest
                .checked_sub(*last.start())
                .is_some_and(|span| span < MAX_SEQ_SPAN);
        if !shaped {
            return Err(EncodeError::InvalidAckRanges);
        }
        let in_window =
            |&(seq, _): &(PathSeq, u32)| seq <= self.largest && self.largest - seq < MAX_SEQ_SPAN;
        if !self.timestamps.iter().all(in_window) {
            return Err(EncodeError::InvalidAckTimestamps);
        }
        Ok(())
    }

    /// The first range's length on the wire: `largest - smallest of the first range`.
    fn first_range(&self) -> u64 {
        self.ranges
            .first()
            .map_or(0, |r| self.largest.saturating_sub(*r.start()))
    }

    /// The `(gap, range_len)` pairs after the first range (saturating on invalid input).
    fn gaps(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.windows(2).filter_map(|w| match w {
            [higher, lower] => {
                let gap = higher
                    .start()
                    .saturating_sub(*lower.end())
                    .saturating_sub(2);
                Some((gap, lower.end().saturating_sub(*lower.start())))
            }
            _ => None,
        })
    }

    /// The `(seq_offset, zigzag time_delta)` pairs (saturating on invalid input).
    fn wire_timestamps(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.timestamps.iter().map(|&(seq, ts)| {
            let delta = self.largest_recv_ts_us.wrapping_sub(ts) as i32;
            (
                self.largest.saturating_sub(seq),
                zigzag_encode(i64::from(delta)),
            )
        })
    }

    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        let fixed = 1 + 1 + 4 + varint_len(self.ack_delay_us) + 4;
        let ranges: usize = count_len(self.ranges.len().saturating_sub(1))
            + varint_len(self.first_range())
            + self
                .gaps()
                .map(|(g, l)| varint_len(g) + varint_len(l))
                .sum::<usize>();
        let timestamps: usize = count_len(self.timestamps.len())
            + self
                .wire_timestamps()
                .map(|(o, d)| varint_len(o) + varint_len(d))
                .sum::<usize>();
        fixed + ranges + timestamps
    }

    /// Appends the frame.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        self.check()?;
        w.atomic(self.encoded_len(), |w| {
            w.put_u8(frame_type::ACK)?;
            w.put_u8(self.path.0)?;
            w.put_u32(self.largest as u32)?;
            w.put_varint("ACK ack_delay", self.ack_delay_us)?;
            w.put_u32(self.largest_recv_ts_us)?;
            w.put_varint(
                "ACK range_count",
                self.ranges.len().saturating_sub(1) as u64,
            )?;
            w.put_varint("ACK first_range", self.first_range())?;
            for (gap, len) in self.gaps() {
                w.put_varint("ACK gap", gap)?;
                w.put_varint("ACK range_len", len)?;
            }
            w.put_varint("ACK ts_count", self.timestamps.len() as u64)?;
            for (offset, delta) in self.wire_timestamps() {
                w.put_varint("ACK seq_offset", offset)?;
                w.put_varint("ACK time_delta", delta)?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ack::tests::{VECTOR, sample_ranges};
    use crate::wire::{Frame, frames};

    fn repr<'a>(
        largest: u64,
        ranges: &'a [RangeInclusive<u64>],
        timestamps: &'a [(u64, u32)],
    ) -> AckRepr<'a> {
        AckRepr {
            path: PathId(0),
            largest,
            ack_delay_us: 0,
            largest_recv_ts_us: 0,
            ranges,
            timestamps,
        }
    }

    fn encode(r: &AckRepr<'_>) -> Result<Vec<u8>, EncodeError> {
        let mut buf = vec![0u8; 8192];
        let mut w = Writer::new(&mut buf);
        r.encode(&mut w)?;
        assert_eq!(w.len(), r.encoded_len());
        Ok(w.written().to_vec())
    }

    #[test]
    fn encodes_the_test_vector() {
        let ranges = sample_ranges();
        let repr = AckRepr {
            path: PathId(2),
            largest: 100,
            ack_delay_us: 25,
            largest_recv_ts_us: 1000,
            ranges: &ranges,
            timestamps: &[(100, 1000), (98, 990), (96, 1010)],
        };
        assert_eq!(encode(&repr).unwrap(), VECTOR);
    }

    #[test]
    fn badly_shaped_ranges_are_refused() {
        let bad: [(u64, &[RangeInclusive<u64>]); 7] = [
            (10, &[]),                            // empty
            (10, &[5..=9]),                       // does not end at largest
            (10, &[5..=10, 1..=4]),               // adjacent
            (10, &[5..=10, 1..=6]),               // overlapping
            (10, &[5..=10, 7..=8]),               // not highest first
            (10, &[RangeInclusive::new(11, 10)]), // inverted
            (1 << 31, &[0..=(1 << 31)]),          // spans 2^31 + 1 numbers
        ];
        for (largest, ranges) in bad {
            let r = repr(largest, ranges, &[]);
            assert_eq!(encode(&r), Err(EncodeError::InvalidAckRanges), "{ranges:?}");
            let _ = r.encoded_len();
        }
        let widest = [1..=(1 << 31)];
        assert!(encode(&repr(1 << 31, &widest, &[])).is_ok());
        assert!(encode(&repr(10, &[5..=10, 1..=3], &[])).is_ok());
    }

    #[test]
    fn timestamps_outside_the_window_are_refused() {
        let largest = 1u64 << 32;
        let narrow = [largest - 10..=largest];
        for ts in [largest + 1, largest - (1 << 31)] {
            let timestamps = [(ts, 0)];
            let r = repr(largest, &narrow, &timestamps);
            assert_eq!(encode(&r), Err(EncodeError::InvalidAckTimestamps), "{ts}");
        }
        let oldest = [(largest - (1 << 31) + 1, 0)];
        assert!(encode(&repr(largest, &narrow, &oldest)).is_ok());
        let too_wide = [0..=largest];
        assert_eq!(
            encode(&repr(largest, &too_wide, &[])),
            Err(EncodeError::InvalidAckRanges)
        );
    }

    #[test]
    fn limits_are_enforced_and_the_maximum_round_trips() {
        let ranges: Vec<_> = (0..=MAX_ACK_RANGES as u64)
            .rev()
            .map(|i| 3 * i..=3 * i + 1)
            .collect();
        let largest = *ranges[0].end();
        let ts: Vec<_> = (0..MAX_ACK_TIMESTAMPS as u64)
            .map(|i| (largest - i, i as u32))
            .collect();
        let bytes = encode(&repr(largest, &ranges, &ts)).unwrap();
        let Some(Ok(Frame::Ack(ack))) = frames(&bytes).next() else {
            panic!("not an ACK")
        };
        assert_eq!(ack.ranges(largest).collect::<Vec<_>>(), ranges);
        assert_eq!(ack.timestamps(largest).collect::<Vec<_>>(), ts);

        let more: Vec<_> = (0..=MAX_ACK_RANGES as u64 + 1)
            .rev()
            .map(|i| 3 * i..=3 * i + 1)
            .collect();
        let largest = *more[0].end();
        assert!(matches!(
            encode(&repr(largest, &more, &[])),
            Err(EncodeError::ValueTooLarge { .. })
        ));
        let ts: Vec<_> = (0..=MAX_ACK_TIMESTAMPS as u64)
            .map(|_| (largest, 0))
            .collect();
        assert!(matches!(
            encode(&repr(largest, &more[..1], &ts)),
            Err(EncodeError::ValueTooLarge { .. })
        ));
    }

    #[test]
    fn bad_path_and_delay_are_refused() {
        let ranges = [0..=0];
        let r = AckRepr {
            path: PathId(16),
            ..repr(0, &ranges, &[])
        };
        assert_eq!(encode(&r), Err(EncodeError::BadPathId(16)));
        let r = AckRepr {
            ack_delay_us: u64::MAX,
            ..repr(0, &ranges, &[])
        };
        assert!(matches!(encode(&r), Err(EncodeError::ValueTooLarge { .. })));
    }

    #[test]
    fn a_failed_encode_leaves_the_writer_unchanged() {
        let ranges = [0..=10];
        let r = repr(10, &ranges, &[(10, 0)]);
        let mut buf = [0u8; 16];
        let mut w = Writer::new(&mut buf);
        w.put_u8(0x04).unwrap();
        assert!(matches!(
            r.encode(&mut w),
            Err(EncodeError::BufferTooSmall { .. })
        ));
        assert_eq!(w.len(), 1);
    }
}
