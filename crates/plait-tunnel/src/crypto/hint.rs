//! The unknown-index hint's MAC (docs/protocol.md#unknown-index): how a server that lost
//! its keys (it restarted) tells a client so, and how the client checks what it can.
//!
//! A restarted server has no session keys, so nothing it says can be authenticated by
//! them. The hint is bound instead to two things the client can check:
//! - the data message it answers: it echoes that message's receiver index (a random 32-bit
//!   value, the server's index of the client's current keys, seen only on the path) and
//!   its clear prefix (a path and path sequence number the client must have sealed under
//!   those keys), so only someone who saw the client's traffic can make one the client
//!   accepts, and only for the keys it saw;
//! - the server's static public key, as mac1 is: `mac = MAC(HASH("plait unknown-index
//!   v1" || Spub_server), hint[..10])`. Anyone who knows that key can make the MAC (the
//!   server's private key is not needed, and a restarted server could not prove more), so
//!   this only keeps out an observer who does not know which server the client talks to,
//!   as mac1 does for initiations.
//!
//! Neither makes a forgery impossible for an on-path attacker that knows the server's
//! public key, so a hint is never more than a reason to handshake early: the client keeps
//! its keys until a new handshake completes and acts on at most one hint per interval
//! (`endpoint/client.rs`).
//!
//! Invariants: nothing here panics on any input; MACs are compared in constant time.

use subtle::ConstantTimeEq as _;

use super::cookie::{Mac, hash, mac};
use crate::keys::Key;
use crate::message::{
    DataId, UNKNOWN_INDEX_LEN, UNKNOWN_INDEX_MAC_OFFSET, write_at, write_unknown_index_header,
};

/// Hashed with the server's public key into the hint's MAC key.
pub const LABEL_UNKNOWN_INDEX: &[u8] = b"plait unknown-index v1";

/// The MAC key of the unknown-index hints of the server whose static public key this is.
#[derive(Clone)]
pub struct HintKey([u8; 32]);

impl std::fmt::Debug for HintKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HintKey(…)")
    }
}

impl HintKey {
    /// The key of hints from the holder of `server_public`.
    pub fn new(server_public: &Key) -> HintKey {
        HintKey(hash(LABEL_UNKNOWN_INDEX, server_public))
    }

    /// The whole hint answering a data message with `receiver` and clear prefix `id`.
    pub fn hint(&self, receiver: u32, id: DataId) -> [u8; UNKNOWN_INDEX_LEN] {
        let mut out = [0u8; UNKNOWN_INDEX_LEN];
        let mut covered = [0u8; UNKNOWN_INDEX_MAC_OFFSET];
        write_unknown_index_header(&mut covered, receiver, id);
        write_at(&mut out, 0, &covered);
        write_at(&mut out, UNKNOWN_INDEX_MAC_OFFSET, &mac(&self.0, &covered));
        out
    }

    /// Whether `msg` (a whole hint) carries the right MAC.
    pub fn check(&self, msg: &[u8]) -> bool {
        if msg.len() != UNKNOWN_INDEX_LEN {
            return false;
        }
        let (covered, got) = msg.split_at(UNKNOWN_INDEX_MAC_OFFSET);
        let want: Mac = mac(&self.0, covered);
        bool::from(want.ct_eq(got))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, parse};

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Test vector, derived independently with Python's hashlib (docs/protocol.md#unknown-index):
    /// `k = blake2s(b"plait unknown-index v1" + bytes(range(32))).digest()`;
    /// `covered = bytes([5]) + (0x01020304).to_bytes(4, "little") + bytes([0x21, 0, 0, 0, 7])`;
    /// `mac = blake2s(covered, key=k, digest_size=16).digest()`.
    #[test]
    fn vector() {
        let server_public = Key::from_bytes(std::array::from_fn(|i| i as u8));
        let key = HintKey::new(&server_public);
        assert_eq!(
            hex(&key.0),
            "5348c6ef912e29c4ad8f5d78f087155fed111d31a4a2614fcd8fa29f1afc930e"
        );
        let h = key.hint(0x0102_0304, DataId([0x21, 0, 0, 0, 7]));
        assert_eq!(
            hex(&h),
            "0504030201210000000781b18e07283777d940a663b6db0a7305"
        );
    }

    #[test]
    fn round_trip_and_refusals() {
        let key = HintKey::new(&Key::generate().unwrap().public());
        let id = DataId([0x20, 0, 0, 0, 9]);
        let h = key.hint(42, id);
        assert_eq!(parse(&h), Ok(Message::UnknownIndex { receiver: 42, id }));
        assert!(key.check(&h));
        for i in 0..h.len() {
            let mut bad = h;
            bad[i] ^= 1;
            assert!(!key.check(&bad), "byte {i}");
        }
        let other = HintKey::new(&Key::generate().unwrap().public());
        assert!(!other.check(&h), "another server's key");
        assert!(!key.check(&h[..UNKNOWN_INDEX_LEN - 1]));
        assert!(!key.check(&[]));
    }
}
