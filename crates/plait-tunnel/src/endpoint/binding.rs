//! Which of the client's paths have a working link, and telling the server so
//! (docs/protocol.md#binding; seed MMS §II-B: a binding update follows every change).
//!
//! The client learns from the kernel (netlink, `crate::netwatch`) that a path's interface
//! went down, lost its carrier or its route, or came back. It stops or resumes using the
//! path at once itself; the server learns it from a PATH_WITHDRAW or PATH_RESTORE frame
//! (a path-control message, sealed like data) sent on every path that still works, and
//! answers with a BINDING_ACK. Without that, the server would keep scheduling data on a
//! dead link until its own liveness check noticed the silence. A PATH_RESTORE also says
//! whether the path is a backup (docs/protocol.md#backup): the client announces each
//! backup path that way once the session starts, so the server holds it back too.
//!
//! Invariants:
//! - Each path's announcements carry a sequence number that grows with every change; the
//!   server applies only a number above the last it applied, so a late or repeated frame
//!   never undoes a newer one.
//! - A change is repeated every [`BINDING_RETRY`] until the server acknowledges its
//!   number (or a newer change replaces it); memory is one entry per path.
//! - Nothing here reads a clock: time comes in.

use std::time::Duration;

use plait_proto::Time;

use crate::message::{BINDING_FLAG_BACKUP, PATH_RESTORE, PATH_WITHDRAW, PathFrame};

/// How long the client waits for a BINDING_ACK before repeating a withdrawal or
/// restoration.
pub const BINDING_RETRY: Duration = Duration::from_millis(200);

#[derive(Clone, Copy, Debug)]
struct PathBinding {
    /// The path exists (a fixed path, or a pattern path that is open). A path id that
    /// never had a path, or whose pattern path closed, is not present: it is never
    /// counted available, and only a closed path's withdrawal is still repeated.
    present: bool,
    available: bool,
    /// A backup path (configuration): announced with every restoration.
    backup: bool,
    /// The number of the latest change (0: none yet, nothing to announce).
    seq: u64,
    /// The highest number the server acknowledged.
    acked: u64,
    /// When the unacknowledged change goes out again.
    resend_at: Option<Time>,
}

/// The client's view of its paths' links, and the announcements the server still owes
/// an acknowledgement for.
#[derive(Clone, Debug)]
pub struct Bindings {
    paths: Vec<PathBinding>,
}

impl Bindings {
    /// One entry per path (`backup`: whether each is a backup path), all available
    /// (what the configuration promises until the kernel says otherwise). Backup paths
    /// are announced as soon as there is a session ([`Bindings::on_fresh_session`]).
    pub fn new(backup: &[bool]) -> Bindings {
        let mut paths: Vec<PathBinding> = backup
            .iter()
            .map(|&backup| PathBinding {
                present: true,
                available: true,
                backup,
                seq: 0,
                acked: 0,
                resend_at: None,
            })
            .collect();
        // The ids no path has yet (pattern paths open on them later).
        while paths.len() < plait_proto::MAX_PATHS {
            paths.push(PathBinding {
                present: false,
                available: false,
                backup: false,
                seq: 0,
                acked: 0,
                resend_at: None,
            });
        }
        Bindings { paths }
    }

    /// Whether `path`'s link works (unknown paths: no).
    pub fn available(&self, path: usize) -> bool {
        self.paths
            .get(path)
            .is_some_and(|p| p.present && p.available)
    }

    /// The paths whose links work.
    pub fn available_paths(&self) -> impl Iterator<Item = usize> + '_ {
        self.paths
            .iter()
            .enumerate()
            .filter(|(_, p)| p.present && p.available)
            .map(|(i, _)| i)
    }

    /// A pattern path opened on id `path` (free until now): it is announced as restored
    /// (with its role), with a number above any the id had, so the server lets it in even
    /// if an earlier path on this id was withdrawn. Returns false if the id is in use.
    pub fn open(&mut self, now: Time, path: usize, backup: bool) -> bool {
        let Some(p) = self.paths.get_mut(path).filter(|p| !p.present) else {
            return false;
        };
        p.present = true;
        p.available = true;
        p.backup = backup;
        p.seq += 1;
        p.resend_at = Some(now);
        true
    }

    /// The pattern path on `path` closed: withdrawn (announced until acknowledged), and
    /// the id free for a later [`Bindings::open`]. Returns false if there was none.
    pub fn close(&mut self, now: Time, path: usize) -> bool {
        let Some(p) = self.paths.get_mut(path).filter(|p| p.present) else {
            return false;
        };
        p.present = false;
        if p.available {
            p.available = false;
            p.seq += 1;
            p.resend_at = Some(now);
        }
        true
    }

    /// Records that `path`'s link is (or is not) available. Returns whether that is a
    /// change; a change is announced at once (see [`Bindings::due`]).
    pub fn set_available(&mut self, now: Time, path: usize, available: bool) -> bool {
        let Some(p) = self.paths.get_mut(path).filter(|p| p.present) else {
            return false;
        };
        if p.available == available {
            return false;
        }
        p.available = available;
        p.seq += 1;
        p.resend_at = Some(now);
        true
    }

    /// Makes `path` a backup path or a primary one (a metered path whose budget is spent,
    /// docs/protocol.md#overflow). Returns whether that is a change; a change is announced
    /// at once (a PATH_RESTORE with the role, or with the next restoration while the
    /// link is gone).
    pub fn set_backup(&mut self, now: Time, path: usize, backup: bool) -> bool {
        let Some(p) = self.paths.get_mut(path).filter(|p| p.present) else {
            return false;
        };
        if p.backup == backup {
            return false;
        }
        p.backup = backup;
        if p.available {
            p.seq += 1;
            p.resend_at = Some(now);
        }
        true
    }

    /// The server applied change `seq` of `path` (or a newer one).
    pub fn on_ack(&mut self, path: usize, seq: u64) {
        if let Some(p) = self.paths.get_mut(path)
            && seq <= p.seq
            && seq > p.acked
        {
            p.acked = seq;
            if p.acked == p.seq {
                p.resend_at = None;
            }
        }
    }

    /// A fresh engine session at the server knows nothing of our earlier announcements:
    /// every path that is down or a backup is announced again (with a new number), and
    /// nothing else.
    pub fn on_fresh_session(&mut self, now: Time) {
        for p in &mut self.paths {
            // A closed or never-used id: the fresh session has heard of no path on it.
            if !p.present || (p.available && !p.backup) {
                p.resend_at = None;
                p.acked = p.seq;
            } else {
                p.seq += 1;
                p.resend_at = Some(now);
            }
        }
    }

    /// The next time an announcement is due.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.paths.iter().filter_map(|p| p.resend_at).min()
    }

    /// The announcements due at `now` (each rescheduled [`BINDING_RETRY`] later).
    pub fn due(&mut self, now: Time) -> Vec<PathFrame> {
        let mut frames = Vec::new();
        for (i, p) in self.paths.iter_mut().enumerate() {
            let Some(at) = p.resend_at else { continue };
            if at > now {
                continue;
            }
            let Ok(id) = u8::try_from(i) else { continue };
            let kind = if p.available {
                PATH_RESTORE
            } else {
                PATH_WITHDRAW
            };
            let flags = if p.backup { BINDING_FLAG_BACKUP } else { 0 };
            frames.push(PathFrame::binding(kind, id, p.seq, flags));
            p.resend_at = Some(now + BINDING_RETRY);
        }
        frames
    }
}

/// The server's record of one path's announcements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerBinding {
    /// The client withdrew the path: nothing is sent on it and what arrives on it is
    /// ignored, until a restoration.
    pub withdrawn: bool,
    /// The client's latest restoration named the path a backup.
    pub backup: bool,
    /// The highest sequence number applied.
    pub seq: u64,
}

impl ServerBinding {
    /// Applies `frame` (a PATH_WITHDRAW or PATH_RESTORE) if its number is newer. Returns
    /// whether it changed the path's state (withdrawn, or backup).
    pub fn apply(&mut self, frame: &PathFrame) -> bool {
        let seq = frame.seq();
        if seq <= self.seq {
            return false;
        }
        self.seq = seq;
        let before = *self;
        self.withdrawn = frame.kind == PATH_WITHDRAW;
        if !self.withdrawn {
            self.backup = frame.flags() & BINDING_FLAG_BACKUP != 0;
        }
        (self.withdrawn, self.backup) != (before.withdrawn, before.backup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Time {
        Time::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn a_change_is_announced_until_acknowledged() {
        let mut b = Bindings::new(&[false; 3]);
        assert!(b.due(t(0)).is_empty());
        assert!(!b.set_available(t(0), 1, true), "already available");
        assert!(b.set_available(t(10), 1, false));
        assert!(!b.available(1));
        assert_eq!(b.available_paths().collect::<Vec<_>>(), vec![0, 2]);
        let f = b.due(t(10));
        assert_eq!(f, vec![PathFrame::binding(PATH_WITHDRAW, 1, 1, 0)]);
        assert!(b.due(t(100)).is_empty());
        assert_eq!(b.poll_timeout(), Some(t(210)));
        assert_eq!(b.due(t(210)).len(), 1, "repeated");
        b.on_ack(1, 1);
        assert_eq!(b.poll_timeout(), None);
        assert!(b.due(t(1000)).is_empty());
    }

    #[test]
    fn a_newer_change_replaces_the_older_and_old_acks_do_not_stop_it() {
        let mut b = Bindings::new(&[false; 2]);
        b.set_available(t(0), 0, false);
        b.set_available(t(5), 0, true);
        assert_eq!(b.due(t(5)), vec![PathFrame::binding(PATH_RESTORE, 0, 2, 0)]);
        b.on_ack(0, 1);
        assert!(
            b.poll_timeout().is_some(),
            "ack of the withdrawal is not one of the restore"
        );
        b.on_ack(0, 7);
        assert!(
            b.poll_timeout().is_some(),
            "an ack beyond what was sent is ignored"
        );
        b.on_ack(0, 2);
        assert_eq!(b.poll_timeout(), None);
    }

    #[test]
    fn a_fresh_server_session_hears_again_of_every_path_that_is_down() {
        let mut b = Bindings::new(&[false; 3]);
        b.set_available(t(0), 2, false);
        b.due(t(0));
        b.on_ack(2, 1);
        b.on_fresh_session(t(50));
        assert_eq!(
            b.due(t(50)),
            vec![PathFrame::binding(PATH_WITHDRAW, 2, 2, 0)]
        );
    }

    #[test]
    fn backup_paths_are_announced_with_every_fresh_session() {
        let mut b = Bindings::new(&[false, true]);
        b.on_fresh_session(t(0));
        assert_eq!(
            b.due(t(0)),
            vec![PathFrame::binding(PATH_RESTORE, 1, 1, BINDING_FLAG_BACKUP)]
        );
        b.on_ack(1, 1);
        b.set_available(t(5), 1, false);
        assert_eq!(
            b.due(t(5)),
            vec![PathFrame::binding(PATH_WITHDRAW, 1, 2, BINDING_FLAG_BACKUP)]
        );
        let mut s = ServerBinding::default();
        assert!(s.apply(&PathFrame::binding(PATH_RESTORE, 1, 1, BINDING_FLAG_BACKUP)));
        assert!(s.backup && !s.withdrawn);
        assert!(s.apply(&PathFrame::binding(
            PATH_WITHDRAW,
            1,
            2,
            BINDING_FLAG_BACKUP
        )));
        assert!(s.backup && s.withdrawn, "a withdrawal keeps the role");
    }

    #[test]
    fn a_pattern_path_opens_closes_and_its_id_is_reused_with_higher_numbers() {
        let mut b = Bindings::new(&[false]);
        assert!(!b.available(3), "no path on id 3 yet");
        assert!(!b.set_available(t(0), 3, true), "an absent id has no link");
        assert!(b.due(t(0)).is_empty());
        assert!(b.open(t(0), 3, false));
        assert!(!b.open(t(0), 3, false), "already open");
        assert_eq!(b.available_paths().collect::<Vec<_>>(), vec![0, 3]);
        assert_eq!(b.due(t(0)), vec![PathFrame::binding(PATH_RESTORE, 3, 1, 0)]);
        b.on_ack(3, 1);
        assert!(b.close(t(10), 3));
        assert!(!b.close(t(10), 3));
        assert!(!b.available(3));
        assert_eq!(b.available_paths().collect::<Vec<_>>(), vec![0]);
        assert_eq!(
            b.due(t(10)),
            vec![PathFrame::binding(PATH_WITHDRAW, 3, 2, 0)]
        );
        // Unacknowledged, the withdrawal is repeated although the path is gone.
        assert_eq!(b.due(t(210)).len(), 1);
        // The id is taken again (as a backup this time) before the ack: a newer number.
        assert!(b.open(t(300), 3, true));
        assert_eq!(
            b.due(t(300)),
            vec![PathFrame::binding(PATH_RESTORE, 3, 3, BINDING_FLAG_BACKUP)]
        );
        let mut s = ServerBinding::default();
        s.apply(&PathFrame::binding(PATH_RESTORE, 3, 1, 0));
        s.apply(&PathFrame::binding(PATH_WITHDRAW, 3, 2, 0));
        assert!(s.withdrawn);
        assert!(s.apply(&PathFrame::binding(PATH_RESTORE, 3, 3, BINDING_FLAG_BACKUP)));
        assert!(!s.withdrawn && s.backup);
        // A fresh server session hears nothing of closed ids.
        b.close(t(400), 3);
        b.on_fresh_session(t(500));
        assert!(b.due(t(500)).is_empty());
    }

    #[test]
    fn a_role_change_is_announced_and_applied() {
        let mut b = Bindings::new(&[false, false]);
        assert!(b.set_backup(t(0), 1, true));
        assert!(!b.set_backup(t(0), 1, true), "no change, nothing announced");
        let due = b.due(t(0));
        assert_eq!(
            due,
            vec![PathFrame::binding(PATH_RESTORE, 1, 1, BINDING_FLAG_BACKUP)]
        );
        let mut s = ServerBinding::default();
        assert!(s.apply(&due[0]));
        assert!(s.backup && !s.withdrawn);
        assert!(!b.set_backup(t(0), 7, true), "no path on id 7");
    }

    #[test]
    fn the_server_applies_only_newer_numbers() {
        let mut s = ServerBinding::default();
        assert!(s.apply(&PathFrame::binding(PATH_WITHDRAW, 0, 1, 0)));
        assert!(s.withdrawn);
        assert!(
            !s.apply(&PathFrame::binding(PATH_WITHDRAW, 0, 1, 0)),
            "repeat"
        );
        assert!(s.apply(&PathFrame::binding(PATH_RESTORE, 0, 3, 0)));
        assert!(!s.withdrawn);
        assert!(
            !s.apply(&PathFrame::binding(PATH_WITHDRAW, 0, 2, 0)),
            "late"
        );
        assert!(!s.withdrawn);
        assert!(
            !s.apply(&PathFrame::binding(PATH_RESTORE, 0, 4, 0)),
            "no change"
        );
        assert_eq!(s.seq, 4);
    }
}
