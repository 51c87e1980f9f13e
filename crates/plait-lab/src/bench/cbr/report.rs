//! What one row of `plait bench --modes plait-cbr` measured ([`CbrRow`]), computed from the
//! receiver's accounting and the two daemons' status counters, and the terminal table.
//!
//! Definitions (docs/fec.md, "On the test bed", repeats them), with the flow going from
//! the remote host through the server to the lan host behind the client, as plait-sim's
//! `plait-cbr` goes from the server's side to the mobile host:
//! - **residual loss**: numbers the sender sent that had not reached the receiving
//!   application after the drain, over all it sent (plait-sim leaves out the last second
//!   instead of draining);
//! - **repair overhead**: plait-sim's definition (scenarios/fec-cbr.toml): the sending
//!   engine's (the server's) FEC symbols, each counted as its shard (packet + 2 bytes) and
//!   12-byte frame body (docs/protocol.md#fec), plus its loss-repair copies, each counted
//!   as the packet (docs/protocol.md#loss-repair), over the flow's bytes (packets sent ×
//!   packet size); datagram headers are left out;
//! - **outer ÷ flow**: every byte the server put on the paths during the row (its engine
//!   datagrams' lengths from `plait status`, plus per datagram plait's data header and AEAD
//!   tag and the outer IPv4 and UDP headers) over the flow's bytes: data, FEC, repairs,
//!   ACKs, probes, all headers; the difference between two rows is what the repair cost on
//!   the wire, headers included. **feedback ÷ flow**: the same for the client (ACKs,
//!   repair requests);
//! - **delay**: one-way, the sender's send time to the receiver's reading, same
//!   `CLOCK_MONOTONIC`; **added p99**: the row's p99 over the first row's (no repair at
//!   all) in the same run, as plait-sim's table computes it; **p99 − min**: over the row's
//!   fastest packet.
//!
//! Invariant: pure functions of their inputs; a missing measurement is `None`.

use std::fmt::Write as _;

use plait_testbed::{CbrReport, CbrSendReport};
use plait_tunnel::control::{SessionStatus, StatusSnapshot};
use serde::{Deserialize, Serialize};

use super::super::text::shares_text;

/// Per datagram on the wire beside the engine datagram: plait's data header and AEAD tag
/// (docs/protocol.md#overhead) and the outer IPv4 and UDP headers (the test bed's paths are
/// IPv4).
pub const OUTER_PER_DATAGRAM: u64 = plait_tunnel::message::DATA_OVERHEAD as u64 + 28;
/// An FEC symbol's bytes beside the packet it protects: the shard's 2-byte length and the
/// FEC_REPAIR frame's 12-byte body header (docs/protocol.md#fec), as plait-sim counts them.
pub const SYMBOL_EXTRA: u64 = 2 + 12;
/// Issue 18's goals: residual loss below 0.1 % …
pub const GOAL_RESIDUAL: f64 = 0.001;
/// … with repair overhead under 25 % of the flow's rate …
pub const GOAL_OVERHEAD: f64 = 0.25;
// … and added p99 delay under one RTT of the faster path (the topology's, see `table`).

/// The flow's settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CbrSettings {
    /// Rate of the flow's IP packets, kbit/s.
    pub rate_kbps: f64,
    /// IP packet size (IPv4 20 + UDP 8 + payload), bytes.
    pub packet_size: usize,
}

impl Default for CbrSettings {
    /// Issue 18's flow: 4 Mbit/s of 1200-byte packets (scenarios/fec-cbr.toml's `[cbr]`).
    fn default() -> CbrSettings {
        CbrSettings {
            rate_kbps: 4000.0,
            packet_size: 1200,
        }
    }
}

/// `plait-cbr`'s part of a run's JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CbrResult {
    /// The flow.
    pub settings: CbrSettings,
    /// The faster path's configured RTT, ms: the bound of the added p99 delay.
    pub faster_rtt_ms: f64,
    /// One per engine setting, the one without any repair first.
    pub rows: Vec<CbrRow>,
}

/// One row: the flow under one engine setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CbrRow {
    /// The row's name.
    pub name: String,
    /// The `[engine]` lines of both daemons (besides `--engine`'s and the scheduler).
    pub engine: Vec<String>,
    /// Why the row failed, if it did (then the numbers are zero).
    pub error: Option<String>,
    /// Datagrams sent.
    pub sent: u64,
    /// Sends that failed (counted in `sent`).
    pub send_errors: u64,
    /// The pacer's latest wake-up after a planned send time, ms.
    pub max_late_ms: f64,
    /// Distinct datagrams received.
    pub received: u64,
    /// Never received.
    pub lost: u64,
    /// `lost / sent`.
    pub residual_loss: f64,
    /// Copies of a datagram already received.
    pub duplicates: u64,
    /// Datagrams received after a later-numbered one.
    pub reordered: u64,
    /// Datagrams not of the flow, or numbered beyond what was sent.
    pub foreign: u64,
    /// One-way delay, smallest, ms.
    pub delay_min_ms: Option<f64>,
    /// Median, ms.
    pub delay_p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub delay_p99_ms: Option<f64>,
    /// Largest, ms.
    pub delay_max_ms: Option<f64>,
    /// The flow's bytes: `sent` × packet size.
    pub flow_bytes: u64,
    /// Repair bytes by plait-sim's definition (module docs).
    pub repair_bytes: u64,
    /// `repair_bytes / flow_bytes`.
    pub repair_overhead: f64,
    /// The server's bytes on the paths, every header included (module docs).
    pub outer_bytes: u64,
    /// `outer_bytes / flow_bytes`.
    pub outer_ratio: f64,
    /// The client's bytes on the paths.
    pub feedback_bytes: u64,
    /// `feedback_bytes / flow_bytes`.
    pub feedback_ratio: f64,
    /// Each path's share of the server's bytes.
    pub path_shares: Vec<f64>,
    /// Server: FEC blocks closed with a symbol.
    pub fec_blocks: u64,
    /// Server: FEC symbols sent.
    pub fec_symbols: u64,
    /// Server: FEC symbols dropped unsent.
    pub fec_symbols_dropped: u64,
    /// Client: packets rebuilt from symbols.
    pub fec_recovered: u64,
    /// Client: blocks forgotten with a packet missing.
    pub fec_unrecovered: u64,
    /// Client: repair requests sent.
    pub repair_requests: u64,
    /// Server: loss-repair copies sent.
    pub repairs_sent: u64,
    /// Client: requested packets that arrived in time.
    pub repaired: u64,
    /// Client: packets released after their hole was given up.
    pub late: u64,
    /// Client: holes declared lost (all evidence).
    pub holes_lost: u64,
}

/// A daemon's one session before and after the row.
#[derive(Clone, Copy, Debug)]
pub struct Counters<'a> {
    /// At the flow's start.
    pub before: &'a SessionStatus,
    /// After the drain.
    pub after: &'a SessionStatus,
}

/// The session of a status snapshot (the bench's daemons have one each).
pub fn session(s: &StatusSnapshot) -> Option<&SessionStatus> {
    s.sessions.first()
}

/// Per path: outer bytes sent between `c.before` and `c.after` (paths by id).
fn outer_per_path(c: Counters<'_>) -> Vec<u64> {
    c.after
        .paths
        .iter()
        .map(|p| {
            let (b0, p0) = c
                .before
                .paths
                .iter()
                .find(|q| q.id == p.id)
                .map_or((0, 0), |q| (q.tx_bytes, q.tx_packets));
            let bytes = p.tx_bytes.saturating_sub(b0);
            let packets = p.tx_packets.saturating_sub(p0);
            bytes + packets * OUTER_PER_DATAGRAM
        })
        .collect()
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The row from what was measured: the sender's and receiver's reports and the server's
/// (sending) and client's (receiving) session counters.
pub fn cbr_row(
    name: &str,
    engine: &[String],
    settings: CbrSettings,
    sent: &CbrSendReport,
    got: &CbrReport,
    server: Counters<'_>,
    client: Counters<'_>,
) -> CbrRow {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let (sa, sb) = (server.after, server.before);
    let (ca, cb) = (client.after, client.before);
    let size = settings.packet_size as u64;
    let fec_symbols = d(sa.fec.symbols_sent, sb.fec.symbols_sent);
    let repairs_sent = d(sa.lost.repairs_sent, sb.lost.repairs_sent);
    let flow_bytes = sent.sent * size;
    let repair_bytes = fec_symbols * (size + SYMBOL_EXTRA) + repairs_sent * size;
    let per_path = outer_per_path(server);
    let outer_bytes: u64 = per_path.iter().sum();
    let feedback_bytes: u64 = outer_per_path(client).iter().sum();
    let holes =
        |s: &SessionStatus| s.lost.predecessor + s.lost.comparison + s.lost.timer + s.lost.overflow;
    CbrRow {
        name: name.into(),
        engine: engine.to_vec(),
        error: None,
        sent: sent.sent,
        send_errors: sent.errors,
        max_late_ms: sent.max_late.as_secs_f64() * 1000.0,
        received: got.received,
        lost: got.lost,
        residual_loss: got.residual_loss,
        duplicates: got.duplicates,
        reordered: got.reordered,
        foreign: got.malformed + got.unexpected,
        delay_min_ms: got.delay_min_ms,
        delay_p50_ms: got.delay_p50_ms,
        delay_p99_ms: got.delay_p99_ms,
        delay_max_ms: got.delay_max_ms,
        flow_bytes,
        repair_bytes,
        repair_overhead: ratio(repair_bytes, flow_bytes),
        outer_bytes,
        outer_ratio: ratio(outer_bytes, flow_bytes),
        feedback_bytes,
        feedback_ratio: ratio(feedback_bytes, flow_bytes),
        path_shares: per_path.iter().map(|&b| ratio(b, outer_bytes)).collect(),
        fec_blocks: d(sa.fec.blocks, sb.fec.blocks),
        fec_symbols,
        fec_symbols_dropped: d(sa.fec.symbols_dropped, sb.fec.symbols_dropped),
        fec_recovered: d(ca.fec.recovered, cb.fec.recovered),
        fec_unrecovered: d(ca.fec.unrecovered, cb.fec.unrecovered),
        repair_requests: d(ca.lost.repair_requests, cb.lost.repair_requests),
        repairs_sent,
        repaired: d(ca.lost.repaired, cb.lost.repaired),
        late: d(ca.late, cb.late),
        holes_lost: d(holes(ca), holes(cb)),
    }
}

impl CbrRow {
    /// A row that failed.
    pub fn failed(name: &str, engine: &[String], error: String) -> CbrRow {
        CbrRow {
            name: name.into(),
            engine: engine.to_vec(),
            error: Some(error),
            ..CbrRow::default()
        }
    }
}

/// The added p99 of `row`: its p99 over the first row's, if both measured one.
pub fn added_p99_ms(rows: &[CbrRow], row: &CbrRow) -> Option<f64> {
    let first = rows.first().filter(|r| r.error.is_none())?;
    Some(row.delay_p99_ms? - first.delay_p99_ms?)
}

/// Whether `row` meets issue 18's three goals, the added delay against `rtt_ms` (the
/// faster path's RTT); `None` without a delay to judge.
pub fn goals_met(rows: &[CbrRow], row: &CbrRow, rtt_ms: f64) -> Option<bool> {
    let added = added_p99_ms(rows, row)?;
    Some(
        row.error.is_none()
            && row.residual_loss < GOAL_RESIDUAL
            && row.repair_overhead < GOAL_OVERHEAD
            && added < rtt_ms,
    )
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The terminal table of the rows; `rtt_ms` is the faster path's configured RTT.
pub fn table(settings: CbrSettings, rows: &[CbrRow], rtt_ms: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plait-cbr: {} kbit/s of {}-byte packets; goals: residual < {} %, repair < {} %, \
         added p99 < {rtt_ms:.0} ms (the faster path's RTT)",
        settings.rate_kbps,
        settings.packet_size,
        GOAL_RESIDUAL * 100.0,
        GOAL_OVERHEAD * 100.0
    );
    let _ = writeln!(
        out,
        "{:<30} {:>6} {:>5} {:>9} {:>4} {:>6} {:>11} {:>7} {:>7} {:>8} {:>7} {:>6} {:>8} {:>7} {:>7} {:>8} {:>5}",
        "row",
        "sent",
        "lost",
        "residual%",
        "dup",
        "reord",
        "p50/p99 ms",
        "p99-min",
        "added",
        "repair%",
        "outer×",
        "feedb%",
        "shares%",
        "FECsym",
        "rebuilt",
        "repairs",
        "goals"
    );
    for r in rows {
        if let Some(e) = &r.error {
            let _ = writeln!(out, "{:<30} failed: {e}", r.name);
            continue;
        }
        let p99_min = r.delay_p99_ms.zip(r.delay_min_ms).map(|(a, b)| a - b);
        let goals = match goals_met(rows, r, rtt_ms) {
            Some(true) => "met",
            Some(false) => "NO",
            None => "-",
        };
        let _ = writeln!(
            out,
            "{:<30} {:>6} {:>5} {:>9.3} {:>4} {:>6} {:>11} {:>7} {:>7} {:>8.1} {:>7.3} {:>6.1} {:>8} {:>7} {:>7} {:>8} {:>5}",
            r.name,
            r.sent,
            r.lost,
            r.residual_loss * 100.0,
            r.duplicates,
            r.reordered,
            format!("{}/{}", opt(r.delay_p50_ms, 1), opt(r.delay_p99_ms, 1)),
            opt(p99_min, 1),
            added_p99_ms(rows, r).map_or("-".into(), |a| format!("{a:+.1}")),
            r.repair_overhead * 100.0,
            r.outer_ratio,
            r.feedback_ratio * 100.0,
            shares_text(&r.path_shares),
            r.fec_symbols,
            r.fec_recovered,
            r.repairs_sent,
            goals
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use plait_tunnel::control::PathStatus;
    use plait_tunnel::control::snapshot::{FecCounters, LossCounters};

    use super::*;

    fn path(id: u8, tx_bytes: u64, tx_packets: u64) -> PathStatus {
        PathStatus {
            id,
            tx_bytes,
            tx_packets,
            ..PathStatus::default()
        }
    }

    fn sent(n: u64) -> CbrSendReport {
        CbrSendReport {
            sent: n,
            errors: 0,
            duration: Duration::from_secs(1),
            max_late: Duration::from_millis(2),
        }
    }

    fn got(sent: u64, lost: u64, p99: f64) -> CbrReport {
        CbrReport {
            sent,
            received: sent - lost,
            lost,
            residual_loss: lost as f64 / sent as f64,
            duplicates: 0,
            reordered: 3,
            malformed: 1,
            unexpected: 0,
            delay_min_ms: Some(12.0),
            delay_p50_ms: Some(27.0),
            delay_p99_ms: Some(p99),
            delay_max_ms: Some(60.0),
        }
    }

    #[test]
    fn overhead_counts_symbols_and_repairs_as_plait_sim_does_and_the_wire_in_full() {
        let before = SessionStatus {
            paths: vec![path(0, 1000, 10), path(1, 500, 5)],
            fec: FecCounters {
                symbols_sent: 2,
                ..FecCounters::default()
            },
            ..SessionStatus::default()
        };
        let after = SessionStatus {
            paths: vec![path(0, 101_000, 110), path(1, 300_500, 205)],
            fec: FecCounters {
                blocks: 4,
                symbols_sent: 12,
                ..FecCounters::default()
            },
            lost: LossCounters {
                repairs_sent: 5,
                ..LossCounters::default()
            },
            ..SessionStatus::default()
        };
        let client_after = SessionStatus {
            paths: vec![path(0, 2000, 20)],
            fec: FecCounters {
                recovered: 7,
                ..FecCounters::default()
            },
            lost: LossCounters {
                predecessor: 3,
                timer: 1,
                repair_requests: 6,
                ..LossCounters::default()
            },
            ..SessionStatus::default()
        };
        let client_before = SessionStatus::default();
        let s = CbrSettings::default();
        let r = cbr_row(
            "x",
            &["fec = \"sparse\"".into()],
            s,
            &sent(1000),
            &got(1000, 2, 40.0),
            Counters {
                before: &before,
                after: &after,
            },
            Counters {
                before: &client_before,
                after: &client_after,
            },
        );
        assert_eq!(r.flow_bytes, 1_200_000);
        // 10 symbols of 1200 + 2 + 12 bytes and 5 copies of 1200.
        assert_eq!(r.repair_bytes, 10 * 1214 + 5 * 1200);
        assert!((r.repair_overhead - 18_140.0 / 1_200_000.0).abs() < 1e-12);
        // 100 000 + 300 000 engine bytes in 100 + 200 datagrams of 49 more bytes each.
        assert_eq!(OUTER_PER_DATAGRAM, 49);
        assert_eq!(r.outer_bytes, 400_000 + 300 * 49);
        assert_eq!(r.path_shares.len(), 2);
        assert!((r.path_shares[0] - (100_000.0 + 4900.0) / 414_700.0).abs() < 1e-12);
        assert_eq!(r.feedback_bytes, 2000 + 20 * 49);
        assert_eq!((r.fec_blocks, r.fec_symbols, r.fec_recovered), (4, 10, 7));
        assert_eq!((r.repairs_sent, r.repair_requests, r.holes_lost), (5, 6, 4));
        assert_eq!((r.lost, r.foreign, r.reordered), (2, 1, 3));
        assert!((r.max_late_ms - 2.0).abs() < 1e-9);
    }

    #[test]
    fn a_path_that_appears_later_counts_from_zero_and_nothing_sent_is_no_division() {
        let before = SessionStatus::default();
        let after = SessionStatus {
            paths: vec![path(3, 100, 1)],
            ..SessionStatus::default()
        };
        let c = Counters {
            before: &before,
            after: &after,
        };
        let r = cbr_row(
            "x",
            &[],
            CbrSettings::default(),
            &sent(0),
            &got(1, 0, 1.0),
            c,
            c,
        );
        assert_eq!(r.outer_bytes, 149);
        assert_eq!((r.outer_ratio, r.repair_overhead), (0.0, 0.0));
    }

    #[test]
    fn goals_and_added_delay_are_against_the_first_row() {
        let row = |p99: f64, residual: f64, overhead: f64| CbrRow {
            delay_p99_ms: Some(p99),
            residual_loss: residual,
            repair_overhead: overhead,
            ..CbrRow::default()
        };
        let rows = vec![
            row(27.0, 0.01, 0.0),
            row(42.0, 0.0002, 0.09),
            row(50.0, 0.0002, 0.09),
            row(30.0, 0.0002, 0.30),
        ];
        assert_eq!(added_p99_ms(&rows, &rows[1]), Some(15.0));
        assert_eq!(goals_met(&rows, &rows[0], 20.0), Some(false));
        assert_eq!(goals_met(&rows, &rows[1], 20.0), Some(true));
        assert_eq!(goals_met(&rows, &rows[2], 20.0), Some(false));
        assert_eq!(goals_met(&rows, &rows[3], 20.0), Some(false));
        let failed_first = vec![CbrRow::failed("a", &[], "x".into()), row(1.0, 0.0, 0.0)];
        assert_eq!(added_p99_ms(&failed_first, &failed_first[1]), None);
        let t = table(CbrSettings::default(), &failed_first, 20.0);
        assert!(t.contains("failed: x"), "{t}");
    }
}
