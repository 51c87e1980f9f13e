//! Fuzz target: arbitrary text as a client and as a server config file
//! (docs/tunnel-config.md). Checks: no panic, a typed error or a config.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Relative key files resolve under a directory that does not exist.
    let origin = Path::new("/nonexistent/plait-fuzz/config.toml");
    let _ = plait_tunnel::config::parse_client(text, origin);
    let _ = plait_tunnel::config::parse_server(text, origin);
});
