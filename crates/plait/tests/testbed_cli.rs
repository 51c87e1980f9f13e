//! End-to-end tests of `plait testbed up|set|status|exec|down` (root only): the real binary
//! brings topologies/T1.toml up under a private state directory, the test measures path 0's
//! round trip from the client namespace to the server's path address (a UDP echo and prober
//! from plait-testbed, so no `ping` binary is needed), changes the path with `set` and sees
//! the effect, checks every refusal names the problem, and takes it down, also after the
//! holder was SIGKILLed. Behaviour only: the RTT bounds are the emulated delays plus a
//! margin, never a speed.
//!
//! Invariants: each test uses its own name (`tbt` + letters from this process's pid, plus a
//! letter per test) and a temporary state directory, so concurrent runs do not meet; a
//! guard runs `plait testbed down` when the test ends, also on failure, so no namespace is
//! left behind. Without root each test prints the skip message and passes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use plait_testbed::{Namespace, RttProbe, SKIP_NO_ROOT, UdpEcho, have_root};

const PLAIT: &str = env!("CARGO_BIN_EXE_plait");
const ECHO_PORT: u16 = 7009;

fn topology() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/T1.toml")
}

/// A test bed name unique to this process and test: `tbt` + 3 letters + `tag`.
fn unique_name(tag: char) -> String {
    let mut pid = std::process::id();
    let mut s = String::from("tbt");
    for _ in 0..3 {
        s.push(char::from(b'a' + u8::try_from(pid % 26).unwrap_or(0)));
        pid /= 26;
    }
    s.push(tag);
    s
}

/// Runs `plait testbed --state-dir ROOT ARGS`, bounded by a generous timeout.
fn plait(root: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(PLAIT)
        .arg("testbed")
        .arg("--state-dir")
        .arg(root)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start plait");
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("plait testbed {args:?} took over 90 s: {out:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs and expects success; returns stdout.
fn ok(root: &Path, args: &[&str]) -> String {
    let out = plait(root, args);
    assert!(
        out.status.success(),
        "plait testbed {args:?} failed: {}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    text(&out.stdout)
}

/// Runs and expects failure with `want` in stderr.
fn refused(root: &Path, args: &[&str], want: &str) {
    let out = plait(root, args);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "plait testbed {args:?} succeeded");
    assert!(err.contains(want), "plait testbed {args:?}: {err}");
}

/// Takes the test bed down when dropped (also when the test fails).
struct DownGuard<'a> {
    root: &'a Path,
    name: String,
}

impl Drop for DownGuard<'_> {
    fn drop(&mut self) {
        let _ = plait(self.root, &["down", &self.name]);
    }
}

/// A namespace of the test bed used without owning it (dropping keeps it).
struct Borrowed(Option<Namespace>);

impl Borrowed {
    fn new(name: &str) -> Borrowed {
        Borrowed(Some(Namespace::adopt(name)))
    }

    fn ns(&self) -> &Namespace {
        self.0.as_ref().expect("namespace")
    }
}

impl Drop for Borrowed {
    fn drop(&mut self) {
        if let Some(ns) = self.0.take() {
            ns.keep();
        }
    }
}

fn status_json(root: &Path, name: &str) -> serde_json::Value {
    let out = ok(root, &["status", name, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("status --json parses");
    v.as_array()
        .and_then(|a| a.first())
        .cloned()
        .expect("one entry")
}

fn namespace_of(st: &serde_json::Value, role: &str) -> String {
    st["state"]["namespaces"]
        .as_array()
        .expect("namespaces")
        .iter()
        .find(|n| n["role"] == role)
        .and_then(|n| n["name"].as_str())
        .expect("role")
        .to_owned()
}

fn with_prefix(prefix: &str) -> Vec<String> {
    plait_testbed::netns::list()
        .expect("ip netns list")
        .into_iter()
        .filter(|n| plait_testbed::netns::owner_pid(n, prefix).is_some())
        .collect()
}

/// Median RTT (ms) and fraction answered of 10 ms probes over `secs` from the client to the
/// server's address on path 0.
fn probe(cli: &Borrowed, echo: SocketAddr, secs: f64) -> (Option<f64>, f64) {
    let p = RttProbe::start(cli.ns(), echo, Duration::from_millis(10)).expect("probe");
    std::thread::sleep(Duration::from_secs_f64(secs));
    let r = p.stop().expect("probe report");
    let answered = r.samples.len() as f64 / r.sent.max(1) as f64;
    (r.quantile(0.5).map(|d| d.as_secs_f64() * 1000.0), answered)
}

#[test]
fn up_set_status_exec_down() {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let name = unique_name('a');
    let _guard = DownGuard {
        root,
        name: name.clone(),
    };
    let topo = topology();
    let topo = topo.to_str().expect("utf-8 path");
    let shown = ok(root, &["up", topo, "--name", &name]);
    for want in [
        "cli0",
        "r0x0",
        "r0x1",
        "srv",
        "rem",
        "lan0",
        "10.4.0.2",
        "10.1.0.2",
        "10.2.0.2",
        "ip netns exec",
        "exec",
        "down",
    ] {
        assert!(shown.contains(want), "`up` output lacks {want}:\n{shown}");
    }
    let st = status_json(root, &name);
    assert_eq!(st["alive"], true, "{st}");
    let names = with_prefix(&name);
    assert_eq!(names.len(), 6, "{names:?}");
    refused(
        root,
        &["up", topo, "--name", &name],
        "is already up (holder pid",
    );

    let cli = Borrowed::new(&namespace_of(&st, "cli0"));
    let srv = Borrowed::new(&namespace_of(&st, "srv"));
    let addr: SocketAddr = format!("10.4.0.2:{ECHO_PORT}").parse().expect("addr");
    let echo = UdpEcho::start(srv.ns(), addr).expect("echo");

    let (rtt, _) = probe(&cli, echo.local_addr(), 1.0);
    let rtt = rtt.expect("answers on path 0");
    eprintln!("path 0 as built: RTT p50 {rtt:.1} ms (20 ms configured)");
    assert!((20.0..26.0).contains(&rtt), "RTT {rtt} ms for 20 ms");

    let said = ok(root, &["set", &name, "0", "--delay", "40"]);
    assert!(said.contains("40 ms"), "{said}");
    let (rtt, _) = probe(&cli, echo.local_addr(), 1.0);
    let rtt = rtt.expect("answers after set --delay");
    eprintln!("path 0 with 40 ms each way: RTT p50 {rtt:.1} ms");
    assert!((80.0..87.0).contains(&rtt), "RTT {rtt} ms for 80 ms");

    ok(root, &["set", &name, "0", "--blackhole", "on"]);
    let (_, answered) = probe(&cli, echo.local_addr(), 0.5);
    assert_eq!(answered, 0.0, "a blackholed path answered");
    ok(
        root,
        &["set", &name, "0", "--blackhole", "off", "--delay", "5"],
    );
    let (rtt, answered) = probe(&cli, echo.local_addr(), 0.5);
    eprintln!(
        "path 0 after the blackhole, 5 ms each way: RTT p50 {rtt:?} ms, {:.0} % answered",
        answered * 100.0
    );
    assert!(answered > 0.5, "answered {answered}");
    assert!(rtt.is_some_and(|r| (10.0..16.0).contains(&r)), "{rtt:?}");

    ok(
        root,
        &["set", &name, "1", "--rate", "5", "--queue-ms", "50"],
    );
    let st = status_json(root, &name);
    let path1 = &st["state"]["paths"][1];
    assert_eq!(path1["rate_mbit"], 5.0, "{path1}");
    assert_eq!(path1["queue_bytes"], 31250, "{path1}");
    assert_eq!(st["state"]["paths"][0]["up"]["delay_ms"], 5.0);
    let qdisc = ok(
        root,
        &[
            "exec", &name, "r0x1", "--", "tc", "qdisc", "show", "dev", "rs",
        ],
    );
    assert!(qdisc.contains("rate 5Mbit"), "{qdisc}");
    let text_status = ok(root, &["status"]);
    assert!(
        text_status.contains(&format!("{name}: up")),
        "{text_status}"
    );

    // Refusals name the problem.
    refused(
        root,
        &["set", &name, "7", "--delay", "5"],
        "path 7 does not exist",
    );
    refused(root, &["set", &name, "0"], "nothing to set");
    refused(root, &["set", &name, "0", "--rate", "-3"], "--rate: -3");
    refused(root, &["set", &name, "0", "--loss", "1.5"], "--loss: 1.5");
    refused(
        root,
        &["set", "tbtnone", "0", "--delay", "5"],
        "no test bed tbtnone",
    );
    refused(
        root,
        &["exec", &name, "r9x9", "--", "true"],
        "valid roles: lan0, cli0",
    );
    let code = plait(root, &["exec", &name, "srv", "--", "sh", "-c", "exit 7"]);
    assert_eq!(
        code.status.code(),
        Some(7),
        "exec passes the exit status on"
    );
    drop(echo);
    drop(cli);
    drop(srv);

    let said = ok(root, &["down", &name]);
    assert!(said.contains("stopped holder pid"), "{said}");
    assert!(with_prefix(&name).is_empty(), "{:?}", with_prefix(&name));
    assert!(!root.join(&name).exists());
    let again = ok(root, &["down", &name]);
    assert!(again.contains("nothing to remove"), "{again}");
}

#[test]
fn down_cleans_up_after_a_killed_holder() {
    if !have_root() {
        eprintln!("{SKIP_NO_ROOT}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let name = unique_name('b');
    let _guard = DownGuard {
        root,
        name: name.clone(),
    };
    let topo = topology();
    ok(
        root,
        &[
            "up",
            topo.to_str().expect("utf-8"),
            "--name",
            &name,
            "--no-events",
        ],
    );
    let st = status_json(root, &name);
    let pid = st["pid"].as_u64().expect("pid");
    let pid = i32::try_from(pid).expect("pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the holder");
    // The holder is gone once /proc says so (a zombie counts as gone).
    let mut stale = false;
    for _ in 0..100 {
        if status_json(root, &name)["alive"] == false {
            stale = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(stale, "the killed holder still looks alive");
    assert_eq!(
        with_prefix(&name).len(),
        6,
        "a SIGKILLed holder cannot clean up"
    );
    assert!(ok(root, &["status"]).contains("STALE"));
    refused(root, &["set", &name, "0", "--delay", "5"], "is not running");
    let said = ok(root, &["down", &name]);
    assert!(said.contains("removed 6 namespace(s)"), "{said}");
    assert!(with_prefix(&name).is_empty(), "{:?}", with_prefix(&name));
    assert!(!root.join(&name).exists());
    assert!(ok(root, &["down", &name]).contains("nothing to remove"));
    // Nothing left: `down --all` finds nothing either.
    assert!(ok(root, &["down", "--all"]).contains("nothing to remove"));
}
