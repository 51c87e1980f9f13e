//! X25519 keys: generation, the public key of a private key, and their text form.
//!
//! A [`Key`] is 32 bytes, private or public; its text form is standard base64 with padding
//! (44 characters), the same as WireGuard's, so `plait genkey`/`plait pubkey` output and
//! key files look familiar.
//!
//! Invariants:
//! - [`Key::generate`] returns a key clamped per RFC 7748 §5 (bits 0–2 and 255 clear, bit
//!   254 set), drawn from the OS RNG (ring's `SystemRandom`).
//! - [`Key::from_base64`] and [`Key::read_file`] accept exactly 32 bytes of canonical
//!   standard base64 and reject the all-zero key (a placeholder, never a real key).
//! - A key's bytes never appear in `Debug` output: private keys must not reach logs.
//! - A key's bytes are wiped when it is dropped (`zeroize`), so a freed private key does
//!   not linger in memory (copies the OS or snow made are theirs).

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Length of an X25519 key, bytes.
pub const KEY_LEN: usize = 32;

/// An X25519 key (private or public), 32 bytes; shown as standard base64 (44 chars), as
/// WireGuard does.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl Drop for Key {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

/// Why a key could not be made, decoded or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The text is not canonical standard base64.
    #[error("not valid base64: {0}")]
    Base64(#[source] base64::DecodeError),
    /// The text decodes, but not to 32 bytes.
    #[error("wrong key length: got {got} bytes, need {KEY_LEN}")]
    Length {
        /// How many bytes the text decoded to.
        got: usize,
    },
    /// Every byte is zero: a placeholder, not a key.
    #[error("the all-zero key is not a valid key")]
    AllZero,
    /// The key file could not be read.
    #[error("cannot read key file {}: {source}", .path.display())]
    Io {
        /// The key file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The key file was read but does not hold a valid key.
    #[error("key file {}: {source}", .path.display())]
    File {
        /// The key file.
        path: PathBuf,
        /// What is wrong with its contents.
        #[source]
        source: Box<KeyError>,
    },
    /// The OS random number generator failed.
    #[error("the system random number generator failed")]
    Rng,
}

impl Key {
    /// The key with these bytes (no check: any 32 bytes are an X25519 key).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Key {
        Key(bytes)
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// A new random private key (OS RNG via ring), clamped (RFC 7748 §5).
    pub fn generate() -> Result<Key, KeyError> {
        use ring::rand::SecureRandom as _;
        let mut bytes = [0u8; KEY_LEN];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| KeyError::Rng)?;
        bytes[0] &= 0b1111_1000;
        bytes[31] &= 0b0111_1111;
        bytes[31] |= 0b0100_0000;
        Ok(Key(bytes))
    }

    /// The public key of this private key (X25519 with the base point).
    pub fn public(&self) -> Key {
        Key(x25519_dalek::x25519(
            self.0,
            x25519_dalek::X25519_BASEPOINT_BYTES,
        ))
    }

    /// Decodes standard base64 (surrounding whitespace and newlines are ignored).
    pub fn from_base64(s: &str) -> Result<Key, KeyError> {
        let bytes = STANDARD.decode(s.trim()).map_err(KeyError::Base64)?;
        let bytes: [u8; KEY_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::Length { got: bytes.len() })?;
        if bytes == [0u8; KEY_LEN] {
            return Err(KeyError::AllZero);
        }
        Ok(Key(bytes))
    }

    /// Standard base64 with padding, 44 characters.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Reads a key file (base64 on one line, as `plait genkey` writes); errors name the file.
    pub fn read_file(path: &Path) -> Result<Key, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Key::from_base64(&text).map_err(|e| KeyError::File {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> [u8; KEY_LEN] {
        let mut out = [0u8; KEY_LEN];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    #[test]
    fn base64_round_trip() {
        let key = Key::generate().unwrap();
        let text = key.to_base64();
        assert_eq!(text.len(), 44);
        assert!(text.ends_with('='));
        assert_eq!(Key::from_base64(&text).unwrap(), key);
        assert_eq!(Key::from_base64(&format!("  {text}\n")).unwrap(), key);
    }

    #[test]
    fn generate_clamps_and_differs() {
        let a = Key::generate().unwrap();
        let b = Key::generate().unwrap();
        assert_ne!(a, b);
        for k in [&a, &b] {
            assert_eq!(k.as_bytes()[0] & 7, 0);
            assert_eq!(k.as_bytes()[31] & 0x80, 0);
            assert_eq!(k.as_bytes()[31] & 0x40, 0x40);
        }
    }

    /// RFC 7748 §6.1: Alice's and Bob's key pairs, and their shared secret.
    #[test]
    fn public_matches_rfc7748_vectors() {
        let alice = Key::from_bytes(hex(
            "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
        ));
        let alice_pub = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        assert_eq!(alice.public().as_bytes(), &alice_pub);
        let bob = Key::from_bytes(hex(
            "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
        ));
        let bob_pub = hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
        assert_eq!(bob.public().as_bytes(), &bob_pub);
        let shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
        assert_eq!(x25519_dalek::x25519(*alice.as_bytes(), bob_pub), shared);
        assert_eq!(x25519_dalek::x25519(*bob.as_bytes(), alice_pub), shared);
    }

    /// RFC 7748 §5.2, first vector, through the same function `public` uses.
    #[test]
    fn x25519_rfc7748_scalar_vector() {
        let k = hex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4");
        let u = hex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c");
        let out = hex("c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552");
        assert_eq!(x25519_dalek::x25519(k, u), out);
    }

    #[test]
    fn bad_base64_is_rejected() {
        let err = Key::from_base64("not base64 at all!").unwrap_err();
        assert!(matches!(err, KeyError::Base64(_)), "{err:?}");
        assert!(err.to_string().contains("base64"), "{err}");
        // Unpadded (the standard form always pads a 32-byte key).
        let unpadded = Key::generate().unwrap().to_base64().replace('=', "");
        assert!(matches!(
            Key::from_base64(&unpadded),
            Err(KeyError::Base64(_))
        ));
    }

    #[test]
    fn wrong_length_is_rejected() {
        let err = Key::from_base64(&STANDARD.encode([7u8; 31])).unwrap_err();
        assert!(matches!(err, KeyError::Length { got: 31 }), "{err:?}");
        assert_eq!(err.to_string(), "wrong key length: got 31 bytes, need 32");
        let err = Key::from_base64(&STANDARD.encode([7u8; 33])).unwrap_err();
        assert!(matches!(err, KeyError::Length { got: 33 }), "{err:?}");
        assert!(matches!(
            Key::from_base64(""),
            Err(KeyError::Length { got: 0 })
        ));
    }

    #[test]
    fn all_zero_is_rejected() {
        let err = Key::from_base64(&STANDARD.encode([0u8; 32])).unwrap_err();
        assert!(matches!(err, KeyError::AllZero), "{err:?}");
    }

    #[test]
    fn debug_hides_the_key() {
        let key = Key::generate().unwrap();
        let shown = format!("{key:?} {:?}", Some(&key));
        assert!(!shown.contains(&key.to_base64()), "{shown}");
        assert!(!shown.contains(&key.to_base64()[..8]), "{shown}");
        assert_eq!(format!("{key:?}"), "Key(…)");
    }

    #[test]
    fn read_file_reads_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = Key::generate().unwrap();
        let good = dir.path().join("good.key");
        std::fs::write(&good, format!("{}\n", key.to_base64())).unwrap();
        assert_eq!(Key::read_file(&good).unwrap(), key);

        let bad = dir.path().join("bad.key");
        std::fs::write(&bad, "AAAA\n").unwrap();
        let err = Key::read_file(&bad).unwrap_err();
        assert!(matches!(&err, KeyError::File { source, .. }
            if matches!(**source, KeyError::Length { got: 3 })));
        assert!(err.to_string().contains("bad.key"), "{err}");

        let missing = dir.path().join("missing.key");
        let err = Key::read_file(&missing).unwrap_err();
        assert!(matches!(err, KeyError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("missing.key"), "{err}");
    }
}
