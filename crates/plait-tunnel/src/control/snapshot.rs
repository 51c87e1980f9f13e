//! The daemon's state as `plait status` and the metrics endpoint see it.
//!
//! The event loop publishes a fresh [`StatusSnapshot`] a few times a second (and on
//! request); readers never touch the loop's state, so a slow reader cannot stall traffic.
//! The JSON form (`plait status --json`) is this type serialised with serde: field names
//! are a stable interface for scripts.

use serde::{Deserialize, Serialize};

/// Everything `plait status` prints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    /// `"client"` or `"server"`.
    pub role: String,
    /// plait's version.
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_s: f64,
    /// The TUN device's name.
    pub tun: String,
    /// The TUN device's MTU (largest inner packet), bytes.
    pub tun_mtu: usize,
    /// One entry per peer with a session (the client has at most one: its server).
    pub sessions: Vec<SessionStatus>,
    /// Datagrams dropped before any session saw them (failed authentication, unknown
    /// index, malformed, replayed), by reason.
    pub dropped: DropCounters,
    /// Stream mode's relay (`None`: packet mode only).
    #[serde(default)]
    pub relay: Option<RelayStatus>,
    /// A client's byte budgets of metered paths (docs/tunnel-config.md#budget).
    #[serde(default)]
    pub budgets: Vec<BudgetStatus>,
}

/// One metered `[[path]]`'s byte budget.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetStatus {
    /// The `[[path]]`'s name (its pattern paths share the budget).
    pub path: String,
    /// Outer bytes sent and received in the current period.
    pub used: u64,
    /// Bytes allowed per period.
    pub budget: u64,
    /// The day the next period begins (UTC, `YYYY-MM-DD`).
    pub resets: String,
    /// The budget is spent: the path is a backup until `resets`.
    pub spent: bool,
    /// The count is kept in its state file (else in memory only).
    pub saved: bool,
}

/// Stream mode's relayed TCP connections (docs/tunnel.md#stream-mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayStatus {
    /// Connections open now.
    pub open: u64,
    /// Connections relayed since start.
    pub relayed: u64,
    /// Connections or streams refused (limits, policy, failed connects, SOCKS5 errors).
    pub refused: u64,
    /// Connections aborted by a reset from either end.
    pub reset: u64,
}

/// One session's streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamStatus {
    /// Streams open now.
    pub open: u64,
    /// Streams opened by either end since the session started.
    pub opened: u64,
    /// Stream bytes sent for the first time.
    pub bytes_sent: u64,
    /// Stream bytes sent again after a loss.
    pub bytes_retransmitted: u64,
    /// Stream bytes delivered to the relay.
    pub bytes_read: u64,
    /// Streams reset by either end.
    pub resets: u64,
}

/// One peer's session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// The peer's name from the config (`[[client]] name`, or `"server"` on the client).
    pub peer: String,
    /// The peer's public key, base64.
    pub public_key: String,
    /// Whether a handshake has completed and keys are current.
    pub established: bool,
    /// Engine session id (hex in the table).
    pub session_id: u32,
    /// Seconds since the current keys were made.
    pub key_age_s: f64,
    /// Handshakes completed in this session.
    pub handshakes: u64,
    /// Scheduler name.
    pub scheduler: String,
    /// Reorder-buffer depth now, packets.
    pub reorder_depth: usize,
    /// Send-queue length now, packets.
    pub send_queue: usize,
    /// Inner packets delivered to the TUN device.
    pub delivered: u64,
    /// Inner packets refused because the send queue was full.
    pub queue_full: u64,
    /// Receive side: holes declared lost, by evidence (docs/protocol.md#reorder-buffer).
    #[serde(default)]
    pub lost: LossCounters,
    /// Inner packets released after their hole had been given up (late).
    #[serde(default)]
    pub late: u64,
    /// Stream mode's streams in this session.
    #[serde(default)]
    pub streams: StreamStatus,
    /// Client side: handshakes started, by what started them.
    #[serde(default)]
    pub handshake_causes: HandshakeCauses,
    /// What the send queue dropped or marked (docs/protocol.md#send-queue).
    #[serde(default)]
    pub send_queue_drops: QueueDrops,
    /// Path validation and withdrawals (docs/protocol.md#path-validation,
    /// docs/protocol.md#binding).
    #[serde(default)]
    pub path_events: PathEvents,
    /// Client: the latest changes of the path set, oldest first.
    #[serde(default)]
    pub path_changes: Vec<PathChange>,
    /// Packet-mode FEC counters (all zero while no path shows random loss, or with
    /// `[engine] fec = "off"`).
    #[serde(default)]
    pub fec: FecCounters,
    /// Sparse flows and packet pacing (docs/protocol.md#unordered,
    /// docs/protocol.md#packet-pacing).
    #[serde(default)]
    pub sparse: SparseCounters,
    /// One row per path.
    /// The client's registered path set (docs/protocol.md#registration): on the client,
    /// what it registers; on the server, what it holds.
    #[serde(default)]
    pub registration: Option<RegistrationStatus>,
    pub paths: Vec<PathStatus>,
}

/// Inner packets the send queue dropped or marked (docs/protocol.md#send-queue).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDrops {
    /// Dropped by CoDel: they waited too long.
    pub codel_dropped: u64,
    /// ECN-capable packets marked CE instead of dropped.
    pub ce_marked: u64,
    /// Dropped at the queue's byte bound (from the fattest flow).
    pub overflow_dropped: u64,
}

/// Sparse flows' packets and packet pacing's waits, as this end's engine counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SparseCounters {
    /// Inner packets sent marked UNORDERED (their flow was sparse).
    pub unordered_sent: u64,
    /// Inner packets delivered at once, out of the global order.
    pub delivered_unordered: u64,
    /// Times the send queue's head did not go on the path the scheduler chose, more than
    /// `send_queue_interval` behind the best one (packet pacing's spill rule).
    pub spills_refused: u64,
}

/// Packet-mode FEC (docs/protocol.md#fec), as this end's engine counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FecCounters {
    /// Blocks closed with at least one repair symbol.
    pub blocks: u64,
    /// Repair symbols sent.
    pub symbols_sent: u64,
    /// Repair symbols dropped unsent.
    pub symbols_dropped: u64,
    /// Repair symbols received and kept.
    pub symbols_received: u64,
    /// Repair frames refused.
    pub symbols_refused: u64,
    /// Inner packets rebuilt from repair symbols.
    pub recovered: u64,
    /// Blocks forgotten with a packet their symbols could not rebuild.
    pub unrecovered: u64,
}

/// Path validation and the client's withdrawals, as this end saw them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathEvents {
    /// Server: addresses validated (a path's first, or a move).
    pub validated: u64,
    /// Server: candidate addresses given up (no answer).
    pub validations_abandoned: u64,
    /// Server: paths the client withdrew (their link went away).
    pub withdrawn: u64,
    /// Server: paths the client restored.
    pub restored: u64,
    /// Server: datagrams that arrived on a withdrawn path, ignored.
    pub withdrawn_ignored: u64,
    /// Server: registrations applied (each newer than the one held:
    /// docs/protocol.md#registration).
    #[serde(default)]
    pub registrations: u64,
    /// Server: registrations refused (malformed, or a client address of the wrong family).
    #[serde(default)]
    pub registrations_refused: u64,
    /// Client: pattern paths opened (an interface matching `devices` appeared with a
    /// route to the server).
    #[serde(default)]
    pub opened: u64,
    /// Client: pattern paths closed (their interface, its carrier or its route went).
    #[serde(default)]
    pub closed: u64,
    /// Client: interfaces a pattern matched that got no path (every path id in use).
    #[serde(default)]
    pub refused: u64,
}

/// One change of the client's path set, for `plait status` (the latest
/// [`MAX_PATH_CHANGES`] are kept).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathChange {
    /// When, seconds since the daemon started.
    pub at_s: f64,
    /// The path's id (none for a refused interface).
    pub id: Option<u8>,
    /// The path's name (`NAME:INTERFACE` for a pattern path).
    pub path: String,
    /// `opened`, `closed`, `refused`, `link gone` or `link back`.
    pub event: String,
    /// Why, in words.
    pub why: String,
}

/// Path changes a client keeps for `plait status`.
pub const MAX_PATH_CHANGES: usize = 16;

/// Handshakes a client started, by cause (docs/protocol.md#rekeying,
/// docs/protocol.md#unknown-index). A repeat of an unanswered initiation is `retry`, not
/// a new cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandshakeCauses {
    /// No keys yet (the first handshake, or after the keys expired).
    pub first: u64,
    /// The keys reached their age or message limit.
    pub rekey: u64,
    /// An unknown-index hint: the server does not know our keys (it restarted).
    pub hint: u64,
    /// Nothing authenticated came back for a while after we sent.
    pub unanswered: u64,
    /// Nothing authenticated came from the server for 15 s.
    pub silence: u64,
    /// An initiation repeated: unanswered for 5 s, or after a cookie reply.
    pub retry: u64,
}

/// A registration (docs/protocol.md#registration).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegistrationStatus {
    /// Its number.
    pub seq: u64,
    /// Client: the highest number the server acknowledged; server: the same as `seq`.
    pub acked: u64,
    /// Client: the number of what the server said it holds, at the latest query.
    pub server_seq: Option<u64>,
    /// Client: whether that is this registration (paths, roles, attributes and addresses;
    /// quality aside).
    pub server_agrees: Option<bool>,
    /// The paths registered.
    pub paths: Vec<RegisteredPath>,
}

/// One path of a registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegisteredPath {
    /// Path id.
    pub id: u8,
    /// Whether the client's link for it works.
    pub available: bool,
    /// A backup path.
    pub backup: bool,
    /// Link type (`wired`, `wifi`, `cellular`, `satellite`, `unspecified`).
    pub link: String,
    /// Cost class (`unmetered`, `metered`).
    pub cost: String,
    /// Priority, 0 (preferred) to 7.
    pub priority: u8,
    /// The address the client sends from, if it knows it.
    pub local: Option<String>,
    /// The client's smoothed RTT, milliseconds.
    pub srtt_ms: Option<u16>,
    /// The client's smoothed loss, percent.
    pub loss_pct: Option<f64>,
    /// The client's rate estimate, Mbit/s.
    pub rate_mbit: Option<f64>,
}

/// One path of a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathStatus {
    /// Path id (0..16).
    pub id: u8,
    /// Name from the config (client), or `path<N>` (server).
    pub name: String,
    /// Local socket address, if known.
    pub local: Option<String>,
    /// The peer's address on this path, if known.
    pub remote: Option<String>,
    /// `probing`, `active`, `degraded` or `down`.
    pub state: String,
    /// Why this end has handed the path over (docs/protocol.md#handover): `loss`,
    /// `delay`, `blackouts` or `weak signal`; absent while it carries data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<String>,
    /// The link layer's signal of the path's interface, 0 to 1, where the client reads one
    /// (docs/tunnel-config.md, `link_signal_file`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<f64>,
    /// Smoothed RTT, milliseconds.
    pub srtt_ms: Option<f64>,
    /// Minimum RTT, milliseconds.
    pub min_rtt_ms: Option<f64>,
    /// Forward one-way delay relative to the fastest path, milliseconds.
    pub owd_ms: Option<f64>,
    /// Capacity estimate, megabits per second: the packet-train rate, else the packet-pair
    /// or configured rate raised to a higher delivery rate; `None` while only a delivery
    /// rate is known (that is the path's load, not its capacity).
    pub rate_mbit: Option<f64>,
    /// Smoothed loss fraction, 0..=1.
    pub loss: f64,
    /// Bytes sent (datagrams, before encryption overhead).
    pub tx_bytes: u64,
    /// Datagrams sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Datagrams received.
    pub rx_packets: u64,
    /// Datagrams declared lost (their stream bytes are sent again, on any path).
    #[serde(default)]
    pub lost_packets: u64,
    /// Of those, datagrams acknowledged after all: late (reordered on the way), not lost
    /// (docs/protocol.md#loss-detection).
    #[serde(default)]
    pub late_packets: u64,
    /// Congestion window (stream mode), bytes.
    #[serde(default)]
    pub cwnd_bytes: u64,
    /// Bytes in flight (stream mode).
    #[serde(default)]
    pub in_flight_bytes: u64,
    /// Pacing rate (stream mode), megabits per second.
    #[serde(default)]
    pub pacing_mbit: Option<f64>,
    /// The path's congestion controller (`[engine] congestion`) and, for `adaptive`, what
    /// it runs: `adaptive (newreno)`, `adaptive (newreno, uncapped)` (the queue cap lifted
    /// where other flows keep the queue standing, docs/protocol.md#drain-check) or
    /// `adaptive (bbr)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
}

/// Holes the reorder buffer declared lost, by evidence, and loss repair counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossCounters {
    /// A later packet on the same path named it as its predecessor.
    pub predecessor: u64,
    /// Every path delivered something later.
    pub comparison: u64,
    /// Its deadline passed.
    pub timer: u64,
    /// Pushed out by the buffer's bound.
    pub overflow: u64,
    /// Repair requests sent (docs/protocol.md#repair).
    pub repair_requests: u64,
    /// Requested packets that arrived in time.
    pub repaired: u64,
    /// Repairs sent for the peer.
    pub repairs_sent: u64,
    /// Inner packets queued to be sent again because the path carrying them was removed
    /// (a withdrawn or closed path, docs/protocol.md#repair, "a path removed").
    #[serde(default)]
    pub repairs_on_removal: u64,
}

/// Datagrams dropped before reaching a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounters {
    /// Did not parse as a plait message.
    pub malformed: u64,
    /// Named a receiver index no session has.
    pub unknown_index: u64,
    /// Failed AEAD authentication, or a handshake that failed to decrypt.
    pub auth_failed: u64,
    /// Replayed or too old for the replay window.
    pub replayed: u64,
    /// Handshake from a public key not in the config.
    pub unknown_key: u64,
    /// Handshakes refused by rate limiting.
    pub rate_limited: u64,
    /// Handshake messages with a wrong mac1 (docs/protocol.md#dos), refused before any
    /// Diffie-Hellman.
    #[serde(default)]
    pub bad_mac: u64,
    /// Initiations not processed but answered with a cookie reply: no valid mac2 while the
    /// server was under load or their source over its budget (docs/protocol.md#dos).
    #[serde(default)]
    pub cookie_replied: u64,
    /// Server: initiations from a client's validated path address, while its session runs,
    /// processed at once on that address's own budget, whatever the load
    /// (docs/protocol.md#known-first). Not a drop: counted so a flood's effect shows.
    #[serde(default)]
    pub known_admitted: u64,
    /// Server: initiations from such an address over its own budget (or the known
    /// addresses' shared one): handled by the ordinary rules instead, like any source's
    /// (a spoofer of the address, or a client that sends too often).
    #[serde(default)]
    pub known_over_budget: u64,
    /// Server: data messages with an unknown index (counted in `unknown_index` too) answered
    /// with an unknown-index hint (docs/protocol.md#unknown-index).
    #[serde(default)]
    pub hinted: u64,
    /// Client: unknown-index hints not acted on: a wrong MAC, not naming a data message sent
    /// under the current keys, or arriving while a handshake is already under way.
    #[serde(default)]
    pub hint_ignored: u64,
    /// Inner packets whose source address is not allowed for their peer.
    pub spoofed_source: u64,
    /// Server: engine datagrams not sent to a path's only, unvalidated address because
    /// they would exceed its anti-amplification budget (docs/protocol.md#path-validation).
    #[serde(default)]
    pub amplification_limited: u64,
    /// Path-control messages that authenticated but validated nothing: a wrong or stale
    /// token, the wrong address, a malformed frame (docs/protocol.md#path-validation).
    #[serde(default)]
    pub path_frames_ignored: u64,
    /// Inner packets from the TUN device with no peer for their destination.
    pub no_route: u64,
}
