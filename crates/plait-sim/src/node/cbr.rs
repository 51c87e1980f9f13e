//! UDP traffic sources for cross traffic: constant rate, and exponential on/off
//! (web-like bursts; ns-2's `Application/Traffic/Exponential`).

use std::time::Duration;

use plait_proto::Time;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use super::Outbox;
use crate::packet::{Body, FlowId, Packet};

/// Sends `size`-byte packets every `interval` from `start` until `stop`.
#[derive(Debug)]
pub struct CbrSource {
    flow: FlowId,
    size: u32,
    interval: Duration,
    next: Time,
    stop: Time,
}

impl CbrSource {
    /// A source of `rate_bps` in `size`-byte packets between `start` and `stop`.
    pub fn new(flow: FlowId, size: u32, rate_bps: f64, start: Time, stop: Time) -> CbrSource {
        let interval = crate::secs_at_least_1ns(f64::from(size) * 8.0 / rate_bps.max(1.0));
        CbrSource {
            flow,
            size,
            interval,
            next: start,
            stop,
        }
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        while self.next <= now && self.next < self.stop {
            out.send(Packet {
                flow: self.flow,
                size: self.size,
                body: Body::Udp,
            });
            self.next += self.interval;
        }
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        (self.next < self.stop).then_some(self.next)
    }
}

/// Exponential on/off: during "on" periods (mean `mean_on`) sends at `rate_bps`; "off"
/// periods have mean `mean_off`. Starts off.
#[derive(Debug)]
pub struct OnOffSource {
    flow: FlowId,
    size: u32,
    interval: Duration,
    mean_on: Duration,
    mean_off: Duration,
    rng: ChaCha8Rng,
    on: bool,
    state_end: Time,
    next: Time,
    stop: Time,
}

impl OnOffSource {
    /// See the type docs.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        flow: FlowId,
        size: u32,
        rate_bps: f64,
        mean_on: Duration,
        mean_off: Duration,
        start: Time,
        stop: Time,
        seed: u64,
    ) -> OnOffSource {
        let interval = crate::secs_at_least_1ns(f64::from(size) * 8.0 / rate_bps.max(1.0));
        let mut s = OnOffSource {
            flow,
            size,
            interval,
            mean_on,
            mean_off,
            rng: ChaCha8Rng::seed_from_u64(seed),
            on: false,
            state_end: start,
            next: start,
            stop,
        };
        s.state_end = start + s.draw(mean_off);
        s.next = s.state_end;
        s
    }

    fn draw(&mut self, mean: Duration) -> Duration {
        // Inverse CDF of the exponential distribution, u in (0, 1].
        let u = ((self.rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        Duration::from_secs_f64(-u.ln() * mean.as_secs_f64())
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        while self.next <= now && self.next < self.stop {
            if self.next >= self.state_end {
                self.on = !self.on;
                let mean = if self.on { self.mean_on } else { self.mean_off };
                let sojourn = self.draw(mean);
                self.state_end += sojourn;
                if !self.on {
                    self.next = self.state_end;
                }
                continue;
            }
            if self.on {
                out.send(Packet {
                    flow: self.flow,
                    size: self.size,
                    body: Body::Udp,
                });
                self.next += self.interval;
            } else {
                self.next = self.state_end;
            }
        }
    }

    pub(crate) fn next_event(&self) -> Option<Time> {
        (self.next < self.stop).then_some(self.next)
    }
}
