//! The client's byte budgets of metered paths, at the daemon (docs/tunnel-config.md#budget):
//! the only place that reads the wall clock for them and writes their state files.
//!
//! The loop counts each path socket's outer bytes, sent and received (UDP payload plus
//! the IP and UDP headers, what a carrier bills), and hands them over here every
//! [`BUDGET_TICK`], or at once when they make a budget reach its size (so a fast path
//! overshoots its budget by a loop round and a round trip, not by a tick). Each count goes to the budget of the `[[path]]` the path belongs to (a
//! pattern path's paths, `NAME:INTERFACE`, share the budget of `NAME`). A budget that is
//! spent makes each of its paths a backup ([`Driven::set_path_backup`], logged once); a
//! new period gives them back their configured role. The roles are applied on every tick,
//! so a pattern path that opens while its budget is spent becomes a backup within a tick.
//!
//! Counts are saved every [`SAVE_EVERY`] while they change, and at stop
//! ([`crate::budget::state_file`]). A state file that cannot be opened or written costs a
//! warning (once), never the tunnel: the count then lives in memory, and a restart counts
//! from 0.

use std::path::Path;
use std::time::Duration;

use plait_proto::Time;
use tracing::{info, warn};

use super::Driven;
use crate::budget::state_file::{Loaded, StateFile};
use crate::budget::{Budget, Resumed, today_utc};
use crate::config::PathConfig;
use crate::control::snapshot::BudgetStatus;
use crate::endpoint::{Now, Outputs};

/// What the budgets need of the endpoint: its paths' names and their roles (every
/// [`Driven`] endpoint has them; a server has no paths of its own).
pub trait PathRoles {
    /// See [`Driven::path_name`].
    fn path_name(&self, id: usize) -> Option<&str>;
    /// See [`Driven::set_path_backup`].
    fn set_path_backup(&mut self, now: Now, id: usize, backup: bool, out: &mut impl Outputs);
}

impl<D: Driven> PathRoles for D {
    fn path_name(&self, id: usize) -> Option<&str> {
        Driven::path_name(self, id)
    }
    fn set_path_backup(&mut self, now: Now, id: usize, backup: bool, out: &mut impl Outputs) {
        Driven::set_path_backup(self, now, id, backup, out);
    }
}

/// How often counted bytes reach the budgets (and roles are applied).
pub const BUDGET_TICK: Duration = Duration::from_millis(250);
/// How often a changing count is saved at most.
pub const SAVE_EVERY: Duration = Duration::from_secs(10);

/// One `[[path]]`'s budget.
#[derive(Debug)]
struct Entry {
    /// The `[[path]]`'s name.
    name: String,
    /// Its configured role.
    backup: bool,
    budget: Budget,
    file: StateFile,
    /// Counted since the last save.
    dirty: bool,
    /// A save failed: warned once.
    save_warned: bool,
    /// Bytes counted for it since the last tick (what [`Budgets::count`] knows of it).
    pending: u64,
}

/// Every budget of the client, and the bytes counted per path id since the last tick.
#[derive(Debug)]
pub struct Budgets {
    entries: Vec<Entry>,
    /// Per path id (socket index): outer bytes since the last tick.
    counted: [u64; plait_proto::MAX_PATHS],
    /// Per path id, the entry its bytes went to at the last tick (`None`: no path there,
    /// or one without a budget), so that [`Budgets::count`] can see a budget run out.
    owners: [Option<usize>; plait_proto::MAX_PATHS],
    next_tick: Time,
    next_save: Time,
}

impl Budgets {
    /// The budgets of `paths` on the day of `wall_ns`, each going on from its state file
    /// in `dir` (opened here, before the daemon locks itself down). `None` if no path has
    /// a budget.
    pub fn open(paths: &[PathConfig], dir: &Path, wall_ns: u64) -> Option<Budgets> {
        let today = today_utc(wall_ns);
        let entries: Vec<Entry> = paths
            .iter()
            .filter_map(|p| Some((p, p.budget?)))
            .map(|(p, config)| {
                let (file, loaded) = StateFile::open(dir, &p.name);
                let saved = match loaded {
                    Ok(Loaded::Found(s)) => Some(s),
                    Ok(Loaded::Missing) => None,
                    Ok(Loaded::Corrupt) => {
                        warn!(path = %p.name, file = %file.path().display(), "the budget's state file is corrupt: counting this period from 0");
                        None
                    }
                    Err(e) => {
                        warn!(path = %p.name, file = %file.path().display(), error = %e, "cannot keep the budget's count in its state file (set `state_dir` to a writable directory): counting in memory only, a restart counts from 0");
                        None
                    }
                };
                let (budget, resumed) = Budget::new(config, today, saved);
                let how = match resumed {
                    Resumed::Fresh => "nothing saved: counting from 0",
                    Resumed::Continued => "going on from the saved count",
                    Resumed::NewPeriod => "a new period: counting from 0",
                };
                info!(path = %p.name, budget = %budget.status(), "metered path: {how}");
                Entry {
                    name: p.name.clone(),
                    backup: p.backup,
                    dirty: resumed == Resumed::NewPeriod,
                    budget,
                    file,
                    save_warned: false,
                    pending: 0,
                }
            })
            .collect();
        if entries.is_empty() {
            return None;
        }
        Some(Budgets {
            entries,
            counted: [0; plait_proto::MAX_PATHS],
            owners: [None; plait_proto::MAX_PATHS],
            next_tick: Time::ZERO,
            next_save: Time::ZERO + SAVE_EVERY,
        })
    }

    /// `bytes` left or arrived on path id `path`. When they make the path's budget reach
    /// its size, the next tick is due at once rather than up to [`BUDGET_TICK`] later: a
    /// metered path at 40 Mbit/s moves 1.25 MB in a tick, all of it beyond the budget.
    pub fn count(&mut self, path: usize, bytes: usize) {
        let bytes = bytes as u64;
        if let Some(c) = self.counted.get_mut(path) {
            *c = c.saturating_add(bytes);
        }
        let owner = self.owners.get(path).copied().flatten();
        if let Some(e) = owner.and_then(|o| self.entries.get_mut(o)) {
            e.pending = e.pending.saturating_add(bytes);
            let size = e.budget.config().bytes;
            if !e.budget.spent() && e.budget.used().saturating_add(e.pending) >= size {
                self.next_tick = Time::ZERO;
            }
        }
    }

    /// When [`Budgets::tick`] is next due.
    pub fn next_tick(&self) -> Time {
        self.next_tick
    }

    /// Hands the counted bytes to their budgets, applies each path's role and saves the
    /// counts when due.
    pub fn tick(&mut self, now: Now, endpoint: &mut impl PathRoles, out: &mut impl Outputs) {
        if now.mono < self.next_tick {
            return;
        }
        self.next_tick = now.mono + BUDGET_TICK;
        let today = today_utc(now.wall_ns);
        for e in &mut self.entries {
            if e.budget.roll(today) {
                info!(path = %e.name, budget = %e.budget.status(), "a new budget period: counting from 0");
                e.dirty = true;
            }
        }
        // Each path's owner (`None`: no path there, or one without a budget).
        let mut owners = [None; plait_proto::MAX_PATHS];
        for e in &mut self.entries {
            e.pending = 0;
        }
        for (id, owner) in owners.iter_mut().enumerate() {
            *owner = endpoint.path_name(id).and_then(|n| self.owner(n));
            let bytes = std::mem::take(&mut self.counted[id]);
            let Some(e) = owner.and_then(|o| self.entries.get_mut(o)) else {
                continue;
            };
            if bytes > 0 {
                let was_spent = e.budget.spent();
                e.budget.add(today, bytes);
                e.dirty = true;
                if e.budget.spent() && !was_spent {
                    warn!(path = %e.name, budget = %e.budget.status(), "the path's byte budget is spent: it is a backup until the next period");
                }
            }
        }
        self.owners = owners;
        // Then the roles, once every path's bytes are in.
        for (id, owner) in owners.iter().enumerate() {
            if let Some(e) = owner.and_then(|o| self.entries.get(o)) {
                endpoint.set_path_backup(now, id, e.backup || e.budget.spent(), out);
            }
        }
        if now.mono >= self.next_save {
            self.next_save = now.mono + SAVE_EVERY;
            self.save();
        }
    }

    /// Saves every count that changed (each tick's work is done; at stop).
    pub fn save(&mut self) {
        for e in self.entries.iter_mut().filter(|e| e.dirty) {
            match e.file.save(&e.budget.saved()) {
                Ok(_) => e.dirty = false,
                Err(err) if !e.save_warned => {
                    e.save_warned = true;
                    warn!(path = %e.name, file = %e.file.path().display(), error = %err, "cannot save the budget's count: a restart may count part of this period again from 0");
                }
                Err(_) => {}
            }
        }
    }

    /// What `plait status` shows.
    pub fn status(&self) -> Vec<BudgetStatus> {
        self.entries
            .iter()
            .map(|e| BudgetStatus {
                path: e.name.clone(),
                used: e.budget.used(),
                budget: e.budget.config().bytes,
                resets: e.budget.next_reset().to_string(),
                spent: e.budget.spent(),
                saved: e.file.is_open(),
            })
            .collect()
    }

    /// The entry of the `[[path]]` a path named `name` belongs to (`NAME` or
    /// `NAME:INTERFACE`).
    fn owner(&self, name: &str) -> Option<usize> {
        let base = name.split_once(':').map_or(name, |(b, _)| b);
        self.entries.iter().position(|e| e.name == base)
    }
}

#[cfg(test)]
mod tests;
