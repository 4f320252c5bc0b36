//! The one table layout every view's tables use. Each column has a priority and a way to give
//! way: a column whose cells must stay whole (numbers, verdicts, markers) is as wide as its
//! widest cell or is dropped whole; a text column is cut with an ellipsis, down to its minimum.
//! When the columns' minimums do not fit, the lowest-priority columns are dropped whole and the
//! table says which ([`Laid::hidden_note`]); spare width goes, in priority order, to the columns
//! whose cells are wider than their share, so long names are shown whole where there is room.

use ratatui::layout::{Constraint, Flex};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};

use super::{clip, pane};
use crate::tui::app::State;
use crate::tui::theme::StyleKey;

/// How a column gives way when the table is narrower than its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Never cut: as wide as its widest cell (and its title, or the title's abbreviation), or
    /// dropped whole.
    Whole,
    /// Cut with an ellipsis, down to this many columns.
    Clip(u16),
}

/// A column of a table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    /// The title in the header.
    pub title: &'static str,
    /// The title where the full one does not fit ("" for none).
    pub short: &'static str,
    /// Columns of a lower priority are dropped first (ties: the rightmost first).
    pub priority: u8,
    /// How the column gives way.
    pub fit: Fit,
    /// Cells and title aligned right (numbers).
    pub right: bool,
}

impl Column {
    /// A text column cut down to `min` columns at most, left aligned.
    pub const fn text(title: &'static str, priority: u8, min: u16) -> Column {
        Column {
            title,
            short: "",
            priority,
            fit: Fit::Clip(min),
            right: false,
        }
    }

    /// A column never cut, left aligned (verdicts, markers).
    pub const fn whole(title: &'static str, priority: u8) -> Column {
        Column {
            title,
            short: "",
            priority,
            fit: Fit::Whole,
            right: false,
        }
    }

    /// A number: never cut, right aligned.
    pub const fn number(title: &'static str, priority: u8) -> Column {
        Column {
            title,
            short: "",
            priority,
            fit: Fit::Whole,
            right: true,
        }
    }

    /// The same column with an abbreviated title for narrow tables.
    pub const fn short(self, short: &'static str) -> Column {
        Column { short, ..self }
    }

    /// The narrowest title this column can show.
    fn narrowest_title(&self) -> usize {
        if self.short.is_empty() {
            width(self.title)
        } else {
            width(self.short).min(width(self.title))
        }
    }
}

/// One cell: its text and style.
pub(crate) type TableCell = (String, Style);

/// One row of a table: a cell per column (in the columns' order) and the row's style.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableRow {
    /// The cells, one per column.
    pub cells: Vec<TableCell>,
    /// The whole row's style (the selection).
    pub style: Style,
}

impl TableRow {
    /// A row of cells in the default style.
    pub fn new(cells: Vec<TableCell>) -> TableRow {
        TableRow {
            cells,
            style: Style::default(),
        }
    }

    /// The row with a style (the selected row).
    pub fn style(self, style: Style) -> TableRow {
        TableRow { style, ..self }
    }

    /// The row in the theme's selection style when `selected`.
    pub fn selected_if(self, selected: bool, state: &State) -> TableRow {
        if selected {
            self.style(super::style(state, StyleKey::Selected))
        } else {
            self
        }
    }
}

/// Draws `rows` as a table of `columns` in a bordered pane over `area`, its title naming the
/// columns hidden for want of width.
pub(crate) fn draw(
    frame: &mut ratatui::Frame,
    state: &State,
    (columns, rows): (&[Column], Vec<TableRow>),
    (title, focused): (&str, bool),
    area: ratatui::layout::Rect,
) {
    let laid = Laid::new(columns, &rows, area.width.saturating_sub(2));
    let table = laid
        .table(rows, super::style(state, StyleKey::Header))
        .block(pane(state, laid.titled(title, area.width), focused));
    frame.render_widget(table, area);
}

/// Columns between two cells.
const SPACING: u16 = 1;

/// Display width of a text, as the terminal draws it.
pub(crate) fn width(s: &str) -> usize {
    Span::raw(s).width()
}

/// The widths chosen for a table's columns at a given width.
#[derive(Debug, Clone)]
pub(crate) struct Laid {
    columns: Vec<Column>,
    /// Per column: its width, or None where it was dropped.
    widths: Vec<Option<u16>>,
}

impl Laid {
    /// Lays `columns` out for `rows` in `width` terminal columns.
    pub fn new(columns: &[Column], rows: &[TableRow], width: u16) -> Laid {
        let n = columns.len();
        let mut widest = vec![0usize; n];
        for r in rows {
            for (i, (text, _)) in r.cells.iter().enumerate().take(n) {
                widest[i] = widest[i].max(self::width(text));
            }
        }
        let clamp = |w: usize| u16::try_from(w).unwrap_or(u16::MAX);
        // The least each column needs, and what it would like.
        let least: Vec<u16> = columns
            .iter()
            .zip(&widest)
            .map(|(c, &w)| match c.fit {
                Fit::Whole => clamp(w.max(c.narrowest_title())),
                Fit::Clip(min) => min.min(clamp(w.max(c.narrowest_title()))).max(1),
            })
            .collect();
        let natural: Vec<u16> = columns
            .iter()
            .zip(&widest)
            .zip(&least)
            .map(|((c, &w), &l)| clamp(w.max(self::width(c.title))).max(l))
            .collect();
        let mut kept = vec![true; n];
        let used = |kept: &[bool], ws: &[u16]| -> u32 {
            let count = kept.iter().filter(|k| **k).count() as u32;
            let cells: u32 = (0..n).filter(|&i| kept[i]).map(|i| u32::from(ws[i])).sum();
            cells + count.saturating_sub(1) * u32::from(SPACING)
        };
        // Lowest priority first; of equal priority, the rightmost first.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (columns[i].priority, std::cmp::Reverse(i)));
        for &i in &order {
            if used(&kept, &least) <= u32::from(width) {
                break;
            }
            kept[i] = false;
        }
        let mut widths: Vec<u16> = least.clone();
        let mut spare = u32::from(width).saturating_sub(used(&kept, &least));
        // Spare width to the columns that need it, the highest priority first: first to those
        // whose cells it shows whole with at most half of what is spare (a short column is not
        // cut for a long one that would stay cut anyway, and a long one keeps room), then what
        // is left, titles included.
        for cells_only in [true, false] {
            for &i in order.iter().rev() {
                let want = if cells_only {
                    clamp(widest[i])
                } else {
                    natural[i]
                };
                let need = u32::from(want.saturating_sub(widths[i]));
                if !kept[i] || spare == 0 || (cells_only && need * 2 > spare) {
                    continue;
                }
                let more = need.min(spare);
                widths[i] += more as u16;
                spare -= more;
            }
        }
        Laid {
            columns: columns.to_vec(),
            widths: (0..n).map(|i| kept[i].then_some(widths[i])).collect(),
        }
    }

    /// The titles of the columns dropped for want of width (abbreviated where they have an
    /// abbreviation: a narrow table's title has little room).
    pub fn hidden(&self) -> Vec<&'static str> {
        self.columns
            .iter()
            .zip(&self.widths)
            .filter(|(_, w)| w.is_none())
            .map(|(c, _)| if c.short.is_empty() { c.title } else { c.short })
            .collect()
    }

    /// What a pane's title adds when columns were dropped: `· hidden: A, B ` (empty otherwise).
    pub fn hidden_note(&self) -> String {
        let hidden = self.hidden();
        if hidden.is_empty() {
            String::new()
        } else {
            format!("· hidden: {} ", hidden.join(", "))
        }
    }

    /// A pane's `title` with what was hidden, as it fits a pane `pane_width` wide: the hidden
    /// columns named, else counted (`· 2 hidden `), else the title alone.
    pub fn titled(&self, title: &str, pane_width: u16) -> String {
        let hidden = self.hidden().len();
        if hidden == 0 {
            return title.to_string();
        }
        let room = usize::from(pane_width.saturating_sub(2));
        [self.hidden_note(), format!("· {hidden} hidden ")]
            .into_iter()
            .map(|note| format!("{title}{note}"))
            .find(|t| width(t) <= room)
            .unwrap_or_else(|| title.to_string())
    }

    /// The columns the kept columns and their spacing take.
    pub fn used(&self) -> u16 {
        let kept: Vec<u16> = self.widths.iter().flatten().copied().collect();
        let spacing =
            SPACING.saturating_mul(u16::try_from(kept.len().saturating_sub(1)).unwrap_or(0));
        kept.iter().fold(spacing, |a, w| a.saturating_add(*w))
    }

    /// One row as the spans of a line (for panes that mix table rows with other lines): each
    /// kept cell fitted to its column, in its style, the spacing between.
    pub fn spans(&self, row: TableRow) -> Vec<Span<'static>> {
        let mut out = Vec::new();
        for (i, w) in self.widths.iter().enumerate() {
            let Some(w) = *w else { continue };
            if !out.is_empty() {
                out.push(Span::raw(" ".repeat(usize::from(SPACING))));
            }
            let (text, style) = row.cells.get(i).cloned().unwrap_or_default();
            let text = self.fit(i, &text, w);
            let pad = usize::from(w).saturating_sub(self::width(&text));
            out.push(Span::styled(format!("{text}{}", " ".repeat(pad)), style));
        }
        out
    }

    /// The width of column `i`, None if it was dropped.
    #[cfg(test)]
    pub fn width_of(&self, i: usize) -> Option<u16> {
        self.widths.get(i).copied().flatten()
    }

    /// The column (index into the columns given) drawn at offset `x` from the table's left edge.
    pub fn column_at(&self, x: u16) -> Option<usize> {
        let mut left = 0u16;
        for (i, w) in self.widths.iter().enumerate() {
            let Some(w) = *w else { continue };
            if (left..left.saturating_add(w)).contains(&x) {
                return Some(i);
            }
            left = left.saturating_add(w).saturating_add(SPACING);
        }
        None
    }

    /// The text of one cell fitted to column `i`'s width: cut with an ellipsis, or aligned.
    fn fit(&self, i: usize, text: &str, w: u16) -> String {
        let w = usize::from(w);
        let text = if self::width(text) > w {
            clip(text, w)
        } else {
            text.to_string()
        };
        if self.columns[i].right {
            format!("{text:>w$}")
        } else {
            text
        }
    }

    /// The header title of column `i` at width `w`: whole, abbreviated, or cut.
    fn title(&self, i: usize, w: u16) -> String {
        let c = &self.columns[i];
        let t = if self::width(c.title) <= usize::from(w) || c.short.is_empty() {
            c.title
        } else {
            c.short
        };
        self.fit(i, t, w)
    }

    /// The table of `rows` with these widths and a header in `header` style.
    pub fn table(&self, rows: Vec<TableRow>, header: Style) -> Table<'static> {
        let kept: Vec<usize> = (0..self.widths.len())
            .filter(|&i| self.widths[i].is_some())
            .collect();
        let head = Row::new(
            kept.iter()
                .map(|&i| Cell::from(self.title(i, self.widths[i].unwrap_or(0))))
                .collect::<Vec<_>>(),
        )
        .style(header);
        let body: Vec<Row> = rows
            .into_iter()
            .map(|r| {
                let cells: Vec<Cell> = kept
                    .iter()
                    .map(|&i| {
                        let (text, style) = r.cells.get(i).cloned().unwrap_or_default();
                        let w = self.widths[i].unwrap_or(0);
                        Cell::from(Span::styled(self.fit(i, &text, w), style))
                    })
                    .collect();
                Row::new(cells).style(r.style)
            })
            .collect();
        let constraints: Vec<Constraint> = kept
            .iter()
            .map(|&i| Constraint::Length(self.widths[i].unwrap_or(0)))
            .collect();
        Table::new(body, constraints)
            .header(head)
            .column_spacing(SPACING)
            .flex(Flex::Start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(cells: &[&[&str]]) -> Vec<TableRow> {
        cells
            .iter()
            .map(|r| {
                TableRow::new(
                    r.iter()
                        .map(|c| (c.to_string(), Style::default()))
                        .collect(),
                )
            })
            .collect()
    }

    const COLS: [Column; 3] = [
        Column::text("NAME", 3, 6),
        Column::number("DURATION", 2).short("TIME"),
        Column::number("ROUNDS", 1).short("RND"),
    ];

    #[test]
    fn numbers_are_never_cut_and_the_lowest_priority_goes_first() {
        let r = rows(&[&["shop/a-very-long-name", "1001.7 ms", "2"]]);
        // 6 + 1 + 9 + 1 + 3 = 20: everything at its least.
        let l = Laid::new(&COLS, &r, 20);
        assert_eq!(l.hidden(), Vec::<&str>::new());
        assert_eq!(l.width_of(1), Some(9));
        // One column less: ROUNDS goes whole, DURATION keeps its every digit.
        let l = Laid::new(&COLS, &r, 19);
        assert_eq!(l.hidden(), vec!["RND"]);
        assert_eq!(l.width_of(1), Some(9));
        assert_eq!(l.hidden_note(), "· hidden: RND ");
        assert_eq!(l.titled(" T ", 40), " T · hidden: RND ");
        assert_eq!(l.titled(" Table ", 20), " Table · 1 hidden ");
        assert_eq!(l.titled(" Table ", 10), " Table ");
    }

    #[test]
    fn spare_width_goes_to_the_columns_that_need_it() {
        let r = rows(&[&["shop/a-very-long-name", "3.1 ms", "2"]]);
        let l = Laid::new(&COLS, &r, 200);
        assert_eq!(l.width_of(0), Some(21), "the whole name");
        assert_eq!(l.width_of(1), Some(8), "the whole title");
        assert_eq!(l.column_at(0), Some(0));
        assert_eq!(l.column_at(21), None, "the spacing");
        assert_eq!(l.column_at(22), Some(1));
    }

    #[test]
    fn short_columns_are_made_whole_before_a_long_one_takes_the_rest() {
        let cols = [
            Column::text(" KIND", 6, 8),
            Column::text("WHERE", 8, 18),
            Column::text("REASON", 9, 20),
        ];
        let reason = "x".repeat(400);
        let r = rows(&[&["invalid-input", "manifests/apps.yaml document 12", &reason]]);
        let l = Laid::new(&cols, &r, 250);
        assert_eq!(l.width_of(0), Some(13), "the whole kind");
        assert_eq!(l.width_of(1), Some(31), "the whole place");
        assert_eq!(l.width_of(2), Some(250 - 13 - 31 - 2 * SPACING), "the rest");
        // What is left after the short columns that fit whole goes by priority, as before.
        let width = 46 + 2 * SPACING + 12;
        let l = Laid::new(&cols, &r, width);
        assert_eq!(
            l.width_of(0),
            Some(13),
            "the kind fits whole in the 12 spare"
        );
        assert_eq!(l.width_of(1), Some(18), "the place needs 13: cut");
        assert_eq!(l.width_of(2), Some(20 + 7), "the rest");
        // A short column is not made whole with more than half of the spare width.
        let l = Laid::new(&cols, &r, 46 + 2 * SPACING + 8);
        assert_eq!(l.width_of(0), Some(8), "the kind would take 5 of 8: cut");
        assert_eq!(l.width_of(2), Some(20 + 8), "the reason keeps the spare");
    }

    #[test]
    fn abbreviated_titles_and_cut_text() {
        let r = rows(&[&["shop/a-very-long-name", "3.1 ms", "2"]]);
        let l = Laid::new(&COLS, &r, 18);
        assert_eq!(l.title(1, l.width_of(1).unwrap()), "  TIME");
        assert_eq!(l.fit(0, "shop/a-very-long-name", 6), "shop/…");
        assert_eq!(l.fit(1, "3.1 ms", 6), "3.1 ms");
    }
}
