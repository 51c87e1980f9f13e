//! Quality-driven make-before-break handover (seed MMS §II-E; docs/protocol.md#handover).
//!
//! Seed MMS moves a session off a wireless link "seeing lower signal strength" before the
//! link is torn down, onto the links that remain ("make-before-break"). plait judges each
//! usable path against the best of the others on what it measures (the first that holds
//! is the reason):
//! - **loss**: the loss the link causes by itself (`PathView::shallow_loss_rate`, not the
//!   drops of a queue the sender overran), averaged over [`HandoverConfig::loss_period`]
//!   ([`HandoverTracker::average_loss`]), is at least [`HandoverConfig::loss`] and more
//!   than [`HandoverConfig::loss_margin`] above the least lossy other path's;
//! - **delay**: the smoothed RTT is more than [`HandoverConfig::delay_margin`] above both
//!   the fastest other path's and the path's own minimum (a path that is slow by nature, a
//!   satellite link, is not handed over for it: only one whose delay grew);
//! - **signal**: the link layer reports a signal under [`HandoverConfig::weak_signal`]
//!   (`Session::set_link_signal`, where the kernel gives it) while some other path's is
//!   not weak or not reported;
//! - **blackouts**: it went down [`HandoverConfig::blackouts`] times within
//!   [`HandoverConfig::flap_window`] while carrying, at least a hold apart (downs closer
//!   than that are one episode), and some other path went down fewer times (a handover
//!   for another reason forgets the downs before it: they were that episode's). Judged
//!   last: a path poor for blackouts alone still carries for one failing now
//!   (`session/handover.rs`).
//!
//! A path judged poor is *handed over*: it stands by (no new data, `PathView::standby`)
//! and gets a probe every [`HandoverConfig::probe_interval`], so its loss and delay stay
//! measured. It is handed back once it has been clear for a hold time: clear by looser
//! bounds (half the loss figures and half the delay margin, hysteresis); the hold starts
//! at [`HandoverConfig::hold`] and doubles, up to [`HandoverConfig::max_hold`], each time
//! the path is handed over again within the flap window, so a path that oscillates
//! around the bounds settles.
//!
//! Invariants:
//! - never the last path: a path is handed over only while some other usable path that
//!   is neither standing by nor poor remains (poor for past blackouts alone counts as
//!   able to carry for a path failing now, by loss, delay or signal); when none does,
//!   every path is handed back;
//! - paths equally poor (every path lossy) are all kept: each is judged against the best
//!   of the others, with a margin;
//! - deterministic: the caller gives the time; no state outside [`HandoverTracker`].

use std::time::Duration;

use crate::time::Time;

/// Tunables of the handover (docs/protocol.md#handover).
#[derive(Clone, Debug, PartialEq)]
pub struct HandoverConfig {
    /// Whether paths are handed over at all.
    pub enabled: bool,
    /// Link loss rate at which a path is poor (if also past the margin).
    pub loss: f64,
    /// …and by how much it must exceed the least lossy other path's.
    pub loss_margin: f64,
    /// Time constant of the loss average the judgement reads. The engine's loss rate
    /// moves by 1/32 per datagram, about 20 ms of a busy 20 Mbit/s path: at 5 % loss it
    /// passes 10 % now and then, and on the test bed's fading link that handed a path
    /// over that still carried most of the traffic.
    pub loss_period: Duration,
    /// RTT growth that makes a path poor, over both the fastest other path's smoothed RTT
    /// and the path's own minimum.
    pub delay_margin: Duration,
    /// Times down within `flap_window` that make a path poor.
    pub blackouts: u32,
    /// How far back blackouts count, and within which a new handover doubles the hold.
    pub flap_window: Duration,
    /// Link-layer signal (0 to 1 of the driver's scale) under which a path is poor.
    pub weak_signal: f64,
    /// How long a handed-over path must be clear before it is handed back, at first.
    pub hold: Duration,
    /// Longest hold after repeated handovers.
    pub max_hold: Duration,
    /// A handed-over path gets one probe this often.
    pub probe_interval: Duration,
}

impl Default for HandoverConfig {
    fn default() -> Self {
        HandoverConfig {
            enabled: false,
            loss: 0.10,
            loss_margin: 0.05,
            loss_period: Duration::from_secs(1),
            delay_margin: Duration::from_millis(300),
            blackouts: 2,
            flap_window: Duration::from_secs(30),
            weak_signal: 0.2,
            hold: Duration::from_secs(1),
            max_hold: Duration::from_secs(16),
            probe_interval: Duration::from_millis(50),
        }
    }
}

/// Most blackout times a tracker remembers (more than any sane `blackouts`).
const MAX_BLACKOUTS: usize = 8;

impl HandoverConfig {
    /// Why the figures are unusable, if they are.
    pub fn problem(&self) -> Option<&'static str> {
        let fraction = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        if !fraction(self.loss) || !fraction(self.loss_margin) {
            Some("loss and loss_margin must be fractions from 0 to 1")
        } else if !(self.weak_signal.is_finite() && (0.0..=0.9).contains(&self.weak_signal)) {
            Some("weak_signal must be from 0 to 0.9 (a path is handed back 0.1 above it)")
        } else if self.blackouts == 0 || self.blackouts as usize > MAX_BLACKOUTS {
            Some("blackouts must be from 1 to 8")
        } else if self.loss_period.is_zero() || self.loss_period > Duration::from_secs(60) {
            Some("loss_period must be above 0 and at most 60 s")
        } else if self.hold.is_zero() || self.max_hold < self.hold {
            Some("hold must be positive and max_hold at least hold")
        } else if [self.delay_margin, self.max_hold, self.flap_window]
            .iter()
            .any(|d| *d > Duration::from_secs(3600))
        {
            Some("delay_margin, max_hold and flap_window must be at most 1 hour")
        } else if self.probe_interval < Duration::from_millis(10) {
            Some("probe_interval must be at least 10 ms")
        } else {
            None
        }
    }
}

/// A path handed over for a weak signal is handed back once its signal is this much
/// (of the driver's 0-to-1 scale) above [`HandoverConfig::weak_signal`].
pub const HANDBACK_SIGNAL_MARGIN: f64 = 0.1;

/// Whether a signal reading is under `bound`. A reading at a bound is not under it,
/// whatever the rounding of either: -82 dBm is 18/60 of NetworkManager's scale, which
/// as a float is just under `0.2 + 0.1`.
pub fn signal_under(signal: f64, bound: f64) -> bool {
    signal < bound - 1e-9
}

/// Why a path is poor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverReason {
    /// It loses more than the others by itself.
    Loss,
    /// Its delay grew far past the others' and its own floor.
    Delay,
    /// It went down repeatedly.
    Blackouts,
    /// The link layer reports a weak signal.
    WeakSignal,
}

impl HandoverReason {
    /// The reason in a word, for logs and `plait status`.
    pub const fn as_str(self) -> &'static str {
        match self {
            HandoverReason::Loss => "loss",
            HandoverReason::Delay => "delay",
            HandoverReason::Blackouts => "blackouts",
            HandoverReason::WeakSignal => "weak signal",
        }
    }
}

/// What the judgement reads of one usable path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QualitySample {
    /// The link's own loss rate (`PathView::shallow_loss_rate`).
    pub link_loss: f64,
    /// Smoothed RTT, if measured.
    pub srtt: Option<Duration>,
    /// Minimum RTT, if measured.
    pub min_rtt: Option<Duration>,
    /// Link-layer signal, 0 to 1, if reported.
    pub signal: Option<f64>,
    /// Times down within the flap window.
    pub blackouts: u32,
}

/// Why `me` is poor against `others` (every other usable path that may carry), if it is.
/// `looser`: the path is handed over now, and is judged by the looser bounds that hand
/// it back.
pub fn judge(
    cfg: &HandoverConfig,
    me: &QualitySample,
    others: &[QualitySample],
    looser: bool,
) -> Option<HandoverReason> {
    if others.is_empty() {
        return None;
    }
    let scale = if looser { 0.5 } else { 1.0 };
    let best_loss = others.iter().map(|o| o.link_loss).fold(1.0, f64::min);
    if me.link_loss >= cfg.loss * scale && me.link_loss > best_loss + cfg.loss_margin * scale {
        return Some(HandoverReason::Loss);
    }
    let margin = cfg.delay_margin.mul_f64(scale);
    let fastest = others.iter().filter_map(|o| o.srtt).min();
    if let (Some(srtt), Some(min_rtt), Some(fastest)) = (me.srtt, me.min_rtt, fastest)
        && srtt > fastest + margin
        && srtt > min_rtt + margin
    {
        return Some(HandoverReason::Delay);
    }
    let weak = |s: Option<f64>, bound: f64| s.is_some_and(|s| signal_under(s, bound));
    let bound = if looser {
        cfg.weak_signal + HANDBACK_SIGNAL_MARGIN
    } else {
        cfg.weak_signal
    };
    if weak(me.signal, bound) && others.iter().any(|o| !weak(o.signal, cfg.weak_signal)) {
        return Some(HandoverReason::WeakSignal);
    }
    // Last: a path poor for past blackouts alone still carries for one failing now.
    let fewest = others.iter().map(|o| o.blackouts).min().unwrap_or(0);
    if me.blackouts >= cfg.blackouts && me.blackouts > fewest {
        return Some(HandoverReason::Blackouts);
    }
    None
}

/// A change of a path's handover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverChange {
    /// The path was handed over, for this reason.
    HandedOver(HandoverReason),
    /// The path was handed back.
    HandedBack,
}

/// One path's handover state (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct HandoverTracker {
    /// Handed over, and why.
    handed_over: Option<HandoverReason>,
    /// While handed over: since when the path has been clear.
    clear_since: Option<Time>,
    /// The hold now in force (zero: the configured one).
    hold: Duration,
    /// When the path was last handed over.
    last_handover: Option<Time>,
    /// When the path went down, most recent last (at most [`MAX_BLACKOUTS`]).
    blackouts: Vec<Time>,
    /// The path's `down_events` counter when last looked at.
    downs_seen: u64,
    /// Link-layer signal, 0 to 1, as the driver last reported it.
    signal: Option<f64>,
    /// The link loss averaged over the loss period, and when it was last updated.
    average_loss: Option<(f64, Time)>,
    /// Since when the path has been down or probing, while it is.
    gone_since: Option<Time>,
    /// After an outage, until then the loss average stays at zero (see `judged_again`).
    fresh_until: Option<Time>,
}

impl HandoverTracker {
    /// Why the path is handed over, if it is.
    pub fn handed_over(&self) -> Option<HandoverReason> {
        self.handed_over
    }

    /// The link-layer signal last reported (0 to 1).
    pub fn signal(&self) -> Option<f64> {
        self.signal
    }

    /// Records the link layer's signal (0 to 1; `None`: not reported). Values out of range
    /// are clamped; NaN counts as not reported.
    pub fn set_signal(&mut self, signal: Option<f64>) {
        self.signal = signal.filter(|s| !s.is_nan()).map(|s| s.clamp(0.0, 1.0));
    }

    /// Feeds the path's current link loss rate at `now` and returns its average over
    /// `period` (an exponential average weighted by time, so a busy path that resolves a
    /// datagram every few microseconds and an idle one count the same span).
    pub fn average_loss(&mut self, now: Time, loss: f64, period: Duration) -> f64 {
        let loss = if loss.is_finite() {
            loss.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if self.fresh_until.is_some_and(|t| now < t) {
            self.average_loss = Some((0.0, now));
            return 0.0;
        }
        let avg = match self.average_loss {
            None => loss,
            Some((avg, at)) => {
                let dt = now.saturating_since(at).as_secs_f64();
                let w = 1.0 - (-dt / period.as_secs_f64()).exp();
                avg + (loss - avg) * w
            }
        };
        self.average_loss = Some((avg, now));
        avg
    }

    /// Notes that the path is not judged at `now` (down, probing, held or suspect);
    /// `gone`: down or probing.
    pub fn not_judged(&mut self, now: Time, gone: bool) {
        if gone {
            self.gone_since.get_or_insert(now);
        }
    }

    /// The path is judged again at `now`. One that was gone for at least the hold (an
    /// outage, not a few probes lost in a row on a lossy link) is judged afresh, like a new
    /// link: handed back, and its loss average held at zero for one hold. The engine's
    /// link loss rate is full of the probes lost while down, and fills with fresh
    /// evidence only once data flows again: on the test bed a client whose path came back
    /// from a 4 s blackhole was handed over again 0.14 s later by those old losses.
    pub fn judged_again(&mut self, cfg: &HandoverConfig, now: Time) -> Option<HandoverChange> {
        let since = self.gone_since.take()?;
        if now.saturating_since(since) < cfg.hold {
            return None;
        }
        self.average_loss = Some((0.0, now));
        self.fresh_until = Some(now + cfg.hold);
        self.handed_over?;
        self.hand_back()
    }

    /// Notes the path's down counter at `now`: each new down is a blackout, unless the
    /// path is handed over (then only probes ride it, sparse enough that a lossy link
    /// loses a few in a row and goes down; its loss already speaks for it) or it comes
    /// within a hold of the last blackout counted (the same episode: a link that goes
    /// down again soon after it came back has one trouble, not two; a down counts when it
    /// is noticed, the next time the path is judged. On the test bed a
    /// starved machine stalled a clean path twice in 0.22 s while the other started
    /// losing 30 %; counted twice, they made the clean path poor for blackouts, and the
    /// lossy one could not be handed over while it was).
    pub fn note_downs(&mut self, cfg: &HandoverConfig, now: Time, down_events: u64) {
        let new = down_events.saturating_sub(self.downs_seen);
        self.downs_seen = down_events;
        if new == 0 || self.handed_over.is_some() {
            return;
        }
        if self
            .blackouts
            .last()
            .is_some_and(|&t| now.saturating_since(t) < cfg.hold)
        {
            return;
        }
        // Several downs seen at once (an idle session is judged only when it sends) have
        // unknown times: one episode, counted once.
        if self.blackouts.len() == MAX_BLACKOUTS {
            self.blackouts.remove(0);
        }
        self.blackouts.push(now);
    }

    /// Blackouts within `window` before `now`.
    pub fn recent_blackouts(&self, now: Time, window: Duration) -> u32 {
        let n = self
            .blackouts
            .iter()
            .filter(|&&t| now.saturating_since(t) < window)
            .count();
        n as u32
    }

    /// Applies a judgement at `now` (`poor`: why the path is poor now, `None` if clear);
    /// `allowed`: the path may be handed over (another path can carry). Returns a change.
    pub fn update(
        &mut self,
        cfg: &HandoverConfig,
        now: Time,
        poor: Option<HandoverReason>,
        allowed: bool,
    ) -> Option<HandoverChange> {
        match self.handed_over {
            None => {
                let reason = poor.filter(|_| allowed)?;
                let again = self
                    .last_handover
                    .is_some_and(|t| now.saturating_since(t) < cfg.flap_window);
                self.hold = if again && !self.hold.is_zero() {
                    (self.hold * 2).min(cfg.max_hold)
                } else {
                    cfg.hold
                };
                self.set_reason(reason);
                self.last_handover = Some(now);
                self.clear_since = None;
                Some(HandoverChange::HandedOver(reason))
            }
            Some(_) if !allowed => {
                // Forced back (no other path carries): not a flap of this path's own, so
                // the next handover starts from the configured hold.
                self.last_handover = None;
                self.hand_back()
            }
            Some(_) => {
                if let Some(reason) = poor {
                    self.set_reason(reason);
                    self.clear_since = None;
                    return None;
                }
                let since = *self.clear_since.get_or_insert(now);
                if now.saturating_since(since) >= self.hold {
                    self.hand_back()
                } else {
                    None
                }
            }
        }
    }

    /// The path is (still) handed over, for `reason`. The downs counted so far are
    /// forgotten unless they are the reason: a link losing 30 % both ways carries little
    /// but probes once its loss is priced, loses a few in a row now and then and goes
    /// down. Kept, those downs held the path out for blackouts after its loss cleared,
    /// until they aged out of the flap window (on the test bed, a path handed over for
    /// blackouts 0.8 s into such a loss).
    fn set_reason(&mut self, reason: HandoverReason) {
        self.handed_over = Some(reason);
        if reason != HandoverReason::Blackouts {
            self.blackouts.clear();
        }
    }

    fn hand_back(&mut self) -> Option<HandoverChange> {
        self.handed_over = None;
        self.clear_since = None;
        Some(HandoverChange::HandedBack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn clean() -> QualitySample {
        QualitySample {
            link_loss: 0.0,
            srtt: Some(ms(50)),
            min_rtt: Some(ms(40)),
            signal: None,
            blackouts: 0,
        }
    }

    fn at(s: f64) -> Time {
        Time::ZERO + Duration::from_secs_f64(s)
    }

    /// When a handed-over path that stays clear will be handed back.
    fn back_at(t: &HandoverTracker) -> Option<Time> {
        t.handed_over?;
        Some(t.clear_since? + t.hold)
    }

    #[test]
    fn a_path_losing_past_the_bound_and_the_margin_is_poor() {
        let cfg = HandoverConfig::default();
        let lossy = QualitySample {
            link_loss: 0.12,
            ..clean()
        };
        assert_eq!(
            judge(&cfg, &lossy, &[clean()], false),
            Some(HandoverReason::Loss)
        );
        let also_lossy = QualitySample {
            link_loss: 0.09,
            ..clean()
        };
        assert_eq!(
            judge(&cfg, &lossy, &[also_lossy], false),
            None,
            "within the margin of the best other path"
        );
        let light = QualitySample {
            link_loss: 0.08,
            ..clean()
        };
        assert_eq!(judge(&cfg, &light, &[clean()], false), None);
        assert_eq!(
            judge(&cfg, &light, &[clean()], true),
            Some(HandoverReason::Loss),
            "a handed-over path must fall below half the bound"
        );
        assert_eq!(judge(&cfg, &lossy, &[], false), None, "no other path");
    }

    #[test]
    fn delay_counts_only_when_it_grew_past_the_paths_own_floor() {
        let cfg = HandoverConfig::default();
        let bloated = QualitySample {
            srtt: Some(ms(900)),
            min_rtt: Some(ms(40)),
            ..clean()
        };
        assert_eq!(
            judge(&cfg, &bloated, &[clean()], false),
            Some(HandoverReason::Delay)
        );
        let satellite = QualitySample {
            srtt: Some(ms(650)),
            min_rtt: Some(ms(600)),
            ..clean()
        };
        assert_eq!(judge(&cfg, &satellite, &[clean()], false), None);
        let unknown = QualitySample {
            srtt: None,
            ..clean()
        };
        assert_eq!(judge(&cfg, &bloated, &[unknown], false), None);
    }

    #[test]
    fn repeated_blackouts_and_a_weak_signal_are_poor_against_a_better_path() {
        let cfg = HandoverConfig::default();
        let flapping = QualitySample {
            blackouts: 2,
            ..clean()
        };
        assert_eq!(
            judge(&cfg, &flapping, &[clean()], false),
            Some(HandoverReason::Blackouts)
        );
        assert_eq!(judge(&cfg, &flapping, &[flapping], false), None);
        let weak = QualitySample {
            signal: Some(0.1),
            ..clean()
        };
        assert_eq!(
            judge(&cfg, &weak, &[clean()], false),
            Some(HandoverReason::WeakSignal)
        );
        assert_eq!(judge(&cfg, &weak, &[weak], false), None, "every link weak");
        let recovering = QualitySample {
            signal: Some(0.25),
            ..clean()
        };
        assert_eq!(judge(&cfg, &recovering, &[clean()], false), None);
        assert_eq!(
            judge(&cfg, &recovering, &[clean()], true),
            Some(HandoverReason::WeakSignal),
            "handed back a tenth above the bound"
        );
    }

    #[test]
    fn a_tracker_hands_back_after_the_hold_and_doubles_it_when_flapping() {
        let cfg = HandoverConfig::default();
        let mut t = HandoverTracker::default();
        let loss = Some(HandoverReason::Loss);
        assert_eq!(t.update(&cfg, at(0.0), loss, false), None, "last path");
        assert_eq!(
            t.update(&cfg, at(0.0), loss, true),
            Some(HandoverChange::HandedOver(HandoverReason::Loss))
        );
        assert_eq!(t.update(&cfg, at(0.5), None, true), None);
        assert_eq!(back_at(&t), Some(at(1.5)));
        assert_eq!(t.update(&cfg, at(1.0), loss, true), None, "poor again");
        assert_eq!(t.update(&cfg, at(1.2), None, true), None);
        assert_eq!(t.update(&cfg, at(2.1), None, true), None);
        assert_eq!(
            t.update(&cfg, at(2.2), None, true),
            Some(HandoverChange::HandedBack)
        );
        // Handed over again within the flap window: a 2 s hold, then 4 s.
        t.update(&cfg, at(3.0), loss, true);
        assert_eq!(t.update(&cfg, at(3.0), None, true), None);
        assert_eq!(back_at(&t), Some(at(5.0)));
        t.update(&cfg, at(5.0), None, true);
        t.update(&cfg, at(6.0), loss, true);
        t.update(&cfg, at(6.0), None, true);
        assert_eq!(back_at(&t), Some(at(10.0)));
        // The other paths went: handed back at once.
        assert_eq!(
            t.update(&cfg, at(6.1), loss, false),
            Some(HandoverChange::HandedBack)
        );
        // After the flap window, the hold starts over.
        t.update(&cfg, at(60.0), loss, true);
        t.update(&cfg, at(60.0), None, true);
        assert_eq!(back_at(&t), Some(at(61.0)));
    }

    #[test]
    fn the_loss_average_follows_time_not_datagrams() {
        let mut t = HandoverTracker::default();
        let period = Duration::from_secs(1);
        assert_eq!(t.average_loss(at(0.0), 0.0, period), 0.0);
        // A thousand spikes to 12 % within a millisecond barely move it.
        let mut avg = 0.0;
        for i in 0..1000 {
            avg = t.average_loss(at(0.000_001 * f64::from(i)), 0.12, period);
        }
        assert!(avg < 0.001, "{avg}");
        // Held for one period: about 63 % of the way.
        let avg = t.average_loss(at(1.001), 0.12, period);
        assert!((avg - 0.12 * 0.632).abs() < 0.005, "{avg}");
        assert_eq!(t.average_loss(at(60.0), f64::NAN, period), 0.0);
    }

    #[test]
    fn a_path_back_from_an_outage_is_judged_afresh() {
        let cfg = HandoverConfig::default();
        let mut t = HandoverTracker::default();
        t.average_loss(at(0.0), 0.3, cfg.loss_period);
        t.update(&cfg, at(0.0), Some(HandoverReason::Loss), true);
        // A short spell down (a few probes lost in a row): the standing holds.
        t.not_judged(at(1.0), true);
        assert_eq!(t.judged_again(&cfg, at(1.3)), None);
        assert!(t.handed_over().is_some());
        // An outage: handed back, the loss average from zero.
        t.not_judged(at(2.0), true);
        t.not_judged(at(3.0), true);
        assert_eq!(
            t.judged_again(&cfg, at(5.0)),
            Some(HandoverChange::HandedBack)
        );
        assert_eq!(t.average_loss(at(5.5), 0.6, cfg.loss_period), 0.0);
        assert_eq!(t.judged_again(&cfg, at(6.0)), None, "once");
        assert!(
            t.average_loss(at(7.0), 0.6, cfg.loss_period) > 0.3,
            "fresh evidence counts"
        );
    }

    #[test]
    fn blackouts_are_counted_within_the_window_and_bounded() {
        let cfg = HandoverConfig::default();
        let mut t = HandoverTracker::default();
        t.note_downs(&cfg, at(1.0), 1);
        t.note_downs(&cfg, at(2.0), 1);
        assert_eq!(
            t.recent_blackouts(at(2.0), cfg.flap_window),
            1,
            "no new down"
        );
        t.note_downs(&cfg, at(3.0), 2);
        t.note_downs(&cfg, at(3.5), 3);
        assert_eq!(
            t.recent_blackouts(at(3.5), cfg.flap_window),
            2,
            "a down within a hold of the last is the same episode"
        );
        t.note_downs(&cfg, at(5.0), 6);
        assert_eq!(
            t.recent_blackouts(at(5.0), cfg.flap_window),
            3,
            "downs seen at once count once"
        );
        assert_eq!(t.recent_blackouts(at(32.0), cfg.flap_window), 2);
        for (i, s) in (7..20).enumerate() {
            t.note_downs(&cfg, at(f64::from(s)), 7 + i as u64);
        }
        assert_eq!(t.blackouts.len(), MAX_BLACKOUTS);
        t.note_downs(&cfg, at(30.0), u64::MAX);
        assert_eq!(t.blackouts.len(), MAX_BLACKOUTS);
        t.set_signal(Some(f64::NAN));
        assert_eq!(t.signal(), None);
        t.set_signal(Some(7.0));
        assert_eq!(t.signal(), Some(1.0));
    }

    #[test]
    fn a_handover_for_loss_forgets_the_downs_before_it() {
        let cfg = HandoverConfig::default();
        let mut t = HandoverTracker::default();
        // Two downs before the loss showed, then handed over for it: they are forgotten.
        t.note_downs(&cfg, at(1.0), 1);
        t.note_downs(&cfg, at(2.5), 2);
        assert_eq!(
            t.update(&cfg, at(3.0), Some(HandoverReason::Loss), true),
            Some(HandoverChange::HandedOver(HandoverReason::Loss))
        );
        assert_eq!(t.recent_blackouts(at(3.0), cfg.flap_window), 0);
        // Handed over for blackouts, the path keeps them.
        let mut t = HandoverTracker::default();
        t.note_downs(&cfg, at(1.0), 1);
        t.note_downs(&cfg, at(2.5), 2);
        t.update(&cfg, at(3.0), Some(HandoverReason::Blackouts), true);
        assert_eq!(t.recent_blackouts(at(3.0), cfg.flap_window), 2);
        // Until its loss shows: then they are forgotten, and the clear path is handed back
        // after the hold.
        t.update(&cfg, at(3.5), Some(HandoverReason::Loss), true);
        assert_eq!(t.recent_blackouts(at(3.5), cfg.flap_window), 0);
        assert_eq!(t.update(&cfg, at(4.0), None, true), None);
        assert_eq!(
            t.update(&cfg, at(4.0) + cfg.hold, None, true),
            Some(HandoverChange::HandedBack)
        );
    }

    #[test]
    fn a_weak_path_that_also_stalled_is_poor_for_its_signal() {
        // Blackouts come last, so such a path does not count as carrying for another
        // failing now (`session/handover.rs`).
        let cfg = HandoverConfig::default();
        let weak_and_stalled = QualitySample {
            signal: Some(0.1),
            blackouts: cfg.blackouts,
            ..clean()
        };
        assert_eq!(
            judge(&cfg, &weak_and_stalled, &[clean()], false),
            Some(HandoverReason::WeakSignal)
        );
    }

    #[test]
    fn a_signal_at_a_bound_is_not_under_it() {
        let cfg = HandoverConfig::default();
        let at = |level_dbm: f64| QualitySample {
            // NetworkManager's scale, as the tunnel reads it: -100 dBm is 0, -40 dBm 1.
            signal: Some((level_dbm + 100.0) / 60.0),
            ..clean()
        };
        // -88 dBm is the bound, -82 dBm the level a handed-over path comes back at.
        assert_eq!(judge(&cfg, &at(-88.0), &[clean()], false), None);
        assert_eq!(
            judge(&cfg, &at(-89.0), &[clean()], false),
            Some(HandoverReason::WeakSignal)
        );
        assert_eq!(judge(&cfg, &at(-82.0), &[clean()], true), None);
        assert_eq!(
            judge(&cfg, &at(-83.0), &[clean()], true),
            Some(HandoverReason::WeakSignal)
        );
    }

    #[test]
    fn bad_figures_are_named() {
        let bad = [
            HandoverConfig {
                loss: f64::NAN,
                ..HandoverConfig::default()
            },
            HandoverConfig {
                blackouts: 0,
                ..HandoverConfig::default()
            },
            HandoverConfig {
                max_hold: ms(10),
                ..HandoverConfig::default()
            },
            HandoverConfig {
                probe_interval: ms(1),
                ..HandoverConfig::default()
            },
            HandoverConfig {
                weak_signal: 0.95,
                ..HandoverConfig::default()
            },
            HandoverConfig {
                flap_window: Duration::MAX,
                ..HandoverConfig::default()
            },
            HandoverConfig {
                loss_period: Duration::ZERO,
                ..HandoverConfig::default()
            },
        ];
        for c in bad {
            assert!(c.problem().is_some(), "{c:?}");
        }
        assert_eq!(HandoverConfig::default().problem(), None);
    }
}
