//! Per-path sender state and estimators.

mod view;

pub use view::{PathState, PathView};
