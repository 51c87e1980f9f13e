//! A node that counts what reaches it, per flow (cross-traffic destinations).

use std::collections::BTreeMap;

use plait_proto::Time;

use crate::packet::{FlowId, Packet};

/// Counts packets and bytes per flow.
#[derive(Debug, Default)]
pub struct CountingSink {
    /// (packets, bytes) per flow.
    pub received: BTreeMap<FlowId, (u64, u64)>,
}

impl CountingSink {
    pub(crate) fn on_receive(&mut self, _now: Time, pkt: Packet) {
        let e = self.received.entry(pkt.flow).or_default();
        e.0 += 1;
        e.1 += u64::from(pkt.size);
    }
}
