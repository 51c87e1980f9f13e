//! The seccomp allow-list: every system call the daemon makes after set-up, and those its
//! `ip` and `nft` children make when they undo the network configuration at stop (a filter
//! survives `execve`, so they run under it too).
//!
//! Found by reading the code and by running the end-to-end tests (packet mode, stream mode
//! with the transparent listener, SOCKS5 and name lookups) with the daemons under
//! `strace -f` and with `seccomp = "log"` (docs/tunnel.md#least-privilege says how to
//! repeat that). Grouped by who needs a call; a call several groups need is listed once,
//! in the first.
//!
//! Invariants: a call is here only for a reason its group names; arguments are checked
//! where a call has both a use here and a dangerous use ([`Args`]); `clone3`, whose flags
//! sit behind a pointer the filter cannot read, always fails with ENOSYS
//! ([`Args::Enosys`]), so the C library falls back to `clone`, whose flags are checked.

/// What the filter checks in a call's arguments (the call is allowed only then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Args {
    /// Any arguments.
    Any,
    /// `openat`: read-only (access mode O_RDONLY, no O_CREAT, O_TRUNC or O_APPEND). The
    /// daemon runs as root, owner of most of the file system: with no file open for
    /// writing and no call that creates, renames or changes the mode of a file, it cannot
    /// change one. (The sysctl it restores at stop was opened for writing at set-up.)
    ReadOnly,
    /// `socket`: only the families in [`SOCKET_FAMILIES`].
    SocketFamily,
    /// `clone`: none of the flags in [`NAMESPACE_FLAGS`] (threads and child processes,
    /// no new namespaces).
    NoNamespaces,
    /// `prctl`: only the options in [`PRCTL_OPTIONS`].
    PrctlOption,
    /// `ioctl`: only the requests in [`IOCTL_REQUESTS`].
    IoctlRequest,
    /// `tgkill`: only to a thread of the daemon itself (an abort raises SIGABRT so).
    OwnProcess,
    /// Fails with ENOSYS, always (a second filter says so; the allow-list lets it through
    /// so that the stricter answer of the two is ENOSYS, not the kill).
    Enosys,
}

/// One allowed system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Syscall {
    /// Its name (as in `man 2`).
    pub name: &'static str,
    /// Its number on this architecture.
    pub number: i64,
    /// What is checked in its arguments.
    pub args: Args,
}

/// Socket families `socket` may create: Unix (name service daemons, the status socket's
/// own wake-up connection), IPv4 and IPv6 (relay connects, DNS), netlink (`ip`, `nft`).
pub const SOCKET_FAMILIES: [libc::c_int; 4] = [
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// `clone` flags that would make a namespace.
pub const NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

/// `prctl` options: naming a thread (the standard library names the threads it starts),
/// reading the bounding set (`ip`, through libcap, at start).
pub const PRCTL_OPTIONS: [libc::c_int; 2] = [libc::PR_SET_NAME, libc::PR_CAPBSET_READ];

/// `ioctl` requests: non-blocking mode (the standard library's `set_nonblocking`) and the
/// bytes waiting on a socket (the resolver).
pub const IOCTL_REQUESTS: [libc::c_ulong; 2] = [libc::FIONBIO, libc::FIONREAD];

macro_rules! sys {
    ($nr:ident) => {
        sys!($nr, Any)
    };
    ($nr:ident, $args:ident) => {
        Syscall {
            // `SYS_read` → `read`.
            name: stringify!($nr).split_at(4).1,
            number: libc::$nr as i64,
            args: Args::$args,
        }
    };
}

/// The allow-list for this architecture.
pub fn allow_list() -> Vec<Syscall> {
    let mut list = vec![
        // The allocator, the standard library's threads and channels (the resolver's), a
        // thread's stack, its name, its end; HashMap seeds and Noise ephemeral keys.
        sys!(SYS_brk),
        sys!(SYS_mmap),
        sys!(SYS_munmap),
        sys!(SYS_mremap),
        sys!(SYS_mprotect),
        sys!(SYS_madvise),
        sys!(SYS_futex),
        sys!(SYS_clone, NoNamespaces),
        sys!(SYS_clone3, Enosys),
        sys!(SYS_set_robust_list),
        sys!(SYS_rseq),
        sys!(SYS_sched_yield),
        sys!(SYS_sched_getaffinity),
        sys!(SYS_sigaltstack),
        sys!(SYS_prctl, PrctlOption),
        sys!(SYS_getpid),
        sys!(SYS_gettid),
        sys!(SYS_exit),
        sys!(SYS_exit_group),
        sys!(SYS_getrandom),
        // Signals: SIGINT/SIGTERM handlers, the children's signal reset, a sleep or poll
        // interrupted by a handler and restarted, an abort.
        sys!(SYS_rt_sigaction),
        sys!(SYS_rt_sigprocmask),
        sys!(SYS_rt_sigreturn),
        sys!(SYS_restart_syscall),
        sys!(SYS_tgkill, OwnProcess),
        // Time (without a vDSO clock these are system calls): the event loop's clock and
        // timerfd, the control endpoints' back-off.
        sys!(SYS_clock_gettime),
        sys!(SYS_gettimeofday),
        sys!(SYS_clock_nanosleep),
        sys!(SYS_timerfd_create),
        sys!(SYS_timerfd_settime),
        // The event loop (mio): epoll, the resolver's waker, the signal pipe.
        sys!(SYS_epoll_create1),
        sys!(SYS_epoll_ctl),
        sys!(SYS_epoll_pwait),
        sys!(SYS_eventfd2),
        sys!(SYS_socketpair),
        // Descriptors: TUN reads and writes, the log, pipes to the children, polls.
        sys!(SYS_read),
        sys!(SYS_write),
        sys!(SYS_writev),
        sys!(SYS_pread64),
        sys!(SYS_lseek),
        sys!(SYS_close),
        sys!(SYS_fcntl),
        sys!(SYS_ioctl, IoctlRequest),
        sys!(SYS_dup3),
        sys!(SYS_pipe2),
        sys!(SYS_ppoll),
        sys!(SYS_pselect6),
        sys!(SYS_fstat),
        sys!(SYS_newfstatat),
        sys!(SYS_statx),
        // Sockets: the paths' UDP batches (recvmmsg, GSO sendmsg), the relay's TCP
        // connects, accepts and SO_ORIGINAL_DST, the control endpoints, the name service
        // (DNS over UDP and TCP, nscd, netlink), `ip` and `nft` (netlink).
        sys!(SYS_socket, SocketFamily),
        sys!(SYS_connect),
        sys!(SYS_accept4),
        sys!(SYS_bind),
        sys!(SYS_getsockname),
        sys!(SYS_getpeername),
        sys!(SYS_getsockopt),
        sys!(SYS_setsockopt),
        sys!(SYS_shutdown),
        sys!(SYS_sendto),
        sys!(SYS_recvfrom),
        sys!(SYS_sendmsg),
        sys!(SYS_recvmsg),
        sys!(SYS_sendmmsg),
        sys!(SYS_recvmmsg),
        // Files, read-only: name service configuration (nsswitch.conf, resolv.conf,
        // hosts, gai.conf) and modules, the children's libraries and iproute2's tables,
        // finding `ip` and `nft` in PATH, the client's link signal file
        // (`/proc/net/wireless`, `daemon::link_signal`).
        sys!(SYS_openat, ReadOnly),
        sys!(SYS_getdents64),
        sys!(SYS_faccessat),
        sys!(SYS_uname),
        // The status socket's file, removed at stop.
        sys!(SYS_unlinkat),
        // Metered paths' budget state files (opened at set-up, written in place):
        // flushed to the disk after each save (docs/tunnel-config.md#budget).
        sys!(SYS_fdatasync),
        // Undoing the network configuration at stop: start `ip` and `nft`, wait for them,
        // and what they and their dynamic loader do before their netlink work.
        sys!(SYS_execve),
        sys!(SYS_wait4),
        sys!(SYS_set_tid_address),
        sys!(SYS_prlimit64),
        sys!(SYS_getuid),
        sys!(SYS_geteuid),
    ];
    // Older forms aarch64 does not have (it uses the *at, p* and 3 forms above).
    #[cfg(target_arch = "x86_64")]
    list.extend([
        sys!(SYS_arch_prctl),
        sys!(SYS_epoll_wait),
        sys!(SYS_poll),
        sys!(SYS_dup2),
        sys!(SYS_unlink),
        sys!(SYS_access),
    ]);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_unique() {
        let list = allow_list();
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.number, b.number, "{} and {}", a.name, b.name);
            }
        }
    }

    #[test]
    fn dangerous_calls_are_not_listed() {
        let names: Vec<&str> = allow_list().iter().map(|s| s.name).collect();
        for bad in [
            "unshare",
            "setns",
            "mount",
            "ptrace",
            "kill",
            "tkill",
            "pidfd_send_signal",
            "chmod",
            "fchmod",
            "fchmodat",
            "chown",
            "fchown",
            "fchownat",
            "rename",
            "renameat2",
            "link",
            "linkat",
            "symlinkat",
            "mkdirat",
            "open",
            "creat",
            "truncate",
            "ftruncate",
            "bpf",
            "init_module",
            "finit_module",
            "process_vm_writev",
            "setuid",
            "setresuid",
            "capset",
            "seccomp",
            "keyctl",
            "perf_event_open",
            "io_uring_setup",
            "userfaultfd",
        ] {
            assert!(!names.contains(&bad), "{bad} is on the allow-list");
        }
    }
}
