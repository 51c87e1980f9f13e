//! `plait sim`, `plait reproduce` and `plait schedulers`: the simulator's commands (the
//! work is plait-sim's; this reads files, runs and writes what it returns).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use plait_sim::{report, reproduce, suite, sweep};

/// `plait sim SCENARIO`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// The scenario file.
    pub scenario: PathBuf,
    /// Directory for the JSON, CSV and SVG files.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Run these seeds instead of the scenario's.
    #[arg(long, value_delimiter = ',')]
    pub seeds: Option<Vec<u64>>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `plait reproduce`.
#[derive(Debug, clap::Args)]
pub struct ReproduceArgs {
    /// Scenario files to include.
    #[arg(long, num_args = 1.., default_values = ["scenarios/petbmp-table1.toml", "scenarios/petbmp-cross-traffic.toml", "scenarios/mms-fig8.toml", "scenarios/mms-fig4.toml", "scenarios/mhip-friendliness.toml", "scenarios/mhip-friendliness-long.toml", "scenarios/shared-bottleneck.toml", "scenarios/shared-bottleneck-one-path.toml", "scenarios/etom-fig3.toml", "scenarios/etom-fig4.toml", "scenarios/etom-fig7.toml", "scenarios/hmtp-fig6.toml", "scenarios/hmtp-fig6b.toml", "scenarios/hmtp-fig8.toml", "scenarios/hmtp-fig10.toml", "scenarios/fec-cbr.toml"])]
    pub scenarios: Vec<PathBuf>,
    /// The Markdown file to write.
    #[arg(long, default_value = "docs/reproduction.md")]
    pub out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `plait schedulers`.
#[derive(Debug, clap::Args)]
pub struct SchedulersArgs {
    /// Directory of scenario files.
    #[arg(long, default_value = "scenarios/suite")]
    pub dir: PathBuf,
    /// The Markdown file to write.
    #[arg(long, default_value = "docs/schedulers.md")]
    pub out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

fn load(path: &Path, seeds: Option<&Vec<u64>>) -> Result<Vec<sweep::Variant>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut variants =
        sweep::load_variants(&text).with_context(|| format!("in {}", path.display()))?;
    if let Some(seeds) = seeds {
        if seeds.is_empty() {
            bail!("--seeds needs at least one seed");
        }
        for v in &mut variants {
            v.scenario.seeds = seeds.clone();
        }
    }
    Ok(variants)
}

/// Runs one scenario file: prints its table, writes JSON, CSV and SVG.
pub fn sim(args: SimArgs) -> Result<()> {
    let variants = load(&args.scenario, args.seeds.as_ref())?;
    let started = Instant::now();
    let result = sweep::run_variants(&variants, !args.quiet);
    let wall = started.elapsed();
    println!(
        "{}: {}\n",
        variants[0].scenario.name,
        variants[0].scenario.description.trim()
    );
    print!("{}", report::tables(&variants[0].scenario, &result));
    let stem = args
        .scenario
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("scenario");
    let files = report::write_files(&result, &args.out, stem)
        .with_context(|| format!("writing into {}", args.out.display()))?;
    let events: u64 = result.runs.iter().map(|(_, r)| r.events).sum();
    println!(
        "\n{} runs, {} events in {:.2} s wall ({:.1} M events/s over all cores)",
        result.runs.len(),
        events,
        wall.as_secs_f64(),
        events as f64 / wall.as_secs_f64().max(1e-9) / 1e6
    );
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

/// Runs every scheduler on every scenario of a directory and writes the comparison.
pub fn schedulers(args: SchedulersArgs) -> Result<()> {
    let entries = std::fs::read_dir(&args.dir)
        .with_context(|| format!("cannot read {}", args.dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!("no .toml scenarios in {}", args.dir.display());
    }
    let mut files = Vec::new();
    for p in paths {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
        files.push((p, text));
    }
    let kinds = plait_proto::sched::SchedulerKind::ALL;
    let variants = suite::variants(&files, &kinds).context("in the suite scenarios")?;
    let result = suite::run(&variants, !args.quiet);
    std::fs::write(&args.out, suite::markdown(&variants, &result))
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("wrote {}", args.out.display());
    Ok(())
}

/// Re-runs the seeds' published experiments and writes the comparison.
pub fn reproduce(args: ReproduceArgs) -> Result<()> {
    let mut sections = Vec::new();
    for path in &args.scenarios {
        let variants = load(path, None)?;
        let result = sweep::run_variants(&variants, !args.quiet);
        sections.push((path.clone(), variants, result));
    }
    let doc = reproduce::markdown(&sections);
    std::fs::write(&args.out, doc)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("wrote {}", args.out.display());
    Ok(())
}
