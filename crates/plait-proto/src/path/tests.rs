//! A path's loss detection: late datagrams are not link loss, and the probes sent into an
//! outage take no room in the window once the path answers again, nor count in its loss rate.

use super::*;
use crate::cc::CoupledPath;
use std::collections::VecDeque;

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

/// [`path`] under `adaptive`, the default for streams.
fn adaptive_path() -> Path {
    Path::new(
        PathId(0),
        Time::ZERO,
        PathHints::default(),
        LivenessConfig::default(),
        25 * MS,
        MIN_PAIR_BYTES,
        (CongestionKind::Adaptive, 1400),
    )
}

/// This path alone, as the congestion controllers see it.
fn alone(p: &Path) -> [CoupledPath; 1] {
    [CoupledPath {
        id: PathId(0),
        window: p.cc.window(),
        srtt: p.rtt.srtt(),
        usable: true,
        wants_drain_check: false,
    }]
}

fn ack(p: &mut Path, now: Time, ranges: &[RangeInclusive<PathSeq>]) -> AckOutcome {
    ack_timestamped(p, now, ranges, &[], &mut OwdReference::default())
}

/// [`ack`] with receive timestamps `(seq, µs)`, relative to a lasting `owd_ref`.
fn ack_timestamped(
    p: &mut Path,
    now: Time,
    ranges: &[RangeInclusive<PathSeq>],
    timestamps: &[(PathSeq, u32)],
    owd_ref: &mut OwdReference,
) -> AckOutcome {
    let largest = *ranges[0].end();
    let paths = alone(p);
    let coupling = Coupling {
        this: PathId(0),
        paths: &paths,
    };
    p.on_ack(
        now,
        largest,
        Duration::ZERO,
        ranges.iter().cloned(),
        timestamps.iter().copied(),
        owd_ref,
        &coupling,
        Return::OwnPath,
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

/// Sends the probe pair due at `now`, if any; returns the probe ids sent.
fn send_due_probes(p: &mut Path, now: Time, next_id: &mut u32) -> Vec<u32> {
    let ids: Vec<u32> = (0..p.probes_due(now))
        .map(|_| {
            *next_id += 1;
            p.on_sent(now, 60, true, Some(*next_id), None);
            *next_id
        })
        .collect();
    if !ids.is_empty() {
        p.on_probes_sent(now);
    }
    ids
}

#[test]
fn probes_sent_into_an_outage_take_no_room_when_the_path_answers_again() {
    let mut p = path();
    let mut id = 0;
    for probe in send_due_probes(&mut p, at(0), &mut id) {
        p.on_probe_ack(at(20), probe);
    }
    assert_eq!(p.state, PathState::Active);
    p.on_sent(at(30), 1200, true, None, Some(0));
    ack(&mut p, at(50), &[2..=2]);
    // A blackhole from 60 ms: what goes out is never answered, and the path goes down.
    p.on_sent(at(60), 1200, true, None, Some(1));
    let mut now = at(60);
    while p.state != PathState::Down {
        send_due_probes(&mut p, now, &mut id);
        now = p.next_timeout().expect("a silent path has a timer");
        let paths = alone(&p);
        let coupling = Coupling {
            this: PathId(0),
            paths: &paths,
        };
        p.on_timeout(now, &coupling);
    }
    assert_eq!(p.bytes_in_flight, 0, "what was in flight was given up");
    // Five seconds of probes into the blackhole.
    let end = now + Duration::from_secs(5);
    while now < end {
        send_due_probes(&mut p, now, &mut id);
        now = p.next_timeout().expect("a down path probes");
    }
    assert!(p.stats().probes_sent > 90, "{}", p.stats().probes_sent);
    assert_eq!(p.bytes_in_flight, 0, "probes of a down path hold no room");
    // The blackhole ends: the next pair is answered and the path has its whole window.
    let pair = send_due_probes(&mut p, now, &mut id);
    for probe in pair {
        p.on_probe_ack(now + 20 * MS, probe);
    }
    assert_eq!(p.state, PathState::Active);
    assert!(
        p.bytes_in_flight + 1200 <= p.cc.window(),
        "room for a data datagram: {} in flight, window {}",
        p.bytes_in_flight,
        p.cc.window()
    );
    // Data again: its ACK declares the outage's probes lost, which is no loss rate of the
    // path that came back (nor a reason to call it degraded).
    let seq = p.on_sent(now + 30 * MS, 1200, true, None, Some(2));
    let before = p.stats().lost;
    ack(&mut p, now + 50 * MS, &[seq..=seq]);
    assert!(
        p.stats().lost > before + 90,
        "the outage's probes are resolved"
    );
    assert_eq!(p.loss_rate, 0.0);
    assert_eq!(p.state, PathState::Active);
}

/// One datagram a millisecond for `ms` milliseconds from `start`, every tenth lost on the
/// link if `lossy`; each other one arriving `BASE_OWD + queue` ms after it is sent
/// (timestamped on the same clock) and acknowledged alone `BASE_OWD` ms later.
fn link(p: &mut Path, owd_ref: &mut OwdReference, start: u32, ms: u32, queue: u32, lossy: bool) {
    const BASE_OWD: u32 = 20;
    let mut acks: VecDeque<(Time, PathSeq, u32)> = VecDeque::new();
    for t in start..start + ms + 2 * BASE_OWD + queue {
        while acks.front().is_some_and(|(at_, _, _)| *at_ <= at(t)) {
            let (now, seq, recv_us) = acks.pop_front().expect("front");
            ack_timestamped(p, now, &[seq..=seq], &[(seq, recv_us)], owd_ref);
        }
        if t < start + ms {
            let seq = p.on_sent(at(t), 1200, true, None, Some(u64::from(t)));
            if !lossy || seq % 10 != 9 {
                let arrive = at(t + BASE_OWD + queue);
                acks.push_back((arrive + MS * BASE_OWD, seq, arrive.wire_micros()));
            }
        }
    }
}

#[test]
fn a_lossy_link_s_long_queue_does_not_hand_its_path_back_to_new_reno() {
    let mut p = adaptive_path();
    let mut owd_ref = OwdReference::default();
    // 10 % loss with a short queue: the link's own loss, so BBR.
    link(&mut p, &mut owd_ref, 0, 1_000, 0, true);
    assert_eq!(p.cc.name(), "adaptive (bbr)");
    // The same link behind a 50 ms queue (as BBR's start-up builds in a deep buffer): its
    // losses may be the queue's, so neither they nor the deliveries beside them are
    // evidence. Counting the deliveries as clean read about 1,200 datagrams as a clean
    // link.
    link(&mut p, &mut owd_ref, 1_000, 3_000, 50, true);
    assert_eq!(p.cc.name(), "adaptive (bbr)");
    // A clean link with a short queue is evidence again: back to NewReno.
    link(&mut p, &mut owd_ref, 4_000, 1_500, 0, false);
    assert_eq!(p.cc.name(), "adaptive (newreno)");
}

#[test]
fn a_loss_declared_behind_a_long_queue_is_no_evidence_either_way() {
    let loss = |shallow| PendingLoss {
        seq: 7,
        declared: at(100),
        overtaken_by: 3,
        by_packets: true,
        by_time: false,
        link_sample: true,
        data: true,
        on_ack: true,
        shallow,
    };
    let mut tally = LinkLossTally::default();
    tally.add(&loss(false));
    assert_eq!(
        (tally.evidence, tally.evidence_link, tally.samples),
        (0, 0, 0)
    );
    tally.add(&loss(true));
    assert_eq!(
        (tally.evidence, tally.evidence_link, tally.samples),
        (1, 1, 1)
    );
}

#[test]
fn the_prompt_ack_model_lasts_while_marked_datagrams_go_out() {
    // docs/protocol.md#ack-soon: the controller's model counts the prompt hold from the
    // first datagram marked ACK_SOON, and the usual one again once no marked datagram went
    // out for `max_ack_delay` (25 ms here) when another ack-eliciting one goes.
    let mut p = adaptive_path();
    let mut owd_ref = OwdReference::default();
    link(&mut p, &mut owd_ref, 0, 3_000, 0, false);
    assert_eq!(p.cc.name(), "adaptive (newreno)");
    assert!(p.cc.wants_prompt_acks(), "the queue cap holds");
    assert!(!p.cc.prompt_acks());
    p.on_ack_soon(at(3_100), true);
    assert!(p.cc.prompt_acks());
    // Within 25 ms of the mark an unmarked datagram (packet-mode DATA beside the streams)
    // changes nothing: the peer's next ACK is still prompt. Nor does an ACK-only one.
    p.on_sent(at(3_120), 1200, true, None, None);
    p.on_sent(at(3_130), 60, false, None, None);
    assert!(p.cc.prompt_acks());
    // Later than that, the peer holds its ACKs as usual again.
    p.on_sent(at(3_131), 1200, true, None, None);
    assert!(!p.cc.prompt_acks());
    // A datagram that could ask and does not ends it at once.
    p.on_ack_soon(at(3_200), true);
    assert!(p.cc.prompt_acks());
    p.on_ack_soon(at(3_201), false);
    assert!(!p.cc.prompt_acks());
}
