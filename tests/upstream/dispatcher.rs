//! Dispatcher-level upstream tables: the real engine, its calls sent over HTTPS to a webhook
//! server on 127.0.0.1 that behaves as upstream's test servers do (§1 of the semantics
//! reference).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use hookscope::api::{
    GroupResource, GroupVersionKind, GroupVersionResource, Operation, WebhookConfiguration,
    WebhookKind,
};
use hookscope::engine::{
    Attributes, AuditLevel, Engine, EngineOptions, Namespaces, Outcome, Phases, Replier, Reply,
    ReplyOutcome, RequestContext, SequentialIds, StepKind, WebhookCall,
};
use hookscope::metrics::Metrics;
use hookscope::transport::{HttpsOptions, HttpsReplier, WebhookAuth};
use serde_json::{Value, json};

use super::{Check, Report, ServerRef, cases, check_metric_line, configuration, labels, s};
use crate::common::{self, Handler, ServerOptions, TestPki, WebhookServer};

/// One webhook server and the HTTPS replier that reaches it, shared by the cases of one test,
/// with the runtime the replier runs on.
pub struct Upstream {
    pub server: WebhookServer,
    pub server_ref: ServerRef,
    pub replier: HttpsReplier,
    runtime: tokio::runtime::Runtime,
}

impl Upstream {
    /// Upstream's unit-test server (`webhook_server.go`): it requires and verifies a client
    /// certificate, which the replier presents for every target, as upstream's test
    /// AuthenticationInfoResolver does.
    pub fn unit_server() -> Upstream {
        let pki = TestPki::new();
        let server = WebhookServer::start_with(
            &pki,
            common::upstream_handler(),
            ServerOptions {
                require_client_cert: true,
                ..ServerOptions::default()
            },
        );
        let auth = client_cert_for_every_target(&pki);
        Upstream::with(&pki, server, auth, &[])
    }

    /// A server with `handler` and no client authentication (the integration and e2e servers);
    /// `services` (`<svc>.<ns>.svc:<port>`) are resolved to it besides upstream's
    /// `webhook-test.default.svc:443`.
    pub fn start(pki: TestPki, handler: Handler, services: &[&str]) -> Upstream {
        let server = WebhookServer::start(&pki, handler);
        Upstream::with(&pki, server, WebhookAuth::empty(), services)
    }

    fn with(
        pki: &TestPki,
        server: WebhookServer,
        auth: WebhookAuth,
        services: &[&str],
    ) -> Upstream {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let server_ref = ServerRef {
            host_port: server.addr().to_string(),
            ca_pem: pki.ca_pem().as_bytes().to_vec(),
        };
        let replier = HttpsReplier::new(HttpsOptions {
            auth,
            resolve: std::iter::once(format!("{}:443", common::SERVICE_HOST))
                .chain(services.iter().map(|s| s.to_string()))
                .map(|h| (h, server.addr()))
                .collect(),
            ..HttpsOptions::default()
        });
        Upstream {
            server,
            server_ref,
            replier,
            runtime,
        }
    }

    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
}

/// A kubeconfig whose `*` user carries the test client certificate.
fn client_cert_for_every_target(pki: &TestPki) -> WebhookAuth {
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let text = format!(
        "apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    \
         client-certificate-data: {}\n    client-key-data: {}\n",
        b64(pki.client_cert_pem()),
        b64(pki.client_key_pem())
    );
    WebhookAuth::parse(&text).expect("kubeconfig")
}

/// One request that reached the webhook server.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The webhook whose call it was (matched through `request.uid`).
    pub webhook: String,
    pub path: String,
    /// `?timeout=` in whole seconds.
    pub timeout_secs: u64,
    pub review: Value,
}

/// The requests of one dispatch that reached `server`, matched to the webhooks that sent them
/// through the `request.uid`s in the outcome's trace.
pub fn seen(server: &WebhookServer, outcome: &Outcome) -> Vec<Seen> {
    let steps = outcome.steps();
    let sent: BTreeMap<&str, &str> = steps
        .iter()
        .filter_map(|step| match &step.kind {
            StepKind::ReviewSent { hook, uid, .. } => Some((uid.as_str(), &*hook.webhook)),
            _ => None,
        })
        .collect();
    server
        .requests()
        .iter()
        .filter_map(|r| {
            let uid = r.review_uid()?;
            let webhook = sent.get(uid.as_str())?;
            let timeout_secs = r
                .path
                .split_once("?timeout=")
                .and_then(|(_, t)| t.strip_suffix('s'))
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            Some(Seen {
                webhook: (*webhook).to_string(),
                path: r.path_only().to_string(),
                timeout_secs,
                review: serde_json::from_slice(&r.body).unwrap_or(Value::Null),
            })
        })
        .collect()
}

/// Request uids unique across the dispatches of the whole test binary, so that the server's
/// record can be split by dispatch even when dispatches overlap.
pub fn fresh_ids() -> SequentialIds {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    SequentialIds(NEXT.fetch_add(1, Ordering::Relaxed) << 16)
}

/// Upstream's `ClockSteppingWebhookHandler` advances a fake clock by the `<n>` of
/// `/allow/<n>` / `/disallow/<n>` (nanoseconds) inside the handler. The call goes over HTTPS
/// as any other; its reported duration is then that virtual `<n>`, which is what the latency
/// trackers upstream reads.
struct SteppingClock(HttpsReplier);

fn clock_step(url: &str) -> Duration {
    let path = url.split('?').next().unwrap_or_default();
    let n = path.rsplit('/').next().unwrap_or_default();
    Duration::from_nanos(
        n.parse()
            .expect("ClockSteppingWebhookHandler path ends in <n>"),
    )
}

impl Replier for SteppingClock {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let steps: Vec<Duration> = calls.iter().map(|c| clock_step(&c.endpoint.url)).collect();
        let replies = self.0.reply(calls);
        async move {
            let mut replies = replies.await;
            for (reply, step) in replies.iter_mut().zip(steps) {
                reply.elapsed = step;
            }
            replies
        }
    }
}

/// Upstream's `NewPanickingAuthenticationInfoResolver` panics while the REST client is being
/// built, before any connection is made. hookscope's transport resolves credentials from a
/// kubeconfig and cannot be made to panic, so this replier reports that panic for every call
/// without any IO; the server's empty record shows no request left.
struct PanickingResolver(&'static str);

impl Replier for PanickingResolver {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let replies = calls
            .iter()
            .map(|_| Reply {
                outcome: ReplyOutcome::Panicked(self.0.into()),
                elapsed: Duration::ZERO,
            })
            .collect();
        std::future::ready(replies)
    }
}

/// Upstream's `NewAttribute` / `NewAttributeUnstructured` for a case's `request`.
pub fn upstream_attributes(req: &Value, is_crd: bool) -> Attributes {
    let ns = s(&req["namespace"]);
    let mut object_labels = labels(&req["objectLabels"]);
    let (kind, resource, name) = if is_crd {
        (
            GroupVersionKind::new("custom.resource", "v1", "TestCRD"),
            GroupVersionResource::new("custom.resource", "v1", "crd"),
            "my-test-crd".to_string(),
        )
    } else {
        (
            GroupVersionKind::new("", "v1", "Pod"),
            GroupVersionResource::new("", "v1", "pod"),
            "my-pod".to_string(),
        )
    };
    if object_labels.is_empty() {
        object_labels.insert(
            if is_crd { "crd.name" } else { "pod.name" }.into(),
            name.clone(),
        );
    }
    let api_version = kind.api_version();
    Attributes {
        operation: Operation::parse(req["operation"].as_str().unwrap_or("UPDATE")).expect("op"),
        kind: kind.clone().into(),
        resource: resource.into(),
        sub_resource: s(&req["subresource"]),
        namespace: ns.clone(),
        name: name.clone(),
        object: Some(Arc::new(
            json!({
                "apiVersion": api_version, "kind": kind.kind,
                "metadata": {"name": name, "namespace": ns, "labels": object_labels},
            })
            .into(),
        )),
        old_object: Some(Arc::new(
            json!({
                "apiVersion": api_version, "kind": kind.kind,
                "metadata": {"name": name, "namespace": ns},
            })
            .into(),
        )),
        dry_run: req["dryRun"] == true,
        options: Some(json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}).into()),
        user_info: std::sync::Arc::new(hookscope::api::UserInfo {
            username: "webhook-test".into(),
            uid: "webhook-test".into(),
            ..Default::default()
        }),
    }
}

/// Everything one dispatch produced.
pub struct Run {
    pub outcome: Outcome,
    pub metrics: Metrics,
    /// The requests that reached the server.
    pub seen: Vec<Seen>,
}

pub struct Setup<'a> {
    pub kind: WebhookKind,
    pub configuration: &'a str,
    pub webhooks: &'a [Value],
    /// Further configurations, of either kind.
    pub extra: Vec<WebhookConfiguration>,
    pub options: EngineOptions,
    pub namespaces: Namespaces,
    pub deadline: Option<Duration>,
    pub phases: Phases,
}

impl Setup<'_> {
    /// Upstream's plugin harness for one case: its webhooks in `test-webhooks`, default
    /// options, its namespace, no deadline.
    pub fn plugin<'a>(kind: WebhookKind, case: &'a Value) -> Setup<'a> {
        Setup {
            kind,
            configuration: "test-webhooks",
            webhooks: case["webhooks"].as_array().expect("webhooks"),
            extra: Vec::new(),
            options: EngineOptions::default(),
            namespaces: namespaces_of(&case["request"]),
            deadline: None,
            phases: phases_for(kind),
        }
    }
}

/// Dispatches `attrs` with `replier` (usually `up.replier`, or a wrapper around it).
pub fn run<R: Replier + Send>(
    up: &Upstream,
    setup: Setup<'_>,
    attrs: Attributes,
    replier: &mut R,
) -> Run {
    let hooks = setup
        .webhooks
        .iter()
        .map(|w| super::webhook(w, &up.server_ref))
        .collect();
    let mut configs = setup.extra;
    if !setup.webhooks.is_empty() {
        configs.push(configuration(setup.kind, setup.configuration, hooks));
    }
    let engine = Engine::new(&configs, setup.options);
    let mut metrics = Metrics::new();
    let mut ids = fresh_ids();
    let ctx = RequestContext {
        namespaces: &setup.namespaces,
        ids: &mut ids,
        metrics: &mut metrics,
        deadline: setup.deadline,
        phases: setup.phases,
    };
    let outcome = up.block_on(engine.dispatch(attrs, ctx, replier));
    let seen = seen(&up.server, &outcome);
    Run {
        outcome,
        metrics,
        seen,
    }
}

fn phases_for(kind: WebhookKind) -> Phases {
    match kind {
        WebhookKind::Mutating => Phases::MutatingOnly,
        WebhookKind::Validating => Phases::ValidatingOnly,
    }
}

fn kind_of(case: &Value) -> WebhookKind {
    match case["kind"].as_str() {
        Some("validating") => WebhookKind::Validating,
        _ => WebhookKind::Mutating,
    }
}

fn namespaces_of(req: &Value) -> Namespaces {
    let mut n = Namespaces::default();
    n.insert(&s(&req["namespace"]), labels(&req["namespaceLabels"]));
    n
}

/// The error a client sees, and its code.
fn error_of(outcome: &Outcome) -> (String, i64) {
    outcome.status.as_ref().map_or((String::new(), 200), |s| {
        (s.message.clone(), i64::from(s.code))
    })
}

/// The common `expect` of the plugin-level tables.
fn check_expect(c: &mut Check, e: &Value, kind: WebhookKind, r: &Run) {
    let out = &r.outcome;
    if let Some(a) = e["allowed"].as_bool() {
        c.eq("allowed", out.allowed, a);
    }
    let d = &e["derived"];
    let (message, code) = error_of(out);
    if let Some(code_want) = d["statusCode"].as_i64().or(e["statusCode"].as_i64()) {
        c.eq("status code", code, code_want);
    }
    if let Some(needle) = e["errorContains"].as_str() {
        c.contains("error", &message, needle);
    }
    // The texts marked guessed (the non-status error) are Go net/http's for a response line
    // without a protocol (`ReadResponse`: `malformed HTTP response %q`, wrapped by
    // `mapRoundTripError` as `net/http: HTTP/1.x transport connection broken: %w` once the
    // connection is closed, then by `url.Error` as `Post "<url>": …`); the real transport has to
    // produce exactly that, so they are asserted like the others.
    if let Some(m) = d["errorMessage"].as_str() {
        c.eq("error message", message.as_str(), m);
    }
    if let Some(one_of) = d["errorMessageOneOf"].as_array() {
        c.ok(
            one_of.iter().any(|m| m.as_str() == Some(message.as_str())),
            || format!("error message {message:?} is none of {one_of:?}"),
        );
    }
    if e["annotationsAssertedExactly"] == true {
        let got = out.annotations_at(AuditLevel::RequestResponse);
        let want: BTreeMap<String, String> = labels(&e["annotations"]);
        c.eq("annotations", got, want);
    }
    if let Some(line) = e["rejectionMetrics"].as_str() {
        check_metric_line(c, &r.metrics, line);
    }
    for line in d["metrics"].as_array().into_iter().flatten() {
        check_metric_line(c, &r.metrics, line.as_str().unwrap_or_default());
    }
    if let Some(want) = e["finalObjectLabels"]
        .as_object()
        .or(d["finalLabels"].as_object())
    {
        let got = labels(
            &out.object
                .as_ref()
                .map(|o| o["metadata"]["labels"].clone())
                .unwrap_or_default(),
        );
        c.eq("final labels", got, labels(&Value::Object(want.clone())));
    }
    for (uid, want) in e["shouldReinvokeWebhook"].as_object().into_iter().flatten() {
        c.eq(
            &format!("should reinvoke {uid}"),
            out.reinvoke_set.contains(uid),
            want.as_bool().unwrap_or(false),
        );
    }
    if let Some(want) = d["reinvocationContextShouldReinvoke"].as_bool() {
        c.eq(
            "reinvocation context ShouldReinvoke",
            out.calls.iter().any(|c| c.mutated),
            want,
        );
    }
    if let Some(want) = d["calledWebhooks"].as_array() {
        let mut got: Vec<String> = r.seen.iter().map(|s| s.webhook.clone()).collect();
        let mut want: Vec<String> = want.iter().map(s).collect();
        if kind == WebhookKind::Validating {
            got.sort();
            want.sort();
        }
        c.eq("called webhooks", got, want);
    }
}

/// `dispatcher`: `NewNonMutatingTestCases` (both forms) and `NewMutatingTestCases`.
pub fn dispatcher(up: &Upstream) -> Report {
    let mut report = Report::new("dispatcher");
    for case in cases("dispatcher") {
        let kind = kind_of(case);
        let is_crd = case["harness"]["isCRD"] == true && kind == WebhookKind::Mutating;
        let attrs = upstream_attributes(&case["request"], is_crd);
        let r = run(
            up,
            Setup::plugin(kind, case),
            attrs,
            &mut up.replier.clone(),
        );
        let mut c = Check::default();
        check_expect(&mut c, &case["expect"], kind, &r);
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

/// `dispatcher-panic`: the authentication-info resolver panics while the client is built
/// ([`PanickingResolver`]); the validating dispatcher recovers it as upstream does.
pub fn dispatcher_panic(up: &Upstream) -> Report {
    let mut report = Report::new("dispatcher-panic");
    for case in cases("dispatcher-panic") {
        let kind = kind_of(case);
        let attrs = upstream_attributes(&case["request"], false);
        let before = up.server.requests().len();
        let r = run(
            up,
            Setup::plugin(kind, case),
            attrs,
            &mut PanickingResolver("Start panicking!"),
        );
        let mut c = Check::default();
        check_expect(&mut c, &case["expect"], kind, &r);
        c.eq("requests at the server", up.server.requests().len(), before);
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

/// `ConvertToMutatingTestCases`' renaming of validating expectations.
fn to_mutating_expect(e: &Value) -> Value {
    let text = serde_json::to_string(e)
        .expect("json")
        .replace(
            "failed-open.validating.webhook.admission.k8s.io/",
            "failed-open.mutation.webhook.admission.k8s.io/",
        )
        .replace("type=\\\"validating\\\"", "type=\\\"admit\\\"");
    serde_json::from_str(&text).expect("json")
}

/// `dispatcher-cached-client`: one plugin instance (here: one replier), five requests in
/// sequence. Upstream counts calls of its AuthenticationInfoResolver as client-cache misses; the
/// transport's cache is keyed by TLS settings and target rather than by client config, so that
/// count has no counterpart here and `clientCacheMiss` is not asserted (the verdicts are).
pub fn dispatcher_cached_client(up: &Upstream) -> Report {
    let mut report = Report::new("dispatcher-cached-client");
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        let mut replier = up.replier.clone();
        for case in cases("dispatcher-cached-client") {
            let attrs = upstream_attributes(&case["request"], false);
            let r = run(up, Setup::plugin(kind, case), attrs, &mut replier);
            let mut c = Check::default();
            let e = if kind == WebhookKind::Mutating {
                to_mutating_expect(&case["expect"])
            } else {
                case["expect"].clone()
            };
            check_expect(&mut c, &e, kind, &r);
            c.eq("requests at the server", r.seen.len(), 1);
            report.record(
                &format!("{} [{kind}]", case["id"].as_str().unwrap_or_default()),
                c,
            );
        }
    }
    report
}

/// `dispatcher-duration`: the calls go to `/allow/<n>` and `/disallow/<n>` over HTTPS;
/// [`SteppingClock`] reports `<n>` ns as each call's duration, as upstream's fake clock does.
pub fn dispatcher_duration(up: &Upstream) -> Report {
    let mut report = Report::new("dispatcher-duration");
    for case in cases("dispatcher-duration") {
        for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
            let attrs = upstream_attributes(&case["request"], false);
            let r = run(
                up,
                Setup::plugin(kind, case),
                attrs,
                &mut SteppingClock(up.replier.clone()),
            );
            let mut c = Check::default();
            let e = &case["expect"];
            let d = &e["derived"];
            let phase = if kind == WebhookKind::Mutating {
                "mutating"
            } else {
                "validating"
            };
            if e["latencyTrackersPresent"] == true {
                let tracker = if kind == WebhookKind::Mutating {
                    &e["mutatingWebhookTrackerLatencyNs"]
                } else {
                    &e["validatingWebhookTrackerLatencyNsAtLeast"]
                };
                let want = tracker[phase].as_u64().expect("latency");
                let got = u64::try_from(r.outcome.elapsed.as_nanos()).expect("ns");
                if kind == WebhookKind::Mutating {
                    c.eq("mutating latency ns", got, want);
                } else {
                    c.ok(got >= want, || {
                        format!("validating latency {got}ns < {want}ns")
                    });
                }
            }
            c.eq(
                "allowed",
                r.outcome.allowed,
                d["allowed"].as_bool().unwrap_or(true),
            );
            let (message, code) = error_of(&r.outcome);
            c.eq("status code", code, d["statusCode"].as_i64().unwrap_or(200));
            let want_message = s(&d["errorMessage"]);
            if kind == WebhookKind::Validating && d["errorMessageNote"].is_string() {
                let alt = want_message.replace("\"allow match\"", "\"disallow match\"");
                c.ok(message == want_message || message == alt, || {
                    format!("error {message:?}")
                });
            } else {
                c.eq("error message", message, want_message);
            }
            let mut got: Vec<String> = r.seen.iter().map(|s| s.webhook.clone()).collect();
            let mut want: Vec<String> = d["calledWebhooks"][phase]
                .as_array()
                .into_iter()
                .flatten()
                .map(s)
                .collect();
            got.sort();
            want.sort();
            c.eq("called webhooks", got, want);
            report.record(
                &format!("{} [{kind}]", case["id"].as_str().unwrap_or_default()),
                c,
            );
        }
    }
    report
}

/// `dispatcher-exclusion`: the feature gate on excludes the test's resource (here through
/// `excluded_resources`, the engine's input for it); off, the webhook is called.
pub fn dispatcher_exclusion(up: &Upstream) -> Report {
    let mut report = Report::new("dispatcher-exclusion");
    for case in cases("dispatcher-exclusion") {
        let kind = kind_of(case);
        let gate = case["id"]
            .as_str()
            .unwrap_or_default()
            .ends_with("gate=true");
        let mut setup = Setup::plugin(kind, case);
        if gate {
            setup.options.excluded_resources = case["input"]["excludedAdmissionResources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| GroupResource {
                    group: s(&g["group"]),
                    resource: s(&g["resource"]),
                })
                .collect();
        }
        let attrs = upstream_attributes(&case["request"], false);
        let r = run(up, setup, attrs, &mut up.replier.clone());
        let mut c = Check::default();
        let mut e = case["expect"].clone();
        if let Some(m) = e["derived"]["errorMessage"].as_str() {
            let uid = r
                .seen
                .first()
                .map(|s| {
                    s.review["request"]["uid"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .unwrap_or_default();
            e["derived"]["errorMessage"] = json!(m.replace("<request uid>", &uid));
        }
        check_expect(&mut c, &e, kind, &r);
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}
