//! Path validation (docs/protocol.md#path-validation): which peer address a path's
//! datagrams go to, and how a new address earns that place.
//!
//! One [`PathAddress`] per path. The server learns addresses from authenticated datagrams,
//! but an authenticated datagram proves only that the client sealed it, not that the
//! client is at the address it came from: an on-path attacker can forward a copy from
//! anywhere, ahead of the original. So an address heard for the first time becomes a
//! *candidate*: it gets a PATH_CHALLENGE with an unpredictable token, and only a
//! PATH_RESPONSE echoing that token, authenticated and from that very address (and
//! socket), makes it the path's *validated* address. Meanwhile datagrams keep going to the
//! old validated address; a path that has none yet (its first address, or after a fresh
//! session) sends to its newest candidate.
//!
//! Invariants:
//! - The validated address changes only in [`PathAddress::on_response`], on the token of a
//!   challenge sent to that address.
//! - Towards a candidate, the bytes sent (challenges, and engine datagrams while the path
//!   has no validated address) never exceed [`AMPLIFICATION_FACTOR`] times the bytes of
//!   the authenticated datagrams received from it.
//! - At most [`MAX_CANDIDATES`] candidates per path, at most [`MAX_CHALLENGES`] challenges
//!   each; a candidate that has not answered [`CHALLENGE_TIMEOUT_MIN`] (or more, from the
//!   path's RTT) times 7 after its first challenge is given up. Memory and work per path
//!   are bounded whatever arrives.
//! - Nothing here reads a clock or draws randomness itself: time and tokens come in.

use std::time::Duration;

use plait_proto::Time;

use crate::message::{PATH_CONTROL_LEN, PATH_TOKEN_LEN};

/// Bytes sent towards an unvalidated address at most, per byte received from it
/// (RFC 9000 §8: three).
pub const AMPLIFICATION_FACTOR: u64 = 3;
/// Challenges sent to one candidate at most (the first and two retries).
pub const MAX_CHALLENGES: u32 = 3;
/// The first retry's delay at least; it doubles for each retry. The path's RTT may make
/// it longer ([`challenge_timeout`]).
pub const CHALLENGE_TIMEOUT_MIN: Duration = Duration::from_millis(200);
/// The first retry's delay at most.
pub const CHALLENGE_TIMEOUT_MAX: Duration = Duration::from_secs(2);
/// Candidates one path keeps at once; a newer one pushes out the oldest.
pub const MAX_CANDIDATES: usize = 4;

/// Where a path's datagrams go: which local socket, which peer address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PathEndpoint {
    /// Local socket index.
    pub socket: usize,
    /// The peer's address.
    pub remote: std::net::SocketAddr,
}

/// A challenge to seal and send: [`PATH_CONTROL_LEN`] bytes to `to`, already charged to
/// its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// The candidate address.
    pub to: PathEndpoint,
    /// Its token.
    pub token: [u8; PATH_TOKEN_LEN],
}

/// Why an engine datagram could not be sent on a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsendable {
    /// No address at all yet.
    NoAddress,
    /// Only an unvalidated address, whose budget it would exceed.
    AmplificationLimit,
}

/// What became of a candidate at a timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeoutOutcome {
    /// Candidates given up (no answer after [`MAX_CHALLENGES`]).
    pub abandoned: u64,
}

#[derive(Clone, Debug)]
struct Candidate {
    to: PathEndpoint,
    token: [u8; PATH_TOKEN_LEN],
    /// Bytes of authenticated datagrams received from `to`.
    received: u64,
    /// Bytes sent to `to`.
    sent: u64,
    /// Challenges sent (or due but over budget, see `owed`).
    challenges: u32,
    /// A challenge is due but did not fit the budget: it goes when more arrives.
    owed: bool,
    /// The next retry, or (after the last) when the candidate is given up.
    due: Time,
    /// The delay before `due`, doubled at each retry.
    interval: Duration,
}

impl Candidate {
    fn room(&self) -> u64 {
        (self.received.saturating_mul(AMPLIFICATION_FACTOR)).saturating_sub(self.sent)
    }

    /// Charges a challenge if it fits: the challenge to send, if any.
    fn challenge(&mut self) -> Option<Challenge> {
        if self.room() < PATH_CONTROL_LEN as u64 {
            self.owed = true;
            return None;
        }
        self.owed = false;
        self.sent += PATH_CONTROL_LEN as u64;
        Some(Challenge {
            to: self.to,
            token: self.token,
        })
    }
}

/// The first retry's delay on a path whose smoothed RTT is `srtt` (if known): three
/// RTTs, within [`CHALLENGE_TIMEOUT_MIN`] and [`CHALLENGE_TIMEOUT_MAX`].
pub fn challenge_timeout(srtt: Option<Duration>) -> Duration {
    srtt.map_or(CHALLENGE_TIMEOUT_MIN, |r| r.saturating_mul(3))
        .clamp(CHALLENGE_TIMEOUT_MIN, CHALLENGE_TIMEOUT_MAX)
}

/// One path's peer addresses: the validated one and the candidates.
#[derive(Clone, Debug, Default)]
pub struct PathAddress {
    validated: Option<PathEndpoint>,
    /// Oldest first.
    candidates: Vec<Candidate>,
}

impl PathAddress {
    /// An address known in advance (the client's configured server): validated.
    pub fn fixed(to: PathEndpoint) -> PathAddress {
        PathAddress {
            validated: Some(to),
            candidates: Vec::new(),
        }
    }

    /// The validated address, if any.
    pub fn validated(&self) -> Option<PathEndpoint> {
        self.validated
    }

    /// Whether `to` is being validated.
    pub fn is_candidate(&self, to: PathEndpoint) -> bool {
        self.candidates.iter().any(|c| c.to == to)
    }

    /// The address to show: the validated one, else the newest candidate.
    pub fn shown(&self) -> Option<PathEndpoint> {
        self.validated
            .or_else(|| self.candidates.last().map(|c| c.to))
    }

    /// Forgets everything (a fresh session learns its addresses anew).
    pub fn clear(&mut self) {
        *self = PathAddress::default();
    }

    /// An authenticated datagram of `len` bytes arrived from `from`. The validated address
    /// needs nothing; a candidate's budget grows (and a challenge it was owed may go now);
    /// a new address becomes a candidate (pushing out the oldest if there are
    /// [`MAX_CANDIDATES`]) with a fresh `token` and its first challenge. `srtt` sets the
    /// retry delay. Returns the challenge to send, if any.
    pub fn on_authenticated(
        &mut self,
        now: Time,
        from: PathEndpoint,
        len: usize,
        srtt: Option<Duration>,
        token: impl FnOnce() -> [u8; PATH_TOKEN_LEN],
    ) -> Option<Challenge> {
        if self.validated == Some(from) {
            return None;
        }
        let len = len as u64;
        if let Some(c) = self.candidates.iter_mut().find(|c| c.to == from) {
            c.received = c.received.saturating_add(len);
            return if c.owed { c.challenge() } else { None };
        }
        if self.candidates.len() >= MAX_CANDIDATES {
            self.candidates.remove(0);
        }
        let interval = challenge_timeout(srtt);
        let mut c = Candidate {
            to: from,
            token: token(),
            received: len,
            sent: 0,
            challenges: 1,
            owed: false,
            due: now + interval,
            interval,
        };
        let challenge = c.challenge();
        self.candidates.push(c);
        challenge
    }

    /// An authenticated PATH_RESPONSE with `token` arrived from `from`. If it answers a
    /// challenge sent to `from`, that address is validated (the other candidates are
    /// dropped: they lost the race) and true is returned; otherwise nothing changes.
    pub fn on_response(&mut self, from: PathEndpoint, token: &[u8; PATH_TOKEN_LEN]) -> bool {
        let answered = self
            .candidates
            .iter()
            .any(|c| c.to == from && c.challenges > 0 && c.token == *token);
        if answered {
            self.validated = Some(from);
            self.candidates.clear();
        }
        answered
    }

    /// Where an engine datagram of `len` bytes goes: the validated address; without one,
    /// the newest candidate, if its budget allows (and then it is charged).
    pub fn destination(&mut self, len: usize) -> Result<PathEndpoint, Unsendable> {
        if let Some(v) = self.validated {
            return Ok(v);
        }
        let c = self.candidates.last_mut().ok_or(Unsendable::NoAddress)?;
        if c.room() < len as u64 {
            return Err(Unsendable::AmplificationLimit);
        }
        c.sent += len as u64;
        Ok(c.to)
    }

    /// The next retry or give-up time.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.candidates.iter().map(|c| c.due).min()
    }

    /// Retries and give-ups due at `now`; challenges to send are pushed on `out`.
    pub fn handle_timeout(&mut self, now: Time, out: &mut Vec<Challenge>) -> TimeoutOutcome {
        let mut outcome = TimeoutOutcome::default();
        self.candidates.retain_mut(|c| {
            if c.due > now {
                return true;
            }
            if c.challenges >= MAX_CHALLENGES {
                outcome.abandoned += 1;
                return false;
            }
            c.challenges += 1;
            c.interval = c.interval.saturating_mul(2);
            c.due = now + c.interval;
            out.extend(c.challenge());
            true
        });
        outcome
    }

    /// Bytes received from and sent to `to` while it is a candidate (tests).
    #[cfg(test)]
    pub(crate) fn budget(&self, to: PathEndpoint) -> Option<(u64, u64)> {
        self.candidates
            .iter()
            .find(|c| c.to == to)
            .map(|c| (c.received, c.sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> PathEndpoint {
        PathEndpoint {
            socket: 0,
            remote: s.parse().unwrap(),
        }
    }

    const A: &str = "198.51.100.10:40000";
    const M: &str = "192.0.2.99:5555";
    const B: &str = "198.51.100.10:50000";

    fn t(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    /// A path whose first address, A, has been validated.
    fn validated_at_a() -> PathAddress {
        let mut p = PathAddress::default();
        let c = p
            .on_authenticated(t(0), ep(A), 100, None, || [1; 8])
            .unwrap();
        assert!(p.on_response(ep(A), &c.token));
        assert_eq!(p.validated(), Some(ep(A)));
        p
    }

    #[test]
    fn first_address_carries_data_within_three_times_what_it_sent_until_it_answers() {
        let mut p = PathAddress::default();
        assert_eq!(p.destination(10), Err(Unsendable::NoAddress));
        let c = p
            .on_authenticated(t(0), ep(A), 100, None, || [7; 8])
            .unwrap();
        assert_eq!(c.to, ep(A));
        assert_eq!(p.budget(ep(A)), Some((100, PATH_CONTROL_LEN as u64)));
        // 300 - 39 = 261 bytes of room.
        let left = 300 - 200 - PATH_CONTROL_LEN;
        assert_eq!(p.destination(200), Ok(ep(A)));
        assert_eq!(p.destination(100), Err(Unsendable::AmplificationLimit));
        assert_eq!(p.destination(left), Ok(ep(A)));
        assert_eq!(p.destination(1), Err(Unsendable::AmplificationLimit));
        // More from A: more room.
        assert_eq!(p.on_authenticated(t(1), ep(A), 10, None, || [9; 8]), None);
        assert_eq!(p.destination(30), Ok(ep(A)));
        // The answer lifts the limit.
        assert!(p.on_response(ep(A), &[7; 8]));
        assert_eq!(p.destination(100_000), Ok(ep(A)));
        assert_eq!(p.poll_timeout(), None);
    }

    #[test]
    fn a_raced_datagram_from_a_foreign_address_does_not_move_the_path() {
        let mut p = validated_at_a();
        let c = p
            .on_authenticated(t(10), ep(M), 60, None, || [5; 8])
            .unwrap();
        assert_eq!(c.to, ep(M));
        assert_eq!(p.validated(), Some(ep(A)), "the old address is kept");
        for _ in 0..100 {
            assert_eq!(p.destination(1400), Ok(ep(A)), "data stays on A");
        }
        // The attacker cannot answer (it cannot open the challenge); retries, then given up.
        let mut out = Vec::new();
        let mut now = t(10);
        let mut abandoned = 0;
        while let Some(due) = p.poll_timeout() {
            assert!(due > now);
            now = due;
            abandoned += p.handle_timeout(now, &mut out).abandoned;
        }
        assert_eq!(abandoned, 1);
        // Retries go only as far as the budget: 3 x 60 = 180 bytes, 4 challenges' worth,
        // but at most MAX_CHALLENGES.
        assert_eq!(out.len() as u32 + 1, MAX_CHALLENGES);
        assert!((1 + out.len()) * PATH_CONTROL_LEN <= 3 * 60);
        assert_eq!(p.validated(), Some(ep(A)));
        // The whole exchange took 7 intervals: 200 + 400 + 800 ms.
        assert_eq!(now, t(10) + CHALLENGE_TIMEOUT_MIN * 7);
    }

    #[test]
    fn the_budget_holds_challenges_back_until_more_arrives() {
        let mut p = validated_at_a();
        // 15 bytes give 45 bytes of room: one challenge (42), not two.
        let first = p.on_authenticated(t(0), ep(M), 15, None, || [5; 8]);
        assert!(first.is_some());
        let mut out = Vec::new();
        p.handle_timeout(t(200), &mut out);
        assert!(out.is_empty(), "no room for the retry");
        let (rx, tx) = p.budget(ep(M)).unwrap();
        assert!(tx <= AMPLIFICATION_FACTOR * rx);
        // Another 15 bytes: the owed retry goes.
        let owed = p.on_authenticated(t(250), ep(M), 15, None, || unreachable!());
        assert_eq!(owed.map(|c| c.token), Some([5; 8]));
        let (rx, tx) = p.budget(ep(M)).unwrap();
        assert_eq!((rx, tx), (30, 2 * PATH_CONTROL_LEN as u64));
    }

    #[test]
    fn genuine_rebinding_moves_the_path_on_the_echoed_token() {
        let mut p = validated_at_a();
        let c = p
            .on_authenticated(t(0), ep(B), 100, None, || [3; 8])
            .unwrap();
        assert_eq!(c.to, ep(B));
        assert_eq!(p.destination(1400), Ok(ep(A)), "A until B answers");
        assert!(p.on_response(ep(B), &[3; 8]));
        assert_eq!(p.validated(), Some(ep(B)));
        assert_eq!(p.destination(1400), Ok(ep(B)));
        assert_eq!(p.poll_timeout(), None);
    }

    #[test]
    fn wrong_token_wrong_address_or_stale_token_is_ignored() {
        let mut p = validated_at_a();
        p.on_authenticated(t(0), ep(M), 100, None, || [3; 8])
            .unwrap();
        assert!(!p.on_response(ep(M), &[4; 8]), "wrong token");
        // The right token from another address (the genuine client's answer, raced from
        // elsewhere, must come from the address challenged).
        assert!(!p.on_response(ep(B), &[3; 8]), "right token, other address");
        assert!(!p.on_response(ep(A), &[3; 8]), "right token, old address");
        assert_eq!(p.validated(), Some(ep(A)));
        // Given up: the token is stale now.
        let mut out = Vec::new();
        while let Some(due) = p.poll_timeout() {
            p.handle_timeout(due, &mut out);
        }
        assert!(!p.on_response(ep(M), &[3; 8]), "stale token");
        // A new candidacy of the same address has a new token; the old one stays stale.
        p.on_authenticated(t(5000), ep(M), 100, None, || [8; 8])
            .unwrap();
        assert!(!p.on_response(ep(M), &[3; 8]));
        assert!(p.on_response(ep(M), &[8; 8]));
    }

    #[test]
    fn candidates_are_bounded_and_each_keeps_its_own_token() {
        let mut p = validated_at_a();
        let addr = |i: u16| PathEndpoint {
            socket: 0,
            remote: std::net::SocketAddr::from(([192, 0, 2, 1], 1000 + i)),
        };
        for i in 0..10u16 {
            let c = p.on_authenticated(t(0), addr(i), 100, None, || [i as u8; 8]);
            assert!(c.is_some());
        }
        assert_eq!(p.candidates.len(), MAX_CANDIDATES);
        assert!(!p.on_response(addr(0), &[0; 8]), "pushed out");
        // An attacker racing from other addresses cannot spoil a genuine candidate that is
        // still held: it answers with its own token.
        assert!(p.on_response(addr(8), &[8; 8]));
        assert_eq!(p.validated(), Some(addr(8)));
        assert!(p.candidates.is_empty());
    }

    #[test]
    fn retry_delay_follows_the_rtt_within_bounds() {
        assert_eq!(challenge_timeout(None), CHALLENGE_TIMEOUT_MIN);
        assert_eq!(
            challenge_timeout(Some(Duration::from_millis(10))),
            CHALLENGE_TIMEOUT_MIN
        );
        assert_eq!(
            challenge_timeout(Some(Duration::from_millis(300))),
            Duration::from_millis(900)
        );
        assert_eq!(
            challenge_timeout(Some(Duration::from_secs(5))),
            CHALLENGE_TIMEOUT_MAX
        );
    }
}
