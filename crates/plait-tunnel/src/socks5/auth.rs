//! Which SOCKS5 method the server accepts, and the username/password it checks
//! (RFC 1928 §3 method selection, RFC 1929 §2 username/password sub-negotiation).
//!
//! Invariants:
//! - The server never falls back: [`AuthPolicy::UsernamePassword`] selects only method
//!   0x02, [`AuthPolicy::NoAuth`] only method 0x00; a greeting without that method gets
//!   NO ACCEPTABLE METHODS (0xFF).
//! - [`Credential::verify`] compares the username and the password in constant time
//!   (`subtle`), both of them whatever the result of the first; only their lengths can
//!   leak through timing.
//! - A [`Credential`]'s password is wiped when it is dropped (`zeroize`) and never appears
//!   in `Debug` output.

use std::fmt;

use subtle::ConstantTimeEq;
use thiserror::Error;
use zeroize::Zeroizing;

/// Method 0x00, NO AUTHENTICATION REQUIRED (RFC 1928 §3).
pub const METHOD_NO_AUTH: u8 = 0x00;
/// Method 0x02, USERNAME/PASSWORD (RFC 1928 §3, RFC 1929).
pub const METHOD_USERNAME_PASSWORD: u8 = 0x02;
/// Method 0xFF, NO ACCEPTABLE METHODS: the server's refusal (RFC 1928 §3).
pub const METHOD_NONE_ACCEPTABLE: u8 = 0xff;
/// Version of the username/password sub-negotiation (RFC 1929 §2).
pub const AUTH_VERSION: u8 = 0x01;
/// Sub-negotiation STATUS for success; anything else is failure (RFC 1929 §2).
pub const AUTH_SUCCESS: u8 = 0x00;
/// The STATUS this server sends on failure.
pub const AUTH_FAILURE: u8 = 0x01;
/// Longest username or password: each has a one-byte length (RFC 1929 §2).
pub const MAX_CREDENTIAL_LEN: usize = 255;

/// A username or password that cannot be sent in RFC 1929's one-byte length fields.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("SOCKS5 {field} must be 1 to 255 bytes, got {len}")]
pub struct CredentialError {
    /// `"username"` or `"password"`.
    pub field: &'static str,
    /// Its length.
    pub len: usize,
}

/// The one username and password the server accepts.
#[derive(Clone)]
pub struct Credential {
    username: Vec<u8>,
    password: Zeroizing<Vec<u8>>,
}

impl Credential {
    /// Both must be 1..=255 bytes (RFC 1929 §2). The password moves in without a copy when
    /// it is a `String` or `Vec<u8>`; copies the caller keeps are the caller's to wipe.
    pub fn new(
        username: impl Into<Vec<u8>>,
        password: impl Into<Vec<u8>>,
    ) -> Result<Credential, CredentialError> {
        let username = username.into();
        let password = Zeroizing::new(password.into());
        for (field, len) in [("username", username.len()), ("password", password.len())] {
            if !(1..=MAX_CREDENTIAL_LEN).contains(&len) {
                return Err(CredentialError { field, len });
            }
        }
        Ok(Credential { username, password })
    }

    /// Whether `username` and `password` are this credential, in constant time (for equal
    /// lengths); both comparisons always run.
    pub fn verify(&self, username: &[u8], password: &[u8]) -> bool {
        let user_ok = self.username.as_slice().ct_eq(username);
        let pass_ok = self.password.as_slice().ct_eq(password);
        bool::from(user_ok & pass_ok)
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("username", &String::from_utf8_lossy(&self.username))
            .field("password", &"<redacted>")
            .finish()
    }
}

/// What the server asks SOCKS5 clients for.
#[derive(Clone, Debug)]
pub enum AuthPolicy {
    /// Method 0x00: anyone who can reach the listener may connect.
    NoAuth,
    /// Method 0x02 with this credential.
    UsernamePassword(Credential),
}

impl AuthPolicy {
    /// The method this policy selects.
    pub fn method(&self) -> u8 {
        match self {
            AuthPolicy::NoAuth => METHOD_NO_AUTH,
            AuthPolicy::UsernamePassword(_) => METHOD_USERNAME_PASSWORD,
        }
    }

    /// The method to select from a greeting's METHODS: this policy's one if offered,
    /// otherwise [`METHOD_NONE_ACCEPTABLE`].
    pub fn select(&self, offered: &[u8]) -> u8 {
        let wanted = self.method();
        if offered.contains(&wanted) {
            wanted
        } else {
            METHOD_NONE_ACCEPTABLE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert!(Credential::new("u", "p").is_ok());
        assert!(Credential::new("u".repeat(255), vec![0u8; 255]).is_ok());
        assert_eq!(
            Credential::new("", "p").unwrap_err(),
            CredentialError {
                field: "username",
                len: 0
            }
        );
        assert_eq!(
            Credential::new("u", "p".repeat(256)).unwrap_err(),
            CredentialError {
                field: "password",
                len: 256
            }
        );
        assert_eq!(
            Credential::new("u", "").unwrap_err().to_string(),
            "SOCKS5 password must be 1 to 255 bytes, got 0"
        );
    }

    #[test]
    fn verify() {
        let c = Credential::new("alice", "s3cret").unwrap();
        assert!(c.verify(b"alice", b"s3cret"));
        assert!(!c.verify(b"alice", b"s3creT"));
        assert!(!c.verify(b"alic", b"s3cret"));
        assert!(!c.verify(b"bob", b"s3cret"));
        assert!(!c.verify(b"alice", b""));
        assert!(!c.verify(b"", b""));
        assert!(!c.verify(b"s3cret", b"alice"));
    }

    #[test]
    fn password_not_in_debug() {
        let c = Credential::new("alice", "s3cret").unwrap();
        let shown = format!("{:?}", AuthPolicy::UsernamePassword(c));
        assert!(
            shown.contains("alice") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn select() {
        let up = AuthPolicy::UsernamePassword(Credential::new("u", "p").unwrap());
        assert_eq!(up.select(&[0x00, 0x02]), 0x02);
        assert_eq!(up.select(&[0x00]), 0xff);
        assert_eq!(AuthPolicy::NoAuth.select(&[0x02, 0x00]), 0x00);
        assert_eq!(AuthPolicy::NoAuth.select(&[0x02, 0x01, 0x80]), 0xff);
        assert_eq!(AuthPolicy::NoAuth.select(&[]), 0xff);
    }
}
