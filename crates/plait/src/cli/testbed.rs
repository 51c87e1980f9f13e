//! The command line of `plait testbed`: one struct per subcommand, turned into plait-lab's
//! [`Command`]; `set`'s options become a [`Change`] (checked by [`Change::validate`] before
//! anything is sent).
//!
//! Invariant: parsing options never panics and every refusal names the option.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand, ValueEnum};
use plait_lab::testbed::Command;
use plait_lab::testbed::options::{
    DEFAULT_NAME, DownOptions, ExecOptions, HoldOptions, SetOptions, StatusOptions, UpOptions,
};
use plait_lab::testbed::settings::{Change, Dirs, LossModel, Queue, Rate, SetError};
use plait_lab::testbed::state::DEFAULT_ROOT;

/// `plait testbed …`.
#[derive(Debug, Args)]
pub struct TestbedArgs {
    /// Directory with one directory per running test bed (state.json, control socket,
    /// holder log).
    #[arg(long, global = true, default_value = DEFAULT_ROOT, value_name = "DIR")]
    pub state_dir: PathBuf,
    #[command(subcommand)]
    pub command: TestbedCommand,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum TestbedCommand {
    /// Build the emulated links of a topology file and keep them up (as root) until
    /// `plait testbed down`; prints the namespaces, addresses and how to use them.
    Up(UpArgs),
    /// Take a test bed down (as root): stop its holder, delete its namespaces and state.
    /// Idempotent.
    Down(DownArgs),
    /// Change one path of a running test bed (as root): rate, queue, delay, loss,
    /// blackhole, link.
    Set(SetArgs),
    /// Show running test beds: holder, uptime, per-path settings, events.
    Status(StatusArgs),
    /// Run a command inside one of a test bed's namespaces (as root).
    Exec(ExecArgs),
    /// (internal) The process that holds a test bed; started by `up`.
    #[command(hide = true)]
    Hold(HoldArgs),
}

/// `plait testbed up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// The topology file (topologies/*.toml; format in docs/benchmarks.md).
    pub topology: PathBuf,
    /// Test bed name and namespace prefix: 1 to 8 of a-z and _.
    #[arg(long, default_value = DEFAULT_NAME)]
    pub name: String,
    /// Do not apply the file's timed events (blackholes, link and rate changes).
    #[arg(long)]
    pub no_events: bool,
}

/// `plait testbed down`.
#[derive(Debug, Args)]
pub struct DownArgs {
    /// The test bed (default tb).
    #[arg(conflicts_with = "all")]
    pub name: Option<String>,
    /// Every test bed under the state directory.
    #[arg(long)]
    pub all: bool,
}

/// `plait testbed status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One test bed (default: all).
    pub name: Option<String>,
    /// JSON (an array, one object per test bed).
    #[arg(long)]
    pub json: bool,
}

/// `plait testbed exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The test bed.
    pub name: String,
    /// The namespace's role: lan0, cli0, r0x0, r0x1, …, srv, rem.
    pub role: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `plait testbed hold` (internal).
#[derive(Debug, Args)]
pub struct HoldArgs {
    /// The topology file (absolute).
    pub topology: PathBuf,
    /// Test bed name.
    #[arg(long)]
    pub name: String,
    /// Do not apply the file's events.
    #[arg(long)]
    pub no_events: bool,
}

/// `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// `up` or `down`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum UpDown {
    /// Up.
    Up,
    /// Down.
    Down,
}

/// `plait testbed set`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct SetArgs {
    /// The test bed.
    pub name: String,
    /// The path (0 is the first).
    pub path: usize,
    /// Shape both directions to this rate, Mbit/s (keeps the current queue in bytes
    /// unless --queue-ms or --queue-bytes is given).
    #[arg(long, value_name = "MBIT")]
    pub rate: Option<f64>,
    /// Remove the shaping.
    #[arg(long, conflicts_with_all = ["rate", "queue_ms", "queue_bytes"])]
    pub unshaped: bool,
    /// tbf queue limit as time at the (new) rate, ms.
    #[arg(long, value_name = "MS", conflicts_with = "queue_bytes")]
    pub queue_ms: Option<f64>,
    /// tbf queue limit, bytes.
    #[arg(long, value_name = "B")]
    pub queue_bytes: Option<u32>,
    /// One-way delay, ms, for each direction of --dir.
    #[arg(long, value_name = "MS")]
    pub delay: Option<f64>,
    /// Random loss probability per packet, 0 to below 1 (0: none).
    #[arg(long, value_name = "P")]
    pub loss: Option<f64>,
    /// Bursty (Gilbert-Elliott) loss: P_GB,P_BG[,LOSS_GOOD,LOSS_BAD] (defaults 0 and 1).
    #[arg(
        long,
        value_name = "P_GB,P_BG[,LOSS_GOOD,LOSS_BAD]",
        conflicts_with = "loss"
    )]
    pub burst_loss: Option<String>,
    /// Which directions --delay, --loss and --burst-loss apply to.
    #[arg(long, default_value = "both", value_parser = dirs_parser())]
    pub dir: Dirs,
    /// Silently drop everything on the path (both directions), or stop.
    #[arg(long, value_enum)]
    pub blackhole: Option<OnOff>,
    /// Take the router's client-side link down (the client sees carrier loss), or up.
    #[arg(long, value_enum)]
    pub link: Option<UpDown>,
}

/// `--dir`: both, up or down.
fn dirs_parser() -> impl TypedValueParser<Value = Dirs> {
    PossibleValuesParser::new(["both", "up", "down"]).map(|s| match s.as_str() {
        "up" => Dirs::Up,
        "down" => Dirs::Down,
        _ => Dirs::Both,
    })
}

impl TestbedArgs {
    /// The state directory and the subcommand, as plait-lab runs them.
    pub fn into_command(self) -> Result<(PathBuf, Command), SetError> {
        let command = match self.command {
            TestbedCommand::Up(a) => Command::Up(UpOptions {
                topology: a.topology,
                name: a.name,
                no_events: a.no_events,
            }),
            TestbedCommand::Down(a) => Command::Down(DownOptions {
                name: a.name,
                all: a.all,
            }),
            TestbedCommand::Set(a) => Command::Set(SetOptions {
                change: a.change()?,
                name: a.name,
            }),
            TestbedCommand::Status(a) => Command::Status(StatusOptions {
                name: a.name,
                json: a.json,
            }),
            TestbedCommand::Exec(a) => Command::Exec(ExecOptions {
                name: a.name,
                role: a.role,
                command: a.command,
            }),
            TestbedCommand::Hold(a) => Command::Hold(HoldOptions {
                topology: a.topology,
                name: a.name,
                no_events: a.no_events,
            }),
        };
        Ok((self.state_dir, command))
    }
}

/// Parses `P_GB,P_BG[,LOSS_GOOD,LOSS_BAD]`.
pub fn parse_burst_loss(text: &str) -> Result<LossModel, SetError> {
    let bad = |message: String| SetError::Value {
        flag: "--burst-loss".into(),
        message,
    };
    let mut v = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        v.push(
            part.parse::<f64>()
                .map_err(|_| bad(format!("{part:?} is not a number")))?,
        );
    }
    let (gb, bg, lg, lb) = match v[..] {
        [gb, bg] => (gb, bg, 0.0, 1.0),
        [gb, bg, lg, lb] => (gb, bg, lg, lb),
        _ => {
            return Err(bad(format!(
                "{text:?}: give 2 or 4 comma-separated probabilities \
                 (P_GB,P_BG or P_GB,P_BG,LOSS_GOOD,LOSS_BAD)"
            )));
        }
    };
    Ok(LossModel::GilbertElliott {
        p_good_to_bad: gb,
        p_bad_to_good: bg,
        loss_in_good: lg,
        loss_in_bad: lb,
    })
}

impl SetArgs {
    /// The change these options ask for, with values checked (the path is checked against
    /// the test bed later, see [`Change::validate`]).
    pub fn change(&self) -> Result<Change, SetError> {
        let rate = match (self.unshaped, self.rate) {
            (true, _) => Some(Rate::Unshaped),
            (false, Some(r)) => Some(Rate::Mbit(r)),
            (false, None) => None,
        };
        let queue = match (self.queue_ms, self.queue_bytes) {
            (Some(ms), _) => Some(Queue::Ms(ms)),
            (None, Some(b)) => Some(Queue::Bytes(b)),
            (None, None) => None,
        };
        let loss = match (&self.burst_loss, self.loss) {
            (Some(text), _) => Some(parse_burst_loss(text)?),
            // "--loss 0" means no loss at all (no draws), not a 0 % Bernoulli model.
            (None, Some(0.0)) => Some(LossModel::None),
            (None, Some(p)) => Some(LossModel::Bernoulli { p }),
            (None, None) => None,
        };
        let change = Change {
            path: self.path,
            rate,
            queue,
            delay_ms: self.delay,
            loss,
            dirs: self.dir,
            blackhole: self.blackhole.map(|b| b == OnOff::On),
            link_up: self.link.map(|l| l == UpDown::Up),
        };
        change.validate(usize::MAX)?;
        Ok(change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: TestbedArgs,
    }

    fn parse(line: &str) -> Result<TestbedCommand, String> {
        let argv = std::iter::once("plait").chain(line.split_whitespace());
        Cli::try_parse_from(argv)
            .map(|c| c.args.command)
            .map_err(|e| e.to_string())
    }

    fn set(line: &str) -> Result<Change, String> {
        match parse(&format!("set {line}"))? {
            TestbedCommand::Set(a) => a.change().map_err(|e| e.to_string()),
            other => Err(format!("parsed as {other:?}")),
        }
    }

    #[test]
    fn set_options_become_a_change() {
        let c = set("tb 1 --rate 5 --queue-ms 50 --delay 30 --dir up --loss 0.01").unwrap();
        assert_eq!(c.path, 1);
        assert_eq!(c.rate, Some(Rate::Mbit(5.0)));
        assert_eq!(c.queue, Some(Queue::Ms(50.0)));
        assert_eq!(c.delay_ms, Some(30.0));
        assert_eq!(c.dirs, Dirs::Up);
        assert_eq!(c.loss, Some(LossModel::Bernoulli { p: 0.01 }));
        let c = set("tb 0 --unshaped --blackhole on --link down --loss 0").unwrap();
        assert_eq!(c.rate, Some(Rate::Unshaped));
        assert_eq!((c.blackhole, c.link_up), (Some(true), Some(false)));
        assert_eq!(c.loss, Some(LossModel::None));
        let c = set("tb 0 --burst-loss 0.01,0.25").unwrap();
        assert_eq!(
            c.loss,
            Some(LossModel::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.25,
                loss_in_good: 0.0,
                loss_in_bad: 1.0
            })
        );
        let c = set("tb 0 --burst-loss 0.01,0.25,0.001,0.5 --dir down").unwrap();
        assert!(
            matches!(c.loss, Some(LossModel::GilbertElliott { loss_in_bad, .. }) if loss_in_bad == 0.5)
        );
    }

    #[test]
    fn bad_set_options_are_refused_with_the_option_named() {
        for (line, want) in [
            ("tb 0", "nothing to set"),
            ("tb 0 --rate -5", "--rate: -5 Mbit/s must be above 0"),
            ("tb 0 --rate 0", "--rate"),
            ("tb 0 --rate fast", "invalid value 'fast'"),
            ("tb 0 --rate 5 --unshaped", "cannot be used with"),
            (
                "tb 0 --queue-ms 5 --queue-bytes 9000",
                "cannot be used with",
            ),
            ("tb 0 --queue-bytes 10", "--queue-bytes: 10 is below"),
            ("tb 0 --delay -1", "--delay"),
            ("tb 0 --delay 1e12", "--delay"),
            (
                "tb 0 --loss 1",
                "--loss: 1 must be a probability from 0 to below 1",
            ),
            ("tb 0 --loss -0.5", "--loss"),
            (
                "tb 0 --loss 0.1 --burst-loss 0.1,0.2",
                "cannot be used with",
            ),
            ("tb 0 --burst-loss 0.1", "give 2 or 4"),
            ("tb 0 --burst-loss 0.1,0.2,0.3", "give 2 or 4"),
            ("tb 0 --burst-loss 0.1,x", "\"x\" is not a number"),
            ("tb 0 --burst-loss 0.1,1.5", "P_BG = 1.5"),
            ("tb 0 --blackhole maybe", "invalid value 'maybe'"),
            ("tb 0 --link sideways", "invalid value 'sideways'"),
            ("tb 0 --dir up --rate 5", "--dir only applies"),
            ("tb 0 --dir left --delay 5", "invalid value 'left'"),
            ("tb -1 --delay 5", "invalid value '-1' for '<PATH>'"),
            ("tb x --delay 5", "invalid value 'x'"),
        ] {
            let e = set(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn other_subcommands_parse() {
        assert!(
            matches!(parse("up topologies/T1.toml"), Ok(TestbedCommand::Up(a)) if a.name == "tb" && !a.no_events)
        );
        assert!(
            matches!(parse("down --all"), Ok(TestbedCommand::Down(a)) if a.all && a.name.is_none())
        );
        assert!(parse("down x --all").is_err());
        assert!(matches!(parse("status --json"), Ok(TestbedCommand::Status(a)) if a.json));
        match parse("exec tb cli0 -- ping -c 1 10.4.0.2") {
            Ok(TestbedCommand::Exec(a)) => {
                assert_eq!(a.role, "cli0");
                assert_eq!(a.command, ["ping", "-c", "1", "10.4.0.2"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse("exec tb cli0").is_err(), "a command is required");
        let with_dir = Cli::try_parse_from(["plait", "status", "--state-dir", "/tmp/x"]).unwrap();
        assert_eq!(with_dir.args.state_dir, PathBuf::from("/tmp/x"));
    }
}
