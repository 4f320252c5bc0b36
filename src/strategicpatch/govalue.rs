//! The Go side of a decoded JSON value: its dynamic type (`map[string]interface {}`,
//! `[]interface {}`, `string`, `int64`, `float64`, `bool` or nil, as
//! `UnmarshalCaseSensitivePreserveInts` leaves them), `==` on `interface{}` values, and `fmt`'s
//! `%v` and `%s` of them.

use serde_json::{Map, Value};

use super::Error;

/// A value's dynamic Go type; `None` stands for a nil interface (JSON `null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoType {
    Bool,
    String,
    Int64,
    Float64,
    Slice,
    Map,
}

/// The dynamic type of `v`: integers that fit in an `int64` are `int64`, every other number is a
/// `float64`.
pub(crate) fn go_type(v: &Value) -> Option<GoType> {
    match v {
        Value::Null => None,
        Value::Bool(_) => Some(GoType::Bool),
        Value::String(_) => Some(GoType::String),
        Value::Number(n) if n.is_i64() => Some(GoType::Int64),
        Value::Number(_) => Some(GoType::Float64),
        Value::Array(_) => Some(GoType::Slice),
        Value::Object(_) => Some(GoType::Map),
    }
}

/// `reflect.TypeOf(v)` printed with `%s`.
pub(crate) fn type_name(t: Option<GoType>) -> &'static str {
    match t {
        None => "%!s(<nil>)",
        Some(GoType::Bool) => "bool",
        Some(GoType::String) => "string",
        Some(GoType::Int64) => "int64",
        Some(GoType::Float64) => "float64",
        Some(GoType::Slice) => SLICE_TYPE,
        Some(GoType::Map) => MAP_TYPE,
    }
}

pub(crate) const MAP_TYPE: &str = "map[string]interface {}";
pub(crate) const SLICE_TYPE: &str = "[]interface {}";

/// `mergepatch.ErrBadArgType(expected, actual)`.
pub(crate) fn bad_arg_type(expected: &'static str, actual: &Value) -> Error {
    Error::BadArgType {
        expected,
        actual: type_name(go_type(actual)),
    }
}

fn uncomparable(t: GoType) -> Error {
    Error::Panic {
        message: if t == GoType::Map {
            "runtime error: comparing uncomparable type map[string]interface {}"
        } else {
            "runtime error: comparing uncomparable type []interface {}"
        },
    }
}

/// Go's `a == b` on two `interface{}` values: false when the dynamic types differ, a panic when
/// both hold maps or both hold slices.
pub(crate) fn go_eq(a: &Value, b: &Value) -> Result<bool, Error> {
    let (ta, tb) = (go_type(a), go_type(b));
    if ta != tb {
        return Ok(false);
    }
    Ok(match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        _ => return Err(uncomparable(ta.unwrap_or(GoType::Map))),
    })
}

/// Using `v` as a Go map key: a panic when it holds a map or a slice.
pub(crate) fn check_hashable(v: &Value) -> Result<(), Error> {
    match v {
        Value::Object(_) => Err(Error::Panic {
            message: "runtime error: hash of unhashable type map[string]interface {}",
        }),
        Value::Array(_) => Err(Error::Panic {
            message: "runtime error: hash of unhashable type []interface {}",
        }),
        _ => Ok(()),
    }
}

/// Whether Go's `map[interface{}]…` keyed by `keys` contains `v` (hashing both sides as Go does).
pub(crate) fn set_contains(keys: &[Value], v: &Value) -> Result<bool, Error> {
    check_hashable(v)?;
    for k in keys {
        if go_eq(k, v)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `fmt.Sprintf("%s", v)`.
pub(crate) fn fmt_s(v: &Value) -> String {
    let mut out = String::new();
    push_v(&mut out, v, true);
    out
}

/// `fmt.Sprintf("%v", m)` of a `map[string]interface{}`.
pub(crate) fn fmt_map(m: &Map<String, Value>) -> String {
    let mut out = String::new();
    push_map(&mut out, m, false);
    out
}

/// `fmt.Sprintf("%v", list)` of a `[]interface{}`.
pub(crate) fn fmt_list(l: &[Value]) -> String {
    let mut out = String::new();
    push_list(&mut out, l, false);
    out
}

fn push_list(out: &mut String, l: &[Value], s_verb: bool) {
    out.push('[');
    for (i, e) in l.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        push_v(out, e, s_verb);
    }
    out.push(']');
}

fn push_map(out: &mut String, m: &Map<String, Value>, s_verb: bool) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    out.push_str("map[");
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(k);
        out.push(':');
        if let Some(v) = m.get(k) {
            push_v(out, v, s_verb);
        }
    }
    out.push(']');
}

fn push_v(out: &mut String, v: &Value, s_verb: bool) {
    let wrong = |out: &mut String, ty: &str, text: &str| {
        if s_verb {
            out.push_str("%!s(");
            out.push_str(ty);
            out.push('=');
            out.push_str(text);
            out.push(')');
        } else {
            out.push_str(text);
        }
    };
    match v {
        Value::Null => out.push_str(if s_verb { "%!s(<nil>)" } else { "<nil>" }),
        Value::Bool(b) => wrong(out, "bool", if *b { "true" } else { "false" }),
        Value::String(s) => out.push_str(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => wrong(out, "int64", &i.to_string()),
            None => {
                let mut f = String::new();
                crate::metrics::expfmt::write_float(&mut f, n.as_f64().unwrap_or(0.0));
                wrong(out, "float64", &f);
            }
        },
        Value::Array(l) => push_list(out, l, s_verb),
        Value::Object(m) => push_map(out, m, s_verb),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_like_fmt() {
        let v = json!({"b": [1, "x", null], "a": 1.5, "c": {"d": true}, "e": 1e6});
        let Value::Object(m) = v else { unreachable!() };
        assert_eq!(
            fmt_map(&m),
            "map[a:1.5 b:[1 x <nil>] c:map[d:true] e:1e+06]"
        );
        assert_eq!(fmt_s(&json!(3)), "%!s(int64=3)");
        assert_eq!(fmt_s(&json!({"k": 1})), "map[k:%!s(int64=1)]");
    }

    #[test]
    fn compares_like_interface_equality() {
        assert_eq!(go_eq(&json!(1), &json!(1.0)).ok(), Some(false));
        assert_eq!(go_eq(&json!("a"), &json!({})).ok(), Some(false));
        assert!(go_eq(&json!({}), &json!({})).is_err());
        assert_eq!(go_eq(&json!(null), &json!(null)).ok(), Some(true));
    }
}
