//! Whether each client path's link works, from the kernel (rtnetlink), and word when that
//! may have changed (docs/protocol.md#binding; issue of links that come and go).
//!
//! Two netlink sockets. One joins the link, address and route multicast groups of IPv4
//! and IPv6: any message there only says "look again" (the loop drains it and asks). The
//! other asks, for each path, the two questions that decide it: which interface would the
//! kernel route the path's datagrams through (`RTM_GETROUTE` for the server's address,
//! with the path's firewall mark and, if configured, its device), and is that interface
//! up with a carrier (`RTM_GETLINK`: `IFF_UP` and `IFF_LOWER_UP`)? No route, a device that
//! does not exist, an interface down or without carrier: the path's link does not work.
//!
//! For pattern paths (`crate::mobility`) it also lists every interface (`RTM_GETLINK`
//! dump) and every unicast route outside the `local` table (`RTM_GETROUTE` dumps of IPv4
//! and IPv6): [`NetWatch::kernel`].
//!
//! Invariants: both sockets are created before the daemon drops its privileges; the
//! event socket is non-blocking (the loop polls it); the query socket waits at most
//! [`QUERY_TIMEOUT`] for an answer, and an answer that does not come or does not parse
//! counts as "works" (the engine's own liveness check still applies), so a netlink
//! hiccup never takes a path away. Buffers are allocated once.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use ipnet::IpNet;
use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use crate::mobility::{Interface, Kernel, Route};

/// Messages read from one dump at most (interfaces or routes of a family): a bound on the
/// work a huge routing table can cause per look (a full Internet table is about 1.2
/// million routes; each is parsed and dropped unless it matters, so memory stays small).
const MAX_DUMP_MESSAGES: usize = 4 << 20;
/// The `local` routing table (the host's own and broadcast addresses).
const RT_TABLE_LOCAL: u32 = 255;

/// How long the daemon waits for the kernel's answer to one question.
pub const QUERY_TIMEOUT: Duration = Duration::from_millis(100);

/// What decides where one path's datagrams go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRoute {
    /// The server's address on this path.
    pub server: IpAddr,
    /// The interface the path's socket is bound to, if any.
    pub device: Option<String>,
    /// The path socket's firewall mark, if any (policy routing).
    pub fwmark: Option<u32>,
}

/// The kernel's view of the client's paths.
#[derive(Debug)]
pub struct NetWatch {
    events: Socket,
    query: Socket,
    paths: Vec<PathRoute>,
    seq: u32,
    buf: Vec<u8>,
}

impl NetWatch {
    /// Opens both sockets for `paths` (in path order).
    pub fn new(paths: Vec<PathRoute>) -> io::Result<NetWatch> {
        let mut events = Socket::new(NETLINK_ROUTE)?;
        let groups = libc::RTMGRP_LINK
            | libc::RTMGRP_IPV4_IFADDR
            | libc::RTMGRP_IPV6_IFADDR
            | libc::RTMGRP_IPV4_ROUTE
            | libc::RTMGRP_IPV6_ROUTE;
        events.bind(&SocketAddr::new(0, groups as u32))?;
        events.set_non_blocking(true)?;
        let mut query = Socket::new(NETLINK_ROUTE)?;
        query.bind_auto()?;
        query.connect(&SocketAddr::new(0, 0))?;
        let timeout = nix::sys::time::TimeVal::new(0, QUERY_TIMEOUT.as_micros() as _);
        nix::sys::socket::setsockopt(&query, nix::sys::socket::sockopt::ReceiveTimeout, &timeout)
            .map_err(io::Error::from)?;
        Ok(NetWatch {
            events,
            query,
            paths,
            seq: 0,
            buf: vec![0u8; 64 * 1024],
        })
    }

    /// The event socket, for the loop's poll.
    pub fn event_fd(&self) -> RawFd {
        self.events.as_raw_fd()
    }

    /// Reads every pending event. Returns whether any came (or were lost to an
    /// overrun): then the paths should be looked at again.
    pub fn drain(&mut self) -> bool {
        let mut any = false;
        loop {
            match self.events.recv(&mut &mut self.buf[..], 0) {
                Ok(_) => any = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return any,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ENOBUFS: events were lost; look again to be sure.
                Err(_) => return true,
            }
        }
    }

    /// Path `i`'s server is now `server` (its name resolved anew).
    pub fn set_server(&mut self, i: usize, server: IpAddr) {
        if let Some(p) = self.paths.get_mut(i) {
            p.server = server;
        }
    }

    /// Every interface, and the unicast routes (outside the `local` table) that are
    /// default routes or cover one of `servers`: what pattern paths are decided from.
    /// `None` if the kernel's answer did not come or did not parse in time: the caller
    /// then changes nothing.
    pub fn kernel(&mut self, servers: &[IpAddr]) -> Option<Kernel> {
        let mut k = Kernel::default();
        self.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()), |m| {
            let RouteNetlinkMessage::NewLink(l) = m else {
                return;
            };
            let name = l.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(n) => Some(n.clone()),
                _ => None,
            });
            let f = l.header.flags;
            k.interfaces.push(Interface {
                index: l.header.index,
                name: name.unwrap_or_default(),
                up: f.contains(LinkFlags::Up) && f.contains(LinkFlags::LowerUp),
            });
        })?;
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut q = RouteMessage::default();
            q.header.address_family = family;
            self.dump(RouteNetlinkMessage::GetRoute(q), |m| {
                let RouteNetlinkMessage::NewRoute(r) = m else {
                    return;
                };
                let at = k.routes.len();
                routes_of(&r, &mut k.routes);
                if let Some(dst) = k.routes.get(at).map(|r| r.dst)
                    && dst.prefix_len() != 0
                    && !servers.iter().any(|s| dst.contains(s))
                {
                    k.routes.truncate(at);
                }
            })?;
        }
        Some(k)
    }

    /// Sends one dump request and hands each answer to `each` until the kernel says done.
    fn dump(
        &mut self,
        request: RouteNetlinkMessage,
        mut each: impl FnMut(RouteNetlinkMessage),
    ) -> Option<()> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.seq;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(request));
        msg.finalize();
        let len = msg.buffer_len();
        msg.serialize(self.buf.get_mut(..len)?);
        self.query.send(self.buf.get(..len)?, 0).ok()?;
        let mut found = 0usize;
        loop {
            let n = self.query.recv(&mut &mut self.buf[..], 0).ok()?;
            let mut at = 0;
            while let Some(bytes) = self.buf.get(at..n).filter(|b| b.len() >= 16) {
                let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes).ok()?;
                let size = usize::try_from(reply.header.length).ok()?;
                if size < 16 {
                    return None;
                }
                at += (size + 3) & !3;
                if reply.header.sequence_number != self.seq {
                    // A late answer to an earlier question.
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::InnerMessage(m) => {
                        found += 1;
                        each(m);
                    }
                    NetlinkPayload::Done(_) => return Some(()),
                    NetlinkPayload::Error(_) => return None,
                    _ => {}
                }
                if found > MAX_DUMP_MESSAGES {
                    return None;
                }
            }
        }
    }

    /// Whether each path's link works now, in path order.
    pub fn evaluate(&mut self) -> Vec<bool> {
        (0..self.paths.len()).map(|i| self.path_works(i)).collect()
    }

    fn path_works(&mut self, i: usize) -> bool {
        let Some(p) = self.paths.get(i).cloned() else {
            return true;
        };
        // A configured device: it must exist and be up, and the route must use it. (By
        // name over netlink: `if_nametoindex` would open a socket, which the sandbox
        // forbids once the daemon runs.)
        let device_index = match &p.device {
            Some(name) => match self.link(LinkQuery::Name(name)) {
                Answer::Yes((index, true)) => Some(index),
                Answer::Yes((_, false)) | Answer::No => return false,
                Answer::Unknown => None,
            },
            None => None,
        };
        match self.route_interface(&p, device_index) {
            Answer::Yes(oif) if device_index.is_some() => device_index == Some(oif),
            Answer::Yes(oif) => !matches!(
                self.link(LinkQuery::Index(oif)),
                Answer::Yes((_, false)) | Answer::No
            ),
            Answer::No => false,
            Answer::Unknown => true,
        }
    }

    /// The interface the kernel routes `p`'s datagrams through.
    fn route_interface(&mut self, p: &PathRoute, device: Option<u32>) -> Answer<u32> {
        let mut msg = RouteMessage::default();
        let (family, len) = match p.server {
            IpAddr::V4(_) => (AddressFamily::Inet, 32),
            IpAddr::V6(_) => (AddressFamily::Inet6, 128),
        };
        msg.header.address_family = family;
        msg.header.destination_prefix_length = len;
        msg.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(p.server)));
        if let Some(mark) = p.fwmark {
            msg.attributes.push(RouteAttribute::Mark(mark));
        }
        if let Some(oif) = device {
            msg.attributes.push(RouteAttribute::Oif(oif));
        }
        match self.ask(RouteNetlinkMessage::GetRoute(msg)) {
            Answer::Yes(RouteNetlinkMessage::NewRoute(r)) => r
                .attributes
                .iter()
                .find_map(|a| match a {
                    RouteAttribute::Oif(i) => Some(Answer::Yes(*i)),
                    _ => None,
                })
                .unwrap_or(Answer::Unknown),
            Answer::Yes(_) | Answer::Unknown => Answer::Unknown,
            Answer::No => Answer::No,
        }
    }

    /// An interface's index and whether it is up with a carrier.
    fn link(&mut self, which: LinkQuery<'_>) -> Answer<(u32, bool)> {
        let mut msg = LinkMessage::default();
        match which {
            LinkQuery::Index(index) => msg.header.index = index,
            LinkQuery::Name(name) => msg.attributes.push(LinkAttribute::IfName(name.to_owned())),
        }
        match self.ask(RouteNetlinkMessage::GetLink(msg)) {
            Answer::Yes(RouteNetlinkMessage::NewLink(l)) => {
                let f = l.header.flags;
                Answer::Yes((
                    l.header.index,
                    f.contains(LinkFlags::Up) && f.contains(LinkFlags::LowerUp),
                ))
            }
            Answer::Yes(_) | Answer::Unknown => Answer::Unknown,
            Answer::No => Answer::No,
        }
    }

    /// Sends one request and reads its answer: the message, `No` for a netlink error
    /// (no route, no such device), `Unknown` when nothing usable came back in time.
    fn ask(&mut self, request: RouteNetlinkMessage) -> Answer<RouteNetlinkMessage> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST;
        header.sequence_number = self.seq;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(request));
        msg.finalize();
        let len = msg.buffer_len();
        let Some(out) = self.buf.get_mut(..len) else {
            return Answer::Unknown;
        };
        msg.serialize(out);
        if self.query.send(out, 0).is_err() {
            return Answer::Unknown;
        }
        // Answers to earlier questions that timed out may come first: skip them.
        for _ in 0..8 {
            let n = match self.query.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => n,
                Err(_) => return Answer::Unknown,
            };
            let Some(bytes) = self.buf.get(..n) else {
                return Answer::Unknown;
            };
            let Ok(reply) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes) else {
                return Answer::Unknown;
            };
            if reply.header.sequence_number != self.seq {
                continue;
            }
            return match reply.payload {
                NetlinkPayload::InnerMessage(m) => Answer::Yes(m),
                NetlinkPayload::Error(e) if e.code.is_some() => Answer::No,
                _ => Answer::Unknown,
            };
        }
        Answer::Unknown
    }
}

/// The routes in `r` (one per next hop) if it is a unicast route outside `local`.
fn routes_of(r: &RouteMessage, out: &mut Vec<Route>) {
    let table = r
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(r.header.table));
    if r.header.kind != RouteType::Unicast || table == RT_TABLE_LOCAL {
        return;
    }
    let len = r.header.destination_prefix_length;
    let dst = r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        RouteAttribute::Destination(RouteAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    });
    let dst = match (dst, r.header.address_family) {
        (Some(a), _) => a,
        // A default route has no destination attribute.
        (None, AddressFamily::Inet) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        (None, AddressFamily::Inet6) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        (None, _) => return,
    };
    let Ok(dst) = IpNet::new(dst, len) else {
        return;
    };
    for a in &r.attributes {
        match a {
            RouteAttribute::Oif(oif) => out.push(Route { dst, oif: *oif }),
            RouteAttribute::MultiPath(hops) => out.extend(hops.iter().map(|h| Route {
                dst,
                oif: h.interface_index,
            })),
            _ => {}
        }
    }
}

/// An interface, by index or by name.
enum LinkQuery<'a> {
    Index(u32),
    Name(&'a str),
}

/// The kernel's answer to one question.
enum Answer<T> {
    Yes(T),
    No,
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(
        family: AddressFamily,
        len: u8,
        table: u8,
        attrs: Vec<RouteAttribute>,
    ) -> RouteMessage {
        let mut r = RouteMessage::default();
        r.header.address_family = family;
        r.header.destination_prefix_length = len;
        r.header.table = table;
        r.header.kind = RouteType::Unicast;
        r.attributes = attrs;
        r
    }

    #[test]
    fn routes_are_read_with_their_interfaces() {
        let mut out = Vec::new();
        // A default route has no destination attribute.
        routes_of(
            &route(AddressFamily::Inet, 0, 254, vec![RouteAttribute::Oif(3)]),
            &mut out,
        );
        routes_of(
            &route(
                AddressFamily::Inet6,
                64,
                254,
                vec![
                    RouteAttribute::Destination(RouteAddress::Inet6("2001:db8::".parse().unwrap())),
                    RouteAttribute::Oif(4),
                ],
            ),
            &mut out,
        );
        // Multipath: one route per next hop.
        let mut hop = netlink_packet_route::route::RouteNextHop::default();
        hop.interface_index = 5;
        let mut hop2 = hop.clone();
        hop2.interface_index = 6;
        routes_of(
            &route(
                AddressFamily::Inet,
                24,
                100,
                vec![
                    RouteAttribute::Destination(RouteAddress::Inet(
                        "198.51.100.0".parse().unwrap(),
                    )),
                    RouteAttribute::MultiPath(vec![hop, hop2]),
                ],
            ),
            &mut out,
        );
        // The local table, and routes that are not unicast, are left out.
        routes_of(
            &route(
                AddressFamily::Inet,
                32,
                255,
                vec![
                    RouteAttribute::Destination(RouteAddress::Inet("192.0.2.1".parse().unwrap())),
                    RouteAttribute::Oif(3),
                ],
            ),
            &mut out,
        );
        let mut blackhole = route(AddressFamily::Inet, 0, 254, vec![RouteAttribute::Oif(3)]);
        blackhole.header.kind = RouteType::BlackHole;
        routes_of(&blackhole, &mut out);
        let got: Vec<(String, u32)> = out.iter().map(|r| (r.dst.to_string(), r.oif)).collect();
        assert_eq!(
            got,
            vec![
                ("0.0.0.0/0".to_owned(), 3),
                ("2001:db8::/64".to_owned(), 4),
                ("198.51.100.0/24".to_owned(), 5),
                ("198.51.100.0/24".to_owned(), 6),
            ]
        );
    }

    /// Needs no privilege: loopback exists in every namespace and is up.
    #[test]
    fn loopback_works_and_a_missing_device_does_not() {
        let mut w = NetWatch::new(vec![
            PathRoute {
                server: "127.0.0.1".parse().unwrap(),
                device: None,
                fwmark: None,
            },
            PathRoute {
                server: "127.0.0.1".parse().unwrap(),
                device: Some("plait-none0".into()),
                fwmark: None,
            },
            PathRoute {
                server: "127.0.0.1".parse().unwrap(),
                device: Some("lo".into()),
                fwmark: None,
            },
        ])
        .expect("netlink sockets");
        assert_eq!(w.evaluate(), vec![true, false, true]);
        let k = w
            .kernel(&["127.0.0.1".parse().unwrap()])
            .expect("dumps answered");
        assert!(k.interfaces.iter().any(|f| f.name == "lo" && f.up), "{k:?}");
        assert!(
            k.routes.iter().all(|r| !r.dst.addr().is_loopback()),
            "the local table's routes are left out: {k:?}"
        );
        // Nothing changed: the event socket has nothing (or only unrelated churn).
        let _ = w.drain();
    }
}
