//! The client side of the relay: accepting redirected and SOCKS5 connections and opening
//! their streams.

use std::net::SocketAddr;

use mio::Registry;
use mio::net::TcpStream;
use plait_proto::Time;
use tracing::{debug, warn};

use super::conn::Conn;
use super::{
    ACCEPTS_PER_ROUND, ListenerKind, Phase, Relay, Role, describe_target, set_relay_options,
    unspecified,
};
use crate::endpoint::StreamHost;
use crate::socks5::{self, AuthPolicy, Handshake, ReplyCode, Status, Target, TargetHost};

impl Relay {
    pub(super) fn accept_all(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        registry: &Registry,
    ) {
        for i in 0..self.listeners.len() {
            if !self.listeners[i].ready {
                continue;
            }
            for _ in 0..ACCEPTS_PER_ROUND {
                let (tcp, from) = match self.listeners[i].socket.accept() {
                    Ok(x) => x,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        self.listeners[i].ready = false;
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        // EMFILE and the like: the backlog waits for the next sweep (a
                        // second), so a full descriptor table does not spin the loop.
                        self.listeners[i].ready = false;
                        if let Some(suppressed) = self.log_refused.check(now) {
                            warn!(error = %e, suppressed, "accept failed: connections wait in the backlog");
                        }
                        break;
                    }
                };
                self.accept_one(host, now, registry, i, tcp, from);
            }
        }
    }

    fn accept_one(
        &mut self,
        host: &mut impl StreamHost,
        now: Time,
        registry: &Registry,
        listener: usize,
        tcp: TcpStream,
        from: SocketAddr,
    ) {
        let Role::Client { max_connections } = self.role else {
            return;
        };
        if self.conns.len() >= max_connections {
            self.stats.refused += 1;
            self.log_refusal(
                now,
                "server",
                &format!("{max_connections} connections open (streams.max_connections)"),
            );
            Conn::new(tcp, now).abort();
            return;
        }
        let l = &self.listeners[listener];
        let (kind, local) = (l.kind, l.local);
        set_relay_options(&tcp);
        let mut conn = Conn::new(tcp, now);
        let phase = match kind {
            ListenerKind::Socks5 => {
                let policy = self.socks_policy.clone().unwrap_or(AuthPolicy::NoAuth);
                (
                    Phase::Socks(Box::new(Handshake::new(policy))),
                    format!("SOCKS5 from {from}"),
                )
            }
            ListenerKind::Transparent => {
                let dst = match crate::io::original_dst::original_dst(&conn.tcp, local.is_ipv6()) {
                    Ok(d) => d,
                    Err(e) => {
                        self.stats.refused += 1;
                        self.log_refusal(
                            now,
                            "server",
                            &format!("from {from}: no original destination ({e})"),
                        );
                        conn.abort();
                        return;
                    }
                };
                if conn.tcp.local_addr().is_ok_and(|l| l == dst) {
                    // Connected to the listener itself, not redirected to it: relaying
                    // would loop back here.
                    self.stats.refused += 1;
                    self.log_refusal(
                        now,
                        "server",
                        &format!("from {from}: connection to the transparent listener itself"),
                    );
                    conn.abort();
                    return;
                }
                let target = Target {
                    host: TargetHost::Ip(dst.ip().to_canonical()),
                    port: dst.port(),
                };
                if let Err(why) = open_for(host, now, &mut conn, &target) {
                    self.stats.refused += 1;
                    self.log_refusal(now, "server", &format!("to {dst}: {why}"));
                    conn.abort();
                    return;
                }
                self.stats.relayed += 1;
                (Phase::Relaying, describe_target(&target))
            }
        };
        let (phase, target) = phase;
        self.insert(registry, conn, phase, target);
    }

    /// Feeds what the SOCKS5 client sent to its handshake; at CONNECT, opens the stream and
    /// answers.
    pub(super) fn socks_step(&mut self, host: &mut impl StreamHost, now: Time, key: usize) {
        use std::io::{Read, Write};
        let e = &mut self.conns[key];
        let Phase::Socks(hs) = &mut e.phase else {
            return;
        };
        let n = match e.conn.tcp.read(&mut self.scratch[..socks5::MAX_BUFFERED]) {
            Ok(0) => {
                self.close(key, false);
                return;
            }
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(_) => {
                self.close(key, true);
                return;
            }
        };
        let progress = hs.feed(&self.scratch[..n]);
        // The handshake's answers are a few bytes; a socket that cannot take them at
        // once is not worth waiting for.
        let out = hs.take_output();
        let _ = e.conn.tcp.write(&out);
        let progress = match progress {
            Ok(p) => p,
            Err(err) => {
                self.stats.refused += 1;
                debug!(error = %err, "SOCKS5 handshake failed");
                self.close(key, false);
                return;
            }
        };
        let Status::Done(target) = progress.status else {
            // More may be buffered in the socket already.
            self.queue(key);
            return;
        };
        let pipelined = self.scratch[progress.consumed..n].to_vec();
        let e = &mut self.conns[key];
        if let Err(why) = open_for(host, now, &mut e.conn, &target) {
            let _ = e
                .conn
                .tcp
                .write(&socks5::reply(ReplyCode::GeneralFailure, unspecified()));
            self.stats.refused += 1;
            self.log_refusal(now, "server", &format!("SOCKS5 to {target:?}: {why}"));
            self.close(key, false);
            return;
        }
        // Answered at once: the server connects in parallel, and a failure there resets
        // the connection (docs/tunnel.md#stream-mode says why).
        let bound = e.conn.tcp.local_addr().unwrap_or_else(|_| unspecified());
        let reply = socks5::reply(ReplyCode::Succeeded, bound);
        if e.conn.queue_down(now, &reply).is_err() {
            self.close(key, true);
            return;
        }
        e.conn.queue_up(&pipelined);
        e.dest = describe_target(&target);
        e.phase = Phase::Relaying;
        if let Some(s) = e.conn.stream {
            self.by_stream.insert(s, key);
        }
        self.stats.relayed += 1;
        self.queue(key);
    }
}

/// Opens the connection's stream towards `target`.
fn open_for(
    host: &mut impl StreamHost,
    now: Time,
    conn: &mut Conn,
    target: &Target,
) -> Result<(), String> {
    let mut request = Vec::with_capacity(target.encoded_len());
    target.encode(&mut request);
    match host.open_stream(now, &request) {
        Ok(s) => {
            conn.stream = Some(s);
            Ok(())
        }
        Err(plait_proto::StreamError::Closed) => Err("the tunnel is not up".into()),
        Err(e) => Err(e.to_string()),
    }
}
