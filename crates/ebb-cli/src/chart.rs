//! The SVG charts (plotters' SVG backend): memory of the process tree over time, one
//! line per allocator (its median run), above bars of each allocator's ratios to the
//! first; for `ebb run --breakdown`, what one process's RSS held over time as stacked
//! areas under the tree's RSS; for `ebb run --profile-every`, the live bytes of its
//! allocation sites over time, stacked the same way.

use crate::breakdown::{Series, PARTS};
use crate::compare::AllocatorSummary;
use crate::runner::RunResult;
use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// Series colours, by allocator position.
pub const COLORS: &[RGBColor] = &[
    RGBColor(0x4c, 0x72, 0xb0),
    RGBColor(0xdd, 0x84, 0x52),
    RGBColor(0x55, 0xa8, 0x68),
    RGBColor(0xc4, 0x4e, 0x52),
    RGBColor(0x81, 0x72, 0xb3),
    RGBColor(0x93, 0x78, 0x60),
    RGBColor(0xda, 0x8b, 0xc3),
    RGBColor(0x8c, 0x8c, 0x8c),
];

pub fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Metrics in the bar chart: (key in the summaries, label).
const BARS: &[(&str, &str)] = &[
    ("wall_s", "wall time"),
    ("user_s", "user CPU"),
    ("sys_s", "sys CPU"),
    ("peak_rss", "peak RSS"),
    ("final_rss", "final RSS"),
];

const MIB: f64 = 1024.0 * 1024.0;

/// Renders the chart; `median_runs[i]` is the charted run of `summaries[i]`.
pub fn render(
    title: &str,
    summaries: &[AllocatorSummary],
    median_runs: &[&RunResult],
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 760)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (top, bottom) = root.split_vertically(470);
        memory_over_time(&top, title, summaries, median_runs)?;
        ratio_bars(&bottom, summaries)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// Colours of the breakdown's parts, bottom (live blocks) first: what the program
/// holds in a strong colour, what ebb holds free in warm ones, what is not ebb's grey.
const PART_COLORS: &[RGBColor] = &[
    RGBColor(0x4c, 0x72, 0xb0),
    RGBColor(0xdd, 0x84, 0x52),
    RGBColor(0xf0, 0xb2, 0x7a),
    RGBColor(0xc4, 0x4e, 0x52),
    RGBColor(0x81, 0x72, 0xb3),
    RGBColor(0xda, 0x8b, 0xc3),
    RGBColor(0x93, 0x78, 0x60),
    RGBColor(0x55, 0xa8, 0x68),
    RGBColor(0xbb, 0xbb, 0xbb),
];

/// `ebb run --breakdown --svg`: the parts of `series` (one process's retention reports)
/// stacked over time, the whole tree's sampled RSS as a line above them.
pub fn render_breakdown(title: &str, run: &RunResult, series: &Series) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let t_max = time_span(run, series.points.last().map(|p| p.0));
        let y_max = (run.peak.rss.max(series.peak_rss()) as f64 / MIB).max(1.0) * 1.1;
        let y_desc = format!("MiB (stacked: pid {})", series.pid);
        let mut chart = time_chart(&root, title, t_max, y_max, &y_desc)?;
        let tops = stacked(PARTS.iter().map(|(key, _)| series.part(key)));
        for (i, ((_, label), top)) in PARTS.iter().zip(&tops).enumerate().rev() {
            if series.part(PARTS[i].0).iter().all(|&(_, b)| b == 0) {
                continue; // an empty part: no area, no legend entry
            }
            stacked_area(&mut chart, top, PART_COLORS[i % PART_COLORS.len()], label)?;
        }
        if let Some(idle) = run.idle_start_s {
            chart
                .draw_series(DashedLineSeries::new(
                    [(idle, 0.0), (idle, y_max)],
                    6,
                    4,
                    BLACK.mix(0.6).stroke_width(1),
                ))
                .map_err(plot_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    "idle",
                    (idle + t_max * 0.005, y_max * 0.97),
                    ("sans-serif", 13),
                )))
                .map_err(plot_error)?;
        }
        rss_line_and_legend(&mut chart, run, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// `ebb run --profile-every --svg`: the live bytes of `sites`' rows (the heap
/// profiles' estimates at each of their times) stacked, the first row at the bottom,
/// under the tree's sampled RSS.
pub fn render_sites(
    title: &str,
    run: &RunResult,
    sites: &crate::profile::SitesOverTime,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let t_max = time_span(run, sites.times.last().copied());
        let stacked_max = (0..sites.times.len())
            .map(|i| sites.rows.iter().map(|(_, v)| v[i].max(0)).sum::<i64>())
            .max()
            .unwrap_or(0) as f64;
        let y_max = (run.peak.rss as f64).max(stacked_max).max(MIB) / MIB * 1.1;
        let y_desc = format!("MiB (sites stacked: heap profiles of pid {})", sites.pid);
        let mut chart = time_chart(&root, title, t_max, y_max, &y_desc)?;
        let tops = stacked(sites.rows.iter().map(|(_, values)| {
            sites
                .times
                .iter()
                .zip(values)
                .map(|(&t, &v)| (t, v.max(0) as u64))
                .collect()
        }));
        for (i, ((name, _), top)) in sites.rows.iter().zip(&tops).enumerate().rev() {
            let c = if name == "other sites" {
                RGBColor(0xbb, 0xbb, 0xbb)
            } else {
                color(i)
            };
            stacked_area(&mut chart, top, c, &one_line(name))?;
        }
        rss_line_and_legend(&mut chart, run, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// Seconds a chart of `run` spans: to its last sample or to `last` (the last report or
/// profile), at least 1.
fn time_span(run: &RunResult, last: Option<f64>) -> f64 {
    run.samples
        .last()
        .map(|s| s.t)
        .into_iter()
        .chain(last)
        .fold(1.0, f64::max)
}

/// The charts' chart context: seconds and MiB.
type TimeChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Axis, Axis>>;

/// The tops of `layers` (bytes at each time, every layer at the same times) stacked
/// in MiB, the first layer at the bottom. Drawn top-down, so each lower area covers the
/// one above it below its own top.
fn stacked(layers: impl Iterator<Item = Vec<(f64, u64)>>) -> Vec<Vec<(f64, f64)>> {
    let mut tops: Vec<Vec<(f64, f64)>> = Vec::new();
    for layer in layers {
        let top = layer
            .iter()
            .enumerate()
            .map(|(i, &(t, b))| {
                let below = tops.last().map_or(0.0, |l| l[i].1);
                (t, below + b as f64 / MIB)
            })
            .collect();
        tops.push(top);
    }
    tops
}

/// One stacked layer down to the axis, with its legend entry.
fn stacked_area<'a, 'b: 'a>(
    chart: &mut TimeChart<'a, 'b>,
    top: &[(f64, f64)],
    c: RGBColor,
    label: &str,
) -> Result<()> {
    chart
        .draw_series(AreaSeries::new(
            top.iter().copied(),
            0.0,
            c.mix(0.85).filled(),
        ))
        .map_err(plot_error)?
        .label(label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], c.filled()));
    Ok(())
}

/// The tree's sampled RSS as a line above the stacked areas, and the legend box.
fn rss_line_and_legend<'a, 'b: 'a>(
    chart: &mut TimeChart<'a, 'b>,
    run: &RunResult,
    position: SeriesLabelPosition,
) -> Result<()> {
    let rss = run.samples.iter().map(|s| (s.t, s.rss as f64 / MIB));
    chart
        .draw_series(LineSeries::new(rss, BLACK.stroke_width(2)))
        .map_err(plot_error)?
        .label("RSS of the process tree")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

/// A linear axis of `f64`.
type Axis = plotters::coord::types::RangedCoordf64;

/// Axes of memory (MiB, 0 to `y_max`) over seconds since the start (0 to `t_max`),
/// under a one-line `title`.
fn time_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    t_max: f64,
    y_max: f64,
    y_desc: &str,
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<Axis, Axis>>> {
    let mut chart = ChartBuilder::on(area)
        .caption(one_line(title), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc(y_desc)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(plot_error)?;
    Ok(chart)
}

/// A chart title on one line: a command's newlines as spaces, cut to what fits.
fn one_line(title: &str) -> String {
    const MAX_CHARS: usize = 90;
    let flat = title.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

fn plot_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e:?}")
}

fn memory_over_time(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    title: &str,
    summaries: &[AllocatorSummary],
    runs: &[&RunResult],
) -> Result<()> {
    let t_max = runs
        .iter()
        .flat_map(|r| r.samples.last().map(|s| s.t))
        .fold(1.0, f64::max);
    let y_max = runs
        .iter()
        .map(|r| r.peak.rss as f64 / MIB)
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = time_chart(area, title, t_max, y_max, "RSS of the process tree (MiB)")?;
    for (i, (summary, run)) in summaries.iter().zip(runs).enumerate() {
        let c = color(i);
        let points = run.samples.iter().map(|s| (s.t, s.rss as f64 / MIB));
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))
            .map_err(plot_error)?
            .label(summary.allocator.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        if let Some(idle) = run.idle_start_s {
            // A short tick on the time axis where this run's idle phase began.
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(idle, 0.0), (idle + t_max * 0.002, y_max * 0.04)],
                    c.filled(),
                )))
                .map_err(plot_error)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

fn ratio_bars(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    summaries: &[AllocatorSummary],
) -> Result<()> {
    let base = summaries.first().map_or("", |s| s.allocator.as_str());
    let ratio =
        |s: &AllocatorSummary, key: &str| s.metrics.get(key).and_then(|m| m.ratio).unwrap_or(0.0);
    let y_max = summaries
        .iter()
        .flat_map(|s| BARS.iter().map(move |(k, _)| ratio(s, k)))
        .fold(1.0, f64::max)
        * 1.35;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("median ratio to {base} (lower is better)"),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(10)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..BARS.len() as f64, 0.0..y_max)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .y_desc("ratio")
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(plot_error)?;
    let n = summaries.len().max(1) as f64;
    let width = 0.8 / n;
    for (m, (key, label)) in BARS.iter().enumerate() {
        for (i, s) in summaries.iter().enumerate() {
            let x0 = m as f64 + 0.1 + i as f64 * width;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.9, ratio(s, key))],
                    color(i).filled(),
                )))
                .map_err(plot_error)?;
            let r = ratio(s, key);
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{r:.2}"),
                    (x0, r + y_max * 0.08),
                    ("sans-serif", 11),
                )))
                .map_err(plot_error)?;
        }
        chart
            .draw_series(std::iter::once(Text::new(
                label.to_string(),
                (m as f64 + 0.35, y_max * 0.97),
                ("sans-serif", 14),
            )))
            .map_err(plot_error)?;
    }
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1.0), (BARS.len() as f64, 1.0)],
            BLACK.mix(0.5).stroke_width(1),
        ))
        .map_err(plot_error)?;
    Ok(())
}
