//! The `adaptive` controller's switching rule (`adaptive.rs`): which evidence moves a path
//! to BBR and back, and which does not.

use super::adaptive::{
    CLEAN_LOSS, ENTER_EVIDENCE, EXIT_EVIDENCE, LINK_LOSS, LLR_LINK_LOSS, LLR_NO_LINK_LOSS,
};
use super::bbr::HIGH_GAIN;
use super::{Acked, Adaptive, CongestionController, Coupling, NewReno};
use crate::ids::PathId;
use crate::time::Time;
use std::time::Duration;

const MSS: u64 = 1400;

fn at(ms: u64) -> Time {
    Time::from_millis(ms)
}

/// Feeds `batches` ACK batches of `per_batch` resolved datagrams, `lost` of each batch lost
/// on the link; returns after the first switch, if any.
fn feed(c: &mut Adaptive, batches: u32, per_batch: u32, lost: u32) -> bool {
    let before = c.switches();
    for i in 0..batches {
        c.on_link_sample(at(u64::from(i)), per_batch, lost);
        if c.switches() != before {
            return true;
        }
    }
    false
}

#[test]
fn the_thresholds_are_wald_bounds_between_the_two_rates() {
    assert!((ENTER_EVIDENCE - 99f64.ln()).abs() < 1e-3);
    assert!((EXIT_EVIDENCE - 2.0 * ENTER_EVIDENCE).abs() < 1e-12);
    assert!((LLR_LINK_LOSS - (LINK_LOSS / CLEAN_LOSS).ln()).abs() < 1e-12);
    assert!((LLR_NO_LINK_LOSS - ((1.0 - LINK_LOSS) / (1.0 - CLEAN_LOSS)).ln()).abs() < 1e-12);
    const { assert!(CLEAN_LOSS < LINK_LOSS) };
}

#[test]
fn four_link_losses_in_a_hundred_datagrams_switch_to_bbr() {
    let mut c = Adaptive::new(MSS);
    assert!(!c.is_bbr());
    assert_eq!(c.name(), "adaptive (newreno)");
    // 25 datagrams a batch, one of them lost on the link: 4 % over 100 datagrams.
    assert!(feed(&mut c, 4, 25, 1));
    assert!(c.is_bbr());
    assert_eq!(c.name(), "adaptive (bbr)");
    assert!(c.acks_in_recovery(), "BBR's rule on ACKs in recovery holds");
}

#[test]
fn three_link_losses_are_not_enough_and_old_ones_fade() {
    let mut c = Adaptive::new(MSS);
    assert!(!feed(&mut c, 3, 25, 1));
    // 1,000 clean datagrams take the evidence back to zero: a fourth loss then does nothing.
    assert!(!feed(&mut c, 40, 25, 0));
    assert!(!feed(&mut c, 1, 25, 1));
    assert!(!c.is_bbr());
}

#[test]
fn congestion_losses_of_a_deep_queue_never_switch() {
    // Losses found while the queue was long are not the link's: `link_lost` stays 0.
    let mut c = Adaptive::new(MSS);
    assert!(!feed(&mut c, 10_000, 10, 0));
    assert!(!c.is_bbr());
}

#[test]
fn a_burst_found_at_once_counts_as_one_loss() {
    // A path back from a blackhole finds its whole flight lost in one batch.
    let mut c = Adaptive::new(MSS);
    assert!(!feed(&mut c, 1, 40, 35));
    assert!(!feed(&mut c, 2, 40, 35));
    assert!(!c.is_bbr());
}

#[test]
fn an_outage_clears_the_evidence() {
    let mut c = Adaptive::new(MSS);
    assert!(!feed(&mut c, 3, 10, 1));
    c.on_persistent_congestion(at(100));
    assert!(!feed(&mut c, 1, 10, 1));
    assert!(!c.is_bbr());
    assert!(
        feed(&mut c, 3, 10, 1),
        "three more after the outage are four since"
    );
}

#[test]
fn sustained_rates_decide_as_the_two_hypotheses_say() {
    // One link loss every 50 datagrams (2 %) switches; one every 1,000 (0.1 %) never does.
    let mut c = Adaptive::new(MSS);
    assert!(feed(&mut c, 100, 50, 1));
    let mut c = Adaptive::new(MSS);
    assert!(!feed(&mut c, 1_000, 1_000, 1));
}

#[test]
fn a_clean_path_goes_back_to_newreno_in_avoidance_at_bbrs_window() {
    let mut c = Adaptive::new(MSS);
    assert!(feed(&mut c, 4, 25, 1));
    // Let BBR measure: 20 ms rounds of 100 kB.
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    for i in 1..=200u64 {
        let acked = Acked {
            bytes: 100_000,
            srtt: Duration::from_millis(20),
            min_rtt: Duration::from_millis(20),
            bytes_in_flight: 100_000,
            app_limited: false,
            newest_sent: None,
            standing_queue: false,
        };
        c.on_ack(at(i * 20), &acked, &coupling);
    }
    // 5 MB/s at 20 ms: BDP 100 000 B, ACK allowance min(125 000 B, 16 datagrams).
    let bbr_window = c.window();
    assert_eq!(bbr_window, 2 * 100_000 + 16 * MSS);
    // Under 0.25 %: 1,200 clean datagrams are not quite enough, 1,300 are.
    assert!(!feed(&mut c, 48, 25, 0));
    assert!(feed(&mut c, 4, 25, 0));
    assert!(!c.is_bbr());
    // NewReno starts in avoidance at BBR's window, which the queue cap (the BBR that ran
    // is its model) lowers to 1.5 BDPs plus the allowance.
    let cap = 150_000 + 16 * MSS;
    assert_eq!(c.queue_cap(), Some(cap));
    assert_eq!(c.window(), cap);
    assert_eq!(c.switches(), 2);
    // In congestion avoidance: a window of ACKs adds one datagram, not a window.
    let acked = Acked {
        bytes: bbr_window,
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        bytes_in_flight: bbr_window,
        app_limited: false,
        newest_sent: None,
        standing_queue: false,
    };
    // The model is in ProbeBW, so NewReno's first ACK starts the interval's drain check:
    // the window is 0.9 of the model's BDP plus the ACK allowance until it ends.
    c.on_ack(at(10_000), &acked, &coupling);
    assert!(c.draining());
    assert_eq!(c.window(), 90_000 + 16 * MSS);
    // The path delivers at its rate and the queue shows short on every ACK: after half an
    // SRTT of that the queue was the path's own, the check ends and the cap stays. At the
    // cap, the datagrams NewReno added are taken back.
    let draining = Acked {
        bytes: 100_000,
        bytes_in_flight: 90_000,
        ..acked
    };
    for t in [10_020, 10_040, 10_060, 10_080] {
        c.on_ack(at(t), &draining, &coupling);
    }
    assert!(!c.draining());
    assert!(!c.queue_is_shared());
    assert_eq!(c.window(), cap);
    // Below it, avoidance shows: a loss cuts the window (half the flight, 86 200 B, is
    // under the model's BDP, where the cut stops), and a window of ACKs then adds one
    // datagram, not a window.
    c.on_flight_at_loss(cap);
    c.on_congestion_event(at(10_081), &coupling);
    let bdp = 100_000;
    assert_eq!(c.window(), bdp);
    let acked = Acked {
        bytes: bdp,
        bytes_in_flight: bdp,
        ..acked
    };
    c.on_ack(at(10_100), &acked, &coupling);
    assert_eq!(c.window(), bdp + MSS);
}

/// One ACK a millisecond from `from_ms` to `until_ms` of a path that delivers `rate` bytes
/// per second at a 20 ms minimum RTT, the sender keeping the window in flight.
fn steady(c: &mut Adaptive, from_ms: u64, until_ms: u64, rate: u64) {
    for t in from_ms..until_ms {
        steady_ack(c, t, rate, false);
    }
}

/// One ACK of [`steady`] at `t_ms`, the path showing a standing queue or not.
fn steady_ack(c: &mut Adaptive, t_ms: u64, rate: u64, standing_queue: bool) {
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    let acked = Acked {
        bytes: rate / 1000,
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        bytes_in_flight: c.window(),
        app_limited: false,
        newest_sent: None,
        standing_queue,
    };
    c.on_ack(at(t_ms), &acked, &coupling);
}

#[test]
fn a_standing_queue_ends_the_models_start_up_and_lowers_the_cap_at_once() {
    // 10 Mbit/s at 20 ms (BDP 25 000 B, allowance 22 400 B, as below). While the model is
    // in Startup the cap is 2/ln 2 BDPs plus the allowance: 94 534 B.
    let high = (HIGH_GAIN * 25_000.0 + 22_400.0) as u64;
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 25, 1_250_000);
    assert_eq!(c.queue_cap(), Some(high));
    let mut twin = c.clone();
    steady_ack(&mut twin, 25, 1_250_000, false);
    assert_eq!(
        twin.queue_cap(),
        Some(high),
        "no queue: still Startup's gain"
    );
    // The path shows a standing queue: the pipe is full, the cap is the steady one.
    steady_ack(&mut c, 25, 1_250_000, true);
    assert_eq!(c.queue_cap(), Some(59_900));
    // NewReno is still in slow start: the next ACK grows the window by its bytes.
    let before = c.window();
    steady_ack(&mut c, 26, 1_250_000, true);
    assert_eq!(c.window(), (before + 1_250).min(59_900));
}

#[test]
fn no_cap_before_a_bandwidth_sample_and_none_under_bbr() {
    let mut c = Adaptive::new(MSS);
    assert_eq!(c.queue_cap(), None);
    assert_eq!(c.window(), 10 * MSS, "the initial window");
    assert!(feed(&mut c, 4, 25, 1));
    assert_eq!(c.queue_cap(), None, "BBR runs: its own window is the bound");
}

#[test]
fn newreno_is_held_to_one_and_a_half_bdps_plus_the_ack_allowance() {
    // 10 Mbit/s (1.25 MB/s) at 20 ms: BDP 25 000 B; allowance min(1.25 MB/s × 25 ms,
    // 16 datagrams) = 22 400 B; once the model left Startup the cap is 1.5 × 25 000 +
    // 22 400 = 59 900 B.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 1_250_000);
    assert_eq!(c.queue_cap(), Some(59_900));
    assert_eq!(
        c.window(),
        59_900,
        "slow start stopped at the cap, not at a loss"
    );
    assert_eq!(c.name(), "adaptive (newreno)");
    // Uncapped, NewReno's slow start would still be doubling.
    let mut plain = NewReno::new(MSS);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    for t in 1..3_000u64 {
        let acked = Acked {
            bytes: 1_250,
            srtt: Duration::from_millis(20),
            min_rtt: Duration::from_millis(20),
            bytes_in_flight: plain.window(),
            app_limited: false,
            newest_sent: None,
            standing_queue: false,
        };
        plain.on_ack(at(t), &acked, &coupling);
    }
    assert!(plain.window() > 1_000_000, "{}", plain.window());
}

#[test]
fn a_loss_still_halves_the_capped_window_and_the_cap_follows_the_rate() {
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 1_250_000);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    c.on_flight_at_loss(59_900);
    c.on_congestion_event(at(3_000), &coupling);
    assert_eq!(c.window(), 29_950);
    // The link doubles its rate: the model's bandwidth filter takes the new samples at once,
    // and the cap becomes 1.5 × 50 000 + 22 400; avoidance grows the window back to it.
    steady(&mut c, 3_001, 9_000, 2_500_000);
    assert_eq!(c.queue_cap(), Some(97_400));
    assert_eq!(c.window(), 97_400);
}

#[test]
fn a_cut_under_the_cap_leaves_at_least_the_models_bdp() {
    // 10 Mbit/s at 20 ms: BDP 25 000 B. Half of a 30 000 B flight would leave the link
    // idle part of every round; the cut stops at the BDP, in congestion avoidance.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 1_250_000);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    c.on_flight_at_loss(30_000);
    c.on_congestion_event(at(3_000), &coupling);
    assert_eq!(c.window(), 25_000);
    // With one BDP in flight the model reaches ProbeBW, and that ACK starts the first
    // drain check, whose window (0.9 BDP plus the ACK allowance, 44 900 B) is above this
    // one; the queue shows short, so it ends half an SRTT later.
    steady_ack(&mut c, 3_001, 1_250_000, false);
    assert!(c.draining());
    assert_eq!(c.window(), 25_000);
    steady(&mut c, 3_002, 3_067, 1_250_000);
    assert!(!c.draining());
    assert!(!c.queue_is_shared());
    // Avoidance from the floor meanwhile, one datagram per window acknowledged: 66 ACKs
    // of 1 250 B took NewReno from 25 000 through 26 400 and 27 800 to 29 200 B.
    assert_eq!(c.window(), 29_200);
}

#[test]
fn the_queue_cap_leaves_room_for_the_peer_to_acknowledge_at_once() {
    // A 0.1 ms path whose ACKs came on the peer's 25 ms timer: four datagrams a round. The
    // model's rate is the timer's, and 1.5 of its BDPs plus its ACK allowance would be
    // under `ack_every` datagrams, which keeps the ACKs on the timer for good.
    let mut c = Adaptive::new(MSS);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    for i in 1..=40u64 {
        let acked = Acked {
            bytes: 4 * MSS,
            srtt: Duration::from_micros(500),
            min_rtt: Duration::from_micros(100),
            bytes_in_flight: 4 * MSS,
            app_limited: false,
            newest_sent: Some(at(i * 25 - 1)),
            standing_queue: false,
        };
        c.on_ack(at(i * 25), &acked, &coupling);
    }
    assert_eq!(c.queue_cap(), Some(17 * MSS));
}

#[test]
fn an_undo_after_a_floored_cut_restores_the_window_before_it_under_the_cap() {
    // 10 Mbit/s at 20 ms, at the cap (59 900 B; NewReno's own window in slow start is twice
    // that). A loss with 30 000 B in flight cuts to the BDP floor; the loss was only late.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 1_250_000);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    c.on_flight_at_loss(30_000);
    c.on_congestion_event(at(3_000), &coupling);
    assert_eq!(c.window(), 25_000, "the floor, not half the flight");
    c.on_spurious_congestion(at(3_001));
    assert_eq!(c.window(), 59_900, "back to the cap, not to the floor");
    // A second cut from there halves the flight (above the floor) and is undone the same.
    c.on_flight_at_loss(59_900);
    c.on_congestion_event(at(3_002), &coupling);
    assert_eq!(c.window(), 29_950);
    c.on_spurious_congestion(at(3_003));
    assert_eq!(c.window(), 59_900);
}

#[test]
fn an_outage_with_the_own_window_above_the_cap_halves_the_window_used() {
    // At the cap of 59 900 B NewReno's own window is 119 800 B (slow start, within twice the
    // cap). An outage: the threshold is half of what was used (29 950 B), not of the own
    // window, and the minimum window restarts slow start.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 1_250_000);
    assert_eq!(c.window(), 59_900);
    c.on_persistent_congestion(at(3_000));
    assert_eq!(c.window(), 2 * MSS);
    assert_eq!(c.queue_cap(), None, "the model starts over with the path");
    // Slow start to the threshold, 1 250 B an ACK: 2 800 + 22 × 1 250 = 30 300 B passes
    // 29 950; from there avoidance needs a window of ACKs for one datagram. Half the own
    // window (59 900 B) would have let slow start run to 52 800 B.
    steady(&mut c, 3_001, 3_041, 1_250_000);
    assert_eq!(c.window(), 30_300);
}

/// Drives `c` at 10 Mbit/s and 20 ms (BDP 25 000 B) into ProbeBW with one BDP in flight
/// and through the first drain check, the queue short; returns the next free millisecond.
fn capped_in_probe_bw(c: &mut Adaptive) -> u64 {
    steady(c, 1, 3_000, 1_250_000);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    c.on_flight_at_loss(30_000);
    c.on_congestion_event(at(3_000), &coupling);
    steady(c, 3_001, 3_067, 1_250_000);
    assert!(!c.draining() && !c.queue_is_shared());
    3_067
}

#[test]
fn a_queue_that_does_not_drain_lifts_the_cap_and_two_that_do_bring_it_back() {
    let mut c = Adaptive::new(MSS);
    let t = capped_in_probe_bw(&mut c);
    assert_eq!(c.queue_cap(), Some(59_900));
    // The next interval (5 s) starts a check; another flow keeps the queue standing on
    // every ACK through it, so the cap cannot shorten that queue and is lifted.
    steady_ack(&mut c, 5_000, 1_250_000, true);
    assert!(c.draining());
    for ms in 5_001..5_070 {
        steady_ack(&mut c, ms, 1_250_000, true);
    }
    assert!(!c.draining());
    assert!(c.queue_is_shared());
    assert_eq!(c.queue_cap(), None);
    // NewReno runs uncapped: a loss-based flow's share, above the old cap in time.
    steady(&mut c, 5_070, 9_999, 1_250_000);
    assert!(c.window() > 59_900, "{}", c.window());
    // A check whose queue drains: one is not enough to bring the cap back ...
    steady(&mut c, 10_000, 10_100, 1_250_000);
    assert!(c.queue_is_shared());
    // ... two in a row are.
    steady(&mut c, 15_000, 15_100, 1_250_000);
    assert!(!c.queue_is_shared());
    assert!(c.queue_cap().is_some());
    assert!(t < 5_000);
}

#[test]
fn a_short_dip_early_in_a_check_is_not_a_drained_queue() {
    // The queue shows short for a moment (another flow's cut) and stands again by the
    // check's end: the queue is not the path's own.
    let mut c = Adaptive::new(MSS);
    capped_in_probe_bw(&mut c);
    steady_ack(&mut c, 5_000, 1_250_000, true);
    for ms in 5_001..5_070 {
        steady_ack(&mut c, ms, 1_250_000, !(5_010..5_020).contains(&ms));
    }
    assert!(c.queue_is_shared());
}

#[test]
fn an_outage_forgets_the_drain_checks_verdict() {
    let mut c = Adaptive::new(MSS);
    capped_in_probe_bw(&mut c);
    for ms in 5_000..5_070 {
        steady_ack(&mut c, ms, 1_250_000, true);
    }
    assert!(c.queue_is_shared());
    c.on_persistent_congestion(at(5_100));
    assert!(
        !c.queue_is_shared(),
        "the path that comes back may not be the one that left"
    );
}

#[test]
fn a_drain_check_waits_for_the_model_and_runs_once_an_interval() {
    use super::{DRAIN_CHECK_INTERVAL, DrainCheck};
    let srtt = Duration::from_millis(20);
    let mut d = DrainCheck::new();
    d.on_ack(at(1), srtt, true, false);
    assert!(!d.draining(), "the model has no BDP yet");
    d.on_ack(at(2), srtt, true, true);
    assert!(d.draining());
    d.on_ack(at(67), srtt, false, true);
    assert!(
        !d.draining() && d.shared(),
        "a queue short for no time did not drain"
    );
    d.on_ack(at(100), srtt, true, true);
    assert!(!d.draining(), "one check an interval");
    let next = DRAIN_CHECK_INTERVAL.as_millis() as u64;
    d.on_ack(at(next), srtt, true, true);
    assert!(d.draining());
    // An ACK stamped before the check began does not end it; a clock gone back to an
    // earlier interval checks again (once for each change of interval).
    d.on_ack(at(1), srtt, false, true);
    assert!(d.draining());
    d.on_ack(at(next + 65), srtt, false, true);
    assert!(!d.draining());
    d.on_ack(at(3), srtt, false, true);
    assert!(d.draining(), "interval 0 again");
}
