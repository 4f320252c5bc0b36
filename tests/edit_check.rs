//! Checking edited configurations: errors and warnings placed at their line and column, in
//! block and flow YAML and in JSON; invalid edits are not active; updates ratchet as upstream.

use hookscope::edit::{Checked, Problem, ProblemKind, Severity, check};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/edit/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The 1-based (line, column) of the first `needle` at or after 1-based line `from`.
fn find(text: &str, from: usize, needle: &str) -> (usize, usize) {
    for (i, line) in text.lines().enumerate().skip(from - 1) {
        if let Some(byte) = line.find(needle) {
            return (i + 1, line[..byte].chars().count() + 1);
        }
    }
    panic!("{needle:?} not in the text after line {from}");
}

fn problem<'c>(c: &'c Checked, field: &str, kind: ProblemKind) -> &'c Problem {
    c.problems
        .iter()
        .find(|p| p.field == field && p.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} problem at {field}: {:#?}", c.problems))
}

fn at(p: &Problem) -> (usize, usize) {
    (p.position.line, p.position.column.expect("a column"))
}

#[test]
fn block_yaml_errors_point_at_their_lines() {
    let text = fixture("block.yaml");
    let c = check(&text, "block.yaml", &[]);
    assert!(!c.may_activate());
    assert_eq!(c.configurations.len(), 2, "both documents are read");
    let errors: Vec<&str> = c.errors().map(|p| p.field.as_str()).collect();
    assert_eq!(
        errors,
        [
            "webhooks[0].rules[0].operations[1]",
            "webhooks[0].namespaceSelector.matchLabels",
            "webhooks[0].timeoutSeconds",
        ]
    );
    let ops = problem(
        &c,
        "webhooks[0].rules[0].operations[1]",
        ProblemKind::Invalid,
    );
    assert_eq!(at(ops), find(&text, 20, "BOGUS"));
    assert!(ops.message.starts_with("Unsupported value: \"BOGUS\""));
    assert_eq!(ops.document, Some(2));
    assert_eq!(
        ops.configuration.as_deref(),
        Some("ValidatingWebhookConfiguration/policy")
    );
    // The selector's offending key, not just the selector.
    let labels = problem(
        &c,
        "webhooks[0].namespaceSelector.matchLabels",
        ProblemKind::Invalid,
    );
    assert_eq!(at(labels), find(&text, 20, "\"bad key!\""));
    let timeout = problem(&c, "webhooks[0].timeoutSeconds", ProblemKind::Invalid);
    assert_eq!(at(timeout), find(&text, 20, "timeoutSeconds: 31"));
    assert_eq!(
        timeout.to_string(),
        format!(
            "line {}, column 3: webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            timeout.position.line
        )
    );
    // Warnings come along and do not block.
    let typo = problem(&c, "webhooks[0].timeoutSecond", ProblemKind::UnknownField);
    assert_eq!(typo.severity, Severity::Warning);
    assert_eq!(at(typo), find(&text, 20, "timeoutSecond:"));
    // A missing field points at the deepest part that exists: the first document's clientConfig.
    let ca = c
        .warnings()
        .find(|p| p.field == "webhooks[0].clientConfig.caBundle" && p.document == Some(1))
        .expect("a caBundle lint for the first document");
    assert_eq!(at(ca), find(&text, 1, "clientConfig:"));
}

#[test]
fn flow_yaml_errors_have_columns() {
    let text = fixture("flow.yaml");
    let c = check(&text, "flow.yaml", &[]);
    assert!(!c.may_activate());
    let ops = problem(
        &c,
        "webhooks[0].rules[0].operations[1]",
        ProblemKind::Invalid,
    );
    assert_eq!(at(ops), find(&text, 1, "BOGUS"));
    let timeout = problem(&c, "webhooks[0].timeoutSeconds", ProblemKind::Invalid);
    assert_eq!(at(timeout), find(&text, 1, "timeoutSeconds"));
    assert_eq!(at(ops).0, 2);
}

#[test]
fn json_list_items_are_located() {
    let text = fixture("list.json");
    let c = check(&text, "list.json", &[]);
    assert!(!c.may_activate());
    let ops = problem(
        &c,
        "webhooks[0].rules[0].operations[1]",
        ProblemKind::Invalid,
    );
    assert_eq!(at(ops), find(&text, 1, "\"BOGUS\""));
    assert_eq!(ops.document, Some(2), "the second List item");
    let timeout = problem(&c, "webhooks[0].timeoutSeconds", ProblemKind::Invalid);
    assert_eq!(at(timeout), find(&text, 1, "\"timeoutSeconds\""));
}

#[test]
fn syntax_and_type_errors_are_placed() {
    let good = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: a}\nwebhooks: []\n";
    let text = format!(
        "{good}---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: b}}\nwebhooks:\n- name: b.example.com\n  timeoutSeconds: ten\n---\nkind: [unclosed\n"
    );
    let c = check(&text, "mixed.yaml", &[]);
    assert!(!c.may_activate());
    assert_eq!(c.configurations.len(), 1, "the good document still loads");
    let ty = problem(&c, "webhooks[0].timeoutSeconds", ProblemKind::Load);
    assert_eq!(at(ty), find(&text, 5, "timeoutSeconds"));
    assert!(
        ty.message.contains("expected a 32-bit integer"),
        "{}",
        ty.message
    );
    let syntax = c
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::Syntax)
        .expect("a syntax error");
    assert!(syntax.position.line >= find(&text, 1, "kind: [unclosed").0);
    let kind = check(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfigurations\nmetadata: {name: x}\n",
        "typo.yaml",
        &[],
    );
    let p = problem(&kind, "kind", ProblemKind::Load);
    assert_eq!(at(p), (2, 1));
    assert!(
        p.message.contains("is not a MutatingWebhookConfiguration"),
        "{}",
        p.message
    );
    // Another kind, as in a release manifest, is left as it is: not an error.
    let other = check(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        "cm.yaml",
        &[],
    );
    assert_eq!(other.errors().count(), 0, "{:#?}", other.problems);
}

fn webhook(side_effects: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: policy\nwebhooks:\n- name: policy.example.com\n  clientConfig: {{url: \"https://policy.example.com/\"}}\n  sideEffects: {side_effects}\n  admissionReviewVersions: [v1]\n"
    )
}

#[test]
fn an_existing_configuration_is_validated_as_an_update() {
    // sideEffects Some is refused on create in v1, but an object stored with it may keep it.
    let created = check(&webhook("Some"), "p.yaml", &[]);
    assert!(!created.may_activate());
    let side = problem(&created, "webhooks[0].sideEffects", ProblemKind::Invalid);
    assert_eq!(at(side), (8, 3));
    let previous = created.webhook_configurations();
    let updated = check(&webhook("Some"), "p.yaml", &previous);
    assert!(updated.may_activate(), "{:#?}", updated.problems);
    // Once fixed, ratcheting no longer allows going back.
    let fixed = check(&webhook("None"), "p.yaml", &[]);
    assert!(fixed.may_activate());
    let back = check(&webhook("Some"), "p.yaml", &fixed.webhook_configurations());
    assert!(!back.may_activate());
}

#[test]
fn duplicate_names_and_empty_texts() {
    let text = format!("{}---\n{}", webhook("None"), webhook("None"));
    let c = check(&text, "dup.yaml", &[]);
    let dup = problem(&c, "metadata.name", ProblemKind::DuplicateName);
    assert_eq!(at(dup), (14, 3));
    assert!(!c.may_activate());
    let empty = check("# nothing yet\n", "new.yaml", &[]);
    assert!(empty.may_activate());
    assert!(empty.warnings().any(|p| p.kind == ProblemKind::Empty));
    assert!(empty.engine(Default::default()).is_some());
    assert!(c.engine(Default::default()).is_none());
}
