//! `hookscope replay` run as a user runs it, against webhook servers started here on 127.0.0.1
//! over real TLS with certificates minted for the test.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use common::{
    Handler, RefusingPort, TestPki, WebhookServer, handler, oracle_handler, v1_deny, v1_patch,
};
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn hookscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory under the target directory, removed first if a previous run left it.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("replay-cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The oracle configurations, trusting `pki` instead of the recorded server's CA.
fn oracle_configurations(pki: &TestPki, dir: &Path) -> Vec<PathBuf> {
    fixture_configurations(
        pki,
        dir,
        "oracle-v1.32",
        &["mutating.yaml", "validating.yaml"],
    )
}

/// `files` of the recorded session `fixture`, written to `dir` trusting `pki` instead of the
/// recorded server's CA.
fn fixture_configurations(
    pki: &TestPki,
    dir: &Path,
    fixture: &str,
    files: &[&str],
) -> Vec<PathBuf> {
    files
        .iter()
        .map(|f| {
            let original =
                std::fs::read_to_string(format!("{FIXTURES}/{fixture}/{f}")).expect("fixture");
            let rewritten: String = original
                .lines()
                .map(|l| match l.split_once("caBundle: ") {
                    Some((indent, _)) => format!("{indent}caBundle: {}\n", b64(pki.ca_pem())),
                    None => format!("{l}\n"),
                })
                .collect();
            let path = dir.join(f.rsplit('/').next().unwrap_or(f));
            std::fs::write(&path, rewritten).expect("write configuration");
            path
        })
        .collect()
}

/// What the apiserver recorded per auditID: the final stage's code and message.
fn recorded_statuses() -> BTreeMap<String, (i64, String)> {
    let log = std::fs::read_to_string(format!("{FIXTURES}/oracle-v1.32/audit.log")).expect("log");
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| {
            (
                e["auditID"].as_str().unwrap_or_default().to_string(),
                (
                    e["responseStatus"]["code"].as_i64().unwrap_or_default(),
                    e["responseStatus"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ),
            )
        })
        .collect()
}

#[test]
fn oracle_audit_log_replays_to_what_the_apiserver_recorded() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, oracle_handler());
    let dir = scratch("oracle");
    let configs = oracle_configurations(&pki, &dir);
    let report_path = dir.join("report.json");
    let metrics_path = dir.join("metrics.txt");
    let out = hookscope(&[
        "replay",
        "--webhooks",
        configs[0].to_str().unwrap(),
        configs[1].to_str().unwrap(),
        "--input",
        &format!("{FIXTURES}/oracle-v1.32/audit.log"),
        "--resolve",
        &format!("127.0.0.1:18443=127.0.0.1:{}", server.port()),
        "--audit-level",
        "RequestResponse",
        "--report",
        report_path.to_str().unwrap(),
        "--metrics",
        metrics_path.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).expect("report")).unwrap();
    let recorded = recorded_statuses();
    let requests = report["requests"].as_array().expect("requests");

    // The configurations were created during the session and took effect a moment later (the
    // dry-run probes waited for that); the replay applies them to every request, so compare
    // from the first request the apiserver sent through a webhook on.
    let in_force = requests
        .iter()
        .position(|r| {
            r["recorded"]["annotations"]
                .as_object()
                .is_some_and(|a| !a.is_empty())
        })
        .expect("the session has webhook traffic");
    let mut webhook_requests = 0;
    let mut denied = 0;
    for r in &requests[in_force..] {
        let id = r["source"]["auditID"].as_str().expect("audit id");
        let rec = &r["recorded"];
        // Every annotation the apiserver wrote, byte for byte, and nothing else.
        assert_eq!(
            r["annotations"], rec["annotations"],
            "annotations of {id}: {r:#}"
        );
        let (code, message) = &recorded[id];
        match r["status"].as_object() {
            // Admitted; the apiserver may still have failed it later (409 AlreadyExists, …),
            // but not in admission.
            None => assert!(
                (200..300).contains(code) || !message.contains("admission webhook"),
                "{id} admitted by the replay, recorded {code} {message}"
            ),
            Some(s) => {
                denied += 1;
                assert_eq!(s["code"].as_i64(), Some(*code), "{id}");
                assert_eq!(s["message"].as_str(), Some(message.as_str()), "{id}");
            }
        }
        if r["calls"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["decision"] == "called"))
        {
            webhook_requests += 1;
        }
    }
    // The session's configmap writes that reached the webhooks: a dry-run probe, the labelled
    // create and four denied creates; no other request may reach them.
    let recorded_webhook_requests = requests
        .iter()
        .filter(|r| {
            r["recorded"]["annotations"]
                .as_object()
                .is_some_and(|a| a.keys().any(|k| k.starts_with("mutation.webhook")))
        })
        .count();
    assert_eq!(recorded_webhook_requests, 6);
    assert_eq!(webhook_requests, recorded_webhook_requests);
    let recorded_denials = recorded
        .values()
        .filter(|(_, m)| m.starts_with("admission webhook "))
        .count();
    assert!(denied >= 1);
    assert_eq!(denied, recorded_denials, "denials replayed vs recorded");
    let reinvoked = requests.iter().any(|r| {
        r["annotations"]
            .as_object()
            .is_some_and(|a| a.contains_key("mutation.webhook.admission.k8s.io/round_1_index_0"))
    });
    assert!(reinvoked, "the IfNeeded webhook ran again in round 1");
    assert_eq!(
        report["summary"]["total"].as_u64(),
        Some(requests.len() as u64)
    );
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.path.ends_with("?timeout=10s"))
    );

    let metrics = std::fs::read_to_string(&metrics_path).expect("metrics");
    assert!(
        metrics.contains(
            r#"apiserver_admission_webhook_rejection_count{error_type="no_error",name="deny.oracle.test",operation="CREATE",rejection_code="403",type="validating"}"#
        ),
        "{metrics}"
    );
    assert!(
        stdout.contains("admission webhook \"deny.oracle.test\" denied the request: denied by oracle deny webhook"),
        "{stdout}"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// One webhook configuration document for configmap creates.
fn configuration(kind: &str, name: &str, hooks: &[String]) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: {kind}\nmetadata: {{name: {name}}}\nwebhooks:\n{}",
        hooks.concat()
    )
}

/// One webhook entry; `client` is the clientConfig as a YAML flow mapping.
fn hook(name: &str, client: &str, failure_policy: &str, timeout: u32) -> String {
    format!(
        "- name: {name}\n  clientConfig: {client}\n  rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}}]\n  failurePolicy: {failure_policy}\n  timeoutSeconds: {timeout}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
    )
}

/// Writes a file holding one configuration of `kind` named `name` with `hooks`.
fn config_file(dir: &Path, file: &str, kind: &str, name: &str, hooks: &[String]) -> PathBuf {
    write(dir, file, &configuration(kind, name, hooks))
}

fn url_client(url: &str, ca_pem: &str) -> String {
    format!("{{url: \"{url}\", caBundle: {}}}", b64(ca_pem))
}

/// A captured v1 AdmissionReview of a ConfigMap create, on one line.
fn review(uid: &str, namespace: &str, name: &str) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": {"k": "v"},
            },
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        }
    })
    .to_string()
}

fn run_json(args: &[&str]) -> (Value, Output) {
    let mut all = vec!["replay", "--format", "json"];
    all.extend_from_slice(args);
    let out = hookscope(&all);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "report is JSON ({e}): {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (report, out)
}

fn behaviours() -> Handler {
    handler(|req| {
        let uid = req.review_uid().unwrap_or_default();
        match req.path_only() {
            "/allow" => common::v1_allow(&uid),
            "/deny" => v1_deny(&uid, 403, "not on my watch"),
            "/label" => v1_patch(
                &uid,
                r#"[{"op":"add","path":"/metadata/labels","value":{"injected":"yes"}}]"#,
            ),
            "/close" => common::TestResponse::close(),
            "/hang" => common::TestResponse::hang(),
            "/internal" => common::TestResponse::go_error(500, "boom"),
            "/garbage" => common::TestResponse::json(200, "this is not an AdmissionReview"),
            _ => common::TestResponse::not_found(),
        }
    })
}

#[test]
fn every_transport_failure_class_fails_open_with_the_apiservers_message_and_metrics() {
    let pki = TestPki::new();
    let other = TestPki::new();
    let server = WebhookServer::start(&pki, behaviours());
    // The closing webhook gets a server of its own: the connection it closes would take down
    // the other calls multiplexed on the same HTTP/2 connection, as in Go.
    let slow = WebhookServer::start(&pki, behaviours());
    let closing = WebhookServer::start(&pki, behaviours());
    let closed = RefusingPort::new();
    let closed_port = closed.port();
    let dir = scratch("failures");
    let ca = pki.ca_pem();
    let hooks = [
        hook(
            "refused.example.com",
            &url_client(&format!("https://127.0.0.1:{closed_port}/allow"), ca),
            "Ignore",
            10,
        ),
        hook(
            "reset.example.com",
            &url_client(&closing.url("/close"), ca),
            "Ignore",
            10,
        ),
        hook(
            "tls.example.com",
            &url_client(&server.url("/allow"), other.ca_pem()),
            "Ignore",
            10,
        ),
        hook(
            "timeout.example.com",
            &url_client(&slow.url("/hang"), ca),
            "Ignore",
            1,
        ),
        hook(
            "status.example.com",
            &url_client(&server.url("/internal"), ca),
            "Ignore",
            10,
        ),
        hook(
            "garbage.example.com",
            &url_client(&server.url("/garbage"), ca),
            "Ignore",
            10,
        ),
    ];
    let config = config_file(
        &dir,
        "validating.yaml",
        "ValidatingWebhookConfiguration",
        "failures",
        &hooks,
    );
    let input = write(&dir, "reviews.jsonl", &review("u-1", "default", "cm"));
    let metrics = dir.join("metrics.txt");
    let (report, out) = run_json(&[
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let request = &report["requests"][0];
    assert_eq!(
        request["allowed"], true,
        "every webhook fails open: {request:#}"
    );
    let errors: BTreeMap<&str, &str> = request["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            (
                c["webhook"].as_str().unwrap_or_default(),
                c["error"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let expect = |hook: &str, fragments: &[&str]| {
        let e = errors[hook];
        assert!(
            e.starts_with(&format!("failed calling webhook \"{hook}\": ")),
            "{hook}: {e}"
        );
        for f in fragments {
            assert!(e.contains(f), "{hook}: {e:?} lacks {f:?}");
        }
    };
    expect(
        "refused.example.com",
        &[&format!(
            "dial tcp 127.0.0.1:{closed_port}: connect: connection refused"
        )],
    );
    // A connection closed without an answer reads as EOF, a reset or a broken pipe depending on
    // when the close lands, as with Go's client.
    let reset = errors["reset.example.com"];
    assert!(
        ["EOF", "broken pipe", "connection reset by peer"]
            .iter()
            .any(|f| reset.ends_with(f)),
        "{reset}"
    );
    expect("reset.example.com", &["/close?timeout=10s"]);
    expect(
        "tls.example.com",
        &["tls: failed to verify certificate: x509: certificate signed by unknown authority"],
    );
    expect(
        "timeout.example.com",
        &["/hang?timeout=1s", "context deadline exceeded"],
    );
    expect("status.example.com", &["boom"]);
    expect("garbage.example.com", &[]);
    let metrics = std::fs::read_to_string(&metrics).expect("metrics");
    for h in errors.keys() {
        assert!(
            metrics.contains(&format!(
                "apiserver_admission_webhook_fail_open_count{{name=\"{h}\",type=\"validating\"}} 1"
            )),
            "{h} fail-open counted:\n{metrics}"
        );
    }
}

#[test]
fn a_failing_webhook_with_failure_policy_fail_refuses_the_request_as_the_apiserver_does() {
    let closed = RefusingPort::new();
    let port = closed.port();
    let pki = TestPki::new();
    let dir = scratch("fail-closed");
    let config = config_file(
        &dir,
        "c.yaml",
        "ValidatingWebhookConfiguration",
        "strict",
        &[hook(
            "strict.example.com",
            &url_client(&format!("https://127.0.0.1:{port}/allow"), pki.ca_pem()),
            "Fail",
            10,
        )],
    );
    let input = write(&dir, "in.jsonl", &review("u-1", "default", "cm"));
    let (report, out) = run_json(&[
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let status = &report["requests"][0]["status"];
    assert_eq!(status["code"], 500);
    assert_eq!(status["reason"], "InternalError");
    assert_eq!(
        status["message"],
        format!(
            "Internal error occurred: failed calling webhook \"strict.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/allow?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
}

#[test]
fn a_compact_captured_object_is_sent_byte_for_byte() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, behaviours());
    let dir = scratch("as-captured");
    let client = url_client(
        &format!("https://127.0.0.1:{}/allow", server.port()),
        pki.ca_pem(),
    );
    let config = config_file(
        &dir,
        "c.yaml",
        "ValidatingWebhookConfiguration",
        "as-captured",
        &[hook("allow.example.com", &client, "Fail", 10)],
    );
    // As the apiserver writes objects: its own field order, `<` and `>` escaped. The second
    // line's object has whitespace, so it is not what an apiserver sent and is serialised as
    // the apiserver would: the ConfigMap's Go fields in order.
    // Both are creates as a validating webhook receives them: with the uid and creation time the
    // store set.
    let compact = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-1","namespace":"default","uid":"4a6b7f0e-5f7e-4d43-9c53-0d1b2c3e4f50","creationTimestamp":"2026-11-21T05:36:02Z"},"data":{"html":"\u003cb\u003e"}}"#;
    let spaced = r#"{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"creationTimestamp": "2026-11-21T05:36:02Z", "name": "cm-2", "namespace": "default", "uid": "5a6b7f0e-5f7e-4d43-9c53-0d1b2c3e4f50"}}"#;
    let line = |name: &str, object: &str| {
        let mut review = review(&format!("u-{name}"), "default", name);
        let generated = serde_json::to_string(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"k": "v"},
        }))
        .unwrap();
        assert!(review.contains(&generated), "{review}");
        review = review.replace(&generated, object);
        review
    };
    let input = write(
        &dir,
        "in.jsonl",
        &format!("{}\n{}\n", line("cm-1", compact), line("cm-2", spaced)),
    );
    let (report, out) = run_json(&[
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(report["summary"]["allowed"], 2, "{report}");
    let bodies: BTreeMap<String, String> = server
        .requests()
        .iter()
        .map(|r| {
            let body = text(&r.body);
            let review: Value = serde_json::from_str(&body).expect("the body is JSON");
            (
                review["request"]["name"].as_str().unwrap().to_string(),
                body,
            )
        })
        .collect();
    assert!(bodies["cm-1"].contains(&format!(r#""object":{compact},"oldObject":null"#)));
    let serialised = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-2","namespace":"default","uid":"5a6b7f0e-5f7e-4d43-9c53-0d1b2c3e4f50","creationTimestamp":"2026-11-21T05:36:02Z"}}"#;
    assert!(
        bodies["cm-2"].contains(&format!(r#""object":{serialised},"oldObject":null"#)),
        "{}",
        bodies["cm-2"]
    );
    // Either way the report holds the object itself.
    let reported = &report["requests"][0]["object"];
    assert_eq!(reported, &serde_json::from_str::<Value>(compact).unwrap());
}

#[test]
fn service_references_are_dialled_through_resolve_and_verified_by_service_name() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, behaviours());
    let dir = scratch("service");
    let client = format!(
        "{{service: {{namespace: default, name: webhook-test, port: 8443, path: /deny}}, caBundle: {}}}",
        b64(pki.ca_pem())
    );
    let config = config_file(
        &dir,
        "c.yaml",
        "ValidatingWebhookConfiguration",
        "svc",
        &[hook("svc.example.com", &client, "Fail", 10)],
    );
    let input = write(&dir, "in.jsonl", &review("u-1", "default", "cm"));
    let (report, out) = run_json(&[
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--resolve",
        &format!("webhook-test.default.svc:8443=127.0.0.1:{}", server.port()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let status = &report["requests"][0]["status"];
    assert_eq!(
        status["message"],
        "admission webhook \"svc.example.com\" denied the request: not on my watch"
    );
    assert_eq!(status["code"], 403);
    let received = server.requests();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/deny?timeout=10s");
    // HTTP/1.1 for service webhooks, as upstream.
    assert_eq!(received[0].version, "HTTP/1.1");

    // Without --resolve the service name cannot be dialled, and the error says so.
    let (report, _) = run_json(&[
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    let message = report["requests"][0]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("webhook-test.default.svc"), "{message}");
}

#[test]
fn webhook_credentials_present_the_client_certificate() {
    let pki = TestPki::new();
    let server = WebhookServer::start_with(
        &pki,
        behaviours(),
        common::ServerOptions {
            require_client_cert: true,
            ..common::ServerOptions::default()
        },
    );
    let dir = scratch("credentials");
    let config = config_file(
        &dir,
        "c.yaml",
        "ValidatingWebhookConfiguration",
        "mtls",
        &[hook(
            "mtls.example.com",
            &url_client(&server.url("/allow"), pki.ca_pem()),
            "Fail",
            10,
        )],
    );
    let auth = write(
        &dir,
        "auth.yaml",
        &format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: \"127.0.0.1:{}\"\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            server.port(),
            b64(pki.client_cert_pem()),
            b64(pki.client_key_pem())
        ),
    );
    let input = write(&dir, "in.jsonl", &review("u-1", "default", "cm"));
    let args = [
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ];
    let (without, _) = run_json(&args);
    assert_eq!(without["requests"][0]["allowed"], false, "{without:#}");
    let mut with_auth = args.to_vec();
    with_auth.extend(["--webhook-auth", auth.to_str().unwrap()]);
    let (with, out) = run_json(&with_auth);
    assert_eq!(
        with["requests"][0]["allowed"],
        true,
        "{}",
        text(&out.stderr)
    );
    assert!(server.requests().iter().any(|r| r.client_cert));
}

#[test]
fn a_recorded_run_replays_offline_to_the_identical_report() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, behaviours());
    let dir = scratch("record");
    let ca = pki.ca_pem();
    let mutating = config_file(
        &dir,
        "m.yaml",
        "MutatingWebhookConfiguration",
        "inject",
        &[hook(
            "label.example.com",
            &url_client(&server.url("/label"), ca),
            "Fail",
            10,
        )],
    );
    let validating = config_file(
        &dir,
        "v.yaml",
        "ValidatingWebhookConfiguration",
        "policy",
        &[
            hook(
                "allow.example.com",
                &url_client(&server.url("/allow"), ca),
                "Fail",
                10,
            ),
            hook(
                "deny.example.com",
                &url_client(&server.url("/deny"), ca),
                "Ignore",
                10,
            ),
        ],
    );
    let input = write(
        &dir,
        "in.jsonl",
        &[
            review("u-1", "default", "a"),
            review("u-2", "shop", "b"),
            review("u-3", "default", "a"),
        ]
        .join("\n"),
    );
    let recording = dir.join("recording");
    let base = [
        "--webhooks",
        mutating.to_str().unwrap(),
        validating.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--audit-level",
        "RequestResponse",
    ];
    let mut record = base.to_vec();
    record.extend(["--record", recording.to_str().unwrap()]);
    let (live, out) = run_json(&record);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let calls_made = server.requests().len();
    assert_eq!(calls_made, 9, "three webhooks for each of three requests");

    drop(server);
    let mut offline = base.to_vec();
    offline.extend(["--replies", recording.to_str().unwrap()]);
    let (replayed, out) = run_json(&offline);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(replayed, live, "offline replay gives the identical report");
    assert_eq!(live["summary"]["denied"], 3);
    assert_eq!(replayed["summary"]["missingReplies"], 0);
}

#[test]
fn expectations_junit_audit_events_and_bad_lines() {
    let dir = scratch("expect");
    let config = config_file(
        &dir,
        "c.yaml",
        "MutatingWebhookConfiguration",
        "inject",
        &[hook(
            "label.example.com",
            "{url: \"https://127.0.0.1:9/label\"}",
            "Fail",
            10,
        )],
    );
    let script = write(
        &dir,
        "script.yaml",
        "label.example.com:\n  patch: [{op: add, path: /metadata/labels, value: {injected: \"yes\"}}]\n",
    );
    let input = write(
        &dir,
        "in.jsonl",
        &format!(
            "{}\n{{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionRev\n{}\n",
            review("u-1", "default", "a"),
            review("u-2", "default", "b")
        ),
    );
    let expect = write(
        &dir,
        "expect.yaml",
        "- match: {name: a}\n  allowed: true\n  labels: {injected: \"yes\"}\n- match: {name: b}\n  labels: {injected: \"no\"}\n- match: {name: c}\n  allowed: true\n",
    );
    let audit = dir.join("audit.jsonl");
    let out = hookscope(&[
        "replay",
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--expect",
        expect.to_str().unwrap(),
        "--audit-log",
        audit.to_str().unwrap(),
        "--format",
        "junit",
    ]);
    let xml = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{xml}\n{}", text(&out.stderr));
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(
        xml.contains("tests=\"4\" failures=\"2\" errors=\"1\""),
        "{xml}"
    );
    assert!(xml.contains("labels[injected]"), "{xml}");
    assert!(xml.contains("no request matched"), "{xml}");
    // The broken line is named by file and line, and the line after it is still replayed.
    assert!(xml.contains("in.jsonl"), "{xml}");

    let events: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("event JSON"))
        .collect();
    assert_eq!(events.len(), 2);
    for e in &events {
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(e["stage"], "ResponseComplete");
        assert_eq!(e["level"], "Request");
        assert_eq!(e["responseStatus"]["code"], 201);
        assert_eq!(
            e["annotations"]["mutation.webhook.admission.k8s.io/round_0_index_0"],
            r#"{"configuration":"inject","webhook":"label.example.com","mutated":true}"#
        );
        assert!(
            e.get("responseObject").is_none(),
            "level Request has no response body"
        );
    }
    assert_eq!(
        events[0]["requestURI"],
        "/api/v1/namespaces/default/configmaps"
    );

    // The text format names the bad line and prints the mismatch as a diff.
    let out = hookscope(&[
        "replay",
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--expect",
        expect.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("in.jsonl line 2"), "{stdout}");
    assert!(
        stdout.contains("- \"no\"") && stdout.contains("+ \"yes\""),
        "{stdout}"
    );
}

#[test]
fn unusable_runs_exit_2_with_a_reason() {
    let dir = scratch("unusable");
    let config = unreachable_config(&dir);
    let missing = dir.join("missing.jsonl");
    let out = hookscope(&[
        "replay",
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("missing.jsonl"), "{stderr}");
    assert!(stderr.contains("cannot open --input path"), "{stderr}");

    let out = hookscope(&["replay", "--webhooks", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "--input is required");

    let out = hookscope(&[
        "replay",
        "--webhooks",
        dir.join("nothing-here").to_str().unwrap(),
        "--input",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `c.yaml` in `dir`: one validating webhook for configmap creates at an address nothing serves.
fn unreachable_config(dir: &Path) -> PathBuf {
    config_file(
        dir,
        "c.yaml",
        "ValidatingWebhookConfiguration",
        "c",
        &[hook(
            "a.example.com",
            "{url: \"https://127.0.0.1:9/\"}",
            "Fail",
            10,
        )],
    )
}

/// Runs `replay` with `args` (answered by a script that allows everything), writing the JSON
/// report to a file; returns the exit code, standard error and the report.
fn replay_with_report(dir: &Path, args: &[&str]) -> (Option<i32>, String, Value) {
    let script = write(dir, "allow-all.yaml", "{}\n");
    let report = dir.join("report.json");
    let _ = std::fs::remove_file(&report);
    let mut all = vec![
        "replay",
        "--script",
        script.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = hookscope(&all);
    let stderr = text(&out.stderr);
    let report = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("a report is written: {}\n{stderr}", text(&out.stdout)));
    (out.status.code(), stderr, report)
}

/// [`replay_with_report`] of `input` against the configurations of `webhooks`.
fn replay_one(dir: &Path, webhooks: &Path, input: &Path) -> (Option<i32>, String, Value) {
    replay_with_report(
        dir,
        &[
            "--webhooks",
            webhooks.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ],
    )
}

/// The `unusable` problems of a report, as `file: message`.
fn unusable(report: &Value) -> Vec<String> {
    report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter(|p| p["kind"] == "unusable")
        .map(|p| {
            format!(
                "{}: {}",
                p["source"]["file"].as_str().unwrap(),
                p["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// A captured v1 AdmissionReview of the create of Pod `p` in `namespace`.
fn pod_review(namespace: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "p-1", "operation": "CREATE", "namespace": namespace, "name": "p",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace}},
        }
    })
}

/// The `field` of every call considered for the report's first request.
fn considered<'r>(report: &'r Value, field: &str) -> Vec<&'r str> {
    (report["requests"][0]["calls"]
        .as_array()
        .expect("calls")
        .iter())
    .map(|c| c[field].as_str().unwrap())
    .collect()
}

#[test]
fn a_broken_setup_exits_2_naming_the_path_and_a_partly_bad_one_replays_the_rest() {
    let dir = scratch("broken-setup");
    let d = |f: &str| dir.join(f).display().to_string();
    let config = unreachable_config(&dir);
    let config = config.to_str().unwrap();
    let capture = write(
        &dir,
        "in.jsonl",
        &format!("{}\n", review("u-1", "default", "cm")),
    );
    let capture = capture.to_str().unwrap();
    let audit_log = format!("{FIXTURES}/oracle-v1.32/audit.log");
    write(
        &dir,
        "garbage.jsonl",
        "{\"not\": \"a request\"}\n{truncated\n",
    );
    write(
        &dir,
        "invalid-only.yaml",
        &configuration(
            "ValidatingWebhookConfiguration",
            "c",
            &[hook("short", "{url: \"https://127.0.0.1:9/\"}", "Fail", 10)],
        ),
    );
    write(
        &dir,
        "partly-bad.jsonl",
        &format!("{}\n{{truncated\n", review("u-2", "default", "cm")),
    );

    // (arguments, the path named, what the line says)
    let cases: &[(Vec<String>, String, &str)] = &[
        (
            vec![
                "--webhooks".into(),
                d("nope.yaml"),
                "--input".into(),
                capture.into(),
            ],
            d("nope.yaml"),
            "cannot read --webhooks path",
        ),
        (
            vec![
                "--webhooks".into(),
                config.into(),
                "--input".into(),
                capture.into(),
                d("nope.log"),
            ],
            d("nope.log"),
            "cannot open --input path",
        ),
        (
            vec![
                "--webhooks".into(),
                config.into(),
                "--input".into(),
                capture.into(),
                "--cluster".into(),
                d("namespaces.yaml"),
            ],
            d("namespaces.yaml"),
            "cannot open --cluster path",
        ),
        (
            vec![
                "--webhooks".into(),
                d("invalid-only.yaml"),
                "--input".into(),
                capture.into(),
            ],
            d("invalid-only.yaml"),
            "no webhook configuration the apiserver would accept",
        ),
        (
            vec![
                "--webhooks".into(),
                config.into(),
                "--input".into(),
                capture.into(),
                d("garbage.jsonl"),
            ],
            d("garbage.jsonl"),
            "no readable request: all 2 lines are invalid",
        ),
        (
            vec![
                "--webhooks".into(),
                audit_log.clone(),
                "--input".into(),
                audit_log.clone(),
            ],
            audit_log.clone(),
            "holds audit events, not webhook configurations: give it with --input",
        ),
        (
            vec![
                "--webhooks".into(),
                config.into(),
                "--input".into(),
                config.into(),
            ],
            config.into(),
            "is a webhook configuration, not a captured request: give its file with --webhooks",
        ),
    ];
    for (args, path, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr, report) = replay_with_report(&dir, &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        assert!(
            lines[0].starts_with(&format!("error: {path}: ")),
            "{stderr}"
        );
        assert!(lines[0].contains(says), "{args:?}: {stderr}");
        let problems = unusable(&report);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(&format!("{path}: ")),
            "{problems:?}"
        );
        assert_eq!(report["summary"]["unusable"], 1);
    }

    // JUnit counts such a path as an error of the suite.
    let out = hookscope(&[
        "replay",
        "--format",
        "junit",
        "--webhooks",
        &d("nope.yaml"),
        "--input",
        capture,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let junit = text(&out.stdout);
    assert!(junit.contains(r#"errors="1""#), "{junit}");
    assert!(
        junit.contains(&format!(
            r#"<testcase name="whole input" classname="{}""#,
            d("nope.yaml")
        )),
        "{junit}"
    );

    // A file partly bad replays the rest, its bad line reported, and the run succeeds.
    let (code, stderr, report) = replay_with_report(
        &dir,
        &["--webhooks", config, "--input", &d("partly-bad.jsonl")],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["summary"]["total"], 1);
    assert_eq!(report["summary"]["invalid"], 1);
    assert!(unusable(&report).is_empty());
}

#[test]
fn replay_takes_the_configurations_of_release_manifests_and_says_what_it_skipped_with_v() {
    let dir = scratch("manifests");
    let capture = write(
        &dir,
        "in.jsonl",
        &format!("{}\n", review("u-1", "default", "cm")),
    );
    let manifests: Vec<String> = [
        "cert-manager.yaml",
        "gatekeeper.yaml",
        "ingress-nginx-cloud-deploy.yaml",
    ]
    .iter()
    .map(|f| format!("{FIXTURES}/manifests/{f}"))
    .collect();
    let mut args = vec!["--webhooks"];
    args.extend(manifests.iter().map(String::as_str));
    args.extend(["--input", capture.to_str().unwrap()]);
    let (code, stderr, report) = replay_with_report(&dir, &args);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "", "silent");
    assert_eq!(report["problems"], json!([]));
    assert_eq!(report["summary"]["total"], 1);
    // gatekeeper's webhooks see every resource: the ConfigMap create calls them.
    let configurations = considered(&report, "configuration");
    assert!(
        configurations.contains(&"gatekeeper-validating-webhook-configuration"),
        "{configurations:?}"
    );

    args.push("-v");
    let script = write(&dir, "allow-all.yaml", "{}\n");
    args.extend(["--script", script.to_str().unwrap()]);
    let mut all = vec!["replay"];
    all.extend(&args);
    let out = hookscope(&all);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for (file, n) in [
        ("cert-manager.yaml", 46),
        ("gatekeeper.yaml", 29),
        ("ingress-nginx-cloud-deploy.yaml", 18),
    ] {
        let line = format!("{FIXTURES}/manifests/{file}: skipped {n} documents of other kinds: ");
        assert!(
            stdout.lines().any(|l| l.starts_with(&line)),
            "{line}\n{stdout}"
        );
    }
}

#[test]
fn a_configuration_named_as_an_earlier_one_replaces_it_with_a_warning_naming_both_files() {
    let dir = scratch("same-names");
    let pod = pod_review("default");
    let capture = write(&dir, "in.jsonl", &format!("{pod}\n"));
    let gatekeeper = format!("{FIXTURES}/manifests/gatekeeper-webhook-manifests.yaml");
    let otel = format!("{FIXTURES}/manifests/opentelemetry-operator-webhook-manifests.yaml");
    let (code, stderr, report) = replay_with_report(
        &dir,
        &[
            "--webhooks",
            &gatekeeper,
            &otel,
            "--input",
            capture.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let warnings: Vec<&Value> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "warning")
        .collect();
    assert_eq!(warnings.len(), 2, "{:#}", report["problems"]);
    assert_eq!(report["summary"]["warnings"], 2);
    for (w, (kind, name, document)) in warnings.iter().zip([
        (
            "MutatingWebhookConfiguration",
            "mutating-webhook-configuration",
            1,
        ),
        (
            "ValidatingWebhookConfiguration",
            "validating-webhook-configuration",
            2,
        ),
    ]) {
        assert_eq!(w["source"]["file"], otel.as_str());
        assert_eq!(w["source"]["index"], document);
        let message = w["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!(
                "{kind} {name:?} replaces the one of {gatekeeper}: document {document}"
            )),
            "{message}"
        );
    }
    // Only the later configurations are in force: gatekeeper's webhooks are gone.
    let webhooks = considered(&report, "webhook");
    assert!(webhooks.contains(&"mpod.kb.io"), "{webhooks:?}");
    assert!(
        !webhooks.iter().any(|w| w.ends_with("gatekeeper.sh")),
        "{webhooks:?}"
    );
}

#[test]
fn reads_are_counted_unserved_versions_warned_namespaces_cleared_and_notes_only_where_read() {
    let dir = scratch("counted");
    let oracle = format!("{FIXTURES}/oracle-v1.32");
    let (mutating, validating) = (
        format!("{oracle}/mutating.yaml"),
        format!("{oracle}/validating.yaml"),
    );

    // The session's 195 gets and 39 lists did not go through admission: counted, not hidden.
    let log = format!("{oracle}/audit.log");
    let args = ["--webhooks", &mutating, &validating, "--input", &log];
    let (code, stderr, report) = replay_with_report(&dir, &args);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["summary"]["skippedEvents"], 195 + 39);
    let script = write(&dir, "allow-all.yaml", "{}\n");
    let mut all = vec!["replay", "--script", script.to_str().unwrap()];
    all.extend(args);
    let out = hookscope(&all);
    let summary = text(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        summary.contains(" · 234 audit events skipped (reads and other requests that do not go through admission)"),
        "{summary}"
    );

    // v1beta1 is not served by any modelled release: replay warns and goes on, check refuses.
    let beta = write(
        &dir,
        "beta.yaml",
        "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: old, namespace: ignored}\nwebhooks:\n- name: old.example.com\n  clientConfig: {url: \"https://127.0.0.1:9/\"}\n  rules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}]\n  sideEffects: None\n",
    );
    let pod = pod_review("nobody-knows");
    let capture = write(&dir, "pod.jsonl", &format!("{pod}\n"));
    let (code, stderr, report) = replay_with_report(
        &dir,
        &[
            "--kube-version",
            "1.28",
            "--webhooks",
            beta.to_str().unwrap(),
            "--input",
            capture.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(
        problems.len(),
        1,
        "only the warning; the namespace was cleared: {problems:#?}"
    );
    assert_eq!(problems[0]["kind"], "warning");
    assert_eq!(problems[0]["field"], "apiVersion");
    let message = problems[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("admissionregistration.k8s.io/v1beta1 is not served since Kubernetes 1.22 (modelled: 1.28): kubectl apply fails with 'no matches for kind \"ValidatingWebhookConfiguration\" in version \"admissionregistration.k8s.io/v1beta1\"'"),
        "{message}"
    );
    assert_eq!(considered(&report, "webhook"), ["old.example.com"]);
    // No namespace selector read the unknown namespace's labels: no note about them.
    assert_eq!(
        report["requests"][0].get("notes"),
        None,
        "{:#}",
        report["requests"][0]
    );

    let out = hookscope(&["check", "--webhooks", beta.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("    error apiVersion: admissionregistration.k8s.io/v1beta1 is not served since Kubernetes 1.22"), "{stdout}");
    assert!(
        stdout.contains("    default metadata.namespace: \"\" (was \"ignored\": cluster-scoped, the apiserver clears it)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("metadata.namespace: Forbidden"),
        "{stdout}"
    );

    // With a namespace selector, the labels were read, and the note says what was assumed.
    let selective = write(
        &dir,
        "selective.yaml",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: sel}\nwebhooks:\n- name: sel.example.com\n  clientConfig: {url: \"https://127.0.0.1:9/\"}\n  rules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}]\n  namespaceSelector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n",
    );
    let (code, stderr, report) = replay_one(&dir, &selective, &capture);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        report["requests"][0]["notes"],
        json!([
            "namespace \"nobody-knows\" is not known (not in --cluster nor learned from the input): its labels were taken as empty"
        ])
    );
}

#[test]
fn json_errors_point_at_the_line_and_column_of_the_input() {
    let dir = scratch("json-positions");
    let config = unreachable_config(&dir);
    let mut bad: Value = serde_json::from_str(&review("u-1", "default", "cm")).unwrap();
    bad["request"]["object"]["data"]["k"] = json!("PLACEHOLDER");
    let pretty = serde_json::to_string_pretty(&bad)
        .unwrap()
        .replace("\"PLACEHOLDER\"", "01x");
    let line = pretty.lines().position(|l| l.contains("01x")).unwrap() + 1;
    let column = pretty.lines().nth(line - 1).unwrap().find("01x").unwrap() + 2;
    assert!(line > 10, "the number is deep in the document");
    // One good document first, so the file is readable and the bad one is one problem.
    let good = serde_json::to_string_pretty(
        &serde_json::from_str::<Value>(&review("u-2", "default", "cm")).unwrap(),
    )
    .unwrap();
    let offset = good.lines().count();
    let capture = write(&dir, "pretty.json", &format!("{good}\n{pretty}\n"));
    let (code, stderr, report) = replay_one(&dir, &config, &capture);
    assert_eq!(code, Some(0), "{stderr}");
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(
        problems[0]["message"],
        format!(
            "invalid JSON: invalid number at line {} column {column}",
            offset + line
        )
    );
}

#[test]
fn secrets_are_redacted_unless_asked() {
    let dir = scratch("secrets");
    let config = write(
        &dir,
        "c.yaml",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: c}\nwebhooks:\n- name: a.example.com\n  clientConfig: {url: \"https://127.0.0.1:9/\"}\n  rules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [secrets]}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n",
    );
    let script = write(&dir, "s.yaml", "a.example.com: {allowed: true}\n");
    let secret = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "s-1", "operation": "CREATE", "namespace": "default", "name": "db",
            "kind": {"group": "", "version": "v1", "kind": "Secret"},
            "resource": {"group": "", "version": "v1", "resource": "secrets"},
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
                       "data": {"password": "aHVudGVyMg=="}},
        }
    });
    let input = write(&dir, "in.json", &secret.to_string());
    let args = [
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
    ];
    let (hidden, out) = run_json(&args);
    assert!(!text(&out.stdout).contains("aHVudGVyMg=="));
    assert_eq!(
        hidden["requests"][0]["object"]["data"]["password"],
        "<redacted>"
    );
    let mut show = args.to_vec();
    show.push("--show-secrets");
    let (shown, _) = run_json(&show);
    assert_eq!(
        shown["requests"][0]["object"]["data"]["password"],
        "aHVudGVyMg=="
    );
}

#[test]
fn concurrent_replays_report_in_input_order() {
    let pki = TestPki::new();
    // The first request's webhook answers last: every other call returns at once.
    let server = WebhookServer::start(
        &pki,
        handler(|req| {
            let uid = req.review_uid().unwrap_or_default();
            let review: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let response = common::v1_allow(&uid);
            if review["request"]["name"] == "first" {
                response.with_delay(std::time::Duration::from_secs(2))
            } else {
                response
            }
        }),
    );
    let dir = scratch("concurrency");
    let config = config_file(
        &dir,
        "c.yaml",
        "ValidatingWebhookConfiguration",
        "c",
        &[hook(
            "a.example.com",
            &url_client(&server.url("/allow"), pki.ca_pem()),
            "Fail",
            10,
        )],
    );
    let names = ["first", "second", "third", "fourth", "fifth", "sixth"];
    let lines: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| review(&format!("u-{i}"), "default", n))
        .collect();
    let input = write(&dir, "in.jsonl", &lines.join("\n"));
    let (report, out) = run_json(&[
        "--webhooks",
        config.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--concurrency",
        "4",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let order: Vec<&str> = report["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .map(|r| r["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(order, names);
    // The others were answered while the first one was still waiting.
    let received = server.requests();
    assert_eq!(received.len(), names.len());
    let first = received
        .iter()
        .position(|r| r.body.windows(7).any(|w| w == b"\"first\""))
        .expect("first request received");
    let slow = received[first].responded_at.expect("answered");
    let earlier = received
        .iter()
        .filter(|r| r.responded_at.is_some_and(|t| t < slow))
        .count();
    assert!(
        earlier >= 3,
        "only {earlier} answers came before the slow one"
    );
}

/// An AdmissionReview's text with what is fresh per call or per request masked: the request
/// uid, and the `uid` and `creationTimestamp` the store gives a created object before
/// validation. The rest is what the apiserver sent, byte for byte.
fn request_without_uid(body: &str) -> String {
    let review: Value = serde_json::from_str(body).expect("a review");
    let uid = review["request"]["uid"].as_str().expect("uid").to_string();
    let mut text = body.replacen(&format!(r#""uid":"{uid}""#), r#""uid":"…""#, 1);
    let meta = &review["request"]["object"]["metadata"];
    for field in ["uid", "creationTimestamp"] {
        if let Some(v) = meta[field].as_str() {
            text = text.replace(&format!(r#""{field}":"{v}""#), &format!(r#""{field}":"…""#));
        }
    }
    // Wherever else the created object's uid is written (a Job's generated selector).
    if let Some(uid) = meta["uid"].as_str().filter(|u| !u.is_empty()) {
        text = text.replace(&format!(r#""{uid}""#), r#""…""#);
    }
    text
}

/// Every AdmissionReview a real kube-apiserver v1.32 sent its webhooks (tests/fixtures/
/// oracle-v1.32/received), compared with what the replay of its audit log sends, byte for byte
/// but for the request uid: objects in the Go types' field order with `creationTimestamp: null`,
/// the `managedFields` the field manager added, the options, the user, the kinds.
#[test]
fn the_replay_sends_what_the_apiserver_sent_its_webhooks() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, oracle_handler());
    let dir = scratch("oracle-received");
    let configs = oracle_configurations(&pki, &dir);
    let out = hookscope(&[
        "replay",
        "--kube-version",
        "1.32",
        "--webhooks",
        configs[0].to_str().unwrap(),
        configs[1].to_str().unwrap(),
        "--input",
        &format!("{FIXTURES}/oracle-v1.32/audit.log"),
        "--resolve",
        &format!("127.0.0.1:18443=127.0.0.1:{}", server.port()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Calls grouped by (object name, webhook path), in order within each group: requests may
    // be replayed concurrently, a request's own calls are in order.
    let mut recorded: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let files = received_requests("oracle-v1.32");
    for path in &files {
        let body = std::fs::read_to_string(path).unwrap();
        let review: Value = serde_json::from_str(&body).unwrap();
        let name = review["request"]["name"].as_str().unwrap().to_string();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let webhook = file[5..file.len() - "-req.json".len()].to_string();
        recorded
            .entry((name, webhook))
            .or_default()
            .push(request_without_uid(&body));
    }
    let mut replayed: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for r in server.requests() {
        let body = text(&r.body);
        let review: Value = serde_json::from_str(&body).unwrap();
        let name = review["request"]["name"].as_str().unwrap().to_string();
        let webhook = r
            .path
            .trim_start_matches('/')
            .split('?')
            .next()
            .unwrap()
            .to_string();
        replayed
            .entry((name, webhook))
            .or_default()
            .push(request_without_uid(&body));
    }
    // The session's dry-run probes waited for the configurations to take effect; the replay
    // applies them from the start, so it calls the webhooks for a few more probes.
    let mut compared = 0;
    for (key, bodies) in &recorded {
        let got = replayed
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} not called"));
        let got = &got[got.len().saturating_sub(bodies.len())..];
        for (want, got) in bodies.iter().zip(got) {
            assert_eq!(got, want, "{key:?}");
            compared += 1;
        }
    }
    assert_eq!(compared, files.len());
}

/// A plain manifest in --input is sent to webhooks as `kubectl create -f` sent it to a real
/// kube-apiserver v1.33 (tests/fixtures/policies-v1.33: the configmap created in namespace
/// `other`, which no admission policy binds, so the first webhook saw kubectl's request as is).
#[test]
fn a_plain_manifest_is_sent_as_kubectl_create_sent_it() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, allow_every_review());
    let dir = scratch("manifest-create");
    let input = format!("{FIXTURES}/policies-v1.33/inputs/cm-other.json");
    let out = replay_as_admin(
        &pki,
        &server,
        &dir,
        ("policies-v1.33", "namespaces.yaml"),
        &[&input],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    let notes = report["requests"][0]["notes"].to_string();
    assert!(notes.contains("a plain manifest"), "{notes}");

    assert_first_review_is(
        &server,
        "/add-label",
        "policies-v1.33/received/0016-add-label-req.json",
    );
}

/// The first review `server` received at `path` for the object the fixture `want` names is
/// that fixture but for the request uid and the time in the field manager's entry (the time the
/// request arrived).
fn assert_first_review_is(server: &WebhookServer, path: &str, want: &str) {
    let timeless = |body: &str| {
        let mut review: Value = serde_json::from_str(body).expect("review");
        for entry in review["request"]["object"]["metadata"]["managedFields"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            entry["time"] = Value::from("…");
        }
        let body = serde_json::to_string(&review).expect("json");
        request_without_uid(&body)
    };
    let want = std::fs::read_to_string(format!("{FIXTURES}/{want}")).expect("fixture");
    let name = |body: &str| {
        let review: Value = serde_json::from_str(body).expect("review");
        review["request"]["name"].clone()
    };
    let calls = server.requests();
    let first = calls
        .iter()
        .find(|r| r.path_only() == path && name(&text(&r.body)) == name(&want))
        .unwrap_or_else(|| panic!("{path} not called for {}", name(&want)));
    assert_eq!(timeless(&text(&first.body)), timeless(&want));
}

/// Plain manifests are sent as `kubectl create -f` made a real kube-apiserver v1.33 send them
/// (tests/fixtures/strategies-v1.33: `inputs/pod.yaml` and `inputs/workloads.yaml`, received by
/// the mutating webhook as `received/0005…0013-record-m-req.json`): decoded into their Go types
/// and defaulted before admission (a Pod's `dnsPolicy`, `imagePullPolicy`,
/// `terminationMessagePath`, a projection's `defaultMode`; a Deployment's strategy; a DaemonSet's
/// conversion annotation; the pod templates' defaults…), the defaults owned by kubectl's
/// `managedFields` entry, the fields of gates that are off still there (they go before
/// validation).
#[test]
fn plain_manifests_are_decoded_and_defaulted_before_admission() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, allow_every_review());
    let dir = scratch("manifest-defaulted");
    let inputs =
        ["pod.yaml", "workloads.yaml"].map(|f| format!("{FIXTURES}/strategies-v1.33/inputs/{f}"));
    let inputs = inputs.each_ref().map(String::as_str);
    let fixture = ("strategies-v1.33", "namespaces.yaml");
    let out = replay_as_admin(&pki, &server, &dir, fixture, &inputs);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for n in ["0005", "0007", "0009", "0011", "0013"] {
        let want = format!("strategies-v1.33/received/{n}-record-m-req.json");
        assert_first_review_is(&server, "/record-m", &want);
    }
}

/// `inputs` replayed under 1.33 as `admin` (in `system:masters`) against the webhooks of the
/// recorded session `fixture` (its `inputs/webhooks.yaml`), served by `server`, in the
/// namespaces of its `inputs/` file `namespaces`; a JSON report.
fn replay_as_admin(
    pki: &TestPki,
    server: &WebhookServer,
    dir: &Path,
    (fixture, namespaces): (&str, &str),
    inputs: &[&str],
) -> std::process::Output {
    let webhooks = fixture_configurations(pki, dir, fixture, &["inputs/webhooks.yaml"]).remove(0);
    let cluster = format!("{FIXTURES}/{fixture}/inputs/{namespaces}");
    // The address the session's webhook server had, as its configurations name it.
    let named = std::fs::read_to_string(&webhooks).expect("configurations");
    let at = named
        .find("https://127.0.0.1:")
        .expect("a webhook on loopback")
        + 8;
    let address: String = named[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    let resolve = format!("{address}=127.0.0.1:{}", server.port());
    let mut args = vec![
        "replay",
        "--kube-version",
        "1.33",
        "--webhooks",
        webhooks.to_str().unwrap(),
        "--cluster",
        &cluster,
        "--as",
        "admin",
        "--as-uid",
        "admin",
        "--as-group",
        "system:masters",
        "--resolve",
        &resolve,
        "--format",
        "json",
        "--input",
    ];
    args.extend_from_slice(inputs);
    hookscope(&args)
}

/// The same for the manifests of tests/fixtures/strategies-more-v1.33 (four `kubectl create
/// -f`): every workload kind, an Ingress, Services (a NodePort one and a headless one), claims
/// with data sources, and a Pod; each reaches the mutating webhook as the apiserver sent it.
#[test]
fn every_kind_of_manifest_is_decoded_and_defaulted_before_admission() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, allow_every_review());
    let dir = scratch("manifest-more");
    let inputs: Vec<String> = ["workloads.yaml", "services.yaml", "claims.yaml", "pod.yaml"]
        .iter()
        .map(|f| format!("{FIXTURES}/strategies-more-v1.33/inputs/{f}"))
        .collect();
    let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let fixture = ("strategies-more-v1.33", "namespace.yaml");
    let out = replay_as_admin(&pki, &server, &dir, fixture, &inputs);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for n in (1..=29).step_by(2) {
        let want = format!("strategies-more-v1.33/received/{n:04}-record-m-req.json");
        assert_first_review_is(&server, "/record-m", &want);
    }
}

/// A manifest with a field its kind does not have is refused as the apiserver refuses
/// `kubectl create -f` with it (strict field validation, before admission), naming the fields in
/// the apiserver's words, and so is one with a value of the wrong type (Go's decoding error,
/// which comes first); no webhook is called and the run, with nothing else to replay, fails.
#[test]
fn a_manifest_with_unknown_fields_is_refused_as_strict_decoding_refuses_it() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, allow_every_review());
    let dir = scratch("manifest-unknown");
    let manifest = dir.join("typo.yaml");
    // The replay of `yaml` as the only input.
    let replayed = |yaml: &str| {
        std::fs::write(&manifest, yaml).unwrap();
        replay_as_admin(
            &pki,
            &server,
            &dir,
            ("strategies-v1.33", "namespaces.yaml"),
            &[manifest.to_str().unwrap()],
        )
    };
    // What it says, once it has failed.
    let refusal = |yaml: &str| {
        let out = replayed(yaml);
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("typo.yaml"), "{stderr}");
        stderr
    };
    let stderr = refusal(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\n  namespace: strat\n  labelz: {a: b}\nspec:\n  containers:\n  - name: app\n    image: busybox\n    imagePullPolicyy: Always\n",
    );
    assert!(
        stderr.contains(r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "metadata.labelz", unknown field "spec.containers[0].imagePullPolicyy""#),
        "{stderr}"
    );
    // The problem names the line of the first unknown field.
    assert!(
        stderr.contains("document 1 line 6: metadata.labelz: "),
        "{stderr}"
    );
    let stderr = refusal(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typed\n  namespace: strat\n  generation: three\n  labelz: {a: b}\nspec:\n  containers: [{name: app, image: busybox}]\n",
    );
    assert!(
        stderr.contains(r#"document 1 line 6: metadata.generation: kube-apiserver refuses this create before admission (400 BadRequest): Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field ObjectMeta.metadata.generation of type int64"#),
        "{stderr}"
    );
    assert!(server.requests().is_empty(), "no webhook is called");
    // In a later document, and in JSON: the line of the input, in a list's item too. The first
    // document is replayed; the report names the problem's line.
    let out = replayed(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine, namespace: strat}\n---\n{\"kind\": \"List\", \"apiVersion\": \"v1\", \"items\": [\n  {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n   \"metadata\": {\"name\": \"typo\", \"namespace\": \"strat\"},\n   \"datas\": {}}]}\n",
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["summary"]["allowed"], 1, "{report}");
    let problem = &report["problems"][0];
    assert_eq!(problem["field"], "items[0].datas", "{report}");
    assert_eq!(problem["source"]["index"], 2, "{report}");
    assert_eq!(problem["source"]["line"], 8, "{report}");
}

/// Every AdmissionReview a real kube-apiserver v1.33 sent its webhooks for subresources
/// (tests/fixtures/subresources-v1.33: scale of each scalable kind by patch and by update, a
/// service account token, a binding, an eviction, ephemeral containers, a resize), compared with
/// what the replay of its audit log sends, byte for byte but for the request uid: the Scales the
/// apiserver built from the stored objects, with their converted `managedFields`.
#[test]
fn subresource_requests_are_sent_as_the_apiserver_sent_them() {
    replayed_audit_log_sends_what_the_apiserver_sent("subresources-v1.33", &[]);
}

/// The same for the `scale` subresource of a custom resource (tests/fixtures/custom-scale-v1.33):
/// Scales built from the paths the CustomResourceDefinition names, a parent without the replicas
/// field (the apiserver's "not set" marker in the mutating webhook's old Scale), and the parent
/// kept up to date after each scale so that the next one is replayable too.
#[test]
fn custom_resource_scale_requests_are_sent_as_the_apiserver_sent_them() {
    let crd = format!("{FIXTURES}/custom-scale-v1.33/inputs/crd.yaml");
    replayed_audit_log_sends_what_the_apiserver_sent("custom-scale-v1.33", &["--cluster", &crd]);
}

/// Server-side applies of a custom resource (`tests/fixtures/custom-apply-v1.33`): an apply that
/// creates, applies by a second manager merging a map-list by key and a set-list, a repeated apply
/// that changes nothing, an update that prunes what its manager no longer applies (atomic lists,
/// atomic maps, a preserve-unknown-fields object, an embedded resource, an int-or-string), a
/// forced apply and an apply of the status subresource reach the webhooks as the apiserver sent
/// them, `managedFields` included; the apply that conflicted never reached them and is reported
/// with the apiserver's own message.
#[test]
fn custom_resource_server_side_applies_are_sent_as_the_apiserver_sent_them() {
    let fixture = "custom-apply-v1.33";
    let crd = format!("{FIXTURES}/{fixture}/inputs/crd.yaml");
    // The conflict, as the apiserver answered it in the audit log.
    let log = std::fs::read_to_string(format!("{FIXTURES}/{fixture}/audit.log")).unwrap();
    let conflicts: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["stage"] == "ResponseComplete" && e["responseStatus"]["code"] == 409)
        .collect();
    assert_eq!(conflicts.len(), 1);
    let said = conflicts[0]["responseObject"]["message"].as_str().unwrap();
    let report = replay_and_compare_with_recorded_reviews(fixture, &["--cluster", &crd]);
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["kind"], "notReplayable");
    assert_eq!(problems[0]["source"]["auditID"], conflicts[0]["auditID"]);
    let message = problems[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(": {said} (the apiserver answered 409)")),
        "{message}"
    );
    assert_eq!(report["summary"]["notReplayable"], 1);
}

/// A MutatingAdmissionPolicy's ApplyConfiguration on custom resources (`tests/fixtures/custom-policy-v1.33`):
/// on a create and on a server-side apply that creates, the policy's port is merged by key into
/// the object's map-list (keyed by its key field's default, then defaulted), its tag into the
/// set-list and its label into the map, and the webhooks after it receive what the apiserver sent.
#[test]
fn custom_resource_policy_apply_configurations_are_sent_as_the_apiserver_sent_them() {
    let crd = format!("{FIXTURES}/custom-policy-v1.33/inputs/crd.yaml");
    let report =
        replay_and_compare_with_recorded_reviews("custom-policy-v1.33", &["--cluster", &crd]);
    // Only the note that 1.33 runs these policies behind a feature gate (the session's apiserver
    // had it on).
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["kind"], "warning");
    let message = problems[0]["message"].as_str().unwrap();
    assert!(
        message.contains("--feature-gates=MutatingAdmissionPolicy=true"),
        "{message}"
    );
}

/// A webhook matched through `matchPolicy: Equivalent` at another version of the resource
/// (`tests/fixtures/equivalent-v1.33`: HorizontalPodAutoscalers created, patched and deleted
/// through autoscaling/v2 and v1, webhooks on both versions that patch): each receives the object
/// and old object converted to its version as the apiserver converts them (v1's annotations
/// carrying the metrics, behavior and current metrics v1 has no field for), its patch is applied
/// in that version and converted back, and the next webhook and the stored object see that.
#[test]
fn equivalent_matches_send_the_object_converted_to_the_webhooks_version() {
    let fixture = "equivalent-v1.33";
    let report = replay_equivalent_session(fixture);
    assert_eq!(report["problems"], json!([]), "{}", report["problems"]);
    assert_eq!(verdicts_as_recorded(fixture, &report), 6);
}

/// A MutatingAdmissionPolicy on events.k8s.io/v1 events matched by a core/v1 Event: its
/// expression reads the converted object (`object.note`), and its result cannot be converted to
/// another group, which fails the request as it failed a real v1.33.3 apiserver
/// (`tests/fixtures/equivalent-policies-v1.33/events/kubectl.txt`).
#[test]
fn a_mutating_policy_matched_through_another_group_fails_as_upstreams_does() {
    let dir = format!("{FIXTURES}/equivalent-policies-v1.33/events");
    // The create, as the AdmissionReview of its request (a manifest of kind Event would be read
    // as an audit event).
    let event: Value =
        hookscope::yaml::from_str(&std::fs::read_to_string(format!("{dir}/event.yaml")).unwrap())
            .unwrap();
    let request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Event"},
        "resource": {"group": "", "version": "v1", "resource": "events"},
        "name": "e1", "namespace": "ev", "operation": "CREATE",
        "userInfo": {"username": "admin"},
        "object": event,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }});
    let scratch = scratch("equivalent-events");
    let input = write(&scratch, "event.json", &format!("{request}\n"));
    let out = hookscope(&[
        "replay",
        "--kube-version",
        "1.33",
        "--webhooks",
        &format!("{dir}/policy.yaml"),
        "--input",
        input.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    let request = &report["requests"][0];
    let recorded = std::fs::read_to_string(format!("{dir}/kubectl.txt")).unwrap();
    let message = recorded.lines().nth(1).unwrap();
    let message = message.split_once("is invalid: : ").unwrap().1;
    assert_eq!(request["allowed"], false, "{request}");
    assert_eq!(request["status"]["reason"], "Invalid");
    assert!(
        request["status"]["message"]
            .as_str()
            .unwrap()
            .ends_with(message),
        "{}",
        request["status"]
    );
}

/// Replays a recorded session of `tests/fixtures/equivalent-*` (webhook server on port 18491)
/// with its webhooks answering as they answered, compares every review sent with the recorded
/// ones and returns the report.
fn replay_equivalent_session(fixture: &str) -> Value {
    let answer = answer_as_recorded(fixture);
    let replayed = replay_fixture_audit_log_answering(fixture, &[], answer, 18491);
    compare_with_recorded_reviews(fixture, replayed)
}

/// Checks every replayed request of `horizontalpodautoscalers` against the recorded session's
/// audit event: a denial's code, reason and message; an allowed write's object as stored (the
/// response's, but for what the store sets after admission, `resourceVersion`, and a created
/// object's `uid`, random upstream); the webhooks' audit annotations. Returns how many requests
/// it checked.
fn verdicts_as_recorded(fixture: &str, report: &Value) -> usize {
    let log = std::fs::read_to_string(format!("{FIXTURES}/{fixture}/audit.log")).unwrap();
    let events = common::completed_audit_events(&log);
    let mut checked = 0;
    for r in report["requests"].as_array().unwrap() {
        if r["resource"]["resource"] != "horizontalpodautoscalers" {
            continue;
        }
        let event = &events[r["source"]["auditID"].as_str().unwrap()];
        let status = &event["responseStatus"];
        let what = format!("{} {}", r["operation"], r["name"]);
        if status["code"].as_i64().unwrap() >= 400 {
            assert_eq!(r["allowed"], false, "{what}");
            for member in ["code", "reason", "message"] {
                assert_eq!(r["status"][member], status[member], "{what}: {member}");
            }
        } else {
            assert_eq!(r["allowed"], true, "{what}: {}", r["status"]);
            if r["operation"] != "DELETE" {
                let mut stored = event["responseObject"].clone();
                let mut replayed = r["object"].clone();
                for object in [&mut stored, &mut replayed] {
                    let meta = object["metadata"].as_object_mut().unwrap();
                    meta.remove("resourceVersion");
                    if r["operation"] == "CREATE" {
                        // Random upstream; derived from the request in a replay.
                        meta.remove("uid");
                    }
                }
                assert_eq!(replayed, stored, "{what}");
            }
        }
        let admission: BTreeMap<&String, &Value> = event["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.contains(".admission.k8s.io/"))
            .collect();
        let replayed: BTreeMap<&String, &Value> =
            r["annotations"].as_object().unwrap().iter().collect();
        assert_eq!(replayed, admission, "{what}");
        checked += 1;
    }
    checked
}

/// Admission policies and webhook matchConditions matched through an equivalent version
/// (`tests/fixtures/equivalent-policies-v1.33`): they read the object converted to the version
/// they matched (a v1 field in a condition, v1's metrics annotation in a validation, a v1
/// field in a message), and a MutatingAdmissionPolicy matched so fails as the apiserver's does
/// (it cannot convert its result back); the reviews sent and every verdict are the recorded ones.
#[test]
fn policies_and_conditions_read_the_object_converted_to_their_version() {
    let fixture = "equivalent-policies-v1.33";
    let report = replay_equivalent_session(fixture);
    // The policies here are MutatingAdmissionPolicies of 1.33, an alpha API.
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("modelled as enabled")
    );
    assert_eq!(verdicts_as_recorded(fixture, &report), 4);
}

/// A handler answering each call as the recorded session's webhook answered the call of the same
/// path in the same place (`received/NNNN-PATH-resp.json`), echoing the uid.
fn answer_as_recorded(fixture: &str) -> common::Handler {
    let mut answers: BTreeMap<String, std::collections::VecDeque<Value>> = BTreeMap::new();
    let dir = format!("{FIXTURES}/{fixture}/received");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-resp.json"))
        .collect();
    files.sort();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let webhook = file[5..file.len() - "-resp.json".len()].to_string();
        let body: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        answers.entry(webhook).or_default().push_back(body);
    }
    let answers = std::sync::Mutex::new(answers);
    handler(move |req| {
        let review: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let uid = review["request"]["uid"].as_str().unwrap_or_default();
        let path = req.path_only().trim_start_matches('/').to_string();
        let next = answers
            .lock()
            .unwrap()
            .get_mut(&path)
            .and_then(|q| q.pop_front());
        match next {
            Some(mut answer) => {
                answer["response"]["uid"] = json!(uid);
                common::TestResponse::json(200, answer.to_string())
            }
            None => common::v1_allow(uid),
        }
    })
}

/// Merge and JSON patches of a custom resource (`tests/fixtures/custom-patch-v1.33`): the patched
/// object is decoded as its definition's codec decodes it, so a defaulted field the patch removes
/// or sets to null is back, and a list item it adds gets its defaults, as the webhooks received.
#[test]
fn custom_resource_patches_are_defaulted_as_the_apiserver_decodes_them() {
    let crd = format!("{FIXTURES}/custom-patch-v1.33/inputs/crd.yaml");
    replayed_audit_log_sends_what_the_apiserver_sent("custom-patch-v1.33", &["--cluster", &crd]);
}

/// A server-side apply of a custom resource whose definition is unknown, or gives no schema for
/// the version applied, is not replayable, and says what is missing.
#[test]
fn custom_resource_applies_without_a_schema_say_what_is_missing() {
    let dir = scratch("custom-apply-no-schema");
    let log = std::fs::read_to_string(format!("{FIXTURES}/custom-apply-v1.33/audit.log")).unwrap();
    // The session's applies alone, without the creation of their definition.
    let applies: Vec<&str> = log
        .lines()
        .filter(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["stage"] == "ResponseComplete"
                && e["verb"] == "patch"
                && e["objectRef"]["resource"] == "gadgets"
        })
        .collect();
    assert_eq!(applies.len(), 7);
    let input = dir.join("applies.log");
    std::fs::write(&input, applies.join("\n")).unwrap();
    let no_schema = dir.join("crd.yaml");
    std::fs::write(
        &no_schema,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gadgets, kind: Gadget}\n  versions: [{name: v1, served: true, storage: true}]\n",
    )
    .unwrap();
    let webhooks = format!("{FIXTURES}/custom-apply-v1.33/inputs/webhooks.yaml");
    for (extra, want) in [
        (
            vec![],
            "server-side apply of a custom resource needs its CustomResourceDefinition (add it with --cluster)",
        ),
        (
            vec!["--cluster", no_schema.to_str().unwrap()],
            "the CustomResourceDefinition of gadgets gives no schema for v1, which server-side apply needs",
        ),
    ] {
        let args = [
            &[
                "replay",
                "--webhooks",
                &webhooks,
                "--input",
                input.to_str().unwrap(),
                "--format",
                "json",
            ][..],
            &extra,
        ]
        .concat();
        let out = hookscope(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).expect("report");
        let problems = report["problems"].as_array().unwrap();
        // The first apply created the object: the rest find no old object either way.
        let first = problems[0]["message"].as_str().unwrap();
        assert!(
            first.starts_with("apply patch: the patch created gadgets crs/g (201)"),
            "{first}"
        );
        assert!(first.ends_with(want), "{first}");
        for p in problems {
            assert_eq!(p["kind"], "notReplayable", "{p}");
        }
        assert_eq!(problems.len(), 7, "{problems:?}");
    }
}

/// A TokenRequest naming no audience reaches validating webhooks with the apiserver's
/// `--api-audiences`: the recorded server's by default, those given otherwise.
#[test]
fn a_token_request_gets_the_api_audiences_given() {
    let audiences = [
        "--api-audiences",
        "https://kubernetes.default.svc.cluster.local,vault",
    ];
    let (server, _) = replay_fixture_audit_log("subresources-v1.33", &audiences);
    let audiences: Vec<Value> = server
        .requests()
        .iter()
        .filter(|r| r.path_only() == "/record")
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|review| review["request"]["kind"]["kind"] == "TokenRequest")
        .map(|review| review["request"]["object"]["spec"]["audiences"].clone())
        .collect();
    assert_eq!(
        audiences,
        [json!([
            "https://kubernetes.default.svc.cluster.local",
            "vault"
        ])]
    );
}

/// Replays the audit log of the recorded session `fixture` (with `extra` arguments) against its
/// `inputs/webhooks.yaml`, served by a webhook that allows every review: the server, with what
/// it received, and the JSON report.
fn replay_fixture_audit_log(fixture: &str, extra: &[&str]) -> (WebhookServer, Value) {
    replay_fixture_audit_log_answering(fixture, extra, allow_every_review(), 18443)
}

/// [`replay_fixture_audit_log`] with webhooks answered by `answer`, the session's webhook
/// server having listened on `port`.
fn replay_fixture_audit_log_answering(
    fixture: &str,
    extra: &[&str],
    answer: common::Handler,
    port: u16,
) -> (WebhookServer, Value) {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, answer);
    let dir = scratch(&format!("{fixture}-received-{}", extra.len()));
    let webhooks = fixture_configurations(&pki, &dir, fixture, &["inputs/webhooks.yaml"]).remove(0);
    let audit_log = format!("{FIXTURES}/{fixture}/audit.log");
    let resolve = format!("127.0.0.1:{port}=127.0.0.1:{}", server.port());
    let args = [
        &[
            "replay",
            "--kube-version",
            "1.33",
            "--webhooks",
            webhooks.to_str().unwrap(),
            "--input",
            &audit_log,
            "--resolve",
            &resolve,
            "--format",
            "json",
        ][..],
        extra,
    ]
    .concat();
    let out = hookscope(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    (server, report)
}

/// Replays the audit log of the recorded session `fixture` (with `extra` arguments) against its
/// `inputs/webhooks.yaml` and compares every AdmissionReview sent with those the apiserver sent,
/// byte for byte but for the request uid.
fn replayed_audit_log_sends_what_the_apiserver_sent(fixture: &str, extra: &[&str]) {
    let report = replay_and_compare_with_recorded_reviews(fixture, extra);
    assert_eq!(report["problems"], json!([]), "{}", report["problems"]);
}

/// The comparison of [`replayed_audit_log_sends_what_the_apiserver_sent`], returning the report
/// for the caller to judge what was not replayed.
fn replay_and_compare_with_recorded_reviews(fixture: &str, extra: &[&str]) -> Value {
    compare_with_recorded_reviews(fixture, replay_fixture_audit_log(fixture, extra))
}

/// Compares every AdmissionReview `server` received in a replay of the recorded session
/// `fixture` with those the apiserver sent, byte for byte but for the request uid; returns the
/// replay's report.
fn compare_with_recorded_reviews(fixture: &str, (server, report): (WebhookServer, Value)) -> Value {
    let key = |body: &str, path: &str| {
        let review: Value = serde_json::from_str(body).unwrap();
        let r = &review["request"];
        (
            format!("{}/{}", r["resource"]["resource"], r["subResource"]),
            r["name"].as_str().unwrap_or_default().to_string(),
            path.to_string(),
        )
    };
    let mut recorded: BTreeMap<_, Vec<String>> = BTreeMap::new();
    for path in &received_requests(fixture) {
        let body = std::fs::read_to_string(path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        // The probes that waited for the configurations are named so.
        let webhook = file[5..file.len() - "-req.json".len()].trim_end_matches("-probe");
        recorded
            .entry(key(&body, webhook))
            .or_default()
            .push(request_without_uid(&body));
    }
    let mut replayed: BTreeMap<_, Vec<String>> = BTreeMap::new();
    for r in server.requests() {
        let body = text(&r.body);
        let webhook = r.path_only().trim_start_matches('/').to_string();
        replayed
            .entry(key(&body, &webhook))
            .or_default()
            .push(request_without_uid(&body));
    }
    assert_eq!(
        recorded.keys().collect::<Vec<_>>(),
        replayed.keys().collect::<Vec<_>>()
    );
    // Every difference, not only the first.
    let mut differences = Vec::new();
    for (k, want) in &recorded {
        let got = &replayed[k];
        assert_eq!(got.len(), want.len(), "{k:?}");
        for (g, w) in got.iter().zip(want).filter(|(g, w)| g != w) {
            let at = g.bytes().zip(w.bytes()).take_while(|(a, b)| a == b).count();
            let around = |t: &str| {
                // Widened to whole characters (the texts hold `…`).
                let mut start = at.saturating_sub(120).min(t.len());
                let mut end = (at + 120).min(t.len());
                while !t.is_char_boundary(start) {
                    start -= 1;
                }
                while !t.is_char_boundary(end) {
                    end += 1;
                }
                t[start..end].to_string()
            };
            differences.push(format!(
                "{k:?} differs at byte {at}:\n replayed …{}…\n recorded …{}…",
                around(g),
                around(w)
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    report
}

/// A handler that allows every review, echoing its uid.
fn allow_every_review() -> common::Handler {
    handler(|req| {
        let review: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        common::v1_allow(review["request"]["uid"].as_str().unwrap_or_default())
    })
}

/// The request files a recorded session's webhook server received, in order.
fn received_requests(fixture: &str) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(format!("{FIXTURES}/{fixture}/received"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-req.json"))
        .collect();
    files.sort();
    files
}

/// The text summary's per-webhook table stays aligned whatever the names' lengths, and JUnit
/// counts the webhooks called, not those skipped.
#[test]
fn the_summary_table_aligns_long_names_and_junit_counts_calls_made() {
    let dir = scratch("summary");
    let skipped = format!(
        "{}  objectSelector: {{matchLabels: {{never: \"x\"}}}}\n",
        hook(
            "skips.example.com",
            "{url: \"https://127.0.0.1:9/s\"}",
            "Fail",
            10
        )
    );
    let short = config_file(
        &dir,
        "a.yaml",
        "ValidatingWebhookConfiguration",
        "a",
        &[skipped],
    );
    let input = write(
        &dir,
        "in.jsonl",
        &format!("{}\n", review("u-1", "default", "a")),
    );
    let out = replay_files(&[&short], &input, &["--format", "junit"]);
    let xml = text(&out.stdout);
    assert!(xml.contains("allowed (0 webhook calls)"), "{xml}");

    let long = config_file(
        &dir,
        "b.yaml",
        "ValidatingWebhookConfiguration",
        "a-configuration-with-a-rather-long-name-for-a-summary-table",
        &[hook(
            "and-a-long-webhook-name.validation.example.com",
            "{url: \"https://127.0.0.1:9/v\"}",
            "Ignore",
            10,
        )],
    );
    let script = write(
        &dir,
        "script.yaml",
        "and-a-long-webhook-name.validation.example.com:\n  allowed: true\n",
    );
    let out = replay_files(
        &[&short, &long],
        &input,
        &["--script", script.to_str().unwrap()],
    );
    let stdout = text(&out.stdout);
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("webhook "))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 3, "{stdout}");
    let widths: Vec<usize> = table.iter().map(|l| l.chars().count()).collect();
    assert!(widths.iter().all(|w| *w == widths[0]), "{stdout}");
    assert!(table[0].ends_with("fail-open"), "{stdout}");
}

/// `hookscope replay` of the configurations `webhooks` and the requests `input`, with `extra`.
fn replay_files(webhooks: &[&Path], input: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["replay", "--webhooks"];
    args.extend(webhooks.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--input", input.to_str().unwrap()]);
    args.extend_from_slice(extra);
    hookscope(&args)
}

/// Levels the apiserver decodes in a request body (sigs.k8s.io/json's `maxNestingDepth`).
const MAX_DEPTH: usize = hookscope::json::MAX_DEPTH;

/// A `Widget` (a custom resource) named `name` nested `levels` deep: the object is one level,
/// `spec` and the objects under it the others, the innermost holding `"a":1`.
fn deep_widget(name: &str, levels: usize) -> String {
    format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"{name}","namespace":"default"}},"spec":{}1{}}}"#,
        r#"{"a":"#.repeat(levels - 1),
        "}".repeat(levels - 1)
    )
}

/// The deepest nesting in JSON text (the outermost container counts one).
fn depth_of(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in text {
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (false, b'{' | b'[') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, b'}' | b']') => depth -= 1,
            _ => {}
        }
    }
    deepest
}

/// The three captures of a create of `object` (whose text has no line breaks): an
/// AdmissionReview, an audit log line and the manifest itself; each file's line is one line.
fn deep_captures(dir: &Path, object: &str) -> [(PathBuf, String); 3] {
    let review = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u-1","kind":{{"group":"example.com","version":"v1","kind":"Widget"}},"resource":{{"group":"example.com","version":"v1","resource":"widgets"}},"name":"r","namespace":"default","operation":"CREATE","userInfo":{{"username":"alice"}},"object":{object},"oldObject":null,"dryRun":false}}}}"#
    );
    let event = format!(
        r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"a-1","stage":"ResponseComplete","requestURI":"/apis/example.com/v1/namespaces/default/widgets","verb":"create","user":{{"username":"alice","groups":["system:authenticated"]}},"objectRef":{{"resource":"widgets","namespace":"default","apiGroup":"example.com","apiVersion":"v1"}},"responseStatus":{{"metadata":{{}},"code":201}},"requestObject":{object}}}"#
    );
    [
        ("review.json", review),
        ("audit.log", event),
        ("widget.json", object.to_string()),
    ]
    .map(|(file, line)| (write(dir, file, &format!("{line}\n")), line))
}

/// The Widget CustomResourceDefinition, for `--cluster`.
fn widget_crd(dir: &Path) -> PathBuf {
    write(
        dir,
        "crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
    )
}

#[test]
fn an_object_nested_as_deep_as_the_apiserver_reads_is_replayed_through_https_webhooks() {
    let pki = TestPki::new();
    // The request uid is the first uid of a review as the apiserver writes it; the body is too
    // deep for the test's own JSON parser, so it is not parsed.
    let uid = |body: &[u8]| {
        let text = String::from_utf8_lossy(body);
        let start = text.find(r#""uid":""#).expect("a uid") + 7;
        text[start..start + text[start..].find('"').unwrap()].to_string()
    };
    // The mutating webhook replaces the innermost value and adds a label; the validating one
    // allows only the object so mutated, whole.
    let leaf = format!("/spec{}", "/a".repeat(MAX_DEPTH - 1));
    let patch = json!([
        {"op": "replace", "path": leaf, "value": 2},
        {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}},
    ])
    .to_string();
    // Another adds a member to the innermost object: one level more than the apiserver decodes.
    let deepen = json!([
        {"op": "add", "path": format!("/spec{}/b", "/a".repeat(MAX_DEPTH - 2)), "value": {"c": 1}},
    ])
    .to_string();
    let server = WebhookServer::start(
        &pki,
        handler(move |req| {
            let uid = uid(&req.body);
            let body = String::from_utf8_lossy(&req.body);
            match req.path_only() {
                "/mutate" => v1_patch(&uid, &patch),
                "/deepen" => v1_patch(&uid, &deepen),
                _ if body.contains(r#"{"a":2}"#)
                    && !body.contains(r#"{"a":1}"#)
                    && body.contains(r#""labels":{"mutated":"yes"}"#) =>
                {
                    common::v1_allow(&uid)
                }
                _ => v1_deny(&uid, 403, "not the mutated object"),
            }
        }),
    );
    let dir = scratch("deep");
    let client = |path: &str| url_client(&server.url(path), pki.ca_pem());
    let rule = r#"[{operations: [CREATE], apiGroups: ["example.com"], apiVersions: [v1], resources: [widgets]}]"#;
    let webhook = |name: &str, path: &str| {
        hook(name, &client(path), "Fail", 10).replace(
            r#"[{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]"#,
            rule,
        )
    };
    let configuration = |kind: &str, name: &str, path: &str| {
        let hooks = [webhook(&format!("{name}.example.com"), path)];
        config_file(&dir, &format!("{name}.yaml"), kind, name, &hooks)
    };
    let mutating = configuration("MutatingWebhookConfiguration", "m", "/mutate");
    let validating = configuration("ValidatingWebhookConfiguration", "v", "/validate");
    let crd = widget_crd(&dir);
    let captures = deep_captures(&dir, &deep_widget("w", MAX_DEPTH));
    let inputs = captures.iter().map(|(p, _)| p.to_str().unwrap());
    let recording = dir.join("recording");
    let args = [
        vec!["replay", "--cluster", crd.to_str().unwrap(), "--webhooks"],
        vec![mutating.to_str().unwrap(), validating.to_str().unwrap()],
        vec!["--input"],
        inputs.collect(),
    ]
    .concat();
    // Recorded, then replayed offline from the recording: the same answers.
    let record = ["--record", recording.to_str().unwrap()];
    let replies = ["--replies", recording.to_str().unwrap()];
    for extra in [record, replies] {
        let out = hookscope(&[&args[..], &extra].concat());
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.ends_with("3 requests replayed: 3 allowed, 0 denied\n"),
            "{extra:?}: {stdout}"
        );
    }
    // Each webhook received each object whole: the review wraps it two levels deep.
    let received = server.requests();
    assert_eq!(received.len(), 6);
    for r in &received {
        assert_eq!(depth_of(&r.body), MAX_DEPTH + 2, "{}", r.path);
    }

    // A patch that makes the object deeper than the apiserver decodes fails the request as the
    // decode of the patched object fails it there.
    let deepening = configuration("MutatingWebhookConfiguration", "d", "/deepen");
    let out = hookscope(&[
        "replay",
        "--webhooks",
        deepening.to_str().unwrap(),
        "--input",
        captures[0].0.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "denied 500 (1 called)"
        ) && stdout.contains(
            "Internal error occurred: couldn't get version/kind; json parse error: invalid character '{' exceeded max depth\n"
        ),
        "{stdout}"
    );
}

#[test]
fn an_object_one_level_deeper_than_the_apiserver_reads_is_refused_with_its_words() {
    let dir = scratch("too-deep");
    let config = unreachable_config(&dir);
    let crd = widget_crd(&dir);
    let object = deep_widget("w", MAX_DEPTH + 1);
    // The brace that opens level 10,001: the last one of `spec`.
    let in_object = object.rfind(r#"{"a":"#).unwrap();
    for (path, line) in deep_captures(&dir, &object) {
        let (code, stderr, report) = replay_with_report(
            &dir,
            &[
                "--webhooks",
                config.to_str().unwrap(),
                "--cluster",
                crd.to_str().unwrap(),
                "--input",
                path.to_str().unwrap(),
            ],
        );
        let file = path.file_name().unwrap().to_str().unwrap();
        let column = line.find(r#"{"apiVersion":"example.com/v1""#).unwrap() + in_object + 1;
        let at = format!("invalid character '{{' exceeded max depth at line 1 column {column}");
        let problems = report["problems"].as_array().unwrap();
        let invalid: Vec<_> = problems.iter().filter(|p| p["kind"] == "invalid").collect();
        assert_eq!(invalid.len(), 1, "{file}: {problems:#?}");
        assert_eq!(invalid[0]["source"]["file"], path.to_str().unwrap());
        assert_eq!(invalid[0]["source"]["index"], 1, "{file}: line 1");
        let (field, message) = match file {
            // An audit event's members are named, each decoded on its own.
            "audit.log" => ("requestObject", at),
            _ => ("", format!("invalid JSON: {at}")),
        };
        assert_eq!(invalid[0]["field"], field, "{file}");
        assert_eq!(invalid[0]["message"], message, "{file}");
        assert_eq!(report["summary"]["total"], 0, "{file}");
        // An input whose only request is refused is a broken setup, as any unreadable input;
        // an audit log whose events were read is readable.
        let expected = if file == "audit.log" { 0 } else { 2 };
        assert_eq!(code, Some(expected), "{file}: {stderr}");
    }
}

/// A `Widget` manifest in YAML (flow mappings with plain keys, which JSON cannot read) whose
/// `spec` holds `levels - 1` nested mappings: the object is `levels` deep.
fn deep_widget_yaml(levels: usize) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: w, namespace: default}}\nspec: {}1{}\n",
        "{a: ".repeat(levels - 1),
        "}".repeat(levels - 1)
    )
}

#[test]
fn a_yaml_manifest_nested_as_deep_as_kubectl_reads_is_replayed_and_one_level_more_is_refused() {
    let dir = scratch("deep-yaml");
    let config = unreachable_config(&dir);
    let crd = widget_crd(&dir);
    let deep = write(&dir, "widget.yaml", &deep_widget_yaml(MAX_DEPTH));
    let out = hookscope(&[
        "replay",
        "--webhooks",
        config.to_str().unwrap(),
        "--cluster",
        crd.to_str().unwrap(),
        "--input",
        deep.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.ends_with("1 request replayed: 1 allowed, 0 denied\n"),
        "{stdout}\n{stderr}"
    );

    // go-yaml's limit, in its words, where the mapping of level 10,001 opens.
    let too_deep = deep_widget_yaml(MAX_DEPTH + 1);
    let path = write(&dir, "too-deep.yaml", &too_deep);
    let (code, stderr, report) = replay_with_report(
        &dir,
        &[
            "--webhooks",
            config.to_str().unwrap(),
            "--cluster",
            crd.to_str().unwrap(),
            "--input",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    let problems = report["problems"].as_array().unwrap();
    let invalid: Vec<_> = problems.iter().filter(|p| p["kind"] == "invalid").collect();
    assert_eq!(invalid.len(), 1, "{problems:#?}");
    // `spec: ` ends at column 6 and each level opens with `{a: `.
    let column = 7 + 4 * (MAX_DEPTH - 1);
    assert_eq!(
        invalid[0]["message"],
        format!("invalid YAML: line 4 column {column}: exceeded max depth of 10000")
    );
    assert_eq!(report["summary"]["total"], 0);
}

#[test]
fn errors_point_at_the_line_and_column_of_the_file_in_indented_json_and_yaml() {
    let dir = scratch("positions");
    let config = unreachable_config(&dir);
    let problems_of = |input: &Path| {
        let (code, stderr, report) = replay_one(&dir, &config, input);
        assert_eq!(code, Some(0), "{stderr}");
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| format!("{} {}: {}", p["source"]["index"], p["field"], p["message"]))
            .collect::<Vec<_>>()
    };
    // Where `needle` is in `text`: 1-based line and the column just after it.
    let after = |text: &str, needle: &str| {
        let line = text.lines().position(|l| l.contains(needle)).unwrap();
        let col = text.lines().nth(line).unwrap().find(needle).unwrap() + needle.len() + 1;
        (line + 1, col)
    };

    // An indented manifest after a good one, with a bad number deep in it.
    let manifest = |name: &str, value: &str| {
        serde_json::to_string_pretty(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "data": {"k": "PLACEHOLDER"},
        }))
        .unwrap()
        .replace("\"PLACEHOLDER\"", value)
    };
    let text = format!("{}\n{}\n", manifest("good", "\"v\""), manifest("bad", "01"));
    let (line, column) = after(&text, "\"k\": 0");
    assert!(line > 15, "deep in the file");
    let input = write(&dir, "manifests.json", &text);
    assert_eq!(
        problems_of(&input),
        [format!(
            r#"2 "": "invalid JSON: invalid number at line {line} column {column}""#
        )]
    );

    // An indented audit event whose request body holds it.
    let event = serde_json::to_string_pretty(&json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request", "auditID": "a-1",
        "stage": "ResponseComplete", "verb": "create",
        "requestURI": "/api/v1/namespaces/default/configmaps",
        "user": {"username": "alice"},
        "objectRef": {"resource": "configmaps", "namespace": "default", "apiVersion": "v1"},
        "responseStatus": {"metadata": {}, "code": 201},
        "requestObject": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "PLACEHOLDER"}},
    }))
    .unwrap()
    .replace("\"PLACEHOLDER\"", "01");
    let (line, column) = after(&event, "\"k\": 0");
    let input = write(&dir, "event.json", &format!("{event}\n"));
    assert_eq!(
        problems_of(&input),
        [format!(
            r#"1 "requestObject": "invalid number at line {line} column {column}""#
        )]
    );

    // YAML: the second document's error, at the file's line (not the document's).
    let yaml = "# two manifests\n\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: default}\ndata: {k: v}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n  namespace: default\ndata:\n  k: [1, 2\n  j: v\n";
    let (line, column) = after(yaml, "  j");
    let input = write(&dir, "manifests.yaml", yaml);
    let expected = format!(
        r#"2 "": "invalid YAML: line {line} column {column}: illegal placement of ':' indicator""#
    );
    assert_eq!(problems_of(&input), std::slice::from_ref(&expected));
    // The same file given with --cluster: the same place.
    let capture = write(&dir, "review.jsonl", &review("u-1", "default", "cm"));
    let (code, stderr, report) = replay_with_report(
        &dir,
        &[
            "--webhooks",
            config.to_str().unwrap(),
            "--cluster",
            input.to_str().unwrap(),
            "--input",
            capture.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let problem = &report["problems"][0];
    assert_eq!(problem["source"]["file"], input.to_str().unwrap());
    assert_eq!(
        format!(
            "{} {}: {}",
            problem["source"]["index"], problem["field"], problem["message"]
        ),
        expected
    );
}

/// An audit event of the create of ConfigMap `name` at `stage` (request `id`).
fn create_event(id: &str, stage: &str, name: &str) -> String {
    let mut event = json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request", "auditID": id,
        "stage": stage, "verb": "create", "requestURI": "/api/v1/namespaces/default/configmaps",
        "user": {"username": "alice", "groups": ["system:authenticated"]},
        "objectRef": {"resource": "configmaps", "namespace": "default", "name": name, "apiVersion": "v1"},
        "requestObject": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}},
    });
    if stage == "ResponseComplete" {
        event["responseStatus"] = json!({"metadata": {}, "code": 201});
    }
    event.to_string()
}

#[test]
fn requests_completed_from_an_earlier_stage_keep_their_place_in_every_output() {
    let dir = scratch("stage-order");
    let config = unreachable_config(&dir);
    // Stages of several requests interleave; c and e never complete (a log cut short): each is
    // replayed from its latest stage, at that stage's line.
    let lines = [
        create_event("a", "RequestReceived", "cm-a"),
        create_event("b", "RequestReceived", "cm-b"),
        create_event("b", "ResponseComplete", "cm-b"),
        create_event("c", "RequestReceived", "cm-c"),
        create_event("a", "ResponseComplete", "cm-a"),
        r#"{"kind": "Event", "#.to_string(),
        create_event("d", "ResponseComplete", "cm-d"),
        create_event("e", "RequestReceived", "cm-e"),
        create_event("e", "ResponseStarted", "cm-e"),
        create_event("f", "ResponseComplete", "cm-f"),
    ];
    let log = write(&dir, "audit.log", &(lines.join("\n") + "\n"));
    let order: [(u64, &str); 7] = [
        (3, "cm-b"),
        (4, "cm-c"),
        (5, "cm-a"),
        (6, ""),
        (7, "cm-d"),
        (9, "cm-e"),
        (10, "cm-f"),
    ];

    let (code, stderr, report) = replay_one(&dir, &config, &log);
    assert_eq!(code, Some(0), "{stderr}");
    let requests: Vec<(u64, &str)> = (report["requests"].as_array().unwrap().iter())
        .map(|r| {
            let at = r["source"]["index"].as_u64().unwrap();
            (at, r["name"].as_str().unwrap())
        })
        .collect();
    let expected: Vec<(u64, &str)> = (order.iter().filter(|(_, n)| !n.is_empty()))
        .map(|&(i, n)| (i, n))
        .collect();
    assert_eq!(requests, expected);
    assert_eq!(report["problems"][0]["source"]["index"], 6);

    // Text (every request with -v, the bad line among them) and JUnit: the same order.
    let script = write(&dir, "allow-all.yaml", "{}\n");
    let run = |format: &str| {
        let (config, log, script) = (config.to_str(), log.to_str(), script.to_str());
        let out = hookscope(&[
            "replay",
            "-v",
            "--format",
            format,
            "--script",
            script.unwrap(),
            "--webhooks",
            config.unwrap(),
            "--input",
            log.unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let junit = run("junit");
    let cases: Vec<u64> = (junit.split("<testcase name=\"").skip(1))
        .map(|c| c.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let expected_lines: Vec<u64> = order.iter().map(|&(i, _)| i).collect();
    assert_eq!(cases, expected_lines, "{junit}");
    // The text lists requests and problems as they come: in line order.
    let text = run("text");
    let at_lines: Vec<u64> = (text.lines())
        .filter_map(|l| l.split_once("audit.log line ").map(|(_, at)| at))
        .map(|at| at.split([' ', ':']).next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(at_lines, expected_lines, "{text}");
}

#[test]
fn replay_reports_status_type_checking_of_the_policies_it_loads() {
    // A policy on pods whose expression reads a field Pod does not have: the apiserver accepts
    // it (object is dynamic on create) and its status controller writes a typeChecking warning.
    let dir = scratch("typecheck");
    let policy = write(
        &dir,
        "policy.yaml",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: typo}\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], resources: [pods], operations: [CREATE]}]\n  validations: [{expression: \"object.spec.containerz.size() < 10\"}]\n",
    );
    let capture = write(&dir, "pod.jsonl", &format!("{}\n", pod_review("default")));
    let (policy, capture) = (policy.to_str().unwrap(), capture.to_str().unwrap());
    let (code, stderr, report) =
        replay_with_report(&dir, &["--webhooks", policy, "--input", capture]);
    assert_eq!(code, Some(0), "{stderr}");
    let [warning] = report["problems"].as_array().unwrap().as_slice() else {
        panic!("one problem: {:#}", report["problems"]);
    };
    assert_eq!(warning["kind"], "warning");
    assert_eq!(
        warning["field"],
        "status.typeChecking.expressionWarnings[0]"
    );
    assert_eq!(
        warning["message"],
        "ValidatingAdmissionPolicy \"typo\": spec.validations[0].expression: /v1, Kind=Pod: ERROR: <input>:1:12: undefined field 'containerz'\n | object.spec.containerz.size() < 10\n | ...........^"
    );
}

/// What the registry strategies do between mutating and validating admission
/// (`tests/fixtures/strategies-v1.33`): fields that a feature gate off by default in 1.33 drops
/// from a Pod, a Deployment's and a DaemonSet's pod template, a StatefulSet and a
/// PersistentVolumeClaim, a DaemonSet's template generation annotation on create and on a
/// template change, a Namespace's `kubernetes` finalizer, and the `managedFields` the field manager gave two denied updates of a
/// ConfigMap (their events answer a Status); every review is sent as the apiserver sent it.
#[test]
fn strategies_before_validation_are_sent_as_the_apiserver_sent_them() {
    replayed_audit_log_sends_what_the_apiserver_sent("strategies-v1.33", &[]);
}

/// More of what the registry strategies do between mutating and validating admission
/// (`tests/fixtures/strategies-more-v1.33`): the creates and updates of a Deployment, a
/// ReplicaSet, a StatefulSet, a DaemonSet, two Jobs, a CronJob, an Ingress, two Services, four
/// PersistentVolumeClaims and a Pod, each with a status and a spec change, and updates of the
/// `status` subresource: the generation, the status reset and kept, a Deployment's labels
/// kept by its status update, a Job's generated selector, a Pod's scheduling-gated condition,
/// AppArmor fields and annotations and pod-affinity `matchLabelKeys`, a PersistentVolumeClaim's
/// data sources, a Service's node port dropped with its type and the IP families its
/// allocator sets; every review is sent as the apiserver sent it.
#[test]
fn more_strategies_before_validation_are_sent_as_the_apiserver_sent_them() {
    let fixture = "strategies-more-v1.33";
    let replayed = replay_fixture_audit_log_answering(fixture, &[], allow_every_review(), 18453);
    let report = compare_with_recorded_reviews(fixture, replayed);
    assert_eq!(report["problems"], json!([]), "{}", report["problems"]);
}

/// Replays `input` as `release` against `webhooks`, whose URLs name `port`, served by `server`;
/// the replay must succeed.
fn replay_against(server: &WebhookServer, release: &str, webhooks: &Path, input: &str, port: u16) {
    let out = hookscope(&[
        "replay",
        "--kube-version",
        release,
        "--webhooks",
        webhooks.to_str().unwrap(),
        "--input",
        input,
        "--resolve",
        &format!("127.0.0.1:{port}=127.0.0.1:{}", server.port()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A DaemonSet created from a plain manifest: the mutating webhook sees the template generation
/// annotation the conversion from the internal type writes (`"0"`, the strategy has not run
/// yet), the validating webhook the `"1"` the strategy sets, as the apiserver sent them in the
/// recorded session.
#[test]
fn a_daemonset_manifest_reaches_the_webhooks_with_its_template_generation() {
    let fixture = "strategies-more-v1.33";
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, allow_every_review());
    let dir = scratch("daemonset-manifest");
    let webhooks = fixture_configurations(&pki, &dir, fixture, &["inputs/webhooks.yaml"]).remove(0);
    let input = format!("{FIXTURES}/{fixture}/inputs/workloads.yaml");
    replay_against(&server, "1.33", &webhooks, &input, 18453);
    let sent = |path: &str| -> Value {
        server
            .requests()
            .iter()
            .map(|r| {
                (
                    r.path_only().to_string(),
                    serde_json::from_slice::<Value>(&r.body).unwrap(),
                )
            })
            .find(|(p, r)| p == path && r["request"]["kind"]["kind"] == "DaemonSet")
            .map(|(_, r)| r["request"]["object"]["metadata"].clone())
            .unwrap_or_else(|| panic!("no DaemonSet review at {path}"))
    };
    for (path, file) in [
        ("/record-m", "0007-record-m-req.json"),
        ("/record", "0008-record-req.json"),
    ] {
        let recorded: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{FIXTURES}/{fixture}/received/{file}")).unwrap(),
        )
        .unwrap();
        let recorded = &recorded["request"]["object"]["metadata"];
        let meta = sent(path);
        for field in ["annotations", "generation", "labels"] {
            assert_eq!(meta.get(field), recorded.get(field), "{path} {field}");
        }
    }
}

/// The same session replayed as 1.32 and 1.28: the validating webhook's Pod lacks what the
/// release's default feature gates drop (1.32: `hostUsers`, `seLinuxChangePolicy`,
/// `resizePolicy`; 1.28 also a sidecar's `restartPolicy`), which the mutating webhook still saw;
/// fields of gates on in that release stay.
#[test]
fn each_release_drops_what_its_default_feature_gates_turn_off() {
    let pki = TestPki::new();
    let fixture = "strategies-v1.33";
    for (release, dropped, kept) in [
        (
            "1.32",
            &["hostUsers", "seLinuxChangePolicy", "resizePolicy"][..],
            &["restartPolicy"][..],
        ),
        (
            "1.28",
            &["hostUsers", "resizePolicy", "restartPolicy"][..],
            &[][..],
        ),
    ] {
        let server = WebhookServer::start(&pki, allow_every_review());
        let dir = scratch(&format!("strategies-{release}"));
        let webhooks =
            fixture_configurations(&pki, &dir, fixture, &["inputs/webhooks.yaml"]).remove(0);
        let input = format!("{FIXTURES}/{fixture}/audit.log");
        replay_against(&server, release, &webhooks, &input, 18443);
        let reviews: Vec<(String, Value)> = server
            .requests()
            .iter()
            .map(|r| {
                (
                    r.path_only().to_string(),
                    serde_json::from_slice::<Value>(&r.body).unwrap(),
                )
            })
            .filter(|(_, r)| {
                r["request"]["operation"] == "CREATE" && r["request"]["name"] == "gated"
            })
            .collect();
        let spec = |path: &str| {
            reviews
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, r)| r["request"]["object"]["spec"].clone())
                .unwrap_or_else(|| panic!("{release}: no pod create at {path}"))
        };
        let (mutating, validating) = (spec("/record-m"), spec("/record"));
        let has = |spec: &Value, field: &str| match field {
            "hostUsers" => spec.get("hostUsers").is_some(),
            "seLinuxChangePolicy" => spec["securityContext"].get("seLinuxChangePolicy").is_some(),
            "resizePolicy" => spec["initContainers"][0].get("resizePolicy").is_some(),
            _ => spec["initContainers"][0].get("restartPolicy").is_some(),
        };
        for field in dropped {
            assert!(has(&mutating, field), "{release}: mutating lacks {field}");
            assert!(
                !has(&validating, field),
                "{release}: validating has {field}"
            );
        }
        for field in kept {
            assert!(
                has(&validating, field),
                "{release}: validating lacks {field}"
            );
        }
    }
}
