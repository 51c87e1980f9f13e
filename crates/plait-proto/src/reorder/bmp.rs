//! Placeholder, replaced by the policy implementation.
use std::collections::VecDeque;
use std::time::Duration;
use super::{Arrival, ReorderBuffer, ReorderConfig, ReorderStats, Released};
use crate::ids::PathId;
use crate::time::Time;

/// Placeholder: delivers on arrival.
#[derive(Debug)]
pub struct Bmp { q: VecDeque<(u64, Vec<u8>)>, stats: ReorderStats }

impl Bmp {
    /// A fresh buffer.
    pub fn new(_config: ReorderConfig) -> Self { Bmp { q: VecDeque::new(), stats: ReorderStats::default() } }
}

impl ReorderBuffer for Bmp {
    fn set_paths(&mut self, _now: Time, _paths: &[PathId]) {}
    fn on_datagram(&mut self, _now: Time, _path: PathId, _ts: u32) {}
    fn insert(&mut self, _now: Time, a: &Arrival, packet: &[u8]) { self.stats.inserted += 1; self.q.push_back((a.global_seq, packet.to_vec())); }
    fn poll_release(&mut self, _now: Time, out: &mut [u8]) -> Option<Released> {
        let (g, p) = self.q.pop_front()?;
        out[..p.len()].copy_from_slice(&p);
        self.stats.released += 1;
        Some(Released { global_seq: g, len: p.len(), held_for: Duration::ZERO, late: false })
    }
    fn next_deadline(&self) -> Option<Time> { None }
    fn held_packets(&self) -> usize { self.q.len() }
    fn held_bytes(&self) -> usize { self.q.iter().map(|x| x.1.len()).sum() }
    fn stats(&self) -> ReorderStats { self.stats }
}
