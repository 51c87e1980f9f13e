//! Least privilege after set-up (docs/tunnel.md#least-privilege): once the TUN device is
//! open, the sockets bound, the routes, rules and nftables tables applied and the control
//! listeners bound, the daemon gives up what it no longer needs, in this order:
//!
//! 1. capabilities ([`capabilities`]): every set (bounding, permitted, effective, inheritable,
//!    ambient) is cut to [`KEPT_CAPABILITIES`], CAP_NET_ADMIN alone, which undoing the
//!    network configuration at stop needs (the `ip` and `nft` children get it through the
//!    ambient set);
//! 2. `PR_SET_NO_NEW_PRIVS`: no exec (of a set-uid binary, or one with file capabilities)
//!    can ever give the daemon or its children more than they have;
//! 3. the seccomp allow-list ([`seccomp`], the list itself in [`syscalls`]), on every
//!    thread at once (TSYNC); a system call not on it kills the daemon or is logged, as
//!    [`SeccompMode`] says.
//!
//! Invariants: [`lock_down`] runs on the daemon's main thread before any thread that
//! outlives set-up is started (capabilities are per thread; threads started later inherit
//! the reduced sets, and the filter from TSYNC or from their parent); it either applies
//! everything the configuration asks for or fails, so the daemon never runs with less
//! protection than configured without saying so at start.

mod capabilities;
mod seccomp;
// Lists for x86_64 and aarch64 only (elsewhere `seccomp` must be `off`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod syscalls;

use thiserror::Error;
use tracing::{info, warn};

use crate::config::{SeccompMode, SecurityConfig};

pub use self::capabilities::KEPT_CAPABILITIES;

/// Why the daemon could not give up its privileges. The daemon refuses to start.
#[derive(Debug, Error)]
pub enum SandboxError {
    /// Reading or changing a capability set failed.
    #[error(
        "cannot drop capabilities: {0} (set `drop_capabilities = false` in [security] to run with every capability)"
    )]
    Capabilities(String),
    /// `prctl(PR_SET_NO_NEW_PRIVS)` failed.
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(nix::Error),
    /// The filter could not be built or installed.
    #[error(
        "cannot install the seccomp filter: {0} (set `seccomp = \"off\"` in [security] to run without it)"
    )]
    Seccomp(String),
}

/// What [`lock_down`] did, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The capabilities left, by name (`None`: capabilities were not touched).
    pub capabilities: Option<Vec<String>>,
    /// Whether no_new_privs is set.
    pub no_new_privs: bool,
    /// System calls on the allow-list (`None`: no filter).
    pub seccomp_syscalls: Option<usize>,
}

/// Applies `cfg` to the whole process: capabilities, no_new_privs, the seccomp filter.
/// Call it once, on the main thread, when set-up is done.
pub fn lock_down(cfg: &SecurityConfig) -> Result<Applied, SandboxError> {
    let mut applied = Applied::default();
    if !cfg.drop_capabilities && cfg.seccomp == SeccompMode::Off {
        warn!(
            "[security] drop_capabilities = false and seccomp = \"off\": the daemon keeps every capability and may make any system call"
        );
        return Ok(applied);
    }
    let threads = other_threads();
    if cfg.drop_capabilities {
        if threads > 0 {
            warn!(
                threads,
                "threads started before the capability drop keep their capabilities"
            );
        }
        let kept = capabilities::drop_to_kept().map_err(SandboxError::Capabilities)?;
        applied.capabilities = Some(kept);
    }
    nix::sys::prctl::set_no_new_privs().map_err(SandboxError::NoNewPrivs)?;
    applied.no_new_privs = true;
    if cfg.seccomp != SeccompMode::Off {
        let n = seccomp::install(cfg.seccomp).map_err(SandboxError::Seccomp)?;
        applied.seccomp_syscalls = Some(n);
    }
    info!(
        capabilities = applied.capabilities.as_ref().map_or_else(
            || "all (drop_capabilities = false)".to_owned(),
            |c| c.join(",")
        ),
        no_new_privs = applied.no_new_privs,
        seccomp = cfg.seccomp.name(),
        allowed_syscalls = applied.seccomp_syscalls.unwrap_or(0),
        "least privilege: set-up done, privileges dropped"
    );
    Ok(applied)
}

/// Threads of this process other than the caller (0 if /proc cannot tell).
fn other_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count().saturating_sub(1))
        .unwrap_or(0)
}
#[cfg(test)]
mod tests;
