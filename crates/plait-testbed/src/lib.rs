//! plait's test bed: emulated multipath deployments in Linux network namespaces.
//!
//! - [`netns`]: one network namespace ([`Namespace`]) that is deleted, with every process
//!   still running in it, when dropped; commands, child processes and threads inside it;
//!   clean-up of namespaces left over by crashed runs.
//! - [`topology`]: the deployment `lan host – client – N paths – server – remote host`, one
//!   router namespace per path with tbf shaping, one-way delay and loss per direction (the
//!   [`emulate`] module's NFQUEUE emulators), silent blackholes (nftables), visible link loss
//!   (carrier down), and a kernel MPTCP set-up for comparisons. Addressing is fixed and documented there.
//! - [`traffic`]: TCP (or MPTCP) and UDP senders and sinks that run inside namespaces, with
//!   SHA-256 digests of what was sent and received, goodput samples and bounded timeouts; a
//!   UDP echo and RTT prober; interface byte counters sampled from inside a namespace.
//! - [`emulate`]: one-way delay and random or bursty (Gilbert-Elliott) loss per path and
//!   direction, by holding packets in an NFQUEUE and giving late verdicts in batches.
//! - [`worker`]: the background-thread type every helper thread here uses (stop flag,
//!   joined on drop).
//! - [`cmd`]: the one command runner (`ip`, `tc`, `nft`, `ethtool`, `sysctl`, `iptables`) with
//!   errors that name the command and carry its stderr.
//!
//! Everything here needs root (or `CAP_SYS_ADMIN` and `CAP_NET_ADMIN`); [`have_root`]
//! tells tests whether to skip. The binaries come from the Debian packages `iproute2`,
//! `nftables`, `ethtool` and `procps` (TESTBED.md in the shared notes lists what this
//! kernel can and cannot emulate: there is no netem).
//!
//! Invariants of the crate: nothing it creates outlives the value that owns it unless
//! explicitly kept ([`Namespace::keep`]); every wait is bounded; library code never panics
//! on its inputs, it returns a [`TestbedError`].

pub mod cmd;
pub mod emulate;
pub mod netns;
pub mod topology;
pub mod traffic;
pub mod worker;

pub use netns::{ChildGuard, Namespace, cleanup_stale};
pub use topology::{
    AttachedHost, ClientSite, Direction, Family, PathLink, PathSpec, Topology, TopologySpec,
};
pub use traffic::{
    CbrOptions, CbrReport, CbrSendReport, CbrSink, CounterSample, CounterSampler, GoodputSample,
    ProbeReport, RttProbe, SendLimit, SendOptions, SendReport, SinkReport, StreamProto, TcpSink,
    UdpBlastReport, UdpEcho, UdpReport, UdpSink, cbr_send, tcp_send, tcp_send_opts, udp_blast,
};

use std::time::Duration;

/// Everything that can go wrong in the test bed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// A command could not be started (binary missing, fork failed).
    #[error("`{command}` could not be started: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A command ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// Entering a network namespace failed.
    #[error("cannot enter network namespace {name}: {source}")]
    Enter {
        /// The namespace.
        name: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A topology or namespace specification that cannot be built.
    #[error("invalid test bed specification: {0}")]
    Spec(String),
    /// A socket or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A delay or loss emulator could not be started or its rule installed.
    #[error("path emulation: {0}")]
    Emulate(#[from] crate::emulate::EmulateError),
    /// Something did not happen within its time bound.
    #[error("timed out after {after:?}: {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The bound.
        after: Duration,
    },
    /// A worker thread panicked or disappeared.
    #[error("worker thread failed: {0}")]
    Thread(String),
}

/// Result with a [`TestbedError`].
pub type Result<T, E = TestbedError> = std::result::Result<T, E>;

impl TestbedError {
    /// Wraps an I/O error with a description of what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> TestbedError {
        TestbedError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Whether this process runs as root (tests that build namespaces skip otherwise).
pub fn have_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The message tests print when they skip for lack of root.
pub const SKIP_NO_ROOT: &str = "skipped: needs root (network namespaces)";
