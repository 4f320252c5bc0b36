//! The HTTPS transport against a real TLS webhook server on loopback, certificates minted per test.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use common::{
    RefusingPort, ServerOptions, TestPki, TestResponse, WebhookServer, handler, resolve_to,
    service_call, upstream_handler, url_call, v1_allow_handler,
};
use hookscope::engine::call::{Replier, Reply, ReplyOutcome, TransportErrorKind, WebhookCall};
use hookscope::transport::{HttpsOptions, HttpsReplier, WebhookAuth};

const TEN_SECONDS: Duration = Duration::from_secs(10);

async fn one(replier: &mut HttpsReplier, call: WebhookCall) -> Reply {
    let mut replies = replier.reply(&[call]).await;
    assert_eq!(replies.len(), 1);
    replies.remove(0)
}

fn replier_for(pki: &TestPki) -> HttpsReplier {
    replier_with(pki, HttpsOptions::default())
}

fn replier_with(_pki: &TestPki, opts: HttpsOptions) -> HttpsReplier {
    HttpsReplier::new(opts)
}

fn http(reply: &Reply) -> (u16, Option<&str>, &[u8]) {
    match &reply.outcome {
        ReplyOutcome::Http {
            status,
            content_type,
            body,
        } => (*status, content_type.as_deref(), body.as_slice()),
        other => panic!("expected an HTTP response, got {other:?}"),
    }
}

fn transport_error(reply: &Reply) -> (TransportErrorKind, &str) {
    match &reply.outcome {
        ReplyOutcome::Transport(e) => (e.kind, e.detail.as_str()),
        other => panic!("expected a transport error, got {other:?}"),
    }
}

fn b64(data: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn kubeconfig_user(name: &str, user_yaml: &str) -> WebhookAuth {
    let text =
        format!("apiVersion: v1\nkind: Config\nusers:\n- name: \"{name}\"\n  user:\n{user_yaml}");
    WebhookAuth::parse(&text).expect("kubeconfig")
}

const ALLOW_BODY: &str =
    "{\"response\":{\"uid\":\"\",\"allowed\":true,\"auditAnnotations\":{\"key1\":\"value1\"}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_over_http1_sends_what_kube_apiserver_sends() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let mut replier = replier_for(&pki);
    let mut call = url_call(&server.url("/allow"), Some(pki.ca_pem()), TEN_SECONDS);
    Arc::make_mut(&mut call.endpoint).http2 = false;
    let body = call.body.clone();
    let reply = one(&mut replier, call).await;

    let (status, content_type, got) = http(&reply);
    assert_eq!(status, 200);
    assert_eq!(content_type, Some("application/json"));
    assert_eq!(got, ALLOW_BODY.as_bytes());

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/allow?timeout=10s");
    assert_eq!(req.alpn.as_deref(), Some("http/1.1"));
    assert_eq!(req.version, "HTTP/1.1");
    assert_eq!(req.header("user-agent"), Some("kube-apiserver-admission"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("accept"), Some("application/json, */*"));
    assert_eq!(req.header("host"), Some(server.addr().to_string().as_str()));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.body, body);
    assert!(!req.client_cert);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_url_negotiates_http2() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let mut replier = replier_for(&pki);
    let call = url_call(&server.url("/allow"), Some(pki.ca_pem()), TEN_SECONDS);
    assert!(call.endpoint.http2);
    let reply = one(&mut replier, call).await;
    assert_eq!(http(&reply).2, ALLOW_BODY.as_bytes());
    let req = &server.requests()[0];
    assert_eq!(req.alpn.as_deref(), Some("h2"));
    assert_eq!(req.version, "HTTP/2.0");
    assert_eq!(req.path, "/allow?timeout=10s");
    assert_eq!(req.header("user-agent"), Some("kube-apiserver-admission"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_url_is_verified_by_name() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let mut replier = replier_for(&pki);
    let url = format!("https://localhost:{}/noop", server.port());
    let reply = one(
        &mut replier,
        url_call(&url, Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(http(&reply).0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_endpoint_through_resolve_map_is_verified_against_service_name() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let opts = HttpsOptions {
        resolve: resolve_to(&server, "webhook-test.default.svc", 443),
        ..HttpsOptions::default()
    };
    let mut replier = replier_with(&pki, opts);
    let call = service_call(
        "webhook-test",
        "default",
        443,
        "/disallow",
        Some(pki.ca_pem()),
        TEN_SECONDS,
    );
    let reply = one(&mut replier, call).await;
    let (status, _, body) = http(&reply);
    assert_eq!(status, 200);
    assert_eq!(
        body,
        b"{\"response\":{\"uid\":\"\",\"allowed\":false,\"status\":{\"metadata\":{},\"code\":403}}}\n"
    );
    let req = &server.requests()[0];
    assert_eq!(req.header("host"), Some("webhook-test.default.svc:443"));
    assert_eq!(req.alpn.as_deref(), Some("http/1.1"));
    assert_eq!(req.path, "/disallow?timeout=10s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_name_not_in_certificate_fails_verification() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let opts = HttpsOptions {
        resolve: resolve_to(&server, "other.default.svc", 443),
        ..HttpsOptions::default()
    };
    let mut replier = replier_with(&pki, opts);
    let call = service_call(
        "other",
        "default",
        443,
        "/allow",
        Some(pki.ca_pem()),
        TEN_SECONDS,
    );
    let reply = one(&mut replier, call).await;
    let (kind, detail) = transport_error(&reply);
    assert_eq!(kind, TransportErrorKind::Tls);
    assert_eq!(
        detail,
        "tls: failed to verify certificate: x509: certificate is valid for localhost, webhook-test.default.svc, not other.default.svc"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_endpoint_without_resolve_entry_is_a_lookup_failure() {
    let pki = TestPki::new();
    let mut replier = replier_for(&pki);
    let call = service_call(
        "webhook-test",
        "default",
        443,
        "/allow",
        Some(pki.ca_pem()),
        TEN_SECONDS,
    );
    let reply = one(&mut replier, call).await;
    assert_eq!(
        transport_error(&reply),
        (
            TransportErrorKind::Dns,
            "dial tcp: lookup webhook-test.default.svc: no such host"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_ca_is_a_tls_error() {
    let pki = TestPki::new();
    let other = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let mut replier = replier_for(&pki);
    let reply = one(
        &mut replier,
        url_call(&server.url("/allow"), Some(other.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(
        transport_error(&reply),
        (
            TransportErrorKind::Tls,
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        )
    );
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_port_is_connection_refused() {
    let refusing = RefusingPort::new();
    let port = refusing.port();
    let pki = TestPki::new();
    let mut replier = replier_for(&pki);
    let url = format!("https://127.0.0.1:{port}/allow");
    let reply = one(
        &mut replier,
        url_call(&url, Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(
        transport_error(&reply),
        (
            TransportErrorKind::Connect,
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused").as_str()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_webhook_times_out_at_the_call_deadline() {
    let pki = TestPki::new();
    let server = WebhookServer::start(
        &pki,
        handler(|_| TestResponse::json(200, "{}").with_delay(ANSWER_AFTER)),
    );
    let mut replier = replier_for(&pki);
    let timeout = Duration::from_millis(700);
    let reply = one(
        &mut replier,
        url_call(&server.url("/slow"), Some(pki.ca_pem()), timeout),
    )
    .await;
    assert_eq!(
        transport_error(&reply),
        (TransportErrorKind::Timeout, "context deadline exceeded")
    );
    assert!(reply.elapsed >= timeout, "elapsed {:?}", reply.elapsed);
    // Ended at its own deadline, never waiting for the answer (half the answer's delay leaves
    // a loaded machine room).
    assert!(
        reply.elapsed < ANSWER_AFTER / 2,
        "elapsed {:?}",
        reply.elapsed
    );
}

/// When the slow webhook answers: far beyond the call's deadline.
const ANSWER_AFTER: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_status_error_is_a_malformed_response() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let opts = HttpsOptions {
        resolve: resolve_to(&server, "webhook-test.default.svc", 443),
        ..HttpsOptions::default()
    };
    let mut replier = replier_with(&pki, opts);
    let call = service_call(
        "webhook-test",
        "default",
        443,
        "/nonStatusError",
        Some(pki.ca_pem()),
        TEN_SECONDS,
    );
    let reply = one(&mut replier, call).await;
    assert_eq!(
        transport_error(&reply),
        (
            TransportErrorKind::Malformed,
            "net/http: HTTP/1.x transport connection broken: malformed HTTP response \"bad-http\""
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_without_answer_is_eof() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, handler(|_| TestResponse::close()));
    let mut replier = replier_for(&pki);
    let mut call = url_call(&server.url("/close"), Some(pki.ca_pem()), TEN_SECONDS);
    Arc::make_mut(&mut call.endpoint).http2 = false;
    let reply = one(&mut replier, call).await;
    assert_eq!(transport_error(&reply), (TransportErrorKind::Reset, "EOF"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_error_paths_are_reported_as_http() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let mut replier = replier_for(&pki);
    let cases: [(&str, u16, &str, &str); 4] = [
        (
            "/internalErr",
            500,
            "text/plain; charset=utf-8",
            "webhook internal server error\n",
        ),
        (
            "/unknown",
            404,
            "text/plain; charset=utf-8",
            "404 page not found\n",
        ),
        ("/nilResponse", 200, "application/json", "{}\n"),
        ("/allow/12345", 200, "application/json", ALLOW_BODY),
    ];
    for (path, status, content_type, body) in cases {
        let reply = one(
            &mut replier,
            url_call(&server.url(path), Some(pki.ca_pem()), TEN_SECONDS),
        )
        .await;
        let got = http(&reply);
        assert_eq!(got, (status, Some(content_type), body.as_bytes()), "{path}");
    }
}

fn client_cert_auth(pki: &TestPki, target: &str) -> WebhookAuth {
    kubeconfig_user(
        target,
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(pki.client_cert_pem()),
            b64(pki.client_key_pem())
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_is_presented_when_credentials_say_so() {
    let pki = TestPki::new();
    let opts = ServerOptions {
        require_client_cert: true,
        ..ServerOptions::default()
    };
    let server = WebhookServer::start_with(&pki, upstream_handler(), opts);
    let target = server.addr().to_string();

    let mut with_cert = replier_with(
        &pki,
        HttpsOptions {
            auth: client_cert_auth(&pki, &target),
            ..HttpsOptions::default()
        },
    );
    for http2 in [false, true] {
        let mut call = url_call(&server.url("/allow"), Some(pki.ca_pem()), TEN_SECONDS);
        Arc::make_mut(&mut call.endpoint).http2 = http2;
        let reply = one(&mut with_cert, call).await;
        assert_eq!(http(&reply).0, 200);
    }
    assert!(server.requests().iter().all(|r| r.client_cert));

    let mut without = replier_for(&pki);
    let mut call = url_call(&server.url("/allow"), Some(pki.ca_pem()), TEN_SECONDS);
    Arc::make_mut(&mut call.endpoint).http2 = false;
    let reply = one(&mut without, call).await;
    let (kind, detail) = transport_error(&reply);
    assert_eq!(kind, TransportErrorKind::Tls, "{detail}");
    assert_eq!(detail, "remote error: tls: certificate required");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_basic_auth_and_impersonation_headers_are_sent() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, v1_allow_handler());
    let port = server.port();
    let kubeconfig = format!(
        r#"apiVersion: v1
kind: Config
users:
- name: "localhost:{port}"
  user:
    token: secret-token
    as: user-a
    as-uid: user-a-uid
    as-groups: [g1, g2]
    as-user-extra:
      acme.com/project: [p1]
- name: "127.0.0.1:{port}"
  user:
    username: alice
    password: s3cret
"#
    );
    let auth = WebhookAuth::parse(&kubeconfig).expect("kubeconfig");
    let mut replier = replier_with(
        &pki,
        HttpsOptions {
            auth,
            ..HttpsOptions::default()
        },
    );
    let token_url = format!("https://localhost:{port}/token");
    one(
        &mut replier,
        url_call(&token_url, Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    one(
        &mut replier,
        url_call(&server.url("/basic"), Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    let reqs = server.requests();
    assert_eq!(reqs[0].header("authorization"), Some("Bearer secret-token"));
    assert_eq!(reqs[0].header("impersonate-user"), Some("user-a"));
    assert_eq!(reqs[0].header("impersonate-uid"), Some("user-a-uid"));
    assert_eq!(reqs[0].header_all("impersonate-group"), vec!["g1", "g2"]);
    assert_eq!(
        reqs[0].header("impersonate-extra-acme.com%2fproject"),
        Some("p1")
    );
    let basic = format!("Basic {}", b64("alice:s3cret"));
    assert_eq!(reqs[1].header("authorization"), Some(basic.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_config_failures() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let target = server.addr().to_string();
    let url = server.url("/allow");

    let mut replier = replier_for(&pki);
    let reply = one(&mut replier, url_call(&url, Some("not a pem"), TEN_SECONDS)).await;
    assert_eq!(
        reply.outcome,
        ReplyOutcome::ClientConfig(
            "unable to load root certificates: unable to parse bytes as PEM block".into()
        )
    );

    let both = kubeconfig_user(&target, "    token: t\n    username: u\n    password: p\n");
    let mut replier = replier_with(
        &pki,
        HttpsOptions {
            auth: both,
            ..HttpsOptions::default()
        },
    );
    let reply = one(
        &mut replier,
        url_call(&url, Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(
        reply.outcome,
        ReplyOutcome::ClientConfig(
            "username/password or bearer token may be set, but not both".into()
        )
    );

    let provider = kubeconfig_user(&target, "    auth-provider:\n      name: gcp\n");
    let mut replier = replier_with(
        &pki,
        HttpsOptions {
            auth: provider,
            ..HttpsOptions::default()
        },
    );
    let reply = one(
        &mut replier,
        url_call(&url, Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(
        reply.outcome,
        ReplyOutcome::ClientConfig("auth provider not supported".into())
    );

    let swapped = kubeconfig_user(
        &target,
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(pki.client_key_pem()),
            b64(pki.client_cert_pem())
        ),
    );
    let mut replier = replier_with(
        &pki,
        HttpsOptions {
            auth: swapped,
            ..HttpsOptions::default()
        },
    );
    let reply = one(
        &mut replier,
        url_call(&url, Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(
        reply.outcome,
        ReplyOutcome::ClientConfig("tls: failed to find certificate PEM data in certificate input, but did find a private key; PEM inputs may have been switched".into())
    );
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_batch_runs_concurrently_and_keeps_call_order() {
    let pki = TestPki::new();
    let server = WebhookServer::start(
        &pki,
        handler(|req| {
            TestResponse::json(200, req.path_only().as_bytes().to_vec())
                .with_delay(Duration::from_secs(2))
        }),
    );
    let mut replier = replier_for(&pki);
    let calls: Vec<WebhookCall> = ["/a", "/b", "/c"]
        .iter()
        .map(|p| url_call(&server.url(p), Some(pki.ca_pem()), TEN_SECONDS))
        .collect();
    let replies = replier.reply(&calls).await;
    let bodies: Vec<&[u8]> = replies.iter().map(|r| http(r).2).collect();
    assert_eq!(bodies, vec![&b"/a"[..], b"/b", b"/c"]);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let first_answer = reqs
        .iter()
        .filter_map(|r| r.responded_at)
        .min()
        .expect("answered");
    assert!(
        reqs.iter().all(|r| r.received_at < first_answer),
        "every call must reach the server before the first answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_reused_per_client_config() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, upstream_handler());
    let mut replier = replier_for(&pki);
    for http2 in [false, true] {
        for _ in 0..4 {
            let mut call = url_call(&server.url("/noop"), Some(pki.ca_pem()), TEN_SECONDS);
            Arc::make_mut(&mut call.endpoint).http2 = http2;
            assert_eq!(http(&one(&mut replier, call).await).0, 200);
        }
    }
    assert_eq!(
        server.handshakes(),
        2,
        "one HTTP/1.1 and one HTTP/2 connection"
    );
    let reqs = server.requests();
    assert!(reqs[..4].iter().all(|r| r.connection == reqs[0].connection));
    assert!(reqs[4..].iter().all(|r| r.connection == reqs[4].connection));

    // A validating batch over HTTP/2 shares the one connection.
    let calls: Vec<WebhookCall> = (0..3)
        .map(|_| url_call(&server.url("/noop"), Some(pki.ca_pem()), TEN_SECONDS))
        .collect();
    replier.reply(&calls).await;
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_like_client_go() {
    let pki = TestPki::new();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let server = WebhookServer::start(
        &pki,
        handler(move |_| {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                TestResponse::go_error(503, "busy").with_header("Retry-After", "0")
            } else {
                TestResponse::json(200, "{}")
            }
        }),
    );
    let mut replier = replier_for(&pki);
    let reply = one(
        &mut replier,
        url_call(&server.url("/retry"), Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(http(&reply).0, 200);
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_refused() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, handler(|_| TestResponse::json(200, vec![b' '; 4096])));
    let mut replier = replier_with(
        &pki,
        HttpsOptions {
            max_response_bytes: 1024,
            ..HttpsOptions::default()
        },
    );
    let reply = one(
        &mut replier,
        url_call(&server.url("/big"), Some(pki.ca_pem()), TEN_SECONDS),
    )
    .await;
    assert_eq!(transport_error(&reply).0, TransportErrorKind::Other);
}

/// A call that must go over HTTP/1.1 (a URL webhook, HTTP/2 not allowed).
fn h1_call(server: &WebhookServer, pki: &TestPki, path: &str) -> WebhookCall {
    let mut call = url_call(&server.url(path), Some(pki.ca_pem()), TEN_SECONDS);
    Arc::make_mut(&mut call.endpoint).http2 = false;
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_bodies_in_chunks_or_up_to_the_close_are_read_whole() {
    let pki = TestPki::new();
    // The server closes after each raw answer; those that could be kept alive say it, so that
    // the next call does not race the close (Go's client would report that race as EOF too).
    let server = WebhookServer::start(
        &pki,
        handler(|r| match r.path_only() {
            "/chunked" => TestResponse::raw(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
                 Connection: close\r\n\r\n\
                 5;name=value\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\nX-Trailer: t\r\n\r\n",
            ),
            "/untilClose" => TestResponse::raw(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"b\":2}",
            ),
            "/informational" => TestResponse::raw(
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n\
                 HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
                 Connection: close\r\n\r\n{}",
            ),
            _ => TestResponse::not_found(),
        }),
    );
    let mut replier = replier_for(&pki);
    for (path, body) in [
        ("/chunked", "{\"a\": 1}"),
        ("/untilClose", "{\"b\":2}"),
        ("/informational", "{}"),
    ] {
        let reply = one(&mut replier, h1_call(&server, &pki, path)).await;
        assert_eq!(
            http(&reply),
            (200, Some("application/json"), body.as_bytes()),
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_framing_failures_are_phrased_as_go_phrases_them() {
    let cases: [(&str, &str, TransportErrorKind, &str); 8] = [
        (
            "/truncated",
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
            TransportErrorKind::Reset,
            "unexpected error when reading response body. Please retry. Original error: unexpected EOF",
        ),
        (
            "/chunkCut",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}",
            TransportErrorKind::Reset,
            "unexpected error when reading response body. Please retry. Original error: unexpected EOF",
        ),
        (
            "/badChunk",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            TransportErrorKind::Malformed,
            "unexpected error when reading response body. Please retry. Original error: invalid byte in chunk length",
        ),
        (
            "/badLength",
            "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
            TransportErrorKind::Malformed,
            "net/http: HTTP/1.x transport connection broken: bad Content-Length \"1x\"",
        ),
        (
            "/gzip",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            TransportErrorKind::Malformed,
            "net/http: HTTP/1.x transport connection broken: unsupported transfer encoding: \"gzip\"",
        ),
        (
            "/headCut",
            "HTTP/1.1 200 OK\r\nContent-Length: 2",
            TransportErrorKind::Reset,
            "net/http: HTTP/1.x transport connection broken: unexpected EOF",
        ),
        (
            "/headCutInName",
            "HTTP/1.1 200 OK\r\nContent-Le",
            TransportErrorKind::Malformed,
            "net/http: HTTP/1.x transport connection broken: malformed MIME header: missing colon: \"Content-Le\"",
        ),
        (
            // Go 1.24 sets no limit on their number: six are read, then the close.
            "/many1xx",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n\
             HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n",
            TransportErrorKind::Reset,
            "net/http: HTTP/1.x transport connection broken: unexpected EOF",
        ),
    ];
    let pki = TestPki::new();
    let answers: Vec<(String, String)> = cases
        .iter()
        .map(|(path, raw, _, _)| (path.to_string(), raw.to_string()))
        .collect();
    let server = WebhookServer::start(
        &pki,
        handler(move |r| {
            let raw = answers.iter().find(|(p, _)| p == r.path_only());
            TestResponse::raw(raw.expect("a case").1.clone())
        }),
    );
    let mut replier = replier_for(&pki);
    for (path, _, kind, detail) in cases {
        let reply = one(&mut replier, h1_call(&server, &pki, path)).await;
        assert_eq!(transport_error(&reply), (kind, detail), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_connections_are_kept_only_while_the_webhook_keeps_them() {
    let pki = TestPki::new();
    let server = WebhookServer::start(
        &pki,
        handler(|r| match r.path_only() {
            // A complete answer that allows reuse, then the webhook closes the connection.
            "/thenClose" => TestResponse::raw(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
            ),
            "/closing" => TestResponse::json(200, "{}").with_header("Connection", "close"),
            _ => TestResponse::json(200, "{}"),
        }),
    );
    let mut replier = replier_for(&pki);
    let mut ok = async |path: &str| {
        let reply = one(&mut replier, h1_call(&server, &pki, path)).await;
        assert_eq!(http(&reply).0, 200, "{path}: {reply:?}");
    };
    ok("/noop").await;
    ok("/noop").await;
    assert_eq!(server.handshakes(), 1, "kept alive");
    ok("/closing").await;
    ok("/noop").await;
    assert_eq!(server.handshakes(), 2, "not kept after `Connection: close`");
    ok("/thenClose").await;
    // Let the close reach the client: the idle connection must then be found closed, not used.
    tokio::time::sleep(Duration::from_millis(300)).await;
    ok("/noop").await;
    ok("/noop").await;
    assert_eq!(
        server.handshakes(),
        3,
        "a new connection once the webhook closed the idle one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_is_asked_for_and_gzipped_answers_are_decoded_as_go_does() {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(ALLOW_BODY.as_bytes()).expect("gzip");
    let gzipped = encoder.finish().expect("gzip");
    let pki = TestPki::new();
    let server = WebhookServer::start(
        &pki,
        handler(move |r| match r.path_only() {
            "/gzip" => {
                TestResponse::json(200, gzipped.clone()).with_header("Content-Encoding", "gzip")
            }
            "/notGzip" => {
                TestResponse::json(200, "{\"response\":{}}").with_header("Content-Encoding", "GZIP")
            }
            _ => TestResponse::not_found(),
        }),
    );
    let mut replier = replier_for(&pki);
    for http2 in [false, true] {
        let call = |path: &str| {
            let mut call = url_call(&server.url(path), Some(pki.ca_pem()), TEN_SECONDS);
            Arc::make_mut(&mut call.endpoint).http2 = http2;
            call
        };
        let reply = one(&mut replier, call("/gzip")).await;
        assert_eq!(
            http(&reply),
            (200, Some("application/json"), ALLOW_BODY.as_bytes()),
            "http2 {http2}"
        );
        let reply = one(&mut replier, call("/notGzip")).await;
        assert_eq!(
            transport_error(&reply),
            (
                TransportErrorKind::Malformed,
                "unexpected error when reading response body. Please retry. Original error: gzip: invalid header"
            ),
            "http2 {http2}"
        );
    }
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    assert!(
        reqs.iter()
            .all(|r| r.header("accept-encoding") == Some("gzip"))
    );
    assert_eq!(reqs[0].version, "HTTP/1.1");
    assert_eq!(reqs[3].version, "HTTP/2.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_completes_the_handshake_hits_the_tls_handshake_timeout() {
    // Bound and listening but never accepting: the kernel completes the TCP handshake, nobody
    // answers the TLS one.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = silent.local_addr().expect("addr");
    let pki = TestPki::new();
    let mut replier = replier_with(
        &pki,
        HttpsOptions {
            tls_handshake_timeout: Duration::from_millis(200),
            ..HttpsOptions::default()
        },
    );
    let call = url_call(
        &format!("https://{addr}/allow"),
        Some(pki.ca_pem()),
        TEN_SECONDS,
    );
    let reply = one(&mut replier, call).await;
    assert_eq!(
        transport_error(&reply),
        (
            TransportErrorKind::Timeout,
            "net/http: TLS handshake timeout"
        )
    );
    assert!(
        reply.elapsed < Duration::from_secs(5),
        "{:?}",
        reply.elapsed
    );
    assert_eq!(
        HttpsOptions::default().tls_handshake_timeout,
        Duration::from_secs(10)
    );
}
