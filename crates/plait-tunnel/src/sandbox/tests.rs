//! The filter at work, in child processes: this test binary runs itself again with one test
//! selected and [`CHILD`] set, and that test then locks its process down, makes allowed
//! calls, says so, and makes one that is not allowed. The parent checks how the child ended
//! (killed by SIGSYS, or alive with `log`), so the test process itself is never filtered.

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Output};

use super::*;

/// Set in a child to the forbidden action it is to try.
const CHILD: &str = "PLAIT_SANDBOX_TEST_CHILD";
/// What a child prints once its allowed calls have passed under the filter.
const ALIVE: &str = "allowed calls passed under the filter";
/// What a child prints if it survives the forbidden call.
const SURVIVED: &str = "survived the forbidden call";

/// Runs `test` of this binary in a child process with [`CHILD`] = `action`.
fn child(test: &str, action: &str) -> Output {
    let exe = std::env::current_exe().expect("test binary");
    Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, action)
        .output()
        .expect("run the child")
}

/// In a child: locks down with `seccomp`, makes calls the daemon makes, then `action`.
fn act_in_child(seccomp: SeccompMode, action: &str) {
    let root = nix::unistd::geteuid().is_root();
    let applied = lock_down(&SecurityConfig {
        seccomp,
        drop_capabilities: root,
    })
    .expect("lock down");
    assert!(applied.no_new_privs);
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("read-only open");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    if root {
        assert!(status.contains("CapEff:\t0000000000001000"), "{status}");
    }
    // A thread (clone3 answers ENOSYS, clone without namespace flags), a UDP socket, a
    // channel, a sleep.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(std::net::UdpSocket::bind("127.0.0.1:0").is_ok()))
        .join()
        .expect("thread")
        .expect("send");
    assert_eq!(rx.recv(), Ok(true));
    std::thread::sleep(std::time::Duration::from_millis(1));
    println!("{ALIVE}");
    let _ = std::io::stdout().flush();
    match action {
        "open-for-writing" => {
            let _ = std::fs::OpenOptions::new().write(true).open("/dev/null");
        }
        "packet-socket" => {
            let _ = socket2::Socket::new(socket2::Domain::PACKET, socket2::Type::RAW, None);
        }
        "new-namespace" => {
            let _ = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER);
        }
        "chmod" => {
            let _ =
                std::fs::set_permissions("/", std::os::unix::fs::PermissionsExt::from_mode(0o755));
        }
        other => panic!("unknown action {other}"),
    }
    println!("{SURVIVED}");
}

#[test]
fn a_call_off_the_list_kills_the_process() {
    const TEST: &str = "sandbox::tests::a_call_off_the_list_kills_the_process";
    if let Ok(action) = std::env::var(CHILD) {
        act_in_child(SeccompMode::Kill, &action);
        return;
    }
    for action in [
        "open-for-writing",
        "packet-socket",
        "new-namespace",
        "chmod",
    ] {
        let out = child(TEST, action);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.contains(ALIVE), "{action}: {stdout}\n{stderr}");
        assert!(!stdout.contains(SURVIVED), "{action}: {stdout}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGSYS),
            "{action}: {:?}\n{stdout}\n{stderr}",
            out.status
        );
    }
}

#[test]
fn log_mode_lets_the_call_through() {
    const TEST: &str = "sandbox::tests::log_mode_lets_the_call_through";
    if let Ok(action) = std::env::var(CHILD) {
        act_in_child(SeccompMode::Log, &action);
        return;
    }
    let out = child(TEST, "open-for-writing");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains(SURVIVED), "{stdout}\n{stderr}");
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
}
