//! `sluice bench --plot`: Mpps against flows (log scale), one line per
//! series (rule set, distribution, cache configuration, PMDs), as an SVG
//! written by hand: no plotting library, no fonts to find.

use std::fmt::Write;

use crate::harness::BenchResult;

const WIDTH: f64 = 880.0;
const HEIGHT: f64 = 520.0;
/// Plot area margins: left, right, top, bottom.
const MARGIN: (f64, f64, f64, f64) = (70.0, 260.0, 40.0, 60.0);
const COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart as an SVG document, titled `title`. Errors when there is
/// nothing to draw.
pub fn svg(results: &[BenchResult], title: &str) -> Result<String, String> {
    let lines = series(results);
    if lines.is_empty() {
        return Err("nothing to plot: no rows besides the miss storm".into());
    }
    let (ml, mr, mt, mb) = MARGIN;
    let (pw, ph) = (WIDTH - ml - mr, HEIGHT - mt - mb);
    let flows = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.0.max(1)));
    let lo = flows.clone().min().unwrap_or(1) as f64;
    let hi = flows.max().unwrap_or(10) as f64;
    // Whole decades on the x axis.
    let (x0, x1) = (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    );
    let top = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0f64, f64::max);
    let step = nice_step(top / 5.0);
    let y1 = (top / step).ceil().max(1.0) * step;
    let x = |f: u64| ml + ((f.max(1) as f64).log10() - x0) / (x1 - x0) * pw;
    let y = |v: f64| mt + ph - v / y1 * ph;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        ml + pw / 2.0,
        escape(title)
    );
    // Grid and axes.
    let mut d = x0;
    while d <= x1 + 1e-9 {
        let px = ml + (d - x0) / (x1 - x0) * pw;
        let _ = writeln!(
            o,
            r##"<line x1="{px:.1}" y1="{mt}" x2="{px:.1}" y2="{:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            mt + ph,
            mt + ph + 18.0,
            decade_label(d as i32)
        );
        d += 1.0;
    }
    let mut v = 0.0;
    while v <= y1 + 1e-9 {
        let py = y(v);
        let _ = writeln!(
            o,
            r##"<line x1="{ml}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            ml + pw,
            ml - 8.0,
            py + 4.0,
            trim(v)
        );
        v += step;
    }
    let _ = writeln!(
        o,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">flows (log scale)</text>"#,
        ml + pw / 2.0,
        HEIGHT - 18.0
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate(20,{:.1}) rotate(-90)" text-anchor="middle">Mpps</text>"#,
        mt + ph / 2.0
    );
    // Lines, points and the legend.
    for (i, (label, pts)) in lines.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(f, m)| format!("{:.1},{:.1}", x(f), y(m)))
            .collect();
        let _ = writeln!(
            o,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for &(f, m) in pts {
            let _ = writeln!(
                o,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"><title>{} at {f} flows: {m:.2} Mpps</title></circle>"#,
                x(f),
                y(m),
                escape(label)
            );
        }
        let ly = mt + 10.0 + i as f64 * 18.0;
        let lx = ml + pw + 16.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(label)
        );
    }
    o += "</svg>\n";
    Ok(o)
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * p)
}

fn decade_label(d: i32) -> String {
    match d {
        0 => "1".into(),
        1 => "10".into(),
        2 => "100".into(),
        3 => "1k".into(),
        4 => "10k".into(),
        5 => "100k".into(),
        6 => "1M".into(),
        7 => "10M".into(),
        _ => format!("1e{d}"),
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
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
        let s = svg(&rows, "t <1>").unwrap();
        assert_eq!(s.matches("<polyline").count(), 2);
        assert_eq!(s.matches("<circle").count(), 4);
        assert!(s.contains("t &lt;1&gt;"), "title escaped");
        assert!(s.contains(">10k<") && s.contains(">1<"), "decades 1 to 10k");
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(svg(&[], "x").is_err());
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(1.7), 2.0);
        assert_eq!(nice_step(3.2), 5.0);
        assert_eq!(nice_step(0.09), 0.1);
        assert_eq!(nice_step(0.0), 1.0);
    }
}
