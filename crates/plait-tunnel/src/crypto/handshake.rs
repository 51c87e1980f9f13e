//! The Noise IKpsk2 handshake (docs/protocol.md#handshake), on snow.
//!
//! `Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s`, WireGuard's pattern: the client (initiator)
//! knows the server's static key; the server learns the client's static key from message 1
//! and accepts it only if it is configured. The pre-shared key (all zeros when none is
//! configured, as in WireGuard) is mixed in at the end of message 2, so a quantum-capable
//! attacker recording the handshake also needs it.
//!
//! Message 1's payload carries the protocol version, the engine session id the client
//! chose, and a timestamp that must grow from one initiation to the next: a replayed
//! initiation is refused without a reply. Message 2's payload carries flags and the
//! server's index.
//!
//! The indices travel in cleartext headers, so they are bound into the handshake hash:
//! the initiation's 8-byte header (type, reserved bytes, the client's index) is appended to
//! the prologue on both sides, and the server's index is repeated inside message 2, where
//! the client checks it against the response header. A tampered index makes the handshake
//! fail instead of installing keys the peer does not know by that index.
//!
//! After message 2 both sides take snow's raw split (one 32-byte key per direction) into
//! [`crate::crypto::aead`], because data messages make their nonce of the engine header's
//! path and path sequence number and use the message header as associated data, which
//! snow's transport mode does not offer.
//!
//! Invariant: nothing here panics on any input; every failure is a [`HandshakeError`].

use snow::{Builder, HandshakeState};
use thiserror::Error;

use crate::crypto::aead::KEY_LEN;
use crate::crypto::cookie::{self, Mac, Mac1Key};
use crate::keys::Key;
use crate::message::{
    INDEX_OFFSET, INITIATION_HEADER_LEN, INITIATION_LEN, INITIATION_MAC1_OFFSET,
    INITIATION_PAYLOAD_LEN, INITIATION_PAYLOAD_RESERVED_OFFSET, INITIATION_PAYLOAD_SESSION_OFFSET,
    INITIATION_PAYLOAD_TIMESTAMP_OFFSET, NOISE_INITIATION_LEN, NOISE_RESPONSE_LEN,
    RESPONSE_HEADER_LEN, RESPONSE_LEN, RESPONSE_PAYLOAD_INDEX_OFFSET, RESPONSE_PAYLOAD_LEN, u32_at,
    u64_at, write_at, write_initiation_header, write_response_header,
};

/// The Noise protocol name.
pub const NOISE_PARAMS: &str = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
/// Bound into the handshake hash: a handshake of another protocol or version cannot be
/// confused with plait's. The initiation's header follows it in the prologue.
pub const PROLOGUE: &[u8] = b"plait tunnel v1";
/// Payload version byte.
pub const PAYLOAD_VERSION: u8 = 1;
/// Response flag: the server made a fresh engine session for this handshake (it had
/// none with this session id), so the client must restart its engine session too.
pub const FLAG_FRESH_SESSION: u8 = 1;

/// Why a handshake message was refused. The caller drops the message silently.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// Decryption or a Noise rule failed (wrong key, tampering, garbage).
    #[error("handshake message failed to authenticate")]
    Auth,
    /// The payload is not one this version understands.
    #[error("handshake payload has version {0}, expected {PAYLOAD_VERSION}")]
    Version(u8),
    /// Reserved payload bytes are not zero.
    #[error("handshake payload has nonzero reserved bytes")]
    Reserved,
    /// The response authenticated, but its header names another server index than the
    /// one inside message 2: the header was altered on the way.
    #[error("response header names index {header:#010x}, message 2 says {inner:#010x}")]
    IndexMismatch {
        /// Sender index in the cleartext header.
        header: u32,
        /// Sender index inside the encrypted payload.
        inner: u32,
    },
    /// The buffer was not of the message's size.
    #[error("handshake buffer has {got} bytes, need {need}")]
    Size {
        /// Bytes given.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// snow refused a parameter (a bug, not an attack).
    #[error("noise setup failed: {0}")]
    Setup(String),
}

/// What the client says in message 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitiationPayload {
    /// The engine session id the client uses (docs/protocol.md#header).
    pub session_id: u32,
    /// Strictly increasing per client key (nanoseconds since the Unix epoch, made
    /// monotonic by the sender).
    pub timestamp: u64,
}

impl InitiationPayload {
    fn encode(&self) -> [u8; INITIATION_PAYLOAD_LEN] {
        let mut b = [0u8; INITIATION_PAYLOAD_LEN];
        write_at(&mut b, 0, &[PAYLOAD_VERSION]);
        write_at(
            &mut b,
            INITIATION_PAYLOAD_SESSION_OFFSET,
            &self.session_id.to_le_bytes(),
        );
        write_at(
            &mut b,
            INITIATION_PAYLOAD_TIMESTAMP_OFFSET,
            &self.timestamp.to_le_bytes(),
        );
        b
    }

    fn decode(b: &[u8]) -> Result<InitiationPayload, HandshakeError> {
        let size = HandshakeError::Size {
            got: b.len(),
            need: INITIATION_PAYLOAD_LEN,
        };
        if b.len() != INITIATION_PAYLOAD_LEN {
            return Err(size);
        }
        let version = b.first().copied().unwrap_or_default();
        if version != PAYLOAD_VERSION {
            return Err(HandshakeError::Version(version));
        }
        let reserved = b.get(INITIATION_PAYLOAD_RESERVED_OFFSET..INITIATION_PAYLOAD_SESSION_OFFSET);
        if reserved != Some(&[0, 0, 0][..]) {
            return Err(HandshakeError::Reserved);
        }
        match (
            u32_at(b, INITIATION_PAYLOAD_SESSION_OFFSET),
            u64_at(b, INITIATION_PAYLOAD_TIMESTAMP_OFFSET),
        ) {
            (Some(session_id), Some(timestamp)) => Ok(InitiationPayload {
                session_id,
                timestamp,
            }),
            _ => Err(size),
        }
    }
}

/// One direction's key each way, from the handshake's split.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    /// Key this side seals with.
    pub send: [u8; KEY_LEN],
    /// Key this side opens with.
    pub recv: [u8; KEY_LEN],
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(…)")
    }
}

fn setup(e: snow::Error) -> HandshakeError {
    HandshakeError::Setup(e.to_string())
}

/// [`PROLOGUE`] followed by the initiation's header.
type Prologue = [u8; PROLOGUE.len() + INITIATION_HEADER_LEN];

fn prologue(initiation_header: &[u8; INITIATION_HEADER_LEN]) -> Prologue {
    let mut p = [0u8; PROLOGUE.len() + INITIATION_HEADER_LEN];
    let (tag, header) = p.split_at_mut(PROLOGUE.len());
    tag.copy_from_slice(PROLOGUE);
    header.copy_from_slice(initiation_header);
    p
}

fn builder(prologue: &Prologue) -> Result<Builder<'_>, HandshakeError> {
    let params = NOISE_PARAMS.parse().map_err(setup)?;
    Builder::new(params).prologue(prologue).map_err(setup)
}

/// Message 2's payload: flags, then the server's index.
fn encode_response_payload(flags: u8, sender_index: u32) -> [u8; RESPONSE_PAYLOAD_LEN] {
    let mut b = [0u8; RESPONSE_PAYLOAD_LEN];
    write_at(&mut b, 0, &[flags]);
    write_at(
        &mut b,
        RESPONSE_PAYLOAD_INDEX_OFFSET,
        &sender_index.to_le_bytes(),
    );
    b
}

/// The flags and the server's index from message 2's payload.
fn decode_response_payload(b: &[u8]) -> Option<(u8, u32)> {
    Some((*b.first()?, u32_at(b, RESPONSE_PAYLOAD_INDEX_OFFSET)?))
}

const ZERO_PSK: [u8; 32] = [0; 32];

/// A client's handshake in flight, waiting for message 2.
///
/// It survives responses that fail: a forged or damaged response must not destroy the
/// handshake the genuine response will complete (the client keeps it until it retries).
pub struct Initiation {
    state: HandshakeState,
    /// Set once message 2 authenticated but its header's index did not match: the
    /// handshake state is spent, and only a copy of the same message 2 under its genuine
    /// header may still complete the handshake.
    spent: Option<Spent>,
    /// The index the client chose; the response names it as receiver.
    pub sender_index: u32,
    /// The session id it announced.
    pub session_id: u32,
    /// The initiation's mac1: a cookie reply to it is sealed with it as associated data.
    pub mac1: Mac,
}

/// What an authenticated message 2 gave, kept after a header mismatch.
struct Spent {
    noise: [u8; NOISE_RESPONSE_LEN],
    keys: SessionKeys,
    flags: u8,
    server_index: u32,
}

impl std::fmt::Debug for Initiation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initiation")
            .field("sender_index", &self.sender_index)
            .field("session_id", &self.session_id)
            .field("spent", &self.spent.is_some())
            .finish_non_exhaustive()
    }
}

impl Initiation {
    /// Writes a whole initiation message (header, Noise message 1, mac1 for
    /// `server_public`, a zero mac2) into `out[..INITIATION_LEN]`. The header is part of
    /// the prologue. A client holding a cookie then writes mac2
    /// ([`cookie::write_initiation_mac2`]).
    pub fn start(
        local_private: &Key,
        server_public: &Key,
        psk: Option<&Key>,
        sender_index: u32,
        payload: InitiationPayload,
        out: &mut [u8],
    ) -> Result<Initiation, HandshakeError> {
        let size = HandshakeError::Size {
            got: out.len(),
            need: INITIATION_LEN,
        };
        if out.len() < INITIATION_LEN {
            return Err(size);
        }
        let Some((header, rest)) = out.split_first_chunk_mut::<INITIATION_HEADER_LEN>() else {
            return Err(size);
        };
        let Some(noise) = rest.get_mut(..NOISE_INITIATION_LEN) else {
            return Err(size);
        };
        write_initiation_header(header, sender_index);
        let prologue = prologue(header);
        let psk = psk.map_or(&ZERO_PSK, Key::as_bytes);
        let mut state = builder(&prologue)?
            .local_private_key(local_private.as_bytes())
            .map_err(setup)?
            .remote_public_key(server_public.as_bytes())
            .map_err(setup)?
            .psk(2, psk)
            .map_err(setup)?
            .build_initiator()
            .map_err(setup)?;
        let n = state
            .write_message(&payload.encode(), noise)
            .map_err(setup)?;
        debug_assert_eq!(n, NOISE_INITIATION_LEN);
        let msg = out.get_mut(..INITIATION_LEN).ok_or(size)?;
        cookie::write_initiation_mac1(msg, &Mac1Key::new(server_public));
        cookie::write_initiation_mac2(msg, None);
        let mac1 = cookie::initiation_mac1(msg).ok_or(HandshakeError::Setup("mac1".into()))?;
        Ok(Initiation {
            state,
            spent: None,
            sender_index,
            session_id: payload.session_id,
            mac1,
        })
    }

    /// Reads message 2 (`noise` = the response between its 12-byte header and its mac1,
    /// which the caller checked; `server_index` =
    /// the sender index that header names). Returns the session keys and the response
    /// flags.
    ///
    /// On failure the handshake stays usable for the genuine response: snow restores its
    /// symmetric state when a message fails to authenticate (and message 2 re-keys the
    /// cipher from that state before decrypting anything). A response that authenticates
    /// under a header naming another index than message 2 does is refused with
    /// [`HandshakeError::IndexMismatch`]; the same message 2 under its genuine header is
    /// still accepted afterwards.
    pub fn finish(
        &mut self,
        server_index: u32,
        noise: &[u8],
    ) -> Result<(SessionKeys, u8), HandshakeError> {
        if noise.len() != NOISE_RESPONSE_LEN {
            return Err(HandshakeError::Size {
                got: noise.len(),
                need: NOISE_RESPONSE_LEN,
            });
        }
        if let Some(spent) = &self.spent {
            if spent.noise[..] != noise[..] {
                return Err(HandshakeError::Auth);
            }
            if spent.server_index != server_index {
                return Err(HandshakeError::IndexMismatch {
                    header: server_index,
                    inner: spent.server_index,
                });
            }
            return Ok((spent.keys.clone(), spent.flags));
        }
        let mut payload = [0u8; 64];
        let n = self
            .state
            .read_message(noise, &mut payload)
            .map_err(|_| HandshakeError::Auth)?;
        if n != RESPONSE_PAYLOAD_LEN || !self.state.is_handshake_finished() {
            return Err(HandshakeError::Auth);
        }
        let (flags, inner) = payload
            .get(..n)
            .and_then(decode_response_payload)
            .ok_or(HandshakeError::Auth)?;
        let (i2r, r2i) = self.state.dangerously_get_raw_split();
        let keys = SessionKeys {
            send: i2r,
            recv: r2i,
        };
        if inner != server_index {
            let mut copy = [0u8; NOISE_RESPONSE_LEN];
            copy.copy_from_slice(noise);
            self.spent = Some(Spent {
                noise: copy,
                keys,
                flags,
                server_index: inner,
            });
            return Err(HandshakeError::IndexMismatch {
                header: server_index,
                inner,
            });
        }
        Ok((keys, flags))
    }
}

/// The server's view of a received message 1, before it decides to answer.
pub struct ReceivedInitiation {
    state: HandshakeState,
    /// The client's static public key, now authenticated by message 1.
    pub client: Key,
    /// What the client said.
    pub payload: InitiationPayload,
    /// The client's index from the initiation's header (bound into the handshake by the
    /// prologue); the response names it as receiver.
    pub sender_index: u32,
}

impl std::fmt::Debug for ReceivedInitiation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedInitiation")
            .field("payload", &self.payload)
            .field("sender_index", &self.sender_index)
            .finish_non_exhaustive()
    }
}

impl ReceivedInitiation {
    /// Reads a whole initiation message (its 8-byte header, which goes into the prologue,
    /// then Noise message 1; the caller checked mac1 and mac2 first).
    pub fn read(server_private: &Key, msg: &[u8]) -> Result<ReceivedInitiation, HandshakeError> {
        if msg.len() != INITIATION_LEN {
            return Err(HandshakeError::Size {
                got: msg.len(),
                need: INITIATION_LEN,
            });
        }
        let size = HandshakeError::Size {
            got: msg.len(),
            need: INITIATION_LEN,
        };
        let Some((header, rest)) = msg.split_first_chunk::<INITIATION_HEADER_LEN>() else {
            return Err(size);
        };
        let noise = rest
            .get(..INITIATION_MAC1_OFFSET - INITIATION_HEADER_LEN)
            .ok_or(size.clone())?;
        let prologue = prologue(header);
        let sender_index = u32_at(header, INDEX_OFFSET).ok_or(size)?;
        // The psk is only mixed in with message 2; a placeholder lets snow build the state,
        // and `respond` sets the client's real one once we know who the client is.
        let mut state = builder(&prologue)?
            .local_private_key(server_private.as_bytes())
            .map_err(setup)?
            .psk(2, &ZERO_PSK)
            .map_err(setup)?
            .build_responder()
            .map_err(setup)?;
        let mut payload = [0u8; 64];
        let n = state
            .read_message(noise, &mut payload)
            .map_err(|_| HandshakeError::Auth)?;
        let payload = InitiationPayload::decode(payload.get(..n).unwrap_or_default())?;
        let Some(remote) = state.get_remote_static() else {
            return Err(HandshakeError::Auth);
        };
        let mut key = [0u8; 32];
        if remote.len() != key.len() {
            return Err(HandshakeError::Auth);
        }
        key.copy_from_slice(remote);
        Ok(ReceivedInitiation {
            state,
            client: Key::from_bytes(key),
            payload,
            sender_index,
        })
    }

    /// Writes the whole response (header, Noise message 2, which repeats `sender_index`,
    /// and mac1 for the client's key) into `out[..RESPONSE_LEN]` and returns the server's
    /// session keys.
    /// The receiver index is the initiation's sender index.
    pub fn respond(
        mut self,
        psk: Option<&Key>,
        sender_index: u32,
        flags: u8,
        out: &mut [u8],
    ) -> Result<SessionKeys, HandshakeError> {
        let size = HandshakeError::Size {
            got: out.len(),
            need: RESPONSE_LEN,
        };
        if out.len() < RESPONSE_LEN {
            return Err(size);
        }
        let Some((header, rest)) = out.split_first_chunk_mut::<RESPONSE_HEADER_LEN>() else {
            return Err(size);
        };
        let Some(noise) = rest.get_mut(..NOISE_RESPONSE_LEN) else {
            return Err(size);
        };
        self.state
            .set_psk(2, psk.map_or(&ZERO_PSK[..], |k| &k.as_bytes()[..]))
            .map_err(setup)?;
        write_response_header(header, sender_index, self.sender_index);
        let n = self
            .state
            .write_message(&encode_response_payload(flags, sender_index), noise)
            .map_err(setup)?;
        debug_assert_eq!(n, NOISE_RESPONSE_LEN);
        if !self.state.is_handshake_finished() {
            return Err(HandshakeError::Setup("handshake not finished".into()));
        }
        if let Some(msg) = out.get_mut(..RESPONSE_LEN) {
            cookie::write_response_mac1(msg, &Mac1Key::new(&self.client));
        }
        let (i2r, r2i) = self.state.dangerously_get_raw_split();
        Ok(SessionKeys {
            send: r2i,
            recv: i2r,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, parse};

    fn keys() -> (Key, Key) {
        (Key::generate().unwrap(), Key::generate().unwrap())
    }

    fn payload() -> InitiationPayload {
        InitiationPayload {
            session_id: 0x1234_5678,
            timestamp: 42,
        }
    }

    const R: usize = RESPONSE_HEADER_LEN;
    const M: usize = crate::message::RESPONSE_MAC1_OFFSET;

    /// A started initiation, the server's response to it (server index `sender`) and the
    /// server's keys.
    fn exchange(
        client: &Key,
        server: &Key,
        sender: u32,
        flags: u8,
    ) -> (Initiation, [u8; RESPONSE_LEN], SessionKeys) {
        let mut m1 = [0u8; INITIATION_LEN];
        let init =
            Initiation::start(client, &server.public(), None, 1, payload(), &mut m1).unwrap();
        let got = ReceivedInitiation::read(server, &m1).unwrap();
        let mut m2 = [0u8; RESPONSE_LEN];
        let skeys = got.respond(None, sender, flags, &mut m2).unwrap();
        (init, m2, skeys)
    }

    #[test]
    fn full_handshake_agrees_on_keys() {
        let (client, server) = keys();
        let psk = Key::generate().unwrap();
        let mut m1 = [0u8; INITIATION_LEN];
        let mut init =
            Initiation::start(&client, &server.public(), Some(&psk), 7, payload(), &mut m1)
                .unwrap();
        assert_eq!(parse(&m1), Ok(Message::Initiation { sender: 7 }));
        let got = ReceivedInitiation::read(&server, &m1).unwrap();
        assert_eq!(got.client, client.public());
        assert_eq!(got.payload, payload());
        assert_eq!(got.sender_index, 7);
        let mut m2 = [0u8; RESPONSE_LEN];
        let server_keys = got
            .respond(Some(&psk), 9, FLAG_FRESH_SESSION, &mut m2)
            .unwrap();
        assert_eq!(
            parse(&m2),
            Ok(Message::Response {
                sender: 9,
                receiver: 7
            })
        );
        // Both messages carry mac1 for their receiver; the initiation's mac2 is zero.
        assert!(cookie::check_initiation_mac1(
            &m1,
            &Mac1Key::new(&server.public())
        ));
        assert!(!cookie::check_initiation_mac1(
            &m1,
            &Mac1Key::new(&client.public())
        ));
        assert_eq!(cookie::initiation_mac1(&m1), Some(init.mac1));
        assert_eq!(m1[crate::message::INITIATION_MAC2_OFFSET..], [0; 16]);
        assert!(cookie::check_response_mac1(
            &m2,
            &Mac1Key::new(&client.public())
        ));
        assert!(!cookie::check_response_mac1(
            &m2,
            &Mac1Key::new(&server.public())
        ));
        let (client_keys, flags) = init.finish(9, &m2[R..M]).unwrap();
        assert_eq!(flags, FLAG_FRESH_SESSION);
        assert_eq!(client_keys.send, server_keys.recv);
        assert_eq!(client_keys.recv, server_keys.send);
        assert_ne!(client_keys.send, client_keys.recv);
    }

    #[test]
    fn wrong_server_key_fails_at_the_server() {
        let (client, server) = keys();
        let other = Key::generate().unwrap();
        let mut m1 = [0u8; INITIATION_LEN];
        Initiation::start(&client, &other.public(), None, 1, payload(), &mut m1).unwrap();
        assert_eq!(
            ReceivedInitiation::read(&server, &m1).unwrap_err(),
            HandshakeError::Auth
        );
    }

    #[test]
    fn psk_mismatch_fails_at_the_client() {
        let (client, server) = keys();
        let mut m1 = [0u8; INITIATION_LEN];
        let mut init =
            Initiation::start(&client, &server.public(), None, 1, payload(), &mut m1).unwrap();
        let got = ReceivedInitiation::read(&server, &m1).unwrap();
        let mut m2 = [0u8; RESPONSE_LEN];
        let wrong = Key::generate().unwrap();
        got.respond(Some(&wrong), 2, 0, &mut m2).unwrap();
        assert_eq!(init.finish(2, &m2[R..M]).unwrap_err(), HandshakeError::Auth);
    }

    #[test]
    fn tampered_messages_fail() {
        let (client, server) = keys();
        let mut m1 = [0u8; INITIATION_LEN];
        let mut init =
            Initiation::start(&client, &server.public(), None, 1, payload(), &mut m1).unwrap();
        // Every byte counts, the header's too (it is in the prologue).
        for i in 0..INITIATION_MAC1_OFFSET {
            let mut bad = m1;
            bad[i] ^= 0x40;
            assert!(ReceivedInitiation::read(&server, &bad).is_err(), "byte {i}");
        }
        let got = ReceivedInitiation::read(&server, &m1).unwrap();
        let mut m2 = [0u8; RESPONSE_LEN];
        got.respond(None, 2, 0, &mut m2).unwrap();
        let mut bad = m2;
        bad[40] ^= 1;
        assert!(init.finish(2, &bad[R..M]).is_err());
    }

    #[test]
    fn garbage_and_wrong_sizes_are_errors() {
        let server = Key::generate().unwrap();
        assert!(ReceivedInitiation::read(&server, &[0u8; INITIATION_LEN]).is_err());
        assert!(matches!(
            ReceivedInitiation::read(&server, &[0u8; 3]),
            Err(HandshakeError::Size { .. })
        ));
        assert!(matches!(
            ReceivedInitiation::read(&server, &[0u8; NOISE_INITIATION_LEN]),
            Err(HandshakeError::Size { .. })
        ));
    }

    #[test]
    fn nonzero_reserved_payload_bytes_are_refused() {
        let mut b = payload().encode();
        assert_eq!(InitiationPayload::decode(&b), Ok(payload()));
        for i in INITIATION_PAYLOAD_RESERVED_OFFSET..INITIATION_PAYLOAD_SESSION_OFFSET {
            b[i] = 1;
            assert_eq!(InitiationPayload::decode(&b), Err(HandshakeError::Reserved));
            b[i] = 0;
        }
    }

    /// Review finding 2: a forged response (right size, right receiver index) must not
    /// destroy the client's handshake; the genuine response still completes it.
    #[test]
    fn initiation_survives_forged_responses() {
        let (client, server) = keys();
        let (mut init, m2, skeys) = exchange(&client, &server, 2, 0);
        let mut junk = [0x33u8; NOISE_RESPONSE_LEN];
        assert_eq!(init.finish(2, &junk), Err(HandshakeError::Auth));
        junk[0] = 9; // a second, different forgery
        assert_eq!(init.finish(2, &junk), Err(HandshakeError::Auth));
        // The genuine one, with one bit flipped anywhere in Noise message 2.
        for i in R..M {
            let mut bad = m2;
            bad[i] ^= 0x08;
            assert!(init.finish(2, &bad[R..M]).is_err(), "byte {i}");
        }
        let (ckeys, _) = init.finish(2, &m2[R..M]).unwrap();
        assert_eq!(ckeys.send, skeys.recv);
        assert_eq!(ckeys.recv, skeys.send);
    }

    /// Review finding 3: the server's index is authenticated. A response whose header
    /// names another sender index is refused; the genuine copy still completes the
    /// handshake afterwards, and a forgery after that is still refused.
    #[test]
    fn tampered_response_index_is_refused() {
        let (client, server) = keys();
        let (mut init, m2, skeys) = exchange(&client, &server, 0x0102_0304, FLAG_FRESH_SESSION);
        assert_eq!(
            init.finish(0x0102_0305, &m2[R..M]),
            Err(HandshakeError::IndexMismatch {
                header: 0x0102_0305,
                inner: 0x0102_0304
            })
        );
        assert_eq!(
            init.finish(0x0102_0304, &[0x33u8; NOISE_RESPONSE_LEN]),
            Err(HandshakeError::Auth)
        );
        let (ckeys, flags) = init.finish(0x0102_0304, &m2[R..M]).unwrap();
        assert_eq!(flags, FLAG_FRESH_SESSION);
        assert_eq!(ckeys.send, skeys.recv);
        assert_eq!(ckeys.recv, skeys.send);
    }

    /// Review finding 3: the client's index is authenticated through the prologue. An
    /// initiation whose header was altered does not authenticate, so the server cannot be
    /// made to answer (and key) an index the client never chose.
    #[test]
    fn initiation_header_is_bound_into_the_handshake() {
        let (client, server) = keys();
        let mut m1 = [0u8; INITIATION_LEN];
        Initiation::start(&client, &server.public(), None, 5, payload(), &mut m1).unwrap();
        let mut bad = m1;
        write_initiation_header(bad.first_chunk_mut().unwrap(), 6);
        assert_eq!(
            ReceivedInitiation::read(&server, &bad).unwrap_err(),
            HandshakeError::Auth
        );
        assert_eq!(
            ReceivedInitiation::read(&server, &m1).unwrap().sender_index,
            5
        );
    }
}
