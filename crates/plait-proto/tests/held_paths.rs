//! Held paths (`Session::set_path_held`, docs/protocol.md#path-validation): the tunnel's
//! server holds a path until its address is validated. A held path carries no data while
//! held, and carries its share once let go; what waits while every path is held is sent
//! when one is let go.

mod support;

use plait_proto::reorder::ReorderKind;
use plait_proto::{Config, PathId, Time};
use support::{Pair, lossless as link, steady};

fn pair() -> Pair {
    let config = Config {
        reorder: ReorderKind::Bmp,
        ..Config::default()
    };
    // Path 1 is the faster one: unheld, the scheduler uses it most.
    Pair::new(
        config.clone(),
        config,
        &[link(20.0, 20), link(40.0, 10)],
        &[None, None],
        5,
    )
}

#[test]
fn a_held_path_carries_no_data_until_it_is_let_go() {
    let mut pair = pair();
    pair.a.set_path_held(Time::ZERO, PathId(1), true);
    assert!(pair.a.is_path_held(PathId(1)) && !pair.a.is_path_held(PathId(0)));
    let mut traffic = steady(Time::from_millis(6000));
    pair.run_until(Time::from_millis(3000), &mut traffic);
    let held = pair.link_delivered_bytes(0);
    let first = pair.take_delivered(0).len();
    assert!(first > 2500, "{first}");
    // Probes only while held: under 1 % of what path 0 carried.
    assert!(
        held[1] * 100 < held[0],
        "the held path carried data: {held:?}"
    );

    pair.a.set_path_held(pair.now, PathId(1), false);
    pair.run_until(Time::from_millis(6500), &mut traffic);
    let after = pair.link_delivered_bytes(0);
    let (p0, p1) = (after[0] - held[0], after[1] - held[1]);
    assert!(
        p1 > p0,
        "let go, the faster path carries most: {p0} and {p1} bytes"
    );
    let second = pair.take_delivered(0).len();
    assert_eq!(first + second, 5800, "every packet arrived");
}

#[test]
fn what_waits_while_every_path_is_held_goes_when_one_is_let_go() {
    let mut pair = pair();
    for p in [PathId(0), PathId(1)] {
        pair.a.set_path_held(Time::ZERO, p, true);
    }
    let mut traffic = steady(Time::from_millis(400));
    pair.run_until(Time::from_millis(500), &mut traffic);
    assert_eq!(
        pair.take_delivered(0).len(),
        0,
        "nothing is sent on held paths"
    );
    pair.a.set_path_held(pair.now, PathId(0), false);
    pair.run_until(Time::from_millis(4000), &mut traffic);
    // They waited up to 300 ms, so the send queue's rules (docs/protocol.md#send-queue)
    // drop a few of the oldest, and the burst that follows may overflow the link's queue;
    // the rest arrive.
    let arrived = pair.take_delivered(0).len();
    let st = pair.a.stats();
    assert!(arrived >= 190, "the packets that waited arrive: {arrived}");
    assert_eq!(
        st.inner_sent + st.inner_codel_dropped + st.inner_stale,
        200,
        "each one was sent or dropped by rule: {st:?}"
    );
}
