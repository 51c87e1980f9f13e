//! The tunnel's outer messages: what travels in each UDP datagram
//! (docs/protocol.md#tunnel-messages).
//!
//! Six types, all little-endian. The three handshake messages start with a type byte and
//! three reserved zero bytes (WireGuard's shapes, but for the response's Noise payload,
//! which repeats the server's index, and the response's lack of a mac2 field); the other
//! three, which WireGuard's data message inspired but which are plait's own, start with
//! the type byte and the receiver index at once, to keep the per-packet overhead down:
//!
//! | type | name         | layout                                                              | size |
//! |------|--------------|---------------------------------------------------------------------|------|
//! | 1    | initiation   | type, 0,0,0, sender index u32, Noise message 1 (112 B), mac1, mac2   | 152  |
//! | 2    | response     | type, 0,0,0, sender u32, receiver u32, Noise message 2 (53 B), mac1  | 81   |
//! | 3    | cookie reply | type, 0,0,0, receiver u32, nonce (24 B), sealed cookie (32 B)        | 64   |
//! | 4    | data         | type, receiver u32, engine datagram (its first 5 B clear), tag       | 21 + n |
//! | 5    | unknown index | type, receiver u32, the data message's 5 clear bytes (echoed), mac  | 26   |
//! | 6    | path control | type, receiver u32, counter u64, AEAD(path frame, 10 B)              | 39   |
//!
//! A data message leaves the engine datagram's first [`CLEAR_PREFIX_LEN`] bytes (version
//! and path, path sequence number) unencrypted: they are the message's nonce, so no
//! counter of its own travels (docs/protocol.md#data-messages). Its associated data is the
//! type, the index and those bytes.
//!
//! mac1 and mac2 (16 bytes each) are the denial-of-service defence of
//! docs/protocol.md#dos ([`crate::crypto::cookie`]); they are outside the Noise transcript.
//! A response or a cookie reply is smaller than the initiation that caused it, so the
//! server can never be used to amplify traffic; so is an unknown-index hint than the data
//! message it answers (docs/protocol.md#unknown-index). The handshake authenticates the indices in
//! the handshake headers ([`crate::crypto::handshake`]); a data message's AEAD covers its
//! whole header.
//!
//! A path-control message (docs/protocol.md#path-validation) is sealed under the same keys
//! as data, with a counter nonce of its own family and its own replay window; its type
//! byte is part of the associated data, so neither can pass for the other. Inside is a [`PathFrame`]:
//! a PATH_CHALLENGE or PATH_RESPONSE for one path, with an 8-byte token, or a binding
//! frame (PATH_WITHDRAW, PATH_RESTORE, BINDING_ACK: docs/protocol.md#binding) whose
//! 8 bytes are a sequence number.
//!
//! Every offset and length of these layouts, and of the handshake payloads inside Noise,
//! is a constant here; the rest of the tunnel reads and writes messages through them.
//!
//! Invariants: [`parse`] never panics and accepts only the exact sizes above (data: at
//! least the header, the clear prefix and the tag); the writers take buffers of their
//! header's size, so they cannot write out of bounds.

use plait_proto::wire::CLEAR_PREFIX_LEN;
use thiserror::Error;

use crate::crypto::aead::TAG_LEN;

/// Handshake initiation, client to server.
pub const TYPE_INITIATION: u8 = 1;
/// Handshake response, server to client.
pub const TYPE_RESPONSE: u8 = 2;
/// Cookie reply, server to client, instead of a response when under load
/// (docs/protocol.md#cookie-reply).
pub const TYPE_COOKIE_REPLY: u8 = 3;
/// Encrypted engine datagram, either way.
pub const TYPE_DATA: u8 = 4;
/// Unknown-index hint, server to client: a data message named keys the server does not
/// have (it restarted), docs/protocol.md#unknown-index.
pub const TYPE_UNKNOWN_INDEX: u8 = 5;

/// Path control, either way, sealed like data: a PATH_CHALLENGE or PATH_RESPONSE
/// (docs/protocol.md#path-validation).
pub const TYPE_PATH_CONTROL: u8 = 6;

/// Path frame kind: the server asks the client to echo `token` (PATH_CHALLENGE).
pub const PATH_CHALLENGE: u8 = 1;
/// Path frame kind: the client echoes a challenge's token (PATH_RESPONSE).
pub const PATH_RESPONSE: u8 = 2;
/// Path frame kind, client to server: the path's link is gone at the client; stop
/// sending on it (docs/protocol.md#binding). The token is a 7-byte big-endian sequence
/// number and a flags byte.
pub const PATH_WITHDRAW: u8 = 3;
/// Path frame kind, client to server: the path's link is back (docs/protocol.md#binding).
pub const PATH_RESTORE: u8 = 4;
/// Path frame kind, server to client: the withdrawal or restoration with this sequence
/// number was applied (docs/protocol.md#binding).
pub const BINDING_ACK: u8 = 5;
/// Control frame kind, client to server: the client's path set with each path's
/// attributes and quality (docs/protocol.md#registration). Variable length
/// (`crate::registration`), unlike the path frames.
pub const REGISTER: u8 = 6;
/// Path frame kind, server to client: the registration with this number (the token's
/// first 7 bytes, as a binding frame's) was received (docs/protocol.md#registration).
pub const REGISTER_ACK: u8 = 7;
/// Path frame kind, client to server: send me what you hold of my registration
/// (docs/protocol.md#registration). Token ignored.
pub const QUERY: u8 = 8;
/// Control frame kind, server to client: the registration the server holds, in answer
/// to a QUERY; laid out as a REGISTER.
pub const REGISTRATION: u8 = 9;
/// Binding flag: the path is a backup (docs/protocol.md#backup).
pub const BINDING_FLAG_BACKUP: u8 = 1;
/// Largest binding sequence number (7 bytes).
pub const BINDING_SEQ_MAX: u64 = (1 << 56) - 1;
/// A path token: unpredictable, chosen by the challenger.
pub const PATH_TOKEN_LEN: usize = 8;
/// A path frame: kind (u8), path id (u8), token.
pub const PATH_FRAME_LEN: usize = 2 + PATH_TOKEN_LEN;
/// Path-control header: type, receiver index, counter; also the associated data.
pub const CONTROL_HEADER_LEN: usize = 13;
/// Offset of a path-control message's counter.
pub const CONTROL_COUNTER_OFFSET: usize = 5;
/// A whole path-control message: the header, the sealed frame, the tag.
pub const PATH_CONTROL_LEN: usize = CONTROL_HEADER_LEN + PATH_FRAME_LEN + TAG_LEN;
/// The shortest path-control message: one carrying a registration of no path (what a
/// server that holds none answers to a query).
pub const PATH_CONTROL_MIN_LEN: usize =
    CONTROL_HEADER_LEN + crate::registration::REGISTRATION_HEADER_LEN + TAG_LEN;
/// The longest path-control message: one carrying a registration of every path.
pub const PATH_CONTROL_MAX_LEN: usize =
    CONTROL_HEADER_LEN + crate::registration::REGISTRATION_MAX_LEN + TAG_LEN;

/// Plaintext carried inside Noise message 1 (docs/protocol.md#initiation-payload).
pub const INITIATION_PAYLOAD_LEN: usize = 16;
/// Plaintext carried inside Noise message 2: flags (u8), the server's sender index (u32).
pub const RESPONSE_PAYLOAD_LEN: usize = 5;
/// Noise IK message 1: ephemeral (32), encrypted static (32 + 16), encrypted payload.
pub const NOISE_INITIATION_LEN: usize = 32 + 48 + INITIATION_PAYLOAD_LEN + TAG_LEN;
/// Noise IK message 2: ephemeral (32), encrypted payload.
pub const NOISE_RESPONSE_LEN: usize = 32 + RESPONSE_PAYLOAD_LEN + TAG_LEN;
/// Initiation header: type, reserved, sender index (also part of the Noise prologue).
pub const INITIATION_HEADER_LEN: usize = 8;
/// Response header: type, reserved, sender index, receiver index.
pub const RESPONSE_HEADER_LEN: usize = 12;
/// A mac1 or mac2 field, and a cookie: keyed BLAKE2s with a 16-byte output.
pub const MAC_LEN: usize = 16;
/// Where an initiation's mac1 starts: it covers everything before (header, Noise message 1).
pub const INITIATION_MAC1_OFFSET: usize = INITIATION_HEADER_LEN + NOISE_INITIATION_LEN;
/// Where an initiation's mac2 starts: it covers everything before, mac1 included.
pub const INITIATION_MAC2_OFFSET: usize = INITIATION_MAC1_OFFSET + MAC_LEN;
/// Whole initiation message.
pub const INITIATION_LEN: usize = INITIATION_MAC2_OFFSET + MAC_LEN;
/// Where a response's mac1 starts (header, Noise message 2 before it).
pub const RESPONSE_MAC1_OFFSET: usize = RESPONSE_HEADER_LEN + NOISE_RESPONSE_LEN;
/// Whole response message.
pub const RESPONSE_LEN: usize = RESPONSE_MAC1_OFFSET + MAC_LEN;
/// Cookie reply: the receiver index (the initiation's sender index) at [`INDEX_OFFSET`],
/// then the XChaCha20-Poly1305 nonce at this offset...
pub const COOKIE_NONCE_OFFSET: usize = 8;
/// ...of this length...
pub const COOKIE_NONCE_LEN: usize = 24;
/// ...then the sealed cookie (16 bytes and the 16-byte tag) at this offset.
pub const COOKIE_SEALED_OFFSET: usize = COOKIE_NONCE_OFFSET + COOKIE_NONCE_LEN;
/// Whole cookie reply.
pub const COOKIE_REPLY_LEN: usize = COOKIE_SEALED_OFFSET + MAC_LEN + TAG_LEN;

/// Unknown-index hint: the data message's receiver index at [`SEALED_INDEX_OFFSET`], its
/// clear prefix at [`DATA_HEADER_LEN`] (both echoed), then a MAC of those 10 bytes at this
/// offset ([`crate::crypto::hint`])...
pub const UNKNOWN_INDEX_MAC_OFFSET: usize = DATA_AAD_LEN;
/// ...and that is the whole hint.
pub const UNKNOWN_INDEX_LEN: usize = UNKNOWN_INDEX_MAC_OFFSET + MAC_LEN;

/// Data message header: type and receiver index. The engine datagram starts here.
pub const DATA_HEADER_LEN: usize = 5;
/// A data message's associated data: the header and the engine datagram's clear prefix,
/// so none of it can be altered undetected.
pub const DATA_AAD_LEN: usize = DATA_HEADER_LEN + CLEAR_PREFIX_LEN;
/// Bytes a data message adds to the engine datagram it carries.
pub const DATA_OVERHEAD: usize = DATA_HEADER_LEN + TAG_LEN;
/// The shortest data message: the header, the clear prefix and the tag.
pub const DATA_MIN_LEN: usize = DATA_AAD_LEN + TAG_LEN;
/// The shortest data message an honest peer sends: a whole engine header and one frame
/// byte.
pub const DATA_MIN_HONEST_LEN: usize = DATA_OVERHEAD + plait_proto::wire::HEADER_LEN + 1;

// The server must never send more than it received: no amplification. A challenge goes
// only where authenticated messages came from, within three times their bytes
// (docs/protocol.md#path-validation): one honest data message earns one.
const _: () = assert!(PATH_CONTROL_LEN <= 3 * DATA_MIN_HONEST_LEN);
const _: () = assert!(RESPONSE_LEN < INITIATION_LEN, "no amplification");
const _: () = assert!(COOKIE_REPLY_LEN < INITIATION_LEN, "no amplification");
const _: () = assert!(UNKNOWN_INDEX_LEN <= DATA_MIN_LEN, "no amplification");

/// Offset of the three reserved zero bytes after a handshake message's type byte.
pub const RESERVED_OFFSET: usize = 1;
/// Offset of a handshake message's first index (the sender's; the receiver's in a cookie
/// reply); also the length of the part handshake messages share: type and reserved bytes.
pub const INDEX_OFFSET: usize = 4;
/// Offset of the receiver index in data, hint and path-control messages, right after the
/// type byte.
pub const SEALED_INDEX_OFFSET: usize = 1;
/// Offset of the response's receiver index.
pub const RESPONSE_RECEIVER_OFFSET: usize = 8;

/// Initiation payload (docs/protocol.md#initiation-payload): the version byte (offset 0),
/// then three reserved zero bytes at this offset...
pub const INITIATION_PAYLOAD_RESERVED_OFFSET: usize = 1;
/// ...the engine session id (u32) at this one...
pub const INITIATION_PAYLOAD_SESSION_OFFSET: usize = 4;
/// ...and the timestamp (u64) at this one.
pub const INITIATION_PAYLOAD_TIMESTAMP_OFFSET: usize = 8;
/// Response payload: the flags byte (offset 0), then the server's sender index (u32) at
/// this offset.
pub const RESPONSE_PAYLOAD_INDEX_OFFSET: usize = 1;

// Each layout ends where its table says.
const _: () = assert!(SEALED_INDEX_OFFSET + 4 == DATA_HEADER_LEN);
const _: () = assert!(CONTROL_COUNTER_OFFSET + 8 == CONTROL_HEADER_LEN);
const _: () = assert!(DATA_HEADER_LEN == CONTROL_COUNTER_OFFSET);
const _: () = assert!(INDEX_OFFSET + 4 == INITIATION_HEADER_LEN);
const _: () = assert!(RESPONSE_RECEIVER_OFFSET + 4 == RESPONSE_HEADER_LEN);
const _: () = assert!(INITIATION_PAYLOAD_TIMESTAMP_OFFSET + 8 == INITIATION_PAYLOAD_LEN);
const _: () = assert!(RESPONSE_PAYLOAD_INDEX_OFFSET + 4 == RESPONSE_PAYLOAD_LEN);

/// The little-endian u32 at `at`, if `buf` holds it.
pub(crate) fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..)?.first_chunk::<4>()?;
    Some(u32::from_le_bytes(*b))
}

/// The little-endian u64 at `at`, if `buf` holds it.
pub(crate) fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at..)?.first_chunk::<8>()?;
    Some(u64::from_le_bytes(*b))
}

/// Writes `bytes` at `at`, in a buffer whose size the caller's type fixes (the `const`
/// asserts above keep every field inside its message); nothing if it would not fit.
pub(crate) fn write_at(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// A data message's identity under its keys: the engine datagram's clear prefix (version
/// and path, then the path sequence number, big-endian), which is also its nonce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataId(pub [u8; CLEAR_PREFIX_LEN]);

impl DataId {
    /// The path id (the first byte's low nibble; below 16).
    pub fn path(self) -> usize {
        usize::from(self.0[0] & 0x0f)
    }

    /// The path sequence number, truncated to 32 bits.
    pub fn seq(self) -> u32 {
        let [_, a, b, c, d] = self.0;
        u32::from_be_bytes([a, b, c, d])
    }

    /// The prefix at `at` in `buf`, if `buf` holds it.
    fn at(buf: &[u8], at: usize) -> Option<DataId> {
        Some(DataId(*buf.get(at..)?.first_chunk::<CLEAR_PREFIX_LEN>()?))
    }
}

/// A datagram that is not a plait tunnel message.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum MessageError {
    /// Empty, or shorter than its type's fixed size.
    #[error("{len}-byte datagram is too short for message type {kind}")]
    TooShort {
        /// Type byte (0 if empty).
        kind: u8,
        /// Datagram length.
        len: usize,
    },
    /// A handshake message of the wrong size.
    #[error("{len}-byte handshake message of type {kind}: wrong size")]
    WrongSize {
        /// Type byte.
        kind: u8,
        /// Datagram length.
        len: usize,
    },
    /// Unknown type byte, or nonzero reserved bytes.
    #[error("unknown message type {0:#04x}")]
    UnknownType(u8),
}

/// A parsed message header; the payload stays in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// Type 1: `noise` is `buf[INITIATION_HEADER_LEN..INITIATION_MAC1_OFFSET]`.
    Initiation {
        /// The client's index for this handshake (the server sends it back as receiver).
        sender: u32,
    },
    /// Type 3: the sealed cookie is `buf[COOKIE_NONCE_OFFSET..]`.
    CookieReply {
        /// The client's index from the initiation it answers.
        receiver: u32,
    },
    /// Type 2: `noise` is `buf[RESPONSE_HEADER_LEN..RESPONSE_MAC1_OFFSET]`.
    Response {
        /// The server's index for the new keys.
        sender: u32,
        /// The client's index from the initiation.
        receiver: u32,
    },
    /// Type 4: the engine datagram is `buf[DATA_HEADER_LEN..]`, sealed after its clear
    /// prefix.
    Data {
        /// The receiving side's index of the keys that sealed it.
        receiver: u32,
        /// The clear prefix: the nonce.
        id: DataId,
    },
    /// Type 6: the sealed [`PathFrame`] is `buf[CONTROL_HEADER_LEN..]`.
    PathControl {
        /// The receiving side's index of the keys that sealed it.
        receiver: u32,
        /// The nonce counter (path control's own, under the same keys as data).
        counter: u64,
    },
    /// Type 5: the MAC is `buf[UNKNOWN_INDEX_MAC_OFFSET..]`.
    UnknownIndex {
        /// The receiver index of the data message it answers (the server's index of the
        /// client's current keys, as the client knows it).
        receiver: u32,
        /// That data message's clear prefix.
        id: DataId,
    },
}

/// Classifies a datagram. Sizes are checked here, so callers may slice at the documented
/// offsets.
pub fn parse(buf: &[u8]) -> Result<Message, MessageError> {
    let too_short = |kind| MessageError::TooShort {
        kind,
        len: buf.len(),
    };
    let Some(&kind) = buf.first() else {
        return Err(too_short(0));
    };
    if matches!(kind, TYPE_INITIATION | TYPE_RESPONSE | TYPE_COOKIE_REPLY) {
        let reserved = buf
            .get(RESERVED_OFFSET..INDEX_OFFSET)
            .ok_or(too_short(kind))?;
        if reserved != [0, 0, 0] {
            return Err(MessageError::UnknownType(kind));
        }
    }
    let index = |at| u32_at(buf, at).ok_or(too_short(kind));
    let data_id = || DataId::at(buf, DATA_HEADER_LEN).ok_or(too_short(kind));
    match kind {
        TYPE_INITIATION if buf.len() == INITIATION_LEN => Ok(Message::Initiation {
            sender: index(INDEX_OFFSET)?,
        }),
        TYPE_RESPONSE if buf.len() == RESPONSE_LEN => Ok(Message::Response {
            sender: index(INDEX_OFFSET)?,
            receiver: index(RESPONSE_RECEIVER_OFFSET)?,
        }),
        TYPE_COOKIE_REPLY if buf.len() == COOKIE_REPLY_LEN => Ok(Message::CookieReply {
            receiver: index(INDEX_OFFSET)?,
        }),
        TYPE_UNKNOWN_INDEX if buf.len() == UNKNOWN_INDEX_LEN => Ok(Message::UnknownIndex {
            receiver: index(SEALED_INDEX_OFFSET)?,
            id: data_id()?,
        }),
        TYPE_INITIATION | TYPE_RESPONSE | TYPE_COOKIE_REPLY | TYPE_UNKNOWN_INDEX => {
            Err(MessageError::WrongSize {
                kind,
                len: buf.len(),
            })
        }
        TYPE_DATA if buf.len() >= DATA_MIN_LEN => Ok(Message::Data {
            receiver: index(SEALED_INDEX_OFFSET)?,
            id: data_id()?,
        }),
        TYPE_DATA => Err(too_short(kind)),
        // One path frame, or one registration (docs/protocol.md#registration).
        TYPE_PATH_CONTROL if (PATH_CONTROL_MIN_LEN..=PATH_CONTROL_MAX_LEN).contains(&buf.len()) => {
            Ok(Message::PathControl {
                receiver: index(SEALED_INDEX_OFFSET)?,
                counter: u64_at(buf, CONTROL_COUNTER_OFFSET).ok_or(too_short(kind))?,
            })
        }
        TYPE_PATH_CONTROL => Err(MessageError::WrongSize {
            kind,
            len: buf.len(),
        }),
        other => Err(MessageError::UnknownType(other)),
    }
}

/// Writes the type byte and the reserved zero bytes a handshake message starts with.
fn put_type(buf: &mut [u8], kind: u8) {
    write_at(buf, 0, &[kind, 0, 0, 0]);
}

/// Writes a data header: type and receiver index.
pub fn write_data_header(buf: &mut [u8; DATA_HEADER_LEN], receiver: u32) {
    write_at(buf, 0, &[TYPE_DATA]);
    write_at(buf, SEALED_INDEX_OFFSET, &receiver.to_le_bytes());
}

/// Writes a path-control header: type, receiver index, counter.
pub fn write_control_header(buf: &mut [u8; CONTROL_HEADER_LEN], receiver: u32, counter: u64) {
    write_at(buf, 0, &[TYPE_PATH_CONTROL]);
    write_at(buf, SEALED_INDEX_OFFSET, &receiver.to_le_bytes());
    write_at(buf, CONTROL_COUNTER_OFFSET, &counter.to_le_bytes());
}

/// What an opened path-control message carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlFrame {
    /// A fixed-size path frame.
    Path(PathFrame),
    /// A REGISTER (`kind` [`REGISTER`]) or a REGISTRATION ([`REGISTRATION`]).
    Registration {
        /// [`REGISTER`] or [`REGISTRATION`].
        kind: u8,
        /// What it says.
        registration: crate::registration::Registration,
    },
}

/// Why an opened path-control message was not understood.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ControlFrameError {
    /// A path frame of the wrong size or kind.
    #[error(transparent)]
    Path(#[from] MessageError),
    /// A registration refused.
    #[error(transparent)]
    Registration(#[from] crate::registration::RegistrationError),
}

impl ControlFrame {
    /// Decodes an opened path-control message by its first byte, the frame kind.
    pub fn decode(buf: &[u8]) -> Result<ControlFrame, ControlFrameError> {
        match buf.first() {
            Some(&(REGISTER | REGISTRATION)) => {
                let (kind, registration) = crate::registration::decode(buf)?;
                Ok(ControlFrame::Registration { kind, registration })
            }
            _ => Ok(ControlFrame::Path(PathFrame::decode(buf)?)),
        }
    }
}

/// A fixed-size path-control frame (docs/protocol.md#path-validation, #binding,
/// #registration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathFrame {
    /// [`PATH_CHALLENGE`], [`PATH_RESPONSE`], [`PATH_WITHDRAW`], [`PATH_RESTORE`],
    /// [`BINDING_ACK`], [`REGISTER_ACK`] or [`QUERY`].
    pub kind: u8,
    /// The path it concerns (a response repeats the challenge's).
    pub path: u8,
    /// The challenger's token (a response echoes it).
    pub token: [u8; PATH_TOKEN_LEN],
}

impl PathFrame {
    /// Decodes an opened path frame: exactly [`PATH_FRAME_LEN`] bytes, a known kind.
    pub fn decode(buf: &[u8]) -> Result<PathFrame, MessageError> {
        let b: &[u8; PATH_FRAME_LEN] = buf.try_into().map_err(|_| MessageError::WrongSize {
            kind: TYPE_PATH_CONTROL,
            len: buf.len(),
        })?;
        let [kind, path, token @ ..] = *b;
        if !matches!(kind, PATH_CHALLENGE..=BINDING_ACK | REGISTER_ACK | QUERY) {
            return Err(MessageError::UnknownType(kind));
        }
        Ok(PathFrame { kind, path, token })
    }

    /// A binding frame ([`PATH_WITHDRAW`], [`PATH_RESTORE`], [`BINDING_ACK`]) for `path`
    /// with sequence number `seq` (its low 7 bytes) and `flags`.
    pub fn binding(kind: u8, path: u8, seq: u64, flags: u8) -> PathFrame {
        let mut token = [0u8; PATH_TOKEN_LEN];
        token[..7].copy_from_slice(&(seq & BINDING_SEQ_MAX).to_be_bytes()[1..]);
        token[7] = flags;
        PathFrame { kind, path, token }
    }

    /// A binding frame's sequence number.
    pub fn seq(&self) -> u64 {
        let t = self.token;
        u64::from_be_bytes([0, t[0], t[1], t[2], t[3], t[4], t[5], t[6]])
    }

    /// A binding frame's flags ([`BINDING_FLAG_BACKUP`]).
    pub fn flags(&self) -> u8 {
        self.token[7]
    }

    /// The frame's bytes.
    pub fn encode(&self) -> [u8; PATH_FRAME_LEN] {
        let mut b = [0u8; PATH_FRAME_LEN];
        b[0] = self.kind;
        b[1] = self.path;
        b[2..].copy_from_slice(&self.token);
        b
    }
}

/// Writes the fixed part of an initiation: type and sender index.
pub fn write_initiation_header(buf: &mut [u8; INITIATION_HEADER_LEN], sender: u32) {
    put_type(buf, TYPE_INITIATION);
    write_at(buf, INDEX_OFFSET, &sender.to_le_bytes());
}

/// Writes the fixed part of a response: type, sender index, receiver index.
pub fn write_response_header(buf: &mut [u8; RESPONSE_HEADER_LEN], sender: u32, receiver: u32) {
    put_type(buf, TYPE_RESPONSE);
    write_at(buf, INDEX_OFFSET, &sender.to_le_bytes());
    write_at(buf, RESPONSE_RECEIVER_OFFSET, &receiver.to_le_bytes());
}

/// Writes the part of an unknown-index hint its MAC covers: type, the receiver index and
/// the clear prefix of the data message it answers.
pub fn write_unknown_index_header(
    buf: &mut [u8; UNKNOWN_INDEX_MAC_OFFSET],
    receiver: u32,
    id: DataId,
) {
    write_at(buf, 0, &[TYPE_UNKNOWN_INDEX]);
    write_at(buf, SEALED_INDEX_OFFSET, &receiver.to_le_bytes());
    write_at(buf, DATA_HEADER_LEN, &id.0);
}

/// Writes the fixed part of a cookie reply: type and receiver index.
pub fn write_cookie_reply_header(buf: &mut [u8; COOKIE_NONCE_OFFSET], receiver: u32) {
    put_type(buf, TYPE_COOKIE_REPLY);
    write_at(buf, INDEX_OFFSET, &receiver.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        assert_eq!(INITIATION_MAC1_OFFSET, 120);
        assert_eq!(INITIATION_LEN, 152);
        assert_eq!(RESPONSE_LEN, 81);
        assert_eq!(COOKIE_REPLY_LEN, 64);
        assert_eq!(UNKNOWN_INDEX_LEN, 26);
        assert_eq!(DATA_OVERHEAD, 21);
        assert_eq!(PATH_CONTROL_LEN, 39);
        // With outer IPv4 and UDP (28 B) and the engine's header and DATA frame (15 B), an
        // inner packet costs 64 bytes (docs/protocol.md#overhead).
        assert_eq!(28 + DATA_OVERHEAD + plait_proto::wire::DATA_OVERHEAD, 64);
    }

    #[test]
    fn data_header_round_trip() {
        let mut buf = vec![0u8; DATA_MIN_LEN];
        let mut h = [0u8; DATA_HEADER_LEN];
        write_data_header(&mut h, 0xdead_beef);
        buf[..DATA_HEADER_LEN].copy_from_slice(&h);
        buf[DATA_HEADER_LEN..DATA_AAD_LEN].copy_from_slice(&[0x23, 1, 2, 3, 4]);
        assert_eq!(
            buf[..DATA_AAD_LEN],
            [4, 0xef, 0xbe, 0xad, 0xde, 0x23, 1, 2, 3, 4]
        );
        let id = DataId([0x23, 1, 2, 3, 4]);
        assert_eq!(
            parse(&buf),
            Ok(Message::Data {
                receiver: 0xdead_beef,
                id
            })
        );
        assert_eq!((id.path(), id.seq()), (3, 0x0102_0304));
        assert_eq!(
            parse(&buf[..DATA_MIN_LEN - 1]),
            Err(MessageError::TooShort {
                kind: TYPE_DATA,
                len: DATA_MIN_LEN - 1
            })
        );
    }

    #[test]
    fn handshake_headers_round_trip() {
        let mut buf = vec![0u8; INITIATION_LEN];
        let mut h = [0u8; INITIATION_HEADER_LEN];
        write_initiation_header(&mut h, 7);
        buf[..INITIATION_HEADER_LEN].copy_from_slice(&h);
        assert_eq!(parse(&buf), Ok(Message::Initiation { sender: 7 }));
        let mut buf = vec![0u8; RESPONSE_LEN];
        let mut h = [0u8; RESPONSE_HEADER_LEN];
        write_response_header(&mut h, 8, 9);
        buf[..RESPONSE_HEADER_LEN].copy_from_slice(&h);
        assert_eq!(
            parse(&buf),
            Ok(Message::Response {
                sender: 8,
                receiver: 9
            })
        );
        let mut buf = vec![0u8; COOKIE_REPLY_LEN];
        let mut h = [0u8; COOKIE_NONCE_OFFSET];
        write_cookie_reply_header(&mut h, 10);
        buf[..COOKIE_NONCE_OFFSET].copy_from_slice(&h);
        assert_eq!(parse(&buf), Ok(Message::CookieReply { receiver: 10 }));
        assert_eq!(
            parse(&buf[..COOKIE_REPLY_LEN - 1]),
            Err(MessageError::WrongSize {
                kind: TYPE_COOKIE_REPLY,
                len: COOKIE_REPLY_LEN - 1
            })
        );
        let mut buf = [0u8; RESPONSE_LEN];
        write_response_header(buf.first_chunk_mut().unwrap(), 8, 9);
        assert_eq!(
            parse(&buf[..RESPONSE_LEN - 1]),
            Err(MessageError::WrongSize {
                kind: TYPE_RESPONSE,
                len: RESPONSE_LEN - 1
            })
        );
    }

    #[test]
    fn unknown_index_header_round_trip() {
        let mut buf = [0u8; UNKNOWN_INDEX_LEN];
        let id = DataId([0x21, 0, 0, 1, 0]);
        write_unknown_index_header(buf.first_chunk_mut().unwrap(), 0xdead_beef, id);
        assert_eq!(
            parse(&buf),
            Ok(Message::UnknownIndex {
                receiver: 0xdead_beef,
                id
            })
        );
        for len in [UNKNOWN_INDEX_LEN - 1, UNKNOWN_INDEX_LEN + 1] {
            let mut b = vec![0u8; len];
            b[0] = TYPE_UNKNOWN_INDEX;
            assert_eq!(
                parse(&b),
                Err(MessageError::WrongSize {
                    kind: TYPE_UNKNOWN_INDEX,
                    len
                })
            );
        }
    }

    #[test]
    fn path_control_round_trip() {
        let mut buf = [0u8; PATH_CONTROL_LEN];
        write_control_header(buf.first_chunk_mut().unwrap(), 0x0102_0304, 9);
        assert_eq!(
            parse(&buf),
            Ok(Message::PathControl {
                receiver: 0x0102_0304,
                counter: 9
            })
        );
        // A path frame's size, a registration's sizes (docs/protocol.md#registration),
        // nothing shorter or longer.
        for len in [PATH_CONTROL_MIN_LEN, PATH_CONTROL_LEN, PATH_CONTROL_MAX_LEN] {
            let mut b = vec![0u8; len];
            b[0] = TYPE_PATH_CONTROL;
            assert!(
                matches!(parse(&b), Ok(Message::PathControl { .. })),
                "{len}"
            );
        }
        assert_eq!(PATH_CONTROL_MAX_LEN, 566);
        for len in [PATH_CONTROL_MIN_LEN - 1, PATH_CONTROL_MAX_LEN + 1] {
            let mut b = vec![0u8; len];
            b[0] = TYPE_PATH_CONTROL;
            assert_eq!(
                parse(&b),
                Err(MessageError::WrongSize {
                    kind: TYPE_PATH_CONTROL,
                    len
                })
            );
        }
        let f = PathFrame {
            kind: PATH_RESPONSE,
            path: 3,
            token: *b"abcdefgh",
        };
        assert_eq!(f.encode(), *b"\x02\x03abcdefgh");
        assert_eq!(PathFrame::decode(&f.encode()), Ok(f));
        assert_eq!(
            PathFrame::decode(b"\x06\x03abcdefgh"),
            Err(MessageError::UnknownType(6))
        );
        assert_eq!(
            PathFrame::decode(b"\x00\x03abcdefgh"),
            Err(MessageError::UnknownType(0))
        );
        let w = PathFrame::binding(PATH_RESTORE, 2, 0x01_0203_0405_0607, BINDING_FLAG_BACKUP);
        assert_eq!(w.encode(), *b"\x04\x02\x01\x02\x03\x04\x05\x06\x07\x01");
        let d = PathFrame::decode(&w.encode()).unwrap();
        assert_eq!(
            (d.seq(), d.flags()),
            (0x01_0203_0405_0607, BINDING_FLAG_BACKUP)
        );
        assert_eq!(
            PathFrame::binding(PATH_WITHDRAW, 0, u64::MAX, 0).seq(),
            BINDING_SEQ_MAX
        );
        assert!(PathFrame::decode(b"\x01\x03abcdefg").is_err());
    }

    #[test]
    fn rejects_junk() {
        assert_eq!(parse(&[]), Err(MessageError::TooShort { kind: 0, len: 0 }));
        assert_eq!(parse(&[9, 0, 0, 0]), Err(MessageError::UnknownType(9)));
        assert_eq!(parse(&[1, 1, 0, 0]), Err(MessageError::UnknownType(1)));
        assert_eq!(
            parse(&[1, 0]),
            Err(MessageError::TooShort { kind: 1, len: 2 })
        );
        assert_eq!(
            parse(&[4, 0, 0, 0, 1]),
            Err(MessageError::TooShort { kind: 4, len: 5 })
        );
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&bytes);
        }
    }
}
