//! A tiny fake network for in-process tests: two sessions joined by N paths, each direction
//! of each path a FIFO bottleneck (rate, propagation delay, byte-limited drop-tail queue,
//! Bernoulli loss), driven in virtual time through `plait_proto::drive`.
//!
//! It is deliberately small: the real simulator is plait-sim. It knows which source packet
//! every dropped datagram carried, so tests can check "delivered = sent − actually lost".

#![allow(dead_code)]

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use plait_proto::path::PathHints;
use plait_proto::wire::{Frame, Header, frames};
use plait_proto::{Config, Delivery, Event, Io, PathId, Session, Time, drive};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// A lossless link of `rate_mbit` Mbit/s, `delay_ms` each way, with a 200 kB queue.
pub fn lossless(rate_mbit: f64, delay_ms: u64) -> LinkSpec {
    LinkSpec {
        rate: rate_mbit * 1e6 / 8.0,
        delay: Duration::from_millis(delay_ms),
        loss: 0.0,
        queue_bytes: 200_000,
    }
}

/// Traffic for [`Pair::run_until`]: side a sends a 1000-byte packet every millisecond
/// from 200 ms until `until`.
pub fn steady(until: Time) -> impl FnMut(&mut Pair) -> Option<Time> {
    paced(&[0], 1, until)
}

/// Traffic for [`Pair::run_until`]: each side of `sides` (0 is a, 1 is b) sends `per_ms`
/// 1000-byte packets every millisecond (8 Mbit/s each) from 200 ms until `until`; each
/// side's packets are numbered from 0 ([`payload`]).
pub fn paced(sides: &[usize], per_ms: u64, until: Time) -> impl FnMut(&mut Pair) -> Option<Time> {
    let sides = sides.to_vec();
    let mut next = Time::from_millis(200);
    let mut index = 0u64;
    move |pair: &mut Pair| {
        if next >= until {
            return None;
        }
        if pair.now >= next {
            for i in index..index + per_ms {
                for &side in &sides {
                    pair.send_inner(side, &payload(i, 1000));
                }
            }
            index += per_ms;
            next += Duration::from_millis(1);
        }
        Some(next)
    }
}

/// One direction of one path.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Bytes per second.
    pub rate: f64,
    /// Propagation delay.
    pub delay: Duration,
    /// Drop probability per datagram.
    pub loss: f64,
    /// Drop-tail queue limit in bytes (bytes waiting, not counting the one being sent).
    pub queue_bytes: usize,
}

#[derive(Debug)]
struct Link {
    spec: LinkSpec,
    busy_until: Time,
    in_flight: VecDeque<(Time, Vec<u8>)>,
    delivered_bytes: u64,
    dropped: u64,
    /// The most bytes found queued ahead of a datagram that entered.
    peak_queued: f64,
    /// When the last datagram entered, and how many entered at that same instant.
    last_entry: Option<Time>,
    burst: u32,
    /// The most datagrams that entered at one instant.
    peak_burst: u32,
    /// Datagrams that entered (not dropped), and of them those carrying ACK_SOON.
    entered: u64,
    entered_ack_soon: u64,
}

impl Link {
    fn new(spec: LinkSpec) -> Link {
        Link {
            spec,
            busy_until: Time::ZERO,
            in_flight: VecDeque::new(),
            delivered_bytes: 0,
            dropped: 0,
            peak_queued: 0.0,
            last_entry: None,
            burst: 0,
            peak_burst: 0,
            entered: 0,
            entered_ack_soon: 0,
        }
    }
}

/// Records what a session hands out.
#[derive(Debug, Default)]
struct Collector {
    out: Vec<(PathId, Vec<u8>)>,
    delivered: Vec<(Time, Vec<u8>, Delivery)>,
    events: Vec<Event>,
}

impl Io for Collector {
    fn transmit(&mut self, _now: Time, path: PathId, datagram: &[u8]) {
        self.out.push((path, datagram.to_vec()));
    }
    fn deliver(&mut self, now: Time, packet: &[u8], info: &Delivery) {
        self.delivered.push((now, packet.to_vec(), *info));
    }
    fn event(&mut self, _now: Time, event: Event) {
        self.events.push(event);
    }
}

/// Two sessions (`a` and `b`) joined by paths; `links[0]` carries a→b, `links[1]` b→a.
pub struct Pair {
    pub now: Time,
    pub a: Session,
    pub b: Session,
    links: [Vec<Link>; 2],
    io: [Collector; 2],
    deadlines: [Option<Time>; 2],
    rng: ChaCha8Rng,
    buf: Vec<u8>,
    /// Source indices (first 8 payload bytes) of DATA lost on a link, per direction.
    pub lost_sources: [BTreeSet<u64>; 2],
    /// Per-direction, per-path: was the path blackholed (drop everything)?
    pub blackhole: [Vec<bool>; 2],
    /// FNV-1a hash of every datagram either side sent, with its time and path: two runs
    /// with the same inputs must give the same value.
    pub trace_hash: u64,
}

impl Pair {
    /// Sessions from `config_a`/`config_b` with the given paths (same spec both ways).
    pub fn new(
        config_a: Config,
        config_b: Config,
        paths: &[LinkSpec],
        hints: &[Option<f64>],
        seed: u64,
    ) -> Pair {
        let mut a = Session::new(config_a).expect("valid config");
        let mut b = Session::new(config_b).expect("valid config");
        for i in 0..paths.len() {
            let id = PathId(i as u8);
            let hint = PathHints {
                rate: hints.get(i).copied().flatten(),
                one_way_delay: None,
                ..PathHints::default()
            };
            a.add_path(Time::ZERO, id, hint).unwrap();
            b.add_path(Time::ZERO, id, hint).unwrap();
        }
        let links = [
            paths.iter().cloned().map(Link::new).collect(),
            paths.iter().cloned().map(Link::new).collect(),
        ];
        let mut pair = Pair {
            now: Time::ZERO,
            a,
            b,
            links,
            io: [Collector::default(), Collector::default()],
            deadlines: [None, None],
            rng: ChaCha8Rng::seed_from_u64(seed),
            buf: vec![0; 65_536],
            lost_sources: [BTreeSet::new(), BTreeSet::new()],
            blackhole: [vec![false; paths.len()], vec![false; paths.len()]],
            trace_hash: 0xcbf2_9ce4_8422_2325,
        };
        pair.drive_both();
        pair
    }

    /// Drains deliveries the receiving side `dir` (0: at b, from a; 1: at a, from b) made.
    pub fn take_delivered(&mut self, dir: usize) -> Vec<(Time, Vec<u8>, Delivery)> {
        std::mem::take(&mut self.io[1 - dir].delivered)
    }

    /// Drains the events side `side` (0: a, 1: b) reported.
    pub fn take_events(&mut self, side: usize) -> Vec<Event> {
        std::mem::take(&mut self.io[side].events)
    }

    /// Drives both sessions now (after a test fed them input directly).
    pub fn drive_now(&mut self) {
        self.drive_both();
    }

    /// Bytes delivered over each path in direction `dir`.
    pub fn link_delivered_bytes(&self, dir: usize) -> Vec<u64> {
        self.links[dir].iter().map(|l| l.delivered_bytes).collect()
    }

    /// Datagrams dropped on each path in direction `dir` (loss, queue overflow, blackhole).
    pub fn link_dropped(&self, dir: usize) -> Vec<u64> {
        self.links[dir].iter().map(|l| l.dropped).collect()
    }

    /// The longest queue (bytes waiting to be serialised) each path's link in direction
    /// `dir` held when a datagram entered it.
    pub fn link_peak_queue_bytes(&self, dir: usize) -> Vec<f64> {
        self.links[dir].iter().map(|l| l.peak_queued).collect()
    }

    /// Datagrams that entered each path's link in direction `dir` (not dropped), and of
    /// them those carrying ACK_SOON (docs/protocol.md#ack-soon).
    pub fn link_datagrams(&self, dir: usize) -> Vec<(u64, u64)> {
        self.links[dir]
            .iter()
            .map(|l| (l.entered, l.entered_ack_soon))
            .collect()
    }

    /// Forgets the longest queues so far ([`Pair::link_peak_queue_bytes`]), to measure a
    /// later stretch alone.
    pub fn reset_link_peak_queues(&mut self) {
        for link in self.links.iter_mut().flatten() {
            link.peak_queued = 0.0;
        }
    }

    /// The most datagrams each path's link in direction `dir` took at one instant (a
    /// paced sender spreads them out).
    pub fn link_peak_burst(&self, dir: usize) -> Vec<u32> {
        self.links[dir].iter().map(|l| l.peak_burst).collect()
    }

    /// Changes one direction of one path.
    pub fn set_link(&mut self, dir: usize, path: usize, f: impl FnOnce(&mut LinkSpec)) {
        f(&mut self.links[dir][path].spec);
    }

    /// Takes path `path` away in both directions at once, as a link removed under the
    /// sessions: what is in flight on it is lost (its sources recorded in
    /// [`Pair::lost_sources`]) and whatever is sent on it from now on is dropped.
    pub fn cut_path(&mut self, path: usize) {
        for dir in 0..2 {
            self.blackhole[dir][path] = true;
            let link = &mut self.links[dir][path];
            for (_, dgram) in std::mem::take(&mut link.in_flight) {
                link.dropped += 1;
                if let Some(src) = source_of(&dgram) {
                    self.lost_sources[dir].insert(src);
                }
            }
            link.busy_until = self.now;
        }
    }

    fn drive_both(&mut self) {
        for side in 0..2 {
            let session = if side == 0 { &mut self.a } else { &mut self.b };
            self.deadlines[side] = drive(session, self.now, &mut self.io[side], &mut self.buf);
            for (path, dgram) in std::mem::take(&mut self.io[side].out) {
                self.enqueue(side, path.index(), dgram);
            }
        }
    }

    fn enqueue(&mut self, dir: usize, path: usize, dgram: Vec<u8>) {
        let now = self.now;
        let stamp = [
            now.as_nanos().to_be_bytes().as_slice(),
            &[dir as u8, path as u8],
        ]
        .concat();
        for b in stamp.iter().chain(&dgram) {
            self.trace_hash = (self.trace_hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        let link = &mut self.links[dir][path];
        let queued_bytes = link.busy_until.saturating_since(now).as_secs_f64() * link.spec.rate;
        let lost = self.blackhole[dir][path]
            || queued_bytes > link.spec.queue_bytes as f64
            || (link.spec.loss > 0.0 && unit_f64(self.rng.next_u64()) < link.spec.loss);
        if lost {
            link.dropped += 1;
            if std::env::var_os("PLAIT_DEBUG_DROPS").is_some() {
                eprintln!("drop dir {dir} path {path} at {now:?} queued {queued_bytes:.0}");
            }
            if let Some(src) = source_of(&dgram) {
                self.lost_sources[dir].insert(src);
            }
            return;
        }
        link.peak_queued = link.peak_queued.max(queued_bytes);
        link.entered += 1;
        link.entered_ack_soon += u64::from(asks_ack_soon(&dgram));
        link.burst = if link.last_entry == Some(now) {
            link.burst + 1
        } else {
            1
        };
        link.last_entry = Some(now);
        link.peak_burst = link.peak_burst.max(link.burst);
        let start = link.busy_until.max(now);
        let finish = start + Duration::from_secs_f64(dgram.len() as f64 / link.spec.rate);
        link.busy_until = finish;
        link.in_flight.push_back((finish + link.spec.delay, dgram));
    }

    /// The next time anything happens.
    fn next_event(&self) -> Option<Time> {
        let links = self
            .links
            .iter()
            .flatten()
            .filter_map(|l| l.in_flight.front().map(|(t, _)| *t));
        links.chain(self.deadlines.iter().flatten().copied()).min()
    }

    /// Runs until `until`, calling `source(now, pair)` before each step so a test can feed
    /// inner packets; returns when virtual time reaches `until`.
    ///
    /// Panics if the sessions keep asking to be woken without time moving on (a timer
    /// offered in the past that nothing clears spins a real driver at full CPU).
    pub fn run_until(&mut self, until: Time, mut source: impl FnMut(&mut Pair) -> Option<Time>) {
        let mut steps_at_now = 0u32;
        loop {
            let next_src = source(self);
            let next = [self.next_event(), next_src].into_iter().flatten().min();
            let Some(next) = next.filter(|t| *t <= until) else {
                self.now = until;
                return;
            };
            if next <= self.now {
                steps_at_now += 1;
                assert!(
                    steps_at_now < 100_000,
                    "the sessions' timers do not advance: stuck at {:?}",
                    self.now
                );
            } else {
                steps_at_now = 0;
            }
            self.now = self.now.max(next);
            for dir in 0..2 {
                for path in 0..self.links[dir].len() {
                    while let Some((t, _)) = self.links[dir][path].in_flight.front() {
                        if *t > self.now {
                            break;
                        }
                        let (_, dgram) = self.links[dir][path].in_flight.pop_front().unwrap();
                        self.links[dir][path].delivered_bytes += dgram.len() as u64;
                        let receiver = if dir == 0 { &mut self.b } else { &mut self.a };
                        receiver
                            .handle_datagram(self.now, PathId(path as u8), &dgram)
                            .expect("valid datagram");
                    }
                }
            }
            self.drive_both();
        }
    }

    /// Feeds an inner packet to side `side` (0: a, 1: b) now and drives.
    pub fn send_inner(&mut self, side: usize, packet: &[u8]) -> bool {
        let session = if side == 0 { &mut self.a } else { &mut self.b };
        let ok = session.handle_inner_packet(self.now, packet).is_ok();
        self.drive_both();
        ok
    }
}

/// The source index a test put in the first 8 bytes of a DATA payload, if `dgram` has one.
pub fn source_of(dgram: &[u8]) -> Option<u64> {
    let (_, payload) = Header::decode(dgram).ok()?;
    frames(payload).flatten().find_map(|f| match f {
        Frame::Data(d) if d.payload.len() >= 8 => {
            Some(u64::from_be_bytes(d.payload[..8].try_into().ok()?))
        }
        _ => None,
    })
}

/// Whether a datagram carries ACK_SOON (docs/protocol.md#ack-soon).
pub fn asks_ack_soon(dgram: &[u8]) -> bool {
    Header::decode(dgram).is_ok_and(|(_, payload)| {
        frames(payload).flatten().any(|f| {
            matches!(
                f,
                Frame::Extension {
                    frame_type: plait_proto::wire::frame_type::ACK_SOON,
                    ..
                }
            )
        })
    })
}

/// A payload of `len` bytes whose first 8 bytes are `index` and the rest a pattern.
pub fn payload(index: u64, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(index) as u8)
        .collect();
    p[..8].copy_from_slice(&index.to_be_bytes());
    p
}

/// A uniform number in [0, 1) from 64 random bits.
pub fn unit_f64(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A zeroed IPv4 UDP packet of `len` bytes (at least 28) from 10.0.0.1:`sport` to
/// 10.0.0.2:9, for tests that need the send queue to classify flows (its header checksum
/// is left 0: nothing here checks it). The payload starts at byte 28.
pub fn ipv4_udp(sport: u16, len: usize) -> Vec<u8> {
    let len = len.max(28);
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&9u16.to_be_bytes());
    p
}
