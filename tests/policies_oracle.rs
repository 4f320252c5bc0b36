//! ValidatingAdmissionPolicies against a real kube-apiserver v1.33.3 session
//! (`fixtures/policies-v1.33`, see its README): the field errors kubectl printed, and the audit log
//! replayed through the policies and the session's webhooks (served here on 127.0.0.1 over HTTPS,
//! answering as the recorded server did) to the codes, messages, audit annotations and policy
//! metrics the apiserver recorded.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{TestPki, WebhookServer, handler, v1_allow, v1_patch};
use serde_json::Value;

const SESSION: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/policies-v1.33");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{SESSION}/{path}")).unwrap()
}

/// The errors of `kubectl create -f invalid-policies.yaml`, per object name: each `Error from
/// server (Invalid)` line's field errors (upstream aggregates several as `[a, b]`).
fn kubectl_errors() -> BTreeMap<String, String> {
    let text = read("kubectl/06-invalid-policies.txt");
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Error from server (Invalid): ") {
            if let Some((name, errors)) = current.take() {
                out.insert(name, errors);
            }
            let name = rest.split('"').nth(3).unwrap_or_default().to_string();
            let errors = rest.split_once(" is invalid: ").unwrap().1.to_string();
            current = Some((name, errors));
        } else if line.starts_with(" |")
            && let Some((_, errors)) = &mut current
        {
            errors.push('\n');
            errors.push_str(line);
        }
    }
    if let Some((name, errors)) = current {
        out.insert(name, errors);
    }
    out
}

#[test]
fn invalid_policies_get_the_field_errors_kubectl_printed() {
    let expected = kubectl_errors();
    assert_eq!(expected.len(), 3, "{expected:?}");
    let got: BTreeMap<String, String> = common::policy_create_errors(
        &read("inputs/invalid-policies.yaml"),
        "invalid-policies.yaml",
    )
    .into_iter()
    .collect();
    assert_eq!(got, expected);
}

/// The session's webhooks: `/add-label` adds `webhook.policies.test/mutated: "true"` (the whole
/// `labels` map when there is none), `/record` allows.
fn session_webhooks() -> common::Handler {
    handler(|req| {
        let uid = req.review_uid().unwrap_or_default();
        match req.path_only() {
            "/add-label" => {
                let review: Value = serde_json::from_slice(&req.body).unwrap_or_default();
                let has_labels = review["request"]["object"]["metadata"]["labels"].is_object();
                let patch = if has_labels {
                    r#"[{"op": "add", "path": "/metadata/labels/webhook.policies.test~1mutated", "value": "true"}]"#
                } else {
                    r#"[{"op": "add", "path": "/metadata/labels", "value": {"webhook.policies.test/mutated": "true"}}]"#
                };
                v1_patch(&uid, patch)
            }
            _ => v1_allow(&uid),
        }
    })
}

/// `hookscope replay` of the session's policies and `webhooks` (its copy pointing at the server
/// started here), `--input` and what follows it in `rest`.
fn replay(webhooks: &std::path::Path, rest: &[std::ffi::OsString]) -> std::process::Output {
    replay_with(&["mutating-policies.yaml"], webhooks, rest)
}

/// `hookscope replay` with the session's validating policies and `policies` (in its inputs).
fn replay_with(
    policies: &[&str],
    webhooks: &std::path::Path,
    rest: &[std::ffi::OsString],
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["--kube-version", "1.33", "replay", "--format", "json"])
        .arg("--webhooks")
        .arg(format!("{SESSION}/inputs/validating-policies.yaml"))
        .args(policies.iter().map(|p| format!("{SESSION}/inputs/{p}")))
        .arg(webhooks)
        .arg("--input")
        .args(rest)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// The session's `webhooks.yaml` pointing at `server`, written into a fresh `dir`.
fn session_webhooks_file(pki: &TestPki, server: &WebhookServer, dir: &str) -> PathBuf {
    common::rewritten_webhooks_file(
        pki,
        server,
        &read("inputs/webhooks.yaml"),
        "https://127.0.0.1:18443",
        dir,
    )
}

/// What a webhook saw of one review: the path, the request's operation, namespace and name, and
/// the labels and annotations of its object.
fn seen(path: &str, review: &Value) -> String {
    let r = &review["request"];
    let meta = &r["object"]["metadata"];
    format!(
        "{path} {} {}/{} labels={} annotations={}",
        r["operation"].as_str().unwrap_or_default(),
        r["namespace"].as_str().unwrap_or_default(),
        r["name"].as_str().unwrap_or_default(),
        meta["labels"],
        meta["annotations"]
    )
}

/// The parameter ConfigMap, created before any configuration existed (`kubectl/02-params.txt`):
/// the replay holds every configuration in force from the start.
const CREATED_FIRST: &str = "replica-limits";

/// MutatingAdmissionPolicies with the webhooks: every review the webhooks received, in order,
/// carries the labels and annotations the policies and the other webhook gave the object, as the
/// apiserver sent them (`received/`); the objects stored are the objects replayed; a policy that
/// reinvokes the webhook (`add-owner`, IfNeeded) makes the apiserver call `add-label` twice.
#[test]
fn mutating_policies_and_webhooks_reinvoke_each_other_as_recorded() {
    let pki = TestPki::new();
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&received);
    let inner = session_webhooks();
    let server = WebhookServer::start(
        &pki,
        handler(move |req| {
            let review: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            log.lock().unwrap().push(seen(req.path_only(), &review));
            inner(req)
        }),
    );
    let webhooks = session_webhooks_file(&pki, &server, "policies-oracle-mutating");
    let out = replay(&webhooks, &[format!("{SESSION}/audit.log").into()]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));

    // What the recorded webhook server received, in order, the readiness probes aside.
    let mut files: Vec<_> = std::fs::read_dir(format!("{SESSION}/received"))
        .unwrap()
        .map(|f| f.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with("-req.json") && !n.contains("-probe"))
        .collect();
    files.sort();
    let recorded: Vec<String> = files
        .iter()
        .map(|f| {
            // `NNNN-PATH-req.json`.
            let path = format!("/{}", f[5..].trim_end_matches("-req.json"));
            let review: Value = serde_json::from_str(&read(&format!("received/{f}"))).unwrap();
            seen(&path, &review)
        })
        .collect();
    let ours: Vec<String> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|s| !s.contains("/probe") && !s.contains(&format!(" pol/{CREATED_FIRST} ")))
        .cloned()
        .collect();
    assert!(recorded.len() >= 15, "{recorded:#?}");
    assert_eq!(ours, recorded);

    // The objects the apiserver stored are the objects replayed.
    let stored: BTreeMap<String, Value> = read("audit.log")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["verb"] == "create")
        .filter(|e| e["responseObject"]["kind"] != "Status")
        .map(|e| (e["auditID"].as_str().unwrap_or_default().to_string(), e))
        .collect();
    let mut compared = 0;
    for r in report["requests"].as_array().unwrap() {
        let ns = r["namespace"].as_str().unwrap_or_default();
        let id = r["source"]["auditID"].as_str().unwrap_or_default();
        let (true, Some(event)) = (["pol", "other", "np"].contains(&ns), stored.get(id)) else {
            continue;
        };
        if r["dryRun"] == true || r["name"] == CREATED_FIRST {
            continue;
        }
        compared += 1;
        let want = &event["responseObject"]["metadata"];
        let got = &r["object"]["metadata"];
        for field in ["labels", "annotations"] {
            assert_eq!(got[field], want[field], "{ns}/{} {field}", r["name"]);
        }
    }
    assert!(compared >= 5, "{compared} objects compared");
}

#[test]
fn the_session_replays_to_what_the_apiserver_recorded() {
    let pki = TestPki::new();
    let server = WebhookServer::start(&pki, session_webhooks());
    let webhooks_path = session_webhooks_file(&pki, &server, "policies-oracle");
    let dir = webhooks_path.parent().unwrap().to_path_buf();
    let out = replay(&webhooks_path, &[format!("{SESSION}/audit.log").into()]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));

    // What the apiserver answered, per auditID.
    let recorded = common::completed_audit_events(&read("audit.log"));
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for r in report["requests"].as_array().unwrap() {
        // The session's own requests; the rest is system traffic and objects the apiserver's
        // validation (not admission) refused.
        let ns = r["namespace"].as_str().unwrap_or_default();
        if !["pol", "other", "np"].contains(&ns) {
            continue;
        }
        let id = r["source"]["auditID"].as_str().unwrap_or_default();
        let Some(event) = recorded.get(id) else {
            continue;
        };
        compared += 1;
        let code = event["responseStatus"]["code"].as_i64().unwrap_or_default();
        let ours = r["status"]["code"]
            .as_i64()
            .unwrap_or(if code < 400 { code } else { 0 });
        let title = format!("{} {ns}/{}", r["operation"], r["name"]);
        if ours != code {
            mismatches.push(format!(
                "{title}: code {ours}, recorded {code}: {}",
                r["status"]
            ));
            continue;
        }
        if code >= 400
            && r["status"]["message"].as_str() != event["responseStatus"]["message"].as_str()
        {
            mismatches.push(format!(
                "{title}: message {}, recorded {}",
                r["status"]["message"], event["responseStatus"]["message"]
            ));
        }
        for (key, value) in event["annotations"].as_object().into_iter().flatten() {
            let policy_key = key.starts_with("validation.policy.admission.k8s.io/")
                || key.starts_with("replica-limit/");
            if policy_key && r["annotations"][key] != *value {
                mismatches.push(format!(
                    "{title}: annotation {key} = {}, recorded {value}",
                    r["annotations"][key]
                ));
            }
        }
        for (key, value) in r["annotations"].as_object().into_iter().flatten() {
            let policy_key = key.starts_with("validation.policy.admission.k8s.io/")
                || key.starts_with("replica-limit/");
            if policy_key && event["annotations"][key].is_null() {
                mismatches.push(format!("{title}: annotation {key} = {value} not recorded"));
            }
        }
    }
    assert!(compared >= 10, "{compared} requests compared");

    // The warnings kubectl printed are the warnings of the session's requests (the readiness
    // probes aside, which kubectl's transcripts do not show).
    let mut printed: Vec<String> = std::fs::read_dir(format!("{SESSION}/kubectl"))
        .unwrap()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            text.lines()
                .filter_map(|l| l.strip_prefix("Warning: "))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut ours: Vec<String> = report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            ["pol", "other", "np"].contains(&r["namespace"].as_str().unwrap_or_default())
                && !r["name"].as_str().unwrap_or_default().starts_with("probe")
        })
        .flat_map(|r| r["warnings"].as_array().cloned().unwrap_or_default())
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    printed.sort();
    ours.sort();
    assert_eq!(ours, printed);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // The policy metrics the session added between its two scrapes of `/metrics`
    // (metrics-after minus metrics-before), series by series, against a replay of the requests
    // between those scrapes; the namespaces and the parameter they need were created before.
    let scrapes: Vec<String> = read("audit.log")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["requestURI"] == "/metrics" && e["stage"] == "ResponseComplete")
        .map(|e| e["stageTimestamp"].as_str().unwrap().to_string())
        .collect();
    let [.., before_scrape, after_scrape] = scrapes.as_slice() else {
        panic!("the session scraped /metrics before and after: {scrapes:?}");
    };
    let window: String = read("audit.log")
        .lines()
        .filter(|l| {
            let e: Value = serde_json::from_str(l).unwrap_or_default();
            let at = e["stageTimestamp"].as_str().unwrap_or_default();
            at > before_scrape.as_str() && at < after_scrape.as_str()
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let window_path = dir.join("window.log");
    std::fs::write(&window_path, window).unwrap();
    let cluster_path = dir.join("cluster.yaml");
    std::fs::write(
        &cluster_path,
        format!(
            "{}\n---\n{}",
            read("inputs/namespaces.yaml"),
            read("inputs/params.yaml")
        ),
    )
    .unwrap();
    let window_metrics = dir.join("window-metrics.txt");
    let out = replay(
        &webhooks_path,
        &[
            window_path.into(),
            "--cluster".into(),
            cluster_path.into(),
            "--metrics".into(),
            window_metrics.clone().into(),
        ],
    );
    assert!(
        out.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts = |text: &str| -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| l.starts_with("apiserver_validating_admission_policy_check_total{"))
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(series, v)| (series.to_string(), v.parse().unwrap()))
            .collect()
    };
    let before = counts(&read("metrics-before.txt"));
    let mut added = counts(&read("metrics-after.txt"));
    for (series, v) in &before {
        if let Some(after) = added.get_mut(series) {
            *after -= v;
        }
    }
    added.retain(|_, v| *v > 0.0);
    assert!(added.len() >= 5, "{added:?}");
    let ours = counts(&std::fs::read_to_string(&window_metrics).unwrap());
    assert_eq!(ours, added);
    // The mutating plugins ran once per round of every create and update in the window, the
    // policy plugin as often as the webhook plugin.
    let plugins = |text: &str| -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| {
                l.starts_with(
                    "apiserver_admission_controller_admission_duration_seconds_count{name=\"Mutating",
                )
            })
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(series, v)| (series.to_string(), v.parse().unwrap()))
            .collect()
    };
    let mut recorded_plugins = plugins(&read("metrics-after.txt"));
    for (series, v) in plugins(&read("metrics-before.txt")) {
        if let Some(after) = recorded_plugins.get_mut(&series) {
            *after -= v;
        }
    }
    assert_eq!(recorded_plugins.len(), 4, "{recorded_plugins:?}");
    assert_eq!(
        plugins(&std::fs::read_to_string(&window_metrics).unwrap()),
        recorded_plugins
    );
    // The HELP text and the histogram of the same series.
    let text = std::fs::read_to_string(&window_metrics).unwrap();
    let help = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("# HELP apiserver_validating_admission_policy_check_total "))
            .map(str::to_string)
    };
    assert_eq!(help(&text), help(&read("metrics-after.txt")));
}
