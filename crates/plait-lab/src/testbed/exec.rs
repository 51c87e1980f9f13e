//! `plait testbed exec NAME ROLE -- CMD…`: runs a command inside one namespace of a test
//! bed by replacing this process with `ip netns exec NAMESPACE CMD…`, so standard I/O,
//! signals and the exit status are the command's own.
//!
//! Invariant: an unknown role is refused with the list of valid ones; nothing runs unless
//! the namespace exists.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use anyhow::{Result, anyhow, bail};

use super::options::ExecOptions;
use super::state::{self, Paths};
use super::{check_name, need_root, testbed_cli};

/// Runs `plait testbed exec`; returns only on error.
pub fn exec(root: &Path, args: &ExecOptions) -> Result<()> {
    let name = args.name.as_str();
    check_name(name)?;
    need_root("exec")?;
    let tb = testbed_cli(root);
    let st = state::read(&Paths::new(root, name))?.ok_or_else(|| {
        anyhow!(
            "no test bed {name} under {}: start one with `{tb} up TOPOLOGY --name {name}`",
            root.display()
        )
    })?;
    if st.namespaces.is_empty() {
        bail!("test bed {name} is still starting; try again in a moment");
    }
    let ns = st.namespace(&args.role).ok_or_else(|| {
        anyhow!(
            "test bed {name} has no role {:?}; valid roles: {}",
            args.role,
            st.roles()
        )
    })?;
    if !Path::new("/run/netns").join(ns).exists() {
        bail!(
            "namespace {ns} of test bed {name} no longer exists (`{tb} status {name}` \
             says more; `{tb} down {name}` cleans up)"
        );
    }
    let err = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(&args.command)
        .exec();
    Err(anyhow!("cannot run `ip netns exec {ns} …`: {err}"))
}
