//! Engine benchmarks: `cargo bench --bench engine`.
//!
//! - `should_call_hook/*`: upstream's `BenchmarkShouldCallHookWith{ComplexSelector,ComplexRule,
//!   ComplexSelectorAndRule}` shapes rebuilt on our engine (all three leave at the namespace
//!   selector, as upstream's do).
//! - `dispatch/five_mutating_three_validating`: a full dispatch of 5 mutating + 3 validating
//!   webhooks with scripted replies on a ~4 KB Pod (two of them patch it), the same request each
//!   time (as the console dispatches again after an edit); `…_new_object`: the same, each
//!   dispatch given an object not dispatched before (as a replay of manifests); `…_no_patches`:
//!   the same calls without patches. The Pod is given as written (not decoded, not defaulted);
//!   `…_as_sent`: the patched chain given the Pod as the apiserver sends webhooks (decoded into
//!   its Go type and defaulted, as hookscope's readers hand over manifests and captures).
//! - `jsonpatch/*`: decoding and applying webhook patches to that Pod.
//! - `policies/three_policies_three_validations`: a full dispatch of that Pod through 3
//!   ValidatingAdmissionPolicies (one binding each) of 3 validations each, no webhooks
//!   (expressions compiled once, when the engine is built).
//! - `policies/mutating_apply_configuration_and_json_patch`: that Pod through one
//!   MutatingAdmissionPolicy with an ApplyConfiguration and a JSONPatch mutation (labels and an
//!   annotation), both rounds (the policy is IfNeeded and changes the object).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use divan::{Bencher, black_box};
use hookscope::api::{
    GroupVersionKind, GroupVersionResource, LabelSelector, Operation, RuleWithOperations, UserInfo,
    Webhook, WebhookClientConfig, WebhookConfiguration, WebhookKind,
};
use hookscope::engine::{
    Attributes, Engine, EngineOptions, Namespaces, Object, Phases, Replier, Reply, RequestContext,
    SequentialIds, WebhookCall,
};
use hookscope::metrics::Metrics;
use hookscope::script::ScriptedReply;
use serde_json::{Value, json};

#[path = "../src/allocator.rs"]
mod allocator;

// The allocator of the `hookscope` binary, so the figures are the command's (as in the replay
// bench); `docs/benchmarks.md` also gives the dispatch figures with the system allocator.
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() {
    divan::main();
}

fn strings(v: &[&str]) -> Option<Vec<String>> {
    Some(v.iter().map(|s| s.to_string()).collect())
}

fn webhook(name: &str) -> Webhook {
    Webhook {
        name: name.into(),
        client_config: WebhookClientConfig {
            url: Some(format!("https://127.0.0.1:8443/{name}")),
            ..Default::default()
        },
        rules: Some(vec![RuleWithOperations {
            operations: strings(&["*"]),
            api_groups: strings(&["*"]),
            api_versions: strings(&["*"]),
            resources: strings(&["*/*"]),
            scope: None,
        }]),
        failure_policy: Some("Fail".into()),
        match_policy: Some("Equivalent".into()),
        namespace_selector: Some(LabelSelector::default()),
        object_selector: Some(LabelSelector::default()),
        side_effects: Some("None".into()),
        timeout_seconds: Some(10),
        admission_review_versions: strings(&["v1"]),
        reinvocation_policy: None,
        match_conditions: None,
    }
}

fn configuration(kind: WebhookKind, name: &str, webhooks: Vec<Webhook>) -> WebhookConfiguration {
    WebhookConfiguration {
        kind,
        api_version: "admissionregistration.k8s.io/v1".into(),
        name: name.into(),
        metadata: json!({"name": name}),
        webhooks,
    }
}

fn hundred_labels() -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            (0..100)
                .map(|i| (format!("key-{i}"), format!("value-{i}")))
                .collect(),
        ),
        match_expressions: None,
    }
}

fn hundred_rules() -> Vec<RuleWithOperations> {
    (0..100)
        .map(|i| RuleWithOperations {
            operations: strings(&["*"]),
            api_groups: Some(vec![format!("app-{i}")]),
            api_versions: Some(vec![format!("v{i}")]),
            resources: Some(vec![format!("resource{i}"), format!("resource{i}/scale")]),
            scope: None,
        })
        .collect()
}

fn scale_request() -> Attributes {
    Attributes {
        operation: Operation::Create,
        kind: GroupVersionKind::new("autoscaling", "v1", "Scale").into(),
        resource: GroupVersionResource::new("apps", "v1", "deployments").into(),
        sub_resource: "scale".into(),
        namespace: "ns".into(),
        name: "name".into(),
        object: Some(Arc::new(
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "name", "namespace": "ns"}}).into(),
        )),
        old_object: None,
        dry_run: false,
        options: None,
        user_info: Default::default(),
    }
}

fn ns_namespaces() -> Namespaces {
    let mut n = Namespaces::default();
    n.insert(
        "ns",
        BTreeMap::from([("ns".to_string(), "ns1".to_string())]),
    );
    n
}

fn bench_should_call_hook(
    bencher: Bencher,
    selector: LabelSelector,
    rules: Option<Vec<RuleWithOperations>>,
) {
    let mut w = webhook("shape.example.com");
    w.namespace_selector = Some(selector);
    if let Some(r) = rules {
        w.rules = Some(r);
    }
    let engine = Engine::new(
        &[configuration(WebhookKind::Validating, "cfg", vec![w])],
        EngineOptions::default(),
    );
    let hook = &engine.validating_hooks()[0];
    let attrs = scale_request();
    let namespaces = ns_namespaces();
    bencher.bench_local(|| {
        black_box(engine.should_call_hook(black_box(hook), black_box(&attrs), &namespaces))
    });
}

/// ShouldCallHook takes tens of nanoseconds: 1000 calls per sample. (Left to tune itself, divan
/// stops growing the sample at the first slow one, and on a busy machine that can leave it timing
/// single calls, which measures the timer more than the call.)
mod should_call_hook {
    use super::*;

    #[divan::bench(sample_size = 1000)]
    fn complex_selector(bencher: Bencher) {
        bench_should_call_hook(bencher, hundred_labels(), None);
    }

    #[divan::bench(sample_size = 1000)]
    fn complex_rule(bencher: Bencher) {
        let ab = LabelSelector {
            match_labels: Some(BTreeMap::from([("a".into(), "b".into())])),
            match_expressions: None,
        };
        bench_should_call_hook(bencher, ab, Some(hundred_rules()));
    }

    #[divan::bench(sample_size = 1000)]
    fn complex_selector_and_rule(bencher: Bencher) {
        bench_should_call_hook(bencher, hundred_labels(), Some(hundred_rules()));
    }
}

/// A Pod of about 4 KB as a manifest would have it: not decoded into its Go type (no `status`,
/// no empty members Go writes) and not defaulted.
fn pod() -> Value {
    let containers: Vec<Value> = (0..6)
        .map(|i| {
            json!({
                "name": format!("container-{i}"),
                "image": format!("registry.example.com/team/app-{i}:v1.2.{i}"),
                "args": ["--listen=:8080", "--log-level=info", "--metrics-addr=:9090"],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "MODE", "value": "production"}],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}, {"containerPort": 9090, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
            })
        })
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d9f8", "namespace": "shop", "creationTimestamp": null,
                     "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "7d9f8"},
                     "annotations": {"example.com/owner": "team-web"}},
        "spec": {"containers": containers, "volumes": [{"name": "config", "configMap": {"name": "web-config"}}],
                 "serviceAccountName": "web", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}
    })
}

/// [`pod`] as the apiserver sends it to webhooks: decoded into its Go type and defaulted.
fn pod_as_sent() -> Value {
    let release = hookscope::KubeVersion::default();
    let schema = hookscope::schema::Schema::for_release(release);
    let id = schema.kind("", "v1", "Pod").expect("Pod");
    let (mut decoded, _) =
        hookscope::schema::codec::normalize(schema, id, &pod()).expect("decodes");
    hookscope::defaulting::default_object("", "v1", "Pod", &mut decoded, release);
    hookscope::schema::codec::normalize(schema, id, &decoded)
        .expect("decodes")
        .0
}

fn pod_request() -> Attributes {
    request_for(pod())
}

/// A request for [`pod_as_sent`], which is known to be defaulted (as a replay's front ends know
/// of what they decoded).
fn as_sent_request(pod: Value) -> Attributes {
    let mut request = request_for(pod);
    request.object = request
        .object
        .map(|o| Arc::new(Arc::unwrap_or_clone(o).known_defaulted()));
    request
}

fn request_for(pod: Value) -> Attributes {
    Attributes {
        operation: Operation::Create,
        kind: GroupVersionKind::new("", "v1", "Pod").into(),
        resource: GroupVersionResource::new("", "v1", "pods").into(),
        sub_resource: String::new(),
        namespace: "shop".into(),
        name: "web-7d9f8".into(),
        object: Some(Arc::new(pod.into())),
        old_object: None,
        dry_run: false,
        options: Some(json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}).into()),
        user_info: std::sync::Arc::new(UserInfo {
            username: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }),
    }
}

/// Answers from scripts as `ScriptedReplier` does (the same `ScriptedReply::reply_to`), without
/// keeping a copy of every call: that history is for tests, and copying each ~5 KB body into it
/// is the benchmark's cost, not the engine's.
struct Scripted(BTreeMap<String, ScriptedReply>);

impl Replier for Scripted {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let allow = ScriptedReply::allow();
        let replies = calls
            .iter()
            .map(|c| self.0.get(&*c.webhook).unwrap_or(&allow).reply_to(c))
            .collect();
        std::future::ready(replies)
    }
}

/// Which request object each dispatch of a benchmark is given.
#[derive(Clone, Copy)]
enum Objects {
    /// The same one every time, as the console dispatches its requests again after each edit:
    /// what is kept with the object (Go's encoding of it) is made once.
    Same,
    /// A new one each time (made outside the timing), as a replay of manifests dispatches each
    /// object once.
    New,
    /// The same one every time, given as the apiserver sends it ([`pod_as_sent`]).
    AsSent,
    /// A new one each time, given as the apiserver sends it.
    NewAsSent,
    /// A new one each time, given as the text of the apiserver's review (a capture's object).
    NewCaptured,
}

/// Five mutating and three validating webhooks matching everything, answered by `replies`
/// (webhooks without one allow).
fn bench_dispatch(bencher: Bencher, replies: BTreeMap<String, ScriptedReply>, objects: Objects) {
    let mutating: Vec<Webhook> = (0..5)
        .map(|i| webhook(&format!("m{i}.example.com")))
        .collect();
    let validating: Vec<Webhook> = (0..3)
        .map(|i| webhook(&format!("v{i}.example.com")))
        .collect();
    let engine = Engine::new(
        &[
            configuration(WebhookKind::Mutating, "mutate", mutating),
            configuration(WebhookKind::Validating, "validate", validating),
        ],
        EngineOptions::default(),
    );
    let mut replier = Scripted(replies);
    match objects {
        Objects::Same | Objects::AsSent => {
            let request = match objects {
                Objects::AsSent => as_sent_request(pod_as_sent()),
                _ => pod_request(),
            };
            bencher.bench_local(|| black_box(dispatch_once(&engine, &request, &mut replier)));
        }
        Objects::New | Objects::NewAsSent | Objects::NewCaptured => {
            let sent =
                matches!(objects, Objects::NewAsSent | Objects::NewCaptured).then(pod_as_sent);
            let text = matches!(objects, Objects::NewCaptured)
                .then(|| serde_json::to_string(&pod_as_sent()).expect("JSON"));
            bencher
                .with_inputs(|| match (&text, &sent) {
                    (Some(text), _) => {
                        let mut request = request_for(Value::Null);
                        request.object = Some(Arc::new(Object::from_checked_json(
                            text.clone().into_boxed_str(),
                        )));
                        request
                    }
                    (None, Some(pod)) => as_sent_request(pod.clone()),
                    (None, None) => pod_request(),
                })
                .bench_local_refs(|request| {
                    black_box(dispatch_once(&engine, request, &mut replier))
                })
        }
    }
}

/// One dispatch of `request` with fresh metrics and ids, as a replay makes it.
fn dispatch_once(
    engine: &Engine,
    request: &Attributes,
    replier: &mut Scripted,
) -> hookscope::engine::Outcome {
    let namespaces = Namespaces::default();
    let mut metrics = Metrics::new();
    let mut ids = SequentialIds::default();
    let ctx = RequestContext {
        namespaces: &namespaces,
        ids: &mut ids,
        metrics: &mut metrics,
        deadline: Some(Duration::from_secs(60)),
        phases: Phases::All,
    };
    engine.dispatch_blocking(request.clone(), ctx, replier)
}

mod dispatch {
    use super::*;

    #[divan::bench]
    fn five_mutating_three_validating(bencher: Bencher) {
        bench_dispatch(bencher, two_patches(), Objects::Same);
    }

    /// The same chain, each dispatch given an object not dispatched before.
    #[divan::bench]
    fn five_mutating_three_validating_new_object(bencher: Bencher) {
        bench_dispatch(bencher, two_patches(), Objects::New);
    }

    /// The same chain given the Pod as the apiserver sends it to webhooks.
    #[divan::bench]
    fn five_mutating_three_validating_as_sent(bencher: Bencher) {
        bench_dispatch(bencher, two_patches(), Objects::AsSent);
    }

    /// The same chain given a new Pod as the apiserver sends it each time: nothing kept with
    /// the object (its encoding, whether it is normal) is made before.
    #[divan::bench]
    fn five_mutating_three_validating_as_sent_new_object(bencher: Bencher) {
        bench_dispatch(bencher, two_patches(), Objects::NewAsSent);
    }

    /// The same chain given a new Pod each time as a captured review carries it: its text, sent
    /// as it stands.
    #[divan::bench]
    fn five_mutating_three_validating_captured_new_object(bencher: Bencher) {
        bench_dispatch(bencher, two_patches(), Objects::NewCaptured);
    }

    /// The replies of the patched chain: a label from the first webhook, a sidecar from the
    /// second.
    fn two_patches() -> BTreeMap<String, ScriptedReply> {
        let mut replies = BTreeMap::new();
        replies.insert(
            "m0.example.com".to_string(),
            ScriptedReply::patch(
                json!([{"op": "add", "path": "/metadata/labels/injected", "value": "yes"}]),
            ),
        );
        replies.insert(
            "m1.example.com".to_string(),
            ScriptedReply::patch(json!([{"op": "add", "path": "/spec/containers/-", "value": {"name": "sidecar", "image": "proxy:1"}}])),
        );
        replies
    }

    /// The same eight calls, all allowing without a patch: the per-call cost on its own.
    #[divan::bench]
    fn five_mutating_three_validating_no_patches(bencher: Bencher) {
        bench_dispatch(bencher, BTreeMap::new(), Objects::Same);
    }
}

mod jsonpatch {
    use super::*;

    #[divan::bench]
    fn decode_and_apply_sidecar(bencher: Bencher) {
        let doc = pod();
        let patch = br#"[{"op":"add","path":"/spec/containers/-","value":{"name":"sidecar","image":"proxy:1"}},{"op":"add","path":"/metadata/labels/injected","value":"yes"}]"#;
        bencher.bench_local(|| {
            let p = hookscope::jsonpatch::decode(black_box(patch)).expect("valid patch");
            black_box(p.apply_to_value(black_box(&doc)).expect("applies"))
        });
    }
}

/// Three ValidatingAdmissionPolicies of three validations each over Pods, with their bindings.
const POLICIES: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: images}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]}
  validations:
    - expression: "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))"
    - expression: "object.spec.containers.all(c, has(c.resources.limits))"
    - expression: "!has(object.spec.hostNetwork) || !object.spec.hostNetwork"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: labels}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]}
  validations:
    - expression: "'app' in object.metadata.labels"
    - expression: "has(object.metadata.labels.tier)"
    - expression: "object.metadata.name.size() < 64"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: placement}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]}
  validations:
    - expression: "!has(object.spec.hostPID)"
    - expression: "object.spec.containers.size() < 10"
    - expression: "request.namespace != 'kube-system'"
"#;

mod policies {
    use super::*;
    use hookscope::config::PolicyObject;

    #[divan::bench]
    fn three_policies_three_validations(bencher: Bencher) {
        let mut policies = Vec::new();
        let mut bindings = Vec::new();
        for loaded in hookscope::config::parse_policy_documents(POLICIES, "bench.yaml") {
            let mut loaded = loaded.expect("bench policy loads");
            loaded.apply_defaults();
            if let PolicyObject::Policy(p) = loaded.object {
                let binding = format!(
                    "{{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicyBinding, metadata: {{name: {0}}}, spec: {{policyName: {0}, validationActions: [Deny]}}}}",
                    p.name
                );
                let mut b = hookscope::config::parse_policy_documents(&binding, "bench.yaml")
                    .remove(0)
                    .expect("bench binding loads");
                b.apply_defaults();
                if let PolicyObject::Binding(b) = b.object {
                    bindings.push(b);
                }
                policies.push(p);
            }
        }
        assert_eq!((policies.len(), bindings.len()), (3, 3));
        let engine = Engine::new(&[], EngineOptions::default()).with_policies(&policies, &bindings);
        let mut replier = Scripted(BTreeMap::new());
        let request = pod_request();
        let check = dispatch_once(&engine, &request, &mut replier);
        assert!(check.allowed, "{:?}", check.status);
        assert_eq!(check.calls.len(), 3);
        bencher.bench_local(|| black_box(dispatch_once(&engine, &request, &mut replier)));
    }

    /// One MutatingAdmissionPolicy with two mutations over Pods, bound everywhere (a map literal
    /// holds one value type: `string()` types the label read from the untyped object, as the
    /// apiserver requires).
    const MUTATING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: owner}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]}
  reinvocationPolicy: IfNeeded
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'owner': 'platform', 'app': string(object.metadata.labels.app)}}}"
  - patchType: JSONPatch
    jsonPatch:
      expression: "[JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/seen'), value: 'yes'}]"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: owner}
spec: {policyName: owner}
"#;

    #[divan::bench]
    fn mutating_apply_configuration_and_json_patch(bencher: Bencher) {
        let mut set = hookscope::config::policy::PolicySet::default();
        for loaded in hookscope::config::parse_policy_documents(MUTATING, "bench.yaml") {
            let mut loaded = loaded.expect("bench policy loads");
            loaded.apply_defaults();
            set.insert(loaded.object);
        }
        let engine = Engine::new(&[], EngineOptions::default())
            .with_mutating_policies(&set.mutating, &set.mutating_bindings);
        let mut replier = Scripted(BTreeMap::new());
        let request = pod_request();
        let check = dispatch_once(&engine, &request, &mut replier);
        assert!(check.allowed, "{:?}", check.status);
        assert!(check.calls.iter().any(|c| c.mutated), "{:?}", check.calls);
        bencher.bench_local(|| black_box(dispatch_once(&engine, &request, &mut replier)));
    }
}
