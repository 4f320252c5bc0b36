//! The apiserver's own warnings on Pods and pod templates against a real kube-apiserver v1.33.3
//! session (`fixtures/pod-warnings-v1.33`, see its README): the audit log replayed through the
//! session's policy and webhooks (served here on 127.0.0.1 over HTTPS, answering as the recorded
//! server did) gives, request by request, the warnings kubectl printed, in the order it printed
//! them: the mutating webhook's, the registry strategy's (`GetWarningsForPod` /
//! `GetWarningsForPodTemplate`, on the mutated object), the ValidatingAdmissionPolicy's, the
//! validating webhook's.

mod common;

use std::path::PathBuf;

use common::{TestPki, TestResponse, WebhookServer, handler};
use serde_json::Value;

const SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/pod-warnings-v1.33"
);

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{SESSION}/{path}")).unwrap()
}

/// The recorded answers, by the webhook's path and the kind and name of the object reviewed.
fn recorded_answers() -> Vec<(String, String, Value)> {
    let mut answers = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(format!("{SESSION}/received"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    files.sort();
    for req in files
        .iter()
        .filter(|f| f.to_string_lossy().ends_with("-req.json"))
    {
        let resp = PathBuf::from(req.to_string_lossy().replace("-req.json", "-resp.json"));
        let review: Value = serde_json::from_slice(&std::fs::read(req).unwrap()).unwrap();
        let answer: Value = serde_json::from_slice(&std::fs::read(resp).unwrap()).unwrap();
        let name = req.file_name().unwrap().to_string_lossy().to_string();
        let path = format!("/{}", name.split('-').nth(1).unwrap());
        let object = &review["request"]["object"];
        let key = format!("{}/{}", object["kind"], object["metadata"]["name"]);
        answers.push((path, key, answer["response"].clone()));
    }
    answers
}

/// The session's webhooks answer as recorded: the mutating one with a warning and a patch adding
/// the deprecated `scheduler.alpha.kubernetes.io/critical-pod` annotation, the validating one
/// with a warning.
fn session_webhooks() -> common::Handler {
    let answers = recorded_answers();
    handler(move |req| {
        let review: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let object = &review["request"]["object"];
        let key = format!("{}/{}", object["kind"], object["metadata"]["name"]);
        let Some((_, _, answer)) = answers
            .iter()
            .find(|(p, k, _)| p == req.path_only() && *k == key)
        else {
            return TestResponse::not_found();
        };
        let mut answer = answer.clone();
        answer["uid"] = Value::String(req.review_uid().unwrap_or_default());
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": answer,
        });
        TestResponse::json(200, serde_json::to_vec(&body).unwrap())
    })
}

/// The session's `webhooks.yaml` pointing at `server`, written into a fresh directory.
fn session_webhooks_file(pki: &TestPki, server: &WebhookServer) -> PathBuf {
    let text = read("inputs/webhooks.yaml");
    common::rewritten_webhooks_file(
        pki,
        server,
        &text,
        "https://127.0.0.1:18454",
        "pod-warnings-oracle",
    )
}

/// The warnings kubectl printed for each created object (`kind/name` as kubectl names it on
/// success), in order.
fn printed_warnings() -> Vec<(String, Vec<String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(format!("{SESSION}/kubectl"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let warnings: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("Warning: "))
            .map(str::to_string)
            .collect();
        if warnings.is_empty() {
            continue;
        }
        let created = text
            .lines()
            .find_map(|l| l.strip_suffix(" created"))
            .expect("a create that printed warnings succeeded");
        // `deployment.apps/warn-deploy` → `warn-deploy`
        let name = created.rsplit('/').next().unwrap().to_string();
        out.push((name, warnings));
    }
    out
}

#[test]
fn replayed_creates_warn_as_kubectl_printed_in_the_same_order() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, session_webhooks());
    let webhooks = session_webhooks_file(&pki, &server);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["--kube-version", "1.33", "replay", "--format", "json"])
        .arg("--webhooks")
        .arg(format!("{SESSION}/inputs/policies.yaml"))
        .arg(&webhooks)
        .arg("--input")
        .arg(format!("{SESSION}/audit.log"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // The creates the apiserver made (the first Pod create was refused before the webhooks by the
    // ServiceAccount plugin, which is not modelled).
    let recorded = common::completed_audit_events(&read("audit.log"));
    let created = |r: &&Value| {
        let id = r["source"]["auditID"].as_str().unwrap_or_default();
        recorded
            .get(id)
            .is_some_and(|e| e["responseStatus"]["code"] == 201)
    };
    let printed = printed_warnings();
    assert_eq!(printed.len(), 2, "{printed:?}");
    for (name, warnings) in printed {
        let replayed: Vec<&Value> = report["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["operation"] == "CREATE" && r["name"] == name.as_str())
            .filter(created)
            .collect();
        assert_eq!(replayed.len(), 1, "{name}: {replayed:?}");
        let ours: Vec<String> = replayed[0]["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| w.as_str().unwrap().to_string())
            .collect();
        assert_eq!(ours, warnings, "{name}");
    }
}
