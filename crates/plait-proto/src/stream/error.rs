//! Stream errors: [`StreamError`] for what the local application asks wrongly,
//! [`StreamViolation`] for what the peer does wrongly (the session closes with its code and
//! reason; docs/protocol.md#stream-errors).

use thiserror::Error;

use super::StreamId;

/// Why a stream call from the application failed. Nothing changed.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum StreamError {
    /// No such stream (never opened, or closed and forgotten).
    #[error("{0} does not exist (never opened, or already closed)")]
    Unknown(StreamId),
    /// The stream was finished: nothing more can be written.
    #[error("{0} is finished: nothing more can be written")]
    Finished(StreamId),
    /// The stream was reset (by either end).
    #[error("{0} was reset")]
    Reset(StreamId),
    /// The peer allows no more streams now (MAX_STREAMS); retry when one closes.
    #[error("the peer allows no more streams now ({open} of {allowed} opened)")]
    TooManyStreams {
        /// Streams this end has opened in all.
        open: u64,
        /// How many the peer allows in all.
        allowed: u64,
    },
    /// The open request is longer than [`super::MAX_OPEN_REQUEST`].
    #[error("open request of {0} bytes exceeds the 1024-byte limit")]
    RequestTooLarge(usize),
    /// The session is closed or closing.
    #[error("session closed")]
    Closed,
}

/// A peer broke the stream rules; the session closes with [`StreamViolation::code`].
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum StreamViolation {
    /// The peer sent beyond a stream's or the session's flow-control limit.
    #[error("{0}: data beyond the flow-control limit")]
    FlowControl(StreamId),
    /// Data beyond a stream's final size, or a final size that changed.
    #[error("{0}: final size violated")]
    FinalSize(StreamId),
    /// The peer opened more streams than MAX_STREAMS allowed it.
    #[error("{0}: beyond the peer's stream limit")]
    StreamLimit(StreamId),
    /// A frame names a stream of this end's that this end never opened.
    #[error("{0}: names a stream this end never opened")]
    NotOpened(StreamId),
    /// The stream's open request is longer than allowed or malformed.
    #[error("{0}: malformed open request")]
    BadOpenRequest(StreamId),
    /// The peer's frames left more separate pieces waiting than the stream's window
    /// allows (tiny frames with gaps: the bookkeeping, not the bytes, would grow).
    #[error("{0}: too many separate pieces waiting")]
    TooFragmented(StreamId),
}

impl StreamViolation {
    /// The CLOSE error code (docs/protocol.md#stream-errors).
    pub const fn code(&self) -> u64 {
        match self {
            StreamViolation::FlowControl(_) => 0x103,
            StreamViolation::FinalSize(_) => 0x106,
            StreamViolation::StreamLimit(_) => 0x104,
            StreamViolation::NotOpened(_) => 0x105,
            StreamViolation::BadOpenRequest(_) => 0x107,
            StreamViolation::TooFragmented(_) => 0x108,
        }
    }
}
