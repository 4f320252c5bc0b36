//! The Problems view: every request that could not be replayed, every unreadable input line or
//! document, every configuration left out, with its file, position, field and reason; `enter`
//! opens a configuration's file in the editor at its document.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use super::style;
use super::table::{Column, TableRow};
use crate::replay::IndexUnit;
use crate::replay::report::Problem;
use crate::tui::app::State;
use crate::tui::theme::{StyleKey, SymbolKey};

/// The table's columns.
const COLUMNS: [Column; 4] = [
    Column::text(" KIND", 6, 8),
    Column::text("WHERE", 8, 12),
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

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
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
    let title = format!(" Problems {n} · enter: open a configuration at its document ");
    if n == 0 {
        let text = "No problem: every request was replayed and every configuration loaded.";
        super::empty_pane(frame, state, text, title, list);
        return;
    }
    let height = usize::from(list.height.saturating_sub(3)).max(1);
    let cursor = state.problem_selected.min(n - 1);
    let top = cursor.saturating_sub(height - 1);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let plain = Style::default();
    let rows: Vec<TableRow> = (state.problems.iter().enumerate())
        .skip(top)
        .take(height)
        .map(|(i, p)| {
            let marker = if i == cursor { sel } else { " " };
            let row = TableRow::new(vec![
                (format!("{marker}{}", p.kind_name()), plain),
                (place(p), plain),
                (p.field.clone(), style(state, StyleKey::AnnotationKey)),
                (p.message.clone(), plain),
            ]);
            row.selected_if(i == cursor, state)
        })
        .collect();
    super::table::draw(frame, state, (&COLUMNS, rows), (&title, true), list);
}

/// What the views say when no configuration loaded.
pub const NO_CONFIGURATION: &str = "No webhook configuration loaded: every one given was left out (:problems says why), so every request is allowed for want of a webhook.";
