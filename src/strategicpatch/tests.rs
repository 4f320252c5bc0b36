//! Behaviour upstream's test tables do not exercise: error texts, Go panics, the ordering quirks.
//! Every expectation here is what upstream's apply code (v1.36.3, run in Go with a Go struct
//! matching the schema below) gives for the same input.

use serde_json::{Value, json};

use super::*;

fn schema() -> OpenApiSchema {
    OpenApiSchema::new(json!({"definitions": {
        "Item": {"properties": {
            "name": {"type": "string"},
            "value": {"type": "string"},
            "list": {"type": "array", "items": {"$ref": "#/definitions/Item"},
                "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
            "ints": {"type": "array", "items": {"type": "integer"}, "x-kubernetes-patch-strategy": "merge"},
            "plain": {"type": "array", "items": {"$ref": "#/definitions/Item"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "odd": {"type": "array", "items": {"type": "string"},
                "x-kubernetes-patch-strategy": "merge,replace"},
            "child": {"$ref": "#/definitions/io.k8s.Child"}
        }},
        "io.k8s.Child": {"type": "object"}
    }}))
}

fn apply(original: Value, patch: Value) -> Result<Value, Error> {
    let doc = schema();
    let root = doc.definition("Item").expect("Item");
    strategic_merge_patch(original, patch, &root)
}

fn error(original: Value, patch: Value) -> (String, u16) {
    let e = apply(original, patch).expect_err("an error");
    (e.to_string(), e.status_code())
}

#[test]
fn merges_lists_by_merge_key_and_keeps_original_order() {
    let got = apply(
        json!({"list": [{"name": "a", "value": "1"}, {"name": "b"}], "ints": [1, 2]}),
        json!({"list": [{"name": "c"}, {"name": "a", "value": "2"}], "ints": [3, 1]}),
    );
    assert_eq!(
        got,
        Ok(json!({
            "list": [{"name": "c"}, {"name": "a", "value": "2"}, {"name": "b"}],
            "ints": [3, 1, 2]
        }))
    );
}

#[test]
fn error_texts_are_upstreams() {
    let cases = [
        (
            json!({"list": [{"name": "a"}]}),
            json!({"list": [{"value": "b"}]}),
            "map: map[value:b] does not contain declared merge key: name",
            500,
        ),
        (
            json!({"labels": {"a": "b"}}),
            json!({"labels": {"$patch": "keep"}}),
            "unknown patch type: keep in map: map[$patch:keep]",
            500,
        ),
        (
            json!({"list": [{"name": "a"}]}),
            json!({"list": [{"name": "a", "$patch": 1}]}),
            "unknown patch type: %!s(int64=1) in map: map[$patch:1 name:a]",
            500,
        ),
        (
            json!({"list": [{"name": "a"}]}),
            json!({"list": [{"$patch": "merge"}]}),
            "merging lists cannot yet be specified in the patch",
            500,
        ),
        (
            json!({}),
            json!({"$retainKeys": "name"}),
            "invalid patch format of retainKeys",
            400,
        ),
        (
            json!({}),
            json!({"$retainKeys": ["name"], "value": "x"}),
            "invalid patch format of retainKeys",
            400,
        ),
        (
            json!({"ints": [1]}),
            json!({"$deleteFromPrimitiveList": [1]}),
            "invalid patch format of primitive list",
            400,
        ),
        (
            json!({}),
            json!({"$setElementOrder": [1]}),
            "invalid patch format of setElementOrder list",
            400,
        ),
        (
            json!({}),
            json!({"$setElementOrder/ints": "x"}),
            "expected a []interface {}, but received a string",
            500,
        ),
        (
            json!({"ints": {}}),
            json!({"$setElementOrder/ints": [1]}),
            "expected a []interface {}, but received a map[string]interface {}",
            500,
        ),
        (
            json!({"ints": [[1]]}),
            json!({"ints": [[2]]}),
            "lists of lists are not supported",
            422,
        ),
        (
            json!({"ints": [1]}),
            json!({"ints": ["a"]}),
            "list element types are not identical: [[1] [a]]",
            500,
        ),
        (
            json!({"ints": [1]}),
            json!({"ints": [1.5]}),
            "list element types are not identical: [[1] [1.5]]",
            500,
        ),
        (
            json!({"ints": []}),
            json!({"$setElementOrder/ints": []}),
            "no elements in any of the given slices",
            500,
        ),
        (
            json!({"plain": [{"name": "a"}]}),
            json!({"$deleteFromPrimitiveList/plain": [{"name": "a"}]}),
            "cannot merge lists without merge key for struct",
            500,
        ),
        (
            json!({"list": [{"name": "a"}]}),
            json!({"$setElementOrder/list": [{"name": "b"}], "list": [{"name": "a"}]}),
            "The order in patch list:\n[map[name:a]]\n doesn't match $setElementOrder list:\n[map[name:b]]\n",
            500,
        ),
        (
            json!({"odd": ["a"]}),
            json!({"odd": ["b"]}),
            "unexpected patch strategy: [merge replace]",
            500,
        ),
        (
            json!({"bogus": {"a": 1}}),
            json!({"bogus": {"b": 2}}),
            "unable to find api field in struct Item for the json field \"bogus\"",
            500,
        ),
        (
            json!({"child": {"a": {}}}),
            json!({"child": {"a": {"b": 1}}}),
            "unable to find api field in struct Child for the json field \"a\"",
            500,
        ),
        (
            json!({"labels": {"a": {}}}),
            json!({"labels": {"a": {"b": 1}}}),
            "merging an object in json but data type is not struct, instead is: map",
            500,
        ),
        (
            json!({"labels": {}}),
            json!({"$setElementOrder/labels": []}),
            "expected a []interface {}, but received a map[string]interface {}",
            500,
        ),
        (
            json!({}),
            json!({"$setElementOrder/name": []}),
            "expected slice or array type, but got: struct",
            500,
        ),
    ];
    for (original, patch, text, code) in cases {
        let what = format!("{original} + {patch}");
        assert_eq!(error(original, patch), (text.to_string(), code), "{what}");
    }
}

#[test]
fn go_panics_become_errors() {
    let cases = [
        (
            json!({"list": [{"name": {"k": 1}}]}),
            json!({"list": [{"name": {"k": 1}}]}),
            "panic: runtime error: comparing uncomparable type map[string]interface {}",
        ),
        (
            json!({"ints": [null, 1]}),
            json!({"ints": [2]}),
            "panic: runtime error: invalid memory address or nil pointer dereference",
        ),
        (
            json!({"plain": [{"name": "a"}]}),
            json!({"$setElementOrder/plain": [{"name": "a"}]}),
            "panic: runtime error: hash of unhashable type map[string]interface {}",
        ),
        (
            json!({"name": "a"}),
            json!({"$retainKeys": [["name"]]}),
            "panic: runtime error: hash of unhashable type []interface {}",
        ),
    ];
    for (original, patch, text) in cases {
        let what = format!("{original} + {patch}");
        assert_eq!(error(original, patch), (text.to_string(), 500), "{what}");
    }
}

#[test]
fn ints_and_floats_are_different_values() {
    assert_eq!(
        error(
            json!({"ints": [1]}),
            json!({"$deleteFromPrimitiveList/ints": [1.0]})
        ),
        (
            "list element types are not identical: [[1] [1]]".to_string(),
            500
        )
    );
    assert_eq!(
        apply(
            json!({"list": [{"name": 1, "value": "a"}]}),
            json!({"list": [{"name": 1.0, "value": "b"}]})
        ),
        Ok(json!({"list": [{"name": 1.0, "value": "b"}, {"name": 1, "value": "a"}]}))
    );
}

#[test]
fn directives_survive_where_upstream_keeps_them() {
    // A replaced list and a replaced map are taken as they are: nulls and `$patch` maps stay.
    assert_eq!(
        apply(
            json!({"plain": [{"name": "a"}], "labels": {"a": "b"}}),
            json!({"plain": [{"name": "b", "$patch": "delete"}], "labels": {"$patch": "replace", "c": null}})
        ),
        Ok(json!({"plain": [{"name": "b", "$patch": "delete"}], "labels": {"c": null}}))
    );
    // An added value loses its nulls and its `$patch` maps, not its other directives.
    assert_eq!(
        apply(
            json!({}),
            json!({"labels": {"a": null, "b": {"$patch": "delete"}, "$retainKeys": ["x"]}})
        ),
        Ok(json!({"labels": {"$retainKeys": ["x"]}}))
    );
}

#[test]
fn a_shortened_list_is_merged_in_its_own_array() {
    // Deleting 3 and 1 leaves [2, 4] in an array of 4: merging [1, 2] fills it in place, and the
    // deduplication that follows reorders it, so 4 is placed after the patch's items.
    assert_eq!(
        apply(
            json!({"ints": [2, 4, 1, 3]}),
            json!({"$deleteFromPrimitiveList/ints": [3, 1], "ints": [1, 2]})
        ),
        Ok(json!({"ints": [1, 2, 4]}))
    );
    // An empty patch list merges in place too: the deduplicated original is its own order.
    assert_eq!(
        apply(json!({"ints": [4, 4, 3, 1]}), json!({"ints": []})),
        Ok(json!({"ints": [4, 1, 3]}))
    );
}

#[test]
fn set_element_order_sees_the_original_list_as_go_slices_leave_it() {
    // Deleting `b` shifts `c` left in the original list's backing array and the added `d` lands
    // in the freed slot, so the server order `$setElementOrder` consults reads [a, c, d].
    let got = apply(
        json!({"list": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
        json!({
            "$setElementOrder/list": [{"name": "d"}, {"name": "a"}],
            "list": [{"name": "b", "$patch": "delete"}, {"name": "d"}]
        }),
    );
    assert_eq!(
        got,
        Ok(json!({"list": [{"name": "c"}, {"name": "d"}, {"name": "a"}]}))
    );
}

#[test]
fn patch_keys_are_visited_in_byte_order() {
    // `$deleteFromPrimitiveList/ints` sorts before `ints`: 3 is deleted, then merged back in.
    // (Upstream gives this or `[1]`, depending on Go's random map order.)
    assert_eq!(
        apply(
            json!({"ints": [1, 3]}),
            json!({"ints": [3], "$deleteFromPrimitiveList/ints": [3]})
        ),
        Ok(json!({"ints": [3, 1]}))
    );
}

#[test]
fn top_level_directives_and_documents() {
    assert_eq!(
        apply(
            json!({"name": "a"}),
            json!({"$patch": "replace", "value": "b"})
        ),
        Ok(json!({"value": "b"}))
    );
    assert_eq!(
        apply(json!({"name": "a"}), json!({"$patch": "delete"})),
        Ok(json!({}))
    );
    assert_eq!(
        apply(Value::Null, json!({"name": "a"})),
        Ok(json!({"name": "a"}))
    );
    assert_eq!(apply(json!([]), json!({})), Err(Error::BadJsonDoc));
    let doc = schema();
    let root = doc.definition("Item").expect("Item");
    // Upstream's TestStrategicMergePatch: "bad original", "bad patch".
    for (original, patch) in [
        (&b"<THIS IS NOT JSON>"[..], &b"{}"[..]),
        (b"{}", b"<THIS IS NOT JSON>"),
    ] {
        assert_eq!(
            strategic_merge_patch_json(original, patch, &root),
            Err(Error::BadJsonDoc)
        );
    }
    assert_eq!(
        strategic_merge_patch_json(b"null", b"{\"name\":\"a\"}", &root),
        Ok(json!({"name": "a"}))
    );
    assert_eq!(Error::BadJsonDoc.status_code(), 400);
}

#[test]
fn custom_resources_are_refused_before_the_patch_is_read() {
    assert_eq!(
        custom_resource_refusal(false),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    assert!(custom_resource_refusal(true).ends_with(", application/apply-patch+cbor"));
    assert_eq!(
        Error::UnsupportedFormat.to_string(),
        UNSUPPORTED_FORMAT_MESSAGE
    );
    assert_eq!(Error::UnsupportedFormat.status_code(), 400);
}
