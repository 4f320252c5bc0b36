//! Items in input order. An audit request is replayed at its final stage; one whose final stage
//! never comes is replayed at the end from the latest stage seen ([`super::Reader::finish`]), but
//! it belongs where that stage was read. So while such a request waits, the items read after
//! its stage are held behind its place, and go out as soon as its final stage comes (the place
//! is then empty: the request goes out at its final stage) or, at the end, after it.

use std::collections::{HashSet, VecDeque};

use crate::replay::InputItem;

/// Items held behind a waiting request at most: beyond, the oldest waiting request gives up its
/// place (if its final stage never comes it goes out at the end, after everything read), so
/// that a connection left open across a long log (an `exec` session) cannot hold the whole log
/// in memory.
pub(crate) const MAX_HELD: usize = 10_000;

/// The items held and the places of the requests waiting for their final stage.
#[derive(Debug, Default)]
pub(crate) struct Held {
    queue: VecDeque<Slot>,
    /// The places still held, by the sequence number of the early stage that took each (a later
    /// stage of the same request moves its place to where that stage was read).
    waiting: HashSet<u64>,
    /// Items in `queue`.
    items: usize,
}

#[derive(Debug)]
enum Slot {
    Item(InputItem),
    Place(u64),
}

/// Where the reader's items go: straight to the caller's sink, or (reading whole inputs) through
/// [`Held`], in input order.
pub(crate) struct Out<'o> {
    sink: &'o mut dyn FnMut(InputItem),
    held: Option<&'o mut Held>,
}

impl<'o> Out<'o> {
    /// Items go to `sink` as they come (events fed one at a time, as they arrive).
    pub(crate) fn direct(sink: &'o mut dyn FnMut(InputItem)) -> Self {
        Out { sink, held: None }
    }

    /// Items go to `sink` in input order, held in `held` behind waiting requests.
    pub(crate) fn ordered(sink: &'o mut dyn FnMut(InputItem), held: &'o mut Held) -> Self {
        Out {
            sink,
            held: Some(held),
        }
    }

    /// An item read now.
    pub(crate) fn push(&mut self, item: InputItem) {
        match &mut self.held {
            Some(h) if !h.queue.is_empty() => {
                h.queue.push_back(Slot::Item(item));
                h.items += 1;
                self.bound();
            }
            _ => (self.sink)(item),
        }
    }

    /// A request was seen at an early stage, the `seq`-th such event read: it takes its place
    /// here until its final stage comes, instead of the place its earlier stage `replaced` took.
    pub(crate) fn wait(&mut self, seq: u64, replaced: Option<u64>) {
        if let Some(h) = &mut self.held {
            if let Some(old) = replaced {
                h.waiting.remove(&old);
            }
            h.waiting.insert(seq);
            h.queue.push_back(Slot::Place(seq));
        }
        self.flush();
    }

    /// The final stage came of the request whose place `seq` took: the place is given up (the
    /// request goes out now).
    pub(crate) fn arrived(&mut self, seq: u64) {
        if let Some(h) = &mut self.held {
            h.waiting.remove(&seq);
        }
        self.flush();
    }

    /// The items of the request whose place `seq` took, replayed at the end from that stage: at
    /// its place if it still holds it, else now.
    pub(crate) fn fill(&mut self, seq: u64, items: Vec<InputItem>) {
        let Some(h) = &mut self.held else {
            return items.into_iter().for_each(|i| (self.sink)(i));
        };
        if !h.waiting.remove(&seq) {
            return items.into_iter().for_each(|i| self.push(i));
        }
        let at = (h.queue.iter()).position(|s| matches!(s, Slot::Place(s) if *s == seq));
        match at {
            Some(at) => {
                h.items += items.len();
                h.queue
                    .splice_at(at, items.into_iter().map(Slot::Item).collect());
            }
            None => items.into_iter().for_each(|i| self.push(i)),
        }
        self.flush();
    }

    /// The end: sends every item held (no request waits any more).
    pub(crate) fn finish(&mut self) {
        if let Some(h) = &mut self.held {
            h.waiting.clear();
        }
        self.flush();
    }

    /// Sends the items no waiting request stands before.
    fn flush(&mut self) {
        let Some(h) = &mut self.held else { return };
        while let Some(front) = h.queue.front() {
            match front {
                Slot::Place(seq) if h.waiting.contains(seq) => return,
                Slot::Place(_) => {}
                Slot::Item(_) => h.items -= 1,
            }
            if let Some(Slot::Item(item)) = h.queue.pop_front() {
                (self.sink)(item);
            }
        }
    }

    /// Gives up the oldest places while more than [`MAX_HELD`] items wait behind them.
    fn bound(&mut self) {
        while let Some(h) = &mut self.held
            && h.items > MAX_HELD
        {
            if let Some(Slot::Place(seq)) = h.queue.front() {
                let seq = *seq;
                h.waiting.remove(&seq);
            }
            self.flush();
        }
    }
}

/// Replaces the slot at `at` by `with`.
trait SpliceAt<T> {
    fn splice_at(&mut self, at: usize, with: Vec<T>);
}

impl<T> SpliceAt<T> for VecDeque<T> {
    fn splice_at(&mut self, at: usize, with: Vec<T>) {
        let mut tail = self.split_off(at);
        tail.pop_front();
        self.extend(with);
        self.append(&mut tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{IndexUnit, InputProblem, SourceRef};

    /// An item read at `index`.
    fn item(index: usize) -> InputItem {
        InputItem::Invalid(InputProblem {
            source: SourceRef {
                file: "f".into(),
                index,
                unit: IndexUnit::Line,
                audit_id: None,
                line: None,
            },
            field: String::new(),
            message: String::new(),
        })
    }

    fn index(item: &InputItem) -> usize {
        match item {
            InputItem::Invalid(p) => p.source.index,
            _ => unreachable!("only invalid items here"),
        }
    }

    #[test]
    fn items_wait_behind_a_request_until_its_final_stage_or_its_replay_at_the_end() {
        let mut out_items = Vec::new();
        let mut sink = |i: InputItem| out_items.push(index(&i));
        let mut held = Held::default();
        let mut out = Out::ordered(&mut sink, &mut held);
        out.push(item(1));
        out.wait(1, None); // line 2: a's first stage
        out.push(item(3));
        out.wait(2, None); // line 4: b's first stage, never completed
        out.push(item(5));
        out.wait(3, Some(1)); // line 6: a's next stage takes its place there
        out.push(item(7));
        out.arrived(3); // line 8: a's final stage: a goes out here
        out.push(item(8));
        out.fill(2, vec![item(4)]);
        out.finish();
        assert_eq!(out_items, [1, 3, 4, 5, 7, 8]);
    }

    #[test]
    fn a_request_waiting_too_long_gives_up_its_place() {
        let out_items = std::cell::RefCell::new(Vec::new());
        let mut sink = |i: InputItem| out_items.borrow_mut().push(index(&i));
        let mut held = Held::default();
        let mut out = Out::ordered(&mut sink, &mut held);
        out.wait(1, None);
        for i in 2..=MAX_HELD + 1 {
            out.push(item(i));
        }
        assert!(
            out_items.borrow().is_empty(),
            "held behind the open request"
        );
        // One more, and they all go; the request, if it never completes, at the end.
        out.push(item(MAX_HELD + 2));
        assert_eq!(out_items.borrow().len(), MAX_HELD + 1);
        out.fill(1, vec![item(1)]);
        out.finish();
        let mut expected: Vec<usize> = (2..=MAX_HELD + 2).collect();
        expected.push(1);
        assert_eq!(*out_items.borrow(), expected);
    }
}
