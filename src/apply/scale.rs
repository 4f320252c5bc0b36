//! The `managedFields` of the `scale` subresource (upstream `managedfields.ScaleHandler`): the
//! parent's entries that own its replicas field, seen as owning `spec.replicas` of an
//! `autoscaling/v1` Scale ([`to_subresource`]), and the Scale's entries after an update folded
//! back into the parent's ([`to_parent`]).

use super::{ManagedFields, ManagedFieldsEntry, Path, PathElement, Set, sort_encoded};

/// The API version of every Scale the apiserver serves.
pub const SCALE_API_VERSION: &str = "autoscaling/v1";

/// Where a scalable kind keeps its replicas, per API version of a `managedFields` entry
/// (upstream's `ResourcePathMappings`); `None` for a version the kind's registry does not map.
pub type ReplicasPath = fn(&str) -> Option<Vec<PathElement>>;

/// `spec.replicas`.
pub fn spec_replicas() -> Vec<PathElement> {
    vec![PathElement::field("spec"), PathElement::field("replicas")]
}

/// The replicas path of the `apps` workloads (Deployment, StatefulSet, ReplicaSet) in every
/// version upstream maps.
pub fn apps_replicas(api_version: &str) -> Option<Vec<PathElement>> {
    matches!(
        api_version,
        "apps/v1" | "apps/v1beta1" | "apps/v1beta2" | "extensions/v1beta1"
    )
    .then(spec_replicas)
}

/// The replicas path of a ReplicationController.
pub fn core_replicas(api_version: &str) -> Option<Vec<PathElement>> {
    (api_version == "v1").then(spec_replicas)
}

/// `ToSubresource`: the Scale's entries, one per parent entry that owns the replicas.
pub fn to_subresource(parent: &ManagedFields, replicas: ReplicasPath) -> ManagedFields {
    let mut out: Vec<ManagedFieldsEntry> = parent
        .0
        .iter()
        .filter(|e| replicas(&e.api_version).is_some_and(|path| e.fields.has(&path)))
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
/// are dropped, a manager that lost the replicas keeps the rest of its fields, and a manager new
/// to the parent gets the replicas without a time (upstream takes its time from the parent's
/// entries, where it has none).
pub fn to_parent(
    parent: &ManagedFields,
    scale: &ManagedFields,
    parent_version: &str,
    replicas: ReplicasPath,
) -> ManagedFields {
    let mut scale_only: Vec<&ManagedFieldsEntry> = scale.0.iter().collect();
    let mut out = Vec::with_capacity(parent.0.len() + 1);
    for e in &parent.0 {
        let Some(path) = replicas(&e.api_version) else {
            continue;
        };
        if !e.fields.has(&path) {
            out.push(e.clone());
            continue;
        }
        let id = e.identifier();
        match scale_only.iter().position(|s| s.identifier() == id) {
            Some(i) => {
                scale_only.remove(i);
                out.push(e.clone());
            }
            None => {
                let rest = e.fields.difference(&Set::from_paths([Path(path)]));
                if !rest.is_empty() {
                    out.push(ManagedFieldsEntry {
                        fields: rest,
                        ..e.clone()
                    });
                }
            }
        }
    }
    let Some(path) = replicas(parent_version) else {
        sort_encoded(&mut out);
        return ManagedFields(out);
    };
    for s in scale_only {
        if !s.fields.has(&spec_replicas()) {
            continue;
        }
        out.push(ManagedFieldsEntry {
            api_version: parent_version.into(),
            fields: Set::from_paths([Path(path.clone())]),
            time: None,
            ..s.clone()
        });
    }
    sort_encoded(&mut out);
    ManagedFields(out)
}
