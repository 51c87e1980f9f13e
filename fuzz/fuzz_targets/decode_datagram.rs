//! Fuzz target: decode arbitrary bytes as a plait datagram (docs/protocol.md#header,
//! docs/protocol.md#frames) the way the session does, and check the decoder's promises:
//! no panic on any input, `validate` agrees with iterating `frames`, ACK iterators stay
//! within what the frame holds and never yield a range above `largest_full` or out of order,
//! a STREAM frame's data ends at most at 2^62 - 1, and an FEC_REPAIR body either gets a
//! typed error or is well formed and goes through a receiver's FEC store without a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use plait_proto::ids::expand_seq;
use plait_proto::wire::{self, AckFrame, DecodeError, Frame, Header};

fuzz_target!(|data: &[u8]| {
    if let Ok((_header, payload)) = Header::decode(data) {
        decode_payload(payload);
    }
    // Also treat the input as a bare payload, so the fuzzer need not find a valid header
    // before it reaches the frame decoders.
    decode_payload(data);
});

fn decode_payload(payload: &[u8]) {
    let mut frames = 0usize;
    let mut error = None;
    for frame in wire::frames(payload) {
        match frame {
            Ok(frame) => {
                frames += 1;
                match frame {
                    Frame::Ack(ack) => check_ack(&ack),
                    // A decoded STREAM frame ends within the varint range
                    // (docs/protocol.md#stream-frame).
                    Frame::Stream(s) => assert!(
                        s.offset
                            .checked_add(s.data.len() as u64)
                            .is_some_and(|end| end <= wire::MAX_STREAM_OFFSET)
                    ),
                    Frame::Extension {
                        frame_type: wire::frame_type::FEC_REPAIR,
                        body,
                    } => check_fec(body),
                    _ => {}
                }
            }
            Err(e) => error = Some(e),
        }
    }
    let expected = match error {
        Some(e) => Err(e),
        None if payload.is_empty() => Err(DecodeError::Empty),
        None => Ok(frames),
    };
    assert_eq!(wire::validate(payload), expected);
}

fn check_fec(body: &[u8]) {
    if let Ok(repr) = wire::parse_fec_repair(body) {
        assert!(repr.index < repr.repair_count && repr.symbol.len() % 2 == 0);
        let mut store = plait_proto::fec::FecDecoder::new(true);
        let _ = store.on_source(u64::from(repr.first), body);
        let _ = store.on_repair(u64::from(repr.first), &repr);
    }
}

fn check_ack(ack: &AckFrame<'_>) {
    let truncated = u64::from(ack.largest());
    let expanded = expand_seq(1 << 40, ack.largest());
    for largest_full in [0, 1, truncated, expanded, 1 << 31, u64::MAX] {
        let mut below = None;
        let mut count = 0;
        for range in ack.ranges(largest_full) {
            count += 1;
            assert!(range.start() <= range.end());
            assert!(*range.end() <= largest_full);
            if let Some(prev_start) = below {
                assert!(*range.end() < prev_start);
            }
            below = Some(*range.start());
        }
        assert!(count <= ack.range_count());
        assert!(ack.timestamps(largest_full).count() <= ack.timestamp_count());
        for (seq, _ts) in ack.timestamps(largest_full) {
            assert!(seq <= largest_full);
        }
    }
}
