//! The log of datagrams sent on one path and not yet resolved (acknowledged or lost).
//!
//! Path sequence numbers are consecutive, so the log is a `VecDeque` whose front holds the
//! lowest unresolved sequence number and whose index is `seq - base`. Resolved entries are
//! popped from the front. The log is bounded: past [`SentLog::CAPACITY`] entries the oldest
//! is forced out (and reported, so the caller can count it lost).

use std::collections::VecDeque;

use crate::ids::PathSeq;
use crate::time::Time;

/// One datagram sent on a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentPacket {
    /// Its path sequence number.
    pub seq: PathSeq,
    /// When it was sent.
    pub sent: Time,
    /// Datagram length in bytes.
    pub len: u32,
    /// Whether it elicits an ACK (only those are tracked for loss and can count in flight).
    pub ack_eliciting: bool,
    /// Whether it still counts towards bytes in flight (never for a probe of a path that
    /// is probing or down).
    pub in_flight: bool,
    /// Acknowledged (by an ACK or a PROBE_ACK).
    pub acked: bool,
    /// Declared lost.
    pub lost: bool,
    /// The probe id if it carried a PROBE frame.
    pub probe_id: Option<u32>,
    /// Its fate samples the link's own loss (`shallow_loss_rate`): not a probe sent before
    /// the path's first answer (a path's first probes may go before the peer can answer).
    pub link_sample: bool,
    /// It carried stream or stream-control frames: its fate (acked or lost) is reported
    /// to the session's stream layer.
    pub reliable: bool,
    /// The path's window was at least half used when it was sent: its acknowledgement may
    /// grow the window (otherwise the sender, not the window, was the limit).
    pub cwnd_limited: bool,
    /// The global sequence number of the inner packet it carried (packet mode; not for
    /// repairs), so a path declared down can name what it took with it.
    pub data: Option<crate::ids::GlobalSeq>,
}

impl SentPacket {
    /// Neither acknowledged nor lost.
    pub fn is_outstanding(&self) -> bool {
        self.ack_eliciting && !self.acked && !self.lost
    }
}

/// Unresolved datagrams of one path, indexed by sequence number.
#[derive(Clone, Debug, Default)]
pub struct SentLog {
    entries: VecDeque<SentPacket>,
}

impl SentLog {
    /// Most entries kept; the oldest is forced out beyond this.
    pub const CAPACITY: usize = 1 << 15;

    /// Appends a datagram (its seq must follow the last one). Returns the entry forced out
    /// to keep the bound, if it was still outstanding.
    pub fn push(&mut self, pkt: SentPacket) -> Option<SentPacket> {
        debug_assert!(self.entries.back().is_none_or(|b| b.seq + 1 == pkt.seq));
        let forced = if self.entries.len() >= Self::CAPACITY {
            self.entries.pop_front().filter(SentPacket::is_outstanding)
        } else {
            None
        };
        self.entries.push_back(pkt);
        forced
    }

    /// Lowest sequence number in the log.
    pub fn base(&self) -> Option<PathSeq> {
        self.entries.front().map(|p| p.seq)
    }

    /// The entry for `seq`, if still in the log.
    pub fn get_mut(&mut self, seq: PathSeq) -> Option<&mut SentPacket> {
        let base = self.base()?;
        let idx = usize::try_from(seq.checked_sub(base)?).ok()?;
        self.entries.get_mut(idx)
    }

    /// The entry for `seq`, if still in the log.
    pub fn get(&self, seq: PathSeq) -> Option<&SentPacket> {
        let base = self.base()?;
        let idx = usize::try_from(seq.checked_sub(base)?).ok()?;
        self.entries.get(idx)
    }

    /// Entries from the oldest, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut SentPacket> {
        self.entries.iter_mut()
    }

    /// Entries from the oldest.
    pub fn iter(&self) -> impl Iterator<Item = &SentPacket> {
        self.entries.iter()
    }

    /// Drops resolved entries (acked, lost or not ack-eliciting) from the front.
    pub fn pop_resolved(&mut self) {
        while self.entries.front().is_some_and(|p| !p.is_outstanding()) {
            self.entries.pop_front();
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Send time and length of the most recent datagrams of a path, resolved or not: receive
/// timestamps in ACK frames can arrive after a datagram was resolved (a PROBE_ACK answers a
/// probe at once), and still make a one-way delay or packet-pair sample.
#[derive(Clone, Debug, Default)]
pub struct SendHistory {
    /// (seq, sent, len), consecutive sequence numbers, oldest first.
    ring: VecDeque<(PathSeq, Time, u32)>,
}

impl SendHistory {
    /// Datagrams remembered (ACK timestamps cover at most 32 per frame, a few frames late).
    pub const CAPACITY: usize = 512;

    /// Records a datagram sent (its seq follows the last one).
    pub fn push(&mut self, seq: PathSeq, sent: Time, len: u32) {
        if self.ring.len() >= Self::CAPACITY {
            self.ring.pop_front();
        }
        self.ring.push_back((seq, sent, len));
    }

    /// Datagrams remembered.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Send time and length of `seq`, if still remembered.
    pub fn get(&self, seq: PathSeq) -> Option<(Time, u32)> {
        let base = self.ring.front()?.0;
        let idx = usize::try_from(seq.checked_sub(base)?).ok()?;
        self.ring.get(idx).map(|(_, t, l)| (*t, *l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(seq: PathSeq) -> SentPacket {
        SentPacket {
            seq,
            sent: Time::ZERO,
            len: 100,
            ack_eliciting: true,
            in_flight: true,
            acked: false,
            lost: false,
            probe_id: None,
            link_sample: true,
            reliable: false,
            cwnd_limited: false,
            data: None,
        }
    }

    #[test]
    fn index_by_seq_and_pop() {
        let mut log = SentLog::default();
        for s in 5..10 {
            assert_eq!(log.push(pkt(s)), None);
        }
        assert_eq!(log.get(7).unwrap().seq, 7);
        assert!(log.get(4).is_none() && log.get(10).is_none());
        log.get_mut(5).unwrap().acked = true;
        log.get_mut(6).unwrap().lost = true;
        log.get_mut(8).unwrap().acked = true;
        log.pop_resolved();
        assert_eq!(log.base(), Some(7));
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn history_remembers_recent_sends() {
        let mut h = SendHistory::default();
        for s in 0..(SendHistory::CAPACITY as u64 + 10) {
            h.push(s, Time::from_millis(s), 100);
        }
        assert_eq!(h.get(9), None, "forgotten");
        assert_eq!(h.get(10), Some((Time::from_millis(10), 100)));
        assert_eq!(
            h.get(SendHistory::CAPACITY as u64 + 9),
            Some((Time::from_millis(521), 100))
        );
        assert_eq!(h.get(10_000), None);
    }

    #[test]
    fn bounded() {
        let mut log = SentLog::default();
        for s in 0..SentLog::CAPACITY as u64 {
            log.push(pkt(s));
        }
        let forced = log.push(pkt(SentLog::CAPACITY as u64));
        assert_eq!(forced.map(|p| p.seq), Some(0));
        assert_eq!(log.len(), SentLog::CAPACITY);
    }
}
