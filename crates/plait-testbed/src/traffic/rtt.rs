//! Round-trip probes: [`RttProbe`] sends a small datagram to a [`super::UdpEcho`] every
//! interval and records each answer's round trip, for the RTT of a path while it carries a
//! transfer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::quantile_sorted;
use super::udp::connected;
use crate::netns::Namespace;
use crate::worker::Worker;
use crate::{Result, TestbedError};

/// One answered probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RttSample {
    /// When the probe was sent.
    pub sent: Instant,
    /// Its round-trip time.
    pub rtt: Duration,
}

/// What an [`RttProbe`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeReport {
    /// Probes sent.
    pub sent: u64,
    /// Answered probes, in sending order.
    pub samples: Vec<RttSample>,
}

impl ProbeReport {
    /// The `q`-quantile (0 to 1, nearest rank) of the round-trip times, if any answered.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let mut v: Vec<Duration> = self.samples.iter().map(|s| s.rtt).collect();
        v.sort_unstable();
        quantile_sorted(&v, q)
    }

    /// The answered probes sent between `from` and `to`.
    pub fn between(&self, from: Instant, to: Instant) -> ProbeReport {
        ProbeReport {
            sent: 0,
            samples: self
                .samples
                .iter()
                .filter(|s| s.sent >= from && s.sent < to)
                .copied()
                .collect(),
        }
    }
}

/// How long an unanswered probe is waited for (later echoes are ignored).
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Sends a small UDP datagram from a namespace to a [`super::UdpEcho`] every interval and records
/// each round-trip time, until stopped.
#[derive(Debug)]
pub struct RttProbe {
    /// Checks its stop flag every probe interval.
    worker: Worker<Result<Result<ProbeReport>>>,
}

impl RttProbe {
    /// Starts probing `dst` from `ns` every `interval` (at least 1 ms).
    pub fn start(ns: &Namespace, dst: SocketAddr, interval: Duration) -> Result<RttProbe> {
        let interval = interval.max(Duration::from_millis(1));
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = ns.spawn_thread("rtt-probe", move || -> Result<ProbeReport> {
            let sock = connected(dst)
                .map_err(|e| TestbedError::io(format!("UDP probe socket towards {dst}"), e))?;
            let mut sent_at: Vec<Instant> = Vec::new();
            let mut samples = Vec::new();
            let mut next = Instant::now();
            let mut buf = [0u8; 64];
            while !stop2.load(Ordering::Acquire) {
                let now = Instant::now();
                if now >= next {
                    let seq = sent_at.len() as u64;
                    let mut msg = [0u8; 32];
                    msg[..8].copy_from_slice(&seq.to_be_bytes());
                    // A send error (no route during a blackhole, …) is a lost probe.
                    let _ = sock.send(&msg);
                    sent_at.push(now);
                    next += interval;
                    if next < now {
                        next = now + interval;
                    }
                }
                let wait = next
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_micros(200));
                if sock.set_read_timeout(Some(wait)).is_err() {
                    std::thread::sleep(wait);
                    continue;
                }
                if let Ok(n) = sock.recv(&mut buf) {
                    let at = Instant::now();
                    if n >= 8 {
                        let mut seq = [0u8; 8];
                        seq.copy_from_slice(&buf[..8]);
                        let seq = u64::from_be_bytes(seq);
                        if let Some(&t) = usize::try_from(seq).ok().and_then(|i| sent_at.get(i))
                            && at - t <= PROBE_TIMEOUT
                        {
                            samples.push(RttSample {
                                sent: t,
                                rtt: at - t,
                            });
                        }
                    }
                }
            }
            samples.sort_by_key(|s| s.sent);
            samples.dedup_by_key(|s| s.sent);
            Ok(ProbeReport {
                sent: sent_at.len() as u64,
                samples,
            })
        })?;
        Ok(RttProbe {
            worker: Worker::new(stop, thread),
        })
    }

    /// Stops probing and returns what was measured.
    pub fn stop(self) -> Result<ProbeReport> {
        self.worker
            .stop()
            .map_err(|p| TestbedError::Thread(format!("RTT probe: {p}")))??
    }
}
