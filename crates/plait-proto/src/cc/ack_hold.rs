//! How long the peer may hold an acknowledgement (docs/protocol.md#ack-policy): until
//! `ack_every` more datagrams have come, at most `max_ack_delay`; and where the sender asks
//! for prompt ACKs (ACK_SOON, docs/protocol.md#ack-soon), at most [`ACK_SOON_DELAY`] once
//! [`ACK_SOON_EVERY`] have come. Bytes it holds are in flight without being in the path, and
//! a window shorter than one such hold sees a single ACK interval. BBR's window allowance
//! and delivery-rate span (docs/protocol.md#delivery-rate), the queue cap
//! (docs/protocol.md#queue-cap) and the sparse-packet path key (docs/protocol.md#unordered)
//! all read it from here; the receive side's `AckTracker::ack_deadline` follows the same
//! constants.
//!
//! Invariants: all figures are bounds, never negative; a zero, negative or non-finite rate
//! holds nothing and waits the whole delay; a hold not asked to be prompt has
//! `soon_delay == max_delay` (the soon rule then never ends a wait first); nothing here
//! panics or overflows (durations saturate).

use std::time::Duration;

use super::is_rate;
use crate::config::Config;

/// Ack-eliciting datagrams after which an ACK asked to be prompt waits at most
/// [`ACK_SOON_DELAY`] (docs/protocol.md#ack-soon). On a path of a few Mbit/s, `ack_every`
/// (16) datagrams take longer than `max_ack_delay`, so every ACK waits the whole 25 ms, and
/// a sender holding its window near the BDP must add those 25 ms of bytes: standing queue
/// (T5's 5 Mbit/s spell: 15.6 KB, 25 ms). The reverse direction pays little: in the test
/// `a_capped_path_asks_for_prompt_acks_and_keeps_a_shorter_queue` (5 Mbit/s) 581 ACK
/// datagrams of about 35 bytes answered 2,232 of 1,400, 0.6 % of the bytes.
pub const ACK_SOON_EVERY: u32 = 4;
/// How long an ACK asked to be prompt waits once [`ACK_SOON_EVERY`] datagrams are
/// unacknowledged (at most `max_ack_delay`). On a fast path the count rule fires first: 16
/// datagrams of 1,400 bytes arrive within 5 ms from about 36 Mbit/s up.
pub const ACK_SOON_DELAY: Duration = Duration::from_millis(5);

/// The peer's ACK hold (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckHold {
    /// The most bytes the peer waits for before it acknowledges: `ack_every` datagrams.
    pub bytes: u64,
    /// The longest it waits: `max_ack_delay`.
    pub max_delay: Duration,
    /// Bytes after which it waits at most `soon_delay`: [`ACK_SOON_EVERY`] datagrams.
    pub soon_bytes: u64,
    /// The longest it waits once `soon_bytes` came: [`ACK_SOON_DELAY`] (at most
    /// `max_delay`) if asked to be prompt, else `max_delay`.
    pub soon_delay: Duration,
}

impl AckHold {
    /// The hold of a peer with `config`'s ACK policy: both ends run the same engine
    /// settings, so the sender's own stand for the peer's.
    pub fn of(config: &Config) -> AckHold {
        AckHold::counting(
            u64::from(config.ack_every),
            config.max_datagram_size as u64,
            config.max_ack_delay,
        )
    }

    /// The hold of a peer that acknowledges after `every` datagrams of `datagram` bytes, at
    /// most `max_delay` after the first.
    pub fn counting(every: u64, datagram: u64, max_delay: Duration) -> AckHold {
        let bytes = every.saturating_mul(datagram);
        AckHold {
            bytes,
            max_delay,
            soon_bytes: bytes,
            soon_delay: max_delay,
        }
    }

    /// [`AckHold::counting`] of a peer asked for prompt ACKs: also at most
    /// [`ACK_SOON_DELAY`] after the first once [`ACK_SOON_EVERY`] came.
    pub fn prompt(every: u64, datagram: u64, max_delay: Duration) -> AckHold {
        AckHold {
            soon_bytes: u64::from(ACK_SOON_EVERY).saturating_mul(datagram),
            soon_delay: ACK_SOON_DELAY.min(max_delay),
            ..AckHold::counting(every, datagram, max_delay)
        }
    }

    /// Bytes a path delivering `rate` bytes/s may have waiting for an acknowledgement:
    /// `min(bytes, rate × max_delay, max(soon_bytes, rate × soon_delay))`: whichever rule
    /// fires first.
    pub fn bytes_at(self, rate: f64) -> f64 {
        if is_rate(&rate) {
            let soon = (rate * self.soon_delay.as_secs_f64()).max(self.soon_bytes as f64);
            (rate * self.max_delay.as_secs_f64())
                .min(self.bytes as f64)
                .min(soon)
        } else {
            0.0
        }
    }

    /// How long one ACK interval lasts on a path delivering `rate` bytes/s:
    /// `min(max_delay, bytes / rate, max(soon_delay, soon_bytes / rate))`; `max_delay`
    /// without a rate.
    pub fn interval_at(self, rate: f64) -> Duration {
        if is_rate(&rate) {
            let secs = crate::time::secs_f64_saturating;
            let soon = secs(self.soon_bytes as f64 / rate).max(self.soon_delay);
            secs(self.bytes as f64 / rate).min(self.max_delay).min(soon)
        } else {
            self.max_delay
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 16 datagrams of 1500 B, 25 ms.
    fn hold() -> AckHold {
        AckHold::counting(16, 1500, Duration::from_millis(25))
    }

    /// The same, asked to be prompt: also 4 datagrams, 5 ms.
    fn prompt() -> AckHold {
        AckHold::prompt(16, 1500, Duration::from_millis(25))
    }

    #[test]
    fn the_count_bounds_a_fast_path_and_the_delay_a_slow_one() {
        // 1 MB/s: 16 datagrams (24 kB) come in 24 ms, before the 25 ms delay.
        assert_eq!(hold().bytes_at(1e6), 24_000.0);
        assert_eq!(hold().interval_at(1e6), Duration::from_millis(24));
        // 100 kB/s: the delay ends the wait first, with 2.5 kB held.
        assert_eq!(hold().bytes_at(1e5), 2_500.0);
        assert_eq!(hold().interval_at(1e5), Duration::from_millis(25));
        // 12.5 MB/s (100 Mbit/s): 1.92 ms.
        assert_eq!(hold().interval_at(12.5e6), Duration::from_micros(1920));
    }

    #[test]
    fn asked_to_be_prompt_the_soon_rule_bounds_a_middling_path() {
        // 12.5 MB/s: the count (16 datagrams in 1.92 ms) still comes first.
        assert_eq!(prompt().bytes_at(12.5e6), 24_000.0);
        assert_eq!(prompt().interval_at(12.5e6), Duration::from_micros(1920));
        // 1 MB/s: 4 datagrams (6 kB) come in 6 ms, after the 5 ms soon delay: the ACK goes
        // with the fourth, long before 16 datagrams (24 ms) or the 25 ms delay.
        assert_eq!(prompt().bytes_at(1e6), 6_000.0);
        assert_eq!(prompt().interval_at(1e6), Duration::from_millis(6));
        // 2 MB/s: the 4 datagrams come in 3 ms, and the ACK waits out the 5 ms (10 kB).
        assert_eq!(prompt().bytes_at(2e6), 10_000.0);
        assert_eq!(prompt().interval_at(2e6), Duration::from_millis(5));
        // 100 kB/s: 4 datagrams take 60 ms, so the 25 ms delay ends the wait with 2.5 kB.
        assert_eq!(prompt().bytes_at(1e5), 2_500.0);
        assert_eq!(prompt().interval_at(1e5), Duration::from_millis(25));
    }

    #[test]
    fn no_rate_holds_nothing_and_waits_the_whole_delay() {
        for h in [hold(), prompt()] {
            for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
                assert_eq!(h.bytes_at(rate), 0.0);
                assert_eq!(h.interval_at(rate), h.max_delay);
            }
            assert_eq!(h.interval_at(f64::MIN_POSITIVE), h.max_delay);
        }
    }

    #[test]
    fn a_zero_delay_holds_nothing_and_a_count_below_the_soon_rule_bounds_alone() {
        let none = AckHold::prompt(16, 1500, Duration::ZERO);
        assert_eq!(none.bytes_at(1e6), 0.0);
        assert_eq!(none.interval_at(1e6), Duration::ZERO);
        // Every 2 datagrams: the soon rule (4) never fires first.
        let pairs = AckHold::prompt(2, 1500, Duration::from_millis(25));
        assert_eq!(pairs.bytes_at(1e6), 3_000.0);
        assert_eq!(pairs.interval_at(1e6), Duration::from_millis(3));
    }

    #[test]
    fn the_configured_policy_is_the_hold() {
        let config = Config {
            ack_every: 4,
            max_datagram_size: 1000,
            max_ack_delay: Duration::from_millis(3),
            ..Config::default()
        };
        assert_eq!(
            AckHold::of(&config),
            AckHold {
                bytes: 4000,
                max_delay: Duration::from_millis(3),
                soon_bytes: 4000,
                soon_delay: Duration::from_millis(3),
            }
        );
        // Never beyond the configured delay.
        assert_eq!(
            AckHold::prompt(4, 1000, Duration::from_millis(3)).soon_delay,
            Duration::from_millis(3)
        );
    }
}
