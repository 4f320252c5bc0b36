//! The Problems view: every request that could not be replayed, every unreadable input line or
//! document, every configuration left out, with its file, position, field and reason; `enter`
//! opens a configuration's file in the editor at its document, and any other file (a replay
//! input) read-only at the problem's line.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::table::{Column, TableRow};
use super::{clip, style};
use crate::replay::IndexUnit;
use crate::replay::report::Problem;
use crate::tui::app::State;
use crate::tui::excerpt::Excerpt;
use crate::tui::theme::{StyleKey, SymbolKey};

/// The table's columns.
const COLUMNS: [Column; 4] = [
    Column::text(" KIND", 6, 8),
    Column::text("WHERE", 8, 18),
    Column::text("FIELD", 4, 8),
    Column::text("REASON", 9, 20),
];

/// Where a problem was found: `file line 3`, `file document 2`, the file alone, or nothing.
pub fn place(p: &Problem) -> String {
    let s = &p.source;
    match (s.file.is_empty(), s.index) {
        (true, _) => String::new(),
        (false, 0) => s.file.clone(),
        (false, i) => {
            let unit = match s.unit {
                IndexUnit::Line => "line",
                _ => "document",
            };
            format!("{} {unit} {i}", s.file)
        }
    }
}

/// Whether no configuration loaded though some were given: every request is then allowed for
/// want of a webhook, which the views say prominently.
pub fn no_configuration_loaded(state: &State) -> bool {
    state.hooks.is_empty()
        && state
            .problems
            .iter()
            .any(|p| p.kind == crate::replay::report::ProblemKind::Configuration)
}

/// The excerpt pane's rectangle and the rows of text it shows, in the main `area`: the text
/// above, the line in full and the reason below.
fn excerpt_layout(area: Rect) -> (Rect, Rect) {
    let below = (area.height / 3).clamp(4, 10);
    let [text, line] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(below)]).areas(area);
    (text, line)
}

/// Lines of the open excerpt and the rows its pane shows, on a terminal of `state.size`.
pub(crate) fn excerpt_extent(state: &State) -> (usize, usize) {
    let (w, h) = state.size;
    let (text, _) = excerpt_layout(Rect::new(0, 1, w, h.saturating_sub(2)));
    let total = state
        .problems_view
        .excerpt
        .as_ref()
        .map_or(0, |e| e.lines.len());
    (total, usize::from(text.height.saturating_sub(2)))
}

/// The file of a problem, read-only, around its line: line numbers, the line marked, and under
/// it that line in full with the problem's reason.
fn render_excerpt(frame: &mut Frame, state: &State, e: &Excerpt, area: Rect) {
    let (text_area, line_area) = excerpt_layout(area);
    let height = usize::from(text_area.height.saturating_sub(2));
    let total = e.lines.len();
    let top = super::scroll::clamp(state.problems_view.excerpt_scroll.top, total, height);
    let digits = (e.first + total).to_string().len();
    let width = usize::from(text_area.width.saturating_sub(2));
    let muted = style(state, StyleKey::Muted);
    let lines: Vec<Line> = (e.lines.iter().enumerate())
        .skip(top)
        .take(height)
        .map(|(i, text)| {
            let n = e.first + i;
            let mark = if n == e.line { "▶" } else { " " };
            let number = format!("{mark}{n:>digits$} ");
            let room = width.saturating_sub(number.chars().count());
            let body = clip(text, room);
            if n == e.line {
                Line::from(vec![
                    Span::styled(number, style(state, StyleKey::Error)),
                    Span::styled(body, style(state, StyleKey::Selected)),
                ])
            } else {
                Line::from(vec![Span::styled(number, muted), Span::raw(body)])
            }
        })
        .collect();
    let title = format!(
        " {} · {} · read-only · {}esc: back ",
        e.path.display(),
        e.place,
        super::scroll::position(top, total, height)
    );
    frame.render_widget(
        Paragraph::new(lines).block(super::pane(state, title, true)),
        text_area,
    );
    let full = e.lines.get(e.line - e.first).cloned().unwrap_or_default();
    let detail = vec![
        Line::styled(e.reason.clone(), style(state, StyleKey::Error)),
        Line::raw(full),
    ];
    frame.render_widget(
        Paragraph::new(detail)
            .wrap(Wrap { trim: false })
            .block(super::pane(state, format!(" line {} ", e.line), false)),
        line_area,
    );
}

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    if let Some(e) = &state.problems_view.excerpt {
        render_excerpt(frame, state, e, area);
        return;
    }
    let n = state.problems.len();
    let [banner, list] = Layout::vertical([
        Constraint::Length(u16::from(no_configuration_loaded(state)) * 2),
        Constraint::Min(3),
    ])
    .areas(area);
    if no_configuration_loaded(state) {
        frame.render_widget(
            Paragraph::new(Line::styled(
                NO_CONFIGURATION,
                style(state, StyleKey::Error),
            ))
            .wrap(Wrap { trim: true }),
            banner,
        );
    }
    let title = format!(" Problems {n} · enter: open the file at the problem ");
    if n == 0 {
        let text = "No problem: every request was replayed and every configuration loaded.";
        super::empty_pane(frame, state, text, title, list);
        return;
    }
    // The selected problem in full below the table, whose reason column is clipped: as many
    // rows as its reason wraps to, up to half the view.
    let cursor = state.problems_view.cursor.selected.min(n - 1);
    let detail_rows = if list.height >= 10 {
        let inner = usize::from(list.width.saturating_sub(2)).max(1);
        // Each line of the reason, wrapped at words: a row more than its length needs.
        let reason: usize = (state.problems[cursor].message.lines())
            .map(|l| l.chars().count().div_ceil(inner).max(1))
            .sum();
        let wanted = u16::try_from(reason + 4).unwrap_or(u16::MAX);
        wanted.clamp(4, list.height / 2)
    } else {
        0
    };
    let [list, detail] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail_rows)]).areas(list);
    let height = usize::from(list.height.saturating_sub(3)).max(1);
    if detail_rows > 0 {
        render_detail(frame, state, &state.problems[cursor], detail);
    }
    let top = cursor.saturating_sub(height - 1);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let plain = Style::default();
    // Files by as many of their last path parts as tell them apart, so that the line shows
    // in a narrow column (the open file's title gives the whole path).
    let mut files: Vec<String> = state
        .problems
        .iter()
        .map(|p| p.source.file.clone())
        .collect();
    files.sort();
    files.dedup();
    let names = super::editor::distinct_names(&files);
    let short: Vec<String> = (state.problems.iter())
        .map(|p| {
            files
                .iter()
                .position(|f| *f == p.source.file)
                .map_or_else(String::new, |i| names[i].clone())
        })
        .collect();
    let rows: Vec<TableRow> = (state.problems.iter().enumerate())
        .skip(top)
        .take(height)
        .map(|(i, p)| {
            let marker = if i == cursor { sel } else { " " };
            let mut shown = p.clone();
            shown.source.file = short[i].clone();
            let row = TableRow::new(vec![
                (format!("{marker}{}", p.kind_name()), plain),
                (place(&shown), plain),
                (p.field.clone(), style(state, StyleKey::AnnotationKey)),
                (p.message.clone(), plain),
            ]);
            row.selected_if(i == cursor, state)
        })
        .collect();
    super::table::draw(frame, state, (&COLUMNS, rows), (&title, true), list);
}

/// One problem in full: where (the whole path), which field, and the reason wrapped.
fn render_detail(frame: &mut Frame, state: &State, p: &Problem, area: Rect) {
    let mut head = vec![Span::styled(
        p.kind_name().to_string(),
        style(state, StyleKey::Error),
    )];
    let place = place(p);
    if !place.is_empty() {
        head.push(Span::raw(format!(" · {place}")));
    }
    if !p.field.is_empty() {
        head.push(Span::raw(" · "));
        head.push(Span::styled(
            p.field.clone(),
            style(state, StyleKey::AnnotationKey),
        ));
    }
    let lines = vec![Line::from(head), Line::raw(p.message.clone())];
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(super::pane(state, " problem ", false)),
        area,
    );
}

/// What the views say when no configuration loaded.
pub const NO_CONFIGURATION: &str = "No webhook configuration loaded: every one given was left out (:problems says why), so every request is allowed for want of a webhook.";
