//! Robustness: decoding arbitrary bytes, frame-shaped bytes and mutated valid datagrams
//! never panics, ACK iterators stay in bounds, and `validate` agrees with `frames`.

use proptest::collection::vec;
use proptest::prelude::*;

use super::strategies::{datagram, encode_datagram};
use crate::ids::expand_seq;
use crate::wire::*;

/// Decodes `bytes` every way the session and the fuzz target do; must never panic.
fn exercise(bytes: &[u8]) {
    if let Ok((_, payload)) = Header::decode(bytes) {
        exercise_payload(payload);
    }
    exercise_payload(bytes);
}

fn exercise_payload(payload: &[u8]) {
    let mut ok = 0;
    let mut err = None;
    for frame in frames(payload) {
        match frame {
            Ok(Frame::Ack(ack)) => {
                ok += 1;
                let expected = u64::from(ack.largest());
                for largest_full in [
                    0,
                    1,
                    expected,
                    expand_seq(1 << 40, ack.largest()),
                    1 << 31,
                    u64::MAX,
                ] {
                    assert!(ack.ranges(largest_full).count() <= ack.range_count());
                    assert!(ack.timestamps(largest_full).count() <= ack.timestamp_count());
                    let mut prev_start = None;
                    for r in ack.ranges(largest_full) {
                        assert!(r.start() <= r.end() && *r.end() <= largest_full);
                        assert!(prev_start.is_none_or(|s| *r.end() < s));
                        prev_start = Some(*r.start());
                    }
                }
            }
            Ok(_) => ok += 1,
            Err(e) => err = Some(e),
        }
    }
    let want = match err {
        Some(e) => Err(e),
        None if payload.is_empty() => Err(DecodeError::Empty),
        None => Ok(ok),
    };
    assert_eq!(validate(payload), want);
}

/// Bytes biased toward defined frame types and small varints, to reach deep into frames.
fn wire_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(
        prop_oneof![2 => 0u8..8, 1 => 0x10u8..0x40, 3 => any::<u8>()],
        0..max,
    )
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..2000)) {
        exercise(&bytes);
    }

    #[test]
    fn frame_shaped_bytes_never_panic(bytes in wire_bytes(600)) {
        exercise(&bytes);
    }

    #[test]
    fn mutated_datagrams_never_panic(
        (h, frames_in) in datagram(),
        flips in vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = encode_datagram(&h, &frames_in);
        for (at, mask) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        exercise(&bytes);
    }
}
