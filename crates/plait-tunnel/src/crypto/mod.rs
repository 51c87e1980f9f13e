//! Cryptography of the tunnel (docs/protocol.md#tunnel-security).
//!
//! - [`handshake`]: Noise IKpsk2 (snow) with static X25519 keys; it yields one key per
//!   direction.
//! - [`cookie`]: mac1, mac2 and cookie replies, WireGuard's defence against handshake
//!   floods (docs/protocol.md#dos).
//! - [`hint`]: the MAC of the unknown-index hint a restarted server sends
//!   (docs/protocol.md#unknown-index).
//! - [`aead`]: ChaCha20-Poly1305 (ring) sealing in place, with two nonce families that
//!   never meet: data messages' (their engine header's path and path sequence number) and
//!   path control's (a counter).
//! - [`replay`]: the sliding anti-replay window, one per path and one for path control per
//!   key.
//! - [`keypair`]: one handshake's keys, the sequence numbers sealed per path, replay windows
//!   and age, with the rekey and expiry rules (WireGuard's timers).

pub mod aead;
pub mod cookie;
pub mod handshake;
pub mod hint;
pub mod keypair;
pub mod replay;
