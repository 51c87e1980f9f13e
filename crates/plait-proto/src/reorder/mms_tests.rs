//! Tests of the seed MMS receiver buffer (`mms.rs`): its rule, its bounds, and a property
//! test of the invariants every reorder policy keeps.

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn arrival(seq: u64) -> Arrival {
    Arrival {
        global_seq: seq,
        path: PathId(0),
        path_seq: seq,
        prev_on_path: None,
        send_ts_us: 0,
    }
}

fn config(max_packets: usize) -> ReorderConfig {
    ReorderConfig {
        max_packets,
        ..ReorderConfig::default()
    }
}

/// Everything `poll_release` gives at `now`: (seq, late).
fn drain(b: &mut MmsBuffer, now: Time) -> Vec<(u64, bool)> {
    let mut out = [0u8; 2048];
    std::iter::from_fn(|| b.poll_release(now, &mut out))
        .map(|r| (r.global_seq, r.late))
        .collect()
}

#[test]
fn in_order_packets_pass_at_once() {
    let mut b = MmsBuffer::new(ReorderConfig::default());
    let now = Time::from_millis(1);
    for seq in 0..5 {
        b.insert(now, &arrival(seq), &[seq as u8; 100]);
        assert_eq!(drain(&mut b, now), vec![(seq, false)]);
    }
    assert_eq!(b.held_packets(), 0);
}

#[test]
fn a_hole_is_waited_for_without_any_timer_but_max_hold() {
    let mut b = MmsBuffer::new(ReorderConfig::default());
    let t0 = Time::from_millis(10);
    b.insert(t0, &arrival(1), &[1; 100]);
    b.insert(t0, &arrival(2), &[2; 100]);
    assert!(drain(&mut b, t0).is_empty(), "0 missing: held");
    // No delay estimate, no evidence: only the 1 s cap.
    assert_eq!(b.next_deadline(), Some(t0 + Duration::from_secs(1)));
    let later = t0 + Duration::from_millis(500);
    assert!(drain(&mut b, later).is_empty());
    b.insert(later, &arrival(0), &[0; 100]);
    assert_eq!(
        drain(&mut b, later),
        vec![(0, false), (1, false), (2, false)]
    );
    assert_eq!(b.stats().lost_total(), 0);
}

#[test]
fn beyond_capacity_the_oldest_leaves_and_its_hole_is_lost() {
    let mut b = MmsBuffer::new(ReorderConfig::default());
    let now = Time::from_millis(1);
    // 0 is missing; 1..=MMS_CAPACITY are held.
    for seq in 1..=MMS_CAPACITY as u64 {
        b.insert(now, &arrival(seq), &[0; 100]);
    }
    assert!(drain(&mut b, now).is_empty());
    assert_eq!(b.held_packets(), MMS_CAPACITY);
    // One more: the oldest (1) leaves, and with it everything in order behind it.
    b.insert(now, &arrival(MMS_CAPACITY as u64 + 1), &[0; 100]);
    let out = drain(&mut b, now);
    assert_eq!(out.len(), MMS_CAPACITY + 1);
    assert!(out.iter().all(|&(_, late)| !late));
    assert_eq!(b.stats().lost_overflow, 1);
    // 0 turns up after all: released at once, flagged late.
    b.insert(now, &arrival(0), &[0; 100]);
    assert_eq!(drain(&mut b, now), vec![(0, true)]);
}

#[test]
fn max_hold_gives_up_a_hole() {
    let mut b = MmsBuffer::new(ReorderConfig::default());
    let t0 = Time::from_millis(10);
    b.insert(t0, &arrival(3), &[0; 100]);
    let at = b.next_deadline().unwrap();
    assert_eq!(drain(&mut b, at), vec![(3, false)]);
    assert_eq!(b.stats().lost_overflow, 3);
    assert_eq!(b.next_deadline(), None);
}

#[test]
fn a_small_max_packets_bounds_the_capacity() {
    let mut b = MmsBuffer::new(config(4));
    let now = Time::from_millis(1);
    for seq in 1..=10 {
        b.insert(now, &arrival(seq), &[0; 10]);
        assert!(b.held_packets() <= 4);
    }
}

#[test]
fn a_packet_larger_than_max_bytes_forces_out_what_is_below_it() {
    let mut b = MmsBuffer::new(ReorderConfig {
        max_bytes: 1000,
        ..ReorderConfig::default()
    });
    let now = Time::from_millis(1);
    b.insert(now, &arrival(1), &[0; 100]);
    b.insert(now, &arrival(3), &[0; 1500]);
    assert_eq!(drain(&mut b, now), vec![(1, false), (3, false)]);
    assert_eq!(b.stats().lost_overflow, 2);
    assert_eq!(b.held_bytes(), 0);
}

#[test]
fn an_oversized_duplicate_is_counted() {
    let mut b = MmsBuffer::new(ReorderConfig {
        max_bytes: 1000,
        ..ReorderConfig::default()
    });
    let now = Time::from_millis(1);
    b.insert(now, &arrival(1), &[0; 100]);
    b.insert(now, &arrival(2), &[0; 100]);
    b.insert(now, &arrival(2), &[0; 1500]);
    assert_eq!(b.discarded(), 1);
    assert_eq!(b.held_packets(), 2);
}

#[test]
fn memory_stays_bounded_when_nobody_polls() {
    let config = ReorderConfig {
        max_packets: 100,
        max_bytes: 50_000,
        ..ReorderConfig::default()
    };
    let mut b = MmsBuffer::new(config);
    let now = Time::from_millis(1);
    for seq in 0..10_000 {
        b.insert(now, &arrival(seq), &[0; 1400]);
    }
    // The ready queue keeps at most its bound besides the newest packet.
    assert!(
        b.slab.capacity() <= 101 + 50_000 / 1400 + 2,
        "{}",
        b.slab.capacity()
    );
    let released = drain(&mut b, now).len() as u64;
    assert_eq!(released + b.discarded(), 10_000);
    assert_eq!(b.stats().lost_overflow, b.discarded());
}

#[derive(Clone, Debug)]
enum Op {
    /// Insert the packet `choice % pending` of the not yet inserted ones, `len` bytes.
    Insert(u16, u16),
    /// Insert an already inserted packet again.
    Again(u16),
    /// Advance time by this many milliseconds.
    Advance(u16),
    /// Poll until `None`.
    Poll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u16>(), 1u16..2000).prop_map(|(c, len)| Op::Insert(c, len)),
        1 => any::<u16>().prop_map(Op::Again),
        2 => (0u16..600).prop_map(Op::Advance),
        2 => Just(Op::Poll),
    ]
}

proptest! {
    /// Every inserted packet leaves exactly once (or is counted discarded); releases not
    /// flagged late have increasing numbers; the bounds hold after every call (memory too,
    /// between polls); after a `None`, the next deadline is in the future.
    #[test]
    fn invariants(
        ops in proptest::collection::vec(op(), 1..400),
        cap in 1usize..80,
        max_bytes in 500usize..20_000,
    ) {
        let mut b = MmsBuffer::new(ReorderConfig {
            max_packets: cap,
            max_bytes,
            ..ReorderConfig::default()
        });
        let mut pending: Vec<u64> = (0..300).collect();
        let mut inserted = Vec::new();
        let mut inserts = 0u64;
        let mut released = BTreeSet::new();
        let mut last_in_order: Option<u64> = None;
        let mut now = Time::from_millis(1);
        let mut out = [0u8; 4096];
        let mut poll = |b: &mut MmsBuffer, now: Time,
                        released: &mut BTreeSet<u64>,
                        last: &mut Option<u64>| {
            while let Some(r) = b.poll_release(now, &mut out) {
                prop_assert!(released.insert(r.global_seq), "released twice");
                if !r.late {
                    prop_assert!(last.is_none_or(|l| r.global_seq > l), "out of order");
                    *last = Some(r.global_seq);
                }
            }
            prop_assert!(b.next_deadline().is_none_or(|t| t > now), "stuck deadline");
            Ok(())
        };
        for op in ops {
            match op {
                Op::Insert(c, len) if !pending.is_empty() => {
                    // Mostly near the front, so that holes are short-lived.
                    let k = usize::from(c) % pending.len().min(8);
                    let seq = pending.remove(k);
                    b.insert(now, &arrival(seq), &vec![seq as u8; usize::from(len)]);
                    inserted.push(seq);
                    inserts += 1;
                }
                Op::Again(c) if !inserted.is_empty() => {
                    // A copy of a packet still held (the session filters every other
                    // duplicate before the buffer sees it, as the trait requires).
                    let seq = inserted[usize::from(c) % inserted.len()];
                    if b.held.contains_key(&seq) {
                        b.insert(now, &arrival(seq), &[0; 40]);
                        inserts += 1;
                    }
                }
                Op::Insert(..) | Op::Again(_) => {}
                Op::Advance(ms) => now += Duration::from_millis(u64::from(ms)),
                Op::Poll => poll(&mut b, now, &mut released, &mut last_in_order)?,
            }
            prop_assert!(b.held_packets() <= cap.min(MMS_CAPACITY));
            prop_assert!(b.held_bytes() <= max_bytes);
            // Held, plus each queue's bound and its newest, plus one insert's worth.
            prop_assert!(b.slab.capacity() <= 3 * (cap + 1) + cap.min(MMS_CAPACITY) + 2);
        }
        now += Duration::from_secs(10);
        poll(&mut b, now, &mut released, &mut last_in_order)?;
        prop_assert_eq!(b.held_packets(), 0);
        prop_assert_eq!(released.len() as u64 + b.discarded(), inserts);
        let originals: BTreeSet<u64> = inserted.iter().copied().collect();
        prop_assert!(released.is_subset(&originals));
    }
}
