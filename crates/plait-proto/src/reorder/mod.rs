//! The reorder seam: hide multipath reordering from the end hosts' TCP.
//!
//! The session hands every fresh (already de-duplicated, see [`DuplicateFilter`]) inner
//! packet to a [`ReorderBuffer`] and drains it with [`ReorderBuffer::poll_release`].
//!
//! Invariants every policy keeps (property-tested):
//! - every inserted packet is released exactly once;
//! - packets are released in increasing global sequence order, except a packet that arrives
//!   after its sequence number was declared lost, which is released at once and flagged late;
//! - the buffer never holds more than its configured bound in packets or bytes: an insert
//!   that would exceed it first forces out the oldest held packets (declaring the holes
//!   before them lost), never grows.
//!
//! Adding a policy: one file here, one variant in [`ReorderKind`] and [`AnyReorder`].

use std::time::Duration;

use crate::ids::{GlobalSeq, PathId, PathSeq};
use crate::time::Time;

mod arrival_delay;
mod bmp;
#[cfg(test)]
mod bmp_proptest;
#[cfg(test)]
mod bmp_tests;
mod dedup;
mod loss_detect;
mod mms;
mod pacer;
mod passthrough;
mod repair_requester;
mod slab;

pub use bmp::Bmp;
pub use dedup::{DuplicateFilter, Freshness};
pub use mms::{MMS_CAPACITY, MmsBuffer};
pub use passthrough::Passthrough;

/// What the receiver knows about an arriving inner packet (docs/protocol.md#data-frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The packet's global sequence number (expanded to 64 bits).
    pub global_seq: GlobalSeq,
    /// The path it arrived on.
    pub path: PathId,
    /// The path sequence number of the datagram that carried it.
    pub path_seq: PathSeq,
    /// Global sequence number of the previous DATA the sender put on the same path, if it
    /// said (the DATA frame's `prev_delta`): if that packet has not arrived, it was lost
    /// (paths are FIFO; seed ETOM §IV-B path sequence numbers).
    pub prev_on_path: Option<GlobalSeq>,
    /// The sender's timestamp from the datagram header, microseconds on the sender's clock,
    /// wrapping (docs/protocol.md#timestamps).
    pub send_ts_us: u32,
}

/// One packet leaving the reorder buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// Its global sequence number.
    pub global_seq: GlobalSeq,
    /// Its length; the bytes were copied into the caller's buffer.
    pub len: usize,
    /// How long it waited in the buffer.
    pub held_for: Duration,
    /// It arrived after its sequence number had been declared lost (released out of order).
    pub late: bool,
}

/// Why the buffer gave up waiting for a missing packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossEvidence {
    /// A packet arrived whose `prev_on_path` names the missing one: it was sent before on
    /// the same FIFO path and cannot still be in flight.
    PathPredecessor,
    /// Every path of the session has delivered a higher global sequence number
    /// (comparison-based detection, seed PET-BMP §V-B).
    Comparison,
    /// The hole's deadline passed: the latest time it could still arrive on any path,
    /// from measured one-way delays (the backup timer, seed PET-BMP §V-B).
    Timer,
    /// The buffer was full and the oldest held packets were forced out.
    Overflow,
}

/// Counters a reorder buffer keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Packets inserted.
    pub inserted: u64,
    /// Packets released (in order or late).
    pub released: u64,
    /// Packets released late (after being declared lost).
    pub late: u64,
    /// Sequence numbers declared lost, by evidence.
    pub lost_predecessor: u64,
    /// See [`LossEvidence::Comparison`].
    pub lost_comparison: u64,
    /// See [`LossEvidence::Timer`].
    pub lost_timer: u64,
    /// See [`LossEvidence::Overflow`].
    pub lost_overflow: u64,
    /// Sum over declared losses of the time from when the hole was first seen (a higher
    /// sequence number arrived) to when it was declared lost, in nanoseconds.
    pub loss_detect_nanos_sum: u64,
    /// Largest such time, in nanoseconds.
    pub loss_detect_nanos_max: u64,
    /// Inserted packets never released: dropped from a capped queue a caller did not
    /// drain, too large for the caller's buffer, or a duplicate of a held one.
    pub discarded: u64,
    /// Repair requests made (docs/protocol.md#repair).
    pub repair_requests: u64,
    /// Requested packets that arrived before their hole was given up.
    pub repaired: u64,
    /// Largest number of packets held at once.
    pub max_held_packets: u64,
    /// Largest number of bytes held at once.
    pub max_held_bytes: u64,
}

impl ReorderStats {
    /// Sequence numbers declared lost, all evidence together.
    pub fn lost_total(&self) -> u64 {
        self.lost_predecessor + self.lost_comparison + self.lost_timer + self.lost_overflow
    }
}

/// Longest a packet waits in the reorder buffer by default.
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(1);

/// Tunables of the reorder buffers (docs/protocol.md#reorder-buffer).
#[derive(Clone, Debug, PartialEq)]
pub struct ReorderConfig {
    /// Hard bound on held packets.
    pub max_packets: usize,
    /// Hard bound on held payload bytes.
    pub max_bytes: usize,
    /// Longest a hole is waited for whatever the delay estimates say, and the wait when no
    /// path has a delay estimate yet. Default 1 s (PET-BMP's backup timer was 0.5 s; see
    /// docs/protocol.md#reorder-buffer for why plait waits longer).
    pub max_hold: Duration,
    /// Slack added to every hole deadline on top of the measured delay spread, for clock
    /// granularity and driver wake-up latency. Real hosts see far more timing jitter than
    /// the simulator (interrupt coalescing, scheduling, shapers releasing in bursts): with
    /// 2 ms, 0.2 to 0.4 % of the packets of a 70 Mbit/s transfer over two shaped paths
    /// arrived after their hole had been given up and reached TCP out of order (the `late`
    /// count printed by `cargo test --release -p plait --test tunnel_netns -- --nocapture
    /// tcp_50mb`); with the default 10 ms it printed 0.
    pub hold_margin: Duration,
    /// Paced release (criterion 5 of seed PET-BMP §IV): packets freed by a filled hole leave
    /// at most `pacing_burst` at once, then at `pacing_gain` times the measured arrival
    /// rate. `None` releases everything at once.
    pub pacing: Option<ReleasePacing>,
    /// Loss repair (docs/protocol.md#repair): ask the sender for a packet with loss
    /// evidence and keep its hole open this much longer (the session keeps it near one
    /// round trip). `None`: off, holes with evidence are declared lost at once.
    pub repair_wait: Option<Duration>,
    /// With `repair_wait`, hold every hole with path-predecessor evidence, not only those
    /// a path lost while its queue was short (packet-mode FEC, docs/protocol.md#fec: a
    /// protected packet may be rebuilt whatever lost it). The session switches it with
    /// [`ReorderBuffer::set_hold_all_evidence`] while the peer sends repair symbols.
    pub hold_all_evidence: bool,
}

/// Paced release settings (see [`ReorderConfig::pacing`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReleasePacing {
    /// Packets that may leave back to back.
    pub burst: u32,
    /// Release rate as a multiple of the measured arrival rate (> 1 so the buffer drains).
    pub gain: f64,
}

impl Default for ReorderConfig {
    fn default() -> Self {
        ReorderConfig {
            max_packets: 8192,
            max_bytes: 8 << 20,
            max_hold: DEFAULT_MAX_HOLD,
            hold_margin: Duration::from_millis(10),
            pacing: Some(ReleasePacing {
                burst: 4,
                gain: 2.0,
            }),
            repair_wait: None,
            hold_all_evidence: false,
        }
    }
}

/// A receive-side reorder policy (see the module docs for its invariants).
pub trait ReorderBuffer {
    /// Sets the paths a missing packet may still be travelling on (the session's paths).
    fn set_paths(&mut self, now: Time, paths: &[PathId]);

    /// Every authenticated datagram's arrival on `path` with the sender's header timestamp:
    /// feeds the per-path one-way delay estimates that hole deadlines come from.
    fn on_datagram(&mut self, now: Time, path: PathId, send_ts_us: u32);

    /// A fresh inner packet arrived (never a duplicate: the session filters those).
    fn insert(&mut self, now: Time, arrival: &Arrival, packet: &[u8]);

    /// The next packet that may leave now, copied into `out` (which must hold the largest
    /// inner packet; a packet that does not fit is dropped and counted, never truncated).
    fn poll_release(&mut self, now: Time, out: &mut [u8]) -> Option<Released>;

    /// When `poll_release` may next have something without a new insert.
    fn next_deadline(&self) -> Option<Time>;

    /// The next global sequence number to ask the sender to repair (loss repair on only).
    fn poll_repair_request(&mut self) -> Option<GlobalSeq> {
        None
    }

    /// Updates how long a hole with a repair request stays open (about one round trip).
    fn set_repair_wait(&mut self, _wait: Duration) {}

    /// Switches [`ReorderConfig::hold_all_evidence`].
    fn set_hold_all_evidence(&mut self, _on: bool) {}

    /// Packets held now.
    fn held_packets(&self) -> usize;

    /// Payload bytes held now.
    fn held_bytes(&self) -> usize;

    /// Counters.
    fn stats(&self) -> ReorderStats;
}

/// Reorder policy names accepted in config and scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReorderKind {
    /// `none`: deliver on arrival.
    None,
    /// `bmp`: PET-BMP's buffer management policy (seed PET-BMP §V-B).
    Bmp,
    /// `mms`: seed MMS §II-D's receiver buffer (hold out-of-sequence packets; when more
    /// than its capacity are held, the oldest leaves).
    Mms,
}

impl ReorderKind {
    /// Every policy.
    pub const ALL: [ReorderKind; 3] = [ReorderKind::None, ReorderKind::Bmp, ReorderKind::Mms];

    /// The name used in config files.
    pub const fn name(self) -> &'static str {
        match self {
            ReorderKind::None => "none",
            ReorderKind::Bmp => "bmp",
            ReorderKind::Mms => "mms",
        }
    }

    /// Looks a policy up by its config name.
    pub fn from_name(name: &str) -> Option<ReorderKind> {
        ReorderKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Enum dispatch over every reorder policy.
#[derive(Debug)]
// One per session, never in a collection: boxing the larger variant would only add a
// pointer hop to every packet.
#[allow(clippy::large_enum_variant)]
pub enum AnyReorder {
    /// See [`Passthrough`].
    None(Passthrough),
    /// See [`Bmp`].
    Bmp(Bmp),
    /// See [`MmsBuffer`].
    Mms(MmsBuffer),
}

impl AnyReorder {
    /// A fresh buffer of the given kind.
    pub fn new(kind: ReorderKind, config: ReorderConfig) -> AnyReorder {
        match kind {
            ReorderKind::None => AnyReorder::None(Passthrough::new(config)),
            ReorderKind::Bmp => AnyReorder::Bmp(Bmp::new(config)),
            ReorderKind::Mms => AnyReorder::Mms(MmsBuffer::new(config)),
        }
    }

    fn inner(&self) -> &dyn ReorderBuffer {
        match self {
            AnyReorder::None(b) => b,
            AnyReorder::Bmp(b) => b,
            AnyReorder::Mms(b) => b,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn ReorderBuffer {
        match self {
            AnyReorder::None(b) => b,
            AnyReorder::Bmp(b) => b,
            AnyReorder::Mms(b) => b,
        }
    }
}

impl ReorderBuffer for AnyReorder {
    fn set_paths(&mut self, now: Time, paths: &[PathId]) {
        self.inner_mut().set_paths(now, paths)
    }
    fn on_datagram(&mut self, now: Time, path: PathId, send_ts_us: u32) {
        self.inner_mut().on_datagram(now, path, send_ts_us)
    }
    fn insert(&mut self, now: Time, arrival: &Arrival, packet: &[u8]) {
        self.inner_mut().insert(now, arrival, packet)
    }
    fn poll_release(&mut self, now: Time, out: &mut [u8]) -> Option<Released> {
        self.inner_mut().poll_release(now, out)
    }
    fn next_deadline(&self) -> Option<Time> {
        self.inner().next_deadline()
    }
    fn poll_repair_request(&mut self) -> Option<GlobalSeq> {
        self.inner_mut().poll_repair_request()
    }
    fn set_repair_wait(&mut self, wait: Duration) {
        self.inner_mut().set_repair_wait(wait)
    }
    fn set_hold_all_evidence(&mut self, on: bool) {
        self.inner_mut().set_hold_all_evidence(on)
    }
    fn held_packets(&self) -> usize {
        self.inner().held_packets()
    }
    fn held_bytes(&self) -> usize {
        self.inner().held_bytes()
    }
    fn stats(&self) -> ReorderStats {
        self.inner().stats()
    }
}
