//! plait-sim: a deterministic discrete-event network simulator that drives the real
//! plait-proto engine (through `plait_proto::drive`), so what it measures is the code that
//! ships.
//!
//! Invariants: no wall clock, no global RNG (every random component has its own seeded
//! generator), deterministic tie-breaking of simultaneous events: the same scenario and seed
//! give byte-identical results.

pub mod event;
pub mod from_topology;
pub mod handover;
pub mod handover_report;
pub mod handover_spec;
pub mod handover_tables;
pub mod inner;
pub mod net;
pub mod node;
pub mod packet;
pub mod report;
pub mod reproduce;
pub mod route;
pub mod run;
pub mod scenario;
pub mod stat;
pub mod suite;
pub mod sweep;
pub mod tcp;
pub mod topology;
pub mod world;

/// A duration in whole nanoseconds, saturating.
pub(crate) fn time_nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Seconds as a `Duration` of at least one nanosecond and at most a day (intervals between
/// packets: a zero interval would make a source loop forever at one instant).
pub(crate) fn secs_at_least_1ns(secs: f64) -> std::time::Duration {
    let d = plait_proto::time::secs_f64_saturating(secs);
    d.clamp(
        std::time::Duration::from_nanos(1),
        std::time::Duration::from_secs(86_400),
    )
}
