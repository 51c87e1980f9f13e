//! LT (seed HMTP) beside RaptorQ (RFC 6330, the `raptorq` crate): decoding overhead and
//! encode / decode speed for k = 100, 1000 and 10,000 symbols of 1280 bytes, as a
//! markdown table for docs/fec.md. A quick measurement on one thread; the `codes` bench
//! measures the same operations with criterion.
//!
//! Run: `cargo run --release -p plait-fec --example codes_table`.
//!
//! Each trial sends one chunk's packets through a 10 % erasure channel (ChaCha8 draws)
//! until the decoder completes. Overhead = packets received / k. Encode time = building
//! the encoder from the source plus writing every packet sent; decode time = handling
//! every packet received; speed = k * 1280 source bytes over that time (median of trials).
//! LT uses the seed's §V-A parameters c = 0.057, delta = 0.03 at every k.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)] // an example may read a clock

use std::time::Instant;

use plait_fec::measure::{quantile, received_packets, source_bytes, transfer};
use plait_fec::{
    FountainDecoder, FountainEncoder, LtDecoder, LtEncoder, LtParams, RqDecoder, RqEncoder,
    RqParams,
};

const T: usize = 1280;
const LOSS: f64 = 0.1;

struct Row {
    received: Vec<usize>,
    encode_s: Vec<f64>,
    decode_s: Vec<f64>,
}

fn measure<E: FountainEncoder, D: FountainDecoder>(
    k: usize,
    trials: u64,
    make: impl Fn(u64, &[u8]) -> (E, D),
    make_encoder: impl Fn(u64, &[u8]) -> E,
    make_decoder: impl Fn(u64) -> D,
) -> Row {
    let mut row = Row {
        received: Vec::new(),
        encode_s: Vec::new(),
        decode_s: Vec::new(),
    };
    for trial in 0..trials {
        let source = source_bytes(k * T, trial);
        let (mut enc, mut dec) = make(trial, &source);
        let Some(t) = transfer(&mut enc, &mut dec, LOSS, trial, 4 * k) else {
            row.received.push(usize::MAX);
            continue;
        };
        assert_eq!(dec.source(), Some(&source[..]));
        row.received.push(t.received);
        // Timed again, separately: encode every packet sent, then decode those received.
        let start = Instant::now();
        let mut enc = make_encoder(trial, &source);
        let packets = received_packets(&mut enc, t.sent, LOSS, trial);
        row.encode_s.push(start.elapsed().as_secs_f64());
        let mut dec = make_decoder(trial);
        let start = Instant::now();
        for p in &packets {
            let _ = dec.handle_packet(p);
        }
        row.decode_s.push(start.elapsed().as_secs_f64());
        assert!(dec.is_complete());
    }
    row.received.sort_unstable();
    row.encode_s.sort_by(f64::total_cmp);
    row.decode_s.sort_by(f64::total_cmp);
    row
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn print(code: &str, k: usize, trials: u64, row: &Row) {
    let q = |x| quantile(&row.received, x).map_or(f64::NAN, |n| n as f64 / k as f64);
    let mean =
        row.received.iter().map(|&n| n as f64).sum::<f64>() / row.received.len() as f64 / k as f64;
    let at_k = row.received.iter().filter(|&&n| n <= k).count();
    let mb = (k * T) as f64 / 1e6;
    println!(
        "| {code} | {k} | {trials} | {:.3} | {mean:.3} | {:.3} | {:.3} | {at_k}/{} | {:.0} | {:.0} |",
        q(0.5),
        q(0.95),
        q(1.0),
        row.received.len(),
        mb / median(&row.encode_s),
        mb / median(&row.decode_s),
    );
}

fn main() {
    println!(
        "LT vs RaptorQ: symbols of {T} B, {:.0} % erasures, one thread.\n",
        LOSS * 100.0
    );
    println!(
        "| code | k | trials | overhead median | mean | p95 | max | decoded from k | encode MB/s | decode MB/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (k, trials) in [(100usize, 100u64), (1000, 30), (10_000, 5)] {
        let lt = |seed| LtParams {
            k,
            symbol_size: T,
            c: 0.057,
            delta: 0.03,
            chunk_seed: seed,
        };
        let row = measure(
            k,
            trials,
            |s, src| {
                (
                    LtEncoder::new(lt(s), src).unwrap(),
                    LtDecoder::new(lt(s)).unwrap(),
                )
            },
            |s, src| LtEncoder::new(lt(s), src).unwrap(),
            |s| LtDecoder::new(lt(s)).unwrap(),
        );
        print("LT", k, trials, &row);
        let rq = RqParams::new(k, T);
        let row = measure(
            k,
            trials,
            |_, src| {
                (
                    RqEncoder::new(rq, src).unwrap(),
                    RqDecoder::new(rq).unwrap(),
                )
            },
            |_, src| RqEncoder::new(rq, src).unwrap(),
            |_| RqDecoder::new(rq).unwrap(),
        );
        print("RaptorQ", k, trials, &row);
    }
    println!(
        "\n\"decoded from k\": trials whose decoder completed with exactly k packets received. RaptorQ's first use of a k builds an encoding plan (cached by the crate): the first trial of each k includes it in its encode time; the median hides it."
    );
}
