//! The What-if view: the requests whose outcome the edits changed (flipped verdicts first) and
//! each webhook's counts before and after.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};

use super::requests::verdict;
use super::{clip, pane, style};
use crate::edit::HookStats;
use crate::tui::app::State;
use crate::tui::editing::ChangeCause;
use crate::tui::theme::{StyleKey, SymbolKey};

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    if state.baseline.is_none() {
        let text = match &state.run {
            Some(r) => format!(
                "Dispatching again: {}/{} requests…",
                r.results.len(),
                r.total
            ),
            None => "Nothing dispatched again yet. Edit a configuration (Webhooks: e, or :edit NAME): once the edit is valid every loaded request is dispatched again, and this view lists what changed. :redispatch does it without an edit, calling every webhook anew.".into(),
        };
        let p = Paragraph::new(Line::styled(text, style(state, StyleKey::Muted)))
            .wrap(Wrap { trim: true })
            .block(pane(state, " What-if ", true));
        frame.render_widget(p, area);
        return;
    }
    let w = &state.whatif;
    let [summary, rows, hooks] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(55),
        Constraint::Min(5),
    ])
    .areas(area);
    let running = match &state.run {
        Some(r) => format!(" · re-dispatching {}/{}", r.results.len(), r.total),
        None => String::new(),
    };
    // Each change is attributed to its cause: the user's edits, or what changed without them
    // (the cluster's configurations, files on disk, the webhooks' answers).
    let (by_edit, by_other) = state.whatif_attribution();
    let summary_text = format!(
        " {} of {} requests changed ({by_edit} by your edits, {by_other} by changes not yours) · {} verdicts flipped{running}",
        w.requests.len(),
        state.entries.len(),
        w.flipped().count()
    );
    frame.render_widget(
        Paragraph::new(Line::styled(summary_text, style(state, StyleKey::Header))),
        summary,
    );
    render_rows(frame, state, rows);
    render_hooks(frame, state, hooks);
}

fn render_rows(frame: &mut Frame, state: &State, area: Rect) {
    let w = &state.whatif;
    let height = usize::from(area.height.saturating_sub(3)).max(1);
    let offset = state.whatif_selected.saturating_sub(height - 1);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let Some(baseline) = &state.baseline else {
        return;
    };
    let rows: Vec<Row> = w
        .requests
        .iter()
        .enumerate()
        .skip(offset)
        .take(height)
        .filter_map(|(i, r)| {
            let e = state.entries.get(r.index)?;
            let b = baseline.entries.get(r.index)?;
            let (before, bkey) = verdict(state, b.verdict);
            let (after, akey) = verdict(state, e.verdict);
            let row = e.row();
            let mut what = Vec::new();
            if r.verdict.is_some() {
                what.push("verdict");
            }
            if !r.object.is_empty() {
                what.push("object");
            }
            if !r.annotations.is_empty() {
                what.push("annotations");
            }
            if !r.warnings_added.is_empty() || !r.warnings_removed.is_empty() {
                what.push("warnings");
            }
            let marker = if i == state.whatif_selected { sel } else { " " };
            let cause = state
                .whatif_causes(r.index)
                .iter()
                .map(ChangeCause::label)
                .collect::<Vec<_>>()
                .join("; ");
            let row = Row::new(vec![
                Cell::from(format!("{marker}{}", r.index + 1)),
                Cell::from(row.operation),
                Cell::from(clip(&row.resource, 22)),
                Cell::from(clip(&row.target, 34)),
                Cell::from(Span::styled(before, style(state, bkey))),
                Cell::from(Span::styled(after, style(state, akey))),
                Cell::from(what.join(", ")),
                Cell::from(cause),
            ]);
            Some(if i == state.whatif_selected {
                row.style(style(state, StyleKey::Selected))
            } else {
                row
            })
        })
        .collect();
    let header = Row::new(vec![
        "#", "op", "resource", "name", "before", "after", "changed", "cause",
    ])
    .style(style(state, StyleKey::Header));
    let table = Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(22),
            Constraint::Length(34),
            Constraint::Length(18),
            Constraint::Length(18),
            Constraint::Length(18),
            Constraint::Min(18),
        ],
    )
    .header(header)
    .block(pane(
        state,
        " Changed requests (enter: chain before / after) ",
        true,
    ));
    frame.render_widget(table, area);
}

fn counts_text(c: Option<&HookStats>) -> [String; 6] {
    match c {
        Some(c) => [
            c.matched.to_string(),
            c.skipped().to_string(),
            c.mutated.to_string(),
            c.denied.to_string(),
            c.errored.to_string(),
            c.failed_open.to_string(),
        ],
        None => std::array::from_fn(|_| "–".to_string()),
    }
}

fn render_hooks(frame: &mut Frame, state: &State, area: Rect) {
    let rows: Vec<Row> = state
        .whatif
        .hooks
        .iter()
        .map(|h| {
            let b = counts_text(h.before.as_ref());
            let a = counts_text(h.after.as_ref());
            let cell = |i: usize| {
                let key = if b[i] == a[i] {
                    StyleKey::Muted
                } else {
                    StyleKey::Message
                };
                Cell::from(Span::styled(
                    format!("{:>4} → {:<4}", b[i], a[i]),
                    style(state, key),
                ))
            };
            Row::new(vec![
                Cell::from(h.hook.phase.to_string()),
                Cell::from(clip(
                    &format!("{} ─ {}", h.hook.configuration, h.hook.webhook),
                    42,
                )),
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                cell(4),
                cell(5),
            ])
        })
        .collect();
    let header = Row::new(vec![
        "phase",
        "webhook",
        "matched",
        "skipped",
        "mutated",
        "denied",
        "errors",
        "failed open",
    ])
    .style(style(state, StyleKey::Header));
    let table = Table::new(
        rows,
        [
            Constraint::Length(11),
            Constraint::Length(42),
            Constraint::Length(11),
            Constraint::Length(11),
            Constraint::Length(11),
            Constraint::Length(11),
            Constraint::Length(11),
            Constraint::Length(11),
        ],
    )
    .header(header)
    .block(pane(state, " Webhooks before → after ", false));
    frame.render_widget(table, area);
}
