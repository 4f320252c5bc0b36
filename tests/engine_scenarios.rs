//! Realistic debugging scenarios, each asserting what the API client sees (code, reason,
//! message), the audit annotations and the metric series, as kube-apiserver produces them.
//!
//! References are to the upstream semantics notes: §11 (timeouts), §13 (failure policy), §14
//! (dry run), §15 (mutating chain and reinvocation), §17 (annotations), §18 (warnings), §19
//! (metrics), §20 (client-visible errors), §5 (namespaceSelector), §4 (exempt kinds).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hookscope::KubeVersion;
use hookscope::api::{
    GroupVersionKind, GroupVersionResource, Operation, Status, WebhookConfiguration, WebhookKind,
};
use hookscope::engine::{
    Attributes, AuditLevel, CallDecision, Engine, EngineOptions, Namespaces, Outcome, Phases,
    Replier, Reply, ReplyOutcome, RequestContext, SequentialIds, StepKind, WebhookCall,
};
use hookscope::metrics::Metrics;
use hookscope::script::{ScriptedReplier, ScriptedReply};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn load(yaml: &str) -> Vec<WebhookConfiguration> {
    hookscope::config::parse_documents(yaml, "scenario.yaml")
        .into_iter()
        .map(|r| {
            let mut loaded = r.expect("scenario configuration loads");
            loaded.apply_defaults();
            loaded.configuration
        })
        .collect()
}

fn version(minor: u32) -> KubeVersion {
    KubeVersion::new(minor).expect("modelled version")
}

fn pod(namespace: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    })
}

fn request(op: Operation, kind: (&str, &str, &str), resource: &str, object: Value) -> Attributes {
    let (group, version, kind) = kind;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Attributes {
        operation: op,
        kind: GroupVersionKind::new(group, version, kind),
        resource: GroupVersionResource::new(group, version, resource),
        sub_resource: String::new(),
        namespace,
        name,
        object: (op != Operation::Delete).then(|| Arc::new(object.clone().into())),
        old_object: (op != Operation::Create).then_some(Arc::new(object.into())),
        dry_run: false,
        options: None,
        user_info: Default::default(),
    }
}

fn pod_request(op: Operation, object: Value) -> Attributes {
    request(op, ("", "v1", "Pod"), "pods", object)
}

fn default_namespaces() -> Namespaces {
    let mut ns = Namespaces::default();
    ns.insert("default", BTreeMap::new());
    ns
}

struct Run<R> {
    outcome: Outcome,
    metrics: Metrics,
    replier: R,
}

fn run_with<R: Replier + Send>(
    configs: &[WebhookConfiguration],
    kube: KubeVersion,
    attrs: Attributes,
    namespaces: &Namespaces,
    deadline: Option<Duration>,
    mut replier: R,
) -> Run<R> {
    let engine = Engine::new(configs, EngineOptions::for_version(kube));
    let mut ids = SequentialIds::default();
    let mut metrics = Metrics::new();
    let outcome = engine.dispatch_blocking(
        attrs,
        RequestContext {
            namespaces,
            ids: &mut ids,
            metrics: &mut metrics,
            deadline,
            phases: Phases::All,
        },
        &mut replier,
    );
    Run {
        outcome,
        metrics,
        replier,
    }
}

fn run(
    configs: &[WebhookConfiguration],
    attrs: Attributes,
    replies: Vec<(&str, ScriptedReply)>,
) -> Run<ScriptedReplier> {
    run_with(
        configs,
        KubeVersion::default(),
        attrs,
        &default_namespaces(),
        None,
        ScriptedReplier::new(replies.into_iter().map(|(n, r)| (n.to_string(), r))),
    )
}

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn mutation(cfg: &str, webhook: &str, mutated: bool) -> String {
    format!(r#"{{"configuration":"{cfg}","webhook":"{webhook}","mutated":{mutated}}}"#)
}

fn status(outcome: &Outcome) -> &Status {
    outcome.status.as_ref().expect("the request was rejected")
}

/// (code, reason, message) of the client-visible error.
fn client_error(outcome: &Outcome) -> (i32, &str, &str) {
    let s = status(outcome);
    (s.code, s.reason.as_str(), s.message.as_str())
}

/// Every series of one metric family whose labels include `name`, as label maps with values.
fn series(metrics: &Metrics, family: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    metrics
        .samples()
        .into_iter()
        .filter(|s| s.name == family)
        .filter(|s| s.labels.iter().any(|(k, v)| k == "name" && v == name))
        .map(|s| (s.labels.into_iter().collect(), s.value))
        .collect()
}

fn request_total(metrics: &Metrics, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    series(metrics, "apiserver_admission_webhook_request_total", name)
}

fn rejection_count(metrics: &Metrics, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    series(metrics, "apiserver_admission_webhook_rejection_count", name)
}

fn fail_open_count(metrics: &Metrics, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    series(metrics, "apiserver_admission_webhook_fail_open_count", name)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    strings(pairs)
}

fn called(outcome: &Outcome) -> Vec<(WebhookKind, u8, usize, &str)> {
    outcome
        .calls
        .iter()
        .filter(|c| c.decision == CallDecision::Called)
        .map(|c| (c.phase, c.round, c.index, &*c.webhook))
        .collect()
}

/// A replier answering every call with an allowed v1 response carrying these raw patch bytes.
struct RawPatch(&'static [u8]);

impl Replier for RawPatch {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let replies = calls
            .iter()
            .map(|c| {
                let review = json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": c.request_uid,
                        "allowed": true,
                        "patchType": "JSONPatch",
                        "patch": base64::engine::general_purpose::STANDARD.encode(self.0),
                    },
                });
                Reply {
                    outcome: ReplyOutcome::Http {
                        status: 200,
                        content_type: Some("application/json".into()),
                        body: serde_json::to_vec(&review).unwrap(),
                    },
                    elapsed: Duration::from_millis(5),
                }
            })
            .collect();
        std::future::ready(replies)
    }
}

// ---------------------------------------------------------------------------------------------
// Reinvocation: a sidecar injector and a label defaulter
// ---------------------------------------------------------------------------------------------

const INJECTOR_AND_DEFAULTER: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: b-defaults}
webhooks:
- name: label-defaulter.example.com
  clientConfig: {service: {namespace: platform, name: defaulter, path: /default}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: a-sidecar}
webhooks:
- name: sidecar-injector.example.com
  clientConfig: {service: {namespace: mesh, name: injector, path: /inject}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
"#;

#[test]
fn sidecar_injector_is_reinvoked_after_a_later_label_defaulter() {
    let configs = load(INJECTOR_AND_DEFAULTER);
    let original = pod("default", json!({"app": "web"}));
    let inject = json!([{"op": "add", "path": "/spec/initContainers",
                         "value": [{"name": "mesh-init", "image": "mesh/init:1"}]}]);
    let default_team = json!([{"op": "add", "path": "/metadata/labels/team", "value": "platform"}]);
    let r = run(
        &configs,
        pod_request(Operation::Create, original.clone()),
        vec![
            ("sidecar-injector.example.com", ScriptedReply::patch(inject)),
            (
                "label-defaulter.example.com",
                ScriptedReply::patch(default_team),
            ),
        ],
    );
    let o = &r.outcome;
    assert!(o.allowed, "{:?}", o.status);
    assert!(o.reinvoked);
    assert_eq!(
        o.reinvoke_set.iter().collect::<Vec<_>>(),
        ["a-sidecar/sidecar-injector.example.com/0"]
    );
    // Configurations run by name: the injector (a-sidecar) is index 0 although listed second.
    let m = WebhookKind::Mutating;
    assert_eq!(
        called(o),
        [
            (m, 0, 0, "sidecar-injector.example.com"),
            (m, 0, 1, "label-defaulter.example.com"),
            (m, 1, 0, "sidecar-injector.example.com"),
        ]
    );
    // The reinvoked injector sees the defaulter's label.
    let round1: Value = serde_json::from_slice(&r.replier.seen[2].body).unwrap();
    assert_eq!(
        round1["request"]["object"]["metadata"]["labels"]["team"],
        "platform"
    );

    let patch0 = r#"{"configuration":"a-sidecar","webhook":"sidecar-injector.example.com","patch":[{"op":"add","path":"/spec/initContainers","value":[{"image":"mesh/init:1","name":"mesh-init"}]}],"patchType":"JSONPatch"}"#;
    let patch1 = r#"{"configuration":"b-defaults","webhook":"label-defaulter.example.com","patch":[{"op":"add","path":"/metadata/labels/team","value":"platform"}],"patchType":"JSONPatch"}"#;
    let metadata = strings(&[
        (
            "mutation.webhook.admission.k8s.io/round_0_index_0",
            &mutation("a-sidecar", "sidecar-injector.example.com", true),
        ),
        (
            "mutation.webhook.admission.k8s.io/round_0_index_1",
            &mutation("b-defaults", "label-defaulter.example.com", true),
        ),
        // The injector's second patch writes its init container again without the defaults
        // the apiserver gave it after round 0: the decoded object differs from the defaulted
        // one, so it counts as a mutation (defaulting restores them afterwards).
        (
            "mutation.webhook.admission.k8s.io/round_1_index_0",
            &mutation("a-sidecar", "sidecar-injector.example.com", true),
        ),
    ]);
    assert_eq!(o.annotations_at(AuditLevel::Metadata), metadata);
    let mut request_level = metadata.clone();
    request_level.extend(strings(&[
        ("patch.webhook.admission.k8s.io/round_0_index_0", patch0),
        ("patch.webhook.admission.k8s.io/round_0_index_1", patch1),
        ("patch.webhook.admission.k8s.io/round_1_index_0", patch0),
    ]));
    assert_eq!(o.annotations_at(AuditLevel::Request), request_level);
    assert_eq!(o.annotations_at(AuditLevel::RequestResponse), request_level);
    assert!(o.annotations_at(AuditLevel::None).is_empty());

    // The trace shows the injector's patch with the object before and after.
    let steps = o.steps();
    let applied: Vec<(u8, usize, &Value, &Value, bool)> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::PatchApplied {
                hook,
                before,
                after,
                changed,
                ..
            } => Some((
                hook.round,
                hook.index,
                before.value(),
                after.value(),
                *changed,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(applied.len(), 3);
    // After a patch the object is what the apiserver makes of it: decoded into the Pod's Go
    // type (every container carries its `resources` struct, the Pod its `status`) and defaulted
    // (SetDefaults_Pod, _PodSpec, _Container).
    let container = |name: &str, image: &str| {
        json!({"name": name, "image": image, "resources": {},
               "terminationMessagePath": "/dev/termination-log",
               "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"})
    };
    let mut injected = original.clone();
    injected["spec"] = json!({
        "initContainers": [container("mesh-init", "mesh/init:1")],
        "containers": [container("web", "nginx:1.27")],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "enableServiceLinks": true,
    });
    injected["status"] = json!({});
    assert_eq!(applied[0], (0, 0, &original, &injected, true));
    let mut final_object = injected.clone();
    final_object["metadata"]["labels"]["team"] = json!("platform");
    assert_eq!(applied[1], (0, 1, &injected, &final_object, true));
    assert_eq!(applied[2], (1, 0, &final_object, &final_object, true));
    // The store gave the created object its uid before validation.
    let mut stored = o.object.as_deref().map(|o| o.value().clone()).unwrap();
    let uid = stored["metadata"].as_object_mut().unwrap().remove("uid");
    assert_eq!(uid.as_ref().and_then(Value::as_str).map(str::len), Some(36));
    assert_eq!(stored, final_object);

    let ok = labels(&[
        ("code", "200"),
        ("operation", "CREATE"),
        ("rejected", "false"),
        ("type", "admit"),
    ]);
    let mut injector = ok.clone();
    injector.insert("name".into(), "sidecar-injector.example.com".into());
    assert_eq!(
        request_total(&r.metrics, "sidecar-injector.example.com"),
        [(injector, 2.0)]
    );
    let mut defaulter = ok;
    defaulter.insert("name".into(), "label-defaulter.example.com".into());
    assert_eq!(
        request_total(&r.metrics, "label-defaulter.example.com"),
        [(defaulter, 1.0)]
    );
    // The plugin ran twice (once per round).
    assert_eq!(
        r.metrics.value(
            "apiserver_admission_controller_admission_duration_seconds_count",
            &[
                ("name", "MutatingAdmissionWebhook"),
                ("operation", "CREATE"),
                ("rejected", "false"),
                ("type", "admit"),
            ]
        ),
        Some(2.0)
    );
}

// ---------------------------------------------------------------------------------------------
// Timeouts and failurePolicy
// ---------------------------------------------------------------------------------------------

fn slow_webhook(policy: &str) -> Vec<WebhookConfiguration> {
    load(&format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: policy-agent}}
webhooks:
- name: slow.example.com
  clientConfig: {{url: "https://hooks.example.com:8443/mutate"}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}}]
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
  failurePolicy: {policy}
"#
    ))
}

#[test]
fn ignore_webhook_timing_out_fails_open() {
    let r = run(
        &slow_webhook("Ignore"),
        pod_request(Operation::Create, pod("default", json!({"app": "web"}))),
        vec![(
            "slow.example.com",
            ScriptedReply {
                error: Some("timeout".into()),
                ..ScriptedReply::default()
            },
        )],
    );
    let o = &r.outcome;
    assert!(o.allowed, "{:?}", o.status);
    assert_eq!(
        r.replier.seen[0].endpoint.url,
        "https://hooks.example.com:8443/mutate?timeout=5s"
    );
    assert_eq!(
        o.annotations_at(AuditLevel::Metadata),
        strings(&[
            (
                "mutation.webhook.admission.k8s.io/round_0_index_0",
                &mutation("policy-agent", "slow.example.com", false)
            ),
            (
                "failed-open.mutation.webhook.admission.k8s.io/round_0_index_0",
                "slow.example.com"
            ),
        ])
    );
    assert_eq!(o.elapsed, Duration::from_secs(5));
    assert_eq!(
        fail_open_count(&r.metrics, "slow.example.com"),
        [(
            labels(&[("name", "slow.example.com"), ("type", "admit")]),
            1.0
        )]
    );
    assert_eq!(
        request_total(&r.metrics, "slow.example.com"),
        [(
            labels(&[
                ("code", "503"),
                ("name", "slow.example.com"),
                ("operation", "CREATE"),
                ("rejected", "false"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );
    assert!(rejection_count(&r.metrics, "slow.example.com").is_empty());
}

/// A webhook that answers after its timeoutSeconds is a timeout, whatever it answered.
fn fail_closed_timeout(kube: u32) -> Run<ScriptedReplier> {
    run_with(
        &slow_webhook("Fail"),
        version(kube),
        pod_request(Operation::Create, pod("default", json!({"app": "web"}))),
        &default_namespaces(),
        None,
        ScriptedReplier::new([(
            "slow.example.com".to_string(),
            ScriptedReply {
                delay_ms: 6_000,
                ..ScriptedReply::allow()
            },
        )]),
    )
}

#[test]
fn fail_webhook_timing_out_rejects_with_internal_error() {
    let r = fail_closed_timeout(37);
    let o = &r.outcome;
    assert!(!o.allowed);
    let reason = r#"failed calling webhook "slow.example.com": failed to call webhook: Post "https://hooks.example.com:8443/mutate?timeout=5s": context deadline exceeded"#;
    assert_eq!(
        client_error(o),
        (
            500,
            "InternalError",
            format!("Internal error occurred: {reason}").as_str()
        )
    );
    let causes = &status(o).details.as_ref().expect("details").causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].message, reason);
    assert_eq!(o.elapsed, Duration::from_secs(5));
    assert_eq!(
        o.annotations_at(AuditLevel::Request),
        strings(&[(
            "mutation.webhook.admission.k8s.io/round_0_index_0",
            &mutation("policy-agent", "slow.example.com", false)
        )])
    );
    // A transport error is ServiceUnavailable (503) in metrics from 1.34 on (§19).
    assert_eq!(
        rejection_count(&r.metrics, "slow.example.com"),
        [(
            labels(&[
                ("error_type", "calling_webhook_error"),
                ("name", "slow.example.com"),
                ("operation", "CREATE"),
                ("rejection_code", "503"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );
    assert_eq!(
        request_total(&r.metrics, "slow.example.com"),
        [(
            labels(&[
                ("code", "503"),
                ("name", "slow.example.com"),
                ("operation", "CREATE"),
                ("rejected", "true"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );
    assert!(fail_open_count(&r.metrics, "slow.example.com").is_empty());
}

#[test]
fn ignore_webhook_timing_out_with_the_request_deadline_spent_is_a_timeout() {
    // The webhook allows 10 s but only 5 s of the request remain: the call times out with the
    // parent context, so upstream stops with 504 instead of continuing (§13), after recording the
    // fail-open annotation and metric.
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: chain}
webhooks:
- name: optional.example.com
  clientConfig: {url: "https://optional.example.com/mutate"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Ignore
- name: next.example.com
  clientConfig: {url: "https://next.example.com/mutate"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
    );
    let r = run_with(
        &configs,
        KubeVersion::default(),
        pod_request(Operation::Create, pod("default", json!({}))),
        &default_namespaces(),
        Some(Duration::from_secs(5)),
        ScriptedReplier::new([(
            "optional.example.com".to_string(),
            ScriptedReply {
                error: Some("timeout".into()),
                ..ScriptedReply::default()
            },
        )]),
    );
    let o = &r.outcome;
    assert_eq!(
        client_error(o),
        (
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout"
        )
    );
    let urls: Vec<&str> = r
        .replier
        .seen
        .iter()
        .map(|c| c.endpoint.url.as_str())
        .collect();
    assert_eq!(urls, ["https://optional.example.com/mutate?timeout=5s"]);
    assert_eq!(
        o.annotations_at(AuditLevel::Metadata),
        strings(&[
            (
                "mutation.webhook.admission.k8s.io/round_0_index_0",
                &mutation("chain", "optional.example.com", false)
            ),
            (
                "failed-open.mutation.webhook.admission.k8s.io/round_0_index_0",
                "optional.example.com"
            ),
        ])
    );
    assert_eq!(
        fail_open_count(&r.metrics, "optional.example.com"),
        [(
            labels(&[("name", "optional.example.com"), ("type", "admit")]),
            1.0
        )]
    );
    assert!(rejection_count(&r.metrics, "optional.example.com").is_empty());
    assert!(request_total(&r.metrics, "next.example.com").is_empty());
}

#[test]
fn fail_webhook_timing_out_before_1_34_records_bad_request_in_metrics() {
    let new = fail_closed_timeout(34);
    let old = fail_closed_timeout(33);
    // The client sees the same error; only the metric label values differ (§0, commit e4c9db382).
    assert_eq!(old.outcome.status, new.outcome.status);
    assert_eq!(
        rejection_count(&old.metrics, "slow.example.com"),
        [(
            labels(&[
                ("error_type", "calling_webhook_error"),
                ("name", "slow.example.com"),
                ("operation", "CREATE"),
                ("rejection_code", "400"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );
    assert_eq!(
        rejection_count(&new.metrics, "slow.example.com")[0].0["rejection_code"],
        "503"
    );
}

#[test]
fn request_deadline_is_consumed_by_earlier_webhooks() {
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: chain}
webhooks:
- name: first.example.com
  clientConfig: {service: {namespace: hooks, name: first}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: second.example.com
  clientConfig: {service: {namespace: hooks, name: second}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: third.example.com
  clientConfig: {service: {namespace: hooks, name: third}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
    );
    let three_seconds = || ScriptedReply {
        delay_ms: 3_000,
        ..ScriptedReply::allow()
    };
    let r = run_with(
        &configs,
        KubeVersion::default(),
        pod_request(Operation::Create, pod("default", json!({}))),
        &default_namespaces(),
        Some(Duration::from_secs(10)),
        ScriptedReplier::new(
            ["first", "second", "third"].map(|n| (format!("{n}.example.com"), three_seconds())),
        ),
    );
    assert!(r.outcome.allowed, "{:?}", r.outcome.status);
    let urls: Vec<&str> = r
        .replier
        .seen
        .iter()
        .map(|c| c.endpoint.url.as_str())
        .collect();
    assert_eq!(
        urls,
        [
            "https://first.hooks.svc:443/?timeout=10s",
            "https://second.hooks.svc:443/?timeout=7s",
            "https://third.hooks.svc:443/?timeout=4s",
        ]
    );
    let timeouts: Vec<Duration> = r.replier.seen.iter().map(|c| c.timeout).collect();
    assert_eq!(
        timeouts,
        [10, 7, 4].map(Duration::from_secs),
        "each call gets what is left of the request deadline"
    );
    assert_eq!(r.outcome.elapsed, Duration::from_secs(9));
}

// ---------------------------------------------------------------------------------------------
// dryRun
// ---------------------------------------------------------------------------------------------

#[test]
fn dry_run_with_side_effects_unknown_is_rejected_whatever_the_failure_policy() {
    // sideEffects Unknown survives only in objects created through v1beta1 (§14).
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: a-safe}
webhooks:
- name: safe.example.com
  clientConfig: {service: {namespace: hooks, name: safe}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: NoneOnDryRun
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: b-legacy}
webhooks:
- name: legacy-quota.example.com
  clientConfig: {service: {namespace: hooks, name: quota}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: Unknown
  failurePolicy: Ignore
  admissionReviewVersions: [v1]
"#,
    );
    let mut attrs = pod_request(Operation::Create, pod("default", json!({})));
    attrs.dry_run = true;
    let r = run(&configs, attrs, vec![]);
    let o = &r.outcome;
    assert_eq!(
        client_error(o),
        (
            400,
            "BadRequest",
            r#"admission webhook "legacy-quota.example.com" does not support dry run"#
        )
    );
    assert_eq!(status(o).status, "Failure");
    // The NoneOnDryRun webhook was called with dryRun set; the Unknown one never was.
    assert_eq!(r.replier.seen.len(), 1);
    let review: Value = serde_json::from_slice(&r.replier.seen[0].body).unwrap();
    assert_eq!(review["request"]["dryRun"], true);
    assert_eq!(
        o.annotations_at(AuditLevel::RequestResponse),
        strings(&[
            (
                "mutation.webhook.admission.k8s.io/round_0_index_0",
                &mutation("a-safe", "safe.example.com", false)
            ),
            (
                "mutation.webhook.admission.k8s.io/round_0_index_1",
                &mutation("b-legacy", "legacy-quota.example.com", false)
            ),
        ])
    );
    assert_eq!(
        request_total(&r.metrics, "legacy-quota.example.com"),
        [(
            labels(&[
                ("code", "0"),
                ("name", "legacy-quota.example.com"),
                ("operation", "CREATE"),
                ("rejected", "true"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );
    assert_eq!(
        rejection_count(&r.metrics, "legacy-quota.example.com"),
        [(
            labels(&[
                ("error_type", "apiserver_internal_error"),
                ("name", "legacy-quota.example.com"),
                ("operation", "CREATE"),
                ("rejection_code", "0"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );
    assert!(fail_open_count(&r.metrics, "legacy-quota.example.com").is_empty());
}

// ---------------------------------------------------------------------------------------------
// Denials
// ---------------------------------------------------------------------------------------------

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: policy}
webhooks:
- name: policy.example.com
  clientConfig: {service: {namespace: policy, name: gatekeeper, path: /validate}}
  rules: [{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

fn denial(reply: ScriptedReply) -> Run<ScriptedReplier> {
    run(
        &load(POLICY),
        pod_request(Operation::Create, pod("default", json!({}))),
        vec![("policy.example.com", reply)],
    )
}

fn assert_no_error_rejection(metrics: &Metrics, code: &str) {
    assert_eq!(
        rejection_count(metrics, "policy.example.com"),
        [(
            labels(&[
                ("error_type", "no_error"),
                ("name", "policy.example.com"),
                ("operation", "CREATE"),
                ("rejection_code", code),
                ("type", "validating"),
            ]),
            1.0
        )]
    );
    assert_eq!(
        request_total(metrics, "policy.example.com"),
        [(
            labels(&[
                ("code", code),
                ("name", "policy.example.com"),
                ("operation", "CREATE"),
                ("rejected", "true"),
                ("type", "validating"),
            ]),
            1.0
        )]
    );
}

#[test]
fn denial_with_status_code_200_reaches_the_client_as_400() {
    let r = denial(ScriptedReply::deny(
        200,
        "privileged containers are not allowed",
    ));
    assert_eq!(
        client_error(&r.outcome),
        (
            400,
            "",
            r#"admission webhook "policy.example.com" denied the request: privileged containers are not allowed"#
        )
    );
    assert_eq!(status(&r.outcome).status, "Failure");
    assert_no_error_rejection(&r.metrics, "400");
    // Validating webhooks leave no annotation unless they fail open or send auditAnnotations.
    assert!(r.outcome.annotations.is_empty());
}

#[test]
fn denial_without_message_uses_the_reason() {
    let r = denial(ScriptedReply {
        allowed: false,
        code: Some(422),
        reason: Some("Invalid".into()),
        ..ScriptedReply::default()
    });
    assert_eq!(
        client_error(&r.outcome),
        (
            422,
            "Invalid",
            r#"admission webhook "policy.example.com" denied the request: Invalid"#
        )
    );
    assert_no_error_rejection(&r.metrics, "422");
}

#[test]
fn denial_without_message_or_reason_is_without_explanation() {
    let r = denial(ScriptedReply {
        allowed: false,
        ..ScriptedReply::default()
    });
    assert_eq!(
        client_error(&r.outcome),
        (
            400,
            "",
            r#"admission webhook "policy.example.com" denied the request without explanation"#
        )
    );
    assert_no_error_rejection(&r.metrics, "400");
}

// ---------------------------------------------------------------------------------------------
// Warnings and webhook audit annotations
// ---------------------------------------------------------------------------------------------

#[test]
fn warnings_are_deduplicated_and_audit_annotations_prefixed() {
    // "Bad_Name" passes no validation, but hand-built or legacy objects can carry it (§17).
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: linters}
webhooks:
- name: image-linter.example.com
  clientConfig: {service: {namespace: lint, name: images}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: Bad_Name
  clientConfig: {service: {namespace: lint, name: legacy}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: checks}
webhooks:
- name: resources.example.com
  clientConfig: {service: {namespace: lint, name: resources}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
    );
    let reply = |warnings: &[&str], annotations: &[(&str, &str)]| ScriptedReply {
        warnings: warnings.iter().map(|w| w.to_string()).collect(),
        audit_annotations: strings(annotations),
        ..ScriptedReply::default()
    };
    let r = run(
        &configs,
        pod_request(Operation::Create, pod("default", json!({}))),
        vec![
            (
                "image-linter.example.com",
                reply(
                    &[
                        "image tag latest is mutable",
                        "no resource limits",
                        "bell\u{7}",
                    ],
                    &[("image-policy", "warn")],
                ),
            ),
            (
                "Bad_Name",
                reply(
                    &["no resource limits", "legacy hook"],
                    &[("checked", "true")],
                ),
            ),
            (
                "resources.example.com",
                reply(
                    &[
                        "no resource limits",
                        "tab\tinside",
                        "requests below minimum",
                    ],
                    &[("limits", "missing")],
                ),
            ),
        ],
    );
    let o = &r.outcome;
    assert!(o.allowed, "{:?}", o.status);
    assert_eq!(
        o.warnings,
        [
            "image tag latest is mutable",
            "no resource limits",
            "legacy hook",
            "requests below minimum",
        ]
    );
    let steps = o.steps();
    let warning_steps: Vec<(&str, bool)> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Warning { text, kept, .. } => Some((text.as_str(), *kept)),
            _ => None,
        })
        .collect();
    assert_eq!(
        warning_steps,
        [
            ("image tag latest is mutable", true),
            ("no resource limits", true),
            ("bell\u{7}", false),
            ("no resource limits", false),
            ("legacy hook", true),
            ("no resource limits", false),
            ("tab\tinside", false),
            ("requests below minimum", true),
        ]
    );
    assert_eq!(
        o.annotations_at(AuditLevel::Metadata),
        strings(&[
            ("image-linter.example.com/image-policy", "warn"),
            (
                "mutation.webhook.admission.k8s.io/round_0_index_0",
                &mutation("linters", "image-linter.example.com", false)
            ),
            (
                "mutation.webhook.admission.k8s.io/round_0_index_1",
                &mutation("linters", "Bad_Name", false)
            ),
            ("resources.example.com/limits", "missing"),
        ])
    );
    let steps = o.steps();
    let dropped: Vec<&str> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::AnnotationDropped { key, .. } => Some(key.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(dropped, ["Bad_Name/checked"]);
}

// ---------------------------------------------------------------------------------------------
// Patches the apiserver refuses
// ---------------------------------------------------------------------------------------------

#[test]
fn patch_on_delete_is_an_internal_error_not_subject_to_ignore() {
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: audit-stamps}
webhooks:
- name: stamp.example.com
  clientConfig: {service: {namespace: audit, name: stamper}}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Ignore
- name: after.example.com
  clientConfig: {service: {namespace: audit, name: after}}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
    );
    let r = run(
        &configs,
        pod_request(Operation::Delete, pod("default", json!({"app": "web"}))),
        vec![(
            "stamp.example.com",
            ScriptedReply::patch(
                json!([{"op": "add", "path": "/metadata/labels/deleted-by", "value": "ci"}]),
            ),
        )],
    );
    let o = &r.outcome;
    let message = r#"admission webhook "stamp.example.com" attempted to modify the object, which is not supported for this operation"#;
    assert_eq!(
        client_error(o),
        (
            500,
            "InternalError",
            format!("Internal error occurred: {message}").as_str()
        )
    );
    // The chain stopped there.
    assert_eq!(r.replier.seen.len(), 1);
    assert_eq!(
        o.annotations_at(AuditLevel::RequestResponse),
        strings(&[(
            "mutation.webhook.admission.k8s.io/round_0_index_0",
            &mutation("audit-stamps", "stamp.example.com", false)
        )])
    );
    assert_eq!(
        rejection_count(&r.metrics, "stamp.example.com"),
        [(
            labels(&[
                ("error_type", "apiserver_internal_error"),
                ("name", "stamp.example.com"),
                ("operation", "DELETE"),
                ("rejection_code", "0"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );
    assert_eq!(
        request_total(&r.metrics, "stamp.example.com")[0].0["code"],
        "0"
    );
    assert!(fail_open_count(&r.metrics, "stamp.example.com").is_empty());
    assert!(
        o.steps()
            .iter()
            .any(|s| matches!(&s.kind, StepKind::PatchFailed { error, .. } if error == message))
    );
}

/// Engine discrepancy (trace only; verdict, annotations and metrics are right): for an error that
/// failurePolicy does not cover (§13 "other errors"), the trace's `CallFailed` says
/// `failed_open: true` whenever the webhook's policy is Ignore, although the request was
/// rejected. `Run::fail_call` in src/engine/dispatch.rs sets `failed_open: hook.ignore_failures`
/// for every error class.
#[test]
fn trace_does_not_claim_fail_open_for_errors_outside_failure_policy() {
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: audit-stamps}
webhooks:
- name: stamp.example.com
  clientConfig: {service: {namespace: audit, name: stamper}}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Ignore
"#,
    );
    let r = run(
        &configs,
        pod_request(Operation::Delete, pod("default", json!({}))),
        vec![(
            "stamp.example.com",
            ScriptedReply::patch(
                json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"}]),
            ),
        )],
    );
    assert!(!r.outcome.allowed);
    let steps = r.outcome.steps();
    let failed: Vec<bool> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::CallFailed { failed_open, .. } => Some(*failed_open),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [false]);
}

fn undecodable(kube: u32, policy: &str) -> Run<RawPatch> {
    let configs = load(&format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: broken}}
webhooks:
- name: broken.example.com
  clientConfig: {{service: {{namespace: hooks, name: broken}}}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: {policy}
"#
    ));
    run_with(
        &configs,
        version(kube),
        pod_request(Operation::Create, pod("default", json!({}))),
        &default_namespaces(),
        None,
        RawPatch(b"[{"),
    )
}

#[test]
fn undecodable_patch_is_a_calling_error_from_1_34() {
    let fail = undecodable(34, "Fail");
    assert_eq!(
        client_error(&fail.outcome),
        (
            500,
            "InternalError",
            r#"Internal error occurred: failed calling webhook "broken.example.com": received undecodable patch in webhook response: unexpected end of JSON input"#
        )
    );
    assert_eq!(
        rejection_count(&fail.metrics, "broken.example.com"),
        [(
            labels(&[
                ("error_type", "calling_webhook_error"),
                ("name", "broken.example.com"),
                ("operation", "CREATE"),
                ("rejection_code", "503"),
                ("type", "admit"),
            ]),
            1.0
        )]
    );

    let ignore = undecodable(37, "Ignore");
    assert!(ignore.outcome.allowed, "{:?}", ignore.outcome.status);
    assert_eq!(
        ignore.outcome.annotations_at(AuditLevel::RequestResponse),
        strings(&[
            (
                "mutation.webhook.admission.k8s.io/round_0_index_0",
                &mutation("broken", "broken.example.com", false)
            ),
            (
                "failed-open.mutation.webhook.admission.k8s.io/round_0_index_0",
                "broken.example.com"
            ),
        ])
    );
    assert_eq!(
        fail_open_count(&ignore.metrics, "broken.example.com"),
        [(
            labels(&[("name", "broken.example.com"), ("type", "admit")]),
            1.0
        )]
    );
    assert_eq!(
        request_total(&ignore.metrics, "broken.example.com")[0].0["code"],
        "503"
    );
}

#[test]
fn undecodable_patch_before_1_34_is_always_an_internal_error() {
    for policy in ["Fail", "Ignore"] {
        let r = undecodable(33, policy);
        assert_eq!(
            client_error(&r.outcome),
            (
                500,
                "InternalError",
                "Internal error occurred: unexpected end of JSON input"
            ),
            "failurePolicy {policy}"
        );
        assert_eq!(
            r.outcome.annotations_at(AuditLevel::RequestResponse),
            strings(&[(
                "mutation.webhook.admission.k8s.io/round_0_index_0",
                &mutation("broken", "broken.example.com", false)
            )])
        );
        assert_eq!(
            rejection_count(&r.metrics, "broken.example.com"),
            [(
                labels(&[
                    ("error_type", "apiserver_internal_error"),
                    ("name", "broken.example.com"),
                    ("operation", "CREATE"),
                    ("rejection_code", "0"),
                    ("type", "admit"),
                ]),
                1.0
            )]
        );
        assert!(fail_open_count(&r.metrics, "broken.example.com").is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// namespaceSelector
// ---------------------------------------------------------------------------------------------

const PROD_ONLY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: prod-guard}
webhooks:
- name: prod-guard.example.com
  clientConfig: {service: {namespace: guard, name: guard}}
  rules:
  - {operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [namespaces, pods]}
  namespaceSelector: {matchLabels: {env: prod}}
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

fn namespace_object(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn namespace_create(name: &str, labels: Value) -> Attributes {
    let mut attrs = request(
        Operation::Create,
        ("", "v1", "Namespace"),
        "namespaces",
        namespace_object(name, labels),
    );
    // The apiserver sets a Namespace request's namespace to the Namespace's own name.
    attrs.namespace = name.into();
    attrs
}

#[test]
fn namespace_create_is_selected_by_its_own_labels() {
    // "team-a" does not exist yet (no entry in the namespace source): the labels come from the
    // object being created.
    let none = Namespaces::default();
    let deny = || {
        ScriptedReplier::new([(
            "prod-guard.example.com".to_string(),
            ScriptedReply::deny(403, "prod namespaces need an owner"),
        )])
    };
    let prod = run_with(
        &load(PROD_ONLY),
        KubeVersion::default(),
        namespace_create("team-a", json!({"env": "prod"})),
        &none,
        None,
        deny(),
    );
    assert_eq!(
        client_error(&prod.outcome),
        (
            403,
            "",
            r#"admission webhook "prod-guard.example.com" denied the request: prod namespaces need an owner"#
        )
    );
    assert_eq!(prod.replier.seen.len(), 1);

    let dev = run_with(
        &load(PROD_ONLY),
        KubeVersion::default(),
        namespace_create("team-a", json!({"env": "dev"})),
        &none,
        None,
        deny(),
    );
    assert!(dev.outcome.allowed, "{:?}", dev.outcome.status);
    assert!(dev.replier.seen.is_empty());
    assert!(
        dev.metrics
            .samples()
            .iter()
            .all(|s| !s.name.contains("webhook_"))
    );
}

#[test]
fn unknown_namespace_is_not_found_only_when_rules_match() {
    let none = Namespaces::default();
    let pod_in_x = || pod_request(Operation::Create, pod("x", json!({"app": "web"})));
    let r = run_with(
        &load(PROD_ONLY),
        KubeVersion::default(),
        pod_in_x(),
        &none,
        None,
        ScriptedReplier::default(),
    );
    assert_eq!(
        client_error(&r.outcome),
        (404, "NotFound", r#"namespaces "x" not found"#)
    );
    let details = status(&r.outcome).details.as_ref().expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("x", "namespaces")
    );
    assert!(r.replier.seen.is_empty());
    assert!(r.outcome.annotations.is_empty());

    // The same selector on a webhook whose rules do not match pods: no lookup error.
    let configmaps_only =
        PROD_ONLY.replace("resources: [namespaces, pods]", "resources: [configmaps]");
    let r = run_with(
        &load(&configmaps_only),
        KubeVersion::default(),
        pod_in_x(),
        &none,
        None,
        ScriptedReplier::default(),
    );
    assert!(r.outcome.allowed, "{:?}", r.outcome.status);
    assert!(r.replier.seen.is_empty());

    // An empty selector never looks the namespace up.
    let everything = PROD_ONLY.replace(
        "namespaceSelector: {matchLabels: {env: prod}}",
        "namespaceSelector: {}",
    );
    let r = run_with(
        &load(&everything),
        KubeVersion::default(),
        pod_in_x(),
        &none,
        None,
        ScriptedReplier::default(),
    );
    assert!(r.outcome.allowed, "{:?}", r.outcome.status);
    assert_eq!(r.replier.seen.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Exempt kinds
// ---------------------------------------------------------------------------------------------

#[test]
fn webhook_configurations_never_reach_webhooks() {
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: catch-all}
webhooks:
- name: catch-all.example.com
  clientConfig: {service: {namespace: hooks, name: all}}
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: catch-all-validating}
webhooks:
- name: catch-all-validating.example.com
  clientConfig: {service: {namespace: hooks, name: all}}
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
    );
    let object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "new-hook"},
        "webhooks": [],
    });
    let deny_all = || {
        ScriptedReplier::new(
            ["catch-all.example.com", "catch-all-validating.example.com"]
                .map(|n| (n.to_string(), ScriptedReply::deny(403, "no"))),
        )
    };
    let r = run_with(
        &configs,
        KubeVersion::default(),
        request(
            Operation::Create,
            (
                "admissionregistration.k8s.io",
                "v1",
                "MutatingWebhookConfiguration",
            ),
            "mutatingwebhookconfigurations",
            object,
        ),
        &default_namespaces(),
        None,
        deny_all(),
    );
    let o = &r.outcome;
    assert!(o.allowed, "{:?}", o.status);
    assert!(r.replier.seen.is_empty());
    assert!(o.calls.is_empty());
    assert!(o.annotations.is_empty());
    assert!(r.metrics.samples().is_empty());
    assert!(matches!(
        o.steps().first().map(|s| &s.kind),
        Some(StepKind::RequestExempt { .. })
    ));
    // The catch-all rules do match an ordinary object: the exemption is what kept them away.
    let r = run_with(
        &configs,
        KubeVersion::default(),
        pod_request(Operation::Create, pod("default", json!({}))),
        &default_namespaces(),
        None,
        deny_all(),
    );
    assert!(!r.outcome.allowed);
    assert_eq!(r.replier.seen.len(), 1);
}
