//! The `managedFields` of the `scale` subresource (upstream `managedfields.ScaleHandler`): the
//! parent's entries that own its replicas field, seen as owning `spec.replicas` of an
//! `autoscaling/v1` Scale ([`to_subresource`]), and the Scale's entries after an update folded
//! back into the parent's ([`to_parent`]).

use super::{ManagedFields, ManagedFieldsEntry, Path, PathElement, Set, sort_encoded};

/// The API version of every Scale the apiserver serves.
pub const SCALE_API_VERSION: &str = "autoscaling/v1";

/// `spec.replicas`.
pub fn spec_replicas() -> Vec<PathElement> {
    vec![PathElement::field("spec"), PathElement::field("replicas")]
}

/// Where a scalable kind keeps its replicas, per API version of a `managedFields` entry
/// (upstream's `ResourcePathMappings`): a version absent is one the registry does not map, a
/// version mapped to `None` has no scale subresource (a custom resource's version without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicasPaths(Vec<(String, Option<Vec<PathElement>>)>);

impl ReplicasPaths {
    /// The `apps` workloads (Deployment, StatefulSet, ReplicaSet) in every version upstream maps.
    pub fn apps() -> ReplicasPaths {
        let versions = [
            "apps/v1",
            "apps/v1beta1",
            "apps/v1beta2",
            "extensions/v1beta1",
        ];
        ReplicasPaths(
            versions
                .into_iter()
                .map(|v| (v.to_string(), Some(spec_replicas())))
                .collect(),
        )
    }

    /// A ReplicationController.
    pub fn core() -> ReplicasPaths {
        ReplicasPaths(vec![("v1".into(), Some(spec_replicas()))])
    }

    /// A custom resource of `group`: each version with the field names of its
    /// `specReplicasPath`, or `None` when the version has no scale subresource.
    pub fn custom<'a>(
        group: &str,
        versions: impl IntoIterator<Item = (&'a str, Option<Vec<&'a str>>)>,
    ) -> ReplicasPaths {
        ReplicasPaths(
            versions
                .into_iter()
                .map(|(version, fields)| {
                    let path = fields.map(|f| f.into_iter().map(PathElement::field).collect());
                    (format!("{group}/{version}"), path)
                })
                .collect(),
        )
    }

    /// The mapping of `api_version`: `None` when unknown, `Some(None)` when it has no replicas.
    pub fn get(&self, api_version: &str) -> Option<Option<&[PathElement]>> {
        self.0
            .iter()
            .find(|(v, _)| v == api_version)
            .map(|(_, path)| path.as_deref())
    }

    /// The replicas path of `api_version`, when it has one.
    fn path(&self, api_version: &str) -> Option<&[PathElement]> {
        self.get(api_version).flatten()
    }
}

/// `ToSubresource`: the Scale's entries, one per parent entry that owns the replicas.
pub fn to_subresource(parent: &ManagedFields, replicas: &ReplicasPaths) -> ManagedFields {
    let mut out: Vec<ManagedFieldsEntry> = parent
        .0
        .iter()
        .filter(|e| {
            replicas
                .path(&e.api_version)
                .is_some_and(|path| e.fields.has(path))
        })
        .map(|e| ManagedFieldsEntry {
            api_version: SCALE_API_VERSION.into(),
            fields: Set::from_paths([Path(spec_replicas())]),
            ..e.clone()
        })
        .collect();
    sort_encoded(&mut out);
    ManagedFields(out)
}

/// `ToParent`: the parent's entries after a Scale update whose entries are `scale`, the parent
/// being served at `parent_version`. As upstream: entries of versions the registry does not map
/// are dropped (those of a version without replicas kept), a manager that lost the replicas
/// keeps the rest of its fields, and a manager new to the parent gets the replicas without a
/// time (upstream takes its time from the parent's entries, where it has none).
pub fn to_parent(
    parent: &ManagedFields,
    scale: &ManagedFields,
    parent_version: &str,
    replicas: &ReplicasPaths,
) -> ManagedFields {
    let mut scale_only: Vec<&ManagedFieldsEntry> = scale.0.iter().collect();
    let mut out = Vec::with_capacity(parent.0.len() + 1);
    for e in &parent.0 {
        let Some(path) = replicas.get(&e.api_version) else {
            continue;
        };
        let Some(path) = path.filter(|path| e.fields.has(path)) else {
            out.push(e.clone());
            continue;
        };
        let id = e.identifier();
        match scale_only.iter().position(|s| s.identifier() == id) {
            Some(i) => {
                scale_only.remove(i);
                out.push(e.clone());
            }
            None => {
                let rest = e.fields.difference(&Set::from_paths([Path(path.to_vec())]));
                if !rest.is_empty() {
                    out.push(ManagedFieldsEntry {
                        fields: rest,
                        ..e.clone()
                    });
                }
            }
        }
    }
    let Some(path) = replicas.path(parent_version) else {
        sort_encoded(&mut out);
        return ManagedFields(out);
    };
    for s in scale_only {
        if !s.fields.has(&spec_replicas()) {
            continue;
        }
        out.push(ManagedFieldsEntry {
            api_version: parent_version.into(),
            fields: Set::from_paths([Path(path.to_vec())]),
            time: None,
            ..s.clone()
        });
    }
    sort_encoded(&mut out);
    ManagedFields(out)
}
