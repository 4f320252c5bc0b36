//! Mapping a field path (`webhooks[1].namespaceSelector.matchLabels.x`) to its line and column in
//! YAML or JSON text, block or flow style, one document of a multi-document stream at a time.
//!
//! The text is read as YAML events with source positions (JSON is YAML flow style). A path that
//! goes further than the text (a required field that is missing) points at the deepest part that
//! exists, and a document that cannot be read points at its first line.

use std::collections::HashMap;

use granit_parser::{Event, Parser, Span};

/// A place in the edited text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TextPosition {
    /// 1-based line.
    pub line: usize,
    /// 1-based column in characters, when known (None: the document's first line is all that is
    /// known).
    pub column: Option<usize>,
}

/// One node of a document, with where it starts.
#[derive(Debug)]
struct Node {
    at: TextPosition,
    value: NodeValue,
}

#[derive(Debug)]
enum NodeValue {
    Scalar(String),
    Map(Vec<Entry>),
    Seq(Vec<Node>),
    /// An alias or anything else without children to walk.
    Opaque,
}

/// A mapping entry: the key (and where it is written) and its value.
#[derive(Debug)]
struct Entry {
    key: String,
    at: TextPosition,
    value: Node,
}

/// Whether a line starts a new YAML document, by the same rule the configuration loader splits
/// documents with.
fn is_marker(line: &str) -> bool {
    let t = line.trim_end_matches(['\n', '\r']);
    t == "---" || t.starts_with("--- ") || t.starts_with("---\t")
}

/// Locates field paths in one text; each document is read once.
#[derive(Debug)]
pub struct Locator<'a> {
    text: &'a str,
    /// Parsed documents by their 1-based first line (None: unreadable).
    documents: HashMap<usize, Option<Node>>,
}

impl<'a> Locator<'a> {
    /// A locator over the whole edited text.
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            documents: HashMap::new(),
        }
    }

    /// Where `path` is written in the document starting at 1-based line `document_line` (as
    /// [`crate::config::Source::line`] gives it); `item` selects an element when the document is
    /// a `*List` (the first one when None) and is ignored otherwise. An empty path is the document (or List item) itself. When `value` is given and
    /// the path ends at a mapping or list, the entry whose key or value equals it is preferred
    /// (validation reports `matchLabels` problems on the selector with the offending key in the
    /// message).
    pub fn locate(
        &mut self,
        document_line: usize,
        item: Option<usize>,
        path: &str,
        value: Option<&str>,
    ) -> TextPosition {
        let fallback = TextPosition {
            line: document_line.max(1),
            column: None,
        };
        let text = self.text;
        let root = self
            .documents
            .entry(document_line)
            .or_insert_with(|| parse_document(text, document_line));
        let Some(root) = root.as_ref() else {
            return fallback;
        };
        let start = match (is_list(root), item) {
            (false, _) => root,
            (true, i) => match list_item(root, i.unwrap_or(0)) {
                Some(n) => n,
                None => return root.at,
            },
        };
        let (node, at, _) = walk(start, path);
        value.and_then(|v| child_with(node, v)).unwrap_or(at)
    }

    /// Where the value at `path` starts (for a mapping entry, its value rather than its key), when
    /// the document has it; arguments as for [`Locator::locate`].
    pub fn locate_value(
        &mut self,
        document_line: usize,
        item: Option<usize>,
        path: &str,
    ) -> Option<TextPosition> {
        let text = self.text;
        let root = self
            .documents
            .entry(document_line)
            .or_insert_with(|| parse_document(text, document_line))
            .as_ref()?;
        let start = match (is_list(root), item) {
            (false, _) => root,
            (true, i) => list_item(root, i.unwrap_or(0))?,
        };
        let (node, _, complete) = walk(start, path);
        complete.then_some(node.at)
    }
}

/// Whether a document is a `*List` with `items`, as the loader reads it.
fn is_list(root: &Node) -> bool {
    let NodeValue::Map(entries) = &root.value else {
        return false;
    };
    let kind = entries.iter().find(|e| e.key == "kind");
    let items = entries.iter().find(|e| e.key == "items");
    matches!((kind, items), (Some(k), Some(i))
        if matches!(&k.value.value, NodeValue::Scalar(s) if s.ends_with("List"))
            && matches!(i.value.value, NodeValue::Seq(_)))
}

/// The `i`-th element of a `*List` document's `items`.
fn list_item(root: &Node, i: usize) -> Option<&Node> {
    let NodeValue::Map(entries) = &root.value else {
        return None;
    };
    let items = entries.iter().find(|e| e.key == "items")?;
    match &items.value.value {
        NodeValue::Seq(nodes) => nodes.get(i),
        _ => None,
    }
}

/// Follows a path as far as the document goes: the node reached, where to point (a mapping
/// entry's key, a list element's start), and whether the whole path was found.
fn walk<'n>(start: &'n Node, path: &str) -> (&'n Node, TextPosition, bool) {
    let mut node = start;
    let mut at = start.at;
    let mut rest = path;
    while !rest.is_empty() {
        match &node.value {
            NodeValue::Seq(items) if rest.starts_with('[') => {
                let Some(end) = rest.find(']') else { break };
                let Some(next) = rest[1..end]
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i))
                else {
                    break;
                };
                node = next;
                at = next.at;
                rest = &rest[end + 1..];
            }
            NodeValue::Map(entries) => {
                // Keys may contain dots (label keys): the longest key that ends at a separator.
                let Some(entry) = entries
                    .iter()
                    .filter(|e| {
                        rest.strip_prefix(e.key.as_str())
                            .is_some_and(|r| r.is_empty() || r.starts_with(['.', '[']))
                    })
                    .max_by_key(|e| e.key.len())
                else {
                    break;
                };
                node = &entry.value;
                at = entry.at;
                rest = &rest[entry.key.len()..];
            }
            _ => break,
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    (node, at, rest.is_empty())
}

/// The direct child (mapping key or value, list element) written as `value`.
fn child_with(node: &Node, value: &str) -> Option<TextPosition> {
    let scalar = |n: &Node| matches!(&n.value, NodeValue::Scalar(s) if s == value);
    match &node.value {
        NodeValue::Map(entries) => entries
            .iter()
            .find(|e| e.key == value || scalar(&e.value))
            .map(|e| e.at),
        NodeValue::Seq(items) => items.iter().find(|n| scalar(n)).map(|n| n.at),
        _ => None,
    }
}

/// Reads the document starting at 1-based `line` (up to the next `---` marker).
fn parse_document(text: &str, line: usize) -> Option<Node> {
    let mut offset = 0usize;
    let mut end = text.len();
    let mut start = None;
    for (n, l) in text.split_inclusive('\n').enumerate() {
        if n + 1 == line {
            start = Some(offset);
        } else if n + 1 > line && is_marker(l) {
            end = offset;
            break;
        }
        offset += l.len();
    }
    let chunk = &text[start?..end];
    let mut events = Parser::new_from_str(chunk).filter_map(Result::ok);
    let shift = line - 1;
    loop {
        let (ev, span) = events.next()?;
        match ev {
            Event::StreamEnd | Event::DocumentEnd => return None,
            ev if opens_node(&ev) => return build(ev, span, shift, &mut events),
            _ => {}
        }
    }
}

fn position(span: &Span, shift: usize) -> TextPosition {
    TextPosition {
        line: span.start.line() + shift,
        column: Some(span.start.col() + 1),
    }
}

/// Builds the node an event opens, consuming its children.
fn build<'i>(
    ev: Event<'i>,
    span: Span,
    shift: usize,
    events: &mut impl Iterator<Item = (Event<'i>, Span)>,
) -> Option<Node> {
    let at = position(&span, shift);
    let value = match ev {
        Event::Scalar(s, ..) => NodeValue::Scalar(s.into_owned()),
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                let (ev, span) = events.next()?;
                match ev {
                    Event::SequenceEnd => break,
                    ev if opens_node(&ev) => items.push(build(ev, span, shift, events)?),
                    _ => {}
                }
            }
            NodeValue::Seq(items)
        }
        Event::MappingStart(..) => {
            let mut entries = Vec::new();
            loop {
                let (ev, span) = events.next()?;
                match ev {
                    Event::MappingEnd => break,
                    ev if opens_node(&ev) => {
                        let key = build(ev, span, shift, events)?;
                        let value = next_node(shift, events)?;
                        entries.push(Entry {
                            key: match key.value {
                                NodeValue::Scalar(s) => s,
                                _ => String::new(),
                            },
                            at: key.at,
                            value,
                        });
                    }
                    _ => {}
                }
            }
            NodeValue::Map(entries)
        }
        _ => NodeValue::Opaque,
    };
    Some(Node { at, value })
}

fn opens_node(ev: &Event<'_>) -> bool {
    matches!(
        ev,
        Event::Scalar(..)
            | Event::SequenceStart(..)
            | Event::MappingStart(..)
            | Event::Alias(..)
            | Event::UnresolvedAlias(..)
    )
}

fn next_node<'i>(
    shift: usize,
    events: &mut impl Iterator<Item = (Event<'i>, Span)>,
) -> Option<Node> {
    loop {
        let (ev, span) = events.next()?;
        if opens_node(&ev) {
            return build(ev, span, shift, events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize, column: usize) -> TextPosition {
        TextPosition {
            line,
            column: Some(column),
        }
    }

    #[test]
    fn block_flow_and_dotted_keys() {
        let text = "kind: X\nwebhooks:\n- name: a\n  rules: [{operations: [CREATE, BAD]}]\n  namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: x\n";
        let mut l = Locator::new(text);
        assert_eq!(l.locate(1, None, "webhooks[0].name", None), at(3, 3));
        assert_eq!(
            l.locate(1, None, "webhooks[0].rules[0].operations[1]", None),
            at(4, 33)
        );
        assert_eq!(
            l.locate(
                1,
                None,
                "webhooks[0].namespaceSelector.matchLabels.kubernetes.io/metadata.name",
                None
            ),
            at(7, 7)
        );
        // Missing: the deepest existing part.
        assert_eq!(l.locate(1, None, "webhooks[0].sideEffects", None), at(3, 3));
        assert_eq!(l.locate(1, None, "", None), at(1, 1));
        assert_eq!(
            l.locate(
                1,
                None,
                "webhooks[0].namespaceSelector.matchLabels",
                Some("x")
            ),
            at(7, 7)
        );
    }

    #[test]
    fn second_document_and_list_items() {
        let text =
            "a: 1\n---\nkind: List\nitems:\n- metadata: {name: one}\n- metadata:\n    name: two\n";
        let mut l = Locator::new(text);
        assert_eq!(l.locate(2, Some(1), "metadata.name", None), at(7, 5));
        assert_eq!(l.locate(2, Some(0), "metadata.name", None), at(5, 14));
        assert_eq!(l.locate(9, None, "x", None).column, None);
    }
}
