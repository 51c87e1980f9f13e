//! Reports: the results table printed by `plait sim`, JSON and CSV files, and an SVG plot
//! of throughput over time per path.
//!
//! Invariant: every file here is a function of the results only (no dates, no wall time),
//! so the same scenario and seeds give byte-identical files.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use crate::sweep::{RowSummary, Stat, SweepResult};

fn fmt_stat(s: &Stat, digits: usize) -> String {
    if s.ci95 > 0.0 {
        format!("{:.*} ±{:.*}", digits, s.mean, digits, s.ci95)
    } else {
        format!("{:.*}", digits, s.mean)
    }
}

/// The results table, one row per (variant, run), for a terminal or Markdown.
pub fn table(result: &SweepResult) -> String {
    let mut out = String::new();
    let paths = result
        .rows
        .iter()
        .map(|r| r.per_path_kbps.len())
        .max()
        .unwrap_or(0);
    let mut header = vec![
        "variant",
        "run",
        "seeds",
        "goodput kb/s",
        "thr kb/s",
        "dupACKs",
        "retx",
        "RTOs",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    header.extend((0..paths).map(|i| format!("path{i} kb/s")));
    header.extend(["reorder p50 ms".into(), "reorder p99 ms".into()]);
    // Seed HMTP Fig. 8(b)'s measure, where a row has it.
    let app_delay = result.rows.iter().any(|r| r.app_delay_mean_s.is_some());
    if app_delay {
        header.extend(["app delay s".into(), "app delay p99 s".into()]);
    }
    // A constant-rate UDP flow's measures (mode `plait-cbr`), where a row has them.
    let udp = result.rows.iter().any(|r| r.udp.is_some());
    if udp {
        header.extend([
            "residual loss %".into(),
            "repair overhead %".into(),
            "delay p99 ms".into(),
            "p99 − min ms".into(),
        ]);
    }
    // The engines' FEC counters, where a row's engines closed a block.
    let fec = result
        .rows
        .iter()
        .any(|r| r.fec_blocks.as_ref().is_some_and(|s| s.mean > 0.0));
    if fec {
        header.extend(["FEC blocks".into(), "FEC rebuilt".into()]);
    }
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for r in &result.rows {
        let mut cells = row_cells(r, paths);
        if app_delay {
            for s in [&r.app_delay_mean_s, &r.app_delay_p99_s] {
                cells.push(s.as_ref().map_or("-".into(), |s| fmt_stat(s, 2)));
            }
        }
        if udp {
            match &r.udp {
                Some(u) => cells.extend([
                    fmt_stat(&u.residual_loss_pct, 3),
                    fmt_stat(&u.repair_overhead_pct, 1),
                    fmt_stat(&u.delay_p99_ms, 1),
                    fmt_stat(&u.p99_over_min_ms, 1),
                ]),
                None => cells.extend(std::iter::repeat_n("-".to_string(), 4)),
            }
        }
        if fec {
            for s in [&r.fec_blocks, &r.fec_rebuilt] {
                cells.push(s.as_ref().map_or("-".into(), |s| fmt_stat(s, 0)));
            }
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// The table and, for a scenario with `[handover]`, seed MMS Fig. 4-6's tables
/// ([`crate::handover_report`]).
pub fn tables(scenario: &crate::scenario::Scenario, result: &SweepResult) -> String {
    let mut out = table(result);
    out.push_str(&crate::handover_tables::tables(scenario, &result.rows));
    out
}

fn row_cells(r: &RowSummary, paths: usize) -> Vec<String> {
    let mut c = vec![
        if r.variant.is_empty() {
            "-".into()
        } else {
            r.variant.clone()
        },
        r.run.clone(),
        r.seeds.to_string(),
        fmt_stat(&r.goodput_kbps, 1),
        fmt_stat(&r.throughput_kbps, 1),
        fmt_stat(&r.dupacks, 0),
        fmt_stat(&r.retransmissions, 0),
        fmt_stat(&r.timeouts, 0),
    ];
    for i in 0..paths {
        c.push(
            r.per_path_kbps
                .get(i)
                .map_or("-".into(), |s| fmt_stat(s, 1)),
        );
    }
    for s in [&r.reorder_p50_ms, &r.reorder_p99_ms] {
        c.push(s.as_ref().map_or("-".into(), |s| fmt_stat(s, 1)));
    }
    c
}

/// Writes `<stem>.json` (everything), `<stem>.csv` (one line per run and seed) and
/// `<stem>.svg` (throughput over time per path, first seed of each run) into `dir`.
pub fn write_files(
    result: &SweepResult,
    dir: &Path,
    stem: &str,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let json = dir.join(format!("{stem}.json"));
    let text = serde_json::to_string_pretty(result).map_err(std::io::Error::other)?;
    std::fs::write(&json, text + "\n")?;
    let csv = dir.join(format!("{stem}.csv"));
    std::fs::write(&csv, csv_text(result))?;
    let svg = dir.join(format!("{stem}.svg"));
    plot(result, &svg).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(vec![json, csv, svg])
}

fn csv_text(result: &SweepResult) -> String {
    let mut out = String::from(
        "variant,run,seed,goodput_kbps,throughput_kbps,dupacks,retransmissions,timeouts,reorder_p50_ms,reorder_p99_ms,app_delay_mean_s,app_delay_p99_s,fec_blocks,fec_rebuilt,per_path_kbps\n",
    );
    for (variant, r) in &result.runs {
        let paths: Vec<String> = r.per_path_kbps.iter().map(|k| format!("{k:.3}")).collect();
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
        let count = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        let _ = writeln!(
            out,
            "{},{},{},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{}",
            csv_field(variant),
            csv_field(&r.run),
            r.seed,
            r.goodput_kbps,
            r.throughput_kbps,
            r.dupacks,
            r.retransmissions,
            r.timeouts,
            opt(r.reorder_p50_ms),
            opt(r.reorder_p99_ms),
            opt(r.app_delay_mean_s),
            opt(r.app_delay_p99_s),
            count(r.engines.map(|e| e.fec_blocks)),
            count(r.engines.map(|e| e.fec_rebuilt)),
            paths.join(";")
        );
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Throughput over time: one panel per run (first seed of the first variant), one line per
/// path plus the main flow's goodput.
fn plot(result: &SweepResult, file: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut firsts = Vec::new();
    for (variant, r) in &result.runs {
        if !firsts
            .iter()
            .any(|(v, n): &(&String, &String)| *v == variant && **n == r.run)
        {
            firsts.push((variant, &r.run));
        }
    }
    let panels: Vec<_> = firsts
        .iter()
        .filter_map(|(v, n)| result.runs.iter().find(|(rv, r)| rv == *v && &r.run == *n))
        .collect();
    let height = 260 * panels.len().max(1) as u32;
    let root = SVGBackend::new(file, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    for ((variant, r), area) in panels.iter().zip(areas.iter()) {
        let bins = r.goodput_series_kbps.len().max(1);
        let secs = |i: usize| i as f64 * r.bin_s;
        let ymax = r
            .path_series_kbps
            .iter()
            .flatten()
            .chain(&r.goodput_series_kbps)
            .fold(1.0f64, |a, b| a.max(*b))
            * 1.1;
        let title = if variant.is_empty() {
            r.run.clone()
        } else {
            format!("{} [{}]", r.run, variant)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..secs(bins), 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("kbit/s")
            .draw()?;
        let palette = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
        for (i, series) in r.path_series_kbps.iter().enumerate() {
            let color = palette[i % palette.len()];
            chart
                .draw_series(LineSeries::new(
                    series.iter().enumerate().map(|(i, y)| (secs(i), *y)),
                    color,
                ))?
                .label(format!("path{i}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
        }
        chart
            .draw_series(LineSeries::new(
                r.goodput_series_kbps
                    .iter()
                    .enumerate()
                    .map(|(i, y)| (secs(i), *y)),
                BLACK.stroke_width(2),
            ))?
            .label("main flow (receiver)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
