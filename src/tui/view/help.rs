//! The help overlay: the keys of the current view from the live keymap, and the commands.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{pane, style};
use crate::tui::app::{State, View};
use crate::tui::filter::FIELDS;
use crate::tui::keymap::{COMMANDS, Scope};
use crate::tui::theme::StyleKey;

/// Draws the overlay centred in `area`.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let bindings = state.keymap.for_view(state.view);
    let key_style = style(state, StyleKey::HelpKey);
    let text_style = style(state, StyleKey::HelpText);
    let section = style(state, StyleKey::HelpSection);
    let mut lines = vec![Line::styled(
        format!("{} keys", state.view.title()),
        section,
    )];
    let mut global = false;
    for b in bindings {
        if b.scope == Scope::Global && !global {
            global = true;
            lines.push(Line::styled("everywhere", section));
        }
        let keys: Vec<String> = b.keys.iter().map(|k| k.label()).collect();
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<16}", keys.join(" / ")), key_style),
            Span::styled(b.help, text_style),
        ]));
    }
    if state.view == View::Requests {
        lines.push(Line::styled(
            "filter (/): words and fields, all must match",
            section,
        ));
        for (names, help) in FIELDS {
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {:<16}", format!("{}:", names.join(": / "))),
                    key_style,
                ),
                Span::styled(*help, text_style),
            ]));
        }
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<16}", "!TERM"), key_style),
            Span::styled("not TERM (e.g. !verdict:allowed)", text_style),
        ]));
    }
    let mut commands = vec![Line::styled("commands (:)", section)];
    for (name, arg, help) in COMMANDS {
        commands.push(Line::styled(format!("  {name}{arg}"), key_style));
        commands.push(Line::styled(format!("      {help}"), text_style));
    }
    let width = 118.min(area.width);
    let height = (lines.len().max(commands.len()) as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    let block = pane(state, " Help · esc closes ", true);
    let inner = block.inner(popup);
    frame.render_widget(block.style(style(state, StyleKey::Base)), popup);
    let [left, right] =
        Layout::horizontal([Constraint::Length(50), Constraint::Min(10)]).areas(inner);
    frame.render_widget(Paragraph::new(lines), left);
    frame.render_widget(Paragraph::new(commands), right);
}
