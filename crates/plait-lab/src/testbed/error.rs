//! Why a change to a running test bed is refused; shared by the settings and the loss
//! models they carry, and shown to the user as is (every message names the option).

/// A change that cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SetError {
    /// No such path.
    #[error("path {path} does not exist: this test bed has paths 0 to {last}")]
    NoPath {
        /// The path asked for.
        path: usize,
        /// The last path.
        last: usize,
    },
    /// Nothing to change.
    #[error(
        "nothing to set: give at least one of --rate, --unshaped, --queue-ms, --queue-bytes, \
         --delay, --loss, --burst-loss, --blackhole, --link"
    )]
    Nothing,
    /// `--dir` without a delay or loss change.
    #[error(
        "--dir only applies to --delay, --loss and --burst-loss (rate, queue, blackhole and link are always both directions)"
    )]
    DirWithoutModel,
    /// A value out of range.
    #[error("{flag}: {message}")]
    Value {
        /// The option.
        flag: String,
        /// What is wrong.
        message: String,
    },
}
