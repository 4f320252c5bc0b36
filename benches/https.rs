//! HTTPS benchmarks: `cargo bench --bench https`.
//!
//! One matching webhook called over real HTTPS (rustls, kept-alive connections), the webhook
//! server (`hookscope::webhook_server`) in the same process and on the same current-thread tokio
//! runtime as the client: one core does the engine, the client and the server.
//!
//! The shapes are upstream's `BenchmarkValidate/match_&_allow` and
//! `BenchmarkAdmit/match_&_add_label` (`webhook/testing/testcase.go`): one webhook in
//! `test-webhooks` matching everything (rules `*`, empty selectors, nothing else set), reached
//! through the service `webhook-test.default` port 443 with the test CA as caBundle, AdmissionReview
//! v1beta1, HTTP/1.1 (upstream negotiates HTTP/2 only for URL webhooks on loopback); an UPDATE of
//! pod `my-pod` in namespace `webhook-test` (labels `runlevel: 0`) with `pod.name` as its one label,
//! user `webhook-test`. The server answers `/allow` with upstream's allow (one audit annotation)
//! and `/addLabel` with upstream's patch (`add /metadata/labels/added: test`).
//!
//! - `validate/match_and_allow`, `admit/match_and_add_label`: the upstream shapes, per dispatch.
//! - `…_h2`: the same webhook as a URL to 127.0.0.1, so HTTP/2.
//! - `parts/engine_*`: the engine alone with the same reply scripted (no IO).
//! - `parts/call_*`: the HTTPS replier and the server alone, posting the review the engine built.

use std::collections::BTreeMap;

use divan::{Bencher, black_box};
use hookscope::api::{
    GroupVersionKind, GroupVersionResource, LabelSelector, Operation, RuleWithOperations,
    ServiceReference, UserInfo, Webhook, WebhookClientConfig, WebhookConfiguration, WebhookKind,
};
use hookscope::engine::call::{Replier, WebhookCall};
use hookscope::engine::{
    Attributes, Engine, EngineOptions, Namespaces, Phases, RequestContext, SequentialIds,
};
use hookscope::metrics::Metrics;
use hookscope::script::{ScriptedReplier, ScriptedReply};
use hookscope::transport::{HttpsOptions, HttpsReplier};
use hookscope::webhook_server::{Answer, Behaviour, Behaviours, Pki, ServerOptions, WebhookServer};
use serde_json::json;
use tokio::runtime::Runtime;

fn main() {
    divan::main();
}

const SERVICE_HOST: &str = "webhook-test.default.svc";
const NAMESPACE: &str = "webhook-test";

/// Upstream's shape of webhook; `url` set: a URL webhook, else the test service.
fn webhook(name: &str, path: &str, ca: &[u8], url: Option<String>) -> Webhook {
    let all = || Some(vec!["*".to_string()]);
    Webhook {
        name: name.into(),
        client_config: WebhookClientConfig {
            service: url.is_none().then(|| ServiceReference {
                namespace: "default".into(),
                name: "webhook-test".into(),
                path: Some(path.into()),
                port: None,
            }),
            url,
            ca_bundle: Some(ca.to_vec()),
        },
        rules: Some(vec![RuleWithOperations {
            operations: all(),
            api_groups: all(),
            api_versions: all(),
            resources: Some(vec!["*/*".into()]),
            scope: None,
        }]),
        failure_policy: None,
        match_policy: None,
        namespace_selector: Some(LabelSelector::default()),
        object_selector: Some(LabelSelector::default()),
        side_effects: None,
        timeout_seconds: None,
        admission_review_versions: Some(vec!["v1beta1".into()]),
        reinvocation_policy: None,
        match_conditions: None,
    }
}

/// Upstream's `NewAttribute(ns, nil, false)`.
fn attributes() -> Attributes {
    let meta = |labels: bool| {
        let mut m = json!({"name": "my-pod", "namespace": NAMESPACE});
        if labels {
            m["labels"] = json!({"pod.name": "my-pod"});
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": m})
    };
    Attributes {
        operation: Operation::Update,
        kind: GroupVersionKind::new("", "v1", "Pod").into(),
        resource: GroupVersionResource::new("", "v1", "pod").into(),
        sub_resource: String::new(),
        namespace: NAMESPACE.into(),
        name: "my-pod".into(),
        object: Some(std::sync::Arc::new(meta(true).into())),
        old_object: Some(std::sync::Arc::new(meta(false).into())),
        dry_run: false,
        options: Some(json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}).into()),
        user_info: std::sync::Arc::new(UserInfo {
            username: "webhook-test".into(),
            uid: "webhook-test".into(),
            ..Default::default()
        }),
    }
}

/// Which upstream benchmark.
#[derive(Clone, Copy)]
enum Shape {
    /// `BenchmarkValidate/match_&_allow`.
    ValidateAllow,
    /// `BenchmarkAdmit/match_&_add_label`.
    AdmitAddLabel,
}

impl Shape {
    fn kind(self) -> WebhookKind {
        match self {
            Shape::ValidateAllow => WebhookKind::Validating,
            Shape::AdmitAddLabel => WebhookKind::Mutating,
        }
    }

    fn phases(self) -> Phases {
        match self {
            Shape::ValidateAllow => Phases::ValidatingOnly,
            Shape::AdmitAddLabel => Phases::MutatingOnly,
        }
    }

    fn hook(self) -> (&'static str, &'static str) {
        match self {
            Shape::ValidateAllow => ("allow.example.com", "/allow"),
            Shape::AdmitAddLabel => ("addLabel", "/addLabel"),
        }
    }

    /// The reply upstream's test server gives, scripted.
    fn scripted(self) -> ScriptedReply {
        match self {
            Shape::ValidateAllow => ScriptedReply {
                audit_annotations: BTreeMap::from([("key1".into(), "value1".into())]),
                ..ScriptedReply::allow()
            },
            Shape::AdmitAddLabel => ScriptedReply::patch(
                json!([{"op": "add", "path": "/metadata/labels/added", "value": "test"}]),
            ),
        }
    }
}

/// Upstream's test-server answers for the two paths.
fn behaviours() -> Behaviours {
    Behaviours::new()
        .route(
            "/allow",
            Behaviour::respond(Answer::allow().with_audit_annotation("key1", "value1")),
        )
        .route("/addLabel", Behaviour::add_label("added", "test"))
}

/// Everything one benchmark needs; the server runs on `rt` with the client.
struct Rig {
    rt: Runtime,
    server: WebhookServer,
    engine: Engine,
    namespaces: Namespaces,
    attrs: Attributes,
    metrics: Metrics,
    ids: SequentialIds,
    shape: Shape,
}

impl Rig {
    fn new(shape: Shape, http2: bool) -> Rig {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let pki = Pki::mint(&[SERVICE_HOST]).expect("pki");
        let server = rt
            .block_on(WebhookServer::start(
                &pki,
                behaviours(),
                ServerOptions::default(),
            ))
            .expect("server");
        let (name, path) = shape.hook();
        let url = http2.then(|| server.url(path));
        let configuration = WebhookConfiguration {
            kind: shape.kind(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            name: "test-webhooks".into(),
            metadata: json!({"name": "test-webhooks"}),
            webhooks: vec![webhook(name, path, pki.ca_pem().as_bytes(), url)],
        };
        let engine = Engine::new(&[configuration], EngineOptions::default());
        let mut namespaces = Namespaces::default();
        namespaces.insert(NAMESPACE, BTreeMap::from([("runlevel".into(), "0".into())]));
        Rig {
            rt,
            server,
            engine,
            namespaces,
            attrs: attributes(),
            metrics: Metrics::new(),
            ids: SequentialIds::default(),
            shape,
        }
    }

    /// The HTTPS replier, dialing the test service at the server.
    fn replier(&self) -> HttpsReplier {
        HttpsReplier::new(HttpsOptions {
            resolve: [(format!("{SERVICE_HOST}:443"), self.server.addr())].into(),
            ..HttpsOptions::default()
        })
    }

    /// One dispatch of the request; checks the verdict.
    fn dispatch<R: Replier + Send>(&mut self, replier: &mut R) -> bool {
        let ctx = RequestContext {
            namespaces: &self.namespaces,
            ids: &mut self.ids,
            metrics: &mut self.metrics,
            deadline: None,
            phases: self.shape.phases(),
        };
        let outcome = self
            .rt
            .block_on(self.engine.dispatch(self.attrs.clone(), ctx, replier));
        assert!(outcome.allowed, "{:?}", outcome.status);
        if let Shape::AdmitAddLabel = self.shape {
            assert_eq!(
                outcome.object.as_ref().expect("object")["metadata"]["labels"]["added"],
                "test"
            );
        }
        outcome.allowed
    }

    /// The call the engine makes, captured with a scripted replier.
    fn call(&mut self) -> WebhookCall {
        let mut scripted =
            ScriptedReplier::new([(self.shape.hook().0.into(), self.shape.scripted())]);
        self.dispatch(&mut scripted);
        scripted.seen.pop().expect("one call")
    }
}

fn bench_dispatch(bencher: Bencher, shape: Shape, http2: bool) {
    let mut rig = Rig::new(shape, http2);
    let mut replier = rig.replier();
    rig.dispatch(&mut replier);
    bencher.bench_local(|| black_box(rig.dispatch(&mut replier)));
    assert_eq!(rig.server.connections(), 1, "keep-alive: one connection");
    assert_eq!(rig.server.http2_connections(), u64::from(http2));
}

fn bench_engine(bencher: Bencher, shape: Shape) {
    let mut rig = Rig::new(shape, false);
    let mut scripted = ScriptedReplier::new([(shape.hook().0.into(), shape.scripted())]);
    bencher.bench_local(|| {
        scripted.seen.clear();
        black_box(rig.dispatch(&mut scripted))
    });
}

fn bench_call(bencher: Bencher, shape: Shape, http2: bool) {
    let mut rig = Rig::new(shape, http2);
    let call = rig.call();
    let replier = rig.replier();
    let rt = &rig.rt;
    rt.block_on(replier.call(&call));
    bencher.bench_local(|| black_box(rt.block_on(replier.call(black_box(&call)))));
    assert_eq!(rig.server.connections(), 1, "keep-alive: one connection");
}

mod validate {
    use super::*;

    #[divan::bench]
    fn match_and_allow(bencher: Bencher) {
        bench_dispatch(bencher, Shape::ValidateAllow, false);
    }

    #[divan::bench]
    fn match_and_allow_h2(bencher: Bencher) {
        bench_dispatch(bencher, Shape::ValidateAllow, true);
    }
}

mod admit {
    use super::*;

    #[divan::bench]
    fn match_and_add_label(bencher: Bencher) {
        bench_dispatch(bencher, Shape::AdmitAddLabel, false);
    }

    #[divan::bench]
    fn match_and_add_label_h2(bencher: Bencher) {
        bench_dispatch(bencher, Shape::AdmitAddLabel, true);
    }
}

mod parts {
    use super::*;

    #[divan::bench]
    fn engine_allow(bencher: Bencher) {
        bench_engine(bencher, Shape::ValidateAllow);
    }

    #[divan::bench]
    fn engine_add_label(bencher: Bencher) {
        bench_engine(bencher, Shape::AdmitAddLabel);
    }

    #[divan::bench]
    fn call_allow(bencher: Bencher) {
        bench_call(bencher, Shape::ValidateAllow, false);
    }

    #[divan::bench]
    fn call_allow_h2(bencher: Bencher) {
        bench_call(bencher, Shape::ValidateAllow, true);
    }

    #[divan::bench]
    fn call_add_label(bencher: Bencher) {
        bench_call(bencher, Shape::AdmitAddLabel, false);
    }
}
