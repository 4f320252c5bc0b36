//! The Metrics view: `apiserver_admission_webhook_rejection_count` by webhook and `error_type`
//! over replay time (lines) and in total (bars), the latency histogram of
//! `admission_duration_seconds`, request totals by code, fail-open counts, and the exported sample
//! lines themselves (the same text `hookscope replay --metrics` writes).

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Paragraph, Wrap};

use super::{clip, pane, scroll, style};
use crate::tui::app::{State, rejections, sum_by};
use crate::tui::theme::StyleKey;

const REJECTION: &str = "apiserver_admission_webhook_rejection_count";
const REQUESTS: &str = "apiserver_admission_webhook_request_total";
const FAIL_OPEN: &str = "apiserver_admission_webhook_fail_open_count";
const DURATION_BUCKET: &str = "apiserver_admission_webhook_admission_duration_seconds_bucket";

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let [top, middle, bottom] = areas(area);
    let [lines_area, bars] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Min(20)]).areas(top);
    let [histogram, totals] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Min(20)]).areas(middle);
    timeline(frame, state, lines_area);
    latency(frame, state, histogram);

    let rej = rejections(&state.metrics);
    let label_width = bars.width.saturating_sub(12).min(48) as usize;
    let data: Vec<Bar> = rej
        .iter()
        .map(|((name, ty), v)| {
            Bar::default()
                .value(*v as u64)
                .label(Line::from(clip(&format!("{name} {ty}"), label_width)))
                .text_value(format!("{v}"))
                .style(style(state, StyleKey::BarRejection))
                .value_style(
                    style(state, StyleKey::BarRejection).patch(state.theme.raw(StyleKey::Selected)),
                )
        })
        .collect();
    let block = pane(state, format!(" {REJECTION} by name, error_type "), true);
    if data.is_empty() {
        let p = Paragraph::new(Line::styled(
            "No rejection yet.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, bars);
    } else {
        let chart = BarChart::default()
            .direction(Direction::Horizontal)
            .bar_width(1)
            .bar_gap(0)
            .label_style(style(state, StyleKey::BarLabel))
            .data(BarGroup::default().bars(&data))
            .block(block);
        frame.render_widget(chart, bars);
    }

    let mut lines = vec![Line::styled(
        "requests by webhook, code",
        style(state, StyleKey::Header),
    )];
    for ((name, code), v) in sum_by(&state.metrics, REQUESTS, &["name", "code"]) {
        let key = if code.starts_with('2') {
            StyleKey::BarRequest
        } else {
            StyleKey::BarRejection
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{:>5} ", v), style(state, key)),
            Span::raw(format!("{} {code}", clip(&name, 28))),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "failed open by webhook",
        style(state, StyleKey::Header),
    ));
    let open = sum_by(&state.metrics, FAIL_OPEN, &["name"]);
    if open.is_empty() {
        lines.push(Line::styled("none", style(state, StyleKey::Muted)));
    }
    for ((name, _), v) in open {
        lines.push(Line::from(vec![
            Span::styled(format!("{:>5} ", v), style(state, StyleKey::FailedOpen)),
            Span::raw(clip(&name, 32)),
        ]));
    }
    frame.render_widget(
        Paragraph::new(lines).block(pane(state, " Totals ", false)),
        totals,
    );

    let lines = samples(state);
    let (w, h) = (
        bottom.width.saturating_sub(2),
        usize::from(bottom.height.saturating_sub(2)),
    );
    let total = scroll::wrapped_len(&lines, w);
    let at = scroll::clamp(state.samples_scroll.top, total, h);
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .scroll((u16::try_from(at).unwrap_or(u16::MAX), 0))
        .block(pane(
            state,
            format!(
                " Exported samples (as --metrics writes them) {}",
                scroll::position(at, total, h)
            ),
            true,
        ));
    frame.render_widget(p, bottom);
}

/// The view's three rows: rejections, latency and totals, exported samples.
fn areas(area: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Percentage(40),
        Constraint::Percentage(32),
        Constraint::Min(4),
    ])
    .areas(area)
}

/// The exported sample lines the view shows.
fn samples(state: &State) -> Vec<Line<'static>> {
    let text = state.metrics.encode_text();
    text.lines()
        .filter(|l| {
            !l.starts_with('#')
                && (l.starts_with(REJECTION) || l.starts_with(FAIL_OPEN) || l.starts_with(REQUESTS))
        })
        .map(|l| Line::styled(l.to_string(), style(state, StyleKey::Json)))
        .collect()
}

/// Lines of the exported samples and the rows their pane shows, on a terminal of `state.size`.
pub(crate) fn samples_extent(state: &State) -> (usize, usize) {
    let (w, h) = state.size;
    let [_, _, bottom] = areas(Rect::new(0, 1, w, h.saturating_sub(2)));
    (
        scroll::wrapped_len(&samples(state), bottom.width.saturating_sub(2)),
        usize::from(bottom.height.saturating_sub(2)),
    )
}

/// The cumulative rejection counts over replay time, one line per webhook and `error_type`.
fn timeline(frame: &mut Frame, state: &State, area: Rect) {
    let t = &state.timeline;
    let block = pane(state, format!(" {REJECTION} over replay time "), false);
    if t.series.is_empty() {
        let p = Paragraph::new(Line::styled(
            "No rejection yet.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, area);
        return;
    }
    let end = t.clock.as_secs_f64().max(0.001);
    // Each line steps up at its points and holds until the end of the replay.
    let data: Vec<(String, Vec<(f64, f64)>)> = t
        .series
        .iter()
        .map(|s| {
            let mut points = vec![(0.0, 0.0)];
            let mut last = 0.0;
            for &(x, y) in &s.points {
                points.push((x, last));
                points.push((x, y));
                last = y;
            }
            points.push((end, last));
            (clip(&format!("{} {}", s.name, s.error_type), 40), points)
        })
        .collect();
    let max = t
        .series
        .iter()
        .filter_map(|s| s.points.last().map(|p| p.1))
        .fold(1.0_f64, f64::max);
    let chart = super::line_chart(
        state,
        block,
        &data,
        ([0.0, end], ["0s".into(), format!("{end:.1}s")]),
        max * 1.1,
        format!("{max}"),
    );
    frame.render_widget(chart, area);
}

/// Webhook calls by duration: the buckets of `admission_duration_seconds`, all webhooks.
fn latency(frame: &mut Frame, state: &State, area: Rect) {
    let mut buckets: Vec<(f64, String, f64)> = sum_by(&state.metrics, DURATION_BUCKET, &["le"])
        .into_iter()
        .map(|((le, _), v)| {
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(f64::INFINITY)
            };
            (bound, le, v)
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let block = pane(
        state,
        " webhook calls by admission_duration_seconds (le) ",
        false,
    );
    if buckets.iter().all(|b| b.2 == 0.0) {
        let p = Paragraph::new(Line::styled(
            "No webhook call yet.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, area);
        return;
    }
    // The exposition's buckets are cumulative; the bars are per bucket.
    let mut previous = 0.0;
    let bars: Vec<Bar> = buckets
        .iter()
        .map(|(_, le, v)| {
            let n = (v - previous).max(0.0);
            previous = *v;
            Bar::default()
                .value(n as u64)
                .label(Line::from(format!("≤{le}")))
                .text_value(format!("{n}"))
                .style(style(state, StyleKey::BarRequest))
        })
        .collect();
    let width = (area.width.saturating_sub(2) / bars.len().max(1) as u16).saturating_sub(1);
    let chart = BarChart::default()
        .bar_width(width.clamp(1, 8))
        .bar_gap(1)
        .label_style(style(state, StyleKey::BarLabel))
        .data(BarGroup::default().bars(&bars))
        .block(block);
    frame.render_widget(chart, area);
}
