//! The resource registry: kube-apiserver's `EquivalentResourceRegistry` (apimachinery
//! `pkg/runtime/mapper.go`) plus the scope of each resource, with the built-in resources of each
//! modelled release ([`ResourceRegistry::builtin`]) and user-supplied custom resources
//! ([`load_custom_resources`]).
//!
//! Semantics kept from upstream:
//! * every served `(resource, subresource)` is registered with its kind under an equivalence key
//!   (the etcd storage prefix for built-ins, `group/plural` for custom resources); resources under
//!   one key are equivalent and are returned in registration order, per subresource;
//! * the key is looked up by group and resource only (`keys[gvr.GroupResource()]`), so an
//!   unregistered version of a registered group/resource still yields the class;
//! * `KindFor` is by exact resource and subresource; an unknown pair has no kind.

mod crd;
mod data;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::KubeVersion;
use crate::api::meta::short_eq;
use crate::api::{GroupVersionKind, GroupVersionResource};

pub use crd::{
    CustomResourceSpec, CustomResourceVersion, RegistryError, ScalePaths, load_custom_resources,
};

/// One registered `(resource, subresource) → kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// The resource (the parent resource for a subresource).
    pub resource: GroupVersionResource,
    /// The subresource (`""` for the resource itself).
    pub subresource: String,
    /// Its kind; empty when registered without one (upstream `KindFor` then returns an empty kind).
    pub kind: GroupVersionKind,
    /// Whether the resource is namespaced (subresources share their parent's scope).
    pub namespaced: bool,
}

/// A small, fast, non-cryptographic hasher (the FxHash mixing step) for the lookup maps. Keys are
/// short API names; lookups are on the hot path of webhook matching.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxHasher(u64);

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
        // the length disambiguates zero padding of the last word
        self.add(bytes.len() as u64);
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// One equivalence class: its key and, per subresource, the equivalent resources in order.
#[derive(Debug, Clone, Default)]
struct Class {
    key: String,
    by_subresource: Vec<(String, Vec<GroupVersionResource>)>,
}

/// Everything registered for one group/resource.
#[derive(Debug, Clone)]
struct GroupResourceEntry {
    group: String,
    resource: String,
    /// The equivalence class lookups use (the last key registered for this group/resource).
    class: usize,
    /// Per version (registration order; the first is the preferred one), indices into `infos`.
    versions: Vec<(String, Vec<usize>)>,
}

/// An equivalent-resource registry with kinds and scopes.
///
/// Built once (per release or per test) and then only read; lookups hash the group and resource
/// once and never allocate, except [`kind_for`](Self::kind_for) and
/// [`preferred_version`](Self::preferred_version), which return owned values (use
/// [`kind_ref`](Self::kind_ref) / [`info`](Self::info) on hot paths).
#[derive(Debug, Clone, Default)]
pub struct ResourceRegistry {
    /// Registrations in order.
    infos: Vec<ResourceInfo>,
    classes: Vec<Class>,
    class_by_key: FxMap<String, usize>,
    entries: Vec<GroupResourceEntry>,
    /// `group_resource_hash` → indices into `entries` (more than one only on a hash collision).
    index: HashMap<u64, Vec<usize>, BuildHasherDefault<IdentityHasher>>,
    /// The release whose resources these are (the newest for a registry built by hand).
    release: KubeVersion,
    /// Custom resources: `group/plural` → the versions of their definition.
    custom: FxMap<String, Vec<CustomResourceVersion>>,
}

/// Hasher for keys that are already hashes.
#[derive(Debug, Clone, Copy, Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed with this; fold anything else in for safety.
        let mut fx = FxHasher(self.0);
        fx.write(bytes);
        self.0 = fx.0;
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[inline]
fn group_resource_hash(group: &str, resource: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(group.as_bytes());
    h.write(resource.as_bytes());
    h.finish()
}

impl ResourceRegistry {
    /// The resources kube-apiserver of release `version` serves with its default configuration
    /// (GA APIs and the beta APIs still enabled by default), in upstream registration order, each
    /// under its etcd-prefix equivalence key. Also includes `apiextensions.k8s.io/v1
    /// customresourcedefinitions` and `apiregistration.k8s.io/v1 apiservices`.
    pub fn builtin(version: KubeVersion) -> Self {
        let minor = version.minor();
        let mut reg = Self::empty();
        reg.release = version;
        for row in data::ROWS
            .iter()
            .filter(|r| r.since <= minor && minor <= r.until)
        {
            let special = data::storage_key(row.group, row.resource);
            let key = if special.is_empty() {
                row.resource
            } else {
                special
            };
            let gvr = GroupVersionResource::new(row.group, row.version, row.resource);
            let kind = GroupVersionKind::new(row.group, row.version, row.kind);
            reg.register(gvr.clone(), "", kind.clone(), row.namespaced, key);
            for sub in row.subs.iter().filter(|s| s.since <= minor) {
                let sub_kind = match sub.kind {
                    "" => kind.clone(),
                    k => match k.split_once(' ') {
                        Some((gv, kind)) => {
                            let (group, version) = gv.split_once('/').unwrap_or(("", gv));
                            GroupVersionKind::new(group, version, kind)
                        }
                        None => GroupVersionKind::new(row.group, row.version, k),
                    },
                };
                reg.register(gvr.clone(), sub.name, sub_kind, row.namespaced, key);
            }
        }
        reg
    }

    /// The release whose built-in resources the registry holds.
    pub fn release(&self) -> KubeVersion {
        self.release
    }

    /// A registry with nothing registered.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Registers `(resource, subresource) → kind` in the equivalence class `storage_key`, like
    /// upstream `RegisterKindFor` with a key function returning `storage_key`. An empty
    /// `storage_key` means upstream's default key, the group/resource (`deployments.apps`).
    ///
    /// As upstream: registration order is the order equivalents are returned in; registering a pair
    /// again replaces its kind (and scope) and appends the resource to the class again; the last key
    /// given for a group/resource is the one lookups use. An empty `kind` is allowed (then
    /// [`kind_for`](Self::kind_for) is `None`).
    pub fn register(
        &mut self,
        resource: GroupVersionResource,
        subresource: &str,
        kind: GroupVersionKind,
        namespaced: bool,
        storage_key: &str,
    ) {
        let key = if storage_key.is_empty() {
            resource.group_resource().to_string()
        } else {
            storage_key.to_string()
        };
        let class = match self.class_by_key.get(&key) {
            Some(&i) => i,
            None => {
                self.classes.push(Class {
                    key: key.clone(),
                    by_subresource: Vec::new(),
                });
                self.class_by_key.insert(key, self.classes.len() - 1);
                self.classes.len() - 1
            }
        };
        let subs = &mut self.classes[class].by_subresource;
        match subs.iter_mut().find(|(s, _)| s == subresource) {
            Some((_, list)) => list.push(resource.clone()),
            None => subs.push((subresource.to_string(), vec![resource.clone()])),
        }
        let entry = match self.entry_index(&resource.group, &resource.resource) {
            Some(e) => {
                self.entries[e].class = class;
                e
            }
            None => {
                let e = self.entries.len();
                self.entries.push(GroupResourceEntry {
                    group: resource.group.clone(),
                    resource: resource.resource.clone(),
                    class,
                    versions: Vec::new(),
                });
                let h = group_resource_hash(&resource.group, &resource.resource);
                self.index.entry(h).or_default().push(e);
                e
            }
        };
        let versions = &mut self.entries[entry].versions;
        let indices = match versions.iter().position(|(v, _)| *v == resource.version) {
            Some(i) => &mut versions[i].1,
            None => {
                versions.push((resource.version.clone(), Vec::new()));
                let last = versions.len() - 1;
                &mut versions[last].1
            }
        };
        if let Some(&i) = indices
            .iter()
            .find(|&&i| short_eq(&self.infos[i].subresource, subresource))
        {
            self.infos[i].kind = kind;
            self.infos[i].namespaced = namespaced;
            return;
        }
        indices.push(self.infos.len());
        self.infos.push(ResourceInfo {
            resource,
            subresource: subresource.to_string(),
            kind,
            namespaced,
        });
    }

    #[inline]
    fn entry_index(&self, group: &str, resource: &str) -> Option<usize> {
        self.index
            .get(&group_resource_hash(group, resource))?
            .iter()
            .copied()
            .find(|&e| {
                short_eq(&self.entries[e].group, group)
                    && short_eq(&self.entries[e].resource, resource)
            })
    }

    #[inline]
    fn entry(&self, group: &str, resource: &str) -> Option<&GroupResourceEntry> {
        self.entry_index(group, resource).map(|e| &self.entries[e])
    }

    /// Every resource equivalent to `resource` for `subresource` (itself included when it was
    /// registered), in registration order; empty if the group/resource is unknown or no equivalent
    /// serves that subresource. Upstream `EquivalentResourcesFor(resource, subresource)`: the
    /// version of `resource` is not consulted.
    pub fn equivalent_resources(
        &self,
        resource: &GroupVersionResource,
        subresource: &str,
    ) -> &[GroupVersionResource] {
        let Some(entry) = self.entry(&resource.group, &resource.resource) else {
            return &[];
        };
        self.classes[entry.class]
            .by_subresource
            .iter()
            .find(|(s, _)| s == subresource)
            .map_or(&[], |(_, list)| list.as_slice())
    }

    /// The equivalence key `resource` is registered under, if its group/resource is known.
    pub fn storage_key(&self, resource: &GroupVersionResource) -> Option<&str> {
        let entry = self.entry(&resource.group, &resource.resource)?;
        Some(self.classes[entry.class].key.as_str())
    }

    /// Upstream `KindFor(resource, subresource)`: the registered kind; `None` when the pair is
    /// unknown or was registered with an empty kind.
    pub fn kind_for(
        &self,
        resource: &GroupVersionResource,
        subresource: &str,
    ) -> Option<GroupVersionKind> {
        self.kind_ref(resource, subresource).cloned()
    }

    /// [`kind_for`](Self::kind_for) without cloning.
    pub fn kind_ref(
        &self,
        resource: &GroupVersionResource,
        subresource: &str,
    ) -> Option<&GroupVersionKind> {
        self.info(resource, subresource)
            .map(|i| &i.kind)
            .filter(|k| !k.is_empty())
    }

    /// The registration of `(resource, subresource)`: kind and scope.
    pub fn info(
        &self,
        resource: &GroupVersionResource,
        subresource: &str,
    ) -> Option<&ResourceInfo> {
        let entry = self.entry(&resource.group, &resource.resource)?;
        let (_, indices) = entry
            .versions
            .iter()
            .find(|(v, _)| *v == resource.version)?;
        indices
            .iter()
            .map(|&i| &self.infos[i])
            .find(|info| short_eq(&info.subresource, subresource))
    }

    /// Whether `(group, resource)` is namespaced, at its preferred version (for audit events that
    /// name no version).
    pub fn is_namespaced(&self, group: &str, resource: &str) -> Option<bool> {
        let entry = self.entry(group, resource)?;
        let (_, indices) = entry.versions.first()?;
        indices.first().map(|&i| self.infos[i].namespaced)
    }

    /// The preferred version of `group`/`resource` (the first version registered: built-ins are
    /// registered in the scheme's version priority order, so this is the group's preferred
    /// version where it serves the resource). For audit `objectRef`s without `apiVersion`.
    pub fn preferred_version(&self, group: &str, resource: &str) -> Option<GroupVersionResource> {
        let entry = self.entry(group, resource)?;
        let (_, indices) = entry.versions.first()?;
        indices.first().map(|&i| self.infos[i].resource.clone())
    }

    /// Registers a custom resource the way apiextensions-apiserver does: for each version in
    /// order, the resource (kind `group/version, Kind=kind`), then each subresource (`status` with
    /// the same kind, `scale` with `autoscaling/v1, Kind=Scale`; any other name with the custom
    /// kind), all under one key (`group/plural`), so all listed versions are equivalent.
    pub fn register_custom_resource(
        &mut self,
        group: &str,
        versions: &[&str],
        plural: &str,
        kind: &str,
        namespaced: bool,
        subresources: &[&str],
    ) {
        let key = format!("{group}/{plural}");
        for version in versions {
            let gvr = GroupVersionResource::new(group, version, plural);
            let gvk = GroupVersionKind::new(group, version, kind);
            self.register(gvr.clone(), "", gvk.clone(), namespaced, &key);
            for sub in subresources {
                let sub_kind = if *sub == "scale" {
                    GroupVersionKind::new("autoscaling", "v1", "Scale")
                } else {
                    gvk.clone()
                };
                self.register(gvr.clone(), sub, sub_kind, namespaced, &key);
            }
        }
    }

    /// Registers a loaded [`CustomResourceSpec`] (every version, with its own subresources, in
    /// definition order; upstream registers unserved versions too).
    pub fn add_custom_resource(&mut self, spec: &CustomResourceSpec) {
        let key = format!("{}/{}", spec.group, spec.plural);
        for v in &spec.versions {
            let gvr = GroupVersionResource::new(&spec.group, &v.name, &spec.plural);
            let gvk = GroupVersionKind::new(&spec.group, &v.name, &spec.kind);
            self.register(gvr.clone(), "", gvk.clone(), spec.namespaced, &key);
            if v.status {
                self.register(gvr.clone(), "status", gvk, spec.namespaced, &key);
            }
            if v.scale.is_some() {
                let scale = GroupVersionKind::new("autoscaling", "v1", "Scale");
                self.register(gvr, "scale", scale, spec.namespaced, &key);
            }
        }
        self.custom.insert(key, spec.versions.clone());
    }

    /// The versions of a custom resource (`group`, `plural`) as its definition gives them;
    /// `None` for a resource no definition added.
    pub fn custom_resource(&self, group: &str, resource: &str) -> Option<&[CustomResourceVersion]> {
        if self.custom.is_empty() {
            return None;
        }
        self.custom
            .get(&format!("{group}/{resource}"))
            .map(Vec::as_slice)
    }

    /// The structural schema (`openAPIV3Schema`) of the custom resource `resource` at its
    /// version, from its definition; None for built-in resources and definitions without one.
    pub fn custom_resource_schema(
        &self,
        resource: &crate::api::GroupVersionResource,
    ) -> Option<std::sync::Arc<serde_json::Value>> {
        self.custom_resource(&resource.group, &resource.resource)?
            .iter()
            .find(|v| v.name == resource.version)?
            .schema
            .clone()
    }

    /// Every registration, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.infos.iter()
    }

    /// Number of `(resource, subresource)` registrations.
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvr(g: &str, v: &str, r: &str) -> GroupVersionResource {
        GroupVersionResource::new(g, v, r)
    }

    #[test]
    fn builtin_rows_are_unique_and_well_formed() {
        for minor in 28..=37 {
            let reg = ResourceRegistry::builtin(KubeVersion::new(minor).expect("modelled"));
            let mut seen = std::collections::HashSet::new();
            for info in reg.iter() {
                assert!(
                    seen.insert((info.resource.clone(), info.subresource.clone())),
                    "duplicate {} {} in 1.{minor}",
                    info.resource,
                    info.subresource
                );
                assert!(!info.kind.kind.is_empty());
                assert!(!info.kind.version.is_empty());
                // a subresource always has a registered parent with the same scope
                let parent = reg.info(&info.resource, "").expect("parent registered");
                assert_eq!(parent.namespaced, info.namespaced);
            }
        }
    }

    #[test]
    fn equivalents_ignore_the_version_like_upstream() {
        let reg = ResourceRegistry::builtin(KubeVersion::NEWEST);
        // apps/v1beta2 is not served, but upstream keys classes by group/resource only.
        let list = reg.equivalent_resources(&gvr("apps", "v1beta2", "deployments"), "");
        assert_eq!(list, &[gvr("apps", "v1", "deployments")]);
        assert!(
            reg.info(&gvr("apps", "v1beta2", "deployments"), "")
                .is_none()
        );
    }

    #[test]
    fn reregistration_replaces_kind_and_appends() {
        let mut reg = ResourceRegistry::empty();
        let r = gvr("g", "v1", "things");
        reg.register(
            r.clone(),
            "",
            GroupVersionKind::new("g", "v1", "A"),
            true,
            "k",
        );
        reg.register(
            r.clone(),
            "",
            GroupVersionKind::new("g", "v1", "B"),
            false,
            "k",
        );
        assert_eq!(reg.kind_ref(&r, "").map(|k| k.kind.as_str()), Some("B"));
        assert_eq!(reg.info(&r, "").map(|i| i.namespaced), Some(false));
        assert_eq!(reg.equivalent_resources(&r, "").len(), 2);
        assert_eq!(reg.len(), 1);
    }

    #[test]
    fn default_key_is_group_resource() {
        let mut reg = ResourceRegistry::empty();
        reg.register(
            gvr("g", "v1", "things"),
            "",
            GroupVersionKind::default(),
            true,
            "",
        );
        assert_eq!(reg.storage_key(&gvr("g", "v9", "things")), Some("things.g"));
        assert_eq!(reg.kind_for(&gvr("g", "v1", "things"), ""), None);
    }

    #[test]
    fn fx_hasher_distinguishes_lengths() {
        use std::hash::Hash;
        let h = |s: &str| {
            let mut x = FxHasher::default();
            s.hash(&mut x);
            x.finish()
        };
        assert_ne!(h("a"), h("a\0"));
        assert_ne!(h("pods"), h("nodes"));
    }
}
