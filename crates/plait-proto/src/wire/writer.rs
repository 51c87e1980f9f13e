//! [`Writer`]: the bounded encode cursor over the caller's buffer.
//!
//! Invariants: it never writes past the end of the buffer, never allocates and never panics;
//! `len() + remaining()` is the buffer's length; a failed `put_*` writes nothing; a failed
//! frame encode (through `Writer::atomic`) leaves the length unchanged.

use super::error::EncodeError;
use super::varint::{self, VARINT_MAX, varint_len};

/// A cursor that appends to the caller's buffer and never writes past its end.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    /// Bytes written so far; always `<= buf.len()`.
    pos: usize,
}

impl<'a> Writer<'a> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// Whether nothing has been written yet.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Bytes still free in the buffer.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.pos).unwrap_or_default()
    }

    /// `Ok` if `needed` more bytes fit, else [`EncodeError::BufferTooSmall`].
    pub fn check_room(&self, needed: usize) -> Result<(), EncodeError> {
        let available = self.remaining();
        if needed > available {
            return Err(EncodeError::BufferTooSmall { needed, available });
        }
        Ok(())
    }

    /// Appends `bytes`.
    pub fn put_bytes(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        self.check_room(bytes.len())?;
        let end = self.pos + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.copy_from_slice(bytes);
            self.pos = end;
        }
        Ok(())
    }

    /// Appends `len` zero bytes.
    pub fn put_zeros(&mut self, len: usize) -> Result<(), EncodeError> {
        self.check_room(len)?;
        let end = self.pos + len;
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.fill(0);
            self.pos = end;
        }
        Ok(())
    }

    /// Appends one byte.
    pub fn put_u8(&mut self, v: u8) -> Result<(), EncodeError> {
        self.put_bytes(&[v])
    }

    /// Appends a big-endian u32.
    pub fn put_u32(&mut self, v: u32) -> Result<(), EncodeError> {
        self.put_bytes(&v.to_be_bytes())
    }

    /// Appends the minimal varint encoding of `v` (docs/protocol.md#varint); `field` names
    /// the value in the error if it exceeds [`VARINT_MAX`].
    pub fn put_varint(&mut self, field: &'static str, v: u64) -> Result<(), EncodeError> {
        if v > VARINT_MAX {
            return Err(EncodeError::ValueTooLarge {
                field,
                value: v,
                max: VARINT_MAX,
            });
        }
        self.check_room(varint_len(v))?;
        let free = self.buf.get_mut(self.pos..).unwrap_or_default();
        self.pos += varint::write(v, free);
        Ok(())
    }

    /// Runs `f`, and if it fails, forgets whatever it wrote (the length goes back).
    pub(crate) fn atomic(
        &mut self,
        needed: usize,
        f: impl FnOnce(&mut Self) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        self.check_room(needed)?;
        let start = self.pos;
        let result = f(self);
        if result.is_err() {
            self.pos = start;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_tracks_length_and_stays_in_bounds() {
        let mut buf = [0xffu8; 8];
        let mut w = Writer::new(&mut buf);
        assert!(w.is_empty());
        assert_eq!((w.len(), w.remaining()), (0, 8));
        w.put_u8(1).unwrap();
        w.put_u32(0x0203_0405).unwrap();
        w.put_varint("v", 300).unwrap();
        assert_eq!(w.written(), [1, 2, 3, 4, 5, 0x41, 0x2c]);
        assert_eq!(
            w.put_u32(0),
            Err(EncodeError::BufferTooSmall {
                needed: 4,
                available: 1
            })
        );
        assert_eq!(
            w.put_varint("v", 64),
            Err(EncodeError::BufferTooSmall {
                needed: 2,
                available: 1
            })
        );
        assert_eq!(w.len(), 7);
        w.put_zeros(1).unwrap();
        assert_eq!(w.remaining(), 0);
        assert_eq!(w.put_bytes(&[]), Ok(()));
        assert_eq!(
            w.put_u8(0),
            Err(EncodeError::BufferTooSmall {
                needed: 1,
                available: 0
            })
        );
        assert_eq!(buf, [1, 2, 3, 4, 5, 0x41, 0x2c, 0]);
    }
}
