//! A `plait server` or `plait client` daemon run by a root test in a namespace: started
//! with a config and a log file beside it, asked for its status over its socket, stopped
//! with SIGTERM and checked to leave nothing behind.
//!
//! Invariant: a daemon is killed when its guard drops, and prints its log's tail if the
//! test is failing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plait_testbed::{ChildGuard, Namespace};
use plait_tunnel::control::StatusSnapshot;

use super::PLAIT;

/// How long the tunnel may take to come up.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a daemon may take to exit after SIGTERM.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Routing table and firewall mark the client uses for `route` (docs/tunnel-routing.md).
pub const TABLE: &str = "28780";
pub const FWMARK: &str = "0x706c";

/// A running daemon. Killed on drop; prints its log if the test is failing.
pub struct Daemon {
    pub label: String,
    pub child: ChildGuard,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub tun: String,
}

impl Daemon {
    pub fn start(ns: &Namespace, role: &str, label: &str, config: &Path, tun: &str) -> Daemon {
        let dir = config.parent().expect("config has a directory");
        let log = dir.join(format!("{label}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let err = file.try_clone().expect("log file");
        let mut cmd = ns.command(PLAIT);
        cmd.arg(role)
            .arg("-c")
            .arg(config)
            .env("RUST_LOG", "info")
            .stdout(file)
            .stderr(err);
        let child = ns.spawn(&mut cmd).expect("start daemon");
        Daemon {
            label: label.to_owned(),
            child,
            socket: dir.join(format!("{label}.sock")),
            log,
            tun: tun.to_owned(),
        }
    }

    pub fn status(&self) -> Result<StatusSnapshot, String> {
        plait_tunnel::control::status::query(&self.socket).map_err(|e| e.to_string())
    }

    /// The same daemon answering on `socket` instead of `LABEL.sock` beside its config
    /// (what its config's `[control] status_socket` says).
    pub fn with_socket(mut self, socket: PathBuf) -> Daemon {
        self.socket = socket;
        self
    }

    /// Polls the status until `ready` holds, for at most [`ESTABLISH_TIMEOUT`]; panics
    /// with the last status.
    pub fn wait_for(
        &mut self,
        what: &str,
        ready: impl Fn(&StatusSnapshot) -> bool,
    ) -> StatusSnapshot {
        self.wait_within(what, ESTABLISH_TIMEOUT, ready)
    }

    /// Polls the status until `ready` holds, for at most `bound`; panics with the last
    /// status, or at once if the daemon exits.
    pub fn wait_within(
        &mut self,
        what: &str,
        bound: Duration,
        ready: impl Fn(&StatusSnapshot) -> bool,
    ) -> StatusSnapshot {
        let deadline = Instant::now() + bound;
        let mut last = Err("never asked".to_owned());
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!("{} exited early ({s}) waiting for {what}", self.label);
            }
            last = self.status();
            if let Ok(s) = &last
                && ready(s)
            {
                return s.clone();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "{}: no {what} within {bound:?}; last status: {last:#?}",
            self.label
        );
    }

    /// Everything the daemon logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM; must exit 0 within [`EXIT_TIMEOUT`] (a seccomp kill shows as signal 31,
    /// SIGSYS) and remove its status socket. Returns its log.
    pub fn stop(mut self) -> String {
        let status = self
            .child
            .terminate(EXIT_TIMEOUT)
            .unwrap_or_else(|e| panic!("{}: {e}", self.label));
        assert!(status.success(), "{} exited with {status}", self.label);
        assert!(
            !self.socket.exists(),
            "{}: status socket {} left behind",
            self.label,
            self.socket.display()
        );
        self.log_text()
    }

    /// [`Daemon::stop`], then the namespace must hold no TUN device, route or rule of it.
    pub fn shutdown(self, ns: &Namespace) {
        let (tun, label) = (self.tun.clone(), self.label.clone());
        self.stop();
        assert_clean(ns, &tun, &label);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.child.kill();
        if std::thread::panicking() {
            let text = self.log_text();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!(
                "----- {} log ({}), last {} lines -----\n{}\n-----",
                self.label,
                self.log.display(),
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// The namespace has no trace of the daemon's TUN device, routes, policy rules or
/// nftables tables (stream mode's redirect, the server's NAT).
pub fn assert_clean(ns: &Namespace, tun: &str, label: &str) {
    let tables = ns.exec_output(["nft", "list", "tables"]).expect("nft");
    let tables = String::from_utf8_lossy(&tables.stdout);
    assert!(
        !tables.contains(tun),
        "{label}: nftables table for {tun} left behind:\n{tables}"
    );
    let link = ns.ip_output(["link", "show", "dev", tun]).expect("ip link");
    assert!(
        !link.status.success(),
        "{label}: TUN {tun} still exists after exit"
    );
    for fam in ["-4", "-6"] {
        let rules = ns.ip([fam, "rule", "show"]).expect("ip rule");
        let rules = String::from_utf8_lossy(&rules.stdout);
        for needle in [TABLE, FWMARK, "suppress_prefixlength"] {
            assert!(
                !rules.contains(needle),
                "{label}: {fam} rule with {needle} left behind:\n{rules}"
            );
        }
        let routes = ns
            .ip([fam, "route", "show", "table", "all"])
            .expect("ip route");
        let routes = String::from_utf8_lossy(&routes.stdout);
        for line in routes.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(
                !words.contains(&tun) && !line.contains(&format!("table {TABLE}")),
                "{label}: {fam} route left behind: {line}"
            );
        }
    }
}
