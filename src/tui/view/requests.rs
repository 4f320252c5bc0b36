//! The Requests view: every replayed request, sortable and filterable.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::table::{Column, Laid, TableRow};
use super::{pane, style};
use crate::tui::app::{SortKey, State};
use crate::tui::model::Verdict;
use crate::tui::theme::{StyleKey, SymbolKey};

/// The table's columns, in [`SortKey`] order (a click on a title sorts by it).
pub(crate) const COLUMNS: [Column; 8] = [
    Column::number("#", 10),
    Column::whole("OP", 8),
    Column::text("RESOURCE", 6, 8).short("RES"),
    Column::text("NAMESPACE/NAME", 7, 12).short("NAME"),
    Column::whole("VERDICT", 9),
    Column::number("CALLED", 4).short("CALL"),
    Column::number("ROUNDS", 3).short("RND"),
    Column::number("DURATION", 5).short("TIME"),
];

/// Data rows of the table in a pane `area` (its borders and the column titles taken out).
fn data_rows(area: Rect) -> usize {
    usize::from(area.height.saturating_sub(3))
}

/// The rows the table shows in `area`: the window of `visible` that keeps the selection on
/// screen.
fn table_rows(state: &State, area: Rect) -> Vec<TableRow> {
    let height = data_rows(area);
    let pos = state.requests.position().unwrap_or(0);
    let offset = super::requests_offset(state, height);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let plain = Style::default();
    state
        .requests
        .visible()
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
            let row = TableRow::new(vec![
                (format!("{marker}{:>3}", e + 1), plain),
                (op, plain),
                (r.resource.clone(), plain),
                (r.target.clone(), plain),
                (v, style(state, vkey)),
                (r.called.to_string(), plain),
                (r.rounds.to_string(), plain),
                (
                    format!("{:.1} ms", r.duration.as_secs_f64() * 1000.0),
                    plain,
                ),
            ]);
            row.selected_if(i == pos, state)
        })
        .collect()
}

/// The columns' widths in the Requests pane `area`, for the rows it shows.
pub(crate) fn laid(state: &State, area: Rect) -> Laid {
    Laid::new(
        &COLUMNS,
        &table_rows(state, area),
        area.width.saturating_sub(2),
    )
}

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
    let requests = &state.requests;
    let (sort, reverse) = requests.sort();
    let mut title = format!(
        " Requests {}/{} ",
        requests.visible().len(),
        state.entries.len()
    );
    if sort != SortKey::Input || reverse {
        title.push_str(&format!(
            "· sort {}{} ",
            sort.name(),
            if reverse { " ↓" } else { "" }
        ));
    }
    if !requests.filter().is_empty() {
        title.push_str(&format!("· filter {:?} ", requests.filter()));
    }
    if super::problems::no_configuration_loaded(state) {
        title.push_str("· no configuration loaded: all allowed for want of a webhook (:problems) ");
    }
    if state.entries.is_empty() {
        let block = pane(state, title, true);
        let text = match state.live.as_deref() {
            // Live, requests come only from replaying audit events.
            Some(live) => match live.replay_refusal() {
                Some(why) => format!("No request replayed: {why}."),
                None => "No request replayed yet: replay audit events from the Events view (r: the selected one, :replay: all kept).".into(),
            },
            None if state.progress.done => "No request was replayed.".into(),
            None => "Waiting for the first replayed request…".into(),
        };
        frame.render_widget(
            Paragraph::new(Line::styled(text, style(state, StyleKey::Muted)))
                .wrap(ratatui::widgets::Wrap { trim: true })
                .block(block),
            area,
        );
        return;
    }
    let rows = table_rows(state, area);
    let laid = Laid::new(&COLUMNS, &rows, area.width.saturating_sub(2));
    let title = laid.titled(&title, area.width);
    let block = pane(state, title, true);
    let table = laid
        .table(rows, style(state, StyleKey::Header))
        .block(block);
    frame.render_widget(table, area);
}

/// What the Requests filter does, for the status line: its conditions in words and how many
/// requests pass, or why it cannot be used (true: an error). None without a filter.
pub(crate) fn filter_summary(state: &State) -> Option<(String, bool)> {
    if state.requests.filter().trim().is_empty() {
        return None;
    }
    Some(match state.requests.parsed() {
        Ok(f) if f.is_empty() => return None,
        Ok(f) => (
            format!(
                "filter {}: {}/{}",
                f.describe(),
                state.requests.visible().len(),
                state.entries.len()
            ),
            false,
        ),
        Err(e) => (format!("filter not used: {e}"), true),
    })
}
