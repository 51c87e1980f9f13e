//! One handshake's keys: sealing, opening, the replay window and the timers that retire
//! them (docs/protocol.md#rekeying; WireGuard's constants, whitepaper §6.1).
//!
//! Invariants: a [`Keypair`] never seals two messages with the same counter; it refuses to
//! seal or open once older than [`REJECT_AFTER_TIME`] or past the message limit; a counter
//! is recorded in the replay window only after its message authenticated.

use std::time::Duration;

use plait_proto::Time;

use crate::crypto::aead::{AeadError, RecvKey, SendKey, TAG_LEN};
use crate::crypto::handshake::SessionKeys;
use crate::crypto::replay::ReplayWindow;
use crate::message::{DATA_HEADER_LEN, TYPE_DATA, write_sealed_header};

/// The initiator starts a new handshake when its keys are this old.
pub const REKEY_AFTER_TIME: Duration = Duration::from_secs(120);
/// Keys older than this are never used again, either way.
pub const REJECT_AFTER_TIME: Duration = Duration::from_secs(180);
/// The initiator starts a new handshake after sealing this many messages.
pub const REKEY_AFTER_MESSAGES: u64 = 1 << 60;
/// A handshake without an answer is retried after this long.
pub const REKEY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a message was not opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// Keys expired.
    Expired,
    /// Counter already seen or older than the window.
    Replayed,
    /// The AEAD tag did not verify.
    Auth,
}

/// Keys from one completed handshake.
#[derive(Debug)]
pub struct Keypair {
    send: SendKey,
    recv: RecvKey,
    replay: ReplayWindow,
    /// This side's index: the peer's data messages name it as receiver.
    pub local_index: u32,
    /// The peer's index: this side's data messages name it as receiver.
    pub remote_index: u32,
    /// When the handshake completed.
    pub created: Time,
    /// Whether this side initiated the handshake (only the initiator rekeys).
    pub initiator: bool,
}

impl Keypair {
    /// Keys from a finished handshake.
    pub fn new(
        keys: &SessionKeys,
        local_index: u32,
        remote_index: u32,
        created: Time,
        initiator: bool,
    ) -> Keypair {
        Keypair {
            send: SendKey::new(&keys.send),
            recv: RecvKey::new(&keys.recv),
            replay: ReplayWindow::new(),
            local_index,
            remote_index,
            created,
            initiator,
        }
    }

    /// How old the keys are at `now`.
    pub fn age(&self, now: Time) -> Duration {
        now.saturating_since(self.created)
    }

    /// Whether the keys may still seal and open.
    pub fn is_usable(&self, now: Time) -> bool {
        self.age(now) < REJECT_AFTER_TIME
    }

    /// Whether the initiator should start a new handshake now.
    pub fn needs_rekey(&self, now: Time) -> bool {
        self.initiator
            && (self.age(now) >= REKEY_AFTER_TIME || self.send.messages() >= REKEY_AFTER_MESSAGES)
    }

    /// Seals the engine datagram in `buf[DATA_HEADER_LEN..DATA_HEADER_LEN + len]` into a
    /// whole data message in place (header in front, tag behind). Returns the message
    /// length. `buf` must have room for the tag.
    pub fn seal(&mut self, now: Time, buf: &mut [u8], len: usize) -> Result<usize, AeadError> {
        self.seal_as(now, TYPE_DATA, buf, len)
    }

    /// [`Keypair::seal`] for a message of type `kind` ([`TYPE_DATA`] or
    /// [`crate::message::TYPE_PATH_CONTROL`]): same keys, same counter sequence; the type
    /// byte is in the associated data.
    pub fn seal_as(
        &mut self,
        now: Time,
        kind: u8,
        buf: &mut [u8],
        len: usize,
    ) -> Result<usize, AeadError> {
        if !self.is_usable(now) {
            return Err(AeadError::Exhausted);
        }
        let need = DATA_HEADER_LEN + len + TAG_LEN;
        if buf.len() < need {
            return Err(AeadError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        let counter = self.send.next_counter()?;
        let (head, body) = buf.split_at_mut(DATA_HEADER_LEN);
        let mut header = [0u8; DATA_HEADER_LEN];
        write_sealed_header(&mut header, kind, self.remote_index, counter);
        head.copy_from_slice(&header);
        let sealed = self.send.seal(counter, &header, body, len)?;
        Ok(DATA_HEADER_LEN + sealed)
    }

    /// Opens a whole data message in place; on success the engine datagram is
    /// `msg[DATA_HEADER_LEN..DATA_HEADER_LEN + n]` and `n` is returned.
    pub fn open(&mut self, now: Time, counter: u64, msg: &mut [u8]) -> Result<usize, OpenError> {
        if !self.is_usable(now) {
            return Err(OpenError::Expired);
        }
        if msg.len() < DATA_HEADER_LEN + TAG_LEN {
            return Err(OpenError::Auth);
        }
        if !self.replay.may_accept(counter) {
            return Err(OpenError::Replayed);
        }
        let (head, body) = msg.split_at_mut(DATA_HEADER_LEN);
        let n = self
            .recv
            .open(counter, head, body)
            .map_err(|_| OpenError::Auth)?;
        if !self.replay.accept(counter) {
            return Err(OpenError::Replayed);
        }
        Ok(n)
    }

    /// Messages sealed so far.
    pub fn messages_sent(&self) -> u64 {
        self.send.messages()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, parse};

    fn pair() -> (Keypair, Keypair) {
        let a = SessionKeys {
            send: [1; 32],
            recv: [2; 32],
        };
        let b = SessionKeys {
            send: [2; 32],
            recv: [1; 32],
        };
        (
            Keypair::new(&a, 10, 20, Time::ZERO, true),
            Keypair::new(&b, 20, 10, Time::ZERO, false),
        )
    }

    fn seal(k: &mut Keypair, now: Time, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; DATA_HEADER_LEN + payload.len() + TAG_LEN];
        buf[DATA_HEADER_LEN..DATA_HEADER_LEN + payload.len()].copy_from_slice(payload);
        let n = k.seal(now, &mut buf, payload.len()).unwrap();
        buf.truncate(n);
        buf
    }

    fn counter(msg: &[u8]) -> u64 {
        match parse(msg) {
            Ok(Message::Data { counter, .. }) => counter,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn seal_open_round_trip_and_replay() {
        let (mut a, mut b) = pair();
        let now = Time::from_nanos(1);
        let msg = seal(&mut a, now, b"hello");
        assert_eq!(
            parse(&msg),
            Ok(Message::Data {
                receiver: 20,
                counter: 0
            })
        );
        let mut m = msg.clone();
        let n = b.open(now, counter(&msg), &mut m).unwrap();
        assert_eq!(&m[DATA_HEADER_LEN..DATA_HEADER_LEN + n], b"hello");
        let mut again = msg.clone();
        assert_eq!(b.open(now, 0, &mut again), Err(OpenError::Replayed));
    }

    #[test]
    fn counters_never_repeat() {
        let (mut a, _) = pair();
        let now = Time::from_nanos(1);
        let cs: Vec<u64> = (0..100)
            .map(|_| counter(&seal(&mut a, now, b"x")))
            .collect();
        assert!(cs.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn forged_or_altered_messages_fail_and_do_not_burn_the_counter() {
        let (mut a, mut b) = pair();
        let now = Time::from_nanos(1);
        let msg = seal(&mut a, now, b"payload");
        for i in 0..msg.len() {
            let mut bad = msg.clone();
            bad[i] ^= 0x01;
            let c = counter(&msg);
            assert_eq!(b.open(now, c, &mut bad), Err(OpenError::Auth), "byte {i}");
        }
        // The genuine message still opens: failures recorded nothing.
        let mut m = msg.clone();
        assert!(b.open(now, counter(&msg), &mut m).is_ok());
    }

    #[test]
    fn keys_expire() {
        let (mut a, mut b) = pair();
        let late = Time::ZERO + REJECT_AFTER_TIME;
        assert!(a.needs_rekey(Time::ZERO + REKEY_AFTER_TIME));
        assert!(
            !b.needs_rekey(Time::ZERO + REKEY_AFTER_TIME),
            "only the initiator rekeys"
        );
        let mut buf = vec![0u8; 64];
        assert_eq!(a.seal(late, &mut buf, 4), Err(AeadError::Exhausted));
        let mut msg = seal(&mut a, Time::from_nanos(1), b"x");
        assert_eq!(b.open(late, 0, &mut msg), Err(OpenError::Expired));
    }

    #[test]
    fn short_buffers_are_errors() {
        let (mut a, mut b) = pair();
        let mut buf = vec![0u8; 20];
        assert!(matches!(
            a.seal(Time::ZERO, &mut buf, 10),
            Err(AeadError::BufferTooSmall { .. })
        ));
        let mut short = vec![4u8; 10];
        assert_eq!(b.open(Time::ZERO, 0, &mut short), Err(OpenError::Auth));
    }
}
