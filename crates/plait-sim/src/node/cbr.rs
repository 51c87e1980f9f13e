//! UDP traffic sources: constant rate (cross traffic, or numbered datagrams of a measured
//! flow, [`CbrSource::numbered`]), and exponential on/off (web-like bursts; ns-2's
//! `Application/Traffic/Exponential`).

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
    start: Time,
    next: Time,
    stop: Time,
    /// Packets carry their number and send time ([`Body::Datagram`]).
    numbered: bool,
    /// Packets sent so far (the next one's number).
    sent: u64,
}

impl CbrSource {
    /// A source of `rate_bps` in `size`-byte packets between `start` and `stop`.
    pub fn new(flow: FlowId, size: u32, rate_bps: f64, start: Time, stop: Time) -> CbrSource {
        let interval = crate::secs_at_least_1ns(f64::from(size) * 8.0 / rate_bps.max(1.0));
        CbrSource {
            flow,
            size,
            interval,
            start,
            next: start,
            stop,
            numbered: false,
            sent: 0,
        }
    }

    /// The same source whose packets carry their number and send time, for a receiver that
    /// measures loss and delay ([`super::DatagramSink`]).
    pub fn numbered(flow: FlowId, size: u32, rate_bps: f64, start: Time, stop: Time) -> Self {
        CbrSource {
            numbered: true,
            ..CbrSource::new(flow, size, rate_bps, start, stop)
        }
    }

    /// Packets sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// How many of the packets sent were sent at or before `t`.
    pub fn sent_by(&self, t: Time) -> u64 {
        // Packet i left at start + i * interval.
        if self.sent == 0 || t < self.start {
            return 0;
        }
        let n = t.saturating_since(self.start).as_nanos() / self.interval.as_nanos().max(1) + 1;
        u64::try_from(n).unwrap_or(u64::MAX).min(self.sent)
    }

    pub(crate) fn on_wakeup(&mut self, now: Time, out: &mut Outbox) {
        while self.next <= now && self.next < self.stop {
            let body = if self.numbered {
                Body::Datagram {
                    seq: self.sent,
                    sent_ns: self.next.as_nanos(),
                }
            } else {
                Body::Udp
            };
            out.send(Packet {
                flow: self.flow,
                size: self.size,
                body,
            });
            self.sent += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_packets_count_what_was_sent_by_a_time() {
        let ms = |v: u64| Time::from_nanos(v * 1_000_000);
        // 1000-byte packets at 800 kbit/s: one every 10 ms from 5 ms.
        let mut s = CbrSource::numbered(1, 1000, 800_000.0, ms(5), ms(1000));
        let mut out = Outbox::default();
        s.on_wakeup(ms(40), &mut out);
        let mut seqs = Vec::new();
        while let Some((_, p)) = out.pop() {
            if let Body::Datagram { seq, sent_ns } = p.body {
                assert_eq!(sent_ns, ms(5 + 10 * seq).as_nanos());
                seqs.push(seq);
            }
        }
        assert_eq!(seqs, vec![0, 1, 2, 3]);
        assert_eq!(s.sent(), 4);
        assert_eq!(s.sent_by(ms(4)), 0);
        assert_eq!(s.sent_by(ms(5)), 1);
        assert_eq!(s.sent_by(ms(24)), 2);
        assert_eq!(s.sent_by(ms(900)), 4);
    }
}
