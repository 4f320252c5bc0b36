//! The Requests view's own state: its filter, its sort, the rows it shows and its cursor.

use std::cmp::Ordering;

use super::ViewState;
use crate::tui::filter::{FilterError, RequestFilter};
use crate::tui::keymap::{self, Action};
use crate::tui::model::{Entry, RequestRow};

/// Requests sort column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Input order.
    #[default]
    Input,
    /// Operation.
    Operation,
    /// Resource.
    Resource,
    /// Namespace/name.
    Name,
    /// Verdict (denied first when reversed).
    Verdict,
    /// Webhooks called.
    Called,
    /// Rounds.
    Rounds,
    /// Duration.
    Duration,
}

impl SortKey {
    /// In column order.
    pub const ALL: [SortKey; 8] = [
        SortKey::Input,
        SortKey::Operation,
        SortKey::Resource,
        SortKey::Name,
        SortKey::Verdict,
        SortKey::Called,
        SortKey::Rounds,
        SortKey::Duration,
    ];

    /// As `:sort` names it.
    pub fn name(self) -> &'static str {
        keymap::SORT_COLUMNS[self as usize]
    }
}

/// The Requests view. Its cursor is the request in focus of the whole console — the one the
/// Chain view shows and `y` copies — kept here, in one place, because the Chain view is this
/// list's detail; the views that open a request elsewhere (What-if, Annotations, a live replay)
/// move this cursor with [`RequestsView::focus`], and then it may rest on a request the filter
/// hides.
#[derive(Debug, Clone)]
pub struct RequestsView {
    filter: String,
    parsed: Result<RequestFilter, FilterError>,
    sort: (SortKey, bool),
    visible: Vec<usize>,
    /// The selected request (index into the entries).
    pub selected: Option<usize>,
}

impl Default for RequestsView {
    fn default() -> RequestsView {
        RequestsView {
            filter: String::new(),
            parsed: Ok(RequestFilter::default()),
            sort: (SortKey::Input, false),
            visible: Vec::new(),
            selected: None,
        }
    }
}

/// What an action the Requests view took did, for the shared update to follow up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taken {
    /// The cursor moved to another request: the Chain view starts over at its first step.
    pub reselected: bool,
    /// A line for the status bar.
    pub note: Option<String>,
}

impl RequestsView {
    /// The filter as typed.
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// The filter as parsed, or why it cannot be used (then no row is shown).
    pub fn parsed(&self) -> Result<&RequestFilter, &FilterError> {
        self.parsed.as_ref()
    }

    /// The sort column, and whether it is reversed.
    pub fn sort(&self) -> (SortKey, bool) {
        self.sort
    }

    /// Indices into the entries of the rows shown, in display order.
    pub fn visible(&self) -> &[usize] {
        &self.visible
    }

    /// The cursor's position among the rows shown; None when it rests on a hidden request.
    pub fn position(&self) -> Option<usize> {
        let s = self.selected?;
        self.visible.iter().position(|&i| i == s)
    }

    /// Puts the cursor on request `index` (opened from another view), shown or not.
    pub fn focus(&mut self, index: usize) {
        self.selected = Some(index);
    }

    /// Forgets the rows and the cursor (the entries are about to be replaced).
    pub fn clear(&mut self) {
        self.visible.clear();
        self.selected = None;
    }

    /// The actions that are only this view's: its sort and its filter. None for any other.
    pub fn action(&mut self, action: &Action, entries: &[Entry]) -> Option<Taken> {
        let mut note = None;
        match action {
            Action::SortNext => {
                let next = SortKey::ALL[(self.sort.0 as usize + 1) % SortKey::ALL.len()];
                self.sort = (next, false);
                note = Some(format!("sorted by {}", next.name()));
            }
            Action::SortReverse => self.sort.1 = !self.sort.1,
            Action::Sort(name) => match SortKey::ALL.iter().find(|k| k.name() == name) {
                Some(k) => self.sort = (*k, false),
                None => return Some(Taken::default()),
            },
            Action::Filter(text) => {
                self.parsed = RequestFilter::parse(text);
                self.filter = text.clone();
            }
            _ => return None,
        }
        let reselected = self.refilter(entries);
        Some(Taken { reselected, note })
    }

    /// A click on a column's title: sorts by it, reversed when it already was.
    pub fn click_column(&mut self, key: SortKey, entries: &[Entry]) -> bool {
        self.sort = (key, self.sort.0 == key && !self.sort.1);
        self.refilter(entries)
    }

    /// Filters and sorts `entries` afresh; true when the cursor had to move to the first row.
    pub fn refilter(&mut self, entries: &[Entry]) -> bool {
        // Each row derived once, for the filter and the sort.
        let mut shown: Vec<(usize, RequestRow)> = match &self.parsed {
            // A filter that cannot be used shows nothing; the status line says why.
            Err(_) => Vec::new(),
            Ok(f) => entries
                .iter()
                .enumerate()
                .map(|(i, e)| (i, e.row()))
                .filter(|(_, row)| f.matches(row))
                .collect(),
        };
        let (key, reverse) = self.sort;
        if key != SortKey::Input {
            shown.sort_by(|(a, x), (b, y)| sort_order(key, (*a, x), (*b, y)));
        }
        self.visible = shown.into_iter().map(|(i, _)| i).collect();
        if reverse {
            self.visible.reverse();
        }
        if self.position().is_some() {
            return false;
        }
        self.selected = self.visible.first().copied();
        true
    }

    /// The last of `entries` arrived: shown in its place if the filter passes it. True when the
    /// cursor had to move to the first row.
    pub fn push(&mut self, entries: &[Entry]) -> bool {
        let Some(index) = entries.len().checked_sub(1) else {
            return false;
        };
        let row = entries[index].row();
        if !self.filter.is_empty() && !self.parsed.as_ref().is_ok_and(|f| f.matches(&row)) {
            return false;
        }
        // Cheap when the new row lands at the end (input order).
        if self.sort == (SortKey::Input, false) {
            self.visible.push(index);
            if self.selected.is_none() {
                self.selected = Some(index);
            }
            return false;
        }
        // One row in its sorted place: a new entry must not cost a sort of all of them.
        let (key, reverse) = self.sort;
        let before = if reverse {
            Ordering::Greater
        } else {
            Ordering::Less
        };
        let at = self
            .visible
            .partition_point(|&i| sort_order(key, (i, &entries[i].row()), (index, &row)) == before);
        self.visible.insert(at, index);
        if self.position().is_some() {
            return false;
        }
        self.selected = self.visible.first().copied();
        true
    }

    /// Moves the cursor to the row at `pos`; true when it moved to another request.
    pub fn select_position(&mut self, pos: usize) -> bool {
        match self.visible.get(pos) {
            Some(&i) if self.selected != Some(i) => {
                self.selected = Some(i);
                true
            }
            _ => false,
        }
    }
}

impl ViewState for RequestsView {
    /// The rows are the view's own.
    type Data = ();

    /// From the cursor's row (the first when it rests on a hidden request).
    fn navigate(&mut self, _: &(), delta: isize) {
        if self.visible.is_empty() {
            return;
        }
        let pos = self.position().unwrap_or(0) as isize;
        let last = self.visible.len() as isize - 1;
        self.select_position(pos.saturating_add(delta).clamp(0, last) as usize);
    }
}

/// How two entries (input position and row) compare under a sort key; ties keep input order.
fn sort_order(
    key: SortKey,
    (a, x): (usize, &RequestRow),
    (b, y): (usize, &RequestRow),
) -> Ordering {
    match key {
        SortKey::Input => a.cmp(&b),
        SortKey::Operation => x.operation.cmp(&y.operation),
        SortKey::Resource => x.resource.cmp(&y.resource),
        SortKey::Name => x.target.cmp(&y.target),
        SortKey::Verdict => x.verdict.cmp(&y.verdict),
        SortKey::Called => x.called.cmp(&y.called),
        SortKey::Rounds => x.rounds.cmp(&y.rounds),
        SortKey::Duration => x.duration.cmp(&y.duration),
    }
    .then(a.cmp(&b))
}
