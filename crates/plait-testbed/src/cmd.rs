//! Running the external commands the test bed is built with (`ip`, `tc`, `nft`,
//! `ethtool`, `sysctl`, and the emulators' `iptables` and `chrt`): the crate's one command
//! runner.
//!
//! Invariants: a command is never run through a shell (arguments are passed as they are);
//! [`run`] and [`run_with_input`] succeed only if the command exited 0, and otherwise
//! return [`TestbedError::Command`] naming the whole command line and carrying its trimmed
//! stderr; [`output`] is the unchecked form for callers that inspect a failure themselves.
//! Standard input is always either closed (`/dev/null`) or fully written, so no command can
//! wait for input forever.

use std::ffi::OsStr;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use crate::{Result, TestbedError};

/// The command line as one string, for error messages.
pub fn display<I, S>(program: impl AsRef<OsStr>, args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut line = program.as_ref().to_string_lossy().into_owned();
    for a in args {
        line.push(' ');
        line.push_str(&a.as_ref().to_string_lossy());
    }
    line
}

fn command_line(cmd: &Command) -> String {
    display(cmd.get_program(), cmd.get_args())
}

/// Runs `program args…` (a name looked up in `PATH`, or a path) and returns its output
/// whatever its exit status (an error only if it could not be started).
pub fn output<I, S>(program: impl AsRef<OsStr>, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    cmd.output().map_err(|source| TestbedError::Spawn {
        command: command_line(&cmd),
        source,
    })
}

/// Runs `program args…`; an error unless it exits 0.
pub fn run<I, S>(program: impl AsRef<OsStr>, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    let out = output(&program, &args)?;
    check(display(program, &args), out)
}

/// Runs `program args…` with `input` on its standard input; an error unless it exits 0.
pub fn run_with_input<I, S>(program: impl AsRef<OsStr>, args: I, input: &[u8]) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let line = command_line(&cmd);
    let spawn_err = |source| TestbedError::Spawn {
        command: line.clone(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_err)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that exits early closes its stdin; its exit status tells the story.
        let _ = stdin.write_all(input);
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    check(line, out)
}

/// `Ok(out)` if the command exited 0, else the error naming it.
pub fn check(command: String, out: Output) -> Result<Output> {
    if out.status.success() {
        Ok(out)
    } else {
        Err(TestbedError::Command {
            command,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_names_command_and_stderr() {
        let err = run("sh", ["-c", "echo oops >&2; exit 3"]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("`sh -c echo oops >&2; exit 3`"), "{text}");
        assert!(text.contains("oops"), "{text}");
        assert!(matches!(err, TestbedError::Command { .. }));
    }

    #[test]
    fn missing_binary_is_a_spawn_error() {
        let err = run("/nonexistent/plait-testbed-tool", ["x"]).unwrap_err();
        assert!(matches!(err, TestbedError::Spawn { .. }), "{err:?}");
        assert!(err.to_string().contains("plait-testbed-tool x"), "{err}");
    }

    #[test]
    fn input_reaches_the_command() {
        let out = run_with_input("cat", Vec::<&str>::new(), b"hello").unwrap();
        assert_eq!(out.stdout, b"hello");
        assert!(output("false", Vec::<&str>::new()).is_ok());
    }
}
