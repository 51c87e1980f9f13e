//! The SVG plot of a benchmark run: one panel per mode, goodput per 100 ms window (black)
//! and each path's forwarded rate (colours) over time, events shaded.
//!
//! Invariant: the file is a function of the [`TopologyResult`] only (no dates), so the
//! same results give the same bytes.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::mode::SAMPLE;
use super::report::TopologyResult;

/// Writes the plot of `r` to `file`.
pub fn write_svg(r: &TopologyResult, file: &Path) -> Result<()> {
    draw(r, file).map_err(|e| anyhow!("drawing {}: {e}", file.display()))
}

fn draw(r: &TopologyResult, file: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let modes: Vec<_> = r.modes.iter().filter(|m| m.error.is_none()).collect();
    let height = 240 * modes.len().max(1) as u32;
    let root = SVGBackend::new(file, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((modes.len().max(1), 1));
    let w = SAMPLE.as_secs_f64();
    let xmax = modes
        .iter()
        .map(|m| m.goodput_series.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * w;
    // Reordering makes some 100 ms receiver samples bursty: clip them at 1.6× the sum
    // rather than squash the plot.
    let ymax = modes
        .iter()
        .flat_map(|m| {
            m.goodput_series
                .iter()
                .chain(m.path_series.iter().flatten())
        })
        .fold(r.total_mbit, |a, b| a.max(*b))
        .min(r.total_mbit * 1.6)
        .max(1.0);
    let palette = [BLUE, RED, GREEN, MAGENTA, CYAN];
    for (m, area) in modes.iter().zip(areas.iter()) {
        let title = format!(
            "{} — {}: {:.1} Mbit/s ({:.0} % of {} Mbit/s)",
            r.name,
            m.label,
            m.goodput_mbit,
            m.of_sum * 100.0,
            r.total_mbit
        );
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(45)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("time since the sender started (s)")
            .y_desc("Mbit/s")
            .draw()?;
        for e in &m.events {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(e.from_s, 0.0), (e.to_s, ymax)],
                RGBColor(255, 200, 200).mix(0.5).filled(),
            )))?;
        }
        for (i, series) in m.path_series.iter().enumerate() {
            let color = palette[i % palette.len()];
            chart
                .draw_series(LineSeries::new(
                    series
                        .iter()
                        .enumerate()
                        .map(|(k, y)| ((k as f64 + 0.5) * w, *y)),
                    color,
                ))?
                .label(format!("path {i} (forwarded)"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
        }
        chart
            .draw_series(LineSeries::new(
                m.goodput_series
                    .iter()
                    .enumerate()
                    .map(|(k, y)| ((k as f64 + 0.5) * w, *y)),
                BLACK.stroke_width(2),
            ))?
            .label("goodput (receiver)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
