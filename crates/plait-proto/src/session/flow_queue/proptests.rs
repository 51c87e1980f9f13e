//! Model-based property tests of the flow queue: random pushes (IP flows that may collide,
//! non-IP packets, ECN-capable or not), heads, pops and time steps on small bounds. After
//! every operation the module invariants are checked against the queue's internals, and a
//! second queue fed the same operations must give the same outputs (determinism).

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::tests::{KEY, udp};
use super::*;

#[derive(Clone, Debug)]
enum Op {
    /// A packet of flow `flow % 7` (6: not IP), length from `len`, ECT if `ect`.
    Push {
        flow: u8,
        len: u16,
        ect: bool,
    },
    Head,
    Pop,
    /// Time moves on this many 100 µs.
    Advance(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), 0u16..1500, any::<bool>()).prop_map(|(flow, len, ect)| Op::Push { flow, len, ect }),
        2 => Just(Op::Head),
        4 => Just(Op::Pop),
        3 => any::<u8>().prop_map(Op::Advance),
    ]
}

fn packet(flow: u8, len: u16, ect: bool, serial: u32) -> Vec<u8> {
    let flow = flow % 7;
    if flow == 6 {
        let mut p = vec![0u8];
        p.extend_from_slice(&serial.to_be_bytes());
        p.resize(usize::from(len).max(5), 0xee);
        return p;
    }
    udp(
        1000 + u16::from(flow),
        usize::from(len).max(32),
        if ect { 0b10 } else { 0 },
        serial,
    )
}

fn serial_of(p: &[u8]) -> u32 {
    let at = if p[0] == 0 { 1 } else { 28 };
    u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

/// Every invariant of the module docs that can be seen from inside.
fn check_invariants(q: &FlowQueue, live: &BTreeMap<u32, usize>) -> Result<(), TestCaseError> {
    prop_assert!(q.len() <= q.config.max_packets);
    prop_assert!(q.bytes() <= q.config.max_bytes);
    let (mut len, mut bytes) = (0, 0);
    for (i, flow) in q.flows.iter().enumerate() {
        let on_new = q.new_flows.iter().filter(|&&f| f as usize == i).count();
        let on_old = q.old_flows.iter().filter(|&&f| f as usize == i).count();
        match flow.list {
            List::None => prop_assert!(on_new + on_old == 0 && flow.fifo.is_empty()),
            List::New => prop_assert!(on_new == 1 && on_old == 0),
            List::Old => prop_assert!(on_new == 0 && on_old == 1),
        }
        let mut last = None;
        let (mut n, mut b) = (0, 0);
        for p in q.store.iter(&flow.fifo) {
            let s = serial_of(&p.bytes);
            prop_assert_eq!(
                live.get(&s),
                Some(&p.bytes.len()),
                "queued = pushed, not out"
            );
            prop_assert!(last.is_none_or(|l| l < s), "FIFO within a flow");
            last = Some(s);
            n += 1;
            b += p.bytes.len();
        }
        prop_assert_eq!((n, b), (flow.fifo.len, flow.fifo.bytes));
        len += n;
        bytes += b;
    }
    prop_assert_eq!((len, bytes), (q.len(), q.bytes()));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bounds_hold_and_the_queue_is_deterministic(
        max_packets in 1usize..40,
        max_bytes in 1500usize..20_000,
        flows in 1usize..8,
        quantum in 256usize..3000,
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let cfg = FlowQueueConfig {
            max_packets,
            max_bytes,
            flows,
            quantum,
            codel: CodelParams {
                target: Duration::from_millis(1),
                interval: Duration::from_millis(10),
                max_packet: 1500,
                ecn: true,
            },
            sparse_bytes: 3200,
            fec_sparse_bytes: 0,
        };
        let (mut q, mut twin) = (FlowQueue::new(cfg, KEY), FlowQueue::new(cfg, KEY));
        let mut live: BTreeMap<u32, usize> = BTreeMap::new();
        let mut last_out: BTreeMap<usize, u32> = BTreeMap::new();
        let (mut now, mut next_serial, mut pushed, mut popped) = (Time::ZERO, 0u32, 0u64, 0u64);
        let mut shown: Option<Vec<u8>> = None;
        for op in ops {
            match op {
                Op::Push { flow, len, ect } => {
                    let p = packet(flow, len, ect, next_serial);
                    let out = q.push(now, &p);
                    prop_assert_eq!(out, twin.push(now, &p));
                    pushed += 1;
                    live.insert(next_serial, p.len());
                    next_serial += 1;
                    shown = None;
                }
                Op::Head => {
                    let h = q.head(now).map(|p| p.bytes.clone());
                    prop_assert_eq!(&h, &twin.head(now).map(|p| p.bytes.clone()));
                    if let (Some(before), Some(h)) = (&shown, &h) {
                        prop_assert_eq!(before, h, "head stable until pop or push");
                    }
                    shown = h;
                }
                Op::Pop => {
                    let p = q.pop();
                    let t = twin.pop();
                    prop_assert_eq!(p.as_ref().map(|p| &p.bytes), t.as_ref().map(|p| &p.bytes));
                    if let Some(p) = p {
                        if let Some(s) = shown.take() {
                            prop_assert_eq!(&s, &p.bytes, "pop returns the head shown");
                        }
                        let s = serial_of(&p.bytes);
                        // Its length may only differ in content (CE mark), never in size.
                        prop_assert_eq!(live.get(&s), Some(&p.bytes.len()));
                        let flow = q.classify(&p.bytes);
                        prop_assert!(last_out.get(&flow).is_none_or(|&l| l < s));
                        last_out.insert(flow, s);
                        popped += 1;
                        q.recycle(p.bytes);
                    }
                }
                Op::Advance(n) => now += Duration::from_micros(100 * u64::from(n)),
            }
            // Packets dropped inside the queue leave `live` here: whatever is not queued
            // any more and was not popped was dropped (and counted, below).
            let queued: std::collections::BTreeSet<u32> = q
                .flows
                .iter()
                .flat_map(|f| q.store.iter(&f.fifo).map(|p| serial_of(&p.bytes)))
                .collect();
            check_invariants(&q, &live)?;
            live.retain(|s, _| queued.contains(s));
            let st = q.stats();
            prop_assert_eq!(st, twin.stats());
            prop_assert_eq!(
                pushed,
                popped + q.len() as u64 + st.codel_drops + st.overflow_drops + st.refused,
                "every packet accounted for: {:?}", st
            );
        }
    }
}
