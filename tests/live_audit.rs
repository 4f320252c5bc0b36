//! Audit events from a live cluster: following a log across rotations, the audit webhook backend
//! over real TLS, ingestion against the whole-file replay reader, and captures.

#[path = "common/scratch.rs"]
mod scratch;

use scratch::Scratch;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use hookscope::live::audit::{
    AnnotationKind, AuditFeed, AuditWebhookError, AuditWebhookOptions, AuditWebhookServer,
    CaptureOptions, CaptureWriter, FollowOptions, Ingester, Notice, Origin, RawEvent, Rotation,
    WEBHOOK_SOURCE, follow,
};
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::replay::{IndexUnit, InputItem};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tokio::sync::mpsc;

const ORACLE_LOG: &str = "tests/fixtures/oracle-v1.32/audit.log";
/// Long enough never to fire on a working run; only there to turn a hang into a failure.
const TIMEOUT: Duration = Duration::from_secs(120);

fn temp_dir(name: &str) -> Scratch {
    Scratch::new(&format!(
        "hookscope-live-audit-{name}-{}",
        std::process::id()
    ))
}

fn fast(from_start: bool) -> FollowOptions {
    FollowOptions {
        from_start,
        poll_interval: Duration::from_millis(5),
        ..FollowOptions::default()
    }
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

async fn next(rx: &mut mpsc::Receiver<AuditFeed>) -> AuditFeed {
    tokio::time::timeout(TIMEOUT, rx.recv())
        .await
        .expect("timed out waiting for the feed")
        .expect("feed closed")
}

/// The next event, skipping notices.
async fn next_event(rx: &mut mpsc::Receiver<AuditFeed>) -> RawEvent {
    loop {
        if let AuditFeed::Event(e) = next(rx).await {
            return e;
        }
    }
}

/// Waits for a notice matching `f`, failing on an event in between.
async fn expect_notice(rx: &mut mpsc::Receiver<AuditFeed>, f: impl Fn(&Notice) -> bool) {
    loop {
        match next(rx).await {
            AuditFeed::Notice(n) if f(&n) => return,
            AuditFeed::Notice(_) => {}
            AuditFeed::Event(e) => panic!("unexpected event {:?}", e.text),
        }
    }
}

fn text(e: &RawEvent) -> &str {
    std::str::from_utf8(&e.text).unwrap()
}

#[tokio::test]
async fn follows_from_the_start_and_waits_for_partial_lines() {
    let dir = temp_dir("partial");
    let log = dir.join("audit.log");
    append(&log, "{\"n\":1}\n\n{\"n\":2}\n{\"n\":");
    let (tx, mut rx) = mpsc::channel(16);
    let task = tokio::spawn(follow(log.clone(), fast(true), tx));
    let e1 = next_event(&mut rx).await;
    assert_eq!((text(&e1), e1.origin.index), ("{\"n\":1}", 1));
    let e2 = next_event(&mut rx).await;
    // The blank line is counted but not sent: indices are lines of the file.
    assert_eq!((text(&e2), e2.origin.index), ("{\"n\":2}", 3));
    assert_eq!(e2.origin.unit, IndexUnit::Line);
    assert_eq!(e2.origin.source, log.display().to_string());
    append(&log, "3}");
    append(&log, "\n");
    let e3 = next_event(&mut rx).await;
    assert_eq!((text(&e3), e3.origin.index), ("{\"n\":3}", 4));
    task.abort();
}

#[tokio::test]
async fn follows_from_the_end_by_default() {
    let dir = temp_dir("end");
    let log = dir.join("audit.log");
    append(&log, "{\"old\":1}\n{\"old\":2}\n{\"half");
    let (tx, mut rx) = mpsc::channel(16);
    let task = tokio::spawn(follow(log.clone(), fast(false), tx));
    expect_notice(
        &mut rx,
        |n| matches!(n, Notice::Following { offset, .. } if *offset > 0),
    )
    .await;
    // The rest of the line that was being written when following started is not an event.
    append(&log, "-written\"}\n{\"new\":1}\n");
    let e = next_event(&mut rx).await;
    assert_eq!(text(&e), "{\"new\":1}");
    task.abort();
}

#[tokio::test]
async fn waits_for_a_file_that_appears_later() {
    let dir = temp_dir("later");
    let log = dir.join("not-yet").join("audit.log");
    let (tx, mut rx) = mpsc::channel(16);
    let task = tokio::spawn(follow(log.clone(), fast(false), tx));
    expect_notice(&mut rx, |n| matches!(n, Notice::WaitingForFile { .. })).await;
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    append(&log, "{\"first\":1}\n");
    // Everything in a file that appeared after following started is new, even from the end.
    let e = next_event(&mut rx).await;
    assert_eq!((text(&e), e.origin.index), ("{\"first\":1}", 1));
    task.abort();
}

#[tokio::test]
async fn follows_a_rename_rotation_reading_the_old_file_to_its_end() {
    let dir = temp_dir("rename");
    let log = dir.join("audit.log");
    append(&log, "{\"a\":1}\n");
    let (tx, mut rx) = mpsc::channel(16);
    let task = tokio::spawn(follow(log.clone(), fast(true), tx));
    assert_eq!(text(&next_event(&mut rx).await), "{\"a\":1}");
    // The writer still holds the old file after the rename, as a rotating logger does until it
    // opens the new one.
    let mut old = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::fs::rename(&log, dir.join("audit-1.log")).unwrap();
    old.write_all(b"{\"a\":2}\n").unwrap();
    drop(old);
    append(&log, "{\"b\":1}\n");
    let mut seen = Vec::new();
    let mut rotated_at = None;
    while seen.len() < 2 {
        match next(&mut rx).await {
            AuditFeed::Event(e) => seen.push((text(&e).to_string(), e.origin.index)),
            AuditFeed::Notice(Notice::Rotated {
                rotation: Rotation::Renamed,
                ..
            }) => rotated_at = Some(seen.len()),
            AuditFeed::Notice(_) => {}
        }
    }
    assert_eq!(
        seen,
        [("{\"a\":2}".to_string(), 2), ("{\"b\":1}".to_string(), 1)]
    );
    assert_eq!(
        rotated_at,
        Some(1),
        "rotation noticed between the two files"
    );
    task.abort();
}

#[tokio::test]
async fn follows_a_copytruncate_rotation_from_offset_zero() {
    let dir = temp_dir("truncate");
    let log = dir.join("audit.log");
    append(
        &log,
        "{\"long-line\":\"xxxxxxxxxxxxxxxxxxxxxxxx\"}\n{\"n\":2}\n",
    );
    let (tx, mut rx) = mpsc::channel(16);
    let task = tokio::spawn(follow(log.clone(), fast(true), tx));
    next_event(&mut rx).await;
    next_event(&mut rx).await;
    std::fs::copy(&log, dir.join("audit.log.1")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    expect_notice(&mut rx, |n| {
        matches!(
            n,
            Notice::Rotated {
                rotation: Rotation::Truncated,
                ..
            }
        )
    })
    .await;
    append(&log, "{\"after\":1}\n");
    let e = next_event(&mut rx).await;
    assert_eq!((text(&e), e.origin.index), ("{\"after\":1}", 1));
    task.abort();
}

#[tokio::test]
async fn a_directory_is_reported_and_retried() {
    let dir = temp_dir("dir");
    let log = dir.join("audit.log");
    std::fs::create_dir(&log).unwrap();
    let (tx, mut rx) = mpsc::channel(16);
    let task = tokio::spawn(follow(log.clone(), fast(true), tx));
    expect_notice(
        &mut rx,
        |n| matches!(n, Notice::Error { message, .. } if message.contains("directory")),
    )
    .await;
    std::fs::remove_dir(&log).unwrap();
    append(&log, "{\"ok\":1}\n");
    assert_eq!(text(&next_event(&mut rx).await), "{\"ok\":1}");
    task.abort();
}

#[tokio::test]
async fn a_slow_consumer_gets_every_line_in_order() {
    let dir = temp_dir("backpressure");
    let log = dir.join("audit.log");
    let lines: String = (1..=500).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    append(&log, &lines);
    let (tx, mut rx) = mpsc::channel(2);
    let task = tokio::spawn(follow(log.clone(), fast(true), tx));
    for i in 1..=500 {
        if i % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let e = next_event(&mut rx).await;
        assert_eq!(text(&e), format!("{{\"n\":{i}}}"));
    }
    task.abort();
}

/// The oracle log's lines, with their 1-based line numbers.
fn oracle_lines() -> Vec<(usize, String)> {
    std::fs::read_to_string(ORACLE_LOG)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect()
}

fn whole_file_items(path: &str) -> Vec<InputItem> {
    let mut reader = Reader::new(ClusterState::default());
    let mut items = Vec::new();
    let (readable, problems) = reader.read_paths(&[path.to_string()], None, &mut |i| items.push(i));
    assert_eq!((readable, problems), (1, vec![]));
    items
}

fn raw(source: &str, index: usize, unit: IndexUnit, text: &str) -> RawEvent {
    RawEvent {
        origin: Origin {
            source: source.to_string(),
            index,
            unit,
        },
        text: Bytes::from(text.to_string()),
    }
}

/// Admission annotation keys of an event, read independently of the ingester.
fn admission_keys(line: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(line).unwrap();
    let mut keys: Vec<String> = v
        .get("annotations")
        .and_then(Value::as_object)
        .map(|m| {
            m.keys()
                .filter(|k| k.contains("webhook.admission.k8s.io/"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    keys.sort();
    keys
}

#[test]
fn the_oracle_log_event_by_event_equals_the_whole_file_read() {
    let expected = whole_file_items(ORACLE_LOG);
    let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
    let mut items = Vec::new();
    let mut events = 0;
    let mut mutations = 0;
    let mut patches = 0;
    for (line_no, line) in oracle_lines() {
        let got = ingester.ingest(&raw(ORACLE_LOG, line_no, IndexUnit::Line, &line));
        let event = got.event.expect("every oracle event reads");
        events += 1;
        assert_eq!(event.source.index, line_no);
        let mut keys: Vec<String> = event.admission.iter().map(|a| a.key.clone()).collect();
        keys.sort();
        assert_eq!(keys, admission_keys(&line), "line {line_no}");
        for a in &event.admission {
            match &a.kind {
                AnnotationKind::Mutation {
                    configuration,
                    webhook,
                    ..
                } => {
                    mutations += 1;
                    assert_eq!(configuration, "oracle-mutating");
                    assert!(webhook.ends_with(".oracle.test"));
                }
                AnnotationKind::Patch {
                    patch, patch_type, ..
                } => {
                    patches += 1;
                    assert_eq!(patch_type, "JSONPatch");
                    assert!(patch.is_array());
                }
                AnnotationKind::FailedOpen { .. } => panic!("no webhook failed open"),
            }
        }
        if got.pending {
            assert!(!event.is_final());
        }
        items.extend(got.items);
    }
    items.extend(ingester.finish());
    assert_eq!(events, 928);
    assert!(mutations > 0 && patches > 0);
    assert_eq!(items.len(), expected.len());
    assert_eq!(items, expected);
    assert!(
        items.iter().any(|i| matches!(i, InputItem::Request(_))),
        "the oracle has replayable requests"
    );
}

#[test]
fn round_one_annotations_are_parsed() {
    let lines = oracle_lines();
    let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
    let reinvoked = lines
        .iter()
        .filter_map(|(n, l)| {
            ingester
                .ingest(&raw("x", *n, IndexUnit::Line, l))
                .event
                .ok()
        })
        .find(|e| e.admission.iter().any(|a| a.round == 1))
        .expect("the oracle has a reinvocation");
    let order: Vec<(u32, u32)> = reinvoked
        .admission
        .iter()
        .map(|a| (a.round, a.index))
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    assert!(order.contains(&(0, 0)) && order.contains(&(0, 1)) && order.contains(&(1, 0)));
}

#[test]
fn malformed_events_are_reported_with_their_place_and_skipped() {
    let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
    let bad_json = ingester.ingest(&raw("live.log", 7, IndexUnit::Line, "{\"auditID\":"));
    let p = bad_json.event.unwrap_err();
    assert_eq!((p.source.file.as_str(), p.source.index), ("live.log", 7));
    assert!(p.message.contains("invalid JSON"), "{}", p.message);
    assert!(matches!(bad_json.items.as_slice(), [InputItem::Invalid(_)]));

    let bad_field = ingester.ingest(&raw(
        "live.log",
        8,
        IndexUnit::Line,
        r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"x","stage":"ResponseComplete","verb":"create","user":"nobody"}"#,
    ));
    let p = bad_field.event.unwrap_err();
    assert_eq!(p.field, "user");
    assert_eq!(p.source.audit_id.as_deref(), Some("x"));

    let bad_annotation = ingester.ingest(&raw(
        "live.log",
        9,
        IndexUnit::Line,
        r#"{"auditID":"y","stage":"ResponseComplete","verb":"get","annotations":{"mutation.webhook.admission.k8s.io/round_0_index_0":"{not json"}}"#,
    ));
    let e = bad_annotation.event.unwrap();
    assert!(e.admission.is_empty());
    assert_eq!(e.problems.len(), 1);
    assert!(e.problems[0].field.contains("round_0_index_0"));
    assert!(
        e.annotations
            .contains_key("mutation.webhook.admission.k8s.io/round_0_index_0")
    );
}

#[test]
fn an_early_stage_of_an_admission_request_is_pending() {
    let lines = oracle_lines();
    let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
    let mut pending_ids = Vec::new();
    for (n, l) in &lines {
        let got = ingester.ingest(&raw(ORACLE_LOG, *n, IndexUnit::Line, l));
        let e = got.event.unwrap();
        if got.pending {
            pending_ids.push(e.audit_id.clone());
        } else if e.is_final() && pending_ids.contains(&e.audit_id) {
            assert!(!ingester.reader().is_pending(&e.audit_id));
            return;
        }
    }
    panic!("no admission request was pending before its final stage");
}

#[tokio::test]
async fn the_follower_and_ingester_end_to_end_equal_the_whole_file_read() {
    let dir = temp_dir("oracle");
    let log = dir.join("audit.log");
    let content = std::fs::read_to_string(ORACLE_LOG).unwrap();
    let (head, tail) = content.split_at(content.len() / 2);
    std::fs::write(&log, head).unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    let task = tokio::spawn(follow(log.clone(), fast(true), tx));
    let writer = {
        let (log, tail) = (log.clone(), tail.to_string());
        tokio::spawn(async move {
            for chunk in tail.as_bytes().chunks(7919) {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
                f.write_all(chunk).unwrap();
            }
        })
    };
    let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
    let mut items = Vec::new();
    for _ in 0..928 {
        items.extend(ingester.ingest(&next_event(&mut rx).await).items);
    }
    items.extend(ingester.finish());
    writer.await.unwrap();
    task.abort();
    assert_eq!(items, whole_file_items(log.to_str().unwrap()));
}

// --- the audit webhook backend -------------------------------------------------------------

/// POSTs `body` over TLS to `url`, trusting `ca_pem`; returns the status and body.
async fn post(url: &str, ca_pem: &str, content_type: &str, body: Vec<u8>) -> (u16, String) {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let uri: http::Uri = url.parse().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let host = uri.host().unwrap().trim_matches(['[', ']']).to_string();
    let tcp = tokio::net::TcpStream::connect((host.as_str(), uri.port_u16().unwrap()))
        .await
        .unwrap();
    let name = rustls_pki_types::ServerName::try_from(host).unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::post(uri.path())
        .header("content-type", content_type)
        .header("host", uri.authority().unwrap().as_str())
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// An `EventList` as kube-apiserver's webhook backend posts it: items without type meta.
fn event_list(lines: &[(usize, String)]) -> Vec<u8> {
    let items: Vec<Value> = lines
        .iter()
        .map(|(_, l)| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let m = v.as_object_mut().unwrap();
            m.remove("kind");
            m.remove("apiVersion");
            v
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "kind": "EventList",
        "apiVersion": "audit.k8s.io/v1",
        "metadata": {},
        "items": items,
    }))
    .unwrap()
}

fn ca_from_kubeconfig(kubeconfig: &str) -> (String, String) {
    let v: Value = serde_saphyr::from_str(kubeconfig).unwrap();
    let cluster = &v["clusters"][0]["cluster"];
    let server = cluster["server"].as_str().unwrap().to_string();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(cluster["certificate-authority-data"].as_str().unwrap())
        .unwrap();
    assert_eq!(v["current-context"], "hookscope");
    assert_eq!(v["contexts"][0]["context"]["cluster"], "hookscope");
    assert_eq!(v["contexts"][0]["name"], "hookscope");
    let user = v["contexts"][0]["context"]["user"].as_str().unwrap();
    assert_eq!(v["users"][0]["name"], user);
    (server, String::from_utf8(ca).unwrap())
}

#[tokio::test]
async fn the_webhook_backend_receives_event_lists_over_tls() {
    let (tx, mut rx) = mpsc::channel(1024);
    let server = AuditWebhookServer::start(AuditWebhookOptions::default(), tx)
        .await
        .unwrap();
    let (server_url, ca) = ca_from_kubeconfig(&server.kubeconfig());
    assert_eq!(server_url, server.url());
    assert!(server_url.starts_with("https://127.0.0.1:") && server_url.ends_with("/audit"));
    assert_eq!(ca, server.ca_pem());

    let lines = oracle_lines();
    let mut sent = 0;
    for batch in lines.chunks(400) {
        let (status, _) = post(&server_url, &ca, "application/json", event_list(batch)).await;
        assert_eq!(status, 200);
        sent += batch.len();
    }
    assert_eq!(server.events_received(), sent);

    // What arrives ingests to the same requests as the log, and each item is an event.
    let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
    let mut via_webhook = Vec::new();
    for i in 1..=sent {
        let e = next_event(&mut rx).await;
        assert_eq!(
            (e.origin.source.as_str(), e.origin.index),
            (WEBHOOK_SOURCE, i)
        );
        let got = ingester.ingest(&e);
        assert!(got.event.is_ok());
        via_webhook.extend(got.items);
    }
    via_webhook.extend(ingester.finish());
    let from_log: Vec<_> = whole_file_items(ORACLE_LOG);
    assert_eq!(via_webhook.len(), from_log.len());
    let uids = |items: &[InputItem]| -> Vec<String> {
        items
            .iter()
            .filter_map(|i| match i {
                InputItem::Request(r) => Some(r.uid.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(uids(&via_webhook), uids(&from_log));
    assert!(!uids(&from_log).is_empty());
}

#[tokio::test]
async fn the_webhook_backend_refuses_what_is_not_an_event_list() {
    let (tx, mut rx) = mpsc::channel(16);
    let server = AuditWebhookServer::start(AuditWebhookOptions::default(), tx)
        .await
        .unwrap();
    let (url, ca) = (server.url().to_string(), server.ca_pem().to_string());
    let (status, body) = post(&url, &ca, "application/json", b"{\"items\":".to_vec()).await;
    assert_eq!(status, 400);
    assert!(body.contains("not an audit.k8s.io/v1 EventList"), "{body}");
    let (status, body) = post(
        &url,
        &ca,
        "application/json",
        br#"{"kind":"PodList","items":[]}"#.to_vec(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("expected EventList"), "{body}");
    let (status, _) = post(&url, &ca, "application/yaml", b"kind: EventList".to_vec()).await;
    assert_eq!(status, 415);
    let wrong_path = url.replace("/audit", "/other");
    let (status, _) = post(&wrong_path, &ca, "application/json", b"{}".to_vec()).await;
    assert_eq!(status, 404);
    // Each refusal is also a notice; no event went through.
    for _ in 0..3 {
        assert!(matches!(
            next(&mut rx).await,
            AuditFeed::Notice(Notice::BatchRefused { .. })
        ));
    }
    assert_eq!(server.events_received(), 0);
    assert_eq!(server.requests_refused(), 3);
}

#[tokio::test]
async fn the_webhook_backend_refuses_a_non_loopback_address() {
    let (tx, _rx) = mpsc::channel(16);
    let options = AuditWebhookOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..AuditWebhookOptions::default()
    };
    let err = AuditWebhookServer::start(options, tx).await.unwrap_err();
    assert!(matches!(err, AuditWebhookError::NotLoopback(_)), "{err}");
    assert!(err.to_string().contains("not a loopback address"));
}

#[tokio::test]
async fn a_full_channel_holds_the_batch_until_there_is_room() {
    let (tx, mut rx) = mpsc::channel(2);
    let server = AuditWebhookServer::start(AuditWebhookOptions::default(), tx)
        .await
        .unwrap();
    let (url, ca) = (server.url().to_string(), server.ca_pem().to_string());
    let lines = oracle_lines();
    let body = event_list(&lines[..10]);
    let posting = tokio::spawn(async move { post(&url, &ca, "application/json", body).await });
    let mut got = Vec::new();
    for _ in 0..10 {
        got.push(next_event(&mut rx).await.origin.index);
    }
    assert_eq!(got, (1..=10).collect::<Vec<_>>());
    assert_eq!(posting.await.unwrap().0, 200);
}

#[tokio::test]
async fn the_webhook_backend_serves_the_users_certificate() {
    let dir = temp_dir("certfiles");
    let pki = hookscope::webhook_server::Pki::mint(&[]).unwrap();
    let (cert, key, ca) = (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"));
    std::fs::write(&cert, pki.server_cert_pem()).unwrap();
    std::fs::write(&key, pki.server_key_pem()).unwrap();
    std::fs::write(&ca, pki.ca_pem()).unwrap();
    let (tx, mut rx) = mpsc::channel(16);
    let options = AuditWebhookOptions {
        tls: hookscope::live::audit::WebhookTls::Files {
            cert,
            key: key.clone(),
            ca: Some(ca),
        },
        ..AuditWebhookOptions::default()
    };
    let server = AuditWebhookServer::start(options, tx).await.unwrap();
    let (url, ca_pem) = ca_from_kubeconfig(&server.kubeconfig());
    assert_eq!(ca_pem, pki.ca_pem());
    let (status, _) = post(
        &url,
        &ca_pem,
        "application/json",
        event_list(&oracle_lines()[..1]),
    )
    .await;
    assert_eq!(status, 200);
    next_event(&mut rx).await;

    // A key file without a key is an error naming the file.
    std::fs::write(&key, "not a key").unwrap();
    let (tx, _rx) = mpsc::channel(16);
    let options = AuditWebhookOptions {
        tls: hookscope::live::audit::WebhookTls::Files {
            cert: dir.join("tls.crt"),
            key: key.clone(),
            ca: None,
        },
        ..AuditWebhookOptions::default()
    };
    let err = AuditWebhookServer::start(options, tx).await.unwrap_err();
    assert!(err.to_string().contains("tls.key"), "{err}");
}

// --- captures --------------------------------------------------------------------------------

/// A secret create built from the oracle's first configmap create: same shape, other resource.
fn secret_create() -> String {
    let line = oracle_lines()
        .into_iter()
        .map(|(_, l)| l)
        .find(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["verb"] == "create"
                && v["objectRef"]["resource"] == "configmaps"
                && v["stage"] == "ResponseComplete"
                && v["responseStatus"]["code"] == 201
        })
        .unwrap();
    let mut v: Value = serde_json::from_str(&line).unwrap();
    v["auditID"] = "secret-create-1".into();
    v["objectRef"]["resource"] = "secrets".into();
    v["requestURI"] = v["requestURI"]
        .as_str()
        .unwrap()
        .replace("configmaps", "secrets")
        .into();
    for o in ["requestObject", "responseObject"] {
        v[o]["kind"] = "Secret".into();
        v[o]["data"] = serde_json::json!({"password": "aHVudGVyMg=="});
    }
    serde_json::to_string(&v).unwrap()
}

fn capture(path: &Path, events: &[RawEvent], show_secrets: bool) {
    let options = CaptureOptions {
        show_secrets,
        ..CaptureOptions::default()
    };
    let mut w = CaptureWriter::create(path, options).unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    assert_eq!(w.finish().unwrap(), events.len() as u64);
}

fn with_file(items: Vec<InputItem>, file: &str) -> Vec<InputItem> {
    items
        .into_iter()
        .map(|mut i| {
            match &mut i {
                InputItem::Request(r) => r.source.file = file.to_string(),
                InputItem::NotReplayable(p) | InputItem::Invalid(p) => {
                    p.source.file = file.to_string()
                }
            }
            i
        })
        .collect()
}

#[test]
fn a_capture_reads_back_to_the_same_requests_with_secrets_redacted() {
    let dir = temp_dir("capture");
    let mut lines = oracle_lines();
    let n = lines.len();
    lines.push((n + 1, secret_create()));
    let source = dir.join("live.log");
    let all: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    std::fs::write(&source, all).unwrap();
    let events: Vec<RawEvent> = lines
        .iter()
        .enumerate()
        .map(|(i, (_, l))| raw("live", i + 1, IndexUnit::Line, l))
        .collect();
    let expected = whole_file_items(source.to_str().unwrap());

    let shown = dir.join("shown.log");
    capture(&shown, &events, true);
    let got = whole_file_items(shown.to_str().unwrap());
    assert_eq!(with_file(got, "x"), with_file(expected.clone(), "x"));

    let redacted = dir.join("redacted.log");
    capture(&redacted, &events, false);
    let text = std::fs::read_to_string(&redacted).unwrap();
    assert!(
        !text.contains("aHVudGVyMg=="),
        "the secret value was written"
    );
    assert_eq!(text.lines().count(), events.len());
    let got = with_file(whole_file_items(redacted.to_str().unwrap()), "x");
    let expected = with_file(expected, "x");
    assert_eq!(got.len(), expected.len());
    let mut secrets = 0;
    for (g, e) in got.iter().zip(&expected) {
        match (g, e) {
            (InputItem::Request(g), InputItem::Request(e)) if e.uid == "secret-create-1" => {
                secrets += 1;
                let data = &g.attrs.object.as_ref().unwrap()["data"]["password"];
                assert_ne!(data, "aHVudGVyMg==");
                assert_eq!(g.attrs.name, e.attrs.name);
            }
            _ => assert_eq!(g, e),
        }
    }
    assert_eq!(secrets, 1);
}

#[tokio::test]
async fn a_capture_of_the_webhook_stream_is_an_audit_log() {
    let dir = temp_dir("webhook-capture");
    let (tx, mut rx) = mpsc::channel(1024);
    let server = AuditWebhookServer::start(AuditWebhookOptions::default(), tx)
        .await
        .unwrap();
    let lines = oracle_lines();
    let (status, _) = post(
        server.url(),
        server.ca_pem(),
        "application/json",
        event_list(&lines),
    )
    .await;
    assert_eq!(status, 200);
    let path = dir.join("capture.log");
    let mut w = CaptureWriter::create(&path, CaptureOptions::default()).unwrap();
    for _ in 0..lines.len() {
        w.write(&next_event(&mut rx).await).unwrap();
    }
    w.finish().unwrap();
    let first = std::fs::read_to_string(&path).unwrap();
    assert!(first.starts_with(r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","#));
    assert_eq!(
        with_file(whole_file_items(path.to_str().unwrap()), "x"),
        with_file(whole_file_items(ORACLE_LOG), "x")
    );
}
