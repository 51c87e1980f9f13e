//! The benchmark's results and their Markdown: per-measurement tables, the target line and
//! the "what limits it" paragraph, all computed from the measured numbers, and the document
//! that holds them with how they were measured ([`document`]).

use std::fmt::Write as _;

use super::cpu::Cpu;
use super::{DATAGRAM, Kind, Sample, TunnelBenchOptions};

/// Median, minimum and maximum of the finite values (`bench-doc`'s [`Spread`]).
///
/// [`Spread`]: crate::bench::doc::Spread
pub(super) fn summary(xs: &[f64]) -> Option<(f64, f64, f64)> {
    crate::bench::doc::Spread::of(xs.iter().copied()).map(|s| (s.median, s.min, s.max))
}

/// `median (min–max)` with `decimals` decimals; just the value if there is one sample.
pub(super) fn cell(xs: &[f64], decimals: usize) -> String {
    match summary(xs) {
        None => "–".to_owned(),
        Some((m, lo, hi)) if xs.len() == 1 || lo == hi => format!("{m:.decimals$}"),
        Some((m, lo, hi)) => format!("{m:.decimals$} ({lo:.decimals$}–{hi:.decimals$})"),
    }
}

/// All results of a run: per kind, one sample per repetition.
#[derive(Debug)]
pub(super) struct Results {
    pub(super) rows: Vec<(Kind, Vec<Sample>)>,
    /// The machine's cores.
    pub(super) cores: f64,
}

impl Results {
    pub(super) fn samples(&self, kind: Kind) -> &[Sample] {
        self.rows
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[], |(_, s)| s.as_slice())
    }

    /// `kind ÷ base`, repetition by repetition.
    pub(super) fn ratios(&self, kind: Kind, base: Kind) -> Vec<f64> {
        self.samples(kind)
            .iter()
            .zip(self.samples(base))
            .map(|(a, b)| a.mbit / b.mbit)
            .collect()
    }

    pub(super) fn cpu(&self, kind: Kind, f: impl Fn(&Cpu) -> Option<f64>) -> Vec<f64> {
        self.samples(kind)
            .iter()
            .filter_map(|s| f(&s.cpu))
            .collect()
    }

    pub(super) fn median_cpu(&self, kind: Kind, f: impl Fn(&Cpu) -> Option<f64>) -> f64 {
        summary(&self.cpu(kind, f)).map_or(f64::NAN, |s| s.0)
    }

    /// The summary table (Markdown).
    pub(super) fn table(&self) -> String {
        let n = self.cores;
        let mut t = format!(
            "| measurement | goodput, Mbit/s | ÷ raw UDP | ÷ plain TCP | plait client, % of a core \
             | plait server, % of a core | generators (this process), % of a core \
             | machine busy, % of {n} cores | stolen, % of {n} cores \
             | machine cores busy per Gbit/s |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for (kind, samples) in &self.rows {
            let mbit: Vec<f64> = samples.iter().map(|s| s.mbit).collect();
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                kind.label(),
                cell(&mbit, 0),
                cell(&self.ratios(*kind, Kind::RawUdp), 2),
                cell(&self.ratios(*kind, Kind::PlainTcp), 2),
                cell(&self.cpu(*kind, |c| c.client), 0),
                cell(&self.cpu(*kind, |c| c.server), 0),
                cell(&self.cpu(*kind, |c| Some(c.bench)), 0),
                cell(&self.cpu(*kind, |c| Some(c.machine)), 0),
                cell(&self.cpu(*kind, |c| Some(c.steal)), 0),
                cell(&self.cost(*kind), 2),
            );
        }
        t
    }

    /// Every repetition's goodput and notes (Markdown).
    pub(super) fn details(&self) -> String {
        let reps = self.rows.first().map_or(0, |(_, s)| s.len());
        let mut t = String::from("| measurement |");
        for r in 1..=reps {
            let _ = write!(t, " run {r}, Mbit/s |");
        }
        t.push_str("\n| --- |");
        for _ in 0..reps {
            t.push_str(" ---: |");
        }
        t.push('\n');
        for (kind, samples) in &self.rows {
            let _ = write!(t, "| {} |", kind.label());
            for s in samples {
                let _ = write!(t, " {:.0} |", s.mbit);
            }
            t.push('\n');
        }
        t.push('\n');
        for (kind, samples) in &self.rows {
            for (r, s) in samples.iter().enumerate() {
                let _ = writeln!(t, "- {}, run {}: {}", kind.label(), r + 1, s.note);
            }
        }
        t
    }

    /// Machine cores busy per Gbit/s of goodput, per run.
    pub(super) fn cost(&self, kind: Kind) -> Vec<f64> {
        self.samples(kind)
            .iter()
            .map(|s| s.cpu.machine / 100.0 * self.cores / (s.mbit / 1000.0))
            .collect()
    }

    /// Median over the runs of a value of `kind`'s samples.
    pub(super) fn median(&self, kind: Kind, f: impl Fn(&Sample) -> f64) -> f64 {
        let v: Vec<f64> = self.samples(kind).iter().map(f).collect();
        summary(&v).map_or(f64::NAN, |s| s.0)
    }

    /// The target line and the "what limits it" paragraph, from the measured numbers.
    pub(super) fn analysis(&self, tunnels: &[u8]) -> String {
        let mut t = String::new();
        let ratio = |n: u8| summary(&self.ratios(Kind::Tunnel(n), Kind::RawUdp));
        let verdicts: Vec<String> = tunnels
            .iter()
            .filter_map(|&n| {
                ratio(n).map(|(m, lo, hi)| {
                    let met = if m >= 0.5 { "met" } else { "not met" };
                    format!(
                        "{} {m:.2} (runs {lo:.2}–{hi:.2}): {met}",
                        Kind::Tunnel(n).label()
                    )
                })
            })
            .collect();
        let _ = writeln!(
            t,
            "The target is tunnel goodput of at least 50 % of raw UDP throughput, with \
             encryption on. Median tunnel ÷ raw UDP in this run: {}. (Reported, not enforced: \
             the command never fails on speed.)\n",
            verdicts.join("; ")
        );

        let Some(&first) = tunnels.first() else {
            return t;
        };
        let k = Kind::Tunnel(first);
        let c = self.median_cpu(k, |c| c.client);
        let s = self.median_cpu(k, |c| c.server);
        let b = self.median_cpu(k, |c| Some(c.bench));
        let m = self.median_cpu(k, |c| Some(c.machine));
        let st = self.median_cpu(k, |c| Some(c.steal));
        let _ = write!(
            t,
            "### What limits it\n\n\
             During the {} transfers (medians over the runs) the plait client used {c:.0} % \
             of a core and the server {s:.0} %; each daemon runs one event-loop thread, so \
             100 % is its ceiling. This process, which runs the TCP sender and receiver, used \
             {b:.0} % of a core, and the machine as a whole was {m:.0} % busy (of its 2 \
             cores, kernel forwarding through the namespaces included) with {st:.0} % stolen \
             by the hypervisor. ",
            k.label()
        );
        let r = self.median(k, |s| s.net.retrans_pct());
        let r0 = self.median(Kind::PlainTcp, |s| s.net.retrans_pct());
        let tc = self.median(k, |s| s.net.tun_drops[0] as f64);
        let ts = self.median(k, |s| s.net.tun_drops[1] as f64);
        let ub = self.median(k, |s| (s.net.udp_rcvbuf + s.net.udp_sndbuf) as f64);
        let _ = write!(
            t,
            "The inner TCP retransmitted {r:.2} % of its segments (plain TCP on the bare \
             path: {r0:.2} %). Per transfer the client's TUN queue dropped {tc:.0} packets, \
             the server's {ts:.0}, and the daemons' UDP socket buffers {ub:.0} datagrams. "
        );
        let (busier, top) = if c >= s { ("client", c) } else { ("server", s) };
        if top >= 90.0 {
            let _ = write!(
                t,
                "The {busier} is at its thread's ceiling: the tunnel is limited by per-packet \
                 CPU work in that one thread (TUN reads and writes, sealing or opening every \
                 packet with ChaCha20-Poly1305, the engine's bookkeeping, the UDP system \
                 calls). More speed needs less work per packet or a second thread (the \
                 sharding sketched in crates/plait-tunnel/src/daemon/mod.rs). "
            );
        } else if m + st >= 90.0 {
            let n = self.cores;
            let irq = self.median_cpu(k, |c| Some(c.irq)) * n;
            let rest = (m * n - c - s - b - irq).max(0.0);
            let cost = self.median(k, |x| x.cpu.machine / 100.0 * n / (x.mbit / 1000.0));
            let tcp = self.median(Kind::PlainTcp, |x| {
                x.cpu.machine / 100.0 * n / (x.mbit / 1000.0)
            });
            let _ = write!(
                t,
                "Neither daemon fills its thread, but the machine's cores were busy or stolen \
                 {:.0} % of the time: the two daemons ({:.0} % of a core together), the sender \
                 and receiver ({b:.0} %), interrupt and softirq work ({irq:.0} % of a core: \
                 packet forwarding through the namespaces, veth, TUN and UDP receive) and the \
                 rest (about {rest:.0} % of a core: kernel work of other threads and anything \
                 else running on the machine) share {n} cores, so the machine as a whole is \
                 the limit. Per Gbit/s of goodput the tunnel keeps {cost:.2} cores busy, plain TCP \
                 {tcp:.2}: every inner packet makes two extra trips through the kernel (into \
                 the client's TUN device and out of the server's), is copied to and from a \
                 daemon at each end, and is encrypted and decrypted. ",
                m + st,
                c + s
            );
            if r >= 0.5 {
                let _ = write!(
                    t,
                    "When a daemon waits for a core its TUN queue overflows, and each drop \
                     costs the inner TCP a retransmission and a smaller window. "
                );
            }
        } else if tc + ts > 0.0 && r >= 0.1 {
            let _ = write!(
                t,
                "So neither daemon nor the machine is short of CPU on average, yet packets \
                 are lost at a TUN queue: the inner TCP's bursts arrive faster than the daemon \
                 drains the queue whenever it is not running, and each drop costs the inner \
                 TCP a retransmission and a smaller window. The limit is how soon and how \
                 often the daemon gets to read its TUN device, not the work per packet. "
            );
        } else {
            let _ = write!(
                t,
                "Neither daemon fills its thread and the inner TCP lost too little to be held \
                 back by loss, which points to time the daemons spend waiting to run again \
                 after each wait (wake-up latency), as REFERENCES.md found for boringtun and \
                 glorytun on these machines. "
            );
        }
        if top < 90.0 && m + st < 90.0 {
            let _ = write!(
                t,
                "The machine had idle time ({:.0} % neither busy nor stolen), so the daemons \
                 did not lack cores on average. ",
                100.0 - m - st
            );
        }
        let cost = self.median(k, |x| {
            x.cpu.machine / 100.0 * self.cores / (x.mbit / 1000.0)
        });
        let target = self.median(Kind::RawUdp, |x| x.mbit) * 0.5;
        let need = cost * target / 1000.0;
        if need.is_finite() {
            let n = self.cores;
            let verdict = if need > n {
                format!(
                    "more than the machine's {n}: reaching the target needs less CPU per \
                     packet (in the daemons and in the kernel paths they use), whatever else \
                     limits the flow"
                )
            } else {
                format!("within the machine's {n}, so the CPU is there in principle")
            };
            let _ = write!(
                t,
                "At the measured cost of {cost:.2} busy cores per Gbit/s, half of raw UDP \
                 ({target:.0} Mbit/s) would keep {need:.1} cores busy: {verdict}. "
            );
        }
        if st >= 10.0 {
            let _ = write!(
                t,
                "The hypervisor stole {st:.0} % of the cores during these transfers: other \
                 load on the host made this run slower than a quiet one. "
            );
        }
        if let (Some(one), Some(&more)) = (
            summary(&self.mbit(Kind::Tunnel(1))),
            tunnels.iter().find(|&&n| n > 1),
        ) {
            let kk = Kind::Tunnel(more);
            if let Some(two) = summary(&self.mbit(kk)) {
                let share = self.median(kk, |s| s.shares.first().copied().unwrap_or(f64::NAN));
                let paired = cell(&self.ratios(kk, Kind::Tunnel(1)), 2);
                let _ = write!(
                    t,
                    "Over {more} paths the tunnel carried {:.0} Mbit/s against {:.0} over one \
                     ({more} paths ÷ 1 path within each run: {paired}), with {share:.0} % of \
                     the client's datagrams on path 0. The unshaped paths offer far more \
                     capacity than the tunnel fills, so a difference between the two comes \
                     from CPU and scheduling, not from link capacity. ",
                    two.0, one.0
                );
            }
        }
        let _ = writeln!(
            t,
            "\n\nFor orientation only (stored numbers from other runs, REFERENCES.md, not \
             comparable side by side): on one unshaped veth path of these machines boringtun \
             (userspace WireGuard) carried about 300 Mbit/s and glorytun 280–480 Mbit/s, \
             against raw UDP of about 1500–1660 Mbit/s."
        );
        t
    }

    pub(super) fn mbit(&self, kind: Kind) -> Vec<f64> {
        self.samples(kind).iter().map(|s| s.mbit).collect()
    }
}

/// `YYYY-MM-DD HH:MM UTC` of now.
pub(super) fn utc_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M UTC")
        .to_string()
}

/// A one-line description of the machine: CPU model, cores, kernel, load at the start
/// (`/proc/cpuinfo` and `/proc/loadavg` through procfs).
pub(super) fn machine_note() -> String {
    use procfs::Current as _;
    let model = procfs::CpuInfo::current()
        .ok()
        .and_then(|c| c.model_name(0).map(str::to_owned))
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let load = procfs::LoadAverage::current()
        .map(|l| format!("{:.2} {:.2} {:.2}", l.one, l.five, l.fifteen))
        .unwrap_or_default();
    format!("{model}, {cores} cores, Linux {kernel}; load average at the start {load}")
}

/// The command that reproduces the run.
pub(super) fn command_line(args: &TunnelBenchOptions) -> String {
    let paths: Vec<String> = args.paths.iter().map(u8::to_string).collect();
    format!(
        "plait tunnel-bench --seconds {} --repeat {} --paths {} --cc {} --out {}",
        args.seconds,
        args.repeat,
        paths.join(","),
        args.cc,
        args.out.display()
    )
}

/// Facts about a run that the document states besides its results.
#[derive(Debug)]
pub(super) struct RunFacts {
    /// When it started ([`utc_now`]).
    pub(super) started: String,
    /// [`machine_note`].
    pub(super) machine: String,
    /// Paths of the topology (the most any tunnel used).
    pub(super) max_paths: u8,
}

/// The Markdown document of a run: how it was measured, the summary `table` and `analysis`,
/// every run's numbers, and the `warnings`.
pub(super) fn document(
    args: &TunnelBenchOptions,
    facts: &RunFacts,
    results: &Results,
    table: &str,
    analysis: &str,
    warnings: &[String],
) -> String {
    let mut doc = String::new();
    let RunFacts {
        started,
        machine,
        max_paths,
    } = facts;
    let _ = write!(
        doc,
        "# Tunnel benchmark\n\n\
         Generated by `{cmd}` (as root) on {started}; do not edit, re-run the command.\n\n\
         Machine: {machine}. Numbers on a shared VM move 10-25 % between runs: compare within a \
         run.\n\n\
         ## Setup\n\n\
         One `plait-testbed` topology with {max_paths} unshaped path(s) (veths through one \
         router namespace per path, TSO/GSO/GRO off on every veth, no tbf). Each of {reps} \
         runs measures, in order, for {secs} s each:\n\n\
         - **raw UDP**: {DATAGRAM}-byte datagrams sent as fast as the kernel takes them from \
           the client namespace to the server namespace over path 0; goodput is the \
           receiver's rate between its first and last datagram.\n\
         - **plain TCP**: one kernel TCP flow ({cc}, set on the sender's socket) on the same route.\n\
         - **tunnel**: `plait server` and `plait client` started afresh (scheduler `plait`, \
           reordering `bmp`, ChaCha20-Poly1305 encryption, which cannot be turned off), a 1 s \
           warm-up flow, then one TCP flow ({cc}) from the lan host behind the client to \
           the remote host behind the server, through the tunnel over the first N paths.\n\n\
         TCP goodput is bytes received over the time from the accept to the sender's end of \
         stream. CPU is sampled over each measured transfer: the daemons from \
         `/proc/PID/stat` and this process (sender, receiver and UDP generator threads) from \
         `/proc/self/stat`, as % of one core; the machine from `/proc/stat`, as % of all \
         cores. Around each transfer it reads the kernel counters that show where packets \
         were lost: TCP retransmissions of the sender's namespace and UDP buffer drops \
         (`/proc/net/snmp`), and the TUN devices' `tx_dropped`. Ratios are taken within \
         each run, then summarised. Cells are median (min–max) over the runs.\n\n\
         ## Results\n\n\
         {table}\n\
         {analysis}\n\
         ## Each run\n\n\
         {details}",
        cmd = command_line(args),
        cc = args.cc,
        reps = args.repeat,
        secs = args.seconds,
        details = results.details(),
    );
    if !warnings.is_empty() {
        doc.push_str("\n## Warnings\n\n");
        for w in warnings {
            let _ = writeln!(doc, "- {}", w.replace('\n', " "));
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_median_min_max() {
        assert_eq!(summary(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(summary(&[]), None);
        assert_eq!(cell(&[1.234], 1), "1.2");
        assert_eq!(cell(&[1.0, 3.0, 2.0], 0), "2 (1–3)");
    }

    #[test]
    fn the_date_reads_as_utc() {
        let s = utc_now();
        assert_eq!(s.len(), "2026-11-24 07:50 UTC".len(), "{s}");
        assert!(s.ends_with(" UTC") && s.as_bytes()[4] == b'-', "{s}");
    }

    #[test]
    fn the_machine_is_described() {
        let m = machine_note();
        assert!(
            m.contains(" cores, Linux ") && m.contains("load average"),
            "{m}"
        );
    }
}
