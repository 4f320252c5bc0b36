//! The Kubernetes `format` library (`k8s.io/apiserver/pkg/cel/library/format.go`, 1.31 and
//! later): `format.<name>()` and `format.named(<string>)` give a format, whose
//! `validate(<string>)` is `optional.none()` for a valid string, else `optional.of(<errors>)`
//! with the texts of the apimachinery validators upstream calls.

use std::sync::{Arc, LazyLock};

use cel::extractors::This;
use cel::objects::{Opaque, OptionalValue};
use cel::{FunctionContext, ResolveResult, Value};
use kube_cel::cel;

use crate::config::validation;

/// The names of upstream's `ConstantFormats`.
const NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// A format (`kubernetes.NamedFormat`), by its name in `ConstantFormats`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Format(&'static str);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.NamedFormat"
    }
}

fn format_value(name: &'static str) -> Value {
    Value::Opaque(Arc::new(Format(name)))
}

/// Registers the library in `ctx`, in place of the dependency's.
pub(super) fn register(ctx: &mut cel::Context<'_>) {
    for name in NAMES {
        ctx.add_function(&format!("format.{name}"), move || -> ResolveResult {
            Ok(format_value(name))
        });
    }
    ctx.add_function("format.named", named);
    ctx.add_function("validate", validate);
}

/// `format.named(name)`: the format, optional; none for a name upstream does not know.
fn named(name: Arc<String>) -> ResolveResult {
    let found = NAMES.iter().find(|n| **n == name.as_str());
    Ok(Value::Opaque(Arc::new(match found {
        Some(n) => OptionalValue::of(format_value(n)),
        None => OptionalValue::none(),
    })))
}

fn validate(ftx: &FunctionContext, This(this): This<Value>, s: Arc<String>) -> ResolveResult {
    let Value::Opaque(o) = &this else {
        return Err(ftx.error("no such overload"));
    };
    let Some(Format(name)) = o.downcast_ref::<Format>() else {
        return Err(ftx.error("no such overload"));
    };
    let errors = errors(name, &s);
    Ok(Value::Opaque(Arc::new(if errors.is_empty() {
        OptionalValue::none()
    } else {
        OptionalValue::of(Value::List(Arc::new(
            errors
                .into_iter()
                .map(|e| Value::String(Arc::new(e)))
                .collect(),
        )))
    })))
}

/// `maskTrailingDash` of `NameIs…(name, prefix=true)`: a generated name's prefix may end in
/// `-`, validated as if it ended in `a`.
fn mask_trailing_dash(s: &str) -> String {
    match s.strip_suffix('-') {
        Some(_) if s.len() > 1 => format!("{}a", &s[..s.len() - 2]),
        _ => s.to_string(),
    }
}

/// The errors upstream's validator of the format `name` reports for `s`.
fn errors(name: &str, s: &str) -> Vec<String> {
    match name {
        "dns1123Label" => validation::is_dns1123_label(s),
        "dns1123Subdomain" => validation::is_dns1123_subdomain(s),
        "dns1035Label" => validation::is_dns1035_label(s),
        "qualifiedName" => validation::is_qualified_name(s),
        "dns1123LabelPrefix" => validation::is_dns1123_label(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => validation::is_dns1123_subdomain(&mask_trailing_dash(s)),
        "dns1035LabelPrefix" => validation::is_dns1035_label(&mask_trailing_dash(s)),
        "labelValue" => validation::is_valid_label_value(s),
        "uri" => uri_errors(s),
        "uuid" if !UUID.is_match(s) => vec!["does not match the UUID format".into()],
        "byte" if !BASE64.is_match(s) => vec!["invalid base64".into()],
        "date" if !is_date(s) => vec!["invalid date".into()],
        "datetime" if !is_date_time(s) => vec!["invalid datetime".into()],
        _ => Vec::new(),
    }
}

/// strfmt's `UUIDPattern`.
static UUID: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
        .expect("a valid pattern")
});

/// govalidator's `IsBase64` pattern (strfmt's `byte`).
static BASE64: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$",
    )
    .expect("a valid pattern")
});

/// strfmt's `DateTimePattern` (the time after the `t`).
static TIME: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
        .expect("a valid pattern")
});

/// strfmt's `IsDate`: Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = &s[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    match TIME.captures(parts[1]) {
        Some(m) => &m[1] <= "23" && &m[2] <= "59" && &m[3] <= "59",
        None => false,
    }
}

/// Go's `url.ParseRequestURI` errors, for the cases it reports without parsing further: an
/// absolute URI needs a scheme, else the path must start with `/`.
fn uri_errors(s: &str) -> Vec<String> {
    let fail = |why: &str| vec![format!("parse {s:?}: {why}")];
    if s.is_empty() {
        return fail("empty url");
    }
    if s.starts_with('/') {
        return Vec::new();
    }
    match s.find(':') {
        Some(0) => fail("missing protocol scheme"),
        Some(i)
            if s.as_bytes()[0].is_ascii_alphabetic()
                && s[..i]
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')) =>
        {
            Vec::new()
        }
        _ => fail("invalid URI for request"),
    }
}
