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
//! initiation is refused without a reply. Message 2's payload carries flags.
//!
//! After message 2 both sides take snow's raw split (one 32-byte key per direction) into
//! [`crate::crypto::aead`], because data messages use an explicit counter nonce and the
//! header as associated data, which snow's transport mode does not offer.
//!
//! Invariant: nothing here panics on any input; every failure is a [`HandshakeError`].

use snow::{Builder, HandshakeState};
use thiserror::Error;

use crate::crypto::aead::KEY_LEN;
use crate::keys::Key;
use crate::message::{
    INITIATION_LEN, INITIATION_PAYLOAD_LEN, NOISE_INITIATION_LEN, NOISE_RESPONSE_LEN, RESPONSE_LEN,
    RESPONSE_PAYLOAD_LEN, write_initiation_header, write_response_header,
};

/// The Noise protocol name.
pub const NOISE_PARAMS: &str = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
/// Bound into the handshake hash: a handshake of another protocol or version cannot be
/// confused with plait's.
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
        b[0] = PAYLOAD_VERSION;
        b[4..8].copy_from_slice(&self.session_id.to_le_bytes());
        b[8..16].copy_from_slice(&self.timestamp.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<InitiationPayload, HandshakeError> {
        if b.len() != INITIATION_PAYLOAD_LEN {
            return Err(HandshakeError::Size {
                got: b.len(),
                need: INITIATION_PAYLOAD_LEN,
            });
        }
        if b[0] != PAYLOAD_VERSION {
            return Err(HandshakeError::Version(b[0]));
        }
        let mut s = [0u8; 4];
        s.copy_from_slice(&b[4..8]);
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[8..16]);
        Ok(InitiationPayload {
            session_id: u32::from_le_bytes(s),
            timestamp: u64::from_le_bytes(t),
        })
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

fn builder() -> Result<Builder<'static>, HandshakeError> {
    let params = NOISE_PARAMS.parse().map_err(setup)?;
    Builder::new(params).prologue(PROLOGUE).map_err(setup)
}

const ZERO_PSK: [u8; 32] = [0; 32];

/// A client's handshake in flight, waiting for message 2.
pub struct Initiation {
    state: HandshakeState,
    /// The index the client chose; the response names it as receiver.
    pub sender_index: u32,
    /// The session id it announced.
    pub session_id: u32,
}

impl std::fmt::Debug for Initiation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initiation")
            .field("sender_index", &self.sender_index)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Initiation {
    /// Writes a whole initiation message (header and Noise message 1) into
    /// `out[..INITIATION_LEN]`.
    pub fn start(
        local_private: &Key,
        server_public: &Key,
        psk: Option<&Key>,
        sender_index: u32,
        payload: InitiationPayload,
        out: &mut [u8],
    ) -> Result<Initiation, HandshakeError> {
        if out.len() < INITIATION_LEN {
            return Err(HandshakeError::Size {
                got: out.len(),
                need: INITIATION_LEN,
            });
        }
        let psk = psk.map_or(&ZERO_PSK, Key::as_bytes);
        let mut state = builder()?
            .local_private_key(local_private.as_bytes())
            .map_err(setup)?
            .remote_public_key(server_public.as_bytes())
            .map_err(setup)?
            .psk(2, psk)
            .map_err(setup)?
            .build_initiator()
            .map_err(setup)?;
        write_initiation_header(out, sender_index);
        let n = state
            .write_message(&payload.encode(), &mut out[8..INITIATION_LEN])
            .map_err(setup)?;
        debug_assert_eq!(n, NOISE_INITIATION_LEN);
        Ok(Initiation {
            state,
            sender_index,
            session_id: payload.session_id,
        })
    }

    /// Reads message 2 (`noise` = the response after its 12-byte header). Returns the
    /// session keys and the response flags. Consumes the handshake either way: a failed
    /// response means starting over.
    pub fn finish(mut self, noise: &[u8]) -> Result<(SessionKeys, u8), HandshakeError> {
        if noise.len() != NOISE_RESPONSE_LEN {
            return Err(HandshakeError::Size {
                got: noise.len(),
                need: NOISE_RESPONSE_LEN,
            });
        }
        let mut payload = [0u8; 64];
        let n = self
            .state
            .read_message(noise, &mut payload)
            .map_err(|_| HandshakeError::Auth)?;
        if n != RESPONSE_PAYLOAD_LEN || !self.state.is_handshake_finished() {
            return Err(HandshakeError::Auth);
        }
        let (i2r, r2i) = self.state.dangerously_get_raw_split();
        Ok((
            SessionKeys {
                send: i2r,
                recv: r2i,
            },
            payload[0],
        ))
    }
}

/// The server's view of a received message 1, before it decides to answer.
pub struct ReceivedInitiation {
    state: HandshakeState,
    /// The client's static public key, now authenticated by message 1.
    pub client: Key,
    /// What the client said.
    pub payload: InitiationPayload,
}

impl std::fmt::Debug for ReceivedInitiation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedInitiation")
            .field("payload", &self.payload)
            .finish_non_exhaustive()
    }
}

impl ReceivedInitiation {
    /// Reads Noise message 1 (`noise` = the initiation after its 8-byte header).
    pub fn read(server_private: &Key, noise: &[u8]) -> Result<ReceivedInitiation, HandshakeError> {
        if noise.len() != NOISE_INITIATION_LEN {
            return Err(HandshakeError::Size {
                got: noise.len(),
                need: NOISE_INITIATION_LEN,
            });
        }
        // The psk is only mixed in with message 2; a placeholder lets snow build the state,
        // and `respond` sets the client's real one once we know who the client is.
        let mut state = builder()?
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
        let payload = InitiationPayload::decode(&payload[..n])?;
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
        })
    }

    /// Writes the whole response (header and Noise message 2) into `out[..RESPONSE_LEN]`
    /// and returns the server's session keys.
    pub fn respond(
        mut self,
        psk: Option<&Key>,
        sender_index: u32,
        receiver_index: u32,
        flags: u8,
        out: &mut [u8],
    ) -> Result<SessionKeys, HandshakeError> {
        if out.len() < RESPONSE_LEN {
            return Err(HandshakeError::Size {
                got: out.len(),
                need: RESPONSE_LEN,
            });
        }
        self.state
            .set_psk(2, psk.map_or(&ZERO_PSK[..], |k| &k.as_bytes()[..]))
            .map_err(setup)?;
        write_response_header(out, sender_index, receiver_index);
        let n = self
            .state
            .write_message(&[flags], &mut out[12..RESPONSE_LEN])
            .map_err(setup)?;
        debug_assert_eq!(n, NOISE_RESPONSE_LEN);
        if !self.state.is_handshake_finished() {
            return Err(HandshakeError::Setup("handshake not finished".into()));
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

    #[test]
    fn full_handshake_agrees_on_keys() {
        let (client, server) = keys();
        let psk = Key::generate().unwrap();
        let mut m1 = [0u8; INITIATION_LEN];
        let init = Initiation::start(&client, &server.public(), Some(&psk), 7, payload(), &mut m1)
            .unwrap();
        assert_eq!(parse(&m1), Ok(Message::Initiation { sender: 7 }));
        let got = ReceivedInitiation::read(&server, &m1[8..]).unwrap();
        assert_eq!(got.client, client.public());
        assert_eq!(got.payload, payload());
        let mut m2 = [0u8; RESPONSE_LEN];
        let server_keys = got
            .respond(Some(&psk), 9, 7, FLAG_FRESH_SESSION, &mut m2)
            .unwrap();
        assert_eq!(
            parse(&m2),
            Ok(Message::Response {
                sender: 9,
                receiver: 7
            })
        );
        let (client_keys, flags) = init.finish(&m2[12..]).unwrap();
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
            ReceivedInitiation::read(&server, &m1[8..]).unwrap_err(),
            HandshakeError::Auth
        );
    }

    #[test]
    fn psk_mismatch_fails_at_the_client() {
        let (client, server) = keys();
        let mut m1 = [0u8; INITIATION_LEN];
        let init =
            Initiation::start(&client, &server.public(), None, 1, payload(), &mut m1).unwrap();
        let got = ReceivedInitiation::read(&server, &m1[8..]).unwrap();
        let mut m2 = [0u8; RESPONSE_LEN];
        let wrong = Key::generate().unwrap();
        got.respond(Some(&wrong), 2, 1, 0, &mut m2).unwrap();
        assert_eq!(init.finish(&m2[12..]).unwrap_err(), HandshakeError::Auth);
    }

    #[test]
    fn tampered_messages_fail() {
        let (client, server) = keys();
        let mut m1 = [0u8; INITIATION_LEN];
        let init =
            Initiation::start(&client, &server.public(), None, 1, payload(), &mut m1).unwrap();
        for i in 8..INITIATION_LEN {
            let mut bad = m1;
            bad[i] ^= 0x40;
            assert!(
                ReceivedInitiation::read(&server, &bad[8..]).is_err(),
                "byte {i}"
            );
        }
        let got = ReceivedInitiation::read(&server, &m1[8..]).unwrap();
        let mut m2 = [0u8; RESPONSE_LEN];
        got.respond(None, 2, 1, 0, &mut m2).unwrap();
        let mut bad = m2;
        bad[40] ^= 1;
        assert!(init.finish(&bad[12..]).is_err());
    }

    #[test]
    fn garbage_and_wrong_sizes_are_errors() {
        let server = Key::generate().unwrap();
        assert!(ReceivedInitiation::read(&server, &[0u8; NOISE_INITIATION_LEN]).is_err());
        assert!(matches!(
            ReceivedInitiation::read(&server, &[0u8; 3]),
            Err(HandshakeError::Size { .. })
        ));
    }
}
