//! The Edit view's keys, modal as in vim: in normal mode keys move and command (`:w` is a
//! command there, never text), in insert mode they type. The view's own state ([`EditorState`])
//! and key handling live here; what an edit changes beyond the buffer (checks, re-dispatch) is
//! the shared update's, told by the [`Outcome`] a key returns.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::{CursorMove, Scrolling, TextArea};

use super::editing::Buffer;

/// How keys act in the Edit view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EditMode {
    /// Keys move, delete, undo and start commands; the view always opens in it, and comes back
    /// to it from the user's editor.
    #[default]
    Normal,
    /// Keys type into the text, until `esc`.
    Insert,
}

impl EditMode {
    /// As the status line shows it.
    pub fn label(self) -> &'static str {
        match self {
            EditMode::Normal => "NORMAL",
            EditMode::Insert => "INSERT",
        }
    }
}

/// A `/` search being typed in normal mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// The text typed so far (searched for as it is typed).
    pub input: String,
    /// Where the cursor was when `/` was typed: the search starts after it, and `esc` goes back.
    origin: (usize, usize),
}

/// The Edit view's own state: its mode, a normal-mode command's count and first key, a search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EditorState {
    /// Normal or insert.
    pub mode: EditMode,
    /// The first key of a two-key command (`dd`, `cc`, `yy`, `gg`, and `r`, `f`, `F`, `t`, `T`
    /// whose second key is taken as it is, digits included), waiting for the second.
    pub pending: Option<char>,
    /// The count typed before a command (`3j`, `2dd`, `12G`), while it is being typed.
    pub count: Option<usize>,
    /// A `/` search being typed: keys are its text until `enter` or `esc`.
    pub search: Option<Search>,
    /// The text of the last search, for `n` and `N`.
    pub last_search: Option<String>,
}

/// What a key did, for the shared update to follow up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The text changed: check it once typing pauses.
    Edited,
    /// The cursor, the view or the mode changed; the text did not.
    Moved,
    /// Undo (`false`) or redo (`true`) one step.
    Undo(bool),
    /// The cursor may have moved, and the user is told something: a search that found nothing
    /// (`error`) or went on from the other end of the text.
    Notice {
        /// What the status bar says.
        text: String,
        /// Whether it is an error.
        error: bool,
    },
    /// Not a key of the editor here: the view's and the global bindings decide.
    NotMine,
}

/// The normal-mode keys, as the help overlay and the user guide list them (fixed, as vim's are;
/// the console's own bindings of the view are in the keymap).
pub const NORMAL_KEYS: &[(&str, &str)] = &[
    (
        "i a I A o O",
        "insert: before / after the cursor, at the line's first non-blank / end, on a new line below / above",
    ),
    (
        "esc",
        "insert mode: back to normal mode; normal mode: leave the editor (the edit stays)",
    ),
    ("h j k l / arrows", "move"),
    (
        "1-9 …",
        "a count before a move or command (3j, 2dd, 4x); 12G goes to line 12",
    ),
    (
        "f F t T",
        "to the next / previous character typed, or just before / after it",
    ),
    ("r", "replace the character (3rx: three of them)"),
    ("w b e", "next word / previous word / end of the word"),
    ("0 ^ $", "start of the line / first non-blank / end"),
    (
        "/ n N",
        "search the text as typed (enter keeps the match, esc goes back) / next / previous match; a search in lower case matches either case",
    ),
    ("gg G", "first line / last line"),
    ("ctrl-d ctrl-u", "half a page down / up (pgdn pgup: a page)"),
    ("x", "delete the character"),
    ("dd D", "delete the line / to the end of the line"),
    (
        "cc C",
        "change the line / to the end of the line (then insert)",
    ),
    ("yy p P", "copy the line / put it below / above"),
    (
        "u ctrl-r",
        "undo / redo one step: a typed word, a whole line command, a whole external edit",
    ),
    (": ?", "a command (:w saves), or this help, as everywhere"),
];

/// Whether normal mode takes `key` before the global bindings (the help overlay leaves out the
/// global bindings it shadows in the Edit view).
pub fn shadows(key: &super::keymap::Key) -> bool {
    let ctrl = key.mods.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('d' | 'u' | 'r') if ctrl => true,
        KeyCode::Char(c) if !ctrl => "hjklwbe0123456789^$gGxdcypPuiaIAoOCDrfFtT/nN".contains(c),
        KeyCode::Left
        | KeyCode::Right
        | KeyCode::Up
        | KeyCode::Down
        | KeyCode::Home
        | KeyCode::End
        | KeyCode::PageUp
        | KeyCode::PageDown
        | KeyCode::Delete => !ctrl,
        _ => false,
    }
}

impl EditorState {
    /// Takes a key of the Edit view into `buffer`.
    pub fn key(&mut self, buffer: &mut Buffer, key: KeyEvent) -> Outcome {
        if self.search.is_some() {
            return self.search_key(buffer, key);
        }
        match self.mode {
            EditMode::Insert => self.insert_key(buffer, key),
            EditMode::Normal => self.normal_key(buffer, key),
        }
    }

    /// Back to normal mode (leaving the view, coming back from the user's editor).
    pub fn normal(&mut self) {
        self.mode = EditMode::Normal;
        self.pending = None;
        self.count = None;
        self.search = None;
    }

    /// A key while a `/` search is typed: the cursor follows the text typed to its first match
    /// after where the search began (vim's `incsearch`); `enter` keeps it, `esc` (or deleting
    /// past the `/`) goes back.
    fn search_key(&mut self, buffer: &mut Buffer, key: KeyEvent) -> Outcome {
        let Some(mut search) = self.search.take() else {
            return Outcome::NotMine;
        };
        let a = &mut buffer.area;
        match key.code {
            KeyCode::Esc => jump(a, search.origin),
            KeyCode::Backspace if search.input.is_empty() => jump(a, search.origin),
            KeyCode::Enter => {
                let text = if search.input.is_empty() {
                    self.last_search.clone()
                } else {
                    Some(search.input)
                };
                jump(a, search.origin);
                if let Some(text) = text {
                    self.last_search = Some(text.clone());
                    return go_to_match(a, &text, true, 1);
                }
            }
            KeyCode::Backspace | KeyCode::Char(_) => {
                match key.code {
                    KeyCode::Char(c)
                        if !key
                            .modifiers
                            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
                    {
                        search.input.push(c)
                    }
                    KeyCode::Backspace => {
                        search.input.pop();
                    }
                    _ => {}
                }
                let target = find(a.lines(), &search.input, search.origin, true)
                    .map_or(search.origin, |(at, _)| at);
                jump(a, target);
                self.search = Some(search);
            }
            _ => self.search = Some(search),
        }
        Outcome::Moved
    }

    fn insert_key(&mut self, buffer: &mut Buffer, key: KeyEvent) -> Outcome {
        if key.code == KeyCode::Esc {
            self.mode = EditMode::Normal;
            buffer.end_typing();
            // As vim: the cursor steps back onto the last character typed.
            if buffer.area.cursor().1 > 0 {
                buffer.area.move_cursor(CursorMove::Back);
            }
            return Outcome::Moved;
        }
        // Ctrl and function keys are the view's bindings (save, undo, …), never text; the
        // editor widget's own ctrl shortcuts (one of them an undo of its own) are not used.
        if key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
            || matches!(key.code, KeyCode::F(_))
        {
            return Outcome::NotMine;
        }
        if buffer.input(key) {
            Outcome::Edited
        } else {
            Outcome::Moved
        }
    }

    fn normal_key(&mut self, buffer: &mut Buffer, key: KeyEvent) -> Outcome {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if key.modifiers.contains(KeyModifiers::ALT) {
            return Outcome::NotMine;
        }
        // `esc` cancels a count or a command being typed, as in vim (a second leaves the view).
        if key.code == KeyCode::Esc && (self.count.is_some() || self.pending.is_some()) {
            self.count = None;
            self.pending = None;
            return Outcome::Moved;
        }
        if let (Some(first @ ('r' | 'f' | 'F' | 't' | 'T')), KeyCode::Char(c)) =
            (self.pending, key.code)
            && !ctrl
        {
            self.pending = None;
            let n = self.count.take().unwrap_or(1);
            return if first == 'r' {
                edited(buffer.edit(|a| replace_chars(a, c, n)))
            } else {
                find_in_line(&mut buffer.area, first, c, n);
                Outcome::Moved
            };
        }
        if self.pending.is_none()
            && !ctrl
            && let KeyCode::Char(d @ '0'..='9') = key.code
            && (d != '0' || self.count.is_some())
        {
            let digit = d.to_digit(10).unwrap_or(0) as usize;
            let count = self.count.unwrap_or(0).saturating_mul(10);
            self.count = Some(count.saturating_add(digit).min(MAX_COUNT));
            return Outcome::Moved;
        }
        let counted = self.count;
        if self.pending.is_none() && !matches!(key.code, KeyCode::Char('d' | 'c' | 'y' | 'g')) {
            self.count = None;
        }
        let n = counted.unwrap_or(1);
        if let Some(first) = self.pending.take() {
            self.count = None;
            return match (first, key.code) {
                ('d', KeyCode::Char('d')) => {
                    edited(buffer.edit(|a| (0..n).map(|_| delete_lines(a, false)).sum()))
                }
                ('c', KeyCode::Char('c')) => {
                    self.mode = EditMode::Insert;
                    buffer.edit(|a| delete_lines(a, true));
                    Outcome::Edited
                }
                ('y', KeyCode::Char('y')) => {
                    let row = buffer.area.cursor().0;
                    let line = buffer.area.lines()[row].clone();
                    buffer.area.set_yank_text(format!("{line}\n"));
                    Outcome::Moved
                }
                ('g', KeyCode::Char('g')) => {
                    go_to_line(&mut buffer.area, counted.unwrap_or(1));
                    Outcome::Moved
                }
                // Any other second key cancels the command, as in vim.
                _ => Outcome::Moved,
            };
        }
        let a = &mut buffer.area;
        let (row, col) = (a.cursor().0, a.cursor().1);
        let len = a.lines()[row].chars().count();
        let plain = |c: char| !ctrl && key.code == KeyCode::Char(c);
        match key.code {
            KeyCode::Char('d') if ctrl => a.scroll(Scrolling::HalfPageDown),
            KeyCode::Char('u') if ctrl => a.scroll(Scrolling::HalfPageUp),
            KeyCode::Char('r') if ctrl => return Outcome::Undo(true),
            _ if ctrl => return Outcome::NotMine,
            KeyCode::PageDown => a.scroll(Scrolling::PageDown),
            KeyCode::PageUp => a.scroll(Scrolling::PageUp),
            KeyCode::Char('h') | KeyCode::Left => {
                for _ in 0..n.min(col) {
                    a.move_cursor(CursorMove::Back);
                }
            }
            KeyCode::Char('l') | KeyCode::Right => {
                for _ in 0..n.min(len.saturating_sub(col + 1)) {
                    a.move_cursor(CursorMove::Forward);
                }
            }
            KeyCode::Char('j') | KeyCode::Down => repeat(a, n, CursorMove::Down),
            KeyCode::Char('k') | KeyCode::Up => repeat(a, n, CursorMove::Up),
            KeyCode::Char('w') => repeat(a, n, CursorMove::WordForward),
            KeyCode::Char('b') => repeat(a, n, CursorMove::WordBack),
            KeyCode::Char('e') => repeat(a, n, CursorMove::WordEnd),
            KeyCode::Char('0') | KeyCode::Home => a.move_cursor(CursorMove::Head),
            KeyCode::Char('^') => first_non_blank(a),
            KeyCode::Char('$') | KeyCode::End => {
                a.move_cursor(CursorMove::End);
                if len > 0 {
                    a.move_cursor(CursorMove::Back);
                }
            }
            KeyCode::Char('G') => match counted {
                Some(line) => go_to_line(a, line),
                None => {
                    a.move_cursor(CursorMove::Bottom);
                    a.move_cursor(CursorMove::Head);
                }
            },
            KeyCode::Char(c @ ('d' | 'c' | 'y' | 'g' | 'r' | 'f' | 'F' | 't' | 'T')) => {
                self.pending = Some(c);
                if matches!(c, 'r' | 'f' | 'F' | 't' | 'T') {
                    self.count = counted;
                }
            }
            KeyCode::Char('i') => self.mode = EditMode::Insert,
            KeyCode::Char('a') => {
                if len > 0 {
                    a.move_cursor(CursorMove::Forward);
                }
                self.mode = EditMode::Insert;
            }
            KeyCode::Char('I') => {
                first_non_blank(a);
                self.mode = EditMode::Insert;
            }
            KeyCode::Char('A') => {
                a.move_cursor(CursorMove::End);
                self.mode = EditMode::Insert;
            }
            KeyCode::Char('o') => {
                self.mode = EditMode::Insert;
                return edited(buffer.edit(|a| {
                    a.move_cursor(CursorMove::End);
                    a.insert_newline();
                    1
                }));
            }
            KeyCode::Char('O') => {
                self.mode = EditMode::Insert;
                return edited(buffer.edit(|a| {
                    a.move_cursor(CursorMove::Head);
                    a.insert_newline();
                    a.move_cursor(CursorMove::Up);
                    1
                }));
            }
            KeyCode::Char('x') | KeyCode::Delete if col < len => {
                let n = n.min(len - col);
                return edited(
                    buffer.edit(|a| (0..n).map(|_| usize::from(a.delete_next_char())).sum()),
                );
            }
            KeyCode::Char('D') if col < len => {
                return edited(buffer.edit(|a| usize::from(a.delete_line_by_end())));
            }
            KeyCode::Char('C') => {
                self.mode = EditMode::Insert;
                if col < len {
                    return edited(buffer.edit(|a| usize::from(a.delete_line_by_end())));
                }
            }
            KeyCode::Char('p') => {
                return edited(buffer.edit(|a| (0..n).map(|_| put(a, true)).sum()));
            }
            KeyCode::Char('P') => {
                return edited(buffer.edit(|a| (0..n).map(|_| put(a, false)).sum()));
            }
            KeyCode::Char('u') if plain('u') => return Outcome::Undo(false),
            KeyCode::Char('/') => {
                self.search = Some(Search {
                    input: String::new(),
                    origin: (row, col),
                });
            }
            KeyCode::Char(c @ ('n' | 'N')) => {
                return match self.last_search.clone() {
                    Some(text) => go_to_match(a, &text, c == 'n', n),
                    None => Outcome::Notice {
                        text: "no previous search: / searches".to_string(),
                        error: true,
                    },
                };
            }
            KeyCode::Char('x' | 'D') | KeyCode::Delete => {}
            _ => return Outcome::NotMine,
        }
        Outcome::Moved
    }
}

/// The largest count taken (a count is a number of lines or characters at most).
const MAX_COUNT: usize = 99_999;

fn repeat(a: &mut TextArea<'static>, n: usize, step: CursorMove) {
    for _ in 0..n {
        let before = a.cursor();
        a.move_cursor(step);
        if a.cursor() == before {
            break;
        }
    }
}

/// To the first non-blank of 1-based `line` (the last line when there are fewer).
fn go_to_line(a: &mut TextArea<'static>, line: usize) {
    let row = line
        .saturating_sub(1)
        .min(a.lines().len().saturating_sub(1));
    a.move_cursor(CursorMove::Jump(u16::try_from(row).unwrap_or(u16::MAX), 0));
    first_non_blank(a);
}

/// `r`: the `n` characters from the cursor replaced by `c`, the cursor on the last; nothing when
/// the line has fewer (as vim). The number of edits made.
fn replace_chars(a: &mut TextArea<'static>, c: char, n: usize) -> usize {
    let (row, col) = (a.cursor().0, a.cursor().1);
    if col + n > a.lines()[row].chars().count() {
        return 0;
    }
    for _ in 0..n {
        a.delete_next_char();
        a.insert_char(c);
    }
    a.move_cursor(CursorMove::Back);
    2 * n
}

/// `f`, `F`, `t`, `T`: to the `n`th `c` after (before) the cursor in its line, or just before
/// (after) it; nowhere when there are fewer.
fn find_in_line(a: &mut TextArea<'static>, how: char, c: char, n: usize) {
    let (row, col) = (a.cursor().0, a.cursor().1);
    let line: Vec<char> = a.lines()[row].chars().collect();
    let forward = matches!(how, 'f' | 't');
    let found = if forward {
        (col + 1..line.len()).filter(|&i| line[i] == c).nth(n - 1)
    } else {
        (0..col).rev().filter(|&i| line[i] == c).nth(n - 1)
    };
    let target = match (found, how) {
        (Some(i), 'f' | 'F') => i,
        (Some(i), 't') => i - 1,
        (Some(i), 'T') => i + 1,
        _ => return,
    };
    if target != col {
        let to = |v: usize| u16::try_from(v).unwrap_or(u16::MAX);
        a.move_cursor(CursorMove::Jump(to(row), to(target)));
    }
}

fn jump(a: &mut TextArea<'static>, (row, col): (usize, usize)) {
    let to = |v: usize| u16::try_from(v).unwrap_or(u16::MAX);
    a.move_cursor(CursorMove::Jump(to(row), to(col)));
}

/// `n` (`forward`) or `N`, `count` times: to the next (previous) match of `text`, going on from
/// the other end of the text as vim does, and saying so.
fn go_to_match(a: &mut TextArea<'static>, text: &str, forward: bool, count: usize) -> Outcome {
    let mut at = (a.cursor().0, a.cursor().1);
    let mut wrapped = false;
    for _ in 0..count {
        match find(a.lines(), text, at, forward) {
            Some((next, w)) => {
                at = next;
                wrapped |= w;
            }
            None => {
                return Outcome::Notice {
                    text: format!("pattern not found: {text}"),
                    error: true,
                };
            }
        }
    }
    jump(a, at);
    if wrapped {
        let text = if forward {
            "search hit BOTTOM, continuing at TOP"
        } else {
            "search hit TOP, continuing at BOTTOM"
        };
        Outcome::Notice {
            text: text.to_string(),
            error: false,
        }
    } else {
        Outcome::Moved
    }
}

/// The first match of `text` after (`forward`) or before `from`, going on from the other end of
/// `lines` when there is none that way (then `true`). Literal text, within a line; a text
/// without capitals matches either case (vim's `smartcase`).
fn find(
    lines: &[String],
    text: &str,
    from: (usize, usize),
    forward: bool,
) -> Option<((usize, usize), bool)> {
    let pattern: Vec<char> = text.chars().collect();
    if pattern.is_empty() {
        return None;
    }
    let either_case = !pattern.iter().any(|c| c.is_uppercase());
    let same = |a: char, b: char| a == b || (either_case && a.to_lowercase().eq(b.to_lowercase()));
    let matches_in = |row: usize| -> Vec<usize> {
        let line: Vec<char> = lines[row].chars().collect();
        (0..(line.len() + 1).saturating_sub(pattern.len()))
            .filter(|&i| pattern.iter().zip(&line[i..]).all(|(p, c)| same(*c, *p)))
            .collect()
    };
    let rows = lines.len();
    if forward {
        let after = (from.0..rows).find_map(|row| {
            matches_in(row)
                .into_iter()
                .find(|&col| row > from.0 || col > from.1)
                .map(|col| (row, col))
        });
        after.map(|at| (at, false)).or_else(|| {
            (0..=from.0.min(rows.saturating_sub(1))).find_map(|row| {
                matches_in(row)
                    .into_iter()
                    .find(|&col| row < from.0 || col <= from.1)
                    .map(|col| ((row, col), true))
            })
        })
    } else {
        let before = (0..=from.0.min(rows.saturating_sub(1)))
            .rev()
            .find_map(|row| {
                matches_in(row)
                    .into_iter()
                    .rev()
                    .find(|&col| row < from.0 || col < from.1)
                    .map(|col| (row, col))
            });
        before.map(|at| (at, false)).or_else(|| {
            (from.0..rows).rev().find_map(|row| {
                matches_in(row)
                    .into_iter()
                    .rev()
                    .find(|&col| row > from.0 || col >= from.1)
                    .map(|col| ((row, col), true))
            })
        })
    }
}

fn edited(changed: bool) -> Outcome {
    if changed {
        Outcome::Edited
    } else {
        Outcome::Moved
    }
}

fn first_non_blank(a: &mut TextArea<'static>) {
    let row = a.cursor().0;
    let blank = a.lines()[row]
        .chars()
        .take_while(|c| c.is_whitespace())
        .count();
    a.move_cursor(CursorMove::Jump(
        u16::try_from(row).unwrap_or(u16::MAX),
        u16::try_from(blank).unwrap_or(u16::MAX),
    ));
}

/// `dd` (or `cc`, `keep_line`: the line's text goes, an empty line stays for typing): the
/// cursor's line, cut as one edit and kept for `p`. The history entries made.
fn delete_lines(a: &mut TextArea<'static>, keep_line: bool) -> usize {
    let row = a.cursor().0;
    let lines = a.lines().len();
    let line = a.lines()[row].clone();
    a.move_cursor(CursorMove::Head);
    a.start_selection();
    if keep_line || lines == 1 {
        a.move_cursor(CursorMove::End);
    } else if row + 1 < lines {
        a.move_cursor(CursorMove::Down);
        a.move_cursor(CursorMove::Head);
    } else {
        // The last line: from the end of the line above.
        a.cancel_selection();
        a.move_cursor(CursorMove::Up);
        a.move_cursor(CursorMove::End);
        a.start_selection();
        a.move_cursor(CursorMove::Bottom);
        a.move_cursor(CursorMove::End);
    }
    let cut = a.cut();
    a.cancel_selection();
    a.set_yank_text(format!("{line}\n"));
    if !keep_line {
        first_non_blank(a);
    }
    usize::from(cut)
}

/// `p` (`below`) or `P`: a copied line goes below or above the cursor's line, other text after
/// or at the cursor. The history entries made.
fn put(a: &mut TextArea<'static>, below: bool) -> usize {
    let text = a.yank_text();
    if text.is_empty() {
        return 0;
    }
    let Some(line) = text.strip_suffix('\n') else {
        if below && !a.lines()[a.cursor().0].is_empty() {
            a.move_cursor(CursorMove::Forward);
        }
        return usize::from(a.insert_str(&text));
    };
    let row = a.cursor().0;
    let target = if below {
        a.move_cursor(CursorMove::End);
        a.insert_str(format!("\n{line}"));
        row + 1
    } else {
        a.move_cursor(CursorMove::Head);
        a.insert_str(format!("{line}\n"));
        row
    };
    a.move_cursor(CursorMove::Jump(
        u16::try_from(target).unwrap_or(u16::MAX),
        0,
    ));
    first_non_blank(a);
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::editing::BufferOrigin;

    fn press(e: &mut EditorState, b: &mut Buffer, keys: &str) -> Outcome {
        let mut last = Outcome::Moved;
        for c in keys.chars() {
            let code = if c == '\x1b' {
                KeyCode::Esc
            } else {
                KeyCode::Char(c)
            };
            last = e.key(b, KeyEvent::new(code, KeyModifiers::NONE));
        }
        last
    }

    fn buffer(text: &str) -> Buffer {
        Buffer::new(BufferOrigin::New(1), text, Vec::new())
    }

    fn notice(text: &str, error: bool) -> Outcome {
        Outcome::Notice {
            text: text.to_string(),
            error,
        }
    }

    fn cursor(b: &Buffer) -> (usize, usize) {
        (b.area.cursor().0, b.area.cursor().1)
    }

    #[test]
    fn slash_searches_as_typed_enter_keeps_the_match_and_esc_goes_back() {
        let text = "kind: Pod\nmetadata:\n  name: web\n  labels:\n    app: Web\n";
        let mut e = EditorState::default();
        let mut b = buffer(text);
        press(&mut e, &mut b, "/we");
        assert_eq!(e.search.as_ref().map(|s| s.input.as_str()), Some("we"));
        assert_eq!(
            cursor(&b),
            (2, 8),
            "the first match after the cursor, as typed"
        );
        press(&mut e, &mut b, "\x1b");
        assert_eq!((cursor(&b), e.search.is_none()), ((0, 0), true));
        assert_eq!(b.text(), text, "a search never types into the text");
        press(&mut e, &mut b, "/Web");
        assert_eq!(cursor(&b), (4, 9), "capitals match only capitals");
        let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(e.key(&mut b, enter), Outcome::Moved);
        assert_eq!(
            (cursor(&b), e.last_search.as_deref()),
            ((4, 9), Some("Web"))
        );
        // Deleting past the `/` leaves the search where it began.
        press(&mut e, &mut b, "gg/x");
        let back = KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE);
        e.key(&mut b, back);
        e.key(&mut b, back);
        assert_eq!((cursor(&b), e.search.is_none()), ((0, 0), true));
        assert_eq!(e.last_search.as_deref(), Some("Web"));
    }

    #[test]
    fn n_and_n_go_on_from_the_other_end_and_say_so() {
        let mut e = EditorState::default();
        let mut b = buffer("- name: a\n- name: b\n- name: c\n");
        press(&mut e, &mut b, "/name");
        e.key(&mut b, KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(cursor(&b), (0, 2), "the first match after the cursor");
        assert_eq!(press(&mut e, &mut b, "n"), Outcome::Moved);
        assert_eq!(cursor(&b), (1, 2));
        assert_eq!(press(&mut e, &mut b, "n"), Outcome::Moved);
        assert_eq!(cursor(&b), (2, 2));
        assert_eq!(
            press(&mut e, &mut b, "n"),
            notice("search hit BOTTOM, continuing at TOP", false)
        );
        assert_eq!(cursor(&b), (0, 2));
        assert_eq!(
            press(&mut e, &mut b, "N"),
            notice("search hit TOP, continuing at BOTTOM", false)
        );
        assert_eq!(cursor(&b), (2, 2));
        assert_eq!(press(&mut e, &mut b, "2N"), Outcome::Moved);
        assert_eq!(cursor(&b), (0, 2), "a count repeats the search");
        // Enter on an empty search repeats the last one; a text that is nowhere says so and
        // leaves the cursor.
        press(&mut e, &mut b, "/");
        e.key(&mut b, KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(cursor(&b), (1, 2));
        press(&mut e, &mut b, "/zzz");
        assert_eq!(cursor(&b), (1, 2), "typed, found nowhere: the cursor stays");
        assert_eq!(
            e.key(&mut b, KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
            notice("pattern not found: zzz", true)
        );
        assert_eq!(cursor(&b), (1, 2));
        let mut fresh = EditorState::default();
        assert!(matches!(
            press(&mut fresh, &mut b, "n"),
            Outcome::Notice { error: true, .. }
        ));
    }

    #[test]
    fn line_commands_delete_put_and_change_whole_lines_as_one_undo_step() {
        let mut e = EditorState::default();
        let mut b = buffer("a: 1\nb: 2\nc: 3\n");
        press(&mut e, &mut b, "jdd");
        assert_eq!(b.text(), "a: 1\nc: 3\n");
        press(&mut e, &mut b, "p");
        assert_eq!(b.text(), "a: 1\nc: 3\nb: 2\n");
        press(&mut e, &mut b, "ggP");
        assert_eq!(b.text(), "b: 2\na: 1\nc: 3\nb: 2\n");
        assert!(b.undo_step(false) && b.undo_step(false) && b.undo_step(false));
        assert_eq!(
            b.text(),
            "a: 1\nb: 2\nc: 3\n",
            "three steps, three commands"
        );
        // The last line, `x`, `cc` (then typing, then esc), `yy` and `p`.
        let mut b = buffer("a: 1\nb: 2\n");
        press(&mut e, &mut b, "Gdd");
        assert_eq!(b.text(), "a: 1\n");
        press(&mut e, &mut b, "x");
        assert_eq!(b.text(), ": 1\n");
        press(&mut e, &mut b, "ccz: 9\x1b");
        assert_eq!(e.mode, EditMode::Normal);
        assert_eq!(b.text(), "z: 9\n");
        press(&mut e, &mut b, "yyp");
        assert_eq!(b.text(), "z: 9\nz: 9\n");
    }

    #[test]
    fn normal_mode_keys_never_type_and_esc_ends_insert_mode() {
        let mut e = EditorState::default();
        let mut b = buffer("kind: X\n");
        press(&mut e, &mut b, "jkhlwbe0$^");
        assert_eq!(b.text(), "kind: X\n");
        assert_eq!(
            e.key(
                &mut b,
                KeyEvent::new(KeyCode::Char(':'), KeyModifiers::NONE)
            ),
            Outcome::NotMine,
            "`:` is the command line's"
        );
        press(&mut e, &mut b, "A # w\x1b");
        assert_eq!(b.text(), "kind: X # w\n");
        assert_eq!(e.mode, EditMode::Normal);
        assert_eq!(
            e.key(
                &mut b,
                KeyEvent::new(KeyCode::Char('u'), KeyModifiers::NONE)
            ),
            Outcome::Undo(false)
        );
    }

    #[test]
    fn counts_find_and_replace_take_their_keys_digits_included() {
        let mut e = EditorState::default();
        let mut b = buffer("a: 1\nb: 2\nc: 3\nd: 4\nspec: \"x ? 2 : 5\"\n");
        // A count and a replacement by a digit never leave the editor (digits are views
        // elsewhere).
        for key in ['4', 'j', 'f', '2', 'r', '9'] {
            let outcome = e.key(
                &mut b,
                KeyEvent::new(KeyCode::Char(key), KeyModifiers::NONE),
            );
            assert_ne!(outcome, Outcome::NotMine, "{key}");
        }
        assert_eq!(b.text(), "a: 1\nb: 2\nc: 3\nd: 4\nspec: \"x ? 9 : 5\"\n");
        assert_eq!(b.area.cursor(), (4, 11));
        // `2dd` is one undo step; `3G` goes to line 3; `t:` stops before the colon; `2x`.
        press(&mut e, &mut b, "gg2dd");
        assert_eq!(b.text(), "c: 3\nd: 4\nspec: \"x ? 9 : 5\"\n");
        assert!(b.undo_step(false));
        assert_eq!(b.text(), "a: 1\nb: 2\nc: 3\nd: 4\nspec: \"x ? 9 : 5\"\n");
        press(&mut e, &mut b, "5G");
        assert_eq!(b.area.cursor(), (4, 0));
        press(&mut e, &mut b, "2t:");
        assert_eq!(b.area.cursor(), (4, 12), "before the second colon");
        press(&mut e, &mut b, "F?");
        assert_eq!(b.area.cursor(), (4, 9));
        press(&mut e, &mut b, "0f\"2x");
        assert_eq!(b.text(), "a: 1\nb: 2\nc: 3\nd: 4\nspec:  ? 9 : 5\"\n");
        // A count larger than what is there does what it can (`r` nothing, as vim).
        press(&mut e, &mut b, "3G0100rz99l");
        assert_eq!(b.text(), "a: 1\nb: 2\nc: 3\nd: 4\nspec:  ? 9 : 5\"\n");
        assert_eq!(b.area.cursor(), (2, 3));
        assert_eq!(e.count, None);
        assert_eq!(e.pending, None);
        // `esc` cancels a count being typed; the next one is the view's.
        press(&mut e, &mut b, "7");
        assert_eq!(e.count, Some(7));
        assert_eq!(press(&mut e, &mut b, "\x1b"), Outcome::Moved);
        assert_eq!(e.count, None);
        assert_eq!(press(&mut e, &mut b, "\x1b"), Outcome::NotMine);
    }
}
