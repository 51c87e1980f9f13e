//! Round trips: decode(encode(repr)) gives back every field, and `encoded_len` is what
//! `encode` writes.

use proptest::collection::vec;
use proptest::prelude::*;

use super::strategies::{ack, check_ack, datagram, encode_datagram, header, middle_frame};
use crate::wire::*;

proptest! {
    #[test]
    fn headers_round_trip(h in header(), tail in vec(any::<u8>(), 1..8)) {
        let mut buf = [0u8; HEADER_LEN];
        prop_assert_eq!(h.encode(&mut buf), Ok(HEADER_LEN));
        let mut dgram = buf.to_vec();
        dgram.extend(&tail);
        let (got, payload) = Header::decode(&dgram).unwrap();
        prop_assert_eq!(got, h);
        prop_assert_eq!(payload, &tail[..]);
    }

    #[test]
    fn datagrams_round_trip((h, frames_in) in datagram()) {
        let bytes = encode_datagram(&h, &frames_in);
        let (got, payload) = Header::decode(&bytes).unwrap();
        prop_assert_eq!(got, h);
        prop_assert_eq!(validate(payload), Ok(frames_in.len()));
        let decoded: Vec<_> = frames(payload).collect();
        prop_assert_eq!(decoded.len(), frames_in.len());
        for (want, got) in frames_in.iter().zip(&decoded) {
            want.check(got.as_ref().unwrap())?;
        }
    }

    #[test]
    fn acks_round_trip(a in ack()) {
        let mut buf = vec![0u8; 4096];
        let mut w = Writer::new(&mut buf);
        a.repr().encode(&mut w).unwrap();
        prop_assert_eq!(w.len(), a.repr().encoded_len());
        let bytes = w.written();
        let Some(Ok(Frame::Ack(d))) = frames(bytes).next() else {
            return Err(TestCaseError::fail("not an ACK"));
        };
        check_ack(&a, &d)?;
    }

    #[test]
    fn a_short_buffer_is_an_error_not_a_partial_frame(f in middle_frame(), cut in 0usize..64) {
        let len = f.encoded_len();
        let mut buf = vec![0xaau8; (len - 1).saturating_sub(cut)];
        let mut w = Writer::new(&mut buf);
        let is_too_small = matches!(f.encode(&mut w), Err(EncodeError::BufferTooSmall { .. }));
        prop_assert!(is_too_small);
        prop_assert_eq!(w.len(), 0);
    }
}
