//! What Go's defaulting code treats as "unset", over JSON values, and the writes it makes.
//!
//! The object is the one the apiserver decoded into its Go type, so a field absent from the JSON,
//! `null`, and Go's zero value are the same thing for some Go types and not for others: a pointer
//! (`*int32`) is nil only when absent or `null` (an explicit `0` is set), a plain `int32` is unset
//! at `0`, a string at `""`, and `len(x) == 0` on a slice or map also holds for `[]`/`{}`. A value
//! of the wrong JSON type could not have been decoded at all, so it is never "unset" and never
//! overwritten.

use serde_json::{Map, Value};

/// The test Go's defaulting code makes before it writes a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unset {
    /// `if x == nil` on a pointer, map or slice: absent or `null`.
    Nil,
    /// `if x == ""` on a string: absent, `null` or `""`.
    EmptyString,
    /// `if x == 0` on an integer: absent, `null` or `0`.
    Zero,
    /// `if len(x) == 0` on a string, slice or map: absent, `null`, `""`, `[]` or `{}`.
    Empty,
}

impl Unset {
    /// Whether `value` (the field as it is in the JSON object, if there) passes the test.
    pub(super) fn holds(self, value: Option<&Value>) -> bool {
        match (self, value) {
            (_, None | Some(Value::Null)) => true,
            (Unset::Nil, Some(_)) => false,
            (Unset::EmptyString, Some(Value::String(s))) => s.is_empty(),
            (Unset::Zero, Some(Value::Number(n))) => n.as_f64() == Some(0.0),
            (Unset::Empty, Some(Value::String(s))) => s.is_empty(),
            (Unset::Empty, Some(Value::Array(a))) => a.is_empty(),
            (Unset::Empty, Some(Value::Object(o))) => o.is_empty(),
            _ => false,
        }
    }
}

/// A default value as written by the Go code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lit {
    /// A string (or string-typed enum).
    Str(&'static str),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An empty struct, `&T{}`.
    EmptyObject,
}

impl Lit {
    pub(super) fn to_value(self) -> Value {
        match self {
            Lit::Str(s) => Value::from(s),
            Lit::Int(n) => Value::from(n),
            Lit::Bool(b) => Value::from(b),
            Lit::EmptyObject => Value::Object(Map::new()),
        }
    }
}

/// One `if <field> is unset { <field> = <default> }` of the Go code.
#[derive(Debug, Clone, Copy)]
pub(super) struct FieldDefault {
    /// The field's JSON name.
    pub key: &'static str,
    /// The Go test.
    pub unset: Unset,
    /// The value written.
    pub value: Lit,
}

/// Shorthand for a [`FieldDefault`] in the tables.
pub(super) const fn field(key: &'static str, unset: Unset, value: Lit) -> FieldDefault {
    FieldDefault { key, unset, value }
}

/// Writes `value` at `key` when the field passes `unset`.
pub(super) fn set_default(object: &mut Map<String, Value>, key: &str, unset: Unset, value: Value) {
    let current = object.get(key);
    if unset.holds(current) && current != Some(&value) {
        object.insert(key.to_string(), value);
        wrote();
    }
}

thread_local! {
    /// Whether the defaulting running on this thread wrote anything yet.
    static WROTE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Notes that the defaulting running wrote to its object: every write calls it.
pub(super) fn wrote() {
    WROTE.set(true);
}

/// Whether the defaulting wrote anything since the last call.
pub(super) fn take_wrote() -> bool {
    WROTE.replace(false)
}

/// Applies every default of `table` (each key once) to `object`. The members are visited once
/// and matched against the table, which costs less than looking each key up in the map.
pub(super) fn apply(object: &mut Map<String, Value>, table: &[FieldDefault]) {
    if table.len() > 64 {
        for d in table {
            set_default(object, d.key, d.unset, d.value.to_value());
        }
        return;
    }
    debug_assert!(
        table
            .iter()
            .enumerate()
            .all(|(i, d)| table[..i].iter().all(|e| e.key != d.key)),
        "a defaults table names each field once"
    );
    // Bit i: the field of `table[i]` holds a value its test does not take as unset; in
    // `present`, it holds one it does (which may be the default itself).
    let (mut set, mut present) = (0u64, 0u64);
    for (key, value) in object.iter() {
        if let Some(i) = table.iter().position(|d| d.key == key) {
            if table[i].unset.holds(Some(value)) {
                present |= 1 << i;
            } else {
                set |= 1 << i;
            }
        }
    }
    for (i, d) in table.iter().enumerate() {
        if set & (1 << i) == 0 {
            let value = d.value.to_value();
            if present & (1 << i) == 0 || object.get(d.key) != Some(&value) {
                object.insert(d.key.to_string(), value);
                wrote();
            }
        }
    }
}

/// The string at `key`, or `""` when it is absent, `null` or not a string (Go's zero value).
pub(super) fn string_at<'a>(object: &'a Map<String, Value>, key: &str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A field holding a pointer to a struct: the struct when the pointer is non-nil.
pub(super) fn pointer<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    object.get_mut(key).and_then(Value::as_object_mut)
}

/// A pointer (or map) field Go allocates when nil before writing into it (`if x == nil { x = &T{} }`):
/// the struct, created empty when the field is absent or `null`.
pub(super) fn pointer_or_new<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    set_default(object, key, Unset::Nil, Value::Object(Map::new()));
    pointer(object, key)
}

/// A field holding a struct by value: Go always has it, so an absent or `null` one is created
/// empty for the defaults written into it. A value of another type is left alone (`None`).
pub(super) fn value_struct<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    // Looked up before `entry`, which would make the key a `String` on every call.
    if object.get(key).is_none_or(Value::is_null) {
        object.insert(key.to_string(), Value::Object(Map::new()));
        wrote();
    }
    object.get_mut(key).and_then(Value::as_object_mut)
}

/// The struct elements of the slice at `key` (elements of another type are skipped).
pub(super) fn elements<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    object
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Whether a map or slice field is non-nil (present and not `null`, possibly empty).
pub(super) fn non_nil(object: &Map<String, Value>, key: &str) -> bool {
    !Unset::Nil.holds(object.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unset_follows_the_go_type() {
        let zero = json!(0);
        let empty = json!("");
        assert!(Unset::Nil.holds(None));
        assert!(Unset::Nil.holds(Some(&Value::Null)));
        assert!(!Unset::Nil.holds(Some(&zero)));
        assert!(Unset::Zero.holds(Some(&zero)));
        assert!(!Unset::Zero.holds(Some(&empty)));
        assert!(Unset::EmptyString.holds(Some(&empty)));
        assert!(!Unset::EmptyString.holds(Some(&zero)));
        assert!(Unset::Empty.holds(Some(&json!({}))));
        assert!(!Unset::Empty.holds(Some(&json!({"a": "b"}))));
    }
}
