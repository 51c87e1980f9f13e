//! Fuzz target: arbitrary datagrams into `plait recv`'s receiver and `plait send`'s report
//! handling (plait_fec::transfer, docs/fec.md "plait send and plait recv"). Checks: no panic
//! on any input (the receiver validates before `raptorq` sees a packet), at most WINDOW
//! chunks decoding and the stated symbol bound per decoder.
//!
//! Input: a sequence of datagrams, each a length byte then that many bytes. A datagram whose
//! first byte is odd gets a valid symbol prefix (transfer id, a chunk from its second byte)
//! so the fuzzer reaches the decoders without guessing the magic.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use plait_fec::transfer::wire::{self, Header, WINDOW};
use plait_fec::transfer::{RateLimits, Receiver, Sender};

const K: u16 = 16;
const T: u16 = 32;

fuzz_target!(|data: &[u8]| {
    let header = Header {
        transfer_id: 0x5eed,
        file_size: 40 * (K as u64) * (T as u64) - 7,
        k: K,
        symbol_size: T,
        sha256: [0; 32],
        name: "f".into(),
    };
    let source = vec![0u8; header.file_size as usize];
    let mut rx = Receiver::new();
    rx.begin(header.clone(), &[], Duration::ZERO);
    let mut tx = Sender::new(header, &source[..], RateLimits::default());
    let bound = WINDOW as usize * (K as usize + K as usize / 32 + 32);
    let mut rest = data;
    let mut now = Duration::ZERO;
    let mut buf = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let len = (len as usize).min(tail.len());
        let (d, tail) = tail.split_at(len);
        rest = tail;
        now += Duration::from_millis(1);
        if d.first().is_some_and(|b| b % 2 == 1) {
            let chunk = d.get(1).copied().unwrap_or(0) as u32 % 48;
            wire::encode_symbol_header(&mut buf, 0x5eed, 0, chunk);
            buf.extend_from_slice(&d[d.len().min(2)..]);
            let _ = rx.handle(now, &buf);
        } else {
            let _ = rx.handle(now, d);
            let _ = tx.handle(now, d);
        }
        assert!(rx.decoding() <= WINDOW as usize);
        assert!(rx.symbols_held() <= bound);
        let _ = rx.poll_report(now, &mut buf);
        let _ = tx.poll_transmit(now, &mut buf);
    }
});
