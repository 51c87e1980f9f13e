use jiff::civil::date;

use super::state_file::{self, Loaded, SLOT_LEN, StateFile};
use super::*;

fn budget(bytes: u64, reset_day: u8) -> BudgetConfig {
    BudgetConfig { bytes, reset_day }
}

#[test]
fn periods_run_from_the_reset_day_to_the_same_day_of_the_next_month() {
    assert_eq!(period_start(date(2025, 3, 14), 1), date(2025, 3, 1));
    assert_eq!(period_start(date(2025, 3, 14), 14), date(2025, 3, 14));
    assert_eq!(period_start(date(2025, 3, 13), 14), date(2025, 2, 14));
    // Across a year, and from a short month.
    assert_eq!(period_start(date(2025, 1, 5), 28), date(2024, 12, 28));
    assert_eq!(period_start(date(2024, 2, 29), 28), date(2024, 2, 28));
    assert_eq!(next_period(date(2024, 12, 28)), date(2025, 1, 28));
    assert_eq!(next_period(date(2025, 1, 28)), date(2025, 2, 28));
    // Out-of-range days are clamped, never a panic.
    assert_eq!(period_start(date(2025, 3, 31), 31), date(2025, 3, 28));
    assert_eq!(period_start(date(2025, 3, 31), 0), date(2025, 3, 1));
}

#[test]
fn the_wall_clock_becomes_a_utc_date() {
    assert_eq!(today_utc(0), date(1970, 1, 1));
    // 2025-06-30T23:59:59Z and one second later.
    assert_eq!(today_utc(1_751_327_999_000_000_000), date(2025, 6, 30));
    assert_eq!(today_utc(1_751_328_000_000_000_000), date(2025, 7, 1));
    assert!(today_utc(u64::MAX) > date(2500, 1, 1));
}

#[test]
fn a_budget_counts_is_spent_and_starts_again_each_month() {
    let (mut b, resumed) = Budget::new(budget(1000, 1), date(2025, 6, 10), None);
    assert_eq!(resumed, Resumed::Fresh);
    assert!(!b.add(date(2025, 6, 10), 600));
    assert!(!b.spent());
    assert!(!b.add(date(2025, 6, 30), 400));
    assert!(b.spent());
    assert_eq!(b.status(), "used 1 kB of 1 kB (resets 2025-07-01)");
    // A new month: counting from 0 again.
    assert!(b.add(date(2025, 7, 1), 10));
    assert_eq!(b.used(), 10);
    assert!(!b.spent());
    assert_eq!(b.next_reset(), date(2025, 8, 1));
    // The clock set back a month changes nothing (no period before the current one).
    assert!(!b.roll(date(2025, 6, 15)));
    assert_eq!(b.used(), 10);
}

#[test]
fn a_saved_count_goes_on_only_in_its_own_period() {
    let saved = Saved {
        period: date(2025, 6, 1),
        used: 700,
    };
    let (b, r) = Budget::new(budget(1000, 1), date(2025, 6, 20), Some(saved));
    assert_eq!((b.used(), r), (700, Resumed::Continued));
    let (b, r) = Budget::new(budget(1000, 1), date(2025, 7, 2), Some(saved));
    assert_eq!((b.used(), r), (0, Resumed::NewPeriod));
    // Another reset day puts today in another period: not carried over either.
    let (b, r) = Budget::new(budget(1000, 15), date(2025, 6, 20), Some(saved));
    assert_eq!((b.used(), r), (0, Resumed::NewPeriod));
}

#[test]
fn sizes_read_as_people_write_them() {
    assert_eq!(format_bytes(999), "999 B");
    assert_eq!(format_bytes(1500), "1.5 kB");
    assert_eq!(format_bytes(20_000_000_000), "20 GB");
    assert_eq!(format_bytes(1_234_567_890), "1.2 GB");
    assert_eq!(format_bytes(u64::MAX), "18447 PB");
}

#[test]
fn a_slot_round_trips_and_a_damaged_one_is_refused() {
    let saved = Saved {
        period: date(2025, 6, 1),
        used: u64::MAX,
    };
    let slot = state_file::encode(u64::MAX, &saved);
    assert_eq!(slot.len(), SLOT_LEN);
    assert_eq!(state_file::decode(&slot), Some((u64::MAX, saved)));
    for i in 0..SLOT_LEN - 1 {
        let mut bad = slot;
        bad[i] ^= 0x01;
        let got = state_file::decode(&bad);
        // Flipping a padding space to `!` leaves it invalid too: nothing but the line.
        assert!(got.is_none(), "byte {i} changed, still accepted: {got:?}");
    }
    assert_eq!(state_file::decode(b"v1 1 2025-06-01 5 0"), None);
    assert_eq!(state_file::decode(&[0xff; SLOT_LEN]), None);
    assert_eq!(state_file::decode(b""), None);
}

#[test]
fn the_state_file_keeps_the_count_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    let (mut f, loaded) = StateFile::open(&state_dir, "lte");
    assert_eq!(loaded.unwrap(), Loaded::Missing);
    assert!(f.is_open());
    let mut saved = Saved {
        period: date(2025, 6, 1),
        used: 0,
    };
    for used in [10, 20, 30] {
        saved.used = used;
        assert!(f.save(&saved).unwrap());
    }
    drop(f);
    let (mut f, loaded) = StateFile::open(&state_dir, "lte");
    assert_eq!(loaded.unwrap(), Loaded::Found(saved));
    // Two slots only, whatever the number of saves.
    let len = std::fs::metadata(f.path()).unwrap().len();
    assert_eq!(len, 2 * SLOT_LEN as u64);
    // The latest slot torn by a crash: the one before it is read.
    saved.used = 40;
    f.save(&saved).unwrap();
    let path = f.path().to_owned();
    drop(f);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[SLOT_LEN..SLOT_LEN + 10].fill(0); // save 4 went to slot 0, 3 to slot 1
    bytes[10..20].fill(b'x');
    std::fs::write(&path, &bytes).unwrap();
    let (_, loaded) = StateFile::open(&state_dir, "lte");
    assert_eq!(loaded.unwrap(), Loaded::Corrupt, "both slots damaged");
}

#[test]
fn a_torn_slot_falls_back_to_the_other_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mut f, _) = StateFile::open(dir.path(), "lte");
    let at = |used| Saved {
        period: date(2025, 6, 1),
        used,
    };
    f.save(&at(100)).unwrap(); // seq 1, slot 1
    f.save(&at(200)).unwrap(); // seq 2, slot 0
    let path = f.path().to_owned();
    drop(f);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[5] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let (mut f, loaded) = StateFile::open(dir.path(), "lte");
    assert_eq!(loaded.unwrap(), Loaded::Found(at(100)));
    // The next save goes over the torn slot, and is then the latest.
    f.save(&at(300)).unwrap();
    drop(f);
    let (_, loaded) = StateFile::open(dir.path(), "lte");
    assert_eq!(loaded.unwrap(), Loaded::Found(at(300)));
}

#[test]
fn garbage_is_corrupt_and_an_unwritable_directory_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("budget-lte"), b"hello\n").unwrap();
    let (_, loaded) = StateFile::open(dir.path(), "lte");
    assert_eq!(loaded.unwrap(), Loaded::Corrupt);
    // A directory where a file is expected: cannot be opened.
    std::fs::create_dir(dir.path().join("budget-wifi")).unwrap();
    let (mut f, loaded) = StateFile::open(dir.path(), "wifi");
    assert!(loaded.is_err());
    assert!(!f.is_open());
    let saved = Saved {
        period: date(2025, 6, 1),
        used: 1,
    };
    assert!(!f.save(&saved).unwrap(), "nothing saved, no error");
    // A state directory under a file.
    let (_, loaded) = StateFile::open(&dir.path().join("budget-lte").join("x"), "lte");
    assert!(loaded.is_err());
}
