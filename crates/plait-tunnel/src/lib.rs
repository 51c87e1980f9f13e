//! plait's tunnel: the daemon library behind `plait server` and `plait client`.
//!
//! Layers, outermost first (docs/tunnel.md):
//! - [`daemon`]: the event loop. Real TUN device, one UDP socket per path (client) or per
//!   listen address (server), a clock, signals. It owns no protocol logic.
//! - [`endpoint`]: sans-IO tunnel endpoints ([`endpoint::ClientEndpoint`],
//!   [`endpoint::ServerEndpoint`]). Handshake, encryption, replay protection, path
//!   endpoints and roaming around one `plait_proto::Session` per peer. Time comes in as an
//!   argument, so the same code runs in the unit tests' in-memory network.
//! - [`crypto`]: Noise IKpsk2 (snow), ChaCha20-Poly1305 (ring), the replay window.
//! - [`message`]: the outer message formats (docs/protocol.md#tunnel-messages).
//! - [`registration`]: the client's path set with each path's attributes and quality, as
//!   registered with the server (docs/protocol.md#registration).
//! - [`mobility`]: which interfaces a client's pattern paths open paths on, and on which
//!   path ids (sans-IO; docs/tunnel-config.md#pattern-paths).
//! - [`config`], [`keys`]: TOML configuration and X25519 key encoding.
//! - [`control`]: the status snapshot, `plait status` over a Unix socket, Prometheus metrics.
//! - [`netcfg`]: routes, policy rules and NAT set up on request and undone on exit.
//! - [`sandbox`]: least privilege once set-up is done (capabilities, no_new_privs, the
//!   seccomp allow-list).
//! - [`socks5`]: the sans-IO SOCKS5 server handshake (RFC 1928/1929) and the encoding of
//!   a stream's target.

pub mod budget;
pub mod config;
pub mod control;
pub mod crypto;
pub mod daemon;
pub mod endpoint;
pub mod io;
pub mod keys;
pub mod message;
pub mod mobility;
pub mod netcfg;
pub mod ratelimit;
pub mod registration;
pub mod relay;
pub mod sandbox;
pub mod socks5;
