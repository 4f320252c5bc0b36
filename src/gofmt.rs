//! Go's formatting of strings, reproduced where kube-apiserver's messages and annotations embed
//! them: `strconv.Quote` (`%q`) and encoding/json string literals; floats as `%g`; and integers
//! in decimal.

/// Whether Go's `strconv.IsPrint` holds. Approximation: Rust has no general-category table, so
/// control, separator, private-use and the common format (Cf) characters are treated as
/// non-printable and every other character (including unassigned ones) as printable.
fn is_print(c: char) -> bool {
    let u = u32::from(c);
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(u,
            0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2 | 0x180E
            | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
            | 0xE000..=0xF8FF | 0xFEFF | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD
            | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F
            | 0xF0000..=0x10FFFF))
}

/// Appends one rune the way `strconv.Quote` writes it inside the quotes.
pub fn push_quoted_rune(out: &mut String, c: char) {
    match c {
        '\u{7}' => out.push_str(r"\a"),
        '\u{8}' => out.push_str(r"\b"),
        '\u{c}' => out.push_str(r"\f"),
        '\n' => out.push_str(r"\n"),
        '\r' => out.push_str(r"\r"),
        '\t' => out.push_str(r"\t"),
        '\u{b}' => out.push_str(r"\v"),
        '\\' | '"' => {
            out.push('\\');
            out.push(c);
        }
        _ if is_print(c) => out.push(c),
        _ => {
            let u = u32::from(c);
            if u < 0x20 || u == 0x7f {
                out.push_str(&format!("\\x{u:02x}"));
            } else if u < 0x10000 {
                out.push_str(&format!("\\u{u:04x}"));
            } else {
                out.push_str(&format!("\\U{u:08x}"));
            }
        }
    }
}

/// Go's `strconv.Quote`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_quoted_rune(&mut out, c);
    }
    out.push('"');
    out
}

/// A float64 as Go's `fmt` prints it with `%g` (`strconv.FormatFloat(v, 'g', -1, 64)`): the
/// shortest digits that read back as `v`, in exponent form (`1.610612736e+09`, `1e-05`) when
/// the decimal exponent is below -4 or 6 and above, else plain (`0.5`, `123456`); `NaN`,
/// `+Inf`, `-Inf`.
pub fn format_float_g(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if v == 0.0 {
        return format!("{sign}0");
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d.ddde<exp>`.
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let nd = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.unsigned_abs());
    }
    // Plain: the decimal point after `exp + 1` digits.
    let dp = exp + 1;
    let mut out = String::from(sign);
    if dp <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', usize::try_from(-dp).unwrap_or(0)));
        out.push_str(&digits);
    } else if dp >= nd {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n(
            '0',
            usize::try_from(dp - nd).unwrap_or(0),
        ));
    } else {
        let (int, frac) = digits.split_at(usize::try_from(dp).unwrap_or(0));
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// A JSON string literal as Go's encoding/json writes it (HTML-escaping `<`, `>`, `&`, and
/// escaping U+2028/U+2029), appended to `out`.
pub fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends an integer in decimal, as Go (and serde_json) write integers.
pub(crate) fn push_decimal(out: &mut Vec<u8>, negative: bool, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        out.push(b'-');
    }
    out.extend_from_slice(digits.get(at..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::format_float_g;

    /// What Go's `fmt.Sprintf("%g", v)` prints.
    #[test]
    fn floats_print_as_go_g() {
        for (v, want) in [
            (1.610_612_736e9, "1.610612736e+09"),
            (0.5, "0.5"),
            (123_456.0, "123456"),
            (1_234_567.0, "1.234567e+06"),
            (1e6, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100"),
            (-2.5, "-2.5"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (0.0, "0"),
            (-0.0, "-0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
        ] {
            assert_eq!(format_float_g(v), want, "{v}");
        }
    }
}
