//! Offline replay: `cargo bench --bench replay`.
//!
//! `offline/three_webhook_chain`: captured ConfigMap creates replayed from recorded replies
//! through a chain of two mutating webhooks (each adds a label) and one validating webhook, on
//! one thread, results consumed in input order as `hookscope replay --replies` does. The
//! recording is made once, before measuring, by recording scripted replies.
//!
//! `reader_admission_review_lines`: the reader alone, as on `hookscope replay`'s reader thread:
//! 30,000 AdmissionReview lines (ConfigMap creates with userInfo and options, the shape
//! `benches/wrk-side-by-side.sh` generates) read from memory by [`Reader::read`] into a sink
//! that only counts requests.

use std::sync::Arc;

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use hookscope::config;
use hookscope::engine::{Attributes, Engine, EngineOptions};
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::replay::record::{RecordedReplies, Recorder};
use hookscope::replay::run::{Batching, ReplayEvent, ReplaySettings, Replayer};
use hookscope::replay::{CapturedRequest, IndexUnit, InputItem, NamespaceState, SourceRef};
use hookscope::script::{ScriptedReplier, ScriptedReply};
use serde_json::json;

#[path = "../src/allocator.rs"]
mod allocator;

// The allocator of the `hookscope` binary, so the figures are the command's.
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() {
    divan::main();
}

const REQUESTS: usize = 2_000;

const CONFIGURATIONS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: labels}
webhooks:
- name: team.labels.example.com
  clientConfig: {url: "https://127.0.0.1:8443/team"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: owner.labels.example.com
  clientConfig: {url: "https://127.0.0.1:8443/owner"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: policy}
webhooks:
- name: policy.example.com
  clientConfig: {url: "https://127.0.0.1:8443/policy"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

fn engine() -> Arc<Engine> {
    let configs: Vec<_> = config::parse_documents(CONFIGURATIONS, "bench.yaml")
        .into_iter()
        .map(|r| {
            let mut l = r.expect("configuration");
            l.apply_defaults();
            l.configuration
        })
        .collect();
    Arc::new(Engine::new(&configs, EngineOptions::default()))
}

fn requests() -> Vec<InputItem> {
    (0..REQUESTS)
        .map(|i| {
            let ns = format!("team-{}", i % 10);
            let name = format!("settings-{i}");
            let attrs: Attributes = serde_json::from_value(json!({
                "operation": "CREATE",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "namespace": ns, "name": name,
                "object": {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns, "labels": {"app": "shop"}},
                    "data": {"mode": "production", "replicas": (i % 7).to_string()},
                },
                "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            }))
            .expect("attributes");
            InputItem::Request(Box::new(CapturedRequest {
                source: SourceRef {
                    file: "bench".into(),
                    index: i + 1,
                    unit: IndexUnit::Line,
                    audit_id: None,
                    line: None,
                },
                uid: format!("bench-{i}"),
                attrs,
                namespace: NamespaceState::Known(Default::default()),
                audit: None,
                notes: Vec::new(),
                params: None,
            }))
        })
        .collect()
}

fn label_patch(key: &str) -> ScriptedReply {
    ScriptedReply::patch(
        json!([{"op": "add", "path": format!("/metadata/labels/{key}"), "value": "yes"}]),
    )
}

/// Records one run of the scripted chain into a fresh directory.
fn record(replayer: &Replayer, items: &[InputItem]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hookscope-bench-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = ScriptedReplier::new([
        ("team.labels.example.com".to_string(), label_patch("team")),
        ("owner.labels.example.com".to_string(), label_patch("owner")),
        ("policy.example.com".to_string(), ScriptedReply::allow()),
    ]);
    let recorder = Recorder::new(script, &dir).expect("recording directory");
    futures::executor::block_on(replayer.run(
        futures::stream::iter(items.to_vec()),
        recorder.clone(),
        Batching::EACH,
        |_| {},
    ));
    recorder.finish().expect("recording written");
    dir
}

#[divan::bench(sample_count = 10)]
fn offline_three_webhook_chain(bencher: Bencher) {
    let replayer = Replayer::new(engine(), ReplaySettings::default());
    let items = requests();
    let dir = record(&replayer, &items);
    let replies = RecordedReplies::load(&dir).expect("recording loads");
    bencher
        .counter(ItemsCount::new(REQUESTS))
        .with_inputs(|| items.clone())
        .bench_local_values(|items| {
            let mut allowed = 0usize;
            futures::executor::block_on(replayer.run(
                futures::stream::iter(items),
                replies.clone(),
                Batching::EACH,
                |batch| {
                    for e in batch {
                        if let ReplayEvent::Replayed(r) = e {
                            allowed += usize::from(r.outcome.allowed);
                        }
                    }
                },
            ));
            assert_eq!(
                allowed, REQUESTS,
                "every request is answered from the recording"
            );
            black_box(allowed)
        });
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same chain answered by the script itself: the cost of the engine and runner alone, to
/// set beside the recorded-replies figure.
#[divan::bench(sample_count = 10)]
fn scripted_three_webhook_chain(bencher: Bencher) {
    let replayer = Replayer::new(engine(), ReplaySettings::default());
    let items = requests();
    let script = ScriptedReplier::new([
        ("team.labels.example.com".to_string(), label_patch("team")),
        ("owner.labels.example.com".to_string(), label_patch("owner")),
        ("policy.example.com".to_string(), ScriptedReply::allow()),
    ]);
    bencher
        .counter(ItemsCount::new(REQUESTS))
        .with_inputs(|| items.clone())
        .bench_local_values(|items| {
            let mut allowed = 0usize;
            futures::executor::block_on(replayer.run(
                futures::stream::iter(items),
                script.clone(),
                Batching::EACH,
                |batch| {
                    for e in batch {
                        if let ReplayEvent::Replayed(r) = e {
                            allowed += usize::from(r.outcome.allowed);
                        }
                    }
                },
            ));
            black_box(allowed)
        });
}

const LINES: usize = 30_000;

/// `LINES` AdmissionReview lines of `benches/wrk-side-by-side.sh`'s shape.
fn review_lines() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 1..=LINES {
        let line = format!(
            concat!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"#,
                r#""uid":"00000000-0000-4000-8000-{i:012}","#,
                r#""kind":{{"group":"","version":"v1","kind":"ConfigMap"}},"#,
                r#""resource":{{"group":"","version":"v1","resource":"configmaps"}},"#,
                r#""requestKind":{{"group":"","version":"v1","kind":"ConfigMap"}},"#,
                r#""requestResource":{{"group":"","version":"v1","resource":"configmaps"}},"#,
                r#""name":"cm-{i}","namespace":"bench","operation":"CREATE","#,
                r#""userInfo":{{"username":"alice","uid":"1c3a5b2e","#,
                r#""groups":["developers","system:authenticated"]}},"#,
                r#""object":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i}","#,
                r#""namespace":"bench","labels":{{"app":"web","tier":"frontend"}},"#,
                r#""annotations":{{"example.com/owner":"team-web"}}}},"#,
                r#""data":{{"config.yaml":"listen: :8080\nlogLevel: info\nmetrics: :9090\n"}}}},"#,
                r#""oldObject":null,"dryRun":false,"#,
                r#""options":{{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}}}}"#,
                "\n"
            ),
            i = i
        );
        out.extend_from_slice(line.as_bytes());
    }
    out
}

#[divan::bench(sample_count = 10)]
fn reader_admission_review_lines(bencher: Bencher) {
    let input = review_lines();
    bencher.counter(ItemsCount::new(LINES)).bench_local(|| {
        let mut reader = Reader::new(ClusterState::new());
        let mut requests = 0usize;
        let mut sink =
            |item: InputItem| requests += usize::from(matches!(item, InputItem::Request(_)));
        reader
            .read("bench.jsonl", &mut &input[..], &mut sink)
            .expect("readable");
        assert_eq!(requests, LINES, "every line is a request");
        black_box(requests)
    });
}
