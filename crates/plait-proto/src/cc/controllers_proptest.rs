//! Property test of every controller (`CongestionKind::ALL`): random sequences of ACKs,
//! flights at a loss, congestion events, undos, persistent congestion and link-loss samples
//! (which move `adaptive` between NewReno and BBR), at random (also backwards) times, with
//! random couplings (paths without an RTT, zero and huge windows, unusable paths, `this`
//! missing or repeated), random and absurd `mss`, SRTTs from zero to `Duration::MAX`.
//! Checks the module invariant after every operation: the controller's own window (not
//! [`AnyController`]'s clamped one) stays within [`MIN_WINDOW`]`..=`[`MAX_WINDOW`], a
//! congestion event never raises it, a pacing rate (BBR's) is finite and positive, and
//! nothing panics.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
enum Op {
    Ack {
        bytes: u64,
        srtt: Duration,
        min_rtt: Duration,
        app_limited: bool,
        /// Send time of the newest acknowledged datagram, nanoseconds (any, even ahead of
        /// the clock).
        newest_sent: Option<u64>,
        /// Whether the path shows a standing queue.
        standing_queue: bool,
        /// The shortest queueing delay a datagram of this ACK met (`None`: no delay sample).
        queue_delay_seen: Option<Duration>,
        bytes_in_flight: u64,
        paths: Vec<CoupledPath>,
    },
    /// The bytes in flight when the next congestion event's losses were found.
    FlightAtLoss(u64),
    Loss(Vec<CoupledPath>),
    Undo,
    /// One batch of resolved datagrams, `link_lost` of them lost on the link (any counts,
    /// even more losses than datagrams).
    LinkSample {
        resolved: u32,
        link_lost: u32,
    },
    Persistent,
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        any::<u64>().prop_map(Duration::from_nanos),
        (0u64..2_000_000).prop_map(Duration::from_micros),
    ]
}

fn bytes() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0u64..200_000,]
}

fn coupled_path() -> impl Strategy<Value = CoupledPath> {
    (
        0u8..4,
        bytes(),
        prop::option::of(duration()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(id, window, srtt, usable, wants_drain_check)| CoupledPath {
                id: PathId(id),
                window,
                srtt,
                usable,
                wants_drain_check,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    let paths = || prop::collection::vec(coupled_path(), 0..5);
    prop_oneof![
        6 => (
            bytes(),
            duration(),
            duration(),
            any::<bool>(),
            any::<Option<u64>>(),
            (any::<bool>(), prop::option::of(duration())),
            bytes(),
            paths(),
        )
            .prop_map(
                |(
                    bytes,
                    srtt,
                    min_rtt,
                    app_limited,
                    newest_sent,
                    (standing_queue, queue_delay_seen),
                    bytes_in_flight,
                    paths,
                )| {
                    Op::Ack {
                        bytes,
                        srtt,
                        min_rtt,
                        app_limited,
                        newest_sent,
                        standing_queue,
                        queue_delay_seen,
                        bytes_in_flight,
                        paths,
                    }
                }
            ),
        1 => bytes().prop_map(Op::FlightAtLoss),
        2 => paths().prop_map(Op::Loss),
        1 => Just(Op::Undo),
        2 => (any::<u32>(), prop_oneof![Just(0u32), Just(1u32), any::<u32>()])
            .prop_map(|(resolved, link_lost)| Op::LinkSample { resolved, link_lost }),
        1 => Just(Op::Persistent),
    ]
}

fn time_step() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..2_000_000_000,
        1 => any::<u64>(),
    ]
}

fn mss() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(u64::MAX), 1u64..=65_535, any::<u64>()]
}

proptest! {
    #[test]
    fn windows_stay_in_bounds(
        mss in mss(),
        this in 0u8..4,
        ops in prop::collection::vec((time_step(), op()), 0..64),
    ) {
        for &kind in CongestionKind::ALL {
            let mut cc = AnyController::new(kind, mss);
            let mut now = Time::ZERO;
            for (step, op) in &ops {
                // Mostly forward; a full-range step may wrap the clock backwards.
                now = Time::from_nanos(now.as_nanos().wrapping_add(*step));
                match op {
                    Op::Ack {
                        bytes,
                        srtt,
                        min_rtt,
                        app_limited,
                        newest_sent,
                        standing_queue,
                        queue_delay_seen,
                        bytes_in_flight,
                        paths,
                    } => {
                        let acked = Acked {
                            bytes: *bytes,
                            srtt: *srtt,
                            min_rtt: *min_rtt,
                            bytes_in_flight: *bytes_in_flight,
                            app_limited: *app_limited,
                            newest_sent: newest_sent.map(Time::from_nanos),
                            standing_queue: *standing_queue,
                            queue_delay_seen: *queue_delay_seen,
                        };
                        cc.on_ack(now, &acked, &Coupling { this: PathId(this), paths });
                    }
                    Op::FlightAtLoss(flight) => cc.on_flight_at_loss(*flight),
                    Op::Loss(paths) => {
                        let before = cc.inner().window();
                        cc.on_congestion_event(now, &Coupling { this: PathId(this), paths });
                        let after = cc.inner().window();
                        prop_assert!(
                            after <= before,
                            "{kind:?}: a cut raised the window from {before} to {after}"
                        );
                    }
                    Op::Undo => cc.on_spurious_congestion(now),
                    Op::LinkSample { resolved, link_lost } => {
                        cc.on_link_sample(now, *resolved, *link_lost);
                    }
                    Op::Persistent => cc.on_persistent_congestion(now),
                }
                let w = cc.inner().window();
                prop_assert!(
                    (MIN_WINDOW..=MAX_WINDOW).contains(&w),
                    "{kind:?} after {op:?}: window {w}"
                );
                // `adaptive` names its active controller too: "adaptive (newreno)".
                prop_assert!(cc.name().starts_with(kind.name()), "{} for {kind:?}", cc.name());
                if let Some(rate) = cc.pacing_rate() {
                    prop_assert!(
                        rate.is_finite() && rate > 0.0,
                        "{kind:?} after {op:?}: pacing rate {rate}"
                    );
                }
            }
        }
    }
}
