//! `SetDefaults_ResourceList`: every quantity of a resource list is rounded up to milli precision
//! (`RoundUp(-3)`). A quantity finer than that (`100u`, `0.0001`) changes value and is written as
//! the apiserver then encodes it (`1m`); every other quantity keeps its value and is left as it is
//! (its canonical spelling is the encoder's business).

use serde_json::{Map, Value};

/// Rounds the quantities of the resource lists (maps) at `keys` of `object`.
pub(super) fn round_resource_lists(object: &mut Map<String, Value>, keys: &[&str]) {
    for key in keys {
        if let Some(Value::Object(list)) = object.get_mut(*key) {
            for quantity in list.values_mut() {
                if let Some(rounded) = rounded_up_to_milli(quantity) {
                    *quantity = Value::String(rounded);
                    super::go::wrote();
                }
            }
        }
    }
}

/// How a quantity was written, which decides how a computed one is written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    DecimalSI,
    DecimalExponent,
    BinarySI,
}

/// A parsed quantity: `±digits × 10^scale`, exactly.
struct Exact {
    negative: bool,
    digits: u128,
    scale: i32,
    format: Format,
}

/// The text of a quantity in a JSON value (Go's `Quantity.UnmarshalJSON` takes both strings and
/// numbers).
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A quantity as a signed count of nano-units (parsing rounds finer values up, as the apiserver
/// does), and its format.
pub(super) fn nanos(value: &Value) -> Option<(i128, Format)> {
    let q = parse(&text_of(value)?)?;
    let magnitude = if q.scale >= -9 {
        q.digits
            .checked_mul(10u128.checked_pow(u32::try_from(q.scale + 9).ok()?)?)?
    } else {
        let divisor = 10u128.checked_pow(u32::try_from(-9 - q.scale).ok()?)?;
        q.digits / divisor + u128::from(q.digits % divisor != 0)
    };
    let magnitude = i128::try_from(magnitude).ok()?;
    Some((if q.negative { -magnitude } else { magnitude }, q.format))
}

/// The text of the quantity rounded up to milli precision (`RoundUp(-3)`), as the apiserver then
/// encodes it, when rounding changes it.
fn rounded_up_to_milli(value: &Value) -> Option<String> {
    // Whole numbers of milli-units or more are multiples of 10^-3 whether they parse or not.
    if let Value::String(s) = value
        && whole_units(s)
    {
        return None;
    }
    let mut q = crate::quantity::Quantity::from_json(value).ok()??;
    (!q.round_up(-3)).then(|| q.to_string())
}

/// Digits followed by a suffix of at least milli-units: `500m`, `2`, `256Mi`, `1G`.
fn whole_units(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && matches!(
            &text[digits..],
            "" | "m" | "k" | "M" | "G" | "T" | "P" | "E" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"
        )
}

fn parse(text: &str) -> Option<Exact> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let mut digits: u128 = format!("{whole}{fraction}")
        .trim_start_matches('0')
        .parse()
        .unwrap_or(0);
    let fraction_len = i32::try_from(fraction.len()).ok()?;
    let (format, exponent) = match suffix {
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = "KMGTPE".find(&suffix[..1])? as u32 + 1;
            digits = digits.checked_mul(1024u128.checked_pow(power)?)?;
            (Format::BinarySI, 0)
        }
        _ => match decimal_si_exponent(suffix) {
            Some(e) => (Format::DecimalSI, e),
            None => {
                let e = suffix.strip_prefix(['e', 'E'])?;
                let unsigned = e.strip_prefix(['+', '-']).unwrap_or(e);
                if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (Format::DecimalExponent, e.parse().ok()?)
            }
        },
    };
    Some(Exact {
        negative,
        digits,
        scale: exponent.checked_sub(fraction_len)?,
        format,
    })
}

const DECIMAL_SI: &[(&str, i32)] = &[
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

fn decimal_si_exponent(suffix: &str) -> Option<i32> {
    DECIMAL_SI
        .iter()
        .find(|(s, _)| *s == suffix)
        .map(|(_, e)| *e)
}

/// The canonical text of `nanos × 10^-9` in `format` (apimachinery's `CanonicalizeBytes`).
pub(super) fn canonical(nanos: i128, format: Format) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let magnitude = nanos.unsigned_abs();
    const UNIT: u128 = 1_000_000_000;
    if format == Format::BinarySI && magnitude >= 1024 * UNIT && magnitude.is_multiple_of(UNIT) {
        let (mut n, mut power) = (magnitude / UNIT, 0usize);
        while power < 6 && n.is_multiple_of(1024) {
            n /= 1024;
            power += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
        return format!("{sign}{n}{suffix}");
    }
    let (mut mantissa, mut exponent) = (magnitude, -9);
    while mantissa != 0 && mantissa.is_multiple_of(1000) {
        mantissa /= 1000;
        exponent += 3;
    }
    if mantissa == 0 {
        exponent = 0;
    }
    let suffix = match (format, decimal_si_exponent_suffix(exponent)) {
        (Format::DecimalExponent, _) if exponent == 0 => String::new(),
        (Format::DecimalExponent, _) | (_, None) => format!("e{exponent}"),
        (_, Some(s)) => s.to_string(),
    };
    format!("{sign}{mantissa}{suffix}")
}

fn decimal_si_exponent_suffix(exponent: i32) -> Option<&'static str> {
    DECIMAL_SI
        .iter()
        .find(|(_, e)| *e == exponent)
        .map(|(s, _)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_units_never_round() {
        let suffixes = [
            "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "u", "n",
            "e3", "e-4", ".5", "x",
        ];
        for digits in [
            "0",
            "1",
            "007",
            "500",
            "123456789012345678901234567890",
            "9".repeat(40).leak(),
        ] {
            for suffix in suffixes {
                let text = format!("{digits}{suffix}");
                let value = Value::String(text.clone());
                let parsed = crate::quantity::Quantity::from_json(&value)
                    .ok()
                    .flatten()
                    .and_then(|mut q| (!q.round_up(-3)).then(|| q.to_string()));
                assert_eq!(rounded_up_to_milli(&value), parsed, "{text}");
                if whole_units(&text) {
                    assert_eq!(parsed, None, "{text}");
                }
            }
        }
    }

    #[test]
    fn only_sub_milli_quantities_change() {
        for (input, expected) in [
            (json!("100m"), None),
            (json!("1.5"), None),
            (json!("0.0001"), Some("1m")),
            (json!("100u"), Some("1m")),
            (json!("1500001u"), Some("1501m")),
            (json!("1.0001"), Some("1001m")),
            (json!("1e-4"), Some("1e-3")),
            (json!("0.5Ki"), None),
            (json!("1.0001Ki"), Some("1024103m")),
            (json!(0.0001), Some("1m")),
            (json!("-100u"), Some("-1m")),
            (json!("1.99999999Ki"), Some("2Ki")),
            (json!("10Gi"), None),
            (json!("0"), None),
            (json!("bogus"), None),
            (json!(true), None),
        ] {
            assert_eq!(rounded_up_to_milli(&input).as_deref(), expected, "{input}");
        }
    }
}
