//! Raw UDP: a sender as fast as the kernel takes datagrams ([`udp_blast`]), a counting sink
//! ([`UdpSink`]) and an echo for round-trip probes ([`UdpEcho`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{BIND_TIMEOUT, POLL, mbit, sink};
use crate::netns::Namespace;
use crate::worker::Worker;
use crate::{Result, TestbedError};

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

/// A UDP socket on an ephemeral port of `dst`'s family, connected to `dst`.
pub(super) fn connected(dst: SocketAddr) -> std::io::Result<UdpSocket> {
    let any: IpAddr = if dst.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let sock = UdpSocket::bind((any, 0))?;
    sock.connect(dst)?;
    Ok(sock)
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
        let sock =
            connected(dst).map_err(|e| TestbedError::io(format!("UDP socket towards {dst}"), e))?;
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
        let started = Instant::now();
        let empty = UdpReport {
            datagrams: 0,
            bytes: 0,
            first: None,
            last: None,
        };
        let r = sink::spawn(ns, "udp-sink", "UDP sink", bind, empty, move |r, d| {
            let at = started.elapsed();
            r.first.get_or_insert(at);
            r.last = Some(at);
            r.datagrams += 1;
            r.bytes += d.len() as u64;
            Ok(())
        })?;
        Ok(UdpSink {
            local: r.local,
            worker: r.worker,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_report_computes_goodput() {
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
