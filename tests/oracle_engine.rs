//! The engine against a real kube-apiserver v1.32 session (tests/fixtures/oracle-v1.32): every
//! request of the audit log that went through the webhooks is dispatched again with webhooks that
//! behave like the recorded ones, and must produce the annotations, verdicts and messages the
//! apiserver recorded, byte for byte.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hookscope::api::{
    GroupVersionKind, GroupVersionResource, Operation, UserInfo, WebhookConfiguration,
};
use hookscope::engine::{
    Attributes, AuditLevel, Engine, EngineOptions, Namespaces, Phases, Replier, Reply,
    ReplyOutcome, RequestContext, SequentialIds, WebhookCall,
};
use hookscope::metrics::Metrics;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oracle-v1.32");

fn configurations() -> Vec<WebhookConfiguration> {
    ["mutating.yaml", "validating.yaml"]
        .iter()
        .flat_map(|f| {
            let path = format!("{FIXTURES}/{f}");
            let text = std::fs::read_to_string(&path).expect("fixture");
            hookscope::config::parse_documents(&text, &path)
        })
        .map(|r| {
            let mut loaded = r.expect("oracle configurations load");
            loaded.apply_defaults();
            loaded.configuration
        })
        .collect()
}

/// The recorded webhook server's three behaviours, computed from each AdmissionReview received.
struct OracleWebhooks {
    paths: Vec<String>,
}

fn add_label_patch(object: &Value, key: &str, value: &str) -> Value {
    match object.pointer("/metadata/labels") {
        Some(Value::Object(_)) => {
            json!([{"op": "add", "path": format!("/metadata/labels/{}", key.replace('~', "~0").replace('/', "~1")), "value": value}])
        }
        _ => json!([{"op": "add", "path": "/metadata/labels", "value": {key: value}}]),
    }
}

impl Replier for OracleWebhooks {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let replies = calls
            .iter()
            .map(|call| {
                let review: Value = serde_json::from_slice(&call.body).expect("engine sends JSON");
                let uid = review["request"]["uid"].clone();
                let object = &review["request"]["object"];
                let path = call.endpoint.url.split('?').next().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_string();
                self.paths.push(path.clone());
                let response = match path.as_str() {
                    "add-label" | "add-label-b" => {
                        let (k, v) = if path == "add-label" {
                            ("oracle.test/mutated-by", "add-label")
                        } else {
                            ("oracle.test/mutated-by-b", "add-label-b")
                        };
                        let patch = serde_json::to_vec(&add_label_patch(object, k, v)).unwrap();
                        json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
                               "patch": base64::engine::general_purpose::STANDARD.encode(patch)})
                    }
                    "deny" => json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": "denied by oracle deny webhook"}}),
                    other => panic!("unexpected webhook path {other}"),
                };
                let body = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).unwrap();
                Reply {
                    outcome: ReplyOutcome::Http { status: 200, content_type: Some("application/json".into()), body },
                    elapsed: Duration::from_millis(2),
                }
            })
            .collect();
        std::future::ready(replies)
    }
}

struct Recorded {
    attrs: Attributes,
    annotations: BTreeMap<String, String>,
    code: i64,
    message: Option<String>,
}

/// Final-stage create events on configmaps, and the namespace labels the log shows.
fn recorded_requests() -> (Vec<Recorded>, Namespaces) {
    let log = std::fs::read_to_string(format!("{FIXTURES}/audit.log")).expect("audit log");
    let mut namespaces = Namespaces::default();
    let mut out = Vec::new();
    for line in log.lines() {
        let e: Value = serde_json::from_str(line).expect("audit line");
        if e["stage"] != "ResponseComplete" || e["verb"] != "create" {
            continue;
        }
        let resource = e["objectRef"]["resource"].as_str().unwrap_or_default();
        if resource == "namespaces" {
            let labels = e["requestObject"]["metadata"]["labels"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let name = e["objectRef"]["name"].as_str().unwrap_or_default();
            namespaces.insert(
                name,
                labels
                    .into_iter()
                    .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
                    .collect(),
            );
            continue;
        }
        if resource != "configmaps" {
            continue;
        }
        let uri = e["requestURI"].as_str().unwrap_or_default();
        let user: UserInfo = serde_json::from_value(e["user"].clone()).unwrap();
        let annotations: BTreeMap<String, String> = e["annotations"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.contains("webhook.admission.k8s.io/"))
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Recorded {
            attrs: Attributes {
                operation: Operation::Create,
                kind: GroupVersionKind::new("", "v1", "ConfigMap").into(),
                resource: GroupVersionResource::new("", "v1", "configmaps").into(),
                sub_resource: String::new(),
                namespace: e["objectRef"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                name: e["objectRef"]["name"].as_str().unwrap_or_default().into(),
                object: Some(Arc::new(e["requestObject"].clone().into())),
                old_object: None,
                dry_run: uri.contains("dryRun=All"),
                options: Some(Arc::new(
                    json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
                )),
                user_info: Arc::new(user),
            },
            annotations,
            code: e["responseStatus"]["code"].as_i64().unwrap_or_default(),
            message: e["responseStatus"]["message"].as_str().map(String::from),
        });
    }
    (out, namespaces)
}

#[test]
fn replaying_the_recorded_session_reproduces_the_apiservers_annotations_and_verdicts() {
    let engine = Engine::new(
        &configurations(),
        EngineOptions::for_version("1.32".parse().unwrap()),
    );
    let (requests, namespaces) = recorded_requests();
    assert!(
        requests.len() >= 6,
        "the fixture has the oracle's configmap creates"
    );
    let mut metrics = Metrics::new();
    let mut ids = SequentialIds::default();
    let mut compared = 0;
    for rec in requests {
        let mut webhooks = OracleWebhooks { paths: Vec::new() };
        let ctx = RequestContext {
            namespaces: &namespaces,
            ids: &mut ids,
            metrics: &mut metrics,
            deadline: Some(Duration::from_secs(60)),
            phases: Phases::All,
        };
        let name = rec.attrs.name.clone();
        let out = engine.dispatch_blocking(rec.attrs, ctx, &mut webhooks);
        if rec.annotations.is_empty() {
            // Requests made before the configurations took effect saw no webhook.
            continue;
        }
        compared += 1;
        assert_eq!(
            out.annotations_at(AuditLevel::RequestResponse),
            rec.annotations,
            "annotations of {name}"
        );
        assert_eq!(out.allowed, rec.code < 400, "verdict of {name}");
        if let Some(m) = rec.message {
            assert_eq!(
                out.status.as_ref().map(|s| s.message.as_str()),
                Some(m.as_str()),
                "message of {name}"
            );
            assert_eq!(
                out.status.as_ref().map(|s| i64::from(s.code)),
                Some(rec.code)
            );
        }
        assert!(
            out.reinvoked,
            "add-label is IfNeeded and add-label-b changed the object after it"
        );
        assert_eq!(
            webhooks.paths[..3],
            ["add-label", "add-label-b", "add-label"],
            "call order of {name}"
        );
    }
    assert!(compared >= 6, "compared {compared} requests");
    let denied = metrics.value(
        "apiserver_admission_webhook_rejection_count",
        &[
            ("name", "deny.oracle.test"),
            ("type", "validating"),
            ("operation", "CREATE"),
            ("error_type", "no_error"),
            ("rejection_code", "403"),
        ],
    );
    assert!(
        denied.unwrap_or(0.0) >= 1.0,
        "rejections are counted: {denied:?}"
    );
}
