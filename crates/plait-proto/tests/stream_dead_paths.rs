//! A regression a hostile review found: a flow-control update due while every path is down
//! used to go onto a down path, where it was never resolved (a down path neither
//! acknowledges nor declares losses), so it was never sent again and the writer waited for
//! credit for ever although another path came back. Control frames now wait for a usable
//! path.

mod support;

use std::time::Duration;

use plait_proto::{Config, Event, Side, StreamEvent, StreamId, Time};
use support::{LinkSpec, Pair};

const MS: Duration = Duration::from_millis(1);

fn link(mbit: f64, one_way_ms: u64) -> LinkSpec {
    let rate = mbit * 1e6 / 8.0;
    LinkSpec {
        rate,
        delay: MS * one_way_ms as u32,
        loss: 0.0,
        queue_bytes: (rate * 0.1) as usize,
    }
}

/// Returns bytes b read by the end.
fn scenario(revive: usize) -> (u64, u64) {
    let paths = [link(8.0, 10), link(8.0, 20)];
    let a = Config {
        side: Side::Client,
        ..Config::default()
    };
    let b = Config {
        side: Side::Server,
        ..Config::default()
    };
    let mut pair = Pair::new(a, b, &paths, &[], 7);
    let total: u64 = 2 << 20;
    let id = pair.a.open_stream(pair.now, b"req").unwrap();
    let mut written = 0u64;
    let mut read = 0u64;
    let mut reading = false;
    let mut b_id: Option<StreamId> = None;
    let mut buf = vec![0u8; 1 << 16];
    let data = vec![0x5au8; 1 << 16];
    let mut t = pair.now;
    let step = |pair: &mut Pair,
                t: &mut Time,
                until: Time,
                written: &mut u64,
                read: &mut u64,
                reading: bool,
                b_id: &mut Option<StreamId>,
                buf: &mut Vec<u8>| {
        while *t < until {
            *t += MS;
            pair.run_until(*t, |_| None);
            let now = pair.now;
            while *written < total {
                let n = (total - *written).min(data.len() as u64) as usize;
                let k = pair.a.stream_write(now, id, &data[..n]).unwrap();
                *written += k as u64;
                if k < n {
                    break;
                }
            }
            for e in pair.take_events(1) {
                if let Event::Stream(StreamEvent::Opened { id, .. }) = e {
                    *b_id = Some(id);
                }
            }
            pair.take_events(0);
            if reading && let Some(bid) = *b_id {
                loop {
                    let r = pair.b.stream_read(now, bid, buf).unwrap();
                    *read += r.len as u64;
                    if r.len == 0 {
                        break;
                    }
                }
            }
            pair.drive_now();
        }
    };
    // 1. a fills b's windows; b does not read yet.
    step(
        &mut pair,
        &mut t,
        Time::from_millis(2_000),
        &mut written,
        &mut read,
        reading,
        &mut b_id,
        &mut buf,
    );
    assert!(b_id.is_some());
    // 2. Both paths die, both ways; both ends see them down.
    for dir in 0..2 {
        for p in 0..2 {
            pair.blackhole[dir][p] = true;
        }
    }
    step(
        &mut pair,
        &mut t,
        Time::from_millis(8_000),
        &mut written,
        &mut read,
        reading,
        &mut b_id,
        &mut buf,
    );
    // 3. b's application reads what arrived: flow-control updates are due while no path
    //    is usable.
    reading = true;
    step(
        &mut pair,
        &mut t,
        Time::from_millis(8_100),
        &mut written,
        &mut read,
        reading,
        &mut b_id,
        &mut buf,
    );
    // 4. One path comes back for good; the other stays dead (and is not removed).
    for dir in 0..2 {
        pair.blackhole[dir][revive] = false;
    }
    step(
        &mut pair,
        &mut t,
        Time::from_millis(40_000),
        &mut written,
        &mut read,
        reading,
        &mut b_id,
        &mut buf,
    );
    let views: Vec<_> = pair
        .b
        .path_views()
        .iter()
        .map(|v| (v.id, v.state))
        .collect();
    let aviews: Vec<_> = pair
        .a
        .path_views()
        .iter()
        .map(|v| (v.id, v.state))
        .collect();
    eprintln!(
        "revive {revive}: b paths {views:?}, a paths {aviews:?}, delivered a->b {:?} b->a {:?}, b stats {:?}",
        pair.link_delivered_bytes(0),
        pair.link_delivered_bytes(1),
        pair.b.path_stats(plait_proto::PathId(revive as u8)),
    );
    (read, total)
}

#[test]
fn flow_control_update_sent_on_a_dead_path_is_never_resent() {
    let results: Vec<_> = (0..2).map(scenario).collect();
    for (revive, (read, total)) in results.into_iter().enumerate() {
        // The open request (4 bytes with its length) is not counted by reads.
        assert_eq!(
            read, total,
            "path {revive} revived: b read {read} of {total} bytes in 32 s over a healthy path"
        );
    }
}
