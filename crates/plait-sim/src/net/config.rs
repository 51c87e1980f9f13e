//! Link configuration (rate, delay, queue, discipline, loss) and the serialisation-time
//! arithmetic every link uses.
//!
//! Owns: [`LinkConfig`] and its parts, and [`TxRate`], a rate prepared once (at `Link::new`
//! and `set_rate`) so that the per-packet serialisation time is integer arithmetic.
//!
//! Serialisation time of `size` bytes at `rate` bit/s is `size * 8 * 1e9 / rate` ns, rounded
//! to the nearest nanosecond, halves rounded up. When the rate is a whole number of bits per
//! second (every rate a scenario writes, e.g. `10e6`) this is computed exactly in integers;
//! a fractional rate goes through `f64` (within 1 ulp before rounding). So 1500 B at
//! 10 Mbit/s is exactly 1.2 ms, and the error of any one packet is at most 0.5 ns.
//!
//! Degenerate rates never panic: zero, negative or NaN means the link is stalled (nothing
//! starts serialising until a positive rate is set); `+inf` serialises in zero time.

use plait_topology::LossModel;
use std::time::Duration;

use plait_proto::time::duration_nanos;

/// The ns-2 DropTail default queue limit (`limit_` 50 packets).
pub const NS2_QUEUE_LIMIT: usize = 50;

/// How much a link's queue may hold.
///
/// Convention (ns-2 DropTail parity): the limit counts everything held at the link,
/// including the packet being serialised. ns-2 dequeues the packet in transmission and then
/// drops an arrival when `waiting + 1 >= limit_`, i.e. it keeps at most `limit_ - 1` waiting
/// plus one in transmission; `Packets(n)` does the same. (ns-2 with `limit_ 1` drops every
/// packet; here the one packet is let through.) `Bytes(n)` likewise counts the bytes of the
/// packet in service: an arrival is admitted when held bytes + its size <= n (ns-2's
/// byte mode excludes the packet in transmission and is strict; we keep one convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets at the link (waiting + in service).
    Packets(usize),
    /// At most this many bytes at the link (waiting + in service).
    Bytes(usize),
}

/// A link's queue: its limit (see [`QueueLimit`] for the in-service convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// The buffer limit, shared by all flows.
    pub limit: QueueLimit,
}

impl QueueConfig {
    /// A limit in packets.
    pub const fn packets(n: usize) -> QueueConfig {
        QueueConfig {
            limit: QueueLimit::Packets(n),
        }
    }

    /// A limit in bytes.
    pub const fn bytes(n: usize) -> QueueConfig {
        QueueConfig {
            limit: QueueLimit::Bytes(n),
        }
    }
}

impl Default for QueueConfig {
    /// ns-2's DropTail default: 50 packets.
    fn default() -> QueueConfig {
        QueueConfig::packets(NS2_QUEUE_LIMIT)
    }
}

/// Which queued packet is serialised next, and what goes when the buffer is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Discipline {
    /// FIFO; an arrival that does not fit is dropped (ns-2 `Queue/DropTail`).
    #[default]
    DropTail,
    /// Weighted fair queuing with equal weights among flows (self-clocked fair queueing),
    /// one buffer shared by all flows (seed PET-BMP §III); an arrival that does not fit is
    /// dropped, whatever its flow. A greedy flow can thus fill the shared buffer and cause
    /// drops to a flow sending below its share; see `WfqLongestQueueDrop`.
    Wfq,
    /// As `Wfq`, but when the buffer is full room is made by dropping the last packet of the
    /// flow holding the most buffer (in the limit's unit), counting the arrival in its own
    /// flow; the arrival itself is dropped when its flow is (one of) the longest. This is
    /// Demers-Keshav-Shenker fair queueing's buffer policy: a flow below its share loses
    /// nothing even when others overload the buffer.
    WfqLongestQueueDrop,
}

/// One direction of one link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Bits per second (see the module docs for rounding and degenerate values).
    pub rate_bps: f64,
    /// Propagation delay.
    pub delay: Duration,
    /// Buffer limit.
    pub queue: QueueConfig,
    /// Service order and overflow policy.
    pub discipline: Discipline,
    /// Loss at the link's input.
    /// Random loss applied to packets arriving at the link (before the queue).
    pub loss: LossModel,
}

impl LinkConfig {
    /// A loss-free drop-tail link with ns-2's default 50-packet queue.
    pub fn new(rate_bps: f64, delay: Duration) -> LinkConfig {
        LinkConfig {
            rate_bps,
            delay,
            queue: QueueConfig::default(),
            discipline: Discipline::DropTail,
            loss: LossModel::None,
        }
    }
}

/// A rate prepared for per-packet serialisation-time computation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TxRate {
    /// Zero, negative or NaN: nothing is serialised.
    Stalled,
    /// `+inf`: serialisation takes no time.
    Instant,
    /// A whole number of bits per second: exact integer arithmetic.
    Whole(u64),
    /// A fractional rate: `f64` arithmetic, then rounding.
    Fractional(f64),
}

impl TxRate {
    pub(crate) fn new(rate_bps: f64) -> TxRate {
        if rate_bps.is_nan() || rate_bps <= 0.0 {
            TxRate::Stalled
        } else if rate_bps == f64::INFINITY {
            TxRate::Instant
        } else if rate_bps.fract() == 0.0 && rate_bps < u64::MAX as f64 {
            TxRate::Whole(rate_bps as u64)
        } else {
            TxRate::Fractional(rate_bps)
        }
    }

    /// Serialisation time of `size` bytes in ns, or `None` when stalled. Saturates at
    /// `u64::MAX` (a rate below about 1e-9 bit/s).
    pub(crate) fn tx_nanos(self, size: u32) -> Option<u64> {
        let bits = u64::from(size) * 8;
        match self {
            TxRate::Stalled => None,
            TxRate::Instant => Some(0),
            TxRate::Whole(rate) => Some(match bits.checked_mul(1_000_000_000) {
                // Round half up: (num + rate/2) / rate, with rate/2 rounded up for odd rates.
                Some(num) => match num.checked_add(rate.div_ceil(2)) {
                    Some(n) => n / rate,
                    None => round_div_u128(u128::from(num), rate),
                },
                None => round_div_u128(u128::from(bits) * 1_000_000_000, rate),
            }),
            TxRate::Fractional(rate) => {
                // `as` saturates, so absurdly slow rates give u64::MAX, not a wrap.
                Some((bits as f64 * 1e9 / rate).round() as u64)
            }
        }
    }
}

fn round_div_u128(num: u128, den: u64) -> u64 {
    let q = (num + u128::from(den.div_ceil(2))) / u128::from(den);
    u64::try_from(q).unwrap_or(u64::MAX)
}

/// A duration as whole nanoseconds (saturating), for the link's integer clock arithmetic.
pub(crate) fn nanos(d: Duration) -> u64 {
    duration_nanos(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_time_is_exact_for_whole_rates() {
        let r = TxRate::new(10e6);
        assert_eq!(r, TxRate::Whole(10_000_000));
        assert_eq!(r.tx_nanos(1500), Some(1_200_000));
        assert_eq!(r.tx_nanos(40), Some(32_000));
        assert_eq!(TxRate::new(1e9).tx_nanos(1), Some(8));
        assert_eq!(r.tx_nanos(0), Some(0));
    }

    #[test]
    fn tx_time_rounds_half_up() {
        // 8e9 / 3 = 2_666_666_666.67 -> ...667
        assert_eq!(TxRate::new(3.0).tx_nanos(1), Some(2_666_666_667));
        // 8e9 / 16e9 = 0.5 ns -> 1
        assert_eq!(TxRate::new(16e9).tx_nanos(1), Some(1));
        // 8e9 / 32e9 = 0.25 ns -> 0
        assert_eq!(TxRate::new(32e9).tx_nanos(1), Some(0));
        // fractional path: 8000 bits at 1.5 bit/s = 5333.33.. s
        assert_eq!(TxRate::new(1.5).tx_nanos(1000), Some(5_333_333_333_333));
    }

    #[test]
    fn tx_time_handles_huge_values_without_overflow() {
        // u32::MAX bytes at 1 bit/s: 3.4e19 ns does not fit u64 -> saturates.
        assert_eq!(TxRate::new(1.0).tx_nanos(u32::MAX), Some(u64::MAX));
        // Needs the u128 path but fits: 4e9 B at 100 Gbit/s = 0.32 s.
        assert_eq!(
            TxRate::new(100e9).tx_nanos(4_000_000_000),
            Some(320_000_000)
        );
    }

    #[test]
    fn degenerate_rates() {
        assert_eq!(TxRate::new(0.0).tx_nanos(1500), None);
        assert_eq!(TxRate::new(-5.0).tx_nanos(1500), None);
        assert_eq!(TxRate::new(f64::NAN).tx_nanos(1500), None);
        assert_eq!(TxRate::new(f64::INFINITY).tx_nanos(1500), Some(0));
    }

    #[test]
    fn defaults_follow_ns2() {
        let c = LinkConfig::new(1e6, Duration::from_millis(10));
        assert_eq!(c.queue.limit, QueueLimit::Packets(50));
        assert_eq!(c.discipline, Discipline::DropTail);
        assert_eq!(c.loss, LossModel::None);
    }
}
