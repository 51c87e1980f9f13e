//! The receiving half of a stream: segments that arrived in any order, over any path,
//! handed to the application in order (docs/protocol.md#streams).
//!
//! Invariants:
//! - `segments` hold only bytes at or above `read` and below the advertised limit
//!   `max_data`, none twice (an arriving frame is cut to what `received` lacks), so memory
//!   is bounded by the stream's window;
//! - the final size, once known, never changes and no byte lies beyond it;
//! - one stream's hole never holds another stream: each half reassembles alone.

use std::collections::BTreeMap;

use super::range_set::RangeSet;

/// Why a STREAM frame breaks the rules (the session closes; docs/protocol.md#stream-errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvViolation {
    /// Data beyond the limit this end advertised.
    FlowControl,
    /// Data beyond the final size, or a final size that changed or lies below data seen.
    FinalSize,
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct RecvHalf {
    segments: BTreeMap<u64, Vec<u8>>,
    received: RangeSet,
    /// Offset of the next byte the application reads (the open request's bytes included).
    read: u64,
    /// Largest offset + 1 received.
    highest: u64,
    /// The limit this end advertised (MAX_STREAM_DATA).
    max_data: u64,
    final_size: Option<u64>,
    /// The application was told the end (a read returned `fin`).
    fin_read: bool,
}

impl RecvHalf {
    /// An empty receiving half that allows the peer `max_data` bytes.
    pub fn new(max_data: u64) -> RecvHalf {
        RecvHalf {
            segments: BTreeMap::new(),
            received: RangeSet::default(),
            read: 0,
            highest: 0,
            max_data,
            final_size: None,
            fin_read: false,
        }
    }

    /// Takes a frame's data at `offset`. Returns how many bytes it raised the highest
    /// offset by (what the session-wide limit counts), or the violation.
    pub fn on_data(&mut self, offset: u64, data: &[u8], fin: bool) -> Result<u64, RecvViolation> {
        let end = offset + data.len() as u64;
        if end > self.max_data {
            return Err(RecvViolation::FlowControl);
        }
        match self.final_size {
            Some(size) if end > size || (fin && end != size) => {
                return Err(RecvViolation::FinalSize);
            }
            None if fin && end < self.highest => return Err(RecvViolation::FinalSize),
            _ => {}
        }
        if fin {
            self.final_size = Some(end);
        }
        let raised = end.saturating_sub(self.highest);
        self.highest = self.highest.max(end);
        for gap in self.received.gaps(offset.max(self.read)..end) {
            let from = usize::try_from(gap.start - offset).unwrap_or(0);
            let to = usize::try_from(gap.end - offset).unwrap_or(0);
            self.segments.insert(gap.start, data[from..to].to_vec());
            self.received.insert(gap);
        }
        Ok(raised)
    }

    /// Bytes readable now, in order, from the read offset.
    pub fn readable(&self) -> u64 {
        self.received
            .contiguous_end(self.read)
            .map_or(0, |end| end - self.read)
    }

    /// Whether all bytes up to the final size arrived.
    pub fn is_complete(&self) -> bool {
        self.final_size.is_some_and(|size| {
            size == self.read || self.received.contiguous_end(self.read) == Some(size)
        })
    }

    /// Whether the application read everything and was told the end: only then may the
    /// stream be forgotten.
    pub fn is_done(&self) -> bool {
        self.fin_read
    }

    /// Whether every byte up to the final size has been read (the next read says `fin`).
    pub fn at_end(&self) -> bool {
        self.final_size == Some(self.read)
    }

    /// The application was told the end.
    pub fn mark_fin_read(&mut self) {
        self.fin_read = true;
    }

    /// The read offset.
    pub fn read_offset(&self) -> u64 {
        self.read
    }

    /// The advertised limit.
    pub fn max_data(&self) -> u64 {
        self.max_data
    }

    /// Raises the advertised limit (never lowers it).
    pub fn raise_max_data(&mut self, to: u64) {
        self.max_data = self.max_data.max(to);
    }

    /// Copies up to `out.len()` in-order bytes without consuming them; returns how many.
    pub fn peek(&self, out: &mut [u8]) -> usize {
        let want = (self.readable() as usize).min(out.len());
        let mut copied = 0;
        for (start, seg) in self.segments.range(..self.read + want as u64) {
            let skip = usize::try_from(self.read.saturating_sub(*start)).unwrap_or(usize::MAX);
            let Some(bytes) = seg.get(skip..) else {
                continue;
            };
            let n = bytes.len().min(want - copied);
            out[copied..copied + n].copy_from_slice(&bytes[..n]);
            copied += n;
            if copied == want {
                break;
            }
        }
        copied
    }

    /// Consumes `n` in-order bytes (at most [`RecvHalf::readable`]) and frees them.
    pub fn consume(&mut self, n: u64) {
        let n = n.min(self.readable());
        let new_read = self.read + n;
        while let Some(entry) = self.segments.first_entry() {
            let start = *entry.key();
            let end = start + entry.get().len() as u64;
            if end <= new_read {
                entry.remove();
            } else if start < new_read {
                let mut seg = entry.remove();
                seg.drain(..usize::try_from(new_read - start).unwrap_or(seg.len()));
                self.segments.insert(new_read, seg);
                break;
            } else {
                break;
            }
        }
        self.read = new_read;
        self.received.remove_below(new_read);
    }

    /// Separate pieces held (what a peer sending tiny frames with gaps multiplies).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Bytes held (arrived, not yet read).
    pub fn buffered(&self) -> u64 {
        self.segments.values().map(|s| s.len() as u64).sum()
    }

    /// Largest offset received (what flow control has charged).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// The final size, if known.
    pub fn final_size(&self) -> Option<u64> {
        self.final_size
    }

    /// Drops everything held and ignores the rest of the stream (it was reset): the read
    /// offset jumps to the final size if known, else to the highest offset seen. Returns
    /// the bytes that were unread (they no longer count against the session window).
    pub fn abandon(&mut self, final_size: Option<u64>) -> u64 {
        let to = final_size.unwrap_or(self.highest).max(self.highest);
        let unread = to - self.read;
        self.segments.clear();
        self.received = RangeSet::default();
        self.highest = to;
        self.read = to;
        // The advertised limit stays: a reset stream's late bytes are still bounded by it.
        self.final_size = final_size.or(self.final_size);
        unread
    }

    /// Data of an abandoned stream arrived up to `end`: nothing is kept; returns how much
    /// it raised the highest offset (charged and at once consumed at session level), or
    /// the violation (beyond the advertised limit or the final size).
    pub fn skip_to(&mut self, end: u64) -> Result<u64, RecvViolation> {
        if end > self.max_data {
            return Err(RecvViolation::FlowControl);
        }
        if self.final_size.is_some_and(|f| end > f) {
            return Err(RecvViolation::FinalSize);
        }
        let raised = end.saturating_sub(self.highest);
        self.highest += raised;
        self.read = self.highest;
        Ok(raised)
    }

    /// A RESET_STREAM names `size` as final: check it against what arrived.
    pub fn check_reset_size(&self, size: u64) -> Result<u64, RecvViolation> {
        if size < self.highest || self.final_size.is_some_and(|f| f != size) {
            return Err(RecvViolation::FinalSize);
        }
        if size > self.max_data {
            return Err(RecvViolation::FlowControl);
        }
        Ok(size - self.highest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(r: &mut RecvHalf) -> Vec<u8> {
        let mut out = vec![0u8; r.readable() as usize];
        let n = r.peek(&mut out);
        r.consume(n as u64);
        out.truncate(n);
        out
    }

    #[test]
    fn reassembles_out_of_order_and_overlapping() {
        let mut r = RecvHalf::new(100);
        assert_eq!(r.on_data(5, b"fghij", false), Ok(10));
        assert_eq!(r.readable(), 0);
        assert_eq!(r.on_data(3, b"defg", false), Ok(0));
        assert_eq!(r.on_data(0, b"abc", false), Ok(0));
        assert_eq!(r.readable(), 10);
        assert_eq!(read_all(&mut r), b"abcdefghij");
        assert_eq!(r.on_data(8, b"ijKL", true), Ok(2));
        assert_eq!(read_all(&mut r), b"KL");
        assert!(r.at_end());
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn partial_reads_keep_the_rest() {
        let mut r = RecvHalf::new(100);
        r.on_data(0, b"hello world", false).unwrap();
        let mut five = [0u8; 5];
        assert_eq!(r.peek(&mut five), 5);
        r.consume(5);
        assert_eq!(&five, b"hello");
        assert_eq!(read_all(&mut r), b" world");
    }

    #[test]
    fn violations() {
        let mut r = RecvHalf::new(10);
        assert_eq!(
            r.on_data(5, b"123456", false),
            Err(RecvViolation::FlowControl)
        );
        r.on_data(0, b"abcd", true).unwrap();
        assert_eq!(r.on_data(4, b"e", false), Err(RecvViolation::FinalSize));
        assert_eq!(r.on_data(0, b"ab", true), Err(RecvViolation::FinalSize));
        assert_eq!(r.on_data(0, b"abcd", true), Ok(0), "a repeated FIN is fine");
        let mut r = RecvHalf::new(10);
        r.on_data(0, b"abcd", false).unwrap();
        assert_eq!(r.on_data(0, b"ab", true), Err(RecvViolation::FinalSize));
        assert_eq!(r.check_reset_size(3), Err(RecvViolation::FinalSize));
        assert_eq!(r.check_reset_size(11), Err(RecvViolation::FlowControl));
        assert_eq!(r.check_reset_size(6), Ok(2));
    }
}
