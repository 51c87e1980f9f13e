//! TCP models with ns-2 parity (shared/REFERENCES.md, "ns-2 defaults"): a NewReno sender
//! ([`NewRenoSender`], ns-2 `Agent/TCP/Newreno`) and a receiver ([`TcpSink`], ns-2
//! `Agent/TCPSink` and `Agent/TCPSink/DelAck`), plus their parameters ([`TcpConfig`]).
//!
//! Both are sans-IO state machines: the simulator feeds them arrivals and timer expiries at
//! a given [`plait_proto::Time`], then drains what they want to send (`poll_send`,
//! `poll_ack`) at that same instant, and asks when their timers fire (`next_timeout`).
//! They read no clock, use no randomness and no hash maps: the same inputs give the same
//! outputs.
//!
//! Conventions (ns-2 one-way TCP): sequence numbers count packets, from 0; packet 0 is a
//! 40-byte SYN when [`TcpConfig::syn`] is set (ns-2's default), so data packets are then
//! 1..=n; each data packet carries [`TcpConfig::packet_size`] payload bytes plus the
//! 40-byte [`crate::packet::TCP_HEADER`] on the wire; ACKs are cumulative (the next expected
//! packet) and 40 bytes.
//!
//! Parameters: those REFERENCES.md fixes (window_ 20, windowInit_ 2, maxburst_ 0,
//! packetSize_ 1000, numdupacks_ 3, tcpTick_ 10 ms, minrto_ 1 s, initial RTO 6 s) and the
//! brief's max RTO of 64 s are the defaults; everything else follows ns-2.35's
//! ns-default.tcl (see the sender's and the RTT estimator's docs). ns-2.35 itself ships
//! minrto_ 0.2 s, rtxcur_init_ 3 s and maxrto_ 60 s: set those fields to reproduce a paper
//! that used them.

use std::time::Duration;

mod rtt;
mod sender;
mod sink;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod scenarios;

pub use rtt::RttEstimator;
pub use sender::{NewRenoSender, TcpSenderStats};
pub use sink::{DEFAULT_DELACK_INTERVAL, TcpSink, TcpSinkStats};

/// The sender's parameters (ns-2 `Agent/TCP` bound variables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// `window_`: cap on the effective window in packets (20; PET-BMP uses 50). Also the
    /// initial ssthresh, as in ns-2.
    pub window: u32,
    /// `windowInit_`: cwnd once the SYN is acknowledged (or from the start without SYN).
    pub window_init: u32,
    /// `maxburst_`: most packets sent in response to one ACK or timeout; 0 = unlimited.
    pub max_burst: u32,
    /// `packetSize_`: payload bytes per data packet.
    pub packet_size: u32,
    /// `numdupacks_`: duplicate ACKs that trigger a fast retransmit.
    pub dupthresh: u32,
    /// `minrto_`: floor of the retransmission timeout (before backoff).
    pub min_rto: Duration,
    /// `rtxcur_init_`: the retransmission timeout before any RTT sample.
    pub initial_rto: Duration,
    /// `tcpTick_`: granularity of RTT samples and of the RTO.
    pub tick: Duration,
    /// `maxrto_`: cap of the (backed-off) retransmission timeout.
    pub max_rto: Duration,
    /// `None`: an infinite FTP source; `Some(n)`: stop once n data packets are acknowledged.
    pub total_packets: Option<u64>,
    /// `syn_`: model the connection set-up as ns-2 does (packet 0 is a header-only SYN and
    /// cwnd is 1 until it is acknowledged). ns-2 default: true.
    pub syn: bool,
    /// `singledup_`: limited transmit (RFC 3042) on the first dupthresh-1 duplicate ACKs.
    /// ns-2 default: true.
    pub limited_transmit: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            window: 20,
            window_init: 2,
            max_burst: 0,
            packet_size: 1000,
            dupthresh: 3,
            min_rto: Duration::from_secs(1),
            initial_rto: Duration::from_secs(6),
            tick: Duration::from_millis(10),
            max_rto: Duration::from_secs(64),
            total_packets: None,
            syn: true,
            limited_transmit: true,
        }
    }
}
