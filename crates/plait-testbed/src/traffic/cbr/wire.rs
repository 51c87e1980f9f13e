//! The datagram of the measured constant-rate UDP flow ([`super::cbr_send`] →
//! [`super::CbrSink`]): a 20-byte header, then zeros up to the datagram's size.
//!
//! ```text
//! magic "PCBR" (4) | sequence number u64 BE (8) | send time u64 BE (8) | padding
//! ```
//!
//! The send time is `CLOCK_MONOTONIC` in nanoseconds ([`monotonic_ns`]). Network
//! namespaces do not have clocks of their own (only time namespaces would), and sender and
//! receiver are threads of one process anyway, so the receiver subtracts it from its own
//! reading of the same clock to get the one-way delay.
//!
//! Invariant: [`CbrHeader::decode`] never panics; anything that is not a whole header with
//! the magic is a typed [`CbrWireError`] (it arrived over the network).

/// The first four bytes of every datagram of the flow.
pub const MAGIC: [u8; 4] = *b"PCBR";
/// Bytes of the header.
pub const HEADER_LEN: usize = 20;

/// What a datagram of the flow says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CbrHeader {
    /// Its number: 0, 1, 2, … in sending order.
    pub seq: u64,
    /// `CLOCK_MONOTONIC` just before it was handed to the socket, nanoseconds.
    pub sent_ns: u64,
}

/// A buffer that does not hold a header of the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CbrWireError {
    /// Shorter than [`HEADER_LEN`].
    #[error("{len}-byte datagram is shorter than the {HEADER_LEN}-byte CBR header")]
    Short {
        /// Its length.
        len: usize,
    },
    /// The first four bytes are not [`MAGIC`].
    #[error("not a CBR datagram (starts {found:02x?})")]
    BadMagic {
        /// What it starts with.
        found: [u8; 4],
    },
}

impl CbrHeader {
    /// Writes the header at the start of `buf` (the rest is left as it is).
    pub fn encode(&self, buf: &mut [u8]) -> Result<(), CbrWireError> {
        let len = buf.len();
        let head = buf
            .get_mut(..HEADER_LEN)
            .ok_or(CbrWireError::Short { len })?;
        head[..4].copy_from_slice(&MAGIC);
        head[4..12].copy_from_slice(&self.seq.to_be_bytes());
        head[12..20].copy_from_slice(&self.sent_ns.to_be_bytes());
        Ok(())
    }

    /// Reads the header at the start of `buf`.
    pub fn decode(buf: &[u8]) -> Result<CbrHeader, CbrWireError> {
        let short = CbrWireError::Short { len: buf.len() };
        let (magic, rest) = buf.split_first_chunk::<4>().ok_or(short)?;
        let (seq, rest) = rest.split_first_chunk::<8>().ok_or(short)?;
        let (sent, _) = rest.split_first_chunk::<8>().ok_or(short)?;
        if *magic != MAGIC {
            return Err(CbrWireError::BadMagic { found: *magic });
        }
        Ok(CbrHeader {
            seq: u64::from_be_bytes(*seq),
            sent_ns: u64::from_be_bytes(*sent),
        })
    }
}

/// `CLOCK_MONOTONIC` now, nanoseconds (the clock of [`CbrHeader::sent_ns`]).
pub fn monotonic_ns() -> std::io::Result<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_err(std::io::Error::from)?;
    // The monotonic clock counts from boot: never negative.
    let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
    Ok(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_padding_is_ignored() {
        let h = CbrHeader {
            seq: 0x0102_0304_0506_0708,
            sent_ns: u64::MAX - 1,
        };
        let mut buf = vec![0u8; 1172];
        h.encode(&mut buf).unwrap();
        assert_eq!(&buf[..4], b"PCBR");
        assert_eq!(CbrHeader::decode(&buf), Ok(h));
        assert_eq!(CbrHeader::decode(&buf[..HEADER_LEN]), Ok(h));
    }

    #[test]
    fn short_and_foreign_datagrams_are_typed_errors() {
        let mut buf = [0u8; HEADER_LEN];
        CbrHeader { seq: 1, sent_ns: 2 }.encode(&mut buf).unwrap();
        for len in 0..HEADER_LEN {
            assert_eq!(
                CbrHeader::decode(&buf[..len]),
                Err(CbrWireError::Short { len })
            );
        }
        buf[0] = b'X';
        assert_eq!(
            CbrHeader::decode(&buf),
            Err(CbrWireError::BadMagic { found: *b"XCBR" })
        );
        let mut small = [0u8; 19];
        assert_eq!(
            CbrHeader { seq: 1, sent_ns: 2 }.encode(&mut small),
            Err(CbrWireError::Short { len: 19 })
        );
    }

    #[test]
    fn garbage_never_panics() {
        // A cheap deterministic sweep of lengths and contents (splitmix-like bytes).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..64 {
            for _ in 0..64 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        (x >> 56) as u8
                    })
                    .collect();
                let _ = CbrHeader::decode(&bytes);
            }
        }
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = monotonic_ns().unwrap();
        let b = monotonic_ns().unwrap();
        assert!(a > 0 && b >= a);
    }
}
