//! What the namespace watcher has seen: each namespace's labels, which is what the apiserver's
//! namespace selectors read.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::replay::{CapturedRequest, NamespaceState};

/// Labels by namespace name.
pub type NamespaceLabels = BTreeMap<String, Arc<BTreeMap<String, String>>>;

/// The namespaces of the cluster as last listed and watched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamespaceSet {
    /// Every namespace's labels.
    pub labels: Arc<NamespaceLabels>,
    /// Whether the watcher has completed its first list.
    pub synced: bool,
}

/// The namespaces known, and a list in progress.
#[derive(Debug, Default)]
pub(crate) struct NamespaceStore {
    labels: NamespaceLabels,
    relisting: Option<NamespaceLabels>,
    synced: bool,
}

fn name_and_labels(object: &Value) -> (String, Arc<BTreeMap<String, String>>) {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let labels = object["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    (name, Arc::new(labels))
}

impl super::Listed for NamespaceStore {
    /// A list starts (again).
    fn begin_list(&mut self) {
        self.relisting = Some(NamespaceLabels::new());
    }

    /// One namespace of the list in progress.
    fn listed(&mut self, object: &Value) {
        let (name, labels) = name_and_labels(object);
        self.relisting
            .get_or_insert_with(NamespaceLabels::new)
            .insert(name, labels);
    }

    /// The list is complete; true when anything differs from what was known.
    fn end_list(&mut self) -> bool {
        let listed = self.relisting.take().unwrap_or_default();
        let changed = !self.synced || listed != self.labels;
        self.labels = listed;
        self.synced = true;
        changed
    }

    /// A namespace was added or modified; true when its labels changed.
    fn applied(&mut self, object: &Value) -> bool {
        let (name, labels) = name_and_labels(object);
        self.labels.insert(name, labels.clone()) != Some(labels)
    }

    /// A namespace was deleted; true when it was known.
    fn deleted(&mut self, object: &Value) -> bool {
        let (name, _) = name_and_labels(object);
        self.labels.remove(&name).is_some()
    }
}

impl NamespaceStore {
    /// The namespaces as the console's replays take them.
    pub(crate) fn set(&self) -> NamespaceSet {
        NamespaceSet {
            labels: Arc::new(self.labels.clone()),
            synced: self.synced,
        }
    }
}

/// The cluster's namespaces as a replay reads them: the latest list, or why there is none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterNamespaces {
    /// The namespaces as last listed and watched (None before the first complete list).
    pub listed: Option<Arc<NamespaceLabels>>,
    /// Why the namespaces could not be listed, when the latest attempt failed (a 403 names the
    /// permission).
    pub failure: Option<String>,
}

impl ClusterNamespaces {
    /// Takes in a namespace set from the watcher.
    pub fn listed(&mut self, set: &NamespaceSet) {
        if set.synced {
            self.listed = Some(Arc::clone(&set.labels));
            self.failure = None;
        }
    }

    /// Gives `request` the labels its namespace has in the cluster, so that namespace selectors
    /// decide as the apiserver did. When the cluster's labels are not known (the list is
    /// forbidden or not done yet, or the namespace is not in it), the request keeps the labels
    /// learned from the input (else none) and, should a namespace selector read them, its replay
    /// says why they may not be the cluster's.
    pub fn resolve(&self, request: &mut CapturedRequest) {
        let learned = match &request.namespace {
            NamespaceState::NotApplicable => return,
            NamespaceState::Known(labels) => Some(Arc::clone(labels)),
            NamespaceState::Unconfirmed { labels, .. } => Some(Arc::clone(labels)),
            NamespaceState::Unknown => None,
        };
        let name = request.attrs.namespace.as_str();
        if name.is_empty() {
            return;
        }
        let gap = match (&self.listed, &self.failure) {
            (Some(all), _) => match all.get(name) {
                Some(labels) => {
                    request.namespace = NamespaceState::Known(Arc::clone(labels));
                    return;
                }
                None => format!(
                    "namespace {name:?} is not among the cluster's namespaces (deleted since?)"
                ),
            },
            (None, Some(failure)) => format!("the cluster's namespaces cannot be read: {failure}"),
            (None, None) => "the cluster's namespaces are not listed yet".to_string(),
        };
        let taken = if learned.is_some() {
            "as the audit stream last showed them"
        } else {
            "as empty"
        };
        let why = format!(
            "{gap}; the labels of namespace {name:?} were taken {taken}, and the apiserver's namespace selectors read the cluster's"
        );
        request.namespace = NamespaceState::Unconfirmed {
            labels: learned.unwrap_or_default(),
            why: why.into(),
        };
    }
}
