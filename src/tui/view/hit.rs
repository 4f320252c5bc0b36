//! Where a mouse event lands: the same layout the views draw, asked for the item under a cell.
//! Pure functions of the state and the terminal size.

use ratatui::layout::{Constraint, Layout, Position, Rect};

use crate::engine::Outcome;
use crate::tui::app::{SortKey, State};
use crate::tui::model::Block;

/// The area between the header line and the status bar, where a view draws.
fn main_area(state: &State) -> Rect {
    let (w, h) = state.size;
    Rect::new(0, 1, w, h.saturating_sub(2))
}

/// Inside a bordered pane.
fn inner(r: Rect) -> Rect {
    Rect::new(
        r.x.saturating_add(1),
        r.y.saturating_add(1),
        r.width.saturating_sub(2),
        r.height.saturating_sub(2),
    )
}

/// What is under the mouse in the Chain view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainHit {
    /// The row of this step (index into the outcome's calls).
    Step(usize),
    /// The grid of steps, off any step.
    Grid,
    /// The step's detail.
    Detail,
}

/// The Chain view's grid of the selected request's steps and its detail pane, as
/// `chain::render` lays them out; when it compares before and after the edits, the "after" grid
/// and the final object's diff.
pub(crate) fn chain_panes(state: &State) -> (Rect, Rect) {
    let [_, body] =
        Layout::vertical([Constraint::Length(4), Constraint::Min(1)]).areas(main_area(state));
    let compared = state.chain.compare
        && (state.baseline.as_ref())
            .zip(state.requests.selected)
            .is_some_and(|(b, i)| i < b.entries.len());
    if compared {
        let [grids, diff] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Min(4)]).areas(body);
        let [_, after] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(grids);
        return (after, diff);
    }
    let width = state
        .selected_entry()
        .map_or(46, |e| super::chain::grid_width(state, e, body.width));
    let [grid, detail] =
        Layout::horizontal([Constraint::Length(width), Constraint::Min(20)]).areas(body);
    (grid, detail)
}

/// The grid's lines: the call each line shows, None for block titles and the blank lines
/// between blocks.
fn grid_lines(state: &State, o: &Outcome) -> Vec<Option<usize>> {
    let mut lines = Vec::new();
    let mut current = None;
    for i in crate::tui::model::chain_order(o, &state.hooks) {
        let c = &o.calls[i];
        let b = Block::of(c);
        if current != Some(b) {
            if current.is_some() {
                lines.push(None);
            }
            lines.push(None);
            current = Some(b);
        }
        lines.push(Some(i));
    }
    lines
}

/// What is at `(x, y)` of the Chain view (in the before/after comparison: the "after" grid's
/// steps, and the diff as the detail).
pub fn chain_at(state: &State, x: u16, y: u16) -> Option<ChainHit> {
    let entry = state.selected_entry()?;
    let (grid, detail) = chain_panes(state);
    let at = Position::new(x, y);
    if detail.contains(at) {
        return Some(ChainHit::Detail);
    }
    if !grid.contains(at) {
        return None;
    }
    let lines = grid_lines(state, &entry.replayed.outcome);
    let rows = inner(grid);
    if !rows.contains(at) {
        return Some(ChainHit::Grid);
    }
    // The grid scrolls so that the selected step stays on screen.
    let selected_line = lines
        .iter()
        .position(|l| *l == Some(state.chain.step))
        .unwrap_or(0);
    let scroll = selected_line.saturating_sub(usize::from(rows.height).saturating_sub(2));
    let line = scroll + usize::from(y - rows.y);
    Some(match lines.get(line) {
        Some(Some(i)) => ChainHit::Step(*i),
        _ => ChainHit::Grid,
    })
}

/// The webhook (index into `hooks`) whose row of the Webhooks view is at `(x, y)`.
pub fn webhook_at(state: &State, x: u16, y: u16) -> Option<usize> {
    let [list, _] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Min(5)]).areas(main_area(state));
    let rows = inner(list);
    // The first line of the table is its column titles.
    if !rows.contains(Position::new(x, y)) || y == rows.y {
        return None;
    }
    let i = usize::from(y - rows.y - 1);
    (i < state.hooks.len()).then_some(i)
}

/// The What-if row (index into `whatif.requests`) at `(x, y)`.
pub fn whatif_at(state: &State, x: u16, y: u16) -> Option<usize> {
    state.baseline.as_ref()?;
    let [_, list, _] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(55),
        Constraint::Min(5),
    ])
    .areas(main_area(state));
    let rows = inner(list);
    if !rows.contains(Position::new(x, y)) || y == rows.y {
        return None;
    }
    let height = usize::from(list.height.saturating_sub(3)).max(1);
    let offset = state.whatif_cursor.selected.saturating_sub(height - 1);
    let i = offset + usize::from(y - rows.y - 1);
    (i < state.whatif.requests.len()).then_some(i)
}

/// The sort column whose title in the Requests table is at `(x, y)`.
pub fn requests_column_at(state: &State, x: u16, y: u16) -> Option<SortKey> {
    let rows = inner(main_area(state));
    if y != rows.y || !rows.contains(Position::new(x, y)) {
        return None;
    }
    // As the view lays its columns out, for the rows it shows.
    let at = super::requests::laid(state, main_area(state)).column_at(x - rows.x)?;
    SortKey::ALL.get(at).copied()
}

/// The annotation (index into `visible_annotations()`) whose row of the Annotations view is at
/// `(x, y)`.
pub fn annotation_at(state: &State, x: u16, y: u16) -> Option<usize> {
    let area = main_area(state);
    let rows = inner(area);
    // The first line of the table is its column titles.
    if !rows.contains(Position::new(x, y)) || y == rows.y {
        return None;
    }
    // As `annotations::render` scrolls: the cursor's row kept on screen.
    let n = state.visible_annotations().len();
    let height = usize::from(area.height.saturating_sub(3));
    let (top, _, _) = super::annotations::window(state, n, height);
    let i = top + usize::from(y - rows.y - 1);
    (i < n).then_some(i)
}
