//! `adaptive`: NewReno while a path's losses are congestion, BBR while the path's own link
//! loses datagrams (docs/protocol.md#adaptive-congestion).
//!
//! A loss-based controller reads every loss as congestion, so on a radio link that drops a
//! few percent of datagrams by itself it holds a window of about `1.22 / √p` datagrams
//! (Mathis et al. 1997): 3.9 at 10 %, whatever the path's capacity (the simulator's and the
//! test bed's T3, where such a path carried 2 % of the bytes). BBR's model ignores random
//! loss (`bbr.rs`), but at a bottleneck it shares with loss-based flows its share varies
//! more from run to run (`scenarios/shared-bottleneck.toml`: 1.12 ± 0.34 times a TCP
//! flow's over five seeds, a relative spread three times NewReno's 2.45 ± 0.24), so it is
//! no default for every path. This
//! controller runs NewReno and switches one path to BBR only while that path shows the
//! link's own losses: datagrams declared lost while the path's queue was short
//! (`cc::SHALLOW_QUEUE`, the same split the `plait` scheduler prices), reported through
//! [`CongestionController::on_link_sample`]. A drop-tail queue does not drop what finds it
//! short, so congestion losses of a buffered bottleneck do not count. Nor does anything
//! else resolved behind a long queue, deliveries included: counting those as clean while
//! the losses beside them could not count as the link's read a lossy link as clean
//! whenever BBR's start-up filled a deep buffer (`path::LinkLossTally`).
//!
//! The rule is a CUSUM test (Page 1954) between two link-loss rates, [`CLEAN_LOSS`] (0.25 %)
//! and [`LINK_LOSS`] (1 %: NewReno's window is then about 12 datagrams, below the
//! bandwidth-delay product of any path faster than 7 Mbit/s at 20 ms). Each resolved
//! datagram adds its log-likelihood ratio: `ln(1 % / 0.25 %)` for a link loss,
//! `ln(99 % / 99.75 %)` for anything else. NewReno hands over to BBR when the evidence for
//! 1 % reaches [`ENTER_EVIDENCE`] (`ln 99`, a 1 % error each way in Wald's bounds); BBR hands
//! back, in congestion avoidance at its own window (the measured BDP × 2), when the
//! evidence for 0.25 % reaches [`EXIT_EVIDENCE`], twice that. The sum never goes below zero,
//! so old evidence for the current controller does not delay a change. In practice: four
//! link losses within about 120 datagrams (or one in 100 sustained) move a path to BBR; a
//! clean path goes back after about 1,200 datagrams resolved behind a short queue, none a
//! link loss.
//!
//! Only losses an arriving ACK reveals count, and those found together (in one ACK) count
//! as one: a burst is an outage or an overflow, not independent random losses, and a path
//! back from a blackhole finds everything it had in flight lost at once; losses the loss
//! timer declares while no ACK comes are a path going silent. An outage (persistent
//! congestion) keeps the evidence gathered before it: a lossy path starved to a datagram or
//! two goes silent past its down bound every few seconds, and clearing it each time kept
//! such a path in NewReno for seconds.
//!
//! Limits, stated: on a bottleneck whose buffer is shorter than `SHALLOW_QUEUE` (10 ms),
//! congestion drops also meet a short queue; if they come at 1 % or more the path runs
//! BBR, which keeps more than a loss-based share there. And as only datagrams resolved
//! behind a short queue are evidence, a path in BBR whose queue stays 10 ms or longer (a
//! deep-buffered bottleneck that other flows keep full) gets no evidence either way and
//! stays in BBR, keeping more than a loss-based share, until the queue drains.
//!
//! **Queue cap.** A loss-based controller grows until a queue overflows, so on a link with a
//! deep drop-tail buffer it keeps that buffer full: a ping beside a stream-mode transfer
//! waited 96-98 ms more than idle on the test bed's 100 ms queues. So while NewReno runs, a
//! BBR model of the path ([`Bbr`], fed the same ACKs, never sending) bounds its window by
//! [`Bbr::queue_cap`]: [`QUEUE_CAP_GAIN`] (1.5) BDPs plus BBR's ACK-aggregation allowance
//! (what the peer may hold unacknowledged; less while the cap holds, as the session then
//! asks for prompt ACKs: [`CongestionController::wants_prompt_acks`],
//! docs/protocol.md#ack-soon) once the model has found the bandwidth, so the standing
//! queue stays near half a BDP plus that allowance (BBR's own gain of 2 left a ping 37-42 ms above idle on T1, the
//! goal being 30), and 2/ln 2 BDPs while the model is still finding it: until its
//! Startup sees three rounds without growth or the path shows a standing queue
//! ([`Bbr::on_standing_queue`], whatever is in flight), whichever comes first. NewReno stays in slow start
//! then: the cap, not a cut, holds the window (a probe's start-up spike of 50-70 ms,
//! idle 20, on T1's and T4's 20 ms path is what the standing queue ends). The model
//! misses the ACKs NewReno does not take (datagrams sent before a recovery period began):
//! its bandwidth filter holds the best sample of the last ten rounds, so a recovery
//! period does not lower it, and the rule for a rate drop (below) waits two smoothed RTTs
//! after a cut.
//!
//! A cut leaves at least the model's BDP (never more than NewReno's own window before it,
//! a drain check's included):
//! under the cap the standing queue is about half a BDP, so halving the flight would leave
//! 0.75 BDP and the link idle part of every round until avoidance regrew it, a datagram a
//! round (on T1's 100 ms path after the start's overflow: 6-7 of its 10 Mbit/s for 1.5 s).
//! One BDP drains the queue the loss signalled while the model's rate is current; its
//! filter keeps the best rate of ten rounds, so just after a rate drop the floor is the
//! old BDP. So after a loss a capped path can hold more than NewReno would. Between losses
//! the cap only ever lowers the window. A false standing-queue signal (a base delay read
//! too high) ends the model's Startup early, and growth is then held to about 1.5× a round
//! (the cap's arithmetic, not measured). Measured: docs/protocol.md#queue-cap.
//!
//! **A rate drop.** Ten rounds of the old rate would let 1.5 BDPs at that rate into a link
//! that just slowed, and rounds lengthen as its queue grows (about 1.5 s of a probe 130-160
//! ms above idle on the test bed's T5). So an ACK whose datagrams all met more queue than
//! the cap can make at its rate, by more than `SHALLOW_QUEUE`, moves the cap to the latest
//! delivery-rate sample until the samples reach BtlBw again ([`Bbr::on_queue_over_cap`];
//! not during a drain check, nor once the checks lifted the cap, nor within two smoothed
//! RTTs of a cut, whose recovery withholds ACKs from the model's samples). BtlBw itself
//! keeps its ten rounds, so a cut's floor stays the old BDP (NewReno's own window, which a
//! lower cap does not shrink, bounds it), and when the link speeds up again the cap
//! regrows with the samples, up to that window, instead of NewReno a datagram a round
//! (docs/protocol.md#rate-drop).
//!
//! The cap is for a queue the path makes itself. Where another flow keeps the bottleneck's
//! queue standing, the model (whose round trip is the path's minimum) reads the longer
//! round trip as a lower rate and the cap falls to its floor. So once the path's rate has
//! fallen, or while its cap is lifted, or when another path of the session has either
//! reason, a [`DrainCheck`] at the session's next 5 s boundary holds the window just under
//! what fills the pipe, and if the queue does not drain, NewReno runs without the cap
//! until two checks in a row see it drain (`drain_check.rs`,
//! docs/protocol.md#drain-check).
//!
//! Invariant: exactly one inner controller is active; what the wrapper asks (window,
//! pacing rate, whether ACKs in recovery count) is the active one's answer, but for the
//! window during a drain check, which is the smaller of NewReno's and the check's; no
//! clock, no randomness (`now` comes from the caller).

use super::{
    Acked, Bbr, BbrMode, CongestionController, Coupling, DRAIN_WINDOW_GAIN, DrainCheck, ModelView,
    NewReno,
};
use crate::time::Time;

// The model's two rates: the code uses the log-likelihood ratios derived from them below;
// the tests check the derivation.
/// The link-loss rate the test treats as "NewReno cannot fill the path".
#[cfg_attr(not(test), expect(dead_code))]
pub const LINK_LOSS: f64 = 0.01;
/// The link-loss rate the test treats as "clean".
#[cfg_attr(not(test), expect(dead_code))]
pub const CLEAN_LOSS: f64 = 0.0025;
/// Log-likelihood ratio of one link loss, 1 % against 0.25 %: `ln 4` (a constant, since
/// `f64::ln` is not `const`; checked against the formula in the tests). Added per ACK.
pub const LLR_LINK_LOSS: f64 = 1.386_294_361_119_890_6;
/// Log-likelihood ratio of one datagram resolved without a link loss: `ln(0.99 / 0.9975)`.
pub const LLR_NO_LINK_LOSS: f64 = -0.007_547_205_635_382_966;
/// Evidence (log-likelihood ratio) that moves a path from NewReno to BBR: `ln 99`.
pub const ENTER_EVIDENCE: f64 = 4.595;
/// Evidence that moves a path from BBR back to NewReno.
pub const EXIT_EVIDENCE: f64 = 2.0 * ENTER_EVIDENCE;

/// The queue cap's gain on the model's BDP once the model has found the bandwidth
/// (module docs): the standing queue is about `QUEUE_CAP_GAIN - 1` BDPs plus the ACK
/// allowance.
pub const QUEUE_CAP_GAIN: f64 = 1.5;

/// The active controller.
#[derive(Clone, Debug)]
enum Active {
    NewReno(NewReno),
    /// Boxed: a BBR is several times a NewReno's size.
    Bbr(Box<Bbr>),
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct Adaptive {
    mss: u64,
    active: Active,
    /// The path's BBR model while NewReno runs (the queue cap, module docs); boxed, as
    /// the active controller may be a BBR too.
    model: Box<Bbr>,
    /// Whether the path's standing queue is its own, so the cap can shorten it
    /// (`drain_check.rs`).
    drain: DrainCheck,
    /// Evidence for the other controller (never negative).
    evidence: f64,
    /// Switches so far (either way).
    switches: u64,
    /// When the last congestion event came: for two smoothed RTTs after it the model's
    /// samples miss the ACKs NewReno withholds in recovery, so they undercount the rate and
    /// are no measure of a rate drop.
    cut_at: Option<Time>,
    /// Whether the datagrams sent ask for prompt ACKs (the model's ACK hold follows).
    prompt_acks: bool,
}

impl Adaptive {
    /// NewReno in slow start, for datagrams of `mss` bytes.
    pub fn new(mss: u64) -> Adaptive {
        Adaptive {
            mss,
            active: Active::NewReno(NewReno::new(mss)),
            model: Box::new(Bbr::new(mss)),
            drain: DrainCheck::new(mss),
            evidence: 0.0,
            switches: 0,
            cut_at: None,
            prompt_acks: false,
        }
    }

    /// Whether BBR is the active controller.
    pub fn is_bbr(&self) -> bool {
        matches!(self.active, Active::Bbr(_))
    }

    /// Switches so far, either way.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    fn inner(&self) -> &dyn CongestionController {
        match &self.active {
            Active::NewReno(c) => c,
            Active::Bbr(c) => c.as_ref(),
        }
    }

    fn inner_mut(&mut self) -> &mut dyn CongestionController {
        match &mut self.active {
            Active::NewReno(c) => c,
            Active::Bbr(c) => c.as_mut(),
        }
    }

    /// Adds one batch of resolved datagrams to the evidence and switches when it is enough.
    fn weigh(&mut self, resolved: u32, link_lost: u32) {
        let losses = link_lost.min(1);
        let others = resolved.saturating_sub(losses);
        let for_link_loss =
            f64::from(losses) * LLR_LINK_LOSS + f64::from(others) * LLR_NO_LINK_LOSS;
        let (toward_other, needed) = match self.active {
            Active::NewReno(_) => (for_link_loss, ENTER_EVIDENCE),
            Active::Bbr(_) => (-for_link_loss, EXIT_EVIDENCE),
        };
        self.evidence = (self.evidence + toward_other).max(0.0);
        if self.evidence < needed {
            return;
        }
        self.evidence = 0.0;
        self.switches += 1;
        // The drain checks judged the other controller's queue.
        self.drain.reset();
        self.active = match &self.active {
            Active::NewReno(_) => Active::Bbr(Box::new(Bbr::new(self.mss))),
            Active::Bbr(b) => {
                // The BBR that ran is the freshest model of the path (with the ACK hold the
                // datagrams ask for).
                self.model = b.clone();
                self.model.set_prompt_acks(self.prompt_acks);
                Active::NewReno(NewReno::in_avoidance(self.mss, b.window()))
            }
        };
        self.apply_cap();
    }

    /// The window NewReno may have now (`None`: no cap yet, BBR runs, or the drain checks
    /// took the standing queue for other flows' and have not yet found it the path's own
    /// twice in a row).
    pub fn queue_cap(&self) -> Option<u64> {
        match self.active {
            Active::NewReno(_) if !self.drain.shared() => self.model.queue_cap(QUEUE_CAP_GAIN),
            _ => None,
        }
    }

    /// Whether the drain checks found the path's standing queue was other flows'.
    pub fn queue_is_shared(&self) -> bool {
        self.drain.shared()
    }

    /// Whether a drain check holds the window now (`drain_check.rs`).
    pub fn draining(&self) -> bool {
        self.drain_window().is_some()
    }

    fn apply_cap(&mut self) {
        let cap = self.queue_cap();
        if let Active::NewReno(c) = &mut self.active {
            match cap {
                Some(cap) => c.limit(cap),
                None => c.unlimit(),
            }
        }
    }

    /// The window while a drain check runs (`drain_check.rs`).
    fn drain_window(&self) -> Option<u64> {
        match self.active {
            Active::NewReno(_) => self.drain.window(),
            Active::Bbr(_) => None,
        }
    }
}

impl CongestionController for Adaptive {
    fn on_ack(&mut self, now: Time, acked: &Acked, coupling: &Coupling<'_>) {
        self.inner_mut().on_ack(now, acked, coupling);
        if let Active::NewReno(_) = self.active {
            // What a drain check delivers may be held under the path's rate on purpose:
            // like an application-limited sample, it may raise the model's rate, never
            // lower it. The model leaves Startup on the smoothed queue alone (just below,
            // whatever is in flight), not on BBR sending's raw-sample rule (`bbr.rs`,
            // **Startup's end**), so it gets no raw queue delay.
            let draining = self.drain.draining();
            let sample = Acked {
                app_limited: acked.app_limited || draining,
                queue_delay_seen: None,
                ..*acked
            };
            self.model.on_ack(now, &sample, coupling);
            if acked.standing_queue {
                self.model.on_standing_queue();
            }
            // A queue longer than the cap can make: the path's rate fell
            // (`Bbr::on_queue_over_cap`). Not during a drain check, whose window the check
            // fixed, nor once the checks found the queue other flows' (no cap then), nor
            // just after a cut (`cut_at`).
            let after_cut = self
                .cut_at
                .is_some_and(|cut| now.saturating_since(cut) < acked.srtt.saturating_mul(2));
            if let Some(queue) = acked.queue_delay_seen
                && !draining
                && !self.drain.shared()
                && !after_cut
            {
                self.model.on_queue_over_cap(queue, QUEUE_CAP_GAIN);
            }
            // A model past Startup has found the rate (whether it is in Drain, as under the
            // cap it stays while NewReno keeps more than a BDP in flight, or in ProbeBW).
            let model = (self.model.mode() != BbrMode::Startup).then(|| ModelView {
                best_rate: self.model.bandwidth(),
                rate_now: self.model.drain_rate(),
                drain_window: self.model.drained_window(DRAIN_WINDOW_GAIN).unwrap_or(0),
            });
            let sibling_wants = coupling
                .paths
                .iter()
                .any(|p| p.id != coupling.this && p.usable && p.wants_drain_check);
            self.drain.on_ack(
                now,
                acked.srtt,
                acked.queue_delay_seen,
                model,
                sibling_wants,
            );
            self.apply_cap();
        }
    }
    fn on_flight_at_loss(&mut self, flight: u64) {
        self.inner_mut().on_flight_at_loss(flight);
    }
    fn on_congestion_event(&mut self, now: Time, coupling: &Coupling<'_>) {
        // What NewReno had: its own window, a drain check's included, not the cap. A cap at
        // BtlBw is above the BDP, so only one lowered by a rate fall (`Bbr::cap_rate`) could
        // be the lesser, and a floor at that would leave NewReno to regrow a datagram a
        // round when the rate comes back (docs/protocol.md#rate-drop).
        let had = match &self.active {
            Active::NewReno(c) => {
                let own = c.own_window();
                Some(self.drain_window().map_or(own, |drain| own.min(drain)))
            }
            Active::Bbr(_) => None,
        };
        self.inner_mut().on_congestion_event(now, coupling);
        self.cut_at = Some(now);
        // At least the model's BDP after the cut (module docs), never more than NewReno had.
        if let (Active::NewReno(c), Some(had)) = (&mut self.active, had)
            && self.model.bandwidth() > 0.0
        {
            c.keep_at_least((self.model.bdp() as u64).min(had));
        }
    }
    fn on_spurious_congestion(&mut self, now: Time) {
        self.inner_mut().on_spurious_congestion(now);
        self.apply_cap();
    }
    fn on_persistent_congestion(&mut self, now: Time) {
        // The evidence stays: an outage's own losses never count (the loss timer declares
        // them, and the path drops its pending ones as it goes down), and what came before
        // it still describes the link. Clearing it stalled a 10 %-loss path under NewReno:
        // with a window of a datagram or two such a path goes silent past its down bound
        // every few seconds, and each time began its evidence anew (docs/protocol.md
        // #adaptive-congestion).
        self.inner_mut().on_persistent_congestion(now);
        // The path that comes back may not be the one that left (as in `Bbr`).
        self.model.on_persistent_congestion(now);
        self.drain.reset();
    }
    fn on_link_sample(&mut self, _now: Time, resolved: u32, link_lost: u32) {
        self.weigh(resolved, link_lost);
    }
    fn window(&self) -> u64 {
        let window = self.inner().window();
        self.drain_window()
            .map_or(window, |drain| window.min(drain))
    }
    fn pacing_rate(&self) -> Option<f64> {
        self.inner().pacing_rate()
    }
    fn name(&self) -> &'static str {
        match self.active {
            Active::NewReno(_) if self.drain.shared() => "adaptive (newreno, uncapped)",
            Active::NewReno(_) => "adaptive (newreno)",
            Active::Bbr(_) => "adaptive (bbr)",
        }
    }
    fn acks_in_recovery(&self) -> bool {
        self.inner().acks_in_recovery()
    }
    fn wants_drain_check(&self, now: Time) -> bool {
        matches!(self.active, Active::NewReno(_)) && self.drain.wants_check(now)
    }
    /// While the queue cap holds NewReno: the cap allows for the peer's ACK hold, and a
    /// prompter hold is a shorter queue (docs/protocol.md#ack-soon).
    fn wants_prompt_acks(&self) -> bool {
        self.queue_cap().is_some()
    }
    fn prompt_acks(&self) -> bool {
        self.prompt_acks
    }
    fn set_prompt_acks(&mut self, prompt: bool) {
        if self.prompt_acks != prompt {
            self.prompt_acks = prompt;
            self.model.set_prompt_acks(prompt);
            self.apply_cap();
        }
    }
}
