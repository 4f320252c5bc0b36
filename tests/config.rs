//! Loading, defaulting, validation and lint of webhook configurations.

use std::path::PathBuf;

use hookscope::api::{WebhookConfiguration, WebhookKind};
use hookscope::config::{
    FieldError, LoadError, apply_defaults, lint, load_paths, parse_documents, validate,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn one(text: &str) -> WebhookConfiguration {
    let mut docs = parse_documents(text, "test.yaml");
    assert_eq!(docs.len(), 1);
    docs.remove(0).expect("loads").configuration
}

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

const MINIMAL_V1: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: cfg}
webhooks:
- name: hook.example.com
  clientConfig:
    service: {namespace: ns, name: svc}
  rules:
  - {operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

#[test]
fn oracle_configs_load_and_validate_clean() {
    let loaded = load_paths(&[fixture("mutating.yaml"), fixture("validating.yaml")]);
    assert_eq!(loaded.len(), 2);
    for r in loaded {
        let mut l = r.expect("oracle config loads");
        assert!(l.unknown_fields.is_empty(), "{:?}", l.unknown_fields);
        l.apply_defaults();
        assert!(
            validate(&l.configuration, None).is_empty(),
            "{:?}",
            validate(&l.configuration, None)
        );
        assert!(
            l.configuration.webhooks[0]
                .client_config
                .ca_bundle
                .as_ref()
                .is_some_and(|b| b.starts_with(b"-----BEGIN"))
        );
    }
}

#[test]
fn v1_defaults_field_by_field() {
    let mut cfg = one(MINIMAL_V1);
    let applied = apply_defaults(&mut cfg);
    let h = &cfg.webhooks[0];
    assert_eq!(h.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(h.match_policy.as_deref(), Some("Equivalent"));
    assert!(h.namespace_selector.as_ref().is_some_and(|s| s.is_empty()));
    assert!(h.object_selector.as_ref().is_some_and(|s| s.is_empty()));
    assert_eq!(h.side_effects.as_deref(), Some("None"));
    assert_eq!(h.timeout_seconds, Some(10));
    assert_eq!(
        h.admission_review_versions.as_deref(),
        Some(&["v1".to_string()][..])
    );
    assert_eq!(h.reinvocation_policy.as_deref(), Some("Never"));
    assert_eq!(h.rules.as_ref().unwrap()[0].scope.as_deref(), Some("*"));
    assert_eq!(h.client_config.service.as_ref().unwrap().port, Some(443));
    assert_eq!(h.match_conditions, None);
    assert_eq!(
        applied,
        vec![
            "webhooks[0].failurePolicy: Fail",
            "webhooks[0].matchPolicy: Equivalent",
            "webhooks[0].namespaceSelector: {}",
            "webhooks[0].objectSelector: {}",
            "webhooks[0].timeoutSeconds: 10",
            "webhooks[0].reinvocationPolicy: Never",
            "webhooks[0].rules[0].scope: \"*\"",
            "webhooks[0].clientConfig.service.port: 443",
        ]
    );
    // Idempotent.
    assert!(apply_defaults(&mut cfg).is_empty());
}

#[test]
fn v1_requires_side_effects_and_review_versions() {
    let mut cfg =
        one(&MINIMAL_V1.replace("  sideEffects: None\n  admissionReviewVersions: [v1]\n", ""));
    apply_defaults(&mut cfg);
    assert_eq!(cfg.webhooks[0].side_effects, None);
    assert_eq!(cfg.webhooks[0].admission_review_versions, None);
    assert_eq!(
        messages(&validate(&cfg, None)),
        vec![
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        ]
    );
}

#[test]
fn v1beta1_defaults_field_by_field() {
    let docs = parse_documents(
        &std::fs::read_to_string(fixture("multi.yaml")).unwrap(),
        "multi.yaml",
    );
    let mut cfg = docs[2].clone().expect("third document").configuration;
    assert_eq!(cfg.api_version, "admissionregistration.k8s.io/v1beta1");
    let applied = apply_defaults(&mut cfg);
    let h = &cfg.webhooks[0];
    assert_eq!(h.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(h.match_policy.as_deref(), Some("Exact"));
    assert!(h.namespace_selector.as_ref().is_some_and(|s| s.is_empty()));
    assert!(h.object_selector.as_ref().is_some_and(|s| s.is_empty()));
    assert_eq!(h.side_effects.as_deref(), Some("Unknown"));
    assert_eq!(h.timeout_seconds, Some(30));
    assert_eq!(
        h.admission_review_versions.as_deref(),
        Some(&["v1beta1".to_string()][..])
    );
    assert_eq!(h.reinvocation_policy.as_deref(), Some("Never"));
    assert_eq!(h.rules.as_ref().unwrap()[0].scope.as_deref(), Some("*"));
    assert_eq!(h.client_config.service.as_ref().unwrap().port, Some(443));
    assert_eq!(applied.len(), 10);
    assert!(applied.contains(&"webhooks[0].admissionReviewVersions: [\"v1beta1\"]".to_string()));
    // On create, v1beta1's defaulted sideEffects Unknown is refused.
    assert_eq!(
        messages(&validate(&cfg, None)),
        vec![
            "webhooks[0].sideEffects: Unsupported value: \"Unknown\": supported values: \"None\", \"NoneOnDryRun\""
        ]
    );
}

#[test]
fn five_problems_five_errors() {
    let loaded = load_paths(&[fixture("five-problems.yaml")]);
    let cfg = loaded[0].as_ref().unwrap().configuration.clone();
    assert_eq!(
        messages(&validate(&cfg, None)),
        vec![
            "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
            "webhooks[0].failurePolicy: Unsupported value: \"Foo\": supported values: \"Fail\", \"Ignore\"",
            "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        ]
    );
}

fn hook_yaml(body: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: cfg}}\nwebhooks:\n- name: hook.example.com\n  sideEffects: None\n  admissionReviewVersions: [v1]\n{body}"
    )
}

fn errors_of(body: &str) -> Vec<String> {
    let mut cfg = one(&hook_yaml(body));
    apply_defaults(&mut cfg);
    messages(&validate(&cfg, None))
}

#[test]
fn rules_validation() {
    let errs = errors_of(
        "  clientConfig: {url: \"https://h\"}\n  rules:\n  - operations: [\"*\", CREATE, PATCH]\n    apiGroups: [\"*\", apps]\n    apiVersions: [\"*\", \"\"]\n    resources: [\"*/*\", pods, \"\"]\n    scope: Everywhere\n  - {}\n",
    );
    assert_eq!(
        errs,
        vec![
            "webhooks[0].rules[0].operations: Invalid value: [\"*\",\"CREATE\",\"PATCH\"]: if '*' is present, must not specify other operations",
            "webhooks[0].rules[0].operations[2]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
            "webhooks[0].rules[0].apiGroups: Invalid value: [\"*\",\"apps\"]: if '*' is present, must not specify other API groups",
            "webhooks[0].rules[0].apiVersions: Invalid value: [\"*\",\"\"]: if '*' is present, must not specify other API versions",
            "webhooks[0].rules[0].apiVersions[1]: Required value",
            "webhooks[0].rules[0].resources[2]: Required value",
            "webhooks[0].rules[0].resources: Invalid value: [\"*/*\",\"pods\",\"\"]: if '*/*' is present, must not specify other resources",
            "webhooks[0].rules[0].scope: Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
            "webhooks[0].rules[1].operations: Required value",
            "webhooks[0].rules[1].apiGroups: Required value",
            "webhooks[0].rules[1].apiVersions: Required value",
            "webhooks[0].rules[1].resources: Required value",
        ]
    );
    let errs = errors_of(
        "  clientConfig: {url: \"https://h\"}\n  rules:\n  - {operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [\"*\", pods, \"pods/*\", pods/status, \"*/scale\", deployments/scale]}\n",
    );
    assert_eq!(
        errs,
        vec![
            "webhooks[0].rules[0].resources[3]: Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status",
            "webhooks[0].rules[0].resources[5]: Invalid value: \"deployments/scale\": if '*/scale' is present, must not specify deployments/scale",
            "webhooks[0].rules[0].resources: Invalid value: [\"*\",\"pods\",\"pods/*\",\"pods/status\",\"*/scale\",\"deployments/scale\"]: if '*' is present, must not specify other resources without subresources",
        ]
    );
}

#[test]
fn client_config_validation() {
    assert_eq!(
        errors_of("  clientConfig: {}\n"),
        vec!["webhooks[0].clientConfig: Required value: exactly one of url or service is required"]
    );
    assert_eq!(
        errors_of("  clientConfig: {url: \"https://h\", service: {namespace: ns, name: svc}}\n"),
        vec!["webhooks[0].clientConfig: Required value: exactly one of url or service is required"]
    );
    assert_eq!(
        errors_of("  clientConfig: {url: \"https://u:p@h/p?x=1#f\"}\n"),
        vec![
            "webhooks[0].clientConfig.url: Invalid value: \"u:p\": user information is not permitted in the URL",
            "webhooks[0].clientConfig.url: Invalid value: \"f\": fragments are not permitted in the URL",
            "webhooks[0].clientConfig.url: Invalid value: \"x=1\": query parameters are not permitted in the URL",
        ]
    );
    assert_eq!(
        errors_of("  clientConfig: {url: \"https:///path\"}\n"),
        vec![
            "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified; desired format: https://host[/path]"
        ]
    );
    assert_eq!(
        errors_of("  clientConfig: {url: \"://h\"}\n"),
        vec![
            "webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse \"://h\": missing protocol scheme; desired format: https://host[/path]"
        ]
    );
    assert_eq!(
        errors_of("  clientConfig: {service: {port: 70000, path: \"a//B/\"}}\n"),
        vec![
            "webhooks[0].clientConfig.service.name: Required value",
            "webhooks[0].clientConfig.service.namespace: Required value",
            "webhooks[0].clientConfig.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive",
            "webhooks[0].clientConfig.service.path: Invalid value: \"a//B/\": must start with a '/'",
            "webhooks[0].clientConfig.service.path: Invalid value: \"a//B/\": segment[0] may not be empty",
            "webhooks[0].clientConfig.service.path: Invalid value: \"a//B/\": segment[1] may not be empty",
            "webhooks[0].clientConfig.service.path: Invalid value: \"a//B/\": segment[2]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ]
    );
    assert_eq!(
        errors_of("  clientConfig: {service: {namespace: ns, name: svc, path: \"//\"}}\n"),
        vec![
            "webhooks[0].clientConfig.service.path: Invalid value: \"//\": segment[0] may not be empty"
        ]
    );
    assert!(
        errors_of("  clientConfig: {service: {namespace: ns, name: svc, path: \"/\"}}\n")
            .is_empty()
    );
}

#[test]
fn policies_selectors_and_review_versions() {
    let errs = errors_of(
        "  clientConfig: {url: \"https://h\"}\n  matchPolicy: Loose\n  timeoutSeconds: 0\n  namespaceSelector:\n    matchLabels: {\"a b\": \"c\"}\n    matchExpressions:\n    - {key: k, operator: In}\n    - {key: k, operator: Exists, values: [x]}\n    - {key: k, operator: Foo}\n  objectSelector:\n    matchExpressions:\n    - {key: k, operator: In, values: [\"bad value\"]}\n",
    );
    let label_key = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let label_value = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    assert_eq!(
        errs,
        vec![
            "webhooks[0].matchPolicy: Unsupported value: \"Loose\": supported values: \"Equivalent\", \"Exact\"".to_string(),
            "webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds".to_string(),
            format!("webhooks[0].namespaceSelector.matchLabels: Invalid value: \"a b\": {label_key}"),
            "webhooks[0].namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'".to_string(),
            "webhooks[0].namespaceSelector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".to_string(),
            "webhooks[0].namespaceSelector.matchExpressions[2].operator: Invalid value: \"Foo\": not a valid selector operator".to_string(),
            format!("webhooks[0].objectSelector.matchExpressions[0].values[0]: Invalid value: \"bad value\": {label_value}"),
        ]
    );
    let mut cfg = one(&hook_yaml("  clientConfig: {url: \"https://h\"}\n"));
    cfg.webhooks[0].admission_review_versions = Some(vec!["v2".into(), "v2".into(), "V3".into()]);
    let errs = messages(&validate(&cfg, None));
    assert_eq!(
        errs,
        vec![
            "webhooks[0].admissionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
            "webhooks[0].admissionReviewVersions[2]: Invalid value: \"V3\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\",\"v2\",\"V3\"]: must include at least one of v1, v1beta1",
        ]
    );
}

#[test]
fn names_and_metadata() {
    let mut cfg = one(&hook_yaml("  clientConfig: {url: \"https://h\"}\n"));
    cfg.name = "Bad_Name".into();
    cfg.webhooks.push(cfg.webhooks[0].clone());
    cfg.webhooks.push(cfg.webhooks[0].clone());
    cfg.webhooks[2].name = String::new();
    cfg.kind = WebhookKind::Mutating;
    cfg.webhooks[0].reinvocation_policy = Some("Always".into());
    assert_eq!(
        messages(&validate(&cfg, None)),
        vec![
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
            "webhooks[1].name: Duplicate value: \"hook.example.com\"",
            "webhooks[2].name: Required value",
        ]
    );
    cfg.name = String::new();
    assert_eq!(
        validate(&cfg, None)[0].to_string(),
        "metadata.name: Required value: name or generateName is required"
    );
}

#[test]
fn update_ratchets() {
    let body = "  clientConfig: {url: \"https://h\"}\n  objectSelector:\n    matchExpressions:\n    - {key: k, operator: In, values: [\"bad value\"]}\n";
    let mut old = one(&hook_yaml(body));
    old.webhooks[0].side_effects = Some("Some".into());
    old.webhooks[0].admission_review_versions = Some(vec!["v2".into()]);
    old.webhooks.push(old.webhooks[0].clone());
    let new = old.clone();
    // On create all four rules apply.
    assert_eq!(validate(&new, None).len(), 2 * 3 + 1);
    // On update, an old object that already broke them lets the new one keep doing so.
    assert!(
        validate(&new, Some(&old)).is_empty(),
        "{:?}",
        validate(&new, Some(&old))
    );
    // But an old object that respected them makes them apply.
    let mut strict_old = one(&hook_yaml("  clientConfig: {url: \"https://h\"}\n"));
    strict_old.webhooks.push(strict_old.webhooks[0].clone());
    strict_old.webhooks[1].name = "other.example.com".into();
    assert_eq!(validate(&new, Some(&strict_old)).len(), 2 * 3 + 1);
}

#[test]
fn match_conditions_unchanged_on_update_are_not_rechecked() {
    let body = "  clientConfig: {url: \"https://h\"}\n  matchConditions:\n  - {name: \"\", expression: \"true\"}\n";
    let cfg = one(&hook_yaml(body));
    assert_eq!(
        messages(&validate(&cfg, None)),
        vec!["webhooks[0].matchConditions[0].name: Required value"]
    );
    assert!(validate(&cfg, Some(&cfg)).is_empty());
}

#[test]
fn upstream_configuration_validation_cases() {
    let text = std::fs::read_to_string(fixture("upstream-configuration-validation.json")).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(cases.len(), 11);
    for case in cases {
        for kind in [
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ] {
            let doc = serde_json::json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": case["configurationName"]},
                "webhooks": case["webhooks"],
            });
            let mut cfg = one(&doc.to_string());
            apply_defaults(&mut cfg);
            let errs = validate(&cfg, None);
            let invalid = case["invalid"].as_bool().unwrap();
            assert_eq!(
                !errs.is_empty(),
                invalid,
                "{}: {kind}: {errs:?}",
                case["name"]
            );
            if invalid {
                assert!(
                    errs.iter()
                        .all(|e| e.field.starts_with("webhooks[0].matchConditions")),
                    "{errs:?}"
                );
            }
        }
    }
}

#[test]
fn match_condition_messages() {
    let mut conditions = String::from("  clientConfig: {url: \"https://h\"}\n  matchConditions:\n");
    conditions.push_str("  - {name: \" test1\", expression: \"true\"}\n  - {name: dup, expression: \"  \"}\n  - {name: dup, expression: \"true\"}\n");
    let errs = errors_of(&conditions);
    assert_eq!(
        errs,
        vec![
            "webhooks[0].matchConditions[0].name: Invalid value: \" test1\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "webhooks[0].matchConditions[1].expression: Required value",
            "webhooks[0].matchConditions[2].name: Duplicate value: \"dup\"",
        ]
    );
    let mut many = String::from("  clientConfig: {url: \"https://h\"}\n  matchConditions:\n");
    for i in 0..65 {
        many.push_str(&format!("  - {{name: c{i}, expression: \"true\"}}\n"));
    }
    assert_eq!(
        errors_of(&many),
        vec!["webhooks[0].matchConditions: Too many: 65: must have at most 64 items"]
    );
}

#[test]
fn multi_document_with_broken_middle() {
    let loaded = load_paths(&[fixture("multi.yaml")]);
    assert_eq!(loaded.len(), 3);
    assert_eq!(loaded[0].as_ref().unwrap().configuration.name, "first");
    assert_eq!(loaded[2].as_ref().unwrap().configuration.name, "third");
    assert_eq!(loaded[2].as_ref().unwrap().source.document, 2);
    assert_eq!(loaded[2].as_ref().unwrap().source.line, Some(17));
    let err = loaded[1].as_ref().unwrap_err();
    let LoadError::Syntax { at, line, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!(at.document, 1);
    assert_eq!(*line, 16);
    let text = err.to_string();
    assert!(
        text.contains("multi.yaml: document 2 (starting at line 11): YAML syntax error at line 16"),
        "{text}"
    );
}

#[test]
fn list_items_each_load_or_fail() {
    let loaded = load_paths(&[fixture("list.yaml")]);
    assert_eq!(loaded.len(), 3);
    assert_eq!(
        loaded[0].as_ref().unwrap().configuration.kind,
        WebhookKind::Mutating
    );
    assert!(
        matches!(loaded[1], Err(LoadError::OtherKind { ref kind, ref name, .. }) if kind == "ConfigMap" && &**name == "not-a-webhook")
    );
    assert!(loaded[1].as_ref().unwrap_err().is_other_kind());
    let err = loaded[2].as_ref().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: document 3 (starting at line 1), List item 3: webhooks[0].timeoutSeconds: expected a 32-bit integer, found string \"5\"",
            fixture("list.yaml").display()
        )
    );
}

#[test]
fn external_admission_hook_configuration_is_refused() {
    let loaded = load_paths(&[fixture("external.yaml")]);
    let err = loaded[0].as_ref().unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LoadError::Removed { .. }));
    assert!(
        text.contains("ExternalAdmissionHookConfiguration"),
        "{text}"
    );
    assert!(text.contains("was removed in Kubernetes 1.9"), "{text}");
    assert!(text.contains("admissionregistration.k8s.io/v1 MutatingWebhookConfiguration or ValidatingWebhookConfiguration"), "{text}");
}

#[test]
fn other_load_errors() {
    let r = parse_documents(
        "apiVersion: admissionregistration.k8s.io/v1alpha1\nkind: ValidatingWebhookConfiguration\n",
        "f",
    );
    assert!(matches!(r[0], Err(LoadError::UnsupportedVersion { .. })));
    let r = parse_documents("- 1\n", "f");
    assert_eq!(
        r[0].as_ref().unwrap_err().to_string(),
        "f: document 1 (starting at line 1): expected a Kubernetes object (a mapping), found a list"
    );
    let r = parse_documents(
        &MINIMAL_V1.replace("sideEffects: None", "sideEffects: None\n  timeoutSecond: 3"),
        "f",
    );
    assert_eq!(
        r[0].as_ref().unwrap().unknown_fields,
        vec!["webhooks[0].timeoutSecond"]
    );
    let r = parse_documents(
        &MINIMAL_V1.replace("name: svc}", "name: svc, port: 1.5}"),
        "f",
    );
    assert!(r[0].as_ref().unwrap_err().to_string().ends_with(
        "webhooks[0].clientConfig.service.port: expected a 32-bit integer, found number 1.5"
    ));
    let r = parse_documents(
        "{\"apiVersion\": \"admissionregistration.k8s.io/v1\", \"kind\": \"ValidatingWebhookConfiguration\", \"metadata\": {\"name\": \"j\"}}",
        "f.json",
    );
    assert_eq!(r[0].as_ref().unwrap().configuration.name, "j");
    assert!(parse_documents("", "f").is_empty());
    assert!(matches!(
        load_paths(&[fixture("missing.yaml")])[0],
        Err(LoadError::Io { .. })
    ));
}

#[test]
fn folders_are_read_recursively_and_sorted() {
    let loaded = load_paths(&[fixture("")]);
    let names: Vec<String> = loaded
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|l| l.configuration.name.clone())
        .collect();
    assert!(names.contains(&"oracle-mutating".to_string()));
    assert!(loaded.len() >= 9);
}

#[test]
fn lints() {
    let mut cfg = one(&hook_yaml(
        "  clientConfig: {url: \"https://h\"}\n  rules:\n  - {operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}\n  matchPolicy: Exact\n  failurePolicy: Ignore\n  timeoutSeconds: 30\n  objectSelector:\n    matchExpressions: [{key: skip, operator: DoesNotExist}]\n",
    ));
    apply_defaults(&mut cfg);
    let fields: Vec<String> = lint(&cfg).into_iter().map(|l| l.field).collect();
    assert_eq!(
        fields,
        vec![
            "webhooks[0].namespaceSelector",
            "webhooks[0].objectSelector",
            "webhooks[0].matchPolicy",
            "webhooks[0].timeoutSeconds",
            "webhooks[0].failurePolicy",
            "webhooks[0].clientConfig.caBundle",
        ]
    );
    let mut clean = one(&hook_yaml(
        "  clientConfig: {url: \"https://h\", caBundle: \"\"}\n  rules:\n  - {operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}\n  timeoutSeconds: 5\n  namespaceSelector:\n    matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]\n  objectSelector: {matchLabels: {inject: \"true\"}}\n",
    ));
    apply_defaults(&mut clean);
    assert!(lint(&clean).is_empty(), "{:?}", lint(&clean));
}

mod no_panics {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_documents_never_panics(text in ".{0,400}") {
            let _ = hookscope::config::parse_documents(&text, "fuzz");
        }

        #[test]
        fn yaml_shaped_text_never_panics(text in "(apiVersion: admissionregistration.k8s.io/v1\nkind: (Validating|Mutating)WebhookConfiguration\n)?([a-zA-Z: \\[\\]{}\"'#&*!|>-]|\n|---\n|  ){0,200}") {
            for r in hookscope::config::parse_documents(&text, "fuzz").into_iter().flatten() {
                let mut cfg = r.configuration;
                hookscope::config::apply_defaults(&mut cfg);
                let _ = hookscope::config::validate(&cfg, None);
                let _ = hookscope::config::lint(&cfg);
            }
        }
    }
}
