//! The `adaptive` controller's switching rule (`adaptive.rs`): which evidence moves a path
//! to BBR and back, and which does not.

use super::adaptive::{
    CLEAN_LOSS, ENTER_EVIDENCE, EXIT_EVIDENCE, LINK_LOSS, LLR_LINK_LOSS, LLR_NO_LINK_LOSS,
};
use super::bbr::HIGH_GAIN;
use super::drain_check::RATE_FALL;
use super::{Acked, Adaptive, CongestionController, Coupling, DRAIN_WINDOW_GAIN, NewReno};
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
fn an_outage_keeps_the_evidence_gathered_before_it() {
    // Three link losses, an outage (a starved lossy path went silent past its down bound),
    // then the fourth: the path moves, as it would have without the outage.
    let mut c = Adaptive::new(MSS);
    assert!(!feed(&mut c, 3, 10, 1));
    c.on_persistent_congestion(at(100));
    assert!(!c.is_bbr());
    assert!(
        feed(&mut c, 1, 10, 1),
        "the fourth link loss since the start"
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
            queue_delay_seen: Some(Duration::ZERO),
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
        queue_delay_seen: Some(Duration::ZERO),
    };
    c.on_ack(at(10_000), &acked, &coupling);
    // At the cap, the datagram NewReno added is taken back.
    assert_eq!(c.window(), cap);
    // Below it, avoidance shows: a loss cuts the window (half the flight, 86 200 B, is
    // under the model's BDP, where the cut stops), and a window of ACKs then adds one
    // datagram, not a window.
    c.on_flight_at_loss(cap);
    c.on_congestion_event(at(10_001), &coupling);
    let bdp = 100_000;
    assert_eq!(c.window(), bdp);
    let acked = Acked {
        bytes: bdp,
        bytes_in_flight: bdp,
        ..acked
    };
    c.on_ack(at(10_020), &acked, &coupling);
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
    ack_among(c, t_ms, rate, standing_queue, &[]);
}

/// One ACK of 1 ms of `rate` bytes/s at a 20 ms minimum RTT, the sender keeping the window
/// in flight and the path showing a standing queue (40 ms) or not, to path 0 of a session
/// of `paths`.
fn ack_among(
    c: &mut Adaptive,
    t_ms: u64,
    rate: u64,
    standing_queue: bool,
    paths: &[super::CoupledPath],
) {
    let coupling = Coupling {
        this: PathId(0),
        paths,
    };
    let acked = Acked {
        bytes: rate / 1000,
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        bytes_in_flight: c.window(),
        app_limited: false,
        newest_sent: None,
        standing_queue,
        queue_delay_seen: Some(if standing_queue {
            Duration::from_millis(40)
        } else {
            Duration::ZERO
        }),
    };
    c.on_ack(at(t_ms), &acked, &coupling);
}

#[test]
fn a_standing_queue_ends_the_models_start_up_and_lowers_the_cap_at_once() {
    // 10 Mbit/s at 20 ms (BDP 25 000 B, allowance 22 400 B, as below). While the model is
    // in Startup the cap is 2/ln 2 BDPs plus the allowance: 94 534 B.
    let high = (HIGH_GAIN * 25_000.0 + 22_400.0) as u64;
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 50, 1_250_000);
    assert_eq!(c.queue_cap(), Some(high));
    let mut twin = c.clone();
    steady_ack(&mut twin, 50, 1_250_000, false);
    assert_eq!(
        twin.queue_cap(),
        Some(high),
        "no queue: still Startup's gain"
    );
    // The path shows a standing queue: the pipe is full, the cap is the steady one.
    let mut light = c.clone();
    steady_ack(&mut c, 50, 1_250_000, true);
    assert_eq!(c.queue_cap(), Some(59_900));
    // Whatever is in flight: with less than the two BDPs (50 000 B) that BBR sending
    // wants before a queue ends its Startup (`cc/bbr.rs`, **Startup's end**), the model
    // still leaves Startup on it.
    let acked = Acked {
        bytes: 1_250,
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        bytes_in_flight: 40_000,
        app_limited: false,
        newest_sent: None,
        standing_queue: true,
        queue_delay_seen: Some(Duration::from_millis(40)),
    };
    let paths = [];
    let coupling = Coupling {
        this: PathId(0),
        paths: &paths,
    };
    light.on_ack(at(50), &acked, &coupling);
    assert_eq!(light.queue_cap(), Some(59_900));
    // NewReno is still in slow start: the next ACK grows the window by its bytes.
    let before = c.window();
    steady_ack(&mut c, 51, 1_250_000, true);
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
            queue_delay_seen: Some(Duration::ZERO),
        };
        plain.on_ack(at(t), &acked, &coupling);
    }
    assert!(plain.window() > 1_000_000, "{}", plain.window());
}

#[test]
fn prompt_acks_are_wanted_while_the_cap_holds_and_shrink_its_allowance() {
    // 10 Mbit/s at 20 ms, capped at 1.5 × 25 000 + 22 400 = 59 900 B (above).
    let mut c = Adaptive::new(MSS);
    assert!(!c.wants_prompt_acks(), "no cap before a bandwidth sample");
    steady(&mut c, 1, 3_000, 1_250_000);
    assert!(c.wants_prompt_acks());
    // Asked to be prompt, the peer holds at most 5 ms (6 250 B) once four datagrams
    // (5 600 B) came: the cap's allowance shrinks to that (docs/protocol.md#ack-soon).
    c.set_prompt_acks(true);
    assert_eq!(c.queue_cap(), Some(37_500 + 6_250));
    assert_eq!(c.window(), 43_750);
    c.set_prompt_acks(false);
    assert_eq!(c.queue_cap(), Some(59_900));
    // Once the drain checks lift the cap, the queue is other flows': nothing to ask.
    let mut c = Adaptive::new(MSS);
    capped_then_slower(&mut c);
    steady_ack(&mut c, 5_000, 1_000_000, true);
    steady_queue(&mut c, 5_001, 5_066, true);
    assert_eq!(c.queue_cap(), None);
    assert!(!c.wants_prompt_acks());
    // Nor under BBR, whose window is its own bound.
    let mut lossy = Adaptive::new(MSS);
    steady(&mut lossy, 1, 3_000, 1_250_000);
    assert!(lossy.wants_prompt_acks());
    assert!(feed(&mut lossy, 4, 25, 1));
    assert!(lossy.is_bbr());
    assert!(!lossy.wants_prompt_acks());
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
    // Avoidance from there: one datagram per window acknowledged.
    steady(&mut c, 3_001, 3_021, 1_250_000);
    assert_eq!(c.window(), 25_000 + MSS);
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
            queue_delay_seen: Some(Duration::ZERO),
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

/// Drives `c` at 10 Mbit/s and 20 ms to its cap, then at 8 Mbit/s from 3 s (another flow
/// took a fifth of the link) up to 4 999 ms: the model's rate has fallen under
/// `RATE_FALL` of its highest, so the next interval checks the queue. At 8 Mbit/s the
/// BDP is 20 000 B and the ACK allowance 22 400 B.
fn capped_then_slower(c: &mut Adaptive) {
    steady(c, 1, 3_000, 1_250_000);
    steady(c, 3_000, 5_000, 1_000_000);
    assert!(!c.draining() && !c.queue_is_shared());
    assert_eq!(c.queue_cap(), Some(30_000 + 22_400));
    const { assert!(0.8 < RATE_FALL) };
}

/// Steady ACKs at 10 Mbit/s from `from_ms` to `until_ms`, the queue standing or not.
fn steady_queue(c: &mut Adaptive, from_ms: u64, until_ms: u64, standing_queue: bool) {
    for t in from_ms..until_ms {
        steady_ack(c, t, 1_250_000, standing_queue);
    }
}

#[test]
fn a_queue_that_does_not_drain_lifts_the_cap_and_two_that_do_bring_it_back() {
    let mut c = Adaptive::new(MSS);
    capped_then_slower(&mut c);
    // The first ACK of the next interval starts a check: the window is held at 0.95 BDP
    // plus half the ACK allowance until two SRTTs and 25 ms have passed (5 065 ms).
    steady_ack(&mut c, 5_000, 1_000_000, true);
    assert!(c.draining());
    // (The BDP at the best rate of the last two rounds, a byte or so under 20 000 B.)
    let check = (DRAIN_WINDOW_GAIN * 20_000.0) as u64 + 11_200;
    assert!(
        c.window().abs_diff(check) <= 2,
        "{} against {check}",
        c.window()
    );
    // Another flow keeps the queue standing to the end: the cap cannot shorten that
    // queue and is lifted.
    steady_queue(&mut c, 5_001, 5_066, true);
    assert!(!c.draining());
    assert!(c.queue_is_shared());
    assert_eq!(c.queue_cap(), None);
    assert_eq!(c.name(), "adaptive (newreno, uncapped)");
    // NewReno runs uncapped: above the old cap. (The path gets its 10 Mbit/s back.)
    steady_queue(&mut c, 5_066, 10_000, false);
    assert!(c.window() > 59_900, "{}", c.window());
    // A check whose queue drains: one is not enough to bring the cap back ...
    steady_queue(&mut c, 10_000, 10_100, false);
    assert!(c.queue_is_shared());
    // ... a standing queue in the next starts the count again ...
    steady_queue(&mut c, 15_000, 15_100, true);
    steady_queue(&mut c, 20_000, 20_100, false);
    assert!(c.queue_is_shared());
    // ... and two in a row bring it back, the window with it.
    steady_queue(&mut c, 25_000, 25_100, false);
    assert!(!c.queue_is_shared());
    assert_eq!(c.queue_cap(), Some(59_900));
    assert_eq!(c.window(), 59_900);
    assert_eq!(c.name(), "adaptive (newreno)");
    // At a steady rate, with the cap back, no more checks.
    steady_queue(&mut c, 25_100, 30_001, true);
    assert!(!c.draining());
}

#[test]
fn a_path_alone_at_a_steady_rate_is_never_checked() {
    let mut c = Adaptive::new(MSS);
    for boundary in [5_000, 10_000, 15_000, 20_000] {
        steady(&mut c, boundary - 5_000 + 1, boundary, 1_250_000);
        steady_ack(&mut c, boundary, 1_250_000, true);
        assert!(!c.draining(), "at {boundary} ms");
    }
    assert_eq!(c.queue_cap(), Some(59_900));
}

#[test]
fn a_short_dip_in_a_check_is_not_a_drained_queue() {
    // The queue shows short for a moment (another flow's cut) and stands again by the
    // check's end: the queue is not the path's own.
    let mut c = Adaptive::new(MSS);
    capped_then_slower(&mut c);
    steady_queue(&mut c, 5_000, 5_010, true);
    steady_queue(&mut c, 5_010, 5_020, false);
    steady_queue(&mut c, 5_020, 5_070, true);
    assert!(c.queue_is_shared());
}

#[test]
fn an_outage_and_a_change_of_controller_forget_the_verdict() {
    let mut c = Adaptive::new(MSS);
    capped_then_slower(&mut c);
    steady_queue(&mut c, 5_000, 5_070, true);
    assert!(c.queue_is_shared());
    c.on_persistent_congestion(at(5_100));
    assert!(
        !c.queue_is_shared(),
        "the path that comes back may not be the one that left"
    );
    let mut c = Adaptive::new(MSS);
    capped_then_slower(&mut c);
    steady_queue(&mut c, 5_000, 5_070, true);
    assert!(c.queue_is_shared());
    assert!(feed(&mut c, 4, 25, 1), "link losses: BBR");
    assert!(!c.queue_is_shared());
}

#[test]
fn a_cut_during_a_check_stops_at_the_window_used() {
    // 120 Mbit/s at 20 ms, then 104 (a fall of more than a tenth): BDP 260 000 B,
    // allowance 22 400 B; the check holds the window at 0.95 BDP plus 11 200 B, under the
    // BDP. Half of a 270 000 B flight is under both; the cut stops at the window used, not
    // at the BDP above it, as the window after the check shows.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 15_000_000);
    steady(&mut c, 3_000, 5_000, 13_000_000);
    steady_ack(&mut c, 5_000, 13_000_000, true);
    let check = (DRAIN_WINDOW_GAIN * 260_000.0) as u64 + 11_200;
    assert!(check < 260_000);
    assert_eq!(c.window(), check);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    c.on_flight_at_loss(270_000);
    c.on_congestion_event(at(5_001), &coupling);
    // Application-limited ACKs (no growth) to the check's end, its queue drained.
    for t in 5_002..5_070 {
        let acked = Acked {
            bytes: 13_000,
            srtt: Duration::from_millis(20),
            min_rtt: Duration::from_millis(20),
            bytes_in_flight: c.window(),
            app_limited: true,
            newest_sent: None,
            standing_queue: false,
            queue_delay_seen: Some(Duration::ZERO),
        };
        c.on_ack(at(t), &acked, &coupling);
    }
    assert!(!c.draining());
    assert_eq!(c.window(), check);
}

/// A model fed ACKs every millisecond at 20 ms of the bytes `bytes_at(t_ms)` for `t_ms` in
/// `ms` (`None`: no ACK that millisecond), 30 000 B in flight.
fn model_fed(ms: std::ops::Range<u64>, bytes_at: impl Fn(u64) -> Option<u64>) -> super::Bbr {
    let mut m = super::Bbr::new(MSS);
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    for t in ms {
        let Some(bytes) = bytes_at(t) else { continue };
        let acked = Acked {
            bytes,
            srtt: Duration::from_millis(20),
            min_rtt: Duration::from_millis(20),
            bytes_in_flight: 30_000,
            app_limited: false,
            newest_sent: None,
            standing_queue: false,
            queue_delay_seen: Some(Duration::ZERO),
        };
        m.on_ack(at(t), &acked, &coupling);
    }
    m
}

/// Asserts that `m`'s drain window is the one at `rate` bytes/s (within 2 B): 0.95 of its
/// BDP at 20 ms plus half the allowance (min(1.25 MB/s × 25 ms, 16 datagrams) = 22 400 B,
/// the best rate's).
fn assert_drain_window_at(m: &super::Bbr, rate: f64) {
    let window = m.drained_window(DRAIN_WINDOW_GAIN).unwrap();
    let expected = (DRAIN_WINDOW_GAIN * rate * 0.02) as u64 + 11_200;
    assert!(
        window.abs_diff(expected) <= 2,
        "{window} against {expected}"
    );
}

#[test]
fn the_drain_window_follows_the_last_two_rounds_not_the_best_of_ten() {
    // 10 Mbit/s for 3 s, then 5 Mbit/s for 150 ms (three rounds of 30 000 B): the filter
    // still holds the old rate, the last two rounds only the new one.
    let m = model_fed(1..3_150, |t| Some(if t < 3_000 { 1_250 } else { 625 }));
    assert!(
        (m.bandwidth() - 1_250_000.0).abs() < 1.0,
        "{}",
        m.bandwidth()
    );
    assert_drain_window_at(&m, 625_000.0);
}

#[test]
fn a_low_sample_after_a_gap_in_the_acks_does_not_set_the_drain_window() {
    // 10 Mbit/s, then 40 ms without ACKs (a recovery period, whose ACKs NewReno withholds
    // from the model), then a few ACKs at the same rate: the first samples after the gap
    // are far under the rate, the round's best is not.
    let m = model_fed(1..3_045, |t| {
        (!(3_000..3_040).contains(&t)).then_some(1_250)
    });
    assert_drain_window_at(&m, 1_250_000.0);
}

/// An entry of the session's paths as the coupled controllers see them.
fn entry(id: u8, usable: bool, wants_drain_check: bool) -> super::CoupledPath {
    super::CoupledPath {
        id: PathId(id),
        window: 60_000,
        srtt: Some(Duration::from_millis(20)),
        usable,
        wants_drain_check,
    }
}

#[test]
fn a_path_at_a_steady_rate_checks_when_a_usable_sibling_wants_a_check() {
    let mut c = Adaptive::new(MSS);
    // Its own entry is no sibling; a sibling that cannot carry data is not asked.
    let boundaries = [
        (5_000, [entry(0, true, true), entry(1, true, false)], false),
        (
            10_000,
            [entry(0, true, false), entry(1, false, true)],
            false,
        ),
        (15_000, [entry(0, true, false), entry(1, true, true)], true),
    ];
    for (boundary, paths, checks) in boundaries {
        steady(&mut c, boundary - 4_999, boundary, 1_250_000);
        assert!(!c.wants_drain_check(at(boundary - 1)), "its rate holds");
        ack_among(&mut c, boundary, 1_250_000, false, &paths);
        assert_eq!(c.draining(), checks, "at {boundary} ms");
    }
    assert!(!c.wants_drain_check(at(15_000)), "its own rate held");
}

#[test]
fn the_drain_window_is_fixed_when_the_check_begins() {
    // 10 Mbit/s, then 8 for the last 200 ms before 5 s, when a sibling asks for a check:
    // the best of ten rounds is still 10 Mbit/s, the last two rounds' 8, and the check
    // holds 0.95 of the BDP at 8 plus half the allowance. During the check the model's
    // samples are held back as app-limited (under its best, so not taken) while its rounds
    // move on, so within two rounds its rate now is the best of ten again; the window
    // stays.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 4_800, 1_250_000);
    steady(&mut c, 4_800, 5_000, 1_000_000);
    ack_among(
        &mut c,
        5_000,
        1_000_000,
        false,
        &[entry(0, true, false), entry(1, true, true)],
    );
    assert!(c.draining());
    let held = c.window();
    let at_8_mbit = (DRAIN_WINDOW_GAIN * 20_000.0) as u64 + 11_200;
    assert!(held.abs_diff(at_8_mbit) <= 2, "{held} against {at_8_mbit}");
    steady(&mut c, 5_001, 5_060, 1_000_000);
    assert!(c.draining());
    assert_eq!(c.window(), held);
}

#[test]
fn an_outage_ends_a_check_and_its_window() {
    let mut c = Adaptive::new(MSS);
    capped_then_slower(&mut c);
    steady_ack(&mut c, 5_000, 1_000_000, true);
    assert!(c.draining());
    c.on_persistent_congestion(at(5_010));
    assert!(!c.draining());
}

#[test]
fn any_controller_passes_on_the_adaptive_wish_for_a_check() {
    use super::{AnyController, CongestionKind};
    let mut any = AnyController::new(CongestionKind::Adaptive, MSS);
    let AnyController::Adaptive(c) = &mut any else {
        unreachable!()
    };
    capped_then_slower(c);
    assert!(c.wants_drain_check(at(4_999)));
    assert!(any.wants_drain_check(at(4_999)));
    assert!(!AnyController::new(CongestionKind::NewReno, MSS).wants_drain_check(at(4_999)));
}

/// One ACK at `t_ms` of 1 ms of `rate` bytes/s at a 20 ms minimum RTT, the datagrams having
/// met `queue`, the window in flight.
fn ack_queued(c: &mut Adaptive, t_ms: u64, rate: u64, queue: Duration) {
    let acked = Acked {
        bytes: rate / 1000,
        srtt: Duration::from_millis(20) + queue,
        min_rtt: Duration::from_millis(20),
        bytes_in_flight: c.window(),
        app_limited: false,
        newest_sent: None,
        standing_queue: !queue.is_zero(),
        queue_delay_seen: Some(queue),
    };
    let coupling = Coupling {
        this: PathId(0),
        paths: &[],
    };
    c.on_ack(at(t_ms), &acked, &coupling);
}

#[test]
fn a_rate_fall_lowers_the_cap_at_once_and_a_cut_keeps_the_bdp_of_btlbw() {
    // 40 Mbit/s at 20 ms: BDP 100 000 B, cap 150 000 + 22 400 B.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 5_000_000);
    assert_eq!(c.queue_cap(), Some(172_400));
    // The link falls to 4 Mbit/s and the flight meets 200 ms of queue. Once the
    // delivery-rate samples (a window of 20 ms plus one ACK interval) hold only the new
    // rate, the cap is built on it: 1.5 × 10 000 + 500 000 × 25 ms = 27 500 B.
    for t in 3_000..3_060 {
        ack_queued(&mut c, t, 500_000, Duration::from_millis(200));
    }
    assert_eq!(c.queue_cap(), Some(27_500));
    assert_eq!(c.window(), 27_500);
    // The losses of the flight that met the fall. Half of it is 60 000 B, but the cut
    // keeps the BDP at BtlBw, the best rate of ten rounds (100 000 B), not the fallen
    // cap's: under the cap the window used stays 27 500 B.
    c.on_flight_at_loss(120_000);
    c.on_congestion_event(
        at(3_060),
        &Coupling {
            this: PathId(0),
            paths: &[],
        },
    );
    assert_eq!(c.window(), 27_500);
    // The rate comes back: the cap follows the samples up, and the window used is NewReno's
    // own again, the floor plus what avoidance added (240 ACKs of 5 000 B, a datagram per
    // window acknowledged: 11). A floor at the fallen cap, and a cap that shrank the own
    // window to twice it, would have left 27 500 B to regrow a datagram a round.
    steady(&mut c, 3_060, 3_300, 5_000_000);
    assert_eq!(c.queue_cap(), Some(172_400));
    assert_eq!(c.window(), 100_000 + 11 * MSS);
}

#[test]
fn just_after_a_cut_a_queue_is_no_rate_fall() {
    // As above, but the losses come first: for two smoothed RTTs after the cut (the ACKs
    // say 220 ms) the model's samples miss what NewReno withholds in recovery, so the
    // queue they meet is not taken for a fall; from then on it is.
    let mut c = Adaptive::new(MSS);
    steady(&mut c, 1, 3_000, 5_000_000);
    c.on_flight_at_loss(172_400);
    c.on_congestion_event(
        at(3_000),
        &Coupling {
            this: PathId(0),
            paths: &[],
        },
    );
    for t in 3_000..3_440 {
        ack_queued(&mut c, t, 500_000, Duration::from_millis(200));
    }
    assert_eq!(c.queue_cap(), Some(172_400));
    ack_queued(&mut c, 3_440, 500_000, Duration::from_millis(200));
    assert_eq!(c.queue_cap(), Some(27_500));
}
