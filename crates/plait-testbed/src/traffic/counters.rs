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

/// Where the calling thread's namespace lists its interfaces' counters (`/proc/net` is the
/// process's namespace, not the thread's).
const NET_DEV: &str = "/proc/thread-self/net/dev";

impl CounterSample {
    /// `dev`'s counters now, in the calling thread's network namespace (parsed by
    /// procfs).
    pub fn read(dev: &str) -> Result<CounterSample> {
        use procfs_core::FromRead as _;
        let at = Instant::now();
        let all = procfs_core::net::InterfaceDeviceStatus::from_file(NET_DEV).map_err(|e| {
            TestbedError::io(format!("reading {NET_DEV}"), std::io::Error::other(e))
        })?;
        let d = all
            .0
            .get(dev)
            .ok_or_else(|| TestbedError::Spec(format!("no interface {dev} in {NET_DEV}")))?;
        Ok(CounterSample {
            at,
            rx_bytes: d.recv_bytes,
            tx_bytes: d.sent_bytes,
        })
    }
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
            let read = || CounterSample::read(&dev);
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
    fn loopback_counters_read() {
        let before = CounterSample::read("lo").expect("lo");
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.send_to(&[0u8; 1000], sock.local_addr().unwrap())
            .unwrap();
        let after = CounterSample::read("lo").expect("lo");
        assert!(
            after.rx_bytes >= before.rx_bytes + 1000,
            "{before:?} {after:?}"
        );
        assert!(
            after.tx_bytes >= before.tx_bytes + 1000,
            "{before:?} {after:?}"
        );
        let err = CounterSample::read("no-such-dev0").unwrap_err();
        assert!(err.to_string().contains("no-such-dev0"), "{err}");
    }
}
