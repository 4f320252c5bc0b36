//! The help overlay: the keys of the current view from the live keymap, the words the views
//! use, and the commands. It scrolls like every other pane (j/k, ctrl-d/u, g/G, PgUp/PgDn, the
//! wheel) and says where it is.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use super::{pane, scroll, style};
use crate::tui::app::{State, View};
use crate::tui::filter::FIELDS;
use crate::tui::keymap::{COMMANDS, Scope};
use crate::tui::theme::{StyleKey, SymbolKey};

/// The words the views use, each with its one meaning (the user guide gives the same list).
/// `{allowed}`, `{denied}` and `{open}` stand for the theme's symbols.
pub const WORDS: &[(&str, &str)] = &[
    (
        "matched",
        "requests in which the webhook was called, in either round",
    ),
    (
        "skipped",
        "requests in which it was not called because its rules, selectors or matchConditions left it out (the first reason counts)",
    ),
    (
        "called",
        "calls made or attempted; a webhook called again in round 1 counts twice",
    ),
    ("mutated", "calls whose patch changed the object"),
    ("denied", "calls that answered allowed: false"),
    (
        "errors",
        "calls that failed and so failed the request (failurePolicy Fail): failed closed",
    ),
    (
        "fail-open",
        "calls that failed and were ignored (failurePolicy Ignore): the request went on",
    ),
    (
        "position",
        "a webhook's place in its phase's dispatch order: Webhooks' POS, the Chain's numbers",
    ),
    (
        "{allowed} {denied} {open}",
        "requests allowed, denied, and allowed though a call failed open: they add up to the requests replayed",
    ),
    (
        "changed",
        "What-if: a request whose verdict, final object, annotations or warnings differ",
    ),
    (
        "flipped",
        "What-if: a verdict gone from allowed to denied or back (status code, denial message: smaller changes)",
    ),
];

/// Columns of the overlay under which its sections are laid side by side.
const TWO_COLUMNS: u16 = 150;

/// The overlay's rectangle in `area`, and its two columns (the second empty on a narrow
/// terminal, where one column holds everything).
fn layout(state: &State, area: Rect) -> (Rect, Rect, Rect, usize) {
    let (left, right) = sections(state);
    let two = area.width >= TWO_COLUMNS;
    let width = if two {
        area.width.min(180)
    } else {
        area.width.min(100)
    };
    let column_width = if two {
        (width.saturating_sub(3)) / 2
    } else {
        width.saturating_sub(2)
    };
    let total = if two {
        scroll::wrapped_len(&left, column_width).max(scroll::wrapped_len(&right, column_width))
    } else {
        scroll::wrapped_len(&left, column_width) + 1 + scroll::wrapped_len(&right, column_width)
    };
    let height = (total as u16).saturating_add(2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let inner = Rect::new(
        popup.x + 1,
        popup.y + 1,
        popup.width.saturating_sub(2),
        popup.height.saturating_sub(2),
    );
    if two {
        let [l, r] = Layout::horizontal([Constraint::Length(column_width), Constraint::Min(1)])
            .spacing(1)
            .areas(inner);
        (popup, l, r, total)
    } else {
        (popup, inner, Rect::new(inner.x, inner.y, 0, 0), total)
    }
}

/// Lines of the overlay and the rows it shows, as drawn in the main area of a terminal of
/// `state.size`.
pub(crate) fn extent(state: &State) -> (usize, usize) {
    let (w, h) = state.size;
    let area = Rect::new(0, 1, w, h.saturating_sub(2));
    let (popup, _, _, total) = layout(state, area);
    (total, usize::from(popup.height.saturating_sub(2)))
}

/// The overlay's two sections: keys, filter fields and words; the commands.
fn sections(state: &State) -> (Vec<Line<'static>>, Vec<Line<'static>>) {
    let bindings = state.keymap.for_view(state.view);
    let key_style = style(state, StyleKey::HelpKey);
    let text_style = style(state, StyleKey::HelpText);
    let section = style(state, StyleKey::HelpSection);
    let t = &state.theme;
    let symbols = |s: &str| {
        s.replace("{allowed}", t.symbol(SymbolKey::Allowed))
            .replace("{denied}", t.symbol(SymbolKey::Denied))
            .replace("{open}", t.symbol(SymbolKey::FailedOpen))
    };
    // Every key, field and word on the left, its meaning after the widest of them.
    let mut rows: Vec<(Option<String>, String)> =
        vec![(None, format!("{} keys", state.view.title()))];
    let mut global = false;
    for b in bindings {
        // In the Edit view normal mode's own keys (j, k, x, …) come before the global ones.
        if state.view == View::Editor
            && b.scope == Scope::Global
            && b.keys.iter().all(crate::tui::edit_keys::shadows)
        {
            continue;
        }
        if b.scope == Scope::Global && !global {
            global = true;
            rows.push((None, "everywhere".into()));
        }
        let keys: Vec<String> = b.keys.iter().map(|k| k.label()).collect();
        rows.push((Some(keys.join(" / ")), b.help.to_string()));
    }
    if state.view == View::Editor {
        rows.push((
            None,
            "normal mode (as vim; the status line says the mode)".into(),
        ));
        for (keys, help) in crate::tui::edit_keys::NORMAL_KEYS {
            rows.push((Some((*keys).into()), (*help).into()));
        }
    }
    if state.view == View::Requests {
        rows.push((None, "filter (/): words and fields, all must match".into()));
        for (names, help) in FIELDS {
            rows.push((Some(format!("{}:", names.join(": / "))), help.to_string()));
        }
        rows.push((
            Some("!TERM".into()),
            "not TERM (e.g. !verdict:allowed)".into(),
        ));
    }
    rows.push((None, "words (each means one thing in every view)".into()));
    for (word, meaning) in WORDS {
        rows.push((Some(symbols(word)), (*meaning).into()));
    }
    let key_width = rows
        .iter()
        .filter_map(|(k, _)| k.as_ref().map(|k| k.chars().count()))
        .max()
        .unwrap_or(0)
        + 4;
    let left = rows
        .into_iter()
        .map(|(k, text)| match k {
            None => Line::styled(text, section),
            Some(k) => Line::from(vec![
                Span::styled(format!("  {k:<w$}", w = key_width - 2), key_style),
                Span::styled(text, text_style),
            ]),
        })
        .collect();
    let mut commands = vec![Line::styled("commands (:)", section)];
    for (name, arg, help) in COMMANDS {
        commands.push(Line::styled(format!("  {name}{arg}"), key_style));
        commands.push(Line::styled(format!("      {help}"), text_style));
    }
    (left, commands)
}

/// Draws the overlay centred in `area`.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let (popup, left_area, right_area, total) = layout(state, area);
    let (mut left, right) = sections(state);
    let height = usize::from(popup.height.saturating_sub(2));
    let top = scroll::clamp(state.help_scroll.top, total, height);
    frame.render_widget(Clear, popup);
    let title = format!(
        " Help · j/k ctrl-d/u g/G scroll · esc closes {}",
        scroll::position(top, total, height)
    );
    let block = pane(state, title, true);
    frame.render_widget(block.style(style(state, StyleKey::Base)), popup);
    let top = u16::try_from(top).unwrap_or(u16::MAX);
    if right_area.width == 0 {
        left.push(Line::raw(""));
        left.extend(right);
        let p = Paragraph::new(left)
            .wrap(Wrap { trim: false })
            .scroll((top, 0));
        frame.render_widget(p, left_area);
        return;
    }
    for (lines, at) in [(left, left_area), (right, right_area)] {
        let p = Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((top, 0));
        frame.render_widget(p, at);
    }
}
