//! Policy variables and MutatingAdmissionPolicies' effect on `managedFields`, against two real
//! kube-apiserver v1.33.3 sessions (`fixtures/policies-more-v1.33`, see its README): the audit
//! logs replayed through the sessions' policies and validating webhook (served here on 127.0.0.1
//! over HTTPS, allowing as the recorded one did) give the codes, messages, warnings, policy audit
//! annotations, objects and `managedFields` the apiserver recorded.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use common::{TestPki, WebhookServer, handler, v1_allow};
use serde_json::Value;

const SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/policies-more-v1.33"
);

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{SESSION}/{path}")).unwrap()
}

/// The lines kubectl printed that start with `prefix`, over every transcript in `dir`.
fn printed(dir: &str, prefix: &str) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(format!("{SESSION}/{dir}"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines()
                .filter_map(|l| l.strip_prefix(prefix))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The session's validating webhook, recording each review it receives.
struct Recorder {
    pki: TestPki,
    server: WebhookServer,
    received: Arc<Mutex<Vec<Value>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let pki = TestPki::new();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let server = WebhookServer::start(
            &pki,
            handler(move |req| {
                let review: Value = serde_json::from_slice(&req.body).unwrap_or_default();
                log.lock().unwrap().push(review);
                v1_allow(&req.review_uid().unwrap_or_default())
            }),
        );
        Recorder {
            pki,
            server,
            received,
        }
    }

    /// `webhooks.yaml` of `inputs` pointing at this server, written into a fresh `dir`.
    fn webhooks_file(&self, inputs: &str, dir: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca = base64::engine::general_purpose::STANDARD.encode(self.pki.ca_pem());
        let webhooks: String = read(&format!("{inputs}/webhooks.yaml"))
            .lines()
            .map(|l| match l.split_once("caBundle: ") {
                Some((indent, _)) => format!("{indent}caBundle: {ca}\n"),
                None => format!(
                    "{}\n",
                    l.replace("https://127.0.0.1:18546", &self.server.url(""))
                ),
            })
            .collect();
        let path = dir.join("webhooks.yaml");
        std::fs::write(&path, webhooks).unwrap();
        path
    }

    fn received(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

/// `hookscope --kube-version 1.33 replay` of `audit` through the configurations `files`, with
/// the flags `extra`.
fn run_replay(files: &[PathBuf], audit: &Path, extra: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(["--kube-version", "1.33", "replay"])
        .args(extra)
        .arg("--webhooks")
        .args(files)
        .arg("--input")
        .arg(audit)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// `hookscope replay --format json` of `audit` through the configurations `files`.
fn replay(files: &[PathBuf], audit: &Path) -> Value {
    let out = run_replay(files, audit, &["--format".as_ref(), "json".as_ref()]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// The main session replayed through its policies and the webhook of `recorder` (its file
/// written into `dir`).
fn replay_session(recorder: &Recorder, dir: &str) -> Value {
    let webhooks = recorder.webhooks_file("inputs", dir);
    replay(
        &[
            format!("{SESSION}/inputs/validating-policies.yaml").into(),
            format!("{SESSION}/inputs/mutating-policies.yaml").into(),
            webhooks,
        ],
        Path::new(&format!("{SESSION}/audit.log")),
    )
}

/// The main session's audit events at `ResponseComplete` that `keep` keeps, by auditID.
fn completed_events(keep: impl Fn(&Value) -> bool) -> BTreeMap<String, Value> {
    read("audit.log")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && keep(e))
        .map(|e| (e["auditID"].as_str().unwrap_or_default().to_string(), e))
        .collect()
}

/// The reviews recorded in `dir` (`NNNN-record-req.json`), in order.
fn recorded_reviews(dir: &str) -> Vec<Value> {
    let mut files: Vec<String> = std::fs::read_dir(format!("{SESSION}/{dir}"))
        .unwrap()
        .map(|f| f.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with("-req.json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| serde_json::from_str(&read(&format!("{dir}/{f}"))).unwrap())
        .collect()
}

/// What a validating webhook saw of a review: the operation, the object's name, labels,
/// annotations, data and managedFields.
fn seen(review: &Value) -> String {
    let r = &review["request"];
    let o = &r["object"];
    let meta = &o["metadata"];
    format!(
        "{} {}/{} labels={} annotations={} data={} managedFields={}",
        r["operation"].as_str().unwrap_or_default(),
        r["namespace"].as_str().unwrap_or_default(),
        r["name"].as_str().unwrap_or_default(),
        meta["labels"],
        meta["annotations"],
        o["data"],
        meta["managedFields"]
    )
}

/// The policy with two untyped auditAnnotations is refused with the field errors kubectl printed.
#[test]
fn untyped_variables_in_audit_annotations_get_the_field_errors_kubectl_printed() {
    let expected: Vec<String> = printed("kubectl", "* ");
    assert_eq!(expected.len(), 2, "{expected:?}");
    let got: Vec<String> =
        common::policy_field_errors(&read("inputs/invalid-policy.yaml"), "invalid-policy.yaml")
            .into_iter()
            .flat_map(|(_, errors)| errors)
            .collect();
    assert_eq!(got, expected);
}

/// Variables evaluated lazily: an unread failing variable changes nothing (`unused`, and
/// `lazy-deny`'s `unusedBad` on every request); a read one fails the expression reading it with
/// upstream's `composited variable` text, through another variable too (`chained`); a failing
/// messageExpression falls back to the expression; an auditAnnotation reading it denies. Each
/// request's code, message, warnings and policy audit annotations are the recorded ones.
#[test]
fn policy_variables_replay_to_what_the_apiserver_recorded() {
    let recorder = Recorder::start();
    let report = replay_session(&recorder, "policies-more-lazy");
    // `mapvar` is left to `map_variables_are_evaluated_per_mutation`: in this session the
    // apiserver failed to compile `lazy-map` (see the README).
    let compared = assert_replayed_as_recorded(&report, "", &["lazy", "mapmf"], "lazy-vars/");
    assert!(compared >= 15, "{compared} requests compared");
}

/// Asserts that the requests of `report` in `namespaces` got the code, the message and the policy
/// audit annotations (`validation.policy…` and those starting with `annotations`) of the session
/// in `dir` (its `audit.log`), and together the warnings its kubectl transcripts printed; returns
/// how many requests were compared.
fn assert_replayed_as_recorded(
    report: &Value,
    dir: &str,
    namespaces: &[&str],
    annotations: &str,
) -> usize {
    let recorded: BTreeMap<String, Value> = read(&format!("{dir}audit.log"))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| (e["auditID"].as_str().unwrap_or_default().to_string(), e))
        .collect();
    let mut compared = 0;
    let mut mismatches = Vec::new();
    let policy_key = |k: &str| {
        k.starts_with("validation.policy.admission.k8s.io/") || k.starts_with(annotations)
    };
    let policy_annotations = |v: &Value| -> BTreeMap<String, Value> {
        (v.as_object().into_iter().flatten())
            .filter(|(k, _)| policy_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut warnings = Vec::new();
    for r in report["requests"].as_array().unwrap() {
        let ns = r["namespace"].as_str().unwrap_or_default();
        if !namespaces.contains(&ns) {
            continue;
        }
        warnings.extend(
            (r["warnings"].as_array().into_iter().flatten())
                .map(|w| w.as_str().unwrap().to_string()),
        );
        let Some(event) = recorded.get(r["source"]["auditID"].as_str().unwrap_or_default()) else {
            continue;
        };
        compared += 1;
        let title = format!("{} {ns}/{}", r["operation"], r["name"]);
        let code = event["responseStatus"]["code"].as_i64().unwrap_or_default();
        let ours = r["status"]["code"].as_i64().unwrap_or(code.min(399));
        if ours != code {
            mismatches.push(format!("{title}: code {ours}, recorded {code}"));
        }
        if code >= 400 && r["status"]["message"] != event["responseStatus"]["message"] {
            mismatches.push(format!(
                "{title}: message {}, recorded {}",
                r["status"]["message"], event["responseStatus"]["message"]
            ));
        }
        let (ours, theirs) = (
            policy_annotations(&r["annotations"]),
            policy_annotations(&event["annotations"]),
        );
        if ours != theirs {
            mismatches.push(format!(
                "{title}: annotations {ours:?}, recorded {theirs:?}"
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    let mut kubectl = printed(&format!("{dir}kubectl"), "Warning: ");
    kubectl.sort();
    warnings.sort();
    assert_eq!(warnings, kubectl);
    compared
}

/// messageExpressions and auditAnnotations are evaluated with no `authorizer` bound (nor do
/// the variables they read have one): an auditAnnotation reading it, directly or through a
/// variable, fails with `no such attribute(s): authorizer` and denies; a messageExpression
/// reading such a variable falls back to the expression; a validation reading it is answered.
#[test]
fn message_expressions_and_audit_annotations_have_no_authorizer() {
    let report = replay(
        &[format!("{SESSION}/authorizer-scopes/inputs/authz.yaml").into()],
        Path::new(&format!("{SESSION}/authorizer-scopes/audit.log")),
    );
    let compared =
        assert_replayed_as_recorded(&report, "authorizer-scopes/", &["authz"], "authz-scopes/");
    assert_eq!(compared, 5, "the namespace and four configmaps");
}

/// A MutatingAdmissionPolicy's changes, by ApplyConfiguration or JSONPatch, are attributed to
/// no manager: the validating webhook and the store see the managedFields the field manager set
/// before admission (for creates, `kubectl label` and server-side applies); a policy that
/// removes them stores the object without any; one that leaves them undecodable has them reset,
/// with the warning kubectl printed.
#[test]
fn mutating_policies_leave_managed_fields_to_the_field_manager() {
    let recorder = Recorder::start();
    let report = replay_session(&recorder, "policies-more-managed");
    let in_mapmf = |s: &String| s.contains(" mapmf/");
    let ours: Vec<String> = recorder
        .received()
        .iter()
        .map(seen)
        .filter(in_mapmf)
        .collect();
    let want: Vec<String> = recorded_reviews("received")
        .iter()
        .map(seen)
        .filter(in_mapmf)
        .collect();
    assert_eq!(want.len(), 6, "{want:#?}");
    assert_eq!(ours, want);

    // The objects stored: the audit log's response objects.
    let stored = completed_events(|e| e["objectRef"]["namespace"] == "mapmf");
    let mut compared = 0;
    for r in report["requests"].as_array().unwrap() {
        let Some(event) = stored.get(r["source"]["auditID"].as_str().unwrap_or_default()) else {
            continue;
        };
        compared += 1;
        let (got, want) = (&r["object"], &event["responseObject"]);
        for field in ["labels", "managedFields"] {
            assert_eq!(
                got["metadata"][field], want["metadata"][field],
                "{} {field}",
                r["name"]
            );
        }
        assert_eq!(got["data"], want["data"], "{}", r["name"]);
    }
    assert_eq!(compared, 6);
    let warned: Vec<&Value> = report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] == "corrupt")
        .flat_map(|r| r["warnings"].as_array().unwrap())
        .collect();
    let kubectl = printed("kubectl", "Warning: ");
    let managed: Vec<&String> = kubectl
        .iter()
        .filter(|w| w.contains("managedFields"))
        .collect();
    assert_eq!(managed.len(), 1);
    assert_eq!(warned, [managed[0].as_str()]);
}

/// Each mutation evaluates the policy's variables again, lazily, over the object as the mutations
/// before it left it: `seen-team` reads the team the first mutation set, as the apiserver stored it
/// and as the validating webhook received it; the unread failing variable changes nothing.
#[test]
fn map_variables_are_evaluated_per_mutation() {
    let recorder = Recorder::start();
    let webhooks = recorder.webhooks_file("map-variables/inputs", "policies-more-map-variables");
    let report = replay(
        &[
            format!("{SESSION}/map-variables/inputs/map-variables.yaml").into(),
            webhooks,
        ],
        Path::new(&format!("{SESSION}/map-variables/audit.log")),
    );
    let ours: Vec<String> = recorder.received().iter().map(seen).collect();
    let want: Vec<String> = recorded_reviews("map-variables/received")
        .iter()
        .map(seen)
        .collect();
    assert_eq!(want.len(), 1);
    assert!(want[0].contains(r#""seen-team":"platform""#), "{want:?}");
    assert_eq!(ours, want);
    let stored: Value = serde_json::from_str(
        read("map-variables/kubectl/05-get-mapvar.txt")
            .split_once('\n')
            .unwrap()
            .1
            .rsplit_once("exit code")
            .unwrap()
            .0,
    )
    .unwrap();
    let teamless = report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "teamless")
        .unwrap();
    for field in ["labels", "annotations", "managedFields"] {
        assert_eq!(
            teamless["object"]["metadata"][field], stored["metadata"][field],
            "{field}"
        );
    }
}

/// CEL at run time (`cel-runtime/`): `x in []` is false without evaluating `x` (cel-go folds
/// it into a constant); the validations' cost budget, once exhausted, replaces every decision of
/// the policy by one error (a false validation before it included); the messageExpressions of
/// all validations run on what the validations left of it, and their running out turns every
/// decision into `failed messageExpression: …`; the auditAnnotations have a budget of their own,
/// whose running out is the policy's one error too.
#[test]
fn cel_runtime_and_cost_budgets_replay_to_what_the_apiserver_recorded() {
    let report = replay(
        &[format!("{SESSION}/cel-runtime/inputs/policies.yaml").into()],
        Path::new(&format!("{SESSION}/cel-runtime/audit.log")),
    );
    let compared = assert_replayed_as_recorded(&report, "cel-runtime/", &["celrt"], "rt-");
    // The nine ConfigMaps and the namespace.
    assert_eq!(compared, 10);
}

/// The same session's `apiserver_validating_admission_policy_check_total`, as `/metrics` gave it
/// after the session: a runtime error under `Fail` is a `deny` with its `error_type`
/// (`invalid_error`, `out_of_budget`), a messageExpression out of budget one per decision, and
/// a policy that allowed has no series.
#[test]
fn cel_runtime_errors_are_counted_as_the_apiserver_counted_them() {
    let metrics = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cel-runtime-metrics.txt");
    let _ = std::fs::remove_file(&metrics);
    let out = run_replay(
        &[format!("{SESSION}/cel-runtime/inputs/policies.yaml").into()],
        Path::new(&format!("{SESSION}/cel-runtime/audit.log")),
        &["--metrics".as_ref(), metrics.as_os_str()],
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let series = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("apiserver_validating_admission_policy_check_total{"))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(
        series(&std::fs::read_to_string(&metrics).unwrap()),
        series(&read("cel-runtime/metrics.txt"))
    );
}
