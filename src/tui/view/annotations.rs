//! The Annotations view: audit annotations in the order the replay wrote them (or, live, as the
//! apiserver's audit events bring them), the decoded value beside the raw one; follows the tail
//! unless scrolled.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::table::{Column, Laid, TableRow};
use super::{pane, style};
use crate::tui::app::State;
use crate::tui::theme::{StyleKey, SymbolKey};

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
            let (top, _, _) = window(state, visible.len(), height);
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
            (visible.len(), rows, "from audit events".into(), " EVENT")
        }
        None => {
            let visible = state.visible_annotations();
            let (top, _, _) = window(state, visible.len(), height);
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
                " REQUEST",
            )
        }
    };
    let (top, cursor, following) = window(state, total, height);
    let mut title = format!(
        " Annotations {total} {what} · {}/{total} · {} ",
        cursor + 1,
        if following { "following" } else { "G follows" }
    );
    if !state.annotations_view.filter.is_empty() {
        title.push_str(&format!("· filter {:?} ", state.annotations_view.filter));
    }
    if total == 0 {
        let block = pane(state, title, true);
        let p = Paragraph::new(Line::styled(
            "No annotation written yet.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, area);
        return;
    }
    let plain = Style::default();
    let sel = state.theme.symbol(SymbolKey::Selected);
    let table_rows: Vec<TableRow> = rows
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            let here = top + i == cursor;
            let row = TableRow::new(vec![
                (
                    format!("{}{}", if here { sel } else { " " }, a.origin),
                    plain,
                ),
                (short_key(&a.key), style(state, StyleKey::AnnotationKey)),
                (a.decoded, plain),
                (a.raw, style(state, StyleKey::AnnotationValue)),
            ]);
            row.selected_if(here, state)
        })
        .collect();
    let mut columns = COLUMNS;
    columns[0].title = first_column;
    let laid = Laid::new(&columns, &table_rows, area.width.saturating_sub(2));
    let title = laid.titled(&title, area.width);
    let table = laid
        .table(table_rows, style(state, StyleKey::Header))
        .block(pane(state, title, true));
    frame.render_widget(table, area);
}

/// The table's columns (the first one's title says whether rows come from requests or events).
const COLUMNS: [Column; 4] = [
    Column::text(" REQUEST", 8, 12),
    Column::text("KEY", 9, 16),
    Column::text("DECODED", 7, 16),
    Column::text("RAW", 2, 10),
];

/// The first row shown of `total` in `height` rows (the cursor's row kept on screen), the
/// cursor's row, and whether the view follows the tail.
pub(crate) fn window(state: &State, total: usize, height: usize) -> (usize, usize, bool) {
    let cursor = state.annotations_view.cursor.at(total);
    let top = cursor.saturating_sub(height.saturating_sub(1));
    (top, cursor, state.annotations_view.cursor.following())
}

/// `mutation.webhook.admission.k8s.io/round_0_index_1` as `mutation/round_0_index_1`.
fn short_key(key: &str) -> String {
    key.split_once('/')
        .map(|(p, k)| format!("{}/{k}", p.split('.').next().unwrap_or(p)))
        .unwrap_or_else(|| key.to_string())
}
