//! plait-proto: plait's sans-IO multipath engine.
//!
//! One [`Session`] per peer carries opaque inner packets (packet mode) over several paths:
//! it schedules each packet onto a path ([`sched`]), numbers datagrams per path and globally
//! ([`wire`], docs/protocol.md), learns each path's delay, rate and loss from ACK feedback
//! ([`path`]), and at the receiver restores order and detects loss ([`reorder`]). Packets
//! waiting for a path are kept per flow, FQ-CoDel style ([`inner_ip`] reads their 5-tuple
//! and ECN field; docs/protocol.md#send-queue).
//!
//! Invariants of the whole crate:
//! - it reads no clock, opens no socket, spawns no thread and uses no global RNG (enforced
//!   by `clippy.toml`'s disallowed methods and types); time comes in as [`Time`] arguments
//!   and randomness from the seed in [`Config`]; the same inputs give the same outputs;
//! - nothing from the network panics it: decoders return typed errors, buffers are bounded;
//! - per-path state lives in `Vec`s indexed by [`PathId`].
//!
//! Drivers (the tunnel daemon, the simulator, tests) feed inputs with `handle_*` and drain
//! outputs with `poll_*` through the one [`drive`] function and its documented drain order.

pub mod cc;
pub mod config;
mod drive;
pub mod fec;
pub mod ids;
pub mod inner_ip;
pub mod path;
pub mod policy;
pub mod reorder;
pub mod sched;
pub mod session;
pub mod stream;
pub mod time;
pub mod wire;

pub use config::{Config, ConfigError, EngineSettings};
pub use drive::{Io, drive};
pub use ids::{GlobalSeq, MAX_PATHS, PathId, PathSeq};
pub use session::{
    Delivery, Event, Footprint, PathError, RecvError, SendError, Session, SessionStats, Transmit,
};
pub use stream::{
    FlowControlView, Side, StreamError, StreamEvent, StreamId, StreamLimits, StreamRead,
    StreamStats, StreamViolation,
};
pub use time::Time;
