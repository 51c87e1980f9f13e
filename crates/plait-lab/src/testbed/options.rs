//! What each `plait testbed` subcommand is asked to do, as plain data: the binary's
//! argument parser fills these, tests and other programs can too.

use std::ffi::OsString;
use std::path::PathBuf;

use super::settings::Change;

/// Default test bed name (and namespace prefix).
pub const DEFAULT_NAME: &str = "tb";

/// `plait testbed up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The topology file.
    pub topology: PathBuf,
    /// Test bed name and namespace prefix: 1 to 8 of a-z and _.
    pub name: String,
    /// Do not apply the file's timed events.
    pub no_events: bool,
}

/// `plait testbed down`.
#[derive(Debug, Clone)]
pub struct DownOptions {
    /// The test bed ([`DEFAULT_NAME`] if `None` and not `all`).
    pub name: Option<String>,
    /// Every test bed under the state directory.
    pub all: bool,
}

/// `plait testbed status`.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// One test bed (`None`: all).
    pub name: Option<String>,
    /// JSON (an array, one object per test bed).
    pub json: bool,
}

/// `plait testbed exec`.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// The test bed.
    pub name: String,
    /// The namespace's role: lan0, cli0, r0x0, r0x1, …, srv, rem.
    pub role: String,
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

/// `plait testbed set`.
#[derive(Debug, Clone)]
pub struct SetOptions {
    /// The test bed.
    pub name: String,
    /// The change, its values already checked ([`Change::validate`]).
    pub change: Change,
}

/// `plait testbed hold` (internal: the holder process `up` starts).
#[derive(Debug, Clone)]
pub struct HoldOptions {
    /// The topology file (absolute).
    pub topology: PathBuf,
    /// Test bed name.
    pub name: String,
    /// Do not apply the file's events.
    pub no_events: bool,
}
