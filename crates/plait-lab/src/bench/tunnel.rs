//! The tunnel under benchmark: the same harness `plait tunnel-bench` uses (real
//! `plait server` and `plait client` processes over a test-bed topology; see
//! `tunnel_bench/harness.rs`).

pub(crate) use crate::tunnel_bench::harness::{Tunnel, TunnelOptions};
