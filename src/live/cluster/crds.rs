//! What the CustomResourceDefinition watcher has seen: the definitions the replays type custom
//! resources with (their kinds, schemas, defaults, scale and server-side apply), as `--cluster`
//! files give them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// The cluster's CustomResourceDefinitions as last listed and watched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CrdSet {
    /// Every definition, by name, as the server sent it.
    pub objects: Arc<BTreeMap<String, Value>>,
    /// Whether the watcher has completed its first list.
    pub synced: bool,
}

/// The definitions known, and a list in progress.
#[derive(Debug, Default)]
pub(crate) struct CrdStore {
    objects: BTreeMap<String, Value>,
    relisting: Option<BTreeMap<String, Value>>,
    synced: bool,
}

fn name(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The definition without what changes on every write and says nothing of its types.
fn content(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    if let Some(map) = copy.as_object_mut() {
        map.remove("status");
        map.insert(
            "apiVersion".into(),
            Value::String("apiextensions.k8s.io/v1".into()),
        );
        map.insert(
            "kind".into(),
            Value::String("CustomResourceDefinition".into()),
        );
    }
    copy
}

impl super::Listed for CrdStore {
    /// A list starts (again).
    fn begin_list(&mut self) {
        self.relisting = Some(BTreeMap::new());
    }

    /// One definition of the list in progress.
    fn listed(&mut self, object: &Value) {
        self.relisting
            .get_or_insert_with(BTreeMap::new)
            .insert(name(object), content(object));
    }

    /// The list is complete; true when anything differs from what was known.
    fn end_list(&mut self) -> bool {
        let listed = self.relisting.take().unwrap_or_default();
        let changed = !self.synced || listed != self.objects;
        self.objects = listed;
        self.synced = true;
        changed
    }

    /// A definition was added or modified; true when it changed.
    fn applied(&mut self, object: &Value) -> bool {
        let c = content(object);
        self.objects.insert(name(object), c.clone()) != Some(c)
    }

    /// A definition was deleted; true when it was known.
    fn deleted(&mut self, object: &Value) -> bool {
        self.objects.remove(&name(object)).is_some()
    }
}

impl CrdStore {
    /// The definitions as the console's replays take them.
    pub(crate) fn set(&self) -> CrdSet {
        CrdSet {
            objects: Arc::new(self.objects.clone()),
            synced: self.synced,
        }
    }
}
