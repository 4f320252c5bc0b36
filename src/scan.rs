//! A structural JSON scanner: finds the members of an object or the elements of an array without
//! building values, so that the audit events the loader ignores cost one pass over their bytes,
//! and reads the common shapes of AdmissionReviews (captured ones, webhooks' replies) field by
//! field.
//!
//! The scanner checks structure (strings terminated, brackets balanced, members separated by `:`
//! and `,`), not the whole grammar: text it accepts may still be rejected by a full parser, which
//! is what the loader runs on everything it keeps.

use std::borrow::Cow;

/// A byte range `start..end` of a value in the scanned text.
pub(crate) type Span = (usize, usize);

/// Where and why the scanner gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScanError {
    /// Byte offset.
    pub at: usize,
    /// What was wrong.
    pub what: &'static str,
}

fn fail<T>(at: usize, what: &'static str) -> Result<T, ScanError> {
    Err(ScanError { at, what })
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Flags (high bit per byte) the bytes of `w` equal to the byte repeated in `pattern`. Only the
/// lowest flag is exact, which is all [`quote_or_backslash`] uses.
#[inline(always)]
fn eq_bytes(w: u64, pattern: u64) -> u64 {
    let x = w ^ pattern;
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// Index of the first byte at or after `from` that `hits` flags (in a little-endian word, see
/// [`eq_bytes`]) and `is_hit` accepts: a word, then sixteen bytes at a time, then the last word
/// again (overlapping bytes already passed, which have no flags); fewer than eight bytes as two
/// overlapping halves of a word, looked at byte by byte only when they hold a hit.
#[inline(always)]
fn first_hit(
    buf: &[u8],
    from: usize,
    hits: impl Fn(u64) -> u64,
    is_hit: impl Fn(u8) -> bool,
) -> Option<usize> {
    let all = buf.get(from..)?;
    let mut rest = all;
    let mut at = from;
    // Most strings scanned end within a word: one word first.
    if let Some(w) = rest.first_chunk::<8>() {
        let w = hits(u64::from_le_bytes(*w));
        if w != 0 {
            return Some(at + (w.trailing_zeros() / 8) as usize);
        }
        rest = &rest[8..];
        at += 8;
    } else {
        if let (Some(lo), Some(hi)) = (rest.first_chunk::<4>(), rest.last_chunk::<4>()) {
            let w = u64::from(u32::from_le_bytes(*lo)) | u64::from(u32::from_le_bytes(*hi)) << 32;
            if hits(w) == 0 {
                return None;
            }
        }
        return rest.iter().position(|&b| is_hit(b)).map(|p| at + p);
    }
    let mut chunks = rest.chunks_exact(16);
    for chunk in chunks.by_ref() {
        let (lo, hi) = chunk.split_at(8);
        let lo = hits(u64::from_le_bytes(lo.try_into().unwrap_or_default()));
        let hi = hits(u64::from_le_bytes(hi.try_into().unwrap_or_default()));
        if lo | hi != 0 {
            let bit = if lo != 0 {
                lo.trailing_zeros()
            } else {
                64 + hi.trailing_zeros()
            };
            return Some(at + (bit / 8) as usize);
        }
        at += 16;
    }
    let mut tail = chunks.remainder();
    if let Some(w) = tail.first_chunk::<8>() {
        let w = hits(u64::from_le_bytes(*w));
        if w != 0 {
            return Some(at + (w.trailing_zeros() / 8) as usize);
        }
        tail = &tail[8..];
    }
    if tail.is_empty() {
        return None;
    }
    // `all` has eight bytes or more: its last word ends with the tail.
    let w = all
        .last_chunk::<8>()
        .map_or(0, |w| hits(u64::from_le_bytes(*w)));
    (w != 0).then(|| from + all.len() - 8 + (w.trailing_zeros() / 8) as usize)
}

/// Index of the first byte at or after `from` that Go's HTML-safe string encoding looks at: `"`,
/// `\`, control characters, `<`, `>`, `&`, and 0xE2 (the first byte of U+2028 and U+2029).
#[inline]
pub(crate) fn html_string_stop(buf: &[u8], from: usize) -> Option<usize> {
    first_hit(
        buf,
        from,
        |w| {
            // `"` and `&` differ in one bit, as `<` and `>` do: one comparison each pair.
            eq_bytes(w & !(ONES * 0x04), ONES * u64::from(b'"'))
                | eq_bytes(w & !(ONES * 0x02), ONES * u64::from(b'<'))
                | eq_bytes(w, ONES * u64::from(b'\\'))
                | eq_bytes(w, ONES * 0xE2)
                | below_space(w)
        },
        |b| matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&' | 0xE2) || b < 0x20,
    )
}

/// Index of the first `"` or `\` at or after `from`.
#[inline]
pub(crate) fn quote_or_backslash(buf: &[u8], from: usize) -> Option<usize> {
    first_hit(
        buf,
        from,
        |w| eq_bytes(w, ONES * u64::from(b'"')) | eq_bytes(w, ONES * u64::from(b'\\')),
        |b| b == b'"' || b == b'\\',
    )
}

/// Index of the first `byte` at or after `from`: for searches that go far (a line's end).
pub(crate) fn find_byte(buf: &[u8], from: usize, byte: u8) -> Option<usize> {
    memchr::memchr(byte, buf.get(from..)?).map(|i| from + i)
}

/// Index of the quote closing the string whose content starts at `from`.
#[inline]
pub(crate) fn string_end(buf: &[u8], from: usize) -> Result<usize, ScanError> {
    let mut i = from;
    loop {
        match quote_or_backslash(buf, i) {
            Some(j) if buf[j] == b'"' => return Ok(j),
            Some(j) => i = j + 2,
            None => return fail(buf.len(), "unterminated string"),
        }
    }
}

/// Whether the valid JSON value `buf` has no whitespace outside its strings.
#[cfg(test)]
pub(crate) fn is_compact(buf: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = buf.get(i) {
        match b {
            b'"' => match string_end(buf, i + 1) {
                Ok(end) => i = end + 1,
                Err(_) => return false,
            },
            b' ' | b'\t' | b'\r' | b'\n' => return false,
            _ => i += 1,
        }
    }
    true
}

#[inline]
fn skip_ws(buf: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\r' | b'\n') = buf.get(i) {
        i += 1;
    }
    i
}

/// End (exclusive) of the value starting at `i` (which must not be whitespace).
pub(crate) fn value_end(buf: &[u8], i: usize) -> Result<usize, ScanError> {
    match buf.get(i) {
        Some(b'"') => string_end(buf, i + 1).map(|e| e + 1),
        Some(b'{' | b'[') => nested_end(buf, i),
        Some(b'}' | b']' | b',' | b':') => fail(i, "expected a value"),
        Some(_) => {
            let mut j = i;
            while let Some(&b) = buf.get(j) {
                if matches!(b, b',' | b'}' | b']' | b':' | b' ' | b'\t' | b'\r' | b'\n') {
                    break;
                }
                j += 1;
            }
            Ok(j)
        }
        None => fail(i, "unexpected end of input"),
    }
}

/// End of the object or array starting at `i`, counting brackets outside strings.
fn nested_end(buf: &[u8], i: usize) -> Result<usize, ScanError> {
    let mut depth = 0usize;
    let mut j = i;
    while let Some(&b) = buf.get(j) {
        match b {
            b'"' => {
                j = string_end(buf, j + 1)? + 1;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    fail(buf.len(), "unexpected end of input")
}

/// Walks the members of the object at `span` (leading and trailing whitespace allowed), calling
/// `f(raw key, value span)` for each. Keys are compared raw: a key written with escapes does not
/// match its plain spelling.
pub(crate) fn members<'b>(
    buf: &'b [u8],
    span: Span,
    mut f: impl FnMut(&'b [u8], Span),
) -> Result<(), ScanError> {
    walk(buf, span, b"", |k, v| {
        f(k, v);
        false
    })
    .map(|_| ())
}

/// How [`walk`] ended.
enum Walked {
    /// At the end of the object (what follows it checked).
    End,
    /// `f` asked to stop.
    Stopped,
    /// The member named `stop_before` was reached; its value starts here.
    At(usize),
}

/// Walks the members of the object at `span`: `f(key, value span)` for each until it returns
/// true, or until the member named `stop_before` (whose value is then not scanned).
fn walk<'b>(
    buf: &'b [u8],
    span: Span,
    stop_before: &[u8],
    mut f: impl FnMut(&'b [u8], Span) -> bool,
) -> Result<Walked, ScanError> {
    let text = &buf[..span.1.min(buf.len())];
    let mut i = skip_ws(text, span.0);
    if text.get(i) != Some(&b'{') {
        return fail(i, "expected an object");
    }
    i = skip_ws(text, i + 1);
    if text.get(i) == Some(&b'}') {
        return trailing(text, i + 1).map(|()| Walked::End);
    }
    loop {
        let key;
        (key, i) = member_name(text, i)?;
        if !stop_before.is_empty() && key == stop_before {
            return Ok(Walked::At(i));
        }
        let end = value_end(text, i)?;
        if f(key, (i, end)) {
            return Ok(Walked::Stopped);
        }
        i = skip_ws(text, end);
        match text.get(i) {
            Some(b',') => i = skip_ws(text, i + 1),
            Some(b'}') => return trailing(text, i + 1).map(|()| Walked::End),
            _ => return fail(i, "expected ',' or '}'"),
        }
    }
}

/// The raw name of the member starting at `i` (its opening quote) and where its value starts,
/// after the `:` and any whitespace.
#[inline(always)]
fn member_name(text: &[u8], i: usize) -> Result<(&[u8], usize), ScanError> {
    if text.get(i) != Some(&b'"') {
        return fail(i, "expected a member name");
    }
    let key_end = string_end(text, i + 1)?;
    let key = &text[i + 1..key_end];
    let i = skip_ws(text, key_end + 1);
    if text.get(i) != Some(&b':') {
        return fail(i, "expected ':'");
    }
    Ok((key, skip_ws(text, i + 1)))
}

/// Walks the members of the object whose `{` is at `i`, calling `f(raw key, value start)`, which
/// scans the value and returns its end; returns the end of the object. What follows the object
/// is not looked at (unlike [`members`]), so that an object nested in the one walked can be
/// walked by `f` in the same pass.
pub(crate) fn object_members<'b>(
    buf: &'b [u8],
    i: usize,
    mut f: impl FnMut(&'b [u8], usize) -> Result<usize, ScanError>,
) -> Result<usize, ScanError> {
    if buf.get(i) != Some(&b'{') {
        return fail(i, "expected an object");
    }
    let mut i = skip_ws(buf, i + 1);
    if buf.get(i) == Some(&b'}') {
        return Ok(i + 1);
    }
    loop {
        let (key, v) = member_name(buf, i)?;
        i = skip_ws(buf, f(key, v)?);
        match buf.get(i) {
            Some(b',') => i = skip_ws(buf, i + 1),
            Some(b'}') => return Ok(i + 1),
            _ => return fail(i, "expected ',' or '}'"),
        }
    }
}

/// The first byte at or after `i` that is not JSON whitespace.
pub(crate) fn skip_whitespace(buf: &[u8], i: usize) -> usize {
    skip_ws(buf, i)
}

/// Where the value of member `key` of the object at `span` starts; only the members before it
/// are scanned.
pub(crate) fn member_start(buf: &[u8], span: Span, key: &[u8]) -> Option<usize> {
    match walk(buf, span, key, |_, _| false) {
        Ok(Walked::At(i)) => Some(i),
        _ => None,
    }
}

/// Walks the elements of the array at `span`, calling `f(index, element span)`.
pub(crate) fn elements(
    buf: &[u8],
    span: Span,
    f: impl FnMut(usize, Span),
) -> Result<(), ScanError> {
    let text = &buf[..span.1.min(buf.len())];
    let end = elements_from(text, span.0, f)?;
    trailing(text, end)
}

/// Walks the elements of the array starting at `start` (whatever follows it); returns its end.
pub(crate) fn elements_from(
    buf: &[u8],
    start: usize,
    mut f: impl FnMut(usize, Span),
) -> Result<usize, ScanError> {
    let mut i = skip_ws(buf, start);
    if buf.get(i) != Some(&b'[') {
        return fail(i, "expected an array");
    }
    i = skip_ws(buf, i + 1);
    if buf.get(i) == Some(&b']') {
        return Ok(i + 1);
    }
    let mut n = 0;
    loop {
        let end = value_end(buf, i)?;
        f(n, (i, end));
        n += 1;
        i = skip_ws(buf, end);
        match buf.get(i) {
            Some(b',') => i = skip_ws(buf, i + 1),
            Some(b']') => return Ok(i + 1),
            _ => return fail(i, "expected ',' or ']'"),
        }
    }
}

fn trailing(text: &[u8], i: usize) -> Result<(), ScanError> {
    let j = skip_ws(text, i);
    if j < text.len() {
        return fail(j, "unexpected text after the value");
    }
    Ok(())
}

/// The spans of the members named `keys` of the object at `span` (the last one wins when a name
/// repeats, as in Go).
pub(crate) fn find<const N: usize>(
    buf: &[u8],
    span: Span,
    keys: [&[u8]; N],
) -> Result<[Option<Span>; N], ScanError> {
    find_by(buf, span, |k| keys.iter().position(|want| *want == k))
}

/// The spans of the members `index` knows (by their position in the result), in the object at
/// `span`; the last one wins when a name repeats.
pub(crate) fn find_by<const N: usize>(
    buf: &[u8],
    span: Span,
    index: impl Fn(&[u8]) -> Option<usize>,
) -> Result<[Option<Span>; N], ScanError> {
    let mut out = [None; N];
    members(buf, span, |k, v| {
        if let Some(slot) = index(k).and_then(|i| out.get_mut(i)) {
            *slot = Some(v);
        }
    })?;
    Ok(out)
}

/// Like [`find`], but stops as soon as every key was found (the rest of the object is not
/// looked at, so not checked either).
pub(crate) fn find_first<const N: usize>(
    buf: &[u8],
    span: Span,
    keys: [&[u8]; N],
) -> Result<[Option<Span>; N], ScanError> {
    let mut out = [None; N];
    let mut missing = N;
    walk(buf, span, b"", |k, v| {
        if let Some(pos) = keys.iter().position(|want| *want == k) {
            if out[pos].is_none() {
                missing -= 1;
            }
            out[pos] = Some(v);
        }
        missing == 0
    })?;
    Ok(out)
}

/// Parses JSON text, checking its UTF-8 once for the whole text rather than string by string.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &[u8]) -> Result<T, String> {
    parse_within(text, 0)
}

/// [`parse`] of a document that wraps a request body `wrapping` levels deep (see
/// [`crate::json::from_str_within`]).
pub(crate) fn parse_within<T: serde::de::DeserializeOwned>(
    text: &[u8],
    wrapping: usize,
) -> Result<T, String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("invalid UTF-8: {e}"))?;
    crate::json::from_str_within(text, wrapping).map_err(|e| e.to_string())
}

/// The string at `span`, decoded; `None` when the value is not a string.
pub(crate) fn string(buf: &[u8], span: Span) -> Option<Cow<'_, str>> {
    let raw = buf.get(span.0..span.1)?;
    if raw.len() < 2 || raw[0] != b'"' {
        return None;
    }
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains(&b'\\') {
        return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
    }
    crate::json::from_slice::<String>(raw).ok().map(Cow::Owned)
}

/// The integer at `span`; `None` for anything else.
pub(crate) fn integer(buf: &[u8], span: Span) -> Option<i64> {
    std::str::from_utf8(buf.get(span.0..span.1)?)
        .ok()?
        .parse()
        .ok()
}

/// True when the value at `span` is `null`.
pub(crate) fn is_null(buf: &[u8], span: Span) -> bool {
    buf.get(span.0..span.1) == Some(b"null")
}

/// Deepest nesting (the outermost container counts one) the checked reads below accept: under
/// serde_json's limit of 127, so that text they accept is never too deep for a full parse.
pub(crate) const CHECKED_DEPTH: usize = 120;

/// Flags (high bit per byte) the bytes of `w` below 0x20. Only the lowest flag is exact.
#[inline(always)]
fn below_space(w: u64) -> u64 {
    w.wrapping_sub(ONES * 0x20) & !w & HIGHS
}

/// Flags (high bit per byte) the bytes of `w` a JSON string escapes: `"`, `\`, control
/// characters. Only the lowest flag is exact.
#[inline(always)]
fn escaped_bytes(w: u64) -> u64 {
    eq_bytes(w, ONES * u64::from(b'"')) | eq_bytes(w, ONES * u64::from(b'\\')) | below_space(w)
}

/// Whether a JSON string escapes `b`: what [`escaped_bytes`] flags, one byte.
#[inline(always)]
fn is_escaped(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// Whether `s` holds a `"`, a `\` or a control character: what a JSON string escapes. Eight
/// bytes at a time (the last word may overlap the one before), for the short strings of a
/// report.
pub(crate) fn needs_json_escape(s: &[u8]) -> bool {
    if s.len() < 8 {
        return s.iter().any(|&b| is_escaped(b));
    }
    let word = |i: usize| {
        s.get(i..i + 8)
            .and_then(|w| w.try_into().ok())
            .map_or(0, |w| escaped_bytes(u64::from_le_bytes(w)))
    };
    let mut i = 0;
    while i + 8 <= s.len() {
        if word(i) != 0 {
            return true;
        }
        i += 8;
    }
    i < s.len() && word(s.len() - 8) != 0
}

/// Index of the first `"`, `\` or control character at or after `from`.
#[inline]
fn string_stop(buf: &[u8], from: usize) -> Option<usize> {
    first_hit(buf, from, escaped_bytes, is_escaped)
}

/// End (after the closing quote) of the string whose opening quote is at `i`, checked as a JSON
/// parser checks it: no control characters, only JSON's escapes. Escapes of UTF-16 surrogates
/// are refused (whether they pair up is left to a full parse). The text must be valid UTF-8.
#[inline]
pub(crate) fn checked_string_end(buf: &[u8], i: usize) -> Option<usize> {
    if buf.get(i) != Some(&b'"') {
        return None;
    }
    let k = string_stop(buf, i + 1)?;
    if buf[k] == b'"' {
        return Some(k + 1);
    }
    checked_escapes_end(buf, k)
}

/// [`checked_string_end`] from `k`, the first `\` or control character of the string: rare, so
/// kept out of the common path.
#[cold]
#[inline(never)]
fn checked_escapes_end(buf: &[u8], mut k: usize) -> Option<usize> {
    loop {
        match buf[k] {
            b'"' => return Some(k + 1),
            b'\\' => {}
            _ => return None,
        }
        let j = match buf.get(k + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => k + 2,
            b'u' => {
                let hex = std::str::from_utf8(buf.get(k + 2..k + 6)?).ok()?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                let unit = u32::from_str_radix(hex, 16).ok()?;
                if (0xD800..=0xDFFF).contains(&unit) {
                    return None;
                }
                k + 6
            }
            _ => return None,
        };
        k = string_stop(buf, j)?;
    }
}

/// End of the number starting at `i`, checked against JSON's grammar. Numbers whose magnitude
/// could overflow a double (more than 64 characters, or an exponent of three digits or more)
/// are refused, as are numbers a full parser would take.
fn checked_number_end(buf: &[u8], i: usize) -> Option<usize> {
    let digits = |mut j: usize| {
        while buf.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        j
    };
    let mut j = i + usize::from(buf.get(i) == Some(&b'-'));
    j = match buf.get(j)? {
        b'0' => j + 1,
        b'1'..=b'9' => digits(j + 1),
        _ => return None,
    };
    if buf.get(j) == Some(&b'.') {
        let end = digits(j + 1);
        if end == j + 1 {
            return None;
        }
        j = end;
    }
    if let Some(b'e' | b'E') = buf.get(j) {
        j += 1;
        if let Some(b'+' | b'-') = buf.get(j) {
            j += 1;
        }
        let end = digits(j);
        if end == j || end - j > 2 {
            return None;
        }
        j = end;
    }
    (j - i <= 64).then_some(j)
}

/// End of the JSON value starting at `i` (not whitespace), checked as a full parser into a
/// `serde_json::Value` would check it (within the limits above), `depth` containers deep.
/// `None` when the text is invalid or beyond those limits.
pub(crate) fn checked_value_end(buf: &[u8], i: usize, depth: usize) -> Option<usize> {
    value_in::<true>(buf, i, depth)
}

/// [`checked_value_end`] of a value written compactly: `None` also when whitespace stands
/// anywhere outside its strings, so that one pass both checks the value and tells it compact.
pub(crate) fn checked_compact_value_end(buf: &[u8], i: usize, depth: usize) -> Option<usize> {
    value_in::<false>(buf, i, depth)
}

/// [`checked_members`] of an object written compactly: `None` also when whitespace stands
/// anywhere outside its strings (`f` checks the values, compactly too).
pub(crate) fn checked_compact_members(
    buf: &[u8],
    i: usize,
    depth: usize,
    mut f: impl FnMut(&[u8], usize) -> Option<usize>,
) -> Option<usize> {
    members_in::<false>(buf, i, depth, &mut f)
}

/// Whitespace between tokens: skipped, or (in compact text, `SKIP` false) none allowed, so that
/// the token expected next is not found.
#[inline(always)]
fn ws<const SKIP: bool>(buf: &[u8], i: usize) -> usize {
    if SKIP { skip_ws(buf, i) } else { i }
}

fn value_in<const SKIP: bool>(buf: &[u8], i: usize, depth: usize) -> Option<usize> {
    let literal = |word: &[u8]| buf[i..].starts_with(word).then_some(i + word.len());
    match buf.get(i)? {
        b'"' => checked_string_end(buf, i),
        b'{' => members_in::<SKIP>(buf, i, depth + 1, &mut |_, v| {
            value_in::<SKIP>(buf, v, depth + 1)
        }),
        b'[' => elements_in::<SKIP>(buf, i, depth + 1),
        b't' => literal(b"true"),
        b'f' => literal(b"false"),
        b'n' => literal(b"null"),
        _ => checked_number_end(buf, i),
    }
}

fn elements_in<const SKIP: bool>(buf: &[u8], i: usize, depth: usize) -> Option<usize> {
    if depth > CHECKED_DEPTH {
        return None;
    }
    let mut j = ws::<SKIP>(buf, i + 1);
    if buf.get(j) == Some(&b']') {
        return Some(j + 1);
    }
    loop {
        j = ws::<SKIP>(buf, value_in::<SKIP>(buf, j, depth)?);
        match buf.get(j)? {
            b',' => j = ws::<SKIP>(buf, j + 1),
            b']' => return Some(j + 1),
            _ => return None,
        }
    }
}

/// Walks the object whose `{` is at `i` (after whitespace), `depth` containers deep counting
/// itself, checking its member names and punctuation: `f(raw name, value start)` must give the
/// end of each value (and so checks it). Returns the end of the object; `None` when the text is
/// invalid, beyond the limits above, or `f` gives `None`.
pub(crate) fn checked_members(
    buf: &[u8],
    i: usize,
    depth: usize,
    mut f: impl FnMut(&[u8], usize) -> Option<usize>,
) -> Option<usize> {
    members_in::<true>(buf, skip_ws(buf, i), depth, &mut f)
}

#[inline(always)]
fn members_in<const SKIP: bool>(
    buf: &[u8],
    i: usize,
    depth: usize,
    f: &mut impl FnMut(&[u8], usize) -> Option<usize>,
) -> Option<usize> {
    if buf.get(i) != Some(&b'{') || depth > CHECKED_DEPTH {
        return None;
    }
    let mut j = ws::<SKIP>(buf, i + 1);
    if buf.get(j) == Some(&b'}') {
        return Some(j + 1);
    }
    loop {
        let key_end = checked_string_end(buf, j)?;
        let key = &buf[j + 1..key_end - 1];
        j = ws::<SKIP>(buf, key_end);
        if buf.get(j) != Some(&b':') {
            return None;
        }
        j = ws::<SKIP>(buf, f(key, ws::<SKIP>(buf, j + 1))?);
        match buf.get(j)? {
            b',' => j = ws::<SKIP>(buf, j + 1),
            b'}' => return Some(j + 1),
            _ => return None,
        }
    }
}

/// The literal `true` or `false` starting at `i`, and its end (the caller checks what follows).
pub(crate) fn bool_at(buf: &[u8], i: usize) -> Option<(bool, usize)> {
    if buf[i..].starts_with(b"true") {
        Some((true, i + 4))
    } else if buf[i..].starts_with(b"false") {
        Some((false, i + 5))
    } else {
        None
    }
}

/// True when only whitespace follows `i`.
pub(crate) fn only_whitespace_after(buf: &[u8], i: usize) -> bool {
    skip_ws(buf, i) >= buf.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_found_wherever_they_are() {
        for len in 0..40 {
            let plain: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(!needs_json_escape(&plain), "{len}");
            let high: Vec<u8> = "é".repeat(len).into_bytes();
            assert!(!needs_json_escape(&high), "{len} non-ASCII");
            for at in 0..len {
                for bad in [b'"', b'\\', b'\n', 0, 0x1f] {
                    let mut s = plain.clone();
                    s[at] = bad;
                    assert!(needs_json_escape(&s), "{len} {at} {bad}");
                }
            }
        }
    }

    fn whole(s: &str) -> Span {
        (0, s.len())
    }

    #[test]
    fn compact_means_no_whitespace_outside_strings() {
        for text in [
            r#"{"a":"x y\n","b":[1,{"c":" "}],"d":"\" "}"#,
            r#""a b""#,
            "[]",
            "1",
        ] {
            assert!(is_compact(text.as_bytes()), "{text}");
        }
        for text in [
            r#"{"a": 1}"#,
            "{\"a\":1\n}",
            r#"{"a":"\" ",	"b":1}"#,
            r#"[1, 2]"#,
            "{\"a\":\"x\"}\r",
        ] {
            assert!(!is_compact(text.as_bytes()), "{text}");
        }
    }

    #[test]
    fn checked_strings_are_json_strings() {
        let long = "x".repeat(37);
        for (text, end) in [
            (r#""""#.to_string(), Some(2)),
            (r#""abc"x"#.to_string(), Some(5)),
            (format!(r#""{long}""#), Some(39)),
            (r#""a\"b""#.to_string(), Some(6)),
            (r#""\\\/\b\f\n\r\t\u00e9""#.to_string(), Some(22)),
            (format!(r#""{long}\n{long}\"""#), Some(80)),
            (r#""\ud800""#.to_string(), None),
            (r#""\u00g0""#.to_string(), None),
            (r#""\x""#.to_string(), None),
            ("\"a\tb\"".to_string(), None),
            (r#""abc"#.to_string(), None),
            (r#""a\"#.to_string(), None),
            (r#""\u12""#.to_string(), None),
            ("x".to_string(), None),
        ] {
            assert_eq!(checked_string_end(text.as_bytes(), 0), end, "{text}");
            let valid = crate::json::from_str::<String>(&text[..end.unwrap_or(text.len())]).is_ok();
            assert_eq!(end.is_some(), valid, "{text}");
        }
    }

    #[test]
    fn compact_scan_is_the_checked_scan_of_compact_text() {
        let texts = [
            r#"{"a":"x y\n","b":[1,{"c":" "}],"d":"\" ","e":[],"f":{},"g":-1.5e3}"#,
            r#"{"a": 1}"#,
            "{\"a\":1\n}",
            r#"{"a":[1, 2]}"#,
            r#"{"a":[1 ,2]}"#,
            r#"{"a" :1}"#,
            r#"{ "a":1}"#,
            r#"{"a":{ }}"#,
            r#"{"a":[ ]}"#,
            r#"{"a":true,"b":false,"c":null}"#,
            r#"{"a":tru}"#,
            r#"{"a":1,}"#,
            r#"{"a":"\x"}"#,
            r#"[{"a":[[[]]]},"\u00e9"]"#,
            r#""a b""#,
            "7",
        ];
        for text in texts {
            let b = text.as_bytes();
            for cut in 0..=b.len() {
                let b = &b[..cut];
                let want = checked_value_end(b, 0, 1).filter(|&end| is_compact(&b[..end]));
                assert_eq!(
                    checked_compact_value_end(b, 0, 1),
                    want,
                    "{:?}",
                    &text[..cut]
                );
            }
        }
    }

    #[test]
    fn finds_top_level_members_only() {
        let s = r#"{"a":{"stage":"x"},"stage":"ResponseComplete","b":[1,"]"],"verb" : "get"}"#;
        let [stage, verb, missing] =
            find(s.as_bytes(), whole(s), [b"stage", b"verb", b"c"]).unwrap();
        assert_eq!(
            string(s.as_bytes(), stage.unwrap()).unwrap(),
            "ResponseComplete"
        );
        assert_eq!(string(s.as_bytes(), verb.unwrap()).unwrap(), "get");
        assert!(missing.is_none());
    }

    #[test]
    fn strings_with_escapes_and_long_runs() {
        let long = "x".repeat(37);
        let s = format!(r#"{{"k":"a\"b\\{long}","n":12}}"#);
        let [k, n] = find(s.as_bytes(), whole(&s), [b"k", b"n"]).unwrap();
        assert_eq!(
            string(s.as_bytes(), k.unwrap()).unwrap(),
            format!("a\"b\\{long}")
        );
        assert_eq!(integer(s.as_bytes(), n.unwrap()), Some(12));
    }

    #[test]
    fn truncation_and_garbage_are_errors() {
        for bad in [
            r#"{"a":"b"#,
            r#"{"a":{"b":1}"#,
            r#"{"a" 1}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            r#"["#,
            "",
            "\"\\",
        ] {
            assert!(find(bad.as_bytes(), whole(bad), [b"a"]).is_err(), "{bad}");
        }
    }

    #[test]
    fn searches_find_the_first_hit_wherever_it_is() {
        for len in 0..40 {
            for from in 0..=len {
                let plain: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                assert_eq!(quote_or_backslash(&plain, from), None);
                assert_eq!(string_stop(&plain, from), None);
                for at in 0..len {
                    for (hit, stops) in [(b'"', true), (b'\\', true), (0x1f, false), (b'\n', false)]
                    {
                        let mut s = plain.clone();
                        s[at] = hit;
                        let quote = (at >= from && stops).then_some(at);
                        assert_eq!(quote_or_backslash(&s, from), quote, "{len} {from} {at}");
                        let stop = (at >= from).then_some(at);
                        assert_eq!(string_stop(&s, from), stop, "{len} {from} {at}");
                        assert_eq!(find_byte(&s, from, hit), stop, "{len} {from} {at}");
                        assert_eq!(html_string_stop(&s, from), stop, "{len} {from} {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_html_stop_is_the_first_byte_go_looks_at() {
        // Every byte value, alone or after others, in strings of every length around the word
        // and chunk sizes, against the obvious byte-by-byte search.
        let go_looks_at = |b: u8| matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&' | 0xE2) || b < 0x20;
        let mut next = crate::testing::xorshift(0x2545_f491_4f6c_dd1du64);
        let alphabet = b"a<>&\"\\\n\x1f\x7f\x80\xa8\xe2 zZ~";
        for _ in 0..20_000 {
            let len = (next() % 48) as usize;
            let s: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => alphabet[(next() % alphabet.len() as u64) as usize],
                    1 => (next() % 256) as u8,
                    _ => b'a' + (next() % 26) as u8,
                })
                .collect();
            let from = (next() % (len as u64 + 2)) as usize;
            let want = s
                .get(from..)
                .and_then(|rest| rest.iter().position(|&b| go_looks_at(b)))
                .map(|p| from + p);
            assert_eq!(html_string_stop(&s, from), want, "{s:?} from {from}");
            let want = s
                .get(from..)
                .and_then(|rest| rest.iter().position(|&b| b == b'"' || b == b'\\'))
                .map(|p| from + p);
            assert_eq!(quote_or_backslash(&s, from), want, "{s:?} from {from}");
        }
        for b in 0..=255u8 {
            for len in 1..40 {
                for at in 0..len {
                    let mut s = vec![b'a'; len];
                    s[at] = b;
                    let want = go_looks_at(b).then_some(at);
                    assert_eq!(html_string_stop(&s, 0), want, "{b:#x} {len} {at}");
                }
            }
        }
    }

    #[test]
    fn finds_bytes() {
        let s = b"0123456789abcdef\nx\n";
        assert_eq!(find_byte(s, 0, b'\n'), Some(16));
        assert_eq!(find_byte(s, 17, b'\n'), Some(18));
        assert_eq!(find_byte(s, 19, b'\n'), None);
        assert_eq!(find_byte(s, 40, b'\n'), None);
        assert_eq!(find_byte(b"\x8a\x0a", 0, b'\n'), Some(1));
    }

    #[test]
    fn elements_of_an_array() {
        let s = r#" [ {"a":1}, "x" ,[2] ] "#;
        let mut seen = Vec::new();
        elements(s.as_bytes(), whole(s), |i, sp| {
            seen.push((i, &s[sp.0..sp.1]))
        })
        .unwrap();
        assert_eq!(seen, [(0, r#"{"a":1}"#), (1, "\"x\""), (2, "[2]")]);
    }
}
