//! [`Reader`]: the decode cursor over a borrowed datagram.
//!
//! Invariants: every read either returns a value and advances past exactly the bytes it
//! consumed, or returns [`DecodeError::Truncated`] and leaves the cursor where it was;
//! it never panics and never copies or allocates (byte strings are borrowed sub-slices).

use super::error::DecodeError;
use super::varint;

/// A cursor over the not yet decoded tail of a datagram.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `buf`.
    pub(crate) const fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Whether every byte has been consumed.
    pub(crate) const fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The unread bytes, without consuming them.
    pub(crate) const fn as_slice(&self) -> &'a [u8] {
        self.buf
    }

    /// The unread bytes, consuming them.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// One byte.
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        let (&b, rest) = self.buf.split_first().ok_or(DecodeError::Truncated)?;
        self.buf = rest;
        Ok(b)
    }

    /// A big-endian u32.
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let (bytes, rest) = self
            .buf
            .split_first_chunk::<4>()
            .ok_or(DecodeError::Truncated)?;
        self.buf = rest;
        Ok(u32::from_be_bytes(*bytes))
    }

    /// A varint (docs/protocol.md#varint).
    pub(crate) fn varint(&mut self) -> Result<u64, DecodeError> {
        let (value, len) = varint::decode(self.buf)?;
        self.buf = self.buf.get(len..).ok_or(DecodeError::Truncated)?;
        Ok(value)
    }

    /// The next `len` bytes, borrowed.
    pub(crate) fn bytes(&mut self, len: u64) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
        let (bytes, rest) = self
            .buf
            .split_at_checked(len)
            .ok_or(DecodeError::Truncated)?;
        self.buf = rest;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_advance_or_fail_in_place() {
        let mut r = Reader::new(&[7, 0, 0, 1, 2, 0x40, 0x25, 9, 9]);
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.u32(), Ok(0x0102));
        assert_eq!(r.varint(), Ok(37));
        assert_eq!(r.bytes(3), Err(DecodeError::Truncated));
        assert_eq!(r.u32(), Err(DecodeError::Truncated));
        assert_eq!(r.bytes(u64::MAX), Err(DecodeError::Truncated));
        assert_eq!(r.bytes(2), Ok(&[9u8, 9][..]));
        assert!(r.is_empty());
        assert_eq!(r.u8(), Err(DecodeError::Truncated));
        assert_eq!(r.varint(), Err(DecodeError::Truncated));
    }
}
