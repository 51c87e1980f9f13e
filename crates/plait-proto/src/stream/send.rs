//! The sending half of a stream: bytes the application wrote, kept until the peer
//! acknowledges them, and what to send next (docs/protocol.md#streams).
//!
//! Invariants:
//! - `buf` holds exactly the bytes from `base` (everything below is acknowledged) to the
//!   write offset; it never holds more than the stream's send-buffer bound;
//! - `acked` and `lost` hold only offsets in `base..next_new` (sent bytes), and no offset
//!   is in both;
//! - new bytes never go beyond the peer's limit `max_data`; a retransmission re-sends
//!   bytes already counted, so flow control charges each byte once.

use std::collections::VecDeque;
use std::ops::Range;

use super::range_set::RangeSet;

/// What the next STREAM frame of this stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Offset of its first byte.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// It carries the FIN.
    pub fin: bool,
    /// Its bytes were never sent before (they count against flow control).
    pub new: bool,
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct SendHalf {
    buf: VecDeque<u8>,
    base: u64,
    acked: RangeSet,
    lost: RangeSet,
    next_new: u64,
    /// The peer's limit on this stream (MAX_STREAM_DATA).
    pub max_data: u64,
    /// Final size, once the application finished the stream.
    final_size: Option<u64>,
    fin_sent: bool,
    fin_acked: bool,
    fin_lost: bool,
}

impl SendHalf {
    /// An empty sending half whose peer allows `max_data` bytes.
    pub fn new(max_data: u64) -> SendHalf {
        SendHalf {
            buf: VecDeque::new(),
            base: 0,
            acked: RangeSet::default(),
            lost: RangeSet::default(),
            next_new: 0,
            max_data,
            final_size: None,
            fin_sent: false,
            fin_acked: false,
            fin_lost: false,
        }
    }

    /// Offset the next written byte takes.
    pub fn write_offset(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// End of the bytes sent so far (the final size a reset names).
    pub fn sent_end(&self) -> u64 {
        self.next_new
    }

    /// Bytes held (written and not yet acknowledged).
    pub fn buffered(&self) -> u64 {
        self.buf.len() as u64
    }

    /// Whether the application finished the stream.
    pub fn is_finished(&self) -> bool {
        self.final_size.is_some()
    }

    /// Appends what the application wrote (the caller bounds it).
    pub fn write(&mut self, data: &[u8]) {
        self.buf.extend(data);
    }

    /// The application finished the stream: its final size is the write offset.
    pub fn finish(&mut self) {
        self.final_size.get_or_insert(self.write_offset());
    }

    /// Whether everything, FIN included, was acknowledged.
    pub fn is_done(&self) -> bool {
        self.fin_acked && self.final_size == Some(self.base)
    }

    /// Whether there is something to send (lost bytes, a lost FIN, new bytes within the
    /// peer's limit, or a FIN not yet sent). `session_credit` is what the session-wide
    /// limit still allows of new bytes.
    pub fn wants_to_send(&self, session_credit: u64) -> bool {
        self.wants_to_send_without_credit() || (session_credit > 0 && self.has_new_in_limit())
    }

    /// What of [`SendHalf::wants_to_send`] needs no session credit: lost bytes, a lost
    /// FIN, or a FIN not yet sent after the last new byte.
    pub fn wants_to_send_without_credit(&self) -> bool {
        !self.lost.is_empty()
            || self.fin_lost
            || (self.final_size == Some(self.next_new) && !self.fin_sent)
    }

    /// Whether new bytes (written, never sent) wait within the peer's limit on this
    /// stream; they go only while the session-wide limit has credit.
    pub fn has_new_in_limit(&self) -> bool {
        self.next_new < self.write_offset() && self.next_new < self.max_data
    }

    /// The next chunk to send, at most `max_len` bytes, new bytes within `session_credit`:
    /// lost bytes first (lowest offset), then new bytes, then a bare FIN.
    pub fn next_chunk(&self, max_len: u64, session_credit: u64) -> Option<Chunk> {
        if let Some(r) = self.lost.first() {
            let len = (r.end - r.start).min(max_len);
            let end = r.start + len;
            let fin = self.final_size == Some(end) && !self.fin_acked;
            return (len > 0).then_some(Chunk {
                offset: r.start,
                len,
                fin,
                new: false,
            });
        }
        let limit = self
            .write_offset()
            .min(self.max_data)
            .min(self.next_new.saturating_add(session_credit));
        let len = limit.saturating_sub(self.next_new).min(max_len);
        let end = self.next_new + len;
        let fin_here = self.final_size == Some(end);
        if len > 0 || (fin_here && (!self.fin_sent || self.fin_lost)) {
            return Some(Chunk {
                offset: self.next_new,
                len,
                fin: fin_here,
                new: len > 0,
            });
        }
        if self.fin_lost
            && let Some(size) = self.final_size
        {
            return Some(Chunk {
                offset: size,
                len: 0,
                fin: true,
                new: false,
            });
        }
        None
    }

    /// Copies the chunk's bytes into `out` (which must be `chunk.len` long).
    pub fn copy_out(&self, chunk: &Chunk, out: &mut [u8]) {
        let from = usize::try_from(chunk.offset - self.base).unwrap_or(usize::MAX);
        // The ring's two halves, copied a slice at a time.
        let (a, b) = self.buf.as_slices();
        let mut written = 0;
        if from < a.len() {
            let n = (a.len() - from).min(out.len());
            out[..n].copy_from_slice(&a[from..from + n]);
            written = n;
        }
        let from_b = from.saturating_sub(a.len());
        let n = (out.len() - written).min(b.len().saturating_sub(from_b));
        out[written..written + n].copy_from_slice(&b[from_b..from_b + n]);
    }

    /// Records that `chunk` went out.
    pub fn on_sent(&mut self, chunk: &Chunk) {
        let r = chunk.offset..chunk.offset + chunk.len;
        self.lost.remove(r.clone());
        self.next_new = self.next_new.max(r.end);
        if chunk.fin {
            self.fin_sent = true;
            self.fin_lost = false;
        }
    }

    /// The peer acknowledged `range` (and the FIN with it if `fin`). Returns the bytes
    /// freed from the buffer.
    pub fn on_acked(&mut self, range: Range<u64>, fin: bool) -> u64 {
        if fin {
            self.fin_acked = true;
            self.fin_lost = false;
        }
        let range = range.start.max(self.base)..range.end;
        self.lost.remove(range.clone());
        self.acked.insert(range);
        let Some(end) = self.acked.contiguous_end(self.base) else {
            return 0;
        };
        let freed = end - self.base;
        self.buf.drain(
            ..usize::try_from(freed)
                .unwrap_or(self.buf.len())
                .min(self.buf.len()),
        );
        self.base = end;
        self.acked.remove_below(end);
        freed
    }

    /// The datagram carrying `range` (and the FIN if `fin`) was lost: send again what of
    /// it is not acknowledged.
    pub fn on_lost(&mut self, range: Range<u64>, fin: bool) {
        if fin && !self.fin_acked {
            self.fin_lost = true;
        }
        for gap in self.acked.gaps(range.start.max(self.base)..range.end) {
            self.lost.insert(gap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_new_then_retransmits_lost_then_frees_acked() {
        let mut s = SendHalf::new(1000);
        s.write(&[7u8; 300]);
        s.finish();
        let a = s.next_chunk(100, u64::MAX).unwrap();
        assert_eq!((a.offset, a.len, a.fin, a.new), (0, 100, false, true));
        s.on_sent(&a);
        let b = s.next_chunk(500, u64::MAX).unwrap();
        assert_eq!((b.offset, b.len, b.fin), (100, 200, true));
        s.on_sent(&b);
        assert_eq!(s.next_chunk(500, u64::MAX), None);
        s.on_lost(0..100, false);
        let r = s.next_chunk(60, u64::MAX).unwrap();
        assert_eq!((r.offset, r.len, r.new), (0, 60, false));
        s.on_sent(&r);
        assert_eq!(
            s.on_acked(100..300, true),
            0,
            "hole at 0..100 holds the buffer"
        );
        assert_eq!(s.on_acked(0..60, false), 60);
        let r = s.next_chunk(100, u64::MAX).unwrap();
        assert_eq!((r.offset, r.len), (60, 40));
        s.on_sent(&r);
        assert_eq!(s.on_acked(60..100, false), 240);
        assert!(s.is_done());
        assert_eq!(s.buffered(), 0);
    }

    #[test]
    fn flow_control_limits_new_bytes_only() {
        let mut s = SendHalf::new(50);
        s.write(&[1u8; 100]);
        let a = s.next_chunk(1000, u64::MAX).unwrap();
        assert_eq!(a.len, 50);
        s.on_sent(&a);
        assert!(!s.wants_to_send(u64::MAX));
        s.on_lost(0..50, false);
        assert_eq!(
            s.next_chunk(1000, 0).map(|c| c.len),
            Some(50),
            "retransmit needs no credit"
        );
        s.max_data = 80;
        s.on_sent(&s.next_chunk(1000, 0).unwrap());
        assert_eq!(
            s.next_chunk(1000, 10).map(|c| (c.offset, c.len)),
            Some((50, 10))
        );
    }

    #[test]
    fn copies_across_the_ring_s_wrap() {
        let mut s = SendHalf::new(1 << 20);
        // Fill, free the front, refill: the ring's content wraps.
        s.write(&(0..200u8).collect::<Vec<_>>());
        let all = s.next_chunk(200, u64::MAX).unwrap();
        s.on_sent(&all);
        s.on_acked(0..150, false);
        s.write(&(200..=255u8).chain(0..100).collect::<Vec<_>>());
        let expected: Vec<u8> = (150..=255u8).chain(0..100).collect();
        for (offset, len) in [(150u64, 50u64), (150, 206), (190, 100), (300, 56), (205, 1)] {
            let mut out = vec![0u8; len as usize];
            let chunk = Chunk {
                offset,
                len,
                fin: false,
                new: false,
            };
            s.copy_out(&chunk, &mut out);
            let at = (offset - 150) as usize;
            assert_eq!(out, expected[at..at + len as usize], "{offset}+{len}");
        }
    }

    #[test]
    fn lost_fin_is_sent_again_alone() {
        let mut s = SendHalf::new(100);
        s.write(b"abc");
        s.on_sent(&s.next_chunk(10, 100).unwrap());
        s.finish();
        let fin = s.next_chunk(10, 100).unwrap();
        assert_eq!((fin.offset, fin.len, fin.fin), (3, 0, true));
        s.on_sent(&fin);
        assert_eq!(s.next_chunk(10, 100), None);
        s.on_acked(0..3, false);
        s.on_lost(3..3, true);
        assert_eq!(
            s.next_chunk(10, 100).map(|c| (c.offset, c.len, c.fin)),
            Some((3, 0, true))
        );
        s.on_acked(3..3, true);
        assert!(s.is_done());
    }
}
