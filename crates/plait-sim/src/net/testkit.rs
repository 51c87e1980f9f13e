//! Test kit for the link tests: packet and config shorthands, a driver that runs a link
//! the way the simulator does (arrivals merged with the link's one timer, deliveries drained
//! when it fires), and constant-bit-rate load.

use std::time::Duration;

use plait_proto::Time;

use super::*;
use crate::packet::{Body, FlowId, Packet};
pub(super) fn pkt(flow: FlowId, size: u32) -> Packet {
    Packet {
        flow,
        size,
        body: Body::Udp,
    }
}

pub(super) fn cfg(rate_bps: f64, delay_ms: u64) -> LinkConfig {
    LinkConfig::new(rate_bps, Duration::from_millis(delay_ms))
}

pub(super) const MS: u64 = 1_000_000;

/// Drives `link` until `until`: at equal times the link's event goes first (its own
/// convention). Refused and pushed-out packets go to `on_drop`.
pub(super) fn run(
    link: &mut Link,
    arrivals: impl IntoIterator<Item = (Time, Packet)>,
    until: Time,
    mut on_delivery: impl FnMut(Time, Packet),
    mut on_drop: impl FnMut(Packet),
) {
    let mut arrivals = arrivals.into_iter().peekable();
    loop {
        let ta = arrivals.peek().map(|(t, _)| *t);
        let te = link.next_event();
        let now = match (ta, te) {
            (Some(a), Some(e)) => a.min(e),
            (a, e) => match a.or(e) {
                Some(t) => t,
                None => break,
            },
        };
        if now > until {
            break;
        }
        if te == Some(now) {
            while let Some(p) = link.poll_delivery(now) {
                on_delivery(now, p);
            }
        } else if let Some((t, p)) = arrivals.next() {
            if let Some((p, _)) = link.enqueue(t, p).into_dropped() {
                on_drop(p);
            }
            while let Some(d) = link.poll_dropped() {
                on_drop(d.packet);
            }
        }
    }
}

/// Constant-bit-rate arrivals of one flow from time zero.
pub(super) fn cbr(flow: FlowId, size: u32, rate_bps: f64, until_ns: u64) -> Vec<(Time, Packet)> {
    cbr_from(0, flow, size, rate_bps, until_ns)
}

/// Constant-bit-rate arrivals of one flow from `start_ns` (a phase, so that periodic flows
/// do not lock onto the link's service instants).
pub(super) fn cbr_from(
    start_ns: u64,
    flow: FlowId,
    size: u32,
    rate_bps: f64,
    until_ns: u64,
) -> Vec<(Time, Packet)> {
    let gap = (f64::from(size) * 8.0 * 1e9 / rate_bps) as u64;
    (0..until_ns.saturating_sub(start_ns) / gap)
        .map(|i| (Time::from_nanos(start_ns + i * gap), pkt(flow, size)))
        .collect()
}

/// Merges arrival lists by time (stable: earlier lists first at equal times).
pub(super) fn merge(mut lists: Vec<Vec<(Time, Packet)>>) -> Vec<(Time, Packet)> {
    let mut all: Vec<(Time, Packet)> = lists.drain(..).flatten().collect();
    all.sort_by_key(|(t, _)| *t);
    all
}

/// Bytes delivered and packets dropped per flow (flows 0..4).
pub(super) fn per_flow(
    link: &mut Link,
    arrivals: Vec<(Time, Packet)>,
    until: Time,
) -> ([u64; 4], [u64; 4]) {
    let (mut bytes, mut drops) = ([0u64; 4], [0u64; 4]);
    run(
        link,
        arrivals,
        until,
        |_, p| bytes[p.flow as usize] += u64::from(p.size),
        |p| drops[p.flow as usize] += 1,
    );
    (bytes, drops)
}
