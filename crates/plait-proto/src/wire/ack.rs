//! The ACK frame's checked view [`AckFrame`] and its iterators (docs/protocol.md#ack-frame).
//!
//! Invariants: [`AckFrame::decode`] walks every range and timestamp once and rejects the
//! frame unless all of it is well formed: at most [`MAX_ACK_RANGES`] extra ranges and
//! [`MAX_ACK_TIMESTAMPS`] timestamps, every range offset below [`MAX_SEQ_SPAN`] (else
//! [`DecodeError::BadAckRange`]), every timestamp offset below it too. So the iterators
//! re-read bytes already known good and never fail; they still use checked arithmetic and
//! stop (never panic, never wrap) where a range would go below sequence number 0.
//! Nothing here allocates: the view borrows the datagram.

use std::iter::FusedIterator;
use std::ops::RangeInclusive;

use super::error::DecodeError;
use super::reader::Reader;
use super::varint::zigzag_decode;
use super::{MAX_ACK_RANGES, MAX_ACK_TIMESTAMPS, MAX_SEQ_SPAN};
use crate::ids::{MAX_PATHS, PathId};

/// A decoded, fully validated ACK frame borrowing the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AckFrame<'a> {
    path: PathId,
    largest: u32,
    ack_delay_us: u64,
    largest_recv_ts_us: u32,
    first_range: u64,
    /// Gap/length pairs after the first range.
    extra_ranges: usize,
    range_bytes: &'a [u8],
    timestamp_count: usize,
    timestamp_bytes: &'a [u8],
}

/// Reads a count field and checks it against its bound.
fn count(r: &mut Reader<'_>, max: usize, what: &'static str) -> Result<usize, DecodeError> {
    let n = r.varint()?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= max)
        .ok_or(DecodeError::Malformed(what))
}

impl<'a> AckFrame<'a> {
    /// Decodes the body of an ACK frame (after its type byte) and validates all of it.
    pub(crate) fn decode(r: &mut Reader<'a>) -> Result<AckFrame<'a>, DecodeError> {
        let path = r.u8()?;
        if usize::from(path) >= MAX_PATHS {
            return Err(DecodeError::BadPathId(path));
        }
        let largest = r.u32()?;
        let ack_delay_us = r.varint()?;
        let largest_recv_ts_us = r.u32()?;
        let extra_ranges = count(r, MAX_ACK_RANGES, "ACK range_count above 256")?;
        let first_range = r.varint()?;
        if first_range >= MAX_SEQ_SPAN {
            return Err(DecodeError::BadAckRange);
        }
        let ranges_start = r.as_slice();
        // Offsets below `largest`: each range's largest offset is the previous smallest
        // offset + gap + 2, its smallest is that + range_len; all must stay below 2^31.
        let mut lo = first_range;
        for _ in 0..extra_ranges {
            let gap = r.varint()?;
            let len = r.varint()?;
            lo = lo.saturating_add(gap).saturating_add(2).saturating_add(len);
            if lo >= MAX_SEQ_SPAN {
                return Err(DecodeError::BadAckRange);
            }
        }
        let range_bytes = consumed(ranges_start, r);
        let timestamp_count = count(r, MAX_ACK_TIMESTAMPS, "ACK ts_count above 256")?;
        let timestamps_start = r.as_slice();
        for _ in 0..timestamp_count {
            if r.varint()? >= MAX_SEQ_SPAN {
                return Err(DecodeError::Malformed(
                    "ACK timestamp seq_offset 2^31 or more",
                ));
            }
            r.varint()?;
        }
        let timestamp_bytes = consumed(timestamps_start, r);
        Ok(AckFrame {
            path: PathId(path),
            largest,
            ack_delay_us,
            largest_recv_ts_us,
            first_range,
            extra_ranges,
            range_bytes,
            timestamp_count,
            timestamp_bytes,
        })
    }

    /// The path whose datagrams this ACK acknowledges (not necessarily the one it came on).
    pub fn path(&self) -> PathId {
        self.path
    }

    /// Largest acknowledged path sequence number, truncated to 32 bits; expand it with
    /// [`expand_seq`](crate::ids::expand_seq) before calling [`ranges`](Self::ranges).
    pub fn largest(&self) -> u32 {
        self.largest
    }

    /// Microseconds the receiver held the ACK between `largest` arriving and sending it.
    pub fn ack_delay_us(&self) -> u64 {
        self.ack_delay_us
    }

    /// Receiver clock (µs, wrapping) when `largest` arrived.
    pub fn largest_recv_ts_us(&self) -> u32 {
        self.largest_recv_ts_us
    }

    /// Number of ranges on the wire (the first plus the gap/length pairs), 1..=257.
    pub fn range_count(&self) -> usize {
        self.extra_ranges + 1
    }

    /// Number of receive timestamps on the wire, 0..=256.
    pub fn timestamp_count(&self) -> usize {
        self.timestamp_count
    }

    /// Received ranges, highest first, inclusive, given the largest expanded to 64 bits
    /// by the caller. A range reaching below 0 is clamped at 0 and ends the iteration.
    pub fn ranges(&self, largest_full: u64) -> AckRanges<'a> {
        AckRanges {
            r: Reader::new(self.range_bytes),
            largest: largest_full,
            first: Some(self.first_range),
            prev_lo: 0,
            left: self.extra_ranges,
        }
    }

    /// Receive timestamps `(path seq, receiver clock µs)`, in wire order, given the largest
    /// expanded to 64 bits by the caller. Entries that would name a sequence number below 0
    /// are skipped.
    pub fn timestamps(&self, largest_full: u64) -> AckTimestamps<'a> {
        AckTimestamps {
            r: Reader::new(self.timestamp_bytes),
            largest: largest_full,
            largest_recv_ts_us: self.largest_recv_ts_us,
            left: self.timestamp_count,
        }
    }
}

/// The bytes of `start` that `r` (which started reading at `start`) has consumed.
fn consumed<'a>(start: &'a [u8], r: &Reader<'a>) -> &'a [u8] {
    let used = start.len().saturating_sub(r.as_slice().len());
    start.get(..used).unwrap_or_default()
}

/// Iterator over an ACK's received ranges, see [`AckFrame::ranges`].
#[derive(Clone, Debug)]
pub struct AckRanges<'a> {
    r: Reader<'a>,
    largest: u64,
    /// The first range's length, until it has been yielded.
    first: Option<u64>,
    /// Smallest offset of the previous range.
    prev_lo: u64,
    /// Gap/length pairs still to read; 0 once the iteration has ended.
    left: usize,
}

impl AckRanges<'_> {
    /// The next range as offsets below `largest`: (smallest offset, largest offset).
    fn next_offsets(&mut self) -> Option<(u64, u64)> {
        if let Some(first) = self.first.take() {
            return Some((first, 0));
        }
        self.left = self.left.checked_sub(1)?;
        let gap = self.r.varint().ok()?;
        let len = self.r.varint().ok()?;
        let hi = self.prev_lo.checked_add(gap)?.checked_add(2)?;
        Some((hi.checked_add(len)?, hi))
    }
}

impl Iterator for AckRanges<'_> {
    type Item = RangeInclusive<u64>;

    fn next(&mut self) -> Option<RangeInclusive<u64>> {
        let Some((lo, hi)) = self.next_offsets().filter(|&(_, hi)| hi <= self.largest) else {
            self.first = None;
            self.left = 0;
            return None;
        };
        self.prev_lo = lo;
        if lo >= self.largest {
            // Reaches sequence number 0: nothing can follow.
            self.left = 0;
        }
        Some(self.largest - lo.min(self.largest)..=self.largest - hi)
    }
}

impl FusedIterator for AckRanges<'_> {}

/// Iterator over an ACK's receive timestamps, see [`AckFrame::timestamps`].
#[derive(Clone, Debug)]
pub struct AckTimestamps<'a> {
    r: Reader<'a>,
    largest: u64,
    largest_recv_ts_us: u32,
    left: usize,
}

impl Iterator for AckTimestamps<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        while let Some(left) = self.left.checked_sub(1) {
            self.left = left;
            let (Ok(offset), Ok(delta)) = (self.r.varint(), self.r.varint()) else {
                self.left = 0;
                return None;
            };
            let Some(seq) = self.largest.checked_sub(offset) else {
                continue;
            };
            // Wrapping u32 arithmetic: a packet received after `largest` has delta < 0.
            let ts = self
                .largest_recv_ts_us
                .wrapping_sub(zigzag_decode(delta) as u32);
            return Some((seq, ts));
        }
        None
    }
}

impl FusedIterator for AckTimestamps<'_> {}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::wire::{Frame, Writer, frames, validate};

    #[rustfmt::skip]
    /// An ACK of path 2 (docs/protocol.md#ack-frame example), shared with `ack_repr.rs`.
    pub(in crate::wire) const VECTOR: [u8; 24] = [
        0x03, 0x02,             // ACK, path 2
        0x00, 0x00, 0x00, 0x64, // largest 100
        0x19,                   // ack_delay 25 µs
        0x00, 0x00, 0x03, 0xe8, // largest_recv_ts 1000
        0x02, 0x05,             // range_count 2, first_range 5: 95..=100
        0x01, 0x02,             // gap 1, len 2: 90..=92
        0x08, 0x00,             // gap 8, len 0: 80..=80
        0x03,                   // ts_count 3
        0x00, 0x00,             // 100 at 1000
        0x02, 0x14,             // 98 at 1000 - 10
        0x04, 0x13,             // 96 at 1000 + 10 (after largest: negative delta)
    ];

    pub(in crate::wire) fn sample_ranges() -> [RangeInclusive<u64>; 3] {
        [95..=100, 90..=92, 80..=80]
    }

    fn decode(bytes: &[u8]) -> Result<AckFrame<'_>, DecodeError> {
        match frames(bytes).next() {
            Some(Ok(Frame::Ack(ack))) => Ok(ack),
            Some(Err(e)) => Err(e),
            other => panic!("not an ACK: {other:?}"),
        }
    }

    #[test]
    fn decodes_the_test_vector() {
        let ranges = sample_ranges();
        assert_eq!(validate(&VECTOR), Ok(1));
        let ack = decode(&VECTOR).unwrap();
        assert_eq!(ack.path(), PathId(2));
        assert_eq!(ack.largest(), 100);
        assert_eq!(ack.ack_delay_us(), 25);
        assert_eq!(ack.largest_recv_ts_us(), 1000);
        assert_eq!((ack.range_count(), ack.timestamp_count()), (3, 3));
        assert_eq!(ack.ranges(100).collect::<Vec<_>>(), ranges);
        let ts: Vec<_> = ack.timestamps(100).collect();
        assert_eq!(ts, [(100, 1000), (98, 990), (96, 1010)]);
        let high = (1u64 << 32) + 100;
        let shifted: Vec<_> = ack.ranges(high).collect();
        assert_eq!(
            shifted,
            [high - 5..=high, high - 10..=high - 8, high - 20..=high - 20]
        );
    }

    #[test]
    fn ranges_below_zero_are_clamped_then_stop() {
        let ack = decode(&VECTOR).unwrap();
        assert_eq!(ack.ranges(3).collect::<Vec<_>>(), [0..=3]);
        assert_eq!(ack.ranges(6).collect::<Vec<_>>(), [1..=6]);
        assert_eq!(ack.ranges(8).collect::<Vec<_>>(), [3..=8, 0..=0]);
        assert_eq!(ack.ranges(10).collect::<Vec<_>>(), [5..=10, 0..=2]);
        assert_eq!(ack.ranges(0).collect::<Vec<_>>(), [0..=0]);
        assert_eq!(ack.timestamps(3).collect::<Vec<_>>(), [(3, 1000), (1, 990)]);
        assert_eq!(ack.timestamps(0).collect::<Vec<_>>(), [(0, 1000)]);
        let mut it = ack.ranges(6);
        assert!(it.next().is_some());
        assert_eq!((it.next(), it.next()), (None, None));
    }

    #[test]
    fn timestamps_wrap_around_the_clock() {
        let mut v = VECTOR;
        v[7..11].copy_from_slice(&5u32.to_be_bytes());
        let ack = decode(&v).unwrap();
        let ts: Vec<_> = ack.timestamps(100).map(|(_, t)| t).collect();
        assert_eq!(ts, [5, 5u32.wrapping_sub(10), 15]);
    }

    /// An ACK of path 0 with largest 0 and these raw range fields, no timestamps.
    fn raw_ack(first_range: u64, pairs: &[(u64, u64)]) -> Vec<u8> {
        let mut buf = vec![0u8; 512];
        let mut w = Writer::new(&mut buf);
        w.put_bytes(&[0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        w.put_varint("count", pairs.len() as u64).unwrap();
        w.put_varint("first", first_range).unwrap();
        for &(gap, len) in pairs {
            w.put_varint("gap", gap).unwrap();
            w.put_varint("len", len).unwrap();
        }
        w.put_varint("ts_count", 0).unwrap();
        w.written().to_vec()
    }

    #[test]
    fn ranges_spanning_2_pow_31_are_rejected() {
        let max = MAX_SEQ_SPAN - 1;
        assert_eq!(validate(&raw_ack(max, &[])), Ok(1));
        assert_eq!(
            validate(&raw_ack(max + 1, &[])),
            Err(DecodeError::BadAckRange)
        );
        // A later range's largest offset is prev smallest + gap + 2.
        assert_eq!(validate(&raw_ack(0, &[(max - 2, 0)])), Ok(1));
        assert_eq!(
            validate(&raw_ack(0, &[(max - 1, 0)])),
            Err(DecodeError::BadAckRange)
        );
        assert_eq!(
            validate(&raw_ack(0, &[(max - 2, 1)])),
            Err(DecodeError::BadAckRange)
        );
        assert_eq!(validate(&raw_ack(5, &[(1, 2), (max - 12, 0)])), Ok(1));
        assert_eq!(
            validate(&raw_ack(5, &[(1, 2), (max - 11, 0)])),
            Err(DecodeError::BadAckRange)
        );
        // Huge values must not overflow.
        let huge = crate::wire::VARINT_MAX;
        assert_eq!(
            validate(&raw_ack(0, &[(huge, huge)])),
            Err(DecodeError::BadAckRange)
        );
        assert_eq!(validate(&raw_ack(huge, &[])), Err(DecodeError::BadAckRange));
        // The widest ACK iterates to 0 without wrapping.
        let bytes = raw_ack(5, &[(1, 2), (max - 12, 0)]);
        let ack = decode(&bytes).unwrap();
        let top = max + 3;
        assert_eq!(
            ack.ranges(top).collect::<Vec<_>>(),
            [top - 5..=top, top - 10..=top - 8, 3..=3]
        );
        assert_eq!(
            ack.ranges(max).collect::<Vec<_>>(),
            [max - 5..=max, max - 10..=max - 8, 0..=0]
        );
    }

    #[test]
    fn counts_offsets_and_paths_are_checked() {
        let mut v = VECTOR;
        v[1] = 16;
        assert_eq!(validate(&v), Err(DecodeError::BadPathId(16)));
        let too_many = [0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x41, 0x01, 0];
        assert_eq!(
            validate(&too_many),
            Err(DecodeError::Malformed("ACK range_count above 256"))
        );
        let too_many_ts = [0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x41, 0x01];
        assert_eq!(
            validate(&too_many_ts),
            Err(DecodeError::Malformed("ACK ts_count above 256"))
        );
        let far_ts = [
            0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xc0, 0, 0, 0, 0x80, 0, 0, 0, 0,
        ];
        assert_eq!(
            validate(&far_ts),
            Err(DecodeError::Malformed(
                "ACK timestamp seq_offset 2^31 or more"
            ))
        );
        for cut in 1..VECTOR.len() {
            assert_eq!(
                validate(&VECTOR[..cut]),
                Err(DecodeError::Truncated),
                "cut at {cut}"
            );
        }
    }
}
