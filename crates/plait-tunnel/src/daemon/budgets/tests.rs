use std::net::SocketAddr;

use jiff::civil::date;

use super::*;
use crate::budget::BudgetConfig;
use crate::endpoint::{Now, Outputs};
use crate::registration::{CostClass, PathAttributes};

/// An endpoint stand-in: path names per id and the roles it was given.
#[derive(Default)]
struct Fake {
    names: Vec<Option<String>>,
    backup: Vec<bool>,
}

impl PathRoles for Fake {
    fn path_name(&self, id: usize) -> Option<&str> {
        self.names.get(id)?.as_deref()
    }
    fn set_path_backup(&mut self, _: Now, id: usize, backup: bool, _: &mut impl Outputs) {
        self.backup[id] = backup;
    }
}

struct Nowhere;

impl Outputs for Nowhere {
    fn send_udp(&mut self, _: usize, _: SocketAddr, _: &[u8]) {}
    fn write_tun(&mut self, _: &[u8]) {}
}

fn path(name: &str, budget: Option<u64>) -> PathConfig {
    PathConfig {
        name: name.into(),
        server: crate::config::ServerAddr::Ip("192.0.2.1:7744".parse().unwrap()),
        bind: None,
        device: None,
        devices: None,
        mtu: 1500,
        rate_mbit: None,
        backup: false,
        attributes: PathAttributes {
            cost: if budget.is_some() {
                CostClass::Metered
            } else {
                CostClass::Unmetered
            },
            ..PathAttributes::default()
        },
        budget: budget.map(|bytes| BudgetConfig {
            bytes,
            reset_day: 1,
        }),
    }
}

/// Wall-clock nanoseconds of midnight UTC on `d`.
fn wall(d: jiff::civil::Date) -> u64 {
    let ts = d
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .unwrap()
        .timestamp();
    u64::try_from(ts.as_second()).unwrap() * 1_000_000_000
}

fn at(mono_s: u64, d: jiff::civil::Date) -> Now {
    Now {
        mono: Time::from_millis(mono_s * 1000),
        wall_ns: wall(d),
    }
}

#[test]
fn a_spent_budget_makes_its_paths_backups_persists_and_resets_next_month() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [path("fibre", None), path("lte", Some(10_000))];
    let june = date(2025, 6, 10);
    let mut b = Budgets::open(&paths, dir.path(), wall(june)).unwrap();
    let mut ep = Fake {
        names: vec![
            Some("fibre".into()),
            Some("lte".into()),
            Some("lte:wwan1".into()),
        ],
        backup: vec![false; 3],
    };
    b.count(0, 50_000); // the unmetered path: not counted anywhere
    b.count(1, 6_000);
    b.count(2, 3_000);
    b.tick(at(1, june), &mut ep, &mut Nowhere);
    assert_eq!(ep.backup, [false, false, false]);
    let s = b.status();
    assert_eq!((s.len(), s[0].used, s[0].spent), (1, 9_000, false));
    b.count(2, 1_000);
    b.tick(at(2, june), &mut ep, &mut Nowhere);
    assert_eq!(ep.backup, [false, true, true], "every path of the budget");
    b.save();
    drop(b);

    // A restart in the same month goes on from the saved count: still spent.
    let mut b = Budgets::open(&paths, dir.path(), wall(date(2025, 6, 30))).unwrap();
    assert_eq!(b.status()[0].used, 10_000);
    let mut ep2 = Fake {
        backup: vec![false; 3],
        ..ep
    };
    b.tick(at(0, date(2025, 6, 30)), &mut ep2, &mut Nowhere);
    assert_eq!(ep2.backup, [false, true, true]);

    // July: a new period, the paths go back to their configured role.
    b.tick(at(3, date(2025, 7, 1)), &mut ep2, &mut Nowhere);
    assert_eq!(ep2.backup, [false, false, false]);
    let s = &b.status()[0];
    assert_eq!(
        (s.used, s.spent, s.resets.as_str()),
        (0, false, "2025-08-01")
    );
    b.save();
    drop(b);
    let b = Budgets::open(&paths, dir.path(), wall(date(2025, 7, 2))).unwrap();
    assert_eq!(b.status()[0].used, 0);
}

/// A budget that runs out is spent at once, not at the next tick: at 40 Mbit/s a tick
/// (250 ms) is 1.25 MB beyond the budget.
#[test]
fn the_byte_that_reaches_the_budget_makes_the_tick_due_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [path("fibre", None), path("lte", Some(10_000))];
    let june = date(2025, 6, 10);
    let mut b = Budgets::open(&paths, dir.path(), wall(june)).unwrap();
    let mut ep = Fake {
        names: vec![Some("fibre".into()), Some("lte".into())],
        backup: vec![false; 2],
    };
    // The first tick learns which path belongs to which budget.
    b.tick(at(1, june), &mut ep, &mut Nowhere);
    let next = b.next_tick();
    assert_eq!(next, Time::from_millis(1000) + BUDGET_TICK);
    b.count(0, 50_000); // unmetered: no budget to run out
    b.count(1, 9_999);
    assert_eq!(b.next_tick(), next, "below the budget: the tick waits");
    b.count(1, 1);
    assert!(
        b.next_tick() <= Time::from_millis(1000),
        "the budget is reached"
    );
    let soon = Now {
        mono: Time::from_millis(1001),
        wall_ns: wall(june),
    };
    b.tick(soon, &mut ep, &mut Nowhere);
    assert_eq!(ep.backup, [false, true]);
    assert!(b.status()[0].spent);
    // Spent: more bytes count but no longer hurry the tick.
    let next = b.next_tick();
    b.count(1, 5_000);
    assert_eq!(b.next_tick(), next);
    assert_eq!(b.status()[0].used, 10_000, "counted at the next tick");
}

#[test]
fn an_unwritable_state_directory_counts_in_memory_and_no_budget_no_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let paths = [path("lte", Some(1_000))];
    // The state directory is a file: the budget still counts.
    let mut b = Budgets::open(&paths, &file, wall(date(2025, 6, 1))).unwrap();
    let mut ep = Fake {
        names: vec![Some("lte".into())],
        backup: vec![false],
    };
    b.count(0, 2_000);
    b.tick(at(20, date(2025, 6, 1)), &mut ep, &mut Nowhere);
    b.save();
    let s = &b.status()[0];
    assert!(s.spent && !s.saved, "{s:?}");
    assert_eq!(ep.backup, [true]);
    assert!(Budgets::open(&[path("fibre", None)], dir.path(), 0).is_none());
}
