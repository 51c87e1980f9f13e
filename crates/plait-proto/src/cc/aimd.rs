//! Window bounds shared by the controllers: every window they hold goes through
//! [`clamp_window`], so it is finite and within [`min_window`]`(mss)..=`[`MAX_WINDOW`].
//!
//! Invariant: `mss` is taken within `1..=`[`MAX_MSS`] ([`sane_mss`]), so `min_window(mss)`
//! neither overflows nor exceeds [`MAX_WINDOW`].

use super::{MAX_WINDOW, min_window};

/// Largest datagram size the controllers take at face value (the largest UDP payload);
/// a larger `mss` is a caller's bug, clamped rather than allowed to overflow the windows.
pub(super) const MAX_MSS: u64 = 65_535;

/// `mss` clamped to `1..=MAX_MSS` (see the module invariants).
pub(super) fn sane_mss(mss: u64) -> u64 {
    mss.clamp(1, MAX_MSS)
}

/// `w` within [`min_window`]`(mss)..=`[`MAX_WINDOW`] for a [`sane_mss`] `mss`; NaN gives
/// the minimum.
pub(super) fn clamp_window(w: f64, mss: u64) -> f64 {
    let lo = min_window(sane_mss(mss)) as f64;
    if w.is_nan() {
        lo
    } else {
        w.clamp(lo, MAX_WINDOW as f64)
    }
}
