//! The Chain view: the selected request's webhooks round by round, and for the selected step
//! everything the engine's trace says about it.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use serde_json::Value;

use super::requests::verdict;
use super::table::{self, Column, Laid, TableRow};
use super::{clip, pane, scroll, style};
use crate::engine::{CallRecord, StepKind};
use crate::replay::report::redact_secret;
use crate::tui::app::{ChainPane, Entry, State};
use crate::tui::model::{self, Block, CellState};
use crate::tui::theme::{StyleKey, SymbolKey};

/// Style and symbol of a cell state.
fn cell_look(state: &State, s: CellState) -> (StyleKey, &str) {
    let t = &state.theme;
    match s {
        CellState::Skipped => (StyleKey::CellSkipped, t.symbol(SymbolKey::Skipped)),
        CellState::Called => (StyleKey::CellCalled, t.symbol(SymbolKey::Called)),
        CellState::Mutated => (StyleKey::CellMutated, t.symbol(SymbolKey::Mutated)),
        CellState::Denied => (StyleKey::CellDenied, t.symbol(SymbolKey::Denied)),
        CellState::Errored => (StyleKey::CellErrored, t.symbol(SymbolKey::Errored)),
        CellState::FailedOpen => (StyleKey::CellFailedOpen, t.symbol(SymbolKey::FailedOpen)),
    }
}

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let Some(entry) = state.selected_entry() else {
        let p = Paragraph::new(Line::styled(
            "No request selected: pick one in Requests (1) and press enter.",
            style(state, StyleKey::Muted),
        ))
        .block(pane(state, " Chain ", true));
        frame.render_widget(p, area);
        return;
    };
    // What the replay could not take from the capture or the cluster (a namespace's labels, …)
    // is said above the chain: up to two notes, two lines each.
    let notes = entry.replayed.request.notes.len().min(2) as u16;
    let [head, body] =
        Layout::vertical([Constraint::Length(4 + 2 * notes), Constraint::Min(1)]).areas(area);
    render_head(frame, state, entry, head);
    let before = state
        .baseline
        .as_ref()
        .and_then(|b| state.requests.selected.and_then(|i| b.entries.get(i)));
    if let (true, Some(before)) = (state.chain.compare, before) {
        render_compare(frame, state, before, entry, body);
        return;
    }
    let width = grid_width(state, entry, body.width);
    let [grid, detail] =
        Layout::horizontal([Constraint::Length(width), Constraint::Min(20)]).areas(body);
    render_grid(frame, state, entry, grid);
    render_detail(frame, state, entry, detail);
}

fn render_head(frame: &mut Frame, state: &State, entry: &Entry, area: Rect) {
    let r = entry.row();
    let o = &entry.replayed.outcome;
    let (v, vkey) = verdict(state, r.verdict);
    // The request's number in the replay, as the Requests view's "#" shows it.
    let title = format!(
        " #{} {} {} {}{} ",
        state.requests.selected.map_or(0, |i| i + 1),
        r.operation,
        r.resource,
        r.target,
        if r.dry_run { " (dry run)" } else { "" }
    );
    let mut lines = vec![Line::from(vec![
        Span::styled(v, style(state, vkey)),
        Span::raw(format!(
            "  {} called · {} round{} · {:.1} ms",
            r.called,
            r.rounds,
            if r.rounds == 1 { "" } else { "s" },
            o.elapsed.as_secs_f64() * 1000.0
        )),
        Span::styled(
            match (o.reinvoked, o.reinvoke_set.is_empty()) {
                (false, _) if round0_completed(o) => {
                    "  · no round 1: no webhook changed the object in round 0".into()
                }
                (false, _) => String::new(),
                (true, true) => "  · round 1 ran: no webhook was due".into(),
                (true, false) => format!(
                    "  · due in round 1: {}",
                    o.reinvoke_set
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            style(state, StyleKey::Muted),
        ),
    ])];
    let second = match &o.status {
        Some(s) => Line::styled(clip(&s.message, 200), style(state, StyleKey::Denied)),
        None if !o.warnings.is_empty() => Line::styled(
            format!("warnings: {}", o.warnings.join(" · ")),
            style(state, StyleKey::Warning),
        ),
        None => Line::styled(
            "admitted; steps: j/k · rounds: [ ] · deciding step: d",
            style(state, StyleKey::Muted),
        ),
    };
    lines.push(second);
    for note in entry.replayed.request.notes.iter().take(2) {
        lines.push(Line::styled(
            format!("⚠ {}", clip(note, 400)),
            style(state, StyleKey::Warning),
        ));
    }
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .block(pane(state, title, false));
    frame.render_widget(p, area);
}

fn render_grid(frame: &mut Frame, state: &State, entry: &Entry, area: Rect) {
    let focused = state.chain.pane == ChainPane::Grid;
    grid(
        frame,
        state,
        entry,
        area,
        Some(state.chain.step),
        "Steps",
        focused,
    );
}

/// The request before and after the edits: both chains, both verdicts, and how the final
/// object changed.
fn render_compare(frame: &mut Frame, state: &State, before: &Entry, after: &Entry, area: Rect) {
    let [grids, diff] =
        Layout::vertical([Constraint::Percentage(55), Constraint::Min(4)]).areas(area);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(grids);
    let (vb, _) = verdict(state, before.verdict);
    let (va, _) = verdict(state, after.verdict);
    grid(
        frame,
        state,
        before,
        left,
        None,
        &format!("Before the edits · {vb} ·"),
        false,
    );
    grid(
        frame,
        state,
        after,
        right,
        Some(state.chain.step),
        &format!("After · {va} ·"),
        true,
    );
    let lines = compare_lines(state, before, after);
    let (top, position) = scrolled(state, &lines, diff);
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .scroll((top, 0))
        .block(pane(
            state,
            format!(" Final object: before → after {position}"),
            false,
        ));
    frame.render_widget(p, diff);
}

/// How the final object and the warnings changed between `before` and `after`.
fn compare_lines(state: &State, before: &Entry, after: &Entry) -> Vec<Line<'static>> {
    let mask = after.secret && !state.reveal_secrets;
    let text = |e: &Entry| {
        e.replayed
            .outcome
            .object
            .as_ref()
            .map(|o| pretty(o.value(), mask))
            .unwrap_or_default()
    };
    let (tb, ta) = (text(before), text(after));
    let mut lines = Vec::new();
    if tb == ta {
        lines.push(Line::styled(
            "The final object is the same.",
            style(state, StyleKey::Muted),
        ));
    } else {
        let d = similar::TextDiff::from_lines(&tb, &ta);
        for op in d.ops() {
            for change in d.iter_changes(op) {
                let (sign, key) = match change.tag() {
                    similar::ChangeTag::Delete => ("-", StyleKey::DiffRemoved),
                    similar::ChangeTag::Insert => ("+", StyleKey::DiffAdded),
                    similar::ChangeTag::Equal => continue,
                };
                lines.push(Line::styled(
                    format!("{sign} {}", change.value().trim_end_matches('\n')),
                    style(state, key),
                ));
            }
        }
    }
    let ob = &before.replayed.outcome;
    let oa = &after.replayed.outcome;
    if ob.warnings != oa.warnings {
        lines.push(Line::styled(
            format!("warnings: {:?} → {:?}", ob.warnings, oa.warnings),
            style(state, StyleKey::Warning),
        ));
    }
    lines
}

/// The first line a scrolled pane `area` shows of `lines` (clamped) and its position text.
fn scrolled(state: &State, lines: &[Line], area: Rect) -> (u16, String) {
    let (w, h) = (
        area.width.saturating_sub(2),
        usize::from(area.height.saturating_sub(2)),
    );
    let total = scroll::wrapped_len(lines, w);
    let top = scroll::clamp(state.chain.detail.top, total, h);
    (
        u16::try_from(top).unwrap_or(u16::MAX),
        scroll::position(top, total, h),
    )
}

/// The lines of the Chain view's scrolled pane (the step's detail, or the final object's
/// changes when comparing) and the rows it shows, as `render` lays them out on a terminal of
/// `state.size`.
pub(crate) fn detail_extent(state: &State) -> Option<(usize, usize)> {
    let entry = state.selected_entry()?;
    let (_, area) = super::hit::chain_panes(state);
    let before = state
        .baseline
        .as_ref()
        .and_then(|b| state.requests.selected.and_then(|i| b.entries.get(i)));
    let lines = match (state.chain.compare, before) {
        (true, Some(before)) => compare_lines(state, before, entry),
        _ => detail_lines(
            state,
            entry,
            entry.replayed.outcome.calls.get(state.chain.step)?,
        ),
    };
    Some((
        scroll::wrapped_len(&lines, area.width.saturating_sub(2)),
        usize::from(area.height.saturating_sub(2)),
    ))
}

/// The least the detail pane keeps beside the grid.
const DETAIL_MIN: u16 = 32;

/// The grid's columns through the one table layout: the step's marker and symbol, its dispatch
/// position, the webhook (a policy with its binding), and the result in words (the symbol says
/// it too, so it is the first to go). A label is cut only below `min` columns.
fn grid_columns(min: u16) -> [Column; 4] {
    [
        Column::whole("", 9),
        Column::number("#", 5),
        Column::text("WEBHOOK", 8, min),
        Column::whole("RESULT", 3),
    ]
}

/// The grid's rows in chain order, each with the call it shows.
fn grid_rows(state: &State, entry: &Entry, step: Option<usize>) -> Vec<(usize, TableRow)> {
    let o = &entry.replayed.outcome;
    let deciding = model::deciding_call(o);
    model::chain_order(o, &state.hooks)
        .into_iter()
        .map(|i| {
            let c = &o.calls[i];
            let cs = model::cell_state(c);
            let (key, sym) = cell_look(state, cs);
            let mut st = style(state, key);
            if deciding == Some(i) {
                st = st.patch(state.theme.raw(StyleKey::CellDeciding));
            }
            let marker = if Some(i) == step {
                state.theme.symbol(SymbolKey::Selected)
            } else {
                " "
            };
            // A ValidatingAdmissionPolicy runs before the validating webhooks, once per
            // binding: no position, its name and its binding's.
            let (position, label) = match &c.policy {
                Some(_) => (
                    String::new(),
                    format!("policy {} · {}", c.configuration, c.webhook),
                ),
                None => (
                    model::dispatch_position(&state.hooks, c).to_string(),
                    c.webhook.to_string(),
                ),
            };
            let row = TableRow::new(vec![
                (format!("{marker}{sym}"), st),
                (position, st),
                (label, st),
                (cs.as_str().to_string(), st),
            ]);
            (i, row)
        })
        .collect()
}

/// The grid laid out for `rows` in a pane `width` columns wide: the labels are cut only where
/// the marker and the position leave them too little room, the result words shown only where
/// the labels are whole.
fn grid_laid(rows: &[(usize, TableRow)], width: u16) -> Laid {
    let widest = |i: usize, least: usize| {
        rows.iter()
            .map(|(_, r)| table::width(&r.cells[i].0))
            .fold(least, usize::max)
    };
    let inner = usize::from(width.saturating_sub(2));
    let room = inner.saturating_sub(widest(0, 0) + widest(1, 1) + 2);
    let min = u16::try_from(widest(2, 0).min(room))
        .unwrap_or(u16::MAX)
        .max(8);
    let cells: Vec<TableRow> = rows.iter().map(|(_, r)| r.clone()).collect();
    Laid::new(&grid_columns(min), &cells, width.saturating_sub(2))
}

/// The columns the grid takes of a body `width` wide: as many as show every label whole, at
/// least what its block titles need, and no more than 45% of the width (46 columns on a narrow
/// terminal), leaving the detail at least [`DETAIL_MIN`].
pub(crate) fn grid_width(state: &State, entry: &Entry, width: u16) -> u16 {
    let rows = grid_rows(state, entry, None);
    let natural = grid_laid(&rows, u16::MAX).used().saturating_add(2);
    let titles = [Block::Round0, Block::Round1, Block::Validating]
        .iter()
        .map(|b| table::width(b.title()))
        .max()
        .unwrap_or(0);
    let want = natural.max(u16::try_from(titles).unwrap_or(0).saturating_add(2));
    let most = (width / 20 * 9).max(46.min(width.saturating_sub(DETAIL_MIN)));
    want.min(most)
}

fn grid(
    frame: &mut Frame,
    state: &State,
    entry: &Entry,
    area: Rect,
    step: Option<usize>,
    title: &str,
    focused: bool,
) {
    let o = &entry.replayed.outcome;
    let mut lines: Vec<Line> = Vec::new();
    let mut current: Option<Block> = None;
    let mut selected_line = 0;
    let mut shown_step = 0;
    if o.calls.is_empty() {
        let why = o
            .steps()
            .iter()
            .find_map(|s| match &s.kind {
                StepKind::RequestExempt { reason } => Some(reason.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "no webhook is configured".into());
        lines.push(Line::styled(why, style(state, StyleKey::Muted)));
    }
    let width = usize::from(area.width.saturating_sub(2));
    let rows = grid_rows(state, entry, step);
    let laid = grid_laid(&rows, area.width);
    for (at, (i, row)) in rows.into_iter().enumerate() {
        let b = Block::of(&o.calls[i]);
        if current != Some(b) {
            if current.is_some() {
                lines.push(Line::raw(""));
            }
            lines.push(Line::styled(b.title(), style(state, StyleKey::Header)));
            current = Some(b);
        }
        let mut line = Line::from(laid.spans(row));
        if Some(i) == step {
            line = line.style(style(state, StyleKey::Selected));
            selected_line = lines.len();
            shown_step = at + 1;
        }
        lines.push(line);
    }
    if let Some(note) = not_considered(o) {
        lines.push(Line::raw(""));
        for l in wrap_words(&note, width.max(10)) {
            lines.push(Line::styled(l, style(state, StyleKey::Muted)));
        }
    }
    let height = area.height.saturating_sub(2) as usize;
    let scroll = selected_line.saturating_sub(height.saturating_sub(2));
    let title = laid.titled(
        &format!(" {title} {shown_step}/{} ", o.calls.len()),
        area.width,
    );
    let p = Paragraph::new(lines)
        .scroll((scroll as u16, 0))
        .block(pane(state, title, focused));
    frame.render_widget(p, area);
}

/// Whether the mutating round 0 ran to its end: it had webhooks, and the request did not fail in
/// it.
fn round0_completed(o: &crate::engine::Outcome) -> bool {
    use crate::api::WebhookKind;
    o.calls.iter().any(|c| c.phase == WebhookKind::Mutating) && not_considered(o).is_none()
}

/// What the dispatcher never considered because the request failed in the mutating phase: the
/// webhooks after the last one recorded, the reinvocation round and the validating phase.
pub(crate) fn not_considered(o: &crate::engine::Outcome) -> Option<String> {
    use crate::api::WebhookKind;
    let last = o.calls.last()?;
    let validating_ran = o.steps().iter().any(|s| {
        matches!(
            s.kind,
            StepKind::PhaseStarted {
                phase: WebhookKind::Validating,
                ..
            }
        )
    });
    if o.allowed || last.phase != WebhookKind::Mutating || validating_ran {
        return None;
    }
    Some(format!(
        "The request failed in mutating round {}: later webhooks{} and the validating phase were not considered.",
        last.round,
        if last.round == 0 { ", round 1" } else { "" }
    ))
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Pretty JSON, with Secret data masked unless revealed.
fn pretty(v: &Value, mask: bool) -> String {
    serde_json::to_string_pretty(&model::masked_object(v, mask)).unwrap_or_default()
}

/// A review or reply body: pretty when it is JSON, masking the objects it carries.
fn pretty_text(text: &str, mask: bool) -> String {
    match crate::json::from_str::<Value>(text) {
        Ok(mut v) => {
            if mask {
                for k in ["object", "oldObject"] {
                    if let Some(o) = v.get_mut("request").and_then(|r| r.get_mut(k)) {
                        redact_secret(o);
                    }
                }
            }
            serde_json::to_string_pretty(&v).unwrap_or_default()
        }
        Err(_) => text.to_string(),
    }
}

/// The patch with values written under /data or /stringData masked.
fn masked_patch(patch: &Value, mask: bool) -> String {
    serde_json::to_string_pretty(&model::masked_patch(patch, mask)).unwrap_or_default()
}

/// What an admission policy did with one binding: its parameters, a ValidatingAdmissionPolicy's
/// actions and failure message, and every expression's result (a mutation's is its patch).
fn policy_lines(
    state: &State,
    lines: &mut Vec<Line<'static>>,
    p: &crate::engine::policy::PolicyCall,
    phase: crate::api::WebhookKind,
) {
    if phase == crate::api::WebhookKind::Mutating {
        section(state, lines, "MutatingAdmissionPolicy");
    } else {
        section(state, lines, "ValidatingAdmissionPolicy");
        lines.push(Line::raw(format!(
            "validationActions: {}",
            p.validation_actions.join(", ")
        )));
    }
    if !p.params.is_empty() {
        lines.push(Line::raw(format!("params: {}", p.params.join(", "))));
    }
    if let Some(m) = &p.message {
        lines.push(Line::styled(
            format!("failed: {m}"),
            style(state, StyleKey::Denied),
        ));
    }
    for e in &p.expressions {
        let key = if e.result == "false" || e.result.starts_with("error") {
            StyleKey::Denied
        } else {
            StyleKey::Muted
        };
        lines.push(Line::from(vec![
            Span::raw(format!("{} ", e.field)),
            Span::styled(e.expression.to_string(), style(state, StyleKey::Json)),
            Span::styled(format!(" → {}", e.result), style(state, key)),
        ]));
    }
}

fn section<'a>(state: &State, lines: &mut Vec<Line<'a>>, title: &str) {
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        format!("── {title} ──"),
        style(state, StyleKey::Header),
    ));
}

fn block_of<'a>(state: &State, lines: &mut Vec<Line<'a>>, text: &str) {
    for l in text.lines() {
        lines.push(Line::styled(l.to_string(), style(state, StyleKey::Json)));
    }
}

/// The detail lines of one call: state, why, patch, diff, objects, annotations, review, reply.
pub(crate) fn detail_lines(state: &State, entry: &Entry, c: &CallRecord) -> Vec<Line<'static>> {
    let o = &entry.replayed.outcome;
    let mask = entry.secret && !state.reveal_secrets;
    let cs = model::cell_state(c);
    let (key, sym) = cell_look(state, cs);
    let mut lines: Vec<Line<'static>> = vec![
        Line::from(vec![
            Span::styled(format!("{sym} {}", c.webhook), style(state, key)),
            Span::styled(
                format!("  configuration {}", c.configuration),
                style(state, StyleKey::Muted),
            ),
        ]),
        Line::raw(format!(
            "{} · round {} · position {} · {} · failurePolicy {} · {:.1} ms",
            c.phase,
            c.round,
            model::dispatch_position(&state.hooks, c),
            cs.as_str(),
            c.failure_policy,
            c.duration_ms
        )),
    ];
    if mask {
        lines.push(Line::styled(
            "Secret data masked (x reveals)",
            style(state, StyleKey::Secret),
        ));
    }
    let steps = model::steps_of(o, c);
    section(state, &mut lines, "why");
    match (
        &c.skip_reason,
        steps.iter().find_map(|s| match &s.kind {
            StepKind::Matched {
                rule,
                resource,
                kind,
                equivalent,
                ..
            } => Some((rule, resource, kind, equivalent)),
            _ => None,
        }),
    ) {
        (Some(reason), _) => lines.push(Line::raw(format!("not called: {reason}"))),
        (None, Some((rule, resource, kind, eq))) => {
            let matched = format!(
                "rule {rule} matched {resource} ({kind}){}",
                if *eq {
                    " through matchPolicy Equivalent"
                } else {
                    ""
                }
            );
            let sent = steps
                .iter()
                .any(|s| matches!(s.kind, StepKind::ReviewSent { .. }));
            lines.push(Line::raw(if sent {
                format!("called: {matched}")
            } else {
                format!("not called: {matched}, but the call failed before a request was sent")
            }));
        }
        (None, None) => lines.push(Line::raw("called")),
    }
    if let Some(p) = &c.policy {
        policy_lines(state, &mut lines, p, c.phase);
    }
    if c.round == 1 && c.skip_reason.is_none() && c.policy.is_some() {
        lines.push(Line::raw(
            "reinvoked: reinvocationPolicy IfNeeded, and the object changed since the policy ran",
        ));
    } else if c.round == 1 && c.skip_reason.is_none() {
        lines.push(Line::styled(
            "reinvoked: it was called in round 0 with reinvocationPolicy IfNeeded, and a webhook after it changed the object in that round",
            style(state, StyleKey::Muted),
        ));
    }
    for s in &steps {
        match &s.kind {
            StepKind::Denied { status, .. } => {
                section(state, &mut lines, "denied");
                lines.push(Line::styled(
                    format!("{} {}", status.code, status.message),
                    style(state, StyleKey::Denied),
                ));
            }
            StepKind::CallFailed {
                error,
                failure_policy,
                failed_open,
                ..
            } => {
                section(
                    state,
                    &mut lines,
                    if *failed_open {
                        "failed open"
                    } else {
                        "call failed"
                    },
                );
                lines.push(Line::styled(
                    format!("{error} (failurePolicy {failure_policy})"),
                    style(
                        state,
                        if *failed_open {
                            StyleKey::FailedOpen
                        } else {
                            StyleKey::Error
                        },
                    ),
                ));
            }
            StepKind::PatchFailed { error, .. } => {
                section(state, &mut lines, "patch failed");
                lines.push(Line::styled(error.clone(), style(state, StyleKey::Error)));
            }
            _ => {}
        }
    }
    if let Some((patch, before, after, changed)) = steps.iter().find_map(|s| match &s.kind {
        StepKind::PatchApplied {
            patch,
            before,
            after,
            changed,
            ..
        } => Some((patch, before, after, changed)),
        _ => None,
    }) {
        section(state, &mut lines, "JSON patch");
        block_of(state, &mut lines, &masked_patch(patch, mask));
        let (b, a) = (pretty(before.value(), mask), pretty(after.value(), mask));
        section(
            state,
            &mut lines,
            if *changed {
                "diff (object before → after)"
            } else {
                "diff (no semantic change)"
            },
        );
        for (mark, l) in model::line_diff(&b, &a) {
            let key = match mark {
                '+' => StyleKey::DiffAdded,
                '-' => StyleKey::DiffRemoved,
                _ => StyleKey::DiffContext,
            };
            lines.push(Line::styled(format!("{mark} {l}"), style(state, key)));
        }
        section(state, &mut lines, "object before");
        block_of(state, &mut lines, &b);
        section(state, &mut lines, "object after");
        block_of(state, &mut lines, &a);
    }
    let annotations: Vec<(String, String)> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Annotation { key, value, .. } => Some((key.clone(), value.clone())),
            StepKind::AnnotationDropped { key, error } => {
                Some((key.clone(), format!("(dropped: {error})")))
            }
            _ => None,
        })
        .collect();
    if !annotations.is_empty() {
        section(state, &mut lines, "annotations written");
        for (k, v) in annotations {
            lines.push(Line::from(vec![
                Span::styled(k, style(state, StyleKey::AnnotationKey)),
                Span::raw(" = "),
                Span::styled(v, style(state, StyleKey::AnnotationValue)),
            ]));
        }
    }
    let warnings: Vec<String> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Warning { text, kept, .. } => Some(if *kept {
                text.clone()
            } else {
                format!("{text} (dropped)")
            }),
            _ => None,
        })
        .collect();
    if !warnings.is_empty() {
        section(state, &mut lines, "warnings");
        for w in warnings {
            lines.push(Line::styled(w, style(state, StyleKey::Warning)));
        }
    }
    for s in &steps {
        match &s.kind {
            StepKind::ReviewSent {
                url,
                timeout,
                review,
                ..
            } => {
                section(state, &mut lines, "AdmissionReview sent");
                lines.push(Line::styled(
                    format!(
                        "POST {url} (timeout {:.0} ms)",
                        timeout.as_secs_f64() * 1000.0
                    ),
                    style(state, StyleKey::Muted),
                ));
                block_of(state, &mut lines, &pretty_text(&review.text(), mask));
            }
            StepKind::ReplyReceived {
                http_status,
                body,
                transport_error,
                elapsed,
                ..
            } => {
                section(state, &mut lines, "reply received");
                lines.push(Line::styled(
                    format!(
                        "{} after {:.1} ms",
                        match (http_status, transport_error) {
                            (Some(s), _) => format!("HTTP {s}"),
                            (None, Some(e)) => format!("no response: {e}"),
                            (None, None) => "no response".into(),
                        },
                        elapsed.as_secs_f64() * 1000.0
                    ),
                    style(state, StyleKey::Muted),
                ));
                if let Some(b) = body {
                    block_of(state, &mut lines, &pretty_text(b, mask));
                }
            }
            _ => {}
        }
    }
    lines
}

fn render_detail(frame: &mut Frame, state: &State, entry: &Entry, area: Rect) {
    let o = &entry.replayed.outcome;
    let focused = state.chain.pane == ChainPane::Detail;
    let Some(c) = o.calls.get(state.chain.step) else {
        let p = Paragraph::new("").block(pane(state, " Step ", focused));
        frame.render_widget(p, area);
        return;
    };
    let lines = detail_lines(state, entry, c);
    let (top, position) = scrolled(state, &lines, area);
    // A narrow pane cuts its title between words, never inside one.
    let title = super::words_within(
        &format!(
            " Step {position}· {} · {} ",
            c.webhook,
            Block::of(c).title()
        ),
        usize::from(area.width.saturating_sub(2)),
    );
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .scroll((top, 0))
        .block(pane(state, title, focused));
    frame.render_widget(p, area);
}
