//! The drain check's timing and verdicts (`drain_check.rs`), ACK by ACK: when a check
//! starts, what ends it, and which samples make a verdict.

use super::DrainCheck;
use super::drain_check::{DRAIN_CHECK_INTERVAL, DRAIN_CHECK_MAX};
use crate::time::Time;
use std::time::Duration;

const SRTT: Duration = Duration::from_millis(20);
const HIGH: Option<f64> = Some(1e6);
/// Under `RATE_FALL` of `HIGH`.
const LOW: Option<f64> = Some(0.8e6);
const MSS: u64 = 1400;
/// Queueing delays under and over the short-queue bound (10 ms and a datagram's time at
/// the rate: 11.75 ms at `LOW`).
const SHORT: Option<Duration> = Some(Duration::from_millis(3));
const STANDING: Option<Duration> = Some(Duration::from_millis(40));

fn at(ms: u64) -> Time {
    Time::from_millis(ms)
}

/// ACKs every millisecond from `from_ms` to `until_ms` (exclusive), all with `sample`.
fn acks(d: &mut DrainCheck, from_ms: u64, until_ms: u64, sample: Option<Duration>) {
    for t in from_ms..until_ms {
        d.on_ack(at(t), SRTT, sample, LOW, false);
    }
}

/// A check that knows the high rate and starts at 5 s, its rate having fallen. At a 20 ms
/// SRTT its deadline is 5 065 ms, its settle time 10 ms and its longest gap between
/// samples 35 ms (with the 25 ms ACK delay).
fn started() -> DrainCheck {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, SHORT, HIGH, false);
    d.on_ack(at(5_000), SRTT, STANDING, LOW, false);
    assert!(d.draining());
    d
}

#[test]
fn checks_start_at_the_first_ack_on_the_sessions_grid_once_the_rate_fell() {
    let five = DRAIN_CHECK_INTERVAL.as_millis() as u64;
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, STANDING, HIGH, false);
    d.on_ack(at(five), SRTT, STANDING, None, false);
    assert!(!d.draining(), "the model has not found the rate");
    d.on_ack(at(2 * five), SRTT, STANDING, HIGH, false);
    assert!(!d.draining(), "the rate has not fallen");
    d.on_ack(at(3 * five + 150), SRTT, STANDING, LOW, false);
    assert!(
        !d.draining(),
        "150 ms after the boundary: out of step with the other paths"
    );
    d.on_ack(at(4 * five - 1), SRTT, STANDING, LOW, false);
    assert!(!d.draining(), "mid-interval");
    d.on_ack(at(4 * five + 10), SRTT, STANDING, LOW, false);
    assert!(
        d.draining(),
        "the first ACK of the interval, within the slack"
    );
    acks(&mut d, 4 * five + 11, 4 * five + 76, STANDING);
    assert!(!d.draining() && d.shared());
    // The cap is lifted (a reason to check) and this is within the slack, but the
    // interval has had its check.
    d.on_ack(at(4 * five + 80), SRTT, STANDING, LOW, false);
    assert!(!d.draining(), "one check an interval");
}

#[test]
fn a_queue_short_for_the_settle_time_is_the_paths_own_and_a_standing_one_is_not() {
    let mut d = started();
    acks(&mut d, 5_001, 5_050, STANDING);
    acks(&mut d, 5_050, 5_066, SHORT);
    assert!(!d.draining() && !d.shared());
    let mut d = started();
    acks(&mut d, 5_001, 5_050, SHORT);
    acks(&mut d, 5_050, 5_066, STANDING);
    assert!(!d.draining() && d.shared());
}

#[test]
fn samples_that_changed_within_the_settle_time_give_no_verdict_either_way() {
    // Short until 9 ms before the deadline: not yet a standing queue.
    let mut d = started();
    acks(&mut d, 5_001, 5_056, SHORT);
    acks(&mut d, 5_056, 5_066, STANDING);
    assert!(!d.draining() && !d.shared());
    // Standing until 9 ms before the deadline: not yet a drained one (a verdict of "own"
    // would count one of the two in a row that bring the cap back).
    let mut d = started();
    acks(&mut d, 5_001, 5_056, STANDING);
    acks(&mut d, 5_056, 5_066, SHORT);
    assert!(!d.draining() && !d.shared());
    acks(&mut d, 10_000, 10_066, STANDING);
    assert!(d.shared());
    // Had the check above counted, this one would be the second in a row.
    acks(&mut d, 15_000, 15_066, SHORT);
    assert!(d.shared());
    acks(&mut d, 20_000, 20_066, SHORT);
    assert!(!d.shared());
}

#[test]
fn an_ack_without_a_delay_sample_is_no_evidence() {
    let mut d = started();
    acks(&mut d, 5_001, 5_060, STANDING);
    // At and after the deadline, ACKs without a sample neither judge nor break the run.
    acks(&mut d, 5_060, 5_069, None);
    assert!(d.draining());
    d.on_ack(at(5_069), SRTT, STANDING, LOW, false);
    assert!(!d.draining() && d.shared());
    // Without a sample at all until the longest gap after the deadline: no verdict.
    let mut d = started();
    acks(&mut d, 5_001, 5_060, STANDING);
    acks(&mut d, 5_060, 5_101, None);
    assert!(d.draining());
    d.on_ack(at(5_101), SRTT, None, LOW, false);
    assert!(!d.draining() && !d.shared());
    // Nor do they break a run of short ones: two checks in a row whose queue drained, the
    // first with sample-less ACKs at its end, bring the cap back.
    let mut d = started();
    acks(&mut d, 5_001, 5_066, STANDING);
    assert!(d.shared());
    acks(&mut d, 10_000, 10_058, SHORT);
    acks(&mut d, 10_058, 10_066, None);
    d.on_ack(at(10_066), SRTT, SHORT, LOW, false);
    acks(&mut d, 15_000, 15_066, SHORT);
    assert!(!d.shared());
}

#[test]
fn an_ack_long_after_the_last_sample_does_not_judge_on_the_run_before_the_gap() {
    // The queue stood, then the path went idle for 50 ms: the ACK just after the deadline
    // shows a standing queue again, but what it did in between went unseen.
    let mut d = started();
    acks(&mut d, 5_001, 5_020, STANDING);
    d.on_ack(at(5_070), SRTT, STANDING, LOW, false);
    assert!(!d.draining() && !d.shared());
    // A gap inside the check starts a new run: standing before and after a 36 ms gap, but
    // only 5 ms of samples since ...
    let mut d = started();
    acks(&mut d, 5_001, 5_024, STANDING);
    acks(&mut d, 5_060, 5_066, STANDING);
    assert!(!d.draining() && !d.shared());
    // ... while a gap of the ACK cadence does not.
    let mut d = started();
    acks(&mut d, 5_001, 5_026, STANDING);
    acks(&mut d, 5_060, 5_066, STANDING);
    assert!(!d.draining() && d.shared());
    // Long after the deadline, even a matching sample is too late.
    let mut d = started();
    acks(&mut d, 5_001, 5_060, STANDING);
    d.on_ack(at(5_200), SRTT, STANDING, LOW, false);
    assert!(!d.draining() && !d.shared());
}

#[test]
fn a_clock_gone_back_ends_the_check_with_no_verdict() {
    let mut d = started();
    acks(&mut d, 5_001, 5_060, STANDING);
    d.on_ack(at(1), SRTT, STANDING, LOW, false);
    assert!(!d.draining() && !d.shared());
}

#[test]
fn a_check_lasts_at_most_its_longest_whatever_the_round_trip() {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), Duration::MAX, SHORT, HIGH, false);
    d.on_ack(at(5_000), Duration::MAX, SHORT, LOW, false);
    let end = 5_000 + DRAIN_CHECK_MAX.as_millis() as u64;
    for t in (5_001..end).step_by(10) {
        d.on_ack(at(t), Duration::MAX, SHORT, LOW, false);
        assert!(d.draining(), "at {t} ms");
    }
    d.on_ack(at(end), Duration::MAX, SHORT, LOW, false);
    assert!(!d.draining());
}

#[test]
fn a_path_checks_with_a_sibling_that_wants_a_check() {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, SHORT, HIGH, false);
    assert!(!d.wants_check());
    d.on_ack(at(5_000), SRTT, SHORT, HIGH, false);
    assert!(!d.draining(), "its rate held and no sibling wants a check");
    d.on_ack(at(10_000), SRTT, SHORT, HIGH, true);
    assert!(d.draining(), "a sibling wants one: the two drain together");
    assert!(
        !d.wants_check(),
        "the check is the sibling's, not this path's"
    );
    acks(&mut d, 10_001, 10_066, SHORT);
    assert!(!d.draining() && !d.shared());
}

#[test]
fn a_path_wants_a_check_while_its_rate_is_down_or_its_cap_lifted() {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, SHORT, HIGH, false);
    d.on_ack(at(2), SRTT, SHORT, LOW, false);
    assert!(d.wants_check(), "the rate fell");
    // A check that finds the queue the path's own takes the rate now as the reference.
    d.on_ack(at(5_000), SRTT, SHORT, LOW, false);
    acks(&mut d, 5_001, 5_067, SHORT);
    assert!(!d.wants_check());
    // One that finds another flow's lifts the cap: a reason to check every interval.
    acks(&mut d, 5_067, 5_100, STANDING);
    d.on_ack(at(6_000), SRTT, SHORT, Some(0.6e6), false);
    assert!(d.wants_check());
    d.on_ack(at(10_000), SRTT, STANDING, Some(0.6e6), false);
    acks(&mut d, 10_001, 10_067, STANDING);
    assert!(d.shared());
    d.on_ack(at(10_100), SRTT, STANDING, LOW, false);
    assert!(d.wants_check(), "the cap is lifted");
    d.reset();
    assert!(!d.wants_check());
}

#[test]
fn the_datagram_in_service_on_a_slow_path_is_no_standing_queue() {
    // An 18 ms queueing delay: a short queue at 1 Mbit/s (a datagram takes 11.2 ms; the
    // bound is 10 + 11.2 ms), a standing one at 10 Mbit/s (the bound is 11.12 ms).
    let delay = Some(Duration::from_millis(18));
    for (rate, own) in [(125_000.0, true), (1_250_000.0, false)] {
        let mut d = DrainCheck::new(MSS);
        d.on_ack(at(1), SRTT, delay, Some(rate / 0.8), false);
        d.on_ack(at(5_000), SRTT, delay, Some(rate), false);
        for t in 5_001..5_066 {
            d.on_ack(at(t), SRTT, delay, Some(rate), false);
        }
        assert!(!d.draining());
        assert_eq!(d.shared(), !own, "at {rate} B/s");
        // A verdict of "own" takes the rate now as the reference: no more reason to check.
        d.on_ack(at(5_100), SRTT, delay, Some(rate), false);
        assert_eq!(d.wants_check(), !own, "at {rate} B/s");
    }
}

#[test]
fn a_rate_too_low_for_a_datagrams_time_to_count_reads_every_queue_as_short() {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, STANDING, Some(1.0), false);
    d.on_ack(at(5_000), SRTT, STANDING, Some(1e-300), false);
    assert!(d.draining());
    for t in 5_001..5_066 {
        d.on_ack(
            at(t),
            SRTT,
            Some(Duration::from_secs(1 << 40)),
            Some(1e-300),
            false,
        );
    }
    assert!(!d.draining() && !d.shared());
}
