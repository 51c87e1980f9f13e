//! The file that keeps a budget's count across restarts: `STATE_DIR/budget-NAME` for the
//! `[[path]]` named NAME (docs/tunnel-config.md#budget).
//!
//! It is opened (and created) at set-up, before the daemon locks itself down, and kept
//! open: the seccomp allow-list lets the daemon create, rename or truncate no file
//! afterwards (docs/tunnel.md#least-privilege), so the usual write-to-a-temporary-and-
//! rename cannot be done. Instead the file holds two fixed slots of [`SLOT_LEN`] bytes,
//! written in turn in place (seek, write, fdatasync): each is one line of text,
//! `v1 SEQ PERIOD USED CHECK` padded with spaces, CHECK an FNV-1a hash of the rest. On
//! reading, the valid slot with the higher SEQ wins; a write cut short by a crash spoils
//! at most the slot being written, and the other still holds the count before it.
//!
//! Invariants: nothing read from the file can panic; a file with no valid slot is
//! reported as corrupt (the caller counts from 0 with a warning) and is overwritten by
//! the next save; the file never grows beyond two slots.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use jiff::civil::Date;

use super::Saved;

/// Bytes of one slot (a line of text, `\n` last).
pub const SLOT_LEN: usize = 128;
/// Slots in the file.
const SLOTS: usize = 2;
/// The format's tag, first on each line.
const VERSION: &str = "v1";

/// What a state file held when it was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// Empty or new: nothing saved yet.
    Missing,
    /// The latest valid slot.
    Found(Saved),
    /// Something, but no valid slot.
    Corrupt,
}

/// An open state file (or none, when it could not be opened: then nothing is saved).
#[derive(Debug)]
pub struct StateFile {
    file: Option<File>,
    path: PathBuf,
    /// Number of the latest slot written or read.
    seq: u64,
}

impl StateFile {
    /// The state file of the `[[path]]` named `name` in `dir` (created with the directory
    /// if need be), and what it held; on error a `StateFile` that saves nothing, and the
    /// error (the caller warns: the count then lives in memory only).
    pub fn open(dir: &Path, name: &str) -> (StateFile, io::Result<Loaded>) {
        let path = file_path(dir, name);
        let mut state = StateFile {
            file: None,
            path: path.clone(),
            seq: 0,
        };
        let opened = std::fs::create_dir_all(dir).and_then(|()| {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
        });
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => return (state, Err(e)),
        };
        let mut bytes = Vec::with_capacity(SLOTS * SLOT_LEN);
        let read = (&mut file)
            .take((SLOTS * SLOT_LEN) as u64)
            .read_to_end(&mut bytes);
        state.file = Some(file);
        if let Err(e) = read {
            return (state, Err(e));
        }
        let loaded = match decode_file(&bytes) {
            Some((seq, saved)) => {
                state.seq = seq;
                Loaded::Found(saved)
            }
            None if bytes.iter().all(|b| *b == 0) => Loaded::Missing,
            None => Loaded::Corrupt,
        };
        (state, Ok(loaded))
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether saves reach a file.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Writes `saved` into the slot after the latest one and flushes it to the disk. A
    /// `StateFile` that could not be opened saves nothing and says so with `Ok(false)`.
    pub fn save(&mut self, saved: &Saved) -> io::Result<bool> {
        let Some(file) = self.file.as_mut() else {
            return Ok(false);
        };
        let seq = self.seq.saturating_add(1);
        let slot = (seq % SLOTS as u64) as usize;
        file.seek(SeekFrom::Start((slot * SLOT_LEN) as u64))?;
        file.write_all(&encode(seq, saved))?;
        file.sync_data()?;
        self.seq = seq;
        Ok(true)
    }
}

/// `dir/budget-NAME` (path names are `A-Z a-z 0-9 _ . -`, so the name stays one file
/// name inside `dir`).
pub fn file_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("budget-{name}"))
}

/// One slot: `v1 SEQ PERIOD USED CHECK`, spaces, `\n`.
pub fn encode(seq: u64, saved: &Saved) -> [u8; SLOT_LEN] {
    let body = format!("{VERSION} {seq} {} {}", saved.period, saved.used);
    let line = format!("{body} {:016x}", fnv1a(body.as_bytes()));
    let mut slot = [b' '; SLOT_LEN];
    // At most 2 + 20 + 10 + 20 + 16 and 4 spaces: always fits.
    let n = line.len().min(SLOT_LEN - 1);
    slot[..n].copy_from_slice(&line.as_bytes()[..n]);
    slot[SLOT_LEN - 1] = b'\n';
    slot
}

/// A slot's number and contents, if it is valid.
pub fn decode(slot: &[u8]) -> Option<(u64, Saved)> {
    let text = std::str::from_utf8(slot).ok()?.trim_end();
    let (body, check) = text.rsplit_once(' ')?;
    if u64::from_str_radix(check, 16).ok()? != fnv1a(body.as_bytes()) {
        return None;
    }
    let mut fields = body.split(' ');
    if fields.next()? != VERSION {
        return None;
    }
    let seq = fields.next()?.parse().ok()?;
    let period: Date = fields.next()?.parse().ok()?;
    let used = fields.next()?.parse().ok()?;
    if fields.next().is_some() {
        return None;
    }
    Some((seq, Saved { period, used }))
}

/// The valid slot with the highest number in the first two slots of `bytes`.
pub fn decode_file(bytes: &[u8]) -> Option<(u64, Saved)> {
    bytes
        .chunks(SLOT_LEN)
        .take(SLOTS)
        .filter_map(decode)
        .max_by_key(|(seq, _)| *seq)
}

/// 64-bit FNV-1a: enough to tell a torn or edited slot from a written one.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
