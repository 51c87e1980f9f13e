//! The `adaptive` controller's switching rule (`adaptive.rs`): which evidence moves a path
//! to BBR and back, and which does not.

use super::adaptive::{
    CLEAN_LOSS, ENTER_EVIDENCE, EXIT_EVIDENCE, LINK_LOSS, LLR_LINK_LOSS, LLR_NO_LINK_LOSS,
};
use super::{Acked, Adaptive, CongestionController, Coupling};
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
        };
        c.on_ack(at(i * 20), &acked, &coupling);
    }
    let bbr_window = c.window();
    // Under 0.25 %: 1,200 clean datagrams are not quite enough, 1,300 are.
    assert!(!feed(&mut c, 48, 25, 0));
    assert!(feed(&mut c, 4, 25, 0));
    assert!(!c.is_bbr());
    assert_eq!(c.window(), bbr_window);
    assert_eq!(c.switches(), 2);
    // In congestion avoidance: a window of ACKs adds one datagram, not a window.
    let acked = Acked {
        bytes: bbr_window,
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        bytes_in_flight: bbr_window,
        app_limited: false,
    };
    c.on_ack(at(10_000), &acked, &coupling);
    assert_eq!(c.window(), bbr_window + MSS);
}
