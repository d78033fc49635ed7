//! Charts as SVG, drawn with `plotters` (its SVG backend: no fonts to
//! find; `sluice bench --plot FILE.png` converts with rsvg-convert):
//!
//! - [`svg`]: `sluice bench --plot`, Mpps against flows (log scale), one
//!   line per series (rule set, distribution, cache configuration, PMDs);
//! - [`compare_svg`]: `sluice bench --compare-chart RESULTS`, a table of
//!   `bench/compare-ovs` as bars, OVS and Sluice side by side per
//!   profile on the same I/O, with the I/O floor (testpmd) drawn over
//!   each group.

use plotters::prelude::*;

use crate::harness::BenchResult;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 540;

/// One line of the chart: its label and (flows, Mpps) points by flows.
fn series(results: &[BenchResult]) -> Vec<(String, Vec<(u64, f64)>)> {
    let mut out: Vec<(String, Vec<(u64, f64)>)> = Vec::new();
    for r in results.iter().filter(|r| r.profile != "miss-storm") {
        let mut label = format!("{} {}", r.rules.name(), r.profile);
        if r.config != "default" {
            label += &format!(" {}", r.config);
        }
        if r.pmds != 1 {
            label += &format!(" {} PMDs", r.pmds);
        }
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push((r.flows, r.mpps)),
            None => out.push((label, vec![(r.flows, r.mpps)])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by_key(|p| p.0);
    }
    out
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("drawing the chart: {e}")
}

/// Draws the chart's legend (its series' labels, top right) and writes
/// the drawing out.
fn finish<'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// The chart as an SVG document, titled `title`. Errors when there is
/// nothing to draw.
pub fn svg(results: &[BenchResult], title: &str) -> Result<String, String> {
    let lines = series(results);
    if lines.is_empty() {
        return Err("nothing to plot: no rows besides the miss storm".into());
    }
    let flows = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.0.max(1)));
    let lo = flows.clone().min().unwrap_or(1) as f64;
    let hi = flows.max().unwrap_or(10) as f64;
    // Whole decades on the x axis.
    let (x0, x1) = (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)),
    );
    let top = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0f64, f64::max);
    let y1 = (top * 1.1).max(1.0);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("flows (log scale)")
            .y_desc("Mpps")
            .x_label_formatter(&|v| decade_label(*v))
            .draw()
            .map_err(err)?;
        for (i, (label, pts)) in lines.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = pts.iter().map(|&(f, m)| (f.max(1) as f64, m)).collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                .map_err(err)?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(err)?;
        }
        finish(&mut chart, &root)?;
    }
    Ok(out)
}

/// One profile of a `bench/compare-ovs` table: its name and Mpps of the
/// floor (testpmd), OVS and Sluice on the same I/O (0: not measured).
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    /// `rules dist flows` (and `emc off` when off).
    pub profile: String,
    /// dpdk-testpmd io forwarding of the same input.
    pub floor: f64,
    /// OVS-DPDK.
    pub ovs: f64,
    /// Sluice on the same DPDK vdevs.
    pub sluice: f64,
}

/// The rows of `bench/compare-ovs` tables in `text` (every table of the
/// file; header, note and other lines are skipped).
pub fn compare_rows(text: &str) -> Vec<CompareRow> {
    let num = |s: &str| {
        s.split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
    };
    text.lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split('|').collect();
            if cols.len() < 4 {
                return None;
            }
            let head: Vec<&str> = cols[0].split_whitespace().collect();
            let [rules, dist, flows, emc] = head.as_slice() else {
                return None;
            };
            flows.parse::<u64>().ok()?;
            let mut profile = format!("{rules} {dist} {flows}");
            if *emc == "off" {
                profile += " emc off";
            }
            Some(CompareRow {
                profile,
                floor: num(cols[1]).unwrap_or(0.0),
                ovs: num(cols[2])?,
                sluice: num(cols[3]).unwrap_or(0.0),
            })
        })
        .collect()
}

/// The comparison as bars: per profile OVS and Sluice (same I/O), the
/// floor a black tick over the pair. Errors when `rows` is empty.
pub fn compare_svg(rows: &[CompareRow], title: &str) -> Result<String, String> {
    if rows.is_empty() {
        return Err("nothing to plot: no bench/compare-ovs rows (rules dist flows emc | floor | OVS | Sluice ...)".into());
    }
    let n = rows.len();
    let top = rows
        .iter()
        .flat_map(|r| [r.floor, r.ovs, r.sluice])
        .fold(0.0f64, f64::max);
    let y1 = (top * 1.1).max(1.0);
    let mut out = String::new();
    {
        let width = (WIDTH).max(60 * n as u32 + 160);
        let root = SVGBackend::with_string(&mut out, (width, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(110)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..n as f64, 0.0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("Mpps")
            .draw()
            .map_err(err)?;
        // The profiles' names under their bars, turned a quarter.
        for (i, r) in rows.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                r.profile.clone(),
                (px - 6, py + 6),
                ("sans-serif", 11)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            ))
            .map_err(err)?;
        }
        let ovs = RGBColor(0xd6, 0x27, 0x28);
        let sluice = RGBColor(0x1f, 0x77, 0xb4);
        for (k, (colour, name)) in [(ovs, "OVS-DPDK"), (sluice, "Sluice (same I/O)")]
            .into_iter()
            .enumerate()
        {
            chart
                .draw_series(rows.iter().enumerate().map(|(i, r)| {
                    let v = if k == 0 { r.ovs } else { r.sluice };
                    let x = i as f64 + 0.1 + 0.4 * k as f64;
                    Rectangle::new([(x, 0.0), (x + 0.38, v)], colour.filled())
                }))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        chart
            .draw_series(
                rows.iter()
                    .enumerate()
                    .filter(|(_, r)| r.floor > 0.0)
                    .map(|(i, r)| {
                        PathElement::new(
                            [(i as f64 + 0.05, r.floor), (i as f64 + 0.95, r.floor)],
                            BLACK.stroke_width(2),
                        )
                    }),
            )
            .map_err(err)?
            .label("I/O floor (testpmd io)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK.stroke_width(2)));
        finish(&mut chart, &root)?;
    }
    Ok(out)
}

/// `v`'s label on a log axis: powers of ten only.
fn decade_label(v: f64) -> String {
    let d = v.log10();
    if (d - d.round()).abs() > 1e-9 {
        return String::new();
    }
    match d.round() as i32 {
        0 => "1".into(),
        1 => "10".into(),
        2 => "100".into(),
        3 => "1k".into(),
        4 => "10k".into(),
        5 => "100k".into(),
        6 => "1M".into(),
        7 => "10M".into(),
        d => format!("1e{d}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleSetKind;

    fn row(dist: &str, flows: u64, mpps: f64) -> BenchResult {
        BenchResult {
            rules: RuleSetKind::PortForward,
            profile: dist.into(),
            flows,
            config: "default".into(),
            pmds: 1,
            packets: 1,
            mpps,
            cycles_per_pkt: 0.0,
            emc_pct: 0.0,
            smc_pct: 0.0,
            megaflow_pct: 0.0,
            upcall_pct: 0.0,
            setups_per_sec: 0.0,
            pkts_per_batch: 0.0,
            megaflows: (0, 0),
        }
    }

    #[test]
    fn one_line_per_distribution_with_a_point_per_row() {
        let rows = [
            row("rr", 10_000, 6.0),
            row("rr", 8, 9.5),
            row("zipf", 8, 9.0),
            row("zipf", 10_000, 7.5),
        ];
        let lines = series(&rows);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].1, [(8, 9.5), (10_000, 6.0)], "points by flows");
        let s = svg(&rows, "t <1>").unwrap();
        assert_eq!(s.matches("<circle").count(), 4, "a point per row");
        assert!(s.contains("t &lt;1&gt;"), "title escaped");
        assert!(
            s.contains("port-forward rr") && s.contains("port-forward zipf"),
            "legend"
        );
        assert!(
            s.contains("\n10k\n") && s.contains("\n1\n"),
            "decades 1 to 10k"
        );
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(svg(&[], "x").is_err());
    }

    #[test]
    fn compare_tables_become_bars() {
        let text = "# bench/compare-ovs ...\n\
            rules         dist      flows emc|  floor |    OVS +-% | Sluice +-%  ratio | above\n\
                                             |   Mpps |   Mpps     |   Mpps            |\n\
            port-forward  rr            8 on |  33.26 |  19.69  10 |  25.12   5  1.28x |    54\n\
            l3l4          zipf    1000000 off |   0.00 |   2.30   2 |      -   -      - |   x\n\
            (floor: dpdk-testpmd io forwarding; ...)\n";
        let rows = compare_rows(text);
        assert_eq!(
            rows,
            [
                CompareRow {
                    profile: "port-forward rr 8".into(),
                    floor: 33.26,
                    ovs: 19.69,
                    sluice: 25.12
                },
                CompareRow {
                    profile: "l3l4 zipf 1000000 emc off".into(),
                    floor: 0.0,
                    ovs: 2.30,
                    sluice: 0.0
                },
            ]
        );
        let s = compare_svg(&rows, "same I/O").unwrap();
        assert!(
            s.contains("OVS-DPDK") && s.contains("Sluice (same I/O)") && s.contains("I/O floor")
        );
        assert!(s.contains("port-forward rr 8"), "profile names");
        // A bar a profile and a legend swatch in each colour.
        assert_eq!(s.matches("fill=\"#D62728\"").count(), 3, "OVS bars: {s}");
        assert_eq!(s.matches("fill=\"#1F77B4\"").count(), 3, "Sluice bars: {s}");
        assert!(compare_svg(&[], "x").is_err());
    }
}
