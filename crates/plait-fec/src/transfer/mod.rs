//! `plait send` / `plait recv` as sans-IO state machines (seed HMTP §III over RaptorQ):
//! the file in chunks of k symbols, the sender keeps sending fresh symbols of a window of
//! chunks at a paced rate, the receiver counts and reports per chunk, and decoded chunks
//! leave the window. Nothing is retransmitted. The socket and file I/O live in the `plait`
//! binary (crates/plait/src/cli/transfer.rs); the protocol is in docs/fec.md.
//!
//! - [`wire`]: the three datagrams (header, symbol, report), parsed with typed errors;
//! - [`sender`]: which symbol to send next and when;
//! - [`receiver`]: bounded decoding of incoming symbols and the reports;
//! - [`rate`]: the sender's rate control.

pub mod rate;
pub mod receiver;
pub mod sender;
pub mod wire;

#[cfg(test)]
mod tests;

pub use receiver::{Receiver, RecvError, RecvEvent};
pub use sender::{ChunkSource, RateLimits, ReportError, SendError, SendStats, Sender, Transmit};
pub use wire::Header;
