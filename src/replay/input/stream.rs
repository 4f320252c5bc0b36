//! Splitting a stream into documents without reading it whole: JSON values (one after another, the
//! elements of a top-level array, or the `items` of a top-level list object one at a time) and
//! YAML documents (`---`-separated). A document that is not well-formed is reported and the
//! splitter resynchronises on the next line that starts a document, so one bad document never
//! hides the others.

use std::io::{self, BufRead};

/// Nesting deeper than this is refused (the full parser refuses it anyway).
const MAX_DEPTH: usize = 512;

/// Bytes of a reader, with the line and column of the next byte.
struct ByteSource<'r> {
    inner: &'r mut dyn BufRead,
    chunk: Vec<u8>,
    pos: usize,
    line: usize,
    /// 1-based, in bytes.
    col: usize,
    /// The last byte taken ended a line (or nothing was taken yet).
    at_line_start: bool,
}

impl<'r> ByteSource<'r> {
    fn new(inner: &'r mut dyn BufRead, prefix: Vec<u8>, line: usize) -> Self {
        ByteSource {
            inner,
            chunk: prefix,
            pos: 0,
            line,
            col: 1,
            at_line_start: true,
        }
    }

    fn peek(&mut self) -> io::Result<Option<u8>> {
        if self.pos == self.chunk.len() {
            self.chunk.clear();
            self.pos = 0;
            loop {
                match self.inner.fill_buf() {
                    Ok(b) => {
                        self.chunk.extend_from_slice(b);
                        let n = b.len();
                        self.inner.consume(n);
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(self.chunk.get(self.pos).copied())
    }

    fn bump(&mut self) -> io::Result<Option<u8>> {
        let b = self.peek()?;
        if let Some(c) = b {
            self.pos += 1;
            self.at_line_start = c == b'\n';
            if self.at_line_start {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += 1;
            }
        }
        Ok(b)
    }

    fn skip_ws(&mut self) -> io::Result<Option<u8>> {
        loop {
            match self.peek()? {
                Some(b' ' | b'\t' | b'\r' | b'\n') => {
                    self.bump()?;
                }
                other => return Ok(other),
            }
        }
    }

    /// Skips to the next line that starts with `{` or `[` (or the end); stays put when already
    /// at the start of such a line.
    fn resync(&mut self) -> io::Result<()> {
        if self.at_line_start && matches!(self.peek()?, Some(b'{' | b'[')) {
            return Ok(());
        }
        while let Some(b) = self.bump()? {
            if b == b'\n' && matches!(self.peek()?, Some(b'{' | b'[')) {
                break;
            }
        }
        Ok(())
    }
}

/// Where the bytes of a compacted document were in the input: the captured text drops the
/// whitespace between tokens, so a parser's offsets in it are not the input's lines and columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Positions(Vec<Gap>);

/// From offset `at` of the captured text on, bytes follow one another from `line`, `col` of the
/// input (up to the next gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gap {
    at: usize,
    line: usize,
    col: usize,
}

impl Positions {
    /// The input's 1-based line and column of the byte at 0-based `offset` of the captured text.
    pub(crate) fn locate(&self, offset: usize) -> Option<(usize, usize)> {
        let i = self.0.partition_point(|g| g.at <= offset).checked_sub(1)?;
        let g = self.0[i];
        Some((g.line, g.col + (offset - g.at)))
    }

    /// A text taken whole from the start of 1-based `line` of the input.
    pub(crate) fn line(line: usize) -> Self {
        Positions(vec![Gap {
            at: 0,
            line,
            col: 1,
        }])
    }

    /// Notes that the next byte of `src` goes to offset `at` of the captured text.
    fn mark(&mut self, src: &ByteSource<'_>, at: usize) {
        let gap = Gap {
            at,
            line: src.line,
            col: src.col,
        };
        match self.0.last_mut() {
            Some(last) if last.at == at => *last = gap,
            _ => self.0.push(gap),
        }
    }

    /// [`ByteSource::skip_ws`], noting where the next byte is when whitespace was skipped.
    fn skip(&mut self, src: &mut ByteSource<'_>, at: usize) -> io::Result<Option<u8>> {
        let before = (src.line, src.col);
        let b = src.skip_ws()?;
        if (src.line, src.col) != before {
            self.mark(src, at);
        }
        Ok(b)
    }
}

/// A syntax problem found while splitting (the line it was found on is in the message).
struct Syntax(String);

type Step<T> = Result<Result<T, Syntax>, io::Error>;

/// One piece of a JSON stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A top-level value, or an element of a top-level array; `doc` counts them from 1.
    Value {
        /// JSON text.
        text: Vec<u8>,
        /// 1-based document number.
        doc: usize,
        /// Where its bytes were in the input.
        positions: Positions,
    },
    /// An element of the `items` array of top-level object `doc` (a list), 0-based `item`, with
    /// the list's `kind` when it came before `items` (as Go writes it).
    Item {
        /// JSON text.
        text: Vec<u8>,
        /// 1-based document number of the list.
        doc: usize,
        /// 0-based index in `items`.
        item: usize,
        /// The list's `kind`, if already seen.
        list_kind: Option<String>,
        /// Where its bytes were in the input.
        positions: Positions,
    },
    /// Text that is not JSON, in document `doc`.
    Invalid {
        /// 1-based document number.
        doc: usize,
        /// What is wrong, and on which line.
        message: String,
    },
}

enum State {
    Top,
    Array {
        first: bool,
    },
    Object {
        doc: usize,
        text: Vec<u8>,
        first: bool,
        kind: Option<String>,
        items: Option<usize>,
        had_items: bool,
        positions: Positions,
    },
}

/// Splits a stream of JSON text into [`Piece`]s.
pub(crate) struct JsonDocs<'r> {
    src: ByteSource<'r>,
    state: State,
    doc: usize,
}

impl<'r> JsonDocs<'r> {
    /// `prefix` holds bytes already taken from `inner`; `line` is the line number of its first
    /// byte.
    pub(crate) fn new(inner: &'r mut dyn BufRead, prefix: Vec<u8>, line: usize) -> Self {
        JsonDocs {
            src: ByteSource::new(inner, prefix, line),
            state: State::Top,
            doc: 0,
        }
    }

    /// The next piece; `Ok(None)` at the end.
    pub(crate) fn next_piece(&mut self) -> io::Result<Option<Piece>> {
        loop {
            let step: Result<(), Syntax> = match &mut self.state {
                State::Top => match self.src.skip_ws()? {
                    None => return Ok(None),
                    Some(b'[') => {
                        self.src.bump()?;
                        self.state = State::Array { first: true };
                        continue;
                    }
                    Some(b'{') => {
                        let mut positions = Positions::default();
                        positions.mark(&self.src, 0);
                        self.src.bump()?;
                        self.doc += 1;
                        self.state = State::Object {
                            doc: self.doc,
                            text: vec![b'{'],
                            first: true,
                            kind: None,
                            items: None,
                            had_items: false,
                            positions,
                        };
                        continue;
                    }
                    Some(_) => {
                        self.doc += 1;
                        let message =
                            format!("line {}: expected a JSON object or array", self.src.line);
                        self.src.resync()?;
                        return Ok(Some(Piece::Invalid {
                            doc: self.doc,
                            message,
                        }));
                    }
                },
                State::Array { first } => {
                    let first_elem = *first;
                    match self.array_element(first_elem)? {
                        Ok(None) => {
                            self.state = State::Top;
                            continue;
                        }
                        Ok(Some((text, positions))) => {
                            self.state = State::Array { first: false };
                            return Ok(Some(Piece::Value {
                                text,
                                doc: self.doc,
                                positions,
                            }));
                        }
                        Err(e) => Err(e),
                    }
                }
                State::Object { .. } => match self.object_step()? {
                    Ok(Some(p)) => return Ok(Some(p)),
                    Ok(None) => continue,
                    Err(e) => Err(e),
                },
            };
            if let Err(Syntax(message)) = step {
                let doc = match &self.state {
                    State::Object { doc, .. } => *doc,
                    _ => self.doc,
                };
                self.state = State::Top;
                self.src.resync()?;
                return Ok(Some(Piece::Invalid { doc, message }));
            }
        }
    }

    /// The next element of a top-level array, `None` at its end.
    fn array_element(&mut self, first: bool) -> Step<Option<(Vec<u8>, Positions)>> {
        let mut b = self.src.skip_ws()?;
        if b == Some(b']') {
            self.src.bump()?;
            return Ok(Ok(None));
        }
        if !first {
            if b != Some(b',') {
                return Ok(Err(self.expected("',' or ']'")));
            }
            self.src.bump()?;
            b = self.src.skip_ws()?;
        }
        if b.is_none() {
            return Ok(Err(self.expected("an array element")));
        }
        self.doc += 1;
        let mut text = Vec::new();
        let mut positions = Positions::default();
        positions.mark(&self.src, 0);
        let captured = capture(&mut self.src, &mut text, 0, &mut positions, 0)?;
        Ok(captured.map(|()| Some((text, positions))))
    }

    /// One step inside a top-level object: a member, an item of its `items`, or its end.
    fn object_step(&mut self) -> Step<Option<Piece>> {
        let State::Object {
            doc,
            text,
            first,
            kind,
            items,
            had_items,
            positions,
        } = &mut self.state
        else {
            return Ok(Ok(None));
        };
        let src = &mut self.src;
        if let Some(n) = items {
            let mut b = src.skip_ws()?;
            if b == Some(b']') {
                src.bump()?;
                *items = None;
                return Ok(Ok(None));
            }
            if *n > 0 {
                if b != Some(b',') {
                    return Ok(Err(expected(src, "',' or ']'")));
                }
                src.bump()?;
                b = src.skip_ws()?;
            }
            if b.is_none() {
                return Ok(Err(expected(src, "a list item")));
            }
            let mut item = Vec::new();
            let mut at = Positions::default();
            at.mark(src, 0);
            if let Err(e) = capture(src, &mut item, 1, &mut at, 0)? {
                return Ok(Err(e));
            }
            let piece = Piece::Item {
                text: item,
                doc: *doc,
                item: *n,
                list_kind: kind.clone(),
                positions: at,
            };
            *n += 1;
            return Ok(Ok(Some(piece)));
        }
        let b = positions.skip(src, text.len())?;
        if b == Some(b'}') {
            src.bump()?;
            let (doc, had) = (*doc, *had_items);
            text.push(b'}');
            let text = std::mem::take(text);
            let positions = std::mem::take(positions);
            self.state = State::Top;
            // A list's items were handed out one by one; the rest of it is not a document.
            return Ok(Ok((!had).then_some(Piece::Value {
                text,
                doc,
                positions,
            })));
        }
        let key_at = text.len() + usize::from(!*first);
        if !*first {
            if b != Some(b',') {
                return Ok(Err(expected(src, "',' or '}'")));
            }
            src.bump()?;
            positions.skip(src, key_at)?;
        }
        let mut key = Vec::new();
        if src.peek()? != Some(b'"') {
            return Ok(Err(expected(src, "a member name")));
        }
        positions.mark(src, key_at);
        if let Err(e) = capture(src, &mut key, 1, positions, key_at)? {
            return Ok(Err(e));
        }
        if positions.skip(src, key_at + key.len())? != Some(b':') {
            return Ok(Err(expected(src, "':'")));
        }
        src.bump()?;
        let value_at = key_at + key.len() + 1;
        let next = positions.skip(src, value_at)?;
        if key == b"\"items\"" && next == Some(b'[') {
            src.bump()?;
            *items = Some(0);
            *had_items = true;
            *first = false;
            return Ok(Ok(None));
        }
        let mut value = Vec::new();
        positions.mark(src, value_at);
        if let Err(e) = capture(src, &mut value, 1, positions, value_at)? {
            return Ok(Err(e));
        }
        if key == b"\"kind\"" {
            *kind = crate::json::from_slice::<String>(&value).ok();
        }
        if !*first {
            text.push(b',');
        }
        text.extend_from_slice(&key);
        text.push(b':');
        text.extend_from_slice(&value);
        *first = false;
        Ok(Ok(None))
    }

    fn expected(&mut self, what: &str) -> Syntax {
        expected(&mut self.src, what)
    }
}

fn expected(src: &mut ByteSource<'_>, what: &str) -> Syntax {
    let found = match src.peek() {
        Ok(Some(b)) if b.is_ascii_graphic() => format!("{:?}", b as char),
        Ok(Some(_)) => "a control or non-ASCII byte".to_string(),
        _ => "the end of the input".to_string(),
    };
    Syntax(format!("line {}: expected {what}, found {found}", src.line))
}

/// Copies one JSON value from `src` into `out` without the whitespace between its tokens,
/// checking its grammar (loosely for numbers and literals, which the full parser checks later);
/// `out` starts at offset `base` of the document, whose `positions` it notes.
fn capture(
    src: &mut ByteSource<'_>,
    out: &mut Vec<u8>,
    depth: usize,
    positions: &mut Positions,
    base: usize,
) -> io::Result<Result<(), Syntax>> {
    if depth > MAX_DEPTH {
        let line = src.line;
        return Ok(Err(Syntax(format!(
            "line {line}: nested deeper than {MAX_DEPTH} levels"
        ))));
    }
    match positions.skip(src, base + out.len())? {
        Some(b'"') => capture_string(src, out),
        Some(open @ (b'{' | b'[')) => {
            let close = if open == b'{' { b'}' } else { b']' };
            src.bump()?;
            out.push(open);
            if positions.skip(src, base + out.len())? == Some(close) {
                src.bump()?;
                out.push(close);
                return Ok(Ok(()));
            }
            loop {
                if open == b'{' {
                    if positions.skip(src, base + out.len())? != Some(b'"') {
                        return Ok(Err(expected(src, "a member name")));
                    }
                    if let Err(e) = capture_string(src, out)? {
                        return Ok(Err(e));
                    }
                    if positions.skip(src, base + out.len())? != Some(b':') {
                        return Ok(Err(expected(src, "':'")));
                    }
                    src.bump()?;
                    out.push(b':');
                }
                if let Err(e) = capture(src, out, depth + 1, positions, base)? {
                    return Ok(Err(e));
                }
                match positions.skip(src, base + out.len())? {
                    Some(b',') => {
                        src.bump()?;
                        out.push(b',');
                    }
                    Some(c) if c == close => {
                        src.bump()?;
                        out.push(close);
                        return Ok(Ok(()));
                    }
                    _ => {
                        let what = if open == b'{' {
                            "',' or '}'"
                        } else {
                            "',' or ']'"
                        };
                        return Ok(Err(expected(src, what)));
                    }
                }
            }
        }
        Some(b) if b == b'-' || b.is_ascii_alphanumeric() => {
            while let Some(c) = src.peek()? {
                if !(c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.')) {
                    break;
                }
                out.push(c);
                src.bump()?;
            }
            Ok(Ok(()))
        }
        _ => Ok(Err(expected(src, "a value"))),
    }
}

/// Copies a string (the opening quote is next); a raw line break inside is an error, which is
/// how a truncated line is noticed before it swallows the next one.
fn capture_string(src: &mut ByteSource<'_>, out: &mut Vec<u8>) -> io::Result<Result<(), Syntax>> {
    src.bump()?;
    out.push(b'"');
    loop {
        match src.peek()? {
            None => {
                return Ok(Err(Syntax(format!(
                    "line {}: unterminated string",
                    src.line
                ))));
            }
            Some(b'\n' | b'\r') => {
                return Ok(Err(Syntax(format!(
                    "line {}: line break inside a string",
                    src.line
                ))));
            }
            Some(b'\\') => {
                src.bump()?;
                out.push(b'\\');
                match src.peek()? {
                    Some(c) if c != b'\n' => {
                        src.bump()?;
                        out.push(c);
                    }
                    _ => {
                        return Ok(Err(Syntax(format!(
                            "line {}: unterminated string",
                            src.line
                        ))));
                    }
                }
            }
            Some(b'"') => {
                src.bump()?;
                out.push(b'"');
                return Ok(Ok(()));
            }
            Some(c) => {
                src.bump()?;
                out.push(c);
            }
        }
    }
}

/// One YAML document of a stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct YamlDoc {
    /// 1-based document number.
    pub doc: usize,
    /// Its text (a `---` marker with content after it is blanked, so columns stay right).
    pub text: String,
    /// The line of the input its text starts on, so that a line in the text is placed in the
    /// input.
    pub first_line: usize,
}

/// Splits a YAML stream on `---` (and `...`) markers, line by line.
pub(crate) struct YamlDocs<'r> {
    inner: &'r mut dyn BufRead,
    line: Vec<u8>,
    text: String,
    doc: usize,
    seen_content: bool,
    done: bool,
    /// The input's line read last, and the one the text gathered starts on.
    line_no: usize,
    text_start: usize,
}

impl<'r> YamlDocs<'r> {
    /// Reads from `inner`, whose first line is line `line` of the input.
    pub(crate) fn new(inner: &'r mut dyn BufRead, line: usize) -> Self {
        YamlDocs {
            inner,
            line: Vec::new(),
            text: String::new(),
            doc: 1,
            seen_content: false,
            done: false,
            line_no: line.saturating_sub(1),
            text_start: line,
        }
    }

    /// The next document with content (empty ones are counted, not returned).
    pub(crate) fn next_doc(&mut self) -> io::Result<Option<YamlDoc>> {
        while !self.done {
            self.line.clear();
            if self.inner.read_until(b'\n', &mut self.line)? == 0 {
                self.done = true;
                if let Some(d) = self.take() {
                    return Ok(Some(d));
                }
                break;
            }
            self.line_no += 1;
            let line = String::from_utf8_lossy(&self.line).into_owned();
            let bare = line.trim_end_matches(['\n', '\r']);
            let start = bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t");
            let end = bare == "..." || bare.starts_with("... ");
            if start || end {
                let finished = self.take();
                if start {
                    if self.seen_content {
                        self.doc += 1;
                    }
                    self.seen_content = true;
                    self.text_start = self.line_no;
                    self.text.push_str("   ");
                    self.text.push_str(&line[3..]);
                }
                if finished.is_some() {
                    return Ok(finished);
                }
                continue;
            }
            let meaningful = !bare.trim().is_empty() && !bare.trim_start().starts_with('#');
            self.seen_content |= meaningful;
            if self.text.is_empty() {
                self.text_start = self.line_no;
            }
            self.text.push_str(&line);
        }
        Ok(None)
    }

    /// The document gathered so far, if it has content.
    fn take(&mut self) -> Option<YamlDoc> {
        let text = std::mem::take(&mut self.text);
        let has_content = text
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        has_content.then_some(YamlDoc {
            doc: self.doc,
            text,
            first_line: self.text_start,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<Piece> {
        let mut input = text.as_bytes();
        let mut docs = JsonDocs::new(&mut input, Vec::new(), 1);
        let mut out = Vec::new();
        while let Some(mut p) = docs.next_piece().unwrap() {
            if let Piece::Value { positions, .. } | Piece::Item { positions, .. } = &mut p {
                *positions = Positions::default();
            }
            out.push(p);
        }
        out
    }

    fn value(text: &str, doc: usize) -> Piece {
        Piece::Value {
            text: text.as_bytes().to_vec(),
            doc,
            positions: Positions::default(),
        }
    }

    #[test]
    fn values_arrays_and_lists() {
        let got = pieces("{\n \"a\": [1, {\"b\": \"}\"}]\n}\n[ {\"c\":1},\n {\"d\":2} ]\n");
        assert_eq!(
            got,
            [
                value(r#"{"a":[1,{"b":"}"}]}"#, 1),
                value(r#"{"c":1}"#, 2),
                value(r#"{"d":2}"#, 3)
            ]
        );
        let got = pieces(r#"{"kind":"EventList","items":[{"x":1},{"y":2}],"metadata":{}}"#);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1],
            Piece::Item {
                text: br#"{"y":2}"#.to_vec(),
                doc: 1,
                item: 1,
                list_kind: Some("EventList".into()),
                positions: Positions::default(),
            }
        );
    }

    #[test]
    fn positions_in_compacted_documents_are_the_inputs() {
        let text = "\n{\n  \"a\": [1,\n    {\"b\" :  \"c\"}],\n  \"d\": 01x\n}\n";
        let mut input = text.as_bytes();
        let mut docs = JsonDocs::new(&mut input, Vec::new(), 1);
        let Some(Piece::Value {
            text: compact,
            positions,
            ..
        }) = docs.next_piece().unwrap()
        else {
            panic!("a value")
        };
        assert_eq!(compact, br#"{"a":[1,{"b":"c"}],"d":01x}"#);
        let at = |needle: &str| {
            let i = compact
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap();
            positions.locate(i)
        };
        assert_eq!(at("{\"a\""), Some((2, 1)));
        assert_eq!(at("\"a\""), Some((3, 3)));
        assert_eq!(at("\"c\""), Some((4, 13)));
        assert_eq!(at("01x"), Some((5, 8)));
    }

    #[test]
    fn a_broken_document_does_not_hide_the_next() {
        let got = pieces("{\n \"a\": \"trunc\n{\"b\": 1}\n");
        assert!(
            matches!(&got[0], Piece::Invalid { doc: 1, message } if message.contains("line 2")),
            "{got:?}"
        );
        assert_eq!(got[1], value(r#"{"b":1}"#, 2));
        let got = pieces("{\"a\": 1\n{\"b\": 2}\n");
        assert!(matches!(&got[0], Piece::Invalid { doc: 1, .. }));
        assert_eq!(got[1], value(r#"{"b":2}"#, 2));
        assert!(matches!(pieces("x")[0], Piece::Invalid { doc: 1, .. }));
    }

    #[test]
    fn yaml_documents() {
        let text = "# c\n---\na: 1\n---\n---\nb: 2\n--- {c: 3}\n...\n";
        let mut input = text.as_bytes();
        let mut docs = YamlDocs::new(&mut input, 1);
        let mut got = Vec::new();
        while let Some(d) = docs.next_doc().unwrap() {
            got.push((d.doc, d.text));
        }
        assert_eq!(
            got,
            [
                (1, "   \na: 1\n".to_string()),
                (3, "   \nb: 2\n".to_string()),
                (4, "    {c: 3}\n".to_string())
            ]
        );
    }
}
