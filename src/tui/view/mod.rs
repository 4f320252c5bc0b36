//! Rendering: pure functions of [`State`] into a ratatui [`Frame`]. Nothing here changes state.

pub(crate) mod annotations;
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
mod problems;
mod requests;
pub(crate) mod scroll;
mod table;
mod webhooks;
mod whatif;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

pub(crate) use chain::detail_extent;
pub use help::WORDS;
pub(crate) use help::extent as help_extent;
pub(crate) use metrics::samples_extent;
pub(crate) use problems::excerpt_extent;
pub use problems::place as problem_place;

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
        View::Problems => problems::render(frame, state, main),
    }
    match &state.mode {
        Mode::Normal => match state.editor.search.as_ref() {
            Some(search) if state.view == View::Editor => {
                render_input(frame, state, bottom, '/', &search.input, &[])
            }
            _ => render_status(frame, state, bottom),
        },
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

/// How the header's tabs are written: full labels (`1 Requests`), or compact ones where only
/// the current view keeps its title (the others their number, the key that shows them), or
/// numbers alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TabLabels {
    Full,
    Compact,
    Numbers,
}

/// The label of a view's tab in the header.
fn tab_label(i: usize, v: View, current: bool, labels: TabLabels) -> String {
    // Problems has no number key: `:problems` shows it.
    if v == View::Problems {
        return match labels {
            TabLabels::Numbers => " ! ".into(),
            _ => " ! Problems ".into(),
        };
    }
    match labels {
        TabLabels::Full => format!(" {} {} ", i + 1, v.title()),
        TabLabels::Compact if current => format!(" {} {} ", i + 1, v.title()),
        TabLabels::Compact | TabLabels::Numbers => format!(" {} ", i + 1),
    }
}

/// The header as it fits in `width` columns: whether the leading title is shown, and each tab's
/// label. Tabs are shortened whole, never cut.
fn tab_layout(state: &State, width: u16) -> (bool, Vec<String>) {
    let tabs = state.tabs();
    let labels = |l: TabLabels| -> Vec<String> {
        tabs.iter()
            .enumerate()
            .map(|(i, v)| tab_label(i, *v, *v == state.view, l))
            .collect()
    };
    let wide = |title: bool, ls: &[String]| -> usize {
        let t = if title { TITLE.chars().count() } else { 0 };
        t + ls.iter().map(|l| 1 + l.chars().count()).sum::<usize>()
    };
    for (title, l) in [
        (true, TabLabels::Full),
        (false, TabLabels::Full),
        (true, TabLabels::Compact),
        (false, TabLabels::Compact),
    ] {
        let ls = labels(l);
        if wide(title, &ls) <= usize::from(width) {
            return (title, ls);
        }
    }
    (false, labels(TabLabels::Numbers))
}

/// The view whose tab is at column `x` of the header (row 0).
pub fn tab_at(state: &State, x: u16) -> Option<View> {
    let (title, labels) = tab_layout(state, state.size.0);
    let mut left = if title { TITLE.chars().count() } else { 0 };
    for (v, label) in state.tabs().iter().zip(&labels) {
        left += 1;
        let width = label.chars().count();
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
    let pos = state.requests.position().unwrap_or(0);
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
    (pos < state.requests.visible().len()).then_some(pos)
}

fn render_tabs(frame: &mut Frame, state: &State, area: Rect) {
    let t = &state.theme;
    let (title, labels) = tab_layout(state, area.width);
    let mut spans = Vec::new();
    if title {
        spans.push(Span::styled(TITLE, t.style(StyleKey::Title)));
    }
    for (v, label) in state.tabs().iter().zip(labels) {
        let key = if *v == state.view {
            StyleKey::TabActive
        } else {
            StyleKey::Tab
        };
        spans.push(Span::raw(" "));
        spans.push(Span::styled(label, t.style(key)));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The status bar's message's priority: above every part but the progress.
const MESSAGE: u8 = 10;

/// The status bar's parts, each shown whole or not at all: where the bar is too narrow, the
/// parts of the lowest priority are left out (a message is the last to go).
fn status_parts(state: &State) -> Vec<(u8, Vec<Span<'static>>)> {
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
    let mut view = vec![Span::styled(
        format!(" {} ", state.view.title().to_uppercase()),
        t.style(StyleKey::StatusKey),
    )];
    // The Edit view's mode, as vim shows it: what a key does there depends on it.
    if state.view == View::Editor && state.current_buffer().is_some() {
        let key = match state.editor.mode {
            crate::tui::edit_keys::EditMode::Normal => StyleKey::StatusKey,
            crate::tui::edit_keys::EditMode::Insert => StyleKey::TabActive,
        };
        // A count or a command's first key being typed, as vim's showcmd shows it.
        let pending: String = state
            .editor
            .count
            .map(|n| n.to_string())
            .into_iter()
            .chain(state.editor.pending.map(String::from))
            .collect();
        let shown = if pending.is_empty() {
            format!(" {} ", state.editor.mode.label())
        } else {
            format!(" {} {pending} ", state.editor.mode.label())
        };
        view.push(Span::styled(shown, t.style(key)));
    }
    // The Edit view's mode is never left out: what a key does depends on it.
    let priority = if view.len() > 1 { 12 } else { 9 };
    let mut parts = vec![(priority, view)];
    if let Some((m, error)) = &state.message {
        let style = if *error {
            bar.patch(t.raw(StyleKey::Error))
        } else {
            bar.patch(t.raw(StyleKey::Message))
        };
        parts.push((MESSAGE, vec![Span::styled(format!(" {m} │"), style)]));
    }
    if let Some((f, error)) = requests::filter_summary(state) {
        let key = if error {
            StyleKey::Error
        } else {
            StyleKey::Message
        };
        parts.push((
            8,
            vec![Span::styled(format!(" {f} │"), bar.patch(t.raw(key)))],
        ));
    }
    parts.push((3, vec![Span::styled(format!(" {} │", state.source), bar)]));
    // The progress line is the last part to go: a notice never hides it.
    parts.push((11, vec![Span::styled(format!(" {progress} │"), bar)]));
    parts.push((
        7,
        vec![Span::styled(
            format!(
                " {replayed} replayed {} {allowed} {} {denied} {} {open} │",
                t.symbol(SymbolKey::Allowed),
                t.symbol(SymbolKey::Denied),
                t.symbol(SymbolKey::FailedOpen)
            ),
            bar,
        )],
    ));
    if !state.problems.is_empty() {
        parts.push((
            5,
            vec![Span::styled(
                format!(" {} problems: :problems │", state.problems.len()),
                bar,
            )],
        ));
    }
    if p.missing_replies > 0 {
        parts.push((
            4,
            vec![Span::styled(
                format!(" {} calls without reply │", p.missing_replies),
                bar,
            )],
        ));
    }
    parts.push((
        1,
        vec![Span::styled(format!(" k8s {} │", state.kube_version), bar)],
    ));
    parts.push((2, vec![Span::styled(" ? help ", bar)]));
    parts
}

fn render_status(frame: &mut Frame, state: &State, area: Rect) {
    let bar = state.theme.style(StyleKey::StatusBar);
    let mut parts = status_parts(state);
    let wide = |parts: &[(u8, Vec<Span>)]| -> usize {
        parts
            .iter()
            .flat_map(|(_, s)| s.iter().map(Span::width))
            .sum()
    };
    while wide(&parts) > usize::from(area.width) && parts.len() > 1 {
        // The lowest priority goes first; of equal ones, the rightmost.
        let Some(at) = (0..parts.len()).rev().min_by_key(|&i| parts[i].0) else {
            break;
        };
        // A message is shortened between words rather than dropped, while it can say something.
        let over = wide(&parts) - usize::from(area.width);
        if parts[at].0 == MESSAGE
            && let Some(span) = parts[at].1.first_mut()
            && span.width() >= over + 12
        {
            span.content = words_within(&span.content, span.width() - over).into();
            break;
        }
        parts.remove(at);
    }
    let mut spans: Vec<Span> = parts.into_iter().flat_map(|(_, s)| s).collect();
    // What is left and still too wide (a long message) is cut between words, with an ellipsis.
    let mut room = usize::from(area.width);
    for span in &mut spans {
        let w = span.width();
        if w > room {
            span.content = words_within(&span.content, room).into();
        }
        room = room.saturating_sub(w);
    }
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

/// A focused pane `title` over `area` that says, muted, why it has nothing to show.
pub(crate) fn empty_pane(frame: &mut Frame, state: &State, text: &str, title: String, area: Rect) {
    let p = Paragraph::new(Line::styled(
        text.to_string(),
        style(state, StyleKey::Muted),
    ))
    .wrap(ratatui::widgets::Wrap { trim: true })
    .block(pane(state, title, true));
    frame.render_widget(p, area);
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

/// `s` cut after the last whole word that fits `width` columns with an ellipsis (the ellipsis
/// alone where no word fits).
pub(crate) fn words_within(s: &str, width: usize) -> String {
    if table::width(s) <= width {
        return s.to_string();
    }
    let mut out = String::new();
    for word in s.split_inclusive(' ') {
        if table::width(&out) + table::width(word.trim_end()) + 1 > width {
            break;
        }
        out.push_str(word);
    }
    // A separator left at the end says nothing.
    let mut out = out
        .trim_end()
        .trim_end_matches(['·', '│'])
        .trim_end()
        .to_string();
    if width > 0 {
        out.push('…');
    }
    out
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

#[cfg(test)]
mod tests {
    use super::words_within;

    #[test]
    fn a_long_message_is_cut_between_words() {
        assert_eq!(
            words_within("4 changed, 4 verdicts flipped", 20),
            "4 changed, 4…"
        );
        assert_eq!(words_within("short", 20), "short");
        assert_eq!(words_within("unbreakable", 5), "…");
    }
}
