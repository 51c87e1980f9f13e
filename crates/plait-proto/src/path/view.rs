//! [`PathView`]: the read-only snapshot of one path that schedulers see.
//!
//! Schedulers hold no protocol state of others: everything they know about a path comes
//! from this snapshot, rebuilt by the session before each decision.

use std::time::Duration;

use crate::cc::is_rate;
use crate::ids::PathId;

/// What the user configured about a path, if anything (config file, scenario).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PathHints {
    /// Capacity, bytes per second on the link: datagrams counted with
    /// `Config::datagram_overhead`, as every rate the engine estimates is.
    pub rate: Option<f64>,
    /// One-way delay (only differences between paths matter).
    pub one_way_delay: Option<Duration>,
    /// A backup path: it carries nothing while another path is usable, and takes over
    /// when none is (docs/protocol.md#backup). Probed like any other, so its state is
    /// known when it is needed.
    pub backup: bool,
    /// Preference within its class (primaries, or backups), 0 the most preferred: a path
    /// stands by while a usable path of its class with a lower number exists, so the
    /// session runs on its preferred subset (docs/protocol.md#priority; seed MMS §II-B).
    pub priority: u8,
    /// An overflow path (a metered link): it carries only the load the other usable paths
    /// of its class cannot, and everything when none of them is usable
    /// (docs/protocol.md#overflow).
    pub overflow: bool,
}

/// Largest path priority: eight levels, 0 (preferred) to 7.
pub const MAX_PRIORITY: u8 = 7;

/// How much higher than the packet-pair rate the delivery rate must be to replace it in
/// [`PathView::rate_estimate`].
pub const STALE_PAIR_MARGIN: f64 = 1.2;

/// Liveness state of a path as judged by its sender (docs/protocol.md#path-states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathState {
    /// Added, or back from `Down`: probes are sent; no data is scheduled on it yet.
    Probing,
    /// Acknowledgements arrive; data may be scheduled.
    Active,
    /// Still usable, but acknowledgements are late or the loss rate is high.
    Degraded,
    /// Acknowledgements have been silent beyond the blackout bound (seed PET-BMP §VII-C);
    /// only probes are sent until one is answered.
    Down,
}

impl PathState {
    /// Whether a scheduler may put data on a path in this state.
    pub const fn is_usable(self) -> bool {
        matches!(self, PathState::Active | PathState::Degraded)
    }

    /// Lower-case name, as in logs and status output.
    pub const fn name(self) -> &'static str {
        match self {
            PathState::Probing => "probing",
            PathState::Active => "active",
            PathState::Degraded => "degraded",
            PathState::Down => "down",
        }
    }
}

/// What the sender knows about one path, at the moment of a scheduling decision.
///
/// Delays and rates are estimates from feedback; `None` means "no sample yet".
#[derive(Clone, Debug, PartialEq)]
pub struct PathView {
    /// Which path this is.
    pub id: PathId,
    /// Liveness state; schedulers only pick paths whose state [`PathState::is_usable`].
    pub state: PathState,
    /// Smoothed round-trip time (RFC 6298).
    pub srtt: Option<Duration>,
    /// Round-trip time variation (RFC 6298).
    pub rttvar: Option<Duration>,
    /// Smallest round-trip time seen recently (queue-free).
    pub min_rtt: Option<Duration>,
    /// Forward one-way delay of this path relative to the session's fastest path, queue-free
    /// (base): differences between paths are exact without clock sync (seed PET-BMP §V-A).
    pub base_owd: Option<Duration>,
    /// Latest smoothed forward one-way delay relative to the same reference as `base_owd`
    /// (includes queueing), so `owd - base_owd` is this path's current queueing delay.
    pub owd: Option<Duration>,
    /// Bottleneck rate from packet-pair dispersion, bytes per second (seed PET-BMP §V-A).
    pub pair_rate: Option<f64>,
    /// Bottleneck rate from packet trains (median of recent runs, bytes per second; robust
    /// to real hosts' bursty receive timestamps; `plait` uses it, PET keeps its pairs).
    pub train_rate: Option<f64>,
    /// Delivery rate (Westwood-like, seed ETOM §IV-C), bytes per second.
    pub delivery_rate: Option<f64>,
    /// Configured capacity hint, bytes per second (from config; `None` if not given).
    pub configured_rate: Option<f64>,
    /// Bytes sent on this path not yet acknowledged or declared lost.
    pub bytes_in_flight: u64,
    /// Room left in this path's congestion window, bytes; `None` when the path has no
    /// window (packet mode leaves congestion control to the end hosts' TCP).
    pub cwnd_room: Option<u64>,
    /// Smoothed fraction of this path's packets declared lost, 0..=1.
    pub loss_rate: f64,
    /// The same, counting only datagrams resolved while the path's measured queue was
    /// short (under `cc::SHALLOW_QUEUE`), and no probe sent before the path's first
    /// answer: the loss the link causes by itself, not the drops of an overrun queue.
    pub shallow_loss_rate: f64,
    /// A backup path (`PathHints::backup`).
    pub backup: bool,
    /// Its priority within its class (`PathHints::priority`).
    pub priority: u8,
    /// An overflow path (`PathHints::overflow`).
    pub overflow: bool,
    /// In its overflow role now (docs/protocol.md#overflow): an overflow path while a
    /// non-overflow path of its class may carry data. Such a path is not
    /// [`PathView::is_usable`]; a scheduler that spills (`plait`) may still pick it when
    /// [`PathView::may_overflow`] and every other path is backed up. Set by the session
    /// when it builds the views; `false` when the overflow paths are all that is left.
    pub overflow_only: bool,
    /// Held back, not usable for data: a backup while another path is usable
    /// (docs/protocol.md#backup), a path while a usable one of its class has a lower
    /// priority number (docs/protocol.md#priority), or a path the driver holds (`Session::set_path_held`:
    /// the tunnel's server, until the path's address is validated). Set by the session
    /// when it builds the views.
    pub standby: bool,
}

impl PathView {
    /// A fresh view with no estimates: handy for tests and for paths with no samples yet.
    pub fn new(id: PathId, state: PathState) -> PathView {
        PathView {
            id,
            state,
            srtt: None,
            rttvar: None,
            min_rtt: None,
            base_owd: None,
            owd: None,
            pair_rate: None,
            train_rate: None,
            delivery_rate: None,
            configured_rate: None,
            bytes_in_flight: 0,
            cwnd_room: None,
            loss_rate: 0.0,
            shallow_loss_rate: 0.0,
            backup: false,
            priority: 0,
            overflow: false,
            overflow_only: false,
            standby: false,
        }
    }

    /// Whether a scheduler may put data on this path.
    pub fn is_usable(&self) -> bool {
        self.may_carry() && self.cwnd_room != Some(0)
    }

    /// Whether the path may carry data at all, its congestion window aside: its state is
    /// usable, it is not in standby (a backup held back, or a held path) and not in its
    /// overflow role.
    pub fn may_carry(&self) -> bool {
        self.state.is_usable() && !self.standby && !self.overflow_only
    }

    /// Whether a scheduler that spills may put the load the other paths cannot carry on
    /// this path: it is in its overflow role (`overflow_only`), its state is usable, it is
    /// not in standby and its window has room (docs/protocol.md#overflow).
    pub fn may_overflow(&self) -> bool {
        self.overflow_only && self.state.is_usable() && !self.standby && self.cwnd_room != Some(0)
    }

    /// Whether a scheduler may return this path: [`PathView::is_usable`], or
    /// [`PathView::may_overflow`] (only schedulers that spill return such a path).
    pub fn is_selectable(&self) -> bool {
        self.is_usable() || self.may_overflow()
    }

    /// Best estimate of the path's capacity in bytes per second: the packet-pair rate (a
    /// capacity measurement), replaced by the delivery rate when that is more than
    /// [`STALE_PAIR_MARGIN`] higher (the path has delivered that much, so the pair estimate is
    /// stale: under paced sending no new pair may come to correct it; the margin keeps
    /// ACK-compressed delivery samples from inflating a sound estimate); else the configured
    /// hint; else the delivery rate, which alone measures only what the path was given.
    pub fn rate_estimate(&self) -> Option<f64> {
        let pair = self.pair_rate.filter(is_rate);
        let delivery = self.delivery_rate.filter(is_rate);
        match (pair, delivery) {
            (Some(p), Some(d)) => Some(if d > p * STALE_PAIR_MARGIN { d } else { p }),
            (Some(p), None) => Some(p),
            (None, _) => self.configured_rate.filter(is_rate).or(delivery),
        }
    }

    /// The path's capacity as far as a capacity measurement says: the packet-pair rate,
    /// else the train rate, else the configured hint, raised to the delivery rate when the
    /// path has delivered more. `None` when only the delivery rate is known: a path that
    /// carried little (acknowledgements, keepalives) has delivered little, whatever it
    /// could carry, and pacing a burst at that rate would hold it for seconds.
    pub fn measured_capacity(&self) -> Option<f64> {
        let capacity = self
            .pair_rate
            .filter(is_rate)
            .or(self.train_rate.filter(is_rate))
            .or(self.configured_rate.filter(is_rate))?;
        Some(capacity.max(self.delivery_rate.filter(is_rate).unwrap_or(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_rate_alone_is_no_measured_capacity() {
        let mut v = PathView::new(PathId(0), PathState::Active);
        v.delivery_rate = Some(300.0);
        assert_eq!(v.rate_estimate(), Some(300.0));
        assert_eq!(v.measured_capacity(), None);
        v.configured_rate = Some(5e6);
        assert_eq!(v.measured_capacity(), Some(5e6));
        v.train_rate = Some(4e6);
        assert_eq!(v.measured_capacity(), Some(4e6));
        v.pair_rate = Some(3e6);
        assert_eq!(v.measured_capacity(), Some(3e6));
        v.delivery_rate = Some(6e6);
        assert_eq!(
            v.measured_capacity(),
            Some(6e6),
            "raised to what it delivered"
        );
    }
}
