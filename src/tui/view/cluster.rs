//! The Cluster view (live): the connection and what to do when it fails, each feed's health,
//! the audit source, and the history of configuration changes with the selected change's diff.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::table::{Column, TableRow};
use super::{pane, style};
use crate::live::cluster::{AdmissionKind, ChangeAction, Feed, Seen};
use crate::tui::app::State;
use crate::tui::live::{Connection, LiveState, clock};
use crate::tui::theme::StyleKey;
use ratatui::style::Style;

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let Some(live) = state.live.as_deref() else {
        not_live(frame, state, area, " Cluster ");
        return;
    };
    // Room for every feed, but at most half the screen: the history needs it too.
    let top = 17.min(area.height / 2).max(14.min(area.height));
    let [top, bottom] = Layout::vertical([Constraint::Length(top), Constraint::Min(5)]).areas(area);
    let [connection, feeds] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Min(30)]).areas(top);
    render_connection(frame, state, live, connection);
    render_feeds(frame, state, live, feeds);
    let [list, diff] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Min(30)]).areas(bottom);
    render_changes(frame, state, live, list);
    render_diff(frame, state, live, diff);
}

/// What a replay's console shows in a live view.
pub(super) fn not_live(frame: &mut Frame, state: &State, area: Rect, title: &'static str) {
    let p = Paragraph::new(Line::styled(
        "Not connected to a cluster: this view is for `hookscope live`.",
        style(state, StyleKey::Muted),
    ))
    .block(pane(state, title, true));
    frame.render_widget(p, area);
}

fn render_connection(frame: &mut Frame, state: &State, live: &LiveState, area: Rect) {
    let label = |s: &str| Span::styled(format!("{s:<10}"), style(state, StyleKey::Header));
    let mut lines = Vec::new();
    match &live.connection {
        Connection::Starting => lines.push(Line::styled(
            "reading the kubeconfig…",
            style(state, StyleKey::Warning),
        )),
        Connection::Connecting {
            server,
            context,
            attempt,
        } => {
            lines.push(Line::styled(
                format!("◌ connecting (attempt {attempt})"),
                style(state, StyleKey::Warning),
            ));
            lines.push(Line::from(vec![label("server"), Span::raw(server.clone())]));
            lines.push(Line::from(vec![
                label("context"),
                Span::raw(context.clone()),
            ]));
        }
        Connection::Connected(c, since) => {
            lines.push(Line::styled(
                format!(
                    "● connected · {} · since {}",
                    c.server_version,
                    clock(*since)
                ),
                style(state, StyleKey::Allowed),
            ));
            lines.push(Line::from(vec![
                label("server"),
                Span::raw(c.info.server.clone()),
            ]));
            lines.push(Line::from(vec![
                label("context"),
                Span::raw(format!(
                    "{} (user {}, namespace {})",
                    c.info.context, c.info.user, c.info.namespace
                )),
            ]));
        }
        Connection::Failed(f, at) => {
            lines.push(Line::styled(
                format!(
                    "✗ {} · at {} (retrying in {:.0?})",
                    f.reason,
                    clock(*at),
                    f.retry_in
                ),
                style(state, StyleKey::Error),
            ));
            lines.push(Line::styled(
                format!("→ {}", f.action),
                style(state, StyleKey::Warning),
            ));
            if let Some(r) = &f.rbac {
                lines.push(Line::raw(format!("check: {}", r.check)));
            }
            match &live.target {
                Some((server, context)) => {
                    lines.push(Line::from(vec![label("server"), Span::raw(server.clone())]));
                    lines.push(Line::from(vec![
                        label("context"),
                        Span::raw(context.clone()),
                    ]));
                }
                None => lines.push(Line::from(vec![
                    label("context"),
                    Span::styled(
                        "none read: the kubeconfig could not be used",
                        style(state, StyleKey::Muted),
                    ),
                ])),
            }
        }
    }
    if let Some(r) = &live.release {
        let key = if r.exact() {
            StyleKey::Allowed
        } else {
            StyleKey::Warning
        };
        lines.push(Line::from(vec![
            label("release"),
            Span::styled(r.describe(), style(state, key)),
        ]));
    }
    let synced = live.listing();
    let policies = if live.policies + live.bindings > 0 {
        format!(
            ", {} policies with {} bindings",
            live.policies, live.bindings
        )
    } else {
        String::new()
    };
    lines.push(Line::from(vec![
        label("in force"),
        Span::raw(format!(
            "{} configurations, {} webhooks{policies} ({synced})",
            live.configurations,
            state.hooks.len()
                - state
                    .hooks
                    .iter()
                    .filter(|h| h.policy_kind().is_some())
                    .count()
        )),
    ]));
    for u in &live.unreadable {
        lines.push(Line::styled(
            format!("  ! replayed without {u}"),
            style(state, StyleKey::Warning),
        ));
    }
    for p in live.configuration_problems.iter().take(2) {
        lines.push(Line::styled(
            format!("  ! {p}"),
            style(state, StyleKey::Warning),
        ));
    }
    let writes = if live.allow_writes {
        "writes allowed (--allow-writes): :apply shows a server-side dry run, then asks"
    } else {
        "read-only (no --allow-writes)"
    };
    lines.push(Line::from(vec![label("mode"), Span::raw(writes)]));
    lines.push(Line::from(vec![
        label("session"),
        Span::raw(live.summary.clone()),
    ]));
    let p =
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(pane(state, " Connection ", false));
    frame.render_widget(p, area);
}

fn render_feeds(frame: &mut Frame, state: &State, live: &LiveState, area: Rect) {
    let connected = matches!(live.connection, Connection::Connected(..));
    let mut lines = Vec::new();
    let feeds = AdmissionKind::ALL.map(Feed::Admission).into_iter().chain([
        Feed::Namespaces,
        Feed::Crds,
        Feed::Params,
        Feed::Metrics,
        Feed::Instances,
        Feed::Prometheus,
    ]);
    // With --prometheus the metrics come from there, not from /metrics.
    let queried = live.feed(Feed::Prometheus).is_some();
    for feed in feeds {
        let served = match (feed, &live.served) {
            (Feed::Admission(kind), Some(served)) => {
                served.iter().find(|s| s.kind == kind).map(|s| s.version)
            }
            _ => None,
        };
        let name = match feed {
            Feed::Admission(AdmissionKind::MutatingWebhookConfiguration) => {
                "mutating watch".to_string()
            }
            Feed::Admission(AdmissionKind::ValidatingWebhookConfiguration) => {
                "validating watch".to_string()
            }
            Feed::Admission(kind) => match served.flatten() {
                Some(version) => format!("{} watch ({version})", kind.short()),
                None => format!("{} watch", kind.short()),
            },
            Feed::Namespaces => "namespaces watch".to_string(),
            Feed::Crds => "CRDs watch".to_string(),
            // Only once the policies in force take parameters.
            Feed::Params if live.params.is_none() && live.feed(feed).is_none() => continue,
            Feed::Params => "policy params watch".to_string(),
            Feed::Metrics | Feed::Instances if queried => continue,
            Feed::Metrics => "/metrics".to_string(),
            // Only once the scraper has said how it reads /metrics.
            Feed::Instances | Feed::Prometheus if live.feed(feed).is_none() => continue,
            Feed::Instances => "per-apiserver /metrics".to_string(),
            Feed::Prometheus => "prometheus queries".to_string(),
        };
        if let (Feed::Admission(kind), Some(None)) = (feed, served) {
            // Discovery found no version serving it: not a failure, nothing to watch.
            lines.push(Line::styled(
                format!("– {}: not served by this server", kind.short()),
                style(state, StyleKey::Muted),
            ));
            continue;
        }
        // Each feed's latest outcome, with its time.
        let outcome = live.feed(feed);
        match outcome.and_then(|o| o.failure.as_ref().map(|f| (o.at, f))) {
            Some((at, f)) => {
                lines.push(Line::styled(
                    format!("✗ {name} · {}: {}", clock(at), f.reason),
                    style(state, StyleKey::Error),
                ));
                lines.push(Line::raw(format!("  → {}", f.action)));
                if let Some(r) = &f.rbac {
                    for l in r.rule.lines() {
                        lines.push(Line::styled(
                            format!("    {l}"),
                            style(state, StyleKey::Json),
                        ));
                    }
                }
            }
            // Prometheus is read whether or not the cluster answers.
            None if (!connected && feed != Feed::Prometheus) || outcome.is_none() => {
                let last = match outcome {
                    Some(o) if !connected => format!(" · not connected (ok {})", clock(o.at)),
                    _ => String::new(),
                };
                lines.push(Line::styled(
                    format!("◌ {name}{last}"),
                    style(state, StyleKey::Muted),
                ))
            }
            None => {
                let extra = match (feed, live.history.latest(), live.namespaces) {
                    (Feed::Metrics, Some((at, _)), _) => format!(" · last scrape {}", clock(at)),
                    (Feed::Metrics, None, _) => " · no scrape yet".into(),
                    (Feed::Instances | Feed::Prometheus, latest, _) => {
                        let n = latest.map_or(0, |(_, s)| s.instances().len());
                        let last = match (feed, latest) {
                            (Feed::Prometheus, Some((at, _))) => {
                                format!(" · latest values {}", clock(at))
                            }
                            _ => String::new(),
                        };
                        // Counted from the series: an apiserver that has counted no admission
                        // yet has none.
                        format!(" · series of {n} apiservers{last}")
                    }
                    (Feed::Namespaces, _, Some(n)) => format!(" · {n} namespaces"),
                    (Feed::Crds, _, _) => match live.crds {
                        Some(n) => format!(" · {n} definitions"),
                        None => String::new(),
                    },
                    (Feed::Params, _, _) => match live.params {
                        Some((n, at)) => format!(" · {n} objects (changed {})", clock(at)),
                        None => " · not listed yet".to_string(),
                    },
                    _ => String::new(),
                };
                let since = match (feed, outcome) {
                    // The scrape's own time says it.
                    (Feed::Metrics | Feed::Prometheus, _) | (_, None) => String::new(),
                    (_, Some(o)) => format!(" · ok {}", clock(o.at)),
                };
                lines.push(Line::styled(
                    format!("✓ {name}{extra}{since}"),
                    style(state, StyleKey::Allowed),
                ));
            }
        }
    }
    lines.push(Line::styled("audit", style(state, StyleKey::Header)));
    if live.notices.is_empty() && live.events_seen == 0 {
        lines.push(Line::styled(
            "no audit source (--follow-audit-log or --audit-webhook)",
            style(state, StyleKey::Muted),
        ));
    }
    if live.events_seen > 0 {
        lines.push(Line::raw(format!(
            "{} events ({} kept, {} paged out)",
            live.events_seen,
            live.events.len(),
            live.paged_out()
        )));
    }
    for n in live.notices.iter().rev().take(3) {
        lines.push(Line::raw(format!("{} {}", clock(n.0), n.1)));
    }
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(pane(state, " Feeds ", false));
    frame.render_widget(p, area);
}

fn render_changes(frame: &mut Frame, state: &State, live: &LiveState, area: Rect) {
    let title = format!(" Admission configuration changes {} ", live.changes.len());
    if live.changes.is_empty() {
        super::empty_pane(frame, state, "No change seen yet.", title, area);
        return;
    }
    let height = area.height.saturating_sub(3) as usize;
    let selected = live.cluster_view.at(live.changes.len()).unwrap_or(0);
    let top = selected.saturating_sub(height.saturating_sub(1));
    let rows: Vec<TableRow> = live
        .changes
        .iter()
        .enumerate()
        .skip(top)
        .take(height)
        .map(|(i, c)| {
            let (action, key) = match c.action {
                ChangeAction::Added => ("added", StyleKey::Allowed),
                ChangeAction::Modified => ("modified", StyleKey::Warning),
                ChangeAction::Deleted => ("deleted", StyleKey::Denied),
            };
            let seen = match c.seen {
                Seen::Event => "",
                Seen::Relist => " (relist)",
            };
            let kind = c.kind.short();
            let plain = Style::default();
            let row = TableRow::new(vec![
                (clock(c.observed_at), plain),
                (format!("{action}{seen}"), style(state, key)),
                (kind.to_string(), plain),
                (c.name.clone(), plain),
                (c.who.clone(), plain),
                (c.resource_version.clone(), plain),
            ]);
            row.selected_if(i == selected, state)
        })
        .collect();
    super::table::draw(frame, state, (&CHANGES, rows), (&title, true), area);
}

/// The changes table's columns.
const CHANGES: [Column; 6] = [
    Column::whole("SEEN", 8),
    Column::whole("ACTION", 9),
    Column::whole("KIND", 5),
    Column::text("NAME", 10, 12),
    Column::text("WHO", 6, 8),
    Column::number("RV", 4),
];

fn render_diff(frame: &mut Frame, state: &State, live: &LiveState, area: Rect) {
    let Some(c) = live.selected_change() else {
        frame.render_widget(pane(state, " Diff ", false), area);
        return;
    };
    let mut lines = vec![Line::styled(
        format!(
            "{} by {}{}",
            c.server_time.as_deref().unwrap_or("(no server time)"),
            c.who,
            c.operation
                .as_deref()
                .map(|o| format!(" ({o})"))
                .unwrap_or_default()
        ),
        style(state, StyleKey::Muted),
    )];
    lines.extend(super::diff_lines(state, &c.diff));
    let p = Paragraph::new(lines).block(pane(state, format!(" Diff: {} ", c.name), false));
    frame.render_widget(p, area);
}
