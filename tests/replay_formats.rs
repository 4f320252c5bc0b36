//! Every format people capture requests in, read by the replay's input loader: audit events of
//! older API versions, the envelopes log pipelines and cloud providers put around audit events,
//! bare AdmissionRequests from policy engines' tests, and plain manifests (replayed as the create
//! `kubectl create -f` sends). The files in tests/fixtures/formats were written by others (see
//! its README).

use hookscope::api::Operation;
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::replay::{CapturedRequest, InputItem, InputProblem};
use serde_json::{Value, json};

mod common;
use common::requests;

const FORMATS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/formats");

fn read_text(name: &str, text: &str) -> Vec<InputItem> {
    let mut reader = Reader::new(ClusterState::new());
    let mut items = Vec::new();
    reader
        .read(name, &mut text.as_bytes(), &mut |i| items.push(i))
        .expect("readable input");
    reader.finish(&mut |i| items.push(i));
    items
}

fn read_file(file: &str) -> Vec<InputItem> {
    let text = std::fs::read_to_string(format!("{FORMATS}/{file}")).expect("fixture");
    read_text(file, &text)
}

fn invalid(items: &[InputItem]) -> Vec<&InputProblem> {
    items
        .iter()
        .filter_map(|i| match i {
            InputItem::Invalid(p) => Some(p),
            _ => None,
        })
        .collect()
}

/// The request without where it came from, to compare a wrapped event with the bare one.
fn request_value(r: &CapturedRequest) -> String {
    format!("{:?} {:?} {:?}", r.uid, r.attrs, r.notes)
}

#[test]
fn an_aks_diagnostic_record_holds_the_event_as_a_string() {
    let wrapped = read_file("aks-kube-audit-record.json");
    let bare = read_file("aks-kube-audit-event.json");
    let (w, b) = (requests(&wrapped), requests(&bare));
    assert_eq!(w.len(), 1, "{wrapped:?}");
    assert_eq!(request_value(w[0]), request_value(b[0]));
    assert_eq!(
        w[0].source.audit_id.as_deref(),
        Some("7df19974-f894-454b-a1f2-137258598c45")
    );
    assert_eq!(w[0].attrs.resource.resource, "subjectaccessreviews");
}

#[test]
fn envelopes_of_event_hubs_cloudwatch_and_container_logs() {
    let event = std::fs::read_to_string(format!("{FORMATS}/aks-kube-audit-event.json")).unwrap();
    let event = event.trim();
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FORMATS}/aks-kube-audit-record.json")).unwrap(),
    )
    .unwrap();
    let bare = request_value(requests(&read_text("bare.json", event))[0]);
    for (what, doc) in [
        ("event hub", json!({"records": [record]})),
        (
            "cloudwatch subscription",
            json!({"messageType": "DATA_MESSAGE", "logGroup": "/aws/eks/c/cluster", "logEvents": [{"id": "1", "timestamp": 1, "message": event}]}),
        ),
        (
            "cloudwatch export",
            json!({"timestamp": 1, "message": event}),
        ),
        (
            "container log",
            json!({"log": format!("{event}\n"), "stream": "stdout", "time": "2021-02-02T15:00:00Z"}),
        ),
    ] {
        let items = read_text("wrapped.json", &doc.to_string());
        let got = requests(&items);
        assert_eq!(got.len(), 1, "{what}: {items:?}");
        assert_eq!(request_value(got[0]), bare, "{what}");
    }
}

#[test]
fn a_v1beta1_audit_event_is_read_as_v1() {
    let items = read_file("falco-v1beta1-event.json");
    let got = requests(&items);
    assert_eq!(got.len(), 1, "{items:?}");
    let r = got[0];
    assert_eq!(r.attrs.operation, Operation::Create);
    assert_eq!(r.attrs.resource.resource, "namespaces");
    assert_eq!(r.attrs.name, "foo");
    assert_eq!(r.attrs.user_info.username, "system:anonymous");

    let other = read_text(
        "x.json",
        r#"{"kind":"Event","apiVersion":"audit.k8s.io/v2","stage":"ResponseComplete","auditID":"a","verb":"get"}"#,
    );
    let bad = invalid(&other);
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].field, "apiVersion");
    assert!(
        bad[0].message.contains("\"audit.k8s.io/v2\""),
        "{}",
        bad[0].message
    );
}

#[test]
fn a_bare_admission_request_is_a_review() {
    let items = read_file("kubewarden-pod-creation.json");
    let got = requests(&items);
    assert_eq!(got.len(), 1, "{items:?}");
    let r = got[0];
    assert_eq!(r.uid, "1299d386-525b-4032-98ae-1949f69f9cfc");
    assert_eq!(r.attrs.operation, Operation::Create);
    assert_eq!(r.attrs.kind.kind, "Pod");
    assert_eq!(r.attrs.user_info.username, "alice");

    // kubewarden's ValidationRequest: the request beside the policy's settings.
    let text = std::fs::read_to_string(format!("{FORMATS}/kubewarden-pod-creation.json")).unwrap();
    let request: Value = serde_json::from_str(&text).unwrap();
    let wrapped = json!({"request": request, "settings": {"registries": {"allow": []}}});
    let items = read_text("validation-request.json", &wrapped.to_string());
    assert_eq!(request_value(requests(&items)[0]), request_value(r));
}

#[test]
fn plain_manifests_are_creates_by_the_default_user_or_the_chosen_one() {
    for (file, resource, name) in [
        ("nginx-deployment.yaml", "deployments", "nginx-deployment"),
        ("simple-pod.yaml", "pods", "nginx"),
    ] {
        let items = read_file(file);
        let got = requests(&items);
        assert_eq!(got.len(), 1, "{file}: {items:?}");
        let r = got[0];
        assert_eq!(r.attrs.operation, Operation::Create, "{file}");
        assert_eq!(r.attrs.resource.resource, resource);
        assert_eq!(r.attrs.namespace, "default");
        assert_eq!(r.attrs.name, name);
        assert_eq!(r.attrs.user_info.username, "kubernetes-admin");
        assert!(r.notes[0].contains("--as"), "{:?}", r.notes);
        let options = serde_json::to_value(&r.attrs.options).unwrap();
        assert_eq!(options["fieldManager"], "kubectl-create", "{options}");
        let object = r.attrs.object.as_ref().expect("object").value();
        let managers: Vec<&str> = object["metadata"]["managedFields"]
            .as_array()
            .expect("the field manager's entry")
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert_eq!(managers, ["kubectl-create"]);
    }

    let mut reader = Reader::new(ClusterState::new());
    reader.set_manifest_user(hookscope::api::UserInfo {
        username: "jane".into(),
        groups: vec!["dev".into(), "system:authenticated".into()],
        ..Default::default()
    });
    let text = std::fs::read_to_string(format!("{FORMATS}/simple-pod.yaml")).unwrap();
    let mut items = Vec::new();
    reader
        .read("pod.yaml", &mut text.as_bytes(), &mut |i| items.push(i))
        .unwrap();
    let r = requests(&items)[0];
    assert_eq!(r.attrs.user_info.username, "jane");
    assert!(!r.notes[0].contains("--as"), "{:?}", r.notes);

    // A cluster-scoped kind is not put in `default` (a Namespace's request names itself, as
    // the apiserver's does); a kind the release does not serve is named.
    let items = read_text(
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n",
    );
    let r = requests(&items)[0];
    assert_eq!(
        (r.attrs.namespace.as_str(), r.attrs.name.as_str()),
        ("team-a", "team-a")
    );
    let items = read_text(
        "cr.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: view-all\n",
    );
    let r = requests(&items)[0];
    assert_eq!(
        (r.attrs.namespace.as_str(), r.attrs.name.as_str()),
        ("", "view-all")
    );
    let items = read_text(
        "cr.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n",
    );
    let bad = invalid(&items);
    assert_eq!(bad.len(), 1, "{items:?}");
    assert_eq!(bad[0].field, "kind");
    assert!(
        bad[0].message.contains("CustomResourceDefinition"),
        "{}",
        bad[0].message
    );
}

#[test]
fn a_gke_cloud_audit_log_entry_is_refused_with_the_reason() {
    let entry = json!({
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "authenticationInfo": {"principalEmail": "user@example.com"},
            "methodName": "io.k8s.core.v1.configmaps.create",
            "resourceName": "core/v1/namespaces/default/configmaps/my-config"
        },
        "timestamp": "2024-01-15T10:30:00Z"
    });
    let items = read_text("gke.json", &entry.to_string());
    let bad = invalid(&items);
    assert_eq!(bad.len(), 1, "{items:?}");
    assert_eq!(bad[0].field, "protoPayload");
    assert!(
        bad[0].message.contains("io.k8s.core.v1.configmaps.create"),
        "{}",
        bad[0].message
    );
}
