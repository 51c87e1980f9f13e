//! The drain check's timing and verdicts (`drain_check.rs`), ACK by ACK: when a check
//! starts, what ends it, and which samples make a verdict.

use super::drain_check::{DRAIN_CHECK_INTERVAL, DRAIN_CHECK_MAX};
use super::{DrainCheck, ModelView};
use crate::time::Time;
use std::time::Duration;

const SRTT: Duration = Duration::from_millis(20);
const HIGH: Option<ModelView> = rate(1e6);
/// Under `RATE_FALL` of `HIGH`.
const LOW: Option<ModelView> = rate(0.8e6);
const MSS: u64 = 1400;
/// Queueing delays under and over the short-queue bound (10 ms and a datagram's time at
/// the rate: 11.75 ms at `LOW`).
const SHORT: Option<Duration> = Some(Duration::from_millis(3));
const STANDING: Option<Duration> = Some(Duration::from_millis(40));

/// The window a check holds in these tests.
const DRAIN_WINDOW: u64 = 30_000;

/// A model whose best rate of ten rounds and rate now are both `bytes_per_s`.
const fn rate(bytes_per_s: f64) -> Option<ModelView> {
    Some(ModelView {
        best_rate: bytes_per_s,
        rate_now: bytes_per_s,
        drain_window: DRAIN_WINDOW,
    })
}

fn at(ms: u64) -> Time {
    Time::from_millis(ms)
}

/// ACKs every millisecond from `from_ms` to `until_ms` (exclusive), all with `sample`,
/// at the rate `LOW`.
fn acks(d: &mut DrainCheck, from_ms: u64, until_ms: u64, sample: Option<Duration>) {
    acks_at(d, from_ms, until_ms, sample, LOW);
}

/// As [`acks`], at `rates`.
fn acks_at(
    d: &mut DrainCheck,
    from_ms: u64,
    until_ms: u64,
    sample: Option<Duration>,
    rates: Option<ModelView>,
) {
    for t in from_ms..until_ms {
        d.on_ack(at(t), SRTT, sample, rates, false);
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

/// What a check started by [`started`] and fed `runs` (ACKs every millisecond from the
/// first instant to the second, with the sample) concluded, read from what it changed:
/// "shared" lifts the cap; "own" takes the rate now as the reference, so the path no
/// longer wants a check; "none" does neither.
fn verdict(runs: &[(u64, u64, Option<Duration>)]) -> &'static str {
    let mut d = started();
    for &(from, until, sample) in runs {
        acks(&mut d, from, until, sample);
    }
    assert!(!d.draining(), "the check has not ended");
    if d.shared() {
        return "shared";
    }
    d.on_ack(at(5_500), SRTT, SHORT, LOW, false);
    if d.wants_check(at(5_500)) {
        "none"
    } else {
        "own"
    }
}

#[test]
fn a_queue_short_for_the_settle_time_is_the_paths_own_and_a_standing_one_is_not() {
    assert_eq!(
        verdict(&[(5_001, 5_050, STANDING), (5_050, 5_066, SHORT)]),
        "own"
    );
    assert_eq!(
        verdict(&[(5_001, 5_050, SHORT), (5_050, 5_066, STANDING)]),
        "shared"
    );
}

#[test]
fn samples_that_changed_within_the_settle_time_give_no_verdict_either_way() {
    // Short (or standing) until 9 ms before the last ACK; at 10 ms the run has settled.
    assert_eq!(
        verdict(&[(5_001, 5_056, SHORT), (5_056, 5_066, STANDING)]),
        "none"
    );
    assert_eq!(
        verdict(&[(5_001, 5_056, STANDING), (5_056, 5_066, SHORT)]),
        "none"
    );
    assert_eq!(
        verdict(&[(5_001, 5_055, SHORT), (5_055, 5_066, STANDING)]),
        "shared"
    );
    assert_eq!(
        verdict(&[(5_001, 5_055, STANDING), (5_055, 5_066, SHORT)]),
        "own"
    );
}

#[test]
fn an_ack_without_a_delay_sample_is_no_evidence() {
    // At and after the deadline, ACKs without a sample neither judge nor break the run ...
    let standing = [
        (5_001, 5_060, STANDING),
        (5_060, 5_069, None),
        (5_069, 5_070, STANDING),
    ];
    assert_eq!(verdict(&standing), "shared");
    let short = [
        (5_001, 5_058, SHORT),
        (5_058, 5_066, None),
        (5_066, 5_067, SHORT),
    ];
    assert_eq!(verdict(&short), "own");
    // ... and without a sample until the longest gap after the deadline, no verdict.
    assert_eq!(
        verdict(&[(5_001, 5_060, STANDING), (5_060, 5_102, None)]),
        "none"
    );
    let mut d = started();
    acks(&mut d, 5_001, 5_060, STANDING);
    acks(&mut d, 5_060, 5_101, None);
    assert!(
        d.draining(),
        "35 ms after the deadline, a sample may still come"
    );
}

#[test]
fn an_ack_long_after_the_last_sample_does_not_judge_on_the_run_before_the_gap() {
    // The queue stood, then the path went idle for 50 ms: the ACK just after the deadline
    // shows a standing queue again, but what it did in between went unseen.
    assert_eq!(
        verdict(&[(5_001, 5_020, STANDING), (5_070, 5_071, STANDING)]),
        "none"
    );
    // A gap inside the check starts a new run: standing before and after a 37 ms gap, but
    // only 5 ms of samples since; a gap of the ACK cadence (35 ms) does not.
    assert_eq!(
        verdict(&[(5_001, 5_024, STANDING), (5_060, 5_066, STANDING)]),
        "none"
    );
    assert_eq!(
        verdict(&[(5_001, 5_026, STANDING), (5_060, 5_066, STANDING)]),
        "shared"
    );
    // Long after the deadline, even a matching sample is too late.
    assert_eq!(
        verdict(&[(5_001, 5_060, STANDING), (5_200, 5_201, STANDING)]),
        "none"
    );
}

#[test]
fn a_clock_gone_back_ends_the_check_with_no_verdict() {
    assert_eq!(
        verdict(&[(5_001, 5_060, STANDING), (1, 2, STANDING)]),
        "none"
    );
}

#[test]
fn a_check_lasts_at_most_its_longest_whatever_the_round_trip() {
    // At a 900 ms SRTT two round trips and an ACK delay are 1.825 s, half a round trip
    // 450 ms: both over their caps (1.25 s, 312.5 ms).
    let srtt = Duration::from_millis(900);
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), srtt, SHORT, HIGH, false);
    d.on_ack(at(5_000), srtt, STANDING, LOW, false);
    let end = 5_000 + DRAIN_CHECK_MAX.as_millis() as u64;
    for t in (5_001..end).step_by(10) {
        let sample = if t < end - 400 { STANDING } else { SHORT };
        d.on_ack(at(t), srtt, sample, LOW, false);
        assert!(d.draining(), "at {t} ms");
    }
    d.on_ack(at(end), srtt, SHORT, LOW, false);
    assert!(!d.draining());
    // Its settle time is capped too, so a queue short for the check's last 400 ms is
    // found the path's own (which leaves no reason to check).
    assert!(!d.shared() && !d.wants_check(at(end)));
}

#[test]
fn a_path_checks_with_a_sibling_that_wants_a_check() {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, SHORT, HIGH, false);
    assert!(!d.wants_check(at(1)));
    d.on_ack(at(5_000), SRTT, SHORT, HIGH, false);
    assert!(!d.draining(), "its rate held and no sibling wants a check");
    d.on_ack(at(10_000), SRTT, SHORT, HIGH, true);
    assert!(d.draining(), "a sibling wants one: the two drain together");
    assert!(
        !d.wants_check(at(10_000)),
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
    assert!(d.wants_check(at(2)), "the rate fell");
    // A check that finds the queue the path's own takes the rate now as the reference:
    // no reason left, from the verdict on.
    d.on_ack(at(5_000), SRTT, SHORT, LOW, false);
    acks(&mut d, 5_001, 5_066, SHORT);
    assert!(!d.draining());
    assert!(!d.wants_check(at(5_065)));
    // One that finds another flow's lifts the cap: a reason to check every interval.
    d.on_ack(at(6_000), SRTT, SHORT, rate(0.6e6), false);
    assert!(d.wants_check(at(6_000)));
    d.on_ack(at(10_000), SRTT, STANDING, rate(0.6e6), false);
    acks(&mut d, 10_001, 10_067, STANDING);
    assert!(d.shared());
    d.on_ack(at(10_100), SRTT, STANDING, LOW, false);
    assert!(d.wants_check(at(10_100)), "the cap is lifted");
    // A path gone quiet stops asking its siblings once a whole interval passed without
    // an ACK (its last came in the 10-15 s one).
    assert!(d.wants_check(at(19_999)));
    assert!(!d.wants_check(at(20_000)));
    d.reset();
    assert!(!d.wants_check(at(10_100)));
}

#[test]
fn a_model_that_lost_its_rate_wants_no_check() {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, SHORT, HIGH, false);
    d.on_ack(at(2), SRTT, SHORT, LOW, false);
    assert!(d.wants_check(at(2)));
    d.on_ack(at(3), SRTT, SHORT, None, false);
    assert!(!d.wants_check(at(3)));
}

#[test]
fn the_datagram_in_service_on_a_slow_path_is_no_standing_queue() {
    // An 18 ms queueing delay: a short queue at 1 Mbit/s (a datagram takes 11.2 ms; the
    // bound is 10 + 11.2 ms), a standing one at 10 Mbit/s (the bound is 11.12 ms).
    let delay = Some(Duration::from_millis(18));
    for (bytes_per_s, own) in [(125_000.0, true), (1_250_000.0, false)] {
        let mut d = DrainCheck::new(MSS);
        d.on_ack(at(1), SRTT, delay, rate(bytes_per_s / 0.8), false);
        d.on_ack(at(5_000), SRTT, delay, rate(bytes_per_s), false);
        acks_at(&mut d, 5_001, 5_066, delay, rate(bytes_per_s));
        assert!(!d.draining());
        assert_eq!(d.shared(), !own, "at {bytes_per_s} B/s");
        assert_eq!(d.wants_check(at(5_065)), !own, "at {bytes_per_s} B/s");
    }
    // The bound takes the rate now, not the best of ten rounds: right after the link fell
    // to 1 Mbit/s, 18 ms is still the datagram in service.
    let mut d = DrainCheck::new(MSS);
    let fallen = Some(ModelView {
        best_rate: 1_250_000.0,
        rate_now: 125_000.0,
        drain_window: DRAIN_WINDOW,
    });
    d.on_ack(at(1), SRTT, delay, rate(1_250_000.0 / 0.8), false);
    d.on_ack(at(5_000), SRTT, delay, fallen, false);
    acks_at(&mut d, 5_001, 5_066, delay, fallen);
    assert!(!d.draining() && !d.shared());
}

#[test]
fn a_rate_too_low_for_a_datagrams_time_to_count_reads_every_queue_as_short() {
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, STANDING, rate(1.0), false);
    d.on_ack(at(5_000), SRTT, STANDING, rate(1e-300), false);
    assert!(d.draining());
    let huge = Some(Duration::from_secs(1 << 40));
    acks_at(&mut d, 5_001, 5_066, huge, rate(1e-300));
    assert!(!d.draining() && !d.shared());
}

#[test]
fn the_fall_is_judged_on_the_best_rate_of_ten_rounds() {
    // The rate now dips (a round or two of a slower link, or a recovery period) while the
    // best of ten rounds holds: no reason to check.
    let mut d = DrainCheck::new(MSS);
    d.on_ack(at(1), SRTT, SHORT, HIGH, false);
    let dipped = Some(ModelView {
        best_rate: 1e6,
        rate_now: 0.5e6,
        drain_window: DRAIN_WINDOW,
    });
    d.on_ack(at(5_000), SRTT, SHORT, dipped, false);
    assert!(!d.draining() && !d.wants_check(at(5_000)));
}

#[test]
fn a_check_holds_the_window_given_when_it_began() {
    let mut d = started();
    assert_eq!(d.window(), Some(DRAIN_WINDOW));
    let moved = Some(ModelView {
        best_rate: 1e6,
        rate_now: 1e6,
        drain_window: 2 * DRAIN_WINDOW,
    });
    for t in 5_001..5_060 {
        d.on_ack(at(t), SRTT, STANDING, moved, false);
    }
    assert_eq!(d.window(), Some(DRAIN_WINDOW));
    d.reset();
    assert_eq!(d.window(), None, "a reset ends the check");
    let mut d = started();
    acks(&mut d, 5_001, 5_066, SHORT);
    assert_eq!(d.window(), None, "the check ended");
}

#[test]
fn a_round_trip_too_long_for_a_verdict_starts_no_check() {
    // The check lasts at most 1.25 s and sees its own effect about a round trip in; with
    // the settle time (at most 312.5 ms) that leaves SRTTs up to 937.5 ms.
    for (srtt_ms, checked) in [(937, true), (938, false), (5_000, false)] {
        let srtt = Duration::from_millis(srtt_ms);
        let mut d = DrainCheck::new(MSS);
        d.on_ack(at(1), srtt, SHORT, HIGH, false);
        d.on_ack(at(5_000), srtt, SHORT, LOW, false);
        assert_eq!(d.draining(), checked, "SRTT {srtt_ms} ms");
        assert_eq!(d.wants_check(at(5_000)), checked, "SRTT {srtt_ms} ms");
        let mut d = DrainCheck::new(MSS);
        d.on_ack(at(1), srtt, SHORT, HIGH, false);
        d.on_ack(at(5_000), srtt, SHORT, HIGH, true);
        assert_eq!(
            d.draining(),
            checked,
            "a sibling's check, SRTT {srtt_ms} ms"
        );
    }
}
