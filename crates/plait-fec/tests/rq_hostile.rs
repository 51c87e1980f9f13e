//! RaptorQ behind the fountain traits: round trip with losses, and hostile packets (wrong
//! size, another block, absurd ids, random bytes) are typed errors, never panics.

use plait_fec::measure::{packets_to_decode, source_bytes};
use plait_fec::rq::{RQ_HEADER_LEN, RQ_MAX_ESI};
use plait_fec::{FountainDecoder, RqDecoder, RqEncoder, RqParams, SymbolError};
use proptest::prelude::*;

#[test]
fn round_trip_with_losses() {
    let p = RqParams::new(50, 64);
    let source = source_bytes(50 * 64, 1);
    let mut enc = RqEncoder::new(p, &source).unwrap();
    let mut dec = RqDecoder::new(p).unwrap();
    let n = packets_to_decode(&mut enc, &mut dec, 0.3, 7, 200).unwrap();
    assert!((50..=53).contains(&n), "{n}");
    assert_eq!(dec.source(), Some(&source[..]));
}

#[test]
fn hostile_packets_are_errors() {
    let p = RqParams {
        max_esi: 1000,
        ..RqParams::new(20, 32)
    };
    let mut dec = RqDecoder::new(p).unwrap();
    let good_len = RQ_HEADER_LEN + 32;
    assert_eq!(
        dec.handle_packet(&[]),
        Err(SymbolError::Truncated {
            len: 0,
            expected: good_len
        })
    );
    assert_eq!(
        dec.handle_packet(&[0; 35]),
        Err(SymbolError::Truncated {
            len: 35,
            expected: good_len
        })
    );
    assert_eq!(
        dec.handle_packet(&[0; 37]),
        Err(SymbolError::Oversized {
            len: 37,
            expected: good_len
        })
    );
    let mut other_block = vec![0u8; good_len];
    other_block[0] = 9;
    assert_eq!(
        dec.handle_packet(&other_block),
        Err(SymbolError::WrongBlock {
            got: 9,
            expected: 0
        })
    );
    let mut absurd = vec![0u8; good_len];
    absurd[1..4].copy_from_slice(&[0xff, 0xff, 0xff]);
    assert_eq!(
        dec.handle_packet(&absurd),
        Err(SymbolError::IdOutOfRange {
            id: RQ_MAX_ESI,
            max: 1000
        })
    );
    assert_eq!(dec.received(), 0);
}

#[test]
fn largest_esi_is_accepted_without_panic() {
    let p = RqParams::new(10, 16);
    let source = source_bytes(160, 2);
    let enc = RqEncoder::new(p, &source).unwrap();
    let mut dec = RqDecoder::new(p).unwrap();
    let mut packet = Vec::new();
    for esi in (RQ_MAX_ESI - 30)..=RQ_MAX_ESI {
        enc.encode_into(esi, &mut packet);
        dec.handle_packet(&packet).unwrap();
        if dec.is_complete() {
            break;
        }
    }
    assert_eq!(dec.source(), Some(&source[..]));
}

#[test]
fn bad_parameters_are_errors() {
    assert!(RqDecoder::new(RqParams::new(0, 16)).is_err());
    assert!(RqDecoder::new(RqParams::new(56404, 16)).is_err());
    assert!(RqDecoder::new(RqParams::new(10, 0)).is_err());
    assert!(RqDecoder::new(RqParams::new(10, 65536)).is_err());
    assert!(RqEncoder::new(RqParams::new(10, 16), &[0; 159]).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random packets, mostly of the right length with random block and id bytes, never
    /// panic the wrapper or the crate behind it, and the decoder's memory stays bounded.
    #[test]
    fn random_packets_never_panic(
        packets in proptest::collection::vec(
            (0usize..4, any::<[u8; 4]>(), proptest::collection::vec(any::<u8>(), 0..24)),
            0..40,
        ),
    ) {
        let p = RqParams { max_packets: 12, ..RqParams::new(8, 8) };
        let mut dec = RqDecoder::new(p).unwrap();
        for (shape, head, body) in &packets {
            let mut packet = head.to_vec();
            match shape {
                0 => packet.extend_from_slice(body),
                1 => packet.truncate(body.len() % 4),
                _ => {
                    packet[0] = if *shape == 2 { 0 } else { packet[0] };
                    packet.extend((0..8).map(|i| body.get(i).copied().unwrap_or(0)));
                }
            }
            let _ = dec.handle_packet(&packet);
        }
        prop_assert!(dec.received() <= 12);
    }
}
