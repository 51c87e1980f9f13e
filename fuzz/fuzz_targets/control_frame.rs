//! Fuzz target: decode arbitrary bytes as the opened body of a path-control message
//! (docs/protocol.md#path-validation, #binding, #registration), as both endpoints do after
//! authentication. Checks the decoders' promises: no panic on any input, a registration
//! never holds more entries than there can be paths, and what decodes re-encodes to the
//! same bytes (one encoding per registration, so nothing is lost or reinterpreted).

#![no_main]

use libfuzzer_sys::fuzz_target;
use plait_tunnel::message::ControlFrame;
use plait_tunnel::registration::{MAX_PATHS, encode};

fuzz_target!(|data: &[u8]| {
    match ControlFrame::decode(data) {
        Ok(ControlFrame::Registration { kind, registration }) => {
            assert!(registration.entries.len() <= MAX_PATHS);
            assert_eq!(encode(kind, &registration), data);
        }
        Ok(ControlFrame::Path(frame)) => assert_eq!(&frame.encode()[..], data),
        Err(_) => {}
    }
});
