//! Server-side apply, JSON patches and the `managedFields` of every write, as the apiserver's
//! field manager records them, over hookscope's own model of it ([`crate::apply`]), for the
//! kinds its schema knows (the admission kinds, namespaces, configmaps).

use std::time::SystemTime;

use serde_json::Value;

use crate::KubeVersion;
use crate::apply::{ApplyError, ManagedFields, Request};
use crate::schema::{Schema, TypeId};

/// The schema of the object's kind (its `apiVersion` and `kind`), if the model has it.
fn model(api_version: &str, kind: &str) -> Option<(&'static Schema, TypeId)> {
    let schema = Schema::for_release(KubeVersion::NEWEST);
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    Some((schema, schema.kind(group, version, kind)?))
}

fn text<'v>(object: &'v Value, key: &str) -> &'v str {
    object.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn request<'a>(manager: &'a str, object: &'a Value, time: &'a str, force: bool) -> Request<'a> {
    Request {
        manager,
        api_version: text(object, "apiVersion"),
        kind: text(object, "kind"),
        time,
        force,
        subresource: "",
        reset_fields: None,
    }
}

/// Sets the `managedFields` of `new`, written by `manager` as an update of `old` (None: a
/// create), as the field manager records them. False when the model does not know the kind
/// (or cannot read the objects): the caller records them its own way.
pub(crate) fn record_update(old: Option<&Value>, new: &mut Value, manager: &str) -> bool {
    let Some((schema, id)) = model(text(new, "apiVersion"), text(new, "kind")) else {
        return false;
    };
    let time = super::store::timestamp(SystemTime::now());
    let Ok(managed) = ManagedFields::for_update(old, new, "") else {
        return false;
    };
    let req = request(manager, new, &time, false);
    match crate::apply::update(schema, id, old, new, &req, &managed) {
        Ok((_, managed)) => {
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                if managed.0.is_empty() {
                    meta.remove("managedFields");
                } else {
                    meta.insert("managedFields".into(), managed.to_value());
                }
            }
            true
        }
        Err(_) => false,
    }
}

/// Server-side apply of `config` by `manager` to `existing` (None: the apply creates it): the
/// object to store, with its `managedFields`; None when the model does not know the kind.
pub(crate) fn apply(
    existing: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Option<Result<Value, ApplyError>> {
    let (schema, id) = model(text(config, "apiVersion"), text(config, "kind"))?;
    let time = super::store::timestamp(SystemTime::now());
    let req = request(manager, config, &time, force);
    let managed = match existing.map(ManagedFields::from_object).transpose() {
        Ok(m) => m.unwrap_or_default(),
        Err(e) => return Some(Err(e)),
    };
    Some(
        crate::apply::apply(schema, id, existing, config, &req, &managed).map(|(object, _)| object),
    )
}

/// A JSON patch (`application/json-patch+json`) of `existing`, as the apiserver applies it: the
/// patched object, or the apiserver's 422 message when it does not apply.
pub(crate) fn json_patch(existing: &Value, body: &[u8]) -> Result<Value, String> {
    let patch = crate::jsonpatch::decode(body).map_err(|e| e.to_string())?;
    patch.apply_to_value(existing).map_err(|e| e.to_string())
}

/// The `metav1.Status` body of a refused apply, and its HTTP code.
pub(crate) fn status_of(e: &ApplyError) -> (u16, Value) {
    let s = e.status();
    let mut v = serde_json::to_value(&s).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("kind".into(), "Status".into());
        m.insert("apiVersion".into(), "v1".into());
        m.insert("metadata".into(), Value::Object(Default::default()));
    }
    (u16::try_from(s.code).unwrap_or(500), v)
}
