//! `plait testbed set NAME PATH [options]`: checks the change here (values, then the path
//! against the test bed), then sends it to the holder, which checks it again, applies it
//! and answers with the path's new settings or the error.
//!
//! Invariant: nothing is sent unless the test bed's holder is alive and ready, so every
//! refusal says what to do instead.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};

use super::options::SetOptions;
use super::proto::{self, Reply, Request};
use super::state::{self, Paths, Phase, holder_alive};
use super::{check_name, need_root, testbed_cli};

/// Runs `plait testbed set`.
pub fn set(root: &Path, args: &SetOptions) -> Result<()> {
    let name = args.name.as_str();
    check_name(name)?;
    let change = args.change;
    need_root("set")?;
    let tb = testbed_cli(root);
    let paths = Paths::new(root, name);
    let st = state::read(&paths)?.ok_or_else(|| {
        anyhow!(
            "no test bed {name} under {}: start one with `{tb} up TOPOLOGY --name {name}`",
            root.display()
        )
    })?;
    if !holder_alive(st.pid, st.pid_start) {
        bail!(
            "test bed {name} is not running (its holder, pid {}, is gone): `{tb} down {name}` \
             removes what is left",
            st.pid
        );
    }
    if st.phase != Phase::Ready {
        bail!("test bed {name} is still starting; try again in a moment");
    }
    change.validate(st.paths.len())?;
    // Also what depends on the current settings (a queue in ms needs the rate).
    if let Some(current) = st.paths.get(change.path) {
        change.apply(current, st.paths.len())?;
    }
    let reply = proto::call(&paths.control(), &Request::Set { change })
        .with_context(|| format!("asking the holder of test bed {name} (pid {})", st.pid))?;
    match reply {
        Reply::Ok { message } => {
            println!("test bed {name} {message}");
            Ok(())
        }
        Reply::Error { error } => bail!("test bed {name}: {error}"),
    }
}
