//! The datagrams of `plait send` / `plait recv` (docs/fec.md, "plait send and plait recv").
//!
//! Every datagram starts with a 14-byte prefix: magic `PLFT`, version 1, kind, transfer id
//! (u64). All integers are big-endian. Parsing checks every length and field before
//! anything is handed on; a bad datagram is a typed [`WireError`], never a panic.

use thiserror::Error;

use crate::rq::{RQ_HEADER_LEN, RQ_MAX_K};

/// First four bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"PLFT";
/// Protocol version.
pub const VERSION: u8 = 1;
/// Bytes of the common prefix (magic, version, kind, transfer id).
pub const PREFIX_LEN: usize = 14;
/// Bytes before the RaptorQ packet in a symbol datagram (prefix, seq, chunk).
pub const SYMBOL_HEADER_LEN: usize = PREFIX_LEN + 8;
/// Most chunks the receiver decodes at once, and the sender's pipeline window.
pub const WINDOW: u32 = 16;
/// Largest symbol size either end accepts (fits a 1380-byte tunnel MTU with headers).
pub const MAX_SYMBOL_SIZE: usize = 1400;
/// Smallest symbol size either end accepts.
pub const MIN_SYMBOL_SIZE: usize = 16;
/// Largest k (symbols per chunk) either end accepts.
pub const MAX_K: usize = 8192;
/// Longest file name in a header.
pub const MAX_NAME: usize = 255;
/// Largest file size a header may announce (1 TiB).
pub const MAX_FILE_SIZE: u64 = 1 << 40;

const KIND_HEADER: u8 = 1;
const KIND_SYMBOL: u8 = 2;
const KIND_REPORT: u8 = 3;

/// Report flag: every chunk decoded and the whole-file SHA-256 verified.
pub const FLAG_COMPLETE: u8 = 1;
/// Report flag: every chunk decoded but the SHA-256 differs.
pub const FLAG_HASH_MISMATCH: u8 = 2;
/// Report flag: the receiver refuses the transfer (e.g. it cannot write the file).
pub const FLAG_REJECTED: u8 = 4;

/// Why a datagram was dropped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("truncated datagram: {len} bytes, need {need}")]
    Truncated { len: usize, need: usize },
    #[error("oversized datagram: {len} bytes, at most {max}")]
    Oversized { len: usize, max: usize },
    #[error("not a plait transfer datagram (bad magic)")]
    BadMagic,
    #[error("unsupported version {0}")]
    BadVersion(u8),
    #[error("unknown datagram kind {0}")]
    UnknownKind(u8),
    #[error("invalid field {field}: {value}")]
    BadField { field: &'static str, value: u64 },
    #[error("invalid file name")]
    BadName,
}

/// What a transfer announces: sent by the sender until the receiver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub transfer_id: u64,
    pub file_size: u64,
    /// Symbols per chunk (the last chunk may have fewer).
    pub k: u16,
    pub symbol_size: u16,
    pub sha256: [u8; 32],
    /// Plain file name: no `/`, no NUL, not `.` or `..`, 1..=255 bytes of UTF-8.
    pub name: String,
}

impl Header {
    /// Bytes per full chunk.
    pub fn chunk_bytes(&self) -> u64 {
        self.k as u64 * self.symbol_size as u64
    }

    /// Number of chunks (0 for an empty file).
    pub fn chunks(&self) -> u32 {
        self.file_size.div_ceil(self.chunk_bytes()) as u32
    }

    /// Byte offset and length of chunk `i` in the file.
    pub fn chunk_range(&self, i: u32) -> (u64, usize) {
        let off = i as u64 * self.chunk_bytes();
        let len = self.chunk_bytes().min(self.file_size.saturating_sub(off));
        (off, len as usize)
    }

    /// Source symbols of chunk `i`: k, or fewer for the last chunk.
    pub fn chunk_k(&self, i: u32) -> usize {
        self.chunk_range(i).1.div_ceil(self.symbol_size as usize)
    }

    /// Checks the fields a peer could make absurd.
    pub fn check(&self) -> Result<(), WireError> {
        let t = self.symbol_size as usize;
        if !(MIN_SYMBOL_SIZE..=MAX_SYMBOL_SIZE).contains(&t) {
            return Err(WireError::BadField {
                field: "symbol_size",
                value: t as u64,
            });
        }
        if self.k == 0 || self.k as usize > MAX_K.min(RQ_MAX_K) {
            return Err(WireError::BadField {
                field: "k",
                value: self.k as u64,
            });
        }
        if self.file_size > MAX_FILE_SIZE {
            return Err(WireError::BadField {
                field: "file_size",
                value: self.file_size,
            });
        }
        check_name(&self.name)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        prefix(out, KIND_HEADER, self.transfer_id);
        out.extend_from_slice(&self.file_size.to_be_bytes());
        out.extend_from_slice(&self.k.to_be_bytes());
        out.extend_from_slice(&self.symbol_size.to_be_bytes());
        out.extend_from_slice(&self.sha256);
        out.push(self.name.len() as u8);
        out.extend_from_slice(self.name.as_bytes());
    }
}

/// A file name the receiver may create in its output directory.
pub fn check_name(name: &str) -> Result<(), WireError> {
    if name.is_empty()
        || name.len() > MAX_NAME
        || name == "."
        || name == ".."
        || name.contains(['/', '\\', '\0'])
    {
        return Err(WireError::BadName);
    }
    Ok(())
}

/// One encoded symbol: `packet` is a RaptorQ packet (FEC payload ID, then the symbol).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol<'a> {
    pub transfer_id: u64,
    /// Sender's datagram sequence number (for loss and RTT measurement).
    pub seq: u32,
    pub chunk: u32,
    pub packet: &'a [u8],
}

/// Writes a symbol datagram's header; the caller appends the RaptorQ packet.
pub fn encode_symbol_header(out: &mut Vec<u8>, transfer_id: u64, seq: u32, chunk: u32) {
    prefix(out, KIND_SYMBOL, transfer_id);
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&chunk.to_be_bytes());
}

/// One chunk's line in a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkReport {
    pub chunk: u32,
    /// Distinct symbols the receiver holds for it (saturating).
    pub received: u16,
    pub decoded: bool,
}

/// The receiver's report, sent about every 50 ms and when a chunk decodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    pub transfer_id: u64,
    /// Highest symbol sequence number received.
    pub highest_seq: u32,
    /// Microseconds between receiving `highest_seq` and sending this report.
    pub hold_us: u32,
    /// Symbol datagrams accepted so far (cumulative, duplicates included).
    pub received_total: u64,
    /// Every chunk below this one is on disk.
    pub done_below: u32,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Chunks at or above `done_below` that are decoded or being decoded (at most WINDOW).
    pub chunks: Vec<ChunkReport>,
}

const REPORT_FIXED: usize = PREFIX_LEN + 4 + 4 + 8 + 4 + 1 + 1;
const CHUNK_REPORT_LEN: usize = 7;

impl Report {
    pub fn encode(&self, out: &mut Vec<u8>) {
        prefix(out, KIND_REPORT, self.transfer_id);
        out.extend_from_slice(&self.highest_seq.to_be_bytes());
        out.extend_from_slice(&self.hold_us.to_be_bytes());
        out.extend_from_slice(&self.received_total.to_be_bytes());
        out.extend_from_slice(&self.done_below.to_be_bytes());
        out.push(self.flags);
        let n = self.chunks.len().min(WINDOW as usize);
        out.push(n as u8);
        for c in &self.chunks[..n] {
            out.extend_from_slice(&c.chunk.to_be_bytes());
            out.extend_from_slice(&c.received.to_be_bytes());
            out.push(c.decoded as u8);
        }
    }
}

/// A parsed datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datagram<'a> {
    Header(Header),
    Symbol(Symbol<'a>),
    Report(Report),
}

fn prefix(out: &mut Vec<u8>, kind: u8, id: u64) {
    out.clear();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&id.to_be_bytes());
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Largest datagram either end accepts.
pub const MAX_DATAGRAM: usize = SYMBOL_HEADER_LEN + RQ_HEADER_LEN + MAX_SYMBOL_SIZE;

/// Parses one datagram, checking its framing. Symbol payload lengths are checked against
/// the transfer's symbol size by the receiver.
pub fn parse(b: &[u8]) -> Result<Datagram<'_>, WireError> {
    if b.len() < PREFIX_LEN {
        return Err(WireError::Truncated {
            len: b.len(),
            need: PREFIX_LEN,
        });
    }
    if b.len() > MAX_DATAGRAM {
        return Err(WireError::Oversized {
            len: b.len(),
            max: MAX_DATAGRAM,
        });
    }
    if b[..4] != MAGIC {
        return Err(WireError::BadMagic);
    }
    if b[4] != VERSION {
        return Err(WireError::BadVersion(b[4]));
    }
    let id = be_u64(&b[6..14]);
    let rest = &b[PREFIX_LEN..];
    let need = |n: usize| {
        if rest.len() < n {
            Err(WireError::Truncated {
                len: b.len(),
                need: PREFIX_LEN + n,
            })
        } else {
            Ok(())
        }
    };
    match b[5] {
        KIND_HEADER => {
            need(8 + 2 + 2 + 32 + 1)?;
            let name_len = rest[44] as usize;
            need(45 + name_len)?;
            if rest.len() > 45 + name_len {
                return Err(WireError::Oversized {
                    len: b.len(),
                    max: PREFIX_LEN + 45 + name_len,
                });
            }
            let mut sha256 = [0u8; 32];
            sha256.copy_from_slice(&rest[12..44]);
            let name = std::str::from_utf8(&rest[45..45 + name_len])
                .map_err(|_| WireError::BadName)?
                .to_owned();
            let h = Header {
                transfer_id: id,
                file_size: be_u64(&rest[0..8]),
                k: be_u16(&rest[8..10]),
                symbol_size: be_u16(&rest[10..12]),
                sha256,
                name,
            };
            h.check()?;
            Ok(Datagram::Header(h))
        }
        KIND_SYMBOL => {
            need(8 + RQ_HEADER_LEN + 1)?;
            Ok(Datagram::Symbol(Symbol {
                transfer_id: id,
                seq: be_u32(&rest[0..4]),
                chunk: be_u32(&rest[4..8]),
                packet: &rest[8..],
            }))
        }
        KIND_REPORT => {
            need(REPORT_FIXED - PREFIX_LEN)?;
            let n = rest[21] as usize;
            if n > WINDOW as usize {
                return Err(WireError::BadField {
                    field: "report chunk count",
                    value: n as u64,
                });
            }
            let len = REPORT_FIXED + n * CHUNK_REPORT_LEN;
            if b.len() < len {
                return Err(WireError::Truncated {
                    len: b.len(),
                    need: len,
                });
            }
            if b.len() > len {
                return Err(WireError::Oversized {
                    len: b.len(),
                    max: len,
                });
            }
            let mut chunks = Vec::with_capacity(n);
            for i in 0..n {
                let c = &rest[22 + i * CHUNK_REPORT_LEN..22 + (i + 1) * CHUNK_REPORT_LEN];
                if c[6] > 1 {
                    return Err(WireError::BadField {
                        field: "decoded flag",
                        value: c[6] as u64,
                    });
                }
                chunks.push(ChunkReport {
                    chunk: be_u32(&c[0..4]),
                    received: be_u16(&c[4..6]),
                    decoded: c[6] == 1,
                });
            }
            Ok(Datagram::Report(Report {
                transfer_id: id,
                highest_seq: be_u32(&rest[0..4]),
                hold_us: be_u32(&rest[4..8]),
                received_total: be_u64(&rest[8..16]),
                done_below: be_u32(&rest[16..20]),
                flags: rest[20],
                chunks,
            }))
        }
        k => Err(WireError::UnknownKind(k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            transfer_id: 7,
            file_size: 3_000_000,
            k: 1024,
            symbol_size: 1280,
            sha256: [9; 32],
            name: "a.bin".into(),
        }
    }

    #[test]
    fn round_trips() {
        let mut out = Vec::new();
        header().encode(&mut out);
        assert_eq!(parse(&out), Ok(Datagram::Header(header())));
        let r = Report {
            transfer_id: 7,
            highest_seq: 5,
            hold_us: 100,
            received_total: 99,
            done_below: 2,
            flags: FLAG_COMPLETE,
            chunks: vec![ChunkReport {
                chunk: 3,
                received: 10,
                decoded: true,
            }],
        };
        r.encode(&mut out);
        assert_eq!(parse(&out), Ok(Datagram::Report(r)));
        encode_symbol_header(&mut out, 7, 1, 2);
        out.extend_from_slice(&[0, 0, 0, 5, 1, 2]);
        let Ok(Datagram::Symbol(s)) = parse(&out) else {
            panic!()
        };
        assert_eq!((s.seq, s.chunk, s.packet.len()), (1, 2, 6));
    }

    #[test]
    fn chunk_geometry() {
        let h = header();
        assert_eq!(h.chunks(), 3);
        assert_eq!(
            h.chunk_range(2),
            (2 * 1024 * 1280, 3_000_000 - 2 * 1024 * 1280)
        );
        assert_eq!(h.chunk_k(0), 1024);
        assert_eq!(
            h.chunk_k(2),
            (3_000_000usize - 2 * 1024 * 1280).div_ceil(1280)
        );
    }

    #[test]
    fn bad_input_is_typed() {
        let mut out = Vec::new();
        header().encode(&mut out);
        for cut in 0..out.len() {
            assert!(parse(&out[..cut]).is_err(), "cut {cut}");
        }
        let mut long = out.clone();
        long.push(0);
        assert!(matches!(parse(&long), Err(WireError::Oversized { .. })));
        let mut bad = header();
        bad.name = "../etc/passwd".into();
        bad.encode(&mut out);
        assert_eq!(parse(&out), Err(WireError::BadName));
        let mut bad = header();
        bad.k = 0;
        bad.encode(&mut out);
        assert!(matches!(
            parse(&out),
            Err(WireError::BadField { field: "k", .. })
        ));
        let r = Report::default();
        r.encode(&mut out);
        out[PREFIX_LEN + 21] = 200;
        assert!(matches!(parse(&out), Err(WireError::BadField { .. })));
        assert_eq!(parse(b"XXXXXXXXXXXXXXXXXX"), Err(WireError::BadMagic));
        assert!(parse(&vec![0u8; 5000]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(b in proptest::collection::vec(proptest::num::u8::ANY, 0..1600)) {
            let _ = parse(&b);
        }
    }
}
