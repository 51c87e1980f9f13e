//! Model-based property test of the `bmp` reorder policy: random senders (global numbers
//! spread over FIFO paths, some dropped, predecessors named as the sender would), random
//! interleavings of inserts, time steps, path-set changes, timestamps and polls, with small
//! bounds. Checks the module invariants of `reorder` and `bmp` after every operation.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use proptest::prelude::*;

use super::{Arrival, Bmp, ReleasePacing, ReorderBuffer, ReorderConfig};
use crate::ids::PathId;
use crate::time::Time;

/// Sender clock offset (µs), near the wrap so unwrapping is exercised.
const SKEW_US: u32 = u32::MAX - 3_000_000;

#[derive(Clone, Debug)]
enum Op {
    /// Deliver the next packet of a path (`choice % paths`).
    Insert(u8),
    /// Advance time by this many microseconds.
    Advance(u32),
    /// Poll until `None`.
    Poll,
    /// Replace the path set: bit k = path k; bit 3 adds a path that never delivers.
    SetPaths(u8),
    /// A datagram without data on a path.
    Datagram(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<u8>().prop_map(Op::Insert),
        3 => (0u32..20_000).prop_map(Op::Advance),
        2 => Just(Op::Poll),
        1 => any::<u8>().prop_map(Op::SetPaths),
        1 => any::<u8>().prop_map(Op::Datagram),
    ]
}

fn config() -> impl Strategy<Value = ReorderConfig> {
    (
        1usize..32,
        16usize..2_000,
        1u64..200,
        0u64..3_000,
        prop::option::of((1u32..8, 1.0f64..4.0)),
        prop::option::of(0u64..100),
    )
        .prop_map(
            |(max_packets, max_bytes, hold_ms, margin_us, pacing, repair_ms)| ReorderConfig {
                max_packets,
                max_bytes,
                max_hold: Duration::from_millis(hold_ms),
                hold_margin: Duration::from_micros(margin_us),
                pacing: pacing.map(|(burst, gain)| ReleasePacing { burst, gain }),
                repair_wait: repair_ms.map(Duration::from_millis),
                hold_all_evidence: margin_us % 2 == 1,
            },
        )
}

fn payload(seq: u64) -> Vec<u8> {
    let len = 1 + (seq * 7 % 60) as usize;
    (0..len)
        .map(|i| (seq as u8).wrapping_add(i as u8))
        .collect()
}

/// The test harness: the buffer plus what the model knows.
struct Harness {
    b: Bmp,
    cfg: ReorderConfig,
    now: Time,
    /// Per path: (seq, prev_on_path) still to deliver, in send order.
    queues: Vec<VecDeque<(u64, Option<u64>)>>,
    /// Inserted seq -> it was below `next_seq()` at insert (must come out late).
    inserted: BTreeMap<u64, bool>,
    released: BTreeSet<u64>,
    last_in_order: Option<u64>,
    late_released: u64,
    out: Vec<u8>,
}

impl Harness {
    fn check_bounds(&self) -> Result<(), TestCaseError> {
        prop_assert!(self.b.held_packets() <= self.cfg.max_packets);
        prop_assert!(self.b.held_bytes() <= self.cfg.max_bytes);
        let st = self.b.stats();
        prop_assert!(st.max_held_packets <= self.cfg.max_packets as u64);
        prop_assert!(st.max_held_bytes <= self.cfg.max_bytes as u64);
        prop_assert_eq!(
            st.inserted,
            st.released
                + self.b.discarded()
                + self.b.held_packets() as u64
                + self.b.queued_packets() as u64
        );
        Ok(())
    }

    fn insert(&mut self, choice: u8) {
        let n = self.queues.len();
        let Some(path) = (0..n)
            .map(|k| (choice as usize + k) % n)
            .find(|&p| !self.queues[p].is_empty())
        else {
            return;
        };
        let Some((seq, prev)) = self.queues[path].pop_front() else {
            return;
        };
        let send = SKEW_US.wrapping_add((seq * 300) as u32);
        let a = Arrival {
            global_seq: seq,
            path: PathId(path as u8),
            path_seq: 0,
            prev_on_path: prev,
            send_ts_us: send,
        };
        if seq % 3 == 0 {
            self.b.on_datagram(self.now, a.path, send);
        }
        self.inserted.insert(seq, seq < self.b.next_seq());
        self.b.insert(self.now, &a, &payload(seq));
    }

    /// Polls until `None`, checking every release; then the deadline must be in the future.
    fn poll(&mut self) -> Result<(), TestCaseError> {
        while let Some(r) = self.b.poll_release(self.now, &mut self.out) {
            let seq = r.global_seq;
            let was_late = self.inserted.get(&seq).copied();
            prop_assert!(was_late.is_some(), "{} released but never inserted", seq);
            prop_assert!(self.released.insert(seq), "{} released twice", seq);
            prop_assert_eq!(&self.out[..r.len], &payload(seq)[..]);
            prop_assert_eq!(Some(r.late), was_late, "late flag of {}", seq);
            if r.late {
                self.late_released += 1;
            } else {
                prop_assert!(
                    self.last_in_order.is_none_or(|l| seq > l),
                    "{} after {:?}",
                    seq,
                    self.last_in_order
                );
                self.last_in_order = Some(seq);
            }
            self.check_bounds()?;
        }
        if let Some(t) = self.b.next_deadline() {
            prop_assert!(
                t > self.now,
                "deadline {:?} not after {:?} although poll gave None",
                t,
                self.now
            );
        }
        Ok(())
    }

    /// Follows deadlines until the buffer says there is nothing more.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..100_000 {
            let Some(t) = self.b.next_deadline() else {
                return Ok(());
            };
            self.now = self.now.max(t);
            self.poll()?;
        }
        Err(TestCaseError::fail("drain did not terminate"))
    }
}

/// Builds per-path send queues: `plan[s] = (path roll, drop roll)` for global seq `s`.
fn sender(plan: &[(u8, u8)], n_paths: usize) -> Vec<VecDeque<(u64, Option<u64>)>> {
    let mut queues = vec![VecDeque::new(); n_paths];
    let mut last_on: Vec<Option<u64>> = vec![None; n_paths];
    for (s, &(path_roll, drop_roll)) in plan.iter().enumerate() {
        let s = s as u64;
        let p = path_roll as usize % n_paths;
        let prev = match drop_roll {
            0..=3 => s.checked_sub(1), // a sender bug / non-FIFO path: wrong predecessor
            4..=9 => None,             // sender did not say
            _ => last_on[p],
        };
        last_on[p] = Some(s);
        if drop_roll % 13 != 5 {
            queues[p].push_back((s, prev));
        }
    }
    queues
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn bmp_keeps_its_invariants(
        cfg in config(),
        n_paths in 1usize..4,
        plan in prop::collection::vec((any::<u8>(), any::<u8>()), 1..200),
        ops in prop::collection::vec(op(), 1..400),
    ) {
        let mut h = Harness {
            b: Bmp::new(cfg.clone()),
            cfg: cfg.clone(),
            now: Time::from_millis(1),
            queues: sender(&plan, n_paths),
            inserted: BTreeMap::new(),
            released: BTreeSet::new(),
            last_in_order: None,
            late_released: 0,
            out: vec![0; 256],
        };
        let all: Vec<PathId> = (0..n_paths as u8).map(PathId).collect();
        h.b.set_paths(h.now, &all);
        for op in ops {
            match op {
                Op::Insert(c) => h.insert(c),
                Op::Advance(d) => h.now += Duration::from_micros(u64::from(d)),
                Op::Poll => h.poll()?,
                Op::SetPaths(mask) => {
                    let mut paths: Vec<PathId> =
                        all.iter().copied().filter(|p| mask & (1 << p.0) != 0).collect();
                    if mask & 8 != 0 {
                        paths.push(PathId(7));
                    }
                    h.b.set_paths(h.now, &paths);
                }
                Op::Datagram(p) => {
                    let path = PathId(p % n_paths as u8);
                    let ts = SKEW_US.wrapping_add((h.now.as_nanos() / 1_000) as u32);
                    h.b.on_datagram(h.now, path, ts);
                }
            }
            h.check_bounds()?;
        }
        // Deliver the rest, then let time pass with no more inserts.
        let mut k = 0u8;
        while h.queues.iter().any(|q| !q.is_empty()) {
            h.insert(k);
            k = k.wrapping_add(1);
            h.check_bounds()?;
        }
        h.poll()?;
        if cfg.pacing.is_none() {
            h.now += cfg.max_hold + cfg.hold_margin + Duration::from_millis(1);
            h.poll()?;
            prop_assert_eq!(h.b.held_packets(), 0, "stuck after max_hold");
            prop_assert_eq!(h.b.next_deadline(), None);
        }
        h.drain()?;
        prop_assert_eq!(h.b.held_packets(), 0);
        prop_assert_eq!(h.b.held_bytes(), 0);
        prop_assert_eq!(h.b.queued_packets(), 0);
        let st = h.b.stats();
        prop_assert_eq!(st.inserted, h.inserted.len() as u64);
        prop_assert_eq!(st.released, h.released.len() as u64);
        // Every packet out exactly once (or discarded by a capped queue nobody polled).
        prop_assert_eq!(st.released + h.b.discarded(), st.inserted);
        prop_assert_eq!(st.late, h.late_released);
    }
}
