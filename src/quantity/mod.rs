//! apimachinery's `resource.Quantity` (`k8s.io/apimachinery/pkg/api/resource`), the type of
//! container `resources.limits.cpu` and every other quantity field: parsing (`ParseQuantity`),
//! the canonical form (`String`, `MarshalJSON`), JSON decoding (`UnmarshalJSON`) and comparison
//! by value (`Cmp`, which `apiequality.Semantic.DeepEqual` uses). kube-apiserver decodes every
//! object into its Go type and encodes it again after each webhook patch, so a patched
//! `cpu: "0.5"` is stored as `cpu: "500m"`; this module says what each value becomes.
//!
//! Upstream keeps a value either as an `int64` with a power-of-ten scale (its fast path) or as
//! an arbitrary-precision decimal; both are reproduced, since the choice shows in
//! [`Quantity::as_int64`] and in a few 32-bit exponent wrap-arounds. The behaviour is the same in
//! every Kubernetes release from 1.28 to 1.37.
//!
//! Where upstream does not finish: on its arbitrary-precision path (19 digits or more, a
//! fraction with a binary suffix, an exponent below -9) upstream writes the value out in full
//! and strips its factors of ten one division at a time, so `1234567890123456789e100000` takes
//! it seconds, `…e1000000` many minutes, and `1e-2147483648` never ends. Comparing
//! `1e2147483647` with `1` never ends either, and with `1n` panics (a 32-bit scale difference
//! wraps). Here every one of these is answered at once, with the value upstream's 32-bit
//! arithmetic leads to.
//!
//! ```
//! use hookscope::quantity::{Format, Quantity};
//!
//! let cpu = Quantity::parse("0.5").unwrap();
//! assert_eq!(cpu.to_string(), "500m");
//! assert_eq!(cpu.to_json_string(), r#""500m""#);
//! assert_eq!(Quantity::parse("1024Mi").unwrap().to_string(), "1Gi");
//! assert_eq!(Quantity::parse("0.1m").unwrap().to_string(), "100u");
//! assert_eq!(Quantity::parse("0.1n").unwrap().to_string(), "1n");
//! assert_eq!(Quantity::parse("2e3").unwrap().format(), Format::DecimalExponent);
//! assert_eq!(Quantity::parse("1000m").unwrap(), Quantity::parse("1").unwrap());
//! ```

mod decimal;

use std::cmp::Ordering;
use std::fmt;

use decimal::Decimal;

/// The regular expression named by upstream's format error. The parser is a scanner that
/// accepts a little more: a sign or a suffix alone (`-`, `Ki`) is zero.
pub const SPLIT_RE: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// The errors `ParseQuantity` (and so `UnmarshalJSON`) returns; their texts are upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`: empty input, or characters outside the grammar (spaces included).
    #[error("quantities must match the regular expression '{}'", SPLIT_RE)]
    FormatWrong,
    /// `ErrNumeric`: a suffix that needs the slow path with no digits before it (`e-10`).
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`: an unknown suffix (`1i`, `0.1mi`, `1e`, an exponent beyond int64).
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// How a quantity is written: upstream's `Format`, remembered from the parsed suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`.
    DecimalExponent,
    /// `12Mi` (12 × 2^20).
    BinarySI,
    /// `12M` (12 × 10^6).
    DecimalSI,
}

impl Format {
    /// Upstream's name of the format.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::DecimalExponent => "DecimalExponent",
            Format::BinarySI => "BinarySI",
            Format::DecimalSI => "DecimalSI",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Upstream's two representations of the amount.
#[derive(Clone, Debug)]
enum Repr {
    /// `int64Amount`: `value × 10^scale`.
    Int { value: i64, scale: i32 },
    /// `inf.Dec`.
    Dec(Decimal),
}

/// A `resource.Quantity`. Equality and ordering are by value, as `Cmp` (so `1000m == 1`);
/// the format and the remembered text take no part in them.
#[derive(Clone, Debug)]
pub struct Quantity {
    repr: Repr,
    format: Format,
    /// The parsed text, kept when upstream judged it canonical (`s`); printed verbatim.
    text: Option<Box<str>>,
}

impl Default for Quantity {
    /// Zero, printed `0`.
    fn default() -> Self {
        Quantity::new_scaled(0, 0, Format::DecimalSI)
    }
}

/// The most digits an int64 is trusted with (`maxInt64Factors`).
const MAX_INT64_FACTORS: i32 = 18;
/// Upstream rounds every parsed value up to nanos.
const NANO: i32 = -9;

struct Scanned<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// `parseQuantityString`: splits sign, number (leading zeros dropped from `num`), fraction and
/// suffix.
fn scan(s: &str) -> Result<Scanned<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut out = Scanned {
        positive: true,
        value: "",
        num: "",
        denom: "",
        suffix: "",
    };
    let mut pos = 0;
    match b.first() {
        Some(b'-') => {
            out.positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        out.num = "0";
        out.value = "0";
        return Ok(out);
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    out.num = &s[num_start..pos];
    if pos >= end {
        out.value = s;
        return Ok(out);
    }
    if out.num.is_empty() {
        out.num = "0";
    }
    if b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        out.denom = &s[denom_start..pos];
        if pos >= end {
            out.value = s;
            return Ok(out);
        }
    }
    out.value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    out.suffix = &s[suffix_start..];
    Ok(out)
}

/// The suffixes of `DecimalSI`, by power of ten.
const DECIMAL_SUFFIXES: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// The suffixes of `BinarySI`, by power of two.
const BINARY_SUFFIXES: [(&str, i32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// `quantitySuffixer.interpret`: base, exponent and format of a suffix.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    if let Some(&(_, e)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((10, e, Format::DecimalSI));
    }
    if let Some(&(_, e)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((2, e, Format::BinarySI));
    }
    let rest = suffix.strip_prefix(['e', 'E']).filter(|r| !r.is_empty())?;
    // strconv.ParseInt(rest, 10, 64), then a conversion to int32 that keeps the low 32 bits.
    let parsed: i64 = rest.parse().ok()?;
    Some((10, parsed as i32, Format::DecimalExponent))
}

/// `int64Multiply`.
fn int64_multiply(a: i64, b: i64) -> Option<i64> {
    a.checked_mul(b)
}

/// `positiveScaleInt64`: `base × 10^scale`, or `None` on overflow.
fn positive_scale_int64(base: i64, scale: i32) -> Option<i64> {
    if base == 0 {
        return Some(0);
    }
    let mut v = base;
    for _ in 0..scale {
        v = v.checked_mul(10)?;
    }
    Some(v)
}

/// `negativeScaleInt64`: `base / 10^scale` rounded away from zero, and whether it was exact
/// (a negative scale, which upstream's 32-bit subtraction can produce, changes nothing).
fn negative_scale_int64(base: i64, scale: i32) -> (i64, bool) {
    if scale == 0 {
        return (base, true);
    }
    let mut value = base;
    let mut fraction = false;
    for _ in 0..scale {
        if !fraction && value % 10 != 0 {
            fraction = true;
        }
        value /= 10;
        if value == 0 {
            if fraction {
                return (if base > 0 { 1 } else { -1 }, false);
            }
            return (0, true);
        }
    }
    if fraction {
        value += if base > 0 { 1 } else { -1 };
    }
    (value, !fraction)
}

/// `removeInt64Factors(value, base)`: the value with factors of `base` divided out and how many.
fn remove_int64_factors(value: i64, base: i64) -> (i64, i32) {
    let mut times: i32 = 0;
    let negative = value < 0;
    let mut result = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    while result >= base && result % base == 0 {
        times = times.wrapping_add(1);
        result /= base;
    }
    (
        if negative {
            result.wrapping_neg()
        } else {
            result
        },
        times,
    )
}

impl Quantity {
    /// `ParseQuantity`: the quantity `text` denotes, in the format of its suffix. Accepts a sign,
    /// digits with an optional decimal point (`1.`, `.5`), and a suffix (`m`, `Ki`, `e3`, `E-3`,
    /// …); rounds up to nanos (`0.1n` → `1n`); caps binary-SI magnitudes at 2^63-1. No
    /// surrounding spaces (see [`Quantity::from_json`]).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if text == "0" {
            return Ok(Quantity {
                repr: Repr::Int { value: 0, scale: 0 },
                format: Format::DecimalSI,
                text: Some(text.into()),
            });
        }
        let Scanned {
            positive,
            value,
            num,
            denom,
            suffix,
        } = scan(text)?;
        let (base, exponent, format) = interpret(suffix).ok_or(QuantityError::Suffix)?;

        // Go's int32(len(...)) keeps the low 32 bits.
        let digit_count = num.len().wrapping_add(denom.len()) as i32;
        let mut scale: i32 = 0;
        let mut mantissa: i64 = 1;
        let precision = match format {
            Format::DecimalExponent | Format::DecimalSI => {
                scale = exponent;
                MAX_INT64_FACTORS.wrapping_sub(digit_count)
            }
            Format::BinarySI => {
                if exponent >= 0 && denom.is_empty() {
                    mantissa = 1i64 << exponent;
                    // int32(float32(exponent)*3/10) for exponents 10..60
                    15i32
                        .wrapping_sub(num.len() as i32)
                        .wrapping_sub(exponent * 3 / 10)
                        .wrapping_sub(1)
                } else {
                    -1
                }
            }
        };

        if precision >= 0 {
            scale = scale.wrapping_sub(denom.len() as i32);
            if scale >= NANO {
                let shifted = [num, denom].concat();
                let parsed: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
                if let Some(mut result) = int64_multiply(parsed, mantissa) {
                    if !positive {
                        result = -result;
                    }
                    let canonical = match format {
                        Format::BinarySI => exponent % 10 == 0 && parsed & 0x07 != 0,
                        _ => {
                            scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0')
                        }
                    };
                    return Ok(Quantity {
                        repr: Repr::Int {
                            value: result,
                            scale,
                        },
                        format,
                        text: canonical.then(|| text.into()),
                    });
                }
            }
        }

        // The arbitrary-precision path (inf.Dec).
        if !value.bytes().any(|b| b.is_ascii_digit()) {
            return Err(QuantityError::Numeric);
        }
        let mut inf_scale = denom.len() as i32;
        if base == 10 {
            inf_scale = inf_scale.wrapping_add(exponent.wrapping_neg());
        }
        let digits = value.bytes().filter(u8::is_ascii_digit);
        let mut amount = Decimal::from_ascii_digits(false, digits, -i64::from(inf_scale));
        if base == 2 {
            amount.mul_pow2(exponent.unsigned_abs());
        }
        // Rounded up to nanos so that asking for a tiny amount still gets some.
        amount.round_up(i64::from(NANO));
        let mut format = format;
        if format == Format::BinarySI {
            let max = Decimal::from_i64(i64::MAX, 0);
            if amount > max {
                amount = max;
            }
            if amount < Decimal::from_i64(1, 0) && !amount.is_zero() {
                format = Format::DecimalSI;
            }
        }
        if value.starts_with('-') {
            amount = amount.negated();
        }
        Ok(Quantity {
            repr: Repr::Dec(amount),
            format,
            text: None,
        })
    }

    /// `value × 10^scale` in upstream's int64 representation (`NewQuantity`,
    /// `NewMilliQuantity`, `NewScaledQuantity`, `SetScaled`).
    pub fn new_scaled(value: i64, scale: i32, format: Format) -> Quantity {
        Quantity {
            repr: Repr::Int { value, scale },
            format,
            text: None,
        }
    }

    /// `mantissa × 10^exponent` in upstream's arbitrary-precision representation
    /// (`NewDecimalQuantity`), where [`Quantity::as_int64`] answers `None`.
    pub fn new_decimal(mantissa: i64, exponent: i32, format: Format) -> Quantity {
        Quantity {
            repr: Repr::Dec(Decimal::from_i64(mantissa, i64::from(exponent))),
            format,
            text: None,
        }
    }

    /// `UnmarshalJSON` on a decoded JSON value. `null` gives `None`: upstream then leaves a
    /// pointer field nil, and a value field or map entry (`resources.limits.cpu: null`) zero,
    /// printed `0`. A string is parsed with
    /// surrounding white space trimmed; other values are parsed from their JSON text, so
    /// numbers are accepted and `true`, arrays and objects fail with
    /// [`QuantityError::FormatWrong`].
    ///
    /// Upstream sees the raw bytes, which a decoded value no longer has; the text is
    /// reconstructed:
    /// - a string is taken as Go's `encoding/json` writes it (how kube-apiserver re-encodes a
    ///   patched object): any character it escapes (`"`, `\`, control characters, `<`, `>`,
    ///   `&`, U+2028, U+2029) leaves a backslash upstream and fails. A string that arrived
    ///   with other escapes (`"\u0031"`) fails upstream but parses here;
    /// - a number is written by `serde_json`: integers exactly, but a number with a fraction
    ///   or exponent, or beyond 64 bits, has become an `f64` printed in shortest form. Its value
    ///   differs when the literal had more than 17 significant digits, and its format when it
    ///   was written with an exponent: `1e3` is `1e3` upstream but `1000.0`, so `1k`, here
    ///   (with serde_json's `arbitrary_precision` feature a number keeps its literal and this
    ///   gap closes).
    ///
    /// [`Quantity::from_json_text`] on the raw text has none of these gaps.
    pub fn from_json(value: &serde_json::Value) -> Result<Option<Quantity>, QuantityError> {
        match value {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::String(s) => {
                if s.chars().any(go_json_escapes) {
                    return Err(QuantityError::FormatWrong);
                }
                Quantity::parse(s.trim()).map(Some)
            }
            serde_json::Value::Number(n) => Quantity::parse(&n.to_string()).map(Some),
            serde_json::Value::Bool(b) => {
                Quantity::parse(if *b { "true" } else { "false" }).map(Some)
            }
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                Err(QuantityError::FormatWrong)
            }
        }
    }

    /// `UnmarshalJSON` exactly, on the raw JSON text of the value (as a
    /// `serde_json::value::RawValue` holds it): `null` gives `None`; surrounding quotes are
    /// removed without unescaping, and white space is trimmed.
    pub fn from_json_text(raw: &str) -> Result<Option<Quantity>, QuantityError> {
        if raw == "null" {
            return Ok(None);
        }
        let inner = match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            Some(inner) => inner,
            None => raw,
        };
        Quantity::parse(inner.trim()).map(Some)
    }

    /// `MarshalJSON`: the JSON string of the `Display` text (the kept text when upstream
    /// kept it, else the canonical form), quotes included. It never needs escaping.
    pub fn to_json_string(&self) -> String {
        format!("\"{self}\"")
    }

    /// The JSON value `MarshalJSON` writes.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::String(self.to_string())
    }

    /// The format the quantity is written in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Changes the format, as assigning `q.Format` does upstream: the kept text (if any) is
    /// still what is printed.
    pub fn set_format(&mut self, format: Format) {
        self.format = format;
    }

    /// The input text `parse` kept because upstream judged it canonical (its `s`), which
    /// `Display` and [`Quantity::to_json_string`] print verbatim. Upstream's
    /// check is loose: `+1`, `01`, `1.500`, `1E3` and `1e+3` are all kept as written.
    pub fn kept_text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// `AsInt64`: the value when upstream holds it as an int64 (its fast path) and it is a
    /// whole number that fits; `None` otherwise, including every value on the
    /// arbitrary-precision path (for example any number of 19 or more digits).
    pub fn as_int64(&self) -> Option<i64> {
        match self.repr {
            Repr::Int { value, scale } => match scale.cmp(&0) {
                Ordering::Equal => Some(value),
                Ordering::Less => None,
                Ordering::Greater => positive_scale_int64(value, scale),
            },
            Repr::Dec(_) => None,
        }
    }

    /// `ToDec`: moves the value to the arbitrary-precision representation, as upstream does
    /// in place whenever `AsDec` is called; [`Quantity::as_int64`] then answers `None`.
    pub fn promote_to_dec(&mut self) {
        if let Repr::Int { .. } = self.repr {
            self.repr = Repr::Dec(self.decimal());
        }
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.signum() == 0
    }

    /// -1, 0 or 1 (`Sign`).
    pub fn signum(&self) -> i32 {
        match &self.repr {
            Repr::Int { value, .. } => value.signum() as i32,
            Repr::Dec(d) => d.signum(),
        }
    }

    /// `Neg`: the value negated in place. Like upstream's int64 path, the most negative int64
    /// stays as it is.
    pub fn neg(&mut self) {
        self.text = None;
        self.repr = match std::mem::replace(&mut self.repr, Repr::Int { value: 0, scale: 0 }) {
            Repr::Int { value, scale } => Repr::Int {
                value: value.wrapping_neg(),
                scale,
            },
            Repr::Dec(d) => Repr::Dec(d.negated()),
        };
    }

    /// `RoundUp`: rounds away from zero to a multiple of `10^scale`; whether no precision was
    /// lost.
    pub fn round_up(&mut self, scale: i32) -> bool {
        match &mut self.repr {
            Repr::Int { value, scale: own } => {
                if *own >= scale {
                    return true;
                }
                self.text = None;
                let (v, exact) = negative_scale_int64(*value, scale.wrapping_sub(*own));
                *value = v;
                *own = scale;
                exact
            }
            Repr::Dec(d) => {
                self.text = None;
                d.round_up(i64::from(scale))
            }
        }
    }

    /// `Cmp`: compares by value.
    pub fn cmp_value(&self, other: &Quantity) -> Ordering {
        if let (
            Repr::Int {
                value: a,
                scale: sa,
            },
            Repr::Int {
                value: b,
                scale: sb,
            },
        ) = (&self.repr, &other.repr)
            && sa == sb
        {
            return a.cmp(b);
        }
        self.decimal().cmp(&other.decimal())
    }

    /// `CmpInt64`: compares with a whole number.
    pub fn cmp_int64(&self, other: i64) -> Ordering {
        self.decimal().cmp(&Decimal::from_i64(other, 0))
    }

    fn decimal(&self) -> Decimal {
        match &self.repr {
            Repr::Int { value, scale } => Decimal::from_i64(*value, i64::from(*scale)),
            Repr::Dec(d) => d.clone(),
        }
    }

    /// `CanonicalizeBytes`: the canonical form, number then suffix.
    fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".to_string();
        }
        let mut format = self.format;
        let mut binary: Option<Quantity> = None;
        if format == Format::BinarySI {
            if self.cmp_int64(-1024) == Ordering::Greater && self.cmp_int64(1024) == Ordering::Less
            {
                format = Format::DecimalSI;
            } else {
                let mut rounded = self.clone();
                if rounded.round_up(0) {
                    binary = Some(rounded);
                } else {
                    format = Format::DecimalSI;
                }
            }
        }
        let mut out = String::new();
        match (format, binary) {
            (Format::BinarySI, Some(rounded)) => {
                let int64 = match rounded.repr {
                    Repr::Int { value, scale } => positive_scale_int64(value, scale),
                    Repr::Dec(_) => None,
                };
                let (number, times) = match int64 {
                    Some(v) => {
                        let (amount, times) = remove_int64_factors(v, 1024);
                        (amount.to_string(), times)
                    }
                    None => rounded.decimal().remove_1024_factors(),
                };
                out.push_str(&number);
                let power = times.wrapping_mul(10);
                if let Some((suffix, _)) = BINARY_SUFFIXES.iter().find(|(_, e)| *e == power) {
                    out.push_str(suffix);
                }
            }
            _ => {
                let exponent = self.canonical_decimal(&mut out);
                if format == Format::DecimalExponent {
                    if exponent != 0 {
                        out.push('e');
                        out.push_str(&exponent.to_string());
                    }
                } else if let Some((suffix, _)) =
                    DECIMAL_SUFFIXES.iter().find(|(_, e)| *e == exponent)
                {
                    // A power of ten without a suffix (beyond E or below n) is written with
                    // none: upstream prints 1e21 in DecimalSI as "1".
                    out.push_str(suffix);
                }
            }
        }
        out
    }

    /// `AsCanonicalBytes`: writes the mantissa with the exponent made a multiple of three,
    /// and returns that exponent. Upstream's exponent arithmetic is 32-bit and wraps.
    fn canonical_decimal(&self, out: &mut String) -> i32 {
        if let Repr::Int { value, scale } = self.repr {
            let (amount, times) = remove_int64_factors(value, 10);
            let exponent = scale.wrapping_add(times);
            let adjusted = match exponent % 3 {
                1 | -2 => amount
                    .checked_mul(10)
                    .map(|a| (a, exponent.wrapping_sub(1))),
                2 | -1 => amount
                    .checked_mul(100)
                    .map(|a| (a, exponent.wrapping_sub(2))),
                _ => Some((amount, exponent)),
            };
            if let Some((amount, exponent)) = adjusted {
                out.push_str(&amount.to_string());
                return exponent;
            }
        }
        let d = self.decimal();
        // -scale + trailing zeros, accumulated in int32 upstream.
        let mut exponent = d.exp() as i32;
        let mut zeros = 0;
        while exponent % 3 != 0 {
            zeros += 1;
            exponent = exponent.wrapping_sub(1);
        }
        d.write_scaled(zeros, out);
        exponent
    }
}

/// Whether Go's `encoding/json` writes the character escaped.
fn go_json_escapes(c: char) -> bool {
    matches!(c, '"' | '\\' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}') || c < ' '
}

impl fmt::Display for Quantity {
    /// `String`: the kept text, or the canonical form. A BinarySI quantity of 1024 or more is
    /// written as a whole number times a power of 1024, in full: one built with a huge power of
    /// ten (through [`Quantity::new_decimal`] or [`Quantity::set_format`]; parsing caps binary
    /// quantities at 2^63-1) prints as many digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.text {
            Some(text) => f.write_str(text),
            None => f.write_str(&self.canonical()),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_value(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_value(other)
    }
}

impl serde::Serialize for Quantity {
    /// As `MarshalJSON`: the `Display` text.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn fixture(text: &str) -> Value {
        crate::json::from_str(text).unwrap()
    }

    fn int(v: &Value) -> i64 {
        v.as_i64().unwrap()
    }

    #[test]
    fn scanner_matches_upstream_table() {
        let cases = fixture(include_str!("../../tests/fixtures/quantity/scan.json"));
        for case in cases["cases"].as_array().unwrap() {
            let input = case["input"].as_str().unwrap();
            let s = scan(input).unwrap();
            let got = (s.positive, s.value, s.num, s.denom, s.suffix);
            let want = (
                case["positive"].as_bool().unwrap(),
                case["value"].as_str().unwrap(),
                case["num"].as_str().unwrap(),
                case["denom"].as_str().unwrap(),
                case["suffix"].as_str().unwrap(),
            );
            assert_eq!(got, want, "{input}");
        }
    }

    #[test]
    fn int64_helpers_match_upstream_tables() {
        let cases = fixture(include_str!("../../tests/fixtures/quantity/math.json"));
        for case in cases["remove_int64_factors"].as_array().unwrap() {
            let got = remove_int64_factors(int(&case["value"]), int(&case["base"]));
            assert_eq!(
                got,
                (int(&case["result"]), int(&case["times"]) as i32),
                "{case}"
            );
        }
        for case in cases["negative_scale_int64"].as_array().unwrap() {
            let got = negative_scale_int64(int(&case["base"]), int(&case["scale"]) as i32);
            assert_eq!(
                got,
                (int(&case["result"]), case["exact"].as_bool().unwrap()),
                "{case}"
            );
        }
    }
}
