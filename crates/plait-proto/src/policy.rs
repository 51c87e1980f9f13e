//! Per-flow policy (docs/protocol.md#flow-policy): how the inner packets of matching flows
//! are sent. Rules match an inner packet by IP protocol, port, address prefix and DSCP;
//! the first rule that matches decides; a packet no rule matches (or that is not IP) is
//! striped by the session's scheduler as usual.
//!
//! Actions:
//! - [`FlowAction::Stripe`]: the scheduler picks one path (the default).
//! - [`FlowAction::Duplicate`]: a copy on every usable path, so a call or a game loses
//!   nothing when one path fails (the receiver's duplicate filter delivers the first).
//! - [`FlowAction::LowestDelay`]: the path that delivers it soonest by measurement, not
//!   the bulk scheduler's spreading.
//!
//! Invariants: matching reads only inside the packet and never panics on any bytes; a
//! rule list is bounded ([`MAX_RULES`] rules of at most [`MAX_MATCH_ITEMS`] items per
//! field, checked by `Config::validate`), so the cost per packet is bounded; an empty list
//! costs nothing.

use std::net::IpAddr;

use crate::inner_ip::flow_key;

/// Rules in one policy at most.
pub const MAX_RULES: usize = 64;
/// Ports, prefixes or DSCP values in one rule's field at most.
pub const MAX_MATCH_ITEMS: usize = 64;

/// What to do with a matching flow's packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowAction {
    /// One path, the scheduler's choice.
    #[default]
    Stripe,
    /// A copy on every usable path.
    Duplicate,
    /// The path that delivers it soonest.
    LowestDelay,
}

impl FlowAction {
    /// Every action, in config-name order.
    pub const ALL: [FlowAction; 3] = [
        FlowAction::Stripe,
        FlowAction::Duplicate,
        FlowAction::LowestDelay,
    ];

    /// The name in config files.
    pub const fn name(self) -> &'static str {
        match self {
            FlowAction::Stripe => "stripe",
            FlowAction::Duplicate => "duplicate",
            FlowAction::LowestDelay => "lowest-delay",
        }
    }

    /// The action with this config name.
    pub fn from_name(name: &str) -> Option<FlowAction> {
        FlowAction::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// An address prefix: `addr/len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// The network address.
    pub addr: IpAddr,
    /// Prefix length in bits (at most 32 for IPv4, 128 for IPv6).
    pub len: u8,
}

impl Prefix {
    /// Whether `ip` (4 or 16 bytes, as in the packet) is inside this prefix.
    fn contains(&self, ip: &[u8]) -> bool {
        let net: &[u8] = match &self.addr {
            IpAddr::V4(a) => &a.octets(),
            IpAddr::V6(a) => &a.octets(),
        };
        // Match the family first: comparing arrays of different lengths is false.
        if net.len() != ip.len() || usize::from(self.len) > net.len() * 8 {
            return false;
        }
        let (full, rest) = (usize::from(self.len) / 8, self.len % 8);
        if net[..full] != ip[..full] {
            return false;
        }
        if rest == 0 {
            return true;
        }
        let mask = 0xffu8 << (8 - rest);
        net[full] & mask == ip[full] & mask
    }
}

/// One rule: every field given must match (an empty field matches anything); within a
/// field, any item may match (a port or prefix matches either end of the flow).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowRule {
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6), or any.
    pub protocol: Option<u8>,
    /// Source or destination port.
    pub ports: Vec<u16>,
    /// Source or destination address prefix.
    pub prefixes: Vec<Prefix>,
    /// DSCP value (the upper six bits of the IPv4 TOS or IPv6 traffic class).
    pub dscp: Vec<u8>,
    /// What to do with a matching packet.
    pub action: FlowAction,
}

/// The action for `packet`: the first matching rule's, else [`FlowAction::Stripe`].
pub fn action_for(rules: &[FlowRule], packet: &[u8]) -> FlowAction {
    if rules.is_empty() {
        return FlowAction::Stripe;
    }
    let Some(fields) = Fields::of(packet) else {
        return FlowAction::Stripe;
    };
    rules
        .iter()
        .find(|r| fields.matches(r))
        .map_or(FlowAction::Stripe, |r| r.action)
}

/// What a rule looks at in one packet.
struct Fields<'p> {
    protocol: u8,
    ports: Option<(u16, u16)>,
    src: &'p [u8],
    dst: &'p [u8],
    dscp: u8,
}

impl<'p> Fields<'p> {
    fn of(packet: &'p [u8]) -> Option<Fields<'p>> {
        let key = flow_key(packet)?;
        let (src, dst, dscp) = match packet.first()? >> 4 {
            4 => (
                packet.get(12..16)?,
                packet.get(16..20)?,
                packet.get(1)? >> 2,
            ),
            6 => {
                let tc = (packet.get(0..2)?[0] << 4) | (packet.get(0..2)?[1] >> 4);
                (packet.get(8..24)?, packet.get(24..40)?, tc >> 2)
            }
            _ => return None,
        };
        Some(Fields {
            protocol: key.protocol(),
            ports: key.ports(),
            src,
            dst,
            dscp,
        })
    }

    fn matches(&self, r: &FlowRule) -> bool {
        r.protocol.is_none_or(|p| p == self.protocol)
            && (r.ports.is_empty()
                || self
                    .ports
                    .is_some_and(|(s, d)| r.ports.iter().any(|p| *p == s || *p == d)))
            && (r.prefixes.is_empty()
                || r.prefixes
                    .iter()
                    .any(|p| p.contains(self.src) || p.contains(self.dst)))
            && (r.dscp.is_empty() || r.dscp.contains(&self.dscp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, tos: u8) -> Vec<u8> {
        let mut p = vec![0x45, tos, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 8, 0, 0]);
        p
    }

    fn v6_tcp(src_last: u8, dport: u16, traffic_class: u8) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x60 | (traffic_class >> 4);
        p[1] = traffic_class << 4;
        p[6] = 6;
        p[8] = 0xfd;
        p[23] = src_last;
        p[24] = 0xfd;
        p[39] = 1;
        p[40..42].copy_from_slice(&40000u16.to_be_bytes());
        p[42..44].copy_from_slice(&dport.to_be_bytes());
        p
    }

    fn prefix(s: &str, len: u8) -> Prefix {
        Prefix {
            addr: s.parse().unwrap(),
            len,
        }
    }

    #[test]
    fn first_matching_rule_decides() {
        let rules = vec![
            FlowRule {
                protocol: Some(17),
                ports: vec![5060, 3478],
                action: FlowAction::Duplicate,
                ..FlowRule::default()
            },
            FlowRule {
                prefixes: vec![prefix("10.9.0.0", 16)],
                action: FlowAction::LowestDelay,
                ..FlowRule::default()
            },
            FlowRule {
                dscp: vec![46],
                action: FlowAction::LowestDelay,
                ..FlowRule::default()
            },
        ];
        let call = v4_udp([10, 0, 0, 1], [192, 0, 2, 7], 40000, 5060, 0);
        assert_eq!(action_for(&rules, &call), FlowAction::Duplicate);
        // Either end's port matches.
        let reply = v4_udp([192, 0, 2, 7], [10, 0, 0, 1], 3478, 40000, 0);
        assert_eq!(action_for(&rules, &reply), FlowAction::Duplicate);
        let game = v4_udp([10, 0, 0, 1], [10, 9, 200, 3], 40000, 27015, 0);
        assert_eq!(action_for(&rules, &game), FlowAction::LowestDelay);
        // EF (46) in the TOS byte: 46 << 2.
        let ef = v4_udp([10, 0, 0, 1], [192, 0, 2, 7], 1, 2, 46 << 2);
        assert_eq!(action_for(&rules, &ef), FlowAction::LowestDelay);
        let bulk = v4_udp([10, 0, 0, 1], [192, 0, 2, 7], 40000, 443, 0);
        assert_eq!(action_for(&rules, &bulk), FlowAction::Stripe);
        assert_eq!(action_for(&[], &call), FlowAction::Stripe);
    }

    #[test]
    fn ipv6_fields_and_prefix_edges() {
        let rules = vec![FlowRule {
            protocol: Some(6),
            prefixes: vec![prefix("fd00::", 8)],
            dscp: vec![34],
            action: FlowAction::Duplicate,
            ..FlowRule::default()
        }];
        assert_eq!(
            action_for(&rules, &v6_tcp(5, 443, 34 << 2)),
            FlowAction::Duplicate
        );
        assert_eq!(action_for(&rules, &v6_tcp(5, 443, 0)), FlowAction::Stripe);
        // A v4 prefix never matches a v6 packet, nor the reverse.
        let v4_rule = vec![FlowRule {
            prefixes: vec![prefix("0.0.0.0", 0)],
            action: FlowAction::Duplicate,
            ..FlowRule::default()
        }];
        assert_eq!(action_for(&v4_rule, &v6_tcp(5, 443, 0)), FlowAction::Stripe);
        let p = prefix("10.1.2.128", 25);
        assert!(p.contains(&[10, 1, 2, 200]));
        assert!(!p.contains(&[10, 1, 2, 127]));
        assert!(prefix("10.1.2.3", 32).contains(&[10, 1, 2, 3]));
        assert!(
            !prefix("10.1.2.3", 33).contains(&[10, 1, 2, 3]),
            "invalid length"
        );
    }

    #[test]
    fn names_round_trip() {
        for a in FlowAction::ALL {
            assert_eq!(FlowAction::from_name(a.name()), Some(a));
        }
        assert_eq!(FlowAction::from_name("mirror"), None);
    }

    proptest! {
        #[test]
        fn any_bytes_are_classified_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let rules = vec![FlowRule {
                protocol: Some(17),
                ports: vec![1, 2],
                prefixes: vec![prefix("10.0.0.0", 8), prefix("fd00::", 8)],
                dscp: vec![0, 46],
                action: FlowAction::Duplicate,
            }];
            let _ = action_for(&rules, &bytes);
        }
    }
}
