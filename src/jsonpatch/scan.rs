//! JSON syntax checking that accepts exactly what Go's `encoding/json` scanner accepts (including its
//! 10000-level nesting limit) and reports its error texts, plus one-level splitting of a value into
//! its direct children.
//!
//! The fast path is a hand-written validator; only when it rejects the input is Go's byte-at-a-time
//! state machine replayed to produce the exact message.

/// Go's `maxNestingDepth`.
const MAX_DEPTH: usize = 10_000;

/// A direct child of a container value: the span of the quoted key (empty for array elements) and
/// the span of the value, both as byte offsets into the scanned input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Child {
    pub key: (usize, usize),
    pub val: (usize, usize),
}

#[inline]
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

#[inline]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|&c| is_space(c)) {
        i += 1;
    }
    i
}

/// Checks that `b` is one JSON value with optional surrounding whitespace. On success returns the
/// span of the value and fills `children` with the direct children of a top-level container; on
/// failure returns Go's syntax error text.
pub(crate) fn scan(b: &[u8], children: &mut Vec<Child>) -> Result<(usize, usize), String> {
    children.clear();
    match fast_scan(b, children) {
        Some(span) => Ok(span),
        None => {
            children.clear();
            Err(go_syntax_error(b))
        }
    }
}

/// Splits an already valid value (no surrounding whitespace) into its direct children.
/// Returns `false` if the bytes are not valid after all.
pub(crate) fn split(b: &[u8], children: &mut Vec<Child>) -> bool {
    children.clear();
    fast_scan(b, children).is_some()
}

/// The end (after the closing quote) of the valid string literal starting at `i`.
pub(crate) fn string_end(b: &[u8], i: usize) -> Option<usize> {
    scan_string(b, i)
}

/// Bytes that end a plain run inside a string literal.
static STRING_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

#[inline]
fn scan_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        i += b
            .get(i..)?
            .iter()
            .position(|&c| STRING_SPECIAL[usize::from(c)])?;
        let c = *b.get(i)?;
        match c {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

#[inline]
fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

#[inline]
fn scan_number(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match *b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = skip_digits(b, i + 1),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let j = skip_digits(b, i + 1);
        if j == i + 1 {
            return None;
        }
        i = j;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let j = skip_digits(b, i);
        if j == i {
            return None;
        }
        i = j;
    }
    Some(i)
}

fn fast_scan(b: &[u8], children: &mut Vec<Child>) -> Option<(usize, usize)> {
    let mut i = skip_ws(b, 0);
    let start = i;
    let mut stack: Vec<u8> = Vec::new();
    let mut key = (0, 0);
    let mut val_start = 0;
    'value: loop {
        if stack.len() == 1 {
            val_start = i;
        }
        match *b.get(i)? {
            open @ (b'{' | b'[') => {
                stack.push(open);
                if stack.len() > MAX_DEPTH {
                    return None;
                }
                i = skip_ws(b, i + 1);
                let close = if open == b'{' { b'}' } else { b']' };
                if b.get(i) == Some(&close) {
                    i += 1;
                    stack.pop();
                } else if open == b'{' {
                    if b.get(i) != Some(&b'"') {
                        return None;
                    }
                    let ks = i;
                    i = scan_string(b, i)?;
                    if stack.len() == 1 {
                        key = (ks, i);
                    }
                    i = skip_ws(b, i);
                    if b.get(i) != Some(&b':') {
                        return None;
                    }
                    i = skip_ws(b, i + 1);
                    continue 'value;
                } else {
                    continue 'value;
                }
            }
            b'"' => i = scan_string(b, i)?,
            b'-' | b'0'..=b'9' => i = scan_number(b, i)?,
            c @ (b't' | b'f' | b'n') => {
                let lit: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if b.get(i..i + lit.len())? != lit {
                    return None;
                }
                i += lit.len();
            }
            _ => return None,
        }
        // A value ended at `i`; its container is the top of `stack`.
        loop {
            let end = i;
            if stack.len() == 1 {
                children.push(Child {
                    key,
                    val: (val_start, end),
                });
            }
            i = skip_ws(b, i);
            match stack.last() {
                None => return (i == b.len()).then_some((start, end)),
                Some(b'{') => match *b.get(i)? {
                    b',' => {
                        i = skip_ws(b, i + 1);
                        if b.get(i) != Some(&b'"') {
                            return None;
                        }
                        let ks = i;
                        i = scan_string(b, i)?;
                        if stack.len() == 1 {
                            key = (ks, i);
                        }
                        i = skip_ws(b, i);
                        if b.get(i) != Some(&b':') {
                            return None;
                        }
                        i = skip_ws(b, i + 1);
                        continue 'value;
                    }
                    b'}' => {
                        i += 1;
                        stack.pop();
                    }
                    _ => return None,
                },
                Some(_) => match *b.get(i)? {
                    b',' => {
                        i = skip_ws(b, i + 1);
                        continue 'value;
                    }
                    b']' => {
                        i += 1;
                        stack.pop();
                    }
                    _ => return None,
                },
            }
        }
    }
}

/// Go's `quoteChar`: how the scanner names an offending byte.
pub(crate) fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => {
            let mut s = String::from("'");
            crate::jsonpatch::gostr::push_quoted_rune(&mut s, char::from(c));
            s.push('\'');
            s
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum St {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    Lit(&'static [u8], u8, &'static str),
    Error,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ps {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// Go's `scanner`, used only to name the error once the fast path has rejected the input.
struct GoScanner {
    step: St,
    parse: Vec<Ps>,
    end_top: bool,
    err: Option<String>,
}

impl GoScanner {
    fn error(&mut self, c: u8, context: &str) {
        self.step = St::Error;
        self.err = Some(format!("invalid character {} {context}", quote_char(c)));
    }

    fn push(&mut self, c: u8, ps: Ps) {
        self.parse.push(ps);
        if self.parse.len() > MAX_DEPTH {
            self.error(c, "exceeded max depth");
        }
    }

    fn pop(&mut self) {
        self.parse.pop();
        if self.parse.is_empty() {
            self.step = St::EndTop;
            self.end_top = true;
        } else {
            self.step = St::EndValue;
        }
    }

    fn begin_value(&mut self, c: u8) {
        if is_space(c) {
            return;
        }
        match c {
            b'{' => {
                self.step = St::BeginStringOrEmpty;
                self.push(c, Ps::ObjectKey);
            }
            b'[' => {
                self.step = St::BeginValueOrEmpty;
                self.push(c, Ps::ArrayValue);
            }
            b'"' => self.step = St::InString,
            b'-' => self.step = St::Neg,
            b'0' => self.step = St::Zero,
            b't' => self.step = St::Lit(b"rue", 0, "true"),
            b'f' => self.step = St::Lit(b"alse", 0, "false"),
            b'n' => self.step = St::Lit(b"ull", 0, "null"),
            b'1'..=b'9' => self.step = St::One,
            _ => self.error(c, "looking for beginning of value"),
        }
    }

    fn end_value(&mut self, c: u8) {
        let Some(&ps) = self.parse.last() else {
            self.step = St::EndTop;
            self.end_top = true;
            self.end_top_step(c);
            return;
        };
        if is_space(c) {
            self.step = St::EndValue;
            return;
        }
        match ps {
            Ps::ObjectKey => {
                if c == b':' {
                    if let Some(last) = self.parse.last_mut() {
                        *last = Ps::ObjectValue;
                    }
                    self.step = St::BeginValue;
                } else {
                    self.error(c, "after object key");
                }
            }
            Ps::ObjectValue => match c {
                b',' => {
                    if let Some(last) = self.parse.last_mut() {
                        *last = Ps::ObjectKey;
                    }
                    self.step = St::BeginString;
                }
                b'}' => self.pop(),
                _ => self.error(c, "after object key:value pair"),
            },
            Ps::ArrayValue => match c {
                b',' => self.step = St::BeginValue,
                b']' => self.pop(),
                _ => self.error(c, "after array element"),
            },
        }
    }

    fn end_top_step(&mut self, c: u8) {
        if !is_space(c) {
            self.error(c, "after top-level value");
        }
    }

    fn step(&mut self, c: u8) {
        match self.step {
            St::BeginValueOrEmpty => {
                if is_space(c) {
                } else if c == b']' {
                    self.end_value(c);
                } else {
                    self.begin_value(c);
                }
            }
            St::BeginValue => self.begin_value(c),
            St::BeginStringOrEmpty => {
                if is_space(c) {
                } else if c == b'}' {
                    if let Some(last) = self.parse.last_mut() {
                        *last = Ps::ObjectValue;
                    }
                    self.end_value(c);
                } else {
                    self.begin_string(c);
                }
            }
            St::BeginString => self.begin_string(c),
            St::EndValue => self.end_value(c),
            St::EndTop => self.end_top_step(c),
            St::InString => match c {
                b'"' => self.step = St::EndValue,
                b'\\' => self.step = St::InStringEsc,
                0..=0x1f => self.error(c, "in string literal"),
                _ => {}
            },
            St::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => self.step = St::InString,
                b'u' => self.step = St::InStringEscU(0),
                _ => self.error(c, "in string escape code"),
            },
            St::InStringEscU(n) => {
                if c.is_ascii_hexdigit() {
                    self.step = if n == 3 {
                        St::InString
                    } else {
                        St::InStringEscU(n + 1)
                    };
                } else {
                    self.error(c, r"in \u hexadecimal character escape");
                }
            }
            St::Neg => match c {
                b'0' => self.step = St::Zero,
                b'1'..=b'9' => self.step = St::One,
                _ => self.error(c, "in numeric literal"),
            },
            St::One => {
                if c.is_ascii_digit() {
                } else {
                    self.zero(c);
                }
            }
            St::Zero => self.zero(c),
            St::Dot => {
                if c.is_ascii_digit() {
                    self.step = St::Dot0;
                } else {
                    self.error(c, "after decimal point in numeric literal");
                }
            }
            St::Dot0 => {
                if c.is_ascii_digit() {
                } else if c == b'e' || c == b'E' {
                    self.step = St::E;
                } else {
                    self.end_value(c);
                }
            }
            St::E => {
                if c == b'+' || c == b'-' {
                    self.step = St::ESign;
                } else {
                    self.e_sign(c);
                }
            }
            St::ESign => self.e_sign(c),
            St::E0 => {
                if !c.is_ascii_digit() {
                    self.end_value(c);
                }
            }
            St::Lit(rest, pos, name) => {
                let want = rest.get(usize::from(pos)).copied().unwrap_or(b' ');
                if c == want {
                    self.step = if usize::from(pos) + 1 == rest.len() {
                        St::EndValue
                    } else {
                        St::Lit(rest, pos + 1, name)
                    };
                } else {
                    let ctx = format!("in literal {name} (expecting {})", quote_char(want));
                    self.error(c, &ctx);
                }
            }
            St::Error => {}
        }
    }

    fn begin_string(&mut self, c: u8) {
        if is_space(c) {
            return;
        }
        if c == b'"' {
            self.step = St::InString;
        } else {
            self.error(c, "looking for beginning of object key string");
        }
    }

    fn zero(&mut self, c: u8) {
        match c {
            b'.' => self.step = St::Dot,
            b'e' | b'E' => self.step = St::E,
            _ => self.end_value(c),
        }
    }

    fn e_sign(&mut self, c: u8) {
        if c.is_ascii_digit() {
            self.step = St::E0;
        } else {
            self.error(c, "in exponent of numeric literal");
        }
    }
}

/// Replays Go's `checkValid` over `b` and returns its error text.
pub(crate) fn go_syntax_error(b: &[u8]) -> String {
    let mut s = GoScanner {
        step: St::BeginValue,
        parse: Vec::new(),
        end_top: false,
        err: None,
    };
    for &c in b {
        s.step(c);
        if let Some(e) = s.err.take() {
            return e;
        }
    }
    // Go's `eof`: feed a space, then report whatever is pending.
    if !s.end_top {
        s.step(b' ');
        if !s.end_top {
            return s
                .err
                .take()
                .unwrap_or_else(|| "unexpected end of JSON input".to_owned());
        }
    }
    // Only reachable if the fast path and this state machine disagree.
    "invalid JSON".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        scan(s.as_bytes(), &mut Vec::new()).unwrap_err()
    }

    #[test]
    fn go_error_texts() {
        assert_eq!(err(""), "unexpected end of JSON input");
        assert_eq!(err("  "), "unexpected end of JSON input");
        assert_eq!(err("[{"), "unexpected end of JSON input");
        assert_eq!(
            err(r#"[{"op": "add", "CORRUPTED_KEY":}]"#),
            "invalid character '}' looking for beginning of value"
        );
        assert_eq!(
            err("tru"),
            "invalid character ' ' in literal true (expecting 'e')"
        );
        assert_eq!(err("[1 2]"), "invalid character '2' after array element");
        assert_eq!(err(r#"{"a" 1}"#), "invalid character '1' after object key");
        assert_eq!(
            err(r#"{"a":1 "b"}"#),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(
            err("{1}"),
            "invalid character '1' looking for beginning of object key string"
        );
        assert_eq!(err("01"), "invalid character '1' after top-level value");
        assert_eq!(
            err("1."),
            "invalid character ' ' after decimal point in numeric literal"
        );
        assert_eq!(err("-"), "invalid character ' ' in numeric literal");
        assert_eq!(
            err("1e+"),
            "invalid character ' ' in exponent of numeric literal"
        );
        assert_eq!(
            err("\"\\x\""),
            "invalid character 'x' in string escape code"
        );
        assert_eq!(
            err("\"\\u12g\""),
            "invalid character 'g' in \\u hexadecimal character escape"
        );
        assert_eq!(err("\"a\nb\""), "invalid character '\\n' in string literal");
        assert_eq!(
            err("nul!"),
            "invalid character '!' in literal null (expecting 'l')"
        );
        assert_eq!(
            err("'"),
            r"invalid character '\'' looking for beginning of value"
        );
        assert_eq!(
            err("\u{e9}"),
            "invalid character 'Ã' looking for beginning of value"
        );
        assert_eq!(
            err("\x00"),
            r"invalid character '\x00' looking for beginning of value"
        );
        let deep = "[".repeat(10_001);
        assert_eq!(err(&deep), "invalid character '[' exceeded max depth");
        assert!(
            scan(
                format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).as_bytes(),
                &mut Vec::new()
            )
            .is_ok()
        );
    }

    #[test]
    fn children_spans() {
        let src = br#" {"a" : [1, {"x":2}], "b":"s" , "c":{}} "#;
        let mut ch = Vec::new();
        let (s, e) = scan(src, &mut ch).unwrap();
        assert_eq!(&src[s..e], br#"{"a" : [1, {"x":2}], "b":"s" , "c":{}}"#);
        let got: Vec<(&[u8], &[u8])> = ch
            .iter()
            .map(|c| (&src[c.key.0..c.key.1], &src[c.val.0..c.val.1]))
            .collect();
        assert_eq!(
            got,
            vec![
                (&br#""a""#[..], &br#"[1, {"x":2}]"#[..]),
                (&br#""b""#[..], &br#""s""#[..]),
                (&br#""c""#[..], &b"{}"[..])
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn fast_and_go_scanner_agree(bytes in proptest::collection::vec(proptest::prop_oneof![
            proptest::sample::select(b"{}[]\":,.-+eE0123456789 \\ntrufalsn".to_vec()),
            proptest::num::u8::ANY,
        ], 0..24)) {
            let fast = fast_scan(&bytes, &mut Vec::new()).is_some();
            let msg = go_syntax_error(&bytes);
            proptest::prop_assert_eq!(fast, msg == "invalid JSON", "{:?} {}", String::from_utf8_lossy(&bytes), msg);
        }
    }
}
