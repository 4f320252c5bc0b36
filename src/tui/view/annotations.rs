//! The Annotations view: audit annotations in the order the replay wrote them (or, live, as the
//! apiserver's audit events bring them), the decoded value beside the raw one; follows the tail
//! unless scrolled.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::{clip, pane, style};
use crate::tui::app::State;
use crate::tui::theme::StyleKey;

/// One row: where it came from, the key, the decoded value, the raw value.
struct Shown {
    origin: String,
    key: String,
    decoded: String,
    raw: String,
}

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let height = area.height.saturating_sub(3) as usize;
    let (total, rows, what, first_column): (usize, Vec<Shown>, String, &str) = match state
        .live
        .as_deref()
    {
        Some(live) => {
            let visible: Vec<_> = state.visible_live_annotations(live).collect();
            let (top, _) = window(state, visible.len(), height);
            let rows = visible
                .iter()
                .skip(top)
                .take(height)
                .map(|a| {
                    let (target, resource) = live
                        .event(a.event)
                        .map(|e| (e.target.as_str(), e.resource.as_str()))
                        .unwrap_or(("", ""));
                    let (decoded, masked) = super::events::annotation_text(
                        resource,
                        &a.key,
                        &a.value,
                        state.reveal_secrets,
                    );
                    Shown {
                        origin: format!("#{} {target}", a.event + 1),
                        key: a.key.clone(),
                        decoded,
                        raw: if masked {
                            String::new()
                        } else {
                            a.value.clone()
                        },
                    }
                })
                .collect();
            (visible.len(), rows, "from audit events".into(), "EVENT")
        }
        None => {
            let visible = state.visible_annotations();
            let (top, _) = window(state, visible.len(), height);
            let rows = visible
                .iter()
                .skip(top)
                .take(height)
                .filter_map(|a| {
                    let written = state.annotation(a)?;
                    let target = state.entries.get(a.request())?.row().target;
                    Some(Shown {
                        origin: format!("#{} {target}", a.request() + 1),
                        key: written.key.to_string(),
                        decoded: crate::tui::model::decode_annotation(&written.key, &written.value)
                            .unwrap_or_else(|| written.value.to_string()),
                        raw: written.value.to_string(),
                    })
                })
                .collect();
            (
                visible.len(),
                rows,
                format!("(level {})", state.audit_level),
                "REQUEST",
            )
        }
    };
    let (_, following) = window(state, total, height);
    let mut title = format!(
        " Annotations {total} {what} · {} ",
        if following {
            "following"
        } else {
            "scrolled: G follows"
        }
    );
    if !state.annotation_filter.is_empty() {
        title.push_str(&format!("· filter {:?} ", state.annotation_filter));
    }
    let block = pane(state, title, true);
    if total == 0 {
        let p = Paragraph::new(Line::styled(
            "No annotation written yet.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, area);
        return;
    }
    let width = area.width.saturating_sub(2) as usize;
    let raw_width = width.saturating_sub(24 + 28 + 50 + 3);
    // Live, the selected annotation (enter opens its event, y copies it), else the newest.
    let (top, _) = window(state, total, height);
    let selected = match state.live {
        None => None,
        Some(_) => state
            .annotation_selected
            .unwrap_or(total.saturating_sub(1))
            .checked_sub(top),
    };
    let table_rows: Vec<Row> = rows
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            let row = Row::new(vec![
                Cell::from(clip(&a.origin, 24)),
                Cell::from(Span::styled(
                    clip(&short_key(&a.key), 28),
                    style(state, StyleKey::AnnotationKey),
                )),
                Cell::from(clip(&a.decoded, 50)),
                Cell::from(Span::styled(
                    clip(&a.raw, raw_width),
                    style(state, StyleKey::AnnotationValue),
                )),
            ]);
            if selected == Some(i) {
                row.style(style(state, StyleKey::Selected))
            } else {
                row
            }
        })
        .collect();
    let header =
        Row::new(vec![first_column, "KEY", "DECODED", "RAW"]).style(style(state, StyleKey::Header));
    let table = Table::new(
        table_rows,
        [
            Constraint::Length(24),
            Constraint::Length(28),
            Constraint::Length(50),
            Constraint::Min(10),
        ],
    )
    .header(header)
    .block(block);
    frame.render_widget(table, area);
}

/// The first row shown of `total` in `height` rows, and whether the view follows the tail.
fn window(state: &State, total: usize, height: usize) -> (usize, bool) {
    let last_top = total.saturating_sub(height);
    match state.annotation_top {
        Some(t) => (t.min(last_top), false),
        None => (last_top, true),
    }
}

/// `mutation.webhook.admission.k8s.io/round_0_index_1` as `mutation/round_0_index_1`.
fn short_key(key: &str) -> String {
    key.split_once('/')
        .map(|(p, k)| format!("{}/{k}", p.split('.').next().unwrap_or(p)))
        .unwrap_or_else(|| key.to_string())
}
