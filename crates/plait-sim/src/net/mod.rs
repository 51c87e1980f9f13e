//! Network elements: links with a rate, a propagation delay, a queue (drop-tail or weighted
//! fair queuing among flows) and a loss model; scheduled link changes.
//!
//! Owns: [`Link`] (one direction of one link, a sans-IO state machine driven with one timer
//! at [`Link::next_event`]), its configuration ([`LinkConfig`]) and [`RateSchedule`] (rate
//! steps over time, e.g. seed ETOM §V-C's bandwidth fluctuation).
//!
//! Invariants: no clock, no global RNG — a link draws only from its own `ChaCha8Rng` seeded
//! at construction; flows are kept in `Vec`/`BTreeMap`, never iterated out of a `HashMap`;
//! so the same configuration, seed and inputs give the same deliveries and drops.
//!
//! Files: `config.rs` (configuration, serialisation-time arithmetic), `loss.rs`
//! (Bernoulli, Gilbert-Elliott), `queue.rs` (buffer and limit), `wfq.rs` (self-clocked fair
//! queueing), `link.rs` (the state machine), `schedule.rs` (rate steps); tests beside each, the link's
//! in `link_tests.rs` and `link_share_tests.rs` over `testkit.rs`.

mod config;
mod link;
mod loss;
mod queue;
mod schedule;
mod wfq;

#[cfg(test)]
mod link_share_tests;
#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod testkit;

pub use config::{Discipline, LinkConfig, NS2_QUEUE_LIMIT, QueueConfig, QueueLimit};
pub use link::{DropCause, Dropped, Enqueue, Link, LinkStats};
pub use plait_topology::LossModel;
pub use schedule::{ETOM_RATIO_HI, ETOM_RATIO_LO, RateSchedule};
