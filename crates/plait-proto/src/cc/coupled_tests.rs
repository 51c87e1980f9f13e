//! Scripted ACK and loss sequences through the coupled controllers (LIA, BALIA, mHIP), each
//! window checked against the formula of its RFC or paper worked by hand. MSS 1200 B; this
//! path's ACKs carry an SRTT of 50 ms.

use std::time::Duration;

use super::*;

const MSS: u64 = 1200;
const THIS: PathId = PathId(0);

fn ack(bytes: u64) -> Acked {
    Acked {
        bytes,
        srtt: Duration::from_millis(50),
        min_rtt: Duration::from_millis(40),
        bytes_in_flight: 0,
        app_limited: false,
        newest_sent: None,
        standing_queue: false,
        queue_delay_seen: Some(Duration::ZERO),
    }
}

fn ms(t: u64) -> Time {
    Time::from_millis(t)
}

fn path(id: u8, window: u64, srtt_ms: Option<u64>, usable: bool) -> CoupledPath {
    CoupledPath {
        id: PathId(id),
        window,
        srtt: srtt_ms.map(Duration::from_millis),
        usable,
        wants_drain_check: false,
    }
}

/// This path (with a stale window the controllers must not use), plus paths every coupled
/// sum must leave out: an unusable one and one without an RTT sample.
fn with_noise(peers: &[CoupledPath]) -> Vec<CoupledPath> {
    let mut v = vec![
        path(0, 999_999, Some(50), true),
        path(7, 1_000_000, Some(50), false),
        path(8, 1_000_000, None, true),
    ];
    v.extend_from_slice(peers);
    v
}

fn coupling(paths: &[CoupledPath]) -> Coupling<'_> {
    Coupling { this: THIS, paths }
}

/// A controller of `kind` cut once from the initial 12 000 B: in congestion avoidance at
/// 6 000 B (every one here halves when alone).
fn in_avoidance(kind: CongestionKind) -> AnyController {
    let mut cc = AnyController::new(kind, MSS);
    let alone = [path(0, 12_000, Some(50), true)];
    cc.on_congestion_event(ms(0), &coupling(&alone));
    assert_eq!(cc.window(), 6_000, "{kind:?}");
    cc
}

// ---- LIA (RFC 6356 §3) ----

#[test]
fn lia_alone_grows_as_newreno() {
    let mut cc = in_avoidance(CongestionKind::Lia);
    // One path: alpha = w·(w/r²)/(w/r)² = 1; min(b·mss/w, b·mss/w) = 6000·1200/6000 = 1200.
    let paths = with_noise(&[]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 7_200);
}

#[test]
fn lia_two_equal_paths_share_one_increase() {
    let mut cc = in_avoidance(CongestionKind::Lia);
    // Peer 6 000 B at 50 ms: total = 12 000; alpha = 12 000·(6 000/r²)/(12 000/r)² = 0.5.
    // Increase = min(0.5·6 000·1 200/12 000, 6 000·1 200/6 000) = min(300, 1 200) = 300.
    let paths = with_noise(&[path(1, 6_000, Some(50), true)]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 6_300);
}

#[test]
fn lia_asymmetric_paths() {
    let mut cc = in_avoidance(CongestionKind::Lia);
    // Own 6 000 B / 0.05 s, peer 24 000 B / 0.1 s. w/r²: 2.4e6 and 2.4e6 (max 2.4e6);
    // Σ w/r = 120 000 + 240 000 = 360 000; total = 30 000.
    // alpha = 30 000·2.4e6/360 000² = 0.5556; increase = 0.5556·6 000·1 200/30 000 = 133.33.
    let paths = with_noise(&[path(1, 24_000, Some(100), true)]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 6_133);
}

#[test]
fn lia_increase_is_capped_by_newreno() {
    let mut cc = in_avoidance(CongestionKind::Lia);
    // Peer 2 400 B at 5 ms: w/r² = 9.6e7 (max); Σ w/r = 120 000 + 480 000 = 600 000;
    // total 8 400; alpha = 8 400·9.6e7/3.6e11 = 2.24 > total/w = 1.4, so the coupled term
    // (2.24·6 000·1 200/8 400 = 1 920) exceeds NewReno's 1 200: the cap applies.
    let paths = with_noise(&[path(1, 2_400, Some(5), true)]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 7_200);
}

#[test]
fn lia_slow_start_halving_and_undo_as_newreno() {
    let mut cc = AnyController::new(CongestionKind::Lia, MSS);
    let paths = with_noise(&[path(1, 50_000, Some(10), true)]);
    cc.on_ack(ms(10), &ack(12_000), &coupling(&paths));
    assert_eq!(cc.window(), 24_000, "slow start ignores the coupling");
    cc.on_congestion_event(ms(20), &coupling(&paths));
    assert_eq!(cc.window(), 12_000);
    cc.on_spurious_congestion(ms(30));
    assert_eq!(cc.window(), 24_000);
    cc.on_persistent_congestion(ms(40));
    assert_eq!(cc.window(), min_window(MSS));
}

// ---- BALIA (Peng et al., ToN 2016; Linux mptcp_balia.c) ----

#[test]
fn balia_alone_grows_as_newreno() {
    let mut cc = in_avoidance(CongestionKind::Balia);
    // alpha = 1: x/(rtt·x²)·1·1·b·mss = b·mss/w = 6 000·1 200/6 000 = 1 200.
    let paths = with_noise(&[]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 7_200);
}

#[test]
fn balia_two_equal_paths() {
    let mut cc = in_avoidance(CongestionKind::Balia);
    // x = 6 000/0.05 = 120 000 B/s on both; alpha = 1; Σx = 240 000.
    // gain = 120 000/(0.05·240 000²)·1·1 = 4.1667e-8; ·6 000·1 200 = 300.
    let paths = with_noise(&[path(1, 6_000, Some(50), true)]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 6_300);
}

#[test]
fn balia_slower_path_gets_the_alpha_boost() {
    let mut cc = in_avoidance(CongestionKind::Balia);
    // x_r = 120 000 B/s; peer x = 24 000/0.1 = 240 000 B/s; alpha_r = 2; Σx = 360 000.
    // gain = 120 000/(0.05·360 000²)·(3/2)·(6/5) = 1.85185e-5·1.8 = 3.3333e-5;
    // ·6 000·1 200 = 240 (NewReno would add 1 200, LIA 133).
    let paths = with_noise(&[path(1, 24_000, Some(100), true)]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 6_240);
}

#[test]
fn balia_decrease_scales_with_alpha_up_to_one_and_a_half() {
    // At 12 000 B / 50 ms (x = 240 000 B/s; the RTT comes from the coupling's entry for
    // this path, no ACK having been seen).
    let own = path(0, 12_000, Some(50), true);
    // Peer x = 24 000/0.1 = 240 000: alpha = 1, w −= 6 000·1 → 6 000.
    let mut cc = AnyController::new(CongestionKind::Balia, MSS);
    let paths = [own, path(1, 24_000, Some(100), true)];
    cc.on_congestion_event(ms(0), &coupling(&paths));
    assert_eq!(cc.window(), 6_000);
    // Peer x = 30 000/0.1 = 300 000: alpha = 1.25, w −= 6 000·1.25 = 7 500 → 4 500.
    let mut cc = AnyController::new(CongestionKind::Balia, MSS);
    let paths = [own, path(1, 30_000, Some(100), true)];
    cc.on_congestion_event(ms(0), &coupling(&paths));
    assert_eq!(cc.window(), 4_500);
    // Peer x = 48 000/0.1 = 480 000: alpha = 2, capped at 1.5: w −= 9 000 → 3 000.
    let mut cc = AnyController::new(CongestionKind::Balia, MSS);
    let paths = [own, path(1, 48_000, Some(100), true)];
    cc.on_congestion_event(ms(0), &coupling(&paths));
    assert_eq!(cc.window(), 3_000);
    // The cut was spurious: back to 12 000.
    cc.on_spurious_congestion(ms(10));
    assert_eq!(cc.window(), 12_000);
    // From the minimum (x_r = 2 400/0.05 = 48 000, alpha = 10, capped 1.5): 2 400 − 1 800
    // = 600, held at the floor.
    cc.on_persistent_congestion(ms(20));
    cc.on_congestion_event(ms(30), &coupling(&paths));
    assert_eq!(cc.window(), min_window(MSS));
}

#[test]
fn balia_uses_the_last_ack_rtt_on_a_loss() {
    // The ACK's SRTT (50 ms) wins over the coupling's stale 500 ms entry for this path.
    let mut cc = AnyController::new(CongestionKind::Balia, MSS);
    let stale = [
        path(0, 12_000, Some(500), true),
        path(1, 24_000, Some(100), true),
    ];
    cc.on_ack(
        ms(10),
        &Acked {
            app_limited: true,
            newest_sent: None,
            standing_queue: false,
            queue_delay_seen: Some(Duration::ZERO),
            ..ack(1_200)
        },
        &coupling(&stale),
    );
    assert_eq!(cc.window(), 12_000, "app-limited: no growth");
    // x_r = 12 000/0.05 = 240 000 = peer's: alpha = 1, halve. (With 500 ms: alpha = 10,
    // capped 1.5 → 3 000.)
    cc.on_congestion_event(ms(20), &coupling(&stale));
    assert_eq!(cc.window(), 6_000);
}

// ---- mHIP two-level control (seed mHIP §IV-B, §IV-D) ----

/// For mHIP every usable path counts (with or without an RTT): this path's stale entry,
/// an unusable path (left out), and `peers`.
fn mhip_paths(peers: &[CoupledPath]) -> Vec<CoupledPath> {
    let mut v = vec![
        path(0, 999_999, Some(50), true),
        path(7, 1_000_000, Some(5), false),
    ];
    v.extend_from_slice(peers);
    v
}

#[test]
fn mhip_alone_grows_as_one_tcp() {
    let mut cc = in_avoidance(CongestionKind::Mhip);
    // G = 6 000 (this path only): 6 000·1 200/6 000 = 1 200.
    let paths = mhip_paths(&[]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 7_200);
}

#[test]
fn mhip_global_window_grows_as_one_tcp_across_paths() {
    let mut cc = in_avoidance(CongestionKind::Mhip);
    // G = 6 000 + 6 000 (the peer has no RTT sample yet but its window is in use) = 12 000.
    // Increase = min(6 000·1 200/12 000, 6 000·1 200/6 000) = 600: each path acknowledging
    // its window adds 600, the global window one datagram per round trip.
    let paths = mhip_paths(&[path(1, 6_000, None, true)]);
    cc.on_ack(ms(100), &ack(6_000), &coupling(&paths));
    assert_eq!(cc.window(), 6_600);
    // Three more paths of 6 000: G = 30 600; 6 600·1 200/30 600 = 258.8 → 6 858.8.
    let paths = mhip_paths(&[
        path(1, 6_000, None, true),
        path(2, 6_000, Some(10), true),
        path(3, 12_000, Some(90), true),
    ]);
    cc.on_ack(ms(200), &ack(6_600), &coupling(&paths));
    assert_eq!(cc.window(), 6_858);
}

#[test]
fn mhip_sum_of_windows_is_capped() {
    let mut cc = AnyController::new(CongestionKind::Mhip, MSS);
    // Slow start, but the other paths hold MAX_WINDOW − 20 000: room for 8 000 more here.
    let paths = mhip_paths(&[path(1, MAX_WINDOW - 20_000, Some(50), true)]);
    cc.on_ack(ms(100), &ack(12_000), &coupling(&paths));
    assert_eq!(cc.window(), 20_000);
    // No room left: no growth.
    cc.on_ack(ms(200), &ack(12_000), &coupling(&paths));
    assert_eq!(cc.window(), 20_000);
}

#[test]
fn mhip_loss_halves_only_this_path_and_addr_undo_restores_it() {
    let mut cc = AnyController::new(CongestionKind::Mhip, MSS);
    // Shortest SRTT among usable paths: 30 ms (the unusable path's 5 ms does not count).
    let paths = mhip_paths(&[path(1, 6_000, Some(30), true)]);
    cc.on_congestion_event(ms(100), &coupling(&paths));
    assert_eq!(cc.window(), 6_000, "cwnd and ssthresh halved");
    // Acknowledged 25 ms after the cut, within ADDR (< 30 ms): back to 12 000 and to
    // ssthresh = ∞, so the next ACK is slow start again (+1 200).
    cc.on_spurious_congestion(ms(125));
    assert_eq!(cc.window(), 12_000);
    cc.on_ack(ms(130), &ack(1_200), &coupling(&paths));
    assert_eq!(cc.window(), 13_200);
    // Cut again at 200 ms; the evidence comes 30 ms later, not within ADDR: the cut stays.
    cc.on_congestion_event(ms(200), &coupling(&paths));
    assert_eq!(cc.window(), 6_600);
    cc.on_spurious_congestion(ms(230));
    assert_eq!(cc.window(), 6_600);
    // Congestion avoidance after the kept cut: G = 6 600 + 6 000; +6 600·1 200/12 600.
    cc.on_ack(ms(240), &ack(6_600), &coupling(&paths));
    assert_eq!(cc.window(), 7_228);
}

#[test]
fn mhip_without_any_rtt_keeps_the_cut() {
    let mut cc = AnyController::new(CongestionKind::Mhip, MSS);
    let paths = [path(0, 12_000, None, true), path(1, 6_000, None, true)];
    cc.on_congestion_event(ms(100), &coupling(&paths));
    cc.on_spurious_congestion(ms(101));
    assert_eq!(cc.window(), 6_000, "ADDR unknown");
    cc.on_persistent_congestion(ms(200));
    assert_eq!(cc.window(), min_window(MSS));
}

#[test]
fn mhip_through_path_congestion_undo() {
    // The wrapper's undo evidence arriving within ADDR (10 ms after the loss, SRTT 50 ms).
    let mut cc = PathCongestion::new(CongestionKind::Mhip, MSS);
    let paths = mhip_paths(&[]);
    cc.on_lost(ms(100), 1, ms(60), u64::MAX, &coupling(&paths));
    assert_eq!(cc.window(), 6_000);
    cc.on_ack(ms(110), &ack(0), 1, &coupling(&paths));
    assert_eq!(cc.window(), 12_000);
    assert_eq!(cc.counters(), (1, 1));
}
