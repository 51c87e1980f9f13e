//! The TCP (or MPTCP) sink: accepts one connection, reads it to the end, hashes what it
//! read and samples the goodput per [`SAMPLE_INTERVAL`] window ([`Sampler`]).

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ring::digest::{Context, SHA256};

use super::payload::{Digest, finish};
use super::tcp::{StreamProto, TcpOptions};
use super::{BIND_TIMEOUT, POLL, SAMPLE_INTERVAL, is_wait, mbit};
use crate::netns::Namespace;
use crate::worker::Worker;
use crate::{Result, TestbedError};

/// Bytes received in one [`SAMPLE_INTERVAL`] window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoodputSample {
    /// End of the window, since the connection was accepted.
    pub at: Duration,
    /// Bytes received in the window.
    pub bytes: u64,
}

impl GoodputSample {
    /// The window's goodput, Mbit/s.
    pub fn mbit(&self) -> f64 {
        mbit(self.bytes, SAMPLE_INTERVAL)
    }
}

/// Splits received bytes into fixed windows; pure, so it is tested without sockets.
#[derive(Clone, Debug)]
pub struct Sampler {
    interval: Duration,
    /// End of the current window.
    end: Duration,
    current: u64,
    samples: Vec<GoodputSample>,
}

impl Sampler {
    /// Windows of `interval`, the first ending at `interval`.
    pub fn new(interval: Duration) -> Sampler {
        Sampler {
            interval,
            end: interval,
            current: 0,
            samples: Vec::new(),
        }
    }

    /// Records `bytes` arriving at `at` (non-decreasing); closes every window that ended.
    pub fn record(&mut self, at: Duration, bytes: u64) {
        while at >= self.end {
            self.samples.push(GoodputSample {
                at: self.end,
                bytes: self.current,
            });
            self.current = 0;
            self.end += self.interval;
        }
        self.current += bytes;
    }

    /// Closes the windows up to `at` and the partial window containing it (if it has data).
    pub fn finish(mut self, at: Duration) -> Vec<GoodputSample> {
        self.record(at, 0);
        if self.current > 0 {
            self.samples.push(GoodputSample {
                at: self.end,
                bytes: self.current,
            });
        }
        self.samples
    }
}

/// What a [`TcpSink`] received.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkReport {
    /// When the connection was accepted (the samples count from here).
    pub accepted: Instant,
    /// Bytes received.
    pub bytes: u64,
    /// SHA-256 of the bytes received (`None` with [`TcpOptions::digest`] off).
    pub sha256: Option<Digest>,
    /// From the accept until the sender closed.
    pub elapsed: Duration,
    /// Goodput per [`SAMPLE_INTERVAL`] window.
    pub samples: Vec<GoodputSample>,
    /// Longest time between two reads that returned data (or from the accept to the first).
    pub longest_gap: Duration,
}

impl SinkReport {
    /// Goodput from the accept until the end, Mbit/s.
    pub fn goodput_mbit(&self) -> f64 {
        mbit(self.bytes, self.elapsed)
    }

    /// Longest run of consecutive empty sample windows, as a duration (excluding windows
    /// before the first byte).
    pub fn longest_empty_run(&self) -> Duration {
        let mut best = 0u32;
        let mut run = 0u32;
        let mut started = false;
        for s in &self.samples {
            if s.bytes == 0 {
                if started {
                    run += 1;
                    best = best.max(run);
                }
            } else {
                started = true;
                run = 0;
            }
        }
        SAMPLE_INTERVAL * best
    }
}

/// Accepts one TCP connection in a namespace and reads it to the end, hashing and sampling;
/// see the module documentation. Dropping it stops its thread.
#[derive(Debug)]
pub struct TcpSink {
    local: SocketAddr,
    report: mpsc::Receiver<Result<SinkReport>>,
    /// Polls its stop flag between non-blocking accepts and reads, so dropping the sink
    /// frees the port within [`POLL`].
    worker: Worker<Result<()>>,
}

impl TcpSink {
    /// Listens on `bind` in `ns` (default [`TcpOptions`]).
    pub fn start(ns: &Namespace, bind: SocketAddr) -> Result<TcpSink> {
        TcpSink::start_with(ns, bind, TcpOptions::default())
    }

    /// Listens on `bind` in `ns`; returns once the socket is listening.
    pub fn start_with(ns: &Namespace, bind: SocketAddr, opts: TcpOptions) -> Result<TcpSink> {
        TcpSink::start_proto(ns, bind, opts, StreamProto::Tcp)
    }

    /// Listens on `bind` in `ns` with a `proto` socket (an MPTCP listener also accepts plain
    /// TCP clients); returns once the socket is listening.
    pub fn start_proto(
        ns: &Namespace,
        bind: SocketAddr,
        opts: TcpOptions,
        proto: StreamProto,
    ) -> Result<TcpSink> {
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<SocketAddr>>(1);
        let (report_tx, report) = mpsc::sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = ns.spawn_thread(&format!("tcp-sink-{}", bind.port()), move || {
            let listener = match listen(proto, bind)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(|l| l.local_addr().map(|a| (l, a)))
            {
                Ok((l, a)) => {
                    let _ = ready_tx.send(Ok(a));
                    l
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(TestbedError::io(format!("binding {bind}"), e)));
                    return;
                }
            };
            let r = sink_inner(&listener, opts, &stop2);
            let _ = report_tx.send(r);
        })?;
        let local = match ready_rx.recv_timeout(BIND_TIMEOUT) {
            Ok(r) => r?,
            Err(_) => {
                return Err(worker_failure(
                    Worker::new(stop, thread),
                    format!("TCP sink on {bind} did not start"),
                ));
            }
        };
        Ok(TcpSink {
            local,
            report,
            worker: Worker::new(stop, thread),
        })
    }

    /// The listening address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Waits up to `timeout` for the transfer to end and returns what was received.
    pub fn wait(self, timeout: Duration) -> Result<SinkReport> {
        match self.report.recv_timeout(timeout) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(TestbedError::Timeout {
                what: format!("TCP sink on {} to finish", self.local),
                after: timeout,
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(worker_failure(
                self.worker,
                format!("TCP sink on {}", self.local),
            )),
        }
    }
}

/// A listening `proto` socket on `bind` (address reuse on, backlog 16).
fn listen(proto: StreamProto, bind: SocketAddr) -> std::io::Result<TcpListener> {
    let sock = proto.socket(&bind)?;
    sock.set_reuse_address(true)?;
    sock.bind(&bind.into())?;
    sock.listen(16)?;
    Ok(sock.into())
}

/// The error for a worker thread that ended without reporting.
fn worker_failure<T>(worker: Worker<Result<T>>, what: String) -> TestbedError {
    if !worker.is_finished() {
        return TestbedError::Thread(format!("{what}: no answer"));
    }
    match worker.join() {
        Ok(Err(e)) => e,
        Ok(Ok(_)) => TestbedError::Thread(format!("{what}: ended without a report")),
        Err(panic) => TestbedError::Thread(format!("{what}: {panic}")),
    }
}

fn stopped(what: &str) -> TestbedError {
    TestbedError::Thread(format!("{what}: stopped before the transfer ended"))
}

fn sink_inner(listener: &TcpListener, opts: TcpOptions, stop: &AtomicBool) -> Result<SinkReport> {
    let local = listener
        .local_addr()
        .map_err(|e| TestbedError::io("reading the sink's address", e))?;
    let what = format!("TCP sink on {local}");
    let deadline = Instant::now() + opts.connect_timeout;
    let mut stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if stop.load(Ordering::Acquire) {
                    return Err(stopped(&what));
                }
                if Instant::now() >= deadline {
                    return Err(TestbedError::Timeout {
                        what: format!("a connection to {local}"),
                        after: opts.connect_timeout,
                    });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(TestbedError::io(format!("accepting on {local}"), e)),
        }
    };
    let accepted = Instant::now();
    let total_deadline = accepted + opts.total_timeout;
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(POLL)))
        .map_err(|e| TestbedError::io("configuring the accepted connection", e))?;
    let mut ctx = opts.digest.then(|| Context::new(&SHA256));
    let mut sampler = Sampler::new(SAMPLE_INTERVAL);
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    let mut last_data = accepted;
    let mut longest_gap = Duration::ZERO;
    loop {
        let r = stream.read(&mut buf);
        let now = Instant::now();
        match r {
            Ok(0) => break,
            Ok(n) => {
                longest_gap = longest_gap.max(now - last_data);
                last_data = now;
                if let Some(ctx) = ctx.as_mut() {
                    ctx.update(&buf[..n]);
                }
                total += n as u64;
                sampler.record(now - accepted, n as u64);
            }
            Err(e) if is_wait(&e) => {
                sampler.record(now - accepted, 0);
            }
            Err(e) => {
                return Err(TestbedError::io(
                    format!("reading on {local} after {total} bytes"),
                    e,
                ));
            }
        }
        if stop.load(Ordering::Acquire) {
            return Err(stopped(&what));
        }
        if now - last_data > opts.stall_timeout {
            return Err(TestbedError::Timeout {
                what: format!("more data on {local} (got {total} bytes)"),
                after: opts.stall_timeout,
            });
        }
        if now > total_deadline {
            return Err(TestbedError::Timeout {
                what: format!("the transfer to {local} to end (got {total} bytes)"),
                after: opts.total_timeout,
            });
        }
    }
    let elapsed = accepted.elapsed();
    Ok(SinkReport {
        accepted,
        bytes: total,
        sha256: ctx.map(finish),
        elapsed,
        samples: sampler.finish(elapsed),
        longest_gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_windows_include_empty_ones() {
        let ms = Duration::from_millis;
        let mut s = Sampler::new(ms(100));
        s.record(ms(10), 5);
        s.record(ms(99), 5);
        s.record(ms(100), 1);
        s.record(ms(450), 2);
        let samples = s.finish(ms(470));
        let got: Vec<_> = samples
            .iter()
            .map(|x| (x.at.as_millis(), x.bytes))
            .collect();
        assert_eq!(got, [(100, 10), (200, 1), (300, 0), (400, 0), (500, 2)]);
        let report = SinkReport {
            accepted: Instant::now(),
            bytes: 13,
            sha256: Some([0; 32]),
            elapsed: ms(470),
            samples,
            longest_gap: ms(350),
        };
        assert_eq!(report.longest_empty_run(), ms(200));
        assert!(
            (GoodputSample {
                at: ms(100),
                bytes: 1_250_000
            }
            .mbit()
                - 100.0)
                .abs()
                < 1e-9
        );
    }
}
