//! Test support for the emulator's root tests: a private three-namespace line
//! `A (a0) – (ra) R (rb) – (b0) B` with a forwarding router, the test bed's UDP echo in B
//! (with large socket buffers) and a paced UDP prober in A that records every sequence
//! number's round trip, or its loss.
//!
//! Owns: the line's namespaces (test bed [`Namespace`]s named `emu<pid>-<n>-{a,r,b}`),
//! deleted when the [`Line`] is dropped, also on panic; those of a killed run are removed
//! by the next [`Line::new`]. The prober's threads, bounded in time.
//!
//! Invariants: traffic only goes between addresses of these namespaces; the root tests run
//! one at a time ([`serial`]) so timing measurements do not disturb each other.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::netns::{Namespace, cleanup_stale};
use crate::traffic::UdpEcho;

/// Namespace prefix of the lines.
const PREFIX: &str = "emu";
const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 231, 1, 1);
const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 231, 2, 1);
const ECHO_PORT: u16 = 7007;
/// The router's interface towards A: the rule `-i ROUTER_FROM_A` catches A → B.
pub(crate) const ROUTER_FROM_A: &str = "ra";

/// Socket buffers of the echo server and the prober: large enough for the bursts a
/// stalled (then catching-up) emulator releases at once.
const SOCKET_BUFFER: usize = 4 * 1024 * 1024;

fn big_buffers(sock: &UdpSocket) {
    use nix::sys::socket::{setsockopt, sockopt};
    setsockopt(sock, sockopt::RcvBufForce, &SOCKET_BUFFER).expect("SO_RCVBUFFORCE");
    setsockopt(sock, sockopt::SndBufForce, &SOCKET_BUFFER).expect("SO_SNDBUFFORCE");
}

/// Serialises the root tests of this module.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs a set-up command with the crate's runner; a failure fails the test with its stderr.
fn run(program: &str, args: &[&str]) {
    if let Err(e) = crate::cmd::run(program, args) {
        panic!("{e}");
    }
}

/// The namespaces of one test; deleted on drop.
#[derive(Debug)]
pub(crate) struct Line {
    pub a: Namespace,
    pub r: Namespace,
    pub b: Namespace,
}

impl Line {
    pub(crate) fn new() -> Line {
        if let Err(e) = cleanup_stale(PREFIX) {
            eprintln!("removing the namespaces of an earlier run: {e}");
        }
        let create = |role| Namespace::create(PREFIX, role).unwrap_or_else(|e| panic!("{e}"));
        let line = Line {
            a: create("a"),
            r: create("r"),
            b: create("b"),
        };
        let (a, r, b) = (line.a.name(), line.r.name(), line.b.name());
        let ip = |args: &[&str]| run("ip", args);
        ip(&[
            "-n", a, "link", "add", "a0", "type", "veth", "peer", "name", "ra", "netns", r,
        ]);
        ip(&[
            "-n", b, "link", "add", "b0", "type", "veth", "peer", "name", "rb", "netns", r,
        ]);
        ip(&["-n", a, "addr", "add", "10.231.1.1/24", "dev", "a0"]);
        ip(&["-n", r, "addr", "add", "10.231.1.2/24", "dev", "ra"]);
        ip(&["-n", r, "addr", "add", "10.231.2.2/24", "dev", "rb"]);
        ip(&["-n", b, "addr", "add", "10.231.2.1/24", "dev", "b0"]);
        for (ns, dev) in [(a, "a0"), (r, "ra"), (r, "rb"), (b, "b0")] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&[
                "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
            ]);
        }
        ip(&["-n", a, "route", "add", "default", "via", "10.231.1.2"]);
        ip(&["-n", b, "route", "add", "default", "via", "10.231.2.2"]);
        ip(&[
            "netns",
            "exec",
            r,
            "sh",
            "-c",
            "echo 1 > /proc/sys/net/ipv4/ip_forward",
        ]);
        line
    }

    /// The test bed's UDP echo on B's `ECHO_PORT`, with [`SOCKET_BUFFER`]-byte buffers;
    /// it stops when dropped.
    pub(crate) fn echo(&self) -> UdpEcho {
        let bind = SocketAddr::new(IpAddr::V4(B_ADDR), ECHO_PORT);
        UdpEcho::start_with_buffers(&self.b, bind, SOCKET_BUFFER)
            .unwrap_or_else(|e| panic!("echo: {e}"))
    }
}

/// What a probe run measured: per sequence number, the round trip if the echo came back.
#[derive(Debug)]
pub(crate) struct Probe {
    pub rtts: Vec<Option<Duration>>,
    pub elapsed: Duration,
}

/// How to probe.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProbeSpec {
    pub count: u32,
    /// Packets sent back to back every `interval`.
    pub burst: u32,
    pub interval: Duration,
    pub size: usize,
    /// How long to wait for echoes after the last send.
    pub grace: Duration,
}

impl Probe {
    /// Sends `spec.count` datagrams from A to the echo server and collects the echoes.
    /// `during` runs on the calling thread once the sending has finished (e.g. to stop an
    /// emulator) while echoes are still being collected.
    pub(crate) fn run(a: &Namespace, spec: ProbeSpec, during: impl FnOnce()) -> Probe {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = a.spawn_thread("emu-probe", move || {
            let sock = UdpSocket::bind((A_ADDR, 0)).expect("bind prober");
            big_buffers(&sock);
            sock.connect((B_ADDR, ECHO_PORT)).unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            let rsock = sock.try_clone().unwrap();
            let base = Instant::now();
            let sending = Arc::new(AtomicBool::new(true));
            let still = Arc::clone(&sending);
            let receiver = std::thread::spawn(move || {
                let mut rtts = vec![None; spec.count as usize];
                let mut buf = [0u8; 2048];
                let mut last_send_done: Option<Instant> = None;
                loop {
                    if let Ok(n) = rsock.recv(&mut buf) {
                        let now = base.elapsed();
                        if n >= 12 {
                            let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
                            let sent = u64::from_be_bytes(buf[4..12].try_into().unwrap());
                            if let Some(slot) = rtts.get_mut(seq as usize) {
                                *slot = Some(now.saturating_sub(Duration::from_nanos(sent)));
                            }
                        }
                    }
                    if !still.load(Ordering::Acquire) {
                        let t = *last_send_done.get_or_insert_with(Instant::now);
                        if t.elapsed() > spec.grace || rtts.iter().all(Option::is_some) {
                            break;
                        }
                    }
                }
                rtts
            });
            let mut buf = vec![0u8; spec.size.max(12)];
            let mut seq = 0u32;
            let mut round = 0u32;
            while seq < spec.count {
                let at = spec.interval * round;
                let left = at.saturating_sub(base.elapsed());
                if !left.is_zero() {
                    std::thread::sleep(left);
                }
                for _ in 0..spec.burst.min(spec.count - seq) {
                    buf[..4].copy_from_slice(&seq.to_be_bytes());
                    let sent = base.elapsed().as_nanos() as u64;
                    buf[4..12].copy_from_slice(&sent.to_be_bytes());
                    sock.send(&buf).expect("send probe");
                    seq += 1;
                }
                round += 1;
            }
            tx.send(()).unwrap();
            (receiver, sending, base)
        });
        let sender = spawned.unwrap_or_else(|e| panic!("prober: {e}"));
        rx.recv().expect("sender finished");
        during();
        let (receiver, sending, base) = sender.join().expect("sender").expect("enter A");
        sending.store(false, Ordering::Release);
        let rtts = receiver.join().expect("receiver");
        Probe {
            rtts,
            elapsed: base.elapsed(),
        }
    }

    pub(crate) fn received(&self) -> usize {
        self.rtts.iter().filter(|r| r.is_some()).count()
    }

    pub(crate) fn loss_rate(&self) -> f64 {
        1.0 - self.received() as f64 / self.rtts.len() as f64
    }

    /// Mean length of runs of consecutive lost sequence numbers.
    pub(crate) fn mean_loss_burst(&self) -> f64 {
        let (mut lost, mut bursts, mut prev) = (0usize, 0usize, false);
        for r in &self.rtts {
            let l = r.is_none();
            if l {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = l;
        }
        if bursts == 0 {
            0.0
        } else {
            lost as f64 / bursts as f64
        }
    }

    /// The `q` quantile (0..=1, nearest rank) of the measured round trips.
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        let mut v: Vec<Duration> = self.rtts.iter().flatten().copied().collect();
        v.sort();
        crate::traffic::quantile_sorted(&v, q).expect("no echo came back")
    }
}
