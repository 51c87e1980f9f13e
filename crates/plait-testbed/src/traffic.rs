//! Test traffic inside namespaces: one TCP transfer with end-to-end digests and goodput
//! samples ([`tcp_send`] → [`TcpSink`]), and raw UDP throughput ([`udp_blast`] →
//! [`UdpSink`]).
//!
//! The TCP payload is a deterministic pseudo-random stream of the sender's seed
//! ([`payload_block`]: splitmix64 per 64 KiB block, so byte `n` depends only on the seed and
//! `n`); both ends hash what they actually sent or received with SHA-256 (`ring::digest`),
//! so equal digests mean the bytes arrived intact and in order, and [`payload_sha256`]
//! tells what a transfer of a given seed and length must hash to.
//!
//! Stream sockets are plain TCP or kernel MPTCP ([`StreamProto`]; `IPPROTO_MPTCP` = 262
//! through socket2), so the same sender and sink measure both. [`SendLimit`] ends a transfer
//! after a byte count or a duration. [`UdpEcho`] and [`RttProbe`] measure the round-trip
//! time of a path while it carries a transfer; [`CounterSampler`] reads an interface's byte
//! counters from inside a namespace (`/proc/thread-self/net/dev`) every sample interval.
//!
//! Invariants:
//! - Every socket is opened on a thread that has entered the namespace
//!   ([`Namespace::run_in`], [`Namespace::spawn_thread`]), so it lives there.
//! - Every wait is bounded: connect, accept, each stalled read or write, the whole transfer
//!   ([`TcpOptions`]), and waiting for a sink's report. A broken tunnel makes these return a
//!   [`TestbedError::Timeout`] or an I/O error instead of hanging a test.
//! - A sink's worker thread stops within about one sample interval after the sink is
//!   dropped, whatever it is waiting for.
//! - Goodput samples are the bytes received in consecutive [`SAMPLE_INTERVAL`] windows
//!   counted from the accept, including empty windows, so stalls are visible.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ring::digest::{Context, SHA256};

use crate::netns::Namespace;
use crate::worker::Worker;
use crate::{Result, TestbedError};

/// Width of a goodput sample window.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Size of one payload block, bytes (the unit of [`payload_block`]).
pub const BLOCK: usize = 64 * 1024;
/// How long [`TcpSink::start`] and [`UdpSink::start`] wait for their socket to be bound.
const BIND_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a blocked sink thread checks whether it should stop.
const POLL: Duration = Duration::from_millis(50);

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn finish(ctx: Context) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// Fills `out` (at most [`BLOCK`] bytes) with block `index` of `seed`'s payload stream.
pub fn payload_block(seed: u64, index: u64, out: &mut [u8]) {
    let mut x = seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for chunk in out.chunks_mut(8) {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

/// Calls `f` with the payload of `seed`, `bytes` long, block by block.
fn for_each_block(
    seed: u64,
    bytes: u64,
    mut f: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; BLOCK];
    let mut done = 0u64;
    let mut index = 0u64;
    while done < bytes {
        let n = usize::try_from((bytes - done).min(BLOCK as u64)).unwrap_or(BLOCK);
        payload_block(seed, index, &mut buf[..n]);
        f(&buf[..n])?;
        done += n as u64;
        index += 1;
    }
    Ok(())
}

/// SHA-256 of the first `bytes` bytes of `seed`'s payload stream.
pub fn payload_sha256(bytes: u64, seed: u64) -> Digest {
    let mut ctx = Context::new(&SHA256);
    let _ = for_each_block(seed, bytes, |b| {
        ctx.update(b);
        Ok(())
    });
    finish(ctx)
}

fn mbit(bytes: u64, over: Duration) -> f64 {
    let s = over.as_secs_f64();
    if s <= 0.0 {
        0.0
    } else {
        bytes as f64 * 8.0 / s / 1e6
    }
}

/// Time bounds of a TCP transfer, and whether its ends check the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpOptions {
    /// Connecting (sender) or waiting for the connection (sink).
    pub connect_timeout: Duration,
    /// Longest time without any progress (a blocked write, or no data read).
    pub stall_timeout: Duration,
    /// Longest whole transfer.
    pub total_timeout: Duration,
    /// Hash what is sent and received (default). Off, the sender writes one block of the
    /// payload again and again and neither end hashes: the generators then cost as little
    /// CPU as possible (a benchmark of the CPU use of what carries the bytes), and the
    /// reports carry no digest.
    pub digest: bool,
}

impl Default for TcpOptions {
    fn default() -> TcpOptions {
        TcpOptions {
            connect_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(20),
            total_timeout: Duration::from_secs(120),
            digest: true,
        }
    }
}

/// What [`tcp_send`] sent.
#[derive(Clone, Debug, PartialEq)]
pub struct SendReport {
    /// Bytes written.
    pub bytes: u64,
    /// SHA-256 of the bytes written (`None` with [`TcpOptions::digest`] off).
    pub sha256: Option<Digest>,
    /// From connecting until the receiver closed after reading everything.
    pub duration: Duration,
}

impl SendReport {
    /// Goodput over the whole transfer, Mbit/s.
    pub fn goodput_mbit(&self) -> f64 {
        mbit(self.bytes, self.duration)
    }
}

/// Connects from `ns` to `dst`, sends `bytes` of `seed`'s payload, half-closes and waits
/// until the receiver closes (so the duration covers delivery). Default [`TcpOptions`].
pub fn tcp_send(ns: &Namespace, dst: SocketAddr, bytes: u64, seed: u64) -> Result<SendReport> {
    tcp_send_with(ns, dst, bytes, seed, TcpOptions::default())
}

/// The `IPPROTO_MPTCP` protocol number (Linux).
pub const IPPROTO_MPTCP: i32 = 262;

/// The protocol of a stream socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamProto {
    /// Plain TCP.
    #[default]
    Tcp,
    /// Kernel MPTCP (`socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)`); the path manager's
    /// configuration is the namespace's (see [`crate::Topology::setup_mptcp`]).
    Mptcp,
}

impl StreamProto {
    fn protocol(self) -> socket2::Protocol {
        match self {
            StreamProto::Tcp => socket2::Protocol::TCP,
            StreamProto::Mptcp => socket2::Protocol::from(IPPROTO_MPTCP),
        }
    }

    /// A new stream socket of this protocol for `addr`'s family.
    fn socket(self, addr: &SocketAddr) -> std::io::Result<socket2::Socket> {
        socket2::Socket::new(
            socket2::Domain::for_address(*addr),
            socket2::Type::STREAM,
            Some(self.protocol()),
        )
        .map_err(|e| match (self, e.raw_os_error()) {
            (StreamProto::Mptcp, Some(code))
                if [
                    nix::libc::EPROTONOSUPPORT,
                    nix::libc::ENOPROTOOPT,
                    nix::libc::EINVAL,
                ]
                .contains(&code) =>
            {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "kernel MPTCP is not available ({e}): needs CONFIG_MPTCP and \
                         net.mptcp.enabled=1"
                    ),
                )
            }
            _ => e,
        })
    }
}

/// When a sender stops writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendLimit {
    /// After this many bytes.
    Bytes(u64),
    /// After this long (counted from the connect); the last block is written whole.
    For(Duration),
}

/// How [`tcp_send_opts`] sends.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    /// Time bounds.
    pub tcp: TcpOptions,
    /// TCP or MPTCP.
    pub proto: StreamProto,
    /// When to stop writing (default: nothing at all).
    pub limit: Option<SendLimit>,
    /// TCP congestion control of the socket (`TCP_CONGESTION`, e.g. `cubic`); `None`: the
    /// namespace's default. Root may pick any algorithm the kernel has, whatever
    /// `net.ipv4.tcp_allowed_congestion_control` says; an MPTCP socket passes it to its
    /// subflows.
    pub congestion: Option<String>,
    /// Set it to stop writing early: the transfer then ends normally (half-close, wait for
    /// the receiver) if it was set between blocks, or with an error if it is set while a
    /// write or the wait for the receiver is blocked (checked every 50 ms).
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Sends `seed`'s payload from `ns` to `dst` as `opts` say, half-closes and waits until the
/// receiver closes. The report's digest covers exactly the bytes written.
pub fn tcp_send_opts(
    ns: &Namespace,
    dst: SocketAddr,
    seed: u64,
    opts: SendOptions,
) -> Result<SendReport> {
    ns.run_in(move || send_stream(dst, seed, &opts))?
}

fn cancelled(opts: &SendOptions) -> bool {
    opts.cancel
        .as_ref()
        .is_some_and(|c| c.load(Ordering::Acquire))
}

fn is_wait(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

fn send_stream(dst: SocketAddr, seed: u64, opts: &SendOptions) -> Result<SendReport> {
    let t = opts.tcp;
    let started = Instant::now();
    let deadline = started + t.total_timeout;
    let sock = opts
        .proto
        .socket(&dst)
        .map_err(|e| TestbedError::io(format!("{:?} socket towards {dst}", opts.proto), e))?;
    if let Some(cc) = &opts.congestion {
        sock.set_tcp_congestion(cc.as_bytes())
            .map_err(|e| TestbedError::io(format!("setting congestion control `{cc}`"), e))?;
    }
    sock.connect_timeout(&dst.into(), t.connect_timeout)
        .map_err(|e| TestbedError::io(format!("connecting to {dst}"), e))?;
    let mut s: TcpStream = sock.into();
    s.set_write_timeout(Some(POLL))
        .map_err(|e| TestbedError::io("setting a write timeout", e))?;
    let (max_bytes, until) = match opts.limit {
        None => (0, None),
        Some(SendLimit::Bytes(b)) => (b, None),
        Some(SendLimit::For(d)) => (u64::MAX, Some(started + d)),
    };
    let mut ctx = t.digest.then(|| Context::new(&SHA256));
    let mut buf = vec![0u8; BLOCK];
    if !t.digest {
        payload_block(seed, 0, &mut buf);
    }
    let mut sent = 0u64;
    let mut index = 0u64;
    while sent < max_bytes {
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) || cancelled(opts) {
            break;
        }
        if now > deadline {
            return Err(TestbedError::Timeout {
                what: format!("sending to {dst} (sent {sent} bytes)"),
                after: t.total_timeout,
            });
        }
        let n = usize::try_from((max_bytes - sent).min(BLOCK as u64)).unwrap_or(BLOCK);
        if t.digest {
            payload_block(seed, index, &mut buf[..n]);
        }
        // Own write loop with short timeouts, so a cancel or a stall is noticed promptly.
        let mut off = 0;
        let mut progress = Instant::now();
        while off < n {
            match s.write(&buf[off..n]) {
                Ok(k) => {
                    off += k;
                    progress = Instant::now();
                }
                Err(e) if is_wait(&e) => {
                    if cancelled(opts) {
                        return Err(TestbedError::Thread(format!(
                            "sending to {dst}: cancelled after {sent} bytes"
                        )));
                    }
                    if progress.elapsed() > t.stall_timeout {
                        return Err(TestbedError::Timeout {
                            what: format!("sending to {dst} (sent {sent} bytes)"),
                            after: t.stall_timeout,
                        });
                    }
                }
                Err(e) => {
                    return Err(TestbedError::io(
                        format!("sending to {dst} after {sent} bytes"),
                        e,
                    ));
                }
            }
        }
        if let Some(ctx) = ctx.as_mut() {
            ctx.update(&buf[..n]);
        }
        sent += n as u64;
        index += 1;
    }
    s.shutdown(Shutdown::Write)
        .map_err(|e| TestbedError::io(format!("half-closing the connection to {dst}"), e))?;
    s.set_read_timeout(Some(POLL))
        .map_err(|e| TestbedError::io("setting a read timeout", e))?;
    let closed = Instant::now();
    let mut scratch = [0u8; 1024];
    loop {
        match s.read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if is_wait(&e) => {
                if cancelled(opts) {
                    return Err(TestbedError::Thread(format!(
                        "waiting for {dst} to close: cancelled"
                    )));
                }
                if closed.elapsed() > t.stall_timeout || Instant::now() > deadline {
                    return Err(TestbedError::Timeout {
                        what: format!("{dst} to close after sending {sent} bytes"),
                        after: t.stall_timeout,
                    });
                }
            }
            Err(e) => {
                return Err(TestbedError::io(
                    format!("waiting for {dst} to close after sending {sent} bytes"),
                    e,
                ));
            }
        }
    }
    Ok(SendReport {
        bytes: sent,
        sha256: ctx.map(finish),
        duration: started.elapsed(),
    })
}

/// [`tcp_send`] with explicit time bounds.
pub fn tcp_send_with(
    ns: &Namespace,
    dst: SocketAddr,
    bytes: u64,
    seed: u64,
    opts: TcpOptions,
) -> Result<SendReport> {
    ns.run_in(move || send_inner(dst, bytes, seed, opts))?
}

fn send_inner(dst: SocketAddr, bytes: u64, seed: u64, opts: TcpOptions) -> Result<SendReport> {
    let started = Instant::now();
    let deadline = started + opts.total_timeout;
    let mut s = TcpStream::connect_timeout(&dst, opts.connect_timeout)
        .map_err(|e| TestbedError::io(format!("connecting to {dst}"), e))?;
    s.set_write_timeout(Some(opts.stall_timeout))
        .map_err(|e| TestbedError::io("setting a write timeout", e))?;
    let mut ctx = Context::new(&SHA256);
    let mut sent = 0u64;
    let r = for_each_block(seed, bytes, |b| {
        if Instant::now() > deadline {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                format!("whole transfer took over {:?}", opts.total_timeout),
            ));
        }
        s.write_all(b)?;
        ctx.update(b);
        sent += b.len() as u64;
        Ok(())
    });
    r.map_err(|e| TestbedError::io(format!("sending to {dst} after {sent} of {bytes} bytes"), e))?;
    s.shutdown(Shutdown::Write)
        .map_err(|e| TestbedError::io(format!("half-closing the connection to {dst}"), e))?;
    // Wait for the receiver to close: it has read everything by then.
    let left = deadline.saturating_duration_since(Instant::now());
    s.set_read_timeout(Some(
        left.clamp(Duration::from_millis(1), opts.stall_timeout),
    ))
    .map_err(|e| TestbedError::io("setting a read timeout", e))?;
    let mut scratch = [0u8; 1024];
    loop {
        match s.read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(TestbedError::io(
                    format!("waiting for {dst} to close after sending {bytes} bytes"),
                    e,
                ));
            }
        }
    }
    Ok(SendReport {
        bytes: sent,
        sha256: Some(finish(ctx)),
        duration: started.elapsed(),
    })
}

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
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
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

/// What [`udp_blast`] sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UdpBlastReport {
    /// Datagrams the kernel accepted.
    pub datagrams: u64,
    /// Bytes in them.
    pub bytes: u64,
    /// Sends that failed (ENOBUFS, ECONNREFUSED from an ICMP error, …) and were skipped.
    pub errors: u64,
    /// How long it sent.
    pub duration: Duration,
}

impl UdpBlastReport {
    /// Offered load, Mbit/s.
    pub fn offered_mbit(&self) -> f64 {
        mbit(self.bytes, self.duration)
    }
}

/// Largest UDP payload.
const MAX_DATAGRAM: usize = 65_507;

/// Sends `datagram_size`-byte datagrams from `ns` to `dst` as fast as the kernel takes them,
/// for `duration`. Each datagram starts with its 8-byte sequence number.
pub fn udp_blast(
    ns: &Namespace,
    dst: SocketAddr,
    datagram_size: usize,
    duration: Duration,
) -> Result<UdpBlastReport> {
    if !(8..=MAX_DATAGRAM).contains(&datagram_size) {
        return Err(TestbedError::Spec(format!(
            "datagram size {datagram_size} must be 8 to {MAX_DATAGRAM} bytes"
        )));
    }
    ns.run_in(move || -> Result<UdpBlastReport> {
        let bind: SocketAddr = if dst.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let sock = UdpSocket::bind(bind)
            .and_then(|s| s.connect(dst).map(|()| s))
            .map_err(|e| TestbedError::io(format!("UDP socket towards {dst}"), e))?;
        sock.set_write_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| TestbedError::io("setting a write timeout", e))?;
        let mut buf = vec![0xa5u8; datagram_size];
        let mut report = UdpBlastReport {
            datagrams: 0,
            bytes: 0,
            errors: 0,
            duration: Duration::ZERO,
        };
        let started = Instant::now();
        let mut seq = 0u64;
        while started.elapsed() < duration {
            for _ in 0..64 {
                buf[..8].copy_from_slice(&seq.to_be_bytes());
                seq += 1;
                match sock.send(&buf) {
                    Ok(n) => {
                        report.datagrams += 1;
                        report.bytes += n as u64;
                    }
                    Err(_) => report.errors += 1,
                }
            }
        }
        report.duration = started.elapsed();
        Ok(report)
    })?
}

/// What a [`UdpSink`] received.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UdpReport {
    /// Datagrams received.
    pub datagrams: u64,
    /// Bytes in them.
    pub bytes: u64,
    /// Arrival of the first datagram, since the sink started.
    pub first: Option<Duration>,
    /// Arrival of the last datagram, since the sink started.
    pub last: Option<Duration>,
}

impl UdpReport {
    /// Received goodput between the first and the last datagram, Mbit/s.
    pub fn goodput_mbit(&self) -> f64 {
        match (self.first, self.last) {
            (Some(a), Some(b)) if b > a => mbit(self.bytes, b - a),
            _ => 0.0,
        }
    }
}

/// Counts UDP datagrams arriving on a socket in a namespace until stopped.
#[derive(Debug)]
pub struct UdpSink {
    local: SocketAddr,
    /// Reads with a [`POLL`] timeout, checking its stop flag between reads.
    worker: Worker<Result<Result<UdpReport>>>,
}

impl UdpSink {
    /// Binds `bind` in `ns` and starts counting.
    pub fn start(ns: &Namespace, bind: SocketAddr) -> Result<UdpSink> {
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<SocketAddr>>(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = ns.spawn_thread(
            &format!("udp-sink-{}", bind.port()),
            move || -> Result<UdpReport> {
                let sock = match UdpSocket::bind(bind)
                    .and_then(|s| s.set_read_timeout(Some(POLL)).map(|()| s))
                    .and_then(|s| s.local_addr().map(|a| (s, a)))
                {
                    Ok((s, a)) => {
                        let _ = ready_tx.send(Ok(a));
                        s
                    }
                    Err(e) => {
                        let err = TestbedError::io(format!("binding UDP {bind}"), e);
                        let _ = ready_tx.send(Err(TestbedError::Spec(err.to_string())));
                        return Err(err);
                    }
                };
                let started = Instant::now();
                let mut r = UdpReport {
                    datagrams: 0,
                    bytes: 0,
                    first: None,
                    last: None,
                };
                let mut buf = vec![0u8; 65_536];
                while !stop2.load(Ordering::Acquire) {
                    match sock.recv(&mut buf) {
                        Ok(n) => {
                            let at = started.elapsed();
                            r.first.get_or_insert(at);
                            r.last = Some(at);
                            r.datagrams += 1;
                            r.bytes += n as u64;
                        }
                        Err(e)
                            if matches!(
                                e.kind(),
                                ErrorKind::WouldBlock
                                    | ErrorKind::TimedOut
                                    | ErrorKind::Interrupted
                            ) => {}
                        Err(e) => return Err(TestbedError::io(format!("receiving on {bind}"), e)),
                    }
                }
                Ok(r)
            },
        )?;
        let local = match ready_rx.recv_timeout(BIND_TIMEOUT) {
            Ok(r) => r?,
            Err(_) => {
                stop.store(true, Ordering::Release);
                return Err(TestbedError::Thread(format!(
                    "UDP sink on {bind} did not start"
                )));
            }
        };
        Ok(UdpSink {
            local,
            worker: Worker::new(stop, thread),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops counting (within about 50 ms) and returns the counts.
    pub fn stop(self) -> Result<UdpReport> {
        let local = self.local;
        self.worker
            .stop()
            .map_err(|p| TestbedError::Thread(format!("UDP sink on {local}: {p}")))??
    }
}

/// Echoes every UDP datagram back to its sender, in a namespace, until dropped.
#[derive(Debug)]
pub struct UdpEcho {
    local: SocketAddr,
    /// Reads with a [`POLL`] timeout, checking its stop flag between reads.
    _worker: Worker<Result<()>>,
}

impl UdpEcho {
    /// Binds `bind` in `ns` and starts echoing.
    pub fn start(ns: &Namespace, bind: SocketAddr) -> Result<UdpEcho> {
        UdpEcho::start_inner(ns, bind, None)
    }

    /// [`UdpEcho::start`] with both socket buffers forced to `bytes` (`SO_RCVBUFFORCE`,
    /// `SO_SNDBUFFORCE`: needs `CAP_NET_ADMIN`, ignores `net.core.rmem_max`), for bursts
    /// larger than the default buffers hold.
    pub fn start_with_buffers(ns: &Namespace, bind: SocketAddr, bytes: usize) -> Result<UdpEcho> {
        UdpEcho::start_inner(ns, bind, Some(bytes))
    }

    fn start_inner(ns: &Namespace, bind: SocketAddr, buffers: Option<usize>) -> Result<UdpEcho> {
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<SocketAddr>>(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = ns.spawn_thread(&format!("udp-echo-{}", bind.port()), move || {
            let sock = match UdpSocket::bind(bind)
                .and_then(|s| s.set_read_timeout(Some(POLL)).map(|()| s))
                .and_then(|s| force_buffers(&s, buffers).map(|()| s))
                .and_then(|s| s.local_addr().map(|a| (s, a)))
            {
                Ok((s, a)) => {
                    let _ = ready_tx.send(Ok(a));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(TestbedError::io(format!("binding UDP {bind}"), e)));
                    return;
                }
            };
            let mut buf = [0u8; 2048];
            while !stop2.load(Ordering::Acquire) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    // A lost echo is a lost probe: the prober counts it.
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        })?;
        let local = match ready_rx.recv_timeout(BIND_TIMEOUT) {
            Ok(r) => r?,
            Err(_) => {
                stop.store(true, Ordering::Release);
                return Err(TestbedError::Thread(format!(
                    "UDP echo on {bind} did not start"
                )));
            }
        };
        Ok(UdpEcho {
            local,
            _worker: Worker::new(stop, thread),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// Forces both buffers of `sock` to `bytes`, if given.
fn force_buffers(sock: &UdpSocket, bytes: Option<usize>) -> std::io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    if let Some(bytes) = bytes {
        setsockopt(sock, sockopt::RcvBufForce, &bytes)?;
        setsockopt(sock, sockopt::SndBufForce, &bytes)?;
    }
    Ok(())
}

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

/// The `q`-quantile (nearest rank) of sorted values.
pub fn quantile_sorted<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let q = if q.is_finite() {
        q.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// How long an unanswered probe is waited for (later echoes are ignored).
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Sends a small UDP datagram from a namespace to a [`UdpEcho`] every interval and records
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
            let bind: SocketAddr = if dst.is_ipv4() {
                (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let sock = UdpSocket::bind(bind)
                .and_then(|s| s.connect(dst).map(|()| s))
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
    fn payload_is_deterministic_and_seeded() {
        let mut a = vec![0u8; 1000];
        let mut b = vec![0u8; 1000];
        payload_block(7, 3, &mut a);
        payload_block(7, 3, &mut b);
        assert_eq!(a, b);
        payload_block(8, 3, &mut b);
        assert_ne!(a, b);
        payload_block(7, 4, &mut b);
        assert_ne!(a, b);
        // A shorter fill is a prefix of a longer one.
        let mut c = vec![0u8; 13];
        payload_block(7, 3, &mut c);
        assert_eq!(&a[..13], &c[..]);
        assert_eq!(payload_sha256(1 << 20, 1), payload_sha256(1 << 20, 1));
        assert_ne!(payload_sha256(1 << 20, 1), payload_sha256(1 << 20, 2));
    }

    #[test]
    fn payload_digest_matches_the_stream() {
        let bytes = 3 * BLOCK as u64 + 17;
        let mut all = Vec::new();
        for_each_block(5, bytes, |b| {
            all.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(all.len() as u64, bytes);
        let direct = ring::digest::digest(&SHA256, &all);
        assert_eq!(payload_sha256(bytes, 5).as_slice(), direct.as_ref());
        // The empty transfer hashes to SHA-256 of nothing.
        assert_eq!(
            hex(&payload_sha256(0, 5)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

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

    #[test]
    fn net_dev_and_quantiles_parse() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n \
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n \
    rs: 1234567    1000    0    0    0     0          0         0  7654321    2000    0    0    0     0       0          0\n";
        assert_eq!(parse_net_dev(text, "rs"), Some((1_234_567, 7_654_321)));
        assert_eq!(parse_net_dev(text, "r"), None);
        assert_eq!(parse_net_dev("rs: x y", "rs"), None);
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(quantile_sorted(&v, 0.5), Some(5));
        assert_eq!(quantile_sorted(&v, 0.99), Some(10));
        assert_eq!(quantile_sorted(&v, 0.0), Some(1));
        assert_eq!(quantile_sorted::<u32>(&[], 0.5), None);
        assert_eq!(quantile_sorted(&v, f64::NAN), Some(5));
    }

    #[test]
    fn reports_compute_goodput() {
        let r = SendReport {
            bytes: 50_000_000,
            sha256: Some([0; 32]),
            duration: Duration::from_secs(5),
        };
        assert!((r.goodput_mbit() - 80.0).abs() < 1e-9);
        let u = UdpReport {
            datagrams: 10,
            bytes: 1_000_000,
            first: Some(Duration::from_secs(1)),
            last: Some(Duration::from_secs(2)),
        };
        assert!((u.goodput_mbit() - 8.0).abs() < 1e-9);
        assert_eq!(UdpReport { first: None, ..u }.goodput_mbit(), 0.0);
    }
}
