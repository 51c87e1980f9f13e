//! CPU use over a transfer: the machine's busy, stolen and interrupt time (`/proc/stat`),
//! each plait daemon's and this process's time (`/proc/PID/stat`), all through procfs, as
//! shares of one core (processes) or of all cores (the machine).

use std::time::Instant;

use anyhow::{Context, Result, bail};

/// CPU use over one transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Cpu {
    /// The plait client, % of one core.
    pub(super) client: Option<f64>,
    /// The plait server, % of one core.
    pub(super) server: Option<f64>,
    /// This process (traffic generators and sinks), % of one core.
    pub(super) bench: f64,
    /// The machine, busy (user, system, interrupts), % of all cores.
    pub(super) machine: f64,
    /// The machine, stolen by the hypervisor, % of all cores.
    pub(super) steal: f64,
    /// The machine, in interrupts and softirqs (part of `machine`), % of all cores.
    pub(super) irq: f64,
}

/// Busy, stolen and total ticks of the whole machine (the `cpu` line of /proc/stat).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct MachineTicks {
    pub(super) busy: u64,
    pub(super) steal: u64,
    /// Interrupts and softirqs (part of `busy`).
    pub(super) irq: u64,
    pub(super) total: u64,
}

impl MachineTicks {
    /// The machine's counters now (`/proc/stat`'s `cpu` line, through procfs).
    pub(super) fn now() -> Result<MachineTicks> {
        use procfs::CurrentSI;
        let t = procfs::KernelStats::current()
            .context("cannot read /proc/stat")?
            .total;
        Ok(MachineTicks::from_cpu_time(&t))
    }

    /// Busy is everything but idle, iowait and steal; guest time is already in user.
    pub(super) fn from_cpu_time(t: &procfs::CpuTime) -> MachineTicks {
        let (iowait, irq, softirq, steal) = (
            t.iowait.unwrap_or(0),
            t.irq.unwrap_or(0),
            t.softirq.unwrap_or(0),
            t.steal.unwrap_or(0),
        );
        let total = t.user + t.nice + t.system + t.idle + iowait + irq + softirq + steal;
        MachineTicks {
            busy: total - t.idle - iowait - steal,
            steal,
            irq: irq + softirq,
            total,
        }
    }
}

/// utime + stime of a process (`None`: this one), in clock ticks.
pub(super) fn process_ticks(pid: Option<u32>) -> Result<u64> {
    let process = match pid {
        None => procfs::process::Process::myself(),
        Some(p) => procfs::process::Process::new(i32::try_from(p).unwrap_or(i32::MAX)),
    };
    let stat = process
        .and_then(|p| p.stat())
        .with_context(|| format!("cannot read the CPU time of process {pid:?}"))?;
    Ok(stat.utime + stat.stime)
}

/// CPU counters at one instant.
#[derive(Clone, Debug)]
pub(super) struct CpuMark {
    pub(super) at: Instant,
    pub(super) machine: MachineTicks,
    pub(super) bench: u64,
    pub(super) daemons: Vec<u64>,
}

impl CpuMark {
    /// Reads the counters of the machine, this process and `daemons` (pids).
    pub(super) fn take(daemons: &[u32]) -> Result<CpuMark> {
        let machine = MachineTicks::now()?;
        let daemons = daemons
            .iter()
            .map(|&p| process_ticks(Some(p)))
            .collect::<Result<_>>()?;
        Ok(CpuMark {
            at: Instant::now(),
            machine,
            bench: process_ticks(None)?,
            daemons,
        })
    }

    /// CPU use from `self` to `later`: per-process shares of one core (`hz` ticks per
    /// second), machine shares of all cores.
    pub(super) fn until(&self, later: &CpuMark, hz: f64) -> (Vec<f64>, Cpu) {
        let wall = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let core = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz / wall * 100.0;
        let daemons = self
            .daemons
            .iter()
            .zip(&later.daemons)
            .map(|(&a, &b)| core(a, b))
            .collect();
        let total = later
            .machine
            .total
            .saturating_sub(self.machine.total)
            .max(1) as f64;
        let share = |a: u64, b: u64| b.saturating_sub(a) as f64 / total * 100.0;
        let cpu = Cpu {
            client: None,
            server: None,
            bench: core(self.bench, later.bench),
            machine: share(self.machine.busy, later.machine.busy),
            steal: share(self.machine.steal, later.machine.steal),
            irq: share(self.machine.irq, later.machine.irq),
        };
        (daemons, cpu)
    }
}

/// Clock ticks per second of /proc's CPU times.
pub(super) fn clock_ticks() -> Result<f64> {
    match procfs::ticks_per_second() {
        0 => bail!("cannot read CLK_TCK"),
        hz => Ok(hz as f64),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn machine_and_process_ticks_read() {
        let m = MachineTicks::now().unwrap();
        assert!(
            m.total > 0 && m.busy + m.steal <= m.total && m.irq <= m.busy,
            "{m:?}"
        );
        let me = process_ticks(None).unwrap();
        let by_pid = process_ticks(Some(std::process::id())).unwrap();
        assert!(by_pid >= me, "{me} then {by_pid}");
        assert!(clock_ticks().unwrap() > 0.0);
    }

    #[test]
    fn cpu_shares() {
        let at = Instant::now();
        let a = CpuMark {
            at,
            machine: MachineTicks {
                busy: 0,
                steal: 0,
                irq: 0,
                total: 0,
            },
            bench: 0,
            daemons: vec![0, 10],
        };
        let b = CpuMark {
            at: at + Duration::from_secs(2),
            machine: MachineTicks {
                busy: 300,
                steal: 40,
                irq: 100,
                total: 400,
            },
            bench: 50,
            daemons: vec![200, 110],
        };
        let (d, cpu) = a.until(&b, 100.0);
        assert_eq!(d, vec![100.0, 50.0]);
        assert_eq!(cpu.bench, 25.0);
        assert_eq!(cpu.machine, 75.0);
        assert_eq!(cpu.steal, 10.0);
        assert_eq!(cpu.irq, 25.0);
    }
}
