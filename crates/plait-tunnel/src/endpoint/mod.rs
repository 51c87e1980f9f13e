//! Sans-IO tunnel endpoints: everything between the sockets and the engine.
//!
//! A [`ClientEndpoint`] or [`ServerEndpoint`] is fed datagrams (with the socket and the
//! source address they came from), inner packets from the TUN device and timeouts, always
//! with the time as an argument; it answers through [`Outputs`]. It owns the handshake,
//! the keys, the replay window, the path endpoints (and roaming) and one
//! `plait_proto::Session` per peer, which it drives with `plait_proto::drive`.
//!
//! Invariants:
//! - A datagram that fails to parse or authenticate changes nothing but a drop counter
//!   and causes no output (no reply to unauthenticated packets).
//! - A path's peer address changes only when a new address, heard in an authenticated
//!   datagram (roaming, NAT rebinding), answers a path challenge sent to it
//!   (docs/protocol.md#path-validation); until then the path keeps its validated address,
//!   and an unvalidated address is sent at most three times what came from it. A replayed
//!   datagram cannot even start that: the replay window refuses it.
//! - Nothing here reads a clock or opens a socket, so the unit tests run both endpoints
//!   over an in-memory network with virtual time.

pub(crate) mod binding;
mod client;
mod inner;
mod keyring;
mod known;
#[cfg(test)]
mod known_tests;
mod link;
#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod registration_tests;
#[cfg(test)]
mod restart_tests;
mod schedule;
mod server;
#[cfg(test)]
mod soak_tests;
mod streams;
#[cfg(test)]
pub(crate) mod tests;
mod validation;
#[cfg(test)]
mod validation_tests;

use std::net::SocketAddr;
use std::time::Duration;

pub use client::{ClientEndpoint, ClientParams, ClientPath};
pub use inner::addresses as inner_addresses;
pub use link::{LinkCounters, LinkStreamEvent, STREAM_REFUSED};
pub use server::{ServerEndpoint, ServerParams, ServerPeer};
pub use streams::{StreamHost, StreamPeer};
pub use validation::{
    AMPLIFICATION_FACTOR, CHALLENGE_TIMEOUT_MAX, CHALLENGE_TIMEOUT_MIN, MAX_CANDIDATES,
    MAX_CHALLENGES,
};

use plait_proto::path::PathHints;
use plait_proto::{EngineSettings, Time};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// The time as an endpoint sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Monotonic time since the daemon started (the engine's clock).
    pub mono: Time,
    /// Wall-clock nanoseconds since the Unix epoch, only for handshake timestamps.
    pub wall_ns: u64,
}

impl Now {
    /// The time a datagram arrived, from the kernel's receive timestamp (wall clock): the
    /// engine's packet-pair dispersion and one-way delays need the arrival time, not the
    /// time the event loop got round to it (a whole batch would share one time). Falls
    /// back to `self` without a timestamp or when it is implausible (in the future, or
    /// more than a second old: a clock step).
    pub fn at_kernel_time(self, kernel_wall: Option<Duration>) -> Now {
        let Some(ts) = kernel_wall else {
            return self;
        };
        let now_wall = Duration::from_nanos(self.wall_ns);
        match now_wall.checked_sub(ts) {
            Some(age) if age <= Duration::from_secs(1) => Now {
                mono: self.mono.saturating_sub(age),
                wall_ns: u64::try_from(ts.as_nanos()).unwrap_or(self.wall_ns),
            },
            _ => self,
        }
    }
}

/// Where an endpoint's outputs go: the daemon's sockets and TUN device, or a test network.
pub trait Outputs {
    /// Send `datagram` from socket `socket` (path index on the client, listen-socket index
    /// on the server) to `to`.
    fn send_udp(&mut self, socket: usize, to: SocketAddr, datagram: &[u8]);
    /// Write an inner packet to the TUN device.
    fn write_tun(&mut self, packet: &[u8]);
    /// The next [`Outputs::write_tun`] packet waited `held_for` in the reorder buffer
    /// (experiments measure it; the daemon ignores it).
    fn note_reorder_hold(&mut self, held_for: Duration) {
        let _ = held_for;
    }
}

/// Engine settings shared by every session an endpoint makes.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineParams {
    /// What the user chose (`[engine]`); the rest is the engine's defaults.
    pub settings: EngineSettings,
    /// Largest engine datagram (path MTU less outer IP, UDP and [`crate::message::DATA_OVERHEAD`]).
    pub max_datagram_size: usize,
    /// Outer IP and UDP header bytes per datagram ([`outer_ip_udp_overhead`]: 28 over
    /// IPv4, 48 over IPv6; the largest of the endpoint's paths). With
    /// [`crate::message::DATA_OVERHEAD`] it is what each datagram costs a link beyond the
    /// engine's bytes (`plait_proto::Config::datagram_overhead`).
    pub outer_header_len: usize,
    /// Seed of the endpoint's random choices ([`Random`]); `None`: the OS generator.
    pub seed: Option<u64>,
    /// Stream bounds ([`EngineParams::tunnel_stream_limits`]). Both ends must agree on
    /// `max_concurrent` and the initial windows; the send buffers are this end's own.
    pub streams: plait_proto::StreamLimits,
    /// Experiment knobs beyond `[engine]`; the daemon runs the default.
    pub tuning: SessionTuning,
}

/// Session knobs that experiments set and the daemon never does: the simulator's seed
/// reproductions (seed PET-BMP's "perfect knowledge" baselines, an ETOM-like ACK per
/// datagram). `SessionTuning::default()` is the engine's own defaults, so a daemon's
/// sessions are exactly `Config::for_session`'s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionTuning {
    /// See `plait_proto::Config::trust_hints`.
    pub trust_hints: bool,
    /// See `plait_proto::Config::ack_every`; `None`: the engine's default.
    pub ack_every: Option<u32>,
    /// See `plait_proto::Config::min_pair_bytes`; `None`: the engine's default.
    pub min_pair_bytes: Option<usize>,
    /// Per path id: what is known of the path (rate, one-way delay) when a session adds
    /// it, at both ends. A client path's configured rate takes precedence.
    pub path_hints: Vec<PathHints>,
}

/// Streams a tunnel peer may have open at once: one per relayed TCP connection, so far
/// above the engine's default of 256 (docs/tunnel.md#stream-mode).
pub const TUNNEL_MAX_STREAMS: u64 = 16_384;

impl EngineParams {
    /// The tunnel's stream bounds: the engine's defaults with [`TUNNEL_MAX_STREAMS`].
    pub fn tunnel_stream_limits() -> plait_proto::StreamLimits {
        plait_proto::StreamLimits {
            max_concurrent: TUNNEL_MAX_STREAMS,
            ..plait_proto::StreamLimits::default()
        }
    }

    /// The engine configuration for one session at `side` (the client started the
    /// session; the side decides the parity of the stream ids each end opens). The
    /// simulator builds its sessions the same way, `plait_proto::Config::for_session`.
    pub fn session_config(&self, seed: u64, side: plait_proto::Side) -> plait_proto::Config {
        let base = plait_proto::Config::for_session(seed, self.max_datagram_size, &self.settings);
        let t = &self.tuning;
        plait_proto::Config {
            side,
            datagram_overhead: crate::message::DATA_OVERHEAD + self.outer_header_len,
            streams: self.streams.clone(),
            trust_hints: t.trust_hints,
            ack_every: t.ack_every.unwrap_or(base.ack_every),
            min_pair_bytes: t.min_pair_bytes.unwrap_or(base.min_pair_bytes),
            ..base
        }
    }

    /// What a client's session is told of path `id` when it adds it: the tuning's hints,
    /// with the path's configured rate taking precedence, and its role and priority.
    pub fn path_hints(&self, id: usize, path: &ClientPath) -> PathHints {
        let known = self.tuning.path_hints.get(id).copied().unwrap_or_default();
        PathHints {
            rate: path.rate_hint.or(known.rate),
            backup: path.backup,
            priority: path.attributes.priority,
            // docs/protocol.md#overflow: a metered path carries only the excess.
            overflow: path.attributes.cost == crate::registration::CostClass::Metered,
            ..known
        }
    }

    /// The largest inner packet (the TUN device's MTU).
    pub fn tun_mtu(&self) -> usize {
        self.session_config(0, plait_proto::Side::Client)
            .max_inner_packet()
    }
}

/// A UDP header.
const UDP_HEADER_LEN: usize = 8;

/// Bytes of outer headers below plait's data message: IP (without options) and UDP.
pub fn outer_ip_udp_overhead(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => inner::IPV4_HEADER_LEN + UDP_HEADER_LEN,
        SocketAddr::V6(_) => inner::IPV6_HEADER_LEN + UDP_HEADER_LEN,
    }
}

/// The largest engine datagram that fits a path MTU towards `addr`.
pub fn max_datagram_for(path_mtu: u16, addr: &SocketAddr) -> usize {
    usize::from(path_mtu)
        .saturating_sub(outer_ip_udp_overhead(addr) + crate::message::DATA_OVERHEAD)
}

/// Where an endpoint's random choices come from: key indices, session ids and engine
/// seeds (never keys: those are snow's). The daemon uses the OS generator; the simulator
/// and tests seed one, so their runs repeat exactly.
#[derive(Debug)]
pub enum Random {
    /// The operating system's generator.
    Os,
    /// A ChaCha8 generator with this seed.
    Seeded(Box<ChaCha8Rng>),
}

impl Random {
    /// The generator `seed` asks for: seeded, or the OS's for `None`.
    pub fn from_seed(seed: Option<u64>) -> Random {
        match seed {
            Some(s) => Random::Seeded(Box::new(ChaCha8Rng::seed_from_u64(s))),
            None => Random::Os,
        }
    }

    /// The next random number.
    pub fn next_u64(&mut self) -> u64 {
        match self {
            Random::Seeded(rng) => rng.next_u64(),
            Random::Os => {
                use ring::rand::SecureRandom;
                let mut b = [0u8; 8];
                // SystemRandom fails only if the OS generator is unavailable, which the
                // handshake (snow, same generator) would also hit; fall back to a fixed
                // value rather than panic: indices are not secrets.
                if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
                    return 0x706c_6169_7400_0001;
                }
                u64::from_le_bytes(b)
            }
        }
    }

    /// Fills `buf` with random bytes: cookie secrets and cookie-reply nonces. The OS
    /// generator directly; a seeded one (tests, the simulator) from its stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        match self {
            Random::Seeded(rng) => rng.fill_bytes(buf),
            Random::Os => {
                use ring::rand::SecureRandom;
                if ring::rand::SystemRandom::new().fill(buf).is_err() {
                    // As in `next_u64`: only if the OS generator is gone, which the
                    // handshake would hit too; never a panic.
                    for chunk in buf.chunks_mut(8) {
                        let v = self.next_u64().to_le_bytes();
                        chunk.copy_from_slice(v.get(..chunk.len()).unwrap_or_default());
                    }
                }
            }
        }
    }
}
