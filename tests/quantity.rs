//! `resource.Quantity` against upstream's own test tables (tests/fixtures/quantity, see its
//! README), plus the behaviour read from upstream's code and properties that must hold for any
//! input.

use std::cmp::Ordering;

use hookscope::quantity::{Format, Quantity, QuantityError};
use proptest::prelude::*;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let text = match name {
        "parse" => include_str!("fixtures/quantity/parse.json"),
        "round_up" => include_str!("fixtures/quantity/round_up.json"),
        "cmp" => include_str!("fixtures/quantity/cmp.json"),
        "cmp_int64_and_dec" => include_str!("fixtures/quantity/cmp_int64_and_dec.json"),
        "neg" => include_str!("fixtures/quantity/neg.json"),
        "string" => include_str!("fixtures/quantity/string.json"),
        "parse_emit" => include_str!("fixtures/quantity/parse_emit.json"),
        "json_whitespace" => include_str!("fixtures/quantity/json_whitespace.json"),
        "new_scaled" => include_str!("fixtures/quantity/new_scaled.json"),
        "int64_amount" => include_str!("fixtures/quantity/int64_amount.json"),
        "parse_boundaries" => include_str!("fixtures/quantity/parse_boundaries.json"),
        "quirks" => include_str!("fixtures/quantity/quirks.json"),
        "json" => include_str!("fixtures/quantity/json.json"),
        other => panic!("no fixture {other}"),
    };
    serde_json::from_str(text).unwrap()
}

fn cases<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array {key}"))
}

/// The rows of one table of a fixture, checked to be as many as upstream has.
fn rows(name: &str, key: &str, count: usize) -> Vec<Value> {
    let all = cases(&fixture(name), key).to_vec();
    assert_eq!(all.len(), count, "{name}.{key}");
    all
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an i64: {v}"))
}

/// A format name; `None` for a name upstream does not define (which it prints as
/// DecimalExponent, and which the Rust enum cannot hold).
fn format(v: &Value) -> Option<Format> {
    match text(v) {
        "DecimalSI" => Some(Format::DecimalSI),
        "BinarySI" => Some(Format::BinarySI),
        "DecimalExponent" => Some(Format::DecimalExponent),
        _ => None,
    }
}

/// `decQuantity`/`intQuantity(mantissa, exponent, format)` of the Go tests (`repr` "int" for
/// the latter).
fn quantity(v: &Value) -> Quantity {
    let (m, e, f) = (
        int(&v["mantissa"]),
        int(&v["exponent"]) as i32,
        format(&v["format"]).unwrap(),
    );
    match v["repr"].as_str() {
        Some("int") => Quantity::new_scaled(m, e, f),
        _ => Quantity::new_decimal(m, e, f),
    }
}

fn parse(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn negated(q: &Quantity) -> Quantity {
    let mut n = q.clone();
    n.neg();
    n
}

/// Upstream's `Cmp` as -1, 0, 1.
fn cmp(a: &Quantity, b: &Quantity) -> i64 {
    match a.cmp_value(b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

#[test]
fn test_quantity_parse() {
    for case in rows("parse", "cases", 96) {
        let input = text(&case["input"]);
        let expect = quantity(&case);
        for as_dec in [false, true] {
            let mut got = parse(input);
            if as_dec {
                got.promote_to_dec();
                assert_eq!(got.as_int64(), None, "{input}");
            }
            assert_eq!(cmp(&expect, &got), 0, "{input}: {got} != {expect}");
            assert_eq!(got.format(), expect.format(), "{input}");
            for f in [Format::DecimalSI, Format::BinarySI, Format::DecimalExponent] {
                let mut other = got.clone();
                other.set_format(f);
                assert_eq!(cmp(&other, &got), 0, "{input}");
            }

            let trimmed = input.trim_start();
            let got = parse(&format!("-{trimmed}"));
            assert_eq!(cmp(&got, &negated(&expect)), 0, "-{input}");
            assert_eq!(got.format(), expect.format(), "-{input}");

            let got = parse(&format!("+{trimmed}"));
            assert_eq!(cmp(&got, &expect), 0, "+{input}");
            assert_eq!(got.format(), expect.format(), "+{input}");
        }
    }

    for case in rows("parse", "invalid", 13) {
        let input = text(&case["input"]);
        let err = Quantity::parse(input).expect_err(input);
        assert_eq!(err.to_string(), text(&case["error"]), "{input:?}");
    }
}

#[test]
fn test_quantity_round_up() {
    for case in rows("round_up", "cases", 12) {
        let input = text(&case["input"]);
        let scale = int(&case["scale"]) as i32;
        let expect = quantity(&case);
        for as_dec in [false, true] {
            let mut got = parse(input);
            if as_dec {
                got.promote_to_dec();
            }
            let exact = got.round_up(scale);
            assert_eq!(
                exact,
                case["exact"].as_bool().unwrap(),
                "{input} {scale} {as_dec}"
            );
            assert_eq!(
                cmp(&got, &expect),
                0,
                "{input} {scale} {as_dec}: {got} vs {expect}"
            );
        }
    }
}

#[test]
fn test_quantity_cmp() {
    let table = fixture("cmp");
    let strings = cases(&table, "strings");
    let quantities = cases(&table, "quantities");
    assert_eq!(strings.len() + quantities.len(), 12);
    for case in strings {
        let (x, y) = (parse(text(&case["x"])), parse(text(&case["y"])));
        assert_eq!(cmp(&x, &y), int(&case["cmp"]), "{case}");
    }
    for case in quantities {
        let (a, b) = (quantity(&case["a"]), quantity(&case["b"]));
        assert_eq!(cmp(&a, &b), int(&case["cmp"]), "{case}");
    }
}

#[test]
fn test_quantity_cmp_int64_and_dec() {
    for case in rows("cmp_int64_and_dec", "cases", 22) {
        let want = int(&case["cmp"]);
        for (a_dec, b_dec) in [(false, false), (true, false), (false, true), (true, true)] {
            let (mut a, mut b) = (quantity(&case["a"]), quantity(&case["b"]));
            if a_dec {
                a.promote_to_dec();
            }
            if b_dec {
                b.promote_to_dec();
            }
            assert_eq!(cmp(&a, &b), want, "{case} {a_dec} {b_dec}");
            assert_eq!(cmp(&b, &a), -want, "{case} {a_dec} {b_dec}");
            assert_eq!(a == b, want == 0);
            assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
        }
    }
}

#[test]
fn test_quantity_neg() {
    let table = fixture("neg");
    let strings = cases(&table, "strings");
    let values = cases(&table, "values");
    assert_eq!(strings.len() + values.len(), 9);
    for case in strings {
        let a = quantity(&case["a"]);
        let out = negated(&a);
        assert_ne!(cmp(&out, &a), 0, "{case}");
        assert_eq!(out.to_string(), text(&case["expect"]), "{case}");
    }
    for case in values {
        let out = negated(&quantity(&case["a"]));
        assert_eq!(cmp(&out, &quantity(&case["expected"])), 0, "{case}");
    }
}

#[test]
fn test_quantity_string() {
    for case in rows("string", "cases", 42) {
        let q = quantity(&case["in"]);
        let expect = text(&case["expect"]);
        assert_eq!(q.to_string(), expect, "{case}");
        assert_eq!(q.to_json_string(), format!("\"{expect}\""), "{case}");
        assert_eq!(serde_json::to_string(&q).unwrap(), q.to_json_string());
        let parsed = parse(expect);
        assert_eq!(
            parsed.kept_text(),
            Some(expect),
            "{case}: canonical text not kept"
        );

        let alternate = text(&case["alternate"]);
        if !alternate.is_empty() {
            let parsed = parse(alternate);
            assert_eq!(parsed.kept_text(), None, "{case}");
            assert_eq!(parsed.to_string(), expect, "{case}");
        }

        if !q.is_zero() {
            let mut n = q.clone();
            n.promote_to_dec();
            n.neg();
            assert_eq!(n.to_string(), format!("-{expect}"), "{case}");
        }
    }
}

#[test]
fn test_quantity_parse_emit() {
    for case in rows("parse_emit", "cases", 9) {
        let (input, expect) = (text(&case["input"]), text(&case["expect"]));
        assert_eq!(parse(input).to_string(), expect, "{input}");
        let neg = parse(&format!("-{input}"));
        if !neg.is_zero() {
            assert_eq!(neg.to_string(), format!("-{expect}"), "-{input}");
        }
    }
}

#[test]
fn test_json_whitespace() {
    for case in rows("json_whitespace", "cases", 8) {
        let (json, expect) = (text(&case["json"]), text(&case["expect"]));
        let got = Quantity::from_json_text(json).unwrap().unwrap();
        assert_eq!(got.to_string(), expect, "{json:?}");
        let value: Value = serde_json::from_str(json).unwrap();
        let got = Quantity::from_json(&value).unwrap().unwrap();
        assert_eq!(got.to_string(), expect, "{json:?}");
    }
}

#[test]
fn test_new_set_and_canonical_int64() {
    let table = fixture("new_scaled");
    let mut ran = 0;
    let mut skipped = 0;
    for group in ["milli", "new", "scaled"] {
        for case in cases(&table, group) {
            let Some(f) = format(&case["format"]) else {
                skipped += 1;
                continue;
            };
            let expect = text(&case["expect"]);
            let mut q = Quantity::new_scaled(int(&case["value"]), int(&case["scale"]) as i32, f);
            assert_eq!(q.to_string(), expect, "{group} {case}");
            q.promote_to_dec();
            assert_eq!(q.to_string(), expect, "{group} {case} as dec");
            ran += 1;
        }
    }
    for case in cases(&table, "int64_canonical") {
        let q = Quantity::new_scaled(
            int(&case["value"]),
            int(&case["scale"]) as i32,
            Format::DecimalExponent,
        );
        let mut expect = text(&case["result"]).to_string();
        if int(&case["exponent"]) != 0 {
            expect.push_str(&format!("e{}", case["exponent"]));
        }
        assert_eq!(q.to_string(), expect, "{case}");
        ran += 1;
    }
    // The rows with "invalidFormatDefaultsToExponent" (see the README).
    assert_eq!(skipped, 2);
    assert_eq!(ran, 25);
    for case in cases(&table, "zero") {
        let q = Quantity::new_scaled(
            int(&case["value"]),
            int(&case["scale"]) as i32,
            format(&case["format"]).unwrap(),
        );
        assert_eq!(q.to_string(), text(&case["expect"]), "{case}");
    }
}

#[test]
fn test_int64_amount() {
    let table = fixture("int64_amount");
    for case in cases(&table, "as_int64") {
        let q = Quantity::new_scaled(
            int(&case["value"]),
            int(&case["scale"]) as i32,
            Format::DecimalSI,
        );
        let want = case["ok"].as_bool().unwrap().then(|| int(&case["result"]));
        assert_eq!(q.as_int64(), want, "{case}");
    }
    for case in cases(&table, "sign") {
        let q = Quantity::new_scaled(
            int(&case["value"]),
            int(&case["scale"]) as i32,
            Format::DecimalSI,
        );
        assert_eq!(i64::from(q.signum()), int(&case["sign"]), "{case}");
    }
}

#[test]
fn test_parse_quantity_boundaries() {
    for case in rows("parse_boundaries", "cases", 72) {
        let input = text(&case["input"]);
        let q = parse(input);
        assert_eq!(q.as_int64(), case["as_int64"].as_i64(), "{input}");
        let dec = parse(text(&case["as_dec"]));
        assert_eq!(cmp(&q, &dec), 0, "{input}");
        let canonical = case["canonical"].as_str().unwrap_or(input);
        assert_eq!(q.to_string(), canonical, "{input}");
    }
}

#[test]
fn test_parse_zero_and_uninitialized() {
    // TestQuantityParseZero, TestUninitializedNoCrash
    assert_eq!(parse("0").to_string(), "0");
    assert_eq!(Quantity::default().to_string(), "0");
    assert_eq!(Quantity::default().to_json_string(), "\"0\"");
}

#[test]
fn quirks_read_from_upstream_code() {
    let table = fixture("quirks");
    for case in cases(&table, "cases") {
        let input = text(&case["input"]);
        match Quantity::parse(input) {
            Ok(q) => {
                assert_eq!(case["error"], Value::Null, "{input:?} parsed: {q}");
                assert_eq!(q.to_string(), text(&case["string"]), "{input:?}");
                assert_eq!(q.to_json_string(), format!("\"{}\"", text(&case["string"])));
                assert_eq!(Some(q.format()), format(&case["format"]), "{input:?}");
                if let Some(kept) = case["kept"].as_bool() {
                    assert_eq!(q.kept_text().is_some(), kept, "{input:?}");
                }
            }
            Err(e) => assert_eq!(
                e.to_string(),
                case["error"].as_str().unwrap_or("no error"),
                "{input:?}"
            ),
        }
    }
    for case in cases(&table, "cmp") {
        let (x, y) = (parse(text(&case["x"])), parse(text(&case["y"])));
        assert_eq!(cmp(&x, &y), int(&case["cmp"]), "{case}");
    }
}

fn check_json(case: &Value, got: Result<Option<Quantity>, QuantityError>) {
    match got {
        Ok(None) => assert_eq!(case["null"], Value::Bool(true), "{case}"),
        Ok(Some(q)) => assert_eq!(
            q.to_string(),
            case["string"].as_str().unwrap_or("?"),
            "{case}"
        ),
        Err(e) => assert_eq!(
            e.to_string(),
            case["error"].as_str().unwrap_or("no error"),
            "{case}"
        ),
    }
}

#[test]
fn unmarshal_json() {
    let table = fixture("json");
    for case in cases(&table, "raw") {
        check_json(case, Quantity::from_json_text(text(&case["json"])));
    }
    for case in cases(&table, "value") {
        check_json(case, Quantity::from_json(&case["value"]));
    }
}

#[test]
fn extreme_exponents_finish() {
    // Upstream would build numbers of up to ~2^31 digits for these; the value is still exact.
    let q = parse("1234567890123456789e900000000");
    assert_eq!(q.to_string(), "1234567890123456789e900000000");
    assert!(q > parse("1e899999999"));
    assert_eq!(parse("1e-2000000000").to_string(), "1e-9");
    assert_eq!(parse("-1e-2147483647").to_string(), "-1e-9");
    let wide = parse(&format!("{}e-2", "9".repeat(100_000))).to_string();
    assert!(wide.ends_with("90e-3") && wide.len() == 100_004);
    let long = format!("0.{}1Ki", "0".repeat(50_000));
    assert_eq!(parse(&long).to_string(), "1n");
}

/// The shapes of upstream's quantity fuzzer (quantity_test.go `fuzzer`).
fn fuzzed_quantity() -> impl Strategy<Value = Quantity> {
    prop_oneof![
        (0..i64::MAX).prop_map(|v| Quantity::new_decimal(v, 0, Format::BinarySI)),
        (0..1024i64, 0..5i32).prop_map(|(v, k)| Quantity::new_decimal(
            v << (10 * k),
            0,
            Format::BinarySI
        )),
        (0..i64::MAX, 0..4i32, any::<bool>()).prop_map(|(v, s, si)| {
            let f = if si {
                Format::DecimalSI
            } else {
                Format::DecimalExponent
            };
            Quantity::new_decimal(v, -s, f)
        }),
        (0..1000i64, 0..15i32, any::<bool>()).prop_map(|(v, s, si)| {
            let f = if si {
                Format::DecimalSI
            } else {
                Format::DecimalExponent
            };
            Quantity::new_decimal(v, s - 3, f)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// TestJSON: marshal then unmarshal gives the same value.
    #[test]
    fn test_json_round_trip(q in fuzzed_quantity()) {
        let json = q.to_json_string();
        let back = Quantity::from_json_text(&json).unwrap().unwrap();
        prop_assert_eq!(cmp(&back, &q), 0, "{}", json);
        let back = Quantity::from_json(&q.to_json()).unwrap().unwrap();
        prop_assert_eq!(cmp(&back, &q), 0, "{}", json);
    }

    /// Any text: no panic, and what parses prints something that parses again.
    #[test]
    fn any_text_is_handled(s in "[-+0-9.eEinumkKMGTP ]{0,40}") {
        if let Ok(q) = Quantity::parse(&s) {
            let printed = q.to_string();
            prop_assert!(Quantity::parse(&printed).is_ok(), "{} -> {}", s, printed);
        }
    }

    /// Long digit strings and wide exponents stay cheap and exact under negation.
    #[test]
    fn wide_inputs(digits in "[0-9]{1,300}", exp in any::<i64>(), suffix in "(|m|k|Ki|Ei|e)") {
        let s = format!("{digits}{suffix}{}", if suffix == "e" { exp.to_string() } else { String::new() });
        if let Ok(q) = Quantity::parse(&s) {
            let n = Quantity::parse(&format!("-{s}")).unwrap();
            prop_assert_eq!(cmp(&n, &negated(&q)), 0, "{}", s);
        }
    }
}
