//! Handshake and reply tests: byte-exact vectors written out from RFC 1928 §3–§6 and
//! RFC 1929 §2, every input fed whole, byte by byte and split at every offset, each
//! malformed input mapped to its error and answer, and proptests for the bounds.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use proptest::prelude::*;

use super::*;

/// How a handshake ended after all chunks were fed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    NeedMore,
    Done { target: Target, consumed: usize },
    Failed(Socks5Error),
}

fn user_pass() -> AuthPolicy {
    AuthPolicy::UsernamePassword(Credential::new("alice", "s3cret").unwrap())
}

/// Feeds `chunks` in turn, checking the bounds and the `Progress` contract after every
/// call; returns the outcome and all the output.
fn feed_chunks<'a>(
    policy: &AuthPolicy,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (Outcome, Vec<u8>) {
    let mut h = Handshake::new(policy.clone());
    let mut out = Vec::new();
    let mut offset = 0;
    for chunk in chunks {
        let r = h.feed(chunk);
        assert!(h.buffered() <= MAX_BUFFERED);
        let o = h.take_output();
        out.extend_from_slice(&o);
        assert!(out.len() <= MAX_OUTPUT, "{out:02x?}");
        match r {
            Ok(p) => {
                assert_eq!(p.has_output, !o.is_empty());
                assert!(p.consumed <= chunk.len());
                match p.status {
                    Status::NeedMore => {
                        assert_eq!(p.consumed, chunk.len(), "NeedMore consumes everything");
                        offset += chunk.len();
                    }
                    Status::Done(target) => {
                        // Done stays done, consuming nothing more.
                        let again = h.feed(b"more").unwrap();
                        assert_eq!(again.consumed, 0);
                        assert_eq!(again.status, Status::Done(target.clone()));
                        assert!(!again.has_output);
                        let consumed = offset + p.consumed;
                        return (Outcome::Done { target, consumed }, out);
                    }
                }
            }
            Err(e) => {
                // Failed stays failed, with nothing more to send.
                assert_eq!(h.feed(b"more"), Err(e.clone()));
                assert!(h.take_output().is_empty());
                assert_eq!(h.buffered(), 0);
                return (Outcome::Failed(e), out);
            }
        }
    }
    (Outcome::NeedMore, out)
}

/// The outcome of `input`, which must be the same fed whole, byte by byte, and split in
/// two at every offset.
fn run(policy: &AuthPolicy, input: &[u8]) -> (Outcome, Vec<u8>) {
    let whole = feed_chunks(policy, [input]);
    assert_eq!(feed_chunks(policy, input.chunks(1)), whole, "byte by byte");
    for at in 0..=input.len() {
        let (a, b) = input.split_at(at);
        assert_eq!(feed_chunks(policy, [a, b]), whole, "split at {at}");
    }
    whole
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

const GREETING_NO_AUTH: &[u8] = &[0x05, 0x01, 0x00];
const GREETING_BOTH: &[u8] = &[0x05, 0x02, 0x00, 0x02];
const AUTH_ALICE: &[u8] = &[
    0x01, 0x05, b'a', b'l', b'i', b'c', b'e', 0x06, b's', b'3', b'c', b'r', b'e', b't',
];
/// CONNECT 192.0.2.1:80.
const CONNECT_V4: &[u8] = &[0x05, 0x01, 0x00, 0x01, 0xc0, 0x00, 0x02, 0x01, 0x00, 0x50];
/// CONNECT example.com:443.
const CONNECT_DOMAIN: &[u8] = &[
    0x05, 0x01, 0x00, 0x03, 0x0b, b'e', b'x', b'a', b'm', b'p', b'l', b'e', b'.', b'c', b'o', b'm',
    0x01, 0xbb,
];
/// CONNECT [2001:db8::1]:8080.
const CONNECT_V6: &[u8] = &[
    0x05, 0x01, 0x00, 0x04, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x1f,
    0x90,
];
/// A failure reply as the handshake sends it: bound address 0.0.0.0:0.
fn failure(code: u8) -> [u8; 10] {
    [0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]
}

fn target(host: &str, port: u16) -> Target {
    let host = match host.parse() {
        Ok(ip) => TargetHost::Ip(ip),
        Err(_) => TargetHost::Domain(Domain::new(host).unwrap()),
    };
    Target { host, port }
}

fn done(host: &str, port: u16, consumed: usize) -> Outcome {
    Outcome::Done {
        target: target(host, port),
        consumed,
    }
}

#[test]
fn no_auth_connect_vectors() {
    for (request, host, port) in [
        (CONNECT_V4, "192.0.2.1", 80),
        (CONNECT_DOMAIN, "example.com", 443),
        (CONNECT_V6, "2001:db8::1", 8080),
    ] {
        let input = cat(&[GREETING_NO_AUTH, request]);
        assert_eq!(
            run(&AuthPolicy::NoAuth, &input),
            (done(host, port, input.len()), vec![0x05, 0x00])
        );
    }
    // The no-auth method offered among others, duplicates included.
    let input = cat(&[&[0x05, 0x04, 0x80, 0x02, 0x00, 0x00], CONNECT_V4]);
    assert_eq!(
        run(&AuthPolicy::NoAuth, &input),
        (done("192.0.2.1", 80, input.len()), vec![0x05, 0x00])
    );
}

#[test]
fn username_password_success() {
    let input = cat(&[GREETING_BOTH, AUTH_ALICE, CONNECT_DOMAIN]);
    assert_eq!(
        run(&user_pass(), &input),
        (
            done("example.com", 443, input.len()),
            vec![0x05, 0x02, 0x01, 0x00]
        )
    );
}

#[test]
fn longest_credentials_fit_the_buffer() {
    let user = vec![b'u'; 255];
    let pass = vec![0xa5; 255];
    let policy = AuthPolicy::UsernamePassword(Credential::new(user.clone(), pass.clone()).unwrap());
    let auth = cat(&[&[0x01, 0xff], &user, &[0xff], &pass]);
    assert_eq!(auth.len(), MAX_AUTH_LEN);
    let input = cat(&[&[0x05, 0x01, 0x02], &auth, CONNECT_V4]);
    // Buffered bytes peak one short of the whole message, then it is handled.
    let mut h = Handshake::new(policy.clone());
    let mut peak = 0;
    for b in &input[..3 + auth.len() - 1] {
        assert!(h.feed(std::slice::from_ref(b)).is_ok());
        peak = peak.max(h.buffered());
    }
    assert_eq!(peak, MAX_AUTH_LEN - 1);
    assert_eq!(
        run(&policy, &input),
        (
            done("192.0.2.1", 80, input.len()),
            vec![0x05, 0x02, 0x01, 0x00]
        )
    );
}

#[test]
fn username_password_failure() {
    let wrong_pass = [
        0x01, 0x05, b'a', b'l', b'i', b'c', b'e', 0x06, b's', b'3', b'c', b'r', b'e', b'T',
    ];
    let wrong_user = [
        0x01, 0x03, b'b', b'o', b'b', 0x06, b's', b'3', b'c', b'r', b'e', b't',
    ];
    let empty = [0x01, 0x00, 0x00];
    for auth in [&wrong_pass[..], &wrong_user, &empty] {
        // The request after it is never read.
        let input = cat(&[GREETING_BOTH, auth, CONNECT_V4]);
        assert_eq!(
            run(&user_pass(), &input),
            (
                Outcome::Failed(Socks5Error::AuthFailed),
                vec![0x05, 0x02, 0x01, 0x01]
            ),
            "{auth:02x?}"
        );
    }
    assert_eq!(
        Socks5Error::AuthFailed.to_string(),
        "username/password authentication failed"
    );
}

#[test]
fn no_acceptable_method() {
    for (policy, greeting, wanted) in [
        (AuthPolicy::NoAuth, &[0x05, 0x01, 0x02][..], 0x00),
        (user_pass(), &[0x05, 0x01, 0x00], 0x02),
        (user_pass(), &[0x05, 0x03, 0x00, 0x01, 0x80], 0x02),
    ] {
        let input = cat(&[greeting, CONNECT_V4]);
        let offered = greeting[2..].to_vec();
        assert_eq!(
            run(&policy, &input),
            (
                Outcome::Failed(Socks5Error::NoAcceptableMethod { wanted, offered }),
                vec![0x05, 0xff]
            )
        );
    }
    let e = Socks5Error::NoAcceptableMethod {
        wanted: 2,
        offered: vec![0, 1],
    };
    assert_eq!(
        e.to_string(),
        "greeting: method 0x02 not offered (offered [00, 01])"
    );
}

#[test]
fn malformed_inputs_map_to_their_errors() {
    use Socks5Error as E;
    let no_auth = AuthPolicy::NoAuth;
    let up = user_pass();
    let ok = &[0x05, 0x00][..];
    let cases: Vec<(&AuthPolicy, Vec<u8>, Socks5Error, Vec<u8>)> = vec![
        // SOCKS4 greeting, and an HTTP request sent to the SOCKS port.
        (
            &no_auth,
            vec![0x04, 0x01, 0x00, 0x50],
            E::GreetingVersion(4),
            vec![],
        ),
        (
            &no_auth,
            b"GET / HTTP/1.1\r\n".to_vec(),
            E::GreetingVersion(b'G'),
            vec![],
        ),
        (&no_auth, vec![0x05, 0x00, 0x00], E::NoMethods, vec![]),
        (
            &no_auth,
            cat(&[GREETING_NO_AUTH, &[0x04, 0x01, 0x00, 0x01]]),
            E::RequestVersion(4),
            ok.to_vec(),
        ),
        // BIND, UDP ASSOCIATE, an unknown command: reply 0x07 without reading the rest.
        (
            &no_auth,
            cat(&[GREETING_NO_AUTH, &[0x05, 0x02, 0x00, 0x01]]),
            E::CommandNotSupported(2),
            cat(&[ok, &failure(7)]),
        ),
        (
            &no_auth,
            cat(&[GREETING_NO_AUTH, &[0x05, 0x03, 0x00, 0x01]]),
            E::CommandNotSupported(3),
            cat(&[ok, &failure(7)]),
        ),
        (
            &no_auth,
            cat(&[GREETING_NO_AUTH, &[0x05, 0x00]]),
            E::CommandNotSupported(0),
            cat(&[ok, &failure(7)]),
        ),
        // Unknown address types: reply 0x08.
        (
            &no_auth,
            cat(&[
                GREETING_NO_AUTH,
                &[0x05, 0x01, 0x00, 0x02, 1, 2, 3, 4, 0, 80],
            ]),
            E::Address(TargetError::AddressType(2)),
            cat(&[ok, &failure(8)]),
        ),
        (
            &no_auth,
            cat(&[GREETING_NO_AUTH, &[0x05, 0x01, 0x00, 0x00]]),
            E::Address(TargetError::AddressType(0)),
            cat(&[ok, &failure(8)]),
        ),
        // Bad domain names: reply 0x01.
        (
            &no_auth,
            cat(&[
                GREETING_NO_AUTH,
                &[0x05, 0x01, 0x00, 0x03, 0x00, 0x00, 0x50],
            ]),
            E::Address(TargetError::EmptyDomain),
            cat(&[ok, &failure(1)]),
        ),
        (
            &no_auth,
            cat(&[
                GREETING_NO_AUTH,
                &[0x05, 0x01, 0x00, 0x03, 0x06],
                b"a:b@c/",
                &[0, 80],
            ]),
            E::Address(TargetError::DomainByte { byte: b':', at: 1 }),
            cat(&[ok, &failure(1)]),
        ),
        (
            &no_auth,
            cat(&[
                GREETING_NO_AUTH,
                &[0x05, 0x01, 0x00, 0x03, 0x04],
                b"a..b",
                &[0, 80],
            ]),
            E::Address(TargetError::EmptyLabel),
            cat(&[ok, &failure(1)]),
        ),
        // Truncated, then garbage: a 10-byte name of which "exa" arrived, then a line.
        (
            &no_auth,
            cat(&[
                GREETING_NO_AUTH,
                &[0x05, 0x01, 0x00, 0x03, 0x0a],
                b"exa",
                b"\r\nGET / HTTP/1.1\r\n",
            ]),
            E::Address(TargetError::DomainByte { byte: b'\r', at: 3 }),
            cat(&[ok, &failure(1)]),
        ),
        // A request where the sub-negotiation belongs, and vice versa.
        (
            &up,
            cat(&[GREETING_BOTH, CONNECT_V4]),
            E::AuthVersion(5),
            vec![0x05, 0x02],
        ),
        (
            &no_auth,
            cat(&[GREETING_NO_AUTH, AUTH_ALICE]),
            E::RequestVersion(1),
            ok.to_vec(),
        ),
    ];
    for (policy, input, err, out) in cases {
        assert_eq!(
            run(policy, &input),
            (Outcome::Failed(err.clone()), out),
            "{input:02x?}"
        );
        assert!(!err.to_string().is_empty());
    }
}

#[test]
fn errors_come_with_the_offending_byte() {
    // Each input ends with the byte that is wrong: the handshake fails there, without
    // waiting for the rest of the message.
    use Socks5Error as E;
    let up = user_pass();
    for (policy, input, err) in [
        (&AuthPolicy::NoAuth, vec![0x04], E::GreetingVersion(4)),
        (&AuthPolicy::NoAuth, vec![0x05, 0x00], E::NoMethods),
        (&up, cat(&[GREETING_BOTH, &[0x05]]), E::AuthVersion(5)),
        (
            &AuthPolicy::NoAuth,
            cat(&[GREETING_NO_AUTH, &[0x04]]),
            E::RequestVersion(4),
        ),
        (
            &AuthPolicy::NoAuth,
            cat(&[GREETING_NO_AUTH, &[0x05, 0x02]]),
            E::CommandNotSupported(2),
        ),
        (
            &AuthPolicy::NoAuth,
            cat(&[GREETING_NO_AUTH, &[0x05, 0x01, 0x00, 0x05]]),
            E::Address(TargetError::AddressType(5)),
        ),
        (
            &AuthPolicy::NoAuth,
            cat(&[GREETING_NO_AUTH, &[0x05, 0x01, 0x00, 0x03, 0x00]]),
            E::Address(TargetError::EmptyDomain),
        ),
    ] {
        assert_eq!(run(policy, &input).0, Outcome::Failed(err), "{input:02x?}");
    }
}

#[test]
fn error_messages_name_what_was_wrong() {
    for (err, text) in [
        (
            Socks5Error::GreetingVersion(4),
            "greeting: version 0x04, expected 0x05",
        ),
        (
            Socks5Error::CommandNotSupported(2),
            "request: command 0x02 not supported (only CONNECT, 0x01)",
        ),
        (
            Socks5Error::Address(TargetError::DomainByte { byte: b':', at: 4 }),
            "request: domain name byte 0x3a at offset 4 is not a hostname character",
        ),
        (
            Socks5Error::Address(TargetError::AddressType(2)),
            "request: address type 0x02 not supported (IPv4 is 0x01, domain name 0x03, IPv6 0x04)",
        ),
    ] {
        assert_eq!(err.to_string(), text);
    }
}

#[test]
fn reply_codes_of_errors() {
    use Socks5Error as E;
    assert_eq!(
        E::CommandNotSupported(2).reply_code(),
        Some(ReplyCode::CommandNotSupported)
    );
    assert_eq!(
        E::Address(TargetError::AddressType(9)).reply_code(),
        Some(ReplyCode::AddressTypeNotSupported)
    );
    assert_eq!(
        E::Address(TargetError::EmptyDomain).reply_code(),
        Some(ReplyCode::GeneralFailure)
    );
    for e in [
        E::GreetingVersion(4),
        E::NoMethods,
        E::AuthVersion(2),
        E::AuthFailed,
        E::RequestVersion(4),
    ] {
        assert_eq!(e.reply_code(), None, "{e}");
    }
}

#[test]
fn pipelined_data_is_left_unconsumed() {
    let data = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    for (policy, handshake) in [
        (AuthPolicy::NoAuth, cat(&[GREETING_NO_AUTH, CONNECT_DOMAIN])),
        (
            user_pass(),
            cat(&[GREETING_BOTH, AUTH_ALICE, CONNECT_DOMAIN]),
        ),
    ] {
        let input = cat(&[&handshake, data]);
        let (outcome, _) = run(&policy, &input);
        assert_eq!(outcome, done("example.com", 443, handshake.len()));
        // Even data that looks like another request is the client's, not ours.
        let input = cat(&[&handshake, CONNECT_V4]);
        let (outcome, _) = run(&policy, &input);
        assert_eq!(outcome, done("example.com", 443, handshake.len()));
    }
}

#[test]
fn progress_step_by_step() {
    let mut h = Handshake::new(user_pass());
    let p = h.feed(&GREETING_BOTH[..3]).unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: 3,
            has_output: false,
            status: Status::NeedMore
        }
    );
    assert_eq!(h.buffered(), 3);
    let p = h.feed(&[GREETING_BOTH[3], AUTH_ALICE[0]]).unwrap();
    assert_eq!((p.consumed, p.has_output), (2, true));
    assert_eq!(h.take_output(), [0x05, 0x02]);
    assert_eq!(h.buffered(), 1);
    let p = h.feed(&AUTH_ALICE[1..]).unwrap();
    assert_eq!((p.consumed, p.has_output), (AUTH_ALICE.len() - 1, true));
    assert_eq!(h.take_output(), [0x01, 0x00]);
    // The password is wiped from the buffer once checked.
    assert_eq!(h.buffered(), 0);
    let p = h.feed(&CONNECT_V6[..21]).unwrap();
    assert_eq!(p.status, Status::NeedMore);
    let p = h.feed(&CONNECT_V6[21..]).unwrap();
    assert_eq!(
        p,
        Progress {
            consumed: 1,
            has_output: false,
            status: Status::Done(target("2001:db8::1", 8080))
        }
    );
    assert!(!format!("{h:?}").contains("s3cret"));
}

#[test]
fn reply_vectors() {
    let v4: SocketAddr = "192.0.2.1:1080".parse().unwrap();
    assert_eq!(
        reply(ReplyCode::Succeeded, v4),
        [0x05, 0x00, 0x00, 0x01, 0xc0, 0x00, 0x02, 0x01, 0x04, 0x38]
    );
    let v6: SocketAddr = "[2001:db8::2]:443".parse().unwrap();
    assert_eq!(
        reply(ReplyCode::HostUnreachable, v6),
        [
            0x05, 0x04, 0x00, 0x04, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
            0x01, 0xbb
        ]
    );
    assert_eq!(reply(ReplyCode::HostUnreachable, v6).len(), MAX_REPLY_LEN);
    let unspecified = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
    for (code, byte) in [
        (ReplyCode::Succeeded, 0x00),
        (ReplyCode::GeneralFailure, 0x01),
        (ReplyCode::NotAllowed, 0x02),
        (ReplyCode::NetworkUnreachable, 0x03),
        (ReplyCode::HostUnreachable, 0x04),
        (ReplyCode::ConnectionRefused, 0x05),
        (ReplyCode::TtlExpired, 0x06),
        (ReplyCode::CommandNotSupported, 0x07),
        (ReplyCode::AddressTypeNotSupported, 0x08),
    ] {
        assert_eq!(code.byte(), byte);
        assert_eq!(reply(code, unspecified), failure(byte));
        let mut out = vec![0xaa];
        encode_reply(code, unspecified, &mut out);
        assert_eq!(out[1..], failure(byte), "appends");
    }
}

#[test]
fn reply_code_for_connect_errors() {
    for (kind, code) in [
        (
            io::ErrorKind::ConnectionRefused,
            ReplyCode::ConnectionRefused,
        ),
        (
            io::ErrorKind::NetworkUnreachable,
            ReplyCode::NetworkUnreachable,
        ),
        (io::ErrorKind::HostUnreachable, ReplyCode::HostUnreachable),
        (io::ErrorKind::TimedOut, ReplyCode::HostUnreachable),
        (io::ErrorKind::PermissionDenied, ReplyCode::GeneralFailure),
    ] {
        assert_eq!(ReplyCode::for_connect_error(&io::Error::from(kind)), code);
    }
}

/// Cut points splitting an input into chunks (sorted, deduplicated by the caller).
fn chunked<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut from = 0;
    for c in cuts {
        chunks.push(&input[from..c]);
        from = c;
    }
    chunks.push(&input[from..]);
    chunks
}

fn arb_policy() -> impl Strategy<Value = AuthPolicy> {
    prop_oneof![Just(AuthPolicy::NoAuth), Just(user_pass())]
}

/// A valid start (nothing, a greeting, a greeting and the sub-negotiation) followed by
/// arbitrary bytes, so the fuzzing reaches every phase.
fn arb_input() -> impl Strategy<Value = Vec<u8>> {
    let prefix = prop_oneof![
        Just(Vec::new()),
        Just(GREETING_NO_AUTH.to_vec()),
        Just(cat(&[GREETING_BOTH, AUTH_ALICE])),
        Just(cat(&[GREETING_NO_AUTH, &[0x05, 0x01, 0x00]])),
        Just(cat(&[GREETING_NO_AUTH, &[0x05, 0x01, 0x00, 0x03]])),
    ];
    (prefix, proptest::collection::vec(any::<u8>(), 0..1100)).prop_map(|(mut p, rest)| {
        p.extend(rest);
        p
    })
}

proptest! {
    #[test]
    fn arbitrary_input_never_panics_and_stays_bounded(
        policy in arb_policy(),
        input in arb_input(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        // `feed_chunks` checks the buffer and output bounds after every call.
        let whole = feed_chunks(&policy, [&input[..]]);
        prop_assert_eq!(feed_chunks(&policy, chunked(&input, &cuts)), whole.clone());
        prop_assert_eq!(feed_chunks(&policy, input.chunks(1)), whole);
    }

    #[test]
    fn valid_handshakes_yield_their_target_and_leave_the_rest(
        policy in arb_policy(),
        host in prop_oneof![
            any::<[u8; 4]>().prop_map(|a| TargetHost::Ip(Ipv4Addr::from(a).into())),
            any::<[u8; 16]>().prop_map(|a| TargetHost::Ip(std::net::Ipv6Addr::from(a).into())),
            "[a-z0-9-]{1,63}(\\.[a-z0-9_-]{1,63}){0,3}"
                .prop_map(|d| TargetHost::Domain(Domain::new(d).unwrap())),
        ],
        port in any::<u16>(),
        data in proptest::collection::vec(any::<u8>(), 0..64),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let t = Target { host, port };
        let mut input = match policy {
            AuthPolicy::NoAuth => GREETING_NO_AUTH.to_vec(),
            AuthPolicy::UsernamePassword(_) => cat(&[GREETING_BOTH, AUTH_ALICE]),
        };
        input.extend_from_slice(&[0x05, 0x01, 0x00]);
        t.encode(&mut input);
        let handshake_len = input.len();
        input.extend_from_slice(&data);
        let (outcome, _) = feed_chunks(&policy, chunked(&input, &cuts));
        prop_assert_eq!(outcome, Outcome::Done { target: t, consumed: handshake_len });
    }
}

/// docs/protocol.md#stream-mode-open-request's example.
#[test]
fn open_request_example_of_the_protocol_doc() {
    let t = Target {
        host: TargetHost::Ip("192.0.2.7".parse().unwrap()),
        port: 443,
    };
    let mut out = Vec::new();
    t.encode(&mut out);
    assert_eq!(out, [0x01, 0xc0, 0x00, 0x02, 0x07, 0x01, 0xbb]);
    assert_eq!(Target::decode(&out), Ok(t));
}
