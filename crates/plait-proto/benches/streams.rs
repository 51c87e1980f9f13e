//! Cost of stream bytes end to end: the application's write, STREAM frames into datagrams
//! on the path with window room, decode and reassembly at the receiver, the read, and the
//! per-path ACKs that free the sender's buffer, over 3 paths through the real `drive` loop
//! (no encryption, no I/O; the paths have no delay, so windows never limit).
//!
//! `stream_per_chunk_idle_streams` is the same with 10,000 open idle streams beside the busy
//! one (the tunnel holds one stream per relayed TCP connection, most of them idle): the
//! per-chunk cost must not grow with the idle streams. The busy stream has the highest id,
//! the worst place for a scan over the stream table.
//!
//! Run: `cargo bench -p plait-proto --bench streams`. Criterion reports the time per
//! 1200-byte chunk as "time" with `Throughput::Elements`, and bytes per second with
//! `Throughput::Bytes`.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plait_proto::{Config, StreamId};

use support::Bench;

mod support;

const CHUNK: usize = 1200;

/// `batch` chunks written at `a`, carried across, read at `b`.
fn chunks(bench: &mut Bench, id: StreamId, batch: u32, read_buf: &mut [u8]) -> u64 {
    for _ in 0..batch {
        bench.now += Duration::from_micros(10);
        let _ = bench.a.stream_write(bench.now, id, &bench.packet);
    }
    bench.exchange();
    let mut got = 0;
    while let Ok(r) = bench.b.stream_read(bench.now, id, read_buf) {
        if r.len == 0 {
            break;
        }
        got += r.len as u64;
    }
    bench.exchange();
    got
}

fn streams(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_per_chunk_3_paths");
    group.measurement_time(Duration::from_secs(5));
    for batch in [1u32, 32] {
        let mut bench = Bench::new(Config::default(), CHUNK);
        let id = bench.a.open_stream(bench.now, b"bench").unwrap();
        bench.exchange();
        let mut read_buf = vec![0u8; 64 << 10];
        // Warm up: open the stream at b and grow the windows; every byte written arrives.
        let read: u64 = (0..200)
            .map(|_| chunks(&mut bench, id, 32, &mut read_buf))
            .sum();
        assert_eq!(
            read,
            200 * 32 * CHUNK as u64,
            "the warm-up lost or held bytes"
        );
        group.throughput(Throughput::Elements(u64::from(batch)));
        group.bench_function(format!("newreno/batch{batch}/{CHUNK}B"), |b| {
            b.iter(|| chunks(&mut bench, id, batch, &mut read_buf))
        });
    }
    group.finish();
}

/// Open idle streams beside the busy one.
const IDLE: usize = 10_000;

fn idle_streams(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_per_chunk_idle_streams");
    group.measurement_time(Duration::from_secs(5));
    let mut config = Config::default();
    config.streams.max_concurrent = 16_384;
    let mut bench = Bench::new(config, CHUNK);
    for i in 0..IDLE {
        bench.now += Duration::from_micros(1);
        bench
            .a
            .open_stream(bench.now, format!("idle {i}").as_bytes())
            .unwrap();
        if i % 64 == 63 {
            bench.exchange();
        }
    }
    let id = bench.a.open_stream(bench.now, b"bench").unwrap();
    for _ in 0..20 {
        bench.now += Duration::from_millis(1);
        bench.exchange();
    }
    assert_eq!(bench.a.stream_stats().open, IDLE as u64 + 1);
    assert_eq!(bench.b.stream_stats().opened_remote, IDLE as u64 + 1);
    assert_eq!(
        bench.a.stream_buffered().0,
        0,
        "the open requests are acknowledged"
    );
    let mut read_buf = vec![0u8; 64 << 10];
    let read: u64 = (0..200)
        .map(|_| chunks(&mut bench, id, 32, &mut read_buf))
        .sum();
    assert_eq!(
        read,
        200 * 32 * CHUNK as u64,
        "the warm-up lost or held bytes"
    );
    let batch = 32u32;
    group.throughput(Throughput::Elements(u64::from(batch)));
    group.bench_function(format!("newreno/{IDLE}_idle/batch{batch}/{CHUNK}B"), |b| {
        b.iter(|| chunks(&mut bench, id, batch, &mut read_buf))
    });
    group.finish();
}

criterion_group!(benches, streams, idle_streams);
criterion_main!(benches);
