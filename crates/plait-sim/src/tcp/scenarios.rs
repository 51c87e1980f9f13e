//! Test-only: end-to-end scenarios of the NewReno sender and the sink over the tiny
//! single-bottleneck network of `harness`. Each test checks one ns-2 behaviour the
//! simulator's results depend on: utilisation, halving on a single loss, NewReno partial
//! ACKs, slow start, the window cap, maxburst, RTO backoff and finite transfers.

use std::time::Duration;

use plait_proto::Time;

use super::harness::{Net, link_capacity_packets};
use super::{DEFAULT_DELACK_INTERVAL, TcpConfig};

const MBIT: u64 = 1_000_000;

fn cfg(window: u32) -> TcpConfig {
    TcpConfig {
        window,
        ..TcpConfig::default()
    }
}

fn drop_once(seqs: Vec<u64>) -> super::harness::DropFn {
    let mut pending = seqs;
    Box::new(move |_, seg| {
        if let Some(i) = pending
            .iter()
            .position(|&s| s == seg.seq && !seg.retransmit)
        {
            pending.remove(i);
            true
        } else {
            false
        }
    })
}

#[test]
fn bulk_flow_fills_bottleneck() {
    // 10 Mbit/s, 20 ms RTT, queue of one bandwidth-delay product (24 packets), 60 s.
    let bdp = link_capacity_packets(10 * MBIT, 0.020, 1000).round() as usize;
    assert_eq!(bdp, 24);
    for delack in [None, Some(DEFAULT_DELACK_INTERVAL)] {
        let mut net = Net::new(cfg(1000), delack, 10 * MBIT, Duration::from_millis(10), bdp);
        net.start();
        net.run_until(Time::from_millis(60_000));
        let delivered = net.sink.stats().delivered_packets as f64;
        let fraction = delivered / link_capacity_packets(10 * MBIT, 60.0, 1000);
        let st = net.sender.stats();
        println!(
            "delack {delack:?}: goodput {fraction:.4} of the link; {st:?}; queue drops {}",
            net.log.queue_drops
        );
        assert!(fraction >= 0.95, "goodput fraction {fraction}");
        assert!(fraction <= 1.0);
        assert!(st.fast_retransmits > 0 && net.log.queue_drops > 0);
    }
}

#[test]
fn single_loss_halves_window() {
    // A path that never overflows (BDP 120 packets, queue 1000): the only losses are ours.
    // Packet 100 is lost in slow start, packet 3000 in congestion avoidance.
    let mut net = Net::new(cfg(1000), None, 10 * MBIT, Duration::from_millis(50), 1000);
    net.drop = drop_once(vec![100, 3000]);
    net.start();
    net.run_until(Time::from_millis(20_000));
    let st = net.sender.stats().clone();
    assert_eq!(net.log.queue_drops, 0);
    assert_eq!(
        (st.retransmissions, st.timeouts, st.fast_retransmits),
        (2, 0, 2)
    );
    assert_eq!(st.partial_acks, 0);
    // Every segment that arrived above a hole produced exactly one duplicate ACK.
    assert_eq!(st.dupacks, net.sink.stats().out_of_order);
    assert_eq!(net.sink.stats().duplicates, 0);
    let acks = &net.log.acks;
    for n in 1..=2u64 {
        let fr = acks
            .iter()
            .position(|a| a.fast_retransmits_after == n)
            .expect("fast retransmit");
        let before = f64::from(acks[fr].window_before);
        // The dupACKs before it: dupthresh of them, all carrying the same number.
        let hole = acks[fr].next_expected;
        let dups = acks[..=fr]
            .iter()
            .rev()
            .take_while(|a| a.next_expected == hole)
            .count();
        assert_eq!(dups, 4, "the original ACK and 3 duplicates");
        let exit = fr
            + acks[fr..]
                .iter()
                .position(|a| !a.in_recovery_after)
                .expect("exit");
        let after = acks[exit].cwnd_after;
        println!("loss {n}: window {before} before, cwnd {after:.2} after recovery");
        assert!((after - before / 2.0).abs() <= 1.0, "{before} -> {after}");
        assert!(
            acks[exit].next_expected > hole + 1,
            "a full ACK ends recovery"
        );
    }
    assert!(net.sink.stats().delivered_packets > 10_000);
}

#[test]
fn newreno_partial_acks_repair_several_losses_without_timeout() {
    let mut net = Net::new(cfg(1000), None, 10 * MBIT, Duration::from_millis(50), 1000);
    net.drop = drop_once(vec![100, 104, 110]);
    net.start();
    net.run_until(Time::from_millis(10_000));
    let st = net.sender.stats();
    assert_eq!((st.retransmissions, st.timeouts), (3, 0));
    assert_eq!((st.fast_retransmits, st.partial_acks), (1, 2));
    let retx: Vec<u64> = net
        .log
        .sends
        .iter()
        .filter(|(_, s)| s.retransmit)
        .map(|(_, s)| s.seq)
        .collect();
    assert_eq!(retx, [100, 104, 110]);
}

#[test]
fn slow_start_doubles_per_rtt() {
    // 1 Gbit/s, 100 ms RTT: rounds are distinct. Round 0 is the SYN.
    let mut net = Net::new(
        cfg(1000),
        None,
        1000 * MBIT,
        Duration::from_millis(50),
        10_000,
    );
    net.start();
    net.run_until(Time::from_millis(790));
    let mut per_round = [0u32; 8];
    for (t, _) in &net.log.sends {
        per_round[(t.as_nanos() / 100_000_000) as usize] += 1;
    }
    assert_eq!(per_round, [1, 2, 4, 8, 16, 32, 64, 128]);
    assert_eq!(net.sender.stats().retransmissions, 0);
}

#[test]
fn window_cap_is_respected() {
    // ns-2 default window_ 20 on a path that could hold 120 packets.
    let mut net = Net::new(
        TcpConfig::default(),
        None,
        10 * MBIT,
        Duration::from_millis(50),
        1000,
    );
    net.start();
    net.run_until(Time::from_millis(10_000));
    assert_eq!(net.log.max_outstanding, 20);
    assert!(
        net.sender.cwnd() > 20.0,
        "cwnd keeps growing; the window does not"
    );
    assert_eq!(net.sender.window(), 20);
    // 20 packets per 100 ms RTT (plus serialisation): about 200 packets/s.
    let delivered = net.sink.stats().delivered_packets;
    assert!((1850..=2000).contains(&delivered), "{delivered}");
}

#[test]
fn max_burst_is_respected() {
    // A lossy bulk flow (with and without delayed ACKs): recoveries and ACK compression
    // invite bursts. ns-2 limits new data to maxburst_ per ACK (2 during fast recovery);
    // the retransmission of a fast retransmit or partial ACK comes on top of that.
    for (max_burst, delack) in [(4, Some(DEFAULT_DELACK_INTERVAL)), (4, None), (2, None)] {
        let config = TcpConfig {
            window: 50,
            max_burst,
            ..TcpConfig::default()
        };
        let mut net = Net::new(config, delack, 2 * MBIT, Duration::from_millis(30), 10);
        net.start();
        net.run_until(Time::from_millis(30_000));
        let why = format!("{max_burst} {delack:?} {:?}", net.sender.stats());
        assert!(
            net.log.queue_drops > 0 && net.sender.stats().partial_acks > 0,
            "{why}"
        );
        assert_eq!(net.log.max_new_burst, max_burst as usize, "{why}");
        assert!(net.log.max_burst <= max_burst.max(3) as usize, "{why}");
    }
    let unlimited = TcpConfig {
        window: 50,
        ..TcpConfig::default()
    };
    let mut net = Net::new(
        unlimited,
        Some(DEFAULT_DELACK_INTERVAL),
        2 * MBIT,
        Duration::from_millis(30),
        10,
    );
    net.start();
    net.run_until(Time::from_millis(30_000));
    assert!(
        net.log.max_new_burst > 4,
        "without maxburst_ bursts are larger"
    );
}

#[test]
fn rto_backs_off_when_all_acks_stop() {
    let mut net = Net::new(cfg(1000), None, 10 * MBIT, Duration::from_millis(10), 24);
    let cut = Time::from_millis(5_000);
    net.drop = Box::new(move |t, _| t >= cut);
    net.start();
    net.run_until(Time::from_millis(200_000));
    let last_ack = net.log.acks.last().expect("acks before the cut").at;
    assert!(last_ack >= cut);
    let fires: Vec<Time> = net
        .log
        .timeouts
        .iter()
        .copied()
        .filter(|&t| t > cut)
        .collect();
    assert!(fires.len() >= 8, "{fires:?}");
    // First timeout one minimum RTO after the last ACK restarted the timer.
    assert_eq!(fires[0] - last_ack, Duration::from_secs(1));
    let gaps: Vec<u64> = fires.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect();
    assert_eq!(gaps[..7], [2, 4, 8, 16, 32, 64, 64]);
    for w in fires.windows(2) {
        assert_eq!((w[1] - w[0]).as_nanos() % 10_000_000, 0, "tick granularity");
    }
    // Each timeout resends the first unacknowledged packet with cwnd 1.
    let hole = net.log.acks.last().expect("acks").next_expected;
    for &f in &fires {
        let resent: Vec<_> = net
            .log
            .sends
            .iter()
            .filter(|(t, _)| *t == f)
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(resent.len(), 1);
        assert_eq!((resent[0].seq, resent[0].retransmit), (hole, true));
    }
    assert_eq!(net.sender.cwnd(), 1.0);
    let before = net.log.timeouts.len() - fires.len();
    assert_eq!(net.sender.stats().timeouts, net.log.timeouts.len() as u64);
    println!("{before} timeouts before the cut; after it, gaps {gaps:?} s");
}

#[test]
fn timeout_goes_back_to_first_unacked() {
    // Lose a whole window's worth in one go: NewReno's one hole per RTT exceeds the 1 s
    // RTO, the timer (restarted on the first partial ACK only) fires, go-back-N follows.
    let mut net = Net::new(cfg(1000), None, 10 * MBIT, Duration::from_millis(50), 1000);
    net.drop = drop_once((500..530).step_by(2).collect());
    net.start();
    net.run_until(Time::from_millis(20_000));
    let st = net.sender.stats();
    assert_eq!((st.fast_retransmits, st.timeouts), (1, 1), "{st:?}");
    let fire = net.log.timeouts[0];
    let at_fire: Vec<u64> = net
        .log
        .sends
        .iter()
        .filter(|(t, _)| *t == fire)
        .map(|(_, s)| s.seq)
        .collect();
    let acked = net
        .log
        .acks
        .iter()
        .rfind(|a| a.at < fire)
        .expect("ack")
        .next_expected;
    assert_eq!(at_fire, [acked]);
    assert!(net.sink.stats().delivered_packets > 5_000);
    // ACKs still in flight at the end: the sink is ahead of the sender by at most that.
    assert!(net.sink.next_expected() > net.sender.stats().acked_packets);
}

#[test]
fn finite_transfer_completes() {
    for (delack, drops) in [
        (None, vec![]),
        (Some(DEFAULT_DELACK_INTERVAL), vec![3, 40, 41, 499]),
    ] {
        let config = TcpConfig {
            total_packets: Some(500),
            ..TcpConfig::default()
        };
        let mut net = Net::new(config, delack, 10 * MBIT, Duration::from_millis(10), 50);
        net.drop = drop_once(drops);
        net.start();
        assert!(!net.sender.is_done());
        assert!(net.run_until_done(Time::from_millis(60_000)));
        let st = net.sender.stats();
        assert_eq!(st.acked_packets, 500);
        assert_eq!(net.sink.stats().delivered_packets, 500);
        assert_eq!(net.sink.stats().delivered_bytes, 500_000);
        assert_eq!(net.sender.next_timeout(), None);
        let last = net.log.sends.iter().map(|(_, s)| s.seq).max();
        assert_eq!(last, Some(500), "SYN is 0, data 1..=500, nothing beyond");
        net.run_until(Time::from_millis(120_000));
        assert_eq!(net.sender.poll_send(net.now), None);
    }
}
