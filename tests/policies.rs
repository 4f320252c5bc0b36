//! ValidatingAdmissionPolicy: upstream's test tables as data (`fixtures/policies/
//! upstream-cases.yaml`) through the whole engine, configuration validation with upstream's field
//! errors, and the policy plugin's place in the chain beside real HTTPS webhooks.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use hookscope::KubeVersion;
use hookscope::api::policy::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use hookscope::api::{GroupVersionKind, GroupVersionResource, Operation};
use hookscope::config::policy::{PolicyObject, validate_policy_object};
use hookscope::engine::policy::{ParamObjects, ParamSource};
use hookscope::engine::{
    Attributes, AuditLevel, Engine, EngineOptions, NamespaceLookup, NamespaceSource, Namespaces,
    Outcome, Phases, RequestContext, SequentialIds,
};
use hookscope::metrics::Metrics;
use hookscope::script::ScriptedReplier;
use serde::Deserialize;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/policies");

/// Namespaces and parameter objects, as a replay's cluster state gives them.
struct Cluster {
    namespaces: Namespaces,
    params: ParamObjects,
}

impl NamespaceSource for Cluster {
    fn namespace(&self, name: &str) -> NamespaceLookup<'_> {
        self.namespaces.namespace(name)
    }

    fn param_source(&self) -> Option<&dyn ParamSource> {
        Some(&self.params)
    }
}

#[derive(Deserialize)]
struct Case {
    name: String,
    #[serde(default)]
    kube: Option<u32>,
    #[serde(default)]
    policy: serde_json::Map<String, Value>,
    #[serde(default)]
    binding: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    bindings: Option<Vec<NamedBinding>>,
    #[serde(default)]
    params: Vec<Value>,
    #[serde(default)]
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    object: Option<Value>,
    expect: Expect,
}

#[derive(Deserialize)]
struct NamedBinding {
    name: String,
    spec: serde_json::Map<String, Value>,
}

#[derive(Deserialize)]
struct Expect {
    allowed: bool,
    code: Option<i32>,
    reason: Option<String>,
    message: Option<String>,
    warnings: Option<Vec<String>>,
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    metrics: Vec<Sample>,
}

#[derive(Deserialize)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Reads, defaults and validates one policy object as `check` does; panics on a field error
/// (every case's configuration is one the apiserver accepts).
fn load(doc: Value, what: &str) -> PolicyObject {
    let text = serde_json::to_string(&doc).unwrap();
    let mut loaded = hookscope::config::parse_policy_documents(&text, what)
        .remove(0)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    loaded.apply_defaults();
    let errors = validate_policy_object(&loaded.object);
    assert!(errors.is_empty(), "{what}: {errors:?}");
    loaded.object
}

fn build(
    case: &Case,
) -> (
    Vec<ValidatingAdmissionPolicy>,
    Vec<ValidatingAdmissionPolicyBinding>,
) {
    let mut spec = case.policy.clone();
    spec.entry("matchConstraints").or_insert(json!({
        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]
    }));
    let policy = match load(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": "denypolicy.example.com"}, "spec": spec}),
        &case.name,
    ) {
        PolicyObject::Policy(p) => p,
        _ => unreachable!(),
    };
    let named = match (&case.bindings, &case.binding) {
        (Some(list), _) => list
            .iter()
            .map(|b| (b.name.clone(), b.spec.clone()))
            .collect(),
        (None, one) => vec![(
            "denybinding.example.com".to_string(),
            one.clone().unwrap_or_default(),
        )],
    };
    let bindings = named
        .into_iter()
        .map(|(name, mut spec)| {
            spec.insert("policyName".into(), json!("denypolicy.example.com"));
            spec.entry("validationActions").or_insert(json!(["Deny"]));
            match load(
                json!({"apiVersion": "admissionregistration.k8s.io/v1",
                       "kind": "ValidatingAdmissionPolicyBinding",
                       "metadata": {"name": name}, "spec": spec}),
                &case.name,
            ) {
                PolicyObject::Binding(b) => b,
                _ => unreachable!(),
            }
        })
        .collect();
    (vec![policy], bindings)
}

fn attributes(object: Value, operation: Operation) -> Attributes {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let (resource, group, version) = match kind.as_str() {
        "Namespace" => ("namespaces", "", "v1"),
        "Deployment" => ("deployments", "apps", "v1"),
        "Pod" => ("pods", "", "v1"),
        _ => ("configmaps", "", "v1"),
    };
    let s = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Attributes {
        operation,
        kind: GroupVersionKind::new(group, version, &kind).into(),
        resource: GroupVersionResource::new(group, version, resource).into(),
        sub_resource: String::new(),
        namespace: s("/metadata/namespace"),
        name: s("/metadata/name"),
        object: Some(Arc::new(object.into())),
        old_object: None,
        dry_run: false,
        options: None,
        user_info: Default::default(),
    }
}

fn dispatch(engine: &Engine, cluster: &Cluster, attrs: Attributes) -> (Outcome, Metrics) {
    let mut metrics = Metrics::new();
    let mut ids = SequentialIds::default();
    let outcome = engine.dispatch_blocking(
        attrs,
        RequestContext {
            namespaces: cluster,
            ids: &mut ids,
            metrics: &mut metrics,
            deadline: None,
            phases: Phases::All,
        },
        &mut ScriptedReplier::new([]),
    );
    (outcome, metrics)
}

fn cluster(case: &Case) -> Cluster {
    let mut namespaces = Namespaces::default();
    namespaces.insert("default", BTreeMap::new());
    for (name, labels) in &case.namespaces {
        namespaces.insert(name, labels.clone());
    }
    Cluster {
        namespaces,
        params: ParamObjects::new(case.params.clone()),
    }
}

/// The cases of a fixture file (at least `min` of them, so that a truncated file fails).
fn cases<T: serde::de::DeserializeOwned>(file: &str, min: usize) -> Vec<T> {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
    let cases: Vec<T> = hookscope::yaml::from_str(&text).unwrap();
    assert!(cases.len() >= min, "{file}: {} cases", cases.len());
    cases
}

#[test]
fn upstream_validating_policy_cases() {
    let cases: Vec<Case> = cases("upstream-cases.yaml", 40);
    let mut failures = Vec::new();
    for case in &cases {
        let (policies, bindings) = build(case);
        let version = case
            .kube
            .map_or(KubeVersion::NEWEST, |m| KubeVersion::new(m).unwrap());
        let engine = Engine::new(&[], EngineOptions::for_version(version))
            .with_policies(&policies, &bindings);
        let object = case.object.clone().unwrap_or_else(|| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "foo", "namespace": "default"}, "data": {"a": "b"}})
        });
        let (outcome, metrics) = dispatch(
            &engine,
            &cluster(case),
            attributes(object, Operation::Create),
        );
        let e = &case.expect;
        let mut problems = Vec::new();
        if outcome.allowed != e.allowed {
            problems.push(format!(
                "allowed {} (status {:?})",
                outcome.allowed, outcome.status
            ));
        }
        let status = outcome.status.as_deref();
        if let Some(code) = e.code
            && status.map(|s| s.code) != Some(code)
        {
            problems.push(format!("code {:?}", status.map(|s| s.code)));
        }
        if let Some(reason) = &e.reason
            && status.map(|s| s.reason.as_str()) != Some(reason)
        {
            problems.push(format!("reason {:?}", status.map(|s| &s.reason)));
        }
        if let Some(message) = &e.message {
            if status.map(|s| s.message.as_str()) != Some(message) {
                problems.push(format!("message {:?}", status.map(|s| &s.message)));
            }
            // The message is also the status' one cause.
            let causes: Vec<&str> = status
                .and_then(|s| s.details.as_ref())
                .map(|d| d.causes.iter().map(|c| c.message.as_str()).collect())
                .unwrap_or_default();
            let policy_message = &message[message.find("ValidatingAdmissionPolicy").unwrap()..];
            if causes != [policy_message] {
                problems.push(format!("causes {causes:?}"));
            }
        }
        if let Some(w) = &e.warnings
            && outcome.warnings != *w
        {
            problems.push(format!("warnings {:?}", outcome.warnings));
        }
        if let Some(a) = &e.annotations {
            let got = outcome.annotations_at(AuditLevel::Metadata);
            if got != *a {
                problems.push(format!("annotations {got:?}"));
            }
        }
        for s in &e.metrics {
            let labels: Vec<(&str, &str)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let got = metrics.value(&s.name, &labels);
            if got != Some(s.value) {
                problems.push(format!(
                    "metric {} {:?}: {got:?} in\n{}",
                    s.name,
                    s.labels,
                    metrics.encode_text()
                ));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("{}:\n  {}", case.name, problems.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ValidationCase {
    name: String,
    kind: String,
    #[serde(default)]
    metadata_name: Option<String>,
    #[serde(default)]
    spec: serde_json::Map<String, Value>,
    error: String,
}

#[test]
fn upstream_policy_validation_cases() {
    let cases: Vec<ValidationCase> = cases("validation-cases.yaml", 40);
    let mut failures = Vec::new();
    for case in &cases {
        let mut spec = if case.kind == "ValidatingAdmissionPolicy" {
            json!({
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
                "validations": [{"expression": "true"}],
            })
        } else {
            json!({"policyName": "p", "validationActions": ["Deny"]})
        };
        spec = common::merged(spec, &case.spec);
        let doc = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": case.kind,
            "metadata": {"name": case.metadata_name.as_deref().unwrap_or("config")},
            "spec": spec,
        });
        let mut loaded =
            hookscope::config::parse_policy_documents(&doc.to_string(), "case.json").remove(0);
        let loaded = match &mut loaded {
            Ok(l) => l,
            Err(e) => {
                failures.push(format!("{}: {e}", case.name));
                continue;
            }
        };
        loaded.apply_defaults();
        let errors: Vec<String> = validate_policy_object(&loaded.object)
            .iter()
            .map(ToString::to_string)
            .collect();
        let joined = errors.join(", ");
        let ok = if case.error.is_empty() {
            errors.is_empty()
        } else {
            joined.contains(&case.error)
        };
        if !ok {
            failures.push(format!(
                "{}: expected {:?}, got {joined:?}",
                case.name, case.error
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The chain a user replays: a mutating webhook, validating admission policies, a validating
/// webhook, all from one `--webhooks` file, over real HTTPS to servers started here.
#[test]
fn replay_runs_policies_between_the_mutating_and_the_validating_webhooks() {
    use base64::Engine as _;
    use common::{TestPki, WebhookServer, handler, v1_allow, v1_patch};

    let pki = TestPki::new();
    let server = WebhookServer::start(
        &pki,
        handler(|req| {
            let uid = req.review_uid().unwrap_or_default();
            match req.path_only() {
                "/label" => v1_patch(
                    &uid,
                    r#"[{"op":"add","path":"/metadata/labels","value":{"injected":"yes"}}]"#,
                ),
                _ => v1_allow(&uid),
            }
        }),
    );
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.ca_pem());
    let hook = |name: &str, path: &str| {
        format!(
            "- name: {name}\n  clientConfig: {{url: \"{}\", caBundle: {ca}}}\n  rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n",
            server.url(path)
        )
    };
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("policies-replay");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let admission = dir.join("admission.yaml");
    let rule = "resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]";
    std::fs::write(
        &admission,
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: labeller}}\nwebhooks:\n{}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: injected}}
spec:
  matchConstraints: {{{rule}}}
  validations:
    - expression: \"has(object.metadata.labels) && object.metadata.labels.injected == 'yes'\"
      message: the labeller did not run
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: injected}}
spec: {{policyName: injected, validationActions: [Deny]}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: no-secrets}}
spec:
  matchConstraints: {{{rule}}}
  validations:
    - expression: \"!('password' in object.data)\"
      messageExpression: \"'ConfigMap ' + object.metadata.name + ' holds a password'\"
      reason: Forbidden
  auditAnnotations:
    - {{key: keys, valueExpression: \"string(object.data.size()) + ' keys'\"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: no-secrets}}
spec: {{policyName: no-secrets, validationActions: [Deny]}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: team}}
spec:
  matchConstraints: {{{rule}}}
  validations: [{{expression: \"'team' in object.metadata.labels\", message: a team label is expected}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: team-warn}}
spec: {{policyName: team, validationActions: [Warn]}}
---
apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: checker}}\nwebhooks:\n{}",
            hook("label.example.com", "/label"),
            hook("check.example.com", "/allow"),
        ),
    )
    .unwrap();
    let review = |uid: &str, name: &str, data: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": name, "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data},
            "oldObject": null, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}})
        .to_string()
    };
    let input = dir.join("requests.jsonl");
    std::fs::write(
        &input,
        [
            review("good", "settings", json!({"mode": "fast", "level": "3"})),
            review("bad", "creds", json!({"password": "hunter2"})),
        ]
        .join("\n"),
    )
    .unwrap();
    let (audit_log, metrics) = (dir.join("audit.log"), dir.join("metrics.txt"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["replay", "--format", "json", "--admission"])
        .arg(&admission)
        .arg("--input")
        .arg(&input)
        .arg("--audit-log")
        .arg(&audit_log)
        .arg("--metrics")
        .arg(&metrics)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let requests = report["requests"].as_array().unwrap();
    let good = &requests[0];
    let bad = &requests[1];

    // The chain in upstream's order; the policies saw the labeller's patch.
    let steps = |r: &Value| -> Vec<String> {
        r["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{} {}/{}",
                    c["phase"].as_str().unwrap(),
                    c["configuration"].as_str().unwrap(),
                    c["webhook"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        steps(good),
        [
            "mutating labeller/label.example.com",
            // Round 1: not reinvoked (reinvocationPolicy Never).
            "mutating labeller/label.example.com",
            "validatingPolicy injected/injected",
            "validatingPolicy no-secrets/no-secrets",
            "validatingPolicy team/team-warn",
            "validating checker/check.example.com",
        ]
    );
    assert_eq!(good["allowed"], true, "{good}");
    assert_eq!(
        good["warnings"],
        json!([
            "Validation failed for ValidatingAdmissionPolicy 'team' with binding 'team-warn': a team label is expected"
        ])
    );
    assert_eq!(good["annotations"]["no-secrets/keys"], "2 keys");

    // The denial stops the chain before the validating webhook.
    assert_eq!(bad["allowed"], false);
    assert_eq!(bad["status"]["code"], 403);
    assert_eq!(bad["status"]["reason"], "Forbidden");
    assert_eq!(
        bad["status"]["message"],
        "configmaps \"creds\" is forbidden: ValidatingAdmissionPolicy 'no-secrets' with binding 'no-secrets' denied request: ConfigMap creds holds a password"
    );
    assert!(
        !steps(bad).iter().any(|s| s.starts_with("validating ")),
        "{:?}",
        steps(bad)
    );
    let validating_calls = server
        .requests()
        .iter()
        .filter(|r| r.path_only() == "/allow")
        .count();
    assert_eq!(
        validating_calls, 1,
        "the webhook after the denial is not called"
    );

    // The audit events and the metrics carry the policies' share.
    let events: Vec<Value> = std::fs::read_to_string(&audit_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["annotations"]["no-secrets/keys"], "2 keys");
    assert_eq!(events[1]["responseStatus"]["code"], 403);
    let text = std::fs::read_to_string(&metrics).unwrap();
    for line in [
        "apiserver_validating_admission_policy_check_total{enforcement_action=\"deny\",error_type=\"invalid_error\",policy=\"no-secrets\",policy_binding=\"no-secrets\"} 1",
        "apiserver_validating_admission_policy_check_total{enforcement_action=\"warn\",error_type=\"invalid_error\",policy=\"team\",policy_binding=\"team-warn\"} 2",
        "apiserver_admission_controller_admission_duration_seconds_count{name=\"ValidatingAdmissionPolicy\",operation=\"CREATE\",rejected=\"true\",type=\"validate\"} 1",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

/// `check` refuses a policy under an apiVersion the modelled release does not serve, saying
/// which to write, and says what a release before 1.30 needs switched on.
#[test]
fn check_follows_the_versions_each_release_serves() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("policies-versions");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = |version: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/{version}\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: p}}\nspec:\n  matchConstraints: {{resourceRules: [{{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]}}\n  validations: [{{expression: \"true\"}}]\n"
        )
    };
    let check = |kube: &str, version: &str| {
        let path = dir.join(format!("{kube}-{version}.yaml"));
        std::fs::write(&path, policy(version)).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
            .args(["--kube-version", kube, "check", "--admission"])
            .arg(&path)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = check("1.29", "v1");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("error apiVersion: admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy is served by Kubernetes 1.30 and later (modelled: 1.29): kubectl apply fails with 'no matches for kind \"ValidatingAdmissionPolicy\" in version \"admissionregistration.k8s.io/v1\"'; write it as admissionregistration.k8s.io/v1beta1"),
        "{out}"
    );
    let (code, out) = check("1.33", "v1alpha1");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("is served by Kubernetes 1.26 to 1.31 (modelled: 1.33)")
            && out.contains("write it as admissionregistration.k8s.io/v1"),
        "{out}"
    );
    let (code, out) = check("1.29", "v1beta1");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("warning apiVersion: Kubernetes 1.29 runs ValidatingAdmissionPolicies only with --feature-gates=ValidatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true"),
        "{out}"
    );
    let (code, out) = check("1.33", "v1");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("default spec.failurePolicy: Fail"), "{out}");
}

/// A replayed audit log: a policy's parameter is the ConfigMap the log created before a request,
/// and no parameter exists for the requests before it.
#[test]
fn parameters_are_the_objects_an_audit_log_showed_before_each_request() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("policies-audit-params");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let event = |id: &str, resource: &str, name: &str, object: Value, code: i64| {
        let (group, version, path) = if resource == "deployments" {
            ("apps", "v1", "/apis/apps/v1")
        } else {
            ("", "v1", "/api/v1")
        };
        let mut stored = object.clone();
        stored["metadata"]["uid"] = json!(format!("uid-{id}"));
        stored["metadata"]["resourceVersion"] = json!("1");
        json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
            "auditID": id, "stage": "ResponseComplete",
            "requestURI": format!("{path}/namespaces/shop/{resource}"), "verb": "create",
            "user": {"username": "alice", "groups": ["system:authenticated"]},
            "sourceIPs": ["127.0.0.1"],
            "objectRef": {"resource": resource, "namespace": "shop", "name": name, "apiGroup": group, "apiVersion": version},
            "responseStatus": {"metadata": {}, "code": code},
            "requestObject": object,
            "responseObject": if code == 201 { stored } else { Value::Null },
            "requestReceivedTimestamp": "2026-11-26T07:00:00.000000Z",
            "stageTimestamp": "2026-11-26T07:00:00.100000Z",
        })
        .to_string()
    };
    let deployment = |name: &str, replicas: u32| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": "shop", "labels": {"team": "a"}},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    };
    let log = dir.join("audit.log");
    std::fs::write(
        &log,
        [
            event("a1", "deployments", "early", deployment("early", 4), 201),
            event(
                "a2",
                "configmaps",
                "replica-limit",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "replica-limit", "namespace": "shop"},
                       "data": {"maxReplicas": "3"}}),
                201,
            ),
            event("a3", "deployments", "late", deployment("late", 4), 201),
            event("a4", "deployments", "small", deployment("small", 2), 201),
        ]
        .join("\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["replay", "--format", "json", "--webhooks"])
        .arg(format!("{FIXTURES}/chain.yaml"))
        .arg("--input")
        .arg(&log)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let outcome = |i: usize| {
        let r = &report["requests"][i];
        (
            r["allowed"].as_bool().unwrap(),
            r["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    assert_eq!(
        outcome(0),
        (
            false,
            "deployments.apps \"early\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".into()
        )
    );
    assert_eq!(outcome(1), (true, String::new()));
    assert_eq!(
        outcome(2),
        (
            false,
            "deployments.apps \"late\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: replicas 4 exceed the limit of 3".into()
        )
    );
    assert_eq!(outcome(3), (true, String::new()));
}

/// A case of `upstream-mutating-cases.yaml`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MutatingCase {
    name: String,
    patch_type: String,
    expression: String,
    object: Value,
    #[serde(default)]
    old_object: Option<Value>,
    expect: MutatingExpect,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MutatingExpect {
    #[serde(default)]
    object: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    compile_error: Option<String>,
    /// The error of the apiserver's strict decode of the patched object: a 500 whatever the
    /// failure policy.
    #[serde(default)]
    internal_error: Option<String>,
}

/// Whether every member of `want` is in `got` (lists item by item).
fn contains(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| contains(a, b))
        }
        _ => got == want,
    }
}

#[test]
fn upstream_mutating_policy_cases() {
    let cases: Vec<MutatingCase> = cases("upstream-mutating-cases.yaml", 15);
    let mut failures = Vec::new();
    for case in &cases {
        let field = if case.patch_type == "JSONPatch" {
            "jsonPatch"
        } else {
            "applyConfiguration"
        };
        let mutations =
            json!([{"patchType": case.patch_type, field: {"expression": case.expression}}]);
        let doc = json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1",
            "kind": "MutatingAdmissionPolicy", "metadata": {"name": "case"},
            "spec": {"reinvocationPolicy": "Never",
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                "mutations": mutations}});
        let mut loaded = hookscope::config::parse_policy_documents(&doc.to_string(), "case.json")
            .remove(0)
            .unwrap();
        loaded.apply_defaults();
        let errors: Vec<String> = validate_policy_object(&loaded.object)
            .iter()
            .map(ToString::to_string)
            .collect();
        if let Some(want) = &case.expect.compile_error {
            if !errors.iter().any(|e| e.ends_with(want.as_str())) {
                failures.push(format!("{}: field errors {errors:?}", case.name));
            }
            continue;
        }
        if !errors.is_empty() {
            failures.push(format!("{}: field errors {errors:?}", case.name));
            continue;
        }
        let engine = mutating_engine(mutations, 33);
        let with_meta = |o: &Value| {
            let mut o = o.clone();
            o["apiVersion"] = json!("apps/v1");
            o["kind"] = json!("Deployment");
            o["metadata"]["name"] = json!("web");
            o["metadata"]["namespace"] = json!("default");
            o
        };
        let mut attrs = attributes(
            with_meta(&case.object),
            if case.old_object.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
        );
        attrs.old_object = case
            .old_object
            .as_ref()
            .map(|o| Arc::new(with_meta(o).into()));
        let cluster = Cluster {
            namespaces: {
                let mut n = Namespaces::default();
                n.insert("default", BTreeMap::new());
                n
            },
            params: ParamObjects::default(),
        };
        let (outcome, _) = dispatch(&engine, &cluster, attrs);
        if let Some(want) = &case.expect.internal_error {
            let status = outcome.status.as_ref();
            let got = status.map(|s| (s.code, s.reason.as_str(), s.message.clone()));
            if got
                != Some((
                    500,
                    "InternalError",
                    format!("Internal error occurred: {want}"),
                ))
            {
                failures.push(format!("{}: {got:?}", case.name));
            }
            continue;
        }
        match (&case.expect.object, &case.expect.error) {
            (Some(want), _) => {
                let got = outcome.object.as_deref().map(|o| o.value().clone());
                if !outcome.allowed || !got.as_ref().is_some_and(|g| contains(g, want)) {
                    failures.push(format!(
                        "{}: allowed {} object {got:?} status {:?}",
                        case.name, outcome.allowed, outcome.status
                    ));
                }
            }
            (None, Some(want)) => {
                let message = outcome.status.as_ref().map(|s| s.message.clone());
                let expected = format!("policy 'case' with binding 'case' denied request: {want}");
                if outcome.allowed || message.as_deref() != Some(expected.as_str()) {
                    failures.push(format!("{}: message {message:?}", case.name));
                }
                if let Some(s) = &outcome.status
                    && (s.code, s.reason.as_str()) != (403, "Invalid")
                {
                    failures.push(format!("{}: {} {}", case.name, s.code, s.reason));
                }
            }
            (None, None) => failures.push(format!("{}: nothing expected", case.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn check_refuses_an_invalid_mutating_policy_with_the_apiservers_field_errors() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["--kube-version", "1.33", "check", "--webhooks"])
        .arg(format!("{FIXTURES}/invalid-mutating-policy.yaml"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for error in [
        r#"spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#,
        "spec.mutations[0].jsonPatch.expression: Invalid value: \"[JSONPatch{op: 1}]\": compilation failed: ERROR: <input>:1:",
        "expected type of field 'op' is 'string' but provided type is 'int'",
        "spec.mutations[1].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
        "spec.reinvocationPolicy: Required value",
    ] {
        assert!(text.contains(error), "{error}\n{text}");
    }
    assert!(
        text.contains("1 configuration checked: 0 valid, 1 invalid"),
        "{text}"
    );
    assert!(!text.contains("other kinds"), "{text}");
}

/// An engine with one MutatingAdmissionPolicy `case` (its `mutations` as given, over
/// deployments) bound everywhere, at Kubernetes 1.`minor`.
fn mutating_engine(mutations: Value, minor: u32) -> Engine {
    let mut set = hookscope::config::policy::PolicySet::default();
    for doc in [
        json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1",
            "kind": "MutatingAdmissionPolicy", "metadata": {"name": "case"},
            "spec": {"reinvocationPolicy": "Never",
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                "mutations": mutations}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1",
            "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "case"},
            "spec": {"policyName": "case"}}),
    ] {
        set.insert(load(doc, "mutating_engine"));
    }
    Engine::new(
        &[],
        EngineOptions::for_version(KubeVersion::new(minor).unwrap()),
    )
    .with_mutating_policies(&set.mutating, &set.mutating_bindings)
}

#[test]
fn mutations_are_counted_per_mutation_from_1_34() {
    let mutations = json!([
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/metadata/labels', value: {'a': 'b'}}]"}},
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'remove', path: '/spec/paused'}]"}}
    ]);
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 1}});
    let cluster = Cluster {
        namespaces: {
            let mut n = Namespaces::default();
            n.insert("default", BTreeMap::new());
            n
        },
        params: ParamObjects::default(),
    };
    let (outcome, metrics) = dispatch(
        &mutating_engine(mutations.clone(), 34),
        &cluster,
        attributes(deployment.clone(), Operation::Create),
    );
    // The failed remove denies under Fail; both mutations were evaluated and counted.
    assert!(!outcome.allowed);
    let text = metrics.encode_text();
    for series in [
        r#"apiserver_mutating_admission_policy_check_total{error_type="no_error",policy="case",policy_binding="case"} 1"#,
        r#"apiserver_mutating_admission_policy_check_total{error_type="invalid_error",policy="case",policy_binding="case"} 1"#,
        r#"apiserver_mutating_admission_policy_check_duration_seconds_count{error_type="no_error",policy="case",policy_binding="case"} 1"#,
        "# HELP apiserver_mutating_admission_policy_check_total [ALPHA] Mutation admission policy check total, labeled by policy and further identified by binding.",
    ] {
        assert!(text.contains(series), "{series}\n{text}");
    }
    // Kubernetes 1.33 has no such metric (the recorded v1.33 session shows none).
    let (_, metrics) = dispatch(
        &mutating_engine(mutations, 33),
        &cluster,
        attributes(deployment, Operation::Create),
    );
    assert!(
        !metrics
            .encode_text()
            .contains("mutating_admission_policy_check")
    );
}

#[test]
fn the_feature_gate_note_is_said_once_per_file() {
    let inputs = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/policies-v1.33/inputs"
    );
    let out = replay_on_1_33(&[
        "--webhooks",
        &format!("{inputs}/mutating-policies.yaml"),
        "--cluster",
        &format!("{inputs}/namespaces.yaml"),
        "--input",
        &format!("{inputs}/deploy-web.yaml"),
    ]);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // Four documents (two policies, two bindings), one note.
    assert_eq!(
        text.matches("--feature-gates=MutatingAdmissionPolicy=true")
            .count(),
        1,
        "{text}"
    );
    // The policy mutated the Deployment.
    assert!(
        text.contains("mutated by annotate-deployments/annotate-deployments-binding"),
        "{text}"
    );
}

/// A MutatingAdmissionPolicy (or its binding) is read from `--webhooks`, not skipped as an
/// object of another kind in the verbose listing of what a file held besides configurations.
#[test]
fn replay_does_not_list_mutating_policies_among_other_kinds() {
    let dir = std::env::temp_dir().join(format!("hookscope-map-kinds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policies = dir.join("policies.yaml");
    let text = format!(
        "{}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n",
        hookscope::tui::demo::POLICIES_YAML
    );
    std::fs::write(&policies, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["replay", "-v", "--webhooks"])
        .arg(&policies)
        .arg("--input")
        .arg(format!("{FIXTURES}/requests.jsonl"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("of other kinds"))
        .unwrap_or_else(|| panic!("the Namespace is listed\n{text}"));
    assert!(
        line.ends_with("skipped 1 document of other kinds: Namespace"),
        "{line}"
    );
}

/// An ApplyConfiguration mutation of a custom resource is merged over the schema of its
/// CustomResourceDefinition, as the apiserver's type converter (fed the CRD's published schema)
/// merges it: a map-list by key, atomic maps refused as for built-in kinds. Without the definition
/// the object is merged as a deduced type, which replaces lists whole.
#[test]
fn apply_configurations_of_custom_resources_merge_over_their_definitions_schema() {
    let crd_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/custom-apply-v1.33/inputs/crd.yaml"
    ))
    .unwrap();
    // The file's second document is the definition (the first, its namespace).
    let crd = crd_text.split("\n---\n").nth(1).unwrap();
    let specs = hookscope::registry::load_custom_resources(crd).unwrap();
    let engine = |expression: &str, with_crd: bool| {
        let mut set = hookscope::config::policy::PolicySet::default();
        for doc in [
            json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1",
                "kind": "MutatingAdmissionPolicy", "metadata": {"name": "case"},
                "spec": {"reinvocationPolicy": "Never",
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["example.com"],
                        "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["gadgets"]}]},
                    "mutations": [{"patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": expression}}]}}),
            json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1",
                "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "case"},
                "spec": {"policyName": "case"}}),
        ] {
            set.insert(load(doc, "custom resource policy"));
        }
        let mut options = EngineOptions::for_version(KubeVersion::new(33).unwrap());
        if with_crd {
            for spec in &specs {
                options.registry.add_custom_resource(spec);
            }
        }
        Engine::new(&[], options).with_mutating_policies(&set.mutating, &set.mutating_bindings)
    };
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}], "selector": {"app": "g"}}});
    let attrs = || {
        let mut a = attributes(gadget.clone(), Operation::Create);
        a.kind = GroupVersionKind::new("example.com", "v1", "Gadget").into();
        a.resource = GroupVersionResource::new("example.com", "v1", "gadgets").into();
        a
    };
    let cluster = Cluster {
        namespaces: {
            let mut n = Namespaces::default();
            n.insert("default", BTreeMap::new());
            n
        },
        params: ParamObjects::default(),
    };
    let add_port = r#"Object{spec: Object.spec{ports: [Object.spec.ports{name: "metrics", protocol: "TCP", port: 9090}]}}"#;
    let ports = |with_crd: bool| {
        let (outcome, _) = dispatch(&engine(add_port, with_crd), &cluster, attrs());
        assert!(outcome.allowed, "{:?}", outcome.status);
        outcome.object.unwrap().value()["spec"]["ports"].clone()
    };
    assert_eq!(
        ports(true),
        json!([{"name": "http", "protocol": "TCP", "port": 80},
               {"name": "metrics", "protocol": "TCP", "port": 9090}])
    );
    assert_eq!(
        ports(false),
        json!([{"name": "metrics", "protocol": "TCP", "port": 9090}])
    );
    let set_selector = r#"Object{spec: Object.spec{selector: {"app": "h"}}}"#;
    let (outcome, _) = dispatch(&engine(set_selector, true), &cluster, attrs());
    assert!(!outcome.allowed);
    assert_eq!(
        outcome.status.unwrap().message,
        "policy 'case' with binding 'case' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"
    );
}

/// A JSON patch that leaves the object with a field its type lacks (or a value of the wrong
/// type) fails the request with the apiserver's 500 whatever the failure policy: the recorded
/// answers of a v1.33.3 apiserver, `tests/fixtures/policies-v1.33/strict-decode`.
#[test]
fn a_json_patched_object_is_decoded_strictly_and_its_error_fails_the_request() {
    const DIR: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/policies-v1.33/strict-decode"
    );
    let text = std::fs::read_to_string(format!("{DIR}/policy.yaml")).unwrap();
    let mut set = hookscope::config::policy::PolicySet::default();
    for loaded in hookscope::config::parse_policy_documents(&text, "policy.yaml") {
        let mut loaded = loaded.unwrap();
        loaded.apply_defaults();
        assert!(validate_policy_object(&loaded.object).is_empty());
        set.insert(loaded.object);
    }
    let engine = Engine::new(
        &[],
        EngineOptions::for_version(KubeVersion::new(33).unwrap()),
    )
    .with_mutating_policies(&set.mutating, &set.mutating_bindings);
    let cluster = Cluster {
        namespaces: {
            let mut n = Namespaces::default();
            n.insert("default", BTreeMap::new());
            n
        },
        params: ParamObjects::default(),
    };
    let create = |name: &str| {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}});
        dispatch(&engine, &cluster, attributes(object, Operation::Create)).0
    };
    for name in ["strict-two", "strict-type"] {
        let recorded: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{DIR}/status-{name}.json")).unwrap(),
        )
        .unwrap();
        let outcome = create(name);
        assert!(!outcome.allowed, "{name}");
        let status = serde_json::to_value(outcome.status.as_ref().unwrap()).unwrap();
        for field in ["status", "message", "reason", "details", "code"] {
            assert_eq!(status[field], recorded[field], "{name}: {field}");
        }
    }
    let one = create("strict-one");
    assert_eq!(
        one.status.map(|s| s.message),
        Some(
            r#"Internal error occurred: strict decoding error: unknown field "metadata.labelz""#
                .to_string()
        )
    );
    assert!(create("plain").allowed);
}

/// 1.28 and 1.29 count each ValidatingAdmissionPolicy definition their controller takes in
/// (`ObserveDefinition(ctx, "active", "deny")` in `controller_reconcile.go`), in the text of
/// upstream's `metrics_test.go`; 1.30 registers the family but never observes it, and later
/// releases have none.
#[test]
fn policy_definitions_are_counted_in_1_28_and_1_29_only() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("policies-definitions");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policies = |version: &str| {
        ["first", "second"]
            .map(|name| {
                format!(
                    "apiVersion: admissionregistration.k8s.io/{version}\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n  matchConstraints: {{resourceRules: [{{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]}}\n  validations: [{{expression: \"true\"}}]\n"
                )
            })
            .join("---\n")
    };
    let input = dir.join("requests.jsonl");
    std::fs::write(
        &input,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "c", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}},
            "oldObject": null, "dryRun": false}})
        .to_string(),
    )
    .unwrap();
    let replay = |kube: &str, version: &str| {
        let admission = dir.join(format!("{kube}.yaml"));
        std::fs::write(&admission, policies(version)).unwrap();
        let metrics = dir.join(format!("{kube}-metrics.txt"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
            .args(["--kube-version", kube, "replay", "--admission"])
            .arg(&admission)
            .arg("--input")
            .arg(&input)
            .arg("--metrics")
            .arg(&metrics)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&metrics).unwrap()
    };
    for kube in ["1.28", "1.29"] {
        let text = replay(kube, "v1beta1");
        assert!(
            text.contains(concat!(
                "# HELP apiserver_validating_admission_policy_definition_total [ALPHA] Validation admission policy count total, labeled by state and enforcement action.\n",
                "# TYPE apiserver_validating_admission_policy_definition_total counter\n",
                "apiserver_validating_admission_policy_definition_total{enforcement_action=\"deny\",state=\"active\"} 2\n"
            )),
            "{kube}:\n{text}"
        );
    }
    for kube in ["1.30", "1.33"] {
        let text = replay(kube, "v1");
        assert!(
            text.contains("name=\"ValidatingAdmissionPolicy\"")
                && !text.contains("definition_total"),
            "{kube}:\n{text}"
        );
    }
}

/// The per-call limit and the policy's runtime budget, against a v1.33.3 apiserver
/// (`fixtures/cel-cost-v1.33`): for each policy, the largest ConfigMap it allowed and the
/// smallest it denied, found by bisection there, answered alike here with the same status.
#[test]
fn cel_cost_limits_deny_at_the_sizes_a_v1_33_apiserver_did() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cel-cost-v1.33");
    let read = |file: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/{file}")).unwrap()).unwrap()
    };
    let policies = read("policies.json");
    let outcomes = read("outcomes.json");
    // Every policy was accepted on create, the one whose estimated cost is far beyond the
    // per-call limit too: 1.33 checks no estimated cost for ValidatingAdmissionPolicy.
    for (name, recorded) in policies.as_object().unwrap() {
        assert_eq!(recorded["policyStatus"], 201, "{name}");
        load(recorded["policy"].clone(), name);
    }
    let cluster = Cluster {
        namespaces: {
            let mut n = Namespaces::default();
            n.insert("default", BTreeMap::new());
            n
        },
        params: ParamObjects::new(Vec::new()),
    };
    let mut failures = Vec::new();
    for (case, policy) in [
        ("matches", "cost-matches"),
        ("all", "cost-all"),
        ("budget", "cost-budget"),
        ("contains", "cost-contains"),
        ("exists", "cost-exists"),
    ] {
        let PolicyObject::Policy(p) = load(policies[policy]["policy"].clone(), policy) else {
            unreachable!()
        };
        let PolicyObject::Binding(b) = load(policies[policy]["binding"].clone(), policy) else {
            unreachable!()
        };
        let engine = Engine::new(
            &[],
            EngineOptions::for_version(KubeVersion::new(33).unwrap()),
        )
        .with_policies(&[p], &[b]);
        let recorded = &outcomes[case];
        for request in recorded["requests"].as_array().unwrap() {
            let size = request["size"].as_u64().unwrap() as usize;
            let name = format!("{case}-{size}");
            let data: serde_json::Map<String, Value> = match case {
                "all" | "exists" => (0..size).map(|i| (format!("k{i}"), json!(""))).collect(),
                "contains" => [
                    ("s".to_string(), json!("a".repeat(size))),
                    ("t".to_string(), json!("b".repeat(1000))),
                ]
                .into_iter()
                .collect(),
                _ => [("s".to_string(), json!("a".repeat(size)))]
                    .into_iter()
                    .collect(),
            };
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "labels": {"case": case}},
                "data": data});
            let (outcome, _) = dispatch(&engine, &cluster, attributes(object, Operation::Create));
            let want_allowed = request["code"] == 201;
            let got = outcome.status.as_ref().map(|s| (s.code, s.message.clone()));
            let want = (!want_allowed).then(|| {
                (
                    request["code"].as_i64().unwrap() as i32,
                    request["response"]["message"].as_str().unwrap().to_string(),
                )
            });
            if outcome.allowed != want_allowed || got != want {
                failures.push(format!("{name}: allowed {} {got:?}", outcome.allowed));
            }
            // Neither error writes a policy audit annotation (only the authorizer's were).
            let recorded: Vec<&String> = request["audit"]["annotations"]
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| k.contains("policy"))
                .collect();
            let annotations = outcome.annotations_at(AuditLevel::Metadata);
            let written: Vec<&String> = annotations
                .keys()
                .filter(|k| k.contains("policy"))
                .collect();
            if written != recorded {
                failures.push(format!("{name}: annotations {written:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A policy's runtime error under failurePolicy Fail refuses the request: the v1.33.3 apiserver
/// counted it as `enforcement_action="deny"` with `error_type="invalid_error"`
/// (`fixtures/policies-more-v1.33/cel-runtime`). The console's per-webhook counts and `hookscope
/// replay`'s summary both count it as denied and as an error.
#[test]
fn a_policy_error_under_fail_is_counted_denied_and_errored_by_both_front_ends() {
    let read = |f: &str| fixture(&format!("policies-more-v1.33/cel-runtime/{f}"));
    assert!(read("metrics.txt").contains(
        r#"{enforcement_action="deny",error_type="invalid_error",policy="rt-in-empty",policy_binding="rt-in-empty"} 1"#
    ));
    let (engine, cluster) = recorded_policy(
        &read("inputs/policies.yaml"),
        "rt-in-empty",
        (
            "celrt",
            BTreeMap::from([("kubernetes.io/metadata.name".into(), "celrt".into())]),
        ),
    );
    let object: Value = serde_json::from_str(&read("inputs/cm-in-empty.yaml")).unwrap();
    let (outcome, _) = dispatch(&engine, &cluster, attributes(object, Operation::Create));
    assert!(!outcome.allowed);
    let stats = hookscope::edit::outcome_stats(&outcome);
    let (_, console) = stats
        .iter()
        .find(|(k, _)| k.configuration == "rt-in-empty")
        .expect("the policy's counts");
    assert_eq!((console.denied, console.errored), (1, 1));
    // The summary of `hookscope replay` over the recorded audit log: called, skipped, mutated,
    // denied, errors, fail-open.
    let out = replay_on_1_33(&[
        "--webhooks",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/policies-more-v1.33/cel-runtime/inputs/policies.yaml"
        ),
        "--input",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/policies-more-v1.33/cel-runtime/audit.log"
        ),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("validatingPolicy rt-in-empty/rt-in-empty "))
        .expect("the policy's summary row")
        .split_whitespace()
        .collect();
    assert_eq!(row[5..7], ["1", "1"], "{row:?}");
}

/// `hookscope --kube-version 1.33 replay` with `args`, uncoloured.
fn replay_on_1_33(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["--kube-version", "1.33", "replay"])
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// The engine compiles a stored policy as the modelled release's apiserver compiles what it
/// has stored: with that release's own libraries. `isSemver` (the semver library, added in
/// 1.33) runs on 1.33; 1.32 has no such library, so the expression fails to compile there and
/// `failurePolicy: Fail` refuses the request with the compile error (modelled from 1.32's
/// `environment/base.go`; no 1.32 apiserver was run).
#[test]
fn stored_policy_expressions_compile_with_the_modelled_release() {
    let case: Case = serde_json::from_value(json!({
        "name": "semver",
        "policy": {"validations": [{"expression": "isSemver('1.0.0')"}]},
        "expect": {"allowed": true},
    }))
    .unwrap();
    let (policies, bindings) = build(&case);
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "foo", "namespace": "default"}});
    let outcome = |minor: u32| {
        let engine = Engine::new(
            &[],
            EngineOptions::for_version(KubeVersion::new(minor).unwrap()),
        )
        .with_policies(&policies, &bindings);
        dispatch(
            &engine,
            &cluster(&case),
            attributes(object.clone(), Operation::Create),
        )
        .0
    };
    assert!(outcome(33).allowed);
    let refused = outcome(32);
    assert!(!refused.allowed);
    let message = refused.status.map(|s| s.message).unwrap_or_default();
    assert!(
        message.contains("compilation error: ")
            && message.contains("undeclared reference to 'isSemver'"),
        "{message}"
    );
}

/// A two-variable `all` costs per iteration what the one-variable one does (loop condition 2,
/// step 1, the predicate): `object.data.all(k, v, k.matches(R))` with a 400-character `R`
/// was allowed with 9,615 keys and denied over the per-call limit with 9,616 by a v1.33.3
/// apiserver (`fixtures/cel-cost-v1.33/twovar`), as its one-variable twin.
#[test]
fn two_variable_comprehension_costs_deny_at_the_size_a_v1_33_apiserver_did() {
    let read = |f: &str| fixture(&format!("cel-cost-v1.33/twovar/{f}"));
    let (engine, cluster) = recorded_policy(
        &read("policy.yaml"),
        "twovar-cost",
        ("default", BTreeMap::new()),
    );
    for keys in [9615, 9616] {
        let printed = read(&format!("kubectl-{keys}.txt"));
        let data: serde_json::Map<String, Value> =
            (0..keys).map(|i| (format!("k{i}"), json!(""))).collect();
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("twovar-cost-{keys}"), "namespace": "default",
                         "labels": {"case": "twovar-cost"}},
            "data": data});
        let (outcome, _) = dispatch(&engine, &cluster, attributes(object, Operation::Create));
        assert_eq!(
            outcome.allowed,
            printed.contains(" created\n"),
            "{keys} keys"
        );
        if !outcome.allowed {
            let message = outcome.status.map(|s| s.message).unwrap_or_default();
            let (_, ours) = message.split_once(": ").unwrap();
            assert!(printed.contains(&format!(": {ours}\n")), "{message}");
            assert!(ours.ends_with("operation cancelled: actual cost limit exceeded"));
        }
    }
}

/// A 1.33 engine with the policy `name` and its binding of the recorded `documents` (JSON
/// documents separated by `---`), and a cluster holding the namespace `namespace`.
fn recorded_policy(
    documents: &str,
    name: &str,
    namespace: (&str, BTreeMap<String, String>),
) -> (Engine, Cluster) {
    let docs: Vec<Value> = documents
        .split("\n---\n")
        .map(|d| serde_json::from_str(d).unwrap())
        .filter(|d: &Value| d["metadata"]["name"] == name)
        .collect();
    let (PolicyObject::Policy(p), PolicyObject::Binding(b)) =
        (load(docs[0].clone(), name), load(docs[1].clone(), name))
    else {
        panic!("{name}: a policy and its binding")
    };
    let engine = Engine::new(
        &[],
        EngineOptions::for_version(KubeVersion::new(33).unwrap()),
    )
    .with_policies(&[p], &[b]);
    let mut namespaces = Namespaces::default();
    namespaces.insert(namespace.0, namespace.1);
    let cluster = Cluster {
        namespaces,
        params: ParamObjects::new(Vec::new()),
    };
    (engine, cluster)
}

/// The text of `path` under `tests/fixtures`.
fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}
