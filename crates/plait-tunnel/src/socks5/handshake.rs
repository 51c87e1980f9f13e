//! The SOCKS5 server handshake as a state machine fed bytes as they arrive.
//!
//! Each message is read field by field into a fixed [`MAX_BUFFERED`]-byte array: the
//! handshake asks for exactly the bytes up to the next length or type field, checks that
//! field the moment it arrives, and so knows where the message ends without ever reading
//! past it. A message is checked as soon as its last byte is in; the buffer is then wiped
//! (it may have held a password) and the next message starts at offset 0.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

use zeroize::Zeroize;

use super::auth::{
    AUTH_FAILURE, AUTH_SUCCESS, AUTH_VERSION, AuthPolicy, METHOD_NONE_ACCEPTABLE,
    METHOD_USERNAME_PASSWORD,
};
use super::target::{self, Target};
use super::{CMD_CONNECT, MAX_BUFFERED, MAX_OUTPUT, Socks5Error, VERSION, encode_reply};

/// Where the handshake is.
#[derive(Clone, Debug)]
enum Phase {
    /// Reading `VER NMETHODS METHODS`.
    Greeting,
    /// Reading `VER ULEN UNAME PLEN PASSWD`.
    Auth,
    /// Reading `VER CMD RSV ATYP DST.ADDR DST.PORT`.
    Request,
    /// The request was read; the caller connects and replies.
    Done(Target),
    /// Failed; every later `feed` returns this error.
    Failed(Socks5Error),
}

/// What [`Handshake::feed`] made of its input.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Progress {
    /// Input bytes consumed. All of them unless the handshake is done: then the rest,
    /// `input[consumed..]`, is the client's first stream data (pipelined after CONNECT).
    pub consumed: usize,
    /// Whether [`Handshake::take_output`] holds bytes to send to the client.
    pub has_output: bool,
    /// Whether the handshake needs more input or is done.
    pub status: Status,
}

/// Whether the handshake is finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Waiting for more input (after the output, if any, is sent).
    NeedMore,
    /// The client asked to CONNECT here: connect, then send [`super::reply`].
    Done(Target),
}

/// One client's SOCKS5 handshake, server side. See the module invariants in
/// [`crate::socks5`].
pub struct Handshake {
    policy: AuthPolicy,
    phase: Phase,
    /// The message being read: `buf[..len]`.
    buf: [u8; MAX_BUFFERED],
    len: usize,
    /// Bytes to send, at most [`MAX_OUTPUT`].
    out: Vec<u8>,
}

impl fmt::Debug for Handshake {
    /// Leaves out the buffer: it may hold a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handshake")
            .field("policy", &self.policy)
            .field("phase", &self.phase)
            .field("buffered", &self.len)
            .field("output", &self.out.len())
            .finish()
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.buf.zeroize();
    }
}

impl Handshake {
    /// A handshake expecting a greeting, accepting clients as `policy` says.
    pub fn new(policy: AuthPolicy) -> Handshake {
        Handshake {
            policy,
            phase: Phase::Greeting,
            buf: [0; MAX_BUFFERED],
            len: 0,
            out: Vec::with_capacity(MAX_OUTPUT),
        }
    }

    /// Reads what it can of `input`. After every call, `Ok` or `Err`, send
    /// [`take_output`](Self::take_output) to the client; on `Err`, then close.
    ///
    /// Once done, further calls consume nothing and report the same target; once failed,
    /// they return the same error.
    pub fn feed(&mut self, input: &[u8]) -> Result<Progress, Socks5Error> {
        let mut consumed = 0;
        loop {
            match &self.phase {
                Phase::Done(target) => {
                    let target = target.clone();
                    return Ok(self.progress(consumed, Status::Done(target)));
                }
                Phase::Failed(err) => return Err(err.clone()),
                Phase::Greeting | Phase::Auth | Phase::Request => {}
            }
            let want = match self.wanted() {
                Ok(want) => want,
                Err(err) => return Err(self.fail(err)),
            };
            if self.len < want {
                // `want` is at most 513 (the largest message); `min` only keeps a mistake
                // there from indexing out of bounds: the handshake would then stall.
                let end = want.min(MAX_BUFFERED);
                let rest = input.get(consumed..).unwrap_or_default();
                let take = (end - self.len).min(rest.len());
                if take == 0 {
                    return Ok(self.progress(consumed, Status::NeedMore));
                }
                self.buf[self.len..self.len + take].copy_from_slice(&rest[..take]);
                self.len += take;
                consumed += take;
                continue;
            }
            if let Err(err) = self.complete() {
                return Err(self.fail(err));
            }
        }
    }

    /// The output to send to the client, emptied.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Bytes of the current message buffered so far (at most [`MAX_BUFFERED`]).
    pub fn buffered(&self) -> usize {
        self.len
    }

    fn progress(&self, consumed: usize, status: Status) -> Progress {
        Progress {
            consumed,
            has_output: !self.out.is_empty(),
            status,
        }
    }

    /// The length the current message has, as far as the bytes buffered so far tell: more
    /// than `len` if another field must be read before it is known, `len` when the message
    /// is complete. Checks each version, count, command and type field once it is in.
    fn wanted(&self) -> Result<usize, Socks5Error> {
        let b = &self.buf[..self.len];
        match self.phase {
            Phase::Greeting => {
                let Some(&ver) = b.first() else { return Ok(1) };
                if ver != VERSION {
                    return Err(Socks5Error::GreetingVersion(ver));
                }
                match b.get(1) {
                    None => Ok(2),
                    Some(0) => Err(Socks5Error::NoMethods),
                    Some(&n) => Ok(2 + usize::from(n)),
                }
            }
            Phase::Auth => {
                let Some(&ver) = b.first() else { return Ok(1) };
                if ver != AUTH_VERSION {
                    return Err(Socks5Error::AuthVersion(ver));
                }
                let Some(&ulen) = b.get(1) else { return Ok(2) };
                let plen_at = 2 + usize::from(ulen);
                match b.get(plen_at) {
                    None => Ok(plen_at + 1),
                    Some(&plen) => Ok(plen_at + 1 + usize::from(plen)),
                }
            }
            Phase::Request => {
                let Some(&ver) = b.first() else { return Ok(1) };
                if ver != VERSION {
                    return Err(Socks5Error::RequestVersion(ver));
                }
                match b.get(1) {
                    None => return Ok(2),
                    Some(&CMD_CONNECT) => {}
                    Some(&cmd) => return Err(Socks5Error::CommandNotSupported(cmd)),
                }
                // RSV at offset 2 is not checked; the address field starts at 3.
                match target::encoded_len_prefix(b.get(3..).unwrap_or_default()) {
                    Ok(n) => Ok(3 + n),
                    Err(target::TargetError::Truncated { need, .. }) => Ok(3 + need),
                    Err(e) => Err(e.into()),
                }
            }
            Phase::Done(_) | Phase::Failed(_) => Ok(self.len),
        }
    }

    /// Acts on the complete message in `buf[..len]` and moves to the next phase.
    fn complete(&mut self) -> Result<(), Socks5Error> {
        let msg = &self.buf[..self.len];
        let next = match self.phase {
            Phase::Greeting => {
                let offered = &msg[2..];
                let method = self.policy.select(offered);
                if method == METHOD_NONE_ACCEPTABLE {
                    return Err(Socks5Error::NoAcceptableMethod {
                        wanted: self.policy.method(),
                        offered: offered.to_vec(),
                    });
                }
                self.out.extend_from_slice(&[VERSION, method]);
                if method == METHOD_USERNAME_PASSWORD {
                    Phase::Auth
                } else {
                    Phase::Request
                }
            }
            Phase::Auth => {
                let ulen = usize::from(msg[1]);
                let username = &msg[2..2 + ulen];
                let password = &msg[3 + ulen..];
                let ok = match &self.policy {
                    AuthPolicy::UsernamePassword(c) => c.verify(username, password),
                    // Not reached: this phase follows only method 0x02.
                    AuthPolicy::NoAuth => false,
                };
                if !ok {
                    return Err(Socks5Error::AuthFailed);
                }
                self.out.extend_from_slice(&[AUTH_VERSION, AUTH_SUCCESS]);
                Phase::Request
            }
            Phase::Request => Phase::Done(Target::decode(&msg[3..])?),
            Phase::Done(_) | Phase::Failed(_) => return Ok(()),
        };
        self.clear();
        self.phase = next;
        Ok(())
    }

    /// Queues the protocol's answer to `err`, if it has one, and fails for good.
    fn fail(&mut self, err: Socks5Error) -> Socks5Error {
        match &err {
            Socks5Error::NoAcceptableMethod { .. } => {
                self.out
                    .extend_from_slice(&[VERSION, METHOD_NONE_ACCEPTABLE]);
            }
            Socks5Error::AuthFailed => self.out.extend_from_slice(&[AUTH_VERSION, AUTH_FAILURE]),
            _ => {
                if let Some(code) = err.reply_code() {
                    let unspecified = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
                    encode_reply(code, unspecified, &mut self.out);
                }
            }
        }
        debug_assert!(self.out.len() <= MAX_OUTPUT);
        self.clear();
        self.phase = Phase::Failed(err.clone());
        err
    }

    /// Wipes the message just handled: it may have been a password.
    fn clear(&mut self) {
        self.buf[..self.len].zeroize();
        self.len = 0;
    }
}
