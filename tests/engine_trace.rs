//! The compact trace: the steps it expands into name the call records they refer to, take the
//! outcome's texts faithfully, and serialise as the outcome does.

use std::collections::BTreeMap;
use std::sync::Arc;

use hookscope::api::{GroupVersionKind, GroupVersionResource, Operation, WebhookConfiguration};
use hookscope::engine::{
    Attributes, CallDecision, Engine, EngineOptions, Namespaces, Outcome, Phases, RequestContext,
    SequentialIds, StepKind,
};
use hookscope::metrics::Metrics;
use hookscope::script::{ScriptedReplier, ScriptedReply};
use serde_json::json;

const CONFIGS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutate}
webhooks:
- name: label.example.com
  clientConfig: {url: "https://127.0.0.1:8443/label"}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
- name: flaky.example.com
  clientConfig: {url: "https://127.0.0.1:8443/flaky"}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"]}]
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
- name: services.example.com
  clientConfig: {url: "https://127.0.0.1:8443/services"}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: ["v1"], resources: ["services"]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: sidecar.example.com
  clientConfig: {url: "https://127.0.0.1:8443/sidecar"}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validate}
webhooks:
- name: policy.example.com
  clientConfig: {url: "https://127.0.0.1:8443/policy"}
  rules: [{operations: ["*"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

fn configs() -> Vec<WebhookConfiguration> {
    hookscope::config::parse_documents(CONFIGS, "trace.yaml")
        .into_iter()
        .map(|r| {
            let mut loaded = r.expect("configuration loads");
            loaded.apply_defaults();
            loaded.configuration
        })
        .collect()
}

fn pod_create() -> Attributes {
    Attributes {
        operation: Operation::Create,
        kind: GroupVersionKind::new("", "v1", "Pod").into(),
        resource: GroupVersionResource::new("", "v1", "pods").into(),
        sub_resource: String::new(),
        namespace: "default".into(),
        name: "web-0".into(),
        object: Some(Arc::new(
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-0", "namespace": "default"},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            })
            .into(),
        )),
        old_object: None,
        dry_run: false,
        options: Some(json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}).into()),
        user_info: Default::default(),
    }
}

/// A request that is patched twice (so reinvoked), fails open once, warns, annotates, and is
/// denied by the validating webhook.
fn dispatch() -> Outcome {
    dispatch_with(EngineOptions::default()).0
}

/// [`dispatch`] with `options`, with the calls made and the metrics recorded.
fn dispatch_with(options: EngineOptions) -> (Outcome, Vec<String>, String) {
    let engine = Engine::new(&configs(), options);
    let mut namespaces = Namespaces::default();
    namespaces.insert("default", BTreeMap::new());
    let mut replier = ScriptedReplier::new([
        (
            "label.example.com".to_string(),
            ScriptedReply {
                patch: Some(
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "<b>"}}]),
                ),
                warnings: vec!["labelled".into()],
                audit_annotations: BTreeMap::from([("why".into(), "policy".into())]),
                ..ScriptedReply::default()
            },
        ),
        (
            "flaky.example.com".to_string(),
            ScriptedReply {
                error: Some("refused".into()),
                ..ScriptedReply::default()
            },
        ),
        (
            "sidecar.example.com".to_string(),
            ScriptedReply::patch(
                json!([{"op": "add", "path": "/spec/containers/-", "value": {"name": "proxy", "image": "proxy:1"}}]),
            ),
        ),
        (
            "policy.example.com".to_string(),
            ScriptedReply {
                delay_ms: 7,
                ..ScriptedReply::deny(403, "no sidecars here")
            },
        ),
    ]);
    let mut ids = SequentialIds::default();
    let mut metrics = Metrics::new();
    let outcome = engine.dispatch_blocking(
        pod_create(),
        RequestContext {
            namespaces: &namespaces,
            ids: &mut ids,
            metrics: &mut metrics,
            deadline: None,
            phases: Phases::All,
        },
        &mut replier,
    );
    let bodies = replier
        .seen
        .iter()
        .map(|c| String::from_utf8_lossy(&c.body).into_owned())
        .collect();
    (outcome, bodies, metrics.encode_text())
}

/// Without a trace, a dispatch sends the same reviews and ends the same way, metrics included.
#[test]
fn a_dispatch_without_trace_is_the_same_dispatch() {
    let (traced, traced_calls, traced_metrics) = dispatch_with(EngineOptions::default());
    let (mut plain, plain_calls, plain_metrics) = dispatch_with(EngineOptions {
        trace: false,
        ..EngineOptions::default()
    });
    assert!(!traced.trace.is_empty());
    assert!(plain.trace.is_empty(), "no steps recorded");
    assert_eq!(traced_calls.len(), 5, "both rounds' calls");
    assert_eq!(plain_calls, traced_calls);
    assert_eq!(plain_metrics, traced_metrics);
    plain.trace = traced.trace.clone();
    assert_eq!(plain, traced);
}

#[test]
fn every_step_names_the_call_record_it_refers_to() {
    let o = dispatch();
    assert!(o.reinvoked, "the sidecar's patch reinvokes the labeller");
    let steps = o.steps();
    assert_eq!(steps.len(), o.trace.len());
    let mut with_hook = 0;
    for (compact, step) in o.trace.compact_steps().iter().zip(&steps) {
        assert_eq!(compact.at(), step.at);
        match (compact.call(), step.kind.hook()) {
            (Some(i), Some(h)) => {
                let c = &o.calls[i];
                assert_eq!(
                    (c.phase, c.round, c.index, &*c.configuration, &*c.webhook),
                    (h.phase, h.round, h.index, &*h.configuration, &*h.webhook),
                );
                with_hook += 1;
            }
            (None, None) => {}
            other => panic!("step and record disagree: {other:?} for {step:?}"),
        }
    }
    assert!(with_hook > 10);
}

#[test]
fn expanded_steps_carry_the_outcome_texts() {
    let o = dispatch();
    let steps = o.steps();
    // Annotation steps are the outcome's annotations, in order (the labeller's own annotation is
    // written again, unchanged, when it is reinvoked).
    let annotated: Vec<(&str, &str)> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Annotation { key, value, .. } => Some((key.as_str(), value.as_str())),
            _ => None,
        })
        .collect();
    let mut first_seen = annotated.clone();
    let mut seen = std::collections::HashSet::new();
    first_seen.retain(|a| seen.insert(*a));
    assert_eq!(annotated.len(), first_seen.len() + 1);
    let annotations: Vec<(&str, &str)> =
        o.annotations.iter().map(|a| (&*a.key, &*a.value)).collect();
    assert_eq!(first_seen, annotations);
    assert!(
        annotations
            .iter()
            .any(|(k, _)| *k == "label.example.com/why")
    );
    // The failed call's error and policy are its record's.
    let failed: Vec<(String, String, bool)> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::CallFailed {
                error,
                failure_policy,
                failed_open,
                ..
            } => Some((error.clone(), failure_policy.clone(), *failed_open)),
            _ => None,
        })
        .collect();
    let flaky = o
        .calls
        .iter()
        .find(|c| &*c.webhook == "flaky.example.com" && c.decision == CallDecision::Called)
        .expect("the flaky webhook was called");
    assert_eq!(
        failed,
        vec![(
            flaky.error.as_deref().unwrap_or_default().to_string(),
            "Ignore".to_string(),
            true
        )]
    );
    assert!(failed[0].0.contains("connection refused"), "{failed:?}");
    // Each applied patch is its record's, as the annotation carries it.
    let patches: Vec<_> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::PatchApplied { hook, patch, .. } => {
                Some((hook.webhook.clone(), patch.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        patches.len(),
        3,
        "the labeller patches again when reinvoked"
    );
    assert_eq!(
        patches[0].1,
        json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "<b>"}}])
    );
    // The request-count metric is labelled with the code of each attempt.
    let metric_labels: Vec<Vec<(String, String)>> = steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Metric { name, labels }
                if name == "apiserver_admission_webhook_rejection_count" =>
            {
                Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect(),
                )
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        metric_labels,
        vec![vec![
            ("name".to_string(), "policy.example.com".to_string()),
            ("error_type".to_string(), "no_error".to_string()),
            ("rejection_code".to_string(), "403".to_string()),
        ]]
    );
    // The verdict carries the client's status; the reply its body and duration.
    match &steps.last().map(|s| &s.kind) {
        Some(StepKind::Verdict { allowed, status }) => {
            assert!(!allowed);
            assert_eq!(status.as_deref(), o.status.as_deref());
        }
        other => panic!("the trace ends with the verdict, not {other:?}"),
    }
    let denied_reply = steps.iter().rev().find_map(|s| match &s.kind {
        StepKind::ReplyReceived {
            http_status,
            body,
            elapsed,
            ..
        } => Some((*http_status, body.clone(), *elapsed)),
        _ => None,
    });
    let (code, body, elapsed) = denied_reply.expect("a reply");
    assert_eq!(code, Some(200));
    assert!(body.is_some_and(|b| b.contains("no sidecars here")));
    assert_eq!(elapsed.as_millis(), 7);
}

#[test]
fn the_outcome_serialises_its_trace_in_full() {
    let o = dispatch();
    let whole = serde_json::to_value(&o).expect("serialises");
    let steps = serde_json::to_value(o.steps()).expect("serialises");
    assert_eq!(whole["trace"], steps);
    let sent = steps
        .as_array()
        .expect("an array")
        .iter()
        .find(|s| s["step"] == "reviewSent")
        .expect("a review was sent");
    assert_eq!(sent["url"], "https://127.0.0.1:8443/label?timeout=10s");
    assert_eq!(sent["review"]["request"]["uid"], sent["uid"]);
    assert_eq!(whole["calls"][0]["patch"][0]["value"]["a"], "<b>");
}
