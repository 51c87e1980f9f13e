//! The `cmt-sctp` baseline on scripted inputs (SACKs written by hand, numbers worked out in
//! the comments), and end to end over two equal lossless paths.

use plait_proto::Time;

use super::{CmtConfig, CmtCore, CmtReceiverCore};
use crate::packet::{CmtData, CmtSack};
use crate::run::run_one;
use crate::scenario::Scenario;

fn config(paths: usize, initial_cwnd: u32, rwnd: u32) -> CmtConfig {
    CmtConfig {
        paths,
        initial_cwnd,
        rwnd,
        ..CmtConfig::default()
    }
}

fn drain(core: &mut CmtCore) -> Vec<CmtData> {
    std::iter::from_fn(|| core.poll_send()).collect()
}

fn sack(next_expected: u64, gaps: &[(u64, u64)]) -> CmtSack {
    CmtSack {
        next_expected,
        gaps: gaps.to_vec(),
    }
}

const T: Time = Time::from_nanos(1_000_000);

#[test]
fn a_chunk_is_retransmitted_only_after_three_missing_reports() {
    // One path, cwnd 10: TSNs 0..10 leave at the start.
    let mut c = CmtCore::new(config(1, 10, 100));
    c.start(Time::ZERO);
    let first = drain(&mut c);
    assert_eq!(
        first.iter().map(|d| d.tsn).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    // TSN 0 is missing; 1, then 2, then 3 arrive. Each SACK newly acknowledges one TSN
    // above 0, so each is one missing report for 0 (HTNA).
    for (k, top) in [1u64, 2].into_iter().enumerate() {
        c.on_sack(T, &sack(0, &[(1, top)]));
        let sent = drain(&mut c);
        assert!(
            sent.iter().all(|d| !d.retransmit),
            "report {} retransmitted: {sent:?}",
            k + 1
        );
    }
    c.on_sack(T, &sack(0, &[(1, 3)]));
    let sent = drain(&mut c);
    assert_eq!(sent.first().map(|d| (d.tsn, d.retransmit)), Some((0, true)));
    assert_eq!(c.stats().fast_retransmits, 1);
    // A duplicate SACK (nothing newly acknowledged) is no report: 4 stays unmarked.
    let mut c = CmtCore::new(config(1, 10, 100));
    c.start(Time::ZERO);
    drain(&mut c);
    for _ in 0..5 {
        c.on_sack(T, &sack(0, &[(1, 1)]));
    }
    assert_eq!(c.stats().fast_retransmits, 0);
}

#[test]
fn reordering_without_loss_is_not_retransmitted_before_three_reports() {
    let mut c = CmtCore::new(config(1, 10, 100));
    c.start(Time::ZERO);
    drain(&mut c);
    c.on_sack(T, &sack(0, &[(1, 1)]));
    c.on_sack(T, &sack(0, &[(1, 2)]));
    // TSN 0 arrives late, after two reports: the cumulative ack covers 0..=2.
    c.on_sack(T, &sack(3, &[]));
    let sent = drain(&mut c);
    assert!(sent.iter().all(|d| !d.retransmit), "{sent:?}");
    assert_eq!((c.cumulative(), c.stats().retransmissions), (3, 0));
}

#[test]
fn the_receive_window_blocks_the_sender_behind_a_hole() {
    // cwnd 10 but a 4-packet buffer: only TSNs 0..4 may leave.
    let mut c = CmtCore::new(config(1, 10, 4));
    c.start(Time::ZERO);
    assert_eq!(drain(&mut c).len(), 4);
    // 1, 2, 3 arrive, 0 does not: the window has room but the buffer does not.
    c.on_sack(T, &sack(0, &[(1, 1)]));
    c.on_sack(T, &sack(0, &[(1, 2)]));
    assert!(drain(&mut c).is_empty());
    c.on_sack(T, &sack(0, &[(1, 3)]));
    let sent = drain(&mut c);
    // The third report marks 0 lost: its retransmission is all that leaves.
    assert_eq!(
        sent.iter()
            .map(|d| (d.tsn, d.retransmit))
            .collect::<Vec<_>>(),
        vec![(0, true)]
    );
    assert_eq!(c.next_tsn(), 4);
    assert!(c.stats().rwnd_blocked > 0);
    // 0 arrives: the cumulative point moves to 4 and four new TSNs leave.
    c.on_sack(T, &sack(4, &[]));
    assert_eq!(
        drain(&mut c).iter().map(|d| d.tsn).collect::<Vec<_>>(),
        vec![4, 5, 6, 7]
    );
}

#[test]
fn a_loss_halves_only_the_window_of_the_path_it_was_sent_on() {
    // Two paths, cwnd 10 each, ssthresh 100 (the buffer): round-robin puts even TSNs on
    // path 0 and odd ones on path 1.
    let mut c = CmtCore::new(config(2, 10, 100));
    c.start(Time::ZERO);
    let sent = drain(&mut c);
    assert!(
        sent.iter().all(|d| u64::from(d.path) == d.tsn % 2),
        "{sent:?}"
    );
    // TSN 0 (path 0) is lost. SACKs newly acknowledge 1 (path 1 -> cwnd 11), 2 (path 0 ->
    // 11), 3 (path 1 -> 12), each one missing report for 0; the third marks it lost.
    c.on_sack(T, &sack(0, &[(1, 1)]));
    c.on_sack(T, &sack(0, &[(1, 2)]));
    assert_eq!((c.cwnd(0), c.cwnd(1)), (Some(11.0), Some(11.0)));
    drain(&mut c);
    c.on_sack(T, &sack(0, &[(1, 3)]));
    // Path 0: ssthresh = max(11 / 2, 4) = 5.5 and cwnd = 5.5; path 1 keeps its 12.
    assert_eq!((c.cwnd(0), c.cwnd(1)), (Some(5.5), Some(12.0)));
    // RTX-CWND: the retransmission takes the path with the larger window.
    let rtx = drain(&mut c);
    assert_eq!(
        rtx.first().map(|d| (d.tsn, d.retransmit, d.path)),
        Some((0, true, 1))
    );
    // A second loss on path 0 within the same window does not cut again (fast recovery).
    c.on_sack(T, &sack(0, &[(1, 4), (6, 8)]));
    c.on_sack(T, &sack(0, &[(1, 4), (6, 9)]));
    c.on_sack(T, &sack(0, &[(1, 4), (6, 10)]));
    assert!(c.stats().fast_retransmits >= 2);
    assert_eq!(c.cwnd(0), Some(5.5));
}

#[test]
fn a_timeout_collapses_its_path_and_resends_what_it_carried() {
    let mut c = CmtCore::new(config(2, 4, 100));
    c.start(Time::ZERO);
    assert_eq!(drain(&mut c).len(), 8);
    // Nothing comes back: both timers (initial RTO 3 s) expire.
    let due = c.next_timeout().expect("timers run with data outstanding");
    assert_eq!(due, Time::from_nanos(3_000_000_000));
    c.on_timeout(due);
    assert_eq!((c.cwnd(0), c.cwnd(1)), (Some(1.0), Some(1.0)));
    let sent = drain(&mut c);
    assert_eq!(
        sent.iter()
            .map(|d| (d.tsn, d.retransmit))
            .collect::<Vec<_>>(),
        vec![(0, true), (1, true)]
    );
    assert_eq!(c.stats().timeouts, 2);
}

#[test]
fn a_sack_beyond_what_was_sent_is_clamped() {
    let mut c = CmtCore::new(config(2, 2, 64));
    c.start(Time::ZERO);
    drain(&mut c);
    c.on_sack(T, &sack(1_000, &[(2_000, u64::MAX), (u64::MAX, 5)]));
    assert_eq!(c.cumulative(), 4);
}

#[test]
fn the_receiver_reports_gaps_and_drops_beyond_its_buffer() {
    let mut r = CmtReceiverCore::new(4, 16);
    assert_eq!(r.on_data(1), (0, sack(0, &[(1, 1)])));
    assert_eq!(r.on_data(2), (0, sack(0, &[(1, 2)])));
    // 4 would need a fifth slot (0..4 is the buffer): dropped, still SACKed.
    assert_eq!(r.on_data(4), (0, sack(0, &[(1, 2)])));
    assert_eq!(r.on_data(3).1, sack(0, &[(1, 3)]));
    assert_eq!(r.on_data(0), (4, sack(4, &[])));
    assert_eq!(r.on_data(2).0, 0);
    let st = r.stats();
    assert_eq!(
        (st.received, st.delivered, st.duplicates, st.dropped_full),
        (6, 4, 1, 1)
    );
    // Gap blocks are capped, lowest first.
    let mut r = CmtReceiverCore::new(100, 2);
    for t in [2, 4, 6, 8] {
        r.on_data(t);
    }
    assert_eq!(r.sack(), sack(0, &[(2, 2), (4, 4)]));
}

#[test]
fn fills_two_equal_lossless_paths() {
    let text = r#"
name = "cmt two equal paths"
duration_s = 20
[tcp]
window = 1000
packet_size = 1000
[server_proxy]
rate_mbps = 100
delay_ms = 1
[[paths]]
rate_kbps = 5000
wired_rate_mbps = 100
wired_delay_ms = 1
wireless_delay_ms = 14
[[paths]]
rate_kbps = 5000
wired_rate_mbps = 100
wired_delay_ms = 1
wireless_delay_ms = 14
[[runs]]
name = "cmt"
mode = "cmt-sctp"
"#;
    let s = Scenario::from_toml(text).expect("valid");
    let r = run_one(&s, &s.runs[0], 1);
    // Deterministic: the same seed gives the same result.
    assert_eq!(r, run_one(&s, &s.runs[0], 1));
    assert!(r.goodput_kbps >= 0.9 * 10_000.0, "{r:?}");
    // Both paths carry their share.
    assert!(r.per_path_kbps.iter().all(|k| *k >= 0.9 * 5000.0), "{r:?}");
}
