//! Fuzz target: arbitrary bytes as the client's link signal file (`/proc/net/wireless`'s
//! format, read the way the daemon reads it: lossy UTF-8). Checks: no panic, at most
//! `MAX_ROWS` rows, every signal within 0 to 1.

#![no_main]

use libfuzzer_sys::fuzz_target;
use plait_tunnel::mobility::signal::{MAX_ROWS, parse_wireless};

fuzz_target!(|data: &[u8]| {
    let table = parse_wireless(&String::from_utf8_lossy(data));
    assert!(table.rows.len() <= MAX_ROWS);
    assert!(table.rows.iter().all(|r| (0.0..=1.0).contains(&r.signal)));
});
