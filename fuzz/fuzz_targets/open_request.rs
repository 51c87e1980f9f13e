//! Fuzz target: a stream-mode open request (docs/protocol.md#stream-mode-open-request),
//! decoded as the server's relay does. Checks: no panic; whatever decodes re-encodes to the
//! same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use plait_tunnel::socks5::Target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Target::decode(data) {
        let mut out = Vec::new();
        t.encode(&mut out);
        assert_eq!(out, data);
    }
});
