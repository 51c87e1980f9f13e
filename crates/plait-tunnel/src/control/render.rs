//! The human-readable table `plait status` prints (scripts use `--json` instead).
//!
//! Layout: a header line (role, version, TUN device and MTU, uptime); per session a
//! summary line and one row per path under a column header; then one line of nonzero
//! drop counters (or `drops: none`).
//!
//! Invariants: path columns are aligned (numbers right-aligned, text left-aligned), no
//! line has trailing whitespace, every cell is one whitespace-free token (byte counts are
//! written `1.5MiB`, not `1.5 MiB`), and a missing value is printed as `-`. The output
//! depends only on the snapshot, so it is stable for tests.

use std::fmt::Write as _;

use super::snapshot::{FecCounters, PathEvents, QueueDrops};
use super::{DropCounters, HandshakeCauses, PathStatus, SessionStatus, StatusSnapshot};

/// The path table's column headers, in order.
pub const PATH_COLUMNS: [&str; 13] = [
    "ID",
    "NAME",
    "STATE",
    "RTT(ms)",
    "MINRTT",
    "OWD(ms)",
    "RATE(Mbit/s)",
    "LOSS%",
    "TX",
    "TXPKT",
    "RX",
    "RXPKT",
    "REMOTE",
];

/// Which path columns are left-aligned (text); the rest are right-aligned (numbers).
const LEFT_ALIGNED: [bool; 13] = [
    false, true, true, false, false, false, false, false, false, false, false, false, true,
];

/// Placeholder for a value that is not known.
const MISSING: &str = "-";

/// Renders the whole `plait status` output, ending with a newline.
pub fn render_table(s: &StatusSnapshot) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plait {} {}  tun {} mtu {}  up {}",
        s.role,
        s.version,
        s.tun,
        s.tun_mtu,
        human_duration(s.uptime_s)
    );
    if s.sessions.is_empty() {
        out.push_str("no sessions\n");
    }
    for session in &s.sessions {
        out.push('\n');
        render_session(&mut out, session);
    }
    if let Some(r) = &s.relay {
        let _ = writeln!(
            out,
            "\nstream relay: {} connections open, {} relayed, {} refused, {} reset",
            r.open, r.relayed, r.refused, r.reset
        );
    }
    render_budgets(&mut out, &s.budgets);
    out.push('\n');
    out.push_str(&render_drops(&s.dropped));
    out.push('\n');
    out
}

/// `budget lte: used 1.2 GB of 20 GB (resets 2025-07-01)`, per metered path with a budget
/// (docs/tunnel-config.md#budget).
fn render_budgets(out: &mut String, budgets: &[crate::control::snapshot::BudgetStatus]) {
    if budgets.is_empty() {
        return;
    }
    out.push('\n');
    for b in budgets {
        let _ = write!(
            out,
            "budget {}: used {} of {} (resets {})",
            b.path,
            crate::budget::format_bytes(b.used),
            crate::budget::format_bytes(b.budget),
            b.resets
        );
        if b.spent {
            out.push_str(" spent: a backup until then");
        }
        if !b.saved {
            out.push_str(" (not saved: a restart counts from 0)");
        }
        out.push('\n');
    }
}

fn render_session(out: &mut String, session: &SessionStatus) {
    let (state, key_age) = if session.established {
        ("established", human_duration(session.key_age_s))
    } else {
        ("handshaking", MISSING.to_owned())
    };
    let _ = writeln!(
        out,
        "peer {}: {state}  key age {key_age}  session {:08x}  scheduler {}  reorder {}  send queue {}  delivered {}",
        session.peer,
        session.session_id,
        session.scheduler,
        session.reorder_depth,
        session.send_queue,
        session.delivered
    );
    if session.paths.is_empty() {
        out.push_str("  (no paths)\n");
        return;
    }
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(session.paths.len() + 1);
    rows.push(PATH_COLUMNS.iter().map(|h| (*h).to_owned()).collect());
    rows.extend(session.paths.iter().map(path_row));
    let widths: Vec<usize> = (0..PATH_COLUMNS.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::from(" ");
        for (c, cell) in row.iter().enumerate() {
            line.push(' ');
            if LEFT_ALIGNED[c] {
                let _ = write!(line, "{cell:<width$}", width = widths[c]);
            } else {
                let _ = write!(line, "{cell:>width$}", width = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    render_streams(out, session);
    render_handshake_causes(out, session);
    render_counts(out, "send queue", &queue_drops(&session.send_queue_drops));
    render_counts(out, "paths", &path_events(&session.path_events));
    render_counts(out, "fec", &fec_counts(&session.fec));
    let sp = &session.sparse;
    render_counts(
        out,
        "sparse and pacing",
        &[
            ("unordered_sent", sp.unordered_sent),
            ("delivered_unordered", sp.delivered_unordered),
            ("spills_refused", sp.spills_refused),
        ],
    );
    render_path_changes(out, session);
    render_registration(out, session);
}

/// The registered path set (docs/protocol.md#registration): a header line, then one
/// line per path.
fn render_registration(out: &mut String, session: &SessionStatus) {
    let Some(r) = &session.registration else {
        return;
    };
    let server = match (r.server_seq, r.server_agrees) {
        (Some(n), Some(true)) => format!(", server holds #{n} (the same)"),
        (Some(n), _) => format!(", server holds #{n} (differs)"),
        _ => String::new(),
    };
    out.push_str(&format!(
        "registration: #{} (acknowledged #{}){server}\n",
        r.seq, r.acked
    ));
    for p in &r.paths {
        let mut line = format!(
            "  path {}: {} {} priority {}",
            p.id, p.link, p.cost, p.priority
        );
        if p.backup {
            line.push_str(" backup");
        }
        if !p.available {
            line.push_str(" link-down");
        }
        if let Some(local) = &p.local {
            line.push_str(&format!(" from {local}"));
        }
        if let Some(ms) = p.srtt_ms {
            line.push_str(&format!(" rtt {ms} ms"));
        }
        if let Some(loss) = p.loss_pct {
            line.push_str(&format!(" loss {loss:.2} %"));
        }
        if let Some(rate) = p.rate_mbit {
            line.push_str(&format!(" rate {} Mbit/s", fmt_rate(rate)));
        }
        out.push_str(&line);
        out.push('\n');
    }
}

/// The client's latest path changes, one line each, newest last.
fn render_path_changes(out: &mut String, session: &SessionStatus) {
    if session.path_changes.is_empty() {
        return;
    }
    out.push_str("path changes:\n");
    for c in &session.path_changes {
        let id = c.id.map_or(String::new(), |i| format!(" (id {i})"));
        let _ = writeln!(
            out,
            "  at {:.1} s: {}{id} {}: {}",
            c.at_s, c.path, c.event, c.why
        );
    }
}

/// `label: name n, name n` for the counts that are not zero; nothing if all are.
fn render_counts(out: &mut String, label: &str, counts: &[(&'static str, u64)]) {
    let shown: Vec<String> = counts
        .iter()
        .filter(|(_, n)| *n != 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(out, "{label}: {}", shown.join(", "));
    }
}

/// The send queue's drops and marks, named as in the metrics' `reason` label.
pub fn queue_drops(q: &QueueDrops) -> [(&'static str, u64); 3] {
    [
        ("codel_dropped", q.codel_dropped),
        ("ce_marked", q.ce_marked),
        ("overflow_dropped", q.overflow_dropped),
    ]
}

/// Packet-mode FEC counters, named as in the metrics' `event` label.
pub fn fec_counts(f: &FecCounters) -> [(&'static str, u64); 7] {
    [
        ("blocks", f.blocks),
        ("symbols_sent", f.symbols_sent),
        ("symbols_dropped", f.symbols_dropped),
        ("symbols_received", f.symbols_received),
        ("symbols_refused", f.symbols_refused),
        ("recovered", f.recovered),
        ("unrecovered", f.unrecovered),
    ]
}

/// Path events, named as in the metrics' `event` label.
pub fn path_events(p: &PathEvents) -> [(&'static str, u64); 10] {
    [
        ("validated", p.validated),
        ("validations_abandoned", p.validations_abandoned),
        ("withdrawn", p.withdrawn),
        ("restored", p.restored),
        ("withdrawn_ignored", p.withdrawn_ignored),
        ("opened", p.opened),
        ("closed", p.closed),
        ("refused", p.refused),
        ("registered", p.registrations),
        ("registration_refused", p.registrations_refused),
    ]
}

/// The client's handshakes by cause, once it has started any.
fn render_handshake_causes(out: &mut String, session: &SessionStatus) {
    let causes: Vec<String> = handshake_causes(&session.handshake_causes)
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|(cause, n)| format!("{cause} {n}"))
        .collect();
    if !causes.is_empty() {
        let _ = writeln!(
            out,
            "handshakes: {} completed; started by {}",
            session.handshakes,
            causes.join(", ")
        );
    }
}

/// Stream mode's line, once the session has had a stream: the streams' counters and each
/// path's congestion controller, window, bytes in flight, pacing rate and losses.
fn render_streams(out: &mut String, session: &SessionStatus) {
    let st = &session.streams;
    if st.opened == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  streams: {} open, {} opened, sent {}, retransmitted {}, read {}, {} reset",
        st.open,
        st.opened,
        human_bytes(st.bytes_sent),
        human_bytes(st.bytes_retransmitted),
        human_bytes(st.bytes_read),
        st.resets
    );
    for p in &session.paths {
        let _ = writeln!(
            out,
            "    path {} {}: {}cwnd {}, in flight {}, pacing {} Mbit/s, lost {} ({} late)",
            p.id,
            text(&p.name),
            p.controller
                .as_deref()
                .map_or_else(String::new, |c| format!("{c}, ")),
            human_bytes(p.cwnd_bytes),
            human_bytes(p.in_flight_bytes),
            opt(p.pacing_mbit, fmt_rate),
            p.lost_packets,
            p.late_packets
        );
    }
}

/// One path's cells, in [`PATH_COLUMNS`] order.
fn path_row(p: &PathStatus) -> Vec<String> {
    vec![
        p.id.to_string(),
        text(&p.name),
        path_state(p),
        opt(p.srtt_ms, fmt_ms),
        opt(p.min_rtt_ms, fmt_ms),
        opt(p.owd_ms, fmt_ms),
        opt(p.rate_mbit, fmt_rate),
        format!("{:.1}", p.loss * 100.0),
        human_bytes(p.tx_bytes),
        p.tx_packets.to_string(),
        human_bytes(p.rx_bytes),
        p.rx_packets.to_string(),
        p.remote.as_deref().map_or_else(|| MISSING.to_owned(), text),
    ]
}

/// The state cell: the state, why the path is handed over and its link's signal when
/// known (`active/handed-over:weak_signal/signal:12%`).
fn path_state(p: &PathStatus) -> String {
    let mut cell = p.state.clone();
    if let Some(why) = &p.handover {
        let _ = write!(cell, "/handed-over:{why}");
    }
    if let Some(signal) = p.signal {
        let _ = write!(cell, "/signal:{:.0}%", signal * 100.0);
    }
    text(&cell)
}

/// A text cell: `-` if empty, whitespace replaced so the cell stays one token.
fn text(s: &str) -> String {
    if s.is_empty() {
        MISSING.to_owned()
    } else {
        s.chars()
            .map(|c| if c.is_whitespace() { '_' } else { c })
            .collect()
    }
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| MISSING.to_owned(), f)
}

/// Milliseconds with one decimal.
fn fmt_ms(ms: f64) -> String {
    format!("{ms:.1}")
}

/// Mbit/s: two decimals below 10, one below 1000, none above.
fn fmt_rate(mbit: f64) -> String {
    if mbit.abs() < 10.0 {
        format!("{mbit:.2}")
    } else if mbit.abs() < 1000.0 {
        format!("{mbit:.1}")
    } else {
        format!("{mbit:.0}")
    }
}

/// The drops line: nonzero counters by reason, or `drops: none`.
fn render_drops(d: &DropCounters) -> String {
    let nonzero: Vec<String> = drop_reasons(d)
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    if nonzero.is_empty() {
        "drops: none".to_owned()
    } else {
        format!("drops: {}", nonzero.join(", "))
    }
}

/// Every drop counter with its reason name (the same names as the metrics' `reason`
/// label and the JSON fields).
pub fn drop_reasons(d: &DropCounters) -> [(&'static str, u64); 16] {
    [
        ("malformed", d.malformed),
        ("unknown_index", d.unknown_index),
        ("auth_failed", d.auth_failed),
        ("replayed", d.replayed),
        ("unknown_key", d.unknown_key),
        ("rate_limited", d.rate_limited),
        ("bad_mac", d.bad_mac),
        ("cookie_replied", d.cookie_replied),
        ("known_admitted", d.known_admitted),
        ("known_over_budget", d.known_over_budget),
        ("hinted", d.hinted),
        ("hint_ignored", d.hint_ignored),
        ("spoofed_source", d.spoofed_source),
        ("amplification_limited", d.amplification_limited),
        ("path_frames_ignored", d.path_frames_ignored),
        ("no_route", d.no_route),
    ]
}

/// Every handshake cause with its name (the same names as the metrics' `cause` label and
/// the JSON fields).
pub fn handshake_causes(c: &HandshakeCauses) -> [(&'static str, u64); 6] {
    [
        ("first", c.first),
        ("rekey", c.rekey),
        ("hint", c.hint),
        ("unanswered", c.unanswered),
        ("silence", c.silence),
        ("retry", c.retry),
    ]
}

/// A byte count in binary units: `0B`, `1023B`, `1.0KiB`, `1.5MiB`, `2.0GiB`, ...
/// One decimal above 1 KiB; the unit is chosen so the number stays below 1024 after
/// rounding.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1023.95 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1}{}", UNITS[unit])
}

/// A duration in seconds as `42s`, `5m07s`, `1h02m03s` or `3d04h05m`. Negative or
/// non-finite input prints as `-`.
pub fn human_duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return MISSING.to_owned();
    }
    // Saturating float-to-int conversion; sub-second precision is noise here.
    let t = secs as u64;
    let (d, h, m, s) = (t / 86_400, t / 3600 % 24, t / 60 % 60, t % 60);
    if d > 0 {
        format!("{d}d{h:02}h{m:02}m")
    } else if h > 0 {
        format!("{h}h{m:02}m{s:02}s")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StatusSnapshot {
        StatusSnapshot {
            role: "client".into(),
            version: "0.1.0".into(),
            uptime_s: 3723.4,
            tun: "plait0".into(),
            tun_mtu: 1380,
            sessions: vec![SessionStatus {
                peer: "server".into(),
                public_key: "AAAA".into(),
                established: true,
                session_id: 0xbeef,
                key_age_s: 65.0,
                handshakes: 2,
                scheduler: "minrtt".into(),
                reorder_depth: 3,
                send_queue: 1,
                delivered: 12345,
                queue_full: 0,
                lost: Default::default(),
                late: 0,
                streams: Default::default(),
                handshake_causes: crate::control::HandshakeCauses {
                    first: 1,
                    hint: 1,
                    ..Default::default()
                },
                send_queue_drops: crate::control::snapshot::QueueDrops {
                    codel_dropped: 7,
                    ce_marked: 3,
                    overflow_dropped: 0,
                },
                path_events: Default::default(),
                path_changes: Vec::new(),
                registration: None,
                fec: crate::control::snapshot::FecCounters {
                    blocks: 40,
                    symbols_sent: 52,
                    recovered: 11,
                    ..Default::default()
                },
                sparse: crate::control::snapshot::SparseCounters {
                    unordered_sent: 5,
                    delivered_unordered: 4,
                    spills_refused: 0,
                },
                paths: vec![
                    PathStatus {
                        id: 0,
                        name: "wifi".into(),
                        local: Some("192.168.1.10:40000".into()),
                        remote: Some("203.0.113.7:51820".into()),
                        state: "active".into(),
                        srtt_ms: Some(23.456),
                        min_rtt_ms: Some(20.0),
                        owd_ms: Some(0.0),
                        rate_mbit: Some(48.26),
                        loss: 0.012,
                        tx_bytes: 1_572_864,
                        tx_packets: 1200,
                        rx_bytes: 1023,
                        rx_packets: 7,
                        ..PathStatus::default()
                    },
                    PathStatus {
                        id: 1,
                        name: "lte".into(),
                        state: "probing".into(),
                        ..PathStatus::default()
                    },
                ],
            }],
            dropped: DropCounters::default(),
            relay: None,
            budgets: Vec::new(),
        }
    }

    fn table_lines(out: &str) -> Vec<&str> {
        out.lines().filter(|l| l.starts_with("  ")).collect()
    }

    #[test]
    fn header_line() {
        let out = render_table(&sample());
        assert_eq!(
            out.lines().next().unwrap(),
            "plait client 0.1.0  tun plait0 mtu 1380  up 1h02m03s"
        );
    }

    #[test]
    fn session_line() {
        let out = render_table(&sample());
        assert!(
            out.contains(
                "peer server: established  key age 1m05s  session 0000beef  scheduler minrtt  reorder 3  send queue 1  delivered 12345\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("\nhandshakes: 2 completed; started by first 1, hint 1\n"),
            "{out}"
        );
        assert!(
            out.contains("\nsend queue: codel_dropped 7, ce_marked 3\n"),
            "{out}"
        );
        assert!(
            out.contains("\nfec: blocks 40, symbols_sent 52, recovered 11\n"),
            "{out}"
        );
        assert!(!out.contains("\npaths:"), "no path events, no line: {out}");
        let mut s = sample();
        s.sessions[0].established = false;
        let out = render_table(&s);
        assert!(
            out.contains("peer server: handshaking  key age -  session 0000beef"),
            "{out}"
        );
    }

    #[test]
    fn the_registration_is_listed_with_each_path() {
        use crate::control::snapshot::{RegisteredPath, RegistrationStatus};
        let mut s = sample();
        s.sessions[0].registration = Some(RegistrationStatus {
            seq: 4,
            acked: 4,
            server_seq: Some(4),
            server_agrees: Some(true),
            paths: vec![
                RegisteredPath {
                    id: 0,
                    available: true,
                    backup: false,
                    link: "wired".into(),
                    cost: "unmetered".into(),
                    priority: 0,
                    local: Some("192.168.1.10:40000".into()),
                    srtt_ms: Some(21),
                    loss_pct: Some(0.25),
                    rate_mbit: Some(94.5),
                },
                RegisteredPath {
                    id: 1,
                    available: false,
                    backup: true,
                    link: "cellular".into(),
                    cost: "metered".into(),
                    priority: 2,
                    ..RegisteredPath::default()
                },
            ],
        });
        let out = render_table(&s);
        assert!(
            out.contains("registration: #4 (acknowledged #4), server holds #4 (the same)\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "  path 0: wired unmetered priority 0 from 192.168.1.10:40000 rtt 21 ms loss 0.25 % rate 94.5 Mbit/s\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("  path 1: cellular metered priority 2 backup link-down\n"),
            "{out}"
        );
    }

    #[test]
    fn stream_mode_lines_name_each_paths_controller() {
        let mut s = sample();
        s.sessions[0].streams.open = 1;
        s.sessions[0].streams.opened = 3;
        let path = &mut s.sessions[0].paths[0];
        path.controller = Some("adaptive (newreno, uncapped)".into());
        path.cwnd_bytes = 64 * 1024;
        path.in_flight_bytes = 32 * 1024;
        path.pacing_mbit = Some(12.5);
        let out = render_table(&s);
        assert!(out.contains("\n  streams: 1 open, 3 opened, "), "{out}");
        assert!(
            out.contains(
                "\n    path 0 wifi: adaptive (newreno, uncapped), cwnd 64.0KiB, in flight 32.0KiB, pacing 12.5 Mbit/s, lost 0 (0 late)\n"
            ),
            "{out}"
        );
        // A path without a controller (an older daemon's status) has no name there.
        assert!(out.contains("\n    path 1 lte: cwnd "), "{out}");
    }

    #[test]
    fn path_changes_are_listed_with_counts() {
        let mut s = sample();
        s.sessions[0].path_events.opened = 1;
        s.sessions[0].path_events.closed = 1;
        s.sessions[0].path_changes = vec![
            crate::control::snapshot::PathChange {
                at_s: 12.34,
                id: Some(2),
                path: "lte:wwan0".into(),
                event: "opened".into(),
                why: "wwan0 is up with a route to 198.51.100.1".into(),
            },
            crate::control::snapshot::PathChange {
                at_s: 80.0,
                id: Some(2),
                path: "lte:wwan0".into(),
                event: "closed".into(),
                why: "wwan0: interface gone".into(),
            },
        ];
        let out = render_table(&s);
        assert!(out.contains("\npaths: opened 1, closed 1\n"), "{out}");
        assert!(
            out.contains(
                "\npath changes:\n  at 12.3 s: lte:wwan0 (id 2) opened: wwan0 is up with a route to 198.51.100.1\n  at 80.0 s: lte:wwan0 (id 2) closed: wwan0: interface gone\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn column_headers_and_known_rows() {
        let out = render_table(&sample());
        let rows = table_lines(&out);
        assert_eq!(rows.len(), 3, "{out}");
        let header: Vec<&str> = rows[0].split_whitespace().collect();
        assert_eq!(header, PATH_COLUMNS);
        let row: Vec<&str> = rows[1].split_whitespace().collect();
        assert_eq!(
            row,
            [
                "0",
                "wifi",
                "active",
                "23.5",
                "20.0",
                "0.0",
                "48.3",
                "1.2",
                "1.5MiB",
                "1200",
                "1023B",
                "7",
                "203.0.113.7:51820"
            ]
        );
        let missing: Vec<&str> = rows[2].split_whitespace().collect();
        assert_eq!(
            missing,
            [
                "1", "lte", "probing", "-", "-", "-", "-", "0.0", "0B", "0", "0B", "0", "-"
            ]
        );
    }

    #[test]
    fn columns_are_aligned() {
        let out = render_table(&sample());
        let rows = table_lines(&out);
        // Right-aligned numeric columns end at the same offset on every row; the
        // left-aligned REMOTE column starts at the same offset.
        let end_of = |line: &str, token: &str| line.find(token).unwrap() + token.len();
        assert_eq!(end_of(rows[0], "RTT(ms)"), end_of(rows[1], "23.5"));
        assert_eq!(end_of(rows[0], "RTT(ms)"), end_of(rows[2], "  -"));
        assert_eq!(end_of(rows[0], " TX "), end_of(rows[1], "1.5MiB "));
        assert_eq!(rows[0].find("REMOTE"), rows[1].find("203.0.113.7"));
        for line in out.lines() {
            assert_eq!(line, line.trim_end(), "trailing whitespace");
        }
    }

    #[test]
    fn drops_line() {
        let out = render_table(&sample());
        assert!(out.ends_with("\ndrops: none\n"), "{out}");
        let mut s = sample();
        s.dropped.auth_failed = 3;
        s.dropped.no_route = 1;
        let out = render_table(&s);
        assert!(
            out.ends_with("\ndrops: auth_failed 3, no_route 1\n"),
            "{out}"
        );
    }

    #[test]
    fn no_sessions_and_no_paths() {
        let out = render_table(&StatusSnapshot::default());
        assert!(out.contains("no sessions\n"), "{out}");
        let mut s = sample();
        s.sessions[0].paths.clear();
        assert!(render_table(&s).contains("  (no paths)\n"));
    }

    #[test]
    fn human_bytes_edges() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1024), "1.0KiB");
        assert_eq!(human_bytes(1536), "1.5KiB");
        assert_eq!(human_bytes(1_572_864), "1.5MiB");
        assert_eq!(human_bytes(1024 * 1024 - 1), "1.0MiB");
        assert_eq!(human_bytes(3 << 30), "3.0GiB");
        assert_eq!(human_bytes(u64::MAX), "16.0EiB");
    }

    #[test]
    fn human_duration_forms() {
        assert_eq!(human_duration(0.0), "0s");
        assert_eq!(human_duration(42.9), "42s");
        assert_eq!(human_duration(307.0), "5m07s");
        assert_eq!(human_duration(3723.0), "1h02m03s");
        assert_eq!(human_duration(273_900.0), "3d04h05m");
        assert_eq!(human_duration(-1.0), "-");
        assert_eq!(human_duration(f64::NAN), "-");
    }

    #[test]
    fn odd_text_stays_one_token() {
        let mut s = sample();
        s.sessions[0].paths[1].name = "my path".into();
        s.sessions[0].paths[1].state = String::new();
        let out = render_table(&s);
        let rows = table_lines(&out);
        let row: Vec<&str> = rows[2].split_whitespace().collect();
        assert_eq!(&row[..3], ["1", "my_path", "-"]);
    }

    #[test]
    fn a_handed_over_path_shows_why() {
        let mut s = sample();
        s.sessions[0].paths[1].state = "active".into();
        s.sessions[0].paths[1].handover = Some("weak signal".into());
        s.sessions[0].paths[1].signal = Some(0.124);
        let out = render_table(&s);
        let rows = table_lines(&out);
        let row: Vec<&str> = rows[2].split_whitespace().collect();
        assert_eq!(row[2], "active/handed-over:weak_signal/signal:12%");
    }
}
