//! One handshake's keys: sealing, opening, the replay windows and the timers that retire
//! them (docs/protocol.md#rekeying; WireGuard's constants, whitepaper §6.1).
//!
//! Invariants:
//! - A [`Keypair`] never seals two messages with the same nonce. Path control takes
//!   counters from its [`SendKey`]. A data message's nonce is its engine datagram's clear
//!   prefix (path and path sequence number, docs/protocol.md#data-messages): per path, a
//!   message is sealed only if its sequence number is ahead of the last one sealed on that
//!   path, and the numbers sealed on one path under one key span less than
//!   [`PATH_SPAN_LIMIT`], far below the 2^32 at which a truncated number could come round.
//! - It refuses to seal or open once older than [`REJECT_AFTER_TIME`] or past the message
//!   limits, and a message is recorded in its replay window only after it authenticated.
//! - Memory is bounded: a 256-bit control window, and a 1 KiB window per path that ever
//!   received data under these keys (at most 16).

use std::time::Duration;

use plait_proto::Time;
use plait_proto::ids::{MAX_PATHS, expand_seq};
use plait_proto::wire::CLEAR_PREFIX_LEN;

use crate::crypto::aead::{AeadError, MessageNonce, RecvKey, SendKey, TAG_LEN};
use crate::crypto::handshake::SessionKeys;
use crate::crypto::replay::{ControlWindow, PathWindow};
use crate::message::{
    CONTROL_HEADER_LEN, DATA_AAD_LEN, DATA_HEADER_LEN, DataId, write_control_header,
    write_data_header,
};

/// The initiator starts a new handshake when its keys are this old.
pub const REKEY_AFTER_TIME: Duration = Duration::from_secs(120);
/// Keys older than this are never used again, either way.
pub const REJECT_AFTER_TIME: Duration = Duration::from_secs(180);
/// The initiator starts a new handshake after sealing this many messages.
pub const REKEY_AFTER_MESSAGES: u64 = 1 << 60;
/// A handshake without an answer is retried after this long.
pub const REKEY_TIMEOUT: Duration = Duration::from_secs(5);
/// Path sequence numbers sealed on one path under one key span less than this; beyond it
/// sealing fails (`Exhausted`) until new keys come. The receiver expands truncated
/// numbers correctly while they are within 2^31 of each other, so a span below 2^30
/// keeps every replayed copy recognisable.
pub const PATH_SPAN_LIMIT: u64 = 1 << 30;
/// The initiator starts a new handshake once one path's span reaches this (at a million
/// datagrams a second on one path, after nine minutes; keys are replaced after two).
pub const REKEY_AFTER_PATH_SPAN: u64 = PATH_SPAN_LIMIT / 2;
/// The shortest rekey time [`KeyLifetime::shortened`] accepts: two [`REKEY_TIMEOUT`]s, so
/// an initiation and its retry fit before the next rekey is due.
pub const MIN_REKEY_AFTER_TIME: Duration = Duration::from_secs(10);

/// When an initiator's keys are replaced and when keys are retired: WireGuard's
/// [`REKEY_AFTER_TIME`] and [`REJECT_AFTER_TIME`] unless a test shortens them (the client's
/// `[test_only] rekey_after_s`, docs/tunnel-config.md), so that root tests can watch
/// several rekeys in seconds instead of minutes.
///
/// Invariant: `MIN_REKEY_AFTER_TIME <= rekey_after <= REKEY_AFTER_TIME` and `reject_after
/// = rekey_after + (REJECT_AFTER_TIME - REKEY_AFTER_TIME)`: keys are only ever replaced
/// sooner, never kept longer, and a rekey has the same minute to complete before the keys
/// it replaces expire as with the defaults. Nonces are unaffected: each handshake makes
/// fresh keys whose spans and counters start again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyLifetime {
    rekey_after: Duration,
    reject_after: Duration,
}

impl Default for KeyLifetime {
    fn default() -> KeyLifetime {
        KeyLifetime {
            rekey_after: REKEY_AFTER_TIME,
            reject_after: REJECT_AFTER_TIME,
        }
    }
}

impl KeyLifetime {
    /// Keys replaced after `rekey_after` (between [`MIN_REKEY_AFTER_TIME`] and
    /// [`REKEY_AFTER_TIME`]) and retired a minute later; anything else is refused with
    /// the range it must be in.
    pub fn shortened(rekey_after: Duration) -> Result<KeyLifetime, String> {
        if !(MIN_REKEY_AFTER_TIME..=REKEY_AFTER_TIME).contains(&rekey_after) {
            return Err(format!(
                "a rekey time must be between {} and {} s, got {rekey_after:?}",
                MIN_REKEY_AFTER_TIME.as_secs(),
                REKEY_AFTER_TIME.as_secs()
            ));
        }
        Ok(KeyLifetime {
            rekey_after,
            reject_after: rekey_after + (REJECT_AFTER_TIME - REKEY_AFTER_TIME),
        })
    }

    /// The initiator starts a new handshake when its keys are this old.
    pub fn rekey_after(&self) -> Duration {
        self.rekey_after
    }

    /// Keys older than this are never used again, either way.
    pub fn reject_after(&self) -> Duration {
        self.reject_after
    }
}

/// What one sealed or received message is, as its nonce and replay window see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealedId {
    /// A data message.
    Data(DataId),
    /// A path-control message's counter.
    Control(u64),
}

impl SealedId {
    /// Where the opened payload starts in the message: the engine datagram (its clear
    /// prefix included) for data, the path frame for control.
    pub fn payload_offset(self) -> usize {
        match self {
            SealedId::Data(_) => DATA_HEADER_LEN,
            SealedId::Control(_) => CONTROL_HEADER_LEN,
        }
    }

    /// Bytes before the sealed part: the associated data.
    fn aad_len(self) -> usize {
        match self {
            SealedId::Data(_) => DATA_AAD_LEN,
            SealedId::Control(_) => CONTROL_HEADER_LEN,
        }
    }

    fn nonce(self) -> MessageNonce {
        match self {
            SealedId::Data(id) => MessageNonce::Data(id.0),
            SealedId::Control(c) => MessageNonce::Counter(c),
        }
    }
}

/// The data sequence numbers sealed on one path under one key: `first`, then numbers
/// ahead of each other up to `last`, `span` apart in all.
#[derive(Clone, Copy, Debug)]
struct SealedSpan {
    first: u32,
    last: u32,
    span: u64,
}

impl SealedSpan {
    /// Whether `seq` may follow: ahead of `last` (serial arithmetic) and within the limit.
    fn advance(&mut self, seq: u32) -> Result<(), AeadError> {
        let step = seq.wrapping_sub(self.last);
        if step == 0 || step >= 1 << 31 {
            return Err(AeadError::NotAhead);
        }
        let span = self.span + u64::from(step);
        if span >= PATH_SPAN_LIMIT {
            return Err(AeadError::Exhausted);
        }
        self.last = seq;
        self.span = span;
        Ok(())
    }

    /// Whether `seq` lies within what was sealed (first ..= last).
    fn covers(&self, seq: u32) -> bool {
        u64::from(seq.wrapping_sub(self.first)) <= self.span
    }
}

/// Why a message was not opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// Keys expired.
    Expired,
    /// Already seen, or older than its window.
    Replayed,
    /// The AEAD tag did not verify.
    Auth,
}

/// Keys from one completed handshake.
#[derive(Debug)]
pub struct Keypair {
    send: SendKey,
    recv: RecvKey,
    /// Per path, the data sequence numbers sealed so far.
    sealed: [Option<SealedSpan>; MAX_PATHS],
    /// Data messages sealed so far.
    data_sealed: u64,
    /// Per path, the data replay window, made with the path's first message.
    path_replay: [Option<Box<PathWindow>>; MAX_PATHS],
    control_replay: ControlWindow,
    /// This side's index: the peer's data messages name it as receiver.
    pub local_index: u32,
    /// The peer's index: this side's data messages name it as receiver.
    pub remote_index: u32,
    /// When the handshake completed.
    pub created: Time,
    /// Whether this side initiated the handshake (only the initiator rekeys).
    pub initiator: bool,
    /// When these keys are replaced and retired.
    lifetime: KeyLifetime,
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
            sealed: [None; MAX_PATHS],
            data_sealed: 0,
            path_replay: Default::default(),
            control_replay: ControlWindow::new(),
            local_index,
            remote_index,
            created,
            initiator,
            lifetime: KeyLifetime::default(),
        }
    }

    /// The same keys under `lifetime` instead of the default one.
    pub fn with_lifetime(mut self, lifetime: KeyLifetime) -> Keypair {
        self.lifetime = lifetime;
        self
    }

    /// When the initiator wants new keys because these are old.
    pub fn rekey_at(&self) -> Time {
        self.created + self.lifetime.rekey_after
    }

    /// When these keys stop sealing and opening.
    pub fn expires_at(&self) -> Time {
        self.created + self.lifetime.reject_after
    }

    /// How old the keys are at `now`.
    pub fn age(&self, now: Time) -> Duration {
        now.saturating_since(self.created)
    }

    /// Whether the keys may still seal and open.
    pub fn is_usable(&self, now: Time) -> bool {
        self.age(now) < self.lifetime.reject_after
    }

    /// Whether the initiator should start a new handshake now.
    pub fn needs_rekey(&self, now: Time) -> bool {
        let widest = self.sealed.iter().flatten().map(|s| s.span).max();
        self.initiator
            && (self.age(now) >= self.lifetime.rekey_after
                || self.messages_sent() >= REKEY_AFTER_MESSAGES
                || widest.is_some_and(|w| w >= REKEY_AFTER_PATH_SPAN))
    }

    /// Seals the engine datagram in `buf[DATA_HEADER_LEN..DATA_HEADER_LEN + len]` into a
    /// whole data message in place (header in front, tag behind); its first
    /// [`CLEAR_PREFIX_LEN`] bytes stay clear and are the nonce. Returns the message length.
    /// `buf` must have room for the tag. Refused (`NotAhead`) if the datagram's path
    /// sequence number is not ahead of the last one sealed on its path.
    pub fn seal(&mut self, now: Time, buf: &mut [u8], len: usize) -> Result<usize, AeadError> {
        if !self.is_usable(now) {
            return Err(AeadError::Exhausted);
        }
        let need = DATA_HEADER_LEN + len + TAG_LEN;
        if buf.len() < need || len <= CLEAR_PREFIX_LEN {
            return Err(AeadError::BufferTooSmall {
                need: need.max(DATA_AAD_LEN + 1 + TAG_LEN),
                have: buf.len(),
            });
        }
        if self.messages_sent() >= REKEY_AFTER_MESSAGES {
            return Err(AeadError::Exhausted);
        }
        let Some(prefix) = buf
            .get(DATA_HEADER_LEN..)
            .and_then(|b| b.first_chunk::<CLEAR_PREFIX_LEN>())
        else {
            return Err(AeadError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        };
        let id = DataId(*prefix);
        let (path, seq) = (id.path(), id.seq());
        let span = match self.sealed[path] {
            Some(mut span) => {
                span.advance(seq)?;
                span
            }
            None => SealedSpan {
                first: seq,
                last: seq,
                span: 0,
            },
        };
        let mut header = [0u8; DATA_HEADER_LEN];
        write_data_header(&mut header, self.remote_index);
        buf[..DATA_HEADER_LEN].copy_from_slice(&header);
        let (aad, body) = buf.split_at_mut(DATA_AAD_LEN);
        let sealed = self
            .send
            .seal(MessageNonce::Data(id.0), aad, body, len - CLEAR_PREFIX_LEN)?;
        self.sealed[path] = Some(span);
        self.data_sealed += 1;
        Ok(DATA_AAD_LEN + sealed)
    }

    /// Seals the control frame of `frame_len` bytes in `buf[CONTROL_HEADER_LEN..]` (a
    /// path frame or a registration) into a whole path-control message in place, with
    /// the next control counter. Returns the message length.
    pub fn seal_control(
        &mut self,
        now: Time,
        buf: &mut [u8],
        frame_len: usize,
    ) -> Result<usize, AeadError> {
        if !self.is_usable(now) {
            return Err(AeadError::Exhausted);
        }
        let need = CONTROL_HEADER_LEN + frame_len + TAG_LEN;
        if buf.len() < need {
            return Err(AeadError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        let counter = self.send.next_counter()?;
        let mut header = [0u8; CONTROL_HEADER_LEN];
        write_control_header(&mut header, self.remote_index, counter);
        let (head, body) = buf.split_at_mut(CONTROL_HEADER_LEN);
        head.copy_from_slice(&header);
        let sealed = self
            .send
            .seal(MessageNonce::Counter(counter), &header, body, frame_len)?;
        Ok(CONTROL_HEADER_LEN + sealed)
    }

    /// Opens a whole data or path-control message in place; on success the payload is
    /// `msg[id.payload_offset()..][..n]` and `n` is returned (for data, the whole engine
    /// datagram, its clear prefix included).
    pub fn open(&mut self, now: Time, id: SealedId, msg: &mut [u8]) -> Result<usize, OpenError> {
        if !self.is_usable(now) {
            return Err(OpenError::Expired);
        }
        let aad_len = id.aad_len();
        if msg.len() < aad_len + TAG_LEN {
            return Err(OpenError::Auth);
        }
        let position = self.window_position(id);
        if !self.may_accept(id, position) {
            return Err(OpenError::Replayed);
        }
        let (aad, body) = msg.split_at_mut(aad_len);
        let n = self
            .recv
            .open(id.nonce(), aad, body)
            .map_err(|_| OpenError::Auth)?;
        if !self.accept(id, position) {
            return Err(OpenError::Replayed);
        }
        Ok(aad_len - id.payload_offset() + n)
    }

    /// The message's place in its window: the counter, or the path sequence number
    /// expanded near the highest one accepted on its path (an empty window starts in the
    /// second 2^32 block, so numbers a little below the first one still expand below it).
    fn window_position(&self, id: SealedId) -> u64 {
        match id {
            SealedId::Control(c) => c,
            SealedId::Data(d) => {
                let highest = self.path_replay[d.path()]
                    .as_ref()
                    .and_then(|w| w.highest());
                match highest {
                    Some(h) => expand_seq(h + 1, d.seq()),
                    None => (1 << 32) | u64::from(d.seq()),
                }
            }
        }
    }

    fn may_accept(&self, id: SealedId, position: u64) -> bool {
        match id {
            SealedId::Control(_) => self.control_replay.may_accept(position),
            SealedId::Data(d) => self.path_replay[d.path()]
                .as_ref()
                .is_none_or(|w| w.may_accept(position)),
        }
    }

    fn accept(&mut self, id: SealedId, position: u64) -> bool {
        match id {
            SealedId::Control(_) => self.control_replay.accept(position),
            SealedId::Data(d) => self.path_replay[d.path()]
                .get_or_insert_with(Box::default)
                .accept(position),
        }
    }

    /// Whether a data message with this prefix was sealed under these keys (an
    /// unknown-index hint must echo one, docs/protocol.md#unknown-index).
    pub fn sealed_data(&self, id: DataId) -> bool {
        self.sealed[id.path()].is_some_and(|s| s.covers(id.seq()))
    }

    /// Messages sealed so far, data and path control.
    pub fn messages_sent(&self) -> u64 {
        self.data_sealed + self.send.messages()
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

    /// An engine datagram's bytes: version 2, `path`, `seq`, then `rest`.
    fn datagram(path: u8, seq: u32, rest: &[u8]) -> Vec<u8> {
        let mut d = vec![0x20 | path];
        d.extend_from_slice(&seq.to_be_bytes());
        d.extend_from_slice(rest);
        d
    }

    fn try_seal(k: &mut Keypair, now: Time, dgram: &[u8]) -> Result<Vec<u8>, AeadError> {
        let mut buf = vec![0u8; DATA_HEADER_LEN + dgram.len() + TAG_LEN];
        buf[DATA_HEADER_LEN..DATA_HEADER_LEN + dgram.len()].copy_from_slice(dgram);
        let n = k.seal(now, &mut buf, dgram.len())?;
        buf.truncate(n);
        Ok(buf)
    }

    fn seal(k: &mut Keypair, now: Time, path: u8, seq: u32, rest: &[u8]) -> Vec<u8> {
        try_seal(k, now, &datagram(path, seq, rest)).unwrap()
    }

    fn id(msg: &[u8]) -> SealedId {
        match parse(msg) {
            Ok(Message::Data { id, .. }) => SealedId::Data(id),
            Ok(Message::PathControl { counter, .. }) => SealedId::Control(counter),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn seal_open_round_trip_and_replay() {
        let (mut a, mut b) = pair();
        let now = Time::from_nanos(1);
        let dgram = datagram(3, 7, b"timestamp and frames");
        let msg = try_seal(&mut a, now, &dgram).unwrap();
        assert_eq!(msg.len(), dgram.len() + crate::message::DATA_OVERHEAD);
        // Type, receiver index, then the engine datagram's clear prefix.
        assert_eq!(msg[..10], [4, 20, 0, 0, 0, 0x23, 0, 0, 0, 7]);
        assert_ne!(&msg[10..10 + 20], b"timestamp and frames", "encrypted");
        let mut m = msg.clone();
        let n = b.open(now, id(&msg), &mut m).unwrap();
        assert_eq!(&m[DATA_HEADER_LEN..DATA_HEADER_LEN + n], &dgram[..]);
        let mut again = msg.clone();
        assert_eq!(b.open(now, id(&msg), &mut again), Err(OpenError::Replayed));
    }

    #[test]
    fn a_path_sequence_number_that_does_not_move_forward_is_never_sealed() {
        let (mut a, _) = pair();
        let now = Time::from_nanos(1);
        seal(&mut a, now, 0, 10, b"x");
        seal(&mut a, now, 0, 12, b"x");
        for stale in [12, 11, 10, 0, 12 + (1 << 31)] {
            assert_eq!(
                try_seal(&mut a, now, &datagram(0, stale, b"x")),
                Err(AeadError::NotAhead),
                "{stale}"
            );
        }
        // Another path has its own numbers; wrapping past 2^32 is moving forward.
        seal(&mut a, now, 1, 10, b"x");
        seal(&mut a, now, 2, u32::MAX, b"x");
        seal(&mut a, now, 2, 1, b"x");
        assert_eq!(a.messages_sent(), 5);
        assert!(a.sealed_data(DataId([0x22, 0, 0, 0, 0])));
        assert!(!a.sealed_data(DataId([0x22, 0, 0, 0, 2])));
        assert!(!a.sealed_data(DataId([0x23, 0, 0, 0, 0])));
    }

    #[test]
    fn one_path_s_span_under_one_key_is_bounded() {
        let (mut a, _) = pair();
        let now = Time::from_nanos(1);
        seal(&mut a, now, 0, 0, b"x");
        assert!(!a.needs_rekey(now));
        let half = REKEY_AFTER_PATH_SPAN as u32;
        seal(&mut a, now, 0, half, b"x");
        assert!(a.needs_rekey(now), "a wide span asks for new keys");
        assert_eq!(
            try_seal(&mut a, now, &datagram(0, PATH_SPAN_LIMIT as u32, b"x")),
            Err(AeadError::Exhausted)
        );
        seal(&mut a, now, 0, PATH_SPAN_LIMIT as u32 - 1, b"x");
    }

    #[test]
    fn each_path_has_its_own_window() {
        let (mut a, mut b) = pair();
        let now = Time::from_nanos(1);
        let first = seal(&mut a, now, 0, 5, b"x");
        let late = seal(&mut a, now, 0, 6, b"x");
        let far = seal(&mut a, now, 0, 7 + PathWindow::SIZE as u32, b"x");
        let other_path = seal(&mut a, now, 1, 5, b"x");
        for m in [&first, &far, &other_path] {
            assert!(b.open(now, id(m), &mut m.clone()).is_ok());
        }
        // Behind the window of its own path.
        assert_eq!(
            b.open(now, id(&late), &mut late.clone()),
            Err(OpenError::Replayed)
        );
        // A datagram that trails the newest of its path across 2^32 still expands right.
        let (mut a, mut b) = pair();
        let newest = seal(&mut a, now, 0, u32::MAX - 1, b"x");
        let after_wrap = seal(&mut a, now, 0, 3, b"x");
        assert!(
            b.open(now, id(&after_wrap), &mut after_wrap.clone())
                .is_ok()
        );
        assert!(b.open(now, id(&newest), &mut newest.clone()).is_ok());
        assert_eq!(
            b.open(now, id(&newest), &mut newest.clone()),
            Err(OpenError::Replayed)
        );
    }

    #[test]
    fn path_control_has_its_own_counters_and_window() {
        let (mut a, mut b) = pair();
        let now = Time::from_nanos(1);
        let mut buf = vec![0u8; crate::message::PATH_CONTROL_LEN];
        let frame_len = crate::message::PATH_FRAME_LEN;
        buf[CONTROL_HEADER_LEN..CONTROL_HEADER_LEN + frame_len].copy_from_slice(b"0123456789");
        let n = a.seal_control(now, &mut buf, frame_len).unwrap();
        assert_eq!(n, crate::message::PATH_CONTROL_LEN);
        assert_eq!(id(&buf), SealedId::Control(0));
        let data = seal(&mut a, now, 0, 0, b"x");
        let mut m = buf.clone();
        let n = b.open(now, SealedId::Control(0), &mut m).unwrap();
        assert_eq!(
            &m[CONTROL_HEADER_LEN..CONTROL_HEADER_LEN + n],
            b"0123456789"
        );
        assert!(b.open(now, id(&data), &mut data.clone()).is_ok());
        assert_eq!(
            b.open(now, SealedId::Control(0), &mut buf.clone()),
            Err(OpenError::Replayed)
        );
        // A control message cannot pass for data or the other way round.
        let mut as_data = buf.clone();
        as_data[0] = crate::message::TYPE_DATA;
        let (mut _a2, mut b2) = pair();
        let fake = DataId(*as_data[DATA_HEADER_LEN..].first_chunk().unwrap());
        assert_eq!(
            b2.open(now, SealedId::Data(fake), &mut as_data),
            Err(OpenError::Auth)
        );
    }

    #[test]
    fn forged_or_altered_messages_fail_and_do_not_burn_the_number() {
        let (mut a, mut b) = pair();
        let now = Time::from_nanos(1);
        let msg = seal(&mut a, now, 1, 9, b"payload");
        for i in 0..msg.len() {
            let mut bad = msg.clone();
            bad[i] ^= 0x01;
            let got = b.open(now, id(&msg), &mut bad);
            assert_eq!(got, Err(OpenError::Auth), "byte {i}");
        }
        // The genuine message still opens: failures recorded nothing.
        let mut m = msg.clone();
        assert!(b.open(now, id(&msg), &mut m).is_ok());
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
        assert_eq!(a.seal(late, &mut buf, 12), Err(AeadError::Exhausted));
        let mut msg = seal(&mut a, Time::from_nanos(1), 0, 0, b"x");
        assert_eq!(
            b.open(late, id(&msg), &mut msg.clone()),
            Err(OpenError::Expired)
        );
        let _ = &mut msg;
    }

    /// A shortened lifetime (root tests' `[test_only] rekey_after_s`) moves both timers
    /// forward by the same amount; nothing outside 10..=120 s is accepted, so keys are
    /// never kept longer than WireGuard's, and the rekey always comes before the expiry.
    #[test]
    fn a_shortened_lifetime_rekeys_and_expires_sooner() {
        let (a, b) = pair();
        assert_eq!(a.rekey_at(), Time::ZERO + REKEY_AFTER_TIME);
        assert_eq!(a.expires_at(), Time::ZERO + REJECT_AFTER_TIME);
        let short = KeyLifetime::shortened(Duration::from_secs(10)).unwrap();
        let (mut a, b) = (a.with_lifetime(short), b.with_lifetime(short));
        let at = |s| Time::ZERO + Duration::from_secs(s);
        assert!(!a.needs_rekey(at(9)));
        assert!(a.needs_rekey(at(10)));
        assert!(!b.needs_rekey(at(10)), "only the initiator rekeys");
        assert_eq!(a.rekey_at(), at(10));
        assert_eq!(a.expires_at(), at(70));
        assert!(a.is_usable(at(69)) && !a.is_usable(at(70)));
        let mut buf = vec![0u8; 64];
        assert_eq!(a.seal(at(70), &mut buf, 12), Err(AeadError::Exhausted));
        for bad in [0, 9, 121, 3600] {
            assert!(
                KeyLifetime::shortened(Duration::from_secs(bad)).is_err(),
                "{bad}"
            );
        }
        for ok in [10, 11, 119, 120] {
            let l = KeyLifetime::shortened(Duration::from_secs(ok)).unwrap();
            assert!(l.rekey_after() + REKEY_TIMEOUT < l.reject_after());
            assert!(l.reject_after() <= REJECT_AFTER_TIME);
        }
    }

    #[test]
    fn short_buffers_are_errors() {
        let (mut a, mut b) = pair();
        let mut buf = vec![0u8; 20];
        assert!(matches!(
            a.seal(Time::ZERO, &mut buf, 10),
            Err(AeadError::BufferTooSmall { .. })
        ));
        // An engine datagram no longer than its clear prefix has nothing to seal.
        let mut buf = vec![0u8; 64];
        assert!(matches!(
            a.seal(Time::ZERO, &mut buf, CLEAR_PREFIX_LEN),
            Err(AeadError::BufferTooSmall { .. })
        ));
        let mut short = vec![4u8; 10];
        let any = SealedId::Data(DataId([0x20, 0, 0, 0, 0]));
        assert_eq!(b.open(Time::ZERO, any, &mut short), Err(OpenError::Auth));
    }
}
