//! Rendering: pure functions of [`State`] into a ratatui [`Frame`]. Nothing here changes state.

mod annotations;
mod chain;
mod cluster;
mod confirm;
mod editor;
mod events;
pub(crate) use events::annotation_text;
mod help;
pub mod hit;
mod live_metrics;
mod metrics;
mod requests;
mod webhooks;
mod whatif;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::app::{Mode, State, View};
use super::theme::{StyleKey, SymbolKey};

/// Draws the whole console.
pub fn render(frame: &mut Frame, state: &State) {
    let area = frame.area();
    let base = state.theme.style(StyleKey::Base);
    frame.render_widget(Block::default().style(base), area);
    let [tabs, main, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    render_tabs(frame, state, tabs);
    match state.view {
        View::Requests => requests::render(frame, state, main),
        View::Chain => chain::render(frame, state, main),
        View::Annotations => annotations::render(frame, state, main),
        View::Metrics if state.live.is_some() => live_metrics::render(frame, state, main),
        View::Metrics => metrics::render(frame, state, main),
        View::Webhooks => webhooks::render(frame, state, main),
        View::Editor => editor::render(frame, state, main),
        View::WhatIf => whatif::render(frame, state, main),
        View::Cluster => cluster::render(frame, state, main),
        View::Events => events::render(frame, state, main),
    }
    match &state.mode {
        Mode::Normal => render_status(frame, state, bottom),
        Mode::Command { input, completions } => {
            render_input(frame, state, bottom, ':', input, completions)
        }
        Mode::Filter(text) => {
            // What the filter does so far, beside the text typed (the Requests filter only).
            let summary = match state.view {
                View::Annotations => None,
                _ => requests::filter_summary(state).map(|(s, _)| s),
            };
            render_input(frame, state, bottom, '/', text, summary.as_slice())
        }
        Mode::ConfirmApply
            if state
                .live
                .as_deref()
                .and_then(|l| l.pending_apply.as_ref())
                .is_some_and(|p| p.request.is_none()) =>
        {
            render_status(frame, state, bottom)
        }
        Mode::ConfirmApply => {
            let prompt = [String::from(
                "y: apply to the cluster · n/esc: cancel · j/k: scroll",
            )];
            render_input(frame, state, bottom, '?', "apply", &prompt);
        }
    }
    if state.mode == Mode::ConfirmApply {
        confirm::render(frame, state, main);
    }
    if state.help {
        help::render(frame, state, main);
    }
}

/// Draws the console at `width`×`height` off screen and returns its text, one line per row with
/// trailing blanks trimmed (snapshots, tests).
pub fn render_text(state: &State, width: u16, height: u16) -> String {
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))
        .unwrap_or_else(|e| unreachable!("the test backend cannot fail: {e}"));
    // Drawing on the test backend cannot fail either.
    let _ = t.draw(|f| render(f, state));
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Width of the header's leading title, before the first tab.
const TITLE: &str = " hookscope ";

/// The label of a view's tab in the header.
fn tab_label(i: usize, v: View) -> String {
    format!(" {} {} ", i + 1, v.title())
}

/// The view whose tab is at column `x` of the header (row 0).
pub fn tab_at(state: &State, x: u16) -> Option<View> {
    let mut left = TITLE.chars().count();
    for (i, v) in state.tabs().iter().enumerate() {
        left += 1;
        let width = tab_label(i, *v).chars().count();
        if (left..left + width).contains(&usize::from(x)) {
            return Some(*v);
        }
        left += width;
    }
    None
}

/// Row of the terminal where the Requests table's first data row is drawn (below the header
/// line, the pane's top border and the column titles).
pub const REQUESTS_FIRST_ROW: u16 = 3;

/// Data rows the Requests table shows on a terminal `height` rows high.
pub fn requests_rows(height: u16) -> usize {
    // header line and status bar, then the pane's borders and the column titles
    usize::from(height.saturating_sub(2).saturating_sub(3))
}

/// The first position of `visible` the Requests table shows: the selection stays on screen.
pub fn requests_offset(state: &State, rows: usize) -> usize {
    let pos = state.selected_position().unwrap_or(0);
    pos.saturating_sub(rows.saturating_sub(1))
}

/// The position in `visible` of the Requests row drawn at terminal row `y`, on a terminal
/// `height` rows high.
pub fn requests_position_at(state: &State, height: u16, y: u16) -> Option<usize> {
    let rows = requests_rows(height);
    let i = usize::from(y.checked_sub(REQUESTS_FIRST_ROW)?);
    if i >= rows {
        return None;
    }
    let pos = requests_offset(state, rows) + i;
    (pos < state.visible.len()).then_some(pos)
}

fn render_tabs(frame: &mut Frame, state: &State, area: Rect) {
    let t = &state.theme;
    let mut spans = vec![Span::styled(TITLE, t.style(StyleKey::Title))];
    for (i, v) in state.tabs().iter().enumerate() {
        let key = if *v == state.view {
            StyleKey::TabActive
        } else {
            StyleKey::Tab
        };
        spans.push(Span::raw(" "));
        spans.push(Span::styled(tab_label(i, *v), t.style(key)));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn render_status(frame: &mut Frame, state: &State, area: Rect) {
    let t = &state.theme;
    let bar = t.style(StyleKey::StatusBar);
    let (replayed, allowed, denied, open) = state.counts();
    let p = &state.progress;
    let progress = match (state.live.as_deref(), p.total, p.done) {
        (Some(l), ..) => {
            let connection = match &l.connection {
                crate::tui::live::Connection::Starting => "starting",
                crate::tui::live::Connection::Connecting { .. } => "connecting",
                crate::tui::live::Connection::Connected(..) => "connected",
                crate::tui::live::Connection::Failed(..) => "disconnected",
            };
            format!("live {connection} · {} events", l.events_seen)
        }
        (None, total, done) => match (total, done) {
            (_, true) => format!("{} done", p.seen),
            (Some(total), false) => format!("{}/{total} replaying", p.seen),
            (None, false) => format!("{} replaying", p.seen),
        },
    };
    let mut spans = vec![Span::styled(
        format!(" {} ", state.view.title().to_uppercase()),
        t.style(StyleKey::StatusKey),
    )];
    // A message comes first, so a narrow terminal cuts the counters rather than it.
    if let Some((m, error)) = &state.message {
        let style = if *error {
            bar.patch(t.raw(StyleKey::Error))
        } else {
            bar.patch(t.raw(StyleKey::Message))
        };
        spans.push(Span::styled(format!(" {m} │"), style));
    }
    if let Some((f, error)) = requests::filter_summary(state) {
        let key = if error {
            StyleKey::Error
        } else {
            StyleKey::Message
        };
        spans.push(Span::styled(format!(" {f} │"), bar.patch(t.raw(key))));
    }
    spans.extend([
        Span::styled(format!(" {} │ {progress} │ ", state.source), bar),
        Span::styled(
            format!(
                "{replayed} replayed {} {allowed} ",
                t.symbol(SymbolKey::Allowed)
            ),
            bar,
        ),
        Span::styled(format!("{} {denied} ", t.symbol(SymbolKey::Denied)), bar),
        Span::styled(
            format!("{} {open} │ ", t.symbol(SymbolKey::FailedOpen)),
            bar,
        ),
    ]);
    if !state.problems.is_empty() {
        spans.push(Span::styled(
            format!("{} problems │ ", state.problems.len()),
            bar,
        ));
    }
    if p.missing_replies > 0 {
        spans.push(Span::styled(
            format!("{} calls without reply │ ", p.missing_replies),
            bar,
        ));
    }
    spans.push(Span::styled(
        format!("k8s {} │ ? help ", state.kube_version),
        bar,
    ));
    frame.render_widget(Paragraph::new(Line::from(spans)).style(bar), area);
}

fn render_input(
    frame: &mut Frame,
    state: &State,
    area: Rect,
    prompt: char,
    text: &str,
    completions: &[String],
) {
    let t = &state.theme;
    let mut spans = vec![Span::styled(
        format!("{prompt}{text}█"),
        t.style(StyleKey::CommandLine),
    )];
    if !completions.is_empty() {
        spans.push(Span::styled(
            format!("   {}", completions.join("  ")),
            t.style(StyleKey::Completion),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// A bordered block with a title, its border styled by focus.
pub(crate) fn pane<'a>(state: &State, title: impl Into<Line<'a>>, focused: bool) -> Block<'a> {
    let t = &state.theme;
    let border = if focused {
        StyleKey::BorderFocused
    } else {
        StyleKey::Border
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(t.style(border))
        .title(title.into().style(t.style(StyleKey::Title)))
}

/// Truncates to `width` characters with an ellipsis.
pub(crate) fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else if width == 0 {
        String::new()
    } else {
        let mut out: String = s.chars().take(width - 1).collect();
        out.push('…');
        out
    }
}

/// The lines of a unified diff, coloured: headers, added, removed, context.
pub(crate) fn diff_lines<'a>(state: &State, diff: &'a str) -> impl Iterator<Item = Line<'a>> {
    let styles = [
        style(state, StyleKey::Header),
        style(state, StyleKey::DiffAdded),
        style(state, StyleKey::DiffRemoved),
        style(state, StyleKey::DiffContext),
    ];
    diff.lines().map(move |l| {
        let at = if l.starts_with("+++") || l.starts_with("---") || l.starts_with("@@") {
            0
        } else if l.starts_with('+') {
            1
        } else if l.starts_with('-') {
            2
        } else {
            3
        };
        Line::styled(l, styles[at])
    })
}

/// A style of the theme on top of base.
pub(crate) fn style(state: &State, key: StyleKey) -> Style {
    state.theme.style(key)
}

/// Colours of the lines of a chart, in order.
const LINE_PALETTE: [StyleKey; 6] = [
    StyleKey::BarRejection,
    StyleKey::BarRequest,
    StyleKey::FailedOpen,
    StyleKey::CellMutated,
    StyleKey::CellCalled,
    StyleKey::Warning,
];

/// A line chart of labelled series (braille lines, the theme's palette, the legend shown where
/// it fits), with `x` bounds and their labels, and a y axis from 0 to `y_top`.
pub(crate) fn line_chart<'a>(
    state: &State,
    block: Block<'a>,
    series: &'a [(String, Vec<(f64, f64)>)],
    x: ([f64; 2], [String; 2]),
    y_top: f64,
    y_label: String,
) -> ratatui::widgets::Chart<'a> {
    use ratatui::widgets::{Axis, Chart, Dataset, GraphType};
    let datasets: Vec<Dataset> = series
        .iter()
        .enumerate()
        .map(|(i, (label, points))| {
            Dataset::default()
                .name(label.clone())
                .marker(ratatui::symbols::Marker::Braille)
                .graph_type(GraphType::Line)
                .style(style(state, LINE_PALETTE[i % LINE_PALETTE.len()]))
                .data(points)
        })
        .collect();
    let axis = style(state, StyleKey::Muted);
    let [x0, x1] = x.1;
    Chart::new(datasets)
        .block(block)
        .hidden_legend_constraints((
            ratatui::layout::Constraint::Ratio(2, 3),
            ratatui::layout::Constraint::Ratio(2, 3),
        ))
        .x_axis(
            Axis::default()
                .bounds(x.0)
                .labels([Span::styled(x0, axis), Span::styled(x1, axis)])
                .style(axis),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, y_top])
                .labels([Span::styled("0", axis), Span::styled(y_label, axis)])
                .style(axis),
        )
}
