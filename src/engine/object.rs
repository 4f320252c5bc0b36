//! An admission request's object (`object`, `oldObject`): a JSON value that may be known first by
//! its JSON text, and parsed only when something reads it.

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// An object of an admission request, or an object after a patch.
///
/// A captured object usually arrives as compact JSON, the form AdmissionReviews embed it in: such
/// an object keeps that text, reviews send it byte for byte, and its value is parsed the first
/// time something reads it (a selector, a condition, a patch, a view). Many dispatches never do.
pub struct Object {
    value: OnceLock<Value>,
    /// The compact JSON the object was given as; None when it was given as a value.
    json: Option<Box<str>>,
}

impl Object {
    /// An object given as a value.
    pub fn new(value: Value) -> Self {
        Object {
            value: OnceLock::from(value),
            json: None,
        }
    }

    /// An object given as JSON text that the caller has checked: compact (no whitespace outside
    /// strings) JSON of an object, within serde_json's nesting and number limits. Parsed when
    /// first read.
    pub fn from_checked_json(json: Box<str>) -> Self {
        Object {
            value: OnceLock::new(),
            json: Some(json),
        }
    }

    /// An object given both as a value and as the compact JSON text that encodes it (such as
    /// Go's encoding of a decoded object), which reviews send as it stands.
    pub fn with_json(value: Value, json: String) -> Self {
        Object {
            value: OnceLock::from(value),
            json: Some(json.into_boxed_str()),
        }
    }

    /// The object's value.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| {
            let json = self.json.as_deref().unwrap_or("null");
            crate::json::from_str(json).unwrap_or_else(|e| {
                debug_assert!(false, "object text that is not JSON: {e}: {json}");
                Value::Null
            })
        })
    }

    /// The JSON text the object was given as, when it was.
    pub fn json(&self) -> Option<&str> {
        self.json.as_deref()
    }

    /// Whether the value has been parsed (or was given).
    pub fn is_parsed(&self) -> bool {
        self.value.get().is_some()
    }

    /// The value, to change: the text it was given as, if any, no longer describes it and is
    /// dropped.
    pub fn value_mut(&mut self) -> &mut Value {
        self.value();
        self.json = None;
        self.value.get_mut().expect("parsed above")
    }

    /// The value, taken out.
    pub fn into_value(mut self) -> Value {
        self.value();
        self.value.take().unwrap_or_default()
    }
}

/// Reading the object reads its value, parsed on first use like a `LazyLock`'s.
impl std::ops::Deref for Object {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl Default for Object {
    fn default() -> Self {
        Object::new(Value::Null)
    }
}

impl From<Value> for Object {
    fn from(value: Value) -> Self {
        Object::new(value)
    }
}

impl Clone for Object {
    fn clone(&self) -> Self {
        Object {
            value: self.value.clone(),
            json: self.json.clone(),
        }
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        match (&self.json, &other.json) {
            (Some(a), Some(b)) if a == b => true,
            _ => self.value() == other.value(),
        }
    }
}

impl PartialEq<Value> for Object {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Object::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_parsed_when_first_read_and_kept() {
        let text = r#"{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"x":"1"}}"#;
        let o = Object::from_checked_json(text.into());
        assert!(!o.is_parsed());
        assert_eq!(o.json(), Some(text));
        assert_eq!(o.value()["metadata"]["name"], "a");
        assert!(o.is_parsed());
        assert_eq!(o.json(), Some(text));
        assert_eq!(
            o.clone().into_value(),
            crate::json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn objects_are_equal_by_value_whatever_they_were_given_as() {
        let a = Object::from_checked_json(r#"{"b":1,"a":2}"#.into());
        let b = Object::new(serde_json::json!({"a": 2, "b": 1}));
        let c = Object::from_checked_json(r#"{"a":2,"b":1.5}"#.into());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(b.json(), None);
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"a":2,"b":1}"#);
        let back: Object = crate::json::from_str(r#"{"a":2,"b":1}"#).unwrap();
        assert_eq!(back, a);
    }
}
