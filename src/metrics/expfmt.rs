//! The byte-level pieces of the Prometheus text exposition format (0.0.4) as prometheus/common
//! `expfmt/text_create.go` writes them: float formatting, label-value and HELP escaping.

/// Appends `f` exactly as `writeFloat` in `text_create.go` does: `1`, `0`, `-1`, `NaN`, `+Inf`,
/// `-Inf` hard-coded, everything else as Go's `strconv.AppendFloat(f, 'g', -1, 64)`.
pub(crate) fn write_float(out: &mut String, f: f64) {
    if f == 1.0 {
        out.push('1');
    } else if f == 0.0 {
        out.push('0');
    } else if f == -1.0 {
        out.push_str("-1");
    } else if f.is_nan() {
        out.push_str("NaN");
    } else if f == f64::INFINITY {
        out.push_str("+Inf");
    } else if f == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        write_go_g(out, f);
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)` for a finite, non-zero `f`.
///
/// The shortest round-tripping decimal digits (the same digits Go's shortest formatting picks;
/// Rust's `{:e}` yields them) are laid out with Go's `%g` rule for shortest precision: exponent
/// form when the decimal exponent is `< -4` or `>= 6` (`2.5e-05`, `1e+06`), plain form otherwise.
fn write_go_g(out: &mut String, f: f64) {
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    if f.is_sign_negative() {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        // %e: d[.ddd]e±dd
        let (first, rest) = digits
            .split_first()
            .map_or((b'0', &[][..]), |(f, r)| (*f, r));
        out.push(char::from(first));
        if !rest.is_empty() {
            out.push('.');
            for &d in rest {
                out.push(char::from(d));
            }
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        out.push_str(&e.to_string());
    } else {
        // %f with exactly the digits needed: dp = exp + 1 digits before the point.
        let dp = exp + 1;
        let nd = digits.len() as i32;
        if dp > 0 {
            for i in 0..dp {
                out.push(digit_at(&digits, i));
            }
        } else {
            out.push('0');
        }
        let frac = (nd - dp).max(0);
        if frac > 0 {
            out.push('.');
            for i in 1..=frac {
                out.push(digit_at(&digits, dp + i - 1));
            }
        }
    }
}

/// The `i`-th decimal digit, `0` outside the digit string (Go's `fmtF` padding).
fn digit_at(digits: &[u8], i: i32) -> char {
    usize::try_from(i)
        .ok()
        .and_then(|i| digits.get(i))
        .map_or('0', |&d| char::from(d))
}

/// Appends a label value escaped as `quotedEscaper` does: `\` → `\\`, newline → `\n`, `"` → `\"`.
pub(crate) fn write_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// Appends a HELP text escaped as `escaper` does: `\` → `\\`, newline → `\n`.
pub(crate) fn write_help(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `write_float` into a fresh string.
pub(crate) fn float_string(f: f64) -> String {
    let mut s = String::new();
    write_float(&mut s, f);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_g_formatting() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (0.0, "0"),
            (-1.0, "-1"),
            (0.005, "0.005"),
            (2.5, "2.5"),
            (10.0, "10"),
            (25.0, "25"),
            (600.0, "600"),
            (2.5e-5, "2.5e-05"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (9.218617303e9, "9.218617303e+09"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e100, "1e+100"),
            (-0.5, "-0.5"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for &(f, want) in cases {
            assert_eq!(float_string(f), want, "{f:?}");
        }
    }

    #[test]
    fn escaping() {
        let mut s = String::new();
        write_label_value(&mut s, "a\\b\"c\nd");
        assert_eq!(s, r#"a\\b\"c\nd"#);
        let mut h = String::new();
        write_help(&mut h, "a\\b\"c\nd");
        assert_eq!(h, r#"a\\b"c\nd"#);
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::float_string;

    /// Every number a real kube-apiserver v1.32 `/metrics` printed reformats to the same bytes.
    #[test]
    fn real_scrape_numbers_round_trip() {
        let values = include_str!("../../tests/fixtures/metrics/float-values-v1.32.txt");
        let mut checked = 0;
        for v in values.lines().filter(|l| !l.is_empty()) {
            let f: f64 = match v {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                "NaN" => f64::NAN,
                _ => v.parse().unwrap_or_else(|e| panic!("{v}: {e}")),
            };
            assert_eq!(float_string(f), v);
            checked += 1;
        }
        assert!(checked > 700, "{checked}");
    }
}
