//! The admission request as the dispatcher sees it (upstream's `admission.Attributes`), and the
//! cluster state it may consult.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Object;
use crate::api::{GroupVersionKind, GroupVersionResource, Operation, UserInfo};

/// One admission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attributes {
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: Operation,
    /// Kind of the object in the request. Shared: the invocations of the request's webhooks
    /// refer to it, and a request copied (when a patch replaces its object) copies no names.
    pub kind: Arc<GroupVersionKind>,
    /// Resource requested (for subresources: the parent resource). Shared like `kind`.
    pub resource: Arc<GroupVersionResource>,
    /// Subresource, or empty.
    #[serde(default)]
    pub sub_resource: String,
    /// Namespace (for Namespace objects: their own name), empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// Object name (may be empty on CREATE with generateName).
    #[serde(default)]
    pub name: String,
    /// The new object (None for DELETE). Shared: the dispatch's trace and outcome refer to this
    /// allocation for as long as no patch changes the object.
    #[serde(default, with = "shared_option")]
    pub object: Option<Arc<Object>>,
    /// The stored object (None for CREATE and CONNECT). Shared like `object`.
    #[serde(default, with = "shared_option")]
    pub old_object: Option<Arc<Object>>,
    /// `?dryRun=All`.
    #[serde(default)]
    pub dry_run: bool,
    /// CreateOptions, UpdateOptions, DeleteOptions, or None for CONNECT. Shared: the requests of
    /// a capture with the same options refer to one allocation.
    #[serde(default, with = "shared_option")]
    pub options: Option<Arc<Value>>,
    /// The requesting user. Shared: the requests of one user refer to one allocation.
    #[serde(default, with = "shared")]
    pub user_info: Arc<UserInfo>,
}

impl Attributes {
    /// True when the request concerns a Namespace object (which is cluster-scoped even though
    /// the apiserver sets its namespace to its own name).
    pub fn is_namespace_resource(&self) -> bool {
        self.resource.group.is_empty()
            && self.resource.version == "v1"
            && self.resource.resource == "namespaces"
    }

    /// The value of the new object.
    pub fn object_value(&self) -> Option<&Value> {
        self.object.as_deref().map(Object::value)
    }

    /// The value of the stored object.
    pub fn old_object_value(&self) -> Option<&Value> {
        self.old_object.as_deref().map(Object::value)
    }
}

/// Serde for `Option<Arc<T>>` fields: the value itself, as for `Option<T>`.
pub(crate) mod shared_option {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(
        v: &Option<Arc<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        v.as_deref().serialize(s)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Arc<T>>, D::Error> {
        Ok(Option::<T>::deserialize(d)?.map(Arc::new))
    }
}

/// Serde for `Arc<T>` fields: the value itself.
pub(crate) mod shared {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(v: &Arc<T>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().serialize(s)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Arc<T>, D::Error> {
        T::deserialize(d).map(Arc::new)
    }
}

/// What a namespace lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceLookup<'a> {
    /// The namespace exists with these labels.
    Found(Cow<'a, BTreeMap<String, String>>),
    /// No such namespace (the informer and a live GET both said so).
    NotFound,
    /// The lookup failed for another reason.
    Error(String),
}

/// Where the dispatcher finds namespace labels. Implemented by plain maps for replay and tests,
/// and by a cluster cache in the live console.
pub trait NamespaceSource {
    /// Labels of namespace `name`.
    fn namespace(&self, name: &str) -> NamespaceLookup<'_>;

    /// The objects ValidatingAdmissionPolicies take as parameters, when this source knows any
    /// (the cluster state a request was captured in). Default: none.
    fn param_source(&self) -> Option<&dyn super::policy::ParamSource> {
        None
    }
}

/// Namespaces known by name. Unknown namespaces are reported as not found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces(pub BTreeMap<String, BTreeMap<String, String>>);

impl Namespaces {
    /// Adds (or replaces) a namespace.
    pub fn insert(&mut self, name: &str, labels: BTreeMap<String, String>) {
        self.0.insert(name.into(), labels);
    }
}

impl NamespaceSource for Namespaces {
    fn namespace(&self, name: &str) -> NamespaceLookup<'_> {
        match self.0.get(name) {
            Some(l) => NamespaceLookup::Found(Cow::Borrowed(l)),
            None => NamespaceLookup::NotFound,
        }
    }
}

/// A supply of AdmissionReview `request.uid`s. Upstream uses a fresh random UUIDv4 per call;
/// tests and reproducible replays supply deterministic ids.
pub trait IdSource {
    /// The next uid.
    fn next_uid(&mut self) -> String;
}

/// Deterministic uids `00000000-0000-4000-8000-000000000001`, `…0002`, ….
#[derive(Debug, Clone, Default)]
pub struct SequentialIds(pub u64);

impl SequentialIds {
    /// The `n`th uid of the sequence.
    pub fn nth(n: u64) -> String {
        format!("00000000-0000-4000-8000-{n:012x}")
    }
}

impl IdSource for SequentialIds {
    fn next_uid(&mut self) -> String {
        self.0 += 1;
        Self::nth(self.0)
    }
}
