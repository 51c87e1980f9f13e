//! One scaffold for the test bed's UDP receivers that count what arrives ([`super::UdpSink`],
//! [`super::CbrSink`]): a thread in a namespace binds a socket with a [`POLL`] read
//! timeout, reports its address (or the bind error) within [`BIND_TIMEOUT`], then hands
//! every datagram to the receiver's closure until its stop flag is set, and returns the
//! receiver's state. A receive error other than a timeout ends the thread with that error.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use super::{BIND_TIMEOUT, POLL, is_wait};
use crate::netns::Namespace;
use crate::worker::Worker;
use crate::{Result, TestbedError};

/// A running receiver: its bound address and the worker that returns its state.
pub(super) struct Receiver<S> {
    pub local: SocketAddr,
    pub worker: Worker<Result<Result<S>>>,
}

/// Binds `bind` in `ns` on a thread named `{thread}-{port}` and feeds each datagram to
/// `on_datagram` with `state`; `what` names the receiver in errors (e.g. "UDP sink").
pub(super) fn spawn<S, F>(
    ns: &Namespace,
    thread: &str,
    what: &str,
    bind: SocketAddr,
    mut state: S,
    mut on_datagram: F,
) -> Result<Receiver<S>>
where
    S: Send + 'static,
    F: FnMut(&mut S, &[u8]) -> Result<()> + Send + 'static,
{
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<SocketAddr>>(1);
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let handle = ns.spawn_thread(
        &format!("{thread}-{}", bind.port()),
        move || -> Result<S> {
            let sock = match bound(bind) {
                Ok((s, a)) => {
                    let _ = ready_tx.send(Ok(a));
                    s
                }
                Err(e) => {
                    let err = TestbedError::io(format!("binding UDP {bind}"), e);
                    let _ = ready_tx.send(Err(TestbedError::Spec(err.to_string())));
                    return Err(err);
                }
            };
            let mut buf = vec![0u8; 65_536];
            while !stop2.load(Ordering::Acquire) {
                match sock.recv(&mut buf) {
                    Ok(n) => on_datagram(&mut state, &buf[..n])?,
                    Err(e) if is_wait(&e) => {}
                    Err(e) => return Err(TestbedError::io(format!("receiving on {bind}"), e)),
                }
            }
            Ok(state)
        },
    )?;
    let local = match ready_rx.recv_timeout(BIND_TIMEOUT) {
        Ok(r) => r?,
        Err(_) => {
            stop.store(true, Ordering::Release);
            return Err(TestbedError::Thread(format!(
                "{what} on {bind} did not start"
            )));
        }
    };
    Ok(Receiver {
        local,
        worker: Worker::new(stop, handle),
    })
}

/// A socket bound to `bind` with a [`POLL`] read timeout, and its address.
pub(super) fn bound(bind: SocketAddr) -> std::io::Result<(UdpSocket, SocketAddr)> {
    let s = UdpSocket::bind(bind)?;
    s.set_read_timeout(Some(POLL))?;
    let a = s.local_addr()?;
    Ok((s, a))
}
