//! The server side of the relay: a client's opened stream becomes a connection to its
//! destination, after the per-client limit, (for names) the resolver, and the policy.
//!
//! Invariant: a stream holds a slot of its client's `per_client` count from the moment it
//! passes the limit until its connection is forgotten ([`Relay::close`]) or it is refused
//! ([`Relay::refuse_open`] with `held_slot`), whichever comes first.

use std::net::SocketAddr;

use mio::Registry;
use mio::net::TcpStream;
use plait_proto::{StreamId, Time};

use super::conn::Conn;
use super::{Phase, Relay, Role, codes, describe_target};
use crate::endpoint::{StreamHost, StreamPeer};
use crate::socks5::{Target, TargetHost};

impl Relay {
    /// A client opened a stream with `request`.
    pub(super) fn on_opened(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        registry: &Registry,
        peer: StreamPeer,
        id: StreamId,
        request: &[u8],
    ) {
        let Role::Server {
            params, per_client, ..
        } = &mut self.role
        else {
            // Clients open streams; a server opening one to a client is refused.
            let _ = host.stream_reset(now, peer, id, codes::DENIED);
            return;
        };
        let max = params.max_streams_per_client;
        let open = per_client.entry(peer.index).or_default();
        let target = match Target::decode(request) {
            Ok(t) => t,
            Err(e) => {
                let why = format!("malformed open request: {e}");
                return self.refuse_open(host, now, peer, id, codes::BAD_REQUEST, &why, false);
            }
        };
        if *open >= max {
            let why = format!("{max} connections open (streams.max_streams_per_client)");
            return self.refuse_open(host, now, peer, id, codes::LIMIT, &why, false);
        }
        *open += 1;
        match &target.host {
            TargetHost::Ip(ip) => {
                let to = SocketAddr::new(*ip, target.port);
                self.connect(host, now, registry, peer, id, to, &describe_target(&target));
            }
            TargetHost::Domain(d) => {
                let Role::Server { resolver, .. } = &mut self.role else {
                    return;
                };
                if let Err(why) = resolver.resolve(peer, id, d.as_str(), target.port) {
                    let why = format!("{}: {why}", d.as_str());
                    self.refuse_open(host, now, peer, id, codes::RESOLVE_FAILED, &why, true);
                }
            }
        }
    }

    /// Connects the streams whose destination names resolved.
    pub(super) fn take_resolved(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        registry: &Registry,
    ) {
        let Role::Server { resolver, .. } = &mut self.role else {
            return;
        };
        for r in resolver.take_done() {
            match r.result {
                Ok(addrs) => {
                    let to = addrs[0];
                    let what = format!("{}:{} ({})", r.name, r.port, to.ip());
                    self.connect(host, now, registry, r.peer, r.id, to, &what);
                }
                Err(e) => {
                    let why = format!("{}: {e}", r.name);
                    self.refuse_open(host, now, r.peer, r.id, codes::RESOLVE_FAILED, &why, true);
                }
            }
        }
    }

    /// Resets a stream the server will not connect, counts and logs it; gives back its
    /// client's slot if it `held_slot`.
    #[allow(clippy::too_many_arguments)]
    fn refuse_open(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        peer: StreamPeer,
        id: StreamId,
        code: u64,
        why: &str,
        held_slot: bool,
    ) {
        let _ = host.stream_reset(now, peer, id, code);
        if held_slot
            && let Role::Server { per_client, .. } = &mut self.role
            && let Some(n) = per_client.get_mut(&peer.index)
        {
            *n = n.saturating_sub(1);
        }
        self.stats.refused += 1;
        let name = host.peer_name(peer.index).to_owned();
        self.log_refusal(now, &name, why);
    }

    /// Starts the connect for a stream (its slot already taken), if the policy allows
    /// the address.
    #[allow(clippy::too_many_arguments)]
    fn connect(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        registry: &Registry,
        peer: StreamPeer,
        id: StreamId,
        to: SocketAddr,
        what: &str,
    ) {
        let Role::Server { params, .. } = &self.role else {
            return;
        };
        if !params.policy.allows(to.ip()) {
            let why = format!("{what}: not allowed by streams.allow/deny");
            return self.refuse_open(host, now, peer, id, codes::DENIED, &why, true);
        }
        let deadline = now + params.connect_timeout;
        let tcp = match TcpStream::connect(to) {
            Ok(t) => t,
            Err(e) => {
                let why = format!("connect to {what}: {e}");
                let code = codes::for_connect_error(&e);
                return self.refuse_open(host, now, peer, id, code, &why, true);
            }
        };
        let mut conn = Conn::new(tcp, now);
        conn.tcp_readable = false;
        conn.tcp_writable = false;
        // The client may have sent data while the name was being resolved: its Readable
        // event found no connection then, so the first pump after the connect reads the
        // stream without waiting for another.
        conn.stream_readable = true;
        conn.stream = Some((peer, id));
        self.insert(
            registry,
            conn,
            Phase::Connecting { deadline, to },
            what.to_owned(),
        );
    }
}
