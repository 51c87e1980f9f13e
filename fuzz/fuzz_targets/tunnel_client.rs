//! Fuzz target: a client endpoint (fixed keys, two paths) fed arbitrary datagrams, as its
//! path sockets would be (docs/protocol.md#tunnel-messages): tunnel message parsing,
//! handshake responses, cookie replies, unknown-index hints (docs/protocol.md#unknown-index),
//! data messages and path-control messages (docs/protocol.md#path-validation). Checks the
//! endpoint's promise that nothing from the network panics it, and that nothing from the
//! network makes it send an initiation more often than its schedule allows (at most one per
//! 500 ms, however many hints arrive).
//!
//! Input: datagrams, each a path byte (its low bit picks the path), a little-endian u16
//! length, then that many bytes; each arrives 1 ms after the one before.

#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use plait_proto::{EngineSettings, Time};
use plait_tunnel::endpoint::{
    ClientEndpoint, ClientParams, ClientPath, EngineParams, Now, Outputs,
};
use plait_tunnel::keys::Key;
use plait_tunnel::message::TYPE_INITIATION;

struct Sent {
    initiations: usize,
}

impl Outputs for Sent {
    fn send_udp(&mut self, _: usize, _: SocketAddr, datagram: &[u8]) {
        if datagram.first() == Some(&TYPE_INITIATION) {
            self.initiations += 1;
        }
    }
    fn write_tun(&mut self, _: &[u8]) {}
}

fn keys() -> &'static (Key, Key) {
    static KEYS: OnceLock<(Key, Key)> = OnceLock::new();
    KEYS.get_or_init(|| (Key::from_bytes([9; 32]), Key::from_bytes([7; 32])))
}

fuzz_target!(|data: &[u8]| {
    let (client_key, server_key) = keys();
    let server: SocketAddr = "192.0.2.1:7744".parse().unwrap();
    let mut client = ClientEndpoint::new(ClientParams {
        private_key: client_key.clone(),
        server_public_key: server_key.public(),
        preshared_key: None,
        paths: ["a", "b"]
            .iter()
            .map(|n| ClientPath {
                name: (*n).into(),
                server,
                rate_hint: None,
                backup: false,
                attributes: Default::default(),
            })
            .collect(),
        engine: EngineParams {
            settings: EngineSettings::default(),
            max_datagram_size: 1400,
            outer_header_len: 28,
            seed: Some(1),
            streams: EngineParams::tunnel_stream_limits(),
            tuning: Default::default(),
        },
    });
    let mut sent = Sent { initiations: 0 };
    let mut t = 1u64;
    let now = |t: u64| Now {
        mono: Time::from_millis(t),
        wall_ns: 1_700_000_000_000_000_000 + t * 1_000_000,
    };
    // The first initiation goes out on both paths.
    client.handle_timeout(now(t), &mut sent);
    let mut rest = data;
    while rest.len() >= 3 {
        let path = usize::from(rest[0] & 1);
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let mut d = rest[3..3 + len].to_vec();
        rest = &rest[3 + len..];
        t += 1;
        client.handle_udp(now(t), path, server, &mut d, &mut sent);
        if client.poll_timeout().is_some_and(|d| d <= now(t).mono) {
            client.handle_timeout(now(t), &mut sent);
        }
    }
    // Two copies (one per path) per initiation, one initiation per 500 ms at most.
    let allowed = 2 * (1 + (t / 500) as usize);
    assert!(
        sent.initiations <= allowed,
        "{} initiation copies in {t} ms",
        sent.initiations
    );
});
