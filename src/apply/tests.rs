use serde_json::json;

use super::*;
use crate::KubeVersion;

fn deployment() -> (&'static Schema, TypeId) {
    let schema = Schema::for_release(KubeVersion::NEWEST);
    let id = schema.kind("apps", "v1", "Deployment").expect("Deployment");
    (schema, id)
}

fn req<'a>(manager: &'a str, time: &'a str, force: bool) -> Request<'a> {
    Request {
        manager,
        api_version: "apps/v1",
        time,
        force,
        subresource: "",
        reset_fields: None,
    }
}

fn config(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]}
            }
        }
    })
}

#[test]
fn apply_creates_then_conflicts_then_forces() {
    let (schema, id) = deployment();
    let t1 = "2024-05-01T10:00:00Z";
    let (obj, managed) = apply(
        schema,
        id,
        None,
        &config(2, "nginx:1"),
        &req("kubectl", t1, false),
        &ManagedFields::default(),
    )
    .unwrap();
    assert_eq!(obj["spec"]["replicas"], 2);
    assert_eq!(managed.0.len(), 1);
    let e = &managed.0[0];
    assert_eq!(
        (e.manager.as_str(), e.operation),
        ("kubectl", Operation::Apply)
    );
    assert_eq!(e.time.as_deref(), Some(t1));
    assert_eq!(
        e.fields.to_fields_v1_string(),
        r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}}}"#
    );

    // A controller scales it.
    let mut scaled = obj.clone();
    scaled["spec"]["replicas"] = json!(5);
    let upd = Request {
        manager: "kube-controller-manager",
        ..req("", "2024-05-01T10:01:00Z", false)
    };
    let (scaled, managed) = update(schema, id, Some(&obj), &scaled, &upd, &managed).unwrap();
    assert_eq!(managed.0.len(), 2);
    assert_eq!(managed.0[1].operation, Operation::Update);
    assert_eq!(
        managed.0[1].fields.to_fields_v1_string(),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );
    assert!(
        !managed.0[0]
            .fields
            .has(&[PathElement::field("spec"), PathElement::field("replicas")])
    );

    // Applying replicas again conflicts, in the apiserver's words.
    let err = apply(
        schema,
        id,
        Some(&scaled),
        &config(3, "nginx:1"),
        &req("kubectl", "2024-05-01T10:02:00Z", false),
        &managed,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kube-controller-manager" using apps/v1: .spec.replicas"#
    );

    // Forced, the applier takes the field back and the updater's entry goes.
    let (obj, managed) = apply(
        schema,
        id,
        Some(&scaled),
        &config(3, "nginx:2"),
        &req("kubectl", "2024-05-01T10:03:00Z", true),
        &managed,
    )
    .unwrap();
    assert_eq!(obj["spec"]["replicas"], 3);
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    assert_eq!(managed.0.len(), 1);
    assert_eq!(obj["metadata"]["managedFields"][0]["manager"], "kubectl");
}

#[test]
fn apply_removes_what_the_applier_no_longer_applies() {
    let (schema, id) = deployment();
    let mut first = config(2, "nginx:1");
    first["metadata"]["labels"]["tier"] = json!("front");
    let (obj, managed) = apply(
        schema,
        id,
        None,
        &first,
        &req("kubectl", "2024-05-01T10:00:00Z", false),
        &ManagedFields::default(),
    )
    .unwrap();
    assert_eq!(obj["metadata"]["labels"]["tier"], "front");
    let (obj, _) = apply(
        schema,
        id,
        Some(&obj),
        &config(2, "nginx:1"),
        &req("kubectl", "2024-05-01T10:01:00Z", false),
        &managed,
    )
    .unwrap();
    assert_eq!(obj["metadata"]["labels"], json!({"app": "web"}));
}

#[test]
fn apply_refuses_another_version_and_managed_fields() {
    let (schema, id) = deployment();
    let mut c = config(1, "x");
    c["apiVersion"] = json!("apps/v1beta1");
    let err = apply(
        schema,
        id,
        None,
        &c,
        &req("m", "t", false),
        &ManagedFields::default(),
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    );
}

#[test]
fn times_order_entries() {
    assert!(seconds(Some("2024-05-01T10:00:00Z")) < seconds(Some("2024-05-01T10:00:01Z")));
    assert_eq!(seconds(Some("1970-01-01T00:00:00Z")), 0);
    assert_eq!(seconds(Some("1970-01-02T01:00:00+01:00")), 86_400);
}
