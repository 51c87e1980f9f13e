//! Two engines joined by a fake 3-path link in virtual time (the in-process test):
//! exactly-once, in-order delivery minus what the links really lost, loss-detection
//! latency, and per-path estimators converging to the configured rates and delays.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use plait_proto::reorder::ReorderKind;
use plait_proto::sched::SchedulerKind;
use plait_proto::{Config, PathId, Time};
use support::{LinkSpec, Pair, payload};

const MS: Duration = Duration::from_millis(1);

fn three_paths() -> Vec<LinkSpec> {
    vec![
        // 8 Mbit/s, 10 ms
        LinkSpec {
            rate: 1_000_000.0,
            delay: 10 * MS,
            loss: 0.0,
            queue_bytes: 150_000,
        },
        // 4 Mbit/s, 30 ms
        LinkSpec {
            rate: 500_000.0,
            delay: 30 * MS,
            loss: 0.0,
            queue_bytes: 100_000,
        },
        // 2 Mbit/s, 60 ms, 1 % random loss
        LinkSpec {
            rate: 250_000.0,
            delay: 60 * MS,
            loss: 0.01,
            queue_bytes: 60_000,
        },
    ]
}

/// The shipped configuration with `scheduler` and without loss repair: these tests count a
/// packet the link dropped as lost for good (the repair tests turn it on themselves).
/// The engine with `scheduler`, loss repair and FEC off: these tests count what the links
/// lose against what the receiver declares lost (tests/fec.rs covers FEC).
fn config(scheduler: SchedulerKind) -> Config {
    let mut c = Config {
        scheduler,
        reorder: ReorderKind::Bmp,
        repair: false,
        ..Config::default()
    };
    c.fec.policy = plait_proto::fec::FecPolicy::Off;
    c
}

/// Feeds `total` packets of `len` bytes from side a, in bursts of `burst` every `gap`.
fn bursty_source(
    total: u64,
    len: usize,
    burst: u64,
    gap: Duration,
) -> impl FnMut(&mut Pair) -> Option<Time> {
    let mut next_index = 0u64;
    let mut next_at = Time::from_millis(200); // after the paths came up
    move |pair: &mut Pair| {
        if next_index >= total {
            return None;
        }
        if pair.now >= next_at {
            for _ in 0..burst.min(total - next_index) {
                pair.send_inner(0, &payload(next_index, len));
                next_index += 1;
            }
            next_at += gap;
        }
        Some(next_at)
    }
}

#[test]
fn hundred_thousand_packets_over_three_paths() {
    let total = 100_000u64;
    let len = 1200usize;
    let links = three_paths();
    let capacity: f64 = links.iter().map(|l| l.rate).sum();
    // Wrong capacity hints on purpose: the estimators must correct them.
    let hints = [Some(400_000.0), Some(400_000.0), Some(400_000.0)];
    let mut pair = Pair::new(
        config(SchedulerKind::Edpf),
        config(SchedulerKind::Edpf),
        &links,
        &hints,
        1,
    );
    // 95 % of the summed capacity, more than the two fast paths carry, so EDPF must use the
    // slow lossy one too; in 10 ms bursts (back-to-back packets give packet pairs).
    let burst = ((capacity * 0.95 * 0.010) / (len as f64 + 20.0)).round() as u64;
    let duration_s = total as f64 / burst as f64 * 0.010;
    let end = Time::from_millis(((duration_s + 2.0) * 1000.0) as u64);
    pair.run_until(end, bursty_source(total, len, burst, 10 * MS));

    let delivered = pair.take_delivered(0);
    let stats = pair.b.reorder_stats();
    let a_stats = pair.a.stats();
    assert_eq!(a_stats.inner_accepted, total, "{a_stats:?}");
    assert_eq!(
        a_stats.inner_stale
            + a_stats.inner_queue_full
            + a_stats.inner_overflow_dropped
            + a_stats.inner_codel_dropped,
        0,
        "{a_stats:?}"
    );

    // Exactly once, byte-identical, in order except packets released after being declared lost.
    let mut seen = BTreeSet::new();
    let mut last_in_order = None;
    for (_, bytes, info) in &delivered {
        let index = u64::from_be_bytes(bytes[..8].try_into().unwrap());
        assert_eq!(bytes, &payload(index, len), "payload intact");
        assert!(seen.insert(index), "packet {index} delivered twice");
        if !info.late {
            assert!(
                last_in_order.is_none_or(|l| l < info.global_seq),
                "out of order at {}",
                info.global_seq
            );
            last_in_order = Some(info.global_seq);
        }
    }
    let lost = &pair.lost_sources[0];
    assert!(
        lost.is_disjoint(&seen),
        "a packet counted lost was delivered"
    );
    assert_eq!(
        seen.len() as u64 + lost.len() as u64,
        total,
        "delivered + lost on links = sent"
    );
    let late = delivered.iter().filter(|d| d.2.late).count();

    // Loss detection: every link loss is declared, and quickly.
    let declared = stats.lost_total();
    let mean_detect = Duration::from_nanos(stats.loss_detect_nanos_sum / declared.max(1));
    let max_detect = Duration::from_nanos(stats.loss_detect_nanos_max);
    println!(
        "delivered {} lost {} late {late} declared {declared} (pred {} cmp {} timer {} overflow {}) \
         detect mean {mean_detect:?} max {max_detect:?} max held {}",
        seen.len(),
        lost.len(),
        stats.lost_predecessor,
        stats.lost_comparison,
        stats.lost_timer,
        stats.lost_overflow,
        stats.max_held_packets
    );
    println!(
        "link drops a->b {:?} delivered bytes {:?}",
        pair.link_dropped(0),
        pair.link_delivered_bytes(0)
    );
    for v in pair.a.path_views() {
        println!("{v:?}");
    }
    for id in pair.b.path_ids() {
        println!("b sent on {id:?}: {:?}", pair.b.path_stats(id));
    }
    for v in pair.b.path_views() {
        println!("b view {v:?}");
    }
    assert!(declared >= lost.len() as u64, "every real loss declared");
    assert_eq!(stats.lost_overflow, 0);
    assert_eq!(stats.discarded, 0);
    assert!(
        late as u64 <= declared - lost.len() as u64,
        "late only after a wrong declaration"
    );
    // A hole is seen as soon as a later packet arrives on a faster path, so detecting a loss
    // on path p takes at least its extra delay over the fastest path, plus any queue ahead
    // of it: the bound is the worst path's spread plus a full queue, plus ACK/timer slack.
    // Evidence (path predecessors, comparison), not the timer, must do nearly all the work.
    let worst = links
        .iter()
        .map(|l| l.delay - links[0].delay + Duration::from_secs_f64(l.queue_bytes as f64 / l.rate))
        .max()
        .unwrap();
    assert!(
        max_detect <= worst + 20 * MS,
        "max loss detection {max_detect:?} > {worst:?} + 20 ms"
    );
    assert!(
        mean_detect < 100 * MS,
        "mean loss detection {mean_detect:?}"
    );
    assert!(
        stats.lost_timer * 50 <= declared,
        "timer declared {} of {declared}",
        stats.lost_timer
    );

    // Estimators at the sender converge to the configured links (within 10 %).
    let views = pair.a.path_views();
    for (v, l) in views.iter().zip(&links) {
        let rate = v.pair_rate.expect("pair rate");
        assert!(
            (rate - l.rate).abs() / l.rate < 0.10,
            "{:?} pair rate {rate} vs {}",
            v.id,
            l.rate
        );
        // Relative forward delay vs the fastest path.
        let want = l.delay.as_secs_f64() - links[0].delay.as_secs_f64();
        let got = v.base_owd.unwrap().as_secs_f64();
        assert!(
            (got - want).abs() <= 0.10 * want.max(0.001),
            "{:?} base owd {got} vs {want}",
            v.id
        );
        // min RTT: forward delay + ACK return on the fastest path (10 ms), within 10 %.
        let want_rtt = l.delay.as_secs_f64() + links[0].delay.as_secs_f64();
        let got_rtt = v.min_rtt.unwrap().as_secs_f64();
        assert!(
            (got_rtt - want_rtt).abs() / want_rtt < 0.10,
            "{:?} min rtt {got_rtt} vs {want_rtt}",
            v.id
        );
        let loss = v.loss_rate;
        assert!(loss < l.loss + 0.05, "{:?} loss rate {loss}", v.id);
    }
    // Every path carried traffic.
    for (i, bytes) in pair.link_delivered_bytes(0).iter().enumerate() {
        assert!(*bytes > 1_000_000, "path {i} carried {bytes} bytes");
    }
}

#[test]
fn delivery_rate_converges_on_a_saturated_path() {
    let links = vec![LinkSpec {
        rate: 500_000.0,
        delay: 20 * MS,
        loss: 0.0,
        queue_bytes: 50_000,
    }];
    let mut pair = Pair::new(
        config(SchedulerKind::MinRtt),
        config(SchedulerKind::MinRtt),
        &links,
        &[None],
        2,
    );
    // Offer 120 % of the link: the drop-tail queue keeps it saturated.
    let burst = ((500_000.0 * 1.2 * 0.010) / 1220.0_f64).round() as u64;
    pair.run_until(
        Time::from_secs_f64_for_test(10.0),
        bursty_source(u64::MAX, 1200, burst, 10 * MS),
    );
    let v = &pair.a.path_views()[0];
    let rate = v.delivery_rate.unwrap();
    assert!(
        (rate - 500_000.0).abs() / 500_000.0 < 0.10,
        "delivery rate {rate}"
    );
}

#[test]
fn both_directions_at_once() {
    let links = three_paths();
    let hints = [Some(1e6), Some(5e5), Some(2.5e5)];
    let mut pair = Pair::new(
        config(SchedulerKind::Edpf),
        config(SchedulerKind::Edpf),
        &links,
        &hints,
        3,
    );
    let mut i = 0u64;
    let mut next = Time::from_millis(200);
    pair.run_until(Time::from_millis(6_000), |p| {
        if i < 3000 && p.now >= next {
            p.send_inner(0, &payload(i, 1000));
            p.send_inner(1, &payload(i, 600));
            i += 1;
            next += Duration::from_micros(1500);
        }
        (i < 3000).then_some(next)
    });
    for dir in 0..2 {
        let got: Vec<u64> = pair
            .take_delivered(dir)
            .iter()
            .map(|(_, b, _)| u64::from_be_bytes(b[..8].try_into().unwrap()))
            .collect();
        let lost = &pair.lost_sources[dir];
        assert_eq!(got.len() + lost.len(), 3000, "direction {dir}");
        let mut sorted = got.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), got.len(), "direction {dir}: duplicates");
    }
}

#[test]
fn redundant_mode_delivers_each_packet_once() {
    let links = three_paths();
    let mut pair = Pair::new(
        config(SchedulerKind::Redundant),
        config(SchedulerKind::Redundant),
        &links,
        &[],
        4,
    );
    let mut i = 0u64;
    pair.run_until(Time::from_millis(4_000), |p| {
        if i < 500 && p.now >= Time::from_millis(200 + i * 5) {
            p.send_inner(0, &payload(i, 200));
            i += 1;
        }
        (i < 500).then(|| Time::from_millis(200 + i * 5))
    });
    let got = pair.take_delivered(0);
    assert_eq!(
        got.len(),
        500,
        "each packet once, none lost: redundancy covers the lossy path"
    );
    assert!(
        pair.b.stats().data_duplicates >= 500,
        "copies arrived and were dropped"
    );
    let ids: Vec<PathId> = pair.a.path_ids().collect();
    assert_eq!(ids.len(), 3);
}

#[test]
fn same_inputs_same_datagrams() {
    let run = |seed: u64| {
        let hints = [Some(1e6), Some(5e5), Some(2.5e5)];
        let mut pair = Pair::new(
            config(SchedulerKind::Edpf),
            config(SchedulerKind::Edpf),
            &three_paths(),
            &hints,
            seed,
        );
        pair.run_until(
            Time::from_millis(3_000),
            bursty_source(2_000, 900, 8, 5 * MS),
        );
        (pair.trace_hash, pair.take_delivered(0).len())
    };
    let (h1, n1) = run(9);
    let (h2, n2) = run(9);
    assert_eq!((h1, n1), (h2, n2), "same seed, same bytes");
    assert!(n1 > 1_900, "delivered {n1}");
    let (h3, _) = run(10);
    assert_ne!(
        h1, h3,
        "the link loss seed changes the run (the trace is not trivially constant)"
    );
}

trait SecsForTest {
    fn from_secs_f64_for_test(s: f64) -> Time;
}
impl SecsForTest for Time {
    fn from_secs_f64_for_test(s: f64) -> Time {
        Time::from_nanos((s * 1e9) as u64)
    }
}

#[test]
fn trusted_hints_replace_estimates() {
    use plait_proto::path::PathHints;
    let config = Config {
        trust_hints: true,
        ..config(SchedulerKind::Edpf)
    };
    let mut s = plait_proto::Session::new(config).unwrap();
    let hints = [(1e6, 60), (5e5, 10), (2e5, 35)];
    for (i, (rate, ms)) in hints.iter().enumerate() {
        let h = PathHints {
            rate: Some(*rate),
            one_way_delay: Some(*ms * MS),
            ..PathHints::default()
        };
        s.add_path(Time::ZERO, PathId(i as u8), h).unwrap();
    }
    let views = s.path_views();
    let got: Vec<_> = views
        .iter()
        .map(|v| (v.rate_estimate(), v.base_owd))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(1e6), Some(50 * MS)),
            (Some(5e5), Some(Duration::ZERO)),
            (Some(2e5), Some(25 * MS))
        ]
    );
    assert!(
        views
            .iter()
            .all(|v| v.pair_rate.is_none() && v.delivery_rate.is_none())
    );
}

#[test]
fn repair_recovers_losses_before_the_receiver_gives_up() {
    // Same three paths (1 % random loss on the slowest), loss repair on both sides: nearly
    // every packet the links lose is asked for and sent again in time, so the receiver
    // delivers everything in order and declares (almost) nothing lost.
    let total = 30_000u64;
    let len = 1200usize;
    let links = three_paths();
    let capacity: f64 = links.iter().map(|l| l.rate).sum();
    let hints = [Some(400_000.0), Some(400_000.0), Some(400_000.0)];
    let with_repair = || Config {
        repair: true,
        ..config(SchedulerKind::Edpf)
    };
    let mut pair = Pair::new(with_repair(), with_repair(), &links, &hints, 3);
    let burst = ((capacity * 0.9 * 0.010) / (len as f64 + 20.0)).round() as u64;
    let duration_s = total as f64 / burst as f64 * 0.010;
    let end = Time::from_millis(((duration_s + 3.0) * 1000.0) as u64);
    pair.run_until(end, bursty_source(total, len, burst, 10 * MS));

    let delivered = pair.take_delivered(0);
    let r = pair.b.reorder_stats();
    let (sa, sb) = (pair.a.stats(), pair.b.stats());
    let link_losses = pair.lost_sources[0].len() as u64;
    println!(
        "links lost {link_losses} data packets; requests {} (sent {}), repairs sent {}, repaired {}, declared lost {}, delivered {}",
        r.repair_requests,
        sb.repair_requests_sent,
        sa.repairs_sent,
        r.repaired,
        r.lost_total(),
        delivered.len()
    );
    assert!(link_losses >= 10, "the test needs losses: {link_losses}");
    // Losses on a path whose queue had built up count as congestion and are not asked for.
    assert!(
        r.repair_requests <= link_losses,
        "each loss asked for at most once"
    );
    assert!(r.repair_requests * 10 >= link_losses * 7, "{r:?}");
    assert!(r.repaired * 10 >= r.repair_requests * 6, "{r:?}");
    assert!(r.lost_total() * 2 <= link_losses, "{r:?}");
    assert!(delivered.len() as u64 >= total - r.lost_total() + r.late);
    let mut seen = BTreeSet::new();
    let mut last = None;
    for (_, bytes, info) in &delivered {
        let index = u64::from_be_bytes(bytes[..8].try_into().unwrap());
        assert_eq!(bytes, &payload(index, len), "payload intact");
        assert!(seen.insert(index), "packet {index} delivered twice");
        if !info.late {
            assert!(last.is_none_or(|l| l < info.global_seq));
            last = Some(info.global_seq);
        }
    }
    assert!(seen.len() as u64 + r.lost_total() >= total);
}

/// The shallow-queue loss rate counts the link's own losses and not a drop-tail queue's
/// overflow (docs/scheduler-design.md, "Loss the link causes"): one path overrun at 120 %
/// of its rate, then one path at half its rate with 2 % random loss.
#[test]
fn shallow_queue_loss_is_the_links_own() {
    let run = |loss: f64, load: f64| {
        let links = vec![LinkSpec {
            rate: 500_000.0,
            delay: 20 * MS,
            loss,
            queue_bytes: 50_000,
        }];
        let mut pair = Pair::new(
            config(SchedulerKind::MinRtt),
            config(SchedulerKind::MinRtt),
            &links,
            &[None],
            5,
        );
        let burst = ((500_000.0 * load * 0.010) / 1220.0_f64).round() as u64;
        let mut source = bursty_source(u64::MAX, 1200, burst, 10 * MS);
        // Both rates averaged over the source's ticks after the first 2 s (one reading of
        // an EWMA with gain 1/32 is too noisy at 2 %).
        let (mut sum_all, mut sum_shallow, mut n) = (0.0, 0.0, 0u32);
        pair.run_until(Time::from_secs_f64_for_test(20.0), |p| {
            if p.now >= Time::from_secs_f64_for_test(2.0) {
                let v = &p.a.path_views()[0];
                sum_all += v.loss_rate;
                sum_shallow += v.shallow_loss_rate;
                n += 1;
            }
            source(p)
        });
        (sum_all / f64::from(n), sum_shallow / f64::from(n))
    };
    let (all, shallow) = run(0.0, 1.2);
    println!("overrun: loss rate {all:.4}, shallow {shallow:.4}");
    assert!(all > 0.05, "overrun: loss rate {all}");
    assert!(shallow < all / 10.0, "overrun: shallow {shallow} of {all}");
    let (all, shallow) = run(0.02, 0.5);
    println!("random loss: loss rate {all:.4}, shallow {shallow:.4}");
    assert!((0.01..0.04).contains(&all), "random loss: loss rate {all}");
    assert!(
        (shallow - all).abs() < 0.2 * all,
        "random loss: shallow {shallow} vs {all}"
    );
}
