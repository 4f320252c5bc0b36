//! Properties of the dispatcher over random webhook sets: the reinvocation round (bounds, and
//! upstream's "net effect" rule checked against an independent model), the validating fan-out,
//! determinism and metric bookkeeping.
//!
//! References are to the upstream semantics notes (§15.3 reinvocation, §16 validating, §17
//! annotations, §19 metrics).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use hookscope::api::{
    GroupVersionKind, GroupVersionResource, LabelSelector, Operation, RuleWithOperations,
    ServiceReference, Webhook, WebhookClientConfig, WebhookConfiguration, WebhookKind,
};
use hookscope::engine::{
    Attributes, CallDecision, Engine, EngineOptions, Namespaces, Outcome, Phases, Replier, Reply,
    RequestContext, SequentialIds, StepKind, WebhookCall,
};
use hookscope::metrics::Metrics;
use hookscope::script::{ScriptedReplier, ScriptedReply};
use proptest::prelude::*;
use serde_json::{Value, json};

const V1: &str = "admissionregistration.k8s.io/v1";
const LABEL_KEYS: [&str; 3] = ["app", "team", "tier"];
const LABEL_VALUES: [&str; 2] = ["a", "b"];

// ---------------------------------------------------------------------------------------------
// Random inputs
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum PatchOp {
    /// `[]`: an empty patch, never a change and no patch annotation.
    Empty,
    /// `add /metadata/labels/<k>`.
    Add(&'static str, &'static str),
    /// `replace /metadata/labels/<k>` (json-patch v4: succeeds as an add on a missing member).
    Replace(&'static str, &'static str),
}

#[derive(Debug, Clone, PartialEq)]
enum Action {
    Allow,
    Patch(PatchOp),
    Deny,
    Error,
}

#[derive(Debug, Clone)]
struct HookSpec {
    stem: String,
    config: usize,
    reinvocation: Option<&'static str>,
    failure: Option<&'static str>,
    action: Action,
}

#[derive(Debug, Clone)]
struct Scenario {
    config_stems: Vec<String>,
    hooks: Vec<HookSpec>,
    operation: Operation,
    labels: Option<BTreeMap<String, String>>,
}

fn patch_op() -> impl Strategy<Value = PatchOp> {
    let key = prop::sample::select(LABEL_KEYS.to_vec());
    let value = prop::sample::select(LABEL_VALUES.to_vec());
    prop_oneof![
        1 => Just(PatchOp::Empty),
        3 => (key.clone(), value.clone()).prop_map(|(k, v)| PatchOp::Add(k, v)),
        2 => (key, value).prop_map(|(k, v)| PatchOp::Replace(k, v)),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        2 => Just(Action::Allow),
        6 => patch_op().prop_map(Action::Patch),
        1 => Just(Action::Deny),
        1 => Just(Action::Error),
    ]
}

fn hook_spec() -> impl Strategy<Value = HookSpec> {
    (
        "[a-z]{1,5}",
        0..3usize,
        prop::sample::select(vec![Some("IfNeeded"), Some("Never"), None]),
        prop::sample::select(vec![Some("Fail"), Some("Ignore"), None]),
        action(),
    )
        .prop_map(|(stem, config, reinvocation, failure, action)| HookSpec {
            stem,
            config,
            reinvocation,
            failure,
            action,
        })
}

fn labels() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    prop::option::weighted(
        0.75,
        prop::collection::btree_map(
            prop::sample::select(LABEL_KEYS.to_vec()).prop_map(String::from),
            prop::sample::select(LABEL_VALUES.to_vec()).prop_map(String::from),
            0..3,
        ),
    )
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec("[a-z]{1,6}", 3),
        prop::collection::vec(hook_spec(), 1..=6),
        prop::sample::select(vec![
            Operation::Create,
            Operation::Update,
            Operation::Delete,
        ]),
        labels(),
    )
        .prop_map(|(config_stems, hooks, operation, labels)| Scenario {
            config_stems,
            hooks,
            operation,
            labels,
        })
}

// ---------------------------------------------------------------------------------------------
// Building engine inputs
// ---------------------------------------------------------------------------------------------

fn config_name(s: &Scenario, c: usize) -> String {
    format!("{}-{c}", s.config_stems[c])
}

fn hook_name(h: &HookSpec, i: usize) -> String {
    format!("{}-{i}.example.com", h.stem)
}

fn pod_rule() -> RuleWithOperations {
    RuleWithOperations {
        operations: Some(vec!["*".into()]),
        api_groups: Some(vec![String::new()]),
        api_versions: Some(vec!["v1".into()]),
        resources: Some(vec!["pods".into()]),
        scope: None,
    }
}

fn webhook(name: &str, failure: Option<&str>, reinvocation: Option<&str>) -> Webhook {
    Webhook {
        name: name.into(),
        client_config: WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: "webhooks".into(),
                name: "svc".into(),
                path: Some("/hook".into()),
                port: Some(443),
            }),
            ..Default::default()
        },
        rules: Some(vec![pod_rule()]),
        failure_policy: failure.map(String::from),
        namespace_selector: Some(LabelSelector::default()),
        object_selector: Some(LabelSelector::default()),
        side_effects: Some("None".into()),
        timeout_seconds: Some(10),
        admission_review_versions: Some(vec!["v1".into()]),
        reinvocation_policy: reinvocation.map(String::from),
        ..Default::default()
    }
}

fn configuration(kind: WebhookKind, name: &str, webhooks: Vec<Webhook>) -> WebhookConfiguration {
    WebhookConfiguration {
        kind,
        api_version: V1.into(),
        name: name.into(),
        metadata: json!({ "name": name }),
        webhooks,
    }
}

fn mutating_configs(s: &Scenario) -> Vec<WebhookConfiguration> {
    (0..s.config_stems.len())
        .map(|c| {
            let hooks = s
                .hooks
                .iter()
                .enumerate()
                .filter(|(_, h)| h.config == c)
                .map(|(i, h)| webhook(&hook_name(h, i), h.failure, h.reinvocation))
                .collect();
            configuration(WebhookKind::Mutating, &config_name(s, c), hooks)
        })
        .collect()
}

fn patch_json(op: &PatchOp) -> Value {
    match op {
        PatchOp::Empty => json!([]),
        PatchOp::Add(k, v) => {
            json!([{"op": "add", "path": format!("/metadata/labels/{k}"), "value": v}])
        }
        PatchOp::Replace(k, v) => {
            json!([{"op": "replace", "path": format!("/metadata/labels/{k}"), "value": v}])
        }
    }
}

fn scripted(action: &Action) -> ScriptedReply {
    match action {
        Action::Allow => ScriptedReply::allow(),
        Action::Patch(op) => ScriptedReply::patch(patch_json(op)),
        Action::Deny => ScriptedReply::deny(403, "denied by script"),
        Action::Error => ScriptedReply {
            error: Some("refused".into()),
            ..ScriptedReply::default()
        },
    }
}

fn replier(s: &Scenario) -> ScriptedReplier {
    ScriptedReplier::new(
        s.hooks
            .iter()
            .enumerate()
            .map(|(i, h)| (hook_name(h, i), scripted(&h.action))),
    )
}

fn pod(labels: &Option<BTreeMap<String, String>>) -> Value {
    let mut metadata = json!({"name": "p", "namespace": "default"});
    if let Some(l) = labels {
        metadata["labels"] = json!(l);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    })
}

fn pod_request(op: Operation, labels: &Option<BTreeMap<String, String>>) -> Attributes {
    let object = pod(labels);
    Attributes {
        operation: op,
        kind: GroupVersionKind::new("", "v1", "Pod").into(),
        resource: GroupVersionResource::new("", "v1", "pods").into(),
        sub_resource: String::new(),
        namespace: "default".into(),
        name: "p".into(),
        object: (op != Operation::Delete).then(|| Arc::new(object.clone().into())),
        old_object: (op != Operation::Create).then_some(Arc::new(object.into())),
        dry_run: false,
        options: None,
        user_info: Default::default(),
    }
}

fn namespaces() -> Namespaces {
    let mut ns = Namespaces::default();
    ns.insert("default", BTreeMap::new());
    ns
}

fn dispatch<R: Replier + Send>(
    engine: &Engine,
    attrs: Attributes,
    metrics: &mut Metrics,
    replier: &mut R,
) -> Outcome {
    let ns = namespaces();
    let mut ids = SequentialIds::default();
    engine.dispatch_blocking(
        attrs,
        RequestContext {
            namespaces: &ns,
            ids: &mut ids,
            metrics,
            deadline: None,
            phases: Phases::All,
        },
        replier,
    )
}

/// A replier that records the size and phase of every batch it is handed.
struct BatchRecorder {
    inner: ScriptedReplier,
    batches: Vec<(WebhookKind, usize)>,
}

impl Replier for BatchRecorder {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        if let Some(first) = calls.first() {
            assert!(
                calls.iter().all(|c| c.phase == first.phase),
                "a batch mixes phases"
            );
            self.batches.push((first.phase, calls.len()));
        }
        self.inner.reply(calls)
    }
}

// ---------------------------------------------------------------------------------------------
// The model (upstream's list order and §15.3 "Net effect")
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct FlatHook {
    position: usize,
    name: String,
    configuration: String,
    if_needed: bool,
    ignore: bool,
    action: Action,
}

/// The mutating list as upstream orders it: configurations sorted by name, webhooks in order.
fn flatten(s: &Scenario) -> Vec<FlatHook> {
    let mut configs: Vec<usize> = (0..s.config_stems.len()).collect();
    configs.sort_by_key(|&c| config_name(s, c));
    let mut out = Vec::new();
    for c in configs {
        for (i, h) in s.hooks.iter().enumerate().filter(|(_, h)| h.config == c) {
            out.push(FlatHook {
                position: out.len(),
                name: hook_name(h, i),
                configuration: config_name(s, c),
                if_needed: h.reinvocation == Some("IfNeeded"),
                ignore: h.failure == Some("Ignore"),
                action: h.action.clone(),
            });
        }
    }
    out
}

/// The object as far as the webhooks can change it: None for a request without an object, else
/// its labels (None when the object has no `metadata.labels`).
type ModelObject = Option<Option<BTreeMap<String, String>>>;

/// One call: Ok(changed), or Err(()) when the chain stops there.
fn model_call(hook: &FlatHook, object: &mut ModelObject) -> Result<bool, ()> {
    match &hook.action {
        Action::Allow | Action::Patch(PatchOp::Empty) => Ok(false),
        Action::Deny => Err(()),
        Action::Error if hook.ignore => Ok(false),
        Action::Error => Err(()),
        Action::Patch(PatchOp::Add(k, v) | PatchOp::Replace(k, v)) => {
            // No object: "attempted to modify the object"; no labels map: the path's parent is
            // missing and json-patch fails. Neither is subject to failurePolicy.
            let Some(Some(labels)) = object else {
                return Err(());
            };
            let changed = labels.get(*k).map(String::as_str) != Some(*v);
            labels.insert((*k).to_string(), (*v).to_string());
            Ok(changed)
        }
    }
}

#[derive(Debug, PartialEq)]
struct ModelResult {
    /// (round, list position, changed) per attempted call.
    calls: Vec<(u8, usize, bool)>,
    allowed: bool,
    reinvoked: bool,
}

fn model(hooks: &[FlatHook], object: ModelObject) -> ModelResult {
    let mut object = object;
    let mut calls = Vec::new();
    for h in hooks {
        match model_call(h, &mut object) {
            Ok(changed) => calls.push((0, h.position, changed)),
            Err(()) => {
                calls.push((0, h.position, false));
                return ModelResult {
                    calls,
                    allowed: false,
                    reinvoked: false,
                };
            }
        }
    }
    let round0 = calls.clone();
    if !round0.iter().any(|c| c.2) {
        return ModelResult {
            calls,
            allowed: true,
            reinvoked: false,
        };
    }
    // Round 1: an IfNeeded webhook called in round 0 is called again iff a later webhook changed
    // the object in round 0, or an earlier round-1 call changed it.
    let mut round1_changed = false;
    for h in hooks {
        if !h.if_needed {
            continue;
        }
        let later_changed = round0.iter().any(|c| c.1 > h.position && c.2);
        if !(later_changed || round1_changed) {
            continue;
        }
        match model_call(h, &mut object) {
            Ok(changed) => {
                calls.push((1, h.position, changed));
                round1_changed |= changed;
            }
            Err(()) => {
                calls.push((1, h.position, false));
                return ModelResult {
                    calls,
                    allowed: false,
                    reinvoked: true,
                };
            }
        }
    }
    ModelResult {
        calls,
        allowed: true,
        reinvoked: true,
    }
}

fn model_object(s: &Scenario) -> ModelObject {
    // The webhooks are sent Go's encoding of the object and patch that: an empty labels map is
    // not in it (`omitempty`), so a patch into it finds no parent.
    (s.operation != Operation::Delete).then(|| s.labels.clone().filter(|l| !l.is_empty()))
}

fn called(outcome: &Outcome, phase: WebhookKind) -> Vec<&hookscope::engine::CallRecord> {
    outcome
        .calls
        .iter()
        .filter(|c| c.phase == phase && c.decision == CallDecision::Called)
        .collect()
}

fn request_total(metrics: &Metrics) -> f64 {
    metrics
        .samples()
        .iter()
        .filter(|s| s.name == "apiserver_admission_webhook_request_total")
        .map(|s| s.value)
        .sum()
}

fn sum_of(metrics: &Metrics, name: &str, label: Option<(&str, &str)>) -> f64 {
    metrics
        .samples()
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| label.is_none_or(|(k, v)| s.labels.iter().any(|(a, b)| a == k && b == v)))
        .map(|s| s.value)
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// At most two rounds; round 1 only for IfNeeded webhooks called in round 0; `reinvoked`
    /// exactly when round 0 changed the object and did not end the request; one mutation
    /// annotation per attempted call, keyed by round and list position.
    #[test]
    fn reinvocation_never_exceeds_two_rounds(s in scenario()) {
        let flat = flatten(&s);
        let engine = Engine::new(&mutating_configs(&s), EngineOptions::default());
        // The engine's list order is upstream's (configurations by name, then list order).
        let engine_order: Vec<&str> =
            engine.mutating_hooks().iter().map(|h| h.webhook.name.as_str()).collect();
        let expected_order: Vec<&str> = flat.iter().map(|h| h.name.as_str()).collect();
        prop_assert_eq!(engine_order, expected_order);

        let mut metrics = Metrics::new();
        let mut r = replier(&s);
        let outcome = dispatch(&engine, pod_request(s.operation, &s.labels), &mut metrics, &mut r);
        let calls = called(&outcome, WebhookKind::Mutating);

        prop_assert!(outcome.calls.iter().all(|c| c.round <= 1));
        prop_assert!(r.seen.iter().all(|c| c.round <= 1));
        // The trace keeps each review as shared parts; written out, it is the body sent.
        let reviews: Vec<String> = outcome
            .steps()
            .iter()
            .filter_map(|t| match &t.kind {
                StepKind::ReviewSent { review, .. } => Some(review.text()),
                _ => None,
            })
            .collect();
        let bodies: Vec<String> =
            r.seen.iter().map(|c| String::from_utf8_lossy(&c.body).into_owned()).collect();
        prop_assert_eq!(reviews, bodies);
        let mut per_hook: BTreeMap<usize, usize> = BTreeMap::new();
        for c in &calls {
            *per_hook.entry(c.index).or_default() += 1;
        }
        prop_assert!(per_hook.values().all(|&n| n <= 2), "{:?}", per_hook);
        for c in calls.iter().filter(|c| c.round == 1) {
            let h = &flat[c.index];
            prop_assert!(h.if_needed, "round-1 call of non-IfNeeded {}", h.name);
            prop_assert!(
                calls.iter().any(|d| d.round == 0 && d.index == c.index),
                "round-1 call of {} that was not called in round 0", h.name
            );
        }

        // Whether round 0 ended the request: its last call failed and did not fail open.
        let failed_open = |r: u8, i: usize| {
            outcome.annotations.iter().any(|a| {
                *a.key == format!("failed-open.mutation.webhook.admission.k8s.io/round_{r}_index_{i}")
            })
        };
        let round0: Vec<_> = calls.iter().filter(|c| c.round == 0).collect();
        let round0_fatal = round0.last().is_some_and(|c| {
            c.allowed == Some(false) || (c.error.is_some() && !failed_open(0, c.index))
        });
        let round0_changed = round0.iter().any(|c| c.mutated);
        prop_assert_eq!(outcome.reinvoked, round0_changed && !round0_fatal);

        // Exactly one mutation annotation per attempted call, with upstream's value.
        let mutation_keys: BTreeSet<String> = outcome
            .annotations
            .iter()
            .filter(|a| a.key.starts_with("mutation.webhook.admission.k8s.io/"))
            .map(|a| a.key.to_string())
            .collect();
        let expected_keys: BTreeSet<String> = calls
            .iter()
            .map(|c| format!("mutation.webhook.admission.k8s.io/round_{}_index_{}", c.round, c.index))
            .collect();
        prop_assert_eq!(mutation_keys.len(), calls.len());
        prop_assert_eq!(&mutation_keys, &expected_keys);
        for c in &calls {
            let h = &flat[c.index];
            prop_assert_eq!(&*c.webhook, h.name.as_str());
            let key = format!("mutation.webhook.admission.k8s.io/round_{}_index_{}", c.round, c.index);
            let value = outcome.annotations.iter().find(|a| *a.key == key).map(|a| a.value.to_string());
            prop_assert_eq!(
                value,
                Some(format!(
                    r#"{{"configuration":"{}","webhook":"{}","mutated":{}}}"#,
                    h.configuration, h.name, c.mutated
                ))
            );
        }
        // Every other annotation belongs to an attempted call too.
        for a in &outcome.annotations {
            let (prefix, suffix) = a.key.split_once('/').expect("annotation keys have a prefix");
            prop_assert!(
                matches!(
                    prefix,
                    "mutation.webhook.admission.k8s.io"
                        | "patch.webhook.admission.k8s.io"
                        | "failed-open.mutation.webhook.admission.k8s.io"
                ),
                "unexpected annotation {}", a.key
            );
            let owner = format!("mutation.webhook.admission.k8s.io/{suffix}");
            prop_assert!(expected_keys.contains(&owner), "{} has no call", a.key);
        }
    }

    /// §15.3 "Net effect", modelled independently: the same calls, in the same order, with the
    /// same `mutated` flags, the same verdict and the same `reinvoked`.
    #[test]
    fn reinvocation_matches_upstream_rule(s in scenario()) {
        let flat = flatten(&s);
        let engine = Engine::new(&mutating_configs(&s), EngineOptions::default());
        let mut metrics = Metrics::new();
        let mut r = replier(&s);
        let outcome = dispatch(&engine, pod_request(s.operation, &s.labels), &mut metrics, &mut r);
        let expected = model(&flat, model_object(&s));
        let got: Vec<(u8, usize, bool)> = called(&outcome, WebhookKind::Mutating)
            .iter()
            .map(|c| (c.round, c.index, c.mutated))
            .collect();
        prop_assert_eq!(&got, &expected.calls);
        // The replier saw the same sequence.
        let seen: Vec<(u8, usize)> = r.seen.iter().map(|c| (c.round, c.index)).collect();
        let expected_seen: Vec<(u8, usize)> = expected.calls.iter().map(|c| (c.0, c.1)).collect();
        prop_assert_eq!(seen, expected_seen);
        prop_assert_eq!(outcome.allowed, expected.allowed);
        prop_assert_eq!(outcome.reinvoked, expected.reinvoked);
        if expected.allowed && s.operation != Operation::Delete {
            let labels = outcome
                .object
                .as_ref()
                .and_then(|o| o.pointer("/metadata/labels"))
                .cloned();
            let mut object = model_object(&s);
            for c in &expected.calls {
                model_call(&flat[c.1], &mut object).expect("allowed chains do not stop");
            }
            // Go omits an empty label map when it encodes the object.
            let want = object.flatten().filter(|l| !l.is_empty()).map(|l| json!(l));
            let labels = labels.filter(|l| l.as_object().is_none_or(|m| !m.is_empty()));
            prop_assert_eq!(labels, want);
        }
    }

    /// Validating webhooks: one batch with every matching webhook, all of them see the final
    /// (mutated) object, and the request fails with the lowest-index failure.
    #[test]
    fn validating_fan_out(
        specs in prop::collection::vec(
            (
                any::<bool>(),
                prop::sample::select(vec![Some("Fail"), Some("Ignore"), None]),
                prop_oneof![
                    3 => Just(None),
                    1 => prop::sample::select(vec![0, 200, 403, 422, 500]).prop_map(Some),
                    1 => Just(Some(-1)),
                ],
            ),
            1..=6,
        ),
        create in any::<bool>(),
        labels in labels(),
    ) {
        // A mutating webhook replaces the labels, so the final object differs from the request's.
        let mutator = webhook("labeller.example.com", None, None);
        let mut validators = Vec::new();
        let mut script = vec![(
            "labeller.example.com".to_string(),
            ScriptedReply::patch(json!([{"op": "add", "path": "/metadata/labels", "value": {"validated": "yes"}}])),
        )];
        for (i, (matches, failure, verdict)) in specs.iter().enumerate() {
            let name = format!("v{i}.example.com");
            let mut w = webhook(&name, *failure, None);
            w.reinvocation_policy = None;
            if !matches {
                w.rules.as_mut().unwrap()[0].resources = Some(vec!["configmaps".into()]);
            }
            validators.push(w);
            let reply = match verdict {
                None => ScriptedReply::allow(),
                Some(-1) => ScriptedReply { error: Some("refused".into()), ..ScriptedReply::default() },
                Some(code) => ScriptedReply::deny(*code, &format!("v{i} says no")),
            };
            script.push((name, reply));
        }
        let engine = Engine::new(
            &[
                configuration(WebhookKind::Mutating, "mutate", vec![mutator]),
                configuration(WebhookKind::Validating, "validate", validators),
            ],
            EngineOptions::default(),
        );
        let op = if create { Operation::Create } else { Operation::Update };
        let mut metrics = Metrics::new();
        let mut r = BatchRecorder { inner: ScriptedReplier::new(script), batches: Vec::new() };
        let outcome = dispatch(&engine, pod_request(op, &labels), &mut metrics, &mut r);

        let matching: Vec<usize> = specs.iter().enumerate().filter(|(_, s)| s.0).map(|(i, _)| i).collect();
        let validating_batches: Vec<usize> = r
            .batches
            .iter()
            .filter(|b| b.0 == WebhookKind::Validating)
            .map(|b| b.1)
            .collect();
        if matching.is_empty() {
            prop_assert!(validating_batches.is_empty());
        } else {
            prop_assert_eq!(validating_batches, vec![matching.len()]);
        }
        let final_object = outcome.object.clone().expect("CREATE/UPDATE keep an object");
        prop_assert_eq!(final_object.pointer("/metadata/labels"), Some(&json!({"validated": "yes"})));
        let seen: Vec<&WebhookCall> =
            r.inner.seen.iter().filter(|c| c.phase == WebhookKind::Validating).collect();
        prop_assert_eq!(seen.len(), matching.len());
        for (j, (call, &i)) in seen.iter().zip(&matching).enumerate() {
            let expected = format!("v{i}.example.com");
            prop_assert_eq!(&*call.webhook, expected.as_str());
            prop_assert_eq!(call.index, j, "index among matching hooks");
            let review: Value = serde_json::from_slice(&call.body).unwrap();
            prop_assert_eq!(&review["request"]["object"], final_object.value());
        }

        // The expected verdict: the lowest-index failure among the matching webhooks.
        let mut expected: Option<(i32, String)> = None;
        let mut failed_open = BTreeMap::new();
        for (j, &i) in matching.iter().enumerate() {
            let (_, failure, verdict) = specs[i];
            let name = format!("v{i}.example.com");
            let err = match verdict {
                None => None,
                Some(-1) if failure == Some("Ignore") => {
                    failed_open.insert(
                        format!("failed-open.validating.webhook.admission.k8s.io/round_0_index_{j}"),
                        name.clone(),
                    );
                    None
                }
                Some(-1) => Some((
                    500,
                    format!(
                        "Internal error occurred: failed calling webhook \"{name}\": failed to call webhook: Post \"https://svc.webhooks.svc:443/hook?timeout=10s\": dial tcp svc.webhooks.svc:443: connect: connection refused"
                    ),
                )),
                Some(code) => Some((
                    code.max(400),
                    format!("admission webhook \"{name}\" denied the request: v{i} says no"),
                )),
            };
            if expected.is_none() {
                expected = err;
            }
        }
        let got = outcome.status.as_ref().map(|s| (s.code, s.message.clone()));
        prop_assert_eq!(got, expected.clone());
        prop_assert_eq!(outcome.allowed, expected.is_none());
        let got_failed_open: BTreeMap<String, String> = outcome
            .annotations
            .iter()
            .filter(|a| a.key.starts_with("failed-open.validating."))
            .map(|a| (a.key.to_string(), a.value.to_string()))
            .collect();
        prop_assert_eq!(got_failed_open, failed_open);
    }

    /// The same input, dispatched twice with fresh ids and metrics, gives the same outcome and
    /// the same metrics.
    #[test]
    fn dispatch_is_deterministic(s in scenario(), validating in 0..3usize) {
        let mut configs = mutating_configs(&s);
        let validators: Vec<Webhook> = (0..validating)
            .map(|i| {
                let mut w = webhook(&format!("check-{i}.example.com"), Some("Ignore"), None);
                w.reinvocation_policy = None;
                w
            })
            .collect();
        configs.push(configuration(WebhookKind::Validating, "checks", validators));
        let engine = Engine::new(&configs, EngineOptions::default());
        let run = || {
            let mut metrics = Metrics::new();
            let mut r = replier(&s);
            std::sync::Arc::make_mut(&mut r.replies).insert("check-1.example.com".into(), ScriptedReply { error: Some("timeout".into()), ..ScriptedReply::default() });
            let outcome = dispatch(&engine, pod_request(s.operation, &s.labels), &mut metrics, &mut r);
            (outcome, metrics.encode_text(), r.seen)
        };
        let (a, ma, sa) = run();
        let (b, mb, sb) = run();
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(a.elapsed, b.elapsed);
        prop_assert_eq!(ma, mb);
        prop_assert_eq!(sa, sb);
    }

    /// A Pod known to be defaulted (as the replay marks what it decodes) ends every chain of
    /// label patches, with its failures, denials and reinvocations, as the same Pod not known to
    /// be defaulted: the same outcome, the same reviews sent, the same metrics.
    #[test]
    fn knowing_an_object_is_defaulted_changes_no_outcome(s in scenario()) {
        let engine = Engine::new(&mutating_configs(&s), EngineOptions::default());
        let release = hookscope::KubeVersion::default();
        let schema = hookscope::schema::Schema::for_release(release);
        let id = schema.kind("", "v1", "Pod").expect("Pod");
        let (mut defaulted, _) =
            hookscope::schema::codec::normalize(schema, id, &pod(&s.labels)).expect("decodes");
        hookscope::defaulting::default_object("", "v1", "Pod", &mut defaulted, release);
        let (defaulted, _) =
            hookscope::schema::codec::normalize(schema, id, &defaulted).expect("decodes");
        let run = |known: bool| {
            let mut attrs = pod_request(s.operation, &s.labels);
            let object = |o: hookscope::engine::Object| if known { o.known_defaulted() } else { o };
            if attrs.object.is_some() {
                attrs.object = Some(Arc::new(object(defaulted.clone().into())));
            }
            let mut metrics = Metrics::new();
            let mut r = replier(&s);
            let outcome = dispatch(&engine, attrs, &mut metrics, &mut r);
            (serde_json::to_value(&outcome).expect("an outcome"), metrics.encode_text(), r.seen)
        };
        let (known, unknown) = (run(true), run(false));
        prop_assert_eq!(known.0, unknown.0);
        prop_assert_eq!(known.1, unknown.1);
        prop_assert_eq!(known.2, unknown.2);
    }

    /// Per dispatch, `webhook_request_total` and the duration histogram grow by the number of
    /// attempted calls; fail-open and rejection counters match the outcome.
    #[test]
    fn metrics_count_attempted_calls(s in scenario(), repeats in 1..3usize) {
        let engine = Engine::new(&mutating_configs(&s), EngineOptions::default());
        let mut metrics = Metrics::new();
        for _ in 0..repeats {
            let before = request_total(&metrics);
            let fail_open_before = sum_of(&metrics, "apiserver_admission_webhook_fail_open_count", None);
            let rejections_before = sum_of(&metrics, "apiserver_admission_webhook_rejection_count", None);
            let durations_before = sum_of(&metrics, "apiserver_admission_webhook_admission_duration_seconds_count", None);
            let mut r = replier(&s);
            let outcome = dispatch(&engine, pod_request(s.operation, &s.labels), &mut metrics, &mut r);
            let attempted = called(&outcome, WebhookKind::Mutating);
            prop_assert_eq!(attempted.len(), r.seen.len());
            prop_assert_eq!(request_total(&metrics) - before, attempted.len() as f64);
            prop_assert_eq!(
                sum_of(&metrics, "apiserver_admission_webhook_admission_duration_seconds_count", None) - durations_before,
                attempted.len() as f64
            );
            let failed_open = outcome.annotations.iter().filter(|a| a.key.starts_with("failed-open.")).count();
            prop_assert_eq!(
                sum_of(&metrics, "apiserver_admission_webhook_fail_open_count", None) - fail_open_before,
                failed_open as f64
            );
            // The request is rejected by at most one webhook call: the last one attempted.
            let rejections = sum_of(&metrics, "apiserver_admission_webhook_rejection_count", None) - rejections_before;
            prop_assert_eq!(rejections, if outcome.allowed { 0.0 } else { 1.0 });
            // The trace announces each request_total increment.
            let traced = outcome
                .steps()
                .iter()
                .filter(|t| matches!(&t.kind, StepKind::Metric { name, .. } if name == "apiserver_admission_webhook_request_total"))
                .count();
            prop_assert_eq!(traced, attempted.len());
        }
        // Accumulated over the repeats, per webhook.
        let mut r = replier(&s);
        let mut scratch = Metrics::new();
        let once = dispatch(&engine, pod_request(s.operation, &s.labels), &mut scratch, &mut r);
        for h in flatten(&s) {
            let n = called(&once, WebhookKind::Mutating).iter().filter(|c| *c.webhook == *h.name).count();
            prop_assert_eq!(
                sum_of(&metrics, "apiserver_admission_webhook_request_total", Some(("name", &h.name))),
                (n * repeats) as f64
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The model itself, on upstream's reinvocation integration cases
// ---------------------------------------------------------------------------------------------

fn flat(name: &str, if_needed: bool, action: Action) -> FlatHook {
    FlatHook {
        position: 0,
        name: name.into(),
        configuration: "c".into(),
        if_needed,
        ignore: false,
        action,
    }
}

fn positioned(mut hooks: Vec<FlatHook>) -> Vec<FlatHook> {
    for (i, h) in hooks.iter_mut().enumerate() {
        h.position = i;
    }
    hooks
}

#[test]
fn model_reinvokes_only_webhooks_followed_by_a_change() {
    let add = |k| Action::Patch(PatchOp::Add(k, "a"));
    // A (IfNeeded) changes, B (Never) changes after it: A is reinvoked (and no longer changes).
    let hooks = positioned(vec![
        flat("a", true, add("app")),
        flat("b", false, add("team")),
    ]);
    let r = model(&hooks, Some(Some(BTreeMap::new())));
    assert_eq!(r.calls, vec![(0, 0, true), (0, 1, true), (1, 0, false)]);
    assert!(r.reinvoked && r.allowed);
    // The last changer is not reinvoked for its own change.
    let hooks = positioned(vec![
        flat("a", true, Action::Allow),
        flat("b", true, add("team")),
    ]);
    let r = model(&hooks, Some(Some(BTreeMap::new())));
    assert_eq!(r.calls, vec![(0, 0, false), (0, 1, true), (1, 0, false)]);
    // A round-1 change by an earlier webhook pulls in a later IfNeeded one.
    let hooks = positioned(vec![
        flat("a", true, Action::Patch(PatchOp::Replace("app", "b"))),
        flat("b", false, add("app")),
        flat("c", true, Action::Allow),
    ]);
    let r = model(&hooks, Some(Some(BTreeMap::new())));
    assert_eq!(
        r.calls,
        vec![
            (0, 0, true),
            (0, 1, true),
            (0, 2, false),
            (1, 0, true),
            (1, 2, false)
        ]
    );
}
