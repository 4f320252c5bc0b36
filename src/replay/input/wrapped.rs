//! Documents that are not an AdmissionReview or an audit event themselves but hold or describe
//! one: the envelopes log pipelines put around audit events, bare `AdmissionRequest`s, and plain
//! manifests, which are replayed as the create `kubectl create -f` would send.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::api::meta::{UserInfo, short_eq};
use crate::registry::ResourceRegistry;

/// What a document that [`super::Reader`] did not recognise at once turned out to be.
pub(crate) enum Unwrapped {
    /// Documents inside it, each with the field path it was found at.
    Inner(Vec<(String, Vec<u8>)>),
    /// An `AdmissionRequest` outside a review: the review to read instead, and how many levels
    /// the document wraps the request's objects in (a bare request 1, `{request: …}` 2).
    Review(Value, usize),
    /// A plain manifest: the audit event of its create, as kubectl would send it, the note
    /// saying so, and whether its object was decoded into its kind's Go type and defaulted.
    Create(Vec<u8>, String, bool),
    /// Recognised, but not replayable: the field and the reason.
    Refused(Cow<'static, str>, String),
}

/// The user plain manifests are created as, unless the input says otherwise: kubeadm's
/// `kubernetes-admin`, whose client certificate carries `system:masters`.
pub fn default_manifest_user() -> UserInfo {
    UserInfo {
        username: "kubernetes-admin".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        ..UserInfo::default()
    }
}

/// The deepest a document of these shapes wraps a request body: an audit event's `requestObject`
/// in an item of `records`.
pub(crate) const MAX_WRAPPING: usize = 3;

/// What `doc` holds, if it is one of the shapes this module knows; `None` otherwise.
pub(crate) fn unwrap(
    doc: &Value,
    registry: &ResourceRegistry,
    user: &UserInfo,
    user_given: bool,
) -> Option<Unwrapped> {
    let obj = doc.as_object()?;
    // Azure diagnostic settings streamed to an Event Hub or a storage account.
    if let Some(Value::Array(records)) = obj.get("records") {
        return Some(inner_array("records", records));
    }
    // CloudWatch Logs subscription payloads (EKS).
    if let Some(Value::Array(events)) = obj.get("logEvents") {
        return Some(inner_array("logEvents", events));
    }
    // Azure diagnostic records (AKS `kube-audit`, `kube-audit-admin`): the event as a string.
    if let Some(Value::String(log)) = obj.get("properties").and_then(|p| p.get("log")) {
        return Some(Unwrapped::Inner(vec![(
            "properties.log".into(),
            log.as_bytes().to_vec(),
        )]));
    }
    // Container log lines (Docker's json-file, Fluent Bit, Fluentd) and CloudWatch exports.
    for key in ["log", "message"] {
        if let Some(Value::String(text)) = obj.get(key)
            && text.trim_start().starts_with('{')
        {
            return Some(Unwrapped::Inner(vec![(
                key.into(),
                text.as_bytes().to_vec(),
            )]));
        }
    }
    if let Some(payload) = obj.get("protoPayload") {
        return Some(gke(payload));
    }
    if is_admission_request(doc) {
        return Some(Unwrapped::Review(review_of(doc.clone()), 1));
    }
    // Wrappers policy engines' tests use: kubewarden's ValidationRequest (`request`,
    // `settings`), and reviews written without their type meta.
    if let Some(request) = obj.get("request").filter(|r| is_admission_request(r)) {
        return Some(Unwrapped::Review(review_of(request.clone()), 2));
    }
    manifest(obj, registry, user, user_given)
}

fn inner_array(field: &str, items: &[Value]) -> Unwrapped {
    Unwrapped::Inner(
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let text = match item {
                    Value::String(s) => s.as_bytes().to_vec(),
                    other => serde_json::to_vec(other).unwrap_or_default(),
                };
                (format!("{field}[{i}]"), text)
            })
            .collect(),
    )
}

/// An `AdmissionRequest`: a `uid`, an `operation` and a group/version/kind object.
fn is_admission_request(v: &Value) -> bool {
    v.get("uid").is_some_and(Value::is_string)
        && v.get("operation").is_some_and(Value::is_string)
        && v.get("kind").is_some_and(Value::is_object)
}

fn review_of(request: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// Google Cloud Audit Logs: GKE converts each event into a `LogEntry` whose `protoPayload`
/// keeps neither the audit ID and stage nor the user's groups, so the request cannot be rebuilt
/// as the apiserver saw it.
fn gke(payload: &Value) -> Unwrapped {
    let method = payload
        .get("methodName")
        .and_then(Value::as_str)
        .unwrap_or("");
    Unwrapped::Refused(
        "protoPayload".into(),
        format!(
            "a Google Cloud Audit Logs entry ({}): GKE converts audit events into such records, which keep neither the audit ID and stage nor the user's groups nor, for most methods, the request body; replay the apiserver's own audit.k8s.io events instead",
            if method.is_empty() {
                "no methodName"
            } else {
                method
            }
        ),
    )
}

/// A plain manifest with what the conversion from the internal type back to its version writes
/// that the manifest lacks: an `apps/v1` DaemonSet carries its `spec.templateGeneration` as the
/// `deprecated.daemonset.template.generation` annotation (`"0"` before the strategy sets it),
/// which the mutating webhooks see.
fn with_conversion_fields(
    obj: &Map<String, Value>,
    group: &str,
    version: &str,
    kind: &str,
) -> Value {
    const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
    let mut obj = obj.clone();
    if (group, version, kind) == ("apps", "v1", "DaemonSet")
        && let Some(Value::Object(meta)) = obj.get_mut("metadata")
    {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if annotations.is_null() {
            *annotations = Value::Object(Map::new());
        }
        if let Value::Object(annotations) = annotations {
            annotations
                .entry(TEMPLATE_GENERATION)
                .or_insert_with(|| Value::from("0"));
        }
    }
    Value::Object(obj)
}

/// The apiserver's answer to the create of a manifest its kind's Go type cannot take, a 400
/// before admission (`transformDecodeError`): a value of the wrong type (Go's decoding error),
/// else, under the strict field validation kubectl asks for, fields the type does not have (every
/// one, in the order of the body kubectl sends, its keys sorted). None when the manifest decodes,
/// or the kind has no Go type.
fn strictly_undecodable(
    registry: &ResourceRegistry,
    kind: &crate::api::GroupVersionKind,
    version: &str,
    object: &Value,
) -> Option<Unwrapped> {
    let schema = crate::schema::Schema::for_release(registry.release());
    let id = schema.kind(&kind.group, &kind.version, &kind.kind)?;
    let refused = |field: String, why: &str, error: String| {
        Unwrapped::Refused(
            field.into(),
            format!(
                "kube-apiserver refuses this create before admission (400 BadRequest{why}): {kind} in version {} cannot be handled as a {kind}: {error}",
                crate::gofmt::quote(version),
                kind = kind.kind,
            ),
        )
    };
    if let Err(e) = crate::schema::codec::normalize_in_place(schema, id, &mut object.clone()) {
        // Go names the field after its struct's type: `… Go struct field ObjectMeta.metadata.x …`.
        let field =
            e.0.split_once("Go struct field ")
                .and_then(|(_, rest)| rest.split_once(" of type"))
                .and_then(|(field, _)| field.split_once('.'))
                .map_or_else(String::new, |(_, path)| path.to_string());
        return Some(refused(field, "", e.0));
    }
    let unknown = crate::schema::codec::unknown_fields(schema, id, object);
    let first = unknown.first()?.clone();
    let fields: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {}", crate::gofmt::quote(f)))
        .collect();
    Some(refused(
        first,
        "; kubectl create -f asks for strict field validation",
        format!("strict decoding error: {}", fields.join(", ")),
    ))
}

/// A plain manifest (a `kind`, an `apiVersion` and a `metadata.name` or `generateName`): the
/// audit event of the create `kubectl create -f` sends for it.
fn manifest(
    obj: &Map<String, Value>,
    registry: &ResourceRegistry,
    user: &UserInfo,
    user_given: bool,
) -> Option<Unwrapped> {
    // The field manager stamps its entry with the time the request arrives: now.
    let received = crate::replay::audit_log::rfc3339_micros(std::time::SystemTime::now());
    let kind = obj.get("kind")?.as_str()?;
    let api_version = obj.get("apiVersion")?.as_str()?;
    let meta = obj.get("metadata")?.as_object()?;
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    let generate_name = meta.get("generateName").and_then(Value::as_str);
    if name.is_empty() && generate_name.is_none() {
        return None;
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let Some(info) = registry.iter().find(|i| {
        i.subresource.is_empty()
            && i.kind.kind == kind
            && short_eq(&i.kind.group, group)
            && i.kind.version == version
    }) else {
        return Some(Unwrapped::Refused(
            "kind".into(),
            format!(
                "{kind:?} of {api_version:?} is not a resource the modelled release serves (a custom resource needs its CustomResourceDefinition in --cluster)"
            ),
        ));
    };
    let namespace = if info.namespaced {
        meta.get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
    } else {
        ""
    };
    // The create handler decodes the body into the kind's Go type, strictly (kubectl asks for
    // `fieldValidation=Strict`), and its codec defaults it: the webhooks see the defaults, and
    // the field manager's entry owns them.
    let object = with_conversion_fields(obj, group, version, kind);
    if let Some(refused) = strictly_undecodable(registry, &info.kind, version, &object) {
        return Some(refused);
    }
    let (object, defaulted) =
        super::audit::as_decoded(registry, &info.kind, &info.resource, "", object);
    let resource = &info.resource.resource;
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let uri = if namespace.is_empty() {
        format!("{prefix}/{resource}?fieldManager=kubectl-create&fieldValidation=Strict")
    } else {
        format!(
            "{prefix}/namespaces/{namespace}/{resource}?fieldManager=kubectl-create&fieldValidation=Strict"
        )
    };
    let mut object_ref = json!({"resource": resource, "apiVersion": version});
    if !group.is_empty() {
        object_ref["apiGroup"] = json!(group);
    }
    if !namespace.is_empty() {
        object_ref["namespace"] = json!(namespace);
    }
    if !name.is_empty() {
        object_ref["name"] = json!(name);
    }
    let event = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Request",
        "auditID": "",
        "stage": "ResponseComplete",
        "requestURI": uri,
        "verb": "create",
        "user": user,
        "userAgent": "kubectl",
        "objectRef": object_ref,
        "requestObject": object,
        "requestReceivedTimestamp": received,
    });
    let who = if user_given {
        format!("as {:?}", user.username)
    } else {
        format!(
            "as {:?} (kubeadm's admin; choose another user with --as)",
            user.username
        )
    };
    let note = format!(
        "a plain manifest, replayed as the create `kubectl create -f` sends{}, {who}",
        if namespace.is_empty() {
            String::new()
        } else {
            format!(" in namespace {namespace:?}")
        }
    );
    Some(Unwrapped::Create(
        serde_json::to_vec(&event).unwrap_or_default(),
        note,
        defaulted,
    ))
}
