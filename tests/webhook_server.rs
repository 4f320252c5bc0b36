//! The in-process webhook server answered over real TLS by the crate's HTTPS client, trusting the
//! minted CA through the call's caBundle, on HTTP/2 and HTTP/1.1.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hookscope::api::WebhookKind;
use hookscope::engine::call::{Endpoint, Replier, Reply, ReplyOutcome, WebhookCall};
use hookscope::engine::{Attributes, Engine, EngineOptions};
use hookscope::transport::{HttpsOptions, HttpsReplier};
use hookscope::webhook_server::{
    Answer, Behaviour, Behaviours, Pki, ServerError, ServerOptions, WebhookServer,
};
use serde_json::{Value, json};

const SERVICE: &str = "webhook.test.svc";

fn behaviours() -> Behaviours {
    Behaviours::new()
        .route("/allow", Behaviour::Allow)
        .route("/deny", Behaviour::deny(403, "no entry"))
        .route(
            "/add-label",
            Behaviour::add_label("example.com/added", "yes"),
        )
        .route("/warn", Behaviour::warn("mind the gap"))
        .route("/slow", Behaviour::Slow(Duration::from_millis(150)))
        .route(
            "/annotate",
            Behaviour::respond(Answer::allow().with_audit_annotation("key1", "value1")),
        )
        .route(
            "custom",
            Behaviour::custom(|review| {
                let op = review.operation.unwrap_or("none").to_string();
                Answer::deny(
                    418,
                    format!("{} {op} on {}", review.api_version, review.path),
                )
            }),
        )
}

/// A call as the engine would make it to `https://127.0.0.1:<port><path>`.
fn call(server: &WebhookServer, path: &str, ca: &Pki, http2: bool, review: Value) -> WebhookCall {
    let uid = review["request"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    WebhookCall {
        phase: WebhookKind::Validating,
        round: 0,
        index: 0,
        configuration: "cfg".into(),
        webhook: "hook.example.com".into(),
        uid: "cfg/hook.example.com/0".into(),
        endpoint: Endpoint {
            url: format!("{}?timeout=10s", server.url(path)),
            server_name: "127.0.0.1".into(),
            port: server.port(),
            auth_target: server.addr().to_string(),
            service: None,
            http2,
        }
        .into(),
        ca_bundle: Some(ca.ca_pem().as_bytes().into()),
        timeout: Duration::from_secs(10),
        review_version: "v1",
        request_uid: uid,
        body: serde_json::to_vec(&review).expect("json").into(),
    }
}

fn review(version: &str, uid: &str, labels: Option<Value>) -> Value {
    let mut metadata = json!({"name": "web", "namespace": "shop"});
    if let Some(labels) = labels {
        metadata["labels"] = labels;
    }
    json!({
        "apiVersion": format!("admission.k8s.io/{version}"),
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": metadata},
        },
    })
}

async fn send(replier: &mut HttpsReplier, call: WebhookCall) -> Reply {
    let mut replies = replier.reply(&[call]).await;
    assert_eq!(replies.len(), 1);
    replies.remove(0)
}

/// Status, content type and the body parsed as JSON.
fn http(reply: &Reply) -> (u16, Option<&str>, Value) {
    match &reply.outcome {
        ReplyOutcome::Http {
            status,
            content_type,
            body,
        } => (
            *status,
            content_type.as_deref(),
            serde_json::from_slice(body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned())),
        ),
        other => panic!("expected an HTTP response, got {other:?}"),
    }
}

fn patch(response: &Value) -> Value {
    let b64 = response["patch"].as_str().expect("patch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    serde_json::from_slice(&bytes).expect("patch json")
}

/// Every behaviour once, checked; returns nothing, panics on a wrong answer.
async fn every_behaviour(http2: bool) {
    let pki = Pki::mint(&[]).expect("pki");
    let server = WebhookServer::start(&pki, behaviours(), ServerOptions::default())
        .await
        .expect("server");
    let mut replier = HttpsReplier::new(HttpsOptions::default());
    let mut ask = async |path: &str, review: Value| {
        let reply = send(&mut replier, call(&server, path, &pki, http2, review)).await;
        let (status, content_type, body) = http(&reply);
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(content_type, Some("application/json"), "{path}");
        assert_eq!(body["kind"], "AdmissionReview", "{path}");
        (body, reply.elapsed)
    };

    let (v, _) = ask("/allow", review("v1", "u-allow", None)).await;
    assert_eq!(
        v,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": "u-allow", "allowed": true}})
    );

    let (v, _) = ask("/deny", review("v1", "u-deny", None)).await;
    assert_eq!(
        v["response"],
        json!({"uid": "u-deny", "allowed": false, "status": {"code": 403, "message": "no entry"}})
    );

    let (v, _) = ask("/add-label", review("v1", "u-none", None)).await;
    assert_eq!(v["response"]["uid"], "u-none");
    assert_eq!(v["response"]["patchType"], "JSONPatch");
    assert_eq!(
        patch(&v["response"]),
        json!([{"op": "add", "path": "/metadata/labels", "value": {"example.com/added": "yes"}}])
    );
    let (v, _) = ask(
        "/add-label",
        review("v1", "u-some", Some(json!({"app": "web"}))),
    )
    .await;
    assert_eq!(
        patch(&v["response"]),
        json!([{"op": "add", "path": "/metadata/labels/example.com~1added", "value": "yes"}])
    );

    let (v, _) = ask("/warn", review("v1", "u-warn", None)).await;
    assert_eq!(
        v["response"],
        json!({"uid": "u-warn", "allowed": true, "warnings": ["mind the gap"]})
    );

    let started = Instant::now();
    let (v, elapsed) = ask("/slow", review("v1", "u-slow", None)).await;
    assert_eq!(v["response"], json!({"uid": "u-slow", "allowed": true}));
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");

    let (v, _) = ask("/annotate", review("v1", "u-ann", None)).await;
    assert_eq!(
        v["response"],
        json!({"uid": "u-ann", "allowed": true, "auditAnnotations": {"key1": "value1"}})
    );

    let (v, _) = ask("/custom", review("v1beta1", "u-custom", None)).await;
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(
        v["response"],
        json!({"uid": "u-custom", "allowed": false,
               "status": {"code": 418, "message": "admission.k8s.io/v1beta1 CREATE on /custom"}})
    );

    // v1beta1 in, v1beta1 out, for fixed answers too; a uid needing escapes is echoed intact.
    let (v, _) = ask("/allow", review("v1beta1", "quote\"back\\slash", None)).await;
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(v["response"]["uid"], "quote\"back\\slash");

    assert_eq!(server.requests_to("/allow"), 2);
    assert_eq!(server.requests_to("/add-label"), 2);
    assert_eq!(server.requests_to("/custom"), 1);
    assert_eq!(server.total_requests(), 9);
    // Keep-alive: every call went over the one connection.
    assert_eq!(server.connections(), 1);
    assert_eq!(server.handshakes(), 1);
    assert_eq!(server.http2_connections(), u64::from(http2));
}

#[tokio::test(flavor = "current_thread")]
async fn every_behaviour_over_http2() {
    every_behaviour(true).await;
}

#[tokio::test(flavor = "current_thread")]
async fn every_behaviour_over_http1() {
    every_behaviour(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_refused_by_the_server_falls_back_to_http1() {
    let pki = Pki::mint(&[]).expect("pki");
    let opts = ServerOptions {
        http2: false,
        ..ServerOptions::default()
    };
    let server = WebhookServer::start(&pki, behaviours(), opts)
        .await
        .expect("server");
    let mut replier = HttpsReplier::new(HttpsOptions::default());
    let reply = send(
        &mut replier,
        call(&server, "/allow", &pki, true, review("v1", "u", None)),
    )
    .await;
    assert_eq!(http(&reply).2["response"]["allowed"], true);
    assert_eq!(server.http2_connections(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn unknown_paths_and_bad_bodies() {
    let pki = Pki::mint(&[]).expect("pki");
    let server = WebhookServer::start(&pki, behaviours(), ServerOptions::default())
        .await
        .expect("server");
    let mut replier = HttpsReplier::new(HttpsOptions::default());

    let reply = send(
        &mut replier,
        call(&server, "/nowhere", &pki, true, review("v1", "u", None)),
    )
    .await;
    let (status, content_type, body) = http(&reply);
    assert_eq!(status, 404);
    assert_eq!(content_type, Some("text/plain; charset=utf-8"));
    assert_eq!(body, Value::String("404 page not found\n".into()));
    assert_eq!(server.unrouted_requests(), 1);

    let mut bad = call(&server, "/allow", &pki, true, json!({}));
    bad.body = b"not json".to_vec().into();
    let (status, _, _) = http(&send(&mut replier, bad).await);
    assert_eq!(status, 400);
    let (status, _, body) = http(
        &send(
            &mut replier,
            call(
                &server,
                "/allow",
                &pki,
                true,
                json!({"kind": "AdmissionReview"}),
            ),
        )
        .await,
    );
    assert_eq!(status, 400);
    assert_eq!(
        body,
        Value::String("AdmissionReview has no request\n".into())
    );
    assert_eq!(server.requests_to("/allow"), 2);
    assert_eq!(
        server.request_counts()[0],
        ("/allow".to_string(), 2),
        "paths in the order given"
    );
}

#[test]
fn non_loopback_addresses_are_refused_unless_allowed() {
    let pki = Pki::mint(&[]).expect("pki");
    for addr in [
        "0.0.0.0:0",
        "192.0.2.10:8443",
        "[::]:0",
        "[::ffff:10.0.0.1]:0",
    ] {
        let opts = ServerOptions {
            listen: addr.parse().expect("addr"),
            ..ServerOptions::default()
        };
        match WebhookServer::start_on_thread(&pki, Behaviours::standard(), opts, 1) {
            Err(ServerError::NotLoopback(a)) => assert_eq!(a.to_string(), addr),
            other => panic!("{addr}: expected a refusal, got {other:?}"),
        }
    }
    // Allowed explicitly, the address is tried (this one is not ours, so binding fails).
    let opts = ServerOptions {
        listen: "192.0.2.10:8443".parse().expect("addr"),
        allow_non_loopback: true,
        ..ServerOptions::default()
    };
    assert!(matches!(
        WebhookServer::start_on_thread(&pki, Behaviours::standard(), opts, 1),
        Err(ServerError::Bind { .. })
    ));
    // A loopback address is accepted.
    let opts = ServerOptions {
        listen: "127.0.0.1:0".parse().expect("addr"),
        ..ServerOptions::default()
    };
    let server =
        WebhookServer::start_on_thread(&pki, Behaviours::standard(), opts, 1).expect("loopback");
    assert!(server.addr().ip().is_loopback());
    assert_ne!(server.port(), 0);
}

/// On a thread of its own, reached through a service name in the certificate, with the whole
/// engine dispatching a mutating and a validating webhook to it.
#[test]
fn engine_dispatch_through_a_service_name() {
    let pki = Pki::mint(&[SERVICE]).expect("pki");
    assert!(pki.server_names().iter().any(|n| n == SERVICE));
    let server =
        WebhookServer::start_on_thread(&pki, Behaviours::standard(), ServerOptions::default(), 2)
            .expect("server");
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.ca_pem());
    let yaml = format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: label}}
webhooks:
- name: label.example.com
  clientConfig:
    service: {{name: webhook, namespace: test, path: /add-label, port: 8443}}
    caBundle: {ca}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}}]
  sideEffects: None
  admissionReviewVersions: [v1beta1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: warn}}
webhooks:
- name: warn.example.com
  clientConfig: {{url: "{url}", caBundle: {ca}}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
        url = server.url("/warn"),
    );
    let configs: Vec<_> = hookscope::config::parse_documents(&yaml, "inline.yaml")
        .into_iter()
        .map(|loaded| {
            let mut loaded = loaded.expect("valid");
            loaded.apply_defaults();
            loaded.configuration
        })
        .collect();
    let engine = Engine::new(&configs, EngineOptions::default());
    let request: Attributes = serde_json::from_value(json!({
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "shop", "name": "web",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}},
    }))
    .expect("attributes");
    let resolve: SocketAddr = server.addr();
    let mut replier = HttpsReplier::new(HttpsOptions {
        resolve: [(format!("{SERVICE}:8443"), resolve)].into(),
        ..HttpsOptions::default()
    });
    let (outcome, _) = common::dispatch_on_runtime(&engine, request, &mut replier);
    assert!(outcome.allowed, "{outcome:?}");
    assert_eq!(
        outcome.object.as_ref().expect("object")["metadata"]["labels"],
        json!({"hookscope.dev/webhook": "added"})
    );
    assert_eq!(
        outcome.warnings,
        vec!["warning from hookscope webhook server".to_string()]
    );
    assert_eq!(server.requests_to("/add-label"), 1);
    assert_eq!(server.requests_to("/warn"), 1);
    assert_eq!(server.http2_connections(), 1, "the URL webhook on loopback");
}
