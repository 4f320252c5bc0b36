//! Dispatcher-level upstream tables: the real engine, its calls answered by webhook handlers
//! (upstream's test server behaviours, §1 of the semantics reference) through [`Harness`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use hookscope::api::{
    GroupResource, GroupVersionKind, GroupVersionResource, Operation, WebhookConfiguration,
    WebhookKind,
};
use hookscope::engine::{
    Attributes, AuditLevel, Engine, EngineOptions, Namespaces, Outcome, Phases, Replier, Reply,
    ReplyOutcome, RequestContext, SequentialIds, TransportError, TransportErrorKind, WebhookCall,
};
use hookscope::metrics::Metrics;
use serde_json::{Value, json};

use super::{Check, Report, ServerRef, cases, check_metric_line, configuration, labels, s};

/// What a handler answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// An HTTP response.
    Http {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
        /// Virtual time the handler takes (sleeps and fake-clock steps), reported as the call's
        /// duration instead of being slept.
        delay: Duration,
    },
    /// The connection is hijacked and garbage written (upstream's `/nonStatusError`).
    Broken,
}

impl Answer {
    pub fn json(body: Value) -> Answer {
        let mut bytes = serde_json::to_vec(&body).expect("json");
        bytes.push(b'\n');
        Answer::Http {
            status: 200,
            content_type: "application/json",
            body: bytes,
            delay: Duration::ZERO,
        }
    }

    pub fn delayed(self, d: Duration) -> Answer {
        match self {
            Answer::Http {
                status,
                content_type,
                body,
                ..
            } => Answer::Http {
                status,
                content_type,
                body,
                delay: d,
            },
            other => other,
        }
    }
}

/// A webhook server's behaviour: path (without query) and the AdmissionReview sent.
pub type Handler = Arc<dyn Fn(&str, &Value) -> Answer + Send + Sync>;

/// One call that reached the webhook side.
#[derive(Debug, Clone)]
pub struct Seen {
    pub webhook: String,
    pub path: String,
    /// `?timeout=` in whole seconds.
    pub timeout_secs: u64,
    pub review: Value,
}

/// The replier the dispatcher cases use: it answers each call with the handler's answer and
/// records what reached it. With `panic` set it reports every call as panicked before any IO,
/// which is what upstream's panicking authentication-info resolver does.
pub struct Harness {
    pub handler: Handler,
    pub panic: Option<String>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Harness {
    pub fn new(handler: Handler) -> Self {
        Harness {
            handler,
            panic: None,
            seen: Arc::default(),
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }

    fn answer(&self, call: &WebhookCall) -> Reply {
        if let Some(p) = &self.panic {
            return Reply {
                outcome: ReplyOutcome::Panicked(p.clone()),
                elapsed: Duration::ZERO,
            };
        }
        let after_host = call.endpoint.url.splitn(4, '/').nth(3).unwrap_or_default();
        let (path, query) = after_host.split_once('?').unwrap_or((after_host, ""));
        let path = format!("/{path}");
        let timeout_secs = query
            .strip_prefix("timeout=")
            .and_then(|t| t.strip_suffix('s'))
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let review: Value = serde_json::from_slice(&call.body).expect("review json");
        self.seen.lock().expect("seen").push(Seen {
            webhook: call.webhook.clone(),
            path: path.clone(),
            timeout_secs,
            review: review.clone(),
        });
        match (self.handler)(&path, &review) {
            Answer::Http { status, content_type, body, delay } => Reply {
                outcome: ReplyOutcome::Http { status, content_type: Some(content_type.into()), body },
                elapsed: delay,
            },
            Answer::Broken => Reply {
                outcome: ReplyOutcome::Transport(TransportError {
                    kind: TransportErrorKind::Malformed,
                    detail: "net/http: HTTP/1.x transport connection broken: malformed HTTP response \"bad-http\"".into(),
                }),
                elapsed: Duration::ZERO,
            },
        }
    }
}

impl Replier for Harness {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let replies: Vec<Reply> = calls.iter().map(|c| self.answer(c)).collect();
        std::future::ready(replies)
    }
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

/// Upstream's `webhookHandler` and `ClockSteppingWebhookHandler` (v1beta1 bodies, no uid).
pub fn upstream_handler() -> Handler {
    Arc::new(|path: &str, _review: &Value| {
        let (base, delay) = match path.rsplit_once('/') {
            Some((b, n))
                if !b.is_empty() && n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() =>
            {
                (b.to_string(), Duration::from_nanos(n.parse().expect("ns")))
            }
            _ => (path.to_string(), Duration::ZERO),
        };
        let answer = match base.as_str() {
            "/internalErr" => Answer::Http {
                status: 500,
                content_type: "text/plain; charset=utf-8",
                body: b"webhook internal server error\n".to_vec(),
                delay: Duration::ZERO,
            },
            "/disallow" => Answer::json(
                json!({"response": {"uid": "", "allowed": false, "status": {"metadata": {}, "code": 403}}}),
            ),
            "/disallowReason" => Answer::json(
                json!({"response": {"uid": "", "allowed": false, "status": {"metadata": {}, "message": "you shall not pass", "code": 403}}}),
            ),
            "/shouldNotBeCalled" => Answer::json(
                json!({"response": {"uid": "", "allowed": false, "status": {"metadata": {}, "message": "doesn't expect labels to match object selector", "code": 403}}}),
            ),
            "/allow" => Answer::json(
                json!({"response": {"uid": "", "allowed": true, "auditAnnotations": {"key1": "value1"}}}),
            ),
            "/removeLabel" => Answer::json(
                json!({"response": {"uid": "", "allowed": true, "patchType": "JSONPatch",
                "patch": b64(r#"[{"op": "remove", "path": "/metadata/labels/remove"}]"#), "auditAnnotations": {"key1": "value1"}}}),
            ),
            "/addLabel" => Answer::json(
                json!({"response": {"uid": "", "allowed": true, "patchType": "JSONPatch",
                "patch": b64(r#"[{"op": "add", "path": "/metadata/labels/added", "value": "test"}]"#)}}),
            ),
            "/invalidPatch" => Answer::json(
                json!({"response": {"uid": "", "allowed": true, "patchType": "JSONPatch", "patch": b64("[{")}}),
            ),
            "/invalidMutation" => Answer::json(
                json!({"response": {"uid": "", "allowed": true, "patchType": "JSONPatch",
                "patch": b64(r#"[{"op": "add", "CORRUPTED_KEY":}]"#)}}),
            ),
            "/nonStatusError" => Answer::Broken,
            "/nilResponse" => Answer::json(json!({})),
            "/invalidAnnotation" => Answer::json(
                json!({"response": {"uid": "", "allowed": true, "auditAnnotations": {"invalid*key": "value1"}}}),
            ),
            "/noop" => Answer::json(json!({"response": {"uid": "", "allowed": true}})),
            _ => Answer::Http {
                status: 404,
                content_type: "text/plain; charset=utf-8",
                body: b"404 page not found\n".to_vec(),
                delay: Duration::ZERO,
            },
        };
        answer.delayed(delay)
    })
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
        kind: kind.clone(),
        resource,
        sub_resource: s(&req["subresource"]),
        namespace: ns.clone(),
        name: name.clone(),
        object: Some(json!({
            "apiVersion": api_version, "kind": kind.kind,
            "metadata": {"name": name, "namespace": ns, "labels": object_labels},
        })),
        old_object: Some(json!({
            "apiVersion": api_version, "kind": kind.kind,
            "metadata": {"name": name, "namespace": ns},
        })),
        dry_run: req["dryRun"] == true,
        options: Some(json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"})),
        user_info: hookscope::api::UserInfo {
            username: "webhook-test".into(),
            uid: "webhook-test".into(),
            ..Default::default()
        },
    }
}

/// Everything one dispatch produced.
pub struct Run {
    pub outcome: Outcome,
    pub metrics: Metrics,
    pub seen: Vec<Seen>,
}

pub struct Setup<'a> {
    pub kind: WebhookKind,
    pub configuration: &'a str,
    pub webhooks: &'a [Value],
    pub server: &'a ServerRef,
    /// Further configurations, of either kind.
    pub extra: Vec<WebhookConfiguration>,
    pub options: EngineOptions,
    pub namespaces: Namespaces,
    pub deadline: Option<Duration>,
    pub phases: Phases,
}

pub fn run(setup: Setup<'_>, attrs: Attributes, harness: &mut Harness) -> Run {
    let hooks = setup
        .webhooks
        .iter()
        .map(|w| super::webhook(w, setup.server))
        .collect();
    let mut configs = setup.extra;
    if !setup.webhooks.is_empty() {
        configs.push(configuration(setup.kind, setup.configuration, hooks));
    }
    let engine = Engine::new(&configs, setup.options);
    let mut metrics = Metrics::new();
    let mut ids = SequentialIds::default();
    let ctx = RequestContext {
        namespaces: &setup.namespaces,
        ids: &mut ids,
        metrics: &mut metrics,
        deadline: setup.deadline,
        phases: setup.phases,
    };
    harness.seen.lock().expect("seen").clear();
    let outcome = futures::executor::block_on(engine.dispatch(attrs, ctx, harness));
    Run {
        outcome,
        metrics,
        seen: harness.seen(),
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
fn check_expect(c: &mut Check, e: &Value, kind: WebhookKind, r: &Run, case_guessed: bool) {
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
    if let Some(m) = d["errorMessage"].as_str()
        && d["errorMessageGuessed"] != true
        && !case_guessed
    {
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
pub fn dispatcher(server: &ServerRef) -> Report {
    let mut report = Report::new("dispatcher");
    let mut harness = Harness::new(upstream_handler());
    for case in cases("dispatcher") {
        let kind = kind_of(case);
        let req = &case["request"];
        let is_crd = case["harness"]["isCRD"] == true && kind == WebhookKind::Mutating;
        let r = run(
            Setup {
                kind,
                configuration: "test-webhooks",
                webhooks: case["webhooks"].as_array().expect("webhooks"),
                server,
                extra: Vec::new(),
                options: EngineOptions::default(),
                namespaces: namespaces_of(req),
                deadline: None,
                phases: phases_for(kind),
            },
            upstream_attributes(req, is_crd),
            &mut harness,
        );
        let mut c = Check::default();
        check_expect(&mut c, &case["expect"], kind, &r, case["guessed"] == true);
        if case["guessed"] == true {
            let (message, _) = error_of(&r.outcome);
            println!("guessed text, not asserted: {} -> {message}", case["id"]);
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

/// `dispatcher-panic`: the authentication-info resolver panics while the client is built. The
/// engine has no resolver; the replier reports the panic ([`ReplyOutcome::Panicked`]) before
/// any IO, which the validating dispatcher recovers as upstream does.
pub fn dispatcher_panic(server: &ServerRef) -> Report {
    let mut report = Report::new("dispatcher-panic");
    let mut harness = Harness::new(upstream_handler());
    harness.panic = Some("Start panicking!".into());
    for case in cases("dispatcher-panic") {
        let kind = kind_of(case);
        let req = &case["request"];
        let r = run(
            Setup {
                kind,
                configuration: "test-webhooks",
                webhooks: case["webhooks"].as_array().expect("webhooks"),
                server,
                extra: Vec::new(),
                options: EngineOptions::default(),
                namespaces: namespaces_of(req),
                deadline: None,
                phases: phases_for(kind),
            },
            upstream_attributes(req, false),
            &mut harness,
        );
        let mut c = Check::default();
        check_expect(&mut c, &case["expect"], kind, &r, false);
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

/// `dispatcher-cached-client`: one plugin instance, five requests in sequence. The engine builds
/// no clients (the transport does), so the cache-miss count upstream asserts is not observable
/// here; the verdicts are.
pub fn dispatcher_cached_client(server: &ServerRef) -> Report {
    let mut report = Report::new("dispatcher-cached-client");
    let mut harness = Harness::new(upstream_handler());
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        for case in cases("dispatcher-cached-client") {
            let req = &case["request"];
            let r = run(
                Setup {
                    kind,
                    configuration: "test-webhooks",
                    webhooks: case["webhooks"].as_array().expect("webhooks"),
                    server,
                    extra: Vec::new(),
                    options: EngineOptions::default(),
                    namespaces: namespaces_of(req),
                    deadline: None,
                    phases: phases_for(kind),
                },
                upstream_attributes(req, false),
                &mut harness,
            );
            let mut c = Check::default();
            let e = if kind == WebhookKind::Mutating {
                to_mutating_expect(&case["expect"])
            } else {
                case["expect"].clone()
            };
            check_expect(&mut c, &e, kind, &r, false);
            c.eq("webhook called", r.seen.len(), 1);
            report.record(
                &format!("{} [{kind}]", case["id"].as_str().unwrap_or_default()),
                c,
            );
        }
    }
    report
}

/// `dispatcher-duration`: upstream steps a fake clock by N ns inside the handler; here the
/// handler reports N ns as the call's duration, and the engine's virtual clock is the tracker.
pub fn dispatcher_duration(server: &ServerRef) -> Report {
    let mut report = Report::new("dispatcher-duration");
    let mut harness = Harness::new(upstream_handler());
    for case in cases("dispatcher-duration") {
        for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
            let req = &case["request"];
            let r = run(
                Setup {
                    kind,
                    configuration: "test-webhooks",
                    webhooks: case["webhooks"].as_array().expect("webhooks"),
                    server,
                    extra: Vec::new(),
                    options: EngineOptions::default(),
                    namespaces: namespaces_of(req),
                    deadline: None,
                    phases: phases_for(kind),
                },
                upstream_attributes(req, false),
                &mut harness,
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
pub fn dispatcher_exclusion(server: &ServerRef) -> Report {
    let mut report = Report::new("dispatcher-exclusion");
    let mut harness = Harness::new(upstream_handler());
    for case in cases("dispatcher-exclusion") {
        let kind = kind_of(case);
        let req = &case["request"];
        let gate = case["id"]
            .as_str()
            .unwrap_or_default()
            .ends_with("gate=true");
        let mut options = EngineOptions::default();
        if gate {
            options.excluded_resources = case["input"]["excludedAdmissionResources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| GroupResource {
                    group: s(&g["group"]),
                    resource: s(&g["resource"]),
                })
                .collect();
        }
        let r = run(
            Setup {
                kind,
                configuration: "test-webhooks",
                webhooks: case["webhooks"].as_array().expect("webhooks"),
                server,
                extra: Vec::new(),
                options,
                namespaces: namespaces_of(req),
                deadline: None,
                phases: phases_for(kind),
            },
            upstream_attributes(req, false),
            &mut harness,
        );
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
        check_expect(&mut c, &e, kind, &r, false);
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}
