//! Per-direction ChaCha20-Poly1305 keys (ring), sealing and opening in place.
//!
//! It owns one direction's transport key and, on the sending side, the path-control
//! message counter.
//!
//! Two disjoint nonce families share a key (docs/protocol.md#data-messages), told apart by
//! the first byte ([`MessageNonce`]):
//! - path control: 4 zero bytes, then the 64-bit counter little-endian. This is Noise's
//!   ChaChaPoly nonce (Noise spec §12.3, "32 bits of zeros followed by little-endian
//!   encoding of n") and WireGuard's transport nonce;
//! - data: the byte 1, the engine datagram's 5-byte clear prefix (version and path, then
//!   the path sequence number), then 6 zero bytes. The engine never repeats a path
//!   sequence number within a session, and `Keypair` refuses to seal one that does not
//!   move forward, so these never repeat under one key either.
//!
//! Invariants:
//! - A [`SendKey`] hands out each counter at most once, strictly increasing from 0, and
//!   never one at or above [`REJECT_AFTER_MESSAGES`] (the receiver's window rejects those),
//!   so a (key, counter nonce) pair is never reused. [`SendKey::seal`] refuses such
//!   counters too.
//! - No input makes these functions panic: buffer lengths are checked first and reported
//!   as [`AeadError::BufferTooSmall`].
//! - Key bytes never appear in `Debug` output.
//! - Opening does not consult the replay window: the caller checks
//!   `ReplayWindow::may_accept` before and calls `ReplayWindow::accept` after a successful
//!   open.

use std::fmt;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use plait_proto::wire::CLEAR_PREFIX_LEN;

use crate::crypto::replay::REJECT_AFTER_MESSAGES;

/// Length of the Poly1305 authentication tag appended to every ciphertext.
pub const TAG_LEN: usize = 16;
/// Length of a ChaCha20-Poly1305 key.
pub const KEY_LEN: usize = 32;

// RFC 8439 §2.8: 256-bit key, 128-bit tag; ring's constants must agree with ours.
const _: () = assert!(TAG_LEN == ring::aead::MAX_TAG_LEN && NONCE_LEN == 12);

/// Why sealing or opening failed.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum AeadError {
    /// The send counter reached [`REJECT_AFTER_MESSAGES`]; a new handshake is needed. Also
    /// returned by [`SendKey::seal`] for a message longer than ChaCha20 can encrypt under
    /// one nonce (RFC 8439 §2.8: about 256 GiB), which no datagram comes near.
    #[error("nonce counter exhausted: rekey required")]
    Exhausted,
    /// A data message's path sequence number is not ahead of the last one sealed on its
    /// path under this key: sealing it could repeat a nonce, so it is refused (a bug in
    /// the caller, never an input).
    #[error("path sequence number not ahead of the last one sealed on its path")]
    NotAhead,
    /// The buffer cannot hold what the operation needs.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes required.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The tag did not verify: wrong key, counter, associated data, or a modified message.
    #[error("authentication failed")]
    AuthFailed,
}

/// Where the counter sits in the nonce: after 4 zero bytes, in the last 8.
const NONCE_COUNTER_OFFSET: usize = NONCE_LEN - 8;
/// First byte of a data message's nonce; a counter nonce's is 0.
const DATA_NONCE_TAG: u8 = 1;

/// The nonce of one sealed message (see the module docs for the two families).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageNonce {
    /// A path-control message's counter.
    Counter(u64),
    /// A data message: the engine datagram's clear prefix.
    Data([u8; CLEAR_PREFIX_LEN]),
}

impl MessageNonce {
    /// The 12 nonce bytes.
    pub fn bytes(self) -> [u8; NONCE_LEN] {
        let mut n = [0u8; NONCE_LEN];
        match self {
            MessageNonce::Counter(c) => n[NONCE_COUNTER_OFFSET..].copy_from_slice(&c.to_le_bytes()),
            MessageNonce::Data(prefix) => {
                n[0] = DATA_NONCE_TAG;
                n[1..1 + CLEAR_PREFIX_LEN].copy_from_slice(&prefix);
            }
        }
        n
    }
}

fn less_safe_key(key: &[u8; KEY_LEN]) -> LessSafeKey {
    // Infallible: UnboundKey::new fails only when the key length differs from the
    // algorithm's, and CHACHA20_POLY1305 takes exactly KEY_LEN = 32 bytes (checked by the
    // `key_len_matches_ring` test).
    let unbound = UnboundKey::new(&CHACHA20_POLY1305, key)
        .expect("a 32-byte key is always valid for ChaCha20-Poly1305");
    LessSafeKey::new(unbound)
}

/// Seals `in_out[..len]` in place under a raw nonce and writes the tag after it. Shared by
/// [`SendKey::seal`] and the RFC 8439 known-answer test, so the vector checks this path.
fn seal_with_nonce(
    key: &LessSafeKey,
    nonce: [u8; NONCE_LEN],
    aad: &[u8],
    in_out: &mut [u8],
    len: usize,
) -> Result<usize, AeadError> {
    let need = len.saturating_add(TAG_LEN);
    let have = in_out.len();
    if need > have {
        return Err(AeadError::BufferTooSmall { need, have });
    }
    let (plaintext, rest) = in_out.split_at_mut(len);
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            plaintext,
        )
        // ring fails only when the input exceeds ChaCha20's per-nonce limit (~256 GiB).
        .map_err(|_| AeadError::Exhausted)?;
    rest[..TAG_LEN].copy_from_slice(tag.as_ref());
    Ok(need)
}

/// Opens `in_out` (ciphertext || tag) in place under a raw nonce; returns the plaintext
/// length. On failure ring zeroes the would-be plaintext, so nothing unauthenticated leaks.
fn open_with_nonce(
    key: &LessSafeKey,
    nonce: [u8; NONCE_LEN],
    aad: &[u8],
    in_out: &mut [u8],
) -> Result<usize, AeadError> {
    let have = in_out.len();
    if have < TAG_LEN {
        return Err(AeadError::BufferTooSmall {
            need: TAG_LEN,
            have,
        });
    }
    key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad), in_out)
        .map(|plaintext| plaintext.len())
        .map_err(|_| AeadError::AuthFailed)
}

/// The sending half of a session's keys: a key and the counter of the next message.
pub struct SendKey {
    key: LessSafeKey,
    /// The counter the next message will use (= messages sealed so far).
    next: u64,
}

impl SendKey {
    /// A key whose first message uses counter 0.
    pub fn new(key: &[u8; KEY_LEN]) -> SendKey {
        SendKey {
            key: less_safe_key(key),
            next: 0,
        }
    }

    /// The counter the next message will use; strictly increasing, never reused. Err(Exhausted)
    /// once it reaches crate::crypto::replay::REJECT_AFTER_MESSAGES.
    pub fn next_counter(&mut self) -> Result<u64, AeadError> {
        if self.next >= REJECT_AFTER_MESSAGES {
            return Err(AeadError::Exhausted);
        }
        let counter = self.next;
        // No overflow: counter < REJECT_AFTER_MESSAGES < u64::MAX.
        self.next = counter + 1;
        Ok(counter)
    }

    /// Messages sealed so far (= counters handed out).
    pub fn messages(&self) -> u64 {
        self.next
    }

    /// Seals in place: `in_out[..len]` is the plaintext; the tag is written at
    /// `in_out[len..len + TAG_LEN]`. `aad` is authenticated, not encrypted. Returns len + TAG_LEN.
    ///
    /// A counter nonce must come from [`SendKey::next_counter`]; one at or above
    /// [`REJECT_AFTER_MESSAGES`] gives `Err(Exhausted)` since no receiver would accept it.
    /// A data nonce's uniqueness is the caller's to keep (`Keypair` does).
    pub(super) fn seal(
        &self,
        nonce: MessageNonce,
        aad: &[u8],
        in_out: &mut [u8],
        len: usize,
    ) -> Result<usize, AeadError> {
        if let MessageNonce::Counter(counter) = nonce
            && counter >= REJECT_AFTER_MESSAGES
        {
            return Err(AeadError::Exhausted);
        }
        seal_with_nonce(&self.key, nonce.bytes(), aad, in_out, len)
    }

    /// Test hook: makes the next counter `next`, to reach the exhaustion limit quickly.
    #[cfg(test)]
    pub(crate) fn set_next_counter_for_test(&mut self, next: u64) {
        self.next = next;
    }
}

impl fmt::Debug for SendKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key bytes (ring's LessSafeKey Debug shows only the algorithm anyway,
        // but we do not depend on that).
        f.debug_struct("SendKey")
            .field("next_counter", &self.next)
            .finish_non_exhaustive()
    }
}

/// The receiving half of a session's keys.
pub struct RecvKey {
    key: LessSafeKey,
}

impl RecvKey {
    /// A key for opening the peer's messages.
    pub fn new(key: &[u8; KEY_LEN]) -> RecvKey {
        RecvKey {
            key: less_safe_key(key),
        }
    }

    /// Opens in place; `in_out` is ciphertext||tag. Returns the plaintext length (in_out[..n]).
    ///
    /// On `AuthFailed` the contents of `in_out` are unspecified (ring zeroes the plaintext
    /// part) and must be discarded.
    pub fn open(
        &self,
        nonce: MessageNonce,
        aad: &[u8],
        in_out: &mut [u8],
    ) -> Result<usize, AeadError> {
        open_with_nonce(&self.key, nonce.bytes(), aad, in_out)
    }
}

impl fmt::Debug for RecvKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvKey").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MessageNonce::Counter as C;

    const KEY: [u8; KEY_LEN] = [0x42; KEY_LEN];

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn sealed(counter: u64, aad: &[u8], msg: &[u8]) -> Vec<u8> {
        let k = SendKey::new(&KEY);
        let mut buf = msg.to_vec();
        buf.resize(msg.len() + TAG_LEN, 0);
        assert_eq!(
            k.seal(C(counter), aad, &mut buf, msg.len()),
            Ok(msg.len() + TAG_LEN)
        );
        buf
    }

    #[test]
    fn key_len_matches_ring() {
        assert_eq!(CHACHA20_POLY1305.key_len(), KEY_LEN);
        assert_eq!(CHACHA20_POLY1305.tag_len(), TAG_LEN);
        assert_eq!(CHACHA20_POLY1305.nonce_len(), NONCE_LEN);
    }

    #[test]
    fn round_trip() {
        let mut s = SendKey::new(&KEY);
        let r = RecvKey::new(&KEY);
        for msg in [&b""[..], b"x", b"hello, multipath world", &[0xa5; 1400]] {
            let c = s.next_counter().unwrap();
            let mut buf = vec![0u8; msg.len() + TAG_LEN + 7];
            buf[..msg.len()].copy_from_slice(msg);
            let n = s.seal(C(c), b"header", &mut buf, msg.len()).unwrap();
            assert_eq!(n, msg.len() + TAG_LEN);
            if !msg.is_empty() {
                assert_ne!(&buf[..msg.len()], msg, "encrypted");
            }
            let m = r.open(C(c), b"header", &mut buf[..n]).unwrap();
            assert_eq!(&buf[..m], msg);
        }
    }

    #[test]
    fn nonce_layout_is_zeros_then_counter_le() {
        assert_eq!(
            MessageNonce::Counter(0x0102_0304_0506_0708).bytes(),
            [0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1]
        );
        // SendKey::seal uses exactly that nonce.
        let counter = 0x1122_3344_5566_7788;
        let mut raw = b"same bytes".to_vec();
        raw.resize(10 + TAG_LEN, 0);
        let key = less_safe_key(&KEY);
        let nonce = [0, 0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11];
        seal_with_nonce(&key, nonce, b"a", &mut raw, 10).unwrap();
        assert_eq!(sealed(counter, b"a", b"same bytes"), raw);
    }

    #[test]
    fn tampering_fails_authentication() {
        let r = RecvKey::new(&KEY);
        let good = sealed(5, b"aad", b"payload bytes");

        let mut buf = good.clone();
        assert_eq!(r.open(C(6), b"aad", &mut buf), Err(AeadError::AuthFailed));

        let mut buf = good.clone();
        assert_eq!(r.open(C(5), b"aaD", &mut buf), Err(AeadError::AuthFailed));

        for bit in 0..good.len() * 8 {
            let mut buf = good.clone();
            buf[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                r.open(C(5), b"aad", &mut buf),
                Err(AeadError::AuthFailed),
                "bit {bit}"
            );
        }

        let mut buf = good.clone();
        assert_eq!(
            r.open(C(5), b"aad", &mut buf[..good.len() - 1]),
            Err(AeadError::AuthFailed)
        );

        let other = RecvKey::new(&[0x43; KEY_LEN]);
        let mut buf = good.clone();
        assert_eq!(
            other.open(C(5), b"aad", &mut buf),
            Err(AeadError::AuthFailed)
        );

        let mut buf = good;
        assert_eq!(r.open(C(5), b"aad", &mut buf), Ok(13));
    }

    #[test]
    fn short_buffers_are_typed_errors() {
        let r = RecvKey::new(&KEY);
        for len in 0..TAG_LEN {
            let mut buf = vec![0u8; len];
            assert_eq!(
                r.open(C(0), b"", &mut buf),
                Err(AeadError::BufferTooSmall {
                    need: TAG_LEN,
                    have: len
                })
            );
        }
        // Exactly a tag: an empty message, which here fails authentication.
        assert_eq!(
            r.open(C(0), b"", &mut [0u8; TAG_LEN]),
            Err(AeadError::AuthFailed)
        );

        let s = SendKey::new(&KEY);
        let mut buf = [0u8; 20];
        assert_eq!(
            s.seal(C(0), b"", &mut buf, 5),
            Err(AeadError::BufferTooSmall { need: 21, have: 20 })
        );
        assert_eq!(
            s.seal(C(0), b"", &mut buf, 100),
            Err(AeadError::BufferTooSmall {
                need: 116,
                have: 20
            })
        );
        assert_eq!(
            s.seal(C(0), b"", &mut buf, usize::MAX),
            Err(AeadError::BufferTooSmall {
                need: usize::MAX,
                have: 20
            })
        );
        assert_eq!(s.seal(C(0), b"", &mut buf, 4), Ok(20));
    }

    #[test]
    fn counters_strictly_increase() {
        let mut s = SendKey::new(&KEY);
        assert_eq!(s.messages(), 0);
        let mut prev = None;
        for i in 0..1000u64 {
            let c = s.next_counter().unwrap();
            assert_eq!(c, i);
            assert!(prev.is_none_or(|p| c > p));
            prev = Some(c);
        }
        assert_eq!(s.messages(), 1000);
    }

    #[test]
    fn exhausted_at_the_limit() {
        let mut s = SendKey::new(&KEY);
        s.set_next_counter_for_test(REJECT_AFTER_MESSAGES - 2);
        assert_eq!(s.next_counter(), Ok(REJECT_AFTER_MESSAGES - 2));
        assert_eq!(s.next_counter(), Ok(REJECT_AFTER_MESSAGES - 1));
        assert_eq!(s.next_counter(), Err(AeadError::Exhausted));
        assert_eq!(s.next_counter(), Err(AeadError::Exhausted));
        assert_eq!(s.messages(), REJECT_AFTER_MESSAGES);

        let mut buf = [0u8; TAG_LEN];
        assert_eq!(
            s.seal(C(REJECT_AFTER_MESSAGES), b"", &mut buf, 0),
            Err(AeadError::Exhausted)
        );
        assert_eq!(
            s.seal(C(u64::MAX), b"", &mut buf, 0),
            Err(AeadError::Exhausted)
        );
        // The last valid counter still seals and opens.
        assert_eq!(
            s.seal(C(REJECT_AFTER_MESSAGES - 1), b"", &mut buf, 0),
            Ok(TAG_LEN)
        );
        assert_eq!(
            RecvKey::new(&KEY).open(C(REJECT_AFTER_MESSAGES - 1), b"", &mut buf),
            Ok(0)
        );
    }

    #[test]
    fn debug_never_shows_key_bytes() {
        let key = [0xab; KEY_LEN];
        let s = format!("{:?} {:?}", SendKey::new(&key), RecvKey::new(&key));
        assert!(!s.to_lowercase().contains("ab, "), "{s}");
        assert!(!s.contains("171"), "{s}");
        assert!(s.contains("next_counter: 0"), "{s}");
    }

    #[test]
    fn rfc8439_2_8_2_known_answer() {
        // RFC 8439 §2.8.2: Example and Test Vector for AEAD_CHACHA20_POLY1305. Its nonce
        // (07000000 || 4041424344454647) is not our counter layout, so the vector goes
        // through the raw-nonce helpers that SendKey::seal and RecvKey::open wrap.
        let key: [u8; KEY_LEN] =
            hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
                .try_into()
                .unwrap();
        let nonce: [u8; NONCE_LEN] = hex("070000004041424344454647").try_into().unwrap();
        let aad = hex("50515253c0c1c2c3c4c5c6c7");
        let plaintext: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer \
            you only one tip for the future, sunscreen would be it.";
        let ciphertext = hex("
            d31a8d34648e60db7b86afbc53ef7ec2 a4aded51296e08fea9e2b5a736ee62d6
            3dbea45e8ca9671282fafb69da92728b 1a71de0a9e060b2905d6a5b67ecd3b36
            92ddbd7f2d778b8c9803aee328091b58 fab324e4fad675945585808b4831d7bc
            3ff4def08e4b7a9de576d26586cec64b 6116");
        let tag = hex("1ae10b594f09e26a7e902ecbd0600691");
        assert_eq!(plaintext.len(), 114);

        let k = less_safe_key(&key);
        let mut buf = plaintext.to_vec();
        buf.resize(plaintext.len() + TAG_LEN, 0);
        let n = seal_with_nonce(&k, nonce, &aad, &mut buf, plaintext.len()).unwrap();
        assert_eq!(n, 114 + TAG_LEN);
        assert_eq!(&buf[..114], &ciphertext[..]);
        assert_eq!(&buf[114..], &tag[..]);

        let m = open_with_nonce(&k, nonce, &aad, &mut buf).unwrap();
        assert_eq!(&buf[..m], plaintext);
    }

    #[test]
    fn data_nonces_are_tagged_and_never_meet_counter_nonces() {
        let prefix = [0x23, 0x00, 0x01, 0x02, 0x03];
        assert_eq!(
            MessageNonce::Data(prefix).bytes(),
            [1, 0x23, 0x00, 0x01, 0x02, 0x03, 0, 0, 0, 0, 0, 0]
        );
        // Counter nonces start with four zero bytes, data nonces with 1.
        for c in [0, 1, u64::MAX] {
            assert_eq!(MessageNonce::Counter(c).bytes()[..4], [0; 4]);
        }
        let s = SendKey::new(&KEY);
        let r = RecvKey::new(&KEY);
        let mut buf = b"engine datagram".to_vec();
        buf.resize(15 + TAG_LEN, 0);
        let n = s
            .seal(MessageNonce::Data(prefix), b"ad", &mut buf, 15)
            .unwrap();
        let mut other = buf.clone();
        assert_eq!(
            r.open(
                MessageNonce::Data([0x23, 0, 1, 2, 4]),
                b"ad",
                &mut other[..n]
            ),
            Err(AeadError::AuthFailed)
        );
        assert_eq!(
            r.open(MessageNonce::Data(prefix), b"ad", &mut buf[..n]),
            Ok(15)
        );
    }
}
