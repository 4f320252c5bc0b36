//! The Requests view: every replayed request, sortable and filterable.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::{clip, pane, style};
use crate::tui::app::{SortKey, State};
use crate::tui::filter::RequestFilter;
use crate::tui::model::Verdict;
use crate::tui::theme::{StyleKey, SymbolKey};

/// The table's column widths, in [`SortKey`] order (a click on a title sorts by it).
pub(crate) const COLUMNS: [Constraint; 8] = [
    Constraint::Length(5),
    Constraint::Length(10),
    Constraint::Length(22),
    Constraint::Min(20),
    Constraint::Length(18),
    Constraint::Length(6),
    Constraint::Length(6),
    Constraint::Length(11),
];

/// Verdict text and style key.
pub(crate) fn verdict(state: &State, v: Verdict) -> (String, StyleKey) {
    let t = &state.theme;
    match v {
        Verdict::Allowed => (
            format!("{} allowed", t.symbol(SymbolKey::Allowed)),
            StyleKey::Allowed,
        ),
        Verdict::FailedOpen => (
            format!("{} allowed (open)", t.symbol(SymbolKey::FailedOpen)),
            StyleKey::FailedOpen,
        ),
        Verdict::Denied(code) => (
            format!("{} denied {code}", t.symbol(SymbolKey::Denied)),
            StyleKey::Denied,
        ),
    }
}

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let (sort, reverse) = state.sort;
    let mut title = format!(" Requests {}/{} ", state.visible.len(), state.entries.len());
    if sort != SortKey::Input || reverse {
        title.push_str(&format!(
            "· sort {}{} ",
            sort.name(),
            if reverse { " ↓" } else { "" }
        ));
    }
    if !state.filter.is_empty() {
        title.push_str(&format!("· filter {:?} ", state.filter));
    }
    let block = pane(state, title, true);
    if state.entries.is_empty() {
        let text = if state.progress.done {
            "No request was replayed."
        } else {
            "Waiting for the first replayed request…"
        };
        frame.render_widget(
            Paragraph::new(Line::styled(text, style(state, StyleKey::Muted))).block(block),
            area,
        );
        return;
    }
    let height = area.height.saturating_sub(3) as usize;
    let pos = state.selected_position().unwrap_or(0);
    let offset = super::requests_offset(state, height);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let rows: Vec<Row> = state
        .visible
        .iter()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(i, &e)| {
            let r = state.entries[e].row();
            let (v, vkey) = verdict(state, r.verdict);
            let marker = if i == pos { sel } else { " " };
            let mut op = r.operation.clone();
            if r.dry_run {
                op.push_str(" dry");
            }
            let row = Row::new(vec![
                Cell::from(format!("{marker}{:>3}", e + 1)),
                Cell::from(op),
                Cell::from(clip(&r.resource, 22)),
                Cell::from(clip(&r.target, 32)),
                Cell::from(Span::styled(v, style(state, vkey))),
                Cell::from(format!("{:>6}", r.called)),
                Cell::from(format!("{:>6}", r.rounds)),
                Cell::from(format!("{:>8.1} ms", r.duration.as_secs_f64() * 1000.0)),
            ]);
            if i == pos {
                row.style(style(state, StyleKey::Selected))
            } else {
                row
            }
        })
        .collect();
    let header = Row::new(vec![
        "   #",
        "OP",
        "RESOURCE",
        "NAMESPACE/NAME",
        "VERDICT",
        "CALLED",
        "ROUNDS",
        "DURATION",
    ])
    .style(style(state, StyleKey::Header));
    let table = Table::new(rows, COLUMNS).header(header).block(block);
    frame.render_widget(table, area);
}

/// What the Requests filter does, for the status line: its conditions in words and how many
/// requests pass, or why it cannot be used (true: an error). None without a filter.
pub(crate) fn filter_summary(state: &State) -> Option<(String, bool)> {
    if state.filter.trim().is_empty() {
        return None;
    }
    Some(match RequestFilter::parse(&state.filter) {
        Ok(f) if f.is_empty() => return None,
        Ok(f) => (
            format!(
                "filter {}: {}/{}",
                f.describe(),
                state.visible.len(),
                state.entries.len()
            ),
            false,
        ),
        Err(e) => (format!("filter not used: {e}"), true),
    })
}
