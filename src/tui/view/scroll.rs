//! Scrollable panes: one rule for every pane whose text can be longer than the pane (the Chain
//! view's step detail, the help overlay, the Metrics view's exported samples). The first line
//! shown is clamped so that the last page is full and scrolling back always moves the text; the
//! pane's title says where it is.

use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

/// Lines `lines` take in a pane `width` columns wide, wrapped as the panes wrap them.
pub(crate) fn wrapped_len(lines: &[Line], width: u16) -> usize {
    Paragraph::new(lines.to_vec())
        .wrap(Wrap { trim: false })
        .line_count(width.max(1))
}

/// The last first line a pane of `height` rows can show of `total` lines.
pub(crate) fn last_top(total: usize, height: usize) -> usize {
    total.saturating_sub(height)
}

/// The first line shown, clamped.
pub(crate) fn clamp(top: usize, total: usize, height: usize) -> usize {
    top.min(last_top(total, height))
}

/// `top` moved by `delta` lines (a large one reaches an end), clamped.
pub(crate) fn moved(top: usize, delta: isize, total: usize, height: usize) -> usize {
    let top = clamp(top, total, height) as isize;
    (top.saturating_add(delta)).clamp(0, last_top(total, height) as isize) as usize
}

/// Where the pane is, for its title: `12–31/85 ` (lines shown of all), or nothing when
/// everything fits.
pub(crate) fn position(top: usize, total: usize, height: usize) -> String {
    if total <= height {
        return String::new();
    }
    let top = clamp(top, total, height);
    format!("{}–{}/{total} ", top + 1, (top + height).min(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrolling_stays_within_the_text() {
        // 30 lines in 10 rows: the last page starts at 20.
        assert_eq!(moved(0, 10_000, 30, 10), 20);
        assert_eq!(moved(20, -1, 30, 10), 19, "one line back moves the text");
        assert_eq!(moved(10_000, -1, 30, 10), 19, "from past the end too");
        assert_eq!(moved(3, -10, 30, 10), 0);
        // Shorter than the pane: never scrolls.
        assert_eq!(moved(0, 5, 4, 10), 0);
        assert_eq!(position(20, 30, 10), "21–30/30 ");
        assert_eq!(position(0, 4, 10), "");
    }
}
