//! plait-fec: sans-IO fountain codes for plait's fountain mode (seed HMTP).
//!
//! Two codes sit behind one small pair of traits ([`FountainEncoder`], [`FountainDecoder`]):
//! - [`lt`]: the LT code that seed HMTP §III-B specifies: robust soliton degrees
//!   ([`RobustSoliton`], equations (1) to (4) of the seed), each encoded symbol the XOR of a
//!   degree-d random subset of the k source symbols, regenerated at the receiver from the
//!   symbol id alone, and a peeling (message-passing) decoder with bounded memory;
//! - [`rq`]: RaptorQ (RFC 6330) through the `raptorq` crate, with every packet validated
//!   before the crate sees it (malformed packets can panic it).
//!
//! Invariants of the whole crate:
//! - it reads no clock, opens no socket, spawns no thread and uses no global RNG (enforced
//!   by `clippy.toml`); randomness comes from ChaCha8 keyed by a chunk seed, so the same
//!   inputs give the same symbols on every run;
//! - nothing from the network panics it: a packet of the wrong size, for another block or
//!   with an absurd id is a typed [`SymbolError`], never a panic;
//! - decoders have a stated memory bound (see [`LtLimits`] and [`RqParams`]): a hostile
//!   peer gets [`SymbolError::Full`], never an allocation beyond it.
//!
//! [`measure`] holds the clock-free helpers the `lt_fig4` and `codes_table` examples and
//! the `codes` bench use to count how many packets a decoder needs.

mod codec;
pub mod lt;
pub mod measure;
pub mod rq;
mod soliton;
pub mod transfer;

pub use codec::{FountainDecoder, FountainEncoder, ParamError, Progress, SymbolError};
pub use lt::{LtDecoder, LtEncoder, LtLimits, LtParams};
pub use rq::{RqDecoder, RqEncoder, RqParams};
pub use soliton::RobustSoliton;
