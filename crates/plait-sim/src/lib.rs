//! plait-sim: a deterministic discrete-event network simulator that drives the real
//! plait-proto engine (through `plait_proto::drive`), so what it measures is the code that
//! ships.
//!
//! Invariants: no wall clock, no global RNG (every random component has its own seeded
//! generator), deterministic tie-breaking of simultaneous events: the same scenario and seed
//! give byte-identical results.

pub mod net;
pub mod packet;
pub mod tcp;
