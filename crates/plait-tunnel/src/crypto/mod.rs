//! Cryptography of the tunnel (docs/protocol.md#tunnel-security).
//!
//! - [`handshake`]: Noise IKpsk2 (snow) with static X25519 keys; it yields one key per
//!   direction.
//! - [`cookie`]: mac1, mac2 and cookie replies, WireGuard's defence against handshake
//!   floods (docs/protocol.md#dos).
//! - [`hint`]: the MAC of the unknown-index hint a restarted server sends
//!   (docs/protocol.md#unknown-index).
//! - [`aead`]: ChaCha20-Poly1305 (ring) sealing in place with a counter nonce that never
//!   repeats.
//! - [`replay`]: the sliding anti-replay window, shared by every path of a session.
//! - [`keypair`]: one handshake's keys, counters, replay window and age, with the rekey and
//!   expiry rules (WireGuard's timers).

pub mod aead;
pub mod cookie;
pub mod handshake;
pub mod hint;
pub mod keypair;
pub mod replay;
