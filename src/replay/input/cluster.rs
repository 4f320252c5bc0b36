//! `--cluster` files: Kubernetes objects the dispatcher may look up. Namespaces give labels for
//! `namespaceSelector`; every object can be the old object of an update, patch or delete.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::KubeVersion;
use crate::registry::{CustomResourceSpec, ResourceRegistry, load_custom_resources};
use crate::replay::{IndexUnit, InputProblem, SourceRef};

use super::store::{self, Store};
use super::stream::YamlDocs;

/// Objects the dispatcher may look up, from `--cluster` files (and, in a [`super::Reader`],
/// learned from audit logs).
#[derive(Debug, Clone, Default)]
pub struct ClusterState {
    store: Store,
    custom_resources: Vec<CustomResourceSpec>,
}

/// Why an object could not be added to a [`ClusterState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ObjectError {
    /// The field at fault (`kind`, `metadata.namespace`, …), empty for the object as a whole.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// One object read from a file, before its resource is known.
struct Found {
    source: SourceRef,
    field: String,
    object: Value,
}

impl ClusterState {
    /// Nothing known.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads Kubernetes objects (YAML or JSON, several documents, `kind: List` and `v1 XxxList`
    /// too) from files, and from folders (their `*.yaml`, `*.yml` and `*.json` files, recursively,
    /// sorted by path). Namespaces give labels, other objects serve as old objects; the resource
    /// of a kind is the built-in one or comes from a CustomResourceDefinition among the files.
    /// Problems (unreadable files, bad documents, objects whose resource is unknown) are returned,
    /// and the rest is loaded.
    pub fn load(paths: &[PathBuf]) -> (Self, Vec<InputProblem>) {
        let mut problems = Vec::new();
        let mut found = Vec::new();
        for file in files(paths, &mut problems) {
            read_file(&file, &mut found, &mut problems);
        }
        let mut state = ClusterState::new();
        let mut resources = builtin_resources();
        for f in &found {
            if f.object.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            match serde_json::to_string(&f.object).map(|t| load_custom_resources(&t)) {
                Ok(Ok(specs)) => {
                    for spec in specs {
                        resources.insert(
                            (spec.group.clone(), spec.kind.clone()),
                            (spec.plural.clone(), spec.namespaced),
                        );
                        state.custom_resources.push(spec);
                    }
                }
                Ok(Err(e)) => problems.push(problem(f, "spec", e.to_string())),
                Err(e) => problems.push(problem(f, "", e.to_string())),
            }
        }
        for f in found {
            if let Err((field, message)) = state.add(&f.object, &resources) {
                problems.push(problem(&f, &field, message));
            }
        }
        (state, problems)
    }

    /// Labels of namespace `name`, if known.
    pub fn namespace_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.store.namespace_labels(name).map(|l| &**l)
    }

    /// Declares namespace `name` with `labels` (without a Namespace object).
    pub fn insert_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) {
        self.store.set_namespace(name, labels);
    }

    /// Adds one object (its resource is found from its `apiVersion` and `kind` among the
    /// built-in resources and the custom resources loaded so far). `Err` names the field that
    /// keeps it out.
    pub fn insert_object(&mut self, object: &Value) -> Result<(), ObjectError> {
        let mut resources = builtin_resources();
        for spec in &self.custom_resources {
            resources.insert(
                (spec.group.clone(), spec.kind.clone()),
                (spec.plural.clone(), spec.namespaced),
            );
        }
        self.add(object, &resources)
            .map_err(|(field, message)| ObjectError { field, message })
    }

    /// The object `namespace`/`name` of `group`/`resource`, if known.
    pub fn object(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        self.store
            .get(&store::key(group, resource, namespace, name))?
            .value()
    }

    /// The custom resources defined by CustomResourceDefinitions among the loaded objects.
    pub fn custom_resources(&self) -> &[CustomResourceSpec] {
        &self.custom_resources
    }

    /// The built-in resources of `version` with this cluster's custom resources: what the
    /// replay's engine and reader resolve kinds and equivalences with.
    pub fn registry(&self, version: KubeVersion) -> ResourceRegistry {
        let mut registry = ResourceRegistry::builtin(version);
        for crd in &self.custom_resources {
            registry.add_custom_resource(crd);
        }
        registry
    }

    /// Number of objects known.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// True when no object is known.
    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    pub(super) fn into_store(self) -> Store {
        self.store
    }

    fn add(&mut self, object: &Value, resources: &Resources) -> Result<(), (String, String)> {
        let field = |f: &str, m: &str| Err((f.to_string(), m.to_string()));
        let text = |key: &str| {
            object
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let Some(av) = text("apiVersion") else {
            return field("apiVersion", "missing");
        };
        let Some(kind) = text("kind") else {
            return field("kind", "missing");
        };
        let group = av.split_once('/').map_or("", |(g, _)| g);
        let Some((resource, namespaced)) = resources.get(&(group.to_string(), kind.to_string()))
        else {
            return Err((
                "kind".into(),
                format!(
                    "no resource known for {av} {kind}: not a built-in kind, and no CustomResourceDefinition for it among the files"
                ),
            ));
        };
        let text = serde_json::to_vec(object).map_err(|e| (String::new(), e.to_string()))?;
        let Some(meta) = store::meta(&text, (0, text.len())) else {
            return field("", "expected an object");
        };
        if meta.name.is_empty() {
            return field("metadata.name", "missing");
        }
        if *namespaced && meta.namespace.is_empty() {
            return field("metadata.namespace", "missing for a namespaced object");
        }
        self.store
            .put(group, resource, &text, (0, text.len()), &meta, None);
        Ok(())
    }
}

/// (group, kind) → (resource, namespaced).
type Resources = HashMap<(String, String), (String, bool)>;

fn builtin_resources() -> Resources {
    let mut out = Resources::new();
    for info in ResourceRegistry::builtin(KubeVersion::NEWEST).iter() {
        if info.subresource.is_empty() && !info.kind.kind.is_empty() {
            out.entry((info.kind.group.clone(), info.kind.kind.clone()))
                .or_insert((info.resource.resource.clone(), info.namespaced));
        }
    }
    out
}

fn problem(f: &Found, field: &str, message: String) -> InputProblem {
    let field = match (f.field.is_empty(), field.is_empty()) {
        (true, _) => field.to_string(),
        (false, true) => f.field.clone(),
        (false, false) => format!("{}.{field}", f.field),
    };
    InputProblem {
        source: f.source.clone(),
        field,
        message,
    }
}

fn file_problem(file: &Path, message: String) -> InputProblem {
    InputProblem {
        source: SourceRef {
            file: file.display().to_string(),
            index: 0,
            unit: IndexUnit::Document,
            audit_id: None,
            line: None,
        },
        field: String::new(),
        message,
    }
}

/// The files to read, folders expanded (recursively, sorted).
fn files(paths: &[PathBuf], problems: &mut Vec<InputProblem>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut found = Vec::new();
        let mut dirs = vec![p.clone()];
        while let Some(dir) = dirs.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) => {
                    problems.push(file_problem(&dir, format!("cannot read the folder: {e}")));
                    continue;
                }
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let ext = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or_default();
                if path.is_dir() {
                    dirs.push(path);
                } else if matches!(ext, "yaml" | "yml" | "json") {
                    found.push(path);
                }
            }
        }
        found.sort();
        out.extend(found);
    }
    out
}

/// Every object of one file (list items flattened) into `found`.
fn read_file(path: &Path, found: &mut Vec<Found>, problems: &mut Vec<InputProblem>) {
    let name = path.display().to_string();
    let text = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return problems.push(file_problem(path, format!("cannot read: {e}"))),
    };
    let body = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&text);
    let at = |doc: usize| SourceRef {
        file: name.clone(),
        index: doc,
        unit: IndexUnit::Document,
        audit_id: None,
        line: None,
    };
    let mut docs: Vec<(SourceRef, String, Result<Value, String>)> = Vec::new();
    if matches!(body.trim_ascii_start().first(), Some(b'{' | b'[')) {
        // Cluster files are read whole: one JSON value after another.
        let mut values = crate::json::values(body);
        let mut doc = 0;
        loop {
            doc += 1;
            match values.next() {
                None => break,
                Some(Ok(v)) => docs.push((at(doc), String::new(), Ok(v))),
                Some(Err(e)) => {
                    docs.push((at(doc), String::new(), Err(format!("invalid JSON: {e}"))));
                    break;
                }
            }
        }
    } else {
        let mut input = body;
        let mut split = YamlDocs::new(&mut input, 1);
        while let Ok(Some(doc)) = split.next_doc() {
            let v = crate::yaml::from_str::<Value>(&doc.text)
                .map_err(|e| super::yaml_error(&e, doc.first_line));
            docs.push((at(doc.doc), String::new(), v));
        }
    }
    for (source, field, value) in docs {
        match value {
            Ok(v) => flatten(v, source, field, found, problems),
            Err(message) => problems.push(InputProblem {
                source,
                field,
                message,
            }),
        }
    }
}

/// An object, or the items of a list (arrays and `kind: …List` objects), into `found`.
fn flatten(
    v: Value,
    source: SourceRef,
    field: String,
    found: &mut Vec<Found>,
    problems: &mut Vec<InputProblem>,
) {
    match v {
        Value::Null => {}
        Value::Array(items) => {
            for (i, item) in items.into_iter().enumerate() {
                flatten(
                    item,
                    source.clone(),
                    format!("{field}[{i}]"),
                    found,
                    problems,
                );
            }
        }
        Value::Object(mut m) => {
            let kind = m
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let is_list = kind.ends_with("List") && m.get("items").is_some_and(Value::is_array);
            if !is_list {
                found.push(Found {
                    source,
                    field,
                    object: Value::Object(m),
                });
                return;
            }
            let list_av = m.get("apiVersion").cloned();
            let item_kind = kind
                .strip_suffix("List")
                .filter(|k| !k.is_empty())
                .map(String::from);
            let Some(Value::Array(items)) = m.remove("items") else {
                return;
            };
            for (i, mut item) in items.into_iter().enumerate() {
                // Items of a typed list (`v1 ConfigMapList`) are written without type meta.
                if let (Value::Object(im), Some(k)) = (&mut item, &item_kind) {
                    im.entry("kind").or_insert_with(|| Value::String(k.clone()));
                    if let Some(av) = &list_av {
                        im.entry("apiVersion").or_insert_with(|| av.clone());
                    }
                }
                let f = if field.is_empty() {
                    format!("items[{i}]")
                } else {
                    format!("{field}.items[{i}]")
                };
                flatten(item, source.clone(), f, found, problems);
            }
        }
        other => problems.push(InputProblem {
            source,
            field,
            message: format!(
                "expected an object, found {}",
                crate::api::admission::go_json_type(&other)
            ),
        }),
    }
}
