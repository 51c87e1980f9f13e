//! A measured constant-rate UDP flow, the test-bed counterpart of plait-sim's `plait-cbr`
//! (scenarios/fec-cbr.toml): [`cbr_send`] sends numbered, timestamped datagrams at an
//! even pace, [`CbrSink`] counts them ([`CbrAccount`]): loss, duplicates, reordering and
//! one-way delay.
//!
//! Files: `wire.rs` (the datagram's header and the clock), `account.rs` (the receiver's
//! pure accounting), this file (the sockets).
//!
//! Pacing: the sender sleeps until each packet's planned time (`start + i × interval`,
//! interval = packet size × 8 / rate) and never spins, so it leaves the cores to the tunnel
//! daemons and the link emulators it shares them with; a wake-up that comes late sends at
//! once and the next times stay on the plan, so the mean rate is exact and a late wake-up
//! shows as a short burst, not as a lower rate. Each datagram carries its actual send time.
//!
//! Sizes: `packet_size` is the whole IP packet as the tunnel's TUN device sees it (IPv4 20
//! + UDP 8 + payload, as plait-sim's `cbr.packet_size`), and the rate counts those bytes.
//!
//! Invariants: every wait is bounded (the sender by its duration and the cancel flag, the
//! sink by its stop flag, polled every [`super::POLL`]); the sink never panics on what
//! arrives.

mod account;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use account::{CbrAccount, CbrArrival, CbrReport};
pub use wire::{CbrHeader, CbrWireError, HEADER_LEN, monotonic_ns};

use super::sink;
use super::udp::connected;
use crate::netns::Namespace;
use crate::worker::Worker;
use crate::{Result, TestbedError};

/// IPv4 and UDP headers.
const V4_HEADERS: usize = 28;
/// IPv6 and UDP headers.
const V6_HEADERS: usize = 48;
/// Largest IP packet the flow sends (the tunnel's MTU is below it anyway).
const MAX_PACKET: usize = 9000;

/// What to send.
#[derive(Clone, Debug)]
pub struct CbrOptions {
    /// IP packet size, bytes (headers included; see the module docs).
    pub packet_size: usize,
    /// Rate of those packets, bits per second.
    pub rate_bps: f64,
    /// How long to send.
    pub duration: Duration,
    /// Stops the sender early when set.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl CbrOptions {
    /// The gap between two packets.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(self.packet_size as f64 * 8.0 / self.rate_bps)
    }

    /// At least as many packets as a full run sends, at most 2 more (a bound for the
    /// sink's limit; floating-point rounding decides the last one).
    pub fn packets(&self) -> u64 {
        (self.duration.as_secs_f64() / self.interval().as_secs_f64()).ceil() as u64 + 1
    }

    fn validate(&self, dst: SocketAddr) -> Result<usize> {
        let headers = if dst.is_ipv4() {
            V4_HEADERS
        } else {
            V6_HEADERS
        };
        if !(headers + HEADER_LEN..=MAX_PACKET).contains(&self.packet_size) {
            return Err(TestbedError::Spec(format!(
                "CBR packet size {} must be {} to {MAX_PACKET} bytes",
                self.packet_size,
                headers + HEADER_LEN
            )));
        }
        if !(self.rate_bps.is_finite() && (1e3..=1e9).contains(&self.rate_bps)) {
            return Err(TestbedError::Spec(format!(
                "CBR rate {} bit/s must be 1 kbit/s to 1 Gbit/s",
                self.rate_bps
            )));
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return Err(TestbedError::Spec(format!(
                "CBR duration {:?} must be above 0 and at most an hour",
                self.duration
            )));
        }
        Ok(self.packet_size - headers)
    }
}

/// What [`cbr_send`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CbrSendReport {
    /// Datagrams handed to the socket: numbers `0..sent` (failed sends included: their
    /// numbers are used, and they count as lost).
    pub sent: u64,
    /// Sends that failed (ENOBUFS, an ICMP error reported on the socket, …).
    pub errors: u64,
    /// How long it sent.
    pub duration: Duration,
    /// The latest a packet left after its planned time (the pacing's worst wake-up).
    pub max_late: Duration,
}

/// Sends the flow from `ns` to `dst` for `opts.duration` (see the module docs).
pub fn cbr_send(ns: &Namespace, dst: SocketAddr, opts: &CbrOptions) -> Result<CbrSendReport> {
    let payload = opts.validate(dst)?;
    let interval = opts.interval();
    let opts = opts.clone();
    ns.run_in(move || -> Result<CbrSendReport> {
        let sock =
            connected(dst).map_err(|e| TestbedError::io(format!("UDP socket towards {dst}"), e))?;
        sock.set_write_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| TestbedError::io("setting a write timeout", e))?;
        let mut buf = vec![0u8; payload];
        let mut r = CbrSendReport {
            sent: 0,
            errors: 0,
            duration: Duration::ZERO,
            max_late: Duration::ZERO,
        };
        let start = Instant::now();
        let cancelled = || {
            opts.cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Acquire))
        };
        loop {
            // From the count, not by adding intervals: no drift from rounding.
            let planned = Duration::from_secs_f64(interval.as_secs_f64() * r.sent as f64);
            if planned >= opts.duration || cancelled() {
                break;
            }
            let at = start + planned;
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            } else {
                r.max_late = r.max_late.max(now - at);
            }
            let sent_ns =
                monotonic_ns().map_err(|e| TestbedError::io("reading CLOCK_MONOTONIC", e))?;
            CbrHeader {
                seq: r.sent,
                sent_ns,
            }
            .encode(&mut buf)
            .map_err(|e| TestbedError::Spec(e.to_string()))?;
            if sock.send(&buf).is_err() {
                r.errors += 1;
            }
            r.sent += 1;
        }
        r.duration = start.elapsed();
        Ok(r)
    })?
}

/// Receives the flow on a socket in a namespace until stopped.
#[derive(Debug)]
pub struct CbrSink {
    local: SocketAddr,
    /// Reads with a [`POLL`] timeout, checking its stop flag between reads.
    worker: Worker<Result<Result<CbrAccount>>>,
}

impl CbrSink {
    /// Binds `bind` in `ns` and starts counting numbers below `limit`.
    pub fn start(ns: &Namespace, bind: SocketAddr, limit: u64) -> Result<CbrSink> {
        let account = CbrAccount::new(limit);
        let r = sink::spawn(ns, "cbr-sink", "CBR sink", bind, account, |account, d| {
            let now = monotonic_ns().map_err(|e| TestbedError::io("reading CLOCK_MONOTONIC", e))?;
            account.on_datagram(d, now);
            Ok(())
        })?;
        Ok(CbrSink {
            local: r.local,
            worker: r.worker,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops receiving (within about [`POLL`]) and returns the accounting.
    pub fn stop(self) -> Result<CbrAccount> {
        let local = self.local;
        self.worker
            .stop()
            .map_err(|p| TestbedError::Thread(format!("CBR sink on {local}: {p}")))??
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(packet_size: usize, rate_bps: f64) -> CbrOptions {
        CbrOptions {
            packet_size,
            rate_bps,
            duration: Duration::from_secs(30),
            cancel: None,
        }
    }

    #[test]
    fn four_mbit_of_1200_byte_packets_is_one_every_2_4_ms() {
        let o = opts(1200, 4e6);
        assert_eq!(o.interval(), Duration::from_micros(2400));
        // Planned times 0, 2.4 ms, … below 30 s: 12 500 packets.
        assert!((12_500..=12_502).contains(&o.packets()), "{}", o.packets());
        let v4: SocketAddr = "10.0.0.1:9".parse().unwrap();
        assert_eq!(o.validate(v4).unwrap(), 1172);
    }

    #[test]
    fn impossible_options_are_refused() {
        let v4: SocketAddr = "10.0.0.1:9".parse().unwrap();
        let v6: SocketAddr = "[fd00::1]:9".parse().unwrap();
        assert!(opts(47, 4e6).validate(v4).is_err());
        assert!(opts(48, 4e6).validate(v4).is_ok());
        assert!(opts(48, 4e6).validate(v6).is_err());
        assert!(opts(1200, 0.0).validate(v4).is_err());
        assert!(opts(1200, f64::NAN).validate(v4).is_err());
        assert!(opts(100_000, 4e6).validate(v4).is_err());
        let zero = CbrOptions {
            duration: Duration::ZERO,
            ..opts(1200, 4e6)
        };
        assert!(zero.validate(v4).is_err());
    }

    #[test]
    fn a_paced_flow_over_loopback_arrives_in_full() {
        // No namespace (that needs root): the header, the socket helpers and the
        // accounting on loopback in the test's own namespace.
        let (sock, addr) = sink::bound("127.0.0.1:0".parse().unwrap()).unwrap();
        let tx = connected(addr).unwrap();
        let mut account = CbrAccount::new(100);
        let mut buf = [0u8; 64];
        for seq in 0..10 {
            CbrHeader {
                seq,
                sent_ns: monotonic_ns().unwrap(),
            }
            .encode(&mut buf)
            .unwrap();
            tx.send(&buf).unwrap();
            let mut rx = [0u8; 128];
            let n = sock.recv(&mut rx).unwrap();
            account.on_datagram(&rx[..n], monotonic_ns().unwrap());
        }
        let r = account.report(10);
        assert_eq!((r.received, r.lost, r.duplicates), (10, 0, 0));
        assert!(r.delay_min_ms.unwrap() >= 0.0);
    }
}
