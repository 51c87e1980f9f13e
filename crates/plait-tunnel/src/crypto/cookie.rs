//! mac1, mac2 and cookie replies: WireGuard's defence against handshake floods
//! (docs/protocol.md#dos), with BLAKE2s and XChaCha20-Poly1305 as WireGuard uses them
//! (the RustCrypto `blake2` and `chacha20poly1305` crates, already in the tree through
//! snow).
//!
//! - `HASH(x)` = BLAKE2s-256(x); `MAC(key, x)` = keyed BLAKE2s (RFC 7693) with a 16-byte
//!   output, the key being 32 bytes or a 16-byte cookie.
//! - mac1 = MAC(HASH([`LABEL_MAC1`] || receiver's static public key), message up to mac1).
//!   Anyone who knows the receiver's public key can make it, but nobody else: a flood
//!   made without the key is refused for the price of one BLAKE2s, before any
//!   Diffie-Hellman.
//! - The cookie for a source = MAC(server secret, source IP octets || port big-endian);
//!   the secret is 32 random bytes, replaced when it is [`COOKIE_SECRET_MAX_AGE`] old.
//! - A cookie reply seals the cookie with XChaCha20-Poly1305 under
//!   HASH([`LABEL_COOKIE`] || server's static public key), with a random 24-byte nonce and
//!   the initiation's mac1 as associated data: only the sender of that initiation (who
//!   knows the mac1 it sent) accepts it, and an on-path observer learns nothing it could
//!   not get by asking for a cookie itself.
//! - mac2 = MAC(cookie, initiation up to mac2), or zeros without a fresh cookie.
//!
//! Invariants: nothing here panics on any input; MACs are compared in constant time.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use blake2::digest::consts::U16;
use blake2::digest::{KeyInit as _, Mac as _};
use blake2::{Blake2s256, Blake2sMac, Digest as _};
use chacha20poly1305::aead::AeadInPlace as _;
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use plait_proto::Time;
use subtle::ConstantTimeEq as _;

use crate::keys::Key;
use crate::message::{
    COOKIE_NONCE_LEN, COOKIE_NONCE_OFFSET, COOKIE_REPLY_LEN, COOKIE_SEALED_OFFSET, INITIATION_LEN,
    INITIATION_MAC1_OFFSET, INITIATION_MAC2_OFFSET, MAC_LEN, RESPONSE_LEN, RESPONSE_MAC1_OFFSET,
    write_cookie_reply_header,
};

/// Hashed with the receiver's public key into the mac1 key. WireGuard's is `mac1----`;
/// plait's own keeps the two protocols' MACs apart even for one key pair.
pub const LABEL_MAC1: &[u8] = b"plait mac1 v1";
/// Hashed with the server's public key into the cookie-sealing key (WireGuard:
/// `cookie--`).
pub const LABEL_COOKIE: &[u8] = b"plait cookie v1";
/// The server replaces its cookie secret when it is this old, so a cookie is good for at
/// most this long (WireGuard: 120 s).
pub const COOKIE_SECRET_MAX_AGE: Duration = Duration::from_secs(120);
/// A client stops using a cookie this long before [`COOKIE_SECRET_MAX_AGE`] has passed
/// since it received it (WireGuard: 5 s), so it does not send a mac2 the server's next
/// secret already invalidated.
pub const COOKIE_SECRET_LATENCY: Duration = Duration::from_secs(5);

/// A mac1, a mac2 or a cookie.
pub type Mac = [u8; MAC_LEN];

/// HASH(label || key): BLAKE2s-256.
pub fn hash(label: &[u8], key: &Key) -> [u8; 32] {
    let mut h = Blake2s256::new();
    h.update(label);
    h.update(key.as_bytes());
    h.finalize().into()
}

/// MAC(key, msg): keyed BLAKE2s, 16-byte output. `key` is 1 to 32 bytes (here 32, or a
/// 16-byte cookie); any other length gives zeros, which no check accepts as a mac2
/// (callers pass only fixed-size keys).
pub fn mac(key: &[u8], msg: &[u8]) -> Mac {
    let Ok(mut m) = <Blake2sMac<U16> as blake2::digest::KeyInit>::new_from_slice(key) else {
        return [0; MAC_LEN];
    };
    m.update(msg);
    m.finalize().into_bytes().into()
}

fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// The mac1 key for messages to the holder of `public`: HASH([`LABEL_MAC1`] || public).
#[derive(Clone)]
pub struct Mac1Key([u8; 32]);

impl std::fmt::Debug for Mac1Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mac1Key(…)")
    }
}

impl Mac1Key {
    /// The key for messages whose receiver's static public key is `public`.
    pub fn new(public: &Key) -> Mac1Key {
        Mac1Key(hash(LABEL_MAC1, public))
    }

    fn mac(&self, covered: &[u8]) -> Mac {
        mac(&self.0, covered)
    }
}

/// Writes an initiation's mac1 (`msg` is the whole initiation; its mac2 is left alone).
pub fn write_initiation_mac1(msg: &mut [u8], key: &Mac1Key) {
    if msg.len() != INITIATION_LEN {
        return;
    }
    let (covered, rest) = msg.split_at_mut(INITIATION_MAC1_OFFSET);
    if let Some(dst) = rest.get_mut(..MAC_LEN) {
        dst.copy_from_slice(&key.mac(covered));
    }
}

/// Writes an initiation's mac2 under `cookie`, or zeros for `None`.
pub fn write_initiation_mac2(msg: &mut [u8], cookie: Option<&Mac>) {
    if msg.len() != INITIATION_LEN {
        return;
    }
    let (covered, rest) = msg.split_at_mut(INITIATION_MAC2_OFFSET);
    let value = cookie.map_or([0; MAC_LEN], |c| mac(c, covered));
    if let Some(dst) = rest.get_mut(..MAC_LEN) {
        dst.copy_from_slice(&value);
    }
}

/// The mac1 field of an initiation.
pub fn initiation_mac1(msg: &[u8]) -> Option<Mac> {
    if msg.len() != INITIATION_LEN {
        return None;
    }
    msg.get(INITIATION_MAC1_OFFSET..INITIATION_MAC2_OFFSET)?
        .try_into()
        .ok()
}

/// Whether an initiation's mac1 is right for `key` (the server's own).
pub fn check_initiation_mac1(msg: &[u8], key: &Mac1Key) -> bool {
    match (msg.get(..INITIATION_MAC1_OFFSET), initiation_mac1(msg)) {
        (Some(covered), Some(got)) => equal(&key.mac(covered), &got),
        _ => false,
    }
}

/// Writes a response's mac1 (`key`: the client's, [`Mac1Key::new`] of its public key).
pub fn write_response_mac1(msg: &mut [u8], key: &Mac1Key) {
    if msg.len() != RESPONSE_LEN {
        return;
    }
    let (covered, rest) = msg.split_at_mut(RESPONSE_MAC1_OFFSET);
    if let Some(dst) = rest.get_mut(..MAC_LEN) {
        dst.copy_from_slice(&key.mac(covered));
    }
}

/// Whether a response's mac1 is right for `key` (the client's own).
pub fn check_response_mac1(msg: &[u8], key: &Mac1Key) -> bool {
    if msg.len() != RESPONSE_LEN {
        return false;
    }
    match (
        msg.get(..RESPONSE_MAC1_OFFSET),
        msg.get(RESPONSE_MAC1_OFFSET..),
    ) {
        (Some(covered), Some(got)) => equal(&key.mac(covered), got),
        _ => false,
    }
}

/// The bytes a cookie is a MAC of: the source's IP octets (4 or 16), then its port,
/// big-endian (WireGuard's order).
fn source_bytes(from: SocketAddr) -> ([u8; 18], usize) {
    let mut b = [0u8; 18];
    let n = match from.ip() {
        IpAddr::V4(ip) => {
            b[..4].copy_from_slice(&ip.octets());
            4
        }
        IpAddr::V6(ip) => {
            b[..16].copy_from_slice(&ip.octets());
            16
        }
    };
    b[n..n + 2].copy_from_slice(&from.port().to_be_bytes());
    (b, n + 2)
}

/// The sealing key of cookie replies from the holder of `server_public`.
pub fn cookie_key(server_public: &Key) -> [u8; 32] {
    hash(LABEL_COOKIE, server_public)
}

/// Seals `cookie` into a whole cookie reply to an initiation whose sender index was
/// `receiver` and whose mac1 was `mac1`.
pub fn seal_cookie_reply(
    key: &[u8; 32],
    receiver: u32,
    mac1: &Mac,
    cookie: &Mac,
    nonce: &[u8; COOKIE_NONCE_LEN],
) -> [u8; COOKIE_REPLY_LEN] {
    let mut out = [0u8; COOKIE_REPLY_LEN];
    if let Some(h) = out.first_chunk_mut::<COOKIE_NONCE_OFFSET>() {
        write_cookie_reply_header(h, receiver);
    }
    let (head, sealed) = out.split_at_mut(COOKIE_SEALED_OFFSET);
    if let Some(n) = head.get_mut(COOKIE_NONCE_OFFSET..) {
        n.copy_from_slice(nonce);
    }
    let (text, tag) = sealed.split_at_mut(MAC_LEN);
    text.copy_from_slice(cookie);
    let aead = XChaCha20Poly1305::new(key.into());
    // A 16-byte message cannot exceed XChaCha20's length limit: sealing never fails.
    if let Ok(t) = aead.encrypt_in_place_detached(XNonce::from_slice(nonce), mac1, text) {
        tag.copy_from_slice(&t);
    }
    out
}

/// Opens a cookie reply (the whole message) to the initiation whose mac1 was `mac1`.
/// `None` if it does not authenticate.
pub fn open_cookie_reply(key: &[u8; 32], reply: &[u8], mac1: &Mac) -> Option<Mac> {
    if reply.len() != COOKIE_REPLY_LEN {
        return None;
    }
    let nonce = reply.get(COOKIE_NONCE_OFFSET..COOKIE_SEALED_OFFSET)?;
    let sealed = reply.get(COOKIE_SEALED_OFFSET..)?;
    let (text, tag) = sealed.split_at_checked(MAC_LEN)?;
    let mut cookie: Mac = text.try_into().ok()?;
    let aead = XChaCha20Poly1305::new(key.into());
    aead.decrypt_in_place_detached(
        XNonce::from_slice(nonce),
        mac1,
        &mut cookie,
        chacha20poly1305::Tag::from_slice(tag),
    )
    .ok()?;
    Some(cookie)
}

/// The server's side: checks mac1 and mac2 and makes cookie replies.
pub struct CookieChecker {
    mac1: Mac1Key,
    seal: [u8; 32],
    secret: [u8; 32],
    /// When the secret was made; `None`: not yet (made on first use).
    secret_born: Option<Time>,
}

impl std::fmt::Debug for CookieChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookieChecker")
            .field("secret_born", &self.secret_born)
            .finish_non_exhaustive()
    }
}

impl CookieChecker {
    /// The checker of the server whose static public key is `server_public`.
    pub fn new(server_public: &Key) -> CookieChecker {
        CookieChecker {
            mac1: Mac1Key::new(server_public),
            seal: cookie_key(server_public),
            secret: [0; 32],
            secret_born: None,
        }
    }

    /// Whether an initiation's mac1 is right: the first check, before anything else.
    pub fn check_mac1(&self, msg: &[u8]) -> bool {
        check_initiation_mac1(msg, &self.mac1)
    }

    /// The cookie of `from` at `now`; a secret [`COOKIE_SECRET_MAX_AGE`] old is replaced
    /// first, from `fill` (random bytes).
    pub fn cookie(&mut self, now: Time, from: SocketAddr, fill: &mut impl FnMut(&mut [u8])) -> Mac {
        let due = self
            .secret_born
            .is_none_or(|born| now >= born + COOKIE_SECRET_MAX_AGE);
        if due {
            fill(&mut self.secret);
            self.secret_born = Some(now);
        }
        let (b, n) = source_bytes(from);
        mac(&self.secret, b.get(..n).unwrap_or_default())
    }

    /// Whether an initiation (whose mac1 was checked) from `from` carries the mac2 of the
    /// current cookie for `from`.
    pub fn check_mac2(
        &mut self,
        now: Time,
        from: SocketAddr,
        msg: &[u8],
        fill: &mut impl FnMut(&mut [u8]),
    ) -> bool {
        if msg.len() != INITIATION_LEN {
            return false;
        }
        let cookie = self.cookie(now, from, fill);
        match (
            msg.get(..INITIATION_MAC2_OFFSET),
            msg.get(INITIATION_MAC2_OFFSET..),
        ) {
            (Some(covered), Some(got)) => equal(&mac(&cookie, covered), got),
            _ => false,
        }
    }

    /// The cookie reply to initiation `msg` (sender index `sender`) from `from`.
    pub fn reply(
        &mut self,
        now: Time,
        from: SocketAddr,
        sender: u32,
        msg: &[u8],
        fill: &mut impl FnMut(&mut [u8]),
    ) -> Option<[u8; COOKIE_REPLY_LEN]> {
        let mac1 = initiation_mac1(msg)?;
        let cookie = self.cookie(now, from, fill);
        let mut nonce = [0u8; COOKIE_NONCE_LEN];
        fill(&mut nonce);
        Some(seal_cookie_reply(
            &self.seal, sender, &mac1, &cookie, &nonce,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{INITIATION_HEADER_LEN, Message, parse, write_initiation_header};

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// A fixed "public key": bytes 0, 1, ..., 31.
    fn fixed_key() -> Key {
        Key::from_bytes(std::array::from_fn(|i| i as u8))
    }

    /// A fixed initiation: header with sender index 0x01020304, then bytes 0xaa, macs
    /// zero.
    fn fixed_initiation() -> [u8; INITIATION_LEN] {
        let mut m = [0xaau8; INITIATION_LEN];
        write_initiation_header(
            m.first_chunk_mut::<INITIATION_HEADER_LEN>().unwrap(),
            0x0102_0304,
        );
        m[INITIATION_MAC1_OFFSET..].fill(0);
        m
    }

    /// Test vectors, cross-checked with Python's `hashlib` (an independent BLAKE2s) and,
    /// for the cookie reply, with `cryptography`'s ChaCha20-Poly1305 under an HChaCha20
    /// subkey written from draft-irtf-cfrg-xchacha (its HChaCha20 test vector checked):
    ///
    /// ```text
    /// key    = bytes(range(32))                 # the server's public key
    /// k1     = blake2s(b"plait mac1 v1" + key).digest()
    /// msg    = bytes([1,0,0,0, 4,3,2,1]) + b"\xaa" * 112   # initiation up to mac1
    /// mac1   = blake2s(msg, key=k1, digest_size=16).digest()
    /// ck     = blake2s(b"plait cookie v1" + key).digest()
    /// cookie = blake2s(bytes([192,0,2,7]) + (40000).to_bytes(2, "big"),
    ///                  key=bytes([7]*32), digest_size=16).digest()   # secret [7; 32]
    /// mac2   = blake2s(msg + mac1, key=cookie, digest_size=16).digest()
    /// nonce  = bytes(range(0x40, 0x58))
    /// sub    = hchacha20(ck, nonce[:16])
    /// reply  = bytes([3,0,0,0]) + (0x01020304).to_bytes(4, "little") + nonce
    ///          + ChaCha20Poly1305(sub).encrypt(b"\0"*4 + nonce[16:], cookie, mac1)
    /// ```
    const K1: &str = "6569c5be805275aa0748ff32873d246e123455e9c9802c65feca762b7aef27f0";
    const MAC1: &str = "62e6979fb498fc24543caf24a2a5734b";
    const COOKIE_KEY: &str = "ac432305e6211c23518b5e495a00f4d66b40b97f36bc18bc960a130731a64b42";
    const COOKIE: &str = "6b561d848dca503082dc1caa20e618fb";
    const MAC2: &str = "12a56b2641d214adb036a7bd894c01e1";
    const REPLY: &str = "0300000004030201404142434445464748494a4b4c4d4e4f5051525354555657\
                         6c2b07ad4e803d8a9f9133c9148c6f7f212f9f43f96aef36c01917994cc55298";

    fn source() -> SocketAddr {
        "192.0.2.7:40000".parse().unwrap()
    }

    fn nonce() -> [u8; COOKIE_NONCE_LEN] {
        std::array::from_fn(|i| 0x40 + i as u8)
    }

    #[test]
    fn test_vectors() {
        let key = fixed_key();
        let k1 = Mac1Key::new(&key);
        assert_eq!(hex(&k1.0), K1);
        let mut m = fixed_initiation();
        write_initiation_mac1(&mut m, &k1);
        let mac1 = initiation_mac1(&m).unwrap();
        assert_eq!(hex(&mac1), MAC1);
        assert_eq!(hex(&cookie_key(&key)), COOKIE_KEY);
        let cookie = mac(&[7u8; 32], &[192, 0, 2, 7, 0x9c, 0x40]);
        assert_eq!(hex(&cookie), COOKIE);
        write_initiation_mac2(&mut m, Some(&cookie));
        assert_eq!(hex(&m[INITIATION_MAC2_OFFSET..]), MAC2);
        // The server's checker with the secret [7; 32] makes the same cookie and reply.
        let mut checker = CookieChecker::new(&key);
        let mut fill = |b: &mut [u8]| b.fill(7);
        assert_eq!(checker.cookie(Time::ZERO, source(), &mut fill), cookie);
        assert!(checker.check_mac1(&m));
        assert!(checker.check_mac2(Time::ZERO, source(), &m, &mut fill));
        let reply = seal_cookie_reply(&cookie_key(&key), 0x0102_0304, &mac1, &cookie, &nonce());
        assert_eq!(hex(&reply), REPLY);
        assert_eq!(
            parse(&reply),
            Ok(Message::CookieReply {
                receiver: 0x0102_0304
            })
        );
    }

    #[test]
    fn cookie_reply_round_trip_and_refusals() {
        let key = fixed_key();
        let ck = cookie_key(&key);
        let mut m = fixed_initiation();
        write_initiation_mac1(&mut m, &Mac1Key::new(&key));
        let mac1 = initiation_mac1(&m).unwrap();
        let mut checker = CookieChecker::new(&key);
        let mut n = 0u8;
        let mut fill = |b: &mut [u8]| {
            n = n.wrapping_add(1);
            b.fill(n)
        };
        let reply = checker
            .reply(Time::ZERO, source(), 0x0102_0304, &m, &mut fill)
            .unwrap();
        let cookie = open_cookie_reply(&ck, &reply, &mac1).expect("opens");
        assert_eq!(cookie, checker.cookie(Time::ZERO, source(), &mut fill));
        // Another initiation's mac1 (the reply answers someone else), another server's
        // key, and any flipped bit: refused.
        let mut other = mac1;
        other[0] ^= 1;
        assert_eq!(open_cookie_reply(&ck, &reply, &other), None);
        let wrong = cookie_key(&Key::from_bytes([9; 32]));
        assert_eq!(open_cookie_reply(&wrong, &reply, &mac1), None);
        for i in COOKIE_NONCE_OFFSET..COOKIE_REPLY_LEN {
            let mut bad = reply;
            bad[i] ^= 0x20;
            assert_eq!(open_cookie_reply(&ck, &bad, &mac1), None, "byte {i}");
        }
        assert_eq!(open_cookie_reply(&ck, &reply[1..], &mac1), None);
        // The client's mac2 with that cookie passes the server's check.
        write_initiation_mac2(&mut m, Some(&cookie));
        assert!(checker.check_mac2(Time::ZERO, source(), &m, &mut fill));
    }

    #[test]
    fn refusals_bad_mac1_stale_cookie_other_source() {
        let key = fixed_key();
        let mut checker = CookieChecker::new(&key);
        let mut n = 0u8;
        let mut fill = |b: &mut [u8]| {
            n = n.wrapping_add(1);
            b.fill(n)
        };
        let mut m = fixed_initiation();
        // No mac1, a mac1 for another server, any bit flipped under or in mac1: refused.
        assert!(!checker.check_mac1(&m));
        write_initiation_mac1(&mut m, &Mac1Key::new(&Key::from_bytes([9; 32])));
        assert!(!checker.check_mac1(&m));
        write_initiation_mac1(&mut m, &Mac1Key::new(&key));
        assert!(checker.check_mac1(&m));
        for i in 0..INITIATION_MAC2_OFFSET {
            let mut bad = m;
            bad[i] ^= 0x01;
            assert!(!checker.check_mac1(&bad), "byte {i}");
        }
        // mac2 is outside mac1.
        let mut with_mac2 = m;
        with_mac2[INITIATION_MAC2_OFFSET] ^= 1;
        assert!(checker.check_mac1(&with_mac2));
        assert!(!checker.check_mac1(&m[..INITIATION_LEN - 1]));

        let t0 = Time::from_millis(10_000);
        let cookie = checker.cookie(t0, source(), &mut fill);
        write_initiation_mac2(&mut m, Some(&cookie));
        assert!(checker.check_mac2(t0, source(), &m, &mut fill));
        // From another address or port: refused.
        assert!(!checker.check_mac2(t0, "192.0.2.8:40000".parse().unwrap(), &m, &mut fill));
        assert!(!checker.check_mac2(t0, "192.0.2.7:40001".parse().unwrap(), &m, &mut fill));
        assert!(!checker.check_mac2(t0, "[2001:db8::7]:40000".parse().unwrap(), &m, &mut fill));
        // No mac2, a damaged one: refused.
        let mut bad = m;
        bad[INITIATION_LEN - 1] ^= 1;
        assert!(!checker.check_mac2(t0, source(), &bad, &mut fill));
        write_initiation_mac2(&mut bad, None);
        assert!(!checker.check_mac2(t0, source(), &bad, &mut fill));
        // Still good just before the secret's 120 s, stale after it.
        let end = t0 + COOKIE_SECRET_MAX_AGE;
        assert!(checker.check_mac2(
            end.saturating_sub(Duration::from_nanos(1)),
            source(),
            &m,
            &mut fill
        ));
        assert!(!checker.check_mac2(end, source(), &m, &mut fill));
        let fresh = checker.cookie(end, source(), &mut fill);
        assert_ne!(fresh, cookie);
        write_initiation_mac2(&mut m, Some(&fresh));
        assert!(checker.check_mac2(end, source(), &m, &mut fill));
    }

    #[test]
    fn response_mac1() {
        let client = fixed_key();
        let k = Mac1Key::new(&client);
        let mut r = [0x55u8; RESPONSE_LEN];
        assert!(!check_response_mac1(&r, &k));
        write_response_mac1(&mut r, &k);
        assert!(check_response_mac1(&r, &k));
        assert!(!check_response_mac1(
            &r,
            &Mac1Key::new(&Key::from_bytes([9; 32]))
        ));
        for i in 0..RESPONSE_LEN {
            let mut bad = r;
            bad[i] ^= 0x80;
            assert!(!check_response_mac1(&bad, &k), "byte {i}");
        }
        assert!(!check_response_mac1(&r[..RESPONSE_LEN - 1], &k));
    }
}
