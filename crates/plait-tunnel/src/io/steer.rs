//! The server's handshake socket: initiations get a socket of their own, so a flood of
//! them cannot crowd the clients' data out of the listening socket's receive buffer.
//!
//! Both sockets are bound to the listen address in one `SO_REUSEPORT` group, the data
//! socket first (index 0), the handshake socket second (index 1). A classic BPF program
//! attached to the group (`SO_ATTACH_REUSEPORT_CBPF`) reads the first byte of each
//! datagram's UDP payload (the kernel runs it with the UDP header pulled) and picks
//! index 1 for [`TYPE_INITIATION`], index 0 for everything else, including datagrams too
//! short to have a first byte (the load fails and the program returns 0). So when junk
//! initiations arrive faster than the server reads them, the kernel drops them at the
//! handshake socket's full buffer, and data, path-control and unknown-index traffic keep
//! their own buffer (docs/protocol.md#dos).
//!
//! Invariants: the endpoint never sees the handshake socket. The event loop hands what
//! it reads there to the endpoint under the data socket's index, and replies leave
//! through the data socket (same address and port), so path validation and every reply
//! see one socket per listen address.

use std::io;
use std::net::SocketAddr;

use nix::sys::socket::setsockopt;
use nix::sys::socket::sockopt::AttachReusePortCbpf;

use crate::io::udp::{SocketOptions, UdpPath};
use crate::message::TYPE_INITIATION;

/// The listen address's data socket and, when steering could be set up, its handshake
/// socket.
#[derive(Debug)]
pub struct SteeredListen {
    /// Everything but initiations; the endpoint's socket.
    pub data: UdpPath,
    /// Initiations only. `None` where the kernel refused the group or the program: then
    /// everything arrives on `data`, as without steering.
    pub handshake: Option<UdpPath>,
}

/// Binds `addr` as the server's listening data socket and, beside it, a handshake socket
/// that initiations are steered to. Only binding the data socket can fail; a steering
/// failure returns the error in the second place, to be logged (the server still works,
/// unprotected).
pub fn bind_steered(addr: SocketAddr) -> io::Result<(SteeredListen, Option<io::Error>)> {
    let opts = SocketOptions {
        reuse_port: true,
        ..SocketOptions::default()
    };
    let data = UdpPath::bind(addr, &opts)?;
    // Port 0 means the kernel picked one: the handshake socket joins that one.
    let bound = data.local_addr();
    let handshake = UdpPath::bind(bound, &opts).and_then(|h| {
        attach_program(&data)?;
        Ok(h)
    });
    Ok(match handshake {
        Ok(h) => (
            SteeredListen {
                data,
                handshake: Some(h),
            },
            None,
        ),
        Err(e) => {
            // Without the program the group would hash datagrams over both sockets; a
            // lone data socket must not stay in a group, so bind it again alone.
            drop(data);
            let data = UdpPath::bind(bound, &SocketOptions::default())?;
            (
                SteeredListen {
                    data,
                    handshake: None,
                },
                Some(e),
            )
        }
    })
}

/// The steering program: `ldb [0]; jeq #TYPE_INITIATION, 0, 1; ret #1; ret #0`.
fn program() -> [libc::sock_filter; 4] {
    const LDB_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    [
        op(LDB_ABS, 0, 0, 0),
        op(JEQ_K, 0, 1, u32::from(TYPE_INITIATION)),
        op(RET_K, 0, 0, 1),
        op(RET_K, 0, 0, 0),
    ]
}

fn attach_program(socket: &UdpPath) -> io::Result<()> {
    let mut filter = program();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // The kernel copies the program: `filter` need only live through the call.
    setsockopt(socket, AttachReusePortCbpf, &prog).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::time::Duration;

    use super::*;
    use crate::io::udp::RecvBuffers;

    /// Everything queued on `s` now.
    fn receive_all(s: &UdpPath, bufs: &mut RecvBuffers) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        loop {
            match s.recv(bufs) {
                Ok(n) => {
                    for m in 0..n {
                        let (_, _, datagrams) = bufs.datagrams(m);
                        got.extend(datagrams.map(|d| d.to_vec()));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return got,
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn initiations_go_to_the_handshake_socket_everything_else_to_data() {
        let (listen, err) = bind_steered("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(err.is_none(), "{err:?}");
        let to = listen.data.local_addr();
        let handshake = listen.handshake.as_ref().expect("steered");
        assert_eq!(handshake.local_addr(), to);
        // From many source ports, so the group's hash alone would spread them.
        let mut sent_initiations = 0;
        let mut sent_other = 0;
        for i in 0..64u8 {
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            let kind = [TYPE_INITIATION, 2, 3, 4, 5, 6, 0xff][usize::from(i) % 7];
            c.send_to(&[kind, i, 0, 0], to).unwrap();
            if kind == TYPE_INITIATION {
                sent_initiations += 1;
            } else {
                sent_other += 1;
            }
            // One byte: the shortest a type can be read from.
            c.send_to(&[i % 2 * 4], to).unwrap();
            sent_other += 1;
        }
        // Loopback delivers before `send_to` returns; the wait is a margin.
        std::thread::sleep(Duration::from_millis(50));
        let mut bufs = RecvBuffers::default();
        let on_data = receive_all(&listen.data, &mut bufs);
        let on_handshake = receive_all(handshake, &mut bufs);
        assert_eq!(on_handshake.len(), sent_initiations);
        assert!(on_handshake.iter().all(|d| d[0] == TYPE_INITIATION));
        assert_eq!(on_data.len(), sent_other);
        assert!(on_data.iter().all(|d| d.first() != Some(&TYPE_INITIATION)));
    }
}
