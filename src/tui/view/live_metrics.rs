//! The Metrics view of a live cluster: the apiserver's admission webhook series from its
//! `/metrics` scrapes, as rates from counter deltas and quantiles from histogram buckets, over a
//! time window that `+`/`-` zoom and `p` pauses.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::table::{Column, Laid, TableRow};
use super::{clip, pane, style};
use crate::live::metrics::{AdmissionFamily, RateSeries};
use crate::tui::app::State;
use crate::tui::live::{LiveState, WINDOWS, clock, window_label};
use crate::tui::theme::StyleKey;
use ratatui::style::Style;

/// Series drawn per chart (the largest increases); the rest are summed in the legend count.
const SERIES_DRAWN: usize = 6;

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let Some(live) = state.live.as_deref() else {
        return;
    };
    let window = live.chart_window();
    let length = WINDOWS[live.window.min(WINDOWS.len() - 1)];
    let when = match live.paused_at {
        Some(at) => format!("paused at {} (p follows)", clock(at)),
        None => match live.history.latest() {
            Some((at, _)) => format!("to {} (p pauses)", clock(at)),
            None => "no scrape yet".into(),
        },
    };
    let span = format!(
        "last {} {when} · + zooms in, - out · {} scrapes",
        window_label(length),
        live.history.len()
    );
    let [header, charts, tables] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(55),
        Constraint::Min(6),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(Line::styled(
            format!(" {span}"),
            style(state, StyleKey::Muted),
        )),
        header,
    );
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    let rejections = live.history.rates(
        &window,
        AdmissionFamily::WebhookRejections,
        &["name", "error_type"],
    );
    rate_chart(
        frame,
        state,
        left,
        " rejections/s by webhook, error_type · count in the window ",
        rejections,
        length.as_secs_f64(),
    );
    let requests = live
        .history
        .rates(&window, AdmissionFamily::WebhookRequests, &["name", "code"]);
    rate_chart(
        frame,
        state,
        right,
        " requests/s by webhook, code · count in the window ",
        requests,
        length.as_secs_f64(),
    );
    let [latency, totals] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(tables);
    latency_table(frame, state, live, &window, latency);
    totals_pane(frame, state, live, &window, totals);
}

fn rate_chart(
    frame: &mut Frame,
    state: &State,
    area: Rect,
    title: &'static str,
    mut series: Vec<RateSeries>,
    length: f64,
) {
    let block = pane(state, title, false);
    if series.iter().all(|s| s.points.is_empty()) {
        let p = Paragraph::new(Line::styled(
            "Two scrapes are needed for a rate.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, area);
        return;
    }
    series.sort_by(|a, b| b.increase.total_cmp(&a.increase));
    let hidden = series.len().saturating_sub(SERIES_DRAWN);
    series.truncate(SERIES_DRAWN);
    let data: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| {
            let label = s
                .labels
                .pairs()
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(" ");
            let points = s.points.iter().map(|p| (p.offset_secs, p.value)).collect();
            // The count over the window beside the rate (a counter's increase is whole).
            (format!("{} · {:.0}", clip(&label, 40), s.increase), points)
        })
        .collect();
    let max = data
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, v)| *v))
        .fold(0.0_f64, f64::max)
        .max(0.001);
    let x_label = format!(
        "-{}",
        window_label(std::time::Duration::from_secs_f64(length))
    );
    let mut block = block;
    if hidden > 0 {
        block = block.title_bottom(format!(" +{hidden} smaller series "));
    }
    let chart = super::line_chart(
        state,
        block,
        &data,
        ([-length, 0.0], [x_label, "now".into()]),
        max * 1.1,
        format!("{:.2}", max * 1.1),
    );
    frame.render_widget(chart, area);
}

fn latency_table(
    frame: &mut Frame,
    state: &State,
    live: &LiveState,
    window: &crate::live::metrics::Window,
    area: Rect,
) {
    let series = live.history.quantiles(
        window,
        AdmissionFamily::WebhookDuration,
        &["name", "type"],
        &[0.5, 0.9, 0.99],
    );
    let block = pane(
        state,
        " admission_duration_seconds by webhook (window) ",
        false,
    );
    if series.is_empty() {
        let p = Paragraph::new(Line::styled(
            "No webhook latency observed yet.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, area);
        return;
    }
    let ms = |v: Option<f64>| match v {
        Some(v) if v.is_finite() => format!("{:.1}", v * 1000.0),
        _ => "–".into(),
    };
    let plain = Style::default();
    let rows: Vec<TableRow> = series
        .iter()
        .map(|s| {
            let q = |i: usize| s.quantiles.get(i).copied();
            TableRow::new(vec![
                (s.labels.get("name").unwrap_or("").to_string(), plain),
                (s.labels.get("type").unwrap_or("").to_string(), plain),
                (format!("{:.0}", s.observations), plain),
                (ms(q(0)), plain),
                (ms(q(1)), plain),
                (ms(q(2)), plain),
                (ms(s.mean), plain),
            ])
        })
        .collect();
    let laid = Laid::new(&LATENCY, &rows, area.width.saturating_sub(2));
    let table = laid
        .table(rows, style(state, StyleKey::Header))
        .block(block);
    frame.render_widget(table, area);
}

/// The latency table's columns.
const LATENCY: [Column; 7] = [
    Column::text("WEBHOOK", 10, 12),
    Column::whole("TYPE", 3),
    Column::number("CALLS", 9),
    Column::number("P50 MS", 8).short("P50"),
    Column::number("P90", 6),
    Column::number("P99", 7),
    Column::number("MEAN", 5),
];

fn totals_pane(
    frame: &mut Frame,
    state: &State,
    live: &LiveState,
    window: &crate::live::metrics::Window,
    area: Rect,
) {
    let mut lines = Vec::new();
    for (family, title, key) in [
        (
            AdmissionFamily::WebhookFailOpen,
            "failed open (increase)",
            StyleKey::FailedOpen,
        ),
        (
            AdmissionFamily::MatchConditionErrors,
            "matchCondition errors",
            StyleKey::Error,
        ),
        (
            AdmissionFamily::MatchConditionExclusions,
            "matchCondition exclusions",
            StyleKey::Muted,
        ),
    ] {
        lines.push(Line::styled(title, style(state, StyleKey::Header)));
        let series = live.history.rates(window, family, &["name"]);
        let mut any = false;
        for s in series.iter().filter(|s| s.increase > 0.0) {
            any = true;
            lines.push(Line::from(vec![
                Span::styled(format!("{:>7.0} ", s.increase), style(state, key)),
                Span::raw(clip(s.labels.get("name").unwrap_or(""), 40)),
            ]));
        }
        if !any {
            lines.push(Line::styled("none", style(state, StyleKey::Muted)));
        }
    }
    frame.render_widget(
        Paragraph::new(lines).block(pane(state, " In the window ", false)),
        area,
    );
}
