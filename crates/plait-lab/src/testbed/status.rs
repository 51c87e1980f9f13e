//! `plait testbed status [NAME] [--json]`: what the state directory says about each test
//! bed, checked against the running processes. Needs no root (it only reads files).
//!
//! Invariant: a damaged or unreadable `state.json` is reported for that test bed (with the
//! pid if it can be found) and never hides the others.

use std::path::Path;

use anyhow::{Result, bail};
use serde::Serialize;

use super::options::StatusOptions;
use super::state::{self, EventInfo, Paths, Phase, State, holder_alive};
use super::{check_name, testbed_cli};

/// One test bed, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// The name.
    pub name: String,
    /// Whether its holder runs.
    pub alive: bool,
    /// The holder's pid, if known.
    pub pid: Option<u32>,
    /// Starting or ready, if known.
    pub phase: Option<Phase>,
    /// Seconds since it came up, if known.
    pub uptime_s: Option<f64>,
    /// Events in force now.
    pub active_events: Vec<EventInfo>,
    /// Why the state could not be read, if it could not.
    pub error: Option<String>,
    /// The whole `state.json`, if readable.
    pub state: Option<State>,
}

fn entry(root: &Path, name: &str) -> Entry {
    let paths = Paths::new(root, name);
    match state::read(&paths) {
        Ok(Some(st)) => {
            let up = st.uptime_s();
            Entry {
                name: name.to_owned(),
                alive: holder_alive(st.pid, st.pid_start),
                pid: Some(st.pid),
                phase: Some(st.phase),
                uptime_s: Some(up),
                active_events: st.active_events(up).into_iter().cloned().collect(),
                error: None,
                state: Some(st),
            }
        }
        Ok(None) => Entry {
            name: name.to_owned(),
            alive: false,
            pid: None,
            phase: None,
            uptime_s: None,
            active_events: Vec::new(),
            error: Some("no state.json".into()),
            state: None,
        },
        Err(e) => {
            let pid = state::read_pid(&paths);
            Entry {
                name: name.to_owned(),
                alive: pid.is_some_and(|(p, s)| holder_alive(p, s)),
                pid: pid.map(|(p, _)| p),
                phase: None,
                uptime_s: None,
                active_events: Vec::new(),
                error: Some(format!("{e:#}")),
                state: None,
            }
        }
    }
}

/// `1h 02m 03s`, `2m 05s`, `42s`.
pub fn human_duration(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 {
        seconds as u64
    } else {
        0
    };
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m {sec:02}s"),
        (h, m, sec) => format!("{h}h {m:02}m {sec:02}s"),
    }
}

/// The text form of one entry.
pub fn render(e: &Entry, root: &Path) -> String {
    let tb = testbed_cli(root);
    let name = &e.name;
    let Some(st) = &e.state else {
        let pid = e
            .pid
            .map(|p| format!(", holder pid {p}"))
            .unwrap_or_default();
        let alive = if e.alive { " (alive)" } else { "" };
        return format!(
            "{name}: unreadable state{pid}{alive}: {}\n  `{tb} down {name}` \
             removes it\n",
            e.error.as_deref().unwrap_or("unknown error")
        );
    };
    if !e.alive {
        return format!(
            "{name}: STALE, its holder (pid {}) is gone; `{tb} down {name}` \
             removes what is left\n",
            st.pid
        );
    }
    let up = e.uptime_s.unwrap_or(0.0);
    let phase = match st.phase {
        Phase::Starting => "starting",
        Phase::Ready => "up",
    };
    let mut s = format!(
        "{name}: {phase} {}, holder pid {}, topology {}\n",
        human_duration(up),
        st.pid,
        st.topology_path
    );
    for (i, p) in st.paths.iter().enumerate() {
        let server = st
            .addresses
            .as_ref()
            .and_then(|a| a.paths.get(i))
            .map(|a| format!("  (server {})", a.server))
            .unwrap_or_default();
        s.push_str(&format!("  path {i}: {}{server}\n", p.summary()));
    }
    if !st.events.is_empty() {
        let how = if st.events_applied {
            ""
        } else {
            " (not applied: --no-events)"
        };
        s.push_str(&format!("  events{how}:\n"));
        for ev in &st.events {
            let now = if e.active_events.contains(ev) {
                "  <- now"
            } else if st.events_applied && up >= ev.to_s {
                "  (over)"
            } else {
                ""
            };
            let rate = ev
                .rate_mbit
                .map(|r| format!(" to {r} Mbit/s"))
                .unwrap_or_default();
            s.push_str(&format!(
                "    {}{rate} on path {} from {} s to {} s{now}\n",
                ev.kind, ev.path, ev.from_s, ev.to_s
            ));
        }
    }
    s
}

/// Runs `plait testbed status`.
pub fn status(root: &Path, args: &StatusOptions) -> Result<()> {
    let names = match &args.name {
        Some(n) => {
            check_name(n)?;
            if !Paths::new(root, n).dir.exists() {
                bail!(
                    "no test bed {n} under {} (`{} status` lists them)",
                    root.display(),
                    testbed_cli(root)
                );
            }
            vec![n.clone()]
        }
        None => state::list(root)?,
    };
    let entries: Vec<Entry> = names.iter().map(|n| entry(root, n)).collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
    } else if entries.is_empty() {
        println!("no test beds under {}", root.display());
    } else {
        for e in &entries {
            print!("{}", render(e, root));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(42.7), "42s");
        assert_eq!(human_duration(125.0), "2m 05s");
        assert_eq!(human_duration(3723.0), "1h 02m 03s");
        assert_eq!(human_duration(f64::NAN), "0s");
        assert_eq!(human_duration(-5.0), "0s");
    }

    #[test]
    fn missing_and_damaged_states_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::create_dir_all(root.join("bad")).unwrap();
        std::fs::write(root.join("bad/state.json"), r#"{"pid": 1}"#).unwrap();
        let e = entry(root, "empty");
        assert!(!e.alive && e.pid.is_none());
        assert!(render(&e, root).contains("unreadable state"));
        let b = entry(root, "bad");
        assert_eq!(b.pid, Some(1));
        assert!(!b.alive, "pid 1 is not a holder");
        let text = render(&b, root);
        let down = format!("plait testbed --state-dir {} down bad", root.display());
        assert!(text.contains("damaged") && text.contains(&down), "{text}");
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["alive"], false);
        assert_eq!(json["pid"], 1);
    }
}
