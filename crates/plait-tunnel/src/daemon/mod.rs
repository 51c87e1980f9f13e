//! The daemon's event loop: one thread, one `mio::Poll`, driving one endpoint.
//!
//! Each round: wait for readiness or the endpoint's deadline; read every ready UDP socket
//! in batches (recvmmsg/GRO) and the TUN device, handing each datagram and packet to the
//! endpoint; run its timers; flush the coalesced sends (GSO); publish a status snapshot a
//! few times a second. Readiness is edge-triggered, so a source stays marked until a read
//! says `WouldBlock`; each round reads a bounded amount from each, so one busy source
//! cannot starve the others.
//!
//! Time: the clock is read again after each receive batch and before the timers, not once
//! per round. A datagram's time is its kernel receive time ([`Now::at_kernel_time`]),
//! which must not be later than the time it is compared with: read at the round's start,
//! a datagram that arrived while the round ran (a round can last milliseconds on a busy
//! host) would get that start time instead, earlier than its arrival, and one such stamp
//! sets its path's base one-way delay too low for the base's 5-minute window (every later
//! delay then reads as a standing queue; docs/protocol.md#fec tells the case on T3).
//!
//! More cores later: the server's sessions are independent, so they can be sharded over
//! worker threads by receiver index (one `SO_REUSEPORT` socket per worker with a BPF
//! steering program, and one TUN queue per worker with `IFF_MULTI_QUEUE`); the client's
//! one session can move sealing and opening to a second thread in batches. The endpoint
//! API does not change for either.

mod budgets;
mod error;
mod link_signal;
mod links;
mod setup;
mod stream_setup;

pub use error::DaemonError;
pub use setup::{run_client, run_server};

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use plait_proto::Time;
use tracing::{info, warn};

use crate::control::{DropCounters, SessionStatus, SharedSnapshot, StatusSnapshot};
use crate::endpoint::{ClientEndpoint, ClientPath, Now, Outputs, ServerEndpoint, StreamHost};
use crate::io::tun::Tun;
use crate::io::udp::{RecvBuffers, SendBatch, UdpPath};
use crate::relay::{ClientRelayParams, Relay, ServerRelayParams};

const TUN: Token = Token(0);
const SIGNAL: Token = Token(1);
const TIMER: Token = Token(2);
const NETWATCH: Token = Token(3);
const FIRST_SOCKET: usize = 4;
/// Waits shorter than this use the timerfd.
const PRECISE_BELOW: Duration = Duration::from_millis(5);
/// Batches read from one socket per round before the others get a turn.
const SOCKET_BATCHES_PER_ROUND: usize = 4;
/// Batches read from a handshake socket per round: initiations wait behind data, so a
/// flood of them takes at most this share of each round.
const HANDSHAKE_BATCHES_PER_ROUND: usize = 1;
/// TUN packets read per round.
const TUN_PACKETS_PER_ROUND: usize = 256;
/// How often the status snapshot is refreshed.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);

/// What the loop drives: a client or a server endpoint.
pub trait Driven: StreamHost {
    /// See [`ClientEndpoint::handle_udp`].
    fn handle_udp(
        &mut self,
        now: Now,
        socket: usize,
        from: SocketAddr,
        d: &mut [u8],
        out: &mut impl Outputs,
    );
    /// See [`ClientEndpoint::handle_tun`].
    fn handle_tun(&mut self, now: Now, packet: &[u8], out: &mut impl Outputs);
    /// See [`ClientEndpoint::handle_timeout`].
    fn handle_timeout(&mut self, now: Now, out: &mut impl Outputs);
    /// See [`ClientEndpoint::poll_timeout`].
    fn poll_timeout(&self) -> Option<Time>;
    /// Sessions and drop counters for the status snapshot.
    fn status(&self, now: Time) -> (Vec<SessionStatus>, DropCounters);
    /// `"client"` or `"server"`.
    fn role(&self) -> &'static str;
    /// See [`ClientEndpoint::set_path_available`]; a server has no links of its own to
    /// watch.
    fn set_path_available(
        &mut self,
        _now: Now,
        _path: usize,
        _available: bool,
        _out: &mut impl Outputs,
    ) {
    }
    /// See [`ClientEndpoint::open_path`]; a server opens no paths.
    fn open_path(
        &mut self,
        _now: Now,
        _id: usize,
        _path: ClientPath,
        _why: &str,
        _out: &mut impl Outputs,
    ) {
    }
    /// See [`ClientEndpoint::close_path`].
    fn close_path(&mut self, _now: Now, _id: usize, _why: &str, _out: &mut impl Outputs) {}
    /// See [`ClientEndpoint::note_refused`].
    fn note_refused(&mut self, _now: Now, _name: &str, _why: &str) {}
    /// See [`ClientEndpoint::set_path_server`].
    fn set_path_server(&mut self, _now: Now, _id: usize, _server: SocketAddr) {}
    /// See [`ClientEndpoint::server_unanswering`].
    fn server_unanswering(&self) -> bool {
        false
    }
    /// The name of the client's path on `id` (`None`: no path there, or a server).
    fn path_name(&self, _id: usize) -> Option<&str> {
        None
    }
    /// See [`ClientEndpoint::set_path_backup`].
    fn set_path_backup(&mut self, _now: Now, _id: usize, _backup: bool, _out: &mut impl Outputs) {}
    /// See [`ClientEndpoint::set_link_signal`].
    fn set_link_signal(&mut self, _id: usize, _signal: Option<f64>) {}
}

impl Driven for ClientEndpoint {
    fn handle_udp(
        &mut self,
        now: Now,
        socket: usize,
        from: SocketAddr,
        d: &mut [u8],
        out: &mut impl Outputs,
    ) {
        ClientEndpoint::handle_udp(self, now, socket, from, d, out)
    }
    fn handle_tun(&mut self, now: Now, packet: &[u8], out: &mut impl Outputs) {
        ClientEndpoint::handle_tun(self, now, packet, out)
    }
    fn handle_timeout(&mut self, now: Now, out: &mut impl Outputs) {
        ClientEndpoint::handle_timeout(self, now, out)
    }
    fn poll_timeout(&self) -> Option<Time> {
        ClientEndpoint::poll_timeout(self)
    }
    fn status(&self, now: Time) -> (Vec<SessionStatus>, DropCounters) {
        (vec![ClientEndpoint::status(self, now)], self.drops())
    }
    fn role(&self) -> &'static str {
        "client"
    }
    fn set_path_available(
        &mut self,
        now: Now,
        path: usize,
        available: bool,
        out: &mut impl Outputs,
    ) {
        ClientEndpoint::set_path_available(self, now, path, available, out)
    }
    fn open_path(
        &mut self,
        now: Now,
        id: usize,
        path: ClientPath,
        why: &str,
        out: &mut impl Outputs,
    ) {
        ClientEndpoint::open_path(self, now, id, path, why, out)
    }
    fn close_path(&mut self, now: Now, id: usize, why: &str, out: &mut impl Outputs) {
        ClientEndpoint::close_path(self, now, id, why, out)
    }
    fn note_refused(&mut self, now: Now, name: &str, why: &str) {
        ClientEndpoint::note_refused(self, now, name, why)
    }
    fn set_path_server(&mut self, now: Now, id: usize, server: SocketAddr) {
        ClientEndpoint::set_path_server(self, now, id, server)
    }
    fn server_unanswering(&self) -> bool {
        ClientEndpoint::server_unanswering(self)
    }
    fn path_name(&self, id: usize) -> Option<&str> {
        self.path(id).map(|p| p.name.as_str())
    }
    fn set_path_backup(&mut self, now: Now, id: usize, backup: bool, out: &mut impl Outputs) {
        ClientEndpoint::set_path_backup(self, now, id, backup, out)
    }
    fn set_link_signal(&mut self, id: usize, signal: Option<f64>) {
        ClientEndpoint::set_link_signal(self, id, signal)
    }
}

impl Driven for ServerEndpoint {
    fn handle_udp(
        &mut self,
        now: Now,
        socket: usize,
        from: SocketAddr,
        d: &mut [u8],
        out: &mut impl Outputs,
    ) {
        ServerEndpoint::handle_udp(self, now, socket, from, d, out)
    }
    fn handle_tun(&mut self, now: Now, packet: &[u8], out: &mut impl Outputs) {
        ServerEndpoint::handle_tun(self, now, packet, out)
    }
    fn handle_timeout(&mut self, now: Now, out: &mut impl Outputs) {
        ServerEndpoint::handle_timeout(self, now, out)
    }
    fn poll_timeout(&self) -> Option<Time> {
        ServerEndpoint::poll_timeout(self)
    }
    fn status(&self, now: Time) -> (Vec<SessionStatus>, DropCounters) {
        (ServerEndpoint::status(self, now), self.drops())
    }
    fn role(&self) -> &'static str {
        "server"
    }
}

/// The daemon's clock: monotonic for the engine, wall time for handshake timestamps.
#[derive(Debug)]
struct Clock(Instant);

impl Clock {
    fn now(&self) -> Now {
        let mono = Time::from_nanos(u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX));
        let wall_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Now { mono, wall_ns }
    }

    fn until(&self, deadline: Time) -> Duration {
        deadline.saturating_since(self.now().mono)
    }
}

/// Outputs into the real sockets and TUN device.
struct RealOut<'a> {
    sockets: &'a mut [Option<UdpPath>],
    batches: &'a mut [SendBatch],
    tun: &'a Tun,
    tun_write_errors: &'a mut u64,
    /// A client's byte budgets, which count what each path socket sends.
    budgets: Option<&'a mut budgets::Budgets>,
}

impl Outputs for RealOut<'_> {
    fn send_udp(&mut self, socket: usize, to: SocketAddr, datagram: &[u8]) {
        if let (Some(Some(s)), Some(b)) =
            (self.sockets.get_mut(socket), self.batches.get_mut(socket))
        {
            b.push(s, to, datagram);
            if let Some(budgets) = self.budgets.as_deref_mut() {
                budgets.count(socket, on_wire(to, datagram.len()));
            }
        }
    }

    fn write_tun(&mut self, packet: &[u8]) {
        if self.tun.send(packet).is_err() {
            *self.tun_write_errors += 1;
        }
    }
}

impl RealOut<'_> {
    fn flush(&mut self) {
        for (s, b) in self.sockets.iter_mut().zip(self.batches.iter_mut()) {
            if let Some(s) = s {
                b.flush(s);
            }
        }
    }
}

/// Bytes a datagram of `len` bytes to or from `peer` occupies as an IP packet (what a
/// metered link bills): the UDP payload and the IP and UDP headers.
fn on_wire(peer: SocketAddr, len: usize) -> usize {
    len + crate::endpoint::outer_ip_udp_overhead(&peer)
}

/// A one-shot timer with microsecond resolution.
struct Timer {
    fd: TimerFd,
}

impl Timer {
    fn new() -> io::Result<Timer> {
        let fd = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK)
            .map_err(io::Error::from)?;
        Ok(Timer { fd })
    }

    fn arm(&self, after: Duration) {
        // A zero TimeSpec would disarm it; the caller never passes zero.
        let spec = TimeSpec::from_duration(after.max(Duration::from_micros(1)));
        // Failure leaves the epoll timeout as the fallback.
        let _ = self
            .fd
            .set(Expiration::OneShot(spec), TimerSetTimeFlags::empty());
    }

    fn clear(&self) {
        // Non-blocking read of the expiry count; EAGAIN (nothing expired) is fine.
        let _ = nix::unistd::read(&self.fd, &mut [0u8; 8]);
    }
}

/// A self-pipe that SIGINT and SIGTERM write to, so the loop wakes at once.
struct Signals {
    read: UnixStream,
    _ids: Vec<signal_hook::SigId>,
}

impl Signals {
    fn new(stop: &Arc<AtomicBool>) -> io::Result<Signals> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let write: OwnedFd = write.into();
        let mut ids = Vec::new();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            ids.push(signal_hook::flag::register(sig, Arc::clone(stop))?);
            ids.push(signal_hook::low_level::pipe::register(
                sig,
                write.try_clone()?,
            )?);
        }
        Ok(Signals { read, _ids: ids })
    }
}

/// Stream mode's relay, if on (built inside the loop: it registers with the loop's poll).
#[derive(Debug)]
pub(crate) enum RelaySetup {
    /// Packet mode only.
    Off,
    /// The client's listeners.
    Client(ClientRelayParams),
    /// The server's connector.
    Server(ServerRelayParams),
}

/// What the loop watches beside the endpoint's sockets and the TUN device.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    /// A server's initiation-only sockets (crate::io::steer), each with the index of the
    /// data socket it stands beside: what it reads reaches the endpoint under that index,
    /// and nothing is sent through it.
    pub(crate) handshake: Vec<(usize, UdpPath)>,
    /// A client's links (crate::io::netwatch, crate::mobility): each change of a fixed
    /// path's link goes to [`Driven::set_path_available`], pattern paths open and close
    /// with their sockets, server names are resolved again ([`links`]).
    pub(crate) links: Option<links::ClientLinks>,
    /// A client's reader of its paths' link signal ([`link_signal`]; needs `links`).
    pub(crate) link_signals: Option<link_signal::LinkSignals>,
    /// A client's byte budgets of metered paths ([`budgets`]).
    pub(crate) budgets: Option<budgets::Budgets>,
}

/// Runs `endpoint` until SIGINT/SIGTERM (or `stop` is set). Sockets are indexed as the
/// endpoint's socket numbers; a client's free path ids are `None` until a pattern path
/// opens a socket there.
pub(crate) fn run_loop(
    endpoint: &mut impl Driven,
    tun: &Tun,
    sockets: &mut [Option<UdpPath>],
    watched: Watched,
    relay: RelaySetup,
    snapshot: &SharedSnapshot,
    stop: &Arc<AtomicBool>,
) -> io::Result<()> {
    let clock = Clock(Instant::now());
    let mut poll = Poll::new()?;
    let mut relay = match relay {
        RelaySetup::Off => None,
        RelaySetup::Client(p) => Some(Relay::client(p, poll.registry())?),
        RelaySetup::Server(p) => Some(Relay::server(p, poll.registry())?),
    };
    let signals = Signals::new(stop)?;
    poll.registry()
        .register(&mut SourceFd(&tun.as_raw_fd()), TUN, Interest::READABLE)?;
    poll.registry().register(
        &mut SourceFd(&signals.read.as_raw_fd()),
        SIGNAL,
        Interest::READABLE,
    )?;
    let timer = Timer::new()?;
    poll.registry().register(
        &mut SourceFd(&timer.fd.as_fd().as_raw_fd()),
        TIMER,
        Interest::READABLE,
    )?;
    for (i, s) in sockets.iter().enumerate() {
        let Some(s) = s else { continue };
        poll.registry().register(
            &mut SourceFd(&s.as_raw_fd()),
            Token(FIRST_SOCKET + i),
            Interest::READABLE,
        )?;
    }
    let Watched {
        handshake,
        mut links,
        mut link_signals,
        mut budgets,
    } = watched;
    if let Some(fd) = links.as_ref().and_then(links::ClientLinks::event_fd) {
        poll.registry()
            .register(&mut SourceFd(&fd), NETWATCH, Interest::READABLE)?;
    }
    // The links as they are at start (a path whose link is down leaves at once, pattern
    // paths open for the interfaces already there).
    let mut links_changed = links.as_ref().is_some_and(links::ClientLinks::watching);
    let first_handshake = FIRST_SOCKET + sockets.len();
    for (i, (_, s)) in handshake.iter().enumerate() {
        poll.registry().register(
            &mut SourceFd(&s.as_raw_fd()),
            Token(first_handshake + i),
            Interest::READABLE,
        )?;
    }
    let mut batches: Vec<SendBatch> = sockets
        .iter()
        .map(|s| SendBatch::new(s.as_ref().map_or(1, UdpPath::max_gso_segments)))
        .collect();
    // One set of receive buffers for every path socket: each batch is handed to the
    // endpoint before the next socket is read.
    let mut recv = RecvBuffers::default();
    let mut handshake_recv = RecvBuffers::default();
    let mut tun_buf = vec![0u8; 65_536];
    let mut socket_ready: Vec<bool> = sockets.iter().map(Option::is_some).collect();
    let mut handshake_ready = vec![true; handshake.len()];
    let mut tun_ready = true;
    let mut tun_write_errors = 0u64;
    let mut events = Events::with_capacity(64);
    let mut next_snapshot = Instant::now();
    let mut deadline = Some(Time::ZERO);

    while !stop.load(Ordering::Relaxed) {
        let busy = tun_ready
            || socket_ready.iter().any(|r| *r)
            || handshake_ready.iter().any(|r| *r)
            || relay.as_ref().is_some_and(Relay::busy);
        let wait = if busy {
            Duration::ZERO
        } else {
            let d = deadline.map_or(SNAPSHOT_EVERY, |t| clock.until(t));
            d.min(next_snapshot.saturating_duration_since(Instant::now()))
        };
        // epoll's timeout has millisecond resolution, rounded up; the engine's deadlines
        // (paced release, pacing gaps) are often tens of microseconds away, and sleeping a
        // whole millisecond each time capped a bulk flow near 45 Mbit/s. Short waits go
        // through a timerfd, which has microsecond resolution.
        let wait = if !wait.is_zero() && wait < PRECISE_BELOW {
            timer.arm(wait);
            Some(wait + PRECISE_BELOW)
        } else {
            Some(wait)
        };
        match poll.poll(&mut events, wait) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in &events {
            match ev.token() {
                TUN => tun_ready = true,
                TIMER => timer.clear(),
                NETWATCH => {
                    if let Some(l) = links.as_mut() {
                        links_changed |= l.drain();
                    }
                }
                SIGNAL => stop.store(true, Ordering::Relaxed),
                Token(t) if crate::relay::TOKENS.contains(&t) => {
                    if let Some(r) = relay.as_mut() {
                        r.on_ready(
                            ev.token(),
                            ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                            ev.is_writable() || ev.is_write_closed() || ev.is_error(),
                        );
                    }
                }
                Token(t) if t >= first_handshake => {
                    if let Some(r) = handshake_ready.get_mut(t - first_handshake) {
                        *r = true;
                    }
                }
                Token(t) => {
                    if let Some(r) = socket_ready.get_mut(t - FIRST_SOCKET) {
                        *r = true;
                    }
                }
            }
        }
        // Read again wherever the round may have taken a while (module docs, "Time").
        let mut now = clock.now();
        if let Some(l) = links.as_mut() {
            links_changed |= links::resolve_again(l, endpoint, now);
            if links_changed {
                links_changed = false;
                let mut s = links::Sockets {
                    sockets: &mut *sockets,
                    batches: &mut batches[..],
                    ready: &mut socket_ready[..],
                    registry: poll.registry(),
                    first_token: FIRST_SOCKET,
                    tun,
                    tun_write_errors: &mut tun_write_errors,
                };
                links::look(l, endpoint, now, &mut s);
            }
        }
        let (socks, batches_ref) = (&mut *sockets, &mut batches[..]);
        let mut out = RealOut {
            sockets: socks,
            batches: batches_ref,
            tun,
            tun_write_errors: &mut tun_write_errors,
            budgets: budgets.as_mut(),
        };
        for (i, ready) in socket_ready.iter_mut().enumerate() {
            for _ in 0..SOCKET_BATCHES_PER_ROUND {
                let (true, Some(Some(socket))) = (*ready, out.sockets.get(i)) else {
                    break;
                };
                let Some(n) = recv_batch(socket, &mut recv, ready) else {
                    break;
                };
                // After the read, so every kernel receive time in the batch is in the past.
                now = clock.now();
                for m in 0..n {
                    let (from, kernel_ts, datagrams) = recv.datagrams(m);
                    let at = now.at_kernel_time(kernel_ts);
                    for d in datagrams {
                        if let Some(b) = out.budgets.as_deref_mut() {
                            b.count(i, on_wire(from, d.len()));
                        }
                        endpoint.handle_udp(at, i, from, d, &mut out);
                    }
                }
            }
        }
        for (h, (index, socket)) in handshake.iter().enumerate() {
            for _ in 0..HANDSHAKE_BATCHES_PER_ROUND {
                if !handshake_ready[h] {
                    break;
                }
                let Some(n) = recv_batch(socket, &mut handshake_recv, &mut handshake_ready[h])
                else {
                    break;
                };
                for m in 0..n {
                    // Handed over at the time it is read, not at its kernel receive time:
                    // see `handshake_read_time`.
                    let (from, _, datagrams) = handshake_recv.datagrams(m);
                    for d in datagrams {
                        endpoint.handle_udp(handshake_read_time(now), *index, from, d, &mut out);
                    }
                }
            }
        }
        if tun_ready {
            for _ in 0..TUN_PACKETS_PER_ROUND {
                match tun.recv(&mut tun_buf) {
                    Ok(n) => endpoint.handle_tun(now, &tun_buf[..n], &mut out),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        tun_ready = false;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        warn!(error = %e, "TUN read failed");
                        tun_ready = false;
                        break;
                    }
                }
            }
        }
        now = clock.now();
        if deadline_due(endpoint, now) {
            endpoint.handle_timeout(now, &mut out);
        }
        if let Some(r) = relay.as_mut() {
            r.process(endpoint, now.mono, poll.registry());
            endpoint.flush_streams(now, &mut out);
        }
        // docs/tunnel-config.md#budget: what was counted reaches the budgets; a spent
        // one makes its paths backups.
        if let Some(b) = out.budgets.take() {
            b.tick(now, endpoint, &mut out);
            out.budgets = Some(b);
        }
        if let (Some(s), Some(l)) = (link_signals.as_mut(), links.as_ref())
            && now.mono >= s.next_read()
        {
            s.tick(now.mono, &l.bound_interfaces(), |id, signal| {
                endpoint.set_link_signal(id, signal)
            });
        }
        deadline = endpoint.poll_timeout();
        out.flush();
        if let Some(b) = budgets.as_ref() {
            deadline = Some(deadline.map_or(b.next_tick(), |d| d.min(b.next_tick())));
        }
        if let Some(s) = link_signals.as_ref() {
            deadline = Some(deadline.map_or(s.next_read(), |d| d.min(s.next_read())));
        }
        if Instant::now() >= next_snapshot {
            publish(
                endpoint,
                relay.as_ref(),
                budgets.as_ref(),
                &clock,
                tun,
                snapshot,
            );
            next_snapshot = Instant::now() + SNAPSHOT_EVERY;
        }
    }
    info!("shutting down");
    if let Some(b) = budgets.as_mut() {
        b.save();
    }
    Ok(())
}

/// Reads one batch from `socket`: the number of messages read, or `None` when there is
/// nothing more this round (`ready` is cleared when the socket is drained).
fn recv_batch(socket: &UdpPath, bufs: &mut RecvBuffers, ready: &mut bool) -> Option<usize> {
    match socket.recv(bufs) {
        Ok(n) => Some(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            *ready = false;
            None
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Some(0),
        Err(e) => {
            // ICMP errors (port unreachable, host unreachable) surface here on some
            // kernels: the path's liveness logic handles the outage.
            tracing::debug!(local = %socket.local_addr(), error = %e, "receive error");
            None
        }
    }
}

/// The time a datagram from a handshake socket is handed to the endpoint at: the time
/// the loop read it, which never goes backwards. Its kernel receive time would not do:
/// under a flood this socket's queue can hold a second's worth of initiations, and
/// [`Now::at_kernel_time`] gives the read time instead for datagrams over a second old,
/// so the times the endpoint saw jumped a second ahead and back again as the queue delay
/// went over and under a second. Each jump ahead refilled the server's demand bucket and
/// ended its under-load hold (docs/protocol.md#dos): in root test (r) 43 and 53 junk
/// initiations reached Diffie-Hellman in 36 s of a 20,000/s flood instead of none. Read
/// times measure the demand as the server meets it, as WireGuard's queue length does.
/// (Without the steering program, initiations share the data socket and keep its kernel
/// times.)
fn handshake_read_time(now: Now) -> Now {
    now
}

fn deadline_due(endpoint: &impl Driven, now: Now) -> bool {
    endpoint.poll_timeout().is_some_and(|d| d <= now.mono)
}

fn publish(
    endpoint: &impl Driven,
    relay: Option<&Relay>,
    budgets: Option<&budgets::Budgets>,
    clock: &Clock,
    tun: &Tun,
    shared: &SharedSnapshot,
) {
    let now = clock.now().mono;
    let (sessions, dropped) = endpoint.status(now);
    let snap = StatusSnapshot {
        role: endpoint.role().to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_s: clock.0.elapsed().as_secs_f64(),
        tun: tun.name().to_string(),
        tun_mtu: tun.mtu(),
        sessions,
        dropped,
        relay: relay.map(|r| {
            let s = r.stats();
            crate::control::snapshot::RelayStatus {
                open: s.open,
                relayed: s.relayed,
                refused: s.refused,
                reset: s.reset,
            }
        }),
        budgets: budgets.map_or_else(Vec::new, budgets::Budgets::status),
    };
    match shared.lock() {
        Ok(mut s) => *s = snap,
        Err(poisoned) => *poisoned.into_inner() = snap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::cookie::{Mac1Key, write_initiation_mac1};
    use crate::endpoint::tests::{Capture, keys, server_for};
    use crate::message::{INITIATION_HEADER_LEN, INITIATION_LEN, write_initiation_header};

    /// A server under a flood of valid-mac1 junk initiations from one source, read 40
    /// every 10 ms from a queue whose delay rises and falls between 0.9 and 1.1 s (a flood
    /// the server does not keep up with; what does not fit is dropped, so the datagrams
    /// read arrived between those read before and those read after). Returns how many
    /// reached Diffie-Hellman (`auth_failed`: junk never decrypts) when each is handed
    /// over at `time(read time, kernel receive time)`.
    fn junk_reaching_diffie_hellman(time: impl Fn(Now, Duration) -> Now) -> u64 {
        let k = keys();
        let mut server = server_for(&k, k.client.public());
        let mac1 = Mac1Key::new(&k.server.public());
        let from: SocketAddr = "198.51.100.7:4000".parse().unwrap();
        let mut junk = [0u8; INITIATION_LEN];
        let epoch = Duration::from_secs(1_800_000_000);
        let mut out = Capture::default();
        let mut last_arrival = Duration::ZERO;
        for read in 150..470u64 {
            let read_at = Duration::from_millis(read * 10);
            // A triangle wave: 900 ms, up by 5 ms a read to 1,100 ms, and down again.
            let phase = read % 80;
            let delay = Duration::from_millis(900 + 5 * phase.min(80 - phase));
            let now = Now {
                mono: Time::ZERO + read_at,
                wall_ns: u64::try_from((epoch + read_at).as_nanos()).unwrap(),
            };
            let newest = read_at - delay;
            let step = newest.saturating_sub(last_arrival) / 40;
            for i in 0..40u64 {
                let arrived = last_arrival + step * (i as u32 + 1);
                let n = read * 40 + i;
                junk.fill(n as u8);
                write_initiation_header(
                    junk.first_chunk_mut::<INITIATION_HEADER_LEN>().unwrap(),
                    n as u32,
                );
                write_initiation_mac1(&mut junk, &mac1);
                server.handle_udp(time(now, epoch + arrived), 0, from, &mut junk, &mut out);
            }
            last_arrival = last_arrival.max(newest);
        }
        let d = server.drops();
        assert!(d.cookie_replied > 12_000, "{d:?}");
        d.auth_failed
    }

    /// The bug `handshake_read_time` fixes, and the fix: with kernel receive times, each
    /// time the queue delay goes over a second the times jump ahead and the source's
    /// unproven burst reaches Diffie-Hellman again; with read times only the first burst
    /// does, before the demand made the server count as loaded.
    #[test]
    fn handshakes_read_from_a_slow_queue_keep_the_server_under_load() {
        let kernel = junk_reaching_diffie_hellman(|now, arrived| now.at_kernel_time(Some(arrived)));
        let read = junk_reaching_diffie_hellman(|now, _| handshake_read_time(now));
        eprintln!(
            "junk reaching Diffie-Hellman: {kernel} with kernel times, {read} with read times"
        );
        assert!(kernel > 5, "kernel times: {kernel} reached Diffie-Hellman");
        assert_eq!(read, 5, "read times: only the first burst");
    }
}
