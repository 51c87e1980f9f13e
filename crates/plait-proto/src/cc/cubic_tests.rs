//! Scripted ACK and loss sequences through [`Cubic`], each window checked against RFC 9438's
//! formulas worked by hand (MSS 1200 B, so 1 segment = 1200 B; C = 0.4, β = 0.7,
//! α_cubic = 3·0.3/1.7 = 0.529412; SRTT 100 ms).

use std::time::Duration;

use super::*;

const MSS: u64 = 1200;

fn ack(bytes: u64) -> Acked {
    Acked {
        bytes,
        srtt: Duration::from_millis(100),
        min_rtt: Duration::from_millis(90),
        bytes_in_flight: 0,
        app_limited: false,
        newest_sent: None,
        standing_queue: false,
        queue_delay_seen: Some(Duration::ZERO),
    }
}

fn none() -> Coupling<'static> {
    Coupling {
        this: PathId(0),
        paths: &[],
    }
}

fn ms(t: u64) -> Time {
    Time::from_millis(t)
}

/// Slow start to 100 segments (120 000 B), then a loss at 1 s.
fn after_first_cut() -> Cubic {
    let mut cc = Cubic::new(MSS);
    assert_eq!(cc.window(), 12_000);
    cc.on_ack(ms(500), &ack(108_000), &none());
    assert_eq!(cc.window(), 120_000, "slow start: +1 B per B acked");
    cc.on_congestion_event(ms(1000), &none());
    // §4.6: cwnd = ssthresh = 0.7 × 120 000 = 84 000; W_max = 120 000 (100 segments).
    assert_eq!(cc.window(), 84_000);
    cc
}

#[test]
fn cubic_reno_friendly_then_concave_then_capped_growth() {
    let mut cc = after_first_cut();
    // First ACK in avoidance at 1 s starts the epoch. K = ∛((100 − 70)/0.4) = ∛75 = 4.21716 s.
    // W_est = 84 000 + α·1200·1200/84 000 = 84 000 + 9.0756 = 84 009.08.
    // W_cubic(0) = 0.4·(−4.21716)³·1200 + 120 000 = −36 000 + 120 000 = 84 000 < W_est:
    // Reno-friendly region (§4.3), cwnd = W_est.
    cc.on_ack(ms(1000), &ack(1200), &none());
    assert_eq!(cc.window(), 84_009);
    // At t = 2 s: W_est = 84 009.08 + α·1 440 000/84 009.08 = 84 018.15;
    // W_cubic(2) = 480·(2 − 4.21716)³ + 120 000 = 114 768.4 > W_est: concave region.
    // target = W_cubic(2.1) = 480·(−2.11716)³ + 120 000 = 115 444.83 (within [cwnd, 1.5 cwnd]);
    // cwnd += (115 444.83 − 84 009.08)/84 009.08 · 1200 = 449.03 → 84 458.11.
    cc.on_ack(ms(3000), &ack(1200), &none());
    assert_eq!(cc.window(), 84_458);
    // At t = 20 s W_cubic(20.1) is far above 1.5·cwnd: the target is capped there (§4.4),
    // so cwnd += 0.5 · 1200 = 600 → 85 058.11.
    cc.on_ack(ms(21_000), &ack(1200), &none());
    assert_eq!(cc.window(), 85_058);
}

#[test]
fn cubic_fast_convergence_lowers_w_max() {
    let mut cc = after_first_cut();
    cc.on_ack(ms(1000), &ack(1200), &none());
    cc.on_ack(ms(3000), &ack(1200), &none());
    cc.on_ack(ms(21_000), &ack(1200), &none());
    // Loss at cwnd = 85 058.11 < W_max = 120 000: §4.7 W_max = 85 058.11·(1 + 0.7)/2
    // = 72 299.39; cwnd = 0.7 · 85 058.11 = 59 540.68.
    cc.on_congestion_event(ms(22_000), &none());
    assert_eq!(cc.window(), 59_540);
    // Epoch at 30 s: K = ∛((72 299.39 − 59 540.68)/1200/0.4) = ∛26.581 = 2.98439 s.
    // W_cubic(0) = cwnd_epoch = 59 540.68 < W_est = 59 540.68 + α·1 440 000/59 540.68
    // = 59 553.48: Reno-friendly, cwnd = 59 553.48.
    cc.on_ack(ms(30_000), &ack(1200), &none());
    assert_eq!(cc.window(), 59_553);
    // t = 3 s, just past K: W_cubic(3) = 72 299.39 + 480·(0.0156)³ ≈ 72 299.39 > W_est, so
    // target = W_cubic(3.1) = 72 300.13 and cwnd += (72 300.13 − 59 553.48)/59 553.48·1200
    // = 256.84 → 59 810.32. Without fast convergence W_max would be 85 058 and the step
    // larger: this pins W_max = 0.85 · cwnd.
    cc.on_ack(ms(33_000), &ack(1200), &none());
    assert_eq!(cc.window(), 59_810);
}

#[test]
fn cubic_reno_estimate_switches_alpha_to_one_at_the_prior_window() {
    let mut cc = Cubic::new(MSS);
    // Loss at the initial 12 000 B: cwnd = 8 400, W_max = cwnd_prior = 12 000.
    cc.on_congestion_event(ms(0), &none());
    assert_eq!(cc.window(), 8_400);
    // All ACKs at the epoch instant (t = 0): W_cubic(0) = 8 400 stays below W_est, so
    // cwnd = W_est, which grows by α·1200²/cwnd per 1200 B acknowledged. The model of
    // §4.3 crosses cwnd_prior = 12 000 after 48 such ACKs (12 000.79).
    let mut last = cc.window();
    for i in 0..48 {
        cc.on_ack(ms(1000), &ack(1200), &none());
        let step = cc.window() - last;
        // α·1 440 000/cwnd: between 0.529·120 = 63 (at 12 000) and 0.529·171 = 91 (at 8 400).
        assert!((62..=91).contains(&step), "ack {i}: step {step}");
        last = cc.window();
    }
    assert_eq!(cc.window(), 12_000);
    // Now W_est ≥ cwnd_prior: α = 1, the step is 1 440 000/12 000.79 = 119.99.
    cc.on_ack(ms(1000), &ack(1200), &none());
    assert_eq!(cc.window(), 12_120);
}

#[test]
fn cubic_undo_restores_the_state_before_the_cut() {
    let mut cc = after_first_cut();
    cc.on_ack(ms(1000), &ack(1200), &none());
    cc.on_spurious_congestion(ms(1010));
    // §4.9: cwnd, ssthresh (∞: slow start again) and W_max as before the loss.
    assert_eq!(cc.window(), 120_000);
    cc.on_ack(ms(1020), &ack(1200), &none());
    assert_eq!(cc.window(), 121_200, "back in slow start");
    // A second undo has nothing to restore.
    cc.on_spurious_congestion(ms(1030));
    assert_eq!(cc.window(), 121_200);
}

#[test]
fn cubic_after_persistent_congestion_restarts_with_k_zero() {
    let mut cc = Cubic::new(MSS);
    cc.on_ack(ms(500), &ack(108_000), &none());
    // §4.8: ssthresh = 0.7 · 120 000 = 84 000; cwnd = minimum (2 datagrams).
    cc.on_persistent_congestion(ms(1000));
    assert_eq!(cc.window(), min_window(MSS));
    cc.on_ack(ms(5000), &ack(81_600), &none());
    assert_eq!(cc.window(), 84_000, "slow start up to ssthresh");
    // Epoch at 10 s with W_max = 84 000, K = 0: W_cubic(0) = 84 000 < W_est = 84 009.08.
    cc.on_ack(ms(10_000), &ack(1200), &none());
    assert_eq!(cc.window(), 84_009);
    // t = 1 s: W_cubic(1) = 84 000 + 480 = 84 480 > W_est = 84 018.15; target =
    // W_cubic(1.1) = 84 000 + 480·1.331 = 84 638.88; cwnd += (84 638.88 − 84 009.08)
    // /84 009.08·1200 = 9.00 → 84 018.07.
    cc.on_ack(ms(11_000), &ack(1200), &none());
    assert_eq!(cc.window(), 84_018);
}

#[test]
fn cubic_app_limited_acks_do_not_grow() {
    let mut cc = after_first_cut();
    let a = Acked {
        app_limited: true,
        newest_sent: None,
        standing_queue: false,
        queue_delay_seen: Some(Duration::ZERO),
        ..ack(50_000)
    };
    cc.on_ack(ms(5000), &a, &none());
    assert_eq!(cc.window(), 84_000);
}
