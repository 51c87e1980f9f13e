//! Property tests of the whole codec (proptest): generated representations round-trip
//! through encode and decode, and arbitrary or mutated bytes never panic the decoder.
//!
//! Invariants checked: decode(encode(repr)) gives back every field (sequence numbers
//! truncated to 32 bits, ACK ranges and timestamps exactly); `encoded_len` is what
//! `encode` writes; `validate` agrees with iterating `frames`; nothing panics.

mod never_panic;
mod round_trip;
mod strategies;
