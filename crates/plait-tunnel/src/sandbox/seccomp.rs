//! Builds the seccomp filters from [`super::syscalls`] and installs them on every thread
//! (seccompiler's `apply_filter_all_threads`, which also sets no_new_privs).
//!
//! Two filters, as the kernel stacks them (the strictest answer wins):
//! - the allow-list: a listed call whose arguments pass its check is allowed; anything
//!   else gets the configured action (`kill`: SECCOMP_RET_KILL_PROCESS; `log`:
//!   SECCOMP_RET_LOG, allowed and logged by the kernel);
//! - the calls marked [`Args::Enosys`] (`clone3`: its flags cannot be checked) fail with
//!   ENOSYS, which beats the first filter's allow; the C library then uses `clone`, whose
//!   flags the allow-list checks.

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use super::syscalls::Args;

use crate::config::SeccompMode;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) fn install(mode: SeccompMode) -> Result<usize, String> {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
        SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
    };

    use super::syscalls::{
        IOCTL_REQUESTS, NAMESPACE_FLAGS, PRCTL_OPTIONS, SOCKET_FAMILIES, allow_list,
    };

    let err = |e: seccompiler::BackendError| e.to_string();
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(err)?;
    let one = |arg: u8, len: Len, op: Op, value: u64| -> Result<SeccompRule, String> {
        SeccompRule::new(vec![Cond::new(arg, len, op, value).map_err(err)?]).map_err(err)
    };
    let each = |arg: u8, values: &mut dyn Iterator<Item = u64>| {
        values
            .map(|v| one(arg, Len::Dword, Op::Eq, v))
            .collect::<Result<Vec<_>, String>>()
    };
    let mismatch = match mode {
        SeccompMode::Kill => SeccompAction::KillProcess,
        SeccompMode::Log => SeccompAction::Log,
        SeccompMode::Off => return Ok(0),
    };
    let list = allow_list();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for s in &list {
        let chain = match s.args {
            Args::Any => Vec::new(),
            Args::ReadOnly => {
                let mask =
                    (libc::O_ACCMODE | libc::O_CREAT | libc::O_TRUNC | libc::O_APPEND) as u64;
                vec![one(2, Len::Dword, Op::MaskedEq(mask), 0)?]
            }
            Args::SocketFamily => each(0, &mut SOCKET_FAMILIES.iter().map(|&f| f as u64))?,
            Args::NoNamespaces => vec![one(0, Len::Qword, Op::MaskedEq(NAMESPACE_FLAGS), 0)?],
            Args::PrctlOption => each(0, &mut PRCTL_OPTIONS.iter().map(|&o| o as u64))?,
            Args::IoctlRequest => each(1, &mut IOCTL_REQUESTS.iter().copied())?,
            Args::OwnProcess => vec![one(0, Len::Dword, Op::Eq, u64::from(std::process::id()))?],
            Args::Enosys => {
                enosys.insert(s.number, Vec::new());
                Vec::new()
            }
        };
        rules.insert(s.number, chain);
    }
    let allow = SeccompFilter::new(rules, mismatch, SeccompAction::Allow, arch).map_err(err)?;
    let no_clone3 = SeccompFilter::new(
        enosys,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(err)?;
    for filter in [no_clone3, allow] {
        let program: BpfProgram = filter.try_into().map_err(err)?;
        seccompiler::apply_filter_all_threads(&program).map_err(|e| e.to_string())?;
    }
    Ok(list.len())
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn install(mode: SeccompMode) -> Result<usize, String> {
    match mode {
        SeccompMode::Off => Ok(0),
        _ => Err(format!(
            "plait has no system call list for {}",
            std::env::consts::ARCH
        )),
    }
}
