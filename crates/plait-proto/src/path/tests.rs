//! A path's loss detection against reordering: late datagrams are not link loss.

use super::*;
use crate::cc::CoupledPath;

const MS: Duration = Duration::from_millis(1);

fn at(ms: u32) -> Time {
    Time::ZERO + MS * ms
}

fn path() -> Path {
    Path::new(
        PathId(0),
        Time::ZERO,
        PathHints::default(),
        LivenessConfig::default(),
        25 * MS,
        MIN_PAIR_BYTES,
        (CongestionKind::NewReno, 1400),
    )
}

fn ack(p: &mut Path, now: Time, ranges: &[RangeInclusive<PathSeq>]) -> AckOutcome {
    let largest = *ranges[0].end();
    let paths = [CoupledPath {
        id: PathId(0),
        window: p.cc.window(),
        srtt: p.rtt.srtt(),
        usable: true,
    }];
    let coupling = Coupling {
        this: PathId(0),
        paths: &paths,
    };
    p.on_ack(
        now,
        largest,
        Duration::ZERO,
        ranges.iter().cloned(),
        std::iter::empty(),
        &mut OwdReference::default(),
        &coupling,
    )
}

/// Eleven datagrams 1 ms apart, the first acknowledged at 20 ms; then 5..=10 at 31 ms,
/// which declares 1..=4 lost by the packet threshold.
fn four_declared_lost() -> Path {
    let mut p = path();
    for i in 0..=10 {
        p.on_sent(at(i), 1200, true, None, Some(u64::from(i)));
    }
    ack(&mut p, at(20), &[0..=0]);
    let out = ack(&mut p, at(31), &[5..=10, 0..=0]);
    assert_eq!(out.newly_lost, 4);
    p
}

#[test]
fn a_late_datagram_acknowledged_after_its_loss_is_not_link_loss_and_widens_the_threshold() {
    let mut p = four_declared_lost();
    assert_eq!(p.shallow_loss_rate, 0.0, "a loss waits for confirmation");
    ack(&mut p, at(33), &[0..=10]);
    assert_eq!(p.stats().spurious_losses, 4);
    assert_eq!(p.late.packet_threshold(), 10, "9 overtook the first one");
    assert_eq!(p.late.extra_time(), 2 * MS);
    // Long after, nothing is left to confirm: the link lost nothing.
    p.on_sent(at(200), 1200, true, None, Some(11));
    ack(&mut p, at(220), &[11..=11, 0..=10]);
    assert_eq!(p.shallow_loss_rate, 0.0);
    assert_eq!(p.loss_rate, 0.0, "the loss-rate samples were taken back");
}

#[test]
fn a_loss_no_ack_names_is_confirmed_after_a_round_trip_and_then_counts() {
    let mut p = four_declared_lost();
    assert_eq!(p.shallow_loss_rate, 0.0);
    // Within one smoothed RTT and the ACK delay: still pending.
    p.on_sent(at(40), 1200, true, None, Some(11));
    ack(&mut p, at(45), &[11..=11, 5..=10, 0..=0]);
    assert_eq!(p.shallow_loss_rate, 0.0);
    p.on_sent(at(100), 1200, true, None, Some(12));
    ack(&mut p, at(120), &[11..=12, 5..=10, 0..=0]);
    assert!(p.shallow_loss_rate > 0.1, "{}", p.shallow_loss_rate);
    assert_eq!(p.stats().spurious_losses, 0);
    assert_eq!(p.late.packet_threshold(), late::BASE_PACKET_THRESHOLD);
}
