//! The Metrics view: `apiserver_admission_webhook_rejection_count` by webhook and `error_type` as
//! bars, request totals by code, fail-open counts, and the exported sample lines themselves (the
//! same text `hookscope replay --metrics` writes).

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Paragraph, Wrap};

use super::{clip, pane, style};
use crate::tui::app::{State, rejections, sum_by};
use crate::tui::theme::StyleKey;

const REJECTION: &str = "apiserver_admission_webhook_rejection_count";
const REQUESTS: &str = "apiserver_admission_webhook_request_total";
const FAIL_OPEN: &str = "apiserver_admission_webhook_fail_open_count";

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Min(5)]).areas(area);
    let [bars, totals] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Min(20)]).areas(top);

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

    let text = state.metrics.encode_text();
    let samples: Vec<Line> = text
        .lines()
        .filter(|l| {
            !l.starts_with('#')
                && (l.starts_with(REJECTION) || l.starts_with(FAIL_OPEN) || l.starts_with(REQUESTS))
        })
        .map(|l| Line::styled(l.to_string(), style(state, StyleKey::Json)))
        .collect();
    let p = Paragraph::new(samples)
        .wrap(Wrap { trim: false })
        .block(pane(
            state,
            " Exported samples (as --metrics writes them) ",
            false,
        ));
    frame.render_widget(p, bottom);
}
