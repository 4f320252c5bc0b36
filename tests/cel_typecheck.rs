//! The CEL type checks kube-apiserver v1.33.3 makes when a ValidatingAdmissionPolicy (v1) or a
//! MutatingAdmissionPolicy (v1alpha1) is created (`fixtures/cel-typecheck-v1.33`, see its
//! README): the homogeneous aggregate literal validator, the `_==_`/`_!=_` overloads and the
//! other operators' errors, byte for byte as kubectl printed them, and the policies it accepted;
//! and `status.typeChecking` against the kinds' schemas, from upstream's `typechecking_test.go`.

mod common;

use std::collections::BTreeMap;

use hookscope::KubeVersion;
use hookscope::api::policy::ValidatingAdmissionPolicy;
use hookscope::config::policy::PolicyObject;
use hookscope::config::typecheck::{kinds_to_check, type_check};
use serde::Deserialize;
use serde_json::{Value, json};

const SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/cel-typecheck-v1.33"
);

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{SESSION}/{path}")).unwrap()
}

/// What `kubectl create -f` printed in `file`, per policy name: its field errors (several as
/// `[a, b]`, an error's later issues and snippets on the lines that follow), or nothing when it
/// was created.
fn kubectl_results(file: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in read(file).lines().skip(1) {
        if let Some(rest) = line.strip_prefix("Error from server (Invalid): ") {
            let name = rest.split('"').nth(3).unwrap_or_default().to_string();
            let errors = rest.split_once(" is invalid: ").unwrap().1.to_string();
            out.insert(name.clone(), errors);
            current = Some(name);
        } else if let Some(created) = line.strip_suffix(" created") {
            let name = created.rsplit('/').next().unwrap_or_default().to_string();
            out.insert(name, String::new());
            current = None;
        } else if line.starts_with(" |") || line.starts_with("ERROR: ") {
            let name = current.as_ref().expect("a continuation follows an error");
            let errors = out.get_mut(name).unwrap();
            errors.push('\n');
            errors.push_str(line);
        } else {
            assert_eq!(line, "(exit 1)", "unexpected line in create.txt");
        }
    }
    out
}

/// Every policy of `policies` (`count` of them) is refused by hookscope with the errors kubectl
/// printed in `created`, or created as it was.
fn assert_created_as_recorded(policies: &str, created: &str, count: usize) {
    let expected = kubectl_results(created);
    assert_eq!(expected.len(), count, "{:?}", expected.keys());
    let mut failures = Vec::new();
    for (name, got) in common::policy_create_errors(&read(policies), policies) {
        let want = expected.get(&name).map_or("(no record)", String::as_str);
        if got != want {
            failures.push(format!("{name}:\n  want: {want:?}\n  got:  {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn policy_expressions_are_type_checked_as_the_apiserver_did() {
    assert_created_as_recorded("policies.yaml", "create.txt", 169);
}

/// `string.format`'s validator (a literal format string against a literal argument list: each
/// clause's parse errors, argument types and count) and `string()` of an optional, refused with
/// no matching overload.
#[test]
fn format_calls_and_string_conversions_are_checked_as_the_apiserver_did() {
    assert_created_as_recorded("policies-format.yaml", "create-format.txt", 21);
}

/// A ValidatingAdmissionPolicy (v1) of `spec` merged over a valid default: matchConstraints for
/// apps/v1 deployments, no validations (a key set to null is removed).
fn policy(spec: &serde_json::Map<String, Value>) -> ValidatingAdmissionPolicy {
    let full = common::merged(
        json!({
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
        }),
        spec,
    );
    let doc = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"},
        "spec": full,
    });
    let mut loaded = hookscope::config::parse_policy_documents(&doc.to_string(), "case.json")
        .remove(0)
        .unwrap();
    loaded.apply_defaults();
    match loaded.object {
        PolicyObject::Policy(p) => p,
        other => panic!("not a policy: {other:?}"),
    }
}

#[derive(Deserialize)]
struct TypeCheckingCases {
    kinds: Vec<KindsCase>,
    warnings: Vec<WarningsCase>,
}

#[derive(Deserialize)]
struct KindsCase {
    name: String,
    rules: Vec<Value>,
    expected: Vec<String>,
}

#[derive(Deserialize)]
struct WarningsCase {
    name: String,
    spec: serde_json::Map<String, Value>,
    expected: Vec<ExpectedWarning>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExpectedWarning {
    field_ref: String,
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

fn type_checking_cases() -> TypeCheckingCases {
    hookscope::yaml::from_str(&read("type-checking-cases.yaml")).unwrap()
}

const V1_33: fn() -> KubeVersion = || KubeVersion::new(33).unwrap();

#[test]
fn the_kinds_to_type_check_are_upstreams() {
    let cases = type_checking_cases().kinds;
    assert_eq!(cases.len(), 6);
    for case in cases {
        let mut spec = serde_json::Map::new();
        let rules: Vec<Value> = case
            .rules
            .into_iter()
            .map(|mut r| {
                r["operations"] = json!(["CREATE"]);
                r
            })
            .collect();
        spec.insert(
            "matchConstraints".into(),
            if rules.is_empty() {
                Value::Null
            } else {
                json!({"resourceRules": rules})
            },
        );
        let got: Vec<String> = kinds_to_check(&policy(&spec), V1_33())
            .iter()
            .map(|k| format!("{}/{}/{}", k.group, k.version, k.kind))
            .collect();
        assert_eq!(got, case.expected, "{}", case.name);
    }
}

#[test]
fn status_type_checking_warnings_are_upstreams() {
    let cases = type_checking_cases().warnings;
    assert_eq!(cases.len(), 15);
    let mut failures = Vec::new();
    for case in cases {
        let got = type_check(&policy(&case.spec), V1_33());
        let matches = got.len() == case.expected.len()
            && got.iter().zip(&case.expected).all(|(g, w)| {
                g.field_ref == w.field_ref
                    && w.contains.as_ref().is_none_or(|c| g.warning.contains(c))
                    && w.text.as_ref().is_none_or(|t| &g.warning == t)
            });
        if !matches {
            failures.push(format!("{}: got {got:#?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Functions and methods called with arguments (or on a receiver) no overload takes:
/// `found no matching overload for 'f' applied to 'receiver.(args)'` at the call's `(`, every
/// one in an expression; `dyn` receivers and arguments match any overload
/// (`fixtures/cel-overloads-v1.33`).
#[test]
fn function_calls_without_a_matching_overload_are_refused_as_the_apiserver_did() {
    assert_created_as_recorded(
        "../cel-overloads-v1.33/policies.yaml",
        "../cel-overloads-v1.33/create.txt",
        40,
    );
}
