//! The What-if view: the requests whose outcome the edits changed (flipped verdicts first) and
//! each webhook's counts before and after.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use super::requests::verdict;
use super::table::{Column, TableRow};
use super::{pane, style};
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

/// The changed requests' columns.
const ROWS: [Column; 8] = [
    Column::number("#", 10),
    Column::whole("OP", 8),
    Column::text("RESOURCE", 6, 8).short("RES"),
    Column::text("NAMESPACE/NAME", 7, 12).short("NAME"),
    Column::whole("BEFORE", 9),
    Column::whole("AFTER", 9),
    Column::text("CHANGED", 5, 8),
    Column::text("CAUSE", 4, 10),
];

fn render_rows(frame: &mut Frame, state: &State, area: Rect) {
    let w = &state.whatif;
    let height = usize::from(area.height.saturating_sub(3)).max(1);
    let offset = state.whatif_cursor.selected.saturating_sub(height - 1);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let Some(baseline) = &state.baseline else {
        return;
    };
    let plain = Style::default();
    let rows: Vec<TableRow> = w
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
            what.extend(r.verdict_change());
            if !r.object.is_empty() {
                what.push("object");
            }
            if !r.annotations.is_empty() {
                what.push("annotations");
            }
            if !r.warnings_added.is_empty() || !r.warnings_removed.is_empty() {
                what.push("warnings");
            }
            let marker = if i == state.whatif_cursor.selected {
                sel
            } else {
                " "
            };
            let cause = state
                .whatif_causes(r.index)
                .iter()
                .map(ChangeCause::label)
                .collect::<Vec<_>>()
                .join("; ");
            let mut op = row.operation;
            if row.dry_run {
                op.push_str(" dry");
            }
            let row = TableRow::new(vec![
                (format!("{marker}{}", r.index + 1), plain),
                (op, plain),
                (row.resource, plain),
                (row.target, plain),
                (before, style(state, bkey)),
                (after, style(state, akey)),
                (what.join(", "), plain),
                (cause, plain),
            ]);
            Some(row.selected_if(i == state.whatif_cursor.selected, state))
        })
        .collect();
    super::table::draw(
        frame,
        state,
        (&ROWS, rows),
        (" Changed requests (enter: chain before / after) ", true),
        area,
    );
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
    let rows: Vec<TableRow> = state
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
                (format!("{} → {}", b[i], a[i]), style(state, key))
            };
            let plain = Style::default();
            // A policy's binding says `policy`, as in the Webhooks view (when it is still in
            // force; else its phase).
            let phase = (state.hooks.iter())
                .find(|x| {
                    x.phase == h.hook.phase
                        && x.configuration == h.hook.configuration
                        && x.webhook == h.hook.webhook
                })
                .map_or_else(|| h.hook.phase.to_string(), super::webhooks::phase_label);
            TableRow::new(vec![
                (format!(" {phase}"), plain),
                (
                    format!("{} ─ {}", h.hook.configuration, h.hook.webhook),
                    plain,
                ),
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                cell(4),
                cell(5),
            ])
        })
        .collect();
    let columns: Vec<Column> = super::webhooks::NAMES
        .into_iter()
        .chain(super::webhooks::COUNTS)
        .collect();
    super::table::draw(
        frame,
        state,
        (&columns, rows),
        (" Webhooks before → after ", false),
        area,
    );
}
