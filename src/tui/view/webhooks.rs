//! The Webhooks view: the configurations in dispatch order with their effective settings and
//! how many requests each matched, skipped, mutated and denied.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};

use super::{clip, diff_lines, pane, style};
use crate::live::cluster::ChangeAction;
use crate::tui::app::State;
use crate::tui::live::{LiveState, clock};
use crate::tui::model::HookInfo;
use crate::tui::theme::{StyleKey, SymbolKey};

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let [list, detail] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Min(5)]).areas(area);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let mut rows = Vec::new();
    let mut last_config = None;
    for (i, (h, c)) in state.hooks.iter().zip(&state.hook_counts).enumerate() {
        let config = (h.phase, h.configuration.as_str());
        let tree = if last_config == Some(config) {
            "  └ "
        } else {
            ""
        };
        last_config = Some(config);
        let name = if tree.is_empty() {
            format!("{} ─ {}", h.configuration, h.webhook)
        } else {
            format!("{tree}{}", h.webhook)
        };
        let marker = if i == state.hook_selected { sel } else { " " };
        let row = Row::new(vec![
            Cell::from(format!("{marker}{}", h.phase)),
            Cell::from(format!("{:>3}", h.position)),
            Cell::from(clip(&name, 52)),
            Cell::from(format!("{:>7}", c.matched)),
            Cell::from(format!("{:>7}", c.skipped)),
            Cell::from(Span::styled(
                format!("{:>7}", c.mutated),
                style(state, StyleKey::CellMutated),
            )),
            Cell::from(Span::styled(
                format!("{:>6}", c.denied),
                style(state, StyleKey::CellDenied),
            )),
            Cell::from(Span::styled(
                format!("{:>6}", c.errors),
                style(state, StyleKey::CellErrored),
            )),
            Cell::from(Span::styled(
                format!("{:>9}", c.failed_open),
                style(state, StyleKey::CellFailedOpen),
            )),
        ]);
        rows.push(if i == state.hook_selected {
            row.style(style(state, StyleKey::Selected))
        } else {
            row
        });
    }
    let header = Row::new(vec![
        " PHASE",
        "POS",
        "CONFIGURATION ─ WEBHOOK",
        "MATCHED",
        "SKIPPED",
        "MUTATED",
        "DENIED",
        "ERRORS",
        "FAIL-OPEN",
    ])
    .style(style(state, StyleKey::Header));
    let table = Table::new(
        rows,
        [
            Constraint::Length(11),
            Constraint::Length(3),
            Constraint::Min(30),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(9),
        ],
    )
    .header(header)
    .block(pane(
        state,
        format!(" Webhooks {} in dispatch order ", state.hooks.len()),
        true,
    ));
    frame.render_widget(table, list);

    let lines: Vec<Line> = match state.hooks.get(state.hook_selected) {
        Some(h) => h
            .settings
            .iter()
            .map(|(k, v)| {
                Line::from(vec![
                    Span::styled(format!("{k:>24}: "), style(state, StyleKey::AnnotationKey)),
                    Span::raw(v.clone()),
                ])
            })
            .collect(),
        None => vec![Line::styled(
            "No webhook configured.",
            style(state, StyleKey::Muted),
        )],
    };
    let title = state
        .hooks
        .get(state.hook_selected)
        .map(|h| format!(" {} (effective settings) ", h.webhook))
        .unwrap_or_else(|| " Settings ".into());
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(pane(state, title, false));
    match (state.live.as_deref(), state.hooks.get(state.hook_selected)) {
        (Some(live), Some(h)) => {
            let [settings, history] =
                Layout::horizontal([Constraint::Percentage(45), Constraint::Min(20)]).areas(detail);
            frame.render_widget(p, settings);
            render_history(frame, state, live, h, history);
        }
        _ => frame.render_widget(p, detail),
    }
}

/// Live: the changes of the selected webhook's configuration, newest first, and the newest
/// change's diff.
fn render_history(frame: &mut Frame, state: &State, live: &LiveState, hook: &HookInfo, area: Rect) {
    let changes: Vec<_> = live
        .changes
        .iter()
        .rev()
        .filter(|c| c.kind == hook.phase && c.name == hook.configuration)
        .collect();
    let mut lines: Vec<Line> = changes
        .iter()
        .map(|c| {
            let (action, key) = match c.action {
                ChangeAction::Added => ("added", StyleKey::Allowed),
                ChangeAction::Modified => ("modified", StyleKey::Warning),
                ChangeAction::Deleted => ("deleted", StyleKey::Denied),
            };
            Line::from(vec![
                Span::raw(format!("{} ", clock(c.observed_at))),
                Span::styled(format!("{action:<9}"), style(state, key)),
                Span::raw(format!("by {} (rv {})", c.who, c.resource_version)),
            ])
        })
        .collect();
    match changes.first() {
        Some(newest) => {
            lines.push(Line::raw(""));
            lines.extend(diff_lines(state, &newest.diff));
        }
        None => lines.push(Line::styled(
            "No change seen since hookscope connected.",
            style(state, StyleKey::Muted),
        )),
    }
    let title = format!(" History of {} ({}) ", hook.configuration, changes.len());
    frame.render_widget(Paragraph::new(lines).block(pane(state, title, false)), area);
}
