//! The Edit view: the open configuration texts, the one being edited with its line numbers, the
//! lines with problems marked, and the problems of the last check with their field paths.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{clip, pane, style};
use crate::tui::app::State;
use crate::tui::edit_keys::EditMode;
use crate::tui::editing::Buffer;
use crate::tui::theme::StyleKey;

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let Some(buffer) = state.current_buffer() else {
        let p = Paragraph::new(vec![
            Line::styled(
                "No configuration is open.",
                style(state, StyleKey::Muted),
            ),
            Line::styled(
                "In Webhooks (5), e edits the selected webhook's configuration; :edit NAME opens one by name; :new mutating|validating NAME starts from a template.",
                style(state, StyleKey::Muted),
            ),
        ])
        .wrap(Wrap { trim: true })
        .block(pane(state, " Edit ", true));
        frame.render_widget(p, area);
        return;
    };
    let problems = buffer.check.errors.len() + buffer.check.warnings.len();
    let below = if problems == 0 && buffer.disk_changed.is_none() {
        3
    } else {
        (problems as u16 + 3).min(area.height / 3).max(4)
    };
    let [tabs, text, info] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(below),
    ])
    .areas(area);
    render_buffers(frame, state, tabs);
    render_text(frame, state, buffer, text);
    render_problems(frame, state, buffer, info);
}

/// Each label shortened to its last path parts, as many as tell it apart from the others
/// (`validating.yaml`, or `a/validating.yaml` beside `b/validating.yaml`).
pub(crate) fn distinct_names(labels: &[String]) -> Vec<String> {
    let parts: Vec<Vec<&str>> = labels.iter().map(|l| l.rsplit('/').collect()).collect();
    let tail = |p: &Vec<&str>, k: usize| {
        let mut t: Vec<&str> = p.iter().take(k).copied().collect();
        t.reverse();
        t.join("/")
    };
    parts
        .iter()
        .map(|p| {
            // The fewest last components no other label shares.
            (1..=p.len())
                .find(|&k| {
                    parts
                        .iter()
                        .filter(|o| o.len() >= k && o[..k] == p[..k])
                        .count()
                        == 1
                })
                .map_or_else(|| tail(p, p.len()), |k| tail(p, k))
        })
        .collect()
}

fn render_buffers(frame: &mut Frame, state: &State, area: Rect) {
    let mut spans = Vec::new();
    let labels: Vec<String> = state.buffers.iter().map(|b| b.origin.label()).collect();
    let names = distinct_names(&labels);
    for (i, b) in state.buffers.iter().enumerate() {
        let key = if i == state.buffer {
            StyleKey::TabActive
        } else {
            StyleKey::Tab
        };
        let name = &names[i];
        let mark = if b.modified() { " ●" } else { "" };
        spans.push(Span::styled(
            format!(" {}{mark} ", clip(name, 40)),
            style(state, key),
        ));
        spans.push(Span::raw(" "));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn render_text(frame: &mut Frame, state: &State, buffer: &Buffer, area: Rect) {
    let ratatui_textarea::DataCursor(row, col) = buffer.area.cursor();
    let status = if buffer.checked != buffer.generation {
        "checking…".to_string()
    } else if buffer.has_in_force() && buffer.text().trim().is_empty() {
        // Never "valid": an emptied text is a deletion, the problems name what it deletes.
        "empty: a deletion, still in force until :delete (u undoes)".to_string()
    } else if buffer.check.errors.is_empty()
        && !buffer.has_in_force()
        && buffer.text().trim().is_empty()
    {
        "empty: nothing in force from it".to_string()
    } else if buffer.check.errors.is_empty() {
        "valid, in force".to_string()
    } else {
        format!(
            "{} error(s): the last valid version stays in force",
            buffer.check.errors.len()
        )
    };
    let title = format!(
        " {}{} · {}:{} · {status} ",
        buffer.origin.label(),
        if buffer.modified() { " [modified]" } else { "" },
        row + 1,
        col + 1
    );
    let block = pane(state, title, true);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [gutter, body] =
        Layout::horizontal([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    frame.render_widget(&buffer.area, body);
    // The viewport moved to follow the cursor while drawing: mark the problem lines in view.
    let top = usize::from(buffer.area.scroll_offset().0);
    let mut marks = Vec::with_capacity(usize::from(gutter.height));
    for screen in 0..usize::from(gutter.height) {
        let line = top + screen + 1;
        let error = buffer.check.errors.iter().any(|e| e.line == line);
        let warning = buffer.check.warnings.iter().any(|e| e.line == line);
        marks.push(if error {
            Line::styled("●", style(state, StyleKey::Error))
        } else if warning {
            Line::styled("●", style(state, StyleKey::Warning))
        } else {
            Line::raw(" ")
        });
    }
    frame.render_widget(Paragraph::new(marks), gutter);
}

fn render_problems(frame: &mut Frame, state: &State, buffer: &Buffer, area: Rect) {
    let mut lines = Vec::new();
    if buffer.disk_changed.is_some() {
        lines.push(Line::styled(
            "The file changed on disk: :reload takes it, :keep keeps your edits.",
            style(state, StyleKey::Error),
        ));
    }
    let width = usize::from(area.width.saturating_sub(4));
    for (problems, key) in [
        (&buffer.check.errors, StyleKey::Error),
        (&buffer.check.warnings, StyleKey::Warning),
    ] {
        for p in problems {
            let at = match p.column {
                Some(c) => format!("{}:{c}", p.line),
                None => p.line.to_string(),
            };
            let field = if p.field.is_empty() {
                String::new()
            } else {
                format!("{}: ", p.field)
            };
            lines.push(Line::from(vec![
                Span::styled(format!("{at:>6} "), style(state, StyleKey::Muted)),
                Span::styled(
                    clip(&format!("{field}{}", p.message), width),
                    style(state, key),
                ),
            ]));
        }
    }
    if lines.is_empty() {
        let parts: &[&str] = match state.editor.mode {
            EditMode::Normal => &[
                "normal mode: i a o insert",
                ":w save",
                "u undo",
                "ctrl-r redo",
                "dd delete line",
                "ctrl-e $EDITOR",
                "esc leave",
            ],
            EditMode::Insert => &[
                "insert mode: esc back to normal mode",
                "ctrl-s save",
                "ctrl-z undo",
                "ctrl-y redo",
            ],
        };
        // Whole hints only, as many as fit, and where to find the rest.
        let room = usize::from(area.width.saturating_sub(2));
        let mut hint = String::new();
        for p in parts {
            let next = if hint.is_empty() {
                (*p).to_string()
            } else {
                format!("{hint} · {p}")
            };
            if super::table::width(&next) + " · ? all keys".len() > room {
                break;
            }
            hint = next;
        }
        hint.push_str(" · ? all keys");
        lines.push(Line::styled(hint, style(state, StyleKey::Muted)));
    }
    let p = Paragraph::new(lines).block(pane(state, " Problems ", false));
    frame.render_widget(p, area);
}

#[cfg(test)]
mod tests {
    use super::distinct_names;

    #[test]
    fn tabs_of_files_with_one_name_show_the_parts_that_tell_them_apart() {
        let labels: Vec<String> = [
            "/configs/a/validating.yaml",
            "/configs/b/validating.yaml",
            "/srv/xa/validating.yaml",
            "/etc/mutating.yaml",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            distinct_names(&labels),
            [
                "a/validating.yaml",
                "b/validating.yaml",
                "xa/validating.yaml",
                "mutating.yaml"
            ]
        );
    }
}
