//! Each view's own state — its cursor, its scroll, what it has open — behind one small
//! interface, [`ViewState`]: how a navigation key moves it over what it shows, and what `esc`
//! closes of its own. What the views share (requests, webhooks, problems, buffers) and the one
//! [`update`](super::app::update) that changes it stay in [`State`](super::app::State), which
//! holds one of these per view and hands each the part of the shared state it moves over.
//!
//! So far: the Requests view ([`RequestsView`]: its filter, sort, rows and cursor), the Chain
//! view ([`ChainView`]), the Webhooks and What-if cursors ([`ListCursor`]),
//! Annotations ([`AnnotationsView`]: its cursor, a [`TailCursor`], and its filter), the Problems view
//! ([`ProblemsView`]), the live Events view ([`EventsView`]: its cursor and filter) and Cluster
//! view ([`ClusterView`]: its cursor over the configuration changes), the help overlay's and the Metrics samples' scroll ([`Scroll`]); the Edit
//! view's mode and keys are [`EditorState`](super::edit_keys::EditorState).

use super::excerpt::Excerpt;
use super::view::scroll;

mod live;
mod requests;

pub use live::{ClusterView, EventsView};
pub use requests::{RequestsView, SortKey, Taken};

/// A view's own state.
pub trait ViewState {
    /// What of the shared state the view moves over (a row count, a pane's extent).
    type Data: ?Sized;

    /// A navigation key (up, down, a page, an end): moves the cursor or scroll by `delta` rows
    /// within `data`; a large delta reaches an end.
    fn navigate(&mut self, data: &Self::Data, delta: isize);

    /// `esc`: closes what the view itself has open; false when nothing was, and `esc` keeps its
    /// shared meaning (back, clear the filter).
    fn back(&mut self) -> bool {
        false
    }
}

/// The lines of a scrolled pane's text and the rows it shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extent {
    /// Lines of text.
    pub total: usize,
    /// Rows shown.
    pub height: usize,
}

impl From<(usize, usize)> for Extent {
    fn from((total, height): (usize, usize)) -> Extent {
        Extent { total, height }
    }
}

/// A pane's scroll: its first line shown, clamped so that the last page is full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scroll {
    /// The first line shown.
    pub top: usize,
}

impl ViewState for Scroll {
    type Data = Extent;

    fn navigate(&mut self, e: &Extent, delta: isize) {
        self.top = scroll::moved(self.top, delta, e.total, e.height);
    }
}

/// A row cursor over a list of `n` rows (the Data).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListCursor {
    /// The selected row.
    pub selected: usize,
}

impl ViewState for ListCursor {
    type Data = usize;

    fn navigate(&mut self, rows: &usize, delta: isize) {
        let last = rows.saturating_sub(1) as isize;
        self.selected = (self.selected as isize)
            .saturating_add(delta)
            .clamp(0, last) as usize;
    }
}

/// A row cursor that follows the tail of a growing list (Annotations): on the last row it stays
/// on the last row as rows arrive; moved up it stays where it was put.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TailCursor {
    /// The selected row, or None to follow the tail.
    pub selected: Option<usize>,
}

impl TailCursor {
    /// The row the cursor is on, of `rows`.
    pub fn at(&self, rows: usize) -> usize {
        let last = rows.saturating_sub(1);
        self.selected.unwrap_or(last).min(last)
    }

    /// Whether it follows the tail.
    pub fn following(&self) -> bool {
        self.selected.is_none()
    }
}

impl ViewState for TailCursor {
    type Data = usize;

    fn navigate(&mut self, rows: &usize, delta: isize) {
        let last = rows.saturating_sub(1);
        let new = (self.at(*rows) as isize)
            .saturating_add(delta)
            .clamp(0, last as isize) as usize;
        // Back on the last row, the cursor follows the tail again.
        self.selected = (new < last).then_some(new);
    }
}

/// The Annotations view: its row cursor over the annotations shown, and its filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnotationsView {
    /// The row cursor (index into the annotations shown), following the newest until moved.
    pub cursor: TailCursor,
    /// `/` in Annotations: only annotations whose key, value or request's target contain this
    /// text (case-insensitive) are shown.
    pub filter: String,
}

impl AnnotationsView {
    /// A new filter: the cursor follows the newest again.
    pub fn set_filter(&mut self, text: String) {
        self.filter = text;
        self.cursor = TailCursor::default();
    }
}

impl ViewState for AnnotationsView {
    /// Rows shown.
    type Data = usize;

    fn navigate(&mut self, rows: &usize, delta: isize) {
        self.cursor.navigate(rows, delta);
    }

    /// Clears the filter (the cursor stays where it was).
    fn back(&mut self) -> bool {
        let filtered = !self.filter.is_empty();
        self.filter.clear();
        filtered
    }
}

/// Which pane of the Chain view has the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChainPane {
    /// The grid of steps.
    #[default]
    Grid,
    /// The step's detail.
    Detail,
}

/// What the Chain view moves over: the selected request's calls in the order it lists them,
/// and its detail pane's extent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainExtent {
    /// The calls (indices into the outcome's calls) in dispatch order.
    pub order: Vec<usize>,
    /// The detail's lines and the rows it shows.
    pub detail: Extent,
}

/// The Chain view: the selected step, the pane with the keys, the detail's scroll, and
/// whether it compares before and after the edits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainView {
    /// The selected call (index into the outcome's calls).
    pub step: usize,
    /// The pane with the keys.
    pub pane: ChainPane,
    /// The detail pane's scroll.
    pub detail: Scroll,
    /// It shows the request before and after the edits side by side (opened from What-if).
    pub compare: bool,
}

impl ChainView {
    /// Selects a step, its detail from the top.
    pub fn select(&mut self, step: usize) {
        self.step = step;
        self.detail = Scroll::default();
    }

    /// Moves `delta` steps through `order` (the calls in dispatch order), whichever pane has
    /// the keys (the wheel over the grid).
    pub fn step_by(&mut self, order: &[usize], delta: isize) {
        if order.is_empty() {
            return;
        }
        let at = order.iter().position(|&i| i == self.step).unwrap_or(0);
        let to = (at as isize)
            .saturating_add(delta)
            .clamp(0, order.len() as isize - 1) as usize;
        self.select(order[to]);
    }

    /// The other pane takes the keys.
    pub fn toggle_pane(&mut self) {
        self.pane = match self.pane {
            ChainPane::Grid => ChainPane::Detail,
            ChainPane::Detail => ChainPane::Grid,
        };
    }
}

impl ViewState for ChainView {
    type Data = ChainExtent;

    /// The grid steps through the calls in dispatch order; the detail scrolls.
    fn navigate(&mut self, data: &ChainExtent, delta: isize) {
        if self.pane == ChainPane::Detail {
            self.detail.navigate(&data.detail, delta);
        } else {
            self.step_by(&data.order, delta);
        }
    }

    /// From the detail back to the grid.
    fn back(&mut self) -> bool {
        let detail = self.pane == ChainPane::Detail;
        self.pane = ChainPane::Grid;
        detail
    }
}

/// What the Problems view moves over: its rows, and the open file's pane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProblemsExtent {
    /// Problems listed.
    pub rows: usize,
    /// The open file's lines and the rows its pane shows.
    pub excerpt: Extent,
}

/// The Problems view: the row cursor, and the file opened read-only at a problem.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProblemsView {
    /// The selected problem.
    pub cursor: ListCursor,
    /// The selected problem's file around its position, shown instead of the list until `esc`.
    pub excerpt: Option<Excerpt>,
    /// The open file's scroll (an index into its lines).
    pub excerpt_scroll: Scroll,
}

impl ProblemsView {
    /// Shows a file read around a problem, its line a few rows from the top.
    pub fn open(&mut self, e: Excerpt) {
        self.excerpt_scroll.top = (e.line - e.first).saturating_sub(3);
        self.excerpt = Some(e);
    }
}

impl ViewState for ProblemsView {
    type Data = ProblemsExtent;

    fn navigate(&mut self, data: &ProblemsExtent, delta: isize) {
        if self.excerpt.is_some() {
            self.excerpt_scroll.navigate(&data.excerpt, delta);
        } else {
            self.cursor.navigate(&data.rows, delta);
        }
    }

    fn back(&mut self) -> bool {
        self.excerpt.take().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_and_scrolls_stay_within_what_they_move_over() {
        let mut c = ListCursor::default();
        c.navigate(&3, 10);
        assert_eq!(c.selected, 2);
        c.navigate(&3, -1);
        assert_eq!(c.selected, 1);
        c.navigate(&0, 1);
        assert_eq!(c.selected, 0, "an empty list");
        let mut s = Scroll::default();
        s.navigate(&Extent::from((30, 10)), isize::MAX / 2);
        assert_eq!(s.top, 20);
        let mut p = ProblemsView::default();
        assert!(!p.back(), "nothing open");
        let data = ProblemsExtent {
            rows: 4,
            excerpt: Extent::from((100, 10)),
        };
        p.navigate(&data, 2);
        assert_eq!(p.cursor.selected, 2);
        p.open(Excerpt {
            path: "in.jsonl".into(),
            line: 60,
            first: 10,
            lines: vec![String::new(); 100],
            place: "line 60".into(),
            reason: String::new(),
        });
        assert_eq!(p.excerpt_scroll.top, 47, "the line three rows from the top");
        p.navigate(&data, 1);
        assert_eq!(
            (p.cursor.selected, p.excerpt_scroll.top),
            (2, 48),
            "the open file scrolls, the cursor stays"
        );
        assert!(p.back() && p.excerpt.is_none());
        let mut c = ChainView::default();
        let data = ChainExtent {
            order: vec![2, 0, 1],
            detail: Extent::from((40, 10)),
        };
        c.select(2);
        c.navigate(&data, 1);
        assert_eq!(c.step, 0, "in dispatch order, not call order");
        c.navigate(&data, 10);
        assert_eq!(c.step, 1);
        c.toggle_pane();
        c.navigate(&data, 100);
        assert_eq!((c.step, c.detail.top), (1, 30), "the detail scrolls");
        assert!(
            c.back() && !c.back(),
            "esc: the grid, then nothing of its own"
        );
        c.navigate(&data, -1);
        assert_eq!(
            (c.step, c.detail.top),
            (0, 0),
            "a new step's detail from its top"
        );
        let mut t = TailCursor::default();
        assert_eq!(t.at(5), 4);
        t.navigate(&5, -2);
        assert_eq!((t.at(6), t.following()), (2, false), "stays as rows arrive");
        t.navigate(&6, isize::MAX / 2);
        assert!(t.following(), "the end follows the tail again");
    }
}
