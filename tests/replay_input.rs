//! The replay input loaders: AdmissionReview documents in every accepted shape, audit logs
//! (against the real v1.32 session of tests/fixtures/oracle-v1.32 and against small logs written
//! here), `--cluster` files, and garbage that must never stop a replay or panic.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use hookscope::api::{GroupVersionKind, GroupVersionResource, Operation, UserInfo};
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::replay::{CapturedRequest, IndexUnit, InputItem, InputProblem, NamespaceState};
use proptest::prelude::*;
use serde_json::{Value, json};

mod common;
use common::requests;

const ORACLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oracle-v1.32");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/replay/input");

fn read_with(reader: &mut Reader, name: &str, text: &str) -> Vec<InputItem> {
    let mut items = Vec::new();
    reader
        .read(name, &mut text.as_bytes(), &mut |i| items.push(i))
        .expect("readable input");
    items
}

/// Reads `text` with a fresh reader and finishes it.
fn read(text: &str) -> Vec<InputItem> {
    read_in(ClusterState::new(), text)
}

fn read_in(cluster: ClusterState, text: &str) -> Vec<InputItem> {
    let mut reader = Reader::new(cluster);
    let mut items = read_with(&mut reader, "test.log", text);
    reader.finish(&mut |i| items.push(i));
    items
}

fn read_fixture(file: &str, cluster: ClusterState) -> Vec<InputItem> {
    let mut reader = Reader::new(cluster);
    let mut items = Vec::new();
    reader
        .read_path(&format!("{FIXTURES}/{file}"), &mut |i| items.push(i))
        .expect("fixture");
    reader.finish(&mut |i| items.push(i));
    items
}

/// The problems of `items`: not-replayable ones, or invalid ones.
fn problems(items: &[InputItem], invalid: bool) -> Vec<&InputProblem> {
    items
        .iter()
        .filter_map(|i| match (i, invalid) {
            (InputItem::NotReplayable(p), false) | (InputItem::Invalid(p), true) => Some(p),
            _ => None,
        })
        .collect()
}

fn not_replayable(items: &[InputItem]) -> Vec<&InputProblem> {
    problems(items, false)
}

fn invalid(items: &[InputItem]) -> Vec<&InputProblem> {
    problems(items, true)
}

fn shared_labels(pairs: &[(&str, &str)]) -> Arc<BTreeMap<String, String>> {
    Arc::new(labels(pairs))
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn without_managed_fields(mut v: Value) -> Value {
    if let Some(Value::Object(m)) = v.get_mut("metadata") {
        m.remove("managedFields");
    }
    v
}

// ---------------------------------------------------------------------------------------------
// The oracle session

/// What tests/oracle_engine.rs replays from the session: the final-stage configmap creates, with
/// `requestObject` as the object, `user` as the user and `dryRun` from the URI; and the labels of
/// the namespaces created in the log.
fn oracle_expectations() -> (Vec<Value>, BTreeMap<String, BTreeMap<String, String>>) {
    let log = std::fs::read_to_string(format!("{ORACLE}/audit.log")).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let creates = |resource: &'static str| {
        events.iter().filter(move |e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "create"
                && e["objectRef"]["resource"] == resource
        })
    };
    let namespaces = creates("namespaces")
        .map(|e| {
            let l = e["requestObject"]["metadata"]["labels"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let l = l
                .into_iter()
                .map(|(k, v)| (k, v.as_str().unwrap().to_string()))
                .collect();
            (e["objectRef"]["name"].as_str().unwrap().to_string(), l)
        })
        .collect();
    (creates("configmaps").cloned().collect(), namespaces)
}

#[test]
fn the_oracle_audit_log_yields_the_requests_the_oracle_test_replays() {
    let (expected, oracle_namespaces) = oracle_expectations();
    assert_eq!(expected.len(), 8);
    let mut reader = Reader::new(ClusterState::new());
    let mut items = Vec::new();
    reader
        .read_path(&format!("{ORACLE}/audit.log"), &mut |i| items.push(i))
        .unwrap();
    reader.finish(&mut |i| items.push(i));

    let configmaps: Vec<&CapturedRequest> = requests(&items)
        .into_iter()
        .filter(|r| r.attrs.resource.resource == "configmaps")
        .collect();
    assert_eq!(configmaps.len(), expected.len());
    for (got, e) in configmaps.iter().zip(&expected) {
        let a = &got.attrs;
        let what = format!("{}/{}", a.namespace, a.name);
        assert_eq!(a.operation, Operation::Create, "{what}");
        assert_eq!(a.kind, GroupVersionKind::new("", "v1", "ConfigMap").into());
        assert_eq!(
            a.resource,
            GroupVersionResource::new("", "v1", "configmaps").into()
        );
        assert_eq!(a.sub_resource, "");
        assert_eq!(a.namespace, e["objectRef"]["namespace"].as_str().unwrap());
        assert_eq!(a.name, e["objectRef"]["name"].as_str().unwrap());
        // The create handler sets the object's namespace to the request's when it has none (the
        // apiserver sent it so: see the received reviews below); the oracle test leaves it out.
        let mut object = e["requestObject"].clone();
        object["metadata"]["namespace"] = json!(a.namespace);
        // The field manager's entries, which the request body lacks: as the stored object shows
        // them, or as the field manager makes them for a denied create (compared with what
        // the webhooks received below).
        let sent = a.object_value().cloned().unwrap();
        let managed = &e["responseObject"]["metadata"]["managedFields"];
        if managed.is_array() {
            assert_eq!(&sent["metadata"]["managedFields"], managed, "{what}");
        }
        assert_eq!(without_managed_fields(sent), object, "{what}");
        assert_eq!(a.old_object, None);
        assert_eq!(
            a.dry_run,
            e["requestURI"].as_str().unwrap().contains("dryRun=All"),
            "{what}"
        );
        let user: UserInfo = serde_json::from_value(e["user"].clone()).unwrap();
        assert_eq!(*a.user_info, user);
        assert_eq!(got.uid, e["auditID"].as_str().unwrap());
        assert_eq!(got.source.unit, IndexUnit::Line);
        let audit = got.audit.as_ref().unwrap();
        assert_eq!(
            audit.response_code.map(i64::from),
            e["responseStatus"]["code"].as_i64()
        );
        assert_eq!(
            serde_json::to_value(&audit.annotations).unwrap(),
            e["annotations"]
        );
        assert!(got.notes.is_empty(), "{what}: {:?}", got.notes);
        match oracle_namespaces.get(&a.namespace) {
            Some(l) => assert_eq!(
                got.namespace,
                NamespaceState::Known(Arc::new(l.clone())),
                "{what}"
            ),
            None => panic!("{what}: the log creates every namespace it uses"),
        }
    }

    // Options and objects as the apiserver really sent them: the first call of each request the
    // webhook server received (its object before any mutation), with the managedFields the
    // apiserver's field manager added: those the stored object shows, or for the denied creates
    // the entry the field manager makes.
    // Two requests create cm-denied-raw (kubectl's, then curl's): the n-th call of a name is
    // the n-th request of that name.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for first in ["0004", "0007", "0011", "0015", "0019"] {
        let path = format!("{ORACLE}/received/{first}-add-label-req.json");
        let sent: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let sent = &sent["request"];
        let nth = seen
            .entry(sent["name"].as_str().unwrap().to_string())
            .or_default();
        *nth += 1;
        let got = configmaps
            .iter()
            .filter(|r| {
                r.attrs.name == sent["name"] && r.attrs.options.as_deref() == Some(&sent["options"])
            })
            .nth(*nth - 1)
            .unwrap_or_else(|| {
                panic!(
                    "{first}: no request with these options: {}",
                    sent["options"]
                )
            });
        assert_eq!(got.attrs.object_value(), Some(&sent["object"]), "{first}");
        assert_eq!(
            serde_json::to_value(&*got.attrs.user_info).unwrap(),
            sent["userInfo"]
        );
        assert_eq!(got.attrs.dry_run, sent["dryRun"]);
    }

    // The rest of the log: every other final-stage create is a request, and so is every
    // server-side apply of the flow-control bootstrap (an UPDATE of the object the field manager
    // builds, with the managedFields the apiserver stored); the update of a configmap that did
    // not exist is not replayable; reads, watches and non-resource requests give nothing.
    let log = std::fs::read_to_string(format!("{ORACLE}/audit.log")).unwrap();
    let creates = log
        .lines()
        .filter(|l| l.contains(r#""stage":"ResponseComplete""#) && l.contains(r#""verb":"create""#))
        .count();
    let applies: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "patch"
                && e["requestURI"].as_str().unwrap().contains("fieldManager=")
        })
        .collect();
    assert_eq!(applies.len(), 15);
    assert_eq!(requests(&items).len(), creates + applies.len());
    for apply in &applies {
        let id = apply["auditID"].as_str().unwrap();
        let got = requests(&items)
            .into_iter()
            .find(|r| r.uid == id)
            .unwrap_or_else(|| panic!("apply {id} replayed"));
        assert_eq!(got.attrs.operation, Operation::Update);
        let object = got.attrs.object_value().unwrap();
        let stored = &apply["responseObject"];
        assert_eq!(
            object["metadata"]["managedFields"], stored["metadata"]["managedFields"],
            "{id}"
        );
        assert_eq!(object["spec"], stored["spec"], "{id}");
    }
    let nr = not_replayable(&items);
    assert_eq!(nr.len(), 1);
    assert!(nr[0].message.starts_with(
        "old object unknown: configmaps kube-system/extension-apiserver-authentication"
    ));
    assert!(nr[0].message.contains("404"));
    assert!(invalid(&items).is_empty());
    assert_eq!(reader.pending_requests(), 0);
}

#[test]
fn a_truncated_line_in_the_middle_is_reported_and_the_rest_is_read() {
    let log = std::fs::read_to_string(format!("{ORACLE}/audit.log")).unwrap();
    let mut lines: Vec<String> = log.lines().map(String::from).collect();
    let cut = lines
        .iter()
        .position(|l| l.contains(r#""name":"cm-ok""#) && l.contains("ResponseComplete"))
        .unwrap();
    let half = lines[cut].len() / 2;
    lines[cut].truncate(half);
    let items = read(&lines.join("\n"));
    let bad = invalid(&items);
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].source.index, cut + 1);
    assert_eq!(bad[0].source.unit, IndexUnit::Line);
    assert!(
        bad[0]
            .message
            .starts_with("invalid JSON: EOF while parsing"),
        "{}",
        bad[0].message
    );
    let names: Vec<&str> = requests(&items)
        .iter()
        .filter(|r| r.attrs.resource.resource == "configmaps")
        .map(|r| r.attrs.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "extension-apiserver-authentication",
            "kube-apiserver-legacy-service-account-token-tracking",
            "probe",
            "cm-denied",
            "cm-denied-2",
            "cm-denied-raw",
            "cm-denied-raw"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// AdmissionReview inputs

#[test]
fn a_v1_review_is_replayed_as_captured() {
    let mut cluster = ClusterState::new();
    cluster.insert_namespace("shop", labels(&[("team", "a")]));
    let items = read_fixture("review-v1.json", cluster);
    let r = requests(&items);
    assert_eq!(r.len(), 1);
    let r = r[0];
    assert_eq!(r.uid, "0d1c4f2a-5e0c-4c55-9a61-7a3b9d0f1e01");
    assert_eq!((r.source.index, r.source.unit), (1, IndexUnit::Document));
    assert_eq!(r.attrs.operation, Operation::Create);
    assert_eq!(r.attrs.kind, GroupVersionKind::new("", "v1", "Pod").into());
    assert_eq!(
        (r.attrs.namespace.as_str(), r.attrs.name.as_str()),
        ("shop", "web")
    );
    assert!(r.attrs.dry_run);
    assert_eq!(
        r.attrs.options.as_deref(),
        Some(&json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}))
    );
    assert_eq!(r.attrs.user_info.extra["scopes"], ["a"]);
    assert_eq!(
        r.attrs.object.as_ref().unwrap()["spec"]["containers"][0]["image"],
        "nginx"
    );
    assert_eq!(
        r.namespace,
        NamespaceState::Known(shared_labels(&[("team", "a")]))
    );
    assert!(r.audit.is_none());
}

#[test]
fn v1beta1_reviews_in_yaml_documents() {
    let items = read_fixture("reviews-v1beta1.yaml", ClusterState::new());
    assert_eq!(items.len(), 3, "{items:?}");
    let r = requests(&items);
    assert_eq!(
        r.iter().map(|r| r.source.index).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(r[0].attrs.operation, Operation::Update);
    assert_eq!(
        r[0].attrs.old_object.as_ref().unwrap()["metadata"]["labels"]["v"],
        "1"
    );
    assert_eq!(
        r[0].attrs.user_info.username,
        "system:serviceaccount:ci:deployer"
    );
    assert_eq!(
        r[0].namespace,
        NamespaceState::Unknown,
        "shop is not known without --cluster"
    );
    assert_eq!(
        r[1].namespace,
        NamespaceState::NotApplicable,
        "a Namespace uses its own labels"
    );
    assert_eq!(r[2].attrs.operation, Operation::Delete);
    assert_eq!(
        r[2].namespace,
        NamespaceState::NotApplicable,
        "cluster-scoped"
    );
    assert_eq!(
        r[2].attrs.options.as_ref().unwrap()["propagationPolicy"],
        "Background"
    );
}

#[test]
fn json_lines_of_reviews_with_bad_lines_among_them() {
    let items = read_fixture("reviews.jsonl", ClusterState::new());
    let at = |i: &InputItem| match i {
        InputItem::Request(r) => ("request", r.source.index, String::new()),
        InputItem::NotReplayable(p) => ("not replayable", p.source.index, p.to_string()),
        InputItem::Invalid(p) => (
            "invalid",
            p.source.index,
            format!("{}: {}", p.field, p.message),
        ),
    };
    let got: Vec<_> = items.iter().map(at).collect();
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0].0, "request");
    assert_eq!(
        got[1],
        (
            "invalid",
            2,
            r#"request.operation: unknown operation "FOO""#.to_string()
        )
    );
    assert_eq!((got[2].0, got[2].1), ("invalid", 3));
    assert!(got[2].2.contains("invalid JSON"), "{}", got[2].2);
    // A plain object is a manifest: the create `kubectl create -f` would send.
    assert_eq!(got[3], ("request", 5, String::new()));
    let manifest = requests(&items)[1];
    assert_eq!(manifest.attrs.operation, Operation::Create);
    assert_eq!(manifest.attrs.name, "not-a-review");
    assert!(
        manifest.notes[0].starts_with("a plain manifest"),
        "{:?}",
        manifest.notes
    );
    // Decoded and defaulted as the create handler does, and known to be.
    let object = manifest.attrs.object.as_ref().expect("an object");
    assert!(object.is_known_defaulted());
    assert!(
        !requests(&items)[0]
            .attrs
            .object
            .as_ref()
            .is_some_and(|o| o.is_known_defaulted()),
        "a review's object is taken as it is"
    );
    assert_eq!((got[4].0, got[4].1), ("request", 6));
    let connect = requests(&items)[2];
    assert_eq!(connect.attrs.operation, Operation::Connect);
    assert_eq!(connect.attrs.sub_resource, "exec");
    assert_eq!(connect.attrs.options, None);
    assert!(
        requests(&items)
            .iter()
            .all(|r| r.source.unit == IndexUnit::Line)
    );
}

#[test]
fn a_json_array_of_reviews() {
    let items = read_fixture("reviews-array.json", ClusterState::new());
    let r = requests(&items);
    assert_eq!(
        r.iter().map(|r| r.uid.as_str()).collect::<Vec<_>>(),
        ["b1", "b2"]
    );
    assert_eq!(r[1].attrs.operation, Operation::Delete);
    let bad = invalid(&items);
    assert_eq!(bad.len(), 1);
    assert_eq!(
        (bad[0].source.index, bad[0].field.as_str()),
        (3, "apiVersion")
    );
}

#[test]
fn a_tap_capture_with_the_response_replays_the_request() {
    let items = read_fixture("tap.json", ClusterState::new());
    let r = requests(&items);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].uid, "c1");
    assert_eq!(r[0].attrs.kind.kind, "Deployment");
    let bad = invalid(&items);
    assert_eq!(bad.len(), 1);
    assert_eq!(
        bad[0].to_string(),
        format!(
            "{FIXTURES}/tap.json line 2: request: missing: a response alone cannot be replayed"
        )
    );
}

#[test]
fn inputs_that_cannot_be_read_at_all() {
    let mut reader = Reader::new(ClusterState::new());
    let mut sink = |_: InputItem| panic!("no items");
    for (text, want) in [
        (&b""[..], "empty input"),
        (b" \n\t\n", "empty input"),
        (b"\xEF\xBB\xBF\n", "empty input"),
        (b"\x00\x01binary\xff", "not JSON or YAML text"),
        (b"hello world\n", "not JSON or YAML documents"),
    ] {
        let err = reader.read("in", &mut &*text, &mut sink).unwrap_err();
        assert!(err.message.starts_with(want), "{:?}: {}", text, err.message);
        assert_eq!(err.source.file, "in");
    }
    let err = reader
        .read_path("/nonexistent/capture.json", &mut sink)
        .unwrap_err();
    assert!(err.message.starts_with("cannot open"), "{}", err.message);
}

// ---------------------------------------------------------------------------------------------
// Audit logs written here

/// An audit event at its final stage, level RequestResponse, authorized.
#[derive(Clone)]
struct Ev(Value);

impl Ev {
    fn new(id: &str, verb: &str, uri: &str, object_ref: Value) -> Self {
        Ev(json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
            "auditID": id, "stage": "ResponseComplete", "requestURI": uri, "verb": verb,
            "user": {"username": "alice", "uid": "u-1", "groups": ["system:authenticated"]},
            "sourceIPs": ["10.0.0.1"], "userAgent": "kubectl/v1.32.0 (linux/amd64) kubernetes/abc",
            "objectRef": object_ref,
            "responseStatus": {"metadata": {}, "code": 200},
            "requestReceivedTimestamp": "2025-01-01T00:00:00.000000Z",
            "stageTimestamp": "2025-01-01T00:00:00.100000Z",
            "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
        }))
    }

    fn set(mut self, key: &str, v: Value) -> Self {
        match v {
            Value::Null => {
                self.0.as_object_mut().unwrap().remove(key);
            }
            v => self.0[key] = v,
        }
        self
    }

    fn code(mut self, code: i64) -> Self {
        self.0["responseStatus"]["code"] = json!(code);
        self
    }

    fn req(self, v: Value) -> Self {
        self.set("requestObject", v)
    }

    fn resp(self, v: Value) -> Self {
        self.set("responseObject", v)
    }

    fn stage(self, stage: &str) -> Self {
        self.set("stage", json!(stage))
    }
}

fn log(events: &[Ev]) -> String {
    events.iter().map(|e| e.0.to_string() + "\n").collect()
}

fn oref(resource: &str, namespace: &str, name: &str) -> Value {
    let mut o = json!({"resource": resource, "name": name, "apiVersion": "v1"});
    if !namespace.is_empty() {
        o["namespace"] = json!(namespace);
    }
    o
}

fn cm(name: &str, rv: &str, data: Value) -> Value {
    json!({"kind": "ConfigMap", "apiVersion": "v1",
           "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"), "resourceVersion": rv},
           "data": data})
}

fn create_cm(id: &str, name: &str, rv: &str, data: Value) -> Ev {
    let mut req = cm(name, "", data.clone());
    req["metadata"] = json!({"name": name, "namespace": "shop", "creationTimestamp": null});
    Ev::new(
        id,
        "create",
        "/api/v1/namespaces/shop/configmaps?fieldManager=kubectl-create",
        oref("configmaps", "shop", ""),
    )
    .code(201)
    .req(req)
    .resp(cm(name, rv, data))
}

fn patch_cm(id: &str, name: &str, uri_query: &str, body: Value) -> Ev {
    Ev::new(
        id,
        "patch",
        &format!("/api/v1/namespaces/shop/configmaps/{name}{uri_query}"),
        oref("configmaps", "shop", name),
    )
    .req(body)
}

#[test]
fn creates_take_the_request_object_and_options_from_the_uri() {
    let mut req = cm("c", "", json!({"k": "v"}));
    // What the create handler clears or sets before admission.
    req["metadata"] = json!({"name": "c", "uid": "client-set", "creationTimestamp": "2020-01-01T00:00:00Z",
                             "ownerReferences": [{"uid": "o1", "name": "a"}, {"uid": "o1", "name": "b"}]});
    let items = read(&log(&[Ev::new(
        "1",
        "create",
        "/api/v1/namespaces/shop/configmaps?fieldManager=me&fieldValidation=Strict&pretty=true",
        oref("configmaps", "shop", ""),
    )
    .code(201)
    .req(req)]));
    let r = requests(&items)[0];
    assert_eq!(r.attrs.name, "c", "the name comes from the object");
    assert_eq!(
        r.attrs.options.as_deref(),
        Some(
            &json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "me", "fieldValidation": "Strict"})
        )
    );
    assert!(!r.attrs.dry_run);
    let meta = &r.attrs.object.as_ref().unwrap()["metadata"];
    assert_eq!(meta["namespace"], "shop");
    assert_eq!(meta["creationTimestamp"], Value::Null);
    assert!(meta.get("uid").is_none());
    assert_eq!(meta["ownerReferences"], json!([{"uid": "o1", "name": "a"}]));
    let audit = r.audit.as_ref().unwrap();
    assert_eq!(audit.verb, "create");
    assert_eq!(audit.response_code, Some(201));
    assert_eq!(audit.source_ips, ["10.0.0.1"]);
    assert_eq!(
        audit.user_agent.as_deref(),
        Some("kubectl/v1.32.0 (linux/amd64) kubernetes/abc")
    );
    assert_eq!(
        audit.stage_timestamp.as_deref(),
        Some("2025-01-01T00:00:00.100000Z")
    );
    assert_eq!(r.namespace, NamespaceState::Unknown);
}

#[test]
fn subresource_creates_keep_what_their_handler_keeps() {
    let pod_sub = |sub: &str| json!({"resource": "pods", "namespace": "shop", "name": "p", "apiVersion": "v1", "subresource": sub});
    let body = |kind: &str, api: &str| json!({"kind": kind, "apiVersion": api, "metadata": {"name": "p", "uid": "pod-uid", "creationTimestamp": "2025-01-01T00:00:00Z"}});
    let items = read(&log(&[
        Ev::new(
            "1",
            "create",
            "/api/v1/namespaces/shop/pods/p/binding",
            pod_sub("binding"),
        )
        .code(201)
        .req(body("Binding", "v1")),
        Ev::new(
            "2",
            "create",
            "/api/v1/namespaces/shop/pods/p/eviction",
            pod_sub("eviction"),
        )
        .code(201)
        .req(body("Eviction", "policy/v1")),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 2, "{items:#?}");
    // A binding takes the pod's UID as a precondition: the handler keeps it.
    assert_eq!(
        r[0].attrs.kind,
        GroupVersionKind::new("", "v1", "Binding").into()
    );
    assert_eq!(
        r[0].attrs.object.as_ref().unwrap()["metadata"]["uid"],
        "pod-uid"
    );
    assert_eq!(
        r[1].attrs.kind,
        GroupVersionKind::new("policy", "v1", "Eviction").into()
    );
    let meta = &r[1].attrs.object.as_ref().unwrap()["metadata"];
    assert!(meta.get("uid").is_none());
    assert_eq!(meta["creationTimestamp"], Value::Null);
    assert_eq!(meta["namespace"], "shop");
    assert!(r.iter().all(|r| r.attrs.name == "p"));
}

#[test]
fn dry_run_comes_from_the_uri_and_does_not_change_the_known_objects() {
    let items = read(&log(&[
        create_cm("1", "c", "5", json!({})).set(
            "requestURI",
            json!("/api/v1/namespaces/shop/configmaps?dryRun=All&fieldManager=kubectl-create"),
        ),
        Ev::new(
            "2",
            "update",
            "/api/v1/namespaces/shop/configmaps/c",
            oref("configmaps", "shop", "c"),
        )
        .req(cm("c", "5", json!({"k": "2"}))),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 1);
    assert!(r[0].attrs.dry_run);
    assert_eq!(
        r[0].attrs.options.as_ref().unwrap()["dryRun"],
        json!(["All"])
    );
    let nr = not_replayable(&items);
    assert!(
        nr[0]
            .message
            .starts_with("old object unknown: configmaps shop/c was not seen earlier"),
        "{}",
        nr[0].message
    );
}

#[test]
fn impersonation_gives_admission_the_impersonated_user() {
    let ev = create_cm("1", "c", "1", json!({})).set(
        "impersonatedUser",
        json!({"username": "system:serviceaccount:shop:bot", "groups": ["system:serviceaccounts"]}),
    );
    let items = read(&log(&[ev]));
    let r = requests(&items)[0];
    assert_eq!(r.attrs.user_info.username, "system:serviceaccount:shop:bot");
    assert_eq!(r.attrs.user_info.groups, ["system:serviceaccounts"]);
    assert_eq!(
        r.audit
            .as_ref()
            .unwrap()
            .impersonator
            .as_ref()
            .unwrap()
            .username,
        "alice"
    );
}

#[test]
fn updates_use_the_last_state_seen() {
    let items = read(&log(&[
        create_cm("1", "c", "5", json!({"k": "1"})),
        Ev::new(
            "2",
            "update",
            "/api/v1/namespaces/shop/configmaps/c?fieldManager=kubectl-edit",
            oref("configmaps", "shop", "c"),
        )
        .req(cm("c", "5", json!({"k": "2"})))
        .resp(cm("c", "6", json!({"k": "2"}))),
        // Based on an older version than the one seen last: the replay would not be faithful.
        Ev::new(
            "3",
            "update",
            "/api/v1/namespaces/shop/configmaps/c",
            oref("configmaps", "shop", "c"),
        )
        .req(cm("c", "5", json!({"k": "3"})))
        .code(409),
        // An update that created the object is a CREATE.
        Ev::new(
            "4",
            "update",
            "/api/v1/namespaces/shop/configmaps/n",
            oref("configmaps", "shop", "n"),
        )
        .req(cm("n", "", json!({})))
        .code(201),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 3);
    let update = r[1];
    assert_eq!(update.attrs.operation, Operation::Update);
    assert_eq!(
        update.attrs.old_object_value().cloned(),
        Some(cm("c", "5", json!({"k": "1"})))
    );
    assert_eq!(update.attrs.object.as_ref().unwrap()["data"]["k"], "2");
    assert_eq!(
        update.attrs.options.as_deref(),
        Some(
            &json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-edit"})
        )
    );
    let nr = not_replayable(&items);
    assert_eq!(nr.len(), 1);
    assert!(nr[0].message.starts_with("old object out of date: the update is based on resourceVersion 5, the last state seen of configmaps shop/c is 6"), "{}", nr[0].message);
    assert_eq!(r[2].attrs.operation, Operation::Create);
    assert_eq!(
        r[2].attrs.options.as_ref().unwrap()["kind"],
        "CreateOptions"
    );
    assert!(r[2].notes.is_empty());
}

#[test]
fn reads_teach_old_objects_and_requests_without_bodies_are_not_replayable() {
    let list = json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "30"},
                      "items": [{"metadata": {"name": "a", "namespace": "shop", "resourceVersion": "20"}, "data": {"x": "1"}},
                                {"metadata": {"name": "b", "namespace": "shop", "resourceVersion": "21"}}]});
    let items = read(&log(&[
        Ev::new(
            "1",
            "list",
            "/api/v1/namespaces/shop/configmaps",
            oref("configmaps", "shop", ""),
        )
        .resp(list),
        Ev::new(
            "2",
            "get",
            "/api/v1/namespaces/shop/configmaps/b",
            oref("configmaps", "shop", "b"),
        )
        .resp(cm("b", "25", json!({"y": "2"}))),
        Ev::new(
            "3",
            "watch",
            "/api/v1/configmaps?watch=true",
            oref("configmaps", "", ""),
        )
        .stage("ResponseStarted"),
        Ev::new(
            "4",
            "delete",
            "/api/v1/namespaces/shop/configmaps/a",
            oref("configmaps", "shop", "a"),
        ),
        Ev::new(
            "5",
            "delete",
            "/api/v1/namespaces/shop/configmaps/b",
            oref("configmaps", "shop", "b"),
        )
        .set("level", json!("Metadata")),
        Ev::new(
            "6",
            "create",
            "/api/v1/namespaces/shop/configmaps",
            oref("configmaps", "shop", "m"),
        )
        .set("level", json!("Metadata"))
        .code(201),
        Ev::new("7", "get", "/healthz", Value::Null),
        Ev::new(
            "8",
            "create",
            "/api/v1/namespaces/shop/configmaps",
            oref("configmaps", "shop", "x"),
        )
        .req(cm("x", "", json!({})))
        .set(
            "annotations",
            json!({"authorization.k8s.io/decision": "forbid"}),
        )
        .code(403),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 2, "{items:?}");
    // The list item gets the list's type meta back.
    assert_eq!(
        r[0].attrs.old_object_value().cloned(),
        Some(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "shop", "resourceVersion": "20"}, "data": {"x": "1"}})
        )
    );
    assert_eq!(
        r[0].attrs.kind,
        GroupVersionKind::new("", "v1", "ConfigMap").into()
    );
    assert_eq!(
        r[0].attrs.options.as_deref(),
        Some(&json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}))
    );
    assert!(r[0].notes.is_empty());
    assert_eq!(
        r[1].attrs.old_object.as_ref().unwrap()["metadata"]["resourceVersion"],
        "25"
    );
    assert!(
        r[1].notes[0].starts_with("DeleteOptions taken from the request URI: level Metadata"),
        "{:?}",
        r[1].notes
    );
    let nr = not_replayable(&items);
    assert_eq!(nr.len(), 1);
    assert_eq!(nr[0].field, "requestObject");
    assert!(
        nr[0]
            .message
            .starts_with("request object not recorded: level Metadata"),
        "{}",
        nr[0].message
    );
}

#[test]
fn patches_are_applied_to_the_last_state_when_their_type_is_certain() {
    let created = cm("c", "1", json!({"a": "1"}));
    let after_json = cm("c", "2", json!({"a": "1", "b": "2"}));
    let after_merge = cm("c", "3", json!({"b": "2"}));
    let items = read(&log(&[
        create_cm("1", "c", "1", json!({"a": "1"})),
        patch_cm(
            "2",
            "c",
            "?fieldManager=kubectl-patch",
            json!([{"op": "add", "path": "/data/b", "value": "2"}]),
        )
        .resp(after_json.clone()),
        patch_cm(
            "3",
            "c",
            "",
            json!({"data": {"a": null}, "metadata": {"labels": {"l": "x"}}}),
        )
        .resp(after_merge.clone()),
        patch_cm("4", "c", "", json!({"metadata": {"finalizers": ["f"]}})),
        patch_cm(
            "5",
            "c",
            "",
            json!({"data": {"$patch": "replace", "z": "1"}}),
        ),
        patch_cm(
            "6",
            "c",
            "?fieldManager=kubectl&force=true",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"z": "1"}}),
        ),
        patch_cm(
            "7",
            "c",
            "?fieldManager=ctl",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"z": "1"}}),
        ),
        patch_cm(
            "8",
            "c",
            "",
            json!([{"op": "remove", "path": "/data/missing"}]),
        )
        .code(422),
        patch_cm("9", "c", "", json!({"data": {"z": "1"}}))
            .set("level", json!("Metadata"))
            .set("requestObject", Value::Null),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 7, "{items:#?}");
    let json_patch = r[1];
    assert_eq!(json_patch.attrs.operation, Operation::Update);
    // Decoded and defaulted here as the patch handler does, and known to be; the create's
    // object is taken as the audit event has it.
    assert!(
        json_patch
            .attrs
            .object
            .as_ref()
            .unwrap()
            .is_known_defaulted()
    );
    assert!(!r[0].attrs.object.as_ref().unwrap().is_known_defaulted());
    assert_eq!(
        json_patch.attrs.old_object_value().cloned(),
        Some(created.clone())
    );
    assert_eq!(
        json_patch.attrs.object.as_ref().unwrap()["data"],
        json!({"a": "1", "b": "2"})
    );
    assert_eq!(
        json_patch.attrs.object.as_ref().unwrap()["metadata"]["resourceVersion"],
        "1"
    );
    assert_eq!(
        json_patch.attrs.options.as_deref(),
        Some(
            &json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-patch"})
        )
    );
    assert!(json_patch.notes.is_empty());
    // An object patch without lists: a merge patch and a strategic merge patch agree.
    let merge = r[2];
    assert_eq!(merge.attrs.old_object_value().cloned(), Some(after_json));
    assert_eq!(
        merge.attrs.object.as_ref().unwrap()["data"],
        json!({"b": "2"})
    );
    assert_eq!(
        merge.attrs.object.as_ref().unwrap()["metadata"]["labels"],
        json!({"l": "x"})
    );
    assert!(merge.notes.is_empty(), "{:?}", merge.notes);
    // A list the object does not have yet: both readings add it whole.
    assert_eq!(
        r[3].attrs.object.as_ref().unwrap()["metadata"]["finalizers"],
        json!(["f"])
    );
    // A $-directive is strategic merge's alone: `$patch: replace` replaces the map.
    assert_eq!(
        r[4].attrs.object.as_ref().unwrap()["data"],
        json!({"z": "1"})
    );
    // Server-side applies (`force`, or apiVersion and kind with a fieldManager): the object the
    // field manager builds, with the manager's Apply entry.
    for (apply, manager) in [(r[5], "kubectl"), (r[6], "ctl")] {
        let object = apply.attrs.object_value().unwrap();
        assert_eq!(apply.attrs.operation, Operation::Update);
        assert_eq!(object["data"]["z"], "1");
        let entries = object["metadata"]["managedFields"].as_array().unwrap();
        assert!(
            entries
                .iter()
                .any(|e| e["manager"] == manager && e["operation"] == "Apply"),
            "{entries:?}"
        );
    }
    let problems = not_replayable(&items);
    let reasons: Vec<&str> = problems
        .iter()
        .map(|p| p.message.split(':').next().unwrap())
        .collect();
    assert_eq!(reasons, ["patch does not apply", "patch not recorded"]);
}

/// Where a merge patch and a strategic merge patch differ (a list with a merge strategy), the
/// object the apiserver answered tells which the client sent; without it, neither is chosen.
#[test]
fn the_resulting_object_tells_a_strategic_merge_patch_from_a_merge_patch() {
    let mut with_finalizer = cm("c", "1", json!({"a": "1"}));
    with_finalizer["metadata"]["finalizers"] = json!(["a"]);
    let create = create_cm("1", "c", "1", json!({"a": "1"})).resp(with_finalizer.clone());
    let body = json!({"metadata": {"finalizers": ["f"]}});
    let answered = |finalizers: Value| {
        let mut o = with_finalizer.clone();
        o["metadata"]["finalizers"] = finalizers;
        o["metadata"]["resourceVersion"] = json!("2");
        o
    };
    for (response, expected, note) in [
        // Without `$setElementOrder`, strategic merge puts the patch's items first.
        (
            Some(answered(json!(["f", "a"]))),
            Some(json!(["f", "a"])),
            "read as a strategic merge patch",
        ),
        (
            Some(answered(json!(["f"]))),
            Some(json!(["f"])),
            "read as a merge patch",
        ),
        (None, None, ""),
    ] {
        let mut patch = patch_cm("2", "c", "", body.clone());
        if let Some(r) = &response {
            patch = patch.resp(r.clone());
        }
        let items = read(&log(&[create.clone(), patch]));
        let r = requests(&items);
        match expected {
            Some(finalizers) => {
                assert_eq!(r.len(), 2, "{items:#?}");
                assert_eq!(
                    r[1].attrs.object.as_ref().unwrap()["metadata"]["finalizers"],
                    finalizers
                );
                assert!(
                    r[1].notes[0].starts_with(&format!("patch type not recorded: {note}")),
                    "{:?}",
                    r[1].notes
                );
            }
            None => {
                assert_eq!(r.len(), 1);
                assert_eq!(
                    not_replayable(&items)[0].message,
                    "patch type unknown: the object patch of configmaps shop/c gives different \
                     objects as a merge patch and as a strategic merge patch, and the audit event \
                     records neither the content type nor the object that resulted (level \
                     RequestResponse)"
                );
            }
        }
    }
}

#[test]
fn custom_resources_take_merge_patches_with_lists_and_their_kind_from_objects() {
    let widget = |rv: &str, spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "shop", "resourceVersion": rv}, "spec": spec});
    let w_ref = json!({"resource": "widgets", "namespace": "shop", "name": "w", "apiGroup": "example.com", "apiVersion": "v1"});
    let items = read(&log(&[
        Ev::new(
            "1",
            "create",
            "/apis/example.com/v1/namespaces/shop/widgets",
            w_ref.clone(),
        )
        .code(201)
        .req(widget("", json!({"ports": [1]})))
        .resp(widget("7", json!({"ports": [1]}))),
        Ev::new(
            "2",
            "patch",
            "/apis/example.com/v1/namespaces/shop/widgets/w",
            w_ref.clone(),
        )
        .req(json!({"spec": {"ports": [2, 3]}}))
        .resp(widget("8", json!({"ports": [2, 3]}))),
        Ev::new(
            "3",
            "delete",
            "/apis/example.com/v1/namespaces/shop/widgets/w",
            w_ref,
        ),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 3, "{items:#?}");
    assert!(
        r.iter()
            .all(|r| r.attrs.kind == GroupVersionKind::new("example.com", "v1", "Widget").into())
    );
    assert_eq!(
        r[1].attrs.object.as_ref().unwrap()["spec"]["ports"],
        json!([2, 3])
    );
    assert!(
        r[1].notes.is_empty(),
        "custom resources have no strategic merge"
    );
    assert_eq!(
        r[2].attrs.old_object.as_ref().unwrap()["metadata"]["resourceVersion"],
        "8"
    );
}

#[test]
fn deletes_use_earlier_state_and_forget_deleted_objects() {
    let pod = |rv: &str, extra: Value| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "shop", "resourceVersion": rv},
            "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}});
        if let (Value::Object(m), Value::Object(e)) = (&mut p["metadata"], extra) {
            m.extend(e);
        }
        p
    };
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"name": "c", "kind": "configmaps"}});
    let pod_ref = oref("pods", "shop", "p");
    let items = read(&log(&[
        create_cm("1", "c", "1", json!({})),
        Ev::new("2", "delete", "/api/v1/namespaces/shop/configmaps/c", oref("configmaps", "shop", "c"))
            .req(json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "propagationPolicy": "Foreground"}))
            .resp(status.clone()),
        Ev::new("3", "delete", "/api/v1/namespaces/shop/configmaps/c", oref("configmaps", "shop", "c")).code(404),
        Ev::new("4", "get", "/api/v1/namespaces/shop/pods/p", pod_ref.clone()).resp(pod("10", json!({}))),
        // A user's delete: the pod's grace period goes into the options, the pod stays, terminating.
        Ev::new("5", "delete", "/api/v1/namespaces/shop/pods/p", pod_ref.clone())
            .resp(pod("11", json!({"deletionTimestamp": "2025-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}))),
        // The same again: the deletion is pending, the apiserver answers without admission.
        Ev::new("6", "delete", "/api/v1/namespaces/shop/pods/p", pod_ref.clone())
            .resp(pod("11", json!({"deletionTimestamp": "2025-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}))),
        // The kubelet's final delete.
        Ev::new("7", "delete", "/api/v1/namespaces/shop/pods/p", pod_ref)
            .req(json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": "x"}})),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 4, "{items:#?}");
    assert_eq!(r[1].attrs.operation, Operation::Delete);
    assert_eq!(r[1].attrs.object, None);
    assert_eq!(
        r[1].attrs.old_object_value().cloned(),
        Some(cm("c", "1", json!({})))
    );
    assert_eq!(
        r[1].attrs.options.as_deref(),
        Some(
            &json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "propagationPolicy": "Foreground"})
        )
    );
    assert_eq!(
        r[2].attrs.options.as_ref().unwrap()["gracePeriodSeconds"],
        30
    );
    assert_eq!(
        r[2].attrs.old_object.as_ref().unwrap()["metadata"]["resourceVersion"],
        "10"
    );
    assert_eq!(
        r[3].attrs.options.as_deref(),
        Some(
            &json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "gracePeriodSeconds": 0, "preconditions": {"uid": "x"}})
        )
    );
    assert_eq!(
        r[3].attrs.old_object.as_ref().unwrap()["metadata"]["resourceVersion"],
        "11"
    );
    let nr = not_replayable(&items);
    assert_eq!(nr.len(), 2);
    assert!(
        nr[0]
            .message
            .starts_with("old object unknown: configmaps shop/c"),
        "{}",
        nr[0].message
    );
    assert!(
        nr[1]
            .message
            .starts_with("no admission: the pod's graceful deletion is already pending"),
        "{}",
        nr[1].message
    );
}

#[test]
fn deletecollection_is_one_delete_per_item() {
    let deleted = json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {},
        "items": [cm("a", "1", json!({})), cm("b", "2", json!({})), cm("z", "3", json!({}))]});
    let items = read(&log(&[
        create_cm("1", "a", "1", json!({})),
        create_cm("2", "b", "2", json!({})),
        Ev::new(
            "3",
            "deletecollection",
            "/api/v1/namespaces/shop/configmaps?labelSelector=x%3Dy",
            oref("configmaps", "shop", ""),
        )
        .resp(deleted),
        Ev::new(
            "4",
            "delete",
            "/api/v1/namespaces/shop/configmaps/a",
            oref("configmaps", "shop", "a"),
        ),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 4, "{items:#?}");
    assert!(r[2..].iter().all(|r| r.attrs.operation == Operation::Delete
        && r.attrs.name.is_empty()
        && r.uid == "3"));
    assert_eq!(
        r[2].attrs.old_object.as_ref().unwrap()["metadata"]["name"],
        "a"
    );
    assert_eq!(
        r[3].attrs.old_object.as_ref().unwrap()["metadata"]["name"],
        "b"
    );
    let nr = not_replayable(&items);
    assert_eq!(nr.len(), 2, "z was never seen, a is gone");
    assert!(nr[0].message.contains("item shop/z"));
    assert!(
        nr[1]
            .message
            .starts_with("old object unknown: configmaps shop/a")
    );
}

#[test]
fn a_request_sees_the_namespace_labels_of_its_time() {
    let ns = |rv: &str, team: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "resourceVersion": rv, "labels": {"kubernetes.io/metadata.name": "shop", "team": team}}});
    let ns_ref = oref("namespaces", "", "shop");
    let mut update_ref = ns_ref.clone();
    update_ref["namespace"] = json!("shop");
    let items = read(&log(&[
        Ev::new("1", "create", "/api/v1/namespaces", ns_ref.clone())
            .code(201)
            .req(ns("", "a"))
            .resp(ns("1", "a")),
        create_cm("2", "c1", "2", json!({})),
        Ev::new("3", "patch", "/api/v1/namespaces/shop", update_ref.clone())
            .req(json!({"metadata": {"labels": {"team": "b"}}}))
            .resp(ns("3", "b")),
        create_cm("4", "c2", "4", json!({})),
        Ev::new("5", "delete", "/api/v1/namespaces/shop", update_ref)
            .resp(json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
        create_cm("6", "c3", "6", json!({})).code(404),
    ]));
    let r = requests(&items);
    assert_eq!(r.len(), 6, "{items:#?}");
    assert_eq!(r[0].namespace, NamespaceState::NotApplicable);
    assert_eq!(
        (r[0].attrs.namespace.as_str(), r[0].attrs.name.as_str()),
        ("shop", "shop")
    );
    assert_eq!(
        r[1].namespace,
        NamespaceState::Known(shared_labels(&[
            ("kubernetes.io/metadata.name", "shop"),
            ("team", "a")
        ]))
    );
    assert_eq!(
        r[2].attrs.old_object.as_ref().unwrap()["metadata"]["labels"]["team"],
        "a"
    );
    assert_eq!(
        r[3].namespace,
        NamespaceState::Known(shared_labels(&[
            ("kubernetes.io/metadata.name", "shop"),
            ("team", "b")
        ]))
    );
    assert_eq!(r[4].attrs.operation, Operation::Delete);
    assert_eq!(r[5].namespace, NamespaceState::Unknown);
}

#[test]
fn connect_requests_and_requests_whose_final_stage_never_came() {
    let exec_ref = json!({"resource": "pods", "namespace": "shop", "name": "web", "apiVersion": "v1", "subresource": "exec"});
    let exec_uri = "/api/v1/namespaces/shop/pods/web/exec?command=sh&command=-c&command=ls%20-l&container=app&stdin=true&stdout=true&tty=false";
    let proxy_ref = json!({"resource": "services", "namespace": "shop", "name": "api:http", "apiVersion": "v1", "subresource": "proxy"});
    let items = read(&log(&[
        // kubectl exec over websockets: a GET, stages RequestReceived, ResponseStarted and no end.
        Ev::new("1", "get", exec_uri, exec_ref.clone()).stage("RequestReceived"),
        Ev::new("1", "get", exec_uri, exec_ref.clone())
            .stage("ResponseStarted")
            .code(101),
        // SPDY exec is a POST (verb create), complete.
        Ev::new(
            "2",
            "create",
            "/api/v1/namespaces/shop/pods/web/exec?command=date&stdout=true",
            exec_ref,
        ),
        Ev::new(
            "3",
            "get",
            "/api/v1/namespaces/shop/services/api:http/proxy/metrics/",
            proxy_ref,
        ),
        // A create whose response was never logged.
        Ev::new(
            "4",
            "create",
            "/api/v1/namespaces/shop/configmaps",
            oref("configmaps", "shop", "c"),
        )
        .stage("RequestReceived"),
        Ev::new("5", "list", "/api/v1/pods", oref("pods", "", "")).stage("RequestReceived"),
    ]));
    let r = requests(&items);
    // In input order: the exec whose final stage never came is replayed by finish(), at the
    // line of its latest stage, before the requests read after it.
    let uids: Vec<&str> = r.iter().map(|r| r.uid.as_str()).collect();
    assert_eq!(uids, ["1", "2", "3"], "{items:#?}");
    let (exec, r) = (r[0], &r[1..]);
    assert_eq!(r[0].uid, "2");
    assert_eq!(r[0].attrs.operation, Operation::Connect);
    assert_eq!(
        r[0].attrs.kind,
        GroupVersionKind::new("", "v1", "PodExecOptions").into()
    );
    assert_eq!(
        r[0].attrs.object_value().cloned(),
        Some(
            json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdout": true, "command": ["date"]})
        )
    );
    assert_eq!(
        (
            r[0].attrs.options.as_ref(),
            r[0].attrs.old_object.as_ref(),
            r[0].attrs.dry_run
        ),
        (None, None, false)
    );
    assert_eq!(
        r[1].attrs.object_value().cloned(),
        Some(json!({"kind": "ServiceProxyOptions", "apiVersion": "v1", "path": "/metrics/"}))
    );
    assert_eq!(r[1].attrs.name, "api:http");
    // Emitted by finish(), from the latest stage seen.
    assert_eq!(exec.source.index, 2);
    assert_eq!(
        exec.attrs.object_value().cloned(),
        Some(
            json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdin": true, "stdout": true, "container": "app", "command": ["sh", "-c", "ls -l"]})
        )
    );
    assert!(
        exec.notes[0].starts_with(
            "the final stage of this request never arrived: replayed from its ResponseStarted event"
        ),
        "{:?}",
        exec.notes
    );
    let nr = not_replayable(&items);
    assert_eq!(nr.len(), 1);
    assert!(
        nr[0]
            .message
            .starts_with("request object not recorded: stage RequestReceived"),
        "{}",
        nr[0].message
    );
}

#[test]
fn an_event_list_document_is_read_item_by_item() {
    let items = read_fixture("eventlist.json", ClusterState::new());
    let r = requests(&items);
    assert_eq!(r.len(), 2, "{items:#?}");
    assert_eq!(
        (r[0].source.index, r[0].source.unit),
        (1, IndexUnit::Document)
    );
    assert_eq!(r[0].source.audit_id.as_deref(), Some("e1"));
    assert_eq!(
        r[0].attrs.options.as_ref().unwrap()["fieldManager"],
        "kubectl-create"
    );
    assert_eq!(r[1].attrs.operation, Operation::Update);
    assert_eq!(
        r[1].attrs.old_object.as_ref().unwrap()["metadata"]["resourceVersion"],
        "10"
    );
    assert_eq!(items.len(), 2);
}

#[test]
fn a_log_split_over_files_is_read_as_one() {
    let mut reader = Reader::new(ClusterState::new());
    let mut items = read_with(
        &mut reader,
        "audit.log.1",
        &log(&[create_cm("1", "c", "1", json!({}))]),
    );
    let first = Ev::new(
        "2",
        "update",
        "/api/v1/namespaces/shop/configmaps/c",
        oref("configmaps", "shop", "c"),
    )
    .req(cm("c", "1", json!({"k": "v"})));
    items.extend(read_with(
        &mut reader,
        "audit.log",
        &log(&[first.clone().stage("RequestReceived")]),
    ));
    items.extend(read_with(&mut reader, "audit.log.next", &log(&[first])));
    reader.finish(&mut |i| items.push(i));
    let r = requests(&items);
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].source.file, "audit.log.next");
    assert!(r[1].attrs.old_object.is_some());
}

// ---------------------------------------------------------------------------------------------
// --cluster

#[test]
fn cluster_files_give_namespaces_old_objects_and_custom_resources() {
    let (cluster, problems) = ClusterState::load(&[PathBuf::from(format!("{FIXTURES}/cluster"))]);
    let mut seen: Vec<String> = problems
        .iter()
        .map(|p| {
            let file = p.source.file.rsplit('/').next().unwrap().to_string();
            format!("{file} {}: {}", p.source.index, p.field)
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "broken.yaml 1: ",
            "configmaps.json 1: items[1].metadata.namespace",
            "crd.yml 2: kind"
        ],
        "{problems:#?}"
    );
    assert!(problems.iter().any(|p| {
        p.message
            .contains("no resource known for example.org/v1 Gadget")
    }));
    assert_eq!(
        cluster.namespace_labels("shop"),
        Some(&labels(&[
            ("env", "prod"),
            ("kubernetes.io/metadata.name", "shop"),
            ("team", "a")
        ]))
    );
    assert_eq!(
        cluster.namespace_labels("quiet"),
        Some(&labels(&[("kubernetes.io/metadata.name", "quiet")]))
    );
    assert_eq!(cluster.namespace_labels("other"), None);
    assert_eq!(cluster.custom_resources()[0].plural, "widgets");
    assert_eq!(
        cluster.object("", "configmaps", "shop", "settings"),
        Some(
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "settings", "namespace": "shop", "resourceVersion": "42"}, "data": {"mode": "cluster"}})
        )
    );
    assert!(cluster.object("", "secrets", "shop", "token").is_some());
    assert!(
        cluster
            .object("example.com", "widgets", "shop", "w1")
            .is_some()
    );
    assert_eq!(
        cluster.len(),
        6,
        "2 namespaces, a secret, a widget, a configmap and the CRD"
    );

    let w_ref = json!({"resource": "widgets", "namespace": "shop", "name": "w1", "apiGroup": "example.com", "apiVersion": "v1"});
    let items = read_in(
        cluster,
        &log(&[
            Ev::new(
                "1",
                "update",
                "/api/v1/namespaces/shop/configmaps/settings",
                oref("configmaps", "shop", "settings"),
            )
            .req(cm("settings", "42", json!({"mode": "new"}))),
            Ev::new(
                "2",
                "delete",
                "/apis/example.com/v1/namespaces/shop/widgets/w1",
                w_ref,
            ),
        ]),
    );
    let r = requests(&items);
    assert_eq!(r.len(), 2, "{items:#?}");
    assert_eq!(
        r[0].attrs.old_object.as_ref().unwrap()["data"]["mode"],
        "cluster"
    );
    assert_eq!(
        r[0].namespace,
        NamespaceState::Known(shared_labels(&[
            ("env", "prod"),
            ("kubernetes.io/metadata.name", "shop"),
            ("team", "a")
        ]))
    );
    assert_eq!(
        r[1].attrs.kind,
        GroupVersionKind::new("example.com", "v1", "Widget").into()
    );
}

/// A stored object of another version of the resource is read in the request's version,
/// converted as the apiserver's scheme converts it (autoscaling/v1 → v2 here: a v1 HPA without a
/// CPU target has the default one in v2); a version whose conversion is not modelled (a custom
/// resource's) is not replayable.
#[test]
fn cluster_objects_at_another_version_are_converted() {
    let mut cluster = ClusterState::new();
    cluster
        .insert_object(&json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h", "namespace": "shop"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}))
        .unwrap();
    assert!(
        cluster
            .insert_object(
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
            )
            .is_err()
    );
    // A delete through v2 of what the cluster holds.
    let delete =
        |cluster, path, oref| read_in(cluster, &log(&[Ev::new("1", "delete", path, oref)]));
    let hpa_ref = json!({"resource": "horizontalpodautoscalers", "namespace": "shop", "name": "h", "apiGroup": "autoscaling", "apiVersion": "v2"});
    let hpas = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/h";
    let items = delete(cluster, hpas, hpa_ref);
    let r = requests(&items);
    assert_eq!(r.len(), 1, "{items:#?}");
    let old = r[0].attrs.old_object_value().unwrap();
    assert_eq!(old["apiVersion"], "autoscaling/v2");
    assert_eq!(
        old["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );

    let dir = std::env::temp_dir().join(format!("hookscope-versions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("widgets.yaml");
    std::fs::write(
        &file,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: widgets, kind: Widget}\n  versions:\n  - {name: v1, served: true, storage: true}\n  - {name: v2, served: true, storage: false}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: shop}\n",
    )
    .unwrap();
    let (cluster, problems) = ClusterState::load(&[file]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let w_ref = json!({"resource": "widgets", "namespace": "shop", "name": "w", "apiGroup": "example.com", "apiVersion": "v2"});
    let items = delete(
        cluster,
        "/apis/example.com/v2/namespaces/shop/widgets/w",
        w_ref,
    );
    let nr = not_replayable(&items);
    assert!(
        nr[0]
            .message
            .contains("is known only as example.com/v1, the request is for example.com/v2"),
        "{}",
        nr[0].message
    );
}

// ---------------------------------------------------------------------------------------------
// Garbage

#[test]
fn a_yaml_alias_bomb_is_one_invalid_document() {
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (prev, name) in ('a'..='k').zip('b'..='l') {
        let refs = vec![format!("*{prev}"); 10].join(", ");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    text.push_str("---\n");
    text.push_str(&std::fs::read_to_string(format!("{FIXTURES}/reviews-v1beta1.yaml")).unwrap());
    let items = read(&text);
    let bad = invalid(&items);
    assert_eq!(bad.len(), 1);
    assert!(
        bad[0].message.starts_with("invalid YAML: ") && bad[0].message.contains("alias bomb"),
        "{}",
        bad[0].message
    );
    assert!(!bad[0].message.contains('\n'));
    assert_eq!(requests(&items).len(), 3, "the documents after it are read");
}

fn jsonish_line() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just(r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","#.to_string()),
        Just(r#""stage":"ResponseComplete","#.to_string()),
        Just(r#""verb":"patch","#.to_string()),
        Just(r#""verb":"delete","#.to_string()),
        Just(r#""auditID":"x","#.to_string()),
        Just(r#""objectRef":{"resource":"pods","namespace":"a","name":"b","apiVersion":"v1","subresource":"exec"},"#.to_string()),
        Just(r#""requestObject":[{"op":"add","path":"/a","value":1}],"#.to_string()),
        Just(r#""requestObject":{"$patch":"x"},"#.to_string()),
        Just(r#""responseObject":{"kind":"PodList","items":[{"metadata":{"name":"b"}}]},"#.to_string()),
        Just(r#""responseStatus":{"code":200},"#.to_string()),
        Just(r#""requestURI":"/api/v1/x?dryRun=All&gracePeriodSeconds=-1","#.to_string()),
        Just(r#""kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"operation":"CREATE"},"#.to_string()),
        Just(r#""items":[{},null,1],"#.to_string()),
        Just("}".to_string()),
        Just("]".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        "[ -~]{0,12}",
    ];
    prop::collection::vec(fragment, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any bytes: an item or an error, never a panic.
    #[test]
    fn garbage_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let mut reader = Reader::new(ClusterState::new());
        let _ = reader.read("fuzz", &mut bytes.as_slice(), &mut |_| {});
        reader.finish(&mut |_| {});
    }

    /// Lines built from audit-event fragments, in every format the reader detects.
    #[test]
    fn garbage_lines_never_panic(lines in prop::collection::vec(jsonish_line(), 1..8), lead in 0usize..4) {
        let body = lines.join("\n");
        let text = match lead {
            0 => body,
            1 => format!("[{body}"),
            2 => format!("{{\n{body}"),
            _ => format!("---\n{body}"),
        };
        let mut reader = Reader::new(ClusterState::new());
        let mut n = 0;
        let _ = reader.read("fuzz", &mut text.as_bytes(), &mut |_| n += 1);
        reader.finish(&mut |_| n += 1);
    }

    /// Real events cut or damaged anywhere: the other lines are still read.
    #[test]
    fn damaged_real_lines_never_hide_the_others(cut in 0usize..4000, flip in 0usize..4000, byte in any::<u8>()) {
        let log = std::fs::read_to_string(format!("{ORACLE}/audit.log")).unwrap();
        let lines: Vec<&str> = log.lines().skip(885).take(12).collect();
        let mut damaged: Vec<Vec<u8>> = lines.iter().map(|l| l.as_bytes().to_vec()).collect();
        let victim = 5;
        let len = damaged[victim].len();
        damaged[victim].truncate(cut % len.max(1));
        if let Some(b) = damaged[victim].get_mut(flip % len.max(1)) {
            *b = byte;
        }
        let mut text = Vec::new();
        for l in &damaged {
            text.extend_from_slice(l);
            text.push(b'\n');
        }
        let mut reader = Reader::new(ClusterState::new());
        let mut items = Vec::new();
        let _ = reader.read("fuzz", &mut text.as_slice(), &mut |i| items.push(i));
        reader.finish(&mut |i| items.push(i));
        let intact = requests(&items).iter().filter(|r| r.source.index != victim + 1).count();
        let whole = read(&lines.join("\n"));
        let expected = requests(&whole).iter().filter(|r| r.source.index != victim + 1).count();
        prop_assert_eq!(intact, expected);
    }
}

/// A `kind: List` of `n` Pods in YAML as `kubectl get pods -o yaml` writes it, each with the
/// labels, annotations, containers, probes and volumes of a real Pod (about 150 nodes).
fn pod_list_yaml(n: usize) -> String {
    let mut out =
        String::from("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n");
    for i in 0..n {
        out.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: web-{i}\n    namespace: shop\n    uid: 00000000-0000-4000-8000-{i:012}\n    resourceVersion: \"{i}\"\n    labels:\n      app: web\n      pod-template-hash: 5d4f8c7b9\n      tier: frontend\n    annotations:\n      kubectl.kubernetes.io/restartedAt: \"2024-01-01T00:00:00Z\"\n      prometheus.io/scrape: \"true\"\n    ownerReferences:\n    - apiVersion: apps/v1\n      kind: ReplicaSet\n      name: web-5d4f8c7b9\n      uid: 11111111-0000-4000-8000-000000000000\n      controller: true\n      blockOwnerDeletion: true\n  spec:\n    serviceAccountName: web\n    nodeName: node-{}\n    containers:\n    - name: web\n      image: registry.example.com/web:1.2.3\n      ports:\n      - {{containerPort: 8080, name: http, protocol: TCP}}\n      env:\n      - {{name: MODE, value: production}}\n      - {{name: POD_NAME, valueFrom: {{fieldRef: {{apiVersion: v1, fieldPath: metadata.name}}}}}}\n      resources:\n        limits: {{cpu: 500m, memory: 256Mi}}\n        requests: {{cpu: 100m, memory: 128Mi}}\n      readinessProbe:\n        httpGet: {{path: /healthz, port: http, scheme: HTTP}}\n        periodSeconds: 10\n        timeoutSeconds: 1\n      volumeMounts:\n      - {{mountPath: /var/run/secrets/kubernetes.io/serviceaccount, name: kube-api-access, readOnly: true}}\n    volumes:\n    - name: kube-api-access\n      projected:\n        defaultMode: 420\n        sources:\n        - serviceAccountToken: {{expirationSeconds: 3607, path: token}}\n        - configMap:\n            name: kube-root-ca.crt\n            items:\n            - {{key: ca.crt, path: ca.crt}}\n    tolerations:\n    - {{effect: NoExecute, key: node.kubernetes.io/not-ready, operator: Exists, tolerationSeconds: 300}}\n    - {{effect: NoExecute, key: node.kubernetes.io/unreachable, operator: Exists, tolerationSeconds: 300}}\n  status:\n    phase: Running\n    podIP: 10.0.{}.{}\n    conditions:\n    - {{type: Ready, status: \"True\"}}\n    - {{type: ContainersReady, status: \"True\"}}\n",
            i % 7,
            i / 250,
            i % 250
        ));
    }
    out
}

#[test]
fn a_cluster_list_of_2000_pods_in_yaml_loads_whole() {
    let dir = std::env::temp_dir().join(format!("hookscope-pods-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pods.yaml");
    std::fs::write(&path, pod_list_yaml(2000)).unwrap();
    let (cluster, problems) = ClusterState::load(std::slice::from_ref(&path));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(problems, [], "every Pod is read");
    assert_eq!(cluster.len(), 2000);
}

#[test]
fn json_nested_deeper_than_the_apiserver_reads_says_so_where_it_is() {
    // An object one level deeper than kube-apiserver decodes a body (10,000 levels).
    let levels = hookscope::json::MAX_DEPTH + 1;
    let deep = format!("{}1{}", r#"{"k":"#.repeat(levels), "}".repeat(levels));
    let head = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":"#;
    let line = format!("{head}{deep}}}}}");
    let items = read(&format!("\n{line}\n"));
    let bad = invalid(&items);
    assert_eq!(bad.len(), 1, "{items:?}");
    // Go's JSON scanner's words, at the brace that opens level 10,001 of the object.
    let column = head.len() + r#"{"k":"#.len() * (levels - 1) + 1;
    assert_eq!(
        bad[0].message,
        format!(
            "invalid JSON: invalid character '{{' exceeded max depth at line 2 column {column}"
        )
    );
}
