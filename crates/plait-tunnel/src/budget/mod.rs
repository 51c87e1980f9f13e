//! Monthly byte budgets of metered paths (docs/tunnel-config.md#budget,
//! docs/protocol.md#overflow).
//!
//! A `[[path]]` with `cost = "metered"` and `budget = "20 GB"` may move that many outer
//! UDP bytes (sent and received, headers included) per period; a period runs from
//! `budget_reset_day` of one month (UTC, 00:00) to the same day of the next. Once the
//! count reaches the budget the path becomes a backup until the next period.
//!
//! This module is the accounting and its calendar, with no clock and no file: the day is
//! an argument ([`today_utc`] turns the daemon's wall clock into one), and the count is
//! saved and restored as a [`Saved`] by [`state_file`].
//!
//! Invariants: `used` only grows within a period and is 0 at the start of each; a saved
//! count from an earlier period (or one dated after today: a clock set back) is not
//! carried over; the reset day is 1 to 28, so every month has it.

pub mod state_file;

use jiff::civil::Date;

/// Latest `budget_reset_day`: every month has a 28th.
pub const MAX_RESET_DAY: u8 = 28;

/// A path's budget as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    /// Outer UDP bytes (sent and received) allowed per period; above 0.
    pub bytes: u64,
    /// Day of the month (UTC) a period begins, 1 to [`MAX_RESET_DAY`].
    pub reset_day: u8,
}

/// What is kept across restarts: the period the count belongs to and the count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Saved {
    /// First day of the period.
    pub period: Date,
    /// Bytes counted in it.
    pub used: u64,
}

/// How a budget began (for the start-up log line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumed {
    /// Nothing was saved: counting from 0.
    Fresh,
    /// The saved count of this period goes on.
    Continued,
    /// What was saved belongs to another period: counting from 0.
    NewPeriod,
}

/// One path's budget and its count in the current period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    config: BudgetConfig,
    period: Date,
    used: u64,
}

impl Budget {
    /// The budget on `today`, going on from `saved` if that is of today's period.
    pub fn new(config: BudgetConfig, today: Date, saved: Option<Saved>) -> (Budget, Resumed) {
        let config = BudgetConfig {
            reset_day: config.reset_day.clamp(1, MAX_RESET_DAY),
            ..config
        };
        let period = period_start(today, config.reset_day);
        let (used, resumed) = match saved {
            None => (0, Resumed::Fresh),
            Some(s) if s.period == period => (s.used, Resumed::Continued),
            Some(_) => (0, Resumed::NewPeriod),
        };
        (
            Budget {
                config,
                period,
                used,
            },
            resumed,
        )
    }

    /// Counts `bytes` more on `today`. Returns true if a new period began first (the count
    /// started again from 0).
    pub fn add(&mut self, today: Date, bytes: u64) -> bool {
        let rolled = self.roll(today);
        self.used = self.used.saturating_add(bytes);
        rolled
    }

    /// Starts a new period if `today` is past the current one. Returns whether it did.
    pub fn roll(&mut self, today: Date) -> bool {
        let period = period_start(today, self.config.reset_day);
        if period > self.period {
            self.period = period;
            self.used = 0;
            return true;
        }
        false
    }

    /// The count reached the budget.
    pub fn spent(&self) -> bool {
        self.used >= self.config.bytes
    }

    /// Bytes counted in the current period.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The budget as configured.
    pub fn config(&self) -> BudgetConfig {
        self.config
    }

    /// The day the next period begins.
    pub fn next_reset(&self) -> Date {
        next_period(self.period)
    }

    /// What to save.
    pub fn saved(&self) -> Saved {
        Saved {
            period: self.period,
            used: self.used,
        }
    }

    /// `used 1.2 GB of 20 GB (resets 2025-07-01)`, as `plait status` shows it.
    pub fn status(&self) -> String {
        format!(
            "used {} of {} (resets {})",
            format_bytes(self.used),
            format_bytes(self.config.bytes),
            self.next_reset()
        )
    }
}

/// The first day of the period `today` is in: `reset_day` of this month if that is not
/// after today, else of the month before.
pub fn period_start(today: Date, reset_day: u8) -> Date {
    let day = i8::try_from(reset_day.clamp(1, MAX_RESET_DAY)).unwrap_or(1);
    let this_month = Date::new(today.year(), today.month(), day).unwrap_or(today);
    if this_month <= today {
        this_month
    } else {
        this_month
            .checked_sub(jiff::Span::new().months(1))
            .unwrap_or(this_month)
    }
}

/// The first day of the period after the one that begins on `period` (same day of the
/// next month: the day is at most 28, so it exists).
pub fn next_period(period: Date) -> Date {
    period
        .checked_add(jiff::Span::new().months(1))
        .unwrap_or(period)
}

/// The UTC date of `wall_ns` nanoseconds after the Unix epoch (the daemon's wall clock).
pub fn today_utc(wall_ns: u64) -> Date {
    let secs = i64::try_from(wall_ns / 1_000_000_000).unwrap_or(i64::MAX);
    jiff::Timestamp::from_second(secs)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .date()
}

/// Bytes in SI units with three significant digits at most: `999 B`, `1.5 kB`, `20 GB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if value < 10.0 && value.fract() >= 0.05 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests;
