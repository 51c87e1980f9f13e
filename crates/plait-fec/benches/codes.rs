//! LT (seed HMTP, c = 0.057, delta = 0.03) beside RaptorQ (RFC 6330, the `raptorq` crate):
//! encode and decode speed for k = 100, 1000 and 10,000 symbols of 1280 bytes, and the
//! decoding overhead (packets received over k, printed before the timings).
//!
//! Run: `cargo bench -p plait-fec --bench codes`. Criterion reports throughput in source
//! bytes (k * 1280) per second. Every chunk goes through a 10 % erasure channel (ChaCha8
//! draws, fixed seed): "encode" builds the encoder and writes every packet sent until the
//! reference decoder completed; "decode" builds a decoder and handles every packet received.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use plait_fec::measure::{quantile, received_packets, source_bytes, transfer};
use plait_fec::{
    FountainDecoder, FountainEncoder, LtDecoder, LtEncoder, LtParams, RqDecoder, RqEncoder,
    RqParams,
};

const T: usize = 1280;
const LOSS: f64 = 0.1;
const KS: [usize; 3] = [100, 1000, 10_000];

fn lt(k: usize, seed: u64) -> LtParams {
    LtParams {
        k,
        symbol_size: T,
        c: 0.057,
        delta: 0.03,
        chunk_seed: seed,
    }
}

/// Packets sent until a decoder completed, for chunk seed 0.
fn sent<E: FountainEncoder, D: FountainDecoder>(mut enc: E, mut dec: D, k: usize) -> usize {
    transfer(&mut enc, &mut dec, LOSS, 0, 4 * k)
        .expect("decodes")
        .sent
}

fn overhead() {
    println!(
        "overhead (packets received / k, {:.0} % erasures):",
        LOSS * 100.0
    );
    for k in KS {
        let trials = if k >= 10_000 { 4 } else { 40 };
        let (mut l, mut r) = (Vec::new(), Vec::new());
        for s in 0..trials {
            let src = source_bytes(k * T, s);
            let (mut e, mut d) = (
                LtEncoder::new(lt(k, s), &src).unwrap(),
                LtDecoder::new(lt(k, s)).unwrap(),
            );
            l.push(transfer(&mut e, &mut d, LOSS, s, 4 * k).map_or(usize::MAX, |t| t.received));
            let p = RqParams::new(k, T);
            let (mut e, mut d) = (RqEncoder::new(p, &src).unwrap(), RqDecoder::new(p).unwrap());
            r.push(transfer(&mut e, &mut d, LOSS, s, 4 * k).map_or(usize::MAX, |t| t.received));
        }
        l.sort_unstable();
        r.sort_unstable();
        let ratio = |v: &[usize], q| quantile(v, q).map_or(f64::NAN, |n| n as f64 / k as f64);
        println!(
            "  k = {k:>5} ({trials} trials): LT median {:.3} max {:.3}; RaptorQ median {:.4} max {:.4}",
            ratio(&l, 0.5),
            ratio(&l, 1.0),
            ratio(&r, 0.5),
            ratio(&r, 1.0)
        );
    }
}

fn codes(c: &mut Criterion) {
    overhead();
    let mut group = c.benchmark_group("fountain_1280B");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for k in KS {
        group.throughput(Throughput::Bytes((k * T) as u64));
        let src = source_bytes(k * T, 0);

        let lt_sent = sent(
            LtEncoder::new(lt(k, 0), &src).unwrap(),
            LtDecoder::new(lt(k, 0)).unwrap(),
            k,
        );
        group.bench_with_input(BenchmarkId::new("lt_encode", k), &k, |b, &k| {
            b.iter(|| {
                let mut e = LtEncoder::new(lt(k, 0), &src).unwrap();
                black_box(received_packets(&mut e, lt_sent, LOSS, 0))
            })
        });
        let packets = received_packets(
            &mut LtEncoder::new(lt(k, 0), &src).unwrap(),
            lt_sent,
            LOSS,
            0,
        );
        group.bench_with_input(BenchmarkId::new("lt_decode", k), &k, |b, &k| {
            b.iter(|| {
                let mut d = LtDecoder::new(lt(k, 0)).unwrap();
                for p in &packets {
                    let _ = d.handle_packet(p);
                }
                assert!(d.is_complete());
            })
        });

        let p = RqParams::new(k, T);
        let rq_sent = sent(
            RqEncoder::new(p, &src).unwrap(),
            RqDecoder::new(p).unwrap(),
            k,
        );
        group.bench_with_input(BenchmarkId::new("rq_encode", k), &k, |b, _| {
            b.iter(|| {
                let mut e = RqEncoder::new(p, &src).unwrap();
                black_box(received_packets(&mut e, rq_sent, LOSS, 0))
            })
        });
        let packets = received_packets(&mut RqEncoder::new(p, &src).unwrap(), rq_sent, LOSS, 0);
        group.bench_with_input(BenchmarkId::new("rq_decode", k), &k, |b, _| {
            b.iter(|| {
                let mut d = RqDecoder::new(p).unwrap();
                for pk in &packets {
                    let _ = d.handle_packet(pk);
                }
                assert!(d.is_complete());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, codes);
criterion_main!(benches);
