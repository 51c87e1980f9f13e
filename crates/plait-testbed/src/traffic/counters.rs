//! An interface's byte counters, sampled from inside its namespace every interval
//! ([`CounterSampler`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::BIND_TIMEOUT;
use crate::netns::Namespace;
use crate::worker::Worker;
use crate::{Result, TestbedError};

/// Cumulative byte counters of one interface at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CounterSample {
    /// When they were read.
    pub at: Instant,
    /// Bytes received by the interface.
    pub rx_bytes: u64,
    /// Bytes sent by the interface.
    pub tx_bytes: u64,
}

/// The `(rx_bytes, tx_bytes)` of `dev` in `/proc/net/dev` text.
pub fn parse_net_dev(text: &str, dev: &str) -> Option<(u64, u64)> {
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != dev {
            return None;
        }
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes …
        Some((*f.first()?, *f.get(8)?))
    })
}

/// Reads an interface's byte counters from inside a namespace every interval until
/// stopped.
#[derive(Debug)]
pub struct CounterSampler {
    /// Checks its stop flag every sampling interval.
    worker: Worker<Result<Result<Vec<CounterSample>>>>,
}

impl CounterSampler {
    /// Starts sampling `dev` in `ns` every `interval` (at least 10 ms); the first sample is
    /// taken before this returns.
    pub fn start(ns: &Namespace, dev: &str, interval: Duration) -> Result<CounterSampler> {
        let interval = interval.max(Duration::from_millis(10));
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let dev = dev.to_owned();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<()>>(1);
        let thread = ns.spawn_thread("counters", move || {
            let read = || -> Result<CounterSample> {
                let at = Instant::now();
                let text = std::fs::read_to_string("/proc/thread-self/net/dev")
                    .map_err(|e| TestbedError::io("reading /proc/thread-self/net/dev", e))?;
                let (rx_bytes, tx_bytes) = parse_net_dev(&text, &dev).ok_or_else(|| {
                    TestbedError::Spec(format!("no interface {dev} in /proc/net/dev"))
                })?;
                Ok(CounterSample {
                    at,
                    rx_bytes,
                    tx_bytes,
                })
            };
            let mut out = Vec::new();
            match read() {
                Ok(s) => {
                    out.push(s);
                    let _ = ready_tx.send(Ok(()));
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(TestbedError::Spec(e.to_string())));
                    return Err(e);
                }
            }
            let mut next = Instant::now() + interval;
            while !stop2.load(Ordering::Acquire) {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += interval;
                out.push(read()?);
            }
            out.push(read()?);
            Ok(out)
        })?;
        match ready_rx.recv_timeout(BIND_TIMEOUT) {
            Ok(r) => r?,
            Err(_) => {
                stop.store(true, Ordering::Release);
                return Err(TestbedError::Thread("counter sampler did not start".into()));
            }
        }
        Ok(CounterSampler {
            worker: Worker::new(stop, thread),
        })
    }

    /// Stops sampling (after at most one interval) and returns the samples, oldest first.
    pub fn stop(self) -> Result<Vec<CounterSample>> {
        self.worker
            .stop()
            .map_err(|p| TestbedError::Thread(format!("counter sampler: {p}")))??
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_parses() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n \
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n \
    rs: 1234567    1000    0    0    0     0          0         0  7654321    2000    0    0    0     0       0          0\n";
        assert_eq!(parse_net_dev(text, "rs"), Some((1_234_567, 7_654_321)));
        assert_eq!(parse_net_dev(text, "r"), None);
        assert_eq!(parse_net_dev("rs: x y", "rs"), None);
    }
}
