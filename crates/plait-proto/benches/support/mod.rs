//! The benches' in-process pair: two sessions joined by 3 zero-delay paths, every datagram
//! carried across at once, driven through the real `drive` loop (no encryption, no I/O).

#![allow(dead_code)]

use std::hint::black_box;
use std::time::Duration;

use plait_proto::path::PathHints;
use plait_proto::{Config, Delivery, Io, PathId, Session, Time, drive};

/// Forwards transmits into a queue for the other side; counts deliveries.
#[derive(Default)]
pub struct Wire {
    pub out: Vec<(PathId, Vec<u8>)>,
    pub free: Vec<Vec<u8>>,
    pub delivered: u64,
}

impl Io for Wire {
    fn transmit(&mut self, _now: Time, path: PathId, datagram: &[u8]) {
        let mut v = self.free.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(datagram);
        self.out.push((path, v));
    }
    fn deliver(&mut self, _now: Time, packet: &[u8], _info: &Delivery) {
        black_box(packet);
        self.delivered += 1;
    }
}

pub struct Bench {
    pub now: Time,
    pub a: Session,
    pub b: Session,
    pub wa: Wire,
    pub wb: Wire,
    pub buf: Vec<u8>,
    pub packet: Vec<u8>,
}

impl Bench {
    /// Two sessions of `config` (the second as the server side) over 3 paths, brought up.
    pub fn new(config: Config, packet_len: usize) -> Bench {
        let mut a = Session::new(config.clone()).unwrap();
        let mut b = Session::new(Config {
            side: plait_proto::Side::Server,
            ..config
        })
        .unwrap();
        for p in 0..3 {
            let hints = PathHints {
                rate: Some([1.25e6, 6.25e5, 3.0e5][p]),
                one_way_delay: None,
                ..PathHints::default()
            };
            a.add_path(Time::ZERO, PathId(p as u8), hints).unwrap();
            b.add_path(Time::ZERO, PathId(p as u8), hints).unwrap();
        }
        let mut bench = Bench {
            now: Time::ZERO,
            a,
            b,
            wa: Wire::default(),
            wb: Wire::default(),
            buf: vec![0; 2048],
            packet: vec![0x45; packet_len],
        };
        // Bring the paths up (probe exchanges) before measuring.
        for _ in 0..20 {
            bench.now += Duration::from_millis(5);
            bench.exchange();
        }
        bench
    }

    /// Drives both sides and carries every datagram across, until quiet.
    pub fn exchange(&mut self) {
        drive(&mut self.a, self.now, &mut self.wa, &mut self.buf);
        for _ in 0..8 {
            for (path, d) in std::mem::take(&mut self.wa.out) {
                let _ = self.b.handle_datagram(self.now, path, &d);
                self.wa.free.push(d);
            }
            drive(&mut self.b, self.now, &mut self.wb, &mut self.buf);
            for (path, d) in std::mem::take(&mut self.wb.out) {
                let _ = self.a.handle_datagram(self.now, path, &d);
                self.wb.free.push(d);
            }
            drive(&mut self.a, self.now, &mut self.wa, &mut self.buf);
            if self.wa.out.is_empty() {
                break;
            }
        }
    }
}
