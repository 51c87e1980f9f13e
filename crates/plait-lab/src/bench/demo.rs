//! `plait demo`: the README's first command. As root, it builds two emulated links inside
//! this machine (T1-like: 20 Mbit/s at 20 ms RTT and 10 Mbit/s at 100 ms RTT), runs one TCP
//! download over the best link alone, one through plait over both carrying the connection's
//! packets (packet mode) and one through plait over both carrying only its bytes (stream
//! mode), prints the comparison and how plait split the traffic in words a newcomer
//! understands, and removes everything.
//!
//! Every TCP sender uses cubic (the usual kernel default), whatever this machine's default.
//!
//! Invariants: it touches no real interface (everything lives in its own network
//! namespaces, prefix `pdemo`); it takes about 40 s with the default 10 s transfers (under a
//! minute); it cleans up on success, error and Ctrl-C alike (the guards of
//! [`super::run`]); it reports what it measured, whatever the numbers are.

use anyhow::{Context, Result};

use super::mode::{Mode, RunOptions};
use super::report::{self, ModeResult, TopologyResult};
use super::run;
use plait_topology::TopologyFile;

/// Namespace prefix of the demo.
const PREFIX: &str = "pdemo";

/// `plait demo`.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Length of each of the three downloads, seconds (3 to 30).
    pub seconds: f64,
    /// plait's scheduler.
    pub scheduler: String,
}

/// The demo's two links.
fn topology(seconds: f64) -> Result<TopologyFile> {
    let text = format!(
        "name = \"demo\"\ndescription = \"two links like a DSL line and a mobile link\"\n\
         duration_s = {seconds}\n\n\
         [[path]]\nrate_mbit = 20\nrtt_ms = 20\nqueue_ms = 100\n\n\
         [[path]]\nrate_mbit = 10\nrtt_ms = 100\nqueue_ms = 100\n"
    );
    Ok(TopologyFile::parse(&text, "the demo topology")?)
}

fn bar(fraction: f64, width: usize) -> String {
    let full = ((fraction.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(full), "░".repeat(width - full))
}

/// Runs the demo.
pub fn demo(args: DemoOptions) -> Result<()> {
    if !(3.0..=30.0).contains(&args.seconds) {
        anyhow::bail!("--seconds must be from 3 to 30 (got {})", args.seconds);
    }
    super::check_scheduler(&args.scheduler)?;
    super::need_root("demo")?;
    let file = topology(args.seconds)?;
    let cancel = super::interrupt_flag()?;
    println!(
        "plait demo: one download over the best link alone, then two through plait over two links."
    );
    println!(
        "Everything runs inside this machine (network namespaces); no real network is touched.\n"
    );
    for (i, p) in file.paths.iter().enumerate() {
        println!(
            "  link {i}: {:>2} Mbit/s, {:>3} ms round trip",
            p.rate_mbit,
            p.rtt_ms()
        );
    }
    println!("  both links together: {} Mbit/s\n", file.total_mbit());
    println!(
        "Measuring for {:.0} s each (about {:.0} s in all; Ctrl-C stops and cleans up)…",
        args.seconds,
        3.0 * args.seconds + 8.0
    );
    let opts = RunOptions {
        modes: vec![Mode::Single, Mode::Plait, Mode::PlaitStream],
        scheduler: args.scheduler.clone(),
        prefix: PREFIX.into(),
        seed: 1,
        program: std::env::current_exe().context("finding the plait binary")?,
        cancel,
        progress: false,
        cc: "cubic".into(),
        engine: Vec::new(),
        cbr: None,
    };
    let started = std::time::Instant::now();
    let r = run::run_topology(&file, &opts)?;
    print_result(&r);
    println!(
        "\nDone in {:.0} s. Removed: the namespaces, link emulators, firewall rules and plait processes.",
        started.elapsed().as_secs_f64()
    );
    println!(
        "Next: `sudo plait bench topologies/T1.toml` adds kernel MPTCP to the comparison; \
         docs/benchmarks.md has all results."
    );
    Ok(())
}

fn print_result(r: &TopologyResult) {
    let single = r.mode("single");
    let plait = r.mode("plait");
    let stream = r.mode("plait-stream");
    println!();
    let line = |name: &str, m: Option<&ModeResult>| match m {
        Some(m) if m.error.is_none() => println!(
            "  {name:<30} {:>5.1} Mbit/s  {}  {:>3.0} % of {} Mbit/s",
            m.goodput_mbit,
            bar(m.of_sum, 24),
            m.of_sum * 100.0,
            r.total_mbit
        ),
        Some(m) => println!(
            "  {name:<30} failed: {}",
            m.error
                .as_deref()
                .and_then(|e| e.lines().next())
                .unwrap_or("")
        ),
        None => println!("  {name:<30} not run"),
    };
    line(&format!("best link alone (link {})", r.best_path), single);
    line("plait, packet mode", plait);
    line("plait, stream mode", stream);
    println!();
    println!(
        "  Packet mode: plait carries the download's own TCP packets over both links.\n  \
         Stream mode: plait's client takes the TCP connection over, carries only its bytes\n  \
         (its own congestion control on each link) and the server opens it again."
    );
    fn ok(m: Option<&ModeResult>) -> Option<&ModeResult> {
        m.filter(|m| m.error.is_none())
    }
    let Some(s) = ok(single) else {
        return;
    };
    println!();
    for (name, m) in [("packet mode", ok(plait)), ("stream mode", ok(stream))] {
        let Some(p) = m else { continue };
        if s.goodput_mbit > 0.0 {
            let x = p.goodput_mbit / s.goodput_mbit;
            if x >= 1.0 {
                println!(
                    "  plait ({name}) was {x:.2}× as fast as the best link alone ({:+.1} Mbit/s).",
                    p.goodput_mbit - s.goodput_mbit
                );
            } else {
                println!(
                    "  plait ({name}) was slower than the best link alone this time ({x:.2}×): see docs/benchmarks.md."
                );
            }
        }
        let split: Vec<String> = p
            .shares
            .iter()
            .enumerate()
            .map(|(i, x)| format!("{:.0} % over link {i}", x * 100.0))
            .collect();
        let rates: Vec<String> = r.paths.iter().map(|x| format!("{}", x.rate_mbit)).collect();
        println!(
            "    It sent {} (the links' speeds are {} Mbit/s).",
            split.join(" and "),
            rates.join(" : ")
        );
    }
    let ran: Vec<&ModeResult> = [single, plait, stream].into_iter().flatten().collect();
    let all_intact = ran.iter().all(|m| m.error.is_some() || m.intact);
    println!(
        "  One TCP connection took both links and its bytes were put back in order:\n  {}",
        if all_intact {
            "every byte arrived intact (SHA-256 checked at both ends)."
        } else {
            "BUT THE BYTES DID NOT MATCH — please report this."
        }
    );
    let rtt = |m: Option<&ModeResult>| {
        ok(m)
            .and_then(|m| m.rtt_p50_ms)
            .map_or("-".to_owned(), |x| format!("{x:.0} ms"))
    };
    println!(
        "  Round trip on link 0 during the download: {} alone, {} in packet mode, {} in stream mode (idle: {}).",
        rtt(single),
        rtt(plait),
        rtt(stream),
        r.idle_rtt_ms.map_or("-".into(), |x| format!("{x:.0} ms"))
    );
    // Shares of a 1514-byte frame, from the wire format's constants (docs/protocol.md#overhead).
    let frame = report::FRAME;
    let tunnel = report::TCP_PAYLOAD - (report::DEFAULT_TUN_MTU as f64 - report::INNER_HEADERS);
    println!(
        "  (A download cannot reach 100 %: in packet mode headers take about {:.0} % of each packet\n   \
         and plait's encryption and framing about {:.1} % more; stream mode sends no TCP headers\n   \
         over the links, so only plait's own {:.1} % remain.)",
        100.0 * (1.0 - report::TCP_PAYLOAD / frame),
        100.0 * tunnel / frame,
        100.0 * (1.0 - report::STREAM_PAYLOAD / frame)
    );
}
