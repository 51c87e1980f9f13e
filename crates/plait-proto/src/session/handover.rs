//! The session's side of quality-driven handover (docs/protocol.md#handover; the
//! judgement and each path's state are `path/handover.rs`): when the views are rebuilt,
//! each path that may carry is judged against the others (at most every 10 ms), and a
//! handed-over path stands by.
//!
//! Invariant: only paths that may carry data before this step (usable, not held, not
//! suspect) are judged or count as others; a handed-over path gets its probe cadence from
//! [`Path::set_handover_probe`](crate::path::Path::set_handover_probe) and loses it when
//! handed back, removed or no longer usable.

use std::time::Duration;

use super::{Event, Session, push_event};
use crate::ids::{MAX_PATHS, PathId};
use crate::path::{HandoverChange, HandoverReason, QualitySample, judge};

/// While a path is handed over, the paths are judged at least this often, traffic or not.
const JUDGE_IDLE_EVERY: Duration = Duration::from_millis(250);
/// …and at most this often: the views are rebuilt for every datagram, and judging every
/// path against the others each time cost about 0.4 µs a packet in the engine benchmark
/// (`cargo bench -p plait-proto --bench engine -- handover`); the loss average's time
/// constant and the hold are a second, so 10 ms more changes nothing.
const JUDGE_EVERY: Duration = Duration::from_millis(10);

impl Session {
    /// Marks the handed-over paths standing by in `self.views`, judging the paths first
    /// at most every [`JUDGE_EVERY`]. For stream datagrams (`streams`), not those handed
    /// over for loss alone: the engine resends what a path loses under the path's own
    /// congestion control, so the end hosts' TCP never sees that loss, and a lossy path
    /// still adds capacity (in the simulator's `scenarios/fade.toml` stream mode carried
    /// 17 Mbit/s on the path losing 15 %). Delay, blackouts and a weak signal say the path
    /// is failing: they hold for streams too.
    pub(super) fn apply_handover(&mut self, streams: bool) {
        if !self.config.handover.enabled {
            return;
        }
        let now = self.now;
        if self
            .handover_judged_at
            .is_none_or(|t| now.saturating_since(t) >= JUDGE_EVERY)
        {
            self.handover_judged_at = Some(now);
            self.judge_paths();
        }
        for v in self.views.iter_mut().filter(|v| v.may_carry()) {
            let reason = self
                .paths
                .get(v.id.index())
                .and_then(Option::as_ref)
                .and_then(|s| s.handover.handed_over());
            v.standby |= match reason {
                Some(HandoverReason::Loss) => !streams,
                Some(_) => true,
                None => false,
            };
        }
    }

    /// Judges each path that may carry against the others, hands paths over and back,
    /// and sets their probe cadence and the idle timer.
    fn judge_paths(&mut self) {
        let cfg = &self.config.handover;
        let now = self.now;
        let mut samples: [Option<(PathId, QualitySample)>; MAX_PATHS] = [None; MAX_PATHS];
        let mut n = 0;
        for v in self.views.iter().filter(|v| v.may_carry()) {
            let Some(slot) = self.paths.get_mut(v.id.index()).and_then(Option::as_mut) else {
                continue;
            };
            // Downs first: those of an outage the path sat out handed over are not counted.
            slot.handover
                .note_downs(cfg, now, slot.tx.stats().down_events);
            if let Some(HandoverChange::HandedBack) = slot.handover.judged_again(cfg, now) {
                push_event(
                    &mut self.events,
                    &mut self.stats,
                    Event::Handover {
                        path: v.id,
                        reason: None,
                    },
                );
            }
            let link_loss = slot
                .handover
                .average_loss(now, v.shallow_loss_rate, cfg.loss_period);
            samples[n] = Some((
                v.id,
                QualitySample {
                    link_loss,
                    srtt: v.srtt,
                    min_rtt: v.min_rtt,
                    signal: slot.handover.signal(),
                    blackouts: slot.handover.recent_blackouts(now, cfg.flap_window),
                },
            ));
            n += 1;
        }
        let samples = &samples[..n];
        // Why each candidate is handed over now, if it is.
        let mut standing = [None; MAX_PATHS];
        for (i, &(id, _)) in samples.iter().flatten().enumerate() {
            standing[i] = self.slot(id).and_then(|s| s.handover.handed_over());
        }
        // Why each candidate is poor now (a handed-over one by the looser bounds).
        let mut poor = [None; MAX_PATHS];
        for (i, &(_, me)) in samples.iter().flatten().enumerate() {
            let looser = standing[i].is_some();
            let mut others = [me; MAX_PATHS];
            let mut k = 0;
            for (j, &(_, o)) in samples.iter().flatten().enumerate() {
                if j != i {
                    others[k] = o;
                    k += 1;
                }
            }
            poor[i] = judge(cfg, &me, &others[..k], looser);
        }
        let mut changed = false;
        let mut any_standing = false;
        for (i, &(id, _)) in samples.iter().flatten().enumerate() {
            // Make before break: only while another path carries that is not poor (one
            // handed over and waiting out its hold does not carry). A path poor for its
            // past blackouts alone carries now: it may take over from one failing now (for
            // loss, delay or signal; or handed over for one and waiting out its hold), or
            // neither would be handed over.
            let present =
                |r: Option<HandoverReason>| r.is_some_and(|r| r != HandoverReason::Blackouts);
            let failing_now = present(poor[i]) || present(standing[i]);
            let allowed = (0..n).any(|j| {
                j != i
                    && standing[j].is_none()
                    && match poor[j] {
                        None => true,
                        Some(HandoverReason::Blackouts) => failing_now,
                        Some(_) => false,
                    }
            });
            let Some(slot) = self.paths.get_mut(id.index()).and_then(Option::as_mut) else {
                continue;
            };
            let change = slot.handover.update(cfg, now, poor[i], allowed);
            let handed_over = slot.handover.handed_over();
            any_standing |= handed_over.is_some();
            slot.tx
                .set_handover_probe(handed_over.map(|_| cfg.probe_interval));
            if let Some(change) = change {
                changed = true;
                let reason = match change {
                    HandoverChange::HandedOver(r) => {
                        self.stats.handovers += 1;
                        Some(r)
                    }
                    HandoverChange::HandedBack => None,
                };
                push_event(
                    &mut self.events,
                    &mut self.stats,
                    Event::Handover { path: id, reason },
                );
            }
        }
        // A path not judged needs no probes of its own (liveness probes it) and keeps its
        // standing; one back from an outage was judged afresh above. Only a held or
        // suspect one keeps the timer going: a down one is judged when it answers again.
        for slot in self.paths.iter_mut().flatten() {
            let id = slot.tx.id();
            if samples.iter().flatten().any(|(s, _)| *s == id) {
                continue;
            }
            slot.tx.set_handover_probe(None);
            let gone = !slot.tx.state().is_usable();
            slot.handover.not_judged(now, gone);
            any_standing |= !gone && slot.handover.handed_over().is_some();
        }
        // Judged again without traffic while a path stands by (`handle_timeout`).
        self.handover_wake = any_standing.then(|| now + JUDGE_IDLE_EVERY);
        if changed {
            // The scheduler may have waited for a path: it has one more, or one less.
            self.sched_blocked = false;
            self.sched_wait_until = None;
        }
    }

    /// Records the link layer's signal for path `id` (0 to 1 of the driver's scale;
    /// `None`: not reported): a weak one hands the path over (docs/protocol.md#handover).
    pub fn set_link_signal(
        &mut self,
        id: PathId,
        signal: Option<f64>,
    ) -> Result<(), super::PathError> {
        let slot = self
            .paths
            .get_mut(id.index())
            .ok_or(super::PathError::OutOfRange(id))?
            .as_mut()
            .ok_or(super::PathError::Unknown(id))?;
        slot.handover.set_signal(signal);
        Ok(())
    }

    /// The link layer's signal of path `id` as last set ([`Session::set_link_signal`]).
    pub fn path_link_signal(&self, id: PathId) -> Option<f64> {
        self.slot(id)?.handover.signal()
    }

    /// Why path `id` is handed over, if it is (docs/protocol.md#handover).
    pub fn path_handover(&self, id: PathId) -> Option<crate::path::HandoverReason> {
        self.slot(id)?.handover.handed_over()
    }
}
