//! A background thread with a stop flag: the one shape of every helper thread here (traffic
//! sinks, echoes, probers, samplers, link emulators).
//!
//! Invariants: dropping a [`Worker`] sets its stop flag and joins its thread, so whatever
//! the thread holds (a socket, a port, an NFQUEUE binding) is released when the drop
//! returns; a thread that panicked is reported by [`Worker::stop`] as a [`Panicked`] with
//! its message, and ignored by the drop (never a second panic while unwinding). The thread
//! must poll the flag often enough for the join to be short; each user states its bound.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// A worker thread that panicked, with its panic message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("panicked: {0}")]
pub struct Panicked(pub String);

/// A thread returning `R`, stopped through a shared flag (see the module docs).
#[derive(Debug)]
pub struct Worker<R> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<R>>,
}

impl<R> Worker<R> {
    /// Owns `thread`, which watches `stop`.
    pub fn new(stop: Arc<AtomicBool>, thread: JoinHandle<R>) -> Worker<R> {
        Worker {
            stop,
            thread: Some(thread),
        }
    }

    /// Whether the thread has ended (on its own or after a stop).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Asks the thread to stop without waiting for it.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Stops the thread and returns what it returned.
    pub fn stop(self) -> Result<R, Panicked> {
        self.request_stop();
        self.join()
    }

    /// Waits for a thread that ends by itself (no stop requested) and returns its result.
    pub fn join(mut self) -> Result<R, Panicked> {
        match self.thread.take() {
            Some(t) => t.join().map_err(|p| Panicked(panic_message(p.as_ref()))),
            None => Err(Panicked("joined twice".into())),
        }
    }
}

impl<R> Drop for Worker<R> {
    fn drop(&mut self) {
        self.request_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn spin(stop: &Arc<AtomicBool>) -> JoinHandle<u32> {
        let stop = Arc::clone(stop);
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Acquire) {
                rounds += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            rounds
        })
    }

    #[test]
    fn stop_sets_the_flag_and_returns_the_result() {
        let flag = Arc::new(AtomicBool::new(false));
        let w = Worker::new(Arc::clone(&flag), spin(&flag));
        assert!(!w.is_finished());
        assert!(w.stop().is_ok());
        assert!(flag.load(Ordering::Acquire));
    }

    #[test]
    fn drop_stops_and_joins() {
        let flag = Arc::new(AtomicBool::new(false));
        let thread = spin(&flag);
        drop(Worker::new(Arc::clone(&flag), thread));
        assert!(flag.load(Ordering::Acquire));
    }

    #[test]
    fn a_panic_is_reported_with_its_message() {
        let flag = Arc::new(AtomicBool::new(false));
        let t = std::thread::spawn(|| -> u32 { panic!("boom {}", 7) });
        let w = Worker::new(flag, t);
        assert_eq!(w.join(), Err(Panicked("boom 7".into())));
    }
}
