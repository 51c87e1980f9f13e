//! The `plait` command line: clap types and thin wrappers that call into the libraries
//! (plait-tunnel for the daemons, plait-sim for simulations, plait-lab for the test bed
//! and benchmarks). No logic here beyond turning arguments into options.

pub mod bench;
pub mod sim;
pub mod testbed;
pub mod transfer;
pub mod tunnel;
