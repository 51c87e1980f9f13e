//! Both relays in one process: the endpoints joined by the in-memory network of the
//! endpoint tests (virtual time), the TCP side real sockets on loopback. An application
//! thread speaks SOCKS5 to the client's listener; a destination thread serves on
//! loopback; the test thread runs both event loops until the application is done.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use mio::{Events, Poll};

use super::*;
use crate::endpoint::tests::{Capture, World, keys};
use crate::socks5::AuthPolicy;

/// Wall-clock bound on one test's loop: a hang fails with a message instead of hanging CI.
const HANG: Duration = Duration::from_secs(60);

struct Relays {
    w: World,
    client: Relay,
    server: Relay,
    client_poll: Poll,
    server_poll: Poll,
    socks: SocketAddr,
}

fn relays(policy: DestinationPolicy) -> Relays {
    let mut w = World::new(&keys());
    w.client.enable_streams();
    w.server.enable_streams();
    let client_poll = Poll::new().unwrap();
    let server_poll = Poll::new().unwrap();
    let socks = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let socks_addr = socks.local_addr().unwrap();
    let client = Relay::client(
        ClientRelayParams {
            transparent: Vec::new(),
            socks5: Some((socks, AuthPolicy::NoAuth)),
            max_connections: 64,
            idle_timeout: Duration::from_secs(600),
        },
        client_poll.registry(),
    )
    .unwrap();
    let server = Relay::server(
        ServerRelayParams {
            policy,
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(600),
            max_streams_per_client: 64,
        },
        server_poll.registry(),
    )
    .unwrap();
    let mut r = Relays {
        w,
        client,
        server,
        client_poll,
        server_poll,
        socks: socks_addr,
    };
    // The handshake.
    r.w.run_for(Duration::from_millis(200));
    r
}

fn loopback_policy() -> DestinationPolicy {
    DestinationPolicy {
        allow: vec!["127.0.0.0/8".parse().unwrap()],
        deny: Vec::new(),
    }
}

impl Relays {
    /// One round of both loops: the network advances 1 ms of virtual time.
    fn round(&mut self) {
        self.w.run_for(Duration::from_millis(1));
        let mut events = Events::with_capacity(256);
        for (poll, relay) in [
            (&mut self.client_poll, &mut self.client),
            (&mut self.server_poll, &mut self.server),
        ] {
            poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
            for ev in &events {
                relay.on_ready(
                    ev.token(),
                    ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    ev.is_writable() || ev.is_write_closed() || ev.is_error(),
                );
            }
        }
        let now = self.w.now;
        let stamp = self.w.stamp();
        self.client
            .process(&mut self.w.client, now, self.client_poll.registry());
        let mut cap = Capture::default();
        self.w.client.flush_streams(stamp, &mut cap);
        self.w.absorb(true, cap);
        self.server
            .process(&mut self.w.server, now, self.server_poll.registry());
        let mut cap = Capture::default();
        self.w.server.flush_streams(stamp, &mut cap);
        self.w.absorb(false, cap);
    }

    /// Runs rounds until `done` yields (the application thread's result).
    fn run_until<T>(&mut self, done: &mpsc::Receiver<T>) -> T {
        let start = Instant::now();
        loop {
            self.round();
            if let Ok(v) = done.try_recv() {
                // A few more rounds so closes and resets reach the other relay.
                for _ in 0..50 {
                    self.round();
                }
                return v;
            }
            assert!(
                start.elapsed() < HANG,
                "relays made no progress for {HANG:?}: client {:?}, server {:?}",
                self.client.stats(),
                self.server.stats()
            );
        }
    }
}

/// SOCKS5 no-auth CONNECT to `to`; returns the reply code.
fn socks_connect(proxy: SocketAddr, to: SocketAddr) -> (TcpStream, u8) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut sel = [0u8; 2];
    s.read_exact(&mut sel).unwrap();
    assert_eq!(sel, [5, 0]);
    let SocketAddr::V4(v4) = to else { panic!() };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&v4.ip().octets());
    req.extend_from_slice(&v4.port().to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    (s, reply[1])
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Bytes both ways, byte-identical, with half-close each way: the application sends and
/// shuts its write side, the destination reads to the end, answers, and closes.
#[test]
fn bytes_cross_both_ways_with_half_close() {
    let mut r = relays(loopback_policy());
    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    let dest_addr = dest.local_addr().unwrap();
    let up = pattern(3 << 20, 7);
    let down = pattern(2 << 20, 11);
    let (up2, down2) = (up.clone(), down.clone());
    let destination = thread::spawn(move || {
        let (mut s, _) = dest.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        // The application's FIN arrived (read_to_end returned) while our side is open.
        s.write_all(&down2).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        got == up2
    });
    let (tx, rx) = mpsc::channel();
    let socks = r.socks;
    thread::spawn(move || {
        let (mut s, code) = socks_connect(socks, dest_addr);
        assert_eq!(code, 0);
        s.write_all(&up).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        let res = s.read_to_end(&mut got).map(|_| got);
        tx.send(res).unwrap();
    });
    let got = r.run_until(&rx).expect("application read");
    assert_eq!(got.len(), down.len());
    assert!(got == down, "downloaded bytes differ");
    assert!(destination.join().unwrap(), "uploaded bytes differ");
    assert_eq!(r.client.stats().open, 0, "client connection closed");
    assert_eq!(r.server.stats().open, 0, "server connection closed");
    assert_eq!(r.server.stats().relayed, 1);
}

/// A destination that refuses (nothing listens) and one the policy denies: the
/// application's connection is reset, and nothing is left open.
#[test]
fn refused_and_denied_destinations_reset_the_application() {
    let mut r = relays(DestinationPolicy {
        allow: vec!["127.0.0.0/8".parse().unwrap()],
        deny: vec!["127.0.0.2/32".parse().unwrap()],
    });
    // A port nothing listens on: bind, learn, close.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let denied: SocketAddr = "127.0.0.2:80".parse().unwrap();
    for to in [closed, denied] {
        let (tx, rx) = mpsc::channel();
        let socks = r.socks;
        thread::spawn(move || {
            let (mut s, code) = socks_connect(socks, to);
            assert_eq!(code, 0, "answered at once, before the server connects");
            let mut buf = [0u8; 16];
            tx.send(s.read(&mut buf).map_err(|e| e.kind())).unwrap();
        });
        let got = r.run_until(&rx);
        assert_eq!(
            got,
            Err(std::io::ErrorKind::ConnectionReset),
            "to {to}: reset, not a clean close"
        );
    }
    assert_eq!(r.server.stats().refused, 2);
    assert_eq!(r.server.stats().open, 0);
    assert_eq!(r.client.stats().open, 0);
}

/// Many connections at once, each its own bytes, all intact.
#[test]
fn forty_concurrent_connections_all_intact() {
    let mut r = relays(loopback_policy());
    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    let dest_addr = dest.local_addr().unwrap();
    // Echo server: every connection gets its bytes back.
    thread::spawn(move || {
        for s in dest.incoming() {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let mut buf = vec![0u8; 16 << 10];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    let (tx, rx) = mpsc::channel();
    let socks = r.socks;
    thread::spawn(move || {
        let handles: Vec<_> = (0..40u8)
            .map(|i| {
                thread::spawn(move || {
                    let data = pattern(1000 + usize::from(i) * 7919, i);
                    let (mut s, code) = socks_connect(socks, dest_addr);
                    assert_eq!(code, 0);
                    let mut w = s.try_clone().unwrap();
                    let d2 = data.clone();
                    let writer = thread::spawn(move || {
                        w.write_all(&d2).unwrap();
                        w.shutdown(Shutdown::Write).unwrap();
                    });
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).unwrap();
                    writer.join().unwrap();
                    got == data
                })
            })
            .collect();
        let ok = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count();
        tx.send(ok).unwrap();
    });
    let ok = r.run_until(&rx);
    assert_eq!(ok, 40, "every connection's bytes came back intact");
    assert_eq!(r.server.stats().relayed, 40);
}

/// SOCKS5 garbage gets a close, not a crash, and costs nothing after.
#[test]
fn socks5_garbage_is_closed() {
    let mut r = relays(loopback_policy());
    let (tx, rx) = mpsc::channel();
    let socks = r.socks;
    thread::spawn(move || {
        let mut s = TcpStream::connect(socks).unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        tx.send(
            s.read_to_end(&mut buf)
                .map(|_| buf.len())
                .map_err(|e| e.kind()),
        )
        .unwrap();
    });
    let got = r.run_until(&rx);
    assert_eq!(got, Ok(0), "closed without an answer (not SOCKS5)");
    assert_eq!(r.client.stats().refused, 1);
    assert_eq!(r.client.stats().open, 0);
}

/// A reader that stops reading holds only its own stream: another connection's transfer
/// completes meanwhile (per-stream flow control; the session's credit is not used up by
/// the stalled stream).
#[test]
fn a_stalled_reader_does_not_hold_other_connections() {
    let mut r = relays(loopback_policy());
    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    let dest_addr = dest.local_addr().unwrap();
    // Every connection gets 20 MB (or less, if its reader goes away).
    thread::spawn(move || {
        for s in dest.incoming() {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let block = pattern(64 << 10, 3);
                for _ in 0..320 {
                    if s.write_all(&block).is_err() {
                        return;
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    let (tx, rx) = mpsc::channel();
    let socks = r.socks;
    thread::spawn(move || {
        // The stalled one: connected, never read.
        let (stalled, code) = socks_connect(socks, dest_addr);
        assert_eq!(code, 0);
        thread::sleep(Duration::from_millis(300));
        let (mut s, code) = socks_connect(socks, dest_addr);
        assert_eq!(code, 0);
        let mut got = Vec::new();
        let res = s.read_to_end(&mut got).map(|_| got.len());
        drop(stalled);
        tx.send(res).unwrap();
    });
    let got = r.run_until(&rx).expect("the second connection's read");
    assert_eq!(got, 320 * (64 << 10), "the second transfer completed");
}

/// SOCKS5 requests the relay does not serve get the RFC's reply and a close: BIND
/// (0x07), an unknown address type (0x08); a truncated request just a close.
#[test]
fn socks5_unsupported_requests_get_their_reply_codes() {
    let mut r = relays(loopback_policy());
    for (request, want) in [
        (vec![5, 2, 0, 1, 127, 0, 0, 1, 0, 80], Some(0x07u8)),
        (vec![5, 1, 0, 9, 127, 0, 0, 1, 0, 80], Some(0x08)),
        (vec![5, 1, 0, 1, 127], None),
    ] {
        let (tx, rx) = mpsc::channel();
        let socks = r.socks;
        let req = request.clone();
        thread::spawn(move || {
            let mut s = TcpStream::connect(socks).unwrap();
            s.set_read_timeout(Some(HANG)).unwrap();
            s.write_all(&[5, 1, 0]).unwrap();
            let mut sel = [0u8; 2];
            s.read_exact(&mut sel).unwrap();
            s.write_all(&req).unwrap();
            if req.len() < 10 {
                // Truncated: the client gives up and closes its side.
                s.shutdown(Shutdown::Write).unwrap();
            }
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            tx.send(answer).unwrap();
        });
        let answer = r.run_until(&rx);
        match want {
            Some(code) => assert_eq!(answer.get(1), Some(&code), "{request:?}: {answer:?}"),
            None => assert!(answer.is_empty(), "{request:?}: {answer:?}"),
        }
    }
    assert_eq!(r.client.stats().open, 0);
}

/// SOCKS5 CONNECT to a name, with the first bytes sent right behind the request (as curl
/// and browsers do once the reply says yes): the server resolves the name on its resolver
/// threads while those bytes already wait in the stream, and must relay them once it has
/// connected (it used to wait for more data that never came).
#[test]
fn data_sent_while_the_server_resolves_is_relayed() {
    let mut r = relays(loopback_policy());
    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dest.local_addr().unwrap().port();
    let destination = thread::spawn(move || {
        let (mut s, _) = dest.accept().unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        let mut got = [0u8; 5];
        s.read_exact(&mut got).unwrap();
        s.write_all(&got).unwrap();
    });
    let (tx, rx) = mpsc::channel();
    let socks = r.socks;
    thread::spawn(move || {
        let mut s = TcpStream::connect(socks).unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        s.write_all(&[5, 1, 0]).unwrap();
        let mut sel = [0u8; 2];
        s.read_exact(&mut sel).unwrap();
        // A name (address type 3) that getaddrinfo answers without a network.
        let name = b"127.0.0.1";
        let mut req = vec![5, 1, 0, 3, name.len() as u8];
        req.extend_from_slice(name);
        req.extend_from_slice(&port.to_be_bytes());
        req.extend_from_slice(b"hello");
        s.write_all(&req).unwrap();
        let mut reply = [0u8; 10];
        s.read_exact(&mut reply).unwrap();
        let mut echo = [0u8; 5];
        let res = s.read_exact(&mut echo).map(|()| (reply[1], echo));
        tx.send(res).unwrap();
    });
    let (code, echo) = r.run_until(&rx).expect("the echo");
    assert_eq!(code, 0);
    assert_eq!(&echo, b"hello");
    destination.join().unwrap();
}
