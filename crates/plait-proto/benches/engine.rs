//! Per-packet cost of the engine path: schedule + encode at the sender, decode + duplicate
//! filter + reorder + delivery at the receiver, and the ACK feedback back to the sender,
//! over 3 paths, through the real `drive` loop (no encryption, no I/O).
//!
//! Run: `cargo bench -p plait-proto --bench engine`. Target: under 300 ns per
//! packet. Criterion reports time per packet as "time" with `Throughput::Elements`.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plait_proto::Config;
use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;

use support::Bench;

mod support;

/// `batch` inner packets end to end, carried as the daemon will: a batch of reads, then
/// one drive per side (recvmmsg/sendmmsg batches).
fn packets(bench: &mut Bench, batch: u32) {
    for _ in 0..batch {
        bench.now += Duration::from_micros(10);
        let _ = bench.a.handle_inner_packet(bench.now, &bench.packet);
    }
    bench.exchange();
}

fn engine(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine_per_packet_3_paths");
    group.measurement_time(Duration::from_secs(5));
    // 1200-byte packets show the real cost; 100-byte ones separate per-packet logic from
    // the payload copies (into the send queue, the datagram, the reorder buffer, out).
    for (batch, len) in [(1u32, 1200usize), (32, 1200), (32, 100)] {
        group.throughput(Throughput::Elements(u64::from(batch)));
        for scheduler in [SchedulerKind::Edpf, SchedulerKind::RoundRobin] {
            let config = Config {
                scheduler,
                reorder: ReorderKind::Bmp,
                ..Config::default()
            };
            let mut bench = Bench::new(config, len);
            let name = format!("{}/batch{batch}/{len}B", scheduler.name());
            group.bench_function(name, |b| b.iter(|| packets(&mut bench, batch)));
        }
    }
    // Quality-driven handover judges every path at each scheduling decision
    // (docs/protocol.md#handover): its cost beside the same run without it.
    for handover in [false, true] {
        group.throughput(Throughput::Elements(32));
        let mut config = Config {
            scheduler: SchedulerKind::Edpf,
            reorder: ReorderKind::Bmp,
            ..Config::default()
        };
        config.handover.enabled = handover;
        let mut bench = Bench::new(config, 100);
        let name = format!("edpf/handover-{handover}/batch32/100B");
        group.bench_function(name, |b| b.iter(|| packets(&mut bench, 32)));
    }
    group.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
