//! How long the peer may hold an acknowledgement (docs/protocol.md#ack-policy): until
//! `ack_every` more datagrams have come, at most `max_ack_delay`. Bytes it holds are in
//! flight without being in the path, and a window shorter than one such hold sees a
//! single ACK interval. BBR's window allowance and delivery-rate span
//! (docs/protocol.md#delivery-rate) and the sparse-packet path key
//! (docs/protocol.md#unordered) all read it from here.
//!
//! Invariants: both figures are bounds, never negative; a zero, negative or non-finite rate
//! holds nothing and waits the whole delay; nothing here panics or overflows (durations
//! saturate).

use std::time::Duration;

use super::is_rate;
use crate::config::Config;

/// The peer's ACK hold (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckHold {
    /// The most bytes the peer waits for before it acknowledges: `ack_every` datagrams.
    pub bytes: u64,
    /// The longest it waits: `max_ack_delay`.
    pub max_delay: Duration,
}

impl AckHold {
    /// The hold of a peer with `config`'s ACK policy: both ends run the same engine
    /// settings, so the sender's own stand for the peer's.
    pub fn of(config: &Config) -> AckHold {
        AckHold {
            bytes: u64::from(config.ack_every).saturating_mul(config.max_datagram_size as u64),
            max_delay: config.max_ack_delay,
        }
    }

    /// Bytes a path delivering `rate` bytes/s may have waiting for an acknowledgement:
    /// `min(rate × max_delay, bytes)`.
    pub fn bytes_at(self, rate: f64) -> f64 {
        if is_rate(&rate) {
            (rate * self.max_delay.as_secs_f64()).min(self.bytes as f64)
        } else {
            0.0
        }
    }

    /// How long one ACK interval lasts on a path delivering `rate` bytes/s:
    /// `min(max_delay, bytes / rate)`; `max_delay` without a rate.
    pub fn interval_at(self, rate: f64) -> Duration {
        if is_rate(&rate) {
            crate::time::secs_f64_saturating(self.bytes as f64 / rate).min(self.max_delay)
        } else {
            self.max_delay
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: AckHold = AckHold {
        bytes: 16 * 1500,
        max_delay: Duration::from_millis(25),
    };

    #[test]
    fn the_count_bounds_a_fast_path_and_the_delay_a_slow_one() {
        // 1 MB/s: 16 datagrams (24 kB) come in 24 ms, before the 25 ms delay.
        assert_eq!(HOLD.bytes_at(1e6), 24_000.0);
        assert_eq!(HOLD.interval_at(1e6), Duration::from_millis(24));
        // 100 kB/s: the delay ends the wait first, with 2.5 kB held.
        assert_eq!(HOLD.bytes_at(1e5), 2_500.0);
        assert_eq!(HOLD.interval_at(1e5), Duration::from_millis(25));
        // 12.5 MB/s (100 Mbit/s): 1.92 ms.
        assert_eq!(HOLD.interval_at(12.5e6), Duration::from_micros(1920));
    }

    #[test]
    fn no_rate_holds_nothing_and_waits_the_whole_delay() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(HOLD.bytes_at(rate), 0.0);
            assert_eq!(HOLD.interval_at(rate), HOLD.max_delay);
        }
        assert_eq!(HOLD.interval_at(f64::MIN_POSITIVE), HOLD.max_delay);
    }

    #[test]
    fn the_configured_policy_is_the_hold() {
        let config = Config {
            ack_every: 4,
            max_datagram_size: 1000,
            max_ack_delay: Duration::from_millis(7),
            ..Config::default()
        };
        assert_eq!(
            AckHold::of(&config),
            AckHold {
                bytes: 4000,
                max_delay: Duration::from_millis(7),
            }
        );
    }
}
