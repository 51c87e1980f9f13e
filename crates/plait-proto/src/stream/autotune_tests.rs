//! Window auto-tuning through the stream table (docs/protocol.md#window-auto-tuning): two
//! tables joined by a toy two-path link in virtual time, where every `slow_every`-th
//! datagram takes a slow path. The receiver's SRTT is the fast path's, as in the simulator's
//! ETOM Fig. 4 runs; only the measured resequencing delay tells it the window is short.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::wire::{Frame, frames};

const MS: Duration = Duration::from_millis(1);

fn limits() -> StreamLimits {
    StreamLimits {
        max_concurrent: 4,
        initial_stream_window: 16 << 10,
        max_stream_window: 256 << 10,
        initial_session_window: 64 << 10,
        max_session_window: 1 << 20,
        stream_send_buffer: 1 << 20,
        session_send_buffer: 1 << 20,
    }
}

/// What one run shows at the receiver.
struct Outcome {
    read: u64,
    stats: StreamStats,
    largest_window: u64,
}

/// Sends one datagram every `gap` for `secs` seconds (within the windows); the fast path
/// takes 10 ms, the slow one `slow` (every `slow_every`-th datagram, if any). The reader
/// reads at most `read_per_ms` bytes per millisecond; it believes every path's RTT is
/// `rtt`.
fn run(
    gap: Duration,
    slow_every: Option<u64>,
    slow: Duration,
    read_per_ms: usize,
    rtt: Duration,
    secs: u64,
) -> Outcome {
    let mut a = Streams::new(Side::Client, limits());
    let mut b = Streams::new(Side::Server, limits());
    let id = a.open(b"").unwrap();
    // Arrival time (ns, then sequence) -> datagram bytes, per direction.
    let mut to_b: BTreeMap<(u64, u64), Vec<u8>> = BTreeMap::new();
    let mut to_a: BTreeMap<(u64, u64), Vec<u8>> = BTreeMap::new();
    let (mut seq, mut next_send) = (0u64, 0u64);
    let mut read = 0;
    let mut buf = vec![0u8; 64 << 10];
    let fill = vec![7u8; 64 << 10];
    for ms in 0..secs * 1000 {
        let now_ns = ms * 1_000_000;
        let now = Time::from_nanos(now_ns);
        while a.write(id, &fill).unwrap_or(0) > 0 {}
        while next_send <= now_ns {
            let mut dgram = [0u8; 1200];
            let mut w = Writer::new(&mut dgram);
            let mut sent = Vec::new();
            a.write_frames(&mut w, true, &mut sent);
            if sent.is_empty() {
                break;
            }
            let len = w.len();
            a.on_datagram_sent(PathId(0), seq, sent);
            // Acknowledged at once: this test is about the receiver's windows.
            a.on_datagram_acked(PathId(0), seq);
            let delay = match slow_every {
                Some(k) if seq % k == k - 1 => slow,
                _ => 10 * MS,
            };
            to_b.insert(
                (now_ns + delay.as_nanos() as u64, seq),
                dgram[..len].to_vec(),
            );
            seq += 1;
            next_send += gap.as_nanos() as u64;
        }
        while let Some(entry) = to_b.first_entry() {
            if entry.key().0 > now_ns {
                break;
            }
            for f in frames(&entry.remove()) {
                if let Ok(Frame::Stream(f)) = f {
                    b.on_stream_frame(now, &f).expect("within the windows");
                }
            }
        }
        while let Some(entry) = to_a.first_entry() {
            if entry.key().0 > now_ns {
                break;
            }
            for f in frames(&entry.remove()) {
                match f {
                    Ok(Frame::MaxData(m)) => a.on_max_data(m),
                    Ok(Frame::MaxStreamData(f)) => a.on_max_stream_data(&f).unwrap(),
                    _ => {}
                }
            }
        }
        let mut budget = read_per_ms;
        while budget > 0 {
            let want = budget.min(buf.len());
            // Unknown until its first bytes arrive.
            let Ok(r) = b.read(now, id, &mut buf[..want], PathRtts::uniform(rtt)) else {
                break;
            };
            if r.len == 0 {
                break;
            }
            budget -= r.len;
            read += r.len as u64;
        }
        if b.has_control_due() {
            let mut dgram = [0u8; 1200];
            let mut w = Writer::new(&mut dgram);
            let mut sent = Vec::new();
            b.write_frames(&mut w, false, &mut sent);
            let len = w.len();
            to_a.insert(
                (now_ns + 10 * MS.as_nanos() as u64, seq),
                dgram[..len].to_vec(),
            );
            seq += 1;
        }
    }
    Outcome {
        read,
        stats: b.stats(),
        largest_window: b.flow_control().largest_stream_window,
    }
}

#[test]
fn holes_held_by_a_slow_path_let_the_window_grow() {
    // 1200-byte datagrams every 0.5 ms (about 19 Mbit/s offered), one in 8 over a path
    // 300 ms slower; the receiver's SRTT is the fast path's 20 ms.
    let gap = Duration::from_micros(500);
    let reordered = run(gap, Some(8), 310 * MS, usize::MAX, 20 * MS, 6);
    assert!(reordered.stats.resequencing_samples > 0);
    let delay = Duration::from_micros(reordered.stats.resequencing_us);
    assert!(delay > 150 * MS && delay < 320 * MS, "{delay:?}");
    assert!(reordered.stats.stream_window_raises > 0);
    // 16 KiB per 330 ms would be 0.4 Mbit/s: the grown window carries far more.
    let mbit = reordered.read as f64 * 8.0 / 6.0 / 1e6;
    assert!(
        mbit > 4.0,
        "{mbit:.1} Mbit/s, window {}",
        reordered.largest_window
    );
    // The rule without the resequencing delay (the receiver's SRTT alone) stays small.
    let same_rtt_only = super::autotune::tuned_window(
        16 << 10,
        256 << 10,
        Some(Time::ZERO),
        Time::from_millis(330 / 2),
        20 * MS,
    );
    assert_eq!(same_rtt_only, 16 << 10);
}

#[test]
fn bytes_in_order_take_no_resequencing_samples() {
    let in_order = run(
        Duration::from_micros(500),
        None,
        10 * MS,
        usize::MAX,
        20 * MS,
        2,
    );
    assert_eq!(in_order.stats.resequencing_samples, 0);
    assert_eq!(in_order.stats.resequencing_us, 0);
}

#[test]
fn a_slow_reader_keeps_a_small_window_despite_holes() {
    // Holes as above, but the reader takes 8 bytes per ms (64 kbit/s): half of even the
    // initial window takes a second to read, far more than two loop times (about 0.6 s).
    let slow = run(Duration::from_micros(500), Some(8), 310 * MS, 8, 20 * MS, 6);
    assert_eq!(slow.stats.stream_window_raises, 0);
    assert_eq!(slow.largest_window, 16 << 10);
    // What it holds stays within its window.
    assert!(slow.read <= 6 * 8 * 1000);
}
