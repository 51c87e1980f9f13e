//! Fuzz target: a server endpoint (fixed keys, one known client) fed arbitrary datagrams,
//! as its UDP sockets would be (docs/protocol.md#tunnel-messages): tunnel message parsing,
//! handshake initiations, data messages (with unknown indices: unknown-index hints,
//! docs/protocol.md#unknown-index), path-control messages (docs/protocol.md#path-validation)
//! and the messages only a server sends. Checks the endpoint's promise that nothing from the
//! network panics it, and that no unauthenticated datagram is answered with more bytes than
//! it carried.
//!
//! Input: datagrams, each a little-endian u16 length then that many bytes.

#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use plait_proto::{EngineSettings, Time};
use plait_tunnel::endpoint::{
    EngineParams, Now, Outputs, ServerEndpoint, ServerParams, ServerPeer,
};
use plait_tunnel::keys::Key;

struct Replies {
    bytes: usize,
}

impl Outputs for Replies {
    fn send_udp(&mut self, _: usize, _: SocketAddr, datagram: &[u8]) {
        self.bytes += datagram.len();
    }
    fn write_tun(&mut self, _: &[u8]) {}
}

fn keys() -> &'static (Key, Key) {
    static KEYS: OnceLock<(Key, Key)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let server = Key::from_bytes([7; 32]);
        let client = Key::from_bytes([9; 32]);
        (server, client)
    })
}

fuzz_target!(|data: &[u8]| {
    let (server_key, client_key) = keys();
    let mut server = ServerEndpoint::new(ServerParams {
        private_key: server_key.clone(),
        peers: vec![ServerPeer {
            name: "c".into(),
            public_key: client_key.public(),
            preshared_key: None,
            allowed_ips: vec!["10.77.0.2/32".parse().unwrap()],
        }],
        engine: EngineParams {
            settings: EngineSettings::default(),
            max_datagram_size: 1400,
            outer_header_len: 28,
            seed: Some(1),
            streams: EngineParams::tunnel_stream_limits(),
            tuning: Default::default(),
        },
    });
    let from: SocketAddr = "192.0.2.9:4000".parse().unwrap();
    let mut rest = data;
    let mut t = 1u64;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let mut d = rest[2..2 + len].to_vec();
        rest = &rest[2 + len..];
        t += 1;
        let now = Now {
            mono: Time::from_millis(t),
            wall_ns: 1_700_000_000_000_000_000 + t * 1_000_000,
        };
        let mut out = Replies { bytes: 0 };
        server.handle_udp(now, 0, from, &mut d, &mut out);
        server.handle_timeout(now, &mut out);
        // Without the client's key nothing authenticates: replies, if any, are handshake
        // responses or cookie replies, both smaller than the initiation that caused them,
        // or unknown-index hints, smaller than the data message that caused them.
        assert!(out.bytes <= len, "{} bytes answered {len}", out.bytes);
    }
});
