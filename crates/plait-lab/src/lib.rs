//! plait's experiments as a library: everything `plait bench`, `plait bench-doc`,
//! `plait demo`, `plait tunnel-bench` and `plait testbed` do, taking plain option structs
//! so that the `plait` binary only parses arguments and calls in.
//!
//! - [`bench`]: plait against the best single path and kernel MPTCP on one emulated
//!   topology (runner, metrics, report, plots, docs/benchmarks.md, the demo).
//! - [`tunnel_bench`]: the tunnel's own speed and CPU use against raw UDP and plain TCP
//!   (docs/tunnel-bench.md).
//! - [`testbed`]: an emulated topology kept up between shell commands by a holder process,
//!   with its control protocol and state files.
//! - [`temp_dir`]: temporary directories (daemon configs, keys) a later run removes if
//!   this one was killed.
//!
//! Invariants: every entry point that builds namespaces refuses to run without root and
//! says so; everything it creates is owned by a guard, so an error or Ctrl-C leaves nothing
//! behind; a benchmark reports numbers and fails only when something does not work, never
//! on speed.

pub mod bench;
pub mod temp_dir;
pub mod testbed;
pub mod tunnel_bench;
