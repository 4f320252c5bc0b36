//! The live views' own state: the Events view's cursor and filter, the Cluster view's cursor
//! over the configuration changes.

use super::ViewState;

/// The Events view: its cursor over the audit events shown, and its filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventsView {
    /// The selected event's sequence number, or None to follow the tail.
    pub selected: Option<u64>,
    /// `/` in Events: only events whose verb, resource, target, user, code, message or auditID
    /// contain this text (case-insensitive) are shown.
    pub filter: String,
}

impl EventsView {
    /// The selected event, `newest` (the newest shown) when following the tail.
    pub fn at(&self, newest: impl FnOnce() -> Option<u64>) -> Option<u64> {
        self.selected.or_else(newest)
    }

    /// Follows the tail again.
    pub fn follow(&mut self) {
        self.selected = None;
    }

    /// Events before `first` were paged out: a selection among them moves to the oldest kept.
    pub fn paged_out(&mut self, first: u64) {
        if let Some(s) = self.selected
            && s < first
        {
            self.selected = Some(first);
        }
    }
}

impl ViewState for EventsView {
    /// The sequence numbers of the events shown, oldest first.
    type Data = [u64];

    /// Moves by `delta` events shown, from the selection or the newest (stops following the
    /// tail); a selection the filters hide counts as sitting between its neighbours.
    fn navigate(&mut self, shown: &[u64], delta: isize) {
        let Some(&newest) = shown.last() else {
            return;
        };
        let current = self.selected.unwrap_or(newest);
        let at = shown.partition_point(|&seq| seq < current) as isize;
        let at = if shown.get(at as usize) == Some(&current) || delta < 0 {
            at.saturating_add(delta)
        } else {
            at.saturating_add(delta) - 1
        };
        self.selected = Some(shown[at.clamp(0, shown.len() as isize - 1) as usize]);
    }
}

/// The Cluster view: its cursor over the configuration changes, or None for the newest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// The selected change (index into the changes kept).
    pub selected: Option<usize>,
}

impl ClusterView {
    /// The selected change of `changes` kept (the newest when none is selected).
    pub fn at(&self, changes: usize) -> Option<usize> {
        self.selected.or(changes.checked_sub(1))
    }

    /// The oldest change was dropped: the cursor stays on its change.
    pub fn dropped_oldest(&mut self) {
        self.selected = self.selected.map(|s| s.saturating_sub(1));
    }
}

impl ViewState for ClusterView {
    /// Changes kept.
    type Data = usize;

    fn navigate(&mut self, changes: &usize, delta: isize) {
        let Some(last) = changes.checked_sub(1) else {
            return;
        };
        let current = self.selected.unwrap_or(last) as isize;
        self.selected = Some(current.saturating_add(delta).clamp(0, last as isize) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_cursors_stay_on_what_is_shown() {
        let mut e = EventsView::default();
        e.navigate(&[], -1);
        assert_eq!(e.selected, None, "nothing shown: still following");
        let shown = [3, 5, 8, 9];
        e.navigate(&shown, -1);
        assert_eq!(e.selected, Some(8), "from the newest");
        e.selected = Some(6);
        e.navigate(&shown, 1);
        assert_eq!(e.selected, Some(8), "a hidden event sits between 5 and 8");
        e.selected = Some(6);
        e.navigate(&shown, -1);
        assert_eq!(e.selected, Some(5));
        e.navigate(&shown, isize::MIN / 2);
        assert_eq!(e.selected, Some(3));
        e.paged_out(4);
        assert_eq!(e.selected, Some(4), "the oldest kept");
        e.follow();
        assert_eq!(e.at(|| Some(9)), Some(9));

        let mut c = ClusterView::default();
        assert_eq!(c.at(0), None);
        assert_eq!(c.at(4), Some(3), "the newest");
        c.navigate(&4, -2);
        assert_eq!(c.selected, Some(1));
        c.dropped_oldest();
        c.navigate(&4, isize::MAX / 2);
        assert_eq!(c.selected, Some(3), "stays selected at the newest");
    }
}
