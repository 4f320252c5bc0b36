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
            // Byte for byte, as the audit event (Go's encoding of the stored object) has them.
            let recorded = line.find("\"responseObject\"").map(|at| &line[at..]);
            for entry in &got.0 {
                let text = entry.to_json();
                assert!(
                    recorded.is_some_and(|r| r.contains(&text)),
                    "{uri}: {text} not in the response"
                );
            }
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

/// The resources of the session whose strategy resets `status` on create and update.
const STATUS_RESET: [&str; 5] = [
    "namespaces",
    "services",
    "apiservices",
    "flowschemas",
    "prioritylevelconfigurations",
];

#[test]
fn the_sessions_creates_record_what_the_apiserver_recorded() {
    let release = KubeVersion::new(32).expect("1.32");
    let schema = Schema::for_release(release);
    let mut status = Set::new();
    status.insert(&[PathElement::field("status")]);
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in AUDIT_LOG.lines() {
        let e: Value = serde_json::from_str(line).expect("audit event");
        let code = e["responseStatus"]["code"].as_i64().unwrap_or_default();
        if e["stage"] != "ResponseComplete" || e["verb"] != "create" || !(200..300).contains(&code)
        {
            continue;
        }
        let r = &e["objectRef"];
        let uri = e["requestURI"].as_str().unwrap_or_default();
        let group = r["apiGroup"].as_str().unwrap_or_default();
        let version = r["apiVersion"].as_str().unwrap_or_default();
        let resource = r["resource"].as_str().unwrap_or_default();
        let mut new = e["requestObject"].clone();
        let kind = new["kind"].as_str().unwrap_or_default().to_string();
        let Some(id) = schema.kind(group, version, &kind) else {
            continue;
        };
        hookscope::defaulting::default_object(group, version, &kind, &mut new, release);
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        let user_agent = e["userAgent"].as_str().unwrap_or_default();
        let manager = query(uri, "fieldManager")
            .unwrap_or_else(|| user_agent.split('/').next().unwrap_or_default().into());
        let expected = ManagedFields::from_object(&e["responseObject"]).expect("managedFields");
        let time = expected
            .0
            .first()
            .and_then(|m| m.time.clone())
            .unwrap_or_default();
        let req = Request {
            manager: &manager,
            api_version: &api_version,
            kind: &kind,
            time: &time,
            force: false,
            subresource: "",
            reset_fields: STATUS_RESET.contains(&resource).then_some(&status),
        };
        let managed = ManagedFields::for_update(None, &new, "").expect("managedFields");
        let (_, got) = apply::update(schema, id, None, &new, &req, &managed)
            .unwrap_or_else(|err| panic!("{uri}: {err}"));
        let recorded = line.find("\"responseObject\"").map(|at| &line[at..]);
        if !recorded.is_some_and(|r| r.contains(&format!("\"managedFields\":{}", got.to_json()))) {
            failures.push(format!("{uri}: not byte for byte: {}", got.to_json()));
        }
        if got != expected {
            failures.push(format!(
                "{uri}:\n  expected {}\n  got      {}",
                expected.to_value(),
                got.to_value()
            ));
        }
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} creates differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // 181 creates succeed; the 20 APIServices are kube-aggregator's, not a built-in kind here.
    assert_eq!(checked, 161);
}
