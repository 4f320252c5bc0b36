//! The Webhooks view: the configurations in dispatch order with their effective settings and
//! how many requests each matched, skipped, mutated and denied.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::table::{Column, Laid, TableRow};
use super::{diff_lines, pane, style};
use crate::live::cluster::{AdmissionKind, ChangeAction};
use crate::tui::app::State;
use crate::tui::live::{LiveState, clock};
use crate::tui::model::HookInfo;
use crate::tui::theme::{StyleKey, SymbolKey};

/// The per-webhook counts' columns, the same words in the Webhooks and What-if views (defined
/// in the help overlay and the user guide).
pub(super) const COUNTS: [Column; 6] = [
    Column::number("MATCHED", 9).short("MATCH"),
    Column::number("SKIPPED", 5).short("SKIP"),
    Column::number("MUTATED", 7).short("MUT"),
    Column::number("DENIED", 8).short("DENY"),
    Column::number("ERRORS", 6).short("ERR"),
    Column::number("FAIL-OPEN", 6).short("OPEN"),
];

/// The columns naming a webhook: its phase and configuration ─ name.
pub(super) const NAMES: [Column; 2] = [
    Column::whole(" PHASE", 3),
    Column::text("CONFIGURATION ─ WEBHOOK", 10, 16).short("WEBHOOK"),
];

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let [list, detail] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Min(5)]).areas(area);
    let sel = state.theme.symbol(SymbolKey::Selected);
    let mut rows = Vec::new();
    let mut last_config = None;
    let plain = Style::default();
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
        let marker = if i == state.hook_cursor.selected {
            sel
        } else {
            " "
        };
        let row = TableRow::new(vec![
            (format!("{marker}{}", phase_label(h)), plain),
            (h.position.to_string(), plain),
            (name, plain),
            (c.matched.to_string(), plain),
            (c.skipped().to_string(), plain),
            (c.mutated.to_string(), style(state, StyleKey::CellMutated)),
            (c.denied.to_string(), style(state, StyleKey::CellDenied)),
            (c.errored.to_string(), style(state, StyleKey::CellErrored)),
            (
                c.failed_open.to_string(),
                style(state, StyleKey::CellFailedOpen),
            ),
        ]);
        rows.push(row.selected_if(i == state.hook_cursor.selected, state));
    }
    let columns = [NAMES[0], Column::number("POS", 6), NAMES[1]]
        .into_iter()
        .chain(COUNTS)
        .collect::<Vec<_>>();
    let laid = Laid::new(&columns, &rows, list.width.saturating_sub(2));
    let table = laid.table(rows, style(state, StyleKey::Header)).block(pane(
        state,
        laid.titled(
            &format!(" Webhooks {} in dispatch order ", state.hooks.len()),
            list.width,
        ),
        true,
    ));
    frame.render_widget(table, list);

    let lines: Vec<Line> = match state.hooks.get(state.hook_cursor.selected) {
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
        .get(state.hook_cursor.selected)
        .map(|h| format!(" {} (effective settings) ", h.webhook))
        .unwrap_or_else(|| " Settings ".into());
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(pane(state, title, false));
    match (
        state.live.as_deref(),
        state.hooks.get(state.hook_cursor.selected),
    ) {
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
    let objects = history_objects(hook);
    let changes: Vec<_> = live
        .changes
        .iter()
        .rev()
        .filter(|c| objects.iter().any(|(k, n)| c.kind == *k && c.name == *n))
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
                Span::raw(format!(
                    "{}by {} (rv {})",
                    // A policy's row shows its binding's changes too: which is which.
                    if objects.len() > 1 {
                        format!("{} {} ", c.kind.short(), c.name)
                    } else {
                        String::new()
                    },
                    c.who,
                    c.resource_version
                )),
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
    let title = match objects.get(1) {
        Some((_, binding)) => format!(
            " History of {} and {binding} ({}) ",
            hook.configuration,
            changes.len()
        ),
        None => format!(" History of {} ({}) ", hook.configuration, changes.len()),
    };
    frame.render_widget(Paragraph::new(lines).block(pane(state, title, false)), area);
}

/// The objects whose changes a row's history shows: a webhook's configuration, or an admission
/// policy and the binding of its row.
fn history_objects(h: &crate::tui::model::HookInfo) -> Vec<(AdmissionKind, &str)> {
    match h.policy_kind().map(|(policy, _)| policy) {
        Some("ValidatingAdmissionPolicy") => vec![
            (AdmissionKind::ValidatingAdmissionPolicy, &h.configuration),
            (AdmissionKind::ValidatingAdmissionPolicyBinding, &h.webhook),
        ],
        Some("MutatingAdmissionPolicy") => vec![
            (AdmissionKind::MutatingAdmissionPolicy, &h.configuration),
            (AdmissionKind::MutatingAdmissionPolicyBinding, &h.webhook),
        ],
        _ => vec![(h.phase.into(), &h.configuration)],
    }
}

/// A webhook's phase; an admission policy binding's row says which kind of policy, as the
/// Feeds pane and the history name them: `MAP` (runs before the mutating webhooks) or `VAP`
/// (before the validating webhooks), with positions of their own.
pub(super) fn phase_label(h: &crate::tui::model::HookInfo) -> String {
    match h.policy_kind() {
        Some(("MutatingAdmissionPolicy", _)) => "MAP".to_string(),
        Some(_) => "VAP".to_string(),
        None => h.phase.to_string(),
    }
}
