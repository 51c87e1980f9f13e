//! Kernel counters that say where a transfer lost packets: TCP retransmissions and UDP
//! buffer drops of a namespace (`/proc/net/snmp`, parsed by procfs) and the TUN devices'
//! drops.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use plait_testbed::Namespace;
use procfs::FromRead as _;
use procfs::net::Snmp;

use super::TUN;

/// `/proc/net/snmp` of `ns` (read there: the file shows the reader's namespace).
fn snmp(ns: &Namespace) -> Result<Snmp> {
    let out = ns.exec(["cat", "/proc/net/snmp"])?;
    Snmp::from_read(out.stdout.as_slice())
        .with_context(|| format!("parsing /proc/net/snmp of {}", ns.name()))
}

/// A kernel counter as the signed number the differences are taken in.
fn signed(counter: u64) -> i64 {
    i64::try_from(counter).unwrap_or(i64::MAX)
}

/// A number from the benchmark TUN device's /sys/class/net directory in `ns`.
pub(super) fn tun_attr(ns: &Namespace, attr: &str) -> Result<i64> {
    let file = format!("/sys/class/net/{TUN}/{attr}");
    let out = ns.exec(["cat", file.as_str()])?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .with_context(|| format!("{file} in {}: {text:?}", ns.name()))
}

/// Kernel counters of the namespaces a transfer crosses, at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Net {
    /// TCP segments sent by the sender's namespace.
    pub(super) tcp_out: i64,
    /// Of which retransmitted.
    pub(super) tcp_retrans: i64,
    /// UDP datagrams dropped for a full receive buffer (`RcvbufErrors`), summed over the
    /// namespaces that receive UDP.
    pub(super) udp_rcvbuf: i64,
    /// UDP sends refused for a full send buffer (`SndbufErrors`), same namespaces.
    pub(super) udp_sndbuf: i64,
    /// Packets the client's and the server's TUN device dropped because their queue was
    /// full (`tx_dropped`: the kernel had a packet for the daemon, and the daemon had not
    /// read the queue in time).
    pub(super) tun_drops: [i64; 2],
}

impl Net {
    /// Reads the counters: TCP of `sender`, UDP of `udp`, and the TUN devices of `tun`
    /// (the client's and the server's namespace) if given.
    pub(super) fn take(
        sender: &Namespace,
        udp: &[&Namespace],
        tun: Option<[&Namespace; 2]>,
    ) -> Result<Net> {
        let tcp = snmp(sender)?;
        let mut n = Net {
            tcp_out: signed(tcp.tcp_out_segs),
            tcp_retrans: signed(tcp.tcp_retrans_segs),
            ..Net::default()
        };
        for ns in udp {
            let m = snmp(ns)?;
            n.udp_rcvbuf += signed(m.udp_rcvbuf_errors);
            n.udp_sndbuf += signed(m.udp_sndbuf_errors);
        }
        for (i, ns) in tun.iter().flatten().enumerate() {
            n.tun_drops[i] = tun_attr(ns, "statistics/tx_dropped")?;
        }
        Ok(n)
    }

    /// `later − self`, counter by counter.
    pub(super) fn until(&self, later: &Net) -> Net {
        Net {
            tcp_out: later.tcp_out - self.tcp_out,
            tcp_retrans: later.tcp_retrans - self.tcp_retrans,
            udp_rcvbuf: later.udp_rcvbuf - self.udp_rcvbuf,
            udp_sndbuf: later.udp_sndbuf - self.udp_sndbuf,
            tun_drops: [
                later.tun_drops[0] - self.tun_drops[0],
                later.tun_drops[1] - self.tun_drops[1],
            ],
        }
    }

    /// Retransmitted share of the TCP segments sent, %.
    pub(super) fn retrans_pct(&self) -> f64 {
        self.tcp_retrans as f64 * 100.0 / self.tcp_out.max(1) as f64
    }

    /// The counters as a note.
    pub(super) fn describe(&self, tcp: &str) -> String {
        let mut s = format!(
            "{tcp} retransmitted {} of {} segments ({:.2} %)",
            self.tcp_retrans,
            self.tcp_out,
            self.retrans_pct()
        );
        if self.udp_rcvbuf > 0 || self.udp_sndbuf > 0 {
            let _ = write!(
                s,
                "; UDP buffers dropped {} received and refused {} sent datagrams",
                self.udp_rcvbuf, self.udp_sndbuf
            );
        }
        if self.tun_drops.iter().any(|&d| d > 0) {
            let _ = write!(
                s,
                "; TUN queues dropped {} (client) and {} (server) packets",
                self.tun_drops[0], self.tun_drops[1]
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernels_snmp_parses() {
        let text = std::fs::read("/proc/net/snmp").unwrap();
        let m = Snmp::from_read(text.as_slice()).unwrap();
        assert!(m.tcp_retrans_segs <= m.tcp_out_segs, "{m:?}");
    }

    #[test]
    fn counters_subtract() {
        let a = Net::default();
        let b = Net {
            tcp_out: 200,
            tcp_retrans: 3,
            ..Net::default()
        };
        assert!((a.until(&b).retrans_pct() - 1.5).abs() < 1e-9);
    }
}
