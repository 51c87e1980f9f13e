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
//! counters from inside a namespace (`/proc/thread-self/net/dev`, parsed by procfs) every
//! sample interval.
//!
//! [`cbr_send`] → [`CbrSink`] measure a constant-rate UDP flow's loss, duplicates,
//! reordering and one-way delay (numbered, timestamped datagrams; `cbr/`).
//!
//! Files: `payload.rs` (the payload stream and its digests), `tcp.rs` (the one TCP
//! sender and its options), `tcp_sink.rs` (the TCP sink and its goodput windows), `udp.rs`
//! (UDP sender, sink and echo), `rtt.rs` (the RTT prober), `counters.rs` (interface
//! counters); this file holds what they share and [`quantile_sorted`], the test bed's one
//! quantile helper.
//!
//! Invariants:
//! - Every socket is opened on a thread that has entered the namespace
//!   ([`crate::Namespace::run_in`], [`crate::Namespace::spawn_thread`]), so it lives there.
//! - Every wait is bounded: connect, accept, each stalled read or write, the whole transfer
//!   ([`TcpOptions`]), and waiting for a sink's report. A broken tunnel makes these return a
//!   [`crate::TestbedError::Timeout`] or an I/O error instead of hanging a test.
//! - A sink's worker thread stops within about one sample interval after the sink is
//!   dropped, whatever it is waiting for.
//! - Goodput samples are the bytes received in consecutive [`SAMPLE_INTERVAL`] windows
//!   counted from the accept, including empty windows, so stalls are visible.

mod cbr;
mod counters;
mod payload;
mod rtt;
mod sink;
mod tcp;
mod tcp_sink;
mod udp;

use std::io::ErrorKind;
use std::time::Duration;

pub use cbr::{
    CbrAccount, CbrArrival, CbrHeader, CbrOptions, CbrReport, CbrSendReport, CbrSink, CbrWireError,
    cbr_send, monotonic_ns,
};
pub use counters::{CounterSample, CounterSampler};
pub use payload::{Digest, hex, payload_block, payload_sha256};
pub use rtt::{ProbeReport, RttProbe, RttSample};
pub use tcp::{
    IPPROTO_MPTCP, SendLimit, SendOptions, SendReport, StreamProto, TcpOptions, tcp_send,
    tcp_send_opts, tcp_send_with,
};
pub use tcp_sink::{GoodputSample, Sampler, SinkReport, TcpSink};
pub use udp::{UdpBlastReport, UdpEcho, UdpReport, UdpSink, udp_blast};

/// Width of a goodput sample window.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Size of one payload block, bytes (the unit of [`payload_block`]).
pub const BLOCK: usize = 64 * 1024;
/// How long [`TcpSink::start`] and [`UdpSink::start`] wait for their socket to be bound.
const BIND_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a blocked sink thread checks whether it should stop.
const POLL: Duration = Duration::from_millis(50);

/// `bytes` over `over` in Mbit/s (0 for an empty interval).
fn mbit(bytes: u64, over: Duration) -> f64 {
    let s = over.as_secs_f64();
    if s <= 0.0 {
        0.0
    } else {
        bytes as f64 * 8.0 / s / 1e6
    }
}

/// Whether an I/O error only means "nothing yet" (a timeout or an interrupted call).
fn is_wait(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// The `q`-quantile of `sorted` (ascending) by nearest rank: the smallest value with at
/// least a share `q` of the values at or below it, so the answer is always one of the
/// values (no interpolation). `q` is clamped to 0..=1 (0 gives the minimum, 1 the maximum);
/// a NaN or infinite `q` counts as 0.5, the median (the lower middle value of an even
/// count). `None` only for no values.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(quantile_sorted(&v, 0.5), Some(5));
        assert_eq!(quantile_sorted(&v, 0.99), Some(10));
        assert_eq!(quantile_sorted(&v, 0.0), Some(1));
        assert_eq!(quantile_sorted::<u32>(&[], 0.5), None);
        assert_eq!(quantile_sorted(&v, f64::NAN), Some(5));
    }
}
