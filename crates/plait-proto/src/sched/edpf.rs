//! Placeholder, replaced by the scheduler implementation.
use super::{PacketMeta, Scheduler, Selection};
use crate::path::PathView;
use crate::time::Time;

/// Placeholder.
#[derive(Debug, Clone, Default)]
pub struct Edpf;

impl Scheduler for Edpf {
    fn select(&mut self, _now: Time, paths: &[PathView], _pkt: &PacketMeta) -> Selection {
        match paths.iter().find(|p| p.is_usable()) {
            Some(p) => Selection::Send(p.id),
            None => Selection::Wait(None),
        }
    }
}
