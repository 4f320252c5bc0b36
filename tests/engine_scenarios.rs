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
    Replier, Reply, ReplyOutcome, RequestContext, SequentialIds, StepKind, TransportError,
    TransportErrorKind, WebhookCall,
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
        kind: GroupVersionKind::new(group, version, kind).into(),
        resource: GroupVersionResource::new(group, version, resource).into(),
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
    // And the pod strategy's PrepareForCreate its generation and pending status.
    let mut prepared = final_object.clone();
    prepared["metadata"]["generation"] = json!(1);
    prepared["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    assert_eq!(stored, prepared);

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

// ---------------------------------------------------------------------------------------------
// Calling errors: the status each class carries, per release (§19, §20)
// ---------------------------------------------------------------------------------------------

/// A replier answering every call with what a function makes of it.
struct Answer(fn(&WebhookCall) -> ReplyOutcome);

impl Replier for Answer {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let replies = calls
            .iter()
            .map(|c| Reply {
                outcome: (self.0)(c),
                elapsed: Duration::from_millis(5),
            })
            .collect();
        std::future::ready(replies)
    }
}

fn http(status: u16, content_type: &str, body: &str) -> ReplyOutcome {
    ReplyOutcome::Http {
        status,
        content_type: Some(content_type.into()),
        body: body.as_bytes().to_vec(),
    }
}

fn json_reply(body: &str) -> ReplyOutcome {
    http(200, "application/json", body)
}

/// How the webhook of a calling-error case is configured.
#[derive(Clone, Copy)]
enum Setup {
    /// `sideEffects: None`, AdmissionReview v1.
    Plain,
    /// No `sideEffects` (a hand-built v1 object), with a dry-run request.
    SideEffectsNil,
    /// Only AdmissionReview versions the apiserver does not know.
    UnknownReviewVersions,
    /// Neither a URL nor a service.
    NoEndpoint,
}

/// One class of calling error at one release: what the metrics record and what the client sees.
struct CallingCase {
    class: &'static str,
    setup: Setup,
    answer: fn(&WebhookCall) -> ReplyOutcome,
    /// Only for the mutating dispatcher (a patch).
    mutating_only: bool,
    kube: u32,
    /// `apiserver_admission_webhook_request_total{code}`.
    code: &'static str,
    /// `apiserver_admission_webhook_rejection_count{error_type, rejection_code}`; None when no
    /// rejection is recorded.
    rejection: Option<(&'static str, &'static str)>,
    /// The client-visible error: code, reason, message (`{reason}` stands for the
    /// `failed calling webhook "…": …` text).
    client: (i32, &'static str, &'static str),
}

const URL: &str = "https://hooks.example.com/w?timeout=10s";

/// The name of the scheme the webhook client decodes replies with: where `client.go` creates it.
fn scheme(kube: u32) -> &'static str {
    if kube >= 29 {
        "k8s.io/apiserver/pkg/util/webhook/client.go:71"
    } else {
        "k8s.io/apiserver/pkg/util/webhook/client.go:69"
    }
}

fn calling_cases() -> Vec<CallingCase> {
    let calling = "Internal error occurred: failed calling webhook \"w.example.com\": ";
    let mut cases = Vec::new();
    // (class, setup, answer, reason after `failed calling webhook "w.example.com": `, status
    // before 1.34, status from 1.34); a status None means "a denial-like error, not counted as a
    // calling error".
    type Row = (
        &'static str,
        Setup,
        fn(&WebhookCall) -> ReplyOutcome,
        fn(u32) -> String,
        &'static str,
        &'static str,
    );
    let rows: Vec<Row> = vec![
        (
            "connection refused",
            Setup::Plain,
            |_| {
                ReplyOutcome::Transport(TransportError {
                    kind: TransportErrorKind::Connect,
                    detail: "dial tcp 10.0.0.1:443: connect: connection refused".into(),
                })
            },
            |_| {
                format!(
                    "failed to call webhook: Post \"{URL}\": dial tcp 10.0.0.1:443: connect: connection refused"
                )
            },
            "400",
            "503",
        ),
        (
            "timeout",
            Setup::Plain,
            |_| {
                ReplyOutcome::Transport(TransportError {
                    kind: TransportErrorKind::Timeout,
                    detail: "context deadline exceeded".into(),
                })
            },
            |_| format!("failed to call webhook: Post \"{URL}\": context deadline exceeded"),
            "400",
            "503",
        ),
        (
            "response body unreadable",
            Setup::Plain,
            |_| {
                ReplyOutcome::Transport(TransportError {
                kind: TransportErrorKind::Reset,
                detail: "unexpected error when reading response body. Please retry. Original error: unexpected EOF".into(),
            })
            },
            |_| {
                "failed to call webhook: unexpected error when reading response body. Please retry. Original error: unexpected EOF".into()
            },
            "400",
            "503",
        ),
        (
            "REST client from the transport",
            Setup::Plain,
            |_| {
                ReplyOutcome::ClientConfig(
                    "unable to load root certificates: unable to parse bytes as PEM block".into(),
                )
            },
            |_| {
                "could not get REST client: unable to load root certificates: unable to parse bytes as PEM block".into()
            },
            "400",
            "500",
        ),
        (
            "REST client: no endpoint",
            Setup::NoEndpoint,
            |_| unreachable!("no call is made"),
            |_| {
                "could not get REST client: failed calling webhook \"w.example.com\": webhook configuration must have either service or URL".into()
            },
            "400",
            "500",
        ),
        (
            "empty reply",
            Setup::Plain,
            |_| json_reply(""),
            |_| {
                "failed to call webhook: 0-length response with status code: 200 and content type: application/json".into()
            },
            "400",
            "503",
        ),
        (
            "reply not JSON",
            Setup::Plain,
            |_| json_reply("{} x"),
            |_| {
                "failed to call webhook: couldn't get version/kind; json parse error: invalid character 'x' after top-level value".into()
            },
            "400",
            "503",
        ),
        (
            "reply JSON but not an object",
            Setup::Plain,
            |_| json_reply("[1]"),
            |_| {
                r#"failed to call webhook: couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#.into()
            },
            "400",
            "503",
        ),
        (
            "reply not an AdmissionReview",
            Setup::Plain,
            |_| json_reply(r#"{"apiVersion":"v1","kind":"ConfigMap","data":{}}"#),
            |kube| {
                format!(
                    "failed to call webhook: no kind \"ConfigMap\" is registered for version \"v1\" in scheme \"{}\"",
                    scheme(kube)
                )
            },
            "400",
            "503",
        ),
        (
            "reply in the other AdmissionReview version",
            Setup::Plain,
            |c| {
                json_reply(&format!(
                    r#"{{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{{"uid":"{}","allowed":true}}}}"#,
                    c.request_uid
                ))
            },
            |_| {
                "failed to call webhook: converting (v1beta1.AdmissionReview) to (v1.AdmissionReview): unknown conversion".into()
            },
            "400",
            "503",
        ),
        (
            "Status in a successful reply",
            Setup::Plain,
            |_| {
                json_reply(
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nope","code":403}"#,
                )
            },
            |_| {
                "failed to call webhook: converting (v1.Status) to (v1.AdmissionReview): unknown conversion".into()
            },
            "400",
            "503",
        ),
        (
            "Content-Type that is not a media type",
            Setup::Plain,
            |_| http(200, "application/json; charset", "{}"),
            |_| {
                "failed to call webhook: Internal error occurred: mime: invalid media parameter"
                    .into()
            },
            "500",
            "500",
        ),
        (
            "HTTP error, text body",
            Setup::Plain,
            |_| http(500, "text/plain", "boom"),
            |_| {
                "failed to call webhook: an error on the server (\"boom\") has prevented the request from succeeding".into()
            },
            "500",
            "500",
        ),
        (
            "HTTP error, Status body",
            Setup::Plain,
            |_| {
                http(
                    429,
                    "application/json",
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down","reason":"TooManyRequests","code":429}"#,
                )
            },
            |_| "failed to call webhook: slow down".into(),
            "429",
            "429",
        ),
        (
            "HTTP error, Status body without kind",
            Setup::Plain,
            |_| {
                http(
                    500,
                    "application/json",
                    r#"{"status":"Failure","message":"m","code":403}"#,
                )
            },
            |_| {
                "failed to call webhook: an error on the server (\"unknown\") has prevented the request from succeeding".into()
            },
            "500",
            "500",
        ),
        (
            "response absent",
            Setup::Plain,
            |_| json_reply(r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
            |_| "received invalid webhook response: webhook response was absent".into(),
            "503",
            "503",
        ),
        (
            "response for another request",
            Setup::Plain,
            |_| {
                json_reply(
                    r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"other","allowed":true}}"#,
                )
            },
            |_| {
                "received invalid webhook response: expected response.uid=\"00000000-0000-4000-8000-000000000001\", got \"other\"".into()
            },
            "503",
            "503",
        ),
        (
            "dry run, sideEffects nil",
            Setup::SideEffectsNil,
            |_| unreachable!("no call is made"),
            |_| "Webhook SideEffects is nil".into(),
            "400",
            "400",
        ),
        (
            "no known AdmissionReview version",
            Setup::UnknownReviewVersions,
            |_| unreachable!("no call is made"),
            |_| {
                "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)".into()
            },
            "400",
            "400",
        ),
    ];
    for (class, setup, answer, reason, before, after) in rows {
        for (kube, code) in [(28, before), (33, before), (34, after), (37, after)] {
            let message = format!("{calling}{}", reason(kube));
            cases.push(CallingCase {
                class,
                setup,
                answer,
                mutating_only: false,
                kube,
                code,
                rejection: Some(("calling_webhook_error", code)),
                client: (500, "InternalError", Box::leak(message.into_boxed_str())),
            });
        }
    }
    // A patch that is not JSON: not a calling error before 1.34 (commit 0f91510ab).
    let undecodable = |c: &WebhookCall| {
        json_reply(&format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"{}","allowed":true,"patchType":"JSONPatch","patch":"W3s="}}}}"#,
            c.request_uid
        ))
    };
    let undecodable_calling = "Internal error occurred: failed calling webhook \"w.example.com\": received undecodable patch in webhook response: unexpected end of JSON input";
    for (kube, error_type, code, message) in [
        (
            28,
            "apiserver_internal_error",
            "0",
            "Internal error occurred: unexpected end of JSON input",
        ),
        (
            33,
            "apiserver_internal_error",
            "0",
            "Internal error occurred: unexpected end of JSON input",
        ),
        (34, "calling_webhook_error", "503", undecodable_calling),
        (37, "calling_webhook_error", "503", undecodable_calling),
    ] {
        cases.push(CallingCase {
            class: "undecodable patch",
            setup: Setup::Plain,
            answer: undecodable,
            mutating_only: true,
            kube,
            code,
            rejection: Some((error_type, code)),
            client: (500, "InternalError", message),
        });
    }
    // A patch of a type the apiserver does not apply: the webhook's status, as for a denial.
    for kube in [33, 34] {
        cases.push(CallingCase {
            class: "unsupported patch type",
            setup: Setup::Plain,
            answer: |c| {
                json_reply(&format!(
                    r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"{}","allowed":true,"patchType":"MergePatch","patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7fX1d"}}}}"#,
                    c.request_uid
                ))
            },
            mutating_only: true,
            kube,
            code: "400",
            rejection: Some(("calling_webhook_error", "400")),
            client: (
                500,
                "InternalError",
                "Internal error occurred: failed calling webhook \"w.example.com\": unsupported patch type \"MergePatch\"",
            ),
        });
    }
    // The parent request cancelled: counted with its code, never as a rejection.
    for (kube, code) in [(33, "400"), (34, "503")] {
        cases.push(CallingCase {
            class: "cancelled",
            setup: Setup::Plain,
            answer: |_| ReplyOutcome::Canceled,
            mutating_only: false,
            kube,
            code,
            rejection: None,
            client: (
                500,
                "InternalError",
                "Internal error occurred: failed calling webhook \"w.example.com\": failed to call webhook: Post \"https://hooks.example.com/w?timeout=10s\": context canceled",
            ),
        });
    }
    cases
}

fn calling_case_config(phase: WebhookKind, setup: Setup) -> Vec<WebhookConfiguration> {
    let kind = match phase {
        WebhookKind::Mutating => "MutatingWebhookConfiguration",
        WebhookKind::Validating => "ValidatingWebhookConfiguration",
    };
    let client_config = match setup {
        Setup::NoEndpoint => "{}",
        _ => r#"{url: "https://hooks.example.com/w"}"#,
    };
    let side_effects = match setup {
        Setup::SideEffectsNil => "",
        _ => "  sideEffects: None\n",
    };
    let versions = match setup {
        Setup::UnknownReviewVersions => "[v2]",
        _ => "[v1]",
    };
    load(&format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata: {{name: hooks}}
webhooks:
- name: w.example.com
  clientConfig: {client_config}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}}]
{side_effects}  admissionReviewVersions: {versions}
  failurePolicy: Fail
  timeoutSeconds: 10
"#
    ))
}

#[test]
fn every_calling_error_class_carries_its_releases_status() {
    let mut failures = Vec::new();
    for case in calling_cases() {
        for phase in [WebhookKind::Mutating, WebhookKind::Validating] {
            if case.mutating_only && phase == WebhookKind::Validating {
                continue;
            }
            let (webhook_type, phases) = match phase {
                WebhookKind::Mutating => ("admit", Phases::MutatingOnly),
                WebhookKind::Validating => ("validating", Phases::ValidatingOnly),
            };
            let mut attrs = pod_request(Operation::Create, pod("default", json!({})));
            attrs.dry_run = matches!(case.setup, Setup::SideEffectsNil);
            let engine = Engine::new(
                &calling_case_config(phase, case.setup),
                EngineOptions::for_version(version(case.kube)),
            );
            let mut ids = SequentialIds::default();
            let mut metrics = Metrics::new();
            let namespaces = default_namespaces();
            let outcome = engine.dispatch_blocking(
                attrs,
                RequestContext {
                    namespaces: &namespaces,
                    ids: &mut ids,
                    metrics: &mut metrics,
                    deadline: None,
                    phases,
                },
                &mut Answer(case.answer),
            );
            let what = format!("{} at 1.{} ({webhook_type})", case.class, case.kube);
            let got_client = outcome
                .status
                .as_ref()
                .map(|s| (s.code, s.reason.clone(), s.message.clone()));
            let want_client = Some((
                case.client.0,
                case.client.1.to_string(),
                case.client.2.to_string(),
            ));
            if got_client != want_client {
                failures.push(format!(
                    "{what}: client sees {got_client:?}, want {want_client:?}"
                ));
            }
            let total = request_total(&metrics, "w.example.com");
            let want_total = [(
                labels(&[
                    ("code", case.code),
                    ("name", "w.example.com"),
                    ("operation", "CREATE"),
                    ("rejected", "true"),
                    ("type", webhook_type),
                ]),
                1.0,
            )];
            if total != want_total {
                failures.push(format!("{what}: request_total {total:?}"));
            }
            let rejections = rejection_count(&metrics, "w.example.com");
            let want_rejections: Vec<_> = case
                .rejection
                .iter()
                .map(|(error_type, code)| {
                    (
                        labels(&[
                            ("error_type", error_type),
                            ("name", "w.example.com"),
                            ("operation", "CREATE"),
                            ("rejection_code", code),
                            ("type", webhook_type),
                        ]),
                        1.0,
                    )
                })
                .collect();
            if rejections != want_rejections {
                failures.push(format!("{what}: rejection_count {rejections:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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

/// With failurePolicy Ignore an undecodable patch fails open from 1.34 (the Fail side, with
/// every release's metrics, is in `every_calling_error_class_carries_its_releases_status`).
#[test]
fn undecodable_patch_fails_open_from_1_34() {
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

/// Before 1.34 an undecodable patch is an internal error even with failurePolicy Ignore.
#[test]
fn undecodable_patch_before_1_34_is_always_an_internal_error() {
    {
        let policy = "Ignore";
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

// ---------------------------------------------------------------------------------------------
// Why a webhook was not called: every reason the dispatcher has, word for word
// ---------------------------------------------------------------------------------------------

/// The skip reason recorded for `webhook` in `phase`/`round`.
fn skip_reason(o: &Outcome, phase: WebhookKind, round: u8, webhook: &str) -> String {
    let c = o
        .calls
        .iter()
        .find(|c| c.phase == phase && c.round == round && &*c.webhook == webhook)
        .unwrap_or_else(|| panic!("no record of {webhook} in {phase:?} round {round}"));
    assert_eq!(c.decision, CallDecision::Skipped, "{webhook}: {c:?}");
    c.skip_reason.as_deref().unwrap_or_default().to_string()
}

fn one_hook(kind: &str, body: &str) -> Vec<WebhookConfiguration> {
    load(&format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata: {{name: c}}
webhooks:
- name: w.example.com
  clientConfig: {{url: "https://hooks.example.com/w"}}
  sideEffects: None
  admissionReviewVersions: [v1]
{body}"#
    ))
}

const POD_RULES: &str =
    "  rules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}]\n";

#[test]
fn each_selector_rule_and_condition_skip_says_what_excluded_the_webhook() {
    let mut namespaces = default_namespaces();
    namespaces.insert(
        "shop",
        BTreeMap::from([("tier".to_string(), "web".to_string())]),
    );
    let cases: Vec<(&str, String, Attributes, &str)> = vec![
        (
            "namespaceSelector",
            format!("{POD_RULES}  namespaceSelector: {{matchLabels: {{tier: db}}}}\n"),
            pod_request(Operation::Create, pod("shop", json!({"app": "web"}))),
            r#"namespaceSelector {tier=db} does not select namespace "shop": tier=db: label "tier" is "web""#,
        ),
        (
            "objectSelector",
            format!("{POD_RULES}  objectSelector: {{matchLabels: {{sidecar: \"on\"}}}}\n"),
            pod_request(Operation::Create, pod("default", json!({"app": "web"}))),
            r#"objectSelector {sidecar=on} selects neither the object nor the old object: sidecar=on: label "sidecar" is absent"#,
        ),
        (
            "rules",
            "  rules: [{operations: [UPDATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}]\n".into(),
            pod_request(Operation::Create, pod("default", json!({}))),
            r#"no rule matches: CREATE pods (v1) is outside rules[0] operations ["UPDATE"]"#,
        ),
        (
            "rules, scope first",
            "  rules: [{operations: [UPDATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods], scope: Cluster}]\n".into(),
            pod_request(Operation::Create, pod("default", json!({}))),
            r#"no rule matches: CREATE pods (v1) is outside rules[0] scope "Cluster" (the request is namespaced)"#,
        ),
        (
            "rules, matchPolicy Exact",
            "  matchPolicy: Exact\n  rules: [{operations: [CREATE], apiGroups: [apps], apiVersions: [v1beta1], resources: [deployments]}]\n".into(),
            request(
                Operation::Create,
                ("apps", "v1", "Deployment"),
                "deployments",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}}),
            ),
            r#"no rule matches: CREATE deployments (apps/v1) is outside rules[0] apiVersions ["v1beta1"] (matchPolicy Exact: equivalent resources not considered)"#,
        ),
        (
            "matchCondition false",
            format!("{POD_RULES}  matchConditions: [{{name: not-web, expression: \"object.metadata.labels.app != 'web'\"}}]\n"),
            pod_request(Operation::Create, pod("default", json!({"app": "web"}))),
            r#"matchCondition "not-web" evaluated to false"#,
        ),
        (
            "matchCondition error, Ignore",
            format!("{POD_RULES}  failurePolicy: Ignore\n  matchConditions: [{{name: missing, expression: \"object.metadata.labels.missing == 'x'\"}}]\n"),
            pod_request(Operation::Create, pod("default", json!({"app": "web"}))),
            "matchConditions failed and failurePolicy is Ignore: ",
        ),
        (
            "matchCondition error, Fail",
            format!("{POD_RULES}  failurePolicy: Fail\n  matchConditions: [{{name: missing, expression: \"object.metadata.labels.missing == 'x'\"}}]\n"),
            pod_request(Operation::Create, pod("default", json!({"app": "web"}))),
            "deciding whether to call it failed the request, which stops here: pods \"web-0\" is forbidden: ",
        ),
    ];
    for (what, body, attrs, want) in cases {
        for (kind, phase) in [
            ("MutatingWebhookConfiguration", WebhookKind::Mutating),
            ("ValidatingWebhookConfiguration", WebhookKind::Validating),
        ] {
            let r = run_with(
                &one_hook(kind, &body),
                KubeVersion::default(),
                attrs.clone(),
                &namespaces,
                None,
                ScriptedReplier::default(),
            );
            let got = skip_reason(&r.outcome, phase, 0, "w.example.com");
            assert!(
                got.starts_with(want),
                "{what} ({phase:?}):\n got  {got}\n want {want}…"
            );
            assert!(r.replier.seen.is_empty(), "{what}: a call was made");
        }
    }
}

/// The demo's situation: the sidecar injector's objectSelector does not select the pod in round
/// 0; the defaulter after it adds the label and changes the object; in round 1 the injector
/// matches, but a webhook is never called for the first time in the reinvocation round.
#[test]
fn a_webhook_not_called_in_round_0_is_not_reinvoked_whatever_changed() {
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: a-sidecar}
webhooks:
- name: sidecar-injector.example.com
  clientConfig: {url: "https://hooks.example.com/inject"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  objectSelector: {matchLabels: {sidecar: "on"}}
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
- name: never.example.com
  clientConfig: {url: "https://hooks.example.com/never"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: if-needed-last.example.com
  clientConfig: {url: "https://hooks.example.com/last"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
- name: labeller.example.com
  clientConfig: {url: "https://hooks.example.com/label"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
"#,
    );
    let r = run(
        &configs,
        pod_request(Operation::Create, pod("default", json!({"app": "web"}))),
        vec![(
            "labeller.example.com",
            ScriptedReply::patch(
                json!([{"op": "add", "path": "/metadata/labels/sidecar", "value": "on"}]),
            ),
        )],
    );
    let o = &r.outcome;
    assert!(o.allowed && o.reinvoked, "{:?}", o.status);
    let m = WebhookKind::Mutating;
    assert_eq!(
        skip_reason(o, m, 0, "sidecar-injector.example.com"),
        r#"objectSelector {sidecar=on} selects neither the object nor the old object: sidecar=on: label "sidecar" is absent"#
    );
    assert_eq!(
        skip_reason(o, m, 1, "sidecar-injector.example.com"),
        r#"not reinvoked: it was not called in round 0, and a webhook is never called for the first time in the reinvocation round (round 0: objectSelector {sidecar=on} selects neither the object nor the old object: sidecar=on: label "sidecar" is absent)"#
    );
    assert_eq!(
        skip_reason(o, m, 1, "never.example.com"),
        "not reinvoked: its reinvocationPolicy is Never (the default): it is called at most once per request"
    );
    // The last changer is not reinvoked for its own change.
    assert_eq!(
        skip_reason(o, m, 1, "labeller.example.com"),
        "not reinvoked: no webhook after it changed the object in round 0 (reinvocationPolicy IfNeeded reinvokes a webhook only then)"
    );
    // The IfNeeded webhook before the change is reinvoked.
    assert_eq!(
        called(o)
            .into_iter()
            .filter(|c| c.1 == 1)
            .map(|c| c.3)
            .collect::<Vec<_>>(),
        ["if-needed-last.example.com"]
    );
}

/// A dry run to a webhook with side effects: matched, never called (no request is sent), and the
/// request fails; an exempt kind reaches no webhook at all.
#[test]
fn a_matched_webhook_refused_before_its_call_and_an_exempt_request_say_so() {
    let configs = one_hook(
        "MutatingWebhookConfiguration",
        &POD_RULES.replace("[CREATE]", "[\"*\"]"),
    )
    .into_iter()
    .map(|mut c| {
        for w in &mut c.webhooks {
            w.side_effects = Some("Some".into());
        }
        c
    })
    .collect::<Vec<_>>();
    let mut attrs = pod_request(Operation::Create, pod("default", json!({})));
    attrs.dry_run = true;
    let r = run(&configs, attrs, vec![]);
    assert!(r.replier.seen.is_empty());
    let c = &r.outcome.calls[0];
    assert_eq!(c.decision, CallDecision::Called);
    assert_eq!(
        c.error.as_deref(),
        Some(r#"admission webhook "w.example.com" does not support dry run"#)
    );
    assert!(
        !r.outcome
            .steps()
            .iter()
            .any(|s| matches!(s.kind, StepKind::ReviewSent { .. })),
        "no AdmissionReview was sent"
    );

    let exempt = run(
        &configs,
        request(
            Operation::Create,
            (
                "admissionregistration.k8s.io",
                "v1",
                "MutatingWebhookConfiguration",
            ),
            "mutatingwebhookconfigurations",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "x"}}),
        ),
        vec![],
    );
    assert!(exempt.outcome.calls.is_empty());
    let reasons: Vec<String> = exempt
        .outcome
        .steps()
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::RequestExempt { reason } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "MutatingWebhookConfiguration objects are never sent to API-registered webhooks (they configure admission themselves)"
        ]
    );
}

/// The request's deadline spent by the mutating phase: the validating webhooks that match are
/// never called, and say so.
#[test]
fn validating_webhooks_matched_after_the_deadline_say_they_were_not_called() {
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: m}
webhooks:
- name: slow.example.com
  clientConfig: {url: "https://hooks.example.com/slow"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: v}
webhooks:
- name: check.example.com
  clientConfig: {url: "https://hooks.example.com/check"}
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
            "slow.example.com".to_string(),
            ScriptedReply {
                delay_ms: 5_000,
                ..ScriptedReply::allow()
            },
        )]),
    );
    assert_eq!(client_error(&r.outcome).0, 504);
    assert_eq!(r.replier.seen.len(), 1);
    assert_eq!(
        skip_reason(&r.outcome, WebhookKind::Validating, 0, "check.example.com"),
        "it matched, but the request had already timed out when the validating webhooks were to be called (the request fails: Timeout)"
    );
}
