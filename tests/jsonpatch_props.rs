//! Properties of the evanphx-compatible patch applier: no panics on any input, functional apply,
//! agreement with `json_patch::diff` on ordinary documents, and a stable Go re-marshalling.

use hookscope::jsonpatch;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "a", "b", "arr", "", "x/y", "t~n", "<&>", "\u{2028}", "é"
        ])
        .prop_map(str::to_owned),
        "[a-c~/0-9]{0,3}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::String),
        proptest::sample::select(vec!["<", "a&b", "\u{2028}", "\"", "\\", "\n"])
            .prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    proptest::collection::vec((key(), value()), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>()))
}

fn path() -> impl Strategy<Value = Value> {
    let seg = prop_oneof![
        proptest::sample::select(vec![
            "a",
            "b",
            "arr",
            "0",
            "1",
            "2",
            "-",
            "-1",
            "-9",
            "01",
            "+1",
            "",
            "~0",
            "~1",
            "x~1y",
            "99999999999999999999",
        ])
        .prop_map(str::to_owned),
        key(),
    ];
    prop_oneof![
        8 => proptest::collection::vec(seg, 0..4).prop_map(|s| Value::from(
            s.iter().map(|s| format!("/{s}")).collect::<String>()
        )),
        1 => "[a-z/]{0,4}".prop_map(Value::from),
        1 => scalar(),
    ]
}

fn operation() -> impl Strategy<Value = Value> {
    let op = prop_oneof![
        10 => proptest::sample::select(vec!["add", "remove", "replace", "move", "copy", "test"])
            .prop_map(Value::from),
        1 => Just(Value::from("frobnicate")),
        1 => scalar(),
    ];
    (
        op,
        proptest::option::of(path()),
        proptest::option::of(path()),
        proptest::option::of(value()),
    )
        .prop_map(|(op, path, from, value)| {
            let mut m = Map::new();
            m.insert("op".into(), op);
            for (k, v) in [("path", path), ("from", from), ("value", value)] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            Value::Object(m)
        })
}

fn patch() -> impl Strategy<Value = Value> {
    proptest::collection::vec(operation(), 0..5).prop_map(Value::Array)
}

/// Arbitrary bytes biased towards JSON-looking text.
fn jsonish_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            3 => proptest::sample::select(b"{}[]\":,-0123456789 etrufalsn\\/uop".to_vec()),
            1 => any::<u8>(),
        ],
        0..64,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decode_and_apply_never_panic_on_bytes(patch in jsonish_bytes(), doc in jsonish_bytes()) {
        if let Ok(p) = jsonpatch::decode(&patch) {
            let _ = p.to_go_json();
            let _ = p.apply(&doc);
            let _ = p.apply(br#"{"a":{"b":[1,{"c":null}]},"arr":[1,2,3]}"#);
        }
    }

    #[test]
    fn apply_never_panics_and_is_functional(doc in object(), patch in patch()) {
        let bytes = serde_json::to_vec(&patch).unwrap();
        let p = jsonpatch::decode(&bytes).expect("an array of objects always decodes");
        prop_assert_eq!(p.len(), patch.as_array().unwrap().len());
        let before = doc.clone();
        let first = p.apply_to_value(&doc);
        prop_assert_eq!(&doc, &before);
        prop_assert_eq!(&p.apply_to_value(&doc), &first);
        let doc_bytes = serde_json::to_vec(&doc).unwrap();
        let out = p.apply(&doc_bytes);
        prop_assert_eq!(out.is_ok(), first.is_ok());
        if let Ok(out) = out {
            // The output is valid JSON and applying the empty patch to it is a fixpoint.
            prop_assert!(serde_json::from_slice::<Value>(&out).is_ok());
            let empty = jsonpatch::decode(b"[]").unwrap();
            prop_assert_eq!(empty.apply(&out).unwrap(), out);
        }
    }

    #[test]
    fn diff_patches_reproduce_the_target(a in object(), b in object()) {
        let diff = json_patch::diff(&a, &b);
        let bytes = serde_json::to_vec(&diff).unwrap();
        let p = jsonpatch::decode(&bytes).unwrap();
        prop_assert_eq!(p.apply_to_value(&a), Ok(b));
    }

    #[test]
    fn to_go_json_redecodes_to_an_equal_patch(patch in patch(), pretty in any::<bool>()) {
        let bytes = if pretty {
            serde_json::to_vec_pretty(&patch).unwrap()
        } else {
            serde_json::to_vec(&patch).unwrap()
        };
        let p = jsonpatch::decode(&bytes).unwrap();
        let go = p.to_go_json();
        let specials = ['\n', '<', '>', '&', '\u{2028}'];
        prop_assert!(!go.contains(specials), "{}", go);
        let again = jsonpatch::decode(go.as_bytes()).unwrap();
        prop_assert_eq!(again.len(), p.len());
        prop_assert_eq!(again.to_go_json(), go.clone());
        prop_assert_eq!(jsonpatch::decode(again.to_go_json().as_bytes()).unwrap(), again);
        // Without HTML-special characters or whitespace the re-decoded patch is the same patch.
        if !pretty && !go.contains("\\u") {
            prop_assert_eq!(jsonpatch::decode(go.as_bytes()).unwrap(), p);
        }
    }
}

#[test]
fn diff_example_from_the_reference() {
    let a = json!({"a":1,"l":[1,2]});
    let b = json!({"a":2,"l":[1,2,3],"b":true});
    let bytes = serde_json::to_vec(&json_patch::diff(&a, &b)).unwrap();
    let p = jsonpatch::decode(&bytes).unwrap();
    assert_eq!(p.len(), 3);
    assert_eq!(p.apply_to_value(&a), Ok(b));
}
