//! The fake server's storage: objects, one global resourceVersion, the event history watches
//! resume from, and the open watches.

use std::collections::BTreeMap;
use std::time::SystemTime;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::{FakeError, FakeResource};

/// An event as watches deliver it.
#[derive(Debug, Clone)]
pub(crate) struct StoredEvent {
    pub(crate) resource: FakeResource,
    pub(crate) kind: &'static str,
    pub(crate) object: Value,
    pub(crate) resource_version: u64,
}

/// An open watch: the resource it watches and where its lines go.
pub(crate) struct Subscriber {
    pub(crate) resource: FakeResource,
    /// The objects of `resource` it was opened for.
    pub(crate) selection: super::serve::Selection,
    pub(crate) bookmarks: bool,
    pub(crate) lines: mpsc::UnboundedSender<Bytes>,
}

/// Who writes and how.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Write<'a> {
    /// The field manager.
    pub(crate) manager: &'a str,
    /// `Update` or `Apply`.
    pub(crate) operation: &'a str,
    /// `dryRun=All`: compute the result, store nothing.
    pub(crate) dry_run: bool,
    /// The object carries the `managedFields` to store (a server-side apply computed them).
    pub(crate) prepared: bool,
}

/// Records the write's `managedFields` on `object` (an update of `old`; None: a create): as the
/// field manager does for the kinds the model knows, else one entry per manager and operation.
fn record(old: Option<&Value>, object: &mut Value, write: Write<'_>) {
    if write.prepared {
        return;
    }
    if write.operation == "Update" && super::ssa::record_update(old, object, write.manager) {
        return;
    }
    set_managed_fields(object, write.manager, write.operation);
}

/// Everything the server stores; one lock guards it, as etcd serialises writes.
pub(crate) struct Store {
    pub(crate) resource_version: u64,
    pub(crate) objects: BTreeMap<(FakeResource, String), Value>,
    pub(crate) history: Vec<StoredEvent>,
    /// Watches (and continue tokens) from a resourceVersion below this are answered with
    /// 410 Gone, as after an etcd compaction or when the watch cache no longer holds the events.
    pub(crate) oldest_watchable: u64,
    pub(crate) subscribers: Vec<Subscriber>,
    next_uid: u64,
}

/// RFC 3339 with whole seconds, the format of `managedFields[].time` and `creationTimestamp`.
pub(crate) fn timestamp(t: SystemTime) -> String {
    let micros = crate::replay::audit_log::rfc3339_micros(t);
    format!("{}Z", micros.get(..19).unwrap_or(&micros))
}

/// One watch line: `{"type":…,"object":…}` and a newline.
pub(crate) fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object}))
        .unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    Bytes::from(line)
}

/// A BOOKMARK object: only kind, apiVersion and the resourceVersion (plus, at the end of a
/// streamed initial list, the `k8s.io/initial-events-end` annotation).
pub(crate) fn bookmark(resource: FakeResource, resource_version: u64, initial_end: bool) -> Value {
    let mut metadata =
        json!({"resourceVersion": resource_version.to_string(), "creationTimestamp": null});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": resource.kind(), "apiVersion": resource.api_version(), "metadata": metadata})
}

fn fields_v1(object: &Value) -> Value {
    let mut fields = Map::new();
    if let Some(map) = object.as_object() {
        for (key, value) in map {
            if matches!(key.as_str(), "apiVersion" | "kind" | "status") {
                continue;
            }
            let inner = if key == "metadata" {
                let mut meta = Map::new();
                for sub in ["labels", "annotations"] {
                    if let Some(entries) = value.get(sub).and_then(Value::as_object) {
                        let keys: Map<String, Value> = entries
                            .keys()
                            .map(|k| (format!("f:{k}"), json!({})))
                            .collect();
                        meta.insert(format!("f:{sub}"), Value::Object(keys));
                    }
                }
                Value::Object(meta)
            } else if key == "webhooks" {
                let hooks: Map<String, Value> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|w| w.get("name").and_then(Value::as_str))
                    .map(|n| (format!("k:{{\"name\":\"{n}\"}}"), json!({".": {}})))
                    .collect();
                Value::Object(hooks)
            } else {
                json!({})
            };
            fields.insert(format!("f:{key}"), inner);
        }
    }
    Value::Object(fields)
}

/// Records `manager` as the latest writer: its entry (one per manager and operation) moves to
/// the end with the current time.
pub(crate) fn set_managed_fields(object: &mut Value, manager: &str, operation: &str) {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(super::API_VERSION)
        .to_string();
    let entry = json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": timestamp(SystemTime::now()),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(object),
    });
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let mut entries: Vec<Value> = metadata
        .get("managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries.retain(|e| {
        !(e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some(operation))
    });
    entries.push(entry);
    metadata.insert("managedFields".into(), Value::Array(entries));
}

/// The object without the fields the server maintains, for "did anything change" comparisons.
pub(crate) fn content(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "resourceVersion",
            "managedFields",
            "generation",
            "uid",
            "creationTimestamp",
        ] {
            meta.remove(key);
        }
    }
    copy
}

impl Store {
    pub(crate) fn new() -> Store {
        Store {
            resource_version: 1,
            objects: BTreeMap::new(),
            history: Vec::new(),
            oldest_watchable: 0,
            subscribers: Vec::new(),
            next_uid: 1,
        }
    }

    fn bump(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// Stores an event, sends it to every open watch of its resource, and forgets closed watches.
    fn publish(&mut self, event: StoredEvent) {
        let line = watch_line(event.kind, &event.object);
        self.subscribers.retain(|s| {
            s.resource != event.resource
                || !s.selection.matches(&event.object)
                || s.lines.send(line.clone()).is_ok()
        });
        self.history.push(event);
    }

    /// Stores `object` at the next resourceVersion and tells the watches.
    fn commit(
        &mut self,
        resource: FakeResource,
        name: String,
        mut object: Value,
        kind: &'static str,
    ) -> Value {
        let rv = self.bump();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.objects.insert((resource, name), object.clone());
        self.publish(StoredEvent {
            resource,
            kind,
            object: object.clone(),
            resource_version: rv,
        });
        object
    }

    /// Stores `object` as a new object of `resource` (Added), or fails if the name exists.
    pub(crate) fn create(
        &mut self,
        resource: FakeResource,
        mut object: Value,
        write: Write<'_>,
    ) -> Result<Value, FakeError> {
        let name = object_name(&object)?;
        if self.objects.contains_key(&(resource, name.clone())) {
            return Err(FakeError::AlreadyExists { resource, name });
        }
        normalise(&mut object, resource);
        let uid = self.next_uid;
        self.next_uid += 1;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "uid".into(),
                json!(format!("00000000-0000-4000-8000-{uid:012x}")),
            );
            meta.insert(
                "creationTimestamp".into(),
                json!(timestamp(SystemTime::now())),
            );
            meta.insert("generation".into(), json!(1));
            if !write.prepared {
                meta.remove("managedFields");
            }
            meta.remove("resourceVersion");
        }
        record(None, &mut object, write);
        if write.dry_run {
            object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
            return Ok(object);
        }
        Ok(self.commit(resource, name, object, "ADDED"))
    }

    /// Replaces an existing object (Modified). Server-maintained metadata is kept; the
    /// generation grows when anything but metadata changed.
    pub(crate) fn update(
        &mut self,
        resource: FakeResource,
        mut object: Value,
        write: Write<'_>,
    ) -> Result<Value, FakeError> {
        let name = object_name(&object)?;
        let Some(old) = self.objects.get(&(resource, name.clone())) else {
            return Err(FakeError::NotFound { resource, name });
        };
        normalise(&mut object, resource);
        let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let spec_changed = {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("metadata");
                }
                v
            };
            strip(old) != strip(&object)
        };
        let changed = content(old) != content(&object);
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in ["uid", "creationTimestamp", "managedFields"] {
                if key == "managedFields" && write.prepared {
                    continue;
                }
                match old_meta.get(key) {
                    Some(v) => meta.insert(key.into(), v.clone()),
                    None => meta.remove(key),
                };
            }
            let generation = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            meta.insert(
                "generation".into(),
                json!(generation + i64::from(spec_changed)),
            );
            meta.insert(
                "resourceVersion".into(),
                old_meta["resourceVersion"].clone(),
            );
        }
        if write.prepared
            && content(old) == content(&object)
            && old_meta.get("managedFields") == object["metadata"].get("managedFields")
        {
            // Nothing changed, not even who owns what: nothing is written.
            return Ok(old.clone());
        }
        if !changed && write.operation == "Apply" && !write.prepared {
            let owned_by_manager = old_meta["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["manager"] == write.manager && e["operation"] == write.operation);
            if owned_by_manager {
                return Ok(object);
            }
        }
        let old = old.clone();
        record(Some(&old), &mut object, write);
        if write.dry_run {
            return Ok(object);
        }
        Ok(self.commit(resource, name, object, "MODIFIED"))
    }

    /// Removes an object (Deleted); the event carries the object at the deletion's
    /// resourceVersion, as the apiserver's does.
    pub(crate) fn delete(
        &mut self,
        resource: FakeResource,
        name: &str,
    ) -> Result<Value, FakeError> {
        let Some(mut object) = self.objects.remove(&(resource, name.to_string())) else {
            return Err(FakeError::NotFound {
                resource,
                name: name.to_string(),
            });
        };
        let rv = self.bump();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.publish(StoredEvent {
            resource,
            kind: "DELETED",
            object: object.clone(),
            resource_version: rv,
        });
        Ok(object)
    }

    /// Advances the resourceVersion as writes to other resources would.
    pub(crate) fn bump_unrelated(&mut self, writes: u64) {
        self.resource_version += writes;
    }

    /// Objects of `resource`, in key (name) order.
    pub(crate) fn list(&self, resource: FakeResource) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|((r, _), _)| *r == resource)
            .map(|(_, v)| v)
            .collect()
    }

    /// Sends a BOOKMARK with the current resourceVersion to every watch that asked for them.
    pub(crate) fn bookmark_all(&mut self) {
        let rv = self.resource_version;
        self.subscribers.retain(|s| {
            !s.bookmarks
                || s.lines
                    .send(watch_line("BOOKMARK", &bookmark(s.resource, rv, false)))
                    .is_ok()
        });
    }
}

/// The key an object is stored by: its name, or `namespace/name` for a namespaced one.
fn object_name(object: &Value) -> Result<String, FakeError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or(FakeError::MissingName)?;
    Ok(
        match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        },
    )
}

/// Sets kind and apiVersion as the server stores them; a Namespace also gets the
/// `kubernetes.io/metadata.name` label (kube-apiserver sets it on every write, since 1.21) and
/// its `kubernetes` finalizer and `Active` phase.
fn normalise(object: &mut Value, resource: FakeResource) {
    let name = object["metadata"]["name"].clone();
    if let Some(map) = object.as_object_mut() {
        map.insert("kind".into(), json!(resource.kind()));
        // A policy or binding keeps the version of its group it was written in.
        let written = map.get("apiVersion").and_then(Value::as_str);
        let policy = matches!(
            resource,
            FakeResource::ValidatingAdmissionPolicies
                | FakeResource::ValidatingAdmissionPolicyBindings
                | FakeResource::MutatingAdmissionPolicies
                | FakeResource::MutatingAdmissionPolicyBindings
        );
        let group = resource.group();
        let in_group = written.is_some_and(|v| v.split_once('/').is_some_and(|(g, _)| g == group));
        if !(policy && in_group) {
            map.insert("apiVersion".into(), json!(resource.api_version()));
        }
        map.entry("metadata").or_insert_with(|| json!({}));
    }
    if resource == FakeResource::Namespaces {
        if !object["metadata"]["labels"].is_object() {
            object["metadata"]["labels"] = json!({});
        }
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        object["spec"] = json!({"finalizers": ["kubernetes"]});
        object["status"] = json!({"phase": "Active"});
    }
}
