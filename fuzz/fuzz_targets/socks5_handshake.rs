//! Fuzz target: the SOCKS5 server handshake (crates/plait-tunnel/src/socks5) fed arbitrary
//! bytes, whole and split at an arbitrary point. Checks its module invariants: no panic,
//! the same outcome however the input is split, output and buffering within their bounds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use plait_tunnel::socks5::{
    AuthPolicy, Credential, Handshake, MAX_BUFFERED, MAX_OUTPUT, Socks5Error, Status,
};

fn run(
    policy: &AuthPolicy,
    parts: &[&[u8]],
) -> (Result<Option<(usize, String)>, Socks5Error>, Vec<u8>) {
    let mut hs = Handshake::new(policy.clone());
    let mut output = Vec::new();
    let mut consumed = 0;
    let mut result = Ok(None);
    for part in parts {
        match hs.feed(part) {
            Ok(p) => {
                assert!(hs.buffered() <= MAX_BUFFERED);
                let out = hs.take_output();
                assert!(out.len() <= MAX_OUTPUT);
                output.extend(out);
                consumed += p.consumed;
                if let Status::Done(t) = p.status {
                    result = Ok(Some((consumed, format!("{t:?}"))));
                    break;
                }
            }
            Err(e) => {
                output.extend(hs.take_output());
                result = Err(e);
                break;
            }
        }
    }
    (result, output)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let policy = if split & 1 == 0 {
        AuthPolicy::NoAuth
    } else {
        AuthPolicy::UsernamePassword(Credential::new("user", "pass").unwrap())
    };
    let at = usize::from(split).min(rest.len());
    let whole = run(&policy, &[rest]);
    let split = run(&policy, &[&rest[..at], &rest[at..]]);
    assert_eq!(whole, split);
});
