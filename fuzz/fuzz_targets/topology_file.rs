//! Fuzz target: arbitrary text as a topology file (the format shared by the test bed and
//! the simulator). Checks: no panic, a typed error or a topology.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = plait_topology::TopologyFile::parse(text, "fuzz.toml");
    }
});
