//! YAML as kubectl reads it: sigs.k8s.io/yaml over go-yaml, which is more lenient than the YAML
//! specification in ways manifests rely on, with limits sized for real files.
//!
//! * A quoted scalar may continue on lines indented no deeper than its key, as go-yaml v2 writes
//!   long strings (`description: 'a long text` then `continues here'` at the key's column). The
//!   specification wants continuation lines indented further; their leading spaces are not part
//!   of the value, so such lines are indented one column further and the document read again.
//! * Duplicate keys in a mapping: the last one wins, as sigs.k8s.io/yaml's non-strict decoding
//!   (what `kubectl apply` uses) leaves it.
//! * Limits: alias expansion stays bounded (the protection against alias bombs), but the node
//!   and event budgets grow with the text, so a large real file (a `List` of thousands of Pods)
//!   is read whole: without aliases a document cannot hold more nodes than it has bytes.
//!   Nesting is bounded at [`MAX_DEPTH`] levels, go-yaml's limit (`max_flow_level` and
//!   `max_indents`), refused beyond it with its words.
//!
//! Errors are the parser's first line, in YAML's terms, never in the library's option names.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_saphyr::{Budget, DuplicateKeyPolicy, Options};

/// Deepest nesting of sequences and mappings read: go-yaml's limit, which is also how deep JSON
/// inputs may nest ([`crate::json::MAX_DEPTH`]).
pub const MAX_DEPTH: usize = 10_000;

/// Stack a parse may use per level of nesting: the parser and the deserializer recurse per
/// level, deeply in unoptimized builds (a flow mapping of [`MAX_DEPTH`] levels needed between 200
/// and 256 MiB there, ~25 KiB a level), with room.
const STACK_PER_LEVEL: usize = 32 << 10;

/// The stack a parse of `len` bytes runs on: a level takes at least a byte, so short texts need
/// little; a thread with less left gets a stack of this size for the parse (address space
/// reserved, touched only as deep as the text goes).
fn parse_stack(len: usize) -> usize {
    (len.min(MAX_DEPTH) + 128) * STACK_PER_LEVEL
}

/// At most this many times is a document read again after re-indenting a quoted scalar.
const MAX_RETRIES: usize = 1000;

/// A YAML document that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", location(*line, *column))]
pub struct Error {
    /// 1-based line in the text given, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong, in YAML's terms.
    pub message: String,
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!("line {l} column {c}: "),
        (Some(l), None) => format!("line {l}: "),
        _ => String::new(),
    }
}

/// The options kubectl's reading corresponds to, for `len` bytes of text.
fn options(len: usize) -> Options {
    let mut budget = Budget::default();
    budget.max_nodes = len.saturating_add(1024).max(budget.max_nodes);
    budget.max_events = (len.saturating_mul(3).saturating_add(1024)).max(budget.max_events);
    budget.max_depth = MAX_DEPTH;
    // One more than the depth budget, so that the budget (and its message) refuses first.
    budget.flow_nesting_limit = MAX_DEPTH + 1;
    budget.max_documents = usize::MAX;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.duplicate_keys = DuplicateKeyPolicy::LastWins;
    options
}

/// Reads one YAML document (or JSON, which is YAML).
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    read(text, |t| {
        serde_saphyr::from_str_with_options(t, options(t.len()))
    })
}

/// Reads every document of a YAML stream.
pub fn from_multiple<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, Error> {
    read(text, |t| {
        serde_saphyr::from_multiple_with_options(t, options(t.len()))
    })
}

/// Reads UTF-8 bytes as [`from_str`].
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error {
        line: None,
        column: None,
        message: format!("not UTF-8 text: {e}"),
    })?;
    from_str(text)
}

fn read<T>(text: &str, parse: impl Fn(&str) -> Result<T, serde_saphyr::Error>) -> Result<T, Error> {
    let mut text = Cow::Borrowed(text);
    let mut retries = 0;
    loop {
        let stack = parse_stack(text.len());
        let e = match stacker::maybe_grow(stack, stack, || parse(&text)) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let error = convert(&e);
        match (error.line, error.message.as_str()) {
            (Some(line), QUOTED_INDENT) if retries < MAX_RETRIES => {
                retries += 1;
                if !reindent_quoted(text.to_mut(), line) {
                    return Err(error);
                }
            }
            _ => return Err(error),
        }
    }
}

/// The parser's message for a quoted scalar's continuation line that is not indented further
/// than its block.
const QUOTED_INDENT: &str = "invalid indentation in multiline quoted scalar";

/// Indents by one column the lines of a quoted scalar from 1-based `line` (where the parser found
/// one not indented enough) to the first that holds a quote, which may close it: all of them are
/// inside the scalar, where leading spaces are not part of the value. False when there is no
/// such line.
fn reindent_quoted(text: &mut String, line: usize) -> bool {
    let Some(mut start) = line_start(text, line) else {
        return false;
    };
    loop {
        text.insert(start, ' ');
        let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        if text[start..end].contains(['\'', '"']) || end == text.len() {
            return true;
        }
        start = end + 1;
    }
}

/// The byte offset where 1-based `line` starts.
fn line_start(text: &str, line: usize) -> Option<usize> {
    if line <= 1 {
        return Some(0);
    }
    text.match_indices('\n').nth(line - 2).map(|(i, _)| i + 1)
}

/// The first line of the parser's message, without its `error: line L column C: ` prefix, and
/// budget breaches said in words.
fn convert(e: &serde_saphyr::Error) -> Error {
    let (line, column) = e
        .location()
        .map(|l| (Some(l.line() as usize), Some(l.column() as usize)))
        .unwrap_or((None, None));
    let display = e.to_string();
    let first = display.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let first = match first.strip_prefix("line ") {
        Some(rest) => rest.split_once(": ").map_or(first, |(_, m)| m),
        None => first,
    };
    let message = match first.strip_prefix("budget breached: ") {
        Some(breach) => breach_message(breach),
        None => first.to_string(),
    };
    Error {
        line,
        column,
        message,
    }
}

/// A budget breach (`Nodes { nodes: 250001 }` as the library spells it) in words.
fn breach_message(breach: &str) -> String {
    let what = breach.split([' ', '{']).next().unwrap_or_default();
    match what {
        "Depth" => format!("exceeded max depth of {MAX_DEPTH}"),
        "Aliases" | "Anchors" | "Nodes" | "Events" | "AliasAnchorRatio" => {
            "more nodes than the text holds: too many aliases expanded (an alias bomb?)".into()
        }
        _ => format!("too large or too complex ({breach})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn go_yaml_continuations_duplicates_and_bombs() {
        let text = "metadata:\n  annotations:\n    description: 'a long text that\n    continues here'\n    other: \"x\n    y\"\n";
        let v: Value = from_str(text).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"annotations": {"description": "a long text that continues here", "other": "x y"}}})
        );
        let v: Value = from_str("a: 1\na: 2\n").unwrap();
        assert_eq!(v, json!({"a": 2}));
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
        let e = from_str::<Value>(bomb).unwrap_err();
        assert!(e.message.contains("alias bomb"), "{e}");
        let e = from_str::<Value>("a: 1\nb: [1, 2\n").unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(4)), "{e}");
        assert_eq!(e.to_string(), "line 2 column 4: unclosed bracket '['");
    }

    fn flow(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn nesting_as_deep_as_go_yaml_reads_and_its_error_beyond() {
        // As the command runs: values this deep are walked on a deep stack.
        crate::json::with_stack(nesting_as_deep_as_go_yaml);
    }

    fn nesting_as_deep_as_go_yaml() {
        let v: Value = from_str(&flow(MAX_DEPTH)).unwrap();
        let mut depth = 0;
        let mut at = &v;
        while let Some(inner) = at.as_array().and_then(|a| a.first()) {
            depth += 1;
            at = inner;
        }
        assert_eq!(depth + 1, MAX_DEPTH);
        let mapping = format!(
            "{}1{}",
            "{a: ".repeat(MAX_DEPTH - 1),
            "}".repeat(MAX_DEPTH - 1)
        );
        let v: Value = from_str(&mapping).unwrap();
        assert_eq!(v.pointer(&"/a".repeat(MAX_DEPTH - 1)), Some(&json!(1)));
        let e = from_str::<Value>(&flow(MAX_DEPTH + 1)).unwrap_err();
        assert_eq!(e.message, "exceeded max depth of 10000", "{e}");
        assert_eq!(e.line, Some(1), "{e}");
        let block: String = (0..600)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        let v: Value = from_multiple::<Value>(&format!("{block}{}leaf: 1\n", " ".repeat(600)))
            .unwrap()
            .remove(0);
        assert_eq!(v.pointer("/k0/k1/k2/k3").map(Value::is_object), Some(true));
    }
}
