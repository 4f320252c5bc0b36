//! Checking edited configurations: errors and warnings placed at their line and column, in
//! block and flow YAML and in JSON; invalid edits are not active; updates ratchet as upstream.

use hookscope::KubeVersion;
use hookscope::edit::{Checked, Problem, ProblemKind, Severity, check, check_for};

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

/// The compile error's place and text, the missing field's, and the MutatingAdmissionPolicy's,
/// in a manifest that mixes them with a webhook configuration.
#[test]
fn policy_errors_point_at_their_lines_and_columns() {
    let text = fixture("policies.yaml");
    let c = check(&text, "policies.yaml", &[]);
    assert!(!c.may_activate());
    assert_eq!(
        c.configurations.len(),
        1,
        "the webhook configuration is read"
    );
    let kinds: Vec<&str> = c.policies.iter().map(|p| p.object.kind()).collect();
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy"
        ]
    );
    let errors: Vec<&str> = c.errors().map(|p| p.field.as_str()).collect();
    assert_eq!(
        errors,
        [
            "spec.validations[1].expression",
            "spec.policyName",
            "spec.mutations[0].patchType",
        ]
    );
    // The CEL error at the character cel-go's caret marks (the space after `=`), within the
    // quoted expression.
    let cel = problem(&c, "spec.validations[1].expression", ProblemKind::Invalid);
    let (line, quote) = find(&text, 1, "\"object.spec.replicas < = 3\"");
    assert_eq!(at(cel), (line, quote + 1 + 24));
    assert!(
        cel.message.starts_with(
            "Invalid value: \"object.spec.replicas < = 3\": compilation failed: ERROR: <input>:1:25: Syntax error: token recognition error at: '= '"
        ),
        "{}",
        cel.message
    );
    assert_eq!(cel.document, Some(2));
    assert_eq!(
        cel.configuration.as_deref(),
        Some("ValidatingAdmissionPolicy/replica-limit")
    );
    // A missing field points at the deepest part that exists: the binding's spec.
    let name = problem(&c, "spec.policyName", ProblemKind::Invalid);
    assert_eq!(name.message, "Required value");
    assert_eq!(at(name), find(&text, 31, "spec:"));
    assert_eq!(
        name.to_string(),
        format!(
            "line {}, column 1: spec.policyName: Required value",
            name.position.line
        )
    );
    let patch_type = problem(&c, "spec.mutations[0].patchType", ProblemKind::Invalid);
    assert_eq!(at(patch_type), find(&text, 38, "applyConfiguration:"));
    assert!(c.engine(Default::default()).is_none());
}

fn policy_text(version: &str, kind: &str, spec: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/{version}\nkind: {kind}\nmetadata:\n  name: limit\nspec:\n{spec}"
    )
}

const VAP_SPEC: &str = "  matchConstraints:\n    resourceRules:\n    - {operations: [CREATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}\n  validations:\n  - expression: object.spec.replicas <= 5\n    messageExpression: object.spec.replicas\n";

const BINDING_SPEC: &str = "  policyName: limit\n  validationActions: [Deny]\n";

#[test]
fn a_policy_type_error_is_placed_and_a_valid_policy_activates() {
    let text = policy_text("v1", "ValidatingAdmissionPolicy", VAP_SPEC);
    let c = check(&text, "limit.yaml", &[]);
    let ty = problem(
        &c,
        "spec.validations[0].messageExpression",
        ProblemKind::Invalid,
    );
    assert!(
        ty.message.contains("must evaluate to string"),
        "{}",
        ty.message
    );
    assert_eq!(at(ty), find(&text, 1, "messageExpression"));
    // A field of the wrong type, in a List's second item: a load error at its place.
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: x}\n- apiVersion: admissionregistration.k8s.io/v1\n  kind: ValidatingAdmissionPolicyBinding\n  metadata: {name: b}\n  spec:\n    policyName: limit\n    validationActions: Deny\n";
    let c = check(list, "list.yaml", &[]);
    let load = problem(&c, "spec.validationActions", ProblemKind::Load);
    assert_eq!(at(load), find(list, 1, "validationActions"));
    assert_eq!(load.document, Some(2));
    assert!(load.message.contains("expected a list"), "{}", load.message);
    // Fixed, with its binding: a text of policies alone is not empty, and it activates with
    // the policy in its engine.
    let fixed = format!(
        "{}---\n{}",
        policy_text(
            "v1",
            "ValidatingAdmissionPolicy",
            &VAP_SPEC.replace(
                "object.spec.replicas\n",
                "\"'too many: ' + string(object.spec.replicas)\"\n"
            )
        ),
        policy_text("v1", "ValidatingAdmissionPolicyBinding", BINDING_SPEC)
    );
    let c = check(&fixed, "limit.yaml", &[]);
    assert!(c.may_activate(), "{:#?}", c.problems);
    assert!(
        c.problems.iter().all(|p| p.kind != ProblemKind::Empty),
        "{:#?}",
        c.problems
    );
    assert_eq!(c.policies.len(), 2);
    assert!(
        c.policies[0]
            .defaulted
            .contains(&"spec.failurePolicy: Fail".to_string()),
        "{:?}",
        c.policies[0].defaulted
    );
    let engine = c.engine(Default::default()).expect("valid");
    assert_eq!(engine.policies().len(), 1);
    assert_eq!(engine.policies()[0].bindings.len(), 1);
}

#[test]
fn policies_of_one_kind_and_name_are_duplicates_and_unserved_versions_are_refused() {
    // A policy and its binding may share a name; two policies may not.
    let pair = format!(
        "{}---\n{}",
        policy_text("v1", "ValidatingAdmissionPolicy", VAP_SPEC),
        policy_text("v1", "ValidatingAdmissionPolicyBinding", BINDING_SPEC)
    );
    let c = check(&pair, "p.yaml", &[]);
    assert!(c.errors().all(|p| p.kind != ProblemKind::DuplicateName));
    let twice = format!(
        "{}---\n{}",
        policy_text("v1", "ValidatingAdmissionPolicyBinding", BINDING_SPEC),
        policy_text("v1", "ValidatingAdmissionPolicyBinding", BINDING_SPEC)
    );
    let c = check(&twice, "p.yaml", &[]);
    let dup = problem(&c, "metadata.name", ProblemKind::DuplicateName);
    assert_eq!(at(dup), find(&twice, 8, "name: limit"));
    assert_eq!(
        dup.message,
        "validatingadmissionpolicybindings.admissionregistration.k8s.io \"limit\" already exists (another document of this text has the same kind and name)"
    );
    // The run's release decides what is served: MutatingAdmissionPolicy v1 is 1.36's, v1alpha1
    // runs in 1.33 behind its feature gate.
    let map = |version: &str| {
        policy_text(
            version,
            "MutatingAdmissionPolicyBinding",
            "  policyName: owner\n",
        )
    };
    let v133: KubeVersion = "1.33".parse().unwrap();
    let c = check_for(&map("v1"), "m.yaml", (&[], &[]), v133);
    let unserved = problem(&c, "apiVersion", ProblemKind::Unserved);
    assert_eq!(at(unserved), (1, 1));
    assert!(
        unserved
            .message
            .starts_with("admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding is served by Kubernetes 1.36 and later (modelled: 1.33)"),
        "{}",
        unserved.message
    );
    assert!(!c.may_activate());
    let c = check_for(&map("v1alpha1"), "m.yaml", (&[], &[]), v133);
    assert!(c.may_activate(), "{:#?}", c.problems);
    let gate = problem(&c, "apiVersion", ProblemKind::FeatureGate);
    assert_eq!(gate.severity, Severity::Warning);
    assert!(
        gate.message
            .contains("--feature-gates=MutatingAdmissionPolicy=true")
    );
}

/// The console's templates of new policies check clean in every release that serves the kind.
#[test]
fn policy_templates_are_valid_where_served() {
    for minor in KubeVersion::OLDEST.minor()..=KubeVersion::NEWEST.minor() {
        let version = KubeVersion::new(minor).unwrap();
        for kind in ["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"] {
            let Some(api) = hookscope::config::policy::served_api_version(kind, version) else {
                assert!(
                    kind.starts_with("Mutating") && minor < 32,
                    "1.{minor} {kind}"
                );
                continue;
            };
            let text = hookscope::tui::editing::policy_template(kind, api, "new");
            let c = check_for(&text, "new.yaml", (&[], &[]), version);
            assert!(c.may_activate(), "1.{minor} {kind}: {:#?}", c.problems);
            assert_eq!(c.policies.len(), 2);
        }
    }
}

/// A policy stored with a matchCondition the apiserver would refuse now keeps it through an
/// update that leaves it (and the paramKind) alone, as upstream ratchets; editing it validates
/// it again.
#[test]
fn an_existing_policy_is_validated_as_an_update() {
    let text = |condition: &str, message: &str| {
        policy_text(
            "v1",
            "ValidatingAdmissionPolicy",
            &format!(
                "{VAP_SPEC}    message: {message}\n  matchConditions:\n  - name: c\n    expression: \"{condition}\"\n"
            )
            .replace("    messageExpression: object.spec.replicas\n", ""),
        )
    };
    let stored = text("object.x <", "one");
    let created = check(&stored, "p.yaml", &[]);
    let condition = problem(
        &created,
        "spec.matchConditions[0].expression",
        ProblemKind::Invalid,
    );
    assert!(
        condition.message.contains("compilation failed"),
        "{}",
        condition.message
    );
    assert_eq!(created.errors().count(), 1, "{:#?}", created.problems);
    let previous: Vec<_> = created.policies.iter().map(|p| p.object.clone()).collect();
    // The message edited, the condition left as stored: accepted.
    let updated = check_for(
        &text("object.x <", "two"),
        "p.yaml",
        (&[], &previous),
        KubeVersion::default(),
    );
    assert!(updated.may_activate(), "{:#?}", updated.problems);
    // The condition edited: validated again.
    let edited = check_for(
        &text("object.y <", "two"),
        "p.yaml",
        (&[], &previous),
        KubeVersion::default(),
    );
    assert!(!edited.may_activate());
    problem(
        &edited,
        "spec.matchConditions[0].expression",
        ProblemKind::Invalid,
    );
}
