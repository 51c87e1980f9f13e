//! Fuzz target: a reply on the status socket, parsed as `plait status` does. Checks: no
//! panic, a typed error or a snapshot.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = plait_tunnel::control::status::parse_reply(std::path::Path::new("/fuzz"), data);
});
