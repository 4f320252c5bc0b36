//! JSON merge patch (`application/merge-patch+json`, RFC 7386) as kube-apiserver applies it:
//! evanphx/json-patch v4's `MergePatch`, including where it departs from the RFC.
//!
//! Kept from evanphx: a member whose current value is `null` is replaced like a missing one;
//! `null`s are pruned from values that are added (recursively in objects, and inside array
//! elements, but an array keeps its own `null` elements); a patch value replacing a non-object
//! keeps its `null`s when it is not an object itself; a patch that is not an object or an array
//! is rejected, and so is a `null` document.

use serde_json::{Map, Value};

/// Why evanphx's `MergePatch` fails (its error texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MergeError {
    /// `ErrBadJSONDoc`.
    #[error("Invalid JSON Document")]
    BadDocument,
    /// `ErrBadJSONPatch`.
    #[error("Invalid JSON Patch")]
    BadPatch,
}

/// `jsonpatch.MergePatch(doc, patch)`.
pub(crate) fn merge_patch(doc: &Value, patch: &Value) -> Result<Value, MergeError> {
    match (doc, patch) {
        (Value::Null, _) => Err(MergeError::BadDocument),
        (_, Value::Null) => Err(MergeError::BadPatch),
        (Value::Object(d), Value::Object(p)) => {
            let mut out = d.clone();
            merge_members(&mut out, p);
            Ok(Value::Object(out))
        }
        // "Not an error, just not a doc": the patch replaces the document.
        (_, Value::Object(p)) => Ok(Value::Object(pruned_object(p))),
        (_, Value::Array(items)) => Ok(Value::Array(pruned_array(items))),
        _ => Err(MergeError::BadPatch),
    }
}

fn merge_members(doc: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            doc.remove(k);
            continue;
        }
        match doc.get_mut(k) {
            Some(cur) if !cur.is_null() => merge_value(cur, v),
            _ => {
                doc.insert(k.clone(), pruned(v));
            }
        }
    }
}

/// evanphx `merge(cur, patch)`, in place.
fn merge_value(cur: &mut Value, patch: &Value) {
    if let (Value::Object(c), Value::Object(p)) = (&mut *cur, patch) {
        merge_members(c, p);
        return;
    }
    // A non-object patch replacing an object is taken as is; anything replacing a non-object is
    // pruned first.
    *cur = if cur.is_object() {
        patch.clone()
    } else {
        pruned(patch)
    };
}

/// evanphx `pruneNulls`.
fn pruned(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(pruned_object(m)),
        Value::Array(items) => Value::Array(pruned_array(items)),
        other => other.clone(),
    }
}

fn pruned_object(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), pruned(v)))
        .collect()
}

fn pruned_array(items: &[Value]) -> Vec<Value> {
    items.iter().map(pruned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc_7386_examples() {
        // RFC 7386 appendix A, where evanphx agrees with it.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (doc, patch, want) in cases {
            assert_eq!(merge_patch(&doc, &patch).unwrap(), want, "{doc} + {patch}");
        }
    }

    #[test]
    fn evanphx_departures_from_the_rfc() {
        // A null current value is replaced like a missing one, with nulls pruned.
        assert_eq!(
            merge_patch(&json!({"a": null}), &json!({"a": {"b": null, "c": 1}})).unwrap(),
            json!({"a": {"c": 1}})
        );
        // Arrays keep their null elements; objects inside them lose null members.
        assert_eq!(
            merge_patch(&json!({}), &json!({"a": [null, {"x": null, "y": 1}]})).unwrap(),
            json!({"a": [null, {"y": 1}]})
        );
        // An array replacing an object is taken as is (no pruning inside).
        assert_eq!(
            merge_patch(&json!({"a": {"k": 1}}), &json!({"a": [{"x": null}]})).unwrap(),
            json!({"a": [{"x": null}]})
        );
        assert_eq!(
            merge_patch(&json!({}), &json!("x")),
            Err(MergeError::BadPatch)
        );
        assert_eq!(
            merge_patch(&json!({}), &Value::Null),
            Err(MergeError::BadPatch)
        );
        assert_eq!(
            merge_patch(&Value::Null, &json!({})),
            Err(MergeError::BadDocument)
        );
    }
}
