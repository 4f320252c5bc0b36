//! The confirmation of a live apply: the server's dry run as a diff, over the current view.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

use super::{diff_lines, pane, style};
use crate::tui::app::State;
use crate::tui::theme::StyleKey;

/// Draws the pending dry run centred in `area`, if there is one.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let Some(pending) = state.live.as_deref().and_then(|l| l.pending_apply.as_ref()) else {
        return;
    };
    let lines: Vec<Line> = match pending.request {
        Some(_) => diff_lines(state, &pending.diff).collect(),
        None => pending.diff.lines().map(Line::raw).collect(),
    };
    let width = area.width.saturating_sub(4).min(110);
    let height = area.height.saturating_sub(2);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let title = match &pending.request {
        Some(r) => format!(
            " Server-side dry run{}: what the cluster would store · y applies · n cancels ",
            if r.force { " · force" } else { "" }
        ),
        None => " Refused by the server · esc closes ".to_string(),
    };
    frame.render_widget(Clear, popup);
    let block = pane(state, title, true).style(style(state, StyleKey::Base));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(ratatui::widgets::Wrap { trim: false })
            .scroll((pending.scroll, 0)),
        popup,
    );
}
