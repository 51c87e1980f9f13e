//! REPAIR_REQUEST (extension frame 0x12, docs/protocol.md#repair): the receiver names
//! inner packets it has evidence were lost, so the sender can send them once more before
//! the reorder buffer gives up on them.
//!
//! Body: a varint count `n` (1..=[`MAX_REPAIR_SEQS`]), then `n` global sequence numbers,
//! each truncated to 32 bits, big-endian. Invariant: [`parse_repair_request`] accepts only
//! a body of exactly that shape and never panics.

use super::error::{DecodeError, EncodeError};
use super::frame_type;
use super::reader::Reader;
use super::repr::ExtensionRepr;
use super::varint::varint_len;
use super::writer::Writer;

/// Most sequence numbers one frame carries.
pub const MAX_REPAIR_SEQS: usize = 64;

/// A REPAIR_REQUEST frame to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairRequestRepr<'a> {
    /// Global sequence numbers (truncated to 32 bits), 1..=[`MAX_REPAIR_SEQS`] of them.
    pub seqs: &'a [u32],
}

impl RepairRequestRepr<'_> {
    fn body_len(&self) -> usize {
        varint_len(self.seqs.len() as u64) + 4 * self.seqs.len()
    }

    /// Bytes the frame takes.
    pub fn encoded_len(&self) -> usize {
        1 + varint_len(self.body_len() as u64) + self.body_len()
    }

    /// Appends the frame (nothing if it does not fit or has no or too many numbers).
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let n = self.seqs.len();
        if n == 0 || n > MAX_REPAIR_SEQS {
            return Err(EncodeError::ValueTooLarge {
                field: "repair request count",
                value: n as u64,
                max: MAX_REPAIR_SEQS as u64,
            });
        }
        let mut body = [0u8; 2 + 4 * MAX_REPAIR_SEQS];
        let mut bw = Writer::new(&mut body);
        bw.put_varint("repair request count", n as u64)?;
        for s in self.seqs {
            bw.put_u32(*s)?;
        }
        let len = bw.len();
        ExtensionRepr {
            frame_type: frame_type::REPAIR_REQUEST,
            body: &body[..len],
        }
        .encode(w)
    }
}

/// Reads a REPAIR_REQUEST body; the numbers come back truncated to 32 bits.
pub fn parse_repair_request(body: &[u8]) -> Result<impl Iterator<Item = u32> + '_, DecodeError> {
    let mut r = Reader::new(body);
    let n = r.varint()?;
    let rest = r.rest();
    if n == 0 || n > MAX_REPAIR_SEQS as u64 || rest.len() as u64 != 4 * n {
        return Err(DecodeError::Truncated);
    }
    Ok(rest
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Frame, frames};
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let mut buf = [0u8; 512];
        let mut w = Writer::new(&mut buf);
        let seqs = [1u32, 7, u32::MAX];
        let repr = RepairRequestRepr { seqs: &seqs };
        repr.encode(&mut w).unwrap();
        assert_eq!(w.len(), repr.encoded_len());
        let len = w.len();
        let frame = frames(&buf[..len]).next().unwrap().unwrap();
        let Frame::Extension { frame_type, body } = frame else {
            panic!("{frame:?}")
        };
        assert_eq!(frame_type, frame_type::REPAIR_REQUEST);
        let got: Vec<u32> = parse_repair_request(body).unwrap().collect();
        assert_eq!(got, seqs);
    }

    #[test]
    fn refuses_empty_and_oversized() {
        let mut buf = [0u8; 2048];
        let mut w = Writer::new(&mut buf);
        assert!(RepairRequestRepr { seqs: &[] }.encode(&mut w).is_err());
        let many = [0u32; MAX_REPAIR_SEQS + 1];
        assert!(RepairRequestRepr { seqs: &many }.encode(&mut w).is_err());
        assert!(w.is_empty());
        let max = [5u32; MAX_REPAIR_SEQS];
        RepairRequestRepr { seqs: &max }.encode(&mut w).unwrap();
        assert!(parse_repair_request(&[]).is_err());
        assert!(parse_repair_request(&[0]).is_err());
        assert!(parse_repair_request(&[2, 0, 0, 0, 1]).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(it) = parse_repair_request(&body) {
                let _ = it.count();
            }
        }
    }
}
