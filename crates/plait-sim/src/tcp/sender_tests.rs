//! Unit tests of [`NewRenoSender`], driven by hand: one ACK or timer at a time, checking
//! what ns-2's `Agent/TCP/Newreno` would send and how its window and timer move.

use std::time::Duration;

use plait_proto::Time;

use super::NewRenoSender;
use crate::packet::{TcpAck, TcpSegment};
use crate::tcp::TcpConfig;

fn ms(n: u64) -> Time {
    Time::from_millis(n)
}

fn drain(s: &mut NewRenoSender, now: Time) -> Vec<TcpSegment> {
    std::iter::from_fn(|| s.poll_send(now)).collect()
}

fn seqs(s: &mut NewRenoSender, now: Time) -> Vec<u64> {
    drain(s, now).iter().map(|x| x.seq).collect()
}

fn ack(s: &mut NewRenoSender, now: Time, next_expected: u64) -> Vec<u64> {
    s.on_ack(
        now,
        &TcpAck {
            next_expected,
            echo_seq: next_expected,
        },
    );
    seqs(s, now)
}

fn no_syn(window_init: u32, max_burst: u32) -> NewRenoSender {
    NewRenoSender::new(TcpConfig {
        syn: false,
        window_init,
        max_burst,
        ..TcpConfig::default()
    })
}

#[test]
fn syn_then_initial_window() {
    let mut s = NewRenoSender::new(TcpConfig::default());
    assert_eq!(s.poll_send(ms(0)), None, "nothing before start");
    s.start(ms(0));
    let syn = drain(&mut s, ms(0));
    assert_eq!(syn.len(), 1);
    assert_eq!(
        (syn[0].seq, syn[0].payload, syn[0].retransmit),
        (0, 0, false)
    );
    assert_eq!(s.next_timeout(), Some(ms(6000)), "initial RTO 6 s");
    let data = drain(&mut s, ms(100));
    assert!(data.is_empty());
    s.on_ack(
        ms(100),
        &TcpAck {
            next_expected: 1,
            echo_seq: 0,
        },
    );
    let data = drain(&mut s, ms(100));
    assert_eq!(
        data.iter().map(|x| (x.seq, x.payload)).collect::<Vec<_>>(),
        [(1, 1000), (2, 1000)]
    );
    assert_eq!(s.cwnd(), 2.0, "windowInit_ once the SYN is acknowledged");
    // One 100 ms sample: RTO = 300 ms, raised to the 1 s minimum.
    assert_eq!(s.rtt().srtt(), Some(Duration::from_millis(100)));
    assert_eq!(s.next_timeout(), Some(ms(1100)));
    assert_eq!(s.stats().acked_packets, 0, "the SYN is not data");
}

#[test]
fn slow_start_then_congestion_avoidance() {
    let mut s = NewRenoSender::new(TcpConfig {
        window: 4,
        ..TcpConfig::default()
    });
    s.start(ms(0));
    let _ = seqs(&mut s, ms(0));
    assert_eq!(ack(&mut s, ms(10), 1), [1, 2]);
    assert_eq!(ack(&mut s, ms(20), 2), [3, 4]); // cwnd 3
    assert_eq!(ack(&mut s, ms(20), 3), [5, 6]); // cwnd 4 = ssthresh (window_)
    assert_eq!(s.ssthresh(), 4);
    assert_eq!(ack(&mut s, ms(30), 4), [7]); // cwnd 4.25, window capped at 4
    assert!((s.cwnd() - 4.25).abs() < 1e-9);
    assert_eq!(s.window(), 4);
}

#[test]
fn max_burst_limits_each_event() {
    let mut s = no_syn(10, 4);
    s.start(ms(0));
    assert_eq!(seqs(&mut s, ms(0)), [0, 1, 2, 3]);
    assert_eq!(ack(&mut s, ms(10), 1), [4, 5, 6, 7]);
    assert_eq!(ack(&mut s, ms(20), 8), [8, 9, 10, 11]);
    assert_eq!(s.outstanding(), 4);
    let mut unlimited = no_syn(10, 0);
    unlimited.start(ms(0));
    assert_eq!(seqs(&mut unlimited, ms(0)).len(), 10);
}

/// Sends 0..=9, acks 0 (cwnd stays 10: delay_growth_), sends 10, loses 1.
fn with_hole_at_one() -> NewRenoSender {
    let mut s = no_syn(10, 0);
    s.start(ms(0));
    assert_eq!(seqs(&mut s, ms(0)), (0..10).collect::<Vec<_>>());
    assert_eq!(ack(&mut s, ms(100), 1), [10]);
    s
}

#[test]
fn limited_transmit_then_fast_retransmit_then_exit() {
    let mut s = with_hole_at_one();
    assert_eq!(ack(&mut s, ms(101), 1), [11], "limited transmit");
    assert_eq!(ack(&mut s, ms(102), 1), [12], "limited transmit");
    let fr = drain_ack(&mut s, ms(103), 1);
    assert_eq!(
        fr.iter().map(|x| (x.seq, x.retransmit)).collect::<Vec<_>>(),
        [(1, true)]
    );
    assert!(s.in_recovery());
    assert_eq!((s.ssthresh(), s.cwnd(), s.window()), (5, 5.0, 8));
    // Inflation: one packet per dupACK once the window passes what is outstanding.
    for t in 104..108 {
        assert_eq!(ack(&mut s, ms(t), 1), Vec::<u64>::new());
    }
    assert_eq!(ack(&mut s, ms(108), 1), [13]); // 5 + 8 inflation reaches packet 13
    let st = s.stats();
    assert_eq!(
        (st.dupacks, st.fast_retransmits, st.retransmissions),
        (8, 1, 1)
    );
    // The full ACK ends recovery: cwnd = W/2 (+1/cwnd), inflation gone.
    assert_eq!(ack(&mut s, ms(200), 14), [14, 15, 16, 17, 18]);
    assert!(!s.in_recovery());
    assert!((s.cwnd() - 5.2).abs() < 1e-9);
}

fn drain_ack(s: &mut NewRenoSender, now: Time, next_expected: u64) -> Vec<TcpSegment> {
    s.on_ack(
        now,
        &TcpAck {
            next_expected,
            echo_seq: 0,
        },
    );
    drain(s, now)
}

#[test]
fn partial_ack_retransmits_next_hole_and_stays_in_recovery() {
    let mut s = with_hole_at_one();
    for t in 101..=103 {
        let _ = ack(&mut s, ms(t), 1);
    }
    let before = s.next_timeout();
    let partial = drain_ack(&mut s, ms(150), 4);
    assert_eq!(
        partial
            .iter()
            .map(|x| (x.seq, x.retransmit))
            .collect::<Vec<_>>(),
        [(4, true)]
    );
    assert!(s.in_recovery());
    assert_eq!(s.stats().partial_acks, 1);
    assert!(
        s.next_timeout() > before,
        "the first partial ACK restarts the timer"
    );
    let again = s.next_timeout();
    let _ = drain_ack(&mut s, ms(160), 6);
    assert_eq!(
        s.next_timeout(),
        again,
        "later partial ACKs do not (newreno_changes1_)"
    );
    assert_eq!(s.stats().retransmissions, 3);
}

#[test]
fn timeout_restarts_from_one_and_karn_holds_backoff() {
    let mut s = no_syn(2, 0);
    s.start(ms(0));
    assert_eq!(seqs(&mut s, ms(0)), [0, 1]);
    assert_eq!(ack(&mut s, ms(100), 1), [2]);
    let fire = s.next_timeout().expect("armed");
    assert_eq!(fire, ms(1100));
    s.on_timeout(ms(1099));
    assert!(drain(&mut s, ms(1099)).is_empty(), "early call ignored");
    s.on_timeout(fire);
    let resent = drain(&mut s, fire);
    assert_eq!(
        resent
            .iter()
            .map(|x| (x.seq, x.retransmit))
            .collect::<Vec<_>>(),
        [(1, true)]
    );
    assert_eq!((s.cwnd(), s.ssthresh(), s.stats().timeouts), (1.0, 2, 1));
    assert_eq!(
        s.next_timeout(),
        Some(fire + Duration::from_secs(2)),
        "backed off"
    );
    // The ACK for the retransmission gives no RTT sample and keeps the backoff (Karn).
    assert_eq!(ack(&mut s, ms(1150), 3), [3, 4]);
    assert_eq!(s.rtt().last_sample(), Duration::from_millis(100));
    assert_eq!(s.rtt().backoff(), 2);
    // Dup ACKs for data sent before the timeout do not trigger a fast retransmit.
    for t in 1151..1154 {
        let _ = ack(&mut s, ms(t), 3);
    }
    assert_eq!(s.stats().fast_retransmits, 0);
    // A new packet, timed and acknowledged, ends the backoff.
    let _ = ack(&mut s, ms(1200), 5);
    assert_eq!(s.rtt().backoff(), 1);
    assert_eq!(s.rtt().last_sample(), Duration::from_millis(50));
}

#[test]
fn lost_syn_means_initial_window_of_one() {
    let mut s = NewRenoSender::new(TcpConfig::default());
    s.start(ms(0));
    let _ = seqs(&mut s, ms(0));
    s.on_timeout(ms(6000));
    assert_eq!(seqs(&mut s, ms(6000)), [0]);
    assert_eq!(s.next_timeout(), Some(ms(18_000)), "6 s backed off to 12 s");
    assert_eq!(s.stats().timeouts, 1);
    assert_eq!(ack(&mut s, ms(6100), 1), [1]);
    assert_eq!(s.cwnd(), 1.0);
}

#[test]
fn finite_transfer_is_done_when_all_acked() {
    let mut s = NewRenoSender::new(TcpConfig {
        total_packets: Some(3),
        ..TcpConfig::default()
    });
    assert!(!s.is_done());
    s.start(ms(0));
    assert_eq!(seqs(&mut s, ms(0)), [0]);
    assert_eq!(ack(&mut s, ms(10), 1), [1, 2]);
    assert_eq!(ack(&mut s, ms(20), 3), [3]);
    assert!(!s.is_done());
    assert_eq!(ack(&mut s, ms(30), 4), Vec::<u64>::new());
    assert!(s.is_done());
    assert_eq!(s.stats().acked_packets, 3);
    assert_eq!(s.next_timeout(), None);
    let empty = NewRenoSender::new(TcpConfig {
        total_packets: Some(0),
        ..TcpConfig::default()
    });
    assert!(!empty.is_done());
}

#[test]
fn a_streaming_source_sends_what_its_application_produced_and_waits_for_more() {
    let mut s = NewRenoSender::new(TcpConfig {
        window: 20,
        ..TcpConfig::default()
    });
    let t0 = Time::ZERO;
    s.start_app_limited(t0);
    // Nothing produced: not even the SYN goes out.
    assert_eq!(s.poll_send(t0), None);
    s.produce(t0, 3);
    // The SYN (packet 0) first; the window is one until it is acknowledged.
    assert_eq!(s.poll_send(t0).map(|g| g.seq), Some(0));
    assert_eq!(s.poll_send(t0), None);
    let t1 = Time::from_millis(100);
    s.on_ack(
        t1,
        &TcpAck {
            next_expected: 1,
            echo_seq: 0,
        },
    );
    let sent: Vec<u64> = std::iter::from_fn(|| s.poll_send(t1))
        .map(|g| g.seq)
        .collect();
    assert_eq!(sent, vec![1, 2]);
    s.on_ack(
        t1,
        &TcpAck {
            next_expected: 3,
            echo_seq: 2,
        },
    );
    // Three data packets were produced (the SYN is extra): the third goes now.
    assert_eq!(s.poll_send(t1).map(|g| g.seq), Some(3));
    assert_eq!(s.poll_send(t1), None);
    let t2 = Time::from_millis(200);
    s.on_ack(
        t2,
        &TcpAck {
            next_expected: 4,
            echo_seq: 3,
        },
    );
    // Everything produced is acknowledged: the connection stays open for more.
    assert!(!s.is_done());
    s.produce(t2, 1);
    assert_eq!(s.poll_send(t2).map(|g| g.seq), Some(4));
}
