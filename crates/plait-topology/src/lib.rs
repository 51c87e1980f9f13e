//! plait's network descriptions, one type for each thing, read by both the simulator
//! (plait-sim) and the emulated test bed (plait-testbed, plait-lab):
//!
//! - [`LossModel`]: how a link loses packets (none, Bernoulli, Gilbert-Elliott per packet
//!   or per time).
//! - [`TopologyFile`]: a set of paths (rate, RTT, queue, loss) with timed events
//!   (blackhole, carrier loss, rate change) and a transfer length, the format of
//!   `topologies/*.toml` (docs/benchmarks.md, "Topology files"). `plait bench FILE` builds
//!   it in network namespaces; `plait sim FILE` builds the same paths in the simulator.
//!
//! Invariants: pure data with checks, no I/O beyond reading a file on request; parsing
//! never panics; a value that passed `parse`/`validate` is accepted by both back ends
//! (the simulator may still refuse what it does not model, and says so).

pub mod file;
pub mod loss;

pub use file::{BurstLoss, EventFile, EventKind, LossDirection, PathFile, SpecError, TopologyFile};
pub use loss::{LossError, LossModel};
