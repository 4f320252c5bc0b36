//! The CEL type checks kube-apiserver v1.33.3 makes when a ValidatingAdmissionPolicy (v1) or a
//! MutatingAdmissionPolicy (v1alpha1) is created (`fixtures/cel-typecheck-v1.33`, see its
//! README): the homogeneous aggregate literal validator, the `_==_`/`_!=_` overloads and the
//! other operators' errors, byte for byte as kubectl printed them, and the policies it accepted.

mod common;

use std::collections::BTreeMap;

const SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/cel-typecheck-v1.33"
);

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{SESSION}/{path}")).unwrap()
}

/// What `kubectl create -f policies.yaml` printed, per policy name: its field errors (several as
/// `[a, b]`, an error's later issues and snippets on the lines that follow), or nothing when it
/// was created.
fn kubectl_results() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in read("create.txt").lines().skip(1) {
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

#[test]
fn policy_expressions_are_type_checked_as_the_apiserver_did() {
    let expected = kubectl_results();
    assert_eq!(expected.len(), 100, "{:?}", expected.keys());
    let mut failures = Vec::new();
    for (name, got) in common::policy_create_errors(&read("policies.yaml"), "policies.yaml") {
        let want = expected.get(&name).map_or("(no record)", String::as_str);
        if got != want {
            failures.push(format!("{name}:\n  want: {want:?}\n  got:  {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        expected.len(),
        failures.join("\n")
    );
}
