//! Recording webhook exchanges (`--record DIR`) and answering calls from a recording offline
//! (`--replies DIR`): a recorded HTTPS run replays to the identical outcome, every kind of reply
//! survives the round trip byte for byte, `response.uid` follows the new request, missing replies
//! are reported, and broken recording files are named with the field at fault.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::executor::block_on;
use hookscope::api::{WebhookConfiguration, WebhookKind};
use hookscope::engine::{
    Attributes, CallDecision, Engine, EngineOptions, Namespaces, Outcome, Phases, Replier, Reply,
    ReplyOutcome, RequestContext, SequentialIds, TransportError, TransportErrorKind, WebhookCall,
};
use hookscope::metrics::Metrics;
use hookscope::replay::record::{RecordError, RecordedReplies, Recorder};
use hookscope::script::ScriptedReplier;
use hookscope::transport::{HttpsOptions, HttpsReplier};
use serde_json::{Value, json};

use common::{TestPki, TestResponse, WebhookServer};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A fresh scratch directory for one test (absent on return).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("replay_record")
        .join(name);
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn load(yaml: &str) -> Vec<WebhookConfiguration> {
    hookscope::config::parse_documents(yaml, "record.yaml")
        .into_iter()
        .map(|r| {
            let mut loaded = r.expect("configuration loads");
            loaded.apply_defaults();
            loaded.configuration
        })
        .collect()
}

/// A webhook called for pod creations (`extra`: more of its fields, YAML, indented by two).
fn pod_webhook(name: &str, client_config: &str, extra: &str) -> String {
    format!(
        "- name: {name}\n  clientConfig: {client_config}\n  \
         rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}]\n  \
         sideEffects: None\n  admissionReviewVersions: [v1]\n{extra}"
    )
}

/// A configuration document of `kind` (`Mutating` or `Validating`) holding `webhooks`.
fn configuration(kind: &str, name: &str, webhooks: &[String]) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: {kind}WebhookConfiguration\n\
         metadata: {{name: {name}}}\nwebhooks:\n{}",
        webhooks.concat()
    )
}

/// One configuration with one pod webhook at `url`.
fn single(kind: &str, name: &str, webhook: &str, url: &str) -> Vec<WebhookConfiguration> {
    let client_config = format!("{{url: \"{url}\"}}");
    load(&configuration(
        kind,
        name,
        &[pod_webhook(webhook, &client_config, "")],
    ))
}

/// Records one dispatch of `attrs` through `inner` into `dir`.
fn record_dispatch<R: Replier + Send>(
    engine: &Engine,
    dir: &Path,
    inner: R,
    attrs: Attributes,
) -> Outcome {
    let mut recorder = Recorder::new(inner, dir).expect("recorder");
    let outcome = block_on(dispatch(engine, attrs, 0, &mut recorder));
    recorder.finish().expect("recording finishes");
    outcome
}

fn pod_create(name: &str) -> Attributes {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    });
    serde_json::from_value(json!({
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "shop",
        "name": name,
        "object": pod,
    }))
    .expect("attributes")
}

fn namespaces() -> Namespaces {
    let mut ns = Namespaces::default();
    ns.insert("shop", BTreeMap::new());
    ns
}

async fn dispatch<R: Replier + Send>(
    engine: &Engine,
    attrs: Attributes,
    first_id: u64,
    replier: &mut R,
) -> Outcome {
    let namespaces = namespaces();
    let mut ids = SequentialIds(first_id);
    let mut metrics = Metrics::new();
    let ctx = RequestContext {
        namespaces: &namespaces,
        ids: &mut ids,
        metrics: &mut metrics,
        deadline: Some(Duration::from_secs(10)),
        phases: Phases::All,
    };
    engine.dispatch(attrs, ctx, replier).await
}

/// The parts of an outcome a report shows (everything but the trace, which names request uids).
fn report(o: &Outcome) -> impl PartialEq + std::fmt::Debug + '_ {
    (
        o.allowed,
        &o.status,
        &o.object,
        &o.annotations,
        &o.warnings,
        &o.calls,
        o.reinvoked,
        &o.reinvoke_set,
        o.elapsed,
    )
}

fn http(status: u16, content_type: Option<&str>, body: &[u8], nanos: u64) -> Reply {
    Reply {
        outcome: ReplyOutcome::Http {
            status,
            content_type: content_type.map(str::to_string),
            body: body.to_vec(),
        },
        elapsed: Duration::from_nanos(nanos),
    }
}

fn failed(outcome: ReplyOutcome, nanos: u64) -> Reply {
    Reply {
        outcome,
        elapsed: Duration::from_nanos(nanos),
    }
}

/// A call to `webhook` of configuration `cfg` whose review carries `request` (plus the uid).
fn call(cfg: &str, webhook: &str, uid: &str, request: Value) -> WebhookCall {
    let mut c = common::url_call("https://127.0.0.1:8443/hook", None, Duration::from_secs(10));
    let mut request = request;
    request["uid"] = json!(uid);
    let review = json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": request,
    });
    c.configuration = cfg.into();
    c.webhook = webhook.into();
    c.uid = format!("{cfg}/{webhook}/0").into();
    c.request_uid = uid.into();
    c.body = serde_json::to_vec(&review).expect("review").into();
    c
}

/// Answers each call with the reply given for its webhook name, and counts calls.
#[derive(Debug, Clone, Default)]
struct Fixed {
    replies: BTreeMap<String, Reply>,
    calls: Arc<AtomicUsize>,
}

impl Replier for Fixed {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        self.calls.fetch_add(calls.len(), Ordering::SeqCst);
        let out = calls
            .iter()
            .map(|c| {
                self.replies
                    .get(&*c.webhook)
                    .cloned()
                    .unwrap_or_else(|| panic!("no reply for {}", c.webhook))
            })
            .collect();
        std::future::ready(out)
    }
}

/// Records one batch through `inner` and returns the replies it gave.
fn record_batch<R: Replier + Send>(dir: &Path, inner: R, calls: &[WebhookCall]) -> Vec<Reply> {
    let mut recorder = Recorder::new(inner, dir).expect("recorder");
    let replies = block_on(recorder.reply(calls));
    recorder.finish().expect("finish");
    replies
}

fn replay(dir: &Path, calls: &[WebhookCall]) -> (Vec<Reply>, RecordedReplies) {
    let mut replies = RecordedReplies::load(dir).expect("recording loads");
    let out = block_on(replies.reply(calls));
    (out, replies)
}

fn exchange_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir)
        .expect("recording dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

// ---------------------------------------------------------------------------------------------
// A recorded HTTPS run replays to the identical outcome
// ---------------------------------------------------------------------------------------------

fn https_configs(server: &WebhookServer, pki: &TestPki) -> Vec<WebhookConfiguration> {
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.ca_pem());
    let hook = |name: &str, path: &str, extra: &str| {
        let client_config = format!("{{url: \"{}\", caBundle: {ca}}}", server.url(path));
        pod_webhook(
            name,
            &client_config,
            &format!("  failurePolicy: Fail\n{extra}"),
        )
    };
    let documents = [
        configuration(
            "Mutating",
            "a-injector",
            &[hook(
                "sidecar.example.com",
                "/inject",
                "  reinvocationPolicy: IfNeeded\n",
            )],
        ),
        configuration(
            "Mutating",
            "b-defaults",
            &[hook("team.example.com", "/label", "")],
        ),
        configuration(
            "Validating",
            "policy",
            &[
                hook("audit.example.com", "/audit", ""),
                hook("quota.example.com", "/quota", ""),
            ],
        ),
    ];
    load(&documents.join("---\n"))
}

/// Webhooks that inject a sidecar, default a label (which reinvokes the injector), audit with a
/// warning and an annotation, and deny pods named `big-…`.
fn https_handler() -> common::Handler {
    common::handler(|req| {
        let review: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let uid = review["request"]["uid"].as_str().unwrap_or_default();
        let object = &review["request"]["object"];
        let patch = |p: Value| common::v1_patch(uid, &p.to_string());
        match req.path_only() {
            "/inject" if object["spec"]["initContainers"].is_null() => patch(json!([{
                "op": "add", "path": "/spec/initContainers",
                "value": [{"name": "proxy-init", "image": "proxy:1"}],
            }])),
            "/label" if object["metadata"]["labels"]["team"].is_null() => patch(json!([{
                "op": "add", "path": "/metadata/labels/team", "value": "storefront",
            }])),
            "/audit" => {
                let body = json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": uid, "allowed": true,
                        "warnings": ["image tag is not pinned by digest"],
                        "auditAnnotations": {"checked": "true"},
                    },
                });
                // Go's json.Encoder: a trailing newline.
                TestResponse::json(200, format!("{body}\n")).with_delay(Duration::from_millis(15))
            }
            "/quota"
                if object["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("big-")) =>
            {
                common::v1_deny(uid, 403, "pods named big-* exceed the quota")
            }
            _ => common::v1_allow(uid),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_https_run_replays_offline_to_the_identical_outcome() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, https_handler());
    let engine = Engine::new(&https_configs(&server, &pki), EngineOptions::default());
    let dir = scratch("https");
    let requests = [
        (pod_create("web-0"), 100),
        (pod_create("big-1"), 200),
        (pod_create("web-0"), 300),
    ];

    // Record: the three requests dispatched concurrently through clones of one recorder.
    let recorder = Recorder::new(HttpsReplier::new(HttpsOptions::default()), &dir).expect("new");
    let (mut r1, mut r2, mut r3) = (recorder.clone(), recorder.clone(), recorder.clone());
    let (o1, o2, o3) = tokio::join!(
        dispatch(&engine, requests[0].0.clone(), requests[0].1, &mut r1),
        dispatch(&engine, requests[1].0.clone(), requests[1].1, &mut r2),
        dispatch(&engine, requests[2].0.clone(), requests[2].1, &mut r3),
    );
    drop((r1, r2, r3));
    recorder.finish().expect("recording finishes");
    let recorded = [o1, o2, o3];

    // The run did what the webhooks say: injected, labelled, reinvoked, audited, denied big-1.
    assert!(
        recorded[0].allowed && recorded[0].reinvoked,
        "{:?}",
        recorded[0].status
    );
    assert_eq!(
        recorded[0].object.as_ref().unwrap()["metadata"]["labels"]["team"],
        "storefront"
    );
    assert_eq!(recorded[0].warnings, ["image tag is not pinned by digest"]);
    assert!(!recorded[1].allowed);
    assert!(
        recorded[1]
            .status
            .as_ref()
            .unwrap()
            .message
            .contains("exceed the quota"),
        "{:?}",
        recorded[1].status
    );
    let audit = recorded[0]
        .calls
        .iter()
        .find(|c| &*c.webhook == "audit.example.com")
        .expect("audit call");
    assert!(audit.duration_ms >= 15.0, "{}", audit.duration_ms);

    // Every call the server received is in the recording, request for request.
    let called = |o: &Outcome| {
        o.calls
            .iter()
            .filter(|c| c.decision == CallDecision::Called)
            .count()
    };
    let total: usize = recorded.iter().map(called).sum();
    let dirs = exchange_dirs(&dir);
    assert_eq!(dirs.len(), total);
    assert_eq!(server.requests().len(), total);
    let mut sent: Vec<Value> = dirs
        .iter()
        .map(|d| serde_json::from_slice(&fs::read(d.join("request.json")).unwrap()).unwrap())
        .collect();
    let mut received: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    let by_uid = |v: &Value| v["request"]["uid"].as_str().unwrap_or_default().to_string();
    sent.sort_by_key(by_uid);
    received.sort_by_key(by_uid);
    assert_eq!(sent, received);
    let index = fs::read_to_string(dir.join("index.jsonl")).unwrap();
    assert_eq!(index.lines().count(), total);
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names[0].starts_with("000001-"), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.ends_with("-a-injector-sidecar.example.com-mutating-r1")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.ends_with("-policy-quota.example.com-validating-r0")),
        "{names:?}"
    );

    // Replay with the same request uids: the very same outcome, trace included.
    let mut replies = RecordedReplies::load(&dir).expect("recording loads");
    assert_eq!(replies.len(), total);
    for ((attrs, first_id), want) in requests.iter().zip(&recorded) {
        let got = dispatch(&engine, attrs.clone(), *first_id, &mut replies).await;
        assert_eq!(&got, want);
    }
    assert_eq!(replies.missing(), []);

    // Replay with other uids (webhooks echoed theirs): the same reports. The two identical
    // requests were recorded concurrently, so which of their identical calls gets which recorded
    // duration depends on the order the calls reached the recorder: compare durations as a set.
    let mut replies = RecordedReplies::load(&dir).expect("recording loads");
    let mut got = Vec::new();
    for (attrs, first_id) in &requests {
        let outcome = engine.dispatch_blocking(
            attrs.clone(),
            RequestContext {
                namespaces: &namespaces(),
                ids: &mut SequentialIds(first_id + 5000),
                metrics: &mut Metrics::new(),
                deadline: Some(Duration::from_secs(10)),
                phases: Phases::All,
            },
            &mut replies,
        );
        got.push(outcome);
    }
    let timeless = |o: &Outcome| {
        let mut o = o.clone();
        o.elapsed = Duration::ZERO;
        o.calls.iter_mut().for_each(|c| c.duration_ms = 0.0);
        format!("{:?}", report(&o))
    };
    let all_calls = |outcomes: &[Outcome]| {
        let mut calls: Vec<String> = outcomes
            .iter()
            .flat_map(|o| o.calls.iter().map(|c| format!("{c:?}")))
            .collect();
        calls.sort();
        calls
    };
    for (got, want) in got.iter().zip(&recorded) {
        assert_eq!(timeless(got), timeless(want));
    }
    assert_eq!(all_calls(&got), all_calls(&recorded));
    assert_eq!(report(&got[1]), report(&recorded[1]));
    assert_ne!(got[1].trace, recorded[1].trace, "the request uids differ");
    assert_eq!(replies.missing(), []);
    assert_eq!(server.requests().len(), total, "the replay stayed offline");
}

// ---------------------------------------------------------------------------------------------
// Every kind of reply round-trips exactly
// ---------------------------------------------------------------------------------------------

#[test]
fn every_reply_outcome_round_trips_byte_for_byte() {
    let uid = "6f0c0b1e-1a55-4cf4-8a35-0b7c4b1d2e3f";
    let echo = format!(
        "{{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\
         \"response\":{{\"uid\":\"{uid}\",\"allowed\":true}}}}\n"
    );
    let pretty = "{\n    \"kind\": \"AdmissionReview\",\n    \"response\": {\"uid\": \"\", \"allowed\": false}\n}\r\n\n";
    let mut cases: Vec<(&str, Reply)> = vec![
        (
            "json-newline",
            http(
                200,
                Some("application/json"),
                echo.as_bytes(),
                1_234_567_891,
            ),
        ),
        (
            "json-pretty",
            http(200, Some("application/json"), pretty.as_bytes(), 7),
        ),
        ("json-array", http(200, None, b"[1,2 ,3]", 0)),
        (
            "json-string",
            http(200, Some("application/json"), b"\"just a string\"", 1),
        ),
        (
            "leading-space",
            http(200, Some("application/json"), b" {\"a\":1}", 2),
        ),
        (
            "truncated-json",
            http(200, Some("application/json"), b"{\"response\":", 3),
        ),
        (
            "go-error",
            http(
                500,
                Some("text/plain; charset=utf-8"),
                b"webhook internal server error\n",
                4,
            ),
        ),
        (
            "not-utf8",
            http(
                200,
                Some("application/octet-stream"),
                &[0xff, 0xfe, b'{', 0x00],
                5,
            ),
        ),
        ("empty", http(204, None, b"", 6)),
        ("empty-content-type", http(200, Some(""), b"{}", 8)),
        ("odd-status", http(42, Some("application/json"), b"{}", 11)),
        (
            "client-config",
            failed(
                ReplyOutcome::ClientConfig("parse \"https://[::1\": missing ']' in host".into()),
                0,
            ),
        ),
        ("canceled", failed(ReplyOutcome::Canceled, 2_500_000)),
        (
            "panicked",
            failed(
                ReplyOutcome::Panicked(
                    "runtime error: index out of range [3] with length 3".into(),
                ),
                9,
            ),
        ),
    ];
    let kinds = [
        TransportErrorKind::Connect,
        TransportErrorKind::Dns,
        TransportErrorKind::Tls,
        TransportErrorKind::Timeout,
        TransportErrorKind::Reset,
        TransportErrorKind::Malformed,
        TransportErrorKind::Other,
    ];
    let names = [
        "t-connect",
        "t-dns",
        "t-tls",
        "t-timeout",
        "t-reset",
        "t-malformed",
        "t-other",
    ];
    for (kind, name) in kinds.into_iter().zip(names) {
        let detail = format!("{name}: \"detail\" with ünïcode");
        cases.push((
            name,
            failed(
                ReplyOutcome::Transport(TransportError { kind, detail }),
                10_000_000_000,
            ),
        ));
    }
    let inner = Fixed {
        replies: cases
            .iter()
            .map(|(n, r)| (n.to_string(), r.clone()))
            .collect(),
        ..Fixed::default()
    };
    let calls: Vec<WebhookCall> = cases
        .iter()
        .map(|(name, _)| call("outcomes", name, uid, json!({"operation": "CREATE"})))
        .collect();
    let dir = scratch("outcomes");
    let recorded = record_batch(&dir, inner, &calls);
    let want: Vec<Reply> = cases.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(recorded, want);

    let (replayed, replies) = replay(&dir, &calls);
    assert_eq!(replayed, want);
    assert_eq!(replies.missing(), []);

    // The readable forms: a JSON body verbatim, text as a string, other bytes as base64.
    let reply_of = |name: &str| -> Value {
        let d = exchange_dirs(&dir)
            .into_iter()
            .find(|d| {
                d.to_string_lossy()
                    .ends_with(&format!("-outcomes-{name}-validating-r0"))
            })
            .unwrap_or_else(|| panic!("folder of {name}"));
        serde_json::from_slice(&fs::read(d.join("reply.json")).unwrap()).unwrap()
    };
    let json_reply = reply_of("json-newline");
    assert_eq!(json_reply["body"]["response"]["uid"], uid);
    assert_eq!(json_reply["bodyTrailer"], "\n");
    assert_eq!(json_reply["elapsedNanos"], 1_234_567_891u64);
    assert_eq!(json_reply["elapsedMs"], 1234.567891);
    assert_eq!(
        reply_of("go-error")["body"],
        "webhook internal server error\n"
    );
    assert_eq!(reply_of("not-utf8")["bodyBase64"], "//57AA==");
    assert_eq!(reply_of("t-tls")["errorKind"], "tls");
    assert_eq!(reply_of("canceled")["outcome"], "canceled");
}

#[test]
fn scripted_transport_failures_round_trip() {
    let script = "refused: {error: refused}\ntimeout: {error: timeout}\ntls: {error: tls}\n\
                  reset: {error: reset, delayMs: 12}\nunavailable: {error: 'http:503', delayMs: 3}\n\
                  unreachable: {error: 'dial tcp 10.0.0.1:443: connect: no route to host'}\n\
                  denies: {allowed: false, code: 403, message: no, delayMs: 40}\n";
    let scripted = ScriptedReplier::from_yaml(script).expect("script");
    let names = [
        "refused",
        "timeout",
        "tls",
        "reset",
        "unavailable",
        "unreachable",
        "denies",
    ];
    let calls: Vec<WebhookCall> = names
        .iter()
        .map(|n| call("scripted", n, "uid-1", json!({"name": n})))
        .collect();
    let dir = scratch("scripted");
    let recorded = record_batch(&dir, scripted, &calls);
    assert!(matches!(
        &recorded[0].outcome,
        ReplyOutcome::Transport(TransportError {
            kind: TransportErrorKind::Connect,
            ..
        })
    ));
    assert_eq!(recorded[1].elapsed, Duration::from_secs(10));
    let (replayed, _) = replay(&dir, &calls);
    assert_eq!(replayed, recorded);
}

/// A replier whose outcome is not an HTTP exchange, through the engine: the same errors again.
#[test]
fn client_config_cancel_and_panic_replay_through_the_engine() {
    let yaml = |name: &str| {
        let client_config = format!("{{url: \"https://127.0.0.1:9/{name}\"}}");
        let extra = "  failurePolicy: Ignore\n";
        let hook = pod_webhook(&format!("{name}.example.com"), &client_config, extra);
        configuration("Validating", name, &[hook])
    };
    let configs = load(&[yaml("config"), yaml("cancel"), yaml("panic")].join("---\n"));
    let engine = Engine::new(&configs, EngineOptions::default());
    let inner = Fixed {
        replies: BTreeMap::from([
            (
                "config.example.com".into(),
                failed(ReplyOutcome::ClientConfig("no credentials".into()), 0),
            ),
            (
                "cancel.example.com".into(),
                failed(ReplyOutcome::Canceled, 1_500_000),
            ),
            (
                "panic.example.com".into(),
                failed(ReplyOutcome::Panicked("boom".into()), 0),
            ),
        ]),
        ..Fixed::default()
    };
    let dir = scratch("engine-failures");
    let want = record_dispatch(&engine, &dir, inner, pod_create("web-0"));
    let errors: Vec<&str> = want
        .calls
        .iter()
        .filter_map(|c| c.error.as_deref())
        .collect();
    assert_eq!(errors.len(), 3, "{:?}", want.calls);
    let mut replies = RecordedReplies::load(&dir).expect("load");
    let got = block_on(dispatch(&engine, pod_create("web-0"), 0, &mut replies));
    assert_eq!(got, want);
}

// ---------------------------------------------------------------------------------------------
// response.uid follows the new request when it echoed the recorded one
// ---------------------------------------------------------------------------------------------

#[test]
fn echoed_response_uid_is_rewritten_and_nothing_else() {
    let echoed = "{\"kind\":\"AdmissionReview\", \"apiVersion\":\"admission.k8s.io/v1\",\n \
                  \"response\" : { \"allowed\" : true, \"uid\" : \"rec-uid\", \"warnings\":[\"rec-uid\"] } }\n";
    let wrong = "{\"response\":{\"uid\":\"someone-else\",\"allowed\":true}}";
    let inner = Fixed {
        replies: BTreeMap::from([
            (
                "echo".into(),
                http(200, Some("application/json"), echoed.as_bytes(), 1),
            ),
            (
                "wrong".into(),
                http(200, Some("application/json"), wrong.as_bytes(), 1),
            ),
        ]),
        ..Fixed::default()
    };
    let request = json!({"operation": "UPDATE", "name": "x"});
    let recorded_calls = [
        call("uids", "echo", "rec-uid", request.clone()),
        call("uids", "wrong", "rec-uid", request.clone()),
    ];
    let dir = scratch("uids");
    record_batch(&dir, inner, &recorded_calls);

    let new_calls = [
        call("uids", "echo", "new-\"uid\"", request.clone()),
        call("uids", "wrong", "new-uid", request),
    ];
    let (replayed, replies) = replay(&dir, &new_calls);
    assert_eq!(replies.missing(), []);
    let body = |r: &Reply| match &r.outcome {
        ReplyOutcome::Http { body, .. } => String::from_utf8(body.clone()).unwrap(),
        other => panic!("not http: {other:?}"),
    };
    let want = echoed.replacen(
        "\"rec-uid\", \"warnings\"",
        "\"new-\\\"uid\\\"\", \"warnings\"",
        1,
    );
    assert_eq!(body(&replayed[0]), want);
    assert_eq!(body(&replayed[1]), wrong);
}

/// A webhook that answered with somebody else's uid fails the same way on replay.
#[test]
fn a_recorded_uid_mistake_is_reported_again() {
    struct WrongUid;
    impl Replier for WrongUid {
        fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
            let body = json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "stale", "allowed": true},
            });
            let reply = http(
                200,
                Some("application/json"),
                body.to_string().as_bytes(),
                2_000_000,
            );
            std::future::ready(vec![reply; calls.len()])
        }
    }
    let configs = single(
        "Validating",
        "buggy",
        "buggy.example.com",
        "https://127.0.0.1:9/v",
    );
    let engine = Engine::new(&configs, EngineOptions::default());
    let dir = scratch("uid-mistake");
    let want = record_dispatch(&engine, &dir, WrongUid, pod_create("web-0"));
    let mut replies = RecordedReplies::load(&dir).expect("load");
    let got = block_on(dispatch(&engine, pod_create("web-0"), 77, &mut replies));
    // The same failure, naming the new request's uid.
    let old_uid = "00000000-0000-4000-8000-000000000001";
    let new_uid = "00000000-0000-4000-8000-00000000004e";
    let error = got.calls[0].error.clone().unwrap_or_default();
    assert!(
        error.contains(&format!(
            r#"expected response.uid="{new_uid}", got "stale""#
        )),
        "{error}"
    );
    let mut want = want;
    let message = want
        .status
        .as_ref()
        .map(|s| s.message.replace(old_uid, new_uid));
    assert_eq!(got.status.as_ref().map(|s| &s.message), message.as_ref());
    want.calls[0].error = want.calls[0]
        .error
        .as_ref()
        .map(|e| e.replace(old_uid, new_uid).into());
    assert_eq!(got.calls, want.calls);
    assert!(!got.allowed);
}

// ---------------------------------------------------------------------------------------------
// Repeated calls, missing replies
// ---------------------------------------------------------------------------------------------

/// Answers the n-th call with status 200 + n.
#[derive(Debug, Clone, Default)]
struct Counting(Arc<Mutex<u16>>);

impl Replier for Counting {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let mut n = self.0.lock().unwrap();
        let out = calls
            .iter()
            .map(|_| {
                *n += 1;
                http(200 + *n, None, b"{}", u64::from(*n))
            })
            .collect();
        std::future::ready(out)
    }
}

#[test]
fn identical_calls_are_answered_by_uid_or_in_recorded_order_then_the_last_repeats() {
    let request = json!({"operation": "CREATE", "object": {"a": 1}});
    let dir = scratch("repeats");
    let recorded_calls = [
        call("cfg", "hook", "u1", request.clone()),
        call("cfg", "hook", "u2", request.clone()),
        call("cfg", "other", "u3", request.clone()),
    ];
    record_batch(&dir, Counting::default(), &recorded_calls);

    let mut replies = RecordedReplies::load(&dir).expect("load");
    let shared = replies.clone();
    let status = |r: &Reply| match r.outcome {
        ReplyOutcome::Http { status, .. } => status,
        _ => 0,
    };
    let again: Vec<u16> = (0..3)
        .map(|i| {
            let c = call("cfg", "hook", &format!("new-{i}"), request.clone());
            status(&block_on(replies.reply(&[c]))[0])
        })
        .collect();
    assert_eq!(again, [201, 202, 202]);
    // A clone shares the position.
    let mut clone = shared.clone();
    let c = call("cfg", "hook", "later", request.clone());
    assert_eq!(status(&block_on(clone.reply(&[c]))[0]), 202);
    let c = call("cfg", "other", "later", request.clone());
    assert_eq!(status(&block_on(clone.reply(&[c]))[0]), 203);

    // A call with a recorded request.uid gets that call's reply first.
    let mut replies = RecordedReplies::load(&dir).expect("load");
    let statuses: Vec<u16> = ["u2", "new", "u2", "new"]
        .into_iter()
        .map(|uid| {
            status(&block_on(replies.reply(&[call("cfg", "hook", uid, request.clone())]))[0])
        })
        .collect();
    assert_eq!(statuses, [202, 201, 202, 202]);
}

#[test]
fn a_call_without_recorded_reply_fails_and_is_listed() {
    let dir = scratch("missing");
    let request = json!({"operation": "CREATE", "namespace": "shop", "name": "web-0",
        "resource": {"group": "", "version": "v1", "resource": "pods"}});
    record_batch(
        &dir,
        Counting::default(),
        &[call("cfg", "hook", "u1", request.clone())],
    );

    let mut other = request.clone();
    other["name"] = json!("web-1");
    let (replies, recording) = replay(
        &dir,
        &[
            call("cfg", "hook", "u2", other),
            call("cfg", "hook", "u3", request.clone()),
            call("cfg2", "hook", "u4", request),
        ],
    );
    let ReplyOutcome::Transport(e) = &replies[0].outcome else {
        panic!("{:?}", replies[0]);
    };
    assert_eq!(e.kind, TransportErrorKind::Other);
    assert_eq!(
        e.detail,
        "no recorded reply for cfg/hook (validating, CREATE v1/pods shop/web-1)"
    );
    assert!(matches!(
        replies[1].outcome,
        ReplyOutcome::Http { status: 201, .. }
    ));
    let missing = recording.missing();
    assert_eq!(missing.len(), 2);
    assert_eq!(
        (
            missing[0].configuration.as_str(),
            missing[0].webhook.as_str(),
            missing[0].phase
        ),
        ("cfg", "hook", WebhookKind::Validating)
    );
    assert_eq!(missing[0].request_uid, "u2");
    assert_eq!(missing[0].description, "CREATE v1/pods shop/web-1");
    assert_eq!(missing[1].configuration, "cfg2");
}

#[test]
fn a_missing_reply_reads_well_in_the_engine_error() {
    let url = "https://127.0.0.1:9/inject";
    let configs = single("Mutating", "injector", "sidecar.example.com", url);
    let engine = Engine::new(&configs, EngineOptions::default());
    let dir = scratch("missing-engine");
    record_dispatch(
        &engine,
        &dir,
        ScriptedReplier::default(),
        pod_create("web-0"),
    );
    let mut replies = RecordedReplies::load(&dir).expect("load");
    let got = block_on(dispatch(&engine, pod_create("web-1"), 0, &mut replies));
    assert!(!got.allowed);
    let message = &got.status.as_ref().expect("status").message;
    assert_eq!(
        message,
        "Internal error occurred: failed calling webhook \"sidecar.example.com\": failed to call \
         webhook: Post \"https://127.0.0.1:9/inject?timeout=10s\": no recorded reply for \
         injector/sidecar.example.com (mutating, CREATE v1/pods shop/web-1)"
    );
    assert_eq!(replies.missing().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Broken recordings
// ---------------------------------------------------------------------------------------------

/// A one-exchange recording; returns its folder.
fn one_exchange(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    record_batch(
        &dir,
        Counting::default(),
        &[call("cfg", "hook", "u1", json!({"operation": "CREATE"}))],
    );
    let folder = exchange_dirs(&dir).remove(0);
    (dir, folder)
}

/// Edits `reply.json` as JSON, loads, and returns the error.
fn load_with_reply(name: &str, edit: impl FnOnce(&mut Value)) -> (PathBuf, RecordError) {
    let (dir, folder) = one_exchange(name);
    let path = folder.join("reply.json");
    let mut reply: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    edit(&mut reply);
    fs::write(&path, serde_json::to_vec_pretty(&reply).unwrap()).unwrap();
    let err = RecordedReplies::load(&dir).expect_err("broken recording");
    (path, err)
}

fn assert_names(err: &RecordError, path: &Path, field: &str) {
    match err {
        RecordError::Invalid {
            path: p, field: f, ..
        } => {
            assert_eq!((p.as_path(), f.as_str()), (path, field), "{err}");
        }
        other => panic!("not an invalid-file error: {other}"),
    }
    let text = err.to_string();
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(text.contains(&format!(": {field}: ")), "{text}");
}

#[test]
fn a_corrupted_reply_names_the_file_and_the_field() {
    let (path, err) = load_with_reply("bad-status", |r| r["status"] = json!("abc"));
    assert_names(&err, &path, "status");
    assert!(
        err.to_string()
            .ends_with("status: expected a whole number ≥ 0, got \"abc\""),
        "{err}"
    );

    let (path, err) = load_with_reply("bad-outcome", |r| r["outcome"] = json!("teapot"));
    assert_names(&err, &path, "outcome");
    let (path, err) = load_with_reply("typo", |r| r["bodyBase46"] = json!(""));
    assert_names(&err, &path, "bodyBase46");
    let (path, err) = load_with_reply("no-body", |r| {
        r.as_object_mut().unwrap().remove("body");
    });
    assert_names(&err, &path, "body");
    let (path, err) = load_with_reply("number-body", |r| r["body"] = json!(12));
    assert_names(&err, &path, "body");
    let (path, err) = load_with_reply("bad-base64", |r| {
        r.as_object_mut().unwrap().remove("body");
        r["bodyBase64"] = json!("*not base64*");
    });
    assert_names(&err, &path, "bodyBase64");
    let (path, err) = load_with_reply("disagree", |r| r["elapsedMs"] = json!(250));
    assert_names(&err, &path, "elapsedMs");
    let (path, err) = load_with_reply("kind", |r| {
        r["outcome"] = json!("transport");
        r["errorKind"] = json!("gremlins");
        r["error"] = json!("x");
        for f in ["status", "contentType", "body"] {
            r.as_object_mut().unwrap().remove(f);
        }
    });
    assert_names(&err, &path, "errorKind");

    // Not JSON at all: the file, no field.
    let (dir, folder) = one_exchange("not-json");
    let path = folder.join("reply.json");
    fs::write(&path, "{\"outcome\": \"http\", ").unwrap();
    let err = RecordedReplies::load(&dir).expect_err("broken");
    assert!(
        matches!(&err, RecordError::Invalid { field, .. } if field.is_empty()),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("{}: not valid JSON", path.display())),
        "{err}"
    );

    // Gone: the file.
    fs::remove_file(&path).unwrap();
    let err = RecordedReplies::load(&dir).expect_err("broken");
    assert!(
        matches!(&err, RecordError::Io { path: p, .. } if *p == path),
        "{err}"
    );
}

#[test]
fn a_corrupted_index_or_request_names_the_file_line_and_field() {
    let (dir, folder) = one_exchange("bad-index");
    let index = dir.join("index.jsonl");
    let good = fs::read_to_string(&index).unwrap();
    let mut line: Value = serde_json::from_str(good.trim()).unwrap();
    line["seq"] = json!(2);
    line["dir"] = json!("../elsewhere");
    fs::write(&index, format!("{good}{line}\n")).unwrap();
    let err = RecordedReplies::load(&dir).expect_err("broken");
    assert_names(&err, &index, "dir");
    assert!(
        matches!(err, RecordError::Invalid { line: Some(2), .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("{} line 2: dir: ", index.display()))
    );

    line["dir"] = json!(folder.file_name().unwrap().to_string_lossy());
    line["seq"] = json!(1);
    fs::write(&index, format!("{good}{line}\n")).unwrap();
    let err = RecordedReplies::load(&dir).expect_err("duplicate");
    assert_names(&err, &index, "seq");

    fs::write(&index, &good).unwrap();
    let request = folder.join("request.json");
    let mut review: Value = serde_json::from_slice(&fs::read(&request).unwrap()).unwrap();
    review["request"].as_object_mut().unwrap().remove("uid");
    fs::write(&request, review.to_string()).unwrap();
    let err = RecordedReplies::load(&dir).expect_err("no uid");
    assert_names(&err, &request, "request.uid");

    fs::remove_file(&index).unwrap();
    let err = RecordedReplies::load(&dir).expect_err("no index");
    assert!(matches!(err, RecordError::NoRecording { .. }), "{err}");
}

#[test]
fn recording_refuses_a_directory_that_holds_files() {
    let (dir, _) = one_exchange("not-empty");
    let err = Recorder::new(Counting::default(), &dir).expect_err("not empty");
    assert!(matches!(err, RecordError::NotEmpty { .. }), "{err}");
    let empty = scratch("empty");
    fs::create_dir_all(&empty).unwrap();
    Recorder::new(Counting::default(), &empty).expect("an empty directory is fine");
}

// ---------------------------------------------------------------------------------------------
// A hand-written recording
// ---------------------------------------------------------------------------------------------

/// `tests/fixtures/replay/record/handwritten`: a reply written by hand (milliseconds only, the
/// body as JSON) for the request the engine sends for `pod_create("web-0")`.
#[test]
fn a_hand_written_recording_answers_the_engine() {
    let url = "https://images.example.com/check";
    let configs = single("Validating", "policy", "images.example.com", url);
    let engine = Engine::new(&configs, EngineOptions::default());
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/replay/record/handwritten");
    let mut replies = RecordedReplies::load(&dir).expect("fixture loads");
    let got = block_on(dispatch(&engine, pod_create("web-0"), 0, &mut replies));
    assert_eq!(replies.missing(), []);
    assert!(!got.allowed);
    assert_eq!(
        got.status.as_ref().unwrap().message,
        "admission webhook \"images.example.com\" denied the request: image nginx:1.27 is not from the internal registry"
    );
    assert_eq!(got.calls[0].duration_ms, 12.5);
    assert_eq!(got.warnings, ["use registry.internal/nginx:1.27"]);
}
