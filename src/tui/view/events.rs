//! The Events view (live): audit events as they arrive, following the tail unless one is
//! selected, with the selected event's admission annotations decoded; `r` replays it against
//! the configurations in force.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::table::{Column, Laid, TableRow};
use super::{pane, style};
use crate::tui::app::State;
use crate::tui::live::AuditRecord;
use crate::tui::model;
use crate::tui::theme::StyleKey;
use ratatui::style::Style;

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let Some(live) = state.live.as_deref() else {
        super::cluster::not_live(frame, state, area, " Events ");
        return;
    };
    let [list, detail] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Min(6)]).areas(area);
    let following = live.events_view.selected.is_none();
    let namespace = live
        .namespace
        .as_deref()
        .map(|ns| format!("namespace {ns} · "))
        .unwrap_or_default();
    let shown: Vec<(u64, &AuditRecord)> = live.visible_events().collect();
    // The first number is the rows listed; what hides the others follows.
    let mut why = Vec::new();
    if !live.events_view.filter.is_empty() {
        why.push(format!("/{}", live.events_view.filter));
    }
    let routine = live.hidden_noise();
    if routine > 0 {
        why.push(format!("{routine} routine hidden (:noise)"));
    }
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" · {}", why.join(" · "))
    };
    let title = format!(
        " Events {namespace}{} shown of {} kept{why} · {} seen · {} paged out · {} ",
        shown.len(),
        live.events.len(),
        live.events_seen,
        live.paged_out(),
        if following {
            "following"
        } else {
            "selected: G follows"
        }
    );
    if shown.is_empty() {
        let text = match &live.namespace {
            Some(ns) if !live.events.is_empty() => {
                format!("No audit event in namespace {ns} (:ns - shows every namespace).")
            }
            _ if !live.events_view.filter.is_empty() => format!(
                "No audit event contains {:?} (esc clears the filter).",
                live.events_view.filter
            ),
            _ if !live.events.is_empty() => {
                "Only routine events so far (:noise shows them).".to_string()
            }
            _ => "No audit event yet.".to_string(),
        };
        let p = Paragraph::new(Line::styled(text, style(state, StyleKey::Muted)))
            .block(pane(state, title, true));
        frame.render_widget(p, list);
        frame.render_widget(pane(state, " Event ", false), detail);
        return;
    }
    let height = list.height.saturating_sub(3) as usize;
    let selected = live.selected_event().unwrap_or(shown[0].0);
    let at = shown.partition_point(|(seq, _)| *seq < selected);
    let top = at.saturating_sub(height.saturating_sub(1));
    let plain = Style::default();
    let rows: Vec<TableRow> = shown
        .iter()
        .enumerate()
        .skip(top)
        .take(height)
        .map(|(i, (seq, e))| {
            let code = e.code.map(|c| c.to_string()).unwrap_or_default();
            let code_style = match e.code {
                Some(c) if (200..300).contains(&c) => StyleKey::Allowed,
                Some(_) => StyleKey::Denied,
                None => StyleKey::Muted,
            };
            let replay = if e.request.is_some() { "⟳" } else { "" };
            let row = TableRow::new(vec![
                (format!("{}", seq + 1), plain),
                (time_of(&e.at), plain),
                (e.verb.clone(), plain),
                (e.resource.clone(), plain),
                (e.target.clone(), plain),
                (e.user.clone(), plain),
                (code, style(state, code_style)),
                (format!("{}", e.annotations.len()), plain),
                (replay.to_string(), plain),
            ]);
            row.selected_if(i == at && !following, state)
        })
        .collect();
    let laid = Laid::new(&COLUMNS, &rows, list.width.saturating_sub(2));
    let title = laid.titled(&title, list.width);
    let table = laid
        .table(rows, style(state, StyleKey::Header))
        .block(pane(state, title, true));
    frame.render_widget(table, list);
    if let Some(e) = live.event(selected) {
        render_detail(frame, state, e, detail);
    }
}

/// The table's columns.
const COLUMNS: [Column; 9] = [
    Column::number("#", 9),
    Column::whole("TIME", 4),
    Column::whole("VERB", 8),
    Column::text("RESOURCE", 6, 8).short("RES"),
    Column::text("TARGET", 7, 12),
    Column::text("USER", 3, 8),
    Column::number("CODE", 9),
    Column::number("ANN", 5),
    // ⟳: the event's request can be replayed
    Column::whole("", 8),
];

/// The time of day of an RFC 3339 timestamp (`12:00:01.5`), or the text as recorded.
fn time_of(at: &str) -> String {
    at.split_once('T')
        .map(|(_, t)| t.trim_end_matches('Z').chars().take(12).collect())
        .unwrap_or_else(|| at.to_string())
}

/// What an annotation of an event on `resource` shows: its decoded value, and whether it is a
/// patch of a Secret masked because Secret data is not revealed.
pub(crate) fn annotation_text(
    resource: &str,
    key: &str,
    value: &str,
    reveal: bool,
) -> (String, bool) {
    if !reveal && resource == "secrets" && key.starts_with("patch.") {
        return ("(patch of a Secret masked: :reveal shows it)".into(), true);
    }
    let decoded = model::decode_annotation(key, value).unwrap_or_else(|| value.to_string());
    (decoded, false)
}

fn render_detail(frame: &mut Frame, state: &State, e: &AuditRecord, area: Rect) {
    let label = |s: &str| Span::styled(format!("{s:<9}"), style(state, StyleKey::Header));
    let mut lines = vec![
        Line::from(vec![
            label("auditID"),
            Span::raw(format!("{} · {} · {}", e.audit_id, e.stage, e.origin)),
        ]),
        Line::from(vec![
            label("request"),
            Span::raw(format!(
                "{} {} {} by {} → {}",
                e.verb,
                e.resource,
                e.target,
                e.user,
                e.code.map(|c| c.to_string()).unwrap_or_else(|| "?".into())
            )),
        ]),
    ];
    if let Some(message) = &e.message {
        let key = if e.code.is_some_and(|c| (200..300).contains(&c)) {
            StyleKey::Muted
        } else {
            StyleKey::Denied
        };
        lines.push(Line::from(vec![
            label("status"),
            Span::styled(message.clone(), style(state, key)),
        ]));
    }
    match (&e.request, &e.not_replayable) {
        (Some(_), _) => lines.push(Line::styled(
            "r replays it against the configurations in force; R replays every kept event",
            style(state, StyleKey::Muted),
        )),
        (None, Some(why)) => lines.push(Line::styled(
            format!("not replayable: {why}"),
            style(state, StyleKey::Warning),
        )),
        (None, None) => lines.push(Line::styled(
            "no admission request in this event (its level or verb records none)",
            style(state, StyleKey::Muted),
        )),
    }
    if e.annotations.is_empty() {
        lines.push(Line::styled(
            "no admission webhook annotation",
            style(state, StyleKey::Muted),
        ));
    }
    for (key, value) in &e.annotations {
        lines.push(Line::from(vec![
            Span::styled(key.clone(), style(state, StyleKey::AnnotationKey)),
            Span::raw(" "),
            Span::styled(
                annotation_text(&e.resource, key, value, state.reveal_secrets).0,
                style(state, StyleKey::AnnotationValue),
            ),
        ]));
    }
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(pane(state, " Event ", false));
    frame.render_widget(p, area);
}
