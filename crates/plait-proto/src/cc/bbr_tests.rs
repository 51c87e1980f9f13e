//! Scripted ACK sequences through [`Bbr`], every number worked by hand. Common figures:
//! MSS 1200 B; min RTT (RTprop) 100 ms; HIGH_GAIN = 2/ln 2 = 2.885390; DRAIN_GAIN =
//! 1/2.885390 = 0.346574. Unless a test says otherwise the controller allows no ACK
//! aggregation (`with_ack_aggregation(MSS, 0)`, so a delivery-rate window spans RTprop
//! alone), an ACK reports 0 bytes in flight, so every ACK ends a round (a round ends once
//! the bytes in flight at its start are acknowledged), and ACKs come one RTprop apart, so
//! every ACK after the first closes a delivery-rate interval: sample = bytes of the ACK /
//! 0.1 s.

use std::time::Duration;

use super::bbr::{ACK_EVERY_DATAGRAMS, CWND_GAIN, DRAIN_GAIN, HIGH_GAIN};
use super::*;

const MSS: u64 = 1200;

fn none() -> Coupling<'static> {
    Coupling {
        this: PathId(0),
        paths: &[],
    }
}

fn ms(t: u64) -> Time {
    Time::from_millis(t)
}

fn acked(bytes: u64, bytes_in_flight: u64, app_limited: bool) -> Acked {
    Acked {
        bytes,
        srtt: Duration::from_millis(120),
        min_rtt: Duration::from_millis(100),
        bytes_in_flight,
        app_limited,
        newest_sent: None,
        standing_queue: false,
        queue_delay_seen: Some(Duration::ZERO),
    }
}

fn ack(cc: &mut Bbr, t: u64, bytes: u64, bytes_in_flight: u64) {
    cc.on_ack(ms(t), &acked(bytes, bytes_in_flight, false), &none());
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[track_caller]
fn assert_close(a: f64, b: f64) {
    assert!(close(a, b), "{a} != {b}");
}

#[track_caller]
fn assert_rate(cc: &Bbr, rate: f64) {
    let r = cc.pacing_rate().expect("a pacing rate");
    assert_close(r, rate);
}

/// Startup over a 1 MB/s bottleneck (BDP 100 000 B), through Drain into ProbeBW at 900 ms.
/// Returns the controller in ProbeBW phase 0 (begun at 900 ms), round 8, with 1 MB/s
/// samples in rounds 5 to 8, every later ACK ending a round, the newest snapshot of the
/// delivery count at 900 ms (with no send time).
fn to_probe_bw() -> Bbr {
    let mut cc = Bbr::with_ack_aggregation(MSS, Duration::ZERO);
    assert_eq!(cc.mode(), BbrMode::Startup);
    assert_eq!(cc.window(), 12_000, "initial window: 10 datagrams");
    assert_eq!(cc.pacing_rate(), None);

    // 100 ms: round 1; opens the first interval (delivered 12 000); no sample yet, so the
    // initial window and no pacing rate.
    ack(&mut cc, 100, 12_000, 0);
    assert_eq!((cc.rounds(), cc.bandwidth()), (1, 0.0));
    assert_eq!(cc.window(), 12_000);
    assert_eq!(cc.pacing_rate(), None);

    // 200 ms: 24 000 B in 0.1 s = 240 000 B/s. full_bw 0 → 240 000 (grew), count 0.
    // Target 2.885390 × 240 000 × 0.1 = 69 249.4; Startup grows by the bytes acked:
    // min(12 000 + 24 000, 69 249.4) = 36 000. Pacing 2.885390 × 240 000 = 692 493.6.
    ack(&mut cc, 200, 24_000, 0);
    assert_close(cc.bandwidth(), 240_000.0);
    assert_eq!(cc.window(), 36_000);
    assert_rate(&cc, HIGH_GAIN * 240_000.0);

    // 300 ms: 480 000 B/s ≥ 1.25 × 240 000 = 300 000: grew. Window min(84 000, 138 498.7).
    ack(&mut cc, 300, 48_000, 0);
    assert_close(cc.bandwidth(), 480_000.0);
    assert_eq!(cc.window(), 84_000);

    // 400 ms: 960 000 B/s ≥ 600 000: grew, full_bw 960 000. Window min(180 000, 276 997.4).
    ack(&mut cc, 400, 96_000, 0);
    assert_close(cc.bandwidth(), 960_000.0);
    assert_eq!(cc.window(), 180_000);

    // 500 ms: the bottleneck: 1 000 000 B/s < 1.25 × 960 000 = 1 200 000: count 1.
    // Target 2.885390 × 1 000 000 × 0.1 = 288 539.0; window min(280 000, 288 539.0).
    ack(&mut cc, 500, 100_000, 0);
    assert_close(cc.bandwidth(), 1_000_000.0);
    assert_eq!(cc.window(), 280_000);
    assert_eq!(cc.mode(), BbrMode::Startup);

    // 600 ms: count 2; window min(380 000, 288 539.0) = 288 539.
    ack(&mut cc, 600, 100_000, 0);
    assert_eq!(cc.window(), 288_539);
    assert_eq!(cc.mode(), BbrMode::Startup);

    // 700 ms: count 3: the pipe is full → Drain. 200 000 B in flight > BDP 100 000: stays.
    // Drain keeps cwnd gain 2/ln 2: window 288 539; pacing 1 000 000 / 2.885390.
    // The round ends at delivered 480 000 + 200 000 = 680 000.
    ack(&mut cc, 700, 100_000, 200_000);
    assert_eq!(cc.rounds(), 7);
    assert_eq!(cc.mode(), BbrMode::Drain);
    assert_eq!(cc.window(), 288_539);
    assert_rate(&cc, DRAIN_GAIN * 1_000_000.0);

    // 800 ms: delivered 580 000 < 680 000 (same round); 150 000 in flight > 100 000.
    ack(&mut cc, 800, 100_000, 150_000);
    assert_eq!((cc.rounds(), cc.mode()), (7, BbrMode::Drain));

    // 900 ms: delivered 680 000: round 8 (ending at the next ACK: 0 in flight). 0 in flight
    // ≤ BDP 100 000 → ProbeBW, first phase 1.25. Window 2 × 100 000 = 200 000; pacing
    // 1.25 × 1 000 000.
    ack(&mut cc, 900, 100_000, 0);
    assert_eq!(cc.rounds(), 8);
    assert_eq!(cc.mode(), BbrMode::ProbeBw { phase: 0 });
    assert_eq!(cc.window(), 200_000);
    assert_rate(&cc, 1_250_000.0);
    assert_close(cc.bandwidth(), 1_000_000.0);
    cc
}

#[test]
fn startup_grows_the_estimate_then_drains_then_probes() {
    to_probe_bw();
}

/// An ACK at `t` ms of `bytes` whose newest datagram was sent at `sent` ms.
fn ack_sent(cc: &mut Bbr, t: u64, bytes: u64, sent: u64) {
    let a = Acked {
        newest_sent: Some(ms(sent)),
        standing_queue: false,
        queue_delay_seen: Some(Duration::ZERO),
        ..acked(bytes, 0, false)
    };
    cc.on_ack(ms(t), &a, &none());
}

#[test]
fn acks_bunched_by_a_stall_are_not_read_as_a_faster_bottleneck() {
    // ProbeBW at 1 MB/s (data leaves at 1 MB/s, ACKs come one-way 100 ms after sending).
    let mut cc = to_probe_bw();
    // 1000 ms: acknowledges what was sent up to 900 ms; samples since the snapshot at 900
    // (which has no send time, so over the ACK interval: 100 000 / 0.1 s, the estimate) and
    // takes one at 1000 ms, newest send time 900 ms.
    ack_sent(&mut cc, 1000, 100_000, 900);
    assert_close(cc.bandwidth(), 1_000_000.0);
    // 1100 ms: the receiver stalled: this ACK covers only what was sent up to 950 ms
    // (50 000 B / max(0.1, 0.05) s = 500 000 B/s, below the estimate). Snapshot at 1100
    // ms, newest send time 950 ms.
    ack_sent(&mut cc, 1100, 50_000, 950);
    assert_close(cc.bandwidth(), 1_000_000.0);
    // 1200 ms: the receiver caught up: everything sent up to 1100 ms, 150 000 B since the
    // snapshot at 1100 ms. Over the ACK interval alone that is 1.5 MB/s (window 300 000);
    // over the send interval, 150 ms, the bottleneck's 1 MB/s. (ACKs one RTprop apart: this
    // tests the send interval, not the sliding window; the next test does that.)
    ack_sent(&mut cc, 1200, 150_000, 1100);
    assert_close(cc.bandwidth(), 1_000_000.0);
    assert_eq!(cc.window(), 200_000);
}

#[test]
fn a_probe_phase_between_sample_boundaries_is_still_seen() {
    // ProbeBW at 1 MB/s on a path with room for more; one ACK every 10 ms, each for the
    // data sent 100 ms (one RTT) before it. Sent from 1050 to 1150 ms at 1.25 MB/s (the
    // probe), from 1150 to 1250 ms at 0.75, else at 1. Disjoint 100 ms intervals from
    // 900 ms see at most 1.125 MB/s (half probe, half not); a window sliding with the ACKs
    // lines up with the probe (the ACKs from 1160 to 1250 ms) and sees 1.25 MB/s. A round
    // is about 100 ms of deliveries, so the filter still holds the probe's sample at 1300.
    let mut cc = to_probe_bw();
    let rate = |sent: u64| match sent {
        1050..1150 => 1_250_000,
        1150..1250 => 750_000,
        _ => 1_000_000,
    };
    let mut best: f64 = 0.0;
    for t in (910..=1300).step_by(10) {
        let sent = t - 100;
        let a = Acked {
            newest_sent: Some(ms(sent)),
            standing_queue: false,
            queue_delay_seen: Some(Duration::ZERO),
            ..acked(rate(sent - 10) / 100, 100_000, false)
        };
        cc.on_ack(ms(t), &a, &none());
        best = best.max(cc.bandwidth());
    }
    assert_close(best, 1_250_000.0);
    assert_close(cc.bandwidth(), 1_250_000.0);
}

#[test]
fn a_probe_lasting_one_rtprop_is_seen_through_one_ack_interval() {
    // The engine's controller (`Bbr::new`: the peer acknowledges after 16 datagrams of
    // 1 200 B or 25 ms): at 1 MB/s one ACK interval is 19.2 ms, so a window spans at least
    // 119.2 ms. One ACK every 10 ms for the data sent 100 ms before it, sent at 1.25 MB/s
    // from 1050 to 1150 ms, else at 1 MB/s: the best window (120 ms, the ACKs' grid) holds
    // the whole probe and 20 ms at 1 MB/s, (125 000 + 20 000) / 0.12 = 1 208 333 B/s
    // (disjoint windows of one RTprop: at most 1.125 MB/s; a window of RTprop plus the whole
    // 25 ms delay: 1.2 MB/s, and less on shorter paths).
    let mut cc = Bbr::new(MSS);
    let rate = |sent: u64| match sent {
        1050..1150 => 1_250_000,
        _ => 1_000_000,
    };
    let mut best: f64 = 0.0;
    for t in (110..=1400).step_by(10) {
        let sent = t - 100;
        let a = Acked {
            newest_sent: Some(ms(sent)),
            ..acked(rate(sent - 10) / 100, 100_000, false)
        };
        cc.on_ack(ms(t), &a, &none());
        best = best.max(cc.bandwidth());
    }
    assert_close(best, 145_000.0 / 0.12);
}

#[test]
fn startup_does_not_exit_on_app_limited_rounds() {
    let mut cc = Bbr::with_ack_aggregation(MSS, Duration::ZERO);
    // 240 000 B/s at 200 ms (full_bw 240 000), then a plateau of app-limited rounds at
    // the same rate: not counted toward the exit (draft §4.3.2.2), so still Startup.
    ack(&mut cc, 100, 12_000, 0);
    ack(&mut cc, 200, 24_000, 0);
    for t in [300, 400, 500, 600, 700] {
        cc.on_ack(ms(t), &acked(24_000, 0, true), &none());
    }
    assert_eq!(cc.mode(), BbrMode::Startup);
    // The same plateau not app-limited: counts 1, 2, 3 → Drain at the third (0 in flight
    // ≤ BDP 24 000 → straight on to ProbeBW in the same ACK).
    ack(&mut cc, 800, 24_000, 0);
    ack(&mut cc, 900, 24_000, 0);
    assert_eq!(cc.mode(), BbrMode::Startup);
    ack(&mut cc, 1000, 24_000, 0);
    assert_eq!(cc.mode(), BbrMode::ProbeBw { phase: 0 });
}

#[test]
fn a_queue_ends_startup_even_in_app_limited_rounds() {
    // The same app-limited plateau as above, where the growth test never fires: an ACK
    // whose datagrams all met 10 ms or more of queue over the base one-way delay, with at
    // least two BDPs (2 × 24 000 B) in flight, shows the pipe full: Startup ends
    // there (to Drain: 48 000 B in flight > BDP), and the pacing rate takes Drain's gain
    // at once (Drain's window gain is Startup's).
    let mut cc = Bbr::with_ack_aggregation(MSS, Duration::ZERO);
    ack(&mut cc, 100, 12_000, 0);
    ack(&mut cc, 200, 24_000, 0);
    for t in [300, 400, 500] {
        cc.on_ack(ms(t), &acked(24_000, 50_000, true), &none());
    }
    assert_eq!(cc.mode(), BbrMode::Startup);
    // A queue met with less than two BDPs in flight may be other flows' or Startup's
    // own doubling: still Startup.
    let others = Acked {
        queue_delay_seen: Some(Duration::from_millis(10)),
        ..acked(24_000, 47_999, true)
    };
    cc.on_ack(ms(600), &others, &none());
    assert_eq!(cc.mode(), BbrMode::Startup);
    // Nor is a smoothed delay that still holds a queue the ACK's own datagrams did not
    // meet (after an outage the average lags the emptied queue).
    let stale = Acked {
        standing_queue: true,
        queue_delay_seen: Some(Duration::from_millis(9)),
        ..acked(24_000, 48_000, true)
    };
    let mut twin = cc.clone();
    twin.on_ack(ms(700), &stale, &none());
    assert_eq!(twin.mode(), BbrMode::Startup);
    let queued = Acked {
        queue_delay_seen: Some(Duration::from_millis(10)),
        ..acked(24_000, 48_000, true)
    };
    cc.on_ack(ms(700), &queued, &none());
    assert_eq!(cc.mode(), BbrMode::Drain);
    assert_rate(&cc, DRAIN_GAIN * 240_000.0);
    // Before any bandwidth sample a queue says nothing about the rate: still Startup.
    let mut fresh = Bbr::with_ack_aggregation(MSS, Duration::ZERO);
    fresh.on_ack(
        ms(100),
        &Acked {
            queue_delay_seen: Some(Duration::from_millis(50)),
            ..acked(12_000, 0, false)
        },
        &none(),
    );
    assert_eq!(fresh.mode(), BbrMode::Startup);
}

#[test]
fn probe_bw_cycles_the_pacing_gain_one_min_rtt_per_phase() {
    let mut cc = to_probe_bw();
    // Phase 0 began at 900 ms. 950 ms: 50 ms in, stays. 1000 ms: exactly RTprop in, stays
    // (a phase ends when it lasted *more* than RTprop, draft §4.3.4.4). 1001 ms: next.
    // Bytes: 50 000 at 950 and 1000 make the interval 900→1000 100 000 B / 0.1 s =
    // 1 000 000 B/s, the estimate unchanged.
    ack(&mut cc, 950, 50_000, 0);
    assert_eq!(cc.mode(), BbrMode::ProbeBw { phase: 0 });
    ack(&mut cc, 1000, 50_000, 0);
    assert_eq!(cc.mode(), BbrMode::ProbeBw { phase: 0 });
    assert_rate(&cc, 1_250_000.0);
    ack(&mut cc, 1001, 1_000, 0);
    assert_eq!(cc.mode(), BbrMode::ProbeBw { phase: 1 });
    assert_rate(&cc, 750_000.0);
    // Then every 101 ms one phase on: six of 1.0, then 1.25 again at 1001 + 7 × 101 =
    // 1708 ms. ACKs of 100 000 B over 101 ms are samples of 990 099 B/s, below the
    // estimate (the 1 000 000 sample of round 10, at 1000 ms, stays until round 20; these
    // ACKs are rounds 12 to 18).
    let mut t = 1001;
    for (phase, gain) in [(2, 1.0), (3, 1.0), (4, 1.0), (5, 1.0), (6, 1.0), (7, 1.0)] {
        t += 101;
        ack(&mut cc, t, 100_000, 0);
        assert_eq!(cc.mode(), BbrMode::ProbeBw { phase });
        assert_rate(&cc, gain * 1_000_000.0);
        assert_eq!(cc.window(), 200_000, "cwnd gain 2 in every phase");
    }
    ack(&mut cc, 1708, 100_000, 0);
    assert_eq!(cc.mode(), BbrMode::ProbeBw { phase: 0 });
    assert_rate(&cc, 1_250_000.0);
    assert_close(cc.bandwidth(), 1_000_000.0);
}

#[test]
fn window_is_twice_the_bdp_and_never_under_what_makes_the_peer_acknowledge_at_once() {
    let mut cc = to_probe_bw();
    // 1 000 000 B/s × 0.1 s = 100 000 B; × 2 = 200 000.
    assert_close(CWND_GAIN, 2.0);
    assert_eq!(cc.window(), 200_000);
    // The path's min RTT falls to 50 ms: BDP 50 000, window 100 000. (The ACK at 950 ms
    // closes the interval begun at 900: 50 ms ≥ the new RTprop; 10 000 / 0.05 = 200 000
    // B/s, below the estimate. The phase lasted 50 ms, not more than RTprop: still 0.)
    let a = Acked {
        min_rtt: Duration::from_millis(50),
        ..acked(10_000, 0, false)
    };
    cc.on_ack(ms(950), &a, &none());
    assert_close(cc.bandwidth(), 1_000_000.0);
    assert_eq!(cc.window(), 100_000);
    // RTprop 1 ms: BDP 1 000 B, 2 × BDP = 2 000 < `ack_every` + 1 = 17 datagrams = 20 400:
    // the floor. (Sample 100 B / 1 ms = 100 000 B/s, below the estimate.)
    let a = Acked {
        min_rtt: Duration::from_millis(1),
        ..acked(100, 0, false)
    };
    cc.on_ack(ms(951), &a, &none());
    assert_eq!(cc.window(), (ACK_EVERY_DATAGRAMS + 1) * MSS);
}

#[test]
fn a_loss_does_not_cut_and_there_is_nothing_to_undo() {
    let mut cc = to_probe_bw();
    cc.on_congestion_event(ms(950), &none());
    assert_eq!(cc.window(), 200_000);
    assert_rate(&cc, 1_250_000.0);
    assert_eq!(cc.mode(), BbrMode::ProbeBw { phase: 0 });
    assert_close(cc.bandwidth(), 1_000_000.0);
    cc.on_spurious_congestion(ms(960));
    assert_eq!(cc.window(), 200_000);
    assert_rate(&cc, 1_250_000.0);
}

#[test]
fn persistent_congestion_restarts_from_the_minimum_window() {
    let mut cc = to_probe_bw();
    cc.on_persistent_congestion(ms(1000));
    assert_eq!(cc.mode(), BbrMode::Startup);
    assert_eq!(cc.window(), min_window(MSS));
    assert_eq!(cc.window(), 2_400);
    assert_eq!(cc.bandwidth(), 0.0);
    assert_eq!(cc.pacing_rate(), None);
    // The first ACK after opens a fresh interval: no sample, the window stays minimal.
    ack(&mut cc, 2000, 2_400, 0);
    assert_eq!((cc.window(), cc.pacing_rate()), (2_400, None));
    // 2 400 B in 0.1 s = 24 000 B/s (the old 1 000 000 is gone; the restart kept the zero
    // aggregation allowance, so a window spans RTprop alone). Target
    // 2.885390 × 24 000 × 0.1 = 6 924.9; Startup: min(2 400 + 2 400, 6 924.9) = 4 800.
    ack(&mut cc, 2100, 2_400, 0);
    assert_close(cc.bandwidth(), 24_000.0);
    assert_eq!(cc.window(), 4_800);
    assert_rate(&cc, HIGH_GAIN * 24_000.0);
}

#[test]
fn app_limited_samples_do_not_lower_the_estimate() {
    let mut cc = to_probe_bw();
    // Twelve app-limited rounds (9 to 20) of 10 000 B per 101 ms = 99 009.9 B/s: below the
    // estimate, so never inserted; the filter is aged only by insertions, so 1 000 000
    // stays although its newest sample is 12 rounds old (round 8 vs 20).
    let mut t = 900;
    for _ in 0..12 {
        t += 101;
        cc.on_ack(ms(t), &acked(10_000, 0, true), &none());
    }
    assert_eq!(cc.rounds(), 20);
    assert_close(cc.bandwidth(), 1_000_000.0);
    assert_eq!(cc.window(), 200_000);
    // An app-limited sample above the estimate does count: 200 000 B in 0.1 s, round 21,
    // the only slot within the window (rounds 12 to 21).
    t += 100;
    cc.on_ack(ms(t), &acked(200_000, 0, true), &none());
    assert_close(cc.bandwidth(), 2_000_000.0);
}

#[test]
fn samples_not_app_limited_lower_the_estimate_after_ten_rounds() {
    let mut cc = to_probe_bw();
    // The same 99 009.9 B/s samples, not app-limited, in rounds 9, 10, …: the 1 000 000
    // samples of rounds 5 to 8 leave the window when round 18 inserts (18 − 8 = 10).
    let mut t = 900;
    for round in 9..=17 {
        t += 101;
        ack(&mut cc, t, 10_000, 0);
        assert_eq!(cc.rounds(), round);
        assert_close(cc.bandwidth(), 1_000_000.0);
    }
    t += 101;
    ack(&mut cc, t, 10_000, 0);
    assert_eq!(cc.rounds(), 18);
    assert_close(cc.bandwidth(), 10_000.0 / 0.101);
    // 2 × 99 009.9 × 0.1 = 19 801.98 is under the floor of 17 datagrams: 20 400.
    assert_eq!(cc.window(), 17 * MSS);
}

#[test]
fn a_round_ends_when_the_flight_at_its_start_is_acknowledged() {
    let mut cc = Bbr::with_ack_aggregation(MSS, Duration::ZERO);
    // Round 1 begins with 30 000 B in flight: it ends at delivered 10 000 + 30 000.
    ack(&mut cc, 100, 10_000, 30_000);
    assert_eq!(cc.rounds(), 1);
    ack(&mut cc, 110, 10_000, 30_000);
    ack(&mut cc, 120, 10_000, 30_000);
    assert_eq!(cc.rounds(), 1, "delivered 30 000 < 40 000");
    ack(&mut cc, 130, 10_000, 30_000);
    assert_eq!(cc.rounds(), 2, "delivered 40 000");
}

#[test]
fn through_the_wrapper_a_loss_does_not_cut() {
    let mut cc = PathCongestion::new(CongestionKind::Bbr, MSS);
    assert_eq!(cc.name(), "bbr");
    let coupling = none();
    // 1 200 000 B/s: 120 000 B per 100 ms.
    for t in 1..=3 {
        cc.on_ack(ms(100 * t), &acked(120_000, 0, false), 0, &coupling);
    }
    let w = cc.window();
    let rate = cc.pacing_rate(None).expect("own rate");
    assert_close(rate, HIGH_GAIN * 1_200_000.0);
    cc.on_lost(ms(350), 3, ms(300), u64::MAX, &coupling);
    assert_eq!(cc.counters(), (1, 0));
    assert_eq!(cc.window(), w);
    assert_eq!(cc.pacing_rate(None), Some(rate));
}

#[test]
fn acks_of_datagrams_sent_before_a_loss_still_count() {
    // NewReno's ACKs of datagrams sent before the recovery period are withheld (RFC 9002
    // §7.3.2); BBR takes them: they are deliveries, whatever the loss.
    let coupling = none();
    let mut reno = PathCongestion::new(CongestionKind::NewReno, MSS);
    let mut bbr = PathCongestion::new(CongestionKind::Bbr, MSS);
    for cc in [&mut reno, &mut bbr] {
        cc.on_lost(ms(350), 1, ms(300), u64::MAX, &coupling);
    }
    assert!(reno.in_recovery(ms(340)));
    assert!(!bbr.in_recovery(ms(340)));
    // A second loss in the same period is still not a second event for BBR either.
    bbr.on_lost(ms(360), 1, ms(340), u64::MAX, &coupling);
    assert_eq!(bbr.counters(), (1, 0));
}

/// With the ACK-aggregation allowance (the controller the engine runs), the window is the
/// plain one plus `min(rate × 25 ms, 16 datagrams)` (the peer's ACK delay, or the datagrams
/// after which it acknowledges anyway), in every mode: at 1 MB/s the datagrams, at
/// 0.4 MB/s the delay.
#[test]
fn the_engine_s_window_leaves_room_for_delayed_acks() {
    for (per_ack, allowance) in [
        (100_000, (ACK_EVERY_DATAGRAMS * MSS) as f64),
        (40_000, 10_000.0),
    ] {
        assert!(allowance <= per_ack as f64 * 0.25 + 1e-9);
        let mut plain = Bbr::with_ack_aggregation(MSS, Duration::ZERO);
        let mut engine = Bbr::new(MSS);
        // `per_ack` bytes per 100 ms ACK, through Startup, Drain and ProbeBW.
        for k in 0..30 {
            ack(&mut plain, 100 * k, per_ack, 0);
            ack(&mut engine, 100 * k, per_ack, 0);
            if plain.bandwidth() > 0.0 && plain.mode() == engine.mode() && k > 12 {
                assert_close(engine.bandwidth(), plain.bandwidth());
                assert_close((engine.window() - plain.window()) as f64, allowance);
            }
        }
        assert!(matches!(engine.mode(), BbrMode::ProbeBw { .. }));
    }
}

/// The queue cap follows a rate fall at once (`Bbr::on_queue_over_cap`); BtlBw, and with
/// it the window, only after ten rounds.
#[test]
fn a_queue_beyond_the_cap_lowers_the_cap_rate_until_samples_reach_btlbw_again() {
    let mut cc = to_probe_bw();
    // At 1 MB/s and RTprop 100 ms the cap at gain 1.5 is 150 000 B: 50 ms of queue beyond
    // the pipe, so a queue counts from 50 + 10 ms.
    assert_eq!(cc.queue_cap(1.5), Some(150_000));
    // 1001 ms: 102 000 B in 0.101 s, 1 009 901 B/s, the new best. A queue while the
    // latest sample is the best rate shows no fall: nothing changes.
    let best = 102_000.0 / 0.101;
    ack(&mut cc, 1001, 102_000, 0);
    cc.on_queue_over_cap(Duration::from_secs(1), 1.5);
    assert_close(cc.cap_rate(), best);
    // 1.5 × 100 990.1 = 151 485 B: still 50 ms beyond the pipe at that rate.
    assert_eq!(cc.queue_cap(1.5), Some(151_485));
    // 1102 ms: the link fell to a quarter: 25 000 B in 0.101 s, 247 524.75 B/s.
    ack(&mut cc, 1102, 25_000, 0);
    cc.on_queue_over_cap(Duration::from_millis(59), 1.5);
    assert_close(cc.cap_rate(), best);
    cc.on_queue_over_cap(Duration::from_millis(61), 1.5);
    assert_close(cc.cap_rate(), 25_000.0 / 0.101);
    // 1.5 × 247 524.75 × 0.1 = 37 128.7; BtlBw and the window (2 BDPs) stay.
    assert_eq!(cc.queue_cap(1.5), Some(37_128));
    assert_close(cc.bandwidth(), best);
    assert_eq!(cc.window(), 201_980);
    // Later samples raise the fallen rate, an application-limited one too (50 000 B in
    // 0.101 s; it does not enter the filter, but the path carried it), and one that
    // reaches BtlBw ends it.
    cc.on_ack(ms(1203), &acked(50_000, 0, true), &none());
    assert_close(cc.cap_rate(), 50_000.0 / 0.101);
    assert_close(cc.bandwidth(), best);
    ack(&mut cc, 1304, 102_000, 0);
    assert_close(cc.cap_rate(), best);
    assert_eq!(cc.queue_cap(1.5), Some(151_485));
}

#[test]
fn a_queue_in_startup_is_no_rate_fall() {
    // Startup's estimate lags a doubling rate: a lower sample there is noise, not a fall.
    let mut cc = Bbr::with_ack_aggregation(MSS, Duration::ZERO);
    ack(&mut cc, 100, 12_000, 0);
    ack(&mut cc, 200, 24_000, 0);
    ack(&mut cc, 300, 6_000, 0);
    assert_eq!(cc.mode(), BbrMode::Startup);
    cc.on_queue_over_cap(Duration::from_secs(1), 1.5);
    assert_close(cc.cap_rate(), 240_000.0);
}
