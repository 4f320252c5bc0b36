//! AdmissionReview documents (`admission.k8s.io/v1` and `v1beta1`), replayed as captured. A
//! review that also carries a `response` (a tap logging both directions) is read for its
//! `request`.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::api::{GroupVersionKind, GroupVersionResource, Operation, UserInfo};
use crate::engine::Attributes;
use crate::replay::{CapturedRequest, NamespaceState, SourceRef};

use super::store::Store;

/// A field that is wrong, and why.
pub(crate) struct Bad {
    /// Path of the field (`request.operation`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> Bad {
    Bad {
        field: field.to_string(),
        message: message.into(),
    }
}

/// The request of an AdmissionReview document.
pub(crate) fn request(
    doc: Value,
    source: SourceRef,
    store: &Store,
) -> Result<CapturedRequest, (Bad, SourceRef)> {
    match attributes_and_uid(doc) {
        Ok((attrs, uid)) => Ok(CapturedRequest {
            source,
            uid,
            namespace: namespace_state(&attrs, store),
            attrs,
            audit: None,
            notes: Vec::new(),
        }),
        Err(bad) => Err((bad, source)),
    }
}

/// The request of an AdmissionReview document as the dispatcher sees it, and its uid; the
/// document's parts are moved, not copied.
fn attributes_and_uid(doc: Value) -> Result<(Attributes, String), Bad> {
    let Value::Object(mut review) = doc else {
        return Err(bad("", "expected an object"));
    };
    match review.get("apiVersion").and_then(Value::as_str) {
        Some("admission.k8s.io/v1" | "admission.k8s.io/v1beta1") => {}
        Some(other) => {
            return Err(bad(
                "apiVersion",
                format!(
                    "unsupported AdmissionReview version {other:?} (admission.k8s.io/v1 or v1beta1)"
                ),
            ));
        }
        None => return Err(bad("apiVersion", "missing")),
    }
    let mut req = match review.remove("request") {
        Some(Value::Object(r)) => r,
        Some(Value::Null) | None if review.contains_key("response") => {
            return Err(bad(
                "request",
                "missing: a response alone cannot be replayed",
            ));
        }
        Some(Value::Null) | None => return Err(bad("request", "missing")),
        Some(_) => return Err(bad("request", "expected an object")),
    };
    let req = &mut req;
    let op_text: String = required(req, "operation")?;
    let operation = Operation::parse(&op_text).ok_or_else(|| {
        bad(
            "request.operation",
            format!("unknown operation {op_text:?}"),
        )
    })?;
    let kind: GroupVersionKind = required(req, "kind")?;
    if kind.version.is_empty() || kind.kind.is_empty() {
        return Err(bad("request.kind", "needs a version and a kind"));
    }
    let resource: GroupVersionResource = required(req, "resource")?;
    if resource.version.is_empty() || resource.resource.is_empty() {
        return Err(bad("request.resource", "needs a version and a resource"));
    }
    let attrs = Attributes {
        operation,
        kind,
        resource,
        sub_resource: optional(req, "subResource")?.unwrap_or_default(),
        namespace: optional(req, "namespace")?.unwrap_or_default(),
        name: optional(req, "name")?.unwrap_or_default(),
        object: object(req, "object")?.map(Arc::new),
        old_object: object(req, "oldObject")?.map(Arc::new),
        dry_run: optional(req, "dryRun")?.unwrap_or(false),
        options: object(req, "options")?.map(Arc::new),
        user_info: Arc::new(optional::<UserInfo>(req, "userInfo")?.unwrap_or_default()),
    };
    let uid = optional(req, "uid")?.unwrap_or_default();
    Ok((attrs, uid))
}

/// Labels of the request's namespace as far as they are known: not applicable to cluster-scoped
/// requests and Namespaces themselves.
pub(crate) fn namespace_state(attrs: &Attributes, store: &Store) -> NamespaceState {
    if attrs.namespace.is_empty()
        || attrs.is_namespace_resource()
        || attrs.kind.kind == "Namespace" && attrs.kind.group.is_empty()
    {
        return NamespaceState::NotApplicable;
    }
    match store.namespace_labels(&attrs.namespace) {
        Some(labels) => NamespaceState::Known(Arc::clone(labels)),
        None => NamespaceState::Unknown,
    }
}

/// A field taken out of the request (its strings are moved, not copied).
fn optional<T: DeserializeOwned>(
    req: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<T>, Bad> {
    match req.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| bad(&format!("request.{key}"), e.to_string())),
    }
}

fn required<T: DeserializeOwned>(req: &mut Map<String, Value>, key: &str) -> Result<T, Bad> {
    optional(req, key)?.ok_or_else(|| bad(&format!("request.{key}"), "missing"))
}

/// An embedded object: an object or null, taken out of the request.
fn object(req: &mut Map<String, Value>, key: &str) -> Result<Option<Value>, Bad> {
    match req.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v)),
        Some(v) => Err(bad(
            &format!("request.{key}"),
            format!(
                "expected an object, found {}",
                crate::api::admission::go_json_type(&v)
            ),
        )),
    }
}
