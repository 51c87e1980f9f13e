//! The one drain loop every driver uses (docs/protocol.md#drive).
//!
//! After every input (a datagram, an inner packet, a command) or when the deadline it last
//! returned has come, a driver calls [`drive`]. It runs, in this order:
//! 1. `handle_timeout(now)`: timers due (loss, liveness, probes);
//! 2. `poll_delivery` until empty: in-order inner packets to the driver (TUN / application);
//! 3. `poll_transmit` until empty: datagrams to the driver's paths;
//! 4. `poll_event` until empty (session events, then stream events: a stream that became
//!    readable or writable is read or written by the driver with `stream_read` /
//!    `stream_write`, after which it drives again, as after any input);
//!
//! and returns `poll_timeout()`, the time to call it again without new input. Deliveries go
//! before transmits so an inner packet reaches its application as early as possible; the
//! driver may feed packets the application writes back before the next call.

use crate::ids::PathId;
use crate::session::{Delivery, Event, Session};
use crate::time::Time;

/// What a driver does with a session's outputs.
pub trait Io {
    /// Send `datagram` on `path`.
    fn transmit(&mut self, now: Time, path: PathId, datagram: &[u8]);
    /// Hand an in-order inner packet up (to the TUN device, or an application model).
    fn deliver(&mut self, now: Time, packet: &[u8], info: &Delivery);
    /// React to an event (log it, update a status page). Ignored by default.
    fn event(&mut self, _now: Time, _event: Event) {}
}

/// Runs the documented drain order at `now` and returns the next deadline.
/// `buf` is scratch space for one datagram or inner packet: at least
/// `config.max_datagram_size` bytes.
pub fn drive(session: &mut Session, now: Time, io: &mut impl Io, buf: &mut [u8]) -> Option<Time> {
    session.handle_timeout(now);
    while let Some(d) = session.poll_delivery(buf) {
        io.deliver(now, &buf[..d.len], &d);
    }
    while let Some(t) = session.poll_transmit(now, buf) {
        io.transmit(now, t.path, &buf[..t.len]);
    }
    while let Some(e) = session.poll_event() {
        io.event(now, e);
    }
    session.poll_timeout()
}
