//! One peer's keys and how they rotate, as WireGuard's do: `current` seals; `previous`
//! still opens what was in flight during a rekey; `next` (responder only) waits for the
//! initiator's first authenticated data message, which confirms it and makes it `current`.
//!
//! A handshake that asked the responder for a fresh engine session leaves that request
//! beside `next` (`next_session`), set and cleared with it: the fresh session is reported
//! only when `next` is confirmed, so a replayed or unanswered initiation changes nothing
//! else.
//!
//! Invariants: a data message is opened only with the keys whose index it names; its
//! nonce is recorded in that keypair's replay window only after it authenticated
//! ([`Keypair::open`]); `next_session` is `None` whenever `next` is.

use plait_proto::Time;

use crate::crypto::keypair::{Keypair, OpenError, SealedId};

/// Why a data message was dropped (for the drop counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataDrop {
    /// No keys with that index.
    UnknownIndex,
    /// Replayed, too old, or keys expired.
    Replayed,
    /// Failed authentication.
    Auth,
}

/// A data message that opened under one of the ring's keypairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeysOpened {
    /// The opened payload's length (at `msg[id.payload_offset()..]`).
    pub len: usize,
    /// Indices of the keys dropped when `next` became current: the one that fell off the
    /// end and, when `next` brought a fresh engine session, the old session's (see
    /// [`KeyRing::forget_previous`]).
    pub dropped: [Option<u32>; 2],
    /// The message confirmed `next` and its handshake had asked for this fresh engine
    /// session.
    pub fresh_session: Option<u32>,
}

/// Which slot a keypair sits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Current,
    Previous,
    Next,
}

/// The keys of one peer. Fields are private: keys enter only through
/// [`KeyRing::install_confirmed`] and [`KeyRing::stage_next`], and move from `next` to
/// `current` only in [`KeyRing::open`].
#[derive(Debug, Default)]
pub struct KeyRing {
    current: Option<Keypair>,
    previous: Option<Keypair>,
    next: Option<Keypair>,
    /// The engine session id to start afresh when `next` is confirmed.
    next_session: Option<u32>,
    /// Keypairs that became `current` (completed handshakes).
    installed: u64,
}

impl KeyRing {
    /// The keys that seal, if any.
    pub fn current(&self) -> Option<&Keypair> {
        self.current.as_ref()
    }

    /// The keys that seal, to seal with.
    pub fn current_mut(&mut self) -> Option<&mut Keypair> {
        self.current.as_mut()
    }

    /// Keypairs that became current: handshakes completed (initiator) or confirmed
    /// (responder).
    pub fn installed(&self) -> u64 {
        self.installed
    }

    /// Keypairs held now (current, previous, next): at most three.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        [&self.current, &self.previous, &self.next]
            .into_iter()
            .flatten()
            .count()
    }

    /// When each keypair held reaches the reject limit.
    pub fn expiries(&self) -> impl Iterator<Item = Time> + '_ {
        [&self.current, &self.previous, &self.next]
            .into_iter()
            .flatten()
            .map(Keypair::expires_at)
    }

    /// Drops `previous` (returning its index): done when a fresh engine session starts
    /// under `current`, so that nothing the old session sealed can reach the new one. The
    /// engine header names no session (docs/protocol.md#header): the keys are what tell
    /// sessions apart, so the old session's keys must go with it.
    pub fn forget_previous(&mut self) -> Option<u32> {
        self.previous.take().map(|k| k.local_index)
    }

    /// Installs keys that need no confirmation as current: the initiator's, whose
    /// handshake response proved the responder holds them. The old current becomes
    /// previous; returns the index of the keypair that fell off the end, if any.
    pub fn install_confirmed(&mut self, keys: Keypair) -> Option<u32> {
        let dropped = self.previous.take().map(|k| k.local_index);
        self.previous = self.current.take();
        self.current = Some(keys);
        self.installed += 1;
        dropped
    }

    /// The responder's keys from an answered handshake wait in `next`, with the fresh
    /// engine session that handshake asked for, if any, until confirmed. Returns the index
    /// of the `next` keys they replace.
    pub fn stage_next(&mut self, keys: Keypair, fresh_session: Option<u32>) -> Option<u32> {
        let replaced = self.next.take().map(|k| k.local_index);
        self.next = Some(keys);
        self.next_session = fresh_session;
        replaced
    }

    /// Opens a data message in place with the keys whose index it names. The first
    /// message under `next` confirms it: `next` becomes current and its pending fresh
    /// session, if any, is reported.
    pub fn open(
        &mut self,
        now: Time,
        receiver: u32,
        id: SealedId,
        msg: &mut [u8],
    ) -> Result<KeysOpened, DataDrop> {
        let slot = [
            (Slot::Current, &self.current),
            (Slot::Previous, &self.previous),
            (Slot::Next, &self.next),
        ]
        .into_iter()
        .find(|(_, k)| k.as_ref().is_some_and(|k| k.local_index == receiver))
        .map(|(slot, _)| slot)
        .ok_or(DataDrop::UnknownIndex)?;
        let keys = match slot {
            Slot::Current => self.current.as_mut(),
            Slot::Previous => self.previous.as_mut(),
            Slot::Next => self.next.as_mut(),
        }
        .ok_or(DataDrop::UnknownIndex)?;
        let len = keys.open(now, id, msg).map_err(|e| match e {
            OpenError::Auth => DataDrop::Auth,
            OpenError::Expired | OpenError::Replayed => DataDrop::Replayed,
        })?;
        let mut opened = KeysOpened {
            len,
            dropped: [None; 2],
            fresh_session: None,
        };
        if slot == Slot::Next
            && let Some(confirmed) = self.next.take()
        {
            opened.dropped[0] = self.install_confirmed(confirmed);
            opened.fresh_session = self.next_session.take();
            if opened.fresh_session.is_some() {
                opened.dropped[1] = self.forget_previous();
            }
        }
        Ok(opened)
    }

    /// Forgets keys older than the reject limit; returns their indices.
    pub fn expire(&mut self, now: Time) -> Vec<u32> {
        let mut gone = Vec::new();
        for slot in [&mut self.current, &mut self.previous, &mut self.next] {
            if slot.as_ref().is_some_and(|k| !k.is_usable(now))
                && let Some(k) = slot.take()
            {
                gone.push(k.local_index);
            }
        }
        if self.next.is_none() {
            self.next_session = None;
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::handshake::SessionKeys;
    use crate::crypto::keypair::REJECT_AFTER_TIME;
    use crate::message::{DATA_HEADER_LEN, DATA_OVERHEAD};

    /// Bytes of the engine datagrams the tests seal.
    const LEN: usize = 9;

    /// The initiator's and the responder's halves of one handshake's keys.
    fn pair(initiator_index: u32, responder_index: u32, seed: u8) -> (Keypair, Keypair) {
        let a = SessionKeys {
            send: [seed; 32],
            recv: [seed ^ 0xff; 32],
        };
        let b = SessionKeys {
            send: a.recv,
            recv: a.send,
        };
        (
            Keypair::new(&a, initiator_index, responder_index, Time::ZERO, true),
            Keypair::new(&b, responder_index, initiator_index, Time::ZERO, false),
        )
    }

    /// A data message sealed by `keys` (path 0, the next path sequence number), with its
    /// identity.
    fn sealed(keys: &mut Keypair) -> (Vec<u8>, SealedId) {
        let mut buf = vec![0u8; DATA_OVERHEAD + LEN];
        let seq = keys.messages_sent() as u32;
        buf[DATA_HEADER_LEN] = 0x20;
        buf[DATA_HEADER_LEN + 1..DATA_HEADER_LEN + 5].copy_from_slice(&seq.to_be_bytes());
        let n = keys.seal(Time::ZERO, &mut buf, LEN).unwrap();
        buf.truncate(n);
        let id = match crate::message::parse(&buf) {
            Ok(crate::message::Message::Data { id, .. }) => SealedId::Data(id),
            other => panic!("{other:?}"),
        };
        (buf, id)
    }

    #[test]
    fn next_waits_for_its_first_message_and_brings_its_fresh_session() {
        let mut server = KeyRing::default();
        let (mut c1, s1) = pair(1, 11, 1);
        assert_eq!(server.stage_next(s1, Some(7)), None);
        assert!(server.current().is_none(), "staged keys do not seal");
        // A second answered handshake replaces the first's `next`, and its request.
        let (mut c2, s2) = pair(2, 12, 2);
        assert_eq!(server.stage_next(s2, None), Some(11));
        let (mut msg, id) = sealed(&mut c1);
        assert_eq!(
            server.open(Time::ZERO, 11, id, &mut msg),
            Err(DataDrop::UnknownIndex)
        );
        let (mut msg, id) = sealed(&mut c2);
        let opened = server.open(Time::ZERO, 12, id, &mut msg).unwrap();
        assert_eq!((opened.len, opened.fresh_session), (LEN, None));
        assert_eq!(server.current().map(|k| k.local_index), Some(12));
        assert_eq!(server.installed(), 1);

        // A rekey of the same session: the old keys stay as previous, for what is in
        // flight.
        let (mut c3, s3) = pair(3, 13, 3);
        server.stage_next(s3, None);
        let (mut msg, id) = sealed(&mut c3);
        let opened = server.open(Time::ZERO, 13, id, &mut msg).unwrap();
        assert_eq!(opened.fresh_session, None);
        assert_eq!(opened.dropped, [None, None], "12 became previous");
        let (mut msg, id) = sealed(&mut c2);
        assert!(server.open(Time::ZERO, 12, id, &mut msg).is_ok());

        // Keys that bring a fresh engine session drop the old session's keys at once: a
        // datagram of the old session, held back, must not reach the new one.
        let (mut held, held_id) = sealed(&mut c3);
        let (mut c4, s4) = pair(4, 14, 4);
        server.stage_next(s4, Some(9));
        let (mut msg, id) = sealed(&mut c4);
        let opened = server.open(Time::ZERO, 14, id, &mut msg).unwrap();
        assert_eq!(opened.fresh_session, Some(9));
        assert_eq!(opened.dropped, [Some(12), Some(13)]);
        assert_eq!(
            server.open(Time::ZERO, 13, held_id, &mut held),
            Err(DataDrop::UnknownIndex)
        );
        assert_eq!(server.current().map(|k| k.local_index), Some(14));
    }

    #[test]
    fn a_forged_message_neither_confirms_nor_burns_a_nonce() {
        let mut server = KeyRing::default();
        let (mut c, s) = pair(1, 11, 1);
        server.stage_next(s, Some(7));
        let (genuine, id) = sealed(&mut c);
        let mut forged = genuine.clone();
        if let Some(last) = forged.last_mut() {
            *last ^= 1;
        }
        assert_eq!(
            server.open(Time::ZERO, 11, id, &mut forged),
            Err(DataDrop::Auth)
        );
        assert!(server.current().is_none());
        let mut msg = genuine.clone();
        let opened = server.open(Time::ZERO, 11, id, &mut msg).unwrap();
        assert_eq!(opened.fresh_session, Some(7));
        let mut again = genuine;
        assert_eq!(
            server.open(Time::ZERO, 11, id, &mut again),
            Err(DataDrop::Replayed)
        );
    }

    #[test]
    fn rotation_drops_the_oldest_and_expiry_clears_the_pending_session() {
        let mut client = KeyRing::default();
        assert_eq!(client.install_confirmed(pair(1, 11, 1).0), None);
        assert_eq!(client.install_confirmed(pair(2, 12, 2).0), None);
        assert_eq!(client.install_confirmed(pair(3, 13, 3).0), Some(1));
        assert_eq!(client.installed(), 3);

        let mut server = KeyRing::default();
        server.stage_next(pair(4, 14, 4).1, Some(5));
        let late = Time::ZERO + REJECT_AFTER_TIME;
        assert_eq!(server.expire(late), vec![14]);
        assert_eq!(server.next_session, None);
        assert_eq!(server.expiries().count(), 0);
    }
}
