//! The server's destination policy: which addresses it connects to for its clients.
//!
//! Invariant: the check runs on the address actually connected to (after DNS), so a name
//! that resolves to a denied address is denied too.

use std::net::IpAddr;

use ipnet::IpNet;

/// Allow and deny prefix lists; deny wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DestinationPolicy {
    /// Allowed destination prefixes.
    pub allow: Vec<IpNet>,
    /// Refused destination prefixes, even if allowed.
    pub deny: Vec<IpNet>,
}

impl DestinationPolicy {
    /// Whether the server may connect to `ip`. An IPv4-mapped IPv6 address is judged as
    /// the IPv4 address it is, so `::ffff:127.0.0.1` cannot slip past a deny of 127/8.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let has = |list: &[IpNet]| list.iter().any(|n| n.contains(&ip));
        has(&self.allow) && !has(&self.deny)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> DestinationPolicy {
        DestinationPolicy {
            allow: allow.iter().map(|s| s.parse().unwrap()).collect(),
            deny: deny.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn deny_wins_and_mapped_addresses_are_judged_as_ipv4() {
        let p = policy(&["0.0.0.0/0", "::/0"], &["127.0.0.0/8", "::1/128"]);
        assert!(p.allows("192.0.2.1".parse().unwrap()));
        assert!(p.allows("2001:db8::1".parse().unwrap()));
        assert!(!p.allows("127.0.0.1".parse().unwrap()));
        assert!(!p.allows("::1".parse().unwrap()));
        assert!(!p.allows("::ffff:127.0.0.1".parse().unwrap()));
        let narrow = policy(&["10.0.0.0/8"], &[]);
        assert!(narrow.allows("10.1.2.3".parse().unwrap()));
        assert!(!narrow.allows("192.0.2.1".parse().unwrap()));
        assert!(!narrow.allows("2001:db8::1".parse().unwrap()));
    }
}
