//! Upstream's strategic-merge-patch test tables (`tests/fixtures/strategicpatch`, see its README),
//! in the apply direction: every patch a case holds is applied to the document it was made for,
//! with the test schema as OpenAPI v2 and as OpenAPI v3, and the result must equal the expected
//! document, list order included (or the error must contain the expected text).
//!
//! Each table is checked the way upstream's harness checks it: the YAML tables after sorting every
//! document's merging lists (`sortMergeListsByName`, reproduced here), the raw tables as written.

use hookscope::strategicpatch::{
    LookupPatchMeta, OpenApiNode, OpenApiSchema, strategic_merge_patch,
};
use serde_json::{Map, Value};

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/strategicpatch/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Cases with no patch to apply, by table and description.
const SKIPPED: &[(&str, &str)] = &[
    // Only patch creation is tested upstream: creating the patch fails (an unknown field whose
    // value changed), so there is nothing to apply.
    ("unknown-field.json", "diff"),
];

/// The test schema documents, as (label, document, root definition).
fn schemas(
    v2: &str,
    v3: &str,
    root: &'static str,
) -> Vec<(&'static str, OpenApiSchema, &'static str)> {
    vec![
        ("openapi-v2", OpenApiSchema::new(fixture(v2)), root),
        ("openapi-v3", OpenApiSchema::new(fixture(v3)), root),
    ]
}

fn merge_item_schemas() -> Vec<(&'static str, OpenApiSchema, &'static str)> {
    schemas(
        "swagger-merge-item.json",
        "swagger-merge-item-v3.json",
        "mergeItem",
    )
}

/// One application to check.
struct Check<'a> {
    label: String,
    original: &'a Value,
    patch: &'a Value,
    expected: Option<&'a Value>,
    expected_error: Option<&'a str>,
}

/// Runs `checks` against `schema`; returns the failures.
fn run(checks: &[Check<'_>], root: &OpenApiNode<'_>, sorted: bool) -> Vec<String> {
    let mut failures = Vec::new();
    for c in checks {
        let prepare = |v: &Value| -> Value {
            if sorted {
                sort_merge_lists_by_name(v, root)
                    .unwrap_or_else(|e| panic!("{}: cannot sort {v}: {e}", c.label))
            } else {
                v.clone()
            }
        };
        let original = prepare(c.original);
        let patch = prepare(c.patch);
        let got = strategic_merge_patch(original.clone(), patch.clone(), root);
        match (got, c.expected_error) {
            (Err(e), Some(want)) if e.to_string().contains(want) => {}
            (got, Some(want)) => failures.push(format!(
                "{}: expected an error containing {want:?}, got {got:?}",
                c.label
            )),
            (Err(e), None) => failures.push(format!(
                "{}: unexpected error {e}\n  original: {original}\n  patch: {patch}",
                c.label
            )),
            (Ok(got), None) => {
                let expected = prepare(c.expected.unwrap_or(&Value::Null));
                if got != expected {
                    failures.push(format!(
                        "{}:\n  original: {original}\n  patch:    {patch}\n  expected: {expected}\n  got:      {got}",
                        c.label
                    ));
                }
            }
        }
    }
    failures
}

fn non_empty(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| match v {
        Value::Null => false,
        Value::Object(m) => !m.is_empty(),
        _ => true,
    })
}

static EMPTY: Value = Value::Null;

/// The checks of one table: two-way (`twoWay` on `original` gives `twoWayResult`, else
/// `modified`) and three-way (`threeWay` on `current` gives `result`, when there is a result).
fn checks<'a>(file: &str, table: &'a Value) -> Vec<Check<'a>> {
    let cases = table["cases"].as_array().expect("cases");
    let mut out = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let description = c["description"].as_str().expect("description");
        let before = out.len();
        let expected_error = c.get("expectedError").and_then(Value::as_str);
        let has_two_way = c.get("twoWay").is_some()
            && (expected_error.is_some() || c.get("twoWayResult").or(c.get("modified")).is_some());
        if has_two_way {
            out.push(Check {
                label: format!("{file} #{i} {description:?} two-way"),
                original: c.get("original").unwrap_or(&EMPTY),
                patch: &c["twoWay"],
                expected: c.get("twoWayResult").or(c.get("modified")),
                expected_error,
            });
        }
        if let Some(result) = non_empty(c.get("result")) {
            out.push(Check {
                label: format!("{file} #{i} {description:?} three-way"),
                original: c.get("current").unwrap_or(&EMPTY),
                patch: c.get("threeWay").unwrap_or(&EMPTY),
                expected: Some(result),
                expected_error,
            });
        }
        let skipped = SKIPPED.contains(&(file, description));
        assert!(
            (out.len() > before) != skipped,
            "{file} #{i} {description:?}: {}",
            if skipped {
                "listed as skipped but has checks"
            } else {
                "has no check and is not listed as skipped"
            }
        );
    }
    out
}

fn check_table(file: &str, sorted: bool) -> usize {
    let table = fixture(file);
    let checks = checks(file, &table);
    let mut failures = Vec::new();
    for (label, doc, root) in merge_item_schemas() {
        let node = doc.definition(root).expect("root definition");
        failures.extend(
            run(&checks, &node, sorted)
                .into_iter()
                .map(|f| format!("[{label}] {f}")),
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} applications failed:\n{}",
        failures.len(),
        checks.len() * 2,
        failures.join("\n")
    );
    checks.len()
}

#[test]
fn create_strategic_merge_patch_table() {
    assert_eq!(check_table("create-strategic-merge-patch.json", true), 44);
}

#[test]
fn custom_strategic_merge_patch_table() {
    assert_eq!(check_table("custom-strategic-merge-patch.json", true), 18);
}

#[test]
fn strategic_merge_patch_raw_table() {
    assert_eq!(check_table("strategic-merge-patch-raw.json", false), 188);
}

#[test]
fn custom_strategic_merge_patch_raw_table() {
    assert_eq!(
        check_table("custom-strategic-merge-patch-raw.json", false),
        10
    );
}

#[test]
fn replace_raw_extension_table() {
    assert_eq!(check_table("replace-raw-extension.json", false), 4);
}

/// `TestUnknownField` and `TestNumberConversion` hold JSON texts.
fn parse_texts(table: &mut Value) {
    for c in table["cases"].as_array_mut().expect("cases") {
        for (_, v) in c.as_object_mut().expect("case").iter_mut() {
            if let Some(text) = v.as_str()
                && let Ok(parsed) = serde_json::from_str::<Value>(text)
            {
                *v = parsed;
            }
        }
    }
}

#[test]
fn unknown_field_table() {
    let table = fixture("unknown-field.json");
    let checks = checks("unknown-field.json", &table);
    assert_eq!(checks.len(), 28);
    for (label, doc, root) in merge_item_schemas() {
        let node = doc.definition(root).expect("root definition");
        let failures = run(&checks, &node, false);
        assert!(failures.is_empty(), "[{label}]\n{}", failures.join("\n"));
    }
}

#[test]
fn number_conversion_table() {
    let mut table = fixture("number-conversion.json");
    parse_texts(&mut table);
    let checks = checks("number-conversion.json", &table);
    assert_eq!(checks.len(), 7);
    for (label, doc, root) in schemas(
        "swagger-precision-item.json",
        "swagger-precision-item-v3.json",
        "precisionItem",
    ) {
        let node = doc.definition(root).expect("root definition");
        let failures = run(&checks, &node, false);
        assert!(failures.is_empty(), "[{label}]\n{}", failures.join("\n"));
    }
}

/// Upstream's test helper `sortMergeListsByName`: merging lists sorted by merge key (lists of
/// scalars deduplicated and sorted), `$retainKeys` and `$deleteFromPrimitiveList` lists sorted,
/// all by the `%v` text of the values.
fn sort_merge_lists_by_name<S: LookupPatchMeta>(v: &Value, schema: &S) -> Result<Value, String> {
    match v {
        Value::Object(m) => sort_map(m, schema).map(Value::Object),
        Value::Null => Ok(Value::Null),
        _ => Err("not an object".into()),
    }
}

fn sort_map<S: LookupPatchMeta>(
    m: &Map<String, Value>,
    schema: &S,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (k, v) in m {
        let sorted = if k == "$retainKeys" || k.starts_with("$deleteFromPrimitiveList") {
            let list = v.as_array().ok_or("directive is not a list")?;
            Value::Array(sort_scalars(list.clone()))
        } else if k.starts_with("$setElementOrder") || k == "$patch" {
            v.clone()
        } else {
            match v {
                Value::Object(o) => {
                    let (sub, _) = schema
                        .lookup_patch_metadata_for_struct(k)
                        .map_err(|e| e.to_string())?;
                    Value::Object(sort_map(o, &sub)?)
                }
                Value::Array(l) => {
                    let (sub, meta) = schema
                        .lookup_patch_metadata_for_slice(k)
                        .map_err(|e| e.to_string())?;
                    let strategy = meta
                        .patch_strategies
                        .split(',')
                        .find(|s| *s != "retainKeys")
                        .unwrap_or("");
                    if strategy == "merge" {
                        Value::Array(sort_list(l, &sub, meta.patch_merge_key)?)
                    } else {
                        v.clone()
                    }
                }
                _ => v.clone(),
            }
        };
        out.insert(k.clone(), sorted);
    }
    Ok(out)
}

fn sort_list<S: LookupPatchMeta>(
    l: &[Value],
    schema: &S,
    merge_key: &str,
) -> Result<Vec<Value>, String> {
    if !l.iter().all(Value::is_object) {
        let mut unique: Vec<Value> = Vec::new();
        for v in l {
            if !unique.contains(v) {
                unique.push(v.clone());
            }
        }
        return Ok(sort_scalars(unique));
    }
    let mut maps = Vec::new();
    for v in l {
        maps.push(Value::Object(sort_map(
            v.as_object().ok_or("not a map")?,
            schema,
        )?));
    }
    maps.sort_by_key(|m| go_text(m.get(merge_key).unwrap_or(&Value::Null)));
    Ok(maps)
}

fn sort_scalars(mut l: Vec<Value>) -> Vec<Value> {
    l.sort_by_key(go_text);
    l
}

/// `fmt.Sprintf("%v", v)` for the scalars of the tables.
fn go_text(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Numbers as Go's `json.Marshal` leaves them: an integral float prints as an integer.
fn go_marshalled(v: Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.as_i64().is_none() && f.fract() == 0.0 && f.abs() < 1e18 => {
                Value::from(f as i64)
            }
            _ => Value::Number(n),
        },
        Value::Array(l) => Value::Array(l.into_iter().map(go_marshalled).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, go_marshalled(v))).collect())
        }
        other => other,
    }
}

/// Random documents and patches run through upstream's own apply code (see the README): the
/// result, or the error text, must be one of the outcomes upstream gave.
#[test]
fn random_cases_match_upstream_outcomes() {
    let schema = OpenApiSchema::new(fixture("random-cases-schema.json"));
    let root = schema.definition("Item").expect("Item");
    let path = format!(
        "{}/tests/fixtures/strategicpatch/random-cases-go-outcomes.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut failures = Vec::new();
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let case: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {i}: {e}"));
        let outcomes: Vec<&str> = case["outcomes"]
            .as_array()
            .expect("outcomes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let got = strategic_merge_patch(case["original"].clone(), case["patch"].clone(), &root);
        let matches =
            |want: &&str| match (&got, want.strip_prefix("ok:"), want.strip_prefix("err:")) {
                (Ok(v), Some(json), _) => serde_json::from_str::<Value>(json)
                    .is_ok_and(|w| go_marshalled(v.clone()) == go_marshalled(w)),
                (Err(e), _, Some(text)) => e.to_string() == text,
                _ => false,
            };
        if !outcomes.iter().any(matches) {
            failures.push(format!(
                "line {}: original {} patch {}\n  upstream: {outcomes:?}\n  got: {got:?}",
                i + 1,
                case["original"],
                case["patch"]
            ));
        }
        count += 1;
    }
    assert_eq!(count, 2000);
    assert!(
        failures.is_empty(),
        "{} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
