//! Webhooks that misbehave on the wire, each class driven through the whole engine over real
//! HTTPS against the hostile webhook (`tests/common/hostile.rs`, one behaviour per path): the
//! verdict under `failurePolicy: Fail` and `Ignore`, the reason the client reads, and the `code`
//! of `apiserver_admission_webhook_request_total` in 1.33 and 1.34. `docs/wire.md` is this
//! file's table in prose; a row there is a row here.

mod common;

use common::hostile::{HostileServer, Listener, Seen};
use common::{TestPki, TestResponse, WebhookServer, handler, service_call, url_call};
use hookscope::KubeVersion;
use hookscope::engine::call::{Replier, ReplyOutcome, WebhookCall};
use hookscope::engine::{Attributes, Engine, EngineOptions, Outcome};
use hookscope::metrics::Metrics;
use hookscope::transport::WebhookAuth;
use hookscope::transport::{HttpsOptions, HttpsReplier};
use serde_json::{Value, json};

const WEBHOOK: &str = "hostile.example.com";
/// The uid of the first review a dispatch sends ([`SequentialIds`] from 0).
const FIRST_UID: &str = "00000000-0000-4000-8000-000000000001";

/// What kube-apiserver makes of a class.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// The webhook's final answer admits the request (metric code 200).
    Allowed,
    /// The final answer's patch is applied: the label it adds is on the object.
    Patched,
    /// A calling error: rejected under Fail, admitted (failing open) under Ignore, with this
    /// reason and these metric codes (1.33, 1.34).
    Fails {
        reason: String,
        code_133: &'static str,
        code_134: &'static str,
    },
}

/// What one dispatch showed.
#[derive(Debug, Clone, PartialEq)]
struct Seen1 {
    allowed: bool,
    reason: Option<String>,
    code: String,
    /// The `rejected` label: a failure that failed open is not a rejection.
    rejected: bool,
    failed_open: bool,
    labels: Value,
    warnings: Vec<String>,
}

fn configs(
    kind: &str,
    url: &str,
    ca: &str,
    policy: &str,
) -> Vec<hookscope::api::WebhookConfiguration> {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let yaml = format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: {kind}WebhookConfiguration
metadata: {{name: hostile}}
webhooks:
- name: {WEBHOOK}
  clientConfig: {{url: "{url}", caBundle: {ca}}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}}]
  failurePolicy: {policy}
  sideEffects: None
  timeoutSeconds: 10
  admissionReviewVersions: [v1]
"#
    );
    hookscope::config::parse_documents(&yaml, "wire.yaml")
        .into_iter()
        .map(|loaded| {
            let mut loaded = loaded.expect("valid configuration");
            loaded.apply_defaults();
            loaded.configuration
        })
        .collect()
}

fn pod() -> Attributes {
    serde_json::from_value(json!({
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "shop", "name": "web",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}},
    }))
    .expect("attributes")
}

/// One request through the engine, the webhook at `path` on the hostile server.
fn dispatch(
    server: &HostileServer,
    pki: &TestPki,
    path: &str,
    kind: &str,
    policy: &str,
    release: KubeVersion,
) -> (Outcome, Metrics) {
    let configs = configs(kind, &server.url(path), pki.ca_pem(), policy);
    let engine = Engine::new(&configs, EngineOptions::for_version(release));
    let mut replier = HttpsReplier::new(HttpsOptions::default());
    common::dispatch_on_runtime(&engine, pod(), &mut replier)
}

fn observe(outcome: &Outcome, metrics: &Metrics) -> Seen1 {
    let labels_of = |family: &str| {
        metrics
            .samples()
            .into_iter()
            .filter(|s| s.name == family)
            .map(|s| s.labels)
            .collect::<Vec<_>>()
    };
    let requests = labels_of("apiserver_admission_webhook_request_total");
    assert_eq!(requests.len(), 1, "one call counted: {requests:?}");
    let label = |name: &str| {
        requests[0]
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .expect("label")
    };
    let (code, rejected) = (label("code"), label("rejected"));
    let call = outcome.calls.first().expect("a call");
    Seen1 {
        allowed: outcome.allowed,
        reason: call.error.as_deref().map(str::to_string),
        code,
        rejected: rejected == "true",
        failed_open: !labels_of("apiserver_admission_webhook_fail_open_count").is_empty(),
        labels: outcome
            .object
            .as_ref()
            .map(|o| o.value()["metadata"]["labels"].clone())
            .unwrap_or(Value::Null),
        warnings: outcome.warnings.clone(),
    }
}

/// The dispatches [`check`] makes of a class.
const RUNS: usize = 5;

/// Runs a class under both policies and both releases, and the first run again, and checks what
/// each shows; returns the outcome seen under Fail in 1.33.
fn check(server: &HostileServer, pki: &TestPki, path: &str, kind: &str, expect: &Expect) -> Seen1 {
    let mut first = None;
    // The first run is repeated last: the same input must give the same answer every time.
    let runs = [
        ("1.33", "Fail"),
        ("1.33", "Ignore"),
        ("1.34", "Fail"),
        ("1.34", "Ignore"),
        ("1.33", "Fail"),
    ];
    for (i, (release, policy)) in runs.into_iter().enumerate() {
        let version: KubeVersion = release.parse().expect("release");
        {
            let (outcome, metrics) = dispatch(server, pki, path, kind, policy, version);
            let seen = observe(&outcome, &metrics);
            let at = format!("{path} {policy} {release}: {seen:?}");
            match expect {
                Expect::Allowed | Expect::Patched => {
                    assert!(seen.allowed, "{at}");
                    assert_eq!(seen.reason, None, "{at}");
                    assert_eq!(seen.code, "200", "{at}");
                    assert!(!seen.failed_open && !seen.rejected, "{at}");
                    if *expect == Expect::Patched {
                        assert_eq!(seen.labels, json!({"hostile.test/patched": "yes"}), "{at}");
                    }
                }
                Expect::Fails {
                    reason,
                    code_133,
                    code_134,
                } => {
                    assert_eq!(seen.allowed, policy == "Ignore", "{at}");
                    assert_eq!(seen.failed_open, policy == "Ignore", "{at}");
                    assert_eq!(seen.rejected, policy == "Fail", "{at}");
                    let full = format!("failed calling webhook \"{WEBHOOK}\": {reason}");
                    assert_eq!(seen.reason.as_deref(), Some(full.as_str()), "{at}");
                    let code = if release == "1.33" {
                        code_133
                    } else {
                        code_134
                    };
                    assert_eq!(seen.code, *code, "{at}");
                    if policy == "Fail" {
                        let status = outcome.status.as_ref().expect("status");
                        assert_eq!(status.code, 500, "{at}");
                        assert_eq!(
                            status.message,
                            format!("Internal error occurred: {full}"),
                            "{at}"
                        );
                    }
                }
            }
            match &first {
                None => first = Some(seen),
                Some(f) if i == runs.len() - 1 => assert_eq!(*f, seen, "{path}: a repeated run"),
                Some(_) => {}
            }
        }
    }
    first.expect("ran")
}

fn fails(reason: impl Into<String>, code_133: &'static str, code_134: &'static str) -> Expect {
    Expect::Fails {
        reason: reason.into(),
        code_133,
        code_134,
    }
}

/// A calling error from the HTTP client (not an API status): 400 before 1.34, 503 from it.
fn client_error(reason: impl Into<String>) -> Expect {
    fails(reason, "400", "503")
}

fn requests_to(server: &HostileServer) -> Vec<(Listener, String, String, usize)> {
    server
        .seen()
        .iter()
        .map(|s: &Seen| (s.listener, s.method.clone(), s.target.clone(), s.body.len()))
        .collect()
}

#[test]
fn redirects_307_and_308_resend_the_post_anywhere_and_the_final_answer_counts() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    for (path, listener) in [
        ("/redirect/307/same/allow", Listener::Main),
        ("/redirect/308/port/allow", Listener::Other),
        ("/redirect/307/host/allow", Listener::Main),
        ("/redirect/308/plain/allow", Listener::Plain),
    ] {
        server.clear();
        check(&server, &pki, path, "Validating", &Expect::Allowed);
        let seen = server.seen();
        assert_eq!(seen.len(), 2 * RUNS, "{path}: two requests per dispatch");
        let (first, hop) = (&seen[0], &seen[1]);
        assert_eq!(hop.listener, listener, "{path}");
        assert_eq!(
            (hop.method.as_str(), hop.target.as_str()),
            ("POST", "/allow")
        );
        assert_eq!(hop.body, first.body, "{path}: the review sent again");
        // As kube-apiserver 1.33.3 sends it: Go's order, the Referer among the sorted headers.
        let mut names = vec![
            "Host",
            "User-Agent",
            "Content-Length",
            "Accept",
            "Content-Type",
        ];
        if listener != Listener::Plain {
            names.push("Referer");
        }
        names.push("Accept-Encoding");
        assert_eq!(hop.header_names(), names, "{path}");
        let referer = hop.header("Referer");
        if listener == Listener::Plain {
            assert_eq!(referer, None, "{path}: no Referer from https to http");
        } else {
            assert_eq!(
                referer,
                Some(server.url(&format!("{path}?timeout=10s")).as_str()),
                "{path}"
            );
        }
    }
    server.clear();
    check(
        &server,
        &pki,
        "/redirect/307/same/patch",
        "Mutating",
        &Expect::Patched,
    );
}

#[test]
fn redirects_301_302_303_resend_a_get_without_the_review() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    // The webhook answers the GET with a review for no uid: the apiserver verifies the uid.
    let invalid = client_error(format!(
        "received invalid webhook response: expected response.uid=\"{FIRST_UID}\", got \"\""
    ));
    let Expect::Fails { reason, .. } = invalid else {
        unreachable!()
    };
    for code in ["301", "302", "303"] {
        server.clear();
        let path = format!("/redirect/{code}/same/allow");
        check(
            &server,
            &pki,
            &path,
            "Validating",
            &fails(reason.clone(), "503", "503"),
        );
        let seen = requests_to(&server);
        assert_eq!(
            seen[..2],
            [
                (
                    Listener::Main,
                    "POST".to_string(),
                    format!("{path}?timeout=10s"),
                    seen[0].3
                ),
                (Listener::Main, "GET".to_string(), "/allow".to_string(), 0),
            ]
        );
        let get = &server.seen()[1];
        assert_eq!(get.header("Content-Length"), None, "{code}");
        // The original request's headers are carried, Content-Type included.
        assert_eq!(
            get.header_names(),
            [
                "Host",
                "User-Agent",
                "Accept",
                "Content-Type",
                "Referer",
                "Accept-Encoding"
            ]
        );
    }
}

#[test]
fn ten_requests_at_most_then_stopped_after_10_redirects() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    check(&server, &pki, "/chain/9", "Validating", &Expect::Allowed);
    assert_eq!(server.seen().len(), RUNS * 10);
    server.clear();
    // Go names the refused redirect's raw Location.
    check(
        &server,
        &pki,
        "/chain/10",
        "Validating",
        &client_error("failed to call webhook: Post \"/chain/0\": stopped after 10 redirects"),
    );
    assert_eq!(server.seen().len(), RUNS * 10);
}

#[test]
fn a_redirect_without_location_is_the_answer() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    check(
        &server,
        &pki,
        "/redirect-without-location/302",
        "Validating",
        &fails(
            "failed to call webhook: the server responded with the status code 302 but did not return more information",
            "302",
            "302",
        ),
    );
    assert_eq!(server.seen().len(), RUNS);
}

#[test]
fn content_types_and_encodings_as_client_go_decodes_them() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    let rows = [
        (
            "/content-type/unparsable",
            fails(
                "failed to call webhook: Internal error occurred: mime: invalid media parameter",
                "500",
                "500",
            ),
        ),
        ("/content-type/text", Expect::Allowed),
        ("/yaml", Expect::Allowed),
        ("/bom", Expect::Allowed),
        ("/encoding/br", Expect::Allowed),
        (
            "/no-content",
            client_error(
                "failed to call webhook: 0-length response with status code: 204 and content type: application/json",
            ),
        ),
        (
            "/empty",
            client_error(
                "failed to call webhook: 0-length response with status code: 200 and content type: application/json",
            ),
        ),
    ];
    for (path, expect) in rows {
        check(&server, &pki, path, "Validating", &expect);
    }
}

#[test]
fn framing_failures_as_go_net_http_reports_them() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    let broken = |path: &str, cause: &str| {
        client_error(format!(
            "failed to call webhook: Post \"{}\": net/http: HTTP/1.x transport connection broken: {cause}",
            server.url(&format!("{path}?timeout=10s"))
        ))
    };
    let body = |cause: &str| {
        client_error(format!(
            "failed to call webhook: unexpected error when reading response body. Please retry. Original error: {cause}"
        ))
    };
    let rows = [
        (
            "/framing/bad-length",
            broken("/framing/bad-length", "bad Content-Length \"1x\""),
        ),
        (
            "/framing/transfer-encoding-gzip",
            broken(
                "/framing/transfer-encoding-gzip",
                "unsupported transfer encoding: \"gzip\"",
            ),
        ),
        ("/framing/short-body", body("unexpected EOF")),
        (
            "/framing/cut-head",
            broken(
                "/framing/cut-head",
                "malformed MIME header: missing colon: \"Content-Le\"",
            ),
        ),
        (
            "/framing/many-1xx",
            broken("/framing/many-1xx", "unexpected EOF"),
        ),
        (
            "/framing/no-colon",
            broken(
                "/framing/no-colon",
                "malformed MIME header: missing colon: \"NoColon\"",
            ),
        ),
        (
            "/framing/bad-name",
            broken(
                "/framing/bad-name",
                "malformed MIME header line: Bad(Name): v",
            ),
        ),
        ("/encoding/gzip-not-gzip", body("gzip: invalid header")),
    ];
    for (path, expect) in rows {
        check(&server, &pki, path, "Validating", &expect);
    }
}

#[test]
fn tls_endings_as_go_crypto_tls_reads_them() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    check(
        &server,
        &pki,
        "/tls/no-close-notify",
        "Validating",
        &Expect::Allowed,
    );
    check(
        &server,
        &pki,
        "/tls/truncated-record",
        "Validating",
        &client_error(
            "failed to call webhook: unexpected error when reading response body. Please retry. Original error: unexpected EOF",
        ),
    );
    // Cut inside the first record: not a byte of the answer was read.
    let url = server.url("/tls/truncated-first-record?timeout=10s");
    check(
        &server,
        &pki,
        "/tls/truncated-first-record",
        "Validating",
        &client_error(format!(
            "failed to call webhook: Post \"{url}\": unexpected EOF"
        )),
    );
}

#[test]
fn limits_hold_whatever_the_reads() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    check(
        &server,
        &pki,
        "/headers/at-limit",
        "Validating",
        &Expect::Allowed,
    );
    let over = server.url("/headers/over-limit?timeout=10s");
    check(
        &server,
        &pki,
        "/headers/over-limit",
        "Validating",
        &client_error(format!(
            "failed to call webhook: Post \"{over}\": net/http: HTTP/1.x transport connection broken: \
             net/http: server response headers exceeded 10485760 bytes; aborted"
        )),
    );
    // No cap on the body (client-go reads it whole).
    check(&server, &pki, "/large-body", "Validating", &Expect::Allowed);
    // The warning recorder: past 4096 runes every warning is cut to 256 runes, and warnings stop
    // once 4096 runes are written again.
    let seen = check(&server, &pki, "/warnings", "Validating", &Expect::Allowed);
    assert_eq!(seen.warnings.len(), 16, "{:?}", seen.warnings);
    for (i, w) in seen.warnings.iter().enumerate() {
        assert_eq!(w.chars().count(), 256);
        assert!(w.starts_with(&format!("{i:02} ")));
    }
}

/// One call through the transport alone.
fn call_once(replier: &mut HttpsReplier, call: WebhookCall) -> ReplyOutcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut replies = runtime.block_on(replier.reply(&[call]));
    replies.remove(0).outcome
}

fn allowed_body(outcome: &ReplyOutcome) -> Value {
    match outcome {
        ReplyOutcome::Http {
            status: 200, body, ..
        } => serde_json::from_slice(body).expect("json"),
        other => panic!("expected a 200 answer, got {other:?}"),
    }
}

const TEN_SECONDS: std::time::Duration = std::time::Duration::from_secs(10);

#[test]
fn every_hop_carries_the_credentials_as_client_go_round_trippers_add_them() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    let port = server.port();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nusers:\n- name: \"127.0.0.1:{port}\"\n  user:\n    token: t0k\n"
    );
    let mut replier = HttpsReplier::new(HttpsOptions {
        auth: WebhookAuth::parse(&kubeconfig).expect("kubeconfig"),
        ..HttpsOptions::default()
    });
    // To another host, and on to plain HTTP: the token goes along (it is added below Go's
    // client, which strips only the headers of the original request).
    for path in ["/redirect/307/host/allow", "/redirect/307/plain/allow"] {
        server.clear();
        let call = url_call(&server.url(path), Some(pki.ca_pem()), TEN_SECONDS);
        allowed_body(&call_once(&mut replier, call));
        let seen = server.seen();
        assert_eq!(seen.len(), 2, "{path}");
        for s in &seen {
            assert_eq!(s.header("Authorization"), Some("Bearer t0k"), "{path}");
        }
        // As kube-apiserver 1.33.3 sends it (an admission kubeconfig with a token).
        let mut names = vec![
            "Host",
            "User-Agent",
            "Content-Length",
            "Accept",
            "Authorization",
            "Content-Type",
        ];
        if seen[1].listener != Listener::Plain {
            names.push("Referer");
        }
        names.push("Accept-Encoding");
        assert_eq!(seen[1].header_names(), names, "{path}");
    }
}

#[test]
fn a_service_webhook_follows_a_redirect_to_another_port() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    let mut replier = HttpsReplier::new(HttpsOptions {
        resolve: [(
            format!("{}:443", common::SERVICE_HOST),
            ([127, 0, 0, 1], server.port()).into(),
        )]
        .into(),
        ..HttpsOptions::default()
    });
    let call = service_call(
        "webhook-test",
        "default",
        443,
        "/redirect/307/port/allow",
        Some(pki.ca_pem()),
        TEN_SECONDS,
    );
    let uid = call.request_uid.clone();
    let body = allowed_body(&call_once(&mut replier, call));
    assert_eq!(body["response"]["uid"], uid.as_str());
    let seen = server.seen();
    assert_eq!(
        (seen[1].listener, seen[1].header("Host")),
        (
            Listener::Other,
            Some(format!("127.0.0.1:{}", server.other_port()).as_str())
        )
    );
}

#[test]
fn a_timeout_after_a_redirect_names_the_hop() {
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    let mut replier = HttpsReplier::new(HttpsOptions::default());
    let call = url_call(
        &server.url("/redirect/307/same/hang"),
        Some(pki.ca_pem()),
        // Time enough for the first hop however loaded the machine: the deadline must pass at
        // the second.
        std::time::Duration::from_secs(5),
    );
    match call_once(&mut replier, call) {
        ReplyOutcome::Transport(e) => assert_eq!(
            e.detail,
            format!(
                "Post \"{}\": context deadline exceeded",
                server.url("/hang")
            )
        ),
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn http2_answers_may_carry_headers_up_to_go_s_limit() {
    let pki = TestPki::new();
    // 64 KiB of headers: past hyper's default list size, far below Go's 10 MiB.
    let server = WebhookServer::start(
        &pki,
        handler(|r| {
            let uid = r.review_uid().unwrap_or_default();
            (0..16).fold(
                TestResponse::json(200, common::hostile::review(&uid, json!({}))),
                |answer, i| answer.with_header(&format!("x-filler-{i}"), &"f".repeat(4096)),
            )
        }),
    );
    let mut replier = HttpsReplier::new(HttpsOptions::default());
    let call = url_call(&server.url("/allow"), Some(pki.ca_pem()), TEN_SECONDS);
    allowed_body(&call_once(&mut replier, call));
    assert_eq!(server.requests()[0].version, "HTTP/2.0");
}

#[test]
fn redirects_are_followed_over_http2_too() {
    let pki = TestPki::new();
    let server = WebhookServer::start(
        &pki,
        handler(|r| match r.path_only() {
            "/moved" => {
                TestResponse::new(307, "text/plain", "moved").with_header("Location", "/allow")
            }
            "/seeOther" => {
                TestResponse::new(303, "text/plain", "").with_header("Location", "/allow")
            }
            "/allow" => {
                let uid = r.review_uid().unwrap_or_default();
                TestResponse::json(200, common::hostile::review(&uid, json!({})))
            }
            _ => TestResponse::not_found(),
        }),
    );
    let mut replier = HttpsReplier::new(HttpsOptions::default());
    for path in ["/moved", "/seeOther"] {
        let call = url_call(&server.url(path), Some(pki.ca_pem()), TEN_SECONDS);
        assert!(call.endpoint.http2);
        allowed_body(&call_once(&mut replier, call));
    }
    let reqs = server.requests();
    let seen: Vec<(&str, &str, &str, usize)> = reqs
        .iter()
        .map(|r| {
            (
                r.version.as_str(),
                r.method.as_str(),
                r.path.as_str(),
                r.body.len(),
            )
        })
        .collect();
    let posted = reqs[0].body.len();
    assert_eq!(
        seen,
        [
            ("HTTP/2.0", "POST", "/moved?timeout=10s", posted),
            ("HTTP/2.0", "POST", "/allow", posted),
            ("HTTP/2.0", "POST", "/seeOther?timeout=10s", posted),
            ("HTTP/2.0", "GET", "/allow", 0),
        ]
    );
    assert_eq!(
        reqs[1].header("referer"),
        Some(server.url("/moved?timeout=10s").as_str())
    );
}

/// Serves the hostile webhook until the process is stopped, to check the table against a real
/// kube-apiserver (docs/wire.md says how): writes the CA to `$HOSTILE_DIR/ca.pem` and the three
/// ports (main, other, plain) to `$HOSTILE_DIR/ports`, and keeps `$HOSTILE_DIR/seen` up to date
/// with the requests received (listener, method, target, body length, headers).
#[test]
#[ignore = "serves until stopped: for checking the table against a real kube-apiserver"]
fn serve_the_hostile_webhook() {
    let dir = std::path::PathBuf::from(std::env::var("HOSTILE_DIR").expect("HOSTILE_DIR"));
    let pki = TestPki::new();
    let server = HostileServer::start(&pki);
    std::fs::write(dir.join("ca.pem"), pki.ca_pem()).expect("ca.pem");
    let ports = format!(
        "{} {} {}\n",
        server.port(),
        server.other_port(),
        server.plain_port()
    );
    std::fs::write(dir.join("ports"), ports).expect("ports");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let seen: String = server
            .seen()
            .iter()
            .map(|s| {
                format!(
                    "{:?} {} {} {} {:?}\n",
                    s.listener,
                    s.method,
                    s.target,
                    s.body.len(),
                    s.headers
                )
            })
            .collect();
        std::fs::write(dir.join("seen"), seen).expect("seen");
    }
}
