//! One-way delay and packet loss for one direction of an emulated path, without netem
//! (this kernel has none): the router namespace of the path sends the direction's packets
//! to a netfilter queue (`iptables -j NFQUEUE`, see [`install_rule`]) and a userspace
//! emulator ([`run`], or [`Emulator`] on its own thread) drops some of them at once and
//! gives the others a late `accept` verdict, in batches. Rate, queue limit and up/down are
//! the topology's (tbf, nftables, link state), not this module's.
//!
//! - [`model`]: [`LinkModel`] (delay, [`LossModel`], seed) and the seeded per-packet loss
//!   decision [`LossState`].
//! - [`nfqueue`]: the emulator loop [`run`], its [`EmulatorStats`], and the iptables rule
//!   that feeds it. [`Emulator::set_model`] changes the delay and loss of a running
//!   emulator.
//! - `nfqueue_socket`: the nfnetlink_queue protocol on a plain netlink socket (safe Rust).
//!
//! Invariants: every packet the emulator reads gets exactly one verdict; when it stops
//! (through its stop flag, or an error after the queue was bound) it accepts every packet it
//! still holds, so nothing stays stuck; an emulator lives in the network namespace of the
//! thread that runs it and only sees the queue of that namespace; the loss decisions depend
//! only on the model, the seed and the packet count (since the last model change: a new
//! model restarts them from its seed).

pub mod model;
pub mod nfqueue;
mod nfqueue_socket;

#[cfg(test)]
mod testnet;

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sched::{CloneFlags, setns};

use crate::worker::Worker;

pub use model::{LinkModel, LossModel, LossState, MAX_DELAY, ModelError};
pub use nfqueue::{
    BATCH_INTERVAL, EmulatorStats, REALTIME_PRIORITY, install_rule, remove_rule, run,
};

use nfqueue::ModelSlot;

/// Everything that can go wrong while emulating.
#[derive(Debug, thiserror::Error)]
pub enum EmulateError {
    /// The link model is invalid.
    #[error("invalid link model: {0}")]
    Model(#[from] ModelError),
    /// A netlink (netfilter queue) operation failed; `EPERM` means the process lacks
    /// `CAP_NET_ADMIN`.
    #[error("netfilter queue: {op} failed: {errno}")]
    Netlink {
        /// What was being done.
        op: &'static str,
        /// The error number.
        errno: Errno,
    },
    /// Another program (or another emulator) already holds the queue (the process has
    /// `CAP_NET_ADMIN`, yet binding was refused).
    #[error("netfilter queue {queue} is already bound by another program")]
    QueueBusy {
        /// The queue number.
        queue: u16,
    },
    /// The kernel sent something this client cannot parse.
    #[error("netfilter queue protocol error: {0}")]
    Protocol(String),
    /// A network namespace could not be entered.
    #[error("cannot enter network namespace {netns}: {source}")]
    Netns {
        /// The namespace's name (under `/run/netns`).
        netns: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A required program is not installed.
    #[error("`{program}` not found: install the Debian package `{package}`")]
    MissingTool {
        /// The program.
        program: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The emulator thread could not be started, did not get ready in time or panicked.
    #[error("emulator thread: {0}")]
    Thread(String),
}

/// Moves the calling thread into the network namespace `netns` (a name as `ip netns add`
/// creates it, i.e. a file under `/run/netns`). Sockets opened afterwards by this thread
/// belong to that namespace.
pub fn enter_netns(netns: &str) -> Result<(), EmulateError> {
    let err = |source| EmulateError::Netns {
        netns: netns.to_owned(),
        source,
    };
    if netns.is_empty() || netns.contains('/') || netns == "." || netns == ".." {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a namespace name",
        )));
    }
    let file = File::open(format!("/run/netns/{netns}")).map_err(err)?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| err(e.into()))
}

/// How long [`Emulator::spawn`] waits for the queue to be bound.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// An emulator running [`run`] on its own thread; stopping it (or dropping it) accepts every
/// packet it still holds. Its model can change while it runs ([`Emulator::set_model`]).
#[derive(Debug)]
pub struct Emulator {
    queue: u16,
    model: Arc<ModelSlot>,
    /// Checks its stop flag every round of the loop (at most about 10 ms).
    worker: Worker<Result<EmulatorStats, EmulateError>>,
}

impl Emulator {
    /// Starts an emulator for `queue` inside network namespace `netns` (`None`: the caller's
    /// own) and returns once the queue is bound, so rules added afterwards never bypass it.
    pub fn spawn(netns: Option<&str>, queue: u16, model: LinkModel) -> Result<Self, EmulateError> {
        model.validate()?;
        let stop = Arc::new(AtomicBool::new(false));
        let slot = Arc::new(ModelSlot::new(model));
        let (ready_tx, ready_rx) = mpsc::channel();
        let netns = netns.map(str::to_owned);
        let flag = Arc::clone(&stop);
        let thread_slot = Arc::clone(&slot);
        let thread = std::thread::Builder::new()
            .name(format!("emulate-q{queue}"))
            .spawn(move || {
                if let Some(ns) = &netns {
                    enter_netns(ns)?;
                }
                nfqueue::run_with_ready(queue, &thread_slot, &flag, || {
                    let _ = ready_tx.send(());
                })
            })
            .map_err(|e| EmulateError::Thread(e.to_string()))?;
        let this = Self {
            queue,
            model: slot,
            worker: Worker::new(stop, thread),
        };
        match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(()) => Ok(this),
            // The thread ended before binding: its result says why.
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(match this.worker.join() {
                Ok(Err(e)) => e,
                Ok(Ok(_)) => EmulateError::Thread("ended before binding".into()),
                Err(p) => EmulateError::Thread(p.to_string()),
            }),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                this.worker.request_stop();
                Err(EmulateError::Thread(format!(
                    "queue {queue} not bound within {READY_TIMEOUT:?}"
                )))
            }
        }
    }

    /// The queue number this emulator serves.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Changes the delay and loss of the running emulator (validated first: an invalid
    /// model changes nothing). The loop adopts it within one round (at most about 10 ms):
    /// packets arriving afterwards get the new delay (never due before a packet ahead of
    /// them, so order is kept) and loss decisions from a fresh state seeded by
    /// `model.seed`; packets already held keep their due times. Fails if the emulator
    /// thread has ended (it stopped on an error).
    pub fn set_model(&self, model: LinkModel) -> Result<(), EmulateError> {
        model.validate()?;
        if self.worker.is_finished() {
            return Err(EmulateError::Thread(format!(
                "the emulator of queue {} is no longer running",
                self.queue
            )));
        }
        self.model.set(model);
        Ok(())
    }

    /// The model last requested (the one it was started with, or the last
    /// [`Emulator::set_model`]).
    pub fn model(&self) -> LinkModel {
        self.model.get()
    }

    /// Stops the emulator (every held packet is accepted) and returns its statistics.
    pub fn stop(self) -> Result<EmulatorStats, EmulateError> {
        self.worker
            .stop()
            .map_err(|p| EmulateError::Thread(p.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_namespaces_are_refused() {
        for name in ["", "a/b", "..", "emu-surely-missing-netns"] {
            let err = enter_netns(name).unwrap_err();
            assert!(matches!(err, EmulateError::Netns { .. }), "{name}: {err}");
        }
        // The thread fails before binding; spawn reports its error.
        let err = Emulator::spawn(
            Some("emu-surely-missing-netns"),
            0,
            LinkModel::passthrough(),
        )
        .unwrap_err();
        assert!(matches!(err, EmulateError::Netns { .. }), "{err}");
    }

    #[test]
    fn invalid_models_are_refused_before_a_thread_starts() {
        let model = LinkModel {
            delay: Duration::from_millis(1),
            loss: LossModel::GilbertElliott {
                p_good_to_bad: 0.1,
                p_bad_to_good: 0.1,
                loss_in_good: 0.0,
                loss_in_bad: 7.0,
            },
            seed: 0,
        };
        let err = Emulator::spawn(None, 0, model).unwrap_err();
        assert!(err.to_string().contains("loss_in_bad"), "{err}");
    }
}
