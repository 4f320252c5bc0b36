//! The objects the loader knows, as their last state: from `--cluster` files and from what an
//! audit log shows (responses of successful writes, get and list responses). One entry per object,
//! kept as compact JSON text and parsed only when a request needs it as its old object; deleted
//! objects are dropped. Namespace labels are kept beside, ready for every request.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::scan::{self, Span};

/// The last known state of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    /// JSON text of the object.
    json: Vec<u8>,
    /// `apiVersion` and `kind` to add when parsing (list items are written without them).
    type_meta: Option<Box<(String, String)>>,
    /// `metadata.resourceVersion`, when it is a number.
    resource_version: Option<u64>,
    /// `apiVersion` of the stored text (or of `type_meta`).
    api_version: Box<str>,
}

impl Stored {
    /// True when `meta`/`text` is not newer than this state: older (a list that finished after
    /// a later write), or the same state again.
    fn holds(&self, meta: &Meta<'_>, text: &[u8]) -> bool {
        match (self.resource_version, meta.resource_version) {
            (Some(known), Some(seen)) => seen <= known,
            _ => *self.json == *text,
        }
    }

    /// The object as JSON.
    pub(crate) fn value(&self) -> Option<Value> {
        let mut v: Value = scan::parse(&self.json).ok()?;
        if let (Some(tm), Value::Object(m)) = (&self.type_meta, &mut v) {
            m.insert("apiVersion".into(), Value::String(tm.0.clone()));
            m.insert("kind".into(), Value::String(tm.1.clone()));
        }
        Some(v)
    }

    /// `apiVersion` (`v1`, `apps/v1`).
    pub(crate) fn api_version(&self) -> &str {
        &self.api_version
    }
}

/// The store key of an object: group, resource, namespace (empty for Namespaces themselves,
/// which the apiserver's request info files under their own name), name.
pub(crate) fn key(group: &str, resource: &str, namespace: &str, name: &str) -> String {
    let mut k = String::new();
    key_into(&mut k, group, resource, namespace, name);
    k
}

fn key_into(k: &mut String, group: &str, resource: &str, namespace: &str, name: &str) {
    let namespace = if group.is_empty() && resource == "namespaces" {
        ""
    } else {
        namespace
    };
    k.clear();
    for (i, part) in [group, resource, namespace, name].into_iter().enumerate() {
        if i > 0 {
            k.push('\u{0}');
        }
        k.push_str(part);
    }
}

/// What the metadata of an object says, found by scanning its text.
#[derive(Debug, Default)]
pub(crate) struct Meta<'a> {
    pub name: Cow<'a, str>,
    pub namespace: Cow<'a, str>,
    pub resource_version: Option<u64>,
    pub api_version: Cow<'a, str>,
    pub kind: Cow<'a, str>,
    pub deleting: bool,
    pub labels: Option<Span>,
}

/// Scans `json` (an object) for its type meta and metadata; `None` when it is not an object.
pub(crate) fn meta(json: &[u8], span: Span) -> Option<Meta<'_>> {
    // Go writes type meta and metadata first: the rest of the object need not be looked at.
    let [api_version, kind, metadata] =
        scan::find_first(json, span, [b"apiVersion", b"kind", b"metadata"]).ok()?;
    meta_of(json, api_version, kind, metadata)
}

/// [`meta`] of an item of a typed list, which Go writes without type meta: the scan stops at
/// `metadata`.
pub(crate) fn item_meta(json: &[u8], span: Span) -> Option<Meta<'_>> {
    let [metadata] = scan::find_first(json, span, [b"metadata"]).ok()?;
    meta_of(json, None, None, metadata)
}

fn meta_of(
    json: &[u8],
    api_version: Option<Span>,
    kind: Option<Span>,
    metadata: Option<Span>,
) -> Option<Meta<'_>> {
    let s = |sp: Option<Span>| sp.and_then(|x| scan::string(json, x)).unwrap_or_default();
    let mut m = Meta {
        api_version: s(api_version),
        kind: s(kind),
        ..Meta::default()
    };
    if let Some(md) = metadata {
        let [name, namespace, rv, deletion, labels] = scan::find(
            json,
            md,
            [
                b"name",
                b"namespace",
                b"resourceVersion",
                b"deletionTimestamp",
                b"labels",
            ],
        )
        .ok()?;
        m.name = s(name);
        m.namespace = s(namespace);
        m.resource_version = rv
            .and_then(|x| scan::string(json, x))
            .and_then(|v| v.parse().ok());
        m.deleting = deletion.is_some_and(|x| !scan::is_null(json, x));
        m.labels = labels.filter(|x| !scan::is_null(json, *x));
    }
    Some(m)
}

/// The labels at `span` of `json` as a map (non-string values are left out).
pub(crate) fn labels(json: &[u8], span: Option<Span>) -> BTreeMap<String, String> {
    let Some(span) = span else {
        return BTreeMap::new();
    };
    crate::json::from_slice::<BTreeMap<String, Value>>(&json[span.0..span.1])
        .map(|m| {
            m.into_iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Objects and namespace labels.
#[derive(Debug, Clone, Default)]
pub(crate) struct Store {
    objects: HashMap<String, Stored>,
    /// Shared with the requests captured while the namespace had these labels.
    namespaces: HashMap<String, Arc<BTreeMap<String, String>>>,
    /// A key being built, so that looking up allocates nothing.
    scratch: String,
    /// Counts the changes to the objects, so that what is derived from them (policy
    /// parameters) is derived again only after one.
    generation: u64,
}

impl Store {
    /// The object under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&Stored> {
        self.objects.get(key)
    }

    /// Labels of namespace `name`.
    pub(crate) fn namespace_labels(&self, name: &str) -> Option<&Arc<BTreeMap<String, String>>> {
        self.namespaces.get(name)
    }

    /// Sets the labels of namespace `name` (the shared labels stay as they are when unchanged).
    pub(crate) fn set_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) {
        match self.namespaces.get_mut(name) {
            Some(known) if **known == labels => {}
            Some(known) => *known = Arc::new(labels),
            None => {
                self.namespaces.insert(name.to_string(), Arc::new(labels));
            }
        }
    }

    /// Changes to the objects so far.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The objects whose `apiVersion` and `kind` are among `kinds`, parsed.
    pub(crate) fn objects_of_kinds(&self, kinds: &[(String, String)]) -> Vec<Value> {
        let mut out: Vec<(&String, Value)> = self
            .objects
            .iter()
            .filter(|(_, o)| kinds.iter().any(|(av, _)| **av == *o.api_version))
            .filter_map(|(k, o)| Some((k, o.value()?)))
            .filter(|(_, v)| {
                let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
                kinds.iter().any(|(_, k)| k == kind)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out.into_iter().map(|(_, v)| v).collect()
    }

    /// Number of objects known.
    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    /// Records the object at `span` of `json` (whose metadata is `meta`) under `group`/`resource`
    /// as its newest state, unless the known state has a higher `resourceVersion` (a list that
    /// finished after a later write). `type_meta` is added when parsing, for list items.
    /// Namespaces also update the namespace labels.
    pub(crate) fn put(
        &mut self,
        group: &str,
        resource: &str,
        json: &[u8],
        span: Span,
        meta: &Meta<'_>,
        type_meta: Option<(&str, &str)>,
    ) {
        if meta.name.is_empty() {
            return;
        }
        key_into(
            &mut self.scratch,
            group,
            resource,
            &meta.namespace,
            &meta.name,
        );
        let text = &json[span.0..span.1];
        self.generation += 1;
        if group.is_empty() && resource == "namespaces" {
            let known = self.objects.get(self.scratch.as_str());
            if known.is_none_or(|old| !old.holds(meta, text)) {
                let mut labels = labels(json, meta.labels);
                // The label the apiserver's defaulting gives every Namespace (since 1.21), also
                // to one written without it in a --cluster file.
                labels.insert("kubernetes.io/metadata.name".into(), meta.name.to_string());
                self.set_namespace(&meta.name, labels);
            }
        }
        let type_meta = type_meta.filter(|_| meta.api_version.is_empty());
        let api_version = type_meta.map_or(&*meta.api_version, |(av, _)| av);
        let boxed = || type_meta.map(|(av, kind)| Box::new((av.to_string(), kind.to_string())));
        match self.objects.get_mut(self.scratch.as_str()) {
            Some(old) if old.holds(meta, text) => {}
            Some(old) => {
                // The object's new state, in the buffer of its old one.
                old.json.clear();
                old.json.extend_from_slice(text);
                old.type_meta = boxed();
                old.resource_version = meta.resource_version;
                if *old.api_version != *api_version {
                    old.api_version = api_version.into();
                }
            }
            None => {
                self.objects.insert(
                    self.scratch.clone(),
                    Stored {
                        json: text.to_vec(),
                        type_meta: boxed(),
                        resource_version: meta.resource_version,
                        api_version: api_version.into(),
                    },
                );
            }
        }
    }

    /// Forgets a deleted object (and, for a Namespace, its labels).
    pub(crate) fn remove(&mut self, group: &str, resource: &str, namespace: &str, name: &str) {
        self.generation += 1;
        self.objects.remove(&key(group, resource, namespace, name));
        if group.is_empty() && resource == "namespaces" {
            self.namespaces.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &mut Store, text: &str) {
        let m = meta(text.as_bytes(), (0, text.len())).unwrap();
        store.put("", "namespaces", text.as_bytes(), (0, text.len()), &m, None);
    }

    #[test]
    fn keeps_the_newest_state() {
        let mut s = Store::default();
        put(
            &mut s,
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","resourceVersion":"5","labels":{"x":"1"}}}"#,
        );
        put(
            &mut s,
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","resourceVersion":"3","labels":{"x":"0"}}}"#,
        );
        assert_eq!(s.namespace_labels("a").unwrap()["x"], "1");
        put(
            &mut s,
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","resourceVersion":"9"}}"#,
        );
        let labels = s.namespace_labels("a").unwrap();
        assert_eq!(labels.len(), 1);
        assert_eq!(labels["kubernetes.io/metadata.name"], "a");
        assert_eq!(
            s.get(&key("", "namespaces", "a", "a"))
                .unwrap()
                .value()
                .unwrap()["metadata"]["resourceVersion"],
            "9"
        );
        s.remove("", "namespaces", "", "a");
        assert!(s.namespace_labels("a").is_none() && s.len() == 0);
    }
}
