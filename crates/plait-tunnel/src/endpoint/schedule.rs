//! When the client starts a handshake, and why (docs/protocol.md#rekeying,
//! docs/protocol.md#unknown-index, docs/protocol.md#unanswered).
//!
//! [`Schedule`] keeps what the client's handshake timers need: when the last initiation went
//! out, when something authenticated last came from the server, the unanswered-send clock
//! with its backoff, and a count of handshakes per cause. The client tells it what happens
//! (an authenticated datagram, something sealed, an initiation sent) and asks it whether an
//! initiation is due, when the next one is, and whether a hint may start one.
//!
//! Invariants: every cause of a new handshake waits at least [`MIN_RETRY`] after the last
//! initiation, and a hint at least [`HINT_MIN_INTERVAL`] (and none while a handshake a hint
//! started is in flight), so nothing from the network can make the client initiate in a
//! loop; an initiation in flight is repeated only at its own retry time.

use std::time::Duration;

use plait_proto::Time;

use crate::control::HandshakeCauses;
use crate::crypto::keypair::Keypair;

/// With keys but nothing authenticated from the server for this long (the engine sends a
/// keepalive every second per path, so silence means the server lost our keys, e.g. it
/// restarted, or every path is down), a new handshake goes out; WireGuard waits 15 s too.
/// The outer bound: [`UNANSWERED_REHANDSHAKE`] usually comes first.
pub const REHANDSHAKE_AFTER_SILENCE: Duration = Duration::from_secs(15);
/// Least time between two initiation attempts when none is in flight (after a completed
/// handshake, or after one that could not even be started).
pub const MIN_RETRY: Duration = Duration::from_millis(500);
/// An unknown-index hint starts a handshake only this long after the last initiation
/// (and never while one a hint started is in flight): forged hints cost at most one
/// handshake per interval (docs/protocol.md#unknown-index).
pub const HINT_MIN_INTERVAL: Duration = Duration::from_secs(1);
/// After the client sent something under its keys, nothing authenticated from the server
/// for this long starts a handshake (keeping the keys): the engine sends a keepalive every
/// second on each idle path and the server answers, so this means the server lost our keys
/// and its hint did not reach us, or every path is down. Three keepalive intervals, so
/// loss alone rarely triggers it, and a false alarm costs one rekey. Doubles after each such
/// handshake until authenticated data arrives, up to [`REHANDSHAKE_AFTER_SILENCE`]
/// (docs/protocol.md#unanswered).
pub const UNANSWERED_REHANDSHAKE: Duration = Duration::from_secs(3);

/// Why a handshake starts ([`HandshakeCauses`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// No keys (the first handshake, or after they expired).
    First,
    /// The keys reached their age or message limit.
    Rekey,
    /// An unknown-index hint.
    Hint,
    /// Nothing authenticated came back for [`UNANSWERED_REHANDSHAKE`] after we sent.
    Unanswered,
    /// Nothing authenticated for [`REHANDSHAKE_AFTER_SILENCE`].
    Silence,
    /// The initiation in flight is repeated.
    Retry,
}

/// The client's handshake timers' state (see the module docs).
#[derive(Debug, Default)]
pub struct Schedule {
    last_initiation: Option<Time>,
    last_rx: Option<Time>,
    /// When the current keys first sealed something after the last authenticated datagram
    /// from the server; `None`: nothing since.
    unanswered_since: Option<Time>,
    /// The current keys' (local index, messages sealed) when last looked.
    sent_mark: Option<(u32, u64)>,
    /// Handshakes started for [`UNANSWERED_REHANDSHAKE`] since authenticated data last came.
    unanswered_streak: u32,
    causes: HandshakeCauses,
}

impl Schedule {
    /// Something authenticated came from the server: a data message (`data`) or a
    /// handshake response. Only data stops the unanswered clock and resets its backoff (a
    /// server that answers handshakes but no data is not asked every 3 s).
    pub fn authenticated(&mut self, now: Time, data: bool) {
        self.last_rx = Some(now);
        if data {
            self.unanswered_since = None;
            self.unanswered_streak = 0;
        }
    }

    /// The current keys' local index and messages sealed, `keys`, after an input: if they
    /// changed, something was sent, and the first send after the last authenticated data
    /// starts the unanswered clock. (Sends noticed late start it late, never early.)
    pub fn sealed(&mut self, now: Time, keys: Option<&Keypair>) {
        let mark = keys.map(|k| (k.local_index, k.messages_sent()));
        if mark != self.sent_mark {
            self.sent_mark = mark;
            if mark.is_some_and(|(_, n)| n > 0) && self.unanswered_since.is_none() {
                self.unanswered_since = Some(now);
            }
        }
    }

    /// An initiation went out (or was attempted) at `now` for `cause`.
    pub fn started(&mut self, now: Time, cause: Cause) {
        self.last_initiation = Some(now);
        let counter = match cause {
            Cause::First => &mut self.causes.first,
            Cause::Rekey => &mut self.causes.rekey,
            Cause::Hint => &mut self.causes.hint,
            Cause::Unanswered => &mut self.causes.unanswered,
            Cause::Silence => &mut self.causes.silence,
            Cause::Retry => &mut self.causes.retry,
        };
        *counter += 1;
        if cause == Cause::Unanswered {
            self.unanswered_streak = self.unanswered_streak.saturating_add(1);
        }
    }

    /// Handshakes started so far, by cause.
    pub fn causes(&self) -> HandshakeCauses {
        self.causes
    }

    /// When the last initiation went out.
    #[cfg(test)]
    pub fn last_initiation(&self) -> Option<Time> {
        self.last_initiation
    }

    /// Whether a hint may start a handshake at `now`: none a hint started is in flight
    /// (`in_flight`: the cause of the handshake in flight, if any), and the last initiation
    /// is at least [`HINT_MIN_INTERVAL`] old.
    pub fn hint_welcome(&self, now: Time, in_flight: Option<Cause>) -> bool {
        in_flight != Some(Cause::Hint)
            && self
                .last_initiation
                .is_none_or(|last| now >= last + HINT_MIN_INTERVAL)
    }

    /// Whether an initiation is due at `now`, and why. One in flight (`retry_at`: its
    /// retry time) is repeated then; otherwise a new one goes when keys are wanted
    /// ([`Schedule::wanted`], or the message limit) and the last attempt is at least
    /// [`MIN_RETRY`] old.
    pub fn due(&self, now: Time, keys: Option<&Keypair>, retry_at: Option<Time>) -> Option<Cause> {
        if let Some(at) = retry_at {
            return (now >= at).then_some(Cause::Retry);
        }
        if now < self.earliest_new() {
            return None;
        }
        let (wanted, cause) = self.wanted(keys);
        if now >= wanted {
            Some(cause)
        } else if keys.is_some_and(|k| !k.is_usable(now)) {
            Some(Cause::First)
        } else if keys.is_some_and(|k| k.needs_rekey(now)) {
            Some(Cause::Rekey)
        } else {
            None
        }
    }

    /// When the next initiation goes out (see [`Schedule::due`]).
    pub fn next(&self, keys: Option<&Keypair>, retry_at: Option<Time>) -> Time {
        retry_at.unwrap_or_else(|| self.wanted(keys).0.max(self.earliest_new()))
    }

    /// When new keys are wanted, and why: at once without keys; else when they are due for
    /// a rekey, after [`REHANDSHAKE_AFTER_SILENCE`] without anything authenticated, or
    /// [`UNANSWERED_REHANDSHAKE`] (doubled per handshake it started already) after we sent
    /// and nothing authenticated came back, whichever is first.
    fn wanted(&self, keys: Option<&Keypair>) -> (Time, Cause) {
        let Some(k) = keys else {
            return (Time::ZERO, Cause::First);
        };
        let mut wanted = (k.rekey_at(), Cause::Rekey);
        let mut consider = |at: Time, cause| {
            if at < wanted.0 {
                wanted = (at, cause);
            }
        };
        if let Some(rx) = self.last_rx {
            consider(rx + REHANDSHAKE_AFTER_SILENCE, Cause::Silence);
        }
        if let Some(tx) = self.unanswered_since {
            let wait = UNANSWERED_REHANDSHAKE
                .saturating_mul(1 << self.unanswered_streak.min(8))
                .min(REHANDSHAKE_AFTER_SILENCE);
            consider(tx + wait, Cause::Unanswered);
        }
        wanted
    }

    /// With no initiation in flight, a new one may go soon after the last, but not in a
    /// loop.
    fn earliest_new(&self) -> Time {
        self.last_initiation
            .map_or(Time::ZERO, |last| last + MIN_RETRY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::handshake::SessionKeys;
    use crate::crypto::keypair::REKEY_AFTER_TIME;

    fn keys(created: Time) -> Keypair {
        let k = SessionKeys {
            send: [1; 32],
            recv: [2; 32],
        };
        Keypair::new(&k, 1, 2, created, true)
    }

    fn ms(n: u64) -> Time {
        Time::from_millis(n)
    }

    #[test]
    fn first_then_nothing_until_the_rekey() {
        let mut s = Schedule::default();
        assert_eq!(s.due(ms(0), None, None), Some(Cause::First));
        s.started(ms(0), Cause::First);
        assert_eq!(s.due(ms(1), None, Some(ms(5000))), None, "in flight");
        assert_eq!(s.due(ms(5000), None, Some(ms(5000))), Some(Cause::Retry));
        let k = keys(ms(100));
        s.authenticated(ms(100), false);
        assert_eq!(s.due(ms(200), Some(&k), None), None);
        let rekey = ms(100) + REKEY_AFTER_TIME;
        // Data keeps coming: the silence rule never fires, the rekey does.
        for t in (1..120).map(|i| ms(100 + i * 1000)) {
            s.authenticated(t, true);
            assert_eq!(s.due(t, Some(&k), None), None, "{t:?}");
        }
        assert_eq!(s.next(Some(&k), None), rekey);
        assert_eq!(s.due(rekey, Some(&k), None), Some(Cause::Rekey));
    }

    #[test]
    fn unanswered_sends_back_off_and_data_resets_them() {
        let mut s = Schedule::default();
        let mut k = keys(ms(0));
        s.started(ms(0), Cause::First);
        s.authenticated(ms(10), false);
        // Nothing sealed yet: no clock.
        s.sealed(ms(20), Some(&k));
        assert_eq!(s.next(Some(&k), None), ms(10) + REHANDSHAKE_AFTER_SILENCE);
        // Engine datagrams of 10 bytes on path 0, numbered 0 and 1 (the clear prefix).
        let mut buf = [0u8; 64];
        buf[crate::message::DATA_HEADER_LEN] = 0x20;
        k.seal(ms(1000), &mut buf, 10).unwrap();
        s.sealed(ms(1000), Some(&k));
        // More sends do not move the clock.
        buf[crate::message::DATA_HEADER_LEN..][..5].copy_from_slice(&[0x20, 0, 0, 0, 1]);
        k.seal(ms(2000), &mut buf, 10).unwrap();
        s.sealed(ms(2000), Some(&k));
        let first = ms(1000) + UNANSWERED_REHANDSHAKE;
        assert_eq!(s.next(Some(&k), None), first);
        assert_eq!(s.due(first, Some(&k), None), Some(Cause::Unanswered));
        s.started(first, Cause::Unanswered);
        // Its handshake completes (authenticated, not data): the next waits twice as long.
        s.authenticated(first + Duration::from_millis(50), false);
        assert_eq!(
            s.next(Some(&k), None),
            ms(1000) + UNANSWERED_REHANDSHAKE * 2
        );
        // Authenticated data stops the clock and resets the backoff.
        s.authenticated(ms(8000), true);
        assert_eq!(s.next(Some(&k), None), ms(8000) + REHANDSHAKE_AFTER_SILENCE);
        buf[crate::message::DATA_HEADER_LEN..][..5].copy_from_slice(&[0x20, 0, 0, 0, 2]);
        k.seal(ms(9000), &mut buf, 10).unwrap();
        s.sealed(ms(9000), Some(&k));
        assert_eq!(s.next(Some(&k), None), ms(9000) + UNANSWERED_REHANDSHAKE);
        assert_eq!(s.causes().unanswered, 1);
    }

    #[test]
    fn hints_wait_for_the_interval_and_for_their_own_handshake() {
        let mut s = Schedule::default();
        assert!(s.hint_welcome(ms(0), None));
        s.started(ms(0), Cause::Rekey);
        assert!(!s.hint_welcome(ms(999), Some(Cause::Rekey)));
        assert!(s.hint_welcome(ms(1000), Some(Cause::Rekey)));
        s.started(ms(1000), Cause::Hint);
        assert!(
            !s.hint_welcome(ms(9000), Some(Cause::Hint)),
            "its own in flight"
        );
        assert!(s.hint_welcome(ms(9000), None));
        assert_eq!(s.causes().hint, 1);
        assert_eq!(s.causes().rekey, 1);
    }
}
