//! Go string semantics: `encoding/json` string decoding and encoding, `json.Compact`, `strconv.Quote`
//! and `strconv.Atoi`.

use std::borrow::Cow;

pub(crate) use crate::gofmt::{push_quoted_rune, quote};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` to `out`, replacing each byte of an invalid UTF-8 sequence with U+FFFD as Go does.
fn push_lossy(out: &mut String, mut s: &[u8]) {
    loop {
        match std::str::from_utf8(s) {
            Ok(v) => {
                out.push_str(v);
                return;
            }
            Err(e) => {
                let (valid, rest) = s.split_at(e.valid_up_to());
                if let Ok(v) = std::str::from_utf8(valid) {
                    out.push_str(v);
                }
                let bad = e.error_len().unwrap_or(rest.len()).min(rest.len());
                for _ in 0..bad {
                    out.push('\u{FFFD}');
                }
                s = rest.get(bad..).unwrap_or_default();
            }
        }
    }
}

/// `s` as a string, each byte of an invalid UTF-8 sequence replaced with U+FFFD (Go's rule).
pub(crate) fn lossy(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    push_lossy(&mut out, s);
    out
}

fn hex4(b: &[u8]) -> Option<u32> {
    let h = std::str::from_utf8(b.get(..4)?).ok()?;
    u32::from_str_radix(h, 16).ok()
}

/// Decodes a valid JSON string literal (quotes included) as Go's `encoding/json` does: invalid
/// UTF-8 bytes and unpaired surrogate escapes become U+FFFD.
pub(crate) fn unquote(raw: &[u8]) -> Cow<'_, str> {
    let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or_default();
    if !inner.contains(&b'\\')
        && let Ok(s) = std::str::from_utf8(inner)
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(pos) = rest.iter().position(|&c| c == b'\\') {
        push_lossy(&mut out, rest.get(..pos).unwrap_or_default());
        rest = rest.get(pos..).unwrap_or_default();
        let esc = rest.get(1).copied().unwrap_or(b'\\');
        let mut used = 2;
        match esc {
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                used = 6;
                let r = rest.get(2..).and_then(hex4).unwrap_or(0xFFFD);
                let ch = if (0xD800..0xE000).contains(&r) {
                    let lo = match (rest.get(6), rest.get(7)) {
                        (Some(b'\\'), Some(b'u')) => rest.get(8..).and_then(hex4),
                        _ => None,
                    };
                    match lo {
                        Some(lo)
                            if (0xD800..0xDC00).contains(&r) && (0xDC00..0xE000).contains(&lo) =>
                        {
                            used = 12;
                            char::from_u32(0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00))
                        }
                        _ => None,
                    }
                } else {
                    char::from_u32(r)
                };
                out.push(ch.unwrap_or('\u{FFFD}'));
            }
            other => out.push(char::from(other)),
        }
        rest = rest.get(used..).unwrap_or_default();
    }
    push_lossy(&mut out, rest);
    Cow::Owned(out)
}

/// Appends `s` as a JSON string the way Go's `json.Marshal` does (HTML-safe escaping).
pub(crate) fn append_string(out: &mut Vec<u8>, s: &str) {
    append_string_html(out, s);
}

/// [`append_string`]; returns whether it wrote an escape serde_json does not (`<`, `>`, `&`,
/// U+2028, U+2029): when it did not, the bytes are serde_json's too.
pub(crate) fn append_string_html(out: &mut Vec<u8>, s: &str) -> bool {
    let mut html = false;
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push(b'"');
    // Most strings have nothing to escape: found a word at a time, copied whole.
    let Some(mut i) = crate::scan::html_string_stop(b, 0) else {
        out.extend_from_slice(b);
        out.push(b'"');
        return false;
    };
    let mut start = 0;
    loop {
        let c = b.get(i).copied().unwrap_or(b' ');
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0xE2 if !(b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xA8 | 0xA9))) => {
                match crate::scan::html_string_stop(b, i + 1) {
                    Some(next) => {
                        i = next;
                        continue;
                    }
                    None => break,
                }
            }
            _ => &[],
        };
        out.extend_from_slice(b.get(start..i).unwrap_or_default());
        if !esc.is_empty() {
            out.extend_from_slice(esc);
            start = i + 1;
        } else if c == 0xE2 {
            html = true;
            let last = b.get(i + 2).copied().unwrap_or(0xA8);
            out.extend_from_slice(b"\\u202");
            out.push(HEX[usize::from(last & 0xF)]);
            start = i + 3;
        } else {
            html |= c >= 0x20;
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(c >> 4)]);
            out.push(HEX[usize::from(c & 0xF)]);
            start = i + 1;
        }
        i = start;
        match crate::scan::html_string_stop(b, i) {
            Some(next) => i = next,
            None => break,
        }
    }
    out.extend_from_slice(b.get(start..).unwrap_or_default());
    out.push(b'"');
    html
}

const fn table(bytes: &[u8], controls: bool) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = true;
        i += 1;
    }
    if controls {
        let mut c = 0;
        while c < 0x20 {
            t[c] = true;
            c += 1;
        }
    }
    t
}

/// Bytes `compact` must look at outside strings, inside strings, and inside strings when escaping.
static OUTSIDE: [bool; 256] = table(b"\" \t\r\n", false);
static IN_STR: [bool; 256] = table(b"\"\\", false);
static IN_STR_HTML: [bool; 256] = table(b"\"\\<>&\xE2", false);

/// Go's `json.Compact` (when `escape_html` is false) or the compaction `json.Marshal` applies to
/// `json.RawMessage` values (when true: `<`, `>`, `&`, U+2028 and U+2029 become `\u` escapes).
/// `src` must be valid JSON.
pub(crate) fn compact(out: &mut Vec<u8>, src: &[u8], escape_html: bool) {
    out.reserve(src.len());
    let in_table = if escape_html { &IN_STR_HTML } else { &IN_STR };
    let mut start = 0;
    let mut in_str = false;
    let mut i = 0;
    loop {
        let t = if in_str { in_table } else { &OUTSIDE };
        let rest = src.get(i..).unwrap_or_default();
        let Some(p) = rest.iter().position(|&c| t[usize::from(c)]) else {
            break;
        };
        i += p;
        let c = rest.get(p).copied().unwrap_or(b' ');
        if in_str {
            match c {
                b'\\' => {
                    i += 2;
                    continue;
                }
                b'"' => in_str = false,
                b'<' | b'>' | b'&' => {
                    out.extend_from_slice(src.get(start..i).unwrap_or_default());
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(c >> 4)]);
                    out.push(HEX[usize::from(c & 0xF)]);
                    start = i + 1;
                }
                _ => {
                    if src.get(i + 1) == Some(&0x80) && matches!(src.get(i + 2), Some(0xA8 | 0xA9))
                    {
                        out.extend_from_slice(src.get(start..i).unwrap_or_default());
                        out.extend_from_slice(b"\\u202");
                        let last = src.get(i + 2).copied().unwrap_or(0xA8);
                        out.push(HEX[usize::from(last & 0xF)]);
                        i += 3;
                        start = i;
                        continue;
                    }
                }
            }
        } else if c == b'"' {
            in_str = true;
        } else {
            out.extend_from_slice(src.get(start..i).unwrap_or_default());
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(src.get(start..).unwrap_or_default());
}

/// RFC 6901 unescaping as evanphx does it (`~1` → `/`, then `~0` → `~`, left to right).
pub(crate) fn decode_key(k: &str) -> Cow<'_, str> {
    if !k.contains('~') {
        return Cow::Borrowed(k);
    }
    let mut out = String::with_capacity(k.len());
    let mut chars = k.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.peek() {
                Some('1') => {
                    chars.next();
                    out.push('/');
                    continue;
                }
                Some('0') => {
                    chars.next();
                    out.push('~');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// Go's `strconv.Atoi` on a 64-bit platform, with its error text.
pub(crate) fn atoi(s: &str) -> Result<i64, String> {
    let syntax = || format!("strconv.Atoi: parsing {}: invalid syntax", quote(s));
    let range = || format!("strconv.Atoi: parsing {}: value out of range", quote(s));
    let b = s.as_bytes();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, b.get(1..).unwrap_or_default()),
        Some(b'+') => (false, b.get(1..).unwrap_or_default()),
        _ => (false, b),
    };
    if digits.is_empty() {
        return Err(syntax());
    }
    let mut n: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(syntax());
        }
        n = match n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(c - b'0')))
        {
            Some(n) => n,
            None => return Err(range()),
        };
    }
    if neg {
        if n > 1u64 << 63 {
            return Err(range());
        }
        Ok(0i64.wrapping_sub_unsigned(n))
    } else {
        i64::try_from(n).map_err(|_| range())
    }
}

/// Formats a float as Go's `encoding/json` does for `float64`.
pub(crate) fn push_go_float(out: &mut Vec<u8>, f: f64) {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mant, exp)) if !exp.starts_with('-') => {
                out.extend_from_slice(mant.as_bytes());
                out.extend_from_slice(b"e+");
                out.extend_from_slice(exp.as_bytes());
            }
            _ => out.extend_from_slice(s.as_bytes()),
        }
    } else {
        out.extend_from_slice(format!("{f}").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquote_like_go() {
        assert_eq!(unquote(br#""abc""#), "abc");
        assert_eq!(unquote(br#""a\u0062\/\n""#), "ab/\n");
        assert_eq!(unquote(br#""\ud83d\ude00""#), "\u{1F600}");
        assert_eq!(unquote(br#""\ud83dx""#), "\u{FFFD}x");
        assert_eq!(unquote(br#""\ude00\u0041""#), "\u{FFFD}A");
        assert_eq!(unquote(b"\"a\xE2\x80b\xff\""), "a\u{FFFD}\u{FFFD}b\u{FFFD}");
    }

    #[test]
    fn encode_like_go() {
        let mut out = Vec::new();
        append_string(
            &mut out,
            "a\"\\<>&\u{8}\u{c}\n\r\t\u{1}\u{7f}\u{2028}\u{2029}é",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"\\\\\\u003c\\u003e\\u0026\\b\\f\\n\\r\\t\\u0001\u{7f}\\u2028\\u2029é\""
        );
        let mut out = Vec::new();
        compact(
            &mut out,
            " { \"a <\" : [ 1 , \"\\\" &\u{2029}\" ] } ".as_bytes(),
            true,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a \u003c":[1,"\" \u0026\u2029"]}"#
        );
    }

    /// Go's `encodeState.string` with HTML escaping, character by character, and whether it
    /// wrote an escape serde_json does not.
    fn go_string_char_by_char(s: &str) -> (String, bool) {
        let mut out = String::from("\"");
        let mut html = false;
        for ch in s.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                    html |= ch >= ' ';
                    out.push_str(&format!("\\u{:04x}", u32::from(ch)));
                }
                '\u{2028}' | '\u{2029}' => {
                    html = true;
                    out.push_str(&format!("\\u{:04x}", u32::from(ch)));
                }
                _ => out.push(ch),
            }
        }
        out.push('"');
        (out, html)
    }

    #[test]
    fn the_word_at_a_time_escaper_writes_what_go_writes_char_by_char() {
        let pieces = [
            "a",
            "z",
            "<",
            ">",
            "&",
            "\"",
            "\\",
            "\n",
            "\r",
            "\t",
            "\u{8}",
            "\u{c}",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            " ",
            "é",
            "\u{2028}",
            "\u{2029}",
            "\u{2027}",
            "\u{202a}",
            "\u{20ac}",
            "\u{e000}",
            "\u{1F600}",
            "abcdefgh",
            "\u{800}",
        ];
        let mut next = crate::testing::xorshift(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..30_000 {
            let n = (next() % 24) as usize;
            let mut s = String::new();
            for _ in 0..n {
                // Mostly plain letters, so that runs cross the word and chunk boundaries.
                let piece = if next().is_multiple_of(3) {
                    pieces[(next() % pieces.len() as u64) as usize]
                } else {
                    "abcdefghijklmnop"
                        .get(..(next() % 12) as usize)
                        .unwrap_or("")
                };
                s.push_str(piece);
            }
            let mut out = b"x".to_vec();
            let html = append_string_html(&mut out, &s);
            let (want, want_html) = go_string_char_by_char(&s);
            assert_eq!(String::from_utf8(out).unwrap(), format!("x{want}"), "{s:?}");
            assert_eq!(html, want_html, "{s:?}");
        }
    }

    #[test]
    fn atoi_like_go() {
        assert_eq!(atoi("01"), Ok(1));
        assert_eq!(atoi("+1"), Ok(1));
        assert_eq!(atoi("-4"), Ok(-4));
        assert_eq!(atoi("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(
            atoi("-").unwrap_err(),
            r#"strconv.Atoi: parsing "-": invalid syntax"#
        );
        assert_eq!(
            atoi("").unwrap_err(),
            r#"strconv.Atoi: parsing "": invalid syntax"#
        );
        assert_eq!(
            atoi("1_0").unwrap_err(),
            r#"strconv.Atoi: parsing "1_0": invalid syntax"#
        );
        assert_eq!(
            atoi("9223372036854775808").unwrap_err(),
            r#"strconv.Atoi: parsing "9223372036854775808": value out of range"#
        );
        assert_eq!(
            atoi("99999999999999999999x").unwrap_err(),
            r#"strconv.Atoi: parsing "99999999999999999999x": value out of range"#
        );
        assert_eq!(
            atoi("a\tb").unwrap_err(),
            r#"strconv.Atoi: parsing "a\tb": invalid syntax"#
        );
    }

    #[test]
    fn floats_like_go() {
        let f = |x: f64| {
            let mut o = Vec::new();
            push_go_float(&mut o, x);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(f(1.0), "1");
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(1e20), "100000000000000000000");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1.5e-7), "1.5e-7");
        assert_eq!(f(0.000001), "0.000001");
        assert_eq!(f(-0.0), "-0");
    }

    #[test]
    fn rfc6901_keys() {
        assert_eq!(decode_key("a~1b~0c"), "a/b~c");
        assert_eq!(decode_key("~01"), "~1");
        assert_eq!(decode_key("~2"), "~2");
    }
}
