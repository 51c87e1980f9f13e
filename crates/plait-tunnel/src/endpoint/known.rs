//! Known addresses (docs/protocol.md#known-first): where the server's established clients
//! are, so that an initiation from one of them is served first under a handshake flood.
//!
//! A *known address* is a path's validated address (listening socket, source IP and port;
//! docs/protocol.md#path-validation) of a configured client whose engine session runs and
//! whose current keys have not expired. An initiation with a valid mac1 from one is
//! processed at once, without a cookie round trip even under load, if that address's own
//! bucket and the known addresses' shared bucket have a token; neither is touched by any
//! other initiation, so a flood from elsewhere cannot drain them. Otherwise it goes on
//! through the ordinary rules (docs/protocol.md#dos) like any other.
//!
//! The truth is the clients' [`super::link::Link`]s; this is an index of it for the
//! lookup that runs on every mac1-valid initiation (O(log n) in the number of addresses
//! instead of a scan of every client's paths). Invariants:
//! - An entry is only a hint: [`KnownAddresses::admit`] asks its caller whether the
//!   client still has the address (the link's own state) before spending anything, so a
//!   stale entry can never admit a stranger; a missing one only sends a client through the
//!   ordinary rules.
//! - A client's entries are replaced wholesale by [`KnownAddresses::set_peer`], called
//!   where its validated addresses or its session change, so the index holds at most
//!   `MAX_PATHS` entries per configured client, whatever arrives. An address the client
//!   keeps keeps its bucket (a spoofer cannot refill it by provoking a re-index: only the
//!   client's authenticated messages cause one).

use std::collections::BTreeMap;

use plait_proto::Time;

use super::validation::PathEndpoint;
use crate::ratelimit::TokenBucket;

/// Initiations from one known address processed per second, and their burst, before it
/// is treated as any other source. A genuine client needs about one per path per
/// handshake: a rekey every 2 minutes, a retry after 5 s, one a second at most on an
/// unknown-index hint; the burst covers a hint, a retry and a cookie retry close
/// together. It is also all that a spoofer of that address can make the server spend on
/// it: one Diffie-Hellman a second after the first three.
pub const KNOWN_ADDRESS_RATE: (f64, f64) = (1.0, 3.0);
/// Initiations from all known addresses together processed per second, and their burst:
/// the known addresses' own last line, beside (not within) the strangers' global
/// `HANDSHAKE_RATE`, so the server does at most this much Diffie-Hellman more under a
/// flood that reaches both (a spoofer who knows many clients' addresses and ports).
pub const KNOWN_HANDSHAKE_RATE: (f64, f64) = (100.0, 50.0);

/// What [`KnownAddresses::admit`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// Not a known address: the ordinary rules apply.
    Stranger,
    /// A known address within its budgets: process it.
    Admitted,
    /// A known address over its own or the shared budget (a spoofer spent it, or the
    /// client sends too often): the ordinary rules apply.
    OverBudget,
}

#[derive(Clone, Debug)]
struct Entry {
    /// Index of the configured client the address belongs to.
    peer: usize,
    budget: TokenBucket,
}

/// The index of known addresses and their budgets (see the module docs).
#[derive(Clone, Debug)]
pub struct KnownAddresses {
    entries: BTreeMap<PathEndpoint, Entry>,
    /// Shared by all known addresses ([`KNOWN_HANDSHAKE_RATE`]).
    all: TokenBucket,
}

impl Default for KnownAddresses {
    fn default() -> KnownAddresses {
        KnownAddresses {
            entries: BTreeMap::new(),
            all: TokenBucket::new(KNOWN_HANDSHAKE_RATE.0, KNOWN_HANDSHAKE_RATE.1),
        }
    }
}

impl KnownAddresses {
    /// Client `peer`'s known addresses are now `addresses` (none: it has no session). Its
    /// other entries go; one it keeps keeps its bucket; a new one starts full.
    pub fn set_peer(&mut self, peer: usize, addresses: &[PathEndpoint]) {
        self.entries
            .retain(|a, e| e.peer != peer || addresses.contains(a));
        for a in addresses {
            self.entries
                .entry(*a)
                .and_modify(|e| e.peer = peer)
                .or_insert_with(|| Entry {
                    peer,
                    budget: TokenBucket::new(KNOWN_ADDRESS_RATE.0, KNOWN_ADDRESS_RATE.1),
                });
        }
    }

    /// An initiation with a valid mac1 came from `from`: whether it is known (and
    /// `still_known` confirms, from the client's state, that the entry's client has the
    /// address) and within its budgets. The address's bucket is charged first, so a
    /// spoofed flood from one known address spends that address's budget and only a token
    /// a second of the shared one.
    pub fn admit(
        &mut self,
        now: Time,
        from: PathEndpoint,
        still_known: impl FnOnce(usize) -> bool,
    ) -> Known {
        let Some(entry) = self.entries.get_mut(&from) else {
            return Known::Stranger;
        };
        if !still_known(entry.peer) {
            return Known::Stranger;
        }
        if entry.budget.allow(now) && self.all.allow(now) {
            Known::Admitted
        } else {
            Known::OverBudget
        }
    }

    /// Every known address and its client (tests).
    #[cfg(test)]
    pub(crate) fn addresses(&self) -> Vec<(PathEndpoint, usize)> {
        self.entries.iter().map(|(a, e)| (*a, e.peer)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(socket: usize, s: &str) -> PathEndpoint {
        PathEndpoint {
            socket,
            remote: s.parse().unwrap(),
        }
    }

    const A: &str = "198.51.100.10:40000";
    const B: &str = "203.0.113.20:40001";

    #[test]
    fn only_the_exact_socket_and_address_of_a_client_that_still_has_it_is_known() {
        let mut k = KnownAddresses::default();
        let t = Time::from_millis(1_000);
        k.set_peer(0, &[ep(0, A)]);
        assert_eq!(k.admit(t, ep(0, A), |p| p == 0), Known::Admitted);
        // Another port, another socket, another host: strangers.
        assert_eq!(
            k.admit(t, ep(0, "198.51.100.10:40002"), |_| true),
            Known::Stranger
        );
        assert_eq!(k.admit(t, ep(1, A), |_| true), Known::Stranger);
        assert_eq!(k.admit(t, ep(0, B), |_| true), Known::Stranger);
        // An entry the client's state no longer confirms admits nothing.
        assert_eq!(k.admit(t, ep(0, A), |_| false), Known::Stranger);
    }

    #[test]
    fn a_known_address_spends_its_own_budget_then_is_over_it() {
        let mut k = KnownAddresses::default();
        let t = Time::from_millis(1_000);
        k.set_peer(0, &[ep(0, A), ep(0, B)]);
        let burst = KNOWN_ADDRESS_RATE.1 as usize;
        for _ in 0..burst {
            assert_eq!(k.admit(t, ep(0, A), |_| true), Known::Admitted);
        }
        for _ in 0..100 {
            assert_eq!(k.admit(t, ep(0, A), |_| true), Known::OverBudget);
        }
        // The other path's address is untouched.
        assert_eq!(k.admit(t, ep(0, B), |_| true), Known::Admitted);
        // One token a second again.
        let later = t + std::time::Duration::from_secs_f64(1.0 / KNOWN_ADDRESS_RATE.0);
        assert_eq!(k.admit(later, ep(0, A), |_| true), Known::Admitted);
        assert_eq!(k.admit(later, ep(0, A), |_| true), Known::OverBudget);
    }

    #[test]
    fn the_shared_budget_caps_all_known_addresses_together() {
        let mut k = KnownAddresses::default();
        let t = Time::from_millis(1_000);
        let addresses: Vec<_> = (0..200u16)
            .map(|i| ep(0, &format!("198.51.100.10:{}", 10_000 + i)))
            .collect();
        for (peer, a) in addresses.chunks(10).enumerate() {
            k.set_peer(peer, a);
        }
        let admitted = addresses
            .iter()
            .filter(|a| k.admit(t, **a, |_| true) == Known::Admitted)
            .count();
        assert_eq!(admitted, KNOWN_HANDSHAKE_RATE.1 as usize);
    }

    #[test]
    fn set_peer_replaces_one_clients_entries_and_keeps_buckets_it_keeps() {
        let mut k = KnownAddresses::default();
        let t = Time::from_millis(1_000);
        k.set_peer(0, &[ep(0, A)]);
        k.set_peer(1, &[ep(0, B)]);
        for _ in 0..KNOWN_ADDRESS_RATE.1 as usize {
            k.admit(t, ep(0, A), |_| true);
        }
        // Client 0 moved a path: A is kept (with its spent bucket), C added; B untouched.
        let c = ep(0, "192.0.2.99:5000");
        k.set_peer(0, &[ep(0, A), c]);
        assert_eq!(k.admit(t, ep(0, A), |_| true), Known::OverBudget);
        assert_eq!(k.admit(t, c, |_| true), Known::Admitted);
        assert_eq!(k.addresses().len(), 3);
        // Client 0's session ends: its entries go, client 1's stay.
        k.set_peer(0, &[]);
        assert_eq!(k.addresses(), vec![(ep(0, B), 1)]);
    }
}
