//! The server-side applies of a real kube-apiserver v1.32 session (the audit log of
//! tests/fixtures/oracle-v1.32, level RequestResponse) computed again from the stored object
//! before each one and its apply configuration: the status and the `managedFields` must be what
//! the apiserver stored.

use std::collections::HashMap;

use hookscope::KubeVersion;
use hookscope::apply::{self, ManagedFields, PathElement, Request, Set};
use hookscope::schema::Schema;
use serde_json::Value;

const AUDIT_LOG: &str = include_str!("fixtures/oracle-v1.32/audit.log");

fn query(uri: &str, key: &str) -> Option<String> {
    let (_, q) = uri.split_once('?')?;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

#[test]
fn the_sessions_applies_give_what_the_apiserver_stored() {
    let schema = Schema::for_release(KubeVersion::new(32).expect("1.32"));
    // What a status subresource's strategy resets: the flowcontrol status strategies reset
    // metadata and spec.
    let mut reset = Set::new();
    reset.insert(&[PathElement::field("metadata")]);
    reset.insert(&[PathElement::field("spec")]);

    let mut stored: HashMap<(String, String), Value> = HashMap::new();
    let mut checked = 0;
    for line in AUDIT_LOG.lines() {
        let e: Value = serde_json::from_str(line).expect("audit event");
        if e["stage"] != "ResponseComplete" {
            continue;
        }
        let code = e["responseStatus"]["code"].as_i64().unwrap_or_default();
        let r = &e["objectRef"];
        let key = (
            format!(
                "{}/{}",
                r["apiGroup"].as_str().unwrap_or_default(),
                r["resource"]
            ),
            format!(
                "{}/{}",
                r["namespace"].as_str().unwrap_or_default(),
                r["name"]
            ),
        );
        let uri = e["requestURI"].as_str().unwrap_or_default();
        let verb = e["verb"].as_str().unwrap_or_default();
        let response = &e["responseObject"];
        if verb == "patch" && (200..300).contains(&code) && query(uri, "fieldManager").is_some() {
            let manager = query(uri, "fieldManager").unwrap_or_default();
            let config = &e["requestObject"];
            let group = r["apiGroup"].as_str().unwrap_or_default();
            let version = r["apiVersion"].as_str().unwrap_or_default();
            let kind = config["kind"].as_str().unwrap_or_default();
            let api_version = format!("{group}/{version}");
            let id = schema.kind(group, version, kind).expect("a built-in kind");
            let subresource = r["subresource"].as_str().unwrap_or_default();
            let expected = ManagedFields::from_object(response).expect("managedFields");
            let time = expected
                .0
                .iter()
                .find(|m| m.manager == manager && m.subresource == subresource)
                .and_then(|m| m.time.clone())
                .unwrap_or_default();
            let live = stored.get(&key).expect("the object was stored before");
            let managed = ManagedFields::from_object(live).expect("managedFields");
            let req = Request {
                manager: &manager,
                api_version: &api_version,
                kind,
                time: &time,
                force: query(uri, "force").as_deref() == Some("true"),
                subresource,
                reset_fields: (subresource == "status").then_some(&reset),
            };
            let (object, got) = apply::apply(schema, id, Some(live), config, &req, &managed)
                .unwrap_or_else(|err| panic!("{uri}: {err}"));
            assert_eq!(got, expected, "{uri}: managedFields");
            assert_eq!(
                object["metadata"]["managedFields"], response["metadata"]["managedFields"],
                "{uri}: managedFields as JSON"
            );
            assert_eq!(object["status"], response["status"], "{uri}: status");
            assert_eq!(object["spec"], response["spec"], "{uri}: spec");
            checked += 1;
        }
        if (200..300).contains(&code) && response.get("metadata").is_some() {
            if verb == "delete" {
                stored.remove(&key);
            } else if response["kind"] != "Status" {
                stored.insert(key, response.clone());
            }
        }
    }
    assert_eq!(checked, 15, "the session's server-side applies");
}
