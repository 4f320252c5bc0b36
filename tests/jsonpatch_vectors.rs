//! The 44 patches that were run through the real evanphx/json-patch v4 (Go) on one document: the
//! outcome class, the resulting document bytes and the error text must all match.

use hookscope::jsonpatch;

const CASES: &str = include_str!("fixtures/jsonpatch/cases.json");
const RESULTS: &str = include_str!("fixtures/jsonpatch/evanphx-v4-results.txt");
const DOC: &[u8] = br#"{"a":{"b":1},"arr":[1,2,3],"n":1}"#;

/// One case per line of `cases.json`: `{"name":"…","patch":<raw JSON>}`. The patch is taken as raw
/// bytes because its spelling (`1.0`, `\u0061`, big integers) is part of the case.
fn cases() -> Vec<(String, String)> {
    CASES
        .lines()
        .map(|l| l.trim().trim_end_matches(','))
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("case line is JSON");
            let name = v["name"].as_str().expect("case name").to_owned();
            let at = l.find(r#","patch":"#).expect("patch member");
            let raw = l[at + r#","patch":"#.len()..l.len() - 1].to_owned();
            (name, raw)
        })
        .collect()
}

fn outcome(patch: &str) -> String {
    match jsonpatch::decode(patch.as_bytes()) {
        Err(e) => format!("DECODE-ERR {e}"),
        Ok(p) => match p.apply(DOC) {
            Ok(doc) => format!("OK -> {}", String::from_utf8(doc).expect("UTF-8 output")),
            Err(e) => format!("APPLY-ERR {e}"),
        },
    }
}

#[test]
fn all_vectors_match_evanphx_v4() {
    let cases = cases();
    let results: Vec<&str> = RESULTS.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(cases.len(), 44);
    assert_eq!(results.len(), cases.len());
    let mut failures = Vec::new();
    for ((name, patch), line) in cases.iter().zip(&results) {
        let expected = line
            .strip_prefix(name.as_str())
            .unwrap_or_else(|| panic!("results line {line:?} is not for case {name:?}"))
            .trim_start();
        let got = outcome(patch);
        if got != expected {
            failures.push(format!(
                "{name}: patch {patch}\n  want {expected}\n  got  {got}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn apply_to_value_agrees_with_apply() {
    let doc: serde_json::Value = serde_json::from_slice(DOC).unwrap();
    for (name, patch) in cases() {
        let Ok(p) = jsonpatch::decode(patch.as_bytes()) else {
            continue;
        };
        let by_bytes = p
            .apply(DOC)
            .map(|b| serde_json::from_slice::<serde_json::Value>(&b).unwrap());
        assert_eq!(p.apply_to_value(&doc), by_bytes, "{name}");
    }
}
