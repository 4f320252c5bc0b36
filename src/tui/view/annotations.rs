//! The Annotations view: audit annotations in the order the replay wrote them, the decoded
//! value beside the raw one; follows the tail unless scrolled.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::{clip, pane, style};
use crate::tui::app::State;
use crate::tui::theme::StyleKey;

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let rows = state.visible_annotations();
    let height = area.height.saturating_sub(3) as usize;
    let last_top = rows.len().saturating_sub(height);
    let (top, following) = match state.annotation_top {
        Some(t) => (t.min(last_top), false),
        None => (last_top, true),
    };
    let mut title = format!(
        " Annotations {} (level {}) · {} ",
        rows.len(),
        state.audit_level,
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
    if rows.is_empty() {
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
    let table_rows: Vec<Row> = rows
        .iter()
        .skip(top)
        .take(height)
        .map(|a| {
            let e = &state.entries[a.request];
            let key = a
                .key
                .split_once('/')
                .map(|(p, k)| format!("{}/{k}", p.split('.').next().unwrap_or(p)))
                .unwrap_or_else(|| a.key.clone());
            Row::new(vec![
                Cell::from(clip(&format!("#{} {}", a.request + 1, e.row.target), 24)),
                Cell::from(Span::styled(
                    clip(&key, 28),
                    style(state, StyleKey::AnnotationKey),
                )),
                Cell::from(clip(a.decoded.as_deref().unwrap_or(&a.value), 50)),
                Cell::from(Span::styled(
                    clip(&a.value, raw_width),
                    style(state, StyleKey::AnnotationValue),
                )),
            ])
        })
        .collect();
    let header =
        Row::new(vec!["REQUEST", "KEY", "DECODED", "RAW"]).style(style(state, StyleKey::Header));
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
