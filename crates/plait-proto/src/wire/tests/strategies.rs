//! Generators of valid representations: owned frames (every type, valid field ranges),
//! ACKs with arbitrary valid range sets and timestamps, headers and whole datagrams, plus
//! the checks that a decoded frame carries what was encoded.
//!
//! Invariant: every generated representation is valid, so encoding it must succeed.

use std::ops::RangeInclusive;

use proptest::collection::vec;
use proptest::prelude::*;

use crate::ids::{PathId, expand_seq};
use crate::wire::*;

/// An owned ACK representation for generation.
#[derive(Clone, Debug)]
pub(super) struct OwnedAck {
    path: u8,
    largest: u64,
    ack_delay_us: u64,
    largest_recv_ts_us: u32,
    ranges: Vec<RangeInclusive<u64>>,
    timestamps: Vec<(u64, u32)>,
}

impl OwnedAck {
    pub(super) fn repr(&self) -> AckRepr<'_> {
        AckRepr {
            path: PathId(self.path),
            largest: self.largest,
            ack_delay_us: self.ack_delay_us,
            largest_recv_ts_us: self.largest_recv_ts_us,
            ranges: &self.ranges,
            timestamps: &self.timestamps,
        }
    }
}

/// An owned frame representation for generation.
#[derive(Clone, Debug)]
pub(super) enum OwnedFrame {
    Data {
        global_seq: u64,
        prev_delta: u64,
        payload: Vec<u8>,
        to_end: bool,
    },
    Ack(OwnedAck),
    Probe(u32),
    ProbeAck {
        probe_id: u32,
        path: u8,
        recv_ts_us: u32,
    },
    Close {
        error_code: u64,
        reason: Vec<u8>,
    },
    Extension {
        frame_type: u8,
        body: Vec<u8>,
    },
    Padding(usize),
    Stream {
        stream_id: u64,
        offset: u64,
        fin: bool,
        data: Vec<u8>,
        to_end: bool,
    },
    StreamControl(StreamControlRepr),
}

impl OwnedFrame {
    fn stream_repr(&self) -> Option<StreamRepr<'_>> {
        match self {
            OwnedFrame::Stream {
                stream_id,
                offset,
                fin,
                data,
                to_end,
            } => Some(StreamRepr {
                stream_id: *stream_id,
                offset: *offset,
                fin: *fin,
                data,
                to_end: *to_end,
            }),
            _ => None,
        }
    }
}

impl OwnedFrame {
    pub(super) fn encoded_len(&self) -> usize {
        match self {
            OwnedFrame::Data {
                global_seq,
                prev_delta,
                payload,
                to_end,
            } => DataRepr {
                global_seq: *global_seq,
                prev_delta: *prev_delta,
                payload,
                to_end: *to_end,
            }
            .encoded_len(),
            OwnedFrame::Ack(ack) => ack.repr().encoded_len(),
            OwnedFrame::Probe(id) => ProbeRepr { probe_id: *id }.encoded_len(),
            OwnedFrame::ProbeAck { .. } => 10,
            OwnedFrame::Close { error_code, reason } => CloseRepr {
                error_code: *error_code,
                reason,
            }
            .encoded_len(),
            OwnedFrame::Extension { frame_type, body } => ExtensionRepr {
                frame_type: *frame_type,
                body,
            }
            .encoded_len(),
            OwnedFrame::Padding(len) => *len,
            OwnedFrame::Stream { .. } => self.stream_repr().map_or(0, |r| r.encoded_len()),
            OwnedFrame::StreamControl(c) => c.encoded_len(),
        }
    }

    pub(super) fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        match self {
            OwnedFrame::Data {
                global_seq,
                prev_delta,
                payload,
                to_end,
            } => DataRepr {
                global_seq: *global_seq,
                prev_delta: *prev_delta,
                payload,
                to_end: *to_end,
            }
            .encode(w),
            OwnedFrame::Ack(ack) => ack.repr().encode(w),
            OwnedFrame::Probe(id) => ProbeRepr { probe_id: *id }.encode(w),
            OwnedFrame::ProbeAck {
                probe_id,
                path,
                recv_ts_us,
            } => ProbeAckRepr {
                probe_id: *probe_id,
                path: PathId(*path),
                recv_ts_us: *recv_ts_us,
            }
            .encode(w),
            OwnedFrame::Close { error_code, reason } => CloseRepr {
                error_code: *error_code,
                reason,
            }
            .encode(w),
            OwnedFrame::Extension { frame_type, body } => ExtensionRepr {
                frame_type: *frame_type,
                body,
            }
            .encode(w),
            OwnedFrame::Padding(len) => encode_padding(w, *len),
            OwnedFrame::Stream { .. } => match self.stream_repr() {
                Some(r) => r.encode(w),
                None => Ok(()),
            },
            OwnedFrame::StreamControl(c) => c.encode(w),
        }
    }

    /// Checks that `frame` decoded from this representation carries the same fields.
    pub(super) fn check(&self, frame: &Frame<'_>) -> Result<(), TestCaseError> {
        match (self, frame) {
            (
                OwnedFrame::Data {
                    global_seq,
                    prev_delta,
                    payload,
                    ..
                },
                Frame::Data(d),
            ) => {
                prop_assert_eq!(d.global_seq, *global_seq as u32);
                prop_assert_eq!(d.prev_delta, *prev_delta);
                prop_assert_eq!(d.payload, &payload[..]);
            }
            (OwnedFrame::Ack(a), Frame::Ack(d)) => check_ack(a, d)?,
            (OwnedFrame::Probe(id), Frame::Probe(p)) => prop_assert_eq!(p.probe_id, *id),
            (
                OwnedFrame::ProbeAck {
                    probe_id,
                    path,
                    recv_ts_us,
                },
                Frame::ProbeAck(p),
            ) => {
                let want = ProbeAckFrame {
                    probe_id: *probe_id,
                    path: PathId(*path),
                    recv_ts_us: *recv_ts_us,
                };
                prop_assert_eq!(*p, want);
            }
            (OwnedFrame::Close { error_code, reason }, Frame::Close(c)) => {
                prop_assert_eq!(c.error_code, *error_code);
                prop_assert_eq!(c.reason, &reason[..]);
            }
            (
                OwnedFrame::Extension { frame_type, body },
                Frame::Extension {
                    frame_type: t,
                    body: b,
                },
            ) => {
                prop_assert_eq!(t, frame_type);
                prop_assert_eq!(*b, &body[..]);
            }
            (OwnedFrame::Padding(_), Frame::Padding) => {}
            (
                OwnedFrame::Stream {
                    stream_id,
                    offset,
                    fin,
                    data,
                    ..
                },
                Frame::Stream(f),
            ) => {
                prop_assert_eq!(f.stream_id, *stream_id);
                prop_assert_eq!(f.offset, *offset);
                prop_assert_eq!(f.fin, *fin);
                prop_assert_eq!(f.data, &data[..]);
            }
            (OwnedFrame::StreamControl(c), got) => {
                let want = match *c {
                    StreamControlRepr::ResetStream(r) => Frame::ResetStream(r),
                    StreamControlRepr::MaxData(m) => Frame::MaxData(m),
                    StreamControlRepr::MaxStreamData(m) => Frame::MaxStreamData(m),
                    StreamControlRepr::MaxStreams(m) => Frame::MaxStreams(m),
                };
                prop_assert_eq!(*got, want);
            }
            (want, got) => prop_assert!(false, "encoded {want:?}, decoded {got:?}"),
        }
        Ok(())
    }
}

pub(super) fn check_ack(a: &OwnedAck, d: &AckFrame<'_>) -> Result<(), TestCaseError> {
    prop_assert_eq!(d.path(), PathId(a.path));
    prop_assert_eq!(d.largest(), a.largest as u32);
    prop_assert_eq!(d.ack_delay_us(), a.ack_delay_us);
    prop_assert_eq!(d.largest_recv_ts_us(), a.largest_recv_ts_us);
    prop_assert_eq!(d.range_count(), a.ranges.len());
    prop_assert_eq!(d.timestamp_count(), a.timestamps.len());
    // The receiver expands `largest` near what it expects, as the session will.
    let largest_full = expand_seq(a.largest.saturating_sub(1000), d.largest());
    prop_assert_eq!(largest_full, a.largest);
    prop_assert_eq!(d.ranges(largest_full).collect::<Vec<_>>(), a.ranges.clone());
    prop_assert_eq!(
        d.timestamps(largest_full).collect::<Vec<_>>(),
        a.timestamps.clone()
    );
    Ok(())
}

/// Sizes skewed toward small values, with some large ones.
fn size() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0u64..4, 4 => 0u64..300, 1 => 0u64..(1 << 29)]
}

pub(super) fn ack() -> impl Strategy<Value = OwnedAck> {
    let largest = prop_oneof![0u64..100, 0u64..(1 << 40), Just(u64::MAX)];
    let delay = prop_oneof![0u64..1000, 0..=VARINT_MAX];
    (
        0u8..16,
        largest,
        delay,
        any::<u32>(),
        size(),
        vec((size(), size()), 0..40),
        vec((0u64..(1 << 31), any::<u32>()), 0..40),
    )
        .prop_map(
            |(path, largest, ack_delay_us, largest_recv_ts_us, first, pairs, ts)| {
                let floor = largest.saturating_sub(MAX_SEQ_SPAN - 1);
                let mut ranges = vec![largest.saturating_sub(first).max(floor)..=largest];
                let mut lo = largest.saturating_sub(first).max(floor);
                for (gap, len) in pairs {
                    let Some(hi) = lo.checked_sub(gap + 2).filter(|&hi| hi >= floor) else {
                        break;
                    };
                    lo = hi.saturating_sub(len).max(floor);
                    ranges.push(lo..=hi);
                }
                let window = largest.min(MAX_SEQ_SPAN - 1) + 1;
                let timestamps = ts
                    .into_iter()
                    .map(|(off, t)| (largest - off % window, t))
                    .collect();
                OwnedAck {
                    path,
                    largest,
                    ack_delay_us,
                    largest_recv_ts_us,
                    ranges,
                    timestamps,
                }
            },
        )
}

fn data(to_end: bool) -> impl Strategy<Value = OwnedFrame> {
    let prev_delta = prop_oneof![0u64..100, 0..=MAX_PREV_DELTA];
    (any::<u64>(), prev_delta, vec(any::<u8>(), 0..64)).prop_map(
        move |(global_seq, prev_delta, payload)| OwnedFrame::Data {
            global_seq,
            prev_delta,
            payload,
            to_end,
        },
    )
}

fn stream(to_end: bool) -> impl Strategy<Value = OwnedFrame> {
    let offset = prop_oneof![0u64..100_000, 0..=(MAX_STREAM_OFFSET - 64)];
    (
        0..=VARINT_MAX,
        offset,
        any::<bool>(),
        vec(any::<u8>(), 0..64),
    )
        .prop_map(move |(stream_id, offset, fin, data)| OwnedFrame::Stream {
            stream_id,
            offset,
            fin,
            data,
            to_end,
        })
}

fn stream_control() -> impl Strategy<Value = OwnedFrame> {
    let v = || prop_oneof![0u64..1000, 0..=VARINT_MAX];
    prop_oneof![
        (v(), v(), v()).prop_map(|(stream_id, error_code, final_size)| {
            StreamControlRepr::ResetStream(ResetStreamFrame {
                stream_id,
                error_code,
                final_size,
            })
        }),
        v().prop_map(StreamControlRepr::MaxData),
        (v(), v()).prop_map(|(stream_id, maximum)| {
            StreamControlRepr::MaxStreamData(MaxStreamDataFrame { stream_id, maximum })
        }),
        v().prop_map(StreamControlRepr::MaxStreams),
    ]
    .prop_map(OwnedFrame::StreamControl)
}

/// Frames that may stand anywhere in a datagram.
pub(super) fn middle_frame() -> impl Strategy<Value = OwnedFrame> {
    prop_oneof![
        data(false),
        ack().prop_map(OwnedFrame::Ack),
        any::<u32>().prop_map(OwnedFrame::Probe),
        (any::<u32>(), 0u8..16, any::<u32>()).prop_map(|(probe_id, path, recv_ts_us)| {
            OwnedFrame::ProbeAck {
                probe_id,
                path,
                recv_ts_us,
            }
        }),
        (0..=VARINT_MAX, vec(any::<u8>(), 0..40))
            .prop_map(|(error_code, reason)| OwnedFrame::Close { error_code, reason }),
        (0x10u8..=0x3f, vec(any::<u8>(), 0..40))
            .prop_map(|(frame_type, body)| OwnedFrame::Extension { frame_type, body }),
        stream(false),
        stream_control(),
    ]
}

/// Frames that run to the end of the datagram.
fn last_frame() -> impl Strategy<Value = OwnedFrame> {
    prop_oneof![
        data(true),
        stream(true),
        (1usize..40).prop_map(OwnedFrame::Padding)
    ]
}

pub(super) fn header() -> impl Strategy<Value = Header> {
    (0u8..16, any::<u32>(), any::<u32>()).prop_map(|(path, path_seq, timestamp_us)| Header {
        path: PathId(path),
        path_seq,
        timestamp_us,
    })
}

pub(super) fn datagram() -> impl Strategy<Value = (Header, Vec<OwnedFrame>)> {
    (
        header(),
        vec(middle_frame(), 0..6),
        proptest::option::of(last_frame()),
    )
        .prop_filter("at least one frame", |(_, m, l)| {
            !m.is_empty() || l.is_some()
        })
        .prop_map(|(h, mut frames, last)| {
            frames.extend(last);
            (h, frames)
        })
}

pub(super) fn encode_datagram(h: &Header, frames: &[OwnedFrame]) -> Vec<u8> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut w = Writer::new(&mut buf);
    h.write_to(&mut w).unwrap();
    for f in frames {
        let before = w.len();
        f.encode(&mut w).unwrap();
        assert_eq!(w.len() - before, f.encoded_len(), "{f:?}");
    }
    w.written().to_vec()
}
