//! Per-packet cost of the engine path: schedule + encode at the sender, decode + duplicate
//! filter + reorder + delivery at the receiver, and the ACK feedback back to the sender,
//! over 3 paths, through the real `drive` loop (no encryption, no I/O).
//!
//! Run: `cargo bench -p plait-proto --bench engine`. Target: under 300 ns per
//! packet. Criterion reports time per packet as "time" with `Throughput::Elements`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plait_proto::path::PathHints;
use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use plait_proto::{Config, Delivery, Io, PathId, Session, Time, drive};

/// Forwards transmits into a queue for the other side; counts deliveries.
#[derive(Default)]
struct Wire {
    out: Vec<(PathId, Vec<u8>)>,
    free: Vec<Vec<u8>>,
    delivered: u64,
}

impl Io for Wire {
    fn transmit(&mut self, _now: Time, path: PathId, datagram: &[u8]) {
        let mut v = self.free.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(datagram);
        self.out.push((path, v));
    }
    fn deliver(&mut self, _now: Time, packet: &[u8], _info: &Delivery) {
        black_box(packet);
        self.delivered += 1;
    }
}

struct Bench {
    now: Time,
    a: Session,
    b: Session,
    wa: Wire,
    wb: Wire,
    buf: Vec<u8>,
    packet: Vec<u8>,
}

impl Bench {
    fn new(scheduler: SchedulerKind, packet_len: usize) -> Bench {
        let config = Config {
            scheduler,
            reorder: ReorderKind::Bmp,
            ..Config::default()
        };
        let mut a = Session::new(config.clone()).unwrap();
        let mut b = Session::new(config).unwrap();
        for p in 0..3 {
            let hints = PathHints {
                rate: Some([1.25e6, 6.25e5, 3.0e5][p]),
                one_way_delay: None,
            };
            a.add_path(Time::ZERO, PathId(p as u8), hints).unwrap();
            b.add_path(Time::ZERO, PathId(p as u8), hints).unwrap();
        }
        let mut bench = Bench {
            now: Time::ZERO,
            a,
            b,
            wa: Wire::default(),
            wb: Wire::default(),
            buf: vec![0; 2048],
            packet: vec![0x45; packet_len],
        };
        // Bring the paths up (probe exchanges) before measuring.
        for _ in 0..20 {
            bench.now += Duration::from_millis(5);
            bench.exchange();
        }
        bench
    }

    /// Drives both sides and carries every datagram across, until quiet.
    fn exchange(&mut self) {
        drive(&mut self.a, self.now, &mut self.wa, &mut self.buf);
        for _ in 0..8 {
            for (path, d) in std::mem::take(&mut self.wa.out) {
                let _ = self.b.handle_datagram(self.now, path, &d);
                self.wa.free.push(d);
            }
            drive(&mut self.b, self.now, &mut self.wb, &mut self.buf);
            for (path, d) in std::mem::take(&mut self.wb.out) {
                let _ = self.a.handle_datagram(self.now, path, &d);
                self.wb.free.push(d);
            }
            drive(&mut self.a, self.now, &mut self.wa, &mut self.buf);
            if self.wa.out.is_empty() {
                break;
            }
        }
    }

    /// `batch` inner packets end to end, carried as the daemon will: a batch of reads,
    /// then one drive per side (recvmmsg/sendmmsg batches).
    fn packets(&mut self, batch: u32) {
        for _ in 0..batch {
            self.now += Duration::from_micros(10);
            let _ = self.a.handle_inner_packet(self.now, &self.packet);
        }
        self.exchange();
    }
}

fn engine(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine_per_packet_3_paths");
    group.measurement_time(Duration::from_secs(5));
    // 1200-byte packets show the real cost; 100-byte ones separate per-packet logic from
    // the payload copies (into the send queue, the datagram, the reorder buffer, out).
    for (batch, len) in [(1u32, 1200usize), (32, 1200), (32, 100)] {
        group.throughput(Throughput::Elements(u64::from(batch)));
        for scheduler in [SchedulerKind::Edpf, SchedulerKind::RoundRobin] {
            let mut bench = Bench::new(scheduler, len);
            let name = format!("{}/batch{batch}/{len}B", scheduler.name());
            group.bench_function(name, |b| b.iter(|| bench.packets(batch)));
        }
    }
    group.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
